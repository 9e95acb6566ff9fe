//! Cache models: each simulates exactly, per vertex, how many times a GPU would run the vertex
//! shader for each vertex of a mesh, fed every index in order as the hardware is (degenerate
//! triangles included). Every model is a value with parameters and a stable text form
//! (`fifo:16`, `lru:32`, ...) used by the CLI, the C ABI and files.

use std::fmt;
use std::str::FromStr;

use crate::Mesh;

/// A post-transform vertex cache model. Every model is exact per vertex and has a stable text
/// form ([`Display`](fmt::Display) writes it, [`FromStr`] reads it back; numbers are plain
/// decimal, no spaces, no signs):
///
/// | text | model |
/// | --- | --- |
/// | `fifo:N` | [`Model::Fifo`], N in 1..=[`MAX_ENTRIES`] |
/// | `lru:N` | [`Model::Lru`], N in 1..=[`MAX_ENTRIES`] |
/// | `dm:M` | [`Model::Direct`], M in 1..=[`MAX_ENTRIES`] |
/// | `sa:SxW` | [`Model::SetAssoc`], S, W >= 1, S·W <= [`MAX_ENTRIES`] |
/// | `seg:L/CACHE` | [`Model::Segmented`], L in 3..=[`MAX_SEGMENT`] indices, CACHE one of the four above |
/// | `batch:N,W,P` | [`Model::Batch`], N in 3..=[`MAX_ENTRIES`], W 0 or 3..=[`MAX_ENTRIES`], P 0 or 1..=[`MAX_ENTRIES`] |
/// | `nvidia:I,V,R` | [`Model::Nvidia`], I and V in 3..=[`MAX_ENTRIES`], R 0 or 3..=[`MAX_ENTRIES`] (Kerbl et al.: `nvidia:96,32,0`) |
/// | `amd:I,N` | [`Model::Amd`], I in 3..=[`MAX_SEGMENT`], N in 1..=[`MAX_ENTRIES`] (Kerbl et al.: I = 384) |
///
/// Kinds are lower case; anything else (spaces, signs, `0x`, a missing or extra part, a
/// number out of range) is a [`ParseModelError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    /// A FIFO of `size` vertices, per index: a miss shades the vertex and pushes it, evicting
    /// the oldest entry when full; a hit changes nothing. Text form `fifo:SIZE`.
    Fifo {
        /// Entries (>= 1).
        size: u32,
    },
    /// An LRU of `size` vertices, per index: a hit makes the vertex most recent; a miss shades
    /// it and inserts it as most recent, evicting the least recent when full. Text form
    /// `lru:SIZE`.
    Lru {
        /// Entries (>= 1).
        size: u32,
    },
    /// Direct-mapped, per index: vertex `v` can only live in slot `v mod slots`; a miss shades
    /// it and replaces whatever the slot held. Text form `dm:SLOTS`.
    Direct {
        /// Slots (>= 1).
        slots: u32,
    },
    /// Set-associative, per index: vertex `v` lives in set `v mod sets`, which holds `ways`
    /// vertices replaced least-recently-used first (an empty way before any). Text form
    /// `sa:SETSxWAYS` (`sa:1xN` is `lru:N`, `sa:Mx1` is `dm:M`).
    SetAssoc {
        /// Sets (>= 1).
        sets: u32,
        /// Ways per set (>= 1).
        ways: u32,
    },
    /// A cache emptied every `length` indices: the index stream is cut into segments of exactly
    /// `length` indices counted from the start of the draw (not triangles: with a length that
    /// is not a multiple of 3 a triangle can straddle two segments), each starting with an empty
    /// `cache`. Text form `seg:LENGTH/CACHE`, e.g. `seg:96/fifo:32`.
    Segmented {
        /// Indices per segment (>= 3).
        length: u32,
        /// The replacement rule within a segment.
        cache: Cache,
    },
    /// meshoptimizer's analyzer model (`meshopt_analyzeVertexCache`): a FIFO of `cache`
    /// vertices; before each triangle, the vertices of the open warp and the triangles of the
    /// open primitive group are checked: if the group already holds `group` triangles, or the
    /// warp would exceed `warp` vertices with the triangle's misses (counted before it runs:
    /// a repeated corner counts twice), the warp is closed and the cache emptied. `warp` or
    /// `group` 0 means no such limit (`batch:N,0,0` is `fifo:N`). Decides per triangle. Text
    /// form `batch:CACHE,WARP,GROUP`.
    Batch {
        /// FIFO entries (>= 3).
        cache: u32,
        /// Vertices per warp (0: unlimited, else >= 3).
        warp: u32,
        /// Triangles per primitive group (0: unlimited).
        group: u32,
    },
    /// NVIDIA's batching as Kerbl et al. (HPG 2018, "Revisiting The Vertex Cache") describe it:
    /// the draw is cut into batches of whole triangles, a triangle starting a new batch when it
    /// would make the batch longer than `indices` indices or need more than `vertices` shaded
    /// vertices; a vertex is shaded once per batch and reused only within its batch, and with a
    /// `window` only when its last reference is among the last `window` indices (a CAM over
    /// recent indices; 0: the whole batch). A vertex re-shaded because it left the window counts
    /// as a new vertex of the batch. Decides per triangle. The published figures (GTX 1080 Ti):
    /// 96 indices, 32 vertices; the window's size is not published and is a parameter here.
    /// Text form `nvidia:INDICES,VERTICES,WINDOW`.
    Nvidia {
        /// Indices per batch (>= 3).
        indices: u32,
        /// Shaded vertices per batch (>= 3).
        vertices: u32,
        /// Recency window in indices (0: the whole batch; else >= 3).
        window: u32,
    },
    /// AMD's reuse as Kerbl et al. describe it: an LRU of `size` vertices, emptied when a
    /// triangle would make the batch longer than `indices` indices (batches are whole
    /// triangles; with `indices` a multiple of 3 this is `seg:INDICES/lru:SIZE`). Published:
    /// 384 indices on an R7 200; the LRU size is a parameter. Text form `amd:INDICES,SIZE`.
    Amd {
        /// Indices per batch (>= 3).
        indices: u32,
        /// LRU entries (>= 1).
        size: u32,
    },
}

