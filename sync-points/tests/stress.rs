//! Stress: sequences generating, beginning and finishing order numbers while their clients
//! release, waiters on other sequences registering fenced waits, host threads registering
//! callbacks and blocking waits, and clients and sequences destroyed and recreated — for a
//! bounded time. Every wait that returned true runs its callback exactly once; every wait that
//! returned false never runs it; nothing hangs (a watchdog fails the test instead).

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use sync_points::{ClientId, OrderData, SyncPointManager, SyncToken};
use test_support::rng::Rng;

const SEQUENCES: u64 = 3;
const WAITERS: usize = 2;
const RUN_FOR: Duration = Duration::from_secs(3);
const WATCHDOG: Duration = Duration::from_secs(60);

const RAN: u8 = 1;
const TRUE: u8 = 2;
const FALSE: u8 = 4;

/// The client of sequence slot `slot` in generation `generation` (ids never reused).
fn client_id(slot: u64, generation: u64) -> ClientId {
    ClientId {
        namespace: 1,
        command_buffer_id: generation * SEQUENCES + slot,
    }
}

struct Shared {
    m: SyncPointManager,
    /// Current generation of each releasing slot (its client id).
    generation: Vec<AtomicU64>,
    stop: AtomicBool,
    /// Every registration: RAN set by the callback, TRUE/FALSE by the registering thread.
    slots: Mutex<Vec<Arc<AtomicU8>>>,
    callbacks_run: AtomicUsize,
    registered_true: AtomicUsize,
    registered_false: AtomicUsize,
    blocking_waits: AtomicUsize,
    blocking_released: AtomicUsize,
    order_numbers: AtomicUsize,
    releases: AtomicUsize,
    destroys: AtomicUsize,
}

/// Registers through `register` a callback that marks its slot; records the result.
fn register(
    sh: &Arc<Shared>,
    local: &mut Vec<Arc<AtomicU8>>,
    register: impl FnOnce(Box<dyn FnOnce() + Send>) -> bool,
) {
    let slot = Arc::new(AtomicU8::new(0));
    {
        let (s, shared) = (slot.clone(), sh.clone());
        let ok = register(Box::new(move || {
            let before = s.fetch_or(RAN, Ordering::SeqCst);
            assert_eq!(before & RAN, 0, "a callback ran twice");
            shared.callbacks_run.fetch_add(1, Ordering::SeqCst);
        }));
        slot.fetch_or(if ok { TRUE } else { FALSE }, Ordering::SeqCst);
        if ok {
            sh.registered_true.fetch_add(1, Ordering::Relaxed);
        } else {
            sh.registered_false.fetch_add(1, Ordering::Relaxed);
        }
    }
    local.push(slot);
}

impl Shared {
    fn random_token(&self, rng: &mut Rng) -> SyncToken {
        self.random_token_of(rng).0
    }

    /// A token, and whether its client is one not created yet when it was chosen (it reads as
    /// released now and may not later).
    fn random_token_of(&self, rng: &mut Rng) -> (SyncToken, bool) {
        let slot = rng.below(SEQUENCES);
        let current = self.generation[slot as usize].load(Ordering::SeqCst);
        // Mostly the live client; sometimes a destroyed (or not yet created) one.
        let generation = match rng.below(8) {
            0 => current.saturating_sub(1),
            1 => current + 1,
            _ => current,
        };
        let id = client_id(slot, generation);
        let released = self.m.client(id).map_or(0, |c| c.released());
        let token = SyncToken::new(id.namespace, id.command_buffer_id, released + rng.below(4));
        (token, generation > current)
    }
}

/// A releasing sequence: order numbers in turn, releases (some skipped so fences retire),
/// and now and then its client and sequence destroyed and recreated.
fn releaser(sh: Arc<Shared>, slot: u64, seed: u64) {
    let mut rng = Rng(seed);
    let mut generation = 0;
    let mut seq = sh.m.create_sequence();
    let mut client = sh.m.create_client(client_id(slot, 0), seq.id()).unwrap();
    let mut count = 0;
    let mut round = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        round += 1;
        let n = seq.generate().unwrap();
        // Leave a few numbers queued so waits have something to fence at.
        let m = seq.generate().unwrap();
        sh.order_numbers.fetch_add(2, Ordering::Relaxed);
        for num in [n, m] {
            seq.begin_processing(num).unwrap();
            if rng.below(4) != 0 {
                count += 1 + rng.below(2);
                client.release(count).unwrap();
                sh.releases.fetch_add(1, Ordering::Relaxed);
            }
            if rng.below(8) == 0 {
                seq.pause_processing().unwrap();
                thread::yield_now();
                seq.begin_processing(num).unwrap();
            }
            seq.finish_processing(num).unwrap();
        }
        if round.is_multiple_of(64) {
            // Destroy (sometimes the sequence first, sometimes the client) and recreate.
            let old_seq = seq.id();
            if rng.below(2) == 0 {
                assert!(sh.m.destroy_sequence(old_seq));
                assert!(sh.m.destroy_client(client.id()));
            } else {
                assert!(sh.m.destroy_client(client.id()));
                assert!(sh.m.destroy_sequence(old_seq));
            }
            sh.destroys.fetch_add(1, Ordering::Relaxed);
            generation += 1;
            seq = sh.m.create_sequence();
            client =
                sh.m.create_client(client_id(slot, generation), seq.id())
                    .unwrap();
            count = 0;
            sh.generation[slot as usize].store(generation, Ordering::SeqCst);
        }
    }
    sh.m.destroy_client(client.id());
    sh.m.destroy_sequence(seq.id());
}

