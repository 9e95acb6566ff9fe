//! Startup: a fresh GPU process linking its programs, with our disk cache versus Mesa's own
//! shader cache; the disk loader's throughput; LZ4 on versus off.
//!
//! `cargo bench -p gpusvc --bench startup`
//!
//! Every measured run is a fresh process: `gpusvc demo --single-pass` (a hidden mode of the
//! demo), built first with `cargo build --release -p gpusvc` (or `GPUSVC_BIN=<path>` to use a
//! binary you built). The time is taken by this process, from just before the spawn to the moment
//! the child reports that every program of the corpus is linked: exec, dynamic loading, EGL and
//! context creation, corpus parsing, the disk cache's open + startup load, and the compile/link
//! pass. Five cases, `GPUSVC_BENCH_REPS` runs each (default 5 on piglit, 31 on glmark2),
//! interleaved (cold first in each round, the four warm cases taking turns after it):
//! * **cold**: a fresh `MESA_SHADER_CACHE_DIR`, our disk cache empty (a new folder each run);
//! * **ours warm**: a `MESA_SHADER_CACHE_DIR` that holds none of the corpus (primed once per
//!   corpus by a child that only opens a context, so the driver has set its cache folder up, as
//!   on any machine where GL ran before; checked unchanged after every warm run;
//!   `GPUSVC_BENCH_FRESH_DRIVER_CACHE=1` gives a fresh folder each run instead, for a driver
//!   that caches native code at `glProgramBinary`), our disk cache populated by an untimed
//!   cold run before the rounds (topped up by more runs when it dropped writes), and a
//!   `RestoreAhead` started as the cache opens (`--restore-ahead`: a second thread with a
//!   context in the host's share group restores the stored programs while the host parses its
//!   corpus and links; a hit takes the program restored there, or restores it itself when the
//!   thread has not reached it);
//! * **ours warm, one thread**: the same without the restore-ahead, every binary restored on
//!   the host's thread (the figure before restore-ahead);
//! * **Mesa warm** (the peer): no program cache at all (`--plain-driver`: compile, link, reflect
//!   straight on the driver; the reflection is what our manager hands its host for each
//!   program, read from the driver on a cache hit too: attributes, uniforms, the interface), `MESA_SHADER_CACHE_DIR` populated by a previous such run and
//!   reused;
//! * **restore floor** (for reference, not a cache; one thread): as ours warm up to the pass, then every
//!   stored program decoded first (its time, `prep_ms`, taken out of the total; the loader's
//!   decoding after the load off, so nothing else decodes meanwhile), and a pass that
//!   only hands each binary to the driver (`--restore-floor`): what no cache that restores with
//!   `glProgramBinary` on the host's thread alone can beat here, since the driver's restore is
//!   all it times.
//!
//! Corpora, one after the other, each with its own table and JSON metrics
//! (`startup_<corpus>_ours_warm_vs_mesa_warm`, `link_pass_<corpus>_ours_warm_vs_mesa_warm`, ...):
//! * piglit (`GPUSVC_PIGLIT_DIR`, default `<workspace>/target/corpora/piglit/tests`, filled by
//!   `scripts/fetch-corpus`), every distinct vertex + fragment program; without it, the built-in
//!   corpus (`builtin`), with a printed note;
//! * glmark2 (`GPUSVC_GLMARK2_DIR`, default `<workspace>/target/corpora/glmark2/shaders`, filled
//!   by `scripts/fetch-corpus glmark2`): the programs glmark2's scenes build
//!   (`corpus::glmark2`); without it, a printed note and no glmark2 rows.
//!
//! In both warm cases the child acts as a host building its programs at startup: each program's
//! shaders are let go after its link, and the linked programs are kept until the child has
//! reported (deleting them is not part of linking them). The link pass is the wall time of that
//! loop in both cases.
//!
//! `GPUSVC_CORPUS_LIMIT` samples each corpus down. The link-pass-only ratio compares our pass
//! plus the time the child waited for our disk load against Mesa's pass; each table is followed
//! by where the link pass's time went (failing programs, cache hits and binary restores,
//! driver compiles; Mesa: compile, link, reflection).
//!
//! Then, in this process, over the entries the first corpus's populating runs wrote
//! (re-stored under a synthetic stamp, so no GL is needed here): the loader's throughput
//! (cache open + `wait_until_loaded`, MB of entry files per second; the decoding after the
//! load off, see `disk_config`) against plain sequential `std::fs::read` of the same files —
//! with the `load.pack` the previous load wrote, as every start but the first after a change
//! has it, and without it (deleted before the load: every entry from its file) — and LZ4 on
//! versus off (bytes on disk, load time), `GPUSVC_BENCH_LOAD_REPS` rounds (default 21).
//! Results: a table and `target/bench/program_cache_startup.json`.
//! `GPUSVC_BENCH_LOADER_STORE=<cache folder>` runs the loader part alone, over the entries of a
//! disk cache folder you have (no GL, no JSON).

use bench_support as support;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use program_cache::disk::{self, inspect};
use program_cache::{
    CacheConfig, CachedProgram, CompatibilityStamp, DiskConfig, ProgramCache, ProgramKey,
};
use support::{Row, median, report};

const DEFAULT_REPS: usize = 5;
/// Runs per case on glmark2 by default: a run there takes a tenth of a piglit run, and its
/// totals (some 70 ms) move by tens of ms with the machine, so a median needs more of them.
const GLMARK2_REPS: usize = 31;
/// At most this many runs to fill our disk cache with every program of the corpus.
const POPULATE_ATTEMPTS: usize = 6;
/// At most this many runs to fill Mesa's shader cache.
const MESA_POPULATE_RUNS: usize = 6;
/// Loader rounds by default (`GPUSVC_BENCH_LOAD_REPS` sets another number).
const LOAD_REPS: usize = 21;

fn fail(what: impl std::fmt::Display) -> ! {
    eprintln!("startup bench: {what}");
    std::process::exit(1)
}

fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| fail(format!("{name}={v:?} is not a number"))),
        Err(_) => default,
    }
}

fn workspace() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

