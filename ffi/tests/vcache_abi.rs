//! The vertex-cache C ABI exercised from Rust through the exported `extern "C"` functions: model
//! structs and text forms, analyses equal to the `vertex-cache` crate's, measured counts on the
//! real driver (llvmpipe in CI) and the policy fit, and every bad input the ABI promises to turn
//! into a code with its outputs left as they were.

mod common;

use std::ffi::{CStr, CString, c_char, c_void};
use std::ptr;

use common::*;
use gpusvc::*;
use gpusvc_result::*;
use vertex_cache::battery::Probe;
use vertex_cache::{Mesh, Model, analyze};

/// A model struct no call produces: an error must leave it as it was.
const SENTINEL_MODEL: gpusvc_vcache_model = gpusvc_vcache_model {
    family: 0xdead,
    params: [7, 7, 7],
    segment_family: 7,
    segment_params: [7, 7],
};

const SENTINEL_ANALYSIS: gpusvc_vcache_analysis = gpusvc_vcache_analysis {
    invocations: 0x5e1,
    triangles: 0x5e1,
    vertices_referenced: 0x5e1,
    acmr: -1.0,
    atvr: -1.0,
    warps: 0x5e1,
};

fn parse(text: &str) -> Result<gpusvc_vcache_model, gpusvc_result> {
    let text = CString::new(text).unwrap();
    let mut out = SENTINEL_MODEL;
    // SAFETY: a NUL-terminated string and a live out slot.
    match unsafe { gpusvc_vcache_model_parse(text.as_ptr(), &mut out) } {
        GPUSVC_OK => Ok(out),
        e => {
            assert_eq!(out, SENTINEL_MODEL, "output written on error {e:?}");
            Err(e)
        }
    }
}

fn model(text: &str) -> gpusvc_vcache_model {
    parse(text).unwrap_or_else(|e| panic!("{text}: {e:?}: {}", last_detail()))
}

/// The text of a model struct through the size-query pattern.
fn text(m: &gpusvc_vcache_model) -> Result<String, gpusvc_result> {
    let mut len = 0usize;
    // SAFETY: a live struct and length slot; NULL buffer with len 0 is the size query.
    let r = unsafe { gpusvc_vcache_model_text(m, ptr::null_mut(), 0, &mut len) };
    if r != OK {
        return Err(r);
    }
    let mut buf = vec![0 as c_char; len + 1];
    let mut written = 0usize;
    // SAFETY: a buffer of len + 1 bytes and a live length slot.
    let r = unsafe { gpusvc_vcache_model_text(m, buf.as_mut_ptr(), buf.len(), &mut written) };
    assert_eq!(r, OK);
    assert_eq!(written, len);
    // SAFETY: NUL-terminated on success.
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned())
}

/// Analyzes through the ABI with a per-vertex buffer; errors checked to leave both outputs.
fn analyze_c(
    m: &gpusvc_vcache_model,
    indices: *const u32,
    count: usize,
    vertex_count: u32,
    per_vertex_len: usize,
) -> Result<(gpusvc_vcache_analysis, Vec<u32>), gpusvc_result> {
    let mut out = SENTINEL_ANALYSIS;
    let mut per_vertex = vec![0xabcd_u32; per_vertex_len];
    let pv = if per_vertex_len == 0 {
        ptr::null_mut()
    } else {
        per_vertex.as_mut_ptr()
    };
    // SAFETY: a live model, `indices` valid for `count` reads or deliberately bad (the
    // callers' cases never make the call read past it), live out slots.
    let r = unsafe {
        gpusvc_vcache_analyze(
            m,
            indices,
            count,
            vertex_count,
            &mut out,
            pv,
            per_vertex_len,
        )
    };
    if r == OK {
        return Ok((out, per_vertex));
    }
    assert_eq!(out, SENTINEL_ANALYSIS, "analysis written on error {r:?}");
    assert!(
        per_vertex.iter().all(|&c| c == 0xabcd),
        "per-vertex counts written on error {r:?}"
    );
    Err(r)
}

fn analyze_slice(
    m: &gpusvc_vcache_model,
    indices: &[u32],
    vertex_count: u32,
) -> Result<(gpusvc_vcache_analysis, Vec<u32>), gpusvc_result> {
    analyze_c(
        m,
        indices.as_ptr(),
        indices.len(),
        vertex_count,
        vertex_count as usize,
    )
}

const TEXTS: [&str; 14] = [
    "fifo:16",
    "fifo:1",
    "lru:32",
    "dm:64",
    "sa:4x8",
    "seg:96/fifo:32",
    "seg:3/sa:2x3",
    "seg:100/lru:7",
    "seg:10/dm:5",
    "batch:16,32,0",
    "batch:32,32,32",
    "nvidia:96,32,0",
    "nvidia:96,32,12",
    "amd:384,16",
];

