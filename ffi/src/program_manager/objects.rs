//! The objects behind a program manager's handles: the manager (one `ProgramManager` over a
//! type-erased backend, a `gpusvc_gl_context` or the host's GL), its shaders and linked programs.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::CString;
use std::rc::Weak;

use program_cache::{
    ActiveVariable, BlockMember, DeferredRead, DynBackend, DynObject, InterfaceBlock,
    LinkedProgram, MAX_DEFERRED_SAVES, PendingLink, ProgramManager, ProgramManagerId, Shader,
    ShaderStage, StageMask,
};

use crate::kit::handle::{self, Kind};
use crate::kit::{FfiError, answer_into, c_string, gpusvc_result};
use crate::program_cache::{CShaderVariables, stage_out};
use crate::program_manager::{
    gpusvc_program_manager, gpusvc_program_manager_active_variable, gpusvc_program_manager_block,
    gpusvc_program_manager_block_member, gpusvc_program_manager_linked_program,
    gpusvc_program_manager_pending_link, gpusvc_program_manager_shader,
};

/// A manager over either backend: `DynBackend::new(OwnedGlBackend::new(ctx))` for a
/// `gpusvc_gl_context`, `DynBackend::new(HostBackend::new(..))` for the host's GL.
pub(crate) type Manager = ProgramManager<DynBackend<'static>>;

#[derive(Debug)]
pub(crate) struct ShaderHandle {
    /// Made with `ProgramManager::new_shader`: it records its manager, which refuses it to any
    /// other (`ForeignShader`, `LinkFailure::ForeignShader`).
    pub(crate) shader: Shader<DynObject>,
    /// The variable maps as C strings, built on first read after a change.
    pub(crate) c_variables: Option<CShaderVariables>,
}

impl ShaderHandle {
    pub(crate) fn c_variables(&mut self) -> &CShaderVariables {
        let shader = &self.shader;
        self.c_variables.get_or_insert_with(|| {
            shader
                .variables()
                .map(CShaderVariables::new)
                .unwrap_or_default()
        })
    }
}

/// An active variable with its name as a C string, owned by the linked program's handle.
#[derive(Debug)]
pub(crate) struct CActive {
    pub(crate) name: CString,
    gl_type: u32,
    size: i32,
    location: Option<i32>,
    location_index: i32,
}

impl CActive {
    fn new(v: &ActiveVariable) -> Self {
        CActive {
            name: c_string(&v.name),
            gl_type: v.gl_type,
            size: v.size,
            location: v.location,
            location_index: -1,
        }
    }

    fn output(o: &program_cache::ProgramOutput) -> Self {
        CActive {
            name: c_string(&o.name),
            gl_type: o.gl_type,
            size: o.size,
            location: (o.location >= 0).then_some(o.location),
            location_index: o.index,
        }
    }

    fn varying(v: &program_cache::Varying) -> Self {
        CActive {
            name: c_string(&v.name),
            gl_type: v.gl_type,
            size: v.size,
            location: None,
            location_index: -1,
        }
    }

    pub(crate) fn info(&self) -> gpusvc_program_manager_active_variable {
        gpusvc_program_manager_active_variable {
            struct_size: size_of::<gpusvc_program_manager_active_variable>(),
            name: self.name.as_ptr(),
            gl_type: self.gl_type,
            size: self.size,
            has_location: self.location.is_some(),
            location: self.location.unwrap_or(-1),
            location_index: self.location_index,
            reserved: 0,
        }
    }
}

/// A stage set as C sees it: bit `1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*` per stage.
pub(crate) fn stage_mask_out(mask: StageMask) -> u32 {
    ShaderStage::ALL
        .into_iter()
        .filter(|s| mask.contains(*s))
        .fold(0, |m, s| m | (1 << stage_out(s)))
}

/// A block member with its name as a C string.
#[derive(Debug)]
pub(crate) struct CMember {
    name: CString,
    member: BlockMember,
}

