//! Status-hit lookup vs a bare `lru::LruCache::get` on a cache of the same size.
//!
//! Ours: `ProgramCache::shader_compile_status` (mutex + status maps) for shaders that are known
//! to compile, both for shaders used by cached programs (refcounted map) and for shaders no
//! cached program uses yet (bounded LRU). Baseline: `lru::LruCache<ShaderHash, CompileStatus>`
//! with its default hasher, same number of entries, same keys, same lookup order.
//! Goal: ours / baseline time <= 1.5.

use bench_support as support;

use std::hint::black_box;
use std::num::NonZeroUsize;

use program_cache::ShaderStage;
use program_cache::{
    CacheConfig, CachedProgram, CompileStatus, ProgramBinaryData, ProgramCache, ProgramKey,
    ShaderHash, ShaderVariables, shader_hash,
};
use support::{Row, median_ns, report};

const ENTRIES: usize = 4096;

fn hashes() -> Vec<ShaderHash> {
    (0..ENTRIES)
        .map(|i| {
            shader_hash(
                ShaderStage::Vertex,
                &format!("void main() {{ /* {i} */ }}"),
                b"",
            )
        })
        .collect()
}

/// A lookup order that is not the insertion order (xorshift permutation walk).
fn order(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

fn main() {
    let keys = hashes();
    let order = order(ENTRIES);

    let mut baseline = lru::LruCache::new(NonZeroUsize::new(ENTRIES).unwrap());
    for k in &keys {
        baseline.put(*k, CompileStatus::Success);
    }

    // Shaders used by cached programs: pairs of shaders per program.
    let referenced = ProgramCache::builder(CacheConfig::with_budget(64 << 20)).build();
    for (i, pair) in keys.chunks(2).enumerate() {
        let mut key = [0u8; 20];
        key[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let program = CachedProgram {
            vertex_shader: pair[0],
            fragment_shader: pair[1],
            vertex: ShaderVariables::default(),
            fragment: ShaderVariables::default(),
            binary: ProgramBinaryData {
                format: 1,
                bytes: vec![1; 16],
            },
            ..Default::default()
        };
        referenced.save(ProgramKey(key), program, None).unwrap();
    }
    // Shaders compiled but not yet used by any cached program.
    let unreferenced = ProgramCache::builder(CacheConfig {
        max_unreferenced_shader_statuses: NonZeroUsize::new(ENTRIES).unwrap(),
        ..CacheConfig::desktop()
    })
    .build();
    for k in &keys {
        unreferenced.shader_compile_succeeded(*k);
    }
    for k in &keys {
        assert_eq!(referenced.shader_compile_status(k), CompileStatus::Success);
        assert_eq!(
            unreferenced.shader_compile_status(k),
            CompileStatus::Success
        );
    }

    let mut i = 0;
    let mut next = || {
        i = (i + 1) % ENTRIES;
        &keys[order[i]]
    };
    let base_ns = median_ns(31, 20.0, || {
        black_box(baseline.get(black_box(next())));
    });
    let mut j = 0;
    let mut next2 = || {
        j = (j + 1) % ENTRIES;
        &keys[order[j]]
    };
    let ours_ref = median_ns(31, 20.0, || {
        black_box(referenced.shader_compile_status(black_box(next2())));
    });
    let ours_unref = median_ns(31, 20.0, || {
        black_box(unreferenced.shader_compile_status(black_box(next2())));
    });
    let note = "ours/baseline time (goal <= 1.5)";
    report(
        "program_cache_status",
        &[
            Row {
                metric: format!("status hit, shader of a cached program ({ENTRIES})"),
                unit: "ns per lookup",
                ours: ours_ref,
                baseline: base_ns,
                ratio_note: note,
            },
            Row {
                metric: format!("status hit, shader not yet in a program ({ENTRIES})"),
                unit: "ns per lookup",
                ours: ours_unref,
                baseline: base_ns,
                ratio_note: note,
            },
        ],
    );
}
