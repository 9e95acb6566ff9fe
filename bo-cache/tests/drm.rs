//! The real-DRM tier: the cache on a render node's own file description (`DrmKernel`), with
//! real dma-bufs, checked against the kernel itself.
//!
//! The first tests (opening) run everywhere: they need no DRM device. The tier tests need a
//! render node (`/dev/dri/renderD*`) and a dma-buf exporter: `/dev/udmabuf` (sealed memfds
//! turned into dma-bufs), or else dumb buffers exported from the device's primary node (a
//! second file description, as IGT and libdrm's tests do). Without them each tier test prints
//! `SKIP <test>: <reason>` and passes; with `GPUSVC_REQUIRE_DRM=1` it fails instead.

use std::num::NonZeroU32;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use bo_cache::{
    BoCache, BoError, CacheConfig, DmaBufSource, DrmKernel, Errno, Identity, ImportDesc, Kernel,
    KernelOp, PlaneDesc, fstat_identity, lseek_size,
};
use rustix::fs::{SeekFrom, seek};

mod common;
use common::passed_through_child;

/// The variable that turns a missing render node or exporter from a skip into a failure.
const REQUIRE_DRM_ENV: &str = "GPUSVC_REQUIRE_DRM";

fn drm_required() -> bool {
    std::env::var(REQUIRE_DRM_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

// ---- opening: runs everywhere ----

#[test]
fn open_refuses_what_is_not_a_render_node_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("renderD999");
    assert!(matches!(
        DrmKernel::open(&missing).unwrap_err(),
        BoError::Kernel {
            op: KernelOp::Open,
            errno: Errno::NOENT
        }
    ));
    let file = dir.path().join("file");
    std::fs::write(&file, b"not a device").unwrap();
    let fifo = dir.path().join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let link = dir.path().join("link-to-null");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    // A FIFO with no writer would block a plain open forever; this one must return at once.
    let started = Instant::now();
    for path in [
        file.as_path(),
        fifo.as_path(),
        Path::new("/dev/null"),
        &link,
    ] {
        let err = DrmKernel::open(path).unwrap_err();
        assert!(
            matches!(err, BoError::NotADrmDevice { .. }),
            "{}: {err:?}",
            path.display()
        );
        assert!(matches!(
            BoCache::open(path).unwrap_err(),
            BoError::NotADrmDevice { .. }
        ));
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    // A directory, and a running executable (a plain read-write open would say ETXTBSY).
    for path in [dir.path(), Path::new("/proc/self/exe")] {
        assert!(matches!(
            DrmKernel::open(path).unwrap_err(),
            BoError::NotADrmDevice { .. }
        ));
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"not a device", "untouched");
}

#[test]
fn opening_a_fifo_does_not_open_it() {
    // A writer blocked in open() of a FIFO is released by any reader or read-write open: the
    // check must happen before the node itself is opened.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (fifo, released) = (fifo.clone(), released.clone());
        std::thread::spawn(move || {
            let f = std::fs::OpenOptions::new().write(true).open(&fifo);
            released.store(true, std::sync::atomic::Ordering::SeqCst);
            f.map(drop)
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    assert!(matches!(
        DrmKernel::open(&fifo).unwrap_err(),
        BoError::NotADrmDevice { .. }
    ));
    std::thread::sleep(Duration::from_millis(200));
    let early = released.load(std::sync::atomic::Ordering::SeqCst);
    // Let the writer go: a reader of our own.
    let reader = rustix::fs::open(
        &fifo,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    writer.join().unwrap().unwrap();
    drop(reader);
    assert!(
        !early,
        "DrmKernel::open released the FIFO's writer: it opened the FIFO"
    );
}

#[test]
fn reopen_refuses_fds_that_are_not_render_nodes() {
    let memfd = bo_cache::MemfdKernel::new_buffer(4096).unwrap();
    let null = std::fs::File::open("/dev/null").unwrap();
    for fd in [memfd.as_fd(), null.as_fd()] {
        assert!(matches!(
            BoCache::reopen(fd, CacheConfig::default()).unwrap_err(),
            BoError::NotADrmDevice { .. }
        ));
    }
    // The borrowed fds stay open and usable.
    assert_eq!(lseek_size(memfd.as_fd()).unwrap(), 4096);
}

#[test]
fn render_nodes_lists_only_render_nodes() {
    for node in DrmKernel::render_nodes() {
        let name = node.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("renderD"), "{name}");
    }
}

// ---- the tier ----

/// A render node the cache can open and a source of dma-bufs it imports.
struct Tier {
    node: PathBuf,
    source: DmaBufSource,
}

impl Tier {
    fn buffer(&self, size: u64) -> (OwnedFd, u64) {
        self.source.buffer(size).unwrap_or_else(|e| {
            panic!(
                "{} for {}: {e}",
                self.source.describe(),
                self.node.display()
            )
        })
    }

    fn kernel(&self) -> DrmKernel {
        DrmKernel::open(&self.node).unwrap()
    }

    fn cache(&self) -> BoCache {
        BoCache::open(&self.node).unwrap()
    }
}

/// The tier for `test`, or `None` after printing `SKIP <test>: <reason>` (a failure under
/// `GPUSVC_REQUIRE_DRM=1`).
fn tier(test: &str) -> Option<Tier> {
    match DmaBufSource::find() {
        Ok((node, source)) => {
            println!("drm tier: {} with {}", node.display(), source.describe());
            Some(Tier { node, source })
        }
        Err(reason) if drm_required() => panic!("{REQUIRE_DRM_ENV}=1 but {reason}"),
        Err(reason) => {
            println!("SKIP {test}: {reason}");
            None
        }
    }
}

/// No double close, nothing live.
fn assert_clean(cache: &BoCache) {
    let s = cache.stats();
    assert_eq!(
        (s.double_closes, s.close_errors, s.live),
        (0, 0, 0),
        "{s:?}"
    );
}

#[test]
fn drm_conformance_the_kernels_handle_rules() {
    let Some(t) = tier("drm_conformance_the_kernels_handle_rules") else {
        return;
    };
    let k = t.kernel();
    let (buf, size) = t.buffer(8192);
    let h = k.fd_to_handle(buf.as_fd()).unwrap();
    assert_eq!(
        k.fd_to_handle(buf.as_fd()).unwrap(),
        h,
        "reimport of the same fd"
    );
    let dup = buf.try_clone().unwrap();
    assert_eq!(k.fd_to_handle(dup.as_fd()).unwrap(), h, "a dup");
    let passed = passed_through_child(buf.as_fd());
    assert_eq!(
        k.fd_to_handle(passed.as_fd()).unwrap(),
        h,
        "an fd from a child"
    );
    // Self-export gives the same buffer back.
    let exported = k.handle_to_fd(h, libc::O_CLOEXEC as u32).unwrap();
    assert_eq!(
        fstat_identity(exported.as_fd()).unwrap(),
        fstat_identity(buf.as_fd()).unwrap()
    );
    assert_eq!(k.fd_to_handle(exported.as_fd()).unwrap(), h);
    // Handles are not counted: one close ends it, a second is EINVAL.
    k.gem_close(h).unwrap();
    assert_eq!(k.gem_close(h).unwrap_err(), Errno::INVAL);
    let again = k.fd_to_handle(buf.as_fd()).unwrap();
    k.gem_close(again).unwrap();
    // llseek: SEEK_END gives the size; any other offset is EINVAL on a dma-buf.
    assert_eq!(lseek_size(buf.as_fd()).unwrap(), size);
    assert_eq!(seek(&buf, SeekFrom::Start(1)).unwrap_err(), Errno::INVAL);
}

#[test]
fn drm_t1_same_buffer_via_fd_dup_and_a_child_is_one_object() {
    let Some(t) = tier("drm_t1_same_buffer_via_fd_dup_and_a_child_is_one_object") else {
        return;
    };
    let cache = t.cache();
    let (buf, size) = t.buffer(4096);
    let a = cache
        .import(buf.as_fd(), &ImportDesc::min_size(size))
        .unwrap();
    let dup = buf.try_clone().unwrap();
    let b = cache.import(dup.as_fd(), &ImportDesc::default()).unwrap();
    let passed = passed_through_child(buf.as_fd());
    let c = cache
        .import(passed.as_fd(), &ImportDesc::default())
        .unwrap();
    assert_eq!((a.handle(), a.handle()), (b.handle(), c.handle()));
    assert_eq!((a.ref_count(), a.size()), (3, size));
    drop((a, b));
    assert_eq!(cache.stats().closes, 0);
    drop(c);
    assert_eq!(cache.stats().closes, 1);
    assert_clean(&cache);
}

#[test]
fn drm_t2_size_rules_on_fresh_and_cached_handles() {
    let Some(t) = tier("drm_t2_size_rules_on_fresh_and_cached_handles") else {
        return;
    };
    let cache = t.cache();
    let (buf, size) = t.buffer(8192);
    // Fresh: refused, and the handle the import created is closed again.
    assert_eq!(
        cache
            .import(buf.as_fd(), &ImportDesc::min_size(size + 1))
            .unwrap_err(),
        BoError::TooSmall {
            actual: size,
            required: size + 1
        }
    );
    assert_eq!(
        cache
            .import(buf.as_fd(), &ImportDesc::exact_size(size - 1))
            .unwrap_err(),
        BoError::SizeMismatch {
            actual: size,
            expected: size - 1
        }
    );
    assert_eq!(cache.stats().closes, 2);
    let a = cache
        .import(buf.as_fd(), &ImportDesc::exact_size(size))
        .unwrap();
    // Cached: refused without a close or a count change.
    assert!(
        cache
            .import(buf.as_fd(), &ImportDesc::min_size(size + 1))
            .is_err()
    );
    assert_eq!((a.ref_count(), cache.stats().closes), (1, 2));
    let b = cache
        .import(buf.as_fd(), &ImportDesc::min_size(size))
        .unwrap();
    assert_eq!(b.handle(), a.handle());
    drop((a, b));
    assert_eq!(cache.stats().closes, 3);
    assert_eq!(cache.stats().size_rejects, 3);
    assert_clean(&cache);
}

/// A render-node description shared with the test, with failures injected into the cache's
/// size and identity queries. The test closes and imports behind the cache's back through it,
/// which real hosts must never do; here it shows what the cache does when someone does.
#[derive(Debug, Clone)]
struct Shared {
    kernel: Arc<DrmKernel>,
    fail: Arc<Mutex<Option<(KernelOp, Errno)>>>,
}

impl Shared {
    fn take_fault(&self, op: KernelOp) -> Result<(), Errno> {
        let mut fail = self.fail.lock().unwrap();
        match *fail {
            Some((o, errno)) if o == op => {
                *fail = None;
                Err(errno)
            }
            _ => Ok(()),
        }
    }
}

impl Kernel for Shared {
    fn fd_to_handle(&self, dmabuf: BorrowedFd<'_>) -> Result<NonZeroU32, Errno> {
        self.kernel.fd_to_handle(dmabuf)
    }
    fn gem_close(&self, handle: NonZeroU32) -> Result<(), Errno> {
        self.kernel.gem_close(handle)
    }
    fn handle_to_fd(&self, handle: NonZeroU32, flags: u32) -> Result<OwnedFd, Errno> {
        self.kernel.handle_to_fd(handle, flags)
    }
    fn size(&self, dmabuf: BorrowedFd<'_>) -> Result<u64, Errno> {
        self.take_fault(KernelOp::Size)?;
        self.kernel.size(dmabuf)
    }
    fn identity(&self, dmabuf: BorrowedFd<'_>) -> Result<Identity, Errno> {
        self.take_fault(KernelOp::Identity)?;
        self.kernel.identity(dmabuf)
    }
}

fn shared(t: &Tier) -> (BoCache, Shared) {
    let s = Shared {
        kernel: Arc::new(t.kernel()),
        fail: Arc::new(Mutex::new(None)),
    };
    (BoCache::with_kernel(s.clone()), s)
}

#[test]
fn drm_t3_a_fault_on_a_cached_handle_never_closes_it() {
    let Some(t) = tier("drm_t3_a_fault_on_a_cached_handle_never_closes_it") else {
        return;
    };
    let (cache, s) = shared(&t);
    let (buf, _) = t.buffer(4096);
    let a = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    *s.fail.lock().unwrap() = Some((KernelOp::Identity, Errno::NOMEM));
    assert_eq!(
        cache
            .import(buf.as_fd(), &ImportDesc::default())
            .unwrap_err(),
        BoError::Kernel {
            op: KernelOp::Identity,
            errno: Errno::NOMEM
        }
    );
    assert_eq!((a.ref_count(), cache.stats().closes), (1, 0));
    // The handle is still open on the description: the kernel answers with it again.
    assert_eq!(s.kernel.fd_to_handle(buf.as_fd()).unwrap(), a.handle());
    // A fault on a fresh handle closes that handle.
    let (other, _) = t.buffer(4096);
    *s.fail.lock().unwrap() = Some((KernelOp::Size, Errno::NOMEM));
    assert!(cache.import(other.as_fd(), &ImportDesc::default()).is_err());
    assert_eq!(cache.stats().closes, 1);
    drop(a);
    assert_eq!(cache.stats().closes, 2);
    assert_clean(&cache);
}

#[test]
fn drm_t4_imports_racing_the_last_release_never_double_close() {
    let Some(t) = tier("drm_t4_imports_racing_the_last_release_never_double_close") else {
        return;
    };
    const THREADS: usize = 8;
    const ROUNDS: usize = 2_000;
    let cache = t.cache();
    let (shared_buf, _) = t.buffer(4096);
    let barrier = Barrier::new(THREADS + 2);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..ROUNDS {
                    let bo = cache
                        .import(shared_buf.as_fd(), &ImportDesc::default())
                        .unwrap();
                    assert!(bo.size() >= 4096);
                }
            });
        }
        for _ in 0..2 {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..ROUNDS / 10 {
                    let (own, _) = t.buffer(4096);
                    drop(cache.import(own.as_fd(), &ImportDesc::default()).unwrap());
                }
            });
        }
    });
    let st = cache.stats();
    assert_eq!(
        st.closes, st.misses,
        "every object closed exactly once: {st:?}"
    );
    assert_clean(&cache);
}

