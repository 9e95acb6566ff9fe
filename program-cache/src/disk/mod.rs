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
//! they are statistics, not synchronization; the loaded flag is a mutex + condvar. The
//! `enabled` flag and the clear epoch are atomics read with `Acquire` and written with
//! `Release`: a thread that sees the new epoch also sees everything the clearing thread did
//! before bumping it (nothing else is published through them).
//!
//! # Never blocking on another process
//! The constructor does no file-system work at all: the writer thread opens the store (taking
//! its shared `in-use.lock` with a bounded wait, [`OPEN_LOCK_WAIT`]), starts the loader, then
//! removes stale stores and dead writers' temporary files, then serves jobs. Eviction tries
//! `evict.lock` for at most [`EVICT_LOCK_WAIT`] and skips (counted in `lock_busy`, reported
//! once) when another process holds it. `clear` is an epoch bump that never waits on the queue.
//! So `flush` and `Drop` wait only for the writer's own bounded work.

mod format;
mod fsx;
mod stamp;
mod store;

pub mod inspect;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::key::ProgramKey;
use crate::program::{CachedProgram, SharedProgram};

pub use format::{
    EntryError, EntryHeader, FLAG_LZ4, FORMAT_VERSION, HEADER_LEN, MAGIC, MAX_PAYLOAD,
    check_header, decode, decode_header, encode, encode_bounded,
};
pub use stamp::CompatibilityStamp;
pub use store::{EVICT_LOCK_WAIT, OPEN_LOCK_WAIT};
pub(crate) use store::{ReadError, StampDir};

use store::{EvictError, Published, is_no_space};

/// Where the startup loader puts the entries it reads: the memory cache. The disk layer holds
/// it weakly (a [`std::sync::Weak`]): once the cache is gone the load stops.
pub(crate) trait LoadSink: Send + Sync {
    /// Inserts an entry read from disk; returns whether it is in memory now (false: no room,
    /// left on disk).
    fn insert_loaded(&self, key: ProgramKey, program: CachedProgram) -> bool;
}

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
            .finish_non_exhaustive()
    }
}

