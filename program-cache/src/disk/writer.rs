//! The writer thread: opens the store, starts the loader, removes stale stores, then serves the
//! jobs the [`super::layer::DiskLayer`] queues (saves, last uses, hot marks, clears, flushes)
//! and keeps the store within its budget.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::key::{ProgramKey, ShaderHash};
use crate::program::SharedProgram;

use super::config::DiskConfig;
use super::counters::{AtomicCounters, bump};
use super::format::MAX_PAYLOAD;
use super::fsx;
use super::layer::Shared;
use super::loader::{LoadReport, LoadSink, decode_loaded, load_entries};
use super::pack;
use super::store_dir::{
    self, EVICT_LOCK_WAIT, EvictError, OPEN_LOCK_WAIT, Published, StampDir, is_no_space,
};

/// A job for the writer thread.
pub(super) enum Job {
    /// Write an entry; the clear epoch at the time of the save.
    Save(ProgramKey, SharedProgram, u64),
    MarkHot(Vec<ProgramKey>),
    /// Append these shaders to `compiled.list` (known to compile; no stored program uses them);
    /// the clear epoch at the time they were queued.
    MarkCompiled(Vec<ShaderHash>, u64),
    /// Delete the entry file of this key if it is still the file (device, inode) a loaded
    /// entry that failed to decode came from.
    RemoveRejected(ProgramKey, (u64, u64)),
    /// Look at the clear epoch now.
    Wake,
    Flush(Sender<()>),
}

/// What the writer thread needs to open the store.
pub(super) struct Pending {
    pub(super) rx: Receiver<Job>,
    pub(super) uses_rx: Receiver<(ProgramKey, u64)>,
    pub(super) config: DiskConfig,
    pub(super) budget: u64,
    /// The memory cache's budget: the loader reads at most this many file bytes ahead.
    pub(super) memory_budget: u64,
}

