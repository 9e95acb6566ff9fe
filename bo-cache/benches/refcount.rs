//! The buffer-object cache vs locked maps, side by side in one process, same workloads, runs
//! interleaved (ours, every baseline, ours, ...), medians of the runs. Workloads (the notes'
//! W1-W7), each threaded one at every thread count (default 1, 2, 4;
//! `BO_CACHE_BENCH_THREADS=1,2,4,8,16` sets the list) and, where keys matter, over dense
//! handles 1..N and sparse random handles in [1, 2^31):
//!
//! * W1 import-hit + release of a non-last reference, over the N preloaded objects.
//! * W2 clone + release of non-last references over the N preloaded objects.
//! * W3 import-miss + last release, LIFO churn: each thread imports its K private buffers
//!   (misses) and releases them in reverse order (last releases); measures insert/remove.
//! * W4 the same churn (dense) on [`MemfdKernel`] (sealed memfds) vs the raw syscall floor: the
//!   kernel calls the cache makes for one import-miss + last release (`fd_to_handle`, `size`
//!   = two `lseek`s, `identity` = `fstat`, `gem_close`), made directly on a `MemfdKernel`
//!   without the cache. At 2 or more threads the cache makes those calls inside its one import
//!   critical section (the protocol's), where the floor is serialized only by `MemfdKernel`'s
//!   own lock (held by `fd_to_handle` and `gem_close`, not by the `lseek`s and the `fstat`).
//! * W5 lookup-heavy: 95% lookup by handle + release, 5% churn (import-miss + last release of a
//!   thread-private buffer).
//! * W6 absent-key lookups at high load: the table holds 1792 objects (a std `HashMap` of
//!   2048 buckets at its 7/8 maximum load), keys random in [1, 2^31) and absent.
//! * W7 memory of the table for 1024 dense and 1024 sparse handles: ours is
//!   `stats().table_bytes` (exact: every node allocated; the slots hold the objects' state), a
//!   baseline is an estimate from its capacity plus its `Arc<Entry>` allocations.
//!
//! Kernel for all but W4: [`SynthKernel`], defined here, so the figures are the cache's and not
//! the syscalls': `fd_to_handle`, `identity` and `size` are lookups in a table indexed by the
//! fd number, `gem_close` does nothing. Ours is `BoCache` (identity check on, as by default)
//! over it; every baseline calls the same kernel in the same places (identity check on a hit
//! included). Sparse caches of ours get a 64 MiB table cap (the default 16 MiB cannot hold
//! W6's 1792 sparse handles; the cap does not change the hot paths).
//!
//! Baselines, each an `Arc<Entry>` per handle behind one `Mutex`:
//! B1 `HashMap` with std SipHash, B2 the same with an identity hasher (the key is the hash),
//! B3 the same with `foldhash` (fast, an FxHash-like multiply-mix; `rustc-hash` is not a
//! workspace dependency), B4 `Vec<Option<Arc<Entry>>>` indexed by handle (dense keys only: a
//! sparse handle near 2^31 would need a 16 GiB vector). Each in two variants: `locked` (every
//! count change under the mutex) and `dnot` (clone and non-final release lock-free, "decrement
//! unless one", as ours).
//!
//! `cargo bench -p gpusvc-bo-cache --bench refcount [-- FILTER...]`; prints the table and writes
//! `target/bench/bo_cache.json` (not when filtered). FILTERs keep the workloads whose name
//! contains one of them (`W1`, `sparse`, ...); `BO_CACHE_BENCH_VARIANTS=ours,B3` keeps the
//! variants whose name contains one of the comma-separated parts; `BO_CACHE_BENCH_OPS` and
//! `BO_CACHE_BENCH_RUNS` override the counts (for profiling under callgrind). Without
//! `--bench` (as `cargo test --all-targets` runs it) it only runs a smoke pass with tiny counts
//! and writes nothing.

use bench_support as support;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Instant;

use bo_cache::{Bo, BoCache, CacheConfig, Errno, Identity, ImportDesc, Kernel, MemfdKernel};
use support::Row;

