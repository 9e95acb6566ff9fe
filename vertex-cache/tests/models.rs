//! Cache models: hand-checked per-vertex counts on small cases for every family, the
//! incremental simulator against plain reference simulations, and the text forms.

use std::collections::VecDeque;

use vertex_cache::{Cache, Mesh, Model};

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
        let vertex_count = 1 + rng.below(200);
        let triangles = 1 + rng.below(300) as usize;
        let indices = random_indices(&mut rng, triangles, vertex_count, 12);
        let mesh = Mesh::new(&indices, vertex_count).unwrap();
        let size = 1 + rng.below(40) as usize;
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
fn probe_is_feed_without_the_change_and_reset_empties() {
    let mut rng = Rng(77);
    let models = [
        "fifo:7",
        "lru:5",
        "dm:8",
        "sa:4x2",
        "seg:7/fifo:4",
        "seg:9/lru:6",
        "seg:4/sa:2x2",
        "batch:8,9,4",
        "batch:16,32,0",
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
