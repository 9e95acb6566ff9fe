//! The driver's own shader cache during a demo: a fresh folder (removed at exit) or a kept one,
//! pointed at before any context exists, so the cold pass is cold and runs leave nothing behind.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::DemoError;

/// The driver's shader-cache folder: a fresh temporary one (removed at exit), or one given with
/// `--driver-cache-dir` (kept, so a later run finds the driver's cache warm).
#[derive(Debug)]
pub(super) enum DriverCache {
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
    pub(super) fn new(kept: Option<&Path>) -> Result<Self, DemoError> {
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

    pub(super) fn path(&self) -> &Path {
        match self {
            DriverCache::Fresh(p) | DriverCache::Kept(p) => p,
        }
    }
}

/// Points the driver's shader caches at `dir`, before any context exists.
pub(super) fn isolate_driver_cache(dir: &Path) {
    // SAFETY: called from `run` on the main thread before the GL context is opened and before
    // any other thread exists (the progress bar draws from this thread, clap spawns none, and
    // the disk cache's threads start after the context), so no other thread reads or writes the
    // environment concurrently.
    unsafe {
        std::env::set_var("MESA_SHADER_CACHE_DIR", dir);
        std::env::set_var("__GL_SHADER_DISK_CACHE_PATH", dir);
    }
}

/// Files and bytes below `dir`.
pub(super) fn tree_size(dir: &Path) -> (u64, u64) {
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
pub(super) fn settle(dir: &Path) -> (u64, u64) {
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
