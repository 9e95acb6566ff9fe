//! `gpusvc bo-cache stress`: several threads share one [`BoCache`] over a [`MemfdKernel`] and a
//! set of buffers. Each round a thread imports a random buffer, then clones one of the objects
//! it holds, looks a handle number up (which may race that handle's last release on another
//! thread), or exports an object and imports the exported fd again; it keeps at most
//! [`HELD`] references and now and then drops them all, so last releases race imports.
//!
//! The backend is the memfd fake ([`MemfdKernel`], sealed memfds as buffers) unless `--device`
//! names a DRM render node ([`DrmKernel`], real dma-bufs from a [`DmaBufSource`]).
//!
//! The report is the cache's [`Stats`], the fake kernel's [`FakeStats`] (memfd backend only) and
//! the operations the threads counted; the run is clean when no close failed, nothing is live
//! or open once every reference is gone, and no operation failed.

use std::fmt;
use std::num::NonZeroU32;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use bo_cache::{
    Bo, BoCache, BoError, DRM_CLOEXEC, DmaBufSource, DrmKernel, FakeStats, ImportDesc, MemfdKernel,
    Stats,
};

/// The most references one thread holds at once.
pub(crate) const HELD: usize = 8;
/// Size of the smallest buffer; buffer `i` has `(1 + i % 4)` times this.
const PAGE: u64 = 4096;

/// `gpusvc bo-cache stress`'s arguments.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub(crate) struct StressArgs {
    /// Threads sharing the cache.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) threads: u32,
    /// Distinct buffers the threads import (sealed memfds, or dma-bufs with --device).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) buffers: u32,
    /// Run for this many seconds (default 2 when --rounds is not given; more than 0, at most
    /// 86400).
    #[arg(long, conflicts_with = "rounds", value_name = "S", value_parser = parse_seconds)]
    pub(crate) seconds: Option<f64>,
    /// Run exactly this many rounds per thread instead of for a time (at least 1).
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) rounds: Option<u64>,
    /// Use the DRM render node at PATH (such as /dev/dri/renderD128), or with `auto` the first
    /// one that imports dma-bufs, instead of the memfd fake. Buffers come from /dev/udmabuf or
    /// from dumb buffers on the device's primary node.
    #[arg(long, value_name = "PATH|auto")]
    pub(crate) device: Option<PathBuf>,
}

/// `--seconds`: a finite number of seconds in (0, 86400].
fn parse_seconds(text: &str) -> Result<f64, String> {
    let s: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if s.is_finite() && s > 0.0 && s <= 86_400.0 {
        Ok(s)
    } else {
        Err(format!("{text} is not a number of seconds in (0, 86400]"))
    }
}

/// Operations one thread made, and how many failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Ops {
    pub(crate) rounds: u64,
    pub(crate) imports: u64,
    pub(crate) lookups: u64,
    /// Lookups that found no live object under the number.
    pub(crate) lookups_empty: u64,
    pub(crate) clones: u64,
    pub(crate) exports: u64,
    pub(crate) releases: u64,
    /// Imports and exports that returned an error.
    pub(crate) errors: u64,
}

impl Ops {
    fn add(&mut self, o: &Ops) {
        self.rounds += o.rounds;
        self.imports += o.imports;
        self.lookups += o.lookups;
        self.lookups_empty += o.lookups_empty;
        self.clones += o.clones;
        self.exports += o.exports;
        self.releases += o.releases;
        self.errors += o.errors;
    }
}

/// What a stress run shows, read after every reference was released.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    pub(crate) threads: u32,
    pub(crate) buffers: u32,
    pub(crate) elapsed: Duration,
    pub(crate) ops: Ops,
    /// The first error an operation returned, if any.
    pub(crate) first_error: Option<String>,
    /// What the buffers were and which kernel side the cache used.
    pub(crate) backend: String,
    pub(crate) cache: Stats,
    /// The fake kernel's own counters (memfd backend only).
    pub(crate) kernel: Option<FakeStats>,
}

