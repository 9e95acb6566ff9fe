//! Scheduling overhead per task vs a bare crossbeam channel, side by side in one process, on one
//! thread:
//!
//! * ours: enqueue a trivial boxed task on one stream ([`Scheduler::enqueue`]) and run it
//!   ([`Scheduler::run_next`]), in batches of `BATCH` (enqueue the batch, then drive until it
//!   ran) and one at a time;
//! * baseline: `send` a boxed closure on an unbounded crossbeam channel, `try_recv` it and call
//!   it, in the same batches.
//!
//! A cross-thread row runs the real shape: an "IO thread" enqueues (sends) `CROSS_TASKS`
//! tasks while the "GPU main thread" drives (`run_next` / `try_recv`, spinning when empty); the
//! time from start until the last task ran, per task, median of `CROSS_ROUNDS` interleaved
//! rounds.
//!
//! A last row measures the floor under ours: what every task costs before any queueing — two
//! clock reads ([`SystemClock`]: enqueue time, and the end of the task, which is also the start
//! of the next) and its sync-points order number (`generate`, `begin_processing`,
//! `finish_processing`) — against the same baseline.
//!
//! Goal: ratio <= 2. `cargo bench -p gpusvc-gpu-scheduler --bench overhead`; prints the table and
//! writes `target/bench/gpu_scheduler.json`.

use bench_support as support;

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use gpu_scheduler::{Clock, Priority, Scheduler, StreamId, SystemClock, Task};
use support::Row;
use sync_points::SyncPointManager;

const BATCH: usize = 256;
const SAMPLES: usize = 21;
const SAMPLE_MS: f64 = 40.0;
/// Interleaved (ours, baseline) pairs per single-thread row; the row is the median of each side.
const PAIRS: usize = 5;
const CROSS_TASKS: usize = 200_000;
const CROSS_ROUNDS: usize = 9;

type Job = Box<dyn FnOnce() + Send>;

/// Ours' producing side in every row: `n` trivial tasks enqueued on `stream`, each adding 1 to
/// `counter`.
fn enqueue_counting(sched: &Scheduler, stream: StreamId, counter: &Arc<AtomicU64>, n: usize) {
    for _ in 0..n {
        let c = counter.clone();
        sched
            .enqueue(
                stream,
                Task::simple(move || {
                    c.fetch_add(1, Ordering::Relaxed);
                }),
            )
            .unwrap();
    }
}

/// The baseline's producing side in every row: `n` boxed closures sent on the channel, each
/// adding 1 to `counter`.
fn send_counting(tx: &crossbeam_channel::Sender<Job>, counter: &Arc<AtomicU64>, n: usize) {
    for _ in 0..n {
        let c = counter.clone();
        tx.send(Box::new(move || {
            c.fetch_add(1, Ordering::Relaxed);
        }))
        .unwrap();
    }
}

/// The baseline's round: `batch` boxed closures sent on the channel, then received and called.
fn channel_round(
    tx: &crossbeam_channel::Sender<Job>,
    rx: &crossbeam_channel::Receiver<Job>,
    counter: &Arc<AtomicU64>,
    batch: usize,
) {
    send_counting(tx, counter, batch);
    for _ in 0..batch {
        let job = rx.try_recv().expect("work is queued");
        job();
    }
}

/// Per-task ns of (ours, baseline) for rounds of `batch` tasks, interleaved `PAIRS` times (ours,
/// baseline, ours, ...); the median of each side.
fn interleaved(batch: usize, mut ours: impl FnMut(), mut baseline: impl FnMut()) -> (f64, f64) {
    let mut o = Vec::new();
    let mut b = Vec::new();
    for _ in 0..PAIRS {
        o.push(support::median_ns(SAMPLES, SAMPLE_MS, &mut ours) / batch as f64);
        b.push(support::median_ns(SAMPLES, SAMPLE_MS, &mut baseline) / batch as f64);
    }
    (support::median(&mut o), support::median(&mut b))
}

