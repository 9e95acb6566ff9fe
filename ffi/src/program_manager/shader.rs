//! `gpusvc_program_manager_shader_*`: a program manager's shaders (source, compile options, variable maps,
//! compile state and log).

use std::ffi::c_char;

use program_cache::ShaderState;

use crate::kit::handle::{self, Kind};
use crate::kit::{
    FfiError, Out, answer_into, ffi_guard, gpusvc_result, null_argument, slice_in, source_in,
    struct_in, text_out,
};
use crate::program_cache::{
    VariableKind, gpusvc_program_cache_sha1, gpusvc_program_cache_shader_variables,
    gpusvc_program_cache_variable_info, item_at, shader_variables_in, stage_in, stage_out,
    variable_kind_in, variables_in,
};
use crate::program_manager::objects::{ShaderHandle, manager, shader, shader_query};
use crate::program_manager::{
    BlockKind, block_kind_in, gpusvc_program_manager_shader_block_info,
    gpusvc_program_manager_variable_qualifiers,
};
use crate::program_manager::{
    GPUSVC_PROGRAM_MANAGER_SHADER_STATE_COMPILED, GPUSVC_PROGRAM_MANAGER_SHADER_STATE_COMPILING,
    GPUSVC_PROGRAM_MANAGER_SHADER_STATE_DEFERRED, GPUSVC_PROGRAM_MANAGER_SHADER_STATE_FAILED,
    GPUSVC_PROGRAM_MANAGER_SHADER_STATE_NOT_COMPILED, gpusvc_program_manager,
    gpusvc_program_manager_shader,
};

/// Creates a shader of `manager` with a stage (`GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*`) and `source_len` bytes
/// of UTF-8 source (non-empty; copied). It is not compiled yet.
///
/// # Safety
/// `source` is NULL or valid for `source_len` bytes; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_new(
    manager: *const gpusvc_program_manager,
    stage: u32,
    source: *const c_char,
    source_len: usize,
    out: *mut *mut gpusvc_program_manager_shader,
) -> gpusvc_result {
    ffi_guard(|| {
        let m = self::manager(manager)?;
        let stage = stage_in(stage)?;
        // SAFETY: forwarded from this function's contract.
        let source = unsafe { source_in(source, source_len) }?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        // The manager is live, on this thread, not in a callback; the shader is its own.
        let shader = m.borrow()?.new_shader(stage, source);
        let handle = handle::new_local(
            Kind::Shader,
            ShaderHandle {
                shader,
                c_variables: None,
            },
        );
        out.write(handle);
        Ok(())
    })
}

/// Frees a shader (and the driver object it holds). NULL is a no-op; a freed or unknown handle
/// is `GPUSVC_INVALID_HANDLE`; from another thread `GPUSVC_WRONG_THREAD`.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_free(
    shader: *mut gpusvc_program_manager_shader,
) -> gpusvc_result {
    ffi_guard(|| handle::free(shader, Kind::Shader))
}

/// Replaces the source (`glShaderSource`): non-empty UTF-8, copied. The shader's hash does not
/// change until it is compiled again.
///
/// # Safety
/// `source` is NULL or valid for `source_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_set_source(
    shader: *const gpusvc_program_manager_shader,
    source: *const c_char,
    source_len: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        // SAFETY: forwarded from this function's contract.
        let source = unsafe { source_in(source, source_len) }?;
        s.borrow_mut()?.shader.set_source(source);
        Ok(())
    })
}

/// Sets the compile options that change the compiled output (translator flags, ...; opaque
/// bytes, part of the shader hash; `options` may be NULL when `options_len` is 0).
///
/// # Safety
/// `options` is NULL or valid for `options_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_set_compile_options(
    shader: *const gpusvc_program_manager_shader,
    options: *const u8,
    options_len: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        // SAFETY: forwarded from this function's contract.
        let options = unsafe { slice_in(options, options_len, "options") }?;
        s.borrow_mut()?.shader.set_compile_options(options);
        Ok(())
    })
}

