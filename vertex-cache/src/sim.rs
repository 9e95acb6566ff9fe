//! The incremental simulator behind every [`Model`]: fed indices (or triangles) in draw order,
//! it says which were shaded (missed the cache).
//!
//! State is kept in per-vertex (or per-slot) stamp arrays so that a look-up is O(1) whatever the
//! cache size, and a cache flush (segment or batch boundary) is O(1) too: it bumps a timestamp
//! or a generation instead of clearing memory. [`Simulator::probe_triangle`] answers "what would
//! this triangle cost next" without cloning the per-vertex arrays: it runs the triangle with a
//! journal of the writes and undoes them.

use crate::model::{Cache, Model};

const NONE: u32 = u32::MAX;

/// LRU caches up to this size keep their entries in slots with last-use stamps (a miss scans
/// the stamps for the least recent); larger ones a doubly linked list over vertex ids.
const SMALL_LRU: u32 = 64;

/// How a model decides, reduced to what the simulator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Per index: a replacement rule, flushed every `segment` indices (0: never).
    PerIndex { cache: Cache, segment: u32 },
    /// meshoptimizer's analyzer: FIFO of `cache`, flushed before a triangle that would overflow
    /// the warp or the primitive group (0: no limit). Decides per triangle.
    Batch { cache: u32, warp: u32, group: u32 },
    /// Kerbl et al.'s NVIDIA batches: closed before a triangle that would exceed `indices`
    /// indices or `vertices` shaded vertices; reuse within the batch, from the last `window`
    /// indices (0: the whole batch). Decides per triangle.
    Nvidia {
        indices: u32,
        vertices: u32,
        window: u32,
    },
    /// Kerbl et al.'s AMD: an LRU of `size` emptied before a triangle that would make the batch
    /// longer than `indices` indices. Decides per index (the flush is known at a triangle's
    /// first corner).
    Amd { indices: u32, size: u32 },
}

/// Scalar state (copied whole by a probe).
#[derive(Debug, Clone, Copy, Default)]
struct Regs {
    /// FIFO timestamp (meshoptimizer's form: in cache iff `t - stamp <= size`); set-associative
    /// use clock.
    t: u64,
    /// Generation of LRU / direct-mapped / set-associative entries (a flush bumps it).
    generation: u64,
    /// LRU list: most recent, least recent, length.
    head: u32,
    tail: u32,
    len: u32,
    /// Indices left in the current segment.
    segment_left: u32,
    /// Batch: vertices in the open warp, triangles in the open group, warps closed.
    warp: u32,
    group: u32,
    warps: u64,
    /// NVIDIA: position (indices fed) where the open batch started.
    batch_start: u64,
    /// Vertices shaded and indices fed so far.
    shaded: u64,
    fed: u64,
    /// Corners buffered by `feed` for a triangle-granular model, and the last triangle's flags.
    pending: [u32; 3],
    pending_len: u8,
    last: [bool; 3],
}

/// An exact, incremental simulation of one [`Model`] over vertices `0..vertex_count`, made by
/// [`Model::simulator`].
///
/// Feed it a draw in order: [`feed_triangle`](Self::feed_triangle) (exact for every model),
/// [`feed`](Self::feed) one index at a time, or [`feed_indices`](Self::feed_indices) for a run
/// of indices (the fast path, per-vertex counts optional). Models with segment or batch boundaries count the
/// position themselves. [`reset`](Self::reset) starts a new draw (empty cache, position 0).
///
/// Per-index models ([`Model::decides_per_index`]: FIFO, LRU, direct-mapped, set-associative,
/// segmented, `amd`) decide each index when it is fed. Triangle-granular models (`batch`,
/// `nvidia`) decide whether a triangle starts a new warp / batch from all three corners, so
/// [`feed`](Self::feed) buffers the first two corners of each triangle (returning `false` for
/// them) and runs the triangle on the third; the flags of all three corners are then in
/// [`last_triangle`](Self::last_triangle). Use [`feed_triangle`](Self::feed_triangle) or
/// [`feed_indices`](Self::feed_indices) with those models.
///
/// Cloning copies the per-vertex arrays (O(vertex count)); to price a candidate triangle use
/// [`probe_triangle`](Self::probe_triangle), which costs what a feed costs.
///
/// # Panics
/// Feeding an index `>= vertex_count` panics.
#[derive(Debug, Clone)]
pub struct Simulator {
    model: Model,
    kind: Kind,
    vertex_count: u32,
    regs: Regs,
    mem: Vec<u64>,
    journal: Vec<(usize, u64)>,
    journaling: bool,
}

