//! Trace-driven comparison of the cache's eviction policies with program sizes measured on the
//! machine's real GL driver.
//!
//!     cargo run --release -p gpusvc-program-cache --example policy_sim
//!
//! # Program sizes
//! Every program of the built-in corpus and of piglit (`GPUSVC_PIGLIT_DIR`, default
//! `<workspace>/target/corpora/piglit/tests`, filled by `scripts/fetch-corpus`; de-duplicated,
//! `GPUSVC_CORPUS_LIMIT` programs evenly spread, default all) is compiled and linked through a
//! [`ProgramManager`] on a headless context (desktop compatibility profile, as the corpus test),
//! and each linked program's stored size ([`CachedProgram::stored_size`]: binary plus variable
//! maps) is taken from the cache. When no GL context can be made the sizes come from a seeded
//! synthetic distribution instead, and the output says so on its first line and in every metric
//! name of the JSON.
//!
//! # Workloads
//! Deterministic (seeded xorshift). Each request is a lookup ([`ProgramCache::load`]); a miss
//! saves the program (as [`ProgramManager::link`] does). Sizes are the measured ones, reused in
//! corpus order when a workload needs more programs than the corpus has.
//! * **cyclic**: every measured program, in one fixed order, 8 passes (one page). The pattern
//!   that made LRU collapse: each program is evicted just before it comes round again.
//! * **multi-tab**: 40 sites of 10 to 150 programs (one of 150) plus 12 compositor programs every
//!   page uses; 3000 page loads, the tab chosen with Zipf-like popularity (weight 1/rank); a page
//!   load asks for each of its programs once, in its own order (`examples/page_policy.rs`).
//! * **scan+hot**: a hot set of 80 programs with Zipf-like popularity (browser UI, page 0)
//!   asked for 3 times in 4; the 4th request is a one-off program never asked for again
//!   (content pages of 30 programs each). 60 000 requests.
//! * **mix**: the three interleaved in blocks of 64 requests (cyclic over a 200-program app).
//!
//! The *working set* is the bytes of the distinct programs asked for more than once (for
//! cyclic and multi-tab: all of them; for scan+hot: the hot set); budgets are 25 %, 50 % and
//! 100 % of it. Hit rates count every request, first-time misses included; `ceiling` is the
//! best any cache could do (1 - distinct programs / requests).
//!
//! Also the reported case: an application with 5.4 MB of programs (the report: 348 programs on
//! its driver; here the measured sizes in corpus order, repeated under new keys until they add up
//! to 5.4 MB) run cyclically under the 2 MiB mobile budget, 10 passes, hit rate on passes 2 to
//! 10.
//!
//! Writes `target/bench/program_cache_policy.json`: per workload and budget, the miss rate of the
//! default policy (ours) and of LRU (baseline); lower is better.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use bench_support::{Row, report};
use corpus::{Dialect, builtin, dedup_sources, load_dir, spread};
use headless_gl::{ApiPreference, ContextOptions, GlApi, GlContext, ShaderStage};
use program_cache::{
    CacheConfig, CachedProgram, CompileOutcome, EvictionPolicy, GlBackend, MOBILE_BUDGET, PageId,
    ProgramCache, ProgramKey, ProgramManager, ProgramOptions, Shader, ShaderHash,
};
use test_support::programs::{plain_program, policy_cache};
use test_support::rng::XorShift;

/// A policy's name in the tables.
fn label(policy: EvictionPolicy) -> &'static str {
    match policy {
        EvictionPolicy::Lru => "LRU",
        EvictionPolicy::PageLruMru => "page LRU/MRU",
        EvictionPolicy::Slru => "SLRU",
        EvictionPolicy::S3Fifo => "S3-FIFO",
        EvictionPolicy::WTinyLfu => "W-TinyLFU",
    }
}

/// Bytes of programs of the reported application.
const APP_BYTES: usize = 5_400_000;

/// Budgets, in percent of the working set.
const FRACTIONS: [usize; 3] = [25, 50, 100];

/// One request: the page asking, the program, its stored size.
#[derive(Clone, Copy)]
struct Request {
    page: PageId,
    key: ProgramKey,
    size: usize,
}

/// Program sizes and where they came from.
struct Sizes {
    label: String,
    measured: bool,
    sizes: Vec<usize>,
}

