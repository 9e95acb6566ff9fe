//! headless-gl on the machine's real driver (Mesa llvmpipe on CI).

use std::sync::{Arc, Barrier};

use headless_gl::{
    ApiPreference, AttributeBinding, BinaryError, BuildError, ContextError, ContextOptions,
    ContextProfile, DeviceSelection, DrawCall, DrawError, ForeignObject, GlApi, GlContext,
    GlVersion, LinkError, LinkOptions, Program, ProgramBinary, ShaderError, ShaderStage,
    UniformValue, VertexAttribute, glow,
};
use test_support::gl::{context_or_skip, open_or_skip};
use test_support::shaders::{VS, draw_triangle, with_prelude};

const SIZE: u32 = 32;

const FS: &str = "
in vec4 v_color;
uniform vec4 u_tint;
uniform float u_weights[3];
out vec4 o_color;
void main() {
    o_color = v_color * u_tint * (u_weights[0] + u_weights[1] + u_weights[2]);
}
";

fn build(ctx: &GlContext) -> Program {
    ctx.build_program(&with_prelude(ctx, VS), &with_prelude(ctx, FS))
        .expect("reference program builds")
}

/// Draws the lower-left half-triangle with per-vertex red/green/blue and returns the pixels.
/// `weight` goes to `u_weights[0]` when given; `u_weights` defaults to 0 in a fresh program, so
/// only a program whose uniforms really reach the shader draws colour.
fn render_with(ctx: &GlContext, program: &Program, weight: Option<f32>) -> Vec<u8> {
    let mut uniforms = vec![
        ("u_scale", UniformValue::Float(1.0)),
        ("u_tint", UniformValue::Vec4([1.0, 1.0, 1.0, 1.0])),
    ];
    if let Some(w) = weight {
        uniforms.push(("u_weights[0]", UniformValue::Float(w)));
    }
    draw_triangle(ctx, program, SIZE, &uniforms)
}

fn render_weighted(ctx: &GlContext, program: &Program) -> Vec<u8> {
    render_with(ctx, program, Some(1.0))
}

fn pixel(pixels: &[u8], x: u32, y: u32) -> [u8; 4] {
    let i = ((y * SIZE + x) * 4) as usize;
    pixels[i..i + 4].try_into().unwrap()
}

#[test]
fn reports_driver_identity() {
    let Some(ctx) = context_or_skip("reports_driver_identity") else {
        return;
    };
    let info = ctx.info();
    eprintln!("driver: {info}");
    assert!(!info.vendor.is_empty() && !info.renderer.is_empty() && !info.version.is_empty());
    assert!(!info.glsl_version.is_empty());
    match info.api {
        GlApi::DesktopCore => assert!(info.version_numbers >= GlVersion::new(4, 3)),
        GlApi::Gles => assert!(info.version_numbers >= GlVersion::new(3, 0)),
    }
    assert!(
        !info.program_binary_formats.is_empty(),
        "driver offers no program-binary format (is MESA_SHADER_CACHE_DISABLE set?)"
    );
    assert!(info.device.index < info.device.device_count);
}

#[test]
fn binary_round_trip_renders_identically() {
    let Some(ctx) = context_or_skip("binary_round_trip_renders_identically") else {
        return;
    };
    let original = build(&ctx);
    let binary = ctx
        .program_binary(&original)
        .expect("binary of a linked program");
    assert!(ctx.info().supports_binary_format(binary.format));
    assert!(!binary.bytes.is_empty());

    let loaded = ctx
        .load_program_binary(&binary)
        .expect("driver accepts its own binary");
    assert_eq!(
        ctx.active_attributes(&original).unwrap(),
        ctx.active_attributes(&loaded).unwrap()
    );
    assert_eq!(
        ctx.active_uniforms(&original).unwrap(),
        ctx.active_uniforms(&loaded).unwrap()
    );

    let a = render_weighted(&ctx, &original);
    let b = render_weighted(&ctx, &loaded);
    assert_eq!(a, b, "program from binary renders differently");
    // The picture is the triangle: coloured inside, clear colour outside.
    let inside = pixel(&a, 4, 4);
    assert!(
        inside[0] > 100 && inside[3] == 255,
        "inside pixel {inside:?}"
    );
    assert_eq!(pixel(&a, SIZE - 2, SIZE - 2), [0, 0, 0, 255]);
    // A fresh program has its uniforms at 0, so without the weights it draws black: uniforms
    // really reach the shader.
    let fresh = ctx.load_program_binary(&binary).unwrap();
    let unweighted = render_with(&ctx, &fresh, None);
    assert_eq!(pixel(&unweighted, 4, 4), [0, 0, 0, 0]);

    // A binary read back from the loaded program loads again.
    let again = ctx
        .program_binary(&loaded)
        .expect("binary of a loaded program");
    ctx.load_program_binary(&again).expect("reload");
}

