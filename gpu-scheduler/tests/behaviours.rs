//! One test per behaviour listed in the gpu-scheduler issue.
#![cfg(not(loom))] // std threads and Arcs; the loom models are tests/loom.rs

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpu_scheduler::{
    ManualClock, Priority, Scheduler, SchedulerConfig, StreamId, Task, TaskResult,
};
use sync_points::{ClientId, SyncPointManager, SyncToken};

type Log = Arc<Mutex<Vec<String>>>;

fn new_log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

fn note(log: &Log, s: &str) {
    log.lock().unwrap().push(s.to_string());
}

/// A task that appends `s` to the log.
fn push(log: &Log, s: &str) -> Task {
    let (log, s) = (log.clone(), s.to_string());
    Task::simple(move || log.lock().unwrap().push(s))
}

fn cid(n: u64) -> ClientId {
    ClientId {
        namespace: 0,
        command_buffer_id: n,
    }
}

fn token(n: u64, count: u64) -> SyncToken {
    SyncToken::new(0, n, count)
}

fn setup() -> (Arc<SyncPointManager>, Arc<Scheduler>) {
    let sync = Arc::new(SyncPointManager::new());
    (sync.clone(), Scheduler::new(sync))
}

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

/// A task that logs `s` and releases `count` on client `client`.
fn releasing(log: &Log, s: &str, client: u64, count: u64) -> Task {
    let (log, s) = (log.clone(), s.to_string());
    Task::new(move |ctx| {
        log.lock().unwrap().push(s);
        ctx.scheduler()
            .sync_points()
            .release(cid(client), count)
            .unwrap();
        TaskResult::Done
    })
}

#[test]
fn fifo_within_a_stream() {
    let (_sync, s) = setup();
    let log = new_log();
    let a = s.add_stream(Priority::Normal);
    for name in ["1", "2", "3", "4"] {
        s.enqueue(a, push(&log, name)).unwrap();
    }
    assert_eq!(s.run_until_idle(), 4);
    assert_eq!(entries(&log), ["1", "2", "3", "4"]);
}

#[test]
fn a_per_task_start_callback_runs_before_the_task() {
    let (_sync, s) = setup();
    let log = new_log();
    let a = s.add_stream(Priority::Normal);
    let l = log.clone();
    s.enqueue(a, push(&log, "task").on_start(move || note(&l, "start")))
        .unwrap();
    s.run_until_idle();
    assert_eq!(entries(&log), ["start", "task"]);
}

#[test]
fn a_continued_task_runs_first() {
    let (_sync, s) = setup();
    let log = new_log();
    let a = s.add_stream(Priority::Normal);
    let b = s.add_stream(Priority::Normal);
    let l = log.clone();
    let first_order = s
        .enqueue(
            a,
            Task::new(move |ctx| {
                note(&l, "1a");
                let order = ctx.order_num();
                let l = l.clone();
                TaskResult::continue_later(move |ctx| {
                    assert_eq!(ctx.order_num(), order, "same order number");
                    note(&l, "1b");
                    TaskResult::Done
                })
            }),
        )
        .unwrap();
    s.enqueue(a, push(&log, "2")).unwrap();
    s.enqueue(b, push(&log, "b")).unwrap();
    // The yield ends A's turn; B's turn; then A resumes with the rest of task 1.
    assert_eq!(s.run_until_idle(), 4);
    assert_eq!(entries(&log), ["1a", "b", "1b", "2"]);
    assert_eq!(s.sequence(a).unwrap().processed(), first_order + 1);
}

#[test]
fn streams_run_in_priority_order() {
    let (_sync, s) = setup();
    let log = new_log();
    for p in Priority::ALL {
        let id = s.add_stream(p);
        s.enqueue(id, push(&log, &format!("{p:?}"))).unwrap();
    }
    s.run_until_idle();
    assert_eq!(entries(&log), ["RealTime", "High", "Normal", "Low"]);
}

