//! The program cache's C types (the enumerations passed as `uint32_t`, the plain structs) and
//! their conversions to and from the `program-cache` crate's types.

use std::ffi::{CString, c_char};
use std::num::NonZeroUsize;

use program_cache::{
    AttributeBinding, CacheConfig, CompileStatus, EvictionPolicy, LinkOptions, LinkStatus,
    MemoryPressure, ProgramKey, ShaderHash, ShaderStage, ShaderVariables, TransformFeedbackMode,
    VariableInfo,
};

use crate::program_cache::persist::gpusvc_program_cache_persist_sink;

use crate::kit::{
    FfiError, Out, c_enum, c_string, cstr_in, growable, invalid_argument, null_argument,
    sized_default, slice_in,
};

// ---- enumerations (passed as uint32_t) ----

/// `gpusvc_program_cache_config_defaults` profile: desktop (6 MiB, W-TinyLFU).
pub const GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP: u32 = 0u32;
/// `gpusvc_program_cache_config_defaults` profile: mobile (2 MiB, W-TinyLFU).
pub const GPUSVC_PROGRAM_CACHE_PROFILE_MOBILE: u32 = 1u32;
/// `gpusvc_program_cache_config_defaults` profile: low-memory devices (128 KiB, W-TinyLFU).
pub const GPUSVC_PROGRAM_CACHE_PROFILE_LOW_MEMORY: u32 = 2u32;

/// Eviction policy: least recently used program first. A working set larger than the budget
/// asked for in a fixed cyclic order gets no hits under it.
pub const GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_LRU: u32 = 0u32;
/// Eviction policy: most recently used program of the least recently used page first.
pub const GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_PAGE_LRU_MRU: u32 = 1u32;
/// Eviction policy: segmented LRU (probation first; programs hit at least once are protected).
pub const GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_SLRU: u32 = 2u32;
/// Eviction policy: S3-FIFO (small FIFO, main FIFO with reinsertion, ghost keys).
pub const GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_S3_FIFO: u32 = 3u32;
/// Eviction policy: window TinyLFU (a program enters the main area only when it is asked for
/// more often than the program it would displace). The default of every profile.
pub const GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_W_TINYLFU: u32 = 4u32;

/// Shader compile status: not known, compile it.
pub const GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_UNKNOWN: u32 = 0u32;
/// Shader compile status: compiled successfully before.
pub const GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_SUCCESS: u32 = 1u32;

/// Program link status: not known.
pub const GPUSVC_PROGRAM_CACHE_LINK_STATUS_UNKNOWN: u32 = 0u32;
/// Program link status: linked and cached.
pub const GPUSVC_PROGRAM_CACHE_LINK_STATUS_SUCCESS: u32 = 1u32;

/// Memory pressure: normal operation.
pub const GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_NONE: u32 = 0u32;
/// Memory pressure: trim to a quarter of the budget and keep to it (saves evict down to it, a
/// larger entry is refused) until the level is NONE again.
pub const GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_MODERATE: u32 = 1u32;
/// Memory pressure: drop everything and refuse saves until the level is NONE again.
pub const GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_CRITICAL: u32 = 2u32;

/// Shader stage: vertex.
pub const GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX: u32 = 0u32;
/// Shader stage: fragment.
pub const GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT: u32 = 1u32;
/// Shader stage: compute.
pub const GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE: u32 = 2u32;
/// Shader stage: geometry.
pub const GPUSVC_PROGRAM_CACHE_SHADER_STAGE_GEOMETRY: u32 = 3u32;
/// Shader stage: tessellation control.
pub const GPUSVC_PROGRAM_CACHE_SHADER_STAGE_TESS_CONTROL: u32 = 4u32;
/// Shader stage: tessellation evaluation.
pub const GPUSVC_PROGRAM_CACHE_SHADER_STAGE_TESS_EVALUATION: u32 = 5u32;

/// Transform-feedback buffer mode: `GL_INTERLEAVED_ATTRIBS`.
pub const GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK_INTERLEAVED: u32 = 0u32;
/// Transform-feedback buffer mode: `GL_SEPARATE_ATTRIBS`.
pub const GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK_SEPARATE: u32 = 1u32;

/// Variable kind: attributes.
pub const GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE: u32 = 0u32;
/// Variable kind: uniforms.
pub const GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM: u32 = 1u32;
/// Variable kind: varyings. In a shader's variable maps: the stage's varyings as a translator
/// reports them. Of a linked program: its transform-feedback varyings, in link order.
pub const GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_VARYING: u32 = 2u32;
/// Variable kind: fragment outputs (`location` is the output's location).
pub const GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_OUTPUT: u32 = 3u32;

