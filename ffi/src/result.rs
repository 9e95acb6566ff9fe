//! `gpusvc_result`: one result enum for the whole ABI, and its messages.

use std::ffi::c_char;

use crate::boundary::{FfiError, copy_str_out, ffi_guard};

/// The result of every fallible gpusvc call. The numbers are part of the ABI: they are explicit,
/// never change and are never reused for another meaning. Codes arrive back into the library
/// (e.g. in `gpusvc_result_message`) as `uint32_t`, so unknown values are handled, not UB.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum gpusvc_result {
    /// Success.
    GPUSVC_OK = 0,
    /// A Rust panic was caught at the boundary; the library state touched by the call may be
    /// incomplete, the process is unharmed.
    GPUSVC_PANIC = 1,
    /// A required pointer argument was NULL.
    GPUSVC_NULL_ARGUMENT = 2,
    /// An argument is out of range (unknown enum value, bad size, ...).
    GPUSVC_INVALID_ARGUMENT = 3,
    /// A caller-provided buffer is too small.
    GPUSVC_INSUFFICIENT_SIZE = 4,
    /// A thread-bound handle was used from another thread.
    GPUSVC_WRONG_THREAD = 5,
    /// A string argument (a name, a source, an identity) is not valid UTF-8.
    GPUSVC_INVALID_UTF8 = 6,
    /// A handle is not a live gpusvc object of the expected kind: already freed, never made by
    /// gpusvc, or a handle of another kind.
    GPUSVC_INVALID_HANDLE = 7,
    /// The handle is in use by an outer gpusvc call on this thread (a host callback re-entered
    /// the library with it).
    GPUSVC_HANDLE_BUSY = 8,
    /// libEGL.so.1 could not be loaded.
    GPUSVC_GL_NO_LIBEGL = 100,
    /// EGL lists no usable device.
    GPUSVC_GL_NO_DEVICE = 101,
    /// The EGL display could not be initialized.
    GPUSVC_GL_DISPLAY_INIT_FAILED = 102,
    /// No PBUFFER-capable EGL config for the requested API.
    GPUSVC_GL_NO_MATCHING_CONFIG = 103,
    /// The driver's GL version is below the minimum.
    GPUSVC_GL_VERSION_TOO_OLD = 104,
    /// eglCreateContext failed.
    GPUSVC_GL_CONTEXT_FAILED = 105,
    /// The context could not be made current.
    GPUSVC_GL_MAKE_CURRENT_FAILED = 106,
    /// Program cache: a program with an empty binary cannot be saved.
    GPUSVC_PROGRAM_CACHE_EMPTY_BINARY = 200,
    /// Program cache: the entry alone is larger than the cache budget.
    GPUSVC_PROGRAM_CACHE_OVER_BUDGET = 201,
    /// Program cache: memory pressure is critical, saves are refused.
    GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE = 202,
    /// Program cache: no program with this key is cached.
    GPUSVC_PROGRAM_CACHE_NOT_FOUND = 203,
    /// Program cache: a deferred shader failed when the link compiled it (log in the detail).
    GPUSVC_PROGRAM_CACHE_COMPILE_FAILED = 204,
    /// Program cache: the driver refused to link the program (log in the detail).
    GPUSVC_PROGRAM_CACHE_LINK_FAILED = 205,
    /// Program cache: a shader given to a link was never compiled or failed to compile.
    GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED = 206,
    /// Program cache: the startup load from the disk store did not finish within the timeout
    /// (the cache works meanwhile; programs not loaded yet are misses).
    GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT = 207,
    /// Program cache: there is no default cache folder (neither `XDG_CACHE_HOME` nor `HOME` is
    /// set to an absolute path); pass a folder, or run memory-only.
    GPUSVC_PROGRAM_CACHE_NO_DEFAULT_DIR = 208,
    /// Sync: an order-number transition that is not allowed (begin, pause or finish out of
    /// order, or order number 0); nothing changed.
    GPUSVC_SYNC_ORDER_VIOLATION = 300,
    /// Sync: a release while the client's sequence is not processing an order number.
    GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING = 301,
    /// Sync: a client with this (namespace, command buffer id) exists.
    GPUSVC_SYNC_CLIENT_EXISTS = 302,
    /// Sync: no client with this (namespace, command buffer id): destroyed or never created.
    GPUSVC_SYNC_UNKNOWN_CLIENT = 303,
    /// Sync: no sequence with this id: destroyed or never created.
    GPUSVC_SYNC_UNKNOWN_SEQUENCE = 304,
    /// Scheduler: no stream with this id: removed or never added.
    GPUSVC_SCHEDULER_UNKNOWN_STREAM = 400,
    /// Scheduler: it was shut down (freed, possibly from inside one of its tasks, while this
    /// call was in flight): nothing is accepted any more.
    GPUSVC_SCHEDULER_SHUT_DOWN = 401,
}

