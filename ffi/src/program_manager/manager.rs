//! `gpusvc_program_manager_*`: making a program manager (over a GL context or the host's GL),
//! and its compile and link through the cache.

use std::ffi::c_char;

#[cfg(feature = "gl")]
use program_cache::OwnedGlBackend;
use program_cache::{DynBackend, LinkFailure, ProgramManager, ProgramOptions};

#[cfg(feature = "gl")]
use crate::gl::{gl_context, gpusvc_gl_context};
use crate::kit::handle::{self, Kind};
use crate::kit::{FfiError, Out, cstr_in, ffi_guard, gpusvc_result, invalid_argument, sized_in};
use crate::program_cache::{cache, gpusvc_program_cache, link_options_in};
use crate::program_manager::host_gl::{HostBackend, HostGl, gpusvc_program_manager_host_gl};
use crate::program_manager::objects::{LinkedHandle, manager, shader};
use crate::program_manager::{
    compile_outcome_out, gpusvc_program_manager, gpusvc_program_manager_linked_program,
    gpusvc_program_manager_program_options, gpusvc_program_manager_shader,
};

/// Creates a program manager over a headless GL context (`gpusvc_gl_context_open`) and a
/// cache. `backend_identity` (translator / ANGLE version; may be empty) goes into every program
/// key. Must be called on the context's thread (`GPUSVC_WRONG_THREAD` otherwise); the manager,
/// its shaders and programs are bound to that thread. The manager shares ownership of the
/// context and the cache: either may be freed first.
///
/// # Safety
/// `ctx` is NULL or a pointer from `gpusvc_gl_context_open`; `backend_identity` is NULL or a
/// NUL-terminated string; `out` is NULL or valid for one write.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_new_gl(
    ctx: *const gpusvc_gl_context,
    cache: *const gpusvc_program_cache,
    backend_identity: *const c_char,
    out: *mut *mut gpusvc_program_manager,
) -> gpusvc_result {
    ffi_guard(|| {
        let ctx = gl_context(ctx)?;
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let identity = unsafe { cstr_in(backend_identity, "backend_identity") }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let backend = DynBackend::new(OwnedGlBackend::new(ctx));
        let manager = ProgramManager::new(backend, cache, identity);
        let handle = handle::new_local(Kind::ProgramManager, manager);
        out.write(handle);
        Ok(())
    })
}

/// Creates a program manager over the host's GL entry points (see `gpusvc_program_manager_host_gl`; the struct
/// is copied, the required callbacks must be non-NULL) and a cache. The manager, its shaders
/// and programs are bound to the calling thread.
///
/// # Safety
/// `gl` is NULL or valid for one read, its callbacks as documented on `gpusvc_program_manager_host_gl`;
/// `backend_identity` is NULL or a NUL-terminated string; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_new_host(
    gl: *const gpusvc_program_manager_host_gl,
    cache: *const gpusvc_program_cache,
    backend_identity: *const c_char,
    out: *mut *mut gpusvc_program_manager,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: NULL or valid for one read (contract).
        let gl = HostGl::new(&unsafe { sized_in(gl, "gl") }?)?;
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let identity = unsafe { cstr_in(backend_identity, "backend_identity") }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let backend = DynBackend::new(HostBackend::new(gl));
        let manager = ProgramManager::new(backend, cache, identity);
        let handle = handle::new_local(Kind::ProgramManager, manager);
        out.write(handle);
        Ok(())
    })
}

/// Frees a manager. NULL is a no-op; a freed or unknown handle is `GPUSVC_INVALID_HANDLE`; from
/// another thread `GPUSVC_WRONG_THREAD` (nothing freed). Its shaders and linked programs stay
/// valid (they cannot be compiled or linked any more) until they are freed.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_free(
    manager: *mut gpusvc_program_manager,
) -> gpusvc_result {
    ffi_guard(|| handle::free(manager, Kind::ProgramManager))
}

