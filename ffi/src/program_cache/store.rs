//! `gpusvc_program_cache_store_*`: the browser side of the persistence split seen from C — the
//! disk store on its own, with no GL and no program cache, for the process that owns the disk
//! when the GPU process is sandboxed. It keeps the entries a GPU process's persistence sink
//! hands over (`_put`, `_touch`, `_remove`, `_clear`) and streams them back, most recently
//! used first, at the next start (`_for_each`), under every rule of the disk store
//! (`program-cache/FORMAT.md`: layout, locks, eviction, stale stores, hostile folders).
//!
//! A store works synchronously on the calling thread (every wait on another process is
//! bounded); one handle may be used from any thread (one lock inside, not held while
//! `_for_each` calls the host).

use std::ffi::{c_char, c_void};
use std::path::PathBuf;
use std::sync::Arc;

use program_cache::disk::{LogCallback, PutOutcome, Store, StoreConfig, StoreError};
use program_cache::{DiskCounters, ProgramKey};

use crate::kit::handle::{self, Kind};
use crate::kit::{
    FfiError, GatedFn, HostFn, Out, SizedOut, answer_into, answer_sized_into, c_string, ffi_guard,
    gpusvc_result, growable, invalid_argument, list_out, null_argument, sized_default, sized_in,
    slice_in, text_out,
};
use crate::program_cache::disk_types::gpusvc_program_cache_disk_log_callback;
use crate::program_cache::persist::{entry_error, stamp_in};
use crate::program_cache::types::{gpusvc_program_cache_sha1, sha1_in, shader_hashes_in};

/// An opaque disk store of one stamp (`gpusvc_program_cache_store_open`). Thread-safe: any
/// thread may use it, and free it once no other thread is still calling with it (a call in
/// flight finishes on a live store either way).
#[derive(Debug)]
pub struct gpusvc_program_cache_store {
    _opaque: [u8; 0],
}

/// Configuration of a store (`gpusvc_program_cache_store_open`). Set `struct_size`, call
/// `gpusvc_program_cache_store_config_defaults`, then set `dir` and `stamp`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_cache_store_config {
    /// `sizeof(struct gpusvc_program_cache_store_config)`, set by the host (kept by the
    /// `_defaults` function): the library reads only that many bytes.
    pub struct_size: usize,
    /// The cache folder, `dir_len` bytes of UTF-8 (no NUL needed), an absolute path (a relative
    /// one would depend on the process's working directory). One sub-folder per stamp is made
    /// in it, as `gpusvc_program_cache_open` does.
    pub dir: *const c_char,
    /// Length of `dir` in bytes (> 0).
    pub dir_len: usize,
    /// The stamp text the GPU process computed (`gpusvc_program_cache_stamp_text`) and sent,
    /// `stamp_len` bytes of UTF-8 (no NUL needed). The open collects the folder's stale stores
    /// by this stamp's rules (a store of the same product with an older version goes at once):
    /// check that its `host_product` and `host_version` lines are the browser's own first.
    pub stamp: *const c_char,
    /// Length of `stamp` in bytes.
    pub stamp_len: usize,
    /// Byte budget of the store on disk (allocated blocks, logs included; > 0; default 64 MiB).
    pub budget_bytes: u64,
    /// Conditions (folder unusable, a write failed, a repaired `STAMP`, ...), once each, and
    /// removals, as one line of UTF-8 text with `log_user_data` (may be NULL). It is called on
    /// the thread of the store call that noticed it, one call at a time, and must not unwind; a
    /// call that another gpusvc host callback on the same thread would cause is skipped. It is
    /// never called once `gpusvc_program_cache_store_free` has returned, and must stay valid
    /// until then.
    pub log: gpusvc_program_cache_disk_log_callback,
    /// Passed to `log`.
    pub log_user_data: *mut c_void,
}

growable!(gpusvc_program_cache_store_config {
    first: log_user_data,
    last: log_user_data,
    defaults: config_defaults(),
});

fn config_defaults() -> gpusvc_program_cache_store_config {
    gpusvc_program_cache_store_config {
        struct_size: size_of::<gpusvc_program_cache_store_config>(),
        dir: std::ptr::null(),
        dir_len: 0,
        stamp: std::ptr::null(),
        stamp_len: 0,
        budget_bytes: StoreConfig::DEFAULT_BUDGET,
        log: None,
        log_user_data: std::ptr::null_mut(),
    }
}

/// Writes the defaults into `*out`, whose `struct_size` the host has set (it is kept; only that
/// many bytes are written): a 64 MiB budget, no log; `dir` and `stamp` NULL (set them).
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_config_defaults(
    out: *mut gpusvc_program_cache_store_config,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let out = unsafe { SizedOut::new(out, "out") }?;
        out.write_keeping_size(config_defaults());
        Ok(())
    })
}

