//! Structs that grow (`size_t struct_size` first): an "old" host, built against a header whose
//! struct was a prefix of today's, and a "newer" host, whose struct has fields this library does
//! not know, against this library. The hosts' structs are declared here as raw `#[repr(C)]`
//! structs with their own sizes, the way a C host compiled against another header lays them out.

mod common;

use std::ffi::c_void;
use std::ptr;

use common::*;
use gpusvc::*;

const UNSUPPORTED: gpusvc_result = gpusvc_result::GPUSVC_UNSUPPORTED_STRUCT_SIZE;

/// `gpusvc_program_cache_config` as first published with `struct_size`: no persistence sink.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct CacheConfigV1 {
    struct_size: usize,
    budget_bytes: usize,
    policy: u32,
    max_unreferenced_shader_statuses: usize,
}

/// `gpusvc_program_cache_config` with the persistence sink (before issue 16).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct CacheConfigWithSink {
    struct_size: usize,
    budget_bytes: usize,
    policy: u32,
    max_unreferenced_shader_statuses: usize,
    persist_sink: *const c_void,
}

/// Today's `gpusvc_program_cache_config`, written out (issue 16 appended the
/// transform-feedback switch and its reserved bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct CacheConfigV2 {
    struct_size: usize,
    budget_bytes: usize,
    policy: u32,
    max_unreferenced_shader_statuses: usize,
    persist_sink: *const c_void,
    cache_transform_feedback: bool,
    reserved: [u8; 7],
}

/// A future `gpusvc_program_cache_config` with one more field.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct CacheConfigV3 {
    v2: CacheConfigV2,
    future: u64,
}

/// An old host's struct in memory that goes on: whatever follows it must not be read.
#[repr(C)]
struct V1ThenGarbage {
    v1: CacheConfigV1,
    garbage: [u8; 64],
}

fn v2() -> CacheConfigV2 {
    CacheConfigV2 {
        struct_size: size_of::<CacheConfigV2>(),
        budget_bytes: 1 << 20,
        policy: GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_SLRU,
        max_unreferenced_shader_statuses: 77,
        persist_sink: ptr::null(),
        cache_transform_feedback: true,
        reserved: [0; 7],
    }
}

/// `gpusvc_program_cache_new` with a raw config; the handle slot starts as a sentinel.
fn new_cache(config: *const c_void) -> (gpusvc_result, *mut gpusvc_program_cache) {
    let sentinel = 0x5e1 as *mut gpusvc_program_cache;
    let mut out = sentinel;
    // SAFETY: `config` points to a live struct of at least its `struct_size` bytes.
    let r = unsafe { gpusvc_program_cache_new(config.cast(), None, ptr::null_mut(), &mut out) };
    if r != OK {
        assert_eq!(out, sentinel, "nothing written on failure");
        out = ptr::null_mut();
    }
    (r, out)
}

fn free_cache(cache: *mut gpusvc_program_cache) {
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_free(cache) }, OK);
}

fn current_config(cache: *mut gpusvc_program_cache) -> gpusvc_program_cache_config {
    // SAFETY: all-zero is a valid config (NULL sink); struct_size set below.
    let mut c: gpusvc_program_cache_config = unsafe { std::mem::zeroed() };
    c.struct_size = size_of::<gpusvc_program_cache_config>();
    // SAFETY: a live handle and a live, sized output.
    let r = unsafe { gpusvc_program_cache_current_config(cache, &mut c) };
    assert_eq!(r, OK);
    c
}

#[test]
fn the_raw_structs_are_the_headers_layout() {
    assert_eq!(
        size_of::<CacheConfigV2>(),
        size_of::<gpusvc_program_cache_config>()
    );
    assert_eq!(
        std::mem::offset_of!(CacheConfigV2, persist_sink),
        std::mem::offset_of!(gpusvc_program_cache_config, persist_sink)
    );
    assert_eq!(
        std::mem::offset_of!(CacheConfigV2, cache_transform_feedback),
        std::mem::offset_of!(gpusvc_program_cache_config, cache_transform_feedback)
    );
    // The sink version is the prefix before the switch.
    assert_eq!(
        size_of::<CacheConfigWithSink>(),
        std::mem::offset_of!(gpusvc_program_cache_config, cache_transform_feedback)
    );
    // V1 is the prefix before the sink, and nothing of it is padding at its end.
    assert_eq!(
        size_of::<CacheConfigV1>(),
        std::mem::offset_of!(gpusvc_program_cache_config, persist_sink)
    );
}

