//! The persistence split without GL: `ProgramCache::insert_entry`'s checks (each one, and every
//! bit flip and truncation of real entries), the sink's thread rules (bounded queue, never after
//! drop, use coalescing), and the browser-side `disk::Store` (put, touch, order, remove, clear,
//! stats, budget, another stamp, hostile folders, the stamp's text form). The two-process proof
//! on the real driver is `tests/persist_sandbox.rs`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use program_cache::disk::{
    self, EntryError, FORMAT_VERSION, HEADER_LEN, MAX_PAYLOAD, PutOutcome, Store, StoreConfig,
    StoreError,
};
use program_cache::{
    CacheConfig, CachedProgram, CompatibilityStamp, CompileStatus, DriverIdentity, InsertError,
    MemoryPressure, PersistConfig, PersistSink, ProgramCache, ProgramKey, ShaderHash,
};
use test_support::programs::{key, program, shader};

fn stamp(product: &str) -> CompatibilityStamp {
    let driver = DriverIdentity {
        gl_vendor: "Test".into(),
        gl_renderer: "persist".into(),
        gl_version: "4.6 test".into(),
        context: "OpenGL core profile".into(),
        vendor_id: Some(0x1234),
        device_id: Some(0x5678),
        driver_build_id: Some("build-1".into()),
    };
    CompatibilityStamp::new(driver, product, "1")
}

/// Counts every call; optionally slow, or blocked until released.
#[derive(Default)]
struct Sink {
    saved: Mutex<Vec<(ProgramKey, Vec<u8>)>>,
    used: Mutex<Vec<ProgramKey>>,
    rejected: Mutex<Vec<ProgramKey>>,
    compiled: Mutex<Vec<ShaderHash>>,
    store_rejected: AtomicU64,
    calls: AtomicU64,
    /// Set by the test once the cache's drop has returned.
    cache_dropped: AtomicBool,
    calls_after_drop: AtomicU64,
    delay: Option<Duration>,
    /// While set, `entry_saved` waits (at most 10 s) until it is cleared.
    block: AtomicBool,
}

impl Sink {
    fn call(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.cache_dropped.load(Ordering::SeqCst) {
            self.calls_after_drop.fetch_add(1, Ordering::SeqCst);
        }
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
    }
}

impl PersistSink for Sink {
    fn entry_saved(&self, key: &ProgramKey, entry: &[u8]) {
        self.call();
        let start = Instant::now();
        while self.block.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.saved.lock().unwrap().push((*key, entry.to_vec()));
    }
    fn entry_used(&self, key: &ProgramKey) {
        self.call();
        self.used.lock().unwrap().push(*key);
    }
    fn entry_rejected(&self, key: &ProgramKey) {
        self.call();
        self.rejected.lock().unwrap().push(*key);
    }
    fn store_rejected(&self) {
        self.call();
        self.store_rejected.fetch_add(1, Ordering::SeqCst);
    }
    fn shaders_compiled(&self, hashes: &[ShaderHash]) {
        self.call();
        self.compiled.lock().unwrap().extend_from_slice(hashes);
    }
}

fn cache_with(
    sink: Arc<Sink>,
    budget: usize,
    tune: impl FnOnce(&mut PersistConfig),
) -> Arc<ProgramCache> {
    let mut config = PersistConfig::new(stamp("tests"), sink);
    tune(&mut config);
    ProgramCache::builder(CacheConfig::with_budget(budget))
        .persist(config)
        .build()
}

fn entry(n: u8, len: usize, compress: bool) -> (ProgramKey, CachedProgram, Vec<u8>) {
    let p = program(n, n.wrapping_add(100), len);
    let bytes = disk::encode(
        &key(n),
        &p,
        &stamp("tests").hash(),
        1_700_000_000_000,
        compress,
    );
    (key(n), p, bytes)
}

