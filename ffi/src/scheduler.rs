//! `gpusvc_scheduler_*`: the prioritized GPU stream scheduler (the `gpu-scheduler` crate) seen
//! from C.
//!
//! A `gpusvc_scheduler` may be used from any thread; one thread at a time drives it
//! (`gpusvc_scheduler_run_next` / `gpusvc_scheduler_run_until_idle`; a concurrent or re-entrant
//! drive runs nothing). Streams are named by the `uint64_t` id `gpusvc_scheduler_add_stream`
//! gives. Task and start callbacks run on the driving thread with no gpusvc lock held: they may
//! call back into the library (enqueue, enable streams, release tokens, ...).
//!
//! `gpusvc_scheduler_new_with_config` sets the time slice and granularity, a host clock (for
//! deterministic tests or a host time base) and a per-task metrics callback;
//! `gpusvc_scheduler_metrics` reads the per-priority metrics at any time.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use gpu_scheduler::{
    Clock, MetricsCallback, Priority, PriorityMetrics, Scheduler, SchedulerConfig, SchedulerError,
    StreamId, Task, TaskFn, TaskResult, TaskSample,
};
use sync_points::{SyncPointManager, SyncToken};

use crate::kit::handle::{self, Kind};
use crate::kit::{
    FfiError, HostFn, Out, UserData, c_enum, ffi_guard, gpusvc_result, invalid_argument,
    null_argument, struct_in,
};
use crate::sync::{
    client_error, client_id, gpusvc_sync_manager, gpusvc_sync_token, order_error, read_token,
};

/// An opaque scheduler. Thread-safe: any thread may use it, and free it once no other thread is
/// still calling with it.
#[derive(Debug)]
pub struct gpusvc_scheduler {
    _opaque: [u8; 0],
}

/// A stream priority (passed as `uint32_t`), lowest first.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum gpusvc_scheduler_priority {
    /// Background work.
    GPUSVC_SCHEDULER_PRIORITY_LOW = 0,
    /// Ordinary clients.
    GPUSVC_SCHEDULER_PRIORITY_NORMAL = 1,
    /// Urgent clients.
    GPUSVC_SCHEDULER_PRIORITY_HIGH = 2,
    /// Presentation; never downgraded by time slices.
    GPUSVC_SCHEDULER_PRIORITY_REAL_TIME = 3,
}

c_enum!(impl gpusvc_scheduler_priority {
    GPUSVC_SCHEDULER_PRIORITY_LOW,
    GPUSVC_SCHEDULER_PRIORITY_NORMAL,
    GPUSVC_SCHEDULER_PRIORITY_HIGH,
    GPUSVC_SCHEDULER_PRIORITY_REAL_TIME,
});

/// What a task callback returns (as `uint32_t`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum gpusvc_scheduler_task_result {
    /// The task is complete.
    GPUSVC_SCHEDULER_TASK_DONE = 0,
    /// The task yielded: the same callback runs again later, first in its stream, with the same
    /// order number.
    GPUSVC_SCHEDULER_TASK_CONTINUE_LATER = 1,
}

c_enum!(impl gpusvc_scheduler_task_result {
    GPUSVC_SCHEDULER_TASK_DONE,
    GPUSVC_SCHEDULER_TASK_CONTINUE_LATER,
});

/// A task body: returns a `gpusvc_scheduler_task_result` value (any value other than
/// `GPUSVC_SCHEDULER_TASK_CONTINUE_LATER` means done).
pub type gpusvc_scheduler_task_fn = Option<unsafe extern "C" fn(user_data: *mut c_void) -> u32>;

