//! One test per behaviour listed in the sync-points issue.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sync_points::{
    ClientId, OrderError, ReleaseError, ReleaseOutcome, SyncPointManager, SyncToken, reduce,
};

fn id(n: u64) -> ClientId {
    ClientId {
        namespace: 0,
        command_buffer_id: n,
    }
}

fn token(n: u64, count: u64) -> SyncToken {
    SyncToken::new(0, n, count)
}

/// A counter and a callback that bumps it.
fn counter() -> (Arc<AtomicUsize>, impl Fn() -> Box<dyn FnOnce() + Send>) {
    let c = Arc::new(AtomicUsize::new(0));
    let c2 = c.clone();
    (c, move || {
        let c = c2.clone();
        Box::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
    })
}

#[test]
fn order_data_transitions() {
    let m = SyncPointManager::new();
    let s = m.create_sequence();
    let a = s.generate().unwrap();
    let b = s.generate().unwrap();
    assert!(a >= 1 && b > a);
    assert_eq!(s.unprocessed(), [a, b]);
    assert!(matches!(
        s.begin_processing(b + 100),
        Err(OrderError::Begin { .. })
    ));
    assert_eq!(
        s.finish_processing(a),
        Err(OrderError::Finish {
            sequence: s.id(),
            n: a,
            front: Some(a),
            current: 0
        })
    );
    s.begin_processing(a).unwrap();
    assert!(s.is_processing());
    s.pause_processing().unwrap();
    assert!(!s.is_processing());
    assert_eq!(
        s.pause_processing(),
        Err(OrderError::NotProcessing { sequence: s.id() })
    );
    s.begin_processing(a).unwrap(); // resume
    assert!(s.is_processing());
    assert!(matches!(
        s.finish_processing(b),
        Err(OrderError::Finish { .. })
    ));
    s.finish_processing(a).unwrap();
    assert_eq!((s.processed(), s.unprocessed()), (a, vec![b]));
    assert!(matches!(
        s.begin_processing(a),
        Err(OrderError::Begin { .. })
    ));
    assert_eq!(
        s.begin_processing(0),
        Err(OrderError::Zero { sequence: s.id() })
    );
    s.begin_processing(b).unwrap();
    s.finish_processing(b).unwrap();
    assert!(s.unprocessed().is_empty());
    // Numbers come from one global counter across sequences.
    let t = m.create_sequence();
    assert!(t.generate().unwrap() > b);
}

/// Issue 12: an order error names its sequence (the C ABI's messages said "sequence 0" for a
/// scheduler stream's sequence, which it could not know).
#[test]
fn order_errors_name_their_sequence() {
    let m = SyncPointManager::new();
    let _other = m.create_sequence();
    let s = m.create_sequence();
    let id = s.id();
    assert_ne!(id.0, 0);
    let n = s.generate().unwrap();
    let errors = [
        s.begin_processing(0).unwrap_err(),
        s.begin_processing(n + 1).unwrap_err(),
        s.pause_processing().unwrap_err(),
        s.finish_processing(n).unwrap_err(),
    ];
    for e in &errors {
        assert_eq!(e.sequence(), id, "{e:?}");
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("sequence {}: ", id.0)),
            "{text:?} names the sequence"
        );
    }
    assert!(m.destroy_sequence(id));
    let e = s.generate().unwrap_err();
    assert_eq!(e, OrderError::Destroyed { sequence: id });
    assert_eq!(e.to_string(), format!("sequence {} was destroyed", id.0));
}

#[test]
fn unknown_client_reads_as_released() {
    let m = SyncPointManager::new();
    assert!(m.is_released(&token(42, 7)));
}

#[test]
fn release_2_then_1_the_second_is_a_no_op() {
    let m = SyncPointManager::new();
    let s = m.create_sequence();
    let c = m.create_client(id(1), s.id()).unwrap();
    s.begin_processing(s.generate().unwrap()).unwrap();
    assert_eq!(c.release(2), Ok(ReleaseOutcome::Released { callbacks: 0 }));
    assert_eq!(c.release(1), Ok(ReleaseOutcome::Ignored { released: 2 }));
    assert_eq!(c.released(), 2);
}

