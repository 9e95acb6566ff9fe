//! Fitting a cache model to measured counts: every candidate model of a [`SearchSpace`] is run
//! over a [`Battery`] whose per-vertex counts were measured on a driver, and scored by the number
//! of vertices whose simulated count differs from the measured one, then by the total absolute
//! difference ([`Score`]). The result lists every exact fit (no vertex differs on any probe) and
//! the best near misses, ties included.
//!
//! The search for exact fits is exhaustive over the space, made fast by two sound prunings:
//! * **Segmented groups.** A segmented model `seg:L/c` runs like `c` on any probe of at most `L`
//!   indices, so all lengths are carried as one group per cache `c`, scored once per probe, until
//!   a probe longer than some of them splits those off as single candidates.
//! * **First mismatch.** Probes run shortest first and a candidate stops at its first
//!   mismatching vertex. The near misses are ranked among the candidates that got furthest (see
//!   [`fit`]). Everything runs in a fixed order, so the result is deterministic.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

use crate::battery::{Battery, Probe};
use crate::{Cache, Model};

/// How far a model is from the measurement: compared by mismatching vertices first, then by
/// total difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Score {
    /// Vertices (summed over probes) whose simulated count differs from the measured one.
    pub mismatched_vertices: u64,
    /// Sum over probes and vertices of |simulated - measured|.
    pub total_difference: u64,
}

impl Score {
    /// Zero mismatching vertices.
    pub fn is_exact(&self) -> bool {
        self.mismatched_vertices == 0
    }

    fn add(self, other: Score) -> Score {
        Score {
            mismatched_vertices: self.mismatched_vertices + other.mismatched_vertices,
            total_difference: self.total_difference + other.total_difference,
        }
    }

    /// The score of simulated `counts` against `measured`.
    pub fn of(simulated: &[u32], measured: &[u32]) -> Score {
        let mut s = Score::default();
        for (&a, &b) in simulated.iter().zip(measured) {
            if a != b {
                s.mismatched_vertices += 1;
                s.total_difference += u64::from(a.abs_diff(b));
            }
        }
        s
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} mismatching vertices, total difference {}",
            self.mismatched_vertices, self.total_difference
        )
    }
}

/// The candidate models: parameter lists per family. Segmented models are every length in
/// `segment_lengths` with every cache of the unsegmented families (FIFO, LRU, direct-mapped,
/// set-associative).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchSpace {
    /// FIFO sizes.
    pub fifo: Vec<u32>,
    /// LRU sizes.
    pub lru: Vec<u32>,
    /// Direct-mapped slot counts.
    pub direct: Vec<u32>,
    /// Set-associative (sets, ways).
    pub set_assoc: Vec<(u32, u32)>,
    /// meshoptimizer batch models (cache, warp, group).
    pub batch: Vec<(u32, u32, u32)>,
    /// Kerbl et al.'s NVIDIA models (indices, vertices, window).
    pub nvidia: Vec<(u32, u32, u32)>,
    /// Kerbl et al.'s AMD models (indices, LRU size).
    pub amd: Vec<(u32, u32)>,
    /// Segment lengths (indices), inclusive range; empty when `lo > hi`.
    pub segment_lengths: (u32, u32),
}

impl SearchSpace {
    /// The standard space:
    /// * FIFO and LRU of 1..=512 entries, direct-mapped of 1..=1024 slots;
    /// * set-associative with 2..=64, 128, 256 or 512 sets of 2, 3, 4, 8 or 16 ways (at most
    ///   1024 entries);
    /// * batch N,W,P with N in {8, 12, 16, 24, 32, 48, 64, 96, 128}, W in {0, 32, 64, 96, 128},
    ///   P in {0, 32, 64, 96, 128, 256};
    /// * Kerbl et al.'s NVIDIA model with 48, 96 or 192 indices, 16, 32 or 64 vertices and a
    ///   window of 0 (none) or 3..=96 indices; AMD's with 96, 192, 384 or 768 indices and an LRU of 4,
    ///   8, 16, 32, 64 or 128;
    /// * segmented: every length 3..=4096 with every cache above (lengths from the cache's
    ///   entries up, see [`SearchSpace::candidates`]).
    pub fn standard() -> Self {
        let mut set_assoc = Vec::new();
        let sets = (2..=64).chain([128, 256, 512]);
        for s in sets {
            for w in [2, 3, 4, 8, 16] {
                if s * w <= 1024 {
                    set_assoc.push((s, w));
                }
            }
        }
        let mut batch = Vec::new();
        for n in [8, 12, 16, 24, 32, 48, 64, 96, 128] {
            for w in [0, 32, 64, 96, 128] {
                for p in [0, 32, 64, 96, 128, 256] {
                    batch.push((n, w, p));
                }
            }
        }
        let mut nvidia = Vec::new();
        for i in [48, 96, 192] {
            for v in [16, 32, 64] {
                for w in std::iter::once(0).chain(3..=96) {
                    nvidia.push((i, v, w));
                }
            }
        }
        let mut amd = Vec::new();
        for i in [96, 192, 384, 768] {
            for l in [4, 8, 16, 32, 64, 128] {
                amd.push((i, l));
            }
        }
        SearchSpace {
            nvidia,
            amd,
            fifo: (1..=512).collect(),
            lru: (1..=512).collect(),
            direct: (1..=1024).collect(),
            set_assoc,
            batch,
            segment_lengths: (3, 4096),
        }
    }

