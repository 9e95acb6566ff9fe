//! `gpusvc_gl_context_*`: a headless GL context on the machine's driver, seen from C.
// Without the `gl` feature only the types C shares with the program cache stay (the driver
// identity, the API enum, the opaque context type); the exports need headless-gl.
#![cfg_attr(not(feature = "gl"), allow(dead_code, unused_imports))]

use std::ffi::{CString, c_char};
use std::rc::Rc;
use std::sync::Arc;

#[cfg(feature = "gl")]
use headless_gl::{ApiPreference, ContextError, ContextOptions, GlApi, GlContext};

use crate::kit::handle::{self, Kind};
use crate::kit::{
    FfiError, Out, answer_into, answer_sized_into, c_enum, c_string, ffi_guard, gpusvc_result,
    growable, list_out,
};

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

c_enum!(impl gpusvc_gl_api {
    GPUSVC_GL_API_AUTO,
    GPUSVC_GL_API_DESKTOP_CORE,
    GPUSVC_GL_API_GLES,
});

/// An opaque headless GL context, bound to the thread that opened it (a handle of the
/// thread-bound kind: its identity strings may be read from any thread; anything else, `_free`
/// included, only on its own thread).
#[derive(Debug)]
pub struct gpusvc_gl_context {
    _opaque: [u8; 0],
}

/// The driver identity that goes into the program cache's compatibility stamp: `GL_VENDOR`,
/// `GL_RENDERER` and `GL_VERSION` (UTF-8, NUL-terminated). From a `gpusvc_gl_context` with
/// `gpusvc_gl_context_driver_identity`, or the host's own strings. The host sets `struct_size =
/// sizeof(struct gpusvc_driver_identity)` whether it fills the struct or has it filled.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_driver_identity {
    /// `sizeof(struct gpusvc_driver_identity)`, set by the host: passed in, the library reads
    /// only that many bytes (fields past it: NULL); filled by the library, it writes only that
    /// many bytes and sets this to the bytes written.
    pub struct_size: usize,
    /// `GL_VENDOR`.
    pub gl_vendor: *const c_char,
    /// `GL_RENDERER`.
    pub gl_renderer: *const c_char,
    /// `GL_VERSION` (carries the driver version).
    pub gl_version: *const c_char,
    /// The kind of context, e.g. "OpenGL core profile" or "OpenGL ES"; NULL for "". Stores of
    /// different kinds of context on one folder are kept apart and do not replace each other.
    pub context: *const c_char,
}

growable!(gpusvc_driver_identity {
    first: context,
    last: context,
    defaults: gpusvc_driver_identity {
        struct_size: 0,
        gl_vendor: std::ptr::null(),
        gl_renderer: std::ptr::null(),
        gl_version: std::ptr::null(),
        context: std::ptr::null(),
    },
});

/// The GL context behind a live handle, for use on its own thread (`GPUSVC_WRONG_THREAD` from
/// any other). Program managers made over the context share it, so the GL context is destroyed
/// when `_free` has run and the last of them is freed.
#[cfg(feature = "gl")]
pub(crate) fn gl_context(ctx: *const gpusvc_gl_context) -> Result<Rc<GlContext>, FfiError> {
    let ctx = handle::local::<_, Rc<GlContext>>(ctx, "ctx", Kind::GlContext)?;
    Ok(ctx.borrow()?.clone())
}

/// The driver identity, copied out of the context at open so that any thread may read it
/// without touching the thread-bound GL context.
#[cfg(feature = "gl")]
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

/// The identity part of a context, from any thread.
#[cfg(feature = "gl")]
fn identity(ctx: *const gpusvc_gl_context) -> Result<Arc<Identity>, FfiError> {
    handle::view(ctx, "ctx", Kind::GlContext)
}

