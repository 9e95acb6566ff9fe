//! `gpusvc_program_cache_entry_*`: an immutable copy of one cached program, taken out of the cache by
//! `gpusvc_program_cache_load` / `_peek`.

use std::sync::Arc;

use program_cache::{ProgramKey, ShaderStage, SharedProgram};

use crate::kit::handle::{self, Kind};
use crate::kit::{FfiError, Out, ffi_guard, gpusvc_result, invalid_argument, list_out};
use crate::program_cache::types::{
    CShaderVariables, VariableKind, gpusvc_program_cache_sha1, gpusvc_program_cache_variable_info,
    stage_in, variable_kind_in,
};

/// A copy of one cached program, taken out by `gpusvc_program_cache_load` / `_peek`. Immutable
/// and usable from any thread.
#[derive(Debug)]
pub struct gpusvc_program_cache_entry {
    _opaque: [u8; 0],
}

struct CachedProgramCopy {
    program: SharedProgram,
    vertex: CShaderVariables,
    fragment: CShaderVariables,
}

impl CachedProgramCopy {
    fn new(program: SharedProgram) -> Self {
        CachedProgramCopy {
            vertex: CShaderVariables::new(&program.vertex),
            fragment: CShaderVariables::new(&program.fragment),
            program,
        }
    }

    fn stage(&self, stage: u32) -> Result<&CShaderVariables, FfiError> {
        match stage_in(stage)? {
            ShaderStage::Vertex => Ok(&self.vertex),
            ShaderStage::Fragment => Ok(&self.fragment),
            ShaderStage::Compute
            | ShaderStage::Geometry
            | ShaderStage::TessControl
            | ShaderStage::TessEvaluation => Err(invalid_argument(
                "a cached program has vertex and fragment variables only",
            )),
        }
    }
}

fn cached_program(
    p: *const gpusvc_program_cache_entry,
) -> Result<Arc<CachedProgramCopy>, FfiError> {
    handle::shared(p, "program", Kind::CachedProgram)
}

/// The body of an export that answers about the variables of `kind`
/// (`GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_*`) in the map of `stage`: the handle, the stage, the
/// kind, then `out` are checked; `answer` writes `out` only on success.
///
/// # Safety
/// `out` is NULL or valid for one write.
unsafe fn variables_query<T>(
    program: *const gpusvc_program_cache_entry,
    stage: u32,
    kind: u32,
    out: *mut T,
    answer: impl FnOnce(&CShaderVariables, VariableKind, Out<T>) -> Result<(), FfiError>,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = cached_program(program)?;
        let vars = p.stage(stage)?;
        let kind = variable_kind_in(kind)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        answer(vars, kind, out)
    })
}

pub(crate) fn found(
    key: &ProgramKey,
    program: Option<SharedProgram>,
) -> Result<*mut gpusvc_program_cache_entry, FfiError> {
    let program = program.ok_or_else(|| {
        FfiError::new(
            gpusvc_result::GPUSVC_PROGRAM_CACHE_NOT_FOUND,
            format!("no cached program with key {key}"),
        )
    })?;
    Ok(handle::new_shared(
        Kind::CachedProgram,
        CachedProgramCopy::new(program),
    ))
}

/// Frees a cached-program copy. NULL is a no-op; a freed or unknown handle is
/// `GPUSVC_INVALID_HANDLE`.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_entry_free(
    program: *mut gpusvc_program_cache_entry,
) -> gpusvc_result {
    ffi_guard(|| handle::free(program, Kind::CachedProgram))
}

/// The hashes of the program's vertex and fragment shaders.
///
/// # Safety
/// `out_vertex` and `out_fragment` are NULL or valid for one write each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_entry_shader_hashes(
    program: *const gpusvc_program_cache_entry,
    out_vertex: *mut gpusvc_program_cache_sha1,
    out_fragment: *mut gpusvc_program_cache_sha1,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = cached_program(program)?;
        // SAFETY: an output argument (this function's contract).
        let out_vertex = unsafe { Out::new(out_vertex, "out_vertex") }?;
        // SAFETY: an output argument (this function's contract).
        let out_fragment = unsafe { Out::new(out_fragment, "out_fragment") }?;
        out_vertex.write(p.program.vertex_shader.into());
        out_fragment.write(p.program.fragment_shader.into());
        Ok(())
    })
}

/// The program binary: `*out_format` gets its format and `*out_len` its length. With `buf` NULL
/// and `len` 0 nothing else happens (a size query); otherwise `len` must be at least the
/// length (else `GPUSVC_INSUFFICIENT_SIZE`, nothing written) and the bytes are copied to `buf`.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes; `out_format` and `out_len` are NULL or
/// valid for one write each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_entry_binary(
    program: *const gpusvc_program_cache_entry,
    out_format: *mut u32,
    buf: *mut u8,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = cached_program(program)?;
        // SAFETY: an output argument (this function's contract).
        let out_format = unsafe { Out::new(out_format, "out_format") }?;
        // SAFETY: forwarded from this function's contract.
        unsafe {
            list_out(
                &p.program.binary.bytes,
                (buf, "buf"),
                len,
                (out_len, "out_len"),
                "bytes",
            )
        }?;
        out_format.write(p.program.binary.format);
        Ok(())
    })
}

/// How many variables of `kind` (`GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_*`) the map of `stage`
/// (`GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX` or `_FRAGMENT`) holds.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_entry_variable_count(
    program: *const gpusvc_program_cache_entry,
    stage: u32,
    kind: u32,
    out: *mut usize,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        variables_query(program, stage, kind, out, |vars, kind, out| {
            vars.count_out(kind, out);
            Ok(())
        })
    }
}

/// Variable `index` of `kind` in the map of `stage`. The strings in `*out` belong to the handle
/// and stay valid until it is freed. An index past the end is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_entry_variable(
    program: *const gpusvc_program_cache_entry,
    stage: u32,
    kind: u32,
    index: usize,
    out: *mut gpusvc_program_cache_variable_info,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        variables_query(program, stage, kind, out, |vars, kind, out| {
            vars.entry_out(kind, index, out)
        })
    }
}
