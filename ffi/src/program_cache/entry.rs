//! `gpusvc_program_cache_entry_*`: an immutable copy of one cached program, taken out of the cache by
//! `gpusvc_program_cache_load` / `_peek` / `_load_failure`.

use std::ffi::c_char;
use std::sync::Arc;

use program_cache::{ProgramKey, ShaderStage, SharedProgram};

use crate::kit::handle::{self, Kind};
use crate::kit::{FfiError, Out, ffi_guard, gpusvc_result, invalid_argument, list_out, text_out};
use crate::program_cache::types::{
    CShaderVariables, GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE, GPUSVC_PROGRAM_CACHE_FAILURE_LINK,
    GPUSVC_PROGRAM_CACHE_FAILURE_NONE, VariableKind, gpusvc_program_cache_sha1,
    gpusvc_program_cache_variable_info, stage_in, variable_kind_in,
};

/// A copy of one cached program or failure record, taken out by `gpusvc_program_cache_load` /
/// `_peek` / `_load_failure`. Immutable
/// and usable from any thread.
#[derive(Debug)]
pub struct gpusvc_program_cache_entry {
    _opaque: [u8; 0],
}

struct CachedProgramCopy {
    program: SharedProgram,
    vertex: CShaderVariables,
    fragment: CShaderVariables,
    /// The other stages' maps (geometry, tessellation, compute), by stage.
    others: Vec<(ShaderStage, CShaderVariables)>,
}

impl CachedProgramCopy {
    fn new(program: SharedProgram) -> Self {
        CachedProgramCopy {
            vertex: CShaderVariables::new(&program.vertex),
            fragment: CShaderVariables::new(&program.fragment),
            others: program
                .other_stages
                .iter()
                .filter_map(|s| {
                    Some((
                        ShaderStage::from_gl_enum(s.stage)?,
                        CShaderVariables::new(&s.variables),
                    ))
                })
                .collect(),
            program,
        }
    }

    /// The maps of `stage`: vertex and fragment always (empty when the program has none, as a
    /// compute program), another stage when the program has it.
    fn stage(&self, stage: u32) -> Result<&CShaderVariables, FfiError> {
        match stage_in(stage)? {
            ShaderStage::Vertex => Ok(&self.vertex),
            ShaderStage::Fragment => Ok(&self.fragment),
            other => self
                .others
                .iter()
                .find(|(s, _)| *s == other)
                .map(|(_, v)| v)
                .ok_or_else(|| {
                    invalid_argument(format!("the cached program has no {other} stage"))
                }),
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

/// The stages the cached program has: bit `1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*` per stage
/// (a vertex or fragment stage when its shader hash is not all zero).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_entry_stages(
    program: *const gpusvc_program_cache_entry,
    out: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        crate::kit::answer_into(
            || cached_program(program),
            out,
            "out",
            |p| {
                let none = program_cache::ShaderHash::NONE;
                let mut mask = 0u32;
                if p.program.vertex_shader != none {
                    mask |= 1 << super::stage_out(ShaderStage::Vertex);
                }
                if p.program.fragment_shader != none {
                    mask |= 1 << super::stage_out(ShaderStage::Fragment);
                }
                for (s, _) in &p.others {
                    mask |= 1 << super::stage_out(*s);
                }
                Ok(mask)
            },
        )
    }
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

/// What the entry records: `*out_failure` gets `GPUSVC_PROGRAM_CACHE_FAILURE_NONE` (a linked
/// program), `_COMPILE` (a shader that failed to compile; `*out_stage` gets its
/// `GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*`) or `_LINK` (a program that failed to link;
/// `*out_stage` gets 0, as for a program). `*out_len` gets the length of the driver's info log
/// (0 for a program); with `buf` NULL and `len` 0 nothing else happens, otherwise `len` must
/// exceed it (room for the NUL, else `GPUSVC_INSUFFICIENT_SIZE`, nothing written) and the log
/// is copied NUL-terminated, byte for byte as the driver gave it.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes; `out_failure`, `out_stage` and `out_len`
/// are NULL or valid for one write each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_entry_failure(
    program: *const gpusvc_program_cache_entry,
    out_failure: *mut u32,
    out_stage: *mut u32,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = cached_program(program)?;
        // SAFETY: output arguments (this function's contract).
        let (out_failure, out_stage) = unsafe {
            (
                Out::new(out_failure, "out_failure")?,
                Out::new(out_stage, "out_stage")?,
            )
        };
        let (failure, stage, log) = match &p.program.failure {
            None => (GPUSVC_PROGRAM_CACHE_FAILURE_NONE, 0, ""),
            Some(f) => match f.compile_stage.and_then(ShaderStage::from_gl_enum) {
                Some(stage) => (
                    GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE,
                    super::stage_out(stage),
                    f.log.as_str(),
                ),
                None => (GPUSVC_PROGRAM_CACHE_FAILURE_LINK, 0, f.log.as_str()),
            },
        };
        // SAFETY: forwarded from this function's contract.
        unsafe { text_out(log, (buf, "buf"), len, (out_len, "out_len")) }?;
        out_failure.write(failure);
        out_stage.write(stage);
        Ok(())
    })
}

/// How many variables of `kind` (`GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_*`) the map of `stage`
/// holds: `GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX` and `_FRAGMENT` always (empty for a
/// program without them), another stage when the program has it (see
/// `gpusvc_program_cache_entry_stages`; else `GPUSVC_INVALID_ARGUMENT`).
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