#[test]
fn equal_priorities_run_in_round_robin_order() {
    let (_sync, s) = setup();
    let log = new_log();
    let a = s.add_stream(Priority::Normal);
    let b = s.add_stream(Priority::Normal);
    // Each first task enqueues a second one on its own stream: not part of the turn it was
    // picked for, so the other stream goes first.
    for (id, name) in [(a, "a"), (b, "b")] {
        let l = log.clone();
        s.enqueue(
            id,
            Task::new(move |ctx| {
                note(&l, &format!("{name}1"));
                ctx.scheduler()
                    .enqueue(ctx.stream(), push(&l, &format!("{name}2")))
                    .unwrap();
                TaskResult::Done
            }),
        )
        .unwrap();
    }
    s.run_until_idle();
    assert_eq!(entries(&log), ["a1", "b1", "a2", "b2"]);
}

#[test]
fn a_waiter_runs_after_its_releaser() {
    let (_sync, s) = setup();
    let log = new_log();
    let r = s.add_stream(Priority::Low);
    let w = s.add_stream(Priority::High);
    s.create_client(r, cid(1)).unwrap();
    s.enqueue(r, releasing(&log, "release", 1, 1)).unwrap();
    s.enqueue(w, push(&log, "wait").wait_for([token(1, 1)]))
        .unwrap();
    s.enqueue(w, push(&log, "behind")).unwrap();
    assert_eq!(s.run_until_idle(), 3);
    assert_eq!(entries(&log), ["release", "wait", "behind"]);
}

#[test]
fn a_releaser_outside_the_scheduler_is_honoured() {
    let (sync, s) = setup();
    let log = new_log();
    let host = sync.create_sequence();
    sync.create_client(cid(9), host.id()).unwrap();
    let n = host.generate().unwrap();
    let w = s.add_stream(Priority::Normal);
    s.enqueue(w, push(&log, "wait").wait_for([token(9, 1)]))
        .unwrap();
    assert_eq!(s.run_until_idle(), 0, "blocked until the host releases");
    let sync2 = sync.clone();
    std::thread::spawn(move || {
        host.begin_processing(n).unwrap();
        sync2.release(cid(9), 1).unwrap();
        host.finish_processing(n).unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(s.run_until_idle(), 1);
    assert_eq!(entries(&log), ["wait"]);
}

#[test]
fn a_wait_that_can_never_be_released_does_not_block() {
    let (_sync, s) = setup();
    let log = new_log();
    let r = s.add_stream(Priority::Normal);
    let w = s.add_stream(Priority::High);
    s.create_client(r, cid(1)).unwrap();
    // R's only task before the waiter does not release: the wait is retired when it finishes.
    s.enqueue(r, push(&log, "r")).unwrap();
    s.enqueue(w, push(&log, "w1").wait_for([token(1, 5)]))
        .unwrap();
    // A token of an unknown client, and one whose releaser has nothing before the waiter.
    s.enqueue(w, push(&log, "w2").wait_for([token(77, 1), token(1, 9)]))
        .unwrap();
    assert_eq!(s.run_until_idle(), 3);
    assert_eq!(entries(&log), ["r", "w1", "w2"]);
}

#[test]
fn the_releaser_is_raised_to_its_waiters_priority_and_no_higher() {
    let (_sync, s) = setup();
    let log = new_log();
    let _rt = s.add_stream(Priority::RealTime);
    let r = s.add_stream(Priority::Low);
    let n = s.add_stream(Priority::Normal);
    let w = s.add_stream(Priority::High);
    s.create_client(r, cid(1)).unwrap();
    s.enqueue(r, releasing(&log, "r", 1, 1)).unwrap();
    s.enqueue(n, push(&log, "n")).unwrap();
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::Low);
    s.enqueue(w, push(&log, "w").wait_for([token(1, 1)]))
        .unwrap();
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::High);
    assert_eq!(s.base_priority(r).unwrap(), Priority::Low);
    s.run_until_idle();
    // Raised above the Normal stream, then the waiter.
    assert_eq!(entries(&log), ["r", "w", "n"]);
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::Low, "reverted");
}

#[test]
fn the_raise_reverts_when_the_waiter_is_destroyed() {
    let (_sync, s) = setup();
    let r = s.add_stream(Priority::Low);
    let w = s.add_stream(Priority::RealTime);
    s.create_client(r, cid(1)).unwrap();
    s.enqueue(r, Task::simple(|| {})).unwrap();
    s.enqueue(w, Task::simple(|| {}).wait_for([token(1, 1)]))
        .unwrap();
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::RealTime);
    s.remove_stream(w).unwrap();
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::Low);
}

