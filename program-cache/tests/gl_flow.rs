//! The compile/link flow on the machine's real driver (Mesa llvmpipe on CI): what the fake-driver
//! tests show, proven with real shaders, real binaries and real pixels.

use std::sync::Arc;

use headless_gl::{
    GlContext, LinkOptions, Program, ShaderStage, TransformFeedbackMode, UniformValue,
};
use program_cache::{
    CacheConfig, CompileOutcome, CompileStatus, GlBackend, LinkOrigin, LinkedProgram,
    MemoryPressure, ProgramBackend, ProgramBinaryData, ProgramCache, ProgramManager,
    ProgramOptions, Shader, backend_shader_hash,
};
use test_support::fake_driver::Counting;
use test_support::gl::context_or_skip;
use test_support::shaders::{FS, VS, draw_triangle, with_prelude};

type Manager<'a> = ProgramManager<GlBackend<'a>>;

fn manager(ctx: &GlContext) -> (Manager<'_>, Arc<ProgramCache>) {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    (
        ProgramManager::new(GlBackend::new(ctx), cache.clone(), "gl_flow test"),
        cache,
    )
}

fn build(
    m: &mut Manager<'_>,
    ctx: &GlContext,
    options: &ProgramOptions,
) -> (LinkedProgram<Program>, [CompileOutcome; 2]) {
    let mut vs = Shader::new(ShaderStage::Vertex, with_prelude(ctx, VS));
    let mut fs = Shader::new(ShaderStage::Fragment, with_prelude(ctx, FS));
    let outcomes = [m.compile(&mut vs).unwrap(), m.compile(&mut fs).unwrap()];
    (m.link(&mut vs, &mut fs, options).expect("links"), outcomes)
}

fn draw(ctx: &GlContext, program: &Program) -> Vec<u8> {
    let uniforms = [
        ("u_scale", UniformValue::Float(0.9)),
        ("u_tint", UniformValue::Vec4([1.0, 0.5, 1.0, 1.0])),
    ];
    draw_triangle(ctx, program, 24, &uniforms)
}

#[test]
fn a_cache_hit_is_indistinguishable_from_compile_and_link() {
    let Some(ctx) = context_or_skip("a_cache_hit_is_indistinguishable_from_compile_and_link")
    else {
        return;
    };
    let (mut m, cache) = manager(&ctx);
    let options = ProgramOptions::default();
    let (cold, outcomes) = build(&mut m, &ctx, &options);
    assert_eq!(
        outcomes,
        [CompileOutcome::Compiled, CompileOutcome::Compiled]
    );
    assert_eq!(cold.origin, LinkOrigin::Linked);
    let (warm, outcomes) = build(&mut m, &ctx, &options);
    assert_eq!(
        outcomes,
        [CompileOutcome::Deferred, CompileOutcome::Deferred]
    );
    assert_eq!(warm.origin, LinkOrigin::CacheHit);
    assert_eq!(warm.attributes, cold.attributes);
    assert_eq!(warm.uniforms, cold.uniforms);
    assert_eq!(cold.attributes.len(), 2);
    assert_eq!(cold.uniforms.len(), 2);
    let picture = draw(&ctx, &cold.program);
    assert_eq!(draw(&ctx, &warm.program), picture);
    assert!(
        picture.chunks(4).any(|p| p[0] > 50),
        "the triangle is drawn"
    );
    // The stored maps put each uniform with the stage that declares it.
    let entry = cache.peek(&cold.key).unwrap();
    let names =
        |v: &[program_cache::VariableInfo]| v.iter().map(|x| x.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&entry.vertex.attributes), ["a_color", "a_position"]);
    assert_eq!(names(&entry.vertex.uniforms), ["u_scale"]);
    assert_eq!(names(&entry.fragment.uniforms), ["u_tint"]);
    let c = cache.counters();
    assert_eq!(
        (c.hits, c.misses, c.status_hits, c.status_misses),
        (1, 1, 2, 2)
    );
}

