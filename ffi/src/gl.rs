//! `gpusvc_gl_context_*`: a headless GL context on the machine's driver, seen from C.

use std::collections::HashMap;
use std::ffi::{CString, c_char};
use std::rc::Rc;
use std::sync::{Mutex, MutexGuard};
use std::thread::ThreadId;

use headless_gl::{ApiPreference, ContextError, ContextOptions, GlApi, GlContext};

use crate::boundary::{FfiError, ffi_guard, null_argument, out_ptr};
use crate::disk_cache::gpusvc_driver_identity;
use crate::result::gpusvc_result;

/// Which GL API to open (passed as `uint32_t`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum gpusvc_gl_api {
    /// Desktop GL core (>= 4.3) first, then GLES 3.x.
    GPUSVC_GL_API_AUTO = 0,
    /// Desktop GL core profile >= 4.3 only.
    GPUSVC_GL_API_DESKTOP_CORE = 1,
    /// OpenGL ES >= 3.0 only.
    GPUSVC_GL_API_GLES = 2,
}

/// An opaque headless GL context, bound to the thread that opened it (its owner thread is kept
/// in the live-context registry).
#[derive(Debug)]
pub struct gpusvc_gl_context {
    /// Read from any thread; plain immutable data.
    identity: Identity,
    /// Touched only on `owner`. Program managers made over the context share it, so the GL
    /// context is destroyed when `_free` has run and the last of them is freed.
    ctx: Rc<GlContext>,
}

/// Contexts opened and not yet freed, with their owner threads: a freed or foreign pointer is
/// `GPUSVC_INVALID_HANDLE` rather than a read of freed memory.
static LIVE_CONTEXTS: Mutex<Option<HashMap<usize, ThreadId>>> = Mutex::new(None);

fn live_contexts() -> MutexGuard<'static, Option<HashMap<usize, ThreadId>>> {
    LIVE_CONTEXTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The owner thread of a live context.
fn live_owner(ctx: *const gpusvc_gl_context) -> Result<ThreadId, FfiError> {
    if ctx.is_null() {
        return Err(null_argument("ctx"));
    }
    live_contexts()
        .as_ref()
        .and_then(|m| m.get(&ctx.addr()).copied())
        .ok_or_else(|| {
            FfiError::new(
                gpusvc_result::GPUSVC_INVALID_HANDLE,
                format!(
                    "{ctx:p} is not a live gpusvc_gl_context (freed, or never opened by gpusvc)"
                ),
            )
        })
}

/// The GL context behind a live handle, for use on its own thread (`GPUSVC_WRONG_THREAD` from
/// any other).
///
/// # Safety
/// `ctx` is NULL, a pointer from `gpusvc_gl_context_open`, or a pointer that was never a
/// context (it is looked up, not dereferenced, unless it is live).
pub(crate) unsafe fn gl_context(ctx: *const gpusvc_gl_context) -> Result<Rc<GlContext>, FfiError> {
    if live_owner(ctx)? != std::thread::current().id() {
        return Err(FfiError::new(
            gpusvc_result::GPUSVC_WRONG_THREAD,
            "the gpusvc_gl_context belongs to another thread; use it on the thread that opened it",
        ));
    }
    // SAFETY: live (registered, and only its owner thread — this one — can unregister and free
    // it), so the pointer is a valid `gpusvc_gl_context`; the `Rc<GlContext>` is only touched on
    // its owner thread, which is this one.
    Ok(unsafe { (*ctx).ctx.clone() })
}

/// The driver identity, copied out of the context at open so that any thread may read it
/// without touching the thread-bound GL context.
#[derive(Debug)]
struct Identity {
    vendor: CString,
    renderer: CString,
    version: CString,
    glsl_version: CString,
    context: CString,
    api: gpusvc_gl_api,
    software: bool,
    program_binary_formats: Vec<u32>,
}

/// Borrows the identity part of a context.
///
/// # Safety
/// `ctx` is NULL or a context that no other thread frees during the call.
unsafe fn identity<'a>(ctx: *const gpusvc_gl_context) -> Result<&'a Identity, FfiError> {
    live_owner(ctx)?;
    // SAFETY: `ctx` is live (checked) and not freed during the call (contract). Only the
    // `identity` field is borrowed, never the thread-bound `GlContext`, so this is sound from
    // any thread.
    Ok(unsafe { &(*ctx).identity })
}

