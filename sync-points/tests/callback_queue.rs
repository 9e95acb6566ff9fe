//! Issue 11, item 4: callbacks that a callback triggers (a callback releases a token whose
//! waiter's callback releases another, ...) are queued on the thread and run by the outermost
//! call, one after another — not nested — in first-in, first-out order, with no lock held. A
//! chain of a million releases made from inside callbacks completes on a 2 MiB test thread and
//! on a small explicit stack; nested, it overflowed the stack at about 14k levels.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use common::{CHAIN, chain, id, token};
use sync_points::{ReleaseOutcome, SyncPointManager};

const WATCHDOG: Duration = Duration::from_secs(300);

/// Runs `f` on a new thread (`stack`: its size, `None`: the default) and fails the test instead
/// of hanging if it does not return within the watchdog's time (a lock held around a callback
/// would deadlock the re-entrant calls).
fn on_thread<T: Send + 'static>(stack: Option<usize>, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let mut b = std::thread::Builder::new();
    if let Some(size) = stack {
        b = b.stack_size(size);
    }
    let t = b
        .spawn(move || {
            let _ = tx.send(f());
        })
        .unwrap();
    match rx.recv_timeout(WATCHDOG) {
        Ok(v) => {
            t.join().unwrap();
            v
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            std::panic::resume_unwind(t.join().expect_err("the thread sent nothing"))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("deadlock: not done in {WATCHDOG:?}"),
    }
}

#[test]
fn a_million_releases_chained_through_callbacks_complete_on_a_test_thread() {
    // The test harness's thread: 2 MiB unless RUST_MIN_STACK says otherwise.
    let (steps, took) = chain(CHAIN);
    assert_eq!(steps as u64, CHAIN);
    eprintln!("{CHAIN} chained releases on the test thread: {took:?}");
}

#[test]
fn a_million_chained_releases_need_no_more_stack_than_one() {
    // 256 KiB: a nested chain would overflow after a few hundred levels.
    let (steps, took) = on_thread(Some(256 << 10), || chain(CHAIN));
    assert_eq!(steps as u64, CHAIN);
    eprintln!("{CHAIN} chained releases on a 256 KiB stack: {took:?}");
}

type Log = Arc<Mutex<Vec<&'static str>>>;

fn note(log: &Log, s: &'static str) {
    log.lock().unwrap().push(s);
}

/// Release 1 on client 1 has waiters a and b (registered in that order); a releases client 2
/// (waiters c, d), b releases client 3 (waiter e), c releases client 4 (waiter f). Callbacks run
/// first-in, first-out: a and b (the outer release's), then c and d (a's), e (b's), f (c's) —
/// breadth-first. Inside a, its release has queued c and d but not run them yet.
#[test]
fn callbacks_triggered_by_callbacks_run_in_fifo_order_after_the_current_one() {
    let m = Arc::new(SyncPointManager::new());
    let s = m.create_sequence();
    for c in 1..=4 {
        m.create_client(id(c), s.id()).unwrap();
    }
    s.begin_processing(s.generate().unwrap()).unwrap();
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let releasing = |name: &'static str, client: u64, expect: usize| {
        let (m, log) = (m.clone(), log.clone());
        move || {
            note(&log, name);
            let before = log.lock().unwrap().len();
            assert_eq!(
                m.release(id(client), 1).unwrap(),
                ReleaseOutcome::Released { callbacks: expect }
            );
            assert_eq!(
                log.lock().unwrap().len(),
                before,
                "{name}: the callbacks its release triggered wait until it returns"
            );
        }
    };
    let plain = |name: &'static str| {
        let log = log.clone();
        move || note(&log, name)
    };
    assert!(m.on_release(&token(1, 1), releasing("a", 2, 2)));
    assert!(m.on_release(&token(1, 1), releasing("b", 3, 1)));
    assert!(m.on_release(&token(2, 1), releasing("c", 4, 1)));
    assert!(m.on_release(&token(2, 1), plain("d")));
    assert!(m.on_release(&token(3, 1), plain("e")));
    assert!(m.on_release(&token(4, 1), plain("f")));
    assert_eq!(
        m.release(id(1), 1).unwrap(),
        ReleaseOutcome::Released { callbacks: 2 }
    );
    // The outermost release returns once everything it triggered has run.
    assert_eq!(*log.lock().unwrap(), ["a", "b", "c", "d", "e", "f"]);
}

