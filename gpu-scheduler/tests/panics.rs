//! A panic around a task — in its start callback, or in the metrics callback after a yield —
//! settles the turn: no order number stays begun or paused forever, nothing else is
//! lost, and the scheduler stays drivable.
#![cfg(not(loom))] // std threads and Arcs; the loom models are tests/loom.rs

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use gpu_scheduler::{Priority, Scheduler, SchedulerConfig, Task, TaskResult};
use sync_points::SyncPointManager;

type Log = Arc<Mutex<Vec<String>>>;

fn push(log: &Log, s: &str) -> Task {
    let (log, s) = (log.clone(), s.to_string());
    Task::simple(move || log.lock().unwrap().push(s))
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

fn quiet<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    catch_unwind(AssertUnwindSafe(f))
}

#[test]
fn a_panicking_start_callback_leaves_no_order_number_begun() {
    let s = Scheduler::new(Arc::new(SyncPointManager::new()));
    let log: Log = Arc::default();
    let a = s.add_stream(Priority::Normal);
    s.enqueue(a, push(&log, "a1").on_start(|| panic!("start failed")))
        .unwrap();
    s.enqueue(a, push(&log, "a2")).unwrap();
    assert!(quiet(|| s.run_until_idle()).is_err());
    let seq = s.sequence(a).unwrap();
    assert!(!seq.is_processing(), "the claimed number was left begun");
    s.run_until_idle();
    assert_eq!(entries(&log), ["a2"], "the stream goes on");
    assert!(!seq.is_processing());
}

#[test]
fn a_panicking_metrics_callback_after_a_yield_loses_nothing() {
    let panic_once = Arc::new(AtomicBool::new(true));
    let p = panic_once.clone();
    let config = SchedulerConfig {
        metrics_callback: Some(Arc::new(move |_sample: &gpu_scheduler::TaskSample| {
            if p.swap(false, Ordering::SeqCst) {
                panic!("metrics failed");
            }
        })),
        ..SchedulerConfig::default()
    };
    let s = Scheduler::with_config(Arc::new(SyncPointManager::new()), config);
    let log: Log = Arc::default();
    let a = s.add_stream(Priority::Normal);
    let l = log.clone();
    s.enqueue(
        a,
        Task::new(move |_| {
            l.lock().unwrap().push("part 1".into());
            let l = l.clone();
            TaskResult::ContinueLater(Box::new(move |_| {
                l.lock().unwrap().push("part 2".into());
                TaskResult::Done
            }))
        }),
    )
    .unwrap();
    s.enqueue(a, push(&log, "a2")).unwrap();
    assert!(quiet(|| s.run_until_idle()).is_err());
    s.run_until_idle();
    assert_eq!(
        entries(&log),
        ["part 1", "part 2", "a2"],
        "the rest of the yielded task ran"
    );
    assert!(!s.sequence(a).unwrap().is_processing());
}
