//! The program-cache C ABI exercised from Rust through the exported `extern "C"` functions:
//! the cache, the key helpers, save/load/peek copies, statistics, the compile/link flow over a
//! host-callback fake GL and over the real driver, and every bad input the ABI promises to turn
//! into a code.

mod common;

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr;
use std::sync::Mutex;

use common::*;
use gpusvc::*;

fn new_cache(budget: usize) -> *mut gpusvc_program_cache {
    let mut cache = ptr::null_mut();
    // SAFETY: live config and out slot.
    let r = unsafe {
        gpusvc_program_cache_new(&cache_config(budget), None, ptr::null_mut(), &mut cache)
    };
    assert_eq!(r, OK, "{}", last_detail());
    cache
}

fn free_cache(cache: *mut gpusvc_program_cache) {
    // SAFETY: a handle from gpusvc_program_cache_new.
    assert_eq!(unsafe { gpusvc_program_cache_free(cache) }, OK);
}

fn hash(stage: u32, source: &str) -> gpusvc_program_cache_sha1 {
    let mut out = gpusvc_program_cache_sha1::default();
    // SAFETY: the source is a live buffer of its length; no options.
    let r = unsafe {
        gpusvc_program_cache_shader_hash(
            stage,
            source.as_ptr().cast(),
            source.len(),
            ptr::null(),
            0,
            &mut out,
        )
    };
    assert_eq!(r, OK, "{}", last_detail());
    out
}

fn no_link_options() -> gpusvc_program_cache_link_options {
    gpusvc_program_cache_link_options {
        attribute_bindings: ptr::null(),
        attribute_binding_count: 0,
        transform_feedback_varyings: ptr::null(),
        transform_feedback_varying_count: 0,
        transform_feedback_mode: GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK_INTERLEAVED,
    }
}

fn key(
    vs: gpusvc_program_cache_sha1,
    fs: gpusvc_program_cache_sha1,
    bindings: &[(&str, u32)],
) -> gpusvc_program_cache_sha1 {
    key_for(vs, fs, bindings, c"rust abi test")
}

/// `gpusvc_program_cache_program_key` of a vertex + fragment program of `identity`.
fn key_for(
    vs: gpusvc_program_cache_sha1,
    fs: gpusvc_program_cache_sha1,
    bindings: &[(&str, u32)],
    identity: &std::ffi::CStr,
) -> gpusvc_program_cache_sha1 {
    let names: Vec<CString> = bindings
        .iter()
        .map(|(n, _)| CString::new(*n).unwrap())
        .collect();
    let list: Vec<gpusvc_program_cache_attribute_binding> = bindings
        .iter()
        .zip(&names)
        .map(|((_, l), n)| gpusvc_program_cache_attribute_binding {
            name: n.as_ptr(),
            location: *l,
        })
        .collect();
    let input = gpusvc_program_cache_program_key_input {
        struct_size: size_of::<gpusvc_program_cache_program_key_input>(),
        vertex: vs,
        fragment: fs,
        backend_identity: identity.as_ptr(),
        link: gpusvc_program_cache_link_options {
            attribute_bindings: list.as_ptr(),
            attribute_binding_count: list.len(),
            ..no_link_options()
        },
        other_stages: ptr::null(),
        other_stage_count: 0,
        separable: false,
        reserved: [0; 7],
    };
    let mut out = gpusvc_program_cache_sha1::default();
    // SAFETY: `input` points at live locals.
    let r = unsafe { gpusvc_program_cache_program_key(&input, &mut out) };
    assert_eq!(r, OK, "{}", last_detail());
    out
}

fn no_variables() -> gpusvc_program_cache_shader_variables {
    gpusvc_program_cache_shader_variables {
        attributes: ptr::null(),
        attribute_count: 0,
        uniforms: ptr::null(),
        uniform_count: 0,
    }
}

fn desc(
    vs: gpusvc_program_cache_sha1,
    fs: gpusvc_program_cache_sha1,
    binary: &[u8],
) -> gpusvc_program_cache_entry_desc {
    gpusvc_program_cache_entry_desc {
        struct_size: size_of::<gpusvc_program_cache_entry_desc>(),
        vertex_shader: vs,
        fragment_shader: fs,
        vertex: no_variables(),
        fragment: no_variables(),
        binary_format: 0x1234,
        binary: binary.as_ptr(),
        binary_len: binary.len(),
        has_page: false,
        failure: GPUSVC_PROGRAM_CACHE_FAILURE_NONE,
        failure_stage: 0,
        failure_log: ptr::null(),
        failure_log_len: 0,
        page: 0,
    }
}

fn save(
    cache: *mut gpusvc_program_cache,
    key: gpusvc_program_cache_sha1,
    d: &gpusvc_program_cache_entry_desc,
) -> gpusvc_result {
    let mut report = gpusvc_program_cache_save_report::default();
    // SAFETY: live locals; `d` points at live memory.
    unsafe { gpusvc_program_cache_save(cache, &key, d, &mut report) }
}

fn compile_status(cache: *mut gpusvc_program_cache, h: gpusvc_program_cache_sha1) -> u32 {
    let mut s = 99;
    // SAFETY: live locals.
    let r = unsafe { gpusvc_program_cache_shader_compile_status(cache, &h, &mut s) };
    assert_eq!(r, OK);
    s
}

fn link_status(cache: *mut gpusvc_program_cache, k: gpusvc_program_cache_sha1) -> u32 {
    let mut s = 99;
    // SAFETY: live locals.
    let r = unsafe { gpusvc_program_cache_link_status(cache, &k, &mut s) };
    assert_eq!(r, OK);
    s
}

fn stats(cache: *mut gpusvc_program_cache) -> gpusvc_program_cache_stats_snapshot {
    let mut s = gpusvc_program_cache_stats_snapshot::default();
    // SAFETY: live local.
    assert_eq!(unsafe { gpusvc_program_cache_stats(cache, &mut s) }, OK);
    s
}

fn eviction_order(cache: *mut gpusvc_program_cache) -> Vec<gpusvc_program_cache_sha1> {
    let mut n = 0;
    // SAFETY: count query with a live out slot.
    let r = unsafe { gpusvc_program_cache_eviction_order(cache, ptr::null_mut(), 0, &mut n) };
    assert_eq!(r, OK);
    let mut keys = vec![gpusvc_program_cache_sha1::default(); n];
    // SAFETY: `keys` has room for `n`.
    let r = unsafe { gpusvc_program_cache_eviction_order(cache, keys.as_mut_ptr(), n, &mut n) };
    assert_eq!(r, OK);
    keys
}

#[test]
fn config_defaults_and_creation_validate_their_input() {
    let mut c = cache_config(0);
    // SAFETY: live locals and NULL where the contract allows it.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_config_defaults(GPUSVC_PROGRAM_CACHE_PROFILE_MOBILE, &mut c),
            OK
        );
        assert_eq!(c.budget_bytes, 2 * 1024 * 1024);
        assert_eq!(c.policy, GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_W_TINYLFU);
        assert_eq!(
            gpusvc_program_cache_config_defaults(GPUSVC_PROGRAM_CACHE_PROFILE_LOW_MEMORY, &mut c),
            OK
        );
        assert_eq!(c.budget_bytes, 128 * 1024);
        let before = c;
        assert_eq!(
            gpusvc_program_cache_config_defaults(7, &mut c),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(c, before);
        assert!(last_detail().contains("7"), "{}", last_detail());

        let mut cache = ptr::null_mut();
        for bad in [
            gpusvc_program_cache_config { policy: 99, ..c },
            gpusvc_program_cache_config {
                struct_size: size_of::<gpusvc_program_cache_config>(),
                max_unreferenced_shader_statuses: 0,
                ..c
            },
            gpusvc_program_cache_config {
                struct_size: size_of::<gpusvc_program_cache_config>(),
                budget_bytes: usize::MAX,
                ..c
            },
        ] {
            assert_eq!(
                gpusvc_program_cache_new(&bad, None, ptr::null_mut(), &mut cache),
                gpusvc_result::GPUSVC_INVALID_ARGUMENT
            );
            assert!(cache.is_null());
        }
        assert_eq!(
            gpusvc_program_cache_new(ptr::null(), None, ptr::null_mut(), &mut cache),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );

        let page_policy = gpusvc_program_cache_config {
            struct_size: size_of::<gpusvc_program_cache_config>(),
            policy: GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_PAGE_LRU_MRU,
            ..c
        };
        assert_eq!(
            gpusvc_program_cache_new(&page_policy, None, ptr::null_mut(), &mut cache),
            OK
        );
        let mut back = before;
        assert_eq!(gpusvc_program_cache_current_config(cache, &mut back), OK);
        assert_eq!(back, page_policy);
        free_cache(cache);
    }
}

