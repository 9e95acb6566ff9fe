//! The GPU side of the persistence split: a sandboxed GPU process cannot open files, so the
//! cache hands every saved program to the host ([`PersistSink`], e.g. over IPC to the browser
//! process, which keeps a [`super::Store`]) and takes the entries back at the next start with
//! [`crate::ProgramCache::insert_entry`].
//!
//! # Threads
//! The sink is called on **one library thread** (`gpusvc-cache-persist`), never on the GPU
//! thread and never with the cache's lock held: the cache only queues jobs (`try_send` on
//! bounded queues — saves, refusals and store drops on one of [`PersistConfig::queue`] jobs, last
//! uses on their own of [`USE_QUEUE`]); a job that finds its queue full is dropped and counted
//! (`dropped`), the GPU thread never waits for the host. The entry is encoded (postcard, LZ4,
//! CRC32C) on that thread too, so compression stays off the GPU thread, as with the disk
//! writer. Dropping the cache closes the queues, lets the thread deliver what was queued, and
//! joins it: the sink is never called once the drop has returned. (A sink that blocks forever
//! therefore blocks the drop: it should post its IPC message and return.) When the sink itself
//! drops the last handle, that drop cannot wait for the call it is in: what was still queued is
//! discarded and the sink is not called again. From inside the sink,
//! [`crate::ProgramCache::flush_persist`] returns at once (it would wait for that very call).
//!
//! Order: saves, refusals, store rejections and compiled-shader batches reach the sink in the
//! order they happened (one queue); uses travel on their own queue, so an `entry_used(k)` may come before the
//! `entry_saved(k)` it follows, or after an `entry_rejected(k)` (`Store::touch` of a key the
//! store does not hold, or no longer holds, is harmless).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::key::{ProgramKey, ShaderHash};
use crate::program::SharedProgram;

use super::config::DiskConfig;
use super::counters::bump;
use super::format::EntryError;
use super::stamp::CompatibilityStamp;
use super::store_dir::now_ms;

/// Where a sandboxed GPU process's cache sends what it would otherwise write to disk. Every
/// method is called on the cache's persistence thread (see the module docs), one call at a
/// time, never after the cache has been dropped.
pub trait PersistSink: Send + Sync {
    /// A program was saved: `entry` is a whole, self-validating entry in FORMAT.md's encoding
    /// (this cache's stamp hash, `key`, checksums, LZ4 as configured), for
    /// [`super::Store::put`] on the other side.
    fn entry_saved(&self, key: &ProgramKey, entry: &[u8]);
    /// The cache answered a lookup of `key` from memory (at most once per key per
    /// [`PersistConfig::use_interval`]): for [`super::Store::touch`].
    fn entry_used(&self, key: &ProgramKey);
    /// The driver refused the binary of an entry inserted with
    /// [`crate::ProgramCache::insert_entry`] (or, when the cache has a disk store too, one that
    /// store loaded): the store should delete it ([`super::Store::remove`]).
    fn entry_rejected(&self, key: &ProgramKey);
    /// The driver refused [`PersistConfig::max_consecutive_rejections`] inserted binaries in a
    /// row: it changed in a way the stamp did not capture, so the whole store should be
    /// emptied ([`super::Store::clear`]), as the disk layer does with its own store.
    fn store_rejected(&self);
    /// Shaders that compiled and that no saved entry records (the good shaders of programs
    /// whose other shader failed), in batches as the disk layer writes its `compiled.list`
    /// (queued in order with the saves; a batch taken before a store rejection may arrive after
    /// it, and its statuses still hold):
    /// for [`super::Store::mark_compiled`], so the next start can hand them to
    /// [`crate::ProgramCache::insert_compiled`] and compile none of them again. The default
    /// does nothing (such shaders are then compiled again at the next start, as before).
    fn shaders_compiled(&self, hashes: &[ShaderHash]) {
        let _ = hashes;
    }
}

/// The GPU side's persistence configuration ([`crate::ProgramCacheBuilder::persist`]).
#[derive(Clone)]
pub struct PersistConfig {
    /// The stamp computed from the driver: entries are encoded with its hash, and
    /// [`crate::ProgramCache::insert_entry`] accepts only entries of it. Send it to the
    /// browser side (e.g. [`CompatibilityStamp::describe`]) to open the matching store.
    pub stamp: CompatibilityStamp,
    /// The host's sink.
    pub sink: Arc<dyn PersistSink>,
    /// LZ4-compress payloads.
    pub compress: bool,
    /// Capacity of the job queue (saves, refusals); a full queue drops the job (counted).
    pub queue: usize,
    /// After this many inserted binaries refused by the driver in a row, every inserted entry
    /// leaves memory and [`PersistSink::store_rejected`] is called.
    pub max_consecutive_rejections: u32,
    /// [`PersistSink::entry_used`] is called at most once per key per this interval.
    pub use_interval: Duration,
}