/// Sets the variable maps a translator produced for this shader (copied). They are stored with
/// the program and restored on a cache hit.
///
/// # Safety
/// `variables` is NULL or valid for one read, its pointers as documented on
/// `gpusvc_program_cache_shader_variables`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_set_variables(
    shader: *const gpusvc_program_manager_shader,
    variables: *const gpusvc_program_cache_shader_variables,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        // SAFETY: NULL or valid for one read (contract).
        let variables = unsafe { struct_in(variables, "variables") }?;
        // SAFETY: its pointers as documented on `gpusvc_program_cache_shader_variables` (contract).
        let v = unsafe { shader_variables_in(&variables) }?;
        store_variables(&mut *s.borrow_mut()?, v);
        Ok(())
    })
}

/// The shader's stage (`GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_stage(
    shader: *const gpusvc_program_manager_shader,
    out: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { shader_query(shader, out, |s| Ok(stage_out(s.shader.stage()))) }
}

/// The shader's state (`GPUSVC_PROGRAM_MANAGER_SHADER_STATE_*`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_state(
    shader: *const gpusvc_program_manager_shader,
    out: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        shader_query(shader, out, |s| {
            Ok(match s.shader.state() {
                ShaderState::NotCompiled => GPUSVC_PROGRAM_MANAGER_SHADER_STATE_NOT_COMPILED,
                ShaderState::Compiled { .. } => GPUSVC_PROGRAM_MANAGER_SHADER_STATE_COMPILED,
                ShaderState::Deferred { .. } => GPUSVC_PROGRAM_MANAGER_SHADER_STATE_DEFERRED,
                ShaderState::Failed { .. } => GPUSVC_PROGRAM_MANAGER_SHADER_STATE_FAILED,
                ShaderState::Compiling { .. } => GPUSVC_PROGRAM_MANAGER_SHADER_STATE_COMPILING,
            })
        })
    }
}

/// `GL_COMPILE_STATUS` as the host reports it: true when compiled or deferred.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_compile_status(
    shader: *const gpusvc_program_manager_shader,
    out: *mut bool,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { shader_query(shader, out, |s| Ok(s.shader.compile_status())) }
}

/// The hash of the shader's last compile (compiled, deferred or failed):
/// `gpusvc_program_cache_backend_shader_hash` of its stage, source, compile options and the
/// manager's backend identity; `GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED` before the first
/// compile.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_compiled_hash(
    shader: *const gpusvc_program_manager_shader,
    out: *mut gpusvc_program_cache_sha1,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        shader_query(shader, out, |s| {
            let hash = s.shader.compiled_hash().ok_or_else(|| {
                FfiError::new(
                    gpusvc_result::GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED,
                    "the shader was never compiled",
                )
            })?;
            Ok(hash.into())
        })
    }
}

/// The info log of a failed compile (empty otherwise). `*out_len` gets its length in bytes, NUL
/// excluded. With `buf` NULL and `len` 0 nothing else happens (a size query); otherwise `len`
/// must exceed the length (room for the NUL; else `GPUSVC_INSUFFICIENT_SIZE`, nothing written)
/// and the log is copied NUL-terminated.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes; `out_len` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_info_log(
    shader: *const gpusvc_program_manager_shader,
    buf: *mut c_char,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        if out_len.is_null() {
            return Err(null_argument("out_len"));
        }
        let s = s.borrow()?;
        let log = s.shader.info_log().unwrap_or("");
        // SAFETY: forwarded from this function's contract.
        unsafe { text_out(log, (buf, "buf"), len, (out_len, "out_len")) }
    })
}

/// How many variables of `kind` (`GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_*`) the shader's variable maps hold
/// (those set by `gpusvc_program_manager_shader_set_variables` or restored by a cache hit; 0 when none).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_variable_count(
    shader: *const gpusvc_program_manager_shader,
    kind: u32,
    out: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let kind = variable_kind_in(kind)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        s.borrow_mut()?.c_variables().count_out(kind, out);
        Ok(())
    })
}

