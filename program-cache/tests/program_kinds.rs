//! Every program kind through the cache on the machine's real driver (Mesa llvmpipe on CI):
//! compute, geometry, tessellation and transform-feedback programs are linked, saved,
//! restored from their binaries by another manager (no driver compile or link) and run with
//! identical results; the per-cache switch keeps transform-feedback programs out; failed
//! compiles and links are answered from the cache — across a disk round trip — with the
//! driver's info log byte for byte.

use std::sync::Arc;

use headless_gl::glow::{self, HasContext};
use headless_gl::{GlContext, Program};
use program_cache::{
    CacheConfig, CompatibilityStamp, CompileOutcome, DiskConfig, GlBackend, LinkFailure,
    LinkOptions, LinkOrigin, LinkedProgram, ProgramCache, ProgramManager, ProgramOptions, Shader,
    ShaderStage, TransformFeedbackMode,
};
use test_support::fake_driver::Counting;
use test_support::gl::context_or_skip;
use test_support::shaders::{SEPARABLE_FS, SEPARABLE_VS, draw_separable_pipeline};

type Manager<'a> = ProgramManager<Counting<GlBackend<'a>>>;

const V430: &str = "#version 430 core\n";

/// A context with compute, geometry and tessellation (desktop GL 4.3+), or a printed skip.
fn context(test: &str) -> Option<GlContext> {
    let ctx = context_or_skip(test)?;
    let info = ctx.info();
    let v = info.version_numbers;
    if info.api != headless_gl::GlApi::DesktopCore || (v.major, v.minor) < (4, 3) {
        println!(
            "SKIP {test}: the context is {}, not desktop GL 4.3+",
            info.version
        );
        return None;
    }
    Some(ctx)
}

fn manager<'a>(ctx: &'a GlContext, cache: &Arc<ProgramCache>) -> Manager<'a> {
    ProgramManager::new(
        Counting::new(GlBackend::new(ctx)),
        cache.clone(),
        "program_kinds",
    )
}

/// Compiles `sources` (stage, body after `#version 430 core`) and links them as one program.
fn link(
    m: &mut Manager<'_>,
    sources: &[(ShaderStage, &str)],
    options: &ProgramOptions,
) -> (
    Result<LinkedProgram<Program>, LinkFailure>,
    Vec<CompileOutcome>,
) {
    let mut shaders: Vec<Shader<headless_gl::Shader>> = sources
        .iter()
        .map(|(stage, body)| Shader::new(*stage, format!("{V430}{body}")))
        .collect();
    let outcomes = shaders.iter_mut().map(|s| m.compile(s).unwrap()).collect();
    let mut refs: Vec<&mut Shader<headless_gl::Shader>> = shaders.iter_mut().collect();
    (m.link_program(&mut refs, options), outcomes)
}

/// Links cold with one manager, then with another on the same cache: the second is a cache hit
/// with every compile deferred and neither a driver compile nor a driver link.
fn cold_then_warm(
    ctx: &GlContext,
    sources: &[(ShaderStage, &str)],
    options: &ProgramOptions,
) -> (LinkedProgram<Program>, LinkedProgram<Program>) {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut cold = manager(ctx, &cache);
    let (linked, outcomes) = link(&mut cold, sources, options);
    let cold_program = linked.expect("links from source");
    assert_eq!(cold_program.origin, LinkOrigin::Linked);
    assert!(outcomes.iter().all(|o| *o == CompileOutcome::Compiled));
    assert_eq!(cold.backend().reads, 1, "the binary is read once");
    assert_eq!(cache.len(), 1);

    let mut warm = manager(ctx, &cache);
    let (linked, outcomes) = link(&mut warm, sources, options);
    let warm_program = linked.expect("restored");
    assert_eq!(warm_program.origin, LinkOrigin::CacheHit);
    assert!(outcomes.iter().all(|o| *o == CompileOutcome::Deferred));
    let b = warm.backend();
    assert_eq!((b.compiles, b.links, b.loads), (0, 0, 1));
    assert_eq!(warm_program.key, cold_program.key);
    assert_eq!(warm_program.stages, cold_program.stages);
    assert_eq!(warm_program.uniforms, cold_program.uniforms);
    assert_eq!(warm_program.attributes, cold_program.attributes);
    assert_eq!(warm_program.interface, cold_program.interface);
    (cold_program, warm_program)
}

