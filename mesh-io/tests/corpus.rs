//! The npm meshes `scripts/fetch-corpus` fetches load with the counts their files have.
//!
//! Without target/corpora/meshes (or `$GPUSVC_MESH_DIR`) each test prints `SKIP <test>: ...`,
//! or fails when `GPUSVC_REQUIRE_GL` is set.

use mesh_io::corpus::{self, MESHES};

/// Loads corpus mesh `name` (or skips) and checks its counts; returns it for more checks.
fn check(test: &str, name: &str) -> Option<mesh_io::TriangleMesh> {
    let expected = corpus::find(name).unwrap();
    let mesh = corpus::load_or_skip(test, name)?;
    assert_eq!(mesh.vertex_count, expected.vertices, "{name}");
    assert_eq!(mesh.triangle_count(), expected.triangles, "{name}");
    assert_eq!(mesh.indices.len(), 3 * expected.triangles, "{name}");
    let positions = mesh
        .positions
        .as_ref()
        .expect("the corpus meshes have positions");
    assert_eq!(positions.len(), expected.vertices as usize, "{name}");
    let mut used = vec![false; mesh.vertex_count as usize];
    for &i in &mesh.indices {
        used[i as usize] = true;
    }
    let unused = used.iter().filter(|&&u| !u).count() as u32;
    assert_eq!(unused, expected.unused_vertices, "{name}");
    let degenerate = mesh
        .indices
        .chunks_exact(3)
        .filter(|t| t[0] == t[1] || t[1] == t[2] || t[0] == t[2])
        .count();
    assert_eq!(degenerate, 0, "{name}");
    assert!(positions.iter().flatten().all(|c| c.is_finite()), "{name}");
    Some(mesh)
}

#[test]
fn corpus_teapot() {
    if let Some(m) = check("corpus_teapot", "teapot") {
        // the file's first position and cell
        assert_eq!(m.positions.unwrap()[0], [5.929688, 4.125, 0.0]);
        assert_eq!(m.indices[..3], [0, 1, 2]);
    }
}

#[test]
fn corpus_bunny() {
    if let Some(m) = check("corpus_bunny", "bunny") {
        assert_eq!(m.positions.unwrap()[0], [1.301895, 0.122622, 2.550061]);
        assert_eq!(m.indices[m.indices.len() - 3..], [816, 589, 1838]);
    }
}

#[test]
fn corpus_dragon_res4() {
    if let Some(m) = check("corpus_dragon_res4", "dragon-res4") {
        assert_eq!(m.positions.unwrap()[0], [0.0317083, 0.0557939, -0.049836]);
        assert_eq!(m.indices[..3], [5, 0, 2]);
    }
}

#[test]
fn corpus_dragon_res2() {
    check("corpus_dragon_res2", "dragon-res2");
}

#[test]
fn corpus_lists_every_fetched_file() {
    assert_eq!(MESHES.len(), 4);
    for m in MESHES {
        assert_eq!(corpus::path(m.name).unwrap(), corpus::dir().join(m.file));
    }
    assert!(corpus::path("nope").is_none());
    assert!(corpus::load_corpus("nope").is_err());
}
