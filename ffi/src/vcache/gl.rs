//! Measuring on a `gpusvc_gl_context`: `gpusvc_vcache_measure` (per-vertex vertex-shader
//! invocations of one mesh's draw, counted by the shader itself) and `gpusvc_vcache_fit` (the
//! probe battery measured once, then every candidate model scored against it), with the fit's
//! result handle and its accessors.

use std::ffi::c_void;
use std::sync::Arc;

use vertex_cache::analyze;
use vertex_cache::battery::Battery;
use vertex_cache::fit::{FitProgress, FitResult, Fitted, SearchSpace, fit};
use vertex_cache::measure::{DrawOptions, IndexType, MeasureError, Measurer, Raster};

use crate::gl::{gl_context, gpusvc_gl_context};
use crate::kit::error::insufficient_size;
use crate::kit::handle::{self, Kind};
use crate::kit::{
    FfiError, HostFn, Out, SizedOut, answer_sized_into, c_enum, ffi_guard, gpusvc_result, growable,
    invalid_argument, sized_default, sized_in,
};
use crate::vcache::types::*;

/// Index type of a measured draw: 32-bit indices (`GL_UNSIGNED_INT`; the default, 0).
pub const GPUSVC_VCACHE_INDEX_TYPE_U32: u32 = 0u32;
/// Index type of a measured draw: 16-bit indices (`GL_UNSIGNED_SHORT`); every index must be
/// below 65536.
pub const GPUSVC_VCACHE_INDEX_TYPE_U16: u32 = 1u32;

/// After the vertex shader, triangles are rasterized into a small offscreen target, as in a
/// real draw (the default, 0).
pub const GPUSVC_VCACHE_RASTER_OFFSCREEN: u32 = 0u32;
/// After the vertex shader, primitives are dropped (`GL_RASTERIZER_DISCARD`).
pub const GPUSVC_VCACHE_RASTER_DISCARD: u32 = 1u32;

c_enum!(fn index_type_in("GPUSVC_VCACHE_INDEX_TYPE") -> IndexType {
    GPUSVC_VCACHE_INDEX_TYPE_U32 => IndexType::U32,
    GPUSVC_VCACHE_INDEX_TYPE_U16 => IndexType::U16,
});

c_enum!(fn raster_in("GPUSVC_VCACHE_RASTER") -> Raster {
    GPUSVC_VCACHE_RASTER_OFFSCREEN => Raster::Offscreen,
    GPUSVC_VCACHE_RASTER_DISCARD => Raster::Discard,
});

/// How `gpusvc_vcache_measure` draws the mesh. A zeroed struct with `struct_size = sizeof(struct
/// gpusvc_vcache_draw_options)` is the default: 32-bit indices, plain `glDrawElements`,
/// rasterized; so is every field past a host's `struct_size`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_vcache_draw_options {
    /// `sizeof(struct gpusvc_vcache_draw_options)`, set by the host: the library reads only that
    /// many bytes, the fields past it take their defaults (0).
    pub struct_size: usize,
    /// A `GPUSVC_VCACHE_INDEX_TYPE_*` value.
    pub index_type: u32,
    /// `basevertex` of `glDrawElementsBaseVertex` (0: plain `glDrawElements`); the counts are
    /// still reported per index value (entry v is the count of index v).
    pub base_vertex: u32,
    /// A `GPUSVC_VCACHE_RASTER_*` value.
    pub raster: u32,
    /// Must be 0 (else `GPUSVC_INVALID_ARGUMENT`): keeps the struct free of padding after its
    /// last field, so a field added later lies past today's size.
    pub reserved: u32,
}

growable!(gpusvc_vcache_draw_options {
    first: reserved,
    last: reserved,
    defaults: gpusvc_vcache_draw_options {
        struct_size: 0,
        index_type: 0,
        base_vertex: 0,
        raster: 0,
        reserved: 0,
    },
});
sized_default!(gpusvc_vcache_draw_options);

fn draw_options_in(o: &gpusvc_vcache_draw_options) -> Result<DrawOptions, FfiError> {
    if o.reserved != 0 {
        return Err(invalid_argument(format!(
            "gpusvc_vcache_draw_options.reserved is {}, not 0",
            o.reserved
        )));
    }
    Ok(DrawOptions {
        index_type: index_type_in(o.index_type)?,
        base_vertex: o.base_vertex,
        raster: raster_in(o.raster)?,
    })
}