/// A start callback, run just before its task first starts.
pub type gpusvc_scheduler_start_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// Releases a task's user data: called exactly once, when the scheduler is done with the task.
pub type gpusvc_scheduler_destroy_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// A task for `gpusvc_scheduler_enqueue`. The struct is read during the call; `user_data` is
/// passed to each callback.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_scheduler_task {
    /// The body (required); runs on the driving thread, again after each
    /// `GPUSVC_SCHEDULER_TASK_CONTINUE_LATER`.
    pub run: gpusvc_scheduler_task_fn,
    /// Runs just before the first `run` (may be NULL).
    pub start: gpusvc_scheduler_start_fn,
    /// Called exactly once when the scheduler is done with the task (may be NULL): after the
    /// `run` that completes it, or when it is dropped unrun or between continuations (its
    /// stream removed, the scheduler freed), on the thread that drops it. Not called when the
    /// enqueue fails: the user data stays the caller's.
    pub destroy: gpusvc_scheduler_destroy_fn,
    /// Passed to `run`, `start` and `destroy`.
    pub user_data: *mut c_void,
    /// Tokens to wait for before the first start (NULL when `wait_count` is 0).
    pub waits: *const gpusvc_sync_token,
    /// Number of `waits`.
    pub wait_count: usize,
}

/// A host clock: monotonic nanoseconds from any origin. Called from any thread that uses the
/// scheduler, possibly with scheduler locks held: it must not call `gpusvc_scheduler_*`.
pub type gpusvc_scheduler_clock_fn = Option<unsafe extern "C" fn(user_data: *mut c_void) -> u64>;

/// One task run, as given to a `gpusvc_scheduler_task_sample_fn`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_scheduler_task_sample {
    /// The stream's scheduled priority when the task ran (a `gpusvc_scheduler_priority` value).
    pub priority: u32,
    /// Enqueue to first start, in nanoseconds (0 for a continuation).
    pub delay_ns: u64,
    /// Time the task callback ran, in nanoseconds.
    pub run_ns: u64,
    /// Whether this run continued a task that returned `GPUSVC_SCHEDULER_TASK_CONTINUE_LATER`.
    pub continuation: bool,
}

/// A metrics callback: called on the driving thread after every task run, with no gpusvc lock
/// held; `sample` is valid for the call only.
pub type gpusvc_scheduler_task_sample_fn = Option<
    unsafe extern "C" fn(sample: *const gpusvc_scheduler_task_sample, user_data: *mut c_void),
>;

/// Settings of `gpusvc_scheduler_new_with_config`. Zero-initialized, it gives the defaults (5 ms
/// slices, 1 ms granularity, the system monotonic clock, no metrics callback).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_scheduler_config {
    /// A stream's time slice in nanoseconds; 0: the default (5 ms).
    pub time_slice_ns: u64,
    /// When higher priority arrives, the running stream still gets this much run time since it
    /// was picked, in nanoseconds; 0: the default (1 ms). At most the time slice.
    pub granularity_ns: u64,
    /// The time source; NULL: the system monotonic clock. Its first reading (made by
    /// `gpusvc_scheduler_new_with_config`) is the scheduler's origin; a reading below the
    /// highest one so far counts as that one (time never goes backwards).
    pub now_ns: gpusvc_scheduler_clock_fn,
    /// Passed to `now_ns`.
    pub clock_user_data: *mut c_void,
    /// Called after every task run; NULL: none.
    pub on_task: gpusvc_scheduler_task_sample_fn,
    /// Passed to `on_task`.
    pub on_task_user_data: *mut c_void,
}

/// Metrics of one priority level (`gpusvc_scheduler_metrics`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct gpusvc_scheduler_priority_metrics {
    /// Tasks started (continuations not counted).
    pub tasks: u64,
    /// Continuation runs (a task run again after `GPUSVC_SCHEDULER_TASK_CONTINUE_LATER`).
    pub continuations: u64,
    /// Total time run by task callbacks, continuations included, in nanoseconds.
    pub run_ns: u64,
    /// How many enqueue-to-start delay samples are kept (the most recent ones); 0: the
    /// percentiles below are 0 and mean nothing.
    pub sample_count: u64,
    /// Median enqueue-to-start delay, in nanoseconds.
    pub delay_p50_ns: u64,
    /// 99th percentile enqueue-to-start delay, in nanoseconds.
    pub delay_p99_ns: u64,
}

