//! The vertex-cache C types (the model struct and its families, the analysis of a draw), the
//! checked arguments (models, index lists) and the `vertex-cache` errors as result codes.

use vertex_cache::{Analysis, Cache, Family, Mesh, MeshError, Model, ParseModelError};

use crate::kit::{FfiError, c_enum, gpusvc_result, invalid_argument, null_argument, slice_in};

/// Model family: FIFO of N entries per index (`fifo:N`; parameters {N}).
pub const GPUSVC_VCACHE_FAMILY_FIFO: u32 = 1u32;
/// Model family: LRU of N entries per index (`lru:N`; parameters {N}).
pub const GPUSVC_VCACHE_FAMILY_LRU: u32 = 2u32;
/// Model family: direct-mapped, vertex v in slot v mod M (`dm:M`; parameters {M}).
pub const GPUSVC_VCACHE_FAMILY_DIRECT: u32 = 3u32;
/// Model family: S sets of W ways, LRU per set (`sa:SxW`; parameters {S, W}).
pub const GPUSVC_VCACHE_FAMILY_SET_ASSOC: u32 = 4u32;
/// Model family: a cache emptied every L indices (`seg:L/CACHE`; parameters {L}, the cache in
/// `segment_family` and `segment_params`).
pub const GPUSVC_VCACHE_FAMILY_SEGMENTED: u32 = 5u32;
/// Model family: meshoptimizer's analyzer, FIFO N with warp W and primitive group P
/// (`batch:N,W,P`; parameters {N, W, P}).
pub const GPUSVC_VCACHE_FAMILY_BATCH: u32 = 6u32;
/// Model family: NVIDIA's batches after Kerbl et al. 2018 (`nvidia:I,V,R`; parameters
/// {I, V, R}).
pub const GPUSVC_VCACHE_FAMILY_NVIDIA: u32 = 7u32;
/// Model family: AMD's LRU with resets after Kerbl et al. 2018 (`amd:I,N`; parameters {I, N}).
pub const GPUSVC_VCACHE_FAMILY_AMD: u32 = 8u32;

/// The most vertices a mesh passed to `gpusvc_vcache_*` may have (`vertex_count`); more is
/// `GPUSVC_INVALID_ARGUMENT` (the simulation keeps state per vertex).
pub const GPUSVC_VCACHE_MAX_VERTICES: u32 = 1u32 << 27;
/// The most indices a mesh passed to `gpusvc_vcache_*` may have; more is
/// `GPUSVC_INVALID_ARGUMENT`.
pub const GPUSVC_VCACHE_MAX_INDICES: u32 = 1u32 << 28;

c_enum!(fn family_in / family_out ("GPUSVC_VCACHE_FAMILY") -> Family {
    GPUSVC_VCACHE_FAMILY_FIFO => Family::Fifo,
    GPUSVC_VCACHE_FAMILY_LRU => Family::Lru,
    GPUSVC_VCACHE_FAMILY_DIRECT => Family::Direct,
    GPUSVC_VCACHE_FAMILY_SET_ASSOC => Family::SetAssoc,
    GPUSVC_VCACHE_FAMILY_SEGMENTED => Family::Segmented,
    GPUSVC_VCACHE_FAMILY_BATCH => Family::Batch,
    GPUSVC_VCACHE_FAMILY_NVIDIA => Family::Nvidia,
    GPUSVC_VCACHE_FAMILY_AMD => Family::Amd,
});

/// A cache model as plain data: its family and parameters in the order of its text form
/// (`gpusvc_vcache_model_parse` fills one from text, `gpusvc_vcache_model_text` writes its
/// text). Parameters a family does not have must be 0. The ranges are those of the text forms
/// (e.g. `fifo:N` with N in 1..=65536); anything else is `GPUSVC_VCACHE_BAD_MODEL` wherever the
/// struct is passed in. A zeroed struct is not a model (family 0).
///
/// No `struct_size`: embedded in `gpusvc_vcache_fit_entry`, whose layout it fixes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct gpusvc_vcache_model {
    /// A `GPUSVC_VCACHE_FAMILY_*` value.
    pub family: u32,
    /// The family's parameters in text-form order (`fifo:N` {N}, `sa:SxW` {S, W},
    /// `batch:N,W,P` {N, W, P}, `seg:L/CACHE` {L}); the rest 0.
    pub params: [u32; 3],
    /// For `GPUSVC_VCACHE_FAMILY_SEGMENTED`, the cache inside each segment: FIFO, LRU, DIRECT
    /// or SET_ASSOC; otherwise 0.
    pub segment_family: u32,
    /// That cache's parameters in text-form order; the rest 0.
    pub segment_params: [u32; 2],
}

