//! The registry of sequences and clients, and wait validation.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::client::{ClientState, ReleaseError, ReleaseOutcome, WaitCallback, Waiter};
use crate::order::{Fence, OrderData, SequenceId};
use crate::sync::{Arc, AtomicU64, Condvar, Mutex, Ordering, lock};
use crate::token::{ClientId, SyncToken};

/// Why a client could not be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// A client with this id exists.
    #[error("client {0:?} exists")]
    Exists(ClientId),
    /// No such sequence.
    #[error("sequence {0:?} does not exist")]
    UnknownSequence(SequenceId),
    /// No such client.
    #[error("client {0:?} does not exist")]
    UnknownClient(ClientId),
    /// The release was refused.
    #[error(transparent)]
    Release(#[from] ReleaseError),
}

#[derive(Default)]
struct Registry {
    sequences: HashMap<SequenceId, Arc<OrderData>>,
    clients: HashMap<ClientId, Arc<ClientState>>,
}

/// Sync points for one process: sequences with their order numbers, clients with their
/// releases, and waits between them. Thread-safe; share it in an `Arc`. Dropping it destroys
/// every client and sequence still registered: every pending wait ends (its callback runs once)
/// and nothing leaks, whoever still holds an `OrderData` or `ClientState`.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use sync_points::{ClientId, SyncPointManager, SyncToken};
///
/// let manager = SyncPointManager::new();
/// // A producer stream with a command buffer (client) that releases on it, and a consumer.
/// let producer = manager.create_sequence();
/// let consumer = manager.create_sequence();
/// let buffer = ClientId { namespace: 0, command_buffer_id: 1 };
/// manager.create_client(buffer, producer.id()).unwrap();
/// let produce = producer.generate().unwrap();
/// let consume = consumer.generate().unwrap();
///
/// // The consumer's number waits for release 1 of the buffer, and for release 2.
/// let ended = Arc::new(AtomicUsize::new(0));
/// for count in [1, 2] {
///     let e = ended.clone();
///     let token = SyncToken::new(0, 1, count);
///     let on_end = move || {
///         e.fetch_add(1, Ordering::SeqCst);
///     };
///     assert!(manager.wait(&token, consumer.id(), consume, on_end));
/// }
///
/// producer.begin_processing(produce).unwrap();
/// manager.release(buffer, 1).unwrap(); // ends the first wait
/// assert_eq!(ended.load(Ordering::SeqCst), 1);
/// // Release 2 can no longer come before the consumer's number: finishing retires that wait
/// // (its callback runs) instead of leaving the consumer blocked; the token stays unreleased.
/// producer.finish_processing(produce).unwrap();
/// assert_eq!(ended.load(Ordering::SeqCst), 2);
/// assert!(manager.is_released(&SyncToken::new(0, 1, 1)));
/// assert!(!manager.is_released(&SyncToken::new(0, 1, 2)));
/// ```
pub struct SyncPointManager {
    order_counter: Arc<AtomicU64>,
    next_sequence: AtomicU64,
    next_waiter: AtomicU64,
    registry: Mutex<Registry>,
}

impl std::fmt::Debug for SyncPointManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncPointManager").finish_non_exhaustive()
    }
}

impl Drop for SyncPointManager {
    /// Destroys every client and sequence: pending waiters run (every registered callback runs
    /// exactly once, even at shutdown) and the fence ↔ client ↔ order-data references are broken
    /// so nothing leaks.
    fn drop(&mut self) {
        let registry = std::mem::take(&mut *lock(&self.registry));
        for client in registry.clients.into_values() {
            client.destroy();
        }
        for sequence in registry.sequences.into_values() {
            sequence.destroy();
        }
    }
}

impl Default for SyncPointManager {
    fn default() -> Self {
        Self::new()
    }
}

impl SyncPointManager {
    /// An empty manager; order numbers start at 1.
    pub fn new() -> Self {
        SyncPointManager {
            order_counter: Arc::new(AtomicU64::new(1)),
            next_sequence: AtomicU64::new(1),
            next_waiter: AtomicU64::new(1),
            registry: Mutex::new(Registry::default()),
        }
    }

    /// A new sequence.
    pub fn create_sequence(&self) -> Arc<OrderData> {
        // Relaxed: ids only need to be unique.
        let id = SequenceId(self.next_sequence.fetch_add(1, Ordering::Relaxed));
        let data = Arc::new(OrderData::new(id, self.order_counter.clone()));
        lock(&self.registry).sequences.insert(id, data.clone());
        data
    }

