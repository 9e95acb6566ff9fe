//! Second review of issue 16 (deferred binary reads' byte bound and per-link ticket, failure
//! records): each test here failed before the fix committed with it, except
//! `a_read_token_forgets_only_its_own_read_even_after_the_program_is_gone`, which covers the
//! token API a later C fix is built on (that fix's C test failed before it).

use program_cache::{
    CacheConfig, CachedProgram, FailureRecord, LinkedProgram, ProgramCache, ProgramKey,
    ProgramManager, ProgramOptions, SaveError, ShaderStage,
};
use test_support::fake_driver::{FakeDriver, FakeObject};

fn link(m: &mut ProgramManager<FakeDriver>, vs_source: &str) -> LinkedProgram<FakeObject> {
    let mut vs = m.new_shader(ShaderStage::Vertex, vs_source);
    let mut fs = m.new_shader(ShaderStage::Fragment, "void main() {}");
    m.compile(&mut vs).unwrap();
    m.compile(&mut fs).unwrap();
    m.link(&mut vs, &mut fs, &ProgramOptions::default())
        .unwrap()
}

/// Two live programs of one key: the first waits for its read, the second (linked while the
/// first waits) was read at once. Deleting the second forgets nothing: the first's read is its
/// own, and the bytes and count stay with it until it is saved.
#[test]
fn forgetting_a_program_forgets_only_its_own_read() {
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 30)).build();
    let mut m = ProgramManager::new(FakeDriver::default(), cache.clone(), "review16");
    m.set_defer_binary_reads(true);
    let mut a = link(&mut m, "in vec4 a;");
    let mut b = link(&mut m, "in vec4 a;");
    assert_eq!(a.key, b.key);
    assert!(a.binary_deferred && !b.binary_deferred);
    let held = m.deferred_bytes();
    assert!(held > 0);

    assert!(!m.forget_deferred_read(&mut b), "b had no read waiting");
    assert_eq!(m.deferred_binaries(), 1);
    assert_eq!(m.deferred_bytes(), held);
    assert!(m.save_deferred_binary(&mut a), "a's read is still a's");
    assert_eq!(m.deferred_bytes(), 0);

    // A program's own read is forgotten, once, and its flag says so.
    let mut c = link(&mut m, "in vec4 c;");
    assert!(c.binary_deferred);
    assert!(m.forget_deferred_read(&mut c));
    assert!(!c.binary_deferred);
    assert_eq!((m.deferred_binaries(), m.deferred_bytes()), (0, 0));
    assert!(!m.forget_deferred_read(&mut c));
    assert!(!m.save_deferred_binary(&mut c));
}

/// A read dropped by key (`forget_deferred_binary`) leaves its program flagged; when the same
/// shaders link again and wait, deleting the stale program must not drop the new program's
/// read (its ticket is not the stale program's).
#[test]
fn a_stale_program_never_forgets_a_newer_programs_read() {
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 30)).build();
    let mut m = ProgramManager::new(FakeDriver::default(), cache.clone(), "review16");
    m.set_defer_binary_reads(true);
    let mut a = link(&mut m, "in vec4 a;");
    assert!(m.forget_deferred_binary(&a.key));
    assert!(
        a.binary_deferred,
        "forgetting by key does not reach the program"
    );
    let mut d = link(&mut m, "in vec4 a;");
    assert!(d.binary_deferred);
    assert!(
        !m.forget_deferred_read(&mut a),
        "the read under the key is d's"
    );
    assert_eq!(m.deferred_binaries(), 1);
    assert!(m.save_deferred_binary(&mut d));
    assert!(cache.peek(&d.key).is_some());
}

/// A program let go where its manager cannot be reached leaves a token: handed to the manager
/// later, it forgets that program's read and nothing else (not a newer program's read of the
/// same key, not another manager's, not twice).
#[test]
fn a_read_token_forgets_only_its_own_read_even_after_the_program_is_gone() {
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 30)).build();
    let mut m = ProgramManager::new(FakeDriver::default(), cache.clone(), "review16");
    let mut other = ProgramManager::new(FakeDriver::default(), cache.clone(), "review16");
    m.set_defer_binary_reads(true);
    other.set_defer_binary_reads(true);
    let a = link(&mut m, "in vec4 a;");
    let b = link(&mut m, "in vec4 b;");
    let token = b.deferred_read().expect("b waits for its read");
    assert_eq!(token.manager(), m.id());
    drop(b);
    assert_eq!(m.deferred_binaries(), 2);
    assert!(!other.forget_read(token), "another manager refuses it");
    assert!(m.forget_read(token));
    assert_eq!(m.deferred_binaries(), 1, "a's read stays");
    assert!(!m.forget_read(token), "once");

    // a's read is dropped by key; the same shaders link again and wait: a's old token does not
    // reach the new program's read.
    let stale = a.deferred_read().unwrap();
    assert!(m.forget_deferred_binary(&a.key));
    drop(a);
    let mut c = link(&mut m, "in vec4 a;");
    assert!(c.binary_deferred);
    assert!(!m.forget_read(stale));
    assert_eq!(m.deferred_binaries(), 1);
    // A token taken before its read was saved is spent, and a program read at once has none.
    let late = c.deferred_read().unwrap();
    assert!(m.save_deferred_binary(&mut c));
    assert!(c.deferred_read().is_none());
    assert!(!m.forget_read(late));
    assert_eq!((m.deferred_binaries(), m.deferred_bytes()), (0, 0));
    let d = link(&mut m, "in vec4 d;");
    let e = link(&mut m, "in vec4 d;");
    assert!(d.deferred_read().is_some() && e.deferred_read().is_none());
}

/// A compile failure record names the stage that failed: one whose stage is no shader stage
/// is not well formed (refused by `save`), so nothing can hold a record that counts as a failed
/// compile for its statuses yet reads as a failed link (C's `entry_failure` reports a stage it
/// does not know as a link failure).
#[test]
fn a_compile_failure_with_an_unknown_stage_is_refused() {
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 20)).build();
    let record = |stage| CachedProgram {
        failure: Some(FailureRecord {
            compile_stage: Some(stage),
            log: "error".to_owned(),
        }),
        ..CachedProgram::default()
    };
    for stage in [0, 0x1234, ShaderStage::Vertex.gl_enum() + 1] {
        assert!(!record(stage).is_well_formed(), "{stage:#x}");
        assert!(matches!(
            cache.save(ProgramKey([1; 20]), record(stage), None),
            Err(SaveError::EmptyBinary)
        ));
    }
    assert_eq!(cache.len(), 0);
    for stage in [
        ShaderStage::Vertex,
        ShaderStage::Compute,
        ShaderStage::TessEvaluation,
    ] {
        assert!(record(stage.gl_enum()).is_well_formed());
    }
}
