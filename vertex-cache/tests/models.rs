//! Cache models: hand-checked per-vertex counts on small cases for every family, the
//! incremental simulator against plain reference simulations, and the text forms.

use std::collections::VecDeque;

use vertex_cache::{Cache, Family, Mesh, Model};

/// xorshift64*: a deterministic stream for random index lists.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32 % n
    }
}

fn counts(model: &str, indices: &[u32], vertex_count: u32) -> Vec<u32> {
    let model: Model = model.parse().unwrap();
    model.simulate(&Mesh::new(indices, vertex_count).unwrap())
}

/// FIFO by the book (a queue searched linearly), per index, flushed every `segment` indices.
fn reference_fifo(indices: &[u32], vertex_count: u32, size: usize, segment: usize) -> Vec<u32> {
    let mut out = vec![0; vertex_count as usize];
    let mut q: VecDeque<u32> = VecDeque::new();
    for (p, &i) in indices.iter().enumerate() {
        if segment != 0 && p % segment == 0 {
            q.clear();
        }
        if !q.contains(&i) {
            out[i as usize] += 1;
            if q.len() == size {
                q.pop_front();
            }
            q.push_back(i);
        }
    }
    out
}

/// LRU by the book (most recent last), per index, flushed every `segment` indices.
fn reference_lru(indices: &[u32], vertex_count: u32, size: usize, segment: usize) -> Vec<u32> {
    let mut out = vec![0; vertex_count as usize];
    let mut l: Vec<u32> = Vec::new();
    for (p, &i) in indices.iter().enumerate() {
        if segment != 0 && p % segment == 0 {
            l.clear();
        }
        if let Some(k) = l.iter().position(|&v| v == i) {
            l.remove(k);
        } else {
            out[i as usize] += 1;
            if l.len() == size {
                l.remove(0);
            }
        }
        l.push(i);
    }
    out
}

/// Set-associative by the book: per set a list, most recent last. `sets` 1 is LRU, `ways` 1 is
/// direct-mapped.
fn reference_sa(
    indices: &[u32],
    vertex_count: u32,
    sets: u32,
    ways: usize,
    segment: usize,
) -> Vec<u32> {
    let mut out = vec![0; vertex_count as usize];
    let mut table: Vec<Vec<u32>> = vec![Vec::new(); sets as usize];
    for (p, &i) in indices.iter().enumerate() {
        if segment != 0 && p % segment == 0 {
            table.iter_mut().for_each(Vec::clear);
        }
        let set = &mut table[(i % sets) as usize];
        if let Some(k) = set.iter().position(|&v| v == i) {
            set.remove(k);
        } else {
            out[i as usize] += 1;
            if set.len() == ways {
                set.remove(0);
            }
        }
        set.push(i);
    }
    out
}

fn random_indices(rng: &mut Rng, triangles: usize, vertex_count: u32, locality: u32) -> Vec<u32> {
    // A walk with some locality so that caches hit, and some degenerate triangles.
    let mut at = 0u32;
    let mut out = Vec::with_capacity(triangles * 3);
    for _ in 0..triangles * 3 {
        let step = u64::from(rng.below(2 * locality + 1));
        let (n, l) = (u64::from(vertex_count), u64::from(locality));
        at = ((u64::from(at) + n * l + step - l) % n) as u32;
        out.push(at);
    }
    out
}

