//! A type-erased [`ProgramBackend`]: one manager type over any backend.

use std::any::Any;

use gl_types::{ActiveVariable, LinkOptions, ProgramInterface, ShaderStage};

use crate::backend::{ObjectId, ProgramBackend};
use crate::key::ProgramKey;
use crate::program::ProgramBinaryData;

/// A driver object (shader or program) of a [`DynBackend`]: the backend's own object, boxed,
/// with its [`ObjectId`]. Dropping it drops the object (a GL object is deleted, a host object
/// released as its backend defines).
pub struct DynObject {
    id: u64,
    type_name: &'static str,
    object: Box<dyn Any>,
}

impl std::fmt::Debug for DynObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynObject")
            .field("id", &self.id)
            .field("type", &self.type_name)
            .finish_non_exhaustive()
    }
}

impl DynObject {
    /// Boxes `object`, reading its id once.
    pub fn new<T: ObjectId + 'static>(object: T) -> Self {
        DynObject {
            id: object.object_id(),
            type_name: std::any::type_name::<T>(),
            object: Box::new(object),
        }
    }

    /// The object's id ([`ObjectId::object_id`] of the object inside).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The object inside, if it is a `T`.
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        self.object.downcast_ref()
    }

    /// The object inside, if it is a `T`; otherwise `self` back.
    pub fn downcast<T: 'static>(self) -> Result<T, Self> {
        let DynObject {
            id,
            type_name,
            object,
        } = self;
        object
            .downcast::<T>()
            .map(|b| *b)
            .map_err(|object| DynObject {
                id,
                type_name,
                object,
            })
    }

    /// The object inside as `T`, or why it is not one (an object of another backend type).
    fn expect<T: 'static>(&self, what: &str) -> Result<&T, String> {
        self.downcast_ref().ok_or_else(|| {
            format!(
                "the {what} object is a {} of another backend, not a {}",
                self.type_name,
                std::any::type_name::<T>()
            )
        })
    }
}

impl ObjectId for DynObject {
    fn object_id(&self) -> u64 {
        self.id
    }
}

/// [`ProgramBackend`] with its shader and program types erased, object safe.
trait Erased {
    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<DynObject, String>;
    fn link(&mut self, shaders: &[&DynObject], options: &LinkOptions) -> Result<DynObject, String>;
    fn start_compile(&mut self, stage: ShaderStage, source: &str) -> Result<DynObject, String>;
    fn compile_done(&mut self, shader: &DynObject) -> bool;
    fn finish_compile(&mut self, shader: DynObject) -> Result<DynObject, String>;
    fn start_link(
        &mut self,
        shaders: &[&DynObject],
        options: &LinkOptions,
    ) -> Result<DynObject, String>;
    fn link_done(&mut self, program: &DynObject) -> bool;
    fn finish_link(&mut self, program: DynObject) -> Result<DynObject, String>;
    fn program_interface(&mut self, program: &DynObject) -> ProgramInterface;
    fn last_failure_is_verdict(&self) -> bool;
    fn program_binary(&mut self, program: &DynObject) -> Result<ProgramBinaryData, String>;
    fn program_binary_length(&mut self, program: &DynObject) -> Option<usize>;
    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<DynObject, String>;
    fn load_cached_binary(
        &mut self,
        key: &ProgramKey,
        binary: &ProgramBinaryData,
    ) -> Result<DynObject, String>;
    fn active_attributes(&mut self, program: &DynObject) -> Vec<ActiveVariable>;
    fn active_uniforms(&mut self, program: &DynObject) -> Vec<ActiveVariable>;
    fn type_name(&self) -> &'static str;
}

struct Wrap<B>(B);

/// The backend's own shaders inside `shaders`, or why one is not one of them.
fn shader_refs<'s, B>(shaders: &[&'s DynObject]) -> Result<Vec<&'s B::Shader>, String>
where
    B: ProgramBackend,
    B::Shader: 'static,
{
    shaders
        .iter()
        .map(|s| s.expect::<B::Shader>("shader"))
        .collect()
}