#[test]
fn a_circular_release_chain_across_3_streams_completes() {
    let (_sync, s) = setup();
    let log = new_log();
    let ids: Vec<StreamId> = [Priority::High, Priority::Normal, Priority::Low]
        .into_iter()
        .map(|p| s.add_stream(p))
        .collect();
    for (i, id) in ids.iter().enumerate() {
        s.create_client(*id, cid(i as u64)).unwrap();
        s.set_enabled(*id, false).unwrap();
    }
    // Stream i waits on stream i+1's release, then releases its own: A -> B -> C -> A.
    for (i, id) in ids.iter().enumerate() {
        let next = ((i + 1) % 3) as u64;
        s.enqueue(
            *id,
            push(&log, &format!("wait{i}")).wait_for([token(next, 1)]),
        )
        .unwrap();
        s.enqueue(*id, releasing(&log, &format!("release{i}"), i as u64, 1))
            .unwrap();
    }
    for id in ids.iter().rev() {
        s.set_enabled(*id, true).unwrap();
    }
    assert_eq!(s.run_until_idle(), 6);
    let mut got = entries(&log);
    got.sort();
    assert_eq!(got.len(), 6);
    for (id, p) in ids
        .iter()
        .zip([Priority::High, Priority::Normal, Priority::Low])
    {
        assert_eq!(s.scheduled_priority(*id).unwrap(), p);
    }
}

#[test]
fn waiting_on_oneself_does_not_block() {
    let (_sync, s) = setup();
    let log = new_log();
    let a = s.add_stream(Priority::Normal);
    s.create_client(a, cid(1)).unwrap();
    s.enqueue(a, push(&log, "self").wait_for([token(1, 1)]))
        .unwrap();
    assert_eq!(s.run_until_idle(), 1);
    assert_eq!(entries(&log), ["self"]);
    assert_eq!(s.scheduled_priority(a).unwrap(), Priority::Normal);
}

#[test]
fn should_yield_is_false_for_dependent_work_and_true_after_the_release() {
    let (_sync, s) = setup();
    let l = s.add_stream(Priority::Low);
    let h = s.add_stream(Priority::High);
    s.create_client(l, cid(1)).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    s.enqueue(
        l,
        Task::new(move |ctx| {
            seen2.lock().unwrap().push(ctx.should_yield());
            ctx.scheduler().sync_points().release(cid(1), 1).unwrap();
            seen2.lock().unwrap().push(ctx.should_yield());
            TaskResult::Done
        }),
    )
    .unwrap();
    s.enqueue(h, Task::simple(|| {}).wait_for([token(1, 1)]))
        .unwrap();
    assert_eq!(s.run_until_idle(), 2);
    assert_eq!(*seen.lock().unwrap(), [false, true]);
}

#[test]
fn enabling_a_stream_from_inside_a_task_does_not_deadlock() {
    let (_sync, s) = setup();
    let log = new_log();
    let a = s.add_stream(Priority::Normal);
    let b = s.add_stream(Priority::High);
    s.set_enabled(b, false).unwrap();
    s.enqueue(b, push(&log, "b")).unwrap();
    let l = log.clone();
    s.enqueue(
        a,
        Task::new(move |ctx| {
            note(&l, "a");
            ctx.scheduler().set_enabled(b, true).unwrap();
            ctx.scheduler().enqueue(b, push(&l, "b2")).unwrap();
            TaskResult::Done
        }),
    )
    .unwrap();
    assert_eq!(s.run_until_idle(), 3);
    assert_eq!(entries(&log), ["a", "b", "b2"]);
}

fn advancing(clock: &Arc<ManualClock>, ms: u64) -> Task {
    let clock = clock.clone();
    Task::simple(move || clock.advance(Duration::from_millis(ms)))
}

