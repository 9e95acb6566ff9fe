//! Index reordering for a cache [`Model`]: [`optimize`] permutes a mesh's triangles to minimize
//! the vertex-shader invocations the model simulates.
//!
//! Candidates, all whole-triangle permutations of the input (each triangle keeps its corners in
//! their order, so nothing a model sees inside a triangle changes):
//!
//! 1. **The model-aware greedy** ([`greedy`]): grows the order one triangle at a time from the
//!    vertices just fed. At each step the candidates are the unemitted triangles that use a
//!    vertex of the last two triangles emitted; each is priced exactly by the model
//!    ([`Simulator::probe_triangle`]: how many of its corners the model would shade next, segment
//!    and batch boundaries included), and the cheapest wins; ties go to the triangle whose
//!    vertices have the fewest triangles left (finishing vertices off keeps future options, as
//!    Forsyth's valence score and Tipsify do), then to the lower triangle number. At a dead end
//!    (no recent vertex has a triangle left) it goes back to the most recently shaded vertex
//!    that still has one, and only then to the next unemitted triangle of the input order.
//! 2. **meshoptimizer's orders** (`meshopt` 0.7, a dependency: MIT OR Apache-2.0, C++ built by
//!    its build script): `optimize_vertex_cache` (Forsyth's greedy with learned scores) and
//!    `optimize_vertex_cache_fifo` (Tipsify) for the model's cache size.
//! 3. **The input order.**
//!
//! Each candidate is simulated whole under the model and the one with the fewest invocations is
//! taken (the input on a tie with it, then the candidates in the order above). Then, for models
//! that cut the draw into independent chunks (`seg:L/...` with L a multiple of 3, `amd:I,N`,
//! `batch:N,0,P`: every chunk of triangles starts with an empty cache), Forsyth's order and the
//! best candidate (when it beats Forsyth's refined) are refined: rotated to the cheapest of 8
//! chunk phases (a run of the first triangles moved to the end), then each chunk re-sequenced by
//! the greedy from an empty cache and kept where that is cheaper (exact chunk by chunk); a
//! refined order is returned when it beats every candidate as it was. So the result is never
//! worse under the model than the input or either meshoptimizer order.
//!
//! Threads: the greedy runs on a second thread while meshoptimizer's orders run on the
//! caller's; the chunk phases and the chunks are shared out over up to the machine's
//! parallelism (at most 16 threads). Deterministic all the same: no randomness, no hashing
//! order, every piece of work is independent and its results are combined in a fixed order.

use crate::{Cache, Mesh, Model, Simulator};

/// Recent triangles whose vertices supply the greedy's candidates.
const RECENT_TRIANGLES: usize = 2;

/// The triangles of `mesh` reordered to minimize the invocations `model` simulates: the best
/// under `model` of the model-aware greedy, meshoptimizer's `optimize_vertex_cache` and
/// `optimize_vertex_cache_fifo`, the input order, and (for chunked models) refinements of them
/// (see the module docs). The result is a permutation of the input's triangles, each with its
/// corners in their input order, and `model.invocations` of it is at most that of the input and
/// of both meshoptimizer orders.
pub fn optimize(mesh: &Mesh<'_>, model: &Model) -> Vec<u32> {
    optimize_with_report(mesh, model).indices
}

/// A candidate order of [`optimize_with_report`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Choice {
    /// The input order (no candidate was strictly better).
    Input,
    /// The model-aware greedy.
    Greedy,
    /// meshoptimizer's `optimize_vertex_cache`.
    Meshopt,
    /// meshoptimizer's `optimize_vertex_cache_fifo` (Tipsify).
    Tipsify,
}

