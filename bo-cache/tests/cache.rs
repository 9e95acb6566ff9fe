//! The cache on real kernel objects: sealed memfds stand in for dma-bufs, through
//! `MemfdKernel`, whose counters check every close the cache makes.

use std::num::NonZeroU32;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use bo_cache::{
    BoCache, BoError, CacheConfig, Errno, Identity, ImportDesc, Kernel, KernelOp, MemfdKernel,
    PlaneDesc,
};

mod common;
use common::{passed_through_child, raise_fd_limit};

fn buffer(size: u64) -> OwnedFd {
    MemfdKernel::new_buffer(size).unwrap()
}

fn cache() -> (BoCache, MemfdKernel) {
    let k = MemfdKernel::new();
    (BoCache::with_kernel(k.clone()), k)
}

/// Asserts the cache and the fake agree, with no double close anywhere.
fn assert_clean(cache: &BoCache, k: &MemfdKernel) {
    let (s, f) = (cache.stats(), k.stats());
    assert_eq!(s.double_closes, 0, "{s:?}");
    assert_eq!(f.double_closes, 0, "{f:?}");
    assert_eq!(s.live, f.open_handles, "{s:?} {f:?}");
}

#[test]
fn same_buffer_via_fd_dup_and_scm_rights_from_a_child_is_one_object() {
    let (cache, k) = cache();
    let buf = buffer(65536);
    let dup = buf.try_clone().unwrap();
    let passed = passed_through_child(buf.as_fd());
    assert_ne!(passed.as_raw_fd(), buf.as_raw_fd());

    let a = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    let b = cache
        .import(dup.as_fd(), &ImportDesc::min_size(65536))
        .unwrap();
    let c = cache
        .import(passed.as_fd(), &ImportDesc::exact_size(65536))
        .unwrap();
    assert_eq!(a.handle(), b.handle());
    assert_eq!(a.handle(), c.handle());
    assert_eq!(a.ref_count(), 3);
    let s = cache.stats();
    assert_eq!((s.misses, s.hits, s.live, s.closes), (1, 2, 1, 0));
    assert_eq!(k.stats().handles_created, 1);

    drop((a, b));
    assert_eq!(
        cache.stats().closes,
        0,
        "no close while a reference is held"
    );
    assert_eq!(c.size(), 65536);
    drop(c);
    assert_eq!(cache.stats().closes, 1);
    assert_eq!(k.stats().closes, 1);
    assert_eq!(k.stats().open_handles, 0);
    assert_clean(&cache, &k);
}

#[test]
fn size_rules_min_exact_and_equal() {
    let (cache, k) = cache();
    let buf = buffer(4096);
    assert_eq!(
        cache
            .import(buf.as_fd(), &ImportDesc::min_size(8192))
            .unwrap_err(),
        BoError::TooSmall {
            actual: 4096,
            required: 8192
        }
    );
    assert_eq!(
        cache
            .import(buf.as_fd(), &ImportDesc::exact_size(1000))
            .unwrap_err(),
        BoError::SizeMismatch {
            actual: 4096,
            expected: 1000
        }
    );
    let bad = ImportDesc {
        min_size: 20,
        exact_size: Some(10),
        flags: 0,
    };
    assert!(matches!(
        cache.import(buf.as_fd(), &bad),
        Err(BoError::InvalidArgument(_))
    ));
    let a = cache
        .import(buf.as_fd(), &ImportDesc::min_size(4096))
        .unwrap();
    let b = cache
        .import(buf.as_fd(), &ImportDesc::exact_size(4096))
        .unwrap();
    let c = cache.import(buf.as_fd(), &ImportDesc::min_size(1)).unwrap();
    assert_eq!((a.size(), a.ref_count()), (4096, 3));
    assert_eq!(cache.stats().size_rejects, 2);
    drop((a, b, c));
    assert_clean(&cache, &k);
    let (r, _w) = std::io::pipe().unwrap();
    assert!(matches!(
        cache.import(r.as_fd(), &ImportDesc::default()),
        Err(BoError::NotADmaBuf { .. })
    ));
}