/// The release `gpusvc` binary: `GPUSVC_BIN`, else built now with cargo.
fn gpusvc_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("GPUSVC_BIN") {
        // cargo runs benches in the package folder; a relative path is the workspace's.
        let bin = PathBuf::from(bin);
        return if bin.is_relative() {
            workspace().join(bin)
        } else {
            bin
        };
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    println!("building the gpusvc binary: cargo build --release -p gpusvc");
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "gpusvc", "--bin", "gpusvc"])
        .current_dir(workspace())
        .status()
        .unwrap_or_else(|e| fail(format!("running cargo: {e}")));
    if !status.success() {
        fail(format!("cargo build --release -p gpusvc failed ({status})"));
    }
    let bin = target_dir().join("release/gpusvc");
    if !bin.is_file() {
        fail(format!("no binary at {}", bin.display()));
    }
    bin
}

/// One corpus the startup cases run on.
struct Corpus {
    /// Short name for metric names: `piglit`, `builtin` or `glmark2`.
    key: &'static str,
    /// The child's corpus arguments.
    args: Vec<String>,
    /// What it is, for the table.
    label: String,
    /// Fresh processes per case: `GPUSVC_BENCH_REPS`, else the corpus's default.
    reps: usize,
}

/// The corpora: piglit (else the built-in corpus, with a note) and glmark2 (when fetched, else
/// a note).
fn corpora() -> Vec<Corpus> {
    let reps = |default| env_number("GPUSVC_BENCH_REPS", default).max(1);
    let limit: Vec<String> = match std::env::var("GPUSVC_CORPUS_LIMIT") {
        Ok(limit) => vec!["--limit".into(), limit],
        Err(_) => Vec::new(),
    };
    let dir = std::env::var_os("GPUSVC_PIGLIT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/corpora/piglit/tests"));
    let mut out = Vec::new();
    if dir.is_dir() {
        out.push(Corpus {
            key: "piglit",
            args: [
                vec!["--corpus".to_string(), dir.display().to_string()],
                limit.clone(),
            ]
            .concat(),
            label: format!("piglit at {}", dir.display()),
            reps: reps(DEFAULT_REPS),
        });
    } else {
        println!(
            "note: no piglit corpus at {} (run scripts/fetch-corpus); using the built-in corpus",
            dir.display()
        );
        out.push(Corpus {
            key: "builtin",
            args: limit.clone(),
            label: "built-in".to_string(),
            reps: reps(DEFAULT_REPS),
        });
    }
    let dir = std::env::var_os("GPUSVC_GLMARK2_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/corpora/glmark2/shaders"));
    if dir.is_dir() {
        out.push(Corpus {
            key: "glmark2",
            args: [
                vec!["--glmark2".to_string(), dir.display().to_string()],
                limit,
            ]
            .concat(),
            label: format!("glmark2 at {}", dir.display()),
            reps: reps(GLMARK2_REPS),
        });
    } else {
        println!(
            "note: no glmark2 corpus at {} (run scripts/fetch-corpus glmark2); glmark2 case skipped",
            dir.display()
        );
    }
    out
}

/// How the child runs its programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Cold,
    OursWarm,
    OursOneThread,
    MesaWarm,
    RestoreFloor,
}

impl Case {
    fn label(self) -> &'static str {
        match self {
            Case::Cold => "cold (both caches empty)",
            Case::OursWarm => "ours warm (our disk cache)",
            Case::OursOneThread => "ours warm, one thread",
            Case::MesaWarm => "Mesa warm (its shader cache)",
            Case::RestoreFloor => "restore floor (binaries only)",
        }
    }
}

/// What one child reported.
#[derive(Debug, Clone, Default)]
struct Probe {
    /// Spawn to "all programs linked", measured here (less `prep_ms`).
    wall_ms: f64,
    /// `--restore-floor`: decoding every stored program before its pass, taken out of `wall_ms`.
    prep_ms: f64,
    /// `--restore-floor`: binaries the driver refused.
    refused: usize,
    programs: usize,
    linked: usize,
    hits: usize,
    loaded: usize,
    context_ms: f64,
    corpus_ms: f64,
    /// Open + startup load of our disk cache (in the background, beside the corpus parse).
    load_ms: f64,
    /// How long the child was blocked waiting for that load.
    wait_ms: f64,
    pass_ms: f64,
    /// Of `pass_ms`: programs that failed to compile or link; of those, the ones with a shader
    /// that failed to compile.
    failed_ms: f64,
    compile_failed_ms: f64,
    compile_failures: usize,
    link_failures: usize,
    /// Ours: programs served from the cache; programs compiled and linked on the driver.
    hit_ms: f64,
    relinked_ms: f64,
    /// Ours: the cache's histograms over the pass (compile-status hits, driver compiles,
    /// binary restores, links on a miss). Mesa: `compile_ms`, `link_ms`, `reflect_ms` of the
    /// linked programs.
    status_hit_ms: f64,
    compile_ms: f64,
    binary_hit_ms: f64,
    link_ms: f64,
    reflect_ms: f64,
    writes: u64,
    dropped: u64,
    /// `--restore-ahead`: programs the restore-ahead thread restored, and the host took.
    ahead_restored: u64,
    ahead_taken: u64,
    /// How often, and how long in all, the host waited for a restore of its key under way.
    ahead_waited: u64,
    ahead_waited_ms: f64,
}

fn field<T: std::str::FromStr + Default>(line: &str, name: &str) -> T {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_default()
}