#[test]
fn drm_stress_two_threads_import_and_release_one_buffer() {
    let Some(t) = tier("drm_stress_two_threads_import_and_release_one_buffer") else {
        return;
    };
    const ROUNDS: usize = 100_000;
    let cache = t.cache();
    let (buf, _) = t.buffer(4096);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..ROUNDS {
                    drop(cache.import(buf.as_fd(), &ImportDesc::default()).unwrap());
                }
            });
        }
    });
    let st = cache.stats();
    println!("drm stress: {st:?}");
    assert_eq!(st.hits + st.misses, 2 * ROUNDS as u64);
    assert_clean(&cache);
}

#[test]
fn drm_t5_a_recycled_handle_number_is_a_new_object() {
    let Some(t) = tier("drm_t5_a_recycled_handle_number_is_a_new_object") else {
        return;
    };
    let cache = t.cache();
    let (first, _) = t.buffer(4096);
    let a = cache.import(first.as_fd(), &ImportDesc::default()).unwrap();
    let (handle, generation) = (a.handle(), a.generation());
    drop(a);
    let (second, size) = t.buffer(3 * 4096);
    let b = cache
        .import(second.as_fd(), &ImportDesc::default())
        .unwrap();
    assert_eq!(b.size(), size);
    if b.handle() == handle {
        assert_eq!(b.generation(), generation + 1);
    } else {
        println!(
            "the kernel did not recycle handle {handle} (got {})",
            b.handle()
        );
    }
    drop(b);
    assert_eq!(cache.stats().closes, 2);
    assert_clean(&cache);
}

