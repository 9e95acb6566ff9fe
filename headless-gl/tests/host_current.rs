//! `KeepHostCurrent` on the real driver: a host context current on the thread, work on another
//! context inside the scope (open, compile, link, program binary, drop), and afterwards the
//! host's context is current again with its GL state (clear color, bound program) untouched.

use headless_gl::{GlContext, KeepHostCurrent, glow};
use test_support::gl::context_or_skip;
use test_support::shaders::{VS, with_prelude};

use glow::HasContext;

const FS: &str = "
out vec4 o_color;
void main() { o_color = vec4(1.0, 0.5, 0.25, 1.0); }
";

/// The host's GL state that gpusvc work must not touch.
fn host_state(host: &GlContext) -> ([f32; 4], Option<glow::NativeProgram>) {
    let gl = host.gl().unwrap();
    let mut clear = [0.0f32; 4];
    // SAFETY: state queries on the host context, current on this thread.
    unsafe {
        gl.get_parameter_f32_slice(glow::COLOR_CLEAR_VALUE, &mut clear);
        let program = gl.get_parameter_program(glow::CURRENT_PROGRAM);
        (clear, program)
    }
}

#[test]
fn the_host_context_is_current_again_after_a_scope() {
    let Some(host) = context_or_skip("the_host_context_is_current_again_after_a_scope") else {
        return;
    };
    let host_program = host
        .build_program(&with_prelude(&host, VS), &with_prelude(&host, FS))
        .unwrap();
    {
        let gl = host.gl().unwrap();
        // SAFETY: state changes on the host context, current on this thread.
        unsafe {
            gl.clear_color(0.25, 0.5, 0.75, 1.0);
            gl.use_program(Some(host_program.raw()));
        }
    }
    let before = host_state(&host);
    assert!(host.is_current());

    let ours = {
        let _keep = KeepHostCurrent::new();
        let ours = GlContext::open_default().expect("a second context opens");
        let program = ours
            .build_program(&with_prelude(&ours, VS), &with_prelude(&ours, FS))
            .unwrap();
        let binary = ours.program_binary(&program).unwrap();
        let again = ours.load_program_binary(&binary).unwrap();
        // A nested scope does not restore early.
        {
            let _inner = KeepHostCurrent::new();
            ours.gl().unwrap();
        }
        assert!(ours.is_current(), "restored by a nested scope");
        drop((program, again));
        ours
    };
    assert!(host.is_current(), "our context left current");
    assert!(!ours.is_current());
    assert_eq!(host_state(&host), before);

    // A failure inside the scope restores all the same: a binary the driver refuses.
    {
        let _keep = KeepHostCurrent::new();
        let program = ours
            .build_program(&with_prelude(&ours, VS), &with_prelude(&ours, FS))
            .unwrap();
        let mut binary = ours.program_binary(&program).unwrap();
        binary.bytes.iter_mut().for_each(|b| *b = !*b);
        assert!(ours.load_program_binary(&binary).is_err());
    }
    assert!(host.is_current());
    assert_eq!(host_state(&host), before);

    // Dropping our context inside a scope (its objects first) restores too.
    {
        let _keep = KeepHostCurrent::new();
        drop(ours);
    }
    assert!(host.is_current());
    assert_eq!(host_state(&host), before);

    // Without a scope our context stays current (the crate's own rule).
    let ours = GlContext::open_default().unwrap();
    ours.gl().unwrap();
    assert!(ours.is_current() && !host.is_current());
}

#[test]
fn with_nothing_current_before_nothing_is_current_after() {
    // A fresh thread has nothing current.
    std::thread::spawn(|| {
        let Some(ctx) = ({
            let _keep = KeepHostCurrent::new();
            let ctx = context_or_skip("with_nothing_current_before_nothing_is_current_after");
            if let Some(ctx) = &ctx {
                ctx.build_program(&with_prelude(ctx, VS), &with_prelude(ctx, FS))
                    .unwrap();
                assert!(ctx.is_current());
            }
            ctx
        }) else {
            return;
        };
        assert!(!ctx.is_current(), "left current where nothing was");
        // Made current again on demand.
        ctx.build_program(&with_prelude(&ctx, VS), &with_prelude(&ctx, FS))
            .unwrap();
        assert!(ctx.is_current());
    })
    .join()
    .unwrap();
}
