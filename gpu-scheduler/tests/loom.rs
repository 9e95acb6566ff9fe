//! loom models of enqueue / run / remove / enable / release racing across threads.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p
//! gpusvc-gpu-scheduler --test loom` (own target dir: `CARGO_TARGET_DIR=target/loom`; add
//! `-- --nocapture` to see each model's iteration count and time). The scheduler's locks and
//! atomics and those of `sync-points` are loom's under `--cfg loom`, so every interleaving of
//! their critical sections is explored, not only whole API calls (see `tests/concurrency.rs`).
//!
//! Every model is two threads — one racing an API call against one driving `run_next` a bounded
//! number of times — over one or two streams and two or three tasks; the main thread then drains
//! what is left (`run_until_idle`) and checks:
//! * every task closure runs at most once (a probe captured in it records the run, and records
//!   a drop without a run), and within a stream in enqueue (order number) order;
//! * nothing is lost except by removal: runs + closures dropped unrun == tasks enqueued, and the
//!   ones dropped unrun are exactly `RemovedStream::dropped_tasks` (a task the driver had already
//!   taken when the stream was removed still runs, as documented, and is not counted there);
//! * the model-specific ordering (release before its waiter, continuation before a later task);
//! * loom's own checks: no deadlock, and no leaked loom `Arc` (the scheduler is dropped at the
//!   end of each model, which destroys its streams' sequences).
//!
//! The bookkeeping that only one thread writes before the joins (probes, run log) uses `std`
//! types: loom runs the model threads one at a time on one OS thread, and std types add no
//! schedule points, so the explored interleavings are only those of the scheduler and
//! `sync-points`. The one thing read across threads before the joins — the racing thread's
//! flag, recorded by each run — is a loom atomic: loom's partial-order reduction only tells
//! apart interleavings whose loom operations conflict, so a std flag would be read at an
//! arbitrary one of several orders loom deems equivalent.
//!
//! The scheduler runs on the system clock with an hour-long time slice and granularity, so no
//! turn is ever cut or downgraded by real time (which loom could not replay).
#![cfg(loom)]

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize as StdAtomicUsize;
use std::sync::{Arc as StdArc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use gpu_scheduler::{
    Priority, Scheduler, SchedulerConfig, SchedulerError, StreamId, Task, TaskContext, TaskResult,
};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use sync_points::{ClientId, ReleaseOutcome, SyncPointManager, SyncToken};

/// The std atomics' ordering: they are read after `join` (or on the one OS thread loom uses).
const STD: std::sync::atomic::Ordering = std::sync::atomic::Ordering::SeqCst;

/// How many explored executions ended in each outcome a model notes: shows that the races
/// were actually hit both ways.
#[derive(Debug, Default)]
struct Tally(StdMutex<BTreeMap<String, usize>>);

impl Tally {
    fn note(&self, outcome: String) {
        *self.0.lock().unwrap().entry(outcome).or_default() += 1;
    }
}

/// Runs `f` under `loom::model`, then prints how many interleavings it explored, how long that
/// took, and the outcomes `f` noted. Each `expected` outcome must have been seen.
fn check(name: &str, expected: &[&str], f: impl Fn(&Tally) + Sync + Send + 'static) {
    let iterations = StdArc::new(StdAtomicUsize::new(0));
    let tally = StdArc::new(Tally::default());
    let (counter, t) = (iterations.clone(), tally.clone());
    let start = Instant::now();
    loom::model(move || {
        counter.fetch_add(1, STD);
        f(&t);
    });
    let outcomes = tally.0.lock().unwrap();
    println!(
        "loom {name}: {} iterations in {:.2?}; outcomes {outcomes:?}",
        iterations.load(STD),
        start.elapsed()
    );
    for e in expected {
        assert!(
            outcomes.contains_key(*e),
            "{name}: outcome {e:?} never explored"
        );
    }
}

/// One run of a task closure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    label: &'static str,
    stream: StreamId,
    order_num: u64,
    /// Whether the model's flag was up when it ran (what it means is the model's).
    flag: bool,
}

/// What the task closures did: runs in run order, and closures dropped without running.
#[derive(Debug, Default)]
struct Book {
    runs: StdMutex<Vec<Run>>,
    dropped: StdMutex<Vec<&'static str>>,
    /// Raised by a model's racing thread after (or around) its call; recorded in each run.
    flag: AtomicBool,
}