#[test]
fn drm_t6_flags_conflict_leaves_the_count_alone() {
    let Some(t) = tier("drm_t6_flags_conflict_leaves_the_count_alone") else {
        return;
    };
    let cache = t.cache();
    let (buf, _) = t.buffer(4096);
    let a = cache
        .import(
            buf.as_fd(),
            &ImportDesc {
                flags: 1,
                ..ImportDesc::default()
            },
        )
        .unwrap();
    assert_eq!(
        cache
            .import(
                buf.as_fd(),
                &ImportDesc {
                    flags: 2,
                    ..ImportDesc::default()
                }
            )
            .unwrap_err(),
        BoError::FlagsConflict {
            cached: 1,
            requested: 2
        }
    );
    assert_eq!((a.ref_count(), cache.stats().closes), (1, 0));
    drop(a);
    assert_clean(&cache);
}

#[test]
fn drm_t7_a_handle_recycled_behind_the_cache_is_refused_and_never_closed() {
    let Some(t) = tier("drm_t7_a_handle_recycled_behind_the_cache_is_refused_and_never_closed")
    else {
        return;
    };
    let (cache, s) = shared(&t);
    let (a_buf, _) = t.buffer(4096);
    let a = cache.import(a_buf.as_fd(), &ImportDesc::default()).unwrap();
    let h = a.handle();
    // Behind the cache: close its handle, and import another buffer directly.
    s.kernel.gem_close(h).unwrap();
    let (b_buf, _) = t.buffer(8192);
    let hb = s.kernel.fd_to_handle(b_buf.as_fd()).unwrap();
    if hb != h {
        println!("the kernel did not recycle handle {h} (got {hb}); nothing to refuse");
        s.kernel.gem_close(hb).unwrap();
        std::mem::forget(a); // its handle is gone; releasing it would be a double close
        return;
    }
    assert_eq!(
        cache
            .import(b_buf.as_fd(), &ImportDesc::default())
            .unwrap_err(),
        BoError::ForeignHandle { handle: h.get() }
    );
    assert!(matches!(
        a.export_dmabuf(0),
        Err(BoError::ForeignHandle { .. })
    ));
    drop(a);
    // The cache did not close B's handle: the kernel still has it.
    s.kernel
        .gem_close(h)
        .expect("the cache closed a handle it does not own");
    assert_clean(&cache);
    assert_eq!(cache.stats().foreign_handles, 1);
}

