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
//!   requeued at the back of its level.
//! * **Preemption**: when runnable work of a higher level than the running stream appears, the
//!   running stream's slice is cut to [`SchedulerConfig::granularity`] since its pick (or now,
//!   if later) and the atomic flag read by [`Scheduler::should_yield`] is raised.
//! * **Waits**: a front task whose tokens are unreleased registers `SyncPointManager::wait`
//!   with its stream's sequence and order number and blocks its stream; when every wait ends
//!   (released, retired as impossible, or the releaser destroyed) the stream is requeued.
//! * **Priority inheritance**: a stream waiting on a token whose client releases on another
//!   stream's sequence (made with [`Scheduler::create_client`], or directly on
//!   [`Scheduler::sequence`] through the sync-point manager) raises that stream to at least its
//!   own scheduled priority, transitively. It is recomputed from scratch on every change as a monotone fixed
//!   point (so cycles terminate, duplicate waits count once, and a satisfied, retired or removed
//!   wait simply stops contributing).
//! * **Metrics** per priority ([`Scheduler::metrics`], [`SchedulerConfig::metrics_callback`]):
//!   enqueue-to-start delay samples with p50/p99, tasks started, time run.
//!
//! # Guarantees
//! * Every enqueued task runs at most once, after every task enqueued before it on its stream,
//!   unless its stream is removed (then it is dropped, never run).
//! * Task closures, start callbacks, the metrics callback and sync-points callbacks run with no
//!   lock of this crate held: a task may enqueue, add/remove/enable streams or release tokens.
//! * [`Scheduler::shutdown`], from any thread or from inside a task: the task running finishes
//!   and nothing more runs (not the rest of its turn, not the rest of a task that keeps
//!   returning `ContinueLater`); every pending task is dropped exactly once, outside any lock;
//!   new work is refused with [`SchedulerError::ShutDown`] (tests/shutdown.rs; the C ABI's
//!   `gpusvc_scheduler_free` calls it).
//!
//! * A task closure or callback that panics: the panic propagates out of `run_next` once the
//!   turn is settled (the task's order number finished, the unrun tasks of the turn back at the
//!   front of their stream, the stream requeued); that task is not run again, nothing else is
//!   lost, and the scheduler stays drivable.
//!
//! # Errors
//! Unknown streams, refused order numbers and client creation failures are
//! [`SchedulerError`] values; nothing changes when one is returned.
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
pub use metrics::{MAX_SAMPLES, Metrics, PriorityMetrics, TaskSample, percentile};
pub use scheduler::{
    MetricsCallback, Priority, RemovedStream, Scheduler, SchedulerConfig, SchedulerError, StartFn,
    StreamId, Task, TaskContext, TaskFn, TaskResult,
};
