//! `gpusvc demo`: a corpus through the program cache, cold then warm, on the real driver.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use headless_gl::{
    ApiPreference, ContextError, ContextOptions, GlApi, GlContext, LinkOptions, ShaderStage,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use program_cache::{
    CacheConfig, CompatibilityStamp, CompileOutcome, DiskConfig, DiskCounters, GlBackend,
    LinkOrigin, LoadReport, ProgramBackend as _, ProgramCache, ProgramManager, ProgramOptions,
    Shader,
};
use shader_corpus::{Dialect, LoadError, ProgramSource, builtin, dedup_sources, load_dir, spread};

use crate::{Api, DemoArgs};

/// Why the demo could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    /// No GL context.
    #[error(
        "no GL context could be made: {0}\n  (the runtime needs libegl1 libegl-mesa0 libgl1-mesa-dri; \
         scripts/demo installs them)"
    )]
    NoContext(#[from] ContextError),
    /// The driver shader-cache directory could not be made.
    #[error("cannot create a directory for the driver's shader cache: {0}")]
    TempDir(std::io::Error),
    /// The corpus directory could not be read.
    #[error("corpus: {0}")]
    Corpus(#[from] LoadError),
    /// Nothing to run.
    #[error("corpus {0} has no vertex + fragment program to run")]
    EmptyCorpus(String),
    /// Writing to stdout failed.
    #[error("writing the report: {0}")]
    Output(#[from] std::io::Error),
}

impl DemoError {
    /// The process exit status for this error.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            DemoError::NoContext(_) => 3,
            _ => 1,
        }
    }

    /// True when stdout was closed by its reader (`gpusvc demo | head`): not worth a message.
    pub(crate) fn is_broken_pipe(&self) -> bool {
        matches!(self, DemoError::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// What one pass over the corpus did.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Pass {
    pub(crate) programs: usize,
    pub(crate) linked: usize,
    pub(crate) cache_hits: usize,
    /// Cached binaries the driver refused (the program was linked from source instead).
    pub(crate) binary_rejections: usize,
    pub(crate) compile_failures: usize,
    pub(crate) link_failures: usize,
    /// Compile + link time of each linked program, in ms.
    pub(crate) linked_ms: Vec<f64>,
    /// Compile + link time of every program tried, in ms.
    pub(crate) total_ms: f64,
    /// The cache's stored bytes and entries after the pass.
    pub(crate) bytes_cached: usize,
    pub(crate) entries_cached: usize,
    /// What the disk layer did during the pass (the cold pass includes the startup load), once
    /// its queued writes were done; `None` without a disk cache.
    pub(crate) disk: Option<DiskCounters>,
}

/// `after - before`, counter by counter.
pub(crate) fn disk_delta(after: DiskCounters, before: DiskCounters) -> DiskCounters {
    DiskCounters {
        writes: after.writes - before.writes,
        bytes_written: after.bytes_written - before.bytes_written,
        already_present: after.already_present - before.already_present,
        dropped_writes: after.dropped_writes - before.dropped_writes,
        write_errors: after.write_errors - before.write_errors,
        loaded: after.loaded - before.loaded,
        rejected_entries: after.rejected_entries - before.rejected_entries,
        evictions: after.evictions - before.evictions,
        store_drops: after.store_drops - before.store_drops,
        lock_busy: after.lock_busy - before.lock_busy,
        oversized: after.oversized - before.oversized,
        space_retries: after.space_retries - before.space_retries,
        stores_removed: after.stores_removed - before.stores_removed,
        odd_removed: after.odd_removed - before.odd_removed,
        recreated: after.recreated - before.recreated,
        use_records: after.use_records - before.use_records,
        compactions: after.compactions - before.compactions,
    }
}

/// The host product that goes into the disk stamp (its version is the crate's).
pub(crate) const HOST_PRODUCT: &str = "gpusvc-demo";

/// How long the demo waits for the startup load from disk before it starts anyway.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.3} ms"))
}

/// The table `gpusvc demo` prints: one column per pass.
pub(crate) fn render_table(cold: &Pass, warm: &Pass) -> String {
    let mut rows: Vec<(&str, String, String)> = vec![
        (
            "programs",
            cold.programs.to_string(),
            warm.programs.to_string(),
        ),
        ("linked", cold.linked.to_string(), warm.linked.to_string()),
        (
            "cache hits",
            cold.cache_hits.to_string(),
            warm.cache_hits.to_string(),
        ),
        (
            "binary rejections",
            cold.binary_rejections.to_string(),
            warm.binary_rejections.to_string(),
        ),
        (
            "compile failures",
            cold.compile_failures.to_string(),
            warm.compile_failures.to_string(),
        ),
        (
            "link failures",
            cold.link_failures.to_string(),
            warm.link_failures.to_string(),
        ),
        (
            "median compile+link",
            ms(median(&cold.linked_ms)),
            ms(median(&warm.linked_ms)),
        ),
        (
            "total compile+link",
            ms(Some(cold.total_ms)),
            ms(Some(warm.total_ms)),
        ),
        (
            "bytes cached",
            cold.bytes_cached.to_string(),
            warm.bytes_cached.to_string(),
        ),
        (
            "programs cached",
            cold.entries_cached.to_string(),
            warm.entries_cached.to_string(),
        ),
    ];
    if let (Some(c), Some(w)) = (cold.disk, warm.disk) {
        rows.extend([
            (
                "loaded from disk",
                c.loaded.to_string(),
                w.loaded.to_string(),
            ),
            ("disk writes", c.writes.to_string(), w.writes.to_string()),
            (
                "disk bytes written",
                c.bytes_written.to_string(),
                w.bytes_written.to_string(),
            ),
        ]);
    }
    let mut out = format!("{:<22}{:>14}{:>14}\n", "", "cold", "warm");
    for (label, c, w) in rows {
        out.push_str(&format!("{label:<22}{c:>14}{w:>14}\n"));
    }
    out
}

/// The driver's shader-cache folder: a fresh temporary one (removed at exit), or one given with
/// `--driver-cache-dir` (kept, so a later run finds the driver's cache warm).
#[derive(Debug)]
enum DriverCache {
    Fresh(PathBuf),
    Kept(PathBuf),
}

impl Drop for DriverCache {
    /// Removes a fresh folder. The driver may still be writing into it from its own background
    /// queue (Mesa's is not drained before exit, since the EGL display is never terminated):
    /// removing it under the writer fails ("directory not empty") or makes Mesa complain on
    /// stderr. So this first waits (at most 10 s) until the folder has stopped changing for
    /// 150 ms, then removes it, retrying for a moment.
    fn drop(&mut self) {
        let DriverCache::Fresh(dir) = self else {
            return;
        };
        let start = Instant::now();
        let mut last = tree_size(dir);
        let mut stable = 0;
        while stable < 3 && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
            let now = tree_size(dir);
            stable = if now == last { stable + 1 } else { 0 };
            last = now;
        }
        for _ in 0..40 {
            match std::fs::remove_dir_all(&*dir) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(Duration::from_millis(25)),
            }
        }
    }
}