#[test]
fn status_storage_copies_its_keys_and_counts_references() {
    let cache = new_cache(1 << 20);
    let vs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "void main() {}");
    let fs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, "void main() {}");
    assert_ne!(vs, fs, "the stage is part of the hash");
    let mut scratch = vs;
    // SAFETY: live locals.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_mark_shader_compiled(cache, &scratch),
            OK
        );
    }
    scratch.bytes = [0; 20];
    assert_eq!(
        compile_status(cache, vs),
        GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_SUCCESS
    );
    assert_eq!(
        compile_status(cache, scratch),
        GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_UNKNOWN
    );

    let k = key(vs, fs, &[]);
    assert_eq!(
        link_status(cache, k),
        GPUSVC_PROGRAM_CACHE_LINK_STATUS_UNKNOWN
    );
    assert_eq!(save(cache, k, &desc(vs, fs, b"binary")), OK);
    assert_eq!(
        link_status(cache, k),
        GPUSVC_PROGRAM_CACHE_LINK_STATUS_SUCCESS
    );
    let mut refs = 0;
    // SAFETY: live locals.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_shader_refcount(cache, &fs, &mut refs),
            OK
        );
    }
    assert_eq!(refs, 1);
    assert_eq!(
        compile_status(cache, fs),
        GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_SUCCESS
    );
    free_cache(cache);
}

#[test]
fn keys_cover_sources_bindings_and_identity() {
    let vs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "a");
    let vs2 = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "b");
    let fs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, "a");
    let base = key(vs, fs, &[("a_pos", 0)]);
    assert_eq!(base, key(vs, fs, &[("a_pos", 0)]));
    assert_ne!(base, key(vs2, fs, &[("a_pos", 0)]));
    assert_ne!(base, key(vs, fs, &[("a_pos", 1)]));
    assert_eq!(
        key(vs, fs, &[("a", 0), ("b", 1)]),
        key(vs, fs, &[("b", 1), ("a", 0)]),
        "binding order does not matter"
    );
    let mut options_hash = gpusvc_program_cache_sha1::default();
    // SAFETY: live buffers of the given lengths.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_shader_hash(
                GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
                c"a".as_ptr(),
                1,
                b"flags".as_ptr(),
                5,
                &mut options_hash
            ),
            OK
        );
    }
    assert_ne!(options_hash, vs, "compile options are part of the hash");
}

#[test]
fn save_then_load_and_peek_copy_everything_out() {
    let cache = new_cache(1 << 20);
    let vs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "vs");
    let fs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, "fs");
    let k = key(vs, fs, &[]);
    let name = CString::new("a_position").unwrap();
    let mapped = CString::new("_ua_position").unwrap();
    let attrs = [gpusvc_program_cache_variable_info {
        name: name.as_ptr(),
        mapped_name: mapped.as_ptr(),
        gl_type: 0x8B50,
        array_size: 1,
        has_location: true,
        location: 3,
    }];
    let binary = b"0123456789".to_vec();
    let mut d = desc(vs, fs, &binary);
    d.vertex.attributes = attrs.as_ptr();
    d.vertex.attribute_count = 1;
    assert_eq!(save(cache, k, &d), OK);
    drop((name, mapped, binary));

    let mut missing = ptr::null_mut();
    let other = key(fs, vs, &[]);
    // SAFETY: live locals and handles.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_load(cache, &other, false, 0, &mut missing),
            gpusvc_result::GPUSVC_PROGRAM_CACHE_NOT_FOUND
        );
        assert!(missing.is_null());

        let mut peeked = ptr::null_mut();
        assert_eq!(gpusvc_program_cache_peek(cache, &k, &mut peeked), OK);
        assert_eq!(gpusvc_program_cache_entry_free(peeked), OK);
        let s = stats(cache);
        assert_eq!(
            (s.counters.hits, s.counters.misses),
            (0, 1),
            "peek counts nothing"
        );

        let mut p = ptr::null_mut();
        assert_eq!(gpusvc_program_cache_load(cache, &k, true, 7, &mut p), OK);
        let (mut v, mut f) = (
            gpusvc_program_cache_sha1::default(),
            gpusvc_program_cache_sha1::default(),
        );
        assert_eq!(
            gpusvc_program_cache_entry_shader_hashes(p, &mut v, &mut f),
            OK
        );
        assert_eq!((v, f), (vs, fs));

        let (mut format, mut len) = (0u32, 0usize);
        assert_eq!(
            gpusvc_program_cache_entry_binary(p, &mut format, ptr::null_mut(), 0, &mut len),
            OK
        );
        assert_eq!((format, len), (0x1234, 10));
        let mut small = [0xAAu8; 4];
        let mut wrote = 77usize;
        assert_eq!(
            gpusvc_program_cache_entry_binary(p, &mut format, small.as_mut_ptr(), 4, &mut wrote),
            gpusvc_result::GPUSVC_INSUFFICIENT_SIZE
        );
        assert_eq!((small, wrote), ([0xAA; 4], 77));
        let mut bytes = vec![0u8; len];
        assert_eq!(
            gpusvc_program_cache_entry_binary(p, &mut format, bytes.as_mut_ptr(), len, &mut len),
            OK
        );
        assert_eq!(bytes, b"0123456789");

        let mut n = 0;
        assert_eq!(
            gpusvc_program_cache_entry_variable_count(
                p,
                GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
                GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE,
                &mut n
            ),
            OK
        );
        assert_eq!(n, 1);
        let mut info = attrs[0];
        info.name = ptr::null();
        assert_eq!(
            gpusvc_program_cache_entry_variable(
                p,
                GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
                GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE,
                0,
                &mut info
            ),
            OK
        );
        assert_eq!(CStr::from_ptr(info.name).to_str().unwrap(), "a_position");
        assert_eq!(
            CStr::from_ptr(info.mapped_name).to_str().unwrap(),
            "_ua_position"
        );
        assert_eq!(
            (info.gl_type, info.has_location, info.location),
            (0x8B50, true, 3)
        );
        assert_eq!(
            gpusvc_program_cache_entry_variable(
                p,
                GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
                GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE,
                1,
                &mut info
            ),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_entry_variable_count(
                p,
                GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE,
                GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE,
                &mut n
            ),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        // The copy outlives the cache's entry and the cache itself.
        gpusvc_program_cache_clear(cache);
        free_cache(cache);
        assert_eq!(
            gpusvc_program_cache_entry_shader_hashes(p, &mut v, &mut f),
            OK
        );
        assert_eq!(gpusvc_program_cache_entry_free(p), OK);
    }
}

#[test]
fn refused_saves_have_their_own_codes_and_change_nothing() {
    let cache = new_cache(256);
    let vs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "vs");
    let fs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, "fs");
    let k = key(vs, fs, &[]);
    assert_eq!(
        save(cache, k, &desc(vs, fs, b"")),
        gpusvc_result::GPUSVC_PROGRAM_CACHE_EMPTY_BINARY
    );
    assert_eq!(
        save(cache, k, &desc(vs, fs, &[1u8; 4096])),
        gpusvc_result::GPUSVC_PROGRAM_CACHE_OVER_BUDGET
    );
    assert!(last_detail().contains("budget"), "{}", last_detail());
    let mut absurd = desc(vs, fs, b"x");
    absurd.binary_len = usize::MAX;
    assert_eq!(
        save(cache, k, &absurd),
        gpusvc_result::GPUSVC_INVALID_ARGUMENT
    );
    let mut null_binary = desc(vs, fs, b"x");
    null_binary.binary = ptr::null();
    assert_eq!(
        save(cache, k, &null_binary),
        gpusvc_result::GPUSVC_NULL_ARGUMENT
    );
    let bad_name = [0xC3u8, 0x28, 0];
    let attrs = [gpusvc_program_cache_variable_info {
        name: bad_name.as_ptr().cast(),
        mapped_name: bad_name.as_ptr().cast(),
        gl_type: 0,
        array_size: 1,
        has_location: false,
        location: 0,
    }];
    let mut utf8 = desc(vs, fs, b"x");
    utf8.fragment.uniforms = attrs.as_ptr();
    utf8.fragment.uniform_count = 1;
    assert_eq!(save(cache, k, &utf8), gpusvc_result::GPUSVC_INVALID_UTF8);

    let mut freed = 0;
    // SAFETY: live locals.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_set_memory_pressure(
                cache,
                GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_CRITICAL,
                &mut freed
            ),
            OK
        );
        assert_eq!(
            save(cache, k, &desc(vs, fs, b"x")),
            gpusvc_result::GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE
        );
        assert_eq!(
            gpusvc_program_cache_set_memory_pressure(cache, 3, &mut freed),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_set_memory_pressure(
                cache,
                GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_NONE,
                &mut freed
            ),
            OK
        );
    }
    assert_eq!(save(cache, k, &desc(vs, fs, b"x")), OK);
    let s = stats(cache);
    assert_eq!(
        (s.entries, s.counters.saves, s.counters.rejected_saves),
        (1, 1, 3)
    );
    free_cache(cache);
}

