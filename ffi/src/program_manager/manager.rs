//! `gpusvc_program_manager_*`: making a program manager (over a GL context or the host's GL),
//! and its compile and link through the cache.

use std::ffi::c_char;
#[cfg(feature = "gl")]
use std::sync::Arc;

#[cfg(feature = "gl")]
use program_cache::OwnedGlBackend;
use std::cell::{RefCell, RefMut};
use std::rc::Weak;

use program_cache::{
    CompileOutcome, DynBackend, DynObject, LinkFailure, ProgramManager, ProgramOptions, Shader,
    ShaderStage,
};

#[cfg(feature = "gl")]
use crate::gl::{gl_context, gpusvc_gl_context};
use crate::kit::handle::{self, Kind};
use crate::kit::{
    FfiError, Out, answer_into, cstr_in, ffi_guard, gpusvc_result, invalid_argument, sized_in,
};
use crate::program_cache::{cache, gpusvc_program_cache, link_options_in};
#[cfg(feature = "gl")]
use crate::program_cache::{gpusvc_restore_ahead, restore_ahead};
use crate::program_manager::host_gl::{HostBackend, HostGl, gpusvc_program_manager_host_gl};
use crate::program_manager::objects::{
    LinkedHandle, Manager, PendingHandle, ShaderHandle, linked, manager, pending, shader,
};
use crate::program_manager::{
    compile_outcome_out, gpusvc_program_manager, gpusvc_program_manager_linked_program,
    gpusvc_program_manager_pending_link, gpusvc_program_manager_program_options,
    gpusvc_program_manager_shader,
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
    // SAFETY: forwarded from this function's contract.
    unsafe { new_gl_manager(ctx, cache, None, backend_identity, out) }
}

/// The body of `gpusvc_program_manager_new_gl` and `_new_gl_restore_ahead`: the handles are
/// checked (and `ahead` against the context's share group and the cache), then the identity
/// and `out`; the manager is written only on success.
///
/// # Safety
/// As `gpusvc_program_manager_new_gl_restore_ahead`.
#[cfg(feature = "gl")]
unsafe fn new_gl_manager(
    ctx: *const gpusvc_gl_context,
    cache: *const gpusvc_program_cache,
    ahead: Option<*const gpusvc_restore_ahead>,
    backend_identity: *const c_char,
    out: *mut *mut gpusvc_program_manager,
) -> gpusvc_result {
    ffi_guard(|| {
        let ctx = gl_context(ctx)?;
        let cache = self::cache(cache)?;
        let ahead = ahead.map(restore_ahead).transpose()?;
        if let Some(ahead) = &ahead {
            if !ahead.serves(&ctx) {
                return Err(invalid_argument(
                    "`ahead` was started from a context of another share group than `ctx`",
                ));
            }
            if !Arc::ptr_eq(ahead.cache(), &cache) {
                return Err(invalid_argument(
                    "`ahead` restores the programs of another cache than `cache`",
                ));
            }
        }
        // SAFETY: forwarded from this function's contract.
        let identity = unsafe { cstr_in(backend_identity, "backend_identity") }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let backend = match ahead {
            Some(ahead) => OwnedGlBackend::new(ctx).with_restore_ahead(ahead),
            None => OwnedGlBackend::new(ctx),
        };
        let manager = ProgramManager::new(DynBackend::new(backend), cache, identity);
        out.write(handle::new_local(Kind::ProgramManager, manager));
        Ok(())
    })
}

/// Like `gpusvc_program_manager_new_gl`, with its cache hits taking the programs `ahead`
/// restored: a hit the thread has a program for adopts it (a GPU-side wait on the fence the
/// thread put after it; the calling thread does not block), one it has not reached restores the
/// binary here, and a restore of that very key under way is waited for. What each link returns
/// is what it returns without `ahead`. `ahead` must have been started from `ctx` and over
/// `cache` (`gpusvc_restore_ahead_start`); another context or cache is
/// `GPUSVC_INVALID_ARGUMENT` (its programs could not be adopted here, or another cache's clears
/// would not be seen). The manager keeps `ahead` until it is freed.
///
/// # Safety
/// As `gpusvc_program_manager_new_gl`; `ahead` is NULL or a handle value.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_new_gl_restore_ahead(
    ctx: *const gpusvc_gl_context,
    cache: *const gpusvc_program_cache,
    ahead: *const gpusvc_restore_ahead,
    backend_identity: *const c_char,
    out: *mut *mut gpusvc_program_manager,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { new_gl_manager(ctx, cache, Some(ahead), backend_identity, out) }
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
    if o.reserved != [0; 7] {
        return Err(invalid_argument(
            "gpusvc_program_manager_program_options.reserved is not all zero",
        ));
    }
    // SAFETY: forwarded from this function's contract.
    let mut link = unsafe { link_options_in(&o.link) }?;
    link.separable = o.separable;
    Ok(ProgramOptions {
        link,
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
        let owner = m.downgrade();
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
        let linked = LinkedHandle::new(owner, linked.map_err(|e| link_failure(&e))?);
        let handle = handle::new_local(Kind::LinkedProgram, linked);
        out.write(handle);
        Ok(())
    })
}