/// Rewrites the header CRC after a header edit, so the check under test is the one reached.
fn reseal(bytes: &mut [u8]) {
    let crc = crc32c(&bytes[..HEADER_LEN - 4]);
    bytes[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
}

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

// ---------------------------------------------------------------------------------------------
// insert_entry

/// What a case's refusal must be.
type Expect = fn(&InsertError) -> bool;

#[test]
fn insert_entry_refuses_each_check_and_inserts_nothing() {
    let sink = Arc::new(Sink::default());
    let cache = cache_with(sink.clone(), 1 << 20, |_| {});
    let (k, p, good) = entry(1, 300, false);
    let hash = stamp("tests").hash();
    let mut cases: Vec<(&str, Vec<u8>, Expect)> = Vec::new();

    let too_large = vec![0u8; HEADER_LEN + MAX_PAYLOAD as usize + 1];
    cases.push(("too large", too_large, |e| {
        matches!(e, InsertError::Invalid(EntryError::TooLarge(_)))
    }));
    cases.push(("truncated header", good[..HEADER_LEN - 1].to_vec(), |e| {
        matches!(e, InsertError::Invalid(EntryError::TruncatedHeader(95)))
    }));
    let mut b = good.clone();
    b[40] ^= 1; // a key byte, header CRC not resealed
    cases.push(("header checksum", b, |e| {
        *e == InsertError::Invalid(EntryError::HeaderChecksum)
    }));
    let mut b = good.clone();
    b[0] = b'X';
    reseal(&mut b);
    cases.push(("magic", b, |e| {
        *e == InsertError::Invalid(EntryError::BadMagic)
    }));
    let mut b = good.clone();
    b[8..10].copy_from_slice(&((FORMAT_VERSION + 1) as u16).to_le_bytes());
    reseal(&mut b);
    cases.push(("version", b, |e| {
        matches!(e, InsertError::Invalid(EntryError::Version(_)))
    }));
    let mut b = good.clone();
    b[10..12].copy_from_slice(&95u16.to_le_bytes());
    reseal(&mut b);
    cases.push(("header length", b, |e| {
        matches!(e, InsertError::Invalid(EntryError::HeaderLen(95)))
    }));
    let mut b = good.clone();
    b[12] |= 0x80;
    reseal(&mut b);
    cases.push(("flags", b, |e| {
        matches!(e, InsertError::Invalid(EntryError::Flags(_)))
    }));
    let foreign = disk::encode(&k, &p, &stamp("another product").hash(), 0, false);
    cases.push(("stamp", foreign, |e| {
        *e == InsertError::Invalid(EntryError::ForeignStamp)
    }));
    let mut b = good.clone();
    b.push(0);
    cases.push(("payload length", b, |e| {
        matches!(e, InsertError::Invalid(EntryError::PayloadLength { .. }))
    }));
    let mut b = good.clone();
    let last = b.len() - 1;
    b[last] ^= 0x10;
    cases.push(("payload checksum", b, |e| {
        *e == InsertError::Invalid(EntryError::PayloadChecksum)
    }));
    // A compressed entry declaring more than 255 bytes per stored byte.
    let (_, _, mut b) = entry(2, 300, true);
    let stored = u64::from_le_bytes(b[64..72].try_into().unwrap());
    b[72..80].copy_from_slice(&(stored * 256).to_le_bytes());
    reseal(&mut b);
    cases.push(("decompression bound", b, |e| {
        matches!(e, InsertError::Invalid(EntryError::Decompress(_)))
    }));
    // Valid checksums around a payload postcard cannot decode.
    let mut b = good[..HEADER_LEN].to_vec();
    let payload = [0xFFu8; 16];
    b[64..72].copy_from_slice(&16u64.to_le_bytes());
    b[72..80].copy_from_slice(&16u64.to_le_bytes());
    b[80..84].copy_from_slice(&crc32c(&payload).to_le_bytes());
    reseal(&mut b);
    b.extend_from_slice(&payload);
    cases.push(("decode", b, |e| {
        matches!(e, InsertError::Invalid(EntryError::Decode(_)))
    }));
    let empty = disk::encode(&k, &program(1, 2, 0), &hash, 0, true);
    cases.push(("empty binary", empty, |e| *e == InsertError::EmptyBinary));

    for (what, bytes, expected) in &cases {
        let got = cache.insert_entry(bytes);
        match got {
            Err(e) => assert!(expected(&e), "{what}: refused, but as {e:?}"),
            Ok(k) => panic!("{what}: inserted as {k}"),
        }
        assert!(cache.is_empty(), "{what}: something was inserted");
    }
    let c = cache.persist_counters().unwrap();
    assert_eq!((c.inserted, c.insert_refused), (0, cases.len() as u64));

    // No room: the budget in force, and critical pressure.
    let small = cache_with(Arc::new(Sink::default()), 200, |_| {});
    assert!(matches!(
        small.insert_entry(&good),
        Err(InsertError::NoRoom { budget: 200, .. })
    ));
    cache.set_memory_pressure(MemoryPressure::Critical);
    assert!(matches!(
        cache.insert_entry(&good),
        Err(InsertError::NoRoom { .. })
    ));
    cache.set_memory_pressure(MemoryPressure::None);

    // Without persistence there is no stamp to check against.
    let plain = ProgramCache::builder(CacheConfig::with_budget(1 << 20)).build();
    assert_eq!(plain.insert_entry(&good), Err(InsertError::NotConfigured));
    assert!(plain.is_empty());

    // The good entry goes in, as a disk-loaded program would, and only once.
    assert_eq!(cache.insert_entry(&good), Ok(k));
    assert_eq!(*cache.peek(&k).unwrap(), p);
    assert_eq!(cache.insert_entry(&good), Ok(k));
    assert_eq!(cache.len(), 1);
    assert_eq!(cache.shader_refcount(&p.vertex_shader), 1);
    // An inserted entry is not sent back as a save.
    cache.flush_persist();
    assert!(sink.saved.lock().unwrap().is_empty());
}

/// Every single-bit flip and every truncation of a real entry (compressed and not) is refused,
/// or, where it touches no checked byte, inserts exactly the original program: never a panic,
/// never a different program.
#[test]
fn every_bit_flip_and_truncation_is_refused_or_harmless() {
    let cache = cache_with(Arc::new(Sink::default()), 64 << 20, |_| {});
    let mut refused = 0u64;
    let mut harmless = 0u64;
    for compress in [false, true] {
        let (k, p, good) = entry(7, 200, compress);
        let mut check = |bytes: &[u8], what: &str| match cache.insert_entry(bytes) {
            Err(_) => refused += 1,
            Ok(got) => {
                assert_eq!(got, k, "{what}: inserted under another key");
                assert_eq!(*cache.peek(&k).unwrap(), p, "{what}: another program");
                assert!(cache.evict(&k));
                harmless += 1;
            }
        };
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut b = good.clone();
                b[i] ^= 1 << bit;
                check(&b, &format!("flip byte {i} bit {bit} (lz4 {compress})"));
            }
        }
        for len in 0..good.len() {
            check(
                &good[..len],
                &format!("truncated to {len} (lz4 {compress})"),
            );
        }
        for extra in [1usize, 7, 4096] {
            let mut b = good.clone();
            b.resize(good.len() + extra, 0);
            check(&b, &format!("{extra} bytes appended"));
        }
        assert!(cache.is_empty());
        assert_eq!(cache.insert_entry(&good), Ok(k));
        assert!(cache.evict(&k));
    }
    eprintln!("mutations: {refused} refused, {harmless} harmless");
    // Both CRCs cover every byte: nothing is harmless in this format.
    assert_eq!(harmless, 0);
    assert!(
        refused > 4_000,
        "every flip and truncation of two entries: {refused}"
    );
}

