//! Reading arguments that arrive from C: pointer + length pairs, NUL-terminated strings, enum
//! values as `uint32_t`. Everything is validated and copied; nothing borrows the caller's memory
//! beyond the call.

use std::ffi::{CStr, c_char};

use crate::boundary::{FfiError, null_argument, out_ptr};
use crate::result::gpusvc_result;

pub(crate) fn invalid_argument(detail: impl Into<String>) -> FfiError {
    FfiError::new(gpusvc_result::GPUSVC_INVALID_ARGUMENT, detail)
}

/// Borrows `len` elements at `ptr`. `len == 0` is the empty slice whatever `ptr` is; otherwise
/// `ptr` must be non-NULL and aligned, and the byte size must fit `isize` (a larger length is
/// an absurd size, `GPUSVC_INVALID_ARGUMENT`).
///
/// # Safety
/// When `len > 0`, `ptr` must be valid for `len` reads of `T` for the returned lifetime.
pub(crate) unsafe fn slice_in<'a, T>(
    ptr: *const T,
    len: usize,
    name: &str,
) -> Result<&'a [T], FfiError> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(null_argument(name));
    }
    let max = isize::MAX as usize / size_of::<T>().max(1);
    if len > max {
        return Err(invalid_argument(format!(
            "`{name}` length {len} is absurd (more than {max} elements)"
        )));
    }
    if !ptr.is_aligned() {
        return Err(invalid_argument(format!("`{name}` is misaligned")));
    }
    // SAFETY: non-null, aligned, the size fits isize (checked above) and the memory is valid for
    // `len` reads (contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows a `char` buffer of `len` bytes as UTF-8 text; NULL is an error even when `len` is 0.
///
/// # Safety
/// `ptr` is NULL or valid for `len` bytes of reads.
pub(crate) unsafe fn text_in<'a>(
    ptr: *const c_char,
    len: usize,
    name: &str,
) -> Result<&'a str, FfiError> {
    if ptr.is_null() {
        return Err(null_argument(name));
    }
    // SAFETY: forwarded from this function's contract.
    let bytes = unsafe { slice_in(ptr.cast::<u8>(), len, name) }?;
    std::str::from_utf8(bytes).map_err(|e| invalid_utf8(name, e))
}

/// A shader source: non-NULL, non-empty, UTF-8.
///
/// # Safety
/// `ptr` is NULL or valid for `len` bytes of reads.
pub(crate) unsafe fn source_in<'a>(ptr: *const c_char, len: usize) -> Result<&'a str, FfiError> {
    // SAFETY: forwarded from this function's contract.
    let source = unsafe { text_in(ptr, len, "source") }?;
    if source.is_empty() {
        return Err(invalid_argument("`source` is empty (source_len is 0)"));
    }
    Ok(source)
}

/// A NUL-terminated UTF-8 string.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string valid for reads.
pub(crate) unsafe fn cstr_in<'a>(ptr: *const c_char, name: &str) -> Result<&'a str, FfiError> {
    if ptr.is_null() {
        return Err(null_argument(name));
    }
    // SAFETY: non-null and NUL-terminated (contract).
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str().map_err(|e| invalid_utf8(name, e))
}

fn invalid_utf8(name: &str, e: std::str::Utf8Error) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_INVALID_UTF8,
        format!("`{name}` is not valid UTF-8: {e}"),
    )
}

/// An enum value that arrived as `uint32_t`.
pub(crate) fn enum_in<T>(
    value: u32,
    what: &str,
    decode: impl FnOnce(u32) -> Option<T>,
) -> Result<T, FfiError> {
    decode(value).ok_or_else(|| invalid_argument(format!("unknown {what} value {value}")))
}

/// Writes `value` to a checked output pointer.
///
/// # Safety
/// `out` is non-NULL (checked by the caller) and valid for one write.
pub(crate) unsafe fn write<T>(out: *mut T, value: T) {
    // SAFETY: forwarded from this function's contract.
    unsafe { out.write(value) }
}

/// Copies `items` into a caller buffer with the count-query pattern: with `buf` NULL and `len`
/// 0 only `*out_count` is written; otherwise `len` must be at least the count
/// (`GPUSVC_INSUFFICIENT_SIZE`, nothing written).
///
/// # Safety
/// `buf` is NULL or valid for `len` writes; `out_count` is NULL or valid for one write.
pub(crate) unsafe fn copy_list_out<T: Copy>(
    items: &[T],
    buf: *mut T,
    len: usize,
    out_count: *mut usize,
    what: &str,
) -> Result<(), FfiError> {
    let out_count = out_ptr(out_count, "out_count")?;
    if !(buf.is_null() && len == 0) {
        let buf = out_ptr(buf, "buf")?;
        if len < items.len() {
            return Err(FfiError::new(
                gpusvc_result::GPUSVC_INSUFFICIENT_SIZE,
                format!("{} {what}, room for {len}", items.len()),
            ));
        }
        // SAFETY: `buf` is non-null and valid for `len >= items.len()` writes (contract); the
        // source is our own slice, which cannot overlap a caller buffer we only write to.
        unsafe { std::ptr::copy_nonoverlapping(items.as_ptr(), buf, items.len()) };
    }
    // SAFETY: non-null (checked) and valid for a write (contract).
    unsafe { write(out_count, items.len()) };
    Ok(())
}