#[cfg(feature = "gl")]
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
/// one, else Mesa llvmpipe; `GPUSVC_EGL_DEVICE=software|hardware|N` overrides). `api` is a
/// `gpusvc_gl_api` value. The context is current only while a gpusvc call uses it: whatever
/// EGL context (with its surfaces and display) was current on the thread before, or none, is
/// current again when this and every later call returns (see the crate docs, "Host GL state").
///
/// On failure the code says what is missing (`GPUSVC_GL_NO_LIBEGL`, `GPUSVC_GL_NO_DEVICE`,
/// `GPUSVC_GL_NO_MATCHING_CONFIG`, `GPUSVC_GL_VERSION_TOO_OLD`, ...) and
/// `gpusvc_last_error_detail` has the driver's words.
///
/// # Safety
/// `out` must be valid for one pointer write.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_open(
    api: u32,
    out: *mut *mut gpusvc_gl_context,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let api = match gpusvc_gl_api::decode(api)? {
            gpusvc_gl_api::GPUSVC_GL_API_AUTO => ApiPreference::Auto,
            gpusvc_gl_api::GPUSVC_GL_API_DESKTOP_CORE => ApiPreference::DesktopCore,
            gpusvc_gl_api::GPUSVC_GL_API_GLES => ApiPreference::Gles,
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
        out.write(handle::new_local_with_view(
            Kind::GlContext,
            Rc::new(ctx),
            Some(Arc::new(identity)),
        ));
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
/// None beyond passing a value that came from gpusvc (or NULL).
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_free(ctx: *mut gpusvc_gl_context) {
    let _ = ffi_guard(|| {
        handle::free(ctx, Kind::GlContext).inspect_err(|e| {
            if e.code() == gpusvc_result::GPUSVC_WRONG_THREAD {
                tracing::error!("gpusvc_gl_context_free called off its thread; context leaked");
            }
        })
    });
}

/// The body of an export that answers from the context's identity through `out` (from any
/// thread): the handle is checked, then `out`; the answer is written.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[cfg(feature = "gl")]
unsafe fn identity_query<T>(
    ctx: *const gpusvc_gl_context,
    out: *mut T,
    answer: impl FnOnce(&Identity) -> T,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { answer_into(|| identity(ctx), out, "out", |id| Ok(answer(&id))) }
}

/// Reads one of the context's identity strings into `*out`.
///
/// # Safety
/// `out` is NULL or valid for one pointer write.
#[cfg(feature = "gl")]
unsafe fn string_out(
    ctx: *const gpusvc_gl_context,
    out: *mut *const c_char,
    pick: impl FnOnce(&Identity) -> &CString,
) -> gpusvc_result {
    // The string lives in the context and stays valid until the context is freed.
    // SAFETY: forwarded from this function's contract.
    unsafe { identity_query(ctx, out, |id| pick(id).as_ptr()) }
}

/// `GL_VENDOR`, as a NUL-terminated string owned by the context (valid until it is freed).
/// May be called from any thread.
///
/// # Safety
/// `out` is NULL or valid for one pointer write.
#[cfg(feature = "gl")]
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
/// `out` is NULL or valid for one pointer write.
#[cfg(feature = "gl")]
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
/// `out` is NULL or valid for one pointer write.
#[cfg(feature = "gl")]
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
/// `out` is NULL or valid for one pointer write.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_glsl_version(
    ctx: *const gpusvc_gl_context,
    out: *mut *const c_char,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { string_out(ctx, out, |i| &i.glsl_version) }
}

/// The context's driver identity (`GL_VENDOR`, `GL_RENDERER`, `GL_VERSION` and the kind of
/// context) for the disk cache's compatibility stamp (`gpusvc_program_cache_open`). The strings belong to the
/// context and stay valid until it is freed. May be called from any thread.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes (the host sets it).
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_driver_identity(
    ctx: *const gpusvc_gl_context,
    out: *mut gpusvc_driver_identity,
) -> gpusvc_result {
    // The strings live in the context and stay valid until the context is freed.
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || identity(ctx),
            out,
            "out",
            |id| {
                Ok(gpusvc_driver_identity {
                    struct_size: 0,
                    gl_vendor: id.vendor.as_ptr(),
                    gl_renderer: id.renderer.as_ptr(),
                    gl_version: id.version.as_ptr(),
                    context: id.context.as_ptr(),
                })
            },
        )
    }
}

/// The API the context speaks, as a `gpusvc_gl_api` value (never AUTO).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_api(
    ctx: *const gpusvc_gl_context,
    out: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { identity_query(ctx, out, |id| id.api as u32) }
}

/// Whether the context runs on a software rasterizer (llvmpipe) rather than a GPU.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_is_software(
    ctx: *const gpusvc_gl_context,
    out: *mut bool,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { identity_query(ctx, out, |id| id.software) }
}

/// The driver's program-binary formats (`GL_PROGRAM_BINARY_FORMATS`).
///
/// `*out_count` receives how many there are. With `formats` NULL and `len` 0 this only counts.
/// Otherwise `len` must be at least the count (else `GPUSVC_INSUFFICIENT_SIZE`, nothing
/// written) and the formats are copied into `formats`.
///
/// # Safety
/// `formats` is NULL or valid for `len` writes; `out_count` is
/// NULL or valid for one write.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_gl_context_program_binary_formats(
    ctx: *const gpusvc_gl_context,
    formats: *mut u32,
    len: usize,
    out_count: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let id = identity(ctx)?;
        // SAFETY: forwarded from this function's contract.
        unsafe {
            list_out(
                &id.program_binary_formats,
                (formats, "formats"),
                len,
                (out_count, "out_count"),
                "formats",
            )
        }
    })
}
