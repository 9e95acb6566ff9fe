//! The disk store against a hostile or unlucky cache folder, each case one that broke the store
//! before (issue 10), with real kernel objects: planted links, FIFOs, look-alike folders, sparse
//! files, frozen processes holding locks (`flock(1)` stopped with SIGSTOP), a full tmpfs, clock
//! skew written into files, a folder deleted under a running cache.
//!
//! Timings these tests measure are printed (`--show-output`) for the record; the assertions use
//! generous bounds, never tight timing.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use program_cache::disk::{self, inspect};
use program_cache::{
    CacheConfig, CachedProgram, CompatibilityStamp, DiskConfig, ProgramCache, ProgramKey,
    ShaderHash,
};
use test_support::mount;
use test_support::programs::program;

fn stamp(product: &str, version: &str, renderer: &str) -> CompatibilityStamp {
    CompatibilityStamp {
        gl_vendor: "Test".into(),
        gl_renderer: renderer.into(),
        gl_version: "4.5 test".into(),
        context: "OpenGL core profile".into(),
        vendor_id: None,
        device_id: None,
        driver_build_id: None,
        host_product: product.into(),
        host_version: version.into(),
        format_version: disk::FORMAT_VERSION,
        pointer_width: 64,
    }
}

fn ours() -> CompatibilityStamp {
    stamp("tests", "1", "fake")
}

/// A key from a number (any number: `test_support::programs::key` has only 256).
fn nkey(n: u32) -> ProgramKey {
    let mut k = [0x5a; 20];
    k[..4].copy_from_slice(&n.to_le_bytes());
    ProgramKey(k)
}

/// A program whose binary does not compress (so sizes on disk are what they say).
fn noisy(n: u32, len: usize) -> CachedProgram {
    let mut p = program(1, 2, 0);
    let mut x = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    p.binary.bytes = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    p
}

type Log = Arc<Mutex<Vec<String>>>;

fn config(dir: &Path, stamp: CompatibilityStamp) -> (DiskConfig, Log) {
    let log: Log = Arc::default();
    let sink = log.clone();
    let mut c = DiskConfig::new(dir, stamp);
    c.log = Some(Arc::new(move |l: &str| sink.lock().unwrap().push(l.into())));
    (c, log)
}

/// Opens a cache and waits until its writer has opened the store, loaded it and collected
/// other stores' garbage.
fn open_with(c: DiskConfig, budget: usize) -> Arc<ProgramCache> {
    let cache = ProgramCache::builder(CacheConfig::with_budget(budget))
        .disk(c)
        .build();
    cache
        .wait_until_loaded(Duration::from_secs(20))
        .expect("the startup load finishes");
    cache.flush_disk();
    cache
}

fn open(dir: &Path, stamp: CompatibilityStamp) -> (Arc<ProgramCache>, Log) {
    let (c, log) = config(dir, stamp);
    (open_with(c, 8 << 20), log)
}

/// Records shaders `range` as compiled (no program uses them): `compiled.list` material.
fn compile_shaders(cache: &ProgramCache, range: std::ops::Range<u8>) {
    for i in range {
        cache.shader_compile_succeeded(ShaderHash([i; 20]));
    }
}

/// Makes a store of `stamp` in `root` holding `n` entries, and closes it.
fn make_store(root: &Path, stamp: CompatibilityStamp, n: u32) -> PathBuf {
    let (cache, _) = open(root, stamp.clone());
    save_all(&cache, 0..n, 300);
    assert_eq!(cache.disk_counters().unwrap().writes, u64::from(n));
    root.join(stamp.dir_name())
}

/// Saves program `i` (`noisy(i, len)`) under `nkey(i)` for every `i` of `keys`, then waits
/// until the writer has written them.
fn save_all(cache: &ProgramCache, keys: impl IntoIterator<Item = u32>, len: usize) {
    for i in keys {
        cache.save(nkey(i), noisy(i, len), None).unwrap();
    }
    cache.flush_disk();
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Sets the modification time of every file and folder of a store (what "unused since" means).
fn age_store(store: &Path, when: SystemTime) {
    for name in [
        "in-use.lock",
        "STAMP",
        "entries",
        "lru.log",
        "hot.list",
        "compiled.list",
        "evict.lock",
    ] {
        if let Ok(f) = std::fs::File::open(store.join(name)) {
            f.set_modified(when).unwrap();
        }
    }
}

fn days(n: u64) -> Duration {
    Duration::from_secs(n * 24 * 3600)
}

/// Runs `f` on a thread and fails the test (instead of hanging it) when it takes longer than
/// `limit`. Returns the result and the time it took.
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> (T, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    let start = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => (v, start.elapsed()),
        Err(_) => panic!("{what} did not return within {limit:?}: it hangs"),
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Never delete what is not ours.

#[test]
fn look_alike_folders_survive_open_garbage_collection_and_clear() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    // A user's folder that happens to hold a file named STAMP.
    std::fs::create_dir_all(r.join("photos")).unwrap();
    std::fs::write(r.join("photos/STAMP"), "my stamp collection").unwrap();
    std::fs::write(r.join("photos/cat.jpg"), "meow").unwrap();
    // Our name form and layout, but a STAMP that is not ours.
    let fake = r.join("0123456789abcdef");
    std::fs::create_dir_all(fake.join("entries")).unwrap();
    std::fs::write(fake.join("STAMP"), "gl_vendor: Test\nstamp_hash: 0123\n").unwrap();
    std::fs::write(fake.join("notes.txt"), "keep me").unwrap();
    // A real stamp's STAMP copied into a folder of another name.
    let other = stamp("tests", "0", "fake"); // same product and device, older version
    let copied = r.join("fedcba9876543210");
    std::fs::create_dir_all(copied.join("entries")).unwrap();
    std::fs::write(copied.join("STAMP"), other.describe()).unwrap();
    std::fs::write(copied.join("entries/thesis.tex"), "keep me too").unwrap();
    // A genuinely stale store (same product and device, older version) in which a user left
    // files: ours go, theirs stay.
    let stale = make_store(r, other.clone(), 3);
    std::fs::write(stale.join("README"), "user file in a store").unwrap();
    std::fs::write(stale.join("entries/mine.txt"), "user file in entries").unwrap();
    age_store(&stale, SystemTime::now() - days(400));
    let user_files_before: Vec<PathBuf> = [
        "photos/STAMP",
        "photos/cat.jpg",
        "0123456789abcdef/STAMP",
        "0123456789abcdef/notes.txt",
        "fedcba9876543210/STAMP",
        "fedcba9876543210/entries/thesis.tex",
    ]
    .iter()
    .map(|p| r.join(p))
    .collect();

    let (cache, log) = open(r, ours());
    let removed_lines: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("removed the store"))
        .cloned()
        .collect();
    assert_eq!(removed_lines.len(), 1, "{:?}", log.lock().unwrap());
    assert!(
        removed_lines[0].contains(&other.dir_name()),
        "{removed_lines:?}"
    );
    assert!(removed_lines[0].contains("3 entries"), "{removed_lines:?}");
    assert_eq!(
        cache.disk_counters().unwrap().stores_removed,
        0,
        "its folder stays"
    );
    // Our files of the stale store are gone, the user's are there.
    assert!(stale.join("README").exists() && stale.join("entries/mine.txt").exists());
    assert!(!stale.join("STAMP").exists() && !stale.join("in-use.lock").exists());
    let left: Vec<PathBuf> = files_under(&stale.join("entries"));
    assert_eq!(left, vec![stale.join("entries/mine.txt")]);
    for f in &user_files_before {
        assert!(f.exists(), "{} was deleted", f.display());
    }
    drop(cache);

    // `clear` removes our store and leaves every look-alike alone.
    let report = inspect::clear(r, false).unwrap();
    assert_eq!(report.stores, 1, "{report:?}");
    assert!(
        report
            .damaged_left
            .iter()
            .any(|d| d.ends_with("0123456789abcdef"))
    );
    assert!(!r.join(ours().dir_name()).exists());
    for f in &user_files_before {
        assert!(f.exists(), "{} was deleted by clear", f.display());
    }
    assert!(stale.join("README").exists());
}