#[test]
fn release_outside_processing_is_refused() {
    let m = SyncPointManager::new();
    let s = m.create_sequence();
    let c = m.create_client(id(1), s.id()).unwrap();
    assert_eq!(c.release(1), Err(ReleaseError::NotProcessing));
    let n = s.generate().unwrap();
    s.begin_processing(n).unwrap();
    s.pause_processing().unwrap();
    assert_eq!(c.release(1), Err(ReleaseError::NotProcessing));
    assert_eq!(c.released(), 0);
}

#[test]
fn two_clients_on_one_order_data_are_independent() {
    let m = SyncPointManager::new();
    let s = m.create_sequence();
    let a = m.create_client(id(1), s.id()).unwrap();
    let b = m.create_client(id(2), s.id()).unwrap();
    s.begin_processing(s.generate().unwrap()).unwrap();
    a.release(5).unwrap();
    assert!(m.is_released(&token(1, 5)));
    assert!(!m.is_released(&token(2, 1)));
    b.release(1).unwrap();
    assert_eq!((a.released(), b.released()), (5, 1));
}

/// Releaser sequence `r` with one pending order number, waiter sequence `w` with a later one.
fn setup() -> (
    SyncPointManager,
    Arc<sync_points::OrderData>,
    Arc<sync_points::OrderData>,
    u64,
    u64,
) {
    let m = SyncPointManager::new();
    let r = m.create_sequence();
    let w = m.create_sequence();
    m.create_client(id(1), r.id()).unwrap();
    let rn = r.generate().unwrap();
    let wn = w.generate().unwrap();
    (m, r, w, rn, wn)
}

#[test]
fn wait_then_release_runs_the_callback_exactly_once() {
    let (m, r, w, rn, wn) = setup();
    let (count, cb) = counter();
    assert!(m.wait(&token(1, 1), w.id(), wn, cb()));
    assert_eq!(count.load(Ordering::SeqCst), 0);
    r.begin_processing(rn).unwrap();
    assert_eq!(
        m.release(id(1), 1).unwrap(),
        ReleaseOutcome::Released { callbacks: 1 }
    );
    m.release(id(1), 2).unwrap();
    r.finish_processing(rn).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[test]
fn waits_on_2_1_and_3_release_2_runs_2_and_1_not_3() {
    let (m, r, w, rn, wn) = setup();
    let ran = Arc::new(std::sync::Mutex::new(Vec::new()));
    for k in [2u64, 1, 3] {
        let ran = ran.clone();
        assert!(m.wait(&token(1, k), w.id(), wn, move || {
            ran.lock().unwrap().push(k)
        }));
    }
    r.begin_processing(rn).unwrap();
    m.release(id(1), 2).unwrap();
    let mut got = ran.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, [1, 2]);
}

#[test]
fn wait_on_self_fails() {
    let (m, r, _w, _rn, _wn) = setup();
    let later = r.generate().unwrap();
    let (count, cb) = counter();
    assert!(!m.wait(&token(1, 1), r.id(), later, cb()));
    assert_eq!(count.load(Ordering::SeqCst), 0);
}

#[test]
fn a_wait_ordered_before_the_releasers_only_order_number_is_invalid() {
    let m = SyncPointManager::new();
    let r = m.create_sequence();
    let w = m.create_sequence();
    m.create_client(id(1), r.id()).unwrap();
    let wn = w.generate().unwrap();
    let _rn = r.generate().unwrap(); // after wn
    let (count, cb) = counter();
    assert!(!m.wait(&token(1, 1), w.id(), wn, cb()));
    assert_eq!(count.load(Ordering::SeqCst), 0);
}

