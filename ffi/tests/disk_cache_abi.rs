//! The disk layer of the program cache through the C ABI, from Rust: a folder round trip, a
//! stamp change, clear, statistics, the startup load and its report, hot entries, an unusable
//! folder, the kill switch, the stamp from a live GL context (and a real-driver round trip), and
//! the bad inputs the ABI turns into codes.

mod common;

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use gpusvc::*;

const WAIT_MS: u32 = 10_000;

/// What the log callback received.
#[derive(Default)]
struct LogSink {
    calls: AtomicUsize,
    lines: Mutex<Vec<String>>,
}

unsafe extern "C" fn log_line(message: *const c_char, user_data: *mut c_void) {
    // SAFETY: `user_data` is the live `LogSink` the test passed; the message is NUL-terminated.
    let (sink, text) = unsafe {
        (
            &*user_data.cast::<LogSink>(),
            CStr::from_ptr(message).to_string_lossy().into_owned(),
        )
    };
    sink.calls.fetch_add(1, Ordering::SeqCst);
    sink.lines.lock().unwrap().push(text);
}

/// A disk config over `dir` (kept alive by the caller) with the given log sink.
fn disk_config(dir: &[u8], sink: Option<&LogSink>) -> gpusvc_program_cache_disk_config {
    let mut c = std::mem::MaybeUninit::<gpusvc_program_cache_disk_config>::zeroed();
    // SAFETY: a live local; `struct_size` is set before the defaults are written.
    unsafe {
        (&raw mut (*c.as_mut_ptr()).struct_size)
            .write(size_of::<gpusvc_program_cache_disk_config>())
    };
    // SAFETY: a live out slot.
    let r = unsafe { gpusvc_program_cache_disk_config_defaults(c.as_mut_ptr()) };
    assert_eq!(r, OK);
    // SAFETY: written on GPUSVC_OK.
    let mut c = unsafe { c.assume_init() };
    c.dir = dir.as_ptr().cast();
    c.dir_len = dir.len();
    c.host_product = c"rust disk abi tests".as_ptr();
    c.host_version = c"1".as_ptr();
    if let Some(sink) = sink {
        c.log = Some(log_line);
        c.log_user_data = ptr::from_ref(sink).cast_mut().cast();
    }
    c
}

/// Driver identity strings, owned.
struct Driver {
    vendor: CString,
    renderer: CString,
    version: CString,
}

impl Driver {
    fn new(version: &str) -> Self {
        Driver {
            vendor: c"Test vendor".into(),
            renderer: c"test renderer".into(),
            version: CString::new(version).unwrap(),
        }
    }
    fn identity(&self) -> gpusvc_driver_identity {
        gpusvc_driver_identity {
            struct_size: size_of::<gpusvc_driver_identity>(),
            gl_vendor: self.vendor.as_ptr(),
            gl_renderer: self.renderer.as_ptr(),
            gl_version: self.version.as_ptr(),
            context: ptr::null(),
        }
    }
}

fn path_bytes(p: &Path) -> Vec<u8> {
    p.to_str().unwrap().as_bytes().to_vec()
}

fn new_disk_cache(
    budget: usize,
    disk: &gpusvc_program_cache_disk_config,
    driver: &gpusvc_driver_identity,
) -> *mut gpusvc_program_cache {
    let mut cache = ptr::null_mut();
    // SAFETY: live locals; the config's pointers are live for the call.
    let r = unsafe {
        gpusvc_program_cache_open(
            &cache_config(budget),
            None,
            ptr::null_mut(),
            disk,
            driver,
            &mut cache,
        )
    };
    assert_eq!(r, OK, "{}", last_detail());
    assert!(!cache.is_null());
    cache
}

/// A cache on `dir` for driver `version`, waited until loaded.
fn open(
    dir: &Path,
    version: &str,
    budget: usize,
) -> (
    *mut gpusvc_program_cache,
    gpusvc_program_cache_disk_load_report,
) {
    let bytes = path_bytes(dir);
    let driver = Driver::new(version);
    let cache = new_disk_cache(budget, &disk_config(&bytes, None), &driver.identity());
    let report = wait(cache).expect("loads");
    // The writer collects stale stores before it serves its first job.
    flush(cache);
    (cache, report)
}