// ---------------------------------------------------------------------------------------------
// 2. Never follow a link.

#[test]
fn side_files_planted_as_links_are_never_followed_or_written_through() {
    for side in [
        "lru.log",
        "hot.list",
        "compiled.list",
        "evict.lock",
        "in-use.lock",
        "STAMP",
    ] {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let store = make_store(root.path(), ours(), 2);
        // A link to an existing file outside, and (for creation) a dangling one.
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let _ = std::fs::remove_file(store.join(side));
        std::os::unix::fs::symlink(&victim, store.join(side)).unwrap();
        let dangling_root = tempfile::tempdir().unwrap();
        let store2 = make_store(dangling_root.path(), ours(), 1);
        let created = outside.path().join("created-through-link");
        let _ = std::fs::remove_file(store2.join(side));
        std::os::unix::fs::symlink(&created, store2.join(side)).unwrap();

        for root in [root.path(), dangling_root.path()] {
            let (mut c, _) = config(root, ours());
            c.budget_bytes = Some(64 * 1024);
            let cache = open_with(c, 8 << 20);
            for i in 0..40 {
                let _ = cache.save(nkey(i), noisy(i, 3000), None);
                let _ = cache.load(&nkey(i), None);
            }
            cache.mark_hot(&[nkey(1), nkey(2)]);
            compile_shaders(&cache, 0..3);
            cache.flush_disk();
            cache.clear();
            cache.flush_disk();
            drop(cache);
        }
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            b"precious",
            "{side}: written through"
        );
        assert!(
            !created.exists(),
            "{side}: a file was created through the link"
        );
        let meta = std::fs::symlink_metadata(store.join(side));
        // The link itself is either still a link (never opened) or was replaced by our file
        // (rename over the name, never through it).
        if let Ok(m) = meta {
            assert!(
                m.file_type().is_symlink() || m.file_type().is_file(),
                "{side}"
            );
        }
    }
}

#[test]
fn linked_folders_are_refused_and_new_folders_are_private() {
    let root = tempfile::tempdir().unwrap();
    let (cache, _) = open(root.path(), ours());
    let store = root.path().join(ours().dir_name());
    for d in [&store, &store.join("entries"), &store.join("tmp")] {
        let mode = std::fs::metadata(d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
    }
    drop(cache);
    // `entries` replaced by a link to a folder outside: the store is refused, nothing is
    // written there.
    let outside = tempfile::tempdir().unwrap();
    std::fs::remove_dir_all(store.join("entries")).unwrap();
    std::os::unix::fs::symlink(outside.path(), store.join("entries")).unwrap();
    let (cache, _) = open(root.path(), ours());
    assert!(!cache.disk_enabled());
    let why = cache.disk_condition().unwrap();
    assert!(why.contains("entries is a symbolic link"), "{why}");
    cache.save(nkey(1), noisy(1, 100), None).unwrap();
    cache.flush_disk();
    assert!(files_under(outside.path()).is_empty());
    // The store folder itself a link: refused too.
    let root2 = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), root2.path().join(ours().dir_name())).unwrap();
    let (cache, _) = open(root2.path(), ours());
    assert!(!cache.disk_enabled());
    cache.save(nkey(1), noisy(1, 100), None).unwrap();
    cache.flush_disk();
    assert!(files_under(elsewhere.path()).is_empty());
}

// ---------------------------------------------------------------------------------------------
// 3. Two products, versions, clock skew.

#[test]
fn two_products_on_one_folder_keep_each_others_stores() {
    let root = tempfile::tempdir().unwrap();
    let a = stamp("browser-stable", "120.0", "fake");
    let b = stamp("browser-beta", "121.0", "fake");
    for round in 0..3 {
        for s in [&a, &b] {
            let (cache, _) = open(root.path(), s.clone());
            cache.save(nkey(round), noisy(round, 200), None).unwrap();
            cache.flush_disk();
        }
    }
    let stores = inspect::scan(root.path()).unwrap();
    assert_eq!(stores.len(), 2);
    assert!(stores.iter().all(|s| s.entries.len() == 3), "{stores:?}");
}

#[test]
fn an_older_version_of_the_same_product_is_stale_a_newer_one_is_not() {
    let root = tempfile::tempdir().unwrap();
    let v1 = stamp("engine", "1.9", "fake");
    let v2 = stamp("engine", "1.10", "fake");
    make_store(root.path(), v2.clone(), 2);
    // v1 runs after v2 (a downgrade, or an old install still running): v2's store stays.
    make_store(root.path(), v1.clone(), 2);
    assert_eq!(inspect::scan(root.path()).unwrap().len(), 2);
    // v2 again: v1's store is stale now.
    let (cache, log) = open(root.path(), v2.clone());
    let stores = inspect::scan(root.path()).unwrap();
    assert_eq!(stores.len(), 1);
    assert!(stores[0].dir.ends_with(v2.dir_name()));
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(&v1.dir_name()))
    );
    assert_eq!(cache.disk_counters().unwrap().stores_removed, 1);
}