    fn caches(&self) -> Vec<Cache> {
        let mut c = Vec::new();
        c.extend(self.fifo.iter().map(|&size| Cache::Fifo { size }));
        c.extend(self.lru.iter().map(|&size| Cache::Lru { size }));
        c.extend(self.direct.iter().map(|&slots| Cache::Direct { slots }));
        c.extend(
            self.set_assoc
                .iter()
                .map(|&(sets, ways)| Cache::SetAssoc { sets, ways }),
        );
        c
    }

    /// The segment lengths searched with `cache`: a FIFO or LRU of more entries than a segment
    /// has indices (or a set-associative cache with more ways) never evicts within a segment,
    /// so it is the same model as one of exactly that many entries, for every input; those
    /// duplicates are left out (lengths start at the cache's entries, or ways).
    fn lengths_for(&self, cache: Cache) -> Option<(u32, u32)> {
        let (lo, hi) = self.segment_lengths;
        let floor = match cache {
            Cache::Fifo { size } | Cache::Lru { size } => size,
            Cache::SetAssoc { ways, .. } => ways,
            Cache::Direct { .. } => 0,
        };
        let lo = lo.max(floor).max(3);
        (lo <= hi).then_some((lo, hi))
    }

    fn work(&self) -> Vec<Work> {
        let start = |what| Work {
            what,
            score: Score::default(),
            next: 0,
        };
        let caches = self.caches();
        let mut work: Vec<Work> = Vec::new();
        work.extend(caches.iter().map(|&c| start(What::Single(unsegmented(c)))));
        work.extend(
            self.batch.iter().map(|&(cache, warp, group)| {
                start(What::Single(Model::Batch { cache, warp, group }))
            }),
        );
        work.extend(self.nvidia.iter().map(|&(indices, vertices, window)| {
            start(What::Single(Model::Nvidia {
                indices,
                vertices,
                window,
            }))
        }));
        work.extend(
            self.amd
                .iter()
                .map(|&(indices, size)| start(What::Single(Model::Amd { indices, size }))),
        );
        for &cache in &caches {
            if let Some((lo, hi)) = self.lengths_for(cache) {
                work.push(start(What::Group { cache, lo, hi }));
            }
        }
        work
    }

    /// Number of candidate models. A segmented FIFO or LRU with more entries than its segment
    /// has indices (a set-associative one with more ways) is not a candidate: it never evicts
    /// within a segment, so it is the same model as one with exactly that many entries.
    pub fn candidates(&self) -> u64 {
        self.work()
            .iter()
            .map(|w| match w.what {
                What::Single(_) => 1,
                What::Group { lo, hi, .. } => u64::from(hi - lo + 1),
            })
            .sum()
    }
}

fn unsegmented(cache: Cache) -> Model {
    match cache {
        Cache::Fifo { size } => Model::Fifo { size },
        Cache::Lru { size } => Model::Lru { size },
        Cache::Direct { slots } => Model::Direct { slots },
        Cache::SetAssoc { sets, ways } => Model::SetAssoc { sets, ways },
    }
}

/// One kept candidate (or a group of segmented candidates that score the same on every probe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fitted {
    /// The model (for a group, the one with the shortest segment).
    pub model: Model,
    /// For a group: every segment length in `lo..=hi` with the same cache scores the same
    /// (they are indistinguishable on this battery).
    pub same_for_lengths: Option<(u32, u32)>,
    /// Its score over the whole battery.
    pub score: Score,
}

