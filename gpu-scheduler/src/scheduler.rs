//! The scheduler: streams, run queues, waits and priority inheritance.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use sync_points::{
    ClientError, ClientId, ClientState, OrderData, OrderError, SequenceId, SyncPointManager,
    SyncToken,
};

use crate::clock::{Clock, SystemClock};
use crate::metrics::{Level, Metrics, RunSample, StreamCounters, StreamMetrics, TaskSample};
/// Maps keyed by small ids: `foldhash` (a few ns a lookup against ~13 ns for SipHash; the keys
/// are ids this crate or the host assigns, so HashDoS resistance buys nothing here).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex, Ordering, OwnArc, OwnWeak, lock};

/// Stream priority, lowest first (so `Ord` compares urgency).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Background work (async raster).
    Low,
    /// Ordinary clients (renderers).
    Normal,
    /// Urgent clients (the browser's compositor).
    High,
    /// Presentation; never downgraded by time slices.
    RealTime,
}

impl Priority {
    /// All priorities, lowest first.
    pub const ALL: [Priority; 4] = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::RealTime,
    ];

    /// 0 (Low) to 3 (RealTime).
    pub fn index(self) -> usize {
        self as usize
    }

    /// One level lower, except RealTime (never downgraded) and Low (the floor).
    pub fn downgraded(self) -> Priority {
        match self {
            Priority::RealTime => Priority::RealTime,
            Priority::High => Priority::Normal,
            Priority::Normal | Priority::Low => Priority::Low,
        }
    }
}

/// Identifies a stream of this scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// What a task closure returns.
pub enum TaskResult {
    /// The task is complete.
    Done,
    /// The task yielded: this closure is the rest, run first in its stream with the same order
    /// number.
    ContinueLater(TaskFn),
}

impl std::fmt::Debug for TaskResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskResult::Done => f.write_str("Done"),
            TaskResult::ContinueLater(_) => f.write_str("ContinueLater(..)"),
        }
    }
}

impl TaskResult {
    /// `ContinueLater` with a boxed closure.
    pub fn continue_later(f: impl FnOnce(&TaskContext<'_>) -> TaskResult + Send + 'static) -> Self {
        TaskResult::ContinueLater(Box::new(f))
    }
}

/// A task body.
pub type TaskFn = Box<dyn FnOnce(&TaskContext<'_>) -> TaskResult + Send + 'static>;
/// A per-task start callback.
pub type StartFn = Box<dyn FnOnce() + Send + 'static>;
/// The metrics callback: called after every task, on the driving thread, with no lock held.
pub type MetricsCallback = OwnArc<dyn Fn(&TaskSample) + Send + Sync + 'static>;

/// A unit of work: a closure, the sync tokens it waits for, an optional start callback.
pub struct Task {
    f: TaskFn,
    tokens: Vec<SyncToken>,
    on_start: Option<StartFn>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("tokens", &self.tokens)
            .finish_non_exhaustive()
    }
}

impl Task {
    /// A task running `f`.
    pub fn new(f: impl FnOnce(&TaskContext<'_>) -> TaskResult + Send + 'static) -> Self {
        Task {
            f: Box::new(f),
            tokens: Vec::new(),
            on_start: None,
        }
    }

    /// A task running `f` to completion.
    pub fn simple(f: impl FnOnce() + Send + 'static) -> Self {
        Task::new(move |_| {
            f();
            TaskResult::Done
        })
    }

    /// Waits for these tokens before running (tasks behind it in the stream wait too).
    pub fn wait_for(mut self, tokens: impl IntoIterator<Item = SyncToken>) -> Self {
        self.tokens.extend(tokens);
        self
    }

    /// Runs `f` just before the task first starts.
    pub fn on_start(mut self, f: impl FnOnce() + Send + 'static) -> Self {
        self.on_start = Some(Box::new(f));
        self
    }
}

/// What a running task sees.
#[derive(Debug)]
pub struct TaskContext<'a> {
    scheduler: &'a Scheduler,
    stream: StreamId,
    order_num: u64,
}

impl<'a> TaskContext<'a> {
    /// The scheduler (a task may enqueue, enable streams, ... : no lock is held).
    pub fn scheduler(&self) -> &'a Scheduler {
        self.scheduler
    }

    /// The running stream.
    pub fn stream(&self) -> StreamId {
        self.stream
    }

    /// The task's order number.
    pub fn order_num(&self) -> u64 {
        self.order_num
    }

    /// [`Scheduler::should_yield`].
    pub fn should_yield(&self) -> bool {
        self.scheduler.should_yield()
    }
}

/// Errors of the scheduler API. Nothing changed when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerError {
    /// No such stream (never added, or removed).
    #[error("stream {0:?} does not exist")]
    UnknownStream(StreamId),
    /// The stream's sequence refused an order number.
    #[error(transparent)]
    Order(#[from] OrderError),
    /// A client could not be created.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The scheduler was shut down ([`Scheduler::shutdown`]): nothing is accepted any more.
    #[error("the scheduler is shut down")]
    ShutDown,
}

/// What [`Scheduler::remove_stream`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedStream {
    /// Pending tasks dropped without running: those in the stream and those of the driver's
    /// current batch it had not claimed yet. Not counted: a task the driver already started
    /// (it runs to the end), and the rest of a task that returned `ContinueLater` (it ran once).
    pub dropped_tasks: usize,
    /// The highest priority the stream was lending to a releaser (through pending waits) when
    /// it was removed; that loan ends with the removal.
    pub lent_priority: Option<Priority>,
    /// The stream's metrics, reported this once: they go with the stream.
    pub metrics: StreamMetrics,
}

/// Scheduler settings.
#[derive(Clone)]
pub struct SchedulerConfig {
    /// A stream's time slice (default 5 ms).
    pub time_slice: Duration,
    /// When higher priority arrives, the running stream still gets this much run time since it
    /// was picked (default 1 ms).
    pub granularity: Duration,
    /// The time source.
    pub clock: OwnArc<dyn Clock>,
    /// Called after every task with its sample.
    pub metrics_callback: Option<MetricsCallback>,
}

impl std::fmt::Debug for SchedulerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerConfig")
            .field("time_slice", &self.time_slice)
            .field("granularity", &self.granularity)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// A [`SchedulerConfig`] that cannot work ([`SchedulerConfig::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The time slice is shorter than the granularity: a stream preempted by higher priority
    /// would be promised more run time than its whole slice.
    #[error("time slice {time_slice:?} is shorter than the granularity {granularity:?}")]
    SliceShorterThanGranularity {
        /// [`SchedulerConfig::time_slice`].
        time_slice: Duration,
        /// [`SchedulerConfig::granularity`].
        granularity: Duration,
    },
}

impl SchedulerConfig {
    /// Checks the settings: the time slice must be at least the granularity.
    /// [`Scheduler::try_with_config`] refuses a config that fails this;
    /// [`Scheduler::with_config`] does not check (as before it existed).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.time_slice < self.granularity {
            return Err(ConfigError::SliceShorterThanGranularity {
                time_slice: self.time_slice,
                granularity: self.granularity,
            });
        }
        Ok(())
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            time_slice: Duration::from_millis(5),
            granularity: Duration::from_millis(1),
            clock: OwnArc::new(SystemClock),
            metrics_callback: None,
        }
    }
}

/// A task in a stream: 48 bytes, moved in and out of the driver's batches; what most tasks
/// lack (tokens, a start callback) is boxed.
struct QueuedTask {
    f: TaskFn,
    order_num: u64,
    /// Clock reading at enqueue (ns).
    enqueued_at: u64,
    extra: Option<Box<TaskExtra>>,
    continuation: bool,
}

