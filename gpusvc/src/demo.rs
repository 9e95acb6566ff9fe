//! `gpusvc demo`: a corpus through the program cache, cold then warm, on the real driver.

use std::io::{IsTerminal as _, Write as _};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use headless_gl::{ApiPreference, ContextError, ContextOptions, GlApi, GlContext, ShaderStage};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use program_cache::{
    CacheConfig, CompileOutcome, GlBackend, LinkOrigin, ProgramCache, ProgramManager,
    ProgramOptions, Shader,
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
    /// The fresh driver shader-cache directory could not be made.
    #[error("cannot create a temporary directory for the driver's shader cache: {0}")]
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
}

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
    let rows: Vec<(&str, String, String)> = vec![
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
    let mut out = format!("{:<22}{:>14}{:>14}\n", "", "cold", "warm");
    for (label, c, w) in rows {
        out.push_str(&format!("{label:<22}{c:>14}{w:>14}\n"));
    }
    out
}

/// Points the driver's shader caches at `dir`, before any context exists.
fn isolate_driver_cache(dir: &Path) {
    // SAFETY: called from `run` on the main thread before the GL context is opened and before
    // any other thread exists (the progress bar draws from this thread, clap spawns none), so no
    // other thread reads or writes the environment concurrently.
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

pub(crate) fn run(args: &DemoArgs) -> Result<(), DemoError> {
    // A piglit directory is read first, so a wrong path fails before the driver is touched.
    let piglit = args.corpus.as_deref().map(load_piglit).transpose()?;
    // Declared before the context, so it outlives it: the directory goes after the driver is done.
    let driver_cache = tempfile::Builder::new()
        .prefix("gpusvc-demo-driver-cache-")
        .tempdir()
        .map_err(DemoError::TempDir)?;
    isolate_driver_cache(driver_cache.path());
    let ctx = open_context(args.api, piglit.is_some())?;
    let mut out = std::io::stdout();
    writeln!(out, "driver: {} ({})", ctx.info(), ctx.profile())?;
    let corpus = match piglit {
        Some(corpus) => corpus,
        None => load_builtin(&ctx),
    };
    let (label, programs) = limit_corpus(args, corpus)?;
    writeln!(out, "corpus: {label}")?;
    writeln!(
        out,
        "cache: {} MiB budget; the driver's own shader cache starts empty (fresh directory)",
        args.budget_mib
    )?;

    let cache = Arc::new(ProgramCache::new(CacheConfig::with_budget(
        args.budget_mib.saturating_mul(1 << 20),
    )));
    let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache, "gpusvc demo");
    let cold = pass(&mut manager, &programs, "cold");
    let warm = pass(&mut manager, &programs, "warm");

    writeln!(out)?;
    write!(out, "{}", render_table(&cold, &warm))?;
    if let (Some(c), Some(w)) = (median(&cold.linked_ms), median(&warm.linked_ms)) {
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
            ..Pass::default()
        };
        let warm = Pass {
            cache_hits: 2,
            linked_ms: vec![0.25, 0.5],
            total_ms: 1.25,
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
        assert_eq!(table.lines().count(), 11);
    }
}
