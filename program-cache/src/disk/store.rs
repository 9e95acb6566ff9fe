//! [`Store`]: the disk store on its own, for the process that owns the disk when the GPU
//! process is sandboxed (a browser process): no GL, no [`crate::ProgramCache`]. It keeps the
//! entries a GPU process's [`super::PersistSink`] hands over and streams them back at the next
//! start, with every rule of the disk layer (the same folder layout, locks, publish, eviction,
//! last-use log, stale-store collection and hostile-folder handling; `FORMAT.md`).
//!
//! # Threads
//! A `Store` works **synchronously on its caller's thread** (a browser calls it from its own
//! background sequence): there is no thread of its own, and every wait is bounded — the open
//! waits at most [`super::OPEN_LOCK_WAIT`] for `in-use.lock`, an eviction or compaction at most
//! [`super::EVICT_LOCK_WAIT`] for `evict.lock` (then it is skipped and counted in `lock_busy`),
//! and nothing else waits on another process. One mutex serializes the calls of one `Store`
//! (it is `Send + Sync`); [`Store::entries`] reads without it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::key::{ProgramKey, ShaderHash};

use super::config::{DiskConfig, LogCallback};
use super::counters::{DiskCounters, bump};
use super::format::{self, EntryError};
use super::layer::Shared;
use super::stamp::CompatibilityStamp;
use super::store_dir::{
    self, EntryFile, MAX_ENTRY_FILE, MAX_STAMP_FILE, OPEN_LOCK_WAIT, Published, ReadError, StampDir,
};
use super::writer::Writer;

/// What a [`Store`] is opened with.
#[derive(Clone)]
pub struct StoreConfig {
    /// The cache folder (one sub-folder per stamp, as for [`DiskConfig::dir`]).
    pub dir: PathBuf,
    /// The stamp the GPU process computed and sent ([`CompatibilityStamp::describe`] /
    /// [`CompatibilityStamp::parse`] carry it as text). The open collects the folder's stale
    /// stores by this stamp's rules (a store of the same product with an older version goes at
    /// once), so check that its `host_product` and `host_version` are the browser's own before
    /// opening a stamp a GPU process sent.
    pub stamp: CompatibilityStamp,
    /// Byte budget of the store on disk (allocated blocks, logs included).
    pub budget_bytes: u64,
    /// Eviction brings the store down to this fraction of the budget.
    pub low_water: f64,
    /// A key's last use is appended to `lru.log` at most once per this interval.
    pub use_record_interval: Duration,
    /// Where conditions (unusable folder, write failure, ...) are reported, once each, and
    /// removals logged.
    pub log: Option<LogCallback>,
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("dir", &self.dir)
            .field("stamp", &self.stamp)
            .field("budget_bytes", &self.budget_bytes)
            .field("low_water", &self.low_water)
            .field("use_record_interval", &self.use_record_interval)
            .finish_non_exhaustive()
    }
}

impl StoreConfig {
    /// Default budget: 64 MiB.
    pub const DEFAULT_BUDGET: u64 = 64 << 20;

    /// A store of `dir` for `stamp`: 64 MiB budget, and [`DiskConfig`]'s defaults (low water
    /// 80 %, one last-use record per key per minute), no log.
    pub fn new(dir: impl Into<PathBuf>, stamp: CompatibilityStamp) -> Self {
        StoreConfig {
            dir: dir.into(),
            stamp,
            budget_bytes: Self::DEFAULT_BUDGET,
            low_water: DiskConfig::DEFAULT_LOW_WATER,
            use_record_interval: DiskConfig::DEFAULT_USE_RECORD_INTERVAL,
            log: None,
        }
    }
}

/// Why a [`Store`] call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The folder cannot be used (missing and not creatable, not ours, another process holds
    /// `in-use.lock` exclusively past the bounded wait, ...).
    #[error("store folder {dir} unusable: {source}")]
    Open {
        /// The cache folder.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The bytes are not a valid entry of this store's stamp; nothing was written.
    #[error("invalid entry: {0}")]
    Invalid(#[from] EntryError),
    /// Writing failed (disk full even after evicting, read-only, ...); reported once.
    #[error("store I/O failed: {0}")]
    Io(std::io::Error),
}

/// What [`Store::put`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// Published.
    Written {
        /// The entry's key.
        key: ProgramKey,
    },
    /// An entry for the key was there already (entries are never rewritten).
    AlreadyPresent {
        /// The entry's key.
        key: ProgramKey,
    },
}

