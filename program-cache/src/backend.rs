//! The driver side of the flow: the `ProgramBackend` trait, the `ObjectId` of driver objects,
//! and (with the `gl` feature) its GL implementations over a headless-gl context: borrowed
//! ([`GlBackend`]) or shared ([`OwnedGlBackend`]).

#[cfg(feature = "gl")]
use std::rc::Rc;
#[cfg(feature = "gl")]
use std::sync::Arc;

use gl_types::{ActiveVariable, LinkOptions, ProgramInterface, ShaderStage};
#[cfg(feature = "gl")]
use headless_gl::glow::{self, HasContext};
#[cfg(feature = "gl")]
use headless_gl::{BinaryError, GlContext};

use crate::key::ProgramKey;
use crate::program::ProgramBinaryData;
#[cfg(feature = "gl")]
use crate::restore_ahead::RestoreAhead;

/// What the program manager needs from a driver. The GL implementations are `GlBackend` and
/// `OwnedGlBackend` (feature `gl`); hosts with their own context implement it over their GL
/// entry points (the C ABI does). [`crate::DynBackend`] erases which one a manager runs on.
pub trait ProgramBackend {
    /// A compiled shader object.
    type Shader;
    /// A linked program object.
    type Program;

    /// Compiles; `Err` carries the driver's info log.
    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<Self::Shader, String>;
    /// Links shaders (one per stage, in pipeline order: vertex, tessellation control,
    /// tessellation evaluation, geometry, fragment; or compute alone) with `options`
    /// (binary-retrievable, `GL_PROGRAM_SEPARABLE` when `options.separable`); `Err` carries
    /// the info log.
    fn link(
        &mut self,
        shaders: &[&Self::Shader],
        options: &LinkOptions,
    ) -> Result<Self::Program, String>;

    /// Starts a compile without waiting for it (`KHR_parallel_shader_compile`): the shader
    /// object comes back at once and [`ProgramBackend::finish_compile`] gives its result. The
    /// default compiles synchronously (a driver without the extension).
    fn start_compile(&mut self, stage: ShaderStage, source: &str) -> Result<Self::Shader, String> {
        self.compile(stage, source)
    }
    /// Whether a started compile has finished (`GL_COMPLETION_STATUS_KHR`); the default, true.
    fn compile_done(&mut self, shader: &Self::Shader) -> bool {
        let _ = shader;
        true
    }
    /// The result of a started compile (`GL_COMPILE_STATUS`, the info log on failure); waits
    /// when it has not finished. The default returns the shader as it is.
    fn finish_compile(&mut self, shader: Self::Shader) -> Result<Self::Shader, String> {
        Ok(shader)
    }
    /// Starts a link without waiting for it; [`ProgramBackend::finish_link`] gives its result.
    /// The default links synchronously.
    fn start_link(
        &mut self,
        shaders: &[&Self::Shader],
        options: &LinkOptions,
    ) -> Result<Self::Program, String> {
        self.link(shaders, options)
    }
    /// Whether a started link has finished (`GL_COMPLETION_STATUS_KHR`); the default, true.
    fn link_done(&mut self, program: &Self::Program) -> bool {
        let _ = program;
        true
    }
    /// The result of a started link (`GL_LINK_STATUS`, the info log on failure); waits when it
    /// has not finished. The default returns the program as it is.
    fn finish_link(&mut self, program: Self::Program) -> Result<Self::Program, String> {
        Ok(program)
    }
    /// Whether the last `Err` of a compile or link (any of the methods above) was the
    /// driver's verdict on the sources and options — a `GL_COMPILE_STATUS` /
    /// `GL_LINK_STATUS` of false with its info log — rather than a failure of the backend
    /// itself (no current context, an object of another context, `glCreateShader` failing, a
    /// name the API cannot take). Only verdicts are cached as negative results: they are
    /// deterministic for the same sources, options and driver. The default: true.
    fn last_failure_is_verdict(&self) -> bool {
        true
    }
    /// What the driver reports about a linked program beyond its attributes and uniforms
    /// (fragment outputs, transform-feedback varyings, uniform and storage blocks, static use).
    /// The default: nothing ([`ProgramInterface::default`]).
    fn program_interface(&mut self, program: &Self::Program) -> ProgramInterface {
        let _ = program;
        ProgramInterface::default()
    }
    /// Reads the binary of a linked program; `Err` says why there is none.
    fn program_binary(&mut self, program: &Self::Program) -> Result<ProgramBinaryData, String>;
    /// The byte length [`ProgramBackend::program_binary`] would return
    /// (`GL_PROGRAM_BINARY_LENGTH`), without copying the binary out: the manager asks it first so
    /// that a binary the cache would refuse is never read. `None` when the backend cannot tell
    /// (the default); the manager then reads the binary unless memory pressure is critical.
    fn program_binary_length(&mut self, program: &Self::Program) -> Option<usize> {
        let _ = program;
        None
    }
    /// Loads a binary into a new program; `Err` when the driver refuses it (`GL_LINK_STATUS`
    /// false, unknown format, ...), with the reason.
    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<Self::Program, String>;
    /// Loads the cached binary of `key` into a new program (a cache hit): what
    /// [`ProgramBackend::load_binary`] does (the default), or the backend's faster way to the
    /// same program — the GL backends with a [`crate::RestoreAhead`] take the program it
    /// restored from that binary already.
    fn load_cached_binary(
        &mut self,
        key: &ProgramKey,
        binary: &ProgramBinaryData,
    ) -> Result<Self::Program, String> {
        let _ = key;
        self.load_binary(binary)
    }
    /// Active attributes of a linked program.
    fn active_attributes(&mut self, program: &Self::Program) -> Vec<ActiveVariable>;
    /// Active uniforms of a linked program.
    fn active_uniforms(&mut self, program: &Self::Program) -> Vec<ActiveVariable>;
}