#[test]
fn simulator_equals_reference_simulations_on_random_streams() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for round in 0..40 {
        let vertex_count = 1 + rng.below(300);
        let triangles = 1 + rng.below(300) as usize;
        let indices = random_indices(&mut rng, triangles, vertex_count, 12 + round);
        let mesh = Mesh::new(&indices, vertex_count).unwrap();
        // Small sizes, and sizes past 64 (where LRU switches representation).
        let size = if round % 3 == 2 {
            60 + rng.below(80) as usize
        } else {
            1 + rng.below(40) as usize
        };
        let segment = if round % 2 == 0 {
            0
        } else {
            3 + rng.below(60) as usize
        };
        let sets = 1 + rng.below(9);
        let ways = 1 + rng.below(5) as usize;
        let seg = |cache: Cache| {
            if segment == 0 {
                Model::from(cache)
            } else {
                Model::Segmented {
                    length: segment as u32,
                    cache,
                }
            }
        };
        let cases = [
            (
                seg(Cache::Fifo { size: size as u32 }),
                reference_fifo(&indices, vertex_count, size, segment),
            ),
            (
                seg(Cache::Lru { size: size as u32 }),
                reference_lru(&indices, vertex_count, size, segment),
            ),
            (
                seg(Cache::Direct { slots: sets }),
                reference_sa(&indices, vertex_count, sets, 1, segment),
            ),
            (
                seg(Cache::SetAssoc {
                    sets,
                    ways: ways as u32,
                }),
                reference_sa(&indices, vertex_count, sets, ways, segment),
            ),
        ];
        for (model, expected) in cases {
            assert_eq!(model.simulate(&mesh), expected, "{model} round {round}");
            assert_eq!(
                model.invocations(&mesh),
                expected.iter().map(|&c| u64::from(c)).sum::<u64>(),
                "{model}"
            );
            // feed, one index at a time, agrees too.
            let mut sim = model.simulator(vertex_count);
            let mut by_feed = vec![0u32; vertex_count as usize];
            for &i in &indices {
                by_feed[i as usize] += u32::from(sim.feed(i));
            }
            assert_eq!(by_feed, expected, "{model} by feed");
        }
    }
}

#[test]
fn kerbl_models_reduce_to_segmented_ones() {
    // amd:L,N with L a multiple of 3 is seg:L/lru:N; nvidia:I,I,0 (the vertex limit never
    // binds) is seg:L/fifo:I with L the whole triangles in I (no eviction within a segment).
    let mut rng = Rng(99);
    for _ in 0..30 {
        let vertex_count = 1 + rng.below(100);
        let triangles = 1 + rng.below(200) as usize;
        let indices = random_indices(&mut rng, triangles, vertex_count, 10);
        let mesh = Mesh::new(&indices, vertex_count).unwrap();
        let l = 3 * (1 + rng.below(30));
        let n = 1 + rng.below(20);
        let amd = Model::Amd {
            indices: l,
            size: n,
        };
        let seg = Model::Segmented {
            length: l,
            cache: Cache::Lru { size: n },
        };
        assert_eq!(amd.simulate(&mesh), seg.simulate(&mesh), "{amd}");
        let mut sim = amd.simulator(vertex_count);
        let mut by_feed = vec![0u32; vertex_count as usize];
        for &i in &indices {
            by_feed[i as usize] += u32::from(sim.feed(i));
        }
        assert_eq!(by_feed, seg.simulate(&mesh), "{amd} by feed");
        let i = 3 + rng.below(90);
        let nv = Model::Nvidia {
            indices: i,
            vertices: i,
            window: 0,
        };
        let seg = Model::Segmented {
            length: i - i % 3,
            cache: Cache::Fifo { size: i },
        };
        assert_eq!(nv.simulate(&mesh), seg.simulate(&mesh), "{nv}");
    }
}

#[test]
fn probe_is_feed_without_the_change_and_reset_empties() {
    let mut rng = Rng(77);
    let models = [
        "fifo:7",
        "lru:5",
        "lru:70",
        "dm:8",
        "sa:4x2",
        "seg:7/fifo:4",
        "seg:9/lru:6",
        "seg:4/sa:2x2",
        "batch:8,9,4",
        "batch:16,32,0",
        "nvidia:9,5,0",
        "nvidia:30,8,4",
        "amd:9,3",
        "amd:10,4",
    ];
    for text in models {
        let model: Model = text.parse().unwrap();
        let indices = random_indices(&mut rng, 200, 50, 6);
        let mut sim = model.simulator(50);
        for t in indices.chunks_exact(3) {
            let tri = [t[0], t[1], t[2]];
            let probe_tri = [rng.below(50), rng.below(50), rng.below(50)];
            let mut copy = sim.clone();
            let expected = copy.feed_triangle(probe_tri);
            assert_eq!(sim.probe_triangle(probe_tri), expected, "{text}");
            assert_eq!(sim.probe_triangle(probe_tri), expected, "{text} twice");
            let a = sim.feed_triangle(tri);
            assert_eq!(a, sim.last_triangle());
        }
        // The probes changed nothing: the whole run equals a plain simulate.
        let mesh = Mesh::new(&indices, 50).unwrap();
        assert_eq!(sim.shaded(), model.invocations(&mesh), "{text}");
        // After reset the same draw costs the same again.
        sim.reset();
        assert_eq!(sim.shaded(), 0);
        assert_eq!(sim.fed(), 0);
        for t in indices.chunks_exact(3) {
            sim.feed_triangle([t[0], t[1], t[2]]);
        }
        assert_eq!(sim.shaded(), model.invocations(&mesh), "{text} after reset");
    }
}

