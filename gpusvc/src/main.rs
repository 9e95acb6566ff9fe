//! `gpusvc`: the command-line program of the gpusvc workspace.
//!
//! `gpusvc demo` runs the GL program binary cache end to end on the machine's own GL driver
//! (through a headless EGL context): it builds a corpus of vertex + fragment programs through a
//! `ProgramManager` twice — cold, then warm with new shader objects on the same cache — and
//! prints what the cache did and what it saved. Every sentence it prints about the cache (programs
//! served by it, loaded from disk, a speed-up that is the cache's) is read from the cache's
//! counters of that pass; where they do not support a claim it says what they show instead (e.g. a
//! budget too small for the corpus: 0 programs from the cache, and a time difference that is not
//! the cache's). The cache is backed by the persistent disk store (`--cache-dir`, default
//! `$XDG_CACHE_HOME/gpusvc`, else `~/.cache/gpusvc`; `--no-disk-cache` turns it off), so a second
//! run starts warm: its cold pass finds the programs the first run linked (as many as the budget
//! holds). A `--cache-dir` that cannot be used is an error; the default folder falls back to memory
//! with a warning on stderr, as does a run with neither `XDG_CACHE_HOME` nor `HOME` set (never a
//! folder in the current directory).
//!
//! `gpusvc cache list|verify|stats|clear` inspects that folder without opening a cache.
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
//! 0 when the command ran (driver refusals of corpus programs are reported, not errors); 3 when
//! no GL context can be made, with EGL's reason on stderr (this includes a `GPUSVC_EGL_DEVICE`
//! that is not a valid form, an index EGL does not list, or `hardware` on a machine without a
//! hardware device: the message lists the valid forms and the devices found); 4 when `gpusvc
//! cache verify` or `gpusvc cache stats` found a corrupt entry or a damaged store; 1 for any
//! other failure (an unreadable corpus directory, no usable program, a `--cache-dir` that cannot
//! be used, a missing cache folder, a `gpusvc cache clear` refused because a running cache uses
//! a store); 2 for command-line errors (clap).
//!
//! # Thread safety
//! The GL context lives on the main thread; the progress bar, shown only when stdout is a
//! terminal, draws from the same thread. The disk cache's writer and loader threads start after
//! the environment is set up (see `demo::isolate_driver_cache`).

mod cache;
mod demo;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

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
    /// Exit status: 0 when it ran, 3 when no GL context can be made (GPUSVC_EGL_DEVICE invalid
    /// or naming no usable device included), 1 on other errors (a --cache-dir that cannot be
    /// used included).
    Demo(DemoArgs),
    /// Inspects the program cache's disk folder: list, verify, stats, clear.
    ///
    /// Exit status: 0 when it ran, 4 when `verify` or `stats` found a corrupt entry or a
    /// damaged store, 1
    /// when the folder is missing or unreadable, or `clear` was refused.
    Cache(CacheArgs),
}

