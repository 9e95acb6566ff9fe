//! The original design brief's ProgramCache tests (status storage, eviction with and without
//! shader reuse, clear; the brief is not part of this repository) plus keys, budget, memory
//! pressure and histograms.

use std::sync::{Arc, Mutex};

use program_cache::{AttributeBinding, LinkOptions, ShaderStage, TransformFeedbackMode};
use program_cache::{
    CacheConfig, CompileStatus, EvictionPolicy, LinkStatus, MemoryPressure, ProgramCache,
    ProgramKeyInput, ProgramManager, ProgramOptions, SaveError, Shader, program_key, shader_hash,
    stats::names,
};
use test_support::fake_driver::FakeDriver;
use test_support::programs::{key, program, shader};

const VS: &str = "in vec4 a_position; void main() { gl_Position = a_position; }";
const FS: &str = "out vec4 o; void main() { o = vec4(1.0); }";

fn input<'a>(
    bindings: &'a [AttributeBinding],
    varyings: &'a [String],
    mode: TransformFeedbackMode,
) -> ProgramKeyInput<'a> {
    ProgramKeyInput {
        vertex: shader_hash(ShaderStage::Vertex, VS, b""),
        fragment: shader_hash(ShaderStage::Fragment, FS, b""),
        backend_identity: "ANGLE 2.1.0 test",
        attribute_bindings: bindings,
        transform_feedback_varyings: varyings,
        transform_feedback_mode: mode,
        other_stages: &[],
        separable: false,
    }
}

/// An LRU cache of `budget` bytes, for the tests that name which program is evicted next (the
/// design brief's tests assume LRU order; the other policies have their own tests).
fn lru_cache(budget: usize) -> Arc<ProgramCache> {
    ProgramCache::builder(CacheConfig {
        policy: EvictionPolicy::Lru,
        ..CacheConfig::with_budget(budget)
    })
    .build()
}

fn binding(name: &str, location: u32) -> AttributeBinding {
    AttributeBinding {
        name: name.into(),
        location,
    }
}

#[test]
fn compilation_status_storage_and_the_key_is_copied() {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut source = String::from(VS);
    let hash = shader_hash(ShaderStage::Vertex, &source, b"");
    assert_eq!(cache.shader_compile_status(&hash), CompileStatus::Unknown);
    cache.shader_compile_succeeded(hash);
    // The caller's buffer changes and dies; the status is still found from the same source.
    source.clear();
    source.push_str("garbage");
    drop(source);
    let again = shader_hash(ShaderStage::Vertex, VS, b"");
    assert_eq!(cache.shader_compile_status(&again), CompileStatus::Success);
}

#[test]
fn compilation_unknown_on_source_change() {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    cache.shader_compile_succeeded(shader_hash(ShaderStage::Vertex, VS, b""));
    let changed = format!("{VS} ");
    assert_eq!(
        cache.shader_compile_status(&shader_hash(ShaderStage::Vertex, &changed, b"")),
        CompileStatus::Unknown
    );
    // So do other compile options and another stage.
    assert_eq!(
        cache.shader_compile_status(&shader_hash(ShaderStage::Vertex, VS, b"-O0")),
        CompileStatus::Unknown
    );
    assert_eq!(
        cache.shader_compile_status(&shader_hash(ShaderStage::Fragment, VS, b"")),
        CompileStatus::Unknown
    );
}

#[test]
fn linked_status_storage_and_the_key_is_copied() {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let bindings = vec![binding("a_position", 0)];
    let k = program_key(&input(&bindings, &[], TransformFeedbackMode::Interleaved));
    assert_eq!(cache.link_status(&k), LinkStatus::Unknown);
    let mut value = program(1, 2, 64);
    value.vertex_shader = shader_hash(ShaderStage::Vertex, VS, b"");
    value.fragment_shader = shader_hash(ShaderStage::Fragment, FS, b"");
    cache.save(k, value, None).unwrap();
    drop(bindings);
    let rebuilt = vec![binding("a_position", 0)];
    let k2 = program_key(&input(&rebuilt, &[], TransformFeedbackMode::Interleaved));
    assert_eq!(cache.link_status(&k2), LinkStatus::Success);
}

#[test]
fn link_unknown_on_source_change_for_both_vertex_and_fragment() {
    let base = input(&[], &[], TransformFeedbackMode::Interleaved);
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    cache
        .save(program_key(&base), program(1, 2, 64), None)
        .unwrap();
    let vs_changed = ProgramKeyInput {
        vertex: shader_hash(ShaderStage::Vertex, &format!("{VS}\n"), b""),
        ..base
    };
    let fs_changed = ProgramKeyInput {
        fragment: shader_hash(ShaderStage::Fragment, &format!("{FS}\n"), b""),
        ..base
    };
    assert_eq!(cache.link_status(&program_key(&base)), LinkStatus::Success);
    assert_eq!(
        cache.link_status(&program_key(&vs_changed)),
        LinkStatus::Unknown
    );
    assert_eq!(
        cache.link_status(&program_key(&fs_changed)),
        LinkStatus::Unknown
    );
}

