//! `gpusvc vcache analyze MESH --model M`: what one draw of a mesh costs under a cache model
//! (simulated exactly, per vertex), and with `--measure` what it costs on this driver.

use std::fmt::Write as _;
use std::path::PathBuf;

use vertex_cache::analyze as analysis_of;
use vertex_cache::fit::Score;
use vertex_cache::measure::{DrawOptions, Measurer};

use super::{ModelArg, VcacheError, f3, load_mesh, open_context, print, view};

/// `gpusvc vcache analyze`'s arguments.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub(crate) struct AnalyzeArgs {
    /// The mesh: OBJ, PLY (ascii or binary), OFF, raw indices (.idx, .u16, .u32) or the npm
    /// bunny/teapot .js form, gzipped or not.
    pub(crate) mesh: PathBuf,
    /// The cache model: a text form (fifo:16, lru:32, batch:32,32,32, seg:96/fifo:32, ...) or
    /// @FILE for a model file written by `gpusvc vcache fit`.
    #[arg(long, value_name = "M")]
    pub(crate) model: ModelArg,
    /// Also draw the mesh on this driver and print the measured figures beside the model's,
    /// with the number of vertices whose count the model mispredicts.
    #[arg(long)]
    pub(crate) measure: bool,
}

pub(crate) fn run(args: &AnalyzeArgs) -> Result<(), VcacheError> {
    let model = args.model.resolve()?;
    let mesh = load_mesh(&args.mesh)?;
    let m = view(&mesh);
    let simulated = model.simulate(&m);
    let sim = analysis_of(&m, &simulated);
    let measured = if args.measure {
        let ctx = open_context()?;
        let measurer = Measurer::new(&ctx).map_err(|e| VcacheError::Other(e.to_string()))?;
        let counts = measurer
            .measure(&m, DrawOptions::default())
            .map_err(|e| VcacheError::Other(format!("{}: {e}", args.mesh.display())))?
            .counts;
        Some((ctx.info().to_string(), counts))
    } else {
        None
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "mesh: {} ({} vertices, {} triangles)",
        args.mesh.display(),
        mesh.vertex_count,
        mesh.triangle_count()
    );
    let _ = writeln!(s, "model: {model}");
    if let Some((driver, _)) = &measured {
        let _ = writeln!(s, "driver: {driver}");
    }
    let warps = model.warps(&m);
    match &measured {
        None => {
            let _ = writeln!(s, "invocations          {:>12}", sim.invocations);
            let _ = writeln!(s, "vertices referenced  {:>12}", sim.vertices_referenced);
            let _ = writeln!(s, "ACMR                 {:>12}", f3(sim.acmr));
            let _ = writeln!(s, "ATVR                 {:>12}", f3(sim.atvr));
            if let Some(w) = warps {
                let _ = writeln!(s, "warps                {w:>12}");
            }
        }
        Some((_, counts)) => {
            let meas = analysis_of(&m, counts);
            let _ = writeln!(s, "{:<21}{:>12}{:>12}", "", "model", "measured");
            let _ = writeln!(
                s,
                "{:<21}{:>12}{:>12}",
                "invocations", sim.invocations, meas.invocations
            );
            let _ = writeln!(
                s,
                "{:<21}{:>12}{:>12}",
                "vertices referenced", sim.vertices_referenced, meas.vertices_referenced
            );
            let _ = writeln!(s, "{:<21}{:>12}{:>12}", "ACMR", f3(sim.acmr), f3(meas.acmr));
            let _ = writeln!(s, "{:<21}{:>12}{:>12}", "ATVR", f3(sim.atvr), f3(meas.atvr));
            let score = Score::of(&simulated, counts);
            let _ = writeln!(
                s,
                "mismatching vertices {:>12} (total difference {})",
                score.mismatched_vertices, score.total_difference
            );
        }
    }
    print(&s)
}