/// What [`optimize_with_report`] found: the order returned, which candidate it came from, every
/// candidate's invocations under the model, and what the chunk refinement made of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Optimized {
    /// The reordered indices.
    pub indices: Vec<u32>,
    /// The cheapest candidate as it was (the input on a tie with it, then in the order of
    /// [`Choice`]); the result is its order unless `refined` says otherwise.
    pub choice: Choice,
    /// Invocations of each candidate under the model, in the order input, greedy, meshopt,
    /// Tipsify.
    pub invocations: [(Choice, u64); 4],
    /// For models cut into independent chunks (`seg:L/...` with L a multiple of 3, `amd`,
    /// `batch:N,0,P`): when the result is a refined candidate (rotated to the best of a few
    /// chunk phases, its chunks re-sequenced by the greedy where that was cheaper) because that
    /// beat every candidate as it was, which candidate it came from (Forsyth's, or `choice`)
    /// and the result's invocations; `None` otherwise (the result is then `choice`'s order).
    pub refined: Option<(Choice, u64)>,
}

/// [`optimize`], also saying which candidate won and what each cost.
pub fn optimize_with_report(mesh: &Mesh<'_>, model: &Model) -> Optimized {
    let input = mesh.indices();
    let vc = mesh.vertex_count();
    let cost = |indices: &[u32]| model.simulator(vc).feed_indices(indices, None);
    let chunked = chunk_triangles(model).is_some();
    let refine = |order: &[u32]| -> (Vec<u32>, u64) {
        let r = refine_chunks(&best_rotation(order.to_vec(), vc, model), vc, model);
        let c = cost(&r);
        (r, c)
    };
    // The greedy on its own thread (for large meshes); meshoptimizer's two orders on this one,
    // and for chunked models the refinement of Forsyth's order while the greedy still runs.
    // Every piece is independent and deterministic, so the result does not depend on timing.
    let greedy_job = || {
        let order = greedy(mesh, model);
        let c = cost(&order);
        (order, c)
    };
    let baselines_job = || {
        let forsyth = meshopt::optimize_vertex_cache(input, vc as usize);
        let forsyth_cost = cost(&forsyth);
        let tipsify = meshopt::optimize_vertex_cache_fifo(input, vc as usize, tipsify_cache(model));
        let tipsify_cost = cost(&tipsify);
        let input_cost = cost(input);
        let refined_forsyth = chunked.then(|| refine(&forsyth));
        (
            input_cost,
            (forsyth, forsyth_cost),
            (tipsify, tipsify_cost),
            refined_forsyth,
        )
    };
    let ((greedy_order, greedy_cost), (input_cost, forsyth, tipsify, refined_forsyth)) = join(
        mesh.triangles() >= PARALLEL_GRAIN,
        greedy_job,
        baselines_job,
    );
    let invocations = [
        (Choice::Input, input_cost),
        (Choice::Greedy, greedy_cost),
        (Choice::Meshopt, forsyth.1),
        (Choice::Tipsify, tipsify.1),
    ];
    let mut best = invocations[0];
    for &c in &invocations[1..] {
        if c.1 < best.1 {
            best = c;
        }
    }
    let indices = match best.0 {
        Choice::Input => input.to_vec(),
        Choice::Greedy => greedy_order,
        Choice::Meshopt => forsyth.0,
        Choice::Tipsify => tipsify.0,
    };
    let Some((rf_order, rf_cost)) = refined_forsyth else {
        return Optimized {
            indices,
            choice: best.0,
            invocations,
            refined: None,
        };
    };
    // The best candidate refined too, unless it is Forsyth's or already no better than Forsyth's
    // refinement (a refinement gains a few percent at most).
    let mut out = (indices, best.1, None);
    if best.0 != Choice::Meshopt && best.1 < rf_cost {
        let (order, c) = refine(&out.0);
        if c < out.1 {
            out = (order, c, Some((best.0, c)));
        }
    }
    if rf_cost < out.1 {
        out = (rf_order, rf_cost, Some((Choice::Meshopt, rf_cost)));
    }
    Optimized {
        indices: out.0,
        choice: best.0,
        invocations,
        refined: out.2,
    }
}

