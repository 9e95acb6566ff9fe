//! Error values of the cache.

use rustix::io::Errno;

/// The kernel operation that failed, in [`BoError::Kernel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelOp {
    /// `DRM_IOCTL_PRIME_FD_TO_HANDLE`.
    FdToHandle,
    /// `DRM_IOCTL_GEM_CLOSE`.
    GemClose,
    /// `DRM_IOCTL_PRIME_HANDLE_TO_FD`.
    HandleToFd,
    /// The size query (`lseek(fd, 0, SEEK_END)`).
    Size,
    /// The identity query (`fstat`).
    Identity,
    /// Opening (or `fstat` of) the DRM node.
    Open,
    /// Making a dma-buf to import ([`DmaBufSource`](crate::DmaBufSource)).
    Export,
}

/// Why an import, a plane import or an export failed. Every failure is a value; the cache's
/// state and the counts of the objects already cached are unchanged by it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoError {
    /// The request contradicts itself (for example `min_size` above `exact_size`, or a plane
    /// whose `offset + size` overflows).
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// The fd is not a buffer the DRM file can import: `EBADF`/`EINVAL` from FD_TO_HANDLE, or
    /// `ESPIPE`/`EINVAL` from the size query.
    #[error("not an importable dma-buf ({errno})")]
    NotADmaBuf {
        /// The kernel's errno.
        errno: Errno,
    },
    /// The buffer is smaller than the caller's `min_size`.
    #[error("buffer of {actual} bytes is smaller than the required {required}")]
    TooSmall {
        /// The buffer's size.
        actual: u64,
        /// The caller's `min_size`.
        required: u64,
    },
    /// The buffer's size differs from the caller's `exact_size`.
    #[error("buffer of {actual} bytes is not the expected {expected}")]
    SizeMismatch {
        /// The buffer's size.
        actual: u64,
        /// The caller's `exact_size`.
        expected: u64,
    },
    /// The buffer is cached with other import flags than the ones asked for.
    #[error("buffer cached with flags {cached:#x}, asked for {requested:#x}")]
    FlagsConflict {
        /// Flags of the cached object.
        cached: u32,
        /// Flags of the request.
        requested: u32,
    },
    /// The kernel returned a handle the cache holds for a *different* buffer: someone closed the
    /// cache's handle behind its back and the number was recycled. The cache does not close it.
    #[error("GEM handle {handle} was recycled behind the cache's back (foreign handle)")]
    ForeignHandle {
        /// The handle.
        handle: u32,
    },
    /// A plane does not fit in its buffer.
    #[error(
        "plane {plane}: offset {offset} + size {size} exceeds the buffer's {buffer_size} bytes"
    )]
    PlaneOutOfBounds {
        /// Index of the plane in the request.
        plane: usize,
        /// The plane's offset.
        offset: u64,
        /// The plane's size.
        size: u64,
        /// The size of the buffer holding it.
        buffer_size: u64,
    },
    /// A kernel call failed for a reason other than the ones above (`ENOMEM`, `ENOSPC`,
    /// `EMFILE`, ...).
    #[error("kernel call {op:?} failed ({errno})")]
    Kernel {
        /// Which call.
        op: KernelOp,
        /// The kernel's errno.
        errno: Errno,
    },
    /// Storing this handle would take the handle table over its memory cap
    /// ([`CacheConfig::max_table_bytes`](crate::CacheConfig::max_table_bytes)).
    #[error("handle table full: handle {handle} needs memory beyond the {limit_bytes}-byte cap")]
    TableFull {
        /// The handle that did not fit.
        handle: u32,
        /// The cap.
        limit_bytes: usize,
    },
    /// The path or fd given for the cache's DRM file is not a DRM render node.
    #[error("not a DRM render node: {reason}")]
    NotADrmDevice {
        /// What it is instead.
        reason: &'static str,
    },
    /// The object already has the most references the cache allows
    /// ([`CacheConfig::max_refs`](crate::CacheConfig::max_refs)); nothing changed. Usually a
    /// leak of references in the caller.
    #[error("GEM handle {handle} already has {limit} references, the cache's limit")]
    TooManyReferences {
        /// The object's handle.
        handle: u32,
        /// The limit.
        limit: u32,
    },
}
