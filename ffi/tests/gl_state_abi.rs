//! gpusvc never clobbers the host's GL state: with a host context current on the thread (a
//! second headless-gl context standing in for the host's own EGL context), every C call that
//! uses a `gpusvc_gl_context` — open, program manager compile, link (miss, hit), a failing
//! compile and link, vcache measure, and the frees — leaves the host's context current with
//! its GL state (clear color, bound program) untouched. Real driver (llvmpipe).

mod common;

use std::ptr;

use common::*;
use gpusvc::*;
use headless_gl::GlContext;
use headless_gl::glow::{self, HasContext};

const VS: &str = "in vec4 a_position;
void main() { gl_Position = a_position; }
";
const FS: &str = "out vec4 o_color;
void main() { o_color = vec4(0.0, 1.0, 0.0, 1.0); }
";

/// The host context, its program, and the state it set.
struct Host {
    ctx: GlContext,
    _program: headless_gl::Program,
    state: ([f32; 4], Option<glow::NativeProgram>),
}

impl Host {
    fn open(test: &str) -> Option<Host> {
        let ctx = test_support::gl::context_or_skip(test)?;
        let prelude = match ctx.info().api {
            headless_gl::GlApi::Gles => "#version 300 es\nprecision highp float;\n",
            headless_gl::GlApi::DesktopCore => "#version 330 core\n",
        };
        let program = ctx
            .build_program(&format!("{prelude}{VS}"), &format!("{prelude}{FS}"))
            .unwrap();
        {
            let gl = ctx.gl().unwrap();
            // SAFETY: state changes on the host context, current on this thread.
            unsafe {
                gl.clear_color(0.125, 0.25, 0.5, 0.75);
                gl.use_program(Some(program.raw()));
            }
        }
        let mut host = Host {
            ctx,
            _program: program,
            state: ([0.0; 4], None),
        };
        host.state = host.read_state();
        assert_eq!(host.state.0, [0.125, 0.25, 0.5, 0.75]);
        assert!(host.state.1.is_some());
        Some(host)
    }

    /// Reads the state without making the host context current (it must be already).
    fn read_state(&self) -> ([f32; 4], Option<glow::NativeProgram>) {
        let gl = self.ctx.gl().unwrap();
        let mut clear = [0.0f32; 4];
        // SAFETY: state queries on the current context.
        unsafe {
            gl.get_parameter_f32_slice(glow::COLOR_CLEAR_VALUE, &mut clear);
            (clear, gl.get_parameter_program(glow::CURRENT_PROGRAM))
        }
    }

    /// The host's context is current and its state unchanged, after `what`.
    #[track_caller]
    fn check(&self, what: &str) {
        // Checked before `read_state`, which would make it current.
        assert!(
            self.ctx.is_current(),
            "after {what}: the host's context is not current"
        );
        assert_eq!(
            self.read_state(),
            self.state,
            "after {what}: the host's GL state changed"
        );
    }
}

fn shader(
    m: *mut gpusvc_program_manager,
    stage: u32,
    src: &str,
) -> *mut gpusvc_program_manager_shader {
    let mut s = ptr::null_mut();
    // SAFETY: live manager, source buffer and out slot.
    let r = unsafe {
        gpusvc_program_manager_shader_new(m, stage, src.as_ptr().cast(), src.len(), &mut s)
    };
    assert_eq!(r, OK, "{}", last_detail());
    s
}

fn compile(m: *mut gpusvc_program_manager, s: *mut gpusvc_program_manager_shader) -> u32 {
    let mut outcome = 99;
    // SAFETY: live handles and out slot.
    let r = unsafe { gpusvc_program_manager_compile(m, s, &mut outcome) };
    assert_eq!(r, OK, "{}", last_detail());
    outcome
}

fn link(
    m: *mut gpusvc_program_manager,
    vs: *mut gpusvc_program_manager_shader,
    fs: *mut gpusvc_program_manager_shader,
) -> Result<*mut gpusvc_program_manager_linked_program, gpusvc_result> {
    let mut p = ptr::null_mut();
    // SAFETY: live handles and out slot; NULL options.
    let r = unsafe { gpusvc_program_manager_link(m, vs, fs, ptr::null(), &mut p) };
    if r == OK { Ok(p) } else { Err(r) }
}