/// The disk layer's first thread: opens the store, starts the writer thread (which collects
/// garbage and serves jobs), then runs the startup load itself, so the load waits for no
/// second thread to start. When the writer thread cannot be started, this thread becomes the
/// writer once the load is done.
pub(super) fn disk_thread(pending: Pending, shared: &Arc<Shared>, sink: Weak<dyn LoadSink>) {
    let Pending {
        rx,
        uses_rx,
        config,
        budget,
        memory_budget,
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
                match job {
                    Job::Flush(ack) => {
                        let _ = ack.send(());
                    }
                    _ => {
                        shared.queued.fetch_sub(1, Ordering::AcqRel);
                    }
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
    // The loader lists the store once for both threads: it sends its scan to the writer
    // before it inserts anything (without it, the writer scans for itself).
    let (scan_tx, scan_rx) = crossbeam_channel::bounded(1);
    let parts = Arc::new(std::sync::Mutex::new(Some(WriterPart {
        dir: dir.clone(),
        rx,
        uses_rx,
        config: config.clone(),
        budget,
        previous_open_ms: notes.previous_open_ms,
        scan_rx,
    })));
    let spawned = {
        let parts = parts.clone();
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("gpusvc-cache-writer".into())
            .spawn(move || {
                if let Some(part) = take(&parts) {
                    part.run(&shared);
                }
            })
    };
    let has_writer = spawned.is_ok();
    if let Ok(handle) = spawned {
        *shared.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
    }
    let mut loaded = Vec::new();
    let report = load_entries(
        &dir,
        &sink,
        shared,
        start,
        scan_tx,
        memory_budget,
        &mut loaded,
    );
    shared.finish_load(report, on_loaded.as_ref());
    // After the load has been reported, so the host's wait does not include it.
    if config.decode_after_load {
        decode_loaded(&loaded, &sink, shared);
    }
    drop((sink, loaded));
    // No writer thread could be started: this one serves.
    if !has_writer && let Some(part) = take(&parts) {
        part.run(shared);
    }
}

/// Takes the writer's part out of its cell (once).
fn take(parts: &std::sync::Mutex<Option<WriterPart>>) -> Option<WriterPart> {
    parts.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// What the writer thread runs once the store is open.
struct WriterPart {
    dir: Arc<StampDir>,
    rx: Receiver<Job>,
    uses_rx: Receiver<(ProgramKey, u64)>,
    config: DiskConfig,
    budget: u64,
    previous_open_ms: Option<u64>,
    scan_rx: Receiver<store_dir::Scan>,
}

impl WriterPart {
    /// Removes stale stores and dead writers' files, takes the loader's scan, then serves jobs
    /// until the cache goes.
    fn run(self, shared: &Arc<Shared>) {
        let WriterPart {
            dir,
            rx,
            uses_rx,
            config,
            budget,
            previous_open_ms,
            scan_rx,
        } = self;
        // Garbage collection of other stores and dead writers' files: here, never on the GPU
        // thread, and never waiting for a lock another process holds.
        let removed = match dir.root_fd() {
            Ok(root) => store_dir::remove_other_stores(
                &root,
                &config.dir,
                &config.stamp,
                previous_open_ms,
                &|t| shared.conditions.log(&t),
                &|| shared.closing.load(Ordering::Acquire),
            ),
            Err(_) => 0,
        };
        bump(&shared.counters.stores_removed, removed as u64);
        if !shared.closing.load(Ordering::Acquire) {
            dir.remove_stale_tmp();
        }
        let mut w = Writer::new(
            dir,
            shared.clone(),
            budget,
            config.low_water,
            config.use_record_interval,
        );
        let closing = shared.closing.load(Ordering::Acquire);
        match scan_rx.recv() {
            Ok(scan) => w.apply_scan(scan, !closing),
            Err(_) => w.rescan(!closing),
        }
        w.run(&rx, &uses_rx);
    }
}

/// Capacity of the last-use queue (a use that finds it full is dropped: LRU is advisory).
pub(super) const USE_QUEUE: usize = 4096;
/// Bounds of the writer's in-memory use bookkeeping.
const MAX_PENDING_USES: usize = 1 << 16;
const MAX_RECORDED: usize = 1 << 18;
/// Pending last-use records are appended at most this often (and at flush and exit).
pub(super) const USE_WRITE_PERIOD: Duration = Duration::from_secs(1);
/// `compiled.list` keeps at most this share of the store's budget after a compaction (and
/// twice that before one): the list must never crowd out the entries of a small store.
const COMPILED_BUDGET_SHARE: u64 = 16;
/// ... but never fewer hashes than this (one batch), so that a compacted list (whose size is
/// measured in allocated blocks) is well under the bound that makes the next compaction due.
const COMPILED_KEEP_MIN: u64 = 256;
/// `lru.log` is compacted when it exceeds this many records per entry ...
const LOG_RECORDS_PER_ENTRY: u64 = 4;
/// ... and this many bytes.
const LOG_COMPACT_MIN: u64 = 64 * 1024;

/// The store-keeping state of one process's store: what the writer thread runs, and what a
/// standalone [`super::store::Store`] runs on its caller's thread.
pub(super) struct Writer {
    pub(super) dir: Arc<StampDir>,
    pub(super) shared: Arc<Shared>,
    budget: u64,
    low_water: u64,
    interval_ms: u64,
    /// Bytes the store takes on disk (allocated blocks of entries, side files and folders).
    pub(super) size: u64,
    pub(super) entries: u64,
    log_bytes: u64,
    /// Bytes of `compiled.list` (compacted past twice `compiled_keep` records).
    compiled_bytes: u64,
    /// Bytes of `load.pack`.
    pack_bytes: u64,
    /// Hashes a compaction keeps in `compiled.list`: [`store_dir::MAX_COMPILED`], or fewer
    /// when they would take more than 1/[`COMPILED_BUDGET_SHARE`] of the budget (at least
    /// [`COMPILED_KEEP_MIN`]).
    compiled_keep: usize,
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

impl Writer {
    pub(super) fn new(
        dir: Arc<StampDir>,
        shared: Arc<Shared>,
        budget: u64,
        low_water: f64,
        use_record_interval: Duration,
    ) -> Self {
        Writer {
            dir,
            shared,
            budget,
            low_water: (budget as f64 * low_water.clamp(0.0, 1.0)) as u64,
            interval_ms: use_record_interval.as_millis() as u64,
            size: 0,
            entries: 0,
            log_bytes: 0,
            compiled_bytes: 0,
            pack_bytes: 0,
            compiled_keep: (budget / COMPILED_BUDGET_SHARE / store_dir::COMPILED_RECORD as u64)
                .clamp(COMPILED_KEEP_MIN, store_dir::MAX_COMPILED as u64)
                as usize,
            pending_uses: HashMap::new(),
            recorded: HashMap::new(),
            last_use_write: Instant::now(),
            done_epoch: 0,
            evict_backoff_until: None,
            space_backoff: None,
        }
    }

    fn counters(&self) -> &AtomicCounters {
        &self.shared.counters
    }

    /// Evicts down to the low-water mark when the store is over its budget.
    pub(super) fn trim(&mut self) {
        if self.size > self.budget {
            self.evict(self.low_water);
        }
    }

    /// Records a last use (coalesced: appended at most once per key per interval, pending uses
    /// every [`USE_WRITE_PERIOD`], see [`Self::write_uses_if_due`]).
    pub(super) fn add_use(&mut self, key: ProgramKey, ms: u64) {
        if self.pending_uses.len() < MAX_PENDING_USES || self.pending_uses.contains_key(&key) {
            let e = self.pending_uses.entry(key).or_insert(0);
            *e = (*e).max(ms);
        }
    }

    /// Appends the pending last uses when the last append is [`USE_WRITE_PERIOD`] old.
    pub(super) fn write_uses_if_due(&mut self) {
        if !self.pending_uses.is_empty() && self.last_use_write.elapsed() >= USE_WRITE_PERIOD {
            self.write_uses();
        }
    }

    /// Re-measures the store; with `clean`, removes the names in `entries/` that are not
    /// entries (folders, FIFOs, links, oversized files), once, reported once.
    pub(super) fn rescan(&mut self, clean: bool) {
        let scan = self.dir.scan();
        self.apply_scan(scan, clean);
    }

    /// [`Self::rescan`] with a scan already made (the loader's).
    pub(super) fn apply_scan(&mut self, scan: store_dir::Scan, clean: bool) {
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
        self.compiled_bytes = scan.compiled_bytes;
        self.pack_bytes = scan.pack_bytes;
    }

    /// Writes the `load.pack` the startup load planned, if it planned one, the store was not
    /// emptied since, `entries/` is still as the load found it (else the pack would be stale
    /// at once) and the pack fits under the low-water mark with everything else; only once
    /// the load is done. Called at each turn of the writer's loop and when it exits.
    /// Forgets the planned `load.pack`: entries it would copy are being deleted.
    fn discard_pack_plan(&self) {
        self.shared
            .pack_plan
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    fn write_pack_if_planned(&mut self) {
        if !self.shared.load_done() {
            return;
        }
        let Some(plan) = self
            .shared
            .pack_plan
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        if self.shared.drop_epoch.load(Ordering::Acquire) != 0
            || self.dir.entries_state().ok() != Some(plan.dir)
        {
            return;
        }
        let others = self.size.saturating_sub(self.pack_bytes);
        let Some((index, n)) = pack::encode_index(&plan, self.low_water.saturating_sub(others))
        else {
            return;
        };
        match self.dir.write_pack(&index, &plan.sources[..n]) {
            Ok(allocated) => {
                bump(&self.counters().packs_written, 1);
                self.size = others + allocated;
                self.pack_bytes = allocated;
            }
            Err(e) => tracing::debug!(error = %e, "load.pack not written"),
        }
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
            self.write_pack_if_planned();
            self.take_uses(uses);
            self.write_uses_if_due();
            let job = match rx.recv_timeout(Duration::from_millis(100)) {
                // Every job but a flush was counted in by `DiskLayer::try_send`.
                Ok(Job::Flush(ack)) => Job::Flush(ack),
                Ok(job) => {
                    self.shared.queued.fetch_sub(1, Ordering::AcqRel);
                    job
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            };
            self.check_drop();
            match job {
                Job::Save(key, program, epoch) => {
                    if epoch >= self.done_epoch {
                        let _ = self.save(pending_trim, |d| d.publish(&key, &program));
                    }
                }
                Job::MarkHot(keys) => {
                    let n = keys.len() as u64;
                    if self.with_recovery(|d| d.mark_hot(&keys)).is_ok() {
                        self.log_bytes += n * 24;
                        self.size += n * 24;
                        self.maybe_compact();
                    } else {
                        bump(&self.counters().record_errors, 1);
                    }
                }
                Job::MarkCompiled(hashes, epoch) => {
                    // A batch from before a clear is dropped on purpose, not counted.
                    if epoch >= self.done_epoch {
                        self.mark_compiled(&hashes);
                    }
                }
                Job::RemoveRejected(key, origin) => {
                    if let Ok(Some(freed)) = self.dir.remove_if_same(&key, origin) {
                        // The pack went with it (it may hold a copy), and a planned one would
                        // hold the copy too.
                        self.size = self.size.saturating_sub(freed);
                        self.entries = self.entries.saturating_sub(1);
                        self.pack_bytes = 0;
                        self.discard_pack_plan();
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
        self.write_pack_if_planned();
    }

    /// Coalesces the queued last uses into `pending_uses` (bounded).
    fn take_uses(&mut self, uses: &Receiver<(ProgramKey, u64)>) {
        for (key, ms) in uses.try_iter() {
            self.shared.uses_queued.fetch_sub(1, Ordering::AcqRel);
            self.add_use(key, ms);
        }
    }

    /// Runs a store operation; when it fails because the store folder vanished (another
    /// process deleted it), recreates the folder (reported once) and runs it again.
    fn with_recovery<T>(
        &mut self,
        mut op: impl FnMut(&StampDir) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        match op(&self.dir) {
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
                op(&self.dir)
            }
            other => other,
        }
    }

    /// Publishes an entry through `publish` (a program to encode, or bytes already encoded),
    /// with the full-disk and vanished-folder recovery; counts and reports the outcome.
    pub(super) fn save(
        &mut self,
        pending_trim: bool,
        mut publish: impl FnMut(&StampDir) -> std::io::Result<Published>,
    ) -> std::io::Result<Published> {
        let mut result = self.with_recovery(&mut publish);
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
            result = self.with_recovery(&mut publish);
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
        match &result {
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
                bump(&self.counters().bytes_written, *bytes);
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
        result
    }

    fn evict(&mut self, limit: u64) {
        if self.evict_backoff_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        // The list first: what its compaction frees is not taken from the entries.
        if self.compiled_bytes > self.compiled_compact() {
            self.maybe_compact();
            if self.evict_backoff_until.is_some_and(|t| Instant::now() < t) {
                return;
            }
        }
        // The eviction deletes `load.pack`; a planned one would copy what it deletes.
        self.discard_pack_plan();
        match self
            .dir
            .evict_to(limit, EVICT_LOCK_WAIT, self.compiled_keep)
        {
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
        if let Err(e) = self.drop_all() {
            self.shared.conditions.report(
                "drop",
                format!("program cache: emptying the disk store failed: {e}"),
            );
        }
    }

    /// Empties the store now (every entry, both logs) and forgets the pending uses; returns
    /// the entries deleted (counted as evictions).
    pub(super) fn drop_all(&mut self) -> std::io::Result<usize> {
        self.pending_uses.clear();
        self.recorded.clear();
        self.discard_pack_plan();
        let result = self.with_recovery(StampDir::drop_all);
        if let Ok(n) = &result {
            bump(&self.counters().evictions, *n as u64);
        }
        self.rescan(false);
        result
    }

    /// Appends the pending last uses, at most one record per key per interval.
    pub(super) fn write_uses(&mut self) {
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
            self.log_bytes += n * store_dir::LOG_RECORD as u64;
            self.size += n * store_dir::LOG_RECORD as u64;
            self.recorded.extend(due);
            self.maybe_compact();
        } else {
            bump(&self.counters().record_errors, 1);
        }
    }

    /// Appends `hashes` to `compiled.list` (compacting it when it grows past its bound); a
    /// failed append is counted in `record_errors`. Only the last `compiled_keep` of them are
    /// appended: a compaction would keep no more, so a huge batch (a hostile GPU process's, for
    /// a [`super::Store`]) cannot grow the file past its bound in one append.
    pub(super) fn mark_compiled(&mut self, hashes: &[ShaderHash]) {
        let hashes = &hashes[hashes.len().saturating_sub(self.compiled_keep)..];
        if hashes.is_empty() {
            return;
        }
        let n = (hashes.len() * store_dir::COMPILED_RECORD) as u64;
        if self.with_recovery(|d| d.mark_compiled(hashes)).is_ok() {
            self.compiled_bytes += n;
            self.size += n;
            self.maybe_compact();
        } else {
            bump(&self.counters().record_errors, 1);
        }
    }

    /// `compiled.list` is compacted when it takes more than this many bytes.
    fn compiled_compact(&self) -> u64 {
        2 * (self.compiled_keep * store_dir::COMPILED_RECORD) as u64
    }

    /// Compacts the logs when they outgrow a small multiple of the entries.
    fn maybe_compact(&mut self) {
        let limit = LOG_COMPACT_MIN
            .max(LOG_RECORDS_PER_ENTRY * self.entries * store_dir::LOG_RECORD as u64);
        let due = self.log_bytes > limit || self.compiled_bytes > self.compiled_compact();
        if !due || self.evict_backoff_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        match self.dir.compact(EVICT_LOCK_WAIT, self.compiled_keep) {
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
