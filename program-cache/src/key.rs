//! Cache keys: SHA-1 over length-prefixed, domain-separated fields.
//!
//! Every variable-length field is written as a little-endian `u64` length followed by its bytes,
//! and every key starts with its own domain tag, so two different inputs can never serialize to
//! the same byte string (and a shader hash can never equal a program key of the same bytes).

use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use gl_types::{AttributeBinding, ShaderStage, TransformFeedbackMode};
use serde::{Deserialize, Serialize};
use sha1::{Digest, Sha1};

/// Lower-case hex digits, for `to_hex` (one push per digit instead of a `format!` per byte:
/// the disk loader names every entry file by its key).
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

macro_rules! sha1_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
        pub struct $name(pub [u8; 20]);

        impl Hash for $name {
            fn hash<H: Hasher>(&self, state: &mut H) {
                state.write(&self.0);
            }
        }

        impl $name {
            /// All zero: no SHA-1 output anyone will meet, used for "none".
            pub const NONE: $name = $name([0; 20]);

            /// Lower-case hex, 40 characters.
            pub fn to_hex(&self) -> String {
                let mut out = String::with_capacity(40);
                for b in self.0 {
                    out.push(char::from(HEX_DIGITS[usize::from(b >> 4)]));
                    out.push(char::from(HEX_DIGITS[usize::from(b & 15)]));
                }
                out
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

/// Hasher for maps keyed by SHA-1 values: the key is already uniformly distributed, so its first
/// eight bytes are the hash (no second hash function over 20 bytes on every lookup). Only for
/// [`ShaderHash`] and [`ProgramKey`], whose `Hash` writes the 20 digest bytes once.
#[derive(Debug, Default, Clone, Copy)]
pub struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Fold in any length, so the hasher stays correct (if slower) for other writers.
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(29) ^ u64::from_le_bytes(word);
        }
    }
}

/// `BuildHasher` for maps keyed by [`ShaderHash`] / [`ProgramKey`].
pub type DigestBuildHasher = BuildHasherDefault<DigestHasher>;

/// Where framed fields go: the SHA-1 state, or a byte vector (the preimage, for tests and
/// benchmarks).
trait Sink {
    fn put(&mut self, b: &[u8]);
}

/// A preimage buffer on the stack that spills to the heap only when it outgrows 512 bytes:
/// keys hash their whole framed preimage in one SHA-1 call, without an allocation for the
/// common small case.
struct StackBuf {
    buf: [u8; 512],
    len: usize,
    spill: Vec<u8>,
}

impl StackBuf {
    fn new() -> Self {
        StackBuf {
            buf: [0; 512],
            len: 0,
            spill: Vec::new(),
        }
    }
    fn as_slice(&self) -> &[u8] {
        if self.spill.is_empty() {
            &self.buf[..self.len]
        } else {
            &self.spill
        }
    }
}

impl Sink for StackBuf {
    #[inline(always)]
    fn put(&mut self, b: &[u8]) {
        if !self.spill.is_empty() {
            self.spill.extend_from_slice(b);
        } else if self.len + b.len() <= self.buf.len() {
            self.buf[self.len..self.len + b.len()].copy_from_slice(b);
            self.len += b.len();
        } else {
            self.spill.reserve(self.len + b.len() + 256);
            self.spill.extend_from_slice(&self.buf[..self.len]);
            self.spill.extend_from_slice(b);
        }
    }
}

