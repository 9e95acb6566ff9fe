//! The scheduler's motivating problem (Chromium's GPU scheduler design), with real threads and
//! real time: a flood of low-priority raster work must not delay compositing and presentation.
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
//! A second scenario measures the queue-order rule for a stream raised by priority
//! inheritance, in virtual time (the scheduler runs on a [`ManualClock`] that the tasks' work
//! advances, and events are enqueued as the clock reaches them: exact and repeatable, however
//! loaded the machine): each frame a Low "upload" stream gets a 1 ms task at +5 ms that
//! releases a token, and a High client a 0.5 ms task at +7 ms that waits on it (raising the
//! upload stream to High) and is due by the frame's end; busy High "UI" streams get work
//! either all at +6 ms (2 ms each) or at random times through the frame (0.75 ms, 4 per frame
//! each); presentation and 2 Normal renderers as above, a Low raster flood underneath. Each
//! load runs with the raised stream queued at the back of High (the rule before issue 11) and
//! by the age of its front task (the rule since); printed: each class's delay and the client's
//! missed frames (its task finished after its frame's end).
//!
//! `cargo run --release -p gpusvc-gpu-scheduler --example raster_flood`

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use gpu_scheduler::{
    Clock, ManualClock, Priority, Scheduler, SchedulerConfig, StreamId, Task, TaskContext,
    TaskResult,
};
use sync_points::{ClientId, SyncPointManager, SyncToken};

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

/// Which class a task belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    RealTime,
    Renderer(usize),
    Raster,
    /// The inheritance scenario's Low stream whose task releases the client's token.
    Upload,
    /// The inheritance scenario's busy High streams.
    Ui(usize),
    /// The inheritance scenario's High client waiting on the upload's token.
    Client,
}

impl Class {
    fn priority(self) -> Priority {
        match self {
            Class::RealTime => Priority::RealTime,
            Class::Renderer(_) => Priority::Normal,
            Class::Raster | Class::Upload => Priority::Low,
            Class::Ui(_) | Class::Client => Priority::High,
        }
    }

    /// Its row of the tables ([`ROWS`]).
    fn row(self) -> usize {
        match self {
            Class::RealTime => 0,
            Class::Renderer(_) => 1,
            Class::Raster => 2,
            Class::Upload => 3,
            Class::Ui(_) => 4,
            Class::Client => 5,
        }
    }
}

/// The rows: (name, priority).
const ROWS: [(&str, &str); 6] = [
    ("present", "RealTime"),
    ("renderers", "Normal"),
    ("raster", "Low"),
    ("upload", "Low"),
    ("busy UI", "High"),
    ("client", "High"),
];

/// One task of the workload: enqueued `at` after the start, `work` long, in frame `frame`.
#[derive(Debug, Clone, Copy)]
struct Event {
    at: Duration,
    class: Class,
    work: Duration,
    frame: u32,
}

fn workload() -> Vec<Event> {
    let mut ev = Vec::new();
    for f in 0..FRAMES {
        let frame_start = FRAME * f;
        ev.push(Event {
            at: frame_start,
            class: Class::RealTime,
            work: RT_WORK,
            frame: f,
        });
        for r in 0..RENDERERS {
            ev.push(Event {
                at: frame_start + Duration::from_millis(3 + 5 * r as u64),
                class: Class::Renderer(r),
                work: RENDERER_WORK,
                frame: f,
            });
        }
    }
    let n = (RASTER_TOTAL.as_nanos() / RASTER_TASK.as_nanos()) as usize;
    for _ in 0..n {
        ev.push(Event {
            at: FLOOD_AT,
            class: Class::Raster,
            work: RASTER_TASK,
            frame: 0,
        });
    }
    ev.sort_by_key(|e| e.at);
    ev
}

