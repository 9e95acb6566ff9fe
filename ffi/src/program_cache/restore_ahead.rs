//! `gpusvc_restore_ahead_*`: restoring the programs a cache holds ahead of the host's links, on
//! a thread of its own with a context in the share group of the host's `gpusvc_gl_context`
//! (`program_cache::RestoreAhead`), and `gpusvc_program_manager_new_gl_restore_ahead`, whose
//! cache hits take the programs restored there.
//!
//! Everything the Rust type promises holds here (it is the same object): the host never waits
//! for the thread except for a restore of the very key it asks for that is under way (one
//! `glProgramBinary`); a key the thread has not reached is restored by the host; a hit takes
//! exactly what a hit without it gives (the same program, link status and reflection); no
//! program restored before a clear is handed out after it. Tested in
//! `ffi/tests/restore_ahead_abi.rs` and, through `gpusvc.hpp`, in
//! `cpp-tests/restore_ahead_test.cpp`.
//!
//! A `gpusvc_restore_ahead` may be used from any thread; it is started on the context's thread.
// Without the `gl` feature only the types stay; the exports need headless-gl.
#![cfg_attr(not(feature = "gl"), allow(dead_code, unused_imports))]

use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "gl")]
use program_cache::{RestoreAhead, RestoreAheadConfig, RestoreAheadStats};

#[cfg(feature = "gl")]
use crate::gl::{gl_context, gpusvc_gl_context};
use crate::kit::handle::{self, Kind};
use crate::kit::sized::{SizedOut, answer_sized_into, growable, sized_default, sized_in};
use crate::kit::{FfiError, answer_into, ffi_guard, gpusvc_result};
use crate::program_cache::{cache, gpusvc_program_cache};

/// An opaque restore-ahead: a thread restoring a cache's stored programs ahead of the host's
/// links. Usable from any thread.
#[derive(Debug)]
pub struct gpusvc_restore_ahead {
    _opaque: [u8; 0],
}

/// How much a restore-ahead restores (`gpusvc_restore_ahead_start`). Set `struct_size =
/// sizeof(struct gpusvc_restore_ahead_config)` and call `gpusvc_restore_ahead_config_defaults`
/// (which keeps `struct_size`); a field past a host's `struct_size` takes its default.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_restore_ahead_config {
    /// `sizeof(struct gpusvc_restore_ahead_config)`, set by the host: the library reads only
    /// that many bytes, the fields past it take their defaults.
    pub struct_size: usize,
    /// At most this many programs (default 1024). The thread stops at the first program that
    /// would go over this or `max_bytes`.
    pub max_programs: u64,
    /// At most this many bytes of program binaries (default 64 MiB).
    pub max_bytes: u64,
    /// How long the thread waits for the cache's startup load from disk before it gives up,
    /// in milliseconds (default 10 000).
    pub load_timeout_ms: u64,
}

