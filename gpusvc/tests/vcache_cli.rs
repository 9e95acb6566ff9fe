//! `gpusvc vcache` as a user runs it: analyze and optimize on small meshes written to a temporary
//! folder (and on the npm teapot when `scripts/fetch-corpus` has run), every bad input with its
//! exit status and message, and on the GL driver (llvmpipe in CI; with `GPUSVC_REQUIRE_GL` set a
//! missing driver fails instead of skipping) measure, fit over the reduced battery, and plot.

use std::path::Path;

use test_support::cli::{self, text};
use test_support::gl::gl_required;
use vertex_cache::battery::Probe;
use vertex_cache::{Mesh, Model};

const BIN: &str = env!("CARGO_BIN_EXE_gpusvc");

struct Run {
    code: Option<i32>,
    out: String,
    err: String,
}

fn vcache_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut argv = vec!["vcache"];
    argv.extend_from_slice(args);
    let output = cli::run(BIN, &argv, env);
    let (out, err) = text(&output);
    Run {
        code: output.status.code(),
        out,
        err,
    }
}

fn vcache(args: &[&str]) -> Run {
    vcache_env(args, &[])
}

/// True (after printing SKIP) when the command found no GL context and GL is not required.
fn skipped_without_gl(test: &str, run: &Run) -> bool {
    if run.code == Some(3) && !gl_required() {
        println!("SKIP {test}: no GL context: {}", run.err.trim());
        return true;
    }
    false
}

/// The value after `label` on the line that starts with it.
fn value<'a>(out: &'a str, label: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{out}"))
        .split_whitespace()
        .next()
        .unwrap_or("")
}

/// Writes `indices` as an `.idx` file with its vertex count.
fn write_idx(path: &Path, indices: &[u32], vertex_count: u32) {
    let mut s = format!("vertices {vertex_count}\n");
    for t in indices.chunks(3) {
        s.push_str(&format!("{} {} {}\n", t[0], t[1], t[2]));
    }
    std::fs::write(path, s).unwrap();
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn help_documents_the_exit_statuses() {
    let run = vcache(&["--help"]);
    assert_eq!(run.code, Some(0), "{}", run.err);
    for command in ["measure", "fit", "analyze", "optimize", "plot"] {
        assert!(run.out.contains(command), "{}", run.out);
        let sub = vcache(&[command, "--help"]);
        assert_eq!(sub.code, Some(0), "{command}: {}", sub.err);
        assert!(sub.out.contains("Exit status:"), "{command}:\n{}", sub.out);
        assert!(
            sub.out.contains("2 for command-line errors"),
            "{command}:\n{}",
            sub.out
        );
        if command != "optimize" {
            assert!(sub.out.contains("3 when"), "{command}:\n{}", sub.out);
        }
    }
    let top = cli::run(BIN, &["--help"], &[] as &[(&str, &str)]);
    assert!(text(&top).0.contains("vcache"));
}

#[test]
fn analyze_prints_the_models_figures() {
    let dir = tempfile::tempdir().unwrap();
    let grid = Probe::grid(12, 7).shuffled(3);
    let path = dir.path().join("grid.idx");
    write_idx(&path, grid.indices(), grid.vertex_count());
    let mesh = Mesh::new(grid.indices(), grid.vertex_count()).unwrap();
    for text in ["fifo:16", "lru:8", "batch:32,32,32", "seg:30/dm:16"] {
        let model: Model = text.parse().unwrap();
        let expected = model.invocations(&mesh);
        let run = vcache(&["analyze", p(&path), "--model", text]);
        assert_eq!(run.code, Some(0), "{text}: {}", run.err);
        assert_eq!(value(&run.out, "model:"), text, "{}", run.out);
        assert_eq!(
            value(&run.out, "invocations").parse::<u64>().unwrap(),
            expected,
            "{text}:\n{}",
            run.out
        );
        let acmr: f64 = value(&run.out, "ACMR").parse().unwrap();
        assert!((acmr - expected as f64 / 168.0).abs() < 1e-3, "{}", run.out);
        assert_eq!(value(&run.out, "vertices referenced"), "104", "{}", run.out);
    }
    // The same model from a model file: a bare text form, and fit's key/value form.
    let bare = dir.path().join("bare.txt");
    std::fs::write(&bare, "# mine\nlru:8\n").unwrap();
    let file = dir.path().join("fit.txt");
    std::fs::write(
        &file,
        "model lru:8\nexact yes\ndriver x\nrunner-up fifo:8 3 4\n",
    )
    .unwrap();
    let want = "lru:8"
        .parse::<Model>()
        .unwrap()
        .invocations(&mesh)
        .to_string();
    for f in [&bare, &file] {
        let arg = format!("@{}", p(f));
        let run = vcache(&["analyze", p(&path), "--model", &arg]);
        assert_eq!(run.code, Some(0), "{}", run.err);
        assert_eq!(value(&run.out, "invocations"), want, "{}", run.out);
    }
}

/// Triangles of `indices` as a sorted list.
fn triangle_set(indices: &[u32]) -> Vec<[u32; 3]> {
    let mut t: Vec<[u32; 3]> = indices.chunks(3).map(|t| [t[0], t[1], t[2]]).collect();
    t.sort();
    t
}

#[test]
fn optimize_writes_a_reordered_mesh_no_worse_than_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let grid = Probe::grid(20, 20).shuffled(7);
    let input = dir.path().join("grid.idx");
    write_idx(&input, grid.indices(), grid.vertex_count());
    let model: Model = "fifo:16".parse().unwrap();
    let before = model.invocations(&Mesh::new(grid.indices(), grid.vertex_count()).unwrap());
    for ext in ["obj", "idx", "u32", "u16"] {
        let out = dir.path().join(format!("out.{ext}"));
        let run = vcache(&["optimize", p(&input), "--model", "fifo:16", "-o", p(&out)]);
        assert_eq!(run.code, Some(0), "{ext}: {}", run.err);
        assert!(run.out.contains("<- written"), "{}", run.out);
        assert!(run.out.contains("meshopt"), "{}", run.out);
        // Raw binary indices carry no vertex count: the largest index + 1 (all are used here).
        let loaded = mesh_io::load(&out).unwrap();
        assert_eq!(loaded.vertex_count, grid.vertex_count(), "{ext}");
        let got = loaded.indices.clone();
        // OBJ reads number vertices by first use: compare costs, not labels, for OBJ.
        if ext != "obj" {
            assert_eq!(
                triangle_set(&got),
                triangle_set(grid.indices()),
                "{ext}: a permutation of the input's triangles"
            );
        }
        let after = model.invocations(&Mesh::new(&got, loaded.vertex_count).unwrap());
        assert!(after < before, "{ext}: {after} >= {before}\n{}", run.out);
        let line = run
            .out
            .lines()
            .find(|l| l.starts_with("ACMR under fifo:16:"))
            .unwrap_or_else(|| panic!("{}", run.out));
        let expected = format!(
            "{:.3} -> {:.3}",
            before as f64 / 800.0,
            after as f64 / 800.0
        );
        assert!(line.contains(&expected), "{line} vs {expected}");
    }
}