#[test]
fn fifo_and_lru_hand_checked() {
    // fifo:3 over 0 1 2 | 3 0 1 | 2 2 2
    //   0 1 2 miss          -> [0 1 2]
    //   3 miss, evicts 0    -> [1 2 3]
    //   0 miss, evicts 1    -> [2 3 0]
    //   1 miss, evicts 2    -> [3 0 1]
    //   2 miss, evicts 3    -> [0 1 2]; 2 2 hit
    // counts: 0:2 1:2 2:2 3:1
    let tris = [0, 1, 2, 3, 0, 1, 2, 2, 2];
    assert_eq!(counts("fifo:3", &tris, 4), [2, 2, 2, 1]);
    // lru:3 over 0 1 2 | 0 3 1 | 0 2 2
    //   0 1 2 miss                  -> recency 0 1 2 (oldest first)
    //   0 hit                       -> 1 2 0
    //   3 miss, evicts 1            -> 2 0 3
    //   1 miss, evicts 2            -> 0 3 1
    //   0 hit                       -> 3 1 0
    //   2 miss, evicts 3            -> 1 0 2; 2 hit
    // counts: 0:1 1:2 2:2 3:1
    // fifo:3 on the same: 0 1 2 miss [0 1 2]; 0 hit; 3 miss [1 2 3]; 1 hit; 0 miss [2 3 0];
    // 2 2 hit. counts: 0:2 1:1 2:1 3:1
    let tris = [0, 1, 2, 0, 3, 1, 0, 2, 2];
    assert_eq!(counts("lru:3", &tris, 4), [1, 2, 2, 1]);
    assert_eq!(counts("fifo:3", &tris, 4), [2, 1, 1, 1]);
}

/// Counts and the warps / batches of a model on `indices`.
fn counts_and_warps(model: &str, indices: &[u32], vertex_count: u32) -> (Vec<u32>, Option<u64>) {
    let m: Model = model.parse().unwrap();
    let mesh = Mesh::new(indices, vertex_count).unwrap();
    (m.simulate(&mesh), m.warps(&mesh))
}

#[test]
fn degenerate_triangles_are_fed_every_index() {
    // fifo:2 over 0 0 0 | 1 1 2 | 0 0 0
    //   0 miss [0]; 0 0 hit; 1 miss [0 1]; 1 hit; 2 miss, evicts 0 -> [1 2];
    //   0 miss, evicts 1 -> [2 0]; 0 0 hit.   counts 0:2 1:1 2:1
    let tris = [0, 0, 0, 1, 1, 2, 0, 0, 0];
    assert_eq!(counts("fifo:2", &tris, 3), [2, 1, 1]);
    // lru:2 on the same: 0 miss; hits; 1 miss (0 1); 1 hit (0 1); 2 miss evicts 0 (1 2);
    // 0 miss evicts 1 (2 0).   counts 0:2 1:1 2:1
    assert_eq!(counts("lru:2", &tris, 3), [2, 1, 1]);
    // All-degenerate, one vertex: shaded once by the unflushed caches, and once more by those
    // that start a new segment / warp / batch at the second triangle.
    let tris = [0, 0, 0, 0, 0, 0];
    for (m, expected) in [
        ("fifo:1", 1),
        ("lru:1", 1),
        ("dm:1", 1),
        ("sa:1x1", 1),
        ("batch:3,3,0", 1),
        ("nvidia:96,3,0", 1),
        ("seg:3/fifo:1", 2),
        ("batch:3,3,1", 2),
        ("nvidia:3,3,0", 2),
        ("amd:3,1", 2),
    ] {
        assert_eq!(counts(m, &tris, 1), [expected], "{m}");
    }
}