#[test]
fn clock_skew_never_makes_a_store_look_unused() {
    let root = tempfile::tempdir().unwrap();
    let other = stamp("other-product", "1", "another gpu");
    // Written by a machine whose clock is a year fast.
    let future = make_store(root.path(), other.clone(), 2);
    age_store(&future, SystemTime::now() + days(365));
    let (cache, _) = open(root.path(), ours());
    drop(cache);
    assert_eq!(
        inspect::scan(root.path()).unwrap().len(),
        2,
        "a future date is recent"
    );

    // This machine's clock jumps 40 days ahead: every record, ours included, looks 40 days
    // old to the clock, but not to each other.
    let root = tempfile::tempdir().unwrap();
    let other_store = make_store(root.path(), other, 2);
    let our_store = make_store(root.path(), ours(), 2);
    age_store(&other_store, SystemTime::now() - days(40));
    age_store(&our_store, SystemTime::now() - days(40));
    let (cache, _) = open(root.path(), ours());
    drop(cache);
    assert_eq!(
        inspect::scan(root.path()).unwrap().len(),
        2,
        "kept: used as recently as ours"
    );
    // Truly unused: 40 days older than our previous use.
    age_store(&other_store, SystemTime::now() - days(80));
    age_store(&our_store, SystemTime::now() - days(40));
    let (cache, _) = open(root.path(), ours());
    assert_eq!(inspect::scan(root.path()).unwrap().len(), 1);
    drop(cache);
}

#[test]
fn entries_dated_in_the_future_age_like_the_others() {
    let root = tempfile::tempdir().unwrap();
    let (mut c, _) = config(root.path(), ours());
    c.compress = false;
    c.budget_bytes = Some(1 << 30);
    let probe = open_with(c.clone(), 64 << 20);
    for i in 0..10 {
        probe.save(nkey(i), noisy(i, 8000), None).unwrap();
    }
    probe.flush_disk();
    let allocated = inspect::scan(root.path()).unwrap()[0].allocated;
    drop(probe);
    // Entry 0 is dated a year ahead (a skewed clock published it).
    let store = root.path().join(ours().dir_name());
    std::fs::File::open(store.join("entries").join(nkey(0).to_hex()))
        .unwrap()
        .set_modified(SystemTime::now() + days(365))
        .unwrap();
    // A budget of about ten entries; every new save evicts the least recently used.
    c.budget_bytes = Some(allocated + 4096);
    c.low_water = 0.95;
    let cache = open_with(c, 64 << 20);
    for i in 10..40 {
        cache.save(nkey(i), noisy(i, 8000), None).unwrap();
        cache.flush_disk();
        std::thread::sleep(Duration::from_millis(3));
    }
    let keys: Vec<ProgramKey> = inspect::scan(root.path()).unwrap()[0]
        .entries
        .iter()
        .map(|e| e.key)
        .collect();
    assert!(
        !keys.contains(&nkey(0)),
        "the future-dated entry became immortal"
    );
    assert!(keys.contains(&nkey(39)));
}

// ---------------------------------------------------------------------------------------------
// 4. Never hang on a FIFO.

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path that outlives the call.
    let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(r, 0, "mkfifo {}", path.display());
}

