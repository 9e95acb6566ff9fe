//! Measuring vertex-shader invocations per vertex on the real driver (feature `gl`).
//!
//! A vertex shader does `atomicAdd(counts[gl_VertexID], 1u)` on a shader storage buffer with one
//! `u32` per vertex; an indexed draw of the mesh runs it, and the buffer read back holds how many
//! times the driver shaded each vertex. The sum is cross-checked against the
//! `GL_VERTEX_SHADER_INVOCATIONS` pipeline-statistics query where the driver has one
//! (`GL_ARB_pipeline_statistics_query` or GL 4.6).
//!
//! The shader writes only `gl_Position` (derived from `gl_VertexID`): what a driver does may depend
//! on how large its shaded vertices are (Mesa's draw module sizes its batches in bytes), so the
//! measured policy is the policy for position-only vertices.

use headless_gl::glow::{self, HasContext};
use headless_gl::{BuildError, DrawError, GlApi, GlContext, NotCurrent, OffscreenTarget, Program};

use crate::Mesh;

/// Index type of the draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexType {
    /// `GL_UNSIGNED_SHORT`: every index (plus nothing: the base vertex is added by GL) must be
    /// below 65536.
    U16,
    /// `GL_UNSIGNED_INT`.
    U32,
}

/// What happens after the vertex shader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Raster {
    /// Triangles are rasterized into a small offscreen target, as in a real draw.
    Offscreen,
    /// `GL_RASTERIZER_DISCARD` is on: primitives are dropped after vertex processing.
    Discard,
}

/// How to draw the mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DrawOptions {
    /// Index type.
    pub index_type: IndexType,
    /// `basevertex` of `glDrawElementsBaseVertex` (0: plain `glDrawElements`). The counts are
    /// mapped back, so entry `v` is still the count of index `v`.
    pub base_vertex: u32,
    /// Rasterize or discard.
    pub raster: Raster,
}

impl Default for DrawOptions {
    /// `u32` indices, plain `glDrawElements`, rasterized offscreen.
    fn default() -> Self {
        DrawOptions {
            index_type: IndexType::U32,
            base_vertex: 0,
            raster: Raster::Offscreen,
        }
    }
}

/// One measured draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measurement {
    /// Vertex-shader invocations of each vertex of the mesh (from the storage buffer).
    pub counts: Vec<u32>,
    /// `GL_VERTEX_SHADER_INVOCATIONS` of the draw, when the driver has the query.
    pub query_invocations: Option<u64>,
}

impl Measurement {
    /// Sum of the per-vertex counts.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|&c| u64::from(c)).sum()
    }

    /// Whether the storage-buffer sum equals the query (`None` without the query).
    pub fn query_agrees(&self) -> Option<bool> {
        self.query_invocations.map(|q| q == self.total())
    }
}

/// Two measurements of the same draw, to tell whether the driver's counts are repeatable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repeatability {
    /// The first draw.
    pub first: Measurement,
    /// The second draw.
    pub second: Measurement,
}

impl Repeatability {
    /// The vertices whose counts differ between the two draws (empty: repeatable).
    pub fn differing_vertices(&self) -> Vec<u32> {
        self.first
            .counts
            .iter()
            .zip(&self.second.counts)
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(v, _)| v as u32)
            .collect()
    }

    /// True when both draws gave the same per-vertex counts and the same query result.
    pub fn is_repeatable(&self) -> bool {
        self.first == self.second
    }
}

