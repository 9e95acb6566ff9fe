//! Contexts in one share group on two threads, on the real driver: a thread that
//! `GlContext::spawn_shared` starts makes programs (links one, loads another from a binary),
//! hands them over, and the spawning context adopts them and draws with them; programs never
//! cross share groups.

use headless_gl::glow::HasContext;
use headless_gl::{
    DrawCall, GlContext, HandOverError, HandedProgram, OffscreenTarget, Program, ProgramBinary,
    UniformValue, VertexAttribute,
};
use test_support::gl::context_or_skip;

/// A program that paints `u_color` over the whole target.
fn sources(ctx: &GlContext) -> (String, String) {
    let prelude = ctx.info().glsl_prelude();
    (
        format!(
            "{prelude}in vec2 a_position;\nvoid main() {{ gl_Position = vec4(a_position, 0.0, 1.0); }}\n"
        ),
        format!(
            "{prelude}uniform vec4 u_color;\nout vec4 o_color;\nvoid main() {{ o_color = u_color; }}\n"
        ),
    )
}

/// A context whose driver has program binaries, and the binary of the [`sources`] program
/// (linked, read, let go); `None` (with a printed skip) otherwise.
fn binary_or_skip(test: &str) -> Option<(GlContext, ProgramBinary)> {
    let ctx = context_or_skip(test)?;
    if ctx.info().program_binary_formats.is_empty() {
        eprintln!("SKIP {test}: the driver lists no program binary format");
        return None;
    }
    let (vs, fs) = sources(&ctx);
    let linked = ctx.build_program(&vs, &fs).unwrap();
    let binary = ctx.program_binary(&linked).unwrap();
    Some((ctx, binary))
}

/// Paints `target` with `program` in `color` and reads one pixel back.
fn paint(ctx: &GlContext, target: &OffscreenTarget, program: &Program, color: [f32; 4]) -> [u8; 4] {
    let quad = [-1.0f32, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, 1.0];
    ctx.draw(
        target,
        &DrawCall {
            program,
            attributes: &[VertexAttribute {
                name: "a_position",
                components: 2,
                data: &quad,
            }],
            uniforms: &[("u_color", UniformValue::Vec4(color))],
            mode: headless_gl::glow::TRIANGLE_STRIP,
            vertex_count: 4,
            clear: Some([0.0, 0.0, 0.0, 1.0]),
        },
    )
    .expect("draw");
    let pixels = ctx.read_rgba8(target).expect("read back");
    [pixels[0], pixels[1], pixels[2], pixels[3]]
}

#[test]
fn a_program_linked_on_a_shared_context_thread_draws_in_the_spawning_context() {
    let Some(ctx) = context_or_skip(
        "a_program_linked_on_a_shared_context_thread_draws_in_the_spawning_context",
    ) else {
        return;
    };
    let (vs, fs) = sources(&ctx);
    let handed: HandedProgram = ctx
        .spawn_shared("gl-test-worker", move |made| {
            let worker = made.expect("the shared context is made and current");
            let program = worker.build_program(&vs, &fs).expect("links on the worker");
            worker
                .hand_over(program)
                .map_err(|(e, _)| e)
                .expect("hands over")
        })
        .expect("spawns")
        .join()
        .expect("the worker does not panic");
    let program = ctx.adopt(handed).map_err(|(e, _)| e).expect("adopts");
    let target = ctx.offscreen_target(4, 4).unwrap();
    assert_eq!(
        paint(&ctx, &target, &program, [0.0, 1.0, 0.0, 1.0]),
        [0, 255, 0, 255]
    );
    assert_eq!(
        paint(&ctx, &target, &program, [1.0, 0.0, 1.0, 1.0]),
        [255, 0, 255, 255]
    );
}

#[test]
fn a_binary_loaded_on_a_shared_context_thread_draws_in_the_spawning_context() {
    let Some((ctx, binary)) =
        binary_or_skip("a_binary_loaded_on_a_shared_context_thread_draws_in_the_spawning_context")
    else {
        return;
    };
    let handed = ctx
        .spawn_shared("gl-test-worker", move |made| {
            let worker = made.unwrap();
            let program = worker
                .load_program_binary(&binary)
                .expect("the binary loads");
            worker.hand_over(program).map_err(|(e, _)| e).unwrap()
        })
        .unwrap()
        .join()
        .unwrap();
    let raw = handed.raw();
    let fence = handed.fence();
    let gl = ctx.gl().unwrap();
    // SAFETY: a state query on the current context; the fence is the share group's.
    let fence_there = unsafe { gl.is_sync(fence) };
    assert!(fence_there, "the fence is there until the adoption");
    let program = ctx.adopt(handed).map_err(|(e, _)| e).unwrap();
    // SAFETY: as above; a name that is no sync object reads as false.
    let fence_there = unsafe { gl.is_sync(fence) };
    assert!(!fence_there, "the adoption deletes the fence");
    assert_eq!(program.raw(), raw, "the name is the share group's");
    let target = ctx.offscreen_target(4, 4).unwrap();
    assert_eq!(
        paint(&ctx, &target, &program, [0.0, 0.0, 1.0, 1.0]),
        [0, 0, 255, 255]
    );
    // Adopted, the program is this context's: dropping it deletes it here.
    drop(program);
    let gl = ctx.gl().unwrap();
    // SAFETY: a state query on the current context.
    let still_there = unsafe { gl.is_program(raw) };
    assert!(!still_there, "the adopted program is deleted on drop");
}

