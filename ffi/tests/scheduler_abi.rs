//! The scheduler C ABI exercised from Rust through the exported `extern "C"` functions: one test
//! per scheduler behaviour (the setups of `gpu-scheduler/tests/behaviours.rs`), and the bad
//! inputs the ABI promises to turn into a code.

mod common;

use std::ffi::c_void;
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use gpusvc::*;

const LOW: u32 = gpusvc_scheduler_priority::GPUSVC_SCHEDULER_PRIORITY_LOW as u32;
const REAL_TIME: u32 = gpusvc_scheduler_priority::GPUSVC_SCHEDULER_PRIORITY_REAL_TIME as u32;

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
    /// Advance the manual clock (`Sched::with_clock`) by this many ns while running.
    advance_ns: u64,
    clock: *const AtomicU64,
    /// Log `yield <should_yield>` before the release (if any) and again after it.
    log_yield: bool,
    /// Enqueue this spec (owned by the same `Sched`) on this stream while running.
    spawn: Option<(u64, *mut Spec)>,
}

const MS: u64 = 1_000_000;

unsafe extern "C" fn manual_now(ud: *mut c_void) -> u64 {
    // SAFETY: the `Sched`'s clock, which outlives its scheduler.
    unsafe { &*ud.cast::<AtomicU64>() }.load(Ordering::SeqCst)
}

unsafe extern "C" fn count_sample(sample: *const gpusvc_scheduler_task_sample, ud: *mut c_void) {
    // SAFETY: the test's sample log, which outlives the scheduler; the sample is valid for the
    // call.
    let (log, sample) = unsafe {
        (
            &*ud.cast::<Mutex<Vec<gpusvc_scheduler_task_sample>>>(),
            *sample,
        )
    };
    log.lock().unwrap().push(sample);
}

fn should_yield(sched: *mut gpusvc_scheduler) -> bool {
    let mut y = false;
    // SAFETY: a live handle and out pointer.
    assert_eq!(unsafe { gpusvc_scheduler_should_yield(sched, &mut y) }, OK);
    y
}

