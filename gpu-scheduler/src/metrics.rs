//! Per-priority metrics: enqueue-to-start delay samples and time run.

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
