//! `gpusvc_program_cache_*`: making, configuring and using a program cache (keys, compile and
//! link statuses, saves, loads, eviction, statistics, memory pressure).

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use program_cache::{
    CachedProgram, FailureRecord, ProgramBinaryData, ProgramCache, ProgramCacheBuilder, ProgramKey,
    ProgramKeyInput, SaveError, ShaderHash, ShaderStage, backend_shader_hash, compile_failure_key,
    program_key, shader_hash,
};

use crate::kit::handle::{self, Kind};
use crate::kit::{
    FfiError, Gate, Out, SizedOut, answer_into, answer_sized_into, cstr_in, ffi_guard,
    gpusvc_result, invalid_argument, list_out, sized_in, slice_in, source_in, text_in,
};
use crate::program_cache::entry::{found, gpusvc_program_cache_entry};
use crate::program_cache::histogram::{gpusvc_program_cache_histogram_callback, host_histogram};
use crate::program_cache::persist::persist_in;
use crate::program_cache::types::*;
use crate::program_cache::{cache, cache_query, gpusvc_program_cache};

/// Writes the defaults of a profile (`GPUSVC_PROGRAM_CACHE_PROFILE_*`) into `*out`, whose
/// `struct_size` the host has set (it is kept; only that many bytes are written).
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_config_defaults(
    profile: u32,
    out: *mut gpusvc_program_cache_config,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let out = unsafe { SizedOut::new(out, "out") }?;
        out.write_keeping_size(profile_in(profile)?.into());
        Ok(())
    })
}

/// Creates an empty program cache.
///
/// `histogram` (may be NULL) is called once per histogram sample with `user_data`, on whichever
/// thread recorded it, with no cache lock held and one call at a time (see
/// `gpusvc_program_cache_histogram_callback`). It must not unwind, and it and `user_data` must
/// stay valid until `gpusvc_program_cache_free` of this cache has returned: no call starts
/// after that.
///
/// With `config->persist_sink` set, every saved program is also handed to the host's sink and
/// `gpusvc_program_cache_insert_entry` takes entries back (see
/// `gpusvc_program_cache_persist_sink`).
///
/// Errors: `GPUSVC_INVALID_ARGUMENT` for an unknown policy, a budget over `PTRDIFF_MAX` or
/// `max_unreferenced_shader_statuses` 0; for a sink, `GPUSVC_PROGRAM_CACHE_BAD_STAMP`,
/// `GPUSVC_NULL_ARGUMENT` (no stamp), `GPUSVC_INVALID_UTF8` or `GPUSVC_INVALID_ARGUMENT`
/// (`max_consecutive_rejections` 0).
///
/// # Safety
/// `config` is NULL or valid for reading `config->struct_size` bytes, its `persist_sink` NULL
/// or valid as documented on `gpusvc_program_cache_persist_sink`; `out` is NULL or valid for
/// one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_new(
    config: *const gpusvc_program_cache_config,
    histogram: gpusvc_program_cache_histogram_callback,
    user_data: *mut c_void,
    out: *mut *mut gpusvc_program_cache,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: NULL or valid for `struct_size` bytes (contract); plain integers.
        let config = unsafe { sized_in(config, "config") }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        // SAFETY: the config's sink pointer follows this function's contract.
        let (builder, gates) = unsafe { builder(&config, histogram, user_data) }?;
        out.write(handle::new_shared_gated(
            Kind::ProgramCache,
            builder.build(),
            gates,
        ));
        Ok(())
    })
}

/// A builder for a cache with `config` and the host's `histogram` callback (may be NULL), and
/// the callback's free-time gate, for the cache handle to close (none for a NULL callback).
///
/// # Safety
/// `config.persist_sink` is NULL or valid for reading its `struct_size` bytes, its pointers as
/// documented on `gpusvc_program_cache_persist_sink`.
pub(crate) unsafe fn builder(
    config: &gpusvc_program_cache_config,
    histogram: gpusvc_program_cache_histogram_callback,
    user_data: *mut c_void,
) -> Result<(ProgramCacheBuilder, Vec<Arc<Gate>>), FfiError> {
    let mut builder = ProgramCache::builder(config_in(config)?)
        .cache_transform_feedback(config.cache_transform_feedback);
    let mut gates = Vec::new();
    // SAFETY: forwarded from this function's contract.
    if let Some((persist, gate)) = unsafe { persist_in(config.persist_sink) }? {
        builder = builder.persist(persist);
        gates.push(gate);
    }
    if let Some((callback, gate)) = host_histogram(histogram, user_data) {
        builder = builder.callback(callback);
        gates.push(gate);
    }
    Ok((builder, gates))
}