#[test]
fn size_reject_on_fresh_handle_closes_it() {
    let (cache, k) = cache();
    let buf = buffer(4096);
    for desc in [ImportDesc::min_size(4097), ImportDesc::exact_size(2048)] {
        assert!(cache.import(buf.as_fd(), &desc).is_err());
        assert_eq!(k.stats().open_handles, 0, "the fresh handle was closed");
    }
    let s = cache.stats();
    assert_eq!((s.closes, s.size_rejects, s.live, s.misses), (2, 2, 0, 0));
    assert_clean(&cache, &k);
}

#[test]
fn size_reject_on_cached_handle_keeps_count_and_handle() {
    let (cache, k) = cache();
    let buf = buffer(4096);
    let a = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    for desc in [ImportDesc::min_size(4097), ImportDesc::exact_size(2048)] {
        assert!(cache.import(buf.as_fd(), &desc).is_err());
        assert_eq!(a.ref_count(), 1);
        assert_eq!(
            k.handle_identity(a.handle()),
            Some(bo_cache::fstat_identity(buf.as_fd()).unwrap())
        );
    }
    assert_eq!(cache.stats().closes, 0);
    assert_eq!(cache.stats().size_rejects, 2);
    drop(a);
    assert_eq!(cache.stats().closes, 1);
    assert_clean(&cache, &k);
}

#[test]
fn faults_on_a_cached_handle_never_close_it_nor_touch_its_count() {
    let (cache, k) = cache();
    let buf = buffer(4096);
    let a = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    k.fail_next(KernelOp::Identity, Errno::IO);
    assert_eq!(
        cache
            .import(buf.as_fd(), &ImportDesc::default())
            .unwrap_err(),
        BoError::Kernel {
            op: KernelOp::Identity,
            errno: Errno::IO
        }
    );
    k.fail_next(KernelOp::FdToHandle, Errno::NOMEM);
    assert_eq!(
        cache
            .import(buf.as_fd(), &ImportDesc::default())
            .unwrap_err(),
        BoError::Kernel {
            op: KernelOp::FdToHandle,
            errno: Errno::NOMEM
        }
    );
    assert_eq!(a.ref_count(), 1);
    assert_eq!(cache.stats().closes, 0);
    assert_eq!(k.stats().open_handles, 1);
    // The object is still usable and still the one the buffer maps to.
    let b = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    assert_eq!((b.handle(), b.ref_count(), b.size()), (a.handle(), 2, 4096));
    drop((a, b));
    assert_eq!(cache.stats().closes, 1);
    assert_clean(&cache, &k);
}

#[test]
fn faults_on_a_fresh_handle_close_it() {
    let (cache, k) = cache();
    let buf = buffer(4096);
    k.fail_next(KernelOp::Size, Errno::IO);
    assert_eq!(
        cache
            .import(buf.as_fd(), &ImportDesc::default())
            .unwrap_err(),
        BoError::Kernel {
            op: KernelOp::Size,
            errno: Errno::IO
        }
    );
    k.fail_next(KernelOp::Size, Errno::SPIPE);
    assert_eq!(
        cache
            .import(buf.as_fd(), &ImportDesc::default())
            .unwrap_err(),
        BoError::NotADmaBuf {
            errno: Errno::SPIPE
        }
    );
    k.fail_next(KernelOp::Identity, Errno::IO);
    assert!(cache.import(buf.as_fd(), &ImportDesc::default()).is_err());
    assert_eq!(k.stats().open_handles, 0);
    assert_eq!(cache.stats().closes, 3);
    let a = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    assert_eq!(a.generation(), 1, "failed imports never filled the slot");
    drop(a);
    assert_clean(&cache, &k);
}

#[test]
fn flags_conflict_on_reimport_leaves_count_unchanged() {
    let (cache, k) = cache();
    let buf = buffer(4096);
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
    assert_eq!((a.ref_count(), a.flags()), (1, 1));
    assert_eq!(cache.stats().closes, 0);
    drop(a);
    assert_clean(&cache, &k);
}

#[test]
fn recycled_handle_gets_a_new_generation_and_the_new_size() {
    let (cache, k) = cache();
    let first = buffer(4096);
    let a = cache.import(first.as_fd(), &ImportDesc::default()).unwrap();
    let (handle, generation) = (a.handle(), a.generation());
    drop(a);
    let second = buffer(12288);
    let b = cache
        .import(second.as_fd(), &ImportDesc::default())
        .unwrap();
    assert_eq!(
        b.handle(),
        handle,
        "the kernel recycles the lowest free number"
    );
    assert_eq!(b.generation(), generation + 1);
    assert_eq!(b.size(), 12288);
    assert_eq!(cache.lookup(handle).unwrap().size(), 12288);
    drop(b);
    assert_eq!(cache.stats().closes, 2);
    assert_clean(&cache, &k);
}

