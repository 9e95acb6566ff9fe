//! `gpusvc_scheduler_*`: the prioritized GPU stream scheduler (the `gpu-scheduler` crate) seen
//! from C.
//!
//! A `gpusvc_scheduler` may be used from any thread; one thread at a time drives it
//! (`gpusvc_scheduler_run_next` / `gpusvc_scheduler_run_until_idle`; a concurrent or re-entrant
//! drive runs nothing). Streams are named by the `uint64_t` id `gpusvc_scheduler_add_stream`
//! gives. Task and start callbacks run on the driving thread with no gpusvc lock held: they may
//! call back into the library (enqueue, enable streams, release tokens, ...).

use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

use gpu_scheduler::{Priority, Scheduler, SchedulerError, StreamId, Task, TaskFn, TaskResult};
use sync_points::{ClientId, SyncPointManager, SyncToken};

use crate::args::write;
use crate::boundary::{FfiError, ffi_guard, null_argument, out_ptr};
use crate::handle::{self, Kind};
use crate::result::gpusvc_result;
use crate::sync::{
    client_error, client_id, gpusvc_sync_manager, gpusvc_sync_token, order_error, read_token,
    sync_points_of,
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

/// A task body: returns a `gpusvc_scheduler_task_result` value (any value other than
/// `GPUSVC_SCHEDULER_TASK_CONTINUE_LATER` means done).
pub type gpusvc_scheduler_task_fn = Option<unsafe extern "C" fn(user_data: *mut c_void) -> u32>;

/// A start callback, run just before its task first starts.
pub type gpusvc_scheduler_start_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// The object behind a handle: the scheduler, and the clients made through it (destroyed with
/// it, so no wait outlives it).
#[derive(Debug)]
struct SchedulerHandle {
    inner: Arc<Scheduler>,
    clients: Mutex<HashSet<ClientId>>,
}

fn clients(m: &Mutex<HashSet<ClientId>>) -> MutexGuard<'_, HashSet<ClientId>> {
    // The set is consistent at every point a panic could happen.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for SchedulerHandle {
    fn drop(&mut self) {
        for id in std::mem::take(&mut *clients(&self.clients)) {
            self.inner.sync_points().destroy_client(id);
        }
    }
}

fn scheduler(s: *const gpusvc_scheduler) -> Result<Arc<SchedulerHandle>, FfiError> {
    handle::shared(s, "scheduler", Kind::Scheduler)
}

fn priority(value: u32) -> Result<Priority, FfiError> {
    match value {
        0 => Ok(Priority::Low),
        1 => Ok(Priority::Normal),
        2 => Ok(Priority::High),
        3 => Ok(Priority::RealTime),
        other => Err(crate::args::invalid_argument(format!(
            "unknown gpusvc_scheduler_priority value {other}"
        ))),
    }
}

fn priority_out(p: Priority) -> u32 {
    p.index() as u32
}

fn scheduler_error(e: SchedulerError) -> FfiError {
    match e {
        SchedulerError::UnknownStream(id) => FfiError::new(
            gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM,
            format!("scheduler stream {} does not exist", id.0),
        ),
        SchedulerError::Order(e) => order_error(0, e),
        SchedulerError::Client(e) => client_error(e),
    }
}

/// A host pointer carried to the driving thread.
#[derive(Clone, Copy)]
struct UserData(*mut c_void);

// SAFETY: `gpusvc_scheduler_enqueue`'s contract: callbacks and their user_data may be used from
// the driving thread.
unsafe impl Send for UserData {}

fn host_task(f: unsafe extern "C" fn(*mut c_void) -> u32, user_data: UserData) -> TaskFn {
    Box::new(move |_| {
        let ud = user_data;
        // SAFETY: a host function taking its own user_data (contract of the enqueue).
        let r = unsafe { f(ud.0) };
        if r == gpusvc_scheduler_task_result::GPUSVC_SCHEDULER_TASK_CONTINUE_LATER as u32 {
            TaskResult::ContinueLater(host_task(f, ud))
        } else {
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
        let out = out_ptr(out, "out")?;
        let sync = if manager.is_null() {
            Arc::new(SyncPointManager::new())
        } else {
            sync_points_of(manager)?
        };
        let h = handle::new_shared(
            Kind::Scheduler,
            SchedulerHandle {
                inner: Scheduler::new(sync),
                clients: Mutex::new(HashSet::new()),
            },
        );
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, h) };
        Ok(())
    })
}