#[test]
fn model_texts_round_trip_through_the_struct_and_match_the_crate() {
    for t in TEXTS {
        let m = model(t);
        assert_eq!(text(&m).unwrap(), t);
        let rust: Model = t.parse().unwrap();
        assert_eq!(rust.to_string(), t);
    }
    assert_eq!(
        model("sa:4x8"),
        gpusvc_vcache_model {
            family: GPUSVC_VCACHE_FAMILY_SET_ASSOC,
            params: [4, 8, 0],
            segment_family: 0,
            segment_params: [0, 0],
        }
    );
    assert_eq!(
        model("seg:96/lru:32"),
        gpusvc_vcache_model {
            family: GPUSVC_VCACHE_FAMILY_SEGMENTED,
            params: [96, 0, 0],
            segment_family: GPUSVC_VCACHE_FAMILY_LRU,
            segment_params: [32, 0],
        }
    );
    assert_eq!(model("batch:16,32,0").params, [16, 32, 0]);
    assert_eq!(model("amd:384,16").family, GPUSVC_VCACHE_FAMILY_AMD);
}

#[test]
fn unknown_and_malformed_model_texts_are_bad_model_and_write_nothing() {
    for bad in [
        "",
        "fifo",
        "fifo:",
        "fifo:0",
        "fifo:65537",
        "fifo:99999999999999999999",
        "fifo: 16",
        "FIFO:16",
        "fifo:+16",
        "fifo:0x10",
        "plru:16",
        "quantum:4",
        "sa:4",
        "sa:0x8",
        "sa:1024x1024",
        "seg:96",
        "seg:2/fifo:4",
        "seg:96/batch:16,32,0",
        "seg:96/seg:3/fifo:4",
        "batch:16,32",
        "batch:2,32,0",
        "batch:16,32,0,1",
        "nvidia:96,32",
        "amd:384",
        "lru:16 ",
    ] {
        assert_eq!(parse(bad), Err(GPUSVC_VCACHE_BAD_MODEL), "{bad:?}");
        let detail = last_detail();
        assert!(detail.contains("vertex-cache"), "{bad:?}: {detail}");
    }
}

#[test]
fn model_parse_refuses_null_and_invalid_utf8_and_writes_nothing() {
    let mut out = SENTINEL_MODEL;
    // SAFETY: NULL text is checked; `out` is live.
    let r = unsafe { gpusvc_vcache_model_parse(ptr::null(), &mut out) };
    assert_eq!(r, GPUSVC_NULL_ARGUMENT);
    let t = CString::new("fifo:16").unwrap();
    // SAFETY: a live string; NULL out is checked.
    let r = unsafe { gpusvc_vcache_model_parse(t.as_ptr(), ptr::null_mut()) };
    assert_eq!(r, GPUSVC_NULL_ARGUMENT);
    let bad = [0x66u8, 0x69, 0xff, 0x3a, 0x31, 0];
    // SAFETY: a NUL-terminated byte string and a live out slot.
    let r = unsafe { gpusvc_vcache_model_parse(bad.as_ptr().cast(), &mut out) };
    assert_eq!(r, GPUSVC_INVALID_UTF8);
    assert_eq!(out, SENTINEL_MODEL);
}

#[test]
fn model_structs_out_of_range_are_bad_model_everywhere() {
    let fifo = model("fifo:16");
    let seg = model("seg:96/fifo:32");
    let bad = [
        gpusvc_vcache_model::default(),
        gpusvc_vcache_model { family: 99, ..fifo },
        gpusvc_vcache_model {
            params: [0, 0, 0],
            ..fifo
        },
        gpusvc_vcache_model {
            params: [65537, 0, 0],
            ..fifo
        },
        gpusvc_vcache_model {
            params: [16, 1, 0],
            ..fifo
        },
        gpusvc_vcache_model {
            segment_family: GPUSVC_VCACHE_FAMILY_LRU,
            ..fifo
        },
        gpusvc_vcache_model {
            segment_params: [0, 1],
            ..fifo
        },
        gpusvc_vcache_model {
            segment_family: GPUSVC_VCACHE_FAMILY_BATCH,
            ..seg
        },
        gpusvc_vcache_model {
            segment_family: GPUSVC_VCACHE_FAMILY_SEGMENTED,
            ..seg
        },
        gpusvc_vcache_model {
            segment_family: 0,
            ..seg
        },
        gpusvc_vcache_model {
            segment_params: [32, 4],
            ..seg
        },
        gpusvc_vcache_model {
            params: [96, 0, 1],
            ..seg
        },
        gpusvc_vcache_model {
            params: [2, 0, 0],
            ..seg
        },
        gpusvc_vcache_model {
            family: GPUSVC_VCACHE_FAMILY_SET_ASSOC,
            params: [65536, 2, 0],
            segment_family: 0,
            segment_params: [0, 0],
        },
    ];
    let tri = [0u32, 1, 2];
    for m in bad {
        assert_eq!(text(&m), Err(GPUSVC_VCACHE_BAD_MODEL), "{m:?}");
        assert_eq!(
            analyze_slice(&m, &tri, 3).map(|_| ()),
            Err(GPUSVC_VCACHE_BAD_MODEL),
            "{m:?}"
        );
    }
    // NULL model.
    let mut out = SENTINEL_ANALYSIS;
    // SAFETY: NULL model is checked; live indices and out.
    let r = unsafe {
        gpusvc_vcache_analyze(
            ptr::null(),
            tri.as_ptr(),
            3,
            3,
            &mut out,
            ptr::null_mut(),
            0,
        )
    };
    assert_eq!((r, out), (GPUSVC_NULL_ARGUMENT, SENTINEL_ANALYSIS));
}

