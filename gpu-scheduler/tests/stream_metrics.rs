//! Per-stream metrics: tasks, continuations, time waiting and running (on a manual clock, so
//! the durations are exact), the priority each task ran at (a raised stream counts under the
//! raised level, a downgraded one under the lower), and removed streams reported once.
#![cfg(not(loom))]

use std::sync::Arc;
use std::time::Duration;

use gpu_scheduler::{
    ManualClock, Priority, Scheduler, SchedulerConfig, SchedulerError, Task, TaskResult,
};
use sync_points::{ClientId, SyncPointManager, SyncToken};

fn setup_manual() -> (Arc<Scheduler>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new());
    let config = SchedulerConfig {
        clock: clock.clone(),
        ..SchedulerConfig::default()
    };
    (
        Scheduler::with_config(Arc::new(SyncPointManager::new()), config),
        clock,
    )
}

fn advancing(clock: &Arc<ManualClock>, ms: u64) -> Task {
    let clock = clock.clone();
    Task::simple(move || clock.advance(Duration::from_millis(ms)))
}

const MS: Duration = Duration::from_millis(1);

#[test]
fn each_stream_counts_its_own_tasks_waits_and_run_time() {
    let (s, clock) = setup_manual();
    let a = s.add_stream(Priority::Normal);
    let b = s.add_stream(Priority::Normal);
    s.enqueue(a, advancing(&clock, 2)).unwrap();
    s.enqueue(b, advancing(&clock, 3)).unwrap();
    s.enqueue(a, advancing(&clock, 1)).unwrap();
    // A task that yields once: one task, one continuation.
    let c = clock.clone();
    s.enqueue(
        b,
        Task::new(move |_| {
            c.advance(MS);
            let c = c.clone();
            TaskResult::continue_later(move |_| {
                c.advance(MS);
                TaskResult::Done
            })
        }),
    )
    .unwrap();
    clock.advance(Duration::from_millis(10)); // every task waited 10 ms before the driver began
    s.run_until_idle();

    let ma = s.stream_metrics(a).unwrap();
    let mb = s.stream_metrics(b).unwrap();
    assert_eq!((ma.tasks, ma.continuations), (2, 0));
    assert_eq!((mb.tasks, mb.continuations), (2, 1));
    assert_eq!(ma.time_run, 3 * MS);
    assert_eq!(mb.time_run, 5 * MS);
    // The driver runs a's batch (2 ms, 1 ms) first: a waited 10 and 12 ms; b 13 and 16 ms.
    assert_eq!(ma.time_waiting, 22 * MS);
    assert_eq!(ma.max_wait, 12 * MS);
    assert_eq!(ma.mean_wait(), Some(11 * MS));
    assert_eq!(mb.time_waiting, 29 * MS);
    assert_eq!(mb.max_wait, 16 * MS);
    assert_eq!(ma.tasks_at(Priority::Normal), 2);
    assert_eq!(ma.time_run_at[Priority::Normal.index()], 3 * MS);
    // The per-priority metrics are the sum.
    let m = s.metrics();
    assert_eq!(m.get(Priority::Normal).tasks, 4);
    assert_eq!(m.get(Priority::Normal).time_run, 8 * MS);
    // All streams at once, by id.
    let all = s.all_stream_metrics();
    assert_eq!(all, vec![(a, ma), (b, mb)]);
    // A stream that ran nothing.
    let idle = s.add_stream(Priority::Low);
    let mi = s.stream_metrics(idle).unwrap();
    assert_eq!(
        (mi.tasks, mi.time_run, mi.mean_wait()),
        (0, Duration::ZERO, None)
    );
}