impl Book {
    fn labels(&self) -> Vec<&'static str> {
        self.runs.lock().unwrap().iter().map(|r| r.label).collect()
    }

    fn runs(&self) -> Vec<Run> {
        self.runs.lock().unwrap().clone()
    }

    fn dropped(&self) -> Vec<&'static str> {
        self.dropped.lock().unwrap().clone()
    }

    fn ran(&self) -> usize {
        self.runs.lock().unwrap().len()
    }

    /// Every label ran at most once, none both ran and was dropped, and together they are
    /// exactly `all` (nothing lost).
    fn assert_accounted(&self, all: &[&'static str]) {
        let ran = self.labels();
        let dropped = self.dropped();
        let mut seen: Vec<&'static str> = ran.iter().chain(&dropped).copied().collect();
        seen.sort_unstable();
        let mut expected = all.to_vec();
        expected.sort_unstable();
        assert_eq!(seen, expected, "ran {ran:?}, dropped unrun {dropped:?}");
    }
}

/// Captured by a task closure: records the run, or a drop without one.
struct Probe {
    book: StdArc<Book>,
    label: &'static str,
    ran: bool,
}

impl Probe {
    fn new(book: &StdArc<Book>, label: &'static str) -> Self {
        Probe {
            book: book.clone(),
            label,
            ran: false,
        }
    }

    fn run(&mut self, ctx: &TaskContext<'_>) {
        assert!(!self.ran, "{} ran twice", self.label);
        self.ran = true;
        self.book.runs.lock().unwrap().push(Run {
            label: self.label,
            stream: ctx.stream(),
            order_num: ctx.order_num(),
            flag: self.book.flag.load(Ordering::SeqCst),
        });
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if !self.ran {
            self.book.dropped.lock().unwrap().push(self.label);
        }
    }
}

/// A task that records its run, then does `body`.
fn task_with(
    book: &StdArc<Book>,
    label: &'static str,
    body: impl FnOnce() -> TaskResult + Send + 'static,
) -> Task {
    let probe = Probe::new(book, label);
    Task::new(move |ctx| {
        // Rebind so the closure owns the whole probe (edition 2024 captures fields).
        let mut probe = probe;
        probe.run(ctx);
        body()
    })
}

/// A task that only records its run.
fn task(book: &StdArc<Book>, label: &'static str) -> Task {
    task_with(book, label, || TaskResult::Done)
}

/// A scheduler whose turns are never cut by time (see the module docs).
fn scheduler() -> StdArc<Scheduler> {
    let config = SchedulerConfig {
        time_slice: Duration::from_secs(3600),
        granularity: Duration::from_secs(3600),
        ..SchedulerConfig::default()
    };
    Scheduler::with_config(Arc::new(SyncPointManager::new()), config)
}

/// Drives: calls `run_next` at most `calls` times, stopping once `want` task runs are
/// recorded; yields to the other thread when nothing was runnable.
fn drive(sched: &Scheduler, book: &Book, want: usize, calls: usize) {
    for _ in 0..calls {
        if book.ran() >= want {
            return;
        }
        if sched.run_next().is_none() {
            thread::yield_now();
        }
    }
}

/// Within each stream, order numbers never decrease in run order (they increase from task to
/// task; a continuation shares its task's number).
fn assert_stream_order(runs: &[Run]) {
    for (i, r) in runs.iter().enumerate() {
        for later in &runs[i + 1..] {
            if later.stream == r.stream {
                assert!(later.order_num >= r.order_num, "out of order: {runs:?}");
            }
        }
    }
}

/// Ends a model: the scheduler must be the last owner (no task or callback kept it), and
/// dropping it destroys its sequences, so loom's leak check sees every sync-points object go.
fn finish(sched: StdArc<Scheduler>) {
    assert_eq!(StdArc::strong_count(&sched), 1);
    drop(sched);
}

/// (1) Enqueue on one thread while another drives: both tasks run exactly once, in enqueue
/// order, whether the driver saw the stream empty, with one task or with both.
#[test]
fn enqueue_vs_drive() {
    check(
        "enqueue_vs_drive",
        // Not "driver ran 0": the driver yields when nothing is runnable, and loom then
        // runs the enqueuer.
        &["driver ran 1", "driver ran 2"],
        |tally| {
            let sched = scheduler();
            let book = StdArc::new(Book::default());
            let s = sched.add_stream(Priority::Normal);

            let enqueuer = {
                let (sched, book) = (sched.clone(), book.clone());
                thread::spawn(move || {
                    let a = sched.enqueue(s, task(&book, "a")).unwrap();
                    let b = sched.enqueue(s, task(&book, "b")).unwrap();
                    assert!(b > a);
                })
            };
            let driver = {
                let (sched, book) = (sched.clone(), book.clone());
                thread::spawn(move || drive(&sched, &book, 2, 3))
            };
            enqueuer.join().unwrap();
            driver.join().unwrap();
            tally.note(format!("driver ran {}", book.ran()));
            sched.run_until_idle();

            assert_eq!(book.labels(), ["a", "b"]);
            assert_stream_order(&book.runs());
            book.assert_accounted(&["a", "b"]);
            assert_eq!(sched.pending_tasks(s), Ok(0));
            finish(sched);
        },
    );
}