impl DiskConfig {
    /// Defaults for a folder and stamp: memory budget, low water 80 %, compression on, queue of
    /// 256 jobs, store dropped after 3 refused binaries in a row, one last-use record per
    /// program per minute.
    pub fn new(dir: impl Into<PathBuf>, stamp: CompatibilityStamp) -> Self {
        DiskConfig {
            dir: dir.into(),
            stamp,
            budget_bytes: None,
            low_water: 0.8,
            compress: true,
            write_queue: 256,
            max_consecutive_rejections: 3,
            use_record_interval: Duration::from_secs(60),
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
    /// Writes that failed (disk full even after evicting, read-only, ...).
    pub write_errors: u64,
    /// Entries loaded into memory at startup.
    pub loaded: u64,
    /// Damaged, truncated or foreign entries rejected (when read) and deleted.
    pub rejected_entries: u64,
    /// Entries deleted by eviction, or by emptying the store (clear, repeated refusals).
    pub evictions: u64,
    /// Times the whole store was dropped (repeated driver refusals, clear).
    pub store_drops: u64,
    /// Times work was skipped because another process held a lock past the bounded wait
    /// (`evict.lock` for an eviction or compaction, `in-use.lock` at open).
    pub lock_busy: u64,
    /// Saves never written because the entry would exceed FORMAT.md's payload bound.
    pub oversized: u64,
    /// Writes that failed for lack of space and were retried after evicting.
    pub space_retries: u64,
    /// Other stores of the folder removed as stale.
    pub stores_removed: u64,
    /// Names in `entries/` that were not entries (folders, FIFOs, links, huge files) removed.
    pub odd_removed: u64,
    /// Times the store's folder vanished (deleted by another process) and was recreated.
    pub recreated: u64,
    /// Last-use records appended to `lru.log`.
    pub use_records: u64,
    /// Times `lru.log` / `hot.list` were compacted.
    pub compactions: u64,
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
    lock_busy: AtomicU64,
    oversized: AtomicU64,
    space_retries: AtomicU64,
    stores_removed: AtomicU64,
    odd_removed: AtomicU64,
    recreated: AtomicU64,
    use_records: AtomicU64,
    compactions: AtomicU64,
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
            lock_busy: g(&self.lock_busy),
            oversized: g(&self.oversized),
            space_retries: g(&self.space_retries),
            stores_removed: g(&self.stores_removed),
            odd_removed: g(&self.odd_removed),
            recreated: g(&self.recreated),
            use_records: g(&self.use_records),
            compactions: g(&self.compactions),
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

/// Conditions: some reported once per kind (stats + log), deletions reported every time.
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
    /// Every call goes to the log (deletions of what another store or process left).
    fn log(&self, text: &str) {
        tracing::info!("{text}");
        if let Some(log) = &self.log {
            log(text);
        }
    }
    fn first(&self) -> Option<String> {
        self.first.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

enum Job {
    /// Write an entry; the clear epoch at the time of the save.
    Save(ProgramKey, SharedProgram, u64),
    MarkHot(Vec<ProgramKey>),
    /// Look at the clear epoch now.
    Wake,
    Flush(Sender<()>),
}

/// State shared by the GPU thread's handle and the disk threads.
struct Shared {
    counters: AtomicCounters,
    conditions: Conditions,
    loaded: (Mutex<Option<LoadReport>>, Condvar),
    /// False once the store turned out unusable (the cache is memory-only then).
    enabled: AtomicBool,
    /// Bumped by every clear; saves queued before it are not written, and the writer empties
    /// the store before its next job.
    drop_epoch: AtomicU64,
    /// Set when the cache is dropped: long background work (removing a stale store) stops, so
    /// the drop on the host's thread waits for nothing long.
    closing: AtomicBool,
}

impl Shared {
    fn finish_load(&self, report: LoadReport, on_loaded: Option<&LoadedCallback>) {
        *self.loaded.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
        self.loaded.1.notify_all();
        if let Some(cb) = on_loaded {
            cb(&report);
        }
    }
    fn load_done(&self) -> bool {
        self.loaded.0.lock().map_or(true, |r| r.is_some())
    }
}

/// What the writer thread needs to open the store.
struct Pending {
    rx: Receiver<Job>,
    uses_rx: Receiver<(ProgramKey, u64)>,
    config: DiskConfig,
    budget: u64,
}

/// The disk side of the program cache: the GPU thread's handle on the writer and loader.
pub(crate) struct DiskLayer {
    tx: Option<Sender<Job>>,
    /// Last uses, on their own bounded queue: a burst of hits never fills the save queue.
    uses: Option<Sender<(ProgramKey, u64)>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    pending: Mutex<Option<Pending>>,
    shared: Arc<Shared>,
    pub(crate) max_consecutive_rejections: u32,
}

impl std::fmt::Debug for DiskLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskLayer")
            .field("enabled", &self.enabled())
            .finish_non_exhaustive()
    }
}

impl DiskLayer {
    /// Makes the layer without touching the disk; [`DiskLayer::start`] starts its threads.
    pub(crate) fn new(config: &DiskConfig, memory_budget: usize) -> Self {
        let shared = Arc::new(Shared {
            counters: AtomicCounters::default(),
            conditions: Conditions {
                first: Mutex::new(None),
                log: config.log.clone(),
                reported: Mutex::new(Vec::new()),
            },
            loaded: (Mutex::new(None), Condvar::new()),
            enabled: AtomicBool::new(true),
            drop_epoch: AtomicU64::new(0),
            closing: AtomicBool::new(false),
        });
        let (tx, rx) = crossbeam_channel::bounded(config.write_queue.max(1));
        let (uses, uses_rx) = crossbeam_channel::bounded(USE_QUEUE);
        DiskLayer {
            tx: Some(tx),
            uses: Some(uses),
            writer: Mutex::new(None),
            pending: Mutex::new(Some(Pending {
                rx,
                uses_rx,
                config: config.clone(),
                budget: config.budget_bytes.unwrap_or(memory_budget as u64),
            })),
            shared,
            max_consecutive_rejections: config.max_consecutive_rejections,
        }
    }

    /// Starts the writer thread, which opens the store, starts the loader into `sink`, removes
    /// stale stores, then serves jobs. Called once.
    pub(crate) fn start(&self, sink: Weak<dyn LoadSink>) {
        let Some(pending) = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        let shared = self.shared.clone();
        let on_loaded = pending.config.on_loaded.clone();
        let spawned = std::thread::Builder::new()
            .name("gpusvc-cache-writer".into())
            .spawn(move || disk_thread(pending, &shared, sink));
        match spawned {
            Ok(handle) => *self.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle),
            Err(e) => {
                self.shared.enabled.store(false, Ordering::Release);
                self.shared.conditions.report(
                    "open",
                    format!("program cache: disk cache disabled, no writer thread: {e}"),
                );
                self.shared
                    .finish_load(LoadReport::default(), on_loaded.as_ref());
            }
        }
    }

    /// False once the store turned out unusable (known after the startup load has finished).
    pub(crate) fn enabled(&self) -> bool {
        self.shared.enabled.load(Ordering::Acquire)
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
        if !self.enabled() {
            return;
        }
        let epoch = self.shared.drop_epoch.load(Ordering::Acquire);
        if !self.try_send(Job::Save(key, program, epoch)) {
            bump(&self.shared.counters.dropped_writes, 1);
        }
    }

    /// Queues a last-use record (dropped silently when the queue is full: LRU is advisory).
    pub(crate) fn used(&self, key: ProgramKey) {
        if self.enabled()
            && let Some(uses) = &self.uses
        {
            let _ = uses.try_send((key, store::now_ms()));
        }
    }

    /// Queues hot marks (dropped when the queue is full: the order of a load is advisory).
    pub(crate) fn mark_hot(&self, keys: Vec<ProgramKey>) {
        if self.enabled() {
            self.try_send(Job::MarkHot(keys));
        }
    }

    /// Empties the whole store, after the saves already queued (which are not written). Never
    /// waits: the writer sees the new epoch before its next job.
    pub(crate) fn drop_all(&self, why: &'static str) {
        if self.tx.is_none() {
            return;
        }
        if why != "clear" {
            self.shared.conditions.report(
                "dropped",
                format!("program cache: disk store dropped: {why}"),
            );
        }
        bump(&self.shared.counters.store_drops, 1);
        self.shared.drop_epoch.fetch_add(1, Ordering::AcqRel);
        self.try_send(Job::Wake);
    }

    /// Waits until every queued job has been done. The writer's work is bounded (it never
    /// waits on another process past its lock timeouts), so this returns.
    pub(crate) fn flush(&self) {
        if let Some(tx) = &self.tx {
            let (ack, done) = crossbeam_channel::bounded(1);
            if tx.send(Job::Flush(ack)).is_ok() {
                let _ = done.recv();
            }
        }
    }

    pub(crate) fn counters(&self) -> DiskCounters {
        self.shared.counters.snapshot()
    }

    pub(crate) fn condition(&self) -> Option<String> {
        self.shared.conditions.first()
    }

    pub(crate) fn wait_until_loaded(&self, timeout: Duration) -> Option<LoadReport> {
        let (lock, cv) = &self.shared.loaded;
        let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = cv
            .wait_timeout_while(guard, timeout, |r| r.is_none())
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

impl Drop for DiskLayer {
    fn drop(&mut self) {
        // Closing the channel lets the writer finish what is queued and exit; long collection
        // work stops at the next entry.
        self.shared.closing.store(true, Ordering::Release);
        self.uses.take();
        self.tx.take();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(w) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = w.join();
        }
    }
}

/// The writer thread: open, load, collect garbage, serve.
fn disk_thread(pending: Pending, shared: &Arc<Shared>, sink: Weak<dyn LoadSink>) {
    let Pending {
        rx,
        uses_rx,
        config,
        budget,
    } = pending;
    let start = Instant::now();
    let on_loaded = config.on_loaded.clone();
    let opened = StampDir::open(&config.dir, &config.stamp, config.compress, OPEN_LOCK_WAIT);
    let (dir, notes) = match opened {
        Ok((dir, notes)) => (Arc::new(dir), notes),
        Err(e) => {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                bump(&shared.counters.lock_busy, 1);
            }
            shared.enabled.store(false, Ordering::Release);
            shared.conditions.report(
                "open",
                format!(
                    "program cache: disk cache disabled, folder {} unusable: {e}; working in \
                     memory only",
                    config.dir.display()
                ),
            );
            shared.finish_load(LoadReport::default(), on_loaded.as_ref());
            // Answer flushes until the cache goes; everything else is dropped.
            for job in rx {
                if let Job::Flush(ack) = job {
                    let _ = ack.send(());
                }
            }
            return;
        }
    };
    for side in &notes.replaced {
        shared.conditions.log(&format!(
            "program cache: replaced {}/{side}: not a file of ours (never followed)",
            dir.dir.display()
        ));
    }
    if let Some(why) = &notes.stamp_repaired {
        shared.conditions.report(
            "stamp",
            format!(
                "program cache: the STAMP file of {} was {why}; rewritten",
                dir.dir.display()
            ),
        );
    }
    {
        let dir = dir.clone();
        let shared2 = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("gpusvc-cache-loader".into())
            .spawn(move || {
                let report = load_entries(&dir, &sink, &shared2, start);
                shared2.finish_load(report, on_loaded.as_ref());
            });
        if spawned.is_err() {
            shared.finish_load(LoadReport::default(), config.on_loaded.as_ref());
        }
    }
    // Garbage collection of other stores and dead writers' files: here, never on the GPU
    // thread, and never waiting for a lock another process holds.
    let removed = match dir.root_fd() {
        Ok(root) => store::remove_other_stores(
            &root,
            &config.dir,
            &config.stamp,
            notes.previous_open_ms,
            &|t| shared.conditions.log(&t),
            &|| shared.closing.load(Ordering::Acquire),
        ),
        Err(_) => 0,
    };
    bump(&shared.counters.stores_removed, removed as u64);
    if !shared.closing.load(Ordering::Acquire) {
        dir.remove_stale_tmp();
    }
    let low_water = (budget as f64 * config.low_water.clamp(0.0, 1.0)) as u64;
    let mut w = Writer {
        dir: &dir,
        shared,
        budget,
        low_water,
        interval_ms: config.use_record_interval.as_millis() as u64,
        size: 0,
        entries: 0,
        log_bytes: 0,
        pending_uses: HashMap::new(),
        recorded: HashMap::new(),
        last_use_write: Instant::now(),
        done_epoch: 0,
        evict_backoff_until: None,
        space_backoff: None,
    };
    let closing = shared.closing.load(Ordering::Acquire);
    w.rescan(!closing);
    w.run(&rx, &uses_rx);
}

/// Capacity of the last-use queue (a use that finds it full is dropped: LRU is advisory).
const USE_QUEUE: usize = 4096;
/// Bounds of the writer's in-memory use bookkeeping.
const MAX_PENDING_USES: usize = 1 << 16;
const MAX_RECORDED: usize = 1 << 18;
/// Pending last-use records are appended at most this often (and at flush and exit).
const USE_WRITE_PERIOD: Duration = Duration::from_secs(1);
/// `lru.log` is compacted when it exceeds this many records per entry ...
const LOG_RECORDS_PER_ENTRY: u64 = 4;
/// ... and this many bytes.
const LOG_COMPACT_MIN: u64 = 64 * 1024;

struct Writer<'a> {
    dir: &'a StampDir,
    shared: &'a Shared,
    budget: u64,
    low_water: u64,
    interval_ms: u64,
    /// Bytes the store takes on disk (allocated blocks of entries, side files and folders).
    size: u64,
    entries: u64,
    log_bytes: u64,
    pending_uses: HashMap<ProgramKey, u64>,
    /// When each key's last record was written (bounded: cleared when too large).
    recorded: HashMap<ProgramKey, u64>,
    last_use_write: Instant,
    done_epoch: u64,
    evict_backoff_until: Option<Instant>,
    /// After evicting for space did not help (the disk is full of others' files): no more
    /// evictions for space until then, and the next pause is twice as long.
    space_backoff: Option<(Instant, Duration)>,
}

