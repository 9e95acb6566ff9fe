//! The `gpusvc_bo_cache_*` and `gpusvc_bo_*` functions: making and freeing a cache, imports,
//! references, getters, export and the counters.

use std::os::fd::{AsRawFd, IntoRawFd};
use std::os::unix::ffi::OsStrExt;

use bo_cache::{BoCache, CacheConfig, MemfdKernel, PlaneDesc};

use crate::bo_cache::types::*;
use crate::bo_cache::{bo, cache, gpusvc_bo, gpusvc_bo_cache, new_bo};
use crate::kit::handle::{self, Kind};
use crate::kit::{
    FfiError, Out, SizedOut, answer_into, answer_sized_into, ffi_guard, gpusvc_result,
    null_argument, slice_in,
};

// ---- cache ----

/// Fills `*out` with the default cache configuration; the host sets `out->struct_size` first
/// (it is kept; only that many bytes are written).
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_cache_config_defaults(
    out: *mut gpusvc_bo_cache_config,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let out = unsafe { SizedOut::new(out, "out") }?;
        out.write_keeping_size(CacheConfig::default().into());
        Ok(())
    })
}

/// Makes a cache over a new memfd-backed fake DRM file description (sealed memfds stand in for
/// dma-bufs: an fd imports if it is a memfd sealed with `F_SEAL_GROW | F_SEAL_SHRINK`), with the
/// default configuration, into `*out`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_cache_new_memfd(
    out: *mut *mut gpusvc_bo_cache,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || Ok(()),
            out,
            "out",
            |()| Ok(new_cache(CacheConfig::default())),
        )
    }
}

/// `gpusvc_bo_cache_new_memfd` with `*config`.
///
/// # Safety
/// `config` is NULL or valid for reading `config->struct_size` bytes; `out` is NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_cache_new_memfd_with_config(
    config: *const gpusvc_bo_cache_config,
    out: *mut *mut gpusvc_bo_cache,
) -> gpusvc_result {
    // SAFETY: `config` is NULL or valid for `struct_size` bytes (contract); `out` is forwarded.
    unsafe {
        answer_into(
            || config_in(config, "config"),
            out,
            "out",
            |c| Ok(new_cache(c)),
        )
    }
}

/// Makes a cache on a new DRM file description of its own, opened on the DRM node at `path`
/// (a render node such as `/dev/dri/renderD128`, normally; a NUL-terminated path, any bytes),
/// with `*config`, or the defaults when `config` is NULL, into `*out`. The path is checked
/// before the node is opened, so nothing blocks and nothing else is opened: a path that is not
/// a DRM device node (a regular file, a FIFO, a directory, another device) is
/// `GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE`; an open that fails (ENOENT, EACCES, ...) is
/// `GPUSVC_BO_CACHE_KERNEL_ERROR` with the errno in the detail. Nobody else may create or close
/// GEM handles on that description; the host passes dma-buf fds in, gets new ones out with
/// `gpusvc_bo_export`, and uses the handles on `gpusvc_bo_cache_device_fd`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `config` is NULL or valid for reading
/// `config->struct_size` bytes; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_cache_open(
    path: *const std::ffi::c_char,
    config: *const gpusvc_bo_cache_config,
    out: *mut *mut gpusvc_bo_cache,
) -> gpusvc_result {
    // SAFETY: `path` is checked for NULL before it is read; `config` is checked for NULL
    // before it is read and valid for `struct_size` bytes otherwise (contract); `out` is
    // forwarded.
    unsafe {
        answer_into(
            || {
                if path.is_null() {
                    return Err(null_argument("path"));
                }
                // Non-NULL and NUL-terminated (contract; the enclosing SAFETY). Linux paths are
                // bytes: any bytes are a path.
                let path = std::ffi::OsStr::from_bytes(std::ffi::CStr::from_ptr(path).to_bytes());
                let config = if config.is_null() {
                    CacheConfig::default()
                } else {
                    config_in(config, "config")?
                };
                Ok((path, config))
            },
            out,
            "out",
            // The node is opened only once `out` is known to be writable.
            |(path, config)| {
                let cache = BoCache::open_with_config(path, config).map_err(bo_error)?;
                Ok(handle::new_shared(Kind::BoCache, cache))
            },
        )
    }
}

fn new_cache(config: CacheConfig) -> *mut gpusvc_bo_cache {
    handle::new_shared(
        Kind::BoCache,
        BoCache::with_config(MemfdKernel::new(), config),
    )
}

