//! Cache keys: SHA-1 over length-prefixed, domain-separated fields.
//!
//! Every variable-length field is written as a little-endian `u64` length followed by its bytes,
//! and every key starts with its own domain tag, so two different inputs can never serialize to
//! the same byte string (and a shader hash can never equal a program key of the same bytes).

use std::fmt;

use headless_gl::{AttributeBinding, ShaderStage, TransformFeedbackMode};
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

macro_rules! sha1_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub struct $name(pub [u8; 20]);

        impl $name {
            /// Lower-case hex, 40 characters.
            pub fn to_hex(&self) -> String {
                self.0.iter().map(|b| format!("{b:02x}")).collect()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), &self.to_hex()[..12])
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.to_hex())
            }
        }
    };
}

sha1_newtype!(
    /// SHA-1 of what determines a translated shader: stage, compile options, source as compiled.
    ShaderHash
);
sha1_newtype!(
    /// SHA-1 of what determines a linked program binary (see [`ProgramKeyInput`]).
    ProgramKey
);

/// A SHA-1 stream that writes framed fields.
struct Framed(Sha1);

impl Framed {
    fn new(domain: &[u8]) -> Self {
        let mut f = Framed(Sha1::new());
        f.bytes(domain);
        f
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0.update((b.len() as u64).to_le_bytes());
        self.0.update(b);
    }
    fn fixed(&mut self, b: &[u8]) {
        self.0.update(b);
    }
    fn finish(self) -> [u8; 20] {
        self.0.finalize().into()
    }
}

fn stage_byte(stage: ShaderStage) -> u8 {
    match stage {
        ShaderStage::Vertex => 1,
        ShaderStage::Fragment => 2,
        ShaderStage::Compute => 3,
    }
}

/// Hash of one shader as compiled: its stage, the compile options that change the translator's
/// or driver's output (opaque bytes from the host: translator flags, output language, ...), and
/// the source text.
pub fn shader_hash(stage: ShaderStage, source: &str, compile_options: &[u8]) -> ShaderHash {
    let mut f = Framed::new(b"gpusvc.shader.v1");
    f.fixed(&[stage_byte(stage)]);
    f.bytes(compile_options);
    f.bytes(source.as_bytes());
    ShaderHash(f.finish())
}

/// Everything a program key covers.
#[derive(Debug, Clone, Copy)]
pub struct ProgramKeyInput<'a> {
    /// Hash of the vertex shader as compiled.
    pub vertex: ShaderHash,
    /// Hash of the fragment shader as compiled.
    pub fragment: ShaderHash,
    /// The host's translator / ANGLE version string.
    pub backend_identity: &'a str,
    /// `glBindAttribLocation` calls; order does not matter (they are sorted by name).
    pub attribute_bindings: &'a [AttributeBinding],
    /// Transform-feedback varyings, in order.
    pub transform_feedback_varyings: &'a [String],
    /// Transform-feedback buffer mode.
    pub transform_feedback_mode: TransformFeedbackMode,
}

/// The program key.
pub fn program_key(input: &ProgramKeyInput<'_>) -> ProgramKey {
    let mut bindings: Vec<&AttributeBinding> = input.attribute_bindings.iter().collect();
    bindings.sort_by(|a, b| a.name.cmp(&b.name).then(a.location.cmp(&b.location)));
    let mut f = Framed::new(b"gpusvc.program.v1");
    f.fixed(&input.vertex.0);
    f.fixed(&input.fragment.0);
    f.bytes(input.backend_identity.as_bytes());
    f.fixed(&(bindings.len() as u64).to_le_bytes());
    for b in bindings {
        f.bytes(b.name.as_bytes());
        f.fixed(&b.location.to_le_bytes());
    }
    f.fixed(&(input.transform_feedback_varyings.len() as u64).to_le_bytes());
    for v in input.transform_feedback_varyings {
        f.bytes(v.as_bytes());
    }
    f.fixed(&[match input.transform_feedback_mode {
        TransformFeedbackMode::Interleaved => 0,
        TransformFeedbackMode::Separate => 1,
    }]);
    ProgramKey(f.finish())
}
