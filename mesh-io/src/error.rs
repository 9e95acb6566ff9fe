//! What can go wrong reading or writing a mesh file.

use std::path::PathBuf;

/// Why a mesh could not be read or written. Every error names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MeshIoError {
    /// The file does not exist.
    #[error("{}: no such file", path.display())]
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// Reading or writing failed for another reason (permissions, a directory, a bad gzip
    /// stream, ...).
    #[error("{}: {what}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Neither the name nor the content says which format the file is in.
    #[error("{}: unknown mesh format: {reason}", path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file (after decompression) is longer than the limit.
    #[error("{}: larger than the {limit}-byte limit (after decompression)", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// The mesh has (or declares) more indices than the limit.
    #[error("{}: {count} indices exceed the limit of {limit}", path.display())]
    TooManyIndices {
        /// The file.
        path: PathBuf,
        /// Indices found or declared (a lower bound when declared).
        count: u64,
        /// The limit.
        limit: usize,
    },
    /// The mesh declares more vertices than the limit.
    #[error("{}: {count} vertices exceed the limit of {limit}", path.display())]
    TooManyVertices {
        /// The file.
        path: PathBuf,
        /// Vertices declared.
        count: u64,
        /// The limit.
        limit: usize,
    },
    /// A face that is not a triangle (more than three vertices without triangulation, or fewer
    /// than three).
    #[error("{}: face {face}{} has {vertices} vertices; only triangles are accepted{}",
        path.display(),
        line.map(|l| format!(" (line {l})")).unwrap_or_default(),
        if *vertices > 3 { " (triangulate to fan-split polygons)" } else { "" })]
    NonTriangleFace {
        /// The file.
        path: PathBuf,
        /// The face's number, from 0.
        face: usize,
        /// Its vertex count.
        vertices: usize,
        /// Its line, for text formats.
        line: Option<usize>,
    },
    /// An index names a vertex the mesh does not have (or is negative).
    #[error("{}: index {index} at {location} is past the vertex count {vertex_count}", path.display())]
    IndexOutOfRange {
        /// The file.
        path: PathBuf,
        /// The index as written.
        index: i64,
        /// The vertex count.
        vertex_count: u64,
        /// Where (line, face or position).
        location: String,
    },
    /// No triangles, or no vertices.
    #[error("{}: empty mesh (no triangles)", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A raw index list whose length is not whole triangles.
    #[error("{}: {indices} indices are not whole triangles", path.display())]
    NotWholeTriangles {
        /// The file.
        path: PathBuf,
        /// Indices found.
        indices: usize,
    },
    /// Text that is not what the format allows: a bad number, a missing field, a bad header.
    /// `line` counts from 1 (0 when no line applies).
    #[error("{}:{line}: {message}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// `tobj` refused the OBJ file.
    #[error("{}: OBJ: {source}", path.display())]
    Obj {
        /// The file.
        path: PathBuf,
        /// tobj's error.
        #[source]
        source: tobj::LoadError,
    },
    /// `ply-rs-bw` refused the PLY file, or the PLY file lacks what a mesh needs.
    #[error("{}: PLY{}: {message}", path.display(), line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Ply {
        /// The file.
        path: PathBuf,
        /// The line, when the parser knows it.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// The destination of a write is a symbolic link; it is never written through.
    #[error("{}: is a symbolic link; refusing to write through it", path.display())]
    Symlink {
        /// The destination.
        path: PathBuf,
    },
    /// The mesh cannot be written in the format asked for (an index too large for `u16`, an
    /// unknown extension).
    #[error("{}: cannot write: {reason}", path.display())]
    Unwritable {
        /// The destination.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}