#[test]
fn fifos_in_place_of_entries_or_side_files_never_hang_anything() {
    for victim in [
        "entry",
        "STAMP",
        "lru.log",
        "hot.list",
        "compiled.list",
        "evict.lock",
        "in-use.lock",
    ] {
        let root = tempfile::tempdir().unwrap();
        let store = make_store(root.path(), ours(), 3);
        let path = if victim == "entry" {
            store.join("entries").join(nkey(1).to_hex())
        } else {
            store.join(victim)
        };
        let _ = std::fs::remove_file(&path);
        mkfifo(&path);
        let r = root.path().to_path_buf();
        let (cache, took) = within(Duration::from_secs(30), "opening the cache", move || {
            let (mut c, _) = config(&r, ours());
            c.budget_bytes = Some(16 * 1024);
            let cache = open_with(c, 8 << 20);
            for i in 10..20 {
                cache.save(nkey(i), noisy(i, 2000), None).unwrap();
                cache.load(&nkey(i), None).unwrap();
            }
            cache.mark_hot(&[nkey(10)]);
            compile_shaders(&cache, 0..3);
            cache.flush_disk();
            cache
        });
        eprintln!("fifo as {victim}: open + load + 10 saves + flush in {took:?}");
        if victim == "entry" {
            assert_eq!(cache.disk_counters().unwrap().odd_removed, 1);
            assert!(!path.exists(), "the FIFO named like an entry is removed");
        }
        drop(cache);
        let r = root.path().to_path_buf();
        let (scan, took) = within(Duration::from_secs(30), "inspect::scan", move || {
            inspect::scan(&r).map(|s| s.len())
        });
        eprintln!("fifo as {victim}: inspect::scan in {took:?}");
        scan.unwrap();
        let r = root.path().to_path_buf();
        within(Duration::from_secs(30), "inspect::clear", move || {
            inspect::clear(&r, true).map(|_| ())
        })
        .0
        .unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Never block on a frozen process.

/// A process that holds `flock` on `path` (shared or exclusive) and is then frozen with
/// SIGSTOP, as a debugger or the cgroup freezer leaves it. Killed when dropped.
struct FrozenHolder(Child);

impl FrozenHolder {
    fn new(path: &Path, exclusive: bool) -> Self {
        let mode = if exclusive { "--exclusive" } else { "--shared" };
        let child = Command::new("flock")
            .args([mode, "--no-fork"])
            .arg(path)
            .args(["sleep", "600"])
            .spawn()
            .expect("flock(1) from util-linux");
        // Wait until it holds the lock: our own non-blocking try then fails.
        let start = Instant::now();
        loop {
            let f = std::fs::File::open(path).unwrap();
            let busy = if exclusive {
                f.try_lock_shared().is_err()
            } else {
                f.try_lock().is_err()
            };
            if busy {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "flock never took the lock"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: kill takes no pointers; the pid is our live child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) }, 0);
        FrozenHolder(child)
    }
}

impl Drop for FrozenHolder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_frozen_process_holding_evict_lock_blocks_nothing() {
    let root = tempfile::tempdir().unwrap();
    let store = make_store(root.path(), ours(), 0);
    std::fs::File::create(store.join("evict.lock")).unwrap();
    let _frozen = FrozenHolder::new(&store.join("evict.lock"), true);
    let (mut c, log) = config(root.path(), ours());
    c.budget_bytes = Some(64 * 1024);
    c.compress = false;
    let start = Instant::now();
    let cache = ProgramCache::builder(CacheConfig::with_budget(8 << 20))
        .disk(c)
        .build();
    let construct = start.elapsed();
    cache.wait_until_loaded(Duration::from_secs(20)).unwrap();
    // Saves far over the disk budget: every eviction finds the lock taken.
    let start = Instant::now();
    for i in 0..60 {
        cache.save(nkey(i), noisy(i, 4000), None).unwrap();
    }
    let saves = start.elapsed();
    let start = Instant::now();
    cache.flush_disk();
    let flush = start.elapsed();
    let start = Instant::now();
    cache.clear();
    let clear = start.elapsed();
    let c = cache.disk_counters().unwrap();
    let start = Instant::now();
    drop(cache);
    let free = start.elapsed();
    eprintln!(
        "frozen evict.lock holder: constructor {construct:?}, 60 saves {saves:?}, flush {flush:?}, \
         clear {clear:?}, free {free:?}; writes {}, lock_busy {}",
        c.writes, c.lock_busy
    );
    assert!(c.writes >= 50, "writes go on: {c:?}");
    assert!(c.lock_busy >= 1, "{c:?}");
    assert!(log.lock().unwrap().iter().any(|l| l.contains("evict.lock")));
    assert!(flush < Duration::from_secs(10) && free < Duration::from_secs(10));
    assert!(construct < Duration::from_secs(1) && clear < Duration::from_secs(1));
}

#[test]
fn a_frozen_process_holding_our_store_exclusively_leaves_us_in_memory() {
    let root = tempfile::tempdir().unwrap();
    let store = make_store(root.path(), ours(), 2);
    let _frozen = FrozenHolder::new(&store.join("in-use.lock"), true);
    let (c, _) = config(root.path(), ours());
    let start = Instant::now();
    let cache = ProgramCache::builder(CacheConfig::with_budget(8 << 20))
        .disk(c)
        .build();
    let construct = start.elapsed();
    // Saves and hits are served from memory at once, while the writer waits its bounded time.
    cache.save(nkey(9), noisy(9, 100), None).unwrap();
    assert!(cache.load(&nkey(9), None).is_some());
    let report = cache.wait_until_loaded(Duration::from_secs(20)).unwrap();
    let loaded = start.elapsed();
    eprintln!(
        "frozen exclusive in-use.lock holder: constructor {construct:?}, memory-only after \
         {loaded:?}"
    );
    assert_eq!(report.loaded, 0);
    assert!(!cache.disk_enabled());
    assert!(cache.disk_condition().unwrap().contains("in-use.lock"));
    assert_eq!(cache.disk_counters().unwrap().lock_busy, 1);
    assert!(construct < Duration::from_secs(1));
    assert!(loaded < disk::OPEN_LOCK_WAIT + Duration::from_secs(5));
}

#[test]
fn a_frozen_process_using_a_stale_store_keeps_it_and_blocks_nobody() {
    let root = tempfile::tempdir().unwrap();
    let old = stamp("tests", "0", "fake");
    let stale = make_store(root.path(), old, 2);
    let _frozen = FrozenHolder::new(&stale.join("in-use.lock"), false);
    let start = Instant::now();
    let (cache, _) = open(root.path(), ours());
    let took = start.elapsed();
    eprintln!("frozen user of a stale store: open + load + collection in {took:?}");
    assert_eq!(cache.disk_counters().unwrap().stores_removed, 0);
    assert!(
        stale.join("STAMP").exists(),
        "a store in use is never removed"
    );
    assert!(took < Duration::from_secs(5));
}

// ---------------------------------------------------------------------------------------------
// 6. Bounded reads.

#[test]
fn a_huge_sparse_file_in_entries_is_removed_without_being_read() {
    let root = tempfile::tempdir().unwrap();
    let store = make_store(root.path(), ours(), 20);
    let sparse = store.join("entries").join(nkey(999).to_hex());
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    // Also a sparse file within the bound but whose header is garbage.
    let mid = store.join("entries").join(nkey(998).to_hex());
    std::fs::File::create(&mid)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let (mut c, _) = config(root.path(), ours());
    // The budget fits the 20 good entries but not the sparse files.
    c.budget_bytes = Some(1 << 20);
    let peak_before = peak_rss_bytes();
    let start = Instant::now();
    let cache = open_with(c, 8 << 20);
    let took = start.elapsed();
    let grew = peak_rss_bytes().saturating_sub(peak_before);
    let counters = cache.disk_counters().unwrap();
    eprintln!(
        "2 GiB + 32 MiB sparse files in entries/: open + load in {took:?}, peak memory grew by \
         {grew} bytes, {counters:?}"
    );
    // Reading the 2 GiB file whole (as the store once did) takes 2 GiB of memory.
    assert!(
        grew < 1 << 30,
        "the sparse file was read: peak memory grew by {grew} bytes"
    );
    assert!(!sparse.exists() && !mid.exists());
    assert_eq!(
        counters.evictions, 0,
        "good entries were evicted for the sparse files"
    );
    assert_eq!(cache.len(), 20);
    assert!(took < Duration::from_secs(10));
}

/// This process's peak resident memory so far.
fn peak_rss_bytes() -> u64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a live, writable rusage.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) }, 0);
    usage.ru_maxrss.max(0) as u64 * 1024
}

#[test]
fn an_entry_over_the_payload_bound_is_never_written() {
    let root = tempfile::tempdir().unwrap();
    let (mut c, _) = config(root.path(), ours());
    c.compress = false;
    c.budget_bytes = Some(1 << 30);
    let cache = open_with(c, 256 << 20);
    let huge = noisy(1, (disk::MAX_PAYLOAD + 1) as usize);
    cache.save(nkey(1), huge, None).unwrap();
    cache.save(nkey(2), noisy(2, 1000), None).unwrap();
    cache.flush_disk();
    let c = cache.disk_counters().unwrap();
    assert_eq!((c.oversized, c.writes), (1, 1), "{c:?}");
    let entries = &inspect::scan(root.path()).unwrap()[0].entries;
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].key, nkey(2));
    assert!(disk::encode_bounded(&nkey(1), &noisy(1, 10), &[0; 20], 0, true).is_some());
}

// ---------------------------------------------------------------------------------------------
// 7. lru.log stays small.

#[test]
fn lru_log_stays_small_under_ten_seconds_of_hits() {
    let root = tempfile::tempdir().unwrap();
    let (cache, _) = open(root.path(), ours());
    save_all(&cache, 0..100, 500);
    let start = Instant::now();
    let mut hits = 0u64;
    while start.elapsed() < Duration::from_secs(10) {
        for i in 0..100 {
            if cache.load(&nkey(i), None).is_some() {
                hits += 1;
            }
        }
    }
    cache.flush_disk();
    let log = root.path().join(ours().dir_name()).join("lru.log");
    let size = std::fs::metadata(&log).map_or(0, |m| m.len());
    let c = cache.disk_counters().unwrap();
    eprintln!(
        "10 s of hits: {hits} hits, lru.log {size} bytes, {} records",
        c.use_records
    );
    assert!(hits > 100_000, "{hits}");
    // One record per entry per minute: 100 entries, 32 bytes each.
    assert!(size <= 100 * 32, "lru.log grew to {size} bytes");
}