impl DriverCache {
    fn new(kept: Option<&Path>) -> Result<Self, DemoError> {
        match kept {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(DemoError::TempDir)?;
                Ok(DriverCache::Kept(dir.to_path_buf()))
            }
            None => tempfile::Builder::new()
                .prefix("gpusvc-demo-driver-cache-")
                .tempdir()
                .map(|t| DriverCache::Fresh(t.keep()))
                .map_err(DemoError::TempDir),
        }
    }

    fn path(&self) -> &Path {
        match self {
            DriverCache::Fresh(p) | DriverCache::Kept(p) => p,
        }
    }
}

/// Points the driver's shader caches at `dir`, before any context exists.
pub(crate) fn isolate_driver_cache(dir: &Path) {
    // SAFETY: called from `run` on the main thread before the GL context is opened and before
    // any other thread exists (the progress bar draws from this thread, clap spawns none, and
    // the disk cache's threads start after the context), so no other thread reads or writes the
    // environment concurrently.
    unsafe {
        std::env::set_var("MESA_SHADER_CACHE_DIR", dir);
        std::env::set_var("__GL_SHADER_DISK_CACHE_PATH", dir);
    }
}

fn open_context(api: Api, piglit: bool) -> Result<GlContext, ContextError> {
    let with = |api| ContextOptions {
        api,
        ..ContextOptions::default()
    };
    match api {
        Api::Core => GlContext::open(&with(ApiPreference::DesktopCore)),
        Api::Compat => GlContext::open(&with(ApiPreference::DesktopCompatibility)),
        Api::Gles => GlContext::open(&with(ApiPreference::Gles)),
        Api::Auto if piglit => GlContext::open(&with(ApiPreference::DesktopCompatibility))
            .or_else(|_| GlContext::open(&with(ApiPreference::Auto))),
        Api::Auto => GlContext::open(&with(ApiPreference::Auto)),
    }
}

