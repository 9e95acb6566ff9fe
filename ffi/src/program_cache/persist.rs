//! The GPU side of the persistence split seen from C: a sandboxed GPU process cannot open files,
//! so its cache hands every saved program to the host through a persistence sink
//! (`gpusvc_program_cache_persist_sink`, e.g. an IPC message to the browser process, which keeps
//! a `gpusvc_program_cache_store`) and takes the entries back at the next start with
//! `gpusvc_program_cache_insert_entry`. `gpusvc_program_cache_stamp_text` gives the stamp both
//! sides agree on, as text to send.
//!
//! The sink's callbacks run on the cache's persistence thread, behind a free-time gate that
//! `gpusvc_program_cache_free` closes, like the disk store's log callback.

use std::cell::Cell;
use std::ffi::{c_char, c_void};
use std::sync::Arc;

use program_cache::disk::{EntryError, InsertError, PersistConfig, PersistCounters, PersistSink};
use program_cache::{CompatibilityStamp, DiskConfig, DriverIdentity, ProgramKey, ShaderHash};

use crate::gl::gpusvc_driver_identity;
use crate::kit::{
    FfiError, Gate, GatedFn, HostFn, answer_sized_into, cstr_in, ffi_guard, gpusvc_result,
    growable, invalid_argument, null_argument, sized_default, sized_in, slice_in, text_out,
};
use crate::program_cache::types::{gpusvc_program_cache_sha1, shader_hashes_in};
use crate::program_cache::{cache, gpusvc_program_cache};

// ---- the sink ----

/// A persistence callback that receives a whole entry: `key` and `len` bytes of `entry` in
/// `program-cache/FORMAT.md`'s encoding (self-validating: this cache's stamp hash, the key,
/// checksums), to hand to `gpusvc_program_cache_store_put` on the other side. Both pointers are
/// valid only during the call (copy what you keep).
pub type gpusvc_program_cache_persist_entry_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        key: *const gpusvc_program_cache_sha1,
        entry: *const u8,
        len: usize,
    ),
>;

/// A persistence callback about one key (valid only during the call).
pub type gpusvc_program_cache_persist_key_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, key: *const gpusvc_program_cache_sha1)>;

/// A persistence callback about the whole store.
pub type gpusvc_program_cache_persist_store_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// A persistence callback with `count` shader hashes (valid only during the call).
pub type gpusvc_program_cache_persist_shaders_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        hashes: *const gpusvc_program_cache_sha1,
        count: usize,
    ),
>;

