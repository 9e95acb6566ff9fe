//! `load.pack` (FORMAT.md, "The load pack"): a start after one that read its entries from
//! their files reads them from one file; the pack is only ever a copy, used only while
//! `entries/` is exactly as it was when the pack's load listed it (any entry published,
//! replaced or deleted since, by anyone, makes it stale), each copy checked like a file, never
//! followed through a link or read from a FIFO, and deleted with what it copies.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use program_cache::disk::{DiskCounters, LoadReport, inspect};
use program_cache::{CacheConfig, DiskConfig, ProgramCache, ProgramKey};
use test_support::programs::{program, stamp};

/// Entries in the stores here: well past the 32 a pack needs.
const N: u16 = 200;

fn wide_key(n: u16) -> ProgramKey {
    let mut k = [0x5A; 20];
    k[..2].copy_from_slice(&n.to_be_bytes());
    ProgramKey(k)
}

fn expected(n: u16) -> program_cache::CachedProgram {
    program((n % 200) as u8, 7, 100 + usize::from(n % 50))
}

fn config(dir: &Path) -> DiskConfig {
    DiskConfig {
        budget_bytes: Some(64 << 20),
        ..DiskConfig::new(dir, stamp("1.0"))
    }
}

/// A cache on `disk` with a `memory`-byte budget, once loaded, with its load report.
fn open_with(disk: DiskConfig, memory: usize) -> (Arc<ProgramCache>, LoadReport) {
    let cache = ProgramCache::builder(CacheConfig::with_budget(memory))
        .disk(disk)
        .build();
    let report = cache
        .wait_until_loaded(Duration::from_secs(60))
        .expect("loads");
    (cache, report)
}

fn open(dir: &Path) -> (Arc<ProgramCache>, LoadReport) {
    open_with(config(dir), 64 << 20)
}

fn counters(cache: &ProgramCache) -> DiskCounters {
    cache.disk_counters().expect("a disk layer")
}

/// A store of `N` entries under `wide_key(0..N)`, written by a cache that is gone.
fn stored(dir: &Path) {
    let (cache, _) = open(dir);
    for k in 0..N {
        cache.save(wide_key(k), expected(k), None).unwrap();
        if k % 100 == 99 {
            cache.flush_disk();
        }
    }
    cache.flush_disk();
    assert_eq!(counters(&cache).writes, u64::from(N));
    drop(cache);
}

fn store_dir(dir: &Path) -> PathBuf {
    let stores = inspect::scan(dir).unwrap();
    assert_eq!(stores.len(), 1);
    stores[0].dir.clone()
}

fn pack_path(dir: &Path) -> PathBuf {
    store_dir(dir).join("load.pack")
}

fn entry_path(dir: &Path, k: u16) -> PathBuf {
    store_dir(dir).join("entries").join(wide_key(k).to_hex())
}

