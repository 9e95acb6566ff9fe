//! loom models of the races between releases, waits, fence retirement and destruction.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p
//! gpusvc-sync-points --test loom` (own target dir: `CARGO_TARGET_DIR=target/loom`). Every model
//! is two threads over a manager with one releasing sequence, one client and one waiting
//! sequence, so each explores its interleavings in well under a second.
#![cfg(loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use sync_points::{ClientId, OrderData, ReleaseError, ReleaseOutcome, SyncPointManager, SyncToken};

const CLIENT: ClientId = ClientId {
    namespace: 0,
    command_buffer_id: 7,
};

fn token(count: u64) -> SyncToken {
    SyncToken::new(CLIENT.namespace, CLIENT.command_buffer_id, count)
}

/// A manager with a releasing sequence processing its first number `n1` (the client releases
/// on it) and a waiting sequence holding a later number `n2`: a wait at `n2` is fenced at `n1`.
struct Setup {
    m: Arc<SyncPointManager>,
    releaser: Arc<OrderData>,
    waiter: Arc<OrderData>,
    n1: u64,
    n2: u64,
}

fn setup() -> Setup {
    let m = Arc::new(SyncPointManager::new());
    let releaser = m.create_sequence();
    let waiter = m.create_sequence();
    let n1 = releaser.generate().unwrap();
    let n2 = waiter.generate().unwrap();
    assert!(n2 > n1);
    releaser.begin_processing(n1).unwrap();
    m.create_client(CLIENT, releaser.id()).unwrap();
    Setup {
        m,
        releaser,
        waiter,
        n1,
        n2,
    }
}

/// A run counter and a callback that bumps it. The callback also calls back into the manager:
/// if any lock of the crate were held while it runs, loom would report the self-deadlock.
fn counting_callback(
    m: &Arc<SyncPointManager>,
) -> (Arc<AtomicUsize>, impl FnOnce() + Send + 'static) {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let m = m.clone();
    (runs, move || {
        let _ = m.is_released(&token(1));
        r.fetch_add(1, Ordering::SeqCst);
    })
}

fn callbacks(outcome: Result<ReleaseOutcome, ReleaseError>) -> usize {
    match outcome {
        Ok(ReleaseOutcome::Released { callbacks }) => callbacks,
        _ => 0,
    }
}

/// Release vs wait: whichever wins, a wait that returned true runs its callback exactly once
/// (on the release), and one that returned false (already released) never does.
#[test]
fn release_vs_wait() {
    loom::model(|| {
        let s = setup();
        let (runs, cb) = counting_callback(&s.m);
        let waiting = s.waiter.id();
        let (m, n2) = (s.m.clone(), s.n2);
        let waiter = thread::spawn(move || m.wait(&token(1), waiting, n2, cb));
        let client = s.m.client(CLIENT).unwrap();
        let releaser = thread::spawn(move || client.release(1));
        let registered = waiter.join().unwrap();
        let outcome = releaser.join().unwrap();
        assert_eq!(
            outcome,
            Ok(ReleaseOutcome::Released {
                callbacks: usize::from(registered)
            })
        );
        assert_eq!(runs.load(Ordering::SeqCst), usize::from(registered));
        // Passing the fence afterwards does not run it a second time.
        s.releaser.finish_processing(s.n1).unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), usize::from(registered));
        assert_eq!(s.releaser.pending_fences(), 0);
    });
}

