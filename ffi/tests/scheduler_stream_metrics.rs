//! `gpusvc_scheduler_stream_metrics` from Rust through the C ABI: exact counts and times on a
//! manual host clock, a raised stream's tasks under the priority they ran at, a removed stream
//! (`GPUSVC_SCHEDULER_UNKNOWN_STREAM`, nothing written), and bad arguments.

mod common;

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use gpusvc::*;

const MS: u64 = 1_000_000;
const LOW: u32 = gpusvc_scheduler_priority::GPUSVC_SCHEDULER_PRIORITY_LOW as u32;

unsafe extern "C" fn manual_now(ud: *mut c_void) -> u64 {
    // SAFETY: the test's clock, which outlives its scheduler.
    unsafe { &*ud.cast::<AtomicU64>() }.load(Ordering::SeqCst)
}

/// A task that advances the clock by 2 ms.
unsafe extern "C" fn run_2ms(ud: *mut c_void) -> u32 {
    // SAFETY: the test's clock, which outlives its scheduler.
    unsafe { &*ud.cast::<AtomicU64>() }.fetch_add(2 * MS, Ordering::SeqCst);
    DONE
}

/// What a releasing task needs: the scheduler and its client.
struct Release {
    sched: *mut gpusvc_scheduler,
    client: u64,
}

unsafe extern "C" fn run_release(ud: *mut c_void) -> u32 {
    // SAFETY: the test's `Release`, which outlives the scheduler's run.
    let r = unsafe { &*ud.cast::<Release>() };
    // SAFETY: a live scheduler.
    let r = unsafe { gpusvc_scheduler_release(r.sched, 0, r.client, 1) };
    assert_eq!(r, OK);
    DONE
}

unsafe extern "C" fn run_nothing(_: *mut c_void) -> u32 {
    DONE
}

fn task(
    run: gpusvc_scheduler_task_fn,
    user_data: *mut c_void,
    waits: &[gpusvc_sync_token],
) -> gpusvc_scheduler_task {
    gpusvc_scheduler_task {
        struct_size: size_of::<gpusvc_scheduler_task>(),
        run,
        start: None,
        destroy: None,
        user_data,
        waits: if waits.is_empty() {
            ptr::null()
        } else {
            waits.as_ptr()
        },
        wait_count: waits.len(),
    }
}

fn enqueue(sched: *mut gpusvc_scheduler, stream: u64, t: &gpusvc_scheduler_task) {
    // SAFETY: live handle, task and out slot.
    written(0, |out| unsafe {
        gpusvc_scheduler_enqueue(sched, stream, t, out)
    });
}

fn run_until_idle(sched: *mut gpusvc_scheduler) -> usize {
    // SAFETY: a live handle and out slot.
    written(0, |out| unsafe {
        gpusvc_scheduler_run_until_idle(sched, out)
    })
}

fn stream_metrics(
    sched: *mut gpusvc_scheduler,
    stream: u64,
) -> Result<gpusvc_scheduler_stream_metrics_snapshot, gpusvc_result> {
    let mut m = gpusvc_scheduler_stream_metrics_snapshot::default();
    // SAFETY: a live handle and a sized out slot.
    let r = unsafe { gpusvc_scheduler_stream_metrics(sched, stream, &mut m) };
    if r == OK { Ok(m) } else { Err(r) }
}

fn free(sched: *mut gpusvc_scheduler) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_scheduler_free(sched) }, OK);
}

fn manual_scheduler(clock: &AtomicU64) -> *mut gpusvc_scheduler {
    let config = gpusvc_scheduler_config {
        struct_size: size_of::<gpusvc_scheduler_config>(),
        time_slice_ns: 0,
        granularity_ns: 0,
        now_ns: Some(manual_now),
        clock_user_data: ptr::from_ref(clock).cast_mut().cast(),
        on_task: None,
        on_task_user_data: ptr::null_mut(),
    };
    new_scheduler(ptr::null(), Some(&config))
}

#[test]
fn a_streams_tasks_waits_and_run_time_are_exact_on_a_manual_clock() {
    let clock = AtomicU64::new(1_000 * MS);
    let sched = manual_scheduler(&clock);
    let a = add_stream(sched, NORMAL);
    let b = add_stream(sched, HIGH);
    let ud = ptr::from_ref(&clock).cast_mut().cast();
    for _ in 0..3 {
        enqueue(sched, a, &task(Some(run_2ms), ud, &[]));
    }
    enqueue(sched, b, &task(Some(run_2ms), ud, &[]));
    clock.fetch_add(10 * MS, Ordering::SeqCst);
    assert_eq!(run_until_idle(sched), 4);

    // b (High) ran first: waited 10 ms. a's three waited 12, 14 and 16 ms.
    let ma = stream_metrics(sched, a).unwrap();
    assert_eq!(
        ma.struct_size,
        size_of::<gpusvc_scheduler_stream_metrics_snapshot>()
    );
    assert_eq!((ma.tasks, ma.continuations), (3, 0));
    assert_eq!(ma.run_ns, 6 * MS);
    assert_eq!(ma.wait_ns, 42 * MS);
    assert_eq!(ma.max_wait_ns, 16 * MS);
    assert_eq!(ma.tasks_at, [0, 3, 0, 0]);
    assert_eq!(ma.run_ns_at, [0, 6 * MS, 0, 0]);
    let mb = stream_metrics(sched, b).unwrap();
    assert_eq!(
        (mb.tasks, mb.wait_ns, mb.max_wait_ns, mb.run_ns),
        (1, 10 * MS, 10 * MS, 2 * MS)
    );
    assert_eq!(mb.tasks_at, [0, 0, 1, 0]);
    free(sched);
}

