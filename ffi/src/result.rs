//! The process-wide exports about results: `gpusvc_result_message`, `gpusvc_last_error_detail`
//! and `gpusvc_debug_panic`.

use std::ffi::c_char;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::kit::error::last_detail;
use crate::kit::{ffi_guard, gpusvc_result, truncated_text_out};

/// Writes the message for `code` into `buf` as a NUL-terminated string.
///
/// At most `len - 1` bytes of text are written, then a NUL: a message longer than the buffer is
/// truncated (like `snprintf`), which is not an error. `*out_len` receives the number of bytes
/// written, NUL excluded. An unknown code gets the message "unknown gpusvc_result code N".
///
/// Returns `GPUSVC_NULL_ARGUMENT` when `buf` or `out_len` is NULL and `GPUSVC_INSUFFICIENT_SIZE`
/// when `len` is 0 (no room for the NUL); nothing is written then.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes and `out_len` for one `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_result_message(
    code: u32,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let text = match gpusvc_result::from_u32(code) {
            Some(r) => std::borrow::Cow::Borrowed(r.message()),
            None => format!("unknown gpusvc_result code {code}").into(),
        };
        // SAFETY: forwarded from this function's contract.
        unsafe { truncated_text_out(&text, (buf, "buf"), len, (out_len, "out_len")) }
    })
}

/// Writes the detail of the last failing gpusvc call on this thread into `buf` (empty when no
/// call on this thread has failed), with the truncation rules of `gpusvc_result_message`.
/// Successful calls do not clear it, so it can be read after `gpusvc_result_message`.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes and `out_len` for one `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_last_error_detail(
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    // Not through `ffi_guard`: a failure here must not overwrite the detail being read.
    match catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: forwarded from this function's contract.
        unsafe { truncated_text_out(&last_detail(), (buf, "buf"), len, (out_len, "out_len")) }
    })) {
        Ok(Ok(())) => gpusvc_result::GPUSVC_OK,
        Ok(Err(e)) => e.code(),
        Err(_) => gpusvc_result::GPUSVC_PANIC,
    }
}

/// Panics inside the boundary and returns `GPUSVC_PANIC`. It exists so hosts and tests can prove
/// that a panic never takes the process down; it has no other effect.
#[unsafe(no_mangle)]
pub extern "C" fn gpusvc_debug_panic() -> gpusvc_result {
    ffi_guard(|| panic!("gpusvc_debug_panic was called"))
}