fn workspace() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// Links the built-in corpus and piglit on the real driver and returns each linked program's
/// stored size; `None` when no GL context can be made.
fn measured_sizes() -> Option<Sizes> {
    let compat = ContextOptions {
        api: ApiPreference::DesktopCompatibility,
        ..ContextOptions::default()
    };
    let ctx = match GlContext::open(&compat).or_else(|_| GlContext::open_default()) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("no GL context ({e})");
            return None;
        }
    };
    let dialect = match ctx.info().api {
        GlApi::DesktopCore => Dialect::DesktopCore330,
        GlApi::Gles => Dialect::Es300,
    };
    let mut programs = builtin(dialect);
    let dir = std::env::var_os("GPUSVC_PIGLIT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/corpora/piglit/tests"));
    let mut piglit_note = format!("no piglit corpus at {}", dir.display());
    if dir.is_dir() {
        match load_dir(&dir) {
            Ok(loaded) => {
                let mut piglit = loaded.programs;
                dedup_sources(&mut piglit);
                let limit = std::env::var("GPUSVC_CORPUS_LIMIT")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(piglit.len());
                let sample = spread(&piglit, limit);
                piglit_note = format!("piglit: {} of {} tried", sample.len(), piglit.len());
                programs.extend(sample);
            }
            Err(e) => piglit_note = format!("piglit not loaded: {e}"),
        }
    }
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 30)).build();
    let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), "policy_sim");
    let start = Instant::now();
    let mut sizes = Vec::new();
    for p in &programs {
        let mut vs = Shader::new(ShaderStage::Vertex, p.vertex.as_str());
        let mut fs = Shader::new(ShaderStage::Fragment, p.fragment.as_str());
        if manager.compile(&mut vs).expect("a shader of this manager") == CompileOutcome::Failed
            || manager.compile(&mut fs).expect("a shader of this manager") == CompileOutcome::Failed
        {
            continue;
        }
        let Ok(linked) = manager.link(&mut vs, &mut fs, &ProgramOptions::default()) else {
            continue;
        };
        if let Some(entry) = cache.peek(&linked.key) {
            sizes.push(entry.stored_size());
        }
    }
    if sizes.is_empty() {
        println!("no program linked on {}", ctx.info());
        return None;
    }
    let label = format!(
        "{} programs linked on {} in {:.1} s (built-in corpus + {piglit_note}; {} refused)",
        sizes.len(),
        ctx.info(),
        start.elapsed().as_secs_f64(),
        programs.len() - sizes.len(),
    );
    Some(Sizes {
        label,
        measured: true,
        sizes,
    })
}

/// Seeded synthetic sizes (roughly log-uniform, 1.5 to 48 KiB), for machines without GL.
fn synthetic_sizes() -> Sizes {
    let mut rng = XorShift(0x0005_12E5_5EED);
    let sizes = (0..800)
        .map(|_| {
            let octaves = rng.below(1000) as f64 / 1000.0 * 5.0;
            (1536.0 * 2f64.powf(octaves)) as usize
        })
        .collect();
    Sizes {
        label: "SYNTHETIC sizes (no GL driver): 800 seeded log-uniform sizes of 1.5 to 48 KiB, \
                NOT measured"
            .into(),
        measured: false,
        sizes,
    }
}

/// Program keys: distinct per (stream, index).
fn key(stream: u32, i: u32) -> ProgramKey {
    let mut k = [0u8; 20];
    k[..4].copy_from_slice(&stream.to_le_bytes());
    k[4..8].copy_from_slice(&i.to_le_bytes());
    // Fill the rest so no two keys share long runs of bytes.
    let mut rng = XorShift(u64::from(stream) << 32 | u64::from(i) | 1);
    for b in &mut k[8..] {
        *b = rng.next() as u8;
    }
    ProgramKey(k)
}

/// A program that costs exactly `size` bytes in the cache.
fn program(k: &ProgramKey, size: usize) -> CachedProgram {
    let mut vs = k.0;
    vs[19] ^= 1;
    let mut fs = k.0;
    fs[19] ^= 2;
    let mut p = plain_program(ShaderHash(vs), ShaderHash(fs), Vec::new());
    let overhead = p.stored_size();
    p.binary.bytes = vec![0; size.saturating_sub(overhead).max(1)];
    p
}

/// Every program once per pass, in one order, `passes` times.
fn cyclic(sizes: &[usize], count: usize, passes: usize, stream: u32) -> Vec<Request> {
    let programs: Vec<Request> = (0..count)
        .map(|i| Request {
            page: 1,
            key: key(stream, i as u32),
            size: sizes[i % sizes.len()],
        })
        .collect();
    (0..passes).flat_map(|_| programs.iter().copied()).collect()
}

