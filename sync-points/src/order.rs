//! Order numbers and per-sequence order data.

use std::collections::{BinaryHeap, VecDeque};

use crate::client::ClientState;
use crate::sync::{Arc, AtomicU64, Mutex, Ordering, lock};

/// Identifies a sequence (an `OrderData`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SequenceId(pub u64);

/// An order-number transition that is not allowed. Nothing changed. Every variant names the
/// sequence it happened on ([`OrderError::sequence`]), and so does its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    /// 0 is not an order number.
    #[error("sequence {}: order number 0 is invalid", .sequence.0)]
    Zero {
        /// The sequence.
        sequence: SequenceId,
    },
    /// `begin_processing(n)` needs `processed < n <= last unprocessed` and `n` pending here.
    #[error(
        "sequence {}: cannot begin order number {n}: processed {processed}, pending {pending:?}{}",
        .sequence.0,
        if *.busy { ", another number is being processed" } else { "" }
    )]
    Begin {
        /// The sequence.
        sequence: SequenceId,
        /// The number asked for.
        n: u64,
        /// Last processed.
        processed: u64,
        /// Unprocessed numbers.
        pending: Vec<u64>,
        /// Another number is being processed (not paused).
        busy: bool,
    },
    /// `pause_processing` with nothing being processed.
    #[error("sequence {}: nothing is being processed", .sequence.0)]
    NotProcessing {
        /// The sequence.
        sequence: SequenceId,
    },
    /// `finish_processing(n)` needs `n` to be the front of the queue and being processed.
    #[error(
        "sequence {}: cannot finish order number {n}: front {front:?}, current {current}",
        .sequence.0
    )]
    Finish {
        /// The sequence.
        sequence: SequenceId,
        /// The number asked for.
        n: u64,
        /// Front of the unprocessed queue.
        front: Option<u64>,
        /// Current number.
        current: u64,
    },
    /// The order data was destroyed.
    #[error("sequence {} was destroyed", .sequence.0)]
    Destroyed {
        /// The sequence.
        sequence: SequenceId,
    },
}

impl OrderError {
    /// The sequence the transition was refused on.
    pub fn sequence(&self) -> SequenceId {
        match self {
            OrderError::Zero { sequence }
            | OrderError::Begin { sequence, .. }
            | OrderError::NotProcessing { sequence }
            | OrderError::Finish { sequence, .. }
            | OrderError::Destroyed { sequence } => *sequence,
        }
    }
}

/// A wait that must be retired if the releasing sequence passes `order_num` without releasing.
#[derive(Debug)]
pub(crate) struct Fence {
    pub(crate) order_num: u64,
    pub(crate) waiter: u64,
    pub(crate) client: Arc<ClientState>,
}

impl PartialEq for Fence {
    fn eq(&self, other: &Self) -> bool {
        (self.order_num, self.waiter) == (other.order_num, other.waiter)
    }
}
impl Eq for Fence {}
impl PartialOrd for Fence {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Fence {
    /// Reversed: `BinaryHeap` pops the lowest order number first.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.order_num, other.waiter).cmp(&(self.order_num, self.waiter))
    }
}

#[derive(Debug, Default)]
pub(crate) struct OrderState {
    pub(crate) unprocessed: VecDeque<u64>,
    pub(crate) processed: u64,
    pub(crate) current: u64,
    pub(crate) paused: bool,
    pub(crate) destroyed: bool,
    pub(crate) fences: BinaryHeap<Fence>,
}

impl OrderState {
    pub(crate) fn is_processing(&self) -> bool {
        !self.destroyed && self.current > self.processed && !self.paused
    }

    /// Takes the fences whose order number is `<= limit`.
    #[inline]
    fn take_fences_through(&mut self, limit: u64) -> Vec<Fence> {
        let mut out = Vec::new();
        while self.fences.peek().is_some_and(|f| f.order_num <= limit) {
            out.extend(self.fences.pop());
        }
        out
    }

    /// The fences that can no longer be released in order, once a number was finished: every
    /// fence before the next unprocessed number, or all of them when none is left (Chromium's
    /// `SyncPointOrderData::FinishProcessingOrderNumber`).
    #[inline]
    fn take_fences_before_next(&mut self) -> Vec<Fence> {
        match self.unprocessed.front() {
            Some(&next) => self.take_fences_through(next - 1),
            None => self.take_fences_through(u64::MAX),
        }
    }
}

/// The order numbers of one sequence (a stream of command buffers run in order). Thread-safe.
#[derive(Debug)]
pub struct OrderData {
    id: SequenceId,
    counter: Arc<AtomicU64>,
    pub(crate) state: Mutex<OrderState>,
}

