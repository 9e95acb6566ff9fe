//! The bo-cache C types (cache config, import and plane descriptions, the stats snapshot), fd
//! arguments, and the `bo-cache` errors as result codes.

use std::os::fd::BorrowedFd;

use bo_cache::{BoError, CacheConfig, ImportDesc, Stats};

use crate::kit::{FfiError, gpusvc_result, growable, invalid_argument, sized_default};

/// How a cache is set up; `gpusvc_bo_cache_config_defaults` fills the defaults. The host sets
/// `struct_size = sizeof(struct gpusvc_bo_cache_config)` (and zeroes the rest) before calling
/// it, which keeps `struct_size`; a field past a host's `struct_size` takes its default.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_bo_cache_config {
    /// `sizeof(struct gpusvc_bo_cache_config)`, set by the host (or kept from the `_defaults`
    /// function): the library reads only that many bytes, the fields past it take their
    /// defaults.
    pub struct_size: usize,
    /// Cap on the handle table's memory in bytes (default 16 MiB); an import whose handle would
    /// take the table past it is `GPUSVC_BO_CACHE_TABLE_FULL`.
    pub max_table_bytes: usize,
    /// Check on every cache hit that the fd names the buffer cached under the handle (one
    /// `fstat`); a mismatch is `GPUSVC_BO_CACHE_FOREIGN_HANDLE`. Default true.
    pub identity_check: bool,
    /// The most references one object may have through imports and `gpusvc_bo_ref`; beyond it
    /// they fail with `GPUSVC_BO_CACHE_TOO_MANY_REFERENCES` and change nothing. Default and
    /// maximum `INT32_MAX` (larger values count as `INT32_MAX`, 0 as 1).
    pub max_refs: u32,
}

impl From<CacheConfig> for gpusvc_bo_cache_config {
    fn from(c: CacheConfig) -> Self {
        gpusvc_bo_cache_config {
            struct_size: size_of::<Self>(),
            max_table_bytes: c.max_table_bytes,
            identity_check: c.identity_check,
            max_refs: c.max_refs,
        }
    }
}

growable!(gpusvc_bo_cache_config {
    first: max_refs,
    last: max_refs,
    defaults: CacheConfig::default().into(),
});

/// Reads a config (by the `struct_size` rule, `kit::sized`) field by field; the
/// `identity_check` byte is read as a byte, so a value other than 0 or 1 from C is true, not
/// undefined behaviour.
///
/// # Safety
/// `ptr` is NULL or valid for reading `struct_size` bytes.
pub(crate) unsafe fn config_in(
    ptr: *const gpusvc_bo_cache_config,
    name: &str,
) -> Result<CacheConfig, FfiError> {
    // SAFETY: forwarded from this function's contract.
    let raw = unsafe { crate::kit::sized::sized_raw_in(ptr, name) }?;
    let ptr = raw.as_ptr();
    // SAFETY: `raw` holds a whole config's bytes; the reads are in bounds and unaligned-safe,
    // and `usize`, `u32` and `u8` accept any bit pattern.
    Ok(unsafe {
        CacheConfig {
            max_table_bytes: std::ptr::addr_of!((*ptr).max_table_bytes).read_unaligned(),
            identity_check: std::ptr::addr_of!((*ptr).identity_check)
                .cast::<u8>()
                .read_unaligned()
                != 0,
            max_refs: std::ptr::addr_of!((*ptr).max_refs).read_unaligned(),
        }
    })
}

/// What an import requires of the buffer. The host sets `struct_size = sizeof(struct
/// gpusvc_bo_import_desc)`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_bo_import_desc {
    /// `sizeof(struct gpusvc_bo_import_desc)`, set by the host: the library reads only that
    /// many bytes, the fields past it take their defaults (0).
    pub struct_size: usize,
    /// Import flags; a buffer cached with other flags is `GPUSVC_BO_CACHE_FLAGS_CONFLICT`.
    /// (Before `flags` the layout has no padding after its last field.)
    pub flags: u32,
    /// The buffer must have at least this many bytes (`GPUSVC_BO_CACHE_TOO_SMALL`).
    pub min_size: u64,
    /// When non-zero, the buffer must have exactly this many bytes
    /// (`GPUSVC_BO_CACHE_SIZE_MISMATCH`); 0 checks no exact size. Below `min_size` is
    /// `GPUSVC_INVALID_ARGUMENT`.
    pub exact_size: u64,
}

growable!(gpusvc_bo_import_desc {
    first: exact_size,
    last: exact_size,
    defaults: gpusvc_bo_import_desc {
        struct_size: 0,
        flags: 0,
        min_size: 0,
        exact_size: 0,
    },
});

impl Default for gpusvc_bo_import_desc {
    /// Everything 0, `struct_size` set: import any size with no flags.
    fn default() -> Self {
        gpusvc_bo_import_desc {
            struct_size: size_of::<Self>(),
            ..<Self as crate::kit::sized::GrowableIn>::defaults()
        }
    }
}