/// Frees a cache; NULL is a no-op. Objects still referenced by `gpusvc_bo` handles stay valid:
/// the last `gpusvc_bo_free` of each closes its handle, and the last of all frees the
/// description.
///
/// # Safety
/// `cache` is NULL or a handle value (a freed or foreign one is `GPUSVC_INVALID_HANDLE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_cache_free(cache: *mut gpusvc_bo_cache) -> gpusvc_result {
    ffi_guard(|| handle::free(cache, Kind::BoCache))
}

/// The cache's DRM file description into `*out_fd`, borrowed: the GEM handles of its objects
/// (`gpusvc_bo_handle`) are valid on it, for command submission, GEM mmap or KMS framebuffers.
/// Do not close it, and never create or close GEM handles on it: the cache owns every handle
/// there. It stays open while the cache or any of its objects lives. A memfd-backed cache has
/// none: `GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE`.
///
/// # Safety
/// `out_fd` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_cache_device_fd(
    cache: *const gpusvc_bo_cache,
    out_fd: *mut i32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || self::cache(cache),
            out_fd,
            "out_fd",
            |c| {
                c.device_fd().map(|fd| fd.as_raw_fd()).ok_or_else(|| {
                    FfiError::new(
                        gpusvc_result::GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE,
                        "bo-cache: the memfd-backed cache has no DRM device",
                    )
                })
            },
        )
    }
}

/// The cache's counters into `*out` (the host sets its `struct_size`; only that many bytes are
/// written, and `struct_size` becomes the bytes written).
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_cache_stats(
    cache: *const gpusvc_bo_cache,
    out: *mut gpusvc_bo_cache_stats_snapshot,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { answer_sized_into(|| self::cache(cache), out, "out", |c| Ok(c.stats().into())) }
}

// ---- imports ----

/// Imports the dma-buf behind `fd` (borrowed: the caller keeps and closes it) with the size
/// rules of `*desc`; a new `gpusvc_bo` holding one reference into `*out`. The same buffer
/// imported again (the same fd, a dup, an fd from another process) is the same object: its
/// handle (`gpusvc_bo_handle`) is the same. On error nothing changed: a handle the import created
/// is closed again, an object already cached keeps its handle and count.
///
/// Errors: `GPUSVC_BO_CACHE_NOT_A_DMABUF` (negative, closed or unimportable fd),
/// `GPUSVC_BO_CACHE_TOO_SMALL`, `GPUSVC_BO_CACHE_SIZE_MISMATCH`,
/// `GPUSVC_BO_CACHE_FLAGS_CONFLICT`, `GPUSVC_BO_CACHE_FOREIGN_HANDLE`,
/// `GPUSVC_BO_CACHE_TABLE_FULL`, `GPUSVC_BO_CACHE_KERNEL_ERROR`, `GPUSVC_INVALID_ARGUMENT`
/// (`exact_size` below `min_size`).
///
/// # Safety
/// `desc` is NULL or valid for reading `desc->struct_size` bytes; `out` is NULL or valid for
/// one write; `fd` is not
/// closed by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_cache_import(
    cache: *const gpusvc_bo_cache,
    fd: i32,
    desc: *const gpusvc_bo_import_desc,
    out: *mut *mut gpusvc_bo,
) -> gpusvc_result {
    // SAFETY: `desc` is NULL or valid for `struct_size` bytes of plain integers (contract); `fd` stays
    // open for the call if it is open (contract); `out` is forwarded.
    unsafe {
        answer_into(
            || {
                let c = self::cache(cache)?;
                let desc = crate::kit::sized_in(desc, "desc")?;
                Ok((c, fd_in(fd, "fd")?, desc))
            },
            out,
            "out",
            |(c, fd, desc)| Ok(new_bo(c.import(fd, &desc.into()).map_err(bo_error)?)),
        )
    }
}

