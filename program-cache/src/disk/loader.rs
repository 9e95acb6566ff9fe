//! The startup loader: reads the store's entries (hot ones first, then most recently used
//! first), checks each without decoding it ([`super::format::check_packed`]), and hands them to
//! a [`LoadSink`], the memory cache; after the load it decodes them there in load order
//! ([`decode_loaded`]), unless a first lookup has ([`super::packed`]).

use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::key::{ProgramKey, ShaderHash};

use super::counters::bump;
use super::layer::Shared;
use super::pack::{self, PackPlan, PackSource};
use super::packed::PackedEntry;
use super::store_dir::{PackStatus, ReadError, Scan, StampDir};

/// Where the startup loader puts the entries it reads: the memory cache. The disk layer holds
/// it weakly (a [`std::sync::Weak`]): once the cache is gone the load stops.
pub(crate) trait LoadSink: Send + Sync {
    /// Inserts an entry read from disk and checked, not decoded yet; returns whether it is in
    /// memory now (false: no room, left on disk).
    fn insert_loaded(&self, key: ProgramKey, entry: PackedEntry) -> bool;
    /// Shaders `compiled.list` records as compiled, oldest first: their compile status becomes
    /// known (after the entries, so shaders a loaded program uses are not counted twice).
    fn compiled_loaded(&self, hashes: &[ShaderHash]);
    /// Decodes the entry under `key` if it is still as the load inserted it (not decoded,
    /// not replaced). One that does not decode is left as it is: its first lookup rejects it.
    fn decode_loaded(&self, key: &ProgramKey);
}

/// What the startup load did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Entries loaded into memory.
    pub loaded: usize,
    /// Entries rejected (damaged, foreign) and deleted at load. (An entry whose checksums hold
    /// but whose body does not decode is rejected at its first lookup instead, and counted in
    /// [`super::DiskCounters::rejected_entries`] then.)
    pub rejected: usize,
    /// Entries left on disk because the memory budget was full.
    pub skipped: usize,
    /// Entries whose bytes came from `load.pack` instead of their files (FORMAT.md, "The
    /// load pack"), whether inserted or not.
    pub from_pack: usize,
    /// Time from open to the end of the load.
    pub elapsed: Duration,
}

/// Decodes the entries the load inserted (`keys`, in load order) into `sink`, one at a time,
/// until the sink is gone, the store is dropped (a clear) or the cache is closing.
pub(super) fn decode_loaded(keys: &[ProgramKey], sink: &Weak<dyn LoadSink>, shared: &Shared) {
    for key in keys {
        if shared.closing.load(Ordering::Acquire) || shared.drop_epoch.load(Ordering::Acquire) != 0
        {
            break;
        }
        let Some(sink) = sink.upgrade() else { break };
        sink.decode_loaded(key);
    }
}

/// Reads every entry of `dir` in load order into `sink` until the sink is gone or the store is
/// cleared. One pass over the store ([`StampDir::load_pass`]) lists it, reads the entries ahead
/// (up to `read_ahead` file bytes, the memory budget: the cache cannot hold more) and gives the
/// load order; the scan of that pass goes to the writer through `scan_to` (the writer measures
/// the store from it instead of listing it again while the load runs). Entries are then
/// inserted in load order; one not read ahead is read when its turn comes. The keys inserted
/// are pushed on `loaded`, in that order.
pub(super) fn load_entries(
    dir: &StampDir,
    sink: &Weak<dyn LoadSink>,
    shared: &Shared,
    start: Instant,
    scan_to: crossbeam_channel::Sender<Scan>,
    read_ahead: u64,
    loaded: &mut Vec<ProgramKey>,
) -> LoadReport {
    let counters = &shared.counters;
    let mut report = LoadReport::default();
    // A clear since the cache was made ends the load: what is on disk is about to go.
    let stopped = || sink.strong_count() == 0 || shared.drop_epoch.load(Ordering::Acquire) != 0;
    let Some(pass) = dir.load_pass(read_ahead, &stopped) else {
        report.elapsed = start.elapsed();
        return report;
    };
    let _ = scan_to.send(pass.scan);
    drop(scan_to);
    let used = pass.pack;
    report.from_pack = used.from_pack;
    bump(&counters.loaded_from_pack, used.from_pack as u64);
    // What was read ahead, in load order, for a new pack: when there was no usable one, this
    // load read enough from files, and `entries/` had been quiet (module `pack`).
    let mut plan = (!matches!(used.status, PackStatus::Used | PackStatus::TooLarge)
        && used.from_files >= pack::PACK_MIN
        && used.quiet)
        .then(|| PackPlan {
            dir: used.dir,
            sources: Vec::new(),
        });
    let mut full_in_a_row = 0;
    for (entry, read) in pass.order {
        let Some(sink) = sink.upgrade() else { break };
        if shared.drop_epoch.load(Ordering::Acquire) != 0 {
            break;
        }
        if full_in_a_row >= 8 {
            report.skipped += 1;
            continue;
        }
        if let (Some(plan), Some(Ok(packed))) = (&mut plan, &read) {
            plan.sources.push(PackSource {
                key: entry.key,
                ino: packed.origin.1,
                last_use_ms: entry.last_use_ms,
                allocated: entry.size,
                bytes: packed.bytes(),
            });
        }
        match read.unwrap_or_else(|| dir.read_packed(&entry.key)) {
            Ok(packed) => {
                if sink.insert_loaded(entry.key, packed) {
                    loaded.push(entry.key);
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
    // Not when the load was stopped: a clear since the open empties the list with the store.
    if let Some(sink) = sink.upgrade()
        && shared.drop_epoch.load(Ordering::Acquire) == 0
    {
        sink.compiled_loaded(&dir.compiled_shaders());
        // Before the load is reported: the writer looks for it once the load is done. Not for
        // large entries (`pack::PACK_MAX_AVERAGE`).
        if let Some(plan) = plan
            && !plan.sources.is_empty()
            && plan.sources.iter().map(|s| s.bytes.len()).sum::<usize>() / plan.sources.len()
                < pack::PACK_MAX_AVERAGE
        {
            *shared.pack_plan.lock().unwrap_or_else(|e| e.into_inner()) = Some(plan);
        }
    }
    report.elapsed = start.elapsed();
    report
}
