//! The disk layer: round trip, stamps, damaged entries, eviction by LRU metadata, hot entries,
//! clear, repeated refusals, unusable folders. Programs are synthetic here; the real-driver
//! round trip across processes is in disk_processes.rs.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use program_cache::disk::{self, inspect};
use program_cache::{CacheConfig, DiskConfig, ProgramCache};
use test_support::programs::{key, program, stamp};

fn open(dir: &std::path::Path, driver: &str, budget: usize) -> Arc<ProgramCache> {
    let cache = ProgramCache::builder(CacheConfig::with_budget(budget))
        .disk(DiskConfig::new(dir, stamp(driver)))
        .build();
    cache
        .wait_until_loaded(Duration::from_secs(10))
        .expect("loads");
    // The writer removes stale stores before it serves its first job.
    cache.flush_disk();
    cache
}

#[test]
fn saved_programs_load_in_a_new_cache() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), "1.0", 1 << 20);
    for n in 1..=5 {
        a.save(key(n), program(n, n + 100, 500), None).unwrap();
    }
    a.flush_disk();
    assert_eq!(a.disk_counters().unwrap().writes, 5);
    drop(a);
    let b = open(dir.path(), "1.0", 1 << 20);
    assert_eq!(b.len(), 5);
    for n in 1..=5 {
        assert_eq!(*b.peek(&key(n)).unwrap(), program(n, n + 100, 500));
    }
    assert_eq!(b.disk_counters().unwrap().loaded, 5);
    // An entry already on disk is not rewritten.
    b.save(key(1), program(1, 101, 500), None).unwrap();
    b.flush_disk();
    assert_eq!(b.disk_counters().unwrap().already_present, 1);
}

#[test]
fn a_new_stamp_starts_over_and_removes_the_old_store() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), "1.0", 1 << 20);
    a.save(key(1), program(1, 2, 100), None).unwrap();
    a.flush_disk();
    drop(a);
    let b = open(dir.path(), "2.0 (driver update)", 1 << 20);
    assert!(b.is_empty());
    let stores = inspect::scan(dir.path()).unwrap();
    assert_eq!(stores.len(), 1, "the old stamp's store is gone");
    assert!(stores[0].stamp_text.contains("2.0 (driver update)"));
}

#[test]
fn a_store_in_use_by_another_stamp_is_not_removed() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), "1.0", 1 << 20);
    a.save(key(1), program(1, 2, 100), None).unwrap();
    a.flush_disk();
    let _b = open(dir.path(), "2.0", 1 << 20);
    assert_eq!(inspect::scan(dir.path()).unwrap().len(), 2);
}

#[test]
fn damaged_entries_are_rejected_deleted_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), "1.0", 1 << 20);
    for n in 1..=3 {
        a.save(key(n), program(n, n + 100, 500), None).unwrap();
    }
    a.flush_disk();
    drop(a);
    let store = &inspect::scan(dir.path()).unwrap()[0];
    let path = |n: u8| {
        store
            .entries
            .iter()
            .find(|e| e.key == key(n))
            .unwrap()
            .path
            .clone()
    };
    let mut bytes = std::fs::read(path(1)).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(path(1), bytes).unwrap();
    let bytes = std::fs::read(path(2)).unwrap();
    std::fs::write(path(2), &bytes[..bytes.len() / 2]).unwrap();

    let b = open(dir.path(), "1.0", 1 << 20);
    assert_eq!(b.len(), 1);
    assert!(b.peek(&key(3)).is_some());
    assert_eq!(b.disk_counters().unwrap().rejected_entries, 2);
    assert!(!path(1).exists() && !path(2).exists());
    assert!(
        inspect::scan(dir.path()).unwrap()[0]
            .corrupt()
            .next()
            .is_none()
    );
}