/// Where a sandboxed GPU process's cache sends what it would otherwise write to disk
/// (`gpusvc_program_cache_config.persist_sink`). Start from
/// `gpusvc_program_cache_persist_sink_defaults` and set `stamp` and the callbacks.
///
/// Every callback (each may be NULL) is called with `user_data` on the cache's persistence
/// thread (one library thread per cache, never the thread that saved or loaded, never with a
/// cache lock held), one call at a time, and must not unwind. A callback should post its
/// message and return: the cache never waits for it, except in
/// `gpusvc_program_cache_flush_persist` and the final free, which wait until what was queued has
/// been handed over. A job that finds the cache's queue full is dropped and counted (`dropped`
/// in `gpusvc_program_cache_persist_stats`). No call starts once `gpusvc_program_cache_free` of
/// the cache has returned, even while program managers keep the cache alive; the callbacks and
/// `user_data` must stay valid until then. A callback may call gpusvc (the cache included),
/// except `gpusvc_program_cache_flush_persist` (`GPUSVC_HANDLE_BUSY`: it would wait for the
/// callback itself); a sink call that such a nested call causes is made later, on the
/// persistence thread, as usual.
///
/// `entry_saved`, `entry_rejected`, `store_rejected` and `shaders_compiled` arrive in the order
/// they happened;
/// `entry_used` travels on a queue of its own and may arrive before the `entry_saved` of its key
/// or after its `entry_rejected` (a `gpusvc_program_cache_store_touch` of a key the store does
/// not hold is harmless).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_cache_persist_sink {
    /// `sizeof(struct gpusvc_program_cache_persist_sink)`, set by the host (kept by the
    /// `_defaults` function): the library reads only that many bytes.
    pub struct_size: usize,
    /// Passed to every callback.
    pub user_data: *mut c_void,
    /// A program was saved: its key and whole entry, for `gpusvc_program_cache_store_put`.
    pub entry_saved: gpusvc_program_cache_persist_entry_fn,
    /// The cache answered a load of `key` from memory (at most once per key per minute): for
    /// `gpusvc_program_cache_store_touch`, which keeps the store's most recently used order.
    pub entry_used: gpusvc_program_cache_persist_key_fn,
    /// The driver refused the binary of an entry inserted with
    /// `gpusvc_program_cache_insert_entry` (or, for a cache with a disk store too, one that
    /// store loaded): the store should delete it (`gpusvc_program_cache_store_remove`).
    pub entry_rejected: gpusvc_program_cache_persist_key_fn,
    /// The driver refused `max_consecutive_rejections` inserted binaries in a row: it changed in
    /// a way the stamp did not capture; every inserted entry has left memory, and the store
    /// should be emptied (`gpusvc_program_cache_store_clear`).
    pub store_rejected: gpusvc_program_cache_persist_store_fn,
    /// The stamp text (`gpusvc_program_cache_stamp_text`), `stamp_len` bytes of UTF-8 (no NUL
    /// needed): entries are encoded with its hash, and `gpusvc_program_cache_insert_entry`
    /// accepts only entries of it. Required.
    pub stamp: *const c_char,
    /// Length of `stamp` in bytes.
    pub stamp_len: usize,
    /// LZ4-compress entries (default on, as for the disk store).
    pub compress: bool,
    /// After this many inserted binaries refused by the driver in a row, every inserted entry
    /// leaves memory and `store_rejected` is called (> 0; default 3).
    pub max_consecutive_rejections: u32,
    /// Shaders that compiled and that no saved entry records (the good shaders of programs
    /// whose other shader failed), in batches (of up to 256, and at
    /// `gpusvc_program_cache_flush_persist` and the final free): for
    /// `gpusvc_program_cache_store_mark_compiled`, so the next start can hand them to
    /// `gpusvc_program_cache_insert_compiled` and compile none of them again. Queued in order
    /// with `entry_saved` (a batch taken before a `store_rejected` may arrive after it: its
    /// statuses still hold). (Added after `max_consecutive_rejections`: a host whose
    /// `struct_size` ends before it has none.)
    pub shaders_compiled: gpusvc_program_cache_persist_shaders_fn,
}

growable!(gpusvc_program_cache_persist_sink {
    first: max_consecutive_rejections,
    last: shaders_compiled,
    defaults: sink_defaults(),
});

fn sink_defaults() -> gpusvc_program_cache_persist_sink {
    gpusvc_program_cache_persist_sink {
        struct_size: size_of::<gpusvc_program_cache_persist_sink>(),
        user_data: std::ptr::null_mut(),
        entry_saved: None,
        entry_used: None,
        entry_rejected: None,
        store_rejected: None,
        stamp: std::ptr::null(),
        stamp_len: 0,
        compress: DiskConfig::DEFAULT_COMPRESS,
        max_consecutive_rejections: DiskConfig::DEFAULT_MAX_CONSECUTIVE_REJECTIONS,
        shaders_compiled: None,
    }
}

/// Writes the defaults into `*out`, whose `struct_size` the host has set (it is kept; only that
/// many bytes are written): no callbacks, no user data, no stamp (set it), LZ4 on, 3 refusals in
/// a row reject the store.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_persist_sink_defaults(
    out: *mut gpusvc_program_cache_persist_sink,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let out = unsafe { crate::kit::SizedOut::new(out, "out") }?;
        out.write_keeping_size(sink_defaults());
        Ok(())
    })
}