#[test]
fn model_text_follows_the_size_query_pattern() {
    let m = model("seg:96/fifo:32");
    let mut len = 77usize;
    let mut small = [b'x' as c_char; 14];
    // SAFETY: a 14-byte buffer (the text has 14 bytes: no room for the NUL) and a live slot.
    let r = unsafe { gpusvc_vcache_model_text(&m, small.as_mut_ptr(), small.len(), &mut len) };
    assert_eq!(r, GPUSVC_INSUFFICIENT_SIZE);
    assert_eq!(len, 77);
    assert!(small.iter().all(|&c| c == b'x' as c_char));
    // SAFETY: NULL out_len is checked.
    let r = unsafe { gpusvc_vcache_model_text(&m, ptr::null_mut(), 0, ptr::null_mut()) };
    assert_eq!(r, GPUSVC_NULL_ARGUMENT);
    // SAFETY: NULL buffer with a length is checked.
    let r = unsafe { gpusvc_vcache_model_text(&m, ptr::null_mut(), 10, &mut len) };
    assert_eq!((r, len), (GPUSVC_NULL_ARGUMENT, 77));
    // SAFETY: NULL model is checked.
    let r = unsafe { gpusvc_vcache_model_text(ptr::null(), ptr::null_mut(), 0, &mut len) };
    assert_eq!((r, len), (GPUSVC_NULL_ARGUMENT, 77));
}

/// Meshes the analyses are compared on: grids in row order and shuffled, a random soup, a fan,
/// a staircase of repeated triangles, degenerate triangles, and unused vertices.
fn meshes() -> Vec<(String, Vec<u32>, u32)> {
    let mut out: Vec<(String, Vec<u32>, u32)> = [
        Probe::grid(16, 16),
        Probe::grid(33, 20).shuffled(3),
        Probe::random(300, 500, 11),
        Probe::fan(100),
        Probe::staircase(150),
    ]
    .into_iter()
    .map(|p| (p.name().to_owned(), p.indices().to_vec(), p.vertex_count()))
    .collect();
    out.push((
        "degenerate and unused".to_owned(),
        vec![0, 0, 0, 1, 1, 2, 5, 9, 5, 2, 2, 2, 9, 0, 1],
        40,
    ));
    out
}

#[test]
fn analyses_equal_the_crates_for_every_family() {
    for (name, indices, vertex_count) in meshes() {
        let mesh = Mesh::new(&indices, vertex_count).unwrap();
        for t in TEXTS {
            let rust: Model = t.parse().unwrap();
            let counts = rust.simulate(&mesh);
            let a = analyze(&mesh, &counts);
            let (c, per_vertex) = analyze_slice(&model(t), &indices, vertex_count)
                .unwrap_or_else(|e| panic!("{name} {t}: {e:?}"));
            assert_eq!(per_vertex, counts, "{name} {t}");
            assert_eq!(
                (c.invocations, c.triangles, c.vertices_referenced),
                (a.invocations, a.triangles, a.vertices_referenced),
                "{name} {t}"
            );
            assert_eq!((c.acmr, c.atvr), (a.acmr, a.atvr), "{name} {t}");
            assert_eq!(c.warps, rust.warps(&mesh).unwrap_or(0), "{name} {t}");
            // Without the per-vertex buffer, the same analysis.
            let (alone, _) =
                analyze_c(&model(t), indices.as_ptr(), indices.len(), vertex_count, 0).unwrap();
            assert_eq!(alone, c);
            // The statistics of the same counts given back.
            let mut from_counts = SENTINEL_ANALYSIS;
            // SAFETY: live slices and out slot.
            let r = unsafe {
                gpusvc_vcache_analyze_counts(
                    indices.as_ptr(),
                    indices.len(),
                    vertex_count,
                    counts.as_ptr(),
                    counts.len(),
                    &mut from_counts,
                )
            };
            assert_eq!(r, OK);
            assert_eq!(from_counts, gpusvc_vcache_analysis { warps: 0, ..c });
        }
    }
    // A hand-checked case: fifo:3 over 0 1 2 3 0 1 shades 0, 1, 2, 3, then 0 again (evicted),
    // then 1 again.
    let (a, pv) = analyze_slice(&model("fifo:3"), &[0, 1, 2, 3, 0, 1], 4).unwrap();
    assert_eq!(pv, [2, 2, 1, 1]);
    assert_eq!(
        (a.invocations, a.triangles, a.vertices_referenced),
        (6, 2, 4)
    );
    assert_eq!((a.acmr, a.atvr), (3.0, 1.5));
}

