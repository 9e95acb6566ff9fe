//! The bo-cache C ABI exercised from Rust through the exported `extern "C"` functions, on real
//! sealed memfds (the memfd-backed cache): one object per buffer, size rules, planes, export,
//! and every bad input the ABI promises to turn into a code, with 0 double closes.

mod common;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;

use bo_cache::MemfdKernel;
use common::*;
use gpusvc::*;
use gpusvc_result::*;

/// A memfd-backed cache, freed on drop after checking it never double-closed.
struct Cache(*mut gpusvc_bo_cache);

/// What an output slot holds before a call: a value no call writes, so an error must leave it.
fn unwritten<T>() -> *mut T {
    ptr::without_provenance_mut(0x5e1)
}

impl Cache {
    fn new() -> Self {
        // SAFETY: a live out slot.
        Cache(written(ptr::null_mut(), |out| unsafe {
            gpusvc_bo_cache_new_memfd(out)
        }))
    }

    fn with_config(config: &gpusvc_bo_cache_config) -> Self {
        // SAFETY: a live config and out slot.
        Cache(written(ptr::null_mut(), |out| unsafe {
            gpusvc_bo_cache_new_memfd_with_config(config, out)
        }))
    }

    fn import(&self, fd: RawFd, desc: gpusvc_bo_import_desc) -> Result<Bo, gpusvc_result> {
        let mut out = unwritten();
        // SAFETY: a live handle, desc and out slot.
        match unsafe { gpusvc_bo_cache_import(self.0, fd, &desc, &mut out) } {
            GPUSVC_OK => Ok(Bo(out)),
            e => {
                assert_eq!(out, unwritten(), "an output was written on error {e:?}");
                Err(e)
            }
        }
    }

    fn import_min(&self, fd: RawFd, min_size: u64) -> Result<Bo, gpusvc_result> {
        self.import(
            fd,
            gpusvc_bo_import_desc {
                struct_size: size_of::<gpusvc_bo_import_desc>(),
                min_size,
                ..Default::default()
            },
        )
    }

    fn stats(&self) -> gpusvc_bo_cache_stats_snapshot {
        // SAFETY: a live handle and out slot.
        written(Default::default(), |out| unsafe {
            gpusvc_bo_cache_stats(self.0, out)
        })
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let s = self.stats();
        if !std::thread::panicking() {
            // Every test releases its objects before its cache (declared after it).
            assert_eq!((s.double_closes, s.close_errors, s.live), (0, 0, 0));
        }
        // SAFETY: a live handle, freed once.
        assert_eq!(unsafe { gpusvc_bo_cache_free(self.0) }, OK);
    }
}

/// One `gpusvc_bo`, freed on drop.
struct Bo(*mut gpusvc_bo);

impl Bo {
    fn handle(&self) -> u32 {
        // SAFETY: a live handle and out slot.
        written(0, |out| unsafe { gpusvc_bo_handle(self.0, out) })
    }
    fn size(&self) -> u64 {
        // SAFETY: a live handle and out slot.
        written(0, |out| unsafe { gpusvc_bo_size(self.0, out) })
    }
    fn ref_count(&self) -> u32 {
        // SAFETY: a live handle and out slot.
        written(0, |out| unsafe { gpusvc_bo_ref_count(self.0, out) })
    }
    fn ref_(&self) -> Bo {
        self.try_ref().unwrap()
    }
    /// `gpusvc_bo_ref`; on error the output slot is checked untouched.
    fn try_ref(&self) -> Result<Bo, gpusvc_result> {
        let mut out = unwritten();
        // SAFETY: a live handle and out slot.
        match unsafe { gpusvc_bo_ref(self.0, &mut out) } {
            GPUSVC_OK => Ok(Bo(out)),
            e => {
                assert_eq!(out, unwritten(), "an output was written on error {e:?}");
                Err(e)
            }
        }
    }
    fn flags(&self) -> u32 {
        // SAFETY: a live handle and out slot.
        written(0, |out| unsafe { gpusvc_bo_flags(self.0, out) })
    }
    /// `gpusvc_bo_export`: the fd, or the code with the output checked untouched.
    fn export(&self, flags: u32) -> Result<OwnedFd, gpusvc_result> {
        let mut fd = -7;
        // SAFETY: a live handle and out slot.
        match unsafe { gpusvc_bo_export(self.0, flags, &mut fd) } {
            // SAFETY: the exported fd is ours.
            GPUSVC_OK => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            e => {
                assert_eq!(fd, -7, "an output was written on error {e:?}");
                Err(e)
            }
        }
    }
}

impl Drop for Bo {
    fn drop(&mut self) {
        // SAFETY: a live handle, freed once.
        assert_eq!(unsafe { gpusvc_bo_free(self.0) }, OK);
    }
}

fn buffer(size: u64) -> OwnedFd {
    MemfdKernel::new_buffer(size).expect("sealed memfd")
}

/// A memfd of `size` bytes without the size seals (not importable).
fn unsealed_memfd(size: u64) -> OwnedFd {
    // SAFETY: a static NUL-terminated name; the result is checked.
    let fd = unsafe { libc::memfd_create(c"unsealed".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a fresh fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a live fd.
    assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), size as i64) }, 0);
    fd
}

