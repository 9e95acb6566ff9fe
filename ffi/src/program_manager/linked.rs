//! `gpusvc_program_manager_linked_program_*`: a linked program (its driver object, key, origin and
//! reflection).

use crate::kit::handle::{self, Kind};
use crate::kit::{answer_into, answer_sized_into, ffi_guard, gpusvc_result, invalid_argument};
use crate::program_cache::{VariableKind, gpusvc_program_cache_sha1, item_at, variable_kind_in};
use crate::program_manager::objects::{
    CActive, CBlock, LinkedHandle, linked, linked_query, stage_mask_out,
};
use crate::program_manager::{
    BlockKind, block_kind_in, gpusvc_program_manager_active_variable, gpusvc_program_manager_block,
    gpusvc_program_manager_block_member, gpusvc_program_manager_linked_program, link_origin_out,
};

/// Frees a linked program and deletes its driver object (GL form; host form when
/// `delete_program` is given), and drops its deferred binary read (at once, or, when freed
/// from inside a host callback of a call on that manager, at the manager's next call made once
/// that call has returned).
/// NULL is a no-op; a freed or unknown handle is `GPUSVC_INVALID_HANDLE`; from another thread
/// `GPUSVC_WRONG_THREAD`.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_free(
    program: *mut gpusvc_program_manager_linked_program,
) -> gpusvc_result {
    ffi_guard(|| handle::free(program, Kind::LinkedProgram))
}

/// The program object: its GL name (GL form) or the host's program id (host form).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_object(
    program: *const gpusvc_program_manager_linked_program,
    out: *mut u64,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { linked_query(program, out, |p| Ok(p.linked.program.id())) }
}

/// How the program came about (`GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_*`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_origin(
    program: *const gpusvc_program_manager_linked_program,
    out: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { linked_query(program, out, |p| Ok(link_origin_out(p.linked.origin))) }
}

/// The program's cache key.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_key(
    program: *const gpusvc_program_manager_linked_program,
    out: *mut gpusvc_program_cache_sha1,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { linked_query(program, out, |p| Ok(p.linked.key.into())) }
}

fn active_list(p: &LinkedHandle, kind: VariableKind) -> &[CActive] {
    match kind {
        VariableKind::Attribute => &p.attributes,
        VariableKind::Uniform => &p.uniforms,
        VariableKind::Varying => &p.varyings,
        VariableKind::Output => &p.outputs,
    }
}

/// How many active variables of `kind` (`GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_*`) the program
/// has: attributes, uniforms, transform-feedback varyings (`..._VARYING`, in link order) or
/// fragment outputs (`..._OUTPUT`, with `location_index`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_variable_count(
    program: *const gpusvc_program_manager_linked_program,
    kind: u32,
    out: *mut usize,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || Ok((linked(program)?, variable_kind_in(kind)?)),
            out,
            "out",
            |(p, kind)| Ok(active_list(&*p.borrow()?, kind).len()),
        )
    }
}

/// Active variable `index` of `kind`, sorted by name. The name in `*out` belongs to the handle
/// and stays valid until it is freed. An index past the end is `GPUSVC_INVALID_ARGUMENT`.
///
/// The host sets `out->struct_size`; only that many bytes are written, and `struct_size`
/// becomes the bytes written.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_variable(
    program: *const gpusvc_program_manager_linked_program,
    kind: u32,
    index: usize,
    out: *mut gpusvc_program_manager_active_variable,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || Ok((linked(program)?, variable_kind_in(kind)?)),
            out,
            "out",
            |(p, kind)| Ok(item_at(active_list(&*p.borrow()?, kind), index, "variables")?.info()),
        )
    }
}

/// The stages linked into the program: bit `1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*` per
/// stage.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_stages(
    program: *const gpusvc_program_manager_linked_program,
    out: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        linked_query(program, out, |p| {
            Ok(p.linked
                .stages
                .iter()
                .fold(0, |m, s| m | stage_mask_out(s.bit())))
        })
    }
}

