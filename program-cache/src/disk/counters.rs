//! The disk counters: relaxed atomics bumped by the disk threads, read as a snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Appends of records to `lru.log`, `hot.list` or `compiled.list` that failed (a full disk,
    /// a folder where the file should be), one per batch: the records of the batch not written
    /// are lost (last uses, hot marks, compile statuses), never an entry.
    pub record_errors: u64,
    /// Entries the startup load took from `load.pack` instead of reading their files
    /// (FORMAT.md, "The load pack"); included in [`DiskCounters::loaded`] when inserted.
    pub loaded_from_pack: u64,
    /// Times `load.pack` was written.
    pub packs_written: u64,
}

#[derive(Default)]
pub(super) struct AtomicCounters {
    pub(super) writes: AtomicU64,
    pub(super) bytes_written: AtomicU64,
    pub(super) already_present: AtomicU64,
    pub(super) dropped_writes: AtomicU64,
    pub(super) write_errors: AtomicU64,
    pub(super) loaded: AtomicU64,
    pub(super) rejected_entries: AtomicU64,
    pub(super) evictions: AtomicU64,
    pub(super) store_drops: AtomicU64,
    pub(super) lock_busy: AtomicU64,
    pub(super) oversized: AtomicU64,
    pub(super) space_retries: AtomicU64,
    pub(super) stores_removed: AtomicU64,
    pub(super) odd_removed: AtomicU64,
    pub(super) recreated: AtomicU64,
    pub(super) use_records: AtomicU64,
    pub(super) compactions: AtomicU64,
    pub(super) record_errors: AtomicU64,
    pub(super) loaded_from_pack: AtomicU64,
    pub(super) packs_written: AtomicU64,
}

pub(super) fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl AtomicCounters {
    pub(super) fn snapshot(&self) -> DiskCounters {
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
            record_errors: g(&self.record_errors),
            loaded_from_pack: g(&self.loaded_from_pack),
            packs_written: g(&self.packs_written),
        }
    }
}
