//! The objects behind a program manager's handles: the manager (one `ProgramManager` over a
//! type-erased backend, a `gpusvc_gl_context` or the host's GL), its shaders and linked programs.

use std::ffi::CString;

use program_cache::{
    ActiveVariable, DynBackend, DynObject, LinkOrigin, LinkedProgram, ProgramKey, ProgramManager,
    Shader,
};

use crate::kit::handle::{self, Kind};
use crate::kit::{FfiError, answer_into, c_string, gpusvc_result};
use crate::program_cache::CShaderVariables;
use crate::program_manager::{
    gpusvc_program_manager, gpusvc_program_manager_active_variable,
    gpusvc_program_manager_linked_program, gpusvc_program_manager_shader,
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
    name: CString,
    gl_type: u32,
    size: i32,
    location: Option<i32>,
}

impl CActive {
    fn new(v: &ActiveVariable) -> Self {
        CActive {
            name: c_string(&v.name),
            gl_type: v.gl_type,
            size: v.size,
            location: v.location,
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
        }
    }
}

#[derive(Debug)]
pub(crate) struct LinkedHandle {
    pub(crate) key: ProgramKey,
    pub(crate) origin: LinkOrigin,
    pub(crate) attributes: Vec<CActive>,
    pub(crate) uniforms: Vec<CActive>,
    /// The driver object (its id is what C sees), deleted when the handle is freed.
    pub(crate) program: DynObject,
}

impl LinkedHandle {
    pub(crate) fn new(linked: LinkedProgram<DynObject>) -> Self {
        LinkedHandle {
            key: linked.key,
            origin: linked.origin,
            attributes: linked.attributes.iter().map(CActive::new).collect(),
            uniforms: linked.uniforms.iter().map(CActive::new).collect(),
            program: linked.program,
        }
    }
}

pub(crate) fn manager(
    m: *const gpusvc_program_manager,
) -> Result<handle::Local<Manager>, FfiError> {
    handle::local(m, "manager", Kind::ProgramManager)
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
