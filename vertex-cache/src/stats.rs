//! Statistics of a draw: per-vertex vertex-shader invocations, and the ratios derived from them.

use crate::Mesh;

/// What one draw of a mesh cost in vertex-shader invocations, from per-vertex counts (simulated
/// by a [`Model`](crate::Model) or measured on a driver).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Analysis {
    /// Vertex-shader invocations in total.
    pub invocations: u64,
    /// Triangles drawn.
    pub triangles: u64,
    /// Distinct vertices the indices name.
    pub vertices_referenced: u64,
    /// Average cache miss ratio: invocations per triangle (0.5 is the ideal for a large grid,
    /// 3 is no reuse at all).
    pub acmr: f64,
    /// Average transform to vertex ratio: invocations per referenced vertex (1 is the ideal).
    pub atvr: f64,
}

/// The [`Analysis`] of `mesh` drawn with `per_vertex[v]` invocations of vertex `v`.
///
/// # Panics
/// If `per_vertex` does not have one entry per vertex of the mesh.
pub fn analyze(mesh: &Mesh<'_>, per_vertex: &[u32]) -> Analysis {
    assert_eq!(
        per_vertex.len(),
        mesh.vertex_count() as usize,
        "one count per vertex"
    );
    let invocations: u64 = per_vertex.iter().map(|&c| u64::from(c)).sum();
    let mut seen = vec![false; per_vertex.len()];
    let mut vertices_referenced = 0u64;
    for &i in mesh.indices() {
        if !std::mem::replace(&mut seen[i as usize], true) {
            vertices_referenced += 1;
        }
    }
    let triangles = mesh.triangles() as u64;
    Analysis {
        invocations,
        triangles,
        vertices_referenced,
        acmr: invocations as f64 / triangles as f64,
        atvr: invocations as f64 / vertices_referenced as f64,
    }
}
