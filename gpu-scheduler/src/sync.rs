//! The synchronization facade: `std` normally, `loom` under `--cfg loom`, so a model checker can
//! explore the code that goes through here. Nothing in this crate names `std::sync` directly.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard, Weak};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Locks, recovering from poisoning: every critical section here completes its mutation before
/// it can panic, and task closures (which may panic) never run under a lock.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
