//! The synchronization facade: `std` normally, `loom` under `--cfg loom`, so a model checker can
//! explore the code that goes through here. Nothing in this crate names `std::sync` directly.
//!
//! Two kinds of `Arc`: [`Arc`] is the facade's (loom's under `--cfg loom`, as `sync-points`
//! hands out), [`OwnArc`] / [`OwnWeak`] are always `std`'s and own the scheduler itself, its
//! clock and its callbacks. Those are plain ownership, part of no atomic protocol here, and
//! loom's `Arc` has no `new_cyclic`, no `Weak` and no unsized coercion.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

/// Locks, recovering from poisoning: every critical section here completes its mutation before
/// it can panic, and task closures (which may panic) never run under a lock.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) use std::sync::{Arc as OwnArc, Weak as OwnWeak};
