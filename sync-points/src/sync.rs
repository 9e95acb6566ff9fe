//! The synchronization facade: `std` normally, `loom` under `--cfg loom` so the model checker
//! can explore every interleaving of the code that goes through here.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
/// loom's threads are not OS threads: their thread-locals must be loom's too.
#[cfg(loom)]
pub(crate) use loom::thread_local;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::thread_local;

/// Locks, recovering from poisoning: a panic in another thread left the data consistent (every
/// critical section here completes its mutation before it can panic), and a sync manager that
/// stops serving after one panic would hang the GPU process.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