/// Frees a cache. NULL is a no-op (`GPUSVC_OK`); a freed or unknown handle is
/// `GPUSVC_INVALID_HANDLE`. Program managers made over the cache keep it alive until they are
/// freed.
///
/// The cache's histogram callback, with a disk store its log callback, and with a
/// `persist_sink` the sink's callbacks, are never called once this has returned, even while
/// program managers keep the cache alive (what they save afterwards is not sent to the sink):
/// this waits for a call in progress on another thread (called from inside one of them, it
/// does not wait for that call itself; nor for a call whose thread is waiting, in a free of its
/// own, for the callback this thread is in: two callbacks freeing each other's cache both
/// return).
///
/// A cache with a disk store (`gpusvc_program_cache_open`): when this frees the last
/// reference, it waits for the writes already queued. With a `persist_sink`, likewise until
/// the persistence thread has handed what was queued to the sink (its callbacks run during
/// this call then).
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_free(
    cache: *mut gpusvc_program_cache,
) -> gpusvc_result {
    ffi_guard(|| handle::free(cache, Kind::ProgramCache))
}

/// The configuration the cache was made with, into `*out` (the host sets its `struct_size`;
/// only that many bytes are written, and `struct_size` becomes the bytes written).
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_current_config(
    cache: *const gpusvc_program_cache,
    out: *mut gpusvc_program_cache_config,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || self::cache(cache),
            out,
            "out",
            |c| {
                Ok(gpusvc_program_cache_config {
                    cache_transform_feedback: c.caches_transform_feedback(),
                    ..c.config().into()
                })
            },
        )
    }
}

/// Hash of one shader as compiled: its stage (`GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*`), the source
/// (`source_len` bytes of UTF-8, non-empty) and the compile options that change the output
/// (opaque bytes; `options` may be NULL when `options_len` is 0). For a host that drives the
/// cache itself; a program manager hashes its shaders with
/// `gpusvc_program_cache_backend_shader_hash` instead, so this hash never names a manager's
/// shader (its compile status, its programs' keys).
///
/// # Safety
/// `source` is NULL or valid for `source_len` bytes; `options` is NULL or valid for
/// `options_len` bytes; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_shader_hash(
    stage: u32,
    source: *const c_char,
    source_len: usize,
    options: *const u8,
    options_len: usize,
    out: *mut gpusvc_program_cache_sha1,
) -> gpusvc_result {
    // SAFETY: `source`, `options` and `out` are forwarded from this function's contract.
    unsafe {
        answer_into(
            || shader_args_in(stage, source, source_len, options, options_len),
            out,
            "out",
            |(stage, source, options)| Ok(shader_hash(stage, source, options).into()),
        )
    }
}

/// The stage, source and compile options of the shader-hash exports, checked in that order.
///
/// # Safety
/// `source` is NULL or valid for `source_len` bytes; `options` is NULL or valid for
/// `options_len` bytes.
unsafe fn shader_args_in<'a>(
    stage: u32,
    source: *const c_char,
    source_len: usize,
    options: *const u8,
    options_len: usize,
) -> Result<(ShaderStage, &'a str, &'a [u8]), FfiError> {
    let stage = stage_in(stage)?;
    // SAFETY: forwarded from this function's contract.
    let source = unsafe { source_in(source, source_len) }?;
    // SAFETY: forwarded from this function's contract.
    let options = unsafe { slice_in(options, options_len, "options") }?;
    Ok((stage, source, options))
}