struct TaskExtra {
    tokens: Vec<SyncToken>,
    on_start: Option<StartFn>,
}

impl QueuedTask {
    fn has_tokens(&self) -> bool {
        self.extra.as_ref().is_some_and(|e| !e.tokens.is_empty())
    }
}

struct Stream {
    base: Priority,
    /// Base, or lower after time-slice downgrades.
    own: Priority,
    /// `own` raised by inheritance.
    scheduled: Priority,
    enabled: bool,
    sequence: Arc<OrderData>,
    tasks: VecDeque<QueuedTask>,
    /// Where it is queued, if queued (see [`RunQueue`]).
    queued: Option<Slot>,
    /// Pending waits of the front task: wait id -> releasing stream (if a stream of ours).
    waits: HashMap<u64, Option<StreamId>>,
    /// The wait graph's edges out of this stream: each releaser in `waits` other than itself,
    /// with the number of waits it releases (several waits on one releaser are one loan).
    lends_to: Vec<(StreamId, u32)>,
    /// The edges into it: the streams whose `lends_to` names it.
    waiters: HashSet<StreamId>,
    /// The last lowering pass that put it in its recomputed set (see [`State::lower`]).
    mark: u64,
    /// The clients made with [`Scheduler::create_client`] on it: destroyed with it.
    clients: OwnedClients,
    /// Its metrics (fixed size; reported once by `remove_stream`).
    metrics: StreamCounters,
}

/// The clients a stream made with [`Scheduler::create_client`]. A client the host destroys
/// through the sync-point manager is pruned at a later `create_client` on the stream: pruning
/// runs when the list reaches `prune_at`, which is then set to twice what is left (at least
/// [`OwnedClients::MIN_PRUNE_AT`]), so a create costs amortized O(1) and the list holds at most
/// about twice the stream's peak of live clients, not every client it ever made.
///
/// Pruning goes by [`ClientState::is_destroyed`]: a destroyed client is no longer registered
/// (the manager unregisters a client before destroying it), so
/// `SyncPointManager::destroy_client_instance` would do nothing with it; a client the host made
/// again under the same id is another `ClientState`, never in this list.
#[derive(Default)]
struct OwnedClients {
    list: Vec<Arc<ClientState>>,
    prune_at: usize,
}

impl OwnedClients {
    const MIN_PRUNE_AT: usize = 8;

    fn push(&mut self, client: Arc<ClientState>) {
        if self.list.len() >= self.prune_at {
            self.list.retain(|c| !c.is_destroyed());
            self.prune_at = (2 * self.list.len()).max(Self::MIN_PRUNE_AT);
        }
        self.list.push(client);
    }

    /// Destroys those still registered (see `SyncPointManager::destroy_client_instance`).
    fn destroy(&self, sync: &SyncPointManager) {
        for client in &self.list {
            sync.destroy_client_instance(client);
        }
    }
}

/// The running stream and its pick time (clock ns); its slice length is `Scheduler::slice_ns`.
struct Running {
    id: StreamId,
    started: u64,
}

/// The batch word ([`Scheduler::batch`]): the number of tasks of the running stream's current
/// batch not yet claimed by the driver, and flags telling the driver to stop.
///
/// Protocol: the driver moves a batch of `k` tasks out of its stream under the state lock and
/// stores `k` (no flags). Before running each task it claims it with `fetch_sub(1)`; if the
/// value it replaced carries a flag, it runs nothing more of the batch. `remove_stream` and
/// `set_enabled(false)` of the running stream `fetch_or` their flag under the state lock: the
/// count they replace is exactly the number of tasks the driver will not run (the word is one
/// atomic location, so every claim is ordered before or after the flag, never both). AcqRel on
/// both sides: a claim that sees the flag also sees the state written before it, and the
/// remover's read of the count sees every claim ordered before its `fetch_or`.
const BATCH_REMOVED: u64 = 1 << 63;
const BATCH_DISABLED: u64 = 1 << 62;
const BATCH_COUNT: u64 = BATCH_DISABLED - 1;

#[derive(Default)]
struct State {
    streams: HashMap<StreamId, Stream>,
    queue: RunQueue,
    /// The newest order number this scheduler handed out (the run queue's back key).
    last_order: u64,
    /// Priority propagation's scratch space, counters and rule switches.
    prio: PrioWork,
    /// Stream of each stream's sequence: a token's releaser is the stream whose sequence its
    /// client releases on.
    by_sequence: HashMap<SequenceId, StreamId>,
    running: Option<Running>,
    metrics: [Level; 4],
    /// The driver's batch buffer and samples, kept here between turns to reuse their memory.
    batch: VecDeque<QueuedTask>,
    samples: Vec<RunSample>,
    /// The sequence of the stream the driver ran last, so that a stream running turn after
    /// turn costs no reference-count traffic.
    last_sequence: Option<(StreamId, Arc<OrderData>)>,
    /// Set by [`Scheduler::shutdown`]: nothing runs or is accepted any more.
    closed: bool,
}

/// In debug builds every priority change is checked against the from-scratch oracle
/// ([`State::wrong_priorities`]) while a scheduler has at most this many streams.
#[cfg(debug_assertions)]
const DEBUG_CHECK_MAX_STREAMS: usize = 64;

/// A run-queue key: (order number, ticket). A stream queued at the back of its level gets the
/// newest order number this scheduler handed out (`State::last_order`); a stream raised by
/// inheritance gets its front task's, so it sits where it would be had it joined the level when
/// that task was enqueued. The ticket (a counter) breaks ties in queueing order.
type QueueKey = (u64, u64);

/// Where a queued stream sits in the [`RunQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    level: Priority,
    key: QueueKey,
}

/// The run queue: one FIFO per level, each sorted by [`QueueKey`] (back keys never decrease;
/// an older key is inserted at its place, found by binary search). Removal is lazy: a stream
/// leaves by clearing `Stream::queued` and its entry goes stale, skipped when popped and
/// dropped when stale entries outnumber live ones, so moving, disabling or removing a queued
/// stream costs O(1) amortized instead of a scan of its level.
#[derive(Default)]
struct RunQueue {
    levels: [VecDeque<(QueueKey, StreamId)>; 4],
    /// Live entries per level.
    live: [usize; 4],
    ticket: u64,
}

impl RunQueue {
    /// [`State::queue_stream`] of `s` (stream `id`); `back` is `State::last_order`.
    #[inline]
    fn push(&mut self, id: StreamId, s: &mut Stream, back: u64, by_age: bool) {
        debug_assert!(s.queued.is_none(), "queued twice");
        let order = match s.tasks.front() {
            // Raised above its base by a waiter: by age. A stream downgraded by its time
            // slices and lifted back to its base is not "raised": it goes to the back, or the
            // slice penalty would turn into a queue jump.
            Some(t) if by_age && s.scheduled > s.base => t.order_num.min(back),
            _ => back,
        };
        self.ticket += 1;
        let key = (order, self.ticket);
        let level = s.scheduled;
        s.queued = Some(Slot { level, key });
        let q = &mut self.levels[level.index()];
        if q.back().is_none_or(|(k, _)| *k < key) {
            q.push_back((key, id));
        } else {
            insert_sorted(q, key, id);
        }
        self.live[level.index()] += 1;
    }
}

/// Inserts an entry older than a level's back at its place (a raised stream: the rare path).
#[cold]
#[inline(never)]
fn insert_sorted(q: &mut VecDeque<(QueueKey, StreamId)>, key: QueueKey, id: StreamId) {
    let at = q.partition_point(|(k, _)| *k < key);
    q.insert(at, (key, id));
}

