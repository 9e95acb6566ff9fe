//! Bounded reads: a file, or a gzip stream, never takes more than the limit in memory.

use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::MeshIoError;

/// `O_NONBLOCK` on Linux.
const O_NONBLOCK: i32 = 0o4000;

/// True when `bytes` start with the gzip magic (1f 8b).
pub(crate) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// Reads `path` whole, decompressed when it is gzip, refusing more than `limit` bytes either way.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, MeshIoError> {
    // Non-blocking open: a FIFO (or a device) must not hang the open; only a regular file is
    // read, checked on the opened file itself.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => MeshIoError::NotFound {
                path: path.to_owned(),
            },
            _ => MeshIoError::Io {
                path: path.to_owned(),
                what: "cannot open",
                source: e,
            },
        })?;
    let meta = file.metadata().map_err(|e| MeshIoError::Io {
        path: path.to_owned(),
        what: "cannot stat",
        source: e,
    })?;
    if !meta.is_file() {
        return Err(MeshIoError::Io {
            path: path.to_owned(),
            what: "not a regular file",
            source: std::io::Error::from(ErrorKind::InvalidInput),
        });
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves zeros forever, but panics when asked for more than `cap` bytes in all: a bounded
    /// read must stop asking at the limit, not read everything and check afterwards.
    struct Endless {
        served: u64,
        cap: u64,
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.served += buf.len() as u64;
            assert!(self.served <= self.cap, "asked for {} bytes", self.served);
            buf.fill(0);
            Ok(buf.len())
        }
    }

    #[test]
    fn reads_stop_one_byte_past_the_limit() {
        let limit = 100_000;
        let mut out = Vec::new();
        let r = read_limited(
            Path::new("endless"),
            Endless {
                served: 0,
                cap: limit + 1,
            },
            limit,
            &mut out,
        );
        assert!(matches!(
            r,
            Err(MeshIoError::TooLarge { limit: 100_000, .. })
        ));
        assert_eq!(out.len() as u64, limit + 1);
    }
}
