//! `gl-types`: the vocabulary of GL programs that both the driver side (`gpusvc-headless-gl`)
//! and the program cache (`gpusvc-program-cache`) speak — shader stages, link options (attribute
//! bindings, transform-feedback varyings and mode) and active variables — with no GL driver, no
//! windowing and no dependency at all. A crate that only hashes program keys or decodes cache
//! entries (the program cache built without its `gl` feature, the fuzz targets) needs nothing
//! more.
//!
//! `headless_gl` and `program_cache` re-export every type here from their own roots
//! (`headless_gl::ShaderStage` is [`ShaderStage`]).
//!
//! # Guarantees
//! * Plain data: every type is `Send + Sync`, `Clone`, comparable and hashable (except
//!   [`LinkOptions`], which is not hashed) and owns what it holds.
//! * [`ShaderStage::gl_enum`] is the enum value the GL specification gives each stage.
//!
//! # Errors
//! Nothing here fails.
//!
//! # Thread safety
//! No shared state: use the values from any thread.
//!
//! ```
//! use gl_types::{AttributeBinding, LinkOptions, ShaderStage, TransformFeedbackMode};
//!
//! let options = LinkOptions {
//!     attribute_bindings: vec![AttributeBinding { name: "a_pos".into(), location: 0 }],
//!     transform_feedback_varyings: Vec::new(),
//!     transform_feedback_mode: TransformFeedbackMode::Interleaved,
//!     separable: false,
//! };
//! assert_eq!(options.attribute_bindings[0].location, 0);
//! assert_eq!(ShaderStage::Fragment.gl_enum(), 0x8B30); // GL_FRAGMENT_SHADER
//! assert_eq!(ShaderStage::Vertex.to_string(), "vertex");
//! ```

/// `GL_VERTEX_SHADER`.
const GL_VERTEX_SHADER: u32 = 0x8B31;
/// `GL_FRAGMENT_SHADER`.
const GL_FRAGMENT_SHADER: u32 = 0x8B30;
/// `GL_COMPUTE_SHADER`.
const GL_COMPUTE_SHADER: u32 = 0x91B9;
/// `GL_GEOMETRY_SHADER`.
const GL_GEOMETRY_SHADER: u32 = 0x8DD9;
/// `GL_TESS_CONTROL_SHADER`.
const GL_TESS_CONTROL_SHADER: u32 = 0x8E88;
/// `GL_TESS_EVALUATION_SHADER`.
const GL_TESS_EVALUATION_SHADER: u32 = 0x8E87;

/// A shader stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShaderStage {
    /// `GL_VERTEX_SHADER`.
    Vertex,
    /// `GL_FRAGMENT_SHADER`.
    Fragment,
    /// `GL_COMPUTE_SHADER` (desktop 4.3+, GLES 3.1+).
    Compute,
    /// `GL_GEOMETRY_SHADER` (desktop 3.2+, GLES 3.2 or `EXT_geometry_shader`).
    Geometry,
    /// `GL_TESS_CONTROL_SHADER` (desktop 4.0+, GLES 3.2 or `EXT_tessellation_shader`).
    TessControl,
    /// `GL_TESS_EVALUATION_SHADER` (desktop 4.0+, GLES 3.2 or `EXT_tessellation_shader`).
    TessEvaluation,
}

impl ShaderStage {
    /// Every stage, in pipeline order (compute last).
    pub const ALL: [ShaderStage; 6] = [
        ShaderStage::Vertex,
        ShaderStage::TessControl,
        ShaderStage::TessEvaluation,
        ShaderStage::Geometry,
        ShaderStage::Fragment,
        ShaderStage::Compute,
    ];

    /// The GL enum.
    pub fn gl_enum(self) -> u32 {
        match self {
            ShaderStage::Vertex => GL_VERTEX_SHADER,
            ShaderStage::Fragment => GL_FRAGMENT_SHADER,
            ShaderStage::Compute => GL_COMPUTE_SHADER,
            ShaderStage::Geometry => GL_GEOMETRY_SHADER,
            ShaderStage::TessControl => GL_TESS_CONTROL_SHADER,
            ShaderStage::TessEvaluation => GL_TESS_EVALUATION_SHADER,
        }
    }

    /// The stage of a GL enum; `None` for any other value.
    pub fn from_gl_enum(value: u32) -> Option<Self> {
        ShaderStage::ALL.into_iter().find(|s| s.gl_enum() == value)
    }

    /// This stage's bit in a [`StageMask`].
    pub fn bit(self) -> StageMask {
        StageMask(1 << (self as u8))
    }
}

/// A set of stages (bit `1 << stage as u8`): the stages of a program, or the stages that
/// statically use a resource (`GL_REFERENCED_BY_*_SHADER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct StageMask(pub u8);

impl StageMask {
    /// Whether `stage` is in the set.
    pub fn contains(self, stage: ShaderStage) -> bool {
        self.0 & stage.bit().0 != 0
    }
    /// The set with `stage` added.
    #[must_use]
    pub fn with(self, stage: ShaderStage) -> Self {
        StageMask(self.0 | stage.bit().0)
    }
}

impl std::fmt::Display for ShaderStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ShaderStage::Vertex => "vertex",
            ShaderStage::Fragment => "fragment",
            ShaderStage::Compute => "compute",
            ShaderStage::Geometry => "geometry",
            ShaderStage::TessControl => "tessellation control",
            ShaderStage::TessEvaluation => "tessellation evaluation",
        })
    }
}

