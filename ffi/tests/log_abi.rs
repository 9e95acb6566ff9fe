//! `gpusvc_set_log_callback` from Rust through the C exports, with an `extern "C"` callback
//! that collects lines: distinct events of several crates reach it (stale store removed,
//! damaged entry rejected, folder unusable, GL context freed off its thread, a stream removed
//! with its tasks, waits retired), the level filter, unsetting, the teardown gate against a
//! call in flight on another thread, re-entrancy (the callback replaces itself and calls other
//! exports; events it raises are dropped and counted) and a Rust host whose own subscriber was
//! there first.
//!
//! The callback is process-wide, so the tests take turns (`TURN`).

mod common;

use std::ffi::{CStr, c_char, c_void};
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::*;
use gpusvc::*;

static TURN: Mutex<()> = Mutex::new(());

fn turn() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

const ERROR: u32 = gpusvc_log_level::GPUSVC_LOG_LEVEL_ERROR as u32;
const WARN: u32 = gpusvc_log_level::GPUSVC_LOG_LEVEL_WARN as u32;
const INFO: u32 = gpusvc_log_level::GPUSVC_LOG_LEVEL_INFO as u32;
const DEBUG: u32 = gpusvc_log_level::GPUSVC_LOG_LEVEL_DEBUG as u32;
const TRACE: u32 = gpusvc_log_level::GPUSVC_LOG_LEVEL_TRACE as u32;

#[derive(Debug, Clone, PartialEq)]
struct Line {
    level: u32,
    target: String,
    message: String,
}

/// What the callback received.
#[derive(Default)]
struct Sink {
    lines: Mutex<Vec<Line>>,
    /// Calls started and calls inside right now.
    started: AtomicUsize,
    inside: AtomicUsize,
    /// Each call sleeps this long (the gate test).
    linger_ms: AtomicUsize,
}

impl Sink {
    fn lines(&self) -> Vec<Line> {
        self.lines.lock().unwrap().clone()
    }

    /// The first line from `target` whose message contains `text`.
    fn find(&self, target: &str, text: &str) -> Option<Line> {
        self.lines()
            .into_iter()
            .find(|l| l.target == target && l.message.contains(text))
    }

    fn expect(&self, target: &str, text: &str) -> Line {
        self.find(target, text).unwrap_or_else(|| {
            panic!(
                "no line from {target} with {text:?}; got:\n{:#?}",
                self.lines()
            )
        })
    }
}

unsafe extern "C" fn collect(
    level: u32,
    target: *const c_char,
    message: *const c_char,
    user_data: *mut c_void,
) {
    // SAFETY: `user_data` is the live `Sink` the test passed (it outlives the callback: each
    // test unsets it before the sink goes); the strings are NUL-terminated for the call.
    let (sink, target, message) = unsafe {
        (
            &*user_data.cast::<Sink>(),
            CStr::from_ptr(target).to_str().unwrap().to_owned(),
            CStr::from_ptr(message).to_str().unwrap().to_owned(),
        )
    };
    sink.started.fetch_add(1, Ordering::SeqCst);
    sink.inside.fetch_add(1, Ordering::SeqCst);
    let linger = sink.linger_ms.load(Ordering::SeqCst);
    if linger > 0 {
        std::thread::sleep(Duration::from_millis(linger as u64));
    }
    sink.lines.lock().unwrap().push(Line {
        level,
        target,
        message,
    });
    sink.inside.fetch_sub(1, Ordering::SeqCst);
}

fn set(level: u32, sink: &Sink) -> gpusvc_result {
    // SAFETY: the sink outlives the callback (unset before it is dropped).
    unsafe { gpusvc_set_log_callback(level, Some(collect), ptr::from_ref(sink).cast_mut().cast()) }
}

fn unset() {
    // SAFETY: NULL unsets; no pointer is read.
    let r = unsafe { gpusvc_set_log_callback(0, None, ptr::null_mut()) };
    assert_eq!(r, OK);
}

fn dropped_events() -> u64 {
    // SAFETY: a live out slot.
    written(0, |out| unsafe { gpusvc_log_dropped_events(out) })
}

// ---- events ----

unsafe extern "C" fn run_done(_: *mut c_void) -> u32 {
    DONE
}

