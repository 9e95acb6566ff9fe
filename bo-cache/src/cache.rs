//! The cache: [`BoCache`], [`Bo`], and the refcount protocol (see the crate docs).

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU32;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::ptr::NonNull;

use rustix::io::Errno;

use crate::kernel::{Identity, Kernel};
use crate::sync::{Mutex, Ordering, lock};
use crate::table::{Slot, Table};
use crate::{BoError, KernelOp};

/// Above this many references to one object, taking another aborts the process (as `Arc`
/// does): the count could otherwise wrap to 0 and free a buffer still in use.
const MAX_REFCOUNT: u32 = i32::MAX as u32;

/// How a cache is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Cap on the handle table's memory, in bytes (default 16 MiB). A handle whose leaf would
    /// take the table past it is refused with [`BoError::TableFull`]. Dense handles cost about
    /// 40 bytes each (1024 of them fit in under 64 KiB); a handle alone in its leaf, as
    /// sparse handles are, costs at most one leaf and two interior nodes (about 14 KiB), so the
    /// default holds at least 1100 arbitrary handles and about 400 000 dense ones. The table's
    /// nodes live as long as the cache: the cap bounds every handle number the cache has ever
    /// seen, not only the live ones (kernels hand out the lowest free number, so a real
    /// description reuses its numbers; only `GEM_CHANGE_HANDLE` spreads them).
    pub max_table_bytes: usize,
    /// Check on every cache hit that the fd names the buffer cached under the handle the kernel
    /// returned (one `fstat`); a mismatch is [`BoError::ForeignHandle`]. Default on.
    pub identity_check: bool,
    /// The most references one object may have through [`BoCache::import`] and
    /// [`Bo::try_clone`]; beyond it they fail with [`BoError::TooManyReferences`] and change
    /// nothing (a C host that leaks references gets an error, not a wrapped count). Default and
    /// maximum `i32::MAX` (larger values count as `i32::MAX`, 0 as 1). [`Bo::clone`] and
    /// [`BoCache::lookup`] cannot fail: they abort the process above `i32::MAX`, as `Arc` does.
    pub max_refs: u32,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            max_table_bytes: 16 << 20,
            identity_check: true,
            max_refs: MAX_REFCOUNT,
        }
    }
}

/// What an import requires of the buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportDesc {
    /// The buffer must have at least this many bytes ([`BoError::TooSmall`] otherwise).
    pub min_size: u64,
    /// If set, the buffer must have exactly this many bytes ([`BoError::SizeMismatch`]).
    pub exact_size: Option<u64>,
    /// Import flags; a buffer already cached with other flags is [`BoError::FlagsConflict`].
    pub flags: u32,
}

impl ImportDesc {
    /// Requires at least `min_size` bytes.
    pub fn min_size(min_size: u64) -> Self {
        ImportDesc {
            min_size,
            ..Self::default()
        }
    }

    /// Requires exactly `size` bytes.
    pub fn exact_size(size: u64) -> Self {
        ImportDesc {
            exact_size: Some(size),
            ..Self::default()
        }
    }

    fn validate(&self) -> Result<(), BoError> {
        match self.exact_size {
            Some(exact) if exact < self.min_size => {
                Err(BoError::InvalidArgument("exact_size is below min_size"))
            }
            _ => Ok(()),
        }
    }

    fn check_size(&self, actual: u64) -> Result<(), BoError> {
        if actual < self.min_size {
            return Err(BoError::TooSmall {
                actual,
                required: self.min_size,
            });
        }
        match self.exact_size {
            Some(expected) if expected != actual => Err(BoError::SizeMismatch { actual, expected }),
            _ => Ok(()),
        }
    }
}

/// One plane of a multi-plane import: `size` bytes at `offset` in the buffer behind `fd`.
#[derive(Debug, Clone, Copy)]
pub struct PlaneDesc<'fd> {
    /// The plane's dma-buf (borrowed).
    pub fd: BorrowedFd<'fd>,
    /// Byte offset of the plane in its buffer.
    pub offset: u64,
    /// Bytes of the plane.
    pub size: u64,
}

