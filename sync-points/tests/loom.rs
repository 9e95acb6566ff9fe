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

/// [`setup`] with a counting wait on token 1 registered from the waiting sequence at `n2`
/// (fenced at `n1`); returns its run counter.
fn setup_waiting() -> (Setup, Arc<AtomicUsize>) {
    let s = setup();
    let (runs, cb) = counting_callback(&s.m);
    assert!(s.m.wait(&token(1), s.waiter.id(), s.n2, cb));
    (s, runs)
}

/// The client releasing `count`, on a thread of its own.
fn spawn_release(
    s: &Setup,
    count: u64,
) -> thread::JoinHandle<Result<ReleaseOutcome, ReleaseError>> {
    let client = s.m.client(CLIENT).unwrap();
    thread::spawn(move || client.release(count))
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
        let releaser = spawn_release(&s, 1);
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
        let (s, runs) = setup_waiting();
        let releaser = spawn_release(&s, 1);
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
        let (s, runs) = setup_waiting();
        let releaser = spawn_release(&s, 1);
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
        let releaser = spawn_release(&s, 1);
        let outcome = releaser.join().unwrap();
        assert!(waiter.join().unwrap());
        assert!(
            matches!(outcome, Ok(ReleaseOutcome::Released { .. })),
            "{outcome:?}"
        );
    });
}

/// Issue 11, item 1: finishing a number vs a wait fenced between the releaser's numbers. The
/// releaser has 1 (being processed) and 4; the waiter waits at 3. If the wait comes first it is
/// fenced at `min(4, 3) = 3`, and finishing 1 must retire it at once: the releaser's next number,
/// 4, is past the fence (Chromium's rule). If the finish comes first, 3 is not after the
/// releaser's front (4) any more: the wait is refused and never runs. Either way the callback
/// runs exactly as often as the wait registered, no fence is left, and the token stays
/// unreleased.
#[test]
fn finish_vs_wait_between_the_releasers_numbers() {
    loom::model(|| {
        let m = Arc::new(SyncPointManager::new());
        let releaser = m.create_sequence();
        let waiter = m.create_sequence();
        let numbers = [&releaser, &waiter, &waiter, &releaser].map(|s| s.generate().unwrap());
        assert_eq!(numbers, [1, 2, 3, 4]);
        m.create_client(CLIENT, releaser.id()).unwrap();
        releaser.begin_processing(1).unwrap();
        let (runs, cb) = counting_callback(&m);
        let (m2, waiting) = (m.clone(), waiter.id());
        let waits = thread::spawn(move || m2.wait(&token(1), waiting, 3, cb));
        let seq = releaser.clone();
        let finisher = thread::spawn(move || seq.finish_processing(1));
        let registered = waits.join().unwrap();
        finisher.join().unwrap().unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), usize::from(registered));
        assert_eq!(releaser.pending_fences(), 0);
        assert!(!m.is_released(&token(1)));
        assert_eq!(releaser.unprocessed(), [4]);
    });
}

/// Issue 11, item 4: the callback queue is per thread. Thread 1's release runs callback A, which
/// releases a second client whose waiter is B; thread 2 releases that second client at the same
/// time. B runs exactly once: on thread 2, or queued on thread 1 behind A — never before A's
/// release has returned, and never on a thread whose release did not take it.
#[test]
fn a_release_from_a_callback_vs_a_release_on_another_thread() {
    const OTHER: ClientId = ClientId {
        namespace: 0,
        command_buffer_id: 8,
    };
    loom::model(|| {
        let s = setup();
        s.m.create_client(OTHER, s.releaser.id()).unwrap();
        let other = SyncToken::new(OTHER.namespace, OTHER.command_buffer_id, 1);
        // B records the thread it ran on.
        let b_runs = Arc::new(AtomicUsize::new(0));
        let b_thread = Arc::new(loom::sync::Mutex::new(None));
        let (runs, on) = (b_runs.clone(), b_thread.clone());
        assert!(s.m.on_release(&other, move || {
            runs.fetch_add(1, Ordering::SeqCst);
            *on.lock().unwrap() = Some(thread::current().id());
        }));
        // A releases OTHER from inside its callback.
        let taken_by_a = Arc::new(AtomicUsize::new(0));
        let (m, runs, taken) = (s.m.clone(), b_runs.clone(), taken_by_a.clone());
        assert!(s.m.on_release(&token(1), move || {
            if let Ok(ReleaseOutcome::Released { callbacks }) = m.release(OTHER, 1) {
                assert_eq!(callbacks, 1);
                assert_eq!(runs.load(Ordering::SeqCst), 0, "B is queued, not run, here");
                taken.store(1, Ordering::SeqCst);
            }
        }));
        let m = s.m.clone();
        let first = thread::spawn(move || {
            let outcome = m.release(CLIENT, 1);
            (thread::current().id(), outcome)
        });
        let m = s.m.clone();
        let second = thread::spawn(move || {
            let outcome = m.release(OTHER, 1);
            (thread::current().id(), outcome)
        });
        let (first_id, first_outcome) = first.join().unwrap();
        let (second_id, second_outcome) = second.join().unwrap();
        assert_eq!(first_outcome, Ok(ReleaseOutcome::Released { callbacks: 1 }));
        assert_eq!(b_runs.load(Ordering::SeqCst), 1);
        let ran_on = b_thread.lock().unwrap().expect("B ran");
        if taken_by_a.load(Ordering::SeqCst) == 1 {
            assert_eq!(ran_on, first_id);
            assert_eq!(second_outcome, Ok(ReleaseOutcome::Ignored { released: 1 }));
        } else {
            assert_eq!(ran_on, second_id);
            assert_eq!(
                second_outcome,
                Ok(ReleaseOutcome::Released { callbacks: 1 })
            );
        }
    });
}
