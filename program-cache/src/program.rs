//! The cached value: what a host needs to restore a linked program without the driver compile.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::key::ShaderHash;

/// One variable of a shader's interface (attribute, uniform, varying, fragment output, or a
/// block member): the name the application used, the name the translator gave it (equal when
/// there is no translator), its GL type, array size and location, and what a translator reports
/// besides (precision, static use), as ANGLE's `sh::ShaderVariable` does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VariableInfo {
    /// Name in the application's source.
    pub name: String,
    /// Name in the translated source (shortened/hashed by a translator).
    pub mapped_name: String,
    /// GL type enum.
    pub gl_type: u32,
    /// Array size (1 for non-arrays).
    pub array_size: i32,
    /// Location, when the variable has one (for a block member: its byte offset; for a
    /// fragment output: its location).
    pub location: Option<i32>,
    /// Precision qualifier as a GL enum (`GL_LOW_FLOAT` 0x8DF0 ... `GL_HIGH_INT` 0x8DF5), 0 when
    /// none (desktop GLSL, or a type without precision).
    pub precision: u32,
    /// Whether the shader statically uses it.
    pub static_use: bool,
}

/// A uniform block or shader storage block of a shader, as the translator (or the driver's
/// reflection) reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockInfo {
    /// Block name in the application's source.
    pub name: String,
    /// Name in the translated source.
    pub mapped_name: String,
    /// `binding` layout qualifier or `GL_BUFFER_BINDING`.
    pub binding: i32,
    /// `GL_BUFFER_DATA_SIZE` in bytes (0 when not known).
    pub data_size: i32,
    /// Whether the shader statically uses it.
    pub static_use: bool,
    /// Members (their `location` is the byte offset).
    #[serde(deserialize_with = "bounded_variables")]
    pub members: Vec<VariableInfo>,
}

/// A shader's interface maps, as a translator reports them (Chromium's program cache keeps
/// the same per shader: attributes, uniforms, varyings, output variables, interface blocks).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShaderVariables {
    /// Attributes (vertex inputs).
    #[serde(deserialize_with = "bounded_variables")]
    pub attributes: Vec<VariableInfo>,
    /// Uniforms.
    #[serde(deserialize_with = "bounded_variables")]
    pub uniforms: Vec<VariableInfo>,
    /// Varyings: the stage's outputs to the next stage (and inputs from the previous one).
    #[serde(deserialize_with = "bounded_variables")]
    pub varyings: Vec<VariableInfo>,
    /// Fragment outputs (`location` = the output's location).
    #[serde(deserialize_with = "bounded_variables")]
    pub outputs: Vec<VariableInfo>,
    /// Uniform blocks.
    #[serde(deserialize_with = "bounded_blocks")]
    pub uniform_blocks: Vec<BlockInfo>,
    /// Shader storage blocks.
    #[serde(deserialize_with = "bounded_blocks")]
    pub storage_blocks: Vec<BlockInfo>,
}

impl ShaderVariables {
    /// Whether both lists are within [`MAX_STORED_VARIABLES`], so an entry holding them can be
    /// decoded again.
    pub fn within_stored_bound(&self) -> bool {
        let lists = [
            &self.attributes,
            &self.uniforms,
            &self.varyings,
            &self.outputs,
        ];
        let blocks = self.uniform_blocks.iter().chain(&self.storage_blocks);
        lists.iter().all(|l| l.len() <= MAX_STORED_VARIABLES)
            && self.uniform_blocks.len() <= MAX_STORED_VARIABLES
            && self.storage_blocks.len() <= MAX_STORED_VARIABLES
            && blocks
                .into_iter()
                .all(|b| b.members.len() <= MAX_STORED_VARIABLES)
    }

    /// Bytes these maps count against the cache budget besides the binary.
    fn stored_size(&self) -> usize {
        let var = |x: &VariableInfo| x.name.len() + x.mapped_name.len() + VARIABLE_OVERHEAD;
        let vars = |l: &[VariableInfo]| l.iter().map(var).sum::<usize>();
        let blocks = self.uniform_blocks.iter().chain(&self.storage_blocks);
        vars(&self.attributes)
            + vars(&self.uniforms)
            + vars(&self.varyings)
            + vars(&self.outputs)
            + blocks
                .map(|b| b.name.len() + b.mapped_name.len() + VARIABLE_OVERHEAD + vars(&b.members))
                .sum::<usize>()
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
    bounded_list(d)
}

/// [`bounded_variables`] for block lists (each block's members are bounded the same way).
fn bounded_blocks<'de, D>(d: D) -> Result<Vec<BlockInfo>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    bounded_list(d)
}

fn bounded_list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    struct Bounded<T>(std::marker::PhantomData<T>);
    impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Bounded<T> {
        type Value = Vec<T>;
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
    d.deserialize_seq(Bounded(std::marker::PhantomData))
}

/// A driver program binary.
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

