//! Per-priority metrics: enqueue-to-start delay samples and time run.

use std::collections::VecDeque;
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

#[derive(Debug, Default, Clone)]
pub(crate) struct Level {
    pub(crate) delays: VecDeque<Duration>,
    pub(crate) tasks: u64,
    pub(crate) time_run: Duration,
}

impl Level {
    pub(crate) fn record(&mut self, s: &TaskSample) {
        if !s.continuation {
            if self.delays.len() == MAX_SAMPLES {
                self.delays.pop_front();
            }
            self.delays.push_back(s.delay);
            self.tasks += 1;
        }
        self.time_run += s.run;
    }

    pub(crate) fn snapshot(&self) -> PriorityMetrics {
        let mut sorted: Vec<Duration> = self.delays.iter().copied().collect();
        sorted.sort_unstable();
        PriorityMetrics {
            tasks: self.tasks,
            time_run: self.time_run,
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
