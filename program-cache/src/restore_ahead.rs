//! Restoring cached programs ahead of the host's links, on a thread with a context in the
//! host's share group ([`RestoreAhead`]).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use headless_gl::{GlContext, HandedProgram};

use crate::key::ProgramKey;
use crate::{MemoryPressure, ProgramCache};

/// How much a [`RestoreAhead`] restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreAheadConfig {
    /// At most this many programs.
    pub max_programs: usize,
    /// At most this many bytes of program binaries.
    pub max_bytes: usize,
    /// How long the thread waits for the cache's startup load before it gives up.
    pub load_timeout: Duration,
}

impl Default for RestoreAheadConfig {
    /// 1024 programs, 64 MiB of binaries, 10 s for the startup load.
    fn default() -> Self {
        RestoreAheadConfig {
            max_programs: 1024,
            max_bytes: 64 << 20,
            load_timeout: Duration::from_secs(10),
        }
    }
}

/// What a [`RestoreAhead`] did, so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreAheadStats {
    /// Programs the thread restored (the driver took the binary).
    pub restored: u64,
    /// Binaries the driver refused on the thread, or programs it could not hand over (the
    /// host's own restore then decides).
    pub refused: u64,
    /// Restored programs the host took.
    pub taken: u64,
    /// Times the host waited for a restore of the key it asked for that was under way.
    pub waited: u64,
    /// Total time of those waits, in microseconds.
    pub waited_us: u64,
    /// Restored programs deleted on the thread without the host taking them: unclaimed when
    /// it stopped, or stale.
    pub deleted_unclaimed: u64,
    /// Restored programs dropped as stale before the host took them: the cache was cleared,
    /// dropped its disk entries after driver refusals, or went to critical memory pressure.
    pub stale: u64,
    /// Stored programs left alone for the limits of [`RestoreAheadConfig`].
    pub over_limits: u64,
    /// Whether the thread has gone through every program it will restore.
    pub done: bool,
    /// Why the thread restored nothing, if it could not start (no shared context, no load).
    pub error: Option<String>,
}

/// Where one key stands.
enum Slot {
    /// The thread is restoring it.
    Restoring,
    /// Restored (while the cache's generation was this), waiting for the host.
    Ready(HandedProgram, u64),
    /// The host asked first (or took it, or the driver refused it): the thread leaves it.
    Host,
}

#[derive(Default)]
struct State {
    slots: HashMap<ProgramKey, Slot>,
    /// Restored programs not to be handed out (the cache moved on since); the thread deletes
    /// them.
    stale: Vec<HandedProgram>,
    /// Set by [`RestoreAhead::release_unclaimed`] and drop: restore nothing more, delete what
    /// is unclaimed, stop.
    closing: bool,
    /// The thread has stopped: nothing can delete a program now but the host.
    gone: bool,
    stats: RestoreAheadStats,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

/// Dropped when the thread ends: nothing restores or deletes any more, and a key left
/// `Restoring` by a panic is the host's.
struct Gone<'a>(&'a Shared);

impl Drop for Gone<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.gone = true;
        state.closing = true;
        state.stats.done = true;
        for slot in state.slots.values_mut() {
            if matches!(slot, Slot::Restoring) {
                *slot = Slot::Host;
            }
        }
        self.0.changed.notify_all();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(guard).unwrap_or_else(|e| e.into_inner())
    }
}

