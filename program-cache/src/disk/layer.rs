//! [`DiskLayer`], the handle the memory cache holds: queues jobs for the writer thread and reads
//! the state the disk threads share with it, never touching the disk itself.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;

use crate::key::{ProgramKey, ShaderHash};
use crate::program::SharedProgram;

use super::condition::Conditions;
use super::config::{DiskConfig, LoadedCallback};
use super::counters::{AtomicCounters, DiskCounters, bump};
use super::loader::{LoadReport, LoadSink};
use super::store_dir;
use super::writer::{Job, Pending, USE_QUEUE, disk_thread};

/// State shared by the GPU thread's handle and the disk threads.
pub(super) struct Shared {
    pub(super) counters: AtomicCounters,
    pub(super) conditions: Conditions,
    pub(super) loaded: (Mutex<Option<LoadReport>>, Condvar),
    /// False once the store turned out unusable (the cache is memory-only then).
    pub(super) enabled: AtomicBool,
    /// Bumped by every clear; saves queued before it are not written, and the writer empties
    /// the store before its next job.
    pub(super) drop_epoch: AtomicU64,
    /// Set when the cache is dropped: long background work (removing a stale store) stops, so
    /// the drop on the host's thread waits for nothing long.
    pub(super) closing: AtomicBool,
    /// Jobs queued by [`DiskLayer`]'s `try_send` and not yet taken by the writer: the write
    /// queue's bound is kept with this count (see [`DiskLayer::new`]).
    pub(super) queued: AtomicUsize,
    /// Last uses queued by [`DiskLayer::used`] and not yet taken by the writer: the bound of
    /// that queue ([`USE_QUEUE`]), kept like `queued`.
    pub(super) uses_queued: AtomicUsize,
    /// The writer thread, once the first disk thread has started it (joined at drop).
    pub(super) writer: Mutex<Option<JoinHandle<()>>>,
    /// What the startup load read, for the writer to write as a new `load.pack` once the load
    /// is done (set by the loader before it reports the load; taken once).
    pub(super) pack_plan: Mutex<Option<super::pack::PackPlan>>,
}

impl Shared {
    /// Fresh state: enabled, no clear yet, the load not finished.
    pub(super) fn new(log: Option<super::config::LogCallback>) -> Self {
        Shared {
            counters: AtomicCounters::default(),
            conditions: Conditions::new(log),
            loaded: (Mutex::new(None), Condvar::new()),
            enabled: AtomicBool::new(true),
            drop_epoch: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            uses_queued: AtomicUsize::new(0),
            writer: Mutex::new(None),
            pack_plan: Mutex::new(None),
        }
    }
    pub(super) fn finish_load(&self, report: LoadReport, on_loaded: Option<&LoadedCallback>) {
        *self.loaded.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
        self.loaded.1.notify_all();
        if let Some(cb) = on_loaded {
            cb(&report);
        }
    }
    pub(super) fn load_done(&self) -> bool {
        self.loaded.0.lock().map_or(true, |r| r.is_some())
    }
}

/// Why the whole disk store is emptied ([`DiskLayer::drop_all`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DropReason {
    /// The host cleared the cache (`ProgramCache::clear`): not a condition, not reported.
    Clear,
    /// The driver refused `max_consecutive_rejections` stored binaries in a row: it changed in
    /// a way the stamp did not capture. Reported as a condition.
    DriverRefusals,
}

impl DropReason {
    /// Whether the drop is reported as a condition (stats and log): only when the host did
    /// not ask for it.
    fn is_reported(self) -> bool {
        self != DropReason::Clear
    }
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DropReason::Clear => "clear",
            DropReason::DriverRefusals => "the driver refused several stored binaries in a row",
        })
    }
}

/// Reads the store's clear epoch ([`DiskLayer::epoch`]) for the startup loader's target.
pub(crate) struct EpochWatch(Arc<Shared>);

impl EpochWatch {
    /// The clear epoch now (0: never emptied since the open).
    pub(crate) fn get(&self) -> u64 {
        self.0.drop_epoch.load(Ordering::Acquire)
    }
}

