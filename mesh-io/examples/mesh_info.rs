//! Prints what `mesh_io::load` makes of each file given, and how long it took:
//! `cargo run --release -p gpusvc-mesh-io --example mesh_info -- FILE...` (no arguments: the
//! fetched corpus).

use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let mut paths: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if paths.is_empty() {
        paths = mesh_io::corpus::MESHES
            .iter()
            .map(|m| mesh_io::corpus::dir().join(m.file))
            .collect();
    }
    let mut failed = false;
    for path in paths {
        let start = Instant::now();
        match mesh_io::load(&path) {
            Ok(mesh) => {
                let mut used = vec![false; mesh.vertex_count as usize];
                for &i in &mesh.indices {
                    used[i as usize] = true;
                }
                println!(
                    "{}: {} vertices ({} unused), {} triangles, positions: {}, loaded in {:.1} ms",
                    path.display(),
                    mesh.vertex_count,
                    used.iter().filter(|&&u| !u).count(),
                    mesh.triangle_count(),
                    mesh.positions.is_some(),
                    start.elapsed().as_secs_f64() * 1e3
                );
            }
            Err(e) => {
                eprintln!("{e}");
                failed = true;
            }
        }
    }
    std::process::exit(i32::from(failed));
}
