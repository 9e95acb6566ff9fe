//! `gpusvc_sync_*`: sync tokens, order numbers and deadlock-free waits between GPU streams
//! (the `sync-points` crate) seen from C.
//!
//! A `gpusvc_sync_manager` may be used from any thread at once. Sequences are named by the
//! `uint64_t` id `gpusvc_sync_sequence_create` gives; clients (command buffers) by their
//! `(namespace_id, command_buffer_id)` pair. Wait callbacks run exactly once each, with no gpusvc
//! lock held, on the thread that ends the wait: the one releasing, finishing or beginning an order
//! number, destroying the releaser — or freeing the manager (its last user: a scheduler made over
//! it holds it until the scheduler is freed), which ends every wait still pending.
//! A callback may call back into the library. Callbacks that a callback triggers (it releases,
//! finishes, destroys, ...) run after it returns, not inside it: the thread queues them and its
//! outermost call runs them, first in, first out, before returning — so chains of releases made
//! from callbacks take constant stack (see `sync-points`' guarantees).

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sync_points::{
    ClientError, ClientId, OrderData, OrderError, ReleaseError, ReleaseOutcome, SequenceId,
    SyncPointManager, SyncToken,
};

use crate::kit::handle::{self, Kind};
use crate::kit::{
    FfiError, Out, UserData, ffi_guard, gpusvc_result, invalid_argument, list_out, null_argument,
};

/// An opaque sync manager. Thread-safe: any thread may use it, and free it once no other thread
/// is still calling with it (a call in flight finishes on a live manager either way).
#[derive(Debug)]
pub struct gpusvc_sync_manager {
    _opaque: [u8; 0],
}

/// A release to wait for: command buffer `(namespace_id, command_buffer_id)` releasing
/// `release_count`. A token with `release_count` 0 names nothing and is always released.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct gpusvc_sync_token {
    /// Namespace of the releasing command buffer.
    pub namespace_id: i8,
    /// The releasing command buffer.
    pub command_buffer_id: u64,
    /// The release count to reach.
    pub release_count: u64,
    /// Whether the producer verified (flushed) the token.
    pub verified: bool,
}

impl From<SyncToken> for gpusvc_sync_token {
    fn from(t: SyncToken) -> Self {
        gpusvc_sync_token {
            namespace_id: t.namespace,
            command_buffer_id: t.command_buffer_id,
            release_count: t.release_count,
            verified: t.verified,
        }
    }
}

/// Called once when a wait ends, with the `user_data` given to `gpusvc_sync_token_wait`.
pub type gpusvc_sync_callback = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// Reads one token field by field; the `verified` byte is read as a byte, so a value other than
/// 0 or 1 from C is `true`, not undefined behaviour.
///
/// # Safety
/// `ptr` is non-NULL and valid for reading one `gpusvc_sync_token`.
pub(crate) unsafe fn read_token(ptr: *const gpusvc_sync_token) -> SyncToken {
    // SAFETY: `ptr` is valid for one token (contract); every field read is in bounds, reads are
    // unaligned-safe, and the integer fields accept any bit pattern.
    unsafe {
        SyncToken {
            namespace: std::ptr::addr_of!((*ptr).namespace_id).read_unaligned(),
            command_buffer_id: std::ptr::addr_of!((*ptr).command_buffer_id).read_unaligned(),
            release_count: std::ptr::addr_of!((*ptr).release_count).read_unaligned(),
            verified: std::ptr::addr_of!((*ptr).verified)
                .cast::<u8>()
                .read_unaligned()
                != 0,
        }
    }
}

/// A token argument.
///
/// # Safety
/// `ptr` is NULL or valid for reading one `gpusvc_sync_token`.
unsafe fn token_in(ptr: *const gpusvc_sync_token, name: &str) -> Result<SyncToken, FfiError> {
    if ptr.is_null() {
        return Err(null_argument(name));
    }
    // SAFETY: non-null (checked) and valid (contract).
    Ok(unsafe { read_token(ptr) })
}

