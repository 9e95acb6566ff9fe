//! Trace-driven simulation of a multi-tab browsing workload: hit rate of plain LRU vs "LRU across
//! pages, MRU within a page" at several cache budgets.
//!
//! Model (deterministic, seeded): 40 sites; each page load of a site requests its programs once,
//! in its own order (the resource-loading pattern: a page never asks for the same program twice
//! per load). Every page also uses 12 compositor programs shared by all tabs. Sites have 10 to 150
//! programs of 2 to 24 KiB (a game-like site has the most). The user switches between tabs with
//! Zipf-like popularity (a few tabs get most reloads), 3000 page loads in all.
//!
//!     cargo run --release -p gpusvc-program-cache --example page_policy

use program_cache::{CachedProgram, EvictionPolicy, ProgramKey, ShaderHash};
use test_support::programs::{plain_program, policy_cache};
use test_support::rng::XorShift;

struct Site {
    programs: Vec<(ProgramKey, usize)>,
}

fn key(site: u32, i: u32) -> ProgramKey {
    let mut k = [0u8; 20];
    k[..4].copy_from_slice(&site.to_le_bytes());
    k[4..8].copy_from_slice(&i.to_le_bytes());
    k[19] = 0xA5;
    ProgramKey(k)
}

fn program(k: &ProgramKey, size: usize) -> CachedProgram {
    let mut vs = k.0;
    vs[18] = 1;
    let mut fs = k.0;
    fs[18] = 2;
    plain_program(ShaderHash(vs), ShaderHash(fs), vec![0; size])
}

fn workload() -> Vec<(u64, ProgramKey, usize)> {
    let mut rng = XorShift(0x5EED_1234_ABCD_0001);
    let shared: Vec<(ProgramKey, usize)> = (0..12)
        .map(|i| (key(u32::MAX, i), 4096 + rng.below(4096) as usize))
        .collect();
    let sites: Vec<Site> = (0..40u32)
        .map(|s| {
            let count = if s == 3 {
                150
            } else {
                10 + rng.below(60) as u32
            };
            Site {
                programs: (0..count)
                    .map(|i| (key(s, i), 2048 + rng.below(22 * 1024) as usize))
                    .collect(),
            }
        })
        .collect();
    let mut trace = Vec::new();
    for _ in 0..3000 {
        // Zipf-like: site s with weight 1/(s+1).
        let site = rng.zipf(sites.len());
        let page = site as u64;
        for &(k, size) in shared.iter().chain(&sites[site].programs) {
            trace.push((page, k, size));
        }
    }
    trace
}

fn hit_rate(policy: EvictionPolicy, budget: usize, trace: &[(u64, ProgramKey, usize)]) -> f64 {
    let cache = policy_cache(policy, budget);
    let mut hits = 0usize;
    for &(page, k, size) in trace {
        if cache.load(&k, Some(page)).is_some() {
            hits += 1;
        } else {
            let _ = cache.save(k, program(&k, size), Some(page));
        }
    }
    hits as f64 / trace.len() as f64
}

fn main() {
    let trace = workload();
    let distinct: std::collections::HashSet<_> = trace.iter().map(|t| t.1).collect();
    let bytes: usize = {
        let mut seen = std::collections::HashSet::new();
        trace.iter().filter(|t| seen.insert(t.1)).map(|t| t.2).sum()
    };
    println!(
        "trace: {} program requests, {} distinct programs, {:.1} MiB of binaries",
        trace.len(),
        distinct.len(),
        bytes as f64 / (1 << 20) as f64
    );
    println!(
        "{:>10} {:>12} {:>16} {:>8}",
        "budget", "LRU hits", "page LRU/MRU", "delta"
    );
    for kib in [256usize, 512, 1024, 2048, 4096, 6144] {
        let lru = hit_rate(EvictionPolicy::Lru, kib * 1024, &trace);
        let page = hit_rate(EvictionPolicy::PageLruMru, kib * 1024, &trace);
        println!(
            "{:>7} KiB {:>11.1}% {:>15.1}% {:>+7.1}",
            kib,
            lru * 100.0,
            page * 100.0,
            (page - lru) * 100.0
        );
    }
}
