//! `sync-points`: lightweight in-process sync tokens and order numbers for GPU streams, with
//! wait validation that retires waits which could never be satisfied — so streams waiting on
//! each other cannot deadlock.
//!
//! * [`OrderData`] — one per sequence (stream): order numbers from one global counter (from 1),
//!   queued as unprocessed, then begun, paused, resumed and finished in order.
//! * [`ClientState`] — one per command buffer `(namespace, id)`, bound to a sequence; releases
//!   counts while its sequence is processing.
//! * [`SyncPointManager::wait`] — runs a callback when a token is released, or retires the wait
//!   (runs the callback; the token stays unreleased) once the releasing sequence can no longer
//!   release in order: it finished a number and its next unprocessed number is past the fence
//!   (or it has none left) — Chromium's `SyncPointOrderData::FinishProcessingOrderNumber` rule.
//!
//! # Guarantees
//! * Every registered callback runs exactly once: on release, on retirement, or when the
//!   releasing client is destroyed; a wait that returns `false` never runs its callback.
//! * No cycle of waits stalls: a fence before the releaser's next unprocessed number is retired
//!   when the releaser finishes the number before it, so streams waiting on each other's
//!   never-released tokens all get to run (a wait at 3 on a releaser with numbers 1 and 4 ends
//!   when 1 is finished, not when 4 begins).
//! * Callbacks run with no lock of this crate held, on the thread that caused them (release,
//!   finish, begin, destroy), so a callback may call back into the manager.
//! * Callbacks that a callback triggers (its release, finish, destroy, ...) are not run inside
//!   it: they go to the back of a per-thread queue that the outermost call on the thread (the
//!   one not made from a callback) drains before it returns. Chains of releases made from
//!   callbacks take constant stack however long they are (a million deep, on a 256 KiB stack).
//!   Callbacks run first in, first out: one call's callbacks in order (a release's in the order
//!   the waits were registered, a finish's in fence order), then those the first of them
//!   triggered, then those the second triggered, ... — breadth-first. A release made from a
//!   callback therefore returns before the callbacks it triggered run (its
//!   [`ReleaseOutcome::Released`] count is of callbacks queued); a callback must not block
//!   waiting for the effect of one of those — not with [`SyncPointManager::wait_blocking`] on a
//!   token a queued callback would release (it waits out its timeout), and not by driving a
//!   scheduler built on this crate from inside a callback (the scheduler's own wait callbacks
//!   are queued behind the current one, so streams they would unblock stay blocked until the
//!   callback returns and the host drives again).
//! * A callback that panics does not stop the others: the rest of the queue runs, then the first
//!   panic resumes from the outermost call, and the thread's queue is left empty.
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
//!
//! The callback queue is a thread-local (loom's under `--cfg loom`), so it needs no lock and is
//! never shared: callbacks run on the thread whose call triggered them, and a thread draining
//! its queue never runs another thread's callbacks. It is borrowed only to push or pop, never
//! while a callback runs or is dropped. On a thread whose thread-locals are being destroyed (a
//! release from a thread-local's destructor at thread exit) there is no queue: callbacks then
//! run nested, as before.

mod callbacks;
mod client;
mod manager;
mod order;
pub(crate) mod sync;
mod token;

pub use client::{ClientState, ReleaseError, ReleaseOutcome, WaitCallback};
pub use manager::{ClientError, ReleaseFuture, SyncPointManager};
pub use order::{OrderData, OrderError, SequenceId};
pub use token::{ClientId, SyncToken, reduce};