/// The `sync-points` manager behind a sync manager handle (the scheduler shares it).
pub(crate) fn manager(m: *const gpusvc_sync_manager) -> Result<Arc<SyncPointManager>, FfiError> {
    handle::shared(m, "manager", Kind::SyncManager)
}

fn unknown_sequence(id: u64) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_SYNC_UNKNOWN_SEQUENCE,
        format!("sync sequence {id} does not exist (destroyed or never created)"),
    )
}

fn unknown_client(id: ClientId) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_SYNC_UNKNOWN_CLIENT,
        format!(
            "sync client (namespace {}, command buffer {}) does not exist",
            id.namespace, id.command_buffer_id
        ),
    )
}

fn sequence(m: &SyncPointManager, id: u64) -> Result<Arc<OrderData>, FfiError> {
    m.sequence(SequenceId(id))
        .ok_or_else(|| unknown_sequence(id))
}

/// An order error; its message names the sequence ("sequence N: ...").
pub(crate) fn order_error(e: OrderError) -> FfiError {
    match e {
        OrderError::Destroyed { sequence } => unknown_sequence(sequence.0),
        e => FfiError::new(
            gpusvc_result::GPUSVC_SYNC_ORDER_VIOLATION,
            format!("sync {e}"),
        ),
    }
}

pub(crate) fn client_error(e: ClientError) -> FfiError {
    match e {
        ClientError::Exists(id) => FfiError::new(
            gpusvc_result::GPUSVC_SYNC_CLIENT_EXISTS,
            format!(
                "sync client (namespace {}, command buffer {}) exists",
                id.namespace, id.command_buffer_id
            ),
        ),
        ClientError::UnknownSequence(s) => unknown_sequence(s.0),
        ClientError::UnknownClient(id) => unknown_client(id),
        ClientError::Release(ReleaseError::NotProcessing) => FfiError::new(
            gpusvc_result::GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING,
            ReleaseError::NotProcessing.to_string(),
        ),
        ClientError::Release(ReleaseError::Destroyed) => FfiError::new(
            gpusvc_result::GPUSVC_SYNC_UNKNOWN_CLIENT,
            ReleaseError::Destroyed.to_string(),
        ),
    }
}

pub(crate) fn client_id(namespace_id: i8, command_buffer_id: u64) -> ClientId {
    ClientId {
        namespace: namespace_id,
        command_buffer_id,
    }
}

/// The host's wait callback. It runs at most once: when the wait ends, or, once the wait was
/// registered (`armed`), when it is dropped without ending (the manager was freed). A refused
/// wait drops it unarmed: the callback never runs.
/// The callback and its user data may be called from any thread (the one that ends the wait:
/// `gpusvc_sync_token_wait`'s contract).
struct HostCallback {
    callback: Option<unsafe extern "C" fn(*mut c_void)>,
    user_data: UserData,
    armed: Arc<AtomicBool>,
}

impl HostCallback {
    fn fire(&mut self) {
        if let Some(f) = self.callback.take() {
            // SAFETY: a host function taking its own user_data, called once (contract of
            // `gpusvc_sync_token_wait`).
            unsafe { f(self.user_data.get()) }
        }
    }
}

impl Drop for HostCallback {
    fn drop(&mut self) {
        // Acquire pairs with the Release in `gpusvc_sync_token_wait`, which arms it before the
        // call returns (and so before the manager can be freed).
        if self.armed.load(Ordering::Acquire) {
            self.fire();
        }
    }
}

// ---- manager ----

/// Creates a sync manager into `*out`; order numbers start at 1.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_manager_new(
    out: *mut *mut gpusvc_sync_manager,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let h = handle::new_shared(Kind::SyncManager, SyncPointManager::new());
        out.write(h);
        Ok(())
    })
}

/// Frees a sync manager; NULL is a no-op. Every wait still pending ends: its callback runs (on
/// this thread, or on the thread of a call still in flight with the manager, when it returns).
/// A scheduler made over this manager keeps using it: then the manager, and the waits still
/// pending, end when that scheduler is freed.
///
/// # Safety
/// `manager` is NULL or a handle value (a freed or foreign one is `GPUSVC_INVALID_HANDLE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_manager_free(
    manager: *mut gpusvc_sync_manager,
) -> gpusvc_result {
    ffi_guard(|| handle::free(manager, Kind::SyncManager))
}

