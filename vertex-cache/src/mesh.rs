//! Meshes as the GPU sees them: an index list of triangles and a vertex count.

/// Why an index list is not a triangle mesh over its vertex count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeshError {
    /// No indices (or no vertices).
    #[error("empty mesh: {indices} indices over {vertex_count} vertices")]
    Empty {
        /// Indices given.
        indices: usize,
        /// Vertex count given.
        vertex_count: u32,
    },
    /// The index count is not a multiple of 3.
    #[error("{indices} indices are not whole triangles (not a multiple of 3)")]
    NotTriangles {
        /// Indices given.
        indices: usize,
    },
    /// An index names a vertex past the vertex count.
    #[error("index {index} at position {position} is past the vertex count {vertex_count}")]
    IndexOutOfRange {
        /// Position in the index list.
        position: usize,
        /// The index.
        index: u32,
        /// The vertex count.
        vertex_count: u32,
    },
}

/// A triangle list: `indices.len() / 3` triangles over vertices `0..vertex_count`. Every index
/// is fed to the models as the hardware sees it, degenerate triangles included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mesh<'a> {
    indices: &'a [u32],
    vertex_count: u32,
}

impl<'a> Mesh<'a> {
    /// Checks that `indices` are whole triangles over `0..vertex_count`.
    pub fn new(indices: &'a [u32], vertex_count: u32) -> Result<Self, MeshError> {
        if indices.is_empty() || vertex_count == 0 {
            return Err(MeshError::Empty {
                indices: indices.len(),
                vertex_count,
            });
        }
        if !indices.len().is_multiple_of(3) {
            return Err(MeshError::NotTriangles {
                indices: indices.len(),
            });
        }
        if let Some((position, &index)) = indices
            .iter()
            .enumerate()
            .find(|&(_, &i)| i >= vertex_count)
        {
            return Err(MeshError::IndexOutOfRange {
                position,
                index,
                vertex_count,
            });
        }
        Ok(Mesh {
            indices,
            vertex_count,
        })
    }

    /// The index list.
    pub fn indices(&self) -> &'a [u32] {
        self.indices
    }

    /// The number of vertices the indices may name.
    pub fn vertex_count(&self) -> u32 {
        self.vertex_count
    }

    /// The number of triangles.
    pub fn triangles(&self) -> usize {
        self.indices.len() / 3
    }
}