#[test]
fn a_wait_on_an_already_released_token_returns_false_and_never_runs() {
    let (m, r, w, rn, wn) = setup();
    r.begin_processing(rn).unwrap();
    m.release(id(1), 3).unwrap();
    let (count, cb) = counter();
    assert!(!m.wait(&token(1, 2), w.id(), wn, cb()));
    r.finish_processing(rn).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 0);
}

#[test]
fn destroying_the_releaser_runs_its_waits_and_its_tokens_read_released() {
    let (m, _r, w, _rn, wn) = setup();
    let (count, cb) = counter();
    assert!(m.wait(&token(1, 5), w.id(), wn, cb()));
    assert!(!m.is_released(&token(1, 5)));
    let releaser = m.client(id(1)).unwrap();
    assert!(!releaser.is_destroyed());
    assert!(m.destroy_client(id(1)));
    assert!(releaser.is_destroyed());
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert!(m.is_released(&token(1, 5)));
    assert!(!m.destroy_client(id(1)));
}

#[test]
fn a_release_that_never_comes_is_retired_when_the_releaser_finishes_and_the_token_stays_unreleased()
{
    let (m, r, w, rn, wn) = setup();
    let (count, cb) = counter();
    assert!(m.wait(&token(1, 1), w.id(), wn, cb()));
    r.begin_processing(rn).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 0);
    r.finish_processing(rn).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert!(!m.is_released(&token(1, 1)));
}

#[test]
fn the_same_when_the_waiter_has_several_order_numbers_and_a_later_release_does_not_run_it_twice() {
    let (m, r, w, rn, wn) = setup();
    let wn2 = w.generate().unwrap();
    let rn2 = r.generate().unwrap();
    let (count, cb) = counter();
    // Fenced at min(releaser's last unprocessed = rn2, wn) = wn.
    assert!(m.wait(&token(1, 1), w.id(), wn, cb()));
    assert!(wn2 > wn);
    r.begin_processing(rn).unwrap();
    assert_eq!(
        count.load(Ordering::SeqCst),
        0,
        "not while rn is processing"
    );
    // Issue 11: this test used to expect the wait to last until the releaser *began* rn2. The
    // rule is now Chromium's: finishing rn retires every fence before the releaser's next
    // unprocessed number, rn2 — and the fence, wn, is before it: nothing the releaser still has
    // to process can release in time.
    r.finish_processing(rn).unwrap();
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "the fence (wn) is before the releaser's next number (rn2)"
    );
    r.begin_processing(rn2).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(
        m.release(id(1), 1).unwrap(),
        ReleaseOutcome::Released { callbacks: 0 }
    );
    r.finish_processing(rn2).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[test]
fn a_fence_at_an_order_number_the_releaser_never_had_retires_once_its_next_number_is_past_it() {
    let m = SyncPointManager::new();
    let r = m.create_sequence();
    let w = m.create_sequence();
    m.create_client(id(1), r.id()).unwrap();
    let r1 = r.generate().unwrap();
    let wn = w.generate().unwrap(); // between r1 and r2: never one of r's numbers
    let r2 = r.generate().unwrap();
    let (count, cb) = counter();
    assert!(m.wait(&token(1, 1), w.id(), wn, cb()));
    r.begin_processing(r1).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 0);
    // Issue 11: this test used to expect the fence to hold until r *began* r2. Under the rule
    // now in force (Chromium's), finishing r1 already retires it: r's next unprocessed number,
    // r2, is past the fence, so the releaser has no number left that comes before the wait.
    r.finish_processing(r1).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1, "retired when r1 finished");
    r.begin_processing(r2).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1, "and only once");
    assert!(!m.is_released(&token(1, 1)));
}

