//! loom models of the refcount protocol's races: import vs last release, two releasers and an
//! importer, concurrent fresh imports, lock-free lookup vs last release, clone vs release, and a
//! rejected re-import vs last release.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release -p
//! gpusvc-bo-cache --test loom` (own target dir: `CARGO_TARGET_DIR=target/loom`).
//! `scripts/loom-mutants` runs them again against each deliberately broken variant of the
//! protocol (`BO_CACHE_MUTANT=<name>` in this loom build) and checks that some model fails for
//! each.
//!
//! loom cannot model syscalls, so the cache runs on `SynthKernel`, a fake DRM file
//! description whose buffers are two real fds opened once outside the models (never read: only
//! their numbers name the buffers) with made-up identities and sizes. It follows the same rules
//! as `MemfdKernel`: the lowest free handle >= 1, the same handle for a buffer that has one,
//! `EINVAL` (counted) on closing a handle that is not open. Its state is behind a loom mutex,
//! so every `fd_to_handle` and `gem_close` is a scheduling point.
//!
//! Every model checks at the end: no double close (the cache's and the fake's counters), no
//! handle left open, no live object, one close per object created; and, whenever a thread
//! uses an object, that its handle is still open on the fake and names its buffer ("no use
//! after free").
#![cfg(loom)]

use std::collections::BTreeMap;
use std::fs::File;
use std::num::NonZeroU32;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use bo_cache::{Bo, BoCache, BoError, Errno, Identity, ImportDesc, Kernel};
use loom::sync::{Arc, Mutex};
use loom::thread;

const SIZE: u64 = 4096;

/// Two fds that stand for two dma-bufs, opened once per test process and never closed.
fn buffer_fds() -> &'static [OwnedFd; 2] {
    static FDS: OnceLock<[OwnedFd; 2]> = OnceLock::new();
    FDS.get_or_init(|| {
        let open = || OwnedFd::from(File::open("/dev/null").expect("open /dev/null"));
        [open(), open()]
    })
}

/// The fd of buffer `i`.
fn buf(i: usize) -> BorrowedFd<'static> {
    buffer_fds()[i].as_fd()
}

#[derive(Debug, Default)]
struct SynthState {
    /// Open handles -> the buffer (index) they name.
    handles: BTreeMap<u32, usize>,
    created: u64,
    closes: u64,
    double_closes: u64,
    /// Uses of a live `Bo` whose handle was closed or names another buffer, and racing imports
    /// that failed. Recorded rather than asserted on the spot: a panic while other model
    /// threads hold objects makes loom abort the whole test process instead of failing one
    /// test.
    violations: Vec<String>,
}

/// A fake DRM file description over synthetic buffers (see the module docs).
#[derive(Debug, Clone)]
struct SynthKernel {
    state: Arc<Mutex<SynthState>>,
}

impl SynthKernel {
    fn new() -> Self {
        SynthKernel {
            state: Arc::new(Mutex::new(SynthState::default())),
        }
    }

    fn buffer_of(fd: BorrowedFd<'_>) -> Result<usize, Errno> {
        let raw: RawFd = fd.as_raw_fd();
        buffer_fds()
            .iter()
            .position(|f| f.as_raw_fd() == raw)
            .ok_or(Errno::BADF)
    }

    /// "Uses" `bo` as buffer `i`: its handle must still be open and name that buffer, and the
    /// object's fields must be the buffer's; a violation is recorded for [`check_end`].
    fn use_bo(&self, bo: &Bo, i: usize) {
        let mut st = self.state.lock().unwrap();
        let h = bo.handle().get();
        match st.handles.get(&h) {
            Some(&b) if b == i => {}
            other => {
                let what = format!("a live Bo's handle {h} is {other:?}, not buffer {i}");
                st.violations.push(what);
            }
        }
        if bo.size() != SIZE {
            let what = format!("a live Bo's size is {}, not {SIZE}", bo.size());
            st.violations.push(what);
        }
    }

    fn open_handles(&self) -> usize {
        self.state.lock().unwrap().handles.len()
    }
}

