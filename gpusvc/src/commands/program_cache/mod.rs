//! `gpusvc program-cache demo|list|verify|stats|clear`: the GL program binary cache. `demo` runs it
//! end to end on the machine's driver ([`demo`]); the others inspect its disk folder from outside
//! a cache ([`folder`]).

pub(crate) mod demo;
pub(crate) mod folder;

use std::process::ExitCode;
use std::time::Instant;

use clap::Subcommand;

use demo::DemoArgs;
use folder::{CacheArgs, CacheCommand, ClearArgs, FolderArgs};

/// `gpusvc program-cache ...`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProgramCacheArgs {
    #[command(subcommand)]
    pub(crate) command: ProgramCacheCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ProgramCacheCommand {
    /// Builds a corpus of GL programs through the program cache, cold and then warm, on the
    /// machine's GL driver, and prints a table of what the cache did.
    ///
    /// Exit status: 0 when it ran, 3 when no GL context can be made (GPUSVC_EGL_DEVICE invalid
    /// or naming no usable device included), 1 on other errors (a --cache-dir that cannot be
    /// used included).
    Demo(DemoArgs),
    /// Every entry of the cache folder: key, size, age and the stamp its header names; a header
    /// line per stamp store (damaged stores included, marked as such).
    ///
    /// Exit status: 0 when it ran, 1 when the folder is missing or unreadable.
    List(FolderArgs),
    /// Checks every entry fully (header, stamp, checksums, decode) and every store (STAMP,
    /// readable entries folder); prints each problem and exits with status 4 if there is one.
    ///
    /// Exit status: 0 when all is well, 4 on a corrupt entry or a damaged store, 1 when the
    /// folder is missing or unreadable.
    Verify(FolderArgs),
    /// Stores, entries, bytes (file lengths and allocated on disk) and temporary files; exits
    /// with status 4 when an entry is corrupt or a store damaged.
    ///
    /// Exit status: 0 when it ran, 4 on a corrupt entry or a damaged store, 1 when the folder
    /// is missing or unreadable.
    Stats(FolderArgs),
    /// Deletes every store in the folder (every stamp): only the files the cache format
    /// defines; folders that are not provably stores are never touched. Refuses (exit 1,
    /// nothing deleted) while a running cache uses a store, unless --force.
    Clear(ClearArgs),
}

/// Runs `gpusvc program-cache <command>`; `started` is when the process started (the demo
/// reports startup times from it).
pub(crate) fn exec(args: ProgramCacheArgs, started: Instant) -> ExitCode {
    let (dir, command) = match args.command {
        ProgramCacheCommand::Demo(args) => return exec_demo(&args, started),
        ProgramCacheCommand::List(f) => (f.dir, CacheCommand::List),
        ProgramCacheCommand::Verify(f) => (f.dir, CacheCommand::Verify),
        ProgramCacheCommand::Stats(f) => (f.dir, CacheCommand::Stats),
        ProgramCacheCommand::Clear(c) => (c.folder.dir, CacheCommand::Clear { force: c.force }),
    };
    exec_folder(dir, command)
}

/// Runs the demo: `gpusvc program-cache demo` and its alias `gpusvc demo`.
pub(crate) fn exec_demo(args: &DemoArgs, started: Instant) -> ExitCode {
    match demo::run(args, started) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpusvc demo: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Runs the hidden alias `gpusvc cache [--dir DIR] list|verify|stats|clear`.
pub(crate) fn exec_cache_alias(args: CacheArgs) -> ExitCode {
    exec_folder(args.dir, args.command)
}

fn exec_folder(dir: Option<std::path::PathBuf>, command: CacheCommand) -> ExitCode {
    match folder::run(dir, command) {
        Ok(folder::Outcome::Ok) => ExitCode::SUCCESS,
        Ok(folder::Outcome::Corrupt) => ExitCode::from(folder::EXIT_CORRUPT),
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpusvc program-cache: {e}");
            ExitCode::FAILURE
        }
    }
}
