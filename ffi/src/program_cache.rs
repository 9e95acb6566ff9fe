//! `gpusvc_program_cache_*` and `gpusvc_cached_program_*`: the GL program binary cache
//! (status storage, byte-budget binary storage, statistics) seen from C.
//!
//! A `gpusvc_program_cache` may be used from any thread at once (one lock inside); the
//! histogram callback runs on the calling thread with no lock held. Keys, names and binaries are
//! copied in; nothing keeps a pointer into the caller's memory.

use std::ffi::{CString, c_char, c_void};
use std::num::NonZeroUsize;
use std::sync::{Arc, OnceLock};

use headless_gl::{AttributeBinding, LinkOptions, ShaderStage, TransformFeedbackMode};
use program_cache::stats::names;
use program_cache::{
    CacheConfig, CachedProgram, CompileStatus, EvictionPolicy, HistogramCallback, LinkStatus,
    MemoryPressure, ProgramBinaryData, ProgramCache, ProgramKey, ProgramKeyInput, SaveError,
    ShaderHash, ShaderVariables, SharedProgram, VariableInfo, program_key, shader_hash,
};

use crate::args::{copy_list_out, cstr_in, enum_in, invalid_argument, slice_in, write};
use crate::boundary::{FfiError, ffi_guard, null_argument, out_ptr};
use crate::handle::{self, Kind};
use crate::result::gpusvc_result;

// ---- enumerations (passed as uint32_t) ----

/// `gpusvc_program_cache_config_defaults` profile: desktop (6 MiB, W-TinyLFU).
pub const GPUSVC_CACHE_PROFILE_DESKTOP: u32 = 0u32;
/// `gpusvc_program_cache_config_defaults` profile: mobile (2 MiB, W-TinyLFU).
pub const GPUSVC_CACHE_PROFILE_MOBILE: u32 = 1u32;
/// `gpusvc_program_cache_config_defaults` profile: low-memory devices (128 KiB, W-TinyLFU).
pub const GPUSVC_CACHE_PROFILE_LOW_MEMORY: u32 = 2u32;

/// Eviction policy: least recently used program first. A working set larger than the budget
/// asked for in a fixed cyclic order gets no hits under it.
pub const GPUSVC_EVICTION_POLICY_LRU: u32 = 0u32;
/// Eviction policy: most recently used program of the least recently used page first.
pub const GPUSVC_EVICTION_POLICY_PAGE_LRU_MRU: u32 = 1u32;
/// Eviction policy: segmented LRU (probation first; programs hit at least once are protected).
pub const GPUSVC_EVICTION_POLICY_SLRU: u32 = 2u32;
/// Eviction policy: S3-FIFO (small FIFO, main FIFO with reinsertion, ghost keys).
pub const GPUSVC_EVICTION_POLICY_S3_FIFO: u32 = 3u32;
/// Eviction policy: window TinyLFU (a program enters the main area only when it is asked for
/// more often than the program it would displace). The default of every profile.
pub const GPUSVC_EVICTION_POLICY_W_TINYLFU: u32 = 4u32;

/// Shader compile status: not known, compile it.
pub const GPUSVC_COMPILE_STATUS_UNKNOWN: u32 = 0u32;
/// Shader compile status: compiled successfully before.
pub const GPUSVC_COMPILE_STATUS_SUCCESS: u32 = 1u32;

/// Program link status: not known.
pub const GPUSVC_LINK_STATUS_UNKNOWN: u32 = 0u32;
/// Program link status: linked and cached.
pub const GPUSVC_LINK_STATUS_SUCCESS: u32 = 1u32;

/// Memory pressure: normal operation.
pub const GPUSVC_MEMORY_PRESSURE_NONE: u32 = 0u32;
/// Memory pressure: trim to a quarter of the budget and keep to it (saves evict down to it, a
/// larger entry is refused) until the level is NONE again.
pub const GPUSVC_MEMORY_PRESSURE_MODERATE: u32 = 1u32;
/// Memory pressure: drop everything and refuse saves until the level is NONE again.
pub const GPUSVC_MEMORY_PRESSURE_CRITICAL: u32 = 2u32;

/// Shader stage: vertex.
pub const GPUSVC_SHADER_STAGE_VERTEX: u32 = 0u32;
/// Shader stage: fragment.
pub const GPUSVC_SHADER_STAGE_FRAGMENT: u32 = 1u32;
/// Shader stage: compute (hashing and compiling only; programs are vertex + fragment).
pub const GPUSVC_SHADER_STAGE_COMPUTE: u32 = 2u32;

/// Transform-feedback buffer mode: `GL_INTERLEAVED_ATTRIBS`.
pub const GPUSVC_TRANSFORM_FEEDBACK_INTERLEAVED: u32 = 0u32;
/// Transform-feedback buffer mode: `GL_SEPARATE_ATTRIBS`.
pub const GPUSVC_TRANSFORM_FEEDBACK_SEPARATE: u32 = 1u32;

/// Variable kind: attributes.
pub const GPUSVC_VARIABLE_KIND_ATTRIBUTE: u32 = 0u32;
/// Variable kind: uniforms.
pub const GPUSVC_VARIABLE_KIND_UNIFORM: u32 = 1u32;

/// Bytes in a SHA-1 digest (`gpusvc_sha1`).
pub const GPUSVC_SHA1_LEN: usize = 20;

