//! Second review of the C ABI failure records (`gpusvc_program_cache_entry_desc::failure`,
//! `gpusvc_program_cache_load_failure`, `gpusvc_program_cache_entry_failure`): an old host's
//! struct, the log's bounds, a compile failure naming shaders, peek, and records saved from C
//! streamed through the persistence sink into another cache.

mod common;
#[path = "common/persist.rs"]
mod persist_common;

use std::ffi::c_char;
use std::ptr;

use common::*;
use gpusvc::gpusvc_result::*;
use gpusvc::*;
use persist_common::{Received, flush_persist, insert, sink, test_stamp};

fn new_cache(budget: usize) -> *mut gpusvc_program_cache {
    persist_common::new_cache(budget, None).unwrap()
}

fn sha(n: u8) -> gpusvc_program_cache_sha1 {
    gpusvc_program_cache_sha1 { bytes: [n; 20] }
}

fn no_variables() -> gpusvc_program_cache_shader_variables {
    gpusvc_program_cache_shader_variables {
        attributes: ptr::null(),
        attribute_count: 0,
        uniforms: ptr::null(),
        uniform_count: 0,
    }
}

fn failure_desc(
    vs: gpusvc_program_cache_sha1,
    fs: gpusvc_program_cache_sha1,
    failure: u32,
    stage: u32,
    log: *const u8,
    log_len: usize,
) -> gpusvc_program_cache_entry_desc {
    gpusvc_program_cache_entry_desc {
        struct_size: size_of::<gpusvc_program_cache_entry_desc>(),
        vertex_shader: vs,
        fragment_shader: fs,
        vertex: no_variables(),
        fragment: no_variables(),
        binary_format: 0,
        binary: ptr::null(),
        binary_len: 0,
        has_page: false,
        page: 0,
        failure,
        failure_stage: stage,
        failure_log: log.cast(),
        failure_log_len: log_len,
    }
}

fn save(
    cache: *mut gpusvc_program_cache,
    key: gpusvc_program_cache_sha1,
    d: *const gpusvc_program_cache_entry_desc,
) -> gpusvc_result {
    let mut report = gpusvc_program_cache_save_report::default();
    // SAFETY: live locals; `d` points at a struct valid for its struct_size.
    unsafe { gpusvc_program_cache_save(cache, &key, d, &mut report) }
}

fn stats(cache: *mut gpusvc_program_cache) -> gpusvc_program_cache_stats_snapshot {
    let mut s = gpusvc_program_cache_stats_snapshot::default();
    // SAFETY: live handle and sized output.
    let r = unsafe { gpusvc_program_cache_stats(cache, &mut s) };
    assert_eq!(r, GPUSVC_OK);
    s
}

fn compile_status(cache: *mut gpusvc_program_cache, h: gpusvc_program_cache_sha1) -> u32 {
    let mut s = 99;
    // SAFETY: live locals.
    let r = unsafe { gpusvc_program_cache_shader_compile_status(cache, &h, &mut s) };
    assert_eq!(r, GPUSVC_OK);
    s
}

/// `(failure, stage, log)` of an entry (`gpusvc_program_cache_entry_failure`, size query then
/// copy); the entry stays live.
fn read_failure(e: *mut gpusvc_program_cache_entry) -> (u32, u32, Vec<u8>) {
    let (mut failure, mut stage, mut len) = (99, 99, 99);
    // SAFETY: a live entry; the buffer is `len + 1` bytes.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_entry_failure(
                e,
                &mut failure,
                &mut stage,
                ptr::null_mut(),
                0,
                &mut len
            ),
            GPUSVC_OK
        );
        let mut buf = vec![1 as c_char; len + 1];
        assert_eq!(
            gpusvc_program_cache_entry_failure(
                e,
                &mut failure,
                &mut stage,
                buf.as_mut_ptr(),
                buf.len(),
                &mut len
            ),
            GPUSVC_OK
        );
        assert_eq!(buf[len], 0, "NUL-terminated");
        (
            failure,
            stage,
            buf[..len].iter().map(|&c| c as u8).collect(),
        )
    }
}

/// `(failure, stage, log)` of the failure record under `key`, or the lookup's code.
fn load_failure(
    cache: *mut gpusvc_program_cache,
    key: gpusvc_program_cache_sha1,
) -> Result<(u32, u32, Vec<u8>), gpusvc_result> {
    let mut e = ptr::null_mut();
    // SAFETY: live locals.
    let r = unsafe { gpusvc_program_cache_load_failure(cache, &key, &mut e) };
    if r != GPUSVC_OK {
        assert!(e.is_null());
        return Err(r);
    }
    let read = read_failure(e);
    // SAFETY: a live entry, freed once.
    assert_eq!(unsafe { gpusvc_program_cache_entry_free(e) }, GPUSVC_OK);
    Ok(read)
}