#[test]
fn time_slice_downgrade_and_reset() {
    let (s, clock) = setup_manual();
    let a = s.add_stream(Priority::High);
    let other = s.add_stream(Priority::Normal);
    let log = new_log();
    s.enqueue(other, push(&log, "other")).unwrap();
    s.enqueue(a, advancing(&clock, 6)).unwrap();
    s.enqueue(a, advancing(&clock, 6)).unwrap();
    assert_eq!(s.run_next(), Some(1), "the slice ends the turn");
    assert_eq!(s.scheduled_priority(a).unwrap(), Priority::Normal);
    // Requeued at the back of Normal, behind the Normal stream that was already waiting.
    s.run_next();
    assert_eq!(entries(&log), ["other"]);
    s.run_next();
    assert_eq!(s.scheduled_priority(a).unwrap(), Priority::Low);
    s.enqueue(a, advancing(&clock, 1)).unwrap();
    s.run_next();
    assert_eq!(s.scheduled_priority(a).unwrap(), Priority::High, "reset");
}

#[test]
fn real_time_is_never_downgraded() {
    let (s, clock) = setup_manual();
    let a = s.add_stream(Priority::RealTime);
    for _ in 0..3 {
        s.enqueue(a, advancing(&clock, 50)).unwrap();
    }
    assert_eq!(s.run_until_idle(), 3);
    assert_eq!(s.scheduled_priority(a).unwrap(), Priority::RealTime);
}

#[test]
fn the_slice_is_cut_when_higher_priority_arrives() {
    let (s, clock) = setup_manual();
    let log = new_log();
    let low = s.add_stream(Priority::Low);
    let high = s.add_stream(Priority::High);
    // Control: 2 ms of a 5 ms slice leaves room for the next task in the same turn.
    s.enqueue(low, advancing(&clock, 2)).unwrap();
    s.enqueue(low, Task::simple(|| {})).unwrap();
    assert_eq!(s.run_next(), Some(2));
    // Now the first task makes High work arrive, then runs 2 ms > the 1 ms granularity.
    let (l, c, yielded) = (log.clone(), clock.clone(), Arc::new(AtomicBool::new(false)));
    let y = yielded.clone();
    s.enqueue(
        low,
        Task::new(move |ctx| {
            note(&l, "t1");
            ctx.scheduler().enqueue(high, push(&l, "high")).unwrap();
            y.store(ctx.should_yield(), Ordering::SeqCst);
            c.advance(Duration::from_millis(2));
            TaskResult::Done
        }),
    )
    .unwrap();
    s.enqueue(low, push(&log, "t2")).unwrap();
    assert_eq!(s.run_next(), Some(1), "cut after t1");
    assert!(yielded.load(Ordering::SeqCst));
    s.run_until_idle();
    assert_eq!(entries(&log), ["t1", "high", "t2"]);
}

#[test]
fn disabled_streams_never_run() {
    let (_sync, s) = setup();
    let ran = Arc::new(AtomicUsize::new(0));
    let a = s.add_stream(Priority::RealTime);
    s.set_enabled(a, false).unwrap();
    for _ in 0..3 {
        let r = ran.clone();
        s.enqueue(
            a,
            Task::simple(move || {
                r.fetch_add(1, Ordering::SeqCst);
            }),
        )
        .unwrap();
    }
    assert_eq!(s.run_until_idle(), 0);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(s.pending_tasks(a).unwrap(), 3);
}

#[test]
fn removing_a_stream_drops_its_tasks_and_the_priority_it_lent() {
    let (_sync, s) = setup();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = s.add_stream(Priority::Low);
    let w = s.add_stream(Priority::High);
    s.create_client(r, cid(1)).unwrap();
    s.enqueue(r, Task::simple(|| {})).unwrap();
    for _ in 0..3 {
        let c = ran.clone();
        s.enqueue(
            w,
            Task::simple(move || {
                c.fetch_add(1, Ordering::SeqCst);
            })
            .wait_for([token(1, 1)]),
        )
        .unwrap();
    }
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::High);
    let removed = s.remove_stream(w).unwrap();
    assert_eq!(removed.dropped_tasks, 3);
    assert_eq!(removed.lent_priority, Some(Priority::High));
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::Low);
    assert!(s.enqueue(w, Task::simple(|| {})).is_err());
    assert_eq!(s.run_until_idle(), 1);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[test]
