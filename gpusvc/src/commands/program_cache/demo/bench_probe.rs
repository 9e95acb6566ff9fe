//! The startup benchmark's probe (`--single-pass`, `--plain-driver`, `--settle-driver-cache`):
//! one pass and a `gpusvc-startup ...` line instead of the table.

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use corpus::ProgramSource;
use headless_gl::{GlContext, LinkOptions, ShaderStage};
use program_cache::{GlBackend, ProgramBackend as _, ProgramManager};

use super::driver_cache::settle;
use super::passes::pass;
use super::run_cache::RunCache;
use super::{DemoArgs, DemoError, ms_since};

/// Where the time of a `--single-pass` run went before the pass, in ms.
#[derive(Debug, Clone, Copy)]
pub(super) struct Phases {
    pub(super) started: Instant,
    pub(super) context_ms: f64,
    pub(super) corpus_ms: f64,
}

/// `--single-pass`: one pass, then the `gpusvc-startup` line the startup benchmark reads.
pub(super) fn single_pass(
    args: &DemoArgs,
    ctx: &GlContext,
    run: &RunCache,
    programs: &[ProgramSource],
    phases: Phases,
    driver_cache: &Path,
) -> Result<(), DemoError> {
    let mut out = std::io::stdout();
    let result = single_pass_report(args, ctx, run, programs, phases, &mut out);
    if result.is_ok() && args.settle_driver_cache {
        let (files, bytes) = settle(driver_cache);
        writeln!(out, "gpusvc-startup-settled files={files} bytes={bytes}")?;
        out.flush()?;
    }
    result
}

pub(super) fn single_pass_report(
    args: &DemoArgs,
    ctx: &GlContext,
    run: &RunCache,
    programs: &[ProgramSource],
    phases: Phases,
    out: &mut std::io::Stdout,
) -> Result<(), DemoError> {
    let Phases {
        started,
        context_ms,
        corpus_ms,
    } = phases;
    if args.plain_driver {
        let (linked, pass_ms) = plain_pass(ctx, programs);
        writeln!(
            out,
            "gpusvc-startup programs={} linked={linked} hits=0 loaded=0 since_start_ms={:.3} \
             context_ms={context_ms:.3} corpus_ms={corpus_ms:.3} load_ms=0 wait_ms=0 \
             pass_ms={pass_ms:.3}",
            programs.len(),
            ms_since(started)
        )?;
        out.flush()?;
        return Ok(());
    }
    let mut manager = ProgramManager::new(GlBackend::new(ctx), run.cache.clone(), "gpusvc demo");
    let p = pass(&mut manager, programs, "cold");
    writeln!(
        out,
        "gpusvc-startup programs={} linked={} hits={} loaded={} since_start_ms={:.3} \
         context_ms={context_ms:.3} corpus_ms={corpus_ms:.3} load_ms={:.3} wait_ms={:.3} \
         pass_ms={:.3}",
        p.programs,
        p.linked,
        p.served(),
        run.load.map_or(0, |r| r.loaded),
        ms_since(started),
        run.load_ms,
        run.wait_ms,
        p.total_ms
    )?;
    out.flush()?;
    run.cache.flush_disk();
    let d = run.disk_counters().unwrap_or_default();
    writeln!(
        out,
        "gpusvc-startup-done writes={} dropped={} write_errors={} disk={}",
        d.writes,
        d.dropped_writes,
        d.write_errors,
        run.cache.disk_enabled()
    )?;
    out.flush()?;
    Ok(())
}

/// Compiles, links and reflects every program straight on the driver, with no program cache
/// (the `--plain-driver` probe: what the driver's own shader cache alone gives). Returns
/// (linked, total ms).
pub(super) fn plain_pass(ctx: &GlContext, programs: &[ProgramSource]) -> (usize, f64) {
    let mut backend = GlBackend::new(ctx);
    let start = Instant::now();
    let mut linked = 0;
    for program in programs {
        let Ok(vs) = backend.compile(ShaderStage::Vertex, &program.vertex) else {
            continue;
        };
        let Ok(fs) = backend.compile(ShaderStage::Fragment, &program.fragment) else {
            continue;
        };
        if let Ok(p) = backend.link(&[&vs, &fs], &LinkOptions::default()) {
            std::hint::black_box((backend.active_attributes(&p), backend.active_uniforms(&p)));
            linked += 1;
        }
    }
    (linked, start.elapsed().as_secs_f64() * 1e3)
}