impl Model {
    /// A simulator of this model over vertices `0..vertex_count`, empty.
    pub fn simulator(&self, vertex_count: u32) -> Simulator {
        let kind = match *self {
            Model::Fifo { size } => Kind::PerIndex {
                cache: Cache::Fifo { size },
                segment: 0,
            },
            Model::Lru { size } => Kind::PerIndex {
                cache: Cache::Lru { size },
                segment: 0,
            },
            Model::Direct { slots } => Kind::PerIndex {
                cache: Cache::Direct { slots },
                segment: 0,
            },
            Model::SetAssoc { sets, ways } => Kind::PerIndex {
                cache: Cache::SetAssoc { sets, ways },
                segment: 0,
            },
            Model::Segmented { length, cache } => Kind::PerIndex {
                cache,
                segment: length,
            },
            Model::Batch { cache, warp, group } => Kind::Batch { cache, warp, group },
            Model::Nvidia {
                indices,
                vertices,
                window,
            } => Kind::Nvidia {
                indices,
                vertices,
                window,
            },
            Model::Amd { indices, size } => Kind::Amd { indices, size },
        };
        let v = vertex_count as usize;
        let words = match kind {
            Kind::PerIndex { cache, .. } => match cache {
                Cache::Fifo { .. } => v,
                Cache::Lru { size } => lru_words(v, size),
                Cache::Direct { slots } => slots as usize,
                Cache::SetAssoc { sets, ways } => 2 * sets as usize * ways as usize,
            },
            Kind::Batch { .. } | Kind::Nvidia { .. } => v,
            Kind::Amd { size, .. } => lru_words(v, size),
        };
        let mut sim = Simulator {
            model: *self,
            kind,
            vertex_count,
            regs: Regs::default(),
            mem: vec![0; words],
            journal: Vec::new(),
            journaling: false,
        };
        sim.reset();
        sim
    }

    /// Whether this model decides each index as it is fed (so [`Simulator::feed`] is exact), as
    /// opposed to per triangle (`batch`, `nvidia`: whether a triangle starts a new batch depends
    /// on all three corners).
    pub fn decides_per_index(&self) -> bool {
        !matches!(self, Model::Batch { .. } | Model::Nvidia { .. })
    }
}

impl Simulator {
    /// The model simulated.
    pub fn model(&self) -> Model {
        self.model
    }

    /// The vertex count it was made for.
    pub fn vertex_count(&self) -> u32 {
        self.vertex_count
    }

    /// Vertices shaded (cache misses) since the last reset.
    pub fn shaded(&self) -> u64 {
        self.regs.shaded
    }

    /// Indices fed since the last reset (buffered corners included).
    pub fn fed(&self) -> u64 {
        self.regs.fed + u64::from(self.regs.pending_len)
    }

    /// Warps (batches) started since the last reset, the open one included, for models that
    /// have them (`batch`: meshoptimizer's `warps_executed`, a warp counted when it shaded a
    /// vertex; `nvidia` and `amd`: batches with at least one triangle, buffered corners not
    /// counted); `None` for the others.
    pub fn warps(&self) -> Option<u64> {
        match self.kind {
            Kind::Batch { .. } => Some(self.regs.warps + u64::from(self.regs.warp > 0)),
            Kind::Nvidia { .. } => Some(self.regs.warps + u64::from(self.regs.fed > 0)),
            Kind::Amd { .. } => Some(self.regs.warps + u64::from(self.regs.group > 0)),
            Kind::PerIndex { .. } => None,
        }
    }

    /// The shaded flags of the corners of the last triangle completed.
    pub fn last_triangle(&self) -> [bool; 3] {
        self.regs.last
    }

    /// Empties the cache and starts a new draw: position 0, counters 0. O(1) for most models
    /// (generations and timestamps move on), O(cache entries) at worst.
    pub fn reset(&mut self) {
        let keep = self.regs;
        self.regs = Regs {
            t: keep.t,
            generation: keep.generation,
            ..Regs::default()
        };
        self.flush();
        if let Kind::PerIndex { segment, .. } = self.kind {
            self.regs.segment_left = segment;
        }
    }