/// The maps a cold link of `sources` (one stage) stores for that stage.
fn cold_entry_maps(
    ctx: &GlContext,
    sources: &[(ShaderStage, &str)],
) -> program_cache::ShaderVariables {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut m = manager(ctx, &cache);
    let (linked, _) = link(&mut m, sources, &ProgramOptions::default());
    let key = linked.expect("links").key;
    let entry = cache.peek(&key).expect("saved");
    entry
        .stage_variables(sources[0].0.gl_enum())
        .expect("the stage's maps")
        .clone()
}

const COMPUTE: &str = "layout(local_size_x = 8) in;
layout(std430, binding = 0) buffer Out { uint data[]; };
uniform uint u_add;
void main() {
    uint i = gl_GlobalInvocationID.x;
    data[i] = i * i + u_add;
}
";

/// Makes an `N`-byte buffer bound to `target` and to its binding index 0, runs `run` with
/// `program` in use, reads the buffer back as little-endian 4-byte words (`word`), deletes the
/// buffer and checks that GL reported no error.
///
/// # Safety
/// `gl` is the current context's; `run` leaves nothing of its own bound.
unsafe fn run_into_buffer<T, const N: usize>(
    gl: &glow::Context,
    target: u32,
    program: &Program,
    run: impl FnOnce(),
    word: fn([u8; 4]) -> T,
) -> Vec<T> {
    // SAFETY: the context is current (contract); the buffer is created, bound, read back with
    // exactly its `N` bytes and deleted here.
    unsafe {
        let buffer = gl.create_buffer().expect("buffer");
        gl.bind_buffer(target, Some(buffer));
        gl.buffer_data_size(target, N as i32, glow::DYNAMIC_READ);
        gl.bind_buffer_base(target, 0, Some(buffer));
        gl.use_program(Some(program.raw()));
        run();
        let mut bytes = [0u8; N];
        gl.get_buffer_sub_data(target, 0, &mut bytes);
        gl.use_program(None);
        gl.delete_buffer(buffer);
        assert_eq!(gl.get_error(), glow::NO_ERROR);
        bytes
            .chunks_exact(4)
            .map(|c| word(c.try_into().unwrap()))
            .collect()
    }
}

/// Dispatches `program` over 4 groups of 8 and reads the 32 values back.
fn dispatch(ctx: &GlContext, program: &Program) -> Vec<u32> {
    let gl = ctx.gl().expect("current");
    // SAFETY: the context is current; `program` is in use while the closure runs.
    unsafe {
        run_into_buffer::<u32, 128>(
            gl,
            glow::SHADER_STORAGE_BUFFER,
            program,
            || {
                let add = gl.get_uniform_location(program.raw(), "u_add");
                gl.uniform_1_u32(add.as_ref(), 7);
                gl.dispatch_compute(4, 1, 1);
                gl.memory_barrier(
                    glow::SHADER_STORAGE_BARRIER_BIT | glow::BUFFER_UPDATE_BARRIER_BIT,
                );
            },
            u32::from_le_bytes,
        )
    }
}