#[test]
fn the_store_evicts_least_recently_used_entries_to_the_low_water_mark() {
    let dir = tempfile::tempdir().unwrap();
    // The budget counts what the file system allocates: measure a store of ten entries (with
    // its LRU log) in another folder, and give this one exactly that.
    let probe = tempfile::tempdir().unwrap();
    let budget = {
        let c = open(probe.path(), "1.0", 1 << 20);
        for n in 1..=10 {
            c.save(key(n), program(n, n + 100, 2000), None).unwrap();
        }
        c.load(&key(1), None).unwrap();
        c.flush_disk();
        inspect::scan(probe.path()).unwrap()[0].allocated
    };
    let entry_size = budget / 10;
    let mut config = DiskConfig::new(dir.path(), stamp("1.0"));
    config.budget_bytes = Some(budget);
    config.compress = true;
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 20))
        .disk(config)
        .build();
    cache.wait_until_loaded(Duration::from_secs(10)).unwrap();
    for n in 1..=10 {
        cache.save(key(n), program(n, n + 100, 2000), None).unwrap();
        cache.flush_disk();
        std::thread::sleep(Duration::from_millis(5));
    }
    // Use 1 and 2 recently: they must survive the eviction pass.
    cache.load(&key(1), None).unwrap();
    cache.load(&key(2), None).unwrap();
    cache.flush_disk();
    cache.save(key(11), program(11, 111, 2000), None).unwrap();
    cache.flush_disk();
    let on_disk: Vec<_> = inspect::scan(dir.path()).unwrap()[0]
        .entries
        .iter()
        .map(|e| e.key)
        .collect();
    assert!(on_disk.contains(&key(1)) && on_disk.contains(&key(2)) && on_disk.contains(&key(11)));
    assert!(!on_disk.contains(&key(3)), "3 was the least recently used");
    let bytes: u64 = inspect::scan(dir.path()).unwrap()[0].allocated;
    assert!(
        bytes <= budget * 8 / 10,
        "{bytes} > low water {} (entries take {entry_size} bytes each)",
        budget * 8 / 10
    );
    assert!(cache.disk_counters().unwrap().evictions >= 3);
}

#[test]
fn hot_entries_load_first_and_the_load_stops_at_the_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    let unit = program(0, 0, 1000).stored_size();
    let a = open(dir.path(), "1.0", 1 << 20);
    for n in 1..=6 {
        a.save(key(n), program(n, n + 100, 1000), None).unwrap();
        a.flush_disk();
        std::thread::sleep(Duration::from_millis(5));
    }
    a.mark_hot(&[key(1)]);
    a.flush_disk();
    drop(a);
    // Room for three: hot 1 first, then the most recent 6 and 5.
    let b = open(dir.path(), "1.0", unit * 3);
    let mut loaded: Vec<u8> = (1..=6).filter(|&n| b.peek(&key(n)).is_some()).collect();
    loaded.sort();
    assert_eq!(loaded, [1, 5, 6]);
    let report = b.wait_until_loaded(Duration::from_secs(1)).unwrap();
    assert_eq!((report.loaded, report.skipped), (3, 3));
}

/// A key from a number that may pass 255.
fn wide_key(n: u16) -> program_cache::ProgramKey {
    let mut k = [0xA5; 20];
    k[..2].copy_from_slice(&n.to_be_bytes());
    program_cache::ProgramKey(k)
}

/// Saves `n` small programs under `wide_key(0..n)` and waits until they are written (flushing
/// every 100, so the write queue never fills).
fn save_wide(cache: &ProgramCache, n: u16) {
    for k in 0..n {
        cache
            .save(wide_key(k), program((k % 200) as u8, 201, 100), None)
            .unwrap();
        if k % 100 == 99 {
            cache.flush_disk();
        }
    }
    cache.flush_disk();
}

/// Sets the modification time of every entry file of the only store in `dir` to what `time`
/// gives for its key number; returns the key numbers in the order the folder lists them
/// (`getdents`, as the startup load lists it). `load.pack` is deleted: it recorded the times
/// the files had when it was written, and a time changed in place (same file) is not seen
/// while the pack holds the file (FORMAT.md, "The load pack").
fn set_entry_times(dir: &std::path::Path, time: impl Fn(u16) -> SystemTime) -> Vec<u16> {
    let stores = inspect::scan(dir).unwrap();
    let _ = std::fs::remove_file(stores[0].dir.join("load.pack"));
    let folder = stores[0].entries[0].path.parent().unwrap().to_owned();
    let mut listed = Vec::new();
    for e in std::fs::read_dir(folder).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let n = u16::from_str_radix(&name[..4], 16).unwrap();
        assert_eq!(name[4..], "a5".repeat(18), "{name}");
        std::fs::File::open(e.path())
            .unwrap()
            .set_modified(time(n))
            .unwrap();
        listed.push(n);
    }
    listed
}