/// Variable `index` of `kind` in the shader's maps. The strings in `*out` belong to the shader
/// and stay valid until it is freed, given new variables, or linked.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_variable(
    shader: *const gpusvc_program_manager_shader,
    kind: u32,
    index: usize,
    out: *mut gpusvc_program_cache_variable_info,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let kind = variable_kind_in(kind)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        s.borrow_mut()?.c_variables().entry_out(kind, index, out)
    })
}

/// The list of `kind` in a shader's maps.
fn list_mut(
    v: &mut program_cache::ShaderVariables,
    kind: VariableKind,
) -> &mut Vec<program_cache::VariableInfo> {
    match kind {
        VariableKind::Attribute => &mut v.attributes,
        VariableKind::Uniform => &mut v.uniforms,
        VariableKind::Varying => &mut v.varyings,
        VariableKind::Output => &mut v.outputs,
    }
}

/// Stores `v` as the shader's variable maps and drops the C copies that pointed into the old
/// ones.
fn store_variables(s: &mut ShaderHandle, v: program_cache::ShaderVariables) {
    s.shader.set_variables(v);
    s.c_variables = None;
}

/// Edits a copy of the shader's variable maps (empty maps when it has none) and stores it with
/// [`store_variables`]; when `edit` fails, nothing is stored.
fn edit_variables(
    s: &mut ShaderHandle,
    edit: impl FnOnce(&mut program_cache::ShaderVariables) -> Result<(), FfiError>,
) -> Result<(), FfiError> {
    let mut v = s.shader.variables().cloned().unwrap_or_default();
    edit(&mut v)?;
    store_variables(s, v);
    Ok(())
}

/// Replaces one list of the shader's variable maps (`GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_*`:
/// varyings and fragment outputs, which `gpusvc_program_cache_shader_variables` has no room
/// for, or attributes and uniforms) with `count` variables (copied; `variables` may be NULL
/// when `count` is 0). The other lists are kept (empty when the shader had no maps). Like every
/// map, they are stored with the program and restored on a cache hit.
///
/// # Safety
/// `variables` is NULL or valid for `count` reads, each entry's names NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_set_variable_list(
    shader: *const gpusvc_program_manager_shader,
    kind: u32,
    variables: *const gpusvc_program_cache_variable_info,
    count: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let kind = variable_kind_in(kind)?;
        // SAFETY: forwarded from this function's contract.
        let list = unsafe { variables_in(variables, count, "variables") }?;
        edit_variables(&mut *s.borrow_mut()?, |v| {
            *list_mut(v, kind) = list;
            Ok(())
        })
    })
}

/// Sets the precision and static use of variable `index` of `kind` in the shader's maps (as a
/// translator reports them; they default to 0 and false). An index past the end is
/// `GPUSVC_INVALID_ARGUMENT`; `qualifiers->reserved` must be zero.
///
/// # Safety
/// `qualifiers` is NULL or valid for reading `qualifiers->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_set_variable_qualifiers(
    shader: *const gpusvc_program_manager_shader,
    kind: u32,
    index: usize,
    qualifiers: *const gpusvc_program_manager_variable_qualifiers,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let kind = variable_kind_in(kind)?;
        // SAFETY: NULL or valid for `struct_size` bytes (contract).
        let q = unsafe { crate::kit::sized_in(qualifiers, "qualifiers") }?;
        if q.reserved != [0; 3] {
            return Err(crate::kit::invalid_argument(
                "qualifiers->reserved is not zero",
            ));
        }
        edit_variables(&mut *s.borrow_mut()?, |v| {
            let list = list_mut(v, kind);
            let len = list.len();
            let var = list.get_mut(index).ok_or_else(|| {
                crate::kit::invalid_argument(format!("index {index} is past the {len} variables"))
            })?;
            var.precision = q.precision;
            var.static_use = q.static_use;
            Ok(())
        })
    })
}