#[test]
fn a_compute_program_is_restored_from_its_binary_and_dispatches_the_same() {
    let Some(ctx) = context("a_compute_program_is_restored") else {
        return;
    };
    let sources = [(ShaderStage::Compute, COMPUTE)];
    let (cold, warm) = cold_then_warm(&ctx, &sources, &ProgramOptions::default());
    assert_eq!(cold.interface.compute_work_group_size, Some([8, 1, 1]));
    assert_eq!(warm.interface.compute_work_group_size, Some([8, 1, 1]));
    // The storage block and the uniform are in the compute stage's stored maps (llvmpipe
    // reports no GL_REFERENCED_BY_COMPUTE_SHADER for them; a one-stage program owns them).
    assert_eq!(
        cold.interface.storage_blocks.len(),
        1,
        "{:?}",
        cold.interface
    );
    let stored = cold_entry_maps(&ctx, &sources);
    assert_eq!(
        stored
            .storage_blocks
            .iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>(),
        ["Out"]
    );
    assert_eq!(
        stored
            .uniforms
            .iter()
            .map(|u| u.name.as_str())
            .collect::<Vec<_>>(),
        ["u_add"]
    );
    let expected: Vec<u32> = (0..32).map(|i| i * i + 7).collect();
    assert_eq!(dispatch(&ctx, &cold.program), expected);
    assert_eq!(dispatch(&ctx, &warm.program), expected);
}

/// Draws `count` vertices of `mode` (no vertex attributes: positions come from gl_VertexID)
/// with `program` into a fresh 16x16 target cleared to black; returns the pixels.
fn draw(ctx: &GlContext, program: &Program, mode: u32, count: i32) -> Vec<u8> {
    let target = ctx.offscreen_target(16, 16).expect("target");
    let gl = ctx.gl().expect("current");
    // SAFETY: the context is current; the vertex array is created, bound and deleted here; the
    // program is a linked program of this context.
    unsafe {
        gl.bind_framebuffer(glow::FRAMEBUFFER, Some(target.framebuffer()));
        gl.viewport(0, 0, 16, 16);
        gl.clear_color(0.0, 0.0, 0.0, 1.0);
        gl.clear(glow::COLOR_BUFFER_BIT);
        let vao = gl.create_vertex_array().expect("vao");
        gl.bind_vertex_array(Some(vao));
        gl.use_program(Some(program.raw()));
        if mode == glow::PATCHES {
            gl.patch_parameter_i32(glow::PATCH_VERTICES, 3);
        }
        gl.draw_arrays(mode, 0, count);
        gl.use_program(None);
        gl.bind_vertex_array(None);
        gl.delete_vertex_array(vao);
        assert_eq!(gl.get_error(), glow::NO_ERROR);
    }
    ctx.read_rgba8(&target).expect("pixels")
}

fn pixel(pixels: &[u8], x: usize, y: usize) -> [u8; 4] {
    let i = (y * 16 + x) * 4;
    pixels[i..i + 4].try_into().unwrap()
}

const GEOMETRY_VS: &str = "void main() { gl_Position = vec4(0.0, 0.0, 0.0, 1.0); }\n";
const GEOMETRY_GS: &str = "layout(points) in;
layout(triangle_strip, max_vertices = 4) out;
out vec2 g_uv;
void main() {
    for (int i = 0; i < 4; i++) {
        vec2 p = vec2(float(i & 1), float(i >> 1));
        g_uv = p;
        gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
        EmitVertex();
    }
    EndPrimitive();
}
";
const GEOMETRY_FS: &str = "in vec2 g_uv;
layout(location = 0) out vec4 o_color;
void main() { o_color = vec4(g_uv, 0.25, 1.0); }
";

