//! `gpusvc demo` run as a user would: every claim it prints about the cache matches the
//! counters in its table; an unusable `--cache-dir` and an invalid `GPUSVC_EGL_DEVICE` are errors;
//! without `HOME` and `XDG_CACHE_HOME` the cache lives in memory only.

use std::path::Path;
use std::process::{Command, Output};

use headless_gl::{ContextOptions, DeviceSelection};
use test_support::cli::{self, row, text};
use test_support::gl::{context_or_skip, open_or_skip};

fn gpusvc(args: &[&str], env: &[(&str, &str)]) -> Output {
    cli::run(env!("CARGO_BIN_EXE_gpusvc"), args, env)
}

/// Runs the demo and insists it succeeded; returns stdout.
fn demo_ok(args: &[&str]) -> String {
    let output = gpusvc(args, &[]);
    let (stdout, stderr) = text(&output);
    assert!(
        output.status.success(),
        "gpusvc {args:?} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    eprintln!("{stdout}");
    stdout
}

/// The summary line that starts with `prefix`.
fn line<'a>(stdout: &'a str, prefix: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{stdout}"))
}

/// The number right before `suffix` in `line` (`"... 48 programs"` -> 48 for `" programs"`).
fn number_before(line: &str, suffix: &str) -> f64 {
    let end = line
        .find(suffix)
        .unwrap_or_else(|| panic!("no {suffix:?} in {line:?}"));
    let start = line[..end]
        .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or(0, |i| i + 1);
    line[start..end]
        .parse()
        .unwrap_or_else(|_| panic!("no number before {suffix:?} in {line:?}"))
}

/// The `median Ax, total Bx` ratios a summary line quotes.
fn quoted_ratios(line: &str) -> (f64, f64) {
    (
        number_before(line, "x, total"),
        number_before(line, "x faster"),
    )
}

/// Asserts a quoted ratio is the ratio of the table's cells (printed rounded to 0.001 ms and
/// the ratio to 0.1).
fn assert_ratio(quoted: f64, (cold, warm): (f64, f64), what: &str, stdout: &str) {
    let lo = (cold - 0.0005) / (warm + 0.0005);
    let hi = (cold + 0.0005) / (warm - 0.0005).max(1e-9);
    assert!(
        quoted >= (lo * 10.0).floor() / 10.0 - 0.05 && quoted <= (hi * 10.0).ceil() / 10.0 + 0.05,
        "{what}: quoted {quoted}x, table {cold} / {warm}:\n{stdout}"
    );
}

/// The claims that credit the cache with a pass or a speed-up.
const CACHE_CLAIMS: [&str; 4] = [
    "the cache's doing",
    "served by the cache",
    "warm start:",
    "warm vs cold:",
];

fn assert_no_cache_credit_for_a_warm_pass_without_hits(stdout: &str) {
    let (programs, _) = row(stdout, "programs");
    let (hits_cold, hits_warm) = row(stdout, "cache hits");
    assert_eq!((hits_cold, hits_warm), (0.0, 0.0), "{stdout}");
    for claim in CACHE_CLAIMS {
        assert!(!stdout.contains(claim), "claims {claim:?}:\n{stdout}");
    }
    let (_, misses_warm) = row(stdout, "cache misses");
    let warm = line(stdout, "warm pass: ");
    assert!(
        warm.starts_with(&format!(
            "warm pass: 0 of {programs} programs from the cache ("
        )),
        "{warm}"
    );
    assert!(warm.contains("is not the cache's"), "{warm}");
    assert_eq!(
        number_before(warm, " cache misses were compiled"),
        misses_warm
    );
}