/// Retires fences: runs the one waiter each fence names, unless a release already ran it, in
/// fence order, through the thread's callback queue.
#[inline]
pub(crate) fn retire(fences: Vec<Fence>) {
    if fences.is_empty() {
        // The common case (no waits on this sequence): not even an iterator to drop.
        return;
    }
    // Waiters a release did not run already: these waits end without their release.
    let retired = std::cell::Cell::new(0usize);
    crate::callbacks::run(
        fences
            .into_iter()
            .filter_map(|fence| fence.client.take_waiter(fence.waiter))
            .inspect(|_| retired.set(retired.get() + 1)),
    );
    if retired.get() > 0 {
        tracing::debug!(
            target: "gpusvc::sync",
            waits = retired.get(),
            "waits retired without their release (the releaser passed the order number or was \
             destroyed)"
        );
    }
}

impl OrderData {
    pub(crate) fn new(id: SequenceId, counter: Arc<AtomicU64>) -> Self {
        OrderData {
            id,
            counter,
            state: Mutex::new(OrderState::default()),
        }
    }

    /// This sequence's id.
    pub fn id(&self) -> SequenceId {
        self.id
    }

    /// Takes the next number of the global counter and queues it as unprocessed here.
    pub fn generate(&self) -> Result<u64, OrderError> {
        let mut st = lock(&self.state);
        if st.destroyed {
            return Err(OrderError::Destroyed { sequence: self.id });
        }
        // Relaxed is enough: numbers only need to be unique and increasing, and every use of a
        // number is ordered by the state mutex it is pushed under.
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        st.unprocessed.push_back(n);
        Ok(n)
    }

    /// Starts (or resumes after a pause) processing `n`. Retires fences ordered before `n`:
    /// the sequence moved past them without releasing.
    pub fn begin_processing(&self, n: u64) -> Result<(), OrderError> {
        let fences = {
            let mut st = lock(&self.state);
            if st.destroyed {
                return Err(OrderError::Destroyed { sequence: self.id });
            }
            if n == 0 {
                return Err(OrderError::Zero { sequence: self.id });
            }
            let resume = st.paused && st.current == n;
            let busy = st.current > st.processed && !st.paused;
            // The front is the usual `n`; search the rest only when it is not.
            let pending = st.unprocessed.front() == Some(&n) || st.unprocessed.contains(&n);
            if !resume && (busy || n <= st.processed || !pending) {
                return Err(OrderError::Begin {
                    sequence: self.id,
                    n,
                    processed: st.processed,
                    pending: st.unprocessed.iter().copied().collect(),
                    busy,
                });
            }
            st.current = n;
            st.paused = false;
            st.take_fences_through(n - 1)
        };
        retire(fences);
        Ok(())
    }

    /// Pauses the number being processed (to continue it later with `begin_processing`).
    pub fn pause_processing(&self) -> Result<(), OrderError> {
        let mut st = lock(&self.state);
        if !st.is_processing() {
            return Err(OrderError::NotProcessing { sequence: self.id });
        }
        st.paused = true;
        Ok(())
    }

    /// Finishes `n`, which must be the front of the queue and being processed. Retires every
    /// fence before the next unprocessed number (every fence, when none is left): the numbers in
    /// between are not this sequence's, so a release it did not make by now cannot come before
    /// the wait. A fence *at* the next number stays (the release may come while processing it).
    ///
    /// This is Chromium's rule (`gpu::SyncPointOrderData::FinishProcessingOrderNumber`). A fence
    /// between two of the releaser's numbers (waiter at 3, releaser's 1 and 4) ends when 1 is
    /// finished, not when 4 begins, so two sequences each waiting there on the other do not stall
    /// (issue 11).
    pub fn finish_processing(&self, n: u64) -> Result<(), OrderError> {
        let fences = {
            let mut st = lock(&self.state);
            if st.destroyed {
                return Err(OrderError::Destroyed { sequence: self.id });
            }
            if st.unprocessed.front() != Some(&n) || st.current != n || n <= st.processed {
                return Err(OrderError::Finish {
                    sequence: self.id,
                    n,
                    front: st.unprocessed.front().copied(),
                    current: st.current,
                });
            }
            st.unprocessed.pop_front();
            st.processed = n;
            st.paused = false;
            st.take_fences_before_next()
        };
        retire(fences);
        Ok(())
    }

    /// Last processed number (0 before any).
    pub fn processed(&self) -> u64 {
        lock(&self.state).processed
    }

    /// The number being (or last) processed.
    pub fn current(&self) -> u64 {
        lock(&self.state).current
    }

    /// Unprocessed numbers, front first.
    pub fn unprocessed(&self) -> Vec<u64> {
        lock(&self.state).unprocessed.iter().copied().collect()
    }

    /// True while a number is being processed and not paused.
    pub fn is_processing(&self) -> bool {
        lock(&self.state).is_processing()
    }

    /// Fences waiting on this sequence.
    pub fn pending_fences(&self) -> usize {
        lock(&self.state).fences.len()
    }

    /// Marks it destroyed and retires every fence that refers to it.
    pub(crate) fn destroy(&self) {
        let fences = {
            let mut st = lock(&self.state);
            st.destroyed = true;
            st.unprocessed.clear();
            st.take_fences_through(u64::MAX)
        };
        retire(fences);
    }
}