/// Hash of one shader as a program manager made with `backend_identity` (a NUL-terminated UTF-8
/// string, as given to `gpusvc_program_manager_new_gl` / `_new_host`) compiles it: what
/// `gpusvc_program_cache_shader_hash` covers (the same `stage`, `source` and `options`
/// arguments, checked the same way) plus that identity. It is what
/// `gpusvc_program_manager_shader_compiled_hash` reports and what the manager's compile
/// statuses, compile failures and program keys are keyed by, so a shader one backend compiled
/// is not taken as compiled by another backend sharing the cache.
///
/// # Safety
/// `source` is NULL or valid for `source_len` bytes; `options` is NULL or valid for
/// `options_len` bytes; `backend_identity` is NULL or a NUL-terminated string; `out` is NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_backend_shader_hash(
    stage: u32,
    source: *const c_char,
    source_len: usize,
    options: *const u8,
    options_len: usize,
    backend_identity: *const c_char,
    out: *mut gpusvc_program_cache_sha1,
) -> gpusvc_result {
    // SAFETY: `source`, `options`, `backend_identity` and `out` are forwarded from this
    // function's contract.
    unsafe {
        answer_into(
            || {
                let (stage, source, options) =
                    shader_args_in(stage, source, source_len, options, options_len)?;
                let identity = cstr_in(backend_identity, "backend_identity")?;
                Ok((stage, source, options, identity))
            },
            out,
            "out",
            |(stage, source, options, identity)| {
                Ok(backend_shader_hash(stage, source, options, identity).into())
            },
        )
    }
}

/// The program key of compiled shaders (vertex, fragment and the other stages) with a backend
/// identity, link options and the separable flag (binding and stage order do not matter;
/// varying order does). With the shaders' `gpusvc_program_manager_shader_compiled_hash`es
/// (`gpusvc_program_cache_backend_shader_hash` with the same backend identity, not
/// `gpusvc_program_cache_shader_hash`) it is the key `gpusvc_program_manager_linked_program_key`
/// reports for the same program.
///
/// # Safety
/// `input` is NULL or valid for reading `input->struct_size` bytes, its pointers as documented
/// on its fields; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_program_key(
    input: *const gpusvc_program_cache_program_key_input,
    out: *mut gpusvc_program_cache_sha1,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { answer_into(|| sized_in(input, "input"), out, "out", |i| key_of(&i)) }
}

/// The key of a program key input, read after the output pointer was checked.
///
/// # Safety
/// The pointers in `input` follow the contract documented on its fields.
unsafe fn key_of(
    input: &gpusvc_program_cache_program_key_input,
) -> Result<gpusvc_program_cache_sha1, FfiError> {
    // SAFETY: forwarded from this function's contract.
    let identity = unsafe { cstr_in(input.backend_identity, "backend_identity") }?;
    // SAFETY: forwarded from this function's contract.
    let link = unsafe { link_options_in(&input.link) }?;
    if input.reserved != [0; 7] {
        return Err(crate::kit::invalid_argument(
            "input->reserved is not all zero",
        ));
    }
    // SAFETY: forwarded from this function's contract.
    let others = unsafe { other_stages_in(input.other_stages, input.other_stage_count) }?;
    let key = program_key(&ProgramKeyInput {
        vertex: ShaderHash(input.vertex.bytes),
        fragment: ShaderHash(input.fragment.bytes),
        backend_identity: identity,
        attribute_bindings: &link.attribute_bindings,
        transform_feedback_varyings: &link.transform_feedback_varyings,
        transform_feedback_mode: link.transform_feedback_mode,
        other_stages: &others,
        separable: input.separable,
    });
    Ok(key.into())
}

/// The compile status of a shader (`GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_*`). The hash is copied.
/// A program manager's statuses are under `gpusvc_program_cache_backend_shader_hash` with its
/// backend identity.
///
/// # Safety
/// `hash` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_shader_compile_status(
    cache: *const gpusvc_program_cache,
    hash: *const gpusvc_program_cache_sha1,
    out: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        hash_query(cache, hash, out, |c, h| {
            compile_status_out(c.shader_compile_status(&h))
        })
    }
}

/// Records that a shader compiled successfully (the hash is copied). A program manager defers
/// the compile of a shader marked under `gpusvc_program_cache_backend_shader_hash` with its
/// backend identity; a mark under `gpusvc_program_cache_shader_hash` is not one it reads.
///
/// # Safety
/// `hash` is NULL or valid for one read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_mark_shader_compiled(
    cache: *const gpusvc_program_cache,
    hash: *const gpusvc_program_cache_sha1,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let hash = ShaderHash(unsafe { sha1_in(hash, "hash") }?);
        cache.shader_compile_succeeded(hash);
        Ok(())
    })
}

/// How many cached programs use a shader.
///
/// # Safety
/// `hash` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_shader_refcount(
    cache: *const gpusvc_program_cache,
    hash: *const gpusvc_program_cache_sha1,
    out: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { hash_query(cache, hash, out, |c, h| c.shader_refcount(&h)) }
}

