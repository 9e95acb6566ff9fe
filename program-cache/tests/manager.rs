//! The original design brief's ProgramManager tests (the brief is not part of this repository)
//! on a recording fake driver (the same flows run on the real driver in gl_flow.rs).

use std::sync::Arc;

use program_cache::ShaderStage;
use program_cache::{
    CacheConfig, CompileOutcome, CompileStatus, LinkFailure, LinkOrigin, LinkStatus, ProgramCache,
    ProgramManager, ProgramOptions, Shader, ShaderHash, backend_shader_hash,
};
use test_support::fake_driver::{Call, FakeDriver};

const VS: &str = "in vec4 a_position; void main() { gl_Position = a_position; }";
const FS: &str = "out vec4 o; void main() { o = vec4(1.0); }";

fn manager() -> (ProgramManager<FakeDriver>, Arc<ProgramCache>) {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    (
        ProgramManager::new(FakeDriver::default(), cache.clone(), "fake"),
        cache,
    )
}

/// The hash `manager()`'s manager gives a shader without compile options.
fn hash(stage: ShaderStage, source: &str) -> ShaderHash {
    backend_shader_hash(stage, source, b"", "fake")
}

#[test]
fn calls_compile_on_compilation_cache_miss_and_sets_status_to_success() {
    let (mut m, cache) = manager();
    let mut vs = Shader::new(ShaderStage::Vertex, VS);
    assert_eq!(m.compile(&mut vs).unwrap(), CompileOutcome::Compiled);
    assert_eq!(
        m.backend().calls,
        [Call::Compile(ShaderStage::Vertex, VS.into())]
    );
    assert!(vs.compile_status() && !vs.is_deferred());
    assert_eq!(
        cache.shader_compile_status(&hash(ShaderStage::Vertex, VS)),
        CompileStatus::Success
    );
}

#[test]
fn does_not_set_compilation_status_on_error() {
    let (mut m, cache) = manager();
    let bad = "void main() { ERROR }";
    let mut vs = Shader::new(ShaderStage::Vertex, bad);
    assert_eq!(m.compile(&mut vs).unwrap(), CompileOutcome::Failed);
    assert!(!vs.compile_status());
    assert!(vs.info_log().unwrap().contains("syntax error"));
    // The hash the status would be under is the manager's (so the Unknown below is about it).
    assert_eq!(vs.compiled_hash(), Some(hash(ShaderStage::Vertex, bad)));
    assert_eq!(
        cache.shader_compile_status(&hash(ShaderStage::Vertex, bad)),
        CompileStatus::Unknown
    );
    // Compiling it again does not go to the driver again: the cache recorded the failure
    // (negative result), and the shader gets the driver's log byte for byte.
    let log = vs.info_log().unwrap().to_owned();
    assert_eq!(m.compile(&mut vs).unwrap(), CompileOutcome::KnownFailure);
    assert_eq!(m.backend().compiles(), 1);
    assert_eq!(vs.info_log(), Some(log.as_str()));
    assert!(!vs.compile_status());
}

#[test]
fn does_not_compile_when_compilation_status_is_success() {
    let (mut m, cache) = manager();
    cache.shader_compile_succeeded(hash(ShaderStage::Vertex, VS));
    let mut vs = Shader::new(ShaderStage::Vertex, VS);
    assert_eq!(m.compile(&mut vs).unwrap(), CompileOutcome::Deferred);
    assert!(m.backend().calls.is_empty());
    assert!(vs.compile_status() && vs.is_deferred());
    assert!(vs.object().is_none());
}

#[test]
fn links_program_on_cache_miss() {
    let (mut m, cache) = manager();
    let mut vs = Shader::new(ShaderStage::Vertex, VS);
    let mut fs = Shader::new(ShaderStage::Fragment, FS);
    m.compile(&mut vs).unwrap();
    m.compile(&mut fs).unwrap();
    let linked = m
        .link(&mut vs, &mut fs, &ProgramOptions::default())
        .unwrap();
    assert_eq!(linked.origin, LinkOrigin::Linked);
    assert_eq!((m.backend().links(), m.backend().loads()), (1, 0));
    assert_eq!(cache.link_status(&linked.key), LinkStatus::Success);
    assert_eq!(cache.counters().misses, 1);
}