/// [`open`] with a memory budget of `memory` bytes and a disk budget far above it: the load
/// stops at the memory budget, and no entry is evicted from disk.
fn open_small(dir: &std::path::Path, memory: usize) -> Arc<ProgramCache> {
    let disk = DiskConfig {
        budget_bytes: Some(1 << 30),
        ..DiskConfig::new(dir, stamp("1.0"))
    };
    open_with(disk, memory)
}

/// A cache with a memory budget of `memory` bytes on `disk`, once its startup load is done.
fn open_with(disk: DiskConfig, memory: usize) -> Arc<ProgramCache> {
    let cache = ProgramCache::builder(CacheConfig::with_budget(memory))
        .disk(disk)
        .build();
    cache
        .wait_until_loaded(Duration::from_secs(60))
        .expect("loads");
    cache
}

/// Which of the keys `0..n` a cache holds.
fn held(cache: &ProgramCache, n: u16) -> BTreeSet<u16> {
    (0..n)
        .filter(|&k| cache.peek(&wide_key(k)).is_some())
        .collect()
}

#[test]
fn a_large_store_loads_in_the_same_order_however_its_two_reading_threads_ran() {
    // Enough entries for the startup pass to read with a helper thread while it lists.
    const N: u16 = 600;
    let dir = tempfile::tempdir().unwrap();
    let unit = program(0, 201, 100).stored_size();
    let a = open(dir.path(), "1.0", 64 << 20);
    save_wide(&a, N);
    assert_eq!(a.disk_counters().unwrap().writes, u64::from(N));
    let hot: BTreeSet<u16> = (0..N).step_by(40).collect();
    a.mark_hot(&hot.iter().map(|&n| wide_key(n)).collect::<Vec<_>>());
    a.flush_disk();
    drop(a);
    let base = SystemTime::now() - Duration::from_secs(100_000);
    // Room for about a third of the entries: the load stops part way.
    let memory = unit * 200;
    let load = || {
        let b = open_small(dir.path(), memory);
        let report = b.wait_until_loaded(Duration::from_secs(60)).unwrap();
        assert_eq!(report.loaded + report.skipped, N as usize, "{report:?}");
        assert!(
            report.loaded > hot.len() && report.loaded < N as usize,
            "{report:?}"
        );
        (report.loaded, held(&b, N))
    };

    // Distinct times: the hot entries, then the newest.
    set_entry_times(dir.path(), |n| base + Duration::from_secs(u64::from(n)));
    for _ in 0..5 {
        let (loaded, held) = load();
        let mut want = hot.clone();
        want.extend(
            (0..N)
                .rev()
                .filter(|n| !hot.contains(n))
                .take(loaded - hot.len()),
        );
        assert_eq!(held, want);
    }

    // One time for all: the hot entries, then the others in listing order.
    let listed = set_entry_times(dir.path(), |_| base);
    assert_eq!(listed.len(), N as usize);
    for _ in 0..5 {
        let (loaded, held) = load();
        let mut want = hot.clone();
        want.extend(
            listed
                .iter()
                .filter(|n| !hot.contains(n))
                .take(loaded - hot.len()),
        );
        assert_eq!(held, want);
    }
}

#[test]
fn clear_deletes_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), "1.0", 1 << 20);
    a.save(key(1), program(1, 2, 100), None).unwrap();
    a.flush_disk();
    a.clear();
    a.flush_disk();
    assert!(inspect::scan(dir.path()).unwrap()[0].entries.is_empty());
    drop(a);
    assert!(open(dir.path(), "1.0", 1 << 20).is_empty());
}

#[test]
fn repeated_driver_refusals_of_disk_binaries_drop_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), "1.0", 1 << 20);
    for n in 1..=5 {
        a.save(key(n), program(n, n + 100, 100), None).unwrap();
    }
    a.flush_disk();
    drop(a);
    let logged = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = logged.clone();
    let mut config = DiskConfig::new(dir.path(), stamp("1.0"));
    config.log = Some(Arc::new(move |line: &str| {
        sink.lock().unwrap().push(line.into())
    }));
    let b = ProgramCache::builder(CacheConfig::desktop())
        .disk(config)
        .build();
    b.wait_until_loaded(Duration::from_secs(10)).unwrap();
    assert_eq!(b.len(), 5);
    // One refusal, then an acceptance: the run is broken.
    b.evict_rejected(&key(1));
    b.binary_accepted(&key(2));
    b.evict_rejected(&key(3));
    b.evict_rejected(&key(4));
    assert_eq!(b.len(), 2, "two refusals in a row are not enough");
    b.evict_rejected(&key(5));
    b.flush_disk();
    assert!(
        b.is_empty(),
        "disk-loaded entries are dropped from memory too"
    );
    assert!(inspect::scan(dir.path()).unwrap()[0].entries.is_empty());
    assert_eq!(b.disk_counters().unwrap().store_drops, 1);
    assert_eq!(logged.lock().unwrap().len(), 1);
    assert!(b.disk_condition().unwrap().contains("dropped"));
}