#[test]
fn optimize_never_makes_the_teapot_worse_under_fifo_16() {
    const TEST: &str = "optimize_never_makes_the_teapot_worse_under_fifo_16";
    let Some(teapot) = mesh_io::corpus::load_or_skip(TEST, "teapot") else {
        return;
    };
    let path = mesh_io::corpus::path("teapot").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("teapot.obj");
    let run = vcache(&["optimize", p(&path), "--model", "fifo:16", "-o", p(&out)]);
    assert_eq!(run.code, Some(0), "{}", run.err);
    let model: Model = "fifo:16".parse().unwrap();
    let input = model.invocations(&Mesh::new(&teapot.indices, teapot.vertex_count).unwrap());
    let written = mesh_io::load(&out).unwrap();
    let after = model.invocations(&Mesh::new(&written.indices, written.vertex_count).unwrap());
    assert!(after <= input, "{after} > {input}\n{}", run.out);
    assert_eq!(written.triangle_count(), 992);
    // meshoptimizer's own order makes it worse (0.798 -> 0.827); the report shows both.
    let row = |label: &str| {
        run.out
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} row:\n{}", run.out))
            .to_owned()
    };
    assert!(row("input order").contains(" 0.798"), "{}", run.out);
    assert!(
        row("meshopt optimize_vertex_cache ").contains(" 0.827"),
        "{}",
        run.out
    );
    println!("{}", run.out);
}