pub(crate) fn stage_in(value: u32) -> Result<ShaderStage, FfiError> {
    enum_in(value, "gpusvc shader stage", |v| match v {
        GPUSVC_SHADER_STAGE_VERTEX => Some(ShaderStage::Vertex),
        GPUSVC_SHADER_STAGE_FRAGMENT => Some(ShaderStage::Fragment),
        GPUSVC_SHADER_STAGE_COMPUTE => Some(ShaderStage::Compute),
        _ => None,
    })
}

pub(crate) fn stage_out(stage: ShaderStage) -> u32 {
    match stage {
        ShaderStage::Vertex => GPUSVC_SHADER_STAGE_VERTEX,
        ShaderStage::Fragment => GPUSVC_SHADER_STAGE_FRAGMENT,
        ShaderStage::Compute => GPUSVC_SHADER_STAGE_COMPUTE,
    }
}

/// Which list of a variable set: `GPUSVC_VARIABLE_KIND_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VariableKind {
    Attribute,
    Uniform,
}

pub(crate) fn variable_kind_in(value: u32) -> Result<VariableKind, FfiError> {
    enum_in(value, "gpusvc variable kind", |v| match v {
        GPUSVC_VARIABLE_KIND_ATTRIBUTE => Some(VariableKind::Attribute),
        GPUSVC_VARIABLE_KIND_UNIFORM => Some(VariableKind::Uniform),
        _ => None,
    })
}

// ---- plain C types ----

/// A SHA-1 digest: a shader hash or a program key.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct gpusvc_sha1 {
    /// The digest.
    pub bytes: [u8; 20],
}

impl From<ShaderHash> for gpusvc_sha1 {
    fn from(h: ShaderHash) -> Self {
        gpusvc_sha1 { bytes: h.0 }
    }
}

impl From<ProgramKey> for gpusvc_sha1 {
    fn from(k: ProgramKey) -> Self {
        gpusvc_sha1 { bytes: k.0 }
    }
}

/// Copies a digest in.
///
/// # Safety
/// `ptr` is NULL or valid for one read.
pub(crate) unsafe fn sha1_in(ptr: *const gpusvc_sha1, name: &str) -> Result<[u8; 20], FfiError> {
    if ptr.is_null() {
        return Err(null_argument(name));
    }
    // SAFETY: non-null and valid for a read (contract); the struct is plain bytes, any value is
    // valid, and `read_unaligned` copies it whatever the caller's alignment.
    Ok(unsafe { ptr.read_unaligned() }.bytes)
}

/// Configuration of a program cache.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct gpusvc_program_cache_config {
    /// Byte budget of the binary store (at most `PTRDIFF_MAX`).
    pub budget_bytes: usize,
    /// A `GPUSVC_EVICTION_POLICY_*` value.
    pub policy: u32,
    /// How many compile statuses of shaders that no cached program uses are remembered (> 0).
    pub max_unreferenced_shader_statuses: usize,
}

impl From<CacheConfig> for gpusvc_program_cache_config {
    fn from(c: CacheConfig) -> Self {
        gpusvc_program_cache_config {
            budget_bytes: c.budget_bytes,
            policy: match c.policy {
                EvictionPolicy::Lru => GPUSVC_EVICTION_POLICY_LRU,
                EvictionPolicy::PageLruMru => GPUSVC_EVICTION_POLICY_PAGE_LRU_MRU,
                EvictionPolicy::Slru => GPUSVC_EVICTION_POLICY_SLRU,
                EvictionPolicy::S3Fifo => GPUSVC_EVICTION_POLICY_S3_FIFO,
                EvictionPolicy::WTinyLfu => GPUSVC_EVICTION_POLICY_W_TINYLFU,
            },
            max_unreferenced_shader_statuses: c.max_unreferenced_shader_statuses.get(),
        }
    }
}

pub(crate) fn config_in(c: &gpusvc_program_cache_config) -> Result<CacheConfig, FfiError> {
    if c.budget_bytes > isize::MAX as usize {
        return Err(invalid_argument(format!(
            "budget_bytes {} is absurd (more than PTRDIFF_MAX)",
            c.budget_bytes
        )));
    }
    let policy = enum_in(c.policy, "GPUSVC_EVICTION_POLICY", |v| match v {
        GPUSVC_EVICTION_POLICY_LRU => Some(EvictionPolicy::Lru),
        GPUSVC_EVICTION_POLICY_PAGE_LRU_MRU => Some(EvictionPolicy::PageLruMru),
        GPUSVC_EVICTION_POLICY_SLRU => Some(EvictionPolicy::Slru),
        GPUSVC_EVICTION_POLICY_S3_FIFO => Some(EvictionPolicy::S3Fifo),
        GPUSVC_EVICTION_POLICY_W_TINYLFU => Some(EvictionPolicy::WTinyLfu),
        _ => None,
    })?;
    let max = NonZeroUsize::new(c.max_unreferenced_shader_statuses)
        .ok_or_else(|| invalid_argument("max_unreferenced_shader_statuses is 0"))?;
    Ok(CacheConfig {
        budget_bytes: c.budget_bytes,
        policy,
        max_unreferenced_shader_statuses: max,
    })
}

/// Called once per histogram sample: the histogram's name (a static string), the value (times
/// in microseconds, sizes in bytes) and the `user_data` given at creation.
pub type gpusvc_histogram_callback =
    Option<unsafe extern "C" fn(name: *const c_char, value: f64, user_data: *mut c_void)>;