fn wait(
    cache: *mut gpusvc_program_cache,
) -> Result<gpusvc_program_cache_disk_load_report, gpusvc_result> {
    let mut report = gpusvc_program_cache_disk_load_report::default();
    // SAFETY: live handle and out slot.
    let r = unsafe { gpusvc_program_cache_wait_until_loaded(cache, WAIT_MS, &mut report) };
    if r == OK { Ok(report) } else { Err(r) }
}

fn free(cache: *mut gpusvc_program_cache) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_free(cache) }, OK);
}

fn flush(cache: *mut gpusvc_program_cache) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_flush_disk(cache) }, OK);
}

fn disk_stats(cache: *mut gpusvc_program_cache) -> gpusvc_program_cache_disk_stats_snapshot {
    let mut s = gpusvc_program_cache_disk_stats_snapshot::default();
    // SAFETY: live handle and out slot.
    let r = unsafe { gpusvc_program_cache_disk_stats(cache, &mut s) };
    assert_eq!(r, OK);
    s
}

fn entries(cache: *mut gpusvc_program_cache) -> usize {
    let mut s = gpusvc_program_cache_stats_snapshot::default();
    // SAFETY: live handle and out slot.
    assert_eq!(unsafe { gpusvc_program_cache_stats(cache, &mut s) }, OK);
    s.entries
}

fn condition(cache: *mut gpusvc_program_cache) -> String {
    let mut n = 0;
    // SAFETY: size query with a live out slot.
    let r = unsafe { gpusvc_program_cache_disk_condition(cache, ptr::null_mut(), 0, &mut n) };
    assert_eq!(r, OK);
    let mut buf = vec![0 as c_char; n + 1];
    // SAFETY: a buffer of n + 1 bytes.
    let r = unsafe { gpusvc_program_cache_disk_condition(cache, buf.as_mut_ptr(), n + 1, &mut n) };
    assert_eq!(r, OK);
    // SAFETY: NUL-terminated on success.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn key(n: u8) -> gpusvc_program_cache_sha1 {
    gpusvc_program_cache_sha1 { bytes: [n; 20] }
}

fn binary(n: u8) -> Vec<u8> {
    (0..300u32).map(|i| (i as u8).wrapping_mul(n)).collect()
}

fn save(cache: *mut gpusvc_program_cache, n: u8) {
    let bytes = binary(n);
    let none = gpusvc_program_cache_shader_variables {
        attributes: ptr::null(),
        attribute_count: 0,
        uniforms: ptr::null(),
        uniform_count: 0,
    };
    let desc = gpusvc_program_cache_entry_desc {
        struct_size: size_of::<gpusvc_program_cache_entry_desc>(),
        vertex_shader: gpusvc_program_cache_sha1 { bytes: [n; 20] },
        fragment_shader: gpusvc_program_cache_sha1 {
            bytes: [n.wrapping_add(50); 20],
        },
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
    // SAFETY: live locals.
    let r = unsafe { gpusvc_program_cache_save(cache, &key(n), &desc, &mut report) };
    assert_eq!(r, OK, "{}", last_detail());
}

/// The binary of the cached program `n`, if the cache has it (peek: no counters).
fn cached_binary(cache: *mut gpusvc_program_cache, n: u8) -> Option<Vec<u8>> {
    let mut p = ptr::null_mut();
    // SAFETY: live handle and out slot.
    let r = unsafe { gpusvc_program_cache_peek(cache, &key(n), &mut p) };
    if r != OK {
        return None;
    }
    let (mut format, mut len) = (0, 0);
    // SAFETY: size query, then a buffer of that size; the handle is freed once.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_entry_binary(p, &mut format, ptr::null_mut(), 0, &mut len),
            OK
        );
        let mut buf = vec![0u8; len];
        assert_eq!(
            gpusvc_program_cache_entry_binary(p, &mut format, buf.as_mut_ptr(), len, &mut len),
            OK
        );
        assert_eq!(gpusvc_program_cache_entry_free(p), OK);
        assert_eq!(format, 0xB1);
        Some(buf)
    }
}

