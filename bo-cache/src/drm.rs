//! The real backend: a DRM device node (a render node, normally), through `drm-ffi`'s
//! GEM/PRIME ioctls.

use std::fmt;
use std::num::NonZeroU32;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{
    FileType, MemfdFlags, Mode, OFlags, SealFlags, fcntl_add_seals, fstat, ftruncate, major,
    memfd_create, minor, open,
};
use rustix::io::Errno;

use crate::{BoCache, BoError, CacheConfig, Kernel, KernelOp};

/// The character-device major number of DRM nodes (`DRM_MAJOR`).
pub const DRM_MAJOR: u32 = 226;

/// One DRM file description that this value opened itself, on a DRM device node (a render
/// node, normally).
///
/// The description is never shared: [`DrmKernel::open`] opens the node anew, and
/// [`DrmKernel::reopen`] opens the node behind a given fd anew rather than `dup`ing it (GEM
/// handles belong to the open file description, so a `dup` would share them with whoever owns
/// the fd, and that owner's closes would free the cache's handles). The host reaches the
/// description through [`DrmKernel::device_fd`] (and [`BoCache::device_fd`]) to use the
/// handles the cache gives it — command submission, GEM mmap, KMS framebuffers — but never to
/// create or close handles.
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

fn open_error(errno: Errno) -> BoError {
    BoError::Kernel {
        op: KernelOp::Open,
        errno,
    }
}

/// The device number of `fd` if it is a DRM device node (a character device with major 226).
fn drm_rdev(fd: BorrowedFd<'_>) -> Result<u64, BoError> {
    let st = fstat(fd).map_err(open_error)?;
    let kind = FileType::from_raw_mode(st.st_mode);
    // st_rdev is a u64 on Linux; the cast only widens where it is narrower.
    #[allow(clippy::unnecessary_cast)]
    let rdev = st.st_rdev as u64;
    if kind != FileType::CharacterDevice || major(rdev) != DRM_MAJOR {
        return Err(BoError::NotADrmDevice {
            reason: "not a DRM character device (major 226)",
        });
    }
    Ok(rdev)
}

/// Flags of the real open: read-write, never blocking, never a controlling terminal.
fn device_flags() -> OFlags {
    OFlags::RDWR | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY
}