#[test]
fn a_handle_found_naming_another_buffer_is_never_exported() {
    let (cache, k) = cache();
    let y = buffer(4096);
    let yo = cache.import(y.as_fd(), &ImportDesc::default()).unwrap();
    // Someone closes the cache's handle; another buffer gets the number through the cache.
    k.gem_close(yo.handle()).unwrap();
    let x = buffer(8192);
    assert_eq!(
        cache.import(x.as_fd(), &ImportDesc::default()).unwrap_err(),
        BoError::ForeignHandle {
            handle: yo.handle().get()
        }
    );
    // The stale object's number now names X: exporting it would hand out X.
    assert_eq!(
        yo.export_dmabuf(0).unwrap_err(),
        BoError::ForeignHandle {
            handle: yo.handle().get()
        }
    );
    drop(yo);
    assert_eq!(k.stats().double_closes, 0);
}

#[test]
fn a_number_found_foreign_is_refused_for_that_buffer_and_taken_back_for_another() {
    let (cache, k) = cache();
    let y = buffer(4096);
    let yo = cache.import(y.as_fd(), &ImportDesc::default()).unwrap();
    let h = yo.handle();
    k.gem_close(h).unwrap(); // behind the cache's back
    let x = buffer(8192);
    let foreign = BoError::ForeignHandle { handle: h.get() };
    assert_eq!(
        cache.import(x.as_fd(), &ImportDesc::default()).unwrap_err(),
        foreign
    ); // h names X now: whose handle is it? The cache cannot tell, so it is not the cache's.
    assert!(cache.lookup(h).is_none(), "h has no owner in the cache");
    drop(yo); // the stale object's release does not close h
    assert_eq!(
        cache.import(x.as_fd(), &ImportDesc::default()).unwrap_err(),
        foreign,
        "X under h stays refused once the stale object is gone"
    );
    assert_eq!(k.stats().open_handles, 1, "and h stays open");
    k.gem_close(h).unwrap(); // X's owner closes it: no double close
    // The kernel makes h anew for Y, through the cache: the cache made it, the cache closes it.
    let y2 = cache.import(y.as_fd(), &ImportDesc::default()).unwrap();
    assert_eq!(y2.handle(), h);
    let exported = y2.export_dmabuf(0).unwrap();
    assert_eq!(
        bo_cache::fstat_identity(exported.as_fd()).unwrap(),
        bo_cache::fstat_identity(y.as_fd()).unwrap()
    );
    assert_eq!(cache.lookup(h).unwrap().size(), 4096);
    drop(y2);
    assert_eq!(k.stats().open_handles, 0, "h was left open");
    let s = cache.stats();
    assert_eq!(
        (s.closes, s.double_closes, s.foreign_handles, s.live),
        (1, 0, 2, 0)
    );
    assert_eq!(k.stats().double_closes, 0);
}

#[test]
fn foreign_recycled_handle_is_refused_and_never_closed() {
    let (cache, k) = cache();
    let a_buf = buffer(4096);
    let a = cache.import(a_buf.as_fd(), &ImportDesc::default()).unwrap();
    // Someone else closes the cache's handle and imports another buffer on the description.
    k.gem_close(a.handle()).unwrap();
    let b_buf = buffer(8192);
    let b_handle = k.fd_to_handle(b_buf.as_fd()).unwrap();
    assert_eq!(b_handle, a.handle(), "the number was recycled");
    assert_eq!(
        cache
            .import(b_buf.as_fd(), &ImportDesc::default())
            .unwrap_err(),
        BoError::ForeignHandle {
            handle: b_handle.get()
        }
    );
    assert_eq!(cache.stats().foreign_handles, 1);
    assert_eq!(a.ref_count(), 1);
    // The stale object's last release must not close the other owner's handle.
    drop(a);
    let s = cache.stats();
    assert_eq!((s.closes, s.double_closes, s.live), (0, 0, 0));
    let b_id: Identity = bo_cache::fstat_identity(b_buf.as_fd()).unwrap();
    assert_eq!(
        k.handle_identity(b_handle),
        Some(b_id),
        "the foreign handle is still open"
    );
    // Nor does anything after: importing B again through the cache (the slot has no live
    // object now) must not adopt the other owner's handle.
    assert_eq!(
        cache
            .import(b_buf.as_fd(), &ImportDesc::default())
            .unwrap_err(),
        BoError::ForeignHandle {
            handle: b_handle.get()
        }
    );
    k.gem_close(b_handle)
        .expect("the other owner's close: the cache closed its handle");
    assert_eq!(k.stats().double_closes, 0);
    assert_eq!(cache.stats().double_closes, 0);
}