    /// Feeds one index (the next in draw order); `true` when the vertex was shaded (a miss).
    /// Exact for per-index models; see the type's docs for triangle-granular ones.
    pub fn feed(&mut self, index: u32) -> bool {
        match self.kind {
            Kind::PerIndex { .. } => self.step(index),
            Kind::Amd { indices, size } => self.amd_step(index, indices, size),
            Kind::Batch { .. } | Kind::Nvidia { .. } => {
                let r = &mut self.regs;
                r.pending[r.pending_len as usize] = index;
                r.pending_len += 1;
                if r.pending_len < 3 {
                    assert!(index < self.vertex_count, "index {index} past vertex count");
                    return false;
                }
                r.pending_len = 0;
                let tri = r.pending;
                self.triangle(tri)[2]
            }
        }
    }

    /// Feeds `indices` in order, as [`feed`](Self::feed) one at a time would (triangle-granular
    /// models included: whole triangles run as they complete), adding each shaded vertex to
    /// `counts[vertex]` when `counts` is given; returns the vertices shaded. The fast path for
    /// whole draws: the model's rule is chosen once, not per index.
    ///
    /// # Panics
    /// On an index `>= vertex_count`, or `counts` shorter than the vertex count.
    pub fn feed_indices(&mut self, indices: &[u32], mut counts: Option<&mut [u32]>) -> u64 {
        if let Some(c) = counts.as_deref() {
            assert!(
                c.len() >= self.vertex_count as usize,
                "one count per vertex"
            );
        }
        let before = self.regs.shaded;
        match self.kind {
            Kind::PerIndex { cache, segment } => match cache {
                Cache::Fifo { size } => {
                    self.per_index(indices, counts, segment, |s, v| s.fifo(v, size))
                }
                Cache::Lru { size } => {
                    self.per_index(indices, counts, segment, |s, v| s.lru(v, size))
                }
                Cache::Direct { slots } => {
                    self.per_index(indices, counts, segment, |s, v| s.direct(v, slots))
                }
                Cache::SetAssoc { sets, ways } => {
                    self.per_index(indices, counts, segment, |s, v| s.set_assoc(v, sets, ways))
                }
            },
            Kind::Amd { indices: l, size } => {
                for &v in indices {
                    let miss = self.amd_step(v, l, size);
                    if let Some(c) = counts.as_deref_mut() {
                        c[v as usize] += u32::from(miss);
                    }
                }
            }
            Kind::Batch { .. } | Kind::Nvidia { .. } => {
                let mut rest = indices;
                // Finish a triangle left partial by feed, then whole triangles.
                while self.regs.pending_len != 0 && !rest.is_empty() {
                    self.feed(rest[0]);
                    if self.regs.pending_len == 0 {
                        let tri = self.regs.pending;
                        add_counts(&mut counts, tri, self.regs.last);
                    }
                    rest = &rest[1..];
                }
                let whole = rest.len() / 3 * 3;
                for t in rest[..whole].chunks_exact(3) {
                    let tri = [t[0], t[1], t[2]];
                    let flags = self.triangle(tri);
                    add_counts(&mut counts, tri, flags);
                }
                for &v in &rest[whole..] {
                    self.feed(v);
                }
            }
        }
        self.regs.shaded - before
    }

    /// The per-index loop with the rule chosen by the caller (inlined per rule).
    #[inline(always)]
    fn per_index(
        &mut self,
        indices: &[u32],
        mut counts: Option<&mut [u32]>,
        segment: u32,
        mut rule: impl FnMut(&mut Self, u32) -> bool,
    ) {
        for &v in indices {
            assert!(v < self.vertex_count, "index {v} past vertex count");
            if segment != 0 {
                if self.regs.segment_left == 0 {
                    self.flush();
                    self.regs.segment_left = segment;
                }
                self.regs.segment_left -= 1;
            }
            let miss = rule(self, v);
            self.regs.shaded += u64::from(miss);
            if let Some(c) = counts.as_deref_mut() {
                c[v as usize] += u32::from(miss);
            }
        }
        self.regs.fed += indices.len() as u64;
    }