/// What a cached entry records (`gpusvc_program_cache_entry_failure`,
/// `gpusvc_program_cache_entry_desc::failure`): a linked program.
pub const GPUSVC_PROGRAM_CACHE_FAILURE_NONE: u32 = 0u32;
/// A shader that failed to compile (stored under `gpusvc_program_cache_compile_failure_key`).
pub const GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE: u32 = 1u32;
/// A program that failed to link (stored under its program key).
pub const GPUSVC_PROGRAM_CACHE_FAILURE_LINK: u32 = 2u32;

/// Bytes in a SHA-1 digest (`gpusvc_program_cache_sha1`).
pub const GPUSVC_PROGRAM_CACHE_SHA1_LEN: usize = 20;

c_enum!(fn profile_in("GPUSVC_PROGRAM_CACHE_PROFILE") -> CacheConfig {
    GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP => CacheConfig::desktop(),
    GPUSVC_PROGRAM_CACHE_PROFILE_MOBILE => CacheConfig::mobile(),
    GPUSVC_PROGRAM_CACHE_PROFILE_LOW_MEMORY => CacheConfig::low_memory(),
});

c_enum!(fn policy_in / policy_out ("GPUSVC_PROGRAM_CACHE_EVICTION_POLICY") -> EvictionPolicy {
    GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_LRU => EvictionPolicy::Lru,
    GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_PAGE_LRU_MRU => EvictionPolicy::PageLruMru,
    GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_SLRU => EvictionPolicy::Slru,
    GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_S3_FIFO => EvictionPolicy::S3Fifo,
    GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_W_TINYLFU => EvictionPolicy::WTinyLfu,
});

c_enum!(fn compile_status_in / compile_status_out ("GPUSVC_PROGRAM_CACHE_COMPILE_STATUS") -> CompileStatus {
    GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_UNKNOWN => CompileStatus::Unknown,
    GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_SUCCESS => CompileStatus::Success,
});

c_enum!(fn link_status_in / link_status_out ("GPUSVC_PROGRAM_CACHE_LINK_STATUS") -> LinkStatus {
    GPUSVC_PROGRAM_CACHE_LINK_STATUS_UNKNOWN => LinkStatus::Unknown,
    GPUSVC_PROGRAM_CACHE_LINK_STATUS_SUCCESS => LinkStatus::Success,
});

c_enum!(fn memory_pressure_in("GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE") -> MemoryPressure {
    GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_NONE => MemoryPressure::None,
    GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_MODERATE => MemoryPressure::Moderate,
    GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_CRITICAL => MemoryPressure::Critical,
});

c_enum!(fn stage_in / stage_out ("gpusvc shader stage") -> ShaderStage {
    GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX => ShaderStage::Vertex,
    GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT => ShaderStage::Fragment,
    GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE => ShaderStage::Compute,
    GPUSVC_PROGRAM_CACHE_SHADER_STAGE_GEOMETRY => ShaderStage::Geometry,
    GPUSVC_PROGRAM_CACHE_SHADER_STAGE_TESS_CONTROL => ShaderStage::TessControl,
    GPUSVC_PROGRAM_CACHE_SHADER_STAGE_TESS_EVALUATION => ShaderStage::TessEvaluation,
});

c_enum!(fn transform_feedback_in / transform_feedback_out ("GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK")
    -> TransformFeedbackMode {
    GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK_INTERLEAVED => TransformFeedbackMode::Interleaved,
    GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK_SEPARATE => TransformFeedbackMode::Separate,
});

/// Which list of a variable set: `GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VariableKind {
    Attribute,
    Uniform,
    Varying,
    Output,
}

c_enum!(fn variable_kind_in("gpusvc variable kind") -> VariableKind {
    GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE => VariableKind::Attribute,
    GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM => VariableKind::Uniform,
    GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_VARYING => VariableKind::Varying,
    GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_OUTPUT => VariableKind::Output,
});

// ---- plain C types ----

/// A SHA-1 digest: a shader hash or a program key.
/// No `struct_size`: a fixed-size value, embedded in other structs and passed in arrays.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct gpusvc_program_cache_sha1 {
    /// The digest.
    pub bytes: [u8; 20],
}

impl From<ShaderHash> for gpusvc_program_cache_sha1 {
    fn from(h: ShaderHash) -> Self {
        gpusvc_program_cache_sha1 { bytes: h.0 }
    }
}

impl From<ProgramKey> for gpusvc_program_cache_sha1 {
    fn from(k: ProgramKey) -> Self {
        gpusvc_program_cache_sha1 { bytes: k.0 }
    }
}

