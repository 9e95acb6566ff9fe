//! The scheduler C ABI exercised from Rust through the exported `extern "C"` functions: one test
//! per scheduler behaviour (the setups of `gpu-scheduler/tests/behaviours.rs`), and the bad
//! inputs the ABI promises to turn into a code.

use std::ffi::c_void;
use std::ptr;
use std::sync::Mutex;

use gpusvc::*;

const OK: gpusvc_result = gpusvc_result::GPUSVC_OK;
const LOW: u32 = gpusvc_scheduler_priority::GPUSVC_SCHEDULER_PRIORITY_LOW as u32;
const NORMAL: u32 = gpusvc_scheduler_priority::GPUSVC_SCHEDULER_PRIORITY_NORMAL as u32;
const HIGH: u32 = gpusvc_scheduler_priority::GPUSVC_SCHEDULER_PRIORITY_HIGH as u32;
const REAL_TIME: u32 = gpusvc_scheduler_priority::GPUSVC_SCHEDULER_PRIORITY_REAL_TIME as u32;
const DONE: u32 = gpusvc_scheduler_task_result::GPUSVC_SCHEDULER_TASK_DONE as u32;
const CONTINUE: u32 = gpusvc_scheduler_task_result::GPUSVC_SCHEDULER_TASK_CONTINUE_LATER as u32;

type Log = Mutex<Vec<String>>;

/// What one task does; lives (boxed) until the scheduler is freed.
struct Spec {
    log: *const Log,
    name: String,
    sched: *mut gpusvc_scheduler,
    /// Release (client, count) while running.
    release: Option<(u64, u64)>,
    /// Enable this stream while running.
    enable: Option<u64>,
    /// Return CONTINUE_LATER this many times first.
    continues: u32,
}

unsafe extern "C" fn run_spec(ud: *mut c_void) -> u32 {
    // SAFETY: a live `Spec` owned by the test.
    let spec = unsafe { &mut *ud.cast::<Spec>() };
    // SAFETY: the log outlives the scheduler.
    let log = unsafe { &*spec.log };
    log.lock().unwrap().push(spec.name.clone());
    if let Some((client, count)) = spec.release {
        assert_eq!(
            // SAFETY: a live handle.
            unsafe { gpusvc_scheduler_release(spec.sched, 0, client, count) },
            OK
        );
    }
    if let Some(stream) = spec.enable {
        assert_eq!(
            // SAFETY: a live handle.
            unsafe { gpusvc_scheduler_set_enabled(spec.sched, stream, true) },
            OK
        );
    }
    if spec.continues > 0 {
        spec.continues -= 1;
        return CONTINUE;
    }
    DONE
}

unsafe extern "C" fn start_spec(ud: *mut c_void) {
    // SAFETY: a live `Spec` owned by the test.
    let spec = unsafe { &*ud.cast::<Spec>() };
    // SAFETY: the log outlives the scheduler.
    let log = unsafe { &*spec.log };
    log.lock().unwrap().push(format!("start {}", spec.name));
}

/// A scheduler with a log, freed on drop (before the specs and the log).
struct Sched {
    h: *mut gpusvc_scheduler,
    specs: Vec<std::pin::Pin<Box<Spec>>>,
    log: Box<Log>,
}

impl Drop for Sched {
    fn drop(&mut self) {
        // SAFETY: a handle value; the registry checks it.
        assert_eq!(unsafe { gpusvc_scheduler_free(self.h) }, OK);
    }
}

fn token(client: u64, count: u64) -> gpusvc_sync_token {
    gpusvc_sync_token {
        namespace_id: 0,
        command_buffer_id: client,
        release_count: count,
        verified: true,
    }
}

impl Sched {
    fn new() -> Self {
        let mut h = ptr::null_mut();
        // SAFETY: a live out pointer; NULL manager.
        assert_eq!(unsafe { gpusvc_scheduler_new(ptr::null(), &mut h) }, OK);
        Sched {
            h,
            specs: Vec::new(),
            log: Box::new(Mutex::new(Vec::new())),
        }
    }