/// What a successful save did.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct gpusvc_save_report {
    /// An entry with the same key was replaced.
    pub replaced: bool,
    /// Entries evicted to make room.
    pub evicted: usize,
}

/// The cache's counters.
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

/// A snapshot of the cache's statistics.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct gpusvc_program_cache_stats {
    /// Counters.
    pub counters: gpusvc_program_cache_counters,
    /// Bytes stored now.
    pub size_bytes: usize,
    /// Programs stored now.
    pub entries: usize,
}

/// A summary of one histogram (all zeros when it has no samples).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct gpusvc_histogram_summary {
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

/// One attribute or uniform of a shader's variable map: the name in the application's source,
/// the name in the translated source, GL type, array size and location.
///
/// In arguments both names must be non-NULL UTF-8; in results they point into the handle that
/// returned them and stay valid until that handle is freed (or, for a shader, changed).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_variable_info {
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

/// A shader's variable maps, as a translator reports them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_shader_variables {
    /// `attribute_count` attributes (may be NULL when the count is 0).
    pub attributes: *const gpusvc_variable_info,
    /// Number of attributes.
    pub attribute_count: usize,
    /// `uniform_count` uniforms (may be NULL when the count is 0).
    pub uniforms: *const gpusvc_variable_info,
    /// Number of uniforms.
    pub uniform_count: usize,
}

/// A linked program as the cache stores it, described for `gpusvc_program_cache_save`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_cached_program_desc {
    /// Hash of the vertex shader (its compile status becomes referenced by this entry).
    pub vertex_shader: gpusvc_sha1,
    /// Hash of the fragment shader.
    pub fragment_shader: gpusvc_sha1,
    /// Vertex shader variable maps.
    pub vertex: gpusvc_shader_variables,
    /// Fragment shader variable maps.
    pub fragment: gpusvc_shader_variables,
    /// `binaryFormat` of `glGetProgramBinary`.
    pub binary_format: u32,
    /// `binary_len` bytes of program binary.
    pub binary: *const u8,
    /// Length of the binary (an empty binary is refused).
    pub binary_len: usize,
    /// Whether `page` is given.
    pub has_page: bool,
    /// The page / client the program is for (for GPUSVC_EVICTION_POLICY_PAGE_LRU_MRU).
    pub page: u64,
}

/// `glBindAttribLocation(name, location)` before linking.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_attribute_binding {
    /// Attribute name (UTF-8, NUL-terminated).
    pub name: *const c_char,
    /// Location.
    pub location: u32,
}

/// What goes into a link besides the shaders (all of it is part of the program key).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_link_options {
    /// `attribute_binding_count` bindings (may be NULL when the count is 0).
    pub attribute_bindings: *const gpusvc_attribute_binding,
    /// Number of bindings.
    pub attribute_binding_count: usize,
    /// `transform_feedback_varying_count` varying names (may be NULL when the count is 0).
    pub transform_feedback_varyings: *const *const c_char,
    /// Number of varyings.
    pub transform_feedback_varying_count: usize,
    /// A `GPUSVC_TRANSFORM_FEEDBACK_*` value.
    pub transform_feedback_mode: u32,
}

/// Everything a program key covers.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct gpusvc_program_key_input {
    /// Hash of the vertex shader as compiled.
    pub vertex: gpusvc_sha1,
    /// Hash of the fragment shader as compiled.
    pub fragment: gpusvc_sha1,
    /// The host's translator / ANGLE version (UTF-8, NUL-terminated; may be empty).
    pub backend_identity: *const c_char,
    /// Attribute bindings and transform feedback.
    pub link: gpusvc_link_options,
}

/// Copies link options in.
///
/// # Safety
/// The pointers in `o` follow the contract documented on `gpusvc_link_options`.
pub(crate) unsafe fn link_options_in(o: &gpusvc_link_options) -> Result<LinkOptions, FfiError> {
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
    let transform_feedback_mode = enum_in(
        o.transform_feedback_mode,
        "GPUSVC_TRANSFORM_FEEDBACK",
        |v| match v {
            GPUSVC_TRANSFORM_FEEDBACK_INTERLEAVED => Some(TransformFeedbackMode::Interleaved),
            GPUSVC_TRANSFORM_FEEDBACK_SEPARATE => Some(TransformFeedbackMode::Separate),
            _ => None,
        },
    )?;
    Ok(LinkOptions {
        attribute_bindings,
        transform_feedback_varyings,
        transform_feedback_mode,
    })
}

/// Copies a variable list in.
///
/// # Safety
/// `ptr` is valid for `len` reads when `len > 0`, each entry's names NULL or NUL-terminated.
unsafe fn variables_in(
    ptr: *const gpusvc_variable_info,
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
            })
        })
        .collect()
}

/// Copies a shader's variable maps in.
///
/// # Safety
/// The pointers in `v` follow the contract documented on `gpusvc_shader_variables`.
pub(crate) unsafe fn shader_variables_in(
    v: &gpusvc_shader_variables,
) -> Result<ShaderVariables, FfiError> {
    Ok(ShaderVariables {
        // SAFETY: forwarded from this function's contract.
        attributes: unsafe { variables_in(v.attributes, v.attribute_count, "attributes") }?,
        // SAFETY: forwarded from this function's contract.
        uniforms: unsafe { variables_in(v.uniforms, v.uniform_count, "uniforms") }?,
    })
}

