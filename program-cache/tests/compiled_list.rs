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
    let a = open(dir.path());
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
    let b = open(dir.path());
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