/// Objects preloaded for W1, W2, W5 and W7.
const N: usize = 1024;
/// Objects preloaded for W6: 7/8 of 2048, the most a std `HashMap` holds before it grows.
const N_HIGH_LOAD: usize = 1792;
/// Private buffers per thread for the W3/W4 churn (imported, then released in reverse order).
const K: usize = 4;
/// The largest sparse handle (exclusive): handles are `< 2^31`.
const SPARSE_END: u64 = 1 << 31;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Dist {
    /// Handles 1, 2, 3, ... in import order.
    Dense,
    /// Distinct random handles in [1, 2^31).
    Sparse,
}

impl Dist {
    fn name(self) -> &'static str {
        match self {
            Dist::Dense => "dense",
            Dist::Sparse => "sparse",
        }
    }
}

/// xorshift64: cheap, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A handle in [1, 2^31).
    fn handle(&mut self) -> u32 {
        (self.next() % (SPARSE_END - 1)) as u32 + 1
    }
}

/// Fake DRM file: everything is a table lookup by fd number.
#[derive(Debug)]
struct SynthKernel {
    /// fd number -> handle (0: not a buffer).
    handles: Vec<u32>,
}

impl SynthKernel {
    fn entry(&self, fd: BorrowedFd<'_>) -> Result<u32, Errno> {
        match self.handles.get(fd.as_raw_fd() as usize) {
            Some(&h) if h != 0 => Ok(h),
            _ => Err(Errno::BADF),
        }
    }
}

impl Kernel for SynthKernel {
    fn fd_to_handle(&self, dmabuf: BorrowedFd<'_>) -> Result<NonZeroU32, Errno> {
        self.entry(dmabuf)
            .map(|h| NonZeroU32::new(h).expect("nonzero"))
    }
    fn gem_close(&self, handle: NonZeroU32) -> Result<(), Errno> {
        black_box(handle);
        Ok(())
    }
    fn handle_to_fd(&self, _handle: NonZeroU32, _flags: u32) -> Result<OwnedFd, Errno> {
        Err(Errno::NOSYS)
    }
    fn size(&self, dmabuf: BorrowedFd<'_>) -> Result<u64, Errno> {
        self.entry(dmabuf).map(|_| 4096)
    }
    fn identity(&self, dmabuf: BorrowedFd<'_>) -> Result<Identity, Errno> {
        self.entry(dmabuf).map(|h| Identity {
            dev: 1,
            ino: u64::from(h),
        })
    }
}

/// The buffers of one cache: `shared` (handles `shared_handles`) and `K` private ones per
/// thread. fds are dups of one `/dev/null` open; only their numbers matter to [`SynthKernel`].
struct Buffers {
    shared: Vec<OwnedFd>,
    shared_handles: Vec<u32>,
    private: Vec<Vec<OwnedFd>>,
}

fn buffers(dist: Dist, shared: usize, threads: usize) -> (Buffers, SynthKernel) {
    let null: OwnedFd = File::open("/dev/null").expect("/dev/null").into();
    let dup = || null.try_clone().expect("dup");
    let shared_fds: Vec<OwnedFd> = (0..shared).map(|_| dup()).collect();
    let private: Vec<Vec<OwnedFd>> = (0..threads)
        .map(|_| (0..K).map(|_| dup()).collect())
        .collect();
    let all: Vec<&OwnedFd> = shared_fds.iter().chain(private.iter().flatten()).collect();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut seen = HashSet::new();
    let numbers: Vec<u32> = match dist {
        Dist::Dense => (1..=all.len() as u32).collect(),
        Dist::Sparse => std::iter::repeat_with(|| rng.handle())
            .filter(|h| seen.insert(*h))
            .take(all.len())
            .collect(),
    };
    let max = all.iter().map(|f| f.as_raw_fd()).max().unwrap_or(0) as usize;
    let mut handles = vec![0u32; max + 1];
    for (f, &h) in all.iter().zip(&numbers) {
        handles[f.as_raw_fd() as usize] = h;
    }
    let b = Buffers {
        shared: shared_fds,
        shared_handles: numbers[..shared].to_vec(),
        private,
    };
    (b, SynthKernel { handles })
}

// ---------------------------------------------------------------------------------------------
// Baselines.

struct Entry {
    count: AtomicU32,
    handle: u32,
    size: u64,
    id: Identity,
}

trait Map: Send + Default {
    fn get(&self, h: u32) -> Option<&Arc<Entry>>;
    fn insert(&mut self, h: u32, e: Arc<Entry>);
    fn remove(&mut self, h: u32);
    /// Bytes of the table itself plus the entries it owns.
    fn bytes(&self) -> usize;
}