    /// Feeds one triangle (its three indices in order); the shaded flag of each corner.
    ///
    /// # Panics
    /// On a triangle-granular model with corners left buffered by [`feed`](Self::feed).
    pub fn feed_triangle(&mut self, tri: [u32; 3]) -> [bool; 3] {
        assert!(
            self.regs.pending_len == 0,
            "feed_triangle after a partial triangle fed by feed"
        );
        self.triangle(tri)
    }

    /// What [`feed_triangle`](Self::feed_triangle) would return for `tri` now, leaving the
    /// state as it was. Costs about what a feed costs (no clone).
    pub fn probe_triangle(&mut self, tri: [u32; 3]) -> [bool; 3] {
        assert!(
            self.regs.pending_len == 0,
            "probe_triangle after a partial triangle fed by feed"
        );
        let saved = self.regs;
        self.journaling = true;
        let flags = self.triangle(tri);
        self.journaling = false;
        while let Some((i, old)) = self.journal.pop() {
            self.mem[i] = old;
        }
        self.regs = saved;
        flags
    }

    fn triangle(&mut self, tri: [u32; 3]) -> [bool; 3] {
        let flags = match self.kind {
            Kind::PerIndex { .. } => [self.step(tri[0]), self.step(tri[1]), self.step(tri[2])],
            Kind::Batch { cache, warp, group } => self.batch_triangle(tri, cache, warp, group),
            Kind::Nvidia {
                indices,
                vertices,
                window,
            } => self.nvidia_triangle(tri, indices, vertices, window),
            Kind::Amd { indices, size } => [
                self.amd_step(tri[0], indices, size),
                self.amd_step(tri[1], indices, size),
                self.amd_step(tri[2], indices, size),
            ],
        };
        self.regs.last = flags;
        flags
    }

    #[inline]
    fn put(&mut self, i: usize, value: u64) {
        if self.journaling {
            self.journal.push((i, self.mem[i]));
        }
        self.mem[i] = value;
    }

    /// Empties the cache (not the counters).
    fn flush(&mut self) {
        let cache = match self.kind {
            Kind::PerIndex { cache, .. } => cache,
            Kind::Batch { cache, .. } => Cache::Fifo { size: cache },
            Kind::Amd { size, .. } => Cache::Lru { size },
            Kind::Nvidia { .. } => {
                // Stamps are 1 + the clock (t, never reset) of the last reference; a batch
                // holds those after its start.
                self.regs.batch_start = self.regs.t;
                return;
            }
        };
        match cache {
            Cache::Fifo { size } => {
                // Every stamp is now more than `size` behind (stamps start at 0 < t).
                self.regs.t += u64::from(size) + 1;
            }
            Cache::Lru { .. } | Cache::Direct { .. } | Cache::SetAssoc { .. } => {
                self.regs.generation += 1;
                self.regs.head = NONE;
                self.regs.tail = NONE;
                self.regs.len = 0;
            }
        }
    }

    /// One index of a per-index model.
    #[inline]
    fn step(&mut self, v: u32) -> bool {
        assert!(v < self.vertex_count, "index {v} past vertex count");
        let Kind::PerIndex { cache, segment } = self.kind else {
            unreachable!("step on a per-index model")
        };
        if segment != 0 {
            if self.regs.segment_left == 0 {
                self.flush();
                self.regs.segment_left = segment;
            }
            self.regs.segment_left -= 1;
        }
        self.regs.fed += 1;
        let miss = match cache {
            Cache::Fifo { size } => self.fifo(v, size),
            Cache::Lru { size } => self.lru(v, size),
            Cache::Direct { slots } => self.direct(v, slots),
            Cache::SetAssoc { sets, ways } => self.set_assoc(v, sets, ways),
        };
        self.regs.shaded += u64::from(miss);
        miss
    }

    #[inline]
    fn fifo(&mut self, v: u32, size: u32) -> bool {
        let t = self.regs.t;
        if t - self.mem[v as usize] > u64::from(size) {
            self.put(v as usize, t);
            self.regs.t = t + 1;
            true
        } else {
            false
        }
    }

