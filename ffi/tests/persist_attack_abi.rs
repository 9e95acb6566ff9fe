//! Hostile probes of the persistence split's C ABI (a review): a sink that frees its own cache
//! or inserts back into it, lengths past PTRDIFF_MAX and NULL outputs (nothing done, nothing
//! counted), double frees, `struct_size` lies (a nonzero tail is the kit's
//! `GPUSVC_UNSUPPORTED_STRUCT_SIZE`), stamp texts with odd or huge fields, and what
//! the counters count when a callback is NULL.

#![allow(dead_code)]

mod common;

use std::ffi::{CStr, c_char, c_void};
use std::path::Path;
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use gpusvc::gpusvc_result::*;
use gpusvc::*;

// The helpers below are those of persist_abi.rs (kept identical).

// ---- the sink ----

/// What a persistence sink received (its callbacks run on the cache's persistence thread).
#[derive(Default)]
struct Received {
    calls: AtomicUsize,
    saved: Mutex<Vec<(gpusvc_program_cache_sha1, Vec<u8>)>>,
    used: Mutex<Vec<gpusvc_program_cache_sha1>>,
    rejected: Mutex<Vec<gpusvc_program_cache_sha1>>,
    store_rejected: AtomicUsize,
    /// A cache the `entry_saved` callback calls back into (0: none), and what those calls
    /// returned.
    reenter: AtomicUsize,
    reentered: Mutex<Vec<gpusvc_result>>,
}

/// # Safety
/// `user_data` is a live `Received`.
unsafe fn received<'a>(user_data: *mut c_void) -> &'a Received {
    // SAFETY: the tests pass a `Received` that outlives the cache (contract).
    unsafe { &*user_data.cast::<Received>() }
}

unsafe extern "C" fn on_saved(
    user_data: *mut c_void,
    key: *const gpusvc_program_cache_sha1,
    entry: *const u8,
    len: usize,
) {
    // SAFETY: the sink's contract: a live `Received`, a key and `len` bytes valid for the call.
    let (r, key, bytes) = unsafe {
        (
            received(user_data),
            *key,
            std::slice::from_raw_parts(entry, len).to_vec(),
        )
    };
    r.calls.fetch_add(1, Ordering::SeqCst);
    r.saved.lock().unwrap().push((key, bytes));
    let cache = r.reenter.load(Ordering::SeqCst);
    if cache != 0 {
        let cache = cache as *const gpusvc_program_cache;
        let mut stats = gpusvc_program_cache_persist_stats_snapshot::default();
        // SAFETY: the cache this sink belongs to, alive while its sink runs.
        let (flush, stats) = unsafe {
            (
                gpusvc_program_cache_flush_persist(cache),
                gpusvc_program_cache_persist_stats(cache, &mut stats),
            )
        };
        r.reentered.lock().unwrap().extend([flush, stats]);
    }
}

unsafe extern "C" fn on_used(user_data: *mut c_void, key: *const gpusvc_program_cache_sha1) {
    // SAFETY: as in `on_saved`.
    let (r, key) = unsafe { (received(user_data), *key) };
    r.calls.fetch_add(1, Ordering::SeqCst);
    r.used.lock().unwrap().push(key);
}

unsafe extern "C" fn on_rejected(user_data: *mut c_void, key: *const gpusvc_program_cache_sha1) {
    // SAFETY: as in `on_saved`.
    let (r, key) = unsafe { (received(user_data), *key) };
    r.calls.fetch_add(1, Ordering::SeqCst);
    r.rejected.lock().unwrap().push(key);
}

unsafe extern "C" fn on_store_rejected(user_data: *mut c_void) {
    // SAFETY: as in `on_saved`.
    let r = unsafe { received(user_data) };
    r.calls.fetch_add(1, Ordering::SeqCst);
    r.store_rejected.fetch_add(1, Ordering::SeqCst);
}

fn sink(r: &Received, stamp: &[u8]) -> gpusvc_program_cache_persist_sink {
    let mut s = std::mem::MaybeUninit::<gpusvc_program_cache_persist_sink>::zeroed();
    // SAFETY: a zeroed slot whose struct_size is set before the call.
    let mut s = unsafe {
        (*s.as_mut_ptr()).struct_size = size_of::<gpusvc_program_cache_persist_sink>();
        assert_eq!(
            gpusvc_program_cache_persist_sink_defaults(s.as_mut_ptr()),
            OK
        );
        s.assume_init()
    };
    assert!(s.compress);
    assert_eq!(s.max_consecutive_rejections, 3);
    s.user_data = ptr::from_ref(r).cast_mut().cast();
    s.entry_saved = Some(on_saved);
    s.entry_used = Some(on_used);
    s.entry_rejected = Some(on_rejected);
    s.store_rejected = Some(on_store_rejected);
    s.stamp = stamp.as_ptr().cast();
    s.stamp_len = stamp.len();
    s
}

