//! Review probes (issue 15, second review) of the struct_size rule as a C host misusing it would:
//! a `struct_size` that ends inside a pointer field, structs at misaligned addresses (in and
//! out), and outputs on failure.

mod common;

use std::ffi::c_void;
use std::ptr;

use common::*;
use gpusvc::*;

const UNSUPPORTED: gpusvc_result = gpusvc_result::GPUSVC_UNSUPPORTED_STRUCT_SIZE;

/// Today's config followed by more bytes, so any `struct_size` up to 64 is backed by memory.
#[repr(C)]
struct ConfigThenBytes {
    config: gpusvc_program_cache_config,
    more: [u8; 24],
}

fn config() -> gpusvc_program_cache_config {
    let mut c = cache_config(1 << 20);
    c.persist_sink = ptr::null();
    c
}

/// A `struct_size` that covers `persist_sink` only partly (33..39 bytes: the first published
/// size is 32, the pointer ends at 40) takes some of the pointer's bytes from the host and the rest from
/// the default (NULL): a made-up pointer the library would then follow. No C compiler makes
/// such a size (`sizeof` is a multiple of the struct's alignment), so it is refused.
#[test]
fn a_struct_size_that_ends_inside_a_pointer_field_is_refused() {
    let first = std::mem::offset_of!(gpusvc_program_cache_config, persist_sink);
    assert_eq!(first, 32);
    for size in first + 1..first + size_of::<*const u8>() {
        let mut host = ConfigThenBytes {
            config: config(),
            more: [0; 24],
        };
        host.config.struct_size = size;
        // The pointer's low byte set by the host, its other bytes past `size`: a partial read
        // makes the pointer 0x41.
        // SAFETY: writes the first byte of `persist_sink`.
        unsafe { (&raw mut host.config.persist_sink).cast::<u8>().write(0x41) };
        let mut out = 0x5e1 as *mut gpusvc_program_cache;
        // SAFETY: `host` is valid for 64 bytes, more than `size`.
        let r = unsafe {
            gpusvc_program_cache_new((&raw const host).cast(), None, ptr::null_mut(), &mut out)
        };
        assert_eq!(r, UNSUPPORTED, "struct_size {size}: {}", last_detail());
        assert_eq!(out as usize, 0x5e1, "nothing written");
    }
    // Outputs alike: a size that ends inside a field is not one a host's header gives.
    let cache = {
        let c = config();
        written(ptr::null_mut(), |out| unsafe {
            // SAFETY: a live config and out slot.
            gpusvc_program_cache_new(&c, None, ptr::null_mut(), out)
        })
    };
    let mut host = ConfigThenBytes {
        config: config(),
        more: [0; 24],
    };
    host.config.struct_size = first + 3;
    // SAFETY: a live handle and a struct of 64 bytes.
    let r = unsafe { gpusvc_program_cache_current_config(cache, &mut host.config) };
    assert_eq!(r, UNSUPPORTED, "{}", last_detail());
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_free(cache) }, OK);
}

/// A C host may hand a struct at any address (packed in a byte buffer): in and out go through
/// unaligned copies.
#[test]
fn structs_at_misaligned_addresses_are_read_and_written() {
    #[repr(C, align(8))]
    struct Buf([u8; 256]);
    let mut buf = Buf([0; 256]);
    let at = 1usize;
    let c = config();
    // SAFETY: 40 bytes at offset 1 of a 256-byte buffer.
    unsafe {
        ptr::copy_nonoverlapping(
            (&raw const c).cast::<u8>(),
            buf.0.as_mut_ptr().add(at),
            size_of::<gpusvc_program_cache_config>(),
        );
    }
    let config_at = buf
        .0
        .as_ptr()
        .wrapping_add(at)
        .cast::<gpusvc_program_cache_config>();
    let mut cache = ptr::null_mut();
    // SAFETY: a misaligned but valid struct; aligned out slot.
    let r = unsafe { gpusvc_program_cache_new(config_at, None, ptr::null_mut(), &mut cache) };
    assert_eq!(r, OK, "{}", last_detail());

    // Out: a stats snapshot at offset 3.
    let mut out = Buf([0xee; 256]);
    let n = size_of::<gpusvc_program_cache_stats_snapshot>();
    // SAFETY: writes the struct_size at offset 3.
    unsafe { out.0.as_mut_ptr().add(3).cast::<usize>().write_unaligned(n) };
    let snap_at = out
        .0
        .as_mut_ptr()
        .wrapping_add(3)
        .cast::<gpusvc_program_cache_stats_snapshot>();
    // SAFETY: a live handle, a misaligned output of `n` bytes.
    let r = unsafe { gpusvc_program_cache_stats(cache, snap_at) };
    assert_eq!(r, OK, "{}", last_detail());
    // SAFETY: reading back what was written.
    let got = unsafe { snap_at.read_unaligned() };
    assert_eq!(got.struct_size, n);
    assert_eq!(out.0[3 + n], 0xee, "nothing past the struct");
    assert_eq!(out.0[2], 0xee, "nothing before it");

    // `_defaults` at a misaligned address too.
    let mut d = Buf([0; 256]);
    // SAFETY: struct_size at offset 5.
    unsafe {
        d.0.as_mut_ptr()
            .add(5)
            .cast::<usize>()
            .write_unaligned(size_of::<gpusvc_program_cache_config>())
    };
    let d_at =
        d.0.as_mut_ptr()
            .wrapping_add(5)
            .cast::<gpusvc_program_cache_config>();
    // SAFETY: a misaligned output of its size.
    let r =
        unsafe { gpusvc_program_cache_config_defaults(GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP, d_at) };
    assert_eq!(r, OK, "{}", last_detail());
    // SAFETY: reading back.
    assert!(unsafe { d_at.read_unaligned() }.max_unreferenced_shader_statuses > 0);
    // SAFETY: a live handle.
    assert_eq!(unsafe { gpusvc_program_cache_free(cache) }, OK);
}

/// Every growable output of a failing call keeps its bytes: a dead handle with an output of
/// the right size.
#[test]
fn a_failing_getter_writes_nothing_into_a_sized_output() {
    let dead = 0x7777 as *mut c_void;
    let mut stats = gpusvc_program_cache_stats_snapshot {
        entries: 12345,
        ..Default::default()
    };
    // SAFETY: a handle the registry does not know; a live output.
    let r = unsafe { gpusvc_program_cache_stats(dead.cast(), &mut stats) };
    assert_eq!(r, gpusvc_result::GPUSVC_INVALID_HANDLE);
    assert_eq!(stats.entries, 12345);
    let mut m = gpusvc_scheduler_stream_metrics_snapshot {
        tasks: 99,
        ..Default::default()
    };
    // SAFETY: as above.
    let r = unsafe { gpusvc_scheduler_stream_metrics(dead.cast(), 1, &mut m) };
    assert_eq!(r, gpusvc_result::GPUSVC_INVALID_HANDLE);
    assert_eq!(m.tasks, 99);
}