#[test]
fn damaged_binaries_are_rejected_with_a_typed_error() {
    let Some(ctx) = context_or_skip("damaged_binaries_are_rejected_with_a_typed_error") else {
        return;
    };
    let binary = ctx.program_binary(&build(&ctx)).unwrap();
    let len = binary.bytes.len();

    for position in [0, 1, len / 4, len / 2, len - 1] {
        let mut flipped = binary.clone();
        flipped.bytes[position] ^= 0x10;
        match ctx.load_program_binary(&flipped) {
            Err(BinaryError::Rejected { .. }) => {}
            other => panic!("bit flip at {position}/{len}: {other:?}"),
        }
    }
    for keep in [len / 2, len - 1, 1] {
        let truncated = ProgramBinary {
            format: binary.format,
            bytes: binary.bytes[..keep].to_vec(),
        };
        match ctx.load_program_binary(&truncated) {
            Err(BinaryError::Rejected { .. }) => {}
            other => panic!("truncated to {keep}/{len}: {other:?}"),
        }
    }
    let wrong_format = ProgramBinary {
        format: binary.format ^ 0xdead,
        bytes: binary.bytes.clone(),
    };
    match ctx.load_program_binary(&wrong_format) {
        Err(BinaryError::UnsupportedFormat { format, supported }) => {
            assert_eq!(format, binary.format ^ 0xdead);
            assert!(supported.contains(&binary.format));
        }
        other => panic!("wrong format: {other:?}"),
    }
    let empty = ProgramBinary {
        format: binary.format,
        bytes: Vec::new(),
    };
    assert_eq!(
        ctx.load_program_binary(&empty).unwrap_err(),
        BinaryError::Empty
    );

    // The context is still healthy afterwards.
    ctx.load_program_binary(&binary)
        .expect("the intact binary still loads");
    assert_eq!(ctx.gl().map(gl_error).unwrap(), glow::NO_ERROR);
}

fn gl_error(gl: &glow::Context) -> u32 {
    use glow::HasContext;
    // SAFETY: glGetError on the context `ctx.gl()` just made current.
    unsafe { gl.get_error() }
}

