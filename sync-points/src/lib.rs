//! `sync-points`: lightweight in-process sync tokens and order numbers for GPU streams, with
//! wait validation that retires waits which could never be satisfied — so streams waiting on
//! each other cannot deadlock.
//!
//! * [`OrderData`] — one per sequence (stream): order numbers from one global counter (from 1),
//!   queued as unprocessed, then begun, paused, resumed and finished in order.
//! * [`ClientState`] — one per command buffer `(namespace, id)`, bound to a sequence; releases
//!   counts while its sequence is processing.
//! * [`SyncPointManager::wait`] — runs a callback when a token is released, or, if the releasing
//!   sequence finishes the order number the wait is fenced at without releasing, retires the wait
//!   (runs the callback; the token stays unreleased).
//!
//! # Guarantees
//! * Every registered callback runs exactly once: on release, on retirement, or when the
//!   releasing client is destroyed; a wait that returns `false` never runs its callback.
//! * Callbacks run with no lock of this crate held, on the thread that caused them (release,
//!   finish, destroy), so a callback may call back into the manager.
//!
//! # Errors
//! Order violations ([`OrderError`]), releases outside processing ([`ReleaseError`]) and registry
//! misuse ([`ClientError`]) are values; nothing here is undefined behaviour or a silent corruption.
//!
//! # Thread safety and lock order
//! Everything is `Send + Sync`. Locks are taken in this order and never the other way:
//! registry → client state → order data. The registry lock is never held while a client or order
//! lock is taken (handles are cloned out first). All concurrency goes through `crate::sync` so the
//! `loom` model checker can explore it (`RUSTFLAGS="--cfg loom" cargo test -p gpusvc-sync-points
//! --test loom --release`). Atomics are counters for ids and order numbers (uniqueness only,
//! `Relaxed`); all ordering between threads comes from the mutexes.

mod client;
mod manager;
mod order;
pub(crate) mod sync;
mod token;

pub use client::{ClientState, ReleaseError, ReleaseOutcome, WaitCallback};
pub use manager::{ClientError, ReleaseFuture, SyncPointManager};
pub use order::{OrderData, OrderError, SequenceId};
pub use token::{ClientId, SyncToken, reduce};