#[test]
fn bad_meshes_are_codes_and_write_nothing() {
    let m = model("fifo:16");
    let tri = [0u32, 1, 2, 2, 1, 3];
    // NULL indices with a count; NULL with count 0 is the empty mesh.
    assert_eq!(
        analyze_c(&m, ptr::null(), 6, 4, 4).map(|_| ()),
        Err(GPUSVC_NULL_ARGUMENT)
    );
    assert_eq!(
        analyze_c(&m, ptr::null(), 0, 4, 4).map(|_| ()),
        Err(GPUSVC_VCACHE_EMPTY_MESH)
    );
    assert_eq!(
        analyze_slice(&m, &tri, 0).map(|_| ()),
        Err(GPUSVC_VCACHE_EMPTY_MESH)
    );
    // Counts that are not whole triangles.
    for n in [1, 2, 4, 5] {
        assert_eq!(
            analyze_c(&m, tri.as_ptr(), n, 4, 4).map(|_| ()),
            Err(GPUSVC_VCACHE_NOT_TRIANGLES),
            "{n}"
        );
    }
    // An index at the vertex count.
    assert_eq!(
        analyze_slice(&m, &tri, 3).map(|_| ()),
        Err(GPUSVC_VCACHE_INDEX_OUT_OF_RANGE)
    );
    assert!(last_detail().contains("position 5"), "{}", last_detail());
    assert_eq!(
        analyze_slice(&m, &[0, 1, u32::MAX], 3).map(|_| ()),
        Err(GPUSVC_VCACHE_INDEX_OUT_OF_RANGE)
    );
    // Absurd sizes: refused before anything is read (the pointer is valid for 6 indices only).
    for count in [
        usize::MAX,
        usize::MAX - 2,
        isize::MAX as usize,
        (1 << 28) + 3,
    ] {
        assert_eq!(
            analyze_c(&m, tri.as_ptr(), count, 4, 4).map(|_| ()),
            Err(GPUSVC_INVALID_ARGUMENT),
            "{count}"
        );
    }
    for vertex_count in [u32::MAX, (1 << 27) + 1] {
        assert_eq!(
            analyze_c(&m, tri.as_ptr(), 6, vertex_count, 0).map(|_| ()),
            Err(GPUSVC_INVALID_ARGUMENT),
            "{vertex_count}"
        );
    }
    // Misaligned indices.
    let words = [0u32; 8];
    let misaligned = words.as_ptr().cast::<u8>().wrapping_add(1).cast::<u32>();
    assert_eq!(
        analyze_c(&m, misaligned, 3, 4, 4).map(|_| ()),
        Err(GPUSVC_INVALID_ARGUMENT)
    );
    // A per-vertex buffer shorter than the vertex count.
    assert_eq!(
        analyze_c(&m, tri.as_ptr(), 6, 4, 3).map(|_| ()),
        Err(GPUSVC_INSUFFICIENT_SIZE)
    );
    // NULL out.
    // SAFETY: live model and indices; NULL out is checked.
    let r = unsafe {
        gpusvc_vcache_analyze(&m, tri.as_ptr(), 6, 4, ptr::null_mut(), ptr::null_mut(), 0)
    };
    assert_eq!(r, GPUSVC_NULL_ARGUMENT);
}

#[test]
fn analyze_counts_checks_its_arguments() {
    let tri = [0u32, 1, 2];
    let counts = [1u32, 1, 1, 0];
    let call = |indices: *const u32, n: usize, vc: u32, c: *const u32, cl: usize| {
        let mut out = SENTINEL_ANALYSIS;
        // SAFETY: pointers valid for their lengths or deliberately NULL (checked).
        let r = unsafe { gpusvc_vcache_analyze_counts(indices, n, vc, c, cl, &mut out) };
        if r != OK {
            assert_eq!(out, SENTINEL_ANALYSIS);
        }
        r
    };
    assert_eq!(call(tri.as_ptr(), 3, 4, counts.as_ptr(), 4), OK);
    assert_eq!(
        call(tri.as_ptr(), 3, 4, counts.as_ptr(), 3),
        GPUSVC_INVALID_ARGUMENT
    );
    assert_eq!(
        call(tri.as_ptr(), 3, 4, ptr::null(), 4),
        GPUSVC_NULL_ARGUMENT
    );
    assert_eq!(
        call(ptr::null(), 3, 4, counts.as_ptr(), 4),
        GPUSVC_NULL_ARGUMENT
    );
    assert_eq!(
        call(tri.as_ptr(), 2, 4, counts.as_ptr(), 4),
        GPUSVC_VCACHE_NOT_TRIANGLES
    );
    assert_eq!(
        call(tri.as_ptr(), 3, 2, counts.as_ptr(), 2),
        GPUSVC_VCACHE_INDEX_OUT_OF_RANGE
    );
    assert_eq!(
        call(tri.as_ptr(), usize::MAX, 4, counts.as_ptr(), 4),
        GPUSVC_INVALID_ARGUMENT
    );
    // SAFETY: live slices; NULL out is checked.
    let r = unsafe {
        gpusvc_vcache_analyze_counts(tri.as_ptr(), 3, 4, counts.as_ptr(), 4, ptr::null_mut())
    };
    assert_eq!(r, GPUSVC_NULL_ARGUMENT);
}

#[test]
fn vertex_cache_codes_have_their_numbers_and_messages() {
    let codes = [
        (GPUSVC_VCACHE_BAD_MODEL, 600),
        (GPUSVC_VCACHE_EMPTY_MESH, 601),
        (GPUSVC_VCACHE_NOT_TRIANGLES, 602),
        (GPUSVC_VCACHE_INDEX_OUT_OF_RANGE, 603),
        (GPUSVC_VCACHE_NO_VERTEX_STORAGE_BLOCKS, 604),
        (GPUSVC_VCACHE_DRIVER_TOO_OLD, 605),
        (GPUSVC_VCACHE_DRAW_TOO_LARGE, 606),
        (GPUSVC_VCACHE_MEASURE_FAILED, 607),
    ];
    for (code, n) in codes {
        assert_eq!(code as u32, n);
        assert!(code.message().starts_with("vertex-cache: "), "{code:?}");
    }
}