impl Report {
    /// Every problem the counters show; empty when the run is clean.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if self.cache.double_closes != 0 {
            p.push(format!(
                "{} double closes (cache)",
                self.cache.double_closes
            ));
        }
        if let Some(k) = self.kernel.filter(|k| k.double_closes != 0) {
            p.push(format!("{} double closes (kernel)", k.double_closes));
        }
        if self.cache.close_errors != 0 {
            p.push(format!("{} failed closes", self.cache.close_errors));
        }
        if self.cache.live != 0 {
            p.push(format!("{} objects still live", self.cache.live));
        }
        if let Some(k) = self.kernel.filter(|k| k.open_handles != 0) {
            p.push(format!("{} handles still open", k.open_handles));
        }
        if self.ops.errors != 0 {
            let first = self.first_error.as_deref().unwrap_or("?");
            p.push(format!(
                "{} operations failed (first: {first})",
                self.ops.errors
            ));
        }
        p
    }

    /// No problem.
    pub(crate) fn clean(&self) -> bool {
        self.problems().is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (o, c) = (&self.ops, &self.cache);
        writeln!(
            f,
            "bo-cache stress: {} threads, {} buffers, {}, {:.3} s",
            self.threads,
            self.buffers,
            self.backend,
            self.elapsed.as_secs_f64()
        )?;
        let rows: [(&str, u64); 16] = [
            ("rounds", o.rounds),
            ("imports", o.imports),
            ("lookups", o.lookups),
            ("lookups empty", o.lookups_empty),
            ("clones", o.clones),
            ("exports", o.exports),
            ("releases", o.releases),
            ("errors", o.errors),
            ("cache hits", c.hits),
            ("cache misses", c.misses),
            ("cache closes", c.closes),
            ("cache double closes", c.double_closes),
            ("cache close errors", c.close_errors),
            ("cache size rejects", c.size_rejects),
            ("cache foreign handles", c.foreign_handles),
            ("cache live", c.live as u64),
        ];
        for (label, value) in rows {
            writeln!(f, "{label:<24}{value:>12}")?;
        }
        if let Some(k) = &self.kernel {
            let rows: [(&str, u64); 5] = [
                ("kernel handles created", k.handles_created),
                ("kernel reimports", k.reimports),
                ("kernel closes", k.closes),
                ("kernel double closes", k.double_closes),
                ("kernel open handles", k.open_handles as u64),
            ];
            for (label, value) in rows {
                writeln!(f, "{label:<24}{value:>12}")?;
            }
        }
        Ok(())
    }
}

/// xorshift64*: a cheap per-thread generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// How a thread knows it is done.
#[derive(Debug, Clone, Copy)]
enum Until {
    Rounds(u64),
    Deadline(Instant),
}

impl Until {
    fn done(self, rounds: u64) -> bool {
        match self {
            Until::Rounds(r) => rounds >= r,
            Until::Deadline(d) => rounds.is_multiple_of(64) && Instant::now() >= d,
        }
    }
}

