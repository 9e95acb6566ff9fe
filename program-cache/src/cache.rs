//! `ProgramCache`: status storage + byte-budget binary storage + statistics, behind one lock.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::disk::{
    DiskConfig, DiskCounters, DiskLayer, DropReason, InsertError, LoadReport, LoadSink,
    PackedEntry, PersistConfig, PersistCounters, PersistLayer,
};

use crate::key::{ProgramKey, ShaderHash};
use crate::memory_store::{BinaryStore, Evicted, EvictionPolicy, PageId, Value};
use crate::program::{CachedProgram, SharedProgram};
use crate::stats::{Counters, HistogramCallback, Recorder, Stats, names};
use crate::status::{CompileStatus, LinkStatus, ShaderStatuses};

/// Default budget on desktop: 6 MiB.
pub const DESKTOP_BUDGET: usize = 6 * 1024 * 1024;
/// Default budget on mobile: 2 MiB.
pub const MOBILE_BUDGET: usize = 2 * 1024 * 1024;
/// Default budget on low-memory devices: 128 KiB.
pub const LOW_MEMORY_BUDGET: usize = 128 * 1024;

/// Cache configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Byte budget of the binary store.
    pub budget_bytes: usize,
    /// Eviction policy.
    pub policy: EvictionPolicy,
    /// How many compile statuses of shaders that no cached program uses are remembered.
    pub max_unreferenced_shader_statuses: NonZeroUsize,
}

impl CacheConfig {
    /// Desktop defaults (6 MiB, the default policy).
    pub fn desktop() -> Self {
        Self::with_budget(DESKTOP_BUDGET)
    }
    /// Mobile defaults (2 MiB, the default policy).
    pub fn mobile() -> Self {
        Self::with_budget(MOBILE_BUDGET)
    }
    /// Low-memory defaults (128 KiB, the default policy).
    pub fn low_memory() -> Self {
        Self::with_budget(LOW_MEMORY_BUDGET)
    }
    /// This budget with the default policy ([`EvictionPolicy::default`], W-TinyLFU).
    pub fn with_budget(budget_bytes: usize) -> Self {
        CacheConfig {
            budget_bytes,
            policy: EvictionPolicy::default(),
            max_unreferenced_shader_statuses: NonZeroUsize::new(4096).expect("non-zero"),
        }
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self::desktop()
    }
}

/// System memory pressure, as the host's memory-pressure listener reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryPressure {
    /// Normal operation.
    #[default]
    None,
    /// Trim to a quarter of the budget and stay there until the level is `None` again: saves
    /// evict down to budget/4, and an entry larger than budget/4 is refused.
    Moderate,
    /// Drop everything and refuse saves until pressure is `None` again.
    Critical,
}

/// Why a save was refused. The cache is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaveError {
    /// The binary has no bytes and the entry records no failure, or the entry is otherwise
    /// malformed ([`CachedProgram::is_well_formed`]: a failure record with a binary or with a
    /// log over [`crate::MAX_FAILURE_LOG`], a list over its bound).
    #[error("program binary is empty or the entry is malformed")]
    EmptyBinary,
    /// The entry alone is larger than the budget in force (a quarter of the configured budget
    /// under moderate memory pressure).
    #[error("entry of {size} bytes exceeds the cache budget of {budget} bytes")]
    OverBudget {
        /// Entry size.
        size: usize,
        /// The budget in force.
        budget: usize,
    },
    /// Memory pressure is critical.
    #[error("memory pressure is critical: saves are refused")]
    CriticalPressure,
}

/// What a successful save did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaveReport {
    /// An entry with the same key was replaced.
    pub replaced: bool,
    /// Entries evicted to make room.
    pub evicted: usize,
}

/// Shaders compiled in this process are handed to the disk writer for `compiled.list` this
/// many at a time (and at [`ProgramCache::flush_disk`] and drop).
const COMPILED_BATCH: usize = 256;

#[derive(Debug)]
struct State {
    config: CacheConfig,
    statuses: ShaderStatuses,
    store: BinaryStore,
    pressure: MemoryPressure,
    recorder: Recorder,
    /// Disk binaries the driver refused in a row.
    disk_rejections_in_a_row: u32,
    /// Shaders that compiled in this process and are not on disk yet, for `compiled.list`
    /// (with a disk store only; at most [`COMPILED_BATCH`]).
    unpersisted: Vec<ShaderHash>,
    /// Moves when stored binaries stop being good to restore, or programs restored from them
    /// to keep: a clear, the disk entries dropped after the driver refused them in a row, a
    /// move to critical memory pressure.
    generation: u64,
}

impl State {
    /// The byte limit in force: the budget, a quarter of it under moderate pressure, 0 under
    /// critical pressure.
    fn effective_budget(&self) -> usize {
        effective_budget(self.config.budget_bytes, self.pressure)
    }

    /// Why a save of an entry of `size` bytes (`None`: not known yet) would be refused now.
    fn refusal(&self, size: Option<usize>) -> Option<SaveError> {
        if self.pressure == MemoryPressure::Critical {
            return Some(SaveError::CriticalPressure);
        }
        let budget = self.effective_budget();
        size.filter(|&size| size > budget)
            .map(|size| SaveError::OverBudget { size, budget })
    }