/// The host's callbacks, copied out of the sink struct.
#[derive(Debug, Clone, Copy)]
struct SinkFns {
    saved: gpusvc_program_cache_persist_entry_fn,
    used: gpusvc_program_cache_persist_key_fn,
    rejected: gpusvc_program_cache_persist_key_fn,
    store_rejected: gpusvc_program_cache_persist_store_fn,
    compiled: gpusvc_program_cache_persist_shaders_fn,
}

/// The host's sink as the cache takes it: every call goes through one free-time gate.
struct HostSink {
    host: GatedFn<SinkFns>,
}

impl HostSink {
    /// Calls the host through the gate, with this thread marked as inside a sink callback.
    fn call(&self, call: impl FnOnce(SinkFns, *mut c_void)) {
        /// Clears the mark, also when the call unwinds.
        struct Inside;
        impl Drop for Inside {
            fn drop(&mut self) {
                IN_SINK.with(|f| f.set(false));
            }
        }
        IN_SINK.with(|f| f.set(true));
        let _inside = Inside;
        self.host.call(call);
    }
}

impl PersistSink for HostSink {
    fn entry_saved(&self, key: &ProgramKey, entry: &[u8]) {
        self.call(|fns, user_data| {
            if let Some(f) = fns.saved {
                let key = gpusvc_program_cache_sha1::from(*key);
                // SAFETY: the host gave this callback and user_data for exactly this use and
                // keeps them valid until the cache is freed (the gate is open, so it has not
                // been); the key and the entry outlive the call.
                unsafe { f(user_data, &key, entry.as_ptr(), entry.len()) };
            }
        });
    }

    fn entry_used(&self, key: &ProgramKey) {
        self.call(|fns, user_data| {
            if let Some(f) = fns.used {
                let key = gpusvc_program_cache_sha1::from(*key);
                // SAFETY: as in `entry_saved`.
                unsafe { f(user_data, &key) };
            }
        });
    }

    fn entry_rejected(&self, key: &ProgramKey) {
        self.call(|fns, user_data| {
            if let Some(f) = fns.rejected {
                let key = gpusvc_program_cache_sha1::from(*key);
                // SAFETY: as in `entry_saved`.
                unsafe { f(user_data, &key) };
            }
        });
    }

    fn store_rejected(&self) {
        self.call(|fns, user_data| {
            if let Some(f) = fns.store_rejected {
                // SAFETY: as in `entry_saved`.
                unsafe { f(user_data) };
            }
        });
    }

    fn shaders_compiled(&self, hashes: &[ShaderHash]) {
        self.call(|fns, user_data| {
            if let Some(f) = fns.compiled {
                let hashes: Vec<gpusvc_program_cache_sha1> = hashes
                    .iter()
                    .map(|h| gpusvc_program_cache_sha1::from(*h))
                    .collect();
                // SAFETY: as in `entry_saved`; the array outlives the call.
                unsafe { f(user_data, hashes.as_ptr(), hashes.len()) };
            }
        });
    }
}