/// The objects of a multi-plane import, one per plane (planes in one buffer share one object).
#[derive(Debug, Clone)]
pub struct PlaneSet {
    planes: Vec<Bo>,
}

impl PlaneSet {
    /// The object of each plane, in request order.
    pub fn planes(&self) -> &[Bo] {
        &self.planes
    }

    /// The distinct GEM handles, ascending (each to be closed once, by the cache).
    pub fn distinct_handles(&self) -> Vec<NonZeroU32> {
        let mut h: Vec<_> = self.planes.iter().map(Bo::handle).collect();
        h.sort_unstable();
        h.dedup();
        h
    }
}

/// Counters of a cache, from [`BoCache::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Imports that found the buffer cached.
    pub hits: u64,
    /// Imports that created an object.
    pub misses: u64,
    /// Successful `GEM_CLOSE`s.
    pub closes: u64,
    /// `GEM_CLOSE`s that failed with `EINVAL` (the handle was not open): double closes. Must
    /// stay 0; anything else means someone else closes handles on the cache's description.
    pub double_closes: u64,
    /// `GEM_CLOSE`s that failed otherwise.
    pub close_errors: u64,
    /// Imports refused for their size (too small, mismatch, plane out of bounds).
    pub size_rejects: u64,
    /// Imports refused with [`BoError::ForeignHandle`].
    pub foreign_handles: u64,
    /// Objects alive now.
    pub live: usize,
    /// Bytes of the handle table.
    pub table_bytes: usize,
}

/// What the import lock guards.
#[derive(Debug)]
struct State {
    stats: Stats,
    /// The `BoCache` value was dropped; the last release frees `Inner`.
    cache_dropped: bool,
    /// For each handle number found naming another buffer than the cache's (the slot's
    /// `foreign` mark is set), the identity of that other buffer: imports of it under the
    /// number are refused. Empty unless someone broke the ownership rule; at most one entry
    /// per slot.
    foreign: HashMap<u32, Identity>,
}

/// The cache proper, freed when the `BoCache` is dropped and no object is alive (both decided
/// under the lock).
struct Inner {
    kernel: Box<dyn Kernel>,
    config: CacheConfig,
    /// The import/teardown lock ("M" in the crate docs).
    state: Mutex<State>,
    table: Table,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inner")
            .field("kernel", &self.kernel)
            .field("config", &self.config)
            .finish()
    }
}

impl Inner {
    fn max_refs(&self) -> u32 {
        self.config.max_refs.clamp(1, MAX_REFCOUNT)
    }

    /// `GEM_CLOSE` with the outcome counted. The caller holds the lock.
    fn close_locked(&self, stats: &mut Stats, handle: NonZeroU32) {
        count_close(stats, self.kernel.gem_close(handle));
    }

    /// An import that hit `slot`, with the lock held. On error nothing changed: no close, no
    /// count change.
    fn hit(
        &self,
        stats: &mut Stats,
        foreign: &mut HashMap<u32, Identity>,
        slot: &Slot,
        handle: NonZeroU32,
        fd: BorrowedFd<'_>,
        desc: &ImportDesc,
    ) -> Result<(), BoError> {
        if self.config.identity_check {
            let id = self.kernel.identity(fd).map_err(|errno| BoError::Kernel {
                op: KernelOp::Identity,
                errno,
            })?;
            // Relaxed field loads: they were written under this lock.
            let cached = Identity {
                dev: slot.dev.load(Ordering::Relaxed),
                ino: slot.ino.load(Ordering::Relaxed),
            };
            if id != cached {
                // Someone else closed the cache's handle and the number was handed out again:
                // it names `id` now, not the cached buffer (see `refuse_foreign`).
                slot.foreign.store(1, Ordering::Relaxed);
                foreign.insert(handle.get(), id);
                return Err(refuse_foreign(stats, handle));
            }
            // Relaxed: the mark is written under this lock only. (Read first: a hit need not
            // dirty the slot's cache line.)
            if slot.foreign.load(Ordering::Relaxed) != 0 {
                // The number names the cached buffer again: the other buffer's handle was
                // closed and this one made anew, so it is the cache's again.
                slot.foreign.store(0, Ordering::Relaxed);
                foreign.remove(&handle.get());
            }
        }
        if let Err(e) = desc.check_size(slot.size.load(Ordering::Relaxed)) {
            stats.size_rejects += 1;
            return Err(e);
        }
        let cached = slot.flags.load(Ordering::Relaxed);
        if cached != desc.flags {
            return Err(BoError::FlagsConflict {
                cached,
                requested: desc.flags,
            });
        }
        try_take_ref(slot, handle, self.max_refs())?;
        stats.hits += 1;
        Ok(())
    }