#[test]
fn a_geometry_program_is_restored_from_its_binary_and_draws_the_same() {
    let Some(ctx) = context("a_geometry_program_is_restored") else {
        return;
    };
    let sources = [
        (ShaderStage::Fragment, GEOMETRY_FS),
        (ShaderStage::Geometry, GEOMETRY_GS),
        (ShaderStage::Vertex, GEOMETRY_VS),
    ];
    let (cold, warm) = cold_then_warm(&ctx, &sources, &ProgramOptions::default());
    assert_eq!(
        cold.stages,
        [
            ShaderStage::Vertex,
            ShaderStage::Geometry,
            ShaderStage::Fragment
        ]
    );
    let a = draw(&ctx, &cold.program, glow::POINTS, 1);
    let b = draw(&ctx, &warm.program, glow::POINTS, 1);
    assert_eq!(a, b);
    // The quad the geometry shader emitted covers the target: red grows to the right, green
    // upwards.
    let low = pixel(&a, 0, 0);
    let high = pixel(&a, 15, 15);
    assert!(
        low[0] < 16 && low[1] < 16 && high[0] > 230 && high[1] > 230,
        "{low:?} {high:?}"
    );
    assert!((60..=68).contains(&low[2]) && low[3] == 255, "{low:?}");
    assert_eq!(cold.interface.outputs.len(), 1, "{:?}", cold.interface);
}

const TESS_VS: &str = "void main() {
    vec2 p[3] = vec2[](vec2(-1.0, -1.0), vec2(3.0, -1.0), vec2(-1.0, 3.0));
    gl_Position = vec4(p[gl_VertexID], 0.0, 1.0);
}
";
const TESS_TCS: &str = "layout(vertices = 3) out;
void main() {
    gl_out[gl_InvocationID].gl_Position = gl_in[gl_InvocationID].gl_Position;
    if (gl_InvocationID == 0) {
        gl_TessLevelOuter[0] = 2.0;
        gl_TessLevelOuter[1] = 2.0;
        gl_TessLevelOuter[2] = 2.0;
        gl_TessLevelInner[0] = 2.0;
    }
}
";
const TESS_TES: &str = "layout(triangles, equal_spacing, ccw) in;
out vec3 t_bary;
void main() {
    t_bary = gl_TessCoord;
    gl_Position = gl_TessCoord.x * gl_in[0].gl_Position + gl_TessCoord.y * gl_in[1].gl_Position
        + gl_TessCoord.z * gl_in[2].gl_Position;
}
";
const TESS_FS: &str = "in vec3 t_bary;
out vec4 o_color;
void main() { o_color = vec4(t_bary, 1.0); }
";

#[test]
fn a_tessellation_program_is_restored_from_its_binary_and_draws_the_same() {
    let Some(ctx) = context("a_tessellation_program_is_restored") else {
        return;
    };
    let sources = [
        (ShaderStage::Vertex, TESS_VS),
        (ShaderStage::TessControl, TESS_TCS),
        (ShaderStage::TessEvaluation, TESS_TES),
        (ShaderStage::Fragment, TESS_FS),
    ];
    let (cold, warm) = cold_then_warm(&ctx, &sources, &ProgramOptions::default());
    let a = draw(&ctx, &cold.program, glow::PATCHES, 3);
    let b = draw(&ctx, &warm.program, glow::PATCHES, 3);
    assert_eq!(a, b);
    // The big triangle covers the target; the bottom-left corner is near its first vertex.
    let corner = pixel(&a, 0, 0);
    assert!(
        corner[0] > 200 && corner[1] < 40 && corner[2] < 60,
        "{corner:?}"
    );
    assert!(
        a.chunks_exact(4)
            .all(|p| p[3] == 255 && p[..3] != [0, 0, 0]),
        "every pixel is covered"
    );
}

const TF_VS: &str = "out float v_value;
void main() {
    v_value = float(gl_VertexID) * 2.0 + 1.0;
    gl_Position = vec4(0.0, 0.0, 0.0, 1.0);
}
";
const TF_FS: &str = "out vec4 o_color;
void main() { o_color = vec4(1.0); }
";

fn tf_options() -> ProgramOptions {
    ProgramOptions {
        link: LinkOptions {
            transform_feedback_varyings: vec!["v_value".into()],
            transform_feedback_mode: TransformFeedbackMode::Interleaved,
            ..LinkOptions::default()
        },
        page: None,
    }
}