#[test]
fn a_budget_too_small_for_the_corpus_credits_the_cache_with_nothing() {
    if context_or_skip("a_budget_too_small_for_the_corpus_credits_the_cache_with_nothing").is_none()
    {
        return;
    }
    // 0 MiB: every save refused.
    let stdout = demo_ok(&["demo", "--no-disk-cache", "--budget-mib", "0"]);
    assert_no_cache_credit_for_a_warm_pass_without_hits(&stdout);
    let (refused_cold, refused_warm) = row(&stdout, "saves refused");
    assert!(refused_cold > 0.0, "{stdout}");
    let warm = line(&stdout, "warm pass: ");
    assert!(
        warm.contains(&format!(
            "({} saves refused over both passes: budget 0 bytes smaller than those programs)",
            refused_cold + refused_warm
        )),
        "{warm}"
    );

    // 16 KiB: programs fit one at a time, but the corpus does not (LRU over a cycle evicts each
    // program before its turn comes again), so the warm pass has no hit either.
    let stdout = demo_ok(&["demo", "--no-disk-cache", "--budget-kib", "16"]);
    assert!(stdout.contains("cache: 16 KiB budget"), "{stdout}");
    assert_no_cache_credit_for_a_warm_pass_without_hits(&stdout);
    let (evictions_cold, evictions_warm) = row(&stdout, "evictions");
    let (saved_cold, _) = row(&stdout, "programs saved");
    assert!(saved_cold > 0.0 && evictions_cold > 0.0, "{stdout}");
    let warm = line(&stdout, "warm pass: ");
    assert!(
        warm.contains("(budget 16 KiB too small for the cold pass's "),
        "{warm}"
    );
    assert_eq!(
        number_before(warm, " evictions over both passes"),
        evictions_cold + evictions_warm,
        "{warm}"
    );
}

#[test]
fn a_normal_run_credits_the_cache_with_what_its_counters_show() {
    if context_or_skip("a_normal_run_credits_the_cache_with_what_its_counters_show").is_none() {
        return;
    }
    let cache_dir = tempfile::tempdir().unwrap();
    let dir = cache_dir.path().to_str().unwrap();

    // First run: an empty disk cache, so a cold pass of misses and a warm pass of hits.
    let stdout = demo_ok(&["demo", "--cache-dir", dir]);
    let (linked, _) = row(&stdout, "linked");
    let (hits_cold, hits_warm) = row(&stdout, "cache hits");
    let claim = line(&stdout, "warm vs cold: ");
    assert!(
        claim.contains(&format!(
            "faster, the cache's doing: all {hits_warm} linked warm programs came from the \
             cache (binaries the driver accepted) and none of the cold ones did."
        )),
        "{claim}"
    );
    let (misses_cold, misses_warm) = row(&stdout, "cache misses");
    assert!(linked > 0.0);
    assert_eq!((hits_cold, misses_cold), (0.0, linked), "{stdout}");
    assert_eq!((hits_warm, misses_warm), (linked, 0.0), "{stdout}");
    let (median, total) = quoted_ratios(claim);
    assert_ratio(
        median,
        row(&stdout, "median compile+link"),
        "median",
        &stdout,
    );
    assert_ratio(total, row(&stdout, "total compile+link"), "total", &stdout);
    let (writes_cold, writes_warm) = row(&stdout, "disk writes");
    assert_eq!(
        number_before(line(&stdout, "disk cache: this run wrote"), " programs"),
        writes_cold + writes_warm,
        "{stdout}"
    );
    assert!(!stdout.contains("warm start:"), "{stdout}");
    assert!(!stdout.contains("served by the cache"), "{stdout}");

    // Second run: both passes from the cache, the cold one from what was loaded from disk.
    let stdout = demo_ok(&["demo", "--cache-dir", dir]);
    let (programs, _) = row(&stdout, "programs");
    let (hits_cold, hits_warm) = row(&stdout, "cache hits");
    let (loaded, _) = row(&stdout, "loaded from disk");
    assert_eq!((hits_cold, hits_warm), (linked, linked), "{stdout}");
    let start = line(&stdout, "warm start: ");
    assert!(
        start.starts_with(&format!(
            "warm start: {hits_cold} of the cold pass's {programs} programs were cache hits; \
             before the pass the cache held only the {loaded} programs loaded from the disk \
             cache at startup"
        )),
        "{start}"
    );
    let warm = line(&stdout, "warm pass: ");
    assert!(
        warm.starts_with(&format!(
            "warm pass: all {hits_warm} programs from the cache, as in the cold pass: both \
             passes were served by the cache"
        )),
        "{warm}"
    );
    assert!(!stdout.contains("the cache's doing"), "{stdout}");
    assert!(!stdout.contains("faster"), "{stdout}");
}