/// The persistence configuration of a cache from the host's sink (`None` for a NULL pointer),
/// and the sink's free-time gate for the cache handle to close.
///
/// # Safety
/// `sink` is NULL or valid for reading `struct_size` bytes, its `stamp` as documented.
pub(crate) unsafe fn persist_in(
    sink: *const gpusvc_program_cache_persist_sink,
) -> Result<Option<(PersistConfig, Arc<Gate>)>, FfiError> {
    if sink.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and valid for `struct_size` bytes (contract).
    let s = unsafe { sized_in(sink, "persist_sink") }?;
    // SAFETY: `stamp` is NULL or valid for `stamp_len` bytes (contract).
    let stamp = unsafe { stamp_in(s.stamp, s.stamp_len, "persist_sink.stamp") }?;
    if s.max_consecutive_rejections == 0 {
        return Err(invalid_argument(
            "persist_sink.max_consecutive_rejections is 0 (use \
             gpusvc_program_cache_persist_sink_defaults: 3)",
        ));
    }
    let fns = SinkFns {
        saved: s.entry_saved,
        used: s.entry_used,
        rejected: s.entry_rejected,
        store_rejected: s.store_rejected,
        compiled: s.shaders_compiled,
    };
    let (host, gate) = GatedFn::new(HostFn::new(fns, s.user_data));
    let config = PersistConfig {
        compress: s.compress,
        max_consecutive_rejections: s.max_consecutive_rejections,
        ..PersistConfig::new(stamp, Arc::new(HostSink { host }))
    };
    Ok(Some((config, gate)))
}

// ---- the stamp ----

/// What the stamp takes besides the driver identity (`gpusvc_program_cache_stamp_text`): the
/// same fields as `gpusvc_program_cache_disk_config`'s, so a GPU process that persists through a
/// sink names the same store its own disk store would. Zero it and set `struct_size`,
/// `host_product` and `host_version`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_cache_stamp_desc {
    /// `sizeof(struct gpusvc_program_cache_stamp_desc)`, set by the host.
    pub struct_size: usize,
    /// The host product (UTF-8, NUL-terminated, may be empty): which embedder or browser channel
    /// this is. Required.
    pub host_product: *const c_char,
    /// The host's version (UTF-8, NUL-terminated, may be empty). Required.
    pub host_version: *const c_char,
    /// The driver's build id (UTF-8, NUL-terminated), or NULL when unknown.
    pub driver_build_id: *const c_char,
    /// Whether `vendor_id` is known.
    pub has_vendor_id: bool,
    /// Whether `device_id` is known.
    pub has_device_id: bool,
    /// PCI vendor id of the GPU.
    pub vendor_id: u32,
    /// PCI device id of the GPU.
    pub device_id: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

growable!(gpusvc_program_cache_stamp_desc {
    first: reserved,
    last: reserved,
    defaults: gpusvc_program_cache_stamp_desc {
        struct_size: 0,
        host_product: std::ptr::null(),
        host_version: std::ptr::null(),
        driver_build_id: std::ptr::null(),
        has_vendor_id: false,
        has_device_id: false,
        vendor_id: 0,
        device_id: 0,
        reserved: 0,
    },
});

fn text_field(ptr: *const c_char, name: &str) -> Result<String, FfiError> {
    // SAFETY: the callers' contract: NULL or a NUL-terminated string.
    Ok(unsafe { cstr_in(ptr, name) }?.to_owned())
}

/// The stamp from the driver identity and the description.
///
/// # Safety
/// The pointers in both structs follow the contracts documented on their fields.
unsafe fn stamp_of(
    driver: &gpusvc_driver_identity,
    desc: &gpusvc_program_cache_stamp_desc,
) -> Result<CompatibilityStamp, FfiError> {
    if desc.reserved != 0 {
        return Err(invalid_argument("`desc.reserved` is not zero"));
    }
    let driver_build_id = if desc.driver_build_id.is_null() {
        None
    } else {
        Some(text_field(desc.driver_build_id, "driver_build_id")?)
    };
    let identity = DriverIdentity {
        gl_vendor: text_field(driver.gl_vendor, "gl_vendor")?,
        gl_renderer: text_field(driver.gl_renderer, "gl_renderer")?,
        gl_version: text_field(driver.gl_version, "gl_version")?,
        context: if driver.context.is_null() {
            String::new()
        } else {
            text_field(driver.context, "context")?
        },
        vendor_id: desc.has_vendor_id.then_some(desc.vendor_id),
        device_id: desc.has_device_id.then_some(desc.device_id),
        driver_build_id,
    };
    Ok(CompatibilityStamp::new(
        identity,
        text_field(desc.host_product, "host_product")?,
        text_field(desc.host_version, "host_version")?,
    ))
}

