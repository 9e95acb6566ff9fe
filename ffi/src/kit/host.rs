//! Host callbacks: [`UserData`] (the host's `void *user_data`, the one type that carries a host
//! pointer across threads), [`HostFn`] (a C function pointer with its user data), [`Gate`] (the
//! free-time gate: once the owning handle's `_free` has returned, the callback is never called
//! again) and [`GatedFn`] (a host callback behind its gate).
//!
//! Which callbacks are gated, and why the others are not:
//! * gated: the program cache's histogram callback and its disk store's log callback. Both
//!   outlive the handle they were given to (program managers keep the Rust cache alive after
//!   `gpusvc_program_cache_free`), so without the gate the host could be called after it freed
//!   its user data.
//! * not gated, per-call callbacks that run while the call that received them is in progress or
//!   exactly once by contract: a scheduler task's `run`/`start` (on the driving thread, while
//!   the scheduler runs it) and `destroy` (exactly once, when the task is dropped: gating it
//!   could skip it and leak the host's task state); the sync wait callbacks (exactly once, when
//!   the wait is released or dropped); the program manager's host GL callbacks (only inside a
//!   manager call on the manager's thread, and the manager's handle owns them).
//! * not gated, owned by the one handle that keeps them reachable: the scheduler's clock and
//!   metrics callbacks are called only by the scheduler, which nothing holds but its handle and
//!   the calls in progress on it, so none starts once `gpusvc_scheduler_free` and those calls
//!   have returned (the header's "until it is freed").

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The host's `void *user_data`. gpusvc never dereferences it: it only hands it back to the
/// host's own callbacks, on the threads the header documents for each of them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UserData(*mut c_void);

// SAFETY: the pointer is opaque to gpusvc (never dereferenced here) and only passed back to the
// host's callbacks. Every function that takes a callback documents, in the header, the threads
// it may be called from (any thread for the program cache's histogram and disk log callbacks,
// the scheduler's clock and the sync wait callbacks; the driving thread for scheduler tasks and
// metrics, the thread that drops a task for `destroy`); the host promises that the callback and
// its user data are safe to use from those threads. This is the only place gpusvc asserts that
// for a host pointer.
unsafe impl Send for UserData {}
// SAFETY: as above; concurrent use is allowed exactly where the header says so.
unsafe impl Sync for UserData {}

impl UserData {
    pub(crate) fn new(ptr: *mut c_void) -> Self {
        UserData(ptr)
    }

    /// The pointer, to pass back to the host.
    pub(crate) fn get(self) -> *mut c_void {
        self.0
    }
}

/// A host callback `f` (a C function pointer) with the user data it is called with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostFn<F> {
    pub(crate) f: F,
    pub(crate) user_data: UserData,
}

impl<F: Copy> HostFn<F> {
    pub(crate) fn new(f: F, user_data: *mut c_void) -> Self {
        HostFn {
            f,
            user_data: UserData::new(user_data),
        }
    }

    /// `None` for a NULL callback.
    pub(crate) fn optional(f: Option<F>, user_data: *mut c_void) -> Option<Self> {
        f.map(|f| HostFn::new(f, user_data))
    }
}

thread_local! {
    /// The gate whose host call this thread is inside (null when none).
    static IN_GATED_CALL: Cell<*const Gate> = const { Cell::new(std::ptr::null()) };
}

/// The free-time gate of a host callback, registered with the handle that owns the callback
/// (`handle::new_shared_gated`) and closed by that handle's `_free`: once closed the callback is
/// never called again, and closing waits for a call in flight on another thread. Calls are
/// serialized (one at a time). A call made while this thread is already inside a gated host
/// call (the host called gpusvc from its callback, and that raised another one) is skipped
/// rather than deadlocking; a host that waits in its callback for another thread that is about
/// to call it can still deadlock, which the header forbids.
#[derive(Debug)]
pub(crate) struct Gate {
    open: AtomicBool,
    /// Held during each call.
    calling: Mutex<()>,
}

