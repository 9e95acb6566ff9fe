//! The `gpusvc_sync_*` functions: the manager, sequences and their order numbers, clients and
//! their releases, tokens and waits.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::Duration;

use sync_points::{OrderData, OrderError, ReleaseOutcome, SequenceId, SyncPointManager, SyncToken};

use crate::kit::handle::{self, Kind};
use crate::kit::{FfiError, Out, answer_into, ffi_guard, gpusvc_result, list_out};
use crate::sync::types::*;
use crate::sync::{gpusvc_sync_manager, manager};

fn sequence(m: &SyncPointManager, id: u64) -> Result<Arc<OrderData>, FfiError> {
    m.sequence(SequenceId(id))
        .ok_or_else(|| unknown_sequence(id))
}

/// The body of an export that moves `sequence` of `manager` through its order numbers.
fn on_sequence(
    manager: *const gpusvc_sync_manager,
    sequence: u64,
    f: impl FnOnce(&OrderData) -> Result<(), OrderError>,
) -> gpusvc_result {
    ffi_guard(|| f(&*self::sequence(&*self::manager(manager)?, sequence)?).map_err(order_error))
}

/// The body of an export that answers about `sequence` through `out`: the handle is checked,
/// then `out`, then the sequence; the answer is written only on success.
///
/// # Safety
/// `out` is NULL or valid for one write.
unsafe fn sequence_query<T>(
    manager: *const gpusvc_sync_manager,
    sequence: u64,
    out: *mut T,
    out_name: &str,
    answer: impl FnOnce(&OrderData) -> Result<T, OrderError>,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || self::manager(manager),
            out,
            out_name,
            |m| answer(&*self::sequence(&m, sequence)?).map_err(order_error),
        )
    }
}

/// [`sequence_query`] with an answer that cannot fail.
///
/// # Safety
/// `out` is NULL or valid for one write.
unsafe fn sequence_value<T>(
    manager: *const gpusvc_sync_manager,
    sequence: u64,
    out: *mut T,
    out_name: &str,
    read: fn(&OrderData) -> T,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { sequence_query(manager, sequence, out, out_name, |s| Ok(read(s))) }
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
        out.write(handle::new_shared(
            Kind::SyncManager,
            SyncPointManager::new(),
        ));
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
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || self::manager(manager),
            out_sequence,
            "out_sequence",
            |m| Ok(m.create_sequence().id().0),
        )
    }
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
        if self::manager(manager)?.destroy_sequence(SequenceId(sequence)) {
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
    // SAFETY: forwarded from this function's contract.
    unsafe {
        sequence_query(
            manager,
            sequence,
            out_order_num,
            "out_order_num",
            OrderData::generate,
        )
    }
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
    on_sequence(manager, sequence, |s| s.begin_processing(order_num))
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
    on_sequence(manager, sequence, OrderData::pause_processing)
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
    on_sequence(manager, sequence, |s| s.finish_processing(order_num))
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
    // SAFETY: forwarded from this function's contract.
    unsafe {
        sequence_value(
            manager,
            sequence,
            out_order_num,
            "out_order_num",
            OrderData::processed,
        )
    }
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
    // SAFETY: forwarded from this function's contract.
    unsafe {
        sequence_value(
            manager,
            sequence,
            out_processing,
            "out_processing",
            OrderData::is_processing,
        )
    }
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
        let list = self::sequence(&*self::manager(manager)?, sequence)?.unprocessed();
        // SAFETY: forwarded from this function's contract.
        unsafe {
            list_out(
                &list,
                (buf, "buf"),
                len,
                (out_count, "out_count"),
                "order numbers",
            )
        }
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
        let id = client_id(namespace_id, command_buffer_id);
        self::manager(manager)?
            .create_client(id, SequenceId(sequence))
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

/// The body of an export that says whether `token` is released through `out_released`: the
/// handle, the token, then `out_released` are checked; the answer is written only on success.
///
/// # Safety
/// `token` is NULL or valid for one read; `out_released` is NULL or valid for one write.
unsafe fn released_query(
    manager: *const gpusvc_sync_manager,
    token: *const gpusvc_sync_token,
    out_released: *mut bool,
    answer: impl FnOnce(&SyncPointManager, &SyncToken) -> bool,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || Ok((self::manager(manager)?, token_in(token, "token")?)),
            out_released,
            "out_released",
            |(m, token)| Ok(answer(&m, &token)),
        )
    }
}

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
    // SAFETY: forwarded from this function's contract (both pointers).
    unsafe {
        released_query(manager, token, out_released, |m, token| {
            m.is_released(token)
        })
    }
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
    // SAFETY: forwarded from this function's contract (`token`, `out_registered`, `callback`).
    unsafe {
        answer_into(
            || {
                let m = self::manager(manager)?;
                let token = token_in(token, "token")?;
                Ok((m, token, wait_callback_in(callback, user_data)?))
            },
            out_registered,
            "out_registered",
            |(m, token, on_end)| {
                self::sequence(&m, waiting_sequence)?;
                Ok(m.wait(&token, SequenceId(waiting_sequence), wait_order_num, on_end))
            },
        )
    }
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
    // SAFETY: forwarded from this function's contract (both pointers).
    unsafe {
        released_query(manager, token, out_released, |m, token| {
            m.wait_blocking(token, Duration::from_millis(timeout_ms))
        })
    }
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
        // SAFETY: forwarded from this function's contract.
        let input = unsafe { tokens_in(tokens, count, "tokens", "`tokens` count") }?;
        let reduced: Vec<gpusvc_sync_token> = sync_points::reduce(&input)
            .into_iter()
            .map(gpusvc_sync_token::from)
            .collect();
        // SAFETY: forwarded from this function's contract.
        unsafe {
            list_out(
                &reduced,
                (out, "out"),
                len,
                (out_count, "out_count"),
                "tokens",
            )
        }
    })
}