#[test]
fn syntax_error_returns_the_driver_info_log() {
    let Some(ctx) = context_or_skip("syntax_error_returns_the_driver_info_log") else {
        return;
    };
    let bad = with_prelude(
        &ctx,
        "void main() { gl_Position = vec4(1.0) this is not glsl; }",
    );
    match ctx.compile_shader(ShaderStage::Vertex, &bad) {
        Err(ShaderError::Compile { stage, log }) => {
            assert_eq!(stage, ShaderStage::Vertex);
            assert!(log.to_lowercase().contains("error"), "info log: {log}");
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    // A link error (a varying whose type differs between the stages) returns the link log.
    let vs = ctx
        .compile_shader(
            ShaderStage::Vertex,
            &with_prelude(
                &ctx,
                "out vec3 v_x; void main() { v_x = vec3(1.0); gl_Position = vec4(0.0); }",
            ),
        )
        .unwrap();
    let fs = ctx
        .compile_shader(
            ShaderStage::Fragment,
            &with_prelude(&ctx, "in vec4 v_x; out vec4 o; void main() { o = v_x; }"),
        )
        .unwrap();
    match ctx.link_program(&[&vs, &fs], &LinkOptions::default()) {
        Err(LinkError::Link { log }) => assert!(!log.is_empty(), "empty link log"),
        other => panic!("expected a link error, got {other:?}"),
    }
    match ctx.build_program(&bad, FS) {
        Err(BuildError::Shader(ShaderError::Compile { .. })) => {}
        other => panic!("build_program with a bad vertex shader: {other:?}"),
    }
}

#[test]
fn reflection_lists_attributes_and_uniforms_with_bound_locations() {
    let Some(ctx) = context_or_skip("reflection_lists_attributes_and_uniforms") else {
        return;
    };
    let vs = ctx
        .compile_shader(ShaderStage::Vertex, &with_prelude(&ctx, VS))
        .unwrap();
    let fs = ctx
        .compile_shader(ShaderStage::Fragment, &with_prelude(&ctx, FS))
        .unwrap();
    let options = LinkOptions {
        attribute_bindings: vec![
            AttributeBinding {
                name: "a_position".into(),
                location: 5,
            },
            AttributeBinding {
                name: "a_color".into(),
                location: 2,
            },
        ],
        ..LinkOptions::default()
    };
    let program = ctx.link_program(&[&vs, &fs], &options).unwrap();
    let attributes = ctx.active_attributes(&program).unwrap();
    let summary: Vec<_> = attributes
        .iter()
        .map(|a| (a.name.as_str(), a.gl_type, a.size, a.location))
        .collect();
    assert_eq!(
        summary,
        [
            ("a_color", glow::FLOAT_VEC4, 1, Some(2)),
            ("a_position", glow::FLOAT_VEC2, 1, Some(5))
        ]
    );
    let uniforms = ctx.active_uniforms(&program).unwrap();
    let summary: Vec<_> = uniforms
        .iter()
        .map(|u| (u.name.as_str(), u.gl_type, u.size))
        .collect();
    assert_eq!(
        summary,
        [
            ("u_scale", glow::FLOAT, 1),
            ("u_tint", glow::FLOAT_VEC4, 1),
            ("u_weights[0]", glow::FLOAT, 3),
        ]
    );
    assert!(uniforms.iter().all(|u| u.location.is_some()));

    let bad = LinkOptions {
        attribute_bindings: vec![AttributeBinding {
            name: "a\0b".into(),
            location: 0,
        }],
        ..LinkOptions::default()
    };
    assert!(matches!(
        ctx.link_program(&[&vs, &fs], &bad),
        Err(LinkError::InvalidName(_))
    ));
}

#[test]
fn two_threads_each_render_with_their_own_context_at_once() {
    // Open the contexts first so a missing driver skips before threads start.
    if context_or_skip("two_threads_each_render_with_their_own_context_at_once").is_none() {
        return;
    }
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|i| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let ctx = GlContext::open_default().expect("second thread's context");
                // Both contexts exist and are current on their threads from here on.
                barrier.wait();
                let mut frames = Vec::new();
                for _ in 0..5 {
                    let program = build(&ctx);
                    let binary = ctx.program_binary(&program).unwrap();
                    let loaded = ctx.load_program_binary(&binary).unwrap();
                    let a = render_weighted(&ctx, &program);
                    assert_eq!(a, render_weighted(&ctx, &loaded), "thread {i}");
                    frames.push(a);
                }
                barrier.wait();
                frames
            })
        })
        .collect();
    let results: Vec<Vec<Vec<u8>>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(results.iter().flatten().all(|f| f == &results[0][0]));
}

#[test]
fn two_contexts_on_one_thread_keep_their_objects_apart() {
    let Some(a) = context_or_skip("two_contexts_on_one_thread") else {
        return;
    };
    let b = GlContext::open_default().expect("second context");
    let pa = build(&a);
    let pb = build(&b);
    // Interleaved use switches the current context underneath.
    let img_a = render_weighted(&a, &pa);
    let img_b = render_weighted(&b, &pb);
    assert_eq!(img_a, img_b);
    assert_eq!(
        b.program_binary(&pa).unwrap_err(),
        BinaryError::Foreign(ForeignObject)
    );
    let target = a.offscreen_target(4, 4).unwrap();
    assert!(matches!(
        b.read_rgba8(&target),
        Err(DrawError::Foreign(ForeignObject))
    ));
    drop(pa);
    drop(a);
    // b keeps working after a is gone.
    assert_eq!(render_weighted(&b, &pb), img_b);
}

