//! The error half of the kit: [`gpusvc_result`] (every code, its number and its message),
//! [`FfiError`] (a code with the detail kept for `gpusvc_last_error_detail`), the panic
//! boundary [`ffi_guard`] and this thread's last error detail.
//!
//! The codes and the error type live in one module so that nothing here depends on the rest of
//! the crate.

use std::any::Any;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::kit::c_enum;

/// The result of every fallible gpusvc call. The numbers are part of the ABI: they are explicit,
/// never change and are never reused for another meaning. Codes arrive back into the library
/// (e.g. in `gpusvc_result_message`) as `uint32_t`, so unknown values are handled, not UB.
///
/// Codes come in blocks of 100, one block per service; a new service takes the next free block
/// and a new code the next free number of its block:
///
/// | numbers | block |
/// |---------|-------|
/// | 0-99    | general (the boundary, arguments, handles) |
/// | 100-199 | GL contexts (`gpusvc_gl_*`) |
/// | 200-299 | program cache and program manager (`gpusvc_program_cache_*`, `gpusvc_program_manager_*`) |
/// | 300-399 | sync points (`gpusvc_sync_*`) |
/// | 400-499 | scheduler (`gpusvc_scheduler_*`) |
/// | 500-599 | bo-cache (`gpusvc_bo_cache_*`, `gpusvc_bo_*`) |
/// | 600-699 | vertex-cache (`gpusvc_vcache_*`) |
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
    /// A struct's `struct_size` is not one this library takes: 0 or below the struct's first
    /// published size, above 4096, not a multiple of the struct's alignment (no `sizeof` is),
    /// or larger than this library's struct with a nonzero byte past it (a field this version
    /// does not know is set). The detail names the struct and sizes.
    GPUSVC_UNSUPPORTED_STRUCT_SIZE = 9,
    /// Logging: another process-wide `tracing` subscriber (the Rust host's own) was installed
    /// before gpusvc's, so `gpusvc_set_log_callback` cannot forward events; they go to that
    /// subscriber.
    GPUSVC_LOG_SUBSCRIBER_TAKEN = 11,
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
    /// Program cache: `gpusvc_program_cache_insert_entry` on a cache made without a
    /// persistence sink (it knows no stamp to check entries against).
    GPUSVC_PROGRAM_CACHE_PERSIST_NOT_CONFIGURED = 209,
    /// Program cache: the bytes are not a whole entry (truncated, bad magic, header length,
    /// unknown flags, payload length, LZ4 or decoding failed); the detail says which check.
    GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED = 210,
    /// Program cache: an entry's header or payload checksum does not match (damaged).
    GPUSVC_PROGRAM_CACHE_ENTRY_DAMAGED = 211,
    /// Program cache: the entry was written under another stamp (driver, device, host or
    /// version): never offered to this driver.
    GPUSVC_PROGRAM_CACHE_ENTRY_FOREIGN_STAMP = 212,
    /// Program cache: the entry has another entry format version.
    GPUSVC_PROGRAM_CACHE_ENTRY_VERSION = 213,
    /// Program cache: the entry is larger than FORMAT.md's bound (it was not read).
    GPUSVC_PROGRAM_CACHE_ENTRY_TOO_LARGE = 214,
    /// Program cache: an inserted entry does not fit the memory budget in force without
    /// evicting (inserted entries never push out programs), or memory pressure is critical.
    GPUSVC_PROGRAM_CACHE_NO_ROOM = 215,
    /// Program cache: a stamp text does not parse (not from `gpusvc_program_cache_stamp_text`,
    /// or edited: a field is missing or malformed, or a hash line does not match).
    GPUSVC_PROGRAM_CACHE_BAD_STAMP = 216,
    /// Program cache store: the folder is not an absolute path.
    GPUSVC_PROGRAM_CACHE_STORE_DIR_NOT_ABSOLUTE = 217,
    /// Program cache store: the folder cannot be used (not creatable, not a folder, read-only,
    /// locked by another process past the bounded wait); the detail says why.
    GPUSVC_PROGRAM_CACHE_STORE_UNUSABLE = 218,
    /// Program cache store: writing or deleting failed (disk full even after evicting,
    /// read-only); the detail has the error.
    GPUSVC_PROGRAM_CACHE_STORE_IO = 219,
    /// Program cache: the restore-ahead thread could not be spawned (the system's thread
    /// limit); the detail has the error. Nothing was started: the host restores every program
    /// itself.
    GPUSVC_PROGRAM_CACHE_RESTORE_AHEAD_SPAWN_FAILED = 220,
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
    /// Bo-cache: the fd is not a buffer the cache's DRM file can import (closed or negative fd,
    /// not a dma-buf; for the memfd-backed cache, not a memfd sealed against growing and
    /// shrinking). The errno is in the detail.
    GPUSVC_BO_CACHE_NOT_A_DMABUF = 500,
    /// Bo-cache: the buffer is smaller than the import's `min_size`.
    GPUSVC_BO_CACHE_TOO_SMALL = 501,
    /// Bo-cache: the buffer's size differs from the import's `exact_size`.
    GPUSVC_BO_CACHE_SIZE_MISMATCH = 502,
    /// Bo-cache: the buffer is cached with other import flags than the ones asked for.
    GPUSVC_BO_CACHE_FLAGS_CONFLICT = 503,
    /// Bo-cache: the kernel returned a handle the cache holds for another buffer (someone
    /// closed the cache's handle behind its back and the number was recycled); the cache does
    /// not close it.
    GPUSVC_BO_CACHE_FOREIGN_HANDLE = 504,
    /// Bo-cache: a plane's `offset + size` exceeds its buffer.
    GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS = 505,
    /// Bo-cache: a kernel call failed (ENOMEM, EMFILE, ...); the call and errno are in the
    /// detail.
    GPUSVC_BO_CACHE_KERNEL_ERROR = 506,
    /// Bo-cache: the handle table would grow past its memory cap (`max_table_bytes`).
    GPUSVC_BO_CACHE_TABLE_FULL = 507,
    /// Bo-cache: the object already has the most references the cache allows (`max_refs`);
    /// nothing changed. Usually a leak of references in the caller.
    GPUSVC_BO_CACHE_TOO_MANY_REFERENCES = 508,
    /// Bo-cache: the path given to `gpusvc_bo_cache_open` is not a DRM render node (a regular
    /// file, a FIFO, a primary `card*` node, ...).
    GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE = 509,
    /// Vertex-cache: the model is not a valid cache model: text that does not parse (unknown
    /// kind, malformed or out-of-range parameters) or a `gpusvc_vcache_model` struct with an
    /// unknown family or parameters out of range; the detail says which part.
    GPUSVC_VCACHE_BAD_MODEL = 600,
    /// Vertex-cache: the mesh has no indices or no vertices.
    GPUSVC_VCACHE_EMPTY_MESH = 601,
    /// Vertex-cache: the index count is not a multiple of 3 (not whole triangles).
    GPUSVC_VCACHE_NOT_TRIANGLES = 602,
    /// Vertex-cache: an index names a vertex at or past the vertex count (position and index in
    /// the detail).
    GPUSVC_VCACHE_INDEX_OUT_OF_RANGE = 603,
    /// Vertex-cache: the driver allows no shader storage block in vertex shaders
    /// (`GL_MAX_VERTEX_SHADER_STORAGE_BLOCKS` is 0), so invocations cannot be counted on it.
    GPUSVC_VCACHE_NO_VERTEX_STORAGE_BLOCKS = 604,
    /// Vertex-cache: the context's GL version cannot measure (vertex storage buffers need
    /// desktop GL 4.3 or OpenGL ES 3.2).
    GPUSVC_VCACHE_DRIVER_TOO_OLD = 605,
    /// Vertex-cache: the draw does not fit the index type (an index above 65535 with 16-bit
    /// indices) or the driver's limits (counters past `GL_MAX_SHADER_STORAGE_BLOCK_SIZE`, more
    /// indices than one draw takes).
    GPUSVC_VCACHE_DRAW_TOO_LARGE = 606,
    /// Vertex-cache: the measurement failed on the driver (a GL error, the counting program did
    /// not build, counts where none can be); the detail has the driver's words.
    GPUSVC_VCACHE_MEASURE_FAILED = 607,
}