#[test]
fn eviction_without_shader_reuse() {
    let budget = program(0, 0, 100).stored_size() * 2;
    let cache = lru_cache(budget);
    cache.shader_compile_succeeded(shader(1));
    cache.shader_compile_succeeded(shader(2));
    cache.save(key(1), program(1, 2, 100), None).unwrap();
    cache.save(key(2), program(3, 4, 100), None).unwrap();
    cache.save(key(3), program(5, 6, 100), None).unwrap();
    // Program 1 was evicted: its link status and both its shaders' statuses are gone.
    assert_eq!(cache.link_status(&key(1)), LinkStatus::Unknown);
    assert_eq!(
        cache.shader_compile_status(&shader(1)),
        CompileStatus::Unknown
    );
    assert_eq!(
        cache.shader_compile_status(&shader(2)),
        CompileStatus::Unknown
    );
    assert_eq!(cache.link_status(&key(2)), LinkStatus::Success);
    assert_eq!(
        cache.shader_compile_status(&shader(3)),
        CompileStatus::Success
    );
    assert_eq!(cache.counters().evictions, 1);
}

#[test]
fn eviction_with_shader_reuse_keeps_the_shared_shader_until_both_programs_are_gone() {
    let budget = program(0, 0, 100).stored_size() * 2;
    let cache = lru_cache(budget);
    // Programs 1 and 2 share vertex shader 7.
    cache.save(key(1), program(7, 1, 100), None).unwrap();
    cache.save(key(2), program(7, 2, 100), None).unwrap();
    assert_eq!(cache.shader_refcount(&shader(7)), 2);
    // Evict program 1: shader 7 is still used by program 2.
    cache.save(key(3), program(8, 3, 100), None).unwrap();
    assert_eq!(cache.link_status(&key(1)), LinkStatus::Unknown);
    assert_eq!(
        cache.shader_compile_status(&shader(1)),
        CompileStatus::Unknown
    );
    assert_eq!(
        cache.shader_compile_status(&shader(7)),
        CompileStatus::Success
    );
    assert_eq!(cache.shader_refcount(&shader(7)), 1);
    // Evict program 2: now shader 7 is unknown.
    cache.save(key(4), program(9, 4, 100), None).unwrap();
    assert_eq!(
        cache.shader_compile_status(&shader(7)),
        CompileStatus::Unknown
    );
    assert_eq!(cache.shader_refcount(&shader(7)), 0);
}

#[test]
fn clear_drops_programs_and_statuses() {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    cache.shader_compile_succeeded(shader(42));
    cache.save(key(1), program(1, 2, 100), None).unwrap();
    cache.clear();
    assert_eq!(cache.link_status(&key(1)), LinkStatus::Unknown);
    assert_eq!(
        cache.shader_compile_status(&shader(1)),
        CompileStatus::Unknown
    );
    assert_eq!(
        cache.shader_compile_status(&shader(42)),
        CompileStatus::Unknown
    );
    assert_eq!((cache.len(), cache.size_bytes()), (0, 0));
}

#[test]
fn edit_without_recompile_keeps_the_key() {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut manager = ProgramManager::new(FakeDriver::default(), cache.clone(), "test");
    let mut vs = Shader::new(ShaderStage::Vertex, VS);
    let mut fs = Shader::new(ShaderStage::Fragment, FS);
    manager.compile(&mut vs).unwrap();
    manager.compile(&mut fs).unwrap();
    let options = ProgramOptions::default();
    let before = manager.program_key(&vs, &fs, &options).unwrap();
    vs.set_source("in vec4 a_other; void main() { gl_Position = a_other; }");
    assert_eq!(manager.program_key(&vs, &fs, &options).unwrap(), before);
    let linked = manager.link(&mut vs, &mut fs, &options).unwrap();
    assert_eq!(linked.key, before);
    // The program linked is the one compiled, not the edited source.
    assert_eq!(linked.attributes[0].name, "a_position");
    manager.compile(&mut vs).unwrap();
    assert_ne!(manager.program_key(&vs, &fs, &options).unwrap(), before);
}

