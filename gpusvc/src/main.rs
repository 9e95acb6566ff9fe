//! `gpusvc`: the command-line program of the gpusvc workspace.
//!
//! `gpusvc program-cache demo` (alias `gpusvc demo`) runs the GL program binary cache end to end on the machine's own GL driver
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
//! `gpusvc program-cache list|verify|stats|clear` inspects that folder without opening a cache.
//!
//! `gpusvc bo-cache stress` runs a multi-threaded import/lookup/clone/export/release load on the
//! dma-buf buffer-object cache over its memfd backend and prints the cache's and the fake
//! kernel's counters; it exits 1 when they show a double close, a failed operation, or an object
//! or handle left after every reference was released.
//!
//! `gpusvc vcache measure|fit|analyze|optimize|plot` measures the post-transform vertex cache of
//! the machine's driver on meshes (OBJ, PLY, OFF, raw indices, gzipped too), fits the driver's
//! cache model from a probe battery, analyzes and reorders meshes for a model, and plots the
//! staircase and the optimizers' ACMR (see `commands::vcache`; it also exits 4 when `measure`
//! finds counts that do not repeat or `fit` finds no exact model).
//!
//! Commands are grouped by service, one module per service under `commands/` owning its
//! arguments: `gpusvc program-cache demo|list|verify|stats|clear`. `gpusvc demo` is an alias of
//! `gpusvc program-cache demo`, and `gpusvc cache list|verify|stats|clear` (hidden) of the folder
//! commands.
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
//! program-cache verify` or `stats` found a corrupt entry or a damaged store; 1 for any
//! other failure (an unreadable corpus directory, no usable program, a `--cache-dir` that cannot
//! be used, a missing cache folder, a `gpusvc program-cache clear` refused because a running cache uses
//! a store); 2 for command-line errors (clap).
//!
//! # Thread safety
//! The GL context lives on the main thread; the progress bar, shown only when stdout is a
//! terminal, draws from the same thread. The disk cache's writer and loader threads start after
//! the environment is set up (see `commands::program_cache::demo`).

mod commands;

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};

use commands::bo_cache::{self, BoCacheArgs};
use commands::program_cache::{self, ProgramCacheArgs, demo::DemoArgs, folder::CacheArgs};
use commands::vcache::{self, VcacheArgs};

/// gpusvc: GPU-process services (program binary cache, ...) on the machine's real GL driver.
#[derive(Debug, Parser)]
#[command(name = "gpusvc", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The GL program binary cache: demo (end to end on the machine's driver), and list,
    /// verify, stats, clear (its disk folder).
    ProgramCache(ProgramCacheArgs),
    /// Alias of `gpusvc program-cache demo`: builds a corpus of GL programs through the program
    /// cache, cold and then warm, on the machine's GL driver, and prints a table of what the
    /// cache did.
    ///
    /// Exit status: 0 when it ran, 3 when no GL context can be made (GPUSVC_EGL_DEVICE invalid
    /// or naming no usable device included), 1 on other errors (a --cache-dir that cannot be
    /// used included).
    Demo(DemoArgs),
    /// Alias of `gpusvc program-cache list|verify|stats|clear`, with `--dir` before or after
    /// the command.
    #[command(hide = true)]
    Cache(CacheArgs),
    /// The dma-buf buffer-object cache: stress (a multi-threaded import/release load on the
    /// memfd backend, or on a DRM render node with --device).
    BoCache(BoCacheArgs),
    /// The post-transform vertex cache: measure (per-vertex vertex-shader invocations of a
    /// mesh on this driver), fit (find the driver's cache model), analyze (a mesh under a
    /// model), optimize (reorder a mesh for a model), plot.
    ///
    /// Exit status: 0 when it ran; 1 for errors (unreadable or invalid mesh, model file or
    /// output); 2 for command-line errors and unknown model texts; 3 when no GL context can be
    /// made; 4 when measure's counts do not repeat or disagree with the query, or fit finds no
    /// exact model.
    Vcache(VcacheArgs),
}

