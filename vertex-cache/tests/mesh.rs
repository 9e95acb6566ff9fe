//! Meshes are validated before any model sees them, and the statistics are what their
//! definitions say.

use vertex_cache::{Mesh, MeshError, Model, analyze};

#[test]
fn bad_index_lists_are_errors_naming_what_is_wrong() {
    assert_eq!(
        Mesh::new(&[], 3).unwrap_err(),
        MeshError::Empty {
            indices: 0,
            vertex_count: 3
        }
    );
    assert_eq!(
        Mesh::new(&[0, 1, 2], 0).unwrap_err(),
        MeshError::Empty {
            indices: 3,
            vertex_count: 0
        }
    );
    assert_eq!(
        Mesh::new(&[0, 1, 2, 0], 3).unwrap_err(),
        MeshError::NotTriangles { indices: 4 }
    );
    assert_eq!(
        Mesh::new(&[0, 1, 2, 0, 3, 2], 3).unwrap_err(),
        MeshError::IndexOutOfRange {
            position: 4,
            index: 3,
            vertex_count: 3
        }
    );
    let ok = Mesh::new(&[0, 1, 2, 2, 1, 3], 5).unwrap();
    assert_eq!((ok.triangles(), ok.vertex_count()), (2, 5));
}

#[test]
fn acmr_and_atvr_follow_their_definitions() {
    // Vertex 4 is never referenced. fifo:3 trace: 0 1 2 shaded [0 1 2]; 2 1 hit; 3 shaded,
    // 0 out [1 2 3]; 0 shaded, 1 out [2 3 0]; 3 hit; 1 shaded [3 0 1].
    let indices = [0, 1, 2, 2, 1, 3, 0, 3, 1];
    let mesh = Mesh::new(&indices, 5).unwrap();
    let counts = Model::Fifo { size: 3 }.simulate(&mesh);
    assert_eq!(counts, [2, 2, 1, 1, 0]);
    let a = analyze(&mesh, &counts);
    assert_eq!(
        (a.invocations, a.triangles, a.vertices_referenced),
        (6, 3, 4)
    );
    assert!((a.acmr - 2.0).abs() < 1e-12);
    assert!((a.atvr - 1.5).abs() < 1e-12);
}

#[test]
#[should_panic(expected = "one count per vertex")]
fn analyze_refuses_counts_of_another_mesh() {
    let mesh = Mesh::new(&[0, 1, 2], 3).unwrap();
    analyze(&mesh, &[1, 1]);
}