impl DrmKernel {
    /// Opens `path` (such as `/dev/dri/renderD128`) as a new file description of the cache's
    /// own.
    ///
    /// The path is first opened with `O_PATH`, which opens nothing behind it (no FIFO writer is
    /// released, no terminal, serial port or watchdog is touched, nothing blocks on a FIFO), and
    /// checked: it must be a DRM device node (character device, major 226), otherwise
    /// [`BoError::NotADrmDevice`]. Only then is the node itself opened, through that `O_PATH`
    /// fd (`/proc/self/fd`; where `/proc` is missing, through the path again, checked to be
    /// the same device). A symbolic link is followed (udev's `/dev/dri/by-path/*` are links).
    ///
    /// A GPU process should open a render node (`renderD*`). A primary node (`card*`) is
    /// accepted for hosts that need the handles on a KMS description (framebuffers for
    /// scan-out); opening one may make the process DRM master if there is none.
    ///
    /// # Errors
    /// [`BoError::Kernel`] with [`KernelOp::Open`] for the `open`/`fstat` errno (`ENOENT`,
    /// `EACCES`, ...); [`BoError::NotADrmDevice`] for anything that is not a DRM device node.
    pub fn open(path: impl AsRef<Path>) -> Result<DrmKernel, BoError> {
        let path = path.as_ref();
        let probe =
            open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).map_err(open_error)?;
        let rdev = drm_rdev(probe.as_fd())?;
        let via_proc = format!("/proc/self/fd/{}", probe.as_raw_fd());
        let fd = match open(via_proc.as_str(), device_flags(), Mode::empty()) {
            Ok(fd) => fd,
            // No /proc here: open the path itself, and check it is still the same device.
            Err(Errno::NOENT) => {
                let fd = open(path, device_flags(), Mode::empty()).map_err(open_error)?;
                if drm_rdev(fd.as_fd())? != rdev {
                    return Err(BoError::NotADrmDevice {
                        reason: "the path changed to another device while it was opened",
                    });
                }
                fd
            }
            Err(errno) => return Err(open_error(errno)),
        };
        Ok(DrmKernel {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Opens the DRM node behind `fd` anew (through `/proc/self/fd`), so that the cache gets a
    /// file description of its own: `fd` is only borrowed and its description is never used by
    /// the cache. Needs `/proc` and permission to open the node.
    ///
    /// # Errors
    /// As [`DrmKernel::open`]; a `fd` that is not a DRM device node is
    /// [`BoError::NotADrmDevice`] (checked before anything is opened).
    pub fn reopen(fd: BorrowedFd<'_>) -> Result<DrmKernel, BoError> {
        drm_rdev(fd)?;
        let via_proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let mut kernel = Self::open(&via_proc)?;
        // Name the node, not the caller's fd number (which means nothing once closed).
        if let Ok(target) = std::fs::read_link(&via_proc) {
            kernel.path = target;
        }
        Ok(kernel)
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

    /// The node this description was opened on (the path given to [`DrmKernel::open`], or the
    /// node behind the fd given to [`DrmKernel::reopen`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cache's DRM file description, borrowed: the GEM handles of the cache's objects are
    /// valid on it (and on no other), for command submission, GEM mmap or KMS framebuffers.
    /// Never create or close handles on it (no `GEM_CLOSE`, no PRIME import or export around
    /// the cache): the cache owns every handle on this description.
    pub fn device_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// An `io::Error` from `drm-ffi` as an errno (`EIO` if it carries none).
fn errno_of(e: std::io::Error) -> Errno {
    e.raw_os_error().map_or(Errno::IO, Errno::from_raw_os_error)
}

impl Kernel for DrmKernel {
    fn device_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }

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
    /// A cache on a new file description of the DRM node at `path` (a render node, normally),
    /// with the default [`CacheConfig`] (see [`DrmKernel::open`] for what is accepted).
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

    /// A cache on a new file description of the DRM node behind `fd` (borrowed; see
    /// [`DrmKernel::reopen`]).
    pub fn reopen(fd: BorrowedFd<'_>, config: CacheConfig) -> Result<BoCache, BoError> {
        Ok(BoCache::with_config(DrmKernel::reopen(fd)?, config))
    }
}

/// A maker of real dma-bufs for a render node, for tests and tools that have no decoder or
/// client to get them from: `/dev/udmabuf` (sealed memfds wrapped as dma-bufs) or, failing
/// that, dumb buffers on the device's primary node exported with `PRIME_HANDLE_TO_FD` (a file
/// description other than any cache's, as IGT and libdrm's tests do).
pub struct DmaBufSource {
    kind: SourceKind,
}

enum SourceKind {
    Udmabuf(OwnedFd),
    Dumb { card: OwnedFd, path: PathBuf },
}

impl fmt::Debug for DmaBufSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// `struct udmabuf_create` of `<linux/udmabuf.h>`.
#[repr(C)]
struct UdmabufCreate {
    memfd: u32,
    flags: u32,
    offset: u64,
    size: u64,
}

/// `_IOW('u', 0x42, struct udmabuf_create)`.
const UDMABUF_CREATE: u64 = (1 << 30) | (24 << 16) | ((b'u' as u64) << 8) | 0x42;
/// `UDMABUF_FLAGS_CLOEXEC`.
const UDMABUF_FLAGS_CLOEXEC: u32 = 1;

/// The primary node of the device behind render node `node`, from sysfs.
fn primary_node_of(node: &Path) -> Option<PathBuf> {
    let st = rustix::fs::stat(node).ok()?;
    // st_rdev is a u64 on Linux; the cast only widens where it is narrower.
    #[allow(clippy::unnecessary_cast)]
    let rdev = st.st_rdev as u64;
    let dir = format!("/sys/dev/char/{}:{}/device/drm", major(rdev), minor(rdev));
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("card"))
        .map(|n| Path::new("/dev/dri").join(n))
}

fn open_rw(path: &Path) -> Result<OwnedFd, Errno> {
    open(
        path,
        OFlags::RDWR | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )
}

impl DmaBufSource {
    /// Every source that can make a dma-buf the render node at `node` imports, best first
    /// (each probed with one buffer imported and closed on a description of its own), or why
    /// there is none.
    pub fn for_node(node: &Path) -> Result<DmaBufSource, String> {
        let mut candidates = Vec::new();
        let mut why = Vec::new();
        match open_rw(Path::new("/dev/udmabuf")) {
            Ok(fd) => candidates.push(DmaBufSource {
                kind: SourceKind::Udmabuf(fd),
            }),
            Err(e) => why.push(format!("/dev/udmabuf: {e}")),
        }
        match primary_node_of(node) {
            Some(path) => match open_rw(&path) {
                Ok(card) => candidates.push(DmaBufSource {
                    kind: SourceKind::Dumb { card, path },
                }),
                Err(e) => why.push(format!("{}: {e}", path.display())),
            },
            None => why.push(format!("{}: no primary node in sysfs", node.display())),
        }
        for source in candidates {
            let probe = source.buffer(4096).and_then(|(buf, _)| {
                let k = DrmKernel::open(node)?;
                let h = k
                    .fd_to_handle(buf.as_fd())
                    .map_err(|errno| BoError::Kernel {
                        op: KernelOp::FdToHandle,
                        errno,
                    })?;
                k.gem_close(h).map_err(|errno| BoError::Kernel {
                    op: KernelOp::GemClose,
                    errno,
                })
            });
            match probe {
                Ok(()) => return Ok(source),
                Err(e) => why.push(format!("{}: {e}", source.describe())),
            }
        }
        Err(format!(
            "no dma-buf source that {} imports ({})",
            node.display(),
            why.join("; ")
        ))
    }

    /// The first render node with a working source, or why there is none.
    pub fn find() -> Result<(PathBuf, DmaBufSource), String> {
        let nodes = DrmKernel::render_nodes();
        if nodes.is_empty() {
            return Err("no DRM render node (/dev/dri/renderD*) on this machine".into());
        }
        let mut why = Vec::new();
        for node in nodes {
            match DmaBufSource::for_node(&node) {
                Ok(source) => return Ok((node, source)),
                Err(e) => why.push(e),
            }
        }
        Err(why.join("; "))
    }

    /// A new dma-buf of at least `size` bytes (rounded up to whole pages of the machine's page
    /// size, which udmabuf requires; 0 counts as one page) and its actual size.
    pub fn buffer(&self, size: u64) -> Result<(OwnedFd, u64), BoError> {
        let page = rustix::param::page_size() as u64;
        let size = size
            .max(1)
            .div_ceil(page)
            .checked_mul(page)
            .ok_or(BoError::InvalidArgument("buffer size overflows"))?;
        let rows = size.div_ceil(4096);
        let kernel = |op| move |errno| BoError::Kernel { op, errno };
        match &self.kind {
            SourceKind::Udmabuf(dev) => {
                let memfd = memfd_create(
                    "gpusvc-udmabuf",
                    MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
                )
                .map_err(kernel(KernelOp::Export))?;
                ftruncate(&memfd, size).map_err(kernel(KernelOp::Export))?;
                fcntl_add_seals(&memfd, SealFlags::SHRINK).map_err(kernel(KernelOp::Export))?;
                let create = UdmabufCreate {
                    memfd: memfd.as_raw_fd() as u32,
                    flags: UDMABUF_FLAGS_CLOEXEC,
                    offset: 0,
                    size,
                };
                // SAFETY: a valid, live request struct for UDMABUF_CREATE on an open udmabuf
                // device; the kernel only reads it.
                let fd = unsafe {
                    libc::ioctl(
                        dev.as_raw_fd(),
                        UDMABUF_CREATE as libc::Ioctl,
                        std::ptr::from_ref(&create),
                    )
                };
                if fd < 0 {
                    return Err(kernel(KernelOp::Export)(
                        Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO),
                    ));
                }
                // SAFETY: the ioctl returned a new fd that nothing else owns.
                Ok((unsafe { OwnedFd::from_raw_fd(fd) }, size))
            }
            SourceKind::Dumb { card, .. } => {
                let height = u32::try_from(rows)
                    .map_err(|_| BoError::InvalidArgument("buffer too large"))?;
                // 1024 pixels of 32 bits: 4096-byte rows (the driver may pad the size).
                let db = drm_ffi::mode::dumbbuffer::create(card.as_fd(), 1024, height, 32, 0)
                    .map_err(|e| kernel(KernelOp::Export)(errno_of(e)))?;
                let exported = drm_ffi::gem::handle_to_fd(
                    card.as_fd(),
                    db.handle,
                    (OFlags::CLOEXEC | OFlags::RDWR).bits(),
                );
                // The dma-buf holds the object; the exporting description's handle goes.
                let _ = drm_ffi::gem::close(card.as_fd(), db.handle);
                let prime = exported.map_err(|e| kernel(KernelOp::HandleToFd)(errno_of(e)))?;
                // SAFETY: the ioctl succeeded and returned a new fd that nothing else owns.
                Ok((unsafe { OwnedFd::from_raw_fd(prime.fd) }, db.size))
            }
        }
    }

    /// What makes the buffers, for messages.
    pub fn describe(&self) -> String {
        match &self.kind {
            SourceKind::Udmabuf(_) => "/dev/udmabuf".into(),
            SourceKind::Dumb { path, .. } => format!("dumb buffers on {}", path.display()),
        }
    }
}