/// A waiting sequence: fenced waits on the releasers' tokens at its own order numbers.
fn waiter(sh: Arc<Shared>, seed: u64) -> Vec<Arc<AtomicU8>> {
    let mut rng = Rng(seed);
    let own: Arc<OrderData> = sh.m.create_sequence();
    let mut local = Vec::new();
    while !sh.stop.load(Ordering::Relaxed) {
        let n = own.generate().unwrap();
        for _ in 0..4 {
            let token = sh.random_token(&mut rng);
            let order = if rng.below(16) == 0 { 0 } else { n };
            let id = own.id();
            register(&sh, &mut local, |cb| sh.m.wait(&token, id, order, cb));
        }
        own.begin_processing(n).unwrap();
        own.finish_processing(n).unwrap();
        if local.len() % 256 < 4 {
            thread::yield_now();
        }
    }
    local
}

/// A host thread: unordered callbacks and blocking waits with short timeouts.
fn host(sh: Arc<Shared>, seed: u64) -> Vec<Arc<AtomicU8>> {
    let mut rng = Rng(seed);
    let mut local = Vec::new();
    while !sh.stop.load(Ordering::Relaxed) {
        let (token, not_created_yet) = sh.random_token_of(&mut rng);
        if rng.below(8) == 0 {
            let released = sh.m.wait_blocking(&token, Duration::from_micros(200));
            sh.blocking_waits.fetch_add(1, Ordering::Relaxed);
            // Released counts only grow and a destroyed client stays unknown, so a token that
            // read as released still does — unless its client did not exist yet back then.
            if released {
                sh.blocking_released.fetch_add(1, Ordering::Relaxed);
            }
            if released && !not_created_yet {
                assert!(
                    sh.m.is_released(&token),
                    "wait_blocking said released: {token:?}"
                );
            }
        } else {
            register(&sh, &mut local, |cb| sh.m.on_release(&token, cb));
        }
    }
    local
}

fn run() -> String {
    let sh = Arc::new(Shared {
        m: SyncPointManager::new(),
        generation: (0..SEQUENCES).map(|_| AtomicU64::new(0)).collect(),
        stop: AtomicBool::new(false),
        slots: Mutex::new(Vec::new()),
        callbacks_run: AtomicUsize::new(0),
        registered_true: AtomicUsize::new(0),
        registered_false: AtomicUsize::new(0),
        blocking_waits: AtomicUsize::new(0),
        blocking_released: AtomicUsize::new(0),
        order_numbers: AtomicUsize::new(0),
        releases: AtomicUsize::new(0),
        destroys: AtomicUsize::new(0),
    });
    let releasers: Vec<_> = (0..SEQUENCES)
        .map(|slot| {
            let sh = sh.clone();
            thread::spawn(move || releaser(sh, slot, 0x9E37_79B9_7F4A_7C15 ^ (slot + 1)))
        })
        .collect();
    let mut registrars: Vec<_> = (0..WAITERS as u64)
        .map(|i| {
            let sh = sh.clone();
            thread::spawn(move || waiter(sh, 0xD1B5_4A32_D192_ED03 ^ (i + 1)))
        })
        .collect();
    registrars.push({
        let sh = sh.clone();
        thread::spawn(move || host(sh, 0x2545_F491_4F6C_DD1D))
    });
    thread::sleep(RUN_FOR);
    sh.stop.store(true, Ordering::SeqCst);
    for r in releasers {
        r.join().unwrap();
    }
    let mut slots = sh.slots.lock().unwrap();
    for r in registrars {
        slots.extend(r.join().unwrap());
    }
    // Every releasing client and sequence is destroyed now: nothing may still be pending.
    let (mut never_ran, mut ran_after_false) = (0, 0);
    for s in slots.iter() {
        let v = s.load(Ordering::SeqCst);
        assert_ne!(v & (TRUE | FALSE), 0);
        if v & TRUE != 0 && v & RAN == 0 {
            never_ran += 1;
        }
        if v & FALSE != 0 && v & RAN != 0 {
            ran_after_false += 1;
        }
    }
    let registered = sh.registered_true.load(Ordering::SeqCst);
    let run = sh.callbacks_run.load(Ordering::SeqCst);
    assert_eq!(never_ran, 0, "registered callbacks that never ran");
    assert_eq!(
        ran_after_false, 0,
        "callbacks of waits that returned false ran"
    );
    assert_eq!(
        registered, run,
        "registrations that returned true vs callbacks run"
    );
    assert!(
        registered > 1000,
        "too little happened: {registered} registrations"
    );
    format!(
        "stress: {} order numbers, {} releases, {} client+sequence destroys; \
         registrations {} true / {} false, callbacks run {}; blocking waits {} ({} released)",
        sh.order_numbers.load(Ordering::SeqCst),
        sh.releases.load(Ordering::SeqCst),
        sh.destroys.load(Ordering::SeqCst),
        registered,
        sh.registered_false.load(Ordering::SeqCst),
        run,
        sh.blocking_waits.load(Ordering::SeqCst),
        sh.blocking_released.load(Ordering::SeqCst),
    )
}

#[test]
fn releases_waits_and_destroys_under_contention() {
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    thread::spawn(move || {
        let _ = tx.send(run());
    });
    match rx.recv_timeout(WATCHDOG) {
        Ok(summary) => println!("{summary} in {:.1} s", started.elapsed().as_secs_f64()),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("stress did not finish within {WATCHDOG:?}: hang")
        }
        // The worker panicked (an assertion failed); its message is above.
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("stress worker panicked"),
    }
}