// ---------------------------------------------------------------------------------------------
// The sink's thread

#[test]
fn the_sink_gets_each_save_as_a_valid_entry_off_the_callers_thread() {
    let caller = std::thread::current().id();
    let seen = Arc::new(Mutex::new(Vec::new()));
    struct ThreadSink(Arc<Mutex<Vec<std::thread::ThreadId>>>);
    impl PersistSink for ThreadSink {
        fn entry_saved(&self, _: &ProgramKey, _: &[u8]) {
            self.0.lock().unwrap().push(std::thread::current().id());
        }
        fn entry_used(&self, _: &ProgramKey) {}
        fn entry_rejected(&self, _: &ProgramKey) {}
        fn store_rejected(&self) {}
    }
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 20))
        .persist(PersistConfig::new(
            stamp("tests"),
            Arc::new(ThreadSink(seen.clone())),
        ))
        .build();
    cache.save(key(1), program(1, 2, 100), None).unwrap();
    cache.flush_persist();
    let threads = seen.lock().unwrap().clone();
    assert_eq!(threads.len(), 1);
    assert_ne!(threads[0], caller);

    // The bytes are the entry another cache of the stamp inserts as the same program.
    let sink = Arc::new(Sink::default());
    let a = cache_with(sink.clone(), 1 << 20, |_| {});
    a.save(key(3), program(3, 4, 500), None).unwrap();
    a.flush_persist();
    let saved = sink.saved.lock().unwrap().clone();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].0, key(3));
    let b = cache_with(Arc::new(Sink::default()), 1 << 20, |_| {});
    assert_eq!(b.insert_entry(&saved[0].1), Ok(key(3)));
    assert_eq!(*b.peek(&key(3)).unwrap(), program(3, 4, 500));
    let c = a.persist_counters().unwrap();
    assert_eq!((c.saved, c.sent, c.dropped), (1, 1, 0));
}

