//! The cost of a priority-inheritance change against the number of streams, side by side in one
//! process: ours (incremental propagation along the wait graph) vs the from-scratch fixed point
//! that recomputed every stream on every change (the algorithm before issue 11, kept in the
//! crate as the oracle of ours and switched on here with the hidden `set_legacy_rules`).
//!
//! The workload (seeded, the same for both sides; the run queue and everything else is the same
//! code): `N` streams of random priority (40 % Low, 40 % Normal, 15 % High, 5 % RealTime), each
//! with its own client. `ROUNDS` rounds; in each, every stream (in a shuffled order) gets one
//! task that, half the time, waits on another random stream's token of this round, releases its
//! own when it runs, and a quarter of the time yields once (`ContinueLater`) before releasing.
//! Enqueueing registers the waits (the releaser of about half of them has not run yet: a loan),
//! then the driver runs until idle; every `N / 64` turns a random stream is removed (its tasks
//! dropped, waits on it retired, its loans ended) and a fresh one added. A change is one call of
//! the scheduler's priority propagation (a wait registered or ended, a stream removed, an own
//! priority changed), counted by the scheduler.
//!
//! Printed: per `N`, the time per change (the whole workload's time divided by its changes:
//! enqueueing, running and removing included), ours and the baseline, and how the time per
//! change grows with `N`. `cargo bench -p gpusvc-gpu-scheduler --bench streams`; writes
//! `target/bench/gpu_scheduler_streams.json`.

use bench_support as support;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use gpu_scheduler::{
    ManualClock, Priority, Scheduler, SchedulerConfig, StreamId, Task, TaskResult,
};
use support::Row;
use sync_points::{ClientId, SyncPointManager, SyncToken};

const SIZES: [usize; 4] = [1_000, 5_000, 10_000, 20_000];
const ROUNDS: u64 = 3;
const SEED: u64 = 11;
/// Runs of ours per size; the baseline runs `BASE_REPS` times up to 5k streams, once above.
const REPS: usize = 7;
const BASE_REPS: usize = 3;

#[path = "../support/splitmix.rs"]
mod splitmix;
use splitmix::Rng;

fn cid(n: u64) -> ClientId {
    ClientId {
        namespace: 0,
        command_buffer_id: n,
    }
}

fn priority(rng: &mut Rng) -> Priority {
    match rng.below(100) {
        0..40 => Priority::Low,
        40..80 => Priority::Normal,
        80..95 => Priority::High,
        _ => Priority::RealTime,
    }
}

/// A stream of `sched` with client `client` bound to its sequence.
fn stream(sched: &Scheduler, rng: &mut Rng, client: u64) -> (StreamId, u64) {
    let id = sched.add_stream(priority(rng));
    sched.create_client(id, cid(client)).unwrap();
    (id, client)
}

/// A task releasing `count` on `client`, after yielding once if `yields`.
fn releasing(client: u64, count: u64, yields: bool) -> Task {
    let release = move |ctx: &gpu_scheduler::TaskContext<'_>| {
        // A client whose stream was removed is gone: nothing to release.
        let _ = ctx.scheduler().sync_points().release(cid(client), count);
        TaskResult::Done
    };
    if yields {
        Task::new(move |_| TaskResult::continue_later(release))
    } else {
        Task::new(release)
    }
}

