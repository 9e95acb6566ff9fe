//! The original design brief's MemoryProgramCache tests (the brief is not part of this
//! repository), through the program manager on a recording fake driver (the same flows run on
//! the real driver in gl_flow.rs).

use std::sync::Arc;

use program_cache::{AttributeBinding, LinkOptions, ShaderStage};
use program_cache::{
    CacheConfig, EvictionPolicy, LinkOrigin, LinkStatus, ProgramCache, ProgramManager,
    ProgramOptions, Shader, ShaderVariables, VariableInfo,
};
use test_support::fake_driver::{self, Call, FakeDriver};

const VS: &str = "in vec4 a_position; void main() { gl_Position = a_position; }";
const FS: &str = "out vec4 o; void main() { o = vec4(1.0); }";

type Fake = ProgramManager<FakeDriver>;

fn manager(budget: usize) -> (Fake, Arc<ProgramCache>) {
    manager_with(CacheConfig::with_budget(budget))
}

fn manager_with(config: CacheConfig) -> (Fake, Arc<ProgramCache>) {
    let cache = ProgramCache::builder(config).build();
    (
        ProgramManager::new(FakeDriver::default(), cache.clone(), "fake 1.0"),
        cache,
    )
}

fn build(
    m: &mut Fake,
    vs_src: &str,
    fs_src: &str,
    options: &ProgramOptions,
) -> program_cache::LinkedProgram<fake_driver::FakeObject> {
    let mut vs = Shader::new(ShaderStage::Vertex, vs_src);
    let mut fs = Shader::new(ShaderStage::Fragment, fs_src);
    m.compile(&mut vs).unwrap();
    m.compile(&mut fs).unwrap();
    m.link(&mut vs, &mut fs, options).expect("links")
}

#[test]
fn correct_gl_calls_on_binary_save_and_linked_status_correct() {
    let (mut m, cache) = manager(1 << 20);
    let linked = build(&mut m, VS, FS, &ProgramOptions::default());
    assert_eq!(linked.origin, LinkOrigin::Linked);
    let calls = &m.backend().calls;
    assert!(
        matches!(
            calls.as_slice(),
            [
                Call::Compile(ShaderStage::Vertex, _),
                Call::Compile(ShaderStage::Fragment, _),
                Call::Link(1, 2),
                Call::GetBinary(3)
            ]
        ),
        "{calls:?}"
    );
    assert_eq!(cache.link_status(&linked.key), LinkStatus::Success);
    let entry = cache.peek(&linked.key).unwrap();
    assert_eq!(entry.binary.format, 0xFA4E);
}

#[test]
fn correct_gl_calls_on_load_maps_restored_and_binary_saved_is_binary_returned() {
    let (mut m, cache) = manager(1 << 20);
    let translator = ShaderVariables {
        attributes: vec![VariableInfo {
            name: "a_position".into(),
            mapped_name: "_ua_position".into(),
            gl_type: 0x8B52,
            array_size: 1,
            location: Some(0),
            ..Default::default()
        }],
        uniforms: vec![VariableInfo {
            name: "u_mvp".into(),
            mapped_name: "_uu_mvp".into(),
            gl_type: 0x8B5C,
            array_size: 1,
            location: Some(1),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut vs = Shader::new(ShaderStage::Vertex, VS);
    let mut fs = Shader::new(ShaderStage::Fragment, FS);
    vs.set_variables(translator.clone());
    m.compile(&mut vs).unwrap();
    m.compile(&mut fs).unwrap();
    let cold = m
        .link(&mut vs, &mut fs, &ProgramOptions::default())
        .unwrap();
    let saved = cache.peek(&cold.key).unwrap().binary.bytes.clone();
    m.backend().calls.clear();

    // Fresh shader objects without maps: the hit restores them from the cache.
    let mut vs2 = Shader::new(ShaderStage::Vertex, VS);
    let mut fs2 = Shader::new(ShaderStage::Fragment, FS);
    m.compile(&mut vs2).unwrap();
    m.compile(&mut fs2).unwrap();
    let warm = m
        .link(&mut vs2, &mut fs2, &ProgramOptions::default())
        .unwrap();
    assert_eq!(warm.origin, LinkOrigin::CacheHit);
    assert_eq!(m.backend().calls, [Call::LoadBinary(saved)]);
    assert_eq!(vs2.variables(), Some(&translator));
    assert_eq!(fs2.variables(), Some(&ShaderVariables::default()));
    assert_eq!(warm.attributes, cold.attributes);
    assert_eq!(warm.uniforms, cold.uniforms);
}

#[test]
fn different_source_does_not_return_the_same_program() {
    let (mut m, cache) = manager(1 << 20);
    let a = build(&mut m, VS, FS, &ProgramOptions::default());
    let b = build(
        &mut m,
        VS,
        "out vec4 o; void main() { o = vec4(0.5); }",
        &ProgramOptions::default(),
    );
    assert_ne!(a.key, b.key);
    assert_eq!(b.origin, LinkOrigin::Linked);
    assert_ne!(
        cache.peek(&a.key).unwrap().binary,
        cache.peek(&b.key).unwrap().binary
    );
    assert_eq!(m.backend().links(), 2);
}

#[test]
fn different_attrib_mapping_does_not_return_the_same_program() {
    let (mut m, _cache) = manager(1 << 20);
    let at = |location| ProgramOptions {
        link: LinkOptions {
            attribute_bindings: vec![AttributeBinding {
                name: "a_position".into(),
                location,
            }],
            ..LinkOptions::default()
        },
        page: None,
    };
    let a = build(&mut m, VS, FS, &at(0));
    let b = build(&mut m, VS, FS, &at(3));
    assert_ne!(a.key, b.key);
    assert_eq!(
        (a.origin, b.origin),
        (LinkOrigin::Linked, LinkOrigin::Linked)
    );
    assert_eq!(build(&mut m, VS, FS, &at(3)).origin, LinkOrigin::CacheHit);
}

#[test]
fn proper_eviction_on_save_when_the_cache_is_full() {
    // Room for two programs of this size.
    let (mut probe, probe_cache) = manager(1 << 20);
    let size = {
        let l = build(&mut probe, VS, FS, &ProgramOptions::default());
        probe_cache.peek(&l.key).unwrap().stored_size()
    };
    // The design brief's test is about LRU: the least recently used program is the one evicted.
    let (mut m, cache) = manager_with(CacheConfig {
        policy: EvictionPolicy::Lru,
        ..CacheConfig::with_budget(size * 2 + size / 2)
    });
    let fs = |n: u32| format!("out vec4 o; void main() {{ o = vec4({n}.0); }}");
    let a = build(&mut m, VS, &fs(1), &ProgramOptions::default());
    let b = build(&mut m, VS, &fs(2), &ProgramOptions::default());
    let c = build(&mut m, VS, &fs(3), &ProgramOptions::default());
    assert_eq!(
        cache.link_status(&a.key),
        LinkStatus::Unknown,
        "oldest evicted"
    );
    assert_eq!(cache.link_status(&b.key), LinkStatus::Success);
    assert_eq!(cache.link_status(&c.key), LinkStatus::Success);
    assert!(cache.size_bytes() <= size * 2 + size / 2);
    assert_eq!(cache.counters().evictions, 1);
}
