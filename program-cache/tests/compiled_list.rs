//! `compiled.list`: shaders known to compile that no stored program uses (the good shader of a
//! program whose other shader failed, a shader compiled but never linked) are known compiled at
//! the next start too, so a warm start compiles none of them on the driver again. The list is
//! bounded, emptied by a clear, and damaged records in it are skipped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use program_cache::{CacheConfig, CompileStatus, DiskConfig, ProgramCache, ShaderHash};
use test_support::programs::{key, program, shader, stamp};

fn open(dir: &Path) -> Arc<ProgramCache> {
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 20))
        .disk(DiskConfig::new(dir, stamp("1.0")))
        .build();
    cache
        .wait_until_loaded(Duration::from_secs(10))
        .expect("loads");
    cache
}

fn list_path(dir: &Path) -> PathBuf {
    dir.join(stamp("1.0").dir_name()).join("compiled.list")
}

/// A shader hash from a number (more than 256 of them).
fn hash(n: u32) -> ShaderHash {
    let mut h = [0xA5; 20];
    h[..4].copy_from_slice(&n.to_le_bytes());
    ShaderHash(h)
}

/// One `compiled.list` record: the hash and the CRC32C of it.
fn record(h: &ShaderHash) -> Vec<u8> {
    let mut r = h.0.to_vec();
    r.extend_from_slice(&crc32c::crc32c(&h.0).to_le_bytes());
    r
}

#[test]
fn a_shader_no_stored_program_uses_is_known_compiled_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path());
    // Shader 1 compiled, but its program never linked (its partner failed); shaders 2 and 3
    // compiled and their program is stored.
    a.shader_compile_succeeded(shader(1));
    a.shader_compile_succeeded(shader(2));
    a.shader_compile_succeeded(shader(3));
    a.save(key(1), program(2, 3, 100), None).unwrap();
    a.flush_disk();
    // Only shader 1 is listed: the entry records shaders 2 and 3.
    assert_eq!(
        std::fs::read(list_path(dir.path())).unwrap(),
        record(&shader(1))
    );
    drop(a);

    let b = open(dir.path());
    assert_eq!(b.shader_compile_status(&shader(1)), CompileStatus::Success);
    assert_eq!(
        b.shader_refcount(&shader(1)),
        0,
        "known, used by no program"
    );
    assert_eq!(b.shader_compile_status(&shader(2)), CompileStatus::Success);
    assert_eq!(b.shader_compile_status(&shader(4)), CompileStatus::Unknown);
    // Known already: not listed again.
    b.shader_compile_succeeded(shader(1));
    b.flush_disk();
    assert_eq!(std::fs::read(list_path(dir.path())).unwrap().len(), 24);
}

#[test]
fn the_last_compiles_reach_the_list_when_the_cache_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path());
    a.shader_compile_succeeded(shader(7));
    // No flush: the drop hands the batch to the writer, which writes it before it ends.
    drop(a);
    let b = open(dir.path());
    assert_eq!(b.shader_compile_status(&shader(7)), CompileStatus::Success);
}

#[test]
fn a_clear_empties_the_list_including_batches_queued_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path());
    a.shader_compile_succeeded(shader(1));
    a.flush_disk();
    // Saves first, so the writer is still busy with them when the clear comes. Then 300 more
    // compiles: one batch goes to the writer at once (queued before the clear, behind the
    // saves), the rest waits in memory; the clear must leave neither.
    for n in 10..210u32 {
        let _ = a.save(
            program_cache::ProgramKey(hash(n).0),
            program(n as u8, 1, 3000),
            None,
        );
    }
    for n in 0..300 {
        a.shader_compile_succeeded(hash(n));
    }
    a.clear();
    a.flush_disk();
    drop(a);
    assert_eq!(std::fs::read(list_path(dir.path())).unwrap(), b"");
    let b = open(dir.path());
    assert_eq!(b.shader_compile_status(&shader(1)), CompileStatus::Unknown);
    for n in 0..300 {
        assert_eq!(b.shader_compile_status(&hash(n)), CompileStatus::Unknown);
    }
}