/// Runs the demo with `--cache-dir dir` and asserts it fails with status 1 before printing a
/// report, naming the folder and `why`.
fn assert_cache_dir_refused(dir: &Path, why: &str) {
    let output = gpusvc(
        &["demo", "--limit", "2", "--cache-dir", dir.to_str().unwrap()],
        &[],
    );
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.is_empty(),
        "no report for an unusable folder:\n{stdout}"
    );
    assert!(
        stderr.starts_with(&format!(
            "gpusvc demo: --cache-dir {}: the folder cannot be used for the disk cache: ",
            dir.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains(why), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn an_explicit_cache_dir_that_cannot_be_used_is_an_error() {
    if context_or_skip("an_explicit_cache_dir_that_cannot_be_used_is_an_error").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"not a folder").unwrap();
    let not_a_folder = format!("{} exists and is not a folder", file.display());
    assert_cache_dir_refused(&file, &not_a_folder);
    assert_cache_dir_refused(&file.join("cache"), &not_a_folder);
    assert_eq!(std::fs::read(&file).unwrap(), b"not a folder");
}

/// The environment a GL process needs, when set: the rest is cleared.
const GL_ENV: [&str; 8] = [
    "PATH",
    "LD_LIBRARY_PATH",
    "GPUSVC_EGL_DEVICE",
    "__EGL_VENDOR_LIBRARY_FILENAMES",
    "__EGL_VENDOR_LIBRARY_DIRS",
    "LIBGL_DRIVERS_PATH",
    "GALLIUM_DRIVER",
    "EGL_PLATFORM",
];

#[test]
fn without_home_or_xdg_cache_home_the_cache_lives_in_memory_only() {
    if context_or_skip("without_home_or_xdg_cache_home_the_cache_lives_in_memory_only").is_none() {
        return;
    }
    let cwd = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpusvc"));
    command
        .args(["demo", "--limit", "2"])
        .current_dir(cwd.path())
        .env_clear()
        .env("TMPDIR", tmp.path());
    for name in GL_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    let output = command.output().expect("gpusvc runs");
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.starts_with(
            "gpusvc demo: warning: neither XDG_CACHE_HOME nor HOME is set to an absolute path"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("memory only"), "{stderr}");
    assert!(
        stdout.contains("disk cache: off (no XDG_CACHE_HOME or HOME"),
        "{stdout}"
    );
    assert!(!stdout.contains("loaded from disk"), "{stdout}");
    // No folder in the current directory, and none left in the temporary one (the driver's
    // shader cache there is removed at exit).
    let left = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(left(cwd.path()), Vec::<String>::new());
    assert_eq!(left(tmp.path()), Vec::<String>::new());
}

#[test]
fn an_unparsable_gpusvc_egl_device_is_an_error_naming_the_valid_forms() {
    // No GL needed: the value is refused before EGL is asked for anything else than its list.
    for value in ["banana", "-1", "hardware2"] {
        let output = gpusvc(
            &["demo", "--no-disk-cache"],
            &[("GPUSVC_EGL_DEVICE", value)],
        );
        let (stdout, stderr) = text(&output);
        assert_eq!(output.status.code(), Some(3), "{value}: {stdout}\n{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
        for part in [
            "gpusvc demo: no GL context could be made: ",
            &format!("GPUSVC_EGL_DEVICE: {value:?} is not a device selection"),
            "valid forms: auto",
            "hardware, software, or a device index",
            "EGL lists ",
        ] {
            assert!(stderr.contains(part), "{value}: {part:?} not in {stderr}");
        }
    }
}

#[test]
fn gpusvc_egl_device_hardware_never_falls_back_to_software() {
    let prefer = ContextOptions {
        device: DeviceSelection::PreferHardware,
        ..ContextOptions::default()
    };
    let Some(ctx) = open_or_skip(
        "gpusvc_egl_device_hardware_never_falls_back_to_software",
        &prefer,
    ) else {
        return;
    };
    let device = ctx.info().device.clone();
    drop(ctx);
    let output = gpusvc(
        &["demo", "--no-disk-cache", "--limit", "2"],
        &[("GPUSVC_EGL_DEVICE", "hardware")],
    );
    let (stdout, stderr) = text(&output);
    if !device.software {
        // A hardware device gave a context: the demo runs on it.
        assert!(output.status.success(), "{stdout}\n{stderr}");
        assert!(
            !line(&stdout, "driver: ").ends_with("(software)"),
            "{stdout}"
        );
        return;
    }
    // Preferring hardware ended on a software device: no hardware device gives a context, so
    // asking for one must fail rather than run on software.
    assert_eq!(output.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.starts_with("gpusvc demo: no GL context could be made: "),
        "{stderr}"
    );
    if device.device_count == 1 {
        // The one device is a software one (Mesa llvmpipe alone): nothing to ask for.
        assert!(
            stderr.contains(
                "GPUSVC_EGL_DEVICE=hardware: a hardware device was asked for and none of EGL's \
                 devices is one; EGL lists 1 device: 0: software"
            ),
            "{stderr}"
        );
        assert!(!stderr.contains("libegl1"), "no package hint: {stderr}");
    }
}

#[test]
fn an_out_of_range_gpusvc_egl_device_index_names_the_devices_found() {
    if context_or_skip("an_out_of_range_gpusvc_egl_device_index_names_the_devices_found").is_none()
    {
        return;
    }
    let output = gpusvc(
        &["demo", "--no-disk-cache"],
        &[("GPUSVC_EGL_DEVICE", "999")],
    );
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(3), "{stdout}\n{stderr}");
    for part in [
        "GPUSVC_EGL_DEVICE=999: device 999 was asked for and EGL lists ",
        "valid forms: auto",
        "or a device index (0 to ",
    ] {
        assert!(stderr.contains(part), "{part:?} not in {stderr}");
    }
    assert!(
        stderr.contains("1 device: 0: ") || stderr.contains("devices: 0: "),
        "{stderr}"
    );
}

/// A `.shader_test` file of one vertex + fragment program.
fn shader_test(dir: &Path, name: &str, vertex: &str, fragment: &str) {
    let text = format!(
        "[require]\nGLSL >= 1.30\n\n[vertex shader]\n#version 130\n{vertex}\n\n\
         [fragment shader]\n#version 130\n{fragment}\n\n[test]\n"
    );
    std::fs::write(dir.join(name), text).unwrap();
}

/// Five programs: one that links, two whose vertex shader fails (the same one), one whose
/// fragment shader fails, one that fails to link.
fn refusing_corpus(dir: &Path) {
    let good_vs = "in vec4 p;\nvoid main() { gl_Position = p; }";
    let good_fs = "out vec4 c;\nvoid main() { c = vec4(1.0); }";
    shader_test(dir, "good.shader_test", good_vs, good_fs);
    // Two programs whose vertex shader fails, one whose fragment shader fails: the second
    // vertex failure is known to the cache already in the cold pass.
    let bad_vs = "void main() { gl_Position = undeclared; }";
    shader_test(dir, "bad_vs.shader_test", bad_vs, good_fs);
    let other_fs = "out vec4 c;\nvoid main() { c = vec4(0.5); }";
    shader_test(dir, "bad_vs_again.shader_test", bad_vs, other_fs);
    let bad_fs = "out vec4 c;\nvoid main() { c = nothing; }";
    shader_test(dir, "bad_fs.shader_test", good_vs, bad_fs);
    // A link failure: the fragment shader calls a function no shader defines.
    let calls = "out vec4 c;\nvec4 f();\nvoid main() { c = f(); }";
    shader_test(dir, "bad_link.shader_test", good_vs, calls);
}

#[test]
fn programs_the_driver_refuses_are_counted_as_such_and_answered_by_the_failure_records() {
    if context_or_skip(
        "programs_the_driver_refuses_are_counted_as_such_and_answered_by_the_failure_records",
    )
    .is_none()
    {
        return;
    }
    let corpus = tempfile::tempdir().unwrap();
    refusing_corpus(corpus.path());
    let stdout = demo_ok(&[
        "demo",
        "--no-disk-cache",
        "--corpus",
        corpus.path().to_str().unwrap(),
    ]);
    assert_eq!(row(&stdout, "programs"), (5.0, 5.0), "{stdout}");
    assert_eq!(row(&stdout, "linked"), (1.0, 1.0), "{stdout}");
    // A compile failure the cache knew of is a compile failure, not a link failure.
    assert_eq!(row(&stdout, "compile failures"), (3.0, 3.0), "{stdout}");
    assert_eq!(row(&stdout, "link failures"), (1.0, 1.0), "{stdout}");
    // Cold: the repeated vertex shader; warm: every failing shader and the failing link.
    assert_eq!(row(&stdout, "failures from cache"), (1.0, 4.0), "{stdout}");
    let (compiles_cold, compiles_warm) = row(&stdout, "driver compiles");
    assert_eq!(compiles_warm, 0.0, "{stdout}");
    assert!(compiles_cold >= 6.0, "{stdout}");
    let totals = line(&stdout, "totals include ");
    assert_eq!(
        totals,
        "totals include the 4 programs the driver refuses; in the warm pass the cache's \
         failure records answered 4 compiles and links (with the driver's logs) that the \
         driver refused before.",
        "{stdout}"
    );
    assert!(!stdout.contains("not cached"), "{stdout}");
}

#[test]
fn a_warm_start_compiles_no_shader_of_a_program_the_driver_refused() {
    if context_or_skip("a_warm_start_compiles_no_shader_of_a_program_the_driver_refused").is_none()
    {
        return;
    }
    let corpus = tempfile::tempdir().unwrap();
    refusing_corpus(corpus.path());
    let cache_dir = tempfile::tempdir().unwrap();
    let args = [
        "demo",
        "--cache-dir",
        cache_dir.path().to_str().unwrap(),
        "--corpus",
        corpus.path().to_str().unwrap(),
    ];
    let first = demo_ok(&args);
    assert!(row(&first, "driver compiles").0 >= 6.0, "{first}");
    // The next process: the linked programs from their binaries, the failures from their
    // records, and the one shader whose programs all failed for the other shader
    // (`bad_vs_again`'s fragment shader) known compiled from `compiled.list`.
    let second = demo_ok(&args);
    assert_eq!(row(&second, "driver compiles"), (0.0, 0.0), "{second}");
    assert_eq!(row(&second, "compile failures"), (3.0, 3.0), "{second}");
    assert_eq!(row(&second, "link failures"), (1.0, 1.0), "{second}");
    assert_eq!(row(&second, "cache hits"), (1.0, 1.0), "{second}");
}

/// Every file below `dir` with its length, sorted.
fn files_below(dir: &Path) -> Vec<(std::path::PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                let len = entry.metadata().unwrap().len();
                out.push((path, len));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn priming_the_driver_cache_compiles_nothing_and_reports_what_the_folder_holds() {
    if context_or_skip(
        "priming_the_driver_cache_compiles_nothing_and_reports_what_the_folder_holds",
    )
    .is_none()
    {
        return;
    }
    let driver = tempfile::tempdir().unwrap();
    let ours = tempfile::tempdir().unwrap();
    let dir = driver.path().to_str().unwrap();
    let stdout = demo_ok(&[
        "demo",
        "--single-pass",
        "--prime-driver-cache",
        "--driver-cache-dir",
        dir,
        "--cache-dir",
        ours.path().to_str().unwrap(),
    ]);
    let primed = files_below(driver.path());
    let bytes: u64 = primed.iter().map(|(_, len)| len).sum();
    assert_eq!(
        line(&stdout, "gpusvc-startup-primed "),
        format!("gpusvc-startup-primed files={} bytes={bytes}", primed.len()),
        "{stdout}"
    );
    // No pass ran, and our disk cache is never opened.
    assert!(!stdout.contains("gpusvc-startup "), "{stdout}");
    assert_eq!(std::fs::read_dir(ours.path()).unwrap().count(), 0);
    // A driver without a disk shader cache (Mesa's disabled, or another vendor's) sets nothing
    // up, and there is nothing more to check.
    if primed.is_empty() || std::env::var_os("MESA_SHADER_CACHE_DISABLE").is_some() {
        eprintln!("the driver set up no shader cache folder: nothing cached to compare");
        return;
    }
    // The driver holds no program: one pass compiling straight on the driver adds to the folder.
    demo_ok(&[
        "demo",
        "--single-pass",
        "--plain-driver",
        "--settle-driver-cache",
        "--no-disk-cache",
        "--driver-cache-dir",
        dir,
    ]);
    let after = files_below(driver.path());
    assert!(
        after.len() > primed.len(),
        "the driver cached nothing it compiled: {primed:?} then {after:?}"
    );
    for file in &primed {
        assert!(
            after.iter().any(|(path, _)| *path == file.0),
            "{file:?} gone"
        );
    }
}

#[test]
fn priming_the_driver_cache_needs_single_pass_and_a_driver_cache_dir_and_runs_no_pass() {
    let prime = ["demo", "--single-pass", "--prime-driver-cache"];
    let mut refused: Vec<Vec<&str>> = vec![
        vec!["demo", "--prime-driver-cache", "--driver-cache-dir", "d"],
        prime.to_vec(),
    ];
    // Combined with a mode that runs a pass.
    for mode in [
        "--plain-driver",
        "--restore-floor",
        "--restore-ahead",
        "--settle-driver-cache",
    ] {
        refused.push([&prime[..], &["--driver-cache-dir", "d", mode]].concat());
    }
    for args in refused {
        let output = gpusvc(&args, &[]);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
}