/// Runs one fresh `gpusvc demo --single-pass` process.
fn probe(
    bin: &Path,
    corpus: &[String],
    extra: &[&str],
    cache_dir: Option<&Path>,
    mesa_dir: &Path,
) -> Probe {
    let mut command = Command::new(bin);
    command
        .args(["demo", "--single-pass", "--driver-cache-dir"])
        .arg(mesa_dir)
        .args(corpus)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    match cache_dir {
        Some(dir) => command.arg("--cache-dir").arg(dir),
        None => command.arg("--no-disk-cache"),
    };
    let start = Instant::now();
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| fail(format!("spawning {}: {e}", bin.display())));
    let stdout = child.stdout.take().expect("piped");
    let mut probe = Probe::default();
    let mut reported = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap_or_else(|e| fail(format!("reading the child: {e}")));
        if line.starts_with("gpusvc-startup ") {
            probe.prep_ms = field(&line, "prep_ms");
            probe.wall_ms = start.elapsed().as_secs_f64() * 1e3 - probe.prep_ms;
            probe.refused = field(&line, "refused");
            probe.programs = field(&line, "programs");
            probe.linked = field(&line, "linked");
            probe.hits = field(&line, "hits");
            probe.loaded = field(&line, "loaded");
            probe.context_ms = field(&line, "context_ms");
            probe.corpus_ms = field(&line, "corpus_ms");
            probe.load_ms = field(&line, "load_ms");
            probe.wait_ms = field(&line, "wait_ms");
            probe.pass_ms = field(&line, "pass_ms");
            probe.failed_ms = field(&line, "failed_ms");
            probe.compile_failed_ms = field(&line, "compile_failed_ms");
            probe.compile_failures = field(&line, "compile_failures");
            probe.link_failures = field(&line, "link_failures");
            probe.hit_ms = field(&line, "hit_ms");
            probe.relinked_ms = field(&line, "relinked_ms");
            probe.status_hit_ms = field(&line, "status_hit_ms");
            probe.compile_ms = field(&line, "compile_ms");
            probe.binary_hit_ms = field(&line, "binary_hit_ms");
            probe.link_ms = field(&line, "link_ms");
            probe.reflect_ms = field(&line, "reflect_ms");
            reported = true;
        } else if line.starts_with("gpusvc-startup-ahead ") {
            probe.ahead_restored = field(&line, "restored");
            probe.ahead_taken = field(&line, "taken");
            probe.ahead_waited = field(&line, "waited");
            probe.ahead_waited_ms = field::<f64>(&line, "waited_us") / 1e3;
        } else if line.starts_with("gpusvc-startup-done ") {
            probe.writes = field(&line, "writes");
            probe.dropped = field(&line, "dropped");
        }
    }
    let status = child
        .wait()
        .unwrap_or_else(|e| fail(format!("waiting for the child: {e}")));
    if !status.success() || !reported {
        fail(format!(
            "`{} demo --single-pass` failed ({status}); exit 3 means no GL context",
            bin.display()
        ));
    }
    probe
}

/// Files and bytes below `dir`.
fn tree_size(dir: &Path) -> (usize, u64) {
    let files = listing(dir);
    (files.len(), files.iter().map(|(_, len, _)| len).sum())
}

/// One file of a listing: its path relative to the listed folder, length and modification time.
type Listed = (PathBuf, u64, Option<std::time::SystemTime>);

/// Every file below `dir`, sorted.
fn listing(dir: &Path) -> Vec<Listed> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<Listed>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => walk(root, &path, out),
                Ok(_) => {
                    let meta = entry.metadata().ok();
                    let len = meta.as_ref().map_or(0, |m| m.len());
                    let modified = meta.and_then(|m| m.modified().ok());
                    let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
                    out.push((rel, len, modified));
                }
                Err(_) => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A driver shader-cache folder as on any machine where GL ran before, holding no program of
/// the corpus: a child with the corpus's arguments (so the same kind of context) opens a
/// context with it (the driver sets the folder up: Mesa 22.3 creates `mesa_shader_cache/index`,
/// 1.3 MB), waits until the folder settles and exits, compiling nothing. Returns the folder
/// and what it holds, which no warm run may change.
fn primed_driver_cache(bin: &Path, corpus: &[String]) -> (tempfile::TempDir, Vec<Listed>) {
    let dir = tempdir("gpusvc-startup-bench-mesa-primed-");
    let output = Command::new(bin)
        .args([
            "demo",
            "--single-pass",
            "--prime-driver-cache",
            "--driver-cache-dir",
        ])
        .arg(dir.path())
        .args(corpus)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| fail(format!("spawning {}: {e}", bin.display())));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let Some(line) = stdout
        .lines()
        .find(|l| l.starts_with("gpusvc-startup-primed "))
        .filter(|_| output.status.success())
    else {
        fail(format!(
            "priming the driver's shader cache failed ({}): {stdout}",
            output.status
        ))
    };
    let held = listing(dir.path());
    let bytes: u64 = held.iter().map(|(_, len, _)| len).sum();
    // The child waited until the folder stopped changing (giving up after 60 s): what it saw
    // last is what is there now, or the driver is still writing.
    let seen: (usize, u64) = (field(line, "files"), field(line, "bytes"));
    if seen != (held.len(), bytes) {
        fail(format!(
            "the primed driver cache did not settle: the child saw {} files, {} bytes; now {} \
             files, {bytes} bytes",
            seen.0,
            seen.1,
            held.len()
        ));
    }
    println!(
        "driver's shader cache for our warm runs: primed by a context-only run, {} files, \
         {bytes} bytes",
        held.len()
    );
    (dir, held)
}

/// Our disk cache, filled by a cold run before the rounds (untimed, as Mesa's is): every
/// linked program must be written, and a failure record for each refused one (negative
/// results). The cache drops writes rather than block the host when its write queue is full (a
/// disk slow for a moment), so while a run dropped some, another run into the same folder
/// writes what is missing (its other programs are hits), at most `POPULATE_ATTEMPTS` runs in
/// all; the warm runs then check that every program is a hit. Returns the folder and how many
/// programs the runs linked.
fn populate_ours(bin: &Path, corpus: &[String]) -> (tempfile::TempDir, usize) {
    let dir = tempdir("gpusvc-startup-bench-ours-");
    let mut linked = None;
    for attempt in 1..=POPULATE_ATTEMPTS {
        let fresh_mesa = tempdir("gpusvc-startup-bench-mesa-fresh-");
        let p = probe(bin, corpus, &[], Some(dir.path()), fresh_mesa.path());
        println!(
            "populating our disk cache, run {attempt}: {} programs linked in {:.0} ms ({} \
             hits); {} writes, {} dropped",
            p.linked, p.wall_ms, p.hits, p.writes, p.dropped
        );
        let first = *linked.get_or_insert(p.linked);
        if p.linked != first {
            fail(format!(
                "populating run {attempt} linked {} programs, the first {first}",
                p.linked
            ));
        }
        let complete = if attempt == 1 {
            (p.writes as usize) >= p.linked
        } else {
            true
        };
        if p.dropped == 0 && complete {
            return (dir, first);
        }
    }
    fail(format!(
        "{POPULATE_ATTEMPTS} populating runs each dropped writes"
    ))
}

fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .unwrap_or_else(|e| fail(format!("temporary folder: {e}")))
}

fn med(probes: &[Probe], f: impl Fn(&Probe) -> f64) -> f64 {
    median(&mut probes.iter().map(f).collect::<Vec<_>>())
}

/// Every entry of a store folder, decoded (the entries of the cold run).
fn read_entries(root: &Path) -> Vec<(ProgramKey, CachedProgram)> {
    let stores = inspect::scan(root).unwrap_or_else(|e| fail(format!("{}: {e}", root.display())));
    let mut out = Vec::new();
    for entry in stores.iter().flat_map(|s| &s.entries) {
        let bytes = std::fs::read(&entry.path)
            .unwrap_or_else(|e| fail(format!("{}: {e}", entry.path.display())));
        let header = disk::decode_header(&bytes)
            .unwrap_or_else(|e| fail(format!("{}: {e}", entry.path.display())));
        let (_, program) = disk::decode(&bytes, &header.stamp_hash, Some(&entry.key))
            .unwrap_or_else(|e| fail(format!("{}: {e}", entry.path.display())));
        out.push((entry.key, program));
    }
    out
}

fn synthetic_stamp() -> CompatibilityStamp {
    CompatibilityStamp {
        gl_vendor: "startup bench".into(),
        gl_renderer: "re-stored corpus entries".into(),
        gl_version: "0".into(),
        context: "OpenGL core profile".into(),
        vendor_id: None,
        device_id: None,
        driver_build_id: None,
        host_product: "startup bench".into(),
        host_version: "1".into(),
        format_version: disk::FORMAT_VERSION,
        pointer_width: usize::BITS,
    }
}

const BIG_BUDGET: usize = 1 << 30;

/// The loader section's disk config. The decoding after the load is off: this section times
/// the load alone (until `wait_until_loaded` returns), over many loads in one process, and the
/// decoding each load's thread starts right after it is timed nowhere, yet it may change what
/// the next round finds. Over 10 loader-only runs each, alternating, our load's median was
/// 3.60 ms with it on and 3.45 ms with it off (plain reads 3.37 and 3.38 ms; the ranges
/// overlap); a host loads once per process. The startup cases run with it on, as hosts do.
/// The disk budget is far above either store and its `load.pack` (the default, the memory
/// budget, has no room for the uncompressed store's pack, and LZ4 on versus off would then
/// compare a load with a pack to one without).
fn disk_config(root: &Path, compress: bool) -> DiskConfig {
    DiskConfig {
        compress,
        write_queue: 1 << 16,
        decode_after_load: false,
        budget_bytes: Some(1 << 30),
        ..DiskConfig::new(root, synthetic_stamp())
    }
}

/// Stores `entries` in a new folder; returns it, the entry files and their total bytes.
fn store(
    entries: &[(ProgramKey, CachedProgram)],
    compress: bool,
) -> (tempfile::TempDir, Vec<PathBuf>, u64) {
    let root = tempdir("gpusvc-startup-bench-store-");
    let cache = ProgramCache::builder(CacheConfig::with_budget(BIG_BUDGET))
        .disk(disk_config(root.path(), compress))
        .build();
    cache.wait_until_loaded(Duration::from_secs(60));
    for (key, program) in entries {
        cache
            .save(*key, program.clone(), None)
            .unwrap_or_else(|e| fail(format!("save: {e}")));
    }
    cache.flush_disk();
    let counters = cache.disk_counters().unwrap_or_default();
    if counters.writes != entries.len() as u64 {
        fail(format!(
            "{} of {} entries written ({counters:?})",
            counters.writes,
            entries.len()
        ));
    }
    drop(cache);
    let stores = inspect::scan(root.path()).unwrap_or_else(|e| fail(e));
    let files: Vec<PathBuf> = stores
        .iter()
        .flat_map(|s| s.entries.iter().map(|e| e.path.clone()))
        .collect();
    let bytes = stores.iter().map(inspect::StoreInfo::bytes).sum();
    (root, files, bytes)
}

/// Opens a cache on `root` and waits for the startup load; returns the time in ms.
/// A memory budget that holds every entry of `entries` decoded (twice over), and at least the
/// desktop default.
fn load_budget(entries: &[(ProgramKey, CachedProgram)]) -> usize {
    let decoded: usize = entries.iter().map(|(_, p)| p.stored_size()).sum();
    (2 * decoded).max(program_cache::DESKTOP_BUDGET)
}

/// One timed cache open + `wait_until_loaded`: the time in ms, and how many entries came from
/// `load.pack` (the load report's count).
fn timed_load(root: &Path, compress: bool, expect: usize, budget: usize) -> (f64, usize) {
    let start = Instant::now();
    let cache: Arc<ProgramCache> = ProgramCache::builder(CacheConfig::with_budget(budget))
        .disk(disk_config(root, compress))
        .build();
    let report = cache
        .wait_until_loaded(Duration::from_secs(120))
        .unwrap_or_else(|| fail("the startup load did not finish in 120 s"));
    let ms = start.elapsed().as_secs_f64() * 1e3;
    if report.loaded != expect {
        fail(format!(
            "loaded {} of {expect} entries ({report:?})",
            report.loaded
        ));
    }
    (ms, report.from_pack)
}

/// Deletes the `load.pack` of the one store under `root` (the bench's own store), so the next
/// load reads every entry from its file, as the first start after the store changed does.
fn remove_pack(root: &Path) {
    for store in inspect::scan(root).unwrap_or_else(|e| fail(e)) {
        match std::fs::remove_file(store.dir.join("load.pack")) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => fail(format!("{}: {e}", store.dir.display())),
        }
    }
}

