//! Two-phase compile and link on the real driver: a host starts every compile and link, polls
//! the completion status (`GL_COMPLETION_STATUS_KHR` where the driver has
//! `KHR_parallel_shader_compile`) and finishes them, and gets the same results, info logs and
//! reflection as one that compiles and links synchronously.

use std::time::{Duration, Instant};

use headless_gl::glow::HasContext;
use headless_gl::{
    ActiveVariable, GlContext, LinkError, LinkOptions, Program, ProgramInterface, ShaderError,
    ShaderStage,
};
use test_support::gl::context_or_skip;

/// How long polling may take before the test gives up (a bound, not a measurement).
const POLL_LIMIT: Duration = Duration::from_secs(300);

/// What a program is expected to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Links,
    FailsToLink,
    FailsToCompile,
}

/// `(vertex, fragment, kind)` sources, 72 programs: 60 that link, 8 whose link fails and 4
/// with a fragment shader that does not compile.
fn corpus(ctx: &GlContext) -> Vec<(String, String, Kind)> {
    let prelude = ctx.info().glsl_prelude();
    let mut programs = Vec::new();
    for i in 0..72 {
        let vs = format!(
            "{prelude}in vec2 a_position;\nin vec4 a_color;\nuniform float u_k{k};\n\
             out vec4 v_color;\nvoid main() {{\n    v_color = a_color * {i}.0 / 72.0 + vec4(u_k{k});\n\
             gl_Position = vec4(a_position * {s}.0, 0.0, 1.0);\n}}\n",
            k = i % 3,
            s = i + 1,
        );
        let (fs, kind) = match i % 9 {
            // Type mismatch between stages: a link error.
            4 => (
                format!(
                    "{prelude}in vec3 v_color;\nout vec4 o_color;\n\
                     void main() {{ o_color = vec4(v_color, {i}.0); }}\n"
                ),
                Kind::FailsToLink,
            ),
            // A syntax error: a compile error (and the link of it fails).
            8 if i < 40 => (
                format!("{prelude}out vec4 o_color;\nvoid main() {{ o_color = vec4({i}.0) }}\n"),
                Kind::FailsToCompile,
            ),
            _ => (
                format!(
                    "{prelude}in vec4 v_color;\nuniform vec4 u_tint{t};\nout vec4 o_color;\n\
                     void main() {{ o_color = v_color * u_tint{t} + vec4({i}.0 / 100.0); }}\n",
                    t = i % 4
                ),
                Kind::Links,
            ),
        };
        programs.push((vs, fs, kind));
    }
    programs
}

/// What a host can observe of one program: compile results with logs, then link result with
/// log, or attributes, uniforms and interface.
#[derive(Debug, PartialEq)]
struct Outcome {
    compile: Vec<Result<(), ShaderError>>,
    link: Result<(Vec<ActiveVariable>, Vec<ActiveVariable>, ProgramInterface), LinkError>,
}

fn observe(ctx: &GlContext, linked: Result<Program, LinkError>) -> Outcome {
    Outcome {
        compile: Vec::new(),
        link: linked.map(|p| {
            (
                ctx.active_attributes(&p).unwrap(),
                ctx.active_uniforms(&p).unwrap(),
                ctx.program_interface(&p).unwrap(),
            )
        }),
    }
}