/// The cache size Tipsify is asked to plan for: the model's cache entries (an eighth of a
/// direct-mapped cache's slots and half a set-associative one's, which keep fewer useful
/// entries than they have), clamped to 3..=64.
fn tipsify_cache(model: &Model) -> u32 {
    let entries = |c: Cache| match c {
        Cache::Fifo { size } | Cache::Lru { size } => size,
        Cache::Direct { slots } => slots / 8,
        Cache::SetAssoc { sets, ways } => sets * ways / 2,
    };
    let n = match *model {
        Model::Fifo { size } | Model::Lru { size } => size,
        Model::Direct { slots } => entries(Cache::Direct { slots }),
        Model::SetAssoc { sets, ways } => entries(Cache::SetAssoc { sets, ways }),
        Model::Segmented { cache, .. } => entries(cache),
        Model::Batch { cache, .. } => cache,
        Model::Nvidia { vertices, .. } => vertices,
        Model::Amd { size, .. } => size,
    };
    n.clamp(3, 64)
}

/// A triangle in an adjacency list, with its corners (so that pricing a candidate reads no other
/// array): its number, its corners as the model sees them, and renumbered.
#[derive(Clone, Copy)]
struct Entry {
    n: u32,
    real: [u32; 3],
    local: [u32; 3],
}

/// Per-vertex lists of the live (unemitted) triangles that use the vertex: CSR, the live ones
/// kept first in each list (an emitted triangle is swapped out of it).
struct Adjacency {
    start: Vec<u32>,
    live: Vec<u32>,
    entries: Vec<Entry>,
}

impl Adjacency {
    fn new(real: &[u32], local: &[u32], local_count: u32) -> Self {
        let v = local_count as usize;
        let mut live = vec![0u32; v];
        for t in local.chunks_exact(3) {
            for (j, &x) in t.iter().enumerate() {
                if !t[..j].contains(&x) {
                    live[x as usize] += 1;
                }
            }
        }
        let mut start = vec![0u32; v + 1];
        for i in 0..v {
            start[i + 1] = start[i] + live[i];
        }
        let mut fill = start[..v].to_vec();
        let empty = Entry {
            n: 0,
            real: [0; 3],
            local: [0; 3],
        };
        let mut entries = vec![empty; start[v] as usize];
        for (n, (t, r)) in local.chunks_exact(3).zip(real.chunks_exact(3)).enumerate() {
            let entry = Entry {
                n: n as u32,
                real: [r[0], r[1], r[2]],
                local: [t[0], t[1], t[2]],
            };
            for (j, &x) in t.iter().enumerate() {
                if !t[..j].contains(&x) {
                    entries[fill[x as usize] as usize] = entry;
                    fill[x as usize] += 1;
                }
            }
        }
        Adjacency {
            start,
            live,
            entries,
        }
    }

    fn live_of(&self, v: u32) -> &[Entry] {
        let s = self.start[v as usize] as usize;
        &self.entries[s..s + self.live[v as usize] as usize]
    }

    /// Removes triangle `n` from the live list of `v`.
    fn remove(&mut self, v: u32, n: u32) {
        let s = self.start[v as usize] as usize;
        let len = self.live[v as usize] as usize;
        let list = &mut self.entries[s..s + len];
        if let Some(p) = list.iter().position(|e| e.n == n) {
            list.swap(p, len - 1);
            self.live[v as usize] -= 1;
        }
    }
}

/// The model-aware greedy order alone (see the module docs), without the comparison against
/// the other candidates: a permutation of the input's triangles, corners kept in order.
pub fn greedy(mesh: &Mesh<'_>, model: &Model) -> Vec<u32> {
    let mut sim = model.simulator(mesh.vertex_count());
    greedy_core(
        mesh.indices(),
        mesh.indices(),
        mesh.vertex_count(),
        &mut sim,
    )
}

/// The greedy over the triangles of `real` (vertex ids as the model sees them) fed to `sim` as
/// it is; `local` is the same triangles with vertices renumbered densely below `local_count`
/// (the adjacency's ids; `real` itself when there is no renumbering). Returns the reordered
/// `real` indices, every one of them fed to `sim`.
/// The most live triangles of one vertex the greedy considers per step.
const MAX_CANDIDATES_PER_VERTEX: usize = 32;