/// A string for C: interior NULs (never produced by drivers or by C input) are dropped.
pub(crate) fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// A variable with its names as C strings, owned by the handle that hands it out.
#[derive(Debug)]
pub(crate) struct CVariable {
    name: CString,
    mapped_name: CString,
    gl_type: u32,
    array_size: i32,
    location: Option<i32>,
}

impl CVariable {
    fn new(v: &VariableInfo) -> Self {
        CVariable {
            name: c_string(&v.name),
            mapped_name: c_string(&v.mapped_name),
            gl_type: v.gl_type,
            array_size: v.array_size,
            location: v.location,
        }
    }

    fn info(&self) -> gpusvc_variable_info {
        gpusvc_variable_info {
            name: self.name.as_ptr(),
            mapped_name: self.mapped_name.as_ptr(),
            gl_type: self.gl_type,
            array_size: self.array_size,
            has_location: self.location.is_some(),
            location: self.location.unwrap_or(-1),
        }
    }
}

/// A shader's variable maps with C strings.
#[derive(Debug, Default)]
pub(crate) struct CShaderVariables {
    attributes: Vec<CVariable>,
    uniforms: Vec<CVariable>,
}

impl CShaderVariables {
    pub(crate) fn new(v: &ShaderVariables) -> Self {
        CShaderVariables {
            attributes: v.attributes.iter().map(CVariable::new).collect(),
            uniforms: v.uniforms.iter().map(CVariable::new).collect(),
        }
    }

    pub(crate) fn list(&self, kind: VariableKind) -> &[CVariable] {
        match kind {
            VariableKind::Attribute => &self.attributes,
            VariableKind::Uniform => &self.uniforms,
        }
    }

    /// Writes the count of one list.
    ///
    /// # Safety
    /// `out` is non-NULL and valid for one write.
    pub(crate) unsafe fn count_out(&self, kind: VariableKind, out: *mut usize) {
        // SAFETY: forwarded from this function's contract.
        unsafe { write(out, self.list(kind).len()) }
    }

    /// Writes one entry; `GPUSVC_INVALID_ARGUMENT` past the end.
    ///
    /// # Safety
    /// `out` is non-NULL and valid for one write.
    pub(crate) unsafe fn entry_out(
        &self,
        kind: VariableKind,
        index: usize,
        out: *mut gpusvc_variable_info,
    ) -> Result<(), FfiError> {
        let list = self.list(kind);
        let v = list.get(index).ok_or_else(|| {
            invalid_argument(format!(
                "index {index} is past the {} variables",
                list.len()
            ))
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { write(out, v.info()) };
        Ok(())
    }
}

// ---- the cache handle ----

/// An opaque program cache. Thread-safe: any thread may use it, and free it once no other
/// thread is still calling with it (a call in flight finishes on a live cache either way).
#[derive(Debug)]
pub struct gpusvc_program_cache {
    _opaque: [u8; 0],
}

/// A copy of one cached program, taken out by `gpusvc_program_cache_load` / `_peek`. Immutable
/// and usable from any thread.
#[derive(Debug)]
pub struct gpusvc_cached_program {
    _opaque: [u8; 0],
}

struct CachedProgramCopy {
    program: SharedProgram,
    vertex: CShaderVariables,
    fragment: CShaderVariables,
}

impl CachedProgramCopy {
    fn new(program: SharedProgram) -> Self {
        CachedProgramCopy {
            vertex: CShaderVariables::new(&program.vertex),
            fragment: CShaderVariables::new(&program.fragment),
            program,
        }
    }

    fn stage(&self, stage: u32) -> Result<&CShaderVariables, FfiError> {
        match stage_in(stage)? {
            ShaderStage::Vertex => Ok(&self.vertex),
            ShaderStage::Fragment => Ok(&self.fragment),
            ShaderStage::Compute => Err(invalid_argument(
                "a cached program has vertex and fragment variables only",
            )),
        }
    }
}

pub(crate) fn cache(cache: *const gpusvc_program_cache) -> Result<Arc<ProgramCache>, FfiError> {
    handle::shared(cache, "cache", Kind::ProgramCache)
}

fn cached_program(p: *const gpusvc_cached_program) -> Result<Arc<CachedProgramCopy>, FfiError> {
    handle::shared(p, "program", Kind::CachedProgram)
}

/// The host's histogram callback.
struct HostHistogram {
    callback: unsafe extern "C" fn(*const c_char, f64, *mut c_void),
    user_data: *mut c_void,
}

// SAFETY: `gpusvc_program_cache_new`'s contract: the callback and its user_data may be used from
// any thread that uses the cache, at the same time.
unsafe impl Send for HostHistogram {}
// SAFETY: as above.
unsafe impl Sync for HostHistogram {}

/// Histogram names as static C strings.
fn histogram_names() -> &'static [(&'static str, CString)] {
    static NAMES: OnceLock<Vec<(&'static str, CString)>> = OnceLock::new();
    NAMES.get_or_init(|| names::ALL.iter().map(|&n| (n, c_string(n))).collect())
}

/// The host's histogram callback as the cache takes it (`None` for a NULL callback).
pub(crate) fn host_histogram(
    histogram: gpusvc_histogram_callback,
    user_data: *mut c_void,
) -> Option<HistogramCallback> {
    histogram.map(|callback| {
        let host = HostHistogram {
            callback,
            user_data,
        };
        Arc::new(move |n: &str, v: f64| host.call(n, v)) as HistogramCallback
    })
}

impl HostHistogram {
    fn call(&self, name: &str, value: f64) {
        let fallback;
        let c_name = match histogram_names().iter().find(|(n, _)| *n == name) {
            Some((_, c)) => c.as_c_str(),
            None => {
                fallback = c_string(name);
                fallback.as_c_str()
            }
        };
        // SAFETY: the host gave this callback and user_data for exactly this use; the name is a
        // NUL-terminated string that outlives the call.
        unsafe { (self.callback)(c_name.as_ptr(), value, self.user_data) };
    }
}

/// Writes the defaults of a profile (`GPUSVC_CACHE_PROFILE_*`) into `*out`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_config_defaults(
    profile: u32,
    out: *mut gpusvc_program_cache_config,
) -> gpusvc_result {
    ffi_guard(|| {
        let out = out_ptr(out, "out")?;
        let config = enum_in(profile, "GPUSVC_CACHE_PROFILE", |v| match v {
            GPUSVC_CACHE_PROFILE_DESKTOP => Some(CacheConfig::desktop()),
            GPUSVC_CACHE_PROFILE_MOBILE => Some(CacheConfig::mobile()),
            GPUSVC_CACHE_PROFILE_LOW_MEMORY => Some(CacheConfig::low_memory()),
            _ => None,
        })?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, config.into()) };
        Ok(())
    })
}

