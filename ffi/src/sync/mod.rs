//! `gpusvc_sync_*`: sync tokens, order numbers and deadlock-free waits between GPU streams
//! (the `sync-points` crate) seen from C.
//!
//! A `gpusvc_sync_manager` may be used from any thread at once. Sequences are named by the
//! `uint64_t` id `gpusvc_sync_sequence_create` gives; clients (command buffers) by their
//! `(namespace_id, command_buffer_id)` pair. Wait callbacks run exactly once each, with no gpusvc
//! lock held, on the thread that ends the wait: the one releasing, finishing or beginning an order
//! number, destroying the releaser — or freeing the manager (its last user: a scheduler made over
//! it holds it until the scheduler is freed), which ends every wait still pending.
//! A callback may call back into the library. Callbacks that a callback triggers (it releases,
//! finishes, destroys, ...) run after it returns, not inside it: the thread queues them and its
//! outermost call runs them, first in, first out, before returning — so chains of releases made
//! from callbacks take constant stack (see `sync-points`' guarantees).
//!
//! The handle holds the crate's `SyncPointManager` and nothing else: ids are checked by the
//! crate, and dropping the manager ends every wait and frees every client and sequence.
//!
//! * [`types`]: the token and callback types, token reading, and the crate's errors as codes;
//! * [`exports`]: the functions.

use std::sync::Arc;

use sync_points::SyncPointManager;

use crate::kit::FfiError;
use crate::kit::handle::{self, Kind};

pub(crate) mod exports;
pub(crate) mod types;

pub use exports::*;
pub use types::*;

/// An opaque sync manager. Thread-safe: any thread may use it, and free it once no other thread
/// is still calling with it (a call in flight finishes on a live manager either way).
#[derive(Debug)]
pub struct gpusvc_sync_manager {
    _opaque: [u8; 0],
}

/// The `sync-points` manager behind a sync manager handle (a scheduler made over it shares it).
pub(crate) fn manager(m: *const gpusvc_sync_manager) -> Result<Arc<SyncPointManager>, FfiError> {
    handle::shared(m, "manager", Kind::SyncManager)
}
