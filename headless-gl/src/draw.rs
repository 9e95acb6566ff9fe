//! Drawing into an offscreen framebuffer and reading the pixels back.
//!
//! A surfaceless context has no usable default framebuffer, so every draw goes to a user FBO
//! with an RGBA8 renderbuffer.

use std::rc::Rc;

use glow::HasContext;

use crate::context::{GlContext, Inner, NotCurrent};
use crate::program::{ForeignObject, Program, clear_errors};

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
        if !self.owns(&target.inner) || !self.owns(&call.program.inner) {
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
        let gl = self.inner.gl()?;
        // SAFETY: the context is current and owns the program and target (checked above); every
        // name is NUL-free; each buffer holds at least `components * vertex_count` floats, so the
        // draw reads only uploaded data. Temporary objects are deleted before returning.
        unsafe {
            clear_errors(gl);
            let vao = gl.create_vertex_array().map_err(DrawError::Create)?;
            let mut buffers = Vec::with_capacity(call.attributes.len());
            let result = (|| {
                gl.bind_framebuffer(glow::FRAMEBUFFER, Some(target.fbo));
                gl.viewport(0, 0, target.width as i32, target.height as i32);
                if let Some([r, g, b, a]) = call.clear {
                    gl.clear_color(r, g, b, a);
                    gl.clear(glow::COLOR_BUFFER_BIT);
                }
                gl.use_program(Some(call.program.raw));
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
                    let Some(location) = gl.get_uniform_location(call.program.raw, name) else {
                        tracing::debug!(uniform = name, "uniform not active; skipped");
                        continue;
                    };
                    match *value {
                        UniformValue::Float(x) => gl.uniform_1_f32(Some(&location), x),
                        UniformValue::Vec4([x, y, z, w]) => {
                            gl.uniform_4_f32(Some(&location), x, y, z, w)
                        }
                        UniformValue::Int(x) => gl.uniform_1_i32(Some(&location), x),
                    }
                }
                check(gl, "draw setup")?;
                gl.draw_arrays(call.mode, 0, call.vertex_count as i32);
                check(gl, "glDrawArrays")
            })();
            gl.bind_vertex_array(None);
            gl.bind_buffer(glow::ARRAY_BUFFER, None);
            gl.use_program(None);
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
            for vbo in buffers {
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