/// Creates an empty program cache.
///
/// `histogram` (may be NULL) is called once per histogram sample with `user_data`, on whichever
/// thread recorded it and with no cache lock held (it may call back into the cache). It must
/// not unwind, and it and `user_data` must stay valid until the cache is freed.
///
/// Errors: `GPUSVC_INVALID_ARGUMENT` for an unknown policy, a budget over `PTRDIFF_MAX` or
/// `max_unreferenced_shader_statuses` 0.
///
/// # Safety
/// `config` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_new(
    config: *const gpusvc_program_cache_config,
    histogram: gpusvc_histogram_callback,
    user_data: *mut c_void,
    out: *mut *mut gpusvc_program_cache,
) -> gpusvc_result {
    ffi_guard(|| {
        if config.is_null() {
            return Err(null_argument("config"));
        }
        let out = out_ptr(out, "out")?;
        // SAFETY: non-null and valid for a read (contract); plain integers.
        let config = config_in(&unsafe { config.read_unaligned() })?;
        let cache = match host_histogram(histogram, user_data) {
            None => ProgramCache::new(config),
            Some(callback) => ProgramCache::with_callback(config, callback),
        };
        let handle = handle::new_shared(Kind::ProgramCache, cache);
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, handle) };
        Ok(())
    })
}

/// Frees a cache. NULL is a no-op (`GPUSVC_OK`); a freed or unknown handle is
/// `GPUSVC_INVALID_HANDLE`. Program managers made over the cache keep it alive until they are
/// freed.
///
/// A cache with a disk store (`gpusvc_program_cache_new_with_disk`): when this frees the last
/// reference, it waits for the writes already queued. Its log callback is never called once
/// this has returned, even while program managers keep the cache alive.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_free(
    cache: *mut gpusvc_program_cache,
) -> gpusvc_result {
    ffi_guard(|| {
        handle::free(cache, Kind::ProgramCache)?;
        crate::disk_cache::close_log(cache.addr());
        Ok(())
    })
}

/// The configuration the cache was made with.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_get_config(
    cache: *const gpusvc_program_cache,
    out: *mut gpusvc_program_cache_config,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        let out = out_ptr(out, "out")?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, cache.config().into()) };
        Ok(())
    })
}

/// Hash of one shader as compiled: its stage (`GPUSVC_SHADER_STAGE_*`), the source
/// (`source_len` bytes of UTF-8, non-empty) and the compile options that change the output
/// (opaque bytes; `options` may be NULL when `options_len` is 0).
///
/// # Safety
/// `source` is NULL or valid for `source_len` bytes; `options` is NULL or valid for
/// `options_len` bytes; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_shader_hash(
    stage: u32,
    source: *const c_char,
    source_len: usize,
    options: *const u8,
    options_len: usize,
    out: *mut gpusvc_sha1,
) -> gpusvc_result {
    ffi_guard(|| {
        let stage = stage_in(stage)?;
        // SAFETY: forwarded from this function's contract.
        let source = unsafe { crate::args::source_in(source, source_len) }?;
        // SAFETY: forwarded from this function's contract.
        let options = unsafe { slice_in(options, options_len, "options") }?;
        let out = out_ptr(out, "out")?;
        let hash = shader_hash(stage, source, options);
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, hash.into()) };
        Ok(())
    })
}

/// The program key of two compiled shaders with a backend identity and link options (binding
/// order does not matter; varying order does).
///
/// # Safety
/// `input` is NULL or valid for one read, its pointers as documented on its fields; `out` is
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_program_key(
    input: *const gpusvc_program_key_input,
    out: *mut gpusvc_sha1,
) -> gpusvc_result {
    ffi_guard(|| {
        if input.is_null() {
            return Err(null_argument("input"));
        }
        let out = out_ptr(out, "out")?;
        // SAFETY: non-null and valid for a read (contract).
        let input = unsafe { input.read_unaligned() };
        // SAFETY: forwarded from this function's contract.
        let identity = unsafe { cstr_in(input.backend_identity, "backend_identity") }?;
        // SAFETY: forwarded from this function's contract.
        let link = unsafe { link_options_in(&input.link) }?;
        let key = program_key(&ProgramKeyInput {
            vertex: ShaderHash(input.vertex.bytes),
            fragment: ShaderHash(input.fragment.bytes),
            backend_identity: identity,
            attribute_bindings: &link.attribute_bindings,
            transform_feedback_varyings: &link.transform_feedback_varyings,
            transform_feedback_mode: link.transform_feedback_mode,
        });
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, key.into()) };
        Ok(())
    })
}

