//! The program cache's persistent disk store seen from C: a cache made over a folder
//! (`gpusvc_program_cache_new_with_disk`), its startup load, flush, hot marks, disk statistics
//! and the condition it reported.
//!
//! The disk store runs on two background threads of its own (a writer and a startup loader); the
//! GPU thread never waits for the disk except in `gpusvc_program_cache_wait_until_loaded`,
//! `gpusvc_program_cache_flush_disk` and the final free. What the disk layer does is described
//! in `program-cache/FORMAT.md` (format, stamp, multi-process protocol, faults).

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use program_cache::disk::{FORMAT_VERSION, LogCallback};
use program_cache::{CompatibilityStamp, DiskConfig, LoadReport, ProgramCache, ProgramKey};

use crate::args::{cstr_in, invalid_argument, slice_in, write};
use crate::boundary::{FfiError, ffi_guard, null_argument, out_ptr};
use crate::handle::{self, Kind};
use crate::program_cache::{
    c_string, config_in, gpusvc_histogram_callback, gpusvc_program_cache,
    gpusvc_program_cache_config, gpusvc_sha1, host_histogram,
};
use crate::result::gpusvc_result;

/// Receives each disk condition (folder unusable, a write failed, the store was dropped) once,
/// as one line of UTF-8 text, with the `log_user_data` of the config. It may be called from any
/// thread (the cache's background threads included), one call at a time, and must not unwind.
/// It must not free the cache it reports for.
pub type gpusvc_disk_log_callback =
    Option<unsafe extern "C" fn(message: *const c_char, user_data: *mut c_void)>;

/// Configuration of a cache's disk store (`gpusvc_program_cache_new_with_disk`). Start from
/// `gpusvc_disk_config_defaults` and set at least `dir`, `host_product` and `host_version`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_disk_config {
    /// False: no disk store at all, the cache lives in memory only (a host's kill switch).
    pub enabled: bool,
    /// The cache folder, `dir_len` bytes (no NUL needed; any bytes but NUL on POSIX). One
    /// sub-folder per compatibility stamp is made in it.
    pub dir: *const c_char,
    /// Length of `dir` in bytes (> 0).
    pub dir_len: usize,
    /// The host product (UTF-8, NUL-terminated, may be empty): which embedder or browser
    /// channel this is. Two products on one folder never remove each other's stores.
    pub host_product: *const c_char,
    /// The host's version (browser version + build number, translator version; UTF-8,
    /// NUL-terminated, may be empty): part of the stamp, so a host update starts a new store,
    /// and the store of an older (or the same) version of the same product on the same device
    /// is removed as stale.
    pub host_version: *const c_char,
    /// Whether `vendor_id` is known.
    pub has_vendor_id: bool,
    /// PCI vendor id of the GPU (part of the stamp).
    pub vendor_id: u32,
    /// Whether `device_id` is known.
    pub has_device_id: bool,
    /// PCI device id of the GPU (part of the stamp).
    pub device_id: u32,
    /// The driver's build id (UTF-8, NUL-terminated), or NULL when unknown (part of the stamp).
    pub driver_build_id: *const c_char,
    /// Byte budget of the store; 0 uses the cache's memory budget.
    pub budget_bytes: u64,
    /// LZ4-compress entries (default on: piglit's entries take about 28 % of the bytes, for
    /// about 10-20 % more CPU time per load; `cargo bench -p gpusvc-program-cache --bench
    /// startup` measures it).
    pub compress: bool,
    /// Drop the whole store after this many disk binaries in a row were refused by the driver
    /// (> 0; default 3).
    pub max_consecutive_rejections: u32,
    /// Conditions, once each (may be NULL).
    pub log: gpusvc_disk_log_callback,
    /// Passed to `log`.
    pub log_user_data: *mut c_void,
}

/// The driver identity that goes into the compatibility stamp: `GL_VENDOR`, `GL_RENDERER` and
/// `GL_VERSION` (UTF-8, NUL-terminated). From a `gpusvc_gl_context` with
/// `gpusvc_gl_context_driver_identity`, or the host's own strings.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_driver_identity {
    /// `GL_VENDOR`.
    pub gl_vendor: *const c_char,
    /// `GL_RENDERER`.
    pub gl_renderer: *const c_char,
    /// `GL_VERSION` (carries the driver version).
    pub gl_version: *const c_char,
    /// The kind of context, e.g. "OpenGL core profile" or "OpenGL ES"; NULL for "". Stores of
    /// different kinds of context on one folder are kept apart and do not replace each other.
    pub context: *const c_char,
}

