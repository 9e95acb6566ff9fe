//! [`MemfdKernel`]: a fake DRM file description over real memfds that follows the kernel's GEM
//! and PRIME rules, with fault injection and counters, for tests and benchmarks on machines
//! without a render node.

use std::collections::{BTreeSet, HashMap};
use std::num::NonZeroU32;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{
    FileType, MemfdFlags, SealFlags, fcntl_add_seals, fcntl_get_seals, fstat, fstatfs,
};
use rustix::io::{Errno, fcntl_dupfd_cloexec};

use crate::KernelOp;
use crate::kernel::{DRM_CLOEXEC, DRM_RDWR, Identity, Kernel, fstat_identity, lseek_size};
use crate::sync::{Arc, Mutex, lock};

/// `f_type` of tmpfs, the file system behind memfds.
const TMPFS_MAGIC: i64 = 0x0102_1994;
/// The largest handle the kernel hands out (`idr_alloc` with no end, `GEM_CHANGE_HANDLE`'s cap).
const MAX_HANDLE: u32 = i32::MAX as u32;

/// A fake DRM file description whose "dma-bufs" are sealed memfds.
///
/// It follows the kernel's rules (`drm_gem.c`, `drm_prime.c`, IGT `prime_self_import`):
/// * [`fd_to_handle`](Kernel::fd_to_handle) returns the lowest free handle ≥ 1 for a buffer it
///   has no handle for, and the **same** handle for a buffer that has one, however the fd
///   reached the caller (the same fd, a `dup`, one received over `SCM_RIGHTS`, a reopen): the
///   buffer is identified by its inode. A handle holds the buffer open (a dup of the fd), as
///   the kernel holds a dma-buf reference; closing the caller's fd does not end it.
/// * Only what a DRM driver would accept imports: a regular tmpfs file (a memfd) sealed against
///   growing and shrinking, so its size is fixed like a dma-buf's; anything else is `EINVAL`.
/// * [`gem_close`](Kernel::gem_close) of a handle that is not open is `EINVAL`, and is counted
///   in [`FakeStats::double_closes`].
/// * [`handle_to_fd`](Kernel::handle_to_fd) of a handle that is not open is `ENOENT`; otherwise
///   a new fd on the buffer, which re-imports to the same handle.
///
/// [`MemfdKernel::sparse`] hands out random handles in `[1, i32::MAX]` instead, as
/// `GEM_CHANGE_HANDLE` (Linux 6.18) can leave them. [`fail_nth`](MemfdKernel::fail_nth)
/// injects errors. Clones share one description, so a test can keep a clone to look behind the
/// cache's back.
#[derive(Debug, Clone)]
pub struct MemfdKernel {
    state: Arc<Mutex<FakeState>>,
}

/// Counters of a [`MemfdKernel`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FakeStats {
    /// Handles open now.
    pub open_handles: usize,
    /// Handles created (fresh imports).
    pub handles_created: u64,
    /// Successful `fd_to_handle` calls that returned an existing handle.
    pub reimports: u64,
    /// Successful `gem_close` calls.
    pub closes: u64,
    /// `gem_close` calls on a handle that was not open (`EINVAL`): double closes.
    pub double_closes: u64,
    /// Errors injected by [`MemfdKernel::fail_nth`] so far.
    pub injected: u64,
}

#[derive(Debug)]
struct Fault {
    op: KernelOp,
    skip: u32,
    errno: Errno,
}

#[derive(Debug)]
struct Entry {
    identity: Identity,
    /// The buffer, held open as the kernel holds a dma-buf reference.
    buffer: OwnedFd,
}

#[derive(Debug, Default)]
struct FakeState {
    handles: HashMap<u32, Entry>,
    by_identity: HashMap<Identity, u32>,
    /// Dense mode: numbers below `next` that are free.
    free: BTreeSet<u32>,
    next: u32,
    /// Sparse mode: xorshift state.
    sparse: Option<u64>,
    faults: Vec<Fault>,
    stats: FakeStats,
}

impl FakeState {
    /// Takes the fault armed for `op`, if its turn has come.
    fn fault(&mut self, op: KernelOp) -> Result<(), Errno> {
        let Some(i) = self.faults.iter().position(|f| f.op == op) else {
            return Ok(());
        };
        if self.faults[i].skip > 0 {
            self.faults[i].skip -= 1;
            return Ok(());
        }
        let fault = self.faults.remove(i);
        self.stats.injected += 1;
        Err(fault.errno)
    }

    fn allocate(&mut self) -> Result<u32, Errno> {
        if let Some(state) = self.sparse.as_mut() {
            if self.handles.len() >= MAX_HANDLE as usize {
                return Err(Errno::NOSPC);
            }
            loop {
                // xorshift64: cheap, deterministic per seed.
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                let h = (*state % u64::from(MAX_HANDLE)) as u32 + 1;
                if !self.handles.contains_key(&h) {
                    return Ok(h);
                }
            }
        }
        if let Some(h) = self.free.pop_first() {
            return Ok(h);
        }
        if self.next >= MAX_HANDLE {
            return Err(Errno::NOSPC);
        }
        self.next += 1;
        Ok(self.next)
    }
}