/// Copies a digest in.
///
/// # Safety
/// `ptr` is NULL or valid for one read.
pub(crate) unsafe fn sha1_in(
    ptr: *const gpusvc_program_cache_sha1,
    name: &str,
) -> Result<[u8; 20], FfiError> {
    if ptr.is_null() {
        return Err(null_argument(name));
    }
    // SAFETY: non-null and valid for a read (contract); the struct is plain bytes, any value is
    // valid, and `read_unaligned` copies it whatever the caller's alignment.
    Ok(unsafe { ptr.read_unaligned() }.bytes)
}

/// Copies `count` shader hashes in (NULL allowed when `count` is 0).
///
/// # Safety
/// `ptr` is NULL or valid for `count` reads.
pub(crate) unsafe fn shader_hashes_in(
    ptr: *const gpusvc_program_cache_sha1,
    count: usize,
    name: &str,
) -> Result<Vec<ShaderHash>, FfiError> {
    // SAFETY: forwarded from this function's contract.
    let list = unsafe { crate::kit::slice_in(ptr, count, name) }?;
    Ok(list.iter().map(|h| ShaderHash(h.bytes)).collect())
}

/// Configuration of a program cache. The host sets `struct_size = sizeof(struct
/// gpusvc_program_cache_config)` and zeroes the rest before calling
/// `gpusvc_program_cache_config_defaults` (which keeps `struct_size`); a field past a host's
/// `struct_size` takes the desktop profile's value.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_program_cache_config {
    /// `sizeof(struct gpusvc_program_cache_config)`, set by the host (and kept by the `_defaults`
    /// function): the library reads only that many bytes, the fields past it take their
    /// defaults.
    pub struct_size: usize,
    /// Byte budget of the binary store (at most `PTRDIFF_MAX`).
    pub budget_bytes: usize,
    /// A `GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_*` value.
    pub policy: u32,
    /// How many compile statuses of shaders that no cached program uses are remembered (> 0).
    pub max_unreferenced_shader_statuses: usize,
    /// The persistence sink of a sandboxed GPU process (see
    /// `gpusvc_program_cache_persist_sink`), or NULL (the default) for none. The sink struct is
    /// copied when the cache is made; its callbacks and user data must stay valid until
    /// `gpusvc_program_cache_free` has returned. `gpusvc_program_cache_current_config` and the
    /// `_defaults` function write NULL here.
    pub persist_sink: *const gpusvc_program_cache_persist_sink,
    /// Whether programs linked with transform-feedback varyings go through the cache (the
    /// default, true). False is the workaround browsers apply on drivers whose binaries of such
    /// programs misbehave: a program manager on this cache links them from source every time,
    /// never looks them up and never reads or saves their binaries. A host whose
    /// `struct_size` stops before this field gets true.
    pub cache_transform_feedback: bool,
    /// Must be zero (else `GPUSVC_INVALID_ARGUMENT`): keeps the struct free of padding after its
    /// last field, so a field added later lies past today's size.
    pub reserved: [u8; 7],
}

impl From<CacheConfig> for gpusvc_program_cache_config {
    fn from(c: CacheConfig) -> Self {
        gpusvc_program_cache_config {
            struct_size: size_of::<Self>(),
            budget_bytes: c.budget_bytes,
            policy: policy_out(c.policy),
            max_unreferenced_shader_statuses: c.max_unreferenced_shader_statuses.get(),
            persist_sink: std::ptr::null(),
            cache_transform_feedback: true,
            reserved: [0; 7],
        }
    }
}

growable!(gpusvc_program_cache_config {
    first: max_unreferenced_shader_statuses,
    last: reserved,
    defaults: CacheConfig::desktop().into(),
});

pub(crate) fn config_in(c: &gpusvc_program_cache_config) -> Result<CacheConfig, FfiError> {
    if c.budget_bytes > isize::MAX as usize {
        return Err(invalid_argument(format!(
            "budget_bytes {} is absurd (more than PTRDIFF_MAX)",
            c.budget_bytes
        )));
    }
    let policy = policy_in(c.policy)?;
    let max = NonZeroUsize::new(c.max_unreferenced_shader_statuses)
        .ok_or_else(|| invalid_argument("max_unreferenced_shader_statuses is 0"))?;
    if c.reserved != [0; 7] {
        return Err(invalid_argument(
            "gpusvc_program_cache_config.reserved is not all zero",
        ));
    }
    Ok(CacheConfig {
        budget_bytes: c.budget_bytes,
        policy,
        max_unreferenced_shader_statuses: max,
    })
}
/// What a successful save did. The host sets `struct_size = sizeof(struct
/// gpusvc_program_cache_save_report)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_program_cache_save_report {
    /// Set by the host to `sizeof(struct gpusvc_program_cache_save_report)` before the call: the library writes only
    /// that many bytes (fewer when its own struct is smaller) and sets this to the bytes written.
    pub struct_size: usize,
    /// An entry with the same key was replaced.
    pub replaced: bool,
    /// Entries evicted to make room.
    pub evicted: usize,
}

