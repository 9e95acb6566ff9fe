//! The program cache of a run: where its disk store lives (`--cache-dir`, the default folder,
//! none), opening it and waiting for its startup load, and the fallback to memory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use headless_gl::GlContext;
use program_cache::{
    CacheConfig, CompatibilityStamp, DiskConfig, DiskCounters, LoadReport, ProgramCache,
};

use super::{DemoArgs, DemoError, HOST_PRODUCT, LOAD_TIMEOUT, ms_since};

/// Where the disk cache of a run lives, if anywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum DiskSetting {
    /// `--no-disk-cache`.
    Off,
    /// No `--cache-dir` and neither `XDG_CACHE_HOME` nor `HOME` names an absolute folder: no
    /// default folder, so memory only (never a folder in the current directory).
    NoDefaultFolder,
    /// A folder: `explicit` when given with `--cache-dir` (then a folder that cannot be used is
    /// an error), else the default one (then it is a warning and memory only).
    Folder { dir: PathBuf, explicit: bool },
}

/// The program cache of a run: backed by the disk store when a folder is configured.
pub(super) struct RunCache {
    pub(super) cache: Arc<ProgramCache>,
    pub(super) setting: DiskSetting,
    /// The disk store's stamp folder, when a disk store was configured.
    pub(super) store: Option<PathBuf>,
    /// The startup load (`None`: it did not finish within [`LOAD_TIMEOUT`]).
    pub(super) load: Option<LoadReport>,
    /// Why the default folder could not be used (then the run is memory only).
    pub(super) fallback: Option<String>,
    /// Opening the store, in ms.
    pub(super) open_ms: f64,
    /// Open + the startup load (which runs in the background), in ms.
    pub(super) load_ms: f64,
    /// How long the demo was blocked waiting for the load, in ms.
    pub(super) wait_ms: f64,
}

pub(super) fn disk_setting(args: &DemoArgs) -> DiskSetting {
    if args.no_disk_cache {
        return DiskSetting::Off;
    }
    match (&args.cache_dir, DiskConfig::default_dir()) {
        (Some(dir), _) => DiskSetting::Folder {
            dir: dir.clone(),
            explicit: true,
        },
        (None, Some(dir)) => DiskSetting::Folder {
            dir,
            explicit: false,
        },
        (None, None) => DiskSetting::NoDefaultFolder,
    }
}

/// Opens the cache; a disk store starts opening and loading in the background (see
/// [`RunCache::wait`]).
pub(super) fn open_cache(args: &DemoArgs, ctx: &GlContext) -> RunCache {
    let config = CacheConfig::with_budget(args.budget_bytes());
    let start = Instant::now();
    let setting = disk_setting(args);
    let (cache, store) = match &setting {
        DiskSetting::Off => (ProgramCache::builder(config).build(), None),
        DiskSetting::NoDefaultFolder => {
            eprintln!(
                "gpusvc demo: warning: neither XDG_CACHE_HOME nor HOME is set to an absolute \
                 path, so there is no default cache folder: the cache lives in memory only this \
                 run (--cache-dir DIR keeps it in DIR)"
            );
            (ProgramCache::builder(config).build(), None)
        }
        DiskSetting::Folder { dir, .. } => {
            let stamp = CompatibilityStamp::from_driver(
                ctx.info(),
                HOST_PRODUCT,
                env!("CARGO_PKG_VERSION"),
            );
            let store = dir.join(stamp.dir_name());
            // The restore floor decodes every entry itself before its pass (timed apart): the
            // loader's decoding after the load would only compete with its pass.
            let disk = DiskConfig {
                decode_after_load: !args.restore_floor,
                ..DiskConfig::new(dir, stamp)
            };
            let cache = ProgramCache::builder(config).disk(disk).build();
            (cache, Some(store))
        }
    };
    RunCache {
        cache,
        setting,
        store,
        load: None,
        fallback: None,
        open_ms: ms_since(start),
        load_ms: 0.0,
        wait_ms: 0.0,
    }
}

/// The reason in a disk condition ("program cache: disk cache disabled, folder X unusable:
/// REASON; working in memory only"), or the whole text when it is not of that form.
pub(super) fn unusable_reason(condition: Option<String>) -> String {
    let Some(text) = condition else {
        return "the disk store could not be opened there".into();
    };
    let reason = text
        .split_once(" unusable: ")
        .map_or(text.as_str(), |(_, reason)| reason);
    reason
        .strip_suffix("; working in memory only")
        .unwrap_or(reason)
        .to_string()
}

/// `X exists and is not a folder` when `dir` or the nearest of its ancestors that exists is not a
/// folder (the usual reason a cache folder cannot be made).
pub(super) fn not_a_folder(dir: &Path) -> Option<String> {
    let existing = dir
        .ancestors()
        .find(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_ok())?;
    (!existing.is_dir()).then(|| format!("{} exists and is not a folder", existing.display()))
}

impl RunCache {
    /// Waits (at most [`LOAD_TIMEOUT`]) until the store is open and the startup load has
    /// finished, then checks the folder: one given with `--cache-dir` that cannot be used is an
    /// error; the default folder falls back to memory with a warning on stderr.
    pub(super) fn wait(&mut self) -> Result<(), DemoError> {
        let start = Instant::now();
        self.load = self.cache.wait_until_loaded(LOAD_TIMEOUT);
        self.wait_ms = ms_since(start);
        self.load_ms = self.open_ms + self.load.map_or(0.0, |r| r.elapsed.as_secs_f64() * 1e3);
        let DiskSetting::Folder { dir, explicit } = &self.setting else {
            return Ok(());
        };
        if self.cache.disk_enabled() {
            return Ok(());
        }
        let reason = match not_a_folder(dir) {
            Some(what) => format!("{what} ({})", unusable_reason(self.cache.disk_condition())),
            None => unusable_reason(self.cache.disk_condition()),
        };
        if *explicit {
            return Err(DemoError::CacheDir {
                dir: dir.clone(),
                reason,
            });
        }
        eprintln!(
            "gpusvc demo: warning: the default cache folder {} cannot be used ({reason}); the \
             cache lives in memory only this run (--cache-dir DIR picks another folder)",
            dir.display()
        );
        self.fallback = Some(reason);
        Ok(())
    }

    /// Disk counters, when the disk cache is in use.
    pub(super) fn disk_counters(&self) -> Option<DiskCounters> {
        self.cache
            .disk_enabled()
            .then(|| self.cache.disk_counters())
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unusable_folder_reason_is_read_out_of_the_disk_condition() {
        assert_eq!(
            unusable_reason(Some(
                "program cache: disk cache disabled, folder /x unusable: Not a directory (os \
                 error 20); working in memory only"
                    .into()
            )),
            "Not a directory (os error 20)"
        );
        assert_eq!(unusable_reason(Some("other text".into())), "other text");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"").unwrap();
        assert_eq!(
            not_a_folder(&file.join("a/b")),
            Some(format!("{} exists and is not a folder", file.display()))
        );
        assert_eq!(not_a_folder(&dir.path().join("new/sub")), None);
    }
}
