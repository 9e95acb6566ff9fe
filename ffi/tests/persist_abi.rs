//! The persistence split through the C ABI, from Rust: a GPU-side cache hands each saved program
//! to its persistence sink, a store keeps the entries, and a fresh cache gets them back as cache
//! hits on the real driver; the stamp text; bad entries and bad store configurations each with
//! their code; every NULL and dead handle; the sink's free-time gate; calls back into the library
//! from the sink and from a store iteration.

mod common;
#[path = "common/persist.rs"]
mod persist_common;

use std::ffi::{CStr, c_char, c_void};
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use common::*;
use gpusvc::gpusvc_result::*;
use gpusvc::*;
use persist_common::*;

// ---- the sink ----

/// What a persistence sink received (its callbacks run on the cache's persistence thread).

#[test]
fn saved_entries_go_through_a_store_and_back_into_a_fresh_cache_without_gl() {
    let stamp = test_stamp(c"1");
    let saved = made_up_entries(&stamp, 3);
    for (n, (key, _)) in (1u8..).zip(&saved) {
        assert_eq!(key.bytes, [n; 20]);
    }
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), &stamp);
    for (key, entry) in &saved {
        assert_eq!(put(store, entry), Ok((*key, true)));
        assert_eq!(
            put(store, entry),
            Ok((*key, false)),
            "an entry is never rewritten"
        );
    }
    let st = store_stats(store);
    assert_eq!(
        (st.puts, st.writes, st.already_present, st.entries),
        (6, 3, 3, 3),
        "{st:?}"
    );
    free_store(store);

    let store = open_store(dir.path(), &stamp);
    let back = entries(store);
    assert_eq!(back.len(), 3);
    let r = Received::default();
    let s = sink(&r, &stamp);
    let cache = new_cache(1 << 20, Some(&s)).unwrap();
    for (key, entry) in &back {
        assert!(
            saved.iter().any(|(k, e)| k == key && e == entry),
            "streamed back as sent"
        );
        assert_eq!(insert(cache, entry), Ok(*key));
    }
    assert_eq!(
        insert(cache, &back[0].1),
        Ok(back[0].0),
        "a key already in memory: accepted"
    );
    let ps = persist_stats(cache);
    assert!(ps.configured);
    assert_eq!(
        (ps.inserted, ps.insert_refused, ps.sent),
        (4, 0, 0),
        "{ps:?}"
    );
    // Loads are hits, reported to the sink as uses, which the store records.
    for n in 1..=3u8 {
        let mut e = ptr::null_mut();
        // SAFETY: live handle, key and out slot.
        let r = unsafe {
            gpusvc_program_cache_load(
                cache,
                &gpusvc_program_cache_sha1 { bytes: [n; 20] },
                false,
                0,
                &mut e,
            )
        };
        assert_eq!(r, OK);
        // SAFETY: the entry just made.
        assert_eq!(unsafe { gpusvc_program_cache_entry_free(e) }, OK);
    }
    flush_persist(cache);
    let used = r.used.lock().unwrap().clone();
    assert_eq!(used.len(), 3);
    // The most recently used first: touch program 2 last.
    std::thread::sleep(std::time::Duration::from_millis(20));
    for key in used.iter().filter(|k| k.bytes[0] == 2) {
        // SAFETY: live handle and key.
        assert_eq!(unsafe { gpusvc_program_cache_store_touch(store, key) }, OK);
    }
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_store_flush(store) }, OK);
    let order = entries(store);
    assert_eq!(order[0].0.bytes, [2; 20], "most recently used first");
    assert_eq!(store_stats(store).touches, 1);
    free_cache(cache);
    free_store(store);
}

#[test]
fn the_stamp_text_names_the_folder_a_disk_cache_of_the_same_driver_uses() {
    let d = desc(c"persist abi tests", c"7");
    let driver = fake_driver();
    let text = stamp_text(&driver, &d);
    let s = std::str::from_utf8(&text).unwrap();
    assert!(
        s.contains("host_product: persist abi tests") && s.contains("gl_renderer: test renderer"),
        "{s}"
    );
    // Size rules: a short buffer is INSUFFICIENT_SIZE with nothing written.
    let mut buf = vec![0x55 as c_char; text.len()];
    let mut n = 77;
    // SAFETY: a buffer of text.len() bytes (one short of the NUL).
    let r = unsafe {
        gpusvc_program_cache_stamp_text(&driver, &d, buf.as_mut_ptr(), buf.len(), &mut n)
    };
    assert_eq!(r, GPUSVC_INSUFFICIENT_SIZE);
    assert_eq!((n, buf[0]), (77, 0x55));

    // A disk cache of the same identity writes its STAMP with exactly this text, and a store
    // opened with the text is that cache's store.
    let dir = tempfile::tempdir().unwrap();
    let bytes = path_bytes(dir.path());
    let mut disk = std::mem::MaybeUninit::<gpusvc_program_cache_disk_config>::zeroed();
    // SAFETY: a zeroed slot; struct_size set when the struct has one.
    let mut disk = unsafe {
        (&raw mut (*disk.as_mut_ptr()).struct_size)
            .write(size_of::<gpusvc_program_cache_disk_config>());
        assert_eq!(
            gpusvc_program_cache_disk_config_defaults(disk.as_mut_ptr()),
            OK
        );
        disk.assume_init()
    };
    disk.dir = bytes.as_ptr().cast();
    disk.dir_len = bytes.len();
    disk.host_product = c"persist abi tests".as_ptr();
    disk.host_version = c"7".as_ptr();
    let mut cache = ptr::null_mut();
    // SAFETY: live configs and out slot.
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
    save(cache, 9);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_flush_disk(cache) }, OK);
    free_cache(cache);
    let folders: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("STAMP").exists())
        .collect();
    assert_eq!(folders.len(), 1);
    assert_eq!(std::fs::read(folders[0].join("STAMP")).unwrap(), text);
    let store = open_store(dir.path(), &text);
    let got = entries(store);
    assert_eq!(got.len(), 1, "the store is the disk cache's");
    assert_eq!(got[0].0.bytes, [9; 20]);
    free_store(store);
}

