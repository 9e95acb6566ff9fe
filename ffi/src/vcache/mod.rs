//! `gpusvc_vcache_*`: the post-transform vertex cache (the `vertex-cache` crate) seen from C:
//! cache models as plain structs or text (`fifo:16`, `seg:96/lru:32`, ...), the analysis of a
//! mesh's draw under a model (ACMR, ATVR, per-vertex invocations), counts measured on the
//! driver of a `gpusvc_gl_context`, and the statistics of measured counts.
//!
//! Models are values (`gpusvc_vcache_model`), checked wherever they are passed in; meshes are
//! `(indices, index_count, vertex_count)` triangle lists, borrowed for the call and checked
//! (whole triangles, indices below the vertex count, sizes within `GPUSVC_VCACHE_MAX_*`).
//! Nothing keeps a pointer into the caller's memory. The functions without a GL context may be
//! called from any thread; the GL ones run on the context's thread.
//!
//! * [`types`]: the C structs and families, the checked arguments and the crate's errors as
//!   codes;
//! * [`exports`]: models and analyses;
//! * `gl`: measuring on a GL context (the `gl` feature).

pub(crate) mod exports;
#[cfg(feature = "gl")]
pub(crate) mod gl;
pub(crate) mod types;

pub use exports::*;
#[cfg(feature = "gl")]
pub use gl::*;
pub use types::*;