#[test]
fn direct_mapped_hand_checked() {
    // dm:4 over 0 4 0 | 1 5 1 | 2 2 6   (slot = v mod 4)
    //   0 miss s0=0; 4 miss s0=4; 0 miss s0=0; 1 miss s1=1; 5 miss s1=5; 1 miss s1=1;
    //   2 miss s2=2; 2 hit; 6 miss s2=6.   counts 0:2 1:2 2:1 3:0 4:1 5:1 6:1
    let tris = [0, 4, 0, 1, 5, 1, 2, 2, 6];
    assert_eq!(counts("dm:4", &tris, 7), [2, 2, 1, 0, 1, 1, 1]);
    // fifo:4 on the same: 0 4 miss; 0 hit; 1 5 miss [0 4 1 5]; 1 hit; 2 miss evicts 0;
    // 2 hit; 6 miss evicts 4.   counts 1 each (3: 0)
    assert_eq!(counts("fifo:4", &tris, 7), [1, 1, 1, 0, 1, 1, 1]);
}

#[test]
fn set_associative_hand_checked() {
    // sa:2x2 over 0 2 0 | 4 2 0   (all in set 0; two ways, least recently used replaced)
    //   0 miss [0]; 2 miss [0 2]; 0 hit -> recency [2 0]; 4 miss evicts 2 -> [0 4];
    //   2 miss evicts 0 -> [4 2]; 0 miss evicts 4 -> [2 0].   counts 0:2 2:2 4:1
    // (FIFO within the set would keep 2 at the fifth index: 0:2 2:1 4:1.)
    let tris = [0, 2, 0, 4, 2, 0];
    assert_eq!(counts("sa:2x2", &tris, 5), [2, 0, 2, 0, 1]);
    // sa:2x1 is dm:2; sa:1x2 is lru:2.
    assert_eq!(counts("sa:2x1", &tris, 5), counts("dm:2", &tris, 5));
    assert_eq!(counts("sa:1x2", &tris, 5), counts("lru:2", &tris, 5));
    // Two sets keep odd and even apart: sa:2x1 over 0 1 0 | 1 3 1
    //   set 0: 0 miss, 0 hit; set 1: 1 miss, 1 hit, 3 miss evicts 1, 1 miss.   0:1 1:2 3:1
    assert_eq!(counts("sa:2x1", &[0, 1, 0, 1, 3, 1], 4), [1, 2, 0, 1]);
}

#[test]
fn segmented_hand_checked() {
    // seg:6/fifo:8 over 0 1 2 1 2 3 | 2 3 4 0 1 2   (two segments of 6 indices)
    //   segment 1: 0 1 2 miss, 1 2 hit, 3 miss; segment 2 starts empty: 2 3 4 0 1 miss, 2 hit.
    //   counts 0:2 1:2 2:2 3:2 4:1
    let tris = [0, 1, 2, 1, 2, 3, 2, 3, 4, 0, 1, 2];
    assert_eq!(counts("seg:6/fifo:8", &tris, 5), [2, 2, 2, 2, 1]);
    assert_eq!(counts("fifo:8", &tris, 5), [1, 1, 1, 1, 1]);
    // A length that is not a multiple of 3 cuts triangles: seg:4/fifo:8 over
    //   0 1 2 0 | 1 2 0 1 | 2: 0 1 2 miss, 0 hit | 1 2 0 miss, 1 hit | 2 miss.  0:2 1:2 2:3
    assert_eq!(
        counts("seg:4/fifo:8", &[0, 1, 2, 0, 1, 2, 0, 1, 2], 3),
        [2, 2, 3]
    );
    // seg:5/lru:2 over 0 1 0 2 0 | 1 0 1 2
    //   0 1 miss; 0 hit (1 0); 2 miss evicts 1 (0 2); 0 hit (2 0) | 1 miss; 0 miss (1 0);
    //   1 hit (0 1); 2 miss evicts 0 (1 2).   0:2 1:2 2:2
    assert_eq!(
        counts("seg:5/lru:2", &[0, 1, 0, 2, 0, 1, 0, 1, 2], 3),
        [2, 2, 2]
    );
    // seg:3/dm:2 over 0 2 0 | 0 1 3
    //   0 miss s0=0; 2 miss s0=2; 0 miss s0=0 | empty: 0 miss; 1 miss s1=1; 3 miss s1=3.
    //   0:3 1:1 2:1 3:1
    assert_eq!(counts("seg:3/dm:2", &[0, 2, 0, 0, 1, 3], 4), [3, 1, 1, 1]);
    // seg:6/sa:1x2 over 0 1 2 1 0 2 | 1 0 2
    //   0 1 miss; 2 miss evicts 0 (1 2); 1 hit (2 1); 0 miss evicts 2 (1 0); 2 miss evicts 1
    //   (0 2) | empty: 1 0 miss, 2 miss evicts 1.   0:3 1:2 2:3
    assert_eq!(
        counts("seg:6/sa:1x2", &[0, 1, 2, 1, 0, 2, 1, 0, 2], 3),
        [3, 2, 3]
    );
}