fn optimize_c(
    m: &gpusvc_vcache_model,
    indices: &[u32],
    vertex_count: u32,
) -> Result<Vec<u32>, gpusvc_result> {
    let mut out = vec![0xabcd_u32; indices.len()];
    // SAFETY: live model, input and output of the same length.
    let r = unsafe {
        gpusvc_vcache_optimize(
            m,
            indices.as_ptr(),
            indices.len(),
            vertex_count,
            out.as_mut_ptr(),
            out.len(),
        )
    };
    if r != OK {
        assert!(
            out.iter().all(|&i| i == 0xabcd),
            "output written on error {r:?}"
        );
        return Err(r);
    }
    Ok(out)
}

fn sorted_triangles(indices: &[u32]) -> Vec<[u32; 3]> {
    let mut t: Vec<[u32; 3]> = indices.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
    t.sort_unstable();
    t
}

#[test]
fn optimize_permutes_triangles_is_never_worse_and_equals_the_crate() {
    for (name, indices, vertex_count) in meshes() {
        let mesh = Mesh::new(&indices, vertex_count).unwrap();
        for t in [
            "fifo:16",
            "lru:8",
            "seg:96/fifo:32",
            "batch:32,32,32",
            "nvidia:96,32,0",
            "amd:384,16",
        ] {
            let m = model(t);
            let out = optimize_c(&m, &indices, vertex_count).unwrap();
            assert_eq!(
                sorted_triangles(&out),
                sorted_triangles(&indices),
                "{name} {t}"
            );
            let rust: Model = t.parse().unwrap();
            assert_eq!(out, vertex_cache::optimize(&mesh, &rust), "{name} {t}");
            let (before, _) = analyze_slice(&m, &indices, vertex_count).unwrap();
            let (after, _) = analyze_slice(&m, &out, vertex_count).unwrap();
            assert!(
                after.invocations <= before.invocations,
                "{name} {t}: {} -> {}",
                before.invocations,
                after.invocations
            );
        }
    }
    // A shuffled grid gets measurably better under FIFO 16, and in place gives the same order.
    let grid = Probe::grid(32, 32).shuffled(9);
    let m = model("fifo:16");
    let out = optimize_c(&m, grid.indices(), grid.vertex_count()).unwrap();
    let (before, _) = analyze_slice(&m, grid.indices(), grid.vertex_count()).unwrap();
    let (after, _) = analyze_slice(&m, &out, grid.vertex_count()).unwrap();
    println!(
        "shuffled 32x32 grid under fifo:16: ACMR {:.3} -> {:.3}",
        before.acmr, after.acmr
    );
    assert!(after.acmr < 0.8 * before.acmr);
    let mut in_place = grid.indices().to_vec();
    // SAFETY: the same live buffer as input and output (allowed).
    let r = unsafe {
        gpusvc_vcache_optimize(
            &m,
            in_place.as_ptr(),
            in_place.len(),
            grid.vertex_count(),
            in_place.as_mut_ptr(),
            in_place.len(),
        )
    };
    assert_eq!(r, OK);
    assert_eq!(in_place, out);
}

#[test]
fn optimize_refuses_bad_input_and_writes_nothing() {
    let m = model("fifo:16");
    let tri = [0u32, 1, 2, 2, 1, 3];
    assert_eq!(
        optimize_c(&m, &tri[..5], 4),
        Err(GPUSVC_VCACHE_NOT_TRIANGLES)
    );
    assert_eq!(
        optimize_c(&m, &tri, 3),
        Err(GPUSVC_VCACHE_INDEX_OUT_OF_RANGE)
    );
    assert_eq!(optimize_c(&m, &[], 3), Err(GPUSVC_VCACHE_EMPTY_MESH));
    assert_eq!(
        optimize_c(&gpusvc_vcache_model::default(), &tri, 4),
        Err(GPUSVC_VCACHE_BAD_MODEL)
    );
    let mut out = [0xabcd_u32; 6];
    // SAFETY: each call passes one NULL, short or absurd argument, checked before use.
    unsafe {
        let o = out.as_mut_ptr();
        let t = tri.as_ptr();
        assert_eq!(
            gpusvc_vcache_optimize(&m, t, 6, 4, o, 5),
            GPUSVC_INSUFFICIENT_SIZE
        );
        assert_eq!(
            gpusvc_vcache_optimize(&m, t, 6, 4, ptr::null_mut(), 6),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_optimize(&m, ptr::null(), 6, 4, o, 6),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_optimize(ptr::null(), t, 6, 4, o, 6),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_optimize(&m, t, usize::MAX, 4, o, usize::MAX),
            GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_optimize(&m, t, 6, u32::MAX, o, 6),
            GPUSVC_INVALID_ARGUMENT
        );
    }
    assert!(out.iter().all(|&i| i == 0xabcd));
}

// ---- on the driver ----

