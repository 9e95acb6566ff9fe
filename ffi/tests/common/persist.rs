//! The persistence split's C ABI test helpers, shared by `persist_abi.rs` and
//! `persist_attack_abi.rs`: a recording sink, caches and stores made and freed through the
//! exports, the stamp text, entries saved through a sink.

#![allow(dead_code)]

use std::ffi::{CStr, c_char, c_void};
use std::path::Path;
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::*;

use gpusvc::*;

#[derive(Default)]
pub(crate) struct Received {
    pub(crate) calls: AtomicUsize,
    pub(crate) saved: Mutex<Vec<(gpusvc_program_cache_sha1, Vec<u8>)>>,
    pub(crate) used: Mutex<Vec<gpusvc_program_cache_sha1>>,
    pub(crate) rejected: Mutex<Vec<gpusvc_program_cache_sha1>>,
    pub(crate) compiled: Mutex<Vec<gpusvc_program_cache_sha1>>,
    pub(crate) store_rejected: AtomicUsize,
    /// A cache the `entry_saved` callback calls back into (0: none), and what those calls
    /// returned.
    pub(crate) reenter: AtomicUsize,
    pub(crate) reentered: Mutex<Vec<gpusvc_result>>,
}

/// # Safety
/// `user_data` is a live `Received`.
pub(crate) unsafe fn received<'a>(user_data: *mut c_void) -> &'a Received {
    // SAFETY: the tests pass a `Received` that outlives the cache (contract).
    unsafe { &*user_data.cast::<Received>() }
}

pub(crate) unsafe extern "C" fn on_saved(
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

pub(crate) unsafe extern "C" fn on_used(
    user_data: *mut c_void,
    key: *const gpusvc_program_cache_sha1,
) {
    // SAFETY: as in `on_saved`.
    let (r, key) = unsafe { (received(user_data), *key) };
    r.calls.fetch_add(1, Ordering::SeqCst);
    r.used.lock().unwrap().push(key);
}

pub(crate) unsafe extern "C" fn on_rejected(
    user_data: *mut c_void,
    key: *const gpusvc_program_cache_sha1,
) {
    // SAFETY: as in `on_saved`.
    let (r, key) = unsafe { (received(user_data), *key) };
    r.calls.fetch_add(1, Ordering::SeqCst);
    r.rejected.lock().unwrap().push(key);
}

pub(crate) unsafe extern "C" fn on_compiled(
    user_data: *mut c_void,
    hashes: *const gpusvc_program_cache_sha1,
    count: usize,
) {
    // SAFETY: a live `Received`; `count` hashes valid for the call.
    unsafe {
        let r = received(user_data);
        r.calls.fetch_add(1, Ordering::SeqCst);
        r.compiled
            .lock()
            .unwrap()
            .extend_from_slice(std::slice::from_raw_parts(hashes, count));
    }
}

pub(crate) unsafe extern "C" fn on_store_rejected(user_data: *mut c_void) {
    // SAFETY: as in `on_saved`.
    let r = unsafe { received(user_data) };
    r.calls.fetch_add(1, Ordering::SeqCst);
    r.store_rejected.fetch_add(1, Ordering::SeqCst);
}

pub(crate) fn sink(r: &Received, stamp: &[u8]) -> gpusvc_program_cache_persist_sink {
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
    s.shaders_compiled = Some(on_compiled);
    s.stamp = stamp.as_ptr().cast();
    s.stamp_len = stamp.len();
    s
}

pub(crate) fn new_cache(
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

pub(crate) fn free_cache(cache: *mut gpusvc_program_cache) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_free(cache) }, OK);
}

pub(crate) fn flush_persist(cache: *mut gpusvc_program_cache) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_flush_persist(cache) }, OK);
}

pub(crate) fn persist_stats(
    cache: *mut gpusvc_program_cache,
) -> gpusvc_program_cache_persist_stats_snapshot {
    let mut s = gpusvc_program_cache_persist_stats_snapshot::default();
    // SAFETY: live handle and out slot.
    let r = unsafe { gpusvc_program_cache_persist_stats(cache, &mut s) };
    assert_eq!(r, OK);
    s
}

pub(crate) fn insert(
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

pub(crate) fn desc(product: &CStr, version: &CStr) -> gpusvc_program_cache_stamp_desc {
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

pub(crate) fn fake_driver() -> gpusvc_driver_identity {
    gpusvc_driver_identity {
        struct_size: size_of::<gpusvc_driver_identity>(),
        gl_vendor: c"Test vendor".as_ptr(),
        gl_renderer: c"test renderer".as_ptr(),
        gl_version: c"1.0".as_ptr(),
        context: ptr::null(),
    }
}

pub(crate) fn stamp_text(
    driver: &gpusvc_driver_identity,
    desc: &gpusvc_program_cache_stamp_desc,
) -> Vec<u8> {
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

pub(crate) fn test_stamp(version: &CStr) -> Vec<u8> {
    stamp_text(&fake_driver(), &desc(c"persist abi tests", version))
}

// ---- the store ----

pub(crate) fn store_config(dir: &[u8], stamp: &[u8]) -> gpusvc_program_cache_store_config {
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

pub(crate) fn try_open_store(
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

pub(crate) fn path_bytes(p: &Path) -> Vec<u8> {
    p.to_str().unwrap().as_bytes().to_vec()
}

pub(crate) fn open_store(dir: &Path, stamp: &[u8]) -> *mut gpusvc_program_cache_store {
    let bytes = path_bytes(dir);
    try_open_store(&store_config(&bytes, stamp))
        .unwrap_or_else(|r| panic!("{r:?}: {}", last_detail()))
}

pub(crate) fn free_store(s: *mut gpusvc_program_cache_store) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_store_free(s) }, OK);
}

pub(crate) fn put(
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

pub(crate) fn store_stats(
    s: *mut gpusvc_program_cache_store,
) -> gpusvc_program_cache_store_stats_snapshot {
    let mut st = gpusvc_program_cache_store_stats_snapshot::default();
    // SAFETY: live handle and out slot.
    assert_eq!(unsafe { gpusvc_program_cache_store_stats(s, &mut st) }, OK);
    st
}

pub(crate) unsafe extern "C" fn collect(
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
pub(crate) fn entries(
    s: *mut gpusvc_program_cache_store,
) -> Vec<(gpusvc_program_cache_sha1, Vec<u8>)> {
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
pub(crate) fn save(cache: *mut gpusvc_program_cache, n: u8) {
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
        failure: GPUSVC_PROGRAM_CACHE_FAILURE_NONE,
        failure_stage: 0,
        failure_log: ptr::null(),
        failure_log_len: 0,
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
pub(crate) fn made_up_entries(
    stamp: &[u8],
    count: u8,
) -> Vec<(gpusvc_program_cache_sha1, Vec<u8>)> {
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
