//! T8 measured: the memory the cache really allocates, counted by a global allocator, matches
//! what `stats().table_bytes` reports (the figure the `max_table_bytes` cap is enforced on),
//! for 1024 dense and 1024 sparse handles. The kernel here is synthetic and allocates nothing
//! after it is made, so every byte counted is the cache's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::num::NonZeroU32;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use bo_cache::{BoCache, CacheConfig, Errno, Identity, ImportDesc, Kernel};

/// Counts live heap bytes allocated by each thread (the cache allocates on the importing
/// thread; the test harness's other threads must not be counted).
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn add(bytes: isize) {
    // `try_with`: nothing to count once the thread's locals are gone (thread exit).
    let _ = LIVE.try_with(|l| l.set(l.get() + bytes));
}

fn live() -> isize {
    LIVE.with(Cell::get)
}

// SAFETY: forwards to the system allocator and only adds counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(-(layout.size() as isize));
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Hands out the next handle of a fixed list on every import; identities are the handle
/// numbers, so every import is a fresh buffer. No allocation after `new`.
#[derive(Debug)]
struct ListKernel {
    handles: Vec<u32>,
    next: AtomicU32,
}

impl ListKernel {
    fn new(handles: Vec<u32>) -> Self {
        ListKernel {
            handles,
            next: AtomicU32::new(0),
        }
    }

    fn current(&self) -> u32 {
        self.handles[self.next.load(Ordering::Relaxed) as usize - 1]
    }
}

impl Kernel for ListKernel {
    fn fd_to_handle(&self, _dmabuf: BorrowedFd<'_>) -> Result<NonZeroU32, Errno> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) as usize;
        NonZeroU32::new(self.handles[i]).ok_or(Errno::INVAL)
    }
    fn gem_close(&self, _handle: NonZeroU32) -> Result<(), Errno> {
        Ok(())
    }
    fn handle_to_fd(&self, _handle: NonZeroU32, _flags: u32) -> Result<OwnedFd, Errno> {
        Err(Errno::NOSYS)
    }
    fn size(&self, _dmabuf: BorrowedFd<'_>) -> Result<u64, Errno> {
        Ok(4096)
    }
    fn identity(&self, _dmabuf: BorrowedFd<'_>) -> Result<Identity, Errno> {
        Ok(Identity {
            dev: 1,
            ino: u64::from(self.current()),
        })
    }
}

/// Imports every handle of `handles` once; returns (bytes allocated by the cache while the
/// objects are live, the cache's `table_bytes`).
fn measure(handles: Vec<u32>) -> (usize, usize) {
    let n = handles.len();
    let kernel = ListKernel::new(handles);
    let fd = std::fs::File::open("/dev/null").unwrap();
    let fd: OwnedFd = fd.into();
    let config = CacheConfig {
        max_table_bytes: 64 << 20,
        ..CacheConfig::default()
    };
    let mut held = Vec::with_capacity(n);
    let before = live();
    let cache = BoCache::with_config(kernel, config);
    for _ in 0..n {
        held.push(cache.import(fd.as_fd(), &ImportDesc::default()).unwrap());
    }
    let allocated = (live() - before) as usize;
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.live), (n as u64, n));
    drop(held);
    drop(cache);
    (allocated, stats.table_bytes)
}

/// The cache's own struct beside its table: a few hundred bytes (kernel box, lock, counters).
const OVERHEAD: usize = 1024;

#[test]
fn table_bytes_is_what_the_allocator_sees_for_1024_dense_handles() {
    let (allocated, table_bytes) = measure((1..=1024).collect());
    println!("dense 1024: allocated {allocated} B, table_bytes {table_bytes} B");
    assert!(table_bytes <= allocated, "{table_bytes} > {allocated}");
    assert!(
        allocated <= table_bytes + OVERHEAD,
        "{allocated} vs {table_bytes}"
    );
    assert!(
        allocated <= 64 * 1024,
        "{allocated} B for 1024 dense handles"
    );
}

#[test]
fn table_bytes_is_what_the_allocator_sees_for_1024_sparse_handles() {
    // Distinct pseudo-random handles in [1, 2^31) (xorshift; fixed seed).
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut handles = std::collections::BTreeSet::new();
    while handles.len() < 1024 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        handles.insert(1 + (x % ((1 << 31) - 1)) as u32);
    }
    let (allocated, table_bytes) = measure(handles.into_iter().collect());
    println!("sparse 1024: allocated {allocated} B, table_bytes {table_bytes} B");
    assert!(table_bytes <= allocated, "{table_bytes} > {allocated}");
    assert!(
        allocated <= table_bytes + OVERHEAD,
        "{allocated} vs {table_bytes}"
    );
    assert!(
        allocated <= 16 << 20,
        "{allocated} B for 1024 sparse handles"
    );
}