#[test]
fn drm_t9_planes_share_objects_and_close_each_handle_once() {
    let Some(t) = tier("drm_t9_planes_share_objects_and_close_each_handle_once") else {
        return;
    };
    let cache = t.cache();
    let (luma, size) = t.buffer(3 * 4096);
    let (other, _) = t.buffer(4096);
    let planes = [
        PlaneDesc {
            fd: luma.as_fd(),
            offset: 0,
            size: 4096,
        },
        PlaneDesc {
            fd: luma.as_fd(),
            offset: 4096,
            size: 4096,
        },
        PlaneDesc {
            fd: luma.as_fd(),
            offset: 8192,
            size: 4096,
        },
        PlaneDesc {
            fd: other.as_fd(),
            offset: 0,
            size: 4096,
        },
    ];
    let set = cache.import_planes(&planes, 0).unwrap();
    assert_eq!(set.distinct_handles().len(), 2);
    assert_eq!(set.planes()[0].ref_count(), 3);
    let bad = [PlaneDesc {
        fd: luma.as_fd(),
        offset: size,
        size: 1,
    }];
    assert!(matches!(
        cache.import_planes(&bad, 0).unwrap_err(),
        BoError::PlaneOutOfBounds { .. }
    ));
    drop(set);
    assert_eq!(cache.stats().closes, 2);
    assert_clean(&cache);
}