/// Issue 11, the boundary of the finish rule (Chromium's
/// `SyncPointOrderData::FinishProcessingOrderNumber`): when the releaser finishes `n`, every fence
/// before its *next unprocessed* number is retired; a fence *at* that number stays, because the
/// releaser may still release while processing it. Releaser numbers 1 and 4, waiters at 3 (fence
/// `min(4, 3) = 3`) and at 5 (fence `min(4, 5) = 4`).
#[test]
fn finishing_retires_the_fences_before_the_releasers_next_number_and_not_the_one_at_it() {
    let m = SyncPointManager::new();
    let r = m.create_sequence();
    let w = m.create_sequence();
    m.create_client(id(1), r.id()).unwrap();
    let numbers = [&r, &w, &w, &r, &w].map(|s| s.generate().unwrap());
    assert_eq!(numbers, [1, 2, 3, 4, 5]);
    let (at_3, cb3) = counter();
    let (at_5, cb5) = counter();
    assert!(m.wait(&token(1, 1), w.id(), 3, cb3()));
    assert!(m.wait(&token(1, 1), w.id(), 5, cb5()));
    assert_eq!(r.pending_fences(), 2);
    r.begin_processing(1).unwrap();
    r.finish_processing(1).unwrap();
    // The next unprocessed number is 4: the fence at 3 is before it, the one at 4 is not.
    assert_eq!(at_3.load(Ordering::SeqCst), 1, "fence 3 < next number 4");
    assert_eq!(at_5.load(Ordering::SeqCst), 0, "fence 4 is the next number");
    assert_eq!(r.pending_fences(), 1);
    assert!(!m.is_released(&token(1, 1)));
    // The releaser releases while processing 4: the wait fenced there ends released.
    r.begin_processing(4).unwrap();
    assert_eq!(
        m.release(id(1), 1).unwrap(),
        ReleaseOutcome::Released { callbacks: 1 }
    );
    r.finish_processing(4).unwrap();
    assert_eq!(
        (at_3.load(Ordering::SeqCst), at_5.load(Ordering::SeqCst)),
        (1, 1)
    );
    assert_eq!(r.pending_fences(), 0);
}

/// The same boundary when the releaser's later number did not exist yet when the wait was made
/// (releaser: 1, waiter: 2 and 3, wait at 3, then the releaser's 4): the fence is at the
/// releaser's last number then, 1, and finishing 1 retires it, 4 enqueued meanwhile or not.
#[test]
fn a_wait_made_before_the_releasers_next_number_exists_is_fenced_at_its_last_and_retired_there() {
    for enqueue_4_before_finishing in [false, true] {
        let m = SyncPointManager::new();
        let r = m.create_sequence();
        let w = m.create_sequence();
        m.create_client(id(1), r.id()).unwrap();
        assert_eq!([&r, &w, &w].map(|s| s.generate().unwrap()), [1, 2, 3]);
        let (count, cb) = counter();
        assert!(m.wait(&token(1, 1), w.id(), 3, cb()));
        if enqueue_4_before_finishing {
            assert_eq!(r.generate().unwrap(), 4);
        }
        r.begin_processing(1).unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 0);
        r.finish_processing(1).unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert_eq!(r.pending_fences(), 0);
    }
}

#[test]
fn a_wait_from_the_releasing_sequence_fails() {
    let m = SyncPointManager::new();
    let r = m.create_sequence();
    m.create_client(id(1), r.id()).unwrap();
    m.create_client(id(2), r.id()).unwrap();
    let n1 = r.generate().unwrap();
    let n2 = r.generate().unwrap();
    assert!(n2 > n1);
    // Client 2's sequence is the releaser's: waiting there would wait on itself.
    let (count, cb) = counter();
    assert!(!m.wait(&token(1, 1), r.id(), n2, cb()));
    assert_eq!(count.load(Ordering::SeqCst), 0);
}

#[test]
fn an_invalid_wait_order_number_is_rejected() {
    let (m, _r, w, _rn, _wn) = setup();
    let (count, cb) = counter();
    assert!(!m.wait(&token(1, 1), w.id(), 0, cb()));
    assert_eq!(count.load(Ordering::SeqCst), 0);
}

