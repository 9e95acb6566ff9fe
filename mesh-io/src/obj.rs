//! Wavefront OBJ through `tobj` (see "OBJ numbering" in the crate docs).

use crate::{Ctx, MeshIoError, TriangleMesh};

/// Lines whose first token is one of these are dropped before `tobj` sees the file: they only
/// split it into models (and would make `tobj` look for material files).
const DROPPED: [&[u8]; 4] = [b"o", b"g", b"usemtl", b"mtllib"];

pub(crate) fn parse(ctx: &Ctx<'_>, bytes: &[u8]) -> Result<TriangleMesh, MeshIoError> {
    let mut filtered = Vec::with_capacity(bytes.len());
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        let first = line
            .split(|b| b.is_ascii_whitespace())
            .find(|t| !t.is_empty());
        if first.is_some_and(|t| DROPPED.contains(&t)) {
            filtered.push(b'\n'); // keep the line count
            continue;
        }
        filtered.extend_from_slice(line);
    }
    let options = tobj::LoadOptions {
        single_index: false,
        // Polygons are split below, by the crate's own rule (fans, only when asked), so that
        // lines and points are never turned into degenerate triangles.
        triangulate: false,
        ignore_points: false,
        ignore_lines: false,
    };
    let (models, _materials) = tobj::load_obj_buf(&mut &filtered[..], &options, |_| {
        Err(tobj::LoadError::OpenFileFailed)
    })
    .map_err(|source| MeshIoError::Obj {
        path: ctx.path.to_owned(),
        source,
    })?;

    let mut indices = Vec::new();
    let mut positions: Vec<[f32; 3]> = Vec::new();
    let mut face_number = 0;
    for model in &models {
        let mesh = &model.mesh;
        let base = positions.len() as u64;
        let count = mesh.positions.len() / 3;
        ctx.check_vertices(base + count as u64)?;
        positions.extend(mesh.positions.chunks_exact(3).map(|p| [p[0], p[1], p[2]]));
        let offset = |i: &u32| (base + u64::from(*i)) as u32;
        if mesh.face_arities.is_empty() {
            ctx.check_indices((indices.len() + mesh.indices.len()) as u64)?;
            indices.extend(mesh.indices.iter().map(offset));
            face_number += mesh.indices.len() / 3;
        } else {
            let mut start = 0;
            let mut face = Vec::new();
            for &arity in &mesh.face_arities {
                let end = start + arity as usize;
                face.clear();
                face.extend(mesh.indices[start..end].iter().map(offset));
                ctx.push_face(&mut indices, &face, face_number, None)?;
                face_number += 1;
                start = end;
            }
        }
    }
    let vertex_count = ctx.check_vertices(positions.len() as u64)?;
    Ok(TriangleMesh {
        indices,
        vertex_count,
        positions: Some(positions),
    })
}
