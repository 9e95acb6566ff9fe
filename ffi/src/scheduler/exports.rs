//! The `gpusvc_scheduler_*` functions: making and freeing a scheduler, streams, tasks, driving,
//! queries and the sync clients it owns.

use std::sync::Arc;

use gpu_scheduler::{Priority, Scheduler, SchedulerConfig, SchedulerError, StreamId};
use sync_points::SyncPointManager;

use crate::kit::handle::{self, Kind};
use crate::kit::{
    FfiError, Out, answer_into, answer_sized_into, ffi_guard, gpusvc_result, sized_in,
};
use crate::scheduler::host::{HostTask, config_in};
use crate::scheduler::types::*;
use crate::scheduler::{gpusvc_scheduler, scheduler};
use crate::sync::{client_error, client_id, gpusvc_sync_manager};

/// A new scheduler handle over `manager`'s sync points (NULL: its own).
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

/// The body of an export that answers through `out`: the handle is checked, then `out`; the
/// answer is written only on success.
///
/// # Safety
/// `out` is NULL or valid for one write.
unsafe fn query<T>(
    scheduler: *const gpusvc_scheduler,
    out: *mut T,
    out_name: &str,
    answer: impl FnOnce(&Scheduler) -> Result<T, FfiError>,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { answer_into(|| self::scheduler(scheduler), out, out_name, |s| answer(&s)) }
}

/// [`query`] about `stream`.
///
/// # Safety
/// `out` is NULL or valid for one write.
unsafe fn stream_query<T>(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    out: *mut T,
    out_name: &str,
    answer: impl FnOnce(&Scheduler, StreamId) -> Result<T, SchedulerError>,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        query(scheduler, out, out_name, |s| {
            answer(s, StreamId(stream)).map_err(scheduler_error)
        })
    }
}

/// [`stream_query`] of a priority, written to `out_priority` as a `gpusvc_scheduler_priority`
/// value.
///
/// # Safety
/// `out_priority` is NULL or valid for one write.
unsafe fn priority_query(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    out_priority: *mut u32,
    read: fn(&Scheduler, StreamId) -> Result<Priority, SchedulerError>,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        stream_query(scheduler, stream, out_priority, "out_priority", |s, id| {
            read(s, id).map(priority_out)
        })
    }
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
        out.write(new_handle(manager, SchedulerConfig::default())?);
        Ok(())
    })
}

/// Like `gpusvc_scheduler_new`, with settings: `*config` is read during the call (its first
/// clock reading included) and not kept. A time slice shorter than the granularity (after
/// defaults) is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `config` is NULL or valid for reading `config->struct_size` bytes; `out` is NULL or valid
/// for one write; `manager` is
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
    // SAFETY: `config` is NULL or valid for `struct_size` bytes (contract): its integer and
    // pointer fields accept any bit pattern, and the callbacks are `Option`s of function
    // pointers (NULL is `None`; what a non-NULL one may do is the host's contract). `out` is
    // forwarded.
    unsafe {
        answer_into(
            || sized_in(config, "config"),
            out,
            "out",
            |c| new_handle(manager, config_in(&c)?),
        )
    }
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
    // SAFETY: forwarded from this function's contract.
    unsafe {
        query(scheduler, out_stream, "out_stream", |s| {
            Ok(s.add_stream(priority_in(priority)?).0)
        })
    }
}

/// Removes a stream: its pending tasks are dropped without running, its sequence and the clients
/// made on it with `gpusvc_scheduler_create_client` destroyed (waits on their tokens end; the
/// tokens read as released) and the priority it lent through its waits taken back; what it did
/// into `*out_removed` (the host sets its `struct_size`; only that many bytes are written, and
/// `struct_size` becomes the bytes written).
///
/// # Safety
/// `out_removed` is NULL or valid for reading and writing `out_removed->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_remove_stream(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    out_removed: *mut gpusvc_scheduler_removed_stream,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || self::scheduler(scheduler),
            out_removed,
            "out_removed",
            |s| {
                s.remove_stream(StreamId(stream))
                    .map(Into::into)
                    .map_err(scheduler_error)
            },
        )
    }
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
        self::scheduler(scheduler)?
            .set_enabled(StreamId(stream), enabled)
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
        s.set_base_priority(StreamId(stream), priority_in(priority)?)
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
    // SAFETY: forwarded from this function's contract.
    unsafe { priority_query(scheduler, stream, out_priority, Scheduler::base_priority) }
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
    // SAFETY: forwarded from this function's contract.
    unsafe {
        stream_query(
            scheduler,
            stream,
            out_count,
            "out_count",
            Scheduler::pending_tasks,
        )
    }
}