/// Priority propagation's state.
struct PrioWork {
    /// Number of the last lowering pass (`Stream::mark`).
    epoch: u64,
    /// Streams whose scheduled priority may have changed since the last requeue.
    moved: Vec<StreamId>,
    /// Scratch buffers, kept to reuse their memory.
    work: Vec<StreamId>,
    set: Vec<StreamId>,
    edges: Vec<StreamId>,
    /// Priority changes processed, and streams looked at while propagating them (benches and
    /// tests: the cost of a change).
    changes: u64,
    visits: u64,
    /// Benches only ([`Scheduler::set_legacy_rules`]): recompute every stream on every change
    /// (as before issue 11).
    from_scratch: bool,
    /// The queue-order rule for raised streams ([`State::queue_stream`]).
    raised_by_age: bool,
}

impl Default for PrioWork {
    fn default() -> Self {
        PrioWork {
            epoch: 0,
            moved: Vec::new(),
            work: Vec::new(),
            set: Vec::new(),
            edges: Vec::new(),
            changes: 0,
            visits: 0,
            from_scratch: false,
            // Chosen by measurement: see the crate docs.
            raised_by_age: true,
        }
    }
}

impl State {
    /// Queues a runnable, unqueued stream at its scheduled level: at the back, or, when it is
    /// raised by inheritance above its own priority, by the age of its front task (see
    /// [`QueueKey`]).
    fn queue_stream(&mut self, id: StreamId) {
        if let Some(s) = self.streams.get_mut(&id) {
            self.queue
                .push(id, s, self.last_order, self.prio.raised_by_age);
        }
    }

    /// A stream left `slot` (its `queued` was cleared, or it was removed): its entry is stale.
    fn slot_freed(&mut self, slot: Slot) {
        let l = slot.level.index();
        debug_assert!(
            self.queue.live[l] > 0,
            "level {l} freed more slots than it counted"
        );
        // Saturating: a drifted count must not wrap in release builds (see `pop_queued`).
        self.queue.live[l] = self.queue.live[l].saturating_sub(1);
        let q = &mut self.queue.levels[l];
        if q.len() > self.queue.live[l].saturating_mul(2).saturating_add(32) {
            let streams = &self.streams;
            q.retain(|(key, id)| {
                streams.get(id).is_some_and(|s| {
                    s.queued
                        == Some(Slot {
                            level: slot.level,
                            key: *key,
                        })
                })
            });
        }
    }

    /// Takes the front stream of the highest level with one.
    #[inline(never)]
    fn pop_queued(&mut self) -> Option<StreamId> {
        for l in (0..4).rev() {
            if self.queue.live[l] == 0 {
                continue;
            }
            let level = Priority::ALL[l];
            while let Some((key, id)) = self.queue.levels[l].pop_front() {
                if let Some(s) = self.streams.get_mut(&id)
                    && s.queued == Some(Slot { level, key })
                {
                    s.queued = None;
                    self.queue.live[l] -= 1;
                    return Some(id);
                }
            }
            debug_assert!(false, "level {l} counted a live entry it does not hold");
            // A drifted count (a bug) must not stop the scheduler for good: the level holds
            // nothing live, so it counts none, and lower levels still run.
            self.queue.live[l] = 0;
        }
        None
    }

    /// Requeues the queued streams whose scheduled priority changed level.
    fn requeue_moved(&mut self) {
        let mut moved = std::mem::take(&mut self.prio.moved);
        // In stream order, as a deterministic tie-break between streams placed at once.
        moved.sort_unstable();
        moved.dedup();
        for id in moved.drain(..) {
            let Some(s) = self.streams.get_mut(&id) else {
                continue;
            };
            if let Some(slot) = s.queued
                && slot.level != s.scheduled
            {
                s.queued = None;
                self.slot_freed(slot);
                self.queue_stream(id);
            }
        }
        self.prio.moved = moved;
    }

    /// Records the front task's pending waits of `id` and adds their edges to the wait graph.
    fn add_waits(&mut self, id: StreamId, waits: HashMap<u64, Option<StreamId>>) {
        let mut releasers: Vec<StreamId> = waits.values().flatten().copied().collect();
        releasers.retain(|r| *r != id);
        releasers.sort_unstable();
        let mut lends_to: Vec<(StreamId, u32)> = Vec::with_capacity(releasers.len());
        for r in releasers {
            match lends_to.last_mut() {
                Some((last, n)) if *last == r => *n += 1,
                _ => lends_to.push((r, 1)),
            }
        }
        for (r, _) in &lends_to {
            if let Some(rs) = self.streams.get_mut(r) {
                rs.waiters.insert(id);
            }
        }
        let s = self.streams.get_mut(&id).expect("the caller's stream");
        debug_assert!(s.lends_to.is_empty(), "waits registered over pending ones");
        s.waits = waits;
        s.lends_to = lends_to;
    }

    /// One wait of `id` on `releaser` ended: drops the edge when it was the last one on that
    /// releaser; returns the loan that may have ended.
    fn end_wait(
        &mut self,
        id: StreamId,
        releaser: Option<StreamId>,
    ) -> Option<(StreamId, Priority)> {
        let r = releaser.filter(|r| *r != id)?;
        let s = self.streams.get_mut(&id)?;
        let i = s.lends_to.iter().position(|(x, _)| *x == r)?;
        s.lends_to[i].1 -= 1;
        if s.lends_to[i].1 > 0 {
            return None;
        }
        s.lends_to.swap_remove(i);
        let (enabled, lent) = (s.enabled, s.scheduled);
        let rs = self.streams.get_mut(&r)?;
        rs.waiters.remove(&id);
        enabled.then_some((r, lent))
    }

    /// The loans `id` makes (disabling it ends them).
    fn loans_of(&self, id: StreamId) -> Vec<(StreamId, Priority)> {
        self.streams.get(&id).map_or_else(Vec::new, |s| {
            s.lends_to
                .iter()
                .filter(|(r, _)| self.streams.contains_key(r))
                .map(|(r, _)| (*r, s.scheduled))
                .collect()
        })
    }

    /// `stream` (`id`) was taken out of `streams`: drops its edges from its releasers' waiter
    /// sets and returns the loans that ended. (Edges into it stay in its waiters' `lends_to`
    /// until their waits end, which the destruction of its sequence brings; they name no
    /// stream, so they count for nothing.)
    fn drop_edges(&mut self, id: StreamId, stream: &Stream) -> Vec<(StreamId, Priority)> {
        let mut lowered = Vec::new();
        for (r, _) in &stream.lends_to {
            if let Some(rs) = self.streams.get_mut(r) {
                rs.waiters.remove(&id);
                if stream.enabled {
                    lowered.push((*r, stream.scheduled));
                }
            }
        }
        lowered
    }

    /// Raising: pushes each stream's scheduled priority along its loans (out-edges, when it is
    /// enabled) to every stream below it, transitively. Each step strictly raises a stream,
    /// which can happen at most 3 times (4 levels): terminates on cycles, and visits only the
    /// streams it raises and their edges.
    fn raise(&mut self, work: &mut Vec<StreamId>) {
        let mut edges = std::mem::take(&mut self.prio.edges);
        while let Some(u) = work.pop() {
            self.prio.visits += 1;
            let Some(s) = self.streams.get(&u) else {
                continue;
            };
            if !s.enabled || s.lends_to.is_empty() {
                continue;
            }
            let p = s.scheduled;
            edges.extend(s.lends_to.iter().map(|(r, _)| *r));
            for r in edges.drain(..) {
                self.prio.visits += 1;
                if let Some(rs) = self.streams.get_mut(&r)
                    && rs.scheduled < p
                {
                    rs.scheduled = p;
                    self.prio.moved.push(r);
                    work.push(r);
                }
            }
        }
        self.prio.edges = edges;
    }

