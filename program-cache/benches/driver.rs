//! Cold compile + link versus cache-hit restore, on the machine's real GL driver.
//!
//! `cargo bench -p gpusvc-program-cache --bench driver`
//!
//! Corpus: piglit's vertex + fragment programs (`GPUSVC_PIGLIT_DIR`, default
//! `<workspace>/target/corpora/piglit/tests`, filled by `scripts/fetch-corpus`), de-duplicated and
//! evenly sampled down to `GPUSVC_CORPUS_LIMIT` (default 400); when that directory is missing, the
//! built-in corpus, with a printed note. Context: desktop compatibility profile (as the corpus
//! test; piglit is mostly GLSL 1.10-1.40), falling back to the default context.
//!
//! Per program that links, with `GPUSVC_BENCH_REPS` runs (default 7) of each:
//! * **cold compile + link** (the baseline): compile both shaders, link, reflect attributes and
//!   uniforms, straight on the driver. Every run compiles a variant of the sources (a trailing
//!   comment) that the process has never compiled, with `MESA_SHADER_CACHE_DIR` a fresh
//!   directory (`isolate_shader_cache`), so no driver cache answers it.
//! * **cache miss** (informational): the same through a `ProgramManager` on an empty cache:
//!   compile, link, reflect, read the binary and save it.
//! * **cache hit** (ours): new `Shader`s through the same manager on the warm cache: two status
//!   hits (deferred compiles) and `ProgramManager::link` = `glProgramBinary` + reflection.
//!
//! The per-program medians are summarised (median over programs) for all programs and by source
//! size, printed as a table, and written to `target/bench/program_cache_driver.json` as
//! `{"metric": {"ours": hit, "baseline": cold, "ratio": hit / cold, "unit": "ms"}}`.
//!
//! None of this includes the first draw: llvmpipe JIT-compiles a program to machine code at its
//! first draw (about 20 ms), whether the program came from source or from a binary.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use corpus::ProgramSource;
use headless_gl::{GlContext, LinkOptions, ShaderStage};
use program_cache::{
    CacheConfig, CompileOutcome, GlBackend, LinkOrigin, ProgramBackend, ProgramCache,
    ProgramManager, ProgramOptions, Shader,
};
use test_support::gl::isolate_shader_cache;

mod common;
use common::{env_number, millis, workspace};

const DEFAULT_LIMIT: usize = 400;
const DEFAULT_REPS: usize = 7;

/// The sources with a trailing comment that makes them new to the driver.
fn variant(program: &ProgramSource, tag: &str) -> (String, String) {
    let suffix = format!("\n// gpusvc driver bench: {tag}\n");
    (
        format!("{}{suffix}", program.vertex),
        format!("{}{suffix}", program.fragment),
    )
}

/// The median; NaN when there are no values.
fn median(values: &mut [f64]) -> f64 {
    bench_support::try_median(values).unwrap_or(f64::NAN)
}

/// One program's medians, in milliseconds.
struct Sample {
    source_bytes: usize,
    binary_bytes: usize,
    cold: f64,
    miss: f64,
    hit: f64,
}

/// Plain driver compile + link + reflection; `None` when the driver refuses the program.
fn cold_once(ctx: &GlContext, vertex: &str, fragment: &str) -> Option<Duration> {
    let mut backend = GlBackend::new(ctx);
    let start = Instant::now();
    let vs = backend.compile(ShaderStage::Vertex, vertex).ok()?;
    let fs = backend.compile(ShaderStage::Fragment, fragment).ok()?;
    let program = backend.link(&[&vs, &fs], &LinkOptions::default()).ok()?;
    let attributes = backend.active_attributes(&program);
    let uniforms = backend.active_uniforms(&program);
    let elapsed = start.elapsed();
    std::hint::black_box((attributes, uniforms));
    Some(elapsed)
}

fn measure(ctx: &GlContext, program: &ProgramSource, reps: usize) -> Option<Sample> {
    let mut cold = Vec::with_capacity(reps);
    for rep in 0..reps {
        let (vertex, fragment) = variant(program, &format!("cold {rep}"));
        cold.push(millis(cold_once(ctx, &vertex, &fragment)?));
    }

    let cache = ProgramCache::builder(CacheConfig::with_budget(256 << 20)).build();
    let mut manager = ProgramManager::new(GlBackend::new(ctx), cache.clone(), "driver-bench");
    let options = ProgramOptions::default();
    let (vertex, fragment) = variant(program, "cached");
    let mut run = |expect: LinkOrigin| -> Option<f64> {
        let start = Instant::now();
        let mut vs = Shader::new(ShaderStage::Vertex, vertex.as_str());
        let mut fs = Shader::new(ShaderStage::Fragment, fragment.as_str());
        let outcomes = [
            manager.compile(&mut vs).expect("a shader of this manager"),
            manager.compile(&mut fs).expect("a shader of this manager"),
        ];
        if outcomes.contains(&CompileOutcome::Failed) {
            return None;
        }
        let linked = manager.link(&mut vs, &mut fs, &options).ok()?;
        let elapsed = start.elapsed();
        assert_eq!(linked.origin, expect, "{}", program.name);
        Some(millis(elapsed))
    };
    let miss = run(LinkOrigin::Linked)?;
    let mut hits = Vec::with_capacity(reps);
    for _ in 0..reps {
        hits.push(run(LinkOrigin::CacheHit)?);
    }
    Some(Sample {
        source_bytes: program.vertex.len() + program.fragment.len(),
        binary_bytes: cache.size_bytes(),
        cold: median(&mut cold),
        miss,
        hit: median(&mut hits),
    })
}

