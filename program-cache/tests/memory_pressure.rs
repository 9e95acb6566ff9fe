//! Memory pressure (issue 10, item 14): under moderate pressure the cache stays at a quarter of
//! its budget until the level is `None` again, as Chromium's MemoryProgramCache does; under
//! critical pressure the program manager does not even read the binary out of the driver. The
//! same skip is proven on the real driver in gl_flow.rs.

use std::sync::Arc;

use program_cache::ShaderStage;
use program_cache::{
    CacheConfig, EvictionPolicy, LinkOrigin, LinkStatus, MemoryPressure, ProgramCache,
    ProgramManager, ProgramOptions, SaveError, Shader,
};
use test_support::fake_driver::{Counting, FakeDriver, FakeObject};
use test_support::programs::{self, key, policy_cache, program};

const VS: &str = "in vec4 a_position; void main() { gl_Position = a_position; }";
const FS: &str = "out vec4 o; void main() { o = vec4(1.0); }";

#[test]
fn moderate_pressure_keeps_saves_within_a_quarter_of_the_budget_until_none() {
    let unit = program(0, 0, 100).stored_size();
    let budget = unit * 8;
    for policy in EvictionPolicy::ALL {
        let c = policy_cache(policy, budget);
        for n in 1..=8 {
            c.save(key(n), program(n, n + 100, 100), None).unwrap();
        }
        assert_eq!(c.size_bytes(), budget, "{policy:?}");
        assert_eq!(c.set_memory_pressure(MemoryPressure::Moderate), unit * 6);
        // Every save under moderate pressure is kept and evicts down to budget / 4.
        for n in 9..=30 {
            if n % 3 == 0 {
                // Lookups in between, so the frequency-aware policies see reuse too.
                let _ = c.load(&key(n - 1), None);
            }
            c.save(key(n), program(n, n + 100, 100), None).unwrap();
            assert!(c.peek(&key(n)).is_some(), "{policy:?}: save {n} kept");
            assert!(
                c.size_bytes() <= budget / 4,
                "{policy:?}: {} bytes after save {n} under moderate pressure, limit {}",
                c.size_bytes(),
                budget / 4
            );
        }
        // Back to none: the full budget again.
        assert_eq!(c.set_memory_pressure(MemoryPressure::None), 0);
        for n in 31..=45 {
            c.save(key(n), program(n, n + 100, 100), None).unwrap();
            assert!(c.size_bytes() <= budget, "{policy:?}");
        }
        assert_eq!(c.size_bytes(), budget, "{policy:?}: full budget after None");
    }
}

#[test]
fn an_entry_over_a_quarter_of_the_budget_is_refused_under_moderate_pressure() {
    let unit = program(0, 0, 100).stored_size();
    let budget = unit * 8;
    let c = policy_cache(EvictionPolicy::default(), budget);
    c.save(key(1), program(1, 101, 100), None).unwrap();
    c.set_memory_pressure(MemoryPressure::Moderate);
    let big = program(2, 102, 100 + 2 * unit);
    let size = big.stored_size();
    assert!(size > budget / 4 && size <= budget);
    assert_eq!(
        c.save(key(2), big.clone(), None),
        Err(SaveError::OverBudget {
            size,
            budget: budget / 4
        })
    );
    // Nothing changed, and the refusal is counted.
    assert_eq!((c.len(), c.size_bytes()), (1, unit));
    assert_eq!(c.shader_refcount(&programs::shader(2)), 0);
    assert_eq!(c.counters().rejected_saves, 1);
    // The same entry fits the full budget once the pressure is gone.
    c.set_memory_pressure(MemoryPressure::None);
    c.save(key(2), big, None).unwrap();
    assert_eq!(c.link_status(&key(2)), LinkStatus::Success);
}

#[test]
fn would_accept_foresees_every_pressure_and_size_refusal_and_changes_nothing() {
    let unit = program(0, 0, 100).stored_size();
    let budget = unit * 8;
    let c = policy_cache(EvictionPolicy::default(), budget);
    assert_eq!(c.would_accept(None), Ok(()));
    assert_eq!(c.would_accept(Some(budget)), Ok(()));
    assert_eq!(
        c.would_accept(Some(budget + 1)),
        Err(SaveError::OverBudget {
            size: budget + 1,
            budget
        })
    );
    c.set_memory_pressure(MemoryPressure::Moderate);
    assert_eq!(c.would_accept(None), Ok(()));
    assert_eq!(c.would_accept(Some(budget / 4)), Ok(()));
    assert_eq!(
        c.would_accept(Some(budget / 4 + 1)),
        Err(SaveError::OverBudget {
            size: budget / 4 + 1,
            budget: budget / 4
        })
    );
    c.set_memory_pressure(MemoryPressure::Critical);
    assert_eq!(c.would_accept(None), Err(SaveError::CriticalPressure));
    assert_eq!(c.would_accept(Some(1)), Err(SaveError::CriticalPressure));
    // A query is not a save: nothing counted.
    assert_eq!(c.counters().rejected_saves, 0);
}