/// A stamp text from C: `len` bytes of UTF-8 that parse as a stamp.
///
/// # Safety
/// `ptr` is NULL or valid for `len` bytes of reads.
pub(crate) unsafe fn stamp_in(
    ptr: *const c_char,
    len: usize,
    name: &str,
) -> Result<CompatibilityStamp, FfiError> {
    if ptr.is_null() {
        return Err(null_argument(name));
    }
    // SAFETY: forwarded from this function's contract.
    let bytes = unsafe { slice_in(ptr.cast::<u8>(), len, name) }?;
    let text = std::str::from_utf8(bytes).map_err(|e| {
        FfiError::new(
            gpusvc_result::GPUSVC_INVALID_UTF8,
            format!("`{name}` is not valid UTF-8: {e}"),
        )
    })?;
    CompatibilityStamp::parse(text).ok_or_else(|| {
        FfiError::new(
            gpusvc_result::GPUSVC_PROGRAM_CACHE_BAD_STAMP,
            format!(
                "`{name}` ({len} bytes) is not a stamp text from gpusvc_program_cache_stamp_text \
                 (a field is missing or malformed, or a hash line does not match the fields)"
            ),
        )
    })
}

/// The stamp for a driver and a host, as the text both sides of the persistence split use: the
/// GPU process passes it in its `gpusvc_program_cache_persist_sink` and sends it to the process
/// that owns the disk, which opens the matching store with it
/// (`gpusvc_program_cache_store_config.stamp`). It is the `STAMP` file's text (UTF-8, one
/// `field: value` line per field, hash lines that prove it unedited); the store folder it names
/// is the one `gpusvc_program_cache_open` with the same identity and fields would use.
///
/// `*out_len` gets its length in bytes; with `buf` NULL and `len` 0 nothing else happens (a
/// size query); otherwise `len` must exceed the length (else `GPUSVC_INSUFFICIENT_SIZE`,
/// nothing written) and the text is copied NUL-terminated.
///
/// Errors: `GPUSVC_NULL_ARGUMENT` for a NULL string the stamp needs (only `context` and
/// `driver_build_id` may be NULL); `GPUSVC_INVALID_UTF8` for a string that is not UTF-8;
/// `GPUSVC_INVALID_ARGUMENT` for `reserved` not zero; `GPUSVC_UNSUPPORTED_STRUCT_SIZE` for a bad
/// `desc->struct_size`.
///
/// # Safety
/// `driver` is NULL or valid for reading `driver->struct_size` bytes, `desc` NULL or valid for reading
/// `desc->struct_size` bytes, their strings NULL or NUL-terminated; `buf` is NULL or valid for
/// `len` bytes of writes; `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_stamp_text(
    driver: *const gpusvc_driver_identity,
    desc: *const gpusvc_program_cache_stamp_desc,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: NULL or valid for `struct_size` bytes (contract).
        let driver = unsafe { sized_in(driver, "driver") }?;
        // SAFETY: NULL or valid for `struct_size` bytes (contract).
        let desc = unsafe { sized_in(desc, "desc") }?;
        // SAFETY: the strings follow the contract.
        let stamp = unsafe { stamp_of(&driver, &desc) }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { text_out(&stamp.describe(), (buf, "buf"), len, (out_len, "out_len")) }
    })
}

// ---- entries back in ----

