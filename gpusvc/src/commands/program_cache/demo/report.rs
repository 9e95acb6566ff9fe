//! The table and the sentences `gpusvc program-cache demo` prints. Every claim about the cache
//! (programs served by it, loaded from disk, a speed-up that is the cache's) is read from the
//! counters of the pass it is about; where they do not support a claim the sentence says what
//! they show instead.

use program_cache::{Counters, DiskCounters};

use super::LOAD_TIMEOUT;
use super::run_cache::{DiskSetting, RunCache};

/// What one pass over the corpus did. Every claim the demo prints about the cache is read from
/// `counters` (the cache's own counters over the pass) and `disk`, never assumed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Pass {
    pub(crate) programs: usize,
    pub(crate) linked: usize,
    pub(crate) compile_failures: usize,
    pub(crate) link_failures: usize,
    /// Compile + link time of each linked program, in ms.
    pub(crate) linked_ms: Vec<f64>,
    /// Of those, the programs restored from a cached binary ...
    pub(crate) from_cache_ms: Vec<f64>,
    /// ... and the programs compiled and linked on the driver.
    pub(crate) compiled_ms: Vec<f64>,
    /// Compile + link time of every program tried, in ms.
    pub(crate) total_ms: f64,
    /// The pass's wall time, in ms: `total_ms` plus what the host loop does between programs
    /// (letting shaders go, keeping the linked program).
    pub(crate) wall_ms: f64,
    /// Of `total_ms`: programs with a shader that failed to compile; programs that failed to
    /// link.
    pub(crate) compile_failed_ms: f64,
    pub(crate) link_failed_ms: f64,
    /// Programs whose vertex shader failed to compile (their fragment shader is compiled too).
    pub(crate) vertex_failures: usize,
    /// Programs in the cache when the pass began.
    pub(crate) entries_before: usize,
    /// The cache's stored bytes and entries after the pass.
    pub(crate) bytes_cached: usize,
    pub(crate) entries_cached: usize,
    /// The cache's counters over the pass (after - before).
    pub(crate) counters: Counters,
    /// Bytes of the binaries the pass saved into the cache (the binary-size histogram's sum).
    pub(crate) saved_binary_bytes: u64,
    /// What the disk layer did during the pass (the cold pass includes the startup load), once
    /// its queued writes were done; `None` without a usable disk cache.
    pub(crate) disk: Option<DiskCounters>,
}

impl Pass {
    /// Programs restored from a cached binary the driver accepted: binary hits minus the cached
    /// binaries the driver refused.
    pub(crate) fn served(&self) -> u64 {
        self.counters
            .hits
            .saturating_sub(self.counters.driver_rejections)
    }
}

/// `after - before`, counter by counter.
pub(super) fn counters_delta(after: Counters, before: Counters) -> Counters {
    Counters {
        hits: after.hits - before.hits,
        misses: after.misses - before.misses,
        evictions: after.evictions - before.evictions,
        driver_rejections: after.driver_rejections - before.driver_rejections,
        saves: after.saves - before.saves,
        rejected_saves: after.rejected_saves - before.rejected_saves,
        status_hits: after.status_hits - before.status_hits,
        status_misses: after.status_misses - before.status_misses,
        failure_hits: after.failure_hits - before.failure_hits,
    }
}

/// `after - before`, counter by counter.
pub(super) fn disk_delta(after: DiskCounters, before: DiskCounters) -> DiskCounters {
    DiskCounters {
        writes: after.writes - before.writes,
        bytes_written: after.bytes_written - before.bytes_written,
        already_present: after.already_present - before.already_present,
        dropped_writes: after.dropped_writes - before.dropped_writes,
        write_errors: after.write_errors - before.write_errors,
        loaded: after.loaded - before.loaded,
        rejected_entries: after.rejected_entries - before.rejected_entries,
        evictions: after.evictions - before.evictions,
        store_drops: after.store_drops - before.store_drops,
        lock_busy: after.lock_busy - before.lock_busy,
        oversized: after.oversized - before.oversized,
        space_retries: after.space_retries - before.space_retries,
        stores_removed: after.stores_removed - before.stores_removed,
        odd_removed: after.odd_removed - before.odd_removed,
        recreated: after.recreated - before.recreated,
        use_records: after.use_records - before.use_records,
        compactions: after.compactions - before.compactions,
        record_errors: after.record_errors - before.record_errors,
        loaded_from_pack: after.loaded_from_pack - before.loaded_from_pack,
        packs_written: after.packs_written - before.packs_written,
    }
}

