//! The scheduler's C types (priorities and task results passed as `uint32_t`, the callback
//! types, the task, config, sample, metrics and removal structs) and their conversions to and
//! from the `gpu-scheduler` crate's types.

use std::ffi::c_void;
use std::time::Duration;

use gpu_scheduler::{
    Priority, PriorityMetrics, RemovedStream, SchedulerError, StreamMetrics, TaskSample,
};

use crate::kit::{FfiError, c_enum, gpusvc_result, growable, sized_default};
use crate::sync::{client_error, gpusvc_sync_token, order_error};

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

impl From<gpusvc_scheduler_priority> for Priority {
    fn from(p: gpusvc_scheduler_priority) -> Self {
        use gpusvc_scheduler_priority::*;
        match p {
            GPUSVC_SCHEDULER_PRIORITY_LOW => Priority::Low,
            GPUSVC_SCHEDULER_PRIORITY_NORMAL => Priority::Normal,
            GPUSVC_SCHEDULER_PRIORITY_HIGH => Priority::High,
            GPUSVC_SCHEDULER_PRIORITY_REAL_TIME => Priority::RealTime,
        }
    }
}

/// A priority argument; an unknown value is `GPUSVC_INVALID_ARGUMENT`.
pub(crate) fn priority_in(value: u32) -> Result<Priority, FfiError> {
    gpusvc_scheduler_priority::decode(value).map(Priority::from)
}

/// A priority as C reads it back (a `gpusvc_scheduler_priority` value: both lists are lowest
/// first, see the test below).
pub(crate) fn priority_out(p: Priority) -> u32 {
    p.index() as u32
}

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
/// passed to each callback. The host sets `struct_size = sizeof(struct gpusvc_scheduler_task)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_scheduler_task {
    /// `sizeof(struct gpusvc_scheduler_task)`, set by the host: the library reads only that many
    /// bytes, the fields past it take their defaults (NULL, 0).
    pub struct_size: usize,
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

growable!(gpusvc_scheduler_task {
    first: wait_count,
    last: wait_count,
    defaults: gpusvc_scheduler_task {
        struct_size: 0,
        run: None,
        start: None,
        destroy: None,
        user_data: std::ptr::null_mut(),
        waits: std::ptr::null(),
        wait_count: 0,
    },
});

/// A host clock: monotonic nanoseconds from any origin. Called from any thread that uses the
/// scheduler, possibly with scheduler locks held: it must not call `gpusvc_scheduler_*`.
pub type gpusvc_scheduler_clock_fn = Option<unsafe extern "C" fn(user_data: *mut c_void) -> u64>;

/// One task run, as given to a `gpusvc_scheduler_task_sample_fn`. The library sets
/// `struct_size`: a host reads a field only when it lies within `struct_size` (a field it knows
/// that lies past it is one an older library does not fill).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_scheduler_task_sample {
    /// `sizeof(struct gpusvc_scheduler_task_sample)` as the library knows it, set by the library.
    pub struct_size: usize,
    /// The stream's scheduled priority when the task ran (a `gpusvc_scheduler_priority` value).
    pub priority: u32,
    /// Whether this run continued a task that returned `GPUSVC_SCHEDULER_TASK_CONTINUE_LATER`.
    pub continuation: bool,
    /// Enqueue to first start, in nanoseconds (0 for a continuation).
    pub delay_ns: u64,
    /// Time the task callback ran, in nanoseconds.
    pub run_ns: u64,
}

growable!(gpusvc_scheduler_task_sample {
    first: run_ns,
    last: run_ns
});

impl From<&TaskSample> for gpusvc_scheduler_task_sample {
    fn from(s: &TaskSample) -> Self {
        gpusvc_scheduler_task_sample {
            struct_size: size_of::<Self>(),
            priority: priority_out(s.priority),
            delay_ns: nanos(s.delay),
            run_ns: nanos(s.run),
            continuation: s.continuation,
        }
    }
}

/// A metrics callback: called on the driving thread after every task run, with no gpusvc lock
/// held; `sample` is valid for the call only.
pub type gpusvc_scheduler_task_sample_fn = Option<
    unsafe extern "C" fn(sample: *const gpusvc_scheduler_task_sample, user_data: *mut c_void),
>;

/// Settings of `gpusvc_scheduler_new_with_config`. Zero-initialized with `struct_size =
/// sizeof(struct gpusvc_scheduler_config)`, it gives the defaults (5 ms slices, 1 ms
/// granularity, the system monotonic clock, no metrics callback); so does every field past a
/// host's `struct_size`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_scheduler_config {
    /// `sizeof(struct gpusvc_scheduler_config)`, set by the host: the library reads only that
    /// many bytes, the fields past it take their defaults (0, NULL).
    pub struct_size: usize,
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

growable!(gpusvc_scheduler_config {
    first: on_task_user_data,
    last: on_task_user_data,
    defaults: gpusvc_scheduler_config {
        struct_size: 0,
        time_slice_ns: 0,
        granularity_ns: 0,
        now_ns: None,
        clock_user_data: std::ptr::null_mut(),
        on_task: None,
        on_task_user_data: std::ptr::null_mut(),
    },
});

/// Metrics of one priority level (`gpusvc_scheduler_metrics`). The host sets `struct_size =
/// sizeof(struct gpusvc_scheduler_priority_metrics)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_scheduler_priority_metrics {
    /// Set by the host to `sizeof(struct gpusvc_scheduler_priority_metrics)` before the call:
    /// the library writes only that many bytes and sets this to the bytes written.
    pub struct_size: usize,
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

