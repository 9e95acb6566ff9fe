//! The model and analysis functions: `gpusvc_vcache_model_parse` / `_text`,
//! `gpusvc_vcache_analyze`, `gpusvc_vcache_analyze_counts` and `gpusvc_vcache_optimize`.

use std::ffi::c_char;

use vertex_cache::analyze;

use crate::kit::error::insufficient_size;
use crate::kit::{FfiError, Out, answer_into, cstr_in, ffi_guard, gpusvc_result, text_out};
use crate::vcache::types::*;

/// Parses a model's text form (`fifo:16`, `lru:32`, `dm:64`, `sa:4x8`, `seg:96/fifo:32`,
/// `batch:16,32,0`, `nvidia:96,32,0`, `amd:384,16`; plain decimal, no spaces) into `*out`.
/// Unknown kinds, malformed text and parameters out of range are `GPUSVC_VCACHE_BAD_MODEL` (the
/// detail says why); text that is not UTF-8 is `GPUSVC_INVALID_UTF8`.
///
/// # Safety
/// `text` is NULL or a NUL-terminated string; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_vcache_model_parse(
    text: *const c_char,
    out: *mut gpusvc_vcache_model,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || cstr_in(text, "text"),
            out,
            "out",
            |text| Ok(model_to_c(&parse_model(text)?)),
        )
    }
}

/// Writes the text form of `*model` into `buf` with the size-query pattern: `*out_len` gets its
/// length in bytes (NUL excluded); with `buf` NULL and `len` 0 nothing else is written;
/// otherwise `len` must exceed the length (`GPUSVC_INSUFFICIENT_SIZE`, nothing written) and the
/// text is copied NUL-terminated. An invalid struct is `GPUSVC_VCACHE_BAD_MODEL`.
///
/// # Safety
/// `model` is NULL or valid for one read; `buf` is NULL or valid for `len` bytes of writes;
/// `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_vcache_model_text(
    model: *const gpusvc_vcache_model,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let model = unsafe { model_in(model, "model") }?;
        // SAFETY: forwarded from this function's contract.
        unsafe { text_out(&model.to_string(), (buf, "buf"), len, (out_len, "out_len")) }
    })
}

/// The optional per-vertex output of an analysis: NULL (with any `len`) is none; otherwise it
/// needs room for `vertex_count` counts.
pub(crate) fn per_vertex_room(
    ptr: *mut u32,
    len: usize,
    vertex_count: u32,
) -> Result<(), FfiError> {
    if !ptr.is_aligned() {
        return Err(crate::kit::invalid_argument(
            "the per-vertex count buffer is misaligned".to_string(),
        ));
    }
    if !ptr.is_null() && len < vertex_count as usize {
        return Err(insufficient_size(format!(
            "{vertex_count} per-vertex counts, room for {len}"
        )));
    }
    Ok(())
}

/// Simulates one draw of the mesh (`index_count` indices, whole triangles, each below
/// `vertex_count`) under `*model` and writes its analysis into `*out`; when `per_vertex` is not
/// NULL it also gets the invocations of each vertex (`vertex_count` entries; `per_vertex_len`
/// must be at least that, else `GPUSVC_INSUFFICIENT_SIZE`). Every index is fed as the hardware
/// sees it, degenerate triangles included.
///
/// Errors (nothing written): `GPUSVC_NULL_ARGUMENT` (`model`, `out`, or `indices` with a
/// count), `GPUSVC_VCACHE_BAD_MODEL`, `GPUSVC_VCACHE_EMPTY_MESH`, `GPUSVC_VCACHE_NOT_TRIANGLES`,
/// `GPUSVC_VCACHE_INDEX_OUT_OF_RANGE`, `GPUSVC_INVALID_ARGUMENT` (more than
/// `GPUSVC_VCACHE_MAX_INDICES` indices or `GPUSVC_VCACHE_MAX_VERTICES` vertices).
///
/// # Safety
/// `model` is NULL or valid for one read; `indices` is NULL or valid for `index_count` reads;
/// `out` is NULL or valid for one write; `per_vertex` is NULL or valid for `per_vertex_len`
/// writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_vcache_analyze(
    model: *const gpusvc_vcache_model,
    indices: *const u32,
    index_count: usize,
    vertex_count: u32,
    out: *mut gpusvc_vcache_analysis,
    per_vertex: *mut u32,
    per_vertex_len: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let model = unsafe { model_in(model, "model") }?;
        // SAFETY: forwarded from this function's contract.
        let mesh = unsafe { mesh_in(indices, index_count, vertex_count) }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        per_vertex_room(per_vertex, per_vertex_len, vertex_count)?;
        let counts = model.simulate(&mesh);
        let mut analysis = gpusvc_vcache_analysis::from(analyze(&mesh, &counts));
        analysis.warps = model.warps(&mesh).unwrap_or(0);
        if !per_vertex.is_null() {
            // SAFETY: valid for `per_vertex_len >= counts.len()` writes (checked above;
            // contract); our own vector cannot overlap a caller buffer we only write to.
            unsafe { std::ptr::copy_nonoverlapping(counts.as_ptr(), per_vertex, counts.len()) };
        }
        out.write(analysis);
        Ok(())
    })
}

