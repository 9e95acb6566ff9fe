//! Reading arguments that arrive from C: structs, pointer + length pairs, NUL-terminated
//! strings (enum values as `uint32_t` are decoded by `c_enum!`). Everything is validated and
//! copied; nothing borrows the caller's memory beyond the call.

use std::ffi::{CStr, c_char};

use crate::kit::error::{FfiError, gpusvc_result, invalid_argument, null_argument};

/// Copies a struct in; NULL is `GPUSVC_NULL_ARGUMENT`. The read is unaligned-safe.
///
/// # Safety
/// `ptr` is NULL or valid for one read of a `T`, and every bit pattern C may pass is a valid `T`
/// (plain integers, raw pointers, `Option`s of function pointers).
pub(crate) unsafe fn struct_in<T: Copy>(ptr: *const T, name: &str) -> Result<T, FfiError> {
    if ptr.is_null() {
        return Err(null_argument(name));
    }
    // SAFETY: non-null and valid for one read of a `T` (contract).
    Ok(unsafe { ptr.read_unaligned() })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_arguments_are_checked() {
        // SAFETY: NULL and a live local buffer of the given length.
        unsafe {
            assert!(text_in(std::ptr::null(), 0, "x").is_err());
            let bad = [0xffu8, 0xfe];
            let e = text_in(bad.as_ptr().cast(), bad.len(), "x").unwrap_err();
            assert!(format!("{e:?}").contains("INVALID_UTF8"));
        }
    }
}