const ENTRY_BYTES: usize = size_of::<Entry>() + 2 * size_of::<usize>(); // Arc header

impl<S: BuildHasher + Default + Send> Map for HashMap<u32, Arc<Entry>, S> {
    fn get(&self, h: u32) -> Option<&Arc<Entry>> {
        HashMap::get(self, &h)
    }
    fn insert(&mut self, h: u32, e: Arc<Entry>) {
        HashMap::insert(self, h, e);
    }
    fn remove(&mut self, h: u32) {
        HashMap::remove(self, &h);
    }
    fn bytes(&self) -> usize {
        // hashbrown: buckets = next_power_of_two(cap * 8 / 7), one control byte per bucket
        // plus a 16-byte group; estimated from the capacity.
        let buckets = (self.capacity() * 8 / 7).next_power_of_two();
        buckets * (size_of::<(u32, Arc<Entry>)>() + 1) + 16 + self.len() * ENTRY_BYTES
    }
}

#[derive(Default)]
struct VecMap(Vec<Option<Arc<Entry>>>);

impl Map for VecMap {
    fn get(&self, h: u32) -> Option<&Arc<Entry>> {
        self.0.get(h as usize).and_then(Option::as_ref)
    }
    fn insert(&mut self, h: u32, e: Arc<Entry>) {
        let i = h as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        self.0[i] = Some(e);
    }
    fn remove(&mut self, h: u32) {
        if let Some(s) = self.0.get_mut(h as usize) {
            *s = None;
        }
    }
    fn bytes(&self) -> usize {
        self.0.capacity() * size_of::<Option<Arc<Entry>>>()
            + self.0.iter().flatten().count() * ENTRY_BYTES
    }
}

/// The key is the hash.
#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n);
    }
}

type SipMap = HashMap<u32, Arc<Entry>>;
type IdMap = HashMap<u32, Arc<Entry>, BuildHasherDefault<IdentityHasher>>;
type FoldMap = HashMap<u32, Arc<Entry>, foldhash::fast::FixedState>;

/// A baseline cache: one mutex around a map; `dnot` makes clone and non-final release lock-free.
struct Locked<M> {
    map: Mutex<M>,
    kernel: SynthKernel,
    dnot: bool,
}

struct BRef<'a, M: Map> {
    owner: &'a Locked<M>,
    e: Arc<Entry>,
}

impl<M: Map> Locked<M> {
    fn new(kernel: SynthKernel, dnot: bool) -> Self {
        Locked {
            map: Mutex::new(M::default()),
            kernel,
            dnot,
        }
    }

    fn import(&self, fd: BorrowedFd<'_>) -> Result<BRef<'_, M>, Errno> {
        let mut m = self.map.lock().unwrap();
        let h = self.kernel.fd_to_handle(fd)?.get();
        if let Some(e) = m.get(h) {
            if self.kernel.identity(fd)? != e.id {
                return Err(Errno::EXIST);
            }
            e.count.fetch_add(1, Ordering::Relaxed);
            return Ok(BRef {
                owner: self,
                e: e.clone(),
            });
        }
        let e = Arc::new(Entry {
            count: AtomicU32::new(1),
            handle: h,
            size: self.kernel.size(fd)?,
            id: self.kernel.identity(fd)?,
        });
        m.insert(h, e.clone());
        Ok(BRef { owner: self, e })
    }

    fn lookup(&self, h: u32) -> Option<BRef<'_, M>> {
        let m = self.map.lock().unwrap();
        let e = m.get(h)?;
        // Under the lock a present entry has a positive count.
        e.count.fetch_add(1, Ordering::Relaxed);
        Some(BRef {
            owner: self,
            e: e.clone(),
        })
    }
}

impl<M: Map> Clone for BRef<'_, M> {
    fn clone(&self) -> Self {
        if self.owner.dnot {
            self.e.count.fetch_add(1, Ordering::Relaxed);
        } else {
            let _g = self.owner.map.lock().unwrap();
            self.e.count.fetch_add(1, Ordering::Relaxed);
        }
        BRef {
            owner: self.owner,
            e: self.e.clone(),
        }
    }
}