/// What `gpusvc_vcache_measure` found: the mesh is drawn twice, and the analysis is that of the
/// first draw's counts. The host sets `struct_size = sizeof(struct gpusvc_vcache_measurement)`
/// before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct gpusvc_vcache_measurement {
    /// Set by the host to `sizeof(struct gpusvc_vcache_measurement)` before the call: the library writes only that
    /// many bytes and sets this to the bytes written.
    pub struct_size: usize,
    /// Statistics of the first draw's per-vertex counts (`warps` is 0).
    pub analysis: gpusvc_vcache_analysis,
    /// Whether the driver has the `GL_VERTEX_SHADER_INVOCATIONS` pipeline-statistics query.
    pub has_query: bool,
    /// The query's result for the first draw (0 without the query).
    pub query_invocations: u64,
    /// Whether the query equals the sum of the counts (false without the query).
    pub query_agrees: bool,
    /// Vertices whose counts differ between the two draws (0: repeatable).
    pub differing_vertices: u64,
}

growable!(gpusvc_vcache_measurement {
    first: differing_vertices,
    last: differing_vertices
});
sized_default!(gpusvc_vcache_measurement);

/// A measurement error as a code, with the crate's message as the detail.
fn measure_error(e: &MeasureError) -> FfiError {
    use gpusvc_result::*;
    let code = match e {
        MeasureError::NoVertexStorageBlocks { .. } => GPUSVC_VCACHE_NO_VERTEX_STORAGE_BLOCKS,
        MeasureError::VersionTooOld { .. } => GPUSVC_VCACHE_DRIVER_TOO_OLD,
        MeasureError::IndexTooLarge { .. }
        | MeasureError::TooManyVertices { .. }
        | MeasureError::TooManyIndices(_) => GPUSVC_VCACHE_DRAW_TOO_LARGE,
        _ => GPUSVC_VCACHE_MEASURE_FAILED,
    };
    FfiError::new(code, format!("vertex-cache: {e}"))
}

/// Draws the mesh (`index_count` indices, whole triangles, each below `vertex_count`) twice on
/// the driver of `ctx` as `*options` say (NULL: the defaults) with a vertex shader that counts
/// its own invocations per vertex, and writes what it found into `*out`; when `counts` is not
/// NULL it gets the first draw's invocations of each vertex (`vertex_count` entries;
/// `counts_len` must be at least that, else `GPUSVC_INSUFFICIENT_SIZE`). Must be called on the
/// context's thread (`GPUSVC_WRONG_THREAD`). The context's GL state is restored afterwards.
///
/// Errors (nothing written): the mesh errors of `gpusvc_vcache_analyze`,
/// `GPUSVC_INVALID_ARGUMENT` (an unknown index type or raster value),
/// `GPUSVC_VCACHE_NO_VERTEX_STORAGE_BLOCKS`, `GPUSVC_VCACHE_DRIVER_TOO_OLD`,
/// `GPUSVC_VCACHE_DRAW_TOO_LARGE`, `GPUSVC_VCACHE_MEASURE_FAILED`.
///
/// # Safety
/// `ctx` is NULL or a handle value; `indices` is NULL or valid for `index_count` reads;
/// `options` is NULL or valid for reading `options->struct_size` bytes; `out` is NULL or valid
/// for reading and writing `out->struct_size` bytes; `counts` is NULL or valid for `counts_len`
/// writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_vcache_measure(
    ctx: *const gpusvc_gl_context,
    indices: *const u32,
    index_count: usize,
    vertex_count: u32,
    options: *const gpusvc_vcache_draw_options,
    out: *mut gpusvc_vcache_measurement,
    counts: *mut u32,
    counts_len: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let ctx = gl_context(ctx)?;
        // SAFETY: forwarded from this function's contract.
        let mesh = unsafe { mesh_in(indices, index_count, vertex_count) }?;
        let options = if options.is_null() {
            DrawOptions::default()
        } else {
            // SAFETY: non-NULL and valid for `struct_size` bytes of plain integers (contract).
            draw_options_in(&unsafe { sized_in(options, "options") }?)?
        };
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { SizedOut::new(out, "out") }?;
        if !counts.is_aligned() {
            return Err(crate::kit::invalid_argument(
                "`counts` is misaligned".to_string(),
            ));
        }
        if !counts.is_null() && counts_len < vertex_count as usize {
            return Err(insufficient_size(format!(
                "{vertex_count} per-vertex counts, room for {counts_len}"
            )));
        }
        let measurer = Measurer::new(&ctx).map_err(|e| measure_error(&e))?;
        let twice = measurer
            .measure_twice(&mesh, options)
            .map_err(|e| measure_error(&e))?;
        drop(measurer);
        let first = &twice.first;
        let measurement = gpusvc_vcache_measurement {
            struct_size: 0,
            analysis: analyze(&mesh, &first.counts).into(),
            has_query: first.query_invocations.is_some(),
            query_invocations: first.query_invocations.unwrap_or(0),
            query_agrees: first.query_agrees() == Some(true),
            differing_vertices: twice.differing_vertices().len() as u64,
        };
        if !counts.is_null() {
            // SAFETY: valid for `counts_len >= vertex_count` writes (checked above; contract);
            // our own vector cannot overlap a caller buffer we only write to.
            unsafe {
                std::ptr::copy_nonoverlapping(first.counts.as_ptr(), counts, first.counts.len())
            };
        }
        out.write(measurement);
        Ok(())
    })
}

