//! Freeing a scheduler from inside one of its own tasks, through the C ABI: nothing more runs
//! (not the rest of the turn, not other streams, not a task that keeps returning "continue
//! later"), the run call in progress returns, and every pending task's `destroy` runs exactly
//! once.

mod common;

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use common::*;
use gpusvc::*;

/// One task's record: how often it ran and how often its `destroy` ran.
struct Probe {
    sched: *mut gpusvc_scheduler,
    runs: AtomicU32,
    destroys: AtomicU32,
    /// Free the scheduler on this run (1 = the first).
    free_on_run: u32,
    /// Return "continue later" every time.
    forever: bool,
    frees: *const AtomicUsize,
}

unsafe extern "C" fn run(ud: *mut c_void) -> u32 {
    // SAFETY: a live `Probe` the test owns for longer than the scheduler.
    let p = unsafe { &*ud.cast::<Probe>() };
    let n = p.runs.fetch_add(1, Ordering::SeqCst) + 1;
    if n == p.free_on_run {
        // SAFETY: the handle the task was enqueued on; freeing it from inside is the point.
        assert_eq!(unsafe { gpusvc_scheduler_free(p.sched) }, OK);
        // SAFETY: the test's counter outlives the scheduler.
        unsafe { &*p.frees }.fetch_add(1, Ordering::SeqCst);
    }
    if p.forever { CONTINUE } else { DONE }
}

unsafe extern "C" fn destroy(ud: *mut c_void) {
    // SAFETY: as in `run`.
    unsafe { &*ud.cast::<Probe>() }
        .destroys
        .fetch_add(1, Ordering::SeqCst);
}

fn probe(sched: *mut gpusvc_scheduler, frees: &AtomicUsize) -> Box<Probe> {
    Box::new(Probe {
        sched,
        runs: AtomicU32::new(0),
        destroys: AtomicU32::new(0),
        free_on_run: 0,
        forever: false,
        frees,
    })
}

fn enqueue(sched: *mut gpusvc_scheduler, stream: u64, p: &Probe) {
    let task = gpusvc_scheduler_task {
        struct_size: size_of::<gpusvc_scheduler_task>(),
        run: Some(run),
        start: None,
        destroy: Some(destroy),
        user_data: ptr::from_ref(p).cast_mut().cast(),
        waits: ptr::null(),
        wait_count: 0,
    };
    let mut n = 0;
    // SAFETY: live handle, task and out pointer.
    let r = unsafe { gpusvc_scheduler_enqueue(sched, stream, &task, &mut n) };
    assert_eq!(r, OK);
}

#[test]
fn freeing_from_inside_a_task_runs_nothing_more_and_destroys_each_task_once() {
    let frees = AtomicUsize::new(0);
    let h = new_scheduler(ptr::null(), None);
    let (a, b) = (add_stream(h, HIGH), add_stream(h, NORMAL));
    let mut first = probe(h, &frees);
    first.free_on_run = 1;
    let rest_a: Vec<Box<Probe>> = (0..5).map(|_| probe(h, &frees)).collect();
    let on_b: Vec<Box<Probe>> = (0..5).map(|_| probe(h, &frees)).collect();
    enqueue(h, a, &first);
    for p in &rest_a {
        enqueue(h, a, p);
    }
    for p in &on_b {
        enqueue(h, b, p);
    }
    let mut ran = 0;
    // SAFETY: a live handle (freed by its own task during this call) and out pointer.
    let r = unsafe { gpusvc_scheduler_run_until_idle(h, &mut ran) };
    assert_eq!(r, OK);
    assert_eq!(frees.load(Ordering::SeqCst), 1);
    assert_eq!(ran, 1, "only the task that freed the scheduler ran");
    assert_eq!(first.runs.load(Ordering::SeqCst), 1);
    assert_eq!(first.destroys.load(Ordering::SeqCst), 1);
    for p in rest_a.iter().chain(&on_b) {
        assert_eq!(
            p.runs.load(Ordering::SeqCst),
            0,
            "a task ran after the free"
        );
        assert_eq!(
            p.destroys.load(Ordering::SeqCst),
            1,
            "destroy must run exactly once"
        );
    }
    // The handle is gone.
    // SAFETY: a stale handle value: the registry refuses it.
    let r = unsafe { gpusvc_scheduler_run_next(h, &mut ran) };
    assert_eq!(r, gpusvc_result::GPUSVC_INVALID_HANDLE);
}

#[test]
fn a_task_that_always_continues_stops_when_it_frees_the_scheduler() {
    let frees = AtomicUsize::new(0);
    let h = new_scheduler(ptr::null(), None);
    let a = add_stream(h, NORMAL);
    let mut looping = probe(h, &frees);
    looping.forever = true;
    looping.free_on_run = 3;
    enqueue(h, a, &looping);
    let mut ran = 0;
    // SAFETY: a live handle (freed by its own task during this call) and out pointer. Before the
    // fix this call never returned: the continuation kept running on the scheduler the call held.
    let r = unsafe { gpusvc_scheduler_run_until_idle(h, &mut ran) };
    assert_eq!(r, OK);
    assert_eq!(ran, 3);
    assert_eq!(looping.runs.load(Ordering::SeqCst), 3);
    assert_eq!(looping.destroys.load(Ordering::SeqCst), 1);
}
