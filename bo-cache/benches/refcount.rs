//! The buffer-object cache vs locked maps, side by side in one process, same workloads, runs
//! interleaved (ours, every baseline, ours, ...), medians of `RUNS` runs:
//!
//! * W1 import-hit + release of a non-last reference, one thread.
//! * W2 clone + release of non-last references, 1/2/4 threads over 1024 shared objects.
//! * W5 lookup-heavy: 95% lookup by handle + release, 5% churn (import-miss + last release of a
//!   thread-private buffer), 1/2/4 threads.
//! * W7 memory of the table for 1024 dense handles.
//!
//! Kernel: [`SynthKernel`], defined here, so the figures are the cache's and not the syscalls':
//! `fd_to_handle`, `identity` and `size` are lookups in a table indexed by the fd number,
//! `gem_close` does nothing. Ours is `BoCache` (identity check on, as by default) over it; every
//! baseline calls the same kernel in the same places (identity check on a hit included).
//!
//! Baselines, each an `Arc<Entry>` per handle behind one `Mutex`:
//! B1 `HashMap` with std SipHash, B2 the same with an identity hasher (the key is the hash),
//! B3 the same with `foldhash` (fast, an FxHash-like multiply-mix; `rustc-hash` is not a
//! workspace dependency), B4 `Vec<Option<Arc<Entry>>>` indexed by handle. Each in two variants:
//! `locked` (every count change under the mutex) and `dnot` (clone and non-final release
//! lock-free, "decrement unless one", as ours).
//!
//! `cargo bench -p gpusvc-bo-cache --bench refcount`; prints the table and writes
//! `target/bench/bo_cache.json`. Without `--bench` (as `cargo test --all-targets` runs it) it
//! only runs a smoke pass with tiny counts and writes nothing.

use bench_support as support;

use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Instant;

use bo_cache::{Bo, BoCache, Errno, Identity, ImportDesc, Kernel};
use support::{Row, median};

/// Objects preloaded for W1, W2 and W5 (dense handles 1..=N).
const N: usize = 1024;
/// Thread counts (this machine may have fewer cores; see the report).
const THREADS: [usize; 3] = [1, 2, 4];

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

/// The buffers: `fds[i]` has handle `i + 1`. fds are dups of one `/dev/null` open; only their
/// numbers matter to [`SynthKernel`].
struct Buffers {
    fds: Vec<OwnedFd>,
}