/// `gpusvc_program_cache_entry_desc` as published before the failure fields, followed in
/// memory by bytes that look like a failure record: a host built against the old header
/// saves exactly what it saved before (a program; with no binary, `EMPTY_BINARY`).
#[repr(C)]
struct OldDescThenJunk {
    desc: [u8; std::mem::offset_of!(gpusvc_program_cache_entry_desc, failure)],
    junk: [u32; 8],
}

#[test]
fn an_old_hosts_entry_desc_saves_what_it_saved_before() {
    let cache = new_cache(1 << 20);
    let binary = *b"old host binary";
    let mut d = failure_desc(
        sha(1),
        sha(2),
        GPUSVC_PROGRAM_CACHE_FAILURE_NONE,
        0,
        ptr::null(),
        0,
    );
    d.binary = binary.as_ptr();
    d.binary_len = binary.len();
    d.binary_format = 0x55;
    let old_size = std::mem::offset_of!(gpusvc_program_cache_entry_desc, failure);
    d.struct_size = old_size;
    let mut old = OldDescThenJunk {
        desc: [0; std::mem::offset_of!(gpusvc_program_cache_entry_desc, failure)],
        // failure = LINK, failure_stage = FRAGMENT, then garbage.
        junk: [
            GPUSVC_PROGRAM_CACHE_FAILURE_LINK,
            GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
            0xFFFF_FFFF,
            0xFFFF_FFFF,
            7,
            0,
            0,
            0,
        ],
    };
    // SAFETY: `d` is valid for `old_size` bytes of reads, `old.desc` for as many writes.
    unsafe {
        ptr::copy_nonoverlapping(
            ptr::from_ref(&d).cast::<u8>(),
            old.desc.as_mut_ptr(),
            old_size,
        );
    }
    let p = ptr::from_ref(&old).cast::<gpusvc_program_cache_entry_desc>();
    assert_eq!(save(cache, sha(3), p), GPUSVC_OK, "{}", last_detail());
    let mut e = ptr::null_mut();
    // SAFETY: live locals; the entry is freed.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_load(cache, &sha(3), false, 0, &mut e),
            GPUSVC_OK
        );
        let mut f = 99;
        let mut st = 99;
        let mut len = 99;
        assert_eq!(
            gpusvc_program_cache_entry_failure(e, &mut f, &mut st, ptr::null_mut(), 0, &mut len),
            GPUSVC_OK
        );
        assert_eq!((f, st, len), (GPUSVC_PROGRAM_CACHE_FAILURE_NONE, 0, 0));
        assert_eq!(gpusvc_program_cache_entry_free(e), GPUSVC_OK);
    }
    assert_eq!(
        load_failure(cache, sha(3)),
        Err(GPUSVC_PROGRAM_CACHE_NOT_FOUND)
    );

    // Without a binary the old host gets what it got before: no failure record is made.
    let mut empty = old;
    let at = std::mem::offset_of!(gpusvc_program_cache_entry_desc, binary_len);
    empty.desc[at..at + size_of::<usize>()].copy_from_slice(&0usize.to_ne_bytes());
    let p = ptr::from_ref(&empty).cast::<gpusvc_program_cache_entry_desc>();
    assert_eq!(save(cache, sha(4), p), GPUSVC_PROGRAM_CACHE_EMPTY_BINARY);
    assert_eq!(
        load_failure(cache, sha(4)),
        Err(GPUSVC_PROGRAM_CACHE_NOT_FOUND)
    );
    assert_eq!(stats(cache).entries, 1);
    persist_common::free_cache(cache);
}

