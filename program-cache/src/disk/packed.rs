//! [`PackedEntry`]: an entry the startup loader read and checked, held in memory still encoded
//! until the loader thread decodes it after the load, or its first lookup does before.
//!
//! Decoding (LZ4 and postcard) is most of what loading an entry costs: on llvmpipe's entries it
//! takes two to three times as long as reading the files. So the loader runs only the checks
//! that need no decompression ([`super::format::check_packed`]: header, stamp, key, lengths,
//! both CRCs, the summary, the decompression bound), and the memory cache holds the checked
//! bytes. The summary gives it what it needs before decoding: the shaders whose compile statuses
//! the entry holds, and the size the decoded program will take. A lookup decodes the body
//! ([`PackedEntry::decode`]); a body that does not decode is rejected then, as the loader
//! rejects a damaged file: counted, deleted from disk, and never returned.

use std::sync::Arc;

use crate::key::ShaderHash;
use crate::program::CachedProgram;

use super::format::{self, EntryError, EntrySummary};

/// Bytes a packed entry counts against the budget besides its file bytes (bookkeeping), like
/// [`CachedProgram::stored_size`]'s overhead.
const PACKED_OVERHEAD: usize = 64;

/// An entry read from the disk store whose every check but the body's decoding passed. Cheap to
/// clone (the bytes are shared).
#[derive(Debug, Clone)]
pub(crate) struct PackedEntry {
    /// The whole entry file, as read.
    bytes: Arc<[u8]>,
    summary: EntrySummary,
    /// (device, inode) of the file it was read from: a rejection deletes that file only, never
    /// one another process published under the name since.
    pub(crate) origin: (u64, u64),
}

impl PackedEntry {
    /// Wraps the bytes of a file `check_packed` accepted with this summary.
    pub(crate) fn new(bytes: Arc<[u8]>, summary: EntrySummary, origin: (u64, u64)) -> Self {
        PackedEntry {
            bytes,
            summary,
            origin,
        }
    }

    /// The entry file's bytes, shared.
    pub(crate) fn bytes(&self) -> Arc<[u8]> {
        self.bytes.clone()
    }

    /// Whether `self` and `other` hold the very same bytes (the same read of the same file).
    pub(crate) fn same(&self, other: &PackedEntry) -> bool {
        Arc::ptr_eq(&self.bytes, &other.bytes)
    }

    /// The bytes this entry holds, as counted against the budget: the file and bookkeeping.
    pub(crate) fn held_bytes(&self) -> usize {
        self.bytes.len() + PACKED_OVERHEAD
    }

    /// The bytes the decoded program will count, as its writer said (advisory: the real figure
    /// is charged once decoded).
    pub(crate) fn claimed_size(&self) -> usize {
        self.summary.memory_size as usize
    }

    /// The shaders whose compile statuses the entry holds.
    pub(crate) fn shaders(&self) -> impl Iterator<Item = ShaderHash> + '_ {
        self.summary.shaders(&self.bytes)
    }

    /// Decodes the body: LZ4, postcard, the summary's agreement with it, and a well-formed
    /// entry ([`CachedProgram::is_well_formed`]: a program with a binary, or a failure record).
    pub(crate) fn decode(&self) -> Result<CachedProgram, EntryError> {
        // Checked when read: parsing the header again costs a CRC of 92 bytes.
        let header = format::decode_header(&self.bytes)?;
        let program = format::decode_body(&self.bytes, &header, &self.summary)?;
        if !program.is_well_formed() {
            return Err(EntryError::Decode(
                "the program binary is empty or the entry is malformed".into(),
            ));
        }
        Ok(program)
    }
}