fn greedy_core(real: &[u32], local: &[u32], local_count: u32, sim: &mut Simulator) -> Vec<u32> {
    let triangles = real.len() / 3;
    let mut adjacency = Adjacency::new(real, local, local_count);
    let mut emitted = vec![false; triangles];
    let mut out = Vec::with_capacity(real.len());
    // The last triangles emitted (local ids), most recent first.
    let mut recent: [Option<[u32; 3]>; RECENT_TRIANGLES] = [None; RECENT_TRIANGLES];
    // Vertices shaded (local ids), most recent last: where to go on when the recent triangles'
    // vertices have no triangle left (a dead end), before falling back to the input order.
    let mut stack: Vec<u32> = Vec::new();
    let mut cursor = 0usize;
    let mut candidates: Vec<Entry> = Vec::with_capacity(64);
    // The step at which each triangle last became a candidate: de-duplication in O(1).
    let mut listed = vec![usize::MAX; triangles];
    for step in 0..triangles {
        candidates.clear();
        for t in recent.iter().flatten() {
            for (j, &v) in t.iter().enumerate() {
                if t[..j].contains(&v) {
                    continue;
                }
                // At most MAX_CANDIDATES_PER_VERTEX of a vertex's live triangles: a fan's hub
                // would otherwise make every step cost all of its triangles.
                for e in adjacency.live_of(v).iter().take(MAX_CANDIDATES_PER_VERTEX) {
                    if std::mem::replace(&mut listed[e.n as usize], step) != step {
                        candidates.push(*e);
                    }
                }
            }
        }
        while candidates.is_empty() {
            let Some(&v) = stack.last() else { break };
            if adjacency.live[v as usize] == 0 {
                stack.pop();
            } else {
                let live = adjacency.live_of(v);
                candidates.extend_from_slice(&live[..live.len().min(MAX_CANDIDATES_PER_VERTEX)]);
            }
        }
        let next = if candidates.is_empty() {
            while emitted[cursor] {
                cursor += 1;
            }
            let i = 3 * cursor;
            Entry {
                n: cursor as u32,
                real: [real[i], real[i + 1], real[i + 2]],
                local: [local[i], local[i + 1], local[i + 2]],
            }
        } else {
            let mut best = (u32::MAX, u32::MAX, u32::MAX);
            let mut chosen = candidates[0];
            for e in &candidates {
                let live: u32 = e.local.iter().map(|&v| adjacency.live[v as usize]).sum();
                if best.0 == 0 && (live, e.n) >= (best.1, best.2) {
                    // Nothing costs less than 0: this one cannot win.
                    continue;
                }
                let shaded = sim
                    .probe_triangle(e.real)
                    .iter()
                    .map(|&s| u32::from(s))
                    .sum::<u32>();
                let key = (shaded, live, e.n);
                if key < best {
                    best = key;
                    chosen = *e;
                }
            }
            chosen
        };
        let (t, lt) = (next.real, next.local);
        emitted[next.n as usize] = true;
        let flags = sim.feed_triangle(t);
        for (j, &v) in lt.iter().enumerate() {
            if !lt[..j].contains(&v) {
                adjacency.remove(v, next.n);
            }
            if flags[j] {
                stack.push(v);
            }
        }
        out.extend_from_slice(&t);
        recent.rotate_right(1);
        recent[0] = Some(lt);
    }
    out
}

/// Triangles per independent chunk of `model`: the draw is cut into runs of this many
/// triangles from its start, each starting with an empty cache and nothing carried over
/// (`seg:L/...` with L a multiple of 3, `amd:I,N`, `batch:N,0,P`); `None` for models whose
/// state crosses any fixed boundary.
fn chunk_triangles(model: &Model) -> Option<usize> {
    match *model {
        Model::Segmented { length, .. } if length % 3 == 0 => Some(length as usize / 3),
        Model::Amd { indices, .. } => Some(indices as usize / 3),
        Model::Batch { warp: 0, group, .. } if group > 0 => Some(group as usize),
        _ => None,
    }
}

