//! The seed's problem with real threads and real time: a flood of low-priority raster work must
//! not delay compositing and presentation.
//!
//! An IO thread enqueues a fixed workload at its scheduled times; the GPU main thread drives.
//!
//! * RealTime (presentation): one ~0.3 ms task per 16.7 ms frame for ~1.5 s.
//! * 2 Normal renderer streams: a ~1 ms task each per frame (offset by a few ms).
//! * Low raster: 800 ms of work, enqueued at once as 200 tasks of ~4 ms each; a raster task
//!   checks `should_yield` every 0.25 ms of work and returns `ContinueLater` when asked.
//!
//! The same workload runs through (a) one FIFO queue (a crossbeam channel of boxed closures run
//! in arrival order: the old behaviour) and (b) the scheduler. Printed: per-priority
//! enqueue-to-start delay p50/p99 and missed frames (a RealTime task that started more than one
//! frame after it was enqueued), and the acceptance check: with the scheduler, RealTime p99 delay
//! <= one time slice + one task.
//!
//! `cargo run --release -p gpusvc-gpu-scheduler --example raster_flood`

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use gpu_scheduler::{Priority, Scheduler, SchedulerConfig, Task, TaskContext, TaskResult};
use sync_points::SyncPointManager;

const FRAME: Duration = Duration::from_micros(16_667);
const FRAMES: u32 = 90; // ~1.5 s
const RT_WORK: Duration = Duration::from_micros(300);
const RENDERER_WORK: Duration = Duration::from_millis(1);
const RENDERERS: usize = 2;
const RASTER_TOTAL: Duration = Duration::from_millis(800);
const RASTER_TASK: Duration = Duration::from_millis(4);
/// Raster work between two `should_yield` checks (one "command batch").
const RASTER_CHECK_EVERY: Duration = Duration::from_micros(250);
/// When the flood arrives.
const FLOOD_AT: Duration = Duration::from_millis(100);

/// Which class a task belongs to (a row of the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    RealTime,
    Renderer(usize),
    Raster,
}

impl Class {
    fn priority(self) -> Priority {
        match self {
            Class::RealTime => Priority::RealTime,
            Class::Renderer(_) => Priority::Normal,
            Class::Raster => Priority::Low,
        }
    }
}

/// One task of the workload: enqueued `at` after the start, `work` long.
#[derive(Debug, Clone, Copy)]
struct Event {
    at: Duration,
    class: Class,
    work: Duration,
}

fn workload() -> Vec<Event> {
    let mut ev = Vec::new();
    for f in 0..FRAMES {
        let frame_start = FRAME * f;
        ev.push(Event {
            at: frame_start,
            class: Class::RealTime,
            work: RT_WORK,
        });
        for r in 0..RENDERERS {
            ev.push(Event {
                at: frame_start + Duration::from_millis(3 + 5 * r as u64),
                class: Class::Renderer(r),
                work: RENDERER_WORK,
            });
        }
    }
    let n = (RASTER_TOTAL.as_nanos() / RASTER_TASK.as_nanos()) as usize;
    for _ in 0..n {
        ev.push(Event {
            at: FLOOD_AT,
            class: Class::Raster,
            work: RASTER_TASK,
        });
    }
    ev.sort_by_key(|e| e.at);
    ev
}

/// Busy work standing in for GPU command processing.
fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Enqueue-to-start delays per priority (Low, Normal, High, RealTime).
#[derive(Debug, Default)]
struct Delays([Vec<Duration>; 4]);

type Shared = Arc<Mutex<Delays>>;

fn record(delays: &Shared, class: Class, enqueued: Instant) {
    let d = enqueued.elapsed();
    delays.lock().unwrap().0[class.priority().index()].push(d);
}

/// Sleeps until `start + at`, then enqueues each event with `enqueue`.
fn io_thread(start: Instant, events: Vec<Event>, mut enqueue: impl FnMut(Event)) {
    for e in events {
        let due = start + e.at;
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        enqueue(e);
    }
}