/// The stamp folders under `root` (those with a STAMP file).
fn stores(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("STAMP").exists())
        .collect();
    v.sort();
    v
}

fn entry_files(root: &Path) -> usize {
    stores(root)
        .iter()
        .map(|s| std::fs::read_dir(s.join("entries")).map_or(0, |d| d.count()))
        .sum()
}

#[test]
fn a_new_cache_on_the_same_folder_loads_what_the_first_saved() {
    let dir = tempfile::tempdir().unwrap();
    let (a, report) = open(dir.path(), "1.0", 1 << 20);
    assert_eq!(
        report,
        gpusvc_program_cache_disk_load_report {
            struct_size: size_of::<gpusvc_program_cache_disk_load_report>(),
            elapsed_us: report.elapsed_us,
            ..Default::default()
        }
    );
    for n in 1..=3 {
        save(a, n);
    }
    flush(a);
    let s = disk_stats(a);
    assert!(s.configured && s.enabled && s.load_finished);
    assert_eq!(s.writes, 3);
    assert!(s.bytes_written > 0);
    assert_eq!(entry_files(dir.path()), 3);
    free(a);

    let (b, report) = open(dir.path(), "1.0", 1 << 20);
    assert_eq!((report.loaded, report.rejected, report.skipped), (3, 0, 0));
    assert_eq!(entries(b), 3);
    for n in 1..=3 {
        assert_eq!(cached_binary(b, n), Some(binary(n)), "program {n}");
    }
    let s = disk_stats(b);
    assert_eq!((s.loaded, s.writes), (3, 0));
    // Saving what is on disk already writes nothing.
    save(b, 2);
    flush(b);
    let s = disk_stats(b);
    assert_eq!((s.writes, s.already_present), (0, 1));
    assert_eq!(condition(b), "");
    free(b);
}

#[test]
fn a_stamp_change_wipes_the_old_store() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = open(dir.path(), "1.0", 1 << 20);
    save(a, 1);
    flush(a);
    free(a);
    assert_eq!(stores(dir.path()).len(), 1);

    let (b, report) = open(dir.path(), "2.0 (driver update)", 1 << 20);
    assert_eq!(report.loaded, 0);
    assert_eq!(entries(b), 0);
    assert_eq!(cached_binary(b, 1), None);
    let left = stores(dir.path());
    assert_eq!(left.len(), 1, "the old stamp's store is gone: {left:?}");
    let stamp = std::fs::read_to_string(left[0].join("STAMP")).unwrap();
    assert!(stamp.contains("2.0 (driver update)"), "{stamp}");
    assert_eq!(entry_files(dir.path()), 0);
    free(b);

    // Another device (a PCI vendor id now given) is another store: it starts empty and the
    // recently used store of the first device stays beside it.
    let bytes = path_bytes(dir.path());
    let driver = Driver::new("2.0 (driver update)");
    let mut disk = disk_config(&bytes, None);
    disk.has_vendor_id = true;
    disk.vendor_id = 0x10de;
    let c = new_disk_cache(1 << 20, &disk, &driver.identity());
    wait(c).unwrap();
    let left = stores(dir.path());
    assert_eq!(left.len(), 2);
    assert!(left.iter().any(|d| {
        std::fs::read_to_string(d.join("STAMP"))
            .unwrap()
            .contains("4318")
    }));
    free(c);
}

#[test]
fn clear_deletes_the_entries_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = open(dir.path(), "1.0", 1 << 20);
    save(a, 1);
    save(a, 2);
    flush(a);
    assert_eq!(entry_files(dir.path()), 2);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_clear(a) }, OK);
    flush(a);
    assert_eq!(entry_files(dir.path()), 0);
    assert_eq!(entries(a), 0);
    assert_eq!(disk_stats(a).store_drops, 1);
    // A clear is no condition: nothing to report.
    assert_eq!(condition(a), "");
    free(a);
    let (b, report) = open(dir.path(), "1.0", 1 << 20);
    assert_eq!(report.loaded, 0);
    free(b);
}

