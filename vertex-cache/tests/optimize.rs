//! The optimizer: its output is a permutation of the input's triangles (corners kept in order),
//! never worse than the input, meshoptimizer's order or Tipsify under the model it optimizes for
//! (every model family), deterministic; it improves shuffled grids a lot; and it does not make
//! the npm teapot worse under FIFO 16 (meshoptimizer does: 0.798 -> 0.827).

use vertex_cache::{Choice, Mesh, Model, greedy, optimize, optimize_with_report};

/// One model of every family (and a few sizes), as text.
const MODELS: [&str; 14] = [
    "fifo:16",
    "fifo:4",
    "lru:8",
    "lru:32",
    "dm:64",
    "sa:16x4",
    "seg:96/fifo:32",
    "seg:1023/dm:256",
    "seg:30/lru:16",
    "seg:64/sa:8x2",
    "batch:16,32,0",
    "batch:32,64,32",
    "nvidia:96,32,0",
    "amd:384,16",
];

fn models() -> Vec<Model> {
    MODELS
        .iter()
        .map(|t| t.parse().expect("model text"))
        .collect()
}

/// SplitMix64, for shuffles and soups.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A grid of `w` x `h` quads, two triangles each, in row order (the battery's own grid).
fn grid(w: u32, h: u32) -> (Vec<u32>, u32) {
    let probe = vertex_cache::battery::Probe::grid(w, h);
    (probe.indices().to_vec(), probe.vertex_count())
}

fn shuffled(indices: &[u32], seed: u64) -> Vec<u32> {
    let mut tris: Vec<[u32; 3]> = indices
        .chunks_exact(3)
        .map(|t| [t[0], t[1], t[2]])
        .collect();
    let mut rng = Rng(seed);
    for i in (1..tris.len()).rev() {
        tris.swap(i, rng.below(i as u64 + 1) as usize);
    }
    tris.concat()
}

/// Synthetic meshes: grids in row order and shuffled, a fan, a strip, a random soup, a grid
/// with degenerate triangles mixed in, all-degenerate triangles, one triangle.
fn synthetic() -> Vec<(String, Vec<u32>, u32)> {
    let mut out = Vec::new();
    let (g, gv) = grid(20, 14);
    out.push(("grid20x14-row".to_owned(), g.clone(), gv));
    out.push(("grid20x14-shuffled".to_owned(), shuffled(&g, 7), gv));
    let fan: Vec<u32> = (1..=40).flat_map(|i| [0, i, i + 1]).collect();
    out.push(("fan40".to_owned(), shuffled(&fan, 3), 42));
    let strip: Vec<u32> = (0..60u32)
        .flat_map(|i| {
            if i % 2 == 0 {
                [i, i + 1, i + 2]
            } else {
                [i + 1, i, i + 2]
            }
        })
        .collect();
    out.push(("strip60-shuffled".to_owned(), shuffled(&strip, 5), 62));
    let mut rng = Rng(11);
    let soup: Vec<u32> = (0..300 * 3).map(|_| rng.below(120) as u32).collect();
    out.push(("soup300".to_owned(), soup, 120));
    let mut degenerate = g.clone();
    for k in 0..40u32 {
        let v = (k * 37) % gv;
        degenerate.extend_from_slice(&[v, v, (v + 1) % gv]);
        degenerate.extend_from_slice(&[v, v, v]);
    }
    out.push((
        "grid-with-degenerates".to_owned(),
        shuffled(&degenerate, 9),
        gv,
    ));
    out.push((
        "all-degenerate".to_owned(),
        vec![3, 3, 3, 1, 1, 2, 0, 0, 0],
        4,
    ));
    out.push(("one-triangle".to_owned(), vec![2, 0, 1], 3));
    out
}

/// The triangles of `indices` as ordered triples, sorted: equal for two permutations of the
/// same triangles with their corners in the same order.
fn triangle_multiset(indices: &[u32]) -> Vec<[u32; 3]> {
    let mut t: Vec<[u32; 3]> = indices
        .chunks_exact(3)
        .map(|t| [t[0], t[1], t[2]])
        .collect();
    t.sort_unstable();
    t
}

fn invocations(model: &Model, indices: &[u32], vertex_count: u32) -> u64 {
    model.invocations(&Mesh::new(indices, vertex_count).expect("valid mesh"))
}

#[test]
fn output_is_a_permutation_of_the_input_triangles_for_every_model() {
    for (name, indices, vc) in synthetic() {
        let mesh = Mesh::new(&indices, vc).expect("valid mesh");
        let want = triangle_multiset(&indices);
        for model in models() {
            let out = optimize(&mesh, &model);
            assert_eq!(
                triangle_multiset(&out),
                want,
                "{name} under {model}: optimize changed the triangles"
            );
            let g = greedy(&mesh, &model);
            assert_eq!(
                triangle_multiset(&g),
                want,
                "{name} under {model}: greedy changed the triangles"
            );
        }
    }
}

