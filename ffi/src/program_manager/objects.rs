//! The objects behind a program manager's handles: the manager, its shaders and linked
//! programs, each over either backend (a `gpusvc_gl_context`, or the host's GL).

use std::any::Any;
use std::ffi::CString;
use std::rc::Rc;

use headless_gl::{ActiveVariable, GlContext, LinkOptions, ShaderStage};
use program_cache::{
    GlBackend, LinkOrigin, LinkedProgram, ProgramBackend, ProgramBinaryData, ProgramKey,
    ProgramManager, Shader,
};

use crate::kit::handle::{self, Kind};
use crate::kit::{FfiError, c_string};
use crate::program_cache::CShaderVariables;
use crate::program_manager::host_gl::{HostBackend, HostObject};
use crate::program_manager::{
    gpusvc_program_manager, gpusvc_program_manager_linked_program, gpusvc_program_manager_shader,
};

/// [`ProgramBackend`] over a GL context that the backend shares ownership of.
#[derive(Debug)]
pub(crate) struct OwnedGl(pub(crate) Rc<GlContext>);

impl ProgramBackend for OwnedGl {
    type Shader = headless_gl::Shader;
    type Program = headless_gl::Program;

    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<Self::Shader, String> {
        GlBackend::new(&self.0).compile(stage, source)
    }
    fn link(
        &mut self,
        vertex: &Self::Shader,
        fragment: &Self::Shader,
        options: &LinkOptions,
    ) -> Result<Self::Program, String> {
        GlBackend::new(&self.0).link(vertex, fragment, options)
    }
    fn program_binary(&mut self, program: &Self::Program) -> Result<ProgramBinaryData, String> {
        GlBackend::new(&self.0).program_binary(program)
    }
    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<Self::Program, String> {
        GlBackend::new(&self.0).load_binary(binary)
    }
    fn active_attributes(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        GlBackend::new(&self.0).active_attributes(program)
    }
    fn active_uniforms(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        GlBackend::new(&self.0).active_uniforms(program)
    }
}

#[derive(Debug)]
pub(crate) enum Manager {
    Gl(ProgramManager<OwnedGl>),
    Host(ProgramManager<HostBackend>),
}

#[derive(Debug)]
pub(crate) enum ShaderObject {
    Gl(Shader<headless_gl::Shader>),
    Host(Shader<HostObject>),
}

/// Runs `$body` with `$s` bound to the shader inside a `ShaderObject`, whichever backend.
macro_rules! each_shader {
    ($obj:expr, $s:ident => $body:expr) => {
        match $obj {
            $crate::program_manager::objects::ShaderObject::Gl($s) => $body,
            $crate::program_manager::objects::ShaderObject::Host($s) => $body,
        }
    };
}

#[derive(Debug)]
pub(crate) struct ShaderHandle {
    /// The manager that made it (its handle's id).
    pub(crate) manager: usize,
    pub(crate) shader: ShaderObject,
    /// The variable maps as C strings, built on first read after a change.
    pub(crate) c_variables: Option<CShaderVariables>,
}

impl ShaderHandle {
    pub(crate) fn stage(&self) -> ShaderStage {
        each_shader!(&self.shader, s => s.stage())
    }

    pub(crate) fn c_variables(&mut self) -> &CShaderVariables {
        let shader = &self.shader;
        self.c_variables.get_or_insert_with(|| {
            each_shader!(shader, s => s
                .variables()
                .map(CShaderVariables::new)
                .unwrap_or_default())
        })
    }
}

#[derive(Debug)]
pub(crate) struct CActive {
    pub(crate) name: CString,
    pub(crate) gl_type: u32,
    pub(crate) size: i32,
    pub(crate) location: Option<i32>,
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
}

pub(crate) struct LinkedHandle {
    pub(crate) object: u64,
    pub(crate) key: ProgramKey,
    pub(crate) origin: LinkOrigin,
    pub(crate) attributes: Vec<CActive>,
    pub(crate) uniforms: Vec<CActive>,
    /// The driver object, deleted when the handle is freed.
    _program: Box<dyn Any>,
}

/// The id C sees for a driver program object.
pub(crate) trait ObjectId {
    fn object_id(&self) -> u64;
}

impl ObjectId for headless_gl::Program {
    fn object_id(&self) -> u64 {
        u64::from(self.raw().0.get())
    }
}

impl ObjectId for HostObject {
    fn object_id(&self) -> u64 {
        self.id
    }
}

impl LinkedHandle {
    pub(crate) fn new<P: ObjectId + 'static>(linked: LinkedProgram<P>) -> Self {
        LinkedHandle {
            object: linked.program.object_id(),
            key: linked.key,
            origin: linked.origin,
            attributes: linked.attributes.iter().map(CActive::new).collect(),
            uniforms: linked.uniforms.iter().map(CActive::new).collect(),
            _program: Box::new(linked.program),
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

pub(crate) use each_shader;