/// Captures `v_value` of 4 points with transform feedback.
fn capture(ctx: &GlContext, program: &Program) -> Vec<f32> {
    // A complete framebuffer bound: a surfaceless context's default one is not.
    let target = ctx.offscreen_target(1, 1).expect("target");
    let gl = ctx.gl().expect("current");
    // SAFETY: the context is current; the vertex array is created, bound, unbound and deleted
    // here; `program` is in use while the closure runs.
    unsafe {
        gl.bind_framebuffer(glow::FRAMEBUFFER, Some(target.framebuffer()));
        let vao = gl.create_vertex_array().expect("vao");
        gl.bind_vertex_array(Some(vao));
        let values = run_into_buffer::<f32, 16>(
            gl,
            glow::TRANSFORM_FEEDBACK_BUFFER,
            program,
            || {
                gl.enable(glow::RASTERIZER_DISCARD);
                gl.begin_transform_feedback(glow::POINTS);
                gl.draw_arrays(glow::POINTS, 0, 4);
                gl.end_transform_feedback();
                gl.disable(glow::RASTERIZER_DISCARD);
            },
            f32::from_le_bytes,
        );
        gl.bind_vertex_array(None);
        gl.delete_vertex_array(vao);
        assert_eq!(gl.get_error(), glow::NO_ERROR);
        values
    }
}

#[test]
fn a_transform_feedback_program_is_restored_from_its_binary_and_captures_the_same() {
    let Some(ctx) = context("a_transform_feedback_program_is_restored") else {
        return;
    };
    let sources = [(ShaderStage::Vertex, TF_VS), (ShaderStage::Fragment, TF_FS)];
    let (cold, warm) = cold_then_warm(&ctx, &sources, &tf_options());
    assert_eq!(capture(&ctx, &cold.program), [1.0, 3.0, 5.0, 7.0]);
    assert_eq!(capture(&ctx, &warm.program), [1.0, 3.0, 5.0, 7.0]);
    assert_eq!(
        cold.interface
            .varyings
            .iter()
            .map(|v| v.name.as_str())
            .collect::<Vec<_>>(),
        ["v_value"],
        "{:?}",
        cold.interface
    );
}

#[test]
fn a_cache_that_keeps_transform_feedback_out_never_stores_or_restores_such_programs() {
    let Some(ctx) = context("a_cache_that_keeps_transform_feedback_out") else {
        return;
    };
    let cache = ProgramCache::builder(CacheConfig::desktop())
        .cache_transform_feedback(false)
        .build();
    assert!(!cache.caches_transform_feedback());
    let sources = [(ShaderStage::Vertex, TF_VS), (ShaderStage::Fragment, TF_FS)];
    for round in 0..2 {
        let mut m = manager(&ctx, &cache);
        let (linked, _) = link(&mut m, &sources, &tf_options());
        let linked = linked.expect("links");
        assert_eq!(linked.origin, LinkOrigin::Linked, "round {round}");
        assert_eq!(m.transform_feedback_links_uncached(), 1);
        assert_eq!(m.backend().reads, 0, "no binary read");
        assert_eq!(m.backend().links, 1, "linked from source every time");
        assert_eq!(capture(&ctx, &linked.program), [1.0, 3.0, 5.0, 7.0]);
    }
    assert_eq!(cache.len(), 0);
    assert_eq!(
        cache.counters().hits + cache.counters().misses,
        0,
        "never looked up"
    );
    // The same cache still caches a program without transform feedback.
    let mut m = manager(&ctx, &cache);
    let (linked, _) = link(&mut m, &sources, &ProgramOptions::default());
    assert_eq!(linked.expect("links").origin, LinkOrigin::Linked);
    assert_eq!((cache.len(), m.transform_feedback_links_uncached()), (1, 0));
}