    /// A sequence by id.
    pub fn sequence(&self, id: SequenceId) -> Option<Arc<OrderData>> {
        lock(&self.registry).sequences.get(&id).cloned()
    }

    /// Destroys a sequence: every fence on it is retired (its waiter runs). Returns whether it
    /// existed.
    pub fn destroy_sequence(&self, id: SequenceId) -> bool {
        let data = lock(&self.registry).sequences.remove(&id);
        match data {
            Some(d) => {
                d.destroy();
                true
            }
            None => false,
        }
    }

    /// A new client bound to `sequence`.
    pub fn create_client(
        &self,
        id: ClientId,
        sequence: SequenceId,
    ) -> Result<Arc<ClientState>, ClientError> {
        let mut reg = lock(&self.registry);
        if reg.clients.contains_key(&id) {
            return Err(ClientError::Exists(id));
        }
        let data = reg
            .sequences
            .get(&sequence)
            .cloned()
            .ok_or(ClientError::UnknownSequence(sequence))?;
        let client = Arc::new(ClientState::new(id, data));
        reg.clients.insert(id, client.clone());
        Ok(client)
    }

    /// A client by id.
    pub fn client(&self, id: ClientId) -> Option<Arc<ClientState>> {
        lock(&self.registry).clients.get(&id).cloned()
    }

    /// The sequence a live client releases on (`None`: no such client, or destroyed).
    pub fn client_sequence(&self, id: ClientId) -> Option<SequenceId> {
        lock(&self.registry).clients.get(&id).map(|c| c.sequence())
    }

    /// Destroys a client: its pending waiters run and its tokens read as released. Returns
    /// whether it existed.
    pub fn destroy_client(&self, id: ClientId) -> bool {
        let client = lock(&self.registry).clients.remove(&id);
        match client {
            Some(c) => {
                c.destroy();
                true
            }
            None => false,
        }
    }

    /// Destroys `client` if it is still the client registered under its id — not when it was
    /// destroyed already and another client was created with the same id since (that one is
    /// left alone). Returns whether it was destroyed here. For owners of the clients they
    /// create (the `gpu-scheduler` crate destroys a stream's clients with it).
    pub fn destroy_client_instance(&self, client: &Arc<ClientState>) -> bool {
        let removed = {
            let mut reg = lock(&self.registry);
            let id = client.id();
            match reg.clients.get(&id) {
                Some(c) if Arc::ptr_eq(c, client) => reg.clients.remove(&id),
                _ => None,
            }
        };
        match removed {
            Some(c) => {
                c.destroy();
                true
            }
            None => false,
        }
    }

    /// Releases `count` on client `id` (see [`ClientState::release`]).
    pub fn release(&self, id: ClientId, count: u64) -> Result<ReleaseOutcome, ClientError> {
        let client = self.client(id).ok_or(ClientError::UnknownClient(id))?;
        Ok(client.release(count)?)
    }

    /// True when the token's client is unknown (destroyed or never existed) or has released
    /// at least the token's count.
    pub fn is_released(&self, token: &SyncToken) -> bool {
        match self.client(token.client()) {
            None => true,
            Some(c) => {
                let inner = lock(&c.inner);
                inner.destroyed || token.release_count <= inner.released
            }
        }
    }

    fn waiter_id(&self) -> u64 {
        // Relaxed: ids only need to be unique.
        self.next_waiter.fetch_add(1, Ordering::Relaxed)
    }