#[test]
fn programs_do_not_cross_share_groups() {
    let Some(a) = context_or_skip("programs_do_not_cross_share_groups") else {
        return;
    };
    let b = GlContext::open_default().expect("a second context");
    let (vs, fs) = sources(&a);
    // Handing over another context's program gives it back, still working.
    let of_b = b.build_program(&vs, &fs).unwrap();
    let (e, of_b) = a.hand_over(of_b).expect_err("a program of another context");
    assert_eq!(e, HandOverError::Foreign(headless_gl::ForeignObject));
    let target = b.offscreen_target(2, 2).unwrap();
    assert_eq!(
        paint(&b, &target, &of_b, [1.0, 0.0, 0.0, 1.0]),
        [255, 0, 0, 255]
    );
    // A handed-over program of b's group is refused by a (another group) and given back, so b
    // can still adopt it.
    let handed = b.hand_over(of_b).map_err(|(e, _)| e).unwrap();
    let (e, handed) = a
        .adopt(handed)
        .expect_err("a program of another share group");
    assert_eq!(e, HandOverError::Foreign(headless_gl::ForeignObject));
    let back = b.adopt(handed).map_err(|(e, _)| e).unwrap();
    assert_eq!(
        paint(&b, &target, &back, [0.0, 1.0, 0.0, 1.0]),
        [0, 255, 0, 255]
    );
    // A thread spawned from b is in b's group, not a's.
    let (vs2, fs2) = (vs.clone(), fs.clone());
    let from_b = b
        .spawn_shared("gl-test-worker", move |made| {
            let worker = made.unwrap();
            let p = worker.build_program(&vs2, &fs2).unwrap();
            worker.hand_over(p).map_err(|(e, _)| e).unwrap()
        })
        .unwrap()
        .join()
        .unwrap();
    let (e, from_b) = a.adopt(from_b).expect_err("b's worker is in b's group");
    assert_eq!(e, HandOverError::Foreign(headless_gl::ForeignObject));
    drop(b.adopt(from_b).map_err(|(e, _)| e).unwrap());
}

#[test]
fn dropping_the_spawning_context_at_once_still_lets_the_thread_make_its_context() {
    let Some(first) = context_or_skip(
        "dropping_the_spawning_context_at_once_still_lets_the_thread_make_its_context",
    ) else {
        return;
    };
    drop(first);
    for round in 0..5 {
        let ctx = GlContext::open_default().unwrap();
        let (vs, fs) = sources(&ctx);
        let worker = ctx
            .spawn_shared("gl-test-worker", move |made| {
                let worker = made.map_err(|e| e.to_string())?;
                // The group lives on in the worker's context.
                let p = worker.build_program(&vs, &fs).map_err(|e| e.to_string())?;
                Ok::<_, String>(p.raw())
            })
            .unwrap();
        // The spawning context goes first: its drop waits until the thread has made its
        // context with the handle.
        drop(ctx);
        let made = worker.join().unwrap();
        assert!(made.is_ok(), "round {round}: {made:?}");
    }
}

/// The cycle a restore-ahead goes through on every start: a thread loads a binary, the host
/// adopts it, draws with it while the thread still runs and drops it, the thread ends, then the
/// next thread does the same. On Mesa 22.3 llvmpipe, destroying the first thread's context here
/// made the next round's draw crash the host (found by review; SIGSEGV in 2 of 2 runs with the
/// contexts destroyed); the spawning context now keeps its threads' contexts for reuse.
#[test]
fn thread_after_thread_hands_programs_the_host_draws_with_while_they_run() {
    let Some((ctx, binary)) =
        binary_or_skip("thread_after_thread_hands_programs_the_host_draws_with_while_they_run")
    else {
        return;
    };
    let target = ctx.offscreen_target(4, 4).unwrap();
    for round in 0..6 {
        let (tx, rx) = std::sync::mpsc::channel::<HandedProgram>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let binary = binary.clone();
        let worker = ctx
            .spawn_shared("gl-test-worker", move |made| {
                let worker = made.unwrap();
                // The context is the first thread's, kept and reused: the clear colour the
                // first thread set (context state, not shared) is still there.
                let gl = worker.gl().unwrap();
                // SAFETY: state calls on the context current on this thread.
                let clear = unsafe {
                    let mut clear = [0.0f32; 4];
                    gl.get_parameter_f32_slice(headless_gl::glow::COLOR_CLEAR_VALUE, &mut clear);
                    gl.clear_color(0.25, 0.5, 0.75, 1.0);
                    clear
                };
                if round > 0 {
                    assert_eq!(
                        clear,
                        [0.25, 0.5, 0.75, 1.0],
                        "round {round}: a reused context"
                    );
                }
                let program = worker.load_program_binary(&binary).unwrap();
                tx.send(worker.hand_over(program).map_err(|(e, _)| e).unwrap())
                    .unwrap();
                // Alive, context included, until the host has drawn.
                let _ = done_rx.recv();
            })
            .unwrap();
        let program = ctx.adopt(rx.recv().unwrap()).map_err(|(e, _)| e).unwrap();
        assert_eq!(
            paint(&ctx, &target, &program, [0.0, 1.0, 0.0, 1.0]),
            [0, 255, 0, 255],
            "round {round}"
        );
        drop(program);
        done_tx.send(()).unwrap();
        worker.join().unwrap();
    }
}

#[test]
fn a_thread_name_with_a_nul_byte_is_an_error_not_a_panic() {
    let Some(ctx) = context_or_skip("a_thread_name_with_a_nul_byte_is_an_error_not_a_panic") else {
        return;
    };
    let e = ctx
        .spawn_shared("bad\0name", |_made| ())
        .expect_err("a NUL byte in the name");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    // Nothing is left being made: the drop does not wait.
    drop(ctx);
}