/// A replacement rule for one cache, the part of a [`Model::Segmented`] inside a segment. Text
/// forms as the [`Model`]s of the same name: `fifo:N`, `lru:N`, `dm:M`, `sa:SxW`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cache {
    /// As [`Model::Fifo`].
    Fifo {
        /// Entries (>= 1).
        size: u32,
    },
    /// As [`Model::Lru`].
    Lru {
        /// Entries (>= 1).
        size: u32,
    },
    /// As [`Model::Direct`].
    Direct {
        /// Slots (>= 1).
        slots: u32,
    },
    /// As [`Model::SetAssoc`].
    SetAssoc {
        /// Sets (>= 1).
        sets: u32,
        /// Ways per set (>= 1).
        ways: u32,
    },
}

/// A model text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad model {text:?}: {reason}")]
pub struct ParseModelError {
    /// The text.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Largest cache size a model accepts (entries, slots, sets × ways, warp vertices, group
/// triangles); larger values are refused when parsed.
pub const MAX_ENTRIES: u32 = 1 << 16;

/// Longest segment a [`Model::Segmented`] accepts (indices).
pub const MAX_SEGMENT: u32 = 1 << 24;

/// The family of a [`Model`]: its kind without parameters (what a fit enumerates over, what a
/// report groups by). [`Family::name`] is the text form's kind (`fifo`, `seg`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// `fifo:N`.
    Fifo,
    /// `lru:N`.
    Lru,
    /// `dm:M`.
    Direct,
    /// `sa:SxW`.
    SetAssoc,
    /// `seg:L/CACHE`.
    Segmented,
    /// `batch:N,W,P`.
    Batch,
    /// `nvidia:I,V,R`.
    Nvidia,
    /// `amd:I,N`.
    Amd,
}

impl Family {
    /// Every family, in text-form order of the [`Model`] docs.
    pub const ALL: [Family; 8] = [
        Family::Fifo,
        Family::Lru,
        Family::Direct,
        Family::SetAssoc,
        Family::Segmented,
        Family::Batch,
        Family::Nvidia,
        Family::Amd,
    ];

