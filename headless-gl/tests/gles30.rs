//! A GLES 3.0 context (Mesa's `MESA_GLES_VERSION_OVERRIDE=3.0` on llvmpipe): no program
//! interface queries, no separate shader objects, no geometry stage. Reflection falls back
//! (varyings through `glGetTransformFeedbackVarying`, the rest empty), a separable link and a
//! pipeline draw are typed errors, and a stage the context lacks is a compile error value.
//!
//! One test in its own process: the override is set before the first context.

use headless_gl::{
    ApiPreference, ContextOptions, DrawCall, DrawError, GlApi, GlVersion, LinkError, LinkOptions,
    ShaderError, ShaderStage, TransformFeedbackMode, Varying, glow,
};
use test_support::gl::{isolate_shader_cache, open_or_skip};

#[test]
fn a_gles_3_0_context_falls_back_to_what_it_has() {
    isolate_shader_cache();
    // SAFETY: the only test of this process sets the variable before any context (and so any
    // Mesa getenv) exists; Rust's own readers are synchronized by std's environment lock.
    unsafe { std::env::set_var("MESA_GLES_VERSION_OVERRIDE", "3.0") };
    let options = ContextOptions {
        api: ApiPreference::Gles,
        ..ContextOptions::default()
    };
    let Some(ctx) = open_or_skip("a_gles_3_0_context_falls_back_to_what_it_has", &options) else {
        return;
    };
    if ctx.info().api != GlApi::Gles || ctx.info().version_numbers != GlVersion::new(3, 0) {
        eprintln!(
            "SKIP a_gles_3_0_context_falls_back_to_what_it_has: the driver ignored the \
             override: {}",
            ctx.info()
        );
        return;
    }
    let prelude = ctx.info().glsl_prelude();
    let vs = ctx
        .compile_shader(
            ShaderStage::Vertex,
            &format!(
                "{prelude}in vec2 a_position;\nout float tf_b;\nout vec4 tf_a;\n\
                 void main() {{ tf_b = a_position.x; tf_a = vec4(a_position, 1.0, 2.0);\n\
                 gl_Position = vec4(a_position, 0.0, 1.0); }}\n"
            ),
        )
        .unwrap();
    let fs = ctx
        .compile_shader(
            ShaderStage::Fragment,
            &format!("{prelude}out vec4 o;\nvoid main() {{ o = vec4(1.0); }}\n"),
        )
        .unwrap();
    let program = ctx
        .link_program(
            &[&vs, &fs],
            &LinkOptions {
                transform_feedback_varyings: vec!["tf_a".into(), "tf_b".into()],
                transform_feedback_mode: TransformFeedbackMode::Interleaved,
                ..LinkOptions::default()
            },
        )
        .expect("links");
    let interface = ctx.program_interface(&program).expect("reflection");
    assert_eq!(
        interface.varyings,
        [
            Varying {
                name: "tf_a".into(),
                gl_type: glow::FLOAT_VEC4,
                size: 1
            },
            Varying {
                name: "tf_b".into(),
                gl_type: glow::FLOAT,
                size: 1
            },
        ]
    );
    assert!(interface.outputs.is_empty() && interface.uniform_blocks.is_empty());
    assert!(interface.storage_blocks.is_empty() && interface.uniform_static_use.is_empty());
    assert!(!interface.separable);
    assert_eq!(interface.compute_work_group_size, None);

    // The binary round trip keeps what there is.
    let loaded = ctx
        .load_program_binary(&ctx.program_binary(&program).unwrap())
        .unwrap();
    assert_eq!(ctx.program_interface(&loaded).unwrap(), interface);

    // Transform feedback capture works on GLES 3.0.
    let target = ctx.offscreen_target(8, 8).unwrap();
    let call = DrawCall {
        program: &program,
        attributes: &[headless_gl::VertexAttribute {
            name: "a_position",
            components: 2,
            data: &[0.25, -0.5],
        }],
        uniforms: &[],
        mode: glow::POINTS,
        vertex_count: 1,
        clear: None,
    };
    let captured = ctx.draw_capture(&target, &call, &[20]).unwrap();
    let floats: Vec<f32> = captured[0]
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(floats, [0.25, -0.5, 1.0, 2.0, 0.25]);

    // No separate shader objects: typed errors.
    assert!(matches!(
        ctx.link_program(
            &[&vs, &fs],
            &LinkOptions {
                separable: true,
                ..LinkOptions::default()
            }
        ),
        Err(LinkError::Unsupported(_))
    ));
    assert!(matches!(
        ctx.draw_pipeline(&target, &call, &[]),
        Err(DrawError::Unsupported(_))
    ));
    // No geometry stage: glCreateShader refuses it.
    assert!(matches!(
        ctx.compile_shader(ShaderStage::Geometry, prelude),
        Err(ShaderError::Create(_))
    ));
}
