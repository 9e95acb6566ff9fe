//! The scheduler: streams, run queues, waits and priority inheritance.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use sync_points::{
    ClientError, ClientId, ClientState, OrderData, OrderError, SequenceId, SyncPointManager,
    SyncToken,
};

use crate::clock::{Clock, SystemClock};
use crate::metrics::{Level, Metrics, RunSample, TaskSample};
/// Maps keyed by small ids: `foldhash` (a few ns a lookup against ~13 ns for SipHash; the keys
/// are ids this crate or the host assigns, so HashDoS resistance buys nothing here).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

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
    /// The level it is queued at, if queued.
    queued: Option<Priority>,
    /// Pending waits of the front task: wait id -> releasing stream (if a stream of ours).
    waits: HashMap<u64, Option<StreamId>>,
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
    levels: [VecDeque<StreamId>; 4],
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

/// The GPU stream scheduler. See the crate docs.
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
    /// Destroys the streams' sequences: waits on them are retired (their callbacks find the
    /// scheduler gone and do nothing) and no fence outlives the scheduler.
    fn drop(&mut self) {
        let streams = std::mem::take(&mut lock(&self.state).streams);
        for s in streams.into_values() {
            self.sync.destroy_sequence(s.sequence.id());
        }
    }
}

impl Scheduler {
    /// A scheduler over `sync` with default settings.
    pub fn new(sync: Arc<SyncPointManager>) -> OwnArc<Self> {
        Self::with_config(sync, SchedulerConfig::default())
    }

    /// A scheduler over `sync`.
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
    pub fn create_client(
        &self,
        stream: StreamId,
        client: ClientId,
    ) -> Result<Arc<ClientState>, SchedulerError> {
        let st = lock(&self.state);
        let seq = get(&st, stream)?.sequence.id();
        // Lock order: scheduler state, then sync-points.
        Ok(self.sync.create_client(client, seq)?)
    }