impl<B> Erased for Wrap<B>
where
    B: ProgramBackend,
    B::Shader: ObjectId + 'static,
    B::Program: ObjectId + 'static,
{
    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<DynObject, String> {
        self.0.compile(stage, source).map(DynObject::new)
    }

    fn link(&mut self, shaders: &[&DynObject], options: &LinkOptions) -> Result<DynObject, String> {
        let shaders = shader_refs::<B>(shaders)?;
        self.0.link(&shaders, options).map(DynObject::new)
    }

    fn start_compile(&mut self, stage: ShaderStage, source: &str) -> Result<DynObject, String> {
        self.0.start_compile(stage, source).map(DynObject::new)
    }

    fn compile_done(&mut self, shader: &DynObject) -> bool {
        shader.downcast_ref().is_none_or(|s| self.0.compile_done(s))
    }

    fn finish_compile(&mut self, shader: DynObject) -> Result<DynObject, String> {
        let shader = shader
            .downcast::<B::Shader>()
            .map_err(|o| format!("the shader object is a {} of another backend", o.type_name))?;
        self.0.finish_compile(shader).map(DynObject::new)
    }

    fn start_link(
        &mut self,
        shaders: &[&DynObject],
        options: &LinkOptions,
    ) -> Result<DynObject, String> {
        let shaders = shader_refs::<B>(shaders)?;
        self.0.start_link(&shaders, options).map(DynObject::new)
    }

    fn link_done(&mut self, program: &DynObject) -> bool {
        program.downcast_ref().is_none_or(|p| self.0.link_done(p))
    }

    fn finish_link(&mut self, program: DynObject) -> Result<DynObject, String> {
        let program = program
            .downcast::<B::Program>()
            .map_err(|o| format!("the program object is a {} of another backend", o.type_name))?;
        self.0.finish_link(program).map(DynObject::new)
    }

    fn program_interface(&mut self, program: &DynObject) -> ProgramInterface {
        program
            .downcast_ref()
            .map(|p| self.0.program_interface(p))
            .unwrap_or_default()
    }

    fn last_failure_is_verdict(&self) -> bool {
        self.0.last_failure_is_verdict()
    }

    fn program_binary(&mut self, program: &DynObject) -> Result<ProgramBinaryData, String> {
        self.0
            .program_binary(program.expect::<B::Program>("program")?)
    }

    fn program_binary_length(&mut self, program: &DynObject) -> Option<usize> {
        self.0.program_binary_length(program.downcast_ref()?)
    }

    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<DynObject, String> {
        self.0.load_binary(binary).map(DynObject::new)
    }

    fn load_cached_binary(
        &mut self,
        key: &ProgramKey,
        binary: &ProgramBinaryData,
    ) -> Result<DynObject, String> {
        self.0.load_cached_binary(key, binary).map(DynObject::new)
    }

    fn active_attributes(&mut self, program: &DynObject) -> Vec<ActiveVariable> {
        program
            .downcast_ref()
            .map(|p| self.0.active_attributes(p))
            .unwrap_or_default()
    }

    fn active_uniforms(&mut self, program: &DynObject) -> Vec<ActiveVariable> {
        program
            .downcast_ref()
            .map(|p| self.0.active_uniforms(p))
            .unwrap_or_default()
    }

    fn type_name(&self) -> &'static str {
        std::any::type_name::<B>()
    }
}