fn metrics_per_priority_are_readable_and_pushed() {
    let pushed = Arc::new(AtomicUsize::new(0));
    let p = pushed.clone();
    let config = SchedulerConfig {
        metrics_callback: Some(Arc::new(move |_| {
            p.fetch_add(1, Ordering::SeqCst);
        })),
        ..SchedulerConfig::default()
    };
    let s = Scheduler::with_config(Arc::new(SyncPointManager::new()), config);
    let a = s.add_stream(Priority::High);
    for _ in 0..9 {
        s.enqueue(a, Task::simple(|| {})).unwrap();
    }
    s.enqueue(
        a,
        Task::new(|_| TaskResult::continue_later(|_| TaskResult::Done)),
    )
    .unwrap();
    assert_eq!(s.run_until_idle(), 11);
    let m = s.metrics();
    assert_eq!(m.get(Priority::High).tasks, 10);
    assert_eq!(m.get(Priority::High).continuations, 1);
    assert!(m.get(Priority::High).delay_p50.is_some());
    assert!(m.get(Priority::High).delay_p99 >= m.get(Priority::High).delay_p50);
    assert_eq!(m.get(Priority::Low).tasks, 0);
    assert_eq!(pushed.load(Ordering::SeqCst), 11, "one sample per run");
}

#[test]
fn a_refused_enqueue_gives_the_task_back() {
    let (_sync, s) = setup();
    let a = s.add_stream(Priority::Normal);
    let log = new_log();
    let (err, task) = s
        .try_enqueue(StreamId(a.0 + 1000), push(&log, "given back"))
        .expect_err("unknown stream");
    assert_eq!(
        err,
        gpu_scheduler::SchedulerError::UnknownStream(StreamId(a.0 + 1000))
    );
    s.enqueue(a, task).unwrap();
    s.run_until_idle();
    assert_eq!(entries(&log), ["given back"]);
}

#[test]
fn a_client_made_on_a_streams_sequence_directly_lends_priority_too() {
    let (sync, s) = setup();
    let log = new_log();
    let r = s.add_stream(Priority::Low);
    let n = s.add_stream(Priority::Normal);
    let w = s.add_stream(Priority::High);
    // Through the sync-point manager, not Scheduler::create_client.
    let seq = s.sequence(r).unwrap().id();
    sync.create_client(cid(1), seq).unwrap();
    s.enqueue(r, releasing(&log, "r", 1, 1)).unwrap();
    s.enqueue(n, push(&log, "n")).unwrap();
    s.enqueue(w, push(&log, "w").wait_for([token(1, 1)]))
        .unwrap();
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::High);
    s.run_until_idle();
    assert_eq!(entries(&log), ["r", "w", "n"]);
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::Low, "reverted");
}

#[test]
fn a_panicking_task_leaves_the_scheduler_consistent() {
    let (_sync, s) = setup();
    let log = new_log();
    let a = s.add_stream(Priority::Normal);
    let b = s.add_stream(Priority::Low);
    s.enqueue(a, push(&log, "a1")).unwrap();
    let panicking = s
        .enqueue(a, Task::simple(|| panic!("task failed")))
        .unwrap();
    s.enqueue(a, push(&log, "a3")).unwrap();
    s.enqueue(b, push(&log, "b1")).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.run_until_idle()));
    assert!(caught.is_err(), "the panic reaches the driver");
    assert_eq!(entries(&log), ["a1"]);
    let seq = s.sequence(a).unwrap();
    assert_eq!(
        seq.processed(),
        panicking,
        "the panicking task's number was finished"
    );
    assert!(!seq.is_processing());
    assert_eq!(s.pending_tasks(a).unwrap(), 1, "the unrun rest went back");
    s.enqueue(a, push(&log, "a4")).unwrap();
    s.run_until_idle();
    assert_eq!(entries(&log), ["a1", "a3", "a4", "b1"]);
}

#[test]
fn a_raised_stream_is_queued_by_the_age_of_its_front_task() {
    let (_sync, s) = setup();
    let log = new_log();
    let r = s.add_stream(Priority::Low);
    let [h0, h1, h2, w] = [(); 4].map(|_| s.add_stream(Priority::High));
    s.create_client(r, cid(1)).unwrap();
    // h0 joins High before R's task is enqueued, h1 and h2 after it.
    s.enqueue(h0, push(&log, "h0")).unwrap();
    s.enqueue(r, releasing(&log, "r", 1, 1)).unwrap();
    s.enqueue(h1, push(&log, "h1")).unwrap();
    s.enqueue(h2, push(&log, "h2")).unwrap();
    // W's wait raises R to High: R's older task goes ahead of h1 and h2, not of h0. (W, once
    // released, joins High at the back.)
    s.enqueue(w, push(&log, "w").wait_for([token(1, 1)]))
        .unwrap();
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::High);
    assert_eq!(s.run_until_idle(), 5);
    assert_eq!(entries(&log), ["h0", "r", "h1", "h2", "w"]);
}