#[test]
fn transform_feedback_varyings_and_mode_change_the_key() {
    let varyings = vec!["v_a".to_string(), "v_b".to_string()];
    let reordered = vec!["v_b".to_string(), "v_a".to_string()];
    let none = program_key(&input(&[], &[], TransformFeedbackMode::Interleaved));
    let interleaved = program_key(&input(&[], &varyings, TransformFeedbackMode::Interleaved));
    let separate = program_key(&input(&[], &varyings, TransformFeedbackMode::Separate));
    let other_order = program_key(&input(&[], &reordered, TransformFeedbackMode::Interleaved));
    let keys = [none, interleaved, separate, other_order];
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            assert_ne!(a, b);
        }
    }
}

#[test]
fn attribute_bindings_are_order_independent_but_value_sensitive() {
    let ab = [binding("a", 0), binding("b", 1)];
    let ba = [binding("b", 1), binding("a", 0)];
    let swapped = [binding("a", 1), binding("b", 0)];
    let k =
        |b: &[AttributeBinding]| program_key(&input(b, &[], TransformFeedbackMode::Interleaved));
    assert_eq!(k(&ab), k(&ba));
    assert_ne!(k(&ab), k(&swapped));
    assert_ne!(k(&ab), k(&[]));
}

#[test]
fn length_prefixes_keep_concatenations_apart() {
    let k = |names: [&str; 2]| {
        let varyings: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        program_key(&input(&[], &varyings, TransformFeedbackMode::Interleaved))
    };
    assert_ne!(k(["ab", "c"]), k(["a", "bc"]));
    let b = |names: [&str; 2]| {
        let bindings = [binding(names[0], 0), binding(names[1], 0)];
        program_key(&input(&bindings, &[], TransformFeedbackMode::Interleaved))
    };
    assert_ne!(b(["x", "yz"]), b(["xy", "z"]));
    // Source vs options boundary.
    assert_ne!(
        shader_hash(ShaderStage::Vertex, "ab", b"c"),
        shader_hash(ShaderStage::Vertex, "a", b"bc")
    );
    // Identity is part of the key.
    let base = input(&[], &[], TransformFeedbackMode::Interleaved);
    let other = ProgramKeyInput {
        backend_identity: "ANGLE 2.1.1 test",
        ..base
    };
    assert_ne!(program_key(&base), program_key(&other));
}

#[test]
fn over_budget_and_empty_binaries_are_rejected_and_change_nothing() {
    let cache = ProgramCache::builder(CacheConfig::with_budget(1000)).build();
    cache.save(key(1), program(1, 2, 100), None).unwrap();
    let before = cache.size_bytes();
    let big = program(3, 4, 1000);
    let size = big.stored_size();
    assert_eq!(
        cache.save(key(2), big, None),
        Err(SaveError::OverBudget { size, budget: 1000 })
    );
    assert_eq!(
        cache.save(key(3), program(5, 6, 0), None),
        Err(SaveError::EmptyBinary)
    );
    assert_eq!(cache.size_bytes(), before);
    assert!(cache.peek(&key(1)).is_some());
    assert_eq!(cache.shader_refcount(&shader(3)), 0);
    assert_eq!(cache.counters().rejected_saves, 2);
}

#[test]
fn default_budgets() {
    assert_eq!(CacheConfig::desktop().budget_bytes, 6 * 1024 * 1024);
    assert_eq!(CacheConfig::mobile().budget_bytes, 2 * 1024 * 1024);
    assert_eq!(CacheConfig::low_memory().budget_bytes, 128 * 1024);
    assert_eq!(CacheConfig::default(), CacheConfig::desktop());
}

#[test]
fn memory_pressure_levels() {
    let unit = program(0, 0, 100).stored_size();
    let cache = lru_cache(unit * 8);
    for n in 1..=8 {
        cache.save(key(n), program(n, n + 100, 100), None).unwrap();
    }
    // Moderate: down to budget / 4 (two entries), least recent first.
    assert_eq!(
        cache.set_memory_pressure(MemoryPressure::Moderate),
        unit * 6
    );
    assert_eq!(cache.eviction_order(), [key(7), key(8)]);
    // Saves still work under moderate pressure, within budget / 4: the least recent goes.
    cache.save(key(9), program(9, 109, 100), None).unwrap();
    assert_eq!(cache.eviction_order(), [key(8), key(9)]);
    // Critical: everything goes, and saves are refused.
    assert_eq!(
        cache.set_memory_pressure(MemoryPressure::Critical),
        unit * 2
    );
    assert!(cache.is_empty());
    assert_eq!(
        cache.save(key(10), program(10, 110, 100), None),
        Err(SaveError::CriticalPressure)
    );
    assert_eq!(cache.memory_pressure(), MemoryPressure::Critical);
    // Back to none: saves work again.
    assert_eq!(cache.set_memory_pressure(MemoryPressure::None), 0);
    cache.save(key(10), program(10, 110, 100), None).unwrap();
    assert_eq!(cache.len(), 1);
}