/// The code of a rejected entry (shared with the store's `put`).
pub(crate) fn entry_error(e: &EntryError) -> FfiError {
    use gpusvc_result::*;
    let code = match e {
        EntryError::HeaderChecksum | EntryError::PayloadChecksum => {
            GPUSVC_PROGRAM_CACHE_ENTRY_DAMAGED
        }
        EntryError::ForeignStamp => GPUSVC_PROGRAM_CACHE_ENTRY_FOREIGN_STAMP,
        EntryError::Version(_) => GPUSVC_PROGRAM_CACHE_ENTRY_VERSION,
        EntryError::TooLarge(_) => GPUSVC_PROGRAM_CACHE_ENTRY_TOO_LARGE,
        EntryError::TruncatedHeader(_)
        | EntryError::BadMagic
        | EntryError::HeaderLen(_)
        | EntryError::Flags(_)
        | EntryError::KeyMismatch
        | EntryError::PayloadLength { .. }
        | EntryError::Decompress(_)
        | EntryError::Decode(_)
        | EntryError::NotAFile(_)
        | EntryError::Unreadable(_) => GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED,
    };
    FfiError::new(code, format!("invalid entry: {e}"))
}

fn insert_error(e: &InsertError) -> FfiError {
    use gpusvc_result::*;
    match e {
        InsertError::Invalid(e) => entry_error(e),
        InsertError::NotConfigured => {
            FfiError::new(GPUSVC_PROGRAM_CACHE_PERSIST_NOT_CONFIGURED, e.to_string())
        }
        InsertError::EmptyBinary => FfiError::new(GPUSVC_PROGRAM_CACHE_EMPTY_BINARY, e.to_string()),
        InsertError::NoRoom { .. } => FfiError::new(GPUSVC_PROGRAM_CACHE_NO_ROOM, e.to_string()),
    }
}

/// Validates an entry streamed back from the store (the bytes an `entry_saved` callback
/// received) and inserts its program into memory, as the disk store's startup load does: only
/// when it fits the budget in force without evicting anything, and marked as coming from
/// outside, so a binary the driver refuses is evicted, reported through the sink's
/// `entry_rejected`, and counts toward its `max_consecutive_rejections`. The bytes are copied;
/// the work (checks, decompression) runs on the calling thread. `*out_key` gets the key from the
/// entry's header (an entry for a key already in memory is accepted and changes nothing).
///
/// Refusals leave the cache unchanged: `GPUSVC_PROGRAM_CACHE_PERSIST_NOT_CONFIGURED` (the cache
/// has no `persist_sink`, so no stamp to check against), `GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED`
/// (not a whole entry: truncated, bad magic, header length, unknown flags, payload length,
/// LZ4 or decoding), `GPUSVC_PROGRAM_CACHE_ENTRY_DAMAGED` (a checksum),
/// `GPUSVC_PROGRAM_CACHE_ENTRY_FOREIGN_STAMP` (written under another stamp),
/// `GPUSVC_PROGRAM_CACHE_ENTRY_VERSION` (another entry format),
/// `GPUSVC_PROGRAM_CACHE_ENTRY_TOO_LARGE` (past FORMAT.md's bound; not read),
/// `GPUSVC_PROGRAM_CACHE_EMPTY_BINARY`, `GPUSVC_PROGRAM_CACHE_NO_ROOM` (does not fit without
/// evicting, or memory pressure is critical). The detail says which check failed. A `len` over
/// `PTRDIFF_MAX` is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `entry` is NULL or valid for `len` bytes of reads (NULL is refused even when `len` is 0);
/// `out_key` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_insert_entry(
    cache: *const gpusvc_program_cache,
    entry: *const u8,
    len: usize,
    out_key: *mut gpusvc_program_cache_sha1,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        crate::kit::answer_into(
            || {
                let cache = self::cache(cache)?;
                if entry.is_null() {
                    return Err(null_argument("entry"));
                }
                Ok((cache, slice_in(entry, len, "entry")?))
            },
            out_key,
            "out_key",
            |(cache, bytes)| {
                let key = cache.insert_entry(bytes).map_err(|e| insert_error(&e))?;
                Ok(key.into())
            },
        )
    }
}