#[test]
fn never_worse_than_the_input_or_meshopt_under_every_model() {
    for (name, indices, vc) in synthetic() {
        let mesh = Mesh::new(&indices, vc).expect("valid mesh");
        let forsyth = meshopt::optimize_vertex_cache(&indices, vc as usize);
        let tipsify = meshopt::optimize_vertex_cache_fifo(&indices, vc as usize, 16);
        for model in models() {
            let report = optimize_with_report(&mesh, &model);
            let ours = invocations(&model, &report.indices, vc);
            let input = invocations(&model, &indices, vc);
            assert!(
                ours <= input,
                "{name} under {model}: {ours} > input {input}"
            );
            let mo = invocations(&model, &forsyth, vc);
            assert!(ours <= mo, "{name} under {model}: {ours} > meshopt {mo}");
            if tipsify_cache_is_16(&model) {
                let tp = invocations(&model, &tipsify, vc);
                assert!(ours <= tp, "{name} under {model}: {ours} > Tipsify {tp}");
            }
            // The report's figures are the candidates'; the chosen one is the cheapest, and the
            // result is it, or its chunk refinement when that is cheaper still.
            let min = report.invocations.iter().map(|c| c.1).min().unwrap();
            let chosen = report
                .invocations
                .iter()
                .find(|c| c.0 == report.choice)
                .unwrap();
            assert_eq!(
                chosen.1, min,
                "{name} under {model}: not the cheapest candidate"
            );
            match report.refined {
                Some((_, refined)) => {
                    assert_eq!(ours, refined, "{name} under {model}: wrong refined figure");
                    assert!(
                        refined < min,
                        "{name} under {model}: refinement not cheaper"
                    );
                }
                None => assert_eq!(ours, min, "{name} under {model}: wrong figure reported"),
            }
            assert_eq!(report.invocations[0], (Choice::Input, input));
        }
    }
}

/// Whether the optimizer asks Tipsify for cache 16 under `model` (then its Tipsify candidate is
/// the one computed in the test).
fn tipsify_cache_is_16(model: &Model) -> bool {
    matches!(
        model,
        Model::Fifo { size: 16 } | Model::Batch { cache: 16, .. } | Model::Amd { size: 16, .. }
    )
}

#[test]
fn the_teapot_is_not_made_worse_under_fifo_16() {
    const TEST: &str = "the_teapot_is_not_made_worse_under_fifo_16";
    let Some(teapot) = mesh_io::corpus::load_or_skip(TEST, "teapot") else {
        return;
    };
    let model: Model = "fifo:16".parse().unwrap();
    let mesh = Mesh::new(&teapot.indices, teapot.vertex_count).expect("valid mesh");
    let tris = mesh.triangles() as f64;
    let input = model.invocations(&mesh) as f64 / tris;
    let forsyth = meshopt::optimize_vertex_cache(&teapot.indices, teapot.vertex_count as usize);
    let meshopt_acmr = invocations(&model, &forsyth, teapot.vertex_count) as f64 / tris;
    let out = optimize(&mesh, &model);
    let ours = invocations(&model, &out, teapot.vertex_count) as f64 / tris;
    eprintln!("teapot fifo:16 ACMR: input {input:.4}, meshopt {meshopt_acmr:.4}, ours {ours:.4}");
    // The figures: the input is 0.798 and meshoptimizer makes it 0.827.
    assert!((input - 0.798).abs() < 0.001, "teapot input ACMR {input}");
    assert!(
        meshopt_acmr > input,
        "meshopt no longer makes the teapot worse"
    );
    assert!(ours <= input, "ours {ours} worse than the input {input}");
    assert_eq!(triangle_multiset(&out), triangle_multiset(&teapot.indices));
}

#[test]
fn shuffled_grids_improve_substantially() {
    let (g, vc) = grid(32, 32);
    let input = shuffled(&g, 42);
    let mesh = Mesh::new(&input, vc).expect("valid mesh");
    for text in [
        "fifo:16",
        "lru:16",
        "seg:1023/dm:256",
        "batch:16,32,0",
        "nvidia:96,32,0",
    ] {
        let model: Model = text.parse().unwrap();
        let before = model.invocations(&mesh) as f64 / mesh.triangles() as f64;
        let after =
            invocations(&model, &optimize(&mesh, &model), vc) as f64 / mesh.triangles() as f64;
        let greedy_alone =
            invocations(&model, &greedy(&mesh, &model), vc) as f64 / mesh.triangles() as f64;
        eprintln!(
            "{text}: shuffled 32x32 grid ACMR {before:.3} -> {after:.3} (greedy alone {greedy_alone:.3})"
        );
        assert!(
            before > 2.0,
            "{text}: the shuffle did not shuffle ({before})"
        );
        assert!(after < 0.85, "{text}: optimize only reached {after}");
        assert!(
            greedy_alone < 0.9,
            "{text}: the greedy alone only reached {greedy_alone}"
        );
    }
}

