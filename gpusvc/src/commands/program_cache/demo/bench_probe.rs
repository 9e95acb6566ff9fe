//! The startup benchmark's probe (`--single-pass`, `--plain-driver`, `--restore-floor`,
//! `--settle-driver-cache`): one pass and a `gpusvc-startup ...` line instead of the table.

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use corpus::ProgramSource;
use headless_gl::{GlContext, LinkOptions, ShaderStage};
use program_cache::stats::names;
use program_cache::{GlBackend, ProgramBackend as _, ProgramCache, ProgramManager, RestoreAhead};

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
    ahead: Option<&RestoreAhead>,
    programs: &[ProgramSource],
    phases: Phases,
    driver_cache: &Path,
) -> Result<(), DemoError> {
    let mut out = std::io::stdout();
    let result = single_pass_report(args, ctx, run, ahead, programs, phases, &mut out);
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
    ahead: Option<&RestoreAhead>,
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
        // The linked programs live until the line is out, as in the program-cache case.
        let (plain, _kept) = plain_pass(ctx, programs);
        writeln!(
            out,
            "gpusvc-startup programs={} linked={} hits=0 loaded=0 since_start_ms={:.3} \
             context_ms={context_ms:.3} corpus_ms={corpus_ms:.3} load_ms=0 wait_ms=0 \
             pass_ms={:.3} failed_ms={:.3} compile_failed_ms={:.3} link_failed_ms={:.3} \
             compile_failures={} vertex_failures={} link_failures={} compile_ms={:.3} \
             link_ms={:.3} reflect_ms={:.3}",
            programs.len(),
            plain.linked,
            ms_since(started),
            plain.total_ms,
            plain.compile_failed_ms + plain.link_failed_ms,
            plain.compile_failed_ms,
            plain.link_failed_ms,
            plain.compile_failures,
            plain.vertex_failures,
            plain.link_failures,
            plain.compile_ms,
            plain.link_ms,
            plain.reflect_ms,
        )?;
        out.flush()?;
        return Ok(());
    }
    if args.restore_floor {
        let (floor, _kept) = floor_pass(ctx, &run.cache);
        writeln!(
            out,
            "gpusvc-startup programs={} linked={} hits={} loaded={} since_start_ms={:.3} \
             context_ms={context_ms:.3} corpus_ms={corpus_ms:.3} load_ms={:.3} wait_ms={:.3} \
             prep_ms={:.3} pass_ms={:.3} refused={}",
            programs.len(),
            floor.restored,
            floor.restored,
            run.load.map_or(0, |r| r.loaded),
            ms_since(started),
            run.load_ms,
            run.wait_ms,
            floor.prep_ms,
            floor.pass_ms,
            floor.refused,
        )?;
        out.flush()?;
        return Ok(());
    }
    let backend = match ahead {
        Some(ahead) => GlBackend::with_restore_ahead(ctx, ahead),
        None => GlBackend::new(ctx),
    };
    let mut manager = ProgramManager::new(backend, run.cache.clone(), "gpusvc demo");
    let before = Histograms::of(&run.cache);
    // The linked programs live until the line is out: a host keeps what it built at startup.
    let (p, _kept) = pass(&mut manager, programs, "cold");
    let spent = Histograms::of(&run.cache).minus(&before);
    let linked_ms: f64 = p.linked_ms.iter().sum();
    writeln!(
        out,
        "gpusvc-startup programs={} linked={} hits={} loaded={} since_start_ms={:.3} \
         context_ms={context_ms:.3} corpus_ms={corpus_ms:.3} load_ms={:.3} wait_ms={:.3} \
         pass_ms={:.3} failed_ms={:.3} compile_failed_ms={:.3} link_failed_ms={:.3} \
         compile_failures={} vertex_failures={} link_failures={} hit_ms={:.3} relinked_ms={:.3} \
         status_hit_ms={:.3} compile_ms={:.3} binary_hit_ms={:.3} miss_link_ms={:.3}",
        p.programs,
        p.linked,
        p.served(),
        run.load.map_or(0, |r| r.loaded),
        ms_since(started),
        run.load_ms,
        run.wait_ms,
        // Wall time, as the driver-only pass measures it.
        p.wall_ms,
        // `+ 0.0`: an empty sum is -0.0.
        p.total_ms - linked_ms + 0.0,
        p.compile_failed_ms,
        p.link_failed_ms,
        p.compile_failures,
        p.vertex_failures,
        p.link_failures,
        p.from_cache_ms.iter().sum::<f64>() + 0.0,
        p.compiled_ms.iter().sum::<f64>() + 0.0,
        spent.status_hit_ms,
        spent.compile_ms,
        spent.binary_hit_ms,
        spent.miss_link_ms,
    )?;
    if let Some(ahead) = ahead {
        let a = ahead.stats();
        writeln!(
            out,
            "gpusvc-startup-ahead restored={} taken={} refused={} waited={} waited_us={} \
             over_limits={} error={:?}",
            a.restored, a.taken, a.refused, a.waited, a.waited_us, a.over_limits, a.error
        )?;
    }
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

/// What a `--restore-floor` pass did.
#[derive(Debug, Clone, Copy, Default)]
struct FloorPass {
    /// Decoding every stored program before the pass (not part of the floor).
    prep_ms: f64,
    /// Handing every binary to the driver.
    pass_ms: f64,
    restored: usize,
    refused: usize,
}

