//! Running a built binary as a user would and reading what it prints.

use std::ffi::OsStr;
use std::process::{Command, Output};

/// Runs `program` with `args` and the extra environment `env` (the rest is inherited) to
/// completion. Panics when it cannot be started.
///
/// Integration tests pass `env!("CARGO_BIN_EXE_<name>")` as `program`.
pub fn run<V: AsRef<OsStr>>(program: &str, args: &[&str], env: &[(&str, V)]) -> Output {
    let mut command = Command::new(program);
    command.args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    command
        .output()
        .unwrap_or_else(|e| panic!("{program} does not run: {e}"))
}

/// Runs the ignored test `test` of this test executable in a child process, with the variables
/// in `env` set (`Some`) or removed (`None`) and the rest inherited, and returns its stdout;
/// panics (with that output) when the child fails. For tests that need an environment of their
/// own: changing this process's environment is not thread-safe.
pub fn run_ignored_test(test: &str, env: &[(&str, Option<&str>)]) -> String {
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut command = Command::new(&exe);
    command.args(["--exact", test, "--nocapture", "--ignored"]);
    for (k, v) in env {
        match v {
            Some(v) => command.env(k, v),
            None => command.env_remove(k),
        };
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{} does not run: {e}", exe.display()));
    let (stdout, stderr) = text(&output);
    assert!(
        output.status.success(),
        "{test} failed:\n{stdout}\n{stderr}"
    );
    stdout
}

/// Stdout and stderr of `output`, as text (invalid UTF-8 replaced).
pub fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The two number cells (cold and warm) of the table row labelled `label` (the label followed by
/// at least two spaces), as numbers; a trailing unit is dropped. Panics when there is no such row
/// or it does not hold exactly two numbers.
pub fn row(table: &str, label: &str) -> (f64, f64) {
    let line = table
        .lines()
        .find(|l| {
            l.strip_prefix(label)
                .is_some_and(|rest| rest.starts_with("  "))
        })
        .unwrap_or_else(|| panic!("no {label:?} row in:\n{table}"));
    let numbers: Vec<f64> = line[label.len()..]
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(numbers.len(), 2, "row {line:?}");
    (numbers[0], numbers[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
programs            48        48
programs linked     48         0
cache hits           0        48
link time     12.500 ms   0.750 ms
";

    #[test]
    fn a_row_is_found_by_its_whole_label_and_its_units_are_dropped() {
        assert_eq!(row(TABLE, "programs"), (48.0, 48.0));
        assert_eq!(row(TABLE, "programs linked"), (48.0, 0.0));
        assert_eq!(row(TABLE, "link time"), (12.5, 0.75));
    }

    #[test]
    #[should_panic(expected = "no \"cache misses\" row")]
    fn a_missing_row_panics_with_the_label() {
        row(TABLE, "cache misses");
    }

    #[test]
    fn run_passes_arguments_and_environment() {
        let output = run(
            "sh",
            &["-c", "echo \"$1 $GREETING\"", "sh", "hi"],
            &[("GREETING", "there")],
        );
        assert!(output.status.success());
        assert_eq!(text(&output).0, "hi there\n");
    }
}