fn c_string(s: &str) -> CString {
    // Driver strings have no NUL; drop any rather than fail.
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

fn context_error(e: &ContextError) -> FfiError {
    use gpusvc_result::*;
    let code = match e {
        ContextError::NoLibEgl => GPUSVC_GL_NO_LIBEGL,
        ContextError::NoEglDevice { .. } => GPUSVC_GL_NO_DEVICE,
        ContextError::DisplayInit { .. } => GPUSVC_GL_DISPLAY_INIT_FAILED,
        ContextError::NoMatchingConfig { .. } => GPUSVC_GL_NO_MATCHING_CONFIG,
        ContextError::VersionTooOld { .. } => GPUSVC_GL_VERSION_TOO_OLD,
        ContextError::ContextCreation { .. } => GPUSVC_GL_CONTEXT_FAILED,
        ContextError::MakeCurrent { .. } => GPUSVC_GL_MAKE_CURRENT_FAILED,
    };
    FfiError::new(code, e.to_string())
}

/// Opens a headless GL context on the machine's EGL driver (a hardware device when there is
/// one, else Mesa llvmpipe; `GPUSVC_EGL_DEVICE=software|hardware|N` overrides) and makes it
/// current on the calling thread. `api` is a `gpusvc_gl_api` value.
///
/// On failure the code says what is missing (`GPUSVC_GL_NO_LIBEGL`, `GPUSVC_GL_NO_DEVICE`,
/// `GPUSVC_GL_NO_MATCHING_CONFIG`, `GPUSVC_GL_VERSION_TOO_OLD`, ...) and
/// `gpusvc_last_error_detail` has the driver's words.
///
/// # Safety
/// `out` must be valid for one pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_open(
    api: u32,
    out: *mut *mut gpusvc_gl_context,
) -> gpusvc_result {
    ffi_guard(|| {
        let out = out_ptr(out, "out")?;
        let api = match api {
            0 => ApiPreference::Auto,
            1 => ApiPreference::DesktopCore,
            2 => ApiPreference::Gles,
            other => {
                return Err(FfiError::new(
                    gpusvc_result::GPUSVC_INVALID_ARGUMENT,
                    format!("unknown gpusvc_gl_api value {other}"),
                ));
            }
        };
        let options = ContextOptions {
            api,
            ..ContextOptions::default()
        };
        let ctx = GlContext::open(&options).map_err(|e| context_error(&e))?;
        let info = ctx.info();
        let identity = Identity {
            vendor: c_string(&info.vendor),
            renderer: c_string(&info.renderer),
            version: c_string(&info.version),
            glsl_version: c_string(&info.glsl_version),
            context: c_string(&info.context_description()),
            api: match info.api {
                GlApi::DesktopCore => gpusvc_gl_api::GPUSVC_GL_API_DESKTOP_CORE,
                GlApi::Gles => gpusvc_gl_api::GPUSVC_GL_API_GLES,
            },
            software: info.device.software,
            program_binary_formats: info.program_binary_formats.clone(),
        };
        let owner = std::thread::current().id();
        let handle = Box::into_raw(Box::new(gpusvc_gl_context {
            identity,
            ctx: Rc::new(ctx),
        }));
        live_contexts()
            .get_or_insert_with(HashMap::new)
            .insert(handle.addr(), owner);
        // SAFETY: `out` is non-null (checked) and valid for a write (contract).
        unsafe { *out = handle };
        Ok(())
    })
}

/// Frees a context. NULL is a no-op, and so is a pointer that is not a live context (already
/// freed: this thread's error detail says `GPUSVC_INVALID_HANDLE`). It must be called on the
/// thread that opened the context: from another thread the context cannot be made current to
/// release its objects, so it is left alone (leaked unless freed later on its own thread,
/// never destroyed under another thread's feet) and this thread's error detail
/// (`gpusvc_last_error_detail`, code `GPUSVC_WRONG_THREAD`) says so. Program managers made over
/// the context keep the GL context alive until they are freed.
///
/// # Safety
/// `ctx` must be NULL or a pointer from `gpusvc_gl_context_open`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_free(ctx: *mut gpusvc_gl_context) {
    let _ = ffi_guard(|| {
        if ctx.is_null() {
            return Ok(());
        }
        if live_owner(ctx)? != std::thread::current().id() {
            tracing::error!("gpusvc_gl_context_free called off its thread; context leaked");
            return Err(FfiError::new(
                gpusvc_result::GPUSVC_WRONG_THREAD,
                "gpusvc_gl_context_free called on a thread other than the one that opened the \
                 context; the context was leaked, not destroyed",
            ));
        }
        if let Some(m) = live_contexts().as_mut() {
            m.remove(&ctx.addr());
        }
        // SAFETY: live until the line above and owned by this thread, so it came from
        // `Box::into_raw` in `gpusvc_gl_context_open` and nothing else frees it.
        drop(unsafe { Box::from_raw(ctx) });
        Ok(())
    });
}

/// Reads one of the context's identity strings into `*out`.
///
/// # Safety
/// `ctx` is NULL or a live context; `out` is NULL or valid for one pointer write.
unsafe fn string_out(
    ctx: *const gpusvc_gl_context,
    out: *mut *const c_char,
    pick: impl FnOnce(&Identity) -> &CString,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from the caller's contract.
        let id = unsafe { identity(ctx) }?;
        let out = out_ptr(out, "out")?;
        // SAFETY: `out` is non-null (checked) and valid for a write (contract); the string lives
        // in the context and stays valid until the context is freed.
        unsafe { *out = pick(id).as_ptr() };
        Ok(())
    })
}

