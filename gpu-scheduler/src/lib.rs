//! `gpu-scheduler`: a prioritized scheduler of GPU streams — multi-level round robin with time
//! slices, a preemption flag and priority inheritance through `sync-points` tokens — so a flood
//! of low-priority raster work cannot delay compositing and presentation.
//!
//! * A **stream** ([`Scheduler::add_stream`]) has a [`Priority`] (RealTime > High > Normal >
//!   Low), its own `sync-points` sequence and a FIFO of [`Task`]s. Each task gets an order
//!   number from the sequence when enqueued ([`Scheduler::enqueue`], any thread).
//! * One thread drives: [`Scheduler::run_next`] picks the front stream of the highest non-empty
//!   level and runs the tasks it had when picked, around `begin_processing` /
//!   `finish_processing` of their order numbers, until the turn ends (budget done, slice over,
//!   a task yields with [`TaskResult::ContinueLater`] — the rest goes to the front of the
//!   stream with the same order number, paused — or the front task blocks).
//! * **Time slices**: a turn longer than [`SchedulerConfig::time_slice`] downgrades the stream
//!   one level (never RealTime); a shorter one resets it to its base priority. It is then
//!   requeued at its level (see the queue order below).
//! * **Preemption**: when runnable work of a higher level than the running stream appears, the
//!   running stream's slice is cut to [`SchedulerConfig::granularity`] since its pick (or now,
//!   if later) and the atomic flag read by [`Scheduler::should_yield`] is raised.
//! * **Waits**: a front task whose tokens are unreleased registers `SyncPointManager::wait`
//!   with its stream's sequence and order number and blocks its stream; when every wait ends
//!   (released, retired as impossible, or the releaser destroyed) the stream is requeued.
//! * **Priority inheritance**: a stream waiting on a token whose client releases on another
//!   stream's sequence (made with [`Scheduler::create_client`], or directly on
//!   [`Scheduler::sequence`] through the sync-point manager) raises that stream to at least its
//!   own scheduled priority, transitively: a stream's scheduled priority is always exactly the
//!   least fixed point of `max(own, the scheduled priority of every enabled stream with a
//!   pending wait it releases)` — what recomputing every stream from scratch gives. Several
//!   waits on one releaser count once; a wait that is satisfied, retired or removed, and a
//!   waiter that is disabled or removed, stop lending at once.
//!
//!   It is kept incrementally along the wait graph (edges: waiter -> releaser), so a change
//!   costs what it affects, not the number of streams. A new loan (a wait registered, a waiter
//!   enabled, an own priority raised) is pushed along the edges to each stream it raises; a
//!   stream is raised at most 3 times (4 levels), so this terminates on cycles. A loan of
//!   priority `q` that ends (a wait ended, a waiter disabled or removed, an own priority lowered
//!   from `q`) can only lower the streams at exactly `q` reachable from it through streams at
//!   `q` (one above `q` is held up by something else); that set is rebuilt from its streams'
//!   own priorities and the loans into it from outside it, then raised within itself — so a
//!   cycle cannot keep alive a loan that ended, which a per-stream "max over my waiters" would.
//!   The cost: the streams of that set and their edges. `benches/streams.rs` (N streams, 3
//!   rounds of random waits, continuations, a stream removed and replaced every N/64 turns;
//!   the old from-scratch fixed point as the baseline, same process): 1.8-2.1 streams visited
//!   per change at 1k, 5k, 10k and 20k streams (baseline 2.3k, 12k, 24k, 49k); the whole
//!   workload's time per change 1.5, 2.1, 4.0, 8.0 us (baseline 27, 142, 342, 935 us: 45 ms,
//!   1.1 s, 5.2 s and 28 s in all, against 2.5 ms, 17 ms, 61 ms and 242 ms). Ours grows 2-5x
//!   over 20x the streams (4.8-8.0 us at 20k across runs on a shared 2-core machine) with the
//!   visits per change flat: memory (hash-map probes and allocation over 20k streams and their
//!   sequences, in the profile), not propagation; the baseline grows 29-35x.
//! * **Queue order**: a stream joins its level at the back (round robin), except a stream
//!   raised by inheritance above its own priority: it is placed by the age of its front task,
//!   where it would be had it joined the level when that task was enqueued — ahead of the
//!   streams that joined after, behind those that joined before (Chromium's GpuScheduler
//!   orders runnable sequences by priority, then by the order number of their next task).
//!   Chosen by measurement: `examples/raster_flood.rs`'s inheritance scenario, in virtual time
//!   (exact): each frame a Low upload stream's 1 ms task at +5 ms releases the token a High
//!   client's 0.5 ms task at +7 ms waits on, under a Low raster flood, presentation and
//!   renderers; 600 frames per row; p99 delays, at the back -> by age. With busy High streams
//!   whose work all arrives at +6 ms (2 ms tasks), the raised stream waits 5.24 -> 3.24 ms (2
//!   streams) and 9.25 -> 3.25 ms (4) and the client is unchanged (4.24 / 8.25 ms: once
//!   released it joins High at the back, behind the streams the raised one passed). With High
//!   work arriving at random times (0.75 ms tasks, 4 a frame per stream), what arrives while
//!   the raised stream waits no longer runs first: the client's p99 is 4.20 -> 4.07 ms (3
//!   streams) and 6.00 -> 5.25 ms (4; p50 3.10 -> 2.78 ms), the raised stream's 3.53 -> 2.74
//!   and 4.47 -> 2.96 ms. The price: the streams passed wait for the raised stream's older work
//!   (their p99 +0.61 and +1.00 ms with the one-shot loads, +0.15 and +0.29 ms with the random
//!   ones). No client or presentation frame was missed under either rule.
//! * **Metrics** per priority ([`Scheduler::metrics`], [`SchedulerConfig::metrics_callback`]):
//!   enqueue-to-start delay samples with p50/p99, tasks started, time run.
//!   Per stream ([`Scheduler::stream_metrics`], [`Scheduler::all_stream_metrics`],
//!   [`StreamMetrics`]): tasks, continuations, time waiting (sum and longest), time run, and
//!   tasks and time run at each priority the stream was scheduled at when they ran.
//!
//! # Guarantees
//! * Every enqueued task runs at most once, after every task enqueued before it on its stream,
//!   unless its stream is removed (then it is dropped, never run).
//! * The scheduler owns the sync-points clients it creates ([`Scheduler::create_client`]): they
//!   are destroyed with their stream, at [`Scheduler::shutdown`] and when the scheduler is
//!   dropped (waits on their tokens end; the tokens read as released), so no client outlives
//!   its stream. A client destroyed earlier through the sync-point manager, and another client
//!   created since under its id, are left alone, and the scheduler does not keep such a client
//!   (tests `removing_a_stream_destroys_the_clients_made_on_it`,
//!   `shutdown_and_drop_destroy_the_schedulers_clients_and_only_those`,
//!   `clients_destroyed_through_the_manager_are_not_kept_by_their_stream` in tests/behaviours.rs).
//! * A stream's metrics count each of its tasks once, under the priority it ran at (raised by
//!   inheritance or downgraded), and take fixed memory; they go with the stream, reported once
//!   in [`RemovedStream::metrics`] (tests/stream_metrics.rs).
//! * Task closures, start callbacks, the metrics callback and sync-points callbacks run with no
//!   lock of this crate held: a task may enqueue, add/remove/enable streams or release tokens.
//! * A stream's scheduled priority is always the from-scratch fixed point above, and a change
//!   looks only at the streams it can affect (`src/priority_tests.rs`: random graphs with
//!   cycles against the oracle, a change among 4000 streams visiting a few; debug builds check
//!   every change against the oracle while a scheduler has at most 64 streams; disabling a
//!   waiter: tests/behaviours.rs).
//! * A stream raised by inheritance runs before the streams of its new level that joined it
//!   after its front task was enqueued (tests/behaviours.rs and ffi/tests/scheduler_abi.rs,
//!   `a_raised_stream_is_queued_by_the_age_of_its_front_task`).
//! * [`Scheduler::shutdown`], from any thread or from inside a task: the task running finishes
//!   and nothing more runs (not the rest of its turn, not the rest of a task that keeps
//!   returning `ContinueLater`); every pending task is dropped exactly once, outside any lock;
//!   new work is refused with [`SchedulerError::ShutDown`] (tests/shutdown.rs; the C ABI's
//!   `gpusvc_scheduler_free` calls it).
//!
//! * A task closure or callback that panics (its start callback, the task, a sync-points
//!   callback its finish runs, the metrics callback — also after a yield): the panic propagates
//!   out of `run_next` once the turn is settled (the task's order number begun if it was not and
//!   finished, the rest of a yielded task and the unrun tasks of the turn back at the front of
//!   their stream, the stream requeued); that task is not run again, nothing else is lost, and
//!   the scheduler stays drivable (tests/behaviours.rs, tests/panics.rs).
//! * Drive the scheduler from the host, not from inside a sync-points callback: callbacks a
//!   callback triggers (the scheduler's own wait callbacks among them) are queued until it
//!   returns, so streams they would unblock wait for the host's next `run_next`.
//!
//! # Errors
//! Unknown streams, refused order numbers and client creation failures are
//! [`SchedulerError`] values; nothing changes when one is returned. A config whose time slice is
//! shorter than its granularity is a [`ConfigError`] ([`SchedulerConfig::validate`],
//! [`Scheduler::try_with_config`]).
//!
//! # Thread safety and lock order
//! [`Scheduler`] is `Send + Sync`. One mutex guards the scheduler state; lock order is
//! scheduler state → sync-points locks, never the other way: `generate`, `wait`, `is_released`
//! and `create_client` are called under the state lock, while `begin_processing`,
//! `finish_processing` and `destroy_sequence` (which run sync-points callbacks, which take the
//! state lock) are called without it. `run_next` is driven by one thread at a time (a
//! concurrent or re-entrant call returns `None`). The preemption flag is an atomic
//! (Release/Acquire) and advisory. The driver takes the tasks of a turn out of their stream in
//! batches under the state lock and runs them reading only atomics in between: the running
//! slice's length (Relaxed, advisory timing) and the batch word, whose per-task `fetch_sub`
//! claims race `remove_stream` / `set_enabled(false)`'s `fetch_or` of a stop flag (AcqRel), so
//! a removal counts exactly the tasks the driver will not run (see `BATCH_REMOVED` in
//! `scheduler.rs`; modelled by `tests/loom.rs`). Time is [`Clock::now_ns`]: [`SystemClock`]
//! reads the TSC through `quanta`. All concurrency goes through `crate::sync` (std, or `loom`
//! under `--cfg loom`).

mod clock;
mod metrics;
mod scheduler;
pub(crate) mod sync;

pub use clock::{Clock, ManualClock, SystemClock};
pub use metrics::{MAX_SAMPLES, Metrics, PriorityMetrics, StreamMetrics, TaskSample, percentile};
pub use scheduler::{
    ConfigError, MetricsCallback, Priority, RemovedStream, Scheduler, SchedulerConfig,
    SchedulerError, StartFn, StreamId, Task, TaskContext, TaskFn, TaskResult,
};