/// The compile status of a shader (`GPUSVC_COMPILE_STATUS_*`). The hash is copied.
///
/// # Safety
/// `hash` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_shader_compile_status(
    cache: *const gpusvc_program_cache,
    hash: *const gpusvc_sha1,
    out: *mut u32,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let hash = ShaderHash(unsafe { sha1_in(hash, "hash") }?);
        let out = out_ptr(out, "out")?;
        let status = match cache.shader_compile_status(&hash) {
            CompileStatus::Unknown => GPUSVC_COMPILE_STATUS_UNKNOWN,
            CompileStatus::Success => GPUSVC_COMPILE_STATUS_SUCCESS,
        };
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, status) };
        Ok(())
    })
}

/// Records that a shader compiled successfully (the hash is copied).
///
/// # Safety
/// `hash` is NULL or valid for one read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_mark_shader_compiled(
    cache: *const gpusvc_program_cache,
    hash: *const gpusvc_sha1,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let hash = ShaderHash(unsafe { sha1_in(hash, "hash") }?);
        cache.shader_compile_succeeded(hash);
        Ok(())
    })
}

/// How many cached programs use a shader.
///
/// # Safety
/// `hash` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_shader_refcount(
    cache: *const gpusvc_program_cache,
    hash: *const gpusvc_sha1,
    out: *mut u32,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let hash = ShaderHash(unsafe { sha1_in(hash, "hash") }?);
        let out = out_ptr(out, "out")?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, cache.shader_refcount(&hash)) };
        Ok(())
    })
}

/// The link status of a program (`GPUSVC_LINK_STATUS_*`): SUCCESS while its binary is cached.
///
/// # Safety
/// `key` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_link_status(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_sha1,
    out: *mut u32,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let key = ProgramKey(unsafe { sha1_in(key, "key") }?);
        let out = out_ptr(out, "out")?;
        let status = match cache.link_status(&key) {
            LinkStatus::Unknown => GPUSVC_LINK_STATUS_UNKNOWN,
            LinkStatus::Success => GPUSVC_LINK_STATUS_SUCCESS,
        };
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, status) };
        Ok(())
    })
}

fn save_error(e: &SaveError) -> FfiError {
    let code = match e {
        SaveError::EmptyBinary => gpusvc_result::GPUSVC_PROGRAM_CACHE_EMPTY_BINARY,
        SaveError::OverBudget { .. } => gpusvc_result::GPUSVC_PROGRAM_CACHE_OVER_BUDGET,
        SaveError::CriticalPressure => gpusvc_result::GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE,
    };
    FfiError::new(code, e.to_string())
}

/// Stores a program under `key`, replacing an entry with the same key and evicting by policy
/// until it fits. Everything is copied in. The shaders it names become known-compiled and are
/// referenced by the entry.
///
/// Refusals leave the cache unchanged: `GPUSVC_PROGRAM_CACHE_EMPTY_BINARY`,
/// `GPUSVC_PROGRAM_CACHE_OVER_BUDGET` (the entry alone exceeds the budget, a quarter of it under
/// moderate memory pressure),
/// `GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE`. A `binary_len` or count over `PTRDIFF_MAX` is
/// `GPUSVC_INVALID_ARGUMENT`, a non-UTF-8 name `GPUSVC_INVALID_UTF8`.
///
/// # Safety
/// `key` and `program` are NULL or valid for one read, with `program`'s pointers as documented
/// on its fields; `out_report` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_save(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_sha1,
    program: *const gpusvc_cached_program_desc,
    out_report: *mut gpusvc_save_report,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let key = ProgramKey(unsafe { sha1_in(key, "key") }?);
        if program.is_null() {
            return Err(null_argument("program"));
        }
        let out_report = out_ptr(out_report, "out_report")?;
        // SAFETY: non-null and valid for a read (contract).
        let desc = unsafe { program.read_unaligned() };
        // SAFETY: forwarded from this function's contract.
        let bytes = unsafe { slice_in(desc.binary, desc.binary_len, "binary") }?;
        let value = CachedProgram {
            vertex_shader: ShaderHash(desc.vertex_shader.bytes),
            fragment_shader: ShaderHash(desc.fragment_shader.bytes),
            // SAFETY: forwarded from this function's contract.
            vertex: unsafe { shader_variables_in(&desc.vertex) }?,
            // SAFETY: forwarded from this function's contract.
            fragment: unsafe { shader_variables_in(&desc.fragment) }?,
            binary: ProgramBinaryData {
                format: desc.binary_format,
                bytes: bytes.to_vec(),
            },
        };
        let page = desc.has_page.then_some(desc.page);
        let report = cache.save(key, value, page).map_err(|e| save_error(&e))?;
        let report = gpusvc_save_report {
            replaced: report.replaced,
            evicted: report.evicted,
        };
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out_report, report) };
        Ok(())
    })
}