/// Restores the programs a cache holds on a thread of its own with a context in the host's
/// share group, before the host links them: a host link that
/// hits the cache then takes the restored program (`glWaitSync` on the fence the thread put
/// after it) instead of calling `glProgramBinary` on its own thread. Attach it to the
/// manager's backend with [`crate::GlBackend::with_restore_ahead`] or
/// [`crate::OwnedGlBackend::with_restore_ahead`].
///
/// The host never waits for the thread except for a restore of the very key it asks for that
/// is under way (one `glProgramBinary`); a key the thread has not reached is the host's, which
/// restores it itself, and the thread leaves it. Programs nobody takes are deleted on the
/// thread at [`RestoreAhead::release_unclaimed`] or drop, which also stop it; the drop joins the
/// thread. It works from the stored binaries, so what the host gets is what a cache hit gives:
/// the same program, link status and reflection. When the cache moves on — a clear, its disk
/// entries dropped after driver refusals, or a move to critical memory pressure, however
/// short — the thread restores nothing more and deletes what is waiting (within 250 ms), and no
/// program restored before it is handed out after it. A backend that takes its programs must
/// belong to a manager over the same cache ([`RestoreAhead::cache`]) and draw on a context of
/// the share group ([`RestoreAhead::serves`]).
///
/// The thread goes through the programs in the cache's eviction order
/// ([`ProgramCache::eviction_order`]). After a startup load that is, near enough, the load
/// order: the programs the previous run used last come first. A host that links in the order
/// of its previous run asks for those last, so the host and the thread work from opposite ends
/// and meet near the middle. Within [`RestoreAheadConfig`]'s limits it stops at the first
/// program that would go over them. It decodes a packed entry as the loader does after the
/// load (kept decoded when it fits, never evicting), so the host's lookup finds it decoded.
///
/// It costs a second thread and a second context until [`RestoreAhead::release_unclaimed`],
/// [`RestoreAhead::finish`] or drop (a program the host took may come back until then, when
/// the host's context cannot adopt it): a host releases it once its startup links are done.
pub struct RestoreAhead {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Kept until the thread is joined, so the thread's handle is never the cache's last.
    cache: Arc<ProgramCache>,
    /// The share group of the context it was started from ([`GlContext::share_group`]).
    share_group: u64,
}