/// Refuses a shader of another manager (its driver object is another backend's).
fn own_shader(m: &Manager, s: &Shader<DynObject>) -> Result<(), FfiError> {
    match s.manager() {
        Some(owner) if owner != m.id() => Err(invalid_argument(
            "the given shader belongs to another program manager",
        )),
        _ => Ok(()),
    }
}

/// The body of the compile exports: the handles and `out_outcome` checked, the shader
/// borrowed from its manager, `step` run, the outcome written.
///
/// # Safety
/// `out_outcome` is NULL or valid for one write.
unsafe fn compile_step(
    manager: *const gpusvc_program_manager,
    shader: *const gpusvc_program_manager_shader,
    out_outcome: *mut u32,
    step: impl FnOnce(&mut Manager, &mut Shader<DynObject>) -> CompileOutcome,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let s = self::shader(shader, "shader")?;
        // SAFETY: an output argument (the caller's contract).
        let out_outcome = unsafe { Out::new(out_outcome, "out_outcome") }?;
        let mut m = m.borrow_mut()?;
        let mut s = s.borrow_mut()?;
        own_shader(&m, &s.shader)?;
        let outcome = step(&mut m, &mut s.shader);
        s.c_variables = None;
        out_outcome.write(compile_outcome_out(outcome));
        Ok(())
    })
}

/// `gpusvc_program_manager_compile` without waiting for the driver
/// (`KHR_parallel_shader_compile`): a status hit (`..._DEFERRED`) or a compile the cache knows
/// to fail (`..._KNOWN_FAILURE`, the driver's log in `gpusvc_program_manager_shader_info_log`)
/// is answered at once; otherwise the driver compile starts and the outcome is
/// `GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_PENDING` (shader state `..._COMPILING`). Poll with
/// `gpusvc_program_manager_compile_ready`; `gpusvc_program_manager_finish_compile` (or a link)
/// gives the result. Without the extension the driver compiles at once and the same calls
/// work. A shader of another manager is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out_outcome` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_start_compile(
    manager: *const gpusvc_program_manager,
    shader: *const gpusvc_program_manager_shader,
    out_outcome: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        compile_step(manager, shader, out_outcome, |m, s| {
            m.start_compile(s)
                .expect("own_shader checked the shader's manager")
        })
    }
}

/// Whether the compile of `shader` has finished (`GL_COMPLETION_STATUS_KHR`): true unless it
/// was started with `gpusvc_program_manager_start_compile` and the driver is still at it. A
/// shader of another manager is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_compile_ready(
    manager: *const gpusvc_program_manager,
    shader: *const gpusvc_program_manager_shader,
    out: *mut bool,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let s = self::shader(shader, "shader")?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let mut m = m.borrow_mut()?;
        let s = s.borrow()?;
        own_shader(&m, &s.shader)?;
        out.write(m.compile_ready(&s.shader));
        Ok(())
    })
}

/// Ends a compile started with `gpusvc_program_manager_start_compile`, waiting for the driver
/// when needed, and writes its outcome (`..._COMPILED` or `..._FAILED`); a shader that is not
/// compiling keeps its state and reports it (`..._COMPILED`, `..._DEFERRED`, or `..._FAILED`
/// for one that failed or was never compiled). A shader of another manager is
/// `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out_outcome` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_finish_compile(
    manager: *const gpusvc_program_manager,
    shader: *const gpusvc_program_manager_shader,
    out_outcome: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { compile_step(manager, shader, out_outcome, |m, s| m.finish_compile(s)) }
}