/// A stream removed with `tasks` pending: "gpusvc::scheduler" at INFO.
fn remove_a_stream_with_tasks(tasks: usize) {
    let sched = new_scheduler(ptr::null(), None);
    let stream = add_stream(sched, NORMAL);
    for _ in 0..tasks {
        let task = gpusvc_scheduler_task {
            struct_size: size_of::<gpusvc_scheduler_task>(),
            run: Some(run_done),
            start: None,
            destroy: None,
            user_data: ptr::null_mut(),
            waits: ptr::null(),
            wait_count: 0,
        };
        // SAFETY: live handle, task and out slot.
        written(0, |out| unsafe {
            gpusvc_scheduler_enqueue(sched, stream, &task, out)
        });
    }
    let removed = written(gpusvc_scheduler_removed_stream::default(), |out| unsafe {
        // SAFETY: a live handle and out slot.
        gpusvc_scheduler_remove_stream(sched, stream, out)
    });
    assert_eq!(removed.dropped_tasks, tasks as u64);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_scheduler_free(sched) }, OK);
}

unsafe extern "C" fn wait_ended(_: *mut c_void) {}

/// A wait whose releaser is destroyed before it releases: "gpusvc::sync" at DEBUG.
fn retire_a_wait() {
    let m = new_sync_manager();
    // SAFETY: a live manager and out slot.
    let releaser = written(0, |out| unsafe { gpusvc_sync_sequence_create(m, out) });
    // SAFETY: as above.
    let waiter = written(0, |out| unsafe { gpusvc_sync_sequence_create(m, out) });
    // SAFETY: a live manager.
    let r = unsafe { gpusvc_sync_client_create(m, 0, 77, releaser) };
    assert_eq!(r, OK);
    // SAFETY: a live manager and out slot.
    written(0, |out| unsafe {
        gpusvc_sync_sequence_generate(m, releaser, out)
    });
    // SAFETY: as above.
    let order = written(0, |out| unsafe {
        gpusvc_sync_sequence_generate(m, waiter, out)
    });
    let token = gpusvc_sync_token {
        namespace_id: 0,
        command_buffer_id: 77,
        release_count: 1,
        verified: true,
    };
    // SAFETY: a live manager, token and out slot; the callback needs no user data.
    let registered = written(false, |out| unsafe {
        gpusvc_sync_token_wait(
            m,
            &token,
            waiter,
            order,
            Some(wait_ended),
            ptr::null_mut(),
            out,
        )
    });
    assert!(registered);
    // SAFETY: a live manager.
    let r = unsafe { gpusvc_sync_sequence_destroy(m, releaser) };
    assert_eq!(r, OK);
    free_sync_manager(m);
}

fn path_bytes(p: &Path) -> Vec<u8> {
    p.to_str().unwrap().as_bytes().to_vec()
}

/// A disk cache over `dir` for driver `version`, loaded and flushed.
fn open_disk(dir: &Path, version: &str) -> *mut gpusvc_program_cache {
    let bytes = path_bytes(dir);
    let mut disk = std::mem::MaybeUninit::<gpusvc_program_cache_disk_config>::zeroed();
    // SAFETY: a live local; `struct_size` is set before the defaults are written.
    unsafe {
        (&raw mut (*disk.as_mut_ptr()).struct_size)
            .write(size_of::<gpusvc_program_cache_disk_config>())
    };
    // SAFETY: a live out slot.
    let r = unsafe { gpusvc_program_cache_disk_config_defaults(disk.as_mut_ptr()) };
    assert_eq!(r, OK);
    // SAFETY: written on GPUSVC_OK.
    let mut disk = unsafe { disk.assume_init() };
    disk.dir = bytes.as_ptr().cast();
    disk.dir_len = bytes.len();
    disk.host_product = c"log abi tests".as_ptr();
    disk.host_version = c"1".as_ptr();
    let version = std::ffi::CString::new(version).unwrap();
    let driver = gpusvc_driver_identity {
        struct_size: size_of::<gpusvc_driver_identity>(),
        gl_vendor: c"Test vendor".as_ptr(),
        gl_renderer: c"test renderer".as_ptr(),
        gl_version: version.as_ptr(),
        context: ptr::null(),
    };
    let mut cache = ptr::null_mut();
    // SAFETY: live locals; the config's pointers are live for the call.
    let r = unsafe {
        gpusvc_program_cache_open(
            &cache_config(1 << 20),
            None,
            ptr::null_mut(),
            &disk,
            &driver,
            &mut cache,
        )
    };
    assert_eq!(r, OK, "{}", last_detail());
    let mut report = gpusvc_program_cache_disk_load_report::default();
    // SAFETY: live handle and out slot.
    unsafe { gpusvc_program_cache_wait_until_loaded(cache, 10_000, &mut report) };
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_flush_disk(cache) }, OK);
    cache
}

