//! The FIFO and batch models against meshoptimizer's analyzer (`meshopt` 0.7,
//! `analyze_vertex_cache`): vertices transformed and warps executed must be equal on every
//! mesh and every cache / warp / primitive-group size tried.

use vertex_cache::{Mesh, Model};

/// xorshift64*: deterministic shuffles and soups.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32 % n
    }
}

/// An `n`×`n`-quad grid in row order, two triangles per quad.
fn grid(n: u32) -> (Vec<u32>, u32) {
    let w = n + 1;
    let mut out = Vec::new();
    for y in 0..n {
        for x in 0..n {
            let a = y * w + x;
            out.extend_from_slice(&[a, a + w, a + 1, a + 1, a + w, a + w + 1]);
        }
    }
    (out, w * w)
}

/// The triangles of `indices` in a seeded random order, each rotated by a random amount.
fn shuffled(indices: &[u32], seed: u64) -> Vec<u32> {
    let mut rng = Rng(seed | 1);
    let mut tris: Vec<[u32; 3]> = indices
        .chunks_exact(3)
        .map(|t| [t[0], t[1], t[2]])
        .collect();
    for i in (1..tris.len()).rev() {
        let j = rng.below(i as u32 + 1) as usize;
        tris.swap(i, j);
    }
    tris.iter_mut()
        .for_each(|t| t.rotate_left(rng.below(3) as usize));
    tris.concat()
}

/// A strip of `n` triangles as a list (alternating winding).
fn strip(n: u32) -> (Vec<u32>, u32) {
    let out = (0..n)
        .flat_map(|i| {
            if i % 2 == 0 {
                [i, i + 1, i + 2]
            } else {
                [i + 1, i, i + 2]
            }
        })
        .collect();
    (out, n + 2)
}

/// A fan of `n` triangles around vertex 0.
fn fan(n: u32) -> (Vec<u32>, u32) {
    ((0..n).flat_map(|i| [0, i + 1, i + 2]).collect(), n + 2)
}

/// `n` triangles of random corners over `vertex_count` vertices (repeats and degenerate
/// triangles included).
fn soup(n: u32, vertex_count: u32, seed: u64) -> (Vec<u32>, u32) {
    let mut rng = Rng(seed | 1);
    (
        (0..3 * n).map(|_| rng.below(vertex_count)).collect(),
        vertex_count,
    )
}

/// `indices` with degenerate triangles mixed in: (a, a, b), (a, a, a), (a, b, a).
fn with_degenerates(indices: &[u32], seed: u64) -> Vec<u32> {
    let mut rng = Rng(seed | 1);
    let mut out = Vec::new();
    for t in indices.chunks_exact(3) {
        out.extend_from_slice(t);
        match rng.below(6) {
            0 => out.extend_from_slice(&[t[0], t[0], t[1]]),
            1 => out.extend_from_slice(&[t[2], t[2], t[2]]),
            2 => out.extend_from_slice(&[t[1], t[2], t[1]]),
            _ => {}
        }
    }
    out
}

fn synthetic_meshes() -> Vec<(String, Vec<u32>, u32)> {
    let mut meshes = Vec::new();
    for n in [1, 2, 3, 5, 8, 13, 24] {
        let (g, v) = grid(n);
        meshes.push((format!("grid {n}x{n}"), g.clone(), v));
        meshes.push((
            format!("grid {n}x{n} shuffled"),
            shuffled(&g, u64::from(n)),
            v,
        ));
        meshes.push((
            format!("grid {n}x{n} with degenerates"),
            with_degenerates(&g, u64::from(n) + 100),
            v,
        ));
    }
    for n in [1, 7, 50, 200] {
        let (s, v) = strip(n);
        meshes.push((format!("strip {n}"), s, v));
        let (f, v) = fan(n);
        meshes.push((format!("fan {n}"), f, v));
    }
    for (n, v, seed) in [(10, 5, 1), (100, 20, 2), (300, 60, 3), (400, 400, 4)] {
        let (s, v) = soup(n, v, seed);
        meshes.push((format!("soup {n} over {v}"), s, v));
    }
    // Only degenerate triangles.
    meshes.push((
        "all degenerate".into(),
        vec![0, 0, 0, 1, 1, 1, 0, 0, 1, 2, 1, 2],
        3,
    ));
    meshes
}