#[test]
fn batch_hand_checked_and_equal_to_meshopt() {
    // batch:3,6,0 (FIFO 3, warps of 6 vertices) over 0 1 2 | 2 3 4 | 4 5 0 | 0 0 6
    //   t1: 3 misses fit (0+3 <= 6): 0 1 2 shaded, warp 3, cache [0 1 2]
    //   t2: 2 hit, 3 4 miss: 3+2 <= 6; 3 evicts 0, 4 evicts 1 -> [2 3 4], warp 5
    //   t3: 4 hit, 5 0 miss: 5+2 > 6 -> new warp, cache emptied: 4 5 0 shaded, warp 3
    //   t4: 0 0 hit, 6 miss: 3+1 <= 6; 6 evicts 4.   warps 2
    //   counts 0:2 1:1 2:1 3:1 4:2 5:1 6:1
    let tris = [0, 1, 2, 2, 3, 4, 4, 5, 0, 0, 0, 6];
    assert_eq!(
        counts_and_warps("batch:3,6,0", &tris, 7),
        (vec![2, 1, 1, 1, 2, 1, 1], Some(2))
    );
    // A repeated corner counts twice in the warp check (as meshoptimizer counts it):
    // batch:8,4,0 over 0 1 1 | 2 2 3 | 0 2 3
    //   t1: 3 "misses" (1 twice) fit 0+3 <= 4; 0 1 shaded, warp 2
    //   t2: 3 "misses" (2 twice): 2+3 > 4 -> new warp (2+2 would have fitted): 2 3 shaded
    //   t3: 0 miss (emptied), 2 3 hit.   counts 0:2 1:1 2:1 3:1, warps 2
    let tris = [0, 1, 1, 2, 2, 3, 0, 2, 3];
    assert_eq!(
        counts_and_warps("batch:8,4,0", &tris, 4),
        (vec![2, 1, 1, 1], Some(2))
    );
    // Primitive groups: batch:16,0,2 over (0 1 2) x3: a new group (and empty cache) every
    // 2 triangles: t1 shades 3, t2 hits, t3 starts group 2 and shades 3.   counts 2 each
    let tris = [0, 1, 2, 0, 1, 2, 0, 1, 2];
    assert_eq!(
        counts_and_warps("batch:16,0,2", &tris, 3),
        (vec![2, 2, 2], Some(2))
    );
    for (m, tris, v) in [
        ("batch:3,6,0", &[0, 1, 2, 2, 3, 4, 4, 5, 0, 0, 0, 6][..], 7),
        ("batch:8,4,0", &[0, 1, 1, 2, 2, 3, 0, 2, 3][..], 4),
        ("batch:16,0,2", &[0, 1, 2, 0, 1, 2, 0, 1, 2][..], 3),
    ] {
        let Ok(Model::Batch { cache, warp, group }) = m.parse() else {
            unreachable!()
        };
        let (c, w) = counts_and_warps(m, tris, v);
        let theirs = meshopt::analyze_vertex_cache(tris, v as usize, cache, warp, group);
        assert_eq!(c.iter().sum::<u32>(), theirs.vertices_transformed, "{m}");
        assert_eq!(w, Some(u64::from(theirs.warps_executed)), "{m}");
    }
}

