//! Drawing into an offscreen framebuffer and reading the pixels back.
//!
//! A surfaceless context has no usable default framebuffer, so every draw goes to a user FBO
//! with an RGBA8 renderbuffer.

use std::rc::Rc;

use glow::HasContext;

use crate::context::{GlContext, Inner, NotCurrent};
use crate::program::{ForeignObject, Program, ShaderStage, StageMask, clear_errors};

/// An offscreen RGBA8 render target (framebuffer + renderbuffer), deleted on drop.
pub struct OffscreenTarget {
    inner: Rc<Inner>,
    fbo: glow::Framebuffer,
    rbo: glow::Renderbuffer,
    width: u32,
    height: u32,
}

impl std::fmt::Debug for OffscreenTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffscreenTarget")
            .field("width", &self.width)
            .field("height", &self.height)
            .finish_non_exhaustive()
    }
}

impl OffscreenTarget {
    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }
    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }
    /// The framebuffer's GL name, for drawing into the target with raw GL calls
    /// ([`GlContext::gl`]): bind it, draw, bind 0 again. The target keeps owning it.
    pub fn framebuffer(&self) -> glow::Framebuffer {
        self.fbo
    }
}

impl Drop for OffscreenTarget {
    fn drop(&mut self) {
        match self.inner.gl() {
            // SAFETY: both objects were created by this context, which is current now.
            Ok(gl) => unsafe {
                gl.delete_framebuffer(self.fbo);
                gl.delete_renderbuffer(self.rbo);
            },
            Err(e) => tracing::warn!(error = %e, "offscreen target leaked: context not current"),
        }
    }
}

/// One float vertex attribute, tightly packed.
#[derive(Debug, Clone, Copy)]
pub struct VertexAttribute<'a> {
    /// Attribute name in the vertex shader.
    pub name: &'a str,
    /// Components per vertex (1 to 4).
    pub components: u8,
    /// `components * vertex_count` floats (at least).
    pub data: &'a [f32],
}

/// A uniform value set before the draw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UniformValue {
    /// `float`.
    Float(f32),
    /// `vec4`.
    Vec4([f32; 4]),
    /// `int` / sampler.
    Int(i32),
}

/// A non-indexed draw.
#[derive(Debug, Clone, Copy)]
pub struct DrawCall<'a> {
    /// Program to draw with.
    pub program: &'a Program,
    /// Vertex inputs.
    pub attributes: &'a [VertexAttribute<'a>],
    /// Uniforms; a name the driver optimized away is skipped.
    pub uniforms: &'a [(&'a str, UniformValue)],
    /// Primitive mode (`glow::TRIANGLES`, ...).
    pub mode: u32,
    /// Vertices to draw.
    pub vertex_count: u32,
    /// Clear colour applied before drawing; `None` keeps what is there.
    pub clear: Option<[f32; 4]>,
}

