//! Seeded, randomized real-thread stress test of enqueue / run / remove across threads.
//!
//! Why not `shuttle`: the scheduler's concurrency goes through `crate::sync` (std, or loom under
//! `--cfg loom`), and so does `sync-points`. Shuttle only controls its own primitives, so under
//! it every lock of the scheduler would be invisible: the only interleavings explored would be
//! those at the test's own shuttle calls, i.e. whole API calls, never the races inside them.
//! Exhaustive exploration is done by loom instead: `tests/loom.rs` (built only under
//! `--cfg loom`, run by `scripts/test`) checks the core properties below on tiny two-thread
//! models (enqueue, remove, enable/disable, a token release and a `ContinueLater`, each racing a
//! driver) over every interleaving, up to two preemptions, of both crates' locks and atomics.
//! This test complements them at scale: many threads, streams and tasks, with real timing.
//!
//! Threads: several enqueuers (random streams, random batch sizes, random sleeps), one driver
//! calling `run_next` in a loop, and a "churn" thread adding, removing, disabling and
//! re-prioritizing streams at random times, for a bounded time, under a watchdog. Some tasks
//! yield once (`ContinueLater`) and some enqueue a follow-up task from inside the task.
//!
//! Checked once the driver has drained everything:
//! * every task's first part runs at most once (and its continuation at most once, after it);
//! * within a stream, order numbers are strictly increasing in run order, tasks of one enqueuer
//!   thread run in the order it enqueued them, and a continuation runs before anything else of
//!   its stream;
//! * nothing is lost except by removal: every task closure is either run or dropped, and the
//!   tasks dropped unrun (less the enqueues refused because the stream was already gone) match
//!   the counts returned by `remove_stream`.
//!
//! `GPUSVC_STRESS_SEED` and `GPUSVC_STRESS_MS` override the seed and the run time.
#![cfg(not(loom))] // std threads and Arcs; the loom models are tests/loom.rs

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use gpu_scheduler::{Priority, Scheduler, StreamId, Task, TaskResult};
use sync_points::SyncPointManager;

/// A small deterministic generator (splitmix64); each thread gets its own seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn priority(&mut self) -> Priority {
        Priority::ALL[self.below(4) as usize]
    }
}

/// Who enqueued a task: an enqueuer thread, or a task running on the driver.
const FROM_TASK: usize = usize::MAX;

/// One run of a task part, in run order (the driver is the only thread running tasks).
#[derive(Debug, Clone, Copy)]
struct Event {
    stream: StreamId,
    task: u64,
    order_num: u64,
    enqueuer: usize,
    local_seq: u64,
    continuation: bool,
    /// A first part that returned `ContinueLater`.
    yields: bool,
}

#[derive(Default)]
struct Counters {
    enqueued: AtomicU64,
    refused: AtomicU64,
    from_tasks: AtomicU64,
    first_runs: AtomicU64,
    continuations_made: AtomicU64,
    continuation_runs: AtomicU64,
    /// Task closures dropped without running (by removal, or a refused enqueue).
    dropped_first: AtomicU64,
    /// Continuation closures dropped without running.
    dropped_continuations: AtomicU64,
    removed_streams: AtomicU64,
    removed_dropped: AtomicU64,
    /// Per task id, how many times its first part ran.
    runs: Mutex<HashMap<u64, u32>>,
}

/// Captured by a closure: counts it as dropped unless it ran.
struct DropProbe {
    counters: Arc<Counters>,
    ran: bool,
    continuation: bool,
}