growable!(gpusvc_program_cache_save_report {
    first: evicted,
    last: evicted
});
sized_default!(gpusvc_program_cache_save_report);

/// The cache's counters (inside `gpusvc_program_cache_stats_snapshot`, which carries the
/// `struct_size`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct gpusvc_program_cache_counters {
    /// Binary loads that found the program.
    pub hits: u64,
    /// Binary loads that did not.
    pub misses: u64,
    /// Programs evicted for space, by trim, pressure or a driver rejection.
    pub evictions: u64,
    /// Cached binaries the driver refused.
    pub driver_rejections: u64,
    /// Programs stored.
    pub saves: u64,
    /// Saves refused (empty, over budget, critical memory pressure).
    pub rejected_saves: u64,
    /// Compile calls answered by the status cache.
    pub status_hits: u64,
    /// Compile calls that went to the driver.
    pub status_misses: u64,
}

/// A snapshot of the cache's statistics. The host sets `struct_size = sizeof(struct
/// gpusvc_program_cache_stats_snapshot)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_program_cache_stats_snapshot {
    /// Set by the host to `sizeof(struct gpusvc_program_cache_stats_snapshot)` before the call: the library writes only
    /// that many bytes (fewer when its own struct is smaller) and sets this to the bytes written.
    pub struct_size: usize,
    /// Counters.
    pub counters: gpusvc_program_cache_counters,
    /// Bytes stored now.
    pub size_bytes: usize,
    /// Programs stored now.
    pub entries: usize,
    /// Links and compiles answered from a cached failure (the driver's log handed back
    /// without asking the driver again). 0 when the host's `struct_size` stops before it.
    pub failure_hits: u64,
}

growable!(gpusvc_program_cache_stats_snapshot {
    first: entries,
    last: failure_hits
});
sized_default!(gpusvc_program_cache_stats_snapshot);

/// A summary of one histogram (all zeros when it has no samples). The host sets `struct_size =
/// sizeof(struct gpusvc_program_cache_histogram_summary)` before the call.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct gpusvc_program_cache_histogram_summary {
    /// Set by the host to `sizeof(struct gpusvc_program_cache_histogram_summary)` before the call: the library writes only
    /// that many bytes (fewer when its own struct is smaller) and sets this to the bytes written.
    pub struct_size: usize,
    /// Samples recorded.
    pub count: u64,
    /// Sum of the samples.
    pub sum: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Upper bound of the bucket holding the median (clamped to min..max).
    pub p50: f64,
    /// Upper bound of the bucket holding the 95th percentile.
    pub p95: f64,
}

growable!(gpusvc_program_cache_histogram_summary {
    first: p95,
    last: p95
});
sized_default!(gpusvc_program_cache_histogram_summary);

/// One attribute or uniform of a shader's variable map: the name in the application's source,
/// the name in the translated source, GL type, array size and location.
///
/// In arguments both names must be non-NULL UTF-8; in results they point into the handle that
/// returned them and stay valid until that handle is freed (or, for a shader, changed).
///
/// No `struct_size`: it is an element of arrays passed with a count (and of
/// `gpusvc_program_cache_shader_variables`), whose stride cannot change.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_cache_variable_info {
    /// Name in the application's source.
    pub name: *const c_char,
    /// Name in the translated source (equal to `name` without a translator).
    pub mapped_name: *const c_char,
    /// GL type enum.
    pub gl_type: u32,
    /// Array size (1 for non-arrays).
    pub array_size: i32,
    /// Whether `location` is meaningful.
    pub has_location: bool,
    /// Location.
    pub location: i32,
}

/// A shader's variable maps, as a translator reports them. No `struct_size`: it is embedded in
/// `gpusvc_program_cache_entry_desc`, whose layout it fixes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_cache_shader_variables {
    /// `attribute_count` attributes (may be NULL when the count is 0).
    pub attributes: *const gpusvc_program_cache_variable_info,
    /// Number of attributes.
    pub attribute_count: usize,
    /// `uniform_count` uniforms (may be NULL when the count is 0).
    pub uniforms: *const gpusvc_program_cache_variable_info,
    /// Number of uniforms.
    pub uniform_count: usize,
}