    /// Lowering: each `(v, q)` may have lost a loan of priority `q` (an edge into `v` removed,
    /// its waiter disabled or removed, or `v`'s own priority lowered from `q`). A stream above
    /// `q` keeps its priority: what lifts it above `q` does not pass through the lost loan. So
    /// only the set `S` of streams at exactly `q`, reachable from such a `v` (itself at `q`)
    /// along loans through streams at `q`, can drop. `S` is recomputed from the streams' own
    /// priorities and the loans into `S` from outside it (exact: unchanged), then raised within
    /// itself ([`State::raise`]) to the least fixed point. Rebuilding all of `S` from outside,
    /// rather than taking each stream's max over its current waiters, is what keeps a cycle
    /// from holding up a loan that ended. Cost: the streams of `S`, their edges in and out.
    fn lower(&mut self, seeds: &[(StreamId, Priority)]) {
        if seeds.is_empty() {
            return;
        }
        self.prio.epoch += 1;
        let epoch = self.prio.epoch;
        let mut work = std::mem::take(&mut self.prio.work);
        let mut set = std::mem::take(&mut self.prio.set);
        let mut edges = std::mem::take(&mut self.prio.edges);
        for &(v, q) in seeds {
            self.prio.visits += 1;
            if let Some(s) = self.streams.get_mut(&v)
                && s.scheduled == q
                && s.mark != epoch
            {
                s.mark = epoch;
                work.push(v);
            }
        }
        // S: streams at the same priority, along loans.
        while let Some(u) = work.pop() {
            set.push(u);
            let s = &self.streams[&u];
            if !s.enabled {
                continue;
            }
            let p = s.scheduled;
            edges.extend(s.lends_to.iter().map(|(r, _)| *r));
            for r in edges.drain(..) {
                self.prio.visits += 1;
                if let Some(rs) = self.streams.get_mut(&r)
                    && rs.scheduled == p
                    && rs.mark != epoch
                {
                    rs.mark = epoch;
                    work.push(r);
                }
            }
        }
        // Each stream of S from its own priority and the loans into S from outside.
        for &x in &set {
            let s = &self.streams[&x];
            let mut p = s.own;
            for w in &s.waiters {
                self.prio.visits += 1;
                if let Some(ws) = self.streams.get(w)
                    && ws.enabled
                    && ws.mark != epoch
                {
                    p = p.max(ws.scheduled);
                }
            }
            self.streams.get_mut(&x).expect("in S").scheduled = p;
        }
        self.prio.moved.extend_from_slice(&set);
        self.prio.edges = edges;
        self.prio.work = work;
        // Then within S, to the least fixed point.
        self.raise(&mut set);
        self.prio.set = set;
    }

    /// The from-scratch fixed point (the algorithm before issue 11, kept as the oracle of the
    /// incremental one and as the benches' baseline): every stream at its own priority, then
    /// every edge of an enabled waiter applied until nothing changes. O(streams + edges x
    /// rounds).
    fn priorities_from_scratch(&self) -> (HashMap<StreamId, Priority>, u64) {
        let mut visits = self.streams.len() as u64;
        let edges: Vec<(StreamId, StreamId)> = self
            .streams
            .iter()
            .filter(|(_, s)| s.enabled)
            .flat_map(|(w, s)| s.waits.values().flatten().map(move |r| (*w, *r)))
            .filter(|(w, r)| w != r)
            .collect();
        let mut sched: HashMap<StreamId, Priority> =
            self.streams.iter().map(|(id, s)| (*id, s.own)).collect();
        loop {
            let mut changed = false;
            visits += edges.len() as u64;
            for (w, r) in &edges {
                let (Some(&pw), Some(&pr)) = (sched.get(w), sched.get(r)) else {
                    continue;
                };
                if pr < pw {
                    sched.insert(*r, pw);
                    changed = true;
                }
            }
            if !changed {
                break (sched, visits);
            }
        }
    }

    /// Every stream set to the from-scratch fixed point (benches' baseline).
    fn recompute_from_scratch(&mut self) {
        let (sched, visits) = self.priorities_from_scratch();
        self.prio.visits += visits + self.streams.len() as u64;
        for (id, s) in self.streams.iter_mut() {
            if s.scheduled != sched[id] {
                s.scheduled = sched[id];
                self.prio.moved.push(*id);
            }
        }
    }

    /// The streams whose scheduled priority differs from the from-scratch oracle, as
    /// `(stream, scheduled, oracle)`; empty when propagation is exact.
    #[cfg(any(test, debug_assertions))]
    fn wrong_priorities(&self) -> Vec<(StreamId, Priority, Priority)> {
        let (sched, _) = self.priorities_from_scratch();
        let mut wrong: Vec<_> = self
            .streams
            .iter()
            .filter(|(id, s)| s.scheduled != sched[*id])
            .map(|(id, s)| (*id, s.scheduled, sched[id]))
            .collect();
        wrong.sort_unstable();
        wrong
    }
}

/// The GPU stream scheduler. See the crate docs.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use gpu_scheduler::{Priority, Scheduler, Task};
/// use sync_points::{ClientId, SyncPointManager, SyncToken};
///
/// let scheduler = Scheduler::new(Arc::new(SyncPointManager::new()));
/// let upload = scheduler.add_stream(Priority::Low);
/// let compositor = scheduler.add_stream(Priority::High);
/// let log = Arc::new(Mutex::new(Vec::new()));
///
/// // The upload stream's command buffer releases a token; the compositor's task, enqueued
/// // after the upload (a wait is only valid on work ordered before it), waits for it.
/// let buffer = ClientId { namespace: 0, command_buffer_id: 1 };
/// let client = scheduler.create_client(upload, buffer).unwrap();
/// let l = log.clone();
/// let upload_task = Task::simple(move || {
///     l.lock().unwrap().push("upload");
///     client.release(1).unwrap();
/// });
/// scheduler.enqueue(upload, upload_task).unwrap();
/// let l = log.clone();
/// let composite = Task::simple(move || l.lock().unwrap().push("composite"))
///     .wait_for([SyncToken::new(0, 1, 1)]);
/// scheduler.enqueue(compositor, composite).unwrap();
///
/// // The compositor's task is blocked on the token; the upload stream inherits its priority
/// // (High) while it lends it, runs, releases, and then the compositor's task runs.
/// assert_eq!(scheduler.run_until_idle(), 2);
/// assert_eq!(*log.lock().unwrap(), ["upload", "composite"]);
/// assert_eq!(scheduler.scheduled_priority(upload), Ok(Priority::Low));
///
/// // Removing the stream destroys the client the scheduler made for it.
/// scheduler.remove_stream(upload).unwrap();
/// assert!(scheduler.sync_points().client(buffer).is_none());
/// ```
pub struct Scheduler {
    me: OwnWeak<Scheduler>,
    sync: Arc<SyncPointManager>,
    config: SchedulerConfig,
    state: Mutex<State>,
    preempt: AtomicBool,
    /// The running stream's slice length in ns since its pick (cut by higher-priority work);
    /// read by the driver between tasks without the state lock. Relaxed: the value is advisory
    /// timing, and every store is also made under the state lock.
    slice_ns: AtomicU64,
    /// The batch word: see [`BATCH_REMOVED`].
    batch: AtomicU64,
    driving: AtomicBool,
    next_stream: AtomicU64,
    next_wait: AtomicU64,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Drop for Scheduler {
    /// Destroys the streams' sequences and the clients made on them: waits on them are retired
    /// (their callbacks find the scheduler gone and do nothing) and no fence or client
    /// outlives the scheduler.
    fn drop(&mut self) {
        let streams = std::mem::take(&mut lock(&self.state).streams);
        for s in streams.into_values() {
            self.sync.destroy_sequence(s.sequence.id());
            s.clients.destroy(&self.sync);
        }
    }
}

impl Scheduler {
    /// A scheduler over `sync` with default settings.
    pub fn new(sync: Arc<SyncPointManager>) -> OwnArc<Self> {
        Self::with_config(sync, SchedulerConfig::default())
    }

