//! The npm `bunny`/`teapot` module form, by hand (no crate reads it), strictly:
//!
//! ```text
//! exports.positions=[[x,y,z],...]
//! exports.cells=[[a,b,c],...];
//! ```
//! Each statement is `exports.NAME = ARRAY` (or `module.exports.NAME = ...`), optionally ended
//! by `;`; `positions` and `cells` each come exactly once, in either order; whitespace may go
//! between tokens. Positions are triples of JS number literals; cells are lists of non-negative
//! integers. Nothing else (comments, other statements, `require`) is accepted.

use crate::text::utf8;
use crate::{Ctx, MeshIoError, TriangleMesh};

struct Cursor<'a, 'c> {
    ctx: &'c Ctx<'c>,
    text: &'a [u8],
    at: usize,
    /// The line of `at` (from 1) and where it starts: newlines only occur in whitespace.
    line: usize,
    line_start: usize,
}

impl Cursor<'_, '_> {
    fn line(&self) -> usize {
        self.line
    }

    fn error(&self, message: impl std::fmt::Display) -> MeshIoError {
        self.ctx.malformed(
            self.line,
            format!("column {}: {message}", self.at - self.line_start + 1),
        )
    }

    fn skip_ws(&mut self) {
        while self.at < self.text.len() && self.text[self.at].is_ascii_whitespace() {
            if self.text[self.at] == b'\n' {
                self.line += 1;
                self.line_start = self.at + 1;
            }
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.text.get(self.at).copied()
    }

    fn eat(&mut self, literal: &str) -> bool {
        self.skip_ws();
        if self.text[self.at..].starts_with(literal.as_bytes()) {
            self.at += literal.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, literal: &str) -> Result<(), MeshIoError> {
        if self.eat(literal) {
            Ok(())
        } else {
            Err(self.error(format!("expected {literal:?}")))
        }
    }

    fn name(&mut self) -> &str {
        self.skip_ws();
        let start = self.at;
        while self.at < self.text.len()
            && (self.text[self.at].is_ascii_alphanumeric() || self.text[self.at] == b'_')
        {
            self.at += 1;
        }
        std::str::from_utf8(&self.text[start..self.at]).unwrap_or("")
    }

    /// A JS number literal: `-?digits(.digits)?([eE][+-]?digits)?` (also `.5`).
    fn number(&mut self) -> Result<&str, MeshIoError> {
        self.skip_ws();
        let start = self.at;
        while self.at < self.text.len()
            && matches!(
                self.text[self.at],
                b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'
            )
        {
            self.at += 1;
        }
        if start == self.at {
            return Err(self.error("expected a number"));
        }
        Ok(std::str::from_utf8(&self.text[start..self.at]).unwrap_or(""))
    }

    /// `[` item (`,` item)* `]` or `[]`, calling `item` for each.
    fn list(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<(), MeshIoError>,
    ) -> Result<(), MeshIoError> {
        self.expect("[")?;
        if self.eat("]") {
            return Ok(());
        }
        loop {
            item(self)?;
            if self.eat("]") {
                return Ok(());
            }
            if !self.eat(",") {
                return Err(self.error("expected ',' or ']'"));
            }
        }
    }
}

type Cells = (Vec<u32>, Vec<(usize, usize)>);

pub(crate) fn parse(ctx: &Ctx<'_>, bytes: &[u8]) -> Result<TriangleMesh, MeshIoError> {
    let text = utf8(ctx, bytes)?;
    let mut c = Cursor {
        ctx,
        text: text.as_bytes(),
        at: 0,
        line: 1,
        line_start: 0,
    };
    let mut positions: Option<Vec<[f32; 3]>> = None;
    // Flat indices and (start, line) per cell.
    let mut cells: Option<Cells> = None;
    while c.peek().is_some() {
        c.eat("module.");
        c.expect("exports.")?;
        c.skip_ws();
        let statement_at = c.at;
        let name = c.name().to_owned();
        c.expect("=")?;
        match name.as_str() {
            "positions" if positions.is_none() => {
                let mut out = Vec::new();
                c.list(|c| {
                    if out.len() >= ctx.options.max_vertices {
                        ctx.check_vertices(out.len() as u64 + 1)?;
                    }
                    let mut xyz = [0f32; 3];
                    let mut k = 0;
                    c.list(|c| {
                        let line = c.line();
                        let token = c.number()?.to_owned();
                        if k == 3 {
                            return Err(c.error("a position has more than three coordinates"));
                        }
                        xyz[k] = crate::text::float(ctx, &token, line, "coordinate")?;
                        k += 1;
                        Ok(())
                    })?;
                    if k != 3 {
                        return Err(c.error(format!("a position has {k} coordinates, not 3")));
                    }
                    out.push(xyz);
                    Ok(())
                })?;
                positions = Some(out);
            }
            "cells" if cells.is_none() => {
                // Flat indices plus (start, line) per cell: faces are split once the vertex
                // count is known (positions may come after cells).
                let mut flat = Vec::new();
                let mut starts = Vec::new();
                c.list(|c| {
                    starts.push((flat.len(), c.line()));
                    c.list(|c| {
                        let line = c.line();
                        let token = c.number()?.to_owned();
                        ctx.check_indices(flat.len() as u64 + 1)?;
                        flat.push(crate::text::unsigned(ctx, &token, line, "cell index")?);
                        Ok(())
                    })
                })?;
                cells = Some((flat, starts));
            }
            "positions" | "cells" => {
                c.at = statement_at;
                return Err(c.error(format!("exports.{name} assigned twice")));
            }
            _ => {
                c.at = statement_at;
                return Err(c.error(format!(
                    "expected exports.positions or exports.cells, found exports.{name}"
                )));
            }
        }
        c.eat(";");
    }
    let positions = positions.ok_or_else(|| ctx.malformed(c.line(), "no exports.positions"))?;
    let (flat, starts) = cells.ok_or_else(|| ctx.malformed(c.line(), "no exports.cells"))?;
    let vertex_count = ctx.check_vertices(positions.len() as u64)?;
    let mut indices = Vec::with_capacity(flat.len());
    for (f, &(start, line)) in starts.iter().enumerate() {
        let end = starts.get(f + 1).map_or(flat.len(), |s| s.0);
        let face = &flat[start..end];
        if let Some(&bad) = face.iter().find(|&&i| i >= vertex_count) {
            return Err(MeshIoError::IndexOutOfRange {
                path: ctx.path.to_owned(),
                index: i64::from(bad),
                vertex_count: u64::from(vertex_count),
                location: format!("line {line} (cell {f})"),
            });
        }
        ctx.push_face(&mut indices, face, f, Some(line))?;
    }
    Ok(TriangleMesh {
        indices,
        vertex_count,
        positions: Some(positions),
    })
}
