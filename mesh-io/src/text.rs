//! Small helpers for the hand-written text formats.

use crate::{Ctx, MeshIoError};

/// The input as UTF-8, or a `Malformed` error at the line of the first invalid byte.
pub(crate) fn utf8<'a>(ctx: &Ctx<'_>, bytes: &'a [u8]) -> Result<&'a str, MeshIoError> {
    std::str::from_utf8(bytes).map_err(|e| {
        let line = 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        ctx.malformed(line, "not UTF-8 text")
    })
}

/// A line without its `#` comment, trimmed.
pub(crate) fn strip_comment(line: &str) -> &str {
    line.split('#').next().unwrap_or("").trim()
}

/// A finite number.
pub(crate) fn float(
    ctx: &Ctx<'_>,
    token: &str,
    line: usize,
    what: &str,
) -> Result<f32, MeshIoError> {
    match token.parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(ctx.malformed(line, format!("{what}: {token:?} is not a finite number"))),
    }
}

/// A non-negative count or index that fits in `u32`.
pub(crate) fn unsigned(
    ctx: &Ctx<'_>,
    token: &str,
    line: usize,
    what: &str,
) -> Result<u32, MeshIoError> {
    token.parse::<u32>().map_err(|_| {
        ctx.malformed(
            line,
            format!("{what}: {token:?} is not an integer in 0..=4294967295"),
        )
    })
}