#[test]
fn lru_log_is_compacted_and_counted_in_the_budget() {
    let root = tempfile::tempdir().unwrap();
    let (mut c, _) = config(root.path(), ours());
    // Every use recorded: the log would grow by 32 bytes per hit.
    c.use_record_interval = Duration::ZERO;
    let cache = open_with(c, 8 << 20);
    for i in 0..20 {
        cache.save(nkey(i), noisy(i, 200), None).unwrap();
    }
    let mut max_log = 0;
    let log = root.path().join(ours().dir_name()).join("lru.log");
    for _ in 0..400 {
        for i in 0..20 {
            cache.load(&nkey(i), None).unwrap();
        }
        // Each flush appends one record per key used since the last.
        cache.flush_disk();
        max_log = max_log.max(std::fs::metadata(&log).map_or(0, |m| m.len()));
    }
    cache.flush_disk();
    let c = cache.disk_counters().unwrap();
    eprintln!("8000 uses of 20 entries, 400 flushes: lru.log at most {max_log} bytes, {c:?}");
    assert!(c.compactions >= 1, "{c:?}");
    assert!(max_log <= 64 * 1024 + 20 * 32 * 21, "{max_log}");
    let store = &inspect::scan(root.path()).unwrap()[0];
    let entries: u64 = store.entries.iter().map(|e| e.allocated).sum();
    assert!(
        store.allocated > entries,
        "side files count in the store's size"
    );
}

// ---------------------------------------------------------------------------------------------
// 8. The budget counts allocated blocks; a full disk evicts and retries.

/// Bytes allocated on disk under `dir` (what `du` says): every file and folder.
fn du(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let mut total = std::fs::symlink_metadata(dir).unwrap().blocks() * 512;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = e.metadata().unwrap();
            total += m.blocks() * 512;
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    total
}

#[test]
fn a_six_mib_store_takes_at_most_six_mib_of_disk() {
    let root = tempfile::tempdir().unwrap();
    let budget = 6u64 << 20;
    let (mut c, _) = config(root.path(), ours());
    c.budget_bytes = Some(budget);
    let cache = open_with(c, 64 << 20);
    // Small programs: about 1.2 KiB each, far below a 4 KiB block.
    for i in 0..8000 {
        cache.save(nkey(i), noisy(i, 1000), None).unwrap();
        if i % 200 == 0 {
            cache.flush_disk();
            cache.load(&nkey(i), None);
        }
    }
    cache.flush_disk();
    let store = root.path().join(ours().dir_name());
    let allocated = du(&store);
    let scan = &inspect::scan(root.path()).unwrap()[0];
    let lengths = scan.bytes();
    let c = cache.disk_counters().unwrap();
    eprintln!(
        "6 MiB store, 8000 saves of ~1.1 KiB: {} entries, file lengths {lengths} B, allocated \
         (du) {allocated} B, budget {budget} B, evictions {}",
        scan.entries.len(),
        c.evictions
    );
    assert!(
        allocated <= budget,
        "{allocated} bytes on disk for a {budget}-byte budget"
    );
    assert!(c.evictions > 0);
}

/// Mounts a tmpfs of `size` bytes at `dir` in a private mount namespace of this thread (and of
/// the threads it starts afterwards, which is every thread of a cache it makes). `Err` when
/// that is not allowed here (not root, no namespaces).
fn small_tmpfs(dir: &Path, size: u64) -> Result<(), String> {
    use std::ffi::CString;
    let errno = || std::io::Error::last_os_error();
    mount::private_mount_namespace()?;
    let target = CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let fstype = CString::new("tmpfs").unwrap();
    let data = CString::new(format!("size={size},mode=0700")).unwrap();
    // SAFETY: as above.
    let r = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            data.as_ptr().cast(),
        )
    };
    if r != 0 {
        return Err(format!("mount tmpfs: {}", errno()));
    }
    Ok(())
}

/// Runs `f` with a cache config over a fresh 1 MiB tmpfs (budget 64 MiB, far larger than the
/// file system; no compression), on a thread of its own: the private mount namespace stays with
/// that thread and the threads it starts. `None` (after a SKIP line, or a panic under
/// `GPUSVC_REQUIRE_GL`) when no tmpfs can be mounted here.
fn on_small_tmpfs<T: Send + 'static>(
    test: &str,
    f: impl FnOnce(&Path, DiskConfig) -> T + Send + 'static,
) -> Option<T> {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().to_path_buf();
    let result = std::thread::spawn(move || -> Result<T, String> {
        small_tmpfs(&mount, 1 << 20)?;
        let (mut c, _) = config(&mount, ours());
        c.budget_bytes = Some(64 << 20);
        c.compress = false;
        Ok(f(&mount, c))
    })
    .join()
    .unwrap();
    match result {
        Ok(r) => Some(r),
        Err(why) if std::env::var_os("GPUSVC_REQUIRE_GL").is_some() => {
            panic!("{test}: a small tmpfs cannot be mounted here: {why}")
        }
        Err(why) => {
            println!("SKIP {test}: {why}");
            None
        }
    }
}

#[test]
fn a_full_disk_evicts_and_retries_before_giving_up() {
    let Some((c, on_disk)) = on_small_tmpfs("a_full_disk_evicts_and_retries", |mount, c| {
        let cache = open_with(c, 64 << 20);
        for i in 0..200 {
            cache.save(nkey(i), noisy(i, 20_000), None).unwrap();
            cache.flush_disk();
        }
        let counters = cache.disk_counters().unwrap();
        let on_disk = inspect::scan(mount).unwrap()[0].entries.len();
        (counters, on_disk)
    }) else {
        return;
    };
    eprintln!("1 MiB tmpfs, 200 saves of 20 KB: {c:?}, {on_disk} entries on disk at the end");
    assert!(c.space_retries >= 1, "{c:?}");
    // About 4 MB were written through a 1 MiB file system: eviction made room again and again.
    assert!(c.writes >= 150, "{c:?}");
    assert!(c.write_errors <= 5, "{c:?}");
    assert!(on_disk > 0);
}

// ---------------------------------------------------------------------------------------------
// 9. Stale stores are removed off the calling thread.

