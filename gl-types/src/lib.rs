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

/// A shader stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShaderStage {
    /// `GL_VERTEX_SHADER`.
    Vertex,
    /// `GL_FRAGMENT_SHADER`.
    Fragment,
    /// `GL_COMPUTE_SHADER` (desktop 4.3+, GLES 3.1+).
    Compute,
}

impl ShaderStage {
    /// The GL enum.
    pub fn gl_enum(self) -> u32 {
        match self {
            ShaderStage::Vertex => GL_VERTEX_SHADER,
            ShaderStage::Fragment => GL_FRAGMENT_SHADER,
            ShaderStage::Compute => GL_COMPUTE_SHADER,
        }
    }
}

impl std::fmt::Display for ShaderStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ShaderStage::Vertex => "vertex",
            ShaderStage::Fragment => "fragment",
            ShaderStage::Compute => "compute",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_enums_are_the_gl_ones() {
        // Values from the GL registry (gl.xml).
        assert_eq!(ShaderStage::Vertex.gl_enum(), 0x8B31);
        assert_eq!(ShaderStage::Fragment.gl_enum(), 0x8B30);
        assert_eq!(ShaderStage::Compute.gl_enum(), 0x91B9);
        assert_eq!(
            TransformFeedbackMode::default(),
            TransformFeedbackMode::Interleaved
        );
    }
}
