//! The C types of a program cache's disk store: its configuration, the host's log callback,
//! the load report and the statistics, and the configuration's conversion to the crate's
//! `DiskConfig`.

use std::ffi::{c_char, c_void};
use std::path::PathBuf;

use program_cache::{CompatibilityStamp, DiskConfig, DriverIdentity, LoadReport};

use crate::gl::gpusvc_driver_identity;
use crate::kit::{
    FfiError, cstr_in, growable, invalid_argument, null_argument, sized_default, slice_in,
};

/// Receives each disk condition (folder unusable, a write failed, the store was dropped) once,
/// as one line of UTF-8 text, with the `log_user_data` of the config. It may be called from any
/// thread (the cache's background threads included), one call at a time, and must not unwind.
/// It must not free the cache it reports for.
pub type gpusvc_program_cache_disk_log_callback =
    Option<unsafe extern "C" fn(message: *const c_char, user_data: *mut c_void)>;

/// Configuration of a cache's disk store (`gpusvc_program_cache_open`). Set `struct_size =
/// sizeof(struct gpusvc_program_cache_disk_config)` (the rest zero), call
/// `gpusvc_program_cache_disk_config_defaults` (which keeps `struct_size`) and set at least
/// `dir`, `host_product` and `host_version`. A field past a host's `struct_size` takes the value
/// the defaults function writes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_cache_disk_config {
    /// `sizeof(struct gpusvc_program_cache_disk_config)`, set by the host (and kept by the
    /// `_defaults` function): the library reads only that many bytes, the fields past it take
    /// their defaults.
    pub struct_size: usize,
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
    pub log: gpusvc_program_cache_disk_log_callback,
    /// Passed to `log`.
    pub log_user_data: *mut c_void,
}

/// The defaults of a disk config (`gpusvc_program_cache_disk_config_defaults`): enabled, LZ4
/// as the crate's default, the crate's refusal limit, no ids, no strings, no log.
pub(crate) fn disk_config_defaults() -> gpusvc_program_cache_disk_config {
    // The crate's defaults, so C and Rust hosts agree.
    gpusvc_program_cache_disk_config {
        struct_size: size_of::<gpusvc_program_cache_disk_config>(),
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
        compress: DiskConfig::DEFAULT_COMPRESS,
        max_consecutive_rejections: DiskConfig::DEFAULT_MAX_CONSECUTIVE_REJECTIONS,
        log: None,
        log_user_data: std::ptr::null_mut(),
    }
}

growable!(gpusvc_program_cache_disk_config {
    first: log_user_data,
    last: log_user_data,
    defaults: disk_config_defaults(),
});

/// What the startup load did. The host sets `struct_size = sizeof(struct
/// gpusvc_program_cache_disk_load_report)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_program_cache_disk_load_report {
    /// Set by the host to `sizeof(struct gpusvc_program_cache_disk_load_report)` before the call: the library writes only that
    /// many bytes and sets this to the bytes written.
    pub struct_size: usize,
    /// Entries loaded into memory.
    pub loaded: usize,
    /// Damaged or foreign entries rejected (and deleted).
    pub rejected: usize,
    /// Entries left on disk because the memory budget was full.
    pub skipped: usize,
    /// Time from the cache's creation to the end of the load, in microseconds.
    pub elapsed_us: u64,
}

impl From<LoadReport> for gpusvc_program_cache_disk_load_report {
    fn from(r: LoadReport) -> Self {
        gpusvc_program_cache_disk_load_report {
            struct_size: size_of::<Self>(),
            loaded: r.loaded,
            rejected: r.rejected,
            skipped: r.skipped,
            elapsed_us: u64::try_from(r.elapsed.as_micros()).unwrap_or(u64::MAX),
        }
    }
}

growable!(gpusvc_program_cache_disk_load_report {
    first: elapsed_us,
    last: elapsed_us
});
sized_default!(gpusvc_program_cache_disk_load_report);

/// The disk store's statistics (a snapshot; counters since the cache was made). The host sets
/// `struct_size = sizeof(struct gpusvc_program_cache_disk_stats_snapshot)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_program_cache_disk_stats_snapshot {
    /// Set by the host to `sizeof(struct gpusvc_program_cache_disk_stats_snapshot)` before the call: the library writes only that
    /// many bytes and sets this to the bytes written.
    pub struct_size: usize,
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
    /// Appends of records to the LRU log, hot list or compiled-shader list that failed, one
    /// per batch: the records not written are lost, never an entry. (Added after `compactions`: written
    /// only when `struct_size` covers it.)
    pub record_errors: u64,
}