    /// The kind in the text form.
    pub fn name(self) -> &'static str {
        match self {
            Family::Fifo => "fifo",
            Family::Lru => "lru",
            Family::Direct => "dm",
            Family::SetAssoc => "sa",
            Family::Segmented => "seg",
            Family::Batch => "batch",
            Family::Nvidia => "nvidia",
            Family::Amd => "amd",
        }
    }

    /// The parameters' names, in text-form order (a segmented model's are its length then its
    /// cache's).
    pub fn parameter_names(self) -> &'static [&'static str] {
        match self {
            Family::Fifo | Family::Lru => &["size"],
            Family::Direct => &["slots"],
            Family::SetAssoc => &["sets", "ways"],
            Family::Segmented => &["length"],
            Family::Batch => &["cache", "warp", "group"],
            Family::Nvidia => &["indices", "vertices", "window"],
            Family::Amd => &["indices", "size"],
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Model {
    /// The model's family.
    pub fn family(&self) -> Family {
        match self {
            Model::Fifo { .. } => Family::Fifo,
            Model::Lru { .. } => Family::Lru,
            Model::Direct { .. } => Family::Direct,
            Model::SetAssoc { .. } => Family::SetAssoc,
            Model::Segmented { .. } => Family::Segmented,
            Model::Batch { .. } => Family::Batch,
            Model::Nvidia { .. } => Family::Nvidia,
            Model::Amd { .. } => Family::Amd,
        }
    }

    /// The parameters as `(name, value)` in text-form order; a segmented model's are
    /// `length` then its cache's, prefixed with the cache's kind (`fifo.size`, `sa.ways`, ...).
    pub fn parameters(&self) -> Vec<(String, u32)> {
        let named = |pairs: &[(&str, u32)]| -> Vec<(String, u32)> {
            pairs.iter().map(|&(n, v)| (n.to_owned(), v)).collect()
        };
        match *self {
            Model::Fifo { size } | Model::Lru { size } => named(&[("size", size)]),
            Model::Direct { slots } => named(&[("slots", slots)]),
            Model::SetAssoc { sets, ways } => named(&[("sets", sets), ("ways", ways)]),
            Model::Segmented { length, cache } => {
                let inner = Model::from(cache);
                let kind = inner.family().name();
                let mut out = named(&[("length", length)]);
                out.extend(
                    inner
                        .parameters()
                        .into_iter()
                        .map(|(n, v)| (format!("{kind}.{n}"), v)),
                );
                out
            }
            Model::Batch { cache, warp, group } => {
                named(&[("cache", cache), ("warp", warp), ("group", group)])
            }
            Model::Nvidia {
                indices,
                vertices,
                window,
            } => named(&[
                ("indices", indices),
                ("vertices", vertices),
                ("window", window),
            ]),
            Model::Amd { indices, size } => named(&[("indices", indices), ("size", size)]),
        }
    }

    /// Vertex-shader invocations of each vertex of `mesh` under this model (one entry per
    /// vertex; unreferenced vertices get 0).
    pub fn simulate(&self, mesh: &Mesh<'_>) -> Vec<u32> {
        let mut counts = vec![0u32; mesh.vertex_count() as usize];
        self.simulator(mesh.vertex_count())
            .feed_indices(mesh.indices(), Some(&mut counts));
        counts
    }

    /// Total vertex-shader invocations of `mesh` under this model.
    pub fn invocations(&self, mesh: &Mesh<'_>) -> u64 {
        self.simulator(mesh.vertex_count())
            .feed_indices(mesh.indices(), None)
    }

    /// Warps (batches) the draw of `mesh` takes, for models that have them (`batch`: equal to
    /// meshoptimizer's `warps_executed`); `None` for the others.
    pub fn warps(&self, mesh: &Mesh<'_>) -> Option<u64> {
        let mut sim = self.simulator(mesh.vertex_count());
        sim.warps()?;
        sim.feed_indices(mesh.indices(), None);
        sim.warps()
    }
}

impl fmt::Display for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cache::Fifo { size } => write!(f, "fifo:{size}"),
            Cache::Lru { size } => write!(f, "lru:{size}"),
            Cache::Direct { slots } => write!(f, "dm:{slots}"),
            Cache::SetAssoc { sets, ways } => write!(f, "sa:{sets}x{ways}"),
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Model::Fifo { size } => Cache::Fifo { size }.fmt(f),
            Model::Lru { size } => Cache::Lru { size }.fmt(f),
            Model::Direct { slots } => Cache::Direct { slots }.fmt(f),
            Model::SetAssoc { sets, ways } => Cache::SetAssoc { sets, ways }.fmt(f),
            Model::Segmented { length, cache } => write!(f, "seg:{length}/{cache}"),
            Model::Batch { cache, warp, group } => write!(f, "batch:{cache},{warp},{group}"),
            Model::Nvidia {
                indices,
                vertices,
                window,
            } => write!(f, "nvidia:{indices},{vertices},{window}"),
            Model::Amd { indices, size } => write!(f, "amd:{indices},{size}"),
        }
    }
}

/// Parses the text of models: keeps the whole text for errors.
struct Parser<'a> {
    whole: &'a str,
}