    /// Removes a stream: its pending tasks are dropped (returned count), its sequence destroyed
    /// (waits on it are retired) and the priority it lent through its waits is taken back.
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
            if let Some(level) = stream.queued {
                st.levels[level.index()].retain(|s| *s != id);
            }
            st.by_sequence.remove(&stream.sequence.id());
            let lent = stream
                .waits
                .values()
                .any(|r| r.is_some())
                .then_some(stream.scheduled);
            self.recompute(&mut st);
            (stream, lent, unclaimed)
        };
        let dropped_tasks = stream.tasks.len() + unclaimed as usize;
        // Outside the lock: this retires waits on the stream, whose callbacks take the lock,
        // and dropping the closures may run arbitrary code.
        self.sync.destroy_sequence(stream.sequence.id());
        drop(stream);
        Ok(RemovedStream {
            dropped_tasks,
            lent_priority: lent,
        })
    }

    /// Enables or disables a stream. A disabled stream keeps its tasks and never runs; a
    /// running one stops after its current task.
    pub fn set_enabled(&self, id: StreamId, enabled: bool) -> Result<(), SchedulerError> {
        let mut st = lock(&self.state);
        let running = st.running.as_ref().is_some_and(|r| r.id == id);
        let s = get_mut(&mut st, id)?;
        s.enabled = enabled;
        if !enabled {
            if let Some(level) = s.queued.take() {
                st.levels[level.index()].retain(|x| *x != id);
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
        let s = get_mut(&mut st, id)?;
        s.base = priority;
        s.own = priority;
        self.recompute(&mut st);
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
        self.activate(&mut st, id);
        Ok(order_num)
    }

    /// True when runnable work of higher priority than the running stream exists (the
    /// preemption flag). Work blocked on the running stream does not count.
    pub fn should_yield(&self) -> bool {
        // Acquire pairs with the Release store that raises it; the flag is advisory.
        self.preempt.load(Ordering::Acquire)
    }

    /// Per-priority metrics.
    pub fn metrics(&self) -> Metrics {
        let st = lock(&self.state);
        Metrics {
            levels: std::array::from_fn(|i| st.metrics[i].snapshot()),
        }
    }

    /// Shuts the scheduler down, from any thread and from inside a task or callback: every
    /// stream is removed (its pending tasks dropped without running, exactly once, outside the
    /// state lock; its sequence destroyed, so waits on it are retired), the driver stops after
    /// the task it is running (the rest of its turn, and the rest of a task that yields, are
    /// dropped too), and from then on `run_next` runs nothing, `enqueue` is
    /// [`SchedulerError::ShutDown`] and `add_stream` makes no stream. Returns the number of
    /// tasks dropped. A second call does nothing.
    pub fn shutdown(&self) -> usize {
        let ids: Vec<StreamId> = {
            let mut st = lock(&self.state);
            if st.closed {
                return 0;
            }
            st.closed = true;
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
        let id = loop {
            let level = (0..4).rev().find(|l| !st.levels[*l].is_empty())?;
            let id = st.levels[level].pop_front()?;
            if let Some(s) = st.streams.get_mut(&id) {
                s.queued = None;
                break id;
            }
        };
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
                    if let Some(cb) = t.extra.as_mut().and_then(|e| e.on_start.take()) {
                        cb();
                    }
                    // Errors mean the stream was removed meanwhile (sequence destroyed): run
                    // anyway, the task was claimed before the removal.
                    let _ = sequence.begin_processing(t.order_num);
                    begun = Some(t.order_num);
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
                    if let Some(rest) = rest {
                        // The rest of a yielded task goes first in its stream and ends the turn:
                        // it leads what is left of the batch.
                        batch.push_front(rest);
                        break;
                    }
                }
            }));
            if let Err(panic) = outcome {
                if let Some(n) = begun {
                    let _ = sequence.finish_processing(n);
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
                s.own = own;
                self.recompute(&mut st);
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
        st.streams.get_mut(&id).expect("checked above").waits = waits;
        self.recompute(st);
        false
    }

    /// A wait of `id`'s front task ended (released, retired or releaser destroyed).
    fn wait_done(&self, id: StreamId, wid: u64) {
        let mut st = lock(&self.state);
        let Some(s) = st.streams.get_mut(&id) else {
            return;
        };
        if s.waits.remove(&wid).is_none() {
            return;
        }
        self.recompute(&mut st);
        self.activate(&mut st, id);
    }

    /// Queues the stream at the back of its level if it is runnable and not queued or running.
    fn activate(&self, st: &mut State, id: StreamId) {
        if st.running.as_ref().is_some_and(|r| r.id == id) {
            return;
        }
        match st.streams.get(&id) {
            Some(s) if s.enabled && s.queued.is_none() && !s.tasks.is_empty() => {}
            _ => return,
        }
        if !self.front_ready(st, id) {
            return;
        }
        let s = st.streams.get_mut(&id).expect("checked above");
        s.queued = Some(s.scheduled);
        let level = s.scheduled;
        st.levels[level.index()].push_back(id);
        self.check_preempt(st);
    }

    /// Priority inheritance: every stream's scheduled priority is its own, raised to the
    /// scheduled priority of every enabled stream waiting on it, transitively. A fixed point of a
    /// monotone raise over 4 levels: terminates on cycles. Queued streams move to their new
    /// level (at the back).
    fn recompute(&self, st: &mut State) {
        let edges: Vec<(StreamId, StreamId)> = st
            .streams
            .iter()
            .filter(|(_, s)| s.enabled)
            .flat_map(|(w, s)| s.waits.values().flatten().map(move |r| (*w, *r)))
            .filter(|(w, r)| w != r)
            .collect();
        // No stream lends priority (the common case): every stream is at its own priority.
        let sched = (!edges.is_empty()).then(|| {
            let mut sched: HashMap<StreamId, Priority> =
                st.streams.iter().map(|(id, s)| (*id, s.own)).collect();
            loop {
                let mut changed = false;
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
                    break sched;
                }
            }
        });
        let mut moved = Vec::new();
        for (id, s) in st.streams.iter_mut() {
            s.scheduled = sched.as_ref().map_or(s.own, |m| m[id]);
            if let Some(level) = s.queued
                && level != s.scheduled
            {
                moved.push((*id, level, s.scheduled));
                s.queued = Some(s.scheduled);
            }
        }
        moved.sort();
        for (id, from, to) in moved {
            st.levels[from.index()].retain(|x| *x != id);
            st.levels[to.index()].push_back(id);
        }
        self.check_preempt(st);
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
        let higher = (p.index() + 1..4).any(|l| !st.levels[l].is_empty());
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