#[test]
fn an_old_hosts_prefix_struct_works_and_the_missing_fields_take_their_defaults() {
    let old = V1ThenGarbage {
        v1: CacheConfigV1 {
            struct_size: size_of::<CacheConfigV1>(),
            budget_bytes: 1 << 20,
            policy: GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_SLRU,
            max_unreferenced_shader_statuses: 77,
        },
        // Where today's struct has `persist_sink`: read as a pointer, it would be followed.
        garbage: [0xab; 64],
    };
    let (r, cache) = new_cache((&raw const old).cast());
    assert_eq!(r, OK, "{}", last_detail());
    let c = current_config(cache);
    assert_eq!(
        (c.budget_bytes, c.policy, c.max_unreferenced_shader_statuses),
        (1 << 20, GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_SLRU, 77)
    );
    assert!(c.persist_sink.is_null());
    // Behaviour: the sink took its default (none), so entries cannot be inserted.
    let mut key = gpusvc_program_cache_sha1 { bytes: [3; 20] };
    let bytes = [0u8; 16];
    // SAFETY: a live handle, buffer and output.
    let r = unsafe { gpusvc_program_cache_insert_entry(cache, bytes.as_ptr(), 16, &mut key) };
    assert_eq!(
        r,
        gpusvc_result::GPUSVC_PROGRAM_CACHE_PERSIST_NOT_CONFIGURED
    );
    assert_eq!(key.bytes, [3; 20]);
    free_cache(cache);
}

#[test]
fn a_newer_hosts_struct_is_taken_while_its_unknown_fields_are_zero() {
    let newer = CacheConfigV3 {
        v2: CacheConfigV2 {
            struct_size: size_of::<CacheConfigV3>(),
            ..v2()
        },
        future: 0,
    };
    let (r, cache) = new_cache((&raw const newer).cast());
    assert_eq!(r, OK, "{}", last_detail());
    assert_eq!(current_config(cache).max_unreferenced_shader_statuses, 77);
    free_cache(cache);

    // One nonzero byte in the part this library does not know: refused, nothing made.
    for byte in 0..8 {
        let mut set = newer;
        // SAFETY: writes one byte inside `future`.
        unsafe { (&raw mut set.future).cast::<u8>().add(byte).write(1) };
        let (r, _) = new_cache((&raw const set).cast());
        assert_eq!(r, UNSUPPORTED, "byte {byte}");
    }
    let detail = last_detail();
    assert!(
        detail.contains("gpusvc_program_cache_config") && detail.contains("does not know"),
        "{detail}"
    );
}

#[test]
fn a_size_below_the_first_published_one_or_absurd_is_refused_with_nothing_written() {
    let first = size_of::<CacheConfigV1>();
    for size in [0, 1, 8, first - 8, first - 1, 4097, usize::MAX] {
        let mut c = v2();
        c.struct_size = size;
        // A size past ours is scanned for nonzero bytes up to the host's size: only the
        // absurd ones are refused before that scan.
        let (r, cache) = new_cache((&raw const c).cast());
        assert_eq!(r, UNSUPPORTED, "struct_size {size}");
        assert!(cache.is_null());
    }
    let detail = last_detail();
    assert!(detail.contains("absurd"), "{detail}");
    let mut c = v2();
    c.struct_size = 8;
    let _ = new_cache((&raw const c).cast());
    let detail = last_detail();
    assert!(
        detail
            .contains("struct_size 8 is below gpusvc_program_cache_config's first published size"),
        "{detail}"
    );
}