    // LRU: mem[3v] == generation when v is cached; mem[3v + 1] / mem[3v + 2] are its
    // neighbours towards the most recent (prev) and the least recent (next).
    #[inline]
    fn lru(&mut self, v: u32, size: u32) -> bool {
        if size <= SMALL_LRU {
            return self.lru_small(v, size);
        }
        let at = 3 * v as usize;
        let g = self.regs.generation;
        let hit = self.mem[at] == g;
        if hit {
            if self.regs.head == v {
                return false;
            }
            self.lru_unlink(v);
        } else if self.regs.len == size {
            let old = self.regs.tail;
            self.lru_unlink(old);
            self.put(3 * old as usize, 0);
        }
        // Push v as most recent.
        let head = self.regs.head;
        self.put(at + 1, u64::from(NONE));
        self.put(at + 2, u64::from(head));
        if head != NONE {
            self.put(3 * head as usize + 1, u64::from(v));
        } else {
            self.regs.tail = v;
        }
        self.regs.head = v;
        if !hit {
            self.put(at, g);
        }
        self.regs.len += 1;
        !hit
    }

    // Small LRU: mem[v] = generation << 32 | slot of v (valid when the generation is current and
    // the slot still holds v); slot s at V + s holds generation << 32 | (vertex + 1), its last
    // use (clock t) at V + size + s.
    #[inline]
    fn lru_small(&mut self, v: u32, size: u32) -> bool {
        let n = self.vertex_count as usize;
        let size = size as usize;
        let g = self.regs.generation << 32;
        self.regs.t += 1;
        let now = self.regs.t;
        let tag = g | (u64::from(v) + 1);
        let e = self.mem[v as usize];
        if e >> 32 == g >> 32 {
            let slot = (e & 0xffff_ffff) as usize;
            if self.mem[n + slot] == tag {
                self.put(n + size + slot, now);
                return false;
            }
        }
        let slot = if (self.regs.len as usize) < size {
            self.regs.len += 1;
            self.regs.len as usize - 1
        } else {
            let stamps = &self.mem[n + size..n + 2 * size];
            let (mut best, mut oldest) = (0, u64::MAX);
            for (i, &stamp) in stamps.iter().enumerate() {
                if stamp < oldest {
                    (best, oldest) = (i, stamp);
                }
            }
            best
        };
        self.put(n + slot, tag);
        self.put(n + size + slot, now);
        self.put(v as usize, g | slot as u64);
        true
    }

    #[inline]
    fn lru_unlink(&mut self, v: u32) {
        let at = 3 * v as usize;
        let prev = self.mem[at + 1] as u32;
        let next = self.mem[at + 2] as u32;
        if prev != NONE {
            self.put(3 * prev as usize + 2, u64::from(next));
        } else {
            self.regs.head = next;
        }
        if next != NONE {
            self.put(3 * next as usize + 1, u64::from(prev));
        } else {
            self.regs.tail = prev;
        }
        self.regs.len -= 1;
    }

    // Direct-mapped: mem[slot] = generation << 32 | (vertex + 1).
    #[inline]
    fn direct(&mut self, v: u32, slots: u32) -> bool {
        let slot = (v % slots) as usize;
        let tag = (self.regs.generation << 32) | (u64::from(v) + 1);
        if self.mem[slot] == tag {
            false
        } else {
            self.put(slot, tag);
            true
        }
    }

    // Set-associative: set = v mod sets; entry e of set s is at 2 * (s * ways + e): its tag (as
    // direct-mapped) and its last use (clock t, which only grows). The least recently used
    // entry is replaced; entries of an earlier generation (or never used, stamp 0) are older
    // than every current one, so they go first (which empty way takes a vertex changes no
    // outcome).
    #[inline]
    fn set_assoc(&mut self, v: u32, sets: u32, ways: u32) -> bool {
        let base = 2 * (v % sets) as usize * ways as usize;
        let tag = (self.regs.generation << 32) | (u64::from(v) + 1);
        self.regs.t += 1;
        let now = self.regs.t;
        let entries = &self.mem[base..base + 2 * ways as usize];
        let (mut victim, mut oldest) = (0, u64::MAX);
        for (i, pair) in entries.chunks_exact(2).enumerate() {
            if pair[0] == tag {
                self.put(base + 2 * i + 1, now);
                return false;
            }
            if pair[1] < oldest {
                (victim, oldest) = (i, pair[1]);
            }
        }
        self.put(base + 2 * victim, tag);
        self.put(base + 2 * victim + 1, now);
        true
    }