#[test]
fn the_sink_is_never_called_after_the_cache_is_dropped() {
    let sink = Arc::new(Sink {
        delay: Some(Duration::from_millis(2)),
        ..Sink::default()
    });
    let cache = cache_with(sink.clone(), 64 << 20, |c| c.queue = 1024);
    for n in 0..100u8 {
        cache.save(key(n), program(n, 200, 64), None).unwrap();
    }
    let dropped = cache.persist_counters().unwrap().dropped;
    drop(cache);
    sink.cache_dropped.store(true, Ordering::SeqCst);
    let at_drop = sink.calls.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(sink.calls_after_drop.load(Ordering::SeqCst), 0);
    assert_eq!(sink.calls.load(Ordering::SeqCst), at_drop);
    // What was queued before the drop was delivered by it (nothing lost but the dropped).
    assert_eq!(at_drop, 100 - dropped);
    assert_eq!(dropped, 0);
}

#[test]
fn a_full_queue_drops_and_counts_and_never_waits_for_the_host() {
    let sink = Arc::new(Sink::default());
    sink.block.store(true, Ordering::SeqCst);
    let cache = cache_with(sink.clone(), 64 << 20, |c| c.queue = 4);
    let mut slowest = Duration::ZERO;
    for n in 0..40u8 {
        let start = Instant::now();
        cache.save(key(n), program(n, 200, 64), None).unwrap();
        slowest = slowest.max(start.elapsed());
        // Give the thread time to take the first save and block in the sink.
        if n == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let c = cache.persist_counters().unwrap();
    eprintln!("blocked sink: {c:?}, slowest save {slowest:?}");
    // One in the sink, four queued, the rest dropped.
    assert_eq!(c.saved, 5);
    assert_eq!(c.dropped, 35);
    assert!(
        slowest < Duration::from_secs(1),
        "a save waited {slowest:?}"
    );
    sink.block.store(false, Ordering::SeqCst);
    cache.flush_persist();
    let c = cache.persist_counters().unwrap();
    assert_eq!((c.sent, c.saved + c.dropped), (5, 40));
    assert_eq!(sink.saved.lock().unwrap().len(), 5);
}

#[test]
fn uses_reach_the_sink_once_per_key_per_interval() {
    let sink = Arc::new(Sink::default());
    let cache = cache_with(sink.clone(), 1 << 20, |_| {});
    cache.save(key(1), program(1, 2, 64), None).unwrap();
    cache.save(key(2), program(3, 4, 64), None).unwrap();
    for _ in 0..50 {
        cache.load(&key(1), None).unwrap();
        cache.load(&key(2), None).unwrap();
    }
    assert!(cache.load(&key(9), None).is_none());
    cache.flush_persist();
    let mut used = sink.used.lock().unwrap().clone();
    used.sort();
    assert_eq!(used, [key(1), key(2)]);
    assert_eq!(cache.persist_counters().unwrap().used, 2);

    let sink = Arc::new(Sink::default());
    let every = cache_with(sink.clone(), 1 << 20, |c| c.use_interval = Duration::ZERO);
    every.save(key(1), program(1, 2, 64), None).unwrap();
    for _ in 0..10 {
        every.load(&key(1), None).unwrap();
    }
    every.flush_persist();
    assert_eq!(sink.used.lock().unwrap().len(), 10);
}

// ---------------------------------------------------------------------------------------------
// The browser-side store

fn store(dir: &Path) -> Store {
    Store::open(StoreConfig::new(dir, stamp("tests"))).expect("the store opens")
}

#[test]
fn store_puts_touches_streams_most_recent_first_removes_and_clears() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let entries: Vec<_> = (1..=4).map(|n| entry(n, 300 + n as usize, true)).collect();
    for (k, _, bytes) in &entries {
        assert_eq!(s.put(bytes).unwrap(), PutOutcome::Written { key: *k });
        // Publish times (ms) are distinct.
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        s.put(&entries[0].2).unwrap(),
        PutOutcome::AlreadyPresent { key: key(1) }
    );
    let order = |s: &Store| s.entries().map(|(k, _)| k).collect::<Vec<_>>();
    assert_eq!(order(&s), [key(4), key(3), key(2), key(1)]);
    // Every streamed entry is the bytes that were put.
    for (k, bytes) in s.entries() {
        let (_, _, put) = entries.iter().find(|(key, _, _)| *key == k).unwrap();
        assert_eq!(&bytes, put);
    }
    s.touch(&key(2));
    std::thread::sleep(Duration::from_millis(5));
    s.touch(&key(1));
    assert_eq!(order(&s), [key(1), key(2), key(4), key(3)]);
    // The order survives the process: a new store of the folder sees the same records.
    drop(s);
    let s = store(dir.path());
    assert_eq!(order(&s), [key(1), key(2), key(4), key(3)]);

    assert!(s.remove(&key(4)).unwrap());
    assert!(!s.remove(&key(4)).unwrap());
    assert_eq!(order(&s), [key(1), key(2), key(3)]);
    let st = s.stats();
    assert_eq!((st.entries, st.removed, st.touches, st.puts), (3, 1, 0, 0));
    assert!(st.bytes >= 3 * 4096, "allocated blocks are counted: {st:?}");
    assert_eq!(st.streamed, 4 + 3);

    assert_eq!(s.clear().unwrap(), 3);
    assert_eq!(s.entries().count(), 0);
    let st = s.stats();
    assert_eq!(st.entries, 0);
    assert_eq!(st.disk.evictions, 3);
    // A cleared store takes puts again.
    assert!(matches!(
        s.put(&entries[0].2),
        Ok(PutOutcome::Written { .. })
    ));
}

