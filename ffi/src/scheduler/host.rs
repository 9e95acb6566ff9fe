//! The host's side of a scheduler as the crate's types: its clock ([`Clock`]), its metrics
//! callback, its config, and its tasks (a body that owns the host's user data and calls
//! `destroy` when the scheduler is done with it).

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use gpu_scheduler::{
    Clock, MetricsCallback, Scheduler, SchedulerConfig, SchedulerError, StreamId, Task, TaskFn,
    TaskResult, TaskSample,
};
use sync_points::SyncToken;

use crate::kit::{FfiError, HostFn, invalid_argument, null_argument};
use crate::scheduler::types::{
    gpusvc_scheduler_config, gpusvc_scheduler_task, gpusvc_scheduler_task_result,
    gpusvc_scheduler_task_sample,
};
use crate::sync::tokens_in;

type ClockFn = unsafe extern "C" fn(*mut c_void) -> u64;
type SampleFn = unsafe extern "C" fn(*const gpusvc_scheduler_task_sample, *mut c_void);
type RunFn = unsafe extern "C" fn(*mut c_void) -> u32;
type UserDataFn = unsafe extern "C" fn(*mut c_void);

/// The host's clock: ns since its first reading, never backwards.
/// Used from any thread that uses the scheduler, at the same time
/// (`gpusvc_scheduler_new_with_config`'s contract).
#[derive(Debug)]
struct HostClock {
    now_ns: HostFn<ClockFn>,
    first: u64,
    /// The highest offset from `first` reported so far.
    latest: AtomicU64,
}

impl HostClock {
    /// Takes the first reading: the origin.
    fn new(now_ns: HostFn<ClockFn>) -> Self {
        let mut clock = HostClock {
            now_ns,
            first: 0,
            latest: AtomicU64::new(0),
        };
        clock.first = clock.read();
        clock
    }

    fn read(&self) -> u64 {
        // SAFETY: a host function taking its own user_data, from any thread (contract).
        unsafe { (self.now_ns.f)(self.now_ns.user_data.get()) }
    }
}

impl Clock for HostClock {
    fn now_ns(&self) -> u64 {
        let offset = self.read().saturating_sub(self.first);
        // Relaxed: a max over readings; the scheduler orders its own uses of time.
        self.latest.fetch_max(offset, Ordering::Relaxed).max(offset)
    }
}

/// The host's metrics callback, called from the driving thread (whichever thread that is; one
/// at a time) after every task run.
fn metrics_callback(host: HostFn<SampleFn>) -> MetricsCallback {
    Arc::new(move |s: &TaskSample| {
        let sample = gpusvc_scheduler_task_sample::from(s);
        // SAFETY: a host function taking its own user_data (contract); the sample outlives the
        // call.
        unsafe { (host.f)(&sample, host.user_data.get()) };
    })
}

/// The settings of `c` (0 and NULL fields: the defaults). The crate's rule
/// ([`SchedulerConfig::validate`]) is checked before the host clock's first reading, so a
/// refused config never calls the host.
pub(crate) fn config_in(c: &gpusvc_scheduler_config) -> Result<SchedulerConfig, FfiError> {
    let mut config = SchedulerConfig::default();
    if c.time_slice_ns != 0 {
        config.time_slice = Duration::from_nanos(c.time_slice_ns);
    }
    if c.granularity_ns != 0 {
        config.granularity = Duration::from_nanos(c.granularity_ns);
    }
    config
        .validate()
        .map_err(|e| invalid_argument(e.to_string()))?;
    if let Some(now_ns) = HostFn::optional(c.now_ns, c.clock_user_data) {
        config.clock = Arc::new(HostClock::new(now_ns));
    }
    if let Some(host) = HostFn::optional(c.on_task, c.on_task_user_data) {
        config.metrics_callback = Some(metrics_callback(host));
    }
    Ok(config)
}

/// A host task read from a `gpusvc_scheduler_task`, ready to enqueue.
#[derive(Debug)]
pub(crate) struct HostTask {
    run: HostFn<RunFn>,
    start: Option<HostFn<UserDataFn>>,
    destroy: Option<UserDataFn>,
    waits: Vec<SyncToken>,
}

impl HostTask {
    /// Reads `task`: its `run` is required (NULL is `GPUSVC_NULL_ARGUMENT`) and its `waits`
    /// are copied.
    ///
    /// # Safety
    /// `task.waits` is NULL or valid for `task.wait_count` reads.
    pub(crate) unsafe fn read(task: &gpusvc_scheduler_task) -> Result<Self, FfiError> {
        let run = task.run.ok_or_else(|| null_argument("task->run"))?;
        // SAFETY: forwarded from this function's contract.
        let waits = unsafe {
            tokens_in(
                task.waits,
                task.wait_count,
                "task->waits",
                "`task->wait_count`",
            )
        }?;
        Ok(HostTask {
            run: HostFn::new(run, task.user_data),
            start: HostFn::optional(task.start, task.user_data),
            destroy: task.destroy,
            waits,
        })
    }

    /// Enqueues the task at the back of `stream`; its order number. From then the scheduler
    /// owns the user data until it calls `destroy`; when the enqueue is refused nothing is
    /// called and the user data stays the host's.
    pub(crate) fn enqueue(self, s: &Scheduler, stream: StreamId) -> Result<u64, SchedulerError> {
        let refused = Arc::new(AtomicBool::new(false));
        let body = Body {
            run: self.run,
            destroy: self.destroy,
            refused: refused.clone(),
        };
        let mut task = Task::new(task_fn(body)).wait_for(self.waits);
        if let Some(start) = self.start {
            task = task.on_start(move || {
                // SAFETY: a host function taking its own user_data, on the driving thread
                // (contract of the enqueue).
                unsafe { (start.f)(start.user_data.get()) }
            });
        }
        s.try_enqueue(stream, task).map_err(|(e, task)| {
            // Relaxed: set and read on this thread, before the task drops here; a task that was
            // enqueued is never refused.
            refused.store(true, Ordering::Relaxed);
            drop(task);
            e
        })
    }
}

/// A host task's body, owned by its closure: dropping it (after the completing run, or unrun)
/// calls `destroy` once, unless the enqueue was refused.
struct Body {
    run: HostFn<RunFn>,
    destroy: Option<UserDataFn>,
    refused: Arc<AtomicBool>,
}

impl Drop for Body {
    fn drop(&mut self) {
        if let Some(destroy) = self.destroy {
            // Relaxed: see `HostTask::enqueue`.
            if !self.refused.load(Ordering::Relaxed) {
                // SAFETY: a host function taking its own user_data (contract of the enqueue);
                // called once, as this drop runs once.
                unsafe { destroy(self.run.user_data.get()) }
            }
        }
    }
}

fn task_fn(body: Body) -> TaskFn {
    Box::new(move |_| {
        // SAFETY: a host function taking its own user_data, on the driving thread (contract of
        // the enqueue).
        let r = unsafe { (body.run.f)(body.run.user_data.get()) };
        if gpusvc_scheduler_task_result::from_u32(r)
            == Some(gpusvc_scheduler_task_result::GPUSVC_SCHEDULER_TASK_CONTINUE_LATER)
        {
            TaskResult::ContinueLater(task_fn(body))
        } else {
            // `body` drops here: `destroy` after the completing run.
            TaskResult::Done
        }
    })
}
