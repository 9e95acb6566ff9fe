//! The synchronization facade: `std` normally, `loom` under `--cfg loom`, so that the model
//! checker can explore every interleaving of the code that goes through here.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};

/// Locks, recovering from poisoning. Nothing in this crate panics while it holds a lock (kernel
/// errors are values); a panicking [`Kernel`](crate::Kernel) implementation at worst leaks the
/// handle it was working on, and a cache that stopped serving after one panic would take the GPU
/// process's buffer imports down with it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes the pointer out of `a`, leaving null, through `&mut` (no atomic access: nothing else
/// can reach it). Under loom this is not a scheduling point, so a table's teardown does not
/// spend the model's branch budget.
pub(crate) fn take_ptr<T>(a: &mut AtomicPtr<T>) -> *mut T {
    #[cfg(loom)]
    return a.with_mut(|p| std::mem::replace(p, std::ptr::null_mut()));
    #[cfg(not(loom))]
    return std::mem::replace(a.get_mut(), std::ptr::null_mut());
}