/// Cache, warp, group: meshoptimizer demo's figures (16/0/0 FIFO, 32/32/32, 14/64/128,
/// 128/0/0) and a sweep.
fn parameter_sets() -> Vec<(u32, u32, u32)> {
    let mut sets = vec![(16, 0, 0), (32, 32, 32), (14, 64, 128), (128, 0, 0)];
    for cache in [3, 4, 5, 8, 16, 32, 64, 128] {
        for warp in [0, 3, 4, 8, 32, 64, 96] {
            for group in [0, 1, 2, 3, 16, 128] {
                sets.push((cache, warp, group));
            }
        }
    }
    sets
}

/// Compares every parameter set on one mesh; returns the comparisons made.
fn compare(name: &str, indices: &[u32], vertex_count: u32, sets: &[(u32, u32, u32)]) -> usize {
    let mesh = Mesh::new(indices, vertex_count).unwrap();
    for &(cache, warp, group) in sets {
        let ours = Model::Batch { cache, warp, group };
        let theirs =
            meshopt::analyze_vertex_cache(indices, vertex_count as usize, cache, warp, group);
        // One pass gives the per-vertex counts, the total and the warps.
        let mut sim = ours.simulator(vertex_count);
        let mut counts = vec![0u32; vertex_count as usize];
        for t in indices.chunks_exact(3) {
            let tri = [t[0], t[1], t[2]];
            for (&v, shaded) in tri.iter().zip(sim.feed_triangle(tri)) {
                counts[v as usize] += u32::from(shaded);
            }
        }
        let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        assert_eq!(
            (total, sim.shaded()),
            (u64::from(theirs.vertices_transformed), total),
            "{ours} on {name}: vertices transformed"
        );
        assert_eq!(
            sim.warps(),
            Some(u64::from(theirs.warps_executed)),
            "{ours} on {name}: warps executed"
        );
        if warp == 0 && group == 0 {
            // No warp or group limit: meshoptimizer's model is a plain FIFO, per vertex too.
            let fifo = Model::Fifo { size: cache };
            assert_eq!(fifo.simulate(&mesh), counts, "{fifo} on {name} per vertex");
            assert_eq!(ours.simulate(&mesh), counts, "{ours} on {name} per vertex");
            assert_eq!(ours.warps(&mesh), Some(1), "{ours} on {name}");
            assert_eq!(theirs.warps_executed, 1, "{name}: one warp without limits");
        }
    }
    sets.len()
}

#[test]
fn batch_and_fifo_equal_meshopt_on_synthetic_meshes() {
    let sets = parameter_sets();
    let meshes = synthetic_meshes();
    let mut comparisons = 0;
    for (name, indices, vertex_count) in &meshes {
        comparisons += compare(name, indices, *vertex_count, &sets);
    }
    // Larger meshes, fewer sets.
    let few: Vec<_> = sets.iter().copied().step_by(7).collect();
    for (name, (indices, v)) in [
        ("grid 100x100", grid(100)),
        ("grid 100x100 shuffled", {
            let (g, v) = grid(100);
            (shuffled(&g, 9), v)
        }),
    ] {
        comparisons += compare(name, &indices, v, &few);
    }
    eprintln!(
        "{} synthetic meshes + 2 large, {} parameter sets ({} on the large): {comparisons} comparisons, all equal",
        meshes.len(),
        sets.len(),
        few.len()
    );
}

#[test]
fn batch_and_fifo_equal_meshopt_on_fetched_meshes() {
    // meshoptimizer demo's figures and a sweep; the 200k-triangle dragon gets fewer.
    let mut sets = vec![(16, 0, 0), (32, 32, 32), (14, 64, 128), (128, 0, 0)];
    for cache in [8, 16, 32, 64, 128] {
        for warp in [0, 32, 64, 96] {
            for group in [0, 32, 128] {
                sets.push((cache, warp, group));
            }
        }
    }
    let mut ran = Vec::new();
    for entry in &mesh_io::corpus::MESHES {
        let test = "batch_and_fifo_equal_meshopt_on_fetched_meshes";
        let Some(mesh) = mesh_io::corpus::load_or_skip(test, entry.name) else {
            continue;
        };
        // Every other set on the small meshes, every eighth on the 200k-triangle dragon.
        let step = if mesh.indices.len() > 100_000 { 8 } else { 2 };
        let used: Vec<_> = sets.iter().copied().step_by(step).collect();
        let n = compare(entry.name, &mesh.indices, mesh.vertex_count, &used);
        ran.push(format!("{} ({} sets)", entry.name, n));
    }
    eprintln!("fetched meshes compared, all equal: {}", ran.join(", "));
}
