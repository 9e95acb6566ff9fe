//! What the GL benches share (`mod common;` in `driver.rs` and `parallel_link.rs`): numbers from
//! the environment, the workspace root, the bench's GL context and its piglit corpus.

use std::path::PathBuf;
use std::time::Duration;

use corpus::{Dialect, ProgramSource, builtin, dedup_sources, load_dir, spread};
use headless_gl::{ApiPreference, ContextOptions, GlApi, GlContext};

/// The variable `name` as a number, `default` when it is unset; exits (status 2) when it is set
/// but not a number.
pub(crate) fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v.parse().unwrap_or_else(|_| {
            eprintln!("{name}={v:?} is not a number");
            std::process::exit(2)
        }),
        Err(_) => default,
    }
}

/// The workspace root (the parent of this crate's manifest directory).
pub(crate) fn workspace() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

pub(crate) fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A desktop compatibility-profile context, else the default context (with a printed note);
/// exits (status 1) naming `bench` when neither can be made.
pub(crate) fn open_context(bench: &str) -> GlContext {
    let compat = ContextOptions {
        api: ApiPreference::DesktopCompatibility,
        ..ContextOptions::default()
    };
    GlContext::open(&compat)
        .or_else(|e| {
            println!("note: no compatibility-profile context ({e}); using the default context");
            GlContext::open_default()
        })
        .unwrap_or_else(|e| {
            eprintln!("{bench} bench: no GL context could be made: {e}");
            std::process::exit(1)
        })
}

/// The built-in corpus's dialect for the context's API.
pub(crate) fn dialect(ctx: &GlContext) -> Dialect {
    match ctx.info().api {
        GlApi::DesktopCore => Dialect::DesktopCore330,
        GlApi::Gles => Dialect::Es300,
    }
}

/// The corpus and its label: piglit's vertex + fragment programs (`GPUSVC_PIGLIT_DIR`, default
/// `<workspace>/target/corpora/piglit/tests`), de-duplicated and sampled down to
/// `GPUSVC_CORPUS_LIMIT`, else the built-in corpus for the context's API (with a printed note).
///
/// `default_limit`: `Some(n)` reads `GPUSVC_CORPUS_LIMIT` (default `n`) before anything else and
/// names it in the label; `None` reads it (default: every program) only when piglit is there.
/// Exits (status 1) naming `bench` when the piglit directory cannot be loaded.
pub(crate) fn corpus(
    ctx: &GlContext,
    bench: &str,
    default_limit: Option<usize>,
) -> (String, Vec<ProgramSource>) {
    let dir = std::env::var_os("GPUSVC_PIGLIT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target/corpora/piglit/tests"));
    let fixed_limit = default_limit.map(|n| env_number("GPUSVC_CORPUS_LIMIT", n));
    if dir.is_dir() {
        let loaded = load_dir(&dir).unwrap_or_else(|e| {
            eprintln!("{bench} bench: {e}");
            std::process::exit(1)
        });
        let mut programs = loaded.programs;
        dedup_sources(&mut programs);
        let total = programs.len();
        let limit = fixed_limit.unwrap_or_else(|| env_number("GPUSVC_CORPUS_LIMIT", total));
        let sample = spread(&programs, limit);
        let label = match fixed_limit {
            Some(limit) => format!(
                "piglit, {} of {total} distinct vertex+fragment programs \
                 (GPUSVC_CORPUS_LIMIT={limit})",
                sample.len()
            ),
            None => format!(
                "piglit, {} of {total} distinct vertex+fragment programs",
                sample.len()
            ),
        };
        (label, sample)
    } else {
        println!(
            "note: no piglit corpus at {} (run scripts/fetch-corpus); using the built-in corpus",
            dir.display()
        );
        let programs = builtin(dialect(ctx));
        (format!("built-in, {} programs", programs.len()), programs)
    }
}