#[test]
fn store_refuses_entries_of_another_stamp_and_bad_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    let p = program(1, 2, 100);
    let foreign = disk::encode(&key(1), &p, &stamp("another product").hash(), 0, true);
    assert!(matches!(
        s.put(&foreign),
        Err(StoreError::Invalid(EntryError::ForeignStamp))
    ));
    let (_, _, good) = entry(1, 100, true);
    assert!(matches!(
        s.put(&good[..50]),
        Err(StoreError::Invalid(EntryError::TruncatedHeader(50)))
    ));
    let mut b = good.clone();
    let last = b.len() - 1;
    b[last] ^= 1;
    assert!(matches!(
        s.put(&b),
        Err(StoreError::Invalid(EntryError::PayloadChecksum))
    ));
    assert_eq!(s.entries().count(), 0);
    let st = s.stats();
    assert_eq!((st.puts, st.refused, st.disk.writes), (3, 3, 0));
    // No file was created for any of them.
    let names = std::fs::read_dir(s.path().join("entries")).unwrap().count();
    assert_eq!(names, 0);
}

#[test]
fn store_stays_within_its_budget_evicting_least_recently_used() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = StoreConfig::new(dir.path(), stamp("tests"));
    config.budget_bytes = 64 << 10;
    let s = Store::open(config).unwrap();
    // Incompressible binaries of ~6 KiB: two blocks each.
    for n in 0..40u8 {
        let mut p = program(n, 200, 0);
        p.binary.bytes = (0..6000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(u32::from(n)) >> 13) as u8)
            .collect();
        let bytes = disk::encode(&key(n), &p, &stamp("tests").hash(), 0, true);
        s.put(&bytes).unwrap();
        if n == 2 {
            // Keep the first two recently used: the eviction takes others.
            s.touch(&key(0));
            s.touch(&key(1));
            s.flush();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let st = s.stats();
    eprintln!("budgeted store: {st:?}");
    assert!(st.bytes <= 64 << 10, "{st:?}");
    assert!(st.disk.evictions > 0);
    let left: Vec<ProgramKey> = s.entries().map(|(k, _)| k).collect();
    assert!(left.contains(&key(39)));
    assert!(
        !left.contains(&key(2)),
        "the least recently used left first"
    );
}

