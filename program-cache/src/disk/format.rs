//! The entry file format (see `program-cache/FORMAT.md`): a fixed 96-byte header protected by
//! its own CRC32C, then the payload protected by a CRC32C: a small uncompressed summary (the
//! entry's size in memory and the hashes of its shaders) followed by the body (postcard-encoded
//! [`CachedProgram`], optionally LZ4). Decoding never panics and never trusts a length it has
//! not checked.
//!
//! The check is split so the startup loader can stop half way: [`check_packed`] runs every
//! check that needs no decompression (header, stamp, key, lengths, payload CRC, summary,
//! decompression bound) and [`decode_body`] the rest, later (after the load, or at the first
//! lookup).

use crate::key::{ProgramKey, ShaderHash};
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
/// The most shader hashes a summary lists (a program has at most six stages; some slack).
pub const MAX_SUMMARY_SHADERS: usize = 16;
/// Bytes of a summary before its shader hashes: memory size (`u32`) and shader count (`u8`).
const SUMMARY_FIXED: usize = 5;

/// The uncompressed summary at the start of an entry's payload: what the memory cache needs to
/// hold the entry before its body is decoded. (The shader hashes stay in the entry's bytes:
/// [`EntrySummary::shaders`].)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntrySummary {
    /// The bytes the decoded program counts against a memory budget
    /// ([`CachedProgram::stored_size`]) as the writer computed it. Advisory: the loader admits
    /// an entry by it, and charges the real figure once the body is decoded.
    pub memory_size: u32,
    /// How many shader hashes the summary lists (at most [`MAX_SUMMARY_SHADERS`]).
    pub shader_count: u8,
}

impl EntrySummary {
    /// Bytes the summary takes in the payload.
    pub fn len(&self) -> usize {
        SUMMARY_FIXED + 20 * usize::from(self.shader_count)
    }

    /// Never empty (the fixed part is always there); for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The hashes of the shaders whose compile statuses the entry holds, read from `entry` (the
    /// entry this summary was checked from), in the order of `entry_shaders`. The decoded
    /// body must list exactly these.
    pub fn shaders<'a>(&self, entry: &'a [u8]) -> impl Iterator<Item = ShaderHash> + 'a {
        let start = HEADER_LEN + SUMMARY_FIXED;
        let end = start + 20 * usize::from(self.shader_count);
        entry
            .get(start..end)
            .unwrap_or_default()
            .chunks_exact(20)
            .map(|c| ShaderHash(c.try_into().expect("20 bytes")))
    }
}

/// The shader hashes an entry of `program` lists in its summary: the compile statuses the
/// memory cache holds for it.
// The one place the disk format names `CachedProgram`'s shader fields: it must list what the
// cache's status bookkeeping (`ProgramCache::save`, `State::forget`) refs and releases.
pub(crate) fn entry_shaders(program: &CachedProgram) -> Vec<ShaderHash> {
    program.shader_hashes().collect()
}

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