#[test]
fn bad_entries_are_refused_with_their_own_codes_by_the_cache_and_the_store() {
    let stamp = test_stamp(c"1");
    let saved = made_up_entries(&stamp, 1);
    let good = &saved[0].1;
    let r = Received::default();
    let s = sink(&r, &stamp);
    let cache = new_cache(1 << 20, Some(&s)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), &stamp);

    let mut damaged_payload = good.clone();
    *damaged_payload.last_mut().unwrap() ^= 1;
    let mut damaged_header = good.clone();
    damaged_header[40] ^= 1;
    let mut not_ours = good.clone();
    not_ours[..8].copy_from_slice(b"NOTOURS!");
    let foreign = made_up_entries(&test_stamp(c"2"), 1).remove(0).1;
    let huge = vec![0u8; (64 << 20) + 97];
    let empty_binary = {
        let (header, mut program) = program_cache::disk::decode(
            good,
            &program_cache::disk::decode_header(good).unwrap().stamp_hash,
            None,
        )
        .unwrap();
        program.binary.bytes.clear();
        program_cache::disk::encode(
            &header.key,
            &program,
            &header.stamp_hash,
            header.created_ms,
            true,
        )
    };
    let cases: [(&str, &[u8], gpusvc_result); 7] = [
        (
            "truncated",
            &good[..50],
            GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED,
        ),
        ("bad magic", &not_ours, GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED),
        (
            "payload bit flip",
            &damaged_payload,
            GPUSVC_PROGRAM_CACHE_ENTRY_DAMAGED,
        ),
        (
            "header bit flip",
            &damaged_header,
            GPUSVC_PROGRAM_CACHE_ENTRY_DAMAGED,
        ),
        (
            "another stamp",
            &foreign,
            GPUSVC_PROGRAM_CACHE_ENTRY_FOREIGN_STAMP,
        ),
        ("too large", &huge, GPUSVC_PROGRAM_CACHE_ENTRY_TOO_LARGE),
        (
            "empty binary",
            &empty_binary,
            GPUSVC_PROGRAM_CACHE_EMPTY_BINARY,
        ),
    ];
    for (what, bytes, code) in cases {
        assert_eq!(
            insert(cache, bytes),
            Err(code),
            "insert: {what}: {}",
            last_detail()
        );
        if code == GPUSVC_PROGRAM_CACHE_EMPTY_BINARY {
            // The store checks the encoding, not what the program holds.
            assert!(last_detail().contains("empty"), "{}", last_detail());
            continue;
        }
        assert!(last_detail().contains("invalid entry"), "{}", last_detail());
        assert_eq!(
            put(store, bytes).map(|_| ()),
            Err(code),
            "put: {what}: {}",
            last_detail()
        );
    }
    let ps = persist_stats(cache);
    assert_eq!((ps.inserted, ps.insert_refused), (0, 7), "{ps:?}");
    let st = store_stats(store);
    assert_eq!(
        (st.puts, st.refused, st.writes, st.entries),
        (6, 6, 0, 0),
        "{st:?}"
    );
    // Nothing was inserted: the good entry still goes in.
    assert_eq!(insert(cache, good), Ok(saved[0].0));

    // No sink: no stamp to check against.
    let plain = new_cache(1 << 20, None).unwrap();
    assert_eq!(
        insert(plain, good),
        Err(GPUSVC_PROGRAM_CACHE_PERSIST_NOT_CONFIGURED)
    );
    assert!(!persist_stats(plain).configured);
    // A cache too small: inserted entries never evict.
    let tiny = new_cache(100, Some(&s)).unwrap();
    assert_eq!(insert(tiny, good), Err(GPUSVC_PROGRAM_CACHE_NO_ROOM));
    for c in [cache, plain, tiny] {
        free_cache(c);
    }
    free_store(store);
    assert_eq!(GPUSVC_PROGRAM_CACHE_PERSIST_NOT_CONFIGURED as u32, 209);
    assert_eq!(GPUSVC_PROGRAM_CACHE_STORE_IO as u32, 219);
}

