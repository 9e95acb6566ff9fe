//! Parallel link (`KHR_parallel_shader_compile`) on the machine's real GL driver: a host that
//! starts every compile and link and then polls, against one that compiles and links each
//! program synchronously.
//!
//! `cargo bench -p gpusvc-program-cache --bench parallel_link`
//!
//! Corpus: piglit's vertex + fragment programs (`GPUSVC_PIGLIT_DIR`, default
//! `<workspace>/target/corpora/piglit/tests`, filled by `scripts/fetch-corpus`), de-duplicated,
//! all of them unless `GPUSVC_CORPUS_LIMIT` samples them down; the built-in corpus when piglit is
//! missing (printed). Context: desktop compatibility profile, as the corpus test.
//!
//! Both hosts run through a [`ProgramManager`] on a fresh, empty memory cache (every link is a
//! miss: compile, link, reflect, read the binary, save), on a corpus variant (a trailing
//! comment) the process has never compiled, with `MESA_SHADER_CACHE_DIR` a fresh directory, so
//! no driver cache answers. `GPUSVC_BENCH_REPS` passes of each (default 5), interleaved:
//! * **synchronous** (the baseline): per program `compile` both shaders, then `link`;
//! * **start + poll** (ours): `start_compile` every shader, then `start_link` every program,
//!   then poll `link_ready` over the pending links and `finish_link` each one that is ready
//!   until none is left.
//!
//! Printed: whether the context exposes the extension, `GL_MAX_SHADER_COMPILER_THREADS_KHR`,
//! how many links were still pending at their first poll, the median pass times and their
//! ratio; written to `target/bench/parallel_link.json`.

use std::time::{Duration, Instant};

use corpus::ProgramSource;
use headless_gl::{GlContext, ShaderStage};
use program_cache::{
    CacheConfig, CompileOutcome, GlBackend, PendingLink, ProgramCache, ProgramManager,
    ProgramOptions, Shader,
};
use test_support::gl::isolate_shader_cache;

mod common;
use common::{env_number, millis};

const DEFAULT_REPS: usize = 5;

type Manager<'a> = ProgramManager<GlBackend<'a>>;
type GlShader = Shader<headless_gl::Shader>;

/// The programs' sources with a trailing comment that makes them new to the driver.
fn variant(programs: &[ProgramSource], tag: &str) -> Vec<(GlShader, GlShader)> {
    let suffix = format!("\n// gpusvc parallel_link bench: {tag}\n");
    programs
        .iter()
        .map(|p| {
            (
                Shader::new(ShaderStage::Vertex, format!("{}{suffix}", p.vertex)),
                Shader::new(ShaderStage::Fragment, format!("{}{suffix}", p.fragment)),
            )
        })
        .collect()
}

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Outcome {
    linked: usize,
    failed: usize,
    pending_at_first_poll: usize,
}

fn manager(ctx: &GlContext) -> Manager<'_> {
    let cache = ProgramCache::builder(CacheConfig::with_budget(256 << 20)).build();
    ProgramManager::new(GlBackend::new(ctx), cache, "parallel_link bench")
}

fn synchronous(ctx: &GlContext, programs: &[ProgramSource], tag: &str) -> (Duration, Outcome) {
    let mut shaders = variant(programs, tag);
    let mut m = manager(ctx);
    let mut out = Outcome::default();
    let start = Instant::now();
    for (vs, fs) in &mut shaders {
        let outcomes = [m.compile(vs).unwrap(), m.compile(fs).unwrap()];
        if outcomes.contains(&CompileOutcome::Failed) {
            out.failed += 1;
            continue;
        }
        match m.link(vs, fs, &ProgramOptions::default()) {
            Ok(_) => out.linked += 1,
            Err(_) => out.failed += 1,
        }
    }
    (start.elapsed(), out)
}

fn start_and_poll(ctx: &GlContext, programs: &[ProgramSource], tag: &str) -> (Duration, Outcome) {
    let mut shaders = variant(programs, tag);
    let mut m = manager(ctx);
    let mut out = Outcome::default();
    let start = Instant::now();
    for (vs, fs) in &mut shaders {
        m.start_compile(vs).unwrap();
        m.start_compile(fs).unwrap();
    }
    let mut pending: Vec<PendingLink<headless_gl::Program>> = Vec::new();
    for (vs, fs) in &mut shaders {
        match m.start_link(&mut [vs, fs], &ProgramOptions::default()) {
            Ok(p) => pending.push(p),
            Err(_) => out.failed += 1,
        }
    }
    let mut first = true;
    while !pending.is_empty() {
        let mut still = Vec::with_capacity(pending.len());
        for p in pending {
            if m.link_ready(&p) {
                match m.finish_link(p) {
                    Ok(_) => out.linked += 1,
                    Err(_) => out.failed += 1,
                }
            } else {
                if first {
                    out.pending_at_first_poll += 1;
                }
                still.push(p);
            }
        }
        first = false;
        pending = still;
        if !pending.is_empty() {
            std::thread::yield_now();
        }
    }
    (start.elapsed(), out)
}

fn main() {
    let cache_dir = isolate_shader_cache();
    let ctx = common::open_context("parallel_link");
    let reps = env_number("GPUSVC_BENCH_REPS", DEFAULT_REPS);
    let (label, programs) = common::corpus(&ctx, "parallel_link", None);
    let extension = ctx.parallel_shader_compile();
    let threads = ctx.max_shader_compiler_threads().ok().flatten();
    println!("driver: {}", ctx.info());
    println!(
        "KHR_parallel_shader_compile: {} (GL_MAX_SHADER_COMPILER_THREADS_KHR {}); \
         MESA_SHADER_CACHE_DIR {}",
        if extension { "present" } else { "absent" },
        threads.map_or("n/a".to_string(), |t| format!("{t:#x}")),
        cache_dir.display()
    );
    println!("corpus: {label}; {reps} passes of each, interleaved");

    let mut sync_ms = Vec::new();
    let mut poll_ms = Vec::new();
    let mut pending_first = Vec::new();
    let mut reference: Option<Outcome> = None;
    for rep in 0..reps {
        let (t, a) = synchronous(&ctx, &programs, &format!("sync {rep}"));
        sync_ms.push(millis(t));
        let (t, b) = start_and_poll(&ctx, &programs, &format!("poll {rep}"));
        poll_ms.push(millis(t));
        pending_first.push(b.pending_at_first_poll);
        let same = Outcome {
            pending_at_first_poll: 0,
            ..b
        };
        assert_eq!(
            (a.linked, a.failed),
            (same.linked, same.failed),
            "both hosts link the same programs"
        );
        if let Some(r) = reference {
            assert_eq!((r.linked, r.failed), (a.linked, a.failed));
        }
        reference = Some(a);
        println!(
            "pass {rep}: synchronous {:.1} ms, start + poll {:.1} ms ({} linked, {} failed, {} \
             pending at the first poll)",
            sync_ms[rep], poll_ms[rep], a.linked, a.failed, b.pending_at_first_poll
        );
    }
    let sync = bench_support::median(&mut sync_ms);
    let poll = bench_support::median(&mut poll_ms);
    let rows = [bench_support::Row {
        metric: "piglit_link_pass_wall_time".into(),
        unit: "ms",
        ours: poll,
        baseline: sync,
        ratio_note: "start + poll / synchronous wall time (below 1: the driver links in parallel)",
    }];
    println!(
        "links pending at their first poll, per pass: {pending_first:?} (0 everywhere: the driver \
         finished each link inside glLinkProgram)"
    );
    bench_support::report("parallel_link", &rows);
}
