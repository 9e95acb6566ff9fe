//! The disk layer's configuration: the folder, the stamp and the tunables, and the host's
//! callbacks.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::loader::LoadReport;
use super::stamp::CompatibilityStamp;

/// Host log callback: one line of text, called from whichever thread noticed the condition.
pub type LogCallback = Arc<dyn Fn(&str) + Send + Sync>;
/// Called once when the startup load has finished.
pub type LoadedCallback = Arc<dyn Fn(&LoadReport) + Send + Sync>;

/// Disk layer configuration.
#[derive(Clone)]
pub struct DiskConfig {
    /// The cache folder (`$XDG_CACHE_HOME/gpusvc` by default); one sub-folder per stamp.
    pub dir: PathBuf,
    /// What the stored binaries depend on.
    pub stamp: CompatibilityStamp,
    /// Byte budget of the store; `None` uses the memory budget.
    pub budget_bytes: Option<u64>,
    /// Eviction brings the store down to this fraction of the budget.
    pub low_water: f64,
    /// LZ4-compress payloads.
    pub compress: bool,
    /// Capacity of the writer's queue.
    pub write_queue: usize,
    /// Drop the store after this many disk binaries in a row were refused by the driver.
    pub max_consecutive_rejections: u32,
    /// A program's last use is recorded in `lru.log` at most once per this interval (uses in
    /// between are coalesced in memory), so the log grows with the entries, not with the hits.
    pub use_record_interval: Duration,
    /// After the startup load, the loader thread decodes the loaded entries (in load order,
    /// each until its first lookup has done it), so the host's thread rarely decodes one at
    /// its lookup. Off: each entry is decoded at its first lookup only.
    pub decode_after_load: bool,
    /// Where conditions (read-only folder, disk full, dropped store) are reported, once each.
    pub log: Option<LogCallback>,
    /// Called when the startup load has finished.
    pub on_loaded: Option<LoadedCallback>,
}

impl std::fmt::Debug for DiskConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskConfig")
            .field("dir", &self.dir)
            .field("stamp", &self.stamp)
            .field("budget_bytes", &self.budget_bytes)
            .field("low_water", &self.low_water)
            .field("compress", &self.compress)
            .field("write_queue", &self.write_queue)
            .field(
                "max_consecutive_rejections",
                &self.max_consecutive_rejections,
            )
            .field("use_record_interval", &self.use_record_interval)
            .field("decode_after_load", &self.decode_after_load)
            .finish_non_exhaustive()
    }
}

impl DiskConfig {
    /// Default [`DiskConfig::low_water`]: eviction brings the store down to 80 % of its budget.
    pub const DEFAULT_LOW_WATER: f64 = 0.8;
    /// Default [`DiskConfig::compress`]: LZ4 on.
    pub const DEFAULT_COMPRESS: bool = true;
    /// Default [`DiskConfig::write_queue`]: 256 jobs.
    pub const DEFAULT_WRITE_QUEUE: usize = 256;
    /// Default [`DiskConfig::max_consecutive_rejections`]: the store is dropped after 3 refused
    /// binaries in a row.
    pub const DEFAULT_MAX_CONSECUTIVE_REJECTIONS: u32 = 3;
    /// Default [`DiskConfig::use_record_interval`]: one last-use record per program per minute.
    pub const DEFAULT_USE_RECORD_INTERVAL: Duration = Duration::from_secs(60);
    /// Default [`DiskConfig::decode_after_load`]: on.
    pub const DEFAULT_DECODE_AFTER_LOAD: bool = true;

    /// Defaults for a folder and stamp: the memory budget and the `DEFAULT_*` constants (low
    /// water 80 %, compression on, queue of 256 jobs, store dropped after 3 refused binaries in
    /// a row, one last-use record per program per minute, loaded entries decoded after the
    /// load), no log, no load callback.
    pub fn new(dir: impl Into<PathBuf>, stamp: CompatibilityStamp) -> Self {
        DiskConfig {
            dir: dir.into(),
            stamp,
            budget_bytes: None,
            low_water: Self::DEFAULT_LOW_WATER,
            compress: Self::DEFAULT_COMPRESS,
            write_queue: Self::DEFAULT_WRITE_QUEUE,
            max_consecutive_rejections: Self::DEFAULT_MAX_CONSECUTIVE_REJECTIONS,
            use_record_interval: Self::DEFAULT_USE_RECORD_INTERVAL,
            decode_after_load: Self::DEFAULT_DECODE_AFTER_LOAD,
            log: None,
            on_loaded: None,
        }
    }

    /// `$XDG_CACHE_HOME/gpusvc`, else `$HOME/.cache/gpusvc`; `None` when neither variable is
    /// set (or both are empty or relative): a host then works in memory only, never in a folder
    /// of the current directory.
    pub fn default_dir() -> Option<PathBuf> {
        let absolute = |v: std::ffi::OsString| {
            let p = PathBuf::from(v);
            p.is_absolute().then_some(p)
        };
        std::env::var_os("XDG_CACHE_HOME")
            .and_then(absolute)
            .or_else(|| {
                std::env::var_os("HOME")
                    .and_then(absolute)
                    .map(|h| h.join(".cache"))
            })
            .map(|d| d.join("gpusvc"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk::DriverIdentity;

    #[test]
    fn new_takes_the_published_defaults() {
        let stamp = CompatibilityStamp::new(DriverIdentity::default(), "p", "1");
        let c = DiskConfig::new("/nowhere", stamp);
        assert_eq!(c.budget_bytes, None);
        assert_eq!(c.low_water, DiskConfig::DEFAULT_LOW_WATER);
        assert_eq!(c.compress, DiskConfig::DEFAULT_COMPRESS);
        assert_eq!(c.write_queue, DiskConfig::DEFAULT_WRITE_QUEUE);
        assert_eq!(
            c.max_consecutive_rejections,
            DiskConfig::DEFAULT_MAX_CONSECUTIVE_REJECTIONS
        );
        assert_eq!(
            c.use_record_interval,
            DiskConfig::DEFAULT_USE_RECORD_INTERVAL
        );
        assert!(c.log.is_none() && c.on_loaded.is_none());
        // The values the C ABI's defaults and the docs quote.
        const { assert!(DiskConfig::DEFAULT_COMPRESS) };
        const { assert!(DiskConfig::DEFAULT_MAX_CONSECUTIVE_REJECTIONS == 3) };
    }
}