#[test]
fn a_thirty_thousand_entry_stale_store_does_not_slow_the_constructor() {
    let root = tempfile::tempdir().unwrap();
    let old = stamp("tests", "0", "fake");
    let stale = make_store(root.path(), old.clone(), 1);
    // 30k entries (the removal deletes names; their content does not matter).
    let entry = std::fs::read(files_under(&stale.join("entries"))[0].clone()).unwrap();
    for i in 1..30_000 {
        std::fs::write(stale.join("entries").join(nkey(i).to_hex()), &entry).unwrap();
    }
    let (c, log) = config(root.path(), ours());
    let start = Instant::now();
    let cache = ProgramCache::builder(CacheConfig::with_budget(8 << 20))
        .disk(c)
        .build();
    let construct = start.elapsed();
    cache.wait_until_loaded(Duration::from_secs(60)).unwrap();
    cache.flush_disk();
    let collected = start.elapsed();
    eprintln!(
        "30k-entry stale store: constructor {construct:?}, removed in the background after \
         {collected:?}"
    );
    assert!(!stale.exists());
    assert_eq!(cache.disk_counters().unwrap().stores_removed, 1);
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("30000 entries"))
    );
    assert!(construct < Duration::from_millis(200), "{construct:?}");
}

// ---------------------------------------------------------------------------------------------
// 10. Inspection tells the truth; the running store repairs itself.

#[test]
fn a_damaged_or_missing_stamp_is_reported_and_repaired_at_open() {
    for damage in ["missing", "garbage", "edited"] {
        let root = tempfile::tempdir().unwrap();
        let store = make_store(root.path(), ours(), 4);
        let stamp_file = store.join("STAMP");
        match damage {
            "missing" => std::fs::remove_file(&stamp_file).unwrap(),
            "garbage" => std::fs::write(&stamp_file, [0xff, 0x00, 0x13]).unwrap(),
            _ => {
                let t = std::fs::read_to_string(&stamp_file).unwrap();
                std::fs::write(&stamp_file, t.replace("fake", "fakf")).unwrap();
            }
        }
        let stores = inspect::scan(root.path()).unwrap();
        assert_eq!(stores.len(), 1, "{damage}: a damaged store is still listed");
        assert!(stores[0].is_damaged(), "{damage}");
        // Its entries are still checked (against the stamp their headers name).
        assert_eq!(stores[0].entries.len(), 4);
        assert_eq!(
            stores[0].corrupt().count(),
            0,
            "{damage}: {:?}",
            stores[0].entries
        );
        let (cache, log) = open(root.path(), ours());
        assert_eq!(cache.len(), 4, "{damage}: entries load after the repair");
        assert!(
            log.lock().unwrap().iter().any(|l| l.contains("STAMP")),
            "{damage}"
        );
        let stores = inspect::scan(root.path()).unwrap();
        assert!(!stores[0].is_damaged(), "{damage}: repaired");
    }
}

#[test]
fn an_unlistable_entries_folder_is_reported() {
    let root = tempfile::tempdir().unwrap();
    let store = make_store(root.path(), ours(), 1);
    std::fs::remove_dir_all(store.join("entries")).unwrap();
    std::fs::write(store.join("entries"), "not a folder").unwrap();
    let stores = inspect::scan(root.path()).unwrap();
    assert!(stores[0].entries_error.is_some(), "{:?}", stores[0]);
    assert!(stores[0].is_damaged());
}

#[test]
fn a_folder_named_like_an_entry_is_removed_once() {
    let root = tempfile::tempdir().unwrap();
    let store = make_store(root.path(), ours(), 1);
    std::fs::create_dir(store.join("entries").join(nkey(7).to_hex())).unwrap();
    let stores = inspect::scan(root.path()).unwrap();
    assert_eq!(stores[0].corrupt().count(), 1);
    let (cache, _) = open(root.path(), ours());
    assert_eq!(cache.disk_counters().unwrap().odd_removed, 1);
    drop(cache);
    let (cache, log) = open(root.path(), ours());
    assert_eq!(cache.disk_counters().unwrap().odd_removed, 0);
    assert!(log.lock().unwrap().is_empty(), "{:?}", log.lock().unwrap());
    assert_eq!(inspect::scan(root.path()).unwrap()[0].corrupt().count(), 0);
    // A non-empty one is never emptied by us: its contents are not ours.
    std::fs::create_dir(store.join("entries").join(nkey(8).to_hex())).unwrap();
    std::fs::write(store.join("entries").join(nkey(8).to_hex()).join("x"), "y").unwrap();
    drop(cache);
    let (_cache, log) = open(root.path(), ours());
    assert!(
        store
            .join("entries")
            .join(nkey(8).to_hex())
            .join("x")
            .exists()
    );
    assert_eq!(
        log.lock().unwrap().len(),
        1,
        "reported once: {:?}",
        log.lock().unwrap()
    );
}

// ---------------------------------------------------------------------------------------------
// 11. Clear while in use.

#[test]
fn clear_refuses_a_store_in_use_and_a_forced_clear_is_survived() {
    let root = tempfile::tempdir().unwrap();
    let (cache, log) = open(root.path(), ours());
    save_all(&cache, 0..10, 500);
    match inspect::clear(root.path(), false) {
        Err(inspect::ClearError::InUse(dirs)) => assert_eq!(dirs.len(), 1),
        other => panic!("clear of a store in use: {other:?}"),
    }
    assert_eq!(
        inspect::scan(root.path()).unwrap()[0].entries.len(),
        10,
        "nothing deleted"
    );
    let report = inspect::clear(root.path(), true).unwrap();
    assert_eq!(report.entries, 10);
    assert!(!root.path().join(ours().dir_name()).exists());
    // The running cache notices, recreates its folder once, and keeps writing.
    save_all(&cache, 10..200, 500);
    let c = cache.disk_counters().unwrap();
    assert_eq!(c.recreated, 1, "{c:?}");
    assert_eq!(c.write_errors, 0, "{c:?}");
    assert_eq!(inspect::scan(root.path()).unwrap()[0].entries.len(), 190);
    let lines = log.lock().unwrap();
    assert_eq!(
        lines.iter().filter(|l| l.contains("vanished")).count(),
        1,
        "{lines:?}"
    );
}

#[test]
fn with_no_home_the_default_is_memory_only() {
    // Read in a child process: environment changes are not thread-safe in this one.
    let child = |env: &[(&str, Option<&str>)]| {
        test_support::cli::run_ignored_test("default_dir_child", env)
    };
    let text = child(&[("HOME", None), ("XDG_CACHE_HOME", None)]);
    assert!(text.contains("default_dir=None"), "{text}");
    let text = child(&[("HOME", None), ("XDG_CACHE_HOME", Some("relative/dir"))]);
    assert!(text.contains("default_dir=None"), "{text}");
    let text = child(&[("HOME", Some("/home/someone")), ("XDG_CACHE_HOME", None)]);
    assert!(
        text.contains("default_dir=Some(\"/home/someone/.cache/gpusvc\")"),
        "{text}"
    );
}