#[test]
fn trim_returns_the_bytes_freed() {
    let unit = program(0, 0, 100).stored_size();
    let cache = ProgramCache::builder(CacheConfig::with_budget(unit * 4)).build();
    for n in 1..=4 {
        cache.save(key(n), program(n, n + 100, 100), None).unwrap();
    }
    assert_eq!(cache.trim(unit * 4), 0);
    assert_eq!(cache.trim(unit * 3 - 1), unit * 2);
    assert_eq!(cache.size_bytes(), unit * 2);
    assert_eq!(cache.trim(0), unit * 2);
    assert_eq!(cache.counters().evictions, 4);
}

#[test]
fn histograms_are_recorded_and_pushed_to_the_host_callback() {
    let seen: Arc<Mutex<Vec<(String, f64)>>> = Arc::default();
    let sink = seen.clone();
    let cache = ProgramCache::builder(CacheConfig::desktop())
        .callback(Arc::new(move |name, value| {
            sink.lock().unwrap().push((name.to_string(), value))
        }))
        .build();
    let mut manager = ProgramManager::new(FakeDriver::default(), cache.clone(), "test");
    for _ in 0..2 {
        let mut vs = Shader::new(ShaderStage::Vertex, VS);
        let mut fs = Shader::new(ShaderStage::Fragment, FS);
        manager.compile(&mut vs).unwrap();
        manager.compile(&mut fs).unwrap();
        manager
            .link(&mut vs, &mut fs, &ProgramOptions::default())
            .unwrap();
    }
    let stats = cache.stats();
    let count = |name: &str| stats.histograms.get(name).map_or(0, |h| h.count);
    assert_eq!(count(names::STATUS_MISS_COMPILE_TIME), 2);
    assert_eq!(count(names::STATUS_HIT_TIME), 2);
    assert_eq!(count(names::BINARY_MISS_LINK_TIME), 1);
    assert_eq!(count(names::BINARY_HIT_TIME), 1);
    assert_eq!(count(names::PROGRAM_BINARY_SIZE), 1);
    assert_eq!(count(names::CACHE_SIZE_BEFORE_SAVE), 1);
    assert_eq!(count(names::CACHE_SIZE_AFTER_SAVE), 1);
    assert_eq!(stats.histograms[names::CACHE_SIZE_BEFORE_SAVE].max, 0.0);
    assert_eq!(
        stats.histograms[names::CACHE_SIZE_AFTER_SAVE].max,
        cache.size_bytes() as f64
    );
    assert_eq!((stats.counters.hits, stats.counters.misses), (1, 1));
    assert_eq!(
        (stats.counters.status_hits, stats.counters.status_misses),
        (2, 2)
    );
    // The callback saw exactly the recorded samples, in order of recording.
    let pushed = seen.lock().unwrap();
    let total: u64 = stats.histograms.values().map(|h| h.count).sum();
    assert_eq!(pushed.len() as u64, total);
    assert!(pushed.iter().all(|(n, _)| names::ALL.contains(&n.as_str())));
}

#[test]
fn the_cache_is_shared_between_threads() {
    let cache = ProgramCache::builder(CacheConfig::with_budget(64 * 1024)).build();
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let cache = cache.clone();
            std::thread::spawn(move || {
                for i in 0..200u8 {
                    let k = key(t.wrapping_mul(50).wrapping_add(i % 50));
                    if cache.load(&k, None).is_none() {
                        let _ = cache.save(k, program(t, i, 300), Some(u64::from(t)));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(cache.size_bytes() <= 64 * 1024);
    let c = cache.counters();
    assert_eq!(c.hits + c.misses, 800);
}

#[test]
fn unused_link_options_do_not_leak_into_the_key_of_equal_programs() {
    // Two managers with the same identity compute the same key for the same inputs.
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut a = ProgramManager::new(FakeDriver::default(), cache.clone(), "id");
    let mut b = ProgramManager::new(FakeDriver::default(), cache, "id");
    let options = ProgramOptions {
        link: LinkOptions::default(),
        page: Some(3),
    };
    let keys: Vec<_> = [&mut a, &mut b]
        .into_iter()
        .map(|m| {
            let mut vs = Shader::new(ShaderStage::Vertex, VS);
            let mut fs = Shader::new(ShaderStage::Fragment, FS);
            m.compile(&mut vs).unwrap();
            m.compile(&mut fs).unwrap();
            m.program_key(&vs, &fs, &options).unwrap()
        })
        .collect();
    assert_eq!(keys[0], keys[1]);
}