#[derive(Debug, clap::Args)]
struct CacheArgs {
    /// The cache folder. Default: $XDG_CACHE_HOME/gpusvc (else ~/.cache/gpusvc).
    #[arg(long, value_name = "DIR", global = true)]
    dir: Option<PathBuf>,
    #[command(subcommand)]
    command: CacheCommand,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
enum CacheCommand {
    /// Every entry: key, size, age and the stamp its header names; a header line per stamp store
    /// (damaged stores included, marked as such).
    List,
    /// Checks every entry fully (header, stamp, checksums, decode) and every store (STAMP,
    /// readable entries folder); prints each problem and exits with status 4 if there is one.
    Verify,
    /// Stores, entries, bytes (file lengths and allocated on disk) and temporary files; exits
    /// with status 4 when an entry is corrupt or a store damaged.
    Stats,
    /// Deletes every store in the folder (every stamp): only the files the cache format
    /// defines; folders that are not provably stores are never touched. Refuses (exit 1,
    /// nothing deleted) while a running cache uses a store, unless --force.
    Clear {
        /// Delete stores a running cache is using (it recreates its folder and reports it).
        #[arg(long)]
        force: bool,
    },
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
    /// The cache's byte budget, in MiB (memory, and the disk store's).
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    budget_mib: usize,
    /// (tests) The cache's byte budget in KiB, instead of --budget-mib: budgets smaller than the
    /// built-in corpus (a few hundred KiB of binaries).
    #[arg(long, hide = true, value_name = "KIB", conflicts_with = "budget_mib")]
    budget_kib: Option<usize>,
    /// The disk cache folder: programs linked in one run load from it at the start of the next.
    /// A folder that cannot be used (a file, not creatable, not writable) is an error. Default:
    /// $XDG_CACHE_HOME/gpusvc (else ~/.cache/gpusvc); when that cannot be used, or neither
    /// variable is set, the run warns and keeps the cache in memory only.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// No disk cache: the cache lives in memory only and every run starts cold.
    #[arg(long, conflicts_with = "cache_dir")]
    no_disk_cache: bool,
    /// (benchmarks) One pass, then one `gpusvc-startup ...` line instead of the table.
    #[arg(long, hide = true)]
    single_pass: bool,
    /// (benchmarks) The driver's shader-cache folder, kept, instead of a fresh temporary one.
    #[arg(long, hide = true, value_name = "DIR")]
    driver_cache_dir: Option<PathBuf>,
    /// (benchmarks) With --single-pass: compile and link straight on the driver, no program cache.
    #[arg(long, hide = true, requires = "single_pass")]
    plain_driver: bool,
    /// (benchmarks) With --single-pass: before exiting, wait until the driver's shader-cache
    /// folder stops changing (the driver writes it from a background queue that is not drained
    /// at exit).
    #[arg(long, hide = true, requires = "single_pass")]
    settle_driver_cache: bool,
}

fn main() -> ExitCode {
    let started = Instant::now();
    let cli = Cli::parse();
    match cli.command {
        Command::Demo(args) => match demo::run(&args, started) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gpusvc demo: {e}");
                ExitCode::from(e.exit_code())
            }
        },
        Command::Cache(args) => match cache::run(&args) {
            Ok(cache::Outcome::Ok) => ExitCode::SUCCESS,
            Ok(cache::Outcome::Corrupt) => ExitCode::from(cache::EXIT_CORRUPT),
            Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gpusvc cache: {e}");
                ExitCode::FAILURE
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
        let Command::Demo(args) = cli.command else {
            panic!("not demo")
        };
        assert_eq!(args.corpus, Some(PathBuf::from("x")));
        assert_eq!(args.limit, Some(5));
        assert_eq!(args.api, Api::Auto);
        assert_eq!(args.budget_mib, 64);
        assert_eq!(args.budget_kib, None);
        assert_eq!(args.budget_bytes(), 64 << 20);
        assert_eq!(args.cache_dir, None);
        assert!(!args.no_disk_cache && !args.single_pass && !args.plain_driver);
        assert!(!args.settle_driver_cache);
        assert!(Cli::try_parse_from(["gpusvc", "demo", "--api", "vulkan"]).is_err());
        assert!(Cli::try_parse_from(["gpusvc"]).is_err());
        assert!(
            Cli::try_parse_from(["gpusvc", "demo", "--no-disk-cache", "--cache-dir", "d"]).is_err()
        );
        assert!(Cli::try_parse_from(["gpusvc", "demo", "--plain-driver"]).is_err());
        let Command::Demo(args) = Cli::try_parse_from(["gpusvc", "demo", "--budget-kib", "48"])
            .unwrap()
            .command
        else {
            panic!("not demo")
        };
        assert_eq!(args.budget_bytes(), 48 << 10);
        assert!(
            Cli::try_parse_from(["gpusvc", "demo", "--budget-kib", "1", "--budget-mib", "1"])
                .is_err()
        );
    }

    #[test]
    fn cache_commands_parse_with_the_folder_before_or_after() {
        for argv in [
            &["gpusvc", "cache", "--dir", "d", "verify"][..],
            &["gpusvc", "cache", "verify", "--dir", "d"][..],
        ] {
            let Command::Cache(args) = Cli::try_parse_from(argv).unwrap().command else {
                panic!("not cache")
            };
            assert_eq!(args.dir, Some(PathBuf::from("d")));
            assert_eq!(args.command, CacheCommand::Verify);
        }
        let Command::Cache(args) = Cli::try_parse_from(["gpusvc", "cache", "list"])
            .unwrap()
            .command
        else {
            panic!("not cache")
        };
        assert_eq!((args.dir, args.command), (None, CacheCommand::List));
        assert!(Cli::try_parse_from(["gpusvc", "cache"]).is_err());
        assert!(Cli::try_parse_from(["gpusvc", "cache", "shred"]).is_err());
        let Command::Cache(args) = Cli::try_parse_from(["gpusvc", "cache", "clear", "--force"])
            .unwrap()
            .command
        else {
            panic!("not cache")
        };
        assert_eq!(args.command, CacheCommand::Clear { force: true });
    }
}
