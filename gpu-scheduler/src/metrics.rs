//! Per-priority metrics (enqueue-to-start delay samples and time run) and per-stream totals.

use std::time::Duration;

use crate::Priority;

/// How many delay samples each priority keeps (the most recent ones).
pub const MAX_SAMPLES: usize = 65_536;

/// One task run, pushed to the metrics callback after the task returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSample {
    /// The stream's scheduled priority when the task ran.
    pub priority: Priority,
    /// Enqueue to first start (zero for a continuation).
    pub delay: Duration,
    /// Time the closure ran.
    pub run: Duration,
    /// Whether this was the continuation of a task that returned `ContinueLater`.
    pub continuation: bool,
}

/// One task run as the driver records it: nanosecond counts, turned into [`TaskSample`]
/// `Duration`s only for the callback.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunSample {
    pub(crate) priority: Priority,
    pub(crate) delay_ns: u64,
    pub(crate) run_ns: u64,
    pub(crate) continuation: bool,
}

impl RunSample {
    pub(crate) fn task_sample(&self) -> TaskSample {
        TaskSample {
            priority: self.priority,
            delay: std::time::Duration::from_nanos(self.delay_ns),
            run: std::time::Duration::from_nanos(self.run_ns),
            continuation: self.continuation,
        }
    }
}

/// One priority's running totals. Delay samples live in a ring of nanosecond counts (a store
/// and an add per task; sorting is left to the reader's snapshot).
#[derive(Debug, Default, Clone)]
pub(crate) struct Level {
    /// Delay samples in ns; once full, `next` is the oldest, overwritten next.
    delays_ns: Vec<u64>,
    next: usize,
    tasks: u64,
    continuations: u64,
    time_run_ns: u64,
}

impl Level {
    pub(crate) fn record(&mut self, s: &RunSample) {
        if !s.continuation {
            let d = s.delay_ns;
            if self.delays_ns.len() < MAX_SAMPLES {
                self.delays_ns.push(d);
            } else {
                self.delays_ns[self.next] = d;
                self.next = (self.next + 1) % MAX_SAMPLES;
            }
            self.tasks += 1;
        } else {
            self.continuations += 1;
        }
        self.time_run_ns = self.time_run_ns.saturating_add(s.run_ns);
    }

    pub(crate) fn snapshot(&self) -> PriorityMetrics {
        let mut sorted: Vec<Duration> = self
            .delays_ns
            .iter()
            .map(|ns| Duration::from_nanos(*ns))
            .collect();
        sorted.sort_unstable();
        PriorityMetrics {
            tasks: self.tasks,
            continuations: self.continuations,
            time_run: Duration::from_nanos(self.time_run_ns),
            delay_p50: percentile(&sorted, 50.0),
            delay_p99: percentile(&sorted, 99.0),
            delays: sorted,
        }
    }
}

/// Nearest-rank percentile of sorted samples; `None` when there are none.
pub fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Metrics of one priority level.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriorityMetrics {
    /// Tasks started (continuations not counted).
    pub tasks: u64,
    /// Continuation runs: the rest of a task that returned `ContinueLater`, run again.
    pub continuations: u64,
    /// Total time run by closures, continuations included.
    pub time_run: Duration,
    /// Median enqueue-to-start delay.
    pub delay_p50: Option<Duration>,
    /// 99th percentile enqueue-to-start delay.
    pub delay_p99: Option<Duration>,
    /// The kept delay samples, sorted.
    pub delays: Vec<Duration>,
}

/// Metrics of every priority, indexed by [`Priority::index`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Low, Normal, High, RealTime.
    pub levels: [PriorityMetrics; 4],
}

impl Metrics {
    /// The metrics of one priority.
    pub fn get(&self, p: Priority) -> &PriorityMetrics {
        &self.levels[p.index()]
    }
}

/// One stream's running totals: fixed size (no samples), kept in the stream and gone with it.
#[derive(Debug, Default, Clone)]
pub(crate) struct StreamCounters {
    tasks: u64,
    continuations: u64,
    wait_ns: u64,
    max_wait_ns: u64,
    run_ns: u64,
    tasks_at: [u64; 4],
    run_ns_at: [u64; 4],
}

impl StreamCounters {
    pub(crate) fn record(&mut self, s: &RunSample) {
        let at = s.priority.index();
        if s.continuation {
            self.continuations += 1;
        } else {
            self.tasks += 1;
            self.tasks_at[at] += 1;
            self.wait_ns = self.wait_ns.saturating_add(s.delay_ns);
            self.max_wait_ns = self.max_wait_ns.max(s.delay_ns);
        }
        self.run_ns = self.run_ns.saturating_add(s.run_ns);
        self.run_ns_at[at] = self.run_ns_at[at].saturating_add(s.run_ns);
    }

    pub(crate) fn snapshot(&self) -> StreamMetrics {
        StreamMetrics {
            tasks: self.tasks,
            continuations: self.continuations,
            time_waiting: Duration::from_nanos(self.wait_ns),
            max_wait: Duration::from_nanos(self.max_wait_ns),
            time_run: Duration::from_nanos(self.run_ns),
            tasks_at: self.tasks_at,
            time_run_at: self.run_ns_at.map(Duration::from_nanos),
        }
    }
}

/// Metrics of one stream: what its tasks did, whatever priority each ran at. A task counts
/// under the priority the stream was scheduled at when it ran (raised by inheritance, lowered
/// by time-slice downgrades), as in [`Metrics`]. Counted when the driver settles a batch: a
/// task running while its stream is removed is in neither the removed stream's report nor any
/// other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamMetrics {
    /// Tasks started (continuations not counted).
    pub tasks: u64,
    /// Continuation runs (the rest of a task that returned `ContinueLater`).
    pub continuations: u64,
    /// Sum of the tasks' enqueue-to-start delays.
    pub time_waiting: Duration,
    /// The longest enqueue-to-start delay.
    pub max_wait: Duration,
    /// Total time run by its closures, continuations included.
    pub time_run: Duration,
    /// Tasks started at each scheduled priority, indexed by [`Priority::index`].
    pub tasks_at: [u64; 4],
    /// Time run at each scheduled priority, indexed by [`Priority::index`].
    pub time_run_at: [Duration; 4],
}

impl StreamMetrics {
    /// Tasks started at priority `p`.
    pub fn tasks_at(&self, p: Priority) -> u64 {
        self.tasks_at[p.index()]
    }

    /// Mean enqueue-to-start delay; `None` before the first task.
    pub fn mean_wait(&self) -> Option<Duration> {
        (self.tasks > 0).then(|| {
            Duration::from_nanos((self.time_waiting.as_nanos() / u128::from(self.tasks)) as u64)
        })
    }
}