/// Why a measurement could not be made.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// The driver allows no shader storage block in vertex shaders, so the counting shader
    /// cannot exist on it.
    #[error(
        "the driver allows {max} shader storage blocks in vertex shaders (GL_MAX_VERTEX_SHADER_STORAGE_BLOCKS); counting invocations needs at least 1"
    )]
    NoVertexStorageBlocks {
        /// What the driver reported.
        max: i32,
    },
    /// The context is OpenGL ES older than 3.2 (no base-vertex draws) or desktop GL older than
    /// 4.3 (no storage buffers).
    #[error("{api} {major}.{minor} is too old: vertex storage buffers need GL 4.3 or GLES 3.2")]
    VersionTooOld {
        /// API of the context.
        api: GlApi,
        /// Major version.
        major: u8,
        /// Minor version.
        minor: u8,
    },
    /// An index (plus the base vertex) does not fit the index type.
    #[error("index {index} at position {position} does not fit {index_type:?} indices")]
    IndexTooLarge {
        /// Position in the index list.
        position: usize,
        /// The index.
        index: u32,
        /// The index type asked for.
        index_type: IndexType,
    },
    /// The counting buffer would be larger than the driver allows.
    #[error(
        "{slots} counters ({bytes} bytes) exceed GL_MAX_SHADER_STORAGE_BLOCK_SIZE ({max} bytes)"
    )]
    TooManyVertices {
        /// Counters needed (vertex count plus base vertex).
        slots: u64,
        /// Their size.
        bytes: u64,
        /// The driver's limit.
        max: u64,
    },
    /// The draw has more indices than GL can take in one call.
    #[error("{0} indices are more than one draw call takes")]
    TooManyIndices(usize),
    /// Vertex IDs below the base vertex were counted: the driver shaded vertices the draw does
    /// not name (or `gl_VertexID` does not include the base vertex).
    #[error("{count} invocations were counted below the base vertex {base_vertex}")]
    CountsBelowBase {
        /// The base vertex.
        base_vertex: u32,
        /// Invocations counted in slots `0..base_vertex`.
        count: u64,
    },
    /// The context could not be made current.
    #[error(transparent)]
    NotCurrent(#[from] NotCurrent),
    /// The counting program did not build.
    #[error("the counting program did not build: {0}")]
    Build(#[from] BuildError),
    /// The offscreen target could not be made.
    #[error("the offscreen target could not be made: {0}")]
    Target(#[from] DrawError),
    /// A GL object could not be created.
    #[error("creating a GL object failed: {0}")]
    Create(String),
    /// GL reported an error.
    #[error("GL error 0x{code:04X} after {what}")]
    Gl {
        /// The `glGetError` code.
        code: u32,
        /// What was done.
        what: &'static str,
    },
}

/// Checks the driver's `GL_MAX_VERTEX_SHADER_STORAGE_BLOCKS`: at least 1, or
/// [`MeasureError::NoVertexStorageBlocks`].
pub fn check_vertex_storage_blocks(max: i32) -> Result<(), MeasureError> {
    if max >= 1 {
        Ok(())
    } else {
        Err(MeasureError::NoVertexStorageBlocks { max })
    }
}

const VERTEX_BODY: &str = "
layout(std430, binding = 0) buffer Counts { uint counts[]; };
void main() {
    atomicAdd(counts[gl_VertexID], 1u);
    int v = gl_VertexID;
    gl_Position = vec4(float(v & 1) * 0.5, float((v >> 1) & 1) * 0.5, 0.0, 1.0);
}
";

const FRAGMENT_BODY: &str = "
out vec4 color;
void main() { color = vec4(1.0); }
";

/// Counts vertex-shader invocations per vertex of indexed draws on one context. Owns its
/// program, a 4x4 offscreen target and the buffers, all deleted on drop.
pub struct Measurer<'a> {
    ctx: &'a GlContext,
    program: Program,
    target: OffscreenTarget,
    vao: glow::VertexArray,
    index_buffer: glow::Buffer,
    count_buffer: glow::Buffer,
    query: Option<glow::Query>,
    max_vertex_storage_blocks: i32,
    max_block_bytes: u64,
}

impl std::fmt::Debug for Measurer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Measurer")
            .field("has_invocation_query", &self.query.is_some())
            .field("max_vertex_storage_blocks", &self.max_vertex_storage_blocks)
            .field("max_block_bytes", &self.max_block_bytes)
            .finish_non_exhaustive()
    }
}

fn check(gl: &glow::Context, what: &'static str) -> Result<(), MeasureError> {
    // SAFETY: glGetError on the current context.
    match unsafe { gl.get_error() } {
        glow::NO_ERROR => Ok(()),
        code => Err(MeasureError::Gl { code, what }),
    }
}

fn clear_errors(gl: &glow::Context) {
    // SAFETY: glGetError on the current context; bounded so a lost context cannot spin.
    unsafe {
        for _ in 0..64 {
            if gl.get_error() == glow::NO_ERROR {
                break;
            }
        }
    }
}