c_enum!(impl gpusvc_result {
    GPUSVC_OK => "success",
    GPUSVC_PANIC => "internal error: a panic was caught at the gpusvc C ABI boundary",
    GPUSVC_NULL_ARGUMENT => "a required pointer argument was NULL",
    GPUSVC_INVALID_ARGUMENT => "an argument is out of range",
    GPUSVC_INSUFFICIENT_SIZE => "the provided buffer is too small",
    GPUSVC_WRONG_THREAD => "a thread-bound handle was used from another thread",
    GPUSVC_INVALID_UTF8 => "a string argument is not valid UTF-8",
    GPUSVC_INVALID_HANDLE =>
        "the handle is not a live gpusvc object of the expected kind (freed or never made)",
    GPUSVC_HANDLE_BUSY => "the handle is in use by an outer gpusvc call on this thread",
    GPUSVC_UNSUPPORTED_STRUCT_SIZE =>
        "a struct's struct_size is unsupported (below its first size, or unknown fields set)",
    GPUSVC_LOG_SUBSCRIBER_TAKEN =>
        "another process-wide tracing subscriber is installed; gpusvc's events go to it",
    GPUSVC_GL_NO_LIBEGL => "no libEGL: libEGL.so.1 could not be loaded",
    GPUSVC_GL_NO_DEVICE => "no usable EGL device",
    GPUSVC_GL_DISPLAY_INIT_FAILED => "the EGL display could not be initialized",
    GPUSVC_GL_NO_MATCHING_CONFIG =>
        "no matching EGL config (PBUFFER) for the requested API",
    GPUSVC_GL_VERSION_TOO_OLD => "the driver's GL version is too old",
    GPUSVC_GL_CONTEXT_FAILED => "creating the GL context failed",
    GPUSVC_GL_MAKE_CURRENT_FAILED => "the GL context could not be made current",
    GPUSVC_PROGRAM_CACHE_EMPTY_BINARY => "program cache: the program binary is empty",
    GPUSVC_PROGRAM_CACHE_OVER_BUDGET =>
        "program cache: the entry is larger than the cache budget",
    GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE =>
        "program cache: memory pressure is critical, saves are refused",
    GPUSVC_PROGRAM_CACHE_NOT_FOUND => "program cache: no program with this key is cached",
    GPUSVC_PROGRAM_CACHE_COMPILE_FAILED => "program cache: a shader failed to compile",
    GPUSVC_PROGRAM_CACHE_LINK_FAILED => "program cache: the program failed to link",
    GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED =>
        "program cache: a shader given to the link is not compiled",
    GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT =>
        "program cache: the startup load from disk did not finish within the timeout",
    GPUSVC_PROGRAM_CACHE_NO_DEFAULT_DIR =>
        "program cache: no default cache folder (neither XDG_CACHE_HOME nor HOME is set)",
    GPUSVC_PROGRAM_CACHE_PERSIST_NOT_CONFIGURED =>
        "program cache: no persistence sink configured (no stamp to check entries against)",
    GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED => "program cache: the bytes are not a whole entry",
    GPUSVC_PROGRAM_CACHE_ENTRY_DAMAGED => "program cache: an entry checksum does not match",
    GPUSVC_PROGRAM_CACHE_ENTRY_FOREIGN_STAMP =>
        "program cache: the entry was written under another stamp",
    GPUSVC_PROGRAM_CACHE_ENTRY_VERSION => "program cache: the entry has another format version",
    GPUSVC_PROGRAM_CACHE_ENTRY_TOO_LARGE =>
        "program cache: the entry is larger than the format allows",
    GPUSVC_PROGRAM_CACHE_NO_ROOM =>
        "program cache: no room for the entry without evicting (or critical memory pressure)",
    GPUSVC_PROGRAM_CACHE_BAD_STAMP => "program cache: the stamp text does not parse",
    GPUSVC_PROGRAM_CACHE_STORE_DIR_NOT_ABSOLUTE =>
        "program cache store: the folder is not an absolute path",
    GPUSVC_PROGRAM_CACHE_STORE_UNUSABLE => "program cache store: the folder cannot be used",
    GPUSVC_PROGRAM_CACHE_STORE_IO => "program cache store: writing or deleting failed",
    GPUSVC_PROGRAM_CACHE_RESTORE_AHEAD_SPAWN_FAILED =>
        "program cache: the restore-ahead thread could not be spawned",
    GPUSVC_SYNC_ORDER_VIOLATION => "sync: the order-number transition is not allowed",
    GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING =>
        "sync: release outside processing (the client's sequence is not processing)",
    GPUSVC_SYNC_CLIENT_EXISTS => "sync: a client with this id exists",
    GPUSVC_SYNC_UNKNOWN_CLIENT => "sync: no such client (destroyed or never created)",
    GPUSVC_SYNC_UNKNOWN_SEQUENCE => "sync: no such sequence (destroyed or never created)",
    GPUSVC_SCHEDULER_UNKNOWN_STREAM => "scheduler: no such stream (removed or never added)",
    GPUSVC_SCHEDULER_SHUT_DOWN => "scheduler: shut down (freed); nothing is accepted",
    GPUSVC_BO_CACHE_NOT_A_DMABUF => "bo-cache: the fd is not an importable dma-buf",
    GPUSVC_BO_CACHE_TOO_SMALL => "bo-cache: the buffer is smaller than min_size",
    GPUSVC_BO_CACHE_SIZE_MISMATCH => "bo-cache: the buffer's size is not exact_size",
    GPUSVC_BO_CACHE_FLAGS_CONFLICT =>
        "bo-cache: the buffer is cached with other import flags",
    GPUSVC_BO_CACHE_FOREIGN_HANDLE =>
        "bo-cache: the GEM handle was recycled behind the cache's back (foreign handle)",
    GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS => "bo-cache: a plane does not fit in its buffer",
    GPUSVC_BO_CACHE_KERNEL_ERROR => "bo-cache: a kernel call failed",
    GPUSVC_BO_CACHE_TABLE_FULL => "bo-cache: the handle table is at its memory cap",
    GPUSVC_BO_CACHE_TOO_MANY_REFERENCES => "bo-cache: the object has the most references the cache allows",
    GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE => "bo-cache: the path is not a DRM render node",
    GPUSVC_VCACHE_BAD_MODEL => "vertex-cache: not a valid cache model (unknown or malformed)",
    GPUSVC_VCACHE_EMPTY_MESH => "vertex-cache: the mesh has no indices or no vertices",
    GPUSVC_VCACHE_NOT_TRIANGLES => "vertex-cache: the index count is not a multiple of 3",
    GPUSVC_VCACHE_INDEX_OUT_OF_RANGE => "vertex-cache: an index is past the vertex count",
    GPUSVC_VCACHE_NO_VERTEX_STORAGE_BLOCKS =>
        "vertex-cache: the driver allows no storage buffer in vertex shaders",
    GPUSVC_VCACHE_DRIVER_TOO_OLD =>
        "vertex-cache: measuring needs desktop GL 4.3 or OpenGL ES 3.2",
    GPUSVC_VCACHE_DRAW_TOO_LARGE =>
        "vertex-cache: the draw does not fit the index type or the driver's limits",
    GPUSVC_VCACHE_MEASURE_FAILED => "vertex-cache: the measurement failed on the driver",
});

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

    /// The code this error returns to C.
    pub(crate) fn code(&self) -> gpusvc_result {
        self.code
    }
}