#[test]
fn a_binary_the_driver_refuses_is_evicted_and_the_program_linked_from_source() {
    let Some(ctx) = context_or_skip("a_binary_the_driver_refuses_is_evicted") else {
        return;
    };
    let (mut m, cache) = manager(&ctx);
    let options = ProgramOptions::default();
    let (cold, _) = build(&mut m, &ctx, &options);
    // Damage the cached binary (as a driver update or a bad disk would).
    let mut entry = (*cache.peek(&cold.key).unwrap()).clone();
    let mid = entry.binary.bytes.len() / 2;
    entry.binary.bytes[mid] ^= 0x40;
    cache.save(cold.key, entry, None).unwrap();

    let (relinked, outcomes) = build(&mut m, &ctx, &options);
    assert_eq!(
        outcomes,
        [CompileOutcome::Deferred, CompileOutcome::Deferred]
    );
    assert_eq!(relinked.origin, LinkOrigin::RelinkedAfterRejection);
    assert_eq!(cache.counters().driver_rejections, 1);
    assert_eq!(relinked.attributes, cold.attributes);
    assert_eq!(relinked.uniforms, cold.uniforms);
    assert_eq!(draw(&ctx, &relinked.program), draw(&ctx, &cold.program));
    // The good binary is back in the cache.
    let (again, _) = build(&mut m, &ctx, &options);
    assert_eq!(again.origin, LinkOrigin::CacheHit);

    // A binary in a format the driver does not list is refused the same way.
    let mut entry = (*cache.peek(&cold.key).unwrap()).clone();
    entry.binary = ProgramBinaryData {
        format: 0xBAD,
        bytes: entry.binary.bytes,
    };
    cache.save(cold.key, entry, None).unwrap();
    assert_eq!(
        build(&mut m, &ctx, &options).0.origin,
        LinkOrigin::RelinkedAfterRejection
    );
    assert_eq!(cache.counters().driver_rejections, 2);
}

#[test]
fn a_failed_compile_records_no_status_and_keeps_the_info_log() {
    let Some(ctx) = context_or_skip("a_failed_compile_records_no_status") else {
        return;
    };
    let (mut m, cache) = manager(&ctx);
    let bad = with_prelude(&ctx, "void main() { gl_Position = undeclared; }");
    let mut vs = Shader::new(ShaderStage::Vertex, bad.clone());
    assert_eq!(m.compile(&mut vs).unwrap(), CompileOutcome::Failed);
    assert!(
        vs.info_log().unwrap().contains("undeclared"),
        "{:?}",
        vs.info_log()
    );
    let expected = backend_shader_hash(ShaderStage::Vertex, &bad, b"", "gl_flow test");
    assert_eq!(vs.compiled_hash(), Some(expected), "the manager's hash");
    assert_eq!(
        cache.shader_compile_status(&backend_shader_hash(
            ShaderStage::Vertex,
            &bad,
            b"",
            "gl_flow test"
        )),
        CompileStatus::Unknown
    );
}

#[test]
fn an_edit_without_recompile_links_what_was_compiled() {
    let Some(ctx) = context_or_skip("an_edit_without_recompile_links_what_was_compiled") else {
        return;
    };
    let (mut m, _cache) = manager(&ctx);
    let (reference, _) = build(&mut m, &ctx, &ProgramOptions::default());
    let mut vs = Shader::new(ShaderStage::Vertex, with_prelude(&ctx, VS));
    let mut fs = Shader::new(ShaderStage::Fragment, with_prelude(&ctx, FS));
    m.compile(&mut vs).unwrap();
    m.compile(&mut fs).unwrap();
    vs.set_source("this does not compile");
    let linked = m
        .link(&mut vs, &mut fs, &ProgramOptions::default())
        .unwrap();
    assert_eq!(linked.key, reference.key);
    assert_eq!(draw(&ctx, &linked.program), draw(&ctx, &reference.program));
}

