//! The persistent disk layer: entries written by a background writer, loaded at startup by a
//! background loader, shared safely by several processes, rejected (never trusted) when damaged
//! or written for another driver.
//!
//! The file format and the multi-process protocol are in `program-cache/FORMAT.md`.
//!
//! # Threads and ordering
//! The GPU thread never touches the disk: saves, last-use records, hot marks and clears are jobs
//! on a bounded crossbeam channel consumed by one writer thread; when the channel is full a save
//! is dropped and counted (`dropped_writes`), never waited for. The loader thread reads entries
//! and inserts them into the memory cache through its normal lock. Counters are relaxed atomics:
//! they are statistics, not synchronization; the loaded flag is a mutex + condvar.

mod format;
mod stamp;
mod store;

pub mod inspect;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::cache::ProgramCache;
use crate::key::ProgramKey;
use crate::program::SharedProgram;

pub use format::{
    EntryError, EntryHeader, FLAG_LZ4, FORMAT_VERSION, HEADER_LEN, MAGIC, MAX_PAYLOAD, decode,
    decode_header, encode,
};
pub use stamp::CompatibilityStamp;
pub(crate) use store::{ReadError, StampDir};

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
            .finish_non_exhaustive()
    }
}

impl DiskConfig {
    /// Defaults for a folder and stamp: memory budget, low water 80 %, compression on, queue of
    /// 256 jobs, store dropped after 3 refused binaries in a row.
    pub fn new(dir: impl Into<PathBuf>, stamp: CompatibilityStamp) -> Self {
        DiskConfig {
            dir: dir.into(),
            stamp,
            budget_bytes: None,
            low_water: 0.8,
            compress: true,
            write_queue: 256,
            max_consecutive_rejections: 3,
            log: None,
            on_loaded: None,
        }
    }

    /// `$XDG_CACHE_HOME/gpusvc`, else `$HOME/.cache/gpusvc`, else `./gpusvc-cache`.
    pub fn default_dir() -> PathBuf {
        std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map_or_else(|| PathBuf::from("gpusvc-cache"), |d| d.join("gpusvc"))
    }
}

/// Disk counters (a snapshot).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskCounters {
    /// Entries published.
    pub writes: u64,
    /// Bytes published.
    pub bytes_written: u64,
    /// Saves skipped because the entry was already on disk.
    pub already_present: u64,
    /// Saves dropped because the writer's queue was full.
    pub dropped_writes: u64,
    /// Writes that failed (disk full, read-only, ...).
    pub write_errors: u64,
    /// Entries loaded into memory at startup.
    pub loaded: u64,
    /// Damaged, truncated or foreign entries rejected and deleted.
    pub rejected_entries: u64,
    /// Entries deleted by eviction.
    pub evictions: u64,
    /// Times the whole store was dropped (repeated driver refusals, clear).
    pub store_drops: u64,
}

#[derive(Default)]
struct AtomicCounters {
    writes: AtomicU64,
    bytes_written: AtomicU64,
    already_present: AtomicU64,
    dropped_writes: AtomicU64,
    write_errors: AtomicU64,
    loaded: AtomicU64,
    rejected_entries: AtomicU64,
    evictions: AtomicU64,
    store_drops: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl AtomicCounters {
    fn snapshot(&self) -> DiskCounters {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DiskCounters {
            writes: g(&self.writes),
            bytes_written: g(&self.bytes_written),
            already_present: g(&self.already_present),
            dropped_writes: g(&self.dropped_writes),
            write_errors: g(&self.write_errors),
            loaded: g(&self.loaded),
            rejected_entries: g(&self.rejected_entries),
            evictions: g(&self.evictions),
            store_drops: g(&self.store_drops),
        }
    }
}

/// What the startup load did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Entries loaded into memory.
    pub loaded: usize,
    /// Entries rejected (damaged, foreign) and deleted.
    pub rejected: usize,
    /// Entries left on disk because the memory budget was full.
    pub skipped: usize,
    /// Time from open to the end of the load.
    pub elapsed: Duration,
}

/// A condition reported once through stats and the log callback.
struct Conditions {
    first: Mutex<Option<String>>,
    log: Option<LogCallback>,
    reported: Mutex<Vec<&'static str>>,
}