#[test]
fn disabling_a_waiter_ends_its_loan_at_once() {
    let (_sync, s) = setup();
    let r = s.add_stream(Priority::Low);
    let w = s.add_stream(Priority::High);
    s.create_client(r, cid(1)).unwrap();
    s.enqueue(r, Task::simple(|| {})).unwrap();
    s.enqueue(w, Task::simple(|| {}).wait_for([token(1, 1)]))
        .unwrap();
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::High);
    // A disabled stream lends nothing (as its removal would end the loan) ...
    s.set_enabled(w, false).unwrap();
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::Low);
    // ... until it is enabled again, its wait still pending.
    s.set_enabled(w, true).unwrap();
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::High);
    assert_eq!(s.run_until_idle(), 2);
    assert_eq!(s.scheduled_priority(r).unwrap(), Priority::Low);
}

#[test]
fn a_stream_downgraded_by_its_slices_and_lifted_back_by_a_waiter_does_not_jump_the_queue() {
    let (s, clock) = setup_manual();
    let log = new_log();
    // F floods at Normal; one long turn downgrades it to Low.
    let f = s.add_stream(Priority::Normal);
    let c = clock.clone();
    s.enqueue(
        f,
        Task::simple(move || c.advance(Duration::from_millis(20))),
    )
    .unwrap();
    s.run_next();
    assert_eq!(s.scheduled_priority(f).unwrap(), Priority::Low);
    s.create_client(f, cid(7)).unwrap();
    s.enqueue(f, releasing(&log, "f", 7, 1)).unwrap();
    // Two Normal streams queue after F's backlog was enqueued.
    let [n1, n2] = [(); 2].map(|_| s.add_stream(Priority::Normal));
    s.enqueue(n1, push(&log, "n1")).unwrap();
    s.enqueue(n2, push(&log, "n2")).unwrap();
    // A Normal waiter lifts F back to Normal: its base, not above it, so no queue jump.
    let w = s.add_stream(Priority::Normal);
    s.enqueue(w, push(&log, "w").wait_for([token(7, 1)]))
        .unwrap();
    assert_eq!(s.scheduled_priority(f).unwrap(), Priority::Normal);
    s.run_until_idle();
    assert_eq!(entries(&log), ["n1", "n2", "f", "w"]);
}

/// Issue 12: the scheduler owns the clients it creates — removing their stream destroys them
/// (a wait on one ends, its tokens read as released, its id is free again); a client made
/// directly on the stream's sequence through the sync-point manager stays the caller's.
#[test]
fn removing_a_stream_destroys_the_clients_made_on_it() {
    let (sync, s) = setup();
    let r = s.add_stream(Priority::Normal);
    let client = s.create_client(r, cid(1)).unwrap();
    sync.create_client(cid(2), s.sequence(r).unwrap().id())
        .unwrap();
    let ended = Arc::new(AtomicUsize::new(0));
    let e = ended.clone();
    assert!(sync.on_release(&token(1, 1), move || {
        e.fetch_add(1, Ordering::SeqCst);
    }));
    assert!(!sync.is_released(&token(1, 1)));
    s.remove_stream(r).unwrap();
    assert!(sync.client(cid(1)).is_none(), "destroyed with its stream");
    assert!(client.release(1).is_err(), "the handle reads as destroyed");
    assert_eq!(ended.load(Ordering::SeqCst), 1, "the wait on it ended");
    assert!(sync.is_released(&token(1, 1)));
    assert!(sync.client(cid(2)).is_some(), "not the scheduler's");
    // The id is free: a client made on another stream with it is that stream's, and is not
    // destroyed again by anything left of the first.
    let other = s.add_stream(Priority::Normal);
    s.create_client(other, cid(1)).unwrap();
    assert!(sync.client(cid(1)).is_some());
}