/// Whether the program's binary is still in the driver, not read yet
/// (`gpusvc_program_manager_set_defer_binary_reads`);
/// `gpusvc_program_manager_save_deferred_binary` reads and saves it.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_binary_deferred(
    program: *const gpusvc_program_manager_linked_program,
    out: *mut bool,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { linked_query(program, out, |p| Ok(p.linked.binary_deferred)) }
}

/// The stages that statically use uniform `index` (as listed by
/// `gpusvc_program_manager_linked_program_variable` with `..._VARIABLE_KIND_UNIFORM`): bit
/// `1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*` per stage; 0 when the driver does not say. An
/// index past the end is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_uniform_static_use(
    program: *const gpusvc_program_manager_linked_program,
    index: usize,
    out: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        linked_query(program, out, |p| {
            Ok(*item_at(&p.uniform_static_use, index, "uniforms")?)
        })
    }
}

/// `GL_COMPUTE_WORK_GROUP_SIZE` of a compute program, into `out[0..3]`. A program without a
/// compute stage is `GPUSVC_INVALID_ARGUMENT` (nothing written).
///
/// # Safety
/// `out` is NULL or valid for three writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_compute_work_group_size(
    program: *const gpusvc_program_manager_linked_program,
    out: *mut u32,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract; `[u32; 3]` has `u32`'s alignment.
    unsafe {
        linked_query(program, out.cast::<[u32; 3]>(), |p| {
            p.linked
                .interface
                .compute_work_group_size
                .ok_or_else(|| invalid_argument("the program has no compute stage"))
        })
    }
}

fn block_list(p: &LinkedHandle, kind: BlockKind) -> &[CBlock] {
    match kind {
        BlockKind::Uniform => &p.uniform_blocks,
        BlockKind::Storage => &p.storage_blocks,
    }
}

/// How many blocks of `kind` (`GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_*`) the program has.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_block_count(
    program: *const gpusvc_program_manager_linked_program,
    kind: u32,
    out: *mut usize,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || Ok((linked(program)?, block_kind_in(kind)?)),
            out,
            "out",
            |(p, kind)| Ok(block_list(&*p.borrow()?, kind).len()),
        )
    }
}

/// Block `index` of `kind`, sorted by name: name, binding, data size, the stages that use it
/// and its member count. The name belongs to the handle and stays valid until it is freed. An
/// index past the end is `GPUSVC_INVALID_ARGUMENT`. The host sets `out->struct_size`; only that
/// many bytes are written, and `struct_size` becomes the bytes written.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_block(
    program: *const gpusvc_program_manager_linked_program,
    kind: u32,
    index: usize,
    out: *mut gpusvc_program_manager_block,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || Ok((linked(program)?, block_kind_in(kind)?)),
            out,
            "out",
            |(p, kind)| Ok(item_at(block_list(&*p.borrow()?, kind), index, "blocks")?.info()),
        )
    }
}

/// Member `member` of block `index` of `kind`, sorted by name: name, GL type, array size,
/// offset, array and matrix strides, row-major. An index past the end is
/// `GPUSVC_INVALID_ARGUMENT`. The host sets `out->struct_size` as for
/// `gpusvc_program_manager_linked_program_block`.
///
/// # Safety
/// `out` is NULL or valid for reading and writing `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_block_member(
    program: *const gpusvc_program_manager_linked_program,
    kind: u32,
    index: usize,
    member: usize,
    out: *mut gpusvc_program_manager_block_member,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_sized_into(
            || Ok((linked(program)?, block_kind_in(kind)?)),
            out,
            "out",
            |(p, kind)| {
                let p = p.borrow()?;
                let block = item_at(block_list(&p, kind), index, "blocks")?;
                Ok(item_at(&block.members, member, "members")?.info())
            },
        )
    }
}