impl std::fmt::Debug for PersistConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistConfig")
            .field("stamp", &self.stamp)
            .field("compress", &self.compress)
            .field("queue", &self.queue)
            .field(
                "max_consecutive_rejections",
                &self.max_consecutive_rejections,
            )
            .field("use_interval", &self.use_interval)
            .finish_non_exhaustive()
    }
}

impl PersistConfig {
    /// Default [`PersistConfig::queue`]: 256 jobs.
    pub const DEFAULT_QUEUE: usize = 256;

    /// `stamp` and `sink` with the disk layer's defaults: LZ4 on, a queue of 256 jobs, the
    /// store rejected after 3 refused binaries in a row, one use per key per minute.
    pub fn new(stamp: CompatibilityStamp, sink: Arc<dyn PersistSink>) -> Self {
        PersistConfig {
            stamp,
            sink,
            compress: DiskConfig::DEFAULT_COMPRESS,
            queue: Self::DEFAULT_QUEUE,
            max_consecutive_rejections: DiskConfig::DEFAULT_MAX_CONSECUTIVE_REJECTIONS,
            use_interval: DiskConfig::DEFAULT_USE_RECORD_INTERVAL,
        }
    }
}

/// Counters of the persistence split (a snapshot; [`crate::Stats::persist`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PersistCounters {
    /// Saves queued for the sink.
    pub saved: u64,
    /// [`PersistSink::entry_saved`] calls made.
    pub sent: u64,
    /// Jobs dropped because their queue was full (saves, uses, refusals, compiled batches).
    pub dropped: u64,
    /// Saves not sent because the entry would exceed FORMAT.md's payload bound.
    pub oversized: u64,
    /// [`PersistSink::entry_used`] calls made.
    pub used: u64,
    /// Entries inserted by [`crate::ProgramCache::insert_entry`] (or already there).
    pub inserted: u64,
    /// `insert_entry` calls refused (invalid bytes, no room).
    pub insert_refused: u64,
    /// [`PersistSink::entry_rejected`] calls made (the driver refused an inserted binary).
    pub rejected: u64,
    /// [`PersistSink::store_rejected`] calls made.
    pub store_rejections: u64,
    /// Shaders handed to [`PersistSink::shaders_compiled`] (counted also when the sink ignores
    /// them, as the default method does).
    pub compiled: u64,
}

/// Why [`crate::ProgramCache::insert_entry`] refused an entry. Nothing was inserted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InsertError {
    /// The cache has no [`PersistConfig`]: it knows no stamp to check the entry against.
    #[error("the cache has no persistence configured (no stamp to check entries against)")]
    NotConfigured,
    /// The bytes are not a valid entry of this cache's stamp (each check of FORMAT.md:
    /// size, header CRC, magic, version, flags, stamp, payload length and CRC, decompression,
    /// decode).
    #[error("invalid entry: {0}")]
    Invalid(#[from] EntryError),
    /// The entry holds an empty binary.
    #[error("the entry's program binary is empty")]
    EmptyBinary,
    /// The program does not fit in the memory budget in force without evicting (inserted
    /// entries never push out what this process made), or memory pressure is critical.
    #[error("no room: {size} bytes with {used} of {budget} in use")]
    NoRoom {
        /// The program's stored size.
        size: usize,
        /// Bytes in use.
        used: usize,
        /// The budget in force.
        budget: usize,
    },
}

/// Capacity of the last-use queue.
pub const USE_QUEUE: usize = 4096;
/// Bound of the per-key last-report map (cleared when larger).
const MAX_REPORTED: usize = 1 << 16;

enum Job {
    Save(ProgramKey, SharedProgram),
    Rejected(ProgramKey),
    StoreRejected,
    Compiled(Vec<ShaderHash>),
    Flush(Sender<()>),
}