/// Runs the workload on `n` streams; returns (seconds, (changes, task runs), streams visited).
fn workload(n: usize, from_scratch: bool) -> (f64, (u64, usize), u64) {
    let mut rng = Rng(SEED ^ n as u64);
    // A clock that never moves: no turn is ever cut or downgraded by how long the baseline's
    // recomputations take, so both sides make the same turns.
    let config = SchedulerConfig {
        clock: Arc::new(ManualClock::new()),
        ..SchedulerConfig::default()
    };
    let sched = Scheduler::with_config(Arc::new(SyncPointManager::new()), config);
    sched.set_legacy_rules(from_scratch, false);
    let mut next_client = 0;
    let mut streams: Vec<(StreamId, u64)> = (0..n)
        .map(|_| {
            next_client += 1;
            stream(&sched, &mut rng, next_client)
        })
        .collect();
    let (changes_before, visits_before) = sched.priority_work();
    let remove_every = (n / 64).max(1);
    let start = Instant::now();
    let mut runs = 0;
    let mut turns = 0;
    for round in 1..=ROUNDS {
        let mut order: Vec<usize> = (0..streams.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        for i in order {
            let (id, client) = streams[i];
            let mut task = releasing(client, round, rng.chance(25));
            if rng.chance(50) {
                let (_, other) = streams[rng.below(streams.len())];
                if other != client {
                    task = task.wait_for([SyncToken::new(0, other, round)]);
                }
            }
            sched.enqueue(id, task).unwrap();
        }
        while let Some(k) = sched.run_next() {
            runs += k;
            turns += 1;
            if turns % remove_every == 0 {
                let i = rng.below(streams.len());
                sched.remove_stream(streams[i].0).unwrap();
                next_client += 1;
                streams[i] = stream(&sched, &mut rng, next_client);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let (changes, visits) = sched.priority_work();
    black_box(&sched);
    (
        secs,
        (changes - changes_before, runs),
        visits - visits_before,
    )
}

fn main() {
    println!(
        "streams: {ROUNDS} rounds of one task per stream (half wait on another stream's token, a \
         quarter yield once), a stream removed and replaced every N/64 turns; seed {SEED}"
    );
    println!(
        "\n{:>7} {:>8} {:>8} {:>10} {:>10} {:>11} {:>11} {:>10} {:>10}",
        "streams",
        "changes",
        "runs",
        "ours s",
        "base s",
        "ours us/ch",
        "base us/ch",
        "ours vis/ch",
        "base vis/ch"
    );
    let mut rows = Vec::new();
    let mut per_change = Vec::new();
    for n in SIZES {
        // Medians of the runs, interleaved.
        let base_reps = if n <= 5_000 { BASE_REPS } else { 1 };
        let mut ours = Vec::new();
        let mut base = Vec::new();
        let mut counts = Vec::new();
        let mut visits = (0, 0);
        for i in 0..REPS {
            let (s, c, v) = workload(n, false);
            ours.push(s);
            counts.push(c);
            visits.0 = v;
            if i < base_reps {
                let (s, c, v) = workload(n, true);
                base.push(s);
                counts.push(c);
                visits.1 = v;
            }
        }
        // Same rules, same seed, a clock that stands still: every run is the same execution.
        assert!(
            counts.windows(2).all(|w| w[0] == w[1]),
            "runs diverged at {n}: {counts:?}"
        );
        let (changes, runs) = counts[0];
        let (ours_s, base_s) = (support::median(&mut ours), support::median(&mut base));
        let ours = ours_s * 1e6 / changes as f64;
        let baseline = base_s * 1e6 / changes as f64;
        let (ov, bv) = (
            visits.0 as f64 / changes as f64,
            visits.1 as f64 / changes as f64,
        );
        println!(
            "{n:>7} {changes:>8} {runs:>8} {ours_s:>10.4} {base_s:>10.4} {ours:>11.3} \
             {baseline:>11.3} {ov:>10.1} {bv:>10.0}"
        );
        per_change.push((n, ours, baseline));
        rows.push(Row {
            metric: format!("priority_change_{}k_streams", n / 1000),
            unit: "us/change",
            ours,
            baseline,
            ratio_note: "incremental propagation / from-scratch recomputation (the old algorithm)",
        });
        rows.push(Row {
            metric: format!("streams_visited_per_change_{}k_streams", n / 1000),
            unit: "streams/change",
            ours: ov,
            baseline: bv,
            ratio_note: "streams (and edges) looked at by propagation, per change",
        });
    }
    let (n0, o0, b0) = per_change[0];
    println!(
        "\ngrowth of the time per change (whole workload / changes) vs {}k streams:",
        n0 / 1000
    );
    for (n, o, b) in &per_change {
        println!(
            "  {:>2}k streams ({:>4.0}x): ours {:>6.2}x, baseline {:>7.2}x",
            n / 1000,
            *n as f64 / n0 as f64,
            o / o0,
            b / b0
        );
    }
    support::report("gpu_scheduler_streams", &rows);
}