/// The folder of a store config: UTF-8, absolute, no NUL.
///
/// # Safety
/// `ptr` is NULL or valid for `len` bytes of reads.
unsafe fn dir_in(ptr: *const c_char, len: usize) -> Result<PathBuf, FfiError> {
    if ptr.is_null() {
        return Err(null_argument("dir"));
    }
    // SAFETY: forwarded from this function's contract.
    let bytes = unsafe { slice_in(ptr.cast::<u8>(), len, "dir") }?;
    if bytes.is_empty() {
        return Err(invalid_argument("`dir` is empty (dir_len is 0)"));
    }
    if bytes.contains(&0) {
        return Err(invalid_argument("`dir` contains a NUL byte"));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        FfiError::new(
            gpusvc_result::GPUSVC_INVALID_UTF8,
            format!("`dir` is not valid UTF-8: {e}"),
        )
    })?;
    let dir = PathBuf::from(text);
    if !dir.is_absolute() {
        return Err(FfiError::new(
            gpusvc_result::GPUSVC_PROGRAM_CACHE_STORE_DIR_NOT_ABSOLUTE,
            format!("`dir` {text:?} is not an absolute path"),
        ));
    }
    Ok(dir)
}

fn store_error(e: &StoreError) -> FfiError {
    match e {
        StoreError::Invalid(entry) => entry_error(entry),
        StoreError::Open { .. } => FfiError::new(
            gpusvc_result::GPUSVC_PROGRAM_CACHE_STORE_UNUSABLE,
            e.to_string(),
        ),
        StoreError::Io(_) => {
            FfiError::new(gpusvc_result::GPUSVC_PROGRAM_CACHE_STORE_IO, e.to_string())
        }
    }
}

/// Opens (creating as needed) the store of `config->stamp` in `config->dir`, on the calling
/// thread: waits a bounded time for another process's lock, checks or repairs the store's
/// `STAMP`, removes stale stores of the folder and anything in the store that is not an entry,
/// and trims the store to its budget. Everything is copied.
///
/// Errors: `GPUSVC_PROGRAM_CACHE_STORE_UNUSABLE` when the folder cannot be used (not creatable,
/// not a folder, read-only, locked by another process past the bounded wait, a stamp text over
/// the 64 KiB a `STAMP` file may hold; the detail says why); `GPUSVC_PROGRAM_CACHE_BAD_STAMP` for a stamp text that does not parse;
/// `GPUSVC_PROGRAM_CACHE_STORE_DIR_NOT_ABSOLUTE` for a relative `dir`; `GPUSVC_INVALID_UTF8` for
/// a `dir` or stamp that is not UTF-8; `GPUSVC_INVALID_ARGUMENT` for an empty `dir`, one with a
/// NUL byte, or `budget_bytes` 0; `GPUSVC_NULL_ARGUMENT` for a NULL `dir` or `stamp`;
/// `GPUSVC_UNSUPPORTED_STRUCT_SIZE` for a bad `struct_size`.
///
/// # Safety
/// `config` is NULL or valid for reading `config->struct_size` bytes, its pointers as
/// documented on its fields; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_open(
    config: *const gpusvc_program_cache_store_config,
    out: *mut *mut gpusvc_program_cache_store,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: NULL or valid for `struct_size` bytes (contract).
        let c = unsafe { sized_in(config, "config") }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        // SAFETY: `dir` is NULL or valid for `dir_len` bytes (contract).
        let dir = unsafe { dir_in(c.dir, c.dir_len) }?;
        // SAFETY: `stamp` is NULL or valid for `stamp_len` bytes (contract).
        let stamp = unsafe { stamp_in(c.stamp, c.stamp_len, "stamp") }?;
        if c.budget_bytes == 0 {
            return Err(invalid_argument(
                "budget_bytes is 0 (use gpusvc_program_cache_store_config_defaults: 64 MiB)",
            ));
        }
        let mut config = StoreConfig {
            budget_bytes: c.budget_bytes,
            ..StoreConfig::new(dir, stamp)
        };
        let mut gates = Vec::new();
        if let Some(host) = HostFn::optional(c.log, c.log_user_data) {
            let (log, gate) = GatedFn::new(host);
            gates.push(gate);
            config.log = Some(Arc::new(move |text: &str| {
                log.call(|f, user_data| {
                    let text = c_string(text);
                    // SAFETY: the host gave this callback and user_data for exactly this use and
                    // keeps them valid until the store is freed (the gate is open, so it has not
                    // been); the text is a NUL-terminated string that outlives the call.
                    unsafe { f(text.as_ptr(), user_data) };
                });
            }) as LogCallback);
        }
        let store = Store::open(config).map_err(|e| store_error(&e))?;
        out.write(handle::new_shared_gated(
            Kind::ProgramCacheStore,
            Arc::new(store),
            gates,
        ));
        Ok(())
    })
}