/// Release vs destroying the releasing client: the pending wait runs exactly once, by
/// whichever of the two takes it.
#[test]
fn release_vs_destroy_client() {
    loom::model(|| {
        let s = setup();
        let (runs, cb) = counting_callback(&s.m);
        assert!(s.m.wait(&token(1), s.waiter.id(), s.n2, cb));
        let client = s.m.client(CLIENT).unwrap();
        let releaser = thread::spawn(move || client.release(1));
        let m = s.m.clone();
        let destroyer = thread::spawn(move || m.destroy_client(CLIENT));
        let outcome = releaser.join().unwrap();
        assert!(destroyer.join().unwrap());
        assert!(
            matches!(
                outcome,
                Ok(ReleaseOutcome::Released { .. }) | Err(ReleaseError::Destroyed)
            ),
            "{outcome:?}"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(s.m.is_released(&token(1)));
        // The destroyed client's fence is gone from its sequence (it held the client, which
        // holds the sequence: loom reports the leaked cycle otherwise).
        assert_eq!(s.releaser.pending_fences(), 0);
    });
}

/// Fence retirement (finish_processing) vs release: the wait runs exactly once, released or
/// retired; a release after the finish is refused (the sequence is no longer processing).
#[test]
fn finish_processing_vs_release() {
    loom::model(|| {
        let s = setup();
        let (runs, cb) = counting_callback(&s.m);
        assert!(s.m.wait(&token(1), s.waiter.id(), s.n2, cb));
        let client = s.m.client(CLIENT).unwrap();
        let releaser = thread::spawn(move || client.release(1));
        let (seq, n1) = (s.releaser.clone(), s.n1);
        let finisher = thread::spawn(move || seq.finish_processing(n1));
        let outcome = releaser.join().unwrap();
        finisher.join().unwrap().unwrap();
        match outcome {
            Ok(ReleaseOutcome::Released { callbacks }) => {
                assert_eq!(callbacks, 1);
                assert!(s.m.is_released(&token(1)));
            }
            Err(ReleaseError::NotProcessing) => assert!(!s.m.is_released(&token(1))),
            other => panic!("unexpected release outcome {other:?}"),
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(s.releaser.pending_fences(), 0);
    });
}

/// A wait vs destroying the releasing sequence: a wait that registered first is retired exactly
/// once by the destroy; one that comes after sees the sequence destroyed, returns false and never
/// runs.
#[test]
fn wait_vs_destroy_sequence() {
    loom::model(|| {
        let s = setup();
        let (runs, cb) = counting_callback(&s.m);
        let (m, waiting, n2) = (s.m.clone(), s.waiter.id(), s.n2);
        let waiter = thread::spawn(move || m.wait(&token(1), waiting, n2, cb));
        let (m, releasing) = (s.m.clone(), s.releaser.id());
        let destroyer = thread::spawn(move || m.destroy_sequence(releasing));
        let registered = waiter.join().unwrap();
        assert!(destroyer.join().unwrap());
        assert_eq!(runs.load(Ordering::SeqCst), usize::from(registered));
        assert_eq!(s.releaser.pending_fences(), 0);
        // Nothing left to run it later: destroying the client finds no waiter either.
        assert!(s.m.destroy_client(CLIENT));
        assert_eq!(runs.load(Ordering::SeqCst), usize::from(registered));
    });
}

/// Two releases racing (1 and 2) with a waiter on each count: each waiter runs exactly once,
/// the released count ends at 2, and the callbacks reported add up to the two waiters.
#[test]
fn two_releases_racing() {
    loom::model(|| {
        let s = setup();
        let (runs1, cb1) = counting_callback(&s.m);
        let (runs2, cb2) = counting_callback(&s.m);
        assert!(s.m.on_release(&token(1), cb1));
        assert!(s.m.on_release(&token(2), cb2));
        let c = s.m.client(CLIENT).unwrap();
        let a = {
            let c = c.clone();
            thread::spawn(move || c.release(1))
        };
        let b = {
            let c = c.clone();
            thread::spawn(move || c.release(2))
        };
        let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
        assert_eq!(runs1.load(Ordering::SeqCst), 1);
        assert_eq!(runs2.load(Ordering::SeqCst), 1);
        assert_eq!(c.released(), 2);
        let ignored = matches!(ra, Ok(ReleaseOutcome::Ignored { released: 2 }));
        assert!(
            ignored || matches!(ra, Ok(ReleaseOutcome::Released { .. })),
            "{ra:?}"
        );
        assert!(matches!(rb, Ok(ReleaseOutcome::Released { .. })), "{rb:?}");
        assert_eq!(callbacks(ra) + callbacks(rb), 2);
    });
}

/// A host thread blocked in `wait_blocking` vs the release: it always wakes and reports
/// released (loom's condvar never times out, so a lost wake-up would be a reported deadlock).
#[test]
fn release_vs_wait_blocking() {
    loom::model(|| {
        let s = setup();
        let m = s.m.clone();
        let waiter = thread::spawn(move || m.wait_blocking(&token(1), Duration::from_secs(60)));
        let client = s.m.client(CLIENT).unwrap();
        let releaser = thread::spawn(move || client.release(1));
        let outcome = releaser.join().unwrap();
        assert!(waiter.join().unwrap());
        assert!(
            matches!(outcome, Ok(ReleaseOutcome::Released { .. })),
            "{outcome:?}"
        );
    });
}