/// One thread's share of the load; returns its counts and its first error.
fn worker(cache: &BoCache, fds: &[OwnedFd], seed: u64, until: Until) -> (Ops, Option<String>) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut ops = Ops::default();
    let mut first_error = None;
    let mut held: Vec<Bo> = Vec::with_capacity(HELD + 2);
    let mut fail = |ops: &mut Ops, e: &dyn fmt::Display| {
        ops.errors += 1;
        first_error.get_or_insert_with(|| e.to_string());
    };
    while !until.done(ops.rounds) {
        ops.rounds += 1;
        let fd = fds[rng.below(fds.len())].as_fd();
        ops.imports += 1;
        match cache.import(fd, &ImportDesc::default()) {
            Ok(bo) => held.push(bo),
            Err(e) => fail(&mut ops, &e),
        }
        match rng.next() % 4 {
            0 if !held.is_empty() => {
                ops.clones += 1;
                held.push(held[rng.below(held.len())].clone());
            }
            1 => {
                // Any number the fake may have handed out, live or not.
                let n = 1 + rng.below(fds.len()) as u32;
                ops.lookups += 1;
                match NonZeroU32::new(n).and_then(|h| cache.lookup(h)) {
                    Some(bo) => held.push(bo),
                    None => ops.lookups_empty += 1,
                }
            }
            2 if !held.is_empty() => {
                ops.exports += 1;
                let exported = held[rng.below(held.len())].export_dmabuf(DRM_CLOEXEC);
                match exported {
                    Ok(fd) => {
                        ops.imports += 1;
                        match cache.import(fd.as_fd(), &ImportDesc::default()) {
                            Ok(bo) => held.push(bo),
                            Err(e) => fail(&mut ops, &e),
                        }
                    }
                    Err(e) => fail(&mut ops, &e),
                }
            }
            _ => {}
        }
        if rng.next().is_multiple_of(16) {
            ops.releases += held.len() as u64;
            held.clear();
        }
        while held.len() > HELD {
            ops.releases += 1;
            drop(held.swap_remove(rng.below(held.len())));
        }
    }
    ops.releases += held.len() as u64;
    drop(held);
    (ops, first_error)
}

/// The cache, the buffers, what they are, and the fake kernel when there is one.
type Setup = (BoCache, Vec<OwnedFd>, String, Option<MemfdKernel>);

/// Sets up the memfd backend, or the render node `--device` names.
fn setup(args: &StressArgs) -> Result<Setup, String> {
    let sizes = (0..u64::from(args.buffers)).map(|i| PAGE * (1 + i % 4));
    let Some(device) = &args.device else {
        let fds = sizes
            .map(MemfdKernel::new_buffer)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("cannot make a sealed memfd: {e}"))?;
        let kernel = MemfdKernel::new();
        let cache = BoCache::with_kernel(kernel.clone());
        return Ok((cache, fds, "memfd backend".into(), Some(kernel)));
    };
    let (node, source) = if device.as_os_str() == "auto" {
        DmaBufSource::find()?
    } else {
        // Refuse what is not a render node before probing for a source.
        DrmKernel::open(device).map_err(|e| format!("{}: {e}", device.display()))?;
        (device.clone(), DmaBufSource::for_node(device)?)
    };
    let fds = sizes
        .map(|size| source.buffer(size).map(|(fd, _)| fd))
        .collect::<Result<Vec<_>, BoError>>()
        .map_err(|e| format!("cannot make a dma-buf with {}: {e}", source.describe()))?;
    let cache = BoCache::open(&node).map_err(|e| format!("{}: {e}", node.display()))?;
    let backend = format!(
        "render node {} (dma-bufs from {})",
        node.display(),
        source.describe()
    );
    Ok((cache, fds, backend, None))
}

/// Runs the stress and reads the counters once every reference is released. An error is a
/// backend that could not be set up or a buffer that could not be made.
pub(crate) fn run(args: &StressArgs) -> Result<Report, String> {
    let (cache, fds, backend, kernel) = setup(args)?;
    let barrier = Barrier::new(args.threads as usize);
    let started = Instant::now();
    let results: Vec<(Ops, Option<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.threads)
            .map(|t| {
                let (cache, fds, barrier) = (&cache, &fds, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let until = match (args.rounds, args.seconds) {
                        (Some(r), _) => Until::Rounds(r),
                        (None, secs) => Until::Deadline(
                            Instant::now() + Duration::from_secs_f64(secs.unwrap_or(2.0)),
                        ),
                    };
                    worker(cache, fds, u64::from(t) + 1, until)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a stress thread panicked"))
            .collect()
    });
    let elapsed = started.elapsed();
    let mut ops = Ops::default();
    let mut first_error = None;
    for (o, e) in results {
        ops.add(&o);
        first_error = first_error.or(e);
    }
    let report = Report {
        threads: args.threads,
        buffers: args.buffers,
        elapsed,
        ops,
        first_error,
        backend,
        cache: cache.stats(),
        kernel: kernel.map(|k| k.stats()),
    };
    drop(cache);
    Ok(report)
}