growable!(gpusvc_program_cache_disk_stats_snapshot {
    first: compactions,
    last: record_errors
});
sized_default!(gpusvc_program_cache_disk_stats_snapshot);

// ---- configuration in ----

fn text_field(ptr: *const c_char, name: &str) -> Result<String, FfiError> {
    // SAFETY: the caller's contract: NULL or a NUL-terminated string.
    Ok(unsafe { cstr_in(ptr, name) }?.to_owned())
}

/// The stamp and disk configuration (without the log) from the C structs.
///
/// # Safety
/// The pointers in `disk` and `driver` follow the contracts documented on their structs.
pub(crate) unsafe fn disk_config_in(
    disk: &gpusvc_program_cache_disk_config,
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
            "max_consecutive_rejections is 0 (use gpusvc_program_cache_disk_config_defaults: 3)",
        ));
    }
    let driver_build_id = if disk.driver_build_id.is_null() {
        None
    } else {
        Some(text_field(disk.driver_build_id, "driver_build_id")?)
    };
    let driver = DriverIdentity {
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
    };
    // The format fields are the crate's (this build's entry format and pointer width).
    let stamp = CompatibilityStamp::new(
        driver,
        text_field(disk.host_product, "host_product")?,
        text_field(disk.host_version, "host_version")?,
    );
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
            crate::kit::gpusvc_result::GPUSVC_INVALID_UTF8,
            format!("`dir` is not valid UTF-8: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::gpusvc_result;
    use crate::program_cache::disk::gpusvc_program_cache_disk_config_defaults;

    fn disk(dir: &str) -> gpusvc_program_cache_disk_config {
        let mut c = std::mem::MaybeUninit::<gpusvc_program_cache_disk_config>::zeroed();
        // SAFETY: a live local; `struct_size` is set before the defaults are written.
        unsafe {
            (&raw mut (*c.as_mut_ptr()).struct_size)
                .write(size_of::<gpusvc_program_cache_disk_config>())
        };
        // SAFETY: a live local slot.
        let r = unsafe { gpusvc_program_cache_disk_config_defaults(c.as_mut_ptr()) };
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
            struct_size: size_of::<gpusvc_driver_identity>(),
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
        assert_eq!(
            (s.format_version, s.pointer_width),
            (program_cache::disk::FORMAT_VERSION, usize::BITS)
        );
    }

    #[test]
    fn bad_configs_are_refused_with_the_right_code() {
        let code = |c: gpusvc_program_cache_disk_config, d: gpusvc_driver_identity| {
            // SAFETY: every pointer is NULL or a live string.
            format!("{:?}", unsafe { disk_config_in(&c, &d) }.unwrap_err())
        };
        let empty = disk("");
        assert!(code(empty, driver()).contains("INVALID_ARGUMENT"));
        let nul = disk("a\0b");
        assert!(code(nul, driver()).contains("INVALID_ARGUMENT"));
        let null_dir = gpusvc_program_cache_disk_config {
            struct_size: size_of::<gpusvc_program_cache_disk_config>(),
            dir: std::ptr::null(),
            ..disk("x")
        };
        assert!(code(null_dir, driver()).contains("NULL_ARGUMENT"));
        let zero = gpusvc_program_cache_disk_config {
            struct_size: size_of::<gpusvc_program_cache_disk_config>(),
            max_consecutive_rejections: 0,
            ..disk("x")
        };
        assert!(code(zero, driver()).contains("INVALID_ARGUMENT"));
        let no_host = gpusvc_program_cache_disk_config {
            struct_size: size_of::<gpusvc_program_cache_disk_config>(),
            host_product: std::ptr::null(),
            ..disk("x")
        };
        assert!(code(no_host, driver()).contains("NULL_ARGUMENT"));
        let no_version = gpusvc_program_cache_disk_config {
            struct_size: size_of::<gpusvc_program_cache_disk_config>(),
            host_version: std::ptr::null(),
            ..disk("x")
        };
        assert!(code(no_version, driver()).contains("NULL_ARGUMENT"));
        let bad = [0xffu8, 0];
        let not_utf8 = gpusvc_driver_identity {
            struct_size: size_of::<gpusvc_driver_identity>(),
            gl_renderer: bad.as_ptr().cast(),
            ..driver()
        };
        assert!(code(disk("x"), not_utf8).contains("INVALID_UTF8"));
    }
}