#[cfg(feature = "gl")]
impl From<RestoreAheadConfig> for gpusvc_restore_ahead_config {
    fn from(c: RestoreAheadConfig) -> Self {
        gpusvc_restore_ahead_config {
            struct_size: size_of::<Self>(),
            max_programs: c.max_programs as u64,
            max_bytes: c.max_bytes as u64,
            load_timeout_ms: u64::try_from(c.load_timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

#[cfg(feature = "gl")]
growable!(gpusvc_restore_ahead_config {
    first: load_timeout_ms,
    last: load_timeout_ms,
    defaults: RestoreAheadConfig::default().into(),
});

#[cfg(feature = "gl")]
impl From<gpusvc_restore_ahead_config> for RestoreAheadConfig {
    fn from(c: gpusvc_restore_ahead_config) -> Self {
        // Counts past what this machine can address mean "no limit".
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        RestoreAheadConfig {
            max_programs: size(c.max_programs),
            max_bytes: size(c.max_bytes),
            load_timeout: Duration::from_millis(c.load_timeout_ms),
        }
    }
}

/// What a restore-ahead did so far (`gpusvc_restore_ahead_stats`). The host sets `struct_size =
/// sizeof(struct gpusvc_restore_ahead_stats_snapshot)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_restore_ahead_stats_snapshot {
    /// Set by the host to `sizeof(struct gpusvc_restore_ahead_stats_snapshot)` before the call: the
    /// library writes only that many bytes and sets this to the bytes written.
    pub struct_size: usize,
    /// Programs the thread restored (the driver took the binary).
    pub restored: u64,
    /// Binaries the driver refused on the thread, or programs it could not hand over (the
    /// host's own restore then decides).
    pub refused: u64,
    /// Restored programs the host's links took.
    pub taken: u64,
    /// Times a host link waited for a restore of its key under way.
    pub waited: u64,
    /// Total time of those waits, in microseconds.
    pub waited_us: u64,
    /// Restored programs deleted on the thread without the host taking them.
    pub deleted_unclaimed: u64,
    /// Restored programs dropped as stale (the cache was cleared, dropped its disk entries, or
    /// moved to critical memory pressure, however briefly) before the host took them.
    pub stale: u64,
    /// Stored programs left alone for the config's limits.
    pub over_limits: u64,
    /// Whether the thread has gone through every program it will restore.
    pub done: bool,
    /// Whether the thread could not start restoring (no shared context, or the startup load
    /// did not end within `load_timeout_ms`); it then restored nothing, and the reason is
    /// logged (`gpusvc_log_*`).
    pub failed: bool,
    /// Always 0 (the struct's padding, made explicit).
    pub reserved: [u8; 6],
}

#[cfg(feature = "gl")]
impl From<RestoreAheadStats> for gpusvc_restore_ahead_stats_snapshot {
    fn from(s: RestoreAheadStats) -> Self {
        gpusvc_restore_ahead_stats_snapshot {
            struct_size: size_of::<Self>(),
            restored: s.restored,
            refused: s.refused,
            taken: s.taken,
            waited: s.waited,
            waited_us: s.waited_us,
            deleted_unclaimed: s.deleted_unclaimed,
            stale: s.stale,
            over_limits: s.over_limits,
            done: s.done,
            failed: s.error.is_some(),
            reserved: [0; 6],
        }
    }
}

#[cfg(feature = "gl")]
growable!(gpusvc_restore_ahead_stats_snapshot {
    first: reserved,
    last: reserved
});
#[cfg(feature = "gl")]
sized_default!(gpusvc_restore_ahead_stats_snapshot);

/// The object behind a restore-ahead handle.
#[cfg(feature = "gl")]
pub(crate) fn restore_ahead(
    ahead: *const gpusvc_restore_ahead,
) -> Result<Arc<RestoreAhead>, FfiError> {
    handle::shared(ahead, "ahead", Kind::RestoreAhead)
}

/// Writes the defaults into `*out`: 1024 programs, 64 MiB of binaries, 10 s for the startup
/// load.
///
/// The host sets `out->struct_size` first; it is kept, and only that many bytes are written.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_restore_ahead_config_defaults(
    out: *mut gpusvc_restore_ahead_config,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { SizedOut::new(out, "out") }?;
        out.write_keeping_size(RestoreAheadConfig::default().into());
        Ok(())
    })
}