/// What the startup load did.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct gpusvc_disk_load_report {
    /// Entries loaded into memory.
    pub loaded: usize,
    /// Damaged or foreign entries rejected (and deleted).
    pub rejected: usize,
    /// Entries left on disk because the memory budget was full.
    pub skipped: usize,
    /// Time from the cache's creation to the end of the load, in microseconds.
    pub elapsed_us: u64,
}

impl From<LoadReport> for gpusvc_disk_load_report {
    fn from(r: LoadReport) -> Self {
        gpusvc_disk_load_report {
            loaded: r.loaded,
            rejected: r.rejected,
            skipped: r.skipped,
            elapsed_us: u64::try_from(r.elapsed.as_micros()).unwrap_or(u64::MAX),
        }
    }
}

/// The disk store's statistics (a snapshot; counters since the cache was made).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct gpusvc_disk_stats {
    /// The cache was made with a disk store (`enabled` in its config).
    pub configured: bool,
    /// The store is in use (false: its folder was unusable, memory only; see
    /// `gpusvc_program_cache_disk_condition`).
    pub enabled: bool,
    /// The startup load has finished.
    pub load_finished: bool,
    /// Entries written.
    pub writes: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Saves skipped because the entry was on disk already.
    pub already_present: u64,
    /// Saves dropped because the writer's queue was full.
    pub dropped_writes: u64,
    /// Writes that failed (disk full, read-only).
    pub write_errors: u64,
    /// Entries loaded into memory at startup.
    pub loaded: u64,
    /// Damaged, truncated or foreign entries rejected and deleted.
    pub rejected_entries: u64,
    /// Entries deleted by the store's eviction.
    pub evictions: u64,
    /// Times the whole store was emptied (`gpusvc_program_cache_clear`, repeated refusals).
    pub store_drops: u64,
    /// Times work was skipped because another process held a lock past the bounded wait.
    pub lock_busy: u64,
    /// Saves never written because the entry would exceed the format's payload bound.
    pub oversized: u64,
    /// Writes that failed for lack of space and were retried after evicting.
    pub space_retries: u64,
    /// Other stores of the folder removed as stale.
    pub stores_removed: u64,
    /// Names in `entries/` that were not entries (folders, FIFOs, links, huge files) removed.
    pub odd_removed: u64,
    /// Times the store's folder vanished (deleted by another process) and was recreated.
    pub recreated: u64,
    /// Last-use records appended to the store's LRU log.
    pub use_records: u64,
    /// Times the LRU log and hot list were compacted.
    pub compactions: u64,
}

// ---- the host's log callback, closed when the cache handle is freed ----

thread_local! {
    /// True while this thread is inside a host log callback.
    static IN_LOG: Cell<bool> = const { Cell::new(false) };
}

/// The host's log callback behind a gate: once closed (at `gpusvc_program_cache_free`) it is
/// never called again, and closing waits for a call in flight on another thread.
struct LogGate {
    callback: unsafe extern "C" fn(*const c_char, *mut c_void),
    user_data: *mut c_void,
    open: AtomicBool,
    /// Held during each call.
    calling: Mutex<()>,
}

// SAFETY: `gpusvc_disk_config`'s contract: the callback and its user_data may be used from any
// thread, and calls are serialized by `calling`.
unsafe impl Send for LogGate {}
// SAFETY: as above.
unsafe impl Sync for LogGate {}

impl LogGate {
    fn lock(&self) -> MutexGuard<'_, ()> {
        self.calling.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn call(&self, text: &str) {
        // A condition raised by a gpusvc call made from inside the callback on this thread is
        // dropped rather than deadlocking on `calling`.
        if IN_LOG.with(Cell::get) {
            return;
        }
        let _calling = self.lock();
        if !self.open.load(Ordering::Acquire) {
            return;
        }
        let text = c_string(text);
        IN_LOG.with(|f| f.set(true));
        // SAFETY: the host gave this callback and user_data for exactly this use and keeps them
        // valid until the cache is freed (the gate is open, so it has not been); the text is a
        // NUL-terminated string that outlives the call.
        unsafe { (self.callback)(text.as_ptr(), self.user_data) };
        IN_LOG.with(|f| f.set(false));
    }

    fn close(&self) {
        self.open.store(false, Ordering::Release);
        // Wait for a call in flight on another thread; from inside a callback (the host freed
        // the cache from its log callback) that call is this one.
        if !IN_LOG.with(Cell::get) {
            drop(self.lock());
        }
    }
}

/// Open log gates by cache handle id.
static GATES: Mutex<Option<HashMap<usize, Arc<LogGate>>>> = Mutex::new(None);

