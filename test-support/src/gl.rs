//! The GL test policy, used by every GL test in the workspace.
//!
//! Two rules hold for all GL tests:
//! * **Never skip silently.** With no usable driver a test skips only when `GPUSVC_REQUIRE_GL` is
//!   unset and prints why; with it set (CI does) the test fails with the reason.
//! * **Fresh Mesa shader cache per test process.** The first call sets `MESA_SHADER_CACHE_DIR` to
//!   a new temporary directory, so runs are cold and hermetic. `MESA_SHADER_CACHE_DISABLE` is never
//!   set: on Mesa it also turns program binaries off.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use headless_gl::{ContextOptions, GlContext};

/// The environment variable that turns a missing GL driver from a skip into a failure.
pub const REQUIRE_GL_ENV: &str = "GPUSVC_REQUIRE_GL";

/// True when `GPUSVC_REQUIRE_GL` is set to anything but empty or `0`.
pub fn gl_required() -> bool {
    required(std::env::var(REQUIRE_GL_ENV).ok().as_deref())
}

/// The rule behind [`gl_required`], for a value of the variable (`None`: unset).
fn required(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

/// Points `MESA_SHADER_CACHE_DIR` at a fresh temporary directory, once per process, and returns
/// it. Call before the first context of the process is opened ([`context_or_skip`] does).
pub fn isolate_shader_cache() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("gpusvc-mesa-cache-")
            .tempdir()
            .expect("cannot create a temporary directory for MESA_SHADER_CACHE_DIR")
            .keep();
        // SAFETY: this runs once, inside the OnceLock, before any GL context of this process is
        // opened through this module; Rust's own environment readers are synchronized with
        // set_var by std's environment lock, and the C readers (Mesa's getenv) only run when a
        // context is created, which in test processes happens after this initializer returns.
        unsafe { std::env::set_var("MESA_SHADER_CACHE_DIR", &dir) };
        dir
    })
}

/// Opens a default context for a test, or skips. `test` names the test in the message.
///
/// Returns `None` (after printing `SKIP <test>: <reason>`) when no context can be made and
/// `GPUSVC_REQUIRE_GL` is unset; panics with the reason when it is set.
pub fn context_or_skip(test: &str) -> Option<GlContext> {
    open_or_skip(test, &ContextOptions::default())
}

/// [`context_or_skip`] with explicit options.
pub fn open_or_skip(test: &str, options: &ContextOptions) -> Option<GlContext> {
    isolate_shader_cache();
    match GlContext::open(options) {
        Ok(ctx) => Some(ctx),
        Err(e) if gl_required() => {
            panic!("{test}: {REQUIRE_GL_ENV} is set but no GL context could be made: {e}")
        }
        Err(e) => {
            eprintln!("SKIP {test}: no GL context: {e} (set {REQUIRE_GL_ENV}=1 to fail instead)");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_non_empty_value_other_than_zero_requires_gl() {
        assert!(!required(None));
        assert!(!required(Some("")));
        assert!(!required(Some("0")));
        assert!(required(Some("1")));
        assert!(required(Some("yes")));
    }

    #[test]
    fn the_shader_cache_is_one_fresh_directory_per_process() {
        let dir = isolate_shader_cache();
        assert!(dir.is_dir(), "{dir:?}");
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0, "fresh: {dir:?}");
        assert_eq!(
            std::env::var_os("MESA_SHADER_CACHE_DIR").as_deref(),
            Some(dir.as_os_str())
        );
        assert_eq!(isolate_shader_cache(), dir, "once per process");
    }
}
