//! `gpusvc vcache optimize MESH --model M -o OUT`: reorders a mesh's triangles for a cache model
//! (`vertex_cache::optimize`: the best of a model-aware greedy, meshoptimizer's two orders and
//! the input, compared under the model, so never worse than the input) and writes the result.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use mesh_io::{Format, TriangleMesh};
use vertex_cache::{Choice, optimize_with_report};

use super::{ModelArg, VcacheError, f3, load_mesh, print, view};

/// `gpusvc vcache optimize`'s arguments.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub(crate) struct OptimizeArgs {
    /// The mesh: OBJ, PLY (ascii or binary), OFF, raw indices (.idx, .u16, .u32) or the npm
    /// bunny/teapot .js form, gzipped or not.
    pub(crate) mesh: PathBuf,
    /// The cache model to optimize for: a text form (fifo:16, batch:32,32,32, ...) or @FILE for
    /// a model file written by `gpusvc vcache fit`.
    #[arg(long, value_name = "M")]
    pub(crate) model: ModelArg,
    /// Where to write the reordered mesh; the format follows the extension: .obj (positions
    /// kept, or 0 0 0 when the input has none), .idx (index text), .u16 or .u32 (raw
    /// little-endian indices). Replaced atomically; a symbolic link is refused. OBJ readers
    /// (this one too) number vertices by first use, which changes what models that look at
    /// vertex numbers (dm, sa) predict for the file read back; raw index files keep them.
    #[arg(short, long, value_name = "OUT")]
    pub(crate) out: PathBuf,
}

fn label(c: Choice) -> &'static str {
    match c {
        Choice::Input => "input order",
        Choice::Greedy => "model-aware greedy",
        Choice::Meshopt => "meshopt optimize_vertex_cache",
        Choice::Tipsify => "meshopt Tipsify (optimize_vertex_cache_fifo)",
    }
}

pub(crate) fn run(args: &OptimizeArgs) -> Result<(), VcacheError> {
    let model = args.model.resolve()?;
    // The same rule as mesh_io::save: the file name's own extension (no .gz).
    let extension = args.out.extension().and_then(|e| e.to_str()).unwrap_or("");
    match Format::from_extension(extension) {
        Some(Format::Obj | Format::IndicesText | Format::IndicesU16 | Format::IndicesU32)
            if args.out.file_stem().is_some_and(|s| !s.is_empty()) => {}
        _ => {
            return Err(VcacheError::Other(format!(
                "-o {}: writes .obj, .idx, .u16 or .u32 (chosen by the extension)",
                args.out.display()
            )));
        }
    }
    let mesh = load_mesh(&args.mesh)?;
    let m = view(&mesh);
    let started = Instant::now();
    let report = optimize_with_report(&m, &model);
    let elapsed = started.elapsed();
    let triangles = mesh.triangle_count() as f64;
    let out = TriangleMesh {
        indices: report.indices,
        vertex_count: mesh.vertex_count,
        positions: mesh.positions.clone(),
    };
    mesh_io::save(&args.out, &out)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "mesh: {} ({} vertices, {} triangles)",
        args.mesh.display(),
        mesh.vertex_count,
        mesh.triangle_count()
    );
    let _ = writeln!(s, "model: {model}");
    let _ = writeln!(s, "{:<46}{:>12}{:>8}", "order", "invocations", "ACMR");
    for (choice, inv) in report.invocations {
        let mark = if choice == report.choice && report.refined.is_none() {
            " <- written"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "{:<46}{:>12}{:>8}{mark}",
            label(choice),
            inv,
            f3(inv as f64 / triangles)
        );
    }
    if let Some((from, inv)) = report.refined {
        let _ = writeln!(
            s,
            "{:<46}{:>12}{:>8} <- written",
            format!("{} refined by chunks", label(from)),
            inv,
            f3(inv as f64 / triangles)
        );
    }
    let before = report.invocations[0].1 as f64 / triangles;
    let after = match report.refined {
        Some((_, inv)) => inv as f64 / triangles,
        None => report
            .invocations
            .iter()
            .find(|(c, _)| *c == report.choice)
            .map_or(before, |&(_, i)| i as f64 / triangles),
    };
    let _ = writeln!(
        s,
        "ACMR under {model}: {} -> {} ({:+.1} %), in {:.1} ms",
        f3(before),
        f3(after),
        (after / before - 1.0) * 100.0,
        elapsed.as_secs_f64() * 1e3
    );
    let _ = writeln!(s, "wrote {}", args.out.display());
    print(&s)
}