fn store(store: *const gpusvc_program_cache_store) -> Result<Arc<Store>, FfiError> {
    handle::shared(store, "store", Kind::ProgramCacheStore)
}

/// Frees a store (pending last-use records are written first). NULL is a no-op; a freed or
/// unknown handle is `GPUSVC_INVALID_HANDLE`. Its log callback is never called once this has
/// returned (a call in progress on another thread is waited for).
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_free(
    store: *mut gpusvc_program_cache_store,
) -> gpusvc_result {
    ffi_guard(|| handle::free(store, Kind::ProgramCacheStore))
}

/// Checks `len` bytes of `entry` (what a persistence sink's `entry_saved` received) as a reader
/// would — size bound, header checksum, magic, version, this store's stamp, payload checksum,
/// decompression bound, decoding — and publishes it atomically (an entry already there for its
/// key is kept), then evicts least recently used entries when over budget. `*out_key` gets the
/// entry's key and `*out_written` whether it was written (false: one was there already).
///
/// Errors (nothing written to disk): the `GPUSVC_PROGRAM_CACHE_ENTRY_*` code of the failed
/// check, as for `gpusvc_program_cache_insert_entry`; `GPUSVC_PROGRAM_CACHE_STORE_IO` when
/// writing failed (disk full even after evicting, read-only; reported once through the log).
/// A `len` over `PTRDIFF_MAX` is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `entry` is NULL or valid for `len` bytes of reads (NULL is refused even when `len` is 0);
/// `out_key` and `out_written` are NULL or valid for one write each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_put(
    store: *const gpusvc_program_cache_store,
    entry: *const u8,
    len: usize,
    out_key: *mut gpusvc_program_cache_sha1,
    out_written: *mut bool,
) -> gpusvc_result {
    ffi_guard(|| {
        let store = self::store(store)?;
        if entry.is_null() {
            return Err(null_argument("entry"));
        }
        // SAFETY: non-NULL and valid for `len` bytes (contract).
        let bytes = unsafe { slice_in(entry, len, "entry") }?;
        // SAFETY: output arguments (this function's contract).
        let out_key = unsafe { Out::new(out_key, "out_key") }?;
        // SAFETY: as above.
        let out_written = unsafe { Out::new(out_written, "out_written") }?;
        let outcome = store.put(bytes).map_err(|e| store_error(&e))?;
        out_key.write(outcome.key().into());
        out_written.write(matches!(outcome, PutOutcome::Written { .. }));
        Ok(())
    })
}

/// Records a use of `key` (what a persistence sink's `entry_used` received): its last-use time,
/// for eviction and for the order of `gpusvc_program_cache_store_for_each`. Coalesced: at most
/// one record per key per minute reaches the disk, pending ones within a second (and at
/// `gpusvc_program_cache_store_flush` and free). A key with no entry is harmless.
///
/// # Safety
/// `key` is NULL or valid for one read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_touch(
    store: *const gpusvc_program_cache_store,
    key: *const gpusvc_program_cache_sha1,
) -> gpusvc_result {
    ffi_guard(|| {
        let store = self::store(store)?;
        // SAFETY: forwarded from this function's contract.
        let key = ProgramKey(unsafe { sha1_in(key, "key") }?);
        store.touch(&key);
        Ok(())
    })
}

/// Records `count` shaders known to compile (what a persistence sink's `shaders_compiled`
/// received) in the store's compiled-shader list: bounded and compacted as the disk store's
/// (its newest 16 Ki distinct hashes, or fewer where those would take more than about 1/16 of
/// the budget, never fewer than 256; of a larger array only that many of the last hashes are
/// appended), emptied by `gpusvc_program_cache_store_clear`. Hashes are copied. A failed
/// append (full disk) is counted in `record_errors`, not an error.
///
/// # Safety
/// `hashes` is NULL or valid for `count` reads (NULL allowed when `count` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_mark_compiled(
    store: *const gpusvc_program_cache_store,
    hashes: *const gpusvc_program_cache_sha1,
    count: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let store = self::store(store)?;
        // SAFETY: forwarded from this function's contract.
        let hashes = unsafe { shader_hashes_in(hashes, count, "hashes") }?;
        store.mark_compiled(&hashes);
        Ok(())
    })
}

