//! The probe battery: the draws measured once on a driver and replayed against every candidate
//! model by the [fit](crate::fit). Pure Rust and deterministic: the same battery every time (the
//! shuffles and random streams come from fixed seeds).
//!
//! * The **staircase**: `k` repeated `0 1 2` triangles in one draw, for a range of `k`. A cache
//!   that is never emptied shades 3 vertices whatever `k` is; a driver that cuts the draw into
//!   segments (or batches) shades them again in each, so invocations against index count show
//!   the segment length as steps.
//! * **Grids** of several widths, in row order (much reuse, window of about two rows) and with
//!   their triangles shuffled (little reuse, wide index spread).
//! * A **random** index stream (uniform over the vertices).
//! * A **fan** (one hub vertex in every triangle).
//! * Any other mesh through [`Battery::push`] (real meshes).

use crate::{Mesh, MeshError};

/// One draw of the battery: a named triangle list over `0..vertex_count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    name: String,
    indices: Vec<u32>,
    vertex_count: u32,
}

impl Probe {
    /// A probe; the indices must make a valid [`Mesh`].
    pub fn new(
        name: impl Into<String>,
        indices: Vec<u32>,
        vertex_count: u32,
    ) -> Result<Self, MeshError> {
        Mesh::new(&indices, vertex_count)?;
        Ok(Probe {
            name: name.into(),
            indices,
            vertex_count,
        })
    }

    /// The probe's name (`staircase:17`, `grid:16x16`, `grid:16x16/shuffle:1`, ...).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The index list.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// The vertex count.
    pub fn vertex_count(&self) -> u32 {
        self.vertex_count
    }

    /// The probe as a mesh.
    pub fn mesh(&self) -> Mesh<'_> {
        Mesh::new(&self.indices, self.vertex_count).expect("checked when the probe was made")
    }

    /// `k` triangles `0 1 2` in one draw over 3 vertices (`k` >= 1).
    ///
    /// # Panics
    /// If `k` is 0.
    pub fn staircase(k: u32) -> Probe {
        assert!(k >= 1, "a staircase step has at least one triangle");
        let indices = (0..k).flat_map(|_| [0, 1, 2]).collect();
        Probe::new(format!("staircase:{k}"), indices, 3).expect("valid by construction")
    }

    /// A grid of `width` x `height` quads ((width + 1) x (height + 1) vertices), two triangles
    /// per quad, quads in row order.
    ///
    /// # Panics
    /// If `width` or `height` is 0.
    pub fn grid(width: u32, height: u32) -> Probe {
        assert!(width >= 1 && height >= 1, "a grid has at least one quad");
        let row = width + 1;
        let mut indices = Vec::with_capacity(width as usize * height as usize * 6);
        for y in 0..height {
            for x in 0..width {
                let a = y * row + x;
                let b = a + 1;
                let c = a + row;
                let d = c + 1;
                indices.extend_from_slice(&[a, c, b, b, c, d]);
            }
        }
        Probe::new(
            format!("grid:{width}x{height}"),
            indices,
            row * (height + 1),
        )
        .expect("valid by construction")
    }

    /// A fan of `triangles` triangles around vertex 0.
    ///
    /// # Panics
    /// If `triangles` is 0.
    pub fn fan(triangles: u32) -> Probe {
        assert!(triangles >= 1, "a fan has at least one triangle");
        let indices = (1..=triangles).flat_map(|i| [0, i, i + 1]).collect();
        Probe::new(format!("fan:{triangles}"), indices, triangles + 2)
            .expect("valid by construction")
    }

    /// `triangles` triangles with corners drawn uniformly from `0..vertex_count` (degenerate
    /// triangles included) with the generator seeded by `seed`.
    ///
    /// # Panics
    /// If `triangles` or `vertex_count` is 0.
    pub fn random(vertex_count: u32, triangles: u32, seed: u64) -> Probe {
        assert!(
            vertex_count >= 1 && triangles >= 1,
            "an empty random stream"
        );
        let mut rng = SplitMix64(seed);
        let indices = (0..triangles as usize * 3)
            .map(|_| rng.below(u64::from(vertex_count)) as u32)
            .collect();
        Probe::new(
            format!("random:{vertex_count}v{triangles}t/seed:{seed}"),
            indices,
            vertex_count,
        )
        .expect("valid by construction")
    }

    /// `triangles` triangles whose corners are drawn uniformly from `distinct` vertices that are
    /// themselves drawn from `0..vertex_count` (seeded by `seed`): a short stream with much
    /// reuse and index values spread wide, which tells direct-mapped and set-associative caches
    /// apart by their slot collisions long before a long probe would.
    ///
    /// # Panics
    /// If any argument is 0 or `distinct > vertex_count`.
    pub fn sparse(vertex_count: u32, distinct: u32, triangles: u32, seed: u64) -> Probe {
        assert!(
            triangles >= 1 && distinct >= 1 && distinct <= vertex_count,
            "a sparse stream needs 1 <= distinct <= vertex_count and a triangle"
        );
        let mut rng = SplitMix64(seed);
        let mut chosen: Vec<u32> = Vec::with_capacity(distinct as usize);
        while chosen.len() < distinct as usize {
            let v = rng.below(u64::from(vertex_count)) as u32;
            if !chosen.contains(&v) {
                chosen.push(v);
            }
        }
        let indices = (0..triangles as usize * 3)
            .map(|_| chosen[rng.below(u64::from(distinct)) as usize])
            .collect();
        Probe::new(
            format!("sparse:{distinct}of{vertex_count}v{triangles}t/seed:{seed}"),
            indices,
            vertex_count,
        )
        .expect("valid by construction")
    }

    /// This probe with its triangles in a shuffled order (each triangle's corners kept in order),
    /// by a Fisher-Yates shuffle seeded with `seed`.
    pub fn shuffled(&self, seed: u64) -> Probe {
        let mut tris: Vec<[u32; 3]> = self
            .indices
            .chunks_exact(3)
            .map(|t| [t[0], t[1], t[2]])
            .collect();
        let mut rng = SplitMix64(seed);
        for i in (1..tris.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            tris.swap(i, j);
        }
        Probe {
            name: format!("{}/shuffle:{seed}", self.name),
            indices: tris.into_iter().flatten().collect(),
            vertex_count: self.vertex_count,
        }
    }
}

