//! `gpusvc program-cache demo` (alias `gpusvc demo`): a corpus through the program cache, cold
//! then warm, on the real driver.

mod bench_probe;
mod driver_cache;
mod passes;
mod report;
mod run_cache;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use corpus::LoadError;
use corpus::glmark2::Glmark2Error;
use headless_gl::ContextError;
use program_cache::{GlBackend, ProgramManager, RestoreAhead, RestoreAheadConfig};

use bench_probe::{Phases, single_pass};
use driver_cache::{DriverCache, isolate_driver_cache, settle};
use passes::{limit_corpus, load_builtin, load_glmark2, load_piglit, open_context, pass};
use report::{RunFacts, disk_delta, disk_line, human_bytes, render_table, summary};
use run_cache::open_cache;

/// Which context the demo opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Api {
    /// Built-in and glmark2 corpora: desktop GL core, else GLES. `--corpus`: the desktop compatibility
    /// profile (piglit is mostly GLSL 1.10-1.40), else as for the built-in corpus.
    Auto,
    /// Desktop GL core profile.
    Core,
    /// Desktop GL compatibility profile.
    Compat,
    /// OpenGL ES 3.
    Gles,
}

/// `gpusvc program-cache demo`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// A directory of piglit `.shader_test` files (searched recursively), e.g.
    /// target/corpora/piglit/tests after scripts/fetch-corpus. Default: the built-in corpus.
    #[arg(long, value_name = "DIR", conflicts_with = "glmark2")]
    pub(crate) corpus: Option<PathBuf>,
    /// glmark2's shaders directory, e.g. target/corpora/glmark2/shaders after
    /// `scripts/fetch-corpus glmark2`: the programs glmark2's scenes build from its templates,
    /// in the context's dialect (`#version 330 core` on desktop GL, `300 es` on GLES).
    #[arg(long, value_name = "DIR")]
    pub(crate) glmark2: Option<PathBuf>,
    /// Use at most N programs, spread evenly over the (sorted, de-duplicated) corpus.
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<usize>,
    /// Which GL context to open.
    #[arg(long, value_enum, default_value_t = Api::Auto)]
    pub(crate) api: Api,
    /// The cache's byte budget, in MiB (memory, and the disk store's).
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub(crate) budget_mib: usize,
    /// (tests) The cache's byte budget in KiB, instead of --budget-mib: budgets smaller than the
    /// built-in corpus (a few hundred KiB of binaries).
    #[arg(long, hide = true, value_name = "KIB", conflicts_with = "budget_mib")]
    pub(crate) budget_kib: Option<usize>,
    /// The disk cache folder: programs linked in one run load from it at the start of the next.
    /// A folder that cannot be used (a file, not creatable, not writable) is an error. Default:
    /// $XDG_CACHE_HOME/gpusvc (else ~/.cache/gpusvc); when that cannot be used, or neither
    /// variable is set, the run warns and keeps the cache in memory only.
    #[arg(long, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// No disk cache: the cache lives in memory only and every run starts cold.
    #[arg(long, conflicts_with = "cache_dir")]
    pub(crate) no_disk_cache: bool,
    /// (benchmarks) One pass, then one `gpusvc-startup ...` line instead of the table.
    #[arg(long, hide = true)]
    pub(crate) single_pass: bool,
    /// (benchmarks) The driver's shader-cache folder, kept, instead of a fresh temporary one.
    #[arg(long, hide = true, value_name = "DIR")]
    pub(crate) driver_cache_dir: Option<PathBuf>,
    /// (benchmarks) With --single-pass: compile and link straight on the driver, no program cache.
    #[arg(long, hide = true, requires = "single_pass")]
    pub(crate) plain_driver: bool,
    /// (benchmarks) With --single-pass and a disk cache: the floor of any cache that restores
    /// with glProgramBinary. After the startup load (the loader's decoding after it off), every
    /// stored program is decoded (timed apart, as `prep_ms`), then the pass only hands each
    /// binary to the driver.
    #[arg(
        long,
        hide = true,
        requires = "single_pass",
        conflicts_with_all = ["plain_driver", "no_disk_cache"]
    )]
    pub(crate) restore_floor: bool,
    /// (benchmarks) With --single-pass and a disk cache: restore the stored programs ahead on a
    /// thread with a shared context (`RestoreAhead`), started as soon as the cache opens.
    #[arg(
        long,
        hide = true,
        requires = "single_pass",
        conflicts_with_all = ["plain_driver", "no_disk_cache", "restore_floor"]
    )]
    pub(crate) restore_ahead: bool,
    /// (benchmarks) With --single-pass: before exiting, wait until the driver's shader-cache
    /// folder stops changing (the driver writes it from a background queue that is not drained
    /// at exit).
    #[arg(long, hide = true, requires = "single_pass")]
    pub(crate) settle_driver_cache: bool,
    /// (benchmarks) With --single-pass and --driver-cache-dir: open the context (the driver sets
    /// up its shader-cache folder there), wait until that folder stops changing (giving up,
    /// without an error, after 60 s), print one `gpusvc-startup-primed files=N bytes=B` line
    /// (what the folder held at the last look) and exit, compiling nothing: the driver's cache
    /// folder as on any machine where GL ran before, holding no program of the corpus.
    #[arg(
        long,
        hide = true,
        requires_all = ["single_pass", "driver_cache_dir"],
        conflicts_with_all = ["plain_driver", "restore_floor", "restore_ahead", "settle_driver_cache"]
    )]
    pub(crate) prime_driver_cache: bool,
}