/// Starts restoring the programs `cache` holds (`*config`, or the defaults when `config` is
/// NULL) on a thread of its own (`gpusvc-restore-ahead`), with a context it makes in the share
/// group of `ctx`; a new handle into `*out`. The thread waits for the cache's startup load,
/// then restores the stored programs in the cache's eviction order (the least recently used
/// first: a host that links in the order of its previous run asks for those last, so the host
/// and the thread meet in the middle). Start it as soon as the cache is open, before the host
/// builds its programs, and make the program manager with
/// `gpusvc_program_manager_new_gl_restore_ahead`.
///
/// It costs a second thread until `gpusvc_restore_ahead_release_unclaimed` or
/// `gpusvc_restore_ahead_free` (and every manager made with it) lets go: release it once the
/// host's startup links are done. Its context is kept for the next restore-ahead started from
/// `ctx` and destroyed with `ctx` (`gpusvc_gl_context_free`, once every manager holding the
/// context is freed). Must be called on `ctx`'s thread (`GPUSVC_WRONG_THREAD` otherwise).
/// `GPUSVC_PROGRAM_CACHE_RESTORE_AHEAD_SPAWN_FAILED` when the thread cannot be spawned.
///
/// # Safety
/// `ctx` is NULL or a pointer from `gpusvc_gl_context_open`; `cache` is NULL or a handle value;
/// `config` is NULL or valid for reading `config->struct_size` bytes; `out` is NULL or valid
/// for one write.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_restore_ahead_start(
    ctx: *const gpusvc_gl_context,
    cache: *const gpusvc_program_cache,
    config: *const gpusvc_restore_ahead_config,
    out: *mut *mut gpusvc_restore_ahead,
) -> gpusvc_result {
    // SAFETY: `config` is NULL (the defaults) or valid for `struct_size` bytes, whose integer
    // fields accept any bit pattern (contract); `out` is forwarded.
    unsafe {
        answer_into(
            || {
                let ctx = gl_context(ctx)?;
                let cache = self::cache(cache)?;
                let config = if config.is_null() {
                    RestoreAheadConfig::default()
                } else {
                    sized_in(config, "config")?.into()
                };
                Ok((ctx, cache, config))
            },
            out,
            "out",
            |(ctx, cache, config)| {
                let ahead = RestoreAhead::start(&ctx, cache, config).map_err(|e| {
                    FfiError::new(
                        gpusvc_result::GPUSVC_PROGRAM_CACHE_RESTORE_AHEAD_SPAWN_FAILED,
                        format!("spawning the restore-ahead thread: {e}"),
                    )
                })?;
                Ok(handle::new_shared(Kind::RestoreAhead, ahead))
            },
        )
    }
}

/// What the thread did so far, into `*out`.
///
/// # Safety
/// `ahead` is NULL or a handle value; `out` is NULL or valid for reading and writing
/// `out->struct_size` bytes.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_restore_ahead_stats(
    ahead: *const gpusvc_restore_ahead,
    out: *mut gpusvc_restore_ahead_stats_snapshot,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || restore_ahead(ahead),
            out,
            "out",
            |a| Ok(a.stats().into()),
        )
    }
}

/// Stops the thread without waiting for it: it restores nothing more and deletes the programs
/// nobody took; links made after this restore every program themselves. Idempotent.
///
/// # Safety
/// `ahead` is NULL or a handle value.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_restore_ahead_release_unclaimed(
    ahead: *const gpusvc_restore_ahead,
) -> gpusvc_result {
    ffi_guard(|| {
        restore_ahead(ahead)?.release_unclaimed();
        Ok(())
    })
}

/// Waits at most `timeout_ms` milliseconds until the thread has gone through every program it
/// will restore; whether it has into `*out_done`.
///
/// # Safety
/// `ahead` is NULL or a handle value; `out_done` is NULL or valid for one write.
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_restore_ahead_wait_until_done(
    ahead: *const gpusvc_restore_ahead,
    timeout_ms: u64,
    out_done: *mut bool,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || restore_ahead(ahead),
            out_done,
            "out_done",
            |a| Ok(a.wait_until_done(Duration::from_millis(timeout_ms))),
        )
    }
}

/// Frees a restore-ahead; NULL is a no-op. It first releases it
/// (`gpusvc_restore_ahead_release_unclaimed`): the thread restores nothing more and deletes the
/// programs nobody took. The thread is joined when the last reference goes: here, or when the
/// last manager made with it is freed. Programs the host took stay the host's.
///
/// # Safety
/// `ahead` is NULL or a handle value (a freed or foreign one is `GPUSVC_INVALID_HANDLE`).
#[cfg(feature = "gl")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_restore_ahead_free(
    ahead: *mut gpusvc_restore_ahead,
) -> gpusvc_result {
    ffi_guard(|| {
        if !ahead.is_null() {
            restore_ahead(ahead)?.release_unclaimed();
        }
        handle::free(ahead, Kind::RestoreAhead)
    })
}