#[test]
fn started_links_finish_with_the_results_and_logs_of_synchronous_ones() {
    let Some(ctx) =
        context_or_skip("started_links_finish_with_the_results_and_logs_of_synchronous_ones")
    else {
        return;
    };
    let max_threads = ctx.max_shader_compiler_threads().unwrap();
    eprintln!(
        "driver: {}\nparallel shader compile: {} (GL_KHR_parallel_shader_compile {}, \
         GL_ARB_parallel_shader_compile {}), GL_MAX_SHADER_COMPILER_THREADS_KHR {:?}",
        ctx.info(),
        ctx.parallel_shader_compile(),
        ctx.gl()
            .unwrap()
            .supported_extensions()
            .contains("GL_KHR_parallel_shader_compile"),
        ctx.gl()
            .unwrap()
            .supported_extensions()
            .contains("GL_ARB_parallel_shader_compile"),
        max_threads.map(|n| format!("{n:#x}")),
    );
    assert_eq!(ctx.parallel_shader_compile(), max_threads.is_some());
    ctx.set_max_shader_compiler_threads(u32::MAX).unwrap();
    let programs = corpus(&ctx);

    // Synchronous: compile (status asked at once), then link.
    let synchronous: Vec<Outcome> = programs
        .iter()
        .map(|(vs, fs, _)| {
            let compile = vec![
                ctx.compile_shader(ShaderStage::Vertex, vs).map(drop),
                ctx.compile_shader(ShaderStage::Fragment, fs).map(drop),
            ];
            // The link of a shader that failed to compile is part of what a host sees too.
            let v = ctx.start_compile_shader(ShaderStage::Vertex, vs).unwrap();
            let f = ctx.start_compile_shader(ShaderStage::Fragment, fs).unwrap();
            Outcome {
                compile,
                ..observe(&ctx, ctx.link_program(&[&v, &f], &LinkOptions::default()))
            }
        })
        .collect();
    for ((_, _, kind), outcome) in programs.iter().zip(&synchronous) {
        match kind {
            Kind::Links => assert!(outcome.link.is_ok(), "{outcome:?}"),
            Kind::FailsToLink => {
                assert!(outcome.compile.iter().all(Result::is_ok));
                assert!(matches!(&outcome.link, Err(LinkError::Link { log }) if !log.is_empty()));
            }
            Kind::FailsToCompile => {
                assert!(matches!(
                    &outcome.compile[1],
                    Err(ShaderError::Compile { log, .. }) if !log.is_empty()
                ));
                assert!(matches!(outcome.link, Err(LinkError::Link { .. })));
            }
        }
    }

    // Two-phase: start every compile, then every link, without asking any status.
    let shaders: Vec<_> = programs
        .iter()
        .map(|(vs, fs, _)| {
            (
                ctx.start_compile_shader(ShaderStage::Vertex, vs).unwrap(),
                ctx.start_compile_shader(ShaderStage::Fragment, fs).unwrap(),
            )
        })
        .collect();
    let started: Vec<Program> = shaders
        .iter()
        .map(|(v, f)| {
            ctx.start_link_program(&[v, f], &LinkOptions::default())
                .unwrap()
        })
        .collect();
    let mut pending_at_first_poll = None;
    let since = Instant::now();
    loop {
        let pending = started
            .iter()
            .filter(|p| !ctx.program_completion(p))
            .count();
        pending_at_first_poll.get_or_insert(pending);
        if pending == 0 {
            break;
        }
        assert!(
            since.elapsed() < POLL_LIMIT,
            "{pending} links never completed"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    eprintln!(
        "{} links started; {} not complete at the first poll",
        started.len(),
        pending_at_first_poll.unwrap()
    );
    assert!(
        shaders
            .iter()
            .all(|(v, f)| ctx.shader_completion(v) && ctx.shader_completion(f))
    );
    let two_phase: Vec<Outcome> = shaders
        .into_iter()
        .zip(started)
        .map(|((v, f), program)| Outcome {
            compile: vec![
                ctx.finish_compile_shader(v).map(drop),
                ctx.finish_compile_shader(f).map(drop),
            ],
            ..observe(&ctx, ctx.finish_link_program(program))
        })
        .collect();
    assert_eq!(two_phase.len(), 72);
    for (i, (a, b)) in synchronous.iter().zip(&two_phase).enumerate() {
        assert_eq!(a, b, "program {i}");
    }
    let failed = two_phase.iter().filter(|o| o.link.is_err()).count();
    assert_eq!(failed, 12, "8 link failures and 4 compile failures");
}

#[test]
fn two_phase_calls_work_with_background_compiling_off_and_report_foreign_objects() {
    let Some(ctx) = context_or_skip(
        "two_phase_calls_work_with_background_compiling_off_and_report_foreign_objects",
    ) else {
        return;
    };
    ctx.set_max_shader_compiler_threads(0).unwrap();
    let prelude = ctx.info().glsl_prelude();
    let vs = ctx
        .start_compile_shader(
            ShaderStage::Vertex,
            &format!("{prelude}void main() {{ gl_Position = vec4(0.0); }}\n"),
        )
        .unwrap();
    let fs = ctx
        .start_compile_shader(
            ShaderStage::Fragment,
            &format!("{prelude}out vec4 o;\nvoid main() {{ o = vec4(1.0); }}\n"),
        )
        .unwrap();
    let program = ctx
        .start_link_program(&[&vs, &fs], &LinkOptions::default())
        .unwrap();
    // The shaders may go as soon as the link started.
    drop((vs, fs));
    let program = ctx.finish_link_program(program).expect("links");
    assert!(ctx.program_completion(&program));
    ctx.program_binary(&program)
        .expect("a binary after the finish");

    let other = context_or_skip("second context").unwrap();
    let shader = other
        .start_compile_shader(
            ShaderStage::Vertex,
            &format!("{prelude}void main() {{ gl_Position = vec4(1.0); }}\n"),
        )
        .unwrap();
    assert!(matches!(
        ctx.finish_compile_shader(shader),
        Err(ShaderError::Foreign(_))
    ));
    assert!(matches!(
        other.finish_link_program(program),
        Err(LinkError::Foreign(_))
    ));
}