/// What `gpusvc_scheduler_remove_stream` did.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct gpusvc_scheduler_removed_stream {
    /// Pending tasks dropped without running.
    pub dropped_tasks: u64,
    /// Whether the stream was lending its priority to a releaser (through pending waits); that
    /// loan ends with the removal.
    pub lent: bool,
    /// The highest priority it lent (a `gpusvc_scheduler_priority` value); 0 when `!lent`.
    pub lent_priority: u32,
}

fn scheduler(s: *const gpusvc_scheduler) -> Result<Arc<Scheduler>, FfiError> {
    handle::shared(s, "scheduler", Kind::Scheduler)
}

fn priority(value: u32) -> Result<Priority, FfiError> {
    use gpusvc_scheduler_priority::*;
    Ok(match gpusvc_scheduler_priority::decode(value)? {
        GPUSVC_SCHEDULER_PRIORITY_LOW => Priority::Low,
        GPUSVC_SCHEDULER_PRIORITY_NORMAL => Priority::Normal,
        GPUSVC_SCHEDULER_PRIORITY_HIGH => Priority::High,
        GPUSVC_SCHEDULER_PRIORITY_REAL_TIME => Priority::RealTime,
    })
}

fn priority_out(p: Priority) -> u32 {
    p.index() as u32
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The host's clock: ns since its first reading, never backwards.
/// Used from any thread that uses the scheduler, at the same time
/// (`gpusvc_scheduler_new_with_config`'s contract).
#[derive(Debug)]
struct HostClock {
    now_ns: HostFn<unsafe extern "C" fn(*mut c_void) -> u64>,
    first: u64,
    /// The highest offset from `first` reported so far.
    latest: AtomicU64,
}

impl HostClock {
    fn new(now_ns: HostFn<unsafe extern "C" fn(*mut c_void) -> u64>) -> Self {
        // SAFETY: a host function taking its own user_data (contract).
        let first = unsafe { (now_ns.f)(now_ns.user_data.get()) };
        HostClock {
            now_ns,
            first,
            latest: AtomicU64::new(0),
        }
    }
}

impl Clock for HostClock {
    fn now_ns(&self) -> u64 {
        let now_ns = self.now_ns;
        // SAFETY: a host function taking its own user_data (contract).
        let offset = unsafe { (now_ns.f)(now_ns.user_data.get()) }.saturating_sub(self.first);
        // Relaxed: a max over readings; the scheduler orders its own uses of time.
        self.latest.fetch_max(offset, Ordering::Relaxed).max(offset)
    }
}

/// The host's metrics callback, called from the driving thread (whichever thread that is; one
/// at a time) after every task run.
type HostMetrics = HostFn<unsafe extern "C" fn(*const gpusvc_scheduler_task_sample, *mut c_void)>;

fn report_sample(host: HostMetrics, s: &TaskSample) {
    let sample = gpusvc_scheduler_task_sample {
        priority: priority_out(s.priority),
        delay_ns: nanos(s.delay),
        run_ns: nanos(s.run),
        continuation: s.continuation,
    };
    // SAFETY: a host function taking its own user_data (contract); the sample outlives the call.
    unsafe { (host.f)(&sample, host.user_data.get()) };
}

fn config_in(c: &gpusvc_scheduler_config) -> Result<SchedulerConfig, FfiError> {
    let mut config = SchedulerConfig::default();
    if c.time_slice_ns != 0 {
        config.time_slice = Duration::from_nanos(c.time_slice_ns);
    }
    if c.granularity_ns != 0 {
        config.granularity = Duration::from_nanos(c.granularity_ns);
    }
    // The crate's rule, checked before the host clock's first reading: a refused config never
    // calls the host.
    config
        .validate()
        .map_err(|e| invalid_argument(e.to_string()))?;
    if let Some(now_ns) = HostFn::optional(c.now_ns, c.clock_user_data) {
        config.clock = Arc::new(HostClock::new(now_ns));
    }
    if let Some(host) = HostFn::optional(c.on_task, c.on_task_user_data) {
        config.metrics_callback =
            Some(Arc::new(move |s: &TaskSample| report_sample(host, s)) as MetricsCallback);
    }
    Ok(config)
}

fn metrics_out(m: &PriorityMetrics) -> gpusvc_scheduler_priority_metrics {
    gpusvc_scheduler_priority_metrics {
        tasks: m.tasks,
        continuations: m.continuations,
        run_ns: nanos(m.time_run),
        sample_count: m.delays.len() as u64,
        delay_p50_ns: m.delay_p50.map_or(0, nanos),
        delay_p99_ns: m.delay_p99.map_or(0, nanos),
    }
}

fn scheduler_error(e: SchedulerError) -> FfiError {
    match e {
        SchedulerError::UnknownStream(id) => FfiError::new(
            gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM,
            format!("scheduler stream {} does not exist", id.0),
        ),
        SchedulerError::Order(e) => order_error(e),
        SchedulerError::Client(e) => client_error(e),
        SchedulerError::ShutDown => FfiError::new(
            gpusvc_result::GPUSVC_SCHEDULER_SHUT_DOWN,
            "the scheduler was freed while this call was in flight".to_owned(),
        ),
    }
}

/// The body of a per-stream query export: checks the handle and `out`, asks the scheduler,
/// writes the answer only on success.
///
/// # Safety
/// `out` is NULL or valid for one write.
unsafe fn stream_query<T>(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    out: *mut T,
    out_name: &'static str,
    query: impl FnOnce(&Scheduler, StreamId) -> Result<T, SchedulerError>,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        // SAFETY: forwarded from this function's contract.
        let out = unsafe { Out::new(out, out_name) }?;
        out.write(query(&s, StreamId(stream)).map_err(scheduler_error)?);
        Ok(())
    })
}