/// (a) The old behaviour: one FIFO, run in arrival order.
fn run_fifo(events: &[Event]) -> (Delays, Duration) {
    type Job = Box<dyn FnOnce() + Send>;
    let (tx, rx) = crossbeam_channel::unbounded::<Job>();
    let delays: Shared = Arc::default();
    let start = Instant::now();
    let io = {
        let (events, delays) = (events.to_vec(), delays.clone());
        thread::spawn(move || {
            io_thread(start, events, |e| {
                let (delays, enqueued) = (delays.clone(), Instant::now());
                tx.send(Box::new(move || {
                    record(&delays, e.class, enqueued);
                    spin(e.work);
                }))
                .unwrap();
            })
        })
    };
    // The GPU main thread: runs until the IO thread hung up and the queue is empty.
    for job in rx.iter() {
        job();
    }
    io.join().unwrap();
    let wall = start.elapsed();
    (Arc::try_unwrap(delays).unwrap().into_inner().unwrap(), wall)
}

/// A raster task with `left` work to do: works in `RASTER_CHECK_EVERY` steps and yields when
/// higher-priority work is waiting.
fn raster(left: Duration) -> impl FnOnce(&TaskContext<'_>) -> TaskResult + Send + 'static {
    move |ctx| {
        let mut left = left;
        while !left.is_zero() {
            let step = left.min(RASTER_CHECK_EVERY);
            spin(step);
            left -= step;
            if !left.is_zero() && ctx.should_yield() {
                return TaskResult::continue_later(raster(left));
            }
        }
        TaskResult::Done
    }
}

/// (b) The scheduler.
fn run_scheduler(events: &[Event], config: SchedulerConfig) -> (Delays, Duration, Arc<Scheduler>) {
    let sched = Scheduler::with_config(Arc::new(SyncPointManager::new()), config);
    let rt = sched.add_stream(Priority::RealTime);
    let renderers: Vec<_> = (0..RENDERERS)
        .map(|_| sched.add_stream(Priority::Normal))
        .collect();
    let raster_stream = sched.add_stream(Priority::Low);
    // Wakes the GPU thread when it is idle; disconnected when the IO thread is done.
    let (wake_tx, wake_rx) = crossbeam_channel::unbounded::<()>();
    let delays: Shared = Arc::default();
    let start = Instant::now();
    let io = {
        let (events, delays, sched) = (events.to_vec(), delays.clone(), sched.clone());
        thread::spawn(move || {
            io_thread(start, events, |e| {
                let (delays, enqueued) = (delays.clone(), Instant::now());
                let (stream, task) = match e.class {
                    Class::RealTime | Class::Renderer(_) => {
                        let stream = match e.class {
                            Class::Renderer(r) => renderers[r],
                            _ => rt,
                        };
                        let task = Task::simple(move || {
                            record(&delays, e.class, enqueued);
                            spin(e.work);
                        });
                        (stream, task)
                    }
                    Class::Raster => {
                        let rest = raster(e.work);
                        let task = Task::new(move |ctx| {
                            record(&delays, e.class, enqueued);
                            rest(ctx)
                        });
                        (raster_stream, task)
                    }
                };
                sched.enqueue(stream, task).unwrap();
                let _ = wake_tx.send(());
            })
        })
    };
    // The GPU main thread.
    let mut io_done = false;
    loop {
        if sched.run_next().is_some() {
            continue;
        }
        if io_done {
            break;
        }
        match wake_rx.recv_timeout(Duration::from_millis(5)) {
            Ok(()) => while wake_rx.try_recv().is_ok() {},
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            // The IO thread is done: one more pass drains what it enqueued last.
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => io_done = true,
        }
    }
    io.join().unwrap();
    let wall = start.elapsed();
    (
        Arc::try_unwrap(delays).unwrap().into_inner().unwrap(),
        wall,
        sched,
    )
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".into(), |d| format!("{:.2}", d.as_secs_f64() * 1e3))
}

struct Summary {
    p50: Option<Duration>,
    p99: Option<Duration>,
    max: Option<Duration>,
    n: usize,
}

fn summarize(v: &[Duration]) -> Summary {
    let mut s = v.to_vec();
    s.sort_unstable();
    Summary {
        p50: gpu_scheduler::percentile(&s, 50.0),
        p99: gpu_scheduler::percentile(&s, 99.0),
        max: s.last().copied(),
        n: s.len(),
    }
}

fn missed_frames(d: &Delays) -> usize {
    d.0[Priority::RealTime.index()]
        .iter()
        .filter(|d| **d > FRAME)
        .count()
}

fn main() {
    let events = workload();
    let config = SchedulerConfig::default();
    let slice = config.time_slice;
    let granularity = config.granularity;
    println!(
        "raster_flood: {FRAMES} frames of {:.1} ms; RealTime {:.1} ms/frame, {RENDERERS} Normal \
         renderers {:.1} ms/frame each, Low raster flood of {} ms as {} ms tasks at t={} ms \
         (should_yield checked every {} us)",
        FRAME.as_secs_f64() * 1e3,
        RT_WORK.as_secs_f64() * 1e3,
        RENDERER_WORK.as_secs_f64() * 1e3,
        RASTER_TOTAL.as_millis(),
        RASTER_TASK.as_millis(),
        FLOOD_AT.as_millis(),
        RASTER_CHECK_EVERY.as_micros(),
    );
    println!(
        "scheduler: time slice {:.1} ms, granularity {:.1} ms",
        slice.as_secs_f64() * 1e3,
        granularity.as_secs_f64() * 1e3
    );

    let (fifo, fifo_wall) = run_fifo(&events);
    let (ours, ours_wall, sched) = run_scheduler(&events, config);

    println!(
        "\n{:<10} {:<10} {:>6} {:>10} {:>10} {:>10} {:>8}",
        "queue", "priority", "tasks", "p50 ms", "p99 ms", "max ms", "missed"
    );
    for (name, d, wall) in [("FIFO", &fifo, fifo_wall), ("scheduler", &ours, ours_wall)] {
        for p in [Priority::RealTime, Priority::Normal, Priority::Low] {
            let s = summarize(&d.0[p.index()]);
            let missed = if p == Priority::RealTime {
                missed_frames(d).to_string()
            } else {
                "".into()
            };
            println!(
                "{:<10} {:<10} {:>6} {:>10} {:>10} {:>10} {:>8}",
                name,
                format!("{p:?}"),
                s.n,
                ms(s.p50),
                ms(s.p99),
                ms(s.max),
                missed
            );
        }
        println!("{:<10} wall {:.0} ms", name, wall.as_secs_f64() * 1e3);
    }

    let m = sched.metrics();
    let rt = m.get(Priority::RealTime);
    println!(
        "\nscheduler's own metrics, RealTime: {} tasks, delay p50 {} ms, p99 {} ms",
        rt.tasks,
        ms(rt.delay_p50),
        ms(rt.delay_p99)
    );

    let bound = slice + RASTER_TASK;
    let ours_p99 = summarize(&ours.0[Priority::RealTime.index()])
        .p99
        .unwrap_or_default();
    let fifo_p99 = summarize(&fifo.0[Priority::RealTime.index()])
        .p99
        .unwrap_or_default();
    let ok = ours_p99 <= bound;
    println!(
        "acceptance: scheduler RealTime p99 {:.2} ms <= time slice {:.1} ms + one task {:.1} ms \
         = {:.1} ms: {} (FIFO RealTime p99 {:.1} ms, missed frames FIFO {} vs scheduler {})",
        ours_p99.as_secs_f64() * 1e3,
        slice.as_secs_f64() * 1e3,
        RASTER_TASK.as_secs_f64() * 1e3,
        bound.as_secs_f64() * 1e3,
        if ok { "PASS" } else { "FAIL" },
        fifo_p99.as_secs_f64() * 1e3,
        missed_frames(&fifo),
        missed_frames(&ours),
    );
    if !ok {
        std::process::exit(1);
    }
}