fn gates() -> MutexGuard<'static, Option<HashMap<usize, Arc<LogGate>>>> {
    GATES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Closes the log callback of the cache handle `id`, if it has one (called by
/// `gpusvc_program_cache_free` once the handle is gone).
pub(crate) fn close_log(id: usize) {
    let gate = gates().as_mut().and_then(|m| m.remove(&id));
    if let Some(gate) = gate {
        gate.close();
    }
}

// ---- configuration in ----

fn text_field(ptr: *const c_char, name: &str) -> Result<String, FfiError> {
    // SAFETY: the caller's contract: NULL or a NUL-terminated string.
    Ok(unsafe { cstr_in(ptr, name) }?.to_owned())
}

/// The stamp and disk configuration (without the log) from the C structs.
///
/// # Safety
/// The pointers in `disk` and `driver` follow the contracts documented on their structs.
unsafe fn disk_config_in(
    disk: &gpusvc_disk_config,
    driver: &gpusvc_driver_identity,
) -> Result<DiskConfig, FfiError> {
    // SAFETY: forwarded from this function's contract.
    let dir = unsafe { slice_in(disk.dir.cast::<u8>(), disk.dir_len, "dir") }?;
    if disk.dir.is_null() {
        return Err(null_argument("dir"));
    }
    if dir.is_empty() {
        return Err(invalid_argument("`dir` is empty (dir_len is 0)"));
    }
    if dir.contains(&0) {
        return Err(invalid_argument("`dir` contains a NUL byte"));
    }
    let dir = path_from_bytes(dir)?;
    if disk.max_consecutive_rejections == 0 {
        return Err(invalid_argument(
            "max_consecutive_rejections is 0 (use gpusvc_disk_config_defaults: 3)",
        ));
    }
    let driver_build_id = if disk.driver_build_id.is_null() {
        None
    } else {
        Some(text_field(disk.driver_build_id, "driver_build_id")?)
    };
    let stamp = CompatibilityStamp {
        gl_vendor: text_field(driver.gl_vendor, "gl_vendor")?,
        gl_renderer: text_field(driver.gl_renderer, "gl_renderer")?,
        gl_version: text_field(driver.gl_version, "gl_version")?,
        context: if driver.context.is_null() {
            String::new()
        } else {
            text_field(driver.context, "context")?
        },
        vendor_id: disk.has_vendor_id.then_some(disk.vendor_id),
        device_id: disk.has_device_id.then_some(disk.device_id),
        driver_build_id,
        host_product: text_field(disk.host_product, "host_product")?,
        host_version: text_field(disk.host_version, "host_version")?,
        format_version: FORMAT_VERSION,
        pointer_width: usize::BITS,
    };
    Ok(DiskConfig {
        budget_bytes: (disk.budget_bytes > 0).then_some(disk.budget_bytes),
        compress: disk.compress,
        max_consecutive_rejections: disk.max_consecutive_rejections,
        ..DiskConfig::new(dir, stamp)
    })
}

#[cfg(unix)]
fn path_from_bytes(bytes: &[u8]) -> Result<PathBuf, FfiError> {
    use std::os::unix::ffi::OsStrExt as _;
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
}

#[cfg(not(unix))]
fn path_from_bytes(bytes: &[u8]) -> Result<PathBuf, FfiError> {
    std::str::from_utf8(bytes).map(PathBuf::from).map_err(|e| {
        FfiError::new(
            gpusvc_result::GPUSVC_INVALID_UTF8,
            format!("`dir` is not valid UTF-8: {e}"),
        )
    })
}

/// Copies `text` out with the size-query pattern of `gpusvc_shader_info_log`.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes; `out_len` is NULL or valid for one write.
unsafe fn query_text_out(
    text: &str,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> Result<(), FfiError> {
    let out_len = out_ptr(out_len, "out_len")?;
    if !(buf.is_null() && len == 0) {
        let buf = out_ptr(buf, "buf")?;
        if len <= text.len() {
            return Err(FfiError::new(
                gpusvc_result::GPUSVC_INSUFFICIENT_SIZE,
                format!(
                    "the text has {} bytes plus a NUL, room for {len}",
                    text.len()
                ),
            ));
        }
        // SAFETY: `buf` is non-null and valid for `len > text.len()` bytes (contract); the
        // source is our own string.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
            *buf.add(text.len()) = 0;
        }
    }
    // SAFETY: non-null (checked) and valid for a write (contract).
    unsafe { write(out_len, text.len()) };
    Ok(())
}

fn cache(cache: *const gpusvc_program_cache) -> Result<Arc<ProgramCache>, FfiError> {
    crate::program_cache::cache(cache)
}

// ---- exports ----

/// Writes the defaults into `*out`: enabled, LZ4 on, the memory budget, the store dropped after
/// 3 refused binaries in a row, no ids, no log. `dir`, `host_product` and `host_version` are
/// NULL: set them.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_disk_config_defaults(
    out: *mut gpusvc_disk_config,
) -> gpusvc_result {
    ffi_guard(|| {
        let out = out_ptr(out, "out")?;
        let nothing = CompatibilityStamp {
            gl_vendor: String::new(),
            gl_renderer: String::new(),
            gl_version: String::new(),
            context: String::new(),
            vendor_id: None,
            device_id: None,
            driver_build_id: None,
            host_product: String::new(),
            host_version: String::new(),
            format_version: FORMAT_VERSION,
            pointer_width: usize::BITS,
        };
        // The crate's defaults, so C and Rust hosts agree.
        let defaults = DiskConfig::new(PathBuf::new(), nothing);
        let config = gpusvc_disk_config {
            enabled: true,
            dir: std::ptr::null(),
            dir_len: 0,
            host_product: std::ptr::null(),
            host_version: std::ptr::null(),
            has_vendor_id: false,
            vendor_id: 0,
            has_device_id: false,
            device_id: 0,
            driver_build_id: std::ptr::null(),
            budget_bytes: 0,
            compress: defaults.compress,
            max_consecutive_rejections: defaults.max_consecutive_rejections,
            log: None,
            log_user_data: std::ptr::null_mut(),
        };
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, config) };
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
pub unsafe extern "C" fn gpusvc_disk_config_default_dir(
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
        unsafe { query_text_out(&text, buf, len, out_len) }
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
pub unsafe extern "C" fn gpusvc_program_cache_new_with_disk(
    config: *const gpusvc_program_cache_config,
    histogram: gpusvc_histogram_callback,
    user_data: *mut c_void,
    disk: *const gpusvc_disk_config,
    driver: *const gpusvc_driver_identity,
    out: *mut *mut gpusvc_program_cache,
) -> gpusvc_result {
    ffi_guard(|| {
        if config.is_null() {
            return Err(null_argument("config"));
        }
        if disk.is_null() {
            return Err(null_argument("disk"));
        }
        let out = out_ptr(out, "out")?;
        // SAFETY: non-null and valid for a read (contract); plain integers.
        let config = config_in(&unsafe { config.read_unaligned() })?;
        // SAFETY: non-null and valid for a read (contract).
        let disk = unsafe { disk.read_unaligned() };
        let histogram = host_histogram(histogram, user_data);
        if !disk.enabled {
            let cache = match histogram {
                None => ProgramCache::new(config),
                Some(callback) => ProgramCache::with_callback(config, callback),
            };
            let handle = handle::new_shared(Kind::ProgramCache, cache);
            // SAFETY: non-null (checked) and valid for a write (contract).
            unsafe { write(out, handle) };
            return Ok(());
        }
        if driver.is_null() {
            return Err(null_argument("driver"));
        }
        // SAFETY: non-null and valid for a read (contract).
        let driver = unsafe { driver.read_unaligned() };
        // SAFETY: forwarded from this function's contract.
        let mut disk_config = unsafe { disk_config_in(&disk, &driver) }?;
        let gate = disk.log.map(|callback| {
            Arc::new(LogGate {
                callback,
                user_data: disk.log_user_data,
                open: AtomicBool::new(true),
                calling: Mutex::new(()),
            })
        });
        if let Some(gate) = &gate {
            let gate = gate.clone();
            disk_config.log = Some(Arc::new(move |text: &str| gate.call(text)) as LogCallback);
        }
        let cache = ProgramCache::with_disk(config, histogram, disk_config);
        let handle: *mut gpusvc_program_cache = handle::new_shared_arc(Kind::ProgramCache, cache);
        if let Some(gate) = gate {
            gates()
                .get_or_insert_with(HashMap::new)
                .insert(handle.addr(), gate);
        }
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, handle) };
        Ok(())
    })
}