#[test]
fn damaged_records_are_skipped_and_the_rest_count() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    // A torn record, garbage, a good record, a record whose checksum does not hold, a good one.
    let mut bytes = record(&shader(1))[..10].to_vec();
    bytes.extend_from_slice(&[0xFF; 37]);
    bytes.extend_from_slice(&record(&shader(2)));
    let mut bad = record(&shader(3));
    bad[23] ^= 1;
    bytes.extend_from_slice(&bad);
    bytes.extend_from_slice(&record(&shader(4)));
    std::fs::write(list_path(dir.path()), &bytes).unwrap();

    let b = open(dir.path());
    assert_eq!(b.shader_compile_status(&shader(1)), CompileStatus::Unknown);
    assert_eq!(b.shader_compile_status(&shader(2)), CompileStatus::Success);
    assert_eq!(b.shader_compile_status(&shader(3)), CompileStatus::Unknown);
    assert_eq!(b.shader_compile_status(&shader(4)), CompileStatus::Success);
}

#[test]
fn the_list_is_bounded_and_keeps_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    // A store of 8 MiB: 16 Ki hashes take less than a sixteenth of it, so the list keeps 16 Ki.
    let a = open_budget(dir.path(), 8 << 20);
    // 40 Ki distinct shaders, in batches: the list is compacted to its newest 16 Ki once it
    // passes 32 Ki records (768 KiB).
    let n = 40 * 1024;
    for i in 0..n {
        a.shader_compile_succeeded(hash(i));
        if i % 4096 == 4095 {
            a.flush_disk();
        }
    }
    a.flush_disk();
    let len = std::fs::metadata(list_path(dir.path())).unwrap().len();
    assert!(len <= 2 * 16 * 1024 * 24, "compiled.list is {len} bytes");
    assert!(
        a.disk_counters().unwrap().compactions >= 1,
        "{:?}",
        a.disk_counters()
    );
    drop(a);
    // The next start knows the newest (as many as the cache keeps statuses of shaders no
    // program uses), not the oldest.
    let b = open_budget(dir.path(), 8 << 20);
    assert_eq!(
        b.shader_compile_status(&hash(n - 1)),
        CompileStatus::Success
    );
    assert_eq!(
        b.shader_compile_status(&hash(n - 4096)),
        CompileStatus::Success
    );
    assert_eq!(b.shader_compile_status(&hash(0)), CompileStatus::Unknown);
}

/// A cache of `budget` bytes on `dir` (the disk budget is the memory budget), loaded.
fn open_budget(dir: &Path, budget: usize) -> Arc<ProgramCache> {
    let cache = ProgramCache::builder(CacheConfig::with_budget(budget))
        .disk(DiskConfig::new(dir, stamp("1.0")))
        .build();
    cache
        .wait_until_loaded(Duration::from_secs(10))
        .expect("loads");
    cache
}

/// A key from a number (more than 256 of them).
fn nkey(n: u32) -> program_cache::ProgramKey {
    program_cache::ProgramKey(hash(n | 0x8000_0000).0)
}

/// Entry files in the store.
fn entries_on_disk(dir: &Path) -> usize {
    std::fs::read_dir(dir.join(stamp("1.0").dir_name()).join("entries")).map_or(0, |d| d.count())
}

/// A program of `len` bytes whose shaders are `n`'s own (no other program shares them).
fn own_program(n: u32, len: usize) -> program_cache::CachedProgram {
    test_support::programs::plain_program(
        hash(0x4000_0000 + 2 * n),
        hash(0x4000_0001 + 2 * n),
        (0..len)
            .map(|i| (i as u32 ^ n.wrapping_mul(2_654_435_761)) as u8)
            .collect(),
    )
}

#[test]
fn a_clear_during_the_startup_load_leaves_no_status_from_the_list() {
    // The list is read at the end of the load; a clear that comes while it is read (after the
    // load's last look at the clear epoch) must still leave no status of it in memory.
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let a = open(dir.path());
        a.save(nkey(1), own_program(1, 1000), None).unwrap();
        a.flush_disk();
        drop(a);
        // A list of the largest size read (8 MiB), so reading it takes a while.
        let mut bytes = Vec::with_capacity(8 << 20);
        for i in 0..(8 << 20) / 24 {
            bytes.extend_from_slice(&record(&hash(i % 16_000)));
        }
        std::fs::write(list_path(dir.path()), &bytes).unwrap();
        let b = ProgramCache::builder(CacheConfig::with_budget(1 << 20))
            .disk(DiskConfig::new(dir.path(), stamp("1.0")))
            .build();
        // The entry is in: the loader is about to read the list.
        while b.is_empty() {
            std::hint::spin_loop();
        }
        b.clear();
        b.wait_until_loaded(Duration::from_secs(10)).unwrap();
        let known = (0..16_000)
            .filter(|&i| b.shader_compile_status(&hash(i)) == CompileStatus::Success)
            .count();
        assert_eq!(known, 0, "round {round}: statuses from the cleared list");
    }
}