fn found(
    key: &ProgramKey,
    program: Option<SharedProgram>,
) -> Result<*mut gpusvc_cached_program, FfiError> {
    let program = program.ok_or_else(|| {
        FfiError::new(
            gpusvc_result::GPUSVC_PROGRAM_CACHE_NOT_FOUND,
            format!("no cached program with key {key}"),
        )
    })?;
    Ok(handle::new_shared(
        Kind::CachedProgram,
        CachedProgramCopy::new(program),
    ))
}

/// Looks a program up and copies it into a new `gpusvc_cached_program` (free it with
/// `gpusvc_cached_program_free`). A hit counts and promotes the entry (and moves it to `page`
/// when `has_page`); a miss counts and returns `GPUSVC_PROGRAM_CACHE_NOT_FOUND`.
///
/// # Safety
/// `key` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_load(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_sha1,
    has_page: bool,
    page: u64,
    out: *mut *mut gpusvc_cached_program,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let key = ProgramKey(unsafe { sha1_in(key, "key") }?);
        let out = out_ptr(out, "out")?;
        let handle = found(&key, cache.load(&key, has_page.then_some(page)))?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, handle) };
        Ok(())
    })
}

/// Like `gpusvc_program_cache_load` without changing recency or counters.
///
/// # Safety
/// `key` is NULL or valid for one read; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_peek(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_sha1,
    out: *mut *mut gpusvc_cached_program,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let key = ProgramKey(unsafe { sha1_in(key, "key") }?);
        let out = out_ptr(out, "out")?;
        let handle = found(&key, cache.peek(&key))?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, handle) };
        Ok(())
    })
}

/// Removes one program; `*out_removed` says whether it was there.
///
/// # Safety
/// `key` is NULL or valid for one read; `out_removed` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_evict(
    cache: *const gpusvc_program_cache,
    key: *const gpusvc_sha1,
    out_removed: *mut bool,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let key = ProgramKey(unsafe { sha1_in(key, "key") }?);
        let out_removed = out_ptr(out_removed, "out_removed")?;
        let removed = cache.evict(&key);
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out_removed, removed) };
        Ok(())
    })
}

/// The keys of the cached programs in the order the policy would evict them (next victim
/// first), with the count-query pattern: `keys` NULL and `len` 0 only count; otherwise `len`
/// must be at least the count (`GPUSVC_INSUFFICIENT_SIZE`, nothing written).
///
/// # Safety
/// `keys` is NULL or valid for `len` writes; `out_count` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_eviction_order(
    cache: *const gpusvc_program_cache,
    keys: *mut gpusvc_sha1,
    len: usize,
    out_count: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        let order: Vec<gpusvc_sha1> = cache.eviction_order().into_iter().map(Into::into).collect();
        // SAFETY: forwarded from this function's contract.
        unsafe { copy_list_out(&order, keys, len, out_count, "keys") }
    })
}

/// A snapshot of the counters, the bytes and the number of programs stored.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_get_stats(
    cache: *const gpusvc_program_cache,
    out: *mut gpusvc_program_cache_stats,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        let out = out_ptr(out, "out")?;
        let c = cache.counters();
        let stats = gpusvc_program_cache_stats {
            counters: gpusvc_program_cache_counters {
                hits: c.hits,
                misses: c.misses,
                evictions: c.evictions,
                driver_rejections: c.driver_rejections,
                saves: c.saves,
                rejected_saves: c.rejected_saves,
                status_hits: c.status_hits,
                status_misses: c.status_misses,
            },
            size_bytes: cache.size_bytes(),
            entries: cache.len(),
        };
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, stats) };
        Ok(())
    })
}

/// The name of histogram `index` (0-based) as a static string; past the last one
/// `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_histogram_name(
    index: usize,
    out: *mut *const c_char,
) -> gpusvc_result {
    ffi_guard(|| {
        let out = out_ptr(out, "out")?;
        let names = histogram_names();
        let (_, name) = names.get(index).ok_or_else(|| {
            invalid_argument(format!(
                "index {index} is past the {} histograms",
                names.len()
            ))
        })?;
        // SAFETY: non-null (checked) and valid for a write (contract); the string is static.
        unsafe { write(out, name.as_ptr()) };
        Ok(())
    })
}

/// A summary of the histogram called `name` (see `gpusvc_program_cache_histogram_name`); all
/// zeros while it has no samples. An unknown name is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_histogram(
    cache: *const gpusvc_program_cache,
    name: *const c_char,
    out: *mut gpusvc_histogram_summary,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        // SAFETY: forwarded from this function's contract.
        let name = unsafe { cstr_in(name, "name") }?;
        let out = out_ptr(out, "out")?;
        if !names::ALL.contains(&name) {
            return Err(invalid_argument(format!("unknown histogram {name:?}")));
        }
        let summary = cache
            .stats()
            .histograms
            .get(name)
            .map(|h| gpusvc_histogram_summary {
                count: h.count,
                sum: h.sum,
                min: h.min,
                max: h.max,
                mean: h.mean(),
                p50: h.quantile_upper_bound(0.5),
                p95: h.quantile_upper_bound(0.95),
            })
            .unwrap_or_default();
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out, summary) };
        Ok(())
    })
}

/// Evicts by policy until at most `limit` bytes are stored; `*out_freed` gets the bytes freed.
///
/// # Safety
/// `out_freed` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_trim(
    cache: *const gpusvc_program_cache,
    limit: usize,
    out_freed: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        let out_freed = out_ptr(out_freed, "out_freed")?;
        let freed = cache.trim(limit);
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out_freed, freed) };
        Ok(())
    })
}