#[test]
fn a_fence_retires_only_once_the_releaser_passes_it_not_before() {
    let m = SyncPointManager::new();
    let r = m.create_sequence();
    let w = m.create_sequence();
    m.create_client(id(1), r.id()).unwrap();
    let r1 = r.generate().unwrap();
    let r2 = r.generate().unwrap();
    let wn = w.generate().unwrap(); // after r2: fence at r2
    let (count, cb) = counter();
    assert!(m.wait(&token(1, 1), w.id(), wn, cb()));
    r.begin_processing(r1).unwrap();
    r.finish_processing(r1).unwrap();
    r.begin_processing(r2).unwrap();
    r.pause_processing().unwrap();
    r.begin_processing(r2).unwrap();
    assert_eq!(
        count.load(Ordering::SeqCst),
        0,
        "not before the fence is passed"
    );
    r.finish_processing(r2).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[test]
fn cyclic_waits_between_two_sequences_are_both_retired() {
    let m = SyncPointManager::new();
    let a = m.create_sequence();
    let b = m.create_sequence();
    m.create_client(id(1), a.id()).unwrap();
    m.create_client(id(2), b.id()).unwrap();
    let a1 = a.generate().unwrap();
    let b1 = b.generate().unwrap();
    let a2 = a.generate().unwrap();
    let b2 = b.generate().unwrap();
    let (count, cb) = counter();
    // a (at a2) waits for b's release 1; b (at b2) waits for a's release 1: a cycle.
    assert!(m.wait(&token(2, 1), a.id(), a2, cb()));
    assert!(m.wait(&token(1, 1), b.id(), b2, cb()));
    for (s, n) in [(&a, a1), (&b, b1)] {
        s.begin_processing(n).unwrap();
        s.finish_processing(n).unwrap();
    }
    // Each releaser passed its fenced number (b's fence for a's wait is min(b2, a2) = a2 < b2,
    // a's fence for b's wait is min(a2, b2) = a2): beginning the next numbers retires both.
    a.begin_processing(a2).unwrap();
    b.begin_processing(b2).unwrap();
    a.finish_processing(a2).unwrap();
    b.finish_processing(b2).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert!(!m.is_released(&token(1, 1)) && !m.is_released(&token(2, 1)));
}

#[test]
fn destroying_an_order_data_retires_its_fences() {
    let (m, r, w, _rn, wn) = setup();
    let (count, cb) = counter();
    assert!(m.wait(&token(1, 1), w.id(), wn, cb()));
    assert!(m.destroy_sequence(r.id()));
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert!(!m.destroy_sequence(r.id()));
}

#[test]
fn reduce_keeps_the_highest_release_per_client() {
    let t = |ns: i8, id: u64, c: u64| SyncToken::new(ns, id, c);
    let mut verified = t(0, 1, 5);
    verified.verified = true;
    let out = reduce(&[
        t(0, 1, 3),
        t(0, 1, 5),
        t(1, 1, 2),
        verified,
        t(0, 2, 0),
        t(0, 2, 1),
    ]);
    assert_eq!(out, [verified, t(0, 2, 1), t(1, 1, 2)]);
}

#[test]
fn wait_blocking_wakes_on_release_and_times_out_otherwise() {
    let m = Arc::new(SyncPointManager::new());
    let r = m.create_sequence();
    m.create_client(id(1), r.id()).unwrap();
    let n = r.generate().unwrap();
    r.begin_processing(n).unwrap();
    assert!(!m.wait_blocking(&token(1, 1), Duration::from_millis(20)));
    let m2 = m.clone();
    let t = std::thread::spawn(move || m2.wait_blocking(&token(1, 1), Duration::from_secs(10)));
    std::thread::sleep(Duration::from_millis(20));
    m.release(id(1), 1).unwrap();
    assert!(t.join().unwrap());
    assert!(m.wait_blocking(&token(1, 1), Duration::ZERO));
    assert!(
        m.wait_blocking(&token(9, 1), Duration::ZERO),
        "unknown client reads released"
    );
}

#[test]
fn wait_async_resolves_on_release() {
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};
    struct Flag(AtomicUsize);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let m = SyncPointManager::new();
    let r = m.create_sequence();
    m.create_client(id(1), r.id()).unwrap();
    let n = r.generate().unwrap();
    r.begin_processing(n).unwrap();
    let flag = Arc::new(Flag(AtomicUsize::new(0)));
    let waker = Waker::from(flag.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = Box::pin(m.wait_async(&token(1, 1)));
    assert_eq!(fut.as_mut().poll(&mut cx), Poll::Pending);
    m.release(id(1), 1).unwrap();
    assert_eq!(flag.0.load(Ordering::SeqCst), 1);
    assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(()));
}