/// A host task owned by its closure: dropping it (after the completing run, or unrun) calls
/// `destroy` once, unless the enqueue failed (`disarmed`: the user data stays the host's).
struct HostTask {
    run: unsafe extern "C" fn(*mut c_void) -> u32,
    destroy: Option<(unsafe extern "C" fn(*mut c_void), Arc<AtomicBool>)>,
    user_data: UserData,
}

impl Drop for HostTask {
    fn drop(&mut self) {
        if let Some((destroy, disarmed)) = &self.destroy {
            // Relaxed: set and read on the enqueueing thread before it returns an error; a task
            // that was enqueued is never disarmed.
            if !disarmed.load(Ordering::Relaxed) {
                // SAFETY: a host function taking its own user_data (contract of the enqueue);
                // called once, as this drop runs once.
                unsafe { destroy(self.user_data.get()) }
            }
        }
    }
}

fn host_task(host: HostTask) -> TaskFn {
    Box::new(move |_| {
        // SAFETY: a host function taking its own user_data (contract of the enqueue).
        let r = unsafe { (host.run)(host.user_data.get()) };
        if gpusvc_scheduler_task_result::from_u32(r)
            == Some(gpusvc_scheduler_task_result::GPUSVC_SCHEDULER_TASK_CONTINUE_LATER)
        {
            TaskResult::ContinueLater(host_task(host))
        } else {
            // `host` drops here: `destroy` after the completing run.
            TaskResult::Done
        }
    })
}

/// Creates a scheduler into `*out`. With `manager` non-NULL its streams' sequences and clients
/// live in that sync manager (so `gpusvc_sync_*` calls see them, and tokens can be released with
/// `gpusvc_sync_client_release`); with NULL the scheduler has its own.
///
/// # Safety
/// `out` is NULL or valid for one write; `manager` is NULL or a handle value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_new(
    manager: *const gpusvc_sync_manager,
    out: *mut *mut gpusvc_scheduler,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let h = new_handle(manager, SchedulerConfig::default())?;
        out.write(h);
        Ok(())
    })
}