/// The median of `values` (`None` when there are none).
pub(super) fn median(values: &[f64]) -> Option<f64> {
    bench_support::try_median(&mut values.to_vec())
}

pub(super) fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.3} ms"))
}

/// A byte count for people: `64 MiB`, `283.1 KiB`, `512 bytes`.
pub(super) fn human_bytes(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    let scaled = |unit: u64, name: &str| {
        if bytes.is_multiple_of(unit) {
            format!("{} {name}", bytes / unit)
        } else {
            format!("{:.1} {name}", bytes as f64 / unit as f64)
        }
    };
    match bytes {
        b if b >= MIB => scaled(MIB, "MiB"),
        b if b >= KIB => scaled(KIB, "KiB"),
        1 => "1 byte".into(),
        b => format!("{b} bytes"),
    }
}

/// The table `gpusvc demo` prints: one column per pass. The cache rows are the cache's
/// counters over each pass.
pub(super) fn render_table(cold: &Pass, warm: &Pass) -> String {
    let both = |f: &dyn Fn(&Pass) -> String| (f(cold), f(warm));
    let mut rows: Vec<(&str, (String, String))> = vec![
        ("programs", both(&|p| p.programs.to_string())),
        ("linked", both(&|p| p.linked.to_string())),
        ("cache hits", both(&|p| p.served().to_string())),
        ("cache misses", both(&|p| p.counters.misses.to_string())),
        (
            "binary rejections",
            both(&|p| p.counters.driver_rejections.to_string()),
        ),
        (
            "compile failures",
            both(&|p| p.compile_failures.to_string()),
        ),
        ("link failures", both(&|p| p.link_failures.to_string())),
        (
            "failures from cache",
            both(&|p| p.counters.failure_hits.to_string()),
        ),
        (
            "driver compiles",
            both(&|p| p.counters.status_misses.to_string()),
        ),
        ("median compile+link", both(&|p| ms(median(&p.linked_ms)))),
        ("total compile+link", both(&|p| ms(Some(p.total_ms)))),
        ("programs saved", both(&|p| p.counters.saves.to_string())),
        (
            "saves refused",
            both(&|p| p.counters.rejected_saves.to_string()),
        ),
        ("evictions", both(&|p| p.counters.evictions.to_string())),
        ("bytes cached", both(&|p| p.bytes_cached.to_string())),
        ("programs cached", both(&|p| p.entries_cached.to_string())),
    ];
    if let (Some(c), Some(w)) = (cold.disk, warm.disk) {
        rows.extend([
            (
                "loaded from disk",
                (c.loaded.to_string(), w.loaded.to_string()),
            ),
            ("disk writes", (c.writes.to_string(), w.writes.to_string())),
            (
                "disk bytes written",
                (c.bytes_written.to_string(), w.bytes_written.to_string()),
            ),
        ]);
    }
    let mut out = format!("{:<22}{:>14}{:>14}\n", "", "cold", "warm");
    for (label, (c, w)) in rows {
        out.push_str(&format!("{label:<22}{c:>14}{w:>14}\n"));
    }
    out
}

/// What the summary needs besides the two passes.
#[derive(Debug, Clone, Copy)]
pub(super) struct RunFacts {
    /// The cache's byte budget.
    pub(crate) budget_bytes: usize,
    /// Open + startup load, in ms.
    pub(crate) load_ms: f64,
}

/// Why programs the cold pass linked were not restored from the cache, as far as the counters of
/// both passes show it.
pub(super) fn miss_reasons(cold: &Pass, warm: &Pass, facts: &RunFacts) -> String {
    let budget = human_bytes(facts.budget_bytes as u64);
    let refused = cold.counters.rejected_saves + warm.counters.rejected_saves;
    let evicted = cold.counters.evictions + warm.counters.evictions;
    let rejected = cold.counters.driver_rejections + warm.counters.driver_rejections;
    let mut reasons = Vec::new();
    if refused > 0 {
        reasons.push(format!(
            "{refused} saves refused over both passes: budget {budget} smaller than those \
             programs"
        ));
    }
    if evicted > 0 && rejected == 0 {
        reasons.push(format!(
            "budget {budget} too small for the cold pass's {} of binaries: {evicted} evictions \
             over both passes",
            human_bytes(cold.saved_binary_bytes)
        ));
    } else if evicted > 0 {
        reasons.push(format!(
            "{evicted} evictions over both passes (for space in the {budget} budget or after a \
             refusal)"
        ));
    }
    if rejected > 0 {
        reasons.push(format!("the driver refused {rejected} cached binaries"));
    }
    if reasons.is_empty() {
        "the counters show no refused save, eviction or driver refusal".into()
    } else {
        reasons.join("; ")
    }
}