#[test]
fn eviction_order_trim_pressure_and_clear() {
    let cache = new_cache(1 << 20);
    let keys: Vec<gpusvc_program_cache_sha1> = (0..4)
        .map(|i| {
            let vs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, &format!("vs{i}"));
            let fs = hash(
                GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
                &format!("fs{i}"),
            );
            let k = key(vs, fs, &[]);
            assert_eq!(save(cache, k, &desc(vs, fs, &[i as u8; 100])), OK);
            k
        })
        .collect();
    assert_eq!(eviction_order(cache), keys);
    let mut p = ptr::null_mut();
    let mut removed = false;
    let mut freed = 0;
    // SAFETY: live locals and handles.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_load(cache, &keys[0], false, 0, &mut p),
            OK
        );
        assert_eq!(gpusvc_program_cache_entry_free(p), OK);
        assert_eq!(eviction_order(cache), [keys[1], keys[2], keys[3], keys[0]]);

        let mut one = [gpusvc_program_cache_sha1::default(); 1];
        let mut n = 42;
        assert_eq!(
            gpusvc_program_cache_eviction_order(cache, one.as_mut_ptr(), 1, &mut n),
            gpusvc_result::GPUSVC_INSUFFICIENT_SIZE
        );
        assert_eq!(n, 42);

        assert_eq!(
            gpusvc_program_cache_evict(cache, &keys[2], &mut removed),
            OK
        );
        assert!(removed);
        assert_eq!(
            gpusvc_program_cache_evict(cache, &keys[2], &mut removed),
            OK
        );
        assert!(!removed);

        let size = stats(cache).size_bytes;
        assert_eq!(gpusvc_program_cache_trim(cache, size - 1, &mut freed), OK);
        assert!(freed > 0);
        assert_eq!(eviction_order(cache), [keys[3], keys[0]]);

        assert_eq!(
            gpusvc_program_cache_set_memory_pressure(
                cache,
                GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_MODERATE,
                &mut freed
            ),
            OK
        );
        assert_eq!(freed, 0, "two small entries are under a quarter of 1 MiB");
        assert_eq!(gpusvc_program_cache_clear(cache), OK);
    }
    assert!(eviction_order(cache).is_empty());
    let s = stats(cache);
    assert_eq!((s.entries, s.size_bytes), (0, 0));
    assert_eq!(
        s.counters.evictions, 2,
        "evict + trim; clear is not an eviction"
    );
    free_cache(cache);
}

fn cache_with(policy: u32, budget: usize) -> *mut gpusvc_program_cache {
    let c = gpusvc_program_cache_config {
        struct_size: size_of::<gpusvc_program_cache_config>(),
        policy,
        ..cache_config(budget)
    };
    let mut cache = ptr::null_mut();
    // SAFETY: live config and out slot.
    let r = unsafe { gpusvc_program_cache_new(&c, None, ptr::null_mut(), &mut cache) };
    assert_eq!(r, OK, "{}", last_detail());
    cache
}

/// Looks `k` up; true on a hit (the copy is freed).
fn hit(cache: *mut gpusvc_program_cache, k: gpusvc_program_cache_sha1) -> bool {
    let mut p = ptr::null_mut();
    // SAFETY: live handle, key and out slot.
    match unsafe { gpusvc_program_cache_load(cache, &k, false, 0, &mut p) } {
        gpusvc_result::GPUSVC_OK => {
            // SAFETY: a copy from gpusvc_program_cache_load.
            assert_eq!(unsafe { gpusvc_program_cache_entry_free(p) }, OK);
            true
        }
        r => {
            assert_eq!(r, gpusvc_result::GPUSVC_PROGRAM_CACHE_NOT_FOUND);
            false
        }
    }
}

#[test]
fn every_eviction_policy_is_accepted_and_the_default_keeps_hitting_a_cycle_over_budget() {
    let policies = [
        GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_LRU,
        GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_PAGE_LRU_MRU,
        GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_SLRU,
        GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_S3_FIFO,
        GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_W_TINYLFU,
    ];
    // 60 programs of about 1.1 KB asked for in a fixed cycle, 24 of them fit: LRU evicts each
    // one just before it comes round again.
    let budget = 24 * 1200;
    let programs: Vec<(
        gpusvc_program_cache_sha1,
        gpusvc_program_cache_sha1,
        gpusvc_program_cache_sha1,
        Vec<u8>,
    )> = (0..60)
        .map(|i| {
            let vs = hash(
                GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
                &format!("cycle vs {i}"),
            );
            let fs = hash(
                GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
                &format!("cycle fs {i}"),
            );
            (key(vs, fs, &[]), vs, fs, vec![i as u8; 1000 + 7 * i])
        })
        .collect();
    let later_hits = |policy| {
        let cache = cache_with(policy, budget);
        let mut back = cache_config(0);
        // SAFETY: live handle and out slot.
        let r = unsafe { gpusvc_program_cache_current_config(cache, &mut back) };
        assert_eq!(r, OK);
        assert_eq!(back.policy, policy);
        let mut hits = 0;
        for pass in 0..5 {
            for (k, vs, fs, binary) in &programs {
                if hit(cache, *k) {
                    hits += usize::from(pass > 0);
                } else {
                    assert_eq!(save(cache, *k, &desc(*vs, *fs, binary)), OK);
                }
                assert!(stats(cache).size_bytes <= budget);
            }
        }
        assert_eq!(eviction_order(cache).len(), stats(cache).entries);
        free_cache(cache);
        hits
    };
    let by_policy: Vec<usize> = policies.iter().map(|&p| later_hits(p)).collect();
    assert_eq!(by_policy[0], 0, "LRU: {by_policy:?}");
    // The default profile's policy keeps a stable part of the cycle: about 24 / 60 of passes
    // 2 to 5.
    assert!(by_policy[4] >= 60 * 4 / 4, "W-TinyLFU: {by_policy:?}");
    assert_eq!(
        cache_config(budget).policy,
        GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_W_TINYLFU
    );
}

#[test]
fn moderate_pressure_keeps_a_quarter_of_the_budget_and_critical_skips_the_binary_read() {
    let budget = 16 * 1200;
    let cache = new_cache(budget);
    let vs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "pressure vs");
    let mut freed = 0;
    // SAFETY: live handle and out slot.
    let r = unsafe {
        gpusvc_program_cache_set_memory_pressure(
            cache,
            GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_MODERATE,
            &mut freed,
        )
    };
    assert_eq!(r, OK);
    for i in 0..20 {
        let fs = hash(
            GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
            &format!("pressure fs {i}"),
        );
        assert_eq!(save(cache, key(vs, fs, &[]), &desc(vs, fs, &[1; 1000])), OK);
        assert!(stats(cache).size_bytes <= budget / 4);
    }
    // An entry over a quarter of the budget is refused while the pressure lasts.
    let fs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, "big");
    let big = vec![2; budget / 4 + 1];
    assert_eq!(
        save(cache, key(vs, fs, &[]), &desc(vs, fs, &big)),
        gpusvc_result::GPUSVC_PROGRAM_CACHE_OVER_BUDGET
    );
    // SAFETY: live handle and out slot.
    let r = unsafe {
        gpusvc_program_cache_set_memory_pressure(
            cache,
            GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_NONE,
            &mut freed,
        )
    };
    assert_eq!(r, OK);
    assert_eq!(save(cache, key(vs, fs, &[]), &desc(vs, fs, &big)), OK);

    // Critical: a link through a host manager never reads the binary.
    let state = RefCell::new(FakeGl::default());
    let m = host_manager(&state, cache);
    // SAFETY: live handle and out slot.
    let r = unsafe {
        gpusvc_program_cache_set_memory_pressure(
            cache,
            GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_CRITICAL,
            &mut freed,
        )
    };
    assert_eq!(r, OK);
    let rejected = stats(cache).counters.rejected_saves;
    let v = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "vertex source");
    let f = shader(
        m,
        GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
        "fragment source",
    );
    compile(m, v);
    compile(m, f);
    let p = link(m, v, f).unwrap();
    assert_eq!(origin(p), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    assert_eq!(state.borrow().binaries_read, 0);
    assert_eq!(stats(cache).counters.rejected_saves, rejected + 1);
    assert_eq!(stats(cache).entries, 0);
    free_all(&[v, f], &[p]);
    // SAFETY: live handle.
    assert_eq!(unsafe { gpusvc_program_manager_free(m) }, OK);
    free_cache(cache);
}

type Samples = Mutex<Vec<(String, f64)>>;