/// Per-task ns of (ours, baseline) with `batch` tasks per round.
fn measure(batch: usize) -> (f64, f64) {
    let counter = Arc::new(AtomicU64::new(0));
    let sched = Scheduler::new(Arc::new(SyncPointManager::new()));
    let stream = sched.add_stream(Priority::Normal);
    let ours = || {
        enqueue_counting(&sched, stream, &counter, batch);
        let mut ran = 0;
        while ran < batch {
            ran += sched.run_next().expect("work is queued");
        }
        black_box(ran);
    };
    let (tx, rx) = crossbeam_channel::unbounded::<Job>();
    let result = interleaved(batch, ours, || channel_round(&tx, &rx, &counter, batch));
    black_box(counter.load(Ordering::Relaxed));
    result
}

/// Per-task ns of (floor, baseline): see the module docs.
fn measure_floor() -> (f64, f64) {
    let sync = SyncPointManager::new();
    let seq = sync.create_sequence();
    let clock = SystemClock;
    let mut numbers = Vec::with_capacity(BATCH);
    let floor = || {
        for _ in 0..BATCH {
            black_box(clock.now_ns());
            numbers.push(seq.generate().expect("live sequence"));
        }
        for n in numbers.drain(..) {
            seq.begin_processing(n).expect("in order");
            seq.finish_processing(n).expect("in order");
            black_box(clock.now_ns());
        }
    };
    let (tx, rx) = crossbeam_channel::unbounded::<Job>();
    let counter = Arc::new(AtomicU64::new(0));
    interleaved(BATCH, floor, || channel_round(&tx, &rx, &counter, BATCH))
}

/// Per-task ns of (ours, baseline) with one enqueuing thread and one driving thread.
fn measure_cross_thread() -> (f64, f64) {
    fn ours() -> f64 {
        let sched = Scheduler::new(Arc::new(SyncPointManager::new()));
        let stream = sched.add_stream(Priority::Normal);
        let counter = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let producer = {
            let (sched, counter) = (sched.clone(), counter.clone());
            std::thread::spawn(move || enqueue_counting(&sched, stream, &counter, CROSS_TASKS))
        };
        let mut ran = 0;
        while ran < CROSS_TASKS {
            match sched.run_next() {
                Some(k) => ran += k,
                None => std::hint::spin_loop(),
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / CROSS_TASKS as f64;
        producer.join().unwrap();
        black_box(counter.load(Ordering::Relaxed));
        ns
    }
    fn baseline() -> f64 {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let counter = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let producer = {
            let counter = counter.clone();
            std::thread::spawn(move || send_counting(&tx, &counter, CROSS_TASKS))
        };
        let mut ran = 0;
        while ran < CROSS_TASKS {
            match rx.try_recv() {
                Ok(job) => {
                    job();
                    ran += 1;
                }
                Err(_) => std::hint::spin_loop(),
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / CROSS_TASKS as f64;
        producer.join().unwrap();
        black_box(counter.load(Ordering::Relaxed));
        ns
    }
    let mut o = Vec::new();
    let mut b = Vec::new();
    for _ in 0..CROSS_ROUNDS {
        o.push(ours());
        b.push(baseline());
    }
    (support::median(&mut o), support::median(&mut b))
}

fn main() {
    let mut rows = Vec::new();
    for (metric, batch) in [
        ("enqueue_run_per_task_batch256", BATCH),
        ("enqueue_run_per_task_batch1", 1),
    ] {
        let (ours, baseline) = measure(batch);
        rows.push(Row {
            metric: metric.to_string(),
            unit: "ns/task",
            ours,
            baseline,
            ratio_note: "scheduler / crossbeam send+recv+call (goal <= 2)",
        });
    }
    let (ours, baseline) = measure_cross_thread();
    rows.push(Row {
        metric: "enqueue_run_per_task_cross_thread".to_string(),
        unit: "ns/task",
        ours,
        baseline,
        ratio_note: "IO thread enqueues, GPU thread drives: scheduler / crossbeam (goal <= 2)",
    });
    let (ours, baseline) = measure_floor();
    rows.push(Row {
        metric: "floor_clock_x2_order_number_per_task".to_string(),
        unit: "ns/task",
        ours,
        baseline,
        ratio_note: "2 clock reads + generate/begin/finish alone / crossbeam (no goal)",
    });
    support::report("gpu_scheduler", &rows);
}