#[test]
#[ignore = "run by with_no_home_the_default_is_memory_only in a child process"]
fn default_dir_child() {
    println!("default_dir={:?}", DiskConfig::default_dir());
}

// ---------------------------------------------------------------------------------------------
// Found by attacking the first version of the new store.

#[test]
fn planted_lock_files_are_replaced_so_eviction_keeps_the_budget() {
    for plant in ["link", "fifo"] {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let store = make_store(root.path(), ours(), 0);
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let lock = store.join("evict.lock");
        let _ = std::fs::remove_file(&lock);
        match plant {
            "link" => std::os::unix::fs::symlink(&victim, &lock).unwrap(),
            _ => mkfifo(&lock),
        }
        let (mut c, log) = config(root.path(), ours());
        c.budget_bytes = Some(64 * 1024);
        c.compress = false;
        let cache = open_with(c, 8 << 20);
        save_all(&cache, 0..100, 3000);
        let allocated = inspect::scan(root.path()).unwrap()[0].allocated;
        assert!(
            allocated <= 64 * 1024,
            "{plant}: the store grew to {allocated} bytes"
        );
        assert!(cache.disk_counters().unwrap().evictions > 0);
        assert!(
            log.lock().unwrap().iter().any(|l| l.contains("replaced")),
            "{plant}: {:?}",
            log.lock().unwrap()
        );
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    }
}

#[test]
fn hard_links_planted_at_side_files_are_never_written_through() {
    let root = tempfile::tempdir().unwrap();
    let store = make_store(root.path(), ours(), 4);
    // Hard links need the same file system: the victims live beside the cache folder.
    let victims = tempfile::tempdir_in(root.path().parent().unwrap()).unwrap();
    for side in ["lru.log", "hot.list", "compiled.list"] {
        let victim = victims.path().join(side);
        std::fs::write(&victim, b"precious").unwrap();
        let _ = std::fs::remove_file(store.join(side));
        std::fs::hard_link(&victim, store.join(side)).unwrap();
    }
    let (cache, _) = open(root.path(), ours());
    for i in 0..4 {
        cache.load(&nkey(i), None).unwrap();
    }
    cache.mark_hot(&[nkey(1)]);
    compile_shaders(&cache, 0..3);
    cache.flush_disk();
    drop(cache);
    for side in ["lru.log", "hot.list", "compiled.list"] {
        assert_eq!(
            std::fs::read(victims.path().join(side)).unwrap(),
            b"precious",
            "{side}: written through a hard link"
        );
    }
}

#[test]
fn entries_or_tmp_deleted_under_a_running_cache_are_recreated() {
    for gone in ["entries", "tmp"] {
        let root = tempfile::tempdir().unwrap();
        let (cache, log) = open(root.path(), ours());
        cache.save(nkey(1), noisy(1, 300), None).unwrap();
        cache.flush_disk();
        std::fs::remove_dir_all(root.path().join(ours().dir_name()).join(gone)).unwrap();
        save_all(&cache, 2..30, 300);
        let c = cache.disk_counters().unwrap();
        assert_eq!((c.recreated, c.write_errors), (1, 0), "{gone}: {c:?}");
        assert!(log.lock().unwrap().iter().any(|l| l.contains("vanished")));
        assert!(inspect::scan(root.path()).unwrap()[0].entries.len() >= 28);
    }
}

#[test]
fn a_store_folder_another_user_owns_or_can_write_is_not_used() {
    for case in ["owner", "group-writable", "entries owner"] {
        let root = tempfile::tempdir().unwrap();
        let store = make_store(root.path(), ours(), 2);
        let target = if case == "entries owner" {
            store.join("entries")
        } else {
            store.clone()
        };
        // SAFETY: geteuid takes no arguments.
        let euid = unsafe { libc::geteuid() };
        if case == "group-writable" {
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o770)).unwrap();
        } else if euid != 0 {
            println!("SKIP {case}: giving a folder to another user needs root");
            continue;
        } else {
            std::os::unix::fs::chown(&target, Some(65534), None).unwrap();
        }
        let (cache, _) = open(root.path(), ours());
        assert!(!cache.disk_enabled(), "{case}");
        assert_eq!(
            cache.len(),
            0,
            "{case}: nothing from that folder reached the cache"
        );
        let why = cache.disk_condition().unwrap();
        assert!(why.contains("not used"), "{case}: {why}");
    }
}

#[test]
fn a_disk_filled_by_others_does_not_empty_the_store() {
    let Some((c, left, filler)) = on_small_tmpfs("a_disk_filled_by_others", |mount, c| {
        let cache = open_with(c, 64 << 20);
        save_all(&cache, 0..20, 8000);
        // Someone else fills the rest of the disk.
        let filler = mount.join("someone-elses-file");
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![7u8; 64 * 1024];
        while std::io::Write::write_all(&mut f, &chunk).is_ok() {}
        drop(f);
        for i in 20..120 {
            cache.save(nkey(i), noisy(i, 8000), None).unwrap();
            cache.flush_disk();
        }
        let left = inspect::scan(mount).unwrap()[0].entries.len();
        (cache.disk_counters().unwrap(), left, filler.exists())
    }) else {
        return;
    };
    eprintln!("disk filled by another file, 100 more saves: {c:?}, {left} of our entries left");
    assert!(filler, "never ours to delete");
    assert!(
        left >= 5,
        "the store was emptied one save at a time: {left} left, {c:?}"
    );
    // New saves keep landing by giving up older entries of ours.
    assert!(c.writes >= 100, "{c:?}");
}

#[test]
fn dropping_the_cache_while_it_removes_a_huge_stale_store_returns_at_once() {
    let root = tempfile::tempdir().unwrap();
    let old = stamp("tests", "0", "fake");
    let stale = make_store(root.path(), old, 1);
    let entry = std::fs::read(files_under(&stale.join("entries"))[0].clone()).unwrap();
    for i in 1..60_000 {
        std::fs::write(stale.join("entries").join(nkey(i).to_hex()), &entry).unwrap();
    }
    let (c, _) = config(root.path(), ours());
    let cache = ProgramCache::builder(CacheConfig::with_budget(8 << 20))
        .disk(c)
        .build();
    // Let the writer get into the removal.
    std::thread::sleep(Duration::from_millis(150));
    let start = Instant::now();
    drop(cache);
    let took = start.elapsed();
    let left = std::fs::read_dir(stale.join("entries")).map_or(0, |d| d.count());
    eprintln!("drop during the removal of a 60k-entry stale store: {took:?}, {left} entries left");
    assert!(
        left > 0,
        "the removal finished before the drop: the test proves nothing"
    );
    assert!(took < Duration::from_millis(500), "{took:?}");
    // What is left is still a store, and the next open finishes the job.
    let (cache, _) = open(root.path(), ours());
    assert_eq!(cache.disk_counters().unwrap().stores_removed, 1);
    assert!(!stale.exists());
}