fn buffers(count: usize) -> (Buffers, SynthKernel) {
    let null: OwnedFd = File::open("/dev/null").expect("/dev/null").into();
    let fds: Vec<OwnedFd> = (0..count).map(|_| null.try_clone().expect("dup")).collect();
    let max = fds.iter().map(|f| f.as_raw_fd()).max().unwrap_or(0) as usize;
    let mut handles = vec![0u32; max + 1];
    for (i, f) in fds.iter().enumerate() {
        handles[f.as_raw_fd() as usize] = i as u32 + 1;
    }
    (Buffers { fds }, SynthKernel { handles })
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
    type R<'a>: Clone + Send
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
/// threads' ops counted).
fn timed<C: Cache>(
    c: &C,
    threads: usize,
    ops: usize,
    work: impl Fn(&C, usize, usize) + Sync,
) -> f64 {
    let start = Barrier::new(threads + 1);
    let end = Barrier::new(threads + 1);
    thread::scope(|s| {
        for t in 0..threads {
            let (start, end, work) = (&start, &end, &work);
            s.spawn(move || {
                start.wait();
                work(c, t, ops);
                end.wait();
            });
        }
        start.wait();
        let t0 = Instant::now();
        end.wait();
        t0.elapsed().as_secs_f64() * 1e9 / (threads * ops) as f64
    })
}

/// W1: import-hit + release, one thread, over the N preloaded buffers.
fn w1<C: Cache>(c: &C, b: &Buffers, ops: usize) -> f64 {
    timed(c, 1, ops, |c, _, ops| {
        for i in 0..ops {
            black_box(c.import(b.fds[i % N].as_fd()));
        }
    })
}

/// W2: clone + release of non-last references; thread t walks the objects from offset t * 97.
fn w2<C: Cache>(c: &C, held: &[C::R<'_>], threads: usize, ops: usize) -> f64
where
    for<'a> C::R<'a>: Sync,
{
    timed(c, threads, ops, |_, t, ops| {
        for i in 0..ops {
            black_box(held[(i + t * 97) % N].clone());
        }
    })
}

/// W5: 95% lookup + release of a present handle, 5% import-miss + last release of a
/// thread-private buffer (`private[t]`, one of
/// the 4 buffers past the N preloaded ones, handles N+1..=N+4).
fn w5<C: Cache>(c: &C, private: &[OwnedFd], threads: usize, ops: usize) -> f64 {
    timed(c, threads, ops, |c, t, ops| {
        let mut x = 0x9e37_79b9_u32.wrapping_mul(t as u32 + 1);
        for i in 0..ops {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if i % 20 == 19 {
                black_box(c.import(private[t].as_fd()));
            } else {
                black_box(c.lookup(x % N as u32 + 1));
            }
        }
    })
}

// ---------------------------------------------------------------------------------------------

/// Every measured value: (workload, variant) -> samples.
type Samples = HashMap<(String, &'static str), Vec<f64>>;

/// Measures `f` for one variant; `f` gets a fresh cache preloaded with the N buffers.
fn measure<C: Cache>(
    name: &'static str,
    make: impl Fn(SynthKernel) -> C,
    cfg: &Cfg,
    out: &mut Samples,
) where
    for<'a> C::R<'a>: Sync,
{
    let (b, k) = buffers(N + 4);
    let c = make(k);
    let held: Vec<C::R<'_>> = (0..N).map(|i| c.import(b.fds[i].as_fd())).collect();
    let mut push = |key: String, v: f64| out.entry((key, name)).or_default().push(v);
    push("W1 import-hit+release 1T".into(), w1(&c, &b, cfg.ops));
    for t in THREADS {
        push(format!("W2 clone+release {t}T"), w2(&c, &held, t, cfg.ops));
    }
    for t in THREADS {
        push(
            format!("W5 lookup-heavy {t}T"),
            w5(&c, &b.fds[N..], t, cfg.ops),
        );
    }
    drop(held);
    // W7: a fresh cache with 1024 dense handles.
    let (b, k) = buffers(N);
    let c = make(k);
    let held: Vec<C::R<'_>> = (0..N).map(|i| c.import(b.fds[i].as_fd())).collect();
    push("W7 memory 1024 dense".into(), c.table_bytes() as f64);
    drop(held);
}

struct Cfg {
    ops: usize,
    runs: usize,
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let cfg = if bench {
        Cfg {
            ops: 400_000,
            runs: 7,
        }
    } else {
        Cfg {
            ops: 2_000,
            runs: 1,
        }
    };
    let started = Instant::now();
    let mut s = Samples::new();
    for _ in 0..cfg.runs {
        measure("ours", BoCache::with_kernel, &cfg, &mut s);
        for dnot in [false, true] {
            let tag = |a: &'static str, b: &'static str| if dnot { b } else { a };
            measure(
                tag("B1 sip locked", "B1 sip dnot"),
                |k| Locked::<SipMap>::new(k, dnot),
                &cfg,
                &mut s,
            );
            measure(
                tag("B2 identity locked", "B2 identity dnot"),
                |k| Locked::<IdMap>::new(k, dnot),
                &cfg,
                &mut s,
            );
            measure(
                tag("B3 foldhash locked", "B3 foldhash dnot"),
                |k| Locked::<FoldMap>::new(k, dnot),
                &cfg,
                &mut s,
            );
            measure(
                tag("B4 vec locked", "B4 vec dnot"),
                |k| Locked::<VecMap>::new(k, dnot),
                &cfg,
                &mut s,
            );
        }
    }
    let variants = [
        "ours",
        "B1 sip locked",
        "B2 identity locked",
        "B3 foldhash locked",
        "B4 vec locked",
        "B1 sip dnot",
        "B2 identity dnot",
        "B3 foldhash dnot",
        "B4 vec dnot",
    ];
    let mut workloads: Vec<String> = s.keys().map(|(w, _)| w.clone()).collect();
    workloads.sort();
    workloads.dedup();
    let med = |w: &str, v: &'static str| {
        median(&mut s.get(&(w.to_string(), v)).cloned().unwrap_or_default())
    };

    // Every variant's median, for the full picture.
    println!(
        "\nbo_cache refcount: medians of {} runs, {} ops per thread per run",
        cfg.runs, cfg.ops
    );
    print!("{:<28}", "workload (ns/op; W7 bytes)");
    for v in variants {
        print!(" {:>10}", {
            let w: Vec<_> = v.split(' ').collect();
            format!("{}-{}", w[0], w[w.len() - 1])
        });
    }
    println!();
    for w in &workloads {
        print!("{w:<28}");
        for v in variants {
            print!(" {:>10.1}", med(w, v));
        }
        println!();
    }

    let mut rows = Vec::new();
    let best = |w: &str| {
        variants[1..]
            .iter()
            .map(|v| (med(w, v), *v))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .expect("baselines")
    };
    let w = "W1 import-hit+release 1T";
    let (b, bn) = best(w);
    println!("W1 best baseline: {bn}");
    rows.push(Row {
        metric: "w1_import_hit_release_1t_vs_best_ns".into(),
        unit: "ns/op",
        ours: med(w, "ours"),
        baseline: b,
        ratio_note: "ours/best baseline time (goal <= 1.0)",
    });
    // Throughput against the locked SipHash map; `goal` names the thread counts the issue sets
    // a goal for.
    let vs_locked_map = |workload: &str, metric: &str, t: usize, goal: Option<&'static str>| Row {
        metric: format!("{metric}_{t}t_vs_b1_locked_mops"),
        unit: "Mops/s",
        ours: 1e3 / med(&format!("{workload} {t}T"), "ours"),
        baseline: 1e3 / med(&format!("{workload} {t}T"), "B1 sip locked"),
        ratio_note: goal.unwrap_or("ours/B1 throughput"),
    };
    for t in THREADS {
        let goal = (t == 4).then_some("ours/B1 throughput (goal >= 1.5)");
        rows.push(vs_locked_map(
            "W2 clone+release",
            "w2_clone_release",
            t,
            goal,
        ));
    }
    for t in THREADS {
        let goal = (t != 1).then_some("ours/B1 throughput (goal >= 2)");
        rows.push(vs_locked_map("W5 lookup-heavy", "w5_lookup_heavy", t, goal));
    }
    for t in THREADS {
        let w = format!("W5 lookup-heavy {t}T");
        let (b, bn) = best(&w);
        println!("W5 {t}T best baseline: {bn}");
        rows.push(Row {
            metric: format!("w5_lookup_heavy_{t}t_vs_best_mops"),
            unit: "Mops/s",
            ours: 1e3 / med(&w, "ours"),
            baseline: 1e3 / b,
            ratio_note: "ours/best baseline throughput",
        });
    }
    let w = "W7 memory 1024 dense";
    rows.push(Row {
        metric: "w7_memory_1024_dense_vs_b4_vec_bytes".into(),
        unit: "bytes",
        ours: med(w, "ours"),
        baseline: med(w, "B4 vec locked"),
        ratio_note: "ours/Vec bytes (goal: ours <= 65536)",
    });
    if bench {
        support::report("bo_cache", &rows);
    } else {
        println!(
            "smoke run (no --bench): {} rows, nothing written",
            rows.len()
        );
    }
    println!(
        "{:.1} s, {} cores",
        started.elapsed().as_secs_f64(),
        thread::available_parallelism().map_or(0, |n| n.get())
    );
}