/// The analysis of a draw of the mesh whose vertex `v` ran `counts[v]` times (counts measured
/// on a driver, e.g. by `gpusvc_vcache_measure`, or from anywhere else) into `*out`.
/// `counts_len` must equal `vertex_count` (`GPUSVC_INVALID_ARGUMENT` otherwise). Mesh errors as
/// `gpusvc_vcache_analyze`.
///
/// # Safety
/// `indices` is NULL or valid for `index_count` reads; `counts` is NULL or valid for
/// `counts_len` reads; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_vcache_analyze_counts(
    indices: *const u32,
    index_count: usize,
    vertex_count: u32,
    counts: *const u32,
    counts_len: usize,
    out: *mut gpusvc_vcache_analysis,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || {
                let mesh = mesh_in(indices, index_count, vertex_count)?;
                if counts.is_null() {
                    return Err(crate::kit::null_argument("counts"));
                }
                if counts_len != vertex_count as usize {
                    return Err(crate::kit::invalid_argument(format!(
                        "counts_len {counts_len} is not vertex_count {vertex_count}"
                    )));
                }
                let counts = crate::kit::slice_in(counts, counts_len, "counts")?;
                Ok((mesh, counts))
            },
            out,
            "out",
            |(mesh, counts)| Ok(analyze(&mesh, counts).into()),
        )
    }
}

/// Reorders the mesh's triangles to minimize the vertex-shader invocations `*model` simulates,
/// and writes the new index list into `out_indices` (`out_len` must be at least `index_count`,
/// else `GPUSVC_INSUFFICIENT_SIZE`). Each triangle keeps its corners in their order; the result
/// is a permutation of the input's triangles, never worse under the model than the input order
/// (nor than meshoptimizer's two orders for the model's cache size). Deterministic.
/// `out_indices` may be `indices` itself (in place), or overlap it: the input is read whole
/// before anything is written.
///
/// Errors (nothing written): those of `gpusvc_vcache_analyze`, and `GPUSVC_NULL_ARGUMENT` for
/// `out_indices`.
///
/// # Safety
/// `model` is NULL or valid for one read; `indices` is NULL or valid for `index_count` reads;
/// `out_indices` is NULL or valid for `out_len` writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_vcache_optimize(
    model: *const gpusvc_vcache_model,
    indices: *const u32,
    index_count: usize,
    vertex_count: u32,
    out_indices: *mut u32,
    out_len: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: forwarded from this function's contract.
        let model = unsafe { model_in(model, "model") }?;
        // SAFETY: forwarded from this function's contract.
        let mesh = unsafe { mesh_in(indices, index_count, vertex_count) }?;
        if out_indices.is_null() {
            return Err(crate::kit::null_argument("out_indices"));
        }
        if !out_indices.is_aligned() {
            return Err(crate::kit::invalid_argument(
                "`out_indices` is misaligned".to_string(),
            ));
        }
        if out_len < index_count {
            return Err(insufficient_size(format!(
                "{index_count} indices, room for {out_len}"
            )));
        }
        let ordered = vertex_cache::optimize(&mesh, &model);
        debug_assert_eq!(ordered.len(), index_count);
        // SAFETY: `out_indices` is valid for `out_len >= ordered.len()` writes (contract); the
        // input slice is not used after this point, and `copy` allows the caller's buffer to
        // overlap it.
        unsafe { std::ptr::copy(ordered.as_ptr(), out_indices, ordered.len()) };
        Ok(())
    })
}