fn new_cache(
    budget: usize,
    sink: Option<&gpusvc_program_cache_persist_sink>,
) -> Result<*mut gpusvc_program_cache, gpusvc_result> {
    let mut c = cache_config(budget);
    c.persist_sink = sink.map_or(ptr::null(), ptr::from_ref);
    let mut cache = ptr::null_mut();
    // SAFETY: live config, sink and out slot.
    let r = unsafe { gpusvc_program_cache_new(&c, None, ptr::null_mut(), &mut cache) };
    if r == OK {
        Ok(cache)
    } else {
        assert!(cache.is_null(), "output written on failure");
        Err(r)
    }
}

fn free_cache(cache: *mut gpusvc_program_cache) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_free(cache) }, OK);
}

fn flush_persist(cache: *mut gpusvc_program_cache) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_flush_persist(cache) }, OK);
}

fn persist_stats(cache: *mut gpusvc_program_cache) -> gpusvc_program_cache_persist_stats_snapshot {
    let mut s = gpusvc_program_cache_persist_stats_snapshot::default();
    // SAFETY: live handle and out slot.
    let r = unsafe { gpusvc_program_cache_persist_stats(cache, &mut s) };
    assert_eq!(r, OK);
    s
}

fn insert(
    cache: *mut gpusvc_program_cache,
    entry: &[u8],
) -> Result<gpusvc_program_cache_sha1, gpusvc_result> {
    let mut key = gpusvc_program_cache_sha1 { bytes: [0xEE; 20] };
    // SAFETY: live handle, buffer and out slot.
    let r =
        unsafe { gpusvc_program_cache_insert_entry(cache, entry.as_ptr(), entry.len(), &mut key) };
    if r == OK {
        Ok(key)
    } else {
        assert_eq!(key.bytes, [0xEE; 20], "out_key written on failure");
        Err(r)
    }
}

// ---- the stamp ----

fn desc(product: &CStr, version: &CStr) -> gpusvc_program_cache_stamp_desc {
    gpusvc_program_cache_stamp_desc {
        struct_size: size_of::<gpusvc_program_cache_stamp_desc>(),
        host_product: product.as_ptr(),
        host_version: version.as_ptr(),
        driver_build_id: ptr::null(),
        has_vendor_id: false,
        has_device_id: false,
        vendor_id: 0,
        device_id: 0,
        reserved: 0,
    }
}

fn fake_driver() -> gpusvc_driver_identity {
    gpusvc_driver_identity {
        struct_size: size_of::<gpusvc_driver_identity>(),
        gl_vendor: c"Test vendor".as_ptr(),
        gl_renderer: c"test renderer".as_ptr(),
        gl_version: c"1.0".as_ptr(),
        context: ptr::null(),
    }
}

fn stamp_text(driver: &gpusvc_driver_identity, desc: &gpusvc_program_cache_stamp_desc) -> Vec<u8> {
    let mut n = 0;
    // SAFETY: size query with live structs and out slot.
    let r = unsafe { gpusvc_program_cache_stamp_text(driver, desc, ptr::null_mut(), 0, &mut n) };
    assert_eq!(r, OK, "{}", last_detail());
    let mut buf = vec![0 as c_char; n + 1];
    // SAFETY: a buffer of n + 1 bytes.
    let r =
        unsafe { gpusvc_program_cache_stamp_text(driver, desc, buf.as_mut_ptr(), n + 1, &mut n) };
    assert_eq!(r, OK);
    assert_eq!(buf[n], 0, "NUL-terminated");
    buf[..n].iter().map(|&c| c as u8).collect()
}

fn test_stamp(version: &CStr) -> Vec<u8> {
    stamp_text(&fake_driver(), &desc(c"persist abi tests", version))
}

// ---- the store ----

