//! The post-transform vertex cache: how many times a GPU runs the vertex shader for each vertex
//! of an indexed draw, what policy its reuse follows, and how to order indices so that it runs
//! it less.
//!
//! * [`Mesh`]: a triangle index list over a vertex count, validated ([`MeshError`]).
//! * [`analyze`]: ACMR (invocations per triangle), ATVR (invocations per referenced vertex) and
//!   totals from per-vertex invocation counts, simulated or measured.
//! * [`Model`]: exact cache models with stable text forms — `fifo:N`, `lru:N`, `dm:M`
//!   (direct-mapped), `sa:SxW` (set-associative), `seg:L/CACHE` (the index stream cut into
//!   segments of L indices, each starting empty), `batch:N,W,P` (meshoptimizer's analyzer),
//!   `nvidia:I,V,R` and `amd:I,N` (Kerbl et al. 2018). [`Simulator`] feeds indices one at a time.
//! * `measure` (feature `gl`, on by default): per-vertex counts on the real driver through an
//!   SSBO `atomicAdd` in the vertex shader, cross-checked with `GL_VERTEX_SHADER_INVOCATIONS`.
//! * [`battery`] and [`fit`]: a probe battery measured once, then an exhaustive search for the
//!   models that reproduce every vertex's count (on llvmpipe: `seg:1023/dm:256`; on an NVIDIA
//!   H100: `nvidia:96,32,42`).
//! * [`optimize`]: reorders triangles for a model, never worse than the input.
//!
//! Without the `gl` feature the crate links no GL. The optimizer links meshoptimizer (C++,
//! through the `meshopt` crate) for its two baseline orders, which it refines and compares.
//!
//! # Guarantees
//!
//! * Meshes are checked before any model sees them: empty, not whole triangles, an index past
//!   the vertex count are [`MeshError`] values; ACMR and ATVR follow their definitions —
//!   `tests/mesh.rs`.
//! * Every model family simulates per vertex exactly as hand-traced on small cases (fifo, lru,
//!   dm, sa, seg × {fifo, lru, dm, sa}, batch, nvidia, amd; degenerate triangles fed as every
//!   other index) — `tests/models.rs`; the optimized simulator equals plain reference
//!   simulations on random streams —
//!   `simulator_equals_reference_simulations_on_random_streams`; probing a triangle leaves the
//!   state unchanged — `probe_is_feed_without_the_change_and_reset_empties`.
//! * `batch:N,W,P` equals meshopt 0.7 `analyze_vertex_cache` (vertices transformed and warps
//!   executed) and `fifo:N` equals `batch:N,0,0` per vertex, on synthetic meshes and the npm
//!   teapot, bunny and Stanford dragon (res4, res2) — `tests/meshopt_oracle.rs`.
//! * Text forms round-trip; bad text is a [`ParseModelError`] — `text_forms_round_trip`,
//!   `bad_text_is_an_error`.
//! * Measured counts are per vertex, repeatable, equal to the pipeline-statistics query, and the
//!   same for u16, u32 and base-vertex draws and with rasterization discarded; a driver with no
//!   vertex storage blocks gets an error value, never counts — `tests/measure.rs`.
//! * The fit is deterministic and exhaustive for exact fits, ties listed; on the machine's
//!   driver it finds an exact model, which then predicts meshes outside the battery with zero
//!   mismatching vertices — `the_fit_finds_an_exact_model_that_predicts_held_back_meshes`.
//! * [`optimize`] returns a permutation of the input's triangles (corners in input order),
//!   deterministically, with no more invocations under the model than the input,
//!   meshoptimizer's `optimize_vertex_cache` or its Tipsify order — `tests/optimize.rs`.
//!
//! # Errors
//!
//! Bad input is a value: [`MeshError`], [`ParseModelError`], `measure::MeasureError` (no GL
//! 4.3 / GLES 3.2, no vertex storage blocks, a draw too large for its index type, a GL error),
//! [`fit::FitError`]. Nothing here panics on input; [`analyze`] panics only when given counts
//! of another mesh (a caller bug).
//!
//! # Thread safety
//!
//! Models, meshes, batteries and fit results are plain values (`Send + Sync`). A
//! [`Simulator`] is owned by one thread (clone it to share). `measure` needs the GL context
//! current on the calling thread. [`optimize`] may use scoped worker threads for large meshes;
//! its result does not depend on them.

pub mod battery;
pub mod fit;
#[cfg(feature = "gl")]
pub mod measure;
mod mesh;
mod model;
mod optimize;
mod sim;
mod stats;

pub use mesh::{Mesh, MeshError};
pub use model::{Cache, Family, MAX_ENTRIES, MAX_SEGMENT, Model, ParseModelError};
pub use optimize::{Choice, Optimized, greedy, optimize, optimize_with_report};
pub use sim::Simulator;
pub use stats::{Analysis, analyze};