    /// A first import: learn and check the size and identity. Nothing is written to the slot.
    fn probe(
        &self,
        stats: &mut Stats,
        fd: BorrowedFd<'_>,
        desc: &ImportDesc,
    ) -> Result<(u64, Identity), BoError> {
        let size = self.kernel.size(fd).map_err(|errno| match errno {
            Errno::SPIPE | Errno::INVAL => BoError::NotADmaBuf { errno },
            errno => BoError::Kernel {
                op: KernelOp::Size,
                errno,
            },
        })?;
        if let Err(e) = desc.check_size(size) {
            stats.size_rejects += 1;
            return Err(e);
        }
        let id = self.kernel.identity(fd).map_err(|errno| BoError::Kernel {
            op: KernelOp::Identity,
            errno,
        })?;
        Ok((size, id))
    }

    /// An import that got a number marked foreign whose slot has no live object. Refused (and
    /// not closed) if the fd is the buffer the number was found naming: that handle is another
    /// user's. Otherwise the number was made anew for this buffer: the mark goes and the import
    /// goes on as a miss. The caller holds the lock.
    #[inline(never)]
    fn reclaim(
        &self,
        stats: &mut Stats,
        foreign: &mut HashMap<u32, Identity>,
        slot: &Slot,
        handle: NonZeroU32,
        fd: BorrowedFd<'_>,
    ) -> Result<(), BoError> {
        // An identity error leaves the handle open: whose it is cannot be told.
        let id = self.kernel.identity(fd).map_err(|errno| BoError::Kernel {
            op: KernelOp::Identity,
            errno,
        })?;
        if foreign.get(&handle.get()) == Some(&id) {
            return Err(refuse_foreign(stats, handle));
        }
        slot.foreign.store(0, Ordering::Relaxed);
        foreign.remove(&handle.get());
        Ok(())
    }

    /// An import that missed: the handle is fresh. Learns and checks the size and identity and
    /// fills `slot` with one reference, or closes the handle. The caller holds the lock. Out of
    /// line, so that the hit path of `import` stays small.
    #[inline(never)]
    fn fill(
        &self,
        stats: &mut Stats,
        slot: &Slot,
        handle: NonZeroU32,
        fd: BorrowedFd<'_>,
        desc: &ImportDesc,
    ) -> Result<(), BoError> {
        match self.probe(stats, fd, desc) {
            Err(e) => {
                self.close_locked(stats, handle);
                Err(e)
            }
            Ok((size, id)) => {
                // Relaxed stores: published by the Release store of the count below, and to
                // importers by the lock.
                slot.size.store(size, Ordering::Relaxed);
                slot.dev.store(id.dev, Ordering::Relaxed);
                slot.ino.store(id.ino, Ordering::Relaxed);
                slot.flags.store(desc.flags, Ordering::Relaxed);
                slot.generation.fetch_add(1, Ordering::Relaxed);
                // Release: a lock-free `lookup` whose Acquire CAS reads this value (or a later
                // one in its release sequence) sees the fields written above.
                slot.refcount.store(1, Ordering::Release);
                stats.misses += 1;
                stats.live += 1;
                Ok(())
            }
        }
    }
}

/// The deliberately broken variants of the protocol that the loom models must catch
/// (`scripts/loom-mutants`). Each reproduces a bug another driver shipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(loom), allow(dead_code))]
enum Mutant {
    /// Unlock, then `GEM_CLOSE` (anv's v2).
    UnlockBeforeClose,
    /// `FD_TO_HANDLE` before taking the lock (minigbm).
    FdToHandleOutsideLock,
    /// A lock-free decrement to 0, then an import revives the dying slot (panfrost, old
    /// nouveau).
    DecToZeroThenRevive,
    /// An import's error path closes a cached handle (amdgpu).
    ErrorPathClosesCached,
    /// A plain decrement without "unless one".
    PlainDecrement,
}