/// The shaders of a link: `count` (1 to 6, one per stage) distinct, non-NULL live shaders.
/// The count is checked before the array is read.
///
/// # Safety
/// `shaders` is NULL or valid for `count` reads when `count` is 1 to 6.
unsafe fn shader_list(
    shaders: *const *const gpusvc_program_manager_shader,
    count: usize,
) -> Result<Vec<crate::kit::handle::Local<ShaderHandle>>, FfiError> {
    if count == 0 {
        return Err(invalid_argument("count is 0: a program needs a shader"));
    }
    if count > ShaderStage::ALL.len() {
        return Err(invalid_argument(format!(
            "count {count} is more than the {} stages a program can have",
            ShaderStage::ALL.len()
        )));
    }
    // SAFETY: forwarded from this function's contract (count is 1 to 6).
    let list = unsafe { crate::kit::slice_in(shaders, count, "shaders") }?;
    for (i, s) in list.iter().enumerate() {
        if list[..i]
            .iter()
            .any(|t| t.addr() == s.addr() && !s.is_null())
        {
            return Err(invalid_argument(format!(
                "shaders[{i}] is the same shader as an earlier one"
            )));
        }
    }
    list.iter()
        .enumerate()
        .map(|(i, &s)| self::shader(s, &format!("shaders[{i}]")))
        .collect()
}

/// Borrows every shader of a link (`GPUSVC_HANDLE_BUSY` when an outer call holds one).
fn borrow_all(
    list: &[crate::kit::handle::Local<ShaderHandle>],
) -> Result<Vec<RefMut<'_, ShaderHandle>>, FfiError> {
    list.iter().map(|s| s.borrow_mut()).collect()
}

/// Runs `start_link` on borrowed shaders; the variable maps of every shader are read again
/// afterwards unless the link was refused before anything happened.
fn start_link_on(
    m: &mut Manager,
    guards: &mut [RefMut<'_, ShaderHandle>],
    options: &ProgramOptions,
) -> Result<program_cache::PendingLink<DynObject>, LinkFailure> {
    let mut refs: Vec<&mut Shader<DynObject>> = guards.iter_mut().map(|g| &mut g.shader).collect();
    let started = m.start_link(&mut refs, options);
    drop(refs);
    if !matches!(
        started,
        Err(LinkFailure::ForeignShader { .. } | LinkFailure::Stages(_))
    ) {
        for g in guards.iter_mut() {
            g.c_variables = None;
        }
    }
    started
}

/// The body of the exports that link `count` shaders of a manager: reads the arguments (in the
/// exports' order: the manager, the shaders, the options, `out`), borrows the manager and every
/// shader, starts the link and hands it to `finish`, which makes the handle written to `*out`.
/// A failed link, started or finished, is [`link_failure`]'s error and nothing is written.
///
/// # Safety
/// `shaders` is NULL or valid for `count` reads; `options` is NULL or valid for one read, its
/// pointers as documented on its fields; `out` is NULL or valid for one write.
unsafe fn link_into<T>(
    manager: *const gpusvc_program_manager,
    shaders: *const *const gpusvc_program_manager_shader,
    count: usize,
    options: *const gpusvc_program_manager_program_options,
    out: *mut *mut T,
    finish: impl FnOnce(
        &mut Manager,
        Weak<RefCell<Manager>>,
        program_cache::PendingLink<DynObject>,
    ) -> Result<*mut T, LinkFailure>,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        // SAFETY: forwarded from this function's contract.
        let list = unsafe { shader_list(shaders, count) }?;
        // SAFETY: forwarded from this function's contract.
        let options = unsafe { program_options_in(options) }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let owner = m.downgrade();
        let mut m = m.borrow_mut()?;
        let mut guards = borrow_all(&list)?;
        let handle = start_link_on(&mut m, &mut guards, &options)
            .and_then(|started| finish(&mut m, owner, started))
            .map_err(|e| link_failure(&e))?;
        out.write(handle);
        Ok(())
    })
}

