//! The policy fit on the real driver (llvmpipe in CI): measure the battery once, fit, and check
//! that an exact model exists and predicts meshes that were not in the battery.
//!
//! Debug builds fit over [`Battery::reduced`] (the standard battery's simulations take a few
//! seconds in release, much longer unoptimized); release builds over [`Battery::standard`].

use std::time::Instant;

use test_support::gl::context_or_skip;
use vertex_cache::battery::{Battery, Probe};
use vertex_cache::fit::{FitResult, Score, SearchSpace, explain, fit};
use vertex_cache::measure::{DrawOptions, Measurer};

fn battery() -> (Battery, &'static str) {
    if cfg!(debug_assertions) {
        (Battery::reduced(), "reduced (debug build)")
    } else {
        (Battery::standard(), "standard")
    }
}

fn print_table(result: &FitResult) {
    println!("exact fits ({}):", result.exact.len());
    for f in &result.exact {
        println!("  {f}");
    }
    println!("runners-up:");
    println!(
        "  {:<40} {:>12} {:>12}",
        "model", "mismatching", "total diff"
    );
    for f in &result.near {
        println!(
            "  {:<40} {:>12} {:>12}",
            f.to_string(),
            f.score.mismatched_vertices,
            f.score.total_difference
        );
    }
    println!("best of each family:");
    for f in &result.best_per_family {
        println!(
            "  {:<40} {:>12} {:>12}",
            f.to_string(),
            f.score.mismatched_vertices,
            f.score.total_difference
        );
    }
    println!(
        "{} candidate models, {} probe simulations",
        result.candidates, result.simulations
    );
}

#[test]
fn the_fit_finds_an_exact_model_that_predicts_held_back_meshes() {
    const TEST: &str = "the_fit_finds_an_exact_model_that_predicts_held_back_meshes";
    let Some(ctx) = context_or_skip(TEST) else {
        return;
    };
    println!("driver: {}", ctx.info());
    let measurer = Measurer::new(&ctx).expect("measurer");
    let (battery, which) = battery();
    let t = Instant::now();
    let measured: Vec<Vec<u32>> = battery
        .probes()
        .iter()
        .map(|p| {
            measurer
                .measure(&p.mesh(), DrawOptions::default())
                .expect("measure")
                .counts
        })
        .collect();
    println!(
        "battery {which}: {} probes, {} indices, measured in {:.2?}",
        battery.probes().len(),
        battery.total_indices(),
        t.elapsed()
    );
    let space = SearchSpace::standard();
    let t = Instant::now();
    let mut calls = 0u64;
    let mut progress = |_p: vertex_cache::fit::FitProgress| calls += 1;
    let result = fit(&battery, &measured, &space, 10, Some(&mut progress)).expect("fit");
    println!("fit in {:.2?} ({calls} progress calls)", t.elapsed());
    print_table(&result);
    assert!(
        !result.exact.is_empty(),
        "no exact model on this driver; best: {:?}",
        result.near.first()
    );
    assert!(calls >= 2, "progress was reported");

    // Held back: meshes not in the battery.
    let held_back = [
        Probe::grid(23, 31),
        Probe::grid(90, 50),
        Probe::grid(40, 40).shuffled(99),
        Probe::random(700, 2500, 12345),
        Probe::random(2000, 900, 5),
        Probe::fan(1500),
        Probe::staircase(1500),
    ];
    for f in &result.exact {
        for probe in &held_back {
            let m = measurer
                .measure(&probe.mesh(), DrawOptions::default())
                .expect("measure");
            let score = Score::of(&f.model.simulate(&probe.mesh()), &m.counts);
            assert!(
                score.is_exact(),
                "{f} mispredicts {}: {score}",
                probe.name()
            );
        }
        println!(
            "{f} predicts all {} held-back meshes exactly",
            held_back.len()
        );
    }
}

#[test]
fn a_model_that_does_not_fit_is_explained_probe_by_probe() {
    const TEST: &str = "a_model_that_does_not_fit_is_explained_probe_by_probe";
    let Some(ctx) = context_or_skip(TEST) else {
        return;
    };
    let measurer = Measurer::new(&ctx).expect("measurer");
    let mut battery = Battery::new();
    battery.add_staircase([1, 2, 400]);
    battery.push(Probe::grid(16, 16));
    let measured: Vec<Vec<u32>> = battery
        .probes()
        .iter()
        .map(|p| {
            measurer
                .measure(&p.mesh(), DrawOptions::default())
                .unwrap()
                .counts
        })
        .collect();
    // A 4-entry FIFO cannot shade a 16x16 grid with llvmpipe's reuse.
    let bad = "fifo:4".parse().unwrap();
    let why = explain(&battery, &measured, &bad);
    assert!(why.iter().any(|(name, _)| name == "grid:16x16"), "{why:?}");
}