fn measure(
    ctx: *const gpusvc_gl_context,
    indices: &[u32],
    vertex_count: u32,
    options: Option<&gpusvc_vcache_draw_options>,
) -> Result<(gpusvc_vcache_measurement, Vec<u32>), gpusvc_result> {
    let sentinel = gpusvc_vcache_measurement {
        struct_size: size_of::<gpusvc_vcache_measurement>(),
        differing_vertices: 0x5e1,
        ..Default::default()
    };
    let mut out = sentinel;
    let mut counts = vec![0xabcd_u32; vertex_count as usize];
    // SAFETY: a context handle, live slices and out slots.
    let r = unsafe {
        gpusvc_vcache_measure(
            ctx,
            indices.as_ptr(),
            indices.len(),
            vertex_count,
            options.map_or(ptr::null(), |o| o),
            &mut out,
            counts.as_mut_ptr(),
            counts.len(),
        )
    };
    if r == OK {
        return Ok((out, counts));
    }
    assert_eq!(out, sentinel, "measurement written on error {r:?}");
    assert!(
        counts.iter().all(|&c| c == 0xabcd),
        "counts written on error {r:?}"
    );
    Err(r)
}

fn free_context(ctx: *mut gpusvc_gl_context) {
    // SAFETY: a live context of this thread, freed once.
    unsafe { gpusvc_gl_context_free(ctx) };
}

#[test]
fn measured_counts_are_repeatable_and_agree_with_the_query_and_the_draw_options() {
    const TEST: &str =
        "measured_counts_are_repeatable_and_agree_with_the_query_and_the_draw_options";
    let Some(ctx) = open_gl_context(TEST, 0) else {
        return;
    };
    let grid = Probe::grid(20, 13).shuffled(5);
    let (m, counts) = measure(ctx, grid.indices(), grid.vertex_count(), None).unwrap();
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    println!(
        "grid 20x13 shuffled: {} invocations, ACMR {:.3}, query {:?}",
        m.analysis.invocations,
        m.analysis.acmr,
        m.has_query.then_some(m.query_invocations)
    );
    assert_eq!(m.differing_vertices, 0, "two draws differ");
    assert_eq!(m.analysis.invocations, total);
    assert_eq!(m.analysis.triangles, grid.indices().len() as u64 / 3);
    assert!(m.analysis.invocations >= m.analysis.vertices_referenced);
    if m.has_query {
        assert!(
            m.query_agrees,
            "query {} vs sum {total}",
            m.query_invocations
        );
        assert_eq!(m.query_invocations, total);
    }
    // The same counts with 16-bit indices, with a base vertex, and with rasterizer discard.
    for options in [
        gpusvc_vcache_draw_options {
            struct_size: size_of::<gpusvc_vcache_draw_options>(),
            index_type: GPUSVC_VCACHE_INDEX_TYPE_U16,
            ..Default::default()
        },
        gpusvc_vcache_draw_options {
            struct_size: size_of::<gpusvc_vcache_draw_options>(),
            base_vertex: 1000,
            ..Default::default()
        },
        gpusvc_vcache_draw_options {
            struct_size: size_of::<gpusvc_vcache_draw_options>(),
            index_type: GPUSVC_VCACHE_INDEX_TYPE_U16,
            base_vertex: 7,
            raster: GPUSVC_VCACHE_RASTER_DISCARD,
            reserved: 0,
        },
    ] {
        let (m2, counts2) =
            measure(ctx, grid.indices(), grid.vertex_count(), Some(&options)).unwrap();
        assert_eq!(m2.differing_vertices, 0, "{options:?}");
        assert_eq!(counts2, counts, "{options:?}");
    }
    // The statistics of measured counts equal those of analyze_counts.
    let mut again = SENTINEL_ANALYSIS;
    // SAFETY: live slices and out slot.
    let r = unsafe {
        gpusvc_vcache_analyze_counts(
            grid.indices().as_ptr(),
            grid.indices().len(),
            grid.vertex_count(),
            counts.as_ptr(),
            counts.len(),
            &mut again,
        )
    };
    assert_eq!((r, again), (OK, m.analysis));
    free_context(ctx);
}