/// Plain sequential reads of `files`; returns the time in ms.
fn timed_reads(files: &[PathBuf]) -> f64 {
    let start = Instant::now();
    for f in files {
        std::hint::black_box(std::fs::read(f).unwrap_or_else(|e| fail(e)));
    }
    start.elapsed().as_secs_f64() * 1e3
}

/// The four cases on one corpus.
struct Startup {
    cold: Vec<Probe>,
    ours: Vec<Probe>,
    one_thread: Vec<Probe>,
    mesa: Vec<Probe>,
    floor: Vec<Probe>,
    /// Our disk cache as the populating runs left it (the warm runs' folder).
    populated: tempfile::TempDir,
}

/// Runs cold / ours warm / Mesa warm, `reps` fresh processes each, interleaved, on `corpus`.
fn run_corpus(bin: &Path, corpus: &[String], reps: usize) -> Startup {
    // Our disk cache, populated by a cold run; Mesa's cache, populated by plain runs.
    let (populated, populated_linked) = populate_ours(bin, corpus);
    let mesa_warm = tempdir("gpusvc-startup-bench-mesa-");
    // Mesa writes its cache from a background queue that is not drained when a process exits
    // (headless-gl never terminates the EGL display), so on a busy machine a run can lose part
    // of what it compiled. The populating runs wait until the cache folder settles, and repeat
    // until a run adds nothing: the peer gets its whole cache.
    let mut mesa_bytes = 0;
    for attempt in 1..=MESA_POPULATE_RUNS {
        let p = probe(
            bin,
            corpus,
            &["--plain-driver", "--settle-driver-cache"],
            None,
            mesa_warm.path(),
        );
        let (files, bytes) = tree_size(mesa_warm.path());
        println!(
            "populating Mesa's shader cache, run {attempt}: {} programs linked in {:.0} ms; \
             cache now {files} files, {bytes} bytes",
            p.linked, p.wall_ms
        );
        if bytes == mesa_bytes {
            break;
        }
        mesa_bytes = bytes;
    }

    // Our warm runs use a driver cache folder that exists but holds none of these programs (the
    // state of any machine where GL ran before): a fresh folder each run would charge them the
    // driver's one-time setup of its cache folder, which Mesa's warm runs (their folder
    // populated) never pay. On llvmpipe, `glProgramBinary` builds no native code and touches
    // no cache (its shader variants are built at draw time), so nothing is added to the folder:
    // checked after every run, the first round's runs waiting until the folder settles (the
    // driver writes from a queue that a process exit drops). A driver that builds and caches
    // native code at restore fails that check: `GPUSVC_BENCH_FRESH_DRIVER_CACHE=1` gives our
    // warm runs a fresh folder each run instead (and charges them the folder's setup).
    let fresh_driver_cache = std::env::var_os("GPUSVC_BENCH_FRESH_DRIVER_CACHE").is_some();
    let (primed, primed_files) = primed_driver_cache(bin, corpus);
    let unchanged = |case: Case| {
        if fresh_driver_cache {
            return;
        }
        let now = listing(primed.path());
        if now != primed_files {
            fail(format!(
                "{}: the driver's primed shader cache changed during the run ({} files before, \
                 {} after): the driver compiled or cached something on a warm run (set \
                 GPUSVC_BENCH_FRESH_DRIVER_CACHE=1 on such a driver)",
                case.label(),
                primed_files.len(),
                now.len()
            ));
        }
    };
    let mut runs: Vec<(Case, Probe)> = Vec::new();
    for rep in 0..reps {
        // The warm cases take turns right after the cold run (whose writes the system may still
        // be flushing), so none is always the one that follows it.
        let mut warm = [
            Case::OursWarm,
            Case::MesaWarm,
            Case::RestoreFloor,
            Case::OursOneThread,
        ];
        let turns = rep % warm.len();
        warm.rotate_left(turns);
        for case in std::iter::once(Case::Cold).chain(warm) {
            // Our warm runs' driver cache: the primed folder, or a fresh one each run.
            let fresh = fresh_driver_cache.then(|| tempdir("gpusvc-startup-bench-mesa-fresh-"));
            let warm_driver_cache = fresh.as_ref().map_or(primed.path(), |t| t.path());
            let p = match case {
                Case::Cold => {
                    let ours = tempdir("gpusvc-startup-bench-cold-");
                    // Both caches empty: the driver's folder too (a fresh one each run).
                    let fresh_mesa = tempdir("gpusvc-startup-bench-mesa-fresh-");
                    probe(bin, corpus, &[], Some(ours.path()), fresh_mesa.path())
                }
                Case::OursWarm | Case::OursOneThread => {
                    let mut extra = Vec::new();
                    if case == Case::OursWarm {
                        extra.push("--restore-ahead");
                    }
                    if rep == 0 {
                        extra.push("--settle-driver-cache");
                    }
                    let p = probe(
                        bin,
                        corpus,
                        &extra,
                        Some(populated.path()),
                        warm_driver_cache,
                    );
                    unchanged(case);
                    if p.hits != p.linked {
                        fail(format!(
                            "warm run: {} cache hits of {} linked programs",
                            p.hits, p.linked
                        ));
                    }
                    p
                }
                Case::MesaWarm => probe(bin, corpus, &["--plain-driver"], None, mesa_warm.path()),
                Case::RestoreFloor => {
                    let p = probe(
                        bin,
                        corpus,
                        if rep == 0 {
                            &["--restore-floor", "--settle-driver-cache"]
                        } else {
                            &["--restore-floor"]
                        },
                        Some(populated.path()),
                        warm_driver_cache,
                    );
                    unchanged(case);
                    if p.refused > 0 {
                        fail(format!(
                            "restore floor: the driver refused {} binaries",
                            p.refused
                        ));
                    }
                    // Every program the populating run linked (what ours warm restores), no fewer.
                    if p.linked != populated_linked {
                        fail(format!(
                            "restore floor: {} binaries restored, the populating run linked {}",
                            p.linked, populated_linked
                        ));
                    }
                    p
                }
            };
            println!(
                "  run {}/{reps} {:<30} {:>9.1} ms to all linked ({} of {} linked, {} hits)",
                rep + 1,
                case.label(),
                p.wall_ms,
                p.linked,
                p.programs,
                p.hits
            );
            runs.push((case, p));
        }
    }
    let of = |case: Case| -> Vec<Probe> {
        runs.iter()
            .filter(|(c, _)| *c == case)
            .map(|(_, p)| p.clone())
            .collect()
    };
    Startup {
        cold: of(Case::Cold),
        ours: of(Case::OursWarm),
        one_thread: of(Case::OursOneThread),
        mesa: of(Case::MesaWarm),
        floor: of(Case::RestoreFloor),
        populated,
    }
}