/// The id a driver object goes by on the host's side (a GL name, or any non-zero id a host's
/// backend hands out): what [`crate::DynObject::id`] reports for an erased object, e.g. for a
/// C caller that binds the program itself.
pub trait ObjectId {
    /// The object's id.
    fn object_id(&self) -> u64;
}

#[cfg(feature = "gl")]
impl ObjectId for headless_gl::Shader {
    /// The GL shader name.
    fn object_id(&self) -> u64 {
        u64::from(self.raw().0.get())
    }
}

#[cfg(feature = "gl")]
impl ObjectId for headless_gl::Program {
    /// The GL program name.
    fn object_id(&self) -> u64 {
        u64::from(self.raw().0.get())
    }
}

/// The driver's info log of a failed compile, byte for byte (what a host hands the
/// application, and what the cache records); other errors as text.
#[cfg(feature = "gl")]
fn shader_log(e: headless_gl::ShaderError) -> String {
    match e {
        headless_gl::ShaderError::Compile { log, .. } => log,
        other => other.to_string(),
    }
}

/// The driver's info log of a failed link, byte for byte; other errors as text.
#[cfg(feature = "gl")]
fn link_log(e: headless_gl::LinkError) -> String {
    match e {
        headless_gl::LinkError::Link { log } => log,
        other => other.to_string(),
    }
}

/// [`ProgramBackend`] over a headless-gl context (glow) that it borrows.
#[cfg(feature = "gl")]
#[derive(Debug, Clone, Copy)]
pub struct GlBackend<'a> {
    ctx: &'a GlContext,
    /// Whether the last compile or link error was the driver's verdict.
    verdict: bool,
    /// Where cache hits look for a program restored ahead.
    ahead: Option<&'a RestoreAhead>,
}

#[cfg(feature = "gl")]
impl<'a> GlBackend<'a> {
    /// A backend drawing on `ctx`.
    pub fn new(ctx: &'a GlContext) -> Self {
        GlBackend {
            ctx,
            verdict: true,
            ahead: None,
        }
    }

    /// A backend drawing on `ctx` whose cache hits take the programs `ahead` restored (it must
    /// have been started from `ctx`, or a context of its share group); a hit it has none for
    /// loads the binary here.
    pub fn with_restore_ahead(ctx: &'a GlContext, ahead: &'a RestoreAhead) -> Self {
        GlBackend {
            ctx,
            verdict: true,
            ahead: Some(ahead),
        }
    }

    fn shader_error(&mut self, e: headless_gl::ShaderError) -> String {
        self.verdict = matches!(e, headless_gl::ShaderError::Compile { .. });
        shader_log(e)
    }

    fn link_error(&mut self, e: headless_gl::LinkError) -> String {
        self.verdict = matches!(e, headless_gl::LinkError::Link { .. });
        link_log(e)
    }
}

