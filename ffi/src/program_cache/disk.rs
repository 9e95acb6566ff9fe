//! The program cache's persistent disk store seen from C: a cache opened over a folder
//! (`gpusvc_program_cache_open`), its startup load, flush, hot marks, disk statistics
//! and the condition it reported.
//!
//! The disk store runs on two background threads of its own (a writer and a startup loader); the
//! GPU thread never waits for the disk except in `gpusvc_program_cache_wait_until_loaded`,
//! `gpusvc_program_cache_flush_disk` and the final free. What the disk layer does is described
//! in `program-cache/FORMAT.md` (format, stamp, multi-process protocol, faults).

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use program_cache::disk::LogCallback;
use program_cache::{DiskConfig, ProgramKey};

use crate::gl::gpusvc_driver_identity;
use crate::kit::handle::{self, Kind};
use crate::kit::{
    FfiError, GatedFn, HostFn, Out, SizedOut, answer_sized_into, c_string, ffi_guard,
    gpusvc_result, sized_in, slice_in, text_out,
};
use crate::program_cache::disk_types::*;
use crate::program_cache::exports::builder;
use crate::program_cache::histogram::gpusvc_program_cache_histogram_callback;
use crate::program_cache::types::{gpusvc_program_cache_config, gpusvc_program_cache_sha1};
use crate::program_cache::{cache, gpusvc_program_cache};

/// Writes the defaults into `*out`: enabled, LZ4 on, the memory budget, the store dropped after
/// 3 refused binaries in a row, no ids, no log. `dir`, `host_product` and `host_version` are
/// NULL: set them.
///
/// The host sets `out->struct_size` first; it is kept, and only that many bytes are written.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_disk_config_defaults(
    out: *mut gpusvc_program_cache_disk_config,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { SizedOut::new(out, "out") }?;
        out.write_keeping_size(disk_config_defaults());
        Ok(())
    })
}

/// The default cache folder, `$XDG_CACHE_HOME/gpusvc` (else `$HOME/.cache/gpusvc`), as bytes
/// (`GPUSVC_PROGRAM_CACHE_NO_DEFAULT_DIR` when neither variable is set: run memory-only then):
/// `*out_len` gets its length; with `buf` NULL and `len` 0 nothing else happens (a size query);
/// otherwise `len` must exceed the length (else `GPUSVC_INSUFFICIENT_SIZE`, nothing written) and
/// the path is copied NUL-terminated. A browser normally passes a folder of its profile instead.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes; `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_disk_config_default_dir(
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let dir = DiskConfig::default_dir().ok_or_else(|| {
            FfiError::new(
                gpusvc_result::GPUSVC_PROGRAM_CACHE_NO_DEFAULT_DIR,
                "neither XDG_CACHE_HOME nor HOME is set to an absolute path".to_owned(),
            )
        })?;
        let text = dir.to_string_lossy();
        // SAFETY: forwarded from this function's contract.
        unsafe { text_out(&text, (buf, "buf"), len, (out_len, "out_len")) }
    })
}

/// Creates a program cache backed by a disk store in `disk->dir`, for the driver `driver`
/// (everything is copied). Entries already on disk for the same stamp (driver identity, ids,
/// host build id, format) start loading into memory on a background thread, hot ones first,
/// then the most recently used; every save is also written to disk by a background writer.
/// Other stamps' stores in the folder that no live process uses are deleted.
///
/// With `disk->enabled` false the cache is memory-only, as from `gpusvc_program_cache_new`
/// (`driver` may then be NULL). When the folder cannot be used (not creatable, read-only, not a
/// folder) the call still succeeds: the cache works in memory only, and the condition is
/// reported once, through `disk->log` and `gpusvc_program_cache_disk_condition`.
///
/// `histogram` is as for `gpusvc_program_cache_new`. `disk->log` and its user data must stay
/// valid until `gpusvc_program_cache_free` of this cache has returned.
///
/// Errors: `GPUSVC_INVALID_ARGUMENT` for a bad cache config, an empty `dir` or one with a NUL
/// byte, `max_consecutive_rejections` 0; `GPUSVC_NULL_ARGUMENT` for a NULL string the stamp
/// needs; `GPUSVC_INVALID_UTF8` for a string that is not UTF-8.
///
/// # Safety
/// `config`, `disk` and `driver` are NULL or valid for one read each, with their pointers as
/// documented on their structs; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_open(
    config: *const gpusvc_program_cache_config,
    histogram: gpusvc_program_cache_histogram_callback,
    user_data: *mut c_void,
    disk: *const gpusvc_program_cache_disk_config,
    driver: *const gpusvc_driver_identity,
    out: *mut *mut gpusvc_program_cache,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: NULL or valid for `struct_size` bytes (contract); plain integers.
        let config = unsafe { crate::kit::sized_in(config, "config") }?;
        // SAFETY: NULL or valid for one read (contract).
        let disk = unsafe { sized_in(disk, "disk") }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        // SAFETY: the config's sink pointer follows this function's contract.
        let (mut builder, mut gates) = unsafe { builder(&config, histogram, user_data) }?;
        if disk.enabled {
            // SAFETY: NULL or valid for one read (contract).
            let driver = unsafe { sized_in(driver, "driver") }?;
            // SAFETY: forwarded from this function's contract.
            let mut disk_config = unsafe { disk_config_in(&disk, &driver) }?;
            // The log callback behind a gate that `gpusvc_program_cache_free` closes: it is never
            // called once the free has returned, even while program managers keep the cache
            // alive.
            if let Some(host) = HostFn::optional(disk.log, disk.log_user_data) {
                let (log, gate) = GatedFn::new(host);
                gates.push(gate);
                disk_config.log = Some(Arc::new(move |text: &str| {
                    log.call(|f, user_data| {
                        let text = c_string(text);
                        // SAFETY: the host gave this callback and user_data for exactly this use
                        // and keeps them valid until the cache is freed (the gate is open, so it
                        // has not been); the text is a NUL-terminated string that outlives the
                        // call.
                        unsafe { f(text.as_ptr(), user_data) };
                    });
                }) as LogCallback);
            }
            builder = builder.disk(disk_config);
        }
        out.write(handle::new_shared_gated(
            Kind::ProgramCache,
            builder.build(),
            gates,
        ));
        Ok(())
    })
}

