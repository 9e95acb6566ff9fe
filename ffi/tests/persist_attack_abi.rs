//! Hostile probes of the persistence split's C ABI (a review): a sink that frees its own cache
//! or inserts back into it, lengths past PTRDIFF_MAX and NULL outputs (nothing done, nothing
//! counted), double frees, `struct_size` lies (a nonzero tail is the kit's
//! `GPUSVC_UNSUPPORTED_STRUCT_SIZE`), stamp texts with odd or huge fields, and what
//! the counters count when a callback is NULL.

#![allow(dead_code)]

mod common;
#[path = "common/persist.rs"]
mod persist_common;

use std::ffi::c_void;
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use gpusvc::gpusvc_result::*;
use gpusvc::*;
use persist_common::*;

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