#[test]
fn the_same_fd_twice_a_dup_and_an_export_are_one_object_closed_once() {
    let cache = Cache::new();
    let buf = buffer(4096);
    let a = cache.import_min(buf.as_raw_fd(), 4096).unwrap();
    let b = cache.import_min(buf.as_raw_fd(), 0).unwrap();
    assert_ne!(a.0, b.0, "each import is its own gpusvc_bo");
    assert_eq!(a.handle(), b.handle());
    assert_eq!((a.size(), a.ref_count()), (4096, 2));
    let dup = buf.try_clone().unwrap();
    let c = cache.import_min(dup.as_raw_fd(), 0).unwrap();
    assert_eq!(c.handle(), a.handle());

    let mut fd = -1;
    // SAFETY: a live handle and out slot.
    assert_eq!(unsafe { gpusvc_bo_export(a.0, 0, &mut fd) }, OK);
    assert!(fd >= 0);
    // SAFETY: the exported fd is ours.
    let exported = unsafe { OwnedFd::from_raw_fd(fd) };
    drop((buf, dup)); // fds are borrowed: the objects live on
    let d = cache.import_min(exported.as_raw_fd(), 4096).unwrap();
    assert_eq!(d.handle(), a.handle());
    assert_eq!(d.ref_count(), 4);

    let s = cache.stats();
    assert_eq!((s.misses, s.hits, s.live, s.closes), (1, 3, 1, 0));
    drop((a, b, c));
    assert_eq!(cache.stats().closes, 0);
    drop(d);
    let s = cache.stats();
    assert_eq!((s.closes, s.live, s.double_closes), (1, 0, 0));
}

#[test]
fn ref_and_free_count_references_and_a_double_free_is_an_invalid_handle() {
    let cache = Cache::new();
    let buf = buffer(256);
    let a = cache.import_min(buf.as_raw_fd(), 0).unwrap();
    let b = a.ref_();
    assert_eq!((a.ref_count(), b.handle()), (2, a.handle()));
    let raw = b.0;
    drop(b);
    assert_eq!(a.ref_count(), 1);
    // The second free of the same gpusvc_bo releases nothing.
    // SAFETY: a handle value; the registry checks it.
    assert_eq!(unsafe { gpusvc_bo_free(raw) }, GPUSVC_INVALID_HANDLE);
    assert_eq!(a.ref_count(), 1);
    // A freed handle is refused everywhere, and a cache handle is not a bo.
    let mut h = 0u32;
    // SAFETY: handle values checked by the registry; a live out slot.
    unsafe {
        assert_eq!(gpusvc_bo_handle(raw, &mut h), GPUSVC_INVALID_HANDLE);
        assert_eq!(
            gpusvc_bo_handle(cache.0.cast(), &mut h),
            GPUSVC_INVALID_HANDLE
        );
        assert_eq!(gpusvc_bo_free(ptr::null_mut()), OK);
        assert_eq!(gpusvc_bo_cache_free(ptr::null_mut()), OK);
    }
    assert_eq!(h, 0);
    drop(a);
    assert_eq!(cache.stats().closes, 1);
}

#[test]
fn size_rules_give_their_codes_and_leave_the_cached_object_alone() {
    let cache = Cache::new();
    let buf = buffer(4096);
    let fd = buf.as_raw_fd();
    let desc = |min_size, exact_size| gpusvc_bo_import_desc {
        struct_size: size_of::<gpusvc_bo_import_desc>(),
        min_size,
        exact_size,
        flags: 0,
    };
    // Fresh handle: refused and closed again.
    assert_eq!(
        cache.import(fd, desc(8192, 0)).err(),
        Some(GPUSVC_BO_CACHE_TOO_SMALL)
    );
    assert_eq!(
        cache.import(fd, desc(0, 4000)).err(),
        Some(GPUSVC_BO_CACHE_SIZE_MISMATCH)
    );
    let s = cache.stats();
    assert_eq!((s.size_rejects, s.closes, s.live), (2, 2, 0));
    // exact_size below min_size contradicts itself.
    assert_eq!(
        cache.import(fd, desc(4096, 100)).err(),
        Some(GPUSVC_INVALID_ARGUMENT)
    );

    let a = cache.import(fd, desc(4096, 4096)).unwrap();
    // Cached handle: refused, neither closed nor recounted.
    assert_eq!(
        cache.import(fd, desc(4097, 0)).err(),
        Some(GPUSVC_BO_CACHE_TOO_SMALL)
    );
    assert_eq!(
        cache.import(fd, desc(0, 1)).err(),
        Some(GPUSVC_BO_CACHE_SIZE_MISMATCH)
    );
    let flagged = gpusvc_bo_import_desc {
        struct_size: size_of::<gpusvc_bo_import_desc>(),
        flags: 1,
        ..desc(0, 0)
    };
    assert_eq!(
        cache.import(fd, flagged).err(),
        Some(GPUSVC_BO_CACHE_FLAGS_CONFLICT)
    );
    assert_eq!(a.ref_count(), 1);
    assert_eq!(cache.stats().closes, 2);
    drop(a);
    assert_eq!(cache.stats().closes, 3);
}

#[test]
fn bad_fds_are_not_a_dmabuf_and_create_nothing() {
    let cache = Cache::new();
    assert_eq!(
        cache.import_min(-1, 0).err(),
        Some(GPUSVC_BO_CACHE_NOT_A_DMABUF)
    );
    // An fd that is not open (a high number: a just-closed one could be reused by another test
    // thread meanwhile).
    assert_eq!(
        cache.import_min(i32::MAX, 0).err(),
        Some(GPUSVC_BO_CACHE_NOT_A_DMABUF)
    );
    // A regular file, a pipe, and a memfd without the size seals.
    let file = tempfile::tempfile().unwrap();
    file.set_len(4096).unwrap();
    assert_eq!(
        cache.import_min(file.as_raw_fd(), 0).err(),
        Some(GPUSVC_BO_CACHE_NOT_A_DMABUF)
    );
    let mut fds = [0; 2];
    // SAFETY: a live array of two fds.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: two fresh fds we own.
    let pipe = unsafe { [OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])] };
    assert_eq!(
        cache.import_min(pipe[0].as_raw_fd(), 0).err(),
        Some(GPUSVC_BO_CACHE_NOT_A_DMABUF)
    );
    let unsealed = unsealed_memfd(4096);
    assert_eq!(
        cache.import_min(unsealed.as_raw_fd(), 0).err(),
        Some(GPUSVC_BO_CACHE_NOT_A_DMABUF)
    );
    let s = cache.stats();
    assert_eq!((s.misses, s.live, s.closes), (0, 0, 0));
}