    fn batch_triangle(&mut self, tri: [u32; 3], cache: u32, warp: u32, group: u32) -> [bool; 3] {
        for &v in &tri {
            assert!(v < self.vertex_count, "index {v} past vertex count");
        }
        let size = u64::from(cache);
        let t = self.regs.t;
        // Misses counted before the triangle runs, as meshoptimizer's analyzer counts them (a
        // repeated corner counts twice, a corner evicted by the earlier ones counts as a hit).
        let misses: u32 = tri
            .iter()
            .map(|&v| u32::from(t - self.mem[v as usize] > size))
            .sum();
        if (group != 0 && self.regs.group == group) || (warp != 0 && self.regs.warp + misses > warp)
        {
            self.regs.warps += u64::from(self.regs.warp > 0);
            self.regs.warp = 0;
            self.regs.group = 0;
            self.regs.t += size + 1;
        }
        let mut flags = [false; 3];
        for (flag, &v) in flags.iter_mut().zip(&tri) {
            let t = self.regs.t;
            if t - self.mem[v as usize] > size {
                self.put(v as usize, t);
                self.regs.t = t + 1;
                self.regs.warp += 1;
                *flag = true;
            }
        }
        self.regs.group += 1;
        self.regs.fed += 3;
        self.regs.shaded += flags.iter().map(|&f| u64::from(f)).sum::<u64>();
        flags
    }
}

impl Simulator {
    /// One index of the AMD model: a triangle's first corner closes the batch when the
    /// triangle would not fit in it.
    fn amd_step(&mut self, v: u32, indices: u32, size: u32) -> bool {
        assert!(v < self.vertex_count, "index {v} past vertex count");
        if self.regs.fed.is_multiple_of(3) {
            if self.regs.group + 3 > indices {
                self.flush();
                self.regs.warps += 1;
                self.regs.group = 0;
            }
            self.regs.group += 3;
        }
        self.regs.fed += 1;
        let miss = self.lru(v, size);
        self.regs.shaded += u64::from(miss);
        miss
    }

    // NVIDIA: mem[v] = 1 + the clock t at v's last reference (0: never; t counts indices and is
    // never reset). v is reusable at clock q when that reference is in the open batch and, with
    // a window, within the last `window` indices.
    fn nvidia_triangle(
        &mut self,
        tri: [u32; 3],
        indices: u32,
        vertices: u32,
        window: u32,
    ) -> [bool; 3] {
        for &v in &tri {
            assert!(v < self.vertex_count, "index {v} past vertex count");
        }
        let fed = self.regs.t;
        let fresh = |sim: &Simulator| -> [bool; 3] {
            let mut flags = [false; 3];
            for j in 0..3 {
                let v = tri[j];
                if tri[..j].contains(&v) {
                    // Referenced a corner or two ago, in this batch (window >= 3 or none).
                    continue;
                }
                let last = sim.mem[v as usize];
                let q = fed + j as u64;
                let reusable = last > sim.regs.batch_start
                    && (window == 0 || q - (last - 1) <= u64::from(window));
                flags[j] = !reusable;
            }
            flags
        };
        let mut flags = fresh(self);
        let new: u32 = flags.iter().map(|&f| u32::from(f)).sum();
        if self.regs.group > 0 && (self.regs.group + 3 > indices || self.regs.warp + new > vertices)
        {
            self.regs.warps += 1;
            self.regs.warp = 0;
            self.regs.group = 0;
            self.regs.batch_start = fed;
            flags = fresh(self);
        }
        for (j, &v) in tri.iter().enumerate() {
            self.put(v as usize, fed + j as u64 + 1);
        }
        let shaded: u32 = flags.iter().map(|&f| u32::from(f)).sum();
        self.regs.warp += shaded;
        self.regs.group += 3;
        self.regs.fed += 3;
        self.regs.t += 3;
        self.regs.shaded += u64::from(shaded);
        flags
    }
}

fn add_counts(counts: &mut Option<&mut [u32]>, tri: [u32; 3], flags: [bool; 3]) {
    if let Some(c) = counts.as_deref_mut() {
        for (v, f) in tri.into_iter().zip(flags) {
            c[v as usize] += u32::from(f);
        }
    }
}

/// Words of state an LRU of `size` over `vertices` vertices needs.
fn lru_words(vertices: usize, size: u32) -> usize {
    if size <= SMALL_LRU {
        vertices + 2 * size as usize
    } else {
        3 * vertices
    }
}