/// Whether mutant `m` is selected. Only loom builds have mutants: there the environment
/// variable `BO_CACHE_MUTANT` (unset or empty: none; `unlock_before_close`, `fd_to_handle_outside_lock`,
/// `dec_to_zero_then_revive`, `error_path_closes_cached`, `plain_decrement`) picks one, read
/// once. In every other build this is a constant `false` and the variants compile away.
#[cfg(loom)]
fn mutant(m: Mutant) -> bool {
    static SELECTED: std::sync::OnceLock<Option<Mutant>> = std::sync::OnceLock::new();
    let selected = SELECTED.get_or_init(|| {
        let name = std::env::var("BO_CACHE_MUTANT")
            .ok()
            .filter(|n| !n.is_empty())?;
        let all = [
            ("unlock_before_close", Mutant::UnlockBeforeClose),
            ("fd_to_handle_outside_lock", Mutant::FdToHandleOutsideLock),
            ("dec_to_zero_then_revive", Mutant::DecToZeroThenRevive),
            ("error_path_closes_cached", Mutant::ErrorPathClosesCached),
            ("plain_decrement", Mutant::PlainDecrement),
        ];
        let found = all.iter().find(|(n, _)| *n == name).map(|&(_, m)| m);
        assert!(found.is_some(), "unknown BO_CACHE_MUTANT {name:?}");
        found
    });
    *selected == Some(m)
}

#[cfg(not(loom))]
#[inline(always)]
fn mutant(_: Mutant) -> bool {
    false
}

/// The two mutants whose release decrements without "unless one".
#[inline(always)]
fn plain_decrement_mutant() -> bool {
    mutant(Mutant::PlainDecrement) || mutant(Mutant::DecToZeroThenRevive)
}

/// The refusal of a handle number the cache found naming another buffer than its own. Only a
/// broken ownership rule gets here: someone else closed a handle on the cache's description and
/// the kernel handed the number out again. The cache cannot tell whether the handle the kernel
/// returned was made by its own import or belongs to that other user, so it takes the safe
/// side: it refuses the number for that other buffer and never closes it (not at the last
/// release of its stale object, nor later for that buffer). At worst a handle the cache's own
/// import made leaks; never is another user's handle closed under them. An import that later
/// gets the number for any other buffer takes it back (the other buffer's handle was closed).
fn refuse_foreign(stats: &mut Stats, handle: NonZeroU32) -> BoError {
    stats.foreign_handles += 1;
    BoError::ForeignHandle {
        handle: handle.get(),
    }
}

/// Counts the outcome of a `GEM_CLOSE`.
fn count_close(stats: &mut Stats, result: Result<(), Errno>) {
    match result {
        Ok(()) => stats.closes += 1,
        Err(Errno::INVAL) => stats.double_closes += 1,
        Err(_) => stats.close_errors += 1,
    }
}

/// Takes one more reference on a live slot (`refcount >= 1`, held by the caller or stable under
/// the lock).
fn take_ref(slot: &Slot) {
    // Relaxed: the new reference comes from an existing one (or from the lock), which already
    // orders this thread after the slot's publication; nothing is published by the increment.
    let prev = slot.refcount.fetch_add(1, Ordering::Relaxed);
    if prev > MAX_REFCOUNT {
        std::process::abort();
    }
}

/// Takes one more reference on a live slot unless it already has `limit`; the slot's count
/// is `>= 1` (held by the caller or stable under the lock), so it never revives a dying slot.
fn try_take_ref(slot: &Slot, handle: NonZeroU32, limit: u32) -> Result<(), BoError> {
    let mut cur = slot.refcount.load(Ordering::Relaxed);
    loop {
        if cur >= limit {
            return Err(BoError::TooManyReferences {
                handle: handle.get(),
                limit,
            });
        }
        // Relaxed on success and failure, as in `take_ref`: the new reference comes from an
        // existing one (or from the lock), and nothing is published by the increment.
        match slot.refcount.compare_exchange_weak(
            cur,
            cur + 1,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return Ok(()),
            Err(now) => cur = now,
        }
    }
}

