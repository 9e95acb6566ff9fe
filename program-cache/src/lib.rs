//! `program-cache`: a cache of linked GL program binaries for a GPU process.
//!
//! It answers two questions before the driver is asked to do work: *is this shader known to
//! compile?* (status storage, so the compile can be deferred) and *is there a binary for this
//! program?* (binary storage, so compile + link become one `glProgramBinary`). It has SHA-1 keys
//! over length-prefixed fields ([`key`]), compile statuses reference-counted by the cached
//! programs that use them, a byte-budget store with selectable eviction policies
//! ([`EvictionPolicy`]: W-TinyLFU by default, chosen by `examples/policy_sim.rs`; LRU, page
//! LRU/MRU, SLRU and S3-FIFO on request), memory pressure, histograms pushed to a host callback
//! ([`stats`]), and the compile/link flow ([`ProgramManager`]) over a [`ProgramBackend`] — GL
//! via headless-gl (`GlBackend`, `OwnedGlBackend`) or the host's own entry points, either of
//! them behind one type with [`DynBackend`].
//!
//! The GL program vocabulary ([`ShaderStage`], [`LinkOptions`], [`AttributeBinding`],
//! [`TransformFeedbackMode`], [`ActiveVariable`]) comes from the driver-free `gpusvc-gl-types`
//! crate and is re-exported here. The default `gl` feature adds what needs a GL driver library
//! (glutin, glow): `GlBackend`, `OwnedGlBackend` and `CompatibilityStamp::from_driver`. Without
//! it (`default-features = false`) keys, the memory cache, the disk store and the manager over
//! a host's own backend work as they do with it, and neither glutin nor glow is linked.
//!
//! # Guarantees
//! * A program restored from the cache has the same link status, active attributes and uniforms
//!   and renders the same as one compiled and linked from source; a binary the driver refuses is
//!   evicted, counted, and the program is linked from source — the caller never sees the refusal.
//! * Keys and values are copied in: nothing borrows the caller's buffers.
//! * The stored bytes never exceed the budget, nor a quarter of it while memory pressure is
//!   moderate; an entry larger than that, an empty binary, or any save under critical memory
//!   pressure is refused with a [`SaveError`]. A binary the cache would refuse for pressure (or
//!   for its size, when the backend reports `GL_PROGRAM_BINARY_LENGTH`) is never read out of the
//!   driver.
//! * [`ProgramCache::eviction_order`] lists the stored programs in exactly the order successive
//!   evictions would remove them, under every policy.
//! * Every program kind goes through the cache — vertex + fragment with optional tessellation
//!   and geometry stages, compute alone, separable programs, transform feedback — keyed by all
//!   its stages and options, and a restored program runs exactly as one linked from source
//!   (`tests/program_kinds.rs` on the real driver: a compute dispatch, geometry and
//!   tessellation draws, a transform-feedback capture and a separable pipeline read back
//!   identically, restored by a second manager with no driver compile or link).
//! * A restored program reports the same driver reflection — attributes, uniforms, fragment
//!   outputs, transform-feedback varyings, uniform and storage blocks with their members,
//!   static use — and its shaders get back exactly the maps stored with it
//!   (`tests/corpus.rs` over piglit and the built-in corpus).
//! * A compile or link that failed is answered from the cache, without the driver, with the
//!   driver's info log byte for byte, also after a disk round trip; the shaders of a program
//!   that failed only at link keep their compiled status
//!   (`failed_compiles_and_links_come_back_from_disk_with_the_drivers_exact_log`). A log over
//!   [`MAX_FAILURE_LOG`] is not cached.
//! * With a disk store, a shader that compiled is known compiled at the next start even when no
//!   stored program uses it (the good shader of a program whose other shader failed): the
//!   store's bounded `compiled.list`, emptied by a clear (`tests/compiled_list.rs`; on the real
//!   driver, `a_warm_start_compiles_no_shader_of_a_program_the_driver_refused`). With
//!   persistence the same batches go to [`disk::PersistSink::shaders_compiled`], a
//!   [`disk::Store`] keeps them in its `compiled.list`, and [`ProgramCache::insert_compiled`]
//!   hands them to the next start
//!   (`compiled_shaders_go_through_the_sink_and_a_store_into_the_next_start`; on the real
//!   driver through C++, `AWarmStartThroughTheStoreCompilesNoShaderOfARefusedProgram`).
//! * Managers with different backend identities may share one cache: a shader's compile status
//!   and compile failure are one backend's, never another's ([`backend_shader_hash`]), so a
//!   shader one backend compiled is not deferred on another: that backend's own driver compiles
//!   it, and may refuse it (`a_compile_status_is_one_backend_identitys` with the fake driver;
//!   `a_shader_compiled_on_another_backend_is_not_deferred_where_it_fails` on a core and a
//!   compatibility context).
//! * Links started together and polled ([`ProgramManager::start_link`],
//!   [`ProgramManager::link_ready`], [`ProgramManager::finish_link`]) give what synchronous
//!   links give, cold and warm
//!   (`links_started_together_and_polled_give_what_synchronous_links_give`); with
//!   [`ProgramManager::set_defer_binary_reads`] no binary is read until the host asks
//!   (`deferred_binary_reads_happen_when_the_host_asks`), and at most [`MAX_DEFERRED_SAVES`]
//!   programs holding at most [`MAX_DEFERRED_BYTES`] wait
//!   (`deferred_reads_are_bounded_and_forgotten_ones_never_happen`,
//!   `deferred_reads_are_bounded_in_bytes`); [`ProgramManager::forget_deferred_read`] drops
//!   only the read the program's own link made, never another live program's of the same key
//!   (`forgetting_a_program_forgets_only_its_own_read`,
//!   `a_stale_program_never_forgets_a_newer_programs_read`), and so does
//!   [`ProgramManager::forget_read`] with the program's [`DeferredRead`] token after the program
//!   is gone (`a_read_token_forgets_only_its_own_read_even_after_the_program_is_gone`).
//! * A [`RestoreAhead`] (feature `gl`) restores the cached programs on a thread with a context
//!   in the host's share group ([`headless_gl::GlContext::spawn_shared`]) before the host links
//!   them; the host's cache hits take them ([`GlBackend::with_restore_ahead`]), each the program
//!   of its own key, rendering as one linked from source
//!   (`a_host_takes_the_programs_restored_ahead_each_of_its_own_key`). Programs nobody takes
//!   are deleted when it stops (`programs_nobody_takes_are_deleted_when_the_restore_ahead_stops`);
//!   keys past its limits, asked for after a release, or asked for before the thread reached
//!   them (the thread then leaves them) are restored by the host itself, without waiting
//!   (`keys_past_the_limits_or_after_a_release_are_the_hosts_to_restore`,
//!   `a_key_the_host_asks_for_before_the_thread_reaches_it_is_left_to_the_host`); a program the host's
//!   context cannot adopt goes back to the thread and is deleted there, and the host restores
//!   the binary itself
//!   (`a_program_another_share_group_cannot_adopt_goes_back_and_is_deleted`). Critical memory
//!   pressure or a clear deletes what waits, and no program restored before a clear is handed
//!   out after it
//!   (`critical_memory_pressure_or_a_clear_deletes_what_waits_and_hands_out_nothing_older`),
//!   nor one restored before a move to critical pressure, however short
//!   (`a_pulse_of_critical_memory_pressure_too_short_to_be_polled_still_drops_what_waits`);
//!   one restore-ahead after another on one context keeps drawing
//!   (`restore_ahead_after_restore_ahead_on_one_context_draws_every_time`).
//! * A cache built with [`ProgramCacheBuilder::cache_transform_feedback`]`(false)` never looks
//!   up, reads or stores a program with transform-feedback varyings
//!   (`a_cache_that_keeps_transform_feedback_out_never_stores_or_restores_such_programs`).
//!
//! The disk store ([`disk`], protocol in `FORMAT.md`; each bullet is tested in
//! `tests/disk_hostile.rs`, with `tests/disk.rs`, `tests/disk_faults.rs`,
//! `tests/disk_processes.rs` and the CLI's `gpusvc/tests/cache_cli.rs`):
//! * It deletes only what it made: a folder is a store only when its name, `STAMP` and hashes
//!   check out, and deletion removes only the names the format defines (look-alike folders and
//!   users' files survive open, collection and clear).
//! * It never follows a link, opens a FIFO for I/O, or reads more than an entry's bound: planted
//!   links are never written through, FIFOs never hang it, a huge sparse file is removed unread.
//! * The host's thread never touches the disk and nothing waits on another process past a
//!   bounded try: a frozen process holding any lock costs at most a skipped eviction or a
//!   memory-only run, never a hang of the constructor, `flush`, `clear` or drop.
//! * Another product's store and a newer version's store are never collected as stale (only
//!   once unused for 30 days), nor is a store other users own; a store is unused only when
//!   both the clock and the other stores' records say so, so a clock that is fast here, or
//!   dates written in the future, never make a recent store look unused; a future-dated entry
//!   ages like the others.
//! * It stays within its budget as the file system counts it (allocated blocks, logs included),
//!   `lru.log` grows with the entries and not with the hits, a full disk makes it evict and retry,
//!   and an entry it writes can always be read back.
//! * The drop that lets go of the last handle on the cache waits for the saves already queued
//!   (the host may exit right after it), also when it comes while the startup load is
//!   inserting: the loader never holds the cache itself
//!   (`dropping_the_cache_during_the_startup_load_still_waits_for_queued_writes`). (One exception
//!   the host makes: an `on_loaded` callback that keeps a handle on the cache may let go of
//!   the last handle on the loader thread; the drop and its wait then happen there, and the
//!   host's own drop, earlier, did not wait.)
//! * A process killed at any moment never leaves a wrong or torn entry; a damaged `STAMP` is
//!   repaired and a folder deleted under it is recreated.
//! * The startup load checks each entry without decoding it; the loader thread decodes the
//!   loaded entries after the load has been reported, in load order, off the host's thread and
//!   without counting a lookup, and a first lookup that comes before decodes its entry itself
//!   (`FORMAT.md`, "Startup load";
//!   `the_loader_decodes_the_loaded_entries_after_the_load_without_a_lookup`). That decoding
//!   never evicts: under memory pressure or the host's saves since the load, an entry that would
//!   not fit decoded stays packed (`the_decoding_after_the_load_never_evicts`). Until decoded,
//!   an entry counts the bytes it holds and its shaders' compile statuses count; decoded, it
//!   counts its program's size, and the budget still holds (`tests/disk.rs`,
//!   `a_loaded_entry_counts_the_bytes_it_holds_until_its_first_lookup_decodes_it`,
//!   `decoding_that_takes_the_cache_over_its_budget_evicts_by_policy`, with
//!   `DiskConfig::decode_after_load` off). A body that does not
//!   decode then is refused, counted, deleted from disk and never returned, and the program is
//!   linked from source (`a_body_that_does_not_decode_is_rejected_at_its_first_lookup_and_never_returned`;
//!   `tests/disk_faults.rs`,
//!   `a_body_found_damaged_at_its_first_lookup_relinks_from_source_through_the_manager`).
//! * A start after one that read its entries from their files reads them from `load.pack`, one
//!   file, instead (`FORMAT.md`, "The load pack"; `tests/disk_pack.rs`,
//!   `the_start_after_one_that_read_the_files_takes_every_entry_from_the_pack`), in the same
//!   load order (`a_load_from_the_pack_keeps_the_order_a_load_from_the_files_has`). The pack
//!   is only a copy of `entries/` exactly as it was: any entry published, replaced or deleted
//!   since, by anyone, makes it stale and it is deleted
//!   (`any_change_to_the_entries_since_the_pack_makes_it_stale_and_it_is_deleted`), also when
//!   the new file under an old key got the old file's inode
//!   (`an_entry_deleted_and_saved_again_is_never_served_from_an_older_pack`) and when another
//!   cache clears the store while the pack is being planned
//!   (`a_clear_by_another_cache_right_after_a_load_never_comes_back_from_a_pack`); a damaged
//!   copy or pack is not used and never costs a good file
//!   (`a_damaged_pack_is_not_trusted_and_the_files_are_judged_on_their_own`); a pack larger
//!   than the load may read is not read (`a_pack_larger_than_the_load_may_read_is_not_read`),
//!   and neither it nor one the budget capped is written again at every start
//!   (`a_pack_capped_by_the_budget_or_too_large_for_a_smaller_load_is_not_rewritten_at_every_start`);
//!   entries averaging 16 KiB or more, which load as fast from their files, get no pack
//!   (`entries_averaging_16_kib_or_more_get_no_pack`);
//!   a link or FIFO at its name is never followed or read (the name is replaced, the target
//!   untouched), and a folder there is left as it is
//!   (`a_link_fifo_or_folder_at_the_pack_name_is_never_followed_or_read`); a clear or an
//!   eviction deletes it, and stale-store collection removes a store with one whole
//!   (`a_clear_or_an_eviction_deletes_the_pack_with_the_entries_it_copies`,
//!   `another_stamps_store_with_a_pack_is_removed_whole`).
//!
//! The persistence split for a sandboxed GPU process that cannot open files
//! ([`ProgramCacheBuilder::persist`] with a [`PersistSink`] on the GPU side,
//! [`ProgramCache::insert_entry`], and [`disk::Store`] in the process that owns the disk):
//! * A GPU process that cannot see the cache folder at all gets every program it linked back
//!   as a cache hit at its next start, from entries the browser process persisted and streamed
//!   back (`tests/persist_sandbox.rs`,
//!   `gpu_process_without_the_folder_gets_every_program_back_from_the_browser`: two real
//!   processes over a socketpair, the GPU one in a private mount namespace with an empty tmpfs
//!   over the folder's parent).
//! * `insert_entry` inserts only an entry that passes every check of `FORMAT.md` for this
//!   cache's stamp, and nothing otherwise, never panicking: each check, and every bit flip and
//!   truncation of real entries (`tests/persist.rs`,
//!   `insert_entry_refuses_each_check_and_inserts_nothing`,
//!   `every_bit_flip_and_truncation_is_refused_or_harmless`). The driver-refusal rule applies
//!   to inserted entries, and the sink hears each refusal and the store's rejection
//!   (`a_binary_the_driver_refuses_reaches_entry_rejected`, on the real driver).
//! * The sink is called on the cache's persistence thread, never on the caller's, never after
//!   the cache's drop has returned, and the GPU thread never waits for it: a full queue drops
//!   and counts (`the_sink_gets_each_save_as_a_valid_entry_off_the_callers_thread`,
//!   `the_sink_is_never_called_after_the_cache_is_dropped`,
//!   `a_full_queue_drops_and_counts_and_never_waits_for_the_host`).
//! * The standalone [`disk::Store`] is the disk layer's store-keeping on the caller's thread,
//!   so every disk bullet above holds for it; its own behaviour — entries of another stamp or
//!   damaged bytes refused with nothing written, most-recent-first streaming that survives the
//!   process, budget and LRU eviction, links and FIFOs never followed or opened, damaged entries
//!   never streamed — is tested in `tests/persist.rs` (`store_*`,
//!   `a_damaged_entry_on_disk_is_never_streamed_and_is_deleted`).
//!
//! # Errors
//! Saves return [`SaveError`]; links return [`LinkFailure`] with the driver's info log;
//! [`ProgramCache::insert_entry`] returns [`InsertError`] and [`disk::Store`] calls
//! [`disk::StoreError`]. Nothing here panics on driver output or on entry bytes.
//!
//! # Thread safety
//! [`ProgramCache`] is `Send + Sync`: one mutex guards its state, and the host callback runs with
//! it released. A [`PersistSink`] is called on the cache's own persistence thread
//! (`gpusvc-cache-persist`, see [`disk::PersistConfig`]). A [`disk::Store`] works synchronously
//! on its caller's thread with bounded waits. A [`ProgramManager`] owns its backend and lives
//! on the thread of its GL context. A `RestoreAhead` runs its own thread
//! (`gpusvc-restore-ahead`) with its own context; the host's thread waits for it only while
//! it restores the very key the host asks for (one `glProgramBinary`), and its lock is held for
//! bookkeeping only, never across a GL call or the cache's lock. It holds the cache until its
//! drop has joined the thread, so the thread never lets go of the cache's last handle. Until it
//! is released, its thread wakes every 250 ms to look at the cache's generation and pressure.