// ---- fit ----

/// The fit's battery: the standard one (staircases, grids in row order and shuffled, random
/// streams, a fan; the default, 0).
pub const GPUSVC_VCACHE_BATTERY_STANDARD: u32 = 0u32;
/// The fit's battery: a smaller one of the same kinds of draws, for quick checks.
pub const GPUSVC_VCACHE_BATTERY_REDUCED: u32 = 1u32;

c_enum!(fn battery_in("GPUSVC_VCACHE_BATTERY") -> Battery {
    GPUSVC_VCACHE_BATTERY_STANDARD => Battery::standard(),
    GPUSVC_VCACHE_BATTERY_REDUCED => Battery::reduced(),
});

/// Progress phase: the battery's draws are being measured (`done` of `total` draws).
pub const GPUSVC_VCACHE_FIT_PHASE_MEASURE: u32 = 0u32;
/// Progress phase: candidate models are being scored (`done` of `total` work items).
pub const GPUSVC_VCACHE_FIT_PHASE_SEARCH: u32 = 1u32;

/// The list of a fit result: the exact fits (no vertex of any probe mismatches).
pub const GPUSVC_VCACHE_FIT_EXACT: u32 = 0u32;
/// The list of a fit result: the best near misses (ties with the last included).
pub const GPUSVC_VCACHE_FIT_NEAR: u32 = 1u32;

/// How `gpusvc_vcache_fit` runs. A zeroed struct with `struct_size = sizeof(struct
/// gpusvc_vcache_fit_options)`: the standard battery, at least 1 near miss; fields past a host's
/// `struct_size` are 0.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_vcache_fit_options {
    /// `sizeof(struct gpusvc_vcache_fit_options)`, set by the host: the library reads only that
    /// many bytes, the fields past it take their defaults (0).
    pub struct_size: usize,
    /// A `GPUSVC_VCACHE_BATTERY_*` value.
    pub battery: u32,
    /// How many near misses to keep at least (0 counts as 1); models tied with the last are
    /// kept too.
    pub near_misses: u32,
}

growable!(gpusvc_vcache_fit_options {
    first: near_misses,
    last: near_misses,
    defaults: gpusvc_vcache_fit_options {
        struct_size: 0,
        battery: GPUSVC_VCACHE_BATTERY_STANDARD,
        near_misses: 0,
    },
});
sized_default!(gpusvc_vcache_fit_options);

/// Fit progress: `phase` is a `GPUSVC_VCACHE_FIT_PHASE_*` value, `done` of `total` steps of
/// that phase. Called on the thread that called `gpusvc_vcache_fit`, during the call only; it
/// must not unwind.
pub type gpusvc_vcache_fit_progress_fn =
    Option<unsafe extern "C" fn(phase: u32, done: u64, total: u64, user_data: *mut c_void)>;

/// An opaque fit result: the exact fits and near misses of `gpusvc_vcache_fit`. Thread-safe
/// (read-only); freed with `gpusvc_vcache_fit_result_free`.
#[derive(Debug)]
pub struct gpusvc_vcache_fit_result {
    _opaque: [u8; 0],
}

