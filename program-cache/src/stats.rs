//! Histograms and counters (the "Histograms" of the original design brief, which is not part of
//! this repository), readable by hosts and pushed per event to an optional host callback.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Histogram names. Times are in microseconds, sizes in bytes.
pub mod names {
    /// Size of each linked binary saved (per link, not per use).
    pub const PROGRAM_BINARY_SIZE: &str = "GPU.ProgramCache.ProgramBinarySizeBytes";
    /// Cache size before a save.
    pub const CACHE_SIZE_BEFORE_SAVE: &str = "GPU.ProgramCache.MemorySizeBeforeSaveBytes";
    /// Cache size after a save.
    pub const CACHE_SIZE_AFTER_SAVE: &str = "GPU.ProgramCache.MemorySizeAfterSaveBytes";
    /// Time to restore a program from a cached binary.
    pub const BINARY_HIT_TIME: &str = "GPU.ProgramCache.BinaryCacheHitTimeUs";
    /// Time to link (and save) a program on a binary-cache miss.
    pub const BINARY_MISS_LINK_TIME: &str = "GPU.ProgramCache.BinaryCacheMissLinkTimeUs";
    /// Time of a compile call answered by the status cache.
    pub const STATUS_HIT_TIME: &str = "GPU.ProgramCache.CompilationCacheHitTimeUs";
    /// Time of a driver compile on a status-cache miss.
    pub const STATUS_MISS_COMPILE_TIME: &str = "GPU.ProgramCache.CompilationCacheMissTimeUs";

    /// All histogram names.
    pub const ALL: [&str; 7] = [
        PROGRAM_BINARY_SIZE,
        CACHE_SIZE_BEFORE_SAVE,
        CACHE_SIZE_AFTER_SAVE,
        BINARY_HIT_TIME,
        BINARY_MISS_LINK_TIME,
        STATUS_HIT_TIME,
        STATUS_MISS_COMPILE_TIME,
    ];
}

/// Host callback: `(histogram name, value)`, called once per recorded sample, with no cache
/// lock held.
pub type HistogramCallback = Arc<dyn Fn(&str, f64) + Send + Sync>;

/// A histogram with exponential buckets (upper bounds 1, 2, 4, ... 2^40, then +inf).
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Samples recorded.
    pub count: u64,
    /// Sum of samples.
    pub sum: f64,
    /// Smallest sample (0 when empty).
    pub min: f64,
    /// Largest sample (0 when empty).
    pub max: f64,
    /// Count per bucket; bucket `i` holds samples in `(2^(i-1), 2^i]`, bucket 0 holds `<= 1`.
    pub buckets: Vec<u64>,
}

const BUCKETS: usize = 42;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            count: 0,
            sum: 0.0,
            min: 0.0,
            max: 0.0,
            buckets: vec![0; BUCKETS],
        }
    }
}

impl Histogram {
    fn bucket(value: f64) -> usize {
        if value <= 1.0 {
            0
        } else {
            (value.log2().ceil() as usize).min(BUCKETS - 1)
        }
    }

    /// Records one sample.
    pub fn record(&mut self, value: f64) {
        if self.count == 0 {
            self.min = value;
            self.max = value;
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        self.count += 1;
        self.sum += value;
        self.buckets[Self::bucket(value)] += 1;
    }

    /// Mean, 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    /// Upper bound of the bucket holding quantile `q` (0..=1), clamped to the observed range.
    pub fn quantile_upper_bound(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return (2f64.powi(i as i32)).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Binary loads that found the program.
    pub hits: u64,
    /// Binary loads that did not.
    pub misses: u64,
    /// Programs evicted for space, by trim, pressure or a driver rejection.
    pub evictions: u64,
    /// Cached binaries the driver refused (`GL_LINK_STATUS` false after `glProgramBinary`).
    pub driver_rejections: u64,
    /// Programs stored.
    pub saves: u64,
    /// Saves refused (empty, over budget, critical memory pressure).
    pub rejected_saves: u64,
    /// Compile calls answered by the status cache.
    pub status_hits: u64,
    /// Compile calls that went to the driver.
    pub status_misses: u64,
    /// Lookups that found the record of a failed compile or link
    /// ([`crate::ProgramCache::load_failure`]): a compile or link the driver was not asked
    /// to repeat.
    pub failure_hits: u64,
}

/// A snapshot of the statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Counters.
    pub counters: Counters,
    /// Histograms by name (only those with samples).
    pub histograms: BTreeMap<&'static str, Histogram>,
    /// Bytes stored now.
    pub size_bytes: usize,
    /// Programs stored now.
    pub entries: usize,
    /// Disk counters, when a disk store is configured.
    pub disk: Option<crate::disk::DiskCounters>,
    /// The first disk condition reported (unusable folder, failed write, dropped store).
    pub disk_condition: Option<String>,
    /// Persistence counters (saved, sent, dropped, used, inserted, rejected), when a
    /// [`crate::disk::PersistConfig`] is configured.
    pub persist: Option<crate::disk::PersistCounters>,
}

#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) counters: Counters,
    pub(crate) histograms: BTreeMap<&'static str, Histogram>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    pub(crate) fn record(&mut self, name: &'static str, value: f64) {
        self.histograms.entry(name).or_default().record(value);
    }
}