/// A buffer-object cache over one DRM file description: exactly one object per GEM handle.
/// See the crate docs for the rules.
pub struct BoCache {
    inner: NonNull<Inner>,
}

// SAFETY: `Inner` is Send + Sync (the kernel is Send + Sync, the rest is a mutex and atomics),
// and the pointer stays valid while the `BoCache` exists (it is freed only once the cache was
// dropped, under the lock).
unsafe impl Send for BoCache {}
// SAFETY: as above; every `&self` method is safe to call from several threads.
unsafe impl Sync for BoCache {}

impl fmt::Debug for BoCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoCache")
            .field("inner", self.inner())
            .field("stats", &self.stats())
            .finish()
    }
}

impl BoCache {
    /// A cache over `kernel`, with the default [`CacheConfig`]. The cache owns the description:
    /// nobody else may create or close handles on it.
    pub fn with_kernel(kernel: impl Kernel + 'static) -> Self {
        Self::with_config(kernel, CacheConfig::default())
    }

    /// A cache over `kernel` with `config`.
    pub fn with_config(kernel: impl Kernel + 'static, config: CacheConfig) -> Self {
        let inner = Box::new(Inner {
            kernel: Box::new(kernel),
            config,
            state: Mutex::new(State {
                stats: Stats {
                    table_bytes: Table::BASE_BYTES,
                    ..Stats::default()
                },
                cache_dropped: false,
                foreign: HashMap::new(),
            }),
            table: Table::new(),
        });
        BoCache {
            inner: NonNull::from(Box::leak(inner)),
        }
    }

    fn inner(&self) -> &Inner {
        // SAFETY: valid while `self` exists (see the `Send` impl).
        unsafe { self.inner.as_ref() }
    }

    /// Imports the dma-buf behind `fd` (borrowed: the caller keeps and closes it) and returns
    /// its object: the cached one with one more reference if this description already has the
    /// buffer, a new one otherwise.
    ///
    /// On error nothing changed: a handle the import created is closed again, and an object
    /// already cached keeps its handle and count.
    ///
    /// ```
    /// use bo_cache::{BoCache, ImportDesc, MemfdKernel};
    /// use std::os::fd::AsFd;
    ///
    /// let cache = BoCache::with_kernel(MemfdKernel::new());
    /// let buf = MemfdKernel::new_buffer(4096).unwrap();
    /// let a = cache.import(buf.as_fd(), &ImportDesc::min_size(4096)).unwrap();
    /// let b = cache.import(buf.as_fd(), &ImportDesc::default()).unwrap();
    /// assert_eq!(a.handle(), b.handle()); // one object per GEM handle
    /// assert_eq!(a.size(), 4096);
    /// drop(buf); // the handle keeps the buffer; the fd was only borrowed
    /// drop((a, b)); // the last release closes the handle, once
    /// assert_eq!(cache.stats().closes, 1);
    /// assert_eq!(cache.stats().double_closes, 0);
    /// ```
    pub fn import(&self, fd: BorrowedFd<'_>, desc: &ImportDesc) -> Result<Bo, BoError> {
        desc.validate()?;
        let inner = self.inner();
        // Mutant (loom models only): FD_TO_HANDLE before taking the lock, as minigbm did.
        let early = mutant(Mutant::FdToHandleOutsideLock).then(|| inner.kernel.fd_to_handle(fd));
        let mut st = lock(&inner.state);
        let State { stats, foreign, .. } = &mut *st;
        let fd_to_handle = match early {
            Some(result) => result,
            None => inner.kernel.fd_to_handle(fd),
        };
        let handle = fd_to_handle.map_err(|errno| match errno {
            Errno::BADF | Errno::INVAL => BoError::NotADmaBuf { errno },
            errno => BoError::Kernel {
                op: KernelOp::FdToHandle,
                errno,
            },
        })?;
        let cap = inner.config.max_table_bytes;
        let Some(slot) = inner
            .table
            .get_or_insert(handle.get(), &mut stats.table_bytes, cap)
        else {
            // No slot existed, so the handle is not cached: it is fresh and ours to close.
            inner.close_locked(stats, handle);
            return Err(BoError::TableFull {
                handle: handle.get(),
                limit_bytes: cap,
            });
        };
        // Relaxed: under the lock, 0 vs positive is stable (only the lock holder takes a count
        // to or from 0; lock-free lookups only increment from >= 1).
        let cached = slot.refcount.load(Ordering::Relaxed) > 0;
        // Mutant (loom models only): a slot whose count an unlocked release took to 0 but whose
        // teardown has not run yet (its identity is still there) is revived by the import.
        let cached = cached
            || (mutant(Mutant::DecToZeroThenRevive) && slot.ino.load(Ordering::Relaxed) != 0);
        if cached {
            let hit = inner.hit(stats, foreign, slot, handle, fd, desc);
            // Mutant (loom models only): the error path closes the handle even though it is
            // cached, as amdgpu's import once did.
            if mutant(Mutant::ErrorPathClosesCached) && hit.is_err() {
                inner.close_locked(stats, handle);
            }
            hit?;
            return Ok(Bo::new(self.inner, slot, handle));
        }
        if slot.foreign.load(Ordering::Relaxed) != 0 {
            inner.reclaim(stats, foreign, slot, handle, fd)?;
        }
        inner.fill(stats, slot, handle, fd, desc)?;
        Ok(Bo::new(self.inner, slot, handle))
    }