#[cfg(feature = "gl")]
impl ProgramBackend for GlBackend<'_> {
    type Shader = headless_gl::Shader;
    type Program = headless_gl::Program;

    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<Self::Shader, String> {
        self.ctx
            .compile_shader(stage, source)
            .map_err(|e| self.shader_error(e))
    }

    fn link(
        &mut self,
        shaders: &[&Self::Shader],
        options: &LinkOptions,
    ) -> Result<Self::Program, String> {
        self.ctx
            .link_program(shaders, options)
            .map_err(|e| self.link_error(e))
    }

    fn start_compile(&mut self, stage: ShaderStage, source: &str) -> Result<Self::Shader, String> {
        self.ctx
            .start_compile_shader(stage, source)
            .map_err(|e| self.shader_error(e))
    }

    fn compile_done(&mut self, shader: &Self::Shader) -> bool {
        self.ctx.shader_completion(shader)
    }

    fn finish_compile(&mut self, shader: Self::Shader) -> Result<Self::Shader, String> {
        self.ctx
            .finish_compile_shader(shader)
            .map_err(|e| self.shader_error(e))
    }

    fn start_link(
        &mut self,
        shaders: &[&Self::Shader],
        options: &LinkOptions,
    ) -> Result<Self::Program, String> {
        self.ctx
            .start_link_program(shaders, options)
            .map_err(|e| self.link_error(e))
    }

    fn link_done(&mut self, program: &Self::Program) -> bool {
        self.ctx.program_completion(program)
    }

    fn finish_link(&mut self, program: Self::Program) -> Result<Self::Program, String> {
        self.ctx
            .finish_link_program(program)
            .map_err(|e| self.link_error(e))
    }

    fn program_interface(&mut self, program: &Self::Program) -> ProgramInterface {
        self.ctx.program_interface(program).unwrap_or_default()
    }

    fn last_failure_is_verdict(&self) -> bool {
        self.verdict
    }

    fn program_binary(&mut self, program: &Self::Program) -> Result<ProgramBinaryData, String> {
        self.ctx
            .program_binary(program)
            .map(|b| ProgramBinaryData {
                format: b.format,
                bytes: b.bytes,
            })
            .map_err(|e| e.to_string())
    }

    fn program_binary_length(&mut self, program: &Self::Program) -> Option<usize> {
        let gl = self.ctx.gl().ok()?;
        // SAFETY: `gl()` made the context current on this thread; glGetProgramiv writes one
        // integer, which glow passes a local for. A name this context does not know only raises
        // GL_INVALID_VALUE (cleared below), it is not undefined behaviour.
        let len = unsafe {
            let len = gl.get_program_parameter_i32(program.raw(), glow::PROGRAM_BINARY_LENGTH);
            if len <= 0 {
                gl.get_error();
            }
            len
        };
        usize::try_from(len).ok().filter(|&n| n > 0)
    }

    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<Self::Program, String> {
        let loaded = self
            .ctx
            .load_program_binary_bytes(binary.format, &binary.bytes);
        loaded.map_err(|e| match e {
            BinaryError::Rejected { log } if log.is_empty() => "driver rejected the binary".into(),
            other => other.to_string(),
        })
    }

    fn load_cached_binary(
        &mut self,
        key: &ProgramKey,
        binary: &ProgramBinaryData,
    ) -> Result<Self::Program, String> {
        if let Some(ahead) = self.ahead
            && let Some(handed) = ahead.take(key)
        {
            match self.ctx.adopt(handed) {
                Ok(program) => return Ok(program),
                Err((e, handed)) => {
                    tracing::warn!(%key, error = %e, "a program restored ahead could not be adopted");
                    ahead.give_back(key, handed);
                }
            }
        }
        self.load_binary(binary)
    }

    fn active_attributes(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        self.ctx.active_attributes(program).unwrap_or_default()
    }

    fn active_uniforms(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        self.ctx.active_uniforms(program).unwrap_or_default()
    }
}

/// [`ProgramBackend`] over a headless-gl context it shares ownership of (an `Rc`), so a manager
/// can own its backend with no borrow: the context lives as long as the backend, and as long
/// as any other `Rc` to it. Does what [`GlBackend`] does, `GL_PROGRAM_BINARY_LENGTH` included.
#[cfg(feature = "gl")]
#[derive(Debug, Clone)]
pub struct OwnedGlBackend {
    ctx: Rc<GlContext>,
    /// Whether the last compile or link error was the driver's verdict.
    verdict: bool,
    /// Where cache hits look for a program restored ahead.
    ahead: Option<Arc<RestoreAhead>>,
}

