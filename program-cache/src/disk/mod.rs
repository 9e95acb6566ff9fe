//! The persistent disk layer: entries written by a background writer, loaded at startup by a
//! background loader, shared safely by several processes, rejected (never trusted) when damaged
//! or written for another driver.
//!
//! The file format and the multi-process protocol are in `program-cache/FORMAT.md`.
//!
//! # Threads and ordering
//! The GPU thread never touches the disk: saves, last-use records, hot marks and clears are jobs
//! on a crossbeam channel bounded by a count of queued jobs, consumed by one writer thread; when
//! the queue is full a save is dropped and counted (`dropped_writes`), never waited for. The
//! loader (the disk layer's first thread, with one helper thread that reads while it lists)
//! reads and checks entries (from `load.pack`, module `pack`, where it still holds the very
//! file at an entry's name) and inserts them, undecoded, into the memory cache through its
//! normal lock; once the load is reported it decodes them in load order (the lock let go while
//! each decodes), and a lookup that comes first decodes its entry itself (module `packed`). Counters are
//! relaxed atomics: they are statistics, not synchronization (the queued-jobs count is an
//! `AcqRel` read-modify-write, a bound rather than a publication; the bytes the two loading
//! threads have read ahead are a relaxed bound too); the loaded flag is a mutex + condvar. The
//! `enabled` flag and the clear epoch are atomics read with `Acquire` and written with
//! `Release`: a thread that sees the new epoch also sees everything the clearing thread did
//! before bumping it (nothing else is published through them).
//!
//! # Never blocking on another process
//! The constructor does no file-system work at all: the disk layer's first thread opens the
//! store (taking its shared `in-use.lock` with a bounded wait, [`OPEN_LOCK_WAIT`]), starts the
//! writer thread and runs the startup load; the writer removes stale stores and dead writers'
//! temporary files, then serves jobs. Eviction tries
//! `evict.lock` for at most [`EVICT_LOCK_WAIT`] and skips (counted in `lock_busy`, reported
//! once) when another process holds it. `clear` is an epoch bump that never waits on the queue.
//! So `flush` and `Drop` wait only for the writer's own bounded work.
//!
//! # The persistence split
//! A GPU process that cannot open files persists through its host instead: [`PersistSink`]
//! (module `persist`: one library thread, bounded queues, entries encoded there) hands every
//! save to the host as an entry in this format, [`crate::ProgramCache::insert_entry`] takes
//! them back, and [`Store`] (module `store`) is this layer's store-keeping — the same
//! `store_dir` and writer logic — run synchronously on the caller's thread of the
//! process that owns the disk.
//!
//! # Layout
//! `config` (what a host sets), `layer` (the cache's handle: queues jobs, never touches the
//! disk), `writer` (the writer thread, and the store-keeping a [`Store`] runs), `persist`
//! (the sink and its thread), `store` (the standalone store), `loader` (the startup load into a `LoadSink`),
//! `pack` (`load.pack`, the copy of one load's entries the next start reads at once),
//! `packed` (a checked entry held undecoded until it is decoded after the load or at its first
//! lookup),
//! `counters` and `condition` (what is counted and reported), `store_dir` (one store folder and the
//! folder's other stores), `format` (entry files), `stamp` (`STAMP`), `fsx` (descriptor-relative
//! file operations), [`inspect`] (the CLI's read-only view and `clear`).

mod condition;
mod config;
mod counters;
mod format;
mod fsx;
mod layer;
mod loader;
mod pack;
mod packed;
mod persist;
mod stamp;
mod store;
mod store_dir;
mod writer;

pub mod inspect;

pub use config::{DiskConfig, LoadedCallback, LogCallback};
pub use counters::DiskCounters;
pub(crate) use format::entry_shaders;
pub use format::{
    EntryError, EntryHeader, EntrySummary, FLAG_LZ4, FORMAT_VERSION, HEADER_LEN, MAGIC,
    MAX_PAYLOAD, MAX_SUMMARY_SHADERS, check_header, check_packed, decode, decode_body,
    decode_header, encode, encode_bounded,
};
pub(crate) use layer::{DiskLayer, DropReason, EpochWatch};
pub use loader::LoadReport;
pub(crate) use loader::LoadSink;
pub use pack::QUIET as PACK_QUIET;
pub(crate) use packed::PackedEntry;
pub(crate) use persist::PersistLayer;
pub use persist::{InsertError, PersistConfig, PersistCounters, PersistSink, USE_QUEUE};
pub use stamp::{CompatibilityStamp, DriverIdentity};
pub use store::{PutOutcome, Store, StoreConfig, StoreEntries, StoreError, StoreStats};
pub use store_dir::{EVICT_LOCK_WAIT, OPEN_LOCK_WAIT};