impl Sink for Vec<u8> {
    fn put(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// Writes framed fields into a sink.
struct Framed<S>(S);

impl<S: Sink> Framed<S> {
    fn new(sink: S, domain: &[u8]) -> Self {
        let mut f = Framed(sink);
        f.bytes(domain);
        f
    }
    #[inline(always)]
    fn bytes(&mut self, b: &[u8]) {
        self.0.put(&(b.len() as u64).to_le_bytes());
        self.0.put(b);
    }
    #[inline(always)]
    fn fixed<const N: usize>(&mut self, b: [u8; N]) {
        self.0.put(&b);
    }
    fn fixed_slice(&mut self, b: &[u8]) {
        self.0.put(b);
    }
}

fn stage_byte(stage: ShaderStage) -> u8 {
    match stage {
        ShaderStage::Vertex => 1,
        ShaderStage::Fragment => 2,
        ShaderStage::Compute => 3,
        ShaderStage::Geometry => 4,
        ShaderStage::TessControl => 5,
        ShaderStage::TessEvaluation => 6,
    }
}

/// Hash of one shader as compiled: its stage, the compile options that change the translator's
/// or driver's output (opaque bytes from the host: translator flags, output language, ...), and
/// the source text.
pub fn shader_hash(stage: ShaderStage, source: &str, compile_options: &[u8]) -> ShaderHash {
    // The framing header (domain, stage, options, source length) goes in one buffer, then the
    // source is hashed in place.
    let mut header = Framed::new(StackBuf::new(), SHADER_DOMAIN);
    write_shader_header(&mut header, stage, source, compile_options);
    let mut sha = Sha1::new();
    sha.update(header.0.as_slice());
    sha.update(source.as_bytes());
    ShaderHash(sha.finalize().into())
}

/// Hash of one shader as a [`crate::ProgramManager`] compiles it: what [`shader_hash`] covers
/// plus the manager's backend identity (translator / driver context), so a shader that compiles
/// on one backend is not taken as compiled by another that shares the cache (a core and a
/// compatibility context, a translator with an extension on and one without). Managers key
/// compile statuses, compile-failure records and program keys with it; a host that drives
/// [`crate::ProgramCache`] directly uses [`shader_hash`] with its own compile options.
pub fn backend_shader_hash(
    stage: ShaderStage,
    source: &str,
    compile_options: &[u8],
    backend_identity: &str,
) -> ShaderHash {
    let mut header = Framed::new(StackBuf::new(), BACKEND_SHADER_DOMAIN);
    header.bytes(backend_identity.as_bytes());
    write_shader_header(&mut header, stage, source, compile_options);
    let mut sha = Sha1::new();
    sha.update(header.0.as_slice());
    sha.update(source.as_bytes());
    ShaderHash(sha.finalize().into())
}

/// The bytes [`backend_shader_hash`] hashes: SHA-1 of this equals the hash.
pub fn backend_shader_hash_preimage(
    stage: ShaderStage,
    source: &str,
    compile_options: &[u8],
    backend_identity: &str,
) -> Vec<u8> {
    let sink = Vec::with_capacity(source.len() + compile_options.len() + 64);
    let mut f = Framed::new(sink, BACKEND_SHADER_DOMAIN);
    f.bytes(backend_identity.as_bytes());
    write_shader_header(&mut f, stage, source, compile_options);
    f.fixed_slice(source.as_bytes());
    f.0
}

/// The bytes [`shader_hash`] hashes: SHA-1 of this equals the hash.
pub fn shader_hash_preimage(stage: ShaderStage, source: &str, compile_options: &[u8]) -> Vec<u8> {
    let sink = Vec::with_capacity(source.len() + compile_options.len() + 48);
    let mut f = Framed::new(sink, SHADER_DOMAIN);
    write_shader_header(&mut f, stage, source, compile_options);
    f.fixed_slice(source.as_bytes());
    f.0
}

const SHADER_DOMAIN: &[u8] = b"gpusvc.shader.v1";
const BACKEND_SHADER_DOMAIN: &[u8] = b"gpusvc.backend-shader.v1";
const PROGRAM_DOMAIN: &[u8] = b"gpusvc.program.v1";

/// Everything of a shader's preimage but the source bytes, which come last.
fn write_shader_header<S: Sink>(
    f: &mut Framed<S>,
    stage: ShaderStage,
    source: &str,
    compile_options: &[u8],
) {
    f.fixed([stage_byte(stage)]);
    f.bytes(compile_options);
    f.fixed((source.len() as u64).to_le_bytes());
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
    /// The program's other stages (geometry, tessellation, compute) with their shaders'
    /// hashes, in pipeline order. A program without a vertex or fragment stage has
    /// [`ShaderHash::NONE`] there.
    pub other_stages: &'a [(ShaderStage, ShaderHash)],
    /// `GL_PROGRAM_SEPARABLE`.
    pub separable: bool,
}

/// The program key.
pub fn program_key(input: &ProgramKeyInput<'_>) -> ProgramKey {
    let mut f = Framed::new(StackBuf::new(), PROGRAM_DOMAIN);
    write_program(&mut f, input);
    ProgramKey(Sha1::digest(f.0.as_slice()).into())
}

/// The bytes [`program_key`] hashes: SHA-1 of this equals the key.
pub fn program_key_preimage(input: &ProgramKeyInput<'_>) -> Vec<u8> {
    let mut f = Framed::new(Vec::with_capacity(256), PROGRAM_DOMAIN);
    write_program(&mut f, input);
    f.0
}

fn write_program<S: Sink>(f: &mut Framed<S>, input: &ProgramKeyInput<'_>) {
    // glBindAttribLocation order does not change the program: sort by name. Up to 16 bindings
    // are sorted as indices on the stack (no allocation on the hot path).
    let by_name = |a: &AttributeBinding, b: &AttributeBinding| {
        a.name.cmp(&b.name).then(a.location.cmp(&b.location))
    };
    f.fixed(input.vertex.0);
    f.fixed(input.fragment.0);
    f.bytes(input.backend_identity.as_bytes());
    let all = input.attribute_bindings;
    f.fixed((all.len() as u64).to_le_bytes());
    let mut write_binding = |b: &AttributeBinding| {
        f.bytes(b.name.as_bytes());
        f.fixed(b.location.to_le_bytes());
    };
    if all.len() <= 16 {
        let mut order = [0u8; 16];
        for (i, slot) in order.iter_mut().enumerate().take(all.len()) {
            *slot = i as u8;
        }
        let order = &mut order[..all.len()];
        order.sort_unstable_by(|&a, &b| by_name(&all[a as usize], &all[b as usize]));
        order.iter().for_each(|&i| write_binding(&all[i as usize]));
    } else {
        let mut sorted: Vec<&AttributeBinding> = all.iter().collect();
        sorted.sort_unstable_by(|a, b| by_name(a, b));
        sorted.into_iter().for_each(write_binding);
    }
    f.fixed((input.transform_feedback_varyings.len() as u64).to_le_bytes());
    for v in input.transform_feedback_varyings {
        f.bytes(v.as_bytes());
    }
    f.fixed([match input.transform_feedback_mode {
        TransformFeedbackMode::Interleaved => 0,
        TransformFeedbackMode::Separate => 1,
    }]);
    // A vertex + fragment program that is not separable ends here, so its key is the one
    // earlier versions computed. Anything else appends a tagged section: a preimage with it is
    // longer than any without it, so no two inputs share a preimage.
    if !input.other_stages.is_empty() || input.separable {
        f.fixed([EXTENDED_TAG]);
        f.fixed((input.other_stages.len() as u64).to_le_bytes());
        for (stage, hash) in input.other_stages {
            f.fixed([stage_byte(*stage)]);
            f.fixed(hash.0);
        }
        f.fixed([u8::from(input.separable)]);
    }
}

/// Marks the section of [`ProgramKeyInput::other_stages`] and [`ProgramKeyInput::separable`].
const EXTENDED_TAG: u8 = 0xE5;

const COMPILE_FAILURE_DOMAIN: &[u8] = b"gpusvc.compile-failure.v1";

/// The key under which the cache records that the shader `hash` failed to compile on the
/// backend `backend_identity` names (a [`crate::CachedProgram`] whose
/// [`crate::CachedProgram::failure`] names the stage): in the same key space as programs, so
/// such records are budgeted, evicted, persisted and streamed like any entry, and no program
/// key can equal it (another domain). The identity is in it as in every program key: a
/// shader one backend refuses (a core context) may compile on another sharing the cache (a
/// compatibility context).
pub fn compile_failure_key(hash: &ShaderHash, backend_identity: &str) -> ProgramKey {
    let mut f = Framed::new(StackBuf::new(), COMPILE_FAILURE_DOMAIN);
    f.fixed(hash.0);
    f.bytes(backend_identity.as_bytes());
    ProgramKey(Sha1::digest(f.0.as_slice()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_the_sha1_of_their_preimage() {
        let bindings = [AttributeBinding {
            name: "a".into(),
            location: 3,
        }];
        let varyings = ["v".to_string()];
        let input = ProgramKeyInput {
            vertex: shader_hash(ShaderStage::Vertex, "vs", b"o"),
            fragment: shader_hash(ShaderStage::Fragment, "fs", b""),
            backend_identity: "id",
            attribute_bindings: &bindings,
            transform_feedback_varyings: &varyings,
            transform_feedback_mode: TransformFeedbackMode::Separate,
            other_stages: &[],
            separable: false,
        };
        let digest = |b: &[u8]| -> [u8; 20] { Sha1::digest(b).into() };
        assert_eq!(program_key(&input).0, digest(&program_key_preimage(&input)));
        assert_eq!(
            shader_hash(ShaderStage::Vertex, "vs", b"o").0,
            digest(&shader_hash_preimage(ShaderStage::Vertex, "vs", b"o"))
        );
        let long = "x".repeat(700);
        for (source, identity) in [("vs", "id"), (long.as_str(), long.as_str())] {
            assert_eq!(
                backend_shader_hash(ShaderStage::Vertex, source, b"o", identity).0,
                digest(&backend_shader_hash_preimage(
                    ShaderStage::Vertex,
                    source,
                    b"o",
                    identity
                ))
            );
        }
    }

    #[test]
    fn backend_shader_hashes_are_one_backends() {
        let h = |options: &[u8], identity: &str| {
            backend_shader_hash(ShaderStage::Vertex, "vs", options, identity)
        };
        assert_ne!(h(b"", "core"), h(b"", "compatibility"));
        assert_ne!(h(b"", "core"), shader_hash(ShaderStage::Vertex, "vs", b""));
        // Field boundaries are framed: identity and options do not run into each other.
        assert_ne!(h(b"ab", "c"), h(b"b", "ca"));
        assert_ne!(h(b"", "core"), h(b"core", ""));
        assert_ne!(
            h(b"", "id"),
            backend_shader_hash(ShaderStage::Fragment, "vs", b"", "id")
        );
    }

    #[test]
    fn digest_hasher_uses_the_digest_bytes() {
        let mut a = DigestHasher::default();
        ShaderHash([7; 20]).hash(&mut a);
        let mut b = DigestHasher::default();
        ShaderHash([8; 20]).hash(&mut b);
        assert_ne!(a.finish(), b.finish());
    }
}