/// A linked program as the cache stores it, described for `gpusvc_program_cache_save`. The host
/// sets `struct_size = sizeof(struct gpusvc_program_cache_entry_desc)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_cache_entry_desc {
    /// `sizeof(struct gpusvc_program_cache_entry_desc)`, set by the host (or kept from the `_defaults` function): the
    /// library reads only that many bytes, the fields past it take their defaults.
    pub struct_size: usize,
    /// Hash of the vertex shader (its compile status becomes referenced by this entry).
    pub vertex_shader: gpusvc_program_cache_sha1,
    /// Hash of the fragment shader.
    pub fragment_shader: gpusvc_program_cache_sha1,
    /// Vertex shader variable maps.
    pub vertex: gpusvc_program_cache_shader_variables,
    /// Fragment shader variable maps.
    pub fragment: gpusvc_program_cache_shader_variables,
    /// `binaryFormat` of `glGetProgramBinary`.
    pub binary_format: u32,
    /// `binary_len` bytes of program binary.
    pub binary: *const u8,
    /// Length of the binary (an empty binary is refused).
    pub binary_len: usize,
    /// Whether `page` is given.
    pub has_page: bool,
    /// The page / client the program is for (for GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_PAGE_LRU_MRU).
    pub page: u64,
    /// `GPUSVC_PROGRAM_CACHE_FAILURE_NONE` (a program: the default) or a failure record:
    /// `GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE` (key: `gpusvc_program_cache_compile_failure_key`,
    /// no shader hashes) or `GPUSVC_PROGRAM_CACHE_FAILURE_LINK` (key: the program key, with its
    /// shaders' hashes: they compiled). A failure record has no binary (`binary_len` 0) and the
    /// driver's info log in `failure_log`. Zero when the host's `struct_size` stops before it.
    pub failure: u32,
    /// With `GPUSVC_PROGRAM_CACHE_FAILURE_COMPILE`: the stage that failed
    /// (`GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*`); ignored otherwise.
    pub failure_stage: u32,
    /// With a failure: `failure_log_len` bytes of UTF-8, the driver's info log (at most
    /// 64 KiB); NULL when the length is 0.
    pub failure_log: *const c_char,
    /// Length of `failure_log`.
    pub failure_log_len: usize,
}

growable!(gpusvc_program_cache_entry_desc {
    first: page,
    last: failure_log_len,
    defaults: gpusvc_program_cache_entry_desc {
        struct_size: 0,
        vertex_shader: gpusvc_program_cache_sha1::default(),
        fragment_shader: gpusvc_program_cache_sha1::default(),
        vertex: NO_VARIABLES,
        fragment: NO_VARIABLES,
        binary_format: 0,
        binary: std::ptr::null(),
        binary_len: 0,
        has_page: false,
        page: 0,
        failure: GPUSVC_PROGRAM_CACHE_FAILURE_NONE,
        failure_stage: 0,
        failure_log: std::ptr::null(),
        failure_log_len: 0,
    },
});

const NO_VARIABLES: gpusvc_program_cache_shader_variables = gpusvc_program_cache_shader_variables {
    attributes: std::ptr::null(),
    attribute_count: 0,
    uniforms: std::ptr::null(),
    uniform_count: 0,
};

/// `glBindAttribLocation(name, location)` before linking. No `struct_size`: an element of an
/// array passed with a count.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_cache_attribute_binding {
    /// Attribute name (UTF-8, NUL-terminated).
    pub name: *const c_char,
    /// Location.
    pub location: u32,
}

/// What goes into a link besides the shaders (all of it is part of the program key). No
/// `struct_size`: it is embedded in `gpusvc_program_cache_program_key_input` and
/// `gpusvc_program_manager_program_options`, which carry it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_cache_link_options {
    /// `attribute_binding_count` bindings (may be NULL when the count is 0).
    pub attribute_bindings: *const gpusvc_program_cache_attribute_binding,
    /// Number of bindings.
    pub attribute_binding_count: usize,
    /// `transform_feedback_varying_count` varying names (may be NULL when the count is 0).
    pub transform_feedback_varyings: *const *const c_char,
    /// Number of varyings.
    pub transform_feedback_varying_count: usize,
    /// A `GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK_*` value.
    pub transform_feedback_mode: u32,
}