// ---- sequences ----

/// Creates a sequence (a stream of command buffers run in order); its id into `*out_sequence`.
///
/// # Safety
/// `out_sequence` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_sequence_create(
    manager: *const gpusvc_sync_manager,
    out_sequence: *mut u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_sequence, "out_sequence") }?;
        out.write(m.create_sequence().id().0);
        Ok(())
    })
}

/// Destroys a sequence: every wait fenced on it ends (its callback runs).
/// `GPUSVC_SYNC_UNKNOWN_SEQUENCE` when there is no such sequence (already destroyed included).
///
/// # Safety
/// No pointer is dereferenced but the handle, which is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_sequence_destroy(
    manager: *const gpusvc_sync_manager,
    sequence: u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        if m.destroy_sequence(SequenceId(sequence)) {
            Ok(())
        } else {
            Err(unknown_sequence(sequence))
        }
    })
}

/// Takes the next order number of the manager's global counter and queues it as unprocessed on
/// `sequence`; the number into `*out_order_num`.
///
/// # Safety
/// `out_order_num` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_sequence_generate(
    manager: *const gpusvc_sync_manager,
    sequence: u64,
    out_order_num: *mut u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_order_num, "out_order_num") }?;
        let s = self::sequence(&m, sequence)?;
        let n = s.generate().map_err(order_error)?;
        out.write(n);
        Ok(())
    })
}

/// Begins processing `order_num` on `sequence`, or resumes it after a pause. Waits fenced before
/// it end. `GPUSVC_SYNC_ORDER_VIOLATION` when the number is 0, not pending here, not after the
/// processed one, or another number is being processed.
///
/// # Safety
/// No pointer is dereferenced but the handle, which is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_sequence_begin(
    manager: *const gpusvc_sync_manager,
    sequence: u64,
    order_num: u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let s = self::sequence(&m, sequence)?;
        s.begin_processing(order_num).map_err(order_error)
    })
}

/// Pauses the number being processed on `sequence`; `GPUSVC_SYNC_ORDER_VIOLATION` when none is.
///
/// # Safety
/// No pointer is dereferenced but the handle, which is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_sequence_pause(
    manager: *const gpusvc_sync_manager,
    sequence: u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let s = self::sequence(&m, sequence)?;
        s.pause_processing().map_err(order_error)
    })
}

/// Finishes `order_num`, which must be the front of the queue and being processed (else
/// `GPUSVC_SYNC_ORDER_VIOLATION`). Waits fenced before the sequence's next unprocessed number (all
/// of them, when none is left) end without a release: a wait at 3 on a sequence with numbers 1
/// and 4 ends when 1 is finished.
///
/// # Safety
/// No pointer is dereferenced but the handle, which is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_sequence_finish(
    manager: *const gpusvc_sync_manager,
    sequence: u64,
    order_num: u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let s = self::sequence(&m, sequence)?;
        s.finish_processing(order_num).map_err(order_error)
    })
}

/// The last processed order number of `sequence` (0 before any) into `*out_order_num`.
///
/// # Safety
/// `out_order_num` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_sequence_processed(
    manager: *const gpusvc_sync_manager,
    sequence: u64,
    out_order_num: *mut u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_order_num, "out_order_num") }?;
        let n = self::sequence(&m, sequence)?.processed();
        out.write(n);
        Ok(())
    })
}

/// Whether `sequence` is processing a number (begun and not paused) into `*out_processing`.
///
/// # Safety
/// `out_processing` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_sequence_is_processing(
    manager: *const gpusvc_sync_manager,
    sequence: u64,
    out_processing: *mut bool,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_processing, "out_processing") }?;
        let p = self::sequence(&m, sequence)?.is_processing();
        out.write(p);
        Ok(())
    })
}

