//! Per-command-buffer release state and its waiters.

use crate::order::{OrderData, SequenceId};
use crate::sync::{Arc, Mutex, lock};
use crate::token::ClientId;

/// A callback run when a wait ends (released, retired or the releaser destroyed).
pub type WaitCallback = Box<dyn FnOnce() + Send + 'static>;

pub(crate) struct Waiter {
    pub(crate) release: u64,
    pub(crate) id: u64,
    pub(crate) callback: WaitCallback,
}

#[derive(Default)]
pub(crate) struct ClientInner {
    pub(crate) released: u64,
    pub(crate) destroyed: bool,
    pub(crate) waiters: Vec<Waiter>,
}

/// What a release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// The count advanced; this many waiters ended. Their callbacks ran before `release`
    /// returned — or, when it was called from inside a wait callback, are queued to run on this
    /// thread once that callback returns.
    Released {
        /// Callbacks run (or queued).
        callbacks: usize,
    },
    /// The count was not above the released one: nothing happened.
    Ignored {
        /// The count already released.
        released: u64,
    },
}

/// Why a release was refused. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    /// Releases happen only while the client's sequence is processing an order number.
    #[error("release outside processing: the client's sequence is not processing")]
    NotProcessing,
    /// The client was destroyed.
    #[error("the client was destroyed")]
    Destroyed,
}

/// The release state of one command buffer, bound to the order data of its sequence.
pub struct ClientState {
    id: ClientId,
    pub(crate) order_data: Arc<OrderData>,
    pub(crate) inner: Mutex<ClientInner>,
}

impl std::fmt::Debug for ClientState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientState")
            .field("id", &self.id)
            .field("sequence", &self.order_data.id())
            .finish_non_exhaustive()
    }
}

/// Runs the waiters' callbacks through the thread's queue ([`crate::callbacks`]); returns how
/// many there were.
fn run(waiters: Vec<Waiter>) -> usize {
    let n = waiters.len();
    if n > 0 {
        crate::callbacks::run(waiters.into_iter().map(|w| w.callback));
    }
    n
}

impl ClientState {
    pub(crate) fn new(id: ClientId, order_data: Arc<OrderData>) -> Self {
        ClientState {
            id,
            order_data,
            inner: Mutex::new(ClientInner::default()),
        }
    }

    /// The client's id.
    pub fn id(&self) -> ClientId {
        self.id
    }

    /// The sequence whose processing releases this client's tokens.
    pub fn sequence(&self) -> SequenceId {
        self.order_data.id()
    }

    /// Whether it was destroyed (through the manager, or with it). A destroyed client is no
    /// longer registered under its id and never is again: a client created since with the same
    /// id is another `ClientState`.
    pub fn is_destroyed(&self) -> bool {
        lock(&self.inner).destroyed
    }

    /// The highest count released.
    pub fn released(&self) -> u64 {
        lock(&self.inner).released
    }

    /// Releases `count`: every waiter for a count `<= count` runs, on this thread, after the
    /// locks are released, in the order the waiters were registered — before this returns, or,
    /// when this is called from inside a wait callback, once that callback has returned (queued
    /// behind the callbacks already queued on this thread; see the crate's guarantees). Only
    /// while the client's sequence is processing; a count not above the released one is ignored
    /// and reported.
    pub fn release(&self, count: u64) -> Result<ReleaseOutcome, ReleaseError> {
        let ready = {
            let mut inner = lock(&self.inner);
            if inner.destroyed {
                return Err(ReleaseError::Destroyed);
            }
            // Lock order: client, then order data.
            if !lock(&self.order_data.state).is_processing() {
                return Err(ReleaseError::NotProcessing);
            }
            if count <= inner.released {
                return Ok(ReleaseOutcome::Ignored {
                    released: inner.released,
                });
            }
            inner.released = count;
            let (ready, keep): (Vec<Waiter>, Vec<Waiter>) = std::mem::take(&mut inner.waiters)
                .into_iter()
                .partition(|w| w.release <= count);
            inner.waiters = keep;
            ready
        };
        Ok(ReleaseOutcome::Released {
            callbacks: run(ready),
        })
    }

    /// Takes one waiter's callback to run it without releasing (its fence was passed); `None`
    /// if it already ran. The others keep their registration order.
    pub(crate) fn take_waiter(&self, id: u64) -> Option<WaitCallback> {
        let mut inner = lock(&self.inner);
        let at = inner.waiters.iter().position(|w| w.id == id)?;
        Some(inner.waiters.remove(at).callback)
    }

    /// Removes a waiter without running it (a timed-out blocking wait). The others keep their
    /// registration order.
    pub(crate) fn cancel_waiter(&self, id: u64) -> bool {
        let mut inner = lock(&self.inner);
        let at = inner.waiters.iter().position(|w| w.id == id);
        at.map(|i| inner.waiters.remove(i)).is_some()
    }

    /// Marks it destroyed, drops its fences from its sequence and runs every pending waiter.
    ///
    /// The fences must go: each holds an `Arc` of this client, which holds its sequence's order
    /// data, which holds the fences — a cycle that otherwise outlives the client and, if the
    /// sequence is dropped without finishing or destroying, is never freed.
    pub(crate) fn destroy(&self) -> usize {
        let waiters = {
            let mut inner = lock(&self.inner);
            inner.destroyed = true;
            // Lock order: client, then order data. No fence is dropped to its last reference
            // here: the caller holds this client.
            lock(&self.order_data.state)
                .fences
                .retain(|f| !std::ptr::eq(Arc::as_ptr(&f.client), self));
            std::mem::take(&mut inner.waiters)
        };
        run(waiters)
    }
}