#[derive(Default)]
pub(crate) struct AtomicPersistCounters {
    saved: AtomicU64,
    sent: AtomicU64,
    dropped: AtomicU64,
    oversized: AtomicU64,
    used: AtomicU64,
    pub(crate) inserted: AtomicU64,
    pub(crate) insert_refused: AtomicU64,
    rejected: AtomicU64,
    store_rejections: AtomicU64,
    compiled: AtomicU64,
}

/// The cache's handle on the persistence thread.
pub(crate) struct PersistLayer {
    tx: Option<Sender<Job>>,
    uses: Option<Sender<ProgramKey>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    counters: Arc<AtomicPersistCounters>,
    alive: Arc<AtomicBool>,
    /// The persistence thread (a flush or drop on it cannot wait for itself).
    worker: Option<ThreadId>,
    /// Set when the last handle was dropped on the persistence thread (inside the sink): the
    /// worker then discards what is left instead of calling the sink after that drop.
    abandoned: Arc<AtomicBool>,
    pub(crate) stamp_hash: [u8; 20],
    pub(crate) max_consecutive_rejections: u32,
}

impl std::fmt::Debug for PersistLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistLayer").finish_non_exhaustive()
    }
}

impl PersistLayer {
    /// Starts the persistence thread.
    pub(crate) fn new(config: PersistConfig) -> Self {
        let (tx, rx) = crossbeam_channel::bounded(config.queue.max(1));
        let (uses, uses_rx) = crossbeam_channel::bounded(USE_QUEUE);
        let counters = Arc::new(AtomicPersistCounters::default());
        let alive = Arc::new(AtomicBool::new(true));
        let stamp_hash = config.stamp.hash();
        let max_consecutive_rejections = config.max_consecutive_rejections.max(1);
        let abandoned = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            abandoned: abandoned.clone(),
            sink: config.sink,
            counters: counters.clone(),
            stamp_hash,
            compress: config.compress,
            use_interval_ms: config.use_interval.as_millis() as u64,
            reported: HashMap::new(),
        };
        let spawned = std::thread::Builder::new()
            .name("gpusvc-cache-persist".into())
            .spawn(move || worker.run(&rx, &uses_rx));
        let thread = match spawned {
            Ok(handle) => Some(handle),
            Err(e) => {
                tracing::warn!("program cache: no persistence thread ({e}); nothing is sent");
                alive.store(false, Ordering::Release);
                None
            }
        };
        PersistLayer {
            tx: Some(tx),
            uses: Some(uses),
            worker: thread.as_ref().map(|t| t.thread().id()),
            thread: Mutex::new(thread),
            abandoned,
            counters,
            alive,
            stamp_hash,
            max_consecutive_rejections,
        }
    }

    fn send(&self, job: Job) -> bool {
        let sent = self.alive.load(Ordering::Acquire)
            && self.tx.as_ref().is_some_and(|tx| tx.try_send(job).is_ok());
        if !sent {
            bump(&self.counters.dropped, 1);
        }
        sent
    }

    /// Queues a save (never waits; a full queue drops it, counted).
    pub(crate) fn save(&self, key: ProgramKey, program: SharedProgram) {
        if self.send(Job::Save(key, program)) {
            bump(&self.counters.saved, 1);
        }
    }

    /// Queues a use (never waits).
    pub(crate) fn used(&self, key: ProgramKey) {
        let sent = self.alive.load(Ordering::Acquire)
            && self.uses.as_ref().is_some_and(|u| u.try_send(key).is_ok());
        if !sent {
            bump(&self.counters.dropped, 1);
        }
    }

    /// Queues a refusal by the driver (never waits).
    pub(crate) fn rejected(&self, key: ProgramKey) {
        self.send(Job::Rejected(key));
    }

    /// Queues a store rejection (never waits).
    pub(crate) fn store_rejected(&self) {
        self.send(Job::StoreRejected);
    }

    /// Queues shaders known to compile that no saved entry records (never waits; a full queue
    /// drops the batch, counted: the next start compiles them on the driver again).
    pub(crate) fn compiled(&self, hashes: Vec<ShaderHash>) {
        if !hashes.is_empty() {
            self.send(Job::Compiled(hashes));
        }
    }

    /// Waits until everything queued so far has been handed to the sink (each job is one sink
    /// call: the wait is as long as the host's sink takes). On the persistence thread (a sink
    /// that flushes) it returns at once: the wait would be for the very call it is in.
    pub(crate) fn flush(&self) {
        if self.worker == Some(std::thread::current().id()) {
            return;
        }
        if let (Some(tx), true) = (&self.tx, self.alive.load(Ordering::Acquire)) {
            let (ack, done) = crossbeam_channel::bounded(1);
            if tx.send(Job::Flush(ack)).is_ok() {
                let _ = done.recv();
            }
        }
    }

    pub(crate) fn counters(&self) -> PersistCounters {
        let c = &self.counters;
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PersistCounters {
            saved: g(&c.saved),
            sent: g(&c.sent),
            dropped: g(&c.dropped),
            oversized: g(&c.oversized),
            used: g(&c.used),
            inserted: g(&c.inserted),
            insert_refused: g(&c.insert_refused),
            rejected: g(&c.rejected),
            store_rejections: g(&c.store_rejections),
            compiled: g(&c.compiled),
        }
    }

    pub(crate) fn atomic_counters(&self) -> &AtomicPersistCounters {
        &self.counters
    }
}