#[test]
fn the_list_never_crowds_the_entries_out_of_a_small_store() {
    // The low-memory budget (128 KiB, the disk store's too): 8 Ki shaders compiled and never
    // linked, then 10 programs of 2 KB. The list is the store's, so its budget counts it, but
    // it must not push out the binaries it is worth much less than.
    let dir = tempfile::tempdir().unwrap();
    let a = open_budget(dir.path(), program_cache::LOW_MEMORY_BUDGET);
    for i in 0..8192 {
        a.shader_compile_succeeded(hash(i));
    }
    a.flush_disk();
    for n in 0..10 {
        a.save(nkey(n), own_program(n, 2000), None).unwrap();
    }
    a.flush_disk();
    assert_eq!(entries_on_disk(dir.path()), 10, "{:?}", a.disk_counters());
    let len = std::fs::metadata(list_path(dir.path())).unwrap().len();
    assert!(
        len <= program_cache::LOW_MEMORY_BUDGET as u64 / 8,
        "compiled.list is {len} bytes"
    );
    drop(a);
    // What it keeps is the newest.
    let b = open_budget(dir.path(), program_cache::LOW_MEMORY_BUDGET);
    assert_eq!(b.shader_compile_status(&hash(8191)), CompileStatus::Success);
    assert_eq!(b.shader_compile_status(&hash(0)), CompileStatus::Unknown);
}

#[test]
fn a_large_list_found_at_open_is_compacted_before_any_entry_is_evicted() {
    // 20 entries (some 400 KB) in a 1 MiB store, and a list of 200,000 valid records (4.8 MB:
    // several processes appending, or a hostile file): the store is over its budget because
    // of the list alone; the list is cut, not the entries.
    let dir = tempfile::tempdir().unwrap();
    let a = open_budget(dir.path(), 1 << 20);
    for n in 0..20 {
        a.save(nkey(n), own_program(n, 20_000), None).unwrap();
    }
    a.flush_disk();
    drop(a);
    let mut bytes = Vec::new();
    for i in 0..200_000 {
        bytes.extend_from_slice(&record(&hash(i)));
    }
    std::fs::write(list_path(dir.path()), &bytes).unwrap();
    let b = open_budget(dir.path(), 1 << 20);
    b.save(nkey(99), own_program(99, 1000), None).unwrap();
    b.flush_disk();
    assert_eq!(entries_on_disk(dir.path()), 21, "{:?}", b.disk_counters());
    assert!(std::fs::metadata(list_path(dir.path())).unwrap().len() < (1 << 20) / 8);
}

#[test]
fn a_folder_planted_at_the_list_never_stops_the_logs_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path());
    for n in 0..3 {
        a.save(nkey(n), own_program(n, 300), None).unwrap();
    }
    a.shader_compile_succeeded(hash(1));
    a.flush_disk();
    // Planted while the cache runs: a folder with something in it (not ours: never removed).
    let list = list_path(dir.path());
    std::fs::remove_file(&list).unwrap();
    std::fs::create_dir(&list).unwrap();
    std::fs::write(list.join("theirs"), b"keep me").unwrap();
    // 10,000 hot marks (240 KB of records): the compaction (past 64 KiB of logs) keeps
    // hot.list to a few records.
    for i in 0..10_000 {
        a.mark_hot(&[nkey(i % 3)]);
        a.shader_compile_succeeded(hash(10 + i));
        if i % 500 == 499 {
            a.flush_disk();
        }
    }
    a.flush_disk();
    let hot = std::fs::metadata(dir.path().join(stamp("1.0").dir_name()).join("hot.list"))
        .unwrap()
        .len();
    assert!(hot <= 65 * 1024, "hot.list is {hot} bytes");
    assert!(a.disk_counters().unwrap().compactions >= 1);
    assert_eq!(std::fs::read(list.join("theirs")).unwrap(), b"keep me");
}