#[test]
fn bad_input_is_one_line_on_stderr_with_its_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name);
    std::fs::write(
        d("quad.obj"),
        "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1 2 3 4\n",
    )
    .unwrap();
    std::fs::write(d("past.idx"), "vertices 3\n0 1 2\n2 1 5\n").unwrap();
    std::fs::write(d("empty.obj"), "# nothing\n").unwrap();
    std::fs::write(d("ok.idx"), "0 1 2\n").unwrap();
    std::fs::write(d("notmodel.txt"), "model fifo:0x10\n").unwrap();
    let ok = p(&d("ok.idx")).to_owned();
    let missing = p(&d("missing.obj")).to_owned();
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        (
            vec![
                "analyze".into(),
                missing.clone(),
                "--model".into(),
                "fifo:16".into(),
            ],
            1,
            "missing.obj: no such file",
        ),
        (
            vec![
                "analyze".into(),
                p(&d("quad.obj")).into(),
                "--model".into(),
                "fifo:16".into(),
            ],
            1,
            "has 4 vertices; only triangles",
        ),
        (
            vec![
                "analyze".into(),
                p(&d("past.idx")).into(),
                "--model".into(),
                "fifo:16".into(),
            ],
            1,
            "index 5 at",
        ),
        (
            vec![
                "analyze".into(),
                p(&d("empty.obj")).into(),
                "--model".into(),
                "fifo:16".into(),
            ],
            1,
            "empty mesh",
        ),
        (
            vec![
                "analyze".into(),
                ok.clone(),
                "--model".into(),
                "fifo".into(),
            ],
            2,
            "is not a cache model",
        ),
        (
            vec![
                "analyze".into(),
                ok.clone(),
                "--model".into(),
                "tlb:4".into(),
            ],
            2,
            "is not a cache model",
        ),
        (
            vec![
                "analyze".into(),
                ok.clone(),
                "--model".into(),
                format!("@{}", p(&d("none.txt"))),
            ],
            1,
            "cannot read model file",
        ),
        (
            vec![
                "analyze".into(),
                ok.clone(),
                "--model".into(),
                format!("@{}", p(&d("notmodel.txt"))),
            ],
            1,
            "line 1",
        ),
        (
            vec![
                "optimize".into(),
                missing.clone(),
                "--model".into(),
                "fifo:16".into(),
                "-o".into(),
                p(&d("o.obj")).into(),
            ],
            1,
            "no such file",
        ),
        (
            vec![
                "optimize".into(),
                ok.clone(),
                "--model".into(),
                "fifo:16".into(),
                "-o".into(),
                p(&d("o.ply")).into(),
            ],
            1,
            "writes .obj, .idx, .u16 or .u32",
        ),
        (
            vec![
                "optimize".into(),
                ok.clone(),
                "--model".into(),
                "lru:x".into(),
                "-o".into(),
                p(&d("o.obj")).into(),
            ],
            2,
            "is not a cache model",
        ),
        (vec!["measure".into(), missing.clone()], 1, "no such file"),
        (
            vec!["measure".into(), p(&d("quad.obj")).into()],
            1,
            "has 4 vertices; only triangles",
        ),
    ];
    for (args, code, message) in cases {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = vcache(&argv);
        assert_eq!(run.code, Some(code), "{argv:?}: {}{}", run.out, run.err);
        assert!(run.out.is_empty(), "{argv:?} printed: {}", run.out);
        let err = run.err.trim_end();
        assert_eq!(err.lines().count(), 1, "{argv:?}: one line: {err}");
        assert!(
            err.starts_with(&format!("gpusvc vcache {}: ", argv[0])) && err.contains(message),
            "{argv:?}: {err:?} should name {message:?}"
        );
    }
    // plot without --model reads fit's default model file; there is none in an empty cache.
    let empty = tempfile::tempdir().unwrap();
    let run = vcache_env(
        &["plot", "--out", p(empty.path())],
        &[("XDG_CACHE_HOME", p(empty.path()))],
    );
    assert_eq!(run.code, Some(1), "{}", run.err);
    assert!(
        run.err
            .starts_with("gpusvc vcache plot: no fitted model: run `gpusvc vcache fit`"),
        "{}",
        run.err
    );
    // clap's own usage errors: status 2.
    for argv in [
        &["analyze", ok.as_str()][..],
        &["analyze", ok.as_str(), "--model", "@"],
        &["optimize", ok.as_str(), "--model", "fifo:16"],
        &["measure", ok.as_str(), "--index-type", "u8"],
        &["fit", "--battery", "huge"],
    ] {
        let run = vcache(argv);
        assert_eq!(run.code, Some(2), "{argv:?}: {}", run.err);
    }
}