/// Rotations of the order tried for chunked models (the first `k * chunk / ROTATIONS` triangles
/// moved to the end, `k` in `0..ROTATIONS`): moves the chunk boundaries across the order.
const ROTATIONS: usize = 8;

/// For models cut into independent chunks: `order` rotated (a run of its first triangles moved
/// to the end) by the rotation of [`ROTATIONS`] that costs the fewest invocations, the order
/// itself on a tie; `order` unchanged for other models.
fn best_rotation(order: Vec<u32>, vertex_count: u32, model: &Model) -> Vec<u32> {
    let Some(chunk) = chunk_triangles(model) else {
        return order;
    };
    let triangles = order.len() / 3;
    if triangles <= chunk {
        return order;
    }
    let cuts: Vec<usize> = (0..ROTATIONS)
        .map(|k| 3 * (k * chunk / ROTATIONS))
        .collect();
    let costs = in_parallel(&cuts, ROTATIONS * triangles, |cuts| {
        let mut sim = model.simulator(vertex_count);
        cuts.iter()
            .map(|&cut| {
                sim.reset();
                sim.feed_indices(&order[cut..], None) + sim.feed_indices(&order[..cut], None)
            })
            .collect()
    });
    // The cheapest, the earliest (no rotation first) on a tie.
    let mut best = 0;
    for (k, &c) in costs.iter().enumerate() {
        if c < costs[best] {
            best = k;
        }
    }
    let mut order = order;
    order.rotate_left(cuts[best]);
    order
}

/// Triangles of work below which a thread is not worth starting.
const PARALLEL_GRAIN: usize = 2_048;

/// `a` and `b`, on two threads when `parallel`, else one after the other.
fn join<A: Send, B>(parallel: bool, a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B) -> (A, B) {
    if !parallel {
        let a = a();
        return (a, b());
    }
    std::thread::scope(|scope| {
        let a = scope.spawn(a);
        let b = b();
        match a.join() {
            Ok(a) => (a, b),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// `work` over `items` split into contiguous runs, one per thread (up to the machine's
/// parallelism, and one per [`PARALLEL_GRAIN`] of the `triangles` the whole work touches),
/// results concatenated in the order of `items`: the same as `work(items)`.
fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    triangles: usize,
    work: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 16)
        .min(items.len().max(1))
        .min(triangles / PARALLEL_GRAIN + 1);
    if threads <= 1 {
        return work(items);
    }
    let per = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|run| scope.spawn(|| work(run)))
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for h in handles {
            match h.join() {
                Ok(part) => out.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

/// For models cut into independent chunks ([`chunk_triangles`]): each chunk of `order`
/// re-sequenced by the greedy from an empty cache, kept where that costs fewer invocations
/// (exact: a chunk's cost depends only on its own triangles and their order); `order` as it is
/// for other models.
fn refine_chunks(order: &[u32], vertex_count: u32, model: &Model) -> Vec<u32> {
    let Some(chunk) = chunk_triangles(model) else {
        return order.to_vec();
    };
    let parts: Vec<&[u32]> = order.chunks(3 * chunk).collect();
    in_parallel(&parts, order.len() / 3, |parts| {
        let mut sim = model.simulator(vertex_count);
        let mut renumber = vec![u32::MAX; vertex_count as usize];
        let mut local = Vec::with_capacity(3 * chunk);
        let mut out = Vec::with_capacity(parts.len() * 3 * chunk);
        for part in parts {
            sim.reset();
            let before = sim.feed_indices(part, None);
            local.clear();
            let mut count = 0u32;
            for &v in *part {
                let r = &mut renumber[v as usize];
                if *r == u32::MAX {
                    *r = count;
                    count += 1;
                }
                local.push(*r);
            }
            sim.reset();
            let candidate = greedy_core(part, &local, count, &mut sim);
            for &v in *part {
                renumber[v as usize] = u32::MAX;
            }
            if sim.shaded() < before {
                out.extend_from_slice(&candidate);
            } else {
                out.extend_from_slice(part);
            }
        }
        out
    })
}