fn store_config(dir: &[u8], stamp: &[u8]) -> gpusvc_program_cache_store_config {
    let mut c = std::mem::MaybeUninit::<gpusvc_program_cache_store_config>::zeroed();
    // SAFETY: a zeroed slot whose struct_size is set before the call.
    let mut c = unsafe {
        (*c.as_mut_ptr()).struct_size = size_of::<gpusvc_program_cache_store_config>();
        assert_eq!(
            gpusvc_program_cache_store_config_defaults(c.as_mut_ptr()),
            OK
        );
        c.assume_init()
    };
    assert_eq!(c.budget_bytes, 64 << 20);
    c.dir = dir.as_ptr().cast();
    c.dir_len = dir.len();
    c.stamp = stamp.as_ptr().cast();
    c.stamp_len = stamp.len();
    c
}

fn try_open_store(
    c: &gpusvc_program_cache_store_config,
) -> Result<*mut gpusvc_program_cache_store, gpusvc_result> {
    let mut s = ptr::null_mut();
    // SAFETY: a live config (its pointers live) and out slot.
    let r = unsafe { gpusvc_program_cache_store_open(c, &mut s) };
    if r == OK {
        Ok(s)
    } else {
        assert!(s.is_null(), "output written on failure");
        Err(r)
    }
}

fn path_bytes(p: &Path) -> Vec<u8> {
    p.to_str().unwrap().as_bytes().to_vec()
}

fn open_store(dir: &Path, stamp: &[u8]) -> *mut gpusvc_program_cache_store {
    let bytes = path_bytes(dir);
    try_open_store(&store_config(&bytes, stamp))
        .unwrap_or_else(|r| panic!("{r:?}: {}", last_detail()))
}

fn free_store(s: *mut gpusvc_program_cache_store) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_store_free(s) }, OK);
}

fn put(
    s: *mut gpusvc_program_cache_store,
    entry: &[u8],
) -> Result<(gpusvc_program_cache_sha1, bool), gpusvc_result> {
    let mut key = gpusvc_program_cache_sha1 { bytes: [0xEE; 20] };
    let mut written = false;
    // SAFETY: live handle, buffer and out slots.
    let r = unsafe {
        gpusvc_program_cache_store_put(s, entry.as_ptr(), entry.len(), &mut key, &mut written)
    };
    if r == OK {
        Ok((key, written))
    } else {
        assert_eq!(key.bytes, [0xEE; 20], "out_key written on failure");
        Err(r)
    }
}

fn store_stats(s: *mut gpusvc_program_cache_store) -> gpusvc_program_cache_store_stats_snapshot {
    let mut st = gpusvc_program_cache_store_stats_snapshot::default();
    // SAFETY: live handle and out slot.
    assert_eq!(unsafe { gpusvc_program_cache_store_stats(s, &mut st) }, OK);
    st
}

unsafe extern "C" fn collect(
    user_data: *mut c_void,
    key: *const gpusvc_program_cache_sha1,
    entry: *const u8,
    len: usize,
) -> i32 {
    // SAFETY: `user_data` is the live Vec `entries` passes; key and bytes are valid for the call.
    unsafe {
        let out = &mut *user_data.cast::<Vec<(gpusvc_program_cache_sha1, Vec<u8>)>>();
        out.push((*key, std::slice::from_raw_parts(entry, len).to_vec()));
    }
    0
}

/// Every entry of a store, in the order `_for_each` gives them.
fn entries(s: *mut gpusvc_program_cache_store) -> Vec<(gpusvc_program_cache_sha1, Vec<u8>)> {
    let mut out: Vec<(gpusvc_program_cache_sha1, Vec<u8>)> = Vec::new();
    let mut n = 99;
    // SAFETY: a live handle; `collect` gets the live Vec during the call.
    let r = unsafe {
        gpusvc_program_cache_store_for_each(
            s,
            Some(collect),
            ptr::from_mut(&mut out).cast(),
            &mut n,
        )
    };
    assert_eq!(r, OK, "{}", last_detail());
    assert_eq!(n, out.len());
    out
}

// ---- programs without GL ----

/// Saves a made-up program `n` (a 300-byte binary) under key `[n; 20]`.
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
        fragment_shader: gpusvc_program_cache_sha1 {
            bytes: [n.wrapping_add(50); 20],
        },
        vertex: none,
        fragment: none,
        binary_format: 0xB1,
        binary: bytes.as_ptr(),
        binary_len: bytes.len(),
        has_page: false,
        page: 0,
    };
    let mut report = gpusvc_program_cache_save_report::default();
    // SAFETY: live locals.
    let r = unsafe {
        gpusvc_program_cache_save(
            cache,
            &gpusvc_program_cache_sha1 { bytes: [n; 20] },
            &desc,
            &mut report,
        )
    };
    assert_eq!(r, OK, "{}", last_detail());
}