#[test]
fn hot_programs_load_first_when_the_budget_is_short() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = open(dir.path(), "1.0", 1 << 20);
    for n in 1..=3 {
        save(a, n);
    }
    let hot = [key(1)];
    // SAFETY: one live key.
    let r = unsafe { gpusvc_program_cache_mark_hot(a, hot.as_ptr(), 1) };
    assert_eq!(r, OK);
    // SAFETY: count 0 with NULL is allowed.
    let r = unsafe { gpusvc_program_cache_mark_hot(a, ptr::null(), 0) };
    assert_eq!(r, OK);
    flush(a);
    let one_entry = {
        let mut s = gpusvc_program_cache_stats_snapshot::default();
        // SAFETY: live handle and out slot.
        assert_eq!(unsafe { gpusvc_program_cache_stats(a, &mut s) }, OK);
        s.size_bytes / 3
    };
    free(a);
    // Memory for one program (the store's own budget stays large, so it evicts nothing): the
    // hot one is loaded, the others stay on disk.
    let bytes = path_bytes(dir.path());
    let driver = Driver::new("1.0");
    let disk = gpusvc_program_cache_disk_config {
        struct_size: size_of::<gpusvc_program_cache_disk_config>(),
        budget_bytes: 1 << 20,
        ..disk_config(&bytes, None)
    };
    let b = new_disk_cache(one_entry + one_entry / 2, &disk, &driver.identity());
    let report = wait(b).unwrap();
    assert_eq!((report.loaded, report.skipped), (1, 2));
    assert!(cached_binary(b, 1).is_some());
    free(b);
}

#[test]
fn an_unusable_folder_means_memory_only_and_one_report() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-folder");
    std::fs::write(&file, b"x").unwrap();
    let sink = LogSink::default();
    let bytes = path_bytes(&file);
    let driver = Driver::new("1.0");
    let cache = new_disk_cache(
        1 << 20,
        &disk_config(&bytes, Some(&sink)),
        &driver.identity(),
    );
    let report = wait(cache).expect("returns at once");
    assert_eq!(report.loaded, 0);
    let s = disk_stats(cache);
    assert!(s.configured && !s.enabled && s.load_finished);
    let text = condition(cache);
    assert!(text.contains(file.to_str().unwrap()), "{text}");
    assert!(text.contains("memory only"), "{text}");
    // The cache works in memory.
    for n in 1..=3 {
        save(cache, n);
    }
    flush(cache);
    assert_eq!(cached_binary(cache, 2), Some(binary(2)));
    assert_eq!(disk_stats(cache).writes, 0);
    // Reported once, with the same text.
    assert_eq!(sink.calls.load(Ordering::SeqCst), 1);
    assert_eq!(*sink.lines.lock().unwrap(), vec![text.clone()]);
    // A buffer without room for the NUL is refused and nothing is written.
    let mut small = vec![7 as c_char; text.len()];
    let mut n = 0;
    // SAFETY: a buffer of text.len() bytes.
    let r = unsafe {
        gpusvc_program_cache_disk_condition(cache, small.as_mut_ptr(), small.len(), &mut n)
    };
    assert_eq!(r, gpusvc_result::GPUSVC_INSUFFICIENT_SIZE);
    assert!(small.iter().all(|&c| c == 7) && n == 0);
    free(cache);
    assert_eq!(sink.calls.load(Ordering::SeqCst), 1);
}

#[test]
fn disabled_means_no_disk_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("would-be-made");
    let bytes = path_bytes(&root);
    let mut disk = disk_config(&bytes, None);
    disk.enabled = false;
    let mut cache = ptr::null_mut();
    // SAFETY: live locals; a NULL driver is allowed when the disk store is disabled.
    let r = unsafe {
        gpusvc_program_cache_open(
            &cache_config(1 << 20),
            None,
            ptr::null_mut(),
            &disk,
            ptr::null(),
            &mut cache,
        )
    };
    assert_eq!(r, OK, "{}", last_detail());
    save(cache, 1);
    flush(cache);
    assert_eq!(
        disk_stats(cache),
        gpusvc_program_cache_disk_stats_snapshot::default()
    );
    assert_eq!(
        wait(cache).unwrap(),
        gpusvc_program_cache_disk_load_report::default()
    );
    assert!(!root.exists());
    free(cache);
}