impl<M: Map> Drop for BRef<'_, M> {
    fn drop(&mut self) {
        if self.owner.dnot {
            let mut cur = self.e.count.load(Ordering::Relaxed);
            while cur > 1 {
                match self.e.count.compare_exchange_weak(
                    cur,
                    cur - 1,
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return,
                    Err(now) => cur = now,
                }
            }
        }
        let mut m = self.owner.map.lock().unwrap();
        if self.e.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            m.remove(self.e.handle);
            let _ = self
                .owner
                .kernel
                .gem_close(NonZeroU32::new(self.e.handle).expect("nonzero"));
        }
        black_box(self.e.size);
    }
}

// ---------------------------------------------------------------------------------------------
// One interface over ours and the baselines, so each workload is written once.

trait Cache: Sync {
    type R<'a>: Clone + Send + Sync
    where
        Self: 'a;
    fn import<'a>(&'a self, fd: BorrowedFd<'_>) -> Self::R<'a>;
    fn lookup(&self, h: u32) -> Option<Self::R<'_>>;
    fn table_bytes(&self) -> usize;
}

impl Cache for BoCache {
    type R<'a> = Bo;
    fn import(&self, fd: BorrowedFd<'_>) -> Bo {
        BoCache::import(self, fd, &ImportDesc::default()).expect("import")
    }
    fn lookup(&self, h: u32) -> Option<Bo> {
        BoCache::lookup(self, NonZeroU32::new(h)?)
    }
    fn table_bytes(&self) -> usize {
        self.stats().table_bytes
    }
}

impl<M: Map> Cache for Locked<M> {
    type R<'a>
        = BRef<'a, M>
    where
        M: 'a;
    fn import<'a>(&'a self, fd: BorrowedFd<'_>) -> BRef<'a, M> {
        Locked::import(self, fd).expect("import")
    }
    fn lookup(&self, h: u32) -> Option<BRef<'_, M>> {
        Locked::lookup(self, h)
    }
    fn table_bytes(&self) -> usize {
        self.map.lock().unwrap().bytes()
    }
}

/// Runs `work(thread_index, ops)` on `threads` threads at once; returns wall ns per op (all
/// threads' ops counted), from the first thread's start to the last one's end (each thread
/// reads the clock itself, so a main thread scheduled late cannot shorten the span).
fn timed(threads: usize, ops: usize, work: impl Fn(usize, usize) + Sync) -> f64 {
    let start = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (start, work) = (&start, &work);
                s.spawn(move || {
                    start.wait();
                    let t0 = Instant::now();
                    work(t, ops);
                    (t0, Instant::now())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .collect()
    });
    let first = spans.iter().map(|s| s.0).min().expect("threads");
    let last = spans.iter().map(|s| s.1).max().expect("threads");
    (last - first).as_secs_f64() * 1e9 / (threads * ops) as f64
}

/// W1: import-hit + release; thread t walks the shared buffers from offset t * 97.
fn w1<C: Cache>(c: &C, b: &Buffers, threads: usize, ops: usize) -> f64 {
    let n = b.shared.len();
    timed(threads, ops, |t, ops| {
        for i in 0..ops {
            black_box(c.import(b.shared[(i + t * 97) % n].as_fd()));
        }
    })
}