impl Default for MemfdKernel {
    fn default() -> Self {
        Self::new()
    }
}

impl MemfdKernel {
    /// A fake description handing out the lowest free handle, as the kernel does.
    pub fn new() -> Self {
        MemfdKernel {
            state: Arc::new(Mutex::new(FakeState::default())),
        }
    }

    /// A fake description handing out pseudo-random handles in `[1, i32::MAX]` (deterministic
    /// for a given `seed`).
    pub fn sparse(seed: u64) -> Self {
        let k = Self::new();
        lock(&k.state).sparse = Some(seed | 1);
        k
    }

    /// Makes the call to `op` after the next `skip` ones fail with `errno` (without effect: a
    /// failed `gem_close` leaves the handle open). Faults for one op fire in the order armed.
    pub fn fail_nth(&self, op: KernelOp, skip: u32, errno: Errno) {
        lock(&self.state).faults.push(Fault { op, skip, errno });
    }

    /// Makes the next call to `op` fail with `errno`.
    pub fn fail_next(&self, op: KernelOp, errno: Errno) {
        self.fail_nth(op, 0, errno);
    }

    /// The counters.
    pub fn stats(&self) -> FakeStats {
        let s = lock(&self.state);
        FakeStats {
            open_handles: s.handles.len(),
            ..s.stats
        }
    }

    /// Whether `handle` is open, and on which buffer.
    pub fn handle_identity(&self, handle: NonZeroU32) -> Option<Identity> {
        lock(&self.state)
            .handles
            .get(&handle.get())
            .map(|e| e.identity)
    }

    /// A new buffer this fake imports: a memfd of `size` bytes, sealed against growing,
    /// shrinking and further sealing.
    pub fn new_buffer(size: u64) -> Result<OwnedFd, Errno> {
        let fd = rustix::fs::memfd_create(
            c"gpusvc-bo",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )?;
        rustix::fs::ftruncate(&fd, size)?;
        fcntl_add_seals(&fd, SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL)?;
        Ok(fd)
    }
}

/// What `dma_buf_get` + the driver's import would refuse: anything but a regular tmpfs file
/// whose size is sealed.
fn check_importable(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    let st = fstat(fd)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Errno::INVAL);
    }
    #[allow(clippy::unnecessary_cast)]
    if fstatfs(fd)?.f_type as i64 != TMPFS_MAGIC {
        return Err(Errno::INVAL);
    }
    let seals = fcntl_get_seals(fd).map_err(|_| Errno::INVAL)?;
    if !seals.contains(SealFlags::GROW | SealFlags::SHRINK) {
        return Err(Errno::INVAL);
    }
    Ok(())
}

impl Kernel for MemfdKernel {
    fn fd_to_handle(&self, dmabuf: BorrowedFd<'_>) -> Result<NonZeroU32, Errno> {
        let mut s = lock(&self.state);
        s.fault(KernelOp::FdToHandle)?;
        check_importable(dmabuf)?;
        let identity = fstat_identity(dmabuf)?;
        if let Some(&h) = s.by_identity.get(&identity) {
            s.stats.reimports += 1;
            return NonZeroU32::new(h).ok_or(Errno::INVAL);
        }
        let buffer = fcntl_dupfd_cloexec(dmabuf, 0)?;
        let h = s.allocate()?;
        s.handles.insert(h, Entry { identity, buffer });
        s.by_identity.insert(identity, h);
        s.stats.handles_created += 1;
        NonZeroU32::new(h).ok_or(Errno::INVAL)
    }

    fn gem_close(&self, handle: NonZeroU32) -> Result<(), Errno> {
        let mut s = lock(&self.state);
        s.fault(KernelOp::GemClose)?;
        let Some(entry) = s.handles.remove(&handle.get()) else {
            s.stats.double_closes += 1;
            return Err(Errno::INVAL);
        };
        s.by_identity.remove(&entry.identity);
        if s.sparse.is_none() {
            s.free.insert(handle.get());
        }
        s.stats.closes += 1;
        Ok(())
    }

    fn handle_to_fd(&self, handle: NonZeroU32, flags: u32) -> Result<OwnedFd, Errno> {
        let mut s = lock(&self.state);
        s.fault(KernelOp::HandleToFd)?;
        // As the kernel: only DRM_CLOEXEC and DRM_RDWR are flags.
        if flags & !(DRM_CLOEXEC | DRM_RDWR) != 0 {
            return Err(Errno::INVAL);
        }
        let entry = s.handles.get(&handle.get()).ok_or(Errno::NOENT)?;
        if flags & DRM_CLOEXEC != 0 {
            fcntl_dupfd_cloexec(entry.buffer.as_fd(), 0)
        } else {
            rustix::io::dup(entry.buffer.as_fd())
        }
    }

    fn size(&self, dmabuf: BorrowedFd<'_>) -> Result<u64, Errno> {
        lock(&self.state).fault(KernelOp::Size)?;
        lseek_size(dmabuf)
    }

    fn identity(&self, dmabuf: BorrowedFd<'_>) -> Result<Identity, Errno> {
        lock(&self.state).fault(KernelOp::Identity)?;
        fstat_identity(dmabuf)
    }
}