impl DemoArgs {
    /// The cache's byte budget: `--budget-kib` when given, else `--budget-mib`.
    pub(crate) fn budget_bytes(&self) -> usize {
        match self.budget_kib {
            Some(kib) => kib.saturating_mul(1 << 10),
            None => self.budget_mib.saturating_mul(1 << 20),
        }
    }
}

/// Why the demo could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    /// No GL context (a `GPUSVC_EGL_DEVICE` that selects no device included).
    #[error("no GL context could be made: {0}{hint}", hint = install_hint(.0))]
    NoContext(#[from] ContextError),
    /// The driver shader-cache directory could not be made.
    #[error("cannot create a directory for the driver's shader cache: {0}")]
    TempDir(std::io::Error),
    /// The corpus directory could not be read.
    #[error("corpus: {0}")]
    Corpus(#[from] LoadError),
    /// The glmark2 templates could not be made into programs.
    #[error("glmark2 corpus: {0}")]
    Glmark2(#[from] Glmark2Error),
    /// Nothing to run.
    #[error("corpus {0} has no vertex + fragment program to run")]
    EmptyCorpus(String),
    /// The folder given with `--cache-dir` cannot hold the disk cache.
    #[error(
        "--cache-dir {}: the folder cannot be used for the disk cache: {reason} \
         (give a usable folder, or --no-disk-cache for a memory-only run)",
        dir.display()
    )]
    CacheDir {
        /// The folder as given.
        dir: PathBuf,
        /// Why the disk store could not be opened there.
        reason: String,
    },
    /// Writing to stdout failed.
    #[error("writing the report: {0}")]
    Output(#[from] std::io::Error),
    /// The restore-ahead thread could not be spawned.
    #[error("the restore-ahead thread could not be spawned: {0}")]
    Spawn(std::io::Error),
}

/// The packages hint, for errors a missing runtime can cause (not for a device selection that
/// matched none of the devices EGL lists).
fn install_hint(e: &ContextError) -> &'static str {
    match e {
        ContextError::NoEglDevice {
            selection: Some(_), ..
        } => "",
        _ => {
            "\n  (the runtime needs libegl1 libegl-mesa0 libgl1-mesa-dri; scripts/demo installs \
             them)"
        }
    }
}