/// SplitMix64: a small, fixed generator so the battery never changes with a dependency.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0), by multiply-shift (no modulo bias worth the name at these
    /// sizes; exactness of the distribution does not matter, determinism does).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// An ordered list of probes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Battery {
    probes: Vec<Probe>,
}

impl Battery {
    /// An empty battery.
    pub fn new() -> Self {
        Battery::default()
    }

    /// The standard battery, about 0.3 M indices in 480 draws:
    /// * staircase `k` = 1..=400 (every step), then 450..=1400 by 50 (segments up to 4200
    ///   indices show);
    /// * grids 4x4, 8x8, 16x16, 33x20 and 64x64 in row order, and each shuffled with seed 1;
    ///   grid 100x40 in row order;
    /// * random streams: 1000 vertices x 3000 triangles (seed 7), 300 vertices x 300
    ///   triangles (seed 8), 40 vertices x 200 triangles (seed 9);
    /// * a fan of 600 triangles;
    /// * sparse streams ([`Probe::sparse`]): 48 of 4096 vertices x 100 triangles (seeds 1..=4),
    ///   24 of 1024 x 60 (seeds 5, 6), 96 of 2048 x 200 (seed 7).
    pub fn standard() -> Self {
        let mut b = Battery::new();
        b.add_staircase((1..=400).chain((450..=1400).step_by(50)));
        b.add_grids_and_shuffles(&[(4, 4), (8, 8), (16, 16), (33, 20), (64, 64)], 1);
        b.push(Probe::grid(100, 40));
        b.push(Probe::random(1000, 3000, 7));
        b.push(Probe::random(300, 300, 8));
        b.push(Probe::random(40, 200, 9));
        b.push(Probe::fan(600));
        b.add_sparse();
        b
    }

    fn add_sparse(&mut self) {
        for seed in 1..=4 {
            self.push(Probe::sparse(4096, 48, 100, seed));
        }
        for seed in 5..=6 {
            self.push(Probe::sparse(1024, 24, 60, seed));
        }
        self.push(Probe::sparse(2048, 96, 200, 7));
    }

    /// A smaller battery for debug-build tests (about 100 K indices): staircase `k` = 1..=48 and
    /// every 40th `k` from 60 up to 1380, grids 8x8, 16x16, 33x20 and 64x32 with their shuffles (seed 1),
    /// random streams 1000 x 1200 (seed 7) and 40 x 200 (seed 9), a fan of 300, and the
    /// standard battery's sparse streams.
    pub fn reduced() -> Self {
        let mut b = Battery::new();
        b.add_staircase((1..=48).chain((60..=1400).step_by(40)));
        b.add_grids_and_shuffles(&[(8, 8), (16, 16), (33, 20), (64, 32)], 1);
        b.push(Probe::random(1000, 1200, 7));
        b.push(Probe::random(40, 200, 9));
        b.push(Probe::fan(300));
        b.add_sparse();
        b
    }

    /// Adds one staircase probe per `k`.
    pub fn add_staircase(&mut self, ks: impl IntoIterator<Item = u32>) {
        for k in ks {
            self.push(Probe::staircase(k));
        }
    }

    /// Adds each grid in row order and shuffled with `seed`.
    pub fn add_grids_and_shuffles(&mut self, sizes: &[(u32, u32)], seed: u64) {
        for &(w, h) in sizes {
            let grid = Probe::grid(w, h);
            let shuffled = grid.shuffled(seed);
            self.push(grid);
            self.push(shuffled);
        }
    }

    /// Adds a probe (a real mesh, for instance).
    pub fn push(&mut self, probe: Probe) {
        self.probes.push(probe);
    }

    /// The probes in order.
    pub fn probes(&self) -> &[Probe] {
        &self.probes
    }

    /// Indices over all probes.
    pub fn total_indices(&self) -> usize {
        self.probes.iter().map(|p| p.indices.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_what_they_say() {
        assert_eq!(Probe::staircase(2).indices(), &[0, 1, 2, 0, 1, 2]);
        let g = Probe::grid(2, 1);
        assert_eq!(g.vertex_count(), 6);
        assert_eq!(g.indices(), &[0, 3, 1, 1, 3, 4, 1, 4, 2, 2, 4, 5]);
        assert_eq!(Probe::fan(2).indices(), &[0, 1, 2, 0, 2, 3]);
        let s = g.shuffled(3);
        let mut a: Vec<_> = g.indices().chunks(3).collect();
        let mut b: Vec<_> = s.indices().chunks(3).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "a shuffle keeps the triangles");
    }

    #[test]
    fn the_battery_is_deterministic() {
        assert_eq!(Battery::standard(), Battery::standard());
        assert_eq!(Battery::reduced(), Battery::reduced());
        assert_ne!(
            Probe::grid(16, 16).shuffled(1).indices(),
            Probe::grid(16, 16).shuffled(2).indices()
        );
        let r = Probe::random(50, 10, 4);
        assert!(r.indices().iter().all(|&i| i < 50));
        assert_eq!(r, Probe::random(50, 10, 4));
    }
}