/// Zipf-popular tabs, each page load asking for its programs once (see the module docs).
fn multi_tab(sizes: &[usize], loads: usize, page_base: PageId) -> Vec<Request> {
    let mut rng = XorShift(0x5EED_1234_ABCD_0001);
    let mut next = 0usize;
    let mut take = |stream: u32, i: u32| {
        let size = sizes[next % sizes.len()];
        next += 1;
        (key(stream, i), size)
    };
    let shared: Vec<(ProgramKey, usize)> = (0..12).map(|i| take(1000, i)).collect();
    let sites: Vec<Vec<(ProgramKey, usize)>> = (0..40u32)
        .map(|s| {
            let count = if s == 3 {
                150
            } else {
                10 + rng.below(60) as u32
            };
            let mut programs: Vec<_> = (0..count).map(|i| take(2000 + s, i)).collect();
            // Each site asks for its programs in its own order.
            for i in (1..programs.len()).rev() {
                programs.swap(i, rng.below(i as u64 + 1) as usize);
            }
            programs
        })
        .collect();
    let mut trace = Vec::new();
    for _ in 0..loads {
        let site = rng.zipf(sites.len());
        let page = page_base + site as u64;
        for &(key, size) in shared.iter().chain(&sites[site]) {
            trace.push(Request { page, key, size });
        }
    }
    trace
}

/// A Zipf-popular hot set asked for 3 times in 4, one-off programs in between.
fn scan_hot(sizes: &[usize], requests: usize, page_base: PageId) -> Vec<Request> {
    let mut rng = XorShift(0xC0FF_EE00_5CA7_0001);
    let hot: Vec<(ProgramKey, usize)> = (0..80u32)
        .map(|i| (key(3000, i), sizes[(i as usize * 7) % sizes.len()]))
        .collect();
    let mut one_offs = 0u32;
    (0..requests)
        .map(|_| {
            if rng.below(4) < 3 {
                let (key, size) = hot[rng.zipf(hot.len())];
                Request {
                    page: page_base,
                    key,
                    size,
                }
            } else {
                one_offs += 1;
                Request {
                    page: page_base + 1 + u64::from(one_offs / 30),
                    key: key(4000, one_offs),
                    size: sizes[(one_offs as usize * 13) % sizes.len()],
                }
            }
        })
        .collect()
}

