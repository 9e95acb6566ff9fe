//! The kernel side of a DRM file description, as a trait, so the cache runs on a real render
//! node or on a fake that follows the same rules ([`MemfdKernel`](crate::MemfdKernel)).

use std::fmt;
use std::num::NonZeroU32;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::fs::{SeekFrom, fstat, seek};
use rustix::io::Errno;

/// `DRM_CLOEXEC`, an export flag: the new dma-buf fd is close-on-exec (`O_CLOEXEC`).
pub const DRM_CLOEXEC: u32 = rustix::fs::OFlags::CLOEXEC.bits();
/// `DRM_RDWR`, an export flag: the new dma-buf fd may be mapped writable (`O_RDWR`).
pub const DRM_RDWR: u32 = rustix::fs::OFlags::RDWR.bits();

/// The identity of a buffer: `(st_dev, st_ino)` of the file behind a dma-buf fd. Every dma-buf
/// has its own inode, numbered from a 64-bit counter, so two fds name the same buffer exactly
/// when their identities are equal (memfds, the stand-ins in tests, follow the same rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

/// One DRM file description: the four GEM/PRIME operations the cache needs.
///
/// The kernel's rules, which every implementation follows and the cache relies on:
/// * a handle is per file description, never 0, and `fd_to_handle` of a buffer that already has
///   a handle on this description returns that same handle (the kernel deduplicates imports);
/// * handles are **not** reference counted: one `gem_close` ends the handle, and a second one
///   (or one of an unknown handle) fails with `EINVAL`;
/// * a freed handle number may be handed out again by the next import.
///
/// The cache calls `fd_to_handle` and `gem_close` only while it holds its import lock.
pub trait Kernel: Send + Sync + fmt::Debug {
    /// `DRM_IOCTL_PRIME_FD_TO_HANDLE`: the handle of the buffer behind `dmabuf` on this
    /// description, creating one if it has none.
    fn fd_to_handle(&self, dmabuf: BorrowedFd<'_>) -> Result<NonZeroU32, Errno>;
    /// `DRM_IOCTL_GEM_CLOSE`: ends `handle`. `EINVAL` if it is not open.
    fn gem_close(&self, handle: NonZeroU32) -> Result<(), Errno>;
    /// `DRM_IOCTL_PRIME_HANDLE_TO_FD`: a new dma-buf fd for `handle`. `flags` are the ioctl's:
    /// [`DRM_CLOEXEC`] and [`DRM_RDWR`]; any other bit is `EINVAL`.
    fn handle_to_fd(&self, handle: NonZeroU32, flags: u32) -> Result<OwnedFd, Errno>;
    /// The DRM file description the handles live on, for the host to use them (submission,
    /// mmap, framebuffers) but never to create or close handles. Default: `None` (a fake has
    /// none).
    fn device_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    /// The buffer's size in bytes. Default: [`lseek_size`].
    fn size(&self, dmabuf: BorrowedFd<'_>) -> Result<u64, Errno> {
        lseek_size(dmabuf)
    }
    /// The buffer's identity. Default: [`fstat_identity`].
    fn identity(&self, dmabuf: BorrowedFd<'_>) -> Result<Identity, Errno> {
        fstat_identity(dmabuf)
    }
}

/// The size of a dma-buf as the uapi gives it: `lseek(fd, 0, SEEK_END)`, then back to offset 0
/// (a dma-buf accepts exactly these two seeks).
pub fn lseek_size(fd: BorrowedFd<'_>) -> Result<u64, Errno> {
    let size = seek(fd, SeekFrom::End(0))?;
    seek(fd, SeekFrom::Start(0))?;
    Ok(size)
}

/// `(st_dev, st_ino)` of `fd`.
pub fn fstat_identity(fd: BorrowedFd<'_>) -> Result<Identity, Errno> {
    let st = fstat(fd)?;
    // st_dev/st_ino are unsigned on Linux; the casts only widen.
    #[allow(clippy::unnecessary_cast)]
    Ok(Identity {
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
    })
}
