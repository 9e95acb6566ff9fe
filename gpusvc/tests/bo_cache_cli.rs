//! `gpusvc bo-cache stress` as a user runs it: a short multi-threaded run on the memfd backend
//! exits 0 and prints counters that agree with each other.

use test_support::cli::{self, text};

fn stress(args: &[&str]) -> (Option<i32>, String, String) {
    let mut argv = vec!["bo-cache", "stress"];
    argv.extend_from_slice(args);
    let output = cli::run(env!("CARGO_BIN_EXE_gpusvc"), &argv, &[] as &[(&str, &str)]);
    let (stdout, stderr) = text(&output);
    (output.status.code(), stdout, stderr)
}

/// The number on the line labelled `label` (the label, then spaces, then the number).
fn counter(report: &str, label: &str) -> u64 {
    let line = report
        .lines()
        .find(|l| {
            l.strip_prefix(label)
                .is_some_and(|rest| rest.starts_with("  ") && !rest.trim().contains(' '))
        })
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{report}"));
    line[label.len()..]
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

#[test]
fn a_short_stress_run_exits_0_with_consistent_counters() {
    let (code, out, err) = stress(&["--threads", "4", "--buffers", "6", "--rounds", "2000"]);
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("4 threads, 6 buffers, memfd backend"), "{out}");
    let c = |label| counter(&out, label);
    assert_eq!(c("rounds"), 4 * 2000, "{out}");
    for zero in [
        "errors",
        "cache double closes",
        "kernel double closes",
        "cache close errors",
        "cache size rejects",
        "cache foreign handles",
        "cache live",
        "kernel open handles",
    ] {
        assert_eq!(c(zero), 0, "{zero}:\n{out}");
    }
    // Every import is a hit or a miss; every miss made an object whose handle was closed once,
    // and the fake created exactly those handles and closed exactly those.
    assert_eq!(c("cache hits") + c("cache misses"), c("imports"), "{out}");
    assert!(c("cache misses") >= 6, "{out}");
    assert_eq!(c("cache closes"), c("cache misses"), "{out}");
    assert_eq!(c("kernel handles created"), c("cache misses"), "{out}");
    assert_eq!(c("kernel closes"), c("cache closes"), "{out}");
    assert_eq!(c("kernel reimports"), c("cache hits"), "{out}");
    assert!(c("releases") >= c("imports"), "{out}");
}

#[test]
fn a_timed_run_stops_and_exits_0() {
    let (code, out, err) = stress(&["--threads", "2", "--buffers", "3", "--seconds", "0.2"]);
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(counter(&out, "kernel double closes"), 0, "{out}");
    assert_eq!(counter(&out, "kernel open handles"), 0, "{out}");
}

#[test]
fn seconds_and_rounds_together_are_a_usage_error() {
    let (code, _, err) = stress(&["--seconds", "1", "--rounds", "5"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn help_names_both_backends() {
    let (code, out, _) = stress(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("memfd fake") && out.contains("--device"),
        "{out}"
    );
}

#[test]
fn a_device_that_is_not_a_render_node_exits_1_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("renderD128");
    std::fs::write(&file, b"").unwrap();
    for path in [file.to_str().unwrap(), "/dev/null"] {
        let (code, out, err) = stress(&["--device", path, "--rounds", "1"]);
        assert_eq!(code, Some(1), "{out}{err}");
        assert!(err.contains("not a DRM render node"), "{err}");
        assert!(out.is_empty(), "no counters when nothing ran: {out}");
    }
}

#[test]
fn device_auto_runs_on_a_render_node_or_says_why_not() {
    let (code, out, err) = stress(&["--device", "auto", "--rounds", "50", "--threads", "2"]);
    if bo_cache::DmaBufSource::find().is_ok() {
        assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
        assert!(out.contains("render node"), "{out}");
        assert_eq!(counter(&out, "cache double closes"), 0, "{out}");
        assert_eq!(counter(&out, "cache live"), 0, "{out}");
    } else {
        assert_eq!(code, Some(1), "{out}{err}");
        assert!(
            err.contains("render node") || err.contains("dma-buf"),
            "{err}"
        );
    }
}

#[test]
fn seconds_and_rounds_outside_their_range_are_usage_errors() {
    for bad in [
        ["--seconds", "inf"],
        ["--seconds", "NaN"],
        ["--seconds", "0"],
        ["--seconds=-5", "--threads=1"],
        ["--seconds", "1e30"],
        ["--rounds", "0"],
    ] {
        let (code, out, err) = stress(&bad);
        assert_eq!(code, Some(2), "{bad:?}: {out}{err}");
        assert!(out.is_empty(), "{bad:?}: nothing ran: {out}");
    }
}

#[test]
fn a_reader_that_closes_stdout_early_does_not_make_the_run_fail() {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpusvc"))
        .args(["bo-cache", "stress", "--rounds", "50", "--threads", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away before the report is printed
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