/// The precision and static use of variable `index` of `kind` in the shader's maps. An index
/// past the end is `GPUSVC_INVALID_ARGUMENT`. The host sets `out->struct_size`; only that many
/// bytes are written, and `struct_size` becomes the bytes written.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_variable_qualifiers(
    shader: *const gpusvc_program_manager_shader,
    kind: u32,
    index: usize,
    out: *mut gpusvc_program_manager_variable_qualifiers,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let kind = variable_kind_in(kind)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { crate::kit::SizedOut::new(out, "out") }?;
        let mut s = s.borrow_mut()?;
        let v = item_at(s.c_variables().list(kind), index, "variables")?;
        out.write(gpusvc_program_manager_variable_qualifiers {
            struct_size: 0,
            precision: v.precision,
            static_use: v.static_use,
            reserved: [0; 3],
        });
        Ok(())
    })
}

/// Replaces the uniform blocks or storage blocks (`GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_*`) of the
/// shader's variable maps with `count` blocks (copied; `blocks` may be NULL when `count` is 0).
/// The other lists are kept. Stored with the program and restored on a cache hit.
///
/// # Safety
/// `blocks` is NULL or valid for `count` reads, each as documented on
/// `gpusvc_program_manager_shader_block_info`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_set_blocks(
    shader: *const gpusvc_program_manager_shader,
    kind: u32,
    blocks: *const gpusvc_program_manager_shader_block_info,
    count: usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let kind = block_kind_in(kind)?;
        // SAFETY: forwarded from this function's contract.
        let list = unsafe { slice_in(blocks, count, "blocks") }?;
        let list = list
            .iter()
            .map(|b| {
                if b.reserved != [0; 7] {
                    return Err(crate::kit::invalid_argument(
                        "blocks[].reserved is not zero",
                    ));
                }
                Ok(program_cache::BlockInfo {
                    // SAFETY: names are NULL or NUL-terminated (contract).
                    name: unsafe { crate::kit::cstr_in(b.name, "blocks[].name") }?.to_owned(),
                    // SAFETY: as above.
                    mapped_name: unsafe {
                        crate::kit::cstr_in(b.mapped_name, "blocks[].mapped_name")
                    }?
                    .to_owned(),
                    binding: b.binding,
                    data_size: b.data_size,
                    static_use: b.static_use,
                    // SAFETY: `members` is valid for `member_count` entries (contract).
                    members: unsafe {
                        variables_in(b.members, b.member_count, "blocks[].members")
                    }?,
                })
            })
            .collect::<Result<Vec<_>, FfiError>>()?;
        edit_variables(&mut *s.borrow_mut()?, |v| {
            match kind {
                BlockKind::Uniform => v.uniform_blocks = list,
                BlockKind::Storage => v.storage_blocks = list,
            }
            Ok(())
        })
    })
}

/// How many blocks of `kind` (`GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_*`) the shader's variable maps
/// hold.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_block_count(
    shader: *const gpusvc_program_manager_shader,
    kind: u32,
    out: *mut usize,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || Ok((self::shader(shader, "shader")?, block_kind_in(kind)?)),
            out,
            "out",
            |(s, kind)| {
                Ok(s.borrow_mut()?
                    .c_variables()
                    .blocks(kind == BlockKind::Uniform)
                    .len())
            },
        )
    }
}

/// Block `index` of `kind` in the shader's variable maps, its members included (`members`
/// points into the shader's handle, like the names). An index past the end is
/// `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_shader_block(
    shader: *const gpusvc_program_manager_shader,
    kind: u32,
    index: usize,
    out: *mut gpusvc_program_manager_shader_block_info,
) -> gpusvc_result {
    ffi_guard(|| {
        let s = self::shader(shader, "shader")?;
        let kind = block_kind_in(kind)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let mut s = s.borrow_mut()?;
        let b = item_at(
            s.c_variables().blocks(kind == BlockKind::Uniform),
            index,
            "blocks",
        )?;
        out.write(gpusvc_program_manager_shader_block_info {
            name: b.name.as_ptr(),
            mapped_name: b.mapped_name.as_ptr(),
            binding: b.binding,
            data_size: b.data_size,
            static_use: b.static_use,
            reserved: [0; 7],
            members: if b.member_infos.0.is_empty() {
                std::ptr::null()
            } else {
                b.member_infos.0.as_ptr()
            },
            member_count: b.member_infos.0.len(),
        });
        Ok(())
    })
}