#[test]
fn drm_export_goes_through_the_cache_and_reimports_as_the_same_object() {
    let Some(t) = tier("drm_export_goes_through_the_cache_and_reimports_as_the_same_object") else {
        return;
    };
    let cache = t.cache();
    let (buf, _) = t.buffer(4096);
    let a = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    // The handle is valid on the cache's description, which the host may use (not to make
    // or close handles): exporting it there directly gives the same buffer.
    let dev = cache
        .device_fd()
        .expect("a render-node cache has a device fd");
    let direct = drm_ffi::gem::handle_to_fd(dev, a.handle().get(), libc::O_CLOEXEC as u32).unwrap();
    // SAFETY: the ioctl returned a new fd that nothing else owns.
    let direct = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(direct.fd) };
    assert_eq!(
        fstat_identity(direct.as_fd()).unwrap(),
        fstat_identity(buf.as_fd()).unwrap()
    );
    let out = a.export_dmabuf(libc::O_CLOEXEC as u32).unwrap();
    let b = cache.import(out.as_fd(), &ImportDesc::default()).unwrap();
    assert_eq!((b.handle(), a.ref_count()), (a.handle(), 2));
    // A cache reopened from a render-node fd is a description of its own: other handles.
    let node = std::fs::File::open(&t.node).unwrap();
    let other = BoCache::reopen(node.as_fd(), CacheConfig::default()).unwrap();
    let c = other.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    assert_eq!(other.stats().misses, 1);
    drop((a, b, c));
    assert_clean(&cache);
    assert_clean(&other);
}