impl Fitted {
    /// Models this entry stands for.
    pub fn count(&self) -> u64 {
        self.same_for_lengths
            .map_or(1, |(lo, hi)| u64::from(hi - lo + 1))
    }
}

impl fmt::Display for Fitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.model)?;
        if let Some((lo, hi)) = self.same_for_lengths {
            write!(f, " (and every segment length {lo}..={hi})")?;
        }
        Ok(())
    }
}

/// What the fit found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitResult {
    /// Every model with zero mismatching vertices over the whole battery, ordered by total
    /// difference (0) then text form.
    pub exact: Vec<Fitted>,
    /// The best models that are not exact among the shortlist (see [`fit`]): `near_misses` of
    /// them plus every model tied with the last, best first.
    pub near: Vec<Fitted>,
    /// The best shortlisted near miss of each model family (segmented models by their cache's
    /// family: `seg/dm`, ...), best first: the family's model that matched the longest prefix
    /// of the battery, scored over the whole battery.
    pub best_per_family: Vec<Fitted>,
    /// Candidate models in the space.
    pub candidates: u64,
    /// Probe simulations run (one model over one probe).
    pub simulations: u64,
}

/// Progress of a fit, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FitProgress {
    /// Work items done.
    pub done: u64,
    /// Work items in all.
    pub total: u64,
}

/// Why a fit could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    /// Not one count list per probe.
    #[error("{measured} measured count lists for {probes} probes")]
    ProbeCount {
        /// Probes in the battery.
        probes: usize,
        /// Count lists given.
        measured: usize,
    },
    /// A count list does not have one entry per vertex of its probe.
    #[error("probe {probe} ({name}) has {vertices} vertices but {counts} measured counts")]
    VertexCount {
        /// Position of the probe.
        probe: usize,
        /// Its name.
        name: String,
        /// Its vertex count.
        vertices: u32,
        /// Counts given.
        counts: usize,
    },
    /// The battery is empty.
    #[error("the battery has no probes")]
    Empty,
}

#[derive(Debug, Clone, Copy)]
enum What {
    Single(Model),
    /// `seg:L/cache` for every L in lo..=hi.
    Group {
        cache: Cache,
        lo: u32,
        hi: u32,
    },
}

#[derive(Debug, Clone, Copy)]
struct Work {
    what: What,
    score: Score,
    /// Position in the probe order of the next probe to run.
    next: usize,
}

struct Search<'a> {
    probes: Vec<&'a Probe>,
    measured: Vec<&'a [u32]>,
    memo: HashMap<(Cache, usize), Score>,
    simulations: u64,
    /// Exact fits found.
    done: Vec<Work>,
    /// Per-vertex counts of the simulation running.
    scratch: Vec<u32>,
    /// Single models pruned, the furthest along first (kept: `died_wanted`).
    died: Vec<Work>,
    died_wanted: usize,
    /// The furthest-along pruned single model of each family (segmented ones by their cache's
    /// family), first found on ties.
    died_by_family: BTreeMap<String, Work>,
}