#[test]
fn a_plain_cache_answers_the_disk_calls_as_a_memory_cache() {
    let mut cache = ptr::null_mut();
    // SAFETY: live locals.
    let r = unsafe {
        gpusvc_program_cache_new(&cache_config(1 << 20), None, ptr::null_mut(), &mut cache)
    };
    assert_eq!(r, OK);
    assert_eq!(
        wait(cache).unwrap(),
        gpusvc_program_cache_disk_load_report::default()
    );
    flush(cache);
    let hot = [key(1)];
    // SAFETY: one live key.
    let r = unsafe { gpusvc_program_cache_mark_hot(cache, hot.as_ptr(), 1) };
    assert_eq!(r, OK);
    assert!(!disk_stats(cache).configured);
    assert_eq!(condition(cache), "");
    free(cache);
}

#[test]
fn the_default_folder_is_reported_as_bytes() {
    let mut n = 0;
    // SAFETY: size query with a live out slot.
    let r = unsafe { gpusvc_program_cache_disk_config_default_dir(ptr::null_mut(), 0, &mut n) };
    assert_eq!(r, OK);
    let mut buf = vec![0 as c_char; n + 1];
    // SAFETY: a buffer of n + 1 bytes.
    let r =
        unsafe { gpusvc_program_cache_disk_config_default_dir(buf.as_mut_ptr(), n + 1, &mut n) };
    assert_eq!(r, OK);
    // SAFETY: NUL-terminated on success.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
    assert!(text.ends_with("gpusvc"), "{text}");
    assert_eq!(text.len(), n);
}