#[test]
fn defaults_fill_only_the_hosts_size_and_keep_it() {
    // An old host: exactly its bytes are written, what follows is untouched.
    let mut old = V1ThenGarbage {
        v1: CacheConfigV1 {
            struct_size: size_of::<CacheConfigV1>(),
            budget_bytes: 0,
            policy: 99,
            max_unreferenced_shader_statuses: 0,
        },
        garbage: [0xab; 64],
    };
    // SAFETY: `old` holds `struct_size` bytes and more.
    let r = unsafe {
        gpusvc_program_cache_config_defaults(
            GPUSVC_PROGRAM_CACHE_PROFILE_MOBILE,
            (&raw mut old).cast(),
        )
    };
    assert_eq!(r, OK);
    assert_eq!(old.v1.struct_size, size_of::<CacheConfigV1>());
    assert_eq!(
        old.v1.policy,
        GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_W_TINYLFU
    );
    assert!(old.v1.budget_bytes > 0 && old.v1.max_unreferenced_shader_statuses > 0);
    assert_eq!(old.garbage, [0xab; 64]);

    // A newer host: its size is kept, so a field it sets that this library does not know is
    // refused when the struct comes back, never ignored.
    // SAFETY: all-zero is a valid V3.
    let mut newer: CacheConfigV3 = unsafe { std::mem::zeroed() };
    newer.v2.struct_size = size_of::<CacheConfigV3>();
    // SAFETY: `newer` holds `struct_size` bytes.
    let r = unsafe {
        gpusvc_program_cache_config_defaults(
            GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP,
            (&raw mut newer).cast(),
        )
    };
    assert_eq!(r, OK);
    assert_eq!(newer.v2.struct_size, size_of::<CacheConfigV3>());
    assert_eq!(newer.future, 0);
    assert!(
        newer.v2.cache_transform_feedback,
        "the switch's default is on"
    );
    let (r, cache) = new_cache((&raw const newer).cast());
    assert_eq!(r, OK);
    free_cache(cache);
    newer.future = 7;
    assert_eq!(new_cache((&raw const newer).cast()).0, UNSUPPORTED);

    // Too small: refused, nothing written.
    let mut tiny = [4usize, 0x5e1, 0x5e1, 0x5e1];
    // SAFETY: 32 live bytes, more than the 4 the host claims.
    let r = unsafe {
        gpusvc_program_cache_config_defaults(
            GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP,
            tiny.as_mut_ptr().cast(),
        )
    };
    assert_eq!(r, UNSUPPORTED);
    assert_eq!(tiny, [4, 0x5e1, 0x5e1, 0x5e1]);
}

/// A cache with one saved program (so the counters are not all zero).
fn cache_with_one_save() -> *mut gpusvc_program_cache {
    let config = v2();
    let (r, cache) = new_cache((&raw const config).cast());
    assert_eq!(r, OK);
    let none = gpusvc_program_cache_shader_variables {
        attributes: ptr::null(),
        attribute_count: 0,
        uniforms: ptr::null(),
        uniform_count: 0,
    };
    let binary = [1u8; 32];
    let desc = gpusvc_program_cache_entry_desc {
        struct_size: size_of::<gpusvc_program_cache_entry_desc>(),
        vertex_shader: gpusvc_program_cache_sha1 { bytes: [1; 20] },
        fragment_shader: gpusvc_program_cache_sha1 { bytes: [2; 20] },
        vertex: none,
        fragment: none,
        binary_format: 1,
        binary: binary.as_ptr(),
        binary_len: binary.len(),
        has_page: false,
        failure: GPUSVC_PROGRAM_CACHE_FAILURE_NONE,
        failure_stage: 0,
        failure_log: ptr::null(),
        failure_log_len: 0,
        page: 0,
    };
    let key = gpusvc_program_cache_sha1 { bytes: [9; 20] };
    let mut report = gpusvc_program_cache_save_report::default();
    // SAFETY: live handle, key, description and report.
    let r = unsafe { gpusvc_program_cache_save(cache, &key, &desc, &mut report) };
    assert_eq!(r, OK, "{}", last_detail());
    cache
}