/// The inheritance scenario: frames simulated (virtual time), and its raster flood: a 4 ms task
/// every 8 ms, more than the frames leave, so the Low level always has work.
const INH_FRAMES: u32 = 600;
const INH_RASTER_EVERY: Duration = Duration::from_millis(8);
const UPLOAD_AT: Duration = Duration::from_millis(5);
const UPLOAD_WORK: Duration = Duration::from_millis(1);
const CLIENT_AT: Duration = Duration::from_millis(7);
const CLIENT_WORK: Duration = Duration::from_micros(500);

/// The busy High UI streams of the inheritance scenario.
#[derive(Debug, Clone, Copy)]
struct UiLoad {
    streams: usize,
    /// Tasks per stream per frame, one in each of `per_frame` equal slots of the frame: at
    /// `at` into the frame when `at` is given, else at a random point of its slot (seeded).
    per_frame: u32,
    at: Option<Duration>,
    work: Duration,
}

impl UiLoad {
    fn describe(&self) -> String {
        format!(
            "{} x {}/frame {:.2} ms{}",
            self.streams,
            self.per_frame,
            self.work.as_secs_f64() * 1e3,
            if self.at.is_some() { "" } else { " rnd" }
        )
    }
}

/// The loads measured: every UI task of a frame at once (2 ms each, at +6 ms, just after the
/// upload task: the High level holds them when the client's wait raises the upload stream,
/// and nothing new arrives meanwhile); and UI streams that keep getting work through the frame
/// at random times (0.75 ms, 4 per frame each), so High work arrives while the raised stream
/// waits.
const UI_LOADS: [UiLoad; 4] = [
    UiLoad {
        streams: 2,
        per_frame: 1,
        at: Some(Duration::from_millis(6)),
        work: Duration::from_millis(2),
    },
    UiLoad {
        streams: 4,
        per_frame: 1,
        at: Some(Duration::from_millis(6)),
        work: Duration::from_millis(2),
    },
    UiLoad {
        streams: 3,
        per_frame: 4,
        at: None,
        work: Duration::from_micros(750),
    },
    UiLoad {
        streams: 4,
        per_frame: 4,
        at: None,
        work: Duration::from_micros(750),
    },
];

// splitmix64, for the random arrival times (seeded: every run the same).
#[path = "../support/splitmix.rs"]
mod splitmix;
use splitmix::Rng;

/// The inheritance scenario with the `ui` load (see the module docs).
fn inheritance_workload(ui: UiLoad) -> Vec<Event> {
    let mut rng = Rng(11);
    let mut ev = Vec::new();
    let end = FRAME * INH_FRAMES;
    let mut t = Duration::ZERO;
    while t < end {
        ev.push(Event {
            at: t,
            class: Class::Raster,
            work: RASTER_TASK,
            frame: 0,
        });
        t += INH_RASTER_EVERY;
    }
    for f in 0..INH_FRAMES {
        let frame_start = FRAME * f;
        let at = |d: Duration, class: Class, work: Duration| Event {
            at: frame_start + d,
            class,
            work,
            frame: f,
        };
        ev.push(at(Duration::ZERO, Class::RealTime, RT_WORK));
        for r in 0..RENDERERS {
            let d = Duration::from_millis(3 + 5 * r as u64);
            ev.push(at(d, Class::Renderer(r), RENDERER_WORK));
        }
        ev.push(at(UPLOAD_AT, Class::Upload, UPLOAD_WORK));
        let slot = FRAME / ui.per_frame;
        for u in 0..ui.streams {
            for k in 0..ui.per_frame {
                let d = slot * k + ui.at.unwrap_or_else(|| rng.within(slot));
                ev.push(at(d, Class::Ui(u), ui.work));
            }
        }
        ev.push(at(CLIENT_AT, Class::Client, CLIENT_WORK));
    }
    // Stable: same-time events keep the order above.
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

/// Where a run's time comes from: the machine's clock (work is busy-spun: the real-time runs),
/// or virtual time (work advances the scheduler's [`ManualClock`]: the inheritance scenario,
/// exact and repeatable however loaded the machine is).
trait Time: Send + Sync {
    /// Since the run's start.
    fn now(&self) -> Duration;
    /// Does `d` of work.
    fn work(&self, d: Duration);
}

/// The machine's clock, from the run's start.
struct WallTime(Instant);

impl Time for WallTime {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }

    fn work(&self, d: Duration) {
        spin(d);
    }
}