impl PutOutcome {
    /// The entry's key.
    pub fn key(&self) -> ProgramKey {
        match *self {
            PutOutcome::Written { key } | PutOutcome::AlreadyPresent { key } => key,
        }
    }
}

/// A [`Store`]'s statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Entries in the store now (this process's view at its last measurement).
    pub entries: u64,
    /// Bytes the store takes on disk now (allocated blocks, logs and folders included).
    pub bytes: u64,
    /// `put` calls.
    pub puts: u64,
    /// `put` calls refused for invalid bytes (another stamp, damaged, too large).
    pub refused: u64,
    /// `touch` calls.
    pub touches: u64,
    /// Entries yielded by [`Store::entries`].
    pub streamed: u64,
    /// Entries deleted by [`Store::remove`].
    pub removed: u64,
    /// The disk layer's counters: `writes`, `already_present`, `rejected_entries` (damaged
    /// entries found while streaming, deleted), `evictions`, `lock_busy`, `use_records`,
    /// `stores_removed`, `odd_removed`, `space_retries`, `write_errors`, `recreated`, ...
    pub disk: DiskCounters,
}

#[derive(Default)]
struct StoreCounters {
    puts: AtomicU64,
    refused: AtomicU64,
    touches: AtomicU64,
    streamed: AtomicU64,
    removed: AtomicU64,
}

