//! Cache models: each simulates exactly, per vertex, how many times a GPU would run the vertex
//! shader for each vertex of a mesh, fed every index in order as the hardware is (degenerate
//! triangles included). Every model is a value with parameters and a stable text form
//! (`fifo:16`, `lru:32`, ...) used by the CLI, the C ABI and files.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use crate::Mesh;

/// A post-transform vertex cache model.
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

/// Largest cache size a model accepts (entries); larger values are refused when parsed.
pub const MAX_ENTRIES: u32 = 1 << 16;

impl Model {
    /// Vertex-shader invocations of each vertex of `mesh` under this model (one entry per
    /// vertex; unreferenced vertices get 0).
    pub fn simulate(&self, mesh: &Mesh<'_>) -> Vec<u32> {
        let mut counts = vec![0u32; mesh.vertex_count() as usize];
        match *self {
            Model::Fifo { size } => {
                let size = size.max(1) as usize;
                let mut fifo: VecDeque<u32> = VecDeque::with_capacity(size);
                for &i in mesh.indices() {
                    if !fifo.contains(&i) {
                        counts[i as usize] += 1;
                        if fifo.len() == size {
                            fifo.pop_front();
                        }
                        fifo.push_back(i);
                    }
                }
            }
            Model::Lru { size } => {
                let size = size.max(1) as usize;
                // Most recent last.
                let mut lru: Vec<u32> = Vec::with_capacity(size);
                for &i in mesh.indices() {
                    if let Some(p) = lru.iter().position(|&v| v == i) {
                        lru.remove(p);
                    } else {
                        counts[i as usize] += 1;
                        if lru.len() == size {
                            lru.remove(0);
                        }
                    }
                    lru.push(i);
                }
            }
        }
        counts
    }

    /// Total vertex-shader invocations of `mesh` under this model.
    pub fn invocations(&self, mesh: &Mesh<'_>) -> u64 {
        self.simulate(mesh).iter().map(|&c| u64::from(c)).sum()
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Model::Fifo { size } => write!(f, "fifo:{size}"),
            Model::Lru { size } => write!(f, "lru:{size}"),
        }
    }
}

fn parse_entries(text: &str, field: &str, whole: &str) -> Result<u32, ParseModelError> {
    let bad = |reason: String| ParseModelError {
        text: whole.to_owned(),
        reason,
    };
    let n: u32 = field
        .trim()
        .parse()
        .map_err(|e| bad(format!("{text} {field:?} is not a number ({e})")))?;
    if n == 0 || n > MAX_ENTRIES {
        return Err(bad(format!("{text} {n} is not in 1..={MAX_ENTRIES}")));
    }
    Ok(n)
}

impl FromStr for Model {
    type Err = ParseModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, args) = s.split_once(':').ok_or_else(|| ParseModelError {
            text: s.to_owned(),
            reason: "expected KIND:PARAMETERS, e.g. fifo:16".into(),
        })?;
        match kind.trim() {
            "fifo" => Ok(Model::Fifo {
                size: parse_entries("size", args, s)?,
            }),
            "lru" => Ok(Model::Lru {
                size: parse_entries("size", args, s)?,
            }),
            other => Err(ParseModelError {
                text: s.to_owned(),
                reason: format!("unknown model kind {other:?}"),
            }),
        }
    }
}
