//! Raw index files: `.idx` text and `.u16`/`.u32` little-endian binary (see the crate docs).

use crate::text::{strip_comment, unsigned, utf8};
use crate::{Ctx, MeshIoError, TriangleMesh};

pub(crate) fn parse_text(ctx: &Ctx<'_>, bytes: &[u8]) -> Result<TriangleMesh, MeshIoError> {
    let text = utf8(ctx, bytes)?;
    let mut declared = None;
    let mut indices = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = strip_comment(line);
        let mut tokens = line.split_whitespace().peekable();
        if tokens.peek() == Some(&"vertices") {
            tokens.next();
            if declared.is_some() || !indices.is_empty() {
                return Err(ctx.malformed(n, "'vertices N' must come once, before the first index"));
            }
            let count = tokens
                .next()
                .ok_or_else(|| ctx.malformed(n, "'vertices' needs a count"))?;
            declared =
                Some(ctx.check_vertices(u64::from(unsigned(ctx, count, n, "vertex count")?))?);
            if let Some(extra) = tokens.next() {
                return Err(
                    ctx.malformed(n, format!("unexpected {extra:?} after the vertex count"))
                );
            }
            continue;
        }
        for token in tokens {
            ctx.check_indices(indices.len() as u64 + 1)?;
            indices.push(unsigned(ctx, token, n, "index")?);
        }
    }
    finish(ctx, indices, ctx.options.vertex_count.or(declared))
}

pub(crate) fn parse_binary(
    ctx: &Ctx<'_>,
    bytes: &[u8],
    width: usize,
) -> Result<TriangleMesh, MeshIoError> {
    if !bytes.len().is_multiple_of(width) {
        return Err(ctx.malformed(
            0,
            format!("{} bytes are not whole {}-byte indices", bytes.len(), width),
        ));
    }
    ctx.check_indices((bytes.len() / width) as u64)?;
    let indices: Vec<u32> = match width {
        2 => bytes
            .chunks_exact(2)
            .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
        _ => bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    };
    finish(ctx, indices, ctx.options.vertex_count)
}

fn finish(
    ctx: &Ctx<'_>,
    indices: Vec<u32>,
    vertex_count: Option<u32>,
) -> Result<TriangleMesh, MeshIoError> {
    if indices.is_empty() {
        return Err(MeshIoError::Empty {
            path: ctx.path.to_owned(),
        });
    }
    if !indices.len().is_multiple_of(3) {
        return Err(MeshIoError::NotWholeTriangles {
            path: ctx.path.to_owned(),
            indices: indices.len(),
        });
    }
    let vertex_count = match vertex_count {
        Some(n) => n,
        None => {
            let max = indices.iter().copied().max().unwrap_or(0);
            let n = u64::from(max) + 1;
            ctx.check_vertices(n)?
        }
    };
    Ok(TriangleMesh {
        indices,
        vertex_count,
        positions: None,
    })
}
