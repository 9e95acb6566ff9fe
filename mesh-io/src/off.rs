//! OFF (Object File Format), by hand: no maintained crate reads it.
//!
//! ```text
//! OFF
//! # comment
//! <vertices> <faces> [<edges>]
//! x y z                      (one vertex per line)
//! n i0 i1 ... i(n-1) [color] (one face per line; up to four color numbers are ignored)
//! ```
//! The counts may follow `OFF` on its own line. Blank lines and `#` comments go anywhere.

use crate::text::{float, strip_comment, unsigned, utf8};
use crate::{Ctx, MeshIoError, TriangleMesh};

pub(crate) fn parse(ctx: &Ctx<'_>, bytes: &[u8]) -> Result<TriangleMesh, MeshIoError> {
    let text = utf8(ctx, bytes)?;
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, strip_comment(l)))
        .filter(|(_, l)| !l.is_empty());

    let (header_line, header) = lines
        .next()
        .ok_or_else(|| ctx.malformed(1, "empty file: no OFF header"))?;
    let mut tokens: Vec<&str> = header.split_whitespace().collect();
    if tokens.first() != Some(&"OFF") {
        return Err(ctx.malformed(
            header_line,
            format!("expected the OFF header, found {header:?}"),
        ));
    }
    tokens.remove(0);
    let mut counts_line = header_line;
    if tokens.is_empty() {
        let (n, l) = lines
            .next()
            .ok_or_else(|| ctx.malformed(header_line, "no vertex/face counts after OFF"))?;
        counts_line = n;
        tokens = l.split_whitespace().collect();
    }
    if !(2..=3).contains(&tokens.len()) {
        return Err(ctx.malformed(
            counts_line,
            format!(
                "expected '<vertices> <faces> [<edges>]', found {:?}",
                tokens.join(" ")
            ),
        ));
    }
    let nv = unsigned(ctx, tokens[0], counts_line, "vertex count")?;
    let nf = unsigned(ctx, tokens[1], counts_line, "face count")?;
    if let Some(edges) = tokens.get(2) {
        unsigned(ctx, edges, counts_line, "edge count")?;
    }
    let vertex_count = ctx.check_vertices(u64::from(nv))?;
    ctx.check_indices(3 * u64::from(nf))?;

    // Every vertex and face takes at least a line of a few bytes: never reserve more than the
    // text can hold, whatever the header claims.
    let room = bytes.len() / 6 + 1;
    let mut positions = Vec::with_capacity((nv as usize).min(room));
    for v in 0..nv {
        let (n, l) = lines.next().ok_or_else(|| {
            ctx.malformed(
                text.lines().count(),
                format!("file ends after {v} of {nv} vertices"),
            )
        })?;
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() != 3 {
            return Err(ctx.malformed(n, format!("vertex {v}: expected 'x y z', found {l:?}")));
        }
        positions.push([
            float(ctx, t[0], n, "x")?,
            float(ctx, t[1], n, "y")?,
            float(ctx, t[2], n, "z")?,
        ]);
    }
    let mut indices = Vec::with_capacity((3 * nf as usize).min(room));
    let mut face = Vec::new();
    for f in 0..nf as usize {
        let (n, l) = lines.next().ok_or_else(|| {
            ctx.malformed(
                text.lines().count(),
                format!("file ends after {f} of {nf} faces"),
            )
        })?;
        let mut t = l.split_whitespace();
        let count = unsigned(ctx, t.next().unwrap_or(""), n, "face vertex count")? as usize;
        face.clear();
        for _ in 0..count {
            let token = t
                .next()
                .ok_or_else(|| ctx.malformed(n, format!("face {f}: fewer than {count} indices")))?;
            let index = unsigned(ctx, token, n, "vertex index")?;
            if index >= nv {
                return Err(MeshIoError::IndexOutOfRange {
                    path: ctx.path.to_owned(),
                    index: i64::from(index),
                    vertex_count: u64::from(nv),
                    location: format!("line {n} (face {f})"),
                });
            }
            face.push(index);
        }
        let rest: Vec<&str> = t.collect();
        if rest.len() > 4 {
            return Err(ctx.malformed(
                n,
                format!(
                    "face {f}: unexpected {:?} after the indices",
                    rest.join(" ")
                ),
            ));
        }
        for c in rest {
            float(ctx, c, n, "face color")?;
        }
        ctx.push_face(&mut indices, &face, f, Some(n))?;
    }
    if let Some((n, l)) = lines.next() {
        return Err(ctx.malformed(n, format!("unexpected {l:?} after the last face")));
    }
    Ok(TriangleMesh {
        indices,
        vertex_count,
        positions: Some(positions),
    })
}