#[test]
fn nvidia_hand_checked() {
    // nvidia:6,4,0 (batches of 6 indices, 4 shaded vertices) over 0 1 2 | 2 1 3 | 3 4 5 | 0 1 2
    //   t1: 0 1 2 shaded, batch 3 vertices / 3 indices
    //   t2: 2 1 reused, 3 new: 4 vertices <= 4, 6 indices <= 6 -> same batch
    //   t3: 9 indices > 6 -> batch 2: 3 4 5 shaded
    //   t4: 0 1 2 are new to batch 2: 3+3 > 4 vertices -> batch 3: 0 1 2 shaded
    //   counts 0:2 1:2 2:2 3:2 4:1 5:1, batches 3
    let tris = [0, 1, 2, 2, 1, 3, 3, 4, 5, 0, 1, 2];
    assert_eq!(
        counts_and_warps("nvidia:6,4,0", &tris, 6),
        (vec![2, 2, 2, 2, 1, 1], Some(3))
    );
    // The vertex limit with reuse: nvidia:96,4,0 over 0 1 2 | 3 4 0 | 0 1 2
    //   t1: 3 vertices; t2: 0 reused, 3 4 new: 5 > 4 -> batch 2: 3 4 0 shaded (3 vertices)
    //   t3: 0 reused, 1 2 new: 5 > 4 -> batch 3: 0 1 2 shaded.   0:3 1:2 2:2 3:1 4:1
    let tris = [0, 1, 2, 3, 4, 0, 0, 1, 2];
    assert_eq!(
        counts_and_warps("nvidia:96,4,0", &tris, 5),
        (vec![3, 2, 2, 1, 1], Some(3))
    );
    // The recency window: nvidia:96,32,3 over 0 1 2 | 2 3 4 | 4 0 2 (positions 0..8)
    //   t2: 2 at 3, last seen at 2 (1 back): reused; 3 4 new
    //   t3: 4 at 6, last at 5: reused; 0 at 7, last at 0 (7 back > 3): shaded again;
    //       2 at 8, last at 3 (5 back): shaded again.   0:2 1:1 2:2 3:1 4:1
    let tris = [0, 1, 2, 2, 3, 4, 4, 0, 2];
    assert_eq!(counts("nvidia:96,32,3", &tris, 5), [2, 1, 2, 1, 1]);
    // The window's edge: nvidia:96,32,3 over 0 1 2 | 0 3 4 | 5 0 6
    //   t2: 0 at 3, last at 0 (exactly 3 back): reused; t3: 0 at 7, last at 3 (4 back):
    //   shaded again.   0:2, the others 1
    assert_eq!(
        counts("nvidia:96,32,3", &[0, 1, 2, 0, 3, 4, 5, 0, 6], 7),
        [2, 1, 1, 1, 1, 1, 1]
    );
    // Without a window everything in the batch is reused.
    assert_eq!(counts("nvidia:96,32,0", &tris, 5), [1, 1, 1, 1, 1]);
    // Kerbl et al.'s staircase: 0 1 2 repeated is shaded once per 96 indices.
    let stair: Vec<u32> = (0..99).map(|i| i % 3).collect();
    assert_eq!(
        counts_and_warps("nvidia:96,32,0", &stair[..96], 3),
        (vec![1, 1, 1], Some(1))
    );
    assert_eq!(
        counts_and_warps("nvidia:96,32,0", &stair, 3),
        (vec![2, 2, 2], Some(2))
    );
    // Degenerate corners are one vertex: nvidia:6,4,0 over 5 5 5 | 5 6 6 | 7 7 7
    //   t1: 5 shaded; t2: 5 reused, 6 shaded (6 indices); t3: batch 2, 7 shaded.
    assert_eq!(
        counts_and_warps("nvidia:6,4,0", &[5, 5, 5, 5, 6, 6, 7, 7, 7], 8),
        (vec![0, 0, 0, 0, 0, 1, 1, 1], Some(2))
    );
}

