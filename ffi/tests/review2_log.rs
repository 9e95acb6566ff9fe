//! Review probes (issue 15, second review) of `gpusvc_set_log_callback` under a C host that
//! sets and replaces callbacks from several threads while events fire, and passes bad levels.

mod common;

use std::ffi::{c_char, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use gpusvc::*;

static TURN: Mutex<()> = Mutex::new(());

const ERROR: u32 = gpusvc_log_level::GPUSVC_LOG_LEVEL_ERROR as u32;
const TRACE: u32 = gpusvc_log_level::GPUSVC_LOG_LEVEL_TRACE as u32;

/// Counts calls and the least severe level seen.
#[derive(Default)]
struct Sink {
    calls: AtomicUsize,
    worst: AtomicU32,
}

unsafe extern "C" fn count(level: u32, _: *const c_char, _: *const c_char, user_data: *mut c_void) {
    // SAFETY: a `Sink` the test keeps alive for the whole process (leaked).
    let sink = unsafe { &*user_data.cast::<Sink>() };
    sink.calls.fetch_add(1, Ordering::SeqCst);
    sink.worst.fetch_max(level, Ordering::SeqCst);
}

fn set(level: u32, sink: &'static Sink) -> gpusvc_result {
    // SAFETY: the sink lives for the rest of the process.
    unsafe { gpusvc_set_log_callback(level, Some(count), ptr::from_ref(sink).cast_mut().cast()) }
}

fn unset() {
    // SAFETY: NULL unsets.
    let r = unsafe { gpusvc_set_log_callback(0, None, ptr::null_mut()) };
    assert_eq!(r, OK);
}

unsafe extern "C" fn run_done(_: *mut c_void) -> u32 {
    DONE
}

/// One INFO event (`gpusvc::scheduler`: a stream removed with a pending task).
fn info_event(sched: *const gpusvc_scheduler) {
    let stream = add_stream(sched, NORMAL);
    let task = gpusvc_scheduler_task {
        struct_size: size_of::<gpusvc_scheduler_task>(),
        run: Some(run_done),
        start: None,
        destroy: None,
        user_data: ptr::null_mut(),
        waits: ptr::null(),
        wait_count: 0,
    };
    // SAFETY: a live handle (disabled stream: the task stays pending), task and out slot.
    unsafe {
        assert_eq!(gpusvc_scheduler_set_enabled(sched, stream, false), OK);
        written(0, |out| gpusvc_scheduler_enqueue(sched, stream, &task, out));
    }
    let removed = written(gpusvc_scheduler_removed_stream::default(), |out| unsafe {
        // SAFETY: a live handle and out slot.
        gpusvc_scheduler_remove_stream(sched, stream, out)
    });
    assert_eq!(removed.dropped_tasks, 1);
}

/// A callback set for ERROR must never receive an INFO event, even while another thread
/// replaces a TRACE callback with it (the level and the callback must change together).
#[test]
fn a_callback_never_gets_events_below_its_own_level_while_callbacks_are_replaced() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let loud: &'static Sink = Box::leak(Box::default());
    let quiet: &'static Sink = Box::leak(Box::default());
    let stop = Arc::new(AtomicBool::new(false));
    let firers: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let sched = new_scheduler(ptr::null(), None);
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    info_event(sched);
                    n += 1;
                }
                // SAFETY: a live handle.
                assert_eq!(unsafe { gpusvc_scheduler_free(sched) }, OK);
                n
            })
        })
        .collect();
    for i in 0..100_000 {
        let (level, sink) = if i % 2 == 0 {
            (TRACE, loud)
        } else {
            (ERROR, quiet)
        };
        assert_eq!(set(level, sink), OK);
    }
    // Bad levels: refused, the current callback kept.
    for bad in [0, 6, u32::MAX] {
        assert_eq!(
            set(bad, loud),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT,
            "level {bad}"
        );
    }
    stop.store(true, Ordering::SeqCst);
    let fired: usize = firers.into_iter().map(|t| t.join().unwrap()).sum();
    unset();
    // After the unset returned, nothing reaches either sink.
    let before = (
        loud.calls.load(Ordering::SeqCst),
        quiet.calls.load(Ordering::SeqCst),
    );
    let sched = new_scheduler(ptr::null(), None);
    info_event(sched);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_scheduler_free(sched) }, OK);
    assert_eq!(
        before,
        (
            loud.calls.load(Ordering::SeqCst),
            quiet.calls.load(Ordering::SeqCst)
        )
    );
    eprintln!(
        "fired {fired}; loud got {}, quiet got {} (worst level {})",
        before.0,
        before.1,
        quiet.worst.load(Ordering::SeqCst)
    );
    assert!(before.0 > 0, "the TRACE callback heard INFO events");
    assert!(
        quiet.worst.load(Ordering::SeqCst) <= ERROR,
        "the ERROR callback got a level-{} event ({} calls)",
        quiet.worst.load(Ordering::SeqCst),
        before.1
    );
}

/// Collects messages (each one's length and ending).
static LONG: Mutex<Vec<String>> = Mutex::new(Vec::new());

unsafe extern "C" fn keep(_: u32, _: *const c_char, message: *const c_char, _: *mut c_void) {
    // SAFETY: NUL-terminated for the call.
    let m = unsafe { std::ffi::CStr::from_ptr(message) };
    LONG.lock().unwrap().push(m.to_string_lossy().into_owned());
}

/// An event whose fields hold a 20,000-byte folder path (a disk cache over a folder that
/// cannot exist): the message reaches the host cut to `GPUSVC_LOG_MAX_MESSAGE` bytes, ending
/// with "…", as valid UTF-8.
#[test]
fn an_event_with_a_huge_field_is_cut_to_the_documented_length() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let dir = format!("{}/{}", file.display(), "é".repeat(10_000));
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
    disk.dir = dir.as_ptr().cast();
    disk.dir_len = dir.len();
    disk.host_product = c"review2".as_ptr();
    disk.host_version = c"1".as_ptr();
    let driver = gpusvc_driver_identity {
        struct_size: size_of::<gpusvc_driver_identity>(),
        gl_vendor: c"v".as_ptr(),
        gl_renderer: c"r".as_ptr(),
        gl_version: c"1".as_ptr(),
        context: ptr::null(),
    };
    // SAFETY: the callback needs no user data.
    let r = unsafe { gpusvc_set_log_callback(TRACE, Some(keep), ptr::null_mut()) };
    assert_eq!(r, OK);
    let mut cache = ptr::null_mut();
    // SAFETY: live locals.
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
    if r == OK {
        let mut report = gpusvc_program_cache_disk_load_report::default();
        // SAFETY: a live handle and out slot.
        unsafe { gpusvc_program_cache_wait_until_loaded(cache, 10_000, &mut report) };
        // SAFETY: a live handle.
        assert_eq!(unsafe { gpusvc_program_cache_free(cache) }, OK);
    }
    unset();
    let lines = LONG.lock().unwrap().clone();
    let long: Vec<_> = lines.iter().filter(|l| l.contains("éé")).collect();
    eprintln!(
        "open: {r:?}; {} lines, {} with the path, longest {} bytes",
        lines.len(),
        long.len(),
        lines.iter().map(String::len).max().unwrap_or(0)
    );
    assert!(!long.is_empty(), "an event names the folder: {lines:#?}");
    for l in &lines {
        assert!(l.len() <= GPUSVC_LOG_MAX_MESSAGE, "{} bytes", l.len());
    }
    for l in long {
        assert!(l.ends_with('…'), "cut with an ellipsis");
    }
}