#[test]
fn import_racing_last_release_never_double_closes() {
    const THREADS: usize = 8;
    const ROUNDS: usize = 300;
    let (cache, k) = cache();
    let shared = buffer(4096);
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (cache, barrier, shared) = (&cache, &barrier, &shared);
            s.spawn(move || {
                let own = shared.try_clone().unwrap();
                barrier.wait();
                for i in 0..ROUNDS {
                    if t % 2 == 0 {
                        // Import and release the shared buffer: each release may be the last.
                        let bo = cache
                            .import(own.as_fd(), &ImportDesc::min_size(4096))
                            .unwrap();
                        assert_eq!(bo.size(), 4096, "never a stale or reset slot");
                        if i % 3 == 0 {
                            let again = cache.lookup(bo.handle()).expect("we hold a reference");
                            assert_eq!(again.size(), 4096);
                        }
                        let clone = bo.clone();
                        drop(bo);
                        drop(clone);
                    } else {
                        // Churn distinct buffers so handle numbers are recycled under the race.
                        let size = 4096 * (1 + (t * ROUNDS + i) as u64 % 7);
                        let other = buffer(size);
                        let bo = cache
                            .import(other.as_fd(), &ImportDesc::exact_size(size))
                            .unwrap();
                        assert_eq!(bo.size(), size);
                    }
                }
            });
        }
    });
    let (st, f) = (cache.stats(), k.stats());
    assert_eq!(st.live, 0);
    assert_eq!(f.open_handles, 0);
    assert_eq!(st.double_closes, 0);
    assert_eq!(f.double_closes, 0);
    assert_eq!(
        st.closes, st.misses,
        "every object closed exactly once: {st:?}"
    );
    assert_eq!(f.closes, st.closes);
    assert_eq!(st.hits + st.misses, (THREADS * ROUNDS) as u64);
}

#[test]
fn lookup_returns_live_objects_only() {
    let (cache, k) = cache();
    let h1 = NonZeroU32::new(1).unwrap();
    assert!(cache.lookup(h1).is_none());
    let buf = buffer(4096);
    let a = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    let b = cache.lookup(a.handle()).unwrap();
    assert_eq!((b.ref_count(), b.size()), (2, 4096));
    assert!(cache.lookup(NonZeroU32::new(u32::MAX).unwrap()).is_none());
    drop((a, b));
    assert!(cache.lookup(h1).is_none());
    assert_clean(&cache, &k);
}

#[test]
fn dense_1024_handles_fit_in_64_kib() {
    raise_fd_limit();
    let (cache, k) = cache();
    let bos: Vec<_> = (0..1024)
        .map(|_| {
            cache
                .import(buffer(4096).as_fd(), &ImportDesc::default())
                .unwrap()
        })
        .collect();
    assert_eq!(bos.last().unwrap().handle().get(), 1024);
    let s = cache.stats();
    assert!(s.table_bytes <= 64 * 1024, "{} bytes", s.table_bytes);
    drop(bos);
    assert_eq!(cache.stats().closes, 1024);
    assert_clean(&cache, &k);
}

#[test]
fn sparse_handles_stay_under_the_table_cap() {
    raise_fd_limit();
    let k = MemfdKernel::sparse(0x5eed);
    let config = CacheConfig::default();
    let cache = BoCache::with_config(k.clone(), config);
    let bos: Vec<_> = (0..1024u64)
        .map(|i| {
            cache
                .import(buffer(4096 + i).as_fd(), &ImportDesc::default())
                .unwrap()
        })
        .collect();
    assert!(
        bos.iter().any(|b| b.handle().get() > 1 << 30),
        "handles are sparse"
    );
    for (i, b) in bos.iter().enumerate() {
        assert_eq!(cache.lookup(b.handle()).unwrap().size(), 4096 + i as u64);
    }
    let s = cache.stats();
    assert!(s.table_bytes <= config.max_table_bytes, "{s:?}");
    drop(bos);
    assert_eq!(cache.stats().closes, 1024);
    assert_clean(&cache, &k);
}