#[test]
fn gles_context_round_trips_binaries_too() {
    let options = ContextOptions {
        api: ApiPreference::Gles,
        ..ContextOptions::default()
    };
    let Some(ctx) = open_or_skip("gles_context_round_trips_binaries_too", &options) else {
        return;
    };
    assert_eq!(ctx.info().api, GlApi::Gles);
    let program = build(&ctx);
    let loaded = ctx
        .load_program_binary(&ctx.program_binary(&program).unwrap())
        .unwrap();
    assert_eq!(
        render_weighted(&ctx, &program),
        render_weighted(&ctx, &loaded)
    );
}

/// [`VS`] and [`FS`] in GLSL 1.10: `attribute` / `varying`, `gl_FragColor`, no `#version` line.
const LEGACY_VS: &str = "
attribute vec2 a_position;
attribute vec4 a_color;
uniform float u_scale;
varying vec4 v_color;
void main() {
    v_color = a_color;
    gl_Position = vec4(a_position * u_scale, 0.0, 1.0);
}
";

const LEGACY_FS: &str = "
varying vec4 v_color;
uniform vec4 u_tint;
uniform float u_weights[3];
void main() {
    gl_FragColor = v_color * u_tint * (u_weights[0] + u_weights[1] + u_weights[2]);
}
";

#[test]
fn compatibility_profile_runs_legacy_glsl_and_round_trips_its_binaries() {
    let options = ContextOptions {
        api: ApiPreference::DesktopCompatibility,
        ..ContextOptions::default()
    };
    let Some(ctx) = open_or_skip("compatibility_profile_runs_legacy_glsl", &options) else {
        return;
    };
    assert_eq!(ctx.profile(), ContextProfile::Compatibility);
    assert_eq!(ctx.info().api, GlApi::DesktopCore);
    assert!(ctx.info().version_numbers >= options.min_desktop_version);
    use glow::HasContext;
    // SAFETY: a state query on the context `ctx.gl()` just made current.
    let mask = unsafe {
        ctx.gl()
            .unwrap()
            .get_parameter_i32(glow::CONTEXT_PROFILE_MASK)
    } as u32;
    assert_ne!(
        mask & glow::CONTEXT_COMPATIBILITY_PROFILE_BIT,
        0,
        "mask {mask:#x}"
    );

    let legacy = ctx
        .build_program(&format!("#version 110\n{LEGACY_VS}"), LEGACY_FS)
        .expect("a compatibility context links GLSL 1.10");
    let binary = ctx
        .program_binary(&legacy)
        .expect("binary of a legacy program");
    let loaded = ctx.load_program_binary(&binary).expect("its binary loads");
    assert_eq!(
        ctx.active_uniforms(&legacy).unwrap(),
        ctx.active_uniforms(&loaded).unwrap()
    );
    let a = render_weighted(&ctx, &legacy);
    assert_eq!(a, render_weighted(&ctx, &loaded));
    let inside = pixel(&a, 4, 4);
    assert!(
        inside[0] > 100 && inside[3] == 255,
        "inside pixel {inside:?}"
    );
    // Modern GLSL works there too, and draws the same picture.
    assert_eq!(render_weighted(&ctx, &build(&ctx)), a);

    // The default context never opens the compatibility profile.
    let default = context_or_skip("compatibility_profile_is_opt_in").unwrap();
    let expected = match default.info().api {
        GlApi::DesktopCore => ContextProfile::Core,
        GlApi::Gles => ContextProfile::Es,
    };
    assert_eq!(default.profile(), expected);
}

#[test]
fn unmakeable_contexts_say_what_is_missing() {
    if context_or_skip("unmakeable_contexts_say_what_is_missing").is_none() {
        return;
    }
    let too_new = ContextOptions {
        api: ApiPreference::DesktopCore,
        min_desktop_version: GlVersion::new(9, 9),
        ..ContextOptions::default()
    };
    match GlContext::open(&too_new) {
        Err(
            e @ ContextError::VersionTooOld {
                found, required, ..
            },
        ) => {
            assert_eq!(required, GlVersion::new(9, 9));
            assert!(found >= GlVersion::new(3, 2));
            assert!(e.to_string().contains("too old"), "{e}");
        }
        other => panic!("expected VersionTooOld, got {other:?}"),
    }
    let no_device = ContextOptions {
        device: DeviceSelection::Index(999),
        ..ContextOptions::default()
    };
    match GlContext::open(&no_device) {
        Err(e @ ContextError::NoEglDevice { .. }) => assert!(e.to_string().contains("999"), "{e}"),
        other => panic!("expected NoEglDevice, got {other:?}"),
    }
}