/// (2) Remove a stream while another thread drives it: each task either runs (in order) or is
/// dropped unrun, never both, never lost; the dropped ones are exactly those `remove_stream`
/// counted (a task the driver had already taken still runs). Another stream is unaffected.
#[test]
fn remove_stream_vs_drive() {
    check(
        "remove_stream_vs_drive",
        &["dropped 0", "dropped 1", "dropped 2", "ran after removal"],
        |tally| {
            let sched = scheduler();
            let book = StdArc::new(Book::default());
            let s = sched.add_stream(Priority::Normal);
            let other = sched.add_stream(Priority::Low);
            sched.enqueue(s, task(&book, "a")).unwrap();
            sched.enqueue(s, task(&book, "b")).unwrap();
            sched.enqueue(other, task(&book, "c")).unwrap();

            let remover = {
                let (sched, book) = (sched.clone(), book.clone());
                thread::spawn(move || {
                    let removed = sched.remove_stream(s).unwrap();
                    book.flag.store(true, Ordering::SeqCst);
                    removed
                })
            };
            let driver = {
                let (sched, book) = (sched.clone(), book.clone());
                thread::spawn(move || drive(&sched, &book, 3, 2))
            };
            let removed = remover.join().unwrap();
            driver.join().unwrap();
            sched.run_until_idle();

            let ran = book.labels();
            let dropped = book.dropped();
            book.assert_accounted(&["a", "b", "c"]);
            assert_stream_order(&book.runs());
            // `a` is ahead of `b`: `b` never runs unless `a` did.
            let of_s: Vec<_> = ran.iter().filter(|l| **l != "c").copied().collect();
            assert!(
                of_s.is_empty() || of_s == ["a"] || of_s == ["a", "b"],
                "{ran:?}"
            );
            assert!(
                ran.contains(&"c"),
                "the other stream lost its task: {ran:?}"
            );
            assert_eq!(removed.dropped_tasks, dropped.len(), "dropped {dropped:?}");
            assert_eq!(removed.lent_priority, None);
            tally.note(format!("dropped {}", dropped.len()));
            if book.runs().iter().any(|r| r.flag && r.stream == s) {
                tally.note("ran after removal".into());
            }
            assert_eq!(
                sched.pending_tasks(s),
                Err(SchedulerError::UnknownStream(s))
            );
            finish(sched);
        },
    );
}

const CLIENT: ClientId = ClientId {
    namespace: 0,
    command_buffer_id: 7,
};

/// (3) A task on stream R releases a token of R's client (made with `create_client`) while one
/// thread enqueues, on stream W, a task waiting for that token, and the other thread drives: the
/// waiter runs exactly once, after the release — whether it registered a wait before the release
/// or found the token already released.
#[test]
fn release_vs_enqueue_waiter() {
    check(
        "release_vs_enqueue_waiter",
        &["wait registered", "found released"],
        |tally| {
            let sched = scheduler();
            let book = StdArc::new(Book::default());
            let r = sched.add_stream(Priority::Normal);
            let w = sched.add_stream(Priority::Normal);
            let client = sched.create_client(r, CLIENT).unwrap();
            let released = StdArc::new(StdMutex::new(None));
            let outcome = released.clone();
            sched
                .enqueue(
                    r,
                    task_with(&book, "release", move || {
                        *outcome.lock().unwrap() = Some(client.release(1));
                        TaskResult::Done
                    }),
                )
                .unwrap();

            let enqueuer = {
                let (sched, book) = (sched.clone(), book.clone());
                thread::spawn(move || {
                    let token = SyncToken::new(CLIENT.namespace, CLIENT.command_buffer_id, 1);
                    sched
                        .enqueue(w, task(&book, "waiter").wait_for([token]))
                        .unwrap();
                })
            };
            let driver = {
                let (sched, book) = (sched.clone(), book.clone());
                thread::spawn(move || drive(&sched, &book, 2, 3))
            };
            enqueuer.join().unwrap();
            driver.join().unwrap();
            sched.run_until_idle();

            assert_eq!(book.labels(), ["release", "waiter"]);
            book.assert_accounted(&["release", "waiter"]);
            let outcome = released.lock().unwrap().take();
            let ok = matches!(
                outcome,
                Some(Ok(ReleaseOutcome::Released { callbacks })) if callbacks <= 1
            );
            assert!(ok, "{outcome:?}");
            tally.note(
                match outcome {
                    Some(Ok(ReleaseOutcome::Released { callbacks: 1 })) => "wait registered",
                    _ => "found released",
                }
                .into(),
            );
            assert_eq!(sched.pending_tasks(w), Ok(0));
            finish(sched);
        },
    );
}

