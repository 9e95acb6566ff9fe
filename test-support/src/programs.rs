//! Synthetic program-cache keys and entries, and caches of one eviction policy, for tests,
//! benches and examples that need no driver.

use std::sync::Arc;

use program_cache::{
    CacheConfig, CachedProgram, CompatibilityStamp, EvictionPolicy, ProgramBinaryData,
    ProgramCache, ProgramKey, ShaderHash, ShaderVariables, VariableInfo, disk,
};

/// The stamp of a fake driver whose version string is `driver` (stores of two versions are two
/// stores), for disk tests that need no GL.
pub fn stamp(driver: &str) -> CompatibilityStamp {
    CompatibilityStamp {
        gl_vendor: "Test".into(),
        gl_renderer: "fake".into(),
        gl_version: driver.into(),
        context: "OpenGL core profile".into(),
        vendor_id: None,
        device_id: None,
        driver_build_id: None,
        host_product: "tests".into(),
        host_version: "1".into(),
        format_version: disk::FORMAT_VERSION,
        pointer_width: 64,
    }
}

/// A key made from a number.
pub fn key(n: u8) -> ProgramKey {
    ProgramKey([n; 20])
}

/// A shader hash made from a number.
pub fn shader(n: u8) -> ShaderHash {
    ShaderHash([n; 20])
}

/// A program of `binary_len` bytes using shaders `vs` and `fs`.
pub fn program(vs: u8, fs: u8, binary_len: usize) -> CachedProgram {
    CachedProgram {
        vertex_shader: shader(vs),
        fragment_shader: shader(fs),
        vertex: ShaderVariables {
            attributes: vec![VariableInfo {
                name: "a_position".into(),
                mapped_name: "_u1".into(),
                gl_type: 0x8B52,
                array_size: 1,
                location: Some(0),
                ..Default::default()
            }],
            uniforms: Vec::new(),
            ..Default::default()
        },
        fragment: ShaderVariables::default(),
        binary: ProgramBinaryData {
            format: 1,
            bytes: vec![vs ^ fs; binary_len],
        },
        ..Default::default()
    }
}

/// A program with no variables whose binary (format 1) is `bytes`.
pub fn plain_program(vertex: ShaderHash, fragment: ShaderHash, bytes: Vec<u8>) -> CachedProgram {
    CachedProgram {
        vertex_shader: vertex,
        fragment_shader: fragment,
        vertex: ShaderVariables::default(),
        fragment: ShaderVariables::default(),
        binary: ProgramBinaryData { format: 1, bytes },
        ..Default::default()
    }
}

/// A memory-only cache of `budget` bytes evicting with `policy`.
pub fn policy_cache(policy: EvictionPolicy, budget: usize) -> Arc<ProgramCache> {
    ProgramCache::builder(CacheConfig {
        policy,
        ..CacheConfig::with_budget(budget)
    })
    .build()
}