unsafe extern "C" fn record_sample(name: *const c_char, value: f64, user_data: *mut c_void) {
    // SAFETY: user_data is the `Samples` the test passed; the name is NUL-terminated.
    let (samples, name) = unsafe { (&*(user_data as *const Samples), CStr::from_ptr(name)) };
    samples
        .lock()
        .unwrap()
        .push((name.to_string_lossy().into_owned(), value));
}

/// A 1 MiB cache whose histogram callback records every sample into `samples`, which must
/// outlive every handle made over the cache.
fn cache_recording_into(samples: &Samples) -> *mut gpusvc_program_cache {
    let mut cache = ptr::null_mut();
    // SAFETY: the caller keeps `samples` alive past the cache's handles; live out slot.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_new(
                &cache_config(1 << 20),
                Some(record_sample),
                samples as *const Samples as *mut c_void,
                &mut cache
            ),
            OK
        );
    }
    cache
}

#[test]
fn histograms_reach_the_callback_and_the_summaries() {
    let samples: Samples = Mutex::new(Vec::new());
    let cache = cache_recording_into(&samples);
    let vs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "vs");
    let fs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, "fs");
    assert_eq!(save(cache, key(vs, fs, &[]), &desc(vs, fs, &[9; 300])), OK);
    let got = samples.lock().unwrap().clone();
    assert!(
        got.contains(&("GPU.ProgramCache.ProgramBinarySizeBytes".into(), 300.0)),
        "{got:?}"
    );
    let mut names = Vec::new();
    // SAFETY: live locals; names are static strings.
    unsafe {
        let mut name: *const c_char = ptr::null();
        let mut i = 0;
        while gpusvc_program_cache_histogram_name(i, &mut name) == OK {
            names.push(CStr::from_ptr(name).to_str().unwrap().to_owned());
            i += 1;
        }
        assert_eq!(names.len(), 7);
        let mut summary = gpusvc_program_cache_histogram_summary::default();
        let size = CString::new("GPU.ProgramCache.ProgramBinarySizeBytes").unwrap();
        assert_eq!(
            gpusvc_program_cache_histogram(cache, size.as_ptr(), &mut summary),
            OK
        );
        assert_eq!((summary.count, summary.max), (1, 300.0));
        let hit = CString::new("GPU.ProgramCache.BinaryCacheHitTimeUs").unwrap();
        assert_eq!(
            gpusvc_program_cache_histogram(cache, hit.as_ptr(), &mut summary),
            OK
        );
        assert_eq!(summary.count, 0);
        assert_eq!(
            gpusvc_program_cache_histogram(cache, c"nope".as_ptr(), &mut summary),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
    }
    free_cache(cache);
}

/// The review's scenario: a program manager keeps the cache alive after
/// `gpusvc_program_cache_free`, and linking through it records histogram samples. None may reach
/// the host's callback once the free has returned (the host may have freed its user data).
#[test]
fn no_histogram_sample_reaches_the_host_after_the_cache_is_freed() {
    let samples: Samples = Mutex::new(Vec::new());
    let cache = cache_recording_into(&samples);
    let state = RefCell::new(FakeGl::default());
    let m = host_manager(&state, cache);
    let pair = |vs: &str, fs: &str, outcome| {
        let (v, f) = compiled_pair(m, vs, fs, outcome);
        let p = link(m, v, f).unwrap_or_else(|r| panic!("{r:?}: {}", last_detail()));
        free_all(&[v, f], &[]);
        p
    };
    let cold = pair("vs", "fs", GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED);
    assert!(
        !samples.lock().unwrap().is_empty(),
        "the callback is called while the cache handle is live"
    );
    free_cache(cache);
    let before = samples.lock().unwrap().len();
    // A cache hit and a miss that saves, both through the cache the manager keeps alive.
    let hit = pair("vs", "fs", GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED);
    assert_eq!(origin(hit), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
    let miss = pair(
        "vs2",
        "fs2",
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED,
    );
    assert_eq!(origin(miss), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    free_all(&[], &[cold, hit, miss]);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_manager_free(m) }, OK);
    let after = samples.lock().unwrap()[before..].to_vec();
    assert!(after.is_empty(), "called after the free: {after:?}");
}