/// The metrics of `priority` (a `gpusvc_scheduler_priority` value) since the scheduler was made
/// into `*out_metrics` (the host sets its `struct_size`; only that many bytes are written, and
/// `struct_size` becomes the bytes written).
///
/// # Safety
/// `out_metrics` is NULL or valid for reading and writing `out_metrics->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_metrics(
    scheduler: *const gpusvc_scheduler,
    priority: u32,
    out_metrics: *mut gpusvc_scheduler_priority_metrics,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || self::scheduler(scheduler),
            out_metrics,
            "out_metrics",
            |s| Ok(s.metrics().get(priority_in(priority)?).into()),
        )
    }
}

/// The metrics of `stream` since it was added into `*out_metrics` (the host sets its
/// `struct_size`; only that many bytes are written, and `struct_size` becomes the bytes
/// written). `GPUSVC_SCHEDULER_UNKNOWN_STREAM` once the stream is removed: its metrics go with
/// it (read them before removing it). A task is counted when the driver has finished its
/// turn.
///
/// # Safety
/// `out_metrics` is NULL or valid for reading and writing `out_metrics->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_stream_metrics(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    out_metrics: *mut gpusvc_scheduler_stream_metrics_snapshot,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || self::scheduler(scheduler),
            out_metrics,
            "out_metrics",
            |s| {
                s.stream_metrics(StreamId(stream))
                    .map(|m| (&m).into())
                    .map_err(scheduler_error)
            },
        )
    }
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
    // SAFETY: forwarded from this function's contract.
    unsafe {
        priority_query(
            scheduler,
            stream,
            out_priority,
            Scheduler::scheduled_priority,
        )
    }
}

/// Enqueues `task` at the back of `stream`: `run` runs on the driving thread, after `start`,
/// once every token of `waits` is released or can never be. The order number goes to
/// `*out_order_num`. On success the scheduler owns the task's user data until it calls
/// `destroy`; on failure nothing is kept and nothing is called.
///
/// # Safety
/// `task` is NULL or valid for reading `task->struct_size` bytes; its `waits` is NULL or valid for `wait_count` reads;
/// `out_order_num` is NULL or valid for one write; the callbacks and user data may be used from
/// the driving thread (and `destroy` from the thread that drops the task) until `destroy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_enqueue(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    task: *const gpusvc_scheduler_task,
    out_order_num: *mut u64,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract (`task`, its `waits`, `out_order_num`).
    unsafe {
        answer_into(
            || {
                Ok((
                    self::scheduler(scheduler)?,
                    HostTask::read(&sized_in(task, "task")?)?,
                ))
            },
            out_order_num,
            "out_order_num",
            |(s, task)| task.enqueue(&s, StreamId(stream)).map_err(scheduler_error),
        )
    }
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
    // SAFETY: forwarded from this function's contract.
    unsafe {
        query(scheduler, out_ran, "out_ran", |s| {
            Ok(s.run_next().unwrap_or(0))
        })
    }
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
    // SAFETY: forwarded from this function's contract.
    unsafe { query(scheduler, out_ran, "out_ran", |s| Ok(s.run_until_idle())) }
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
    // SAFETY: forwarded from this function's contract.
    unsafe { query(scheduler, out_yield, "out_yield", |s| Ok(s.should_yield())) }
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
    // SAFETY: forwarded from this function's contract.
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
        let id = client_id(namespace_id, command_buffer_id);
        self::scheduler(scheduler)?
            .create_client(StreamId(stream), id)
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
        self::scheduler(scheduler)?
            .sync_points()
            .release(client_id(namespace_id, command_buffer_id), release_count)
            .map_err(client_error)?;
        Ok(())
    })
}