/// Everything a program key covers. The host sets `struct_size = sizeof(struct
/// gpusvc_program_cache_program_key_input)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_cache_program_key_input {
    /// `sizeof(struct gpusvc_program_cache_program_key_input)`, set by the host (or kept from the `_defaults` function): the
    /// library reads only that many bytes, the fields past it take their defaults.
    pub struct_size: usize,
    /// Hash of the vertex shader as compiled.
    pub vertex: gpusvc_program_cache_sha1,
    /// Hash of the fragment shader as compiled.
    pub fragment: gpusvc_program_cache_sha1,
    /// The host's translator / ANGLE version (UTF-8, NUL-terminated; may be empty).
    pub backend_identity: *const c_char,
    /// Attribute bindings and transform feedback.
    pub link: gpusvc_program_cache_link_options,
    /// The program's other stages (geometry, tessellation, compute) with their shaders'
    /// hashes, in any order, each stage at most once (may be NULL when the count is 0). A
    /// program without a vertex or fragment shader has all-zero hashes there. None when the
    /// host's `struct_size` stops before this field.
    pub other_stages: *const gpusvc_program_cache_stage_hash,
    /// Number of other stages.
    pub other_stage_count: usize,
    /// `GL_PROGRAM_SEPARABLE`. False when the host's `struct_size` stops before it.
    pub separable: bool,
    /// Must be zero.
    pub reserved: [u8; 7],
}

/// A stage and the hash of its shader as compiled. No `struct_size`: an element of arrays
/// passed with a count.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_cache_stage_hash {
    /// A `GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*` value.
    pub stage: u32,
    /// The shader's hash (`gpusvc_program_cache_shader_hash`; for a program manager's program,
    /// the shader's `gpusvc_program_cache_backend_shader_hash`).
    pub hash: gpusvc_program_cache_sha1,
}

growable!(gpusvc_program_cache_program_key_input {
    first: link,
    last: reserved,
    defaults: gpusvc_program_cache_program_key_input {
        struct_size: 0,
        vertex: gpusvc_program_cache_sha1::default(),
        fragment: gpusvc_program_cache_sha1::default(),
        backend_identity: std::ptr::null(),
        link: NO_LINK_OPTIONS,
        other_stages: std::ptr::null(),
        other_stage_count: 0,
        separable: false,
        reserved: [0; 7],
    },
});

/// Copies a program key input's other stages in, in pipeline order: vertex or fragment, or a
/// stage twice, is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `ptr` is NULL or valid for `len` reads.
pub(crate) unsafe fn other_stages_in(
    ptr: *const gpusvc_program_cache_stage_hash,
    len: usize,
) -> Result<Vec<(ShaderStage, ShaderHash)>, FfiError> {
    // SAFETY: forwarded from this function's contract.
    let list = unsafe { slice_in(ptr, len, "other_stages") }?;
    let mut out: Vec<(ShaderStage, ShaderHash)> = Vec::with_capacity(list.len());
    for s in list {
        let stage = stage_in(s.stage)?;
        if matches!(stage, ShaderStage::Vertex | ShaderStage::Fragment) {
            return Err(invalid_argument(format!(
                "other_stages holds the {stage} stage (it has its own field)"
            )));
        }
        if out.iter().any(|(t, _)| *t == stage) {
            return Err(invalid_argument(format!(
                "other_stages holds {stage} twice"
            )));
        }
        out.push((stage, ShaderHash(s.hash.bytes)));
    }
    out.sort_by_key(|(s, _)| ShaderStage::ALL.iter().position(|t| t == s));
    Ok(out)
}

/// No bindings, no transform feedback.
pub(crate) const NO_LINK_OPTIONS: gpusvc_program_cache_link_options =
    gpusvc_program_cache_link_options {
        attribute_bindings: std::ptr::null(),
        attribute_binding_count: 0,
        transform_feedback_varyings: std::ptr::null(),
        transform_feedback_varying_count: 0,
        transform_feedback_mode: GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK_INTERLEAVED,
    };

/// Copies link options in.
///
/// # Safety
/// The pointers in `o` follow the contract documented on `gpusvc_program_cache_link_options`.
pub(crate) unsafe fn link_options_in(
    o: &gpusvc_program_cache_link_options,
) -> Result<LinkOptions, FfiError> {
    // SAFETY: forwarded from this function's contract.
    let bindings = unsafe {
        slice_in(
            o.attribute_bindings,
            o.attribute_binding_count,
            "attribute_bindings",
        )
    }?;
    let attribute_bindings = bindings
        .iter()
        .map(|b| {
            Ok(AttributeBinding {
                // SAFETY: each binding's name is NULL or a NUL-terminated string (contract).
                name: unsafe { cstr_in(b.name, "attribute_bindings[].name") }?.to_owned(),
                location: b.location,
            })
        })
        .collect::<Result<Vec<_>, FfiError>>()?;
    // SAFETY: forwarded from this function's contract.
    let varyings = unsafe {
        slice_in(
            o.transform_feedback_varyings,
            o.transform_feedback_varying_count,
            "transform_feedback_varyings",
        )
    }?;
    let transform_feedback_varyings = varyings
        .iter()
        .map(|&v| {
            // SAFETY: each varying is NULL or a NUL-terminated string (contract).
            Ok(unsafe { cstr_in(v, "transform_feedback_varyings[]") }?.to_owned())
        })
        .collect::<Result<Vec<_>, FfiError>>()?;
    let transform_feedback_mode = transform_feedback_in(o.transform_feedback_mode)?;
    Ok(LinkOptions {
        attribute_bindings,
        transform_feedback_varyings,
        transform_feedback_mode,
        separable: false,
    })
}