    fn stream(&self, p: u32) -> u64 {
        let mut s = 0;
        assert_eq!(
            // SAFETY: a live handle and out pointer.
            unsafe { gpusvc_scheduler_add_stream(self.h, p, &mut s) },
            OK
        );
        s
    }

    fn client(&self, stream: u64, client: u64) {
        assert_eq!(
            // SAFETY: a live handle.
            unsafe { gpusvc_scheduler_create_client(self.h, stream, 0, client) },
            OK
        );
    }

    fn spec(&mut self, name: &str) -> Box<Spec> {
        Box::new(Spec {
            log: &*self.log,
            name: name.to_string(),
            sched: self.h,
            release: None,
            enable: None,
            continues: 0,
        })
    }

    fn enqueue_spec(
        &mut self,
        stream: u64,
        mut spec: Box<Spec>,
        with_start: bool,
        tokens: &[gpusvc_sync_token],
    ) -> u64 {
        let ud: *mut Spec = &mut *spec;
        self.specs.push(Box::into_pin(spec));
        let mut n = 0;
        let start: gpusvc_scheduler_start_fn = if with_start { Some(start_spec) } else { None };
        // SAFETY: a live handle; the spec lives until the scheduler is freed.
        let r = unsafe {
            gpusvc_scheduler_enqueue(
                self.h,
                stream,
                Some(run_spec),
                ud.cast(),
                start,
                ud.cast(),
                if tokens.is_empty() {
                    ptr::null()
                } else {
                    tokens.as_ptr()
                },
                tokens.len(),
                &mut n,
            )
        };
        assert_eq!(r, OK);
        n
    }

    fn push(&mut self, stream: u64, name: &str) -> u64 {
        let spec = self.spec(name);
        self.enqueue_spec(stream, spec, false, &[])
    }

    fn run_until_idle(&self) -> usize {
        let mut n = 0;
        assert_eq!(
            // SAFETY: a live handle and out pointer.
            unsafe { gpusvc_scheduler_run_until_idle(self.h, &mut n) },
            OK
        );
        n
    }

    fn scheduled(&self, stream: u64) -> u32 {
        let mut p = 99;
        // SAFETY: a live handle and out pointer.
        let r = unsafe { gpusvc_scheduler_scheduled_priority(self.h, stream, &mut p) };
        assert_eq!(r, OK);
        p
    }