#[test]
fn without_a_gl_context_the_drawing_commands_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let mesh = dir.path().join("t.idx");
    std::fs::write(&mesh, "0 1 2\n").unwrap();
    let model = dir.path().join("m.txt");
    let env = [("GPUSVC_EGL_DEVICE", "999")];
    for argv in [
        vec!["measure", p(&mesh)],
        vec!["analyze", p(&mesh), "--model", "fifo:4", "--measure"],
        vec!["fit", "--out", p(&model)],
        vec![
            "plot",
            "--model",
            "fifo:4",
            "--mesh",
            p(&mesh),
            "--out",
            p(dir.path()),
        ],
    ] {
        let run = vcache_env(&argv, &env);
        assert_eq!(run.code, Some(3), "{argv:?}: {}", run.err);
        assert!(run.err.contains("no GL context"), "{argv:?}: {}", run.err);
        assert_eq!(run.err.trim_end().lines().count(), 1, "{}", run.err);
    }
    assert!(!model.exists(), "nothing saved without a driver");
}

#[test]
fn measure_prints_counts_that_repeat_and_match_the_query() {
    const TEST: &str = "measure_prints_counts_that_repeat_and_match_the_query";
    let dir = tempfile::tempdir().unwrap();
    let grid = Probe::grid(9, 9);
    let mesh = dir.path().join("grid.idx");
    write_idx(&mesh, grid.indices(), grid.vertex_count());
    let counts = dir.path().join("counts.txt");
    let run = vcache(&["measure", p(&mesh), "--counts", p(&counts)]);
    if skipped_without_gl(TEST, &run) {
        return;
    }
    assert_eq!(run.code, Some(0), "{}{}", run.out, run.err);
    assert!(run.out.contains("repeatable           yes"), "{}", run.out);
    assert!(value(&run.out, "driver:").len() > 1, "{}", run.out);
    let written: Vec<u32> = std::fs::read_to_string(&counts)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(written.len(), 100);
    let total: u64 = written.iter().map(|&c| u64::from(c)).sum();
    assert_eq!(
        value(&run.out, "invocations"),
        total.to_string(),
        "{}",
        run.out
    );
    if let Some(line) = run
        .out
        .lines()
        .find(|l| l.starts_with("pipeline statistics"))
    {
        assert!(
            line.contains("= the counts' sum") || line.contains("not available"),
            "{line}"
        );
    }
    // u16 indices with a base vertex count the same vertices.
    let counts16 = dir.path().join("counts16.txt");
    let run16 = vcache(&[
        "measure",
        p(&mesh),
        "--index-type",
        "u16",
        "--base-vertex",
        "7",
        "--counts",
        p(&counts16),
    ]);
    assert_eq!(run16.code, Some(0), "{}{}", run16.out, run16.err);
    assert!(run16.out.contains("base vertex 7"), "{}", run16.out);
    assert_eq!(
        std::fs::read_to_string(&counts16).unwrap(),
        std::fs::read_to_string(&counts).unwrap()
    );
    // analyze --measure puts the measurement beside a model.
    let both = vcache(&["analyze", p(&mesh), "--model", "fifo:16", "--measure"]);
    assert_eq!(both.code, Some(0), "{}", both.err);
    assert!(both.out.contains("mismatching vertices"), "{}", both.out);
    assert!(both.out.contains("measured"), "{}", both.out);
}

#[test]
fn fit_over_the_reduced_battery_saves_an_exact_model() {
    const TEST: &str = "fit_over_the_reduced_battery_saves_an_exact_model";
    // No --out: the model goes to $XDG_CACHE_HOME/gpusvc/vcache/model.txt.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gpusvc/vcache/model.txt");
    let run = vcache_env(
        &["fit", "--battery", "reduced"],
        &[("XDG_CACHE_HOME", p(dir.path()))],
    );
    if skipped_without_gl(TEST, &run) {
        return;
    }
    println!("{}", run.out);
    assert_eq!(run.code, Some(0), "{}{}", run.out, run.err);
    assert!(run.out.contains("exact fits ("), "{}", run.out);
    assert!(run.out.contains("runners-up"), "{}", run.out);
    let saved = std::fs::read_to_string(&file).unwrap();
    let model_line = saved
        .lines()
        .find_map(|l| l.strip_prefix("model "))
        .unwrap_or_else(|| panic!("{saved}"));
    let model: Model = model_line.parse().unwrap();
    assert!(saved.contains("\nexact yes\n"), "{saved}");
    assert!(saved.contains("\ndriver "), "{saved}");
    assert!(saved.contains("\ndate 20"), "{saved}");
    assert!(
        run.out.contains(&format!("saved {model} to ")),
        "{}",
        run.out
    );
    // The saved model predicts a mesh that was not in the battery, measured on the driver.
    let held = Probe::grid(23, 31).shuffled(5);
    let mesh = dir.path().join("held.idx");
    write_idx(&mesh, held.indices(), held.vertex_count());
    let arg = format!("@{}", p(&file));
    let check = vcache(&["analyze", p(&mesh), "--model", &arg, "--measure"]);
    assert_eq!(check.code, Some(0), "{}", check.err);
    assert_eq!(
        value(&check.out, "mismatching vertices"),
        "0",
        "{}",
        check.out
    );
}

