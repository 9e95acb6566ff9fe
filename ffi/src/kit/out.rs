//! Writing results to C: [`Out`] (one checked output pointer, written only on success), lists
//! and text copied into caller buffers, and Rust strings as C strings.

use std::ffi::{CString, c_char};
use std::ptr::NonNull;

use crate::kit::error::{FfiError, ffi_guard, gpusvc_result, insufficient_size, null_argument};

/// An output argument, checked for NULL when the call starts and written at most once, when
/// the call has succeeded. Making one is the only `unsafe` step; writing is safe.
#[derive(Debug)]
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// Checks an output pointer before any work is done: NULL is `GPUSVC_NULL_ARGUMENT` for
    /// the argument `name`.
    ///
    /// # Safety
    /// `ptr` is NULL or valid for one write of a `T` for as long as the `Out` lives (an export's
    /// output argument, which its `# Safety` section documents so, used within the call).
    pub(crate) unsafe fn new(ptr: *mut T, name: &str) -> Result<Self, FfiError> {
        NonNull::new(ptr)
            .map(Out)
            .ok_or_else(|| null_argument(name))
    }

    /// Writes the result (the old value, if any, is not dropped: C memory holds plain data).
    pub(crate) fn write(self, value: T) {
        // SAFETY: non-null, and valid for one write while `self` lives (`Out::new`'s contract);
        // written unaligned, so a misaligned pointer from C is not undefined behaviour here.
        unsafe { self.0.as_ptr().write_unaligned(value) }
    }
}

/// The body of an export that answers through one output pointer, inside [`ffi_guard`]: `args`
/// runs first (the handle and the arguments read before the output, in the export's order),
/// then `out` is checked (NULL is `GPUSVC_NULL_ARGUMENT` for `out_name`), then `answer`; its
/// value is written only when it succeeds.
///
/// # Safety
/// `out` is NULL or valid for one write of a `T` during the call.
pub(crate) unsafe fn answer_into<A, T>(
    args: impl FnOnce() -> Result<A, FfiError>,
    out: *mut T,
    out_name: &str,
    answer: impl FnOnce(A) -> Result<T, FfiError>,
) -> gpusvc_result {
    ffi_guard(|| {
        let args = args()?;
        // SAFETY: forwarded from this function's contract.
        let out = unsafe { Out::new(out, out_name) }?;
        out.write(answer(args)?);
        Ok(())
    })
}

/// Copies `items` into a caller buffer with the count-query pattern: `*out_count` gets the
/// count; with `buf` NULL and `len` 0 nothing else happens; otherwise `len` must be at least the
/// count (`GPUSVC_INSUFFICIENT_SIZE`, nothing written) and the items are copied. A NULL pointer
/// is `GPUSVC_NULL_ARGUMENT` naming `buf_name` or `count_name` (the export's parameter names);
/// the detail of a short buffer says "N `what`, room for `len`".
///
/// # Safety
/// `buf` is NULL or valid for `len` writes; `out_count` is NULL or valid for one write.
pub(crate) unsafe fn list_out<T: Copy>(
    items: &[T],
    (buf, buf_name): (*mut T, &str),
    len: usize,
    (out_count, count_name): (*mut usize, &str),
    what: &str,
) -> Result<(), FfiError> {
    // SAFETY: forwarded from this function's contract.
    let out_count = unsafe { Out::new(out_count, count_name) }?;
    if !(buf.is_null() && len == 0) {
        if buf.is_null() {
            return Err(null_argument(buf_name));
        }
        if len < items.len() {
            return Err(insufficient_size(format!(
                "{} {what}, room for {len}",
                items.len()
            )));
        }
        // SAFETY: `buf` is non-null and valid for `len >= items.len()` writes (contract); the
        // source is our own slice, which cannot overlap a caller buffer we only write to.
        unsafe { std::ptr::copy_nonoverlapping(items.as_ptr(), buf, items.len()) };
    }
    out_count.write(items.len());
    Ok(())
}

/// Copies text into a caller buffer with the size-query pattern: `*out_len` gets its length in
/// bytes (NUL excluded); with `buf` NULL and `len` 0 nothing else happens; otherwise `len` must
/// exceed the length (room for the NUL; else `GPUSVC_INSUFFICIENT_SIZE`, nothing written) and
/// the text is copied NUL-terminated. A NULL pointer is `GPUSVC_NULL_ARGUMENT` naming
/// `buf_name` or `len_name` (the export's parameter names).
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes; `out_len` is NULL or valid for one write.
pub(crate) unsafe fn text_out(
    text: &str,
    (buf, buf_name): (*mut c_char, &str),
    len: usize,
    (out_len, len_name): (*mut usize, &str),
) -> Result<(), FfiError> {
    // SAFETY: forwarded from this function's contract.
    let out_len = unsafe { Out::new(out_len, len_name) }?;
    if !(buf.is_null() && len == 0) {
        if buf.is_null() {
            return Err(null_argument(buf_name));
        }
        if len <= text.len() {
            return Err(insufficient_size(format!(
                "the text has {} bytes plus a NUL, room for {len}",
                text.len()
            )));
        }
        // SAFETY: `buf` is valid for `len > text.len()` bytes (contract).
        unsafe { copy_nul_terminated(text.as_bytes(), buf) };
    }
    out_len.write(text.len());
    Ok(())
}

/// Copies text into a caller buffer, truncated (on a UTF-8 boundary) to `len - 1` bytes and
/// NUL-terminated, like `snprintf`; `*out_len` gets the bytes written, NUL excluded. `buf` or
/// `out_len` NULL is `GPUSVC_NULL_ARGUMENT` naming `buf_name` or `len_name` (the export's
/// parameter names), `len` 0 `GPUSVC_INSUFFICIENT_SIZE`.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes; `out_len` is NULL or valid for one write.
pub(crate) unsafe fn truncated_text_out(
    text: &str,
    (buf, buf_name): (*mut c_char, &str),
    len: usize,
    (out_len, len_name): (*mut usize, &str),
) -> Result<(), FfiError> {
    if buf.is_null() {
        return Err(null_argument(buf_name));
    }
    // SAFETY: forwarded from this function's contract.
    let out_len = unsafe { Out::new(out_len, len_name) }?;
    if len == 0 {
        return Err(insufficient_size(
            "len is 0: no room for the terminating NUL",
        ));
    }
    let mut n = text.len().min(len - 1);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: `buf` is non-null and valid for `len > n` bytes (contract).
    unsafe { copy_nul_terminated(&text.as_bytes()[..n], buf) };
    out_len.write(n);
    Ok(())
}

/// Copies `bytes` and a NUL to `buf`.
///
/// # Safety
/// `buf` is valid for `bytes.len() + 1` bytes of writes.
unsafe fn copy_nul_terminated(bytes: &[u8], buf: *mut c_char) {
    // SAFETY: valid for `bytes.len() + 1` bytes (contract); the source is our own slice, which
    // cannot overlap a caller buffer we only write to.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        *buf.add(bytes.len()) = 0;
    }
}

/// A string for C: interior NULs (never produced by drivers or by C input) are dropped.
pub(crate) fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}