/// Applies a memory-pressure level (`GPUSVC_MEMORY_PRESSURE_*`): MODERATE trims to a quarter of
/// the budget and keeps the cache there (saves evict down to it, a larger entry is refused with
/// `GPUSVC_PROGRAM_CACHE_OVER_BUDGET`), CRITICAL drops everything and refuses saves (program
/// managers then do not read binaries out of the driver at all), each until the level is NONE
/// again.
/// `*out_freed` gets the bytes freed.
///
/// # Safety
/// `out_freed` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_set_memory_pressure(
    cache: *const gpusvc_program_cache,
    level: u32,
    out_freed: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let cache = self::cache(cache)?;
        let level = enum_in(level, "GPUSVC_MEMORY_PRESSURE", |v| match v {
            GPUSVC_MEMORY_PRESSURE_NONE => Some(MemoryPressure::None),
            GPUSVC_MEMORY_PRESSURE_MODERATE => Some(MemoryPressure::Moderate),
            GPUSVC_MEMORY_PRESSURE_CRITICAL => Some(MemoryPressure::Critical),
            _ => None,
        })?;
        let out_freed = out_ptr(out_freed, "out_freed")?;
        let freed = cache.set_memory_pressure(level);
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out_freed, freed) };
        Ok(())
    })
}

/// Drops every program and every status. Statistics are kept. With a disk store, its entries
/// are deleted too, by the disk writer after the writes already queued:
/// `gpusvc_program_cache_flush_disk` waits until they are gone.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_clear(
    cache: *const gpusvc_program_cache,
) -> gpusvc_result {
    ffi_guard(|| {
        self::cache(cache)?.clear();
        Ok(())
    })
}

// ---- gpusvc_cached_program ----

/// Frees a cached-program copy. NULL is a no-op; a freed or unknown handle is
/// `GPUSVC_INVALID_HANDLE`.
///
/// # Safety
/// None beyond passing a value that came from gpusvc (or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_cached_program_free(
    program: *mut gpusvc_cached_program,
) -> gpusvc_result {
    ffi_guard(|| handle::free(program, Kind::CachedProgram))
}

/// The hashes of the program's vertex and fragment shaders.
///
/// # Safety
/// `out_vertex` and `out_fragment` are NULL or valid for one write each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_cached_program_shader_hashes(
    program: *const gpusvc_cached_program,
    out_vertex: *mut gpusvc_sha1,
    out_fragment: *mut gpusvc_sha1,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = cached_program(program)?;
        let out_vertex = out_ptr(out_vertex, "out_vertex")?;
        let out_fragment = out_ptr(out_fragment, "out_fragment")?;
        // SAFETY: both non-null (checked) and valid for a write (contract).
        unsafe {
            write(out_vertex, p.program.vertex_shader.into());
            write(out_fragment, p.program.fragment_shader.into());
        }
        Ok(())
    })
}

/// The program binary: `*out_format` gets its format and `*out_len` its length. With `buf` NULL
/// and `len` 0 nothing else happens (a size query); otherwise `len` must be at least the
/// length (else `GPUSVC_INSUFFICIENT_SIZE`, nothing written) and the bytes are copied to `buf`.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes; `out_format` and `out_len` are NULL or
/// valid for one write each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_cached_program_binary(
    program: *const gpusvc_cached_program,
    out_format: *mut u32,
    buf: *mut u8,
    len: usize,
    out_len: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = cached_program(program)?;
        let out_format = out_ptr(out_format, "out_format")?;
        out_ptr(out_len, "out_len")?;
        // SAFETY: forwarded from this function's contract.
        unsafe { copy_list_out(&p.program.binary.bytes, buf, len, out_len, "bytes") }?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { write(out_format, p.program.binary.format) };
        Ok(())
    })
}

/// How many variables of `kind` (`GPUSVC_VARIABLE_KIND_*`) the map of `stage`
/// (`GPUSVC_SHADER_STAGE_VERTEX` or `_FRAGMENT`) holds.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_cached_program_variable_count(
    program: *const gpusvc_cached_program,
    stage: u32,
    kind: u32,
    out: *mut usize,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = cached_program(program)?;
        let vars = p.stage(stage)?;
        let kind = variable_kind_in(kind)?;
        let out = out_ptr(out, "out")?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { vars.count_out(kind, out) };
        Ok(())
    })
}

/// Variable `index` of `kind` in the map of `stage`. The strings in `*out` belong to the handle
/// and stay valid until it is freed. An index past the end is `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_cached_program_variable(
    program: *const gpusvc_cached_program,
    stage: u32,
    kind: u32,
    index: usize,
    out: *mut gpusvc_variable_info,
) -> gpusvc_result {
    ffi_guard(|| {
        let p = cached_program(program)?;
        let vars = p.stage(stage)?;
        let kind = variable_kind_in(kind)?;
        let out = out_ptr(out, "out")?;
        // SAFETY: non-null (checked) and valid for a write (contract).
        unsafe { vars.entry_out(kind, index, out) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::text_in;

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
    fn text_arguments_are_checked() {
        // SAFETY: NULL and a live local buffer of the given length.
        unsafe {
            assert!(text_in(std::ptr::null(), 0, "x").is_err());
            let bad = [0xffu8, 0xfe];
            let e = text_in(bad.as_ptr().cast(), bad.len(), "x").unwrap_err();
            assert!(format!("{e:?}").contains("INVALID_UTF8"));
        }
    }
}