/// The totals of a fit result. The host sets `struct_size = sizeof(struct
/// gpusvc_vcache_fit_summary)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_vcache_fit_summary {
    /// Set by the host to `sizeof(struct gpusvc_vcache_fit_summary)` before the call: the library writes only that
    /// many bytes and sets this to the bytes written.
    pub struct_size: usize,
    /// Entries in the exact list (`GPUSVC_VCACHE_FIT_EXACT`).
    pub exact: usize,
    /// Entries in the near-miss list (`GPUSVC_VCACHE_FIT_NEAR`).
    pub near: usize,
    /// Candidate models searched.
    pub candidates: u64,
    /// Probe simulations run.
    pub simulations: u64,
    /// Draws measured (probes of the battery).
    pub probes: u64,
    /// Indices over all probes.
    pub indices: u64,
}

growable!(gpusvc_vcache_fit_summary {
    first: indices,
    last: indices
});
sized_default!(gpusvc_vcache_fit_summary);

/// One entry of a fit result: a model and its score over the whole battery. The host sets
/// `struct_size = sizeof(struct gpusvc_vcache_fit_entry)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_vcache_fit_entry {
    /// Set by the host to `sizeof(struct gpusvc_vcache_fit_entry)` before the call: the library writes only that
    /// many bytes and sets this to the bytes written.
    pub struct_size: usize,
    /// The model (for a group of segmented models, the one with the shortest segment).
    pub model: gpusvc_vcache_model,
    /// Vertices, over all probes, whose simulated count differs from the measured one (0 for
    /// an exact fit).
    pub mismatched_vertices: u64,
    /// Sum over all vertices of the absolute difference of the counts.
    pub total_difference: u64,
    /// For a group: every segment length in `same_for_lengths_min..=same_for_lengths_max` with
    /// the same cache scores the same (indistinguishable on this battery); both 0 otherwise.
    pub same_for_lengths_min: u32,
    /// See `same_for_lengths_min`.
    pub same_for_lengths_max: u32,
}

growable!(gpusvc_vcache_fit_entry {
    first: same_for_lengths_max,
    last: same_for_lengths_max
});
sized_default!(gpusvc_vcache_fit_entry);

/// What the handle holds.
#[derive(Debug)]
struct FitOutcome {
    result: FitResult,
    probes: u64,
    indices: u64,
}

/// Measures the probe battery of `*options` (NULL: the defaults) once on the driver of `ctx`,
/// then scores every candidate model of the standard search space (FIFO, LRU, direct-mapped,
/// set-associative, segmented over each, batch) by the vertices whose simulated count differs
/// from the measured one, then by the total difference; a new result handle into `*out`.
/// Deterministic. `progress` (may be NULL) is called with `user_data` now and then, on this
/// thread, during the call only. Must be called on the context's thread.
///
/// Errors (nothing written): `GPUSVC_INVALID_ARGUMENT` (an unknown battery), the measurement
/// errors of `gpusvc_vcache_measure`.
///
/// # Safety
/// `ctx` is NULL or a handle value; `options` is NULL or valid for reading
/// `options->struct_size` bytes; `progress` is NULL
/// or a function that may be called with `user_data` on this thread during the call; `out` is
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_vcache_fit(
    ctx: *const gpusvc_gl_context,
    options: *const gpusvc_vcache_fit_options,
    progress: gpusvc_vcache_fit_progress_fn,
    user_data: *mut c_void,
    out: *mut *mut gpusvc_vcache_fit_result,
) -> gpusvc_result {
    ffi_guard(|| {
        let ctx = gl_context(ctx)?;
        let options = if options.is_null() {
            gpusvc_vcache_fit_options::default()
        } else {
            // SAFETY: non-NULL and valid for `struct_size` bytes of plain integers (contract).
            unsafe { sized_in(options, "options") }?
        };
        let battery = battery_in(options.battery)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let progress = HostFn::optional(progress, user_data);
        let report = |phase: u32, done: u64, total: u64| {
            if let Some(p) = progress {
                // SAFETY: the host's callback with its user data, on this thread during the
                // call (contract).
                unsafe { (p.f)(phase, done, total, p.user_data.get()) };
            }
        };
        let measurer = Measurer::new(&ctx).map_err(|e| measure_error(&e))?;
        let probes = battery.probes();
        let total = probes.len() as u64;
        let mut measured = Vec::with_capacity(probes.len());
        for (i, probe) in probes.iter().enumerate() {
            report(GPUSVC_VCACHE_FIT_PHASE_MEASURE, i as u64, total);
            let m = measurer
                .measure(&probe.mesh(), DrawOptions::default())
                .map_err(|e| measure_error(&e))?;
            measured.push(m.counts);
        }
        report(GPUSVC_VCACHE_FIT_PHASE_MEASURE, total, total);
        drop(measurer);
        let mut on_progress =
            |p: FitProgress| report(GPUSVC_VCACHE_FIT_PHASE_SEARCH, p.done, p.total);
        let result = fit(
            &battery,
            &measured,
            &SearchSpace::standard(),
            u64::from(options.near_misses.max(1)),
            Some(&mut on_progress),
        )
        .map_err(|e| invalid_argument(format!("vertex-cache: {e}")))?;
        let outcome = FitOutcome {
            result,
            probes: total,
            indices: battery.total_indices() as u64,
        };
        out.write(handle::new_shared(Kind::VcacheFitResult, outcome));
        Ok(())
    })
}

