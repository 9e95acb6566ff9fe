//! The cached value: what a host needs to restore a linked program without the driver compile.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::key::ShaderHash;

/// One attribute or uniform: the name the application used, the name the translator gave it
/// (equal when there is no translator), its GL type, array size and location.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VariableInfo {
    /// Name in the application's source.
    pub name: String,
    /// Name in the translated source (shortened/hashed by a translator).
    pub mapped_name: String,
    /// GL type enum.
    pub gl_type: u32,
    /// Array size (1 for non-arrays).
    pub array_size: i32,
    /// Location, when the variable has one.
    pub location: Option<i32>,
}

/// A shader's variable maps, as a translator reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShaderVariables {
    /// Attributes (vertex inputs).
    #[serde(deserialize_with = "bounded_variables")]
    pub attributes: Vec<VariableInfo>,
    /// Uniforms.
    #[serde(deserialize_with = "bounded_variables")]
    pub uniforms: Vec<VariableInfo>,
}

impl ShaderVariables {
    /// Whether both lists are within [`MAX_STORED_VARIABLES`], so an entry holding them can be
    /// decoded again.
    pub fn within_stored_bound(&self) -> bool {
        self.attributes.len() <= MAX_STORED_VARIABLES && self.uniforms.len() <= MAX_STORED_VARIABLES
    }
}

/// The most variables one list (a shader's attributes or its uniforms) may hold in a stored
/// entry. A decoder refuses a longer list as soon as its length is read, before allocating: a
/// variable is a few bytes on the wire but about 60 in memory, so without this bound a 260 KB
/// LZ4 entry of empty uniforms cost 820 MiB to decode. GL reports an array as one active
/// variable, so real programs have hundreds at most; an entry that would exceed it is never
/// written (`disk::encode_bounded`).
pub const MAX_STORED_VARIABLES: usize = 65_536;

/// Deserializes a variable list of at most [`MAX_STORED_VARIABLES`] elements, refusing a longer
/// one from its declared length (postcard declares it) or, without one, at the first element
/// past the bound.
fn bounded_variables<'de, D>(d: D) -> Result<Vec<VariableInfo>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Bounded;
    impl<'de> serde::de::Visitor<'de> for Bounded {
        type Value = Vec<VariableInfo>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "at most {MAX_STORED_VARIABLES} variables")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let declared = seq.size_hint().unwrap_or(0);
            if declared > MAX_STORED_VARIABLES {
                return Err(serde::de::Error::invalid_length(declared, &self));
            }
            let mut out = Vec::with_capacity(declared);
            while let Some(v) = seq.next_element()? {
                if out.len() == MAX_STORED_VARIABLES {
                    return Err(serde::de::Error::invalid_length(out.len() + 1, &self));
                }
                out.push(v);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Bounded)
}

/// A driver program binary.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProgramBinaryData {
    /// `binaryFormat` of `glGetProgramBinary`.
    pub format: u32,
    /// The blob. Encoded as serde bytes: in postcard the same wire format as a sequence of `u8`
    /// (varint length, then the bytes) but decoded in one copy instead of byte by byte.
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for ProgramBinaryData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramBinaryData")
            .field("format", &format_args!("{:#x}", self.format))
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// A cached linked program. Plain data with a stable serde shape, so the disk layer can persist
/// it as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedProgram {
    /// Hash of the vertex shader (for status refcounts on eviction).
    pub vertex_shader: ShaderHash,
    /// Hash of the fragment shader.
    pub fragment_shader: ShaderHash,
    /// Vertex shader variable maps.
    pub vertex: ShaderVariables,
    /// Fragment shader variable maps.
    pub fragment: ShaderVariables,
    /// The driver binary.
    pub binary: ProgramBinaryData,
}

/// Bytes a stored variable costs besides its names (type, size, location, bookkeeping).
const VARIABLE_OVERHEAD: usize = 16;
/// Bytes an entry costs besides its binary and variables (hashes, format, bookkeeping).
const ENTRY_OVERHEAD: usize = 64;

impl CachedProgram {
    /// The bytes this entry counts against the cache budget: the binary plus the maps.
    pub fn stored_size(&self) -> usize {
        let vars = |v: &ShaderVariables| {
            v.attributes
                .iter()
                .chain(&v.uniforms)
                .map(|x| x.name.len() + x.mapped_name.len() + VARIABLE_OVERHEAD)
                .sum::<usize>()
        };
        ENTRY_OVERHEAD + self.binary.bytes.len() + vars(&self.vertex) + vars(&self.fragment)
    }
}

/// Shared, immutable handle to a cached program.
pub type SharedProgram = Arc<CachedProgram>;
