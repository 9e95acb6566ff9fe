//! Shaders, programs, program binaries and reflection.

use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::rc::Rc;

use glow::HasContext;

use crate::context::{GlContext, Inner, NotCurrent};

// The vocabulary types live in `gl-types` (no driver needed); re-exported from this crate's
// root as before.
pub use gl_types::{
    ActiveVariable, AttributeBinding, BlockMember, InterfaceBlock, LinkOptions, ProgramInterface,
    ProgramOutput, ShaderStage, StageMask, TransformFeedbackMode, Varying,
};

/// An object of one context was handed to another context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the GL object belongs to another context")]
pub struct ForeignObject;

/// A compiled shader object, deleted on drop.
pub struct Shader {
    inner: Rc<Inner>,
    raw: glow::Shader,
    stage: ShaderStage,
}

impl std::fmt::Debug for Shader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shader")
            .field("raw", &self.raw)
            .field("stage", &self.stage)
            .finish()
    }
}

impl Shader {
    /// The stage.
    pub fn stage(&self) -> ShaderStage {
        self.stage
    }
    /// The GL name.
    pub fn raw(&self) -> glow::Shader {
        self.raw
    }
}

impl Drop for Shader {
    fn drop(&mut self) {
        match self.inner.gl() {
            // SAFETY: the shader was created by this context, which is current now.
            Ok(gl) => unsafe { gl.delete_shader(self.raw) },
            Err(e) => tracing::warn!(error = %e, "shader leaked: context not current"),
        }
    }
}

/// A program object (linked, or with a link under way between [`GlContext::start_link_program`]
/// and [`GlContext::finish_link_program`]), deleted on drop.
pub struct Program {
    pub(crate) inner: Rc<Inner>,
    pub(crate) raw: glow::Program,
    /// Known from the link, or inferred from the driver on first use (a binary-loaded program).
    pub(crate) stages: Cell<Option<StageMask>>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("raw", &self.raw)
            .field("stages", &self.stages.get())
            .finish()
    }
}

impl Program {
    /// The GL name.
    pub fn raw(&self) -> glow::Program {
        self.raw
    }
    /// The stages in the program: those of the shaders it was linked from, or, for a program
    /// loaded from a binary, those the driver's answers show ([`GlContext::load_program_binary`]),
    /// worked out on the first call (so loading pays nothing for it). Empty when that first
    /// call cannot make the context current (logged; the next call tries again).
    pub fn stages(&self) -> StageMask {
        if let Some(stages) = self.stages.get() {
            return stages;
        }
        match self.inner.gl() {
            Ok(gl) => {
                let stages = crate::reflect::infer_stages(&self.inner.ext, gl, self.raw);
                self.stages.set(Some(stages));
                stages
            }
            Err(e) => {
                tracing::warn!(error = %e, "program stages unknown: context not current");
                StageMask::default()
            }
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        match self.inner.gl() {
            // SAFETY: the program was created by this context, which is current now.
            Ok(gl) => unsafe { gl.delete_program(self.raw) },
            Err(e) => tracing::warn!(error = %e, "program leaked: context not current"),
        }
    }
}

impl Program {
    /// The name and known stages, without deleting the program: the caller now owns the name.
    fn into_parts(self) -> (glow::Program, Option<StageMask>) {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again, so the `Rc` read out of it is dropped
        // exactly once (here), and the program's own drop (which deletes it) never runs.
        drop(unsafe { std::ptr::read(&this.inner) });
        (this.raw, this.stages.get())
    }
}

/// A linked program on its way from the context that made it to another context of its share
/// group: [`GlContext::hand_over`] makes one, [`GlContext::adopt`] takes it. It holds the
/// program's name, a fence after the commands that made the program, and the share group's
/// identity, and it may cross threads. Only [`GlContext::adopt`] (in any context of the
/// group) deletes the program later: one dropped without being adopted leaks the program and
/// the fence, with a warning.
#[must_use = "only adopting a handed-over program deletes it"]
pub struct HandedProgram {
    raw: glow::Program,
    stages: Option<StageMask>,
    /// The `GLsync`, as an address (sync objects are shared by the group).
    fence: usize,
    group: u64,
}

impl std::fmt::Debug for HandedProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandedProgram")
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

impl HandedProgram {
    /// The program's GL name (the same in every context of the share group).
    pub fn raw(&self) -> glow::Program {
        self.raw
    }