impl Kernel for SynthKernel {
    fn fd_to_handle(&self, dmabuf: BorrowedFd<'_>) -> Result<NonZeroU32, Errno> {
        let b = Self::buffer_of(dmabuf)?;
        let mut st = self.state.lock().unwrap();
        if let Some((&h, _)) = st.handles.iter().find(|&(_, &owner)| owner == b) {
            return Ok(NonZeroU32::new(h).unwrap());
        }
        let h = (1..).find(|h| !st.handles.contains_key(h)).unwrap();
        st.handles.insert(h, b);
        st.created += 1;
        Ok(NonZeroU32::new(h).unwrap())
    }

    fn gem_close(&self, handle: NonZeroU32) -> Result<(), Errno> {
        let mut st = self.state.lock().unwrap();
        if st.handles.remove(&handle.get()).is_some() {
            st.closes += 1;
            Ok(())
        } else {
            st.double_closes += 1;
            Err(Errno::INVAL)
        }
    }

    fn handle_to_fd(&self, _handle: NonZeroU32, _flags: u32) -> Result<OwnedFd, Errno> {
        Err(Errno::NOTSUP)
    }

    fn size(&self, dmabuf: BorrowedFd<'_>) -> Result<u64, Errno> {
        Self::buffer_of(dmabuf).map(|_| SIZE)
    }

    fn identity(&self, dmabuf: BorrowedFd<'_>) -> Result<Identity, Errno> {
        Self::buffer_of(dmabuf).map(|b| Identity {
            dev: 1,
            ino: 100 + b as u64,
        })
    }
}

/// Runs `f` under loom (bounded by `LOOM_MAX_PREEMPTIONS`) and prints how many interleavings
/// it explored.
fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    loom::model(move || {
        r.fetch_add(1, Ordering::Relaxed);
        f();
    });
    println!("{name}: {} interleavings", runs.load(Ordering::Relaxed));
}

/// A cache over a fresh fake, and a clone of the fake to look behind the cache.
fn setup() -> (Arc<BoCache>, SynthKernel) {
    let kernel = SynthKernel::new();
    (Arc::new(BoCache::with_kernel(kernel.clone())), kernel)
}

/// An import racing other threads: a failure is recorded for [`check_end`] (see
/// `SynthState::violations`).
fn try_import(cache: &BoCache, kernel: &SynthKernel, i: usize) -> Option<Bo> {
    match cache.import(buf(i), &ImportDesc::min_size(SIZE)) {
        Ok(bo) => Some(bo),
        Err(e) => {
            let what = format!("import of buffer {i} failed: {e}");
            kernel.state.lock().unwrap().violations.push(what);
            None
        }
    }
}

/// An import before any other thread runs.
fn import(cache: &BoCache, i: usize) -> Bo {
    cache
        .import(buf(i), &ImportDesc::min_size(SIZE))
        .expect("import")
}

/// The end-of-model checks, once every object is dropped: every violated rule, in one panic.
fn check_end(cache: Arc<BoCache>, kernel: &SynthKernel) {
    let s = cache.stats();
    drop(cache);
    let k = kernel.state.lock().unwrap();
    let mut broken = Vec::new();
    if !k.violations.is_empty() {
        broken.push(format!(
            "use after free or failed import: {:?}",
            k.violations
        ));
    }
    if s.double_closes != 0 || k.double_closes != 0 {
        broken.push(format!(
            "double close: cache {}, fake {}",
            s.double_closes, k.double_closes
        ));
    }
    if s.live != 0 {
        broken.push(format!("live objects left: {}", s.live as isize));
    }
    if !k.handles.is_empty() {
        broken.push(format!("handles left open: {:?}", k.handles));
    }
    if s.closes != k.closes || k.closes != k.created {
        broken.push(format!(
            "closes: cache {}, fake {}, handles created {}",
            s.closes, k.closes, k.created
        ));
    }
    assert!(broken.is_empty(), "{}; {s:?}", broken.join("; "));
}

/// (a) An import of a buffer races the release of its last reference: the import either hits
/// the live object or, after the close, gets a fresh one; never a handle being closed.
#[test]
fn import_vs_last_release() {
    model("import_vs_last_release", || {
        let (cache, kernel) = setup();
        let a = import(&cache, 0);
        let t = thread::spawn(move || drop(a));
        if let Some(b) = try_import(&cache, &kernel, 0) {
            kernel.use_bo(&b, 0);
        }
        t.join().unwrap();
        check_end(cache, &kernel);
    });
}

