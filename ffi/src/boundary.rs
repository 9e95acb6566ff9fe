//! The panic boundary, argument checks and the per-thread error detail.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::c_char;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::result::gpusvc_result;

/// A failed call: the code returned to C and the detail kept for `gpusvc_last_error_detail`.
#[derive(Debug)]
pub(crate) struct FfiError {
    code: gpusvc_result,
    detail: String,
}

impl FfiError {
    pub(crate) fn new(code: gpusvc_result, detail: impl Into<String>) -> Self {
        FfiError {
            code,
            detail: detail.into(),
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_detail(detail: String) {
    LAST_ERROR.with(|d| *d.borrow_mut() = detail);
}

fn panic_text(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}

/// Runs `f` inside the panic boundary. `Ok` is `GPUSVC_OK`; an error's code is returned and its
/// detail stored for this thread; a panic is `GPUSVC_PANIC` with the panic message as detail.
pub(crate) fn ffi_guard(f: impl FnOnce() -> Result<(), FfiError>) -> gpusvc_result {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => gpusvc_result::GPUSVC_OK,
        Ok(Err(e)) => {
            set_detail(e.detail);
            e.code
        }
        Err(payload) => {
            // Even storing the detail must not unwind across the boundary.
            let detail = format!("panic: {}", panic_text(payload.as_ref()));
            let _ = catch_unwind(|| set_detail(detail));
            gpusvc_result::GPUSVC_PANIC
        }
    }
}

/// Checks an output pointer before any work is done.
pub(crate) fn out_ptr<T>(ptr: *mut T, name: &str) -> Result<*mut T, FfiError> {
    if ptr.is_null() {
        Err(null_argument(name))
    } else {
        Ok(ptr)
    }
}

pub(crate) fn null_argument(name: &str) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_NULL_ARGUMENT,
        format!("argument `{name}` is NULL"),
    )
}

/// Copies `text` into `buf` NUL-terminated, truncating (on a UTF-8 boundary) to `len - 1` bytes;
/// writes the byte count to `*out_len`.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes and `out_len` for one `usize`, or be NULL.
pub(crate) unsafe fn copy_str_out(
    text: &str,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> Result<(), FfiError> {
    let buf = out_ptr(buf, "buf")?;
    let out_len = out_ptr(out_len, "out_len")?;
    if len == 0 {
        return Err(FfiError::new(
            gpusvc_result::GPUSVC_INSUFFICIENT_SIZE,
            "len is 0: no room for the terminating NUL",
        ));
    }
    let mut n = text.len().min(len - 1);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: `buf` is non-null and valid for `len` bytes (contract); `n + 1 <= len`; the source
    // is a live `&str` that cannot overlap a caller buffer we only write to.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
        *out_len = n;
    }
    Ok(())
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
        let detail = LAST_ERROR.with(|d| d.borrow().clone());
        // SAFETY: forwarded from this function's contract.
        unsafe { copy_str_out(&detail, buf, len, out_len) }
    })) {
        Ok(Ok(())) => gpusvc_result::GPUSVC_OK,
        Ok(Err(e)) => e.code,
        Err(_) => gpusvc_result::GPUSVC_PANIC,
    }
}

/// Panics inside the boundary and returns `GPUSVC_PANIC`. It exists so hosts and tests can prove
/// that a panic never takes the process down; it has no other effect.
#[unsafe(no_mangle)]
pub extern "C" fn gpusvc_debug_panic() -> gpusvc_result {
    ffi_guard(|| panic!("gpusvc_debug_panic was called"))
}