#[test]
fn bad_arguments_are_codes_and_write_nothing() {
    use gpusvc_result::*;
    let dir = tempfile::tempdir().unwrap();
    let bytes = path_bytes(dir.path());
    let driver = Driver::new("1.0");
    let identity = driver.identity();
    let good = disk_config(&bytes, None);
    let config = cache_config(1 << 20);
    let attempt = |config: *const gpusvc_program_cache_config,
                   disk: *const gpusvc_program_cache_disk_config,
                   driver: *const gpusvc_driver_identity| {
        let mut out = ptr::null_mut();
        // SAFETY: every pointer is NULL or live.
        let r = unsafe {
            gpusvc_program_cache_open(config, None, ptr::null_mut(), disk, driver, &mut out)
        };
        assert!(out.is_null(), "nothing written on failure");
        r
    };
    assert_eq!(attempt(ptr::null(), &good, &identity), GPUSVC_NULL_ARGUMENT);
    assert_eq!(
        attempt(&config, ptr::null(), &identity),
        GPUSVC_NULL_ARGUMENT
    );
    assert_eq!(attempt(&config, &good, ptr::null()), GPUSVC_NULL_ARGUMENT);
    let bad_config = gpusvc_program_cache_config {
        struct_size: size_of::<gpusvc_program_cache_config>(),
        policy: 77,
        ..config
    };
    assert_eq!(
        attempt(&bad_config, &good, &identity),
        GPUSVC_INVALID_ARGUMENT
    );
    let empty = gpusvc_program_cache_disk_config { dir_len: 0, ..good };
    assert_eq!(attempt(&config, &empty, &identity), GPUSVC_INVALID_ARGUMENT);
    let null_dir = gpusvc_program_cache_disk_config {
        struct_size: size_of::<gpusvc_program_cache_disk_config>(),
        dir: ptr::null(),
        ..good
    };
    assert_eq!(attempt(&config, &null_dir, &identity), GPUSVC_NULL_ARGUMENT);
    let zero = gpusvc_program_cache_disk_config {
        struct_size: size_of::<gpusvc_program_cache_disk_config>(),
        max_consecutive_rejections: 0,
        ..good
    };
    assert_eq!(attempt(&config, &zero, &identity), GPUSVC_INVALID_ARGUMENT);
    let no_host = gpusvc_program_cache_disk_config {
        struct_size: size_of::<gpusvc_program_cache_disk_config>(),
        host_product: ptr::null(),
        ..good
    };
    assert_eq!(attempt(&config, &no_host, &identity), GPUSVC_NULL_ARGUMENT);
    let not_utf8 = [0xffu8, 0xfe, 0];
    let bad_build = gpusvc_program_cache_disk_config {
        struct_size: size_of::<gpusvc_program_cache_disk_config>(),
        driver_build_id: not_utf8.as_ptr().cast(),
        ..good
    };
    assert_eq!(attempt(&config, &bad_build, &identity), GPUSVC_INVALID_UTF8);
    let no_vendor = gpusvc_driver_identity {
        struct_size: size_of::<gpusvc_driver_identity>(),
        gl_vendor: ptr::null(),
        ..identity
    };
    assert_eq!(attempt(&config, &good, &no_vendor), GPUSVC_NULL_ARGUMENT);
    assert!(last_detail().contains("gl_vendor"), "{}", last_detail());
    // SAFETY: NULL out slots, which the library must refuse.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_disk_config_defaults(ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_open(
                &config,
                None,
                ptr::null_mut(),
                &good,
                &identity,
                ptr::null_mut()
            ),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_disk_config_default_dir(ptr::null_mut(), 0, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
    }
    // Nothing was made by the failed calls.
    assert!(stores(dir.path()).is_empty());

    let cache = new_disk_cache(1 << 20, &good, &identity);
    let mut report = gpusvc_program_cache_disk_load_report {
        struct_size: size_of::<gpusvc_program_cache_disk_load_report>(),
        loaded: 99,
        ..Default::default()
    };
    let mut stats = gpusvc_program_cache_disk_stats_snapshot::default();
    let mut n = 0;
    // SAFETY: NULL and freed handles and NULL out slots, which the library must refuse.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_wait_until_loaded(cache, WAIT_MS, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_wait_until_loaded(ptr::null(), WAIT_MS, &mut report),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(report.loaded, 99);
        assert_eq!(
            gpusvc_program_cache_flush_disk(ptr::null()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_mark_hot(cache, ptr::null(), 2),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_mark_hot(cache, ptr::null(), usize::MAX),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_disk_stats(cache, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_disk_condition(cache, ptr::null_mut(), 0, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_disk_condition(cache, ptr::null_mut(), 5, &mut n),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_gl_context_driver_identity(ptr::null(), ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
    }
    free(cache);
    // SAFETY: a freed handle, which the library must refuse.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_wait_until_loaded(cache, WAIT_MS, &mut report),
            GPUSVC_INVALID_HANDLE
        );
        assert_eq!(
            gpusvc_program_cache_flush_disk(cache),
            GPUSVC_INVALID_HANDLE
        );
        assert_eq!(
            gpusvc_program_cache_disk_stats(cache, &mut stats),
            GPUSVC_INVALID_HANDLE
        );
        assert_eq!(gpusvc_program_cache_free(cache), GPUSVC_INVALID_HANDLE);
    }
    assert_eq!(report.loaded, 99, "nothing written on failure");
}

#[test]
fn the_timeout_code_has_its_own_number_and_message() {
    assert_eq!(gpusvc_result::GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT as u32, 207);
    assert!(
        gpusvc_result::GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT
            .message()
            .contains("did not finish")
    );
}

// ---- the real driver ----

const VS: &str = "in vec2 a_position;\nuniform float u_scale;\n\
void main() { gl_Position = vec4(a_position * u_scale, 0.0, 1.0); }\n";
const FS: &str = "uniform vec4 u_tint;\nout vec4 o_color;\nvoid main() { o_color = u_tint; }\n";

/// Links VS + FS through a new manager over `ctx` and `cache`; returns the link origin.
fn link_once(ctx: *mut gpusvc_gl_context, cache: *mut gpusvc_program_cache) -> u32 {
    let (vs_src, fs_src) = (glsl(ctx, VS), glsl(ctx, FS));
    // SAFETY: live handles and out slots; every handle made here is freed here.
    unsafe {
        let mut m = ptr::null_mut();
        assert_eq!(
            gpusvc_program_manager_new_gl(ctx, cache, c"disk abi".as_ptr(), &mut m),
            OK,
            "{}",
            last_detail()
        );
        let mut shaders = [ptr::null_mut(); 2];
        for (slot, (stage, src)) in shaders.iter_mut().zip([
            (GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, &vs_src),
            (GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, &fs_src),
        ]) {
            assert_eq!(
                gpusvc_program_manager_shader_new(m, stage, src.as_ptr().cast(), src.len(), slot),
                OK
            );
            let mut outcome = 0;
            assert_eq!(gpusvc_program_manager_compile(m, *slot, &mut outcome), OK);
        }
        let mut p = ptr::null_mut();
        assert_eq!(
            gpusvc_program_manager_link(m, shaders[0], shaders[1], ptr::null(), &mut p),
            OK,
            "{}",
            last_detail()
        );
        let mut origin = 99;
        assert_eq!(
            gpusvc_program_manager_linked_program_origin(p, &mut origin),
            OK
        );
        assert_eq!(gpusvc_program_manager_linked_program_free(p), OK);
        for s in shaders {
            assert_eq!(gpusvc_program_manager_shader_free(s), OK);
        }
        assert_eq!(gpusvc_program_manager_free(m), OK);
        origin
    }
}

#[test]
fn the_stamp_from_a_live_context_and_a_real_binary_round_trip() {
    let Some(ctx) = open_gl_context(
        "the_stamp_from_a_live_context_and_a_real_binary_round_trip",
        0,
    ) else {
        return;
    };
    let mut identity = gpusvc_driver_identity {
        struct_size: size_of::<gpusvc_driver_identity>(),
        gl_vendor: ptr::null(),
        gl_renderer: ptr::null(),
        gl_version: ptr::null(),
        context: ptr::null(),
    };
    // SAFETY: live context and out slot.
    let r = unsafe { gpusvc_gl_context_driver_identity(ctx, &mut identity) };
    assert_eq!(r, OK);
    let mut version = ptr::null();
    // SAFETY: live context and out slot; both strings are owned by the context.
    unsafe {
        assert_eq!(gpusvc_gl_context_version(ctx, &mut version), OK);
        assert_eq!(CStr::from_ptr(identity.gl_version), CStr::from_ptr(version));
    }
    let dir = tempfile::tempdir().unwrap();
    let bytes = path_bytes(dir.path());
    let disk = disk_config(&bytes, None);

    let a = new_disk_cache(1 << 22, &disk, &identity);
    wait(a).unwrap();
    assert_eq!(link_once(ctx, a), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    flush(a);
    assert_eq!(disk_stats(a).writes, 1);
    free(a);
    let stamp = std::fs::read_to_string(stores(dir.path())[0].join("STAMP")).unwrap();
    // SAFETY: strings owned by the live context.
    let renderer = unsafe { CStr::from_ptr(identity.gl_renderer) }
        .to_str()
        .unwrap();
    assert!(stamp.contains(renderer), "{stamp}");

    // A fresh cache (as in a new process) finds the driver's binary on disk and the driver
    // accepts it.
    let b = new_disk_cache(1 << 22, &disk, &identity);
    assert_eq!(wait(b).unwrap().loaded, 1);
    assert_eq!(
        link_once(ctx, b),
        GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT
    );
    let mut s = gpusvc_program_cache_stats_snapshot::default();
    // SAFETY: live handle and out slot.
    assert_eq!(unsafe { gpusvc_program_cache_stats(b, &mut s) }, OK);
    assert_eq!((s.counters.hits, s.counters.driver_rejections), (1, 0));
    free(b);
    // SAFETY: a live context on its thread.
    unsafe { gpusvc_gl_context_free(ctx) };
}

/// A cache on `dir` for a host product and version, waited until loaded and collected.
fn open_host(dir: &Path, product: &CStr, version: &CStr) -> *mut gpusvc_program_cache {
    let bytes = path_bytes(dir);
    let driver = Driver::new("1.0");
    let mut disk = disk_config(&bytes, None);
    disk.host_product = product.as_ptr();
    disk.host_version = version.as_ptr();
    let cache = new_disk_cache(1 << 20, &disk, &driver.identity());
    wait(cache).unwrap();
    flush(cache);
    cache
}

#[test]
fn two_host_products_keep_each_others_stores_and_versions_supersede() {
    let dir = tempfile::tempdir().unwrap();
    for (product, version) in [
        (c"browser-stable", c"120"),
        (c"browser-beta", c"121"),
        (c"browser-stable", c"120"),
    ] {
        let c = open_host(dir.path(), product, version);
        save(c, 1);
        flush(c);
        assert_eq!(disk_stats(c).stores_removed, 0);
        free(c);
    }
    assert_eq!(stores(dir.path()).len(), 2, "one store per product");
    // A newer stable: the old stable store goes, beta's stays.
    let c = open_host(dir.path(), c"browser-stable", c"121");
    assert_eq!(disk_stats(c).stores_removed, 1);
    free(c);
    let left = stores(dir.path());
    assert_eq!(left.len(), 2);
    assert!(left.iter().any(|d| {
        std::fs::read_to_string(d.join("STAMP"))
            .unwrap()
            .contains("host_product: browser-beta")
    }));
}

#[test]
fn disk_stats_count_what_the_store_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _) = open(dir.path(), "1.0", 1 << 20);
    save(c, 1);
    flush(c);
    free(c);
    let store = stores(dir.path()).pop().unwrap();
    // A folder and a 3 GiB sparse file where entries belong.
    std::fs::create_dir(store.join("entries").join("ab".repeat(20))).unwrap();
    std::fs::File::create(store.join("entries").join("cd".repeat(20)))
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let (c, report) = open(dir.path(), "1.0", 1 << 20);
    assert_eq!(report.loaded, 1);
    let s = disk_stats(c);
    assert_eq!(s.odd_removed, 2, "{s:?}");
    assert_eq!((s.lock_busy, s.recreated, s.oversized), (0, 0, 0), "{s:?}");
    free(c);
    assert_eq!(entry_files(dir.path()), 1);
}