#[test]
fn table_full_closes_the_fresh_handle() {
    let k = MemfdKernel::sparse(9);
    // Room for the root and one path to a leaf, not for a second path.
    let cache = BoCache::with_config(
        k.clone(),
        CacheConfig {
            max_table_bytes: 20 * 1024,
            ..CacheConfig::default()
        },
    );
    let first = buffer(4096);
    let a = cache.import(first.as_fd(), &ImportDesc::default()).unwrap();
    let second = buffer(4096);
    let err = cache
        .import(second.as_fd(), &ImportDesc::default())
        .unwrap_err();
    assert!(
        matches!(
            err,
            BoError::TableFull {
                limit_bytes: 20480,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(k.stats().open_handles, 1, "the fresh handle was closed");
    assert_eq!(cache.stats().closes, 1);
    assert!(cache.stats().table_bytes <= 20 * 1024);
    drop(a);
    assert_clean(&cache, &k);
}

#[test]
fn planes_share_objects_and_close_each_handle_once() {
    let (cache, k) = cache();
    let nv12 = buffer(6144);
    let other = buffer(4096);
    let planes = [
        PlaneDesc {
            fd: nv12.as_fd(),
            offset: 0,
            size: 4096,
        },
        PlaneDesc {
            fd: nv12.as_fd(),
            offset: 4096,
            size: 1024,
        },
        PlaneDesc {
            fd: nv12.as_fd(),
            offset: 5120,
            size: 1024,
        },
        PlaneDesc {
            fd: other.as_fd(),
            offset: 0,
            size: 4096,
        },
    ];
    let set = cache.import_planes(&planes, 0).unwrap();
    assert_eq!(set.distinct_handles().len(), 2);
    let p = set.planes();
    assert_eq!(p[0].handle(), p[2].handle());
    assert_ne!(p[0].handle(), p[3].handle());
    assert_eq!(p[0].ref_count(), 3);
    drop(set);
    assert_eq!(cache.stats().closes, 2);
    assert_eq!(k.stats().closes, 2);
    assert_clean(&cache, &k);
}

#[test]
fn plane_out_of_bounds_and_overflow_are_refused() {
    let (cache, k) = cache();
    let nv12 = buffer(6144);
    let other = buffer(4096);
    let out = [PlaneDesc {
        fd: nv12.as_fd(),
        offset: 5120,
        size: 2048,
    }];
    assert_eq!(
        cache.import_planes(&out, 0).unwrap_err(),
        BoError::PlaneOutOfBounds {
            plane: 0,
            offset: 5120,
            size: 2048,
            buffer_size: 6144
        }
    );
    let overflow = [PlaneDesc {
        fd: nv12.as_fd(),
        offset: u64::MAX,
        size: 2,
    }];
    assert!(matches!(
        cache.import_planes(&overflow, 0),
        Err(BoError::InvalidArgument(_))
    ));
    assert!(matches!(
        cache.import_planes(&[], 0),
        Err(BoError::InvalidArgument(_))
    ));
    // The second plane fails: the first plane's reference is released, its handle closed.
    let mixed = [
        PlaneDesc {
            fd: nv12.as_fd(),
            offset: 0,
            size: 4096,
        },
        PlaneDesc {
            fd: other.as_fd(),
            offset: 4096,
            size: 1,
        },
    ];
    assert!(matches!(
        cache.import_planes(&mixed, 0),
        Err(BoError::PlaneOutOfBounds { plane: 1, .. })
    ));
    assert_eq!(k.stats().open_handles, 0);
    assert_clean(&cache, &k);
}

/// A kernel that reports when the cache frees it.
#[derive(Debug)]
struct DropFlag {
    k: MemfdKernel,
    dropped: Arc<AtomicBool>,
}

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

impl Kernel for DropFlag {
    fn fd_to_handle(&self, fd: BorrowedFd<'_>) -> Result<NonZeroU32, Errno> {
        self.k.fd_to_handle(fd)
    }
    fn gem_close(&self, h: NonZeroU32) -> Result<(), Errno> {
        self.k.gem_close(h)
    }
    fn handle_to_fd(&self, h: NonZeroU32, flags: u32) -> Result<OwnedFd, Errno> {
        self.k.handle_to_fd(h, flags)
    }
}

#[test]
fn cache_dropped_with_live_objects_frees_on_last_release() {
    let k = MemfdKernel::new();
    let dropped = Arc::new(AtomicBool::new(false));
    let cache = BoCache::with_kernel(DropFlag {
        k: k.clone(),
        dropped: dropped.clone(),
    });
    let buf = buffer(4096);
    let a = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    drop(cache);
    assert!(
        !dropped.load(Ordering::SeqCst),
        "a live object keeps the cache's internals"
    );
    let b = a.clone();
    let exported = b.export_dmabuf(0).unwrap();
    assert_eq!(k.fd_to_handle(exported.as_fd()).unwrap(), a.handle());
    drop(a);
    assert_eq!(k.stats().closes, 0);
    drop(b);
    assert_eq!(
        (
            k.stats().closes,
            k.stats().open_handles,
            k.stats().double_closes
        ),
        (1, 0, 0)
    );
    assert!(
        dropped.load(Ordering::SeqCst),
        "the last release freed the cache"
    );

    // And a cache dropped with nothing live frees at once.
    let dropped = Arc::new(AtomicBool::new(false));
    drop(BoCache::with_kernel(DropFlag {
        k: MemfdKernel::new(),
        dropped: dropped.clone(),
    }));
    assert!(dropped.load(Ordering::SeqCst));
}

#[test]
fn a_fake_kernel_has_no_device_fd() {
    let (cache, _k) = cache();
    assert!(cache.device_fd().is_none());
}

#[test]
fn fds_are_borrowed_never_closed() {
    let (cache, k) = cache();
    let buf = buffer(4096);
    let a = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    drop(a);
    let st = rustix::fs::fstat(&buf).unwrap();
    assert_eq!(st.st_size, 4096, "the caller's fd is still open");
    let exported = {
        let b = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
        let e = b.export_dmabuf(0).unwrap();
        let c = cache.import(e.as_fd(), &ImportDesc::default()).unwrap();
        assert_eq!(
            (c.handle(), c.ref_count()),
            (b.handle(), 2),
            "an export re-imports to the same object"
        );
        e
    };
    assert!(
        rustix::fs::fstat(&exported).is_ok(),
        "exported fds belong to the caller"
    );
    assert!(rustix::fs::fstat(&buf).is_ok());
    assert_clean(&cache, &k);
}

#[test]
fn the_reference_cap_refuses_imports_and_try_clone_and_changes_nothing() {
    let k = MemfdKernel::new();
    let cache = BoCache::with_config(
        k.clone(),
        CacheConfig {
            max_refs: 3,
            ..CacheConfig::default()
        },
    );
    let buf = buffer(4096);
    let a = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    let b = a.try_clone().unwrap();
    let c = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    assert_eq!(a.ref_count(), 3);
    let limit = 3;
    let handle = a.handle().get();
    for err in [
        a.try_clone().unwrap_err(),
        cache
            .import(buf.as_fd(), &ImportDesc::default())
            .unwrap_err(),
    ] {
        assert_eq!(err, BoError::TooManyReferences { handle, limit }, "{err}");
    }
    assert_eq!(a.ref_count(), 3, "a refused reference changes no count");
    assert_eq!(k.stats().open_handles, 1, "and closes nothing");
    drop(c);
    let d = a.try_clone().expect("below the cap again");
    drop((a, b, d));
    assert_eq!(cache.stats().closes, 1);
    assert_eq!(cache.stats().live, 0);
    assert_clean(&cache, &k);

    // 0 counts as 1: the first import works, every further reference is refused.
    let one = BoCache::with_config(
        MemfdKernel::new(),
        CacheConfig {
            max_refs: 0,
            ..CacheConfig::default()
        },
    );
    let x = one.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    assert!(matches!(
        x.try_clone(),
        Err(BoError::TooManyReferences { limit: 1, .. })
    ));
}