const BAD_FS: &str = "out vec4 o_color;
void main() { o_color = vec4(undeclared_value, 1.0); }
";
const MISMATCH_VS: &str = "out vec4 v_shared;
void main() { v_shared = vec4(1.0); gl_Position = vec4(0.0); }
";
const MISMATCH_FS: &str = "in vec3 v_shared;
out vec4 o_color;
void main() { o_color = vec4(v_shared, 1.0); }
";

#[test]
fn failed_compiles_and_links_come_back_from_disk_with_the_drivers_exact_log() {
    let Some(ctx) = context("failed_compiles_and_links_come_back_from_disk") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let stamp = CompatibilityStamp::from_driver(ctx.info(), "program_kinds", "1");
    let open = || {
        let cache = ProgramCache::builder(CacheConfig::desktop())
            .disk(DiskConfig::new(dir.path(), stamp.clone()))
            .build();
        cache.wait_until_loaded(std::time::Duration::from_secs(30));
        cache
    };
    // What the driver itself says, with no cache at all.
    let driver_compile_log =
        match ctx.compile_shader(ShaderStage::Fragment, &format!("{V430}{BAD_FS}")) {
            Err(headless_gl::ShaderError::Compile { log, .. }) => log,
            other => panic!("the bad shader compiled: {other:?}"),
        };

    let (compile_log, link_log) = {
        let cache = open();
        let mut m = manager(&ctx, &cache);
        let mut bad = Shader::new(ShaderStage::Fragment, format!("{V430}{BAD_FS}"));
        assert_eq!(m.compile(&mut bad).unwrap(), CompileOutcome::Failed);
        let compile_log = bad.info_log().unwrap().to_owned();
        assert_eq!(compile_log, driver_compile_log);
        let sources = [
            (ShaderStage::Vertex, MISMATCH_VS),
            (ShaderStage::Fragment, MISMATCH_FS),
        ];
        let (linked, outcomes) = link(&mut m, &sources, &ProgramOptions::default());
        assert_eq!(
            outcomes,
            [CompileOutcome::Compiled, CompileOutcome::Compiled]
        );
        let Err(LinkFailure::Link { log: link_log }) = linked else {
            panic!("the mismatched program linked: {linked:?}");
        };
        assert!(!link_log.is_empty());
        cache.flush_disk();
        (compile_log, link_log)
    };

    // A fresh cache on the same folder (a restarted process): neither is asked of the driver.
    let cache = open();
    let mut m = manager(&ctx, &cache);
    let mut bad = Shader::new(ShaderStage::Fragment, format!("{V430}{BAD_FS}"));
    assert_eq!(m.compile(&mut bad).unwrap(), CompileOutcome::KnownFailure);
    assert_eq!(
        bad.info_log(),
        Some(compile_log.as_str()),
        "byte-identical log"
    );
    assert!(!bad.compile_status());
    let sources = [
        (ShaderStage::Vertex, MISMATCH_VS),
        (ShaderStage::Fragment, MISMATCH_FS),
    ];
    let (linked, outcomes) = link(&mut m, &sources, &ProgramOptions::default());
    // The shaders of a program that fails only at link keep their compiled status.
    assert_eq!(
        outcomes,
        [CompileOutcome::Deferred, CompileOutcome::Deferred]
    );
    match linked {
        Err(LinkFailure::Link { log }) => assert_eq!(log, link_log, "byte-identical log"),
        other => panic!("expected the cached link failure: {other:?}"),
    }
    let b = m.backend();
    assert_eq!(
        (b.compiles, b.links, b.loads),
        (0, 0, 0),
        "the driver was not asked"
    );
    assert_eq!(cache.counters().failure_hits, 2);
}

fn draw_pipeline(ctx: &GlContext, vertex: &Program, fragment: &Program) -> Vec<u8> {
    draw_separable_pipeline(ctx, vertex, fragment, 16).expect("pipeline draw")
}

