//! Bounded reads: a file, or a gzip stream, never takes more than the limit in memory.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::MeshIoError;

/// True when `bytes` start with the gzip magic (1f 8b).
pub(crate) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// Reads `path` whole, decompressed when it is gzip, refusing more than `limit` bytes either way.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, MeshIoError> {
    let file = File::open(path).map_err(|e| match e.kind() {
        ErrorKind::NotFound => MeshIoError::NotFound {
            path: path.to_owned(),
        },
        _ => MeshIoError::Io {
            path: path.to_owned(),
            what: "cannot open",
            source: e,
        },
    })?;
    let mut bytes = Vec::new();
    read_limited(path, file, limit, &mut bytes)?;
    if is_gzip(&bytes) {
        return gunzip_bounded(path, &bytes, limit);
    }
    Ok(bytes)
}

/// Decompresses a gzip stream (all members) into at most `limit` bytes.
pub(crate) fn gunzip_bounded(
    path: &Path,
    bytes: &[u8],
    limit: u64,
) -> Result<Vec<u8>, MeshIoError> {
    let mut out = Vec::new();
    read_limited(path, MultiGzDecoder::new(bytes), limit, &mut out)?;
    Ok(out)
}

fn read_limited(
    path: &Path,
    reader: impl Read,
    limit: u64,
    out: &mut Vec<u8>,
) -> Result<(), MeshIoError> {
    reader
        .take(limit.saturating_add(1))
        .read_to_end(out)
        .map_err(|e| MeshIoError::Io {
            path: path.to_owned(),
            what: "cannot read",
            source: e,
        })?;
    if out.len() as u64 > limit {
        return Err(MeshIoError::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    Ok(())
}