/// `gpusvc_program_cache_stats_snapshot` of a host that knew only the counters (no such version
/// was published: its size is below the struct's first published size), followed by a canary.
#[repr(C)]
struct CountersOnlyThenCanary {
    struct_size: usize,
    counters: [u64; 8],
    canary: [u8; 64],
}

#[test]
fn an_output_struct_gets_exactly_its_hosts_size_written() {
    let cache = cache_with_one_save();
    // An old host reads the config into its prefix struct: exactly its bytes are written,
    // `struct_size` says so, and the memory after it is untouched.
    let mut old = V1ThenGarbage {
        v1: CacheConfigV1 {
            struct_size: size_of::<CacheConfigV1>(),
            budget_bytes: 0,
            policy: 99,
            max_unreferenced_shader_statuses: 0,
        },
        garbage: [0xab; 64],
    };
    // SAFETY: `old` holds `struct_size` bytes and more.
    let r = unsafe { gpusvc_program_cache_current_config(cache, (&raw mut old).cast()) };
    assert_eq!(r, OK);
    assert_eq!(
        (
            old.v1.struct_size,
            old.v1.budget_bytes,
            old.v1.policy,
            old.v1.max_unreferenced_shader_statuses
        ),
        (
            size_of::<CacheConfigV1>(),
            1 << 20,
            GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_SLRU,
            77
        )
    );
    assert_eq!(old.garbage, [0xab; 64], "nothing past the host's size");

    // A newer host's larger struct: ours is written, `struct_size` becomes ours, the rest is
    // left alone.
    #[repr(C)]
    struct Newer {
        now: gpusvc_program_cache_stats_snapshot,
        future: u64,
    }
    let mut newer = Newer {
        now: gpusvc_program_cache_stats_snapshot::default(),
        future: 0x5a5a,
    };
    newer.now.struct_size = size_of::<Newer>();
    // SAFETY: `newer` holds `struct_size` bytes.
    let r = unsafe { gpusvc_program_cache_stats(cache, (&raw mut newer).cast()) };
    assert_eq!(r, OK);
    assert_eq!(
        newer.now.struct_size,
        size_of::<gpusvc_program_cache_stats_snapshot>()
    );
    assert_eq!(
        (newer.now.counters.saves, newer.now.entries, newer.future),
        (1, 1, 0x5a5a)
    );

    // Below the first published size (0 included): refused, not a byte written.
    for size in [
        0usize,
        8,
        72,
        size_of::<gpusvc_program_cache_stats_snapshot>() - 1,
    ] {
        let mut out = CountersOnlyThenCanary {
            struct_size: size,
            counters: [7; 8],
            canary: [0xee; 64],
        };
        // SAFETY: `out` holds 144 bytes, more than any size tried.
        let r = unsafe { gpusvc_program_cache_stats(cache, (&raw mut out).cast()) };
        assert_eq!(r, UNSUPPORTED, "struct_size {size}");
        assert_eq!(
            (out.struct_size, out.counters, out.canary),
            (size, [7; 8], [0xee; 64])
        );
    }
    free_cache(cache);
}

/// `gpusvc_scheduler_config` of a newer host.
#[repr(C)]
#[derive(Clone, Copy)]
struct SchedulerConfigNext {
    now: gpusvc_scheduler_config,
    future: u32,
    future2: u32,
}