struct Row {
    label: &'static str,
    programs: usize,
    cold: f64,
    miss: f64,
    hit: f64,
}

fn row(label: &'static str, samples: &[&Sample]) -> Row {
    let pick =
        |f: fn(&Sample) -> f64| median(&mut samples.iter().map(|s| f(s)).collect::<Vec<_>>());
    Row {
        label,
        programs: samples.len(),
        cold: pick(|s| s.cold),
        miss: pick(|s| s.miss),
        hit: pick(|s| s.hit),
    }
}

fn main() {
    isolate_shader_cache();
    let ctx = common::open_context("driver");
    let (label, programs) = common::corpus(&ctx, "driver", Some(DEFAULT_LIMIT));
    let reps = env_number("GPUSVC_BENCH_REPS", DEFAULT_REPS).max(1);
    println!("driver: {}", ctx.info());
    println!("corpus: {label}; {reps} runs per program and path");

    // One throwaway compile, so process-wide first-use costs land on no program.
    let warmup = corpus::builtin(common::dialect(&ctx));
    let _ = cold_once(&ctx, &warmup[0].vertex, &warmup[0].fragment);

    let start = Instant::now();
    let samples: Vec<Sample> = programs
        .iter()
        .filter_map(|p| measure(&ctx, p, reps))
        .collect();
    let refused = programs.len() - samples.len();
    if samples.is_empty() {
        eprintln!("driver bench: no program of the corpus linked");
        std::process::exit(1);
    }

    let all: Vec<&Sample> = samples.iter().collect();
    let by_size = |lo: usize, hi: usize| -> Vec<&Sample> {
        all.iter()
            .copied()
            .filter(|s| (lo..hi).contains(&s.source_bytes))
            .collect()
    };
    let mut rows = vec![row("all programs", &all)];
    for (label, lo, hi) in [
        ("sources < 1 KiB", 0, 1024),
        ("sources 1-4 KiB", 1024, 4096),
        ("sources >= 4 KiB", 4096, usize::MAX),
    ] {
        let bucket = by_size(lo, hi);
        if !bucket.is_empty() {
            rows.push(row(label, &bucket));
        }
    }

    println!(
        "\n{} programs linked and measured ({refused} refused by the driver, not measured); {:.1} s",
        samples.len(),
        start.elapsed().as_secs_f64()
    );
    println!(
        "medians over programs of each program's median, in ms; EXCLUDES the first-draw JIT \
         (llvmpipe compiles a program to machine code at its first draw, binary or not)"
    );
    println!(
        "{:<18} {:>8} {:>16} {:>14} {:>14} {:>9} {:>9}",
        "", "programs", "cold c+l (base)", "miss+save", "cache hit", "hit/cold", "speed-up"
    );
    for r in &rows {
        println!(
            "{:<18} {:>8} {:>16.3} {:>14.3} {:>14.3} {:>9.3} {:>8.1}x",
            r.label,
            r.programs,
            r.cold,
            r.miss,
            r.hit,
            r.hit / r.cold,
            r.cold / r.hit
        );
    }
    let mut binaries: Vec<f64> = samples.iter().map(|s| s.binary_bytes as f64).collect();
    println!(
        "cached entry size: median {:.0} bytes; cold c+l total {:.1} ms vs cache hit total {:.1} ms",
        median(&mut binaries),
        samples.iter().map(|s| s.cold).sum::<f64>(),
        samples.iter().map(|s| s.hit).sum::<f64>()
    );

    let overall = &rows[0];
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
        .join("bench");
    let path = dir.join("program_cache_driver.json");
    let json = format!(
        "{{\"metric\": {{\"ours\": {:.6}, \"baseline\": {:.6}, \"ratio\": {:.6}, \"unit\": \"ms\"}}}}\n",
        overall.hit,
        overall.cold,
        overall.hit / overall.cold
    );
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, json)) {
        eprintln!("driver bench: writing {}: {e}", path.display());
        std::process::exit(1);
    }
    println!("wrote {}", path.display());
}