/// A piglit directory's programs and a line describing them.
fn load_piglit(dir: &Path) -> Result<(String, Vec<ProgramSource>), DemoError> {
    let loaded = load_dir(dir)?;
    let mut programs = loaded.programs.clone();
    let duplicates = dedup_sources(&mut programs);
    let mut label = format!(
        "{}: {} .shader_test files, {} distinct vertex+fragment programs \
         ({duplicates} duplicates and {} unusable files left out",
        dir.display(),
        loaded.files,
        programs.len(),
        loaded.skipped.len()
    );
    let reasons: Vec<String> = loaded
        .skip_counts()
        .into_iter()
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    if !reasons.is_empty() {
        label.push_str(&format!(": {}", reasons.join(", ")));
    }
    label.push(')');
    Ok((label, programs))
}

/// The built-in corpus in the context's dialect, and a line describing it.
fn load_builtin(ctx: &GlContext) -> (String, Vec<ProgramSource>) {
    let dialect = match ctx.info().api {
        GlApi::DesktopCore => Dialect::DesktopCore330,
        GlApi::Gles => Dialect::Es300,
    };
    let programs = builtin(dialect);
    let label = format!(
        "built-in: {} generated programs ({})",
        programs.len(),
        dialect.prelude().lines().next().unwrap_or_default()
    );
    (label, programs)
}

/// Applies `--limit` and refuses an empty corpus.
fn limit_corpus(
    args: &DemoArgs,
    (mut label, mut programs): (String, Vec<ProgramSource>),
) -> Result<(String, Vec<ProgramSource>), DemoError> {
    if let Some(limit) = args.limit
        && limit < programs.len()
    {
        programs = spread(&programs, limit);
        label.push_str(&format!("; {} used (--limit)", programs.len()));
    }
    if programs.is_empty() {
        let name = args
            .corpus
            .as_ref()
            .map_or_else(|| "built-in".into(), |d| d.display().to_string());
        return Err(DemoError::EmptyCorpus(name));
    }
    Ok((label, programs))
}

fn progress(len: usize, prefix: &'static str) -> ProgressBar {
    if !std::io::stdout().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stdout());
    if let Ok(style) = ProgressStyle::with_template("{prefix:>5} [{bar:40}] {pos}/{len} {wide_msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(prefix);
    bar
}