impl<'a> Measurer<'a> {
    /// Checks the driver's limits (`GL_MAX_VERTEX_SHADER_STORAGE_BLOCKS` first), builds the
    /// counting program and makes the objects.
    pub fn new(ctx: &'a GlContext) -> Result<Self, MeasureError> {
        let info = ctx.info();
        let version = info.version_numbers;
        let (needed, prelude) = match info.api {
            GlApi::DesktopCore => ((4, 3), "#version 430 core\n"),
            GlApi::Gles => (
                (3, 2),
                "#version 320 es\nprecision highp float;\nprecision highp int;\n",
            ),
        };
        if (version.major, version.minor) < needed {
            return Err(MeasureError::VersionTooOld {
                api: info.api,
                major: version.major,
                minor: version.minor,
            });
        }
        let gl = ctx.gl()?;
        // SAFETY: the context is current; plain integer queries.
        let (max_vertex_storage_blocks, max_block_bytes) = unsafe {
            clear_errors(gl);
            let blocks = gl.get_parameter_i32(glow::MAX_VERTEX_SHADER_STORAGE_BLOCKS);
            let bytes = gl.get_parameter_i64(glow::MAX_SHADER_STORAGE_BLOCK_SIZE);
            check(gl, "querying storage-buffer limits")?;
            (blocks, bytes.max(0) as u64)
        };
        check_vertex_storage_blocks(max_vertex_storage_blocks)?;
        let has_query = info.api == GlApi::DesktopCore
            && ((version.major, version.minor) >= (4, 6)
                || gl
                    .supported_extensions()
                    .contains("GL_ARB_pipeline_statistics_query"));
        let program = ctx.build_program(
            &format!("{prelude}{VERTEX_BODY}"),
            &format!("{prelude}{FRAGMENT_BODY}"),
        )?;
        let target = ctx.offscreen_target(4, 4)?;
        let gl = ctx.gl()?;
        // SAFETY: the context is current; the objects made here are owned by the returned
        // measurer and deleted in its drop (or here when a later creation fails).
        unsafe {
            let vao = gl.create_vertex_array().map_err(MeasureError::Create)?;
            let index_buffer = match gl.create_buffer() {
                Ok(b) => b,
                Err(e) => {
                    gl.delete_vertex_array(vao);
                    return Err(MeasureError::Create(e));
                }
            };
            let count_buffer = match gl.create_buffer() {
                Ok(b) => b,
                Err(e) => {
                    gl.delete_vertex_array(vao);
                    gl.delete_buffer(index_buffer);
                    return Err(MeasureError::Create(e));
                }
            };
            let query = if has_query {
                match gl.create_query() {
                    Ok(q) => Some(q),
                    Err(e) => {
                        gl.delete_vertex_array(vao);
                        gl.delete_buffer(index_buffer);
                        gl.delete_buffer(count_buffer);
                        return Err(MeasureError::Create(e));
                    }
                }
            } else {
                None
            };
            Ok(Measurer {
                ctx,
                program,
                target,
                vao,
                index_buffer,
                count_buffer,
                query,
                max_vertex_storage_blocks,
                max_block_bytes,
            })
        }
    }

    /// True when the driver has the `GL_VERTEX_SHADER_INVOCATIONS` query.
    pub fn has_invocation_query(&self) -> bool {
        self.query.is_some()
    }

    /// The driver's `GL_MAX_VERTEX_SHADER_STORAGE_BLOCKS`.
    pub fn max_vertex_storage_blocks(&self) -> i32 {
        self.max_vertex_storage_blocks
    }