fn fit_outcome(r: *const gpusvc_vcache_fit_result) -> Result<Arc<FitOutcome>, FfiError> {
    handle::shared(r, "result", Kind::VcacheFitResult)
}

/// Frees a fit result; NULL is a no-op.
///
/// # Safety
/// `result` is NULL or a handle value (a freed or foreign one is `GPUSVC_INVALID_HANDLE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_vcache_fit_result_free(
    result: *mut gpusvc_vcache_fit_result,
) -> gpusvc_result {
    ffi_guard(|| handle::free(result, Kind::VcacheFitResult))
}

/// The totals of a fit result into `*out` (the host sets its `struct_size`; only that many
/// bytes are written, and `struct_size` becomes the bytes written).
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_vcache_fit_result_summary(
    result: *const gpusvc_vcache_fit_result,
    out: *mut gpusvc_vcache_fit_summary,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || fit_outcome(result),
            out,
            "out",
            |o| {
                Ok(gpusvc_vcache_fit_summary {
                    struct_size: 0,
                    exact: o.result.exact.len(),
                    near: o.result.near.len(),
                    candidates: o.result.candidates,
                    simulations: o.result.simulations,
                    probes: o.probes,
                    indices: o.indices,
                })
            },
        )
    }
}

fn entry_out(f: &Fitted) -> gpusvc_vcache_fit_entry {
    let (lo, hi) = f.same_for_lengths.unwrap_or((0, 0));
    gpusvc_vcache_fit_entry {
        struct_size: 0,
        model: model_to_c(&f.model),
        mismatched_vertices: f.score.mismatched_vertices,
        total_difference: f.score.total_difference,
        same_for_lengths_min: lo,
        same_for_lengths_max: hi,
    }
}

/// Entry `index` of list `list` (a `GPUSVC_VCACHE_FIT_*` value: exact fits ordered by text
/// form, near misses best first) into `*out`; its model's text with `gpusvc_vcache_model_text`.
/// An index past the list (see `gpusvc_vcache_fit_result_summary`) is `GPUSVC_INVALID_ARGUMENT`.
/// The host sets `out->struct_size`; only that many bytes are written, and `struct_size` becomes
/// the bytes written.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_vcache_fit_result_entry(
    result: *const gpusvc_vcache_fit_result,
    list: u32,
    index: usize,
    out: *mut gpusvc_vcache_fit_entry,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || {
                let o = fit_outcome(result)?;
                let entries = match list {
                    GPUSVC_VCACHE_FIT_EXACT => &o.result.exact,
                    GPUSVC_VCACHE_FIT_NEAR => &o.result.near,
                    other => {
                        return Err(invalid_argument(format!(
                            "unknown GPUSVC_VCACHE_FIT list {other}"
                        )));
                    }
                };
                let entry = entries.get(index).ok_or_else(|| {
                    invalid_argument(format!(
                        "index {index} is past the list's {} entries",
                        entries.len()
                    ))
                })?;
                Ok(entry_out(entry))
            },
            out,
            "out",
            Ok,
        )
    }
}