#[test]
fn an_unusable_folder_degrades_to_memory_and_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-folder");
    std::fs::write(&file, b"x").unwrap();
    let logged = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = logged.clone();
    let mut config = DiskConfig::new(file.join("cache"), stamp("1.0"));
    config.log = Some(Arc::new(move |line: &str| {
        sink.lock().unwrap().push(line.into())
    }));
    let cache = ProgramCache::builder(CacheConfig::desktop())
        .disk(config)
        .build();
    // The store is opened off the calling thread: known once the startup load has finished.
    cache.wait_until_loaded(Duration::from_secs(10)).unwrap();
    assert!(!cache.disk_enabled());
    for n in 1..=3 {
        cache.save(key(n), program(n, n + 100, 100), None).unwrap();
        assert!(cache.load(&key(n), None).is_some());
    }
    cache.flush_disk();
    assert_eq!(
        logged.lock().unwrap().len(),
        1,
        "{:?}",
        logged.lock().unwrap()
    );
    assert!(
        cache
            .stats()
            .disk_condition
            .unwrap()
            .contains("memory only")
    );
}

#[test]
fn stores_of_other_contexts_are_kept_until_unused_for_a_month() {
    let dir = tempfile::tempdir().unwrap();
    let with_context = |context: &str| {
        let mut s = stamp("1.0");
        s.context = context.into();
        s
    };
    let open_ctx = |context: &str| {
        let c = ProgramCache::builder(CacheConfig::desktop())
            .disk(DiskConfig::new(dir.path(), with_context(context)))
            .build();
        c.wait_until_loaded(Duration::from_secs(10)).unwrap();
        // Stale stores are collected before the writer's first job (and a drop stops it).
        c.flush_disk();
        c
    };
    let core = open_ctx("OpenGL core profile");
    core.save(key(1), program(1, 2, 100), None).unwrap();
    core.flush_disk();
    drop(core);
    // Another kind of context on the same folder keeps the first one's store.
    let compat = open_ctx("OpenGL compatibility profile");
    drop(compat);
    assert_eq!(inspect::scan(dir.path()).unwrap().len(), 2);
    assert_eq!(open_ctx("OpenGL core profile").len(), 1);
    // Unused for more than 30 days, it goes.
    let core_dir = dir
        .path()
        .join(with_context("OpenGL core profile").dir_name());
    // Every record of the store says so (the lock's open time, the STAMP, the entries folder,
    // the logs): its age is judged by all of them.
    let month_ago = std::time::SystemTime::now() - Duration::from_secs(31 * 24 * 3600);
    for name in [
        "in-use.lock",
        "STAMP",
        "entries",
        "lru.log",
        "hot.list",
        "compiled.list",
    ] {
        if let Ok(f) = std::fs::File::open(core_dir.join(name)) {
            f.set_modified(month_ago).unwrap();
        }
    }
    drop(open_ctx("OpenGL compatibility profile"));
    let left = inspect::scan(dir.path()).unwrap();
    assert_eq!(left.len(), 1);
    assert!(left[0].stamp_text.contains("compatibility"));
}

// ---------------------------------------------------------------------------------------------
// Entries held undecoded until their first lookup (FORMAT.md, "Startup load").

/// CRC32C (Castagnoli), bitwise: the test's own, independent of the crate's.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Recomputes the payload CRC (offset 80) and the header CRC (offset 92): every checksum holds.
fn reseal_all(bytes: &mut [u8]) {
    let payload = crc32c(&bytes[disk::HEADER_LEN..]);
    bytes[80..84].copy_from_slice(&payload.to_le_bytes());
    let header = crc32c(&bytes[..92]);
    bytes[92..96].copy_from_slice(&header.to_le_bytes());
}

/// The entry file of `n` in the store of `dir` (stamp "1.0").
fn entry_path(dir: &std::path::Path, n: u8) -> std::path::PathBuf {
    dir.join(stamp("1.0").dir_name())
        .join("entries")
        .join(key(n).to_hex())
}