/// Links any program kind through the cache (`glLinkProgram` of the attached shaders): a
/// vertex and a fragment shader with optional tessellation and geometry shaders, a compute
/// shader alone, or, with `options->separable`, any graphics stages for a program pipeline.
/// `shaders` holds `count` distinct shaders of `manager` in any order. A cached binary is
/// loaded (`GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT`); a miss compiles what was deferred,
/// links and saves the binary. `options` may be NULL.
///
/// Errors: `GPUSVC_INVALID_ARGUMENT` for `count` 0 or above 6, a repeated shader, a shader of
/// another manager, or shaders that do not make a program (two of one stage, compute with
/// another stage, a program that is not separable without a vertex and a fragment shader),
/// all refused before anything is compiled or linked; `GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED`,
/// `..._COMPILE_FAILED`, `..._LINK_FAILED` (the driver's log in `gpusvc_last_error_detail`,
/// byte for byte also when the cache answered a known failure without the driver).
///
/// # Safety
/// `shaders` is NULL or valid for `count` reads; `options` is NULL or valid for one read, its
/// pointers as documented on its fields; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_link_program(
    manager: *const gpusvc_program_manager,
    shaders: *const *const gpusvc_program_manager_shader,
    count: usize,
    options: *const gpusvc_program_manager_program_options,
    out: *mut *mut gpusvc_program_manager_linked_program,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        link_into(
            manager,
            shaders,
            count,
            options,
            out,
            |m, owner, started| {
                let linked = m.finish_link(started)?;
                Ok(handle::new_local(
                    Kind::LinkedProgram,
                    LinkedHandle::new(owner, linked),
                ))
            },
        )
    }
}

/// Starts a link like `gpusvc_program_manager_link_program` without waiting for the driver
/// (`KHR_parallel_shader_compile`): a cache hit is complete at once; a link the cache knows to
/// fail is `GPUSVC_PROGRAM_CACHE_LINK_FAILED` at once with the driver's log; otherwise deferred
/// shaders are compiled, pending compiles finished and the driver link started. `*out` gets a
/// pending link: poll it with `gpusvc_program_manager_link_ready`, end it with
/// `gpusvc_program_manager_finish_link`. The errors are those of
/// `gpusvc_program_manager_link_program`.
///
/// # Safety
/// As `gpusvc_program_manager_link_program`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_start_link(
    manager: *const gpusvc_program_manager,
    shaders: *const *const gpusvc_program_manager_shader,
    count: usize,
    options: *const gpusvc_program_manager_program_options,
    out: *mut *mut gpusvc_program_manager_pending_link,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        link_into(
            manager,
            shaders,
            count,
            options,
            out,
            |m, _owner, started| {
                Ok(handle::new_local(
                    Kind::PendingLink,
                    PendingHandle {
                        manager: m.id(),
                        pending: Some(started),
                    },
                ))
            },
        )
    }
}

/// The pending link, checked to be `m`'s.
fn own_pending(m: &Manager, p: &crate::kit::handle::Local<PendingHandle>) -> Result<(), FfiError> {
    if p.borrow()?.manager != m.id() {
        return Err(invalid_argument(
            "the pending link belongs to another program manager",
        ));
    }
    Ok(())
}

/// Whether a started link has finished on the driver (`GL_COMPLETION_STATUS_KHR`; a cache hit:
/// at once). A pending link of another manager is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_link_ready(
    manager: *const gpusvc_program_manager,
    pending: *const gpusvc_program_manager_pending_link,
    out: *mut bool,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let p = self::pending(pending)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let mut m = m.borrow_mut()?;
        own_pending(&m, &p)?;
        let p = p.borrow()?;
        let ready = p.pending.as_ref().is_none_or(|p| m.link_ready(p));
        out.write(ready);
        Ok(())
    })
}

/// Ends a started link, waiting for the driver when needed: the program is reflected and, on a
/// cache miss, its binary read and saved (now, or later with
/// `gpusvc_program_manager_set_defer_binary_reads`) or the failure recorded with the driver's
/// log. `pending` is consumed (freed) by every call that gets past the argument checks, on
/// success and on a link failure (`GPUSVC_PROGRAM_CACHE_LINK_FAILED`, log in
/// `gpusvc_last_error_detail`) alike: it is never used again. An argument error (NULL, a freed
/// handle, another thread, a pending link of another manager: `GPUSVC_INVALID_ARGUMENT`)
/// leaves it live.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_finish_link(
    manager: *const gpusvc_program_manager,
    pending: *mut gpusvc_program_manager_pending_link,
    out: *mut *mut gpusvc_program_manager_linked_program,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let p = self::pending(pending)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let owner = m.downgrade();
        let mut m = m.borrow_mut()?;
        own_pending(&m, &p)?;
        let taken = p.borrow_mut()?.pending.take();
        drop(p);
        handle::free(pending, Kind::PendingLink)?;
        let taken = taken.ok_or_else(|| invalid_argument("the pending link was already used"))?;
        let linked = m.finish_link(taken).map_err(|e| link_failure(&e))?;
        let handle = handle::new_local(Kind::LinkedProgram, LinkedHandle::new(owner, linked));
        out.write(handle);
        Ok(())
    })
}

