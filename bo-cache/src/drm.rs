//! The real backend: a DRM render node, through `drm-ffi`'s GEM/PRIME ioctls.

use std::fmt;
use std::num::NonZeroU32;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, fstat, major, minor, open};
use rustix::io::Errno;

use crate::{BoCache, BoError, CacheConfig, Kernel, KernelOp};

/// The character-device major number of DRM nodes (`DRM_MAJOR`).
pub const DRM_MAJOR: u32 = 226;

/// Render nodes have minors from 128 (`renderD128`); primary (card) nodes below 64.
const RENDER_MINOR_BASE: u32 = 128;

/// One DRM file description that this value opened itself, on a render node.
///
/// The description is never shared: [`DrmKernel::open`] opens the node anew, and
/// [`DrmKernel::reopen`] opens the node behind a given fd anew rather than `dup`ing it (GEM
/// handles belong to the open file description, so a `dup` would share them with whoever owns
/// the fd, and that owner's closes would free the cache's handles).
pub struct DrmKernel {
    fd: OwnedFd,
    path: PathBuf,
}

impl fmt::Debug for DrmKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DrmKernel")
            .field("fd", &self.fd.as_raw_fd())
            .field("path", &self.path)
            .finish()
    }
}

/// Checks that `fd` is a DRM device node (a character device with major 226); returns its minor.
fn drm_minor(fd: BorrowedFd<'_>) -> Result<u32, BoError> {
    let st = fstat(fd).map_err(|errno| BoError::Kernel {
        op: KernelOp::Open,
        errno,
    })?;
    let kind = FileType::from_raw_mode(st.st_mode);
    // st_rdev is a u64 on Linux; the cast only widens where it is narrower.
    #[allow(clippy::unnecessary_cast)]
    let rdev = st.st_rdev as u64;
    if kind != FileType::CharacterDevice || major(rdev) != DRM_MAJOR {
        return Err(BoError::NotADrmDevice {
            reason: "not a DRM character device (major 226)",
        });
    }
    Ok(minor(rdev))
}

impl DrmKernel {
    /// Opens `path` (such as `/dev/dri/renderD128`) as a new file description of the cache's
    /// own.
    ///
    /// The open is non-blocking and never creates anything, so a FIFO or any other non-device
    /// path fails at once instead of hanging; the opened file must be a DRM render node
    /// (character device, major 226, minor >= 128), otherwise [`BoError::NotADrmDevice`].
    /// Primary (`card*`) nodes are refused: there PRIME import needs DRM authentication, and
    /// a modesetting master may share the description's handles. A symbolic link is followed
    /// (udev's `/dev/dri/by-path/*` are links), and the node it leads to must pass the same
    /// checks.
    ///
    /// # Errors
    /// [`BoError::Kernel`] with [`KernelOp::Open`] for the `open`/`fstat` errno (`ENOENT`,
    /// `EACCES`, ...); [`BoError::NotADrmDevice`] for anything that is not a render node.
    pub fn open(path: impl AsRef<Path>) -> Result<DrmKernel, BoError> {
        let path = path.as_ref();
        let fd = open(
            path,
            OFlags::RDWR | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(|errno| BoError::Kernel {
            op: KernelOp::Open,
            errno,
        })?;
        if drm_minor(fd.as_fd())? < RENDER_MINOR_BASE {
            return Err(BoError::NotADrmDevice {
                reason: "a primary (card) node, not a render node",
            });
        }
        Ok(DrmKernel {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Opens the render node behind `fd` anew (through `/proc/self/fd`), so that the cache
    /// gets a file description of its own: `fd` is only borrowed and its description is never
    /// used by the cache.
    ///
    /// # Errors
    /// As [`DrmKernel::open`]; a `fd` that is not a render node is
    /// [`BoError::NotADrmDevice`] (checked before anything is opened).
    pub fn reopen(fd: BorrowedFd<'_>) -> Result<DrmKernel, BoError> {
        if drm_minor(fd)? < RENDER_MINOR_BASE {
            return Err(BoError::NotADrmDevice {
                reason: "a primary (card) node, not a render node",
            });
        }
        Self::open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
    }

    /// The render nodes present (`/dev/dri/renderD*`), sorted; empty when the machine has
    /// none.
    pub fn render_nodes() -> Vec<PathBuf> {
        let mut nodes: Vec<PathBuf> = std::fs::read_dir("/dev/dri")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("renderD"))
            .map(|e| e.path())
            .collect();
        nodes.sort();
        nodes
    }

    /// The path this description was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// An `io::Error` from `drm-ffi` as an errno (`EIO` if it carries none).
fn errno_of(e: std::io::Error) -> Errno {
    e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error)
}

impl Kernel for DrmKernel {
    fn fd_to_handle(&self, dmabuf: BorrowedFd<'_>) -> Result<NonZeroU32, Errno> {
        let prime = drm_ffi::gem::fd_to_handle(self.fd.as_fd(), dmabuf).map_err(errno_of)?;
        // The kernel never hands out handle 0; if a driver did, the cache could not key it.
        NonZeroU32::new(prime.handle).ok_or(Errno::INVAL)
    }

    fn gem_close(&self, handle: NonZeroU32) -> Result<(), Errno> {
        drm_ffi::gem::close(self.fd.as_fd(), handle.get())
            .map(drop)
            .map_err(errno_of)
    }

    fn handle_to_fd(&self, handle: NonZeroU32, flags: u32) -> Result<OwnedFd, Errno> {
        let prime =
            drm_ffi::gem::handle_to_fd(self.fd.as_fd(), handle.get(), flags).map_err(errno_of)?;
        if prime.fd < 0 {
            return Err(Errno::INVAL);
        }
        // SAFETY: the ioctl succeeded and returned a new fd that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(prime.fd) })
    }
}

impl BoCache {
    /// A cache on a new file description of the render node at `path`, with the default
    /// [`CacheConfig`] (see [`DrmKernel::open`] for what is accepted).
    pub fn open(path: impl AsRef<Path>) -> Result<BoCache, BoError> {
        Self::open_with_config(path, CacheConfig::default())
    }

    /// As [`BoCache::open`], with `config`.
    pub fn open_with_config(
        path: impl AsRef<Path>,
        config: CacheConfig,
    ) -> Result<BoCache, BoError> {
        Ok(BoCache::with_config(DrmKernel::open(path)?, config))
    }

    /// A cache on a new file description of the render node behind `fd` (borrowed; see
    /// [`DrmKernel::reopen`]).
    pub fn reopen(fd: BorrowedFd<'_>, config: CacheConfig) -> Result<BoCache, BoError> {
        Ok(BoCache::with_config(DrmKernel::reopen(fd)?, config))
    }
}