/// Waits at most `timeout_ms` until the startup load from disk has finished, and writes what it
/// did to `*out`. The cache works meanwhile (programs not loaded yet are misses), so waiting is
/// optional. A cache without a disk store (or whose folder was unusable) returns at once with
/// an empty report. On timeout: `GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT`, nothing written.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_wait_until_loaded(
    cache: *const gpusvc_program_cache,
    timeout_ms: u32,
    out: *mut gpusvc_disk_load_report,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        let out = out_ptr(out, "out")?;
        let report = cache
            .wait_until_loaded(Duration::from_millis(u64::from(timeout_ms)))
            .ok_or_else(|| {
                FfiError::new(
                    gpusvc_result::GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT,
                    format!("the startup load did not finish within {timeout_ms} ms"),
                )
            })?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, report.into()) };
        Ok(())
    })
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
    keys: *const gpusvc_sha1,
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
/// without one).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_get_disk_stats(
    cache: *const gpusvc_program_cache,
    out: *mut gpusvc_disk_stats,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        let out = out_ptr(out, "out")?;
        let stats = match cache.disk_counters() {
            None => gpusvc_disk_stats::default(),
            Some(c) => gpusvc_disk_stats {
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
            },
        };
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, stats) };
        Ok(())
    })
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
        unsafe { query_text_out(&text, buf, len, out_len) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(dir: &str) -> gpusvc_disk_config {
        let mut c = std::mem::MaybeUninit::uninit();
        // SAFETY: a live local slot.
        let r = unsafe { gpusvc_disk_config_defaults(c.as_mut_ptr()) };
        assert_eq!(r, gpusvc_result::GPUSVC_OK);
        // SAFETY: written on GPUSVC_OK.
        let mut c = unsafe { c.assume_init() };
        c.dir = dir.as_ptr().cast();
        c.dir_len = dir.len();
        c.host_product = c"host".as_ptr();
        c.host_version = c"1".as_ptr();
        c
    }

    fn driver() -> gpusvc_driver_identity {
        gpusvc_driver_identity {
            gl_vendor: c"V".as_ptr(),
            gl_renderer: c"R".as_ptr(),
            gl_version: c"1.0".as_ptr(),
            context: std::ptr::null(),
        }
    }

    #[test]
    fn the_stamp_takes_every_field_and_defaults_are_the_crates() {
        let dir = "/some/folder";
        let mut c = disk(dir);
        assert!(c.enabled && c.compress);
        assert_eq!(c.max_consecutive_rejections, 3);
        c.has_device_id = true;
        c.device_id = 0x1234;
        c.driver_build_id = c"build-7".as_ptr();
        c.budget_bytes = 5000;
        // SAFETY: every pointer is a live string.
        let config = unsafe { disk_config_in(&c, &driver()) }.unwrap();
        assert_eq!(config.dir, PathBuf::from(dir));
        assert_eq!(config.budget_bytes, Some(5000));
        let s = &config.stamp;
        assert_eq!(
            (
                s.gl_vendor.as_str(),
                s.gl_renderer.as_str(),
                s.gl_version.as_str()
            ),
            ("V", "R", "1.0")
        );
        assert_eq!((s.vendor_id, s.device_id), (None, Some(0x1234)));
        assert_eq!(s.driver_build_id.as_deref(), Some("build-7"));
        assert_eq!(
            (s.host_product.as_str(), s.host_version.as_str()),
            ("host", "1")
        );
        assert_eq!(s.format_version, FORMAT_VERSION);
    }

    #[test]
    fn bad_configs_are_refused_with_the_right_code() {
        let code = |c: gpusvc_disk_config, d: gpusvc_driver_identity| {
            // SAFETY: every pointer is NULL or a live string.
            format!("{:?}", unsafe { disk_config_in(&c, &d) }.unwrap_err())
        };
        let empty = disk("");
        assert!(code(empty, driver()).contains("INVALID_ARGUMENT"));
        let nul = disk("a\0b");
        assert!(code(nul, driver()).contains("INVALID_ARGUMENT"));
        let null_dir = gpusvc_disk_config {
            dir: std::ptr::null(),
            ..disk("x")
        };
        assert!(code(null_dir, driver()).contains("NULL_ARGUMENT"));
        let zero = gpusvc_disk_config {
            max_consecutive_rejections: 0,
            ..disk("x")
        };
        assert!(code(zero, driver()).contains("INVALID_ARGUMENT"));
        let no_host = gpusvc_disk_config {
            host_product: std::ptr::null(),
            ..disk("x")
        };
        assert!(code(no_host, driver()).contains("NULL_ARGUMENT"));
        let no_version = gpusvc_disk_config {
            host_version: std::ptr::null(),
            ..disk("x")
        };
        assert!(code(no_version, driver()).contains("NULL_ARGUMENT"));
        let bad = [0xffu8, 0];
        let not_utf8 = gpusvc_driver_identity {
            gl_renderer: bad.as_ptr().cast(),
            ..driver()
        };
        assert!(code(disk("x"), not_utf8).contains("INVALID_UTF8"));
    }
}