/// Compiles a shader (`glCompileShader` through the cache): when its compile status is known
/// the driver compile is deferred (`GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED`); otherwise the driver
/// compiles it and, only when it succeeds, the status is recorded. A failed compile is an
/// outcome (`GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED`, log in `gpusvc_program_manager_shader_info_log`), not an error.
///
/// # Safety
/// `out_outcome` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_compile(
    manager: *const gpusvc_program_manager,
    shader: *const gpusvc_program_manager_shader,
    out_outcome: *mut u32,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let s = self::shader(shader, "shader")?;
        // SAFETY: an output argument (this function's contract).
        let out_outcome = unsafe { Out::new(out_outcome, "out_outcome") }?;
        let mut m = m.borrow_mut()?;
        let mut s = s.borrow_mut()?;
        // A shader of another manager: "the given shader belongs to another program manager".
        let outcome = m
            .compile(&mut s.shader)
            .map_err(|e| invalid_argument(e.to_string()))?;
        s.c_variables = None;
        out_outcome.write(compile_outcome_out(outcome));
        Ok(())
    })
}

fn link_failure(e: &LinkFailure) -> FfiError {
    let code = match e {
        LinkFailure::ShaderNotCompiled { .. } => {
            gpusvc_result::GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED
        }
        LinkFailure::Compile { .. } => gpusvc_result::GPUSVC_PROGRAM_CACHE_COMPILE_FAILED,
        LinkFailure::Link { .. } => gpusvc_result::GPUSVC_PROGRAM_CACHE_LINK_FAILED,
        // "the vertex shader belongs to another program manager", "`vertex` is a fragment
        // shader": refused before anything was compiled or linked.
        LinkFailure::ForeignShader { .. }
        | LinkFailure::WrongStage { .. }
        | LinkFailure::Stages(_)
        | LinkFailure::ForeignLink { .. } => gpusvc_result::GPUSVC_INVALID_ARGUMENT,
    };
    FfiError::new(code, e.to_string())
}

/// Reads link options from C (NULL: no bindings, no transform feedback, no page).
///
/// # Safety
/// `options` is NULL or valid for reading `options->struct_size` bytes, its pointers as
/// documented.
unsafe fn program_options_in(
    options: *const gpusvc_program_manager_program_options,
) -> Result<ProgramOptions, FfiError> {
    if options.is_null() {
        return Ok(ProgramOptions::default());
    }
    // SAFETY: non-null and valid for `struct_size` bytes (contract).
    let o = unsafe { sized_in(options, "options") }?;
    Ok(ProgramOptions {
        // SAFETY: forwarded from this function's contract.
        link: unsafe { link_options_in(&o.link) }?,
        page: o.has_page.then_some(o.page),
    })
}

/// Links a vertex and a fragment shader of `manager` through the cache (`glLinkProgram`):
/// a cached binary is loaded (`GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT`, the shaders' variable maps are
/// restored, nothing is compiled, linked or saved); a binary the driver refuses is evicted and
/// the program is built from source (`..._RELINKED_AFTER_REJECTION`); a miss compiles what was
/// deferred, links and saves the binary (`..._LINKED`). `options` may be NULL (no bindings, no
/// transform feedback, no page).
///
/// Errors: `GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED`, `..._COMPILE_FAILED` (a deferred shader
/// failed), `..._LINK_FAILED`, with the driver's log in `gpusvc_last_error_detail`.
///
/// # Safety
/// `options` is NULL or valid for one read, its pointers as documented on its fields; `out` is
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_link(
    manager: *const gpusvc_program_manager,
    vertex: *const gpusvc_program_manager_shader,
    fragment: *const gpusvc_program_manager_shader,
    options: *const gpusvc_program_manager_program_options,
    out: *mut *mut gpusvc_program_manager_linked_program,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let vs = self::shader(vertex, "vertex")?;
        let fs = self::shader(fragment, "fragment")?;
        if vertex.addr() == fragment.addr() {
            return Err(invalid_argument("vertex and fragment are the same shader"));
        }
        // SAFETY: forwarded from this function's contract.
        let options = unsafe { program_options_in(options) }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let mut m = m.borrow_mut()?;
        let mut vs = vs.borrow_mut()?;
        let mut fs = fs.borrow_mut()?;
        let linked = m.link(&mut vs.shader, &mut fs.shader, &options);
        // A shader of another manager or a wrong stage is refused before anything happens; any
        // other outcome may have restored or compiled something, so the variable maps are read
        // again.
        if !matches!(
            linked,
            Err(LinkFailure::ForeignShader { .. } | LinkFailure::WrongStage { .. })
        ) {
            vs.c_variables = None;
            fs.c_variables = None;
        }
        let linked = LinkedHandle::new(linked.map_err(|e| link_failure(&e))?);
        let handle = handle::new_local(Kind::LinkedProgram, linked);
        out.write(handle);
        Ok(())
    })
}