pub(super) fn ratio(cold: Option<f64>, warm: Option<f64>) -> Option<f64> {
    match (cold, warm) {
        (Some(c), Some(w)) if w > 0.0 => Some(c / w),
        _ => None,
    }
}

/// `median 15.9x, total 31.7x faster` (cold time / warm time), or `cold/warm time ratio: median
/// 0.9x, total 1.1x` when a ratio is below 1; only the total when a pass linked nothing, only
/// the median without `with_total`.
pub(super) fn speedups(cold: &Pass, warm: &Pass, with_total: bool) -> String {
    let total = ratio(Some(cold.total_ms), Some(warm.total_ms)).filter(|_| with_total);
    let median = ratio(median(&cold.linked_ms), median(&warm.linked_ms));
    let x = |r: Option<f64>| r.map_or_else(|| "-".into(), |r| format!("{r:.1}x"));
    let ratios = match (median, with_total) {
        (Some(_), true) => format!("median {}, total {}", x(median), x(total)),
        (Some(_), false) => format!("median {}", x(median)),
        (None, _) => format!("total {}", x(total)),
    };
    if [median, total].iter().flatten().all(|&r| r >= 1.0) {
        format!("{ratios} faster")
    } else {
        format!("cold/warm time ratio: {ratios}")
    }
}

pub(super) const TIMES_NOTE: &str = "Times are compile+link (+ reflection) only: the driver's first-draw JIT \
                          is not included. Medians are over linked programs.";

