//! Helpers shared by the ffi integration tests (each test file includes this module; not every
//! file uses every helper).

#![allow(dead_code)]

use std::ffi::{CStr, c_char};
use std::ptr;

use gpusvc::*;
use test_support::gl::{gl_required, isolate_shader_cache};

pub(crate) const OK: gpusvc_result = gpusvc_result::GPUSVC_OK;

pub(crate) const NORMAL: u32 = gpusvc_scheduler_priority::GPUSVC_SCHEDULER_PRIORITY_NORMAL as u32;
pub(crate) const HIGH: u32 = gpusvc_scheduler_priority::GPUSVC_SCHEDULER_PRIORITY_HIGH as u32;
pub(crate) const DONE: u32 = gpusvc_scheduler_task_result::GPUSVC_SCHEDULER_TASK_DONE as u32;
pub(crate) const CONTINUE: u32 =
    gpusvc_scheduler_task_result::GPUSVC_SCHEDULER_TASK_CONTINUE_LATER as u32;

/// Calls `call` with an output slot holding `init`, asserts `GPUSVC_OK` and returns what the
/// slot holds then.
pub(crate) fn written<T>(init: T, call: impl FnOnce(*mut T) -> gpusvc_result) -> T {
    let mut slot = init;
    assert_eq!(call(&mut slot), OK);
    slot
}

/// A new sync manager (`gpusvc_sync_manager_new`, asserted `GPUSVC_OK`).
pub(crate) fn new_sync_manager() -> *mut gpusvc_sync_manager {
    // SAFETY: a live out slot.
    written(ptr::null_mut(), |out| unsafe {
        gpusvc_sync_manager_new(out)
    })
}

/// Frees a sync manager (`gpusvc_sync_manager_free`, asserted `GPUSVC_OK`).
pub(crate) fn free_sync_manager(m: *mut gpusvc_sync_manager) {
    // SAFETY: a handle value; the registry checks it.
    assert_eq!(unsafe { gpusvc_sync_manager_free(m) }, OK);
}

/// A new scheduler over `manager` (NULL: its own) made with `config` (None:
/// `gpusvc_scheduler_new`), asserted `GPUSVC_OK`.
pub(crate) fn new_scheduler(
    manager: *const gpusvc_sync_manager,
    config: Option<&gpusvc_scheduler_config>,
) -> *mut gpusvc_scheduler {
    written(ptr::null_mut(), |out| match config {
        // SAFETY: a live out slot; NULL or a live manager.
        None => unsafe { gpusvc_scheduler_new(manager, out) },
        // SAFETY: as above, and a live config whose callbacks' user data outlives the
        // scheduler (the callers' contract).
        Some(c) => unsafe { gpusvc_scheduler_new_with_config(manager, c, out) },
    })
}

/// Adds a stream of priority `p` to `sched`; its id.
pub(crate) fn add_stream(sched: *const gpusvc_scheduler, p: u32) -> u64 {
    // SAFETY: a live handle and out slot.
    written(0, |out| unsafe {
        gpusvc_scheduler_add_stream(sched, p, out)
    })
}

/// The desktop profile's cache configuration with another budget.
pub(crate) fn cache_config(budget: usize) -> gpusvc_program_cache_config {
    let mut c = gpusvc_program_cache_config {
        struct_size: size_of::<gpusvc_program_cache_config>(),
        budget_bytes: 0,
        policy: 0,
        max_unreferenced_shader_statuses: 0,
        persist_sink: ptr::null(),
        cache_transform_feedback: false,
        reserved: [0; 7],
    };
    // SAFETY: `c` is a live local.
    let r = unsafe {
        gpusvc_program_cache_config_defaults(GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP, &mut c)
    };
    assert_eq!(r, OK);
    c.budget_bytes = budget;
    c
}

/// This thread's `gpusvc_last_error_detail`.
pub(crate) fn last_detail() -> String {
    let mut buf = [0 as c_char; 1024];
    let mut n = 0;
    // SAFETY: a 1024-byte buffer and a live usize.
    let r = unsafe { gpusvc_last_error_detail(buf.as_mut_ptr(), buf.len(), &mut n) };
    assert_eq!(r, OK);
    // SAFETY: NUL-terminated on success.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Opens a context of `api` (a `gpusvc_gl_api` value) through the ABI, or skips under the
/// `GPUSVC_REQUIRE_GL` policy (None, after printing why).
pub(crate) fn open_gl_context(test: &str, api: u32) -> Option<*mut gpusvc_gl_context> {
    isolate_shader_cache();
    let mut ctx = ptr::null_mut();
    // SAFETY: `ctx` is a live pointer slot.
    let r = unsafe { gpusvc_gl_context_open(api, &mut ctx) };
    if r == OK {
        assert!(!ctx.is_null());
        return Some(ctx);
    }
    assert!(ctx.is_null(), "output written on failure");
    let why = format!("{r:?}: {}", last_detail());
    assert!(
        !gl_required(),
        "{test}: GPUSVC_REQUIRE_GL is set but no context: {why}"
    );
    eprintln!("SKIP {test}: no GL context: {why}");
    None
}

/// `body` with the GLSL version line (and precision) the context's API needs.
pub(crate) fn glsl(ctx: *const gpusvc_gl_context, body: &str) -> String {
    let mut api = 0;
    // SAFETY: live context and out slot.
    assert_eq!(unsafe { gpusvc_gl_context_api(ctx, &mut api) }, OK);
    let prelude = if api == gpusvc_gl_api::GPUSVC_GL_API_GLES as u32 {
        "#version 300 es\nprecision highp float;\n"
    } else {
        "#version 330 core\n"
    };
    format!("{prelude}{body}")
}