type Fake = ProgramManager<FakeDriver>;

fn link_one(m: &mut Fake, fs: &str) -> program_cache::LinkedProgram<FakeObject> {
    let mut vs = Shader::new(ShaderStage::Vertex, VS);
    let mut fs = Shader::new(ShaderStage::Fragment, fs);
    m.compile(&mut vs).unwrap();
    m.compile(&mut fs).unwrap();
    m.link(&mut vs, &mut fs, &ProgramOptions::default())
        .expect("links")
}

#[test]
fn no_binary_is_read_from_the_driver_under_critical_pressure() {
    let cache = ProgramCache::builder(CacheConfig::desktop()).build();
    let mut m = ProgramManager::new(FakeDriver::default(), cache.clone(), "fake");
    cache.set_memory_pressure(MemoryPressure::Critical);
    let linked = link_one(&mut m, FS);
    assert_eq!(linked.origin, LinkOrigin::Linked);
    assert_eq!(m.backend().binaries(), 0, "{:?}", m.backend().calls);
    assert_eq!(m.binary_reads_skipped(), 1);
    assert_eq!(cache.counters().rejected_saves, 1);
    assert!(cache.is_empty());
    // Pressure gone: the next link reads and saves its binary.
    cache.set_memory_pressure(MemoryPressure::None);
    let linked = link_one(&mut m, FS);
    assert_eq!(m.backend().binaries(), 1);
    assert_eq!(m.binary_reads_skipped(), 1);
    assert_eq!(cache.link_status(&linked.key), LinkStatus::Success);
}

/// Links VS + `fs` on a fresh sized manager over a cache of `budget` bytes under `pressure`;
/// returns the manager and the cache.
fn sized_link(
    budget: usize,
    pressure: MemoryPressure,
    fs: &str,
) -> (ProgramManager<Counting<FakeDriver>>, Arc<ProgramCache>) {
    let cache = ProgramCache::builder(CacheConfig::with_budget(budget)).build();
    cache.set_memory_pressure(pressure);
    let mut m = ProgramManager::new(
        Counting::new(FakeDriver::with_binary_length()),
        cache.clone(),
        "fake",
    );
    let mut vs = Shader::new(ShaderStage::Vertex, VS);
    let mut f = Shader::new(ShaderStage::Fragment, fs);
    m.compile(&mut vs).unwrap();
    m.compile(&mut f).unwrap();
    m.link(&mut vs, &mut f, &ProgramOptions::default())
        .expect("links");
    (m, cache)
}

#[test]
fn the_binary_length_keeps_an_entry_over_the_budget_in_force_from_being_read() {
    // The exact stored size of this program, measured with room to spare.
    let (_, probe) = sized_link(1 << 20, MemoryPressure::None, FS);
    assert_eq!(probe.len(), 1);
    let size = probe.stats().size_bytes;

    // Moderate pressure, budget / 4 exactly the entry: read and saved.
    let (mut m, cache) = sized_link(size * 4, MemoryPressure::Moderate, FS);
    assert_eq!(m.binary_reads_skipped(), 0);
    assert_eq!(m.backend().inner.binaries(), 1);
    assert_eq!(cache.size_bytes(), size);

    // One byte less: the length says it cannot be kept, so it is not read.
    let (mut m, cache) = sized_link(size * 4 - 4, MemoryPressure::Moderate, FS);
    assert_eq!(m.backend().length_queries, 1);
    assert_eq!(
        m.backend().inner.binaries(),
        0,
        "{:?}",
        m.backend().inner.calls
    );
    assert_eq!(m.binary_reads_skipped(), 1);
    assert_eq!(cache.counters().rejected_saves, 1);
    assert!(cache.is_empty());

    // Without pressure the same goes for an entry over the whole budget.
    let (mut m, cache) = sized_link(size - 1, MemoryPressure::None, FS);
    assert_eq!(m.backend().inner.binaries(), 0);
    assert_eq!(m.binary_reads_skipped(), 1);
    assert!(cache.is_empty());

    // Under critical pressure not even the length is asked for.
    let (mut m, _) = sized_link(1 << 20, MemoryPressure::Critical, FS);
    assert_eq!(m.backend().length_queries, 0);
    assert_eq!(m.backend().inner.binaries(), 0);
    assert_eq!(m.binary_reads_skipped(), 1);
}