#[test]
fn compiles_uncompiled_reused_shaders_on_cache_miss_and_links() {
    let (mut m, cache) = manager();
    // Both shaders are known to compile, but this program is not cached.
    cache.shader_compile_succeeded(hash(ShaderStage::Vertex, VS));
    cache.shader_compile_succeeded(hash(ShaderStage::Fragment, FS));
    let mut vs = Shader::new(ShaderStage::Vertex, VS);
    let mut fs = Shader::new(ShaderStage::Fragment, FS);
    assert_eq!(m.compile(&mut vs).unwrap(), CompileOutcome::Deferred);
    assert_eq!(m.compile(&mut fs).unwrap(), CompileOutcome::Deferred);
    // An edit after the (deferred) compile must not leak into the deferred compile.
    vs.set_source("in vec4 a_edit; void main() { gl_Position = a_edit; }");
    let linked = m
        .link(&mut vs, &mut fs, &ProgramOptions::default())
        .unwrap();
    assert_eq!(linked.origin, LinkOrigin::Linked);
    assert_eq!(
        m.backend().calls[..3],
        [
            Call::Compile(ShaderStage::Vertex, VS.into()),
            Call::Compile(ShaderStage::Fragment, FS.into()),
            Call::Link(1, 2)
        ]
    );
    assert!(!vs.is_deferred() && vs.object().is_some());
}

#[test]
fn correct_program_cache_hit_loads_without_linking_or_caching_again() {
    let (mut m, cache) = manager();
    for _ in 0..2 {
        let mut vs = Shader::new(ShaderStage::Vertex, VS);
        let mut fs = Shader::new(ShaderStage::Fragment, FS);
        m.compile(&mut vs).unwrap();
        m.compile(&mut fs).unwrap();
        m.link(&mut vs, &mut fs, &ProgramOptions::default())
            .unwrap();
    }
    // Second round: no compile, no link, no binary read, one load.
    let d = m.backend();
    assert_eq!(
        (d.compiles(), d.links(), d.binaries(), d.loads()),
        (2, 1, 1, 1)
    );
    let c = cache.counters();
    assert_eq!((c.hits, c.misses, c.saves), (1, 1, 1));
}

#[test]
fn compiles_and_links_if_the_binary_load_fails() {
    let (mut m, cache) = manager();
    let build = |m: &mut ProgramManager<FakeDriver>| {
        let mut vs = Shader::new(ShaderStage::Vertex, VS);
        let mut fs = Shader::new(ShaderStage::Fragment, FS);
        m.compile(&mut vs).unwrap();
        m.compile(&mut fs).unwrap();
        (
            m.link(&mut vs, &mut fs, &ProgramOptions::default())
                .unwrap(),
            vs,
            fs,
        )
    };
    let (cold, _, _) = build(&mut m);
    m.backend().reject_loads = true;
    m.backend().calls.clear();
    let (warm, vs, _) = build(&mut m);
    assert_eq!(warm.origin, LinkOrigin::RelinkedAfterRejection);
    assert_eq!(warm.key, cold.key);
    assert_eq!(warm.attributes, cold.attributes);
    assert!(!vs.is_deferred());
    let d = m.backend();
    assert_eq!(
        (d.loads(), d.compiles(), d.links(), d.binaries()),
        (1, 2, 1, 1)
    );
    let c = cache.counters();
    assert_eq!(c.driver_rejections, 1);
    // The relinked program was saved again.
    assert_eq!(cache.link_status(&cold.key), LinkStatus::Success);
    assert_eq!(c.saves, 2);
}

#[test]
fn linking_an_uncompiled_or_failed_shader_is_an_error() {
    let (mut m, _) = manager();
    let mut vs = Shader::new(ShaderStage::Vertex, VS);
    let mut fs = Shader::new(ShaderStage::Fragment, "ERROR");
    assert_eq!(
        m.link(&mut vs, &mut fs, &ProgramOptions::default())
            .unwrap_err(),
        LinkFailure::ShaderNotCompiled {
            stage: ShaderStage::Vertex
        }
    );
    m.compile(&mut vs).unwrap();
    m.compile(&mut fs).unwrap();
    assert_eq!(
        m.link(&mut vs, &mut fs, &ProgramOptions::default())
            .unwrap_err(),
        LinkFailure::ShaderNotCompiled {
            stage: ShaderStage::Fragment
        }
    );
}