#[test]
fn separable_programs_are_keyed_apart_restored_and_draw_the_same_in_a_pipeline() {
    let Some(ctx) = context("separable_programs_are_keyed_apart") else {
        return;
    };
    let separable = ProgramOptions {
        link: LinkOptions {
            separable: true,
            ..LinkOptions::default()
        },
        page: None,
    };
    let (vs_cold, vs_warm) =
        cold_then_warm(&ctx, &[(ShaderStage::Vertex, SEPARABLE_VS)], &separable);
    let (fs_cold, fs_warm) =
        cold_then_warm(&ctx, &[(ShaderStage::Fragment, SEPARABLE_FS)], &separable);
    assert!(vs_warm.interface.separable && fs_warm.interface.separable);
    let pixels = draw_pipeline(&ctx, &vs_cold.program, &fs_cold.program);
    assert_eq!(pixel(&pixels, 2, 2), [255, 0, 0, 255]);
    assert_eq!(pixel(&pixels, 14, 14), [0, 0, 0, 255]);
    assert_eq!(
        draw_pipeline(&ctx, &vs_warm.program, &fs_warm.program),
        pixels
    );

    // The same two shaders linked into one program that is not separable: another key, and a
    // program that is not separable.
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut m = manager(&ctx, &cache);
    let sources = [
        (ShaderStage::Vertex, SEPARABLE_VS),
        (ShaderStage::Fragment, SEPARABLE_FS),
    ];
    let (plain, _) = link(&mut m, &sources, &ProgramOptions::default());
    let plain = plain.expect("links");
    assert!(!plain.interface.separable);
    assert_ne!(plain.key, vs_cold.key);
    // Without the flag one stage alone is not a program.
    let (alone, _) = link(
        &mut m,
        &[(ShaderStage::Vertex, SEPARABLE_VS)],
        &ProgramOptions::default(),
    );
    assert!(matches!(alone, Err(LinkFailure::Stages(_))), "{alone:?}");
}

#[test]
fn links_started_together_and_polled_give_what_synchronous_links_give() {
    let Some(ctx) = context("links_started_together_and_polled") else {
        return;
    };
    let programs = corpus::builtin(corpus::Dialect::DesktopCore330);
    let options = ProgramOptions::default();
    // Synchronous, on one cache.
    let sync_cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut sync = manager(&ctx, &sync_cache);
    let mut expected = Vec::new();
    for p in &programs {
        let mut vs = Shader::new(ShaderStage::Vertex, p.vertex.as_str());
        let mut fs = Shader::new(ShaderStage::Fragment, p.fragment.as_str());
        sync.compile(&mut vs).unwrap();
        sync.compile(&mut fs).unwrap();
        let linked = sync.link(&mut vs, &mut fs, &options).expect("links");
        expected.push((
            linked.key,
            linked.attributes,
            linked.uniforms,
            linked.interface,
        ));
    }
    // Started together and polled, on another cache, twice: cold, then all cache hits.
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    for round in 0..2 {
        let mut m = manager(&ctx, &cache);
        let mut shaders: Vec<_> = programs
            .iter()
            .map(|p| {
                (
                    Shader::new(ShaderStage::Vertex, p.vertex.as_str()),
                    Shader::new(ShaderStage::Fragment, p.fragment.as_str()),
                )
            })
            .collect();
        for (vs, fs) in &mut shaders {
            let expect = if round == 0 {
                CompileOutcome::Pending
            } else {
                CompileOutcome::Deferred
            };
            assert_eq!(m.start_compile(vs).unwrap(), expect);
            assert_eq!(m.start_compile(fs).unwrap(), expect);
        }
        let mut pending: Vec<Option<_>> = shaders
            .iter_mut()
            .map(|(vs, fs)| Some(m.start_link(&mut [vs, fs], &options).expect("starts")))
            .collect();
        let mut done: Vec<Option<LinkedProgram<Program>>> =
            (0..pending.len()).map(|_| None).collect();
        while pending.iter().any(Option::is_some) {
            for (slot, out) in pending.iter_mut().zip(&mut done) {
                if slot.as_ref().is_some_and(|p| m.link_ready(p)) {
                    let p = slot.take().expect("checked");
                    *out = Some(m.finish_link(p).expect("links"));
                }
            }
        }
        for (i, linked) in done.into_iter().enumerate() {
            let linked = linked.unwrap();
            let want = if round == 0 {
                LinkOrigin::Linked
            } else {
                LinkOrigin::CacheHit
            };
            assert_eq!(linked.origin, want, "round {round}, {}", programs[i].name);
            let (key, attributes, uniforms, interface) = &expected[i];
            assert_eq!(&linked.key, key);
            assert_eq!(&linked.attributes, attributes);
            assert_eq!(&linked.uniforms, uniforms);
            assert_eq!(&linked.interface, interface);
        }
        let b = m.backend();
        if round == 1 {
            assert_eq!((b.compiles, b.links, b.loads), (0, 0, programs.len()));
        }
    }
    assert_eq!(cache.len(), programs.len());
}