/// Imports `count` planes (each `size` bytes at `offset` of its fd's buffer, checked against the
/// buffer's size with overflow-checked arithmetic) with import `flags`; on success
/// `out_bos[i]` gets a new `gpusvc_bo` for plane `i` (planes in one buffer share its object and
/// handle; each `gpusvc_bo` is freed on its own). On error nothing is written and every
/// reference taken is released.
///
/// Errors: those of `gpusvc_bo_cache_import`, `GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS`, and
/// `GPUSVC_INVALID_ARGUMENT` for `count` 0 or a plane of size 0 or whose end overflows.
/// `planes` and `out_bos` may be NULL when `count` is 0 (which is `GPUSVC_INVALID_ARGUMENT`).
///
/// # Safety
/// `planes` is NULL or valid for `count` reads; `out_bos` is NULL or valid for `count` writes;
/// no plane's fd is closed by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_cache_import_planes(
    cache: *const gpusvc_bo_cache,
    planes: *const gpusvc_bo_plane,
    count: usize,
    flags: u32,
    out_bos: *mut *mut gpusvc_bo,
) -> gpusvc_result {
    ffi_guard(|| {
        let c = self::cache(cache)?;
        // SAFETY: `planes` is valid for `count` reads of plain integers (contract).
        let planes = unsafe { slice_in(planes, count, "planes") }?;
        if count > 0 && out_bos.is_null() {
            return Err(null_argument("out_bos"));
        }
        let descs = planes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                Ok(PlaneDesc {
                    // SAFETY: the fd stays open for the call if it is open (contract).
                    fd: unsafe { fd_in(p.fd, &format!("planes[{i}].fd")) }?,
                    offset: p.offset,
                    size: p.size,
                })
            })
            .collect::<Result<Vec<_>, crate::kit::FfiError>>()?;
        let set = c.import_planes(&descs, flags).map_err(bo_error)?;
        for (i, plane) in set.planes().iter().enumerate() {
            // SAFETY: `out_bos` is non-NULL and valid for `count` writes (contract), and
            // `set` has one object per plane, so `i < count`.
            unsafe { out_bos.add(i).write(new_bo(plane.clone())) };
        }
        Ok(())
    })
}

// ---- objects ----

/// A new `gpusvc_bo` for the same object into `*out`: one more reference (freed on its own).
/// `GPUSVC_BO_CACHE_TOO_MANY_REFERENCES` when the object is at the cache's `max_refs`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_ref(
    bo: *const gpusvc_bo,
    out: *mut *mut gpusvc_bo,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || self::bo(bo),
            out,
            "out",
            |b| Ok(new_bo(b.try_clone().map_err(bo_error)?)),
        )
    }
}

/// Releases the reference `bo` holds; NULL is a no-op. The last release of an object closes its
/// GEM handle, once. A freed handle is `GPUSVC_INVALID_HANDLE` and releases nothing.
///
/// # Safety
/// `bo` is NULL or a handle value (a freed or foreign one is `GPUSVC_INVALID_HANDLE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_free(bo: *mut gpusvc_bo) -> gpusvc_result {
    ffi_guard(|| handle::free(bo, Kind::Bo))
}

/// The object's GEM handle on the cache's description into `*out` (never 0).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_handle(bo: *const gpusvc_bo, out: *mut u32) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { answer_into(|| self::bo(bo), out, "out", |b| Ok(b.handle().get())) }
}

/// The buffer's size in bytes (learned at its first import) into `*out`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_size(bo: *const gpusvc_bo, out: *mut u64) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { answer_into(|| self::bo(bo), out, "out", |b| Ok(b.size())) }
}

/// The object's import flags into `*out`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_flags(bo: *const gpusvc_bo, out: *mut u32) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { answer_into(|| self::bo(bo), out, "out", |b| Ok(b.flags())) }
}

/// The object's reference count now (every `gpusvc_bo` of it, plus references the library holds
/// during calls) into `*out`: a snapshot for diagnostics and tests.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_ref_count(bo: *const gpusvc_bo, out: *mut u32) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { answer_into(|| self::bo(bo), out, "out", |b| Ok(b.ref_count())) }
}

/// Exports the buffer as a new dma-buf fd into `*out_fd`, through the cache's description;
/// `flags` are the export flags (`O_CLOEXEC`, `O_RDWR`, as `DRM_IOCTL_PRIME_HANDLE_TO_FD` takes
/// them). The fd is the caller's to close. Importing it again gives the same object.
/// Any other flag bit is refused, as the kernel refuses it (EINVAL): `GPUSVC_BO_CACHE_KERNEL_ERROR`,
/// as is any other refusal by the kernel.
///
/// # Safety
/// `out_fd` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_bo_export(
    bo: *const gpusvc_bo,
    flags: u32,
    out_fd: *mut i32,
) -> gpusvc_result {
    ffi_guard(|| {
        let b = self::bo(bo)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_fd, "out_fd") }?;
        let fd = b.export_dmabuf(flags).map_err(bo_error)?;
        out.write(fd.into_raw_fd());
        Ok(())
    })
}