impl Drop for PersistLayer {
    fn drop(&mut self) {
        // The job queue first: the thread ends when it is closed, after what was queued.
        self.tx.take();
        self.uses.take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            // The last handle on the cache dropped inside the sink: the thread is ending by
            // itself (its queues are closed) and cannot join itself.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            } else {
                // Nothing may reach the sink once this drop has returned.
                self.abandoned.store(true, Ordering::Release);
            }
        }
    }
}

struct Worker {
    sink: Arc<dyn PersistSink>,
    /// [`PersistLayer::abandoned`].
    abandoned: Arc<AtomicBool>,
    counters: Arc<AtomicPersistCounters>,
    stamp_hash: [u8; 20],
    compress: bool,
    use_interval_ms: u64,
    /// When each key's use was last reported (bounded).
    reported: HashMap<ProgramKey, Instant>,
}

impl Worker {
    fn run(mut self, rx: &Receiver<Job>, uses: &Receiver<ProgramKey>) {
        loop {
            crossbeam_channel::select! {
                recv(rx) -> job => match job {
                    Ok(job) => self.job(job, uses),
                    Err(_) => break,
                },
                recv(uses) -> key => match key {
                    Ok(key) => self.use_of(key),
                    // Closed after the job queue: the next select sees that one closed too.
                    Err(_) => {
                        for job in rx.iter() {
                            self.job(job, uses);
                        }
                        break;
                    }
                },
            }
        }
        for key in uses.try_iter() {
            self.use_of(key);
        }
    }

    /// Calls the sink, containing a panic of the host's code (the thread goes on).
    fn call(&self, what: &str, f: impl FnOnce(&dyn PersistSink)) {
        if self.abandoned.load(Ordering::Acquire) {
            return;
        }
        let sink = &*self.sink;
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(sink))).is_err() {
            tracing::error!("program cache: the persistence sink panicked in {what}");
        }
    }

    fn job(&mut self, job: Job, uses: &Receiver<ProgramKey>) {
        match job {
            Job::Save(key, program) => {
                let bytes = super::format::encode_bounded(
                    &key,
                    &program,
                    &self.stamp_hash,
                    now_ms(),
                    self.compress,
                );
                match bytes {
                    Some(bytes) => {
                        self.call("entry_saved", |s| s.entry_saved(&key, &bytes));
                        bump(&self.counters.sent, 1);
                    }
                    None => bump(&self.counters.oversized, 1),
                }
            }
            Job::Rejected(key) => {
                self.reported.remove(&key);
                self.call("entry_rejected", |s| s.entry_rejected(&key));
                bump(&self.counters.rejected, 1);
            }
            Job::StoreRejected => {
                self.reported.clear();
                self.call("store_rejected", |s| s.store_rejected());
                bump(&self.counters.store_rejections, 1);
            }
            Job::Compiled(hashes) => {
                self.call("shaders_compiled", |s| s.shaders_compiled(&hashes));
                bump(&self.counters.compiled, hashes.len() as u64);
            }
            Job::Flush(ack) => {
                for key in uses.try_iter() {
                    self.use_of(key);
                }
                let _ = ack.send(());
            }
        }
    }

    fn use_of(&mut self, key: ProgramKey) {
        let now = Instant::now();
        if let Some(last) = self.reported.get(&key)
            && now.duration_since(*last).as_millis() < u128::from(self.use_interval_ms)
        {
            return;
        }
        if self.reported.len() >= MAX_REPORTED {
            self.reported.clear();
        }
        self.reported.insert(key, now);
        self.call("entry_used", |s| s.entry_used(&key));
        bump(&self.counters.used, 1);
    }
}