/// What one draw of a mesh costs in vertex-shader invocations.
/// No `struct_size`: embedded in `gpusvc_vcache_measurement`, whose layout it fixes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct gpusvc_vcache_analysis {
    /// Vertex-shader invocations in total.
    pub invocations: u64,
    /// Triangles drawn (index count / 3).
    pub triangles: u64,
    /// Distinct vertices the indices name.
    pub vertices_referenced: u64,
    /// Average cache miss ratio: invocations per triangle.
    pub acmr: f64,
    /// Average transform to vertex ratio: invocations per referenced vertex.
    pub atvr: f64,
    /// Warps (batches) the draw takes under models that have them (`batch`); 0 for the others
    /// and for measured counts.
    pub warps: u64,
}

impl From<Analysis> for gpusvc_vcache_analysis {
    fn from(a: Analysis) -> Self {
        gpusvc_vcache_analysis {
            invocations: a.invocations,
            triangles: a.triangles,
            vertices_referenced: a.vertices_referenced,
            acmr: a.acmr,
            atvr: a.atvr,
            warps: 0,
        }
    }
}

pub(crate) fn bad_model(detail: impl std::fmt::Display) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_VCACHE_BAD_MODEL,
        format!("vertex-cache: {detail}"),
    )
}

pub(crate) fn parse_error(e: &ParseModelError) -> FfiError {
    bad_model(e)
}

/// A model text, parsed with the crate's rules.
pub(crate) fn parse_model(text: &str) -> Result<Model, FfiError> {
    text.parse::<Model>().map_err(|e| parse_error(&e))
}

/// Checks that the parameters past the first `n` are 0.
fn unused_zero(what: &str, params: &[u32], n: usize) -> Result<(), FfiError> {
    match params.iter().enumerate().skip(n).find(|&(_, &p)| p != 0) {
        Some((i, p)) => Err(bad_model(format!(
            "{what}[{i}] is {p}, but the family has {n} parameter(s): the rest must be 0"
        ))),
        None => Ok(()),
    }
}

/// The text form of a family with parameters (`sa:4x8`, `batch:16,32,0`, ...).
fn family_text(family: Family, params: &[u32]) -> String {
    let sep = match family {
        Family::SetAssoc => "x",
        _ => ",",
    };
    let n = family.parameter_names().len();
    let values: Vec<String> = params[..n].iter().map(u32::to_string).collect();
    format!("{}:{}", family.name(), values.join(sep))
}

/// A model struct as a [`Model`]: the family must be known, unused parameters 0, and the text
/// the struct stands for must parse (the crate's ranges apply).
pub(crate) fn model_from_c(m: &gpusvc_vcache_model) -> Result<Model, FfiError> {
    let family =
        family_in(m.family).map_err(|_| bad_model(format!("unknown model family {}", m.family)))?;
    unused_zero("params", &m.params, family.parameter_names().len())?;
    let text = if family == Family::Segmented {
        let inner = family_in(m.segment_family).map_err(|_| {
            bad_model(format!(
                "segment_family {} is not a cache rule (FIFO, LRU, DIRECT or SET_ASSOC)",
                m.segment_family
            ))
        })?;
        if !matches!(
            inner,
            Family::Fifo | Family::Lru | Family::Direct | Family::SetAssoc
        ) {
            return Err(bad_model(format!(
                "segment_family {} ({inner}) is not a cache rule inside seg:",
                m.segment_family
            )));
        }
        unused_zero(
            "segment_params",
            &m.segment_params,
            inner.parameter_names().len(),
        )?;
        format!(
            "seg:{}/{}",
            m.params[0],
            family_text(inner, &m.segment_params)
        )
    } else {
        if m.segment_family != 0 {
            return Err(bad_model(format!(
                "segment_family is {} for a {family} model (only seg has one; must be 0)",
                m.segment_family
            )));
        }
        unused_zero("segment_params", &m.segment_params, 0)?;
        family_text(family, &m.params)
    };
    parse_model(&text)
}

/// A model struct read from C and checked.
///
/// # Safety
/// `ptr` is NULL or valid for one read of a `gpusvc_vcache_model`.
pub(crate) unsafe fn model_in(
    ptr: *const gpusvc_vcache_model,
    name: &str,
) -> Result<Model, FfiError> {
    // SAFETY: forwarded from this function's contract; the struct is plain integers.
    let m = unsafe { crate::kit::struct_in(ptr, name) }?;
    model_from_c(&m)
}

fn cache_out(c: Cache) -> (Family, [u32; 2]) {
    match c {
        Cache::Fifo { size } => (Family::Fifo, [size, 0]),
        Cache::Lru { size } => (Family::Lru, [size, 0]),
        Cache::Direct { slots } => (Family::Direct, [slots, 0]),
        Cache::SetAssoc { sets, ways } => (Family::SetAssoc, [sets, ways]),
    }
}