/// The link status of a program (`GPUSVC_PROGRAM_CACHE_LINK_STATUS_*`): SUCCESS while its binary is cached.
///
/// # Safety
/// `key` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_link_status(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_program_cache_sha1,
    out: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        key_query(cache, key, out, "out", |c, k| {
            Ok(link_status_out(c.link_status(&k)))
        })
    }
}

/// The body of an export that answers about the shader `hash` of a cache through `out`: the
/// handle, the hash, then `out` are checked; the answer is written only on success.
///
/// # Safety
/// `hash` is NULL or valid for one read; `out` is NULL or valid for one write.
unsafe fn hash_query<T>(
    cache: *const gpusvc_program_cache,
    hash: *const gpusvc_program_cache_sha1,
    out: *mut T,
    answer: impl FnOnce(&ProgramCache, ShaderHash) -> T,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || with_sha1(cache, hash, "hash", ShaderHash),
            out,
            "out",
            |(c, h)| Ok(answer(&c, h)),
        )
    }
}

/// [`hash_query`] about the program `key`, with a fallible answer.
///
/// # Safety
/// `key` is NULL or valid for one read; `out` is NULL or valid for one write.
unsafe fn key_query<T>(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_program_cache_sha1,
    out: *mut T,
    out_name: &str,
    answer: impl FnOnce(&ProgramCache, ProgramKey) -> Result<T, FfiError>,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || with_sha1(cache, key, "key", ProgramKey),
            out,
            out_name,
            |(c, k)| answer(&c, k),
        )
    }
}

/// The cache and a digest (`ShaderHash` or `ProgramKey`, made by `wrap`), read in that order.
///
/// # Safety
/// `sha1` is NULL or valid for one read.
unsafe fn with_sha1<K>(
    cache: *const gpusvc_program_cache,
    sha1: *const gpusvc_program_cache_sha1,
    name: &str,
    wrap: fn([u8; 20]) -> K,
) -> Result<(Arc<ProgramCache>, K), FfiError> {
    let cache = self::cache(cache)?;
    // SAFETY: forwarded from this function's contract.
    Ok((cache, wrap(unsafe { sha1_in(sha1, name) }?)))
}

fn save_error(e: &SaveError) -> FfiError {
    let code = match e {
        SaveError::EmptyBinary => gpusvc_result::GPUSVC_PROGRAM_CACHE_EMPTY_BINARY,
        SaveError::OverBudget { .. } => gpusvc_result::GPUSVC_PROGRAM_CACHE_OVER_BUDGET,
        SaveError::CriticalPressure => gpusvc_result::GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE,
    };
    FfiError::new(code, e.to_string())
}

/// Stores a program under `key`, replacing an entry with the same key and evicting by policy
/// until it fits. Everything is copied in. The shaders it names become known-compiled and are
/// referenced by the entry. With `program->failure` set it stores a failure record instead
/// (see `gpusvc_program_cache_entry_desc::failure`; read back with
/// `gpusvc_program_cache_load_failure`).
///
/// Refusals leave the cache unchanged: `GPUSVC_PROGRAM_CACHE_EMPTY_BINARY` (also for a
/// malformed entry: a failure record with a binary or a log over 64 KiB), an unknown `failure`
/// or failed stage `GPUSVC_INVALID_ARGUMENT`,
/// `GPUSVC_PROGRAM_CACHE_OVER_BUDGET` (the entry alone exceeds the budget, a quarter of it under
/// moderate memory pressure),
/// `GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE`. A `binary_len` or count over `PTRDIFF_MAX` is
/// `GPUSVC_INVALID_ARGUMENT`, a non-UTF-8 name `GPUSVC_INVALID_UTF8`.
///
/// # Safety
/// `key` is NULL or valid for one read, `program` NULL or valid for reading
/// `program->struct_size` bytes, with its pointers as documented on its fields; `out_report`
/// is NULL or valid for reading and writing `out_report->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_save(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_program_cache_sha1,
    program: *const gpusvc_program_cache_entry_desc,
    out_report: *mut gpusvc_program_cache_save_report,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let key = ProgramKey(unsafe { sha1_in(key, "key") }?);
        // SAFETY: NULL or valid for `struct_size` bytes (contract).
        let desc = unsafe { sized_in(program, "program") }?;
        // SAFETY: an output argument (this function's contract).
        let out_report = unsafe { SizedOut::new(out_report, "out_report") }?;
        // SAFETY: forwarded from this function's contract.
        let bytes = unsafe { slice_in(desc.binary, desc.binary_len, "binary") }?;
        let value = CachedProgram {
            vertex_shader: ShaderHash(desc.vertex_shader.bytes),
            fragment_shader: ShaderHash(desc.fragment_shader.bytes),
            // SAFETY: forwarded from this function's contract.
            vertex: unsafe { shader_variables_in(&desc.vertex) }?,
            // SAFETY: forwarded from this function's contract.
            fragment: unsafe { shader_variables_in(&desc.fragment) }?,
            binary: ProgramBinaryData {
                format: desc.binary_format,
                bytes: bytes.to_vec(),
            },
            // SAFETY: forwarded from this function's contract.
            failure: unsafe { failure_in(&desc) }?,
            ..Default::default()
        };
        let page = desc.has_page.then_some(desc.page);
        let report = cache.save(key, value, page).map_err(|e| save_error(&e))?;
        let report = gpusvc_program_cache_save_report {
            struct_size: 0,
            replaced: report.replaced,
            evicted: report.evicted,
        };
        out_report.write(report);
        Ok(())
    })
}