#[test]
fn calls_on_our_context_leave_the_hosts_context_current_and_untouched() {
    let Some(host) = Host::open("calls_on_our_context_leave_the_hosts_context_current") else {
        return;
    };
    host.check("opening the host context");

    let mut ctx = ptr::null_mut();
    // SAFETY: a live out slot.
    let r = unsafe { gpusvc_gl_context_open(0, &mut ctx) };
    assert_eq!(r, OK, "{}", last_detail());
    host.check("gpusvc_gl_context_open");
    let (vs_src, fs_src) = (glsl(ctx, VS), glsl(ctx, FS));

    let mut cache = ptr::null_mut();
    // SAFETY: a live config and out slot.
    let r = unsafe {
        gpusvc_program_cache_new(&cache_config(1 << 22), None, ptr::null_mut(), &mut cache)
    };
    assert_eq!(r, OK, "{}", last_detail());
    let mut m = ptr::null_mut();
    // SAFETY: live handles and out slot.
    let r = unsafe { gpusvc_program_manager_new_gl(ctx, cache, c"gl state".as_ptr(), &mut m) };
    assert_eq!(r, OK, "{}", last_detail());
    host.check("gpusvc_program_manager_new_gl");

    let vs = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, &vs_src);
    let fs = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, &fs_src);
    assert_eq!(
        compile(m, vs),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
    );
    host.check("compile (driver)");
    assert_eq!(
        compile(m, fs),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
    );
    let cold = link(m, vs, fs).unwrap_or_else(|r| panic!("{r:?}: {}", last_detail()));
    host.check("link (miss: link and program binary saved)");

    let vs2 = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, &vs_src);
    let fs2 = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, &fs_src);
    assert_eq!(
        compile(m, vs2),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED
    );
    assert_eq!(
        compile(m, fs2),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED
    );
    let hit = link(m, vs2, fs2).unwrap_or_else(|r| panic!("{r:?}: {}", last_detail()));
    let mut origin = 99;
    // SAFETY: a live handle and out slot.
    unsafe { gpusvc_program_manager_linked_program_origin(hit, &mut origin) };
    assert_eq!(origin, GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
    host.check("link (hit: program binary loaded)");

    // Failures restore too: a shader the driver refuses, and a link with it.
    let bad = shader(
        m,
        GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
        &glsl(ctx, "void main() { nope; }"),
    );
    assert_eq!(
        compile(m, bad),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED
    );
    host.check("a failed compile");
    assert!(link(m, vs, bad).is_err());
    host.check("a failed link");

    // The vertex-cache measure draws on our context.
    let indices: Vec<u32> = (0..30).collect();
    let mut measured = gpusvc_vcache_measurement::default();
    let mut counts = vec![0u32; 30];
    // SAFETY: a live context, slices and out slots.
    let r = unsafe {
        gpusvc_vcache_measure(
            ctx,
            indices.as_ptr(),
            indices.len(),
            30,
            ptr::null(),
            &mut measured,
            counts.as_mut_ptr(),
            counts.len(),
        )
    };
    if r == OK {
        assert!(counts.iter().all(|&c| c == 1), "{counts:?}");
    } else {
        eprintln!("vcache measure unavailable here: {r:?}: {}", last_detail());
    }
    host.check("gpusvc_vcache_measure");

    // Frees delete GL objects on our context.
    for p in [cold, hit] {
        // SAFETY: live handles, freed once.
        assert_eq!(unsafe { gpusvc_program_manager_linked_program_free(p) }, OK);
        host.check("gpusvc_program_manager_linked_program_free");
    }
    for s in [vs, fs, vs2, fs2, bad] {
        // SAFETY: live handles, freed once.
        assert_eq!(unsafe { gpusvc_program_manager_shader_free(s) }, OK);
    }
    host.check("gpusvc_program_manager_shader_free");
    // SAFETY: live handles, freed once; the manager is the context's last owner.
    unsafe {
        gpusvc_gl_context_free(ctx);
        host.check("gpusvc_gl_context_free (the manager keeps it)");
        assert_eq!(gpusvc_program_manager_free(m), OK);
        host.check("gpusvc_program_manager_free (the context destroyed)");
        assert_eq!(gpusvc_program_cache_free(cache), OK);
    }
    host.check("the end");
}

#[test]
fn refused_and_gles_opens_restore_too() {
    let Some(host) = Host::open("refused_and_gles_opens_restore_too") else {
        return;
    };
    let mut ctx = ptr::null_mut();
    // SAFETY: a live out slot; 7 is not a gpusvc_gl_api value.
    let r = unsafe { gpusvc_gl_context_open(7, &mut ctx) };
    assert_eq!(r, gpusvc_result::GPUSVC_INVALID_ARGUMENT);
    host.check("a refused open");
    // An open that makes and releases contexts: the GLES one after the core one.
    // SAFETY: a live out slot.
    let r = unsafe { gpusvc_gl_context_open(2, &mut ctx) };
    host.check("opening a GLES context");
    if r == OK {
        // SAFETY: a live context on its thread.
        unsafe { gpusvc_gl_context_free(ctx) };
        host.check("freeing it");
    }
}