fn new_handle(
    manager: *const gpusvc_sync_manager,
    config: SchedulerConfig,
) -> Result<*mut gpusvc_scheduler, FfiError> {
    let sync = if manager.is_null() {
        Arc::new(SyncPointManager::new())
    } else {
        crate::sync::manager(manager)?
    };
    Ok(handle::new_shared_gated(
        Kind::Scheduler,
        Scheduler::with_config(sync, config),
        Vec::new(),
    ))
}

/// Like `gpusvc_scheduler_new`, with settings: `*config` is read during the call (its first
/// clock reading included) and not kept. A time slice shorter than the granularity (after
/// defaults) is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `config` is NULL or valid for one read; `out` is NULL or valid for one write; `manager` is
/// NULL or a handle value. `config->now_ns` (when non-NULL) may be called with
/// `config->clock_user_data` from any thread that uses the scheduler, concurrently, until it is
/// freed; `config->on_task` (when non-NULL) with `config->on_task_user_data` from the driving
/// thread until it is freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_new_with_config(
    manager: *const gpusvc_sync_manager,
    config: *const gpusvc_scheduler_config,
    out: *mut *mut gpusvc_scheduler,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: NULL or valid for one read (contract). The integer and pointer fields accept
        // any bit pattern, and the callbacks are `Option`s of function pointers (NULL is `None`;
        // what a non-NULL one may do is the host's contract).
        let c = unsafe { struct_in(config, "config") }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let h = new_handle(manager, config_in(&c)?)?;
        out.write(h);
        Ok(())
    })
}

/// Frees a scheduler; NULL is a no-op. Pending tasks are dropped without running (each task's
/// `destroy` runs exactly once, here), its streams' sequences and the clients made through it
/// are destroyed. It may be called from inside one of its own tasks or callbacks: the task
/// running finishes, and nothing more runs — not the rest of the turn, not the rest of a task
/// that returns "continue later" — and the `gpusvc_scheduler_run_*` call in progress returns.
///
/// # Safety
/// `scheduler` is NULL or a handle value (a freed or foreign one is `GPUSVC_INVALID_HANDLE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_free(scheduler: *mut gpusvc_scheduler) -> gpusvc_result {
    ffi_guard(|| {
        if !scheduler.is_null() {
            // A call in progress (the driver, when this runs inside a task) holds its own
            // reference: shut down now, not when the last reference goes.
            self::scheduler(scheduler)?.shutdown();
        }
        handle::free(scheduler, Kind::Scheduler)
    })
}

/// Adds a stream of `priority` (a `gpusvc_scheduler_priority` value); its id into `*out_stream`.
///
/// # Safety
/// `out_stream` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_add_stream(
    scheduler: *const gpusvc_scheduler,
    priority: u32,
    out_stream: *mut u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_stream, "out_stream") }?;
        let p = self::priority(priority)?;
        let id = s.add_stream(p).0;
        out.write(id);
        Ok(())
    })
}

/// Removes a stream: its pending tasks are dropped without running, its sequence and the clients
/// made on it with `gpusvc_scheduler_create_client` destroyed (waits on their tokens end; the
/// tokens read as released) and the priority it lent through its waits taken back; what it did
/// into `*out_removed`.
///
/// # Safety
/// `out_removed` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_remove_stream(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    out_removed: *mut gpusvc_scheduler_removed_stream,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_removed, "out_removed") }?;
        let removed = s.remove_stream(StreamId(stream)).map_err(scheduler_error)?;
        let r = gpusvc_scheduler_removed_stream {
            dropped_tasks: removed.dropped_tasks as u64,
            lent: removed.lent_priority.is_some(),
            lent_priority: removed.lent_priority.map_or(0, priority_out),
        };
        out.write(r);
        Ok(())
    })
}

/// Enables or disables a stream. A disabled stream keeps its tasks and never runs.
///
/// # Safety
/// No pointer is dereferenced but the handle, which is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_set_enabled(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    enabled: bool,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        s.set_enabled(StreamId(stream), enabled)
            .map_err(scheduler_error)
    })
}