/// The floor of a cache that restores with `glProgramBinary`: every program the cache holds
/// (failure records left out) is decoded first, then the timed pass makes one program object
/// per binary and hands it the binary (`GlBackend::load_binary`: create, binary, link status),
/// with no keys, lookups, statuses or reflection. The programs are kept until the line is out,
/// as in the other passes.
fn floor_pass(ctx: &GlContext, cache: &ProgramCache) -> (FloorPass, Vec<headless_gl::Program>) {
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let binaries: Vec<_> = cache
        .eviction_order()
        .iter()
        .filter_map(|key| cache.peek(key))
        .filter(|p| p.failure.is_none())
        .collect();
    let prep_ms = ms(t);
    let mut backend = GlBackend::new(ctx);
    let mut kept = Vec::with_capacity(binaries.len());
    let mut refused = 0;
    let t = Instant::now();
    for program in &binaries {
        match backend.load_binary(&program.binary) {
            Ok(p) => kept.push(p),
            Err(_) => refused += 1,
        }
    }
    let pass_ms = ms(t);
    let floor = FloorPass {
        prep_ms,
        pass_ms,
        restored: kept.len(),
        refused,
    };
    (floor, kept)
}

/// The cache's timing histograms (sums, in ms), to tell where a pass's time went.
#[derive(Debug, Clone, Copy, Default)]
struct Histograms {
    /// Shader compiles skipped because the compile status was cached.
    status_hit_ms: f64,
    /// Shader compiles on the driver (successful or not).
    compile_ms: f64,
    /// Programs restored from a cached binary (glProgramBinary and what goes with it).
    binary_hit_ms: f64,
    /// Programs linked on the driver on a binary miss.
    miss_link_ms: f64,
}

impl Histograms {
    fn of(cache: &ProgramCache) -> Self {
        let stats = cache.stats();
        let sum = |name| stats.histograms.get(name).map_or(0.0, |h| h.sum / 1e3);
        Histograms {
            status_hit_ms: sum(names::STATUS_HIT_TIME),
            compile_ms: sum(names::STATUS_MISS_COMPILE_TIME),
            binary_hit_ms: sum(names::BINARY_HIT_TIME),
            miss_link_ms: sum(names::BINARY_MISS_LINK_TIME),
        }
    }

    fn minus(self, before: &Histograms) -> Self {
        Histograms {
            status_hit_ms: self.status_hit_ms - before.status_hit_ms,
            compile_ms: self.compile_ms - before.compile_ms,
            binary_hit_ms: self.binary_hit_ms - before.binary_hit_ms,
            miss_link_ms: self.miss_link_ms - before.miss_link_ms,
        }
    }
}

/// Where a `--plain-driver` pass's time went, in ms.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PlainPass {
    pub(super) linked: usize,
    pub(super) total_ms: f64,
    /// On programs with a shader that failed to compile; on programs that failed to link.
    pub(super) compile_failed_ms: f64,
    pub(super) link_failed_ms: f64,
    pub(super) compile_failures: usize,
    /// Of those, programs whose vertex shader failed (their fragment shader is compiled too).
    pub(super) vertex_failures: usize,
    pub(super) link_failures: usize,
    /// Compiles of the linked programs' shaders.
    pub(super) compile_ms: f64,
    /// Links of the linked programs.
    pub(super) link_ms: f64,
    /// Reading the linked programs' attributes, uniforms and interface.
    pub(super) reflect_ms: f64,
}

/// Compiles, links and reflects every program straight on the driver, with no program cache
/// (the `--plain-driver` probe: what the driver's own shader cache alone gives). As the
/// program-cache pass, each program's shaders are let go after its link and the linked programs
/// are kept (returned).
pub(super) fn plain_pass(
    ctx: &GlContext,
    programs: &[ProgramSource],
) -> (PlainPass, Vec<headless_gl::Program>) {
    let mut backend = GlBackend::new(ctx);
    let mut kept = Vec::with_capacity(programs.len());
    let start = Instant::now();
    let mut r = PlainPass::default();
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    for program in programs {
        let t = Instant::now();
        // Both shaders, as the program-cache pass (a host) compiles them, even when the vertex
        // shader fails: the two sides make the same driver calls.
        let vs = backend.compile(ShaderStage::Vertex, &program.vertex);
        let fs = backend.compile(ShaderStage::Fragment, &program.fragment);
        let (Ok(vs), Ok(fs)) = (&vs, &fs) else {
            r.compile_failed_ms += ms(t);
            r.compile_failures += 1;
            r.vertex_failures += usize::from(vs.is_err());
            continue;
        };
        let compile_ms = ms(t);
        let t = Instant::now();
        match backend.link(&[vs, fs], &LinkOptions::default()) {
            Ok(p) => {
                r.compile_ms += compile_ms;
                r.link_ms += ms(t);
                let t = Instant::now();
                // What the program-cache pass hands its host for each program (`LinkedProgram`):
                // attributes, uniforms and the rest of the interface, read from the driver.
                std::hint::black_box((
                    backend.active_attributes(&p),
                    backend.active_uniforms(&p),
                    backend.program_interface(&p),
                ));
                r.reflect_ms += ms(t);
                r.linked += 1;
                kept.push(p);
            }
            Err(_) => {
                r.link_failed_ms += compile_ms + ms(t);
                r.link_failures += 1;
            }
        }
    }
    r.total_ms = ms(start);
    (r, kept)
}