/// The entries a sink receives for made-up programs 1..=count, under `stamp`.
fn made_up_entries(stamp: &[u8], count: u8) -> Vec<(gpusvc_program_cache_sha1, Vec<u8>)> {
    let r = Received::default();
    let s = sink(&r, stamp);
    let cache = new_cache(1 << 20, Some(&s)).unwrap();
    for n in 1..=count {
        save(cache, n);
    }
    flush_persist(cache);
    free_cache(cache);
    let saved = std::mem::take(&mut *r.saved.lock().unwrap());
    assert_eq!(saved.len(), usize::from(count));
    saved
}

// ---- probes ----

/// A sink that frees its own cache (the last reference) from its first `entry_saved` call.
#[derive(Default)]
struct Freeing {
    cache: AtomicUsize,
    go: AtomicBool,
    calls: AtomicUsize,
    freed: AtomicBool,
    calls_after_free: AtomicUsize,
    free_result: Mutex<Option<gpusvc_result>>,
    /// Instead of freeing: insert the entry back into the cache, and what that returned.
    insert_back: bool,
    inserted: Mutex<Vec<(gpusvc_result, bool)>>,
}

unsafe extern "C" fn freeing_saved(
    user_data: *mut c_void,
    key: *const gpusvc_program_cache_sha1,
    entry: *const u8,
    len: usize,
) {
    // SAFETY: the test passes a live `Freeing`; key and entry are valid during the call.
    let (f, key) = unsafe { (&*user_data.cast::<Freeing>(), *key) };
    let start = Instant::now();
    while !f.go.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    f.calls.fetch_add(1, Ordering::SeqCst);
    if f.freed.load(Ordering::SeqCst) {
        f.calls_after_free.fetch_add(1, Ordering::SeqCst);
        return;
    }
    let cache = f.cache.load(Ordering::SeqCst) as *mut gpusvc_program_cache;
    if f.insert_back {
        let mut back = gpusvc_program_cache_sha1 { bytes: [0; 20] };
        // SAFETY: the sink's own live cache; the entry is valid during the call.
        let r = unsafe { gpusvc_program_cache_insert_entry(cache, entry, len, &mut back) };
        f.inserted
            .lock()
            .unwrap()
            .push((r, back.bytes == key.bytes));
        return;
    }
    // SAFETY: the sink's own cache, freed once, here.
    let r = unsafe { gpusvc_program_cache_free(cache) };
    *f.free_result.lock().unwrap() = Some(r);
    f.freed.store(true, Ordering::SeqCst);
}

fn freeing_sink(f: &Freeing, stamp: &[u8]) -> gpusvc_program_cache_persist_sink {
    let r = Received::default();
    let mut s = sink(&r, stamp);
    s.user_data = ptr::from_ref(f).cast_mut().cast();
    s.entry_saved = Some(freeing_saved);
    s.entry_used = None;
    s.entry_rejected = None;
    s.store_rejected = None;
    s
}

#[test]
fn a_sink_that_frees_its_own_cache_returns_and_is_never_called_again() {
    let stamp = test_stamp(c"1");
    let f = Freeing::default();
    let s = freeing_sink(&f, &stamp);
    let cache = new_cache(1 << 20, Some(&s)).unwrap();
    f.cache.store(cache as usize, Ordering::SeqCst);
    for n in 1..=5 {
        save(cache, n);
    }
    f.go.store(true, Ordering::SeqCst);
    let start = Instant::now();
    while !f.freed.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        f.freed.load(Ordering::SeqCst),
        "the free inside the sink never returned"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(*f.free_result.lock().unwrap(), Some(OK));
    assert_eq!(f.calls.load(Ordering::SeqCst), 1);
    assert_eq!(f.calls_after_free.load(Ordering::SeqCst), 0);
    let mut st = gpusvc_program_cache_persist_stats_snapshot::default();
    // SAFETY: a handle freed by the sink: the library must refuse it.
    let code = unsafe { gpusvc_program_cache_persist_stats(cache, &mut st) };
    assert_eq!(code, GPUSVC_INVALID_HANDLE);
    // SAFETY: as above: a second free.
    let code = unsafe { gpusvc_program_cache_free(cache) };
    assert_eq!(code, GPUSVC_INVALID_HANDLE);
}

