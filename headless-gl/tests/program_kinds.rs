//! Every program kind on the real driver (Mesa llvmpipe on CI): compute, geometry,
//! tessellation, separable programs in a pipeline and transform feedback. Each is linked from
//! source, run (dispatch or draw) and read back against values computed here; then its binary
//! goes out of the driver and into a new program, which runs again with identical results and
//! has the same driver reflection ([`GlContext::program_interface`]).

use headless_gl::glow::HasContext;
use headless_gl::{
    ApiPreference, BlockMember, ContextOptions, DrawCall, DrawError, GlApi, GlContext, GlVersion,
    LinkError, LinkOptions, Program, ProgramInterface, ProgramOutput, ReflectError, ShaderStage,
    StageMask, StorageBuffer, TransformFeedbackMode, UniformValue, Varying, VertexAttribute, glow,
};
use test_support::gl::open_or_skip;
use test_support::shaders::{SEPARABLE_FS, SEPARABLE_VS, draw_separable_pipeline};

const SIZE: u32 = 32;

/// A GL 4.3 / GLES 3.2 context of `api`, or a skip (with the reason printed) for a context
/// below that.
fn context(test: &str, api: ApiPreference) -> Option<GlContext> {
    let options = ContextOptions {
        api,
        ..ContextOptions::default()
    };
    let ctx = open_or_skip(test, &options)?;
    let enough = match ctx.info().api {
        GlApi::DesktopCore => ctx.info().version_numbers >= GlVersion::new(4, 3),
        GlApi::Gles => ctx.info().version_numbers >= GlVersion::new(3, 2),
    };
    if !enough {
        eprintln!(
            "SKIP {test}: {} has no geometry/tessellation/compute",
            ctx.info()
        );
        return None;
    }
    Some(ctx)
}

/// `body` behind the `#version` (and precision) lines every stage here needs.
fn src(ctx: &GlContext, body: &str) -> String {
    let prelude = match ctx.info().api {
        GlApi::DesktopCore => "#version 430 core\n",
        GlApi::Gles => "#version 320 es\nprecision highp float;\nprecision highp int;\n",
    };
    format!("{prelude}{body}")
}

fn link(
    ctx: &GlContext,
    stages: &[(ShaderStage, &str)],
    options: &LinkOptions,
) -> Result<Program, LinkError> {
    let shaders: Vec<_> = stages
        .iter()
        .map(|&(stage, body)| {
            ctx.compile_shader(stage, &src(ctx, body))
                .unwrap_or_else(|e| panic!("{stage} shader compiles: {e}"))
        })
        .collect();
    let refs: Vec<_> = shaders.iter().collect();
    ctx.link_program(&refs, options)
}

/// The program again, from its own binary; checks the reflection is the same and returns it.
fn reload(ctx: &GlContext, program: &Program) -> (Program, ProgramInterface) {
    let binary = ctx
        .program_binary(program)
        .expect("binary of a linked program");
    let loaded = ctx
        .load_program_binary(&binary)
        .expect("the driver takes its own binary back");
    let from_source = ctx
        .program_interface(program)
        .expect("reflection from source");
    let from_binary = ctx
        .program_interface(&loaded)
        .expect("reflection from binary");
    assert_eq!(
        from_source, from_binary,
        "reflection differs between the source-linked and the binary-loaded program"
    );
    assert_eq!(program.stages(), loaded.stages());
    assert_eq!(
        ctx.active_uniforms(program).unwrap(),
        ctx.active_uniforms(&loaded).unwrap()
    );
    (loaded, from_source)
}

fn pixel(pixels: &[u8], x: u32, y: u32) -> [u8; 4] {
    let i = ((y * SIZE + x) * 4) as usize;
    pixels[i..i + 4].try_into().unwrap()
}

fn stages(list: &[ShaderStage]) -> StageMask {
    list.iter()
        .fold(StageMask::default(), |mask, &stage| mask.with(stage))
}

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

