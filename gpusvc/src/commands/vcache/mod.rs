//! `gpusvc vcache measure|fit|analyze|optimize|plot`: the post-transform vertex cache
//! (`gpusvc-vertex-cache`) on meshes read with `gpusvc-mesh-io`.
//!
//! * [`measure`]: per-vertex vertex-shader invocations of one draw of a mesh on this driver.
//! * [`fit`]: runs the probe battery on this driver, fits a cache model and saves it to a
//!   [model file](model_file).
//! * [`analyze`]: invocations, ACMR and ATVR of a mesh under a model (and measured, optionally).
//! * [`optimize`]: reorders a mesh's triangles for a model and writes it.
//! * [`plot`]: the staircase and the optimizer comparison as SVG and PNG.
//!
//! # Exit status
//! Every subcommand: 0 when it ran; 1 for an error (a mesh that cannot be read or is not a
//! triangle mesh, a model file that cannot be read, an output that cannot be written); 2 for
//! command-line errors (clap's, and a `--model` text that is not a model); 3 when no GL context
//! can be made (for the commands that draw: `measure`, `fit`, `analyze --measure`, `plot`); 4
//! when `measure` saw two draws give different counts or the pipeline-statistics query disagree
//! with the counts, or when `fit` found no exact model. Errors are one line on stderr, starting
//! with `gpusvc vcache <command>:`. A reader that closes stdout early (`| head`) is not an error.

pub(crate) mod analyze;
pub(crate) mod fit;
pub(crate) mod measure;
pub(crate) mod model_file;
pub(crate) mod optimize;
pub(crate) mod plot;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use headless_gl::{ContextError, ContextOptions, GlContext};
use mesh_io::{MeshIoError, TriangleMesh};
use vertex_cache::{Mesh, Model};

/// Exit status: an error (bad input, I/O).
pub(crate) const EXIT_ERROR: u8 = 1;
/// Exit status: a command-line error.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit status: no GL context.
pub(crate) const EXIT_NO_GL: u8 = 3;
/// Exit status: the command ran and found a problem (counts not repeatable, query disagrees, no
/// exact fit).
pub(crate) const EXIT_FINDING: u8 = 4;