/// The disk store of one stamp, on its own (see the module docs). Made with [`Store::open`].
///
/// ```
/// use program_cache::disk::{Store, StoreConfig};
/// use program_cache::{CompatibilityStamp, DriverIdentity};
///
/// let folder = tempfile::tempdir().unwrap();
/// let stamp = CompatibilityStamp::new(DriverIdentity::default(), "doc-example", "1.0");
/// // The stamp travels as text from the GPU process.
/// let stamp = CompatibilityStamp::parse(&stamp.describe()).unwrap();
/// let store = Store::open(StoreConfig::new(folder.path(), stamp)).unwrap();
/// assert_eq!(store.entries().count(), 0);
/// assert!(store.put(b"not an entry").is_err());
/// ```
pub struct Store {
    dir: Arc<StampDir>,
    shared: Arc<Shared>,
    writer: Mutex<Writer>,
    counters: Arc<StoreCounters>,
    stamp: CompatibilityStamp,
    stamp_hash: [u8; 20],
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir.dir)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating as needed, `0700`) the store of `config.stamp` in `config.dir`, on the
    /// caller's thread: takes `in-use.lock` shared (at most [`super::OPEN_LOCK_WAIT`]), checks
    /// or rewrites `STAMP`, removes stale stores of the folder, dead writers' temporary files
    /// and names in `entries/` that are not entries, and trims the store to its budget. A stamp
    /// whose text is longer than a `STAMP` file may be (64 KiB: a field that large could never
    /// be read back) is [`StoreError::Open`] (`InvalidInput`), nothing created.
    pub fn open(config: StoreConfig) -> Result<Store, StoreError> {
        let stamp_len = config.stamp.describe().len() as u64;
        if stamp_len > MAX_STAMP_FILE {
            return Err(StoreError::Open {
                dir: config.dir.clone(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "the stamp text is {stamp_len} bytes, more than a STAMP file's \
                         {MAX_STAMP_FILE}: it could not be read back"
                    ),
                ),
            });
        }
        let shared = Arc::new(Shared::new(config.log.clone()));
        // Nothing loads into a memory cache here: the order of the stream is the caller's.
        shared.finish_load(super::LoadReport::default(), None);
        let (dir, notes) = StampDir::open(&config.dir, &config.stamp, false, OPEN_LOCK_WAIT)
            .map_err(|source| {
                if source.kind() == std::io::ErrorKind::WouldBlock {
                    bump(&shared.counters.lock_busy, 1);
                }
                StoreError::Open {
                    dir: config.dir.clone(),
                    source,
                }
            })?;
        let dir = Arc::new(dir);
        for side in &notes.replaced {
            shared.conditions.log(&format!(
                "program cache store: replaced {}/{side}: not a file of ours (never followed)",
                dir.dir.display()
            ));
        }
        if let Some(why) = &notes.stamp_repaired {
            shared.conditions.report(
                "stamp",
                format!(
                    "program cache store: the STAMP file of {} was {why}; rewritten",
                    dir.dir.display()
                ),
            );
        }
        if let Ok(root) = dir.root_fd() {
            let removed = store_dir::remove_other_stores(
                &root,
                &config.dir,
                &config.stamp,
                notes.previous_open_ms,
                &|t| shared.conditions.log(&t),
                &|| false,
            );
            bump(&shared.counters.stores_removed, removed as u64);
        }
        dir.remove_stale_tmp();
        let mut writer = Writer::new(
            dir.clone(),
            shared.clone(),
            config.budget_bytes,
            config.low_water,
            config.use_record_interval,
        );
        writer.rescan(true);
        writer.trim();
        Ok(Store {
            stamp_hash: dir.stamp_hash,
            dir,
            shared,
            writer: Mutex::new(writer),
            counters: Arc::new(StoreCounters::default()),
            stamp: config.stamp,
        })
    }

    fn writer(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stamp the store was opened for.
    pub fn stamp(&self) -> &CompatibilityStamp {
        &self.stamp
    }

    /// The store's own folder (`<dir>/<stamp dir>`).
    pub fn path(&self) -> &Path {
        &self.dir.dir
    }

    /// Checks `entry` (an entry in FORMAT.md's encoding, as a GPU process's
    /// [`super::PersistSink::entry_saved`] received it) as a reader would — size bound, header
    /// CRC, magic, version, this store's stamp, payload CRC, decompression bound, decode — and
    /// publishes it atomically (temporary file + hard link; an entry already there is kept),
    /// then evicts least recently used entries when over budget. A full disk evicts and retries
    /// once; a vanished folder is recreated. Invalid bytes: [`StoreError::Invalid`], nothing
    /// written.
    pub fn put(&self, entry: &[u8]) -> Result<PutOutcome, StoreError> {
        bump(&self.counters.puts, 1);
        let key = match check_entry(entry, &self.stamp_hash) {
            Ok(key) => key,
            Err(e) => {
                bump(&self.counters.refused, 1);
                return Err(StoreError::Invalid(e));
            }
        };
        let mut w = self.writer();
        w.write_uses_if_due();
        match w.save(false, |d| d.publish_bytes(&key, entry)) {
            Ok(Published::Written { .. }) => Ok(PutOutcome::Written { key }),
            Ok(Published::Present) => Ok(PutOutcome::AlreadyPresent { key }),
            Ok(Published::TooLarge) => {
                bump(&self.counters.refused, 1);
                Err(StoreError::Invalid(
                    EntryError::TooLarge(entry.len() as u64),
                ))
            }
            Err(e) => Err(StoreError::Io(e)),
        }
    }

    /// Records a use of `key` (the GPU process's [`super::PersistSink::entry_used`]): its
    /// last-use time for eviction and for the order of [`Store::entries`]. Coalesced as the
    /// disk layer does: at most one `lru.log` record per key per `use_record_interval`, pending
    /// uses appended at most once a second (and at [`Store::flush`] and drop).
    pub fn touch(&self, key: &ProgramKey) {
        bump(&self.counters.touches, 1);
        let mut w = self.writer();
        w.add_use(*key, store_dir::now_ms());
        w.write_uses_if_due();
    }

    /// Records shaders known to compile that no entry records (the GPU process's
    /// [`super::PersistSink::shaders_compiled`]) in the store's `compiled.list`, bounded and
    /// compacted as the disk layer's: the newest 16 Ki distinct hashes, or fewer where those
    /// would take more than about 1/16 of the budget (never fewer than 256). Of a larger slice
    /// only that many of the last hashes are appended. A failed append is counted in
    /// `record_errors`.
    pub fn mark_compiled(&self, hashes: &[ShaderHash]) {
        self.writer().mark_compiled(hashes);
    }

    /// The shaders `compiled.list` records, oldest first (at most its newest 16 Ki distinct
    /// hashes; a damaged or missing list reads as fewer or none): for the GPU process's
    /// [`crate::ProgramCache::insert_compiled`] at its next start.
    pub fn compiled_shaders(&self) -> Vec<ShaderHash> {
        self.dir.compiled_shaders()
    }

    /// Appends the pending last uses now.
    pub fn flush(&self) {
        self.writer().write_uses();
    }

    /// Deletes the entry of `key` (the GPU process's driver refused it:
    /// [`super::PersistSink::entry_rejected`]); returns whether there was one.
    pub fn remove(&self, key: &ProgramKey) -> Result<bool, StoreError> {
        let mut w = self.writer();
        let removed = self.dir.remove_entry(key).map_err(StoreError::Io)?;
        if removed {
            bump(&self.counters.removed, 1);
            w.rescan(false);
        }
        Ok(removed)
    }

    /// Deletes every entry of the store and empties its logs (under `evict.lock` when it can
    /// be had within the bounded wait). Returns the entries deleted. Counted in `store_drops`
    /// (the entries in `evictions`).
    pub fn clear(&self) -> Result<usize, StoreError> {
        let n = self.writer().drop_all().map_err(StoreError::Io)?;
        bump(&self.shared.counters.store_drops, 1);
        Ok(n)
    }

    /// The entries, in the disk layer's load order — hot ones first, then most recently used
    /// first — each read with a bounded read and yielded only when every check of FORMAT.md
    /// holds (damaged or foreign entries are deleted and counted in `rejected_entries`, names
    /// that are not regular files are skipped, never opened for I/O). Pending last uses are
    /// appended first, so the order includes them. The listing is taken now; entries evicted
    /// meanwhile (by another process) are skipped.
    pub fn entries(&self) -> StoreEntries {
        let order = {
            let mut w = self.writer();
            w.write_uses();
            self.dir.load_order()
        };
        StoreEntries {
            dir: self.dir.clone(),
            shared: self.shared.clone(),
            counters: self.counters.clone(),
            order: order.into_iter(),
        }
    }

    /// Counters and the store's size.
    pub fn stats(&self) -> StoreStats {
        let (entries, bytes) = {
            let w = self.writer();
            (w.entries, w.size)
        };
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StoreStats {
            entries,
            bytes,
            puts: g(&self.counters.puts),
            refused: g(&self.counters.refused),
            touches: g(&self.counters.touches),
            streamed: g(&self.counters.streamed),
            removed: g(&self.counters.removed),
            disk: self.shared.counters.snapshot(),
        }
    }

    /// The first condition reported (write failure, repaired `STAMP`, busy lock, ...).
    pub fn condition(&self) -> Option<String> {
        self.shared.conditions.first()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.writer().write_uses();
    }
}