/// `GL_INTERLEAVED_ATTRIBS` or `GL_SEPARATE_ATTRIBS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TransformFeedbackMode {
    /// `GL_INTERLEAVED_ATTRIBS`.
    #[default]
    Interleaved,
    /// `GL_SEPARATE_ATTRIBS`.
    Separate,
}

/// `glBindAttribLocation(name, location)` before linking.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AttributeBinding {
    /// Attribute name.
    pub name: String,
    /// Location.
    pub location: u32,
}

/// What goes into a link besides the shaders.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkOptions {
    /// Attribute locations bound before linking.
    pub attribute_bindings: Vec<AttributeBinding>,
    /// Transform-feedback varyings (none when empty).
    pub transform_feedback_varyings: Vec<String>,
    /// Transform-feedback buffer mode.
    pub transform_feedback_mode: TransformFeedbackMode,
    /// `GL_PROGRAM_SEPARABLE` set before linking (for program pipelines).
    pub separable: bool,
}

/// One active attribute or uniform.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActiveVariable {
    /// Name as the driver reports it (`u_array[0]` for arrays).
    pub name: String,
    /// GL type enum (`GL_FLOAT_VEC4`, ...).
    pub gl_type: u32,
    /// Array size (1 for non-arrays).
    pub size: i32,
    /// Location; `None` for uniforms in blocks and built-ins.
    pub location: Option<i32>,
}

/// A fragment output (`GL_PROGRAM_OUTPUT` of the fragment stage): what
/// `glGetFragDataLocation` / `glGetFragDataIndex` answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProgramOutput {
    /// Name as the driver reports it.
    pub name: String,
    /// GL type enum.
    pub gl_type: u32,
    /// Array size (1 for non-arrays).
    pub size: i32,
    /// `GL_LOCATION` (-1 for built-ins such as `gl_FragDepth`).
    pub location: i32,
    /// `GL_LOCATION_INDEX` (dual-source blending); -1 when the driver has none.
    pub index: i32,
}

/// A transform-feedback varying as linked (`GL_TRANSFORM_FEEDBACK_VARYING`,
/// `glGetTransformFeedbackVarying`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Varying {
    /// Name as the driver reports it.
    pub name: String,
    /// GL type enum.
    pub gl_type: u32,
    /// Array size.
    pub size: i32,
}

/// One member of a uniform or shader storage block (`GL_UNIFORM` / `GL_BUFFER_VARIABLE`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockMember {
    /// Name as the driver reports it (`Block.member` or `member`).
    pub name: String,
    /// GL type enum.
    pub gl_type: u32,
    /// `GL_ARRAY_SIZE` (0 for an unsized trailing array).
    pub size: i32,
    /// `GL_OFFSET` in bytes.
    pub offset: i32,
    /// `GL_ARRAY_STRIDE`.
    pub array_stride: i32,
    /// `GL_MATRIX_STRIDE`.
    pub matrix_stride: i32,
    /// `GL_IS_ROW_MAJOR`.
    pub row_major: bool,
}

/// A uniform block or shader storage block.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InterfaceBlock {
    /// Name as the driver reports it (`Block` or `Block[2]`).
    pub name: String,
    /// `GL_BUFFER_BINDING`.
    pub binding: i32,
    /// `GL_BUFFER_DATA_SIZE` in bytes.
    pub data_size: i32,
    /// Its members, sorted by name.
    pub members: Vec<BlockMember>,
    /// The stages that statically use it (`GL_REFERENCED_BY_*_SHADER`).
    pub referenced_by: StageMask,
}

/// What a driver reports about a linked program beyond its attributes and uniforms: what a
/// validating GL front end answers queries from. Lists are sorted by name, except `varyings`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ProgramInterface {
    /// The stages linked into the program.
    pub stages: StageMask,
    /// Fragment outputs.
    pub outputs: Vec<ProgramOutput>,
    /// Transform-feedback varyings in the driver's index order (the order of the link's
    /// varyings, which `glGetTransformFeedbackVarying(i)` answers and the capture layout follows),
    /// not sorted.
    pub varyings: Vec<Varying>,
    /// Uniform blocks.
    pub uniform_blocks: Vec<InterfaceBlock>,
    /// Shader storage blocks.
    pub storage_blocks: Vec<InterfaceBlock>,
    /// For each active uniform (by name, sorted), the stages that statically use it.
    pub uniform_static_use: Vec<(String, StageMask)>,
    /// `GL_COMPUTE_WORK_GROUP_SIZE` of a compute program.
    pub compute_work_group_size: Option<[u32; 3]>,
    /// `GL_PROGRAM_SEPARABLE`.
    pub separable: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_enums_are_the_gl_ones() {
        // Values from the GL registry (gl.xml).
        assert_eq!(ShaderStage::Vertex.gl_enum(), 0x8B31);
        assert_eq!(ShaderStage::Fragment.gl_enum(), 0x8B30);
        assert_eq!(ShaderStage::Compute.gl_enum(), 0x91B9);
        assert_eq!(ShaderStage::Geometry.gl_enum(), 0x8DD9);
        assert_eq!(ShaderStage::TessControl.gl_enum(), 0x8E88);
        assert_eq!(ShaderStage::TessEvaluation.gl_enum(), 0x8E87);
        for stage in ShaderStage::ALL {
            assert_eq!(ShaderStage::from_gl_enum(stage.gl_enum()), Some(stage));
            assert!(stage.bit().contains(stage));
        }
        assert_eq!(ShaderStage::from_gl_enum(0), None);
        assert_eq!(
            TransformFeedbackMode::default(),
            TransformFeedbackMode::Interleaved
        );
    }
}