impl Conditions {
    fn report(&self, kind: &'static str, text: String) {
        {
            let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
            if reported.contains(&kind) {
                return;
            }
            reported.push(kind);
        }
        tracing::warn!("{text}");
        self.first
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| text.clone());
        if let Some(log) = &self.log {
            log(&text);
        }
    }
    fn first(&self) -> Option<String> {
        self.first.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

enum Job {
    Save(ProgramKey, SharedProgram),
    Use(ProgramKey, u64),
    MarkHot(Vec<ProgramKey>),
    /// Delete every entry (clear, or the driver refused too many disk binaries).
    DropAll,
    Flush(Sender<()>),
}

/// The disk side of a [`ProgramCache`].
pub(crate) struct DiskLayer {
    tx: Option<Sender<Job>>,
    writer: Option<JoinHandle<()>>,
    counters: Arc<AtomicCounters>,
    conditions: Arc<Conditions>,
    loaded: Arc<(Mutex<Option<LoadReport>>, Condvar)>,
    pub(crate) max_consecutive_rejections: u32,
    enabled: bool,
}

impl std::fmt::Debug for DiskLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskLayer")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl DiskLayer {
    /// Opens the store and starts the writer. When the folder cannot be used the layer is
    /// disabled: the cache keeps working in memory and the condition is reported once.
    pub(crate) fn open(config: &DiskConfig, memory_budget: usize) -> (Self, Option<Arc<StampDir>>) {
        let conditions = Arc::new(Conditions {
            first: Mutex::new(None),
            log: config.log.clone(),
            reported: Mutex::new(Vec::new()),
        });
        let counters = Arc::new(AtomicCounters::default());
        let loaded = Arc::new((Mutex::new(None), Condvar::new()));
        let dir = match StampDir::open(&config.dir, &config.stamp, config.compress) {
            Ok(dir) => Arc::new(dir),
            Err(e) => {
                conditions.report(
                    "open",
                    format!(
                        "program cache: disk cache disabled, folder {} unusable: {e}; \
                         working in memory only",
                        config.dir.display()
                    ),
                );
                *loaded.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(LoadReport::default());
                return (
                    DiskLayer {
                        tx: None,
                        writer: None,
                        counters,
                        conditions,
                        loaded,
                        max_consecutive_rejections: config.max_consecutive_rejections,
                        enabled: false,
                    },
                    None,
                );
            }
        };
        let budget = config.budget_bytes.unwrap_or(memory_budget as u64);
        let low_water = (budget as f64 * config.low_water.clamp(0.0, 1.0)) as u64;
        let (tx, rx) = crossbeam_channel::bounded(config.write_queue.max(1));
        let writer = {
            let dir = dir.clone();
            let counters = counters.clone();
            let conditions = conditions.clone();
            let loaded = loaded.clone();
            std::thread::Builder::new()
                .name("gpusvc-cache-writer".into())
                .spawn(move || {
                    writer_loop(
                        &dir,
                        &rx,
                        &counters,
                        &conditions,
                        &loaded,
                        budget,
                        low_water,
                    )
                })
                .ok()
        };
        (
            DiskLayer {
                tx: Some(tx),
                writer,
                counters,
                conditions,
                loaded,
                max_consecutive_rejections: config.max_consecutive_rejections,
                enabled: true,
            },
            Some(dir),
        )
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    fn try_send(&self, job: Job) -> bool {
        match self.tx.as_ref().map(|tx| tx.try_send(job)) {
            Some(Ok(())) => true,
            Some(Err(TrySendError::Full(_))) | Some(Err(TrySendError::Disconnected(_))) | None => {
                false
            }
        }
    }

    /// Queues a save; a full queue drops it (counted) rather than wait.
    pub(crate) fn save(&self, key: ProgramKey, program: SharedProgram) {
        if self.enabled && !self.try_send(Job::Save(key, program)) {
            bump(&self.counters.dropped_writes, 1);
        }
    }

    /// Queues a last-use record (dropped silently when the queue is full: LRU is advisory).
    pub(crate) fn used(&self, key: ProgramKey) {
        if self.enabled {
            self.try_send(Job::Use(key, store::now_ms()));
        }
    }

    pub(crate) fn mark_hot(&self, keys: Vec<ProgramKey>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Job::MarkHot(keys));
        }
    }

    /// Deletes the whole store (in order after the queued writes). Blocks only if the queue is
    /// full: a clear must not be lost.
    pub(crate) fn drop_all(&self, why: &'static str) {
        if let Some(tx) = &self.tx {
            if why != "clear" {
                self.conditions.report(
                    "dropped",
                    format!("program cache: disk store dropped: {why}"),
                );
            }
            bump(&self.counters.store_drops, 1);
            let _ = tx.send(Job::DropAll);
        }
    }

    /// Waits until every queued job has been done.
    pub(crate) fn flush(&self) {
        if let Some(tx) = &self.tx {
            let (ack, done) = crossbeam_channel::bounded(1);
            if tx.send(Job::Flush(ack)).is_ok() {
                let _ = done.recv();
            }
        }
    }

    pub(crate) fn counters(&self) -> DiskCounters {
        self.counters.snapshot()
    }

    pub(crate) fn condition(&self) -> Option<String> {
        self.conditions.first()
    }

    pub(crate) fn wait_until_loaded(&self, timeout: Duration) -> Option<LoadReport> {
        let (lock, cv) = &*self.loaded;
        let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = cv
            .wait_timeout_while(guard, timeout, |r| r.is_none())
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }

    /// Starts the startup loader: entries, hot first then most recently used first, into `cache`
    /// until its memory budget is full.
    pub(crate) fn start_loader(
        &self,
        dir: Arc<StampDir>,
        cache: Weak<ProgramCache>,
        on_loaded: Option<LoadedCallback>,
    ) {
        let counters = self.counters.clone();
        let loaded = self.loaded.clone();
        let start = Instant::now();
        let spawned = std::thread::Builder::new()
            .name("gpusvc-cache-loader".into())
            .spawn(move || {
                let report = load_entries(&dir, &cache, &counters, start);
                *loaded.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
                loaded.1.notify_all();
                if let Some(cb) = on_loaded {
                    cb(&report);
                }
            });
        if spawned.is_err() {
            *self.loaded.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(LoadReport::default());
        }
    }
}