/// [`open`] without the decoding after the load: entries stay packed until their first lookup.
fn open_lazy(dir: &std::path::Path, budget: usize) -> Arc<ProgramCache> {
    let disk = DiskConfig {
        decode_after_load: false,
        ..DiskConfig::new(dir, stamp("1.0"))
    };
    open_with(disk, budget)
}

/// Saves programs `1..=n` (binaries of `len` bytes) in a new store in `dir`; returns their
/// decoded size in total.
fn store_programs(dir: &std::path::Path, n: u8, len: usize) -> usize {
    let a = open(dir, "1.0", 1 << 20);
    for k in 1..=n {
        a.save(key(k), program(k, k + 100, len), None).unwrap();
    }
    a.flush_disk();
    (1..=n)
        .map(|k| program(k, k + 100, len).stored_size())
        .sum()
}

#[test]
fn a_loaded_entry_counts_the_bytes_it_holds_until_its_first_lookup_decodes_it() {
    let dir = tempfile::tempdir().unwrap();
    let decoded = store_programs(dir.path(), 4, 4000);
    let on_disk: u64 = (1..=4)
        .map(|n| std::fs::metadata(entry_path(dir.path(), n)).unwrap().len())
        .sum();

    let b = open_lazy(dir.path(), 1 << 20);
    assert_eq!(b.len(), 4);
    // Held packed (LZ4: these binaries are one repeated byte): the file bytes and a little
    // bookkeeping, not the decoded size.
    let packed = b.size_bytes();
    assert!(
        packed as u64 >= on_disk && packed < decoded / 4,
        "held {packed} bytes for {on_disk} on disk, {decoded} decoded"
    );
    // The shaders' compile statuses count before any decoding.
    for n in 1..=4 {
        assert_eq!(b.shader_refcount(&program_cache::ShaderHash([n; 20])), 1);
    }
    // Each first lookup decodes one, which then counts its decoded size.
    for n in 1..=4 {
        assert_eq!(*b.load(&key(n), None).unwrap(), program(n, n + 100, 4000));
    }
    assert_eq!(b.size_bytes(), decoded);
    assert_eq!(b.stats().counters.hits, 4);
    assert_eq!(b.disk_counters().unwrap().rejected_entries, 0);
    // A second lookup finds the decoded program.
    assert!(Arc::ptr_eq(
        &b.load(&key(1), None).unwrap(),
        &b.load(&key(1), None).unwrap()
    ));
}

#[test]
fn a_body_that_does_not_decode_is_rejected_at_its_first_lookup_and_never_returned() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), "1.0", 1 << 20);
    for n in 1..=3 {
        a.save(key(n), program(n, n + 100, 500), None).unwrap();
    }
    a.flush_disk();
    drop(a);
    // 1: the summary names another fragment shader than the body (every checksum valid).
    let mut bytes = std::fs::read(entry_path(dir.path(), 1)).unwrap();
    let fragment_at = disk::HEADER_LEN + 5 + 20;
    bytes[fragment_at..fragment_at + 20].copy_from_slice(&[0xEE; 20]);
    reseal_all(&mut bytes);
    std::fs::write(entry_path(dir.path(), 1), &bytes).unwrap();
    // 2: a decompressed length one byte off (header resealed): LZ4 gives another length.
    let mut bytes = std::fs::read(entry_path(dir.path(), 2)).unwrap();
    let raw = u64::from_le_bytes(bytes[72..80].try_into().unwrap());
    bytes[72..80].copy_from_slice(&(raw + 1).to_le_bytes());
    reseal_all(&mut bytes);
    std::fs::write(entry_path(dir.path(), 2), &bytes).unwrap();

    let b = ProgramCache::builder(CacheConfig::with_budget(1 << 20))
        .disk(DiskConfig::new(dir.path(), stamp("1.0")))
        .build();
    let report = b.wait_until_loaded(Duration::from_secs(10)).unwrap();
    // Every check that needs no decoding passed: all three are in memory, undecoded.
    assert_eq!((report.loaded, report.rejected), (3, 0));
    assert_eq!(b.len(), 3);
    let bogus = program_cache::ShaderHash([0xEE; 20]);
    assert_eq!(b.shader_refcount(&bogus), 1, "held from the summary");
    // A peek decodes for itself and returns nothing; it changes nothing either.
    assert!(b.peek(&key(1)).is_none());
    assert_eq!(
        (b.len(), b.disk_counters().unwrap().rejected_entries),
        (3, 0)
    );

    // The first lookup rejects: a miss, counted, the entry and its statuses leave memory.
    assert!(b.load(&key(1), None).is_none());
    assert!(b.load(&key(2), None).is_none());
    assert_eq!(*b.load(&key(3), None).unwrap(), program(3, 103, 500));
    let c = b.stats().counters;
    assert_eq!((c.hits, c.misses), (1, 2));
    assert_eq!(b.disk_counters().unwrap().rejected_entries, 2);
    assert_eq!(b.len(), 1);
    // (The loader's decoding after the load, on by default, left the two bodies packed: they
    // were rejected here, at their lookups, and not before.)
    assert_eq!(b.shader_refcount(&bogus), 0);
    assert_eq!(b.shader_refcount(&program_cache::ShaderHash([1; 20])), 0);
    assert_eq!(b.shader_refcount(&program_cache::ShaderHash([2; 20])), 0);
    assert_eq!(b.size_bytes(), program(3, 103, 500).stored_size());
    // Never returned later either, and the damaged files are deleted by the writer.
    assert!(b.load(&key(1), None).is_none() && b.peek(&key(2)).is_none());
    b.flush_disk();
    assert!(!entry_path(dir.path(), 1).exists() && !entry_path(dir.path(), 2).exists());
    assert!(entry_path(dir.path(), 3).exists());
    assert!(
        inspect::scan(dir.path()).unwrap()[0]
            .corrupt()
            .next()
            .is_none()
    );
    // Saved again (relinked from source), the program is written and read back intact.
    b.save(key(1), program(1, 101, 500), None).unwrap();
    b.flush_disk();
    drop(b);
    let c = open(dir.path(), "1.0", 1 << 20);
    assert_eq!(*c.load(&key(1), None).unwrap(), program(1, 101, 500));
}

