//! `gpusvc vcache fit`: measures the probe battery (`vertex_cache::battery`) on this driver once,
//! fits every model of the standard search space to the counts (`vertex_cache::fit`), prints the
//! exact fits or the best near misses (ties listed), and saves the winner to a
//! [model file](super::model_file).

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use vertex_cache::battery::Battery;
use vertex_cache::fit::{FitProgress, FitResult, SearchSpace, fit};
use vertex_cache::measure::{DrawOptions, Measurer};

use super::model_file::{ModelFile, default_path, today_utc};
use super::{VcacheError, open_context, print};

/// Which probe battery to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BatteryArg {
    /// About 400 K indices in 442 draws (staircase to 1400 triangles, grids, shuffles, random
    /// streams, a fan).
    Standard,
    /// About 120 K indices in 100 draws (for quick runs and debug builds).
    Reduced,
}

/// Which models to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SpaceArg {
    /// Every size: FIFO and LRU of 1..=512 entries, direct-mapped of 1..=1024 slots,
    /// set-associative caches, 270 batch models, and every segment length 3..=4096 with each
    /// cache.
    Standard,
    /// Powers of two only: FIFO and LRU of 1..=512 entries, direct-mapped of 1..=1024 slots,
    /// set-associative of 2..=512 sets x 2, 4, 8 or 16 ways (at most 1024 entries); the
    /// standard batch (and hardware) models; every segment length 3..=4096 with each cache. For quick checks
    /// (debug builds, tests): a driver whose cache is not a power of two fits no model exactly.
    Quick,
}

fn space(which: SpaceArg) -> SearchSpace {
    let standard = SearchSpace::standard();
    match which {
        SpaceArg::Standard => standard,
        SpaceArg::Quick => {
            let pow2 = |max: u32| (0..=10).map(|k| 1u32 << k).filter(move |&n| n <= max);
            let mut set_assoc = Vec::new();
            for sets in pow2(512).filter(|&s| s >= 2) {
                for ways in [2, 4, 8, 16] {
                    if sets * ways <= 1024 {
                        set_assoc.push((sets, ways));
                    }
                }
            }
            SearchSpace {
                fifo: pow2(512).collect(),
                lru: pow2(512).collect(),
                direct: pow2(1024).collect(),
                set_assoc,
                ..standard
            }
        }
    }
}

/// `gpusvc vcache fit`'s arguments.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub(crate) struct FitArgs {
    /// Where to save the model file (the model's text form, the driver, the date, the other
    /// exact fits and the runners-up). Default: $XDG_CACHE_HOME/gpusvc/vcache/model.txt, else
    /// ~/.cache/gpusvc/vcache/model.txt.
    #[arg(long, value_name = "MODEL_FILE")]
    pub(crate) out: Option<PathBuf>,
    /// The probe battery.
    #[arg(long, value_enum, default_value_t = BatteryArg::Standard)]
    pub(crate) battery: BatteryArg,
    /// The model search space.
    #[arg(long, value_enum, default_value_t = SpaceArg::Standard)]
    pub(crate) space: SpaceArg,
    /// Near misses to list (at least; every model tied with the last one is listed too).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub(crate) near: u64,
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(len), target);
    if let Ok(style) = ProgressStyle::with_template("{msg:<10} [{bar:40}] {pos}/{len} ({elapsed})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_owned());
    bar
}

