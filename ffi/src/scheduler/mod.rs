//! `gpusvc_scheduler_*`: the prioritized GPU stream scheduler (the `gpu-scheduler` crate) seen
//! from C.
//!
//! A `gpusvc_scheduler` may be used from any thread; one thread at a time drives it
//! (`gpusvc_scheduler_run_next` / `gpusvc_scheduler_run_until_idle`; a concurrent or re-entrant
//! drive runs nothing). Streams are named by the `uint64_t` id `gpusvc_scheduler_add_stream`
//! gives. Task and start callbacks run on the driving thread with no gpusvc lock held: they may
//! call back into the library (enqueue, enable streams, release tokens, ...).
//!
//! `gpusvc_scheduler_new_with_config` sets the time slice and granularity, a host clock (for
//! deterministic tests or a host time base) and a per-task metrics callback;
//! `gpusvc_scheduler_metrics` reads the per-priority metrics at any time.
//!
//! The handle holds the crate's `Scheduler` and nothing else: the scheduler validates its
//! config and owns (and destroys) the sync clients it creates.
//!
//! * [`types`]: the C enumerations and structs, and their conversions;
//! * [`host`]: the host's clock, metrics callback and tasks as the crate's types;
//! * [`exports`]: the functions.

use std::sync::Arc;

use gpu_scheduler::Scheduler;

use crate::kit::FfiError;
use crate::kit::handle::{self, Kind};

pub(crate) mod exports;
pub(crate) mod host;
pub(crate) mod types;

pub use exports::*;
pub use types::*;

/// An opaque scheduler. Thread-safe: any thread may use it, and free it once no other thread is
/// still calling with it.
#[derive(Debug)]
pub struct gpusvc_scheduler {
    _opaque: [u8; 0],
}

/// The scheduler behind a handle.
pub(crate) fn scheduler(s: *const gpusvc_scheduler) -> Result<Arc<Scheduler>, FfiError> {
    handle::shared(s, "scheduler", Kind::Scheduler)
}