#[test]
fn a_raised_stream_counts_its_tasks_under_the_priority_they_ran_at() {
    let sync = Arc::new(SyncPointManager::new());
    let s = Scheduler::new(sync);
    let releaser = s.add_stream(Priority::Low);
    let waiter = s.add_stream(Priority::High);
    let client = ClientId {
        namespace: 0,
        command_buffer_id: 1,
    };
    s.create_client(releaser, client).unwrap();
    // The releaser's first task runs raised to High (its waiter's priority), the second at its
    // own Low once the waiter no longer waits.
    s.enqueue(
        releaser,
        Task::new(move |ctx| {
            ctx.scheduler().sync_points().release(client, 1).unwrap();
            TaskResult::Done
        }),
    )
    .unwrap();
    s.enqueue(
        waiter,
        Task::simple(|| {}).wait_for([SyncToken::new(0, 1, 1)]),
    )
    .unwrap();
    assert_eq!(s.scheduled_priority(releaser).unwrap(), Priority::High);
    s.run_until_idle();
    s.enqueue(releaser, Task::simple(|| {})).unwrap();
    s.run_until_idle();

    let m = s.stream_metrics(releaser).unwrap();
    assert_eq!(m.tasks, 2);
    assert_eq!(m.tasks_at(Priority::High), 1, "{m:?}");
    assert_eq!(m.tasks_at(Priority::Low), 1, "{m:?}");
    let w = s.stream_metrics(waiter).unwrap();
    assert_eq!(w.tasks_at(Priority::High), 1);
    // Per priority, the raised task is under High with the waiter's.
    assert_eq!(s.metrics().get(Priority::High).tasks, 2);
    assert_eq!(s.metrics().get(Priority::Low).tasks, 1);
}

#[test]
fn a_downgraded_stream_counts_under_the_lower_level() {
    let (s, clock) = setup_manual();
    let a = s.add_stream(Priority::High);
    s.enqueue(a, advancing(&clock, 6)).unwrap(); // over the 5 ms slice: downgraded after
    s.enqueue(a, advancing(&clock, 1)).unwrap();
    assert_eq!(s.run_next(), Some(1));
    assert_eq!(s.scheduled_priority(a).unwrap(), Priority::Normal);
    s.run_until_idle();
    let m = s.stream_metrics(a).unwrap();
    assert_eq!(
        (m.tasks_at(Priority::High), m.tasks_at(Priority::Normal)),
        (1, 1)
    );
    assert_eq!(m.time_run_at[Priority::High.index()], 6 * MS);
    assert_eq!(m.time_run_at[Priority::Normal.index()], MS);
}

#[test]
fn a_removed_streams_metrics_come_once_with_its_removal() {
    let (s, clock) = setup_manual();
    let a = s.add_stream(Priority::Normal);
    for _ in 0..3 {
        s.enqueue(a, advancing(&clock, 2)).unwrap();
    }
    s.run_until_idle();
    s.enqueue(a, advancing(&clock, 2)).unwrap(); // dropped, never run: not counted
    let before = s.stream_metrics(a).unwrap();
    let removed = s.remove_stream(a).unwrap();
    assert_eq!(removed.dropped_tasks, 1);
    assert_eq!(removed.metrics, before);
    assert_eq!(
        (removed.metrics.tasks, removed.metrics.time_run),
        (3, 6 * MS)
    );
    // Then gone: nothing is kept for it.
    assert!(matches!(
        s.stream_metrics(a),
        Err(SchedulerError::UnknownStream(id)) if id == a
    ));
    assert!(s.all_stream_metrics().is_empty());
    // The per-priority metrics keep its runs.
    assert_eq!(s.metrics().get(Priority::Normal).tasks, 3);
}

#[test]
fn a_stream_removed_by_its_own_task_keeps_what_ran_before() {
    let (s, clock) = setup_manual();
    let a = s.add_stream(Priority::Normal);
    s.enqueue(a, advancing(&clock, 1)).unwrap();
    s.run_until_idle();
    let removed = Arc::new(std::sync::Mutex::new(None));
    let r = removed.clone();
    s.enqueue(
        a,
        Task::new(move |ctx| {
            *r.lock().unwrap() = Some(ctx.scheduler().remove_stream(ctx.stream()).unwrap());
            TaskResult::Done
        }),
    )
    .unwrap();
    s.run_until_idle();
    let removed = removed.lock().unwrap().take().unwrap();
    // The task that removed it was running: in no stream's report (documented).
    assert_eq!(removed.metrics.tasks, 1);
    assert!(s.stream_metrics(a).is_err());
}