impl Drop for DiskLayer {
    fn drop(&mut self) {
        // Closing the channel lets the writer finish what is queued and exit.
        self.tx.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

fn load_entries(
    dir: &StampDir,
    cache: &Weak<ProgramCache>,
    counters: &AtomicCounters,
    start: Instant,
) -> LoadReport {
    let mut report = LoadReport::default();
    let mut full_in_a_row = 0;
    for entry in dir.load_order() {
        let Some(cache) = cache.upgrade() else { break };
        if full_in_a_row >= 8 {
            report.skipped += 1;
            continue;
        }
        match dir.read(&entry.key) {
            Ok(program) => {
                if cache.insert_from_disk(entry.key, program) {
                    report.loaded += 1;
                    bump(&counters.loaded, 1);
                    full_in_a_row = 0;
                } else {
                    report.skipped += 1;
                    full_in_a_row += 1;
                }
            }
            Err(ReadError::Rejected(e)) => {
                tracing::debug!(key = %entry.key, error = %e, "disk entry rejected at load");
                report.rejected += 1;
                bump(&counters.rejected_entries, 1);
            }
            // Evicted by another process meanwhile.
            Err(ReadError::Io(e)) => {
                tracing::debug!(key = %entry.key, error = %e, "disk entry vanished at load");
            }
        }
    }
    report.elapsed = start.elapsed();
    report
}

fn writer_loop(
    dir: &StampDir,
    rx: &Receiver<Job>,
    counters: &AtomicCounters,
    conditions: &Conditions,
    loaded: &(Mutex<Option<LoadReport>>, Condvar),
    budget: u64,
    low_water: u64,
) {
    let mut size = dir.size();
    let evict = |size: &mut u64, limit: u64| match dir.evict_to(limit) {
        Ok((n, freed)) => {
            bump(&counters.evictions, n as u64);
            *size = size.saturating_sub(freed);
            // Other processes write too: re-measure after a pass.
            *size = dir.size();
        }
        Err(e) => conditions.report("evict", format!("program cache: disk eviction failed: {e}")),
    };
    // A store already over budget at open (a smaller budget than last time) is trimmed only
    // once the startup load is done, so the loader's order (hot first, most recent first) is
    // not raced by an LRU pass deleting what it is about to read.
    let mut pending_trim = size > budget;
    let load_done = || loaded.0.lock().map_or(true, |r| r.is_some());
    let mut uses = Vec::new();
    loop {
        if pending_trim && load_done() {
            pending_trim = false;
            if size > budget {
                evict(&mut size, low_water);
            }
        }
        let job = match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(job) => job,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        };
        let mut next = Some(job);
        // Drain what is queued, batching last-use records into one append.
        while let Some(job) = next.take() {
            match job {
                Job::Save(key, program) => match dir.publish(&key, &program) {
                    Ok(0) => bump(&counters.already_present, 1),
                    Ok(n) => {
                        bump(&counters.writes, 1);
                        bump(&counters.bytes_written, n);
                        size += n;
                        if size > budget && !pending_trim {
                            evict(&mut size, low_water);
                        }
                    }
                    Err(e) => {
                        bump(&counters.write_errors, 1);
                        conditions.report(
                            "write",
                            format!(
                                "program cache: writing to {} failed: {e}; entries stay in \
                                 memory only",
                                dir.dir.display()
                            ),
                        );
                    }
                },
                Job::Use(key, ms) => uses.push((key, ms)),
                Job::MarkHot(keys) => {
                    let _ = dir.mark_hot(&keys);
                }
                Job::DropAll => {
                    uses.clear();
                    evict(&mut size, 0);
                }
                Job::Flush(ack) => {
                    let _ = dir.record_uses(&uses);
                    uses.clear();
                    let _ = ack.send(());
                }
            }
            next = rx.try_recv().ok();
        }
        let _ = dir.record_uses(&uses);
        uses.clear();
    }
    let _ = dir.record_uses(&uses);
}
