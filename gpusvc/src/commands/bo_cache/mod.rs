//! `gpusvc bo-cache stress`: the dma-buf buffer-object cache (`gpusvc-bo-cache`) under a
//! multi-threaded import / lookup / clone / export / release load ([`stress`]).

pub(crate) mod stress;

use std::io::Write;
use std::process::ExitCode;

use clap::Subcommand;

use stress::StressArgs;

/// `gpusvc bo-cache ...`.
#[derive(Debug, clap::Args)]
pub(crate) struct BoCacheArgs {
    #[command(subcommand)]
    pub(crate) command: BoCacheCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BoCacheCommand {
    /// Imports, looks up, clones, exports and releases a set of buffers from several threads at
    /// once through one cache, then prints the cache's and the kernel side's counters.
    ///
    /// Backend: the memfd fake of a DRM file description (sealed memfds stand in for dma-bufs;
    /// it follows the kernel's handle rules), or with --device a DRM render node on a file
    /// description the cache opens itself, importing real dma-bufs made with /dev/udmabuf or as
    /// dumb buffers on the device's primary node. The fake's own counters are printed only for
    /// the memfd backend.
    ///
    /// Exit status: 0 when every counter is clean at the end; 1 when there was a double close,
    /// an object is still live or a handle still open after every reference was released, or
    /// an operation failed, or when the backend could not be set up (a --device that is not a
    /// render node, no dma-buf source); 2 for command-line errors.
    Stress(StressArgs),
}

/// Runs `gpusvc bo-cache <command>`.
pub(crate) fn exec(args: BoCacheArgs) -> ExitCode {
    match args.command {
        BoCacheCommand::Stress(args) => match stress::run(&args) {
            Ok(report) => {
                // A reader that closed stdout early (`| head`) is not an error of the run: the
                // exit status still says what the counters say.
                let printed = write!(std::io::stdout().lock(), "{report}");
                if let Err(e) = printed.as_ref()
                    && e.kind() != std::io::ErrorKind::BrokenPipe
                {
                    eprintln!("gpusvc bo-cache stress: cannot print the report: {e}");
                    return ExitCode::FAILURE;
                }
                if report.clean() {
                    ExitCode::SUCCESS
                } else {
                    eprintln!("gpusvc bo-cache stress: {}", report.problems().join("; "));
                    ExitCode::FAILURE
                }
            }
            Err(e) => {
                eprintln!("gpusvc bo-cache stress: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