/// A stage of a program besides its vertex and fragment stages (geometry, tessellation,
/// compute), with the hash of its shader and its interface maps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageRecord {
    /// The stage's GL enum ([`gl_types::ShaderStage::gl_enum`]).
    pub stage: u32,
    /// Hash of its shader.
    pub shader: ShaderHash,
    /// Its interface maps.
    pub variables: ShaderVariables,
}

/// A failed compile or link, cached so that a warm start does not ask the driver again and
/// still hands the host the driver's exact info log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureRecord {
    /// The GL enum of the stage whose compile failed; `None` for a failed link.
    pub compile_stage: Option<u32>,
    /// The driver's info log, byte for byte (at most [`MAX_FAILURE_LOG`] bytes).
    pub log: String,
}

/// The longest info log a [`FailureRecord`] keeps. A failure with a longer log is not cached
/// (cutting the log would hand the host another log than the driver's).
pub const MAX_FAILURE_LOG: usize = 64 << 10;

/// A cached program: a linked program's binary and interface, or a failed compile or link
/// ([`CachedProgram::failure`]). Plain data with a stable serde shape, so the disk layer can
/// persist it as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedProgram {
    /// Hash of the vertex shader (for status refcounts on eviction); all zero when the program
    /// has none (a compute program, a separable program of other stages, a failed compile).
    pub vertex_shader: ShaderHash,
    /// Hash of the fragment shader; all zero when the program has none.
    pub fragment_shader: ShaderHash,
    /// Vertex shader variable maps.
    pub vertex: ShaderVariables,
    /// Fragment shader variable maps.
    pub fragment: ShaderVariables,
    /// The driver binary (empty exactly when this records a failure).
    pub binary: ProgramBinaryData,
    /// The other stages (geometry, tessellation, compute), in pipeline order.
    #[serde(deserialize_with = "bounded_stages")]
    pub other_stages: Vec<StageRecord>,
    /// `Some` when this entry records a failed compile or link instead of a program.
    pub failure: Option<FailureRecord>,
}

fn bounded_stages<'de, D>(d: D) -> Result<Vec<StageRecord>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    bounded_list(d)
}

/// Bytes a stored variable costs besides its names (type, size, location, bookkeeping).
const VARIABLE_OVERHEAD: usize = 16;
/// Bytes an entry costs besides its binary and variables (hashes, format, bookkeeping).
const ENTRY_OVERHEAD: usize = 64;

impl CachedProgram {
    /// The bytes this entry counts against the cache budget: the binary, the maps and any
    /// failure log.
    pub fn stored_size(&self) -> usize {
        ENTRY_OVERHEAD
            + self.binary.bytes.len()
            + self.vertex.stored_size()
            + self.fragment.stored_size()
            + self
                .other_stages
                .iter()
                .map(|s| ENTRY_OVERHEAD / 2 + s.variables.stored_size())
                .sum::<usize>()
            + self.failure.as_ref().map_or(0, |f| f.log.len())
    }

    /// The hashes of the shaders this entry holds compile statuses for: every stage of a
    /// program, and the shaders of a failed link (they compiled); none for a failed compile.
    pub fn shader_hashes(&self) -> impl Iterator<Item = ShaderHash> + '_ {
        let compile_failed = matches!(&self.failure, Some(f) if f.compile_stage.is_some());
        [self.vertex_shader, self.fragment_shader]
            .into_iter()
            .chain(self.other_stages.iter().map(|s| s.shader))
            .filter(move |h| !compile_failed && *h != ShaderHash::NONE)
    }

    /// Whether the entry is well formed: a program has a binary and no failure; a failure has
    /// no binary and a log within [`MAX_FAILURE_LOG`], and a failed compile names a shader
    /// stage; every list is within its bound.
    pub fn is_well_formed(&self) -> bool {
        let lists = self.vertex.within_stored_bound()
            && self.fragment.within_stored_bound()
            && self.other_stages.len() <= ShaderStagesBound::MAX
            && self
                .other_stages
                .iter()
                .all(|s| s.variables.within_stored_bound());
        lists
            && match &self.failure {
                None => !self.binary.bytes.is_empty(),
                Some(f) => {
                    self.binary.bytes.is_empty()
                        && f.log.len() <= MAX_FAILURE_LOG
                        && f.compile_stage
                            .is_none_or(|s| gl_types::ShaderStage::from_gl_enum(s).is_some())
                }
            }
    }

    /// The variable maps of `stage` (gl enum), when the entry has that stage.
    pub fn stage_variables(&self, stage: u32) -> Option<&ShaderVariables> {
        use gl_types::ShaderStage;
        match ShaderStage::from_gl_enum(stage)? {
            ShaderStage::Vertex => Some(&self.vertex),
            ShaderStage::Fragment => Some(&self.fragment),
            _ => self
                .other_stages
                .iter()
                .find(|s| s.stage == stage)
                .map(|s| &s.variables),
        }
    }
}

/// The bound on [`CachedProgram::other_stages`].
struct ShaderStagesBound;
impl ShaderStagesBound {
    /// Geometry, two tessellation stages, compute: four at most; a little slack.
    const MAX: usize = 8;
}

/// Shared, immutable handle to a cached program.
pub type SharedProgram = Arc<CachedProgram>;