/// The log's bounds: NULL with a length is `NULL_ARGUMENT`; exactly 64 KiB is kept byte for
/// byte (and a size query then a buffer of exactly len + 1 works), 64 KiB + 1 is refused;
/// an empty log needs no pointer.
#[test]
fn failure_logs_at_their_bounds() {
    let cache = new_cache(1 << 22);
    let link = GPUSVC_PROGRAM_CACHE_FAILURE_LINK;
    let d = failure_desc(sha(1), sha(2), link, 0, ptr::null(), 5);
    assert_eq!(save(cache, sha(10), &d), GPUSVC_NULL_ARGUMENT);
    let at_bound: Vec<u8> = (0..64 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    let d = failure_desc(sha(1), sha(2), link, 0, at_bound.as_ptr(), at_bound.len());
    assert_eq!(save(cache, sha(11), &d), GPUSVC_OK, "{}", last_detail());
    let over = [at_bound.as_slice(), b"z"].concat();
    let d = failure_desc(sha(1), sha(2), link, 0, over.as_ptr(), over.len());
    assert_eq!(save(cache, sha(12), &d), GPUSVC_PROGRAM_CACHE_EMPTY_BINARY);
    let d = failure_desc(sha(1), sha(2), link, 0, ptr::null(), 0);
    assert_eq!(save(cache, sha(13), &d), GPUSVC_OK);

    assert_eq!(load_failure(cache, sha(11)), Ok((link, 0, at_bound)));
    assert_eq!(load_failure(cache, sha(13)), Ok((link, 0, Vec::new())));
    assert_eq!(
        load_failure(cache, sha(10)),
        Err(GPUSVC_PROGRAM_CACHE_NOT_FOUND)
    );
    assert_eq!(
        load_failure(cache, sha(12)),
        Err(GPUSVC_PROGRAM_CACHE_NOT_FOUND)
    );
    assert_eq!(stats(cache).failure_hits, 2);
    persist_common::free_cache(cache);
}

/// A compile failure that names shader hashes anyway marks none of them compiled (a failed
/// compile holds no statuses), while a link failure marks its shaders compiled; evicting the
/// link failure releases them.
#[test]
fn a_compile_failure_naming_shaders_marks_none_compiled() {
    let cache = new_cache(1 << 20);
    let log = b"0:1: error";
    let d = failure_desc(
        sha(21),
        sha(22),
        GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE,
        GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
        log.as_ptr(),
        log.len(),
    );
    assert_eq!(save(cache, sha(30), &d), GPUSVC_OK);
    for h in [sha(21), sha(22)] {
        assert_eq!(
            compile_status(cache, h),
            GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_UNKNOWN
        );
    }
    assert_eq!(
        load_failure(cache, sha(30)),
        Ok((
            GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE,
            GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
            log.to_vec()
        ))
    );
    persist_common::free_cache(cache);
}

/// Records saved from C reach the persistence sink and, streamed back into another cache with
/// `gpusvc_program_cache_insert_entry`, are found by `_load_failure` with the same log and
/// stage (and never by `_load`).
#[test]
fn c_saved_failure_records_round_trip_through_the_sink() {
    let stamp = test_stamp(c"1");
    let r = Received::default();
    let s = sink(&r, &stamp);
    let cache = persist_common::new_cache(1 << 20, Some(&s)).unwrap();
    let log = "0:3(1): error: `x' undeclared\n\u{e9}".as_bytes();
    let compile = failure_desc(
        gpusvc_program_cache_sha1::default(),
        gpusvc_program_cache_sha1::default(),
        GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE,
        GPUSVC_PROGRAM_CACHE_SHADER_STAGE_GEOMETRY,
        log.as_ptr(),
        log.len(),
    );
    let link_log = b"link error: varyings mismatch";
    let link = failure_desc(
        sha(41),
        sha(42),
        GPUSVC_PROGRAM_CACHE_FAILURE_LINK,
        0,
        link_log.as_ptr(),
        link_log.len(),
    );
    assert_eq!(save(cache, sha(50), &compile), GPUSVC_OK);
    assert_eq!(save(cache, sha(51), &link), GPUSVC_OK);
    flush_persist(cache);
    let saved = r.saved.lock().unwrap().clone();
    assert_eq!(saved.len(), 2);

    let r2 = Received::default();
    let s2 = sink(&r2, &stamp);
    let other = persist_common::new_cache(1 << 20, Some(&s2)).unwrap();
    for (key, entry) in &saved {
        assert_eq!(insert(other, entry), Ok(*key), "{}", last_detail());
    }
    assert_eq!(
        load_failure(other, sha(50)),
        Ok((
            GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE,
            GPUSVC_PROGRAM_CACHE_SHADER_STAGE_GEOMETRY,
            log.to_vec()
        ))
    );
    assert_eq!(
        load_failure(other, sha(51)),
        Ok((GPUSVC_PROGRAM_CACHE_FAILURE_LINK, 0, link_log.to_vec()))
    );
    assert_eq!(
        compile_status(other, sha(41)),
        GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_SUCCESS
    );
    let mut e = ptr::null_mut();
    // SAFETY: live locals.
    let loaded = unsafe { gpusvc_program_cache_load(other, &sha(51), false, 0, &mut e) };
    assert_eq!(loaded, GPUSVC_PROGRAM_CACHE_NOT_FOUND);
    persist_common::free_cache(other);
    persist_common::free_cache(cache);
}

/// `_peek` is `_load` without recency or counters, except that it also hands out a failure
/// record (its entry says so); `_load` misses it and `_load_failure` counts only a failure hit.
#[test]
fn peek_hands_out_a_failure_record_and_counts_nothing() {
    let cache = new_cache(1 << 20);
    let log = b"link error";
    let link = GPUSVC_PROGRAM_CACHE_FAILURE_LINK;
    let d = failure_desc(sha(61), sha(62), link, 0, log.as_ptr(), log.len());
    assert_eq!(save(cache, sha(70), &d), GPUSVC_OK);
    let before = stats(cache);
    let mut e = ptr::null_mut();
    let (mut f, mut st, mut len) = (99, 99, 99);
    // SAFETY: live locals; the entry is freed.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_peek(cache, &sha(70), &mut e),
            GPUSVC_OK
        );
        assert_eq!(
            gpusvc_program_cache_entry_failure(e, &mut f, &mut st, ptr::null_mut(), 0, &mut len),
            GPUSVC_OK
        );
        assert_eq!((f, st, len), (link, 0, log.len()));
        assert_eq!(gpusvc_program_cache_entry_free(e), GPUSVC_OK);
    }
    let after = stats(cache);
    assert_eq!(
        (
            after.counters.hits,
            after.counters.misses,
            after.failure_hits
        ),
        (
            before.counters.hits,
            before.counters.misses,
            before.failure_hits
        )
    );
    let mut e = ptr::null_mut();
    // SAFETY: live locals.
    let loaded = unsafe { gpusvc_program_cache_load(cache, &sha(70), false, 0, &mut e) };
    assert_eq!(loaded, GPUSVC_PROGRAM_CACHE_NOT_FOUND);
    assert_eq!(stats(cache).counters.misses, before.counters.misses + 1);
    assert_eq!(load_failure(cache, sha(70)), Ok((link, 0, log.to_vec())));
    let last = stats(cache);
    assert_eq!(
        (last.counters.hits, last.failure_hits),
        (before.counters.hits, before.failure_hits + 1)
    );
    persist_common::free_cache(cache);
}