#[test]
fn measure_refuses_bad_input_and_writes_nothing() {
    let Some(ctx) = open_gl_context("measure_refuses_bad_input_and_writes_nothing", 0) else {
        return;
    };
    let tri = [0u32, 1, 2, 2, 1, 3];
    assert_eq!(
        measure(ctx, &tri[..4], 4, None).map(|_| ()),
        Err(GPUSVC_VCACHE_NOT_TRIANGLES)
    );
    assert_eq!(
        measure(ctx, &tri, 3, None).map(|_| ()),
        Err(GPUSVC_VCACHE_INDEX_OUT_OF_RANGE)
    );
    assert_eq!(
        measure(ctx, &[], 3, None).map(|_| ()),
        Err(GPUSVC_VCACHE_EMPTY_MESH)
    );
    // An index that does not fit 16 bits.
    let big = [0u32, 1, 70_000];
    let u16_options = gpusvc_vcache_draw_options {
        struct_size: size_of::<gpusvc_vcache_draw_options>(),
        index_type: GPUSVC_VCACHE_INDEX_TYPE_U16,
        ..Default::default()
    };
    assert_eq!(
        measure(ctx, &big, 70_001, Some(&u16_options)).map(|_| ()),
        Err(GPUSVC_VCACHE_DRAW_TOO_LARGE)
    );
    // Unknown enumeration values.
    for options in [
        gpusvc_vcache_draw_options {
            struct_size: size_of::<gpusvc_vcache_draw_options>(),
            index_type: 2,
            ..Default::default()
        },
        gpusvc_vcache_draw_options {
            struct_size: size_of::<gpusvc_vcache_draw_options>(),
            raster: 9,
            ..Default::default()
        },
    ] {
        assert_eq!(
            measure(ctx, &tri, 4, Some(&options)).map(|_| ()),
            Err(GPUSVC_INVALID_ARGUMENT),
            "{options:?}"
        );
    }
    // NULL and absurd arguments.
    let mut out = gpusvc_vcache_measurement::default();
    let mut counts = [0xabcd_u32; 4];
    // SAFETY: each call passes one NULL or absurd argument, which is checked before use.
    unsafe {
        let o = &mut out as *mut _;
        let c = counts.as_mut_ptr();
        let t = tri.as_ptr();
        let n = ptr::null();
        assert_eq!(
            gpusvc_vcache_measure(n, t, 6, 4, n.cast(), o, c, 4),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_measure(ctx, n.cast(), 6, 4, ptr::null(), o, c, 4),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_measure(ctx, t, 6, 4, ptr::null(), ptr::null_mut(), c, 4),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_measure(ctx, t, usize::MAX, 4, ptr::null(), o, c, 4),
            GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_measure(ctx, t, 6, u32::MAX, ptr::null(), o, c, 4),
            GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_measure(ctx, t, 6, 4, ptr::null(), o, c, 3),
            GPUSVC_INSUFFICIENT_SIZE
        );
    }
    assert_eq!(out, gpusvc_vcache_measurement::default());
    assert!(counts.iter().all(|&c| c == 0xabcd));
    // From another thread: the context is bound to this one.
    let addr = ctx.addr();
    std::thread::spawn(move || {
        let ctx: *const gpusvc_gl_context = ptr::without_provenance(addr);
        let tri = [0u32, 1, 2];
        let mut out = gpusvc_vcache_measurement::default();
        // SAFETY: a handle value (checked) and live slices.
        let r = unsafe {
            gpusvc_vcache_measure(
                ctx,
                tri.as_ptr(),
                3,
                3,
                ptr::null(),
                &mut out,
                ptr::null_mut(),
                0,
            )
        };
        assert_eq!(r, GPUSVC_WRONG_THREAD);
    })
    .join()
    .unwrap();
    free_context(ctx);
}

/// Progress calls seen: (phase, done, total).
type Calls = Vec<(u32, u64, u64)>;

unsafe extern "C" fn record_progress(phase: u32, done: u64, total: u64, user_data: *mut c_void) {
    // SAFETY: `user_data` is the test's live `Calls`, used on this thread during the call.
    let calls = unsafe { &mut *user_data.cast::<Calls>() };
    calls.push((phase, done, total));
}

fn entry(r: *const gpusvc_vcache_fit_result, list: u32, i: usize) -> gpusvc_vcache_fit_entry {
    let mut e = gpusvc_vcache_fit_entry::default();
    // SAFETY: a live result and out slot.
    let r = unsafe { gpusvc_vcache_fit_result_entry(r, list, i, &mut e) };
    assert_eq!(r, OK);
    e
}