impl From<gpusvc_bo_import_desc> for ImportDesc {
    fn from(d: gpusvc_bo_import_desc) -> Self {
        ImportDesc {
            min_size: d.min_size,
            exact_size: (d.exact_size != 0).then_some(d.exact_size),
            flags: d.flags,
        }
    }
}

/// One plane of a multi-plane import: `size` bytes at `offset` of the buffer behind `fd`
/// (borrowed). No `struct_size`: an element of an array passed with a count.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct gpusvc_bo_plane {
    /// The plane's dma-buf fd (borrowed; planes may share one).
    pub fd: i32,
    /// Byte offset of the plane in its buffer.
    pub offset: u64,
    /// Bytes of the plane (non-zero).
    pub size: u64,
}

/// The counters of a cache (`gpusvc_bo_cache_stats`). The host sets `struct_size =
/// sizeof(struct gpusvc_bo_cache_stats_snapshot)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_bo_cache_stats_snapshot {
    /// Set by the host to `sizeof(struct gpusvc_bo_cache_stats_snapshot)` before the call: the
    /// library writes only that many bytes and sets this to the bytes written.
    pub struct_size: usize,
    /// Imports that found the buffer cached.
    pub hits: u64,
    /// Imports that created an object.
    pub misses: u64,
    /// GEM handles closed.
    pub closes: u64,
    /// Closes of a handle that was not open (must stay 0).
    pub double_closes: u64,
    /// Closes that failed otherwise.
    pub close_errors: u64,
    /// Imports refused for their size (too small, mismatch, plane out of bounds).
    pub size_rejects: u64,
    /// Imports refused with `GPUSVC_BO_CACHE_FOREIGN_HANDLE`.
    pub foreign_handles: u64,
    /// Objects alive now.
    pub live: usize,
    /// Bytes of the handle table.
    pub table_bytes: usize,
}

impl From<Stats> for gpusvc_bo_cache_stats_snapshot {
    fn from(s: Stats) -> Self {
        gpusvc_bo_cache_stats_snapshot {
            struct_size: size_of::<Self>(),
            hits: s.hits,
            misses: s.misses,
            closes: s.closes,
            double_closes: s.double_closes,
            close_errors: s.close_errors,
            size_rejects: s.size_rejects,
            foreign_handles: s.foreign_handles,
            live: s.live,
            table_bytes: s.table_bytes,
        }
    }
}

growable!(gpusvc_bo_cache_stats_snapshot {
    first: table_bytes,
    last: table_bytes
});
sized_default!(gpusvc_bo_cache_stats_snapshot);

fn bad_fd(name: &str, fd: i32) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_BO_CACHE_NOT_A_DMABUF,
        format!("`{name}` {fd} is not an open file descriptor (EBADF)"),
    )
}

/// A borrowed fd argument: a negative or closed fd is `GPUSVC_BO_CACHE_NOT_A_DMABUF`, as the
/// kernel's EBADF.
///
/// # Safety
/// If `fd` is open now, it stays open for the call (the export's contract: the caller does not
/// close it on another thread meanwhile).
pub(crate) unsafe fn fd_in<'a>(fd: i32, name: &str) -> Result<BorrowedFd<'a>, FfiError> {
    if fd < 0 {
        return Err(bad_fd(name, fd));
    }
    // SAFETY: F_GETFD reads the fd's flags and touches no memory; any number is allowed.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(bad_fd(name, fd));
    }
    // SAFETY: `fd` is non-negative and open, and stays open for the call (contract).
    Ok(unsafe { BorrowedFd::borrow_raw(fd) })
}

/// A `bo-cache` error as a code, with the crate's message as the detail.
pub(crate) fn bo_error(e: BoError) -> FfiError {
    use gpusvc_result::*;
    let code = match &e {
        BoError::InvalidArgument(_) => {
            return invalid_argument(format!("bo-cache: {e}"));
        }
        BoError::NotADmaBuf { .. } => GPUSVC_BO_CACHE_NOT_A_DMABUF,
        BoError::TooSmall { .. } => GPUSVC_BO_CACHE_TOO_SMALL,
        BoError::SizeMismatch { .. } => GPUSVC_BO_CACHE_SIZE_MISMATCH,
        BoError::FlagsConflict { .. } => GPUSVC_BO_CACHE_FLAGS_CONFLICT,
        BoError::ForeignHandle { .. } => GPUSVC_BO_CACHE_FOREIGN_HANDLE,
        BoError::PlaneOutOfBounds { .. } => GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS,
        BoError::Kernel { .. } => GPUSVC_BO_CACHE_KERNEL_ERROR,
        BoError::TableFull { .. } => GPUSVC_BO_CACHE_TABLE_FULL,
        BoError::TooManyReferences { .. } => GPUSVC_BO_CACHE_TOO_MANY_REFERENCES,
        BoError::NotADrmDevice { .. } => GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE,
    };
    FfiError::new(code, format!("bo-cache: {e}"))
}