/// Copies a variable list in.
///
/// # Safety
/// `ptr` is valid for `len` reads when `len > 0`, each entry's names NULL or NUL-terminated.
pub(crate) unsafe fn variables_in(
    ptr: *const gpusvc_program_cache_variable_info,
    len: usize,
    name: &str,
) -> Result<Vec<VariableInfo>, FfiError> {
    // SAFETY: forwarded from this function's contract.
    let list = unsafe { slice_in(ptr, len, name) }?;
    list.iter()
        .map(|v| {
            Ok(VariableInfo {
                // SAFETY: names are NULL or NUL-terminated strings (contract).
                name: unsafe { cstr_in(v.name, "variable name") }?.to_owned(),
                // SAFETY: as above.
                mapped_name: unsafe { cstr_in(v.mapped_name, "variable mapped_name") }?.to_owned(),
                gl_type: v.gl_type,
                array_size: v.array_size,
                location: v.has_location.then_some(v.location),
                ..Default::default()
            })
        })
        .collect()
}

/// Copies a shader's variable maps in.
///
/// # Safety
/// The pointers in `v` follow the contract documented on `gpusvc_program_cache_shader_variables`.
pub(crate) unsafe fn shader_variables_in(
    v: &gpusvc_program_cache_shader_variables,
) -> Result<ShaderVariables, FfiError> {
    Ok(ShaderVariables {
        // SAFETY: forwarded from this function's contract.
        attributes: unsafe { variables_in(v.attributes, v.attribute_count, "attributes") }?,
        // SAFETY: forwarded from this function's contract.
        uniforms: unsafe { variables_in(v.uniforms, v.uniform_count, "uniforms") }?,
        ..Default::default()
    })
}

/// A variable with its names as C strings, owned by the handle that hands it out.
#[derive(Debug)]
pub(crate) struct CVariable {
    name: CString,
    mapped_name: CString,
    gl_type: u32,
    array_size: i32,
    location: Option<i32>,
    pub(crate) precision: u32,
    pub(crate) static_use: bool,
}

impl CVariable {
    fn new(v: &VariableInfo) -> Self {
        CVariable {
            name: c_string(&v.name),
            mapped_name: c_string(&v.mapped_name),
            gl_type: v.gl_type,
            array_size: v.array_size,
            location: v.location,
            precision: v.precision,
            static_use: v.static_use,
        }
    }

    pub(crate) fn info(&self) -> gpusvc_program_cache_variable_info {
        gpusvc_program_cache_variable_info {
            name: self.name.as_ptr(),
            mapped_name: self.mapped_name.as_ptr(),
            gl_type: self.gl_type,
            array_size: self.array_size,
            has_location: self.location.is_some(),
            location: self.location.unwrap_or(-1),
        }
    }
}

/// A block of a shader's maps with C strings, and its members as C structs pointing into them.
#[derive(Debug)]
pub(crate) struct CShaderBlock {
    pub(crate) name: CString,
    pub(crate) mapped_name: CString,
    pub(crate) binding: i32,
    pub(crate) data_size: i32,
    pub(crate) static_use: bool,
    _members: Vec<CVariable>,
    /// Point into `_members` (heap strings: moving the vectors keeps them valid).
    pub(crate) member_infos: MemberInfos,
}

/// The C structs of a block's members, pointing into the block's own `CString`s.
#[derive(Debug)]
pub(crate) struct MemberInfos(pub(crate) Vec<gpusvc_program_cache_variable_info>);

// SAFETY: the pointers inside point into `CString`s owned by the same `CShaderBlock`, which are
// never changed or freed while it lives; sharing or sending read-only pointers to immutable
// heap bytes is as safe as sharing the strings themselves.
unsafe impl Send for MemberInfos {}
// SAFETY: as above: nothing is ever written through these pointers.
unsafe impl Sync for MemberInfos {}