/// The sentences printed after the table. Each claim about the cache (served by it, loaded from
/// disk, faster because of it) is read from the passes' counters; where the counters do not
/// support a claim, the sentence says what they show instead.
pub(super) fn summary(cold: &Pass, warm: &Pass, facts: &RunFacts) -> Vec<String> {
    let mut lines = Vec::new();
    let (cold_hits, warm_hits) = (cold.served(), warm.served());
    let loaded = cold.disk.map_or(0, |d| d.loaded);

    // The cold pass.
    if cold_hits > 0 && loaded > 0 && cold.entries_before as u64 == loaded {
        lines.push(format!(
            "warm start: {cold_hits} of the cold pass's {} programs were cache hits; before the \
             pass the cache held only the {loaded} programs loaded from the disk cache at startup \
             (in {:.1} ms).",
            cold.programs, facts.load_ms
        ));
    } else if cold_hits > 0 {
        lines.push(format!(
            "cold pass: {cold_hits} of {} programs from the cache, which held {} programs when \
             the pass began.",
            cold.programs, cold.entries_before
        ));
    }

    // The warm pass, and what its time difference is due to.
    let warm_compiled = warm.linked as u64 - warm_hits.min(warm.linked as u64);
    if warm_hits == 0 {
        lines.push(format!(
            "warm pass: 0 of {} programs from the cache ({}); its time difference from the cold \
             pass ({}) is not the cache's: its {} cache misses were compiled and linked \
             on the driver again.",
            warm.programs,
            miss_reasons(cold, warm, facts),
            speedups(cold, warm, true),
            warm.counters.misses
        ));
    } else if warm_compiled == 0 && (cold_hits as usize) < cold.linked {
        // Every program the cold pass compiled was restored from the cache warm.
        let cold_from_cache = match cold_hits {
            0 => "none of the cold ones did".to_string(),
            n => format!("{n} of the cold ones did"),
        };
        // The totals are the cache's only when the warm pass asked the driver nothing: programs
        // the driver refuses count in them, and a shader compiled warm is not the cache's.
        // A binary miss is a link on the driver (and the compiles of its deferred shaders,
        // which `status_misses` does not count).
        let compiles = warm.counters.status_misses;
        let links = warm.counters.misses;
        let asked = compiles + links;
        let totals = match ratio(Some(cold.total_ms), Some(warm.total_ms)) {
            Some(t) if asked > 0 => format!(
                " The totals' ratio ({t:.1}x) is not all the cache's: the warm pass still asked \
                 the driver for {compiles} shader compiles and {links} links."
            ),
            _ => String::new(),
        };
        lines.push(format!(
            "warm vs cold: {}, the cache's doing: all {warm_hits} linked warm programs came from \
             the cache (binaries the driver accepted) and {cold_from_cache}.{totals} {TIMES_NOTE}",
            speedups(cold, warm, asked == 0)
        ));
    } else if warm_compiled == 0 {
        lines.push(format!(
            "warm pass: all {warm_hits} programs from the cache, as in the cold pass: both passes \
             were served by the cache, so their times compare two cached passes; for a cold pass \
             use a new --cache-dir, --no-disk-cache, or `gpusvc program-cache clear`."
        ));
    } else {
        let cold_part = match cold_hits {
            0 => String::new(),
            n => format!(" (the cold pass: {n})"),
        };
        lines.push(format!(
            "warm pass: {warm_hits} of {} programs from the cache{cold_part}, {warm_compiled} \
             compiled again ({}); median compile+link {} from the cache vs {} compiled: the \
             passes' difference ({}) is only partly the cache's. {TIMES_NOTE}",
            warm.programs,
            miss_reasons(cold, warm, facts),
            ms(median(&warm.from_cache_ms)),
            ms(median(&warm.compiled_ms)),
            speedups(cold, warm, true)
        ));
    }

    if let (Some(c), Some(w)) = (cold.disk, warm.disk) {
        let (writes, bytes) = (c.writes + w.writes, c.bytes_written + w.bytes_written);
        lines.push(format!(
            "disk cache: this run wrote {writes} programs ({}) to disk.",
            human_bytes(bytes)
        ));
        let (dropped, failed) = (
            c.dropped_writes + w.dropped_writes,
            c.write_errors + w.write_errors,
        );
        if dropped + failed > 0 {
            lines.push(format!(
                "note: {dropped} disk writes were dropped (writer queue full) and {failed} \
                 failed; those programs are not on disk for the next run."
            ));
        }
        let records = c.record_errors + w.record_errors;
        if records > 0 {
            lines.push(format!(
                "note: {records} appends to the store's side files (last uses, hot marks, \
                 compiled shaders) failed; those records are lost, the programs are not."
            ));
        }
    }
    let refused = warm.compile_failures + warm.link_failures;
    if refused > 0 {
        let known = warm.counters.failure_hits;
        let answered = match known {
            0 => "no compile or link was answered from the cache's failure records".to_string(),
            n => format!(
                "the cache's failure records answered {n} compiles and links (with the driver's \
                 logs) that the driver refused before"
            ),
        };
        lines.push(format!(
            "totals include the {refused} programs the driver refuses; in the warm pass \
             {answered}."
        ));
    }
    lines
}