#[test]
fn plot_writes_svg_and_png_files() {
    const TEST: &str = "plot_writes_svg_and_png_files";
    let dir = tempfile::tempdir().unwrap();
    let mesh = dir.path().join("grid.idx");
    let grid = Probe::grid(8, 8).shuffled(2);
    write_idx(&mesh, grid.indices(), grid.vertex_count());
    let model = dir.path().join("model.txt");
    std::fs::write(&model, "model fifo:16\nrunner-up lru:16 5 5\n").unwrap();
    let out = dir.path().join("plots");
    let arg = format!("@{}", p(&model));
    let run = vcache(&[
        "plot",
        "--model",
        &arg,
        "--mesh",
        p(&mesh),
        "--staircase",
        "30",
        "--out",
        p(&out),
    ]);
    if skipped_without_gl(TEST, &run) {
        return;
    }
    assert_eq!(run.code, Some(0), "{}{}", run.out, run.err);
    assert!(run.out.contains("lru:16"), "runner-up drawn: {}", run.out);
    for name in ["vcache-staircase", "vcache-optimizers"] {
        let svg = std::fs::read_to_string(out.join(format!("{name}.svg"))).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{name}"
        );
        assert!(svg.contains("<rect") || svg.contains("<polyline"), "{name}");
        let png = std::fs::read(out.join(format!("{name}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}");
        // IHDR: width and height, big-endian, at bytes 16..24.
        let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(png[20..24].try_into().unwrap());
        assert_eq!((w, h), (960, 560), "{name}");
    }
    // A font-less run still draws both formats.
    let bare = dir.path().join("bare");
    let run = vcache_env(
        &[
            "plot",
            "--model",
            "fifo:16",
            "--mesh",
            p(&mesh),
            "--staircase",
            "5",
            "--out",
            p(&bare),
        ],
        &[("GPUSVC_PLOT_FONT", "/nonexistent.ttf")],
    );
    assert_eq!(run.code, Some(0), "{}", run.err);
    assert!(run.err.contains("without text"), "{}", run.err);
    assert!(bare.join("vcache-optimizers.png").exists());
    let svg = std::fs::read_to_string(bare.join("vcache-staircase.svg")).unwrap();
    assert!(!svg.contains("<text"), "no text without a font");
}

#[test]
fn a_reader_that_closed_stdout_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mesh = dir.path().join("t.idx");
    std::fs::write(&mesh, "0 1 2\n2 1 3\n").unwrap();
    // The read end is closed before the program starts: its first write fails with EPIPE.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = std::process::Command::new(BIN)
        .args(["vcache", "analyze", p(&mesh), "--model", "fifo:4"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&status.stderr);
    assert_eq!(status.status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn fifos_as_mesh_or_model_file_and_unwritable_outputs_fail_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("mesh.obj");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let mesh = dir.path().join("m.idx");
    write_idx(&mesh, &[0, 1, 2, 2, 1, 3], 4);
    let model_at_fifo = format!("@{}", p(&fifo));
    // Nobody ever writes to the FIFO: a blocking open would hang these runs.
    for args in [
        vec!["analyze", p(&fifo), "--model", "fifo:16"],
        vec!["analyze", p(&mesh), "--model", model_at_fifo.as_str()],
    ] {
        let run = vcache(&args);
        assert_eq!(run.code, Some(1), "{args:?}: {}", run.err);
        assert!(run.err.contains("not a regular file"), "{}", run.err);
        assert_eq!(run.err.trim_end().lines().count(), 1, "{}", run.err);
    }
    // An output name the writer would refuse is refused before any work.
    for out in ["out.obj.gz", ".obj"] {
        let out = dir.path().join(out);
        let run = vcache(&["optimize", p(&mesh), "--model", "fifo:16", "-o", p(&out)]);
        assert_eq!(run.code, Some(1), "{}", run.err);
        assert!(run.err.contains("writes .obj"), "{}", run.err);
        assert!(run.out.is_empty(), "no work was done: {}", run.out);
    }
}
