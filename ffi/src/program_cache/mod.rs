//! `gpusvc_program_cache_*` and `gpusvc_program_cache_entry_*`: the GL program binary cache
//! (status storage, byte-budget binary storage, statistics, the disk store) seen from C.
//!
//! A `gpusvc_program_cache` may be used from any thread at once (one lock inside); the
//! histogram callback runs on the calling thread with no lock held, one call at a time, behind a
//! free-time gate that `gpusvc_program_cache_free` closes. Keys, names and binaries are copied
//! in; nothing keeps a pointer into the caller's memory.
//!
//! * [`types`]: the C enumerations and structs, and their conversions;
//! * [`exports`]: the cache's functions; [`entry`]: the cached-program copies it hands out;
//! * [`histogram`]: the host's histogram callback and the histogram queries;
//! * [`disk_types`] and [`disk`]: the persistent disk store's configuration, statistics and
//!   functions;
//! * [`persist`]: the GPU side of the persistence split (the host's persistence sink, the stamp
//!   text, entries inserted back); [`store`]: the other side, the disk store on its own
//!   (`gpusvc_program_cache_store_*`) for the process that owns the disk;
//! * [`restore_ahead`]: restoring the cached programs ahead of the host's links on a thread
//!   with a context shared with the host's (`gpusvc_restore_ahead_*`).
//!
//! # Guarantees of the persistence split (tested in `ffi/tests/persist_abi.rs`, and through
//! `gpusvc.hpp` in `cpp-tests/persist_test.cpp`)
//! * Programs linked on the driver and saved through a persistence sink, kept by a store and
//!   streamed back into a fresh cache are cache hits with no driver rejection
//!   (`programs_linked_on_the_driver_come_back_from_the_store_as_cache_hits`).
//! * The sink is never called once `gpusvc_program_cache_free` has returned, even while program
//!   managers keep the cache
//!   (`the_sink_is_never_called_once_the_cache_is_freed_even_while_a_manager_keeps_it`); a free
//!   of the last reference first hands over what was queued
//!   (`freeing_the_last_reference_hands_what_was_queued_to_the_sink_first`).
//! * A flush from inside a sink callback is `GPUSVC_HANDLE_BUSY`, never a wait for itself
//!   (`a_sink_may_call_the_library_but_a_flush_from_inside_is_busy_not_a_hang`).
//! * Every refusal of an entry, by `gpusvc_program_cache_insert_entry` or
//!   `gpusvc_program_cache_store_put`, has its own code and leaves cache and store unchanged
//!   (`bad_entries_are_refused_with_their_own_codes_by_the_cache_and_the_store`).
//! * A `_for_each` callback may call any function on its store, the free included (which ends
//!   the iteration); no lock is held while it runs
//!   (`calls_into_the_store_from_its_own_iteration_work_and_a_free_there_ends_it`).

use std::sync::Arc;

use program_cache::ProgramCache;

use crate::kit::handle::{self, Kind};
use crate::kit::{FfiError, answer_into, gpusvc_result};

pub(crate) mod disk;
pub(crate) mod disk_types;
pub(crate) mod entry;
pub(crate) mod exports;
pub(crate) mod histogram;
pub(crate) mod persist;
pub(crate) mod restore_ahead;
pub(crate) mod store;
pub(crate) mod types;

pub use disk::*;
pub use disk_types::*;
pub use entry::*;
pub use exports::*;
pub use histogram::*;
pub use persist::*;
pub use restore_ahead::*;
pub use store::*;
pub use types::*;

/// An opaque program cache. Thread-safe: any thread may use it, and free it once no other
/// thread is still calling with it (a call in flight finishes on a live cache either way).
#[derive(Debug)]
pub struct gpusvc_program_cache {
    _opaque: [u8; 0],
}

/// The cache behind a handle.
pub(crate) fn cache(cache: *const gpusvc_program_cache) -> Result<Arc<ProgramCache>, FfiError> {
    handle::shared(cache, "cache", Kind::ProgramCache)
}

/// The body of an export that answers a question about a cache through `out`:
/// the handle is checked, then `out`; the answer is written only on success.
///
/// # Safety
/// `out` is NULL or valid for one write.
pub(crate) unsafe fn cache_query<T>(
    cache: *const gpusvc_program_cache,
    out: *mut T,
    out_name: &str,
    answer: impl FnOnce(&ProgramCache) -> Result<T, FfiError>,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract.
    unsafe { answer_into(|| self::cache(cache), out, out_name, |c| answer(&c)) }
}
