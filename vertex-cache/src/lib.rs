//! The post-transform vertex cache: how many times a GPU runs the vertex shader for each vertex
//! of an indexed draw, and how to order indices so that it runs it less.
//!
//! * [`Mesh`]: a triangle index list over a vertex count, validated.
//! * [`analyze`]: ACMR (invocations per triangle), ATVR (invocations per referenced vertex) and
//!   totals from per-vertex invocation counts, simulated or measured.
//! * [`Model`]: exact cache models with stable text forms (`fifo:16`, `lru:32`, ...).
//!
//! Pure Rust, no GL: measuring a real driver lives beside it.

pub mod battery;
pub mod fit;
mod mesh;
#[cfg(feature = "gl")]
pub mod measure;
mod model;
mod optimize;
mod sim;
mod stats;

pub use mesh::{Mesh, MeshError};
pub use model::{Cache, Family, MAX_ENTRIES, MAX_SEGMENT, Model, ParseModelError};
pub use optimize::{Choice, Optimized, greedy, optimize, optimize_with_report};
pub use sim::Simulator;
pub use stats::{Analysis, analyze};