#[test]
fn a_pending_link_or_a_deferred_binary_of_another_manager_is_refused() {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut a = ProgramManager::new(FakeDriver::default(), cache.clone(), "fake");
    let mut b = ProgramManager::new(FakeDriver::default(), cache.clone(), "fake");
    a.set_defer_binary_reads(true);
    b.set_defer_binary_reads(true);
    let mut vs = a.new_shader(ShaderStage::Vertex, VS);
    let mut fs = a.new_shader(ShaderStage::Fragment, FS);
    a.compile(&mut vs).unwrap();
    a.compile(&mut fs).unwrap();
    let pending = a
        .start_link(&mut [&mut vs, &mut fs], &ProgramOptions::default())
        .unwrap();
    assert_eq!(pending.manager(), a.id());
    assert!(
        b.link_ready(&pending),
        "b does not ask its driver about a's link"
    );
    match b.finish_link(pending) {
        Err(LinkFailure::ForeignLink { owner }) => assert_eq!(owner, a.id()),
        other => panic!("b finished a's link: {other:?}"),
    }
    assert_eq!(b.backend().links(), 0);
    assert_eq!(cache.len(), 0, "nothing saved");

    // The same program linked by both with deferred reads: b never reads from a's object.
    let mut linked_a = a
        .link(&mut vs, &mut fs, &ProgramOptions::default())
        .unwrap();
    let mut vs_b = b.new_shader(ShaderStage::Vertex, VS);
    let mut fs_b = b.new_shader(ShaderStage::Fragment, FS);
    b.compile(&mut vs_b).unwrap();
    b.compile(&mut fs_b).unwrap();
    let linked_b = b
        .link(&mut vs_b, &mut fs_b, &ProgramOptions::default())
        .unwrap();
    assert!(linked_a.binary_deferred && linked_b.binary_deferred);
    assert_eq!(linked_a.key, linked_b.key);
    assert!(!b.save_deferred_binary(&mut linked_a));
    assert_eq!((b.backend().binaries(), b.deferred_binaries()), (0, 1));
    assert!(a.save_deferred_binary(&mut linked_a));
    assert_eq!((a.backend().binaries(), a.deferred_binaries()), (1, 0));
    assert_eq!(cache.len(), 1);
}

/// The fake-driver form of `review16.rs`'s
/// `a_shader_compiled_on_another_backend_is_not_deferred_where_it_fails` (which needs GL): a
/// status recorded by one backend identity never defers another identity's compile, and one
/// recorded under the same identity does.
#[test]
fn a_compile_status_is_one_backend_identitys() {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut core = ProgramManager::new(FakeDriver::default(), cache.clone(), "core");
    let mut compat = ProgramManager::new(FakeDriver::default(), cache.clone(), "compatibility");
    let mut s = Shader::new(ShaderStage::Vertex, VS);
    assert_eq!(compat.compile(&mut s).unwrap(), CompileOutcome::Compiled);
    let mut s = Shader::new(ShaderStage::Vertex, VS);
    assert_eq!(core.compile(&mut s).unwrap(), CompileOutcome::Compiled);
    assert_eq!(core.backend().compiles(), 1, "core asked its own driver");
    assert_ne!(
        s.compiled_hash(),
        Some(backend_shader_hash(
            ShaderStage::Vertex,
            VS,
            b"",
            "compatibility"
        ))
    );
    // Each identity's own status defers its next compile.
    let mut again = ProgramManager::new(FakeDriver::default(), cache.clone(), "core");
    let mut s = Shader::new(ShaderStage::Vertex, VS);
    assert_eq!(again.compile(&mut s).unwrap(), CompileOutcome::Deferred);
    assert_eq!(again.backend().compiles(), 0);
    assert_eq!(
        s.compiled_hash(),
        Some(backend_shader_hash(ShaderStage::Vertex, VS, b"", "core"))
    );
    let c = cache.counters();
    assert_eq!((c.status_hits, c.status_misses), (1, 2));
}