    /// A scheduler over `sync`, with `config` after [`SchedulerConfig::validate`]: an invalid
    /// config is an error and makes no scheduler.
    pub fn try_with_config(
        sync: Arc<SyncPointManager>,
        config: SchedulerConfig,
    ) -> Result<OwnArc<Self>, ConfigError> {
        config.validate()?;
        Ok(Self::with_config(sync, config))
    }

    /// A scheduler over `sync`. The config is not checked; [`Scheduler::try_with_config`] is
    /// the checked form.
    pub fn with_config(sync: Arc<SyncPointManager>, config: SchedulerConfig) -> OwnArc<Self> {
        OwnArc::new_cyclic(|me| Scheduler {
            me: me.clone(),
            sync,
            config,
            state: Mutex::new(State::default()),
            preempt: AtomicBool::new(false),
            slice_ns: AtomicU64::new(0),
            batch: AtomicU64::new(0),
            driving: AtomicBool::new(false),
            next_stream: AtomicU64::new(1),
            next_wait: AtomicU64::new(1),
        })
    }

    /// The sync-point manager.
    pub fn sync_points(&self) -> &Arc<SyncPointManager> {
        &self.sync
    }

    /// Adds an enabled, empty stream with its own sync-points sequence.
    pub fn add_stream(&self, priority: Priority) -> StreamId {
        // Relaxed: ids only need to be unique.
        let id = StreamId(self.next_stream.fetch_add(1, Ordering::Relaxed));
        let mut st = lock(&self.state);
        if st.closed {
            // After a shutdown the id names no stream: every call on it is `UnknownStream`.
            return id;
        }
        let sequence = self.sync.create_sequence();
        st.by_sequence.insert(sequence.id(), id);
        st.streams.insert(
            id,
            Stream {
                base: priority,
                own: priority,
                scheduled: priority,
                enabled: true,
                sequence,
                tasks: VecDeque::new(),
                queued: None,
                waits: HashMap::default(),
                lends_to: Vec::new(),
                waiters: HashSet::default(),
                mark: 0,
                clients: OwnedClients::default(),
                metrics: StreamCounters::default(),
            },
        );
        id
    }

    /// The stream's sync-points sequence.
    pub fn sequence(&self, id: StreamId) -> Result<Arc<OrderData>, SchedulerError> {
        let st = lock(&self.state);
        Ok(get(&st, id)?.sequence.clone())
    }

    /// Creates a sync-points client bound to the stream's sequence. Its tokens are "released by
    /// the stream": a stream waiting on them lends its priority to this one. (The same holds for
    /// a client made directly with `SyncPointManager::create_client` on [`Scheduler::sequence`]:
    /// the releaser of a token is found through its client's sequence.)
    ///
    /// The scheduler owns the client: it is destroyed (its pending waits end, its tokens read
    /// as released) when the stream is removed, at [`Scheduler::shutdown`] and when the
    /// scheduler is dropped — unless it was destroyed before through the sync-point manager (a
    /// client created since with the same id is not the scheduler's and is left alone). A
    /// client made directly with `SyncPointManager::create_client` stays the caller's. The
    /// scheduler lets go of a client destroyed through the manager at a later `create_client`
    /// on the stream: what a stream holds is bounded by its live clients, not by how many it
    /// ever made.
    pub fn create_client(
        &self,
        stream: StreamId,
        client: ClientId,
    ) -> Result<Arc<ClientState>, SchedulerError> {
        let mut st = lock(&self.state);
        let seq = get(&st, stream)?.sequence.id();
        // Lock order: scheduler state, then sync-points.
        let client = self.sync.create_client(client, seq)?;
        get_mut(&mut st, stream)?.clients.push(client.clone());
        Ok(client)
    }

    /// Removes a stream: its pending tasks are dropped (returned count), its sequence destroyed
    /// (waits on it are retired), the clients made on it with [`Scheduler::create_client`]
    /// destroyed (waits on their tokens end; the tokens read as released) and the priority it
    /// lent through its waits is taken back.
    pub fn remove_stream(&self, id: StreamId) -> Result<RemovedStream, SchedulerError> {
        let (stream, lent, unclaimed) = {
            let mut st = lock(&self.state);
            let stream = st
                .streams
                .remove(&id)
                .ok_or(SchedulerError::UnknownStream(id))?;
            // Tasks of the driver's batch it has not claimed are dropped too (see BATCH_REMOVED).
            let unclaimed = if st.running.as_ref().is_some_and(|r| r.id == id) {
                self.batch.fetch_or(BATCH_REMOVED, Ordering::AcqRel) & BATCH_COUNT
            } else {
                0
            };
            if let Some(slot) = stream.queued {
                st.slot_freed(slot);
            }
            st.by_sequence.remove(&stream.sequence.id());
            let lent = stream
                .waits
                .values()
                .any(|r| r.is_some())
                .then_some(stream.scheduled);
            let lowered = st.drop_edges(id, &stream);
            self.reprioritize(&mut st, &lowered, &[]);
            (stream, lent, unclaimed)
        };
        let dropped_tasks = stream.tasks.len() + unclaimed as usize;
        let metrics = stream.metrics.snapshot();
        // Outside the lock: this retires waits on the stream, whose callbacks take the lock,
        // and dropping the closures may run arbitrary code.
        self.sync.destroy_sequence(stream.sequence.id());
        stream.clients.destroy(&self.sync);
        drop(stream);
        if dropped_tasks > 0 {
            tracing::info!(
                target: "gpusvc::scheduler",
                stream = id.0,
                dropped_tasks,
                "stream removed with pending tasks; they were dropped without running"
            );
        }
        Ok(RemovedStream {
            dropped_tasks,
            lent_priority: lent,
            metrics,
        })
    }

    /// Enables or disables a stream. A disabled stream keeps its tasks and never runs; a
    /// running one stops after its current task.
    pub fn set_enabled(&self, id: StreamId, enabled: bool) -> Result<(), SchedulerError> {
        let mut st = lock(&self.state);
        let running = st.running.as_ref().is_some_and(|r| r.id == id);
        let s = get_mut(&mut st, id)?;
        let toggled = s.enabled != enabled;
        s.enabled = enabled;
        if toggled {
            // A disabled stream lends nothing: its loans end, and start again when enabled.
            let lowered = if enabled { Vec::new() } else { st.loans_of(id) };
            let raised = if enabled { vec![id] } else { Vec::new() };
            self.reprioritize(&mut st, &lowered, &raised);
        }
        if !enabled {
            if let Some(slot) = get_mut(&mut st, id)?.queued.take() {
                st.slot_freed(slot);
            }
            if running {
                // The driver stops after its current task (see BATCH_REMOVED).
                self.batch.fetch_or(BATCH_DISABLED, Ordering::AcqRel);
            }
        } else {
            if running {
                self.batch.fetch_and(!BATCH_DISABLED, Ordering::AcqRel);
            }
            self.activate(&mut st, id);
        }
        Ok(())
    }