/// A release runs its waiters in the order they were registered, also after a waiter was
/// retired from the middle of the list.
#[test]
fn a_release_runs_its_waiters_in_registration_order() {
    let m = Arc::new(SyncPointManager::new());
    let r = m.create_sequence();
    let w = m.create_sequence();
    m.create_client(id(1), r.id()).unwrap();
    // r: 1, w: 2. A wait at 2 is fenced at r's last number, 1, and retired when r finishes it.
    assert_eq!([&r, &w].map(|s| s.generate().unwrap()), [1, 2]);
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    for (i, name) in ["w0", "w1", "w2", "w3", "w4"].into_iter().enumerate() {
        let log = log.clone();
        let cb = move || note(&log, name);
        if i == 1 {
            assert!(m.wait(&token(1, 1), w.id(), 2, cb));
        } else {
            assert!(m.on_release(&token(1, 1), cb));
        }
    }
    let r3 = r.generate().unwrap();
    r.begin_processing(1).unwrap();
    r.finish_processing(1).unwrap();
    assert_eq!(*log.lock().unwrap(), ["w1"]);
    r.begin_processing(r3).unwrap();
    assert_eq!(
        m.release(id(1), 1).unwrap(),
        ReleaseOutcome::Released { callbacks: 4 }
    );
    assert_eq!(*log.lock().unwrap(), ["w1", "w0", "w2", "w3", "w4"]);
}

/// Queued callbacks run with no lock held and with the queue itself not borrowed: a callback run
/// from the queue calls back into the manager — creates and destroys clients and sequences,
/// waits, releases, finishes and begins order numbers, blocks on a released token — and every
/// callback that this triggers runs exactly once.
#[test]
fn queued_callbacks_may_call_back_into_the_manager() {
    let ran = on_thread(None, || {
        let m = Arc::new(SyncPointManager::new());
        let r = m.create_sequence();
        let w = m.create_sequence();
        m.create_client(id(1), r.id()).unwrap();
        m.create_client(id(2), r.id()).unwrap();
        m.create_client(id(3), w.id()).unwrap();
        let r1 = r.generate().unwrap();
        let wn = w.generate().unwrap();
        let r2 = r.generate().unwrap();
        r.begin_processing(r1).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let bump = |ran: &Arc<AtomicUsize>| {
            let ran = ran.clone();
            move || {
                ran.fetch_add(1, Ordering::SeqCst);
            }
        };
        // Second level: runs from the queue (its release was made inside the first callback).
        let second = {
            let (m, r, ran) = (m.clone(), r.clone(), ran.clone());
            move || {
                ran.fetch_add(1, Ordering::SeqCst);
                // A fenced wait (fenced at wn, before r's next number r2) retired by finishing
                // r1 from here, and an unordered one ended by destroying client 2.
                assert!(m.wait(&token(1, 9), w.id(), wn, bump(&ran)));
                assert!(m.on_release(&token(2, 1), bump(&ran)));
                m.release(id(1), 3).unwrap();
                r.finish_processing(r1).unwrap();
                assert!(m.destroy_client(id(2)));
                r.begin_processing(r2).unwrap();
                assert!(m.wait_blocking(&token(1, 3), Duration::ZERO));
                let t = m.create_sequence();
                m.create_client(id(4), t.id()).unwrap();
                assert!(m.destroy_client(id(4)));
                assert!(m.destroy_sequence(t.id()));
                assert!(m.is_released(&token(1, 3)));
            }
        };
        let first = {
            let (m, ran) = (m.clone(), ran.clone());
            move || {
                ran.fetch_add(1, Ordering::SeqCst);
                assert!(m.on_release(&token(1, 2), second));
                m.release(id(1), 2).unwrap();
            }
        };
        assert!(m.on_release(&token(1, 1), first));
        m.release(id(1), 1).unwrap();
        // first, second, the retired fenced wait and the destroyed client's waiter.
        ran.load(Ordering::SeqCst)
    });
    assert_eq!(ran, 4);
}

/// A callback that panics: the callbacks queued with or behind it still run, then the first
/// panic comes out of the outermost call; the thread's queue is left empty and usable.
#[test]
fn a_panicking_callback_lets_the_rest_of_the_queue_run_then_propagates() {
    let m = Arc::new(SyncPointManager::new());
    let s = m.create_sequence();
    for c in 1..=3 {
        m.create_client(id(c), s.id()).unwrap();
    }
    s.begin_processing(s.generate().unwrap()).unwrap();
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let (m2, l2) = (m.clone(), log.clone());
    assert!(m.on_release(&token(1, 1), move || {
        note(&l2, "a");
        m2.release(id(2), 1).unwrap();
        panic!("a fails after releasing client 2");
    }));
    let l2 = log.clone();
    assert!(m.on_release(&token(1, 1), move || note(&l2, "b")));
    let l2 = log.clone();
    assert!(m.on_release(&token(2, 1), move || note(&l2, "c")));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.release(id(1), 1)));
    let payload = caught.expect_err("the panic reaches the outermost caller");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"a fails after releasing client 2")
    );
    assert_eq!(*log.lock().unwrap(), ["a", "b", "c"]);
    // Not left draining: a later release runs its callback before returning.
    let l2 = log.clone();
    assert!(m.on_release(&token(3, 1), move || note(&l2, "d")));
    m.release(id(3), 1).unwrap();
    assert_eq!(*log.lock().unwrap(), ["a", "b", "c", "d"]);
}