/// The disk side of the program cache: the GPU thread's handle on the writer and loader.
pub(crate) struct DiskLayer {
    tx: Option<Sender<Job>>,
    /// The write queue's bound, in jobs ([`DiskConfig::write_queue`]).
    queue_bound: usize,
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
        let shared = Arc::new(Shared::new(config.log.clone()));
        // Both queues are bounded by counts (`send_bounded`): a 65,536-job bounded channel was
        // 3.6 MB and a millisecond at every cache construction, the 4,096-use one 160 KB.
        let (tx, rx) = crossbeam_channel::unbounded();
        let (uses, uses_rx) = crossbeam_channel::unbounded();
        DiskLayer {
            tx: Some(tx),
            queue_bound: config.write_queue.max(1),
            uses: Some(uses),
            writer: Mutex::new(None),
            pending: Mutex::new(Some(Pending {
                rx,
                uses_rx,
                config: config.clone(),
                budget: config.budget_bytes.unwrap_or(memory_budget as u64),
                memory_budget: memory_budget as u64,
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
            .name("gpusvc-cache-loader".into())
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

    /// Queues a job unless [`DiskConfig::write_queue`] jobs are queued already (or the writer
    /// is gone). Never waits.
    fn try_send(&self, job: Job) -> bool {
        let Some(tx) = &self.tx else { return false };
        send_bounded(tx, job, &self.shared.queued, self.queue_bound)
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
            send_bounded(
                uses,
                (key, store_dir::now_ms()),
                &self.shared.uses_queued,
                USE_QUEUE,
            );
        }
    }

    /// An entry the loader read and checked did not decode on its first lookup: counted
    /// (`rejected_entries`), reported, and its file deleted by the writer — only the very file
    /// that was read (`origin`: device and inode), never one published under the name since.
    /// A full queue leaves the file; the next start rejects it again.
    pub(crate) fn rejected_at_lookup(
        &self,
        key: ProgramKey,
        origin: (u64, u64),
        error: &super::format::EntryError,
    ) {
        tracing::warn!(%key, %error, "rejected a damaged cache entry at its first lookup");
        bump(&self.shared.counters.rejected_entries, 1);
        if self.enabled() {
            self.try_send(Job::RemoveRejected(key, origin));
        }
    }

    /// Queues hot marks (dropped when the queue is full: the order of a load is advisory).
    /// No keys, no job.
    pub(crate) fn mark_hot(&self, keys: Vec<ProgramKey>) {
        if self.enabled() && !keys.is_empty() {
            self.try_send(Job::MarkHot(keys));
        }
    }

    /// Queues shaders known to compile for `compiled.list` (dropped when the queue is full: the
    /// next start compiles them on the driver again, as without the list).
    /// `epoch` is [`DiskLayer::epoch`] read when the batch was taken (under the memory
    /// cache's lock, which a clear holds while it moves the epoch): a batch taken before a
    /// clear is never written after it.
    pub(crate) fn mark_compiled(&self, hashes: Vec<ShaderHash>, epoch: u64) {
        if self.enabled() && !hashes.is_empty() {
            self.try_send(Job::MarkCompiled(hashes, epoch));
        }
    }

    /// The clear epoch now: bumped by every drop of the store (a clear, or too many refusals),
    /// so 0 means never emptied since the open.
    pub(crate) fn epoch(&self) -> u64 {
        self.shared.drop_epoch.load(Ordering::Acquire)
    }

    /// A handle that reads [`DiskLayer::epoch`] and keeps nothing else of the layer usable.
    pub(crate) fn epoch_watch(&self) -> EpochWatch {
        EpochWatch(self.shared.clone())
    }

    /// Empties the whole store, after the saves already queued (which are not written). Never
    /// waits: the writer sees the new epoch before its next job. Counted in `store_drops`; a
    /// drop the host did not ask for is reported (stats and log, once).
    pub(crate) fn drop_all(&self, reason: DropReason) {
        if self.drop_all_unreported() {
            self.report_drop(reason);
        }
    }

    /// [`DiskLayer::drop_all`] without the report: calls no host callback, so the caller may
    /// hold the cache's lock (the epoch then moves before an insert of the startup load can
    /// slip in). Returns whether there was a store to drop; then report with
    /// [`DiskLayer::report_drop`], with the lock let go.
    pub(crate) fn drop_all_unreported(&self) -> bool {
        if self.tx.is_none() {
            return false;
        }
        bump(&self.shared.counters.store_drops, 1);
        self.shared.drop_epoch.fetch_add(1, Ordering::AcqRel);
        self.try_send(Job::Wake);
        true
    }

    /// Reports a drop of the store when `reason` is one the host did not ask for (stats and
    /// log, once): may call the host's log callback.
    pub(crate) fn report_drop(&self, reason: DropReason) {
        if reason.is_reported() {
            self.shared.conditions.report(
                "dropped",
                format!("program cache: disk store dropped: {reason}"),
            );
        }
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

/// Sends `item` unless `bound` items counted in `queued` are waiting already (the receiver
/// counts each one out); never waits. Bounded by the count rather than by a bounded channel:
/// crossbeam's bounded channel allocates and initializes every slot when it is made (on the
/// host's thread, at every cache construction), the unbounded one grows in small blocks.
fn send_bounded<T>(tx: &Sender<T>, item: T, queued: &AtomicUsize, bound: usize) -> bool {
    if queued
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < bound).then_some(n + 1)
        })
        .is_err()
    {
        return false;
    }
    if tx.send(item).is_err() {
        queued.fetch_sub(1, Ordering::AcqRel);
        return false;
    }
    true
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
        // The first disk thread (it loads, then ends; it stops at its next entry once the
        // cache has let go of the load target), then the writer thread it started (it finishes
        // what is queued and ends). The loader never holds the cache itself, but a host's
        // `on_loaded` callback may, and let go of the last handle on that thread: it is not
        // joined then (it cannot join itself), it ends on its own.
        let me = std::thread::current().id();
        let first = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = first.filter(|w| w.thread().id() != me) {
            let _ = w.join();
        }
        let writer = self
            .shared
            .writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(w) = writer.filter(|w| w.thread().id() != me) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DropReason;

    #[test]
    fn only_drops_the_host_did_not_ask_for_are_reported() {
        assert!(!DropReason::Clear.is_reported());
        assert!(DropReason::DriverRefusals.is_reported());
        assert_eq!(
            DropReason::DriverRefusals.to_string(),
            "the driver refused several stored binaries in a row"
        );
    }
}