    /// Sets the base priority (and resets any time-slice downgrade).
    pub fn set_base_priority(
        &self,
        id: StreamId,
        priority: Priority,
    ) -> Result<(), SchedulerError> {
        let mut st = lock(&self.state);
        get_mut(&mut st, id)?.base = priority;
        self.set_own(&mut st, id, priority);
        Ok(())
    }

    /// The base priority.
    pub fn base_priority(&self, id: StreamId) -> Result<Priority, SchedulerError> {
        Ok(get(&lock(&self.state), id)?.base)
    }

    /// The dynamic priority: base, downgraded by time slices, raised by inheritance.
    pub fn scheduled_priority(&self, id: StreamId) -> Result<Priority, SchedulerError> {
        Ok(get(&lock(&self.state), id)?.scheduled)
    }

    /// Pending tasks of a stream.
    pub fn pending_tasks(&self, id: StreamId) -> Result<usize, SchedulerError> {
        let st = lock(&self.state);
        let s = get(&st, id)?;
        let in_batch = if st.running.as_ref().is_some_and(|r| r.id == id) {
            // Relaxed: read under the lock the batch was stored under; claims since are racy
            // by nature (the count is a snapshot).
            let b = self.batch.load(Ordering::Relaxed);
            if b & BATCH_REMOVED == 0 {
                (b & BATCH_COUNT) as usize
            } else {
                0
            }
        } else {
            0
        };
        Ok(s.tasks.len() + in_batch)
    }

    /// Enqueues a task at the back of a stream (from any thread); returns its order number.
    pub fn enqueue(&self, id: StreamId, task: Task) -> Result<u64, SchedulerError> {
        self.try_enqueue(id, task).map_err(|(e, _)| e)
    }

    /// [`Scheduler::enqueue`], giving the task back with the error (for callers that own
    /// resources the task would release when dropped, e.g. a host's user data).
    pub fn try_enqueue(&self, id: StreamId, task: Task) -> Result<u64, (SchedulerError, Task)> {
        let now = self.config.clock.now_ns();
        let Task {
            f,
            tokens,
            on_start,
        } = task;
        let extra = (!tokens.is_empty() || on_start.is_some())
            .then(|| Box::new(TaskExtra { tokens, on_start }));
        let give_back = |e: SchedulerError, f: TaskFn, extra: Option<Box<TaskExtra>>| {
            let (tokens, on_start) = extra.map_or((Vec::new(), None), |x| (x.tokens, x.on_start));
            Err((
                e,
                Task {
                    f,
                    tokens,
                    on_start,
                },
            ))
        };
        let mut st = lock(&self.state);
        if st.closed {
            drop(st);
            return give_back(SchedulerError::ShutDown, f, extra);
        }
        let Some(s) = st.streams.get_mut(&id) else {
            drop(st);
            return give_back(SchedulerError::UnknownStream(id), f, extra);
        };
        // Under the state lock so that FIFO order and order-number order agree.
        let order_num = match s.sequence.generate() {
            Ok(n) => n,
            Err(e) => {
                drop(st);
                return give_back(e.into(), f, extra);
            }
        };
        s.tasks.push_back(QueuedTask {
            f,
            order_num,
            enqueued_at: now,
            extra,
            continuation: false,
        });
        st.last_order = order_num;
        self.activate(&mut st, id);
        Ok(order_num)
    }

    /// True when runnable work of higher priority than the running stream exists (the
    /// preemption flag). Work blocked on the running stream does not count.
    pub fn should_yield(&self) -> bool {
        // Acquire pairs with the Release store that raises it; the flag is advisory.
        self.preempt.load(Ordering::Acquire)
    }

    /// The metrics of one stream (`UnknownStream` once it is removed: its last metrics came
    /// with [`RemovedStream`]).
    pub fn stream_metrics(&self, id: StreamId) -> Result<StreamMetrics, SchedulerError> {
        let st = lock(&self.state);
        Ok(get(&st, id)?.metrics.snapshot())
    }

    /// The metrics of every live stream, by id.
    pub fn all_stream_metrics(&self) -> Vec<(StreamId, StreamMetrics)> {
        let st = lock(&self.state);
        let mut all: Vec<_> = st
            .streams
            .iter()
            .map(|(id, s)| (*id, s.metrics.snapshot()))
            .collect();
        all.sort_unstable_by_key(|(id, _)| *id);
        all
    }

    /// Per-priority metrics.
    pub fn metrics(&self) -> Metrics {
        let st = lock(&self.state);
        Metrics {
            levels: std::array::from_fn(|i| st.metrics[i].snapshot()),
        }
    }

    /// Not part of the API (benches and measurements): `from_scratch` recomputes every stream's
    /// priority on every change (the algorithm before issue 11: O(streams + waits) a change;
    /// the baseline of `benches/streams.rs`); `raised_to_back` queues a stream raised by
    /// inheritance at the back of its new level (the rule before issue 11; the "back" rows of
    /// `examples/raster_flood.rs`).
    #[doc(hidden)]
    pub fn set_legacy_rules(&self, from_scratch: bool, raised_to_back: bool) {
        let mut st = lock(&self.state);
        st.prio.from_scratch = from_scratch;
        st.prio.raised_by_age = !raised_to_back;
        // Exact whichever way it was computed so far.
        st.recompute_from_scratch();
        st.requeue_moved();
    }

    /// Not part of the API (benches and tests): `(changes, visits)`: the priority changes
    /// processed so far and the streams looked at while propagating them.
    #[doc(hidden)]
    pub fn priority_work(&self) -> (u64, u64) {
        let st = lock(&self.state);
        (st.prio.changes, st.prio.visits)
    }

    /// Not part of the API (tests): how many clients made with [`Scheduler::create_client`]
    /// the stream holds, live ones and destroyed ones not yet pruned.
    #[doc(hidden)]
    pub fn owned_client_slots(&self, id: StreamId) -> Result<usize, SchedulerError> {
        let st = lock(&self.state);
        Ok(get(&st, id)?.clients.list.len())
    }

    /// Shuts the scheduler down, from any thread and from inside a task or callback: every
    /// stream is removed (its pending tasks dropped without running, exactly once, outside the
    /// state lock; its sequence and its clients destroyed, so waits on them end), the driver
    /// stops after the task it is running (the rest of its turn, and the rest of a task that
    /// yields, are dropped too), and from then on `run_next` runs nothing, `enqueue` is
    /// [`SchedulerError::ShutDown`] and `add_stream` makes no stream. Returns the number of
    /// tasks dropped. A second call does nothing.
    pub fn shutdown(&self) -> usize {
        let ids: Vec<StreamId> = {
            let mut st = lock(&self.state);
            if st.closed {
                return 0;
            }
            st.closed = true;
            // The driver stops claiming at once, before any stream is removed (and before any
            // task's drop runs code that could let it go on).
            if st.running.is_some() {
                self.batch.fetch_or(BATCH_REMOVED, Ordering::AcqRel);
            }
            st.streams.keys().copied().collect()
        };
        ids.into_iter()
            .filter_map(|id| self.remove_stream(id).ok())
            .map(|r| r.dropped_tasks)
            .sum()
    }

    /// True once [`Scheduler::shutdown`] was called.
    pub fn is_shut_down(&self) -> bool {
        lock(&self.state).closed
    }

    /// Runs until nothing is runnable; returns how many task runs (continuations included)
    /// there were.
    pub fn run_until_idle(&self) -> usize {
        let mut n = 0;
        while let Some(k) = self.run_next() {
            n += k;
        }
        n
    }