/// The shaders the store's compiled-shader list records, oldest first (at most its newest
/// 16 Ki distinct hashes), for `gpusvc_program_cache_insert_compiled` at the GPU process's next
/// start, with the count-query pattern: `hashes` NULL and `len` 0 only count; otherwise `len`
/// must be at least the count (`GPUSVC_INSUFFICIENT_SIZE`, nothing written). A damaged or
/// missing list reads as fewer or none.
///
/// # Safety
/// `hashes` is NULL or valid for `len` writes; `out_count` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_compiled_shaders(
    store: *const gpusvc_program_cache_store,
    hashes: *mut gpusvc_program_cache_sha1,
    len: usize,
    out_count: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let store = self::store(store)?;
        let list: Vec<gpusvc_program_cache_sha1> = store
            .compiled_shaders()
            .into_iter()
            .map(Into::into)
            .collect();
        // SAFETY: forwarded from this function's contract.
        unsafe {
            list_out(
                &list,
                (hashes, "hashes"),
                len,
                (out_count, "out_count"),
                "hashes",
            )
        }
    })
}

/// Writes the pending last-use records now.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_flush(
    store: *const gpusvc_program_cache_store,
) -> gpusvc_result {
    ffi_guard(|| {
        self::store(store)?.flush();
        Ok(())
    })
}

/// Deletes the entry of `key` (what a persistence sink's `entry_rejected` received: the GPU
/// process's driver refused it); `*out_removed` says whether there was one.
/// `GPUSVC_PROGRAM_CACHE_STORE_IO` when the deletion failed.
///
/// # Safety
/// `key` is NULL or valid for one read; `out_removed` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_remove(
    store: *const gpusvc_program_cache_store,
    key: *const gpusvc_program_cache_sha1,
    out_removed: *mut bool,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || Ok((self::store(store)?, ProgramKey(sha1_in(key, "key")?))),
            out_removed,
            "out_removed",
            |(store, key)| store.remove(&key).map_err(|e| store_error(&e)),
        )
    }
}

/// Deletes every entry of the store and empties its logs (a persistence sink's
/// `store_rejected`, or the user clearing the cache); `*out_removed` gets the entries deleted.
/// `GPUSVC_PROGRAM_CACHE_STORE_IO` when it failed.
///
/// # Safety
/// `out_removed` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_clear(
    store: *const gpusvc_program_cache_store,
    out_removed: *mut usize,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || self::store(store),
            out_removed,
            "out_removed",
            |store| store.clear().map_err(|e| store_error(&e)),
        )
    }
}

/// Called by `gpusvc_program_cache_store_for_each` with each entry: its key and `len` bytes, for
/// `gpusvc_program_cache_insert_entry` on the GPU side (both pointers valid only during the
/// call). Return 0 to go on, anything else to stop.
pub type gpusvc_program_cache_store_entry_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        key: *const gpusvc_program_cache_sha1,
        entry: *const u8,
        len: usize,
    ) -> i32,
>;

/// Calls `callback` with `user_data` for each entry of the store, in the order a disk-backed
/// cache loads them — hot ones first, then most recently used first — on this thread, until
/// `callback` returns nonzero; `*out_count` gets the number of calls made. Each entry is read
/// with a bounded read and passed only when every check of FORMAT.md holds (a damaged or
/// foreign entry is deleted and counted in `rejected_entries`; a name that is not a regular
/// file is skipped, never opened). The listing is taken when the call starts (pending last
/// uses written first); entries deleted meanwhile are skipped.
///
/// No lock is held while `callback` runs: it may call any function on this store (put, touch,
/// remove, clear, stats, another `_for_each`) or on other handles. If it frees the store, the
/// iteration stops after that call (`GPUSVC_OK`).
///
/// # Safety
/// `callback` must be safe to call with `user_data` on this thread during the call;
/// `out_count` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_for_each(
    store: *const gpusvc_program_cache_store,
    callback: gpusvc_program_cache_store_entry_fn,
    user_data: *mut c_void,
    out_count: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let live = self::store(store)?;
        let f = callback.ok_or_else(|| null_argument("callback"))?;
        // SAFETY: an output argument (this function's contract).
        let out_count = unsafe { Out::new(out_count, "out_count") }?;
        let mut count = 0usize;
        for (key, bytes) in live.entries() {
            let key = gpusvc_program_cache_sha1::from(key);
            count += 1;
            // SAFETY: the host's callback and user data, called on this thread during the call
            // (contract); the key and the bytes outlive the call.
            let stop = unsafe { f(user_data, &key, bytes.as_ptr(), bytes.len()) };
            if stop != 0 || self::store(store).is_err() {
                break;
            }
        }
        out_count.write(count);
        Ok(())
    })
}