/// Prints one corpus's table; returns its rows for the JSON.
fn startup_table(key: &str, label: &str, s: &Startup, reps: usize) -> Vec<Row> {
    let (cold, ours, mesa, floor) = (&s.cold, &s.ours, &s.mesa, &s.floor);
    println!(
        "\n{label}: process start -> all {} programs linked ({} linked), fresh process per run, \
         medians of {reps}",
        cold[0].programs, cold[0].linked
    );
    println!(
        "{:<30} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9} {:>8}",
        "case", "total ms", "context", "corpus", "disk load*", "waited", "link", "vs cold"
    );
    let cold_total = med(cold, |p| p.wall_ms);
    let one = &s.one_thread;
    for (case, probes) in [
        (Case::Cold, cold),
        (Case::OursWarm, ours),
        (Case::OursOneThread, one),
        (Case::MesaWarm, mesa),
        (Case::RestoreFloor, floor),
    ] {
        let total = med(probes, |p| p.wall_ms);
        println!(
            "{:<30} {:>9.1} {:>9.1} {:>9.1} {:>11.1} {:>9.1} {:>9.1} {:>7.2}x",
            case.label(),
            total,
            med(probes, |p| p.context_ms),
            med(probes, |p| p.corpus_ms),
            med(probes, |p| p.load_ms),
            med(probes, |p| p.wait_ms),
            med(probes, |p| p.pass_ms),
            cold_total / total
        );
    }
    println!(
        "* open + startup load of our disk cache, in the background beside the corpus parse; \
         `waited` is what the child was blocked on it. The rest of `total` is exec, dynamic \
         loading and process setup."
    );
    println!(
        "link pass, where the time went (ms, medians): ours warm: {:.1} on the {} + {} programs \
         that fail to compile / link ({:.1} on the compile failures), {:.1} on cache hits (of \
         which binary restore {:.1}, compile-status hits {:.1}), {:.1} on programs relinked, \
         {:.1} in driver compiles; Mesa warm: {:.1} on failing programs ({:.1} on the compile \
         failures), {:.1} compiling, {:.1} linking, {:.1} reflecting the linked ones",
        med(ours, |p| p.failed_ms),
        ours[0].compile_failures,
        ours[0].link_failures,
        med(ours, |p| p.compile_failed_ms),
        med(ours, |p| p.hit_ms),
        med(ours, |p| p.binary_hit_ms),
        med(ours, |p| p.status_hit_ms),
        med(ours, |p| p.relinked_ms),
        med(ours, |p| p.compile_ms),
        med(mesa, |p| p.failed_ms),
        med(mesa, |p| p.compile_failed_ms),
        med(mesa, |p| p.compile_ms),
        med(mesa, |p| p.link_ms),
        med(mesa, |p| p.reflect_ms),
    );
    let ours_total = med(ours, |p| p.wall_ms);
    let mesa_total = med(mesa, |p| p.wall_ms);
    println!(
        "headline ({key}): ours warm {ours_total:.1} ms vs Mesa warm {mesa_total:.1} ms: ratio \
         {:.3} ({})",
        ours_total / mesa_total,
        if ours_total < mesa_total {
            "our warm start beats Mesa's"
        } else {
            "our warm start does NOT beat Mesa's"
        }
    );
    // The same ratio round by round (each round's two warm runs are neighbours in time, so a
    // change in the machine's load between rounds cancels out), then its median.
    let mut paired: Vec<f64> = ours
        .iter()
        .zip(mesa)
        .map(|(o, m)| o.wall_ms / m.wall_ms)
        .collect();
    println!(
        "per-round ratio ({key}): median {:.3} over {} rounds (min {:.3}, max {:.3})",
        median(&mut paired),
        paired.len(),
        paired.iter().copied().fold(f64::INFINITY, f64::min),
        paired.iter().copied().fold(0.0, f64::max)
    );
    let ours_link = med(ours, |p| p.wait_ms + p.pass_ms);
    let mesa_link = med(mesa, |p| p.pass_ms);
    println!(
        "link pass ({key}, + the wait for our load): ours warm {ours_link:.1} ms vs Mesa warm \
         {mesa_link:.1} ms (ratio {:.3})",
        ours_link / mesa_link
    );
    let floor_total = med(floor, |p| p.wall_ms);
    let floor_link = med(floor, |p| p.wait_ms + p.pass_ms);
    let mut floor_paired: Vec<f64> = floor
        .iter()
        .zip(mesa)
        .map(|(f, m)| f.wall_ms / m.wall_ms)
        .collect();
    println!(
        "restore floor ({key}; {} binaries handed to the driver, nothing else in the pass; \
         decoding them first, {:.1} ms, left out): total {floor_total:.1} ms vs Mesa warm \
         {mesa_total:.1} ms, ratio {:.3} (per-round median {:.3}); pass {floor_link:.1} ms vs \
         Mesa's {mesa_link:.1} ms, ratio {:.3}; ours warm is {} it in total, {} in the pass",
        floor[0].linked,
        med(floor, |p| p.prep_ms),
        floor_total / mesa_total,
        median(&mut floor_paired),
        floor_link / mesa_link,
        above_below(ours_total - floor_total),
        above_below(ours_link - floor_link),
    );
    println!(
        "restore-ahead ({key}; ours warm restores on a second thread with a shared context, \
         started when the cache opens): medians {:.0} programs restored there, {:.0} taken by \
         the pass, the pass waited {:.0} times for a restore under way ({:.1} ms in all)",
        med(ours, |p| p.ahead_restored as f64),
        med(ours, |p| p.ahead_taken as f64),
        med(ours, |p| p.ahead_waited as f64),
        med(ours, |p| p.ahead_waited_ms),
    );
    let one_total = med(one, |p| p.wall_ms);
    let one_link = med(one, |p| p.wait_ms + p.pass_ms);
    let mut one_paired: Vec<f64> = one
        .iter()
        .zip(mesa)
        .map(|(o, m)| o.wall_ms / m.wall_ms)
        .collect();
    println!(
        "ours warm on one thread ({key}; no restore-ahead, every binary restored on the host's \
         thread): total {one_total:.1} ms vs Mesa warm {mesa_total:.1} ms, ratio {:.3} \
         (per-round median {:.3}); pass {one_link:.1} ms, ratio {:.3}",
        one_total / mesa_total,
        median(&mut one_paired),
        one_link / mesa_link,
    );
    vec![
        Row {
            metric: format!("startup_{key}_ours_warm_vs_mesa_warm"),
            unit: "ms",
            ours: ours_total,
            baseline: mesa_total,
            ratio_note: "ours warm / Mesa warm, process start to all linked (goal < 0.8)",
        },
        Row {
            metric: format!("link_pass_{key}_ours_warm_vs_mesa_warm"),
            unit: "ms",
            ours: ours_link,
            baseline: mesa_link,
            ratio_note: "ours warm / Mesa warm, the link pass alone (+ our load wait)",
        },
        Row {
            metric: format!("startup_{key}_ours_one_thread_vs_mesa_warm"),
            unit: "ms",
            ours: one_total,
            baseline: mesa_total,
            ratio_note: "ours warm without restore-ahead / Mesa warm, process start to all linked",
        },
        Row {
            metric: format!("link_pass_{key}_ours_one_thread_vs_mesa_warm"),
            unit: "ms",
            ours: one_link,
            baseline: mesa_link,
            ratio_note: "ours warm without restore-ahead / Mesa warm, the link pass alone",
        },
        Row {
            metric: format!("startup_{key}_restore_floor_vs_mesa_warm"),
            unit: "ms",
            ours: floor_total,
            baseline: mesa_total,
            ratio_note: "reference: binaries alone to the driver / Mesa warm, process start to all linked",
        },
        Row {
            metric: format!("link_pass_{key}_restore_floor_vs_mesa_warm"),
            unit: "ms",
            ours: floor_link,
            baseline: mesa_link,
            ratio_note: "reference: binaries alone to the driver / Mesa warm, the link pass alone",
        },
        Row {
            metric: format!("startup_{key}_ours_warm_vs_cold"),
            unit: "ms",
            ours: ours_total,
            baseline: cold_total,
            ratio_note: "ours warm / cold, process start to all linked",
        },
        Row {
            metric: format!("startup_{key}_mesa_warm_vs_cold"),
            unit: "ms",
            ours: mesa_total,
            baseline: cold_total,
            ratio_note: "peer: Mesa warm / cold (for reference)",
        },
    ]
}

