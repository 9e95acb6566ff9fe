//! The entry file format (see `program-cache/FORMAT.md`): a fixed 96-byte header protected by
//! its own CRC32C, then the payload (postcard-encoded [`CachedProgram`], optionally LZ4) protected
//! by a CRC32C. Decoding never panics and never trusts a length it has not checked.

use crate::key::ProgramKey;
use crate::program::CachedProgram;

/// First eight bytes of every entry.
pub const MAGIC: [u8; 8] = *b"GPUSVCPB";
/// Entry format version; part of the stamp, so a new version starts a new store.
pub const FORMAT_VERSION: u32 = 2;
/// Header size in bytes.
pub const HEADER_LEN: usize = 96;
/// Flag: the payload is LZ4 (block format, `lz4_flex`).
pub const FLAG_LZ4: u32 = 1;
/// Largest payload accepted (a program binary is KBs; 64 MiB is far beyond any driver's).
pub const MAX_PAYLOAD: u64 = 64 << 20;
/// No LZ4 block decompresses to more than this many bytes per stored byte.
const LZ4_MAX_RATIO: u64 = 255;

/// The parsed header of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryHeader {
    /// Flags (`FLAG_LZ4`).
    pub flags: u32,
    /// Hash of the stamp the entry was written under.
    pub stamp_hash: [u8; 20],
    /// The full program key.
    pub key: ProgramKey,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Stored payload bytes.
    pub payload_len: u64,
    /// Payload bytes after decompression.
    pub raw_len: u64,
    /// CRC32C of the stored payload.
    pub payload_crc: u32,
}