/// Waits at most `timeout_ms` until the startup load from disk has finished, and writes what it
/// did to `*out`. The cache works meanwhile (programs not loaded yet are misses), so waiting is
/// optional. A cache without a disk store (or whose folder was unusable) returns at once with
/// an empty report. On timeout: `GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT`, nothing written. The host
/// sets `out->struct_size`; only that many bytes are written, and `struct_size` becomes the
/// bytes written.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_wait_until_loaded(
    cache: *const gpusvc_program_cache,
    timeout_ms: u32,
    out: *mut gpusvc_program_cache_disk_load_report,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || self::cache(cache),
            out,
            "out",
            |cache| {
                let report = cache.wait_until_loaded(Duration::from_millis(u64::from(timeout_ms)));
                report.map(Into::into).ok_or_else(|| {
                    FfiError::new(
                        gpusvc_result::GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT,
                        format!("the startup load did not finish within {timeout_ms} ms"),
                    )
                })
            },
        )
    }
}

/// Waits until the disk writer has done everything queued so far (saves, last-use records, hot
/// marks, a clear). For shutdown paths and tests; a no-op without a disk store.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_flush_disk(
    cache: *const gpusvc_program_cache,
) -> gpusvc_result {
    ffi_guard(|| {
        self::cache(cache)?.flush_disk();
        Ok(())
    })
}

/// Marks `count` programs as hot (e.g. the ones the first frame needs): on the next start they
/// load from disk before the others. Keys are copied; a no-op without a disk store.
///
/// # Safety
/// `keys` is NULL or valid for `count` reads (NULL allowed when `count` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_mark_hot(
    cache: *const gpusvc_program_cache,
    keys: *const gpusvc_program_cache_sha1,
    count: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let keys = unsafe { slice_in(keys, count, "keys") }?;
        let keys: Vec<ProgramKey> = keys.iter().map(|k| ProgramKey(k.bytes)).collect();
        cache.mark_hot(&keys);
        Ok(())
    })
}

/// A snapshot of the disk store's statistics (all zero and `configured` false for a cache
/// without one). The host sets `out->struct_size`; only that many bytes are written, and
/// `struct_size` becomes the bytes written.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_disk_stats(
    cache: *const gpusvc_program_cache,
    out: *mut gpusvc_program_cache_disk_stats_snapshot,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || self::cache(cache),
            out,
            "out",
            |cache| {
                Ok(match cache.disk_counters() {
                    None => gpusvc_program_cache_disk_stats_snapshot::default(),
                    Some(c) => gpusvc_program_cache_disk_stats_snapshot {
                        struct_size: 0,
                        configured: true,
                        enabled: cache.disk_enabled(),
                        load_finished: cache.wait_until_loaded(Duration::ZERO).is_some(),
                        writes: c.writes,
                        bytes_written: c.bytes_written,
                        already_present: c.already_present,
                        dropped_writes: c.dropped_writes,
                        write_errors: c.write_errors,
                        loaded: c.loaded,
                        rejected_entries: c.rejected_entries,
                        evictions: c.evictions,
                        store_drops: c.store_drops,
                        lock_busy: c.lock_busy,
                        oversized: c.oversized,
                        space_retries: c.space_retries,
                        stores_removed: c.stores_removed,
                        odd_removed: c.odd_removed,
                        recreated: c.recreated,
                        use_records: c.use_records,
                        compactions: c.compactions,
                        record_errors: c.record_errors,
                    },
                })
            },
        )
    }
}

/// The first condition the disk store reported (folder unusable, a write failed, the store was
/// dropped), as text; empty when there is none. `*out_len` gets its length; with `buf` NULL and
/// `len` 0 nothing else happens (a size query); otherwise `len` must exceed the length (else
/// `GPUSVC_INSUFFICIENT_SIZE`, nothing written) and the text is copied NUL-terminated.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes; `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_disk_condition(
    cache: *const gpusvc_program_cache,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        let text = cache.disk_condition().unwrap_or_default();
        // SAFETY: forwarded from this function's contract.
        unsafe { text_out(&text, (buf, "buf"), len, (out_len, "out_len")) }
    })
}