    /// Imports each plane's buffer and checks that `offset + size` (checked arithmetic) fits in
    /// it; planes in one buffer share its object. On error every reference taken is released.
    pub fn import_planes(&self, planes: &[PlaneDesc<'_>], flags: u32) -> Result<PlaneSet, BoError> {
        if planes.is_empty() {
            return Err(BoError::InvalidArgument("no planes"));
        }
        let mut out = Vec::with_capacity(planes.len());
        for (i, p) in planes.iter().enumerate() {
            if p.size == 0 {
                return Err(BoError::InvalidArgument("empty plane"));
            }
            let end = p
                .offset
                .checked_add(p.size)
                .ok_or(BoError::InvalidArgument("plane offset + size overflows"))?;
            let desc = ImportDesc {
                min_size: end,
                exact_size: None,
                flags,
            };
            match self.import(p.fd, &desc) {
                Ok(bo) => out.push(bo),
                Err(BoError::TooSmall { actual, .. }) => {
                    return Err(BoError::PlaneOutOfBounds {
                        plane: i,
                        offset: p.offset,
                        size: p.size,
                        buffer_size: actual,
                    });
                }
                Err(e) => return Err(e),
            }
        }
        Ok(PlaneSet { planes: out })
    }

    /// The object that owns `handle` now, with one more reference, or `None`. Lock-free. The
    /// kernel recycles handle numbers, so this is "whoever holds the number now"; to keep a
    /// buffer, keep its [`Bo`]. A number found naming another buffer
    /// ([`BoError::ForeignHandle`]) has no owner in the cache: `None`.
    pub fn lookup(&self, handle: NonZeroU32) -> Option<Bo> {
        let slot = self.inner().table.get(handle.get())?;
        // Relaxed: a hint; the mark only ever goes from 0 to 1 (under the import lock), and a
        // lookup racing the import that sets it is ordered before that import.
        if slot.foreign.load(Ordering::Relaxed) != 0 {
            return None;
        }
        let mut cur = slot.refcount.load(Ordering::Relaxed);
        loop {
            if cur == 0 {
                return None;
            }
            if cur > MAX_REFCOUNT {
                std::process::abort();
            }
            // Acquire on success: reads from the release sequence of the publishing
            // `store(1, Release)`, so the slot's fields are visible. Relaxed on failure: we
            // only retry with the value read.
            match slot.refcount.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(Bo::new(self.inner, slot, handle)),
                Err(now) => cur = now,
            }
        }
    }

