//! `Scheduler::shutdown`, from inside a task and from outside: nothing more runs, every pending
//! task is dropped exactly once (the C ABI's `destroy`), and the scheduler refuses new work.
#![cfg(not(loom))] // std threads and Arcs; the loom models are tests/loom.rs

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gpu_scheduler::{Priority, Scheduler, SchedulerError, Task, TaskResult};
use sync_points::{SyncPointManager, SyncToken};

/// Counts how often a task ran and how often its closure was dropped.
#[derive(Default)]
struct Probe {
    runs: AtomicUsize,
    drops: AtomicUsize,
}

/// Dropped with the closure that owns it.
struct OnDrop(Arc<Probe>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted(p: &Arc<Probe>) -> Task {
    let guard = OnDrop(p.clone());
    Task::simple(move || {
        guard.0.runs.fetch_add(1, Ordering::SeqCst);
    })
}

fn setup() -> Arc<Scheduler> {
    Scheduler::new(Arc::new(SyncPointManager::new()))
}

#[test]
fn a_shutdown_from_inside_a_task_runs_nothing_more_and_drops_each_task_once() {
    let s = setup();
    let (a, b) = (s.add_stream(Priority::High), s.add_stream(Priority::Normal));
    let probes: Vec<Arc<Probe>> = (0..10).map(|_| Arc::default()).collect();
    let first = Arc::new(Probe::default());
    let guard = OnDrop(first.clone());
    let dropped = Arc::new(AtomicUsize::new(usize::MAX));
    let d = dropped.clone();
    s.enqueue(
        a,
        Task::new(move |ctx| {
            guard.0.runs.fetch_add(1, Ordering::SeqCst);
            d.store(ctx.scheduler().shutdown(), Ordering::SeqCst);
            TaskResult::Done
        }),
    )
    .unwrap();
    for p in &probes[..5] {
        s.enqueue(a, counted(p)).unwrap();
    }
    // Some behind a wait that is never released: dropped too.
    for p in &probes[5..] {
        let t = counted(p).wait_for([SyncToken::new(0, 99, 1)]);
        s.enqueue(b, t).unwrap();
    }
    assert_eq!(s.run_until_idle(), 1);
    assert_eq!(first.runs.load(Ordering::SeqCst), 1);
    assert_eq!(first.drops.load(Ordering::SeqCst), 1);
    for p in &probes {
        assert_eq!(
            p.runs.load(Ordering::SeqCst),
            0,
            "a task ran after the shutdown"
        );
        assert_eq!(p.drops.load(Ordering::SeqCst), 1, "dropped exactly once");
    }
    assert_eq!(dropped.load(Ordering::SeqCst), 10);
    assert!(s.is_shut_down());
    assert_eq!(s.run_next(), None);
}

#[test]
fn a_task_that_keeps_continuing_stops_at_shutdown() {
    let s = setup();
    let a = s.add_stream(Priority::Normal);
    let probe = Arc::new(Probe::default());

    /// Counts a run and continues with the same probe and guard (the guard travels with the
    /// continuation, so it is dropped when the last continuation is).
    fn again(guard: OnDrop) -> TaskResult {
        let n = guard.0.runs.fetch_add(1, Ordering::SeqCst) + 1;
        TaskResult::ContinueLater(Box::new(move |ctx| {
            if n == 3 {
                ctx.scheduler().shutdown();
            }
            again(guard)
        }))
    }
    let g = OnDrop(probe.clone());
    s.enqueue(a, Task::new(move |_| again(g))).unwrap();
    // Without the shutdown this would never return.
    assert_eq!(s.run_until_idle(), 4);
    assert_eq!(probe.runs.load(Ordering::SeqCst), 4);
    assert_eq!(probe.drops.load(Ordering::SeqCst), 1);
}

#[test]
fn after_a_shutdown_new_work_is_refused_and_handed_back() {
    let s = setup();
    let a = s.add_stream(Priority::Normal);
    let probe = Arc::new(Probe::default());
    s.enqueue(a, counted(&probe)).unwrap();
    assert_eq!(s.shutdown(), 1);
    assert_eq!(probe.drops.load(Ordering::SeqCst), 1);
    assert_eq!(s.shutdown(), 0, "a second call does nothing");
    let late = Arc::new(Probe::default());
    match s.try_enqueue(a, counted(&late)) {
        Err((SchedulerError::ShutDown, task)) => drop(task),
        other => panic!("{:?}", other.map_err(|(e, _)| e)),
    }
    assert_eq!(late.drops.load(Ordering::SeqCst), 1);
    let b = s.add_stream(Priority::High);
    assert!(matches!(
        s.pending_tasks(b),
        Err(SchedulerError::UnknownStream(_))
    ));
    assert_eq!(s.run_until_idle(), 0);
    assert_eq!(
        probe.runs.load(Ordering::SeqCst) + late.runs.load(Ordering::SeqCst),
        0
    );
}

#[test]
fn a_shutdown_from_another_thread_stops_the_driver_after_its_task() {
    let s = setup();
    let a = s.add_stream(Priority::Normal);
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let blocker = Task::simple(move || {
        started_tx.send(()).unwrap();
        go_rx.recv().unwrap();
    });
    s.enqueue(a, blocker).unwrap();
    let probes: Vec<Arc<Probe>> = (0..5).map(|_| Arc::default()).collect();
    for p in &probes {
        s.enqueue(a, counted(p)).unwrap();
    }
    let driver = {
        let s = s.clone();
        std::thread::spawn(move || s.run_until_idle())
    };
    started_rx.recv().unwrap();
    assert_eq!(s.shutdown(), 5);
    go_tx.send(()).unwrap();
    assert_eq!(driver.join().unwrap(), 1);
    for p in &probes {
        assert_eq!(
            (
                p.runs.load(Ordering::SeqCst),
                p.drops.load(Ordering::SeqCst)
            ),
            (0, 1)
        );
    }
}

/// Shutdown from another thread with several streams: once `shutdown` is called, the driver
/// claims nothing more, whatever order the streams are removed in (a removed stream's task may
/// run code on drop that lets the driver go on).
#[test]
fn a_shutdown_stops_the_driver_before_any_stream_is_removed() {
    for _ in 0..20 {
        let s = setup();
        let a = s.add_stream(Priority::High);
        let b = s.add_stream(Priority::Normal);
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let (b_gone_tx, b_gone_rx) = std::sync::mpsc::channel::<()>();
        // A's first task returns once B's task was dropped by the shutdown (or after 100 ms).
        s.enqueue(
            a,
            Task::simple(move || {
                started_tx.send(()).unwrap();
                let _ = b_gone_rx.recv_timeout(std::time::Duration::from_millis(100));
            }),
        )
        .unwrap();
        let late: Vec<Arc<Probe>> = (0..5).map(|_| Arc::default()).collect();
        for p in &late {
            s.enqueue(a, counted(p)).unwrap();
        }
        // B's task, dropped by the shutdown: lets A's task return, then gives the driver time.
        struct Signal(Option<std::sync::mpsc::Sender<()>>);
        impl Drop for Signal {
            fn drop(&mut self) {
                if let Some(tx) = self.0.take() {
                    let _ = tx.send(());
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
        let signal = Signal(Some(b_gone_tx));
        s.enqueue(
            b,
            Task::simple(move || {
                let _keep = &signal;
            }),
        )
        .unwrap();
        let driver = {
            let s = s.clone();
            std::thread::spawn(move || s.run_until_idle())
        };
        started_rx.recv().unwrap();
        s.shutdown();
        driver.join().unwrap();
        for p in &late {
            assert_eq!(
                p.runs.load(Ordering::SeqCst),
                0,
                "a task ran after shutdown()"
            );
            assert_eq!(p.drops.load(Ordering::SeqCst), 1);
        }
    }
}
