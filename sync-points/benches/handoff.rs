//! Hand-off latency and uncontended cost of sync points vs a bare `Mutex` + `Condvar`, side by
//! side in one process, on the same two threads, rounds interleaved (ours, baseline, ours, ...):
//!
//! (a) release -> callback: thread A registered an `on_release` callback that wakes it through
//!     its own mutex + condvar and is parked there; thread B calls `release`; latency from the
//!     release call to A running again.
//! (b) `wait_blocking` wake-up: A is parked in `wait_blocking`; B releases; latency likewise.
//!     Baseline for both: A parked on a bare mutex + condvar, B sets the flag and notifies.
//! (c) uncontended pairs on one thread: register a wait and release it, vs a bare lock/set then
//!     lock/set/notify pair.
//!
//! `cargo bench -p gpusvc-sync-points --bench handoff`; prints the table and writes
//! `target/bench/sync_points.json`.

use bench_support as support;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use support::{Row, percentile};
use sync_points::{ClientId, ClientState, SyncPointManager, SyncToken};

const ROUNDS: u64 = 8_000;
const WARMUP: u64 = 400;
/// How long B waits after A said it is about to park, so A is parked when B releases.
const PARK_DELAY: Duration = Duration::from_micros(40);

const CLIENT: ClientId = ClientId {
    namespace: 0,
    command_buffer_id: 1,
};

fn token(count: u64) -> SyncToken {
    SyncToken::new(CLIENT.namespace, CLIENT.command_buffer_id, count)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Callback,
    Blocking,
}

/// State shared by the two threads of one latency case.
struct Pair {
    base: Instant,
    m: SyncPointManager,
    client: Arc<ClientState>,
    /// Round A is about to park for.
    ready: AtomicU64,
    /// Round A woke from, and when.
    woke: AtomicU64,
    woke_at: AtomicU64,
    /// The bare baseline: the highest round signalled.
    bare: (Mutex<u64>, Condvar),
}

impl Pair {
    fn new() -> Self {
        let m = SyncPointManager::new();
        let seq = m.create_sequence();
        let n = seq.generate().unwrap();
        seq.begin_processing(n).unwrap();
        let client = m.create_client(CLIENT, seq.id()).unwrap();
        Pair {
            base: Instant::now(),
            m,
            client,
            ready: AtomicU64::new(0),
            woke: AtomicU64::new(0),
            woke_at: AtomicU64::new(0),
            bare: (Mutex::new(0), Condvar::new()),
        }
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// Thread A. Odd rounds are ours, even rounds the baseline. Token counts are the round
    /// numbers of our rounds, so every one of them waits for a fresh release.
    fn waiter(&self, mode: Mode, rounds: u64) {
        for k in 1..=rounds {
            if k % 2 == 1 {
                match mode {
                    Mode::Callback => {
                        let signal = Arc::new((Mutex::new(false), Condvar::new()));
                        let s = signal.clone();
                        let pending = self.m.on_release(&token(k), move || {
                            *s.0.lock().unwrap() = true;
                            s.1.notify_one();
                        });
                        assert!(pending, "token {k} already released");
                        self.ready.store(k, Ordering::SeqCst);
                        let mut done = signal.0.lock().unwrap();
                        while !*done {
                            done = signal.1.wait(done).unwrap();
                        }
                    }
                    Mode::Blocking => {
                        self.ready.store(k, Ordering::SeqCst);
                        assert!(self.m.wait_blocking(&token(k), Duration::from_secs(10)));
                    }
                }
            } else {
                self.ready.store(k, Ordering::SeqCst);
                let mut g = self.bare.0.lock().unwrap();
                while *g < k {
                    g = self.bare.1.wait(g).unwrap();
                }
            }
            self.woke_at.store(self.now(), Ordering::SeqCst);
            self.woke.store(k, Ordering::SeqCst);
        }
    }

    /// Thread B: returns (ours, baseline) latencies in nanoseconds.
    fn releaser(&self, rounds: u64) -> (Vec<f64>, Vec<f64>) {
        let (mut ours, mut bare) = (Vec::new(), Vec::new());
        for k in 1..=rounds {
            while self.ready.load(Ordering::SeqCst) != k {
                std::hint::spin_loop();
            }
            let t = Instant::now();
            while t.elapsed() < PARK_DELAY {
                std::hint::spin_loop();
            }
            let t0 = self.now();
            if k % 2 == 1 {
                black_box(self.client.release(k).unwrap());
            } else {
                *self.bare.0.lock().unwrap() = k;
                self.bare.1.notify_all();
            }
            while self.woke.load(Ordering::SeqCst) != k {
                std::hint::spin_loop();
            }
            let lat = self.woke_at.load(Ordering::SeqCst).saturating_sub(t0) as f64;
            if k > WARMUP {
                if k % 2 == 1 { &mut ours } else { &mut bare }.push(lat);
            }
        }
        (ours, bare)
    }
}

fn latency(mode: Mode, label: &str, rows: &mut Vec<Row>) {
    let pair = Arc::new(Pair::new());
    let rounds = 2 * ROUNDS + WARMUP;
    let a = {
        let pair = pair.clone();
        thread::spawn(move || pair.waiter(mode, rounds))
    };
    let (mut ours, mut bare) = pair.releaser(rounds);
    a.join().unwrap();
    for (p, name) in [(0.5, "p50"), (0.99, "p99")] {
        rows.push(Row {
            metric: format!("{label} {name}"),
            unit: "us",
            ours: percentile(&mut ours, p) / 1e3,
            baseline: percentile(&mut bare, p) / 1e3,
            ratio_note: "ours/bare Mutex+Condvar (goal <= 1.3)",
        });
    }
}

fn uncontended(rows: &mut Vec<Row>) {
    let m = SyncPointManager::new();
    let seq = m.create_sequence();
    let n = seq.generate().unwrap();
    seq.begin_processing(n).unwrap();
    let client = m.create_client(CLIENT, seq.id()).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    let mut k = 0;
    let ours = support::median_ns(15, 20.0, || {
        k += 1;
        let r = ran.clone();
        let pending = m.on_release(&token(k), move || {
            r.fetch_add(1, Ordering::Relaxed);
        });
        assert!(pending);
        black_box(client.release(k).unwrap());
    });
    assert_eq!(ran.load(Ordering::Relaxed) as u64, k);

    let bare = (Mutex::new((0u64, 0u64)), Condvar::new());
    let mut j = 0;
    let baseline = support::median_ns(15, 20.0, || {
        j += 1;
        bare.0.lock().unwrap().0 = j; // register: the value waited for
        let mut g = bare.0.lock().unwrap(); // release: set and notify
        g.1 = j;
        bare.1.notify_all();
        drop(g);
        black_box(&bare);
    });
    rows.push(Row {
        metric: "(c) uncontended wait+release pair".into(),
        unit: "ns/pair",
        ours,
        baseline,
        ratio_note: "ours/bare lock+notify pair time (no goal)",
    });
    rows.push(Row {
        metric: "(c) uncontended pairs per second".into(),
        unit: "M pairs/s",
        ours: 1e3 / ours,
        baseline: 1e3 / baseline,
        ratio_note: "ours/bare throughput",
    });
}

fn main() {
    let started = Instant::now();
    let mut rows = Vec::new();
    latency(Mode::Callback, "(a) release -> callback wakes A", &mut rows);
    latency(
        Mode::Blocking,
        "(b) release -> wait_blocking wakes",
        &mut rows,
    );
    uncontended(&mut rows);
    support::report("sync_points", &rows);
    println!(
        "{ROUNDS} rounds per side per latency case, interleaved; {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