    fn entries(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

#[test]
fn fifo_within_a_stream() {
    let mut s = Sched::new();
    let a = s.stream(NORMAL);
    let mut last = 0;
    for name in ["1", "2", "3", "4"] {
        let n = s.push(a, name);
        assert!(n > last);
        last = n;
    }
    assert_eq!(s.run_until_idle(), 4);
    assert_eq!(s.entries(), ["1", "2", "3", "4"]);
}

#[test]
fn a_per_task_start_callback_runs_before_the_task() {
    let mut s = Sched::new();
    let a = s.stream(NORMAL);
    let spec = s.spec("t");
    s.enqueue_spec(a, spec, true, &[]);
    assert_eq!(s.run_until_idle(), 1);
    assert_eq!(s.entries(), ["start t", "t"]);
}

#[test]
fn a_continued_task_runs_first() {
    let mut s = Sched::new();
    let a = s.stream(NORMAL);
    let mut spec = s.spec("c");
    spec.continues = 1;
    s.enqueue_spec(a, spec, true, &[]);
    s.push(a, "next");
    assert_eq!(s.run_until_idle(), 3);
    assert_eq!(s.entries(), ["start c", "c", "c", "next"]);
}

#[test]
fn streams_run_in_priority_order() {
    let mut s = Sched::new();
    let low = s.stream(LOW);
    let normal = s.stream(NORMAL);
    let high = s.stream(HIGH);
    let rt = s.stream(REAL_TIME);
    s.push(low, "low");
    s.push(normal, "normal");
    s.push(high, "high");
    s.push(rt, "rt");
    assert_eq!(s.run_until_idle(), 4);
    assert_eq!(s.entries(), ["rt", "high", "normal", "low"]);
}

#[test]
fn equal_priorities_run_in_round_robin_order() {
    let mut s = Sched::new();
    let a = s.stream(NORMAL);
    let b = s.stream(NORMAL);
    let mut spec = s.spec("a");
    spec.continues = 1;
    s.enqueue_spec(a, spec, false, &[]);
    let mut spec = s.spec("b");
    spec.continues = 1;
    s.enqueue_spec(b, spec, false, &[]);
    assert_eq!(s.run_until_idle(), 4);
    assert_eq!(s.entries(), ["a", "b", "a", "b"]);
}

#[test]
fn a_waiter_runs_after_its_releaser() {
    let mut s = Sched::new();
    let r = s.stream(LOW);
    let w = s.stream(HIGH);
    s.client(r, 1);
    let mut spec = s.spec("release");
    spec.release = Some((1, 1));
    s.enqueue_spec(r, spec, false, &[]);
    let spec = s.spec("wait");
    s.enqueue_spec(w, spec, false, &[token(1, 1)]);
    s.push(w, "behind");
    assert_eq!(s.run_until_idle(), 3);
    assert_eq!(s.entries(), ["release", "wait", "behind"]);
}

#[test]
fn a_wait_that_can_never_be_released_does_not_block() {
    let mut s = Sched::new();
    let r = s.stream(NORMAL);
    let w = s.stream(HIGH);
    s.client(r, 1);
    s.push(r, "r");
    let spec = s.spec("w1");
    s.enqueue_spec(w, spec, false, &[token(1, 5)]);
    let spec = s.spec("w2");
    s.enqueue_spec(w, spec, false, &[token(77, 1), token(1, 9)]);
    assert_eq!(s.run_until_idle(), 3);
    assert_eq!(s.entries(), ["r", "w1", "w2"]);
}

#[test]
fn disabled_streams_never_run() {
    let mut s = Sched::new();
    let a = s.stream(HIGH);
    let b = s.stream(LOW);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_scheduler_set_enabled(s.h, a, false) }, OK);
    s.push(a, "a");
    s.push(b, "b");
    assert_eq!(s.run_until_idle(), 1);
    assert_eq!(s.entries(), ["b"]);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_scheduler_set_enabled(s.h, a, true) }, OK);
    assert_eq!(s.run_until_idle(), 1);
    assert_eq!(s.entries(), ["b", "a"]);
}

#[test]
fn removing_a_stream_drops_its_tasks() {
    let mut s = Sched::new();
    let a = s.stream(NORMAL);
    s.push(a, "1");
    s.push(a, "2");
    let mut dropped = 0;
    assert_eq!(
        // SAFETY: a live handle and out pointer.
        unsafe { gpusvc_scheduler_remove_stream(s.h, a, &mut dropped) },
        OK
    );
    assert_eq!(dropped, 2);
    assert_eq!(s.run_until_idle(), 0);
    assert!(s.entries().is_empty());
    // SAFETY: a live handle and out pointer.
    let r = unsafe { gpusvc_scheduler_remove_stream(s.h, a, &mut dropped) };
    assert_eq!(r, gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM);
}

#[test]
fn enabling_a_stream_from_inside_a_task_does_not_deadlock() {
    let mut s = Sched::new();
    let a = s.stream(NORMAL);
    let b = s.stream(NORMAL);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_scheduler_set_enabled(s.h, b, false) }, OK);
    s.push(b, "b");
    let mut spec = s.spec("a");
    spec.enable = Some(b);
    s.enqueue_spec(a, spec, false, &[]);
    assert_eq!(s.run_until_idle(), 2);
    assert_eq!(s.entries(), ["a", "b"]);
}

#[test]
fn waiting_on_oneself_does_not_block() {
    let mut s = Sched::new();
    let a = s.stream(NORMAL);
    s.client(a, 1);
    let spec = s.spec("self");
    s.enqueue_spec(a, spec, false, &[token(1, 1)]);
    assert_eq!(s.run_until_idle(), 1);
    assert_eq!(s.entries(), ["self"]);
    assert_eq!(s.scheduled(a), NORMAL);
}