/// Why an entry was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// Shorter than a header.
    #[error("truncated: {0} bytes, the header alone is {HEADER_LEN}")]
    TruncatedHeader(usize),
    /// Not our magic.
    #[error("not a gpusvc program entry (bad magic)")]
    BadMagic,
    /// Another format version.
    #[error("format version {0}, expected {FORMAT_VERSION}")]
    Version(u16),
    /// Header length field is not ours.
    #[error("header length {0}, expected {HEADER_LEN}")]
    HeaderLen(u16),
    /// Header CRC mismatch.
    #[error("header checksum mismatch")]
    HeaderChecksum,
    /// Unknown flag bits.
    #[error("unknown flags {0:#x}")]
    Flags(u32),
    /// Written under another stamp.
    #[error("entry was written for another driver/host stamp")]
    ForeignStamp,
    /// The key in the header is not the key asked for (or the file name).
    #[error("entry key does not match")]
    KeyMismatch,
    /// Payload length disagrees with the file.
    #[error("payload length {declared} but {actual} bytes follow the header")]
    PayloadLength {
        /// From the header.
        declared: u64,
        /// In the file.
        actual: u64,
    },
    /// Payload CRC mismatch.
    #[error("payload checksum mismatch")]
    PayloadChecksum,
    /// Decompression failed or gave another length.
    #[error("payload does not decompress: {0}")]
    Decompress(String),
    /// postcard could not decode the payload.
    #[error("payload does not decode: {0}")]
    Decode(String),
    /// The name of an entry is not a regular file (a folder, FIFO, link, device).
    #[error("not a regular file: {0}")]
    NotAFile(String),
    /// The file is larger than any entry can be; it is not read.
    #[error("{0} bytes, more than the largest entry FORMAT.md allows")]
    TooLarge(u64),
    /// The file could not be read.
    #[error("unreadable: {0}")]
    Unreadable(String),
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Encodes an entry: header + payload.
pub fn encode(
    key: &ProgramKey,
    program: &CachedProgram,
    stamp_hash: &[u8; 20],
    created_ms: u64,
    compress: bool,
) -> Vec<u8> {
    let raw = postcard::to_stdvec(program).expect("CachedProgram always serializes");
    let (flags, payload) = if compress {
        (FLAG_LZ4, lz4_flex::block::compress(&raw))
    } else {
        (0, raw.clone())
    };
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(FORMAT_VERSION as u16).to_le_bytes());
    out.extend_from_slice(&(HEADER_LEN as u16).to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(stamp_hash);
    out.extend_from_slice(&key.0);
    out.extend_from_slice(&created_ms.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&(raw.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    out.extend_from_slice(&[0u8; 8]); // reserved, must be zero
    debug_assert_eq!(out.len(), HEADER_LEN - 4);
    let header_crc = crc32c::crc32c(&out);
    out.extend_from_slice(&header_crc.to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Encodes an entry unless it would break FORMAT.md's bounds (a stored or decompressed payload
/// over [`MAX_PAYLOAD`], a variable list over [`crate::MAX_STORED_VARIABLES`]): such an entry
/// could never be read back, so it is never written.
pub fn encode_bounded(
    key: &ProgramKey,
    program: &CachedProgram,
    stamp_hash: &[u8; 20],
    created_ms: u64,
    compress: bool,
) -> Option<Vec<u8>> {
    // The binary alone bounds the raw payload from below: skip the encoding when it is over.
    if program.binary.bytes.len() as u64 > MAX_PAYLOAD || !program.is_well_formed() {
        return None;
    }
    let bytes = encode(key, program, stamp_hash, created_ms, compress);
    let header = decode_header(&bytes).ok()?;
    (header.payload_len <= MAX_PAYLOAD && header.raw_len <= MAX_PAYLOAD).then_some(bytes)
}

/// Checks a decoded header against the store (stamp, key) and the file's length, before any
/// payload byte is read.
pub fn check_header(
    header: &EntryHeader,
    stamp_hash: &[u8; 20],
    expected_key: Option<&ProgramKey>,
    file_len: u64,
) -> Result<(), EntryError> {
    if &header.stamp_hash != stamp_hash {
        return Err(EntryError::ForeignStamp);
    }
    if expected_key.is_some_and(|k| *k != header.key) {
        return Err(EntryError::KeyMismatch);
    }
    let actual = file_len.saturating_sub(HEADER_LEN as u64);
    if header.payload_len != actual || header.payload_len > MAX_PAYLOAD {
        return Err(EntryError::PayloadLength {
            declared: header.payload_len,
            actual,
        });
    }
    Ok(())
}

/// Parses and checks a header (magic, version, length, CRC, flags, reserved bytes).
pub fn decode_header(bytes: &[u8]) -> Result<EntryHeader, EntryError> {
    if bytes.len() < HEADER_LEN {
        return Err(EntryError::TruncatedHeader(bytes.len()));
    }
    let h = &bytes[..HEADER_LEN];
    // The CRC first: any damaged header byte is reported as such.
    if crc32c::crc32c(&h[..HEADER_LEN - 4]) != le_u32(h, HEADER_LEN - 4) {
        if h[..8] != MAGIC {
            return Err(EntryError::BadMagic);
        }
        return Err(EntryError::HeaderChecksum);
    }
    if h[..8] != MAGIC {
        return Err(EntryError::BadMagic);
    }
    let version = le_u16(h, 8);
    if u32::from(version) != FORMAT_VERSION {
        return Err(EntryError::Version(version));
    }
    let header_len = le_u16(h, 10);
    if usize::from(header_len) != HEADER_LEN {
        return Err(EntryError::HeaderLen(header_len));
    }
    let flags = le_u32(h, 12);
    if flags & !FLAG_LZ4 != 0 || h[84..92] != [0u8; 8] {
        return Err(EntryError::Flags(flags));
    }
    Ok(EntryHeader {
        flags,
        stamp_hash: h[16..36].try_into().expect("20 bytes"),
        key: ProgramKey(h[36..56].try_into().expect("20 bytes")),
        created_ms: le_u64(h, 56),
        payload_len: le_u64(h, 64),
        raw_len: le_u64(h, 72),
        payload_crc: le_u32(h, 80),
    })
}

/// Decodes a whole entry and checks it belongs to `stamp_hash` (and to `expected_key` when
/// given).
pub fn decode(
    bytes: &[u8],
    stamp_hash: &[u8; 20],
    expected_key: Option<&ProgramKey>,
) -> Result<(EntryHeader, CachedProgram), EntryError> {
    let header = decode_header(bytes)?;
    check_header(&header, stamp_hash, expected_key, bytes.len() as u64)?;
    let payload = &bytes[HEADER_LEN..];
    if crc32c::crc32c(payload) != header.payload_crc {
        return Err(EntryError::PayloadChecksum);
    }
    let decompressed;
    let raw: &[u8] = if header.flags & FLAG_LZ4 != 0 {
        // An LZ4 block expands at most 255-fold (a match-length byte adds at most 255 bytes), so
        // a larger declared length is damage; checking it keeps a small entry from making the
        // decoder allocate up to MAX_PAYLOAD.
        if header.raw_len > MAX_PAYLOAD || header.raw_len > header.payload_len * LZ4_MAX_RATIO {
            return Err(EntryError::Decompress(format!(
                "raw length {} for {} stored bytes",
                header.raw_len, header.payload_len
            )));
        }
        decompressed = lz4_flex::block::decompress(payload, header.raw_len as usize)
            .map_err(|e| EntryError::Decompress(e.to_string()))?;
        if decompressed.len() as u64 != header.raw_len {
            return Err(EntryError::Decompress("length mismatch".into()));
        }
        &decompressed
    } else {
        if header.raw_len != header.payload_len {
            return Err(EntryError::Decompress(
                "raw length differs from stored length".into(),
            ));
        }
        payload
    };
    let (program, rest) = postcard::take_from_bytes::<CachedProgram>(raw)
        .map_err(|e| EntryError::Decode(e.to_string()))?;
    if !rest.is_empty() {
        return Err(EntryError::Decode(format!("{} trailing bytes", rest.len())));
    }
    Ok((header, program))
}