mod backend;
mod cache;
pub mod disk;
mod dyn_backend;
pub mod key;
mod manager;
mod memory_store;
mod program;
#[cfg(feature = "gl")]
mod restore_ahead;
pub mod stats;
mod status;

#[cfg(feature = "gl")]
pub use backend::{GlBackend, OwnedGlBackend};
pub use backend::{ObjectId, ProgramBackend};
pub use cache::{
    CacheConfig, DESKTOP_BUDGET, LOW_MEMORY_BUDGET, MOBILE_BUDGET, MemoryPressure, ProgramCache,
    ProgramCacheBuilder, SaveError, SaveReport,
};
pub use disk::{
    CompatibilityStamp, DiskConfig, DiskCounters, DriverIdentity, InsertError, LoadReport,
    PersistConfig, PersistCounters, PersistSink,
};
pub use dyn_backend::{DynBackend, DynObject};
pub use gl_types::{
    ActiveVariable, AttributeBinding, BlockMember, InterfaceBlock, LinkOptions, ProgramInterface,
    ProgramOutput, ShaderStage, StageMask, TransformFeedbackMode, Varying,
};
pub use key::{
    DigestBuildHasher, ProgramKey, ProgramKeyInput, ShaderHash, backend_shader_hash,
    backend_shader_hash_preimage, compile_failure_key, program_key, program_key_preimage,
    shader_hash, shader_hash_preimage,
};
pub use manager::{
    CompileOutcome, DeferredRead, ForeignShader, LinkFailure, LinkOrigin, LinkedProgram,
    MAX_DEFERRED_BYTES, MAX_DEFERRED_SAVES, PendingLink, ProgramManager, ProgramManagerId,
    ProgramOptions, Shader, ShaderState,
};
pub use memory_store::{EvictionPolicy, PageId};
pub use program::{
    BlockInfo, CachedProgram, FailureRecord, MAX_FAILURE_LOG, MAX_STORED_VARIABLES,
    ProgramBinaryData, ShaderVariables, SharedProgram, StageRecord, VariableInfo,
};
#[cfg(feature = "gl")]
pub use restore_ahead::{RestoreAhead, RestoreAheadConfig, RestoreAheadStats};
pub use stats::{Counters, Histogram, HistogramCallback, Stats};
pub use status::{CompileStatus, LinkStatus};