/// A store's statistics (a snapshot; counters since the store was opened, sizes as this
/// process last measured them).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_program_cache_store_stats_snapshot {
    /// `sizeof(struct gpusvc_program_cache_store_stats_snapshot)`, set by the host before the
    /// call; the library writes only that many bytes and sets it to the bytes written.
    pub struct_size: usize,
    /// Entries in the store.
    pub entries: u64,
    /// Bytes the store takes on disk (allocated blocks, logs and folders included).
    pub bytes: u64,
    /// `_put` calls.
    pub puts: u64,
    /// `_put` calls refused for invalid bytes (another stamp, damaged, too large).
    pub refused: u64,
    /// `_touch` calls.
    pub touches: u64,
    /// Entries passed to `_for_each` callbacks.
    pub streamed: u64,
    /// Entries deleted by `_remove`.
    pub removed: u64,
    /// Entries published.
    pub writes: u64,
    /// Bytes published.
    pub bytes_written: u64,
    /// `_put` calls whose key had an entry already.
    pub already_present: u64,
    /// Writes that failed (disk full even after evicting, read-only).
    pub write_errors: u64,
    /// Damaged or foreign entries found while streaming, deleted.
    pub rejected_entries: u64,
    /// Entries deleted by eviction or by emptying the store.
    pub evictions: u64,
    /// Times the whole store was emptied (`_clear`).
    pub store_drops: u64,
    /// Times work was skipped because another process held a lock past the bounded wait.
    pub lock_busy: u64,
    /// Writes that failed for lack of space and were retried after evicting.
    pub space_retries: u64,
    /// Other stores of the folder removed as stale.
    pub stores_removed: u64,
    /// Names in `entries/` that were not entries removed.
    pub odd_removed: u64,
    /// Times the store's folder vanished and was recreated.
    pub recreated: u64,
    /// Last-use records appended to the store's LRU log.
    pub use_records: u64,
    /// Times the LRU log and hot list were compacted.
    pub compactions: u64,
    /// Appends of records to the LRU log that failed, one per batch: the records not written
    /// are lost, never an entry. (Added after `compactions`: written only when `struct_size`
    /// covers it.)
    pub record_errors: u64,
}

growable!(gpusvc_program_cache_store_stats_snapshot {
    first: compactions,
    last: record_errors,
});
sized_default!(gpusvc_program_cache_store_stats_snapshot);

fn stats_out(s: &program_cache::disk::StoreStats) -> gpusvc_program_cache_store_stats_snapshot {
    let DiskCounters {
        writes,
        bytes_written,
        already_present,
        write_errors,
        rejected_entries,
        evictions,
        store_drops,
        lock_busy,
        space_retries,
        stores_removed,
        odd_removed,
        recreated,
        use_records,
        compactions,
        record_errors,
        ..
    } = s.disk;
    gpusvc_program_cache_store_stats_snapshot {
        struct_size: 0,
        entries: s.entries,
        bytes: s.bytes,
        puts: s.puts,
        refused: s.refused,
        touches: s.touches,
        streamed: s.streamed,
        removed: s.removed,
        writes,
        bytes_written,
        already_present,
        write_errors,
        rejected_entries,
        evictions,
        store_drops,
        lock_busy,
        space_retries,
        stores_removed,
        odd_removed,
        recreated,
        use_records,
        compactions,
        record_errors,
    }
}

/// A snapshot of the store's statistics into `*out` (the host sets its `struct_size`; only that
/// many bytes are written, and `struct_size` becomes the bytes written).
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_stats(
    store: *const gpusvc_program_cache_store,
    out: *mut gpusvc_program_cache_store_stats_snapshot,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || self::store(store),
            out,
            "out",
            |s| Ok(stats_out(&s.stats())),
        )
    }
}

/// The first condition the store reported (a write failed, a repaired `STAMP`, a busy lock,
/// ...), as text; empty when there is none. `*out_len` gets its length; with `buf` NULL and
/// `len` 0 nothing else happens (a size query); otherwise `len` must exceed the length (else
/// `GPUSVC_INSUFFICIENT_SIZE`, nothing written) and the text is copied NUL-terminated.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes; `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_store_condition(
    store: *const gpusvc_program_cache_store,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let store = self::store(store)?;
        let text = store.condition().unwrap_or_default();
        // SAFETY: forwarded from this function's contract.
        unsafe { text_out(&text, (buf, "buf"), len, (out_len, "out_len")) }
    })
}