/// The checks of a whole entry of `stamp_hash` received from another process: the size bound
/// before anything else, then [`format::decode`] (header CRC, magic, version, header length,
/// flags, stamp, payload length, payload CRC, decompression bound, decode). Returns the key
/// in its header.
pub(crate) fn check_entry(entry: &[u8], stamp_hash: &[u8; 20]) -> Result<ProgramKey, EntryError> {
    if entry.len() as u64 > MAX_ENTRY_FILE {
        return Err(EntryError::TooLarge(entry.len() as u64));
    }
    let (header, program) = format::decode(entry, stamp_hash, None)?;
    // The GPU side refuses an empty binary (`InsertError::EmptyBinary`): keeping one would
    // stream it back at every start for nothing.
    if !program.is_well_formed() {
        return Err(EntryError::Decode(
            "the program binary is empty or the entry is malformed".into(),
        ));
    }
    Ok(header.key)
}

/// The iterator of [`Store::entries`]: `(key, entry bytes)` in load order.
pub struct StoreEntries {
    dir: Arc<StampDir>,
    shared: Arc<Shared>,
    counters: Arc<StoreCounters>,
    order: std::vec::IntoIter<EntryFile>,
}

impl std::fmt::Debug for StoreEntries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreEntries")
            .field("left", &self.order.len())
            .finish_non_exhaustive()
    }
}

impl Iterator for StoreEntries {
    type Item = (ProgramKey, Vec<u8>);

    fn next(&mut self) -> Option<Self::Item> {
        for entry in self.order.by_ref() {
            match self.dir.read_bytes(&entry.key) {
                Ok(bytes) => {
                    bump(&self.counters.streamed, 1);
                    return Some((entry.key, bytes));
                }
                Err(ReadError::Rejected(e)) => {
                    tracing::debug!(key = %entry.key, error = %e, "store entry rejected");
                    bump(&self.shared.counters.rejected_entries, 1);
                }
                Err(ReadError::NotRegular(e)) => {
                    tracing::debug!(key = %entry.key, error = %e, "store entry is not a file");
                }
                Err(ReadError::Io(e)) => {
                    tracing::debug!(key = %entry.key, error = %e, "store entry vanished");
                }
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.order.len()))
    }
}
