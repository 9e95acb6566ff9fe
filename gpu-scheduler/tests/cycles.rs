//! Issue 11, item 1: streams waiting on each other's tokens that are never released. Every wait
//! is fenced at a number of the releasing stream; when the releaser finishes a number and its
//! next one is past the fence, the wait is retired (Chromium's `SyncPointOrderData` rule), so a
//! cycle of such waits never stops the scheduler: every task runs, in stream order.
#![cfg(not(loom))] // std threads and Arcs; the loom models are tests/loom.rs

use std::sync::{Arc, Mutex};

use gpu_scheduler::{Priority, Scheduler, StreamId, Task};
use sync_points::{ClientId, SyncPointManager, SyncToken};

type Log = Arc<Mutex<Vec<String>>>;

fn cid(n: u64) -> ClientId {
    ClientId {
        namespace: 0,
        command_buffer_id: n,
    }
}

/// A task that appends `name` to the log.
fn push(log: &Log, name: String) -> Task {
    let log = log.clone();
    Task::simple(move || log.lock().unwrap().push(name))
}

/// `n` streams of `priority`, stream `i` with client `i`. Round `r` enqueues one task on each
/// stream in turn; in round 1 stream `i`'s task waits for client `i + 1`'s count 1 (mod `n`),
/// which no task ever releases. Order numbers: stream `i` gets `i + 1` and `n + i + 1`; the
/// wait of stream `i` is fenced at `n + i + 1`, between its releaser's two numbers. Returns the
/// scheduler, the streams and the log.
fn cycle(
    n: usize,
    priorities: &[Priority],
) -> (Arc<SyncPointManager>, Arc<Scheduler>, Vec<StreamId>, Log) {
    let sync = Arc::new(SyncPointManager::new());
    let s = Scheduler::new(sync.clone());
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let ids: Vec<StreamId> = (0..n)
        .map(|i| s.add_stream(priorities[i % priorities.len()]))
        .collect();
    for (i, id) in ids.iter().enumerate() {
        s.create_client(*id, cid(i as u64)).unwrap();
    }
    let mut expected = 1;
    for round in 0..2 {
        for (i, id) in ids.iter().enumerate() {
            let name = format!("{}{}", (b'A' + i as u8) as char, round + 1);
            let task = if round == 0 {
                push(&log, name)
            } else {
                let next = ((i + 1) % n) as u64;
                push(&log, name).wait_for([SyncToken::new(0, next, 1)])
            };
            assert_eq!(
                s.enqueue(*id, task).unwrap(),
                expected,
                "order numbers as documented"
            );
            expected += 1;
        }
    }
    (sync, s, ids, log)
}

/// Checks that every task ran, each stream's in its order, and that no token was released.
fn check_all_ran(sync: &SyncPointManager, s: &Scheduler, ids: &[StreamId], log: &Log, ran: usize) {
    let got = log.lock().unwrap().clone();
    assert_eq!(
        ran,
        2 * ids.len(),
        "{ran} of {} tasks ran: {got:?}",
        2 * ids.len()
    );
    for (i, id) in ids.iter().enumerate() {
        let name = |round: usize| format!("{}{}", (b'A' + i as u8) as char, round);
        let first = got.iter().position(|e| *e == name(1));
        let second = got.iter().position(|e| *e == name(2));
        assert!(
            matches!((first, second), (Some(a), Some(b)) if a < b),
            "stream {i} ran in order: {got:?}"
        );
        assert_eq!(s.pending_tasks(*id).unwrap(), 0);
        assert!(!sync.is_released(&SyncToken::new(0, i as u64, 1)));
        assert_eq!(
            s.sequence(*id).unwrap().pending_fences(),
            0,
            "no wait left on stream {i}"
        );
    }
}

/// A: 1, then 3 waits on B; B: 2, then 4 waits on A. A's wait is fenced at 3 on B (numbers 2
/// and 4), B's at 3 on A (numbers 1 and 3). When B finishes 2 its next number is 4, past the
/// fence at 3: A's wait is retired, A runs 3, which retires B's wait.
#[test]
fn two_streams_waiting_on_each_others_unreleased_tokens_all_run() {
    let (sync, s, ids, log) = cycle(2, &[Priority::Normal]);
    let ran = s.run_until_idle();
    check_all_ran(&sync, &s, &ids, &log, ran);
}

/// A: 1, 4 waits on B; B: 2, 5 waits on C; C: 3, 6 waits on A.
#[test]
fn three_streams_waiting_in_a_ring_on_unreleased_tokens_all_run() {
    let (sync, s, ids, log) = cycle(3, &[Priority::Normal]);
    let ran = s.run_until_idle();
    check_all_ran(&sync, &s, &ids, &log, ran);
}

/// The same rings with mixed priorities (priority inheritance raises each releaser to its
/// waiter's level, around the ring): nothing changes but the order.
#[test]
fn rings_of_mixed_priorities_all_run() {
    let mixed = [Priority::High, Priority::Low, Priority::Normal];
    for n in [2, 3] {
        let (sync, s, ids, log) = cycle(n, &mixed);
        let ran = s.run_until_idle();
        check_all_ran(&sync, &s, &ids, &log, ran);
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(
                s.scheduled_priority(*id).unwrap(),
                mixed[i % mixed.len()],
                "the raise reverted"
            );
        }
    }
}
