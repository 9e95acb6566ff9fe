//! The built `gpusvc` binary, run as a user would.

use std::process::Output;

use test_support::cli::{self, row};
use test_support::gl::context_or_skip;

fn gpusvc(args: &[&str], env: &[(&str, &str)]) -> Output {
    cli::run(env!("CARGO_BIN_EXE_gpusvc"), args, env)
}

#[test]
fn demo_on_the_builtin_corpus_hits_the_cache_for_every_program_warm() {
    // The binary opens its own context; this one only decides skip versus run.
    if context_or_skip("demo_on_the_builtin_corpus_hits_the_cache_for_every_program_warm").is_none()
    {
        return;
    }
    let cache_dir = tempfile::tempdir().unwrap();
    let output = gpusvc(
        &["demo", "--cache-dir", cache_dir.path().to_str().unwrap()],
        &[],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "gpusvc demo failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    eprintln!("{stdout}");
    assert!(stdout.starts_with("driver: "), "{stdout}");
    assert!(stdout.contains("corpus: built-in: "), "{stdout}");

    let (programs_cold, programs_warm) = row(&stdout, "programs");
    let (linked_cold, linked_warm) = row(&stdout, "linked");
    let (hits_cold, hits_warm) = row(&stdout, "cache hits");
    let (rejections_cold, rejections_warm) = row(&stdout, "binary rejections");
    let (bytes_cold, bytes_warm) = row(&stdout, "bytes cached");
    let (entries_cold, entries_warm) = row(&stdout, "programs cached");
    let (median_cold, median_warm) = row(&stdout, "median compile+link");

    assert!(programs_cold > 0.0);
    assert_eq!(programs_cold, programs_warm);
    // Every built-in program links, cold and warm, and every warm link is a cache hit.
    assert_eq!(linked_cold, programs_cold, "{stdout}");
    assert_eq!(linked_warm, linked_cold, "{stdout}");
    assert_eq!(hits_cold, 0.0, "{stdout}");
    assert_eq!(hits_warm, linked_warm, "{stdout}");
    assert_eq!((rejections_cold, rejections_warm), (0.0, 0.0));
    assert_eq!((entries_cold, entries_warm), (linked_cold, linked_cold));
    assert!(bytes_cold > 0.0 && bytes_cold == bytes_warm, "{stdout}");
    assert!(median_cold > 0.0 && median_warm > 0.0, "{stdout}");
    // A first run on an empty disk cache: nothing loaded, every linked program written once.
    assert_eq!(row(&stdout, "loaded from disk"), (0.0, 0.0), "{stdout}");
    assert_eq!(row(&stdout, "disk writes"), (linked_cold, 0.0), "{stdout}");
    assert!(row(&stdout, "disk bytes written").0 > 0.0, "{stdout}");
}

#[test]
fn a_second_demo_run_starts_warm_from_the_disk_cache() {
    if context_or_skip("a_second_demo_run_starts_warm_from_the_disk_cache").is_none() {
        return;
    }
    let cache_dir = tempfile::tempdir().unwrap();
    let dir = cache_dir.path().to_str().unwrap();
    // Each run makes its own fresh MESA_SHADER_CACHE_DIR: the driver's cache is cold both times.
    let first = gpusvc(&["demo", "--cache-dir", dir], &[]);
    let first_out = String::from_utf8_lossy(&first.stdout).into_owned();
    assert!(first.status.success(), "{first_out}");
    let second = gpusvc(&["demo", "--cache-dir", dir], &[]);
    let stdout = String::from_utf8_lossy(&second.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stdout}\n{stderr}");
    eprintln!("{stdout}");

    let (linked_first, _) = row(&first_out, "linked");
    let (programs, _) = row(&stdout, "programs");
    let (linked_cold, linked_warm) = row(&stdout, "linked");
    let (hits_cold, hits_warm) = row(&stdout, "cache hits");
    assert!(programs > 0.0);
    assert_eq!(linked_cold, linked_first, "{stdout}");
    // The second run's first pass: every linked program is a cache hit from disk.
    assert_eq!(hits_cold, linked_cold, "{stdout}");
    assert_eq!(hits_warm, linked_warm, "{stdout}");
    assert_eq!(row(&stdout, "binary rejections"), (0.0, 0.0), "{stdout}");
    assert_eq!(
        row(&stdout, "loaded from disk"),
        (linked_cold, 0.0),
        "{stdout}"
    );
    assert_eq!(row(&stdout, "disk writes"), (0.0, 0.0), "{stdout}");
    assert!(stdout.contains("warm start: "), "{stdout}");
    assert!(
        stdout.contains(&format!("{} programs loaded at startup", linked_cold)),
        "{stdout}"
    );
}

#[test]
fn demo_without_the_disk_cache_leaves_no_folder_and_prints_no_disk_rows() {
    if context_or_skip("demo_without_the_disk_cache_leaves_no_folder_and_prints_no_disk_rows")
        .is_none()
    {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let output = gpusvc(
        &["demo", "--no-disk-cache", "--limit", "4"],
        &[("XDG_CACHE_HOME", home.path().to_str().unwrap())],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("disk cache: off"), "{stdout}");
    assert!(!stdout.contains("disk writes"), "{stdout}");
    assert_eq!(row(&stdout, "cache hits"), (0.0, 4.0), "{stdout}");
    assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 0);
}

#[test]
fn demo_without_a_gl_context_exits_non_zero_and_says_why() {
    // Device 999 does not exist on any machine; without libEGL the reason differs, the exit
    // status does not.
    let cache_dir = tempfile::tempdir().unwrap();
    let output = gpusvc(
        &["demo", "--cache-dir", cache_dir.path().to_str().unwrap()],
        &[("GPUSVC_EGL_DEVICE", "999")],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "stderr: {stderr}");
    assert!(
        stderr.contains("no GL context could be made"),
        "stderr: {stderr}"
    );
    assert!(
        output.stdout.is_empty(),
        "nothing on stdout without a driver"
    );
}

#[test]
fn demo_with_a_missing_corpus_directory_fails_before_touching_the_driver() {
    let output = gpusvc(&["demo", "--corpus", "/nonexistent/piglit"], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("/nonexistent/piglit"), "stderr: {stderr}");
    assert!(output.stdout.is_empty());
}