#[test]
fn a_key_marked_hot_again_loads_by_its_newest_mark() {
    let root = tempfile::tempdir().unwrap();
    let (cache, _) = open(root.path(), ours());
    for i in 1..=3 {
        cache.save(nkey(i), noisy(i, 4000), None).unwrap();
    }
    cache.mark_hot(&[nkey(1)]);
    cache.mark_hot(&[nkey(2)]);
    cache.mark_hot(&[nkey(1)]);
    cache.flush_disk();
    drop(cache);
    // A memory budget for one program: the first in load order is the one that loads.
    let size = program_cache::ProgramCache::builder(CacheConfig::with_budget(1 << 20)).build();
    size.save(nkey(1), noisy(1, 4000), None).unwrap();
    let one = size.size_bytes();
    let (c, _) = config(root.path(), ours());
    let cache = open_with(c, one + one / 2);
    assert_eq!(cache.len(), 1);
    assert!(
        cache.peek(&nkey(1)).is_some(),
        "the most recently marked program loads first"
    );
}

#[test]
fn a_lock_file_planted_after_the_open_is_replaced_at_the_next_eviction() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (mut c, log) = config(root.path(), ours());
    c.budget_bytes = Some(64 * 1024);
    c.compress = false;
    let cache = open_with(c, 8 << 20);
    let victim = outside.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let lock = root.path().join(ours().dir_name()).join("evict.lock");
    let _ = std::fs::remove_file(&lock);
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    save_all(&cache, 0..100, 3000);
    let allocated = inspect::scan(root.path()).unwrap()[0].allocated;
    assert!(
        allocated <= 64 * 1024,
        "the store grew to {allocated} bytes"
    );
    assert!(log.lock().unwrap().iter().any(|l| l.contains("replaced")));
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
}

#[test]
fn a_burst_of_hits_never_crowds_out_saves() {
    let root = tempfile::tempdir().unwrap();
    let (mut c, _) = config(root.path(), ours());
    c.write_queue = 8;
    c.budget_bytes = Some(1 << 30);
    let cache = open_with(c, 128 << 20);
    cache.save(nkey(0), noisy(0, 100), None).unwrap();
    cache.flush_disk();
    // The writer is busy with a 32 MiB entry while the hits and then the saves come.
    let big = noisy(100, 32 << 20);
    cache.save(nkey(100), big, None).unwrap();
    for _ in 0..2000 {
        cache.load(&nkey(0), None).unwrap();
    }
    save_all(&cache, 1..=5, 100);
    let c = cache.disk_counters().unwrap();
    assert_eq!((c.dropped_writes, c.writes), (0, 7), "{c:?}");
}

#[test]
fn another_users_stale_store_is_never_collected() {
    // SAFETY: geteuid takes no arguments.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIP another_users_stale_store_is_never_collected: needs root to chown");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let stale = make_store(root.path(), stamp("tests", "0", "fake"), 2);
    std::os::unix::fs::chown(&stale, Some(65534), None).unwrap();
    let (cache, _) = open(root.path(), ours());
    assert_eq!(cache.disk_counters().unwrap().stores_removed, 0);
    assert!(stale.join("STAMP").exists());
    assert_eq!(files_under(&stale.join("entries")).len(), 2);
}

#[test]
fn a_store_that_cannot_be_recreated_leaves_the_cache_in_memory_without_more_waits() {
    let root = tempfile::tempdir().unwrap();
    let (cache, log) = open(root.path(), ours());
    cache.save(nkey(1), noisy(1, 300), None).unwrap();
    cache.flush_disk();
    // The folder is deleted, and recreated by another process that then freezes holding it.
    let store = root.path().join(ours().dir_name());
    std::fs::remove_dir_all(&store).unwrap();
    std::fs::create_dir_all(store.join("entries")).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::File::create(store.join("in-use.lock")).unwrap();
    let _frozen = FrozenHolder::new(&store.join("in-use.lock"), true);
    let start = Instant::now();
    save_all(&cache, 2..40, 300);
    let took = start.elapsed();
    eprintln!("recreation blocked by a frozen process: 38 saves + flush in {took:?}");
    assert!(!cache.disk_enabled());
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("could not be recreated"))
    );
    // One bounded wait, not one per job.
    assert!(took < disk::OPEN_LOCK_WAIT * 3, "{took:?}");
    assert_eq!(cache.len(), 39, "the cache keeps serving from memory");
}

#[test]
fn a_folder_at_a_log_or_evict_lock_is_left_alone_and_the_store_stays_in_use() {
    for side in ["lru.log", "hot.list", "compiled.list", "evict.lock"] {
        let root = tempfile::tempdir().unwrap();
        let store = make_store(root.path(), ours(), 2);
        let _ = std::fs::remove_file(store.join(side));
        std::fs::create_dir(store.join(side)).unwrap();
        std::fs::write(store.join(side).join("users-file"), b"precious").unwrap();
        let (mut c, _) = config(root.path(), ours());
        c.budget_bytes = Some(32 * 1024);
        let cache = open_with(c, 8 << 20);
        assert!(cache.disk_enabled(), "{side}: {:?}", cache.disk_condition());
        for i in 10..30 {
            cache.save(nkey(i), noisy(i, 2000), None).unwrap();
            let _ = cache.load(&nkey(i), None);
        }
        cache.mark_hot(&[nkey(10)]);
        // No keys: nothing to append, so nothing that can fail.
        cache.mark_hot(&[]);
        compile_shaders(&cache, 0..3);
        cache.flush_disk();
        assert!(cache.disk_enabled(), "{side}: {:?}", cache.disk_condition());
        let counters = cache.disk_counters().unwrap();
        assert_eq!(counters.writes, 20, "{side}");
        // The appends to a file that is a folder fail, and each is counted.
        match side {
            "evict.lock" => assert_eq!(counters.record_errors, 0, "{side}: {counters:?}"),
            // One batch of hot marks, one of compiled shaders: one count each.
            "hot.list" | "compiled.list" => {
                assert_eq!(counters.record_errors, 1, "{side}: {counters:?}");
            }
            _ => assert!(counters.record_errors >= 1, "{side}: {counters:?}"),
        }
        cache.clear();
        cache.flush_disk();
        drop(cache);
        assert_eq!(
            std::fs::read(store.join(side).join("users-file")).unwrap(),
            b"precious",
            "{side}"
        );
    }
}
