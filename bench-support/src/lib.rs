//! Side-by-side benchmark support for the workspace's benches: medians of timed samples, a table
//! with the ratio, and `target/bench/<suite>.json` as
//! `{"metric": {"ours", "baseline", "ratio", "unit"}}`.
//!
//! Thread safety: plain functions over the caller's data. Errors writing the JSON are
//! printed, not fatal.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

/// One metric measured for ours and the baseline.
#[derive(Debug, Clone)]
pub struct Row {
    /// Metric name (a JSON key).
    pub metric: String,
    /// Unit of `ours` and `baseline`.
    pub unit: &'static str,
    /// Our value.
    pub ours: f64,
    /// The baseline's value.
    pub baseline: f64,
    /// What the ratio means, e.g. "ours/baseline time (goal <= 1.5)".
    pub ratio_note: &'static str,
}

impl Row {
    pub fn ratio(&self) -> f64 {
        self.ours / self.baseline
    }
}

/// Median over `samples` of the time per call of `f`, in nanoseconds; each sample runs `f`
/// enough times to last about `sample_ms`.
pub fn median_ns(samples: usize, sample_ms: f64, mut f: impl FnMut()) -> f64 {
    // Calibrate the iteration count once.
    let mut iters = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        if t.elapsed().as_secs_f64() * 1e3 >= sample_ms / 4.0 || iters >= 1 << 30 {
            iters =
                ((iters as f64) * sample_ms / (t.elapsed().as_secs_f64() * 1e3).max(1e-6)) as u64;
            break;
        }
        iters *= 2;
    }
    let iters = iters.max(1);
    let mut times: Vec<f64> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_secs_f64() * 1e9 / iters as f64
        })
        .collect();
    black_box(&mut times);
    median(&mut times)
}

/// The median of `v` (the mean of the two middle values when the count is even); sorts `v`.
/// `None` when `v` is empty.
pub fn try_median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// [`try_median`], with 0 for an empty slice; sorts `v`.
pub fn median(v: &mut [f64]) -> f64 {
    try_median(v).unwrap_or(0.0)
}

/// The `p` quantile of `v` (`p` in `0.0..=1.0`) by nearest rank: the sorted value at index
/// `round((len - 1) * p)`; sorts `v`. NaN when `v` is empty.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn bench_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("bench")
}

/// Prints the table and writes `target/bench/<suite>.json`.
pub fn report(suite: &str, rows: &[Row]) {
    println!("\n{suite}: ours vs baseline, same process, medians");
    println!(
        "{:<44} {:>14} {:>14} {:>8}  unit / meaning",
        "metric", "ours", "baseline", "ratio"
    );
    for r in rows {
        println!(
            "{:<44} {:>14.2} {:>14.2} {:>8.3}  {}; {}",
            r.metric,
            r.ours,
            r.baseline,
            r.ratio(),
            r.unit,
            r.ratio_note
        );
    }
    let body: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "  {:?}: {{\"ours\": {}, \"baseline\": {}, \"ratio\": {}, \"unit\": {:?}}}",
                r.metric,
                r.ours,
                r.baseline,
                r.ratio(),
                r.unit
            )
        })
        .collect();
    let dir = bench_dir();
    let path = dir.join(format!("{suite}.json"));
    let written = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&path, format!("{{\n{}\n}}\n", body.join(",\n"))));
    match written {
        Ok(()) => println!("wrote {}", path.display()),
        Err(e) => eprintln!("could not write {}: {e}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(try_median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(try_median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(try_median(&mut []), None);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }

    #[test]
    fn percentile_is_the_nearest_rank() {
        let mut v: Vec<f64> = (1..=101).rev().map(f64::from).collect();
        assert_eq!(percentile(&mut v, 0.0), 1.0);
        assert_eq!(percentile(&mut v, 0.5), 51.0);
        assert_eq!(percentile(&mut v, 0.99), 100.0);
        assert_eq!(percentile(&mut v, 1.0), 101.0);
        assert_eq!(percentile(&mut [2.0, 1.0], 0.5), 2.0);
        assert!(percentile(&mut [], 0.5).is_nan());
    }
}