impl From<&PriorityMetrics> for gpusvc_scheduler_priority_metrics {
    fn from(m: &PriorityMetrics) -> Self {
        gpusvc_scheduler_priority_metrics {
            struct_size: size_of::<Self>(),
            tasks: m.tasks,
            continuations: m.continuations,
            run_ns: nanos(m.time_run),
            sample_count: m.delays.len() as u64,
            delay_p50_ns: m.delay_p50.map_or(0, nanos),
            delay_p99_ns: m.delay_p99.map_or(0, nanos),
        }
    }
}

growable!(gpusvc_scheduler_priority_metrics {
    first: delay_p99_ns,
    last: delay_p99_ns
});
sized_default!(gpusvc_scheduler_priority_metrics);

/// What `gpusvc_scheduler_remove_stream` did. The host sets `struct_size = sizeof(struct
/// gpusvc_scheduler_removed_stream)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_scheduler_removed_stream {
    /// Set by the host to `sizeof(struct gpusvc_scheduler_removed_stream)` before the call: the
    /// library writes only that many bytes and sets this to the bytes written.
    pub struct_size: usize,
    /// Pending tasks dropped without running.
    pub dropped_tasks: u64,
    /// Whether the stream was lending its priority to a releaser (through pending waits); that
    /// loan ends with the removal.
    pub lent: bool,
    /// The highest priority it lent (a `gpusvc_scheduler_priority` value); 0 when `!lent`.
    pub lent_priority: u32,
}

impl From<RemovedStream> for gpusvc_scheduler_removed_stream {
    fn from(r: RemovedStream) -> Self {
        gpusvc_scheduler_removed_stream {
            struct_size: size_of::<Self>(),
            dropped_tasks: r.dropped_tasks as u64,
            lent: r.lent_priority.is_some(),
            lent_priority: r.lent_priority.map_or(0, priority_out),
        }
    }
}

growable!(gpusvc_scheduler_removed_stream {
    first: lent_priority,
    last: lent_priority
});
sized_default!(gpusvc_scheduler_removed_stream);

/// Metrics of one stream (`gpusvc_scheduler_stream_metrics`): what its tasks did, whatever
/// priority each ran at. A task counts under the priority the stream was scheduled at when it
/// ran (raised by inheritance, lowered by time slices). The host sets `struct_size =
/// sizeof(struct gpusvc_scheduler_stream_metrics_snapshot)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_scheduler_stream_metrics_snapshot {
    /// Set by the host to `sizeof(struct gpusvc_scheduler_stream_metrics_snapshot)` before the
    /// call: the library writes only that many bytes and sets this to the bytes written.
    pub struct_size: usize,
    /// Tasks started (continuations not counted).
    pub tasks: u64,
    /// Continuation runs (a task run again after `GPUSVC_SCHEDULER_TASK_CONTINUE_LATER`).
    pub continuations: u64,
    /// Sum of the tasks' enqueue-to-start delays, in nanoseconds.
    pub wait_ns: u64,
    /// The longest enqueue-to-start delay, in nanoseconds.
    pub max_wait_ns: u64,
    /// Total time run by its task callbacks, continuations included, in nanoseconds.
    pub run_ns: u64,
    /// Tasks started at each scheduled priority, indexed by `gpusvc_scheduler_priority` value.
    pub tasks_at: [u64; 4],
    /// Time run at each scheduled priority, in nanoseconds, indexed by
    /// `gpusvc_scheduler_priority` value.
    pub run_ns_at: [u64; 4],
}

impl From<&StreamMetrics> for gpusvc_scheduler_stream_metrics_snapshot {
    fn from(m: &StreamMetrics) -> Self {
        let (mut tasks_at, mut run_ns_at) = ([0; 4], [0; 4]);
        for p in Priority::ALL {
            let c = priority_out(p) as usize;
            tasks_at[c] = m.tasks_at[p.index()];
            run_ns_at[c] = nanos(m.time_run_at[p.index()]);
        }
        gpusvc_scheduler_stream_metrics_snapshot {
            struct_size: size_of::<Self>(),
            tasks: m.tasks,
            continuations: m.continuations,
            wait_ns: nanos(m.time_waiting),
            max_wait_ns: nanos(m.max_wait),
            run_ns: nanos(m.time_run),
            tasks_at,
            run_ns_at,
        }
    }
}

growable!(gpusvc_scheduler_stream_metrics_snapshot {
    first: run_ns_at,
    last: run_ns_at
});
sized_default!(gpusvc_scheduler_stream_metrics_snapshot);

/// Nanoseconds, saturated at `u64::MAX`.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A scheduler error as a result code (sync errors as the sync functions report them).
pub(crate) fn scheduler_error(e: SchedulerError) -> FfiError {
    match e {
        SchedulerError::UnknownStream(id) => FfiError::new(
            gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM,
            format!("scheduler stream {} does not exist", id.0),
        ),
        SchedulerError::Order(e) => order_error(e),
        SchedulerError::Client(e) => client_error(e),
        SchedulerError::ShutDown => FfiError::new(
            gpusvc_result::GPUSVC_SCHEDULER_SHUT_DOWN,
            "the scheduler was freed while this call was in flight",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_convert_both_ways() {
        for (i, p) in gpusvc_scheduler_priority::all().iter().enumerate() {
            assert_eq!(priority_in(*p as u32).unwrap(), Priority::ALL[i]);
            assert_eq!(priority_out(Priority::ALL[i]), *p as u32);
        }
        assert!(priority_in(4).is_err());
    }
}
