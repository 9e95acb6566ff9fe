//! `gpusvc`: the command-line program of the gpusvc workspace.
//!
//! `gpusvc demo` runs the GL program binary cache end to end on the machine's own GL driver
//! (through a headless EGL context): it builds a corpus of vertex + fragment programs through a
//! `ProgramManager` twice — cold, then warm with new shader objects on the same cache — and
//! prints what the cache did and what it saved.
//!
//! # Guarantees
//! * The driver's own shader cache starts empty: `MESA_SHADER_CACHE_DIR` (and NVIDIA's
//!   `__GL_SHADER_DISK_CACHE_PATH`) point at a fresh temporary directory that is removed at exit,
//!   so the cold pass is cold and runs leave nothing behind. `MESA_SHADER_CACHE_DISABLE` is never
//!   set (it would turn program binaries off).
//! * Output is deterministic apart from timings: programs run in corpus order (built-in order, or
//!   piglit files sorted by path).
//!
//! # Errors and exit status
//! 0 when the demo ran (driver refusals of corpus programs are reported, not errors); 3 when no
//! GL context can be made, with EGL's reason on stderr; 1 for any other failure (an unreadable
//! corpus directory, no usable program); 2 for command-line errors (clap).
//!
//! # Thread safety
//! Single-threaded: the GL context lives on the main thread; the progress bar, shown only when
//! stdout is a terminal, draws from the same thread.

mod demo;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// gpusvc: GPU-process services (program binary cache, ...) on the machine's real GL driver.
#[derive(Debug, Parser)]
#[command(name = "gpusvc", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Builds a corpus of GL programs through the program cache, cold and then warm, on the
    /// machine's GL driver, and prints a table of what the cache did.
    ///
    /// Exit status: 0 when it ran, 3 when no GL context can be made, 1 on other errors.
    Demo(DemoArgs),
}

/// Which context the demo opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Api {
    /// Built-in corpus: desktop GL core, else GLES. `--corpus`: the desktop compatibility
    /// profile (piglit is mostly GLSL 1.10-1.40), else as for the built-in corpus.
    Auto,
    /// Desktop GL core profile.
    Core,
    /// Desktop GL compatibility profile.
    Compat,
    /// OpenGL ES 3.
    Gles,
}

#[derive(Debug, clap::Args)]
struct DemoArgs {
    /// A directory of piglit `.shader_test` files (searched recursively), e.g.
    /// target/corpora/piglit/tests after scripts/fetch-corpus. Default: the built-in corpus.
    #[arg(long, value_name = "DIR")]
    corpus: Option<PathBuf>,
    /// Use at most N programs, spread evenly over the (sorted, de-duplicated) corpus.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Which GL context to open.
    #[arg(long, value_enum, default_value_t = Api::Auto)]
    api: Api,
    /// The cache's byte budget, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    budget_mib: usize,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo(args) => match demo::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gpusvc demo: {e}");
                ExitCode::from(e.exit_code())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn command_line_is_consistent_and_parses() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["gpusvc", "demo", "--corpus", "x", "--limit", "5"]).unwrap();
        let Command::Demo(args) = cli.command;
        assert_eq!(args.corpus, Some(PathBuf::from("x")));
        assert_eq!(args.limit, Some(5));
        assert_eq!(args.api, Api::Auto);
        assert_eq!(args.budget_mib, 64);
        assert!(Cli::try_parse_from(["gpusvc", "demo", "--api", "vulkan"]).is_err());
        assert!(Cli::try_parse_from(["gpusvc"]).is_err());
    }
}