/// Marks `count` shaders as known to compile: what the store kept of earlier processes'
/// `shaders_compiled` callbacks (`gpusvc_program_cache_store_compiled_shaders`), handed back at
/// startup, so the warm start compiles none of them on the driver. Bounded like every status of
/// a shader no cached program uses (`max_unreferenced_shader_statuses`: only that many of the
/// last hashes are read); they are not sent to the sink again. Hashes are copied. Works on any
/// cache (one without a sink too).
///
/// # Safety
/// `hashes` is NULL or valid for `count` reads (NULL allowed when `count` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_insert_compiled(
    cache: *const gpusvc_program_cache,
    hashes: *const gpusvc_program_cache_sha1,
    count: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let hashes = unsafe { shader_hashes_in(hashes, count, "hashes") }?;
        cache.insert_compiled(&hashes);
        Ok(())
    })
}

/// Waits until the persistence thread has handed everything queued so far to the sink (as long
/// as the host's callbacks take: for shutdown paths and tests). A no-op for a cache without a
/// sink. From inside a persistence sink callback (of any cache: the flush of its own cache would
/// wait for that very callback) it is `GPUSVC_HANDLE_BUSY`, nothing waited for.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_flush_persist(
    cache: *const gpusvc_program_cache,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        if in_sink() {
            return Err(FfiError::new(
                gpusvc_result::GPUSVC_HANDLE_BUSY,
                "gpusvc_program_cache_flush_persist called from inside a persistence sink \
                 callback: the flush would wait for that callback",
            ));
        }
        cache.flush_persist();
        Ok(())
    })
}

thread_local! {
    /// Whether this thread is inside a persistence sink callback (of any cache).
    static IN_SINK: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is inside a persistence sink callback.
fn in_sink() -> bool {
    IN_SINK.with(Cell::get)
}

/// The persistence counters of a cache (a snapshot; all zero and `configured` false for a cache
/// without a sink). The counts of calls made (`sent`, `used`, `rejected`, `store_rejections`)
/// count what the cache handed to the sink: a callback left NULL counts as called.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_program_cache_persist_stats_snapshot {
    /// `sizeof(struct gpusvc_program_cache_persist_stats_snapshot)`, set by the host before the
    /// call; the library writes only that many bytes and sets it to the bytes written.
    pub struct_size: usize,
    /// The cache was made with a `persist_sink`.
    pub configured: bool,
    /// Saves queued for the sink.
    pub saved: u64,
    /// `entry_saved` calls made.
    pub sent: u64,
    /// Jobs dropped because their queue was full (saves, uses, refusals, compiled batches).
    pub dropped: u64,
    /// Saves not sent because the entry would exceed FORMAT.md's payload bound.
    pub oversized: u64,
    /// `entry_used` calls made.
    pub used: u64,
    /// Entries inserted by `gpusvc_program_cache_insert_entry` (or already there).
    pub inserted: u64,
    /// `gpusvc_program_cache_insert_entry` calls refused.
    pub insert_refused: u64,
    /// `entry_rejected` calls made (the driver refused an inserted binary).
    pub rejected: u64,
    /// `store_rejected` calls made.
    pub store_rejections: u64,
    /// Shaders handed to `shaders_compiled` (counted also when the callback is NULL). (Added
    /// after `store_rejections`: written only when `struct_size` covers it.)
    pub compiled: u64,
}

growable!(gpusvc_program_cache_persist_stats_snapshot {
    first: store_rejections,
    last: compiled,
});
sized_default!(gpusvc_program_cache_persist_stats_snapshot);

impl From<Option<PersistCounters>> for gpusvc_program_cache_persist_stats_snapshot {
    fn from(c: Option<PersistCounters>) -> Self {
        let Some(c) = c else {
            return Self::default();
        };
        gpusvc_program_cache_persist_stats_snapshot {
            struct_size: 0,
            configured: true,
            saved: c.saved,
            sent: c.sent,
            dropped: c.dropped,
            oversized: c.oversized,
            used: c.used,
            inserted: c.inserted,
            insert_refused: c.insert_refused,
            rejected: c.rejected,
            store_rejections: c.store_rejections,
            compiled: c.compiled,
        }
    }
}