/// The queue is per thread: a thread draining its own chain never runs another thread's
/// callbacks, and both chains complete.
#[test]
fn two_threads_draining_chains_at_once_each_run_their_own() {
    let m = Arc::new(SyncPointManager::new());
    let s = m.create_sequence();
    s.begin_processing(s.generate().unwrap()).unwrap();
    const LEN: u64 = 20_000;
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let client = 10 + t;
            m.create_client(id(client), s.id()).unwrap();
            let m = m.clone();
            std::thread::spawn(move || {
                let me = std::thread::current().id();
                let foreign = Arc::new(AtomicUsize::new(0));
                let steps = Arc::new(AtomicUsize::new(0));
                fn link(
                    m: Arc<SyncPointManager>,
                    client: u64,
                    k: u64,
                    me: std::thread::ThreadId,
                    steps: Arc<AtomicUsize>,
                    foreign: Arc<AtomicUsize>,
                ) {
                    steps.fetch_add(1, Ordering::Relaxed);
                    if std::thread::current().id() != me {
                        foreign.fetch_add(1, Ordering::Relaxed);
                    }
                    if k == LEN {
                        return;
                    }
                    let (m2, s2, f2) = (m.clone(), steps.clone(), foreign.clone());
                    assert!(m.on_release(&token(client, k + 1), move || {
                        link(m2, client, k + 1, me, s2, f2)
                    }));
                    m.release(id(client), k + 1).unwrap();
                }
                let (m2, s2, f2) = (m.clone(), steps.clone(), foreign.clone());
                assert!(m.on_release(&token(client, 1), move || link(m2, client, 1, me, s2, f2)));
                m.release(id(client), 1).unwrap();
                (
                    steps.load(Ordering::Relaxed),
                    foreign.load(Ordering::Relaxed),
                )
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), (LEN as usize, 0));
    }
}

/// A release made from a thread-local's destructor, as its thread exits, still runs every
/// callback — including those its callbacks trigger — whether this thread's callback queue is
/// destroyed before that destructor runs (the callbacks then run nested, there being no queue)
/// or after it.
#[test]
fn a_release_from_a_thread_local_destructor_runs_its_callbacks() {
    use std::cell::RefCell;

    struct ReleaseOnExit(Arc<SyncPointManager>);
    impl Drop for ReleaseOnExit {
        fn drop(&mut self) {
            self.0.release(id(1), 1).unwrap();
        }
    }
    thread_local! {
        static ON_EXIT: RefCell<Option<ReleaseOnExit>> = const { RefCell::new(None) };
    }

    for queue_made_first in [false, true] {
        let m = Arc::new(SyncPointManager::new());
        let s = m.create_sequence();
        for c in 1..=3 {
            m.create_client(id(c), s.id()).unwrap();
        }
        s.begin_processing(s.generate().unwrap()).unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let nested = Arc::new(AtomicUsize::new(0));
        let (m2, r2, n2) = (m.clone(), ran.clone(), nested.clone());
        assert!(m.on_release(&token(1, 1), move || {
            r2.fetch_add(1, Ordering::SeqCst);
            m2.release(id(2), 1).unwrap();
            // 2 once the second callback ran inside this one's release (no queue).
            n2.store(r2.load(Ordering::SeqCst), Ordering::SeqCst);
        }));
        let r2 = ran.clone();
        assert!(m.on_release(&token(2, 1), move || {
            r2.fetch_add(1, Ordering::SeqCst);
        }));
        // A release on the thread makes its queue (thread-locals are destroyed in the reverse
        // order they were first used in).
        assert!(m.on_release(&token(3, 1), || {}));
        let m2 = m.clone();
        std::thread::spawn(move || {
            if queue_made_first {
                m2.release(id(3), 1).unwrap();
            }
            ON_EXIT.with(|e| *e.borrow_mut() = Some(ReleaseOnExit(m2.clone())));
            if !queue_made_first {
                m2.release(id(3), 1).unwrap();
            }
        })
        .join()
        .unwrap();
        assert_eq!(
            ran.load(Ordering::SeqCst),
            2,
            "queue made first: {queue_made_first}"
        );
        eprintln!(
            "queue made first: {queue_made_first}; the chained callback ran {}",
            if nested.load(Ordering::SeqCst) == 2 {
                "nested (the queue was gone)"
            } else {
                "from the queue"
            }
        );
    }
}