    /// Picks the next stream and runs its turn: the tasks enqueued when it was picked, until
    /// one yields, blocks, the slice ends or preemption is raised. Returns the number of task
    /// runs, or `None` when nothing was runnable (or another thread is driving).
    pub fn run_next(&self) -> Option<usize> {
        if self.driving.swap(true, Ordering::Acquire) {
            return None;
        }
        // Cleared even if a task panics, so the scheduler stays drivable.
        let _guard = DrivingGuard(&self.driving);
        self.run_turn()
    }

    /// One turn. The state lock is taken once per batch: it records the previous batch's
    /// metrics, checks the slice and moves the next batch out of the stream (the front tasks
    /// whose waits are settled, up to the turn's budget). Between tasks of a batch the driver
    /// reads only atomics: the batch word (removal, disabling) and the slice length. The clock
    /// is read once per task: the end of one task is the slice check and start of the next.
    fn run_turn(&self) -> Option<usize> {
        let mut now = self.config.clock.now_ns();
        let slice_ns = nanos(self.config.time_slice);
        let mut st = lock(&self.state);
        if st.closed {
            return None;
        }
        let id = st.pop_queued()?;
        let started = now;
        st.running = Some(Running { id, started });
        self.slice_ns.store(slice_ns, Ordering::Relaxed);
        self.preempt.store(false, Ordering::Release);
        let last = st.last_sequence.take();
        let (budget, sequence) = {
            let s = &st.streams[&id];
            let sequence = match last {
                Some((last, seq)) if last == id => seq,
                _ => s.sequence.clone(),
            };
            (s.tasks.len(), sequence)
        };
        let mut batch = std::mem::take(&mut st.batch);
        let mut samples = std::mem::take(&mut st.samples);
        // Closures to drop once the lock is released (the rest of a removed stream's batch).
        let mut dropped = VecDeque::new();
        let mut ran = 0;
        loop {
            // Under the lock: settle the previous batch, then take the next one.
            let had_rest = !batch.is_empty();
            let word = self.settle_batch(&mut st, id, &mut batch, &mut samples, &mut dropped);
            if had_rest {
                break;
            }
            if word & (BATCH_REMOVED | BATCH_DISABLED) != 0 || ran >= budget {
                break;
            }
            if ran > 0 && now.saturating_sub(started) >= self.slice_ns.load(Ordering::Relaxed) {
                break;
            }
            match st.streams.get(&id) {
                Some(s) if s.enabled && !s.tasks.is_empty() => {}
                _ => break,
            }
            if !self.front_ready(&mut st, id) {
                break;
            }
            let s = st.streams.get_mut(&id).expect("checked above");
            let priority = s.scheduled;
            // The front's waits are settled; it and the token-free tasks behind it form the
            // batch.
            if s.tasks.len() <= budget - ran && s.tasks.iter().skip(1).all(|t| !t.has_tokens()) {
                // The whole stream: swap the buffers instead of moving tasks one by one.
                std::mem::swap(&mut batch, &mut s.tasks);
            } else {
                batch.extend(s.tasks.pop_front());
                while batch.len() < budget - ran && s.tasks.front().is_some_and(|t| !t.has_tokens())
                {
                    batch.extend(s.tasks.pop_front());
                }
            }
            // Relaxed: stored under the lock that `remove_stream` / `set_enabled` take before
            // their read-modify-writes.
            self.batch.store(batch.len() as u64, Ordering::Relaxed);
            drop(st);

            // A panic in a task or callback unwinds out of `run_next`, but first the turn is
            // settled: the task's order number finished, the unrun rest of the batch put back.
            let mut begun: Option<u64> = None;
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                while !batch.is_empty() {
                    // The first task of the turn always runs; later ones only within the slice.
                    if ran > 0
                        && now.saturating_sub(started) >= self.slice_ns.load(Ordering::Relaxed)
                    {
                        break;
                    }
                    if self.batch.fetch_sub(1, Ordering::AcqRel) & (BATCH_REMOVED | BATCH_DISABLED)
                        != 0
                    {
                        break;
                    }
                    let mut t = batch.pop_front().expect("checked above");
                    ran += 1;
                    let start = now;
                    // Set before anything that may panic (the start callback, a sync-points
                    // callback run by `begin_processing`): the order number is then finished by
                    // the panic path, never left begun.
                    begun = Some(t.order_num);
                    if let Some(cb) = t.extra.as_mut().and_then(|e| e.on_start.take()) {
                        cb();
                    }
                    // Errors mean the stream was removed meanwhile (sequence destroyed): run
                    // anyway, the task was claimed before the removal.
                    let _ = sequence.begin_processing(t.order_num);
                    let ctx = TaskContext {
                        scheduler: self,
                        stream: id,
                        order_num: t.order_num,
                    };
                    let rest = match (t.f)(&ctx) {
                        TaskResult::Done => {
                            begun = None;
                            let _ = sequence.finish_processing(t.order_num);
                            None
                        }
                        TaskResult::ContinueLater(f) => {
                            begun = None;
                            let _ = sequence.pause_processing();
                            Some(QueuedTask {
                                f,
                                order_num: t.order_num,
                                enqueued_at: t.enqueued_at,
                                extra: None,
                                continuation: true,
                            })
                        }
                    };
                    now = self.config.clock.now_ns();
                    // The rest of a yielded task goes first in its stream and ends the turn: it
                    // leads what is left of the batch — put there before the metrics callback,
                    // so a panic in it loses nothing.
                    let yielded = rest.is_some();
                    if let Some(rest) = rest {
                        batch.push_front(rest);
                    }
                    let sample = RunSample {
                        priority,
                        delay_ns: if t.continuation {
                            0
                        } else {
                            start.saturating_sub(t.enqueued_at)
                        },
                        run_ns: now.saturating_sub(start),
                        continuation: t.continuation,
                    };
                    if let Some(cb) = &self.config.metrics_callback {
                        cb(&sample.task_sample());
                    }
                    samples.push(sample);
                    if yielded {
                        break;
                    }
                }
            }));
            if let Err(panic) = outcome {
                if let Some(n) = begun {
                    // The number may not be begun yet (the start callback panicked): begin it
                    // (an error when it is begun already), then finish it, so the sequence goes
                    // on past it. A callback these run may panic too: the turn is settled
                    // anyway, and the first panic is the one that propagates.
                    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        let _ = sequence.begin_processing(n);
                        let _ = sequence.finish_processing(n);
                    }));
                }
                self.abandon_turn(id, &mut batch, &mut samples);
                std::panic::resume_unwind(panic);
            }
            st = lock(&self.state);
        }
        let running = st.running.take();
        if let (Some(r), Some(s)) = (running, st.streams.get_mut(&id)) {
            let own = if now.saturating_sub(r.started) > slice_ns {
                s.own.downgraded()
            } else {
                s.base
            };
            if own != s.own {
                self.set_own(&mut st, id, own);
            }
        }
        st.batch = batch;
        st.samples = samples;
        st.last_sequence = Some((id, sequence));
        self.activate(&mut st, id);
        drop(st);
        drop(dropped);
        Some(ran)
    }

    /// Under the state lock, after a batch: records its samples, clears the batch word
    /// (returned) and puts the tasks the driver did not run back at the front of their stream,
    /// in order, or into `dropped` when the stream was removed (`remove_stream` counted them).
    fn settle_batch(
        &self,
        st: &mut State,
        id: StreamId,
        batch: &mut VecDeque<QueuedTask>,
        samples: &mut Vec<RunSample>,
        dropped: &mut VecDeque<QueuedTask>,
    ) -> u64 {
        // The stream's own totals too, unless it was removed meanwhile (its report is out).
        if let Some(s) = st.streams.get_mut(&id) {
            for sample in samples.iter() {
                s.metrics.record(sample);
            }
        }
        for sample in samples.drain(..) {
            st.metrics[sample.priority.index()].record(&sample);
        }
        // Under the lock every writer of the stop flags holds, and after the driver's own
        // claims: a load and a store do what a swap would, without the read-modify-write.
        // Acquire pairs with the flag's AcqRel `fetch_or`.
        let word = self.batch.load(Ordering::Acquire);
        if word != 0 {
            self.batch.store(0, Ordering::Relaxed);
        }
        if !batch.is_empty() {
            match st.streams.get_mut(&id) {
                Some(s) if word & BATCH_REMOVED == 0 => {
                    while let Some(t) = batch.pop_back() {
                        s.tasks.push_front(t);
                    }
                }
                _ => dropped.extend(batch.drain(..)),
            }
        }
        word
    }

    /// Settles a turn a panic cut short (see [`Scheduler::settle_batch`]) and requeues its
    /// stream.
    fn abandon_turn(
        &self,
        id: StreamId,
        batch: &mut VecDeque<QueuedTask>,
        samples: &mut Vec<RunSample>,
    ) {
        let mut dropped = VecDeque::new();
        let mut st = lock(&self.state);
        self.settle_batch(&mut st, id, batch, samples, &mut dropped);
        st.running = None;
        self.activate(&mut st, id);
        drop(st);
        drop(dropped);
    }

    /// Whether the stream's front task may run; registers its waits when it first becomes the
    /// front. Called with the state lock held (lock order: state, then sync-points).
    fn front_ready(&self, st: &mut State, id: StreamId) -> bool {
        let Some(s) = st.streams.get_mut(&id) else {
            return false;
        };
        if !s.waits.is_empty() {
            return false;
        }
        let seq = s.sequence.id();
        let Some(front) = s.tasks.front_mut() else {
            return false;
        };
        let Some(extra) = front.extra.as_mut().filter(|e| !e.tokens.is_empty()) else {
            return true;
        };
        let tokens = sync_points::reduce(&std::mem::take(&mut extra.tokens));
        let order_num = front.order_num;
        let mut waits = HashMap::default();
        for t in tokens {
            if self.sync.is_released(&t) {
                continue;
            }
            // Relaxed: ids only need to be unique.
            let wid = self.next_wait.fetch_add(1, Ordering::Relaxed);
            let me = self.me.clone();
            // `wait` never runs the callback synchronously; when it runs later (on a release,
            // retirement or destruction) it takes the state lock with no sync-points lock held.
            if self.sync.wait(&t, seq, order_num, move || {
                if let Some(sched) = me.upgrade() {
                    sched.wait_done(id, wid);
                }
            }) {
                // Lock order: state, then the sync-points registry.
                let releaser = self
                    .sync
                    .client_sequence(t.client())
                    .and_then(|seq| st.by_sequence.get(&seq).copied());
                waits.insert(wid, releaser);
            }
        }
        if waits.is_empty() {
            return true;
        }
        st.add_waits(id, waits);
        self.reprioritize(st, &[], &[id]);
        false
    }

    /// A wait of `id`'s front task ended (released, retired or releaser destroyed).
    fn wait_done(&self, id: StreamId, wid: u64) {
        let mut st = lock(&self.state);
        let Some(s) = st.streams.get_mut(&id) else {
            return;
        };
        let Some(releaser) = s.waits.remove(&wid) else {
            return;
        };
        let lowered = st.end_wait(id, releaser);
        self.reprioritize(&mut st, lowered.as_slice(), &[]);
        self.activate(&mut st, id);
    }

    /// Queues the stream at its level ([`State::queue_stream`]) if it is runnable and not queued
    /// or running.
    fn activate(&self, st: &mut State, id: StreamId) {
        if st.running.as_ref().is_some_and(|r| r.id == id) {
            return;
        }
        let Some(s) = st.streams.get_mut(&id) else {
            return;
        };
        if !s.enabled || s.queued.is_some() {
            return;
        }
        let Some(front) = s.tasks.front() else {
            return;
        };
        if s.waits.is_empty() && !front.has_tokens() {
            // Nothing to wait for (what `front_ready` would find): queued without another
            // lookup.
            st.queue.push(id, s, st.last_order, st.prio.raised_by_age);
        } else if self.front_ready(st, id) {
            st.queue_stream(id);
        } else {
            return;
        }
        self.check_preempt(st);
    }

    /// Priority inheritance after a change of the wait graph or of a stream's own priority
    /// (see [`State::lower`] and [`State::raise`]): `lowered` are `(stream, q)` pairs where the
    /// stream may have lost a loan of priority `q`, `raised` the streams whose loans may have
    /// grown. Queued streams whose level changed are requeued ([`State::queue_stream`]); then the
    /// preemption check. With `PrioWork::from_scratch` (benches only) every stream is recomputed
    /// instead, as before issue 11.
    fn reprioritize(&self, st: &mut State, lowered: &[(StreamId, Priority)], raised: &[StreamId]) {
        st.prio.changes += 1;
        if st.prio.from_scratch {
            st.recompute_from_scratch();
        } else {
            st.lower(lowered);
            let mut work = std::mem::take(&mut st.prio.work);
            work.extend_from_slice(raised);
            st.raise(&mut work);
            st.prio.work = work;
        }
        st.requeue_moved();
        #[cfg(debug_assertions)]
        if st.streams.len() <= DEBUG_CHECK_MAX_STREAMS {
            let wrong = st.wrong_priorities();
            debug_assert!(wrong.is_empty(), "priority inheritance drifted: {wrong:?}");
        }
        self.check_preempt(st);
    }

    /// Sets a stream's own priority (time slices, `set_base_priority`) and propagates it.
    fn set_own(&self, st: &mut State, id: StreamId, own: Priority) {
        let Some(s) = st.streams.get_mut(&id) else {
            return;
        };
        let old = std::mem::replace(&mut s.own, own);
        if own > s.scheduled {
            s.scheduled = own;
            st.prio.moved.push(id);
        }
        if own < old {
            // It may have held itself (and what it lends to) at `old`.
            self.reprioritize(st, &[(id, old)], &[]);
        } else {
            self.reprioritize(st, &[], &[id]);
        }
    }

    /// Raises the preemption flag and cuts the running stream's slice (it keeps at least the
    /// granularity since it was picked) when a higher level than its own has runnable work.
    fn check_preempt(&self, st: &mut State) {
        let Some(running) = st.running.as_ref() else {
            return;
        };
        let Some(p) = st.streams.get(&running.id).map(|s| s.scheduled) else {
            return;
        };
        let higher = (p.index() + 1..4).any(|l| st.queue.live[l] > 0);
        if higher {
            let now = self.config.clock.now_ns();
            // The slice ends now, but no sooner than the granularity after the pick. Only
            // stored under the state lock, so the load and store cannot race another cut.
            let floor = nanos(self.config.granularity).max(now.saturating_sub(running.started));
            let slice = self.slice_ns.load(Ordering::Relaxed).min(floor);
            self.slice_ns.store(slice, Ordering::Relaxed);
            self.preempt.store(true, Ordering::Release);
        }
    }
}

struct DrivingGuard<'a>(&'a AtomicBool);

impl Drop for DrivingGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A duration in ns, saturating.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn get(st: &State, id: StreamId) -> Result<&Stream, SchedulerError> {
    st.streams.get(&id).ok_or(SchedulerError::UnknownStream(id))
}

fn get_mut(st: &mut State, id: StreamId) -> Result<&mut Stream, SchedulerError> {
    st.streams
        .get_mut(&id)
        .ok_or(SchedulerError::UnknownStream(id))
}

#[cfg(test)]
#[path = "priority_tests.rs"]
mod priority_tests;