/// The failure record a described entry carries, if any.
///
/// # Safety
/// `desc.failure_log` is NULL or valid for `desc.failure_log_len` bytes.
unsafe fn failure_in(
    desc: &gpusvc_program_cache_entry_desc,
) -> Result<Option<FailureRecord>, FfiError> {
    let compile_stage = match desc.failure {
        GPUSVC_PROGRAM_CACHE_FAILURE_NONE => return Ok(None),
        GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE => Some(stage_in(desc.failure_stage)?.gl_enum()),
        GPUSVC_PROGRAM_CACHE_FAILURE_LINK => None,
        other => {
            return Err(invalid_argument(format!(
                "`failure` is {other}, not a GPUSVC_PROGRAM_CACHE_FAILURE_* value"
            )));
        }
    };
    let log = match desc.failure_log_len {
        0 => "",
        // SAFETY: forwarded from this function's contract.
        len => unsafe { text_in(desc.failure_log, len, "failure_log") }?,
    };
    Ok(Some(FailureRecord {
        compile_stage,
        log: log.to_owned(),
    }))
}

/// The key under which a shader's compile failure is recorded for the backend
/// `backend_identity` (a NUL-terminated UTF-8 string): from the shader's hash (as
/// `gpusvc_program_cache_backend_shader_hash` or `gpusvc_program_cache_shader_hash` made it).
/// Save a `GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE` entry under it; look it up with
/// `gpusvc_program_cache_load_failure`.
///
/// # Safety
/// `hash` is NULL or valid for one read; `backend_identity` is NULL or a NUL-terminated string;
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_compile_failure_key(
    hash: *const gpusvc_program_cache_sha1,
    backend_identity: *const c_char,
    out: *mut gpusvc_program_cache_sha1,
) -> gpusvc_result {
    // SAFETY: `hash`, `backend_identity` and `out` are forwarded from this function's contract.
    unsafe {
        answer_into(
            || {
                let hash = ShaderHash(sha1_in(hash, "hash")?);
                Ok((hash, cstr_in(backend_identity, "backend_identity")?))
            },
            out,
            "out",
            |(hash, identity)| Ok(compile_failure_key(&hash, identity).into()),
        )
    }
}

/// Looks up a recorded failure (a failed compile under its
/// `gpusvc_program_cache_compile_failure_key`, a failed link under its program key) and copies
/// it into a new `gpusvc_program_cache_entry` (`gpusvc_program_cache_entry_failure` reads it).
/// A hit counts (`failure_hits`) and promotes the record; no record, or a program under the
/// key, is `GPUSVC_PROGRAM_CACHE_NOT_FOUND`. `gpusvc_program_cache_load` never returns a failure.
///
/// # Safety
/// `key` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_load_failure(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_program_cache_sha1,
    out: *mut *mut gpusvc_program_cache_entry,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { key_query(cache, key, out, "out", |c, k| found(&k, c.load_failure(&k))) }
}

/// Looks a program up and copies it into a new `gpusvc_program_cache_entry` (free it with
/// `gpusvc_program_cache_entry_free`). A hit counts and promotes the entry (and moves it to `page`
/// when `has_page`); a miss counts and returns `GPUSVC_PROGRAM_CACHE_NOT_FOUND`.
///
/// # Safety
/// `key` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_load(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_program_cache_sha1,
    has_page: bool,
    page: u64,
    out: *mut *mut gpusvc_program_cache_entry,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        key_query(cache, key, out, "out", |c, k| {
            found(&k, c.load(&k, has_page.then_some(page)))
        })
    }
}