impl Search<'_> {
    fn run(&mut self, model: &Model, probe: usize) -> Score {
        self.simulations += 1;
        let p = self.probes[probe];
        let counts = &mut self.scratch;
        counts.clear();
        counts.resize(p.vertex_count() as usize, 0);
        model
            .simulator(p.vertex_count())
            .feed_indices(p.indices(), Some(counts));
        Score::of(counts, self.measured[probe])
    }

    fn run_cache(&mut self, cache: Cache, probe: usize) -> Score {
        if let Some(&s) = self.memo.get(&(cache, probe)) {
            return s;
        }
        let s = self.run(&unsegmented(cache), probe);
        self.memo.insert((cache, probe), s);
        s
    }

    /// Runs `work` over probe `work.next` (splitting groups); returns what continues.
    fn step(&mut self, work: Work, out: &mut Vec<Work>) {
        let p = work.next;
        let n = self.probes[p].indices().len() as u32;
        match work.what {
            What::Single(model) => {
                let score = work.score.add(self.run(&model, p));
                out.push(Work {
                    what: work.what,
                    score,
                    next: p + 1,
                });
            }
            What::Group { cache, lo, hi } => {
                // Lengths below n see a boundary in this probe: each on its own from here.
                for length in lo..=hi.min(n.saturating_sub(1)) {
                    let model = Model::Segmented { length, cache };
                    let score = work.score.add(self.run(&model, p));
                    out.push(Work {
                        what: What::Single(model),
                        score,
                        next: p + 1,
                    });
                }
                if hi >= n {
                    let score = work.score.add(self.run_cache(cache, p));
                    out.push(Work {
                        what: What::Group {
                            cache,
                            lo: lo.max(n),
                            hi,
                        },
                        score,
                        next: p + 1,
                    });
                }
            }
        }
    }

    fn record_death(&mut self, work: Work) {
        if self.died_wanted == 0 || !matches!(work.what, What::Single(_)) {
            return;
        }
        // Furthest along first, then best score.
        let key = |w: &Work| (std::cmp::Reverse(w.next), w.score);
        if let What::Single(model) = work.what {
            let family = family_name(&model);
            match self.died_by_family.get(&family) {
                Some(best) if key(best) <= key(&work) => {}
                _ => {
                    self.died_by_family.insert(family, work);
                }
            }
        }
        let at = self.died.partition_point(|d| key(d) <= key(&work));
        if at < self.died_wanted {
            self.died.insert(at, work);
            self.died.truncate(self.died_wanted);
        }
    }

    /// Runs `work` depth first to the end of the battery, or until it (or a model split from
    /// it) mismatches.
    fn finish(&mut self, work: Work) {
        let mut stack = vec![work];
        let mut next = Vec::new();
        while let Some(w) = stack.pop() {
            if !w.score.is_exact() {
                self.record_death(w);
                continue;
            }
            if w.next == self.probes.len() {
                self.done.push(w);
                continue;
            }
            self.step(w, &mut next);
            // Keep the best first on top of the stack.
            stack.append(&mut next);
        }
    }

    /// Runs `work` to the end with no pruning; its final score.
    fn run_to_end(&mut self, mut work: Work) -> Score {
        let mut out = Vec::new();
        while work.next < self.probes.len() {
            self.step(work, &mut out);
            work = out.pop().expect("a single continues as itself");
            out.clear();
        }
        work.score
    }
}

/// Near misses shortlisted per near miss wanted (see [`fit`]).
pub const SHORTLIST: usize = 4;