pub(crate) fn run(args: &FitArgs) -> Result<(), VcacheError> {
    let out = match &args.out {
        Some(p) => p.clone(),
        None => default_path().ok_or_else(|| {
            VcacheError::Other(
                "neither XDG_CACHE_HOME nor HOME is set: give the model file with --out".into(),
            )
        })?,
    };
    let (battery, battery_name) = match args.battery {
        BatteryArg::Standard => (Battery::standard(), "standard"),
        BatteryArg::Reduced => (Battery::reduced(), "reduced"),
    };
    let space_name = match args.space {
        SpaceArg::Standard => "standard",
        SpaceArg::Quick => "quick",
    };
    let ctx = open_context()?;
    let measurer = Measurer::new(&ctx).map_err(|e| VcacheError::Other(e.to_string()))?;
    let started = Instant::now();
    let progress = bar(battery.probes().len() as u64, "measuring");
    let mut measured = Vec::with_capacity(battery.probes().len());
    for probe in battery.probes() {
        let m = measurer
            .measure(&probe.mesh(), DrawOptions::default())
            .map_err(|e| VcacheError::Other(format!("probe {}: {e}", probe.name())))?;
        measured.push(m.counts);
        progress.inc(1);
    }
    progress.finish_and_clear();
    let measure_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let space = space(args.space);
    let progress = bar(1, "fitting");
    let mut on_progress = |p: FitProgress| {
        progress.set_length(p.total.max(1));
        progress.set_position(p.done);
    };
    let result = fit(
        &battery,
        &measured,
        &space,
        args.near,
        Some(&mut on_progress),
    )
    .map_err(|e| VcacheError::Other(format!("fit: {e}")))?;
    progress.finish_and_clear();
    let fit_s = started.elapsed().as_secs_f64();
    let battery_line = format!(
        "{battery_name}: {} probes, {} indices; {space_name} search space",
        battery.probes().len(),
        battery.total_indices()
    );
    let mut s = String::new();
    let _ = writeln!(s, "driver: {}", ctx.info());
    let _ = writeln!(s, "battery {battery_line}, measured in {measure_s:.2} s");
    let _ = writeln!(
        s,
        "fit: {} candidate models, {} probe simulations, in {fit_s:.2} s",
        result.candidates, result.simulations
    );
    report(&mut s, &result);
    let Some(winner) = result.exact.first().or(result.near.first()) else {
        return Err(VcacheError::Other("the fit kept no model".into()));
    };
    let exact = winner.score.is_exact();
    let mut file = ModelFile::new(winner.model);
    file.exact = Some(exact);
    file.driver = Some(ctx.info().to_string());
    file.date = Some(today_utc());
    file.battery = Some(battery_line);
    file.also_exact = result.exact.iter().skip(1).map(|f| f.model).collect();
    file.runners_up = result
        .near
        .iter()
        .filter(|f| f.model != winner.model)
        .map(|f| {
            (
                f.model,
                f.score.mismatched_vertices,
                f.score.total_difference,
            )
        })
        .collect();
    file.write(&out)?;
    let _ = writeln!(
        s,
        "saved {}{} to {} (use --model @{})",
        winner.model,
        if exact {
            ""
        } else {
            " (best near miss, not exact)"
        },
        out.display(),
        out.display()
    );
    print(&s)?;
    if exact {
        Ok(())
    } else {
        Err(VcacheError::Finding(format!(
            "no exact model on this driver; the best near miss {} mispredicts {} vertices",
            winner.model, winner.score.mismatched_vertices
        )))
    }
}

/// The exact fits and the runners-up table.
fn report(s: &mut String, result: &FitResult) {
    if result.exact.is_empty() {
        let _ = writeln!(s, "exact fits: none");
    } else {
        let models: u64 = result.exact.iter().map(|f| f.count()).sum();
        let _ = writeln!(
            s,
            "exact fits ({models} models, zero mismatching vertices over the battery):"
        );
        for f in &result.exact {
            let _ = writeln!(s, "  {f}");
        }
    }
    let _ = writeln!(
        s,
        "{} (mismatching vertices and total count difference over the battery):",
        if result.exact.is_empty() {
            "best near misses"
        } else {
            "runners-up"
        }
    );
    let _ = writeln!(
        s,
        "  {:<52} {:>12} {:>12}",
        "model", "mismatching", "total diff"
    );
    let mut previous = None;
    for f in &result.near {
        let tie = if previous == Some(f.score) {
            " (tie)"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "  {:<52} {:>12} {:>12}{tie}",
            f.to_string(),
            f.score.mismatched_vertices,
            f.score.total_difference
        );
        previous = Some(f.score);
    }
}