/// Why a draw or read-back failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrawError {
    /// Width or height is 0 or above `GL_MAX_RENDERBUFFER_SIZE`.
    #[error("offscreen size {width}x{height} is not allowed (max {max})")]
    InvalidSize {
        /// Requested width.
        width: u32,
        /// Requested height.
        height: u32,
        /// `GL_MAX_RENDERBUFFER_SIZE`.
        max: u32,
    },
    /// The framebuffer is not complete.
    #[error("framebuffer incomplete: status {0:#x}")]
    IncompleteFramebuffer(u32),
    /// The program has no active attribute of that name.
    #[error("vertex attribute {0:?} is not an active attribute of the program")]
    MissingAttribute(String),
    /// A name has a NUL byte.
    #[error("name {0:?} contains a NUL byte")]
    InvalidName(String),
    /// An attribute has too little data or a bad component count.
    #[error("vertex attribute {name:?}: {reason}")]
    BadVertexData {
        /// Attribute.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A storage or capture buffer size is 0 or too large for GL.
    #[error("buffer size {0} is not allowed")]
    BadBuffer(usize),
    /// The context cannot do what the draw asks (a program pipeline without separate shader
    /// objects).
    #[error("the context cannot draw this: {0}")]
    Unsupported(&'static str),
    /// GL reported an error.
    #[error("GL error {0:#x} during {1}")]
    Gl(u32, &'static str),
    /// GL could not create an object.
    #[error("creating a GL object failed: {0}")]
    Create(String),
    /// An object of another context was passed.
    #[error(transparent)]
    Foreign(#[from] ForeignObject),
    /// See [`NotCurrent`].
    #[error(transparent)]
    NotCurrent(#[from] NotCurrent),
}

/// What a draw does besides [`GlContext::draw`].
#[derive(Default)]
struct Extras<'a> {
    /// Draw through a program pipeline with these programs besides the call's.
    pipeline: Option<&'a [&'a Program]>,
    /// `GL_PATCH_VERTICES`.
    patch_vertices: Option<u32>,
    /// Transform-feedback buffer sizes in bytes.
    capture: &'a [usize],
}

/// A shader storage buffer for [`GlContext::dispatch_compute`].
#[derive(Debug, Clone, Copy)]
pub struct StorageBuffer<'a> {
    /// The `binding` of the shader's buffer block.
    pub binding: u32,
    /// The buffer's bytes before the dispatch (its size, at least 1 byte).
    pub data: &'a [u8],
}

/// `glUseProgramStages` bits of a stage set.
fn stage_bits(stages: StageMask) -> u32 {
    [
        (ShaderStage::Vertex, glow::VERTEX_SHADER_BIT),
        (ShaderStage::Fragment, glow::FRAGMENT_SHADER_BIT),
        (ShaderStage::Geometry, glow::GEOMETRY_SHADER_BIT),
        (ShaderStage::TessControl, glow::TESS_CONTROL_SHADER_BIT),
        (
            ShaderStage::TessEvaluation,
            glow::TESS_EVALUATION_SHADER_BIT,
        ),
        (ShaderStage::Compute, glow::COMPUTE_SHADER_BIT),
    ]
    .into_iter()
    .filter(|&(stage, _)| stages.contains(stage))
    .fold(0, |bits, (_, bit)| bits | bit)
}

/// The transform-feedback primitive mode for a draw mode.
fn capture_mode(mode: u32) -> u32 {
    match mode {
        glow::POINTS => glow::POINTS,
        glow::LINES | glow::LINE_STRIP | glow::LINE_LOOP => glow::LINES,
        _ => glow::TRIANGLES,
    }
}

/// Reads `len` bytes of `buffer` (bound to `target` for the read) through `glMapBufferRange`,
/// which GL 3.0 and GLES 3.0 both have.
///
/// # Safety
/// The context is current and `buffer` is one of its buffers of at least `len` bytes.
unsafe fn read_buffer(
    gl: &glow::Context,
    target: u32,
    buffer: glow::Buffer,
    len: usize,
) -> Result<Vec<u8>, DrawError> {
    // SAFETY: the caller's contract; a non-null mapping of `len` bytes is readable until the
    // unmap, and is copied out before it.
    unsafe {
        gl.bind_buffer(target, Some(buffer));
        let mapped = gl.map_buffer_range(target, 0, len as i32, glow::MAP_READ_BIT);
        if mapped.is_null() {
            let code = gl.get_error();
            gl.bind_buffer(target, None);
            return Err(DrawError::Gl(code, "glMapBufferRange"));
        }
        let bytes = std::slice::from_raw_parts(mapped, len).to_vec();
        gl.unmap_buffer(target);
        gl.bind_buffer(target, None);
        Ok(bytes)
    }
}

fn check(gl: &glow::Context, what: &'static str) -> Result<(), DrawError> {
    // SAFETY: glGetError on the current context.
    match unsafe { gl.get_error() } {
        glow::NO_ERROR => Ok(()),
        code => Err(DrawError::Gl(code, what)),
    }
}

impl GlContext {
    /// Makes an RGBA8 offscreen target of `width` x `height`.
    pub fn offscreen_target(&self, width: u32, height: u32) -> Result<OffscreenTarget, DrawError> {
        let gl = self.inner.gl()?;
        // SAFETY: the context is current; sizes are checked against the driver's maximum before
        // they reach GL; objects are owned by the returned target and deleted on its drop.
        unsafe {
            let max = gl.get_parameter_i32(glow::MAX_RENDERBUFFER_SIZE).max(0) as u32;
            if width == 0 || height == 0 || width > max || height > max {
                return Err(DrawError::InvalidSize { width, height, max });
            }
            clear_errors(gl);
            let fbo = gl.create_framebuffer().map_err(DrawError::Create)?;
            let rbo = match gl.create_renderbuffer() {
                Ok(rbo) => rbo,
                Err(e) => {
                    gl.delete_framebuffer(fbo);
                    return Err(DrawError::Create(e));
                }
            };
            let target = OffscreenTarget {
                inner: self.inner.clone(),
                fbo,
                rbo,
                width,
                height,
            };
            gl.bind_renderbuffer(glow::RENDERBUFFER, Some(rbo));
            gl.renderbuffer_storage(glow::RENDERBUFFER, glow::RGBA8, width as i32, height as i32);
            gl.bind_framebuffer(glow::FRAMEBUFFER, Some(fbo));
            gl.framebuffer_renderbuffer(
                glow::FRAMEBUFFER,
                glow::COLOR_ATTACHMENT0,
                glow::RENDERBUFFER,
                Some(rbo),
            );
            let status = gl.check_framebuffer_status(glow::FRAMEBUFFER);
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            gl.bind_renderbuffer(glow::RENDERBUFFER, None);
            check(gl, "offscreen target creation")?;
            if status != glow::FRAMEBUFFER_COMPLETE {
                return Err(DrawError::IncompleteFramebuffer(status));
            }
            Ok(target)
        }
    }

    /// Draws `call` into `target`.
    pub fn draw(&self, target: &OffscreenTarget, call: &DrawCall<'_>) -> Result<(), DrawError> {
        self.draw_with(target, call, &Extras::default()).map(drop)
    }

    /// Draws `call` as patches of `vertices_per_patch` vertices (`GL_PATCH_VERTICES`), for a
    /// program with tessellation stages; `call.mode` must be `glow::PATCHES`.
    pub fn draw_patches(
        &self,
        target: &OffscreenTarget,
        call: &DrawCall<'_>,
        vertices_per_patch: u32,
    ) -> Result<(), DrawError> {
        let extras = Extras {
            patch_vertices: Some(vertices_per_patch),
            ..Extras::default()
        };
        self.draw_with(target, call, &extras).map(drop)
    }

    /// Draws `call` through a program pipeline (`glBindProgramPipeline`) made of `call.program`
    /// and `others`, each bound (`glUseProgramStages`) for its [`Program::stages`]; all must be
    /// separable. Attributes are looked up in `call.program` (the vertex stage's); each uniform
    /// is set (`glProgramUniform*`) in every program of the pipeline where it is active.
    pub fn draw_pipeline(
        &self,
        target: &OffscreenTarget,
        call: &DrawCall<'_>,
        others: &[&Program],
    ) -> Result<(), DrawError> {
        let extras = Extras {
            pipeline: Some(others),
            ..Extras::default()
        };
        self.draw_with(target, call, &extras).map(drop)
    }

    /// Draws `call` with transform feedback on: one buffer per entry of `capture_bytes` (its
    /// size in bytes) bound at that transform-feedback index, and returns their contents after
    /// the draw. The capture's primitive mode follows `call.mode` (points, lines or triangles).
    pub fn draw_capture(
        &self,
        target: &OffscreenTarget,
        call: &DrawCall<'_>,
        capture_bytes: &[usize],
    ) -> Result<Vec<Vec<u8>>, DrawError> {
        let extras = Extras {
            capture: capture_bytes,
            ..Extras::default()
        };
        self.draw_with(target, call, &extras)
    }

    /// Runs a compute program: each of `buffers` becomes a shader storage buffer with its
    /// bytes at its binding, `glDispatchCompute(groups)` runs, and the buffers' contents
    /// afterwards come back in the same order.
    pub fn dispatch_compute(
        &self,
        program: &Program,
        groups: [u32; 3],
        buffers: &[StorageBuffer<'_>],
    ) -> Result<Vec<Vec<u8>>, DrawError> {
        if !self.owns(&program.inner) {
            return Err(ForeignObject.into());
        }
        if let Some(bad) = buffers
            .iter()
            .find(|b| b.data.is_empty() || i32::try_from(b.data.len()).is_err())
        {
            return Err(DrawError::BadBuffer(bad.data.len()));
        }
        let gl = self.inner.gl()?;
        // SAFETY: the context is current and owns the program; every buffer is created here,
        // filled from a slice of a length that fits a GLsizeiptr (checked above), read back
        // with `read_buffer` within that length, and deleted before returning.
        unsafe {
            clear_errors(gl);
            let mut names = Vec::with_capacity(buffers.len());
            let result = (|| {
                gl.use_program(Some(program.raw));
                for buffer in buffers {
                    let name = gl.create_buffer().map_err(DrawError::Create)?;
                    names.push(name);
                    gl.bind_buffer(glow::SHADER_STORAGE_BUFFER, Some(name));
                    gl.buffer_data_u8_slice(
                        glow::SHADER_STORAGE_BUFFER,
                        buffer.data,
                        glow::DYNAMIC_COPY,
                    );
                    gl.bind_buffer_base(glow::SHADER_STORAGE_BUFFER, buffer.binding, Some(name));
                }
                check(gl, "storage buffer setup")?;
                let [x, y, z] = groups;
                gl.dispatch_compute(x, y, z);
                check(gl, "glDispatchCompute")?;
                gl.memory_barrier(glow::BUFFER_UPDATE_BARRIER_BIT);
                buffers
                    .iter()
                    .zip(&names)
                    .map(|(b, &name)| {
                        read_buffer(gl, glow::SHADER_STORAGE_BUFFER, name, b.data.len())
                    })
                    .collect()
            })();
            for (buffer, _) in buffers.iter().zip(&names) {
                gl.bind_buffer_base(glow::SHADER_STORAGE_BUFFER, buffer.binding, None);
            }
            gl.bind_buffer(glow::SHADER_STORAGE_BUFFER, None);
            gl.use_program(None);
            for name in names {
                gl.delete_buffer(name);
            }
            result
        }
    }

    fn draw_with(
        &self,
        target: &OffscreenTarget,
        call: &DrawCall<'_>,
        extras: &Extras<'_>,
    ) -> Result<Vec<Vec<u8>>, DrawError> {
        let others = extras.pipeline.unwrap_or_default();
        if !self.owns(&target.inner)
            || !self.owns(&call.program.inner)
            || others.iter().any(|p| !self.owns(&p.inner))
        {
            return Err(ForeignObject.into());
        }
        for attribute in call.attributes {
            if attribute.name.contains('\0') {
                return Err(DrawError::InvalidName(attribute.name.into()));
            }
            let needed = attribute.components as usize * call.vertex_count as usize;
            if !(1..=4).contains(&attribute.components) || attribute.data.len() < needed {
                return Err(DrawError::BadVertexData {
                    name: attribute.name.into(),
                    reason: format!(
                        "{} components, {} floats given, {needed} needed",
                        attribute.components,
                        attribute.data.len()
                    ),
                });
            }
        }
        if let Some((bad, _)) = call.uniforms.iter().find(|(n, _)| n.contains('\0')) {
            return Err(DrawError::InvalidName((*bad).into()));
        }
        if let Some(&bad) = extras
            .capture
            .iter()
            .find(|&&n| n == 0 || i32::try_from(n).is_err())
        {
            return Err(DrawError::BadBuffer(bad));
        }
        let pipeline_fns = match (extras.pipeline, self.inner.ext.pipelines) {
            (None, _) => None,
            (Some(_), Some(fns)) => Some(fns),
            (Some(_), None) => {
                return Err(DrawError::Unsupported(
                    "program pipelines need GL 4.1, GLES 3.1 or GL_ARB_separate_shader_objects",
                ));
            }
        };
        let programs: Vec<&Program> = std::iter::once(call.program)
            .chain(others.iter().copied())
            .collect();
        let gl = self.inner.gl()?;
        // SAFETY: the context is current and owns the program(s) and target (checked above);
        // every name is NUL-free; each buffer holds at least `components * vertex_count` floats,
        // so the draw reads only uploaded data; capture buffers are sized by the caller (checked
        // to fit a GLsizeiptr) and read back within that size; the pipeline entry points are the
        // driver's, loaded because the context has separate shader objects, and get a pipeline
        // name they made. Temporary objects are deleted before returning.
        unsafe {
            clear_errors(gl);
            let vao = gl.create_vertex_array().map_err(DrawError::Create)?;
            let mut buffers = Vec::with_capacity(call.attributes.len());
            let mut captures = Vec::with_capacity(extras.capture.len());
            let mut pipeline = 0u32;
            let result = (|| {
                gl.bind_framebuffer(glow::FRAMEBUFFER, Some(target.fbo));
                gl.viewport(0, 0, target.width as i32, target.height as i32);
                if let Some([r, g, b, a]) = call.clear {
                    gl.clear_color(r, g, b, a);
                    gl.clear(glow::COLOR_BUFFER_BIT);
                }
                match pipeline_fns {
                    None => gl.use_program(Some(call.program.raw)),
                    Some(fns) => {
                        gl.use_program(None);
                        (fns.create)(1, &mut pipeline);
                        if pipeline == 0 {
                            return Err(DrawError::Create("glGenProgramPipelines".into()));
                        }
                        for program in &programs {
                            (fns.use_stages)(
                                pipeline,
                                stage_bits(program.stages()),
                                program.raw.0.get(),
                            );
                        }
                        (fns.bind)(pipeline);
                    }
                }
                gl.bind_vertex_array(Some(vao));
                for attribute in call.attributes {
                    let location = gl
                        .get_attrib_location(call.program.raw, attribute.name)
                        .ok_or_else(|| DrawError::MissingAttribute(attribute.name.into()))?;
                    let vbo = gl.create_buffer().map_err(DrawError::Create)?;
                    buffers.push(vbo);
                    let bytes: Vec<u8> = attribute
                        .data
                        .iter()
                        .flat_map(|f| f.to_ne_bytes())
                        .collect();
                    gl.bind_buffer(glow::ARRAY_BUFFER, Some(vbo));
                    gl.buffer_data_u8_slice(glow::ARRAY_BUFFER, &bytes, glow::STATIC_DRAW);
                    gl.enable_vertex_attrib_array(location);
                    gl.vertex_attrib_pointer_f32(
                        location,
                        i32::from(attribute.components),
                        glow::FLOAT,
                        false,
                        0,
                        0,
                    );
                }
                for (name, value) in call.uniforms {
                    let mut found = false;
                    for program in &programs {
                        let Some(location) = gl.get_uniform_location(program.raw, name) else {
                            continue;
                        };
                        found = true;
                        let (raw, location) = (program.raw, Some(&location));
                        match (*value, pipeline_fns.is_some()) {
                            (UniformValue::Float(x), false) => gl.uniform_1_f32(location, x),
                            (UniformValue::Vec4([x, y, z, w]), false) => {
                                gl.uniform_4_f32(location, x, y, z, w)
                            }
                            (UniformValue::Int(x), false) => gl.uniform_1_i32(location, x),
                            (UniformValue::Float(x), true) => {
                                gl.program_uniform_1_f32(raw, location, x)
                            }
                            (UniformValue::Vec4([x, y, z, w]), true) => {
                                gl.program_uniform_4_f32(raw, location, x, y, z, w)
                            }
                            (UniformValue::Int(x), true) => {
                                gl.program_uniform_1_i32(raw, location, x)
                            }
                        }
                    }
                    if !found {
                        tracing::debug!(uniform = name, "uniform not active; skipped");
                    }
                }
                if let Some(n) = extras.patch_vertices {
                    gl.patch_parameter_i32(glow::PATCH_VERTICES, n as i32);
                }
                for (index, &size) in extras.capture.iter().enumerate() {
                    let buffer = gl.create_buffer().map_err(DrawError::Create)?;
                    captures.push(buffer);
                    gl.bind_buffer(glow::TRANSFORM_FEEDBACK_BUFFER, Some(buffer));
                    gl.buffer_data_size(
                        glow::TRANSFORM_FEEDBACK_BUFFER,
                        size as i32,
                        glow::STATIC_READ,
                    );
                    gl.bind_buffer_base(
                        glow::TRANSFORM_FEEDBACK_BUFFER,
                        index as u32,
                        Some(buffer),
                    );
                }
                check(gl, "draw setup")?;
                if !captures.is_empty() {
                    gl.begin_transform_feedback(capture_mode(call.mode));
                    check(gl, "glBeginTransformFeedback")?;
                }
                gl.draw_arrays(call.mode, 0, call.vertex_count as i32);
                let drawn = check(gl, "glDrawArrays");
                if !captures.is_empty() {
                    gl.end_transform_feedback();
                }
                drawn?;
                extras
                    .capture
                    .iter()
                    .zip(&captures)
                    .map(|(&size, &buffer)| {
                        read_buffer(gl, glow::TRANSFORM_FEEDBACK_BUFFER, buffer, size)
                    })
                    .collect()
            })();
            for index in 0..captures.len() {
                gl.bind_buffer_base(glow::TRANSFORM_FEEDBACK_BUFFER, index as u32, None);
            }
            gl.bind_buffer(glow::TRANSFORM_FEEDBACK_BUFFER, None);
            gl.bind_vertex_array(None);
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
            gl.use_program(None);
            if let Some(fns) = pipeline_fns {
                (fns.bind)(0);
                if pipeline != 0 {
                    (fns.delete)(1, &mut pipeline);
                }
            }
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            for vbo in buffers.into_iter().chain(captures) {
                gl.delete_buffer(vbo);
            }
            gl.delete_vertex_array(vao);
            result
        }
    }

    /// Reads `target` back as tightly packed RGBA8 rows, bottom row first (GL order).
    pub fn read_rgba8(&self, target: &OffscreenTarget) -> Result<Vec<u8>, DrawError> {
        if !self.owns(&target.inner) {
            return Err(ForeignObject.into());
        }
        let gl = self.inner.gl()?;
        let mut pixels = vec![0u8; target.width as usize * target.height as usize * 4];
        // SAFETY: the context is current and owns the target; with GL_PACK_ALIGNMENT 1 the
        // RGBA8 read writes exactly width * height * 4 bytes, the size of `pixels`.
        unsafe {
            clear_errors(gl);
            gl.bind_framebuffer(glow::READ_FRAMEBUFFER, Some(target.fbo));
            gl.pixel_store_i32(glow::PACK_ALIGNMENT, 1);
            gl.read_pixels(
                0,
                0,
                target.width as i32,
                target.height as i32,
                glow::RGBA,
                glow::UNSIGNED_BYTE,
                glow::PixelPackData::Slice(Some(&mut pixels)),
            );
            gl.bind_framebuffer(glow::READ_FRAMEBUFFER, None);
            check(gl, "glReadPixels")?;
        }
        Ok(pixels)
    }
}