    /// Makes `callback` run when `token` is released — or when the wait is retired because it
    /// could never be satisfied in order. Returns `false` (and never runs the callback) when the
    /// token is already released, its client is unknown, `waiting_sequence` is the releaser's own,
    /// `wait_order_num` is 0, or the releaser has nothing unprocessed before `wait_order_num`.
    ///
    /// Otherwise an order fence is placed at `min(releaser's last unprocessed, wait_order_num)`:
    /// when the releaser finishes a number and its next unprocessed number is past the fence (or
    /// it has none left) without having released, only this callback runs (the token stays
    /// unreleased). Waits that would deadlock, cycles included, end so.
    pub fn wait(
        &self,
        token: &SyncToken,
        waiting_sequence: SequenceId,
        wait_order_num: u64,
        callback: impl FnOnce() + Send + 'static,
    ) -> bool {
        if wait_order_num == 0 {
            return false;
        }
        let Some(client) = self.client(token.client()) else {
            return false;
        };
        if client.order_data.id() == waiting_sequence {
            return false;
        }
        // Lock order: client, then the releaser's order data (as in `release`).
        let mut inner = lock(&client.inner);
        if inner.destroyed || token.release_count <= inner.released {
            return false;
        }
        let mut order = lock(&client.order_data.state);
        let (Some(&first), Some(&last)) = (order.unprocessed.front(), order.unprocessed.back())
        else {
            return false;
        };
        if order.destroyed || wait_order_num <= first {
            return false;
        }
        let id = self.waiter_id();
        order.fences.push(Fence {
            order_num: last.min(wait_order_num),
            waiter: id,
            client: client.clone(),
        });
        inner.waiters.push(Waiter {
            release: token.release_count,
            id,
            callback: Box::new(callback),
        });
        true
    }

    /// Registers `callback` for a thread that is not a scheduled sequence (no order fence): it
    /// runs when the token is released or its client destroyed. Returns `false` (callback not
    /// run) when the token already reads as released. Returns the waiter id on success.
    fn wait_unordered(
        &self,
        token: &SyncToken,
        callback: WaitCallback,
    ) -> Option<(Arc<ClientState>, u64)> {
        let client = self.client(token.client())?;
        let mut inner = lock(&client.inner);
        if inner.destroyed || token.release_count <= inner.released {
            return None;
        }
        let id = self.waiter_id();
        inner.waiters.push(Waiter {
            release: token.release_count,
            id,
            callback,
        });
        drop(inner);
        Some((client, id))
    }

    /// The callback form for host threads and async code: `callback` runs (on the releasing
    /// thread) once the token reads as released. Returns `false` — callback not run — when it
    /// already does.
    pub fn on_release(&self, token: &SyncToken, callback: impl FnOnce() + Send + 'static) -> bool {
        self.wait_unordered(token, Box::new(callback)).is_some()
    }

    /// Blocks the calling (host) thread until the token reads as released, parked on a condvar
    /// (no spinning), at most `timeout`. Returns whether it is released. Not from inside a
    /// callback of this crate when the release it waits for would come from a callback queued
    /// on the same thread: queued callbacks run only after the current one returns (see the
    /// crate docs), so such a wait lasts its whole timeout.
    pub fn wait_blocking(&self, token: &SyncToken, timeout: Duration) -> bool {
        let signal = Arc::new((Mutex::new(false), Condvar::new()));
        let s = signal.clone();
        let Some((client, id)) = self.wait_unordered(
            token,
            Box::new(move || {
                *lock(&s.0) = true;
                s.1.notify_all();
            }),
        ) else {
            return true;
        };
        let (flag, cv) = &*signal;
        let mut done = lock(flag);
        let deadline = std::time::Instant::now() + timeout;
        while !*done {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            done = cv
                .wait_timeout(done, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        if *done {
            return true;
        }
        drop(done);
        // Timed out: withdraw the waiter. If it is gone, it ran meanwhile: released after all.
        !client.cancel_waiter(id)
    }

    /// A future that resolves when the token reads as released.
    pub fn wait_async(&self, token: &SyncToken) -> ReleaseFuture {
        let shared = std::sync::Arc::new(std::sync::Mutex::new(FutureState::default()));
        let s = shared.clone();
        let pending = self.on_release(token, move || {
            let mut st = s.lock().unwrap_or_else(|e| e.into_inner());
            st.done = true;
            if let Some(w) = st.waker.take() {
                w.wake();
            }
        });
        if !pending {
            shared.lock().unwrap_or_else(|e| e.into_inner()).done = true;
        }
        ReleaseFuture { shared }
    }
}

#[derive(Default)]
struct FutureState {
    done: bool,
    waker: Option<Waker>,
}

/// Resolves when a sync token reads as released ([`SyncPointManager::wait_async`]).
pub struct ReleaseFuture {
    shared: std::sync::Arc<std::sync::Mutex<FutureState>>,
}

impl std::fmt::Debug for ReleaseFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseFuture").finish_non_exhaustive()
    }
}

impl Future for ReleaseFuture {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if st.done {
            Poll::Ready(())
        } else {
            st.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}