impl CMember {
    pub(crate) fn info(&self) -> gpusvc_program_manager_block_member {
        let m = &self.member;
        gpusvc_program_manager_block_member {
            struct_size: size_of::<gpusvc_program_manager_block_member>(),
            name: self.name.as_ptr(),
            gl_type: m.gl_type,
            array_size: m.size,
            offset: m.offset,
            array_stride: m.array_stride,
            matrix_stride: m.matrix_stride,
            row_major: m.row_major,
            reserved: [0; 3],
        }
    }
}

/// A uniform or storage block with C strings.
#[derive(Debug)]
pub(crate) struct CBlock {
    name: CString,
    binding: i32,
    data_size: i32,
    referenced_by: u32,
    pub(crate) members: Vec<CMember>,
}

impl CBlock {
    fn new(b: &InterfaceBlock) -> Self {
        CBlock {
            name: c_string(&b.name),
            binding: b.binding,
            data_size: b.data_size,
            referenced_by: stage_mask_out(b.referenced_by),
            members: b
                .members
                .iter()
                .map(|m| CMember {
                    name: c_string(&m.name),
                    member: m.clone(),
                })
                .collect(),
        }
    }

    pub(crate) fn info(&self) -> gpusvc_program_manager_block {
        gpusvc_program_manager_block {
            struct_size: size_of::<gpusvc_program_manager_block>(),
            name: self.name.as_ptr(),
            binding: self.binding,
            data_size: self.data_size,
            referenced_by: self.referenced_by,
            reserved: 0,
            member_count: self.members.len(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct LinkedHandle {
    /// The manager that linked it (a deferred binary is saved only by it).
    pub(crate) manager: ProgramManagerId,
    /// That manager while it lives: freeing the handle forgets the program's deferred read.
    owner: Weak<RefCell<Manager>>,
    /// The program (its driver object, whose id is what C sees, is deleted when the handle is
    /// freed), key, origin, stages and reflection.
    pub(crate) linked: LinkedProgram<DynObject>,
    pub(crate) attributes: Vec<CActive>,
    pub(crate) uniforms: Vec<CActive>,
    /// Transform-feedback varyings, in link order.
    pub(crate) varyings: Vec<CActive>,
    /// Fragment outputs.
    pub(crate) outputs: Vec<CActive>,
    pub(crate) uniform_blocks: Vec<CBlock>,
    pub(crate) storage_blocks: Vec<CBlock>,
    /// For each of `uniforms`, the stages that statically use it (C mask).
    pub(crate) uniform_static_use: Vec<u32>,
}

impl LinkedHandle {
    pub(crate) fn new(owner: Weak<RefCell<Manager>>, linked: LinkedProgram<DynObject>) -> Self {
        let manager = linked.manager;
        let i = &linked.interface;
        let static_use = |name: &str| {
            i.uniform_static_use
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, m)| stage_mask_out(*m))
        };
        LinkedHandle {
            manager,
            owner,
            attributes: linked.attributes.iter().map(CActive::new).collect(),
            uniforms: linked.uniforms.iter().map(CActive::new).collect(),
            varyings: i.varyings.iter().map(CActive::varying).collect(),
            outputs: i.outputs.iter().map(CActive::output).collect(),
            uniform_blocks: i.uniform_blocks.iter().map(CBlock::new).collect(),
            storage_blocks: i.storage_blocks.iter().map(CBlock::new).collect(),
            uniform_static_use: linked
                .uniforms
                .iter()
                .map(|u| static_use(&u.name))
                .collect(),
            linked,
        }
    }
}

/// A link started with `gpusvc_program_manager_start_link`, with the manager that started it.
impl Drop for LinkedHandle {
    /// A program freed with its binary still deferred gives its read back to its manager. When
    /// the manager is in a call on this thread (a free from inside one of its host callbacks),
    /// the read's token waits in [`ORPHANED_READS`] and the manager forgets it at its next call.
    fn drop(&mut self) {
        let Some(read) = self.linked.deferred_read() else {
            return;
        };
        let Some(owner) = self.owner.upgrade() else {
            return;
        };
        match owner.try_borrow_mut() {
            Ok(mut manager) => {
                manager.forget_read(read);
            }
            // During this thread's teardown the list is gone: the read goes with its manager.
            Err(_) => {
                let _ = ORPHANED_READS.try_with(|q| {
                    let mut q = q.borrow_mut();
                    if q.len() >= MAX_ORPHANED_READS {
                        q.retain(|(m, _)| m.strong_count() > 0);
                    }
                    if q.len() >= MAX_ORPHANED_READS {
                        q.pop_front();
                    }
                    q.push_back((self.owner.clone(), read));
                });
            }
        }
    }
}

/// At most this many tokens wait in [`ORPHANED_READS`] (each manager holds at most
/// `MAX_DEFERRED_SAVES` reads); past it the tokens of freed managers go first, then the oldest,
/// whose read then waits until its manager is freed.
const MAX_ORPHANED_READS: usize = 4 * MAX_DEFERRED_SAVES;

thread_local! {
    /// Deferred reads of linked programs freed while their manager was in a call on this
    /// thread, with that manager. Managers are bound to their thread, so this thread's list is
    /// the only one that can hold their tokens.
    static ORPHANED_READS: RefCell<VecDeque<(Weak<RefCell<Manager>>, DeferredRead)>> = const {
        RefCell::new(VecDeque::new())
    };
}

/// Forgets the reads of programs freed while `m` was busy, unless it is busy now (an outer
/// call on this thread: a later call does it). Tokens of freed managers are dropped on the way.
/// `forget_read` calls no host callback, and the list is not borrowed while it runs.
fn forget_orphaned_reads(m: &handle::Local<Manager>) {
    let Ok(mut manager) = m.borrow_mut() else {
        return;
    };
    let id = manager.id();
    let mine = ORPHANED_READS
        .try_with(|q| {
            let mut q = q.borrow_mut();
            let mut mine = Vec::new();
            q.retain(|(owner, read)| {
                if read.manager() == id {
                    mine.push(*read);
                    return false;
                }
                owner.strong_count() > 0
            });
            mine
        })
        .unwrap_or_default();
    for read in mine {
        manager.forget_read(read);
    }
}

#[derive(Debug)]
pub(crate) struct PendingHandle {
    pub(crate) manager: ProgramManagerId,
    pub(crate) pending: Option<PendingLink<DynObject>>,
}

/// The manager behind `m`, which first forgets the reads of programs freed while it was busy.
pub(crate) fn manager(
    m: *const gpusvc_program_manager,
) -> Result<handle::Local<Manager>, FfiError> {
    let local = handle::local(m, "manager", Kind::ProgramManager)?;
    forget_orphaned_reads(&local);
    Ok(local)
}

pub(crate) fn shader(
    s: *const gpusvc_program_manager_shader,
    name: &str,
) -> Result<handle::Local<ShaderHandle>, FfiError> {
    handle::local(s, name, Kind::Shader)
}

pub(crate) fn linked(
    p: *const gpusvc_program_manager_linked_program,
) -> Result<handle::Local<LinkedHandle>, FfiError> {
    handle::local(p, "program", Kind::LinkedProgram)
}

pub(crate) fn pending(
    p: *const gpusvc_program_manager_pending_link,
) -> Result<handle::Local<PendingHandle>, FfiError> {
    handle::local(p, "pending", Kind::PendingLink)
}

/// The body of an export that answers about a shader through `out` (named "out"): the handle
/// is checked, then `out`; `answer` runs on the borrowed shader and its value is written only
/// on success.
///
/// # Safety
/// `out` is NULL or valid for one write.
pub(crate) unsafe fn shader_query<T>(
    s: *const gpusvc_program_manager_shader,
    out: *mut T,
    answer: impl FnOnce(&ShaderHandle) -> Result<T, FfiError>,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        answer_into(
            || shader(s, "shader"),
            out,
            "out",
            |s| answer(&*s.borrow()?),
        )
    }
}

/// [`shader_query`] for a linked program.
///
/// # Safety
/// `out` is NULL or valid for one write.
pub(crate) unsafe fn linked_query<T>(
    p: *const gpusvc_program_manager_linked_program,
    out: *mut T,
    answer: impl FnOnce(&LinkedHandle) -> Result<T, FfiError>,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { answer_into(|| linked(p), out, "out", |p| answer(&*p.borrow()?)) }
}