#[test]
fn a_sink_may_insert_the_entry_it_is_given_back_into_its_cache() {
    let stamp = test_stamp(c"1");
    let f = Freeing {
        insert_back: true,
        go: AtomicBool::new(true),
        ..Freeing::default()
    };
    let s = freeing_sink(&f, &stamp);
    let cache = new_cache(1 << 20, Some(&s)).unwrap();
    f.cache.store(cache as usize, Ordering::SeqCst);
    for n in 1..=3 {
        save(cache, n);
    }
    flush_persist(cache);
    assert_eq!(*f.inserted.lock().unwrap(), [(OK, true); 3]);
    let st = persist_stats(cache);
    assert_eq!((st.sent, st.inserted, st.insert_refused), (3, 3, 0));
    free_cache(cache);
}

#[test]
fn lengths_past_ptrdiff_max_and_null_outputs_do_nothing_and_count_nothing() {
    let stamp = test_stamp(c"1");
    let saved = made_up_entries(&stamp, 1);
    let entry = &saved[0].1;
    let r = Received::default();
    let s = sink(&r, &stamp);
    let cache = new_cache(1 << 20, Some(&s)).unwrap();
    let mut key = gpusvc_program_cache_sha1 { bytes: [0xEE; 20] };
    for len in [usize::MAX, isize::MAX as usize + 1] {
        // SAFETY: the length is refused before anything is read.
        let code =
            unsafe { gpusvc_program_cache_insert_entry(cache, entry.as_ptr(), len, &mut key) };
        assert_eq!(code, GPUSVC_INVALID_ARGUMENT, "{len}");
    }
    // SAFETY: a live entry and a NULL output.
    let code = unsafe {
        gpusvc_program_cache_insert_entry(cache, entry.as_ptr(), entry.len(), ptr::null_mut())
    };
    assert_eq!(code, GPUSVC_NULL_ARGUMENT);
    assert_eq!(key.bytes, [0xEE; 20]);
    let st = persist_stats(cache);
    assert_eq!(
        (st.inserted, st.insert_refused),
        (0, 0),
        "a refused call was counted: {st:?}"
    );
    let mut out = ptr::null_mut();
    let k = saved[0].0;
    // SAFETY: live handle, key and out slot.
    let code = unsafe { gpusvc_program_cache_load(cache, &k, false, 0, &mut out) };
    assert_eq!(code, GPUSVC_PROGRAM_CACHE_NOT_FOUND);

    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), &stamp);
    let mut written = false;
    for len in [usize::MAX, isize::MAX as usize + 1] {
        // SAFETY: the length is refused before anything is read.
        let code = unsafe {
            gpusvc_program_cache_store_put(store, entry.as_ptr(), len, &mut key, &mut written)
        };
        assert_eq!(code, GPUSVC_INVALID_ARGUMENT, "{len}");
    }
    // SAFETY: a live entry, one NULL output.
    let code = unsafe {
        gpusvc_program_cache_store_put(
            store,
            entry.as_ptr(),
            entry.len(),
            &mut key,
            ptr::null_mut(),
        )
    };
    assert_eq!(code, GPUSVC_NULL_ARGUMENT);
    let st = store_stats(store);
    assert_eq!((st.entries, st.puts, st.writes), (0, 0, 0), "{st:?}");
    let mut n = 7usize;
    // SAFETY: a NULL callback is refused.
    let code = unsafe { gpusvc_program_cache_store_for_each(store, None, ptr::null_mut(), &mut n) };
    assert_eq!(code, GPUSVC_NULL_ARGUMENT);
    assert_eq!(n, 7);
    free_store(store);
    // SAFETY: a second free of the same handle.
    let code = unsafe { gpusvc_program_cache_store_free(store) };
    assert_eq!(code, GPUSVC_INVALID_HANDLE);
    free_cache(cache);
}

/// A struct followed by bytes the library does not know.
#[repr(C)]
struct Longer<T> {
    known: T,
    extra: u64,
}