/// (b) Two holders release while a third thread imports the same buffer.
#[test]
fn two_releasers_and_an_importer() {
    model("two_releasers_and_an_importer", || {
        let (cache, kernel) = setup();
        let a = import(&cache, 0);
        let a2 = a.clone();
        let t1 = thread::spawn(move || drop(a));
        let t2 = thread::spawn(move || drop(a2));
        if let Some(b) = try_import(&cache, &kernel, 0) {
            kernel.use_bo(&b, 0);
        }
        t1.join().unwrap();
        t2.join().unwrap();
        check_end(cache, &kernel);
    });
}

/// (c) Two first imports of one buffer at once: one object, one handle, count 2, one miss and
/// one hit; the two releases close it once.
#[test]
fn concurrent_fresh_imports() {
    model("concurrent_fresh_imports", || {
        let (cache, kernel) = setup();
        let (c, k) = (cache.clone(), kernel.clone());
        let t = thread::spawn(move || try_import(&c, &k, 0));
        let a = try_import(&cache, &kernel, 0);
        let b = t.join().unwrap();
        // Checked after the releases (see `SynthState::violations`).
        let seen = a.as_ref().zip(b.as_ref()).map(|(a, b)| {
            kernel.use_bo(a, 0);
            let s = cache.stats();
            (
                a.handle() == b.handle() && a.generation() == b.generation(),
                a.ref_count(),
                (s.misses, s.hits, s.live, kernel.open_handles()),
            )
        });
        let t = thread::spawn(move || drop(a));
        drop(b);
        t.join().unwrap();
        if let Some((one_object, count, counts)) = seen {
            assert!(one_object, "two objects for one buffer");
            assert_eq!(count, 2);
            assert_eq!(counts, (1, 1, 1, 1), "(misses, hits, live, open handles)");
        }
        check_end(cache, &kernel);
    });
}

/// (d) A lock-free lookup of the handle races the last release: it gets either nothing or a
/// live object whose handle stays open while it is held.
#[test]
fn lookup_vs_last_release() {
    model("lookup_vs_last_release", || {
        let (cache, kernel) = setup();
        let a = import(&cache, 0);
        let h = a.handle();
        let generation = a.generation();
        let t = thread::spawn(move || drop(a));
        let looked_up = cache.lookup(h).map(|b| {
            kernel.use_bo(&b, 0);
            b.generation()
        });
        t.join().unwrap();
        assert!(looked_up.is_none_or(|g| g == generation));
        assert_eq!(cache.lookup(h).map(|b| b.handle()), None);
        check_end(cache, &kernel);
    });
}

/// (e) One holder clones and releases while another releases: the handle is closed once,
/// after both.
#[test]
fn clone_vs_release() {
    model("clone_vs_release", || {
        let (cache, kernel) = setup();
        let a = import(&cache, 0);
        let a2 = a.clone();
        let k = kernel.clone();
        let t = thread::spawn(move || {
            let c = a2.clone();
            drop(a2);
            k.use_bo(&c, 0);
            drop(c);
        });
        drop(a);
        t.join().unwrap();
        check_end(cache, &kernel);
    });
}

/// (f) An import that the cache must refuse (the buffer is smaller than asked) races the last
/// release: on the cached handle it changes nothing, on a fresh one it closes that handle.
/// A second buffer is imported too, so that handle numbers get recycled.
#[test]
fn rejected_import_vs_last_release() {
    model("rejected_import_vs_last_release", || {
        let (cache, kernel) = setup();
        let a = import(&cache, 0);
        let t = thread::spawn(move || drop(a));
        let refused = cache.import(buf(0), &ImportDesc::min_size(2 * SIZE));
        let too_small = matches!(refused, Err(BoError::TooSmall { .. }));
        drop(refused);
        if let Some(b) = try_import(&cache, &kernel, 1) {
            kernel.use_bo(&b, 1);
        }
        t.join().unwrap();
        assert!(too_small);
        check_end(cache, &kernel);
    });
}
