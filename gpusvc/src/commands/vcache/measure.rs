//! `gpusvc vcache measure MESH`: one indexed draw of a mesh on this driver with a vertex shader
//! that counts its own invocations per vertex (`vertex_cache::measure`), made twice to check the
//! counts repeat, with the sum cross-checked against the `GL_VERTEX_SHADER_INVOCATIONS` query.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use vertex_cache::analyze as analysis_of;
use vertex_cache::measure::{DrawOptions, IndexType, Measurer};

use super::{VcacheError, f3, load_mesh, open_context, print, view};

/// Index type argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum IndexTypeArg {
    U16,
    U32,
}

/// `gpusvc vcache measure`'s arguments.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub(crate) struct MeasureArgs {
    /// The mesh: OBJ, PLY (ascii or binary), OFF, raw indices (.idx, .u16, .u32) or the npm
    /// bunny/teapot .js form, gzipped or not.
    pub(crate) mesh: PathBuf,
    /// Index type of the draw (u16 needs every index plus the base vertex below 65536).
    #[arg(long, value_enum, default_value_t = IndexTypeArg::U32)]
    pub(crate) index_type: IndexTypeArg,
    /// Draw with glDrawElementsBaseVertex and this base vertex (0: plain glDrawElements).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub(crate) base_vertex: u32,
    /// Also write every vertex's count to FILE, one decimal number per line (line i: vertex
    /// i-1, from the first draw).
    #[arg(long, value_name = "FILE")]
    pub(crate) counts: Option<PathBuf>,
}

pub(crate) fn run(args: &MeasureArgs) -> Result<(), VcacheError> {
    let mesh = load_mesh(&args.mesh)?;
    let m = view(&mesh);
    let ctx = open_context()?;
    let measurer = Measurer::new(&ctx).map_err(|e| VcacheError::Other(e.to_string()))?;
    let options = DrawOptions {
        index_type: match args.index_type {
            IndexTypeArg::U16 => IndexType::U16,
            IndexTypeArg::U32 => IndexType::U32,
        },
        base_vertex: args.base_vertex,
        ..DrawOptions::default()
    };
    let twice = measurer
        .measure_twice(&m, options)
        .map_err(|e| VcacheError::Other(format!("{}: {e}", args.mesh.display())))?;
    let first = &twice.first;
    if let Some(path) = &args.counts {
        write_counts(path, &first.counts)?;
    }
    let a = analysis_of(&m, &first.counts);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "mesh: {} ({} vertices, {} triangles)",
        args.mesh.display(),
        mesh.vertex_count,
        mesh.triangle_count()
    );
    let _ = writeln!(s, "driver: {}", ctx.info());
    let draw = if args.base_vertex == 0 {
        "glDrawElements".to_owned()
    } else {
        format!(
            "glDrawElementsBaseVertex (base vertex {})",
            args.base_vertex
        )
    };
    let index_type = match args.index_type {
        IndexTypeArg::U16 => "u16",
        IndexTypeArg::U32 => "u32",
    };
    let _ = writeln!(s, "draw: {draw}, {index_type} indices");
    let _ = writeln!(s, "invocations          {:>12}", a.invocations);
    let _ = writeln!(s, "vertices referenced  {:>12}", a.vertices_referenced);
    let _ = writeln!(s, "ACMR                 {:>12}", f3(a.acmr));
    let _ = writeln!(s, "ATVR                 {:>12}", f3(a.atvr));
    let _ = writeln!(s, "per-vertex counts    {}", histogram(&first.counts));
    let mut problems = Vec::new();
    match first.query_invocations {
        Some(q) if q == first.total() => {
            let _ = writeln!(
                s,
                "pipeline statistics  GL_VERTEX_SHADER_INVOCATIONS {q} = the counts' sum"
            );
        }
        Some(q) => {
            let _ = writeln!(
                s,
                "pipeline statistics  GL_VERTEX_SHADER_INVOCATIONS {q} != the counts' sum {} (DIFFERENT)",
                first.total()
            );
            problems.push(format!(
                "the invocation query says {q}, the counts sum to {}",
                first.total()
            ));
        }
        None => {
            let _ = writeln!(
                s,
                "pipeline statistics  not available on this driver (no cross-check)"
            );
        }
    }
    let differing = twice.differing_vertices();
    if twice.is_repeatable() {
        let _ = writeln!(
            s,
            "repeatable           yes (a second draw gave the same count for every vertex)"
        );
    } else {
        let _ = writeln!(
            s,
            "repeatable           NO: {} vertices differ between two draws (invocations {} then {})",
            differing.len(),
            first.total(),
            twice.second.total()
        );
        problems.push(format!("two draws differ on {} vertices", differing.len()));
    }
    if let Some(path) = &args.counts {
        let _ = writeln!(s, "counts written to {}", path.display());
    }
    print(&s)?;
    if problems.is_empty() {
        Ok(())
    } else {
        Err(VcacheError::Finding(problems.join("; ")))
    }
}

/// `min .. max`, mean, and how many vertices have each count (0 = not shaded).
fn histogram(counts: &[u32]) -> String {
    let mut by_count = std::collections::BTreeMap::new();
    for &c in counts {
        *by_count.entry(c).or_insert(0u64) += 1;
    }
    let used: Vec<u32> = counts.iter().copied().filter(|&c| c > 0).collect();
    let mean = used.iter().map(|&c| f64::from(c)).sum::<f64>() / used.len().max(1) as f64;
    let parts: Vec<String> = by_count.iter().map(|(c, n)| format!("{c}x: {n}")).collect();
    format!(
        "min {} max {} mean {} over shaded vertices; vertices by count: {}",
        used.iter().min().unwrap_or(&0),
        used.iter().max().unwrap_or(&0),
        f3(mean),
        parts.join(", ")
    )
}

fn write_counts(path: &Path, counts: &[u32]) -> Result<(), VcacheError> {
    let mut text = String::with_capacity(counts.len() * 3);
    for c in counts {
        let _ = writeln!(text, "{c}");
    }
    std::fs::write(path, text)
        .map_err(|e| VcacheError::Other(format!("cannot write {}: {e}", path.display())))
}