fn save(cache: *mut gpusvc_program_cache, n: u8) {
    let bytes: Vec<u8> = (0..300u32).map(|i| (i as u8).wrapping_mul(n)).collect();
    let none = gpusvc_program_cache_shader_variables {
        attributes: ptr::null(),
        attribute_count: 0,
        uniforms: ptr::null(),
        uniform_count: 0,
    };
    let desc = gpusvc_program_cache_entry_desc {
        struct_size: size_of::<gpusvc_program_cache_entry_desc>(),
        vertex_shader: gpusvc_program_cache_sha1 { bytes: [n; 20] },
        fragment_shader: gpusvc_program_cache_sha1 { bytes: [!n; 20] },
        vertex: none,
        fragment: none,
        binary_format: 0xB1,
        binary: bytes.as_ptr(),
        binary_len: bytes.len(),
        has_page: false,
        failure: GPUSVC_PROGRAM_CACHE_FAILURE_NONE,
        failure_stage: 0,
        failure_log: ptr::null(),
        failure_log_len: 0,
        page: 0,
    };
    let mut report = gpusvc_program_cache_save_report::default();
    let key = gpusvc_program_cache_sha1 { bytes: [n; 20] };
    // SAFETY: live locals.
    let r = unsafe { gpusvc_program_cache_save(cache, &key, &desc, &mut report) };
    assert_eq!(r, OK, "{}", last_detail());
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_flush_disk(cache) }, OK);
}

fn free_cache(cache: *mut gpusvc_program_cache) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_free(cache) }, OK);
}

/// Every entry file under `root`'s stores.
fn entry_files(root: &Path) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for store in std::fs::read_dir(root).unwrap().flatten() {
        if let Ok(entries) = std::fs::read_dir(store.path().join("entries")) {
            v.extend(entries.flatten().map(|e| e.path()));
        }
    }
    v
}

/// Stale store removed (INFO), damaged entry rejected (WARN), unusable folder (WARN).
fn disk_events() {
    let dir = tempfile::tempdir().unwrap();
    // A store with one entry, whose payload is then damaged: rejected at the next load.
    let a = open_disk(dir.path(), "1.0");
    save(a, 1);
    free_cache(a);
    let files = entry_files(dir.path());
    assert_eq!(files.len(), 1);
    let mut bytes = std::fs::read(&files[0]).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xFF;
    std::fs::write(&files[0], &bytes).unwrap();
    let b = open_disk(dir.path(), "1.0");
    free_cache(b);
    // Another driver version: the first store is stale and removed.
    let c = open_disk(dir.path(), "2.0");
    free_cache(c);
    // A file where the folder should be.
    let file = dir.path().join("not-a-folder");
    std::fs::write(&file, b"x").unwrap();
    let d = open_disk(&file, "1.0");
    free_cache(d);
}

/// A GL context freed off its thread (ERROR); false when there is no GL.
fn gl_context_freed_off_thread() -> bool {
    let Some(ctx) = open_gl_context("log: context freed off its thread", 0) else {
        return false;
    };
    let addr = ctx as usize;
    std::thread::spawn(move || {
        // SAFETY: a handle value; the registry refuses it on this thread (leaked, logged).
        unsafe { gpusvc_gl_context_free(addr as *mut gpusvc_gl_context) }
    })
    .join()
    .unwrap();
    // SAFETY: its own thread: freed for real.
    unsafe { gpusvc_gl_context_free(ctx) };
    true
}

// ---- tests ----