    /// Draws `mesh` once as `options` say and returns the invocations of each vertex.
    pub fn measure(
        &self,
        mesh: &Mesh<'_>,
        options: DrawOptions,
    ) -> Result<Measurement, MeasureError> {
        let indices = mesh.indices();
        let count = i32::try_from(indices.len())
            .map_err(|_| MeasureError::TooManyIndices(indices.len()))?;
        let bytes: Vec<u8> = match options.index_type {
            IndexType::U16 => {
                if let Some((position, &index)) =
                    indices.iter().enumerate().find(|&(_, &i)| i > 0xFFFF)
                {
                    return Err(MeasureError::IndexTooLarge {
                        position,
                        index,
                        index_type: IndexType::U16,
                    });
                }
                indices
                    .iter()
                    .flat_map(|&i| (i as u16).to_ne_bytes())
                    .collect()
            }
            IndexType::U32 => indices.iter().flat_map(|&i| i.to_ne_bytes()).collect(),
        };
        let base = options.base_vertex;
        let slots = u64::from(mesh.vertex_count()) + u64::from(base);
        let slot_bytes = slots * 4;
        if slot_bytes > self.max_block_bytes || slot_bytes > i32::MAX as u64 {
            return Err(MeasureError::TooManyVertices {
                slots,
                bytes: slot_bytes,
                max: self.max_block_bytes,
            });
        }
        let base_i32 = i32::try_from(base).map_err(|_| MeasureError::TooManyVertices {
            slots,
            bytes: slot_bytes,
            max: self.max_block_bytes,
        })?;
        let gl = self.ctx.gl()?;
        let zeros = vec![0u8; slot_bytes as usize];
        let mut out = vec![0u8; slot_bytes as usize];
        let mut query_invocations = None;
        // SAFETY: the context is current and owns every object used; the index buffer holds
        // `count` indices of the chosen type, every one below vertex_count (Mesh checked it), so
        // gl_VertexID < base + vertex_count = the counter slots uploaded; the read-back buffer is
        // exactly the storage buffer's size.
        let result = unsafe {
            clear_errors(gl);
            (|| {
                gl.bind_framebuffer(glow::FRAMEBUFFER, Some(self.target.framebuffer()));
                gl.viewport(0, 0, 4, 4);
                gl.use_program(Some(self.program.raw()));
                gl.bind_vertex_array(Some(self.vao));
                gl.bind_buffer(glow::ELEMENT_ARRAY_BUFFER, Some(self.index_buffer));
                gl.buffer_data_u8_slice(glow::ELEMENT_ARRAY_BUFFER, &bytes, glow::STATIC_DRAW);
                gl.bind_buffer(glow::SHADER_STORAGE_BUFFER, Some(self.count_buffer));
                gl.buffer_data_u8_slice(glow::SHADER_STORAGE_BUFFER, &zeros, glow::DYNAMIC_READ);
                gl.bind_buffer_base(glow::SHADER_STORAGE_BUFFER, 0, Some(self.count_buffer));
                if options.raster == Raster::Discard {
                    gl.enable(glow::RASTERIZER_DISCARD);
                }
                check(gl, "draw setup")?;
                if let Some(q) = self.query {
                    gl.begin_query(glow::VERTEX_SHADER_INVOCATIONS, q);
                }
                let element_type = match options.index_type {
                    IndexType::U16 => glow::UNSIGNED_SHORT,
                    IndexType::U32 => glow::UNSIGNED_INT,
                };
                if base == 0 {
                    gl.draw_elements(glow::TRIANGLES, count, element_type, 0);
                } else {
                    gl.draw_elements_base_vertex(glow::TRIANGLES, count, element_type, 0, base_i32);
                }
                if self.query.is_some() {
                    gl.end_query(glow::VERTEX_SHADER_INVOCATIONS);
                }
                check(gl, "the draw")?;
                gl.memory_barrier(
                    glow::BUFFER_UPDATE_BARRIER_BIT | glow::SHADER_STORAGE_BARRIER_BIT,
                );
                gl.get_buffer_sub_data(glow::SHADER_STORAGE_BUFFER, 0, &mut out);
                if let Some(q) = self.query {
                    query_invocations = Some(gl.get_query_parameter_u64(q, glow::QUERY_RESULT));
                }
                check(gl, "reading the counts back")
            })()
        };
        // SAFETY: the context is current; restores the state the draw changed.
        unsafe {
            gl.disable(glow::RASTERIZER_DISCARD);
            gl.bind_buffer_base(glow::SHADER_STORAGE_BUFFER, 0, None);
            gl.bind_buffer(glow::SHADER_STORAGE_BUFFER, None);
            gl.bind_vertex_array(None);
            gl.use_program(None);
            gl.bind_framebuffer(glow::FRAMEBUFFER, None);
        }
        result?;
        let all: Vec<u32> = out
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let below: u64 = all[..base as usize].iter().map(|&c| u64::from(c)).sum();
        if below != 0 {
            return Err(MeasureError::CountsBelowBase {
                base_vertex: base,
                count: below,
            });
        }
        Ok(Measurement {
            counts: all[base as usize..].to_vec(),
            query_invocations,
        })
    }

    /// Draws `mesh` twice and returns both measurements.
    pub fn measure_twice(
        &self,
        mesh: &Mesh<'_>,
        options: DrawOptions,
    ) -> Result<Repeatability, MeasureError> {
        Ok(Repeatability {
            first: self.measure(mesh, options)?,
            second: self.measure(mesh, options)?,
        })
    }
}

impl Drop for Measurer<'_> {
    fn drop(&mut self) {
        // When the context cannot be made current its objects cannot be named any more.
        if let Ok(gl) = self.ctx.gl() {
            // SAFETY: the objects were created by this context, which is current now.
            unsafe {
                gl.delete_vertex_array(self.vao);
                gl.delete_buffer(self.index_buffer);
                gl.delete_buffer(self.count_buffer);
                if let Some(q) = self.query {
                    gl.delete_query(q);
                }
            }
        }
    }
}