fn main() -> ExitCode {
    let started = Instant::now();
    match Cli::parse().command {
        Command::ProgramCache(args) => program_cache::exec(args, started),
        Command::Demo(args) => program_cache::exec_demo(&args, started),
        Command::Cache(args) => program_cache::exec_cache_alias(args),
        Command::BoCache(args) => bo_cache::exec(args),
        Command::Vcache(args) => vcache::exec(args),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use clap::CommandFactory;

    use super::*;
    use crate::commands::program_cache::ProgramCacheCommand;
    use crate::commands::program_cache::demo::Api;
    use crate::commands::program_cache::folder::{CacheCommand, ClearArgs, FolderArgs};

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
        assert!(!args.settle_driver_cache && !args.restore_floor);
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

    #[test]
    fn program_cache_commands_parse_with_their_own_arguments() {
        let parse = |argv: &[&str]| match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::ProgramCache(args)) => Ok(args.command),
            Ok(other) => panic!("{argv:?} parsed as {other:?}"),
            Err(e) => Err(e),
        };
        let Ok(ProgramCacheCommand::Demo(args)) = parse(&[
            "gpusvc",
            "program-cache",
            "demo",
            "--limit",
            "5",
            "--no-disk-cache",
        ]) else {
            panic!("not demo")
        };
        assert_eq!((args.limit, args.no_disk_cache), (Some(5), true));
        assert_eq!(args.budget_bytes(), 64 << 20);
        let dir = || FolderArgs {
            dir: Some(PathBuf::from("d")),
        };
        assert!(matches!(
            parse(&["gpusvc", "program-cache", "verify", "--dir", "d"]),
            Ok(ProgramCacheCommand::Verify(f)) if f == dir()
        ));
        assert!(matches!(
            parse(&["gpusvc", "program-cache", "list"]),
            Ok(ProgramCacheCommand::List(FolderArgs { dir: None }))
        ));
        assert!(matches!(
            parse(&["gpusvc", "program-cache", "stats", "--dir", "d"]),
            Ok(ProgramCacheCommand::Stats(f)) if f == dir()
        ));
        assert!(matches!(
            parse(&["gpusvc", "program-cache", "clear", "--force", "--dir", "d"]),
            Ok(ProgramCacheCommand::Clear(c)) if c == ClearArgs { folder: dir(), force: true }
        ));
        // Each command takes only its own arguments.
        assert!(parse(&["gpusvc", "program-cache", "demo", "--dir", "d"]).is_err());
        assert!(parse(&["gpusvc", "program-cache", "list", "--cache-dir", "d"]).is_err());
        assert!(parse(&["gpusvc", "program-cache", "verify", "--force"]).is_err());
        assert!(parse(&["gpusvc", "program-cache"]).is_err());
        assert!(parse(&["gpusvc", "program-cache", "shred"]).is_err());
    }

    #[test]
    fn demo_is_a_visible_alias_and_cache_a_hidden_one() {
        let cli = Cli::command();
        let sub = |name| cli.find_subcommand(name).unwrap();
        assert!(!sub("program-cache").is_hide_set());
        assert!(!sub("demo").is_hide_set());
        assert!(sub("cache").is_hide_set());
        // `gpusvc demo ARGS` and `gpusvc program-cache demo ARGS` parse to the same arguments.
        let argv = ["--limit", "3", "--api", "gles", "--budget-kib", "48"];
        let alias = Cli::try_parse_from(["gpusvc", "demo"].iter().chain(&argv)).unwrap();
        let full =
            Cli::try_parse_from(["gpusvc", "program-cache", "demo"].iter().chain(&argv)).unwrap();
        let (Command::Demo(a), Command::ProgramCache(p)) = (alias.command, full.command) else {
            panic!("not the demo")
        };
        let ProgramCacheCommand::Demo(b) = p.command else {
            panic!("not the demo")
        };
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert_eq!(a.api, Api::Gles);
    }
}