/// Fits the models of `space` to `measured` (one count list per probe of `battery`, one count
/// per vertex). Keeps every exact fit and at least `near_misses` of the best other models (with
/// all their ties). Calls `progress` now and then.
///
/// Two passes: (1) every candidate over the probes, shortest first, until its first mismatching
/// vertex: the ones that reach the end are the exact fits (exhaustive over the space); the
/// `SHORTLIST x near_misses` that got furthest before mismatching are remembered, and the one
/// that got furthest in each family; (2) those are run over the whole battery and the best
/// `near_misses` of them (and every model tied with the last) are the near misses. Near misses are thus the best of the models that matched the
/// longest prefix of the battery, not of the whole space: an exhaustive ranking of misses would
/// run most of the space over most of the battery.
pub fn fit(
    battery: &Battery,
    measured: &[Vec<u32>],
    space: &SearchSpace,
    near_misses: u64,
    mut progress: Option<&mut dyn FnMut(FitProgress)>,
) -> Result<FitResult, FitError> {
    let probes = battery.probes();
    if probes.is_empty() {
        return Err(FitError::Empty);
    }
    if probes.len() != measured.len() {
        return Err(FitError::ProbeCount {
            probes: probes.len(),
            measured: measured.len(),
        });
    }
    for (i, (p, m)) in probes.iter().zip(measured).enumerate() {
        if p.vertex_count() as usize != m.len() {
            return Err(FitError::VertexCount {
                probe: i,
                name: p.name().to_owned(),
                vertices: p.vertex_count(),
                counts: m.len(),
            });
        }
    }
    // Shortest probes first (stable: battery order among equals).
    let mut order: Vec<usize> = (0..probes.len()).collect();
    order.sort_by_key(|&i| probes[i].indices().len());
    let near_wanted = near_misses.max(1);
    let mut search = Search {
        probes: order.iter().map(|&i| &probes[i]).collect(),
        measured: order.iter().map(|&i| measured[i].as_slice()).collect(),
        memo: HashMap::new(),
        simulations: 0,
        done: Vec::new(),
        scratch: Vec::new(),
        died: Vec::new(),
        died_wanted: SHORTLIST * near_wanted as usize,
        died_by_family: BTreeMap::new(),
    };
    let work = space.work();
    let total = work.len() as u64 + 1;
    let mut report = |done: u64| {
        if let Some(p) = progress.as_deref_mut() {
            p(FitProgress { done, total });
        }
    };
    report(0);
    // Pass 1: exact fits only.
    for (i, w) in work.iter().enumerate() {
        search.finish(*w);
        if i % 256 == 0 {
            report(i as u64);
        }
    }
    // Pass 2: the shortlist of near misses, each run over the whole battery.
    let mut died = std::mem::take(&mut search.died);
    let family_best: Vec<Work> = std::mem::take(&mut search.died_by_family)
        .into_values()
        .collect();
    for w in &family_best {
        if !died.iter().any(|d| same_model(d, w)) {
            died.push(*w);
        }
    }
    let mut scored: Vec<Fitted> = died
        .into_iter()
        .map(|w| {
            let model = match w.what {
                What::Single(model) => model,
                What::Group { .. } => unreachable!("only single models are shortlisted"),
            };
            Fitted {
                model,
                same_for_lengths: None,
                score: search.run_to_end(w),
            }
        })
        .collect();
    scored.sort_by(|a, b| match a.score.cmp(&b.score) {
        Ordering::Equal => order_key(&a.model).cmp(&order_key(&b.model)),
        o => o,
    });
    let mut best_per_family: Vec<Fitted> = Vec::new();
    for f in &scored {
        let family = family_name(&f.model);
        if !best_per_family
            .iter()
            .any(|b| family_name(&b.model) == family)
        {
            best_per_family.push(f.clone());
        }
    }
    let mut near = scored;
    if let Some(last) = near.get(near_wanted as usize - 1).map(|f| f.score) {
        near.retain(|f| f.score <= last);
    }
    report(total);
    let mut exact: Vec<Fitted> = search
        .done
        .iter()
        .map(|w| match w.what {
            What::Single(model) => Fitted {
                model,
                same_for_lengths: None,
                score: w.score,
            },
            What::Group { cache, lo, hi } => Fitted {
                model: Model::Segmented { length: lo, cache },
                same_for_lengths: Some((lo, hi)),
                score: w.score,
            },
        })
        .collect();
    exact.sort_by_key(|f| order_key(&f.model));
    Ok(FitResult {
        exact,
        near,
        best_per_family,
        candidates: space.candidates(),
        simulations: search.simulations,
    })
}

fn same_model(a: &Work, b: &Work) -> bool {
    matches!((a.what, b.what), (What::Single(x), What::Single(y)) if x == y)
}

/// The family's name of a model; a segmented model's is `seg/` and its cache's.
fn family_name(model: &Model) -> String {
    match *model {
        Model::Segmented { cache, .. } => format!("seg/{}", unsegmented(cache).family().name()),
        m => m.family().name().to_owned(),
    }
}

/// A total order on models for reports: the text form, numbers compared as numbers.
fn order_key(model: &Model) -> Vec<Result<u64, String>> {
    let text = model.to_string();
    let mut key = Vec::new();
    let mut cur = String::new();
    let mut digits = false;
    for ch in text.chars() {
        let d = ch.is_ascii_digit();
        if !cur.is_empty() && d != digits {
            key.push(piece(&cur, digits));
            cur.clear();
        }
        digits = d;
        cur.push(ch);
    }
    if !cur.is_empty() {
        key.push(piece(&cur, digits));
    }
    key
}

fn piece(s: &str, digits: bool) -> Result<u64, String> {
    if digits {
        Ok(s.parse().unwrap_or(u64::MAX))
    } else {
        Err(s.to_owned())
    }
}

/// The per-probe comparison of one model against the measurement: `(probe name, score)` for
/// every probe where the model differs.
pub fn explain(battery: &Battery, measured: &[Vec<u32>], model: &Model) -> Vec<(String, Score)> {
    battery
        .probes()
        .iter()
        .zip(measured)
        .filter_map(|(p, m)| {
            let s = Score::of(&model.simulate(&p.mesh()), m);
            (!s.is_exact()).then(|| (p.name().to_owned(), s))
        })
        .collect()
}