/// Every code, in number order.
const ALL_RESULTS: [gpusvc_result; 32] = [
    gpusvc_result::GPUSVC_OK,
    gpusvc_result::GPUSVC_PANIC,
    gpusvc_result::GPUSVC_NULL_ARGUMENT,
    gpusvc_result::GPUSVC_INVALID_ARGUMENT,
    gpusvc_result::GPUSVC_INSUFFICIENT_SIZE,
    gpusvc_result::GPUSVC_WRONG_THREAD,
    gpusvc_result::GPUSVC_INVALID_UTF8,
    gpusvc_result::GPUSVC_INVALID_HANDLE,
    gpusvc_result::GPUSVC_HANDLE_BUSY,
    gpusvc_result::GPUSVC_GL_NO_LIBEGL,
    gpusvc_result::GPUSVC_GL_NO_DEVICE,
    gpusvc_result::GPUSVC_GL_DISPLAY_INIT_FAILED,
    gpusvc_result::GPUSVC_GL_NO_MATCHING_CONFIG,
    gpusvc_result::GPUSVC_GL_VERSION_TOO_OLD,
    gpusvc_result::GPUSVC_GL_CONTEXT_FAILED,
    gpusvc_result::GPUSVC_GL_MAKE_CURRENT_FAILED,
    gpusvc_result::GPUSVC_PROGRAM_CACHE_EMPTY_BINARY,
    gpusvc_result::GPUSVC_PROGRAM_CACHE_OVER_BUDGET,
    gpusvc_result::GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE,
    gpusvc_result::GPUSVC_PROGRAM_CACHE_NOT_FOUND,
    gpusvc_result::GPUSVC_PROGRAM_CACHE_COMPILE_FAILED,
    gpusvc_result::GPUSVC_PROGRAM_CACHE_LINK_FAILED,
    gpusvc_result::GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED,
    gpusvc_result::GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT,
    gpusvc_result::GPUSVC_PROGRAM_CACHE_NO_DEFAULT_DIR,
    gpusvc_result::GPUSVC_SYNC_ORDER_VIOLATION,
    gpusvc_result::GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING,
    gpusvc_result::GPUSVC_SYNC_CLIENT_EXISTS,
    gpusvc_result::GPUSVC_SYNC_UNKNOWN_CLIENT,
    gpusvc_result::GPUSVC_SYNC_UNKNOWN_SEQUENCE,
    gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM,
    gpusvc_result::GPUSVC_SCHEDULER_SHUT_DOWN,
];

impl gpusvc_result {
    /// Every code, in number order.
    pub fn all() -> &'static [gpusvc_result] {
        &ALL_RESULTS
    }

    /// The code with this number, if any.
    pub fn from_u32(code: u32) -> Option<Self> {
        ALL_RESULTS.into_iter().find(|r| *r as u32 == code)
    }

    /// A short English description.
    pub fn message(self) -> &'static str {
        use gpusvc_result::*;
        match self {
            GPUSVC_OK => "success",
            GPUSVC_PANIC => "internal error: a panic was caught at the gpusvc C ABI boundary",
            GPUSVC_NULL_ARGUMENT => "a required pointer argument was NULL",
            GPUSVC_INVALID_ARGUMENT => "an argument is out of range",
            GPUSVC_INSUFFICIENT_SIZE => "the provided buffer is too small",
            GPUSVC_WRONG_THREAD => "a thread-bound handle was used from another thread",
            GPUSVC_INVALID_UTF8 => "a string argument is not valid UTF-8",
            GPUSVC_INVALID_HANDLE => {
                "the handle is not a live gpusvc object of the expected kind (freed or never made)"
            }
            GPUSVC_HANDLE_BUSY => "the handle is in use by an outer gpusvc call on this thread",
            GPUSVC_GL_NO_LIBEGL => "no libEGL: libEGL.so.1 could not be loaded",
            GPUSVC_GL_NO_DEVICE => "no usable EGL device",
            GPUSVC_GL_DISPLAY_INIT_FAILED => "the EGL display could not be initialized",
            GPUSVC_GL_NO_MATCHING_CONFIG => {
                "no matching EGL config (PBUFFER) for the requested API"
            }
            GPUSVC_GL_VERSION_TOO_OLD => "the driver's GL version is too old",
            GPUSVC_GL_CONTEXT_FAILED => "creating the GL context failed",
            GPUSVC_GL_MAKE_CURRENT_FAILED => "the GL context could not be made current",
            GPUSVC_PROGRAM_CACHE_EMPTY_BINARY => "program cache: the program binary is empty",
            GPUSVC_PROGRAM_CACHE_OVER_BUDGET => {
                "program cache: the entry is larger than the cache budget"
            }
            GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE => {
                "program cache: memory pressure is critical, saves are refused"
            }
            GPUSVC_PROGRAM_CACHE_NOT_FOUND => "program cache: no program with this key is cached",
            GPUSVC_PROGRAM_CACHE_COMPILE_FAILED => "program cache: a shader failed to compile",
            GPUSVC_PROGRAM_CACHE_LINK_FAILED => "program cache: the program failed to link",
            GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED => {
                "program cache: a shader given to the link is not compiled"
            }
            GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT => {
                "program cache: the startup load from disk did not finish within the timeout"
            }
            GPUSVC_PROGRAM_CACHE_NO_DEFAULT_DIR => {
                "program cache: no default cache folder (neither XDG_CACHE_HOME nor HOME is set)"
            }
            GPUSVC_SYNC_ORDER_VIOLATION => "sync: the order-number transition is not allowed",
            GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING => {
                "sync: release outside processing (the client's sequence is not processing)"
            }
            GPUSVC_SYNC_CLIENT_EXISTS => "sync: a client with this id exists",
            GPUSVC_SYNC_UNKNOWN_CLIENT => "sync: no such client (destroyed or never created)",
            GPUSVC_SYNC_UNKNOWN_SEQUENCE => "sync: no such sequence (destroyed or never created)",
            GPUSVC_SCHEDULER_UNKNOWN_STREAM => "scheduler: no such stream (removed or never added)",
            GPUSVC_SCHEDULER_SHUT_DOWN => "scheduler: shut down (freed); nothing is accepted",
        }
    }
}

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
        unsafe { copy_str_out(&text, buf, len, out_len) }
    })
}

impl From<gpusvc_result> for FfiError {
    fn from(code: gpusvc_result) -> Self {
        FfiError::new(code, code.message())
    }
}