/// A host driving the cache itself records failed compiles and links and gets them back with
/// the driver's log byte for byte, as the Rust `ProgramCache::load_failure` does: a compile
/// failure under `gpusvc_program_cache_compile_failure_key` (per backend identity), a link
/// failure under its program key keeping its shaders' compiled statuses; `_load` never hands
/// out a failure, `_load_failure` never a program, and malformed records are refused.
#[test]
fn failure_records_round_trip_byte_for_byte() {
    let cache = new_cache(1 << 20);
    let bad = sha(1);
    let mut compile_key = gpusvc_program_cache_sha1::default();
    let mut other_backend = gpusvc_program_cache_sha1::default();
    // SAFETY: live locals; C strings are NUL-terminated.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_compile_failure_key(&bad, c"core".as_ptr(), &mut compile_key),
            GPUSVC_OK
        );
        assert_eq!(
            gpusvc_program_cache_compile_failure_key(&bad, c"compat".as_ptr(), &mut other_backend),
            GPUSVC_OK
        );
        assert_eq!(
            gpusvc_program_cache_compile_failure_key(
                ptr::null(),
                c"core".as_ptr(),
                &mut other_backend
            ),
            GPUSVC_NULL_ARGUMENT
        );
    }
    assert_ne!(compile_key.bytes, other_backend.bytes);
    // A log with bytes a C string would stop at or mangle: kept exactly (UTF-8, no NUL inside).
    let log = "0:1(15): error: syntax error, unexpected '}'\n\ttab, ünïcode\n".as_bytes();
    let none = gpusvc_program_cache_sha1::default();
    let d = failure_desc(
        none,
        none,
        GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE,
        GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
        log.as_ptr(),
        log.len(),
    );
    assert_eq!(save(cache, compile_key, &d), GPUSVC_OK);

    let vs = sha(2);
    let fs = sha(3);
    let link_key = sha(4);
    let link_log = b"error: vertex shader output `v' not read by fragment shader";
    let d = failure_desc(
        vs,
        fs,
        GPUSVC_PROGRAM_CACHE_FAILURE_LINK,
        77,
        link_log.as_ptr(),
        link_log.len(),
    );
    assert_eq!(save(cache, link_key, &d), GPUSVC_OK);
    assert_eq!(
        compile_status(cache, vs),
        GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_SUCCESS,
        "the shaders of a failed link compiled"
    );

    let mut e: *mut gpusvc_program_cache_entry = ptr::null_mut();
    // SAFETY: live locals; every entry taken is freed.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_load_failure(cache, &compile_key, &mut e),
            GPUSVC_OK
        );
        assert_eq!(
            read_failure(e),
            (
                GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE,
                GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
                log.to_vec()
            )
        );
        // A buffer one byte short (no room for the NUL): refused, nothing written.
        let (mut f, mut st, mut len) = (99, 99, 99);
        let mut short = vec![0 as c_char; log.len()];
        assert_eq!(
            gpusvc_program_cache_entry_failure(
                e,
                &mut f,
                &mut st,
                short.as_mut_ptr(),
                short.len(),
                &mut len
            ),
            GPUSVC_INSUFFICIENT_SIZE
        );
        assert_eq!((f, st, len), (99, 99, 99));
        assert_eq!(
            gpusvc_program_cache_entry_failure(
                e,
                ptr::null_mut(),
                &mut st,
                ptr::null_mut(),
                0,
                &mut len
            ),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!((st, len), (99, 99));
        assert_eq!(gpusvc_program_cache_entry_free(e), GPUSVC_OK);

        assert_eq!(
            gpusvc_program_cache_load_failure(cache, &link_key, &mut e),
            GPUSVC_OK
        );
        assert_eq!(
            read_failure(e),
            (GPUSVC_PROGRAM_CACHE_FAILURE_LINK, 0, link_log.to_vec())
        );
        assert_eq!(gpusvc_program_cache_entry_free(e), GPUSVC_OK);

        // `_load` never hands out a failure record.
        e = ptr::null_mut();
        assert_eq!(
            gpusvc_program_cache_load(cache, &link_key, false, 0, &mut e),
            GPUSVC_PROGRAM_CACHE_NOT_FOUND
        );
        assert!(e.is_null());
    }
    assert_eq!(stats(cache).failure_hits, 2);

    // A program: `_load_failure` does not return it; its entry reports no failure.
    let pvs = sha(5);
    let program_key = sha(6);
    let mut program = failure_desc(
        pvs,
        fs,
        GPUSVC_PROGRAM_CACHE_FAILURE_NONE,
        0,
        ptr::null(),
        0,
    );
    program.binary = b"binary".as_ptr();
    program.binary_len = 6;
    assert_eq!(save(cache, program_key, &program), GPUSVC_OK);
    // SAFETY: live locals; every entry taken is freed.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_load_failure(cache, &program_key, &mut e),
            GPUSVC_PROGRAM_CACHE_NOT_FOUND
        );
        assert_eq!(
            gpusvc_program_cache_peek(cache, &program_key, &mut e),
            GPUSVC_OK
        );
        assert_eq!(
            read_failure(e),
            (GPUSVC_PROGRAM_CACHE_FAILURE_NONE, 0, Vec::new())
        );
        assert_eq!(gpusvc_program_cache_entry_free(e), GPUSVC_OK);
    }

    // Malformed records change nothing.
    let entries = stats(cache).entries;
    let k = sha(7);
    let link = GPUSVC_PROGRAM_CACHE_FAILURE_LINK;
    let mut with_binary = failure_desc(vs, fs, link, 0, b"log".as_ptr(), b"log".len());
    with_binary.binary = b"bin".as_ptr();
    with_binary.binary_len = 3;
    let long_log = vec![b'x'; 64 * 1024 + 1];
    let not_utf8 = [b'a', 0xFF];
    let refusals = [
        (
            failure_desc(vs, fs, 3, 0, b"log".as_ptr(), b"log".len()),
            GPUSVC_INVALID_ARGUMENT,
        ),
        (
            failure_desc(
                vs,
                fs,
                GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE,
                9,
                b"log".as_ptr(),
                b"log".len(),
            ),
            GPUSVC_INVALID_ARGUMENT,
        ),
        (
            failure_desc(vs, fs, link, 0, not_utf8.as_ptr(), not_utf8.len()),
            GPUSVC_INVALID_UTF8,
        ),
        (
            failure_desc(vs, fs, link, 0, long_log.as_ptr(), long_log.len()),
            GPUSVC_PROGRAM_CACHE_EMPTY_BINARY,
        ),
        (with_binary, GPUSVC_PROGRAM_CACHE_EMPTY_BINARY),
    ];
    for (d, code) in refusals {
        assert_eq!(save(cache, k, &d), code, "{}", last_detail());
    }
    assert_eq!(stats(cache).entries, entries);
    // SAFETY: the cache is live and freed once; nothing uses it after.
    assert_eq!(unsafe { gpusvc_program_cache_free(cache) }, GPUSVC_OK);
}