#[test]
fn deferred_binary_reads_happen_when_the_host_asks() {
    let Some(ctx) = context("deferred_binary_reads_happen_when_the_host_asks") else {
        return;
    };
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut m = manager(&ctx, &cache);
    m.set_defer_binary_reads(true);
    let (linked, _) = link(
        &mut m,
        &[(ShaderStage::Compute, COMPUTE)],
        &ProgramOptions::default(),
    );
    let mut linked = linked.expect("links");
    assert!(linked.binary_deferred);
    assert_eq!(
        (m.backend().reads, cache.len(), m.deferred_binaries()),
        (0, 0, 1)
    );
    // The program works before its binary is read.
    let expected: Vec<u32> = (0..32).map(|i| i * i + 7).collect();
    assert_eq!(dispatch(&ctx, &linked.program), expected);
    assert!(m.save_deferred_binary(&mut linked));
    assert!(!linked.binary_deferred);
    assert_eq!(
        (m.backend().reads, cache.len(), m.deferred_binaries()),
        (1, 1, 0)
    );
    assert!(!m.save_deferred_binary(&mut linked), "read once");
    // Another manager restores it.
    let mut warm = manager(&ctx, &cache);
    let (restored, _) = link(
        &mut warm,
        &[(ShaderStage::Compute, COMPUTE)],
        &ProgramOptions::default(),
    );
    let restored = restored.expect("restored");
    assert_eq!(restored.origin, LinkOrigin::CacheHit);
    assert_eq!(dispatch(&ctx, &restored.program), expected);
}

/// A link the backend refuses before the driver sees it (an attribute name with a NUL byte:
/// `LinkError::InvalidName`) is no driver verdict: nothing is cached, and the same link with a
/// good name then links.
#[test]
fn a_refusal_that_is_not_the_drivers_verdict_is_not_cached() {
    let Some(ctx) = context("a_refusal_that_is_not_the_drivers_verdict_is_not_cached") else {
        return;
    };
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut m = manager(&ctx, &cache);
    let bad = ProgramOptions {
        link: LinkOptions {
            attribute_bindings: vec![program_cache::AttributeBinding {
                name: "a\0b".into(),
                location: 0,
            }],
            ..LinkOptions::default()
        },
        page: None,
    };
    let sources = [(ShaderStage::Vertex, TF_VS), (ShaderStage::Fragment, TF_FS)];
    for _ in 0..2 {
        let (linked, _) = link(&mut m, &sources, &bad);
        match linked {
            Err(LinkFailure::Link { log }) => assert!(log.contains("NUL"), "{log}"),
            other => panic!("a NUL in a name linked: {other:?}"),
        }
    }
    assert_eq!(m.backend().links, 2, "asked the backend both times");
    assert_eq!(cache.counters().failure_hits, 0);
    assert_eq!(cache.len(), 0, "no failure record");
}