/// Waits (bounded) until the writer of `cache` has written `n` packs.
fn wait_for_packs(cache: &ProgramCache, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while counters(cache).packs_written < n {
        assert!(
            Instant::now() < deadline,
            "no pack written: {:?}",
            counters(cache)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `entries/` has been quiet long enough for a load to write a pack.
fn quiet() {
    std::thread::sleep(Duration::from_millis(1100));
}

/// A store of `N` entries whose `load.pack` holds them all (written by the second start).
fn packed(dir: &Path) {
    stored(dir);
    quiet();
    let (cache, report) = open(dir);
    assert_eq!((report.loaded, report.from_pack), (usize::from(N), 0));
    wait_for_packs(&cache, 1);
    drop(cache);
    assert!(pack_path(dir).is_file());
}

fn assert_all_but(cache: &ProgramCache, missing: &[u16]) {
    for k in 0..N {
        let found = cache.peek(&wide_key(k));
        if missing.contains(&k) {
            assert!(found.is_none(), "key {k}");
        } else {
            assert_eq!(*found.unwrap_or_else(|| panic!("key {k}")), expected(k));
        }
    }
}

#[test]
fn the_start_after_one_that_read_the_files_takes_every_entry_from_the_pack() {
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path());
    let (cache, report) = open(dir.path());
    assert_eq!(report.loaded, usize::from(N));
    assert_eq!(report.from_pack, usize::from(N));
    let c = counters(&cache);
    assert_eq!(
        (c.loaded, c.loaded_from_pack, c.rejected_entries),
        (200, 200, 0)
    );
    assert_all_but(&cache, &[]);
    // A pack that covered the whole load is not written again.
    drop(cache);
    let (cache, report) = open(dir.path());
    assert_eq!(report.from_pack, usize::from(N));
    drop(cache);
    let (cache, _) = open(dir.path());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(counters(&cache).packs_written, 0);
}

#[test]
fn a_load_from_the_pack_keeps_the_order_a_load_from_the_files_has() {
    let dir = tempfile::tempdir().unwrap();
    stored(dir.path());
    // Hot marks and last uses decide the order; a memory budget that holds about half the
    // entries shows which ones came first.
    let (cache, _) = open(dir.path());
    for k in (0..N).step_by(7) {
        cache.mark_hot(&[wide_key(k)]);
    }
    for k in (0..N).step_by(3) {
        let _ = cache.load(&wide_key(k), None);
    }
    cache.flush_disk();
    drop(cache);
    let unit = expected(0).stored_size();
    let memory = unit * usize::from(N) / 2;
    let held = |cache: &ProgramCache| -> Vec<u16> {
        (0..N)
            .filter(|&k| cache.peek(&wide_key(k)).is_some())
            .collect()
    };
    assert!(!pack_path(dir.path()).exists(), "no quiet load yet");
    quiet();
    let (from_files, report) = open_with(config(dir.path()), memory);
    assert_eq!(report.from_pack, 0);
    let files_held = held(&from_files);
    assert!(files_held.len() > 40 && files_held.len() < usize::from(N));
    // This load's pack holds what it read ahead (up to its memory budget).
    wait_for_packs(&from_files, 1);
    drop(from_files);
    let (from_pack, report) = open_with(config(dir.path()), memory);
    assert!(report.from_pack > 40, "{report:?}");
    assert_eq!(held(&from_pack), files_held);
}

#[test]
fn any_change_to_the_entries_since_the_pack_makes_it_stale_and_it_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path());
    let pack = pack_path(dir.path());
    // Added since: a new file the pack does not hold.
    let (cache, report) = open(dir.path());
    assert_eq!(report.from_pack, usize::from(N));
    let added = wide_key(N);
    cache.save(added, expected(N), None).unwrap();
    cache.flush_disk();
    drop(cache);
    // Deleted since.
    std::fs::remove_file(entry_path(dir.path(), 5)).unwrap();
    // Replaced since, by a damaged file (a new inode at the name): judged as itself.
    let replaced = entry_path(dir.path(), 6);
    let mut bytes = std::fs::read(&replaced).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let tmp = replaced.with_extension("new");
    std::fs::write(&tmp, &bytes).unwrap();
    let old_ino = std::fs::metadata(&replaced).unwrap().ino();
    std::fs::rename(&tmp, &replaced).unwrap();
    assert_ne!(std::fs::metadata(&replaced).unwrap().ino(), old_ino);

    let (cache, report) = open(dir.path());
    assert_eq!(report.from_pack, 0, "{report:?}");
    assert_eq!(report.loaded, usize::from(N) - 1, "{report:?}");
    assert_eq!(report.rejected, 1);
    assert!(!replaced.exists(), "the damaged file is deleted");
    assert!(!pack.exists(), "the stale pack is deleted");
    assert_all_but(&cache, &[5, 6]);
    assert_eq!(*cache.peek(&added).unwrap(), expected(N));
    // The folder changed just now: no pack yet (a change in the same tick of a coarse clock
    // would not show in the times it records).
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(counters(&cache).packs_written, 0);
    drop(cache);
    quiet();
    let (cache, report) = open(dir.path());
    assert_eq!(report.from_pack, 0);
    wait_for_packs(&cache, 1);
    drop(cache);
    let (cache, report) = open(dir.path());
    assert_eq!(report.from_pack, usize::from(N) - 1, "{report:?}");
    assert_all_but(&cache, &[5, 6]);
}

#[test]
fn an_entry_deleted_and_saved_again_is_never_served_from_an_older_pack() {
    // ext4 gives a freed inode number to the next new file at once: a new file under the same
    // key often has the deleted file's inode. The folder's times tell them apart.
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path());
    let mut reused = 0;
    for k in [3, 4, 5] {
        let path = entry_path(dir.path(), k);
        let ino = std::fs::metadata(&path).unwrap().ino();
        std::fs::remove_file(&path).unwrap();
        let (cache, _) = open(dir.path());
        cache.save(wide_key(k), program(9, 9, 333), None).unwrap();
        cache.flush_disk();
        drop(cache);
        reused += usize::from(std::fs::metadata(&path).unwrap().ino() == ino);
    }
    let (cache, report) = open(dir.path());
    assert_eq!(report.from_pack, 0, "{report:?}");
    for k in [3, 4, 5] {
        assert_eq!(
            *cache.peek(&wide_key(k)).unwrap(),
            program(9, 9, 333),
            "key {k}"
        );
    }
    eprintln!("{reused} of 3 new files had the deleted file's inode");
}