/// Compiles and links every program once through `manager`.
fn pass(
    manager: &mut ProgramManager<GlBackend<'_>>,
    programs: &[ProgramSource],
    prefix: &'static str,
) -> Pass {
    let bar = progress(programs.len(), prefix);
    let options = ProgramOptions::default();
    let mut result = Pass {
        programs: programs.len(),
        ..Pass::default()
    };
    for program in programs {
        bar.set_message(program.name.clone());
        let start = Instant::now();
        let mut vertex = Shader::new(ShaderStage::Vertex, program.vertex.as_str());
        let mut fragment = Shader::new(ShaderStage::Fragment, program.fragment.as_str());
        let compiled = [manager.compile(&mut vertex), manager.compile(&mut fragment)];
        let linked = if compiled.contains(&CompileOutcome::Failed) {
            result.compile_failures += 1;
            None
        } else {
            manager.link(&mut vertex, &mut fragment, &options).ok()
        };
        let elapsed = start.elapsed().as_secs_f64() * 1e3;
        result.total_ms += elapsed;
        match linked.map(|l| l.origin) {
            Some(origin) => {
                result.linked += 1;
                result.linked_ms.push(elapsed);
                match origin {
                    LinkOrigin::CacheHit => result.cache_hits += 1,
                    LinkOrigin::RelinkedAfterRejection => result.binary_rejections += 1,
                    LinkOrigin::Linked => {}
                }
            }
            None if !compiled.contains(&CompileOutcome::Failed) => result.link_failures += 1,
            None => {}
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let cache = manager.cache();
    result.bytes_cached = cache.size_bytes();
    result.entries_cached = cache.len();
    result
}

/// Compiles, links and reflects every program straight on the driver, with no program cache
/// (the `--plain-driver` probe: what the driver's own shader cache alone gives). Returns
/// (linked, total ms).
fn plain_pass(ctx: &GlContext, programs: &[ProgramSource]) -> (usize, f64) {
    let mut backend = GlBackend::new(ctx);
    let start = Instant::now();
    let mut linked = 0;
    for program in programs {
        let Ok(vs) = backend.compile(ShaderStage::Vertex, &program.vertex) else {
            continue;
        };
        let Ok(fs) = backend.compile(ShaderStage::Fragment, &program.fragment) else {
            continue;
        };
        if let Ok(p) = backend.link(&vs, &fs, &LinkOptions::default()) {
            std::hint::black_box((backend.active_attributes(&p), backend.active_uniforms(&p)));
            linked += 1;
        }
    }
    (linked, start.elapsed().as_secs_f64() * 1e3)
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The program cache of a run: backed by the disk store unless `--no-disk-cache`.
struct RunCache {
    cache: Arc<ProgramCache>,
    /// The disk store's stamp folder, when a disk store was configured.
    store: Option<PathBuf>,
    /// The startup load (`None`: it did not finish within [`LOAD_TIMEOUT`]).
    load: Option<LoadReport>,
    /// Opening the store, in ms.
    open_ms: f64,
    /// Open + the startup load (which runs in the background), in ms.
    load_ms: f64,
    /// How long the demo was blocked waiting for the load, in ms.
    wait_ms: f64,
}

/// Opens the cache; a disk store starts loading in the background (see [`RunCache::wait`]).
fn open_cache(args: &DemoArgs, ctx: &GlContext) -> RunCache {
    let config = CacheConfig::with_budget(args.budget_mib.saturating_mul(1 << 20));
    let start = Instant::now();
    let (cache, store) = if args.no_disk_cache {
        (Arc::new(ProgramCache::new(config)), None)
    } else {
        let dir = args
            .cache_dir
            .clone()
            .or_else(DiskConfig::default_dir)
            .unwrap_or_else(|| std::env::temp_dir().join("gpusvc-demo-cache"));
        let stamp =
            CompatibilityStamp::from_driver(ctx.info(), HOST_PRODUCT, env!("CARGO_PKG_VERSION"));
        let store = dir.join(stamp.dir_name());
        let cache = ProgramCache::with_disk(config, None, DiskConfig::new(dir, stamp));
        (cache, Some(store))
    };
    RunCache {
        cache,
        store,
        load: None,
        open_ms: ms_since(start),
        load_ms: 0.0,
        wait_ms: 0.0,
    }
}

impl RunCache {
    /// Waits (at most [`LOAD_TIMEOUT`]) until the startup load has finished.
    fn wait(&mut self) {
        let start = Instant::now();
        self.load = self.cache.wait_until_loaded(LOAD_TIMEOUT);
        self.wait_ms = ms_since(start);
        self.load_ms = self.open_ms + self.load.map_or(0.0, |r| r.elapsed.as_secs_f64() * 1e3);
    }
}

/// The line describing the disk cache of a run.
fn disk_line(run: &RunCache) -> String {
    let Some(store) = &run.store else {
        return "disk cache: off (--no-disk-cache); every run starts cold".into();
    };
    if !run.cache.disk_enabled() {
        return format!(
            "disk cache: {}",
            run.cache
                .disk_condition()
                .unwrap_or_else(|| "unusable; memory only".into())
        );
    }
    match run.load {
        Some(r) => {
            let mut line = format!(
                "disk cache: {}: {} programs loaded at startup in {:.1} ms, in the background \
                 ({:.1} ms of it waited for)",
                store.display(),
                r.loaded,
                run.load_ms,
                run.wait_ms
            );
            if r.rejected > 0 {
                line.push_str(&format!(
                    "; {} damaged or foreign entries rejected",
                    r.rejected
                ));
            }
            if r.skipped > 0 {
                line.push_str(&format!(
                    "; {} left on disk (memory budget full)",
                    r.skipped
                ));
            }
            if r.loaded == 0 && r.rejected == 0 {
                line.push_str(" (empty: this run fills it)");
            }
            line
        }
        None => format!(
            "disk cache: {}: the startup load did not finish in {} s; starting without it",
            store.display(),
            LOAD_TIMEOUT.as_secs()
        ),
    }
}

/// Files and bytes below `dir`.
fn tree_size(dir: &Path) -> (u64, u64) {
    let mut total = (0, 0);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        match entry.file_type() {
            Ok(t) if t.is_dir() => {
                let (f, b) = tree_size(&entry.path());
                total = (total.0 + f, total.1 + b);
            }
            Ok(_) => {
                total = (
                    total.0 + 1,
                    total.1 + entry.metadata().map_or(0, |m| m.len()),
                )
            }
            Err(_) => {}
        }
    }
    total
}

/// Waits (at most 60 s) until `dir` has not changed for a second; returns (files, bytes).
fn settle(dir: &Path) -> (u64, u64) {
    let start = Instant::now();
    let mut last = tree_size(dir);
    let mut stable = 0;
    while stable < 5 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
        let now = tree_size(dir);
        stable = if now == last { stable + 1 } else { 0 };
        last = now;
    }
    last
}

/// Where the time of a `--single-pass` run went before the pass, in ms.
#[derive(Debug, Clone, Copy)]
struct Phases {
    started: Instant,
    context_ms: f64,
    corpus_ms: f64,
}

/// `--single-pass`: one pass, then the `gpusvc-startup` line the startup benchmark reads.
fn single_pass(
    args: &DemoArgs,
    ctx: &GlContext,
    run: &RunCache,
    programs: &[ProgramSource],
    phases: Phases,
    driver_cache: &Path,
) -> Result<(), DemoError> {
    let mut out = std::io::stdout();
    let result = single_pass_report(args, ctx, run, programs, phases, &mut out);
    if result.is_ok() && args.settle_driver_cache {
        let (files, bytes) = settle(driver_cache);
        writeln!(out, "gpusvc-startup-settled files={files} bytes={bytes}")?;
        out.flush()?;
    }
    result
}

fn single_pass_report(
    args: &DemoArgs,
    ctx: &GlContext,
    run: &RunCache,
    programs: &[ProgramSource],
    phases: Phases,
    out: &mut std::io::Stdout,
) -> Result<(), DemoError> {
    let Phases {
        started,
        context_ms,
        corpus_ms,
    } = phases;
    if args.plain_driver {
        let (linked, pass_ms) = plain_pass(ctx, programs);
        writeln!(
            out,
            "gpusvc-startup programs={} linked={linked} hits=0 loaded=0 since_start_ms={:.3} \
             context_ms={context_ms:.3} corpus_ms={corpus_ms:.3} load_ms=0 wait_ms=0 \
             pass_ms={pass_ms:.3}",
            programs.len(),
            ms_since(started)
        )?;
        out.flush()?;
        return Ok(());
    }
    let mut manager = ProgramManager::new(GlBackend::new(ctx), run.cache.clone(), "gpusvc demo");
    let p = pass(&mut manager, programs, "cold");
    writeln!(
        out,
        "gpusvc-startup programs={} linked={} hits={} loaded={} since_start_ms={:.3} \
         context_ms={context_ms:.3} corpus_ms={corpus_ms:.3} load_ms={:.3} wait_ms={:.3} \
         pass_ms={:.3}",
        p.programs,
        p.linked,
        p.cache_hits,
        run.load.map_or(0, |r| r.loaded),
        ms_since(started),
        run.load_ms,
        run.wait_ms,
        p.total_ms
    )?;
    out.flush()?;
    run.cache.flush_disk();
    let d = run.cache.disk_counters().unwrap_or_default();
    writeln!(
        out,
        "gpusvc-startup-done writes={} dropped={} write_errors={} disk={}",
        d.writes,
        d.dropped_writes,
        d.write_errors,
        run.cache.disk_enabled()
    )?;
    out.flush()?;
    Ok(())
}

pub(crate) fn run(args: &DemoArgs, started: Instant) -> Result<(), DemoError> {
    // A wrong corpus path fails before the driver is touched.
    if let Some(dir) = &args.corpus
        && !dir.is_dir()
    {
        return Err(LoadError::NotADirectory(dir.clone()).into());
    }
    // Declared before the context, so it outlives it: the directory goes after the driver is done.
    let driver_cache = DriverCache::new(args.driver_cache_dir.as_deref())?;
    isolate_driver_cache(driver_cache.path());
    let context_start = Instant::now();
    let ctx = open_context(args.api, args.corpus.is_some())?;
    let context_ms = ms_since(context_start);
    // As a host would: the disk cache starts loading as soon as the driver is known (its stamp
    // needs the driver identity), in the background, while the rest of startup (here: reading
    // the corpus) goes on.
    let mut run = open_cache(args, &ctx);
    let corpus_start = Instant::now();
    let corpus = match &args.corpus {
        Some(dir) => load_piglit(dir)?,
        None => load_builtin(&ctx),
    };
    let (label, programs) = limit_corpus(args, corpus)?;
    let corpus_ms = ms_since(corpus_start);
    run.wait();
    if args.single_pass {
        let phases = Phases {
            started,
            context_ms,
            corpus_ms,
        };
        return single_pass(args, &ctx, &run, &programs, phases, driver_cache.path());
    }
    let mut out = std::io::stdout();
    writeln!(out, "driver: {}", ctx.info())?;
    writeln!(out, "corpus: {label}")?;
    let driver_cache_text = match &driver_cache {
        DriverCache::Fresh(_) => "starts empty (fresh directory)".to_string(),
        DriverCache::Kept(dir) => format!("is {}", dir.display()),
    };
    writeln!(
        out,
        "cache: {} MiB budget; the driver's own shader cache {driver_cache_text}",
        args.budget_mib
    )?;

    writeln!(out, "{}", disk_line(&run))?;
    let mut manager = ProgramManager::new(GlBackend::new(&ctx), run.cache.clone(), "gpusvc demo");
    let mut cold = pass(&mut manager, &programs, "cold");
    // Queued disk writes are done outside the timed passes, so each column counts its own.
    run.cache.flush_disk();
    let after_cold = run.cache.disk_counters();
    let mut warm = pass(&mut manager, &programs, "warm");
    run.cache.flush_disk();
    let after_warm = run.cache.disk_counters();
    if let (Some(c), Some(w)) = (after_cold, after_warm) {
        cold.disk = Some(c);
        warm.disk = Some(disk_delta(w, c));
    }

    writeln!(out)?;
    write!(out, "{}", render_table(&cold, &warm))?;
    if let Some(d) = after_warm
        && cold.cache_hits > 0
        && d.loaded > 0
    {
        writeln!(
            out,
            "warm start: {} of the cold pass's {} linked programs were cache hits on binaries \
             loaded from the disk cache at startup ({} loaded in {:.1} ms, before the pass).",
            cold.cache_hits, cold.linked, d.loaded, run.load_ms
        )?;
    }
    if let Some(d) = after_warm
        && d.dropped_writes + d.write_errors > 0
    {
        writeln!(
            out,
            "note: {} disk writes were dropped (writer queue full) and {} failed; those programs \
             compile again next run.",
            d.dropped_writes, d.write_errors
        )?;
    }
    if cold.cache_hits > 0 {
        writeln!(
            out,
            "both passes were served by the cache; for a cold pass use a new --cache-dir, \
             --no-disk-cache, or `gpusvc cache clear`."
        )?;
    } else if let (Some(c), Some(w)) = (median(&cold.linked_ms), median(&warm.linked_ms)) {
        writeln!(
            out,
            "warm vs cold: median {:.1}x, total {:.1}x faster. Times are compile+link (+ reflection) \
             only: the driver's first-draw JIT is not included. Medians are over linked programs.",
            c / w,
            cold.total_ms / warm.total_ms
        )?;
    }
    let refused = warm.compile_failures + warm.link_failures;
    if refused > 0 {
        writeln!(
            out,
            "totals include the {refused} programs the driver refuses: failures are not cached, so \
             each pass compiles them again."
        )?;
    }
    if warm.cache_hits < cold.linked {
        writeln!(
            out,
            "note: {} programs linked cold but missed the cache warm (budget too small? try --budget-mib)",
            cold.linked - warm.cache_hits
        )?;
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn table_has_one_row_per_metric_and_both_passes() {
        let cold = Pass {
            programs: 3,
            linked: 2,
            compile_failures: 1,
            linked_ms: vec![2.0, 4.0],
            total_ms: 7.5,
            bytes_cached: 9000,
            entries_cached: 2,
            disk: Some(DiskCounters {
                loaded: 1,
                writes: 1,
                bytes_written: 700,
                ..DiskCounters::default()
            }),
            ..Pass::default()
        };
        let warm = Pass {
            cache_hits: 2,
            linked_ms: vec![0.25, 0.5],
            total_ms: 1.25,
            disk: Some(DiskCounters::default()),
            ..cold.clone()
        };
        let table = render_table(&cold, &warm);
        let row = |label: &str| -> Vec<String> {
            let line = table
                .lines()
                .find(|l| l.starts_with(label))
                .unwrap_or_else(|| panic!("no {label} row in\n{table}"));
            line[label.len()..]
                .split_whitespace()
                .map(String::from)
                .collect()
        };
        assert_eq!(row("programs"), ["3", "3"]);
        assert_eq!(row("cache hits"), ["0", "2"]);
        assert_eq!(row("compile failures"), ["1", "1"]);
        assert_eq!(row("median compile+link"), ["3.000", "ms", "0.375", "ms"]);
        assert_eq!(row("total compile+link"), ["7.500", "ms", "1.250", "ms"]);
        assert_eq!(row("bytes cached"), ["9000", "9000"]);
        assert_eq!(row("loaded from disk"), ["1", "0"]);
        assert_eq!(row("disk writes"), ["1", "0"]);
        assert_eq!(row("disk bytes written"), ["700", "0"]);
        assert_eq!(table.lines().count(), 14);
        // Without a disk cache the disk rows are left out.
        let memory_only = render_table(
            &Pass {
                disk: None,
                ..cold.clone()
            },
            &Pass {
                disk: None,
                ..warm.clone()
            },
        );
        assert_eq!(memory_only.lines().count(), 11);
        assert!(!memory_only.contains("disk"));
    }

    #[test]
    fn disk_deltas_subtract_each_counter() {
        let before = DiskCounters {
            writes: 3,
            loaded: 5,
            ..DiskCounters::default()
        };
        let after = DiskCounters {
            writes: 10,
            loaded: 5,
            bytes_written: 99,
            ..DiskCounters::default()
        };
        let d = disk_delta(after, before);
        assert_eq!((d.writes, d.loaded, d.bytes_written), (7, 0, 99));
    }
}