#[test]
fn bad_sources_names_and_sizes_return_codes() {
    let mut out = gpusvc_program_cache_sha1 { bytes: [7; 20] };
    let bad = [b'x', 0xFF, b'y'];
    // `bad` is not NUL-terminated: as a C string (an identity) it would be read past its end.
    let bad_c = [b'x', 0xFF, 0];
    // SAFETY: each pointer is NULL, or a live buffer at least as long as the length, except the
    // absurd length, which the library must refuse before reading.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_shader_hash(0, ptr::null(), 4, ptr::null(), 0, &mut out),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_shader_hash(0, c"".as_ptr(), 0, ptr::null(), 0, &mut out),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert!(last_detail().contains("empty"), "{}", last_detail());
        assert_eq!(
            gpusvc_program_cache_shader_hash(0, bad.as_ptr().cast(), 3, ptr::null(), 0, &mut out),
            gpusvc_result::GPUSVC_INVALID_UTF8
        );
        assert_eq!(
            gpusvc_program_cache_shader_hash(
                0,
                c"x".as_ptr(),
                usize::MAX,
                ptr::null(),
                0,
                &mut out
            ),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert!(last_detail().contains("absurd"), "{}", last_detail());
        assert_eq!(
            gpusvc_program_cache_shader_hash(9, c"x".as_ptr(), 1, ptr::null(), 0, &mut out),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_cache_shader_hash(0, c"x".as_ptr(), 1, ptr::null(), 3, &mut out),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        let backend_hash = |source: *const c_char, len, identity: *const c_char, out| {
            gpusvc_program_cache_backend_shader_hash(0, source, len, ptr::null(), 0, identity, out)
        };
        assert_eq!(
            backend_hash(c"x".as_ptr(), 1, ptr::null(), &mut out),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            backend_hash(c"x".as_ptr(), 1, bad_c.as_ptr().cast(), &mut out),
            gpusvc_result::GPUSVC_INVALID_UTF8
        );
        assert_eq!(
            backend_hash(ptr::null(), 1, c"id".as_ptr(), &mut out),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            backend_hash(c"x".as_ptr(), 1, c"id".as_ptr(), ptr::null_mut()),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(out.bytes, [7; 20], "nothing written on failure");
        // The identity is in the hash.
        let (mut a, mut b) = (out, out);
        assert_eq!(backend_hash(c"x".as_ptr(), 1, c"core".as_ptr(), &mut a), OK);
        assert_eq!(
            backend_hash(c"x".as_ptr(), 1, c"compat".as_ptr(), &mut b),
            OK
        );
        assert_ne!(a.bytes, b.bytes);
        out = gpusvc_program_cache_sha1 { bytes: [7; 20] };

        let input = gpusvc_program_cache_program_key_input {
            struct_size: size_of::<gpusvc_program_cache_program_key_input>(),
            vertex: out,
            fragment: out,
            backend_identity: bad_c.as_ptr().cast(),
            link: no_link_options(),
            other_stages: ptr::null(),
            other_stage_count: 0,
            separable: false,
            reserved: [0; 7],
        };
        assert_eq!(
            gpusvc_program_cache_program_key(&input, &mut out),
            gpusvc_result::GPUSVC_INVALID_UTF8
        );
        let input = gpusvc_program_cache_program_key_input {
            struct_size: size_of::<gpusvc_program_cache_program_key_input>(),
            backend_identity: c"id".as_ptr(),
            link: gpusvc_program_cache_link_options {
                transform_feedback_mode: 5,
                ..no_link_options()
            },
            ..input
        };
        assert_eq!(
            gpusvc_program_cache_program_key(&input, &mut out),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
    }
}

#[test]
fn destroyed_foreign_and_null_handles_are_errors_not_crashes() {
    let cache = new_cache(1 << 20);
    let vs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "vs");
    let fs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, "fs");
    let k = key(vs, fs, &[]);
    assert_eq!(save(cache, k, &desc(vs, fs, b"bin")), OK);
    let mut p = ptr::null_mut();
    let mut status = 77;
    // SAFETY: every handle is live, freed, foreign or made up; the library must look each up
    // before any use.
    unsafe {
        assert_eq!(gpusvc_program_cache_peek(cache, &k, &mut p), OK);
        // A handle of another kind.
        assert_eq!(
            gpusvc_program_cache_link_status(p.cast(), &k, &mut status),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        assert!(
            last_detail().contains("gpusvc_program_cache_entry"),
            "{}",
            last_detail()
        );
        assert_eq!(gpusvc_program_cache_entry_free(p), OK);
        assert_eq!(
            gpusvc_program_cache_entry_free(p),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        free_cache(cache);
        assert_eq!(
            gpusvc_program_cache_link_status(cache, &k, &mut status),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        assert_eq!(status, 77);
        assert_eq!(
            gpusvc_program_cache_free(cache),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        assert_eq!(
            gpusvc_program_cache_clear(0xdead0 as *mut gpusvc_program_cache),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        assert_eq!(gpusvc_program_cache_free(ptr::null_mut()), OK);
        assert_eq!(gpusvc_program_manager_shader_free(ptr::null_mut()), OK);
        assert_eq!(gpusvc_program_manager_free(ptr::null_mut()), OK);
        assert_eq!(
            gpusvc_program_manager_linked_program_free(ptr::null_mut()),
            OK
        );
        assert_eq!(gpusvc_program_cache_entry_free(ptr::null_mut()), OK);
        assert_eq!(
            gpusvc_program_cache_link_status(ptr::null(), &k, &mut status),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
    }
}

#[test]
fn a_cache_is_shared_between_threads() {
    let cache = new_cache(1 << 20) as usize;
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let cache = cache as *mut gpusvc_program_cache;
                for i in 0..20 {
                    let vs = hash(
                        GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
                        &format!("vs{t}.{i}"),
                    );
                    let fs = hash(GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, "fs");
                    assert_eq!(save(cache, key(vs, fs, &[]), &desc(vs, fs, b"bin")), OK);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(stats(cache as *mut _).entries, 80);
    free_cache(cache as *mut _);
}

// ---- the flow over host callbacks: a recording fake GL ----

#[derive(Default)]
struct FakeGl {
    next_id: u64,
    shaders: HashMap<u64, String>,
    programs: HashMap<u64, String>,
    compiles: Vec<String>,
    links: u32,
    binaries_read: u32,
    binaries_loaded: Vec<Vec<u8>>,
    refuse_binaries: bool,
    deleted_shaders: Vec<u64>,
    deleted_programs: Vec<u64>,
    /// A sink kept past its callback, to use it afterwards.
    kept_sink: Option<usize>,
    /// (manager, shader) to re-enter with from the compile callback.
    reenter: Option<(usize, usize)>,
    reentry_result: Option<gpusvc_result>,
}

fn fake(user_data: *mut c_void) -> &'static RefCell<FakeGl> {
    // SAFETY: the tests pass a `RefCell<FakeGl>` that outlives every manager using it.
    unsafe { &*(user_data as *const RefCell<FakeGl>) }
}

unsafe extern "C" fn fake_compile(
    user_data: *mut c_void,
    _stage: u32,
    source: *const c_char,
    len: usize,
    out: *mut u64,
    log: *mut gpusvc_program_manager_host_sink,
) -> bool {
    // SAFETY: the library passes `len` bytes followed by a NUL.
    let text = unsafe { CStr::from_ptr(source) }
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(text.len(), len);
    let reenter = {
        let mut gl = fake(user_data).borrow_mut();
        gl.compiles.push(text.clone());
        gl.kept_sink = Some(log as usize);
        gl.reenter.take()
    };
    if let Some((m, s)) = reenter {
        let mut outcome = 0;
        // SAFETY: live handles, used re-entrantly on purpose.
        let r = unsafe {
            gpusvc_program_manager_compile(
                m as *const gpusvc_program_manager,
                s as *const gpusvc_program_manager_shader,
                &mut outcome,
            )
        };
        fake(user_data).borrow_mut().reentry_result = Some(r);
    }
    if text.contains("error") {
        let msg = "0:1: error: syntax";
        // SAFETY: the sink given to this callback; a live buffer.
        unsafe { gpusvc_program_manager_host_sink_write_text(log, msg.as_ptr().cast(), msg.len()) };
        return false;
    }
    let mut gl = fake(user_data).borrow_mut();
    gl.next_id += 1;
    let id = gl.next_id;
    gl.shaders.insert(id, text);
    // SAFETY: a live out slot from the library.
    unsafe { *out = id };
    true
}

unsafe extern "C" fn fake_link(
    user_data: *mut c_void,
    vs: u64,
    fs: u64,
    options: *const gpusvc_program_cache_link_options,
    out: *mut u64,
    _log: *mut gpusvc_program_manager_host_sink,
) -> bool {
    let mut gl = fake(user_data).borrow_mut();
    // SAFETY: the library passes live options.
    let bindings = unsafe { (*options).attribute_binding_count };
    let text = format!("{}\n--\n{}\n--{bindings}", gl.shaders[&vs], gl.shaders[&fs]);
    gl.links += 1;
    gl.next_id += 1;
    let id = gl.next_id;
    gl.programs.insert(id, text);
    // SAFETY: a live out slot.
    unsafe { *out = id };
    true
}

unsafe extern "C" fn fake_binary(
    user_data: *mut c_void,
    program: u64,
    format: *mut u32,
    out: *mut gpusvc_program_manager_host_sink,
) -> bool {
    let mut gl = fake(user_data).borrow_mut();
    gl.binaries_read += 1;
    let bytes = format!("BIN:{}", gl.programs[&program]);
    // SAFETY: live out slot and sink.
    unsafe {
        *format = 0xF00D;
        gpusvc_program_manager_host_sink_write_bytes(out, bytes.as_ptr(), bytes.len());
    }
    true
}

unsafe extern "C" fn fake_load(
    user_data: *mut c_void,
    format: u32,
    bytes: *const u8,
    len: usize,
    out: *mut u64,
    _log: *mut gpusvc_program_manager_host_sink,
) -> bool {
    let mut gl = fake(user_data).borrow_mut();
    // SAFETY: the library passes `len` live bytes.
    let bytes = unsafe { std::slice::from_raw_parts(bytes, len) }.to_vec();
    gl.binaries_loaded.push(bytes.clone());
    if gl.refuse_binaries || format != 0xF00D {
        return false;
    }
    gl.next_id += 1;
    let id = gl.next_id;
    let text = String::from_utf8(bytes[4..].to_vec()).unwrap();
    gl.programs.insert(id, text);
    // SAFETY: a live out slot.
    unsafe { *out = id };
    true
}

unsafe extern "C" fn fake_attributes(
    _: *mut c_void,
    _: u64,
    out: *mut gpusvc_program_manager_host_sink,
) {
    let v = gpusvc_program_manager_active_variable {
        struct_size: size_of::<gpusvc_program_manager_active_variable>(),
        name: c"a_position".as_ptr(),
        gl_type: 0x8B50,
        size: 1,
        has_location: true,
        location: 0,
        location_index: -1,
        reserved: 0,
    };
    // SAFETY: the sink of this callback and a live variable.
    unsafe { gpusvc_program_manager_host_sink_push_variable(out, &v) };
}

unsafe extern "C" fn fake_uniforms(
    _: *mut c_void,
    _: u64,
    out: *mut gpusvc_program_manager_host_sink,
) {
    let bad = [0xFFu8, 0];
    let v = gpusvc_program_manager_active_variable {
        struct_size: size_of::<gpusvc_program_manager_active_variable>(),
        name: bad.as_ptr().cast(),
        gl_type: 0x8B52,
        size: 1,
        has_location: true,
        location: 1,
        location_index: -1,
        reserved: 0,
    };
    // SAFETY: the sink of this callback and a live variable; a non-UTF-8 name is refused.
    let r = unsafe { gpusvc_program_manager_host_sink_push_variable(out, &v) };
    assert_eq!(r, gpusvc_result::GPUSVC_INVALID_UTF8);
    let v = gpusvc_program_manager_active_variable {
        struct_size: size_of::<gpusvc_program_manager_active_variable>(),
        name: c"u_tint".as_ptr(),
        ..v
    };
    // SAFETY: as above.
    unsafe { gpusvc_program_manager_host_sink_push_variable(out, &v) };
}

unsafe extern "C" fn fake_delete_shader(user_data: *mut c_void, id: u64) {
    fake(user_data).borrow_mut().deleted_shaders.push(id);
}

unsafe extern "C" fn fake_delete_program(user_data: *mut c_void, id: u64) {
    fake(user_data).borrow_mut().deleted_programs.push(id);
}

fn host_gl(state: &RefCell<FakeGl>) -> gpusvc_program_manager_host_gl {
    gpusvc_program_manager_host_gl {
        struct_size: size_of::<gpusvc_program_manager_host_gl>(),
        user_data: state as *const RefCell<FakeGl> as *mut c_void,
        compile: Some(fake_compile),
        link: Some(fake_link),
        program_binary: Some(fake_binary),
        load_binary: Some(fake_load),
        active_attributes: Some(fake_attributes),
        active_uniforms: Some(fake_uniforms),
        delete_shader: Some(fake_delete_shader),
        delete_program: Some(fake_delete_program),
        link_stages: None,
        start_compile: None,
        compile_done: None,
        finish_compile: None,
        start_link: None,
        link_done: None,
        finish_link: None,
        program_interface: None,
    }
}

fn host_manager(
    state: &RefCell<FakeGl>,
    cache: *mut gpusvc_program_cache,
) -> *mut gpusvc_program_manager {
    let mut m = ptr::null_mut();
    // SAFETY: live struct, cache and out slot; the fake outlives the manager.
    let r = unsafe {
        gpusvc_program_manager_new_host(&host_gl(state), cache, c"fake".as_ptr(), &mut m)
    };
    assert_eq!(r, OK, "{}", last_detail());
    m
}

fn shader(
    m: *mut gpusvc_program_manager,
    stage: u32,
    source: &str,
) -> *mut gpusvc_program_manager_shader {
    let mut s = ptr::null_mut();
    // SAFETY: live manager, buffer and out slot.
    let r = unsafe {
        gpusvc_program_manager_shader_new(m, stage, source.as_ptr().cast(), source.len(), &mut s)
    };
    assert_eq!(r, OK, "{}", last_detail());
    s
}

fn compile(m: *mut gpusvc_program_manager, s: *mut gpusvc_program_manager_shader) -> u32 {
    let mut outcome = 99;
    // SAFETY: live handles and out slot.
    let r = unsafe { gpusvc_program_manager_compile(m, s, &mut outcome) };
    assert_eq!(r, OK, "{}", last_detail());
    outcome
}

/// A vertex shader of `vs` and a fragment shader of `fs`, each compiled with the outcome
/// `expected` (`GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_*`).
#[track_caller]
fn compiled_pair(
    m: *mut gpusvc_program_manager,
    vs: &str,
    fs: &str,
    expected: u32,
) -> (
    *mut gpusvc_program_manager_shader,
    *mut gpusvc_program_manager_shader,
) {
    let v = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, vs);
    let f = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, fs);
    assert_eq!(compile(m, v), expected);
    assert_eq!(compile(m, f), expected);
    (v, f)
}

fn link(
    m: *mut gpusvc_program_manager,
    vs: *mut gpusvc_program_manager_shader,
    fs: *mut gpusvc_program_manager_shader,
) -> Result<*mut gpusvc_program_manager_linked_program, gpusvc_result> {
    let mut p = ptr::null_mut();
    // SAFETY: live handles and out slot; NULL options are allowed.
    let r = unsafe { gpusvc_program_manager_link(m, vs, fs, ptr::null(), &mut p) };
    if r == OK { Ok(p) } else { Err(r) }
}

fn origin(p: *mut gpusvc_program_manager_linked_program) -> u32 {
    let mut o = 99;
    // SAFETY: live handle and out slot.
    let r = unsafe { gpusvc_program_manager_linked_program_origin(p, &mut o) };
    assert_eq!(r, OK);
    o
}

fn variables(
    p: *mut gpusvc_program_manager_linked_program,
    kind: u32,
) -> Vec<(String, u32, i32, Option<i32>)> {
    let mut n = 0;
    // SAFETY: live handle and out slots; names are NUL-terminated strings owned by the handle.
    unsafe {
        assert_eq!(
            gpusvc_program_manager_linked_program_variable_count(p, kind, &mut n),
            OK
        );
        (0..n)
            .map(|i| {
                let mut v = gpusvc_program_manager_active_variable {
                    struct_size: size_of::<gpusvc_program_manager_active_variable>(),
                    name: ptr::null(),
                    gl_type: 0,
                    size: 0,
                    has_location: false,
                    location: 0,
                    location_index: 0,
                    reserved: 0,
                };
                assert_eq!(
                    gpusvc_program_manager_linked_program_variable(p, kind, i, &mut v),
                    OK
                );
                (
                    CStr::from_ptr(v.name).to_str().unwrap().to_owned(),
                    v.gl_type,
                    v.size,
                    v.has_location.then_some(v.location),
                )
            })
            .collect()
    }
}

fn free_all(
    shaders: &[*mut gpusvc_program_manager_shader],
    programs: &[*mut gpusvc_program_manager_linked_program],
) {
    // SAFETY: live handles.
    unsafe {
        for &s in shaders {
            assert_eq!(gpusvc_program_manager_shader_free(s), OK);
        }
        for &p in programs {
            assert_eq!(gpusvc_program_manager_linked_program_free(p), OK);
        }
    }
}

#[test]
fn host_flow_miss_then_hit_then_refused_binary() {
    let state = RefCell::new(FakeGl::default());
    let cache = new_cache(1 << 20);
    let m = host_manager(&state, cache);

    let (vs, fs) = compiled_pair(
        m,
        "vertex source",
        "fragment source",
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED,
    );
    let p1 = link(m, vs, fs).unwrap();
    assert_eq!(origin(p1), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    let attributes = variables(p1, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE);
    let uniforms = variables(p1, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM);
    assert_eq!(attributes, [("a_position".into(), 0x8B50, 1, Some(0))]);
    assert_eq!(uniforms, [("u_tint".into(), 0x8B52, 1, Some(1))]);
    {
        let gl = state.borrow();
        assert_eq!((gl.compiles.len(), gl.links, gl.binaries_read), (2, 1, 1));
        assert!(gl.binaries_loaded.is_empty());
    }

    // A sink is only valid during its callback.
    let kept = state.borrow().kept_sink.unwrap() as *mut gpusvc_program_manager_host_sink;
    // SAFETY: a stale sink handle, which the library must look up and refuse.
    let r = unsafe { gpusvc_program_manager_host_sink_write_text(kept, c"x".as_ptr(), 1) };
    assert_eq!(r, gpusvc_result::GPUSVC_INVALID_HANDLE);

    // Same sources again: deferred compiles, a cache hit through load_binary.
    let (vs2, fs2) = compiled_pair(
        m,
        "vertex source",
        "fragment source",
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED,
    );
    let p2 = link(m, vs2, fs2).unwrap();
    assert_eq!(origin(p2), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
    assert_eq!(
        variables(p2, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE),
        attributes
    );
    assert_eq!(
        variables(p2, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM),
        uniforms
    );
    {
        let gl = state.borrow();
        assert_eq!((gl.compiles.len(), gl.links, gl.binaries_read), (2, 1, 1));
        assert_eq!(gl.binaries_loaded.len(), 1);
        assert!(gl.binaries_loaded[0].starts_with(b"BIN:vertex source"));
    }

    // The driver refuses the binary: evicted, compiled and linked from source.
    state.borrow_mut().refuse_binaries = true;
    let (vs3, fs3) = compiled_pair(
        m,
        "vertex source",
        "fragment source",
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED,
    );
    let p3 = link(m, vs3, fs3).unwrap();
    assert_eq!(
        origin(p3),
        GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_RELINKED_AFTER_REJECTION
    );
    assert_eq!(
        variables(p3, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE),
        attributes
    );
    {
        let gl = state.borrow();
        assert_eq!((gl.compiles.len(), gl.links), (4, 2));
    }
    assert_eq!(stats(cache).counters.driver_rejections, 1);

    let mut object = 0;
    // SAFETY: live handle and out slot.
    let r = unsafe { gpusvc_program_manager_linked_program_object(p3, &mut object) };
    assert_eq!(r, OK);
    free_all(&[vs, fs, vs2, fs2, vs3, fs3], &[p1, p2, p3]);
    // SAFETY: live handles.
    unsafe {
        assert_eq!(gpusvc_program_manager_free(m), OK);
    }
    free_cache(cache);
    let gl = state.borrow();
    assert!(gl.deleted_programs.contains(&object));
    assert_eq!(gl.deleted_programs.len(), 3);
    assert_eq!(
        gl.deleted_shaders.len(),
        4,
        "every compiled shader object is deleted"
    );
}

#[test]
fn host_flow_failed_compile_and_bad_links() {
    let state = RefCell::new(FakeGl::default());
    let cache = new_cache(1 << 20);
    let m = host_manager(&state, cache);
    let vs = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "has an error");
    let fs = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, "fine");
    assert_eq!(
        compile(m, vs),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED
    );
    let mut h = gpusvc_program_cache_sha1::default();
    let mut n = 0;
    let mut state_out = 99;
    let mut buf = [0 as c_char; 64];
    // SAFETY: live handles, buffers and out slots.
    unsafe {
        assert_eq!(gpusvc_program_manager_shader_compiled_hash(vs, &mut h), OK);
        assert_eq!(
            compile_status(cache, h),
            GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_UNKNOWN
        );
        assert_eq!(gpusvc_program_manager_shader_state(vs, &mut state_out), OK);
        assert_eq!(state_out, GPUSVC_PROGRAM_MANAGER_SHADER_STATE_FAILED);
        assert_eq!(
            gpusvc_program_manager_shader_info_log(vs, ptr::null_mut(), 0, &mut n),
            OK
        );
        assert_eq!(n, "0:1: error: syntax".len());
        let mut m2 = 5;
        assert_eq!(
            gpusvc_program_manager_shader_info_log(vs, buf.as_mut_ptr(), n, &mut m2),
            gpusvc_result::GPUSVC_INSUFFICIENT_SIZE
        );
        assert_eq!(m2, 5);
        assert_eq!(
            gpusvc_program_manager_shader_info_log(vs, buf.as_mut_ptr(), 64, &mut n),
            OK
        );
        assert_eq!(
            CStr::from_ptr(buf.as_ptr()).to_str().unwrap(),
            "0:1: error: syntax"
        );
    }
    assert_eq!(
        link(m, vs, fs).unwrap_err(),
        gpusvc_result::GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED
    );
    assert_eq!(
        compile(m, fs),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
    );
    assert_eq!(
        link(m, fs, fs).unwrap_err(),
        gpusvc_result::GPUSVC_INVALID_ARGUMENT
    );
    let fs_b = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, "also fine");
    assert_eq!(
        compile(m, fs_b),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
    );
    assert_eq!(
        link(m, fs_b, fs).unwrap_err(),
        gpusvc_result::GPUSVC_INVALID_ARGUMENT,
        "a fragment shader as the vertex shader"
    );
    // The crate's refusal (LinkFailure::WrongStage), in the words C always saw.
    assert_eq!(last_detail(), "`vertex` is a fragment shader");
    let vs_b = shader(
        m,
        GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
        "another vertex",
    );
    assert_eq!(
        link(m, vs, vs_b).unwrap_err(),
        gpusvc_result::GPUSVC_INVALID_ARGUMENT,
        "a vertex shader as the fragment shader, refused before the compile status is read"
    );
    assert_eq!(last_detail(), "`fragment` is a vertex shader");
    // A shader of another manager.
    let other = host_manager(&state, cache);
    let foreign = shader(other, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "v");
    let mut outcome = 0;
    // SAFETY: live handles.
    unsafe {
        assert_eq!(
            gpusvc_program_manager_compile(m, foreign, &mut outcome),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
    }
    // The crate's refusal (ProgramManager::compile, LinkFailure::ForeignShader), in the
    // words C always saw; at link it is checked before the stages, vertex argument first.
    assert_eq!(
        last_detail(),
        "the given shader belongs to another program manager"
    );
    let foreign_fs = shader(other, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, "f");
    for s in [foreign, foreign_fs] {
        assert_eq!(
            compile(other, s),
            GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
        );
    }
    for (v, f, which) in [
        (foreign, fs, "vertex"),
        (vs, foreign_fs, "fragment"),
        (foreign_fs, vs, "vertex"),
        (fs_b, foreign, "fragment"),
    ] {
        assert_eq!(
            link(m, v, f).unwrap_err(),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            last_detail(),
            format!("the {which} shader belongs to another program manager")
        );
    }
    // SAFETY: live handles.
    unsafe {
        // A missing required callback.
        let mut gl = host_gl(&state);
        gl.load_binary = None;
        let mut bad = ptr::null_mut();
        assert_eq!(
            gpusvc_program_manager_new_host(&gl, cache, c"x".as_ptr(), &mut bad),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert!(last_detail().contains("load_binary"), "{}", last_detail());
    }
    free_all(&[vs, fs, fs_b, vs_b, foreign, foreign_fs], &[]);
    // SAFETY: live handles.
    unsafe {
        assert_eq!(gpusvc_program_manager_free(other), OK);
        assert_eq!(gpusvc_program_manager_free(m), OK);
        assert_eq!(
            gpusvc_program_manager_free(m),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
    }
    free_cache(cache);
}

/// `gpusvc_program_cache_backend_shader_hash(stage, source, options, identity)`.
fn backend_hash(
    stage: u32,
    source: &str,
    options: &[u8],
    identity: &CStr,
) -> gpusvc_program_cache_sha1 {
    let mut out = gpusvc_program_cache_sha1::default();
    // SAFETY: live buffers of their lengths, a NUL-terminated identity and an out slot.
    let r = unsafe {
        gpusvc_program_cache_backend_shader_hash(
            stage,
            source.as_ptr().cast(),
            source.len(),
            options.as_ptr(),
            options.len(),
            identity.as_ptr(),
            &mut out,
        )
    };
    assert_eq!(r, OK, "{}", last_detail());
    out
}

/// What the header promises a C host that computes a manager's hashes and keys itself: the
/// manager's compiled hash is `gpusvc_program_cache_backend_shader_hash` of the shader's stage,
/// source, compile options and the manager's identity (not `gpusvc_program_cache_shader_hash`);
/// its compile statuses are keyed by it (a status marked with that hash defers the compile, one
/// marked with the plain hash does not); and its linked program key is
/// `gpusvc_program_cache_program_key` of those hashes.
#[test]
fn a_managers_hashes_and_keys_are_the_backend_shader_hash_exports() {
    const VS: u32 = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX;
    const FS: u32 = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT;
    let state = RefCell::new(FakeGl::default());
    let cache = new_cache(1 << 20);
    let m = host_manager(&state, cache);
    let options = b"translator flags";
    let with_options = |stage, source| {
        let s = shader(m, stage, source);
        // SAFETY: a live handle and a buffer of its length.
        let r = unsafe {
            gpusvc_program_manager_shader_set_compile_options(s, options.as_ptr(), options.len())
        };
        assert_eq!(r, OK, "{}", last_detail());
        s
    };
    let compiled_hash = |s| {
        let mut h = gpusvc_program_cache_sha1::default();
        // SAFETY: a live handle and out slot.
        let r = unsafe { gpusvc_program_manager_shader_compiled_hash(s, &mut h) };
        assert_eq!(r, OK);
        h
    };

    let vs = with_options(VS, "vertex source");
    let fs = with_options(FS, "fragment source");
    assert_eq!(
        compile(m, vs),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
    );
    assert_eq!(
        compile(m, fs),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
    );
    let (hv, hf) = (compiled_hash(vs), compiled_hash(fs));
    assert_eq!(hv, backend_hash(VS, "vertex source", options, c"fake"));
    assert_eq!(hf, backend_hash(FS, "fragment source", options, c"fake"));
    // The options, the identity and the domain are each in it.
    assert_ne!(hv, backend_hash(VS, "vertex source", b"", c"fake"));
    assert_ne!(hv, backend_hash(VS, "vertex source", options, c"other"));
    let mut plain = gpusvc_program_cache_sha1::default();
    // SAFETY: live buffers of their lengths and an out slot.
    let r = unsafe {
        gpusvc_program_cache_shader_hash(
            VS,
            c"vertex source".as_ptr(),
            "vertex source".len(),
            options.as_ptr(),
            options.len(),
            &mut plain,
        )
    };
    assert_eq!(r, OK);
    assert_ne!(hv, plain);
    assert_eq!(
        compile_status(cache, hv),
        GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_SUCCESS
    );
    assert_eq!(
        compile_status(cache, plain),
        GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_UNKNOWN
    );

    // A host that marks statuses for the manager: the backend hash defers, the plain one does not.
    let marked = backend_hash(VS, "marked source", options, c"fake");
    // SAFETY: a live cache and hash.
    let r = unsafe { gpusvc_program_cache_mark_shader_compiled(cache, &marked) };
    assert_eq!(r, OK);
    let s = with_options(VS, "marked source");
    assert_eq!(
        compile(m, s),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED
    );
    let mut plain_marked = gpusvc_program_cache_sha1::default();
    // SAFETY: live buffers of their lengths and an out slot.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_shader_hash(
                VS,
                c"plain marked".as_ptr(),
                "plain marked".len(),
                options.as_ptr(),
                options.len(),
                &mut plain_marked,
            ),
            OK
        );
        assert_eq!(
            gpusvc_program_cache_mark_shader_compiled(cache, &plain_marked),
            OK
        );
    }
    let t = with_options(VS, "plain marked");
    assert_eq!(
        compile(m, t),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
    );

    // The linked program's key is gpusvc_program_cache_program_key of the backend hashes.
    let p = link(m, vs, fs).unwrap();
    let mut linked = gpusvc_program_cache_sha1::default();
    // SAFETY: a live handle and out slot.
    let r = unsafe { gpusvc_program_manager_linked_program_key(p, &mut linked) };
    assert_eq!(r, OK);
    let key_of = |vertex, fragment| key_for(vertex, fragment, &[], c"fake");
    assert_eq!(linked, key_of(hv, hf));
    assert_eq!(
        link_status(cache, linked),
        GPUSVC_PROGRAM_CACHE_LINK_STATUS_SUCCESS
    );
    free_all(&[vs, fs, s, t], &[p]);
    // SAFETY: live handles.
    unsafe {
        assert_eq!(gpusvc_program_manager_free(m), OK);
    }
    free_cache(cache);
}

#[test]
fn a_callback_reentering_with_a_busy_handle_gets_handle_busy() {
    let state = RefCell::new(FakeGl::default());
    let cache = new_cache(1 << 20);
    let m = host_manager(&state, cache);
    let vs = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "v");
    state.borrow_mut().reenter = Some((m as usize, vs as usize));
    assert_eq!(
        compile(m, vs),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
    );
    assert_eq!(
        state.borrow().reentry_result,
        Some(gpusvc_result::GPUSVC_HANDLE_BUSY)
    );
    free_all(&[vs], &[]);
    // SAFETY: live handle.
    assert_eq!(unsafe { gpusvc_program_manager_free(m) }, OK);
    free_cache(cache);
}

#[test]
fn thread_bound_handles_refuse_other_threads() {
    let state = RefCell::new(FakeGl::default());
    let cache = new_cache(1 << 20);
    let m = host_manager(&state, cache);
    let vs = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "v");
    let (m_addr, vs_addr) = (m as usize, vs as usize);
    let (compiled, freed, detail) = std::thread::spawn(move || {
        let mut outcome = 0;
        // SAFETY: live handles of another thread, which the library must refuse.
        unsafe {
            (
                gpusvc_program_manager_compile(
                    m_addr as *const gpusvc_program_manager,
                    vs_addr as *const gpusvc_program_manager_shader,
                    &mut outcome,
                ),
                gpusvc_program_manager_free(m_addr as *mut gpusvc_program_manager),
                last_detail(),
            )
        }
    })
    .join()
    .unwrap();
    assert_eq!(compiled, gpusvc_result::GPUSVC_WRONG_THREAD);
    assert_eq!(freed, gpusvc_result::GPUSVC_WRONG_THREAD);
    assert!(detail.contains("another thread"), "{detail}");
    // Still alive and usable here.
    assert_eq!(
        compile(m, vs),
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED
    );
    free_all(&[vs], &[]);
    // SAFETY: live handle.
    assert_eq!(unsafe { gpusvc_program_manager_free(m) }, OK);
    free_cache(cache);
}

#[test]
fn shader_inputs_are_validated() {
    let state = RefCell::new(FakeGl::default());
    let cache = new_cache(1 << 20);
    let m = host_manager(&state, cache);
    let mut s = ptr::null_mut();
    let bad = [0xC3u8, 0x28];
    // SAFETY: NULL, live buffers of the given lengths, or an absurd length the library must
    // refuse before reading.
    unsafe {
        assert_eq!(
            gpusvc_program_manager_shader_new(m, 0, ptr::null(), 0, &mut s),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_manager_shader_new(m, 0, c"".as_ptr(), 0, &mut s),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_manager_shader_new(m, 0, bad.as_ptr().cast(), 2, &mut s),
            gpusvc_result::GPUSVC_INVALID_UTF8
        );
        assert_eq!(
            gpusvc_program_manager_shader_new(m, 0, c"x".as_ptr(), usize::MAX, &mut s),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_program_manager_shader_new(m, 6, c"x".as_ptr(), 1, &mut s),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert!(s.is_null());
        s = shader(m, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, "v");
        assert_eq!(
            gpusvc_program_manager_shader_set_source(s, c"".as_ptr(), 0),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        let mut h = gpusvc_program_cache_sha1::default();
        assert_eq!(
            gpusvc_program_manager_shader_compiled_hash(s, &mut h),
            gpusvc_result::GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED
        );
        let name = [b'a', 0xFF, 0];
        let vars = [gpusvc_program_cache_variable_info {
            name: name.as_ptr().cast(),
            mapped_name: c"a".as_ptr(),
            gl_type: 0,
            array_size: 1,
            has_location: false,
            location: 0,
        }];
        let v = gpusvc_program_cache_shader_variables {
            attributes: vars.as_ptr(),
            attribute_count: 1,
            ..no_variables()
        };
        assert_eq!(
            gpusvc_program_manager_shader_set_variables(s, &v),
            gpusvc_result::GPUSVC_INVALID_UTF8
        );
        let mut n = 5;
        assert_eq!(
            gpusvc_program_manager_shader_variable_count(s, 0, &mut n),
            OK
        );
        assert_eq!(n, 0);
        assert_eq!(gpusvc_program_manager_shader_free(s), OK);
        let mut outcome = 0;
        assert_eq!(
            gpusvc_program_manager_compile(m, s, &mut outcome),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        assert_eq!(gpusvc_program_manager_free(m), OK);
    }
    free_cache(cache);
}

// ---- the flow on the real driver ----

const VS: &str = "in vec2 a_position;\nin vec4 a_color;\nuniform float u_scale;\nout vec4 v_color;\n\
void main() { v_color = a_color; gl_Position = vec4(a_position * u_scale, 0.0, 1.0); }\n";
const FS: &str = "in vec4 v_color;\nuniform vec4 u_tint;\nout vec4 o_color;\n\
void main() { o_color = v_color * u_tint; }\n";

#[test]
fn gl_flow_cold_link_then_cache_hit_with_the_same_reflection() {
    let Some(ctx) = open_gl_context(
        "gl_flow_cold_link_then_cache_hit_with_the_same_reflection",
        0,
    ) else {
        return;
    };
    let cache = new_cache(1 << 22);
    let mut m = ptr::null_mut();
    // SAFETY: live handles and out slot.
    unsafe {
        assert_eq!(
            gpusvc_program_manager_new_gl(ctx, cache, c"rust gl".as_ptr(), &mut m),
            OK,
            "{}",
            last_detail()
        );
    }
    let (vs_src, fs_src) = (glsl(ctx, VS), glsl(ctx, FS));
    // The manager shares the context: freeing the handle first is fine.
    // SAFETY: a live context on its thread.
    unsafe { gpusvc_gl_context_free(ctx) };

    let (vs, fs) = compiled_pair(
        m,
        &vs_src,
        &fs_src,
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED,
    );
    let cold = link(m, vs, fs).unwrap_or_else(|r| panic!("{r:?}: {}", last_detail()));
    assert_eq!(origin(cold), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    let attributes = variables(cold, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE);
    let uniforms = variables(cold, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM);
    let names: Vec<&str> = attributes.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(names, ["a_color", "a_position"]);
    let names: Vec<&str> = uniforms.iter().map(|u| u.0.as_str()).collect();
    assert_eq!(names, ["u_scale", "u_tint"]);
    assert_eq!(stats(cache).entries, 1, "the binary was saved");

    let (vs2, fs2) = compiled_pair(
        m,
        &vs_src,
        &fs_src,
        GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED,
    );
    let hit = link(m, vs2, fs2).unwrap_or_else(|r| panic!("{r:?}: {}", last_detail()));
    assert_eq!(origin(hit), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
    assert_eq!(
        variables(hit, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE),
        attributes
    );
    assert_eq!(
        variables(hit, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM),
        uniforms
    );
    let (mut a, mut b) = (0u64, 0u64);
    // SAFETY: live handles and out slots.
    unsafe {
        assert_eq!(
            gpusvc_program_manager_linked_program_object(cold, &mut a),
            OK
        );
        assert_eq!(
            gpusvc_program_manager_linked_program_object(hit, &mut b),
            OK
        );
    }
    assert!(a != 0 && b != 0 && a != b);
    let s = stats(cache);
    assert_eq!((s.counters.hits, s.counters.status_hits), (1, 2));

    free_all(&[vs, fs, vs2, fs2], &[cold, hit]);
    // SAFETY: live handle; the last owner of the GL context, destroyed on its thread.
    assert_eq!(unsafe { gpusvc_program_manager_free(m) }, OK);
    free_cache(cache);
}

#[test]
fn gl_manager_needs_a_live_context_on_its_thread() {
    let Some(ctx) = open_gl_context("gl_manager_needs_a_live_context_on_its_thread", 0) else {
        return;
    };
    let cache = new_cache(1 << 20);
    let ctx_addr = ctx as usize;
    let cache_addr = cache as usize;
    let r = std::thread::spawn(move || {
        let mut m = ptr::null_mut();
        // SAFETY: a live context of another thread, which the library must refuse.
        unsafe {
            gpusvc_program_manager_new_gl(
                ctx_addr as *const gpusvc_gl_context,
                cache_addr as *const gpusvc_program_cache,
                c"x".as_ptr(),
                &mut m,
            )
        }
    })
    .join()
    .unwrap();
    assert_eq!(r, gpusvc_result::GPUSVC_WRONG_THREAD);
    let mut m = ptr::null_mut();
    // SAFETY: a context freed before use, which the library must refuse.
    unsafe {
        gpusvc_gl_context_free(ctx);
        assert_eq!(
            gpusvc_program_manager_new_gl(ctx, cache, c"x".as_ptr(), &mut m),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        let mut api = 0;
        assert_eq!(
            gpusvc_gl_context_api(ctx, &mut api),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
    }
    assert!(m.is_null());
    free_cache(cache);
}