impl Writer<'_> {
    fn counters(&self) -> &AtomicCounters {
        &self.shared.counters
    }

    /// Re-measures the store; with `clean`, removes the names in `entries/` that are not
    /// entries (folders, FIFOs, links, oversized files), once, reported once.
    fn rescan(&mut self, clean: bool) {
        let scan = self.dir.scan();
        if clean && !scan.odd.is_empty() {
            let mut removed = 0;
            for odd in &scan.odd {
                match self.dir.remove_odd(odd) {
                    Ok(()) => {
                        removed += 1;
                        self.shared.conditions.log(&format!(
                            "program cache: removed {}/entries/{} ({})",
                            self.dir.dir.display(),
                            odd.name,
                            odd.what
                        ));
                    }
                    Err(e) => self.shared.conditions.report(
                        "odd",
                        format!(
                            "program cache: {}/entries/{} is not an entry ({}) and could not \
                             be removed: {e}; it is ignored",
                            self.dir.dir.display(),
                            odd.name,
                            odd.what
                        ),
                    ),
                }
            }
            bump(&self.counters().odd_removed, removed);
        }
        self.size = scan.total();
        self.entries = scan.entries.len() as u64;
        self.log_bytes = scan.log_bytes + scan.hot_bytes;
    }

    fn run(&mut self, rx: &Receiver<Job>, uses: &Receiver<(ProgramKey, u64)>) {
        // A store already over budget at open (a smaller budget than last time) is trimmed only
        // once the startup load is done, so the loader's order (hot first, most recent first)
        // is not raced by an LRU pass deleting what it is about to read.
        let mut pending_trim = self.size > self.budget;
        loop {
            if pending_trim && self.shared.load_done() {
                pending_trim = false;
                if self.size > self.budget {
                    self.evict(self.low_water);
                }
            }
            self.check_drop();
            self.take_uses(uses);
            if !self.pending_uses.is_empty() && self.last_use_write.elapsed() >= USE_WRITE_PERIOD {
                self.write_uses();
            }
            let job = match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(job) => job,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            };
            self.check_drop();
            match job {
                Job::Save(key, program, epoch) => {
                    if epoch >= self.done_epoch {
                        self.save(&key, &program, pending_trim);
                    }
                }
                Job::MarkHot(keys) => {
                    let n = keys.len() as u64;
                    if self.with_recovery(|d| d.mark_hot(&keys)).is_ok() {
                        self.log_bytes += n * 24;
                        self.size += n * 24;
                        self.maybe_compact();
                    }
                }
                Job::Wake => {}
                Job::Flush(ack) => {
                    self.take_uses(uses);
                    self.write_uses();
                    let _ = ack.send(());
                }
            }
        }
        self.check_drop();
        self.take_uses(uses);
        self.write_uses();
    }

    /// Coalesces the queued last uses into `pending_uses` (bounded).
    fn take_uses(&mut self, uses: &Receiver<(ProgramKey, u64)>) {
        for (key, ms) in uses.try_iter() {
            if self.pending_uses.len() < MAX_PENDING_USES || self.pending_uses.contains_key(&key) {
                let e = self.pending_uses.entry(key).or_insert(0);
                *e = (*e).max(ms);
            }
        }
    }

    /// Runs a store operation; when it fails because the store folder vanished (another
    /// process deleted it), recreates the folder (reported once) and runs it again.
    fn with_recovery<T>(
        &mut self,
        mut op: impl FnMut(&StampDir) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        match op(self.dir) {
            Err(e) if !self.shared.enabled.load(Ordering::Acquire) => Err(e),
            Err(e) if self.dir.vanished() => {
                if let Err(e2) = self.dir.reopen() {
                    // No second try per job (each would wait for the lock again): the cache is
                    // memory-only from here on.
                    self.shared.enabled.store(false, Ordering::Release);
                    self.shared.conditions.report(
                        "recreate-failed",
                        format!(
                            "program cache: the store folder {} vanished and could not be \
                             recreated: {e2}; working in memory only",
                            self.dir.dir.display()
                        ),
                    );
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("{e}; the store folder vanished and could not be recreated: {e2}"),
                    ));
                }
                bump(&self.counters().recreated, 1);
                self.shared.conditions.report(
                    "recreated",
                    format!(
                        "program cache: the store folder {} vanished (deleted by another \
                         process?); recreated",
                        self.dir.dir.display()
                    ),
                );
                self.recorded.clear();
                self.rescan(false);
                op(self.dir)
            }
            other => other,
        }
    }

    fn save(&mut self, key: &ProgramKey, program: &CachedProgram, pending_trim: bool) {
        let mut result = self.with_recovery(|d| d.publish(key, program));
        let paused = self
            .space_backoff
            .is_some_and(|(until, _)| Instant::now() < until);
        if let Err(e) = &result
            && is_no_space(e)
            && !paused
        {
            // Full disk: make room from our own store, then try once more. When that does not
            // help, others' files fill the disk: stop giving up our entries for a while (30 s,
            // doubling to 10 min) instead of emptying the store one save at a time.
            bump(&self.counters().space_retries, 1);
            self.evict(self.low_water.min(self.size / 2));
            result = self.with_recovery(|d| d.publish(key, program));
            if result.as_ref().is_err_and(is_no_space) {
                let pause = self
                    .space_backoff
                    .map_or(Duration::from_secs(30), |(_, p)| {
                        (p * 2).min(Duration::from_secs(600))
                    });
                self.space_backoff = Some((Instant::now() + pause, pause));
            } else {
                self.space_backoff = None;
            }
        }
        match result {
            Ok(Published::Present) => bump(&self.counters().already_present, 1),
            Ok(Published::TooLarge) => {
                bump(&self.counters().oversized, 1);
                self.shared.conditions.report(
                    "oversized",
                    format!(
                        "program cache: an entry over the {MAX_PAYLOAD}-byte payload bound was \
                         not written (it could never be read back)"
                    ),
                );
            }
            Ok(Published::Written { bytes, allocated }) => {
                bump(&self.counters().writes, 1);
                bump(&self.counters().bytes_written, bytes);
                self.size += allocated;
                self.entries += 1;
                if self.size > self.budget && !pending_trim {
                    self.evict(self.low_water);
                }
            }
            Err(e) => {
                bump(&self.counters().write_errors, 1);
                self.shared.conditions.report(
                    "write",
                    format!(
                        "program cache: writing to {} failed: {e}; entries stay in memory only",
                        self.dir.dir.display()
                    ),
                );
            }
        }
    }

    fn evict(&mut self, limit: u64) {
        if self.evict_backoff_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        match self.dir.evict_to(limit, EVICT_LOCK_WAIT) {
            Ok(n) => {
                self.evict_backoff_until = None;
                bump(&self.counters().evictions, n as u64);
                bump(&self.counters().compactions, 1);
                // Other processes write too: measure what the store takes now.
                self.rescan(false);
            }
            Err(EvictError::Busy) => self.lock_busy("eviction"),
            Err(EvictError::Io(e)) if fsx::is_not_regular(&e) && self.repair() => self.evict(limit),
            Err(EvictError::Io(e)) => {
                // Not every pass: an eviction that cannot work waits like a busy lock.
                self.evict_backoff_until = Some(Instant::now() + Duration::from_secs(1));
                self.shared
                    .conditions
                    .report("evict", format!("program cache: disk eviction failed: {e}"))
            }
        }
    }

    /// Replaces side files planted since the open (logged); true when one was.
    fn repair(&mut self) -> bool {
        let replaced = self.dir.repair_side_files();
        for side in &replaced {
            self.shared.conditions.log(&format!(
                "program cache: replaced {}/{side}: not a file of ours (never followed)",
                self.dir.dir.display()
            ));
        }
        !replaced.is_empty()
    }

    fn lock_busy(&mut self, what: &str) {
        bump(&self.counters().lock_busy, 1);
        self.evict_backoff_until = Some(Instant::now() + Duration::from_secs(1));
        self.shared.conditions.report(
            "lock-busy",
            format!(
                "program cache: another process holds {}/evict.lock past {} ms (frozen?); \
                 {what} skipped and retried later, the cache keeps serving",
                self.dir.dir.display(),
                EVICT_LOCK_WAIT.as_millis()
            ),
        );
    }

    fn check_drop(&mut self) {
        let epoch = self.shared.drop_epoch.load(Ordering::Acquire);
        if epoch == self.done_epoch {
            return;
        }
        self.done_epoch = epoch;
        self.pending_uses.clear();
        self.recorded.clear();
        match self.with_recovery(StampDir::drop_all) {
            Ok(n) => bump(&self.counters().evictions, n as u64),
            Err(e) => self.shared.conditions.report(
                "drop",
                format!("program cache: emptying the disk store failed: {e}"),
            ),
        }
        self.rescan(false);
    }

    /// Appends the pending last uses, at most one record per key per interval.
    fn write_uses(&mut self) {
        self.last_use_write = Instant::now();
        if self.pending_uses.is_empty() {
            return;
        }
        let interval = self.interval_ms;
        let mut due = Vec::new();
        for (key, ms) in self.pending_uses.drain() {
            let write = match self.recorded.get(&key) {
                None => true,
                // Due, or the clock went back by more than an interval.
                Some(&r) => ms >= r.saturating_add(interval) || ms.saturating_add(interval) < r,
            };
            if write {
                due.push((key, ms));
            }
        }
        if due.is_empty() {
            return;
        }
        if self.recorded.len() + due.len() > MAX_RECORDED {
            self.recorded.clear();
        }
        if self.with_recovery(|d| d.record_uses(&due)).is_ok() {
            let n = due.len() as u64;
            bump(&self.counters().use_records, n);
            self.log_bytes += n * store::LOG_RECORD as u64;
            self.size += n * store::LOG_RECORD as u64;
            self.recorded.extend(due);
            self.maybe_compact();
        }
    }

    /// Compacts the logs when they outgrow a small multiple of the entries.
    fn maybe_compact(&mut self) {
        let limit =
            LOG_COMPACT_MIN.max(LOG_RECORDS_PER_ENTRY * self.entries * store::LOG_RECORD as u64);
        if self.log_bytes <= limit || self.evict_backoff_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        match self.dir.compact(EVICT_LOCK_WAIT) {
            Ok(()) => {
                bump(&self.counters().compactions, 1);
                self.rescan(false);
            }
            Err(EvictError::Busy) => self.lock_busy("log compaction"),
            // A side file planted since the open: replaced now, compacted next time.
            Err(EvictError::Io(e)) if fsx::is_not_regular(&e) && self.repair() => {}
            Err(EvictError::Io(e)) => self.shared.conditions.report(
                "compact",
                format!("program cache: compacting lru.log failed: {e}"),
            ),
        }
    }
}

fn load_entries(
    dir: &StampDir,
    sink: &Weak<dyn LoadSink>,
    shared: &Shared,
    start: Instant,
) -> LoadReport {
    let counters = &shared.counters;
    let mut report = LoadReport::default();
    let mut full_in_a_row = 0;
    // A clear since the cache was made ends the load: what is on disk is about to go.
    for entry in dir.load_order() {
        let Some(sink) = sink.upgrade() else { break };
        if shared.drop_epoch.load(Ordering::Acquire) != 0 {
            break;
        }
        if full_in_a_row >= 8 {
            report.skipped += 1;
            continue;
        }
        match dir.read(&entry.key) {
            Ok(program) => {
                if sink.insert_loaded(entry.key, program) {
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
            // Replaced by something that is not a file meanwhile: the writer removes it.
            Err(ReadError::NotRegular(e)) => {
                tracing::debug!(key = %entry.key, error = %e, "disk entry is not a file");
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
