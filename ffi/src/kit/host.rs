//! Host callbacks: [`UserData`] (the host's `void *user_data`, the one type that carries a host
//! pointer across threads), [`HostFn`] (a C function pointer with its user data), [`Gate`] (the
//! free-time gate: once the owning handle's `_free` has returned, the callback is never called
//! again) and [`GatedFn`] (a host callback behind its gate).
//!
//! Which callbacks are gated, and why the others are not:
//! * gated: the program cache's histogram callback, its disk store's log callback and its
//!   persistence sink, and a `gpusvc_program_cache_store`'s log callback. The cache's outlive
//!   the handle they were given to (program managers keep the Rust cache alive after
//!   `gpusvc_program_cache_free`), and a store call in flight on another thread may still log
//!   after `gpusvc_program_cache_store_free`, so without the gate the host could be called after
//!   it freed its user data.
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
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The host's `void *user_data`. gpusvc never dereferences it: it only hands it back to the
/// host's own callbacks, on the threads the header documents for each of them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UserData(*mut c_void);

// SAFETY: the pointer is opaque to gpusvc (never dereferenced here) and only passed back to the
// host's callbacks. Every function that takes a callback documents, in the header, the threads
// it may be called from (any thread for the program cache's histogram and disk log callbacks,
// the scheduler's clock and the sync wait callbacks; the cache's persistence thread for its
// persistence sink; the calling thread for a store's log; the driving thread for scheduler tasks
// and metrics, the thread that drops a task for `destroy`); the host promises that the callback and
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
    /// This thread's number for [`Gate::caller`] and [`CLOSERS`] (never 0).
    static THREAD_NO: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        // Relaxed: only uniqueness is needed, which the read-modify-write gives.
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

/// The threads waiting in [`Gate::close`] for a call in flight, and the gate each waits for
/// (its address). Consulted and updated only under its lock, so of two threads that would wait
/// for each other the second sees the first.
static CLOSERS: Mutex<Option<HashMap<u64, usize>>> = Mutex::new(None);

/// The free-time gate of a host callback, registered with the handle that owns the callback
/// (`handle::new_shared_gated`) and closed by that handle's `_free`: once closed the callback is
/// never called again, and closing waits for a call in flight on another thread. Calls are
/// serialized (one at a time). A call made while this thread is already inside a gated host
/// call (the host called gpusvc from its callback, and that raised another one) is skipped
/// rather than deadlocking; a host that waits in its callback for another thread that is about
/// to call it can still deadlock, which the header forbids.
///
/// Closing waits for a call in flight except where the wait would close a cycle: this thread
/// is inside a call of gate A, the call in flight on gate B is made by a thread that is itself
/// waiting to close A (two callbacks each freeing the other's cache). The closer that finds
/// the cycle does not wait (the gate is closed all the same: no call starts afterwards), the
/// other's wait then ends when this thread's call returns.
#[derive(Debug)]
pub(crate) struct Gate {
    open: AtomicBool,
    /// Held during each call.
    calling: Mutex<()>,
    /// The number of the thread inside a call of this gate (0: none). Written by that thread
    /// while it holds `calling`; read by closers under [`CLOSERS`]'s lock. SeqCst: a closer
    /// that registered itself must see a caller that registered before it (the writes are
    /// rare, one per call; the order makes the cycle check sound without another lock).
    caller: AtomicU64,
}

impl Gate {
    pub(crate) fn new() -> Arc<Gate> {
        Arc::new(Gate {
            open: AtomicBool::new(true),
            calling: Mutex::new(()),
            caller: AtomicU64::new(0),
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
        /// Clears this thread's marks when the call ends, also when it unwinds (a panic caught
        /// by the export's boundary must not leave the thread marked as inside a call forever).
        struct Inside<'g>(&'g Gate);
        impl Drop for Inside<'_> {
            fn drop(&mut self) {
                self.0.caller.store(0, Ordering::SeqCst);
                IN_GATED_CALL.with(|f| f.set(std::ptr::null()));
            }
        }
        IN_GATED_CALL.with(|f| f.set(self));
        self.caller.store(THREAD_NO.with(|n| *n), Ordering::SeqCst);
        let _inside = Inside(self);
        Some(call())
    }

    /// Closes the gate: no call starts after this returns.
    pub(crate) fn close(&self) {
        self.open.store(false, Ordering::Release);
        // Wait for a call in flight on another thread, unless this thread is inside this gate's
        // call (the host freed the owner from its callback): that call is this one.
        if std::ptr::eq(IN_GATED_CALL.with(Cell::get), self) {
            return;
        }
        let me = THREAD_NO.with(|n| *n);
        {
            let mut closers = CLOSERS.lock().unwrap_or_else(|e| e.into_inner());
            let closers = closers.get_or_insert_with(HashMap::new);
            if self.wait_would_close_a_cycle(me, closers) {
                return;
            }
            closers.insert(me, self as *const Gate as usize);
        }
        drop(self.lock());
        if let Some(closers) = CLOSERS.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            closers.remove(&me);
        }
    }

    /// True when the thread inside this gate's call waits (directly or through other closers)
    /// for a gate whose call thread `me` is inside: waiting here would never end.
    fn wait_would_close_a_cycle(&self, me: u64, closers: &HashMap<u64, usize>) -> bool {
        let mut gate: *const Gate = self;
        // Each step follows a distinct waiting thread, so at most `closers.len()` steps.
        for _ in 0..=closers.len() {
            // SAFETY: `gate` is `self` or a gate a waiting closer registered: that closer is
            // blocked in `close` on `&Gate` (its entry is removed before `close` returns), so the
            // gate is alive while CLOSERS's lock, which the caller holds, keeps the entry.
            let caller = unsafe { &*gate }.caller.load(Ordering::SeqCst);
            if caller == 0 {
                return false;
            }
            if caller == me {
                return true;
            }
            match closers.get(&caller) {
                Some(&next) => gate = next as *const Gate,
                None => return false,
            }
        }
        false
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
    fn two_callbacks_each_closing_the_others_gate_both_return() {
        use std::sync::Barrier;
        use std::sync::mpsc;
        let (a, b) = (Gate::new(), Gate::new());
        let both_inside = Arc::new(Barrier::new(2));
        let (done, finished) = mpsc::channel();
        for (mine, other) in [(a.clone(), b.clone()), (b, a)] {
            let (both_inside, done) = (both_inside.clone(), done.clone());
            std::thread::spawn(move || {
                mine.call(|| {
                    both_inside.wait();
                    other.close();
                });
                done.send(()).unwrap();
            });
        }
        for _ in 0..2 {
            finished
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("the two closes wait for each other: deadlock");
        }
    }

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