#[test]
fn the_fit_finds_an_exact_model_that_predicts_held_back_meshes() {
    const TEST: &str = "the_fit_finds_an_exact_model_that_predicts_held_back_meshes";
    let Some(ctx) = open_gl_context(TEST, 0) else {
        return;
    };
    let options = gpusvc_vcache_fit_options {
        struct_size: size_of::<gpusvc_vcache_fit_options>(),
        battery: GPUSVC_VCACHE_BATTERY_REDUCED,
        near_misses: 3,
    };
    let mut calls: Calls = Vec::new();
    let mut result = ptr::null_mut();
    let t = std::time::Instant::now();
    // SAFETY: a live context, options, callback with its live user data, and out slot.
    let r = unsafe {
        gpusvc_vcache_fit(
            ctx,
            &options,
            Some(record_progress),
            (&mut calls as *mut Calls).cast(),
            &mut result,
        )
    };
    assert_eq!(r, OK, "{}", last_detail());
    let mut summary = gpusvc_vcache_fit_summary::default();
    // SAFETY: a live result and out slot.
    let r = unsafe { gpusvc_vcache_fit_result_summary(result, &mut summary) };
    assert_eq!(r, OK);
    println!("fit in {:.2?}: {summary:?}", t.elapsed());
    // Progress: both phases, each ending at its total, never past it.
    for phase in [
        GPUSVC_VCACHE_FIT_PHASE_MEASURE,
        GPUSVC_VCACHE_FIT_PHASE_SEARCH,
    ] {
        let seen: Vec<_> = calls.iter().filter(|c| c.0 == phase).collect();
        assert!(!seen.is_empty(), "no progress in phase {phase}");
        assert!(seen.iter().all(|c| c.1 <= c.2), "{seen:?}");
        assert!(
            seen.windows(2).all(|w| w[0].1 <= w[1].1),
            "progress went back"
        );
    }
    let measured: Vec<_> = calls
        .iter()
        .filter(|c| c.0 == GPUSVC_VCACHE_FIT_PHASE_MEASURE)
        .collect();
    assert_eq!(measured.last().unwrap().1, summary.probes);
    assert!(summary.exact > 0, "no exact model on this driver");
    assert!(summary.near > 0);
    for i in 0..summary.exact {
        let e = entry(result, GPUSVC_VCACHE_FIT_EXACT, i);
        assert_eq!((e.mismatched_vertices, e.total_difference), (0, 0));
    }
    for i in 0..summary.near {
        let e = entry(result, GPUSVC_VCACHE_FIT_NEAR, i);
        assert!(e.mismatched_vertices > 0);
        println!(
            "near miss {}: {} mismatching",
            text(&e.model).unwrap(),
            e.mismatched_vertices
        );
    }
    // Every exact model predicts meshes that were not in the battery, vertex by vertex.
    let held_back = [Probe::grid(41, 7).shuffled(23), Probe::random(700, 900, 31)];
    for i in 0..summary.exact {
        let e = entry(result, GPUSVC_VCACHE_FIT_EXACT, i);
        let name = text(&e.model).unwrap();
        println!(
            "exact: {name} (lengths {}..={})",
            e.same_for_lengths_min, e.same_for_lengths_max
        );
        for p in &held_back {
            let (_, measured) = measure(ctx, p.indices(), p.vertex_count(), None).unwrap();
            let (_, predicted) = analyze_slice(&e.model, p.indices(), p.vertex_count()).unwrap();
            let mismatched = measured
                .iter()
                .zip(&predicted)
                .filter(|(a, b)| a != b)
                .count();
            assert_eq!(mismatched, 0, "{name} on {}", p.name());
        }
    }
    // Bad list or index: codes, nothing written.
    let mut e = gpusvc_vcache_fit_entry {
        struct_size: size_of::<gpusvc_vcache_fit_entry>(),
        mismatched_vertices: 0x5e1,
        ..Default::default()
    };
    // SAFETY: a live result and out slot.
    unsafe {
        assert_eq!(
            gpusvc_vcache_fit_result_entry(result, 2, 0, &mut e),
            GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_fit_result_entry(result, GPUSVC_VCACHE_FIT_EXACT, summary.exact, &mut e),
            GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_fit_result_entry(result, GPUSVC_VCACHE_FIT_NEAR, 0, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
    }
    assert_eq!(e.mismatched_vertices, 0x5e1);
    // SAFETY: the live result, freed once; then NULL and the stale handle.
    unsafe {
        assert_eq!(gpusvc_vcache_fit_result_free(result), OK);
        assert_eq!(gpusvc_vcache_fit_result_free(ptr::null_mut()), OK);
        assert_eq!(gpusvc_vcache_fit_result_free(result), GPUSVC_INVALID_HANDLE);
        let mut s = gpusvc_vcache_fit_summary::default();
        assert_eq!(
            gpusvc_vcache_fit_result_summary(result, &mut s),
            GPUSVC_INVALID_HANDLE
        );
    }
    free_context(ctx);
}

#[test]
fn fit_refuses_bad_input_and_writes_nothing() {
    let Some(ctx) = open_gl_context("fit_refuses_bad_input_and_writes_nothing", 0) else {
        return;
    };
    let unwritten: *mut gpusvc_vcache_fit_result = ptr::without_provenance_mut(0x5e1);
    let mut out = unwritten;
    let bad = gpusvc_vcache_fit_options {
        struct_size: size_of::<gpusvc_vcache_fit_options>(),
        battery: 2,
        near_misses: 1,
    };
    // SAFETY: each call passes one bad argument, checked before anything runs.
    unsafe {
        assert_eq!(
            gpusvc_vcache_fit(ctx, &bad, None, ptr::null_mut(), &mut out),
            GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_fit(ptr::null(), ptr::null(), None, ptr::null_mut(), &mut out),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_fit(ctx, ptr::null(), None, ptr::null_mut(), ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        // A handle of another kind.
        assert_eq!(
            gpusvc_vcache_fit_result_free(ctx.cast()),
            GPUSVC_INVALID_HANDLE
        );
    }
    assert_eq!(out, unwritten);
    free_context(ctx);
}

#[test]
fn misaligned_output_buffers_are_invalid_arguments_and_untouched() {
    let m = model("fifo:16");
    let indices = [0u32, 1, 2, 2, 1, 3];
    // A u32 view one byte into a u32 buffer: misaligned for u32.
    let mut storage = [0xAAAA_AAAAu32; 8];
    let misaligned = storage
        .as_mut_ptr()
        .cast::<u8>()
        .wrapping_add(1)
        .cast::<u32>();
    let mut out = gpusvc_vcache_analysis::default();
    // SAFETY: live model and indices; the misaligned buffer points into `storage` with room
    // for 6 u32s, and must be refused before any write.
    unsafe {
        assert_eq!(
            gpusvc_vcache_optimize(&m, indices.as_ptr(), 6, 4, misaligned, 6),
            GPUSVC_INVALID_ARGUMENT
        );
        assert_eq!(
            gpusvc_vcache_analyze(&m, indices.as_ptr(), 6, 4, &mut out, misaligned, 6),
            GPUSVC_INVALID_ARGUMENT
        );
    }
    assert!(storage.iter().all(|&w| w == 0xAAAA_AAAA), "nothing written");
    assert_eq!(out.invocations, 0);
}