#[test]
fn a_raised_streams_task_counts_under_the_priority_it_ran_at() {
    let sched = new_scheduler(ptr::null(), None);
    let releaser = add_stream(sched, LOW);
    let waiter = add_stream(sched, HIGH);
    // SAFETY: a live handle.
    let r = unsafe { gpusvc_scheduler_create_client(sched, releaser, 0, 5) };
    assert_eq!(r, OK);
    let release = Release { sched, client: 5 };
    enqueue(
        sched,
        releaser,
        &task(
            Some(run_release),
            ptr::from_ref(&release).cast_mut().cast(),
            &[],
        ),
    );
    let token = gpusvc_sync_token {
        namespace_id: 0,
        command_buffer_id: 5,
        release_count: 1,
        verified: true,
    };
    enqueue(
        sched,
        waiter,
        &task(Some(run_nothing), ptr::null_mut(), &[token]),
    );
    run_until_idle(sched);
    // Its second task runs at its own Low.
    enqueue(
        sched,
        releaser,
        &task(Some(run_nothing), ptr::null_mut(), &[]),
    );
    run_until_idle(sched);

    let m = stream_metrics(sched, releaser).unwrap();
    assert_eq!(m.tasks, 2);
    assert_eq!(m.tasks_at, [1, 0, 1, 0], "one at Low, one raised to High");
    let w = stream_metrics(sched, waiter).unwrap();
    assert_eq!(w.tasks_at, [0, 0, 1, 0]);
    free(sched);
}

#[test]
fn a_removed_stream_and_bad_arguments_write_nothing() {
    let clock = AtomicU64::new(0);
    let sched = manual_scheduler(&clock);
    let a = add_stream(sched, NORMAL);
    let ud = ptr::from_ref(&clock).cast_mut().cast();
    enqueue(sched, a, &task(Some(run_2ms), ud, &[]));
    run_until_idle(sched);
    assert_eq!(stream_metrics(sched, a).unwrap().tasks, 1);
    let mut removed = gpusvc_scheduler_removed_stream::default();
    // SAFETY: a live handle and a sized out slot.
    let r = unsafe { gpusvc_scheduler_remove_stream(sched, a, &mut removed) };
    assert_eq!(r, OK);

    let sentinel = gpusvc_scheduler_stream_metrics_snapshot {
        tasks: 77,
        ..Default::default()
    };
    let mut m = sentinel;
    // SAFETY: a live handle and a sized out slot.
    let r = unsafe { gpusvc_scheduler_stream_metrics(sched, a, &mut m) };
    assert_eq!(r, gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM);
    assert_eq!(m, sentinel);
    // SAFETY: as above; 999 was never added.
    let r = unsafe { gpusvc_scheduler_stream_metrics(sched, 999, &mut m) };
    assert_eq!(r, gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM);
    assert_eq!(m, sentinel);

    let b = add_stream(sched, NORMAL);
    // SAFETY: NULL output.
    let r = unsafe { gpusvc_scheduler_stream_metrics(sched, b, ptr::null_mut()) };
    assert_eq!(r, gpusvc_result::GPUSVC_NULL_ARGUMENT);
    // SAFETY: a NULL handle.
    let r = unsafe { gpusvc_scheduler_stream_metrics(ptr::null(), b, &mut m) };
    assert_eq!(r, gpusvc_result::GPUSVC_NULL_ARGUMENT);
    assert_eq!(m, sentinel);
    // A struct_size below the first published size.
    let mut small = sentinel;
    small.struct_size = size_of::<gpusvc_scheduler_stream_metrics_snapshot>() - 8;
    // SAFETY: a live handle and an out slot larger than its struct_size.
    let r = unsafe { gpusvc_scheduler_stream_metrics(sched, b, &mut small) };
    assert_eq!(r, gpusvc_result::GPUSVC_UNSUPPORTED_STRUCT_SIZE);
    assert_eq!(small.tasks, 77);
    // A live stream that ran nothing reads zero.
    let zero = stream_metrics(sched, b).unwrap();
    assert_eq!(
        zero,
        gpusvc_scheduler_stream_metrics_snapshot::default(),
        "{zero:?}"
    );
    free(sched);
}