/// Sets a stream's base priority (a `gpusvc_scheduler_priority` value).
///
/// # Safety
/// No pointer is dereferenced but the handle, which is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_set_base_priority(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    priority: u32,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        let p = self::priority(priority)?;
        s.set_base_priority(StreamId(stream), p)
            .map_err(scheduler_error)
    })
}

/// The stream's base priority (as set by `gpusvc_scheduler_add_stream` or
/// `gpusvc_scheduler_set_base_priority`) as a `gpusvc_scheduler_priority` value into
/// `*out_priority`.
///
/// # Safety
/// `out_priority` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_base_priority(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    out_priority: *mut u32,
) -> gpusvc_result {
    // SAFETY: `out_priority` is NULL or valid for one write (contract).
    unsafe {
        stream_query(scheduler, stream, out_priority, "out_priority", |s, id| {
            s.base_priority(id).map(priority_out)
        })
    }
}

/// The number of tasks pending in `stream` (not yet run, or the rest of a continued one) into
/// `*out_count`.
///
/// # Safety
/// `out_count` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_pending_tasks(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    out_count: *mut usize,
) -> gpusvc_result {
    // SAFETY: `out_count` is NULL or valid for one write (contract).
    unsafe {
        stream_query(scheduler, stream, out_count, "out_count", |s, id| {
            s.pending_tasks(id)
        })
    }
}

/// The metrics of `priority` (a `gpusvc_scheduler_priority` value) since the scheduler was made
/// into `*out_metrics`.
///
/// # Safety
/// `out_metrics` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_metrics(
    scheduler: *const gpusvc_scheduler,
    priority: u32,
    out_metrics: *mut gpusvc_scheduler_priority_metrics,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_metrics, "out_metrics") }?;
        let p = self::priority(priority)?;
        let m = metrics_out(s.metrics().get(p));
        out.write(m);
        Ok(())
    })
}

/// The stream's scheduled priority (base, downgraded by time slices, raised by priority
/// inheritance) as a `gpusvc_scheduler_priority` value into `*out_priority`.
///
/// # Safety
/// `out_priority` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_scheduled_priority(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    out_priority: *mut u32,
) -> gpusvc_result {
    // SAFETY: `out_priority` is NULL or valid for one write (contract).
    unsafe {
        stream_query(scheduler, stream, out_priority, "out_priority", |s, id| {
            s.scheduled_priority(id).map(priority_out)
        })
    }
}

/// Enqueues `task` at the back of `stream`: `run` runs on the driving thread, after `start`,
/// once every token of `waits` is released or can never be. The order number goes to
/// `*out_order_num`. On success the scheduler owns the task's user data until it calls
/// `destroy`; on failure nothing is kept and nothing is called.
///
/// # Safety
/// `task` is NULL or valid for one read; its `waits` is NULL or valid for `wait_count` reads;
/// `out_order_num` is NULL or valid for one write; the callbacks and user data may be used from
/// the driving thread (and `destroy` from the thread that drops the task) until `destroy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_enqueue(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    task: *const gpusvc_scheduler_task,
    out_order_num: *mut u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        // SAFETY: NULL or valid for one read (contract).
        let task = unsafe { struct_in(task, "task") }?;
        let Some(run) = task.run else {
            return Err(null_argument("task->run"));
        };
        let count = task.wait_count;
        if count > 0 && task.waits.is_null() {
            return Err(null_argument("task->waits"));
        }
        if count > isize::MAX as usize / size_of::<gpusvc_sync_token>() {
            return Err(invalid_argument(format!(
                "`task->wait_count` {count} is absurd"
            )));
        }
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_order_num, "out_order_num") }?;
        let waits: Vec<SyncToken> = (0..count)
            // SAFETY: `waits` is non-null and valid for `count` reads (contract); `i < count`.
            .map(|i| unsafe { read_token(task.waits.add(i)) })
            .collect();
        let ud = UserData::new(task.user_data);
        let disarmed = task.destroy.map(|d| (d, Arc::new(AtomicBool::new(false))));
        let disarm = disarmed.as_ref().map(|(_, flag)| flag.clone());
        let mut t = Task::new(host_task(HostTask {
            run,
            destroy: disarmed,
            user_data: ud,
        }))
        .wait_for(waits);
        if let Some(start) = task.start {
            t = t.on_start(move || {
                // SAFETY: a host function taking its own user_data (contract).
                unsafe { start(ud.get()) }
            });
        }
        let n = match s.try_enqueue(StreamId(stream), t) {
            Ok(n) => n,
            Err((e, t)) => {
                if let Some(flag) = disarm {
                    flag.store(true, Ordering::Relaxed);
                }
                drop(t);
                return Err(scheduler_error(e));
            }
        };
        out.write(n);
        Ok(())
    })
}

