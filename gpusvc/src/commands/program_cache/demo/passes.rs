//! The context, the corpus and the timed passes over it.

use std::io::IsTerminal as _;
use std::path::Path;
use std::time::Instant;

use corpus::{Dialect, ProgramSource, builtin, dedup_sources, load_dir, spread};
use headless_gl::ShaderStage;
use headless_gl::{ApiPreference, ContextError, ContextOptions, GlApi, GlContext};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use program_cache::stats::names;
use program_cache::{
    CompileOutcome, GlBackend, LinkOrigin, LinkedProgram, ProgramCache, ProgramManager,
    ProgramOptions, Shader,
};

use super::report::{Pass, counters_delta};
use super::{Api, DemoArgs, DemoError};

pub(super) fn open_context(api: Api, piglit: bool) -> Result<GlContext, ContextError> {
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
pub(super) fn load_piglit(dir: &Path) -> Result<(String, Vec<ProgramSource>), DemoError> {
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

/// The dialect the generated corpora use on `ctx`.
fn dialect(ctx: &GlContext) -> Dialect {
    match ctx.info().api {
        GlApi::DesktopCore => Dialect::DesktopCore330,
        GlApi::Gles => Dialect::Es300,
    }
}

/// glmark2's programs in the context's dialect, and a line describing them.
pub(super) fn load_glmark2(
    dir: &Path,
    ctx: &GlContext,
) -> Result<(String, Vec<ProgramSource>), DemoError> {
    let dialect = dialect(ctx);
    let loaded = corpus::glmark2::load_dir(dir, dialect)?;
    let label = format!(
        "glmark2 at {}: {} distinct programs from {} templates ({} duplicate scene          configurations left out; {})",
        dir.display(),
        loaded.programs.len(),
        loaded.templates,
        loaded.duplicates,
        dialect.prelude().lines().next().unwrap_or_default()
    );
    Ok((label, loaded.programs))
}

/// The built-in corpus in the context's dialect, and a line describing it.
pub(super) fn load_builtin(ctx: &GlContext) -> (String, Vec<ProgramSource>) {
    let dialect = dialect(ctx);
    let programs = builtin(dialect);
    let label = format!(
        "built-in: {} generated programs ({})",
        programs.len(),
        dialect.prelude().lines().next().unwrap_or_default()
    );
    (label, programs)
}

/// Applies `--limit` and refuses an empty corpus.
pub(super) fn limit_corpus(
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
            .or(args.glmark2.as_ref())
            .map_or_else(|| "built-in".into(), |d| d.display().to_string());
        return Err(DemoError::EmptyCorpus(name));
    }
    Ok((label, programs))
}

pub(super) fn progress(len: usize, prefix: &'static str) -> ProgressBar {
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

/// The sum of the binary sizes the cache has saved so far.
pub(super) fn saved_binary_bytes(cache: &ProgramCache) -> f64 {
    cache
        .stats()
        .histograms
        .get(names::PROGRAM_BINARY_SIZE)
        .map_or(0.0, |h| h.sum)
}

/// The programs a pass linked, kept alive as a host keeps the programs it builds at startup:
/// deleting them is not part of linking them, so the caller drops them after its timings.
pub(super) type Kept = Vec<LinkedProgram<headless_gl::Program>>;

/// Compiles and links every program once through `manager`, as a host would: each shader is
/// compiled, a program whose shaders compiled (or are deferred) is linked, its shaders are let
/// go, and the linked program is kept (returned).
pub(super) fn pass(
    manager: &mut ProgramManager<GlBackend<'_>>,
    programs: &[ProgramSource],
    prefix: &'static str,
) -> (Pass, Kept) {
    let bar = progress(programs.len(), prefix);
    let options = ProgramOptions::default();
    let counters_before = manager.cache().counters();
    let saved_before = saved_binary_bytes(manager.cache());
    let mut result = Pass {
        programs: programs.len(),
        entries_before: manager.cache().len(),
        ..Pass::default()
    };
    let mut kept = Vec::with_capacity(programs.len());
    let wall = Instant::now();
    for program in programs {
        bar.set_message(program.name.clone());
        let start = Instant::now();
        let mut vertex = Shader::new(ShaderStage::Vertex, program.vertex.as_str());
        let mut fragment = Shader::new(ShaderStage::Fragment, program.fragment.as_str());
        let compiled = [
            manager
                .compile(&mut vertex)
                .expect("a shader of this manager"),
            manager
                .compile(&mut fragment)
                .expect("a shader of this manager"),
        ];
        // A failure the cache knew of is a failed compile all the same.
        let failed =
            compiled.map(|o| matches!(o, CompileOutcome::Failed | CompileOutcome::KnownFailure));
        let linked = if failed.contains(&true) {
            None
        } else {
            manager.link(&mut vertex, &mut fragment, &options).ok()
        };
        let elapsed = start.elapsed().as_secs_f64() * 1e3;
        result.total_ms += elapsed;
        let origin = linked.map(|l| {
            let origin = l.origin;
            kept.push(l);
            origin
        });
        match origin {
            Some(origin) => {
                result.linked += 1;
                result.linked_ms.push(elapsed);
                match origin {
                    LinkOrigin::CacheHit => result.from_cache_ms.push(elapsed),
                    LinkOrigin::RelinkedAfterRejection | LinkOrigin::Linked => {
                        result.compiled_ms.push(elapsed)
                    }
                }
            }
            None if !failed.contains(&true) => {
                result.link_failures += 1;
                result.link_failed_ms += elapsed;
            }
            None => {
                result.compile_failures += 1;
                result.compile_failed_ms += elapsed;
                if failed[0] {
                    result.vertex_failures += 1;
                }
            }
        }
        bar.inc(1);
    }
    result.wall_ms = wall.elapsed().as_secs_f64() * 1e3;
    bar.finish_and_clear();
    let cache = manager.cache();
    result.counters = counters_delta(cache.counters(), counters_before);
    result.saved_binary_bytes = (saved_binary_bytes(cache) - saved_before).max(0.0) as u64;
    result.bytes_cached = cache.size_bytes();
    result.entries_cached = cache.len();
    (result, kept)
}