/// A [`Model`] as the C struct.
pub(crate) fn model_to_c(model: &Model) -> gpusvc_vcache_model {
    let mut out = gpusvc_vcache_model {
        family: family_out(model.family()),
        ..Default::default()
    };
    match *model {
        Model::Fifo { size } | Model::Lru { size } => out.params[0] = size,
        Model::Direct { slots } => out.params[0] = slots,
        Model::SetAssoc { sets, ways } => out.params[..2].copy_from_slice(&[sets, ways]),
        Model::Segmented { length, cache } => {
            let (family, params) = cache_out(cache);
            out.params[0] = length;
            out.segment_family = family_out(family);
            out.segment_params = params;
        }
        Model::Batch { cache, warp, group } => out.params = [cache, warp, group],
        Model::Nvidia {
            indices,
            vertices,
            window,
        } => out.params = [indices, vertices, window],
        Model::Amd { indices, size } => out.params[..2].copy_from_slice(&[indices, size]),
    }
    out
}

/// The index list of a mesh: `count` 0 is the empty list (an empty mesh, refused by
/// [`mesh_in`]), NULL with a count is `GPUSVC_NULL_ARGUMENT`, more than
/// `GPUSVC_VCACHE_MAX_INDICES` is an absurd size (`GPUSVC_INVALID_ARGUMENT`, nothing read).
///
/// # Safety
/// When `count > 0` and within the cap, `ptr` is valid for `count` reads for the returned
/// lifetime.
pub(crate) unsafe fn indices_in<'a>(ptr: *const u32, count: usize) -> Result<&'a [u32], FfiError> {
    if count > 0 && ptr.is_null() {
        return Err(null_argument("indices"));
    }
    if count > GPUSVC_VCACHE_MAX_INDICES as usize {
        return Err(invalid_argument(format!(
            "index_count {count} is absurd (more than GPUSVC_VCACHE_MAX_INDICES = \
             {GPUSVC_VCACHE_MAX_INDICES})"
        )));
    }
    // SAFETY: forwarded from this function's contract.
    unsafe { slice_in(ptr, count, "indices") }
}

/// A mesh from C: the index list as [`indices_in`] reads it, a vertex count within
/// `GPUSVC_VCACHE_MAX_VERTICES`, and the crate's checks (empty, whole triangles, indices below
/// the vertex count) as codes.
///
/// # Safety
/// As [`indices_in`].
pub(crate) unsafe fn mesh_in<'a>(
    indices: *const u32,
    index_count: usize,
    vertex_count: u32,
) -> Result<Mesh<'a>, FfiError> {
    // SAFETY: forwarded from this function's contract.
    let indices = unsafe { indices_in(indices, index_count) }?;
    if vertex_count > GPUSVC_VCACHE_MAX_VERTICES {
        return Err(invalid_argument(format!(
            "vertex_count {vertex_count} is absurd (more than GPUSVC_VCACHE_MAX_VERTICES = \
             {GPUSVC_VCACHE_MAX_VERTICES})"
        )));
    }
    Mesh::new(indices, vertex_count).map_err(|e| mesh_error(&e))
}

/// A `vertex-cache` mesh error as a code, with the crate's message as the detail.
pub(crate) fn mesh_error(e: &MeshError) -> FfiError {
    use gpusvc_result::*;
    let code = match e {
        MeshError::Empty { .. } => GPUSVC_VCACHE_EMPTY_MESH,
        MeshError::NotTriangles { .. } => GPUSVC_VCACHE_NOT_TRIANGLES,
        MeshError::IndexOutOfRange { .. } => GPUSVC_VCACHE_INDEX_OUT_OF_RANGE,
    };
    FfiError::new(code, format!("vertex-cache: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_round_trips_through_the_struct() {
        for text in [
            "fifo:16",
            "lru:1",
            "dm:64",
            "sa:4x8",
            "seg:96/fifo:32",
            "seg:3/sa:2x3",
            "seg:100/lru:7",
            "seg:9/dm:5",
            "batch:16,32,0",
            "nvidia:96,32,0",
            "nvidia:96,32,12",
            "amd:384,16",
        ] {
            let model = parse_model(text).unwrap();
            let c = model_to_c(&model);
            assert_eq!(model_from_c(&c).unwrap(), model, "{text}");
            assert_eq!(model_from_c(&c).unwrap().to_string(), text);
        }
        assert_eq!(Family::ALL.map(family_out), [1, 2, 3, 4, 5, 6, 7, 8]);
    }
}