unsafe extern "C" fn run_spec(ud: *mut c_void) -> u32 {
    // SAFETY: a live `Spec` owned by the test.
    let spec = unsafe { &mut *ud.cast::<Spec>() };
    // SAFETY: the log outlives the scheduler.
    let log = unsafe { &*spec.log };
    log.lock().unwrap().push(spec.name.clone());
    if spec.advance_ns > 0 {
        // SAFETY: the `Sched`'s clock outlives the scheduler.
        unsafe { &*spec.clock }.fetch_add(spec.advance_ns, Ordering::SeqCst);
    }
    if let Some((stream, other)) = spec.spawn {
        let mut n = 0;
        // SAFETY: a live handle; the spec lives until the scheduler is freed.
        let r = unsafe {
            gpusvc_scheduler_enqueue(
                spec.sched,
                stream,
                &task_of(Some(run_spec), None, other.cast(), ptr::null(), 0),
                &mut n,
            )
        };
        assert_eq!(r, OK);
    }
    if spec.log_yield {
        let y = should_yield(spec.sched);
        log.lock().unwrap().push(format!("yield {y}"));
    }
    if let Some((client, count)) = spec.release {
        assert_eq!(
            // SAFETY: a live handle.
            unsafe { gpusvc_scheduler_release(spec.sched, 0, client, count) },
            OK
        );
        if spec.log_yield {
            let y = should_yield(spec.sched);
            log.lock().unwrap().push(format!("yield {y}"));
        }
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
    /// The manual clock of `with_clock` (ns).
    clock: Box<AtomicU64>,
}

impl Drop for Sched {
    fn drop(&mut self) {
        // SAFETY: a handle value; the registry checks it.
        assert_eq!(unsafe { gpusvc_scheduler_free(self.h) }, OK);
    }
}

/// A `gpusvc_scheduler_task` without `destroy`.
fn task_of(
    run: gpusvc_scheduler_task_fn,
    start: gpusvc_scheduler_start_fn,
    user_data: *mut c_void,
    waits: *const gpusvc_sync_token,
    wait_count: usize,
) -> gpusvc_scheduler_task {
    gpusvc_scheduler_task {
        struct_size: size_of::<gpusvc_scheduler_task>(),
        run,
        start,
        destroy: None,
        user_data,
        waits,
        wait_count,
    }
}

/// Whether `(client, count)` reads as released in the sync manager `m`.
fn is_released(m: *const gpusvc_sync_manager, client: u64, count: u64) -> bool {
    // SAFETY: a live handle, token and out slot.
    written(false, |out| unsafe {
        gpusvc_sync_token_is_released(m, &token(client, count), out)
    })
}

fn token(client: u64, count: u64) -> gpusvc_sync_token {
    gpusvc_sync_token {
        namespace_id: 0,
        command_buffer_id: client,
        release_count: count,
        verified: true,
    }
}

/// A config with the defaults (every field 0 or NULL), for struct-update syntax.
fn default_config() -> gpusvc_scheduler_config {
    gpusvc_scheduler_config {
        struct_size: size_of::<gpusvc_scheduler_config>(),
        time_slice_ns: 0,
        granularity_ns: 0,
        now_ns: None,
        clock_user_data: ptr::null_mut(),
        on_task: None,
        on_task_user_data: ptr::null_mut(),
    }
}

/// A config with the default slices on the manual clock `clock`.
fn manual_clock_config(clock: &AtomicU64) -> gpusvc_scheduler_config {
    gpusvc_scheduler_config {
        struct_size: size_of::<gpusvc_scheduler_config>(),
        now_ns: Some(manual_now),
        clock_user_data: ptr::from_ref(clock).cast_mut().cast(),
        ..default_config()
    }
}

impl Spec {
    /// A spec that only logs `name`.
    fn new(log: &Log, name: &str, sched: *mut gpusvc_scheduler, clock: *const AtomicU64) -> Self {
        Spec {
            log,
            name: name.to_string(),
            sched,
            release: None,
            enable: None,
            continues: 0,
            advance_ns: 0,
            clock,
            log_yield: false,
            spawn: None,
        }
    }
}

impl Sched {
    fn new() -> Self {
        Self::over(ptr::null())
    }

    /// A scheduler over `manager` (NULL: its own).
    fn over(manager: *const gpusvc_sync_manager) -> Self {
        Self::with(new_scheduler(manager, None), Box::new(AtomicU64::new(0)))
    }

    fn with(h: *mut gpusvc_scheduler, clock: Box<AtomicU64>) -> Self {
        Sched {
            h,
            specs: Vec::new(),
            log: Box::new(Mutex::new(Vec::new())),
            clock,
        }
    }

    /// Default slices (5 ms, 1 ms granularity) on a manual clock that only tasks advance
    /// (`Spec::advance_ns`), starting at an arbitrary reading. The clock outlives the scheduler
    /// (dropped after `Drop::drop` frees it).
    fn with_clock() -> Self {
        let clock = Box::new(AtomicU64::new(1_000 * MS));
        let h = new_scheduler(ptr::null(), Some(&manual_clock_config(&clock)));
        Self::with(h, clock)
    }

    fn stream(&self, p: u32) -> u64 {
        add_stream(self.h, p)
    }

    fn client(&self, stream: u64, client: u64) {
        // SAFETY: a live handle.
        let r = unsafe { gpusvc_scheduler_create_client(self.h, stream, 0, client) };
        assert_eq!(r, OK);
    }

    fn spec(&mut self, name: &str) -> Box<Spec> {
        Box::new(Spec::new(&self.log, name, self.h, &*self.clock))
    }

    /// A spec kept alive by this `Sched` but not enqueued (for `Spec::spawn`).
    fn keep(&mut self, spec: Box<Spec>) -> *mut Spec {
        let mut pinned = Box::into_pin(spec);
        let p: *mut Spec = &mut *pinned;
        self.specs.push(pinned);
        p
    }

    fn advancing(&mut self, stream: u64, name: &str, ms: u64) {
        let mut spec = self.spec(name);
        spec.advance_ns = ms * MS;
        self.enqueue_spec(stream, spec, false, &[]);
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
        let start: gpusvc_scheduler_start_fn = if with_start { Some(start_spec) } else { None };
        let waits = if tokens.is_empty() {
            ptr::null()
        } else {
            tokens.as_ptr()
        };
        let task = task_of(Some(run_spec), start, ud.cast(), waits, tokens.len());
        // SAFETY: a live handle, task and out slot; the spec lives until the scheduler is freed.
        written(0, |out| unsafe {
            gpusvc_scheduler_enqueue(self.h, stream, &task, out)
        })
    }

    fn push(&mut self, stream: u64, name: &str) -> u64 {
        let spec = self.spec(name);
        self.enqueue_spec(stream, spec, false, &[])
    }

    /// Enqueues a task that waits for `tokens`.
    fn push_waiting(&mut self, stream: u64, name: &str, tokens: &[gpusvc_sync_token]) -> u64 {
        let spec = self.spec(name);
        self.enqueue_spec(stream, spec, false, tokens)
    }

    /// Enqueues a task that releases `count` on `client` while it runs.
    fn push_releasing(&mut self, stream: u64, name: &str, (client, count): (u64, u64)) {
        let mut spec = self.spec(name);
        spec.release = Some((client, count));
        self.enqueue_spec(stream, spec, false, &[]);
    }

    fn run_until_idle(&self) -> usize {
        // SAFETY: a live handle and out slot.
        written(0, |out| unsafe {
            gpusvc_scheduler_run_until_idle(self.h, out)
        })
    }

    fn run_next(&self) -> usize {
        // SAFETY: a live handle and out slot.
        written(0, |out| unsafe { gpusvc_scheduler_run_next(self.h, out) })
    }

    fn set_enabled(&self, stream: u64, enabled: bool) {
        // SAFETY: a live handle.
        let r = unsafe { gpusvc_scheduler_set_enabled(self.h, stream, enabled) };
        assert_eq!(r, OK);
    }

    fn base(&self, stream: u64) -> u32 {
        // SAFETY: a live handle and out slot.
        written(99, |out| unsafe {
            gpusvc_scheduler_base_priority(self.h, stream, out)
        })
    }

    fn pending(&self, stream: u64) -> usize {
        // SAFETY: a live handle and out slot.
        written(99, |out| unsafe {
            gpusvc_scheduler_pending_tasks(self.h, stream, out)
        })
    }

    fn remove(&self, stream: u64) -> gpusvc_scheduler_removed_stream {
        let removed = gpusvc_scheduler_removed_stream::default();
        // SAFETY: a live handle and out slot.
        written(removed, |out| unsafe {
            gpusvc_scheduler_remove_stream(self.h, stream, out)
        })
    }

    fn scheduled(&self, stream: u64) -> u32 {
        // SAFETY: a live handle and out slot.
        written(99, |out| unsafe {
            gpusvc_scheduler_scheduled_priority(self.h, stream, out)
        })
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
    s.push_releasing(r, "release", (1, 1));
    s.push_waiting(w, "wait", &[token(1, 1)]);
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
    s.push_waiting(w, "w1", &[token(1, 5)]);
    s.push_waiting(w, "w2", &[token(77, 1), token(1, 9)]);
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
fn removing_a_stream_drops_its_tasks_and_the_priority_it_lent() {
    let mut s = Sched::new();
    let r = s.stream(LOW);
    let w = s.stream(HIGH);
    s.client(r, 1);
    s.push(r, "r");
    for name in ["w1", "w2", "w3"] {
        s.push_waiting(w, name, &[token(1, 1)]);
    }
    assert_eq!(s.scheduled(r), HIGH);
    assert_eq!(s.pending(w), 3);
    let removed = s.remove(w);
    assert_eq!(
        removed,
        gpusvc_scheduler_removed_stream {
            struct_size: size_of::<gpusvc_scheduler_removed_stream>(),
            dropped_tasks: 3,
            lent: true,
            lent_priority: HIGH,
        }
    );
    assert_eq!(s.scheduled(r), LOW, "the loan ended");
    // A stream that lent nothing says so.
    let idle = s.stream(NORMAL);
    s.push(idle, "never");
    assert_eq!(
        s.remove(idle),
        gpusvc_scheduler_removed_stream {
            struct_size: size_of::<gpusvc_scheduler_removed_stream>(),
            dropped_tasks: 1,
            lent: false,
            lent_priority: 0,
        }
    );
    assert_eq!(s.run_until_idle(), 1);
    assert_eq!(s.entries(), ["r"]);
    let mut removed = gpusvc_scheduler_removed_stream::default();
    // SAFETY: a live handle and out pointer.
    let code = unsafe { gpusvc_scheduler_remove_stream(s.h, w, &mut removed) };
    assert_eq!(code, gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM);
    assert_eq!(removed, gpusvc_scheduler_removed_stream::default());
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
    s.push_waiting(a, "self", &[token(1, 1)]);
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
    s.push_releasing(r, "r", (1, 1));
    s.push(n, "n");
    assert_eq!(s.scheduled(r), LOW);
    s.push_waiting(w, "w", &[token(1, 1)]);
    assert_eq!(s.scheduled(r), HIGH);
    s.run_until_idle();
    assert_eq!(s.entries(), ["r", "w", "n"]);
    assert_eq!(s.scheduled(r), LOW, "reverted");
}

#[test]
fn a_scheduler_over_a_sync_manager_releases_through_it() {
    let m = new_sync_manager();
    let h = new_scheduler(m, None);
    let mut st = 0;
    assert_eq!(
        // SAFETY: live handle and out pointer.
        unsafe { gpusvc_scheduler_add_stream(h, NORMAL, &mut st) },
        OK
    );
    // SAFETY: live handle.
    assert_eq!(unsafe { gpusvc_scheduler_create_client(h, st, 0, 5) }, OK);
    assert!(
        !is_released(m, 5, 1),
        "the client lives in the shared manager"
    );
    // SAFETY: handle values.
    unsafe {
        assert_eq!(gpusvc_scheduler_free(h), OK);
        assert_eq!(gpusvc_sync_manager_free(m), OK);
    }
}

#[test]
fn a_releaser_outside_the_scheduler_is_honoured() {
    let m = new_sync_manager();
    let h = new_scheduler(m, None);
    let (mut host, mut n, mut w) = (0, 0, 0);
    let mut ran = 0;
    let log: Log = Mutex::new(Vec::new());
    let mut spec = Spec::new(&log, "wait", h, ptr::null());
    // SAFETY: live handles and out pointers; the spec and log outlive the scheduler.
    unsafe {
        assert_eq!(gpusvc_sync_sequence_create(m, &mut host), OK);
        assert_eq!(gpusvc_sync_client_create(m, 0, 9, host), OK);
        assert_eq!(gpusvc_sync_sequence_generate(m, host, &mut n), OK);
        assert_eq!(gpusvc_scheduler_add_stream(h, NORMAL, &mut w), OK);
        let t = token(9, 1);
        let mut order = 0;
        let r = gpusvc_scheduler_enqueue(
            h,
            w,
            &task_of(Some(run_spec), None, ptr::from_mut(&mut spec).cast(), &t, 1),
            &mut order,
        );
        assert_eq!(r, OK);
        assert_eq!(gpusvc_scheduler_run_until_idle(h, &mut ran), OK);
    }
    assert_eq!(ran, 0, "blocked until the host releases");
    // The host's own sequence releases from another thread, outside any scheduler task.
    let manager = m as usize;
    std::thread::spawn(move || {
        let m = manager as *const gpusvc_sync_manager;
        let (mut released, mut callbacks) = (false, 0);
        // SAFETY: a live manager (freed after the join).
        unsafe {
            assert_eq!(gpusvc_sync_sequence_begin(m, host, n), OK);
            let r = gpusvc_sync_client_release(m, 0, 9, 1, &mut released, &mut callbacks);
            assert_eq!(r, OK);
            assert_eq!(gpusvc_sync_sequence_finish(m, host, n), OK);
        }
        assert!(released);
    })
    .join()
    .unwrap();
    // SAFETY: live handles and out pointer; handle values freed once.
    unsafe {
        assert_eq!(gpusvc_scheduler_run_until_idle(h, &mut ran), OK);
        assert_eq!(gpusvc_scheduler_free(h), OK);
        assert_eq!(gpusvc_sync_manager_free(m), OK);
    }
    assert_eq!(ran, 1);
    assert_eq!(*log.lock().unwrap(), ["wait"]);
}

#[test]
fn the_raise_reverts_when_the_waiter_is_destroyed() {
    let mut s = Sched::new();
    let r = s.stream(LOW);
    let w = s.stream(REAL_TIME);
    s.client(r, 1);
    s.push(r, "r");
    s.push_waiting(w, "w", &[token(1, 1)]);
    assert_eq!(s.scheduled(r), REAL_TIME);
    assert_eq!(s.base(r), LOW);
    s.remove(w);
    assert_eq!(s.scheduled(r), LOW);
}

#[test]
fn a_circular_release_chain_across_3_streams_completes() {
    let mut s = Sched::new();
    let prios = [HIGH, NORMAL, LOW];
    let ids: Vec<u64> = prios.iter().map(|p| s.stream(*p)).collect();
    for (i, id) in ids.iter().enumerate() {
        s.client(*id, i as u64);
        s.set_enabled(*id, false);
    }
    // Stream i waits on stream i+1's release, then releases its own: A -> B -> C -> A.
    for (i, id) in ids.iter().enumerate() {
        let next = ((i + 1) % 3) as u64;
        s.push_waiting(*id, &format!("wait{i}"), &[token(next, 1)]);
        s.push_releasing(*id, &format!("release{i}"), (i as u64, 1));
    }
    for id in ids.iter().rev() {
        s.set_enabled(*id, true);
    }
    assert_eq!(s.run_until_idle(), 6);
    let mut got = s.entries();
    got.sort();
    assert_eq!(
        got,
        [
            "release0", "release1", "release2", "wait0", "wait1", "wait2"
        ]
    );
    for (id, p) in ids.iter().zip(prios) {
        assert_eq!(s.scheduled(*id), p);
        assert_eq!(s.pending(*id), 0);
    }
}

#[test]
fn should_yield_is_false_for_dependent_work_and_true_after_the_release() {
    let mut s = Sched::new();
    let l = s.stream(LOW);
    let h = s.stream(HIGH);
    s.client(l, 1);
    let mut spec = s.spec("l");
    spec.release = Some((1, 1));
    spec.log_yield = true;
    s.enqueue_spec(l, spec, false, &[]);
    s.push_waiting(h, "h", &[token(1, 1)]);
    assert_eq!(s.run_until_idle(), 2);
    assert_eq!(s.entries(), ["l", "yield false", "yield true", "h"]);
}

#[test]
fn time_slice_downgrade_and_reset() {
    let mut s = Sched::with_clock();
    let a = s.stream(HIGH);
    let other = s.stream(NORMAL);
    s.push(other, "other");
    s.advancing(a, "a1", 6);
    s.advancing(a, "a2", 6);
    assert_eq!(s.run_next(), 1, "the slice ends the turn");
    assert_eq!(s.scheduled(a), NORMAL);
    assert_eq!(s.base(a), HIGH);
    // Requeued at the back of Normal, behind the Normal stream that was already waiting.
    s.run_next();
    assert_eq!(s.entries(), ["a1", "other"]);
    s.run_next();
    assert_eq!(s.scheduled(a), LOW);
    s.advancing(a, "a3", 1);
    s.run_next();
    assert_eq!(s.scheduled(a), HIGH, "reset");
    assert_eq!(s.entries(), ["a1", "other", "a2", "a3"]);
}

#[test]
fn real_time_is_never_downgraded() {
    let mut s = Sched::with_clock();
    let a = s.stream(REAL_TIME);
    for name in ["1", "2", "3"] {
        s.advancing(a, name, 50);
    }
    assert_eq!(s.run_until_idle(), 3);
    assert_eq!(s.scheduled(a), REAL_TIME);
}

#[test]
fn the_slice_is_cut_when_higher_priority_arrives() {
    let mut s = Sched::with_clock();
    let low = s.stream(LOW);
    let high = s.stream(HIGH);
    // Control: 2 ms of a 5 ms slice leaves room for the next task in the same turn.
    s.advancing(low, "c1", 2);
    s.push(low, "c2");
    assert_eq!(s.run_next(), 2);
    // Now the first task makes High work arrive, then runs 2 ms > the 1 ms granularity.
    let spec = s.spec("high");
    let high_task = s.keep(spec);
    let mut t1 = s.spec("t1");
    t1.spawn = Some((high, high_task));
    t1.log_yield = true;
    t1.advance_ns = 2 * MS;
    s.enqueue_spec(low, t1, false, &[]);
    s.push(low, "t2");
    assert_eq!(s.run_next(), 1, "cut after t1");
    assert_eq!(s.run_until_idle(), 2);
    assert_eq!(s.entries(), ["c1", "c2", "t1", "yield true", "high", "t2"]);
}

#[test]
fn metrics_per_priority_are_readable_and_pushed() {
    let samples: Mutex<Vec<gpusvc_scheduler_task_sample>> = Mutex::new(Vec::new());
    let clock = AtomicU64::new(7 * MS);
    let config = gpusvc_scheduler_config {
        struct_size: size_of::<gpusvc_scheduler_config>(),
        on_task: Some(count_sample),
        on_task_user_data: ptr::from_ref(&samples).cast_mut().cast(),
        ..manual_clock_config(&clock)
    };
    let log: Log = Mutex::new(Vec::new());
    // The clock and sample log outlive the scheduler.
    let h = new_scheduler(ptr::null(), Some(&config));
    let mut specs: Vec<Box<Spec>> = (0..10)
        .map(|i| {
            Box::new(Spec {
                continues: u32::from(i == 0),
                advance_ns: MS,
                ..Spec::new(&log, &i.to_string(), h, &clock)
            })
        })
        .collect();
    let a = add_stream(h, HIGH);
    let (mut n, mut ran) = (0, 0);
    let mut high = gpusvc_scheduler_priority_metrics::default();
    let mut low = high;
    // SAFETY: live handle, out pointers and specs (freed after the scheduler).
    unsafe {
        for spec in &mut specs {
            let ud: *mut Spec = &mut **spec;
            let r = gpusvc_scheduler_enqueue(
                h,
                a,
                &task_of(Some(run_spec), None, ud.cast(), ptr::null(), 0),
                &mut n,
            );
            assert_eq!(r, OK);
        }
        assert_eq!(gpusvc_scheduler_run_until_idle(h, &mut ran), OK);
        assert_eq!(gpusvc_scheduler_metrics(h, HIGH, &mut high), OK);
        assert_eq!(gpusvc_scheduler_metrics(h, LOW, &mut low), OK);
        assert_eq!(gpusvc_scheduler_free(h), OK);
    }
    assert_eq!(ran, 11, "10 tasks, one of them continued once");
    assert_eq!(high.tasks, 10);
    assert_eq!(high.continuations, 1);
    assert_eq!(high.sample_count, 10);
    assert_eq!(high.run_ns, 11 * MS, "every run advanced the clock 1 ms");
    assert!(high.delay_p50_ns > 0, "tasks waited behind 1 ms runs");
    assert!(high.delay_p99_ns >= high.delay_p50_ns);
    assert_eq!(low, gpusvc_scheduler_priority_metrics::default());
    let samples = samples.into_inner().unwrap();
    assert_eq!(samples.len(), 11);
    assert_eq!(samples.iter().filter(|s| s.continuation).count(), 1);
    assert!(samples.iter().all(|s| s.priority == HIGH && s.run_ns == MS));
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
                &task_of(None, None, ptr::null_mut(), ptr::null(), 0),
                &mut n
            ),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_scheduler_enqueue(
                s.h,
                a,
                &task_of(Some(run_spec), None, ptr::null_mut(), ptr::null(), 1),
                &mut n
            ),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_scheduler_enqueue(
                s.h,
                a + 1000,
                &task_of(Some(run_spec), None, ptr::null_mut(), ptr::null(), 0),
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
        let config = default_config();
        let mut made = ptr::null_mut();
        assert_eq!(
            gpusvc_scheduler_new_with_config(ptr::null(), ptr::null(), &mut made),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_scheduler_new_with_config(ptr::null(), &config, ptr::null_mut()),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        // A slice shorter than the granularity, explicit or default (1 ms).
        for (time_slice_ns, granularity_ns) in [(MS, 2 * MS), (MS / 2, 0)] {
            let bad = gpusvc_scheduler_config {
                struct_size: size_of::<gpusvc_scheduler_config>(),
                time_slice_ns,
                granularity_ns,
                ..config
            };
            assert_eq!(
                gpusvc_scheduler_new_with_config(ptr::null(), &bad, &mut made),
                gpusvc_result::GPUSVC_INVALID_ARGUMENT
            );
        }
        assert!(made.is_null(), "outputs are written only on OK");
        let mut metrics = gpusvc_scheduler_priority_metrics {
            struct_size: size_of::<gpusvc_scheduler_priority_metrics>(),
            tasks: 5,
            ..Default::default()
        };
        assert_eq!(
            gpusvc_scheduler_metrics(s.h, 4, &mut metrics),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_scheduler_metrics(s.h, NORMAL, ptr::null_mut()),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(metrics.tasks, 5, "outputs are written only on OK");
        let mut p = 99;
        assert_eq!(
            gpusvc_scheduler_base_priority(s.h, a + 1000, &mut p),
            gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM
        );
        assert_eq!(
            gpusvc_scheduler_base_priority(s.h, a, ptr::null_mut()),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(p, 99, "outputs are written only on OK");
        let mut pending = 99;
        assert_eq!(
            gpusvc_scheduler_pending_tasks(s.h, a + 1000, &mut pending),
            gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM
        );
        assert_eq!(pending, 99, "outputs are written only on OK");
        assert_eq!(
            gpusvc_scheduler_remove_stream(s.h, a, ptr::null_mut()),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(s.pending(a), 0, "the stream is still there");
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

/// A host task that owns heap user data: `run` logs and continues `continues` times, `destroy`
/// logs and frees the box.
struct Owned {
    log: *const Mutex<Vec<String>>,
    name: &'static str,
    continues: u32,
}

unsafe extern "C" fn run_owned(ud: *mut c_void) -> u32 {
    // SAFETY: a live `Owned` until `destroy_owned` frees it.
    let o = unsafe { &mut *ud.cast::<Owned>() };
    // SAFETY: the log outlives every task.
    unsafe { &*o.log }
        .lock()
        .unwrap()
        .push(format!("run {}", o.name));
    if o.continues > 0 {
        o.continues -= 1;
        gpusvc_scheduler_task_result::GPUSVC_SCHEDULER_TASK_CONTINUE_LATER as u32
    } else {
        gpusvc_scheduler_task_result::GPUSVC_SCHEDULER_TASK_DONE as u32
    }
}

unsafe extern "C" fn destroy_owned(ud: *mut c_void) {
    // SAFETY: made by `Box::into_raw` in `enqueue_owned`; destroy runs once.
    let o = unsafe { Box::from_raw(ud.cast::<Owned>()) };
    // SAFETY: the log outlives every task.
    unsafe { &*o.log }
        .lock()
        .unwrap()
        .push(format!("destroy {}", o.name));
}

fn enqueue_owned(
    h: *mut gpusvc_scheduler,
    stream: u64,
    log: &Mutex<Vec<String>>,
    name: &'static str,
    continues: u32,
) -> gpusvc_result {
    let ud = Box::into_raw(Box::new(Owned {
        log,
        name,
        continues,
    }));
    let task = gpusvc_scheduler_task {
        struct_size: size_of::<gpusvc_scheduler_task>(),
        run: Some(run_owned),
        start: None,
        destroy: Some(destroy_owned),
        user_data: ud.cast(),
        waits: ptr::null(),
        wait_count: 0,
    };
    let mut n = 0;
    // SAFETY: a live handle, task and out pointer.
    let r = unsafe { gpusvc_scheduler_enqueue(h, stream, &task, &mut n) };
    if r != OK {
        // Not taken: still ours.
        // SAFETY: made by `Box::into_raw` above and not handed over.
        drop(unsafe { Box::from_raw(ud) });
    }
    r
}

#[test]
fn destroy_runs_once_when_the_scheduler_is_done_with_a_task() {
    let log = Mutex::new(Vec::new());
    let h = new_scheduler(ptr::null(), None);
    let (a, b) = (add_stream(h, HIGH), add_stream(h, NORMAL));
    let mut ran = 0;
    let mut removed = gpusvc_scheduler_removed_stream::default();
    assert_eq!(enqueue_owned(h, a, &log, "done", 0), OK);
    assert_eq!(enqueue_owned(h, a, &log, "continued", 2), OK);
    assert_eq!(
        enqueue_owned(h, a + 1000, &log, "refused", 0),
        gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM
    );
    // SAFETY: live handle and out pointer.
    unsafe { assert_eq!(gpusvc_scheduler_run_until_idle(h, &mut ran), OK) };
    assert_eq!(ran, 4);
    assert_eq!(
        std::mem::take(&mut *log.lock().unwrap()),
        [
            "run done",
            "destroy done",
            "run continued",
            "run continued",
            "run continued",
            "destroy continued"
        ],
        "destroy right after the completing run, once; never for a refused enqueue"
    );
    assert_eq!(enqueue_owned(h, b, &log, "removed 1", 0), OK);
    assert_eq!(enqueue_owned(h, b, &log, "removed 2", 0), OK);
    // SAFETY: live handle and out pointer.
    unsafe { assert_eq!(gpusvc_scheduler_remove_stream(h, b, &mut removed), OK) };
    assert_eq!(removed.dropped_tasks, 2);
    assert_eq!(
        std::mem::take(&mut *log.lock().unwrap()),
        ["destroy removed 1", "destroy removed 2"],
        "dropped unrun by the removal"
    );
    assert_eq!(enqueue_owned(h, a, &log, "pending at free", 0), OK);
    // SAFETY: a live handle, freed once.
    unsafe { assert_eq!(gpusvc_scheduler_free(h), OK) };
    assert_eq!(
        std::mem::take(&mut *log.lock().unwrap()),
        ["destroy pending at free"],
        "dropped unrun by the free"
    );
}

#[test]
fn a_host_client_on_a_streams_sequence_lends_priority_too() {
    let m = new_sync_manager();
    {
        let mut s = Sched::over(m);
        let r = s.stream(LOW);
        let n = s.stream(NORMAL);
        let w = s.stream(HIGH);
        let mut seq = 0;
        // SAFETY: live handles and out pointer.
        unsafe {
            assert_eq!(gpusvc_scheduler_stream_sequence(s.h, r, &mut seq), OK);
            // Through the sync manager, not gpusvc_scheduler_create_client.
            assert_eq!(gpusvc_sync_client_create(m, 0, 1, seq), OK);
        }
        s.push_releasing(r, "r", (1, 1));
        s.push(n, "n");
        s.push_waiting(w, "w", &[token(1, 1)]);
        assert_eq!(s.scheduled(r), HIGH);
        s.run_until_idle();
        assert_eq!(s.entries(), ["r", "w", "n"]);
        assert_eq!(s.scheduled(r), LOW, "reverted");
        let mut out = 0;
        // SAFETY: a live handle; NULL out and unknown stream are codes.
        unsafe {
            assert_eq!(
                gpusvc_scheduler_stream_sequence(s.h, r + 1000, &mut out),
                gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM
            );
            assert_eq!(
                gpusvc_scheduler_stream_sequence(s.h, r, ptr::null_mut()),
                gpusvc_result::GPUSVC_NULL_ARGUMENT
            );
        }
    }
    free_sync_manager(m);
}

/// Issue 11, item 1: streams waiting in a ring on tokens that are never released. Two streams:
/// A: 1, then 3 waits on B; B: 2, then 4 waits on A. A's wait is fenced at 3 on B (numbers 2 and
/// 4): when B finishes 2 its next number, 4, is past the fence and the wait is retired; A runs
/// 3, which retires B's wait (fenced at 3 on A). The same with three (A: 1, 4 on B; B: 2, 5 on C;
/// C: 3, 6 on A). Every task runs, each stream's in order.
#[test]
fn streams_waiting_in_a_ring_on_unreleased_tokens_all_run() {
    for n in [2u64, 3] {
        let mut s = Sched::new();
        let ids: Vec<u64> = (0..n).map(|_| s.stream(NORMAL)).collect();
        for (i, id) in ids.iter().enumerate() {
            s.client(*id, i as u64 + 1);
        }
        let name = |i: usize, round: u64| format!("{}{round}", (b'A' + i as u8) as char);
        let mut expected = 1;
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(s.push(*id, &name(i, 1)), expected);
            expected += 1;
        }
        for (i, id) in ids.iter().enumerate() {
            // Stream i waits on the next stream's client (1-based), which never releases.
            let next = (i as u64 + 1) % n + 1;
            assert_eq!(
                s.push_waiting(*id, &name(i, 2), &[token(next, 1)]),
                expected
            );
            expected += 1;
        }
        let ran = s.run_until_idle();
        let got = s.entries();
        assert_eq!(ran as u64, 2 * n, "{ran} of {} tasks ran: {got:?}", 2 * n);
        for (i, id) in ids.iter().enumerate() {
            let first = got.iter().position(|e| *e == name(i, 1));
            let second = got.iter().position(|e| *e == name(i, 2));
            assert!(
                matches!((first, second), (Some(a), Some(b)) if a < b),
                "{got:?}"
            );
            assert_eq!(s.pending(*id), 0);
        }
    }
}

#[test]
fn a_raised_stream_is_queued_by_the_age_of_its_front_task() {
    let mut s = Sched::new();
    let r = s.stream(LOW);
    let [h0, h1, h2, w] = [(); 4].map(|_| s.stream(HIGH));
    s.client(r, 1);
    // h0 joins High before R's task is enqueued, h1 and h2 after it.
    s.push(h0, "h0");
    s.push_releasing(r, "r", (1, 1));
    s.push(h1, "h1");
    s.push(h2, "h2");
    // W's wait raises R to High: R's older task goes ahead of h1 and h2, not of h0.
    s.push_waiting(w, "w", &[token(1, 1)]);
    assert_eq!(s.scheduled(r), HIGH);
    assert_eq!(s.run_until_idle(), 5);
    assert_eq!(s.entries(), ["h0", "r", "h1", "h2", "w"]);
}

/// Issue 12: the scheduler owns the clients it creates — removing their stream destroys them
/// (their tokens read as released) — and a client the host made since under the same id is not
/// the scheduler's: freeing the scheduler leaves it alone.
#[test]
fn the_scheduler_destroys_its_own_clients_and_only_those() {
    let m = new_sync_manager();
    let released = |client: u64| is_released(m, client, 1);
    {
        let s = Sched::over(m);
        let a = s.stream(NORMAL);
        let b = s.stream(NORMAL);
        s.client(a, 1);
        s.client(b, 2);
        assert!(!released(1) && !released(2));
        s.remove(a);
        assert!(released(1), "destroyed with its stream");
        assert!(!released(2));
        let mut host = 0;
        // SAFETY: a live handle and out pointer.
        unsafe {
            assert_eq!(gpusvc_sync_client_destroy(m, 0, 2), OK);
            assert_eq!(gpusvc_sync_sequence_create(m, &mut host), OK);
            assert_eq!(gpusvc_sync_client_create(m, 0, 2, host), OK);
        }
    }
    assert!(!released(2), "the host's client 2 outlives the scheduler");
    // SAFETY: live handles; the manager is freed once.
    unsafe {
        assert_eq!(gpusvc_sync_client_destroy(m, 0, 2), OK);
        assert_eq!(gpusvc_sync_manager_free(m), OK);
    }
}

unsafe extern "C" fn counting_now(ud: *mut c_void) -> u64 {
    // SAFETY: the test's counter, which outlives the call.
    unsafe { &*ud.cast::<AtomicU64>() }.fetch_add(1, Ordering::SeqCst)
}

/// The time-slice rule is the crate's (`SchedulerConfig::validate`): its message is the detail,
/// and a refused config never calls the host clock.
#[test]
fn a_refused_config_says_why_and_never_reads_the_host_clock() {
    let readings = AtomicU64::new(0);
    let config = gpusvc_scheduler_config {
        struct_size: size_of::<gpusvc_scheduler_config>(),
        time_slice_ns: MS,
        granularity_ns: 2 * MS,
        now_ns: Some(counting_now),
        clock_user_data: ptr::from_ref(&readings).cast_mut().cast(),
        ..default_config()
    };
    let mut h = ptr::null_mut();
    // SAFETY: live config and out pointer.
    let r = unsafe { gpusvc_scheduler_new_with_config(ptr::null(), &config, &mut h) };
    assert_eq!(r, gpusvc_result::GPUSVC_INVALID_ARGUMENT);
    assert_eq!(
        last_detail(),
        "time slice 1ms is shorter than the granularity 2ms"
    );
    assert!(h.is_null());
    assert_eq!(readings.load(Ordering::SeqCst), 0);
}

/// Issue 12: an order error met by the scheduler names the stream's sequence (it said
/// "sequence 0"): enqueueing on a stream whose sequence the host destroyed through the shared
/// sync manager.
#[test]
fn an_order_error_names_the_streams_sequence() {
    let m = new_sync_manager();
    {
        let s = Sched::over(m);
        let a = s.stream(NORMAL);
        let (mut seq, mut n) = (0, 0);
        // SAFETY: live handles, task and out pointers.
        unsafe {
            assert_eq!(gpusvc_scheduler_stream_sequence(s.h, a, &mut seq), OK);
            assert_eq!(gpusvc_sync_sequence_destroy(m, seq), OK);
            let r = gpusvc_scheduler_enqueue(
                s.h,
                a,
                &task_of(Some(run_spec), None, ptr::null_mut(), ptr::null(), 0),
                &mut n,
            );
            assert_eq!(r, gpusvc_result::GPUSVC_SYNC_UNKNOWN_SEQUENCE);
        }
        assert_eq!(
            last_detail(),
            format!("sync sequence {seq} does not exist (destroyed or never created)")
        );
    }
    free_sync_manager(m);
}

unsafe extern "C" fn bump(ud: *mut c_void) {
    // SAFETY: the test's counter, which outlives every callback.
    unsafe { &*ud.cast::<AtomicU64>() }.fetch_add(1, Ordering::SeqCst);
}

/// Issue 12: a scheduler made over a sync manager keeps it: freeing the manager's handle first
/// leaves the scheduler working, and the waits still pending end when the scheduler (the last
/// user) is freed.
#[test]
fn a_sync_manager_freed_before_its_scheduler_lives_until_the_scheduler_is_freed() {
    let ended = AtomicU64::new(0);
    let m = new_sync_manager();
    let mut s = Sched::over(m);
    let (mut host, mut waiter, mut order, mut registered) = (0, 0, 0, false);
    // SAFETY: live handles and out pointers; `ended` outlives the manager.
    unsafe {
        assert_eq!(gpusvc_sync_sequence_create(m, &mut host), OK);
        assert_eq!(gpusvc_sync_client_create(m, 0, 9, host), OK);
        assert_eq!(gpusvc_sync_sequence_generate(m, host, &mut order), OK);
        assert_eq!(gpusvc_sync_sequence_create(m, &mut waiter), OK);
        assert_eq!(gpusvc_sync_sequence_generate(m, waiter, &mut order), OK);
        let r = gpusvc_sync_token_wait(
            m,
            &token(9, 1),
            waiter,
            order,
            Some(bump),
            ptr::from_ref(&ended).cast_mut().cast(),
            &mut registered,
        );
        assert_eq!((r, registered), (OK, true));
        assert_eq!(gpusvc_sync_manager_free(m), OK);
    }
    assert_eq!(
        ended.load(Ordering::SeqCst),
        0,
        "the scheduler still holds it"
    );
    let a = s.stream(NORMAL);
    s.client(a, 1);
    s.push(a, "after");
    assert_eq!(s.run_until_idle(), 1);
    drop(s);
    assert_eq!(ended.load(Ordering::SeqCst), 1, "ended with the last user");
}

/// An enqueue refused by any check — the output pointer, checked after the task is read,
/// included — never calls `destroy`: the user data stays the caller's.
#[test]
fn a_refused_enqueue_never_calls_destroy() {
    let destroyed = AtomicU64::new(0);
    let s = Sched::new();
    let a = s.stream(NORMAL);
    let task = gpusvc_scheduler_task {
        struct_size: size_of::<gpusvc_scheduler_task>(),
        run: Some(run_owned),
        start: None,
        destroy: Some(bump),
        user_data: ptr::from_ref(&destroyed).cast_mut().cast(),
        waits: ptr::null(),
        wait_count: 0,
    };
    let mut n = 0;
    // SAFETY: a live handle and task; NULL and unknown arguments on purpose; `run` never runs
    // (the scheduler is freed before any drive) and `destroy` (`bump`) takes the counter.
    unsafe {
        let no_out = gpusvc_scheduler_enqueue(s.h, a, &task, ptr::null_mut());
        assert_eq!(no_out, gpusvc_result::GPUSVC_NULL_ARGUMENT);
        let unknown = gpusvc_scheduler_enqueue(s.h, a + 1000, &task, &mut n);
        assert_eq!(unknown, gpusvc_result::GPUSVC_SCHEDULER_UNKNOWN_STREAM);
        let no_waits = gpusvc_scheduler_task {
            struct_size: size_of::<gpusvc_scheduler_task>(),
            wait_count: 1,
            ..task
        };
        let r = gpusvc_scheduler_enqueue(s.h, a, &no_waits, &mut n);
        assert_eq!(r, gpusvc_result::GPUSVC_NULL_ARGUMENT);
        assert_eq!(destroyed.load(Ordering::SeqCst), 0);
        assert_eq!(gpusvc_scheduler_enqueue(s.h, a, &task, &mut n), OK);
    }
    drop(s);
    assert_eq!(
        destroyed.load(Ordering::SeqCst),
        1,
        "taken, then dropped unrun"
    );
}