/// Frees a scheduler; NULL is a no-op. Pending tasks are dropped without running, its streams'
/// sequences and the clients made through it are destroyed.
///
/// # Safety
/// `scheduler` is NULL or a handle value (a freed or foreign one is `GPUSVC_INVALID_HANDLE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_free(scheduler: *mut gpusvc_scheduler) -> gpusvc_result {
    ffi_guard(|| handle::free(scheduler, Kind::Scheduler))
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
        let out = out_ptr(out_stream, "out_stream")?;
        let p = self::priority(priority)?;
        let id = s.inner.add_stream(p).0;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, id) };
        Ok(())
    })
}

/// Removes a stream: its pending tasks are dropped without running (their count into
/// `*out_dropped`) and its sequence destroyed.
///
/// # Safety
/// `out_dropped` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_remove_stream(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    out_dropped: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        let out = out_ptr(out_dropped, "out_dropped")?;
        let removed = s
            .inner
            .remove_stream(StreamId(stream))
            .map_err(scheduler_error)?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, removed.dropped_tasks) };
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
        s.inner
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
        let p = self::priority(priority)?;
        s.inner
            .set_base_priority(StreamId(stream), p)
            .map_err(scheduler_error)
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
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        let out = out_ptr(out_priority, "out_priority")?;
        let p = s
            .inner
            .scheduled_priority(StreamId(stream))
            .map_err(scheduler_error)?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, priority_out(p)) };
        Ok(())
    })
}

/// Enqueues a task at the back of `stream`: `task(task_user_data)` runs on the driving thread,
/// after `start(start_user_data)` when `start` is non-NULL, once every token of `tokens` (`count`
/// of them; NULL when 0) is released or can never be. The task's order number goes to
/// `*out_order_num`.
///
/// # Safety
/// `tokens` is NULL or valid for `count` reads; `out_order_num` is NULL or valid for one write;
/// the callbacks and their user data may be used from the driving thread until the task runs to
/// completion or is dropped.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_scheduler_enqueue(
    scheduler: *const gpusvc_scheduler,
    stream: u64,
    task: gpusvc_scheduler_task_fn,
    task_user_data: *mut c_void,
    start: gpusvc_scheduler_start_fn,
    start_user_data: *mut c_void,
    tokens: *const gpusvc_sync_token,
    count: usize,
    out_order_num: *mut u64,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::scheduler(scheduler)?;
        let Some(task) = task else {
            return Err(null_argument("task"));
        };
        if count > 0 && tokens.is_null() {
            return Err(null_argument("tokens"));
        }
        if count > isize::MAX as usize / size_of::<gpusvc_sync_token>() {
            return Err(crate::args::invalid_argument(format!(
                "`tokens` count {count} is absurd"
            )));
        }
        let out = out_ptr(out_order_num, "out_order_num")?;
        let waits: Vec<SyncToken> = (0..count)
            // SAFETY: `tokens` is non-null and valid for `count` reads (contract); `i < count`.
            .map(|i| unsafe { read_token(tokens.add(i)) })
            .collect();
        let mut t = Task::new(host_task(task, UserData(task_user_data))).wait_for(waits);
        if let Some(start) = start {
            let ud = UserData(start_user_data);
            t = t.on_start(move || {
                let ud = ud;
                // SAFETY: a host function taking its own user_data (contract).
                unsafe { start(ud.0) }
            });
        }
        let n = s
            .inner
            .enqueue(StreamId(stream), t)
            .map_err(scheduler_error)?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, n) };
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
        let out = out_ptr(out_ran, "out_ran")?;
        let n = s.inner.run_next().unwrap_or(0);
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, n) };
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
        let out = out_ptr(out_ran, "out_ran")?;
        let n = s.inner.run_until_idle();
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, n) };
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
        let out = out_ptr(out_yield, "out_yield")?;
        let y = s.inner.should_yield();
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, y) };
        Ok(())
    })
}

/// Creates the sync client `(namespace_id, command_buffer_id)` bound to `stream`'s sequence: a
/// stream waiting on its tokens lends its priority to `stream`. Its tokens are released from a
/// task of `stream` with `gpusvc_scheduler_release` (or `gpusvc_sync_client_release` when the
/// scheduler was made over that sync manager).
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
        s.inner
            .create_client(StreamId(stream), id)
            .map_err(scheduler_error)?;
        clients(&s.clients).insert(id);
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
        s.inner
            .sync_points()
            .release(client_id(namespace_id, command_buffer_id), release_count)
            .map_err(client_error)?;
        Ok(())
    })
}
