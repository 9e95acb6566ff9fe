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

impl Cache {
    fn new() -> Self {
        // SAFETY: a live out slot.
        Cache(written(ptr::null_mut(), |out| unsafe {
            gpusvc_bo_cache_new_memfd(out)
        }))
    }

    fn import(&self, fd: RawFd, desc: gpusvc_bo_import_desc) -> Result<Bo, gpusvc_result> {
        let mut out = ptr::null_mut();
        // SAFETY: a live handle, desc and out slot.
        match unsafe { gpusvc_bo_cache_import(self.0, fd, &desc, &mut out) } {
            GPUSVC_OK => Ok(Bo(out)),
            e => {
                assert!(out.is_null(), "an output was written on error {e:?}");
                Err(e)
            }
        }
    }

    fn import_min(&self, fd: RawFd, min_size: u64) -> Result<Bo, gpusvc_result> {
        self.import(
            fd,
            gpusvc_bo_import_desc {
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
        assert_eq!((s.double_closes, s.close_errors), (0, 0));
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
        // SAFETY: a live handle and out slot.
        Bo(written(ptr::null_mut(), |out| unsafe {
            gpusvc_bo_ref(self.0, out)
        }))
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
    ];
    for (code, n) in codes {
        assert_eq!(code as u32, n);
        assert!(code.message().starts_with("bo-cache: "));
    }
}