#[test]
fn decoding_that_takes_the_cache_over_its_budget_evicts_by_policy() {
    let dir = tempfile::tempdir().unwrap();
    store_programs(dir.path(), 3, 4000);
    let unit = program(0, 0, 4000).stored_size();
    let budget = unit * 3;
    let b = open_lazy(dir.path(), budget);
    // All three fit once decoded, so all three load (undecoded, they hold far less).
    assert_eq!(b.len(), 3);
    assert!(b.size_bytes() < unit);
    // This process's own saves fit in what the packed entries leave.
    for n in 10..=11 {
        b.save(key(n), program(n, n + 100, 4000), None).unwrap();
    }
    assert_eq!(b.len(), 5);
    // Decoding grows the entries; the cache evicts by its policy (which may take a packed
    // entry not looked up yet) and stays within budget.
    for n in 1..=3 {
        if let Some(p) = b.load(&key(n), None) {
            assert_eq!(*p, program(n, n + 100, 4000));
        }
        assert!(b.size_bytes() <= budget, "{} > {budget}", b.size_bytes());
    }
    assert!(b.stats().counters.evictions >= 1);
    assert!(b.len() <= 4);
    assert_eq!(b.disk_counters().unwrap().rejected_entries, 0);
}

/// After the load, the loader thread decodes what it loaded, in load order, with no lookup: the
/// entries then count their decoded size, and the host's first lookups find them decoded.
#[test]
fn the_loader_decodes_the_loaded_entries_after_the_load_without_a_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let decoded = store_programs(dir.path(), 6, 4000);
    let b = open(dir.path(), "1.0", 1 << 20);
    assert_eq!(b.len(), 6);
    let t = std::time::Instant::now();
    while b.size_bytes() != decoded {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{} of {decoded} bytes decoded",
            b.size_bytes()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // No lookup was counted, and each lookup now finds the program the
    // loader decoded (the same object twice: not decoded again).
    let c = b.stats().counters;
    assert_eq!((c.hits, c.misses), (0, 0));
    for n in 1..=6 {
        let p = b.load(&key(n), None).unwrap();
        assert_eq!(*p, program(n, n + 100, 4000));
        assert!(Arc::ptr_eq(&p, &b.peek(&key(n)).unwrap()));
    }
    assert_eq!(b.size_bytes(), decoded);
    assert_eq!(b.disk_counters().unwrap().rejected_entries, 0);
}

