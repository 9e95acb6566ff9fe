//! The release chain of issue 11, item 4, shared by the callback-queue tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sync_points::{ClientId, ReleaseOutcome, SyncPointManager, SyncToken};

/// The chain length the tests ask for.
pub(crate) const CHAIN: u64 = 1_000_000;

pub(crate) fn id(n: u64) -> ClientId {
    ClientId {
        namespace: 0,
        command_buffer_id: n,
    }
}

pub(crate) fn token(n: u64, count: u64) -> SyncToken {
    SyncToken::new(0, n, count)
}

/// Step `k` of the chain: registers the wait for count `k + 1` (whose callback is step `k + 1`)
/// and releases it from inside this callback.
fn step(m: Arc<SyncPointManager>, k: u64, last: u64, steps: Arc<AtomicUsize>) {
    steps.fetch_add(1, Ordering::Relaxed);
    if k == last {
        return;
    }
    let (m2, s2) = (m.clone(), steps.clone());
    assert!(m.on_release(&token(1, k + 1), move || step(m2, k + 1, last, s2)));
    assert_eq!(
        m.release(id(1), k + 1).unwrap(),
        ReleaseOutcome::Released { callbacks: 1 }
    );
}

/// A chain of `len` releases, each made by the callback of the one before; returns the steps run
/// and the time taken.
pub(crate) fn chain(len: u64) -> (usize, Duration) {
    let m = Arc::new(SyncPointManager::new());
    let s = m.create_sequence();
    m.create_client(id(1), s.id()).unwrap();
    s.begin_processing(s.generate().unwrap()).unwrap();
    let steps = Arc::new(AtomicUsize::new(0));
    let (m2, s2) = (m.clone(), steps.clone());
    assert!(m.on_release(&token(1, 1), move || step(m2, 1, len, s2)));
    let t = Instant::now();
    assert_eq!(
        m.release(id(1), 1).unwrap(),
        ReleaseOutcome::Released { callbacks: 1 }
    );
    let took = t.elapsed();
    assert_eq!(m.client(id(1)).unwrap().released(), len);
    (steps.load(Ordering::Relaxed), took)
}
