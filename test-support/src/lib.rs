//! `test_support`: what the workspace's tests, benches and examples share, so that each rule is
//! written once (never published; a dev-dependency only).
//!
//! * [`gl`] (feature `gl`): the two rules every GL test follows — never skip silently (with no
//!   driver a test skips with a reason, or fails when `GPUSVC_REQUIRE_GL` is set) and a fresh Mesa
//!   shader cache per test process.
//! * [`fake_driver`] and [`programs`] (feature `program-cache`): one recording fake
//!   [`ProgramBackend`](program_cache::ProgramBackend) with behaviour knobs, a counting wrapper
//!   for any backend, and synthetic keys and cache entries.
//! * [`shaders`]: the GLSL bodies several GL tests draw with.
//! * [`cli`]: running a built binary and reading the tables and sentences it prints.
//! * [`mount`]: a private mount namespace for tests that mount something (root only).
//! * [`rng`]: a small deterministic generator for choosing actions.
//!
//! # Errors
//! Helpers that can fail for a reason outside the test's control return `Err` or `None` with the
//! reason; the ones that read a test's own output panic with what they looked for and the text,
//! which is what a test wants.
//!
//! # Thread safety
//! Everything here is plain data or per-call work, except [`gl::isolate_shader_cache`], which sets
//! an environment variable once per process (see its SAFETY note).

pub mod cli;
#[cfg(feature = "program-cache")]
pub mod fake_driver;
#[cfg(feature = "gl")]
pub mod gl;
pub mod mount;
#[cfg(feature = "program-cache")]
pub mod programs;
pub mod rng;
pub mod shaders;