impl CShaderBlock {
    fn new(b: &program_cache::BlockInfo) -> Self {
        let members: Vec<CVariable> = b.members.iter().map(CVariable::new).collect();
        let member_infos = MemberInfos(members.iter().map(CVariable::info).collect());
        CShaderBlock {
            name: c_string(&b.name),
            mapped_name: c_string(&b.mapped_name),
            binding: b.binding,
            data_size: b.data_size,
            static_use: b.static_use,
            _members: members,
            member_infos,
        }
    }
}

/// A shader's variable maps with C strings.
#[derive(Debug, Default)]
pub(crate) struct CShaderVariables {
    attributes: Vec<CVariable>,
    uniforms: Vec<CVariable>,
    varyings: Vec<CVariable>,
    outputs: Vec<CVariable>,
    uniform_blocks: Vec<CShaderBlock>,
    storage_blocks: Vec<CShaderBlock>,
}

impl CShaderVariables {
    pub(crate) fn new(v: &ShaderVariables) -> Self {
        let list = |l: &[VariableInfo]| l.iter().map(CVariable::new).collect();
        CShaderVariables {
            attributes: list(&v.attributes),
            uniforms: list(&v.uniforms),
            varyings: list(&v.varyings),
            outputs: list(&v.outputs),
            uniform_blocks: v.uniform_blocks.iter().map(CShaderBlock::new).collect(),
            storage_blocks: v.storage_blocks.iter().map(CShaderBlock::new).collect(),
        }
    }

    /// The uniform blocks, or (`uniform` false) the storage blocks.
    pub(crate) fn blocks(&self, uniform: bool) -> &[CShaderBlock] {
        if uniform {
            &self.uniform_blocks
        } else {
            &self.storage_blocks
        }
    }

    pub(crate) fn list(&self, kind: VariableKind) -> &[CVariable] {
        match kind {
            VariableKind::Attribute => &self.attributes,
            VariableKind::Uniform => &self.uniforms,
            VariableKind::Varying => &self.varyings,
            VariableKind::Output => &self.outputs,
        }
    }

    /// Writes the count of one list.
    pub(crate) fn count_out(&self, kind: VariableKind, out: Out<usize>) {
        out.write(self.list(kind).len());
    }

    /// Writes one entry; `GPUSVC_INVALID_ARGUMENT` past the end.
    pub(crate) fn entry_out(
        &self,
        kind: VariableKind,
        index: usize,
        out: Out<gpusvc_program_cache_variable_info>,
    ) -> Result<(), FfiError> {
        out.write(item_at(self.list(kind), index, "variables")?.info());
        Ok(())
    }
}

/// Item `index` of `list`; past the end `GPUSVC_INVALID_ARGUMENT` ("index 5 is past the 2
/// variables").
pub(crate) fn item_at<'a, T>(list: &'a [T], index: usize, what: &str) -> Result<&'a T, FfiError> {
    list.get(index)
        .ok_or_else(|| invalid_argument(format!("index {index} is past the {} {what}", list.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_round_trips_and_rejects_nonsense() {
        let c: gpusvc_program_cache_config = CacheConfig::mobile().into();
        assert_eq!(config_in(&c).unwrap(), CacheConfig::mobile());
        let bad = gpusvc_program_cache_config { policy: 9, ..c };
        assert!(config_in(&bad).is_err());
        let bad = gpusvc_program_cache_config {
            max_unreferenced_shader_statuses: 0,
            ..c
        };
        assert!(config_in(&bad).is_err());
        let bad = gpusvc_program_cache_config {
            budget_bytes: usize::MAX,
            ..c
        };
        assert!(config_in(&bad).is_err());
    }

    #[test]
    fn every_enumeration_decodes_what_it_encodes_and_nothing_else() {
        for p in EvictionPolicy::ALL {
            assert_eq!(policy_in(policy_out(p)).unwrap(), p);
        }
        for s in ShaderStage::ALL {
            assert_eq!(stage_in(stage_out(s)).unwrap(), s);
        }
        let e = stage_in(6).unwrap_err();
        assert!(
            format!("{e:?}").contains("unknown gpusvc shader stage value 6"),
            "{e:?}"
        );
        assert!(format!("{:?}", policy_in(5).unwrap_err()).contains("INVALID_ARGUMENT"));
        assert!(memory_pressure_in(3).is_err());
        assert!(profile_in(3).is_err());
        assert!(variable_kind_in(3).is_ok());
        assert!(variable_kind_in(4).is_err());
        assert!(transform_feedback_in(2).is_err());
    }
}