/// Runs the next stream's turn; the number of task runs into `*out_ran` (0 when nothing was
/// runnable, or another call is driving).
///
/// # Safety
/// `out_ran` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_run_next(
    scheduler: *const gpusvc_scheduler,
    out_ran: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_ran, "out_ran") }?;
        let n = s.run_next().unwrap_or(0);
        out.write(n);
        Ok(())
    })
}

/// Runs until nothing is runnable; the number of task runs (continuations included) into
/// `*out_ran`.
///
/// # Safety
/// `out_ran` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_run_until_idle(
    scheduler: *const gpusvc_scheduler,
    out_ran: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_ran, "out_ran") }?;
        let n = s.run_until_idle();
        out.write(n);
        Ok(())
    })
}

/// Whether the running task should yield (runnable work of higher priority exists) into
/// `*out_yield`. Advisory.
///
/// # Safety
/// `out_yield` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_should_yield(
    scheduler: *const gpusvc_scheduler,
    out_yield: *mut bool,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out_yield, "out_yield") }?;
        let y = s.should_yield();
        out.write(y);
        Ok(())
    })
}

/// The sync-points sequence id of `stream` into `*out_sequence`. With a scheduler made over a
/// `gpusvc_sync_manager`, a client the host creates on it (`gpusvc_sync_client_create`) is
/// released by `stream` exactly like one from `gpusvc_scheduler_create_client`: a stream
/// waiting on its tokens lends its priority to `stream`.
///
/// # Safety
/// `out_sequence` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_stream_sequence(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    out_sequence: *mut u64,
) -> gpusvc_result {
    // SAFETY: `out_sequence` is NULL or valid for one write (contract).
    unsafe {
        stream_query(scheduler, stream, out_sequence, "out_sequence", |s, id| {
            s.sequence(id).map(|q| q.id().0)
        })
    }
}

/// Creates the sync client `(namespace_id, command_buffer_id)` bound to `stream`'s sequence: a
/// stream waiting on its tokens lends its priority to `stream`. Its tokens are released from a
/// task of `stream` with `gpusvc_scheduler_release` (or `gpusvc_sync_client_release` when the
/// scheduler was made over that sync manager). The scheduler owns the client: it is destroyed
/// with its stream (`gpusvc_scheduler_remove_stream`, `gpusvc_scheduler_free`), unless it was
/// destroyed before with `gpusvc_sync_client_destroy` (a client created since under the same
/// id is the host's and is left alone).
///
/// # Safety
/// No pointer is dereferenced but the handle, which is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_create_client(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    namespace_id: i8,
    command_buffer_id: u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        let id = client_id(namespace_id, command_buffer_id);
        s.create_client(StreamId(stream), id)
            .map_err(scheduler_error)?;
        Ok(())
    })
}

/// Releases `release_count` on a client of the scheduler's sync manager; only while its stream
/// runs a task (else `GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING`). A count not above the released
/// one is ignored.
///
/// # Safety
/// No pointer is dereferenced but the handle, which is checked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_release(
    scheduler: *const gpusvc_scheduler,
    namespace_id: i8,
    command_buffer_id: u64,
    release_count: u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        s.sync_points()
            .release(client_id(namespace_id, command_buffer_id), release_count)
            .map_err(client_error)?;
        Ok(())
    })
}