#[test]
fn a_clear_by_another_cache_right_after_a_load_never_comes_back_from_a_pack() {
    // Cache `a` loads from the files and plans a pack; `b`, on the same folder, clears the
    // store and saves other programs under the same keys while `a`'s writer may be about to
    // write. Whatever the timing, a later start serves `b`'s programs.
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        stored(dir.path());
        quiet();
        let (a, report) = open(dir.path());
        assert_eq!(report.from_pack, 0);
        let (b, _) = open(dir.path());
        b.clear();
        b.flush_disk();
        for k in 0..N {
            b.save(wide_key(k), program(9, 9, 100), None).unwrap();
            if k % 100 == 99 {
                b.flush_disk();
            }
        }
        b.flush_disk();
        drop((a, b));
        let (cache, report) = open(dir.path());
        assert_eq!(report.from_pack, 0, "round {round}: {report:?}");
        for k in 0..N {
            let p = cache.peek(&wide_key(k));
            assert_eq!(
                p.as_deref(),
                Some(&program(9, 9, 100)),
                "round {round}, key {k}"
            );
        }
    }
}

#[test]
fn a_pack_capped_by_the_budget_or_too_large_for_a_smaller_load_is_not_rewritten_at_every_start() {
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path());
    let full = std::fs::metadata(pack_path(dir.path())).unwrap().len();
    std::fs::remove_file(pack_path(dir.path())).unwrap();
    let store_bytes = inspect::scan(dir.path()).unwrap()[0].allocated;
    // Room under the low-water mark (80 %) for the entries and about half of a full pack.
    let disk = || DiskConfig {
        budget_bytes: Some((store_bytes + full / 2) * 100 / 80),
        ..DiskConfig::new(dir.path(), stamp("1.0"))
    };
    let (cache, _) = open_with(disk(), 64 << 20);
    wait_for_packs(&cache, 1);
    drop(cache);
    let pack = std::fs::read(pack_path(dir.path())).unwrap();
    let mut from_pack = Vec::new();
    for _ in 0..3 {
        let (cache, report) = open_with(disk(), 64 << 20);
        from_pack.push(report.from_pack);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(counters(&cache).packs_written, 0);
        assert_eq!(counters(&cache).evictions, 0);
    }
    assert!(
        from_pack.iter().all(|&n| n > 32 && n < usize::from(N)),
        "{from_pack:?}"
    );
    // A load whose budget is under the pack's size leaves it as it is.
    let (cache, report) = open_with(disk(), pack.len() / 4);
    assert_eq!(report.from_pack, 0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(counters(&cache).packs_written, 0);
    drop(cache);
    assert_eq!(std::fs::read(pack_path(dir.path())).unwrap(), pack);
}

#[test]
fn a_damaged_pack_is_not_trusted_and_the_files_are_judged_on_their_own() {
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path());
    let pack = pack_path(dir.path());
    let good = std::fs::read(&pack).unwrap();

    // One entry's copy damaged (the last byte is in the last entry's payload): that entry
    // comes from its file, which is fine and stays.
    let mut bytes = good.clone();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&pack, &bytes).unwrap();
    let (cache, report) = open(dir.path());
    assert_eq!(report.from_pack, usize::from(N) - 1, "{report:?}");
    assert_eq!((report.loaded, report.rejected), (usize::from(N), 0));
    assert_all_but(&cache, &[]);
    drop(cache);

    // The index damaged, the pack truncated, or garbage: none of it is used (it is deleted),
    // every file loads, nothing is rejected, and the load writes a new pack.
    let mut index = good.clone();
    index[30] ^= 1;
    for damaged in [index, good[..good.len() / 2].to_vec(), vec![0x55; 4096]] {
        std::fs::write(&pack, &damaged).unwrap();
        let (cache, report) = open(dir.path());
        assert_eq!(report.from_pack, 0, "{report:?}");
        assert_eq!((report.loaded, report.rejected), (usize::from(N), 0));
        assert_all_but(&cache, &[]);
        wait_for_packs(&cache, 1);
        drop(cache);
        assert_eq!(std::fs::read(&pack).unwrap().len(), good.len());
    }
}

#[test]
fn a_pack_larger_than_the_load_may_read_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path());
    let pack_len = std::fs::metadata(pack_path(dir.path())).unwrap().len() as usize;
    // A memory budget under the pack's size: the loader reads ahead no more than that, so a
    // pack this large is not one its load could have written, and it is not read.
    let (cache, report) = open_with(config(dir.path()), pack_len / 4);
    assert_eq!(report.from_pack, 0, "{report:?}");
    assert!(report.loaded > 0);
    assert_eq!(report.rejected, 0);
    drop(cache);
    assert_eq!(
        std::fs::metadata(pack_path(dir.path())).unwrap().len() as usize,
        pack_len,
        "left for a load that may read it"
    );
}