    /// Status bookkeeping for programs that left the store.
    fn forget(&mut self, evicted: &Evicted) {
        for (_, program) in evicted {
            program
                .shader_hashes()
                .for_each(|h| self.statuses.release(&h));
        }
        self.recorder.counters.evictions += evicted.len() as u64;
    }
}

/// The program cache. Thread-safe: every method takes `&self`; one mutex guards the state and
/// is never held while the host callback runs or while the disk is touched (the disk layer has
/// its own threads).
///
/// Made with [`ProgramCache::builder`]. A save copies the program in; a load hands back a shared
/// handle and counts a hit or a miss:
///
/// ```
/// use program_cache::{
///     CacheConfig, CachedProgram, ProgramBinaryData, ProgramCache, ProgramKey, ShaderHash,
///     ShaderVariables,
/// };
///
/// let cache = ProgramCache::builder(CacheConfig::desktop()).build();
/// // Real keys and hashes come from `program_key` and `shader_hash`.
/// let key = ProgramKey([7; 20]);
/// let program = CachedProgram {
///     vertex_shader: ShaderHash([1; 20]),
///     fragment_shader: ShaderHash([2; 20]),
///     vertex: ShaderVariables::default(),
///     fragment: ShaderVariables::default(),
///     binary: ProgramBinaryData { format: 0x8741, bytes: vec![0xAB; 1024] },
///     ..Default::default()
/// };
/// cache.save(key, program.clone(), None).expect("fits in the budget");
///
/// let loaded = cache.load(&key, None).expect("a hit");
/// assert_eq!(*loaded, program);
/// assert!(cache.load(&ProgramKey([8; 20]), None).is_none());
/// let counters = cache.stats().counters;
/// assert_eq!((counters.saves, counters.hits, counters.misses), (1, 1, 1));
/// ```
///
/// Backed by a disk store, what one process saved is loaded into memory, in the background,
/// by the next cache opened on the same folder with the same stamp:
///
/// ```
/// use std::time::Duration;
///
/// use program_cache::{
///     CacheConfig, CachedProgram, CompatibilityStamp, DiskConfig, DriverIdentity,
///     ProgramBinaryData, ProgramCache, ProgramKey, ShaderHash, ShaderVariables,
/// };
///
/// let folder = tempfile::tempdir().unwrap();
/// let driver = DriverIdentity {
///     gl_vendor: "Example vendor".into(),
///     gl_renderer: "Example renderer".into(),
///     gl_version: "4.6 example 1.0".into(),
///     ..DriverIdentity::default()
/// };
/// let stamp = CompatibilityStamp::new(driver, "doc-example", "1.0");
/// let open = || {
///     ProgramCache::builder(CacheConfig::desktop())
///         .disk(DiskConfig::new(folder.path(), stamp.clone()))
///         .build()
/// };
/// let program = CachedProgram {
///     vertex_shader: ShaderHash([1; 20]),
///     fragment_shader: ShaderHash([2; 20]),
///     vertex: ShaderVariables::default(),
///     fragment: ShaderVariables::default(),
///     binary: ProgramBinaryData { format: 0x8741, bytes: vec![0xAB; 1024] },
///     ..Default::default()
/// };
///
/// let first = open();
/// first.save(ProgramKey([7; 20]), program.clone(), None).unwrap();
/// first.flush_disk(); // the background writer has written the entry
/// drop(first);
///
/// let second = open();
/// let report = second.wait_until_loaded(Duration::from_secs(10)).expect("the load finishes");
/// assert_eq!(report.loaded, 1);
/// assert_eq!(*second.load(&ProgramKey([7; 20]), None).unwrap(), program);
/// assert_eq!(second.disk_counters().unwrap().loaded, 1);
/// ```
pub struct ProgramCache {
    /// Shared with the startup loader's [`LoadTarget`] only: the loader never holds the cache
    /// itself, so the host's last handle always runs the drop (and its waits) on the host's
    /// thread.
    state: Arc<Mutex<State>>,
    /// What the startup loader inserts into (it holds it weakly); let go first in the drop, so
    /// the load stops before the drop waits for the disk threads.
    load_target: Option<Arc<LoadTarget>>,
    callback: Option<HistogramCallback>,
    disk: Option<DiskLayer>,
    persist: Option<PersistLayer>,
    /// Whether programs with transform-feedback varyings are cached
    /// ([`ProgramCacheBuilder::cache_transform_feedback`]).
    transform_feedback: bool,
}

impl Drop for ProgramCache {
    /// Hands the shaders compiled since the last batch to the disk writer and the persistence
    /// thread, which write and deliver them before they end. Then the disk layer's drop (a
    /// field, dropped after this) stops the load and waits for the writes already queued.
    fn drop(&mut self) {
        self.send_compiled(self.lock());
        // The loader's next upgrade fails from here on; one in progress finishes its entry.
        self.load_target.take();
    }
}

impl std::fmt::Debug for ProgramCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramCache")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

