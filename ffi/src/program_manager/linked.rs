//! `gpusvc_program_manager_linked_program_*`: a linked program (its driver object, key, origin and
//! reflection).

use crate::kit::handle::{self, Kind};
use crate::kit::{Out, ffi_guard, gpusvc_result};
use crate::program_cache::{VariableKind, gpusvc_program_cache_sha1, item_at, variable_kind_in};
use crate::program_manager::objects::{CActive, LinkedHandle, linked, linked_query};
use crate::program_manager::{
    gpusvc_program_manager_active_variable, gpusvc_program_manager_linked_program, link_origin_out,
};

/// Frees a linked program and deletes its driver object (GL form; host form when
/// `delete_program` is given). NULL is a no-op; a freed or unknown handle is
/// `GPUSVC_INVALID_HANDLE`; from another thread `GPUSVC_WRONG_THREAD`.
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
    unsafe { linked_query(program, out, |p| Ok(p.program.id())) }
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
    unsafe { linked_query(program, out, |p| Ok(link_origin_out(p.origin))) }
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
    unsafe { linked_query(program, out, |p| Ok(p.key.into())) }
}

fn active_list(p: &LinkedHandle, kind: VariableKind) -> &[CActive] {
    match kind {
        VariableKind::Attribute => &p.attributes,
        VariableKind::Uniform => &p.uniforms,
    }
}

/// How many active variables of `kind` (`GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_*`) the program has.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_manager_linked_program_variable_count(
    program: *const gpusvc_program_manager_linked_program,
    kind: u32,
    out: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = linked(program)?;
        let kind = variable_kind_in(kind)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let n = active_list(&*p.borrow()?, kind).len();
        out.write(n);
        Ok(())
    })
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
    ffi_guard(|| {
        let p = linked(program)?;
        let kind = variable_kind_in(kind)?;
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { crate::kit::SizedOut::new(out, "out") }?;
        let p = p.borrow()?;
        out.write(item_at(active_list(&p, kind), index, "variables")?.info());
        Ok(())
    })
}