/// Virtual time: the scheduler's clock, moved by the tasks' work and, when nothing is runnable,
/// by the driver to the next event. The IO thread's role is played by `inject`: each event is
/// enqueued when the clock reaches its time, also in the middle of a task's work.
struct VirtualTime {
    clock: Arc<ManualClock>,
    due: Mutex<VecDeque<Event>>,
    inject: OnceLock<Box<dyn Fn(Event) + Send + Sync>>,
}

impl VirtualTime {
    fn next_at(&self) -> Option<Duration> {
        self.due.lock().unwrap().front().map(|e| e.at)
    }

    /// Enqueues the events due by now.
    fn inject_due(&self) {
        loop {
            let e = {
                let mut due = self.due.lock().unwrap();
                match due.front() {
                    Some(e) if e.at <= self.now() => due.pop_front(),
                    _ => None,
                }
            };
            let Some(e) = e else {
                return;
            };
            (self.inject.get().expect("set before the run"))(e);
        }
    }

    fn advance_to(&self, t: Duration) {
        self.clock.advance(t.saturating_sub(self.now()));
    }
}

impl Time for VirtualTime {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.clock.now_ns())
    }

    fn work(&self, d: Duration) {
        let end = self.now() + d;
        loop {
            self.inject_due();
            if self.now() >= end {
                return;
            }
            self.advance_to(self.next_at().map_or(end, |at| at.min(end)));
        }
    }
}

/// Enqueue-to-start delays per row ([`ROWS`]), and the client's missed frames.
#[derive(Debug, Default)]
struct Delays {
    rows: [Vec<Duration>; ROWS.len()],
    client_missed: usize,
}

type Shared = Arc<Mutex<Delays>>;