/// The three interleaved in blocks of 64 requests, until the shortest runs out.
fn mix(sizes: &[usize]) -> Vec<Request> {
    let sources = [
        cyclic(sizes, 200.min(sizes.len()), 30, 5000),
        multi_tab(sizes, 400, 100),
        scan_hot(sizes, 20_000, 1000),
    ];
    let mut out = Vec::new();
    for block in 0.. {
        let mut any = false;
        for s in &sources {
            if let Some(chunk) = s.chunks(64).nth(block) {
                out.extend_from_slice(chunk);
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    out
}

/// Bytes of the distinct programs asked for more than once; distinct programs in all.
fn working_set(trace: &[Request]) -> (usize, usize) {
    let mut counts: HashMap<ProgramKey, (usize, usize)> = HashMap::new();
    for r in trace {
        counts.entry(r.key).or_insert((0, r.size)).0 += 1;
    }
    let bytes = counts
        .values()
        .filter(|(n, _)| *n > 1)
        .map(|(_, size)| size)
        .sum();
    (bytes, counts.len())
}

/// Runs `trace` through a cache; returns hits per request (from request `from` on) and the
/// largest size the cache reached.
fn run(policy: EvictionPolicy, budget: usize, trace: &[Request], from: usize) -> (f64, usize) {
    let cache = policy_cache(policy, budget);
    let mut hits = 0usize;
    let mut peak = 0usize;
    for (i, r) in trace.iter().enumerate() {
        if cache.load(&r.key, Some(r.page)).is_some() {
            if i >= from {
                hits += 1;
            }
        } else {
            let _ = cache.save(r.key, program(&r.key, r.size), Some(r.page));
            peak = peak.max(cache.size_bytes());
        }
    }
    (hits as f64 / (trace.len() - from) as f64, peak)
}

/// A JSON row: the miss rates of the default policy (ours) and of LRU (baseline) from hit
/// rates per policy.
fn miss_row(metric: String, by_policy: &HashMap<EvictionPolicy, f64>) -> Row {
    Row {
        metric,
        unit: "misses per request",
        ours: 1.0 - by_policy[&EvictionPolicy::default()],
        baseline: 1.0 - by_policy[&EvictionPolicy::Lru],
        ratio_note: "default policy / LRU miss rate (lower is better)",
    }
}

fn main() {
    let sizes = measured_sizes().unwrap_or_else(synthetic_sizes);
    if !sizes.measured {
        println!("NOTE: no GL driver: the program sizes below are SYNTHETIC, not measured");
    }
    let total: usize = sizes.sizes.iter().sum();
    let mut sorted = sizes.sizes.clone();
    sorted.sort_unstable();
    println!("sizes: {}", sizes.label);
    println!(
        "stored size per program: median {:.1} KiB, p10 {:.1} KiB, p90 {:.1} KiB, max {:.1} KiB; \
         {:.2} MiB in all",
        sorted[sorted.len() / 2] as f64 / 1024.0,
        sorted[sorted.len() / 10] as f64 / 1024.0,
        sorted[sorted.len() * 9 / 10] as f64 / 1024.0,
        sorted[sorted.len() - 1] as f64 / 1024.0,
        total as f64 / (1 << 20) as f64
    );
    let s = &sizes.sizes;
    let workloads: [(&str, Vec<Request>); 4] = [
        ("cyclic", cyclic(s, s.len(), 8, 1)),
        ("multi-tab", multi_tab(s, 3000, 10)),
        ("scan+hot", scan_hot(s, 60_000, 10_000)),
        ("mix", mix(s)),
    ];
    let default = EvictionPolicy::default();
    let tag = if sizes.measured {
        ""
    } else {
        " (SYNTHETIC sizes)"
    };
    let mut rows = Vec::new();

    println!("\nhit rate per request (first-time misses included), budget = % of working set");
    print!("{:<10} {:>5} {:>9}", "workload", "budget", "MiB");
    for name in EvictionPolicy::ALL.map(label) {
        print!(" {name:>12}");
    }
    println!(" {:>8}", "ceiling");
    for (name, trace) in &workloads {
        let (ws, distinct) = working_set(trace);
        let ceiling = 1.0 - distinct as f64 / trace.len() as f64;
        for pct in FRACTIONS {
            let budget = ws * pct / 100;
            print!(
                "{name:<10} {pct:>5}% {:>9.2}",
                budget as f64 / (1 << 20) as f64
            );
            let mut by_policy = HashMap::new();
            for policy in EvictionPolicy::ALL {
                let (rate, peak) = run(policy, budget, trace, 0);
                assert!(peak <= budget, "{policy:?} went over its budget");
                by_policy.insert(policy, rate);
                print!(" {:>11.1}%", rate * 100.0);
            }
            println!(" {:>7.1}%", ceiling * 100.0);
            rows.push(miss_row(
                format!("{name} at {pct}% of the working set{tag}"),
                &by_policy,
            ));
        }
    }

    // The reported case: 5.4 MB of programs in a fixed cycle under the 2 MiB mobile budget.
    let mut app = Vec::new();
    while app.iter().sum::<usize>() < APP_BYTES {
        app.push(s[app.len() % s.len()]);
    }
    let app_bytes: usize = app.iter().sum();
    let trace = cyclic(&app, app.len(), 10, 7);
    println!(
        "\n{}-program app ({:.2} MB, {:.1}x the budget) cycled 10 times under the 2 MiB mobile \
         budget: hit rate on passes 2-10",
        app.len(),
        app_bytes as f64 / 1e6,
        app_bytes as f64 / MOBILE_BUDGET as f64
    );
    let mut by_policy = HashMap::new();
    for (policy, name) in EvictionPolicy::ALL.map(|p| (p, label(p))) {
        let (rate, peak) = run(policy, MOBILE_BUDGET, &trace, app.len());
        assert!(peak <= MOBILE_BUDGET, "{policy:?} went over its budget");
        by_policy.insert(policy, rate);
        println!("  {name:<12} {:>5.1}%", rate * 100.0);
    }
    rows.push(miss_row(
        format!("5.4 MB cycle, 2 MiB budget, passes 2-10{tag}"),
        &by_policy,
    ));
    let distinct: HashSet<ProgramKey> = trace.iter().map(|r| r.key).collect();
    assert_eq!(distinct.len(), app.len());
    println!("\ndefault policy: {default:?}");
    report("program_cache_policy", &rows);
}