/// The line describing the disk cache of a run.
pub(super) fn disk_line(run: &RunCache) -> String {
    let dir = match &run.setting {
        DiskSetting::Off => {
            return "disk cache: off (--no-disk-cache); every run starts cold".into();
        }
        DiskSetting::NoDefaultFolder => {
            return "disk cache: off (no XDG_CACHE_HOME or HOME, see the warning on stderr); \
                    every run starts cold"
                .into();
        }
        DiskSetting::Folder { dir, .. } => dir,
    };
    if run.fallback.is_some() {
        return format!(
            "disk cache: off: the default folder {} cannot be used (see the warning on stderr); \
             every run starts cold",
            dir.display()
        );
    }
    let store = run.store.as_deref().unwrap_or(dir);
    match run.load {
        Some(r) => {
            let mut line = format!(
                "disk cache: {}: {} programs loaded at startup in {:.1} ms, in the background \
                 ({:.1} ms of it waited for)",
                store.display(),
                r.loaded,
                run.load_ms,
                run.wait_ms
            );
            if r.rejected > 0 {
                line.push_str(&format!(
                    "; {} damaged or foreign entries rejected",
                    r.rejected
                ));
            }
            if r.skipped > 0 {
                line.push_str(&format!(
                    "; {} left on disk (memory budget full)",
                    r.skipped
                ));
            }
            if r.loaded == 0 && r.rejected == 0 && r.skipped == 0 {
                line.push_str(" (it was empty)");
            }
            line
        }
        None => format!(
            "disk cache: {}: the startup load did not finish in {} s; starting without it",
            store.display(),
            LOAD_TIMEOUT.as_secs()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    /// A pass over 3 programs (1 fails to compile, 2 link) with these cache counters.
    fn pass_with(counters: Counters, linked_ms: Vec<f64>, total_ms: f64) -> Pass {
        Pass {
            programs: 3,
            linked: 2,
            compile_failures: 1,
            linked_ms,
            total_ms,
            bytes_cached: 9000,
            entries_cached: 2,
            counters,
            ..Pass::default()
        }
    }

    fn cold_misses() -> Pass {
        pass_with(
            Counters {
                misses: 2,
                saves: 2,
                ..Counters::default()
            },
            vec![2.0, 4.0],
            7.5,
        )
    }

    #[test]
    fn table_has_one_row_per_metric_and_both_passes() {
        let cold = Pass {
            saved_binary_bytes: 8000,
            disk: Some(DiskCounters {
                loaded: 1,
                writes: 1,
                bytes_written: 700,
                ..DiskCounters::default()
            }),
            ..cold_misses()
        };
        let warm = Pass {
            counters: Counters {
                hits: 2,
                failure_hits: 1,
                ..Counters::default()
            },
            linked_ms: vec![0.25, 0.5],
            total_ms: 1.25,
            disk: Some(DiskCounters::default()),
            ..cold.clone()
        };
        let cold = Pass {
            counters: Counters {
                status_misses: 5,
                ..cold.counters
            },
            ..cold
        };
        let table = render_table(&cold, &warm);
        let row = |label: &str| -> Vec<String> {
            let line = table
                .lines()
                .find(|l| l.strip_prefix(label).is_some_and(|r| r.starts_with("  ")))
                .unwrap_or_else(|| panic!("no {label} row in\n{table}"));
            line[label.len()..]
                .split_whitespace()
                .map(String::from)
                .collect()
        };
        assert_eq!(row("programs"), ["3", "3"]);
        assert_eq!(row("cache hits"), ["0", "2"]);
        assert_eq!(row("cache misses"), ["2", "0"]);
        assert_eq!(row("binary rejections"), ["0", "0"]);
        assert_eq!(row("compile failures"), ["1", "1"]);
        assert_eq!(row("failures from cache"), ["0", "1"]);
        assert_eq!(row("driver compiles"), ["5", "0"]);
        assert_eq!(row("median compile+link"), ["3.000", "ms", "0.375", "ms"]);
        assert_eq!(row("total compile+link"), ["7.500", "ms", "1.250", "ms"]);
        assert_eq!(row("programs saved"), ["2", "0"]);
        assert_eq!(row("saves refused"), ["0", "0"]);
        assert_eq!(row("evictions"), ["0", "0"]);
        assert_eq!(row("bytes cached"), ["9000", "9000"]);
        assert_eq!(row("loaded from disk"), ["1", "0"]);
        assert_eq!(row("disk writes"), ["1", "0"]);
        assert_eq!(row("disk bytes written"), ["700", "0"]);
        assert_eq!(table.lines().count(), 20);
        // Without a disk cache the disk rows are left out.
        let memory_only = render_table(
            &Pass {
                disk: None,
                ..cold.clone()
            },
            &Pass {
                disk: None,
                ..warm.clone()
            },
        );
        assert_eq!(memory_only.lines().count(), 17);
        assert!(!memory_only.contains("disk"));
        // A binary the driver refused is a binary hit, not a program from the cache.
        let refused = Pass {
            counters: Counters {
                hits: 2,
                driver_rejections: 1,
                ..Counters::default()
            },
            ..warm.clone()
        };
        let table = render_table(&cold, &refused);
        assert!(table.contains(&format!("{:<22}{:>14}{:>14}", "cache hits", 0, 1)));
        assert!(table.contains(&format!("{:<22}{:>14}{:>14}", "binary rejections", 0, 1)));
    }

    fn facts(budget_bytes: usize) -> RunFacts {
        RunFacts {
            budget_bytes,
            load_ms: 12.5,
        }
    }

    fn joined(lines: &[String]) -> String {
        lines.join("\n")
    }

    #[test]
    fn a_warm_pass_all_from_the_cache_is_credited_to_the_cache() {
        // The refused program's shader compiled on the driver again: the totals are not all the
        // cache's.
        let warm = Pass {
            counters: Counters {
                hits: 2,
                status_misses: 1,
                ..Counters::default()
            },
            from_cache_ms: vec![0.25, 0.5],
            ..pass_with(Counters::default(), vec![0.25, 0.5], 1.25)
        };
        let text = joined(&summary(&cold_misses(), &warm, &facts(64 << 20)));
        assert!(
            text.contains(
                "warm vs cold: median 8.0x faster, the cache's doing: all 2 linked warm programs \
                 came from the cache (binaries the driver accepted) and none of the cold ones \
                 did. The totals' ratio (6.0x) is not all the cache's: the warm pass still asked \
                 the driver for 1 shader compiles and 0 links."
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "totals include the 1 programs the driver refuses; in the warm pass no compile \
                 or link was answered from the cache's failure records."
            ),
            "{text}"
        );
        // No compile, but a link on the driver (a failed link the records did not answer, whose
        // deferred shaders the link compiles): not all the cache's either.
        let linked_again = Pass {
            counters: Counters {
                hits: 2,
                misses: 1,
                ..Counters::default()
            },
            ..warm.clone()
        };
        let text = joined(&summary(&cold_misses(), &linked_again, &facts(64 << 20)));
        assert!(
            text.contains(
                "not all the cache's: the warm pass still asked the driver for 0 shader compiles \
                 and 1 links."
            ),
            "{text}"
        );
        // Its failure answered by the cache's record and nothing sent to the driver: the totals
        // are the cache's too.
        let known = Pass {
            counters: Counters {
                hits: 2,
                failure_hits: 1,
                ..Counters::default()
            },
            ..warm.clone()
        };
        let text = joined(&summary(&cold_misses(), &known, &facts(64 << 20)));
        assert!(
            text.contains("warm vs cold: median 8.0x, total 6.0x faster, the cache's doing"),
            "{text}"
        );
        assert!(
            text.contains(
                "totals include the 1 programs the driver refuses; in the warm pass the cache's \
                 failure records answered 1 compiles and links (with the driver's logs) that the \
                 driver refused before."
            ),
            "{text}"
        );
        // Without refused programs the total is the cache's too.
        let all_linked = |p: Pass| Pass {
            programs: 2,
            compile_failures: 0,
            ..p
        };
        let text = joined(&summary(
            &all_linked(cold_misses()),
            &all_linked(Pass {
                counters: Counters {
                    hits: 2,
                    ..Counters::default()
                },
                ..warm
            }),
            &facts(64 << 20),
        ));
        assert!(
            text.contains(
                "warm vs cold: median 8.0x, total 6.0x faster, the cache's doing: all 2 linked \
                 warm programs came from the cache"
            ),
            "{text}"
        );
        assert!(!text.contains("not all the cache's"), "{text}");
    }

    #[test]
    fn a_warm_pass_with_no_hits_claims_no_speed_up_and_says_why() {
        // Budget too small for the corpus: every program saved, then evicted (LRU over a cycle).
        let cold = Pass {
            counters: Counters {
                misses: 2,
                saves: 2,
                evictions: 1,
                ..Counters::default()
            },
            saved_binary_bytes: 3 << 10,
            ..cold_misses()
        };
        let warm = Pass {
            counters: Counters {
                misses: 2,
                saves: 2,
                evictions: 2,
                ..Counters::default()
            },
            compiled_ms: vec![1.0, 2.0],
            ..pass_with(Counters::default(), vec![1.0, 2.0], 3.0)
        };
        let text = joined(&summary(&cold, &warm, &facts(2 << 10)));
        assert!(
            text.contains(
                "warm pass: 0 of 3 programs from the cache (budget 2 KiB too small for the cold \
                 pass's 3 KiB of binaries: 3 evictions over both passes); its time difference \
                 from the cold pass (median 2.0x, total 2.5x faster) is not the cache's: its 2 \
                 cache misses were compiled and linked on the driver again."
            ),
            "{text}"
        );
        assert!(!text.contains("the cache's doing"), "{text}");
        assert!(!text.contains("served by the cache"), "{text}");
        // A budget smaller than every program: saves refused.
        let refused = Counters {
            misses: 2,
            rejected_saves: 2,
            ..Counters::default()
        };
        let text = joined(&summary(
            &pass_with(refused, vec![2.0, 4.0], 7.5),
            &pass_with(refused, vec![3.0, 5.0], 9.0),
            &facts(1 << 10),
        ));
        assert!(
            text.contains(
                "warm pass: 0 of 3 programs from the cache (4 saves refused over both passes: \
                 budget 1 KiB smaller than those programs); its time difference from the cold \
                 pass (cold/warm time ratio: median 0.8x, total 0.8x) is not the cache's"
            ),
            "{text}"
        );
        // Every cached binary refused by the driver: hits, but none from the cache.
        let rejected = Counters {
            hits: 2,
            driver_rejections: 2,
            evictions: 2,
            saves: 2,
            ..Counters::default()
        };
        let text = joined(&summary(
            &cold_misses(),
            &pass_with(rejected, vec![1.0, 1.0], 2.0),
            &facts(64 << 20),
        ));
        assert!(
            text.contains(
                "warm pass: 0 of 3 programs from the cache (2 evictions over both passes (for \
                 space in the 64 MiB budget or after a refusal); the driver refused 2 cached \
                 binaries)"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_cold_pass_served_from_disk_is_a_warm_start_and_both_passes_say_so() {
        let from_cache = Counters {
            hits: 2,
            ..Counters::default()
        };
        let cold = Pass {
            entries_before: 2,
            disk: Some(DiskCounters {
                loaded: 2,
                ..DiskCounters::default()
            }),
            ..pass_with(from_cache, vec![0.5, 0.5], 1.0)
        };
        let warm = Pass {
            disk: Some(DiskCounters::default()),
            ..pass_with(from_cache, vec![0.5, 0.5], 1.0)
        };
        let text = joined(&summary(&cold, &warm, &facts(64 << 20)));
        assert!(
            text.contains(
                "warm start: 2 of the cold pass's 3 programs were cache hits; before the pass the \
                 cache held only the 2 programs loaded from the disk cache at startup (in 12.5 ms)."
            ),
            "{text}"
        );
        assert!(
            text.contains("warm pass: all 2 programs from the cache, as in the cold pass"),
            "{text}"
        );
        assert!(
            text.contains("disk cache: this run wrote 0 programs (0 bytes)"),
            "{text}"
        );
        assert!(!text.contains("faster"), "{text}");
    }

    #[test]
    fn a_partly_served_warm_pass_splits_its_times_and_claims_only_a_part() {
        let warm = Pass {
            counters: Counters {
                hits: 1,
                misses: 1,
                saves: 1,
                evictions: 1,
                ..Counters::default()
            },
            from_cache_ms: vec![0.25],
            compiled_ms: vec![2.0],
            ..pass_with(Counters::default(), vec![0.25, 2.0], 2.25)
        };
        let cold = Pass {
            counters: Counters {
                evictions: 1,
                ..cold_misses().counters
            },
            saved_binary_bytes: 5000,
            ..cold_misses()
        };
        let text = joined(&summary(&cold, &warm, &facts(4 << 10)));
        assert!(
            text.contains(
                "warm pass: 1 of 3 programs from the cache, 1 compiled again (budget 4 KiB too \
                 small for the cold pass's 4.9 KiB of binaries: 2 evictions over both passes); \
                 median compile+link 0.250 ms from the cache vs 2.000 ms compiled: the passes' \
                 difference (median 2.7x, total 3.3x faster) is only partly the cache's."
            ),
            "{text}"
        );
        assert!(!text.contains("the cache's doing"), "{text}");
    }

    #[test]
    fn byte_counts_read_as_people_write_them() {
        assert_eq!(human_bytes(0), "0 bytes");
        assert_eq!(human_bytes(1), "1 byte");
        assert_eq!(human_bytes(1023), "1023 bytes");
        assert_eq!(human_bytes(64 << 10), "64 KiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(64 << 20), "64 MiB");
    }

    #[test]
    fn disk_deltas_subtract_each_counter() {
        let before = DiskCounters {
            writes: 3,
            loaded: 5,
            ..DiskCounters::default()
        };
        let after = DiskCounters {
            writes: 10,
            loaded: 5,
            bytes_written: 99,
            ..DiskCounters::default()
        };
        let d = disk_delta(after, before);
        assert_eq!((d.writes, d.loaded, d.bytes_written), (7, 0, 99));
    }
}
