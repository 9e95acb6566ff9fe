//! Measuring per-vertex vertex-shader invocations on the real driver (llvmpipe in CI; run with
//! GPUSVC_REQUIRE_GL=1 so a missing driver fails instead of skipping).

use test_support::gl::context_or_skip;
use vertex_cache::Mesh;
use vertex_cache::battery::Probe;
use vertex_cache::measure::{
    DrawOptions, IndexType, MeasureError, Measurer, Raster, check_vertex_storage_blocks,
};

/// Meshes with reuse, collisions, unreferenced vertices and several segments on llvmpipe.
fn meshes() -> Vec<Probe> {
    vec![
        Probe::staircase(1),
        Probe::staircase(700),
        Probe::grid(16, 16),
        Probe::grid(64, 40).shuffled(3),
        Probe::random(900, 1500, 11),
        Probe::fan(400),
        // Vertices 3..=9 and 11.. unreferenced.
        Probe::new("gaps", vec![0, 1, 2, 10, 2, 1, 10, 12, 0], 20).unwrap(),
    ]
}

#[test]
fn counts_are_repeatable() {
    let Some(ctx) = context_or_skip("counts_are_repeatable") else {
        return;
    };
    let m = Measurer::new(&ctx).unwrap();
    for probe in meshes() {
        let r = m
            .measure_twice(&probe.mesh(), DrawOptions::default())
            .unwrap();
        let differing = r.differing_vertices();
        println!(
            "{}: {} invocations, query {:?}, {} vertices differ between two draws",
            probe.name(),
            r.first.total(),
            r.first.query_invocations,
            differing.len()
        );
        assert!(
            r.is_repeatable(),
            "{}: differ at {differing:?}",
            probe.name()
        );
    }
}

#[test]
fn counts_are_per_vertex_and_unreferenced_vertices_get_none() {
    let Some(ctx) = context_or_skip("counts_are_per_vertex_and_unreferenced_vertices_get_none")
    else {
        return;
    };
    let m = Measurer::new(&ctx).unwrap();
    let gaps = meshes().pop().unwrap();
    let c = m
        .measure(&gaps.mesh(), DrawOptions::default())
        .unwrap()
        .counts;
    assert_eq!(c.len(), 20);
    for (v, &n) in c.iter().enumerate() {
        let referenced = gaps.indices().contains(&(v as u32));
        assert_eq!(n > 0, referenced, "vertex {v}: {n} invocations; all {c:?}");
    }
    let one = m
        .measure(&Probe::staircase(1).mesh(), DrawOptions::default())
        .unwrap();
    assert_eq!(one.counts, [1, 1, 1]);
}

#[test]
fn the_storage_buffer_sum_equals_the_pipeline_statistics_query() {
    let Some(ctx) = context_or_skip("the_storage_buffer_sum_equals_the_pipeline_statistics_query")
    else {
        return;
    };
    let m = Measurer::new(&ctx).unwrap();
    println!(
        "{}: GL_VERTEX_SHADER_INVOCATIONS query {}",
        ctx.info().renderer,
        if m.has_invocation_query() {
            "available"
        } else {
            "NOT available"
        }
    );
    if !m.has_invocation_query() {
        println!("SKIP the cross-check: the driver has no pipeline-statistics query");
        return;
    }
    for probe in meshes() {
        let r = m.measure(&probe.mesh(), DrawOptions::default()).unwrap();
        println!(
            "{}: storage buffer {} / query {:?}",
            probe.name(),
            r.total(),
            r.query_invocations
        );
        assert_eq!(r.query_agrees(), Some(true), "{}", probe.name());
    }
}

#[test]
fn u16_u32_and_base_vertex_draws_give_the_same_counts() {
    let Some(ctx) = context_or_skip("u16_u32_and_base_vertex_draws_give_the_same_counts") else {
        return;
    };
    let m = Measurer::new(&ctx).unwrap();
    for probe in meshes() {
        let mesh = probe.mesh();
        let plain = m.measure(&mesh, DrawOptions::default()).unwrap();
        for (index_type, base_vertex) in [
            (IndexType::U16, 0),
            (IndexType::U32, 1),
            (IndexType::U16, 77),
            (IndexType::U32, 256),
            (IndexType::U16, 1000),
        ] {
            let options = DrawOptions {
                index_type,
                base_vertex,
                ..DrawOptions::default()
            };
            let other = m.measure(&mesh, options).unwrap();
            assert_eq!(
                plain.counts,
                other.counts,
                "{} with {options:?}",
                probe.name()
            );
            assert_eq!(plain.query_invocations, other.query_invocations);
        }
    }
}

#[test]
fn rasterizer_discard_does_not_change_vertex_processing() {
    let Some(ctx) = context_or_skip("rasterizer_discard_does_not_change_vertex_processing") else {
        return;
    };
    let m = Measurer::new(&ctx).unwrap();
    for probe in meshes() {
        let mesh = probe.mesh();
        let drawn = m.measure(&mesh, DrawOptions::default()).unwrap();
        let discarded = m
            .measure(
                &mesh,
                DrawOptions {
                    raster: Raster::Discard,
                    ..DrawOptions::default()
                },
            )
            .unwrap();
        assert_eq!(drawn, discarded, "{}", probe.name());
    }
}

#[test]
fn a_driver_without_vertex_storage_blocks_gets_a_clear_error() {
    let e = check_vertex_storage_blocks(0).unwrap_err();
    assert!(
        matches!(e, MeasureError::NoVertexStorageBlocks { max: 0 }),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("GL_MAX_VERTEX_SHADER_STORAGE_BLOCKS") && text.contains("at least 1"),
        "{text}"
    );
    assert!(check_vertex_storage_blocks(-1).is_err());
    assert!(check_vertex_storage_blocks(1).is_ok());
    let Some(ctx) = context_or_skip("a_driver_without_vertex_storage_blocks_gets_a_clear_error")
    else {
        return;
    };
    let m = Measurer::new(&ctx).unwrap();
    println!(
        "{}: GL_MAX_VERTEX_SHADER_STORAGE_BLOCKS = {}",
        ctx.info().renderer,
        m.max_vertex_storage_blocks()
    );
    assert!(m.max_vertex_storage_blocks() >= 1);
}

#[test]
fn indices_that_do_not_fit_u16_are_refused() {
    let Some(ctx) = context_or_skip("indices_that_do_not_fit_u16_are_refused") else {
        return;
    };
    let m = Measurer::new(&ctx).unwrap();
    let indices = [0, 1, 70_000];
    let mesh = Mesh::new(&indices, 70_001).unwrap();
    let e = m
        .measure(
            &mesh,
            DrawOptions {
                index_type: IndexType::U16,
                ..DrawOptions::default()
            },
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            MeasureError::IndexTooLarge {
                position: 2,
                index: 70_000,
                ..
            }
        ),
        "{e:?}"
    );
    // The same mesh with u32 indices measures.
    let c = m.measure(&mesh, DrawOptions::default()).unwrap().counts;
    assert_eq!((c[0], c[1], c[70_000], c[2]), (1, 1, 1, 0));
}