#[test]
fn distinct_events_of_several_crates_reach_the_host() {
    let _turn = turn();
    let sink = Sink::default();
    assert_eq!(set(TRACE, &sink), OK);
    disk_events();
    let gl = gl_context_freed_off_thread();
    remove_a_stream_with_tasks(3);
    retire_a_wait();
    unset();

    let store = "program_cache::disk::store_dir";
    let l = sink.expect(store, "rejected a damaged cache entry");
    assert_eq!(l.level, WARN);
    assert!(
        l.message.contains(" key=") && l.message.contains(" error="),
        "{l:?}"
    );
    let l = sink.expect("program_cache::disk::loader", "disk entry rejected at load");
    assert_eq!(l.level, DEBUG);
    let l = sink.expect(
        "program_cache::disk::condition",
        "program cache: removed the store",
    );
    assert_eq!(l.level, INFO);
    let l = sink.expect("program_cache::disk::condition", "unusable");
    assert_eq!(l.level, WARN);
    assert!(
        l.message.contains("not-a-folder") && l.message.contains("memory only"),
        "{l:?}"
    );
    let l = sink.expect("gpusvc::scheduler", "stream removed with pending tasks");
    assert_eq!(l.level, INFO);
    assert!(l.message.contains("dropped_tasks=3"), "{l:?}");
    let l = sink.expect("gpusvc::sync", "waits retired without their release");
    assert_eq!(l.level, DEBUG);
    assert!(l.message.contains("waits=1"), "{l:?}");
    let mut distinct = 6;
    if gl {
        let l = sink.expect("gpusvc::gl", "off its thread; context leaked");
        assert_eq!(l.level, ERROR);
        distinct += 1;
    }
    eprintln!("{distinct} distinct events reached the callback");
}

#[test]
fn the_level_filters_what_reaches_the_host() {
    let _turn = turn();
    let sink = Sink::default();
    assert_eq!(set(WARN, &sink), OK);
    remove_a_stream_with_tasks(1);
    retire_a_wait();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain file");
    std::fs::write(&file, b"x").unwrap();
    free_cache(open_disk(&file, "1.0"));
    assert!(sink.find("gpusvc::scheduler", "").is_none());
    assert!(sink.find("gpusvc::sync", "").is_none());
    sink.expect("program_cache::disk::condition", "plain file");
    assert!(
        sink.lines().iter().all(|l| l.level <= WARN),
        "{:#?}",
        sink.lines()
    );

    assert_eq!(set(INFO, &sink), OK);
    remove_a_stream_with_tasks(2);
    retire_a_wait();
    sink.expect("gpusvc::scheduler", "dropped_tasks=2");
    assert!(sink.find("gpusvc::sync", "").is_none());
    unset();
}

#[test]
fn unset_stops_the_calls_and_a_bad_level_changes_nothing() {
    let _turn = turn();
    let sink = Sink::default();
    assert_eq!(set(INFO, &sink), OK);
    for bad in [0, 6, u32::MAX] {
        assert_eq!(
            set(bad, &sink),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT,
            "{bad}"
        );
    }
    // The callback set before the refused calls is still in place.
    remove_a_stream_with_tasks(1);
    assert_eq!(sink.started.load(Ordering::SeqCst), 1);
    unset();
    // A NULL callback with any level unsets, twice is fine.
    // SAFETY: NULL unsets.
    let r = unsafe { gpusvc_set_log_callback(99, None, ptr::null_mut()) };
    assert_eq!(r, OK);
    remove_a_stream_with_tasks(1);
    retire_a_wait();
    assert_eq!(sink.started.load(Ordering::SeqCst), 1);
    // And a new one starts them again.
    let other = Sink::default();
    assert_eq!(set(INFO, &other), OK);
    remove_a_stream_with_tasks(1);
    unset();
    assert_eq!(
        (
            sink.started.load(Ordering::SeqCst),
            other.started.load(Ordering::SeqCst)
        ),
        (1, 1)
    );
}

#[test]
fn no_call_starts_after_unset_returns_and_one_in_flight_is_waited_for() {
    let _turn = turn();
    let sink = Arc::new(Sink::default());
    sink.linger_ms.store(30, Ordering::SeqCst);
    assert_eq!(set(INFO, &sink), OK);
    let stop = Arc::new(AtomicBool::new(false));
    let emitter = std::thread::spawn({
        let stop = stop.clone();
        move || {
            while !stop.load(Ordering::SeqCst) {
                remove_a_stream_with_tasks(1);
            }
        }
    });
    // Unset while a call is in flight on the emitter's thread.
    let deadline = Instant::now() + Duration::from_secs(10);
    while sink.inside.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no call started");
        std::thread::yield_now();
    }
    unset();
    assert_eq!(
        sink.inside.load(Ordering::SeqCst),
        0,
        "unset returned during a call"
    );
    let started = sink.started.load(Ordering::SeqCst);
    // The emitter goes on raising events: none reaches the old callback.
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    emitter.join().unwrap();
    assert_eq!(sink.started.load(Ordering::SeqCst), started);
    assert!(started >= 1);
}