    /// The cache's DRM file description, borrowed, when the kernel side is a real device
    /// ([`DrmKernel`](crate::DrmKernel)): the objects' GEM handles are valid on it, for command
    /// submission, GEM mmap or KMS framebuffers. Never create or close handles on it: the cache
    /// owns every handle there. `None` for a fake ([`MemfdKernel`](crate::MemfdKernel)).
    pub fn device_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner().kernel.device_fd()
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        lock(&self.inner().state).stats
    }
}

impl Drop for BoCache {
    fn drop(&mut self) {
        let free = {
            let mut st = lock(&self.inner().state);
            st.cache_dropped = true;
            st.stats.live == 0
        };
        if free {
            // SAFETY: no object is alive and the cache is gone, so nothing else can reach
            // `Inner`; it came from `Box::leak` and is freed here only (the final release frees
            // it only when `cache_dropped` was already set, under the same lock).
            drop(unsafe { Box::from_raw(self.inner.as_ptr()) });
        }
    }
}

/// One reference to a cached buffer object. `Clone` takes another reference (lock-free), `Drop`
/// releases one; the last release closes the GEM handle. Keeps the cache's internals alive
/// after the [`BoCache`] is dropped.
pub struct Bo {
    inner: NonNull<Inner>,
    slot: NonNull<Slot>,
    handle: NonZeroU32,
}

// SAFETY: a `Bo` holds a counted reference, which keeps its slot live and `Inner` allocated
// (`live > 0`); everything it touches through the pointers is atomic or behind the lock, and
// `Inner` is Send + Sync.
unsafe impl Send for Bo {}
// SAFETY: as above; `&Bo` methods only read atomics or call the Sync kernel.
unsafe impl Sync for Bo {}

impl Bo {
    fn new(inner: NonNull<Inner>, slot: &Slot, handle: NonZeroU32) -> Self {
        Bo {
            inner,
            slot: NonNull::from(slot),
            handle,
        }
    }

    fn inner(&self) -> &Inner {
        // SAFETY: our reference keeps `live > 0`, so `Inner` is not freed.
        unsafe { self.inner.as_ref() }
    }

    fn slot(&self) -> &Slot {
        // SAFETY: slots live as long as the table, which lives as long as `Inner`.
        unsafe { self.slot.as_ref() }
    }

    /// The GEM handle on the cache's description.
    pub fn handle(&self) -> NonZeroU32 {
        self.handle
    }

    /// The buffer's size in bytes (learned at first import).
    pub fn size(&self) -> u64 {
        // Relaxed: the field is fixed while a reference is held, and our reference was
        // obtained after it was written (lock or Acquire).
        self.slot().size.load(Ordering::Relaxed)
    }

    /// The import flags of the object.
    pub fn flags(&self) -> u32 {
        self.slot().flags.load(Ordering::Relaxed)
    }

    /// How many times the slot of this handle was filled: two objects on one handle number at
    /// different times have different generations.
    pub fn generation(&self) -> u32 {
        self.slot().generation.load(Ordering::Relaxed)
    }

    /// The number of references now (a snapshot, for diagnostics and tests).
    pub fn ref_count(&self) -> u32 {
        self.slot().refcount.load(Ordering::Relaxed)
    }

    /// A new dma-buf fd for the buffer (`PRIME_HANDLE_TO_FD` on the cache's description, with
    /// `flags` such as `O_CLOEXEC`). Export goes through the cache so that no other layer
    /// touches its handles.
    ///
    /// # Errors
    /// [`BoError::ForeignHandle`] when an import has found the object's handle recycled for
    /// another buffer (someone closed it behind the cache's back): exporting it would hand out
    /// the other buffer. The check and the export are made under the import lock, so an import
    /// cannot find the handle foreign in between.
    pub fn export_dmabuf(&self, flags: u32) -> Result<OwnedFd, BoError> {
        let inner = self.inner();
        let _st = lock(&inner.state);
        // Relaxed: the mark is written under this lock.
        if self.slot().foreign.load(Ordering::Relaxed) != 0 {
            return Err(BoError::ForeignHandle {
                handle: self.handle.get(),
            });
        }
        inner
            .kernel
            .handle_to_fd(self.handle, flags)
            .map_err(|errno| BoError::Kernel {
                op: KernelOp::HandleToFd,
                errno,
            })
    }
}