impl std::fmt::Debug for RestoreAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestoreAhead")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl RestoreAhead {
    /// Starts the thread (`gpusvc-restore-ahead`, its context made with
    /// [`GlContext::spawn_shared`] from `ctx`): it waits for `cache`'s startup load, then
    /// restores the stored programs in eviction order, within `config`'s limits.
    /// `Err` when the thread cannot be spawned.
    pub fn start(
        ctx: &GlContext,
        cache: Arc<ProgramCache>,
        config: RestoreAheadConfig,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let thread = {
            let shared = shared.clone();
            let cache = cache.clone();
            ctx.spawn_shared("gpusvc-restore-ahead", move |made| {
                // Marks the thread gone however it ends, a panic in the driver included, so
                // the host never waits for a restore that will not finish.
                let _gone = Gone(&shared);
                run(&shared, &cache, config, made);
            })?
        };
        Ok(RestoreAhead {
            shared,
            thread: Some(thread),
            cache,
            share_group: ctx.share_group(),
        })
    }

    /// The cache it restores from. A manager whose backend takes its programs must link
    /// through this very cache: another cache's clears and memory pressure are not seen here.
    pub fn cache(&self) -> &Arc<ProgramCache> {
        &self.cache
    }

    /// Whether `ctx` can take what it restores: a context of the share group of the one it was
    /// started from. Another context's hits would each take a program, fail to adopt it, give
    /// it back and restore the binary themselves.
    pub fn serves(&self, ctx: &GlContext) -> bool {
        ctx.share_group() == self.share_group
    }

    /// The restored program of `key`, when the thread has one: waits only while the thread is
    /// restoring that very key. `None` when it has not reached the key (it then leaves it to
    /// the host), refused it, or was released; the host restores the program itself.
    pub fn take(&self, key: &ProgramKey) -> Option<HandedProgram> {
        // Read before our lock: the thread never holds ours while it asks the cache.
        let generation = self.cache.generation();
        let mut state = self.shared.lock();
        let mut waited: Option<Instant> = None;
        let taken = loop {
            if state.closing {
                break None;
            }
            match state.slots.get(key) {
                Some(Slot::Restoring) => {
                    waited.get_or_insert_with(Instant::now);
                    state = self.shared.wait(state);
                }
                Some(Slot::Ready(..)) => {
                    let Some(Slot::Ready(handed, restored_in)) =
                        state.slots.insert(*key, Slot::Host)
                    else {
                        unreachable!("the slot was just seen ready");
                    };
                    self.shared.changed.notify_all();
                    if restored_in != generation {
                        // Restored from a binary the cache has let go of since: the thread
                        // deletes it, and the host restores what the cache holds now.
                        state.stats.stale += 1;
                        state.stale.push(handed);
                        break None;
                    }
                    state.stats.taken += 1;
                    break Some(handed);
                }
                Some(Slot::Host) => break None,
                None => {
                    if !state.stats.done && !state.closing {
                        state.slots.insert(*key, Slot::Host);
                    }
                    break None;
                }
            }
        };
        if let Some(since) = waited {
            state.stats.waited += 1;
            state.stats.waited_us += since.elapsed().as_micros() as u64;
        }
        taken
    }

    /// Gives back a program [`RestoreAhead::take`] gave that the host could not adopt: the
    /// thread deletes it (and the key is the host's from then on). After the thread has
    /// stopped, nothing can: the program leaks (logged).
    pub fn give_back(&self, key: &ProgramKey, handed: HandedProgram) {
        let mut state = self.shared.lock();
        if state.gone {
            drop(state);
            tracing::warn!(%key, "a restored program came back after the restore-ahead stopped");
            drop(handed);
            return;
        }
        // Not to be handed out again: the host's context could not adopt it.
        state.stale.push(handed);
        state.stats.taken = state.stats.taken.saturating_sub(1);
        self.shared.changed.notify_all();
    }

    /// Stops the thread without waiting for it: it restores nothing more and deletes the
    /// programs nobody took. [`RestoreAhead::take`] gives nothing after this.
    pub fn release_unclaimed(&self) {
        let mut state = self.shared.lock();
        state.closing = true;
        self.shared.changed.notify_all();
    }

    /// Stops the thread as drop does (it deletes the programs nobody took), waits for it, and
    /// returns what it did in all.
    pub fn finish(mut self) -> RestoreAheadStats {
        self.stop();
        self.stats()
    }

    fn stop(&mut self) {
        self.release_unclaimed();
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::warn!("the restore-ahead thread panicked");
        }
    }

    /// What the thread has done so far.
    pub fn stats(&self) -> RestoreAheadStats {
        self.shared.lock().stats.clone()
    }

    /// Waits (at most `timeout`) until the thread has gone through every program it will
    /// restore; whether it has.
    pub fn wait_until_done(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        while !state.stats.done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

impl Drop for RestoreAhead {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The thread: restore, then wait until everything restored is taken or the host lets go,
/// then delete what is left.
fn run(
    shared: &Shared,
    cache: &ProgramCache,
    config: RestoreAheadConfig,
    made: Result<GlContext, headless_gl::ContextError>,
) {
    let ctx = match made {
        Ok(ctx) => ctx,
        Err(e) => {
            shared.lock().stats.error = Some(format!("no shared context: {e}"));
            return;
        }
    };
    if !wait_for_load(shared, cache, config.load_timeout) {
        return;
    }
    // The generation its programs were restored in: a clear at any time after it is seen below.
    let generation = restore_all(shared, cache, config, &ctx);
    {
        let mut state = shared.lock();
        state.stats.done = true;
        shared.changed.notify_all();
    }
    // Until the host lets go (a program it took may still come back, `give_back`): delete what
    // goes stale, and everything when the cache moves on (a clear, or critical memory pressure;
    // checked every 250 ms).
    loop {
        let moved_on =
            cache.generation() != generation || cache.memory_pressure() == MemoryPressure::Critical;
        let (stale, closing) = {
            let mut state = shared.lock();
            if moved_on && !state.closing {
                state.closing = true;
                let ready = take_ready(&mut state);
                state.stats.stale += ready.len() as u64;
                state.stale.extend(ready);
            }
            if state.stale.is_empty() && !state.closing {
                state = shared
                    .changed
                    .wait_timeout(state, Duration::from_millis(250))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            let mut stale = std::mem::take(&mut state.stale);
            if state.closing {
                // From here a program given back is the host's to lose: the thread deletes
                // only these.
                state.gone = true;
                stale.extend(take_ready(&mut state));
            }
            (stale, state.closing)
        };
        let deleted = delete(&ctx, stale);
        shared.lock().stats.deleted_unclaimed += deleted;
        if closing {
            return;
        }
    }
}

/// Takes every `Ready` program out of the slots (they become the host's keys).
fn take_ready(state: &mut State) -> Vec<HandedProgram> {
    let ready: Vec<ProgramKey> = state
        .slots
        .iter()
        .filter(|(_, slot)| matches!(slot, Slot::Ready(..)))
        .map(|(key, _)| *key)
        .collect();
    ready
        .into_iter()
        .filter_map(|key| match state.slots.insert(key, Slot::Host) {
            Some(Slot::Ready(handed, _)) => Some(handed),
            _ => None,
        })
        .collect()
}

/// Deletes programs on the thread's context; how many it deleted.
fn delete(ctx: &GlContext, programs: Vec<HandedProgram>) -> u64 {
    let mut deleted = 0;
    for handed in programs {
        match ctx.adopt(handed) {
            // Dropping it deletes it.
            Ok(program) => {
                drop(program);
                deleted += 1;
            }
            Err((e, handed)) => {
                tracing::warn!(error = %e, "a restored program could not be deleted");
                drop(handed);
            }
        }
    }
    deleted
}

/// Waits for the cache's startup load (checking for a release every 20 ms); false when the
/// host let go or the load did not end within `timeout`.
fn wait_for_load(shared: &Shared, cache: &ProgramCache, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if shared.lock().closing {
            return false;
        }
        if cache.wait_until_loaded(Duration::from_millis(20)).is_some() {
            return true;
        }
        if Instant::now() >= deadline {
            shared.lock().stats.error =
                Some(format!("the startup load did not end within {timeout:?}"));
            return false;
        }
    }
}

/// Restores the stored programs in eviction order, within the limits; a key the host has
/// asked for is left to the host. Returns the cache generation the programs were restored in.
fn restore_all(
    shared: &Shared,
    cache: &ProgramCache,
    config: RestoreAheadConfig,
    ctx: &GlContext,
) -> u64 {
    // Read first: a clear between the two tags the programs as older, never as newer.
    let generation = cache.generation();
    let keys = cache.eviction_order();
    let (mut programs, mut bytes) = (0usize, 0usize);
    for (index, key) in keys.iter().enumerate() {
        {
            let mut state = shared.lock();
            if state.closing {
                return generation;
            }
            if state.slots.contains_key(key) {
                continue;
            }
            state.slots.insert(*key, Slot::Restoring);
        }
        // The cache moved on (cleared, or critical memory pressure): restore nothing more.
        if cache.generation() != generation || cache.memory_pressure() == MemoryPressure::Critical {
            let mut state = shared.lock();
            state.slots.remove(key);
            shared.changed.notify_all();
            return generation;
        }
        let entry = cache.peek_decoding(key).filter(|p| p.failure.is_none());
        let over = entry.as_ref().is_some_and(|p| {
            programs >= config.max_programs
                || bytes.saturating_add(p.binary.bytes.len()) > config.max_bytes
        });
        let restored = match &entry {
            Some(p) if !over => {
                programs += 1;
                bytes += p.binary.bytes.len();
                Some(
                    ctx.load_program_binary_bytes(p.binary.format, &p.binary.bytes)
                        .map_err(|e| e.to_string())
                        .and_then(|program| ctx.hand_over(program).map_err(|(e, _)| e.to_string())),
                )
            }
            _ => None,
        };
        let mut state = shared.lock();
        match restored {
            Some(Ok(handed)) => {
                state.slots.insert(*key, Slot::Ready(handed, generation));
                state.stats.restored += 1;
            }
            Some(Err(reason)) => {
                tracing::debug!(%key, %reason, "restore-ahead: the driver refused a binary");
                state.slots.insert(*key, Slot::Host);
                state.stats.refused += 1;
            }
            None => {
                state.slots.remove(key);
                state.stats.over_limits += u64::from(over);
            }
        }
        shared.changed.notify_all();
        if over {
            // Stop here, counting what is left that the host has not asked for.
            let left = keys[index + 1..]
                .iter()
                .filter(|k| !state.slots.contains_key(*k))
                .count();
            state.stats.over_limits += left as u64;
            return generation;
        }
    }
    generation
}