impl Drop for DropProbe {
    fn drop(&mut self) {
        if !self.ran {
            let c = if self.continuation {
                &self.counters.dropped_continuations
            } else {
                &self.counters.dropped_first
            };
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

struct World {
    sched: Arc<Scheduler>,
    counters: Arc<Counters>,
    log: Mutex<Vec<Event>>,
    /// Live streams (those added and not yet removed by the churn thread).
    live: Mutex<Vec<StreamId>>,
    next_task: AtomicU64,
    stop: AtomicBool,
}

/// Builds a task; `nested` lets it enqueue one follow-up task from inside (on the driver).
fn make_task(
    world: &Arc<World>,
    stream: StreamId,
    enqueuer: usize,
    local_seq: u64,
    rng_seed: u64,
    nested: bool,
) -> Task {
    let id = world.next_task.fetch_add(1, Ordering::Relaxed);
    let probe = DropProbe {
        counters: world.counters.clone(),
        ran: false,
        continuation: false,
    };
    let w = world.clone();
    Task::new(move |ctx| {
        // Rebind so the closure owns the whole probe (edition 2024 captures fields).
        let mut probe = probe;
        probe.ran = true;
        let mut rng = Rng(rng_seed);
        assert_eq!(ctx.stream(), stream);
        *w.counters.runs.lock().unwrap().entry(id).or_default() += 1;
        w.counters.first_runs.fetch_add(1, Ordering::Relaxed);
        let yields = rng.chance(10);
        w.log.lock().unwrap().push(Event {
            stream,
            task: id,
            order_num: ctx.order_num(),
            enqueuer,
            local_seq,
            continuation: false,
            yields,
        });
        if rng.chance(10) {
            // A little work, so slices end and preemption cuts them.
            let until = Instant::now() + Duration::from_micros(rng.below(300));
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        if nested && rng.chance(5) {
            let t = make_task(&w, stream, FROM_TASK, 0, rng.next(), false);
            // Running tasks hold no lock: enqueueing from here must not deadlock.
            match ctx.scheduler().enqueue(stream, t) {
                Ok(_) => {
                    w.counters.enqueued.fetch_add(1, Ordering::Relaxed);
                    w.counters.from_tasks.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    w.counters.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if yields {
            w.counters
                .continuations_made
                .fetch_add(1, Ordering::Relaxed);
            let probe = DropProbe {
                counters: w.counters.clone(),
                ran: false,
                continuation: true,
            };
            let w2 = w.clone();
            let order_num = ctx.order_num();
            return TaskResult::continue_later(move |ctx| {
                let mut probe = probe;
                probe.ran = true;
                assert_eq!(
                    ctx.order_num(),
                    order_num,
                    "continuation keeps its order number"
                );
                w2.counters
                    .continuation_runs
                    .fetch_add(1, Ordering::Relaxed);
                w2.log.lock().unwrap().push(Event {
                    stream,
                    task: id,
                    order_num,
                    enqueuer,
                    local_seq,
                    continuation: true,
                    yields: false,
                });
                TaskResult::Done
            });
        }
        TaskResult::Done
    })
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn randomized_enqueue_run_remove_across_threads() {
    let seed = env_u64("GPUSVC_STRESS_SEED", 0x5EED_2024);
    let run_for = Duration::from_millis(env_u64("GPUSVC_STRESS_MS", 3000));
    const ENQUEUERS: usize = 4;
    println!("seed {seed:#x}, {} ms", run_for.as_millis());

    // Watchdog: a deadlock or livelock aborts the process with a message instead of hanging CI.
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let watchdog_limit = run_for + Duration::from_secs(30);
    let watchdog = thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = done_rx.recv_timeout(watchdog_limit) {
            eprintln!(
                "watchdog: stress test still running after {watchdog_limit:?} (seed {seed:#x}); aborting"
            );
            std::process::abort();
        }
    });

    let mut master = Rng(seed);
    let sched = Scheduler::new(Arc::new(SyncPointManager::new()));
    let initial: Vec<StreamId> = (0..6)
        .map(|_| sched.add_stream(master.priority()))
        .collect();
    let world = Arc::new(World {
        sched: sched.clone(),
        counters: Arc::new(Counters::default()),
        log: Mutex::new(Vec::new()),
        live: Mutex::new(initial.clone()),
        next_task: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let all_streams = Arc::new(Mutex::new(initial));
    let deadline = Instant::now() + run_for;

    let enqueuers: Vec<_> = (0..ENQUEUERS)
        .map(|e| {
            let world = world.clone();
            let mut rng = Rng(master.next());
            thread::spawn(move || {
                let mut local: HashMap<StreamId, u64> = HashMap::new();
                while Instant::now() < deadline {
                    let stream = {
                        let live = world.live.lock().unwrap();
                        if live.is_empty() {
                            None
                        } else {
                            Some(live[rng.below(live.len() as u64) as usize])
                        }
                    };
                    if let Some(stream) = stream {
                        for _ in 0..1 + rng.below(8) {
                            let seq = local.entry(stream).or_default();
                            let t = make_task(&world, stream, e, *seq, rng.next(), true);
                            match world.sched.enqueue(stream, t) {
                                Ok(_) => {
                                    *seq += 1;
                                    world.counters.enqueued.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(_) => {
                                    world.counters.refused.fetch_add(1, Ordering::Relaxed);
                                    break;
                                }
                            }
                        }
                    }
                    match rng.below(4) {
                        0 => thread::yield_now(),
                        1 | 2 => thread::sleep(Duration::from_micros(rng.below(400))),
                        _ => {}
                    }
                }
            })
        })
        .collect();

    let driver = {
        let world = world.clone();
        thread::spawn(move || {
            let mut turns = 0u64;
            let mut idle = 0u64;
            while !world.stop.load(Ordering::Acquire) {
                match world.sched.run_next() {
                    Some(_) => turns += 1,
                    None => {
                        idle += 1;
                        thread::yield_now();
                    }
                }
            }
            // Final drain: every producer has stopped and every live stream is enabled.
            while world.sched.run_next().is_some() {
                turns += 1;
            }
            (turns, idle)
        })
    };

    let churn = {
        let world = world.clone();
        let all_streams = all_streams.clone();
        let mut rng = Rng(master.next());
        thread::spawn(move || {
            let (mut added, mut toggles, mut reprio) = (0u64, 0u64, 0u64);
            while Instant::now() < deadline {
                thread::sleep(Duration::from_micros(200 + rng.below(3000)));
                let live: Vec<StreamId> = world.live.lock().unwrap().clone();
                match rng.below(10) {
                    0..=2 if live.len() > 1 => {
                        let id = live[rng.below(live.len() as u64) as usize];
                        world.live.lock().unwrap().retain(|s| *s != id);
                        let r = world.sched.remove_stream(id).expect("live stream");
                        world
                            .counters
                            .removed_streams
                            .fetch_add(1, Ordering::Relaxed);
                        world
                            .counters
                            .removed_dropped
                            .fetch_add(r.dropped_tasks as u64, Ordering::Relaxed);
                        assert!(world.sched.remove_stream(id).is_err());
                    }
                    3..=5 => {
                        let id = world.sched.add_stream(rng.priority());
                        all_streams.lock().unwrap().push(id);
                        world.live.lock().unwrap().push(id);
                        added += 1;
                    }
                    6 | 7 if !live.is_empty() => {
                        let id = live[rng.below(live.len() as u64) as usize];
                        world.sched.set_enabled(id, rng.chance(60)).unwrap();
                        toggles += 1;
                    }
                    _ if !live.is_empty() => {
                        let id = live[rng.below(live.len() as u64) as usize];
                        world.sched.set_base_priority(id, rng.priority()).unwrap();
                        reprio += 1;
                    }
                    _ => {}
                }
            }
            (added, toggles, reprio)
        })
    };

    for e in enqueuers {
        e.join().expect("enqueuer panicked");
    }
    let (added, toggles, reprio) = churn.join().expect("churn thread panicked");
    let live: Vec<StreamId> = world.live.lock().unwrap().clone();
    for id in &live {
        sched.set_enabled(*id, true).unwrap();
    }
    world.stop.store(true, Ordering::Release);
    let (turns, idle) = driver
        .join()
        .expect("driver panicked (a task assertion failed?)");
    // Anything a late wake-up queued after the driver's last look.
    let late = sched.run_until_idle();
    for id in &live {
        assert_eq!(sched.pending_tasks(*id).unwrap(), 0, "{id:?} not drained");
    }
    done_tx.send(()).unwrap();
    watchdog.join().unwrap();

    let c = &world.counters;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let enqueued = get(&c.enqueued);
    let refused = get(&c.refused);
    let first_runs = get(&c.first_runs);
    let dropped_first = get(&c.dropped_first);
    let continuations_made = get(&c.continuations_made);
    let continuation_runs = get(&c.continuation_runs);
    let dropped_continuations = get(&c.dropped_continuations);
    let removed_dropped = get(&c.removed_dropped);
    let log = world.log.lock().unwrap().clone();
    println!(
        "streams: {} total ({} added, {} removed, {} live); {toggles} enable toggles, {reprio} re-prioritizations",
        all_streams.lock().unwrap().len(),
        added,
        get(&c.removed_streams),
        live.len()
    );
    println!(
        "tasks: {enqueued} enqueued ({} from inside tasks), {refused} enqueues refused (stream gone), \
         {first_runs} run, {removed_dropped} dropped by remove_stream",
        get(&c.from_tasks)
    );
    println!(
        "continuations: {continuations_made} made, {continuation_runs} run, {dropped_continuations} dropped unrun"
    );
    println!(
        "driver: {turns} turns, {idle} idle polls, {late} late runs; {} log events",
        log.len()
    );

    // At most once.
    let runs = c.runs.lock().unwrap();
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "tasks run more than once: {twice:?}");
    assert_eq!(runs.len() as u64, first_runs);

    // Every closure made was either run or dropped: nothing leaked or stuck.
    let made = world.next_task.load(Ordering::Relaxed);
    assert_eq!(
        made,
        enqueued + refused,
        "every task made was enqueued or refused"
    );
    assert_eq!(
        first_runs + dropped_first,
        made,
        "every task ran or was dropped"
    );
    assert_eq!(
        continuation_runs + dropped_continuations,
        continuations_made,
        "every continuation ran or was dropped"
    );
    // Nothing lost except by removal. Dropped unrun = refused enqueues + tasks removal dropped.
    // remove_stream's count also includes pending continuations it dropped; a continuation can
    // also be dropped uncounted when its stream is removed while its first part runs.
    let dropped_by_removal = dropped_first - refused;
    assert!(
        removed_dropped >= dropped_by_removal
            && removed_dropped <= dropped_by_removal + dropped_continuations,
        "remove_stream counted {removed_dropped}, but {dropped_by_removal} tasks and \
         {dropped_continuations} continuations were dropped"
    );
    assert_eq!(
        enqueued - dropped_by_removal,
        first_runs,
        "enqueued minus dropped by removal equals run"
    );

    // Order within a stream.
    let mut last_order: HashMap<StreamId, u64> = HashMap::new();
    let mut last_local: HashMap<(StreamId, usize), u64> = HashMap::new();
    let mut open_continuation: HashMap<StreamId, u64> = HashMap::new();
    let mut removed_with_open = 0;
    let live_set: std::collections::HashSet<StreamId> = live.iter().copied().collect();
    for (i, ev) in log.iter().enumerate() {
        if ev.continuation {
            assert_eq!(
                open_continuation.remove(&ev.stream),
                Some(ev.task),
                "event {i}: continuation of task {} without its first part just before, on {:?}",
                ev.task,
                ev.stream
            );
            continue;
        }
        if let Some(t) = open_continuation.get(&ev.stream) {
            panic!(
                "event {i}: task {} of {:?} ran before the continuation of task {t}",
                ev.task, ev.stream
            );
        }
        if let Some(prev) = last_order.insert(ev.stream, ev.order_num) {
            assert!(
                ev.order_num > prev,
                "event {i}: {:?} ran order number {} after {prev}",
                ev.stream,
                ev.order_num
            );
        }
        if ev.enqueuer != FROM_TASK
            && let Some(prev) = last_local.insert((ev.stream, ev.enqueuer), ev.local_seq)
        {
            assert!(
                ev.local_seq > prev,
                "event {i}: enqueuer {} on {:?}: task #{} ran after #{prev}",
                ev.enqueuer,
                ev.stream,
                ev.local_seq
            );
        }
        if ev.yields {
            open_continuation.insert(ev.stream, ev.task);
        }
    }
    for (stream, task) in &open_continuation {
        assert!(
            !live_set.contains(stream),
            "continuation of task {task} on live {stream:?} never ran"
        );
        removed_with_open += 1;
    }
    println!(
        "{removed_with_open} removed streams had a continuation pending; remove_stream counted \
         {} of them ({} dropped uncounted, their stream removed while the first part ran)",
        removed_dropped - dropped_by_removal,
        dropped_continuations - (removed_dropped - dropped_by_removal)
    );
}