#[test]
fn failed_appends_to_a_side_file_are_counted_and_an_older_host_sees_no_new_field() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _) = open(dir.path(), "1.0", 1 << 20);
    save(c, 1);
    flush(c);
    let store = stores(dir.path()).pop().unwrap();
    let _ = std::fs::remove_file(store.join("hot.list"));
    std::fs::create_dir(store.join("hot.list")).unwrap();
    let hot = [key(1)];
    // SAFETY: a live handle and one live key.
    let r = unsafe { gpusvc_program_cache_mark_hot(c, hot.as_ptr(), 1) };
    assert_eq!(r, OK);
    flush(c);
    let s = disk_stats(c);
    assert_eq!((s.record_errors, s.write_errors), (1, 0), "{s:?}");
    // A host built before `record_errors` passes the size it knew: the field is not written.
    let old = std::mem::offset_of!(gpusvc_program_cache_disk_stats_snapshot, record_errors);
    let mut s = gpusvc_program_cache_disk_stats_snapshot {
        struct_size: old,
        record_errors: 77,
        ..Default::default()
    };
    // SAFETY: live handle and out slot (larger than the size it declares).
    assert_eq!(unsafe { gpusvc_program_cache_disk_stats(c, &mut s) }, OK);
    assert_eq!((s.struct_size, s.record_errors, s.writes), (old, 77, 1));
    free(c);
    assert!(store.join("hot.list").is_dir());
}

#[test]
fn with_no_home_there_is_no_default_folder() {
    let text = test_support::cli::run_ignored_test(
        "default_dir_child",
        &[("HOME", None), ("XDG_CACHE_HOME", None)],
    );
    assert!(text.contains("default_dir_result=208"), "{text}");
    assert_eq!(
        gpusvc_result::GPUSVC_PROGRAM_CACHE_NO_DEFAULT_DIR as u32,
        208
    );
}

#[test]
#[ignore = "run by with_no_home_there_is_no_default_folder in a child process"]
fn default_dir_child() {
    let mut n = 77;
    // SAFETY: size query with a live out slot.
    let r = unsafe { gpusvc_program_cache_disk_config_default_dir(ptr::null_mut(), 0, &mut n) };
    assert_eq!(n, 77, "nothing written on failure");
    println!("default_dir_result={}", r as u32);
}