#[test]
fn dropping_the_manager_runs_pending_waits_and_frees_everything() {
    let (m, r, w, _rn, wn) = setup();
    let (count, cb) = counter();
    assert!(m.wait(&token(1, 1), w.id(), wn, cb()));
    let client = Arc::downgrade(&m.client(id(1)).unwrap());
    drop((r, w));
    drop(m);
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert!(client.upgrade().is_none(), "the client was freed");
}

/// Issue 12: what the C ABI's sync manager handle tracked ids for — destroying, when it is
/// freed, every client and then every sequence made through it — dropping the manager does on
/// its own: every pending wait (fenced, unordered, on a client or on a sequence the caller
/// still holds) ends exactly once, and every client and order data is freed, those destroyed
/// earlier included, even while the caller still holds handles to some of them.
#[test]
fn dropping_the_manager_ends_every_wait_and_frees_every_client_and_sequence() {
    let m = SyncPointManager::new();
    let releasers: Vec<_> = (0..3).map(|_| m.create_sequence()).collect();
    let waiter = m.create_sequence();
    for (i, r) in releasers.iter().enumerate() {
        m.create_client(id(i as u64 + 1), r.id()).unwrap();
        r.generate().unwrap();
    }
    // Two clients on one sequence, one destroyed before the drop.
    m.create_client(id(10), releasers[0].id()).unwrap();
    let wn = waiter.generate().unwrap();
    let (count, cb) = counter();
    let mut registered = 0;
    for i in 1..=3 {
        // A fenced wait (holds the client and the releaser's order data through each other) and
        // an unordered one per releaser.
        assert!(m.wait(&token(i, 1), waiter.id(), wn, cb()));
        assert!(m.on_release(&token(i, 2), cb()));
        registered += 2;
    }
    assert!(m.wait(&token(10, 1), waiter.id(), wn, cb()));
    registered += 1;
    assert!(m.destroy_client(id(10)), "destroyed before the drop");
    let after_destroy = count.load(Ordering::SeqCst);
    assert_eq!(after_destroy, 1, "destroying a client ends its waits");

    let clients: Vec<_> = (1..=3)
        .map(|i| Arc::downgrade(&m.client(id(i)).unwrap()))
        .collect();
    let sequences: Vec<_> = releasers
        .iter()
        .chain([&waiter])
        .map(Arc::downgrade)
        .collect();
    // The caller still holds one releaser's order data: its fences end all the same.
    let held = releasers[1].clone();
    drop(releasers);
    drop(waiter);
    drop(m);
    assert_eq!(
        count.load(Ordering::SeqCst),
        registered,
        "every wait ended once"
    );
    assert!(
        clients.iter().all(|c| c.upgrade().is_none()),
        "clients freed"
    );
    assert_eq!(held.pending_fences(), 0);
    assert!(held.generate().is_err(), "the held sequence was destroyed");
    drop(held);
    assert!(
        sequences.iter().all(|s| s.upgrade().is_none()),
        "order data freed"
    );
}
