//! The sync C types (the token, the wait callback), reading tokens from C, and the `sync-points`
//! errors as result codes (the scheduler's exports use them too).

use std::ffi::c_void;

use sync_points::{ClientError, ClientId, OrderError, ReleaseError, SyncToken};

use crate::kit::{FfiError, HostFn, gpusvc_result, invalid_argument, null_argument};

/// A release to wait for: command buffer `(namespace_id, command_buffer_id)` releasing
/// `release_count`. A token with `release_count` 0 names nothing and is always released.
/// No `struct_size`: passed in arrays with a count (`gpusvc_scheduler_task.waits`).
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

/// The host's wait callback as a `sync-points` one; NULL is `GPUSVC_NULL_ARGUMENT`.
/// `sync-points` calls a registered callback exactly once (on release, on retirement, when the
/// releaser is destroyed, or when the manager is dropped) and drops a refused one unrun.
///
/// The callback may be called with `user_data` from any thread (`gpusvc_sync_token_wait`'s
/// contract).
pub(crate) fn wait_callback_in(
    callback: gpusvc_sync_callback,
    user_data: *mut c_void,
) -> Result<impl FnOnce() + Send + 'static, FfiError> {
    let host = HostFn::new(
        callback.ok_or_else(|| null_argument("callback"))?,
        user_data,
    );
    Ok(move || {
        // SAFETY: a host function taking its own user_data, called at most once, from any
        // thread (contract above).
        unsafe { (host.f)(host.user_data.get()) }
    })
}

/// Reads one token field by field; the `verified` byte is read as a byte, so a value other than
/// 0 or 1 from C is `true`, not undefined behaviour.
///
/// # Safety
/// `ptr` is non-NULL and valid for reading one `gpusvc_sync_token`.
unsafe fn read_token(ptr: *const gpusvc_sync_token) -> SyncToken {
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

/// A token argument; NULL is `GPUSVC_NULL_ARGUMENT`.
///
/// # Safety
/// `ptr` is NULL or valid for reading one `gpusvc_sync_token`.
pub(crate) unsafe fn token_in(
    ptr: *const gpusvc_sync_token,
    name: &str,
) -> Result<SyncToken, FfiError> {
    if ptr.is_null() {
        return Err(null_argument(name));
    }
    // SAFETY: non-null (checked) and valid (contract).
    Ok(unsafe { read_token(ptr) })
}

/// `count` tokens at `ptr` (which may be NULL when `count` is 0), read one by one (see
/// [`read_token`]). NULL with a count is `GPUSVC_NULL_ARGUMENT` for `name`; a count whose byte
/// size does not fit `isize` is `GPUSVC_INVALID_ARGUMENT` ("`count_label` N is absurd").
///
/// # Safety
/// `ptr` is NULL or valid for reading `count` tokens.
pub(crate) unsafe fn tokens_in(
    ptr: *const gpusvc_sync_token,
    count: usize,
    name: &str,
    count_label: &str,
) -> Result<Vec<SyncToken>, FfiError> {
    if count > 0 && ptr.is_null() {
        return Err(null_argument(name));
    }
    if count > isize::MAX as usize / size_of::<gpusvc_sync_token>() {
        return Err(invalid_argument(format!("{count_label} {count} is absurd")));
    }
    Ok((0..count)
        // SAFETY: `ptr` is non-null and valid for `count` reads (contract); `i < count`.
        .map(|i| unsafe { read_token(ptr.add(i)) })
        .collect())
}

pub(crate) fn client_id(namespace_id: i8, command_buffer_id: u64) -> ClientId {
    ClientId {
        namespace: namespace_id,
        command_buffer_id,
    }
}

pub(crate) fn unknown_sequence(id: u64) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_SYNC_UNKNOWN_SEQUENCE,
        format!("sync sequence {id} does not exist (destroyed or never created)"),
    )
}

pub(crate) fn unknown_client(id: ClientId) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_SYNC_UNKNOWN_CLIENT,
        format!(
            "sync client (namespace {}, command buffer {}) does not exist",
            id.namespace, id.command_buffer_id
        ),
    )
}

/// An order error; the crate's message names the sequence ("sequence N: ...").
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
        ClientError::Release(e @ ReleaseError::NotProcessing) => FfiError::new(
            gpusvc_result::GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING,
            e.to_string(),
        ),
        ClientError::Release(e @ ReleaseError::Destroyed) => {
            FfiError::new(gpusvc_result::GPUSVC_SYNC_UNKNOWN_CLIENT, e.to_string())
        }
    }
}