type Samples = Vec<(&'static str, f64)>;

/// Builds a [`ProgramCache`]: [`ProgramCache::builder`], then the optional parts, then
/// [`ProgramCacheBuilder::build`].
///
/// ```
/// use program_cache::{CacheConfig, ProgramCache};
///
/// let cache = ProgramCache::builder(CacheConfig::mobile())
///     .callback(std::sync::Arc::new(|name: &str, value: f64| println!("{name}: {value}")))
///     .build();
/// assert!(cache.is_empty());
/// assert!(!cache.disk_enabled());
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct ProgramCacheBuilder {
    config: CacheConfig,
    callback: Option<HistogramCallback>,
    disk: Option<DiskConfig>,
    persist: Option<PersistConfig>,
    transform_feedback: bool,
}

impl std::fmt::Debug for ProgramCacheBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramCacheBuilder")
            .field("config", &self.config)
            .field("callback", &self.callback.is_some())
            .field("disk", &self.disk)
            .field("persist", &self.persist)
            .finish()
    }
}

impl ProgramCacheBuilder {
    /// Pushes every histogram sample to `callback` (called with the cache's lock released).
    pub fn callback(mut self, callback: HistogramCallback) -> Self {
        self.callback = Some(callback);
        self
    }

    /// Backs the cache with a disk store: entries already on disk start loading into memory on
    /// a background thread (most recently used first, hot ones before them) and every save is
    /// also written to disk by a background writer. When the folder cannot be used the cache
    /// works in memory only and reports the condition once (stats and `disk.log`).
    pub fn disk(mut self, disk: DiskConfig) -> Self {
        self.disk = Some(disk);
        self
    }

    /// Hands every saved program to a host's [`crate::disk::PersistSink`] instead of (or as
    /// well as) a disk store, for a GPU process that cannot open files: the sink receives each
    /// saved entry in FORMAT.md's encoding on the cache's persistence thread, and
    /// [`ProgramCache::insert_entry`] takes entries back. See [`crate::disk::PersistConfig`].
    pub fn persist(mut self, persist: PersistConfig) -> Self {
        self.persist = Some(persist);
        self
    }

    /// The cache, empty (a disk-backed one fills in the background). Shared: the disk layer's
    /// loader holds it weakly, so it is made in an [`Arc`]. No file-system work happens here (the
    /// host's GPU thread): the disk writer thread opens the store.
    /// Whether programs linked with transform-feedback varyings go through the cache (default
    /// true). False is the workaround browsers apply on drivers whose binaries of such programs
    /// misbehave: a [`crate::ProgramManager`] on this cache then links them from source every
    /// time, never looks them up and never reads or saves their binaries
    /// ([`crate::ProgramManager::transform_feedback_links_uncached`] counts them).
    pub fn cache_transform_feedback(mut self, on: bool) -> Self {
        self.transform_feedback = on;
        self
    }

    /// Builds the cache (and starts the disk layer's threads when configured).
    pub fn build(self) -> Arc<ProgramCache> {
        let ProgramCacheBuilder {
            config,
            callback,
            disk,
            persist,
            transform_feedback,
        } = self;
        let persist = persist.map(PersistLayer::new);
        let Some(disk) = disk else {
            let mut cache = ProgramCache::from_parts(config, callback, None, persist);
            cache.transform_feedback = transform_feedback;
            return Arc::new(cache);
        };
        let layer = DiskLayer::new(&disk, config.budget_bytes);
        let mut cache = ProgramCache::from_parts(config, callback, Some(layer), persist);
        cache.transform_feedback = transform_feedback;
        if let Some(layer) = &cache.disk {
            let target = Arc::new(LoadTarget {
                state: cache.state.clone(),
                epoch: layer.epoch_watch(),
            });
            let sink = Arc::downgrade(&target);
            cache.load_target = Some(target);
            layer.start(sink as std::sync::Weak<dyn LoadSink>);
        }
        Arc::new(cache)
    }
}

impl ProgramCache {
    /// A builder for a cache with `config`: memory-only and without a histogram callback unless
    /// [`ProgramCacheBuilder::disk`] and [`ProgramCacheBuilder::callback`] say otherwise.
    pub fn builder(config: CacheConfig) -> ProgramCacheBuilder {
        ProgramCacheBuilder {
            config,
            callback: None,
            disk: None,
            persist: None,
            transform_feedback: true,
        }
    }

    fn from_parts(
        config: CacheConfig,
        callback: Option<HistogramCallback>,
        disk: Option<DiskLayer>,
        persist: Option<PersistLayer>,
    ) -> Self {
        ProgramCache {
            load_target: None,
            state: Arc::new(Mutex::new(State {
                config,
                statuses: ShaderStatuses::new(config.max_unreferenced_shader_statuses),
                store: BinaryStore::new(config.policy, config.budget_bytes),
                pressure: MemoryPressure::None,
                recorder: Recorder::default(),
                disk_rejections_in_a_row: 0,
                unpersisted: Vec::new(),
                generation: 0,
            })),
            callback,
            disk,
            persist,
            transform_feedback: true,
        }
    }