/// The re-entrant callback's state: a second sink to switch to, and the calls it made.
struct Reentrant {
    next: Sink,
    calls: AtomicUsize,
    results: Mutex<Vec<gpusvc_result>>,
}

unsafe extern "C" fn reenter(
    _level: u32,
    _target: *const c_char,
    message: *const c_char,
    user_data: *mut c_void,
) {
    // SAFETY: the live `Reentrant` of the test; a NUL-terminated message.
    let (r, message) = unsafe { (&*user_data.cast::<Reentrant>(), CStr::from_ptr(message)) };
    if !message.to_str().unwrap().contains("dropped_tasks=5") {
        return;
    }
    r.calls.fetch_add(1, Ordering::SeqCst);
    // Another export that raises an event on this thread: dropped, not recursed.
    remove_a_stream_with_tasks(1);
    // SAFETY: a live out slot.
    let version = unsafe { CStr::from_ptr(gpusvc_version()) };
    assert!(!version.to_bytes().is_empty());
    // Replace this very callback from inside it.
    // SAFETY: `next` lives as long as `r`, which the test unsets before dropping.
    let res = unsafe {
        gpusvc_set_log_callback(
            INFO,
            Some(collect),
            ptr::from_ref(&r.next).cast_mut().cast(),
        )
    };
    r.results.lock().unwrap().push(res);
}

#[test]
fn a_callback_may_call_gpusvc_and_replace_itself() {
    let _turn = turn();
    let r = Reentrant {
        next: Sink::default(),
        calls: AtomicUsize::new(0),
        results: Mutex::new(Vec::new()),
    };
    let before = dropped_events();
    // SAFETY: `r` outlives the callbacks (unset below).
    let res = unsafe {
        gpusvc_set_log_callback(INFO, Some(reenter), ptr::from_ref(&r).cast_mut().cast())
    };
    assert_eq!(res, OK);
    let (done, finished) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        remove_a_stream_with_tasks(5);
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(Duration::from_secs(20))
        .expect("the re-entrant callback deadlocked");
    worker.join().unwrap();
    assert_eq!(r.calls.load(Ordering::SeqCst), 1);
    assert_eq!(*r.results.lock().unwrap(), vec![OK]);
    // The event raised inside the callback was dropped (and counted), never passed on.
    assert!(dropped_events() > before, "{before}");
    assert!(
        r.next
            .find("gpusvc::scheduler", "dropped_tasks=1")
            .is_none()
    );
    // The replacement is in force.
    remove_a_stream_with_tasks(4);
    r.next.expect("gpusvc::scheduler", "dropped_tasks=4");
    assert_eq!(r.calls.load(Ordering::SeqCst), 1);
    unset();
}

/// A Rust host's subscriber installed first keeps gpusvc's events (run in a child process: the
/// global subscriber of this test process is gpusvc's).
#[test]
fn a_rust_hosts_own_subscriber_keeps_the_events() {
    if std::env::var_os("GPUSVC_LOG_TEST_RUST_HOST").is_some() {
        rust_host_child();
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_rust_hosts_own_subscriber_keeps_the_events",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("GPUSVC_LOG_TEST_RUST_HOST", "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("rust host child: ok"), "{text}");
}

/// The Rust host's subscriber: counts gpusvc's scheduler events.
struct Counting(Arc<AtomicUsize>);

impl tracing::Subscriber for Counting {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if event.metadata().target() == "gpusvc::scheduler" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn rust_host_child() {
    let seen = Arc::new(AtomicUsize::new(0));
    tracing::subscriber::set_global_default(Counting(seen.clone())).unwrap();
    let sink = Sink::default();
    assert_eq!(set(INFO, &sink), gpusvc_result::GPUSVC_LOG_SUBSCRIBER_TAKEN);
    assert!(last_detail().contains("subscriber"), "{}", last_detail());
    remove_a_stream_with_tasks(2);
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert_eq!(sink.started.load(Ordering::SeqCst), 0);
    // Unsetting succeeds all the same.
    unset();
    println!("rust host child: ok");
}