/// Encodes an entry: header + payload (summary, then the body).
pub fn encode(
    key: &ProgramKey,
    program: &CachedProgram,
    stamp_hash: &[u8; 20],
    created_ms: u64,
    compress: bool,
) -> Vec<u8> {
    let raw = postcard::to_stdvec(program).expect("CachedProgram always serializes");
    let shaders = entry_shaders(program);
    let summary = EntrySummary {
        memory_size: u32::try_from(program.stored_size()).unwrap_or(u32::MAX),
        shader_count: u8::try_from(shaders.len()).unwrap_or(u8::MAX),
    };
    let mut payload = Vec::with_capacity(summary.len() + raw.len());
    payload.extend_from_slice(&summary.memory_size.to_le_bytes());
    payload.push(summary.shader_count);
    for h in &shaders {
        payload.extend_from_slice(&h.0);
    }
    let flags = if compress {
        payload.extend_from_slice(&lz4_flex::block::compress(&raw));
        FLAG_LZ4
    } else {
        payload.extend_from_slice(&raw);
        0
    };
    // The payload's length after decompression: the summary (never compressed) and the body.
    let raw_len = summary.len() + raw.len();
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(FORMAT_VERSION as u16).to_le_bytes());
    out.extend_from_slice(&(HEADER_LEN as u16).to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(stamp_hash);
    out.extend_from_slice(&key.0);
    out.extend_from_slice(&created_ms.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&(raw_len as u64).to_le_bytes());
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
    if program.binary.bytes.len() as u64 > MAX_PAYLOAD
        || !program.is_well_formed()
        || entry_shaders(program).len() > MAX_SUMMARY_SHADERS
    {
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

/// Runs every check of an entry that needs no decompression, in FORMAT.md's order: the header
/// ([`decode_header`]), stamp, key, payload length against `bytes`, payload CRC, the summary,
/// and the declared decompressed length (its bound, or for an uncompressed body its equality).
/// What is left for [`decode_body`]: LZ4, postcard, the summary's agreement with the body.
pub fn check_packed(
    bytes: &[u8],
    stamp_hash: &[u8; 20],
    expected_key: Option<&ProgramKey>,
) -> Result<(EntryHeader, EntrySummary), EntryError> {
    let header = decode_header(bytes)?;
    check_header(&header, stamp_hash, expected_key, bytes.len() as u64)?;
    let payload = &bytes[HEADER_LEN..];
    if crc32c::crc32c(payload) != header.payload_crc {
        return Err(EntryError::PayloadChecksum);
    }
    let summary = decode_summary(payload)?;
    let stored_body = (payload.len() - summary.len()) as u64;
    let Some(raw_body) = header.raw_len.checked_sub(summary.len() as u64) else {
        return Err(EntryError::Decompress(format!(
            "raw length {} is shorter than the summary",
            header.raw_len
        )));
    };
    if header.flags & FLAG_LZ4 != 0 {
        // An LZ4 block expands at most 255-fold (a match-length byte adds at most 255 bytes), so
        // a larger declared length is damage; checking it keeps a small entry from making the
        // decoder allocate up to MAX_PAYLOAD.
        if header.raw_len > MAX_PAYLOAD || raw_body > stored_body * LZ4_MAX_RATIO {
            return Err(EntryError::Decompress(format!(
                "raw length {} for {} stored bytes",
                header.raw_len, header.payload_len
            )));
        }
    } else if header.raw_len != header.payload_len {
        return Err(EntryError::Decompress(
            "raw length differs from stored length".into(),
        ));
    }
    Ok((header, summary))
}

/// Parses the summary at the start of `payload`.
fn decode_summary(payload: &[u8]) -> Result<EntrySummary, EntryError> {
    let bad = |why: String| Err(EntryError::Decode(format!("summary: {why}")));
    if payload.len() < SUMMARY_FIXED {
        return bad(format!(
            "{} bytes, shorter than {SUMMARY_FIXED}",
            payload.len()
        ));
    }
    let memory_size = le_u32(payload, 0);
    let count = usize::from(payload[4]);
    if count > MAX_SUMMARY_SHADERS {
        return bad(format!("{count} shaders, more than {MAX_SUMMARY_SHADERS}"));
    }
    if SUMMARY_FIXED + 20 * count > payload.len() {
        return bad(format!(
            "{count} shaders do not fit in {} bytes",
            payload.len()
        ));
    }
    Ok(EntrySummary {
        memory_size,
        shader_count: count as u8,
    })
}

/// Decodes the body of an entry that passed [`check_packed`] (with this `header` and `summary`):
/// LZ4 to exactly the declared length, postcard with no trailing bytes, and the body's shaders
/// equal to the summary's.
pub fn decode_body(
    bytes: &[u8],
    header: &EntryHeader,
    summary: &EntrySummary,
) -> Result<CachedProgram, EntryError> {
    let body = bytes
        .get(HEADER_LEN + summary.len()..)
        .ok_or_else(|| EntryError::Decode("the body is missing".into()))?;
    let raw_body = header.raw_len.saturating_sub(summary.len() as u64);
    let decompressed;
    let raw: &[u8] = if header.flags & FLAG_LZ4 != 0 {
        decompressed = lz4_flex::block::decompress(body, raw_body as usize)
            .map_err(|e| EntryError::Decompress(e.to_string()))?;
        if decompressed.len() as u64 != raw_body {
            return Err(EntryError::Decompress("length mismatch".into()));
        }
        &decompressed
    } else {
        body
    };
    let (program, rest) = postcard::take_from_bytes::<CachedProgram>(raw)
        .map_err(|e| EntryError::Decode(e.to_string()))?;
    if !rest.is_empty() {
        return Err(EntryError::Decode(format!("{} trailing bytes", rest.len())));
    }
    if !entry_shaders(&program)
        .into_iter()
        .eq(summary.shaders(bytes))
    {
        return Err(EntryError::Decode(
            "the summary's shaders are not the program's".into(),
        ));
    }
    Ok(program)
}

/// Decodes a whole entry and checks it belongs to `stamp_hash` (and to `expected_key` when
/// given): [`check_packed`], then [`decode_body`].
pub fn decode(
    bytes: &[u8],
    stamp_hash: &[u8; 20],
    expected_key: Option<&ProgramKey>,
) -> Result<(EntryHeader, CachedProgram), EntryError> {
    let (header, summary) = check_packed(bytes, stamp_hash, expected_key)?;
    decode_body(bytes, &header, &summary).map(|program| (header, program))
}