/// (4) Disable then re-enable a stream while another thread drives it: both tasks run exactly
/// once, in order, and while it is disabled at most the one task the driver had already taken
/// runs ("a running one stops after its current task").
#[test]
fn set_enabled_vs_drive() {
    check(
        "set_enabled_vs_drive",
        &["ran while disabled 0", "ran while disabled 1"],
        |tally| {
            let sched = scheduler();
            let book = StdArc::new(Book::default());
            let s = sched.add_stream(Priority::Normal);
            sched.enqueue(s, task(&book, "a")).unwrap();
            sched.enqueue(s, task(&book, "b")).unwrap();

            let toggler = {
                let (sched, book) = (sched.clone(), book.clone());
                thread::spawn(move || {
                    sched.set_enabled(s, false).unwrap();
                    // The window: let the driver run while the flag is up (a yield, so loom
                    // explores it without spending a preemption).
                    book.flag.store(true, Ordering::SeqCst);
                    thread::yield_now();
                    book.flag.store(false, Ordering::SeqCst);
                    sched.set_enabled(s, true).unwrap();
                })
            };
            let driver = {
                let (sched, book) = (sched.clone(), book.clone());
                thread::spawn(move || drive(&sched, &book, 2, 3))
            };
            toggler.join().unwrap();
            driver.join().unwrap();
            sched.run_until_idle();

            let runs = book.runs();
            assert_eq!(book.labels(), ["a", "b"]);
            assert_stream_order(&runs);
            book.assert_accounted(&["a", "b"]);
            let while_disabled = runs.iter().filter(|r| r.flag).count();
            assert!(while_disabled <= 1, "ran while disabled: {runs:?}");
            tally.note(format!("ran while disabled {while_disabled}"));
            finish(sched);
        },
    );
}

/// (5) A task yields (`ContinueLater`) while another thread enqueues a later task on its
/// stream: the continuation runs (once, with the task's order number) before the later task.
#[test]
fn continue_later_vs_enqueue() {
    check(
        "continue_later_vs_enqueue",
        &["z before y1", "z between y1 and y2", "z after y2"],
        |tally| {
            let sched = scheduler();
            let book = StdArc::new(Book::default());
            let s = sched.add_stream(Priority::Normal);
            let rest = Probe::new(&book, "y2");
            sched
                .enqueue(
                    s,
                    task_with(&book, "y1", move || {
                        TaskResult::continue_later(move |ctx| {
                            let mut rest = rest;
                            rest.run(ctx);
                            TaskResult::Done
                        })
                    }),
                )
                .unwrap();

            let enqueuer = {
                let (sched, book) = (sched.clone(), book.clone());
                thread::spawn(move || {
                    sched.enqueue(s, task(&book, "z")).unwrap();
                    book.flag.store(true, Ordering::SeqCst);
                })
            };
            let driver = {
                let (sched, book) = (sched.clone(), book.clone());
                thread::spawn(move || drive(&sched, &book, 3, 3))
            };
            enqueuer.join().unwrap();
            driver.join().unwrap();
            sched.run_until_idle();

            let runs = book.runs();
            assert_eq!(book.labels(), ["y1", "y2", "z"]);
            assert_eq!(runs[0].order_num, runs[1].order_num);
            assert!(runs[2].order_num > runs[1].order_num);
            book.assert_accounted(&["y1", "y2", "z"]);
            tally.note(
                match (runs[0].flag, runs[1].flag) {
                    (true, _) => "z before y1",
                    (false, true) => "z between y1 and y2",
                    (false, false) => "z after y2",
                }
                .into(),
            );
            finish(sched);
        },
    );
}