/// W2: clone + release of non-last references; thread t walks the objects from offset t * 97.
fn w2<C: Cache>(held: &[C::R<'_>], threads: usize, ops: usize) -> f64 {
    timed(threads, ops, |t, ops| {
        for i in 0..ops {
            black_box(held[(i + t * 97) % held.len()].clone());
        }
    })
}

/// The W3/W4 churn on one thread: import the K `mine` buffers (misses), release them in
/// reverse order (last releases); `ops` imports in all (a multiple of K).
fn churn<H>(
    mine: &[OwnedFd],
    ops: usize,
    import: impl Fn(BorrowedFd<'_>) -> H,
    release: impl Fn(H),
) {
    let mut held = Vec::with_capacity(mine.len());
    for _ in 0..ops / mine.len() {
        for fd in mine {
            held.push(import(fd.as_fd()));
        }
        while let Some(h) = held.pop() {
            release(h);
        }
    }
}

/// W3: import-miss + last release of thread-private buffers, LIFO.
fn w3<C: Cache>(c: &C, b: &Buffers, threads: usize, ops: usize) -> f64 {
    timed(threads, ops, |t, ops| {
        churn(&b.private[t], ops, |fd| c.import(fd), drop);
    })
}

/// W5: 95% lookup + release of a present handle, 5% import-miss + last release of the
/// thread's first private buffer.
fn w5<C: Cache>(c: &C, b: &Buffers, threads: usize, ops: usize) -> f64 {
    let keys = &b.shared_handles;
    timed(threads, ops, |t, ops| {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(t as u64 + 1));
        for i in 0..ops {
            if i % 20 == 19 {
                black_box(c.import(b.private[t][0].as_fd()));
            } else {
                let h = keys[rng.next() as usize % keys.len()];
                black_box(c.lookup(h));
            }
        }
    })
}

/// W6: lookups of absent keys; thread t walks `absent` from offset t * 97.
fn w6<C: Cache>(c: &C, absent: &[u32], threads: usize, ops: usize) -> f64 {
    timed(threads, ops, |t, ops| {
        for i in 0..ops {
            let r = c.lookup(absent[(i + t * 97) % absent.len()]);
            debug_assert!(r.is_none());
            black_box(r);
        }
    })
}

/// W4 buffers: K sealed memfds per thread.
fn memfd_buffers(threads: usize) -> Vec<Vec<OwnedFd>> {
    (0..threads)
        .map(|_| {
            (0..K)
                .map(|_| MemfdKernel::new_buffer(4096).expect("memfd"))
                .collect()
        })
        .collect()
}

/// W4, ours: the churn through a `BoCache` over a fresh `MemfdKernel`.
fn w4_ours(private: &[Vec<OwnedFd>], threads: usize, ops: usize) -> f64 {
    let c = BoCache::with_kernel(MemfdKernel::new());
    let ns = timed(threads, ops, |t, ops| {
        churn(
            &private[t],
            ops,
            |fd| c.import(fd, &ImportDesc::default()).expect("import"),
            drop,
        );
    });
    let s = c.stats();
    assert_eq!((s.live, s.double_closes, s.close_errors), (0, 0, 0));
    ns
}

/// W4, the floor: the same kernel calls the cache makes for an import-miss (`fd_to_handle`,
/// `size`, `identity`) and a last release (`gem_close`), directly on a fresh `MemfdKernel`.
fn w4_floor(private: &[Vec<OwnedFd>], threads: usize, ops: usize) -> f64 {
    let k = MemfdKernel::new();
    let ns = timed(threads, ops, |t, ops| {
        churn(
            &private[t],
            ops,
            |fd| {
                let h = k.fd_to_handle(fd).expect("fd_to_handle");
                black_box(k.size(fd).expect("size"));
                black_box(k.identity(fd).expect("identity"));
                h
            },
            |h| k.gem_close(h).expect("gem_close"),
        );
    });
    let s = k.stats();
    assert_eq!((s.open_handles, s.double_closes), (0, 0));
    ns
}

// ---------------------------------------------------------------------------------------------

/// Every variant, in table order.
const VARIANTS: [&str; 10] = [
    "ours",
    "B1 sip locked",
    "B2 identity locked",
    "B3 foldhash locked",
    "B4 vec locked",
    "B1 sip dnot",
    "B2 identity dnot",
    "B3 foldhash dnot",
    "B4 vec dnot",
    "floor",
];

/// Every measured value: (workload, variant) -> samples, and the workloads in first-seen order.
#[derive(Default)]
struct Samples {
    order: Vec<String>,
    values: HashMap<(String, &'static str), Vec<f64>>,
}

impl Samples {
    fn push(&mut self, workload: String, variant: &'static str, v: f64) {
        if !self.order.contains(&workload) {
            self.order.push(workload.clone());
        }
        self.values.entry((workload, variant)).or_default().push(v);
    }

    fn median(&self, workload: &str, variant: &str) -> Option<f64> {
        let (_, v) = self
            .values
            .iter()
            .find(|((w, v), _)| w == workload && *v == variant)?;
        support::try_median(&mut v.clone())
    }

    /// The best (lowest) baseline median, with its name.
    fn best(&self, workload: &str) -> Option<(f64, &'static str)> {
        VARIANTS[1..9]
            .iter()
            .filter_map(|v| Some((self.median(workload, v)?, *v)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    }
}

struct Cfg {
    ops: usize,
    runs: usize,
    threads: Vec<usize>,
    /// Workload name filters (any matches); empty = all.
    filters: Vec<String>,
    /// Variant name filters (any matches); empty = all.
    variants: Vec<String>,
}

impl Cfg {
    fn wants(&self, workload: &str) -> bool {
        self.filters.is_empty() || self.filters.iter().any(|f| workload.contains(f.as_str()))
    }
    fn runs_variant(&self, variant: &str) -> bool {
        self.variants.is_empty() || self.variants.iter().any(|f| variant.contains(f.as_str()))
    }
    fn filtered(&self) -> bool {
        !self.filters.is_empty() || !self.variants.is_empty()
    }
    fn max_threads(&self) -> usize {
        self.threads.iter().copied().max().unwrap_or(1)
    }
}

/// Measures every W1-W3 and W5-W7 workload of `dist` for one variant; `make` builds a fresh cache
/// over a kernel.
fn measure<C: Cache>(
    name: &'static str,
    dist: Dist,
    make: impl Fn(SynthKernel) -> C,
    cfg: &Cfg,
    out: &mut Samples,
) {
    if !cfg.runs_variant(name) {
        return;
    }
    let d = dist.name();
    let threads = &cfg.threads;
    let names = |w: &str| -> Vec<(usize, String)> {
        threads
            .iter()
            .map(|&t| (t, format!("{w} {d} {t}T")))
            .filter(|(_, n)| cfg.wants(n))
            .collect()
    };
    let (b, k) = buffers(dist, N, cfg.max_threads());
    let c = make(k);
    let held: Vec<C::R<'_>> = b.shared.iter().map(|f| c.import(f.as_fd())).collect();
    for (t, w) in names("W1 import-hit+release") {
        out.push(w, name, w1(&c, &b, t, cfg.ops));
    }
    for (t, w) in names("W2 clone+release") {
        out.push(w, name, w2::<C>(&held, t, cfg.ops));
    }
    for (t, w) in names("W3 import-miss+last-release") {
        out.push(w, name, w3(&c, &b, t, cfg.ops));
    }
    for (t, w) in names("W5 lookup-heavy") {
        out.push(w, name, w5(&c, &b, t, cfg.ops));
    }
    drop(held);
    drop(c);

    let w6 = names("W6 absent-lookup");
    if !w6.is_empty() {
        let (b, k) = buffers(dist, N_HIGH_LOAD, 0);
        let present: HashSet<u32> = b.shared_handles.iter().copied().collect();
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let absent: Vec<u32> = std::iter::repeat_with(|| rng.handle())
            .filter(|h| !present.contains(h))
            .take(4096)
            .collect();
        let c = make(k);
        let held: Vec<C::R<'_>> = b.shared.iter().map(|f| c.import(f.as_fd())).collect();
        for (t, w) in w6 {
            out.push(w, name, self::w6(&c, &absent, t, cfg.ops));
        }
        drop(held);
    }

    let w = format!("W7 memory 1024 {d}");
    if cfg.wants(&w) {
        let (b, k) = buffers(dist, N, 0);
        let c = make(k);
        let held: Vec<C::R<'_>> = b.shared.iter().map(|f| c.import(f.as_fd())).collect();
        out.push(w, name, c.table_bytes() as f64);
        drop(held);
    }
}

/// Ours over `k`; sparse caches get a 64 MiB table cap (see the module docs).
fn ours(k: SynthKernel, dist: Dist) -> BoCache {
    match dist {
        Dist::Dense => BoCache::with_kernel(k),
        Dist::Sparse => BoCache::with_config(
            k,
            CacheConfig {
                max_table_bytes: 64 << 20,
                ..CacheConfig::default()
            },
        ),
    }
}

fn env_usize(name: &str) -> Option<usize> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number")),
    )
}

fn config() -> (bool, Cfg) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    let threads = match std::env::var("BO_CACHE_BENCH_THREADS") {
        Ok(v) => v
            .split(',')
            .map(|t| match t.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => panic!("BO_CACHE_BENCH_THREADS={v}: want a list like 1,2,4,8,16"),
            })
            .collect(),
        Err(_) => vec![1, 2, 4],
    };
    let (ops, runs) = if bench { (200_000, 9) } else { (2_000, 1) };
    let ops = env_usize("BO_CACHE_BENCH_OPS").unwrap_or(ops);
    let cfg = Cfg {
        // The churn imports K buffers per round.
        ops: ops.div_ceil(K).max(1) * K,
        runs: env_usize("BO_CACHE_BENCH_RUNS").unwrap_or(runs).max(1),
        threads,
        filters: args.into_iter().filter(|a| !a.starts_with('-')).collect(),
        variants: std::env::var("BO_CACHE_BENCH_VARIANTS")
            .map(|v| v.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default(),
    };
    (bench, cfg)
}

fn main() {
    let (bench, cfg) = config();
    let started = Instant::now();
    let mut s = Samples::default();
    let memfds = memfd_buffers(cfg.max_threads());
    for _ in 0..cfg.runs {
        for dist in [Dist::Dense, Dist::Sparse] {
            measure("ours", dist, |k| ours(k, dist), &cfg, &mut s);
            for dnot in [false, true] {
                let tag = |a: &'static str, b: &'static str| if dnot { b } else { a };
                measure(
                    tag("B1 sip locked", "B1 sip dnot"),
                    dist,
                    |k| Locked::<SipMap>::new(k, dnot),
                    &cfg,
                    &mut s,
                );
                measure(
                    tag("B2 identity locked", "B2 identity dnot"),
                    dist,
                    |k| Locked::<IdMap>::new(k, dnot),
                    &cfg,
                    &mut s,
                );
                measure(
                    tag("B3 foldhash locked", "B3 foldhash dnot"),
                    dist,
                    |k| Locked::<FoldMap>::new(k, dnot),
                    &cfg,
                    &mut s,
                );
                if dist == Dist::Dense {
                    measure(
                        tag("B4 vec locked", "B4 vec dnot"),
                        dist,
                        |k| Locked::<VecMap>::new(k, dnot),
                        &cfg,
                        &mut s,
                    );
                }
            }
        }
        // W4 is slow (syscalls): a quarter of the ops.
        let ops = (cfg.ops / 4).div_ceil(K) * K;
        for &t in &cfg.threads {
            let w = format!("W4 memfd import-miss+last-release dense {t}T");
            if !cfg.wants(&w) {
                continue;
            }
            if cfg.runs_variant("ours") {
                s.push(w.clone(), "ours", w4_ours(&memfds, t, ops));
            }
            if cfg.runs_variant("floor") {
                s.push(w, "floor", w4_floor(&memfds, t, ops));
            }
        }
    }
    print_matrix(&s, &cfg);
    let rows = rows(&s);
    if bench && !cfg.filtered() {
        support::report("bo_cache", &rows);
    } else {
        for r in &rows {
            println!(
                "{:<56} {:>12.2} {:>12.2} {:>7.3}  {}; {}",
                r.metric,
                r.ours,
                r.baseline,
                r.ratio(),
                r.unit,
                r.ratio_note
            );
        }
        println!(
            "{} run (nothing written): {} rows",
            if bench {
                "filtered"
            } else {
                "smoke (no --bench)"
            },
            rows.len()
        );
    }
    let missed: Vec<&Row> = rows
        .iter()
        .filter(|r| r.ratio_note.contains("MISS"))
        .collect();
    println!(
        "goals: {} met, {} missed{}",
        rows.iter()
            .filter(|r| r.ratio_note.contains("PASS"))
            .count(),
        missed.len(),
        missed
            .iter()
            .map(|r| format!("\n  MISS {} (ratio {:.3})", r.metric, r.ratio()))
            .collect::<String>()
    );
    println!(
        "{:.1} s, {} cores",
        started.elapsed().as_secs_f64(),
        thread::available_parallelism().map_or(0, |n| n.get())
    );
}

/// Every variant's median, for the full picture.
fn print_matrix(s: &Samples, cfg: &Cfg) {
    println!(
        "\nbo_cache refcount: medians of {} runs, {} ops per thread per run (W4: a quarter)",
        cfg.runs, cfg.ops
    );
    print!("{:<46}", "workload (ns/op; W7 bytes)");
    for v in VARIANTS {
        let w: Vec<_> = v.split(' ').collect();
        print!(" {:>10}", format!("{}-{}", w[0], w[w.len() - 1]));
    }
    println!();
    for w in &s.order {
        print!("{w:<46}");
        for v in VARIANTS {
            match s.median(w, v) {
                Some(m) => print!(" {m:>10.1}"),
                None => print!(" {:>10}", "-"),
            }
        }
        println!();
    }
}

/// A goal on a row: the ratio's bound, or a bound on ours alone.
enum Goal {
    RatioAtMost(f64),
    RatioAtLeast(f64),
    OursAtMost(f64),
}

fn verdict(goal: &Goal, ours: f64, baseline: f64) -> String {
    let ratio = ours / baseline;
    let (text, met) = match *goal {
        Goal::RatioAtMost(g) => (format!("goal ratio <= {g}"), ratio <= g),
        Goal::RatioAtLeast(g) => (format!("goal ratio >= {g}"), ratio >= g),
        Goal::OursAtMost(g) => (format!("goal ours <= {g}"), ours <= g),
    };
    format!("{text}: {}", if met { "PASS" } else { "MISS" })
}

fn slug(w: &str) -> String {
    let mut out = String::new();
    for ch in w.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_end_matches('_').to_string()
}

/// The report rows: ours vs the best baseline for every workload, plus the rows the issue sets
/// goals on (against the baseline it names).
fn rows(s: &Samples) -> Vec<Row> {
    let leak = |s: String| -> &'static str { s.leak() };
    let mut rows = Vec::new();
    for w in &s.order {
        let Some(ours) = s.median(w, "ours") else {
            continue;
        };
        let threads: usize = w
            .rsplit(' ')
            .next()
            .and_then(|t| t.strip_suffix('T'))
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let sw = slug(w);
        if w.starts_with("W4") {
            if let Some(floor) = s.median(w, "floor") {
                let g = verdict(&Goal::RatioAtMost(1.10), ours, floor);
                rows.push(Row {
                    metric: format!("{sw}_vs_syscall_floor_ns"),
                    unit: "ns/op",
                    ours,
                    baseline: floor,
                    ratio_note: leak(format!("ours/floor time; {g}")),
                });
            }
            continue;
        }
        if w.starts_with("W7") {
            if let Some((b, bn)) = s.best(w) {
                let limit = if w.contains("dense") {
                    64 << 10
                } else {
                    16 << 20
                };
                let g = verdict(&Goal::OursAtMost(f64::from(limit)), ours, b);
                rows.push(Row {
                    metric: format!("{sw}_vs_smallest_bytes"),
                    unit: "bytes",
                    ours,
                    baseline: b,
                    ratio_note: leak(format!(
                        "ours (stats().table_bytes) / smallest baseline ({bn}, capacity estimate); {g}"
                    )),
                });
            }
            continue;
        }
        if let Some((b, bn)) = s.best(w) {
            let goal = (w.starts_with("W1") && threads == 1).then_some(Goal::RatioAtMost(1.0));
            let g = goal.map(|g| format!("; {}", verdict(&g, ours, b)));
            rows.push(Row {
                metric: format!("{sw}_vs_best_ns"),
                unit: "ns/op",
                ours,
                baseline: b,
                ratio_note: leak(format!("ours/best ({bn}) time{}", g.unwrap_or_default())),
            });
        }
        // Throughput against the locked SipHash map.
        if (w.starts_with("W2") || w.starts_with("W5"))
            && let Some(b1) = s.median(w, "B1 sip locked")
        {
            let goal = match (&w[..2], threads) {
                ("W2", 4) => Some(Goal::RatioAtLeast(1.5)),
                ("W5", 2 | 4) => Some(Goal::RatioAtLeast(2.0)),
                _ => None,
            };
            let (o, b) = (1e3 / ours, 1e3 / b1);
            let g = goal.map(|g| format!("; {}", verdict(&g, o, b)));
            rows.push(Row {
                metric: format!("{sw}_vs_b1_locked_mops"),
                unit: "Mops/s",
                ours: o,
                baseline: b,
                ratio_note: leak(format!(
                    "ours/B1 locked throughput{}",
                    g.unwrap_or_default()
                )),
            });
        }
        if w.starts_with("W6")
            && let Some(b3) = s.median(w, "B3 foldhash locked")
        {
            let g = verdict(&Goal::RatioAtMost(10.0), ours, b3);
            rows.push(Row {
                metric: format!("{sw}_vs_b3_foldhash_locked_ns"),
                unit: "ns/op",
                ours,
                baseline: b3,
                ratio_note: leak(format!("ours/B3 (FxHash-like) time; {g}")),
            });
        }
    }
    rows
}