#[test]
fn transform_feedback_programs_are_keyed_and_restored_separately() {
    let Some(ctx) = context_or_skip("transform_feedback_programs_are_keyed") else {
        return;
    };
    let (mut m, cache) = manager(&ctx);
    let tf = |mode| ProgramOptions {
        link: LinkOptions {
            transform_feedback_varyings: vec!["v_color".into()],
            transform_feedback_mode: mode,
            ..LinkOptions::default()
        },
        page: None,
    };
    let (plain, _) = build(&mut m, &ctx, &ProgramOptions::default());
    let (interleaved, _) = build(&mut m, &ctx, &tf(TransformFeedbackMode::Interleaved));
    let (separate, _) = build(&mut m, &ctx, &tf(TransformFeedbackMode::Separate));
    assert_ne!(plain.key, interleaved.key);
    assert_ne!(interleaved.key, separate.key);
    assert_eq!(cache.len(), 3);
    let (hit, _) = build(&mut m, &ctx, &tf(TransformFeedbackMode::Separate));
    assert_eq!(hit.origin, LinkOrigin::CacheHit);
    assert_eq!(hit.key, separate.key);
}

#[test]
fn the_driver_binary_is_not_read_when_the_cache_would_refuse_it() {
    let Some(ctx) = context_or_skip("the_driver_binary_is_not_read_when_the_cache_would_refuse_it")
    else {
        return;
    };
    // GL_PROGRAM_BINARY_LENGTH, as GlBackend reads it, is the length of the binary it returns.
    let reference = ctx
        .build_program(&with_prelude(&ctx, VS), &with_prelude(&ctx, FS))
        .unwrap();
    let mut gl = GlBackend::new(&ctx);
    let len = gl
        .program_binary_length(&reference)
        .expect("the driver reports GL_PROGRAM_BINARY_LENGTH");
    assert_eq!(gl.program_binary(&reference).unwrap().bytes.len(), len);
    let picture = draw(&ctx, &reference);

    let run = |budget: usize, pressure: MemoryPressure| {
        let cache = ProgramCache::builder(CacheConfig::with_budget(budget)).build();
        cache.set_memory_pressure(pressure);
        let backend = Counting::new(GlBackend::new(&ctx));
        let mut m = ProgramManager::new(backend, cache.clone(), "gl_flow test");
        let mut vs = Shader::new(ShaderStage::Vertex, with_prelude(&ctx, VS));
        let mut fs = Shader::new(ShaderStage::Fragment, with_prelude(&ctx, FS));
        m.compile(&mut vs).unwrap();
        m.compile(&mut fs).unwrap();
        let linked = m
            .link(&mut vs, &mut fs, &ProgramOptions::default())
            .expect("links");
        // Whatever the cache does, the caller gets a working program.
        assert_eq!(linked.origin, LinkOrigin::Linked);
        assert_eq!(draw(&ctx, &linked.program), picture);
        let b = m.backend();
        (b.reads, b.length_queries, m.binary_reads_skipped(), cache)
    };

    // Critical: no read, and no length query either.
    let (reads, queries, skipped, cache) = run(6 << 20, MemoryPressure::Critical);
    assert_eq!((reads, queries, skipped), (0, 0, 1));
    assert!(cache.is_empty());
    assert_eq!(cache.counters().rejected_saves, 1);
    // Moderate, with a quarter of the budget smaller than the binary alone: the length is
    // asked, the binary is not read.
    let (reads, queries, skipped, cache) = run(len * 2, MemoryPressure::Moderate);
    assert_eq!((reads, queries, skipped), (0, 1, 1));
    assert!(cache.is_empty());
    // No pressure: read once and saved.
    let (reads, queries, skipped, cache) = run(6 << 20, MemoryPressure::None);
    assert_eq!((reads, queries, skipped), (1, 1, 0));
    assert_eq!(cache.len(), 1);
}