fn bytes_of(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn output(name: &str) -> ProgramOutput {
    ProgramOutput {
        name: name.into(),
        gl_type: glow::FLOAT_VEC4,
        size: 1,
        location: 0,
        index: 0,
    }
}

const COMPUTE: &str = "
layout(local_size_x = 4, local_size_y = 1, local_size_z = 1) in;
layout(std430, binding = 1) buffer Data { uint values[]; } data;
layout(std430, binding = 2) buffer Params { uint scale; uint offsets[4]; } params;
layout(std140, binding = 3) uniform Consts { uvec4 add; } consts;
void main() {
    uint i = gl_GlobalInvocationID.x;
    data.values[i] = data.values[i] * params.scale + params.offsets[i % 4u] + consts.add[i % 4u];
}
";

/// The compute program's result for `input`, computed here.
fn compute_expected(input: &[u32], scale: u32, offsets: [u32; 4], add: [u32; 4]) -> Vec<u32> {
    input
        .iter()
        .enumerate()
        .map(|(i, v)| v * scale + offsets[i % 4] + add[i % 4])
        .collect()
}

fn compute_dispatches_reads_back_and_survives_the_binary_round_trip(ctx: &GlContext) {
    let program = link(
        ctx,
        &[(ShaderStage::Compute, COMPUTE)],
        &LinkOptions::default(),
    )
    .expect("compute program links");
    assert_eq!(program.stages(), ShaderStage::Compute.bit());

    let input: Vec<u32> = (0..16).map(|i| i * 7 + 3).collect();
    let (scale, offsets, add) = (5u32, [100u32, 200, 300, 400], [1u32, 2, 3, 4]);
    let mut params = vec![scale];
    params.extend(offsets);
    // The uniform block's buffer, bound at its binding through raw GL (the dispatch helper
    // leaves uniform buffer bindings alone).
    let gl = ctx.gl().unwrap();
    // SAFETY: the context is current; the buffer is made, filled and bound here and deleted at
    // the end of the test.
    let ubo = unsafe {
        let ubo = gl.create_buffer().unwrap();
        gl.bind_buffer(glow::UNIFORM_BUFFER, Some(ubo));
        gl.buffer_data_u8_slice(glow::UNIFORM_BUFFER, &bytes_of(&add), glow::STATIC_DRAW);
        gl.bind_buffer_base(glow::UNIFORM_BUFFER, 3, Some(ubo));
        ubo
    };
    let run = |program: &Program| {
        let out = ctx
            .dispatch_compute(
                program,
                [4, 1, 1],
                &[
                    StorageBuffer {
                        binding: 1,
                        data: &bytes_of(&input),
                    },
                    StorageBuffer {
                        binding: 2,
                        data: &bytes_of(&params),
                    },
                ],
            )
            .expect("dispatch");
        (u32s(&out[0]), u32s(&out[1]))
    };
    let (values, params_after) = run(&program);
    assert_eq!(values, compute_expected(&input, scale, offsets, add));
    assert_eq!(params_after, params, "the read-only buffer is unchanged");

    let (loaded, interface) = reload(ctx, &program);
    assert_eq!(run(&loaded), (values, params_after.clone()));

    assert_eq!(interface.stages, ShaderStage::Compute.bit());
    assert_eq!(interface.compute_work_group_size, Some([4, 1, 1]));
    assert!(!interface.separable);
    assert!(interface.outputs.is_empty() && interface.varyings.is_empty());
    let names: Vec<&str> = interface
        .storage_blocks
        .iter()
        .map(|b| b.name.as_str())
        .collect();
    assert_eq!(names, ["Data", "Params"]);
    let data = &interface.storage_blocks[0];
    assert_eq!(
        (data.binding, data.referenced_by),
        (1, ShaderStage::Compute.bit())
    );
    assert_eq!(
        data.members,
        [BlockMember {
            name: "Data.values[0]".into(),
            gl_type: glow::UNSIGNED_INT,
            size: 0,
            offset: 0,
            array_stride: 4,
            matrix_stride: 0,
            row_major: false,
        }]
    );
    let params_block = &interface.storage_blocks[1];
    // std430 puts the members in 20 bytes; the buffer size the driver asks for may be padded
    // (Mesa rounds block sizes up to 16 bytes: 32).
    assert_eq!(params_block.binding, 2);
    assert!(params_block.data_size >= 20, "{}", params_block.data_size);
    let members: Vec<(&str, i32, i32, i32)> = params_block
        .members
        .iter()
        .map(|m| (m.name.as_str(), m.size, m.offset, m.array_stride))
        .collect();
    assert_eq!(
        members,
        [("Params.offsets[0]", 4, 4, 4), ("Params.scale", 1, 0, 0)]
    );
    assert_eq!(interface.uniform_blocks.len(), 1);
    let consts = &interface.uniform_blocks[0];
    assert_eq!(
        (consts.name.as_str(), consts.binding, consts.data_size),
        ("Consts", 3, 16)
    );
    assert_eq!(consts.members.len(), 1);
    assert_eq!(
        (consts.members[0].name.as_str(), consts.members[0].gl_type),
        ("Consts.add", glow::UNSIGNED_INT_VEC4)
    );
    assert_eq!(
        interface.uniform_static_use,
        [("Consts.add".to_string(), ShaderStage::Compute.bit())]
    );
    // SAFETY: the buffer was made above on this context.
    unsafe { ctx.gl().unwrap().delete_buffer(ubo) };
}

const PASS_VS: &str = "
in vec2 a_position;
in vec4 a_color;
out vec4 v_color;
void main() {
    v_color = a_color;
    gl_Position = vec4(a_position, 0.0, 1.0);
}
";

const GEOMETRY: &str = "
layout(points) in;
layout(triangle_strip, max_vertices = 4) out;
in vec4 v_color[];
out vec4 v_color_out;
uniform float u_half;
void main() {
    for (int i = 0; i < 4; i++) {
        vec2 corner = vec2(float(i & 1), float(i >> 1)) * 2.0 - 1.0;
        v_color_out = v_color[0];
        gl_Position = gl_in[0].gl_Position + vec4(corner * u_half, 0.0, 0.0);
        EmitVertex();
    }
    EndPrimitive();
}
";

/// `COLOR_FS` with the geometry stage's output name.
const GEOMETRY_FS: &str = "
in vec4 v_color_out;
uniform vec4 u_tint;
layout(location = 0) out vec4 o_color;
void main() { o_color = v_color_out * u_tint; }
";

fn draw_points(ctx: &GlContext, program: &Program) -> Vec<u8> {
    let target = ctx.offscreen_target(SIZE, SIZE).unwrap();
    ctx.draw(
        &target,
        &DrawCall {
            program,
            attributes: &[
                VertexAttribute {
                    name: "a_position",
                    components: 2,
                    data: &[-0.5, -0.5, 0.5, 0.5],
                },
                VertexAttribute {
                    name: "a_color",
                    components: 4,
                    data: &[1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
                },
            ],
            uniforms: &[
                ("u_half", UniformValue::Float(0.25)),
                ("u_tint", UniformValue::Vec4([1.0, 1.0, 1.0, 1.0])),
            ],
            mode: glow::POINTS,
            vertex_count: 2,
            clear: Some([0.0, 0.0, 0.0, 1.0]),
        },
    )
    .expect("draw points");
    ctx.read_rgba8(&target).unwrap()
}

fn geometry_stage_draws_reads_back_and_survives_the_binary_round_trip(ctx: &GlContext) {
    let program = link(
        ctx,
        &[
            (ShaderStage::Vertex, PASS_VS),
            (ShaderStage::Geometry, GEOMETRY),
            (ShaderStage::Fragment, GEOMETRY_FS),
        ],
        &LinkOptions::default(),
    )
    .expect("vertex + geometry + fragment links");
    let pixels = draw_points(ctx, &program);
    // Each point became a quad half a unit wide: NDC [-0.75, -0.25] is pixels [4, 12).
    for (x, y, expected) in [
        (4, 4, [255, 0, 0, 255]),
        (8, 8, [255, 0, 0, 255]),
        (11, 11, [255, 0, 0, 255]),
        (24, 24, [0, 255, 0, 255]),
        (20, 27, [0, 255, 0, 255]),
        (3, 8, [0, 0, 0, 255]),
        (12, 8, [0, 0, 0, 255]),
        (16, 16, [0, 0, 0, 255]),
        (8, 24, [0, 0, 0, 255]),
    ] {
        assert_eq!(pixel(&pixels, x, y), expected, "pixel ({x}, {y})");
    }
    // Exactly the two quads are coloured: 2 * 8 * 8 pixels.
    let coloured = pixels
        .chunks_exact(4)
        .filter(|p| p[..3] != [0, 0, 0])
        .count();
    assert_eq!(coloured, 128);

    let (loaded, interface) = reload(ctx, &program);
    assert_eq!(draw_points(ctx, &loaded), pixels);
    assert_eq!(
        interface.stages,
        stages(&[
            ShaderStage::Vertex,
            ShaderStage::Geometry,
            ShaderStage::Fragment
        ])
    );
    assert_eq!(interface.outputs, [output("o_color")]);
    assert_eq!(interface.compute_work_group_size, None);
    assert_eq!(
        interface.uniform_static_use,
        [
            ("u_half".to_string(), ShaderStage::Geometry.bit()),
            ("u_tint".to_string(), ShaderStage::Fragment.bit()),
        ]
    );
}

const TESS_VS: &str = "
in vec2 a_position;
out vec2 v_position;
void main() { v_position = a_position; }
";

const TESS_CONTROL: &str = "
layout(vertices = 3) out;
in vec2 v_position[];
out vec2 tc_position[];
uniform float u_level;
void main() {
    tc_position[gl_InvocationID] = v_position[gl_InvocationID];
    if (gl_InvocationID == 0) {
        gl_TessLevelOuter[0] = u_level;
        gl_TessLevelOuter[1] = u_level;
        gl_TessLevelOuter[2] = u_level;
        gl_TessLevelInner[0] = u_level;
    }
}
";

const TESS_EVALUATION: &str = "
layout(triangles, equal_spacing, ccw) in;
in vec2 tc_position[];
uniform float u_scale;
void main() {
    vec2 p = gl_TessCoord.x * tc_position[0] + gl_TessCoord.y * tc_position[1]
        + gl_TessCoord.z * tc_position[2];
    gl_Position = vec4(p * u_scale, 0.0, 1.0);
}
";

const TESS_FS: &str = "
uniform vec4 u_tint;
layout(location = 0) out vec4 o_color;
void main() { o_color = u_tint; }
";

fn draw_patch(ctx: &GlContext, program: &Program) -> Vec<u8> {
    let target = ctx.offscreen_target(SIZE, SIZE).unwrap();
    ctx.draw_patches(
        &target,
        &DrawCall {
            program,
            attributes: &[VertexAttribute {
                name: "a_position",
                components: 2,
                data: &[-1.0, -1.0, 1.0, -1.0, -1.0, 1.0],
            }],
            uniforms: &[
                ("u_level", UniformValue::Float(3.0)),
                ("u_scale", UniformValue::Float(0.5)),
                ("u_tint", UniformValue::Vec4([0.0, 0.0, 1.0, 1.0])),
            ],
            mode: glow::PATCHES,
            vertex_count: 3,
            clear: Some([0.0, 0.0, 0.0, 1.0]),
        },
        3,
    )
    .expect("draw a patch");
    ctx.read_rgba8(&target).unwrap()
}

fn tessellation_stages_draw_read_back_and_survive_the_binary_round_trip(ctx: &GlContext) {
    let program = link(
        ctx,
        &[
            (ShaderStage::Vertex, TESS_VS),
            (ShaderStage::TessControl, TESS_CONTROL),
            (ShaderStage::TessEvaluation, TESS_EVALUATION),
            (ShaderStage::Fragment, TESS_FS),
        ],
        &LinkOptions::default(),
    )
    .expect("vertex + tessellation + fragment links");
    let pixels = draw_patch(ctx, &program);
    // The evaluation stage halved the triangle: x, y >= -0.5 and x + y <= 0 in NDC, pixels
    // from 8 on; every pixel centre strictly inside is blue, the rest black.
    let blue = [0, 0, 255, 255];
    let black = [0, 0, 0, 255];
    let mut inside = 0;
    for y in 0..SIZE {
        for x in 0..SIZE {
            let (nx, ny) = ((x as f32 + 0.5) / 16.0 - 1.0, (y as f32 + 0.5) / 16.0 - 1.0);
            let margin = 0.05;
            if nx > -0.5 + margin && ny > -0.5 + margin && nx + ny < -margin {
                assert_eq!(pixel(&pixels, x, y), blue, "pixel ({x}, {y}) inside");
                inside += 1;
            } else if nx < -0.5 - margin || ny < -0.5 - margin || nx + ny > margin {
                assert_eq!(pixel(&pixels, x, y), black, "pixel ({x}, {y}) outside");
            }
        }
    }
    assert!(inside > 20, "{inside} pixels checked inside");
    // Without the evaluation stage's scale the whole lower-left half would be blue.
    assert_eq!(pixel(&pixels, 2, 2), black);

    let (loaded, interface) = reload(ctx, &program);
    assert_eq!(draw_patch(ctx, &loaded), pixels);
    assert_eq!(
        interface.stages,
        stages(&[
            ShaderStage::Vertex,
            ShaderStage::TessControl,
            ShaderStage::TessEvaluation,
            ShaderStage::Fragment
        ])
    );
    assert_eq!(interface.outputs, [output("o_color")]);
    assert_eq!(
        interface.uniform_static_use,
        [
            ("u_level".to_string(), ShaderStage::TessControl.bit()),
            ("u_scale".to_string(), ShaderStage::TessEvaluation.bit()),
            ("u_tint".to_string(), ShaderStage::Fragment.bit()),
        ]
    );
}

fn draw_through_pipeline(
    ctx: &GlContext,
    vertex: &Program,
    fragment: &Program,
) -> Result<Vec<u8>, DrawError> {
    draw_separable_pipeline(ctx, vertex, fragment, SIZE)
}

fn separable_programs_draw_in_a_pipeline_and_stay_separable_through_the_binary(ctx: &GlContext) {
    let separable = LinkOptions {
        separable: true,
        ..LinkOptions::default()
    };
    let vertex = link(ctx, &[(ShaderStage::Vertex, SEPARABLE_VS)], &separable)
        .expect("separable vertex program links");
    let fragment = link(ctx, &[(ShaderStage::Fragment, SEPARABLE_FS)], &separable)
        .expect("separable fragment program links");
    let pixels = draw_through_pipeline(ctx, &vertex, &fragment).expect("pipeline draw");
    // a_color (1, 1, 0) from the vertex program times u_tint (1, 0, 1), set in the fragment
    // program: red inside the lower-left half-triangle, black outside.
    assert_eq!(pixel(&pixels, 4, 4), [255, 0, 0, 255]);
    assert_eq!(pixel(&pixels, 20, 4), [255, 0, 0, 255]);
    assert_eq!(pixel(&pixels, 28, 28), [0, 0, 0, 255]);
    let red = pixels
        .chunks_exact(4)
        .filter(|p| *p == [255, 0, 0, 255])
        .count();
    let black = pixels
        .chunks_exact(4)
        .filter(|p| *p == [0, 0, 0, 255])
        .count();
    assert_eq!(red + black, (SIZE * SIZE) as usize);
    assert!((480..=560).contains(&red), "{red} red pixels");

    let (vertex_loaded, vertex_interface) = reload(ctx, &vertex);
    let (fragment_loaded, fragment_interface) = reload(ctx, &fragment);
    assert!(vertex_interface.separable && fragment_interface.separable);
    assert_eq!(vertex_interface.stages, ShaderStage::Vertex.bit());
    assert_eq!(fragment_interface.stages, ShaderStage::Fragment.bit());
    assert_eq!(fragment_interface.outputs, [output("o_color")]);
    assert!(vertex_interface.outputs.is_empty());
    assert_eq!(
        draw_through_pipeline(ctx, &vertex_loaded, &fragment_loaded).unwrap(),
        pixels
    );
    // Mixed: a loaded program with a source-linked one.
    assert_eq!(
        draw_through_pipeline(ctx, &vertex_loaded, &fragment).unwrap(),
        pixels
    );

    // A program linked without the flag is not separable, and a pipeline refuses it.
    let plain = link(
        ctx,
        &[
            (ShaderStage::Vertex, SEPARABLE_VS),
            (ShaderStage::Fragment, SEPARABLE_FS),
        ],
        &LinkOptions::default(),
    )
    .expect("the same stages link into one program");
    assert!(!ctx.program_interface(&plain).unwrap().separable);
    match draw_through_pipeline(ctx, &vertex, &plain) {
        Err(DrawError::Gl(code, _)) => assert_eq!(code, glow::INVALID_OPERATION),
        other => panic!("a pipeline with a non-separable program: {other:?}"),
    }
}

const CAPTURE_VS: &str = "
in vec2 a_position;
uniform float u_k;
out float tf_b;
out vec4 tf_a;
void main() {
    tf_b = a_position.x * 2.0 + 1.0;
    tf_a = vec4(a_position, u_k, a_position.x - a_position.y);
    gl_Position = vec4(a_position, 0.0, 1.0);
    gl_PointSize = 1.0;
}
";

const CAPTURE_FS: &str = "
in vec4 tf_a;
layout(location = 0) out vec4 o_color;
void main() { o_color = vec4(1.0, 1.0, 1.0, 1.0) + tf_a * 0.0; }
";

const CAPTURE_POINTS: [f32; 8] = [-0.5, -0.25, 0.25, 0.5, 0.75, -0.75, 0.0, 1.0];

fn capture(ctx: &GlContext, program: &Program, sizes: &[usize]) -> Vec<Vec<u8>> {
    let target = ctx.offscreen_target(SIZE, SIZE).unwrap();
    ctx.draw_capture(
        &target,
        &DrawCall {
            program,
            attributes: &[VertexAttribute {
                name: "a_position",
                components: 2,
                data: &CAPTURE_POINTS,
            }],
            uniforms: &[("u_k", UniformValue::Float(7.5))],
            mode: glow::POINTS,
            vertex_count: 4,
            clear: Some([0.0, 0.0, 0.0, 1.0]),
        },
        sizes,
    )
    .expect("draw with transform feedback")
}

/// `(tf_b, tf_a)` per point, computed here.
fn capture_expected() -> Vec<(f32, [f32; 4])> {
    CAPTURE_POINTS
        .chunks_exact(2)
        .map(|p| (p[0] * 2.0 + 1.0, [p[0], p[1], 7.5, p[0] - p[1]]))
        .collect()
}

fn transform_feedback_captures_reads_back_and_survives_the_binary_round_trip(ctx: &GlContext) {
    let stages_list = [
        (ShaderStage::Vertex, CAPTURE_VS),
        (ShaderStage::Fragment, CAPTURE_FS),
    ];
    let interleaved = link(
        ctx,
        &stages_list,
        &LinkOptions {
            transform_feedback_varyings: vec!["tf_b".into(), "tf_a".into()],
            transform_feedback_mode: TransformFeedbackMode::Interleaved,
            ..LinkOptions::default()
        },
    )
    .expect("interleaved capture program links");
    let expected = capture_expected();
    let flat: Vec<f32> = expected
        .iter()
        .flat_map(|(b, a)| std::iter::once(*b).chain(*a))
        .collect();
    let out = capture(ctx, &interleaved, &[flat.len() * 4]);
    assert_eq!(f32s(&out[0]), flat);

    let (loaded, interface) = reload(ctx, &interleaved);
    assert_eq!(capture(ctx, &loaded, &[flat.len() * 4]), out);
    // The varyings in link order, not sorted.
    assert_eq!(
        interface.varyings,
        [
            Varying {
                name: "tf_b".into(),
                gl_type: glow::FLOAT,
                size: 1
            },
            Varying {
                name: "tf_a".into(),
                gl_type: glow::FLOAT_VEC4,
                size: 1
            },
        ]
    );
    assert_eq!(interface.outputs, [output("o_color")]);

    let separate = link(
        ctx,
        &stages_list,
        &LinkOptions {
            transform_feedback_varyings: vec!["tf_a".into(), "tf_b".into()],
            transform_feedback_mode: TransformFeedbackMode::Separate,
            ..LinkOptions::default()
        },
    )
    .expect("separate capture program links");
    let out = capture(ctx, &separate, &[4 * 16, 4 * 4]);
    let a: Vec<f32> = expected.iter().flat_map(|(_, a)| *a).collect();
    let b: Vec<f32> = expected.iter().map(|(b, _)| *b).collect();
    assert_eq!((f32s(&out[0]), f32s(&out[1])), (a, b));
    let (loaded, interface) = reload(ctx, &separate);
    assert_eq!(capture(ctx, &loaded, &[4 * 16, 4 * 4]), out);
    assert_eq!(interface.varyings[0].name, "tf_a");
}

fn reflection_needs_a_linked_program_and_reads_row_major_matrices(ctx: &GlContext) {
    // A failed link has no interface.
    let vs = ctx
        .compile_shader(
            ShaderStage::Vertex,
            &src(
                ctx,
                "out vec4 v;\nvoid main() { v = vec4(1.0); gl_Position = v; }",
            ),
        )
        .unwrap();
    let fs = ctx
        .compile_shader(
            ShaderStage::Fragment,
            &src(
                ctx,
                "in vec3 v;\nout vec4 o;\nvoid main() { o = vec4(v, 1.0); }",
            ),
        )
        .unwrap();
    let pending = ctx
        .start_link_program(&[&vs, &fs], &LinkOptions::default())
        .unwrap();
    assert_eq!(
        ctx.program_interface(&pending),
        Err(ReflectError::NotLinked)
    );
    assert!(matches!(
        ctx.finish_link_program(pending),
        Err(LinkError::Link { .. })
    ));

    // Uniform block layout as the driver reports it: std140 offsets, strides, row-major.
    let program = link(
        ctx,
        &[
            (
                ShaderStage::Vertex,
                "
layout(std140, binding = 5) uniform Transform {
    layout(row_major) mat4 model;
    vec3 scales[2];
    float bias;
} xf;
in vec4 a_position;
void main() { gl_Position = xf.model * a_position * xf.scales[1].x + xf.bias; }
",
            ),
            (
                ShaderStage::Fragment,
                "
layout(location = 0) out vec4 first;
layout(location = 1) out vec4 second;
void main() { first = vec4(1.0); second = vec4(0.5); }
",
            ),
        ],
        &LinkOptions::default(),
    )
    .unwrap();
    let (_, interface) = reload(ctx, &program);
    let block = &interface.uniform_blocks[0];
    assert_eq!((block.name.as_str(), block.binding), ("Transform", 5));
    assert_eq!(block.data_size, 64 + 2 * 16 + 16);
    assert_eq!(block.referenced_by, ShaderStage::Vertex.bit());
    let members: Vec<(&str, u32, i32, i32, i32, i32, bool)> = block
        .members
        .iter()
        .map(|m| {
            (
                m.name.as_str(),
                m.gl_type,
                m.size,
                m.offset,
                m.array_stride,
                m.matrix_stride,
                m.row_major,
            )
        })
        .collect();
    assert_eq!(
        members,
        [
            ("Transform.bias", glow::FLOAT, 1, 96, 0, 0, false),
            ("Transform.model", glow::FLOAT_MAT4, 1, 0, 0, 16, true),
            ("Transform.scales[0]", glow::FLOAT_VEC3, 2, 64, 16, 0, false),
        ]
    );
    let locations: Vec<(&str, i32)> = interface
        .outputs
        .iter()
        .map(|o| (o.name.as_str(), o.location))
        .collect();
    assert_eq!(locations, [("first", 0), ("second", 1)]);
}

/// Programs whose stages leave few traces: each loaded from its binary reports the stages it
/// was linked from.
fn binary_loaded_programs_report_the_stages_they_were_linked_from(ctx: &GlContext) {
    let bare_vs = "void main() { gl_Position = vec4(0.0, 0.0, 0.0, 1.0); }";
    let empty_fs = "void main() {}";
    let capture_vs = "out float tf_x;\nvoid main() { tf_x = 1.0; gl_Position = vec4(tf_x); }";
    let points_gs = "layout(points) in;\nlayout(points, max_vertices = 1) out;\n\
                     void main() { gl_Position = vec4(0.5); EmitVertex(); }";
    let input_fs = "in vec4 v;\nlayout(location = 0) out vec4 o;\nvoid main() { o = v; }";
    let separable = LinkOptions {
        separable: true,
        ..LinkOptions::default()
    };
    let capture = LinkOptions {
        transform_feedback_varyings: vec!["tf_x".into()],
        ..LinkOptions::default()
    };
    let plain = LinkOptions::default();
    let mut cases: Vec<(Vec<(ShaderStage, &str)>, &LinkOptions)> = vec![
        // A depth-only pass: nothing references either stage.
        (
            vec![
                (ShaderStage::Vertex, bare_vs),
                (ShaderStage::Fragment, empty_fs),
            ],
            &plain,
        ),
        (
            vec![
                (ShaderStage::Vertex, bare_vs),
                (ShaderStage::Geometry, points_gs),
                (ShaderStage::Fragment, empty_fs),
            ],
            &plain,
        ),
        (vec![(ShaderStage::Vertex, capture_vs)], &separable),
        (vec![(ShaderStage::Fragment, input_fs)], &separable),
    ];
    if ctx.info().api == GlApi::DesktopCore {
        // Desktop GL also links a vertex-only program that is not separable (for transform
        // feedback).
        cases.push((vec![(ShaderStage::Vertex, capture_vs)], &capture));
    }
    for (shaders, options) in cases {
        let program = link(ctx, &shaders, options).expect("links");
        let expected = stages(&shaders.iter().map(|&(s, _)| s).collect::<Vec<_>>());
        assert_eq!(program.stages(), expected);
        let (loaded, interface) = reload(ctx, &program);
        assert_eq!(loaded.stages(), expected, "{shaders:?}");
        assert_eq!(interface.stages, expected);
        assert_eq!(interface.separable, options.separable);
    }
}

/// One test on a desktop GL core context and one on a GLES 3.2 context for each body.
macro_rules! on_both_apis {
    ($($body:ident => $desktop:ident, $gles:ident;)*) => {$(
        #[test]
        fn $desktop() {
            if let Some(ctx) = context(stringify!($desktop), ApiPreference::DesktopCore) {
                $body(&ctx);
            }
        }
        #[test]
        fn $gles() {
            if let Some(ctx) = context(stringify!($gles), ApiPreference::Gles) {
                $body(&ctx);
            }
        }
    )*};
}

on_both_apis! {
    compute_dispatches_reads_back_and_survives_the_binary_round_trip => compute_dispatches_reads_back_and_survives_the_binary_round_trip_desktop, compute_dispatches_reads_back_and_survives_the_binary_round_trip_gles;
    geometry_stage_draws_reads_back_and_survives_the_binary_round_trip => geometry_stage_draws_reads_back_and_survives_the_binary_round_trip_desktop, geometry_stage_draws_reads_back_and_survives_the_binary_round_trip_gles;
    tessellation_stages_draw_read_back_and_survive_the_binary_round_trip => tessellation_stages_draw_read_back_and_survive_the_binary_round_trip_desktop, tessellation_stages_draw_read_back_and_survive_the_binary_round_trip_gles;
    separable_programs_draw_in_a_pipeline_and_stay_separable_through_the_binary => separable_programs_draw_in_a_pipeline_and_stay_separable_through_the_binary_desktop, separable_programs_draw_in_a_pipeline_and_stay_separable_through_the_binary_gles;
    transform_feedback_captures_reads_back_and_survives_the_binary_round_trip => transform_feedback_captures_reads_back_and_survives_the_binary_round_trip_desktop, transform_feedback_captures_reads_back_and_survives_the_binary_round_trip_gles;
    binary_loaded_programs_report_the_stages_they_were_linked_from => binary_loaded_programs_report_the_stages_they_were_linked_from_desktop, binary_loaded_programs_report_the_stages_they_were_linked_from_gles;
    reflection_needs_a_linked_program_and_reads_row_major_matrices => reflection_needs_a_linked_program_and_reads_row_major_matrices_desktop, reflection_needs_a_linked_program_and_reads_row_major_matrices_gles;
}