/// Drops a started link without finishing it (its driver program is deleted; nothing is
/// saved). NULL is a no-op; a freed, consumed or unknown handle is `GPUSVC_INVALID_HANDLE`;
/// from another thread `GPUSVC_WRONG_THREAD`.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_pending_link_free(
    pending: *mut gpusvc_program_manager_pending_link,
) -> gpusvc_result {
    ffi_guard(|| handle::free(pending, Kind::PendingLink))
}

/// Whether a link that misses the cache leaves the program binary in the driver until
/// `gpusvc_program_manager_save_deferred_binary` (a host calls it when its context is idle)
/// instead of reading it when the link finishes (the default, false). At most 1024 programs
/// holding at most 16 MiB wait (`gpusvc_program_manager_deferred_bytes`); past that a link
/// reads its binary at once.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_set_defer_binary_reads(
    manager: *const gpusvc_program_manager,
    on: bool,
) -> gpusvc_result {
    ffi_guard(|| {
        self::manager(manager)?
            .borrow_mut()?
            .set_defer_binary_reads(on);
        Ok(())
    })
}

/// The body of the exports that act on a linked program of `manager` and answer a `bool`:
/// `answer` runs on the borrowed manager and program once the program is checked to be the
/// manager's (another manager's is `GPUSVC_INVALID_ARGUMENT`), and its answer goes to `*out`.
///
/// # Safety
/// `out` is NULL or valid for one write.
unsafe fn own_linked_answer(
    manager: *const gpusvc_program_manager,
    program: *const gpusvc_program_manager_linked_program,
    out: *mut bool,
    answer: impl FnOnce(&mut Manager, &mut LinkedHandle) -> bool,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || Ok((self::manager(manager)?, self::linked(program)?)),
            out,
            "out",
            |(m, p)| {
                let mut m = m.borrow_mut()?;
                let mut p = p.borrow_mut()?;
                if p.manager != m.id() {
                    return Err(invalid_argument(
                        "the linked program belongs to another program manager",
                    ));
                }
                Ok(answer(&mut m, &mut p))
            },
        )
    }
}

/// Reads and saves the binary of `program` if its read was deferred
/// (`gpusvc_program_manager_linked_program_binary_deferred`); `*out` gets whether it was read.
/// A program linked by another manager is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_save_deferred_binary(
    manager: *const gpusvc_program_manager,
    program: *const gpusvc_program_manager_linked_program,
    out: *mut bool,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        own_linked_answer(manager, program, out, |m, p| {
            m.save_deferred_binary(&mut p.linked)
        })
    }
}

/// Drops the deferred binary read of `program` (its binary will not be saved; the manager
/// keeps at most 1024 waiting reads holding at most 16 MiB, and past that reads binaries at
/// once). Freeing the program drops its read too; a free from inside a host callback of a call
/// on its manager drops it at the manager's next call made once that call has returned (at
/// most 4096 such reads wait per thread; past that the oldest waits until its manager is
/// freed). `*out` gets whether there was one. Only
/// `program`'s own read is dropped: another live program of the same shaders keeps its read. A
/// program linked by another manager is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_forget_deferred_binary(
    manager: *const gpusvc_program_manager,
    program: *const gpusvc_program_manager_linked_program,
    out: *mut bool,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        own_linked_answer(manager, program, out, |m, p| {
            m.forget_deferred_read(&mut p.linked)
        })
    }
}

/// How many linked programs of `manager` wait for their binary to be read.
///
/// # Safety
/// `out_count` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_deferred_binaries(
    manager: *const gpusvc_program_manager,
    out_count: *mut usize,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        crate::kit::answer_into(
            || self::manager(manager),
            out_count,
            "out_count",
            |m| Ok(m.borrow()?.deferred_binaries()),
        )
    }
}

/// The bytes the programs of `manager` waiting for their binary read hold (their entries
/// without the binary; at most 16 MiB: a link past that reads its binary at once).
///
/// # Safety
/// `out_bytes` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_deferred_bytes(
    manager: *const gpusvc_program_manager,
    out_bytes: *mut usize,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        crate::kit::answer_into(
            || self::manager(manager),
            out_bytes,
            "out_bytes",
            |m| Ok(m.borrow()?.deferred_bytes()),
        )
    }
}
