//! The `gpusvc program-cache ...` spellings and their aliases (`gpusvc demo`, the hidden
//! `gpusvc cache ...`) print the same and exit the same.

use std::path::Path;
use std::process::Output;

use test_support::cli::{self, row, text};
use test_support::gl::context_or_skip;

fn gpusvc(args: &[&str], env: &[(&str, &Path)]) -> Output {
    cli::run(env!("CARGO_BIN_EXE_gpusvc"), args, env)
}

/// Runs both spellings; asserts they exit alike; returns (status, stdout, stderr) of each.
fn both(full: &[&str], alias: &[&str]) -> [(Option<i32>, String, String); 2] {
    [full, alias].map(|args| {
        let output = gpusvc(args, &[]);
        let (stdout, stderr) = text(&output);
        (output.status.code(), stdout, stderr)
    })
}

#[test]
fn folder_commands_and_their_hidden_alias_report_a_missing_folder_alike() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    for command in ["list", "verify", "stats", "clear"] {
        let [full, alias] = both(
            &["program-cache", command, "--dir", missing],
            &["cache", "--dir", missing, command],
        );
        assert_eq!(full, alias, "{command}");
        assert_eq!(full.0, Some(1), "{command}: {full:?}");
        assert!(full.2.contains(missing), "{command}: {full:?}");
    }
}

#[test]
fn program_cache_demo_and_the_demo_alias_print_the_same_report_and_folder() {
    if context_or_skip("program_cache_demo_and_the_demo_alias_print_the_same_report_and_folder")
        .is_none()
    {
        return;
    }
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let [full, alias] = [&["program-cache", "demo"][..], &["demo"][..]]
        .iter()
        .zip(&dirs)
        .map(|(spelling, dir)| {
            let mut args = spelling.to_vec();
            args.extend(["--limit", "6", "--cache-dir", dir.path().to_str().unwrap()]);
            let output = gpusvc(&args, &[]);
            let (stdout, stderr) = text(&output);
            assert!(output.status.success(), "{args:?}:\n{stdout}\n{stderr}");
            stdout
        })
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();
    // The same lines, apart from timings and the folder's name.
    let shape = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(shape(&full), shape(&alias), "{full}\n---\n{alias}");
    for label in [
        "programs",
        "linked",
        "cache hits",
        "cache misses",
        "bytes cached",
    ] {
        assert_eq!(row(&full, label), row(&alias, label), "{label}");
    }
    // Both filled their folder alike: the folder commands, in either spelling, see the same.
    let [a, b] = [0, 1].map(|i| dirs[i].path().to_str().unwrap().to_string());
    let [full, alias] = both(
        &["program-cache", "verify", "--dir", &a],
        &["cache", "verify", "--dir", &b],
    );
    assert_eq!((full.0, alias.0), (Some(0), Some(0)), "{full:?} {alias:?}");
    assert_eq!(full.1.replace(&a, "DIR"), alias.1.replace(&b, "DIR"));
    let [full, alias] = both(
        &["program-cache", "stats", "--dir", &a],
        &["cache", "stats", "--dir", &b],
    );
    assert_eq!((full.0, alias.0), (Some(0), Some(0)), "{full:?} {alias:?}");
    assert_eq!(full.1.replace(&a, "DIR"), alias.1.replace(&b, "DIR"));
}