#[cfg(feature = "gl")]
impl OwnedGlBackend {
    /// A backend drawing on `ctx` (a context, or an `Rc` to one).
    pub fn new(ctx: impl Into<Rc<GlContext>>) -> Self {
        OwnedGlBackend {
            ctx: ctx.into(),
            verdict: true,
            ahead: None,
        }
    }

    /// This backend, its cache hits taking the programs `ahead` restored (see
    /// [`GlBackend::with_restore_ahead`]).
    pub fn with_restore_ahead(mut self, ahead: Arc<RestoreAhead>) -> Self {
        self.ahead = Some(ahead);
        self
    }

    /// The context.
    pub fn context(&self) -> &Rc<GlContext> {
        &self.ctx
    }
}

#[cfg(feature = "gl")]
impl ProgramBackend for OwnedGlBackend {
    type Shader = headless_gl::Shader;
    type Program = headless_gl::Program;

    fn compile(&mut self, stage: ShaderStage, source: &str) -> Result<Self::Shader, String> {
        let mut b = GlBackend::new(&self.ctx);
        let result = b.compile(stage, source);
        self.verdict = b.verdict;
        result
    }

    fn link(
        &mut self,
        shaders: &[&Self::Shader],
        options: &LinkOptions,
    ) -> Result<Self::Program, String> {
        let mut b = GlBackend::new(&self.ctx);
        let result = b.link(shaders, options);
        self.verdict = b.verdict;
        result
    }

    fn start_compile(&mut self, stage: ShaderStage, source: &str) -> Result<Self::Shader, String> {
        let mut b = GlBackend::new(&self.ctx);
        let result = b.start_compile(stage, source);
        self.verdict = b.verdict;
        result
    }

    fn compile_done(&mut self, shader: &Self::Shader) -> bool {
        GlBackend::new(&self.ctx).compile_done(shader)
    }

    fn finish_compile(&mut self, shader: Self::Shader) -> Result<Self::Shader, String> {
        let mut b = GlBackend::new(&self.ctx);
        let result = b.finish_compile(shader);
        self.verdict = b.verdict;
        result
    }

    fn start_link(
        &mut self,
        shaders: &[&Self::Shader],
        options: &LinkOptions,
    ) -> Result<Self::Program, String> {
        let mut b = GlBackend::new(&self.ctx);
        let result = b.start_link(shaders, options);
        self.verdict = b.verdict;
        result
    }

    fn link_done(&mut self, program: &Self::Program) -> bool {
        GlBackend::new(&self.ctx).link_done(program)
    }

    fn finish_link(&mut self, program: Self::Program) -> Result<Self::Program, String> {
        let mut b = GlBackend::new(&self.ctx);
        let result = b.finish_link(program);
        self.verdict = b.verdict;
        result
    }

    fn program_interface(&mut self, program: &Self::Program) -> ProgramInterface {
        GlBackend::new(&self.ctx).program_interface(program)
    }

    fn last_failure_is_verdict(&self) -> bool {
        self.verdict
    }

    fn program_binary(&mut self, program: &Self::Program) -> Result<ProgramBinaryData, String> {
        GlBackend::new(&self.ctx).program_binary(program)
    }

    fn program_binary_length(&mut self, program: &Self::Program) -> Option<usize> {
        GlBackend::new(&self.ctx).program_binary_length(program)
    }

    fn load_binary(&mut self, binary: &ProgramBinaryData) -> Result<Self::Program, String> {
        GlBackend::new(&self.ctx).load_binary(binary)
    }

    fn load_cached_binary(
        &mut self,
        key: &ProgramKey,
        binary: &ProgramBinaryData,
    ) -> Result<Self::Program, String> {
        match &self.ahead {
            Some(ahead) => GlBackend::with_restore_ahead(&self.ctx, ahead),
            None => GlBackend::new(&self.ctx),
        }
        .load_cached_binary(key, binary)
    }

    fn active_attributes(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        GlBackend::new(&self.ctx).active_attributes(program)
    }

    fn active_uniforms(&mut self, program: &Self::Program) -> Vec<ActiveVariable> {
        GlBackend::new(&self.ctx).active_uniforms(program)
    }
}