/// Records a start now of a task of `class` enqueued at `enqueued`.
fn record(delays: &Shared, class: Class, enqueued: Duration, time: &dyn Time) {
    let d = time.now().saturating_sub(enqueued);
    delays.lock().unwrap().rows[class.row()].push(d);
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
    let time: Arc<dyn Time> = Arc::new(WallTime(start));
    let io = {
        let (events, delays, time) = (events.to_vec(), delays.clone(), time.clone());
        thread::spawn(move || {
            io_thread(start, events, |e| {
                let (delays, time, enqueued) = (delays.clone(), time.clone(), time.now());
                tx.send(Box::new(move || {
                    record(&delays, e.class, enqueued, &*time);
                    time.work(e.work);
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
fn raster(
    left: Duration,
    time: Arc<dyn Time>,
) -> impl FnOnce(&TaskContext<'_>) -> TaskResult + Send + 'static {
    move |ctx| {
        let mut left = left;
        while !left.is_zero() {
            let step = left.min(RASTER_CHECK_EVERY);
            time.work(step);
            left -= step;
            if !left.is_zero() && ctx.should_yield() {
                return TaskResult::continue_later(raster(left, time));
            }
        }
        TaskResult::Done
    }
}

/// The upload stream's client (its token `frame + 1` is the client's wait of that frame).
const UPLOAD_CLIENT: ClientId = ClientId {
    namespace: 0,
    command_buffer_id: 1,
};

/// The streams of a scheduler run, one per class (per renderer, per UI stream).
struct Streams {
    rt: StreamId,
    renderers: Vec<StreamId>,
    raster: StreamId,
    upload: StreamId,
    uis: Vec<StreamId>,
    client: StreamId,
}

fn add_streams(sched: &Scheduler, events: &[Event]) -> Streams {
    let upload = sched.add_stream(Class::Upload.priority());
    sched.create_client(upload, UPLOAD_CLIENT).unwrap();
    let ui_streams = events
        .iter()
        .filter_map(|e| match e.class {
            Class::Ui(u) => Some(u + 1),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    Streams {
        rt: sched.add_stream(Class::RealTime.priority()),
        renderers: (0..RENDERERS)
            .map(|r| sched.add_stream(Class::Renderer(r).priority()))
            .collect(),
        raster: sched.add_stream(Class::Raster.priority()),
        upload,
        uis: (0..ui_streams)
            .map(|u| sched.add_stream(Class::Ui(u).priority()))
            .collect(),
        client: sched.add_stream(Class::Client.priority()),
    }
}

/// The task of event `e`, enqueued now, and its stream.
fn task_for(e: Event, s: &Streams, delays: &Shared, time: &Arc<dyn Time>) -> (StreamId, Task) {
    let (delays, time, enqueued) = (delays.clone(), time.clone(), time.now());
    match e.class {
        Class::RealTime | Class::Renderer(_) | Class::Ui(_) => {
            let stream = match e.class {
                Class::Renderer(r) => s.renderers[r],
                Class::Ui(u) => s.uis[u],
                _ => s.rt,
            };
            let task = Task::simple(move || {
                record(&delays, e.class, enqueued, &*time);
                time.work(e.work);
            });
            (stream, task)
        }
        Class::Upload => {
            let task = Task::new(move |ctx| {
                record(&delays, e.class, enqueued, &*time);
                time.work(e.work);
                let sync = ctx.scheduler().sync_points();
                sync.release(UPLOAD_CLIENT, u64::from(e.frame) + 1).unwrap();
                TaskResult::Done
            });
            (s.upload, task)
        }
        Class::Client => {
            // Its frame ends at the next vsync.
            let deadline = FRAME * (e.frame + 1);
            let task = Task::simple(move || {
                record(&delays, e.class, enqueued, &*time);
                time.work(e.work);
                if time.now() > deadline {
                    delays.lock().unwrap().client_missed += 1;
                }
            })
            .wait_for([SyncToken::new(
                UPLOAD_CLIENT.namespace,
                UPLOAD_CLIENT.command_buffer_id,
                u64::from(e.frame) + 1,
            )]);
            (s.client, task)
        }
        Class::Raster => {
            let rest = raster(e.work, time.clone());
            let task = Task::new(move |ctx| {
                record(&delays, e.class, enqueued, &*time);
                rest(ctx)
            });
            (s.raster, task)
        }
    }
}

/// (b) The scheduler, in real time: an IO thread enqueues, this thread drives.
fn run_scheduler(events: &[Event], config: SchedulerConfig) -> (Delays, Duration, Arc<Scheduler>) {
    let sched = Scheduler::with_config(Arc::new(SyncPointManager::new()), config);
    let streams = add_streams(&sched, events);
    // Wakes the GPU thread when it is idle; disconnected when the IO thread is done.
    let (wake_tx, wake_rx) = crossbeam_channel::unbounded::<()>();
    let delays: Shared = Arc::default();
    let start = Instant::now();
    let time: Arc<dyn Time> = Arc::new(WallTime(start));
    let io = {
        let (events, delays, sched) = (events.to_vec(), delays.clone(), sched.clone());
        thread::spawn(move || {
            io_thread(start, events, |e| {
                let (stream, task) = task_for(e, &streams, &delays, &time);
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

/// (c) The scheduler in virtual time (see [`VirtualTime`]), with default slices;
/// `raised_to_back`: queue a stream raised by inheritance at the back of its new level (the
/// rule before issue 11) instead of by the age of its front task.
fn run_virtual(events: &[Event], raised_to_back: bool) -> Delays {
    let clock = Arc::new(ManualClock::new());
    let config = SchedulerConfig {
        clock: clock.clone(),
        ..SchedulerConfig::default()
    };
    let sched = Scheduler::with_config(Arc::new(SyncPointManager::new()), config);
    sched.set_legacy_rules(false, raised_to_back);
    let streams = add_streams(&sched, events);
    let delays: Shared = Arc::default();
    let vt = Arc::new(VirtualTime {
        clock,
        due: Mutex::new(events.iter().copied().collect()),
        inject: OnceLock::new(),
    });
    {
        let (sched, vt_weak, delays) =
            (Arc::downgrade(&sched), Arc::downgrade(&vt), delays.clone());
        let inject = move |e: Event| {
            if let (Some(sched), Some(vt)) = (sched.upgrade(), vt_weak.upgrade()) {
                let time: Arc<dyn Time> = vt;
                let (stream, task) = task_for(e, &streams, &delays, &time);
                sched.enqueue(stream, task).unwrap();
            }
        };
        assert!(vt.inject.set(Box::new(inject)).is_ok());
    }
    loop {
        vt.inject_due();
        if sched.run_next().is_some() {
            continue;
        }
        match vt.next_at() {
            Some(at) => vt.advance_to(at),
            None => break,
        }
    }
    drop(sched);
    std::mem::take(&mut *delays.lock().unwrap())
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
    d.rows[Class::RealTime.row()]
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
        for class in [Class::RealTime, Class::Renderer(0), Class::Raster] {
            let s = summarize(&d.rows[class.row()]);
            let missed = if class == Class::RealTime {
                missed_frames(d).to_string()
            } else {
                "".into()
            };
            println!(
                "{:<10} {:<10} {:>6} {:>10} {:>10} {:>10} {:>8}",
                name,
                ROWS[class.row()].1,
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
    let ours_p99 = summarize(&ours.rows[Class::RealTime.row()])
        .p99
        .unwrap_or_default();
    let fifo_p99 = summarize(&fifo.rows[Class::RealTime.row()])
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
    inheritance();
    if !ok {
        std::process::exit(1);
    }
}

/// The inheritance scenario (see the module docs) under both queue-order rules, in virtual
/// time.
fn inheritance() {
    println!(
        "\ninheritance (virtual time: exact, repeatable): each frame a Low upload task ({:.1} ms, \
         at +{} ms) releases the token a High client task ({:.1} ms, at +{} ms, due by the \
         frame's end) waits on; busy High UI streams as listed (rnd: random times); \
         presentation and renderers as above; a Low raster flood (a {} ms task every {} ms); \
         {INH_FRAMES} frames",
        UPLOAD_WORK.as_secs_f64() * 1e3,
        UPLOAD_AT.as_millis(),
        CLIENT_WORK.as_secs_f64() * 1e3,
        CLIENT_AT.as_millis(),
        RASTER_TASK.as_millis(),
        INH_RASTER_EVERY.as_millis(),
    );
    println!(
        "{:<22} {:<16} {:<10} {:<9} {:>6} {:>8} {:>8} {:>8} {:>7}",
        "busy UI (High)",
        "raised stream",
        "class",
        "priority",
        "tasks",
        "p50 ms",
        "p99 ms",
        "max ms",
        "missed"
    );
    for ui in UI_LOADS {
        let events = inheritance_workload(ui);
        for (rule, to_back) in [("at the back", true), ("by age (default)", false)] {
            let d = run_virtual(&events, to_back);
            for class in [Class::Client, Class::Upload, Class::Ui(0), Class::RealTime] {
                let s = summarize(&d.rows[class.row()]);
                let missed = match class {
                    Class::Client => d.client_missed.to_string(),
                    Class::RealTime => missed_frames(&d).to_string(),
                    _ => String::new(),
                };
                let (name, priority) = ROWS[class.row()];
                println!(
                    "{:<22} {:<16} {:<10} {:<9} {:>6} {:>8} {:>8} {:>8} {:>7}",
                    ui.describe(),
                    rule,
                    name,
                    priority,
                    s.n,
                    ms(s.p50),
                    ms(s.p99),
                    ms(s.max),
                    missed
                );
            }
        }
    }
}