/// The unprocessed order numbers of `sequence`, front first, into `buf`; `*out_count` receives
/// how many there are. With `buf` NULL and `len` 0 this only counts; otherwise `len` must be at
/// least the count (else `GPUSVC_INSUFFICIENT_SIZE`, nothing written).
///
/// # Safety
/// `buf` is NULL or valid for `len` writes; `out_count` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_sequence_unprocessed(
    manager: *const gpusvc_sync_manager,
    sequence: u64,
    buf: *mut u64,
    len: usize,
    out_count: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let list = self::sequence(&m, sequence)?.unprocessed();
        // SAFETY: forwarded from this function's contract.
        unsafe { list_out(&list, buf, len, out_count, "order numbers") }
    })
}

// ---- clients ----

/// Creates the client (command buffer) `(namespace_id, command_buffer_id)` bound to `sequence`.
/// `GPUSVC_SYNC_CLIENT_EXISTS` when it exists, `GPUSVC_SYNC_UNKNOWN_SEQUENCE` when the sequence
/// does not.
///
/// # Safety
/// No pointer is dereferenced but the handle, which is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_client_create(
    manager: *const gpusvc_sync_manager,
    namespace_id: i8,
    command_buffer_id: u64,
    sequence: u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let id = client_id(namespace_id, command_buffer_id);
        m.create_client(id, SequenceId(sequence))
            .map_err(client_error)?;
        Ok(())
    })
}

/// Destroys a client: its pending waits end (their callbacks run) and its tokens read as
/// released from now on. `GPUSVC_SYNC_UNKNOWN_CLIENT` when there is no such client.
///
/// # Safety
/// No pointer is dereferenced but the handle, which is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_client_destroy(
    manager: *const gpusvc_sync_manager,
    namespace_id: i8,
    command_buffer_id: u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let id = client_id(namespace_id, command_buffer_id);
        if m.destroy_client(id) {
            Ok(())
        } else {
            Err(unknown_client(id))
        }
    })
}

/// Releases `release_count` on a client; only while its sequence is processing (else
/// `GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING`). Every wait for a count up to it ends, its callback
/// running on this thread (in the order the waits were registered) before the call returns — or,
/// when this is called from inside a wait callback, queued to run on this thread once that
/// callback returns. `*out_released` is true when the count advanced, false when it was not
/// above the released one (ignored: nothing happened); `*out_callbacks` receives how many
/// callbacks ran (or were queued).
///
/// # Safety
/// `out_released` and `out_callbacks` are NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_client_release(
    manager: *const gpusvc_sync_manager,
    namespace_id: i8,
    command_buffer_id: u64,
    release_count: u64,
    out_released: *mut bool,
    out_callbacks: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        // SAFETY: an output argument (this function's contract).
        let out_released = unsafe { Out::new(out_released, "out_released") }?;
        // SAFETY: an output argument (this function's contract).
        let out_callbacks = unsafe { Out::new(out_callbacks, "out_callbacks") }?;
        let outcome = m
            .release(client_id(namespace_id, command_buffer_id), release_count)
            .map_err(client_error)?;
        let (released, callbacks) = match outcome {
            ReleaseOutcome::Released { callbacks } => (true, callbacks),
            ReleaseOutcome::Ignored { .. } => (false, 0),
        };
        out_released.write(released);
        out_callbacks.write(callbacks);
        Ok(())
    })
}

// ---- tokens ----

/// Whether `token` reads as released into `*out_released`: its client is unknown (destroyed or
/// never created) or has released at least the token's count.
///
/// # Safety
/// `token` is NULL or valid for one read; `out_released` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_token_is_released(
    manager: *const gpusvc_sync_manager,
    token: *const gpusvc_sync_token,
    out_released: *mut bool,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        // SAFETY: forwarded from this function's contract.
        let token = unsafe { token_in(token, "token") }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_released, "out_released") }?;
        let released = m.is_released(&token);
        out.write(released);
        Ok(())
    })
}