/// Like `gpusvc_program_cache_load` without changing recency or counters, except that a
/// failure record under `key` is handed out too (`gpusvc_program_cache_entry_failure` says
/// which it is; its binary is empty).
///
/// # Safety
/// `key` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_peek(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_program_cache_sha1,
    out: *mut *mut gpusvc_program_cache_entry,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { key_query(cache, key, out, "out", |c, k| found(&k, c.peek(&k))) }
}

/// Removes one program; `*out_removed` says whether it was there.
///
/// # Safety
/// `key` is NULL or valid for one read; `out_removed` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_evict(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_program_cache_sha1,
    out_removed: *mut bool,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        key_query(cache, key, out_removed, "out_removed", |c, k| {
            Ok(c.evict(&k))
        })
    }
}

/// The keys of the cached programs in the order the policy would evict them (next victim
/// first), with the count-query pattern: `keys` NULL and `len` 0 only count; otherwise `len`
/// must be at least the count (`GPUSVC_INSUFFICIENT_SIZE`, nothing written).
///
/// # Safety
/// `keys` is NULL or valid for `len` writes; `out_count` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_eviction_order(
    cache: *const gpusvc_program_cache,
    keys: *mut gpusvc_program_cache_sha1,
    len: usize,
    out_count: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        let order: Vec<gpusvc_program_cache_sha1> =
            cache.eviction_order().into_iter().map(Into::into).collect();
        // SAFETY: forwarded from this function's contract.
        unsafe {
            list_out(
                &order,
                (keys, "keys"),
                len,
                (out_count, "out_count"),
                "keys",
            )
        }
    })
}

/// A snapshot of the counters, the bytes and the number of programs stored, into `*out` (the
/// host sets its `struct_size`; only that many bytes are written, and `struct_size` becomes the
/// bytes written).
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_stats(
    cache: *const gpusvc_program_cache,
    out: *mut gpusvc_program_cache_stats_snapshot,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || self::cache(cache),
            out,
            "out",
            |cache| {
                let c = cache.counters();
                Ok(gpusvc_program_cache_stats_snapshot {
                    struct_size: 0,
                    counters: gpusvc_program_cache_counters {
                        hits: c.hits,
                        misses: c.misses,
                        evictions: c.evictions,
                        driver_rejections: c.driver_rejections,
                        saves: c.saves,
                        rejected_saves: c.rejected_saves,
                        status_hits: c.status_hits,
                        status_misses: c.status_misses,
                    },
                    size_bytes: cache.size_bytes(),
                    entries: cache.len(),
                    failure_hits: c.failure_hits,
                })
            },
        )
    }
}

/// Evicts by policy until at most `limit` bytes are stored; `*out_freed` gets the bytes freed.
///
/// # Safety
/// `out_freed` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_trim(
    cache: *const gpusvc_program_cache,
    limit: usize,
    out_freed: *mut usize,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { cache_query(cache, out_freed, "out_freed", |c| Ok(c.trim(limit))) }
}

/// Applies a memory-pressure level (`GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_*`): MODERATE trims to a quarter of
/// the budget and keeps the cache there (saves evict down to it, a larger entry is refused with
/// `GPUSVC_PROGRAM_CACHE_OVER_BUDGET`), CRITICAL drops everything and refuses saves (program
/// managers then do not read binaries out of the driver at all), each until the level is NONE
/// again.
/// `*out_freed` gets the bytes freed.
///
/// # Safety
/// `out_freed` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_set_memory_pressure(
    cache: *const gpusvc_program_cache,
    level: u32,
    out_freed: *mut usize,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || Ok((self::cache(cache)?, memory_pressure_in(level)?)),
            out_freed,
            "out_freed",
            |(c, level)| Ok(c.set_memory_pressure(level)),
        )
    }
}

/// Drops every program and every status. Statistics are kept. With a disk store, its entries
/// are deleted too, by the disk writer after the writes already queued:
/// `gpusvc_program_cache_flush_disk` waits until they are gone.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_clear(
    cache: *const gpusvc_program_cache,
) -> gpusvc_result {
    ffi_guard(|| {
        self::cache(cache)?.clear();
        Ok(())
    })
}