/// Any [`ProgramBackend`] behind one type: its shaders and programs are [`DynObject`]s (the
/// backend's own objects, boxed, with their [`ObjectId`]). One `ProgramManager<DynBackend>`
/// type then runs on the GL driver or on a host's entry points alike (the C ABI's managers).
///
/// An object handed to a backend of another type (a shader of one `DynBackend` linked by
/// another that wraps a different backend) is refused: `link` and `program_binary` return an
/// error saying so, reflection returns nothing, the binary length is unknown.
///
/// ```
/// # use program_cache::{DynBackend, ObjectId, ProgramBackend, ProgramBinaryData};
/// # use program_cache::{ActiveVariable, LinkOptions, ShaderStage};
/// /// A backend whose objects are numbers.
/// struct Numbers(u64);
/// struct Object(u64);
/// impl ObjectId for Object {
///     fn object_id(&self) -> u64 { self.0 }
/// }
/// impl ProgramBackend for Numbers {
///     type Shader = Object;
///     type Program = Object;
///     fn compile(&mut self, _: ShaderStage, _: &str) -> Result<Object, String> {
///         self.0 += 1;
///         Ok(Object(self.0))
///     }
///     fn link(&mut self, _: &[&Object], _: &LinkOptions) -> Result<Object, String> {
///         self.0 += 1;
///         Ok(Object(self.0))
///     }
///     fn program_binary(&mut self, _: &Object) -> Result<ProgramBinaryData, String> {
///         Err("none".into())
///     }
///     fn load_binary(&mut self, _: &ProgramBinaryData) -> Result<Object, String> {
///         Err("none".into())
///     }
///     fn active_attributes(&mut self, _: &Object) -> Vec<ActiveVariable> { Vec::new() }
///     fn active_uniforms(&mut self, _: &Object) -> Vec<ActiveVariable> { Vec::new() }
/// }
///
/// let mut backend = DynBackend::new(Numbers(10));
/// let vs = backend.compile(ShaderStage::Vertex, "...").unwrap();
/// let fs = backend.compile(ShaderStage::Fragment, "...").unwrap();
/// let program = backend.link(&[&vs, &fs], &LinkOptions::default()).unwrap();
/// assert_eq!((vs.id(), fs.id(), program.id()), (11, 12, 13));
/// assert_eq!(program.downcast_ref::<Object>().map(|o| o.0), Some(13));
/// ```
pub struct DynBackend<'a> {
    inner: Box<dyn Erased + 'a>,
}

impl std::fmt::Debug for DynBackend<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynBackend")
            .field("backend", &self.inner.type_name())
            .finish()
    }
}

impl<'a> DynBackend<'a> {
    /// Erases `backend`'s object types.
    pub fn new<B>(backend: B) -> Self
    where
        B: ProgramBackend + 'a,
        B::Shader: ObjectId + 'static,
        B::Program: ObjectId + 'static,
    {
        DynBackend {
            inner: Box::new(Wrap(backend)),
        }
    }

    /// The type name of the backend inside (for diagnostics).
    pub fn backend_type_name(&self) -> &'static str {
        self.inner.type_name()
    }
}

impl ProgramBackend for DynBackend<'_> {
    type Shader = DynObject;
    type Program = DynObject;

    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<DynObject, String> {
        self.inner.compile(stage, source)
    }

    fn link(&mut self, shaders: &[&DynObject], options: &LinkOptions) -> Result<DynObject, String> {
        self.inner.link(shaders, options)
    }

    fn start_compile(&mut self, stage: ShaderStage, source: &str) -> Result<DynObject, String> {
        self.inner.start_compile(stage, source)
    }

    fn compile_done(&mut self, shader: &DynObject) -> bool {
        self.inner.compile_done(shader)
    }

    fn finish_compile(&mut self, shader: DynObject) -> Result<DynObject, String> {
        self.inner.finish_compile(shader)
    }

    fn start_link(
        &mut self,
        shaders: &[&DynObject],
        options: &LinkOptions,
    ) -> Result<DynObject, String> {
        self.inner.start_link(shaders, options)
    }

    fn link_done(&mut self, program: &DynObject) -> bool {
        self.inner.link_done(program)
    }

    fn finish_link(&mut self, program: DynObject) -> Result<DynObject, String> {
        self.inner.finish_link(program)
    }

    fn program_interface(&mut self, program: &DynObject) -> ProgramInterface {
        self.inner.program_interface(program)
    }

    fn last_failure_is_verdict(&self) -> bool {
        self.inner.last_failure_is_verdict()
    }

    fn program_binary(&mut self, program: &DynObject) -> Result<ProgramBinaryData, String> {
        self.inner.program_binary(program)
    }

    fn program_binary_length(&mut self, program: &DynObject) -> Option<usize> {
        self.inner.program_binary_length(program)
    }

    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<DynObject, String> {
        self.inner.load_binary(binary)
    }

    fn load_cached_binary(
        &mut self,
        key: &ProgramKey,
        binary: &ProgramBinaryData,
    ) -> Result<DynObject, String> {
        self.inner.load_cached_binary(key, binary)
    }

    fn active_attributes(&mut self, program: &DynObject) -> Vec<ActiveVariable> {
        self.inner.active_attributes(program)
    }

    fn active_uniforms(&mut self, program: &DynObject) -> Vec<ActiveVariable> {
        self.inner.active_uniforms(program)
    }
}
