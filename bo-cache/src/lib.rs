//! A buffer-object cache for dma-buf imports on a DRM file description: exactly one
//! reference-counted object per GEM handle, safe against an import racing the last release, with
//! import sizes validated.
//!
//! The kernel deduplicates imports — the same buffer imported twice on one DRM file description
//! gets the same GEM handle — but it does not count references on handles: one `GEM_CLOSE` ends
//! the handle for every user. A process that imports the same dma-buf from two places (a video
//! decoder and a compositor client, two planes of one image) therefore needs one userspace object
//! per handle with a count, and the last release must close the handle exactly once, without
//! racing an import that the kernel just answered with that same handle.
//!
//! # Ownership rules
//!
//! * **One cache per DRM file description, opened by the cache.** GEM handles belong to the open
//!   file description (a `dup` shares them), and they are not counted by the kernel, so a second
//!   layer creating or closing handles on the same description (GBM, EGL, a host's own imports)
//!   would close handles under the cache. Nobody but the cache may create or close handles on its
//!   description. The kernel side is a [`Kernel`] value the cache owns; the DRM backend
//!   [`DrmKernel`] ([`BoCache::open`]) opens the node itself (a render node, normally), or
//!   reopens the node behind a given fd ([`BoCache::reopen`]), never `dup`s it. It checks the
//!   path with `O_PATH` before opening anything ([`BoError::NotADrmDevice`] for a file, a FIFO,
//!   a directory, another device). The host uses the handles on [`BoCache::device_fd`] —
//!   submission, GEM mmap, KMS framebuffers — and never creates or closes handles there.
//! * **dma-buf fds are borrowed.** [`BoCache::import`] takes a [`BorrowedFd`](std::os::fd::BorrowedFd);
//!   the caller keeps and closes it. The handle keeps the buffer alive, so closing the fd after
//!   the import is fine. The cache never closes a caller's fd.
//! * **Export goes through the cache.** [`Bo::export_dmabuf`] asks the cache's description for a
//!   new fd, so no other layer needs the handle.
//! * **Violations are detected where they can be.** On a cache hit the cache checks that the fd
//!   names the buffer cached under the returned handle (`(st_dev, st_ino)`); if not, the handle
//!   was closed and recycled behind its back: [`BoError::ForeignHandle`]. The cache cannot tell
//!   whether the kernel's handle for that other buffer was made by its own import or belongs to
//!   whoever broke the rule, so it takes the side that corrupts nothing: it never closes that
//!   number (not at the last release of its stale object, not later), refuses every import of
//!   that other buffer under it, and [`BoCache::lookup`] finds no object there. At worst a
//!   handle its own import made leaks. An import that later gets the number for any other
//!   buffer takes it back: that buffer's handle was made anew.
//!
//! # Guarantees
//!
//! Tests in `tests/cache.rs` run on [`MemfdKernel`] (real sealed memfds standing in for
//! dma-bufs), checked against the fake's own counters. `tests/drm.rs` runs the same scenarios
//! on a real render node when the machine has one with a dma-buf source (see "Real-DRM tier").
//!
//! * One object per buffer: the same buffer imported through the same fd, a `dup`, or an fd
//!   received from another process over `SCM_RIGHTS` is one object, and its handle is closed
//!   once, at the last release — `same_buffer_via_fd_dup_and_scm_rights_from_a_child_is_one_object`.
//! * The last release closes exactly once, even with imports and releases of one buffer racing on
//!   8 threads; no double close — `import_racing_last_release_never_double_closes`.
//! * Sizes: `min_size` (default) and `exact_size` (opt-in) are enforced against the size the
//!   kernel reports at first import — `size_rules_min_exact_and_equal`.
//! * A failed import of a fresh handle closes it — `size_reject_on_fresh_handle_closes_it`,
//!   `faults_on_a_fresh_handle_close_it`, `table_full_closes_the_fresh_handle`.
//! * A failed import of a cached handle neither closes it nor changes its count —
//!   `size_reject_on_cached_handle_keeps_count_and_handle`,
//!   `faults_on_a_cached_handle_never_close_it_nor_touch_its_count`,
//!   `flags_conflict_on_reimport_leaves_count_unchanged`.
//! * A recycled handle number is a new object (new generation, new size) —
//!   `recycled_handle_gets_a_new_generation_and_the_new_size`.
//! * A handle recycled behind the cache's back is refused and never closed by the cache, even
//!   after its stale object is gone; the stale object never exports the other buffer; an import
//!   that gets the number for another buffer again takes it back and closes it once —
//!   `foreign_recycled_handle_is_refused_and_never_closed`,
//!   `a_handle_found_naming_another_buffer_is_never_exported`,
//!   `a_number_found_foreign_is_refused_for_that_buffer_and_taken_back_for_another`.
//! * Memory is bounded: sparse handles anywhere up to `i32::MAX` work under the cap, beyond it
//!   imports fail with [`BoError::TableFull`] (the cap counts every number the cache has seen,
//!   not only live ones); 1024 dense handles take under 64 KiB —
//!   `sparse_handles_stay_under_the_table_cap`, `dense_1024_handles_fit_in_64_kib`; the table
//!   bytes the cap is enforced on are what a counting global allocator sees (within 1 KiB of
//!   the cache's own struct): 57 344 B for 1024 dense handles, 12.8 MB for 1024 sparse ones —
//!   `tests/table_memory.rs`.
//! * Planes: offsets and sizes are checked (overflow included), planes of one buffer share its
//!   object, each handle is closed once — `planes_share_objects_and_close_each_handle_once`,
//!   `plane_out_of_bounds_and_overflow_are_refused`.
//! * Objects outlive the cache value: after [`BoCache`] is dropped, live objects keep working and
//!   the last release closes its handle and frees the cache —
//!   `cache_dropped_with_live_objects_frees_on_last_release`.
//! * fds are borrowed: the caller's fd stays open and usable — `fds_are_borrowed_never_closed`.
//! * References are capped per object ([`CacheConfig::max_refs`]): an import or
//!   [`Bo::try_clone`] at the cap is [`BoError::TooManyReferences`] and changes nothing —
//!   `the_reference_cap_refuses_imports_and_try_clone_and_changes_nothing`.
//! * Out of fds (`RLIMIT_NOFILE` exhausted in a re-exec'd child): imports and exports fail with
//!   `Kernel { EMFILE }` values, cached counts are untouched, fresh handles are closed, nothing
//!   leaks, no double close — `tests/fd_exhaustion.rs`.
//! * Opening a DRM node opens nothing else and never blocks: a missing path is
//!   `Kernel { Open, ENOENT }`; a regular file, a FIFO (without hanging, and without releasing
//!   a writer blocked on it), a directory, a running executable, `/dev/null`, a symlink to it
//!   and a memfd are [`BoError::NotADrmDevice`] —
//!   `open_refuses_what_is_not_a_render_node_without_blocking`, `opening_a_fifo_does_not_open_it`,
//!   `reopen_refuses_fds_that_are_not_render_nodes`.
//! * The fake follows the kernel's rules (lowest free handle, same handle on re-import, `EINVAL`
//!   on double close) — `tests/memfd_kernel.rs`.
//! * The refcount protocol holds in every interleaving loom explores (`tests/loom.rs`, on a
//!   synthetic kernel with the fake's rules; no double close, no use of a closed handle by a
//!   live object, no handle left open, live counts consistent): import vs last release —
//!   `import_vs_last_release`; two releasers and an importer — `two_releasers_and_an_importer`;
//!   two first imports of one buffer give one object with count 2 — `concurrent_fresh_imports`;
//!   lock-free lookup vs last release — `lookup_vs_last_release`; clone vs release —
//!   `clone_vs_release`; a refused re-import vs last release — `rejected_import_vs_last_release`.
//!   The models have teeth: loom builds carry five deliberately broken variants of the
//!   protocol, selected at run time with `BO_CACHE_MUTANT` (`unlock_before_close`,
//!   `fd_to_handle_outside_lock`, `dec_to_zero_then_revive`, `error_path_closes_cached`,
//!   `plain_decrement`; other builds compile them away), and `scripts/loom-mutants` (a step of
//!   `scripts/test`) checks that the unmutated models pass and some model fails for each.
//!
//! # Real-DRM tier
//!
//! `tests/drm.rs` needs a render node and a [`DmaBufSource`] (`/dev/udmabuf`, or dumb buffers
//! exported from the device's primary node). It checks the kernel's own rules on [`DrmKernel`]
//! (same handle for the same fd, a dup and an fd from a child; self-export; one `GEM_CLOSE`
//! ends a handle, a second is `EINVAL`; `lseek` sizes) and runs T1–T7 and T9 of the memfd tier
//! plus a two-thread 100 000-round import/release stress on it, all with 0 double closes.
//! Without a node or a source each test prints `SKIP <test>: <reason>`; `GPUSVC_REQUIRE_DRM=1`
//! makes that a failure.
//!
//! # Errors
//!
//! Every failure is a [`BoError`] value (never a panic): bad requests, fds that are not
//! importable, size and flag conflicts, foreign handles, a full table, and kernel errnos with the
//! operation that returned them. [`BoCache::stats`] counts hits, misses, closes, double closes
//! (`EINVAL` from `GEM_CLOSE`, which must stay 0), size rejects, foreign handles and live objects.
//!
//! # Thread safety
//!
//! [`BoCache`] and [`Bo`] are `Send + Sync`. There is one lock, the import/teardown lock "M"
//! (no other lock is ever taken while holding it, except whatever a [`Kernel`] implementation
//! takes inside its own calls — [`MemfdKernel`]'s state lock is a leaf). Lock-free: [`Bo::clone`],
//! a release that is not the last, [`BoCache::lookup`], and every [`Bo`] getter. Under M:
//! imports, the last release, [`BoCache::stats`]. Nothing in this crate panics under M; a
//! poisoned M is recovered.
//!
//! # Refcount protocol and memory orderings
//!
//! Invariant: a slot's count goes from 1 to 0 **only under M**, in the same critical section as
//! the slot's reset and the `GEM_CLOSE`, which runs before M is released. Hence under M a positive
//! count stays positive, and an import that gets a handle from the kernel finds either a live
//! object or a free slot, never a dying one.
//!
//! * **Import** (under M): `fd_to_handle`, the table lookup/insert, and either the hit (identity,
//!   size and flags checks, then `fetch_add(1, Relaxed)`: M orders it) or the miss (size from
//!   `lseek(SEEK_END)`, identity from `fstat`, the fields stored `Relaxed`, then
//!   `store(1, Release)` to publish them to lock-free lookups). The count's `load(Relaxed)`
//!   that tells hit from miss is exact because M is held.
//! * **Clone**: `fetch_add(1, Relaxed)`; the caller's reference already orders it after the
//!   publication. Over `i32::MAX` references aborts, as `Arc` does.
//! * **Release, not the last**: "decrement unless one", a CAS loop with `Release` on success so
//!   that this holder's uses happen-before the final teardown.
//! * **Release, maybe the last**: take M, `fetch_sub(1, AcqRel)`; the Acquire reads the end of
//!   the release sequence every earlier `Release` decrement belongs to. If it was 1: reset the
//!   fields, `GEM_CLOSE`, count, then unlock. Otherwise a lookup took a reference meanwhile.
//! * **Lookup** (lock-free): CAS `n -> n + 1` for `n >= 1` with `Acquire` on success (pairs
//!   with the publishing `Release` store), never from 0.
//! * **Table nodes** are published with `Release` stores under M and read with `Acquire`; they
//!   are freed only with the cache, so slot addresses are stable.
//! * **Cache lifetime**: the internals are freed when the [`BoCache`] was dropped and no object
//!   is live, both decided under M, so clones and releases never touch a cache-wide counter.

mod cache;
mod drm;
mod error;
mod kernel;
mod memfd;
mod sync;
mod table;

pub use cache::{Bo, BoCache, CacheConfig, ImportDesc, PlaneDesc, PlaneSet, Stats};
pub use drm::{DRM_MAJOR, DmaBufSource, DrmKernel};
pub use error::{BoError, KernelOp};
pub use kernel::{DRM_CLOEXEC, DRM_RDWR, Identity, Kernel, fstat_identity, lseek_size};
pub use memfd::{FakeStats, MemfdKernel};
pub use rustix::io::Errno;