/// Issue 12: at shutdown and when the scheduler is dropped its clients are destroyed; a client
/// the scheduler made that was destroyed through the manager, and then made again by someone
/// else under the same id, is not the scheduler's any more and survives.
#[test]
fn shutdown_and_drop_destroy_the_schedulers_clients_and_only_those() {
    let sync = Arc::new(SyncPointManager::new());
    let s = Scheduler::new(sync.clone());
    let a = s.add_stream(Priority::Normal);
    s.create_client(a, cid(1)).unwrap();
    s.create_client(a, cid(2)).unwrap();
    // Client 2 destroyed by its id and made again by the host on a sequence of its own.
    assert!(sync.destroy_client(cid(2)));
    let host = sync.create_sequence();
    sync.create_client(cid(2), host.id()).unwrap();
    s.shutdown();
    assert!(sync.client(cid(1)).is_none(), "destroyed at shutdown");
    assert!(
        sync.client(cid(2)).is_some(),
        "the host's client is left alone"
    );
    // A destroy by id of a client the scheduler already destroyed is harmless (the C ABI did
    // its own at scheduler free).
    assert!(!sync.destroy_client(cid(1)));

    let s = Scheduler::new(sync.clone());
    let b = s.add_stream(Priority::Low);
    s.create_client(b, cid(3)).unwrap();
    drop(s);
    assert!(
        sync.client(cid(3)).is_none(),
        "destroyed when the scheduler is dropped"
    );
    assert!(sync.client(cid(2)).is_some());
}

/// Issue 12 review: a client the scheduler made and the host destroyed through the sync-point
/// manager is not kept by the scheduler — create+destroy cycles on one stream hold memory for
/// the live clients only, not for every client the stream ever had. The clients still live are
/// still the scheduler's and destroyed with the stream.
#[test]
fn clients_destroyed_through_the_manager_are_not_kept_by_their_stream() {
    let (sync, s) = setup();
    let r = s.add_stream(Priority::Normal);
    let kept = s.create_client(r, cid(0)).unwrap();
    let first = s.create_client(r, cid(1)).unwrap();
    assert!(sync.destroy_client(cid(1)));
    for _ in 0..1000 {
        s.create_client(r, cid(1)).unwrap();
        assert!(sync.destroy_client(cid(1)));
    }
    assert_eq!(
        Arc::strong_count(&first),
        1,
        "the first destroyed client is held by this test alone"
    );
    let slots = s.owned_client_slots(r).unwrap();
    assert!(slots <= 8, "{slots} client slots for 1 live client");
    assert_eq!(Arc::strong_count(&kept), 3, "test, manager and scheduler");
    s.remove_stream(r).unwrap();
    assert!(
        sync.client(cid(0)).is_none(),
        "the live one is destroyed with its stream"
    );
    assert_eq!(Arc::strong_count(&kept), 1);
}

/// Issue 12: a time slice shorter than the granularity is refused by the config itself (the C
/// ABI checked it on its own); the defaults and an equal slice are fine.
#[test]
fn a_time_slice_shorter_than_the_granularity_is_refused() {
    use gpu_scheduler::{ConfigError, SchedulerConfig};
    assert_eq!(SchedulerConfig::default().validate(), Ok(()));
    let bad = SchedulerConfig {
        time_slice: Duration::from_micros(500),
        granularity: Duration::from_millis(1),
        ..SchedulerConfig::default()
    };
    let expected = ConfigError::SliceShorterThanGranularity {
        time_slice: Duration::from_micros(500),
        granularity: Duration::from_millis(1),
    };
    assert_eq!(bad.validate(), Err(expected.clone()));
    assert_eq!(
        expected.to_string(),
        "time slice 500µs is shorter than the granularity 1ms"
    );
    let sync = Arc::new(SyncPointManager::new());
    assert_eq!(
        Scheduler::try_with_config(sync.clone(), bad).unwrap_err(),
        expected
    );
    let equal = SchedulerConfig {
        time_slice: Duration::from_millis(1),
        granularity: Duration::from_millis(1),
        ..SchedulerConfig::default()
    };
    assert_eq!(equal.validate(), Ok(()));
    let s = Scheduler::try_with_config(sync, equal).unwrap();
    assert!(!s.is_shut_down());
}
