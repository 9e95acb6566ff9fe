//! `corpus`: GLSL programs to feed a program cache — real ones from piglit, and a small
//! built-in set generated in code.
//!
//! * [`parse_shader_test`] reads one piglit `.shader_test` file: the `[require]` section's GLSL
//!   requirement (`GLSL >= 1.50`, `GLSL ES >= 3.00`) and extensions, and the sources of its
//!   stage sections: a graphics program (vertex + fragment, plus geometry and tessellation
//!   stages when present) or a compute program (`[compute shader]` alone). Files this crate
//!   cannot turn into one program are a typed [`Skip`]: `[vertex shader passthrough]` (no
//!   source), compute beside graphics stages, ARB assembly programs, sources in external files,
//!   several shaders of one stage, a missing or empty stage, or an `rlimit` requirement (files
//!   built to exhaust the compiler's memory, which piglit runs under an address-space limit).
//! * [`load_dir`] loads every `*.shader_test` below a directory into a [`LoadedCorpus`]:
//!   vertex + fragment programs, programs with more stages, and compute programs, in three lists.
//! * [`glmark2::load_dir`] makes glmark2's shader templates (Debian `glmark2-data`) into the
//!   programs glmark2's scenes build, translated to `#version 330 core` or `#version 300 es`.
//! * [`builtin`] generates [`BUILTIN_PROGRAMS`] distinct programs (varied float attributes of 1 to
//!   4 components, scalar / vector / matrix / struct uniforms, uniform arrays) in desktop GLSL
//!   3.30 core or GLSL ES 3.00 — the corpus a demo runs with when no piglit tree is at hand.
//! * [`spread`] and [`dedup_sources`] pick a deterministic, evenly spread sample and drop
//!   programs that repeat an earlier one's sources.
//!
//! # Guarantees
//! * Deterministic: the same tree gives the same programs in the same order (files are visited
//!   in byte order of their names, directory by directory), and [`builtin`] always generates the
//!   same sources. Program names are paths relative to the loaded root with `/` separators.
//! * Shader sources are the section text verbatim (comments, blank lines and `#version` lines
//!   included), so a driver sees what piglit's own runner would pass it.
//! * glmark2's programs are each distinct (no two share both sources), and every one compiles
//!   and links on Mesa's llvmpipe in both dialects (`tests/glmark2_driver.rs`).
//! * Nothing here compiles anything: whether the driver accepts a program is for the caller to
//!   find out (many piglit programs are meant to fail).
//!
//! # Errors
//! Parsing never fails on odd input: what cannot be used is a [`Skip`] with its reason. Loading
//! fails with [`LoadError`] only when a directory or file cannot be read; a file that is not
//! UTF-8 is skipped ([`Skip::NotUtf8`]). Symbolic links are not followed, so a link cycle cannot
//! make a load loop. [`glmark2::load_dir`] fails with [`glmark2::Glmark2Error`] when a template
//! its scenes use is missing, a link, unreadable, over 1 MiB, not UTF-8, or lacks the `$TOKEN$`
//! its scene fills.
//!
//! # Thread safety
//! Everything is plain owned data (`Send + Sync`); functions hold no global state.

mod builtin;
pub mod glmark2;
mod piglit;
mod select;

pub use builtin::{BUILTIN_PROGRAMS, Dialect, builtin};
pub use piglit::{LoadError, LoadedCorpus, Parsed, Skip, SkippedFile, load_dir, parse_shader_test};
pub use select::{dedup_sources, spread};

use std::fmt;

/// A GLSL language version as `[require]` writes it: `1.50` is major 1, minor 50.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GlslVersion {
    /// Major version.
    pub major: u8,
    /// Minor version in hundredths (`1.50` -> 50, `4.5` -> 50).
    pub minor: u8,
}

impl GlslVersion {
    /// Makes a version; `minor` in hundredths.
    pub const fn new(major: u8, minor: u8) -> Self {
        GlslVersion { major, minor }
    }

    /// The number `#version` uses: `1.50` -> 150.
    pub fn number(self) -> u32 {
        u32::from(self.major) * 100 + u32::from(self.minor)
    }

    /// Parses `1.50`, `4.5` (one digit means tenths) or `3.00`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.trim().split_once('.')?;
        if major.is_empty()
            || minor.is_empty()
            || minor.len() > 2
            || !major
                .bytes()
                .chain(minor.bytes())
                .all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let scale = if minor.len() == 1 { 10 } else { 1 };
        Some(GlslVersion {
            major: major.parse().ok()?,
            minor: minor.parse::<u8>().ok()? * scale,
        })
    }
}

impl fmt::Display for GlslVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.major, self.minor)
    }
}

/// One program: a vertex and a fragment shader, and optionally geometry and tessellation
/// stages. `Default` is an empty, unnamed program, so constructions can name only what they set
/// (`..ProgramSource::default()`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ProgramSource {
    /// Where it came from: a path relative to the loaded root (`spec/glsl-1.10/.../x.shader_test`)
    /// or `builtin/NN-...`.
    pub name: String,
    /// Vertex shader source.
    pub vertex: String,
    /// Fragment shader source.
    pub fragment: String,
    /// Geometry shader source, when the program has that stage.
    pub geometry: Option<String>,
    /// Tessellation control shader source, when the program has that stage.
    pub tess_control: Option<String>,
    /// Tessellation evaluation shader source, when the program has that stage.
    pub tess_evaluation: Option<String>,
    /// The GLSL version `[require]` asks for (`GLSL >= x.yz` or `GLSL ES >= x.yz`), if any.
    pub glsl: Option<GlslVersion>,
    /// True when the program is for OpenGL ES (`GLSL ES >= ...` or `GL ES >= ...`).
    pub es: bool,
    /// Extensions `[require]` lists (`GL_ARB_...`), in file order.
    pub extensions: Vec<String>,
}

impl ProgramSource {
    /// True when the program has a geometry or tessellation stage.
    pub fn has_other_stages(&self) -> bool {
        self.geometry.is_some() || self.tess_control.is_some() || self.tess_evaluation.is_some()
    }
}

/// One compute program (piglit's `[compute shader]` files).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ComputeSource {
    /// A path relative to the loaded root.
    pub name: String,
    /// Compute shader source.
    pub compute: String,
    /// The GLSL version `[require]` asks for, if any.
    pub glsl: Option<GlslVersion>,
    /// True when the program is for OpenGL ES.
    pub es: bool,
    /// Extensions `[require]` lists, in file order.
    pub extensions: Vec<String>,
}