#[test]
fn bad_store_and_sink_configurations_are_refused_with_their_own_codes() {
    let stamp = test_stamp(c"1");
    let dir = tempfile::tempdir().unwrap();
    let good_dir = path_bytes(dir.path());
    let attempt =
        |dir: &[u8], stamp: &[u8], edit: &dyn Fn(&mut gpusvc_program_cache_store_config)| {
            let mut c = store_config(dir, stamp);
            edit(&mut c);
            try_open_store(&c)
        };
    let none = |_: &mut gpusvc_program_cache_store_config| {};
    assert_eq!(
        attempt(b"relative/folder", &stamp, &none),
        Err(GPUSVC_PROGRAM_CACHE_STORE_DIR_NOT_ABSOLUTE)
    );
    assert!(
        last_detail().contains("relative/folder"),
        "{}",
        last_detail()
    );
    assert_eq!(
        attempt(b"/tmp/\xff\xfe", &stamp, &none),
        Err(GPUSVC_INVALID_UTF8)
    );
    assert_eq!(attempt(b"", &stamp, &none), Err(GPUSVC_INVALID_ARGUMENT));
    assert_eq!(
        attempt(b"/tmp/a\0b", &stamp, &none),
        Err(GPUSVC_INVALID_ARGUMENT)
    );
    assert_eq!(
        attempt(&good_dir, b"stamp_format: 2\n", &none),
        Err(GPUSVC_PROGRAM_CACHE_BAD_STAMP)
    );
    let edited = String::from_utf8(stamp.clone())
        .unwrap()
        .replace("persist abi tests", "persist abi tesTs");
    assert_eq!(
        attempt(&good_dir, edited.as_bytes(), &none),
        Err(GPUSVC_PROGRAM_CACHE_BAD_STAMP)
    );
    assert_eq!(attempt(&good_dir, b"\xff", &none), Err(GPUSVC_INVALID_UTF8));
    assert_eq!(
        attempt(&good_dir, &stamp, &|c| c.budget_bytes = 0),
        Err(GPUSVC_INVALID_ARGUMENT)
    );
    assert_eq!(
        attempt(&good_dir, &stamp, &|c| c.dir = ptr::null()),
        Err(GPUSVC_NULL_ARGUMENT)
    );
    assert_eq!(
        attempt(&good_dir, &stamp, &|c| c.stamp = ptr::null()),
        Err(GPUSVC_NULL_ARGUMENT)
    );
    assert_eq!(
        attempt(&good_dir, &stamp, &|c| c.struct_size = 0),
        Err(GPUSVC_UNSUPPORTED_STRUCT_SIZE)
    );
    assert_eq!(
        attempt(&good_dir, &stamp, &|c| c.struct_size = 8),
        Err(GPUSVC_UNSUPPORTED_STRUCT_SIZE)
    );
    // A regular file where the folder should be.
    let file = dir.path().join("a file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(
        attempt(&path_bytes(&file), &stamp, &none),
        Err(GPUSVC_PROGRAM_CACHE_STORE_UNUSABLE)
    );
    assert!(!last_detail().is_empty());
    // SAFETY: NULL config and out slots, which the library must refuse.
    unsafe {
        let mut s = ptr::null_mut();
        assert_eq!(
            gpusvc_program_cache_store_open(ptr::null(), &mut s),
            GPUSVC_NULL_ARGUMENT
        );
        let c = store_config(&good_dir, &stamp);
        assert_eq!(
            gpusvc_program_cache_store_open(&c, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing made on failure"
    );

    // The sink's checks happen when the cache is made.
    let r = Received::default();
    let bad = |edit: &dyn Fn(&mut gpusvc_program_cache_persist_sink)| {
        let mut s = sink(&r, &stamp);
        edit(&mut s);
        new_cache(1 << 20, Some(&s))
    };
    assert_eq!(
        bad(&|s| s.stamp_len = 10),
        Err(GPUSVC_PROGRAM_CACHE_BAD_STAMP)
    );
    assert_eq!(bad(&|s| s.stamp = ptr::null()), Err(GPUSVC_NULL_ARGUMENT));
    assert_eq!(
        bad(&|s| s.max_consecutive_rejections = 0),
        Err(GPUSVC_INVALID_ARGUMENT)
    );
    assert_eq!(
        bad(&|s| s.struct_size = 1),
        Err(GPUSVC_UNSUPPORTED_STRUCT_SIZE)
    );
    // An old host's config (without the persist_sink field) makes a cache without a sink.
    let mut old = cache_config(1 << 20);
    old.struct_size = std::mem::offset_of!(gpusvc_program_cache_config, persist_sink);
    old.persist_sink = ptr::dangling();
    let mut cache = ptr::null_mut();
    // SAFETY: live config (read only up to its struct_size) and out slot.
    let r = unsafe { gpusvc_program_cache_new(&old, None, ptr::null_mut(), &mut cache) };
    assert_eq!(r, OK);
    assert!(!persist_stats(cache).configured);
    free_cache(cache);
}

#[test]
fn every_null_and_dead_handle_is_a_code_and_nothing_is_written() {
    let stamp = test_stamp(c"1");
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), &stamp);
    let cache = new_cache(1 << 20, None).unwrap();
    let key = gpusvc_program_cache_sha1 { bytes: [1; 20] };
    let bytes = [0u8; 4];
    let mut out_key = gpusvc_program_cache_sha1 { bytes: [0xEE; 20] };
    let mut flag = true;
    let mut n = 77usize;
    let mut st = gpusvc_program_cache_store_stats_snapshot::default();
    let mut ps = gpusvc_program_cache_persist_stats_snapshot::default();
    let d = desc(c"p", c"1");
    let driver = fake_driver();
    // SAFETY: NULL pointers and handles of the wrong kind, which the library must refuse.
    unsafe {
        let s = store.cast_const();
        assert_eq!(
            gpusvc_program_cache_store_put(s, ptr::null(), 0, &mut out_key, &mut flag),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_put(s, bytes.as_ptr(), 4, ptr::null_mut(), &mut flag),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_put(s, bytes.as_ptr(), 4, &mut out_key, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_put(s, bytes.as_ptr(), usize::MAX, &mut out_key, &mut flag),
            GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_put(ptr::null(), bytes.as_ptr(), 4, &mut out_key, &mut flag),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_touch(s, ptr::null()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_remove(s, ptr::null(), &mut flag),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_remove(s, &key, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_clear(s, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_for_each(s, None, ptr::null_mut(), &mut n),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_for_each(s, Some(collect), ptr::null_mut(), ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_stats(s, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_condition(s, ptr::null_mut(), 0, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_store_config_defaults(ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_persist_sink_defaults(ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_insert_entry(cache, ptr::null(), 0, &mut out_key),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_insert_entry(cache, bytes.as_ptr(), 4, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_insert_entry(cache, bytes.as_ptr(), usize::MAX, &mut out_key),
            GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_insert_entry(ptr::null(), bytes.as_ptr(), 4, &mut out_key),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_flush_persist(ptr::null()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_persist_stats(cache, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_stamp_text(ptr::null(), &d, ptr::null_mut(), 0, &mut n),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_stamp_text(&driver, ptr::null(), ptr::null_mut(), 0, &mut n),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_stamp_text(&driver, &d, ptr::null_mut(), 0, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_stamp_text(&driver, &d, ptr::null_mut(), 5, &mut n),
            GPUSVC_NULL_ARGUMENT
        );
        let no_product = gpusvc_program_cache_stamp_desc {
            host_product: ptr::null(),
            ..d
        };
        assert_eq!(
            gpusvc_program_cache_stamp_text(&driver, &no_product, ptr::null_mut(), 0, &mut n),
            GPUSVC_NULL_ARGUMENT
        );
        let reserved = gpusvc_program_cache_stamp_desc { reserved: 1, ..d };
        assert_eq!(
            gpusvc_program_cache_stamp_text(&driver, &reserved, ptr::null_mut(), 0, &mut n),
            GPUSVC_INVALID_ARGUMENT
        );
        let bad = [0xffu8, 0];
        let not_utf8 = gpusvc_driver_identity {
            struct_size: size_of::<gpusvc_driver_identity>(),
            gl_renderer: bad.as_ptr().cast(),
            ..driver
        };
        assert_eq!(
            gpusvc_program_cache_stamp_text(&not_utf8, &d, ptr::null_mut(), 0, &mut n),
            GPUSVC_INVALID_UTF8
        );
        // A handle of the other kind.
        let wrong_store = cache.cast::<gpusvc_program_cache_store>();
        assert_eq!(
            gpusvc_program_cache_store_stats(wrong_store, &mut st),
            GPUSVC_INVALID_HANDLE
        );
        assert!(
            last_detail().contains("is a gpusvc_program_cache, not a gpusvc_program_cache_store"),
            "{}",
            last_detail()
        );
        assert_eq!(
            gpusvc_program_cache_persist_stats(store.cast(), &mut ps),
            GPUSVC_INVALID_HANDLE
        );
        assert_eq!(
            gpusvc_program_cache_store_free(wrong_store),
            GPUSVC_INVALID_HANDLE
        );
        assert_eq!(gpusvc_program_cache_store_free(ptr::null_mut()), OK);
    }
    assert_eq!(
        (out_key.bytes, flag, n),
        ([0xEE; 20], true, 77),
        "nothing written on failure"
    );
    free_store(store);
    // SAFETY: a freed handle, which the library must refuse.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_store_touch(store, &key),
            GPUSVC_INVALID_HANDLE
        );
        assert_eq!(
            gpusvc_program_cache_store_stats(store, &mut st),
            GPUSVC_INVALID_HANDLE
        );
        assert_eq!(
            gpusvc_program_cache_store_for_each(store, Some(collect), ptr::null_mut(), &mut n),
            GPUSVC_INVALID_HANDLE
        );
        assert_eq!(
            gpusvc_program_cache_store_free(store),
            GPUSVC_INVALID_HANDLE
        );
    }
    free_cache(cache);
    // SAFETY: a freed handle.
    let r = unsafe { gpusvc_program_cache_insert_entry(cache, bytes.as_ptr(), 4, &mut out_key) };
    assert_eq!(r, GPUSVC_INVALID_HANDLE);
}

/// Lines a store's log callback received.
#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

unsafe extern "C" fn log_line(message: *const c_char, user_data: *mut c_void) {
    // SAFETY: `user_data` is the live `Lines` the test passes; the message is NUL-terminated.
    let (lines, text) = unsafe {
        (
            &*user_data.cast::<Lines>(),
            CStr::from_ptr(message).to_string_lossy().into_owned(),
        )
    };
    lines.0.lock().unwrap().push(text);
}

#[test]
fn a_repaired_stamp_file_is_reported_through_the_log_and_the_condition() {
    let stamp = test_stamp(c"1");
    let dir = tempfile::tempdir().unwrap();
    free_store(open_store(dir.path(), &stamp));
    let folder = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(folder.join("STAMP"), b"damaged").unwrap();
    let lines = Lines::default();
    let bytes = path_bytes(dir.path());
    let mut c = store_config(&bytes, &stamp);
    c.log = Some(log_line);
    c.log_user_data = ptr::from_ref(&lines).cast_mut().cast();
    let store = try_open_store(&c).unwrap();
    let logged = lines.0.lock().unwrap().clone();
    assert!(logged.iter().any(|l| l.contains("STAMP")), "{logged:?}");
    let mut n = 0;
    // SAFETY: size query with a live handle and out slot.
    let r = unsafe { gpusvc_program_cache_store_condition(store, ptr::null_mut(), 0, &mut n) };
    assert_eq!(r, OK);
    let mut buf = vec![0 as c_char; n + 1];
    // SAFETY: a buffer of n + 1 bytes.
    let r = unsafe { gpusvc_program_cache_store_condition(store, buf.as_mut_ptr(), n + 1, &mut n) };
    assert_eq!(r, OK);
    // SAFETY: NUL-terminated on success.
    let condition = unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    assert!(condition.contains("STAMP"), "{condition}");
    free_store(store);
    assert_eq!(
        std::fs::read(folder.join("STAMP")).unwrap(),
        stamp,
        "repaired"
    );
}

#[test]
fn one_store_is_used_from_two_threads_at_once() {
    let stamp = test_stamp(c"1");
    let saved = made_up_entries(&stamp, 8);
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), &stamp);
    let addr = store as usize;
    std::thread::scope(|scope| {
        for half in saved.chunks(4) {
            scope.spawn(move || {
                let store = addr as *mut gpusvc_program_cache_store;
                for (key, entry) in half {
                    assert_eq!(put(store, entry), Ok((*key, true)));
                    // SAFETY: a live handle and key.
                    assert_eq!(unsafe { gpusvc_program_cache_store_touch(store, key) }, OK);
                    assert!(!entries(store).is_empty());
                }
            });
        }
    });
    let st = store_stats(store);
    assert_eq!((st.entries, st.writes, st.touches), (8, 8, 8), "{st:?}");
    assert_eq!(entries(store).len(), 8);
    free_store(store);
}

// ---- re-entrancy ----

/// What the `_for_each` callback of the re-entrancy test does and saw.
struct Reenter {
    store: *mut gpusvc_program_cache_store,
    calls: usize,
    results: Vec<gpusvc_result>,
    nested_count: usize,
    /// Re-entrant puts of the entry being visited that did not say "already present".
    bad_puts: usize,
    /// On this call: clear the store (1-based; 0: never).
    clear_on: usize,
    /// On this call: free the store.
    free_on: usize,
}

unsafe extern "C" fn reenter(
    user_data: *mut c_void,
    key: *const gpusvc_program_cache_sha1,
    entry: *const u8,
    len: usize,
) -> i32 {
    // SAFETY: the live `Reenter` the test passes; key and entry valid for the call.
    unsafe {
        let r = &mut *user_data.cast::<Reenter>();
        r.calls += 1;
        let s = r.store;
        let mut st = gpusvc_program_cache_store_stats_snapshot::default();
        let mut k = gpusvc_program_cache_sha1::default();
        let mut written = true;
        let mut n = 0;
        let mut inner: Vec<(gpusvc_program_cache_sha1, Vec<u8>)> = Vec::new();
        r.results.push(gpusvc_program_cache_store_stats(s, &mut st));
        r.results.push(gpusvc_program_cache_store_touch(s, key));
        r.results.push(gpusvc_program_cache_store_put(
            s,
            entry,
            len,
            &mut k,
            &mut written,
        ));
        if written || k != *key {
            r.bad_puts += 1;
        }
        r.results.push(gpusvc_program_cache_store_for_each(
            s,
            Some(collect),
            ptr::from_mut(&mut inner).cast(),
            &mut n,
        ));
        r.nested_count += n;
        if r.calls == r.clear_on {
            let mut removed = 0;
            r.results
                .push(gpusvc_program_cache_store_clear(s, &mut removed));
        }
        if r.calls == r.free_on {
            r.results.push(gpusvc_program_cache_store_free(s));
        }
    }
    0
}

#[test]
fn calls_into_the_store_from_its_own_iteration_work_and_a_free_there_ends_it() {
    let stamp = test_stamp(c"1");
    let saved = made_up_entries(&stamp, 4);
    let dir = tempfile::tempdir().unwrap();
    for (clear_on, free_on, expected_calls) in [(0, 0, 4), (2, 0, 2), (0, 3, 3)] {
        let store = open_store(dir.path(), &stamp);
        for (_, e) in &saved {
            put(store, e).unwrap();
        }
        let mut r = Reenter {
            store,
            calls: 0,
            results: Vec::new(),
            nested_count: 0,
            bad_puts: 0,
            clear_on,
            free_on,
        };
        let mut n = 0;
        // SAFETY: a live handle; `reenter` gets the live `Reenter` during the call.
        let code = unsafe {
            gpusvc_program_cache_store_for_each(
                store,
                Some(reenter),
                ptr::from_mut(&mut r).cast(),
                &mut n,
            )
        };
        assert_eq!(code, OK, "{}", last_detail());
        assert_eq!(
            (n, r.calls),
            (expected_calls, expected_calls),
            "clear on {clear_on}, free on {free_on}"
        );
        assert!(r.results.iter().all(|&c| c == OK), "{:?}", r.results);
        assert!(r.nested_count >= expected_calls);
        assert_eq!(r.bad_puts, 0);
        if free_on == 0 {
            if clear_on != 0 {
                assert_eq!(store_stats(store).entries, 0);
            }
            free_store(store);
        } else {
            let mut st = gpusvc_program_cache_store_stats_snapshot::default();
            // SAFETY: freed from inside the callback, which the library must now refuse.
            let r = unsafe { gpusvc_program_cache_store_stats(store, &mut st) };
            assert_eq!(r, GPUSVC_INVALID_HANDLE);
        }
    }
}

#[test]
fn a_sink_may_call_the_library_but_a_flush_from_inside_is_busy_not_a_hang() {
    let stamp = test_stamp(c"1");
    let r = Received::default();
    let s = sink(&r, &stamp);
    let cache = new_cache(1 << 20, Some(&s)).unwrap();
    r.reenter.store(cache as usize, Ordering::SeqCst);
    // On another thread, so that a flush waiting for itself fails the test instead of hanging it.
    let (done, finished) = std::sync::mpsc::channel();
    let addr = cache as usize;
    std::thread::spawn(move || {
        let cache = addr as *mut gpusvc_program_cache;
        save(cache, 1);
        flush_persist(cache);
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the save and flush did not finish: a flush from inside the sink waits for itself");
    assert_eq!(r.saved.lock().unwrap().len(), 1);
    assert_eq!(*r.reentered.lock().unwrap(), [GPUSVC_HANDLE_BUSY, OK]);
    free_cache(cache);
}

#[test]
fn freeing_the_last_reference_hands_what_was_queued_to_the_sink_first() {
    let stamp = test_stamp(c"1");
    let r = Received::default();
    let s = sink(&r, &stamp);
    let cache = new_cache(1 << 20, Some(&s)).unwrap();
    for n in 1..=5 {
        save(cache, n);
    }
    free_cache(cache);
    assert_eq!(
        r.saved.lock().unwrap().len(),
        5,
        "no flush: the free delivered them"
    );
}

#[test]
fn the_current_config_of_a_cache_with_a_sink_has_no_sink_pointer() {
    let stamp = test_stamp(c"1");
    let r = Received::default();
    let s = sink(&r, &stamp);
    let cache = new_cache(1 << 20, Some(&s)).unwrap();
    let mut c = cache_config(0);
    c.persist_sink = ptr::dangling();
    // SAFETY: live handle and out slot.
    let r = unsafe { gpusvc_program_cache_current_config(cache, &mut c) };
    assert_eq!(r, OK);
    assert!(c.persist_sink.is_null());
    assert_eq!(c.budget_bytes, 1 << 20);
    free_cache(cache);
}

// ---- the real driver ----

const VS: &str = "in vec2 a_position;\nuniform float u_scale;\n\
void main() { gl_Position = vec4(a_position * u_scale, 0.0, 1.0); }\n";

fn fragment(n: usize) -> String {
    format!(
        "uniform vec4 u_tint;\nout vec4 o_color;\nvoid main() {{ o_color = u_tint * {n}.0; }}\n"
    )
}

fn new_manager(
    ctx: *mut gpusvc_gl_context,
    cache: *mut gpusvc_program_cache,
) -> *mut gpusvc_program_manager {
    let mut m = ptr::null_mut();
    // SAFETY: live handles and out slot.
    let r = unsafe { gpusvc_program_manager_new_gl(ctx, cache, c"persist abi".as_ptr(), &mut m) };
    assert_eq!(r, OK, "{}", last_detail());
    m
}

/// Links VS + fragment(n) through `m`; the link origin.
fn link(ctx: *mut gpusvc_gl_context, m: *mut gpusvc_program_manager, n: usize) -> u32 {
    let (vs, fs) = (glsl(ctx, VS), glsl(ctx, &fragment(n)));
    // SAFETY: live handles and out slots; every handle made here is freed here.
    unsafe {
        let mut shaders = [ptr::null_mut(); 2];
        for (slot, (stage, src)) in shaders.iter_mut().zip([
            (GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, &vs),
            (GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, &fs),
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
        origin
    }
}

fn free_manager(m: *mut gpusvc_program_manager) {
    // SAFETY: a live manager on its thread.
    assert_eq!(unsafe { gpusvc_program_manager_free(m) }, OK);
}

fn context_stamp(ctx: *mut gpusvc_gl_context) -> Vec<u8> {
    let mut identity = fake_driver();
    // SAFETY: live context and out slot.
    let r = unsafe { gpusvc_gl_context_driver_identity(ctx, &mut identity) };
    assert_eq!(r, OK);
    stamp_text(&identity, &desc(c"persist abi tests", c"1"))
}

const PROGRAMS: usize = 4;

#[test]
fn programs_linked_on_the_driver_come_back_from_the_store_as_cache_hits() {
    let Some(ctx) = open_gl_context(
        "programs_linked_on_the_driver_come_back_from_the_store_as_cache_hits",
        0,
    ) else {
        return;
    };
    let stamp = context_stamp(ctx);
    let dir = tempfile::tempdir().unwrap();

    // The GPU process links a corpus; the browser persists what its sink is sent.
    let sent = Received::default();
    let s = sink(&sent, &stamp);
    let a = new_cache(1 << 22, Some(&s)).unwrap();
    let m = new_manager(ctx, a);
    for n in 0..PROGRAMS {
        assert_eq!(link(ctx, m, n), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    }
    free_manager(m);
    flush_persist(a);
    assert_eq!(persist_stats(a).sent, PROGRAMS as u64);
    free_cache(a);
    let store = open_store(dir.path(), &stamp);
    let saved = std::mem::take(&mut *sent.saved.lock().unwrap());
    assert_eq!(saved.len(), PROGRAMS);
    let persisted = saved
        .iter()
        .filter(|(_, e)| put(store, e).unwrap().1)
        .count();
    assert_eq!(persisted, PROGRAMS);
    free_store(store);

    // The next start: the store streams every entry into a fresh cache; every link is a hit.
    let store = open_store(dir.path(), &stamp);
    let got = Received::default();
    let s = sink(&got, &stamp);
    let b = new_cache(1 << 22, Some(&s)).unwrap();
    let mut streamed = 0;
    for (key, entry) in entries(store) {
        assert_eq!(insert(b, &entry), Ok(key), "{}", last_detail());
        streamed += 1;
    }
    assert_eq!(streamed, PROGRAMS);
    let m = new_manager(ctx, b);
    for n in 0..PROGRAMS {
        assert_eq!(
            link(ctx, m, n),
            GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT,
            "program {n}"
        );
    }
    let mut st = gpusvc_program_cache_stats_snapshot::default();
    // SAFETY: live handle and out slot.
    assert_eq!(unsafe { gpusvc_program_cache_stats(b, &mut st) }, OK);
    assert_eq!(
        (st.counters.hits, st.counters.driver_rejections),
        (PROGRAMS as u64, 0)
    );
    free_manager(m);
    flush_persist(b);
    assert_eq!(
        got.used.lock().unwrap().len(),
        PROGRAMS,
        "each hit reported as a use"
    );
    assert!(
        got.saved.lock().unwrap().is_empty(),
        "hits are not sent again"
    );
    free_cache(b);
    free_store(store);
    eprintln!(
        "linked {PROGRAMS}, sent {}, persisted {persisted}, streamed back {streamed}, hits {}",
        saved.len(),
        st.counters.hits
    );
    // SAFETY: a live context on its thread.
    unsafe { gpusvc_gl_context_free(ctx) };
}

#[test]
fn the_sink_is_never_called_once_the_cache_is_freed_even_while_a_manager_keeps_it() {
    let Some(ctx) = open_gl_context(
        "the_sink_is_never_called_once_the_cache_is_freed_even_while_a_manager_keeps_it",
        0,
    ) else {
        return;
    };
    let stamp = context_stamp(ctx);
    let r = Received::default();
    let s = sink(&r, &stamp);
    let cache = new_cache(1 << 22, Some(&s)).unwrap();
    let m = new_manager(ctx, cache);
    assert_eq!(link(ctx, m, 0), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    flush_persist(cache);
    let before = r.calls.load(Ordering::SeqCst);
    assert_eq!(before, 1, "the sink is called while the cache lives");
    free_cache(cache);
    // The manager keeps the cache: a new program is saved, a hit is a use; neither reaches the
    // host's sink, nor does what the persistence thread delivers when the manager goes.
    assert_eq!(link(ctx, m, 1), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    assert_eq!(
        link(ctx, m, 0),
        GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT
    );
    free_manager(m);
    assert_eq!(r.calls.load(Ordering::SeqCst), before);
    // SAFETY: a live context on its thread.
    unsafe { gpusvc_gl_context_free(ctx) };
}

#[test]
fn a_binary_the_driver_refuses_is_reported_to_the_sink_and_removed_from_the_store() {
    let Some(ctx) = open_gl_context(
        "a_binary_the_driver_refuses_is_reported_to_the_sink_and_removed_from_the_store",
        0,
    ) else {
        return;
    };
    let stamp = context_stamp(ctx);
    let r = Received::default();
    let s = sink(&r, &stamp);
    let a = new_cache(1 << 22, Some(&s)).unwrap();
    let m = new_manager(ctx, a);
    assert_eq!(link(ctx, m, 0), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    free_manager(m);
    flush_persist(a);
    free_cache(a);
    let (key, entry) = r.saved.lock().unwrap().pop().unwrap();
    // The same entry with a binary the driver cannot take (checksums valid).
    let stamp_hash = program_cache::disk::decode_header(&entry)
        .unwrap()
        .stamp_hash;
    let (header, mut program) = program_cache::disk::decode(&entry, &stamp_hash, None).unwrap();
    program.binary.bytes.iter_mut().for_each(|b| *b ^= 0x5A);
    let garbage =
        program_cache::disk::encode(&header.key, &program, &stamp_hash, header.created_ms, true);
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), &stamp);
    assert_eq!(put(store, &garbage), Ok((key, true)));

    let got = Received::default();
    let mut s = sink(&got, &stamp);
    s.max_consecutive_rejections = 1;
    let b = new_cache(1 << 22, Some(&s)).unwrap();
    assert_eq!(insert(b, &garbage), Ok(key));
    let m = new_manager(ctx, b);
    assert_eq!(
        link(ctx, m, 0),
        GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_RELINKED_AFTER_REJECTION
    );
    free_manager(m);
    flush_persist(b);
    assert_eq!(*got.rejected.lock().unwrap(), [key]);
    assert_eq!(got.store_rejected.load(Ordering::SeqCst), 1);
    let ps = persist_stats(b);
    assert_eq!((ps.rejected, ps.store_rejections), (1, 1), "{ps:?}");
    // The browser deletes it.
    let mut removed = false;
    // SAFETY: live handle, key and out slot.
    let r = unsafe { gpusvc_program_cache_store_remove(store, &key, &mut removed) };
    assert_eq!(r, OK);
    assert!(removed);
    assert_eq!(store_stats(store).entries, 0);
    free_cache(b);
    free_store(store);
    // SAFETY: a live context on its thread.
    unsafe { gpusvc_gl_context_free(ctx) };
}

#[test]
fn a_failed_append_to_the_store_log_is_counted_in_its_stats() {
    let stamp = test_stamp(c"1");
    let (key, entry) = made_up_entries(&stamp, 1).remove(0);
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), &stamp);
    assert_eq!(put(store, &entry).unwrap(), (key, true));
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_store_flush(store) }, OK);
    let folder = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("entries").is_dir())
        .expect("the store's folder");
    let _ = std::fs::remove_file(folder.join("lru.log"));
    std::fs::create_dir(folder.join("lru.log")).unwrap();
    assert_eq!(store_stats(store).record_errors, 0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    // SAFETY: live handle and key.
    assert_eq!(unsafe { gpusvc_program_cache_store_touch(store, &key) }, OK);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_store_flush(store) }, OK);
    let st = store_stats(store);
    assert_eq!(
        (st.touches, st.record_errors, st.write_errors),
        (1, 1, 0),
        "{st:?}"
    );
    free_store(store);
    assert!(folder.join("lru.log").is_dir());
}

/// The good shaders of refused programs go to the sink's `shaders_compiled` (not those a saved
/// entry records), into the store's list, and back into the next process's cache, which then
/// knows they compile. An older host's sink struct, which ends before the callback, gets no
/// call and loses nothing else.
#[test]
fn compiled_shaders_travel_through_the_sink_and_the_store_to_the_next_start() {
    let stamp = test_stamp(c"1");
    let r = Received::default();
    let s = sink(&r, &stamp);
    let cache = new_cache(1 << 20, Some(&s)).unwrap();
    let (good, used) = (
        gpusvc_program_cache_sha1 { bytes: [0xA1; 20] },
        gpusvc_program_cache_sha1 { bytes: [7; 20] },
    );
    // SAFETY: live handle and hashes.
    unsafe {
        assert_eq!(gpusvc_program_cache_mark_shader_compiled(cache, &good), OK);
        assert_eq!(gpusvc_program_cache_mark_shader_compiled(cache, &used), OK);
    }
    // `save(cache, 7)` saves a program whose vertex shader is hash [7; 20].
    save(cache, 7);
    flush_persist(cache);
    assert_eq!(*r.compiled.lock().unwrap(), [good]);
    let stats = persist_stats(cache);
    assert_eq!(stats.compiled, 1, "{stats:?}");
    free_cache(cache);

    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path(), &stamp);
    let sent = r.compiled.lock().unwrap().clone();
    // SAFETY: live handle; `sent` holds its count of hashes; NULL with 0 is allowed.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_store_mark_compiled(store, sent.as_ptr(), sent.len()),
            OK
        );
        assert_eq!(
            gpusvc_program_cache_store_mark_compiled(store, ptr::null(), 0),
            OK
        );
        assert_eq!(
            gpusvc_program_cache_store_mark_compiled(store, ptr::null(), 1),
            GPUSVC_NULL_ARGUMENT
        );
    }
    let mut n = 9;
    // SAFETY: a count query, then a buffer of that count; a short buffer is refused unwritten.
    let kept = unsafe {
        assert_eq!(
            gpusvc_program_cache_store_compiled_shaders(store, ptr::null_mut(), 0, &mut n),
            OK
        );
        assert_eq!(n, 1);
        let mut none = [gpusvc_program_cache_sha1 { bytes: [0xEE; 20] }; 1];
        assert_eq!(
            gpusvc_program_cache_store_compiled_shaders(store, none.as_mut_ptr(), 0, &mut n),
            GPUSVC_INSUFFICIENT_SIZE
        );
        assert_eq!(none[0].bytes, [0xEE; 20]);
        let mut out = vec![gpusvc_program_cache_sha1::default(); n];
        assert_eq!(
            gpusvc_program_cache_store_compiled_shaders(store, out.as_mut_ptr(), out.len(), &mut n),
            OK
        );
        out
    };
    assert_eq!(kept, [good]);
    free_store(store);

    // The next start: handed back, the shader is known to compile, and is not sent again.
    let r2 = Received::default();
    let mut old = sink(&r2, &stamp);
    // The callback is set, but past the size the host declares: the library must not read it.
    old.struct_size = std::mem::offset_of!(gpusvc_program_cache_persist_sink, shaders_compiled);
    assert!(old.shaders_compiled.is_some());
    let next = new_cache(1 << 20, Some(&old)).unwrap();
    let status = |c| {
        // SAFETY: live handle, hash and out slot.
        written(9, |o| unsafe {
            gpusvc_program_cache_shader_compile_status(c, &good, o)
        })
    };
    assert_eq!(status(next), GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_UNKNOWN);
    // SAFETY: live handle and hashes.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_insert_compiled(next, kept.as_ptr(), kept.len()),
            OK
        );
    }
    assert_eq!(status(next), GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_SUCCESS);
    // A sink struct that ends before `shaders_compiled`: a new good shader reaches no callback.
    let other = gpusvc_program_cache_sha1 { bytes: [0xB2; 20] };
    // SAFETY: live handle and hash.
    let r = unsafe { gpusvc_program_cache_mark_shader_compiled(next, &other) };
    assert_eq!(r, OK);
    flush_persist(next);
    assert!(r2.compiled.lock().unwrap().is_empty());
    assert_eq!(
        persist_stats(next).compiled,
        1,
        "handed to the sink, which read no callback past its size"
    );
    // A stats struct of the older size: `compiled` is not written.
    let size = std::mem::offset_of!(gpusvc_program_cache_persist_stats_snapshot, compiled);
    let mut st = gpusvc_program_cache_persist_stats_snapshot {
        struct_size: size,
        compiled: 77,
        ..Default::default()
    };
    // SAFETY: live handle and out slot (larger than the size it declares).
    let r = unsafe { gpusvc_program_cache_persist_stats(next, &mut st) };
    assert_eq!(r, OK);
    assert_eq!(
        (st.struct_size, st.compiled, st.configured),
        (size, 77, true)
    );
    free_cache(next);
}