/// "`d` ms above" or "`-d` ms below".
fn above_below(d: f64) -> String {
    if d >= 0.0 {
        format!("{d:.1} ms above")
    } else {
        format!("{:.1} ms below", -d)
    }
}

/// What the loader part measured.
struct LoaderFigures {
    load_mb_s: f64,
    read_mb_s: f64,
    /// The load with no `load.pack` (every entry from its file).
    files_mb_s: f64,
    lz4_bytes: u64,
    raw_bytes: u64,
    load_lz4: f64,
    load_raw: f64,
}

/// The loader part: `entries` stored with LZ4 and without, then cache open + wait against
/// plain sequential reads of the same files, interleaved, medians of [`LOAD_REPS`] rounds
/// (`GPUSVC_BENCH_LOAD_REPS`).
fn loader_section(entries: &[(ProgramKey, CachedProgram)]) -> LoaderFigures {
    let raw_program_bytes: usize = entries.iter().map(|(_, p)| p.binary.bytes.len()).sum();
    let (lz4_root, lz4_files, lz4_bytes) = store(entries, true);
    let (raw_root, _raw_files, raw_bytes) = store(entries, false);
    let n = entries.len();
    let budget = load_budget(entries);
    let (mut loads_lz4, mut loads_raw, mut reads) = (Vec::new(), Vec::new(), Vec::new());
    let (mut loads_files, mut packed) = (Vec::new(), Vec::new());
    // One untimed round so every file is in the page cache for both sides. It reads every
    // entry from its file, so it writes `load.pack` (at the cache's drop, untimed) — once
    // `entries/` has been left alone for a second (FORMAT.md, "The load pack"), as a host's
    // store is between two starts.
    std::thread::sleep(program_cache::disk::PACK_QUIET + Duration::from_millis(100));
    timed_load(lz4_root.path(), true, n, budget);
    timed_load(raw_root.path(), false, n, budget);
    timed_reads(&lz4_files);
    let reps = env_number("GPUSVC_BENCH_LOAD_REPS", LOAD_REPS).max(1);
    for _ in 0..reps {
        let (ms, from_pack) = timed_load(lz4_root.path(), true, n, budget);
        loads_lz4.push(ms);
        packed.push(from_pack as f64);
        reads.push(timed_reads(&lz4_files));
        let (ms, raw_from_pack) = timed_load(raw_root.path(), false, n, budget);
        if raw_from_pack != from_pack {
            fail(format!(
                "{from_pack} entries from the LZ4 store's pack, {raw_from_pack} from the \
                 uncompressed one's: LZ4 on versus off would not compare like with like"
            ));
        }
        loads_raw.push(ms);
        // The first start after the store changed: no pack (this load writes the next one).
        remove_pack(lz4_root.path());
        let (ms, from_pack) = timed_load(lz4_root.path(), true, n, budget);
        if from_pack != 0 {
            fail(format!("{from_pack} entries from a pack that was deleted"));
        }
        loads_files.push(ms);
    }
    // Where decoding went: one lookup of every key after the load (each decodes its entry; the
    // loader's decoding after the load is off in this section),
    // and the checks + LZ4 + postcard of `disk::decode` alone on bytes already in memory.
    let mut lookups: Vec<f64> = (0..reps)
        .map(|_| {
            let cache = ProgramCache::builder(CacheConfig::with_budget(budget))
                // Each entry decoded by its lookup, as timed here (the loader's decoding is off).
                .disk(disk_config(lz4_root.path(), true))
                .build();
            cache.wait_until_loaded(Duration::from_secs(120));
            let start = Instant::now();
            for (key, _) in entries {
                // A failure record (negative result) is found by load_failure, a program by load.
                let found = cache.load(key, None).or_else(|| cache.load_failure(key));
                std::hint::black_box(found.unwrap_or_else(|| fail("a miss")));
            }
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let lz4_bytes_in_memory: Vec<Vec<u8>> = lz4_files
        .iter()
        .map(|f| std::fs::read(f).unwrap_or_else(|e| fail(e)))
        .collect();
    let stamp_hash = synthetic_stamp().hash();
    let mut decodes: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            for bytes in &lz4_bytes_in_memory {
                std::hint::black_box(
                    disk::decode(bytes, &stamp_hash, None).unwrap_or_else(|e| fail(e)),
                );
            }
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let (lookup_ms, decode_ms) = (median(&mut lookups), median(&mut decodes));
    let (load_lz4, load_raw, read_lz4, load_files, from_pack) = (
        median(&mut loads_lz4),
        median(&mut loads_raw),
        median(&mut reads),
        median(&mut loads_files),
        median(&mut packed),
    );
    let mb = |bytes: u64, ms: f64| bytes as f64 / 1e6 / (ms / 1e3);
    println!(
        "\nloader over {n} entries ({raw_program_bytes} bytes of program binaries), page cache \
         warm, memory budget {budget} bytes, medians of {reps}:"
    );
    println!(
        "  cache open + wait_until_loaded (LZ4): {load_lz4:.2} ms = {:.0} MB/s of entry files; \
         plain std::fs::read of the same {} files: {read_lz4:.2} ms = {:.0} MB/s; ratio {:.2}",
        mb(lz4_bytes, load_lz4),
        lz4_files.len(),
        mb(lz4_bytes, read_lz4),
        read_lz4 / load_lz4
    );
    println!(
        "  entries taken from load.pack: median {from_pack:.0} of {n} per load (the load \
         report's count); without load.pack (deleted before the load, as at the first start \
         after the store changed): {load_files:.2} ms = {:.0} MB/s; ratio {:.2}",
        mb(lz4_bytes, load_files),
        read_lz4 / load_files
    );
    println!(
        "  decoding is not in the load (the loader thread does it after the load is reported, \
         or a first lookup before): one lookup of every key after a load with that off \
         {lookup_ms:.2} ms; checks + LZ4 + postcard alone (bytes in memory) {decode_ms:.2} ms"
    );
    println!("LZ4 on vs off ({n} entries):");
    println!(
        "  {:<14} {:>14} {:>12} {:>14}",
        "", "bytes on disk", "per entry", "load ms"
    );
    for (label, bytes, ms) in [
        ("LZ4 (default)", lz4_bytes, load_lz4),
        ("uncompressed", raw_bytes, load_raw),
    ] {
        println!(
            "  {label:<14} {bytes:>14} {:>12.0} {ms:>14.2}",
            bytes as f64 / n.max(1) as f64
        );
    }
    println!(
        "  LZ4 stores {:.1}% of the uncompressed bytes and loads in {:.2}x the time",
        100.0 * lz4_bytes as f64 / raw_bytes as f64,
        load_lz4 / load_raw
    );
    LoaderFigures {
        load_mb_s: mb(lz4_bytes, load_lz4),
        read_mb_s: mb(lz4_bytes, read_lz4),
        files_mb_s: mb(lz4_bytes, load_files),
        lz4_bytes,
        raw_bytes,
        load_lz4,
        load_raw,
    }
}

fn main() {
    if let Some(store) = std::env::var_os("GPUSVC_BENCH_LOADER_STORE") {
        let entries = read_entries(Path::new(&store));
        if entries.is_empty() {
            fail(format!("no entries in {}", Path::new(&store).display()));
        }
        loader_section(&entries);
        return;
    }
    let bin = gpusvc_binary();
    let corpora = corpora();
    let labels: Vec<String> = corpora
        .iter()
        .map(|c| format!("{} ({} fresh processes per case)", c.label, c.reps))
        .collect();
    println!(
        "startup bench: {} ; corpora: {}",
        bin.display(),
        labels.join(", ")
    );
    let mut startups = Vec::new();
    for corpus in &corpora {
        println!("\n== {}", corpus.label);
        startups.push(run_corpus(&bin, &corpus.args, corpus.reps));
    }
    let mut rows = Vec::new();
    for (corpus, startup) in corpora.iter().zip(&startups) {
        rows.extend(startup_table(
            corpus.key,
            &corpus.label,
            startup,
            corpus.reps,
        ));
    }
    // The loader section reads the first corpus's (piglit's) entries.
    let populated = &startups[0].populated;

    // ---- the loader, in this process ----
    let entries = read_entries(populated.path());
    let f = loader_section(&entries);

    rows.extend([
        Row {
            metric: "loader_throughput".into(),
            unit: "MB/s",
            ours: f.load_mb_s,
            baseline: f.read_mb_s,
            ratio_note: "loader / plain sequential reads (higher is better)",
        },
        Row {
            metric: "loader_throughput_without_pack".into(),
            unit: "MB/s",
            ours: f.files_mb_s,
            baseline: f.read_mb_s,
            ratio_note: "loader with no load.pack / plain sequential reads (higher is better)",
        },
        Row {
            metric: "lz4_bytes_on_disk".into(),
            unit: "bytes",
            ours: f.lz4_bytes as f64,
            baseline: f.raw_bytes as f64,
            ratio_note: "LZ4 / uncompressed",
        },
        Row {
            metric: "lz4_load_time".into(),
            unit: "ms",
            ours: f.load_lz4,
            baseline: f.load_raw,
            ratio_note: "LZ4 / uncompressed, open + wait_until_loaded",
        },
    ]);
    report("program_cache_startup", &rows);
}