/// `GL_VENDOR`, as a NUL-terminated string owned by the context (valid until it is freed).
/// May be called from any thread.
///
/// # Safety
/// `ctx` is NULL or a live context; `out` is NULL or valid for one pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_vendor(
    ctx: *const gpusvc_gl_context,
    out: *mut *const c_char,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { string_out(ctx, out, |i| &i.vendor) }
}

/// `GL_RENDERER`; see `gpusvc_gl_context_vendor`.
///
/// # Safety
/// `ctx` is NULL or a live context; `out` is NULL or valid for one pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_renderer(
    ctx: *const gpusvc_gl_context,
    out: *mut *const c_char,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { string_out(ctx, out, |i| &i.renderer) }
}

/// `GL_VERSION` (it carries the driver version); see `gpusvc_gl_context_vendor`.
///
/// # Safety
/// `ctx` is NULL or a live context; `out` is NULL or valid for one pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_version(
    ctx: *const gpusvc_gl_context,
    out: *mut *const c_char,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { string_out(ctx, out, |i| &i.version) }
}

/// `GL_SHADING_LANGUAGE_VERSION`; see `gpusvc_gl_context_vendor`.
///
/// # Safety
/// `ctx` is NULL or a live context; `out` is NULL or valid for one pointer write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_glsl_version(
    ctx: *const gpusvc_gl_context,
    out: *mut *const c_char,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { string_out(ctx, out, |i| &i.glsl_version) }
}

/// The context's driver identity (`GL_VENDOR`, `GL_RENDERER`, `GL_VERSION` and the kind of
/// context) for the disk cache's compatibility stamp (`gpusvc_program_cache_new_with_disk`). The strings belong to the
/// context and stay valid until it is freed. May be called from any thread.
///
/// # Safety
/// `ctx` is NULL or a live context; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_driver_identity(
    ctx: *const gpusvc_gl_context,
    out: *mut gpusvc_driver_identity,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let id = unsafe { identity(ctx) }?;
        let out = out_ptr(out, "out")?;
        let identity = gpusvc_driver_identity {
            gl_vendor: id.vendor.as_ptr(),
            gl_renderer: id.renderer.as_ptr(),
            gl_version: id.version.as_ptr(),
            context: id.context.as_ptr(),
        };
        // SAFETY: `out` is non-null (checked) and valid for a write (contract); the strings live
        // in the context and stay valid until the context is freed.
        unsafe { out.write(identity) };
        Ok(())
    })
}

/// The API the context speaks, as a `gpusvc_gl_api` value (never AUTO).
///
/// # Safety
/// `ctx` is NULL or a live context; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_api(
    ctx: *const gpusvc_gl_context,
    out: *mut u32,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let id = unsafe { identity(ctx) }?;
        let out = out_ptr(out, "out")?;
        // SAFETY: `out` is non-null (checked) and valid for a write (contract).
        unsafe { *out = id.api as u32 };
        Ok(())
    })
}

/// Whether the context runs on a software rasterizer (llvmpipe) rather than a GPU.
///
/// # Safety
/// `ctx` is NULL or a live context; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_is_software(
    ctx: *const gpusvc_gl_context,
    out: *mut bool,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let id = unsafe { identity(ctx) }?;
        let out = out_ptr(out, "out")?;
        // SAFETY: `out` is non-null (checked) and valid for a write (contract).
        unsafe { *out = id.software };
        Ok(())
    })
}

/// The driver's program-binary formats (`GL_PROGRAM_BINARY_FORMATS`).
///
/// `*out_count` receives how many there are. With `formats` NULL and `len` 0 this only counts.
/// Otherwise `len` must be at least the count (else `GPUSVC_INSUFFICIENT_SIZE`, nothing
/// written) and the formats are copied into `formats`.
///
/// # Safety
/// `ctx` is NULL or a live context; `formats` is NULL or valid for `len` writes; `out_count` is
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_program_binary_formats(
    ctx: *const gpusvc_gl_context,
    formats: *mut u32,
    len: usize,
    out_count: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let id = unsafe { identity(ctx) }?;
        let out_count = out_ptr(out_count, "out_count")?;
        let list = &id.program_binary_formats;
        if !(formats.is_null() && len == 0) {
            let formats = out_ptr(formats, "formats")?;
            if len < list.len() {
                return Err(FfiError::new(
                    gpusvc_result::GPUSVC_INSUFFICIENT_SIZE,
                    format!("{} formats, room for {len}", list.len()),
                ));
            }
            // SAFETY: `formats` is non-null and valid for `len >= list.len()` writes (contract).
            unsafe { std::ptr::copy_nonoverlapping(list.as_ptr(), formats, list.len()) };
        }
        // SAFETY: `out_count` is non-null (checked) and valid for a write (contract).
        unsafe { *out_count = list.len() };
        Ok(())
    })
}