#[test]
fn amd_hand_checked() {
    // amd:6,2 (batches of 6 indices, LRU of 2) over 0 1 0 2 0 1 | 0 1 2
    //   batch 1: 0 1 miss; 0 hit (1 0); 2 miss evicts 1 (0 2); 0 hit (2 0); 1 miss evicts 2
    //   batch 2 (emptied): 0 1 2 miss.   0:2 1:3 2:2, batches 2
    let tris = [0, 1, 0, 2, 0, 1, 0, 1, 2];
    assert_eq!(
        counts_and_warps("amd:6,2", &tris, 3),
        (vec![2, 3, 2], Some(2))
    );
    // A batch is whole triangles: amd:7,8 over (0 1 2) x3: 6 indices fit in 7, the third
    // triangle would make 9: batch 2.   2 each.  seg:7/lru:8 cuts inside the third triangle
    // instead: 0 1 2 0 1 2 0 | 1 2: 0:1 1:2 2:2.
    let tris = [0, 1, 2, 0, 1, 2, 0, 1, 2];
    assert_eq!(
        counts_and_warps("amd:7,8", &tris, 3),
        (vec![2, 2, 2], Some(2))
    );
    assert_eq!(counts("seg:7/lru:8", &tris, 3), [1, 2, 2]);
    // With a multiple of 3 it is the segmented LRU.
    assert_eq!(counts("amd:6,2", &tris, 3), counts("seg:6/lru:2", &tris, 3));
}

#[test]
fn text_forms_round_trip() {
    let texts = [
        "fifo:1",
        "fifo:16",
        "fifo:65536",
        "lru:32",
        "dm:256",
        "sa:64x4",
        "sa:1x65536",
        "seg:3/fifo:16",
        "seg:96/lru:32",
        "seg:100/dm:256",
        "seg:16777216/sa:64x4",
        "batch:16,0,0",
        "batch:32,32,32",
        "batch:14,64,128",
        "nvidia:96,32,0",
        "nvidia:96,32,16",
        "amd:384,16",
        "amd:7,1",
    ];
    for text in texts {
        let model: Model = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(model.to_string(), text);
        assert_eq!(model.to_string().parse::<Model>().unwrap(), model);
    }
    assert_eq!(
        "fifo:16".parse::<Model>().unwrap(),
        Model::Fifo { size: 16 }
    );
    assert_eq!(
        "seg:96/sa:64x4".parse::<Model>().unwrap(),
        Model::Segmented {
            length: 96,
            cache: Cache::SetAssoc { sets: 64, ways: 4 }
        }
    );
    assert_eq!(
        "nvidia:96,32,0".parse::<Model>().unwrap(),
        Model::Nvidia {
            indices: 96,
            vertices: 32,
            window: 0
        }
    );
    assert_eq!("lru:5".parse::<Cache>().unwrap(), Cache::Lru { size: 5 });
    // The family is the text's kind, its parameters the text's numbers.
    for text in texts {
        let model: Model = text.parse().unwrap();
        assert!(text.starts_with(&format!("{}:", model.family())), "{text}");
        let numbers: Vec<u32> = text
            .split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().unwrap())
            .collect();
        let params: Vec<u32> = model.parameters().iter().map(|&(_, v)| v).collect();
        assert_eq!(params, numbers, "{text}");
        if model.family() != Family::Segmented {
            let names: Vec<String> = model.parameters().into_iter().map(|(n, _)| n).collect();
            assert_eq!(names, model.family().parameter_names(), "{text}");
        }
    }
    assert_eq!(Family::ALL.len(), 8);
    assert_eq!(
        "seg:96/sa:64x4".parse::<Model>().unwrap().parameters(),
        [
            ("length".to_owned(), 96),
            ("sa.sets".to_owned(), 64),
            ("sa.ways".to_owned(), 4)
        ]
    );
}