/// Makes `callback(user_data)` run once when `token` is released — or when the wait is retired
/// because it could never be satisfied in order (the releaser finished a number and its next
/// unprocessed one is past the wait's fence, without releasing; the token stays unreleased), or
/// the releaser is destroyed, or the manager freed. `waiting_sequence` (which must exist, else
/// `GPUSVC_SYNC_UNKNOWN_SEQUENCE`) waits at `wait_order_num`.
///
/// `*out_registered` is false — and the callback never runs — when the token already reads as
/// released, `waiting_sequence` is the releaser's own, `wait_order_num` is 0, or the releaser has
/// no unprocessed number before `wait_order_num`.
///
/// # Safety
/// `token` is NULL or valid for one read; `out_registered` is NULL or valid for one write;
/// `callback` may be called with `user_data` once, from any thread, with no gpusvc lock held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_token_wait(
    manager: *const gpusvc_sync_manager,
    token: *const gpusvc_sync_token,
    waiting_sequence: u64,
    wait_order_num: u64,
    callback: gpusvc_sync_callback,
    user_data: *mut c_void,
    out_registered: *mut bool,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        // SAFETY: forwarded from this function's contract.
        let token = unsafe { token_in(token, "token") }?;
        let callback = callback.ok_or_else(|| null_argument("callback"))?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_registered, "out_registered") }?;
        self::sequence(&m, waiting_sequence)?;
        let armed = Arc::new(AtomicBool::new(false));
        let mut host = HostCallback {
            callback: Some(callback),
            user_data: UserData::new(user_data),
            armed: armed.clone(),
        };
        let registered = m.wait(&token, SequenceId(waiting_sequence), wait_order_num, {
            move || host.fire()
        });
        if registered {
            // This call holds the manager, so the wait cannot be dropped unrun before this.
            armed.store(true, Ordering::Release);
        }
        out.write(registered);
        Ok(())
    })
}

/// Blocks this thread until `token` reads as released, at most `timeout_ms` milliseconds;
/// whether it is released into `*out_released`. Not for a sequence's own thread (it has no
/// order fence): a release that never comes is only ended by the timeout. Not from inside a
/// sync-points callback either, when the release would come from a callback queued on the same
/// thread: callbacks a callback triggers run only after it returns, so such a wait lasts its
/// whole timeout (and so does driving the scheduler from a callback: the streams it would
/// unblock stay blocked until the callback returns).
///
/// # Safety
/// `token` is NULL or valid for one read; `out_released` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_token_wait_blocking(
    manager: *const gpusvc_sync_manager,
    token: *const gpusvc_sync_token,
    timeout_ms: u64,
    out_released: *mut bool,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        // SAFETY: forwarded from this function's contract.
        let token = unsafe { token_in(token, "token") }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_released, "out_released") }?;
        let released = m.wait_blocking(&token, Duration::from_millis(timeout_ms));
        out.write(released);
        Ok(())
    })
}

/// Keeps, per `(namespace_id, command_buffer_id)`, only the token with the highest release count
/// (a verified one wins a tie), dropping tokens with count 0; the result is sorted. `tokens` may
/// be NULL when `count` is 0. The result goes to `out` with the count-query pattern: `*out_count`
/// receives how many; with `out` NULL and `len` 0 this only counts; otherwise `len` must be at
/// least the count (else `GPUSVC_INSUFFICIENT_SIZE`, nothing written).
///
/// # Safety
/// `tokens` is NULL or valid for `count` reads; `out` is NULL or valid for `len` writes;
/// `out_count` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_sync_token_reduce(
    tokens: *const gpusvc_sync_token,
    count: usize,
    out: *mut gpusvc_sync_token,
    len: usize,
    out_count: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        if count > 0 && tokens.is_null() {
            return Err(null_argument("tokens"));
        }
        if count > isize::MAX as usize / size_of::<gpusvc_sync_token>() {
            return Err(invalid_argument(format!(
                "`tokens` count {count} is absurd"
            )));
        }
        let input: Vec<SyncToken> = (0..count)
            // SAFETY: `tokens` is non-null and valid for `count` reads (contract); `i < count`.
            .map(|i| unsafe { read_token(tokens.add(i)) })
            .collect();
        let reduced: Vec<gpusvc_sync_token> = sync_points::reduce(&input)
            .into_iter()
            .map(gpusvc_sync_token::from)
            .collect();
        // SAFETY: forwarded from this function's contract.
        unsafe { list_out(&reduced, out, len, out_count, "tokens") }
    })
}