/// A snapshot of the persistence counters into `*out` (the host sets its `struct_size`; only
/// that many bytes are written, and `struct_size` becomes the bytes written).
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_persist_stats(
    cache: *const gpusvc_program_cache,
    out: *mut gpusvc_program_cache_persist_stats_snapshot,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || self::cache(cache),
            out,
            "out",
            |c| Ok(c.persist_counters().into()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_of_an_entry_has_its_code() {
        use gpusvc_result::*;
        let cases = [
            (
                EntryError::TruncatedHeader(3),
                GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED,
            ),
            (EntryError::BadMagic, GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED),
            (EntryError::Version(9), GPUSVC_PROGRAM_CACHE_ENTRY_VERSION),
            (
                EntryError::HeaderLen(1),
                GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED,
            ),
            (
                EntryError::HeaderChecksum,
                GPUSVC_PROGRAM_CACHE_ENTRY_DAMAGED,
            ),
            (EntryError::Flags(4), GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED),
            (
                EntryError::ForeignStamp,
                GPUSVC_PROGRAM_CACHE_ENTRY_FOREIGN_STAMP,
            ),
            (
                EntryError::KeyMismatch,
                GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED,
            ),
            (
                EntryError::PayloadLength {
                    declared: 1,
                    actual: 2,
                },
                GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED,
            ),
            (
                EntryError::PayloadChecksum,
                GPUSVC_PROGRAM_CACHE_ENTRY_DAMAGED,
            ),
            (
                EntryError::Decompress("x".into()),
                GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED,
            ),
            (
                EntryError::Decode("x".into()),
                GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED,
            ),
            (
                EntryError::TooLarge(1 << 40),
                GPUSVC_PROGRAM_CACHE_ENTRY_TOO_LARGE,
            ),
        ];
        for (e, code) in cases {
            let f = entry_error(&e);
            assert_eq!(f.code(), code, "{e:?}");
            assert!(format!("{f:?}").contains(&e.to_string()), "{f:?}");
        }
        assert_eq!(
            insert_error(&InsertError::NotConfigured).code(),
            GPUSVC_PROGRAM_CACHE_PERSIST_NOT_CONFIGURED
        );
        let no_room = InsertError::NoRoom {
            size: 10,
            used: 5,
            budget: 12,
        };
        assert_eq!(insert_error(&no_room).code(), GPUSVC_PROGRAM_CACHE_NO_ROOM);
        assert_eq!(
            insert_error(&InsertError::EmptyBinary).code(),
            GPUSVC_PROGRAM_CACHE_EMPTY_BINARY
        );
        // Each code of the block has its own number and message.
        for (code, n) in [
            (GPUSVC_PROGRAM_CACHE_PERSIST_NOT_CONFIGURED, 209),
            (GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED, 210),
            (GPUSVC_PROGRAM_CACHE_ENTRY_DAMAGED, 211),
            (GPUSVC_PROGRAM_CACHE_ENTRY_FOREIGN_STAMP, 212),
            (GPUSVC_PROGRAM_CACHE_ENTRY_VERSION, 213),
            (GPUSVC_PROGRAM_CACHE_ENTRY_TOO_LARGE, 214),
            (GPUSVC_PROGRAM_CACHE_NO_ROOM, 215),
            (GPUSVC_PROGRAM_CACHE_BAD_STAMP, 216),
            (GPUSVC_PROGRAM_CACHE_STORE_DIR_NOT_ABSOLUTE, 217),
            (GPUSVC_PROGRAM_CACHE_STORE_UNUSABLE, 218),
            (GPUSVC_PROGRAM_CACHE_STORE_IO, 219),
        ] {
            assert_eq!(code as u32, n);
            assert!(code.message().starts_with("program cache"), "{code:?}");
        }
    }
}