#[test]
fn store_never_follows_a_link_at_entries_nor_opens_a_fifo() {
    // A symbolic link at entries/: the store refuses the folder; the link's target is untouched.
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("precious"), b"user data").unwrap();
    let dir = root.path().join(stamp("tests").dir_name());
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.join("entries")).unwrap();
    match Store::open(StoreConfig::new(root.path(), stamp("tests"))) {
        Err(StoreError::Open { .. }) => {}
        other => panic!("a link at entries/ was used: {other:?}"),
    }
    let names: Vec<_> = std::fs::read_dir(outside.path()).unwrap().collect();
    assert_eq!(names.len(), 1);
    assert_eq!(
        std::fs::read(outside.path().join("precious")).unwrap(),
        b"user data"
    );

    // A FIFO named like an entry: removed at open without hanging; one planted later is skipped
    // by the stream, never opened for reading.
    let root = tempfile::tempdir().unwrap();
    let s = store(root.path());
    let (_, _, bytes) = entry(1, 100, true);
    s.put(&bytes).unwrap();
    let entries_dir = s.path().join("entries");
    drop(s);
    mkfifo(&entries_dir.join(key(2).to_hex()));
    let (tx, rx) = std::sync::mpsc::channel();
    let root_path = root.path().to_path_buf();
    std::thread::spawn(move || {
        let s = store(&root_path);
        let odd = s.stats().disk.odd_removed;
        mkfifo(&s.path().join("entries").join(key(3).to_hex()));
        let keys: Vec<ProgramKey> = s.entries().map(|(k, _)| k).collect();
        let _ = tx.send((odd, keys));
    });
    let (odd, keys) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the store hung on a FIFO");
    assert_eq!(odd, 1);
    assert_eq!(keys, [key(1)]);
}

fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path that outlives the call.
    let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(r, 0, "mkfifo {}", path.display());
}

#[test]
fn a_damaged_entry_on_disk_is_never_streamed_and_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path());
    for n in 1..=3 {
        s.put(&entry(n, 200, true).2).unwrap();
    }
    let victim = s.path().join("entries").join(key(2).to_hex());
    let mut b = std::fs::read(&victim).unwrap();
    let last = b.len() - 1;
    b[last] ^= 0x40;
    std::fs::write(&victim, &b).unwrap();
    let keys: Vec<ProgramKey> = s.entries().map(|(k, _)| k).collect();
    assert!(!keys.contains(&key(2)));
    assert_eq!(keys.len(), 2);
    assert!(!victim.exists());
    assert_eq!(s.stats().disk.rejected_entries, 1);
}

#[test]
fn the_stamp_text_round_trips_every_field() {
    let odd = CompatibilityStamp {
        gl_vendor: "Vendor: with \\ backslash\nand newline".into(),
        gl_renderer: "Renderer\r\nline: two ünïcödé".into(),
        gl_version: String::new(),
        context: "  spaces  ".into(),
        vendor_id: None,
        device_id: Some(u32::MAX),
        driver_build_id: Some(String::new()),
        host_product: "none".into(),
        host_version: "some:1".into(),
        format_version: 77,
        pointer_width: 32,
    };
    for s in [
        stamp("tests"),
        odd.clone(),
        CompatibilityStamp {
            driver_build_id: Some("none".into()),
            vendor_id: Some(0),
            ..odd
        },
    ] {
        let text = s.describe();
        assert_eq!(
            CompatibilityStamp::parse(&text).as_ref(),
            Some(&s),
            "{text}"
        );
        assert_eq!(CompatibilityStamp::parse(&text).unwrap().hash(), s.hash());
    }
    // A damaged text is refused (the hash lines no longer match).
    let text = stamp("tests").describe().replace("persist", "persisT");
    assert_eq!(CompatibilityStamp::parse(&text), None);
}