#[test]
fn null_arguments_are_refused_and_write_nothing() {
    let cache = Cache::new();
    let buf = buffer(64);
    let desc = gpusvc_bo_import_desc::default();
    let mut out = ptr::null_mut();
    let mut cache_out = ptr::null_mut();
    // SAFETY: NULL pointers are part of the contract; the other pointers are live.
    unsafe {
        assert_eq!(
            gpusvc_bo_cache_new_memfd(ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_bo_cache_new_memfd_with_config(ptr::null(), &mut cache_out),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_bo_cache_import(ptr::null(), buf.as_raw_fd(), &desc, &mut out),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_bo_cache_import(cache.0, buf.as_raw_fd(), ptr::null(), &mut out),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_bo_cache_import(cache.0, buf.as_raw_fd(), &desc, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert!(out.is_null() && cache_out.is_null());
        assert_eq!(
            gpusvc_bo_cache_stats(cache.0, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_bo_cache_config_defaults(ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
    }
    // A NULL output leaves the cache untouched (no object made).
    assert_eq!(cache.stats().misses, 0);
    let a = cache.import_min(buf.as_raw_fd(), 0).unwrap();
    let mut bo_out = ptr::null_mut();
    // SAFETY: as above.
    unsafe {
        assert_eq!(gpusvc_bo_ref(a.0, ptr::null_mut()), GPUSVC_NULL_ARGUMENT);
        assert_eq!(
            gpusvc_bo_ref(ptr::null(), &mut bo_out),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(gpusvc_bo_handle(a.0, ptr::null_mut()), GPUSVC_NULL_ARGUMENT);
        assert_eq!(gpusvc_bo_size(a.0, ptr::null_mut()), GPUSVC_NULL_ARGUMENT);
        assert_eq!(gpusvc_bo_flags(a.0, ptr::null_mut()), GPUSVC_NULL_ARGUMENT);
        assert_eq!(
            gpusvc_bo_ref_count(a.0, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_bo_export(a.0, 0, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        let mut fd = -7;
        assert_eq!(
            gpusvc_bo_export(ptr::null(), 0, &mut fd),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(fd, -7);
    }
    assert!(bo_out.is_null());
    assert_eq!(a.ref_count(), 1);
}

#[test]
fn planes_share_objects_and_bad_planes_write_nothing() {
    let cache = Cache::new();
    let y = buffer(8192);
    let uv = buffer(4096);
    let plane = |fd: &OwnedFd, offset, size| gpusvc_bo_plane {
        fd: fd.as_raw_fd(),
        offset,
        size,
    };
    let planes = [
        plane(&y, 0, 4096),
        plane(&y, 4096, 4096),
        plane(&uv, 0, 4096),
    ];
    let mut out = [ptr::null_mut(); 3];
    // SAFETY: live arrays of three planes and three output slots.
    let r =
        unsafe { gpusvc_bo_cache_import_planes(cache.0, planes.as_ptr(), 3, 0, out.as_mut_ptr()) };
    assert_eq!(r, OK);
    let bos: Vec<Bo> = out.iter().map(|&p| Bo(p)).collect();
    assert_eq!(bos[0].handle(), bos[1].handle());
    assert_ne!(bos[0].handle(), bos[2].handle());
    assert_eq!((bos[0].ref_count(), bos[2].ref_count()), (2, 1));

    let mut none = [ptr::null_mut(); 2];
    let cases: [(&[gpusvc_bo_plane], gpusvc_result); 4] = [
        (
            &[plane(&y, 4096, 4097)],
            GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS,
        ),
        (&[plane(&y, u64::MAX, 2)], GPUSVC_INVALID_ARGUMENT),
        (&[plane(&y, 0, 0)], GPUSVC_INVALID_ARGUMENT),
        (
            &[
                plane(&y, 0, 16),
                gpusvc_bo_plane {
                    fd: -1,
                    offset: 0,
                    size: 1,
                },
            ],
            GPUSVC_BO_CACHE_NOT_A_DMABUF,
        ),
    ];
    for (planes, code) in cases {
        // SAFETY: live arrays of `planes.len()` planes and at least as many slots.
        let r = unsafe {
            gpusvc_bo_cache_import_planes(
                cache.0,
                planes.as_ptr(),
                planes.len(),
                0,
                none.as_mut_ptr(),
            )
        };
        assert_eq!(r, code, "{planes:?}");
        assert!(none.iter().all(|p| p.is_null()));
    }
    // SAFETY: NULL and empty arguments are part of the contract.
    unsafe {
        assert_eq!(
            gpusvc_bo_cache_import_planes(cache.0, ptr::null(), 0, 0, none.as_mut_ptr()),
            GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_bo_cache_import_planes(cache.0, ptr::null(), 0, 0, ptr::null_mut()),
            GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_bo_cache_import_planes(cache.0, ptr::null(), 1, 0, none.as_mut_ptr()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_bo_cache_import_planes(cache.0, planes.as_ptr(), 1, 0, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
    }
    assert_eq!((bos[0].ref_count(), bos[2].ref_count()), (2, 1));
    drop(bos);
    let s = cache.stats();
    assert_eq!((s.closes, s.live), (2, 0));
}

#[test]
fn a_full_table_is_its_code_and_objects_outlive_the_cache() {
    let mut config = gpusvc_bo_cache_config {
        struct_size: size_of::<gpusvc_bo_cache_config>(),
        max_table_bytes: 0,
        identity_check: false,
        max_refs: 0,
    };
    // SAFETY: a live out slot.
    assert_eq!(unsafe { gpusvc_bo_cache_config_defaults(&mut config) }, OK);
    assert!(config.identity_check && config.max_table_bytes > 0);
    assert_eq!(config.max_refs, i32::MAX as u32);
    config.max_table_bytes = 1;
    // SAFETY: a live config and out slot.
    let tiny = Cache(written(ptr::null_mut(), |out| unsafe {
        gpusvc_bo_cache_new_memfd_with_config(&config, out)
    }));
    let buf = buffer(64);
    assert_eq!(
        tiny.import_min(buf.as_raw_fd(), 0).err(),
        Some(GPUSVC_BO_CACHE_TABLE_FULL)
    );
    drop(tiny);

    let cache = Cache::new();
    let a = cache.import_min(buf.as_raw_fd(), 0).unwrap();
    let handle = a.handle();
    // SAFETY: a live handle, freed once (the Cache wrapper is forgotten below).
    assert_eq!(unsafe { gpusvc_bo_cache_free(cache.0) }, OK);
    std::mem::forget(cache);
    assert_eq!((a.handle(), a.size()), (handle, 64));
    let b = a.ref_();
    drop(a);
    drop(b); // the last release closes the handle and frees the description
}

#[test]
fn result_codes_of_the_bo_cache_block_have_their_numbers() {
    let codes = [
        (GPUSVC_BO_CACHE_NOT_A_DMABUF, 500),
        (GPUSVC_BO_CACHE_TOO_SMALL, 501),
        (GPUSVC_BO_CACHE_SIZE_MISMATCH, 502),
        (GPUSVC_BO_CACHE_FLAGS_CONFLICT, 503),
        (GPUSVC_BO_CACHE_FOREIGN_HANDLE, 504),
        (GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS, 505),
        (GPUSVC_BO_CACHE_KERNEL_ERROR, 506),
        (GPUSVC_BO_CACHE_TABLE_FULL, 507),
        (GPUSVC_BO_CACHE_TOO_MANY_REFERENCES, 508),
        (GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE, 509),
    ];
    for (code, n) in codes {
        assert_eq!(code as u32, n);
        assert!(code.message().starts_with("bo-cache: "));
    }
}

/// The default configuration with `edit` applied.
fn config(edit: impl FnOnce(&mut gpusvc_bo_cache_config)) -> gpusvc_bo_cache_config {
    let mut c = gpusvc_bo_cache_config {
        struct_size: size_of::<gpusvc_bo_cache_config>(),
        max_table_bytes: 0,
        identity_check: false,
        max_refs: 0,
    };
    // SAFETY: a live out slot.
    assert_eq!(unsafe { gpusvc_bo_cache_config_defaults(&mut c) }, OK);
    edit(&mut c);
    c
}

/// `gpusvc_bo_cache_import_planes` into `count` slots that start unwritten; on error they are
/// checked untouched.
fn import_planes(
    cache: &Cache,
    planes: &[gpusvc_bo_plane],
    flags: u32,
) -> Result<Vec<Bo>, gpusvc_result> {
    let mut out = vec![unwritten::<gpusvc_bo>(); planes.len()];
    // SAFETY: live arrays of `planes.len()` planes and output slots.
    let r = unsafe {
        gpusvc_bo_cache_import_planes(
            cache.0,
            planes.as_ptr(),
            planes.len(),
            flags,
            out.as_mut_ptr(),
        )
    };
    match r {
        GPUSVC_OK => Ok(out.into_iter().map(Bo).collect()),
        e => {
            assert!(out.iter().all(|&p| p == unwritten()), "written on {e:?}");
            Err(e)
        }
    }
}

/// How many fds of this process name the file behind `fd` (the fake kernel holds one per open
/// GEM handle, as the kernel holds a dma-buf reference).
fn open_fds_on(fd: &OwnedFd) -> usize {
    use std::os::unix::fs::MetadataExt;
    let want = std::fs::File::from(fd.try_clone().unwrap())
        .metadata()
        .unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::metadata(e.ok()?.path()).ok())
        .filter(|m| (m.dev(), m.ino()) == (want.dev(), want.ino()))
        .count()
}

/// An fd number that is closed now and that no other test thread can be given meanwhile: the
/// highest the soft limit allows (the kernel hands out the lowest free number).
fn high_fd_number() -> RawFd {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a live out struct.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    RawFd::try_from(lim.rlim_cur.min(4096)).unwrap() - 1
}

#[test]
fn every_export_refuses_each_null_argument_and_leaves_its_outputs_alone() {
    let cache = Cache::new();
    let buf = buffer(64);
    let a = cache.import_min(buf.as_raw_fd(), 0).unwrap();
    let desc = gpusvc_bo_import_desc::default();
    let cfg = config(|_| {});
    let plane = gpusvc_bo_plane {
        fd: buf.as_raw_fd(),
        offset: 0,
        size: 64,
    };
    let mut cache_out = unwritten::<gpusvc_bo_cache>();
    let mut bo_out = unwritten::<gpusvc_bo>();
    let mut stats = gpusvc_bo_cache_stats_snapshot {
        struct_size: size_of::<gpusvc_bo_cache_stats_snapshot>(),
        hits: 77,
        ..Default::default()
    };
    let (mut u32_out, mut u64_out, mut fd_out) = (77u32, 77u64, -7);
    // SAFETY: NULL pointers are part of every contract; the other pointers are live.
    unsafe {
        let null = GPUSVC_NULL_ARGUMENT;
        assert_eq!(gpusvc_bo_cache_config_defaults(ptr::null_mut()), null);
        assert_eq!(gpusvc_bo_cache_new_memfd(ptr::null_mut()), null);
        let with_config = gpusvc_bo_cache_new_memfd_with_config;
        assert_eq!(with_config(ptr::null(), &mut cache_out), null);
        assert_eq!(with_config(&cfg, ptr::null_mut()), null);
        assert_eq!(gpusvc_bo_cache_stats(ptr::null(), &mut stats), null);
        assert_eq!(gpusvc_bo_cache_stats(cache.0, ptr::null_mut()), null);
        let fd = buf.as_raw_fd();
        assert_eq!(
            gpusvc_bo_cache_import(ptr::null(), fd, &desc, &mut bo_out),
            null
        );
        assert_eq!(
            gpusvc_bo_cache_import(cache.0, fd, ptr::null(), &mut bo_out),
            null
        );
        assert_eq!(
            gpusvc_bo_cache_import(cache.0, fd, &desc, ptr::null_mut()),
            null
        );
        let planes = gpusvc_bo_cache_import_planes;
        assert_eq!(planes(ptr::null(), &plane, 1, 0, &mut bo_out), null);
        assert_eq!(planes(cache.0, ptr::null(), 1, 0, &mut bo_out), null);
        assert_eq!(planes(cache.0, &plane, 1, 0, ptr::null_mut()), null);
        assert_eq!(gpusvc_bo_ref(ptr::null(), &mut bo_out), null);
        assert_eq!(gpusvc_bo_ref(a.0, ptr::null_mut()), null);
        assert_eq!(gpusvc_bo_handle(ptr::null(), &mut u32_out), null);
        assert_eq!(gpusvc_bo_handle(a.0, ptr::null_mut()), null);
        assert_eq!(gpusvc_bo_size(ptr::null(), &mut u64_out), null);
        assert_eq!(gpusvc_bo_size(a.0, ptr::null_mut()), null);
        assert_eq!(gpusvc_bo_flags(ptr::null(), &mut u32_out), null);
        assert_eq!(gpusvc_bo_flags(a.0, ptr::null_mut()), null);
        assert_eq!(gpusvc_bo_ref_count(ptr::null(), &mut u32_out), null);
        assert_eq!(gpusvc_bo_ref_count(a.0, ptr::null_mut()), null);
        assert_eq!(gpusvc_bo_export(ptr::null(), 0, &mut fd_out), null);
        assert_eq!(gpusvc_bo_export(a.0, 0, ptr::null_mut()), null);
        // Releasing NULL is a no-op.
        assert_eq!(gpusvc_bo_free(ptr::null_mut()), OK);
        assert_eq!(gpusvc_bo_cache_free(ptr::null_mut()), OK);
    }
    assert_eq!((cache_out, bo_out), (unwritten(), unwritten()));
    assert_eq!((stats.hits, u32_out, u64_out, fd_out), (77, 77, 77, -7));
    // Nothing was made, referenced or released by any of them.
    let s = cache.stats();
    assert_eq!((s.misses, s.hits, s.live, s.closes), (1, 0, 1, 0));
    assert_eq!(a.ref_count(), 1);
}

#[test]
fn handles_of_the_wrong_kind_are_refused_and_release_nothing() {
    let cache = Cache::new();
    let buf = buffer(64);
    let a = cache.import_min(buf.as_raw_fd(), 0).unwrap();
    let desc = gpusvc_bo_import_desc::default();
    let mut bo_out = unwritten::<gpusvc_bo>();
    let mut stats = gpusvc_bo_cache_stats_snapshot::default();
    // SAFETY: handle values checked by the registry; live out slots.
    unsafe {
        assert_eq!(gpusvc_bo_free(cache.0.cast()), GPUSVC_INVALID_HANDLE);
        assert_eq!(gpusvc_bo_cache_free(a.0.cast()), GPUSVC_INVALID_HANDLE);
        assert_eq!(
            gpusvc_bo_ref(cache.0.cast(), &mut bo_out),
            GPUSVC_INVALID_HANDLE
        );
        let fd = buf.as_raw_fd();
        let r = gpusvc_bo_cache_import(a.0.cast(), fd, &desc, &mut bo_out);
        assert_eq!(r, GPUSVC_INVALID_HANDLE);
        let r = gpusvc_bo_cache_stats(a.0.cast(), &mut stats);
        assert_eq!(r, GPUSVC_INVALID_HANDLE);
    }
    assert_eq!(bo_out, unwritten());
    assert_eq!((a.ref_count(), cache.stats().live), (1, 1));
}

#[test]
fn negative_and_closed_fds_are_not_a_dmabuf_in_imports_and_planes() {
    let cache = Cache::new();
    let buf = buffer(4096);
    // A closed fd: a number that named the buffer (imported through it) and was then closed.
    let high = high_fd_number();
    // SAFETY: dup2 onto a number no other thread holds; checked.
    assert_eq!(unsafe { libc::dup2(buf.as_raw_fd(), high) }, high);
    let a = cache.import_min(high, 0).unwrap();
    // SAFETY: our dup.
    assert_eq!(unsafe { libc::close(high) }, 0);
    for fd in [-1, -2, i32::MIN, high, i32::MAX] {
        assert_eq!(
            cache.import_min(fd, 0).err(),
            Some(GPUSVC_BO_CACHE_NOT_A_DMABUF),
            "fd {fd}"
        );
        let bad = gpusvc_bo_plane {
            fd,
            offset: 0,
            size: 1,
        };
        let good = gpusvc_bo_plane {
            fd: buf.as_raw_fd(),
            offset: 0,
            size: 1,
        };
        for planes in [[bad, good], [good, bad]] {
            assert_eq!(
                import_planes(&cache, &planes, 0).err(),
                Some(GPUSVC_BO_CACHE_NOT_A_DMABUF)
            );
        }
    }
    // The object imported through the closed number lives on, its count untouched.
    assert_eq!((a.ref_count(), a.size()), (1, 4096));
    let s = cache.stats();
    assert_eq!((s.misses, s.hits, s.live, s.closes), (1, 0, 1, 0));
}

#[test]
fn absurd_sizes_and_plane_arithmetic_are_codes_and_write_nothing() {
    let cache = Cache::new();
    let buf = buffer(4096);
    let fd = buf.as_raw_fd();
    let desc = |min_size, exact_size| gpusvc_bo_import_desc {
        struct_size: size_of::<gpusvc_bo_import_desc>(),
        min_size,
        exact_size,
        flags: 0,
    };
    // On a fresh handle (closed again) and on a cached one (count untouched).
    for cached in [false, true] {
        let holder = cached.then(|| cache.import_min(fd, 0).unwrap());
        let cases = [
            (desc(u64::MAX, 0), GPUSVC_BO_CACHE_TOO_SMALL),
            (desc(0, u64::MAX), GPUSVC_BO_CACHE_SIZE_MISMATCH),
            (desc(u64::MAX, u64::MAX), GPUSVC_BO_CACHE_TOO_SMALL),
            (desc(u64::MAX, 1), GPUSVC_INVALID_ARGUMENT),
            (desc(4097, 4096), GPUSVC_INVALID_ARGUMENT),
        ];
        for (d, code) in cases {
            assert_eq!(cache.import(fd, d).err(), Some(code), "{d:?}");
        }
        if let Some(h) = &holder {
            assert_eq!(h.ref_count(), 1);
        }
    }
    let plane = |offset, size| gpusvc_bo_plane { fd, offset, size };
    let cases = [
        (plane(u64::MAX, 1), GPUSVC_INVALID_ARGUMENT),
        (plane(1, u64::MAX), GPUSVC_INVALID_ARGUMENT),
        (plane(u64::MAX, u64::MAX), GPUSVC_INVALID_ARGUMENT),
        (plane(u64::MAX, 0), GPUSVC_INVALID_ARGUMENT),
        (plane(0, u64::MAX), GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS),
        (plane(4096, 1), GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS),
        (plane(4095, 2), GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS),
    ];
    for (p, code) in cases {
        assert_eq!(import_planes(&cache, &[p], 0).err(), Some(code), "{p:?}");
        // After a good plane, the good plane's reference is released again.
        let planes = [plane(0, 4096), p];
        assert_eq!(import_planes(&cache, &planes, 0).err(), Some(code), "{p:?}");
    }
    // A count of 0 with live arrays, and counts no array can have.
    let planes = [plane(0, 1)];
    let mut out = [unwritten::<gpusvc_bo>()];
    // SAFETY: live arrays of one plane and one slot; the absurd counts are refused before
    // anything is read (their arrays are "valid" for no more than one element).
    unsafe {
        let import = gpusvc_bo_cache_import_planes;
        let (p, o) = (planes.as_ptr(), out.as_mut_ptr());
        assert_eq!(import(cache.0, p, 0, 0, o), GPUSVC_INVALID_ARGUMENT);
        assert_eq!(
            import(cache.0, p, usize::MAX, 0, o),
            GPUSVC_INVALID_ARGUMENT
        );
        let max = isize::MAX as usize / size_of::<gpusvc_bo_plane>();
        assert_eq!(import(cache.0, p, max + 1, 0, o), GPUSVC_INVALID_ARGUMENT);
        assert_eq!(
            import(cache.0, ptr::null(), usize::MAX, 0, o),
            GPUSVC_NULL_ARGUMENT
        );
    }
    assert_eq!(out, [unwritten()]);
    let s = cache.stats();
    assert_eq!((s.live, s.double_closes, s.close_errors), (0, 0, 0));
    assert!(s.size_rejects >= 6, "{s:?}");
    // Every handle an import opened was closed again: another buffer gets the lowest number.
    let other = buffer(64);
    assert_eq!(cache.import_min(other.as_raw_fd(), 0).unwrap().handle(), 1);
}

#[test]
fn the_reference_cap_is_508_for_ref_imports_and_planes_and_changes_nothing() {
    let cache = Cache::with_config(&config(|c| c.max_refs = 2));
    let buf = buffer(4096);
    let fd = buf.as_raw_fd();
    let a = cache.import_min(fd, 0).unwrap();
    let b = a.try_ref().unwrap();
    assert_eq!(a.ref_count(), 2);
    let before = cache.stats();
    // At the cap: a ref, an import and a plane import of the same buffer are refused.
    assert_eq!(a.try_ref().err(), Some(GPUSVC_BO_CACHE_TOO_MANY_REFERENCES));
    assert_eq!(b.try_ref().err(), Some(GPUSVC_BO_CACHE_TOO_MANY_REFERENCES));
    assert_eq!(
        cache.import_min(fd, 0).err(),
        Some(GPUSVC_BO_CACHE_TOO_MANY_REFERENCES)
    );
    let plane = |offset| gpusvc_bo_plane {
        fd,
        offset,
        size: 1024,
    };
    assert_eq!(
        import_planes(&cache, &[plane(0)], 0).err(),
        Some(GPUSVC_BO_CACHE_TOO_MANY_REFERENCES)
    );
    assert_eq!(a.ref_count(), 2);
    let after = cache.stats();
    assert_eq!(
        (after.hits, after.misses, after.closes, after.live),
        (before.hits, before.misses, before.closes, before.live)
    );
    // One below the cap: a two-plane import of the buffer takes the last reference with its
    // first plane, is refused at the second, and gives the first one back.
    drop(b);
    assert_eq!(
        import_planes(&cache, &[plane(0), plane(1024)], 0).err(),
        Some(GPUSVC_BO_CACHE_TOO_MANY_REFERENCES)
    );
    assert_eq!(a.ref_count(), 1);
    // Below the cap everything works again.
    let c = a.try_ref().unwrap();
    assert_eq!(c.handle(), a.handle());
    drop(c);
    let d = cache.import_min(fd, 0).unwrap();
    assert_eq!((d.handle(), a.ref_count()), (a.handle(), 2));
    drop((a, d));
    let s = cache.stats();
    assert_eq!((s.live, s.closes, s.double_closes), (0, 1, 0));
}

#[test]
fn max_refs_zero_counts_as_one_and_a_huge_one_as_int32_max() {
    let one = Cache::with_config(&config(|c| c.max_refs = 0));
    let buf = buffer(64);
    let a = one.import_min(buf.as_raw_fd(), 0).unwrap();
    assert_eq!(a.try_ref().err(), Some(GPUSVC_BO_CACHE_TOO_MANY_REFERENCES));
    assert_eq!(
        one.import_min(buf.as_raw_fd(), 0).err(),
        Some(GPUSVC_BO_CACHE_TOO_MANY_REFERENCES)
    );
    assert_eq!(a.ref_count(), 1);
    drop(a);

    for max_refs in [i32::MAX as u32 + 1, u32::MAX] {
        let huge = Cache::with_config(&config(|c| c.max_refs = max_refs));
        let a = huge.import_min(buf.as_raw_fd(), 0).unwrap();
        let more: Vec<Bo> = (0..8).map(|_| a.try_ref().unwrap()).collect();
        let again = huge.import_min(buf.as_raw_fd(), 0).unwrap();
        assert_eq!((a.ref_count(), again.handle()), (10, a.handle()));
        drop((a, more, again));
    }
}

#[test]
fn identity_check_bytes_other_than_0_and_1_read_as_true() {
    let buf = buffer(64);
    for byte in [0u8, 1, 2, 0x80, 0xff] {
        let mut raw = std::mem::MaybeUninit::new(config(|_| {}));
        let at = std::mem::offset_of!(gpusvc_bo_cache_config, identity_check);
        // SAFETY: one byte inside the live struct; the struct is never read as Rust's `bool`
        // again (only by the library, byte-wise).
        unsafe { raw.as_mut_ptr().cast::<u8>().add(at).write(byte) };
        let mut out = ptr::null_mut();
        // SAFETY: a live config (as C would pass it) and out slot.
        let r = unsafe { gpusvc_bo_cache_new_memfd_with_config(raw.as_ptr(), &mut out) };
        assert_eq!(r, OK, "identity_check byte {byte:#x}");
        let cache = Cache(out);
        let a = cache.import_min(buf.as_raw_fd(), 0).unwrap();
        let b = cache.import_min(buf.as_raw_fd(), 0).unwrap();
        assert_eq!((a.handle(), a.ref_count()), (b.handle(), 2));
        drop((a, b));
    }
}

#[test]
fn export_flags_follow_the_kernel_and_the_fd_imports_as_the_same_object() {
    // As the kernel's PRIME_HANDLE_TO_FD: DRM_CLOEXEC (O_CLOEXEC) and DRM_RDWR (O_RDWR) are the
    // only flags; any other bit is EINVAL (a kernel error, nothing written).
    let cache = Cache::new();
    let buf = buffer(4096);
    let a = cache
        .import(
            buf.as_raw_fd(),
            gpusvc_bo_import_desc {
                struct_size: size_of::<gpusvc_bo_import_desc>(),
                flags: 5,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(a.flags(), 5);
    for bad in [1, 0x40, u32::MAX, libc::O_CLOEXEC as u32 | 0x100] {
        assert_eq!(
            a.export(bad).err(),
            Some(GPUSVC_BO_CACHE_KERNEL_ERROR),
            "{bad:#x}"
        );
    }
    for (flags, cloexec) in [
        (0, false),
        (libc::O_RDWR as u32, false),
        (libc::O_CLOEXEC as u32, true),
        ((libc::O_CLOEXEC | libc::O_RDWR) as u32, true),
    ] {
        let fd = a.export(flags).unwrap();
        // SAFETY: a live fd.
        let fd_flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
        assert_eq!(
            fd_flags & libc::FD_CLOEXEC != 0,
            cloexec,
            "flags {flags:#x}"
        );
        let again = cache
            .import(
                fd.as_raw_fd(),
                gpusvc_bo_import_desc {
                    struct_size: size_of::<gpusvc_bo_import_desc>(),
                    flags: 5,
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(again.handle(), a.handle());
    }
    assert_eq!(a.ref_count(), 1);
}

#[test]
fn objects_outlive_their_cache_and_answer_everything_but_imports() {
    let cache = Cache::new();
    let buf = buffer(4096);
    let a = cache.import_min(buf.as_raw_fd(), 4096).unwrap();
    let b = a.ref_();
    let handle = a.handle();
    assert_eq!(
        open_fds_on(&buf),
        2,
        "ours and the fake kernel's for the open handle"
    );
    let raw_cache = cache.0;
    // SAFETY: a live handle, freed once (the Cache wrapper is forgotten).
    assert_eq!(unsafe { gpusvc_bo_cache_free(raw_cache) }, OK);
    std::mem::forget(cache);
    assert_eq!(
        open_fds_on(&buf),
        2,
        "the handle stays open while objects live"
    );
    // The freed cache takes no imports, stats or second free.
    let mut out = unwritten::<gpusvc_bo>();
    let mut stats = gpusvc_bo_cache_stats_snapshot {
        struct_size: size_of::<gpusvc_bo_cache_stats_snapshot>(),
        hits: 77,
        ..Default::default()
    };
    let desc = gpusvc_bo_import_desc::default();
    // SAFETY: handle values checked by the registry; live out slots.
    unsafe {
        let r = gpusvc_bo_cache_import(raw_cache, buf.as_raw_fd(), &desc, &mut out);
        assert_eq!(r, GPUSVC_INVALID_HANDLE);
        let plane = gpusvc_bo_plane {
            fd: buf.as_raw_fd(),
            offset: 0,
            size: 1,
        };
        let r = gpusvc_bo_cache_import_planes(raw_cache, &plane, 1, 0, &mut out);
        assert_eq!(r, GPUSVC_INVALID_HANDLE);
        assert_eq!(
            gpusvc_bo_cache_stats(raw_cache, &mut stats),
            GPUSVC_INVALID_HANDLE
        );
        assert_eq!(gpusvc_bo_cache_free(raw_cache), GPUSVC_INVALID_HANDLE);
    }
    assert_eq!((out, stats.hits), (unwritten(), 77));
    // The live objects answer, reference and export.
    assert_eq!(
        (a.handle(), a.size(), a.flags(), a.ref_count()),
        (handle, 4096, 0, 2)
    );
    let c = b.ref_();
    assert_eq!((c.handle(), a.ref_count()), (handle, 3));
    let exported = c.export(libc::O_CLOEXEC as u32).unwrap();
    // SAFETY: a live fd.
    let end = unsafe { libc::lseek(exported.as_raw_fd(), 0, libc::SEEK_END) };
    assert_eq!(end, 4096);
    assert_eq!(open_fds_on(&buf), 3);
    drop(exported);
    drop((a, b));
    assert_eq!(c.ref_count(), 1);
    assert_eq!(open_fds_on(&buf), 2);
    drop(c); // the last release closes the handle and frees the description
    assert_eq!(open_fds_on(&buf), 1);
}

#[test]
fn result_message_of_508_names_the_reference_cap() {
    let mut buf = [0 as std::ffi::c_char; 256];
    let mut len = 0usize;
    let code = GPUSVC_BO_CACHE_TOO_MANY_REFERENCES as u32;
    // SAFETY: a live buffer of `buf.len()` bytes and out slot.
    let r = unsafe { gpusvc_result_message(code, buf.as_mut_ptr(), buf.len(), &mut len) };
    assert_eq!(r, OK);
    // SAFETY: the library wrote a NUL-terminated string into the buffer.
    let text = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap();
    assert_eq!(text, GPUSVC_BO_CACHE_TOO_MANY_REFERENCES.message());
    assert!(
        text.starts_with("bo-cache: ") && text.contains("references"),
        "{text}"
    );
    assert_eq!(len, text.len());
}

const EXPORT_CHILD: &str = "export_and_import_failures_child";
const EXPORT_CHILD_DONE: &str = "bo-cache ABI child: all checks passed";

#[test]
fn export_and_fresh_import_failures_write_nothing_and_change_nothing() {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            EXPORT_CHILD,
            "--nocapture",
            "--ignored",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains(EXPORT_CHILD_DONE),
        "child did not run:\n{stdout}\n{stderr}"
    );
}

/// Run by the test above in a process of its own: every fd number taken, so the fake kernel's
/// export (a dup) and fresh import (it holds a dup, as the kernel holds a reference) fail with
/// EMFILE.
#[test]
#[ignore = "run in a child process by export_and_fresh_import_failures_write_nothing_and_change_nothing"]
fn export_and_import_failures_child() {
    let lim = libc::rlimit {
        rlim_cur: 64,
        rlim_max: 64,
    };
    // SAFETY: a live struct; lowers this process's own limit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    let cache = Cache::new();
    let cached = buffer(4096);
    let fresh = buffer(4096);
    let a = cache.import_min(cached.as_raw_fd(), 0).unwrap();
    let mut filler = Vec::new();
    loop {
        // SAFETY: dups a live fd; the result is checked.
        let fd = unsafe { libc::fcntl(cached.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if fd < 0 {
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EMFILE)
            );
            break;
        }
        // SAFETY: a fresh fd we own.
        filler.push(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    assert_eq!(
        a.export(libc::O_CLOEXEC as u32).err(),
        Some(GPUSVC_BO_CACHE_KERNEL_ERROR)
    );
    assert_eq!(
        cache.import_min(fresh.as_raw_fd(), 0).err(),
        Some(GPUSVC_BO_CACHE_KERNEL_ERROR)
    );
    // A hit needs no fd: it works, and a reference needs none either.
    let b = cache.import_min(cached.as_raw_fd(), 0).unwrap();
    let c = b.ref_();
    assert_eq!(a.ref_count(), 3);
    drop((b, c));
    let s = cache.stats();
    assert_eq!((s.live, s.double_closes), (1, 0));
    drop(filler.pop());
    let fd = a.export(libc::O_CLOEXEC as u32).unwrap();
    drop((fd, a));
    drop(cache);
    println!("{EXPORT_CHILD_DONE}");
}
