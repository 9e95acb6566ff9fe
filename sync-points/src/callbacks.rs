//! The per-thread queue of wait callbacks: a callback that a callback triggers runs after it,
//! not inside it.
//!
//! Every callback of this crate starts here. The first call on a thread (no callback of this
//! crate running on it) runs its callbacks, then drains the thread's queue until it is empty.
//! A call made from inside one of those callbacks (a release, finish, destroy, ...) only appends
//! its callbacks to the queue and returns; the outermost call runs them once the current callback
//! returns. A chain of releases made from callbacks therefore takes constant stack, however long,
//! and callbacks run first in, first out: breadth-first over what triggered them.
//!
//! The queue is a thread-local (`crate::sync::const_thread_local`, loom's under `--cfg loom`):
//! nothing in it is shared between threads, and it is borrowed only to push or pop — never while
//! a callback runs or while a callback or fence is dropped, so a callback (or a callback's drop
//! code) may call back into the crate.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use crate::client::WaitCallback;

struct Pending {
    /// An outer frame on this thread is running callbacks and will drain `queue`.
    draining: Cell<bool>,
    queue: RefCell<VecDeque<WaitCallback>>,
}

crate::sync::const_thread_local! {
    static PENDING: Pending = Pending {
        draining: Cell::new(false),
        queue: RefCell::new(VecDeque::new()),
    };
}

/// Runs one callback, keeping the first panic to resume once the queue is empty.
fn call(callback: WaitCallback, panic: &mut Option<Box<dyn Any + Send>>) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(callback)) {
        // A second panic's payload is dropped: the first one is the one reported.
        panic.get_or_insert(payload);
    }
}

/// Runs `callbacks` in order on this thread — at once, or, when called from inside a callback,
/// after the callbacks already queued on this thread (see the module docs). Must be called with
/// no lock of this crate held.
///
/// A callback that panics does not stop the others: the queue is drained, then the first panic
/// resumes from the outermost call.
pub(crate) fn run(callbacks: impl IntoIterator<Item = WaitCallback>) {
    // `None`: this thread's queue was destroyed (a thread-local destructor releasing as the
    // thread exits). Run the callbacks here; what they trigger nests, as there is no queue.
    let outer = PENDING.try_with(|p| !p.draining.replace(true)).ok();
    if outer == Some(false) {
        // Inside a callback: queue them. Collected first so that nothing runs (no iterator
        // code, no drop) while the queue is borrowed.
        let batch: Vec<WaitCallback> = callbacks.into_iter().collect();
        PENDING.with(|p| p.queue.borrow_mut().extend(batch));
        return;
    }
    let draining = outer.map(|_| Draining);
    let mut panic = None;
    for callback in callbacks {
        call(callback, &mut panic);
    }
    if draining.is_some() {
        // The callbacks above (and those they ran) queued theirs behind them: drain, FIFO.
        while let Some(callback) = PENDING.with(|p| p.queue.borrow_mut().pop_front()) {
            call(callback, &mut panic);
        }
    }
    drop(draining);
    if let Some(payload) = panic {
        resume_unwind(payload);
    }
}

/// Held by the outermost call while it runs and drains: clears the thread's `draining` flag when
/// it is done — also if it unwinds, which nothing but the callers' iterators could make it do
/// (callbacks' panics are caught); what would be left queued then runs at the thread's next
/// outermost call.
struct Draining;

impl Drop for Draining {
    fn drop(&mut self) {
        let _ = PENDING.try_with(|p| p.draining.set(false));
    }
}