#[test]
fn struct_size_lies_are_refused_and_zero_tails_accepted() {
    let stamp = test_stamp(c"1");
    let dir = tempfile::tempdir().unwrap();
    let path = path_bytes(dir.path());
    for (extra, size, expect) in [
        (
            0u64,
            size_of::<Longer<gpusvc_program_cache_store_config>>(),
            OK,
        ),
        (
            1,
            size_of::<Longer<gpusvc_program_cache_store_config>>(),
            GPUSVC_UNSUPPORTED_STRUCT_SIZE,
        ),
        (0, 4097, GPUSVC_UNSUPPORTED_STRUCT_SIZE),
        (0, usize::MAX, GPUSVC_UNSUPPORTED_STRUCT_SIZE),
        (0, 8, GPUSVC_UNSUPPORTED_STRUCT_SIZE),
    ] {
        let mut c = Longer {
            known: store_config(&path, &stamp),
            extra,
        };
        c.known.struct_size = size;
        let mut s = ptr::null_mut();
        // SAFETY: `c` is valid for size_of::<Longer>() bytes; larger sizes are refused first.
        let code = unsafe { gpusvc_program_cache_store_open(&c.known, &mut s) };
        assert_eq!(
            code,
            expect,
            "extra {extra}, size {size}: {}",
            last_detail()
        );
        if code == OK {
            free_store(s);
        } else {
            assert!(s.is_null());
        }
    }
    let r = Received::default();
    for (extra, size, expect) in [
        (
            0u64,
            size_of::<Longer<gpusvc_program_cache_persist_sink>>(),
            OK,
        ),
        (
            1,
            size_of::<Longer<gpusvc_program_cache_persist_sink>>(),
            GPUSVC_UNSUPPORTED_STRUCT_SIZE,
        ),
        (0, 4097, GPUSVC_UNSUPPORTED_STRUCT_SIZE),
    ] {
        let mut s = Longer {
            known: sink(&r, &stamp),
            extra,
        };
        s.known.struct_size = size;
        let got = new_cache(1 << 20, Some(&s.known));
        match got {
            Ok(cache) => {
                assert_eq!(expect, OK, "extra {extra}, size {size}");
                free_cache(cache);
            }
            Err(code) => assert_eq!(
                code,
                expect,
                "extra {extra}, size {size}: {}",
                last_detail()
            ),
        }
    }
}

#[test]
fn stamp_fields_with_line_breaks_work_on_both_sides_and_huge_ones_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let product = c"evil\nhost_version: 9\r\n";
    let stamp = stamp_text(&fake_driver(), &desc(product, c"1\n2"));
    let saved = made_up_entries(&stamp, 2);
    let store = open_store(dir.path(), &stamp);
    for (k, e) in &saved {
        assert_eq!(put(store, e), Ok((*k, true)));
    }
    assert_eq!(entries(store).len(), 2);
    free_store(store);

    // A 100 KB product: the GPU side takes it; the store refuses it with a code and a detail.
    let big = std::ffi::CString::new("p".repeat(100_000)).unwrap();
    let stamp = stamp_text(&fake_driver(), &desc(&big, c"1"));
    let r = Received::default();
    let s = sink(&r, &stamp);
    let gpu = new_cache(1 << 20, Some(&s));
    let path = path_bytes(dir.path());
    let store = try_open_store(&store_config(&path, &stamp));
    eprintln!(
        "100 KB product: GPU-side cache {:?}, store open {:?}: {}",
        gpu.map(|_| ()),
        store.map(|_| ()),
        last_detail()
    );
    assert_eq!(store, Err(GPUSVC_PROGRAM_CACHE_STORE_UNUSABLE));
    if let Ok(cache) = gpu {
        free_cache(cache);
    }
}

#[test]
fn the_used_counter_with_no_entry_used_callback() {
    // `used` is "`entry_used` calls made": with that callback NULL no call is made, yet the
    // counter counts the use (now documented on the snapshot: a NULL callback counts as called).
    let stamp = test_stamp(c"1");
    let r = Received::default();
    let mut s = sink(&r, &stamp);
    s.entry_used = None;
    let cache = new_cache(1 << 20, Some(&s)).unwrap();
    save(cache, 1);
    let mut out = ptr::null_mut();
    // SAFETY: live handle, key and out slot.
    let code = unsafe {
        gpusvc_program_cache_load(
            cache,
            &gpusvc_program_cache_sha1 { bytes: [1; 20] },
            false,
            0,
            &mut out,
        )
    };
    assert_eq!(code, OK);
    // SAFETY: the entry copy just made.
    assert_eq!(unsafe { gpusvc_program_cache_entry_free(out) }, OK);
    flush_persist(cache);
    let st = persist_stats(cache);
    eprintln!(
        "used {} with no entry_used callback ({} calls reached the host)",
        st.used,
        r.used.lock().unwrap().len()
    );
    assert_eq!(r.used.lock().unwrap().len(), 0);
    assert_eq!(st.used, 1);
    free_cache(cache);
}