#[test]
fn a_link_fifo_or_folder_at_the_pack_name_is_never_followed_or_read() {
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path());
    let pack = pack_path(dir.path());
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("victim");
    std::fs::copy(&pack, &target).unwrap();
    let target_bytes = std::fs::read(&target).unwrap();

    // A symbolic link to a valid pack: not read; the name is replaced, the target untouched.
    std::fs::remove_file(&pack).unwrap();
    std::os::unix::fs::symlink(&target, &pack).unwrap();
    let (cache, report) = open(dir.path());
    assert_eq!(report.from_pack, 0, "{report:?}");
    assert_eq!(report.loaded, usize::from(N));
    wait_for_packs(&cache, 1);
    drop(cache);
    assert_eq!(std::fs::read(&target).unwrap(), target_bytes);
    assert!(!std::fs::symlink_metadata(&pack).unwrap().is_symlink());

    // A FIFO: never opened for reading (the open would hang), replaced.
    std::fs::remove_file(&pack).unwrap();
    let c = std::ffi::CString::new(pack.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (cache, report) = open(dir.path());
    assert_eq!(report.from_pack, 0, "{report:?}");
    assert_eq!(report.loaded, usize::from(N));
    drop(cache);

    // A folder with something in it: left as it is; no pack is written over it, and the
    // temporary file of the attempt is gone.
    std::fs::remove_file(&pack).ok();
    std::fs::create_dir(&pack).unwrap();
    std::fs::write(pack.join("keep"), b"not ours").unwrap();
    let (cache, report) = open(dir.path());
    assert_eq!(report.loaded, usize::from(N));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(counters(&cache).packs_written, 0);
    drop(cache);
    assert_eq!(std::fs::read(pack.join("keep")).unwrap(), b"not ours");
    let tmp = store_dir(dir.path()).join("tmp");
    assert_eq!(std::fs::read_dir(tmp).unwrap().count(), 0);
}

#[test]
fn a_clear_or_an_eviction_deletes_the_pack_with_the_entries_it_copies() {
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path());
    let (cache, _) = open(dir.path());
    cache.clear();
    cache.flush_disk();
    assert!(!pack_path(dir.path()).exists());
    drop(cache);

    let dir = tempfile::tempdir().unwrap();
    packed(dir.path());
    let store_bytes = inspect::scan(dir.path()).unwrap()[0].allocated;
    // A budget the store is over: the eviction at open deletes the pack first, then entries.
    let disk = DiskConfig {
        budget_bytes: Some(store_bytes * 3 / 4),
        ..DiskConfig::new(dir.path(), stamp("1.0"))
    };
    let (cache, _) = open_with(disk, 64 << 20);
    cache.flush_disk();
    std::thread::sleep(Duration::from_millis(300));
    cache.flush_disk();
    let c = counters(&cache);
    assert!(c.evictions > 0, "{c:?}");
    drop(cache);
    assert!(!pack_path(dir.path()).exists());
}

#[test]
fn another_stamps_store_with_a_pack_is_removed_whole() {
    let dir = tempfile::tempdir().unwrap();
    packed(dir.path());
    let old = store_dir(dir.path());
    let disk = DiskConfig {
        budget_bytes: Some(64 << 20),
        ..DiskConfig::new(dir.path(), stamp("2.0 (driver update)"))
    };
    let (cache, _) = open_with(disk, 64 << 20);
    cache.flush_disk();
    assert!(!old.exists(), "the old store, pack and all, is gone");
}

#[test]
fn entries_averaging_16_kib_or_more_get_no_pack() {
    let dir = tempfile::tempdir().unwrap();
    let disk = || DiskConfig {
        compress: false,
        ..config(dir.path())
    };
    let (cache, _) = open_with(disk(), 64 << 20);
    for k in 0..40 {
        cache
            .save(wide_key(k), program(k as u8, 7, 20_000), None)
            .unwrap();
    }
    cache.flush_disk();
    drop(cache);
    quiet();
    let (cache, report) = open_with(disk(), 64 << 20);
    assert_eq!((report.loaded, report.from_pack), (40, 0));
    drop(cache);
    assert!(!pack_path(dir.path()).exists());
    assert_eq!(
        *open_with(disk(), 64 << 20).0.peek(&wide_key(3)).unwrap(),
        program(3, 7, 20_000)
    );
}