/// `gpusvc vcache ...`.
#[derive(Debug, clap::Args)]
pub(crate) struct VcacheArgs {
    #[command(subcommand)]
    pub(crate) command: VcacheCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum VcacheCommand {
    /// Draws a mesh on this driver with a vertex shader that counts its own invocations per
    /// vertex; prints the counts' summary, ACMR, ATVR, the pipeline-statistics cross-check and
    /// whether two draws agree.
    ///
    /// Exit status: 0 when measured and repeatable; 4 when the two draws differ or the
    /// GL_VERTEX_SHADER_INVOCATIONS query disagrees with the counts; 3 when no GL context can
    /// be made; 1 for a mesh that cannot be read (missing, not triangles, index past the
    /// vertex count, empty) or a draw the driver refuses; 2 for command-line errors.
    Measure(measure::MeasureArgs),
    /// Measures the probe battery on this driver, fits every cache model of the search space
    /// to the counts and prints the exact fits (or the best near misses), ties included; saves
    /// the winner to a model file.
    ///
    /// Exit status: 0 when an exact model was found and saved; 4 when none was (the best near
    /// miss is saved, marked as such); 3 when no GL context can be made; 1 for other errors
    /// (the model file cannot be written); 2 for command-line errors.
    Fit(fit::FitArgs),
    /// Invocations, ACMR and ATVR of a mesh under a cache model; with --measure also the
    /// counts measured on this driver and how many vertices the model mispredicts.
    ///
    /// Exit status: 0 when it ran; 1 for a mesh or model file that cannot be read; 2 for
    /// command-line errors and a --model text that is not a model; 3 when --measure cannot
    /// make a GL context.
    Analyze(analyze::AnalyzeArgs),
    /// Reorders a mesh's triangles to minimize invocations under a cache model and writes the
    /// reordered mesh (format from the output's extension: .obj, .idx, .u16, .u32); prints
    /// ACMR before and after, and what meshoptimizer's orders give under the model.
    ///
    /// Exit status: 0 when written; 1 for a mesh or model file that cannot be read or an
    /// output that cannot be written; 2 for command-line errors and a --model text that is not
    /// a model.
    Optimize(optimize::OptimizeArgs),
    /// Plots, as SVG and PNG: the staircase (invocations against index count, measured on
    /// this driver and simulated by the fitted model and others) and ACMR per mesh per
    /// optimizer under the fitted model.
    ///
    /// Exit status: 0 when the plots were written; 3 when no GL context can be made; 1 for
    /// other errors (no model file, a mesh that cannot be read, plots that cannot be written);
    /// 2 for command-line errors.
    Plot(plot::PlotArgs),
}

/// Why a `gpusvc vcache` command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VcacheError {
    /// A mesh file could not be read or is not a triangle mesh.
    #[error("{0}")]
    Mesh(#[from] MeshIoError),
    /// A `--model` text is not a model.
    #[error("--model {text:?} is not a cache model: {reason}")]
    ModelText {
        /// The text given.
        text: String,
        /// Why.
        reason: String,
    },
    /// Any other failure, said in words.
    #[error("{0}")]
    Other(String),
    /// No GL context.
    #[error("no GL context: {0}{hint}", hint = install_hint(.0))]
    NoContext(#[from] ContextError),
    /// The command ran and found a problem it already printed; `.0` says it in one line.
    #[error("{0}")]
    Finding(String),
    /// Writing to stdout failed.
    #[error("writing the report: {0}")]
    Output(#[from] std::io::Error),
}

fn install_hint(e: &ContextError) -> &'static str {
    match e {
        ContextError::NoEglDevice {
            selection: Some(_), ..
        } => "",
        _ => {
            " (the runtime needs libegl1 libegl-mesa0 libgl1-mesa-dri; scripts/demo installs them)"
        }
    }
}

impl VcacheError {
    fn exit_code(&self) -> u8 {
        match self {
            VcacheError::ModelText { .. } => EXIT_USAGE,
            VcacheError::NoContext(_) => EXIT_NO_GL,
            VcacheError::Finding(_) => EXIT_FINDING,
            _ => EXIT_ERROR,
        }
    }

    fn is_broken_pipe(&self) -> bool {
        matches!(self, VcacheError::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// Runs `gpusvc vcache <command>`.
pub(crate) fn exec(args: VcacheArgs) -> ExitCode {
    let (name, result) = match &args.command {
        VcacheCommand::Measure(a) => ("measure", measure::run(a)),
        VcacheCommand::Fit(a) => ("fit", fit::run(a)),
        VcacheCommand::Analyze(a) => ("analyze", analyze::run(a)),
        VcacheCommand::Optimize(a) => ("optimize", optimize::run(a)),
        VcacheCommand::Plot(a) => ("plot", plot::run(a)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpusvc vcache {name}: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Prints `text` on stdout in one write.
pub(crate) fn print(text: &str) -> Result<(), VcacheError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Loads a mesh file (any format mesh-io reads) and checks it is a triangle mesh.
pub(crate) fn load_mesh(path: &Path) -> Result<TriangleMesh, VcacheError> {
    let mesh = mesh_io::load(path)?;
    // mesh-io validates; the vertex-cache view checks the same rules again, so a difference
    // between the two crates shows as an error rather than a panic later.
    Mesh::new(&mesh.indices, mesh.vertex_count)
        .map_err(|e| VcacheError::Other(format!("{}: {e}", path.display())))?;
    Ok(mesh)
}

/// The vertex-cache view of a loaded mesh.
pub(crate) fn view(mesh: &TriangleMesh) -> Mesh<'_> {
    Mesh::new(&mesh.indices, mesh.vertex_count).expect("checked by load_mesh")
}

/// A `--model` argument: a model's text form, or `@FILE` naming a model file written by `fit`
/// (or any file whose first line that is not a comment is a text form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ModelArg {
    /// A text form, parsed when the command runs.
    Text(String),
    /// A model file.
    File(PathBuf),
}

impl std::str::FromStr for ModelArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.strip_prefix('@') {
            Some("") => Err("@ needs a file name (@FILE)".into()),
            Some(path) => Ok(ModelArg::File(PathBuf::from(path))),
            None => Ok(ModelArg::Text(s.to_owned())),
        }
    }
}

impl ModelArg {
    /// The model this argument names.
    pub(crate) fn resolve(&self) -> Result<Model, VcacheError> {
        match self {
            ModelArg::Text(text) => text.parse().map_err(|e| VcacheError::ModelText {
                text: text.clone(),
                reason: format!("{e}"),
            }),
            ModelArg::File(path) => Ok(model_file::ModelFile::read(path)?.model),
        }
    }
}

/// Opens a GL context on this machine's driver (the `GPUSVC_EGL_DEVICE` selection applies).
pub(crate) fn open_context() -> Result<GlContext, VcacheError> {
    Ok(GlContext::open(&ContextOptions::default())?)
}

/// `x` with 3 decimals.
pub(crate) fn f3(x: f64) -> String {
    format!("{x:.3}")
}