    /// The fence after the commands that made the program (a sync object of the share group),
    /// to check on; [`GlContext::adopt`] waits for it and deletes it, so it must not be deleted
    /// or waited on elsewhere.
    pub fn fence(&self) -> glow::Fence {
        glow::NativeFence(self.fence as _)
    }
}

impl Drop for HandedProgram {
    fn drop(&mut self) {
        tracing::warn!(program = ?self.raw, "a handed-over program was never adopted: it leaks");
    }
}

/// Why [`GlContext::hand_over`] or [`GlContext::adopt`] did not move a program.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandOverError {
    /// The program (or handed-over program) belongs to another context, or another share
    /// group.
    #[error(transparent)]
    Foreign(#[from] ForeignObject),
    /// Sync objects need GL 3.2 or GLES 3.0; the context has less.
    #[error("the context has no sync objects (GL 3.2 / GLES 3.0)")]
    NoSync,
    /// `glFenceSync` failed.
    #[error("glFenceSync failed: {0}")]
    Fence(String),
    /// See [`NotCurrent`].
    #[error(transparent)]
    NotCurrent(#[from] NotCurrent),
}

impl GlContext {
    /// Whether the context has sync objects (GL 3.2, GLES 3.0).
    fn has_sync(&self) -> bool {
        let v = self.info().version_numbers;
        match self.info().api {
            crate::GlApi::DesktopCore => v >= crate::GlVersion::new(3, 2),
            crate::GlApi::Gles => v >= crate::GlVersion::new(3, 0),
        }
    }

    /// Hands a program this context made to another context of its share group (one a
    /// [`GlContext::spawn_shared`] thread runs, or the context that spawned it): puts a fence
    /// after the commands that made it, flushes, and gives up the program without deleting it.
    /// On an error the program comes back with it, still this context's.
    pub fn hand_over(&self, program: Program) -> Result<HandedProgram, (HandOverError, Program)> {
        if !self.owns(&program.inner) {
            return Err((ForeignObject.into(), program));
        }
        if !self.has_sync() {
            return Err((HandOverError::NoSync, program));
        }
        let gl = match self.inner.gl() {
            Ok(gl) => gl,
            Err(e) => return Err((e.into(), program)),
        };
        // SAFETY: the context is current and has sync objects (checked above); glFlush sends
        // the fence, so a wait for it in another context ends.
        let fence = unsafe {
            match gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0) {
                Ok(fence) => {
                    gl.flush();
                    fence
                }
                Err(e) => return Err((HandOverError::Fence(e), program)),
            }
        };
        let (raw, stages) = program.into_parts();
        Ok(HandedProgram {
            raw,
            stages,
            fence: fence.0 as usize,
            group: self.inner.group,
        })
    }

    /// Takes a handed-over program as this context's own: waits (on the GPU, `glWaitSync`; the
    /// calling thread does not block) for the fence the maker put after it, deletes the fence,
    /// and returns the program, deleted when it drops. A program of another share group, or a
    /// context that cannot be made current, gives it back with the error.
    pub fn adopt(&self, handed: HandedProgram) -> Result<Program, (HandOverError, HandedProgram)> {
        if handed.group != self.inner.group {
            return Err((ForeignObject.into(), handed));
        }
        if !self.has_sync() {
            return Err((HandOverError::NoSync, handed));
        }
        let gl = match self.inner.gl() {
            Ok(gl) => gl,
            Err(e) => return Err((e.into(), handed)),
        };
        let handed = ManuallyDrop::new(handed);
        let fence = handed.fence();
        // SAFETY: the context is current, has sync objects, and is in the share group of the
        // context that made the fence (checked above); the fence was flushed by its maker and
        // is deleted once, here (the handed-over program is consumed).
        unsafe {
            gl.wait_sync(fence, 0, glow::TIMEOUT_IGNORED);
            gl.delete_sync(fence);
        }
        Ok(Program {
            inner: self.inner.clone(),
            raw: handed.raw,
            stages: Cell::new(handed.stages),
        })
    }
}

/// Why a shader did not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShaderError {
    /// The driver refused the source; `log` is its info log.
    #[error("{stage} shader failed to compile: {log}")]
    Compile {
        /// Stage.
        stage: ShaderStage,
        /// `glGetShaderInfoLog`.
        log: String,
    },
    /// The source is longer than GL can take (`GLint` length).
    #[error("shader source of {0} bytes is too long for GL")]
    SourceTooLong(usize),
    /// `glCreateShader` failed (a stage the context does not offer, among others).
    #[error("glCreateShader failed: {0}")]
    Create(String),
    /// A shader of another context was passed.
    #[error(transparent)]
    Foreign(#[from] ForeignObject),
    /// See [`NotCurrent`].
    #[error(transparent)]
    NotCurrent(#[from] NotCurrent),
}

/// Why a link failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// The driver refused to link; `log` is its info log.
    #[error("program failed to link: {log}")]
    Link {
        /// `glGetProgramInfoLog`.
        log: String,
    },
    /// An attribute or varying name has an interior NUL byte.
    #[error("name {0:?} contains a NUL byte")]
    InvalidName(String),
    /// `glCreateProgram` failed.
    #[error("glCreateProgram failed: {0}")]
    Create(String),
    /// The options ask for something the context cannot do (`separable` without separate
    /// shader objects).
    #[error("the context cannot link this program: {0}")]
    Unsupported(&'static str),
    /// A shader of another context was passed.
    #[error(transparent)]
    Foreign(#[from] ForeignObject),
    /// See [`NotCurrent`].
    #[error(transparent)]
    NotCurrent(#[from] NotCurrent),
}

/// Why [`GlContext::build_program`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A shader did not compile.
    #[error(transparent)]
    Shader(#[from] ShaderError),
    /// The program did not link.
    #[error(transparent)]
    Link(#[from] LinkError),
}

/// A driver program binary: `glGetProgramBinary`'s format and bytes.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ProgramBinary {
    /// `binaryFormat`.
    pub format: u32,
    /// The blob.
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for ProgramBinary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramBinary")
            .field("format", &format_args!("{:#x}", self.format))
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// Why a program binary could not be read or loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BinaryError {
    /// The binary has no bytes.
    #[error("program binary is empty")]
    Empty,
    /// The binary is longer than GL can take (`GLsizei` length).
    #[error("program binary of {0} bytes is too long for GL")]
    TooLong(usize),
    /// The driver does not list the binary's format.
    #[error("program binary format {format:#x} is not one of the driver's formats {supported:x?}")]
    UnsupportedFormat {
        /// The binary's format.
        format: u32,
        /// `GL_PROGRAM_BINARY_FORMATS`.
        supported: Vec<u32>,
    },
    /// `glProgramBinary` left `GL_LINK_STATUS` false: the driver rejected the blob (corrupt,
    /// truncated, or made by another driver build). Callers recompile from source.
    #[error("driver rejected the program binary: {log}")]
    Rejected {
        /// `glGetProgramInfoLog` (often empty for binaries).
        log: String,
    },
    /// The program is not linked, so it has no binary.
    #[error("program is not linked")]
    NotLinked,
    /// The driver returned no binary for a linked program.
    #[error("driver returned no program binary (GL error {gl_error:#x})")]
    Unavailable {
        /// `glGetError` after the query, 0 when none.
        gl_error: u32,
    },
    /// `glCreateProgram` failed.
    #[error("glCreateProgram failed: {0}")]
    Create(String),
    /// A program of another context was passed.
    #[error(transparent)]
    Foreign(#[from] ForeignObject),
    /// See [`NotCurrent`].
    #[error(transparent)]
    NotCurrent(#[from] NotCurrent),
}

/// Why reflection failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReflectError {
    /// The program is not linked (a failed link, or one not finished), so it has no interface.
    #[error("program is not linked")]
    NotLinked,
    /// A query raised a GL error: the answers are not trusted.
    #[error("GL error {code:#x} while reading the program's {what}")]
    Gl {
        /// `glGetError`.
        code: u32,
        /// What was being read.
        what: &'static str,
    },
    /// A program of another context was passed.
    #[error(transparent)]
    Foreign(#[from] ForeignObject),
    /// See [`NotCurrent`].
    #[error(transparent)]
    NotCurrent(#[from] NotCurrent),
}

/// Drains pending GL errors so the next check sees only its own.
pub(crate) fn clear_errors(gl: &glow::Context) {
    for _ in 0..16 {
        // SAFETY: glGetError has no preconditions on a current context.
        if unsafe { gl.get_error() } == glow::NO_ERROR {
            break;
        }
    }
}

impl GlContext {
    /// Whether the driver compiles and links in the background
    /// (`GL_KHR_parallel_shader_compile` or `GL_ARB_parallel_shader_compile` is listed). Without
    /// it the two-phase calls still work: [`GlContext::shader_completion`] and
    /// [`GlContext::program_completion`] answer `true` and the work happens in the finish call.
    pub fn parallel_shader_compile(&self) -> bool {
        self.inner.ext.parallel_compile
    }

    /// `GL_MAX_SHADER_COMPILER_THREADS_KHR`: how many threads the driver may compile on
    /// (`0xFFFFFFFF`: as many as it likes); `None` without the extension.
    pub fn max_shader_compiler_threads(&self) -> Result<Option<u32>, NotCurrent> {
        if !self.inner.ext.parallel_compile {
            return Ok(None);
        }
        let gl = self.inner.gl()?;
        // SAFETY: a state query the listed extension defines, on the current context.
        let value = unsafe { gl.get_parameter_i32(glow::MAX_SHADER_COMPILER_THREADS) };
        Ok(Some(value as u32))
    }

    /// `glMaxShaderCompilerThreadsKHR(n)`: the number of background compiler threads the driver
    /// may use (`0` turns background compiling off, `u32::MAX` lets the driver choose). Nothing
    /// happens without the extension.
    pub fn set_max_shader_compiler_threads(&self, n: u32) -> Result<(), NotCurrent> {
        if !self.inner.ext.parallel_compile {
            return Ok(());
        }
        let gl = self.inner.gl()?;
        // SAFETY: the extension is listed, so glow loaded its entry point (KHR or ARB name);
        // every count is valid.
        unsafe { gl.max_shader_compiler_threads(n) };
        Ok(())
    }

    /// Compiles one shader and waits for the result; on failure returns the driver's info log.
    /// The same as [`GlContext::start_compile_shader`] then [`GlContext::finish_compile_shader`].
    pub fn compile_shader(&self, stage: ShaderStage, source: &str) -> Result<Shader, ShaderError> {
        let shader = self.start_compile_shader(stage, source)?;
        self.finish_compile_shader(shader)
    }

    /// Starts compiling one shader (`glShaderSource` + `glCompileShader`) without asking for
    /// the result, so a driver with parallel compile works in the background. The shader is
    /// usable for [`GlContext::start_link_program`] right away; its status comes from
    /// [`GlContext::finish_compile_shader`] (or a link's log).
    pub fn start_compile_shader(
        &self,
        stage: ShaderStage,
        source: &str,
    ) -> Result<Shader, ShaderError> {
        if i32::try_from(source.len()).is_err() {
            return Err(ShaderError::SourceTooLong(source.len()));
        }
        let gl = self.inner.gl()?;
        // SAFETY: the context is current; the source length fits a GLint (checked above) and
        // glow passes pointer + length, so interior NULs are the driver's to report.
        unsafe {
            let raw = gl
                .create_shader(stage.gl_enum())
                .map_err(ShaderError::Create)?;
            gl.shader_source(raw, source);
            gl.compile_shader(raw);
            Ok(Shader {
                inner: self.inner.clone(),
                raw,
                stage,
            })
        }
    }

    /// Whether the shader's compile is done (`GL_COMPLETION_STATUS_KHR`), so that
    /// [`GlContext::finish_compile_shader`] will not wait. `true` without the extension, for a
    /// shader of another context, and when the context cannot be made current (the finish call
    /// then reports the error).
    pub fn shader_completion(&self, shader: &Shader) -> bool {
        if !self.inner.ext.parallel_compile || !self.owns(&shader.inner) {
            return true;
        }
        match self.inner.gl() {
            // SAFETY: the extension is listed, the context is current and owns the shader.
            Ok(gl) => unsafe { gl.get_shader_completion_status(shader.raw) },
            Err(_) => true,
        }
    }

    /// Waits for the shader's compile and returns it, or the driver's info log when it failed
    /// (the shader is deleted then).
    pub fn finish_compile_shader(&self, shader: Shader) -> Result<Shader, ShaderError> {
        if !self.owns(&shader.inner) {
            return Err(ShaderError::Foreign(ForeignObject));
        }
        let gl = self.inner.gl()?;
        // SAFETY: the context is current and owns the shader.
        unsafe {
            if gl.get_shader_compile_status(shader.raw) {
                Ok(shader)
            } else {
                Err(ShaderError::Compile {
                    stage: shader.stage,
                    log: gl.get_shader_info_log(shader.raw),
                })
            }
        }
    }

    /// Links shaders into a program (binary-retrievable) and waits for the result; on failure
    /// returns the info log. The same as [`GlContext::start_link_program`] then
    /// [`GlContext::finish_link_program`].
    pub fn link_program(
        &self,
        shaders: &[&Shader],
        options: &LinkOptions,
    ) -> Result<Program, LinkError> {
        let program = self.start_link_program(shaders, options)?;
        self.finish_link_program(program)
    }

    /// Starts a link without asking for the result: creates the program, attaches the shaders,
    /// binds the attribute locations, sets the transform-feedback varyings,
    /// `GL_PROGRAM_BINARY_RETRIEVABLE_HINT` and (for [`LinkOptions::separable`])
    /// `GL_PROGRAM_SEPARABLE`, calls `glLinkProgram` and detaches the shaders again (the shaders
    /// may be dropped at once). Shaders whose compile has not finished are fine: a failed one
    /// makes the link fail. The result comes from [`GlContext::finish_link_program`].
    pub fn start_link_program(
        &self,
        shaders: &[&Shader],
        options: &LinkOptions,
    ) -> Result<Program, LinkError> {
        if shaders.iter().any(|s| !self.owns(&s.inner)) {
            return Err(ForeignObject.into());
        }
        let names = options
            .attribute_bindings
            .iter()
            .map(|b| &b.name)
            .chain(&options.transform_feedback_varyings);
        if let Some(bad) = names.into_iter().find(|n| n.contains('\0')) {
            return Err(LinkError::InvalidName(bad.clone()));
        }
        let ext = self.inner.ext;
        let separable = match (options.separable, ext.pipelines, ext.program_parameter_i) {
            (false, _, _) => None,
            (true, Some(_), Some(set)) => Some(set),
            (true, _, _) => {
                return Err(LinkError::Unsupported(
                    "separable programs need GL 4.1, GLES 3.1 or GL_ARB_separate_shader_objects",
                ));
            }
        };
        let stages = shaders
            .iter()
            .fold(StageMask::default(), |mask, s| mask.with(s.stage));
        let gl = self.inner.gl()?;
        // SAFETY: the context is current; every shader belongs to it (checked above) and every
        // name is NUL-free (checked above), so glow's CString conversions cannot panic;
        // `separable` is the driver's glProgramParameteri, loaded because the context supports
        // separate shader objects, called with a program name this context just created.
        unsafe {
            let raw = gl.create_program().map_err(LinkError::Create)?;
            let program = Program {
                inner: self.inner.clone(),
                raw,
                stages: Cell::new(Some(stages)),
            };
            for shader in shaders {
                gl.attach_shader(raw, shader.raw);
            }
            for binding in &options.attribute_bindings {
                gl.bind_attrib_location(raw, binding.location, &binding.name);
            }
            if !options.transform_feedback_varyings.is_empty() {
                let varyings: Vec<&str> = options
                    .transform_feedback_varyings
                    .iter()
                    .map(String::as_str)
                    .collect();
                let mode = match options.transform_feedback_mode {
                    TransformFeedbackMode::Interleaved => glow::INTERLEAVED_ATTRIBS,
                    TransformFeedbackMode::Separate => glow::SEPARATE_ATTRIBS,
                };
                gl.transform_feedback_varyings(raw, &varyings, mode);
            }
            gl.program_binary_retrievable_hint(raw, true);
            if let Some(set) = separable {
                set(raw.0.get(), glow::PROGRAM_SEPARABLE, 1);
            }
            gl.link_program(raw);
            for shader in shaders {
                gl.detach_shader(raw, shader.raw);
            }
            Ok(program)
        }
    }

    /// Whether the program's link is done (`GL_COMPLETION_STATUS_KHR`), so that
    /// [`GlContext::finish_link_program`] will not wait. `true` without the extension, for a
    /// program of another context, and when the context cannot be made current (the finish
    /// call then reports the error).
    pub fn program_completion(&self, program: &Program) -> bool {
        if !self.inner.ext.parallel_compile || !self.owns(&program.inner) {
            return true;
        }
        match self.inner.gl() {
            // SAFETY: the extension is listed, the context is current and owns the program.
            Ok(gl) => unsafe { gl.get_program_completion_status(program.raw) },
            Err(_) => true,
        }
    }

    /// Waits for the program's link and returns it, or the driver's info log when it failed
    /// (the program is deleted then).
    pub fn finish_link_program(&self, program: Program) -> Result<Program, LinkError> {
        if !self.owns(&program.inner) {
            return Err(ForeignObject.into());
        }
        let gl = self.inner.gl()?;
        // SAFETY: the context is current and owns the program.
        unsafe {
            if gl.get_program_link_status(program.raw) {
                Ok(program)
            } else {
                Err(LinkError::Link {
                    log: gl.get_program_info_log(program.raw),
                })
            }
        }
    }

    /// Compiles a vertex and a fragment shader and links them with default options.
    pub fn build_program(&self, vertex: &str, fragment: &str) -> Result<Program, BuildError> {
        let vs = self.compile_shader(ShaderStage::Vertex, vertex)?;
        let fs = self.compile_shader(ShaderStage::Fragment, fragment)?;
        Ok(self.link_program(&[&vs, &fs], &LinkOptions::default())?)
    }

    /// Reads a linked program's binary out of the driver.
    pub fn program_binary(&self, program: &Program) -> Result<ProgramBinary, BinaryError> {
        if !self.owns(&program.inner) {
            return Err(ForeignObject.into());
        }
        let gl = self.inner.gl()?;
        // SAFETY: the context is current and owns the program; glow sizes the buffer from
        // GL_PROGRAM_BINARY_LENGTH.
        unsafe {
            if !gl.get_program_link_status(program.raw) {
                return Err(BinaryError::NotLinked);
            }
            clear_errors(gl);
            match gl.get_program_binary(program.raw) {
                Some(b) if !b.buffer.is_empty() => Ok(ProgramBinary {
                    format: b.format,
                    bytes: b.buffer,
                }),
                _ => Err(BinaryError::Unavailable {
                    gl_error: gl.get_error(),
                }),
            }
        }
    }

    /// Loads a binary into a new program object. A blob the driver refuses
    /// (`GL_LINK_STATUS` false) is [`BinaryError::Rejected`]; the caller recompiles from source.
    ///
    /// The loaded program's [`Program::stages`] come from the driver, which has no query that
    /// lists them: compute, geometry and the tessellation stages are found by the program
    /// queries only they answer (`GL_COMPUTE_WORK_GROUP_SIZE`, `GL_GEOMETRY_VERTICES_OUT`,
    /// `GL_TESS_CONTROL_OUTPUT_VERTICES`, `GL_TESS_GEN_MODE`); any stage that references a
    /// resource (`GL_REFERENCED_BY_*_SHADER` of inputs, outputs, uniforms, blocks, buffer
    /// variables, atomic counter buffers) is there. A program that is not separable also has,
    /// on GLES, both vertex and fragment stages (GLES links no other); on desktop GL, the vertex
    /// stage unless its inputs (`GL_PROGRAM_INPUT`, the first stage's) are the fragment
    /// stage's, and the fragment stage unless its outputs (`GL_PROGRAM_OUTPUT`, the last
    /// stage's) are a vertex, tessellation evaluation or geometry stage's. So what is not
    /// recovered is a stage that shows in none of these: a separable program's stage that
    /// references nothing, and a desktop fragment-only program that is not separable (Mesa
    /// lists neither its inputs nor its outputs; it reads as vertex + fragment, and cannot draw
    /// in a core profile anyway).
    pub fn load_program_binary(&self, binary: &ProgramBinary) -> Result<Program, BinaryError> {
        self.load_program_binary_bytes(binary.format, &binary.bytes)
    }

    /// [`GlContext::load_program_binary`] from a format and a blob the caller keeps (a cache's
    /// stored copy), without making a [`ProgramBinary`] of them first.
    pub fn load_program_binary_bytes(
        &self,
        format: u32,
        bytes: &[u8],
    ) -> Result<Program, BinaryError> {
        if bytes.is_empty() {
            return Err(BinaryError::Empty);
        }
        if i32::try_from(bytes.len()).is_err() {
            return Err(BinaryError::TooLong(bytes.len()));
        }
        if !self.info().supports_binary_format(format) {
            return Err(BinaryError::UnsupportedFormat {
                format,
                supported: self.info().program_binary_formats.clone(),
            });
        }
        let gl = self.inner.gl()?;
        // SAFETY: the context is current; the format is one the driver lists and the length fits
        // a GLsizei (checked above); glow passes its buffer's pointer and length (it takes the
        // blob as an owned buffer: the one copy made here).
        unsafe {
            let raw = gl.create_program().map_err(BinaryError::Create)?;
            let program = Program {
                inner: self.inner.clone(),
                raw,
                stages: Cell::new(None),
            };
            clear_errors(gl);
            gl.program_binary(
                raw,
                &glow::ProgramBinary {
                    buffer: bytes.to_vec(),
                    format,
                },
            );
            // A refused blob may also raise GL_INVALID_* on some drivers; the link status decides.
            clear_errors(gl);
            if gl.get_program_link_status(raw) {
                Ok(program)
            } else {
                Err(BinaryError::Rejected {
                    log: gl.get_program_info_log(raw),
                })
            }
        }
    }

    /// The program's active attributes, sorted by name.
    pub fn active_attributes(
        &self,
        program: &Program,
    ) -> Result<Vec<ActiveVariable>, ReflectError> {
        self.reflect(program, |gl, raw| {
            // SAFETY: the context is current and owns the program; indices are below the count
            // the driver reported, and names come from the driver so contain no NUL.
            unsafe {
                (0..gl.get_active_attributes(raw))
                    .filter_map(|i| gl.get_active_attribute(raw, i))
                    .map(|a| ActiveVariable {
                        location: gl.get_attrib_location(raw, &a.name).map(|l| l as i32),
                        name: a.name,
                        gl_type: a.atype,
                        size: a.size,
                    })
                    .collect()
            }
        })
    }

    /// The program's active uniforms (block members included), sorted by name.
    pub fn active_uniforms(&self, program: &Program) -> Result<Vec<ActiveVariable>, ReflectError> {
        self.reflect(program, |gl, raw| {
            // SAFETY: as in `active_attributes`.
            unsafe {
                (0..gl.get_active_uniforms(raw))
                    .filter_map(|i| gl.get_active_uniform(raw, i))
                    .map(|u| ActiveVariable {
                        location: gl.get_uniform_location(raw, &u.name).map(|l| l.0 as i32),
                        name: u.name,
                        gl_type: u.utype,
                        size: u.size,
                    })
                    .collect()
            }
        })
    }

    fn reflect(
        &self,
        program: &Program,
        list: impl FnOnce(&glow::Context, glow::Program) -> Vec<ActiveVariable>,
    ) -> Result<Vec<ActiveVariable>, ReflectError> {
        if !self.owns(&program.inner) {
            return Err(ForeignObject.into());
        }
        let gl = self.inner.gl()?;
        let mut vars = list(gl, program.raw);
        vars.sort();
        Ok(vars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gl_types_stage_enums_match_glow() {
        assert_eq!(ShaderStage::Vertex.gl_enum(), glow::VERTEX_SHADER);
        assert_eq!(ShaderStage::Fragment.gl_enum(), glow::FRAGMENT_SHADER);
        assert_eq!(ShaderStage::Compute.gl_enum(), glow::COMPUTE_SHADER);
        assert_eq!(ShaderStage::Geometry.gl_enum(), glow::GEOMETRY_SHADER);
        assert_eq!(
            ShaderStage::TessControl.gl_enum(),
            glow::TESS_CONTROL_SHADER
        );
        assert_eq!(
            ShaderStage::TessEvaluation.gl_enum(),
            glow::TESS_EVALUATION_SHADER
        );
    }
}