#[test]
fn the_releaser_is_raised_to_its_waiters_priority_and_no_higher() {
    let mut s = Sched::new();
    let _rt = s.stream(REAL_TIME);
    let r = s.stream(LOW);
    let n = s.stream(NORMAL);
    let w = s.stream(HIGH);
    s.client(r, 1);
    let mut spec = s.spec("r");
    spec.release = Some((1, 1));
    s.enqueue_spec(r, spec, false, &[]);
    s.push(n, "n");
    assert_eq!(s.scheduled(r), LOW);
    let spec = s.spec("w");
    s.enqueue_spec(w, spec, false, &[token(1, 1)]);
    assert_eq!(s.scheduled(r), HIGH);
    s.run_until_idle();
    assert_eq!(s.entries(), ["r", "w", "n"]);
    assert_eq!(s.scheduled(r), LOW, "reverted");
}

#[test]
fn a_scheduler_over_a_sync_manager_releases_through_it() {
    let mut m = ptr::null_mut();
    // SAFETY: a live out pointer.
    assert_eq!(unsafe { gpusvc_sync_manager_new(&mut m) }, OK);
    let mut h = ptr::null_mut();
    // SAFETY: a live manager and out pointer.
    assert_eq!(unsafe { gpusvc_scheduler_new(m, &mut h) }, OK);
    let mut st = 0;
    assert_eq!(
        // SAFETY: live handle and out pointer.
        unsafe { gpusvc_scheduler_add_stream(h, NORMAL, &mut st) },
        OK
    );
    // SAFETY: live handle.
    assert_eq!(unsafe { gpusvc_scheduler_create_client(h, st, 0, 5) }, OK);
    let mut released = true;
    // SAFETY: live handle and out pointer.
    let r = unsafe { gpusvc_sync_token_is_released(m, &token(5, 1), &mut released) };
    assert_eq!(r, OK);
    assert!(!released, "the client lives in the shared manager");
    // SAFETY: handle values.
    unsafe {
        assert_eq!(gpusvc_scheduler_free(h), OK);
        assert_eq!(gpusvc_sync_manager_free(m), OK);
    }
}

#[test]
fn bad_input_is_a_code() {
    let s = Sched::new();
    let a = s.stream(NORMAL);
    let mut n = 0;
    let mut out = 0;
    // SAFETY: every pointer is NULL or live; handles are checked.
    unsafe {
        assert_eq!(
            gpusvc_scheduler_new(ptr::null(), ptr::null_mut()),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_scheduler_enqueue(
                s.h,
                a,
                None,
                ptr::null_mut(),
                None,
                ptr::null_mut(),
                ptr::null(),
                0,
                &mut n
            ),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_scheduler_enqueue(
                s.h,
                a,
                Some(run_spec),
                ptr::null_mut(),
                None,
                ptr::null_mut(),
                ptr::null(),
                1,
                &mut n
            ),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_scheduler_enqueue(
                s.h,
                a + 1000,
                Some(run_spec),
                ptr::null_mut(),
                None,
                ptr::null_mut(),
                ptr::null(),
                0,
                &mut n
            ),
            gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM
        );
        assert_eq!(
            gpusvc_scheduler_set_enabled(s.h, a + 1000, true),
            gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM
        );
        assert_eq!(
            gpusvc_scheduler_add_stream(s.h, 4, &mut out),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_scheduler_set_base_priority(s.h, a, 7),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_scheduler_run_next(s.h, ptr::null_mut()),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_scheduler_run_next(ptr::null(), &mut 0),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_scheduler_release(s.h, 0, 42, 1),
            gpusvc_result::GPUSVC_SYNC_UNKNOWN_CLIENT
        );
        let mut yield_ = true;
        assert_eq!(gpusvc_scheduler_should_yield(s.h, &mut yield_), OK);
        assert!(!yield_);
        let mut freed = ptr::null_mut();
        assert_eq!(gpusvc_scheduler_new(ptr::null(), &mut freed), OK);
        assert_eq!(gpusvc_scheduler_free(freed), OK);
        assert_eq!(
            gpusvc_scheduler_add_stream(freed, NORMAL, &mut out),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        assert_eq!(
            gpusvc_scheduler_free(freed),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        assert_eq!(gpusvc_scheduler_free(ptr::null_mut()), OK);
    }
    assert_eq!(out, 0, "outputs are written only on OK");
    assert_eq!(n, 0, "outputs are written only on OK");
}