#[test]
fn scheduler_structs_follow_the_same_rule() {
    // SAFETY: all-zero is a valid config (the defaults).
    let mut c: SchedulerConfigNext = unsafe { std::mem::zeroed() };
    c.now.struct_size = size_of::<SchedulerConfigNext>();
    let mut s = ptr::null_mut();
    // SAFETY: `c` holds `struct_size` bytes; a live out slot.
    let r = unsafe { gpusvc_scheduler_new_with_config(ptr::null(), (&raw const c).cast(), &mut s) };
    assert_eq!(r, OK, "{}", last_detail());
    c.future2 = 1;
    let mut refused = ptr::null_mut();
    // SAFETY: as above.
    let r = unsafe {
        gpusvc_scheduler_new_with_config(ptr::null(), (&raw const c).cast(), &mut refused)
    };
    assert_eq!(r, UNSUPPORTED);
    assert!(refused.is_null());

    // A task below its first size is refused before anything is kept (destroy not called).
    unsafe extern "C" fn run(_: *mut c_void) -> u32 {
        DONE
    }
    unsafe extern "C" fn destroy(user_data: *mut c_void) {
        // SAFETY: the test's counter.
        unsafe { *user_data.cast::<u32>() += 1 };
    }
    let mut destroyed = 0u32;
    let stream = add_stream(s, NORMAL);
    let mut task = gpusvc_scheduler_task {
        struct_size: size_of::<gpusvc_scheduler_task>() - 1,
        run: Some(run),
        start: None,
        destroy: Some(destroy),
        user_data: (&raw mut destroyed).cast(),
        waits: ptr::null(),
        wait_count: 0,
    };
    let mut order = 0u64;
    // SAFETY: live handle, task and output.
    let r = unsafe { gpusvc_scheduler_enqueue(s, stream, &task, &mut order) };
    assert_eq!((r, order, destroyed), (UNSUPPORTED, 0, 0));
    task.struct_size = size_of::<gpusvc_scheduler_task>();
    // SAFETY: as above.
    let r = unsafe { gpusvc_scheduler_enqueue(s, stream, &task, &mut order) };
    assert_eq!(r, OK);

    // The removal report of an old host that knew only `dropped_tasks`.
    #[repr(C)]
    struct RemovedThenCanary {
        struct_size: usize,
        dropped_tasks: u64,
        canary: [u8; 16],
    }
    let mut removed = RemovedThenCanary {
        struct_size: 16,
        dropped_tasks: 0,
        canary: [0xee; 16],
    };
    // `lent_priority` is this struct's last field since its first version, so 16 bytes are
    // below the first published size: refused.
    // SAFETY: `removed` holds 32 bytes.
    let r = unsafe { gpusvc_scheduler_remove_stream(s, stream, (&raw mut removed).cast()) };
    assert_eq!(r, UNSUPPORTED);
    assert_eq!((removed.dropped_tasks, removed.canary), (0, [0xee; 16]));
    let mut full = gpusvc_scheduler_removed_stream::default();
    // SAFETY: live handle and output.
    let r = unsafe { gpusvc_scheduler_remove_stream(s, stream, &mut full) };
    assert_eq!(r, OK);
    assert_eq!(full.dropped_tasks, 1);
    assert_eq!(destroyed, 1);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_scheduler_free(s) }, OK);
}

// ---- issue 16: trailing fields appended to sized structs ----

#[test]
fn issue16_an_old_config_without_the_transform_feedback_switch_gets_it_on() {
    // The version with the sink, followed by bytes where the switch and reserved bytes lie now:
    // nonzero there must not be read.
    #[repr(C)]
    struct WithSinkThenGarbage {
        c: CacheConfigWithSink,
        garbage: [u8; 16],
    }
    let old = WithSinkThenGarbage {
        c: CacheConfigWithSink {
            struct_size: size_of::<CacheConfigWithSink>(),
            budget_bytes: 1 << 20,
            policy: GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_SLRU,
            max_unreferenced_shader_statuses: 77,
            persist_sink: ptr::null(),
        },
        garbage: [0xab; 16],
    };
    let (r, cache) = new_cache((&raw const old).cast());
    assert_eq!(r, OK, "{}", last_detail());
    assert!(
        current_config(cache).cache_transform_feedback,
        "default: on"
    );
    free_cache(cache);
    // Today's struct with the switch off reads back off; reserved bytes must be zero.
    let mut c = v2();
    c.cache_transform_feedback = false;
    let (r, cache) = new_cache((&raw const c).cast());
    assert_eq!(r, OK);
    assert!(!current_config(cache).cache_transform_feedback);
    free_cache(cache);
    c.reserved[3] = 1;
    assert_eq!(
        new_cache((&raw const c).cast()).0,
        gpusvc_result::GPUSVC_INVALID_ARGUMENT
    );
    // An old host reading the config gets exactly its bytes.
    let mut out = WithSinkThenGarbage {
        c: CacheConfigWithSink {
            struct_size: size_of::<CacheConfigWithSink>(),
            ..old.c
        },
        garbage: [0xab; 16],
    };
    let today = v2();
    let (_, cache) = new_cache((&raw const today).cast());
    // SAFETY: `out` holds `struct_size` bytes and more.
    let r = unsafe { gpusvc_program_cache_current_config(cache, (&raw mut out).cast()) };
    assert_eq!(r, OK);
    assert_eq!(out.garbage, [0xab; 16]);
    free_cache(cache);
}