#[test]
fn bad_text_is_an_error() {
    let bad = [
        "",
        "fifo",
        "fifo:",
        "fifo:0",
        "fifo:65537",
        "fifo:99999999999",
        "fifo:16x",
        "fifo:16 ",
        " fifo:16",
        "fifo:+16",
        "fifo:-1",
        "fifo:0x10",
        "fifo:16\n",
        "FIFO:16",
        "lifo:16",
        "dm:16:3",
        "dm:0",
        "sa:4",
        "sa:0x4",
        "sa:4x0",
        "sa:256x512",
        "sa:4x4x4",
        "seg:2/fifo:16",
        "seg:16777217/fifo:16",
        "seg:16",
        "seg:16/",
        "seg:/fifo:16",
        "seg:16/batch:16,0,0",
        "seg:16/seg:3/fifo:1",
        "seg:0/fifo:1",
        "batch:2,0,0",
        "batch:16,2,0",
        "batch:16,32",
        "batch:16,32,0,1",
        "batch:16,,0",
        "batch:16,32,65537",
        "nvidia:96,32",
        "nvidia:96,2,0",
        "nvidia:96,32,2",
        "nvidia:2,32,0",
        "amd:384",
        "amd:2,16",
        "amd:384,0",
        "amd:384,16,1",
    ];
    for text in bad {
        let err = text.parse::<Model>().expect_err(text);
        assert_eq!(err.text, text);
        assert!(!err.reason.is_empty());
        assert!(err.to_string().contains("bad model"), "{err}");
    }
    let err = "lifo:16".parse::<Model>().unwrap_err();
    assert!(err.reason.contains("unknown model kind"), "{err}");
    assert!("seg:3/fifo:1".parse::<Cache>().is_err());
}

#[test]
fn feed_on_triangle_granular_models_buffers_corners() {
    let mut rng = Rng(5);
    let indices = random_indices(&mut rng, 100, 40, 5);
    for text in ["batch:8,9,4", "nvidia:12,6,0", "nvidia:30,8,3"] {
        let model: Model = text.parse().unwrap();
        assert!(!model.decides_per_index(), "{text}");
        let mut by_feed = model.simulator(40);
        let mut by_triangle = model.simulator(40);
        for t in indices.chunks_exact(3) {
            let flags = by_triangle.feed_triangle([t[0], t[1], t[2]]);
            assert!(!by_feed.feed(t[0]));
            assert!(!by_feed.feed(t[1]));
            assert_eq!(by_feed.fed(), by_triangle.fed() - 1);
            assert_eq!(by_feed.feed(t[2]), flags[2], "{text}");
            assert_eq!(by_feed.last_triangle(), flags, "{text}");
        }
        assert_eq!(by_feed.shaded(), by_triangle.shaded());
        assert_eq!(by_feed.warps(), by_triangle.warps());
    }
    for text in [
        "fifo:4",
        "lru:4",
        "dm:4",
        "sa:2x2",
        "seg:5/fifo:4",
        "amd:9,3",
    ] {
        let model: Model = text.parse().unwrap();
        assert!(model.decides_per_index(), "{text}");
        let mesh = Mesh::new(&indices, 40).unwrap();
        assert_eq!(
            model.warps(&mesh).is_some(),
            text.starts_with("amd"),
            "{text}"
        );
    }
}

#[test]
fn feed_indices_in_pieces_equals_simulate() {
    let mut rng = Rng(31);
    let indices = random_indices(&mut rng, 300, 60, 8);
    let mesh = Mesh::new(&indices, 60).unwrap();
    for text in [
        "fifo:5",
        "lru:7",
        "dm:16",
        "sa:4x3",
        "seg:10/lru:4",
        "seg:8/sa:2x2",
        "batch:8,9,4",
        "nvidia:30,8,4",
        "amd:10,4",
    ] {
        let model: Model = text.parse().unwrap();
        let expected = model.simulate(&mesh);
        let mut sim = model.simulator(60);
        let mut counts = vec![0u32; 60];
        let mut rest = &indices[..];
        let mut shaded = 0;
        while !rest.is_empty() {
            // Pieces of 0..=7 indices: triangles cut anywhere.
            let k = (rng.below(8) as usize).min(rest.len());
            shaded += sim.feed_indices(&rest[..k], Some(&mut counts));
            rest = &rest[k..];
        }
        assert_eq!(counts, expected, "{text}");
        assert_eq!(shaded, sim.shaded(), "{text}");
        assert_eq!(sim.fed(), indices.len() as u64, "{text}");
        assert_eq!(sim.warps(), model.warps(&mesh), "{text}");
    }
}