/// A cache on the store in `dir` whose `on_loaded` callback (on the loader thread, before the
/// decoding after the load) waits until the returned sender sends or goes. Its disk budget is
/// far above `budget`: the store keeps every entry.
fn open_gated(
    dir: &std::path::Path,
    budget: usize,
) -> (Arc<ProgramCache>, crossbeam_channel::Sender<()>) {
    let (go, gate) = crossbeam_channel::bounded::<()>(1);
    let disk = DiskConfig {
        on_loaded: Some(Arc::new(move |_: &disk::LoadReport| {
            let _ = gate.recv();
        })),
        budget_bytes: Some(1 << 30),
        ..DiskConfig::new(dir, stamp("1.0"))
    };
    (open_with(disk, budget), go)
}

/// Waits until the cache's size has not changed for 300 ms (the loader's decoding is done or
/// stopped), checking after each look that nothing was evicted.
fn settle_without_evictions(cache: &ProgramCache) -> usize {
    let t = std::time::Instant::now();
    let (mut last, mut since) = (cache.size_bytes(), std::time::Instant::now());
    loop {
        assert_eq!(cache.stats().counters.evictions, 0, "the decoding evicted");
        std::thread::sleep(Duration::from_millis(5));
        let now = cache.size_bytes();
        if now != last {
            (last, since) = (now, std::time::Instant::now());
        } else if since.elapsed() > Duration::from_millis(300) {
            return now;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "never settled");
    }
}

/// The loader's decoding after the load never evicts: under memory pressure set after the load,
/// or with the host's own saves since, an entry that would not fit decoded stays packed for its
/// lookup, and nothing (the host's saves least of all) leaves the cache.
#[test]
fn the_decoding_after_the_load_never_evicts() {
    let dir = tempfile::tempdir().unwrap();
    let unit = program(1, 101, 4000).stored_size();
    let decoded = store_programs(dir.path(), 40, 4000);

    // Pressure since the load: the limit is a quarter of the budget.
    let (b, go) = open_gated(dir.path(), decoded);
    assert_eq!(b.len(), 40);
    let packed = b.size_bytes();
    b.set_memory_pressure(program_cache::MemoryPressure::Moderate);
    go.send(()).unwrap();
    let after = settle_without_evictions(&b);
    assert_eq!(b.len(), 40);
    assert!(after > packed, "nothing was decoded ({after} bytes)");
    assert!(after <= decoded / 4, "{after} > {}", decoded / 4);
    drop(b);

    // The host's saves since the load take most of what the reservations kept for decoding.
    let (c, go) = open_gated(dir.path(), decoded);
    let packed = c.size_bytes();
    assert_eq!(c.len(), 40);
    let own: Vec<u8> = (101..=130).collect();
    for &n in &own {
        c.save(key(n), program(n, n + 100, 4000), None).unwrap();
    }
    go.send(()).unwrap();
    let after = settle_without_evictions(&c);
    assert_eq!(c.len(), 70);
    assert!(after > packed + own.len() * unit, "nothing was decoded");
    assert!(after <= decoded, "{after} > {decoded}");
    assert!(own.iter().all(|&n| c.peek(&key(n)).is_some()));
}

/// The drop that lets go of the host's last handle waits for the writes already queued, even
/// while the startup load is running (the loader then holds what it inserts into): a host that
/// exits right after that drop loses nothing it saved.
#[test]
fn dropping_the_cache_during_the_startup_load_still_waits_for_queued_writes() {
    const N: u16 = 3000;
    const SAVES: u16 = 40;
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), "1.0", 256 << 20);
    save_wide(&a, N);
    drop(a);
    for round in 0..20u16 {
        let cache = ProgramCache::builder(CacheConfig::with_budget(256 << 20))
            .disk(DiskConfig::new(dir.path(), stamp("1.0")))
            .build();
        // Once the loader is inserting, saves the writer cannot have written yet, then the drop.
        let t = std::time::Instant::now();
        while cache.disk_counters().unwrap().loaded == 0 {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the load never started"
            );
            std::hint::spin_loop();
        }
        let first = N + round * SAVES;
        for n in first..first + SAVES {
            cache
                .save(wide_key(n), program(n as u8, 77, 300), None)
                .unwrap();
        }
        drop(cache);
        let entries = dir.path().join(stamp("1.0").dir_name()).join("entries");
        for n in first..first + SAVES {
            assert!(
                entries.join(wide_key(n).to_hex()).is_file(),
                "round {round}: save {n}, queued before the drop, is not on disk after it"
            );
        }
    }
}