impl Parser<'_> {
    fn bad(&self, reason: impl Into<String>) -> ParseModelError {
        ParseModelError {
            text: self.whole.to_owned(),
            reason: reason.into(),
        }
    }

    /// A plain decimal number in `min..=max` (or exactly 0 when `zero` is allowed).
    fn number(
        &self,
        what: &str,
        field: &str,
        min: u32,
        max: u32,
        zero: bool,
    ) -> Result<u32, ParseModelError> {
        if field.is_empty() || !field.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.bad(format!("{what} {field:?} is not a decimal number")));
        }
        let n: u32 = field
            .parse()
            .map_err(|_| self.bad(format!("{what} {field} is too large (max {max})")))?;
        if (n == 0 && zero) || (min..=max).contains(&n) {
            Ok(n)
        } else if zero {
            Err(self.bad(format!("{what} {n} is not 0 or in {min}..={max}")))
        } else {
            Err(self.bad(format!("{what} {n} is not in {min}..={max}")))
        }
    }

    /// Exactly `N` comma-separated parts.
    fn parts<'s, const N: usize>(
        &self,
        args: &'s str,
        usage: &str,
    ) -> Result<[&'s str; N], ParseModelError> {
        let parts: Vec<&str> = args.split(',').collect();
        parts.try_into().map_err(|_| self.bad(usage))
    }

    fn entries(&self, what: &str, field: &str) -> Result<u32, ParseModelError> {
        self.number(what, field, 1, MAX_ENTRIES, false)
    }

    fn cache(&self, text: &str) -> Result<Cache, ParseModelError> {
        let (kind, args) = text
            .split_once(':')
            .ok_or_else(|| self.bad(format!("expected KIND:PARAMETERS, got {text:?}")))?;
        match kind {
            "fifo" => Ok(Cache::Fifo {
                size: self.entries("fifo size", args)?,
            }),
            "lru" => Ok(Cache::Lru {
                size: self.entries("lru size", args)?,
            }),
            "dm" => Ok(Cache::Direct {
                slots: self.entries("dm slots", args)?,
            }),
            "sa" => {
                let (sets, ways) = args
                    .split_once('x')
                    .ok_or_else(|| self.bad(format!("sa wants SETSxWAYS, got {args:?}")))?;
                let sets = self.entries("sa sets", sets)?;
                let ways = self.entries("sa ways", ways)?;
                if u64::from(sets) * u64::from(ways) > u64::from(MAX_ENTRIES) {
                    return Err(self.bad(format!(
                        "sa {sets}x{ways} has more than {MAX_ENTRIES} entries"
                    )));
                }
                Ok(Cache::SetAssoc { sets, ways })
            }
            "seg" | "batch" | "nvidia" | "amd" => {
                Err(self.bad(format!("{kind} is not a cache rule inside seg:")))
            }
            other => Err(self.bad(format!("unknown model kind {other:?}"))),
        }
    }
}

impl FromStr for Cache {
    type Err = ParseModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Parser { whole: s }.cache(s)
    }
}

impl From<Cache> for Model {
    fn from(cache: Cache) -> Model {
        match cache {
            Cache::Fifo { size } => Model::Fifo { size },
            Cache::Lru { size } => Model::Lru { size },
            Cache::Direct { slots } => Model::Direct { slots },
            Cache::SetAssoc { sets, ways } => Model::SetAssoc { sets, ways },
        }
    }
}

impl FromStr for Model {
    type Err = ParseModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let p = Parser { whole: s };
        let (kind, args) = s.split_once(':').ok_or_else(|| {
            p.bad("expected KIND:PARAMETERS, e.g. fifo:16, seg:96/lru:32, batch:16,32,0")
        })?;
        match kind {
            "seg" => {
                let (length, cache) = args
                    .split_once('/')
                    .ok_or_else(|| p.bad("seg wants LENGTH/CACHE, e.g. seg:96/fifo:32"))?;
                Ok(Model::Segmented {
                    length: p.number("segment length", length, 3, MAX_SEGMENT, false)?,
                    cache: p.cache(cache)?,
                })
            }
            "batch" => {
                let [cache, warp, group] =
                    p.parts(args, "batch wants CACHE,WARP,GROUP, e.g. batch:16,32,0")?;
                Ok(Model::Batch {
                    cache: p.number("batch cache", cache, 3, MAX_ENTRIES, false)?,
                    warp: p.number("batch warp", warp, 3, MAX_ENTRIES, true)?,
                    group: p.number("batch group", group, 1, MAX_ENTRIES, true)?,
                })
            }
            "nvidia" => {
                let [indices, vertices, window] = p.parts(
                    args,
                    "nvidia wants INDICES,VERTICES,WINDOW, e.g. nvidia:96,32,0",
                )?;
                Ok(Model::Nvidia {
                    indices: p.number("nvidia indices", indices, 3, MAX_ENTRIES, false)?,
                    vertices: p.number("nvidia vertices", vertices, 3, MAX_ENTRIES, false)?,
                    window: p.number("nvidia window", window, 3, MAX_ENTRIES, true)?,
                })
            }
            "amd" => {
                let [indices, size] = p.parts(args, "amd wants INDICES,SIZE, e.g. amd:384,16")?;
                Ok(Model::Amd {
                    indices: p.number("amd indices", indices, 3, MAX_SEGMENT, false)?,
                    size: p.entries("amd size", size)?,
                })
            }
            _ => p.cache(s).map(Model::from),
        }
    }
}