impl Gate {
    pub(crate) fn new() -> Arc<Gate> {
        Arc::new(Gate {
            open: AtomicBool::new(true),
            calling: Mutex::new(()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        self.calling.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `call` (a call into the host) unless the gate is closed or this thread is inside a
    /// gated host call already; `None` when skipped.
    pub(crate) fn call<R>(&self, call: impl FnOnce() -> R) -> Option<R> {
        if !IN_GATED_CALL.with(Cell::get).is_null() {
            return None;
        }
        let _calling = self.lock();
        if !self.open.load(Ordering::Acquire) {
            return None;
        }
        /// Clears this thread's mark when the call ends, also when it unwinds (a panic caught
        /// by the export's boundary must not leave the thread marked as inside a call forever).
        struct Inside;
        impl Drop for Inside {
            fn drop(&mut self) {
                IN_GATED_CALL.with(|f| f.set(std::ptr::null()));
            }
        }
        IN_GATED_CALL.with(|f| f.set(self));
        let _inside = Inside;
        Some(call())
    }

    /// Closes the gate: no call starts after this returns.
    pub(crate) fn close(&self) {
        self.open.store(false, Ordering::Release);
        // Wait for a call in flight on another thread, unless this thread is inside this gate's
        // call (the host freed the owner from its callback): that call is this one.
        if !std::ptr::eq(IN_GATED_CALL.with(Cell::get), self) {
            drop(self.lock());
        }
    }
}

/// A host callback behind its own free-time [`Gate`]: the way gpusvc keeps a host callback
/// that may be called after the handle it was given to is freed.
#[derive(Debug, Clone)]
pub(crate) struct GatedFn<F> {
    host: HostFn<F>,
    gate: Arc<Gate>,
}

impl<F: Copy> GatedFn<F> {
    /// `host` behind a new gate, and that gate, for the owning handle to close when it is freed
    /// (`handle::new_shared_gated`).
    pub(crate) fn new(host: HostFn<F>) -> (Self, Arc<Gate>) {
        let gate = Gate::new();
        (
            GatedFn {
                host,
                gate: gate.clone(),
            },
            gate,
        )
    }

    /// Calls the host as `call(f, user_data)` through the gate ([`Gate::call`]): not at all once
    /// the gate is closed or while this thread is inside a gated host call.
    pub(crate) fn call(&self, call: impl FnOnce(F, *mut c_void)) {
        self.gate
            .call(|| call(self.host.f, self.host.user_data.get()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_that_panics_leaves_the_thread_free_to_call_again() {
        let gate = Gate::new();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            gate.call(|| panic!("a panic inside the gated call"))
        }));
        assert!(unwound.is_err());
        assert_eq!(gate.call(|| 1), Some(1));
    }

    #[test]
    fn a_closed_gate_calls_nothing_and_a_nested_call_is_skipped() {
        let gate = Gate::new();
        assert_eq!(gate.call(|| 1), Some(1));
        // A call made from inside a gated call on the same thread is skipped, not deadlocked.
        assert_eq!(gate.call(|| gate.call(|| 2)), Some(None));
        gate.close();
        assert_eq!(gate.call(|| 3), None);
    }

    #[test]
    fn closing_from_inside_another_gates_call_waits_for_a_call_in_flight() {
        use std::sync::mpsc;
        let (a, b) = (Gate::new(), Gate::new());
        let (started, wait_started) = mpsc::channel();
        let (go, wait_go) = mpsc::channel::<()>();
        let done = Arc::new(AtomicBool::new(false));
        let in_flight = std::thread::spawn({
            let (b, done) = (b.clone(), done.clone());
            move || {
                b.call(|| {
                    started.send(()).unwrap();
                    wait_go.recv().unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    done.store(true, Ordering::SeqCst);
                })
            }
        });
        wait_started.recv().unwrap();
        a.call(|| {
            go.send(()).unwrap();
            b.close();
            assert!(
                done.load(Ordering::SeqCst),
                "close returned during b's call"
            );
        });
        assert_eq!(in_flight.join().unwrap(), Some(()));
    }

    #[test]
    fn closing_from_inside_a_call_does_not_wait_for_itself() {
        let gate = Gate::new();
        assert_eq!(gate.call(|| gate.close()), Some(()));
        assert_eq!(gate.call(|| ()), None);
    }
}