impl DemoError {
    /// The process exit status for this error: 3 when no GL context can be made (an invalid or
    /// unmatched `GPUSVC_EGL_DEVICE` included), 1 otherwise.
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

/// The host product that goes into the disk stamp (its version is the crate's).
pub(crate) const HOST_PRODUCT: &str = "gpusvc-demo";

/// How long the demo waits for the startup load from disk before it starts anyway.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

pub(crate) fn run(args: &DemoArgs, started: Instant) -> Result<(), DemoError> {
    // A wrong corpus path fails before the driver is touched.
    if let Some(dir) = &args.corpus
        && !dir.is_dir()
    {
        return Err(LoadError::NotADirectory(dir.clone()).into());
    }
    if let Some(dir) = &args.glmark2
        && !dir.is_dir()
    {
        return Err(Glmark2Error::NotADirectory(dir.clone()).into());
    }
    // Declared before the context, so it outlives it: the directory goes after the driver is done.
    let driver_cache = DriverCache::new(args.driver_cache_dir.as_deref())?;
    isolate_driver_cache(driver_cache.path());
    let context_start = Instant::now();
    let ctx = open_context(args.api, args.corpus.is_some())?;
    let context_ms = ms_since(context_start);
    if args.prime_driver_cache {
        drop(ctx);
        let (files, bytes) = settle(driver_cache.path());
        let mut out = std::io::stdout();
        writeln!(out, "gpusvc-startup-primed files={files} bytes={bytes}")?;
        out.flush()?;
        return Ok(());
    }
    // As a host would: the disk cache starts loading as soon as the driver is known (its stamp
    // needs the driver identity), in the background, while the rest of startup (here: reading
    // the corpus) goes on.
    let mut run = open_cache(args, &ctx);
    let ahead = if args.restore_ahead && args.single_pass {
        Some(
            RestoreAhead::start(&ctx, run.cache.clone(), RestoreAheadConfig::default())
                .map_err(DemoError::Spawn)?,
        )
    } else {
        None
    };
    let corpus_start = Instant::now();
    let corpus = match (&args.corpus, &args.glmark2) {
        (Some(dir), _) => load_piglit(dir)?,
        (None, Some(dir)) => load_glmark2(dir, &ctx)?,
        (None, None) => load_builtin(&ctx),
    };
    let (label, programs) = limit_corpus(args, corpus)?;
    let corpus_ms = ms_since(corpus_start);
    run.wait()?;
    if args.single_pass {
        let phases = Phases {
            started,
            context_ms,
            corpus_ms,
        };
        return single_pass(
            args,
            &ctx,
            &run,
            ahead.as_ref(),
            &programs,
            phases,
            driver_cache.path(),
        );
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
        "cache: {} budget; the driver's own shader cache {driver_cache_text}",
        human_bytes(args.budget_bytes() as u64)
    )?;

    writeln!(out, "{}", disk_line(&run))?;
    let mut manager = ProgramManager::new(GlBackend::new(&ctx), run.cache.clone(), "gpusvc demo");
    let (mut cold, cold_programs) = pass(&mut manager, &programs, "cold");
    // The warm pass stands for the next start: the cold pass's programs are gone by then.
    drop(cold_programs);
    // Queued disk writes are done outside the timed passes, so each column counts its own.
    run.cache.flush_disk();
    let after_cold = run.disk_counters();
    let (mut warm, warm_programs) = pass(&mut manager, &programs, "warm");
    drop(warm_programs);
    run.cache.flush_disk();
    let after_warm = run.disk_counters();
    if let (Some(c), Some(w)) = (after_cold, after_warm) {
        cold.disk = Some(c);
        warm.disk = Some(disk_delta(w, c));
    }

    writeln!(out)?;
    write!(out, "{}", render_table(&cold, &warm))?;
    let facts = RunFacts {
        budget_bytes: args.budget_bytes(),
        load_ms: run.load_ms,
    };
    for line in summary(&cold, &warm, &facts) {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}