#[test]
fn a_hardware_selection_never_falls_back_to_software() {
    let prefer = ContextOptions {
        device: DeviceSelection::PreferHardware,
        ..ContextOptions::default()
    };
    let Some(preferred) =
        open_or_skip("a_hardware_selection_never_falls_back_to_software", &prefer)
    else {
        return;
    };
    let device = preferred.info().device.clone();
    drop(preferred);
    let hardware = GlContext::open(&ContextOptions {
        device: DeviceSelection::Hardware,
        ..ContextOptions::default()
    });
    if !device.software {
        let ctx = hardware.expect("PreferHardware found a hardware device, so Hardware must");
        assert!(!ctx.info().device.software, "{:?}", ctx.info().device);
        return;
    }
    // PreferHardware tries every hardware device before a software one: it ended on software,
    // so no hardware device gives a context and Hardware must fail rather than use software.
    let e = hardware.expect_err("Hardware must not fall back to a software device");
    eprintln!("{e}");
    if device.device_count == 1 {
        // The only device is a software one (Mesa llvmpipe alone).
        match &e {
            ContextError::NoEglDevice { reason, selection } => {
                assert_eq!(
                    *selection,
                    Some(headless_gl::DeviceSelectionError::NoHardware),
                    "{e}"
                );
                assert!(reason.contains("EGL lists 1 device: 0: software"), "{e}");
            }
            other => panic!("expected NoEglDevice, got {other:?}"),
        }
    }
}

#[test]
fn bad_draw_input_is_an_error_not_a_crash() {
    let Some(ctx) = context_or_skip("bad_draw_input_is_an_error_not_a_crash") else {
        return;
    };
    assert!(matches!(
        ctx.offscreen_target(0, 8),
        Err(DrawError::InvalidSize { .. })
    ));
    assert!(matches!(
        ctx.offscreen_target(1 << 30, 8),
        Err(DrawError::InvalidSize { .. })
    ));
    let program = build(&ctx);
    let target = ctx.offscreen_target(8, 8).unwrap();
    let call = |attributes: &[VertexAttribute<'_>]| {
        ctx.draw(
            &target,
            &DrawCall {
                program: &program,
                attributes,
                uniforms: &[],
                mode: glow::TRIANGLES,
                vertex_count: 3,
                clear: None,
            },
        )
    };
    let short = [0.0f32; 4];
    assert!(matches!(
        call(&[VertexAttribute {
            name: "a_position",
            components: 2,
            data: &short
        }]),
        Err(DrawError::BadVertexData { .. })
    ));
    let enough = [0.0f32; 6];
    assert_eq!(
        call(&[VertexAttribute {
            name: "a_nothing",
            components: 2,
            data: &enough
        }]),
        Err(DrawError::MissingAttribute("a_nothing".into()))
    );
    // The context still draws correctly afterwards.
    let img = render_weighted(&ctx, &program);
    assert!(pixel(&img, 4, 4)[0] > 100);
}

#[test]
fn raw_gl_draws_into_an_offscreen_target_through_its_framebuffer() {
    let Some(ctx) =
        context_or_skip("raw_gl_draws_into_an_offscreen_target_through_its_framebuffer")
    else {
        return;
    };
    use glow::HasContext;
    let target = ctx.offscreen_target(4, 4).expect("offscreen target");
    let gl = ctx.gl().unwrap();
    // SAFETY: the context is current (ctx.gl made it so); the framebuffer is the target's, which
    // lives until the end of the test; binding 0 afterwards leaves GL as it was.
    unsafe {
        gl.bind_framebuffer(glow::FRAMEBUFFER, Some(target.framebuffer()));
        gl.clear_color(1.0, 0.0, 0.0, 1.0);
        gl.clear(glow::COLOR_BUFFER_BIT);
        gl.bind_framebuffer(glow::FRAMEBUFFER, None);
    }
    let pixels = ctx.read_rgba8(&target).expect("read back");
    assert_eq!(pixels.len(), 4 * 4 * 4);
    assert!(
        pixels.chunks(4).all(|p| p == [255, 0, 0, 255]),
        "{pixels:?}"
    );
}