impl From<gpusvc_result> for FfiError {
    fn from(code: gpusvc_result) -> Self {
        FfiError::new(code, code.message())
    }
}

/// `GPUSVC_NULL_ARGUMENT` for the argument `name`.
pub(crate) fn null_argument(name: &str) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_NULL_ARGUMENT,
        format!("argument `{name}` is NULL"),
    )
}

/// `GPUSVC_INVALID_ARGUMENT` with `detail`.
pub(crate) fn invalid_argument(detail: impl Into<String>) -> FfiError {
    FfiError::new(gpusvc_result::GPUSVC_INVALID_ARGUMENT, detail)
}

/// `GPUSVC_INSUFFICIENT_SIZE` with `detail`.
pub(crate) fn insufficient_size(detail: impl Into<String>) -> FfiError {
    FfiError::new(gpusvc_result::GPUSVC_INSUFFICIENT_SIZE, detail)
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_detail(detail: String) {
    LAST_ERROR.with(|d| *d.borrow_mut() = detail);
}

/// The detail of the last failing call on this thread (empty when none failed).
pub(crate) fn last_detail() -> String {
    LAST_ERROR.with(|d| d.borrow().clone())
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
///
/// With the `gl` feature the call runs inside a `headless_gl::KeepHostCurrent` scope: when it
/// makes a `gpusvc_gl_context` current, whatever EGL context, surfaces and display were
/// current on the thread before are current again when it returns, failed or not (nothing
/// current stays nothing current). Calls that touch no context of ours pay a thread-local
/// counter. Tests: `ffi/tests/gl_state_abi.rs`.
pub(crate) fn ffi_guard(f: impl FnOnce() -> Result<(), FfiError>) -> gpusvc_result {
    #[cfg(feature = "gl")]
    let _keep_host_current = headless_gl::KeepHostCurrent::new();
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