#[test]
fn issue16_an_old_stats_snapshot_gets_no_failure_hits_written() {
    let cache = cache_with_one_save();
    #[repr(C)]
    struct OldThenCanary {
        struct_size: usize,
        counters: gpusvc_program_cache_counters,
        size_bytes: usize,
        entries: usize,
        canary: u64,
    }
    let mut old = OldThenCanary {
        struct_size: std::mem::offset_of!(OldThenCanary, canary),
        counters: gpusvc_program_cache_counters::default(),
        size_bytes: 0,
        entries: 0,
        canary: 0x5a5a_5a5a,
    };
    assert_eq!(
        old.struct_size,
        std::mem::offset_of!(gpusvc_program_cache_stats_snapshot, failure_hits)
    );
    // SAFETY: `old` holds `struct_size` bytes and more.
    let r = unsafe { gpusvc_program_cache_stats(cache, (&raw mut old).cast()) };
    assert_eq!(r, OK);
    assert_eq!((old.entries, old.canary), (1, 0x5a5a_5a5a));
    assert_eq!(old.struct_size, std::mem::offset_of!(OldThenCanary, canary));
    let mut now = gpusvc_program_cache_stats_snapshot::default();
    // SAFETY: live handle and output.
    assert_eq!(unsafe { gpusvc_program_cache_stats(cache, &mut now) }, OK);
    assert_eq!(
        (now.struct_size, now.failure_hits),
        (size_of::<gpusvc_program_cache_stats_snapshot>(), 0)
    );
    free_cache(cache);
}

#[test]
fn issue16_grown_program_manager_structs_keep_their_first_published_sizes() {
    // `separable` and its reserved bytes lie past the options' first size (`page`'s end);
    // `location_index` and `reserved` past the active variable's (`location`'s end).
    assert_eq!(
        std::mem::offset_of!(gpusvc_program_manager_program_options, separable),
        std::mem::offset_of!(gpusvc_program_manager_program_options, page) + 8
    );
    assert_eq!(size_of::<gpusvc_program_manager_program_options>() % 8, 0);
    assert_eq!(
        std::mem::offset_of!(gpusvc_program_manager_active_variable, location_index),
        std::mem::offset_of!(gpusvc_program_manager_active_variable, location) + 4
    );
    // An old host's active variable (no location index) is filled with exactly its bytes: the
    // linked-program export is exercised in `program_manager_issue16_abi.rs`; here the
    // sizes a C compiler gives the old version are the first published ones.
    #[repr(C)]
    struct OldActive {
        struct_size: usize,
        name: *const u8,
        gl_type: u32,
        size: i32,
        has_location: bool,
        location: i32,
    }
    assert_eq!(
        size_of::<OldActive>(),
        std::mem::offset_of!(gpusvc_program_manager_active_variable, location_index)
    );
    #[repr(C)]
    struct OldOptions {
        struct_size: usize,
        link: gpusvc_program_cache_link_options,
        has_page: bool,
        page: u64,
    }
    assert_eq!(
        size_of::<OldOptions>(),
        std::mem::offset_of!(gpusvc_program_manager_program_options, separable)
    );
}
