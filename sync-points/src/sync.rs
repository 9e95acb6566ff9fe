//! The synchronization facade: `std` normally, `loom` under `--cfg loom` so the model checker
//! can explore every interleaving of the code that goes through here.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Locks, recovering from poisoning: a panic in another thread left the data consistent (every
/// critical section here completes its mutation before it can panic), and a sync manager that
/// stops serving after one panic would hang the GPU process.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `thread_local!` for the crate: std's with a `const` initializer (no lazy-init check on each
/// access), or, under `--cfg loom`, loom's — loom's threads are not OS threads, so their
/// thread-locals must be loom's too (its macro takes no `const { }` block).
macro_rules! const_thread_local {
    ($(#[$attr:meta])* static $name:ident: $t:ty = $init:expr;) => {
        #[cfg(not(loom))]
        std::thread_local! { $(#[$attr])* static $name: $t = const { $init }; }
        #[cfg(loom)]
        loom::thread_local! { $(#[$attr])* static $name: $t = $init; }
    };
}
pub(crate) use const_thread_local;