// ---------------------------------------------------------------------------------------------
// compile statuses through the sink

/// A shader that compiled but that no saved entry records (the good shader of a program whose
/// other shader failed) goes to the sink in a batch (at `flush_persist` and at drop), is kept
/// by the browser side's store, and, handed back at the next start, is known to compile there:
/// the warm start compiles none of them. A shader a saved program records is not sent (its
/// entry holds it), nor is one the next start was handed.
#[test]
fn compiled_shaders_go_through_the_sink_and_a_store_into_the_next_start() {
    let sink = Arc::new(Sink::default());
    let a = cache_with(sink.clone(), 1 << 20, |_| {});
    a.shader_compile_succeeded(shader(1));
    a.shader_compile_succeeded(shader(2));
    // A saved program records shader 2 (vertex) and 102 (fragment).
    a.save(key(2), program(2, 102, 64), None).unwrap();
    a.flush_persist();
    assert_eq!(*sink.compiled.lock().unwrap(), [shader(1)]);
    assert_eq!(a.persist_counters().unwrap().compiled, 1);
    // The last batch goes at drop.
    a.shader_compile_succeeded(shader(3));
    drop(a);
    assert_eq!(*sink.compiled.lock().unwrap(), [shader(1), shader(3)]);

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(StoreConfig::new(dir.path(), stamp("tests"))).unwrap();
    store.mark_compiled(&sink.compiled.lock().unwrap());
    assert_eq!(store.compiled_shaders(), [shader(1), shader(3)]);
    drop(store);
    // Another process's store sees what this one kept.
    let store = Store::open(StoreConfig::new(dir.path(), stamp("tests"))).unwrap();
    let kept = store.compiled_shaders();
    assert_eq!(kept, [shader(1), shader(3)]);

    let next_sink = Arc::new(Sink::default());
    let b = cache_with(next_sink.clone(), 1 << 20, |_| {});
    assert_eq!(b.shader_compile_status(&shader(1)), CompileStatus::Unknown);
    b.insert_compiled(&kept);
    for h in &kept {
        assert_eq!(b.shader_compile_status(h), CompileStatus::Success);
    }
    // Compiling it again changes nothing and sends nothing.
    b.shader_compile_succeeded(shader(1));
    b.flush_persist();
    drop(b);
    assert!(next_sink.compiled.lock().unwrap().is_empty());
    // A clear of the store empties the list with the entries.
    store.clear().unwrap();
    assert!(store.compiled_shaders().is_empty());
}

/// A hostile or runaway list is bounded on both sides: the store appends only as many of the
/// last hashes as its `compiled.list` keeps (16 Ki at the default budget), and the next start
/// reads only as many of the last as it keeps statuses for (4,096 by default).
#[test]
fn huge_compiled_lists_are_cut_to_their_newest_hashes_on_both_sides() {
    let numbered = |n: u32| {
        let mut h = [0x5A; 20];
        h[..4].copy_from_slice(&n.to_le_bytes());
        ShaderHash(h)
    };
    let many: Vec<ShaderHash> = (0..100_000).map(numbered).collect();
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    // Another process holds evict.lock, so no compaction can cut the list: the append itself
    // must be bounded.
    let held = {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::create(store.path().join("evict.lock")).unwrap();
        // SAFETY: a live descriptor of this File.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(r, 0);
        f
    };
    store.mark_compiled(&many);
    let list = store.path().join("compiled.list");
    assert_eq!(std::fs::metadata(&list).unwrap().len(), 16_384 * 24);
    drop(held);
    let kept = store.compiled_shaders();
    assert_eq!(kept, many[100_000 - 16_384..]);

    let cache = cache_with(Arc::new(Sink::default()), 1 << 20, |_| {});
    cache.insert_compiled(&kept);
    let first_kept = 100_000 - 4_096;
    assert_eq!(
        cache.shader_compile_status(&numbered(first_kept)),
        CompileStatus::Success
    );
    assert_eq!(
        cache.shader_compile_status(&numbered(first_kept - 1)),
        CompileStatus::Unknown
    );
    assert_eq!(
        cache.shader_compile_status(&numbered(99_999)),
        CompileStatus::Success
    );
}