#[test]
fn the_greedy_beats_meshopt_on_grids_under_the_llvmpipe_model() {
    // On this machine's llvmpipe the fit finds seg:1023/dm:256 (segments of 341 triangles,
    // each starting with an empty 256-slot direct-mapped cache); the model-aware greedy plans
    // for the segments and the slots, meshoptimizer cannot.
    let model: Model = "seg:1023/dm:256".parse().unwrap();
    let (g, vc) = grid(64, 64);
    for (name, input) in [("row", g.clone()), ("shuffled", shuffled(&g, 1))] {
        let mesh = Mesh::new(&input, vc).expect("valid mesh");
        let ours = invocations(&model, &greedy(&mesh, &model), vc);
        let mo = invocations(
            &model,
            &meshopt::optimize_vertex_cache(&input, vc as usize),
            vc,
        );
        let report = optimize_with_report(&mesh, &model);
        eprintln!(
            "grid 64x64 {name}: greedy {ours}, meshopt {mo}, chosen {:?}",
            report.choice
        );
        assert!(ours < mo, "grid {name}: greedy {ours} >= meshopt {mo}");
        assert_eq!(report.choice, Choice::Greedy, "grid {name}");
    }
}

#[test]
fn optimize_is_deterministic() {
    for (name, indices, vc) in synthetic() {
        let mesh = Mesh::new(&indices, vc).expect("valid mesh");
        for model in models() {
            let a = optimize(&mesh, &model);
            let b = optimize(&mesh, &model);
            assert_eq!(a, b, "{name} under {model}");
        }
    }
}

#[test]
fn chunked_models_refine_the_best_candidate() {
    // seg:1023/dm:256 cuts the draw into chunks of 341 triangles that each start empty: the
    // optimizer re-sequences them (and picks their phase) and gains on a shuffled grid;
    // dm:256 has no chunks and is never refined.
    let (g, vc) = grid(32, 32);
    let input = shuffled(&g, 42);
    let mesh = Mesh::new(&input, vc).expect("valid mesh");
    let chunked: Model = "seg:1023/dm:256".parse().unwrap();
    let report = optimize_with_report(&mesh, &chunked);
    let (_, refined) = report.refined.expect("a chunk improved");
    eprintln!(
        "seg:1023/dm:256 shuffled 32x32 grid: candidates {:?}, refined {refined}",
        report.invocations
    );
    assert_eq!(invocations(&chunked, &report.indices, vc), refined);
    assert_eq!(
        triangle_multiset(&report.indices),
        triangle_multiset(&input)
    );
    let plain: Model = "dm:256".parse().unwrap();
    assert_eq!(optimize_with_report(&mesh, &plain).refined, None);
}

#[test]
fn ours_beats_both_baselines_on_the_corpus_under_the_llvmpipe_model() {
    const TEST: &str = "ours_beats_both_baselines_on_the_corpus_under_the_llvmpipe_model";
    let model: Model = "seg:1023/dm:256".parse().unwrap();
    for name in ["teapot", "bunny"] {
        let Some(m) = mesh_io::corpus::load_or_skip(TEST, name) else {
            continue;
        };
        let mesh = Mesh::new(&m.indices, m.vertex_count).expect("valid mesh");
        let vc = m.vertex_count;
        let ours = invocations(&model, &optimize(&mesh, &model), vc);
        let mo = invocations(
            &model,
            &meshopt::optimize_vertex_cache(&m.indices, vc as usize),
            vc,
        );
        let tp = invocations(
            &model,
            &meshopt::optimize_vertex_cache_fifo(&m.indices, vc as usize, 16),
            vc,
        );
        eprintln!("{name} under {model}: ours {ours}, meshopt {mo}, Tipsify {tp}");
        assert!(
            ours < mo && ours < tp,
            "{name}: ours {ours}, meshopt {mo}, Tipsify {tp}"
        );
    }
}

#[test]
fn a_fan_with_thousands_of_triangles_on_one_vertex_is_optimized_quickly() {
    // A cone cap: every triangle shares vertex 0. The greedy used to gather every live
    // triangle of the hub at every step (cubic: 10,000 triangles took minutes).
    let n = 8_000u32;
    let indices: Vec<u32> = (1..=n).flat_map(|i| [0, i, i + 1]).collect();
    let mesh = vertex_cache::Mesh::new(&indices, n + 2).unwrap();
    let model: vertex_cache::Model = "fifo:16".parse().unwrap();
    let out = vertex_cache::optimize(&mesh, &model);
    let before = model.invocations(&mesh);
    let after = model.invocations(&vertex_cache::Mesh::new(&out, n + 2).unwrap());
    assert!(after <= before, "{after} > {before}");
    assert_eq!(out.len(), indices.len());
}