impl Bo {
    /// Another reference to the object, unless it already has
    /// [`CacheConfig::max_refs`] ([`BoError::TooManyReferences`]; nothing changed). Lock-free.
    pub fn try_clone(&self) -> Result<Bo, BoError> {
        try_take_ref(self.slot(), self.handle, self.inner().max_refs())?;
        Ok(Bo {
            inner: self.inner,
            slot: self.slot,
            handle: self.handle,
        })
    }
}

impl Clone for Bo {
    fn clone(&self) -> Self {
        take_ref(self.slot());
        Bo {
            inner: self.inner,
            slot: self.slot,
            handle: self.handle,
        }
    }
}

impl fmt::Debug for Bo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bo")
            .field("handle", &self.handle)
            .field("size", &self.size())
            .field("generation", &self.generation())
            .finish()
    }
}

impl Drop for Bo {
    fn drop(&mut self) {
        let slot = self.slot();
        // Mutants (loom models only): a plain lock-free decrement, which can take the count to 0
        // outside the lock; the teardown follows under the lock, unconditionally
        // ("plain_decrement") or only if the count is still 0 ("dec_to_zero_then_revive",
        // whose import revives a zero-count slot).
        if plain_decrement_mutant() {
            if slot.refcount.fetch_sub(1, Ordering::AcqRel) != 1 {
                return;
            }
            self.release_locked();
            return;
        }
        // Fast path, lock-free: "decrement unless one".
        let mut cur = slot.refcount.load(Ordering::Relaxed);
        while cur != 1 {
            // Release on success: this thread's uses of the buffer happen-before the final
            // release's Acquire decrement. Relaxed on failure: we retry with the value read.
            match slot.refcount.compare_exchange_weak(
                cur,
                cur - 1,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
        self.release_locked();
    }
}

impl Bo {
    /// The rest of `drop` when the count was 1 (possibly the last reference): decide under
    /// the lock, and close before unlocking. Out of line, so that the lock-free fast path of
    /// `drop` stays small.
    #[inline(never)]
    fn release_locked(&self) {
        let slot = self.slot();
        let inner = self.inner();
        let free_inner = {
            let mut st = lock(&inner.state);
            // AcqRel: Acquire makes every earlier Release decrement (all in this RMW's release
            // sequence) happen-before the teardown; Release orders our own uses before it.
            if !plain_decrement_mutant() && slot.refcount.fetch_sub(1, Ordering::AcqRel) != 1 {
                // A lookup took a reference meanwhile; it releases later.
                return;
            }
            if mutant(Mutant::DecToZeroThenRevive) && slot.refcount.load(Ordering::Acquire) != 0 {
                return;
            }
            // The foreign mark stays: the number is never the cache's to close again.
            let foreign = slot.foreign.load(Ordering::Relaxed) != 0;
            slot.size.store(0, Ordering::Relaxed);
            slot.dev.store(0, Ordering::Relaxed);
            slot.ino.store(0, Ordering::Relaxed);
            slot.flags.store(0, Ordering::Relaxed);
            let unlock_first = mutant(Mutant::UnlockBeforeClose);
            if !foreign && !unlock_first {
                inner.close_locked(&mut st.stats, self.handle);
            }
            st.stats.live -= 1;
            let free_inner = st.cache_dropped && st.stats.live == 0;
            // Mutant (loom models only): unlock, then close (anv's v2).
            if !foreign && unlock_first {
                drop(st);
                let closed = inner.kernel.gem_close(self.handle);
                count_close(&mut lock(&inner.state).stats, closed);
            }
            free_inner
            // The lock is released here, after the close: an import cannot get this handle
            // number back from the kernel and find the slot still live.
        };
        if free_inner {
            // SAFETY: the cache was dropped and this was the last object (decided under the
            // lock, which nothing can take again), so nothing else reaches `Inner`.
            drop(unsafe { Box::from_raw(self.inner.as_ptr()) });
        }
    }
}