    /// Whether programs with transform-feedback varyings go through this cache
    /// ([`ProgramCacheBuilder::cache_transform_feedback`]).
    pub fn caches_transform_feedback(&self) -> bool {
        self.transform_feedback
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent-enough state (every mutation is
        // completed before the next step); keep serving rather than poisoning the GPU process.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records samples in the histograms, then (lock released) pushes them to the callback.
    fn emit(&self, mut state: MutexGuard<'_, State>, samples: Samples) {
        for &(name, value) in &samples {
            state.recorder.record(name, value);
        }
        drop(state);
        if let Some(cb) = &self.callback {
            for (name, value) in samples {
                cb(name, value);
            }
        }
    }

    /// The configuration.
    pub fn config(&self) -> CacheConfig {
        self.lock().config
    }

    // ---- status storage ----

    /// Compile status of a shader.
    pub fn shader_compile_status(&self, hash: &ShaderHash) -> CompileStatus {
        self.lock().statuses.status(hash)
    }

    /// Records that a shader compiled successfully. With a disk store, a shader no stored
    /// program uses is also written to the store's `compiled.list` (in batches, and at
    /// [`ProgramCache::flush_disk`] and drop), so the next start knows it compiles too; with
    /// persistence it goes to [`crate::disk::PersistSink::shaders_compiled`] the same way (and
    /// at [`ProgramCache::flush_persist`]).
    pub fn shader_compile_succeeded(&self, hash: ShaderHash) {
        let mut state = self.lock();
        let new = state.statuses.status(&hash) == CompileStatus::Unknown;
        state.statuses.compiled(hash);
        if new && (self.disk.is_some() || self.persist.is_some()) {
            state.unpersisted.push(hash);
            if state.unpersisted.len() >= COMPILED_BATCH {
                self.send_compiled(state);
            }
        }
    }

    /// Hands the shaders compiled since the last batch to the disk writer, leaving out those a
    /// stored program uses by now (its entry records them).
    fn send_compiled(&self, mut state: MutexGuard<'_, State>) {
        if self.disk.is_none() && self.persist.is_none() {
            return;
        }
        let mut batch = std::mem::take(&mut state.unpersisted);
        batch.retain(|h| state.statuses.refcount(h) == 0);
        // Read under the lock: a clear moves the epoch while it holds it.
        let epoch = self.disk.as_ref().map(DiskLayer::epoch);
        drop(state);
        if let Some(persist) = &self.persist {
            persist.compiled(batch.clone());
        }
        if let (Some(disk), Some(epoch)) = (&self.disk, epoch) {
            disk.mark_compiled(batch, epoch);
        }
    }

    /// Marks shaders as known to compile: what a store kept of earlier processes'
    /// [`crate::disk::PersistSink::shaders_compiled`] ([`crate::disk::Store::compiled_shaders`]),
    /// handed back at startup, so the warm start compiles none of them on the driver. Bounded
    /// like every status of a shader no cached program uses
    /// ([`CacheConfig::max_unreferenced_shader_statuses`]): only the last that many of `hashes`
    /// are read (the newest, as `compiled_shaders` lists them oldest first), so a huge list
    /// holds the lock no longer than a full one. They are not sent to the sink again.
    pub fn insert_compiled(&self, hashes: &[ShaderHash]) {
        let mut state = self.lock();
        let keep = state.statuses.unreferenced_capacity();
        for h in &hashes[hashes.len().saturating_sub(keep)..] {
            state.statuses.compiled(*h);
        }
    }

    /// How many cached programs use a shader.
    pub fn shader_refcount(&self, hash: &ShaderHash) -> u32 {
        self.lock().statuses.refcount(hash)
    }

    /// Link status of a program: `Success` while its binary is cached (a recorded link
    /// failure under `key` is no successful link: `Unknown`).
    pub fn link_status(&self, key: &ProgramKey) -> LinkStatus {
        if self.peek(key).is_some_and(|p| p.failure.is_none()) {
            LinkStatus::Success
        } else {
            LinkStatus::Unknown
        }
    }

    /// Counts a compile answered by the status cache and records its time.
    pub fn record_status_hit(&self, time: Duration) {
        let mut state = self.lock();
        state.recorder.counters.status_hits += 1;
        self.emit(state, vec![(names::STATUS_HIT_TIME, micros(time))]);
    }

    /// Counts a compile that went to the driver and records its time.
    pub fn record_status_miss(&self, time: Duration) {
        let mut state = self.lock();
        state.recorder.counters.status_misses += 1;
        self.emit(state, vec![(names::STATUS_MISS_COMPILE_TIME, micros(time))]);
    }

    /// Records a binary-hit restore time.
    pub fn record_binary_hit_time(&self, time: Duration) {
        let state = self.lock();
        self.emit(state, vec![(names::BINARY_HIT_TIME, micros(time))]);
    }

    /// Records a binary-miss link time.
    pub fn record_binary_miss_time(&self, time: Duration) {
        let state = self.lock();
        self.emit(state, vec![(names::BINARY_MISS_LINK_TIME, micros(time))]);
    }

    // ---- binary storage ----

    /// Stores a program, replacing one with the same key and evicting by policy until it fits
    /// in the budget in force (a quarter of the budget under moderate memory pressure).
    /// Refused (cache unchanged) for an empty binary, an entry over the budget in force, or
    /// critical memory pressure. The shaders it names become known-compiled and referenced.
    pub fn save(
        &self,
        key: ProgramKey,
        program: CachedProgram,
        page: Option<PageId>,
    ) -> Result<SaveReport, SaveError> {
        let mut state = self.lock();
        let size = program.stored_size();
        let refusal = if !program.is_well_formed() {
            Some(SaveError::EmptyBinary)
        } else {
            state.refusal(Some(size))
        };
        if let Some(e) = refusal {
            state.recorder.counters.rejected_saves += 1;
            return Err(e);
        }
        let before = state.store.used();
        let binary_size = program.binary.bytes.len();
        // Refs first, so a shader shared with a replaced or evicted entry never drops to zero.
        program
            .shader_hashes()
            .for_each(|h| state.statuses.add_ref(h));
        let replaced = state.store.remove(&key);
        if let Some(old) = &replaced {
            old.shader_hashes().for_each(|h| state.statuses.release(&h));
        }
        let limit = state.effective_budget() - size;
        let evicted = state.store.evict_to(limit);
        state.forget(&evicted);
        let program = Arc::new(program);
        state.store.insert(key, program.clone(), size, page, false);
        state.recorder.counters.saves += 1;
        let after = state.store.used();
        let report = SaveReport {
            replaced: replaced.is_some(),
            evicted: evicted.len(),
        };
        if let Some(persist) = &self.persist {
            persist.save(key, program.clone());
        }
        if let Some(disk) = &self.disk {
            disk.save(key, program);
        }
        self.emit(
            state,
            vec![
                (names::PROGRAM_BINARY_SIZE, binary_size as f64),
                (names::CACHE_SIZE_BEFORE_SAVE, before as f64),
                (names::CACHE_SIZE_AFTER_SAVE, after as f64),
            ],
        );
        Ok(report)
    }

    /// Whether [`ProgramCache::save`] would refuse a program of `stored_size` bytes
    /// ([`CachedProgram::stored_size`]) now, for memory pressure or size: lets a caller skip
    /// reading a binary out of the driver that could not be kept. With `None` (size not known
    /// before the read) only the pressure is checked. Changes nothing and counts nothing; an
    /// empty binary is not foreseen (the caller has not read it yet).
    pub fn would_accept(&self, stored_size: Option<usize>) -> Result<(), SaveError> {
        self.lock().refusal(stored_size).map_or(Ok(()), Err)
    }

    /// Counts a save the caller did not attempt because [`ProgramCache::would_accept`] refused
    /// it (as a refused save: the counters read the same as if it had been attempted).
    pub(crate) fn count_refused_save(&self) {
        self.lock().recorder.counters.rejected_saves += 1;
    }

    /// Looks a program up; a hit promotes it (and moves it to `page` when given). A failure
    /// record under `key` is no program (it has no binary): a miss, left alone
    /// ([`ProgramCache::load_failure`] finds it).
    pub fn load(&self, key: &ProgramKey, page: Option<PageId>) -> Option<SharedProgram> {
        let mut state = self.lock();
        let found = state.store.get(key, page);
        let (mut state, found) = self.decoded(state, key, found);
        // A failure record is not a program: a miss here (`load_failure` finds it).
        let found = found.filter(|p| p.failure.is_none());
        if found.is_some() {
            state.recorder.counters.hits += 1;
        } else {
            state.recorder.counters.misses += 1;
        }
        drop(state);
        if found.is_some() {
            if let Some(disk) = &self.disk {
                disk.used(*key);
            }
            if let Some(persist) = &self.persist {
                persist.used(*key);
            }
        }
        found
    }

    /// Looks up the record of a failed compile or link under `key` (a
    /// [`crate::compile_failure_key`] or a program key): promotes it like a hit, but counts
    /// it as a failure hit, not as a program hit or miss. `None` when there is no such record
    /// (a program entry under `key` is left alone).
    pub fn load_failure(&self, key: &ProgramKey) -> Option<SharedProgram> {
        let state = self.lock();
        let found = state.store.peek(key);
        // A packed disk entry is decoded here (the link that follows uses it decoded).
        let (mut state, program) = self.decoded(state, key, found);
        let program = program.filter(|p| p.failure.is_some())?;
        let _promoted = state.store.get(key, None);
        state.recorder.counters.failure_hits += 1;
        drop(state);
        if let Some(disk) = &self.disk {
            disk.used(*key);
        }
        if let Some(persist) = &self.persist {
            persist.used(*key);
        }
        Some(program)
    }

    /// Tells the cache the driver accepted the binary of `key` (resets the count of disk
    /// binaries refused in a row).
    pub fn binary_accepted(&self, key: &ProgramKey) {
        let mut state = self.lock();
        if state.store.is_from_disk(key) {
            state.disk_rejections_in_a_row = 0;
        }
    }

    /// Looks a program up without changing recency or counters. An entry the disk loader has
    /// not decoded yet is decoded for the caller and stays as it is in the cache.
    pub fn peek(&self, key: &ProgramKey) -> Option<SharedProgram> {
        let found = self.lock().store.peek(key)?;
        match found {
            Value::Program(p) => Some(p),
            Value::Packed(p) => p.decode().ok().map(Arc::new),
        }
    }

    /// Removes a program whose binary the driver refused, counting the rejection. When the
    /// binary came from outside this process — the disk store, or
    /// [`ProgramCache::insert_entry`] (then the persistence sink hears
    /// [`crate::disk::PersistSink::entry_rejected`]) — and the driver has refused
    /// `max_consecutive_rejections` such binaries in a row (the smaller of the disk's and the
    /// persistence's settings when both are configured), every such entry leaves memory, the
    /// disk store is dropped and the sink hears [`crate::disk::PersistSink::store_rejected`]:
    /// the driver changed in a way the stamp did not capture.
    pub fn evict_rejected(&self, key: &ProgramKey) -> bool {
        let mut state = self.lock();
        state.recorder.counters.driver_rejections += 1;
        let from_disk = state.store.is_from_disk(key);
        let removed = Self::evict_locked(&mut state, key);
        let limit = [
            self.disk.as_ref().map(|d| d.max_consecutive_rejections),
            self.persist.as_ref().map(|p| p.max_consecutive_rejections),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(limit) = limit.filter(|_| from_disk) else {
            return removed;
        };
        if let Some(persist) = &self.persist {
            persist.rejected(*key);
        }
        state.disk_rejections_in_a_row += 1;
        if state.disk_rejections_in_a_row >= limit {
            state.disk_rejections_in_a_row = 0;
            state.generation += 1;
            let evicted = state.store.remove_from_disk();
            state.forget(&evicted);
            // The epoch moves under the lock, as in `clear`: the startup load inserts nothing
            // more from the store being dropped. The report (a host callback) comes after.
            let dropped = self
                .disk
                .as_ref()
                .is_some_and(DiskLayer::drop_all_unreported);
            drop(state);
            if dropped && let Some(disk) = &self.disk {
                disk.report_drop(DropReason::DriverRefusals);
            }
            if let Some(persist) = &self.persist {
                persist.store_rejected();
            }
        }
        removed
    }

    /// Validates an entry the host streamed back (the bytes a
    /// [`crate::disk::PersistSink::entry_saved`] received, kept by a [`crate::disk::Store`])
    /// and inserts its program into memory exactly as the disk loader does: only when it fits
    /// in the budget in force without evicting anything, marked as coming from outside so the
    /// driver-refusal rule applies ([`ProgramCache::evict_rejected`]). The checks, before
    /// anything is allocated beyond the bytes given: the size bound, then every check of
    /// FORMAT.md (header CRC, magic, version, header length, flags, this cache's stamp hash,
    /// payload length, payload CRC, the decompression bound, LZ4, postcard with no trailing
    /// bytes). Returns the key from the entry's header (an entry for a key already in memory
    /// is accepted and changes nothing). Runs on the caller's thread (decompression included);
    /// never panics on any input.
    pub fn insert_entry(&self, entry: &[u8]) -> Result<ProgramKey, InsertError> {
        let Some(persist) = &self.persist else {
            return Err(InsertError::NotConfigured);
        };
        let counters = persist.atomic_counters();
        let result = self.insert_entry_checked(entry, &persist.stamp_hash);
        let c = if result.is_ok() {
            &counters.inserted
        } else {
            &counters.insert_refused
        };
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        result
    }

    fn insert_entry_checked(
        &self,
        entry: &[u8],
        stamp_hash: &[u8; 20],
    ) -> Result<ProgramKey, InsertError> {
        if entry.len() as u64 > crate::disk::HEADER_LEN as u64 + crate::disk::MAX_PAYLOAD {
            return Err(InsertError::Invalid(crate::disk::EntryError::TooLarge(
                entry.len() as u64,
            )));
        }
        let (header, program) = crate::disk::decode(entry, stamp_hash, None)?;
        if !program.is_well_formed() {
            return Err(InsertError::EmptyBinary);
        }
        let key = header.key;
        let mut state = self.lock();
        if state.store.contains(&key) {
            return Ok(key);
        }
        let size = program.stored_size();
        let budget = state.effective_budget();
        let used = state.store.used();
        if state.pressure == MemoryPressure::Critical || used + size > budget {
            return Err(InsertError::NoRoom { size, used, budget });
        }
        program
            .shader_hashes()
            .for_each(|h| state.statuses.add_ref(h));
        state.store.insert(key, Arc::new(program), size, None, true);
        Ok(key)
    }

    /// Removes one program; returns whether it was there.
    pub fn evict(&self, key: &ProgramKey) -> bool {
        Self::evict_locked(&mut self.lock(), key)
    }

    fn evict_locked(state: &mut State, key: &ProgramKey) -> bool {
        match state.store.remove(key) {
            Some(program) => {
                state.forget(&vec![(*key, program)]);
                true
            }
            None => false,
        }
    }

    /// Evicts by policy until at most `limit` bytes are stored; returns the bytes freed.
    pub fn trim(&self, limit: usize) -> usize {
        let mut state = self.lock();
        let before = state.store.used();
        let evicted = state.store.evict_to(limit);
        state.forget(&evicted);
        before - state.store.used()
    }

    /// Applies a memory-pressure level: `Moderate` trims to budget/4 and keeps the cache there
    /// (saves evict down to budget/4, a larger entry is refused), `Critical` trims to 0 and
    /// refuses saves, each until the level is `None` again, which restores the full budget.
    /// Returns the bytes freed.
    pub fn set_memory_pressure(&self, level: MemoryPressure) -> usize {
        let mut state = self.lock();
        if level == MemoryPressure::Critical && state.pressure != MemoryPressure::Critical {
            // The restored programs a `RestoreAhead` holds go too, however short the pulse.
            state.generation += 1;
        }
        state.pressure = level;
        let limit = state.effective_budget();
        // The policy's segments follow the limit in force (Critical keeps the last sizes: the
        // store is empty and takes nothing until the level changes).
        if level != MemoryPressure::Critical {
            state.store.set_capacity(limit);
        }
        let before = state.store.used();
        let evicted = state.store.evict_to(limit);
        state.forget(&evicted);
        before - state.store.used()
    }

    /// The current memory-pressure level.
    pub fn memory_pressure(&self) -> MemoryPressure {
        self.lock().pressure
    }

    /// Drops every program and status. Statistics are kept.
    pub fn clear(&self) {
        let mut state = self.lock();
        // Cleared entries are not counted as evictions, and all statuses go with them.
        state.generation += 1;
        state.store.drain();
        state.statuses.clear();
        state.unpersisted.clear();
        // The epoch moves before the lock is let go, so the list's statuses the startup load
        // is still reading are not marked after the clear (`compiled_loaded` checks it under
        // the lock). A clear calls no host callback and never waits.
        if let Some(disk) = &self.disk {
            disk.drop_all(DropReason::Clear);
        }
        drop(state);
    }

    /// Bytes stored.
    pub fn size_bytes(&self) -> usize {
        self.lock().store.used()
    }

    /// Programs stored.
    pub fn len(&self) -> usize {
        self.lock().store.len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Program keys in the order the policy would evict them.
    pub fn eviction_order(&self) -> Vec<ProgramKey> {
        self.lock().store.eviction_order()
    }

    /// A snapshot of counters and histograms.
    pub fn stats(&self) -> Stats {
        let state = self.lock();
        Stats {
            counters: state.recorder.counters,
            histograms: state.recorder.histograms.clone(),
            size_bytes: state.store.used(),
            entries: state.store.len(),
            disk: self.disk_counters(),
            disk_condition: self.disk_condition(),
            persist: self.persist_counters(),
        }
    }

    /// True when a disk store is in use (configured and its folder usable).
    pub fn disk_enabled(&self) -> bool {
        self.disk.as_ref().is_some_and(DiskLayer::enabled)
    }

    /// Disk counters, when a disk layer is configured.
    pub fn disk_counters(&self) -> Option<DiskCounters> {
        self.disk.as_ref().map(DiskLayer::counters)
    }

    /// The first disk condition reported (folder unusable, write failure, store dropped).
    pub fn disk_condition(&self) -> Option<String> {
        self.disk.as_ref().and_then(DiskLayer::condition)
    }

    /// Waits until the startup load from disk has finished (at most `timeout`); `None` on
    /// timeout. Returns at once for a cache without a disk store.
    pub fn wait_until_loaded(&self, timeout: Duration) -> Option<LoadReport> {
        match &self.disk {
            Some(disk) => disk.wait_until_loaded(timeout),
            None => Some(LoadReport::default()),
        }
    }

    /// Waits until the disk writer has done everything queued so far (for hosts at shutdown,
    /// and tests).
    pub fn flush_disk(&self) {
        if let Some(disk) = &self.disk {
            self.send_compiled(self.lock());
            disk.flush();
        }
    }

    /// Persistence counters, when a [`PersistConfig`] is configured.
    pub fn persist_counters(&self) -> Option<PersistCounters> {
        self.persist.as_ref().map(PersistLayer::counters)
    }

    /// Waits until the persistence thread has handed everything queued so far to the sink
    /// (as long as the host's sink takes: call it where the host can afford that, e.g. at
    /// shutdown or in tests). Returns at once without persistence, and when called from inside
    /// the sink (it would wait for that very call).
    pub fn flush_persist(&self) {
        if let Some(persist) = &self.persist {
            self.send_compiled(self.lock());
            persist.flush();
        }
    }

    /// Marks programs as hot: on the next start they load before the others.
    pub fn mark_hot(&self, keys: &[ProgramKey]) {
        if let Some(disk) = &self.disk {
            disk.mark_hot(keys.to_vec());
        }
    }

    /// The counters alone (cheaper than [`ProgramCache::stats`]).
    pub fn counters(&self) -> Counters {
        self.lock().recorder.counters
    }
}

// ---- entries the disk loader read and checked but did not decode (`disk::packed`) ----

/// The part of a cache the startup loader inserts into: its state and the store's clear
/// epoch. The loader holds it weakly and upgrades it for one entry at a time; it never holds
/// the [`ProgramCache`], so the cache's drop (which stops the load and waits for queued writes)
/// always runs where the host let go of its last handle.
struct LoadTarget {
    state: Arc<Mutex<State>>,
    epoch: crate::disk::EpochWatch,
}

impl LoadTarget {
    fn lock(&self) -> MutexGuard<'_, State> {
        // As `ProgramCache::lock`: a panic under the lock does not poison the cache.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl LoadSink for LoadTarget {
    /// Marks the shaders `compiled.list` names as compiled (bounded like every status of a
    /// shader no cached program uses: [`CacheConfig::max_unreferenced_shader_statuses`]).
    fn compiled_loaded(&self, hashes: &[ShaderHash]) {
        let mut state = self.lock();
        // Not after a clear (or a drop of the store) since the open: the list went with it.
        if self.epoch.get() != 0 {
            return;
        }
        for h in hashes {
            state.statuses.compiled(*h);
        }
    }

    /// Inserts an entry read from the disk store, still encoded, only if it fits in the budget
    /// without evicting anything (the startup load never pushes out what this process made):
    /// it counts the bytes it holds, and it is admitted only while every admitted entry would
    /// still fit once decoded (its summary's size, reserved). Its shaders' compile statuses
    /// count at once. Returns whether it is in the cache now.
    fn insert_loaded(&self, key: ProgramKey, entry: PackedEntry) -> bool {
        let mut state = self.lock();
        // Not after a clear since the open (checked under the lock the clear holds while it
        // moves the epoch): the entry is about to go from disk too.
        if self.epoch.get() != 0 {
            return false;
        }
        if state.store.contains(&key) {
            return true;
        }
        let held = entry.held_bytes();
        let claim = entry.claimed_size().max(held);
        if state.pressure == MemoryPressure::Critical
            || state.store.used() + state.store.reserved() + claim > state.effective_budget()
        {
            return false;
        }
        for h in entry.shaders() {
            state.statuses.add_ref(h);
        }
        let entry = Value::Packed(entry);
        state.store.insert(key, entry, held, None, true);
        true
    }

    /// Decodes as a lookup does (`ProgramCache::decoded`: with the lock let go), but on the
    /// loader thread, without touching recency or counters, and never evicting. A body that
    /// does not decode is left packed: its first lookup rejects it, deletes it from disk and
    /// counts it, as without this.
    fn decode_loaded(&self, key: &ProgramKey) {
        let _ = peek_decoding(&self.state, key);
    }
}

#[cfg(feature = "gl")]
impl ProgramCache {
    /// Moves on each clear, when the disk entries are dropped after driver refusals, and on
    /// each move to critical memory pressure: a program restored from a binary before it moved
    /// is not handed out after.
    pub(crate) fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// [`ProgramCache::peek`] that keeps what it decodes (see [`peek_decoding`]).
    pub(crate) fn peek_decoding(&self, key: &ProgramKey) -> Option<SharedProgram> {
        peek_decoding(&self.state, key)
    }
}

/// A look at `key` that keeps what it decodes: a packed entry is decoded with the lock let go
/// and, when its decoded size fits the budget in force now, replaces its packed form — without
/// touching recency or counters, and never evicting (one that would not fit stays packed, for
/// its lookup to decode). A body that does not decode is left packed (and `None` returned): its
/// first lookup rejects it, deletes it from disk and counts it.
fn peek_decoding(state: &Mutex<State>, key: &ProgramKey) -> Option<SharedProgram> {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    let packed = match lock().store.peek(key)? {
        Value::Program(p) => return Some(p),
        Value::Packed(p) => p,
    };
    let program = Arc::new(packed.decode().ok()?);
    let size = program.stored_size();
    let mut state = lock();
    if let Some(held) = state.store.size_of(key)
        && state.store.used() - held + size <= state.effective_budget()
    {
        state.store.unpack(key, &packed, program.clone(), size);
    }
    Some(program)
}

impl ProgramCache {
    /// A lookup's result as a program. A packed disk entry is decoded with the lock released
    /// and replaces its packed form (its size becomes the program's; the store evicts by policy
    /// when that takes it over the budget in force). One whose body does not decode is removed,
    /// rejected like a damaged file at load (counted, deleted from disk, reported) and reads as
    /// absent: the caller links from source.
    fn decoded<'a>(
        &'a self,
        state: MutexGuard<'a, State>,
        key: &ProgramKey,
        found: Option<Value>,
    ) -> (MutexGuard<'a, State>, Option<SharedProgram>) {
        let packed = match found {
            None => return (state, None),
            Some(Value::Program(p)) => return (state, Some(p)),
            Some(Value::Packed(p)) => p,
        };
        drop(state);
        let decoded = packed.decode();
        let mut state = self.lock();
        match decoded {
            Ok(program) => {
                let size = program.stored_size();
                let program = Arc::new(program);
                let held = state.store.unpack(key, &packed, program.clone(), size);
                let limit = state.effective_budget();
                if state.store.used() > limit {
                    let evicted = state.store.evict_to(limit);
                    state.forget(&evicted);
                }
                // Removed meanwhile: it was there when looked up, and it decoded.
                (state, Some(held.unwrap_or(program)))
            }
            Err(error) => {
                let same = matches!(
                    state.store.peek(key),
                    Some(Value::Packed(p)) if p.same(&packed)
                );
                if same && let Some(gone) = state.store.remove(key) {
                    gone.shader_hashes()
                        .for_each(|h| state.statuses.release(&h));
                }
                if let Some(disk) = &self.disk {
                    disk.rejected_at_lookup(*key, packed.origin, &error);
                }
                (state, None)
            }
        }
    }
}

/// The byte limit in force for `budget` under `pressure`.
fn effective_budget(budget: usize, pressure: MemoryPressure) -> usize {
    match pressure {
        MemoryPressure::None => budget,
        MemoryPressure::Moderate => budget / 4,
        MemoryPressure::Critical => 0,
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
