//! `load.pack`: a copy of the entries one startup load read, in load order, in one file, so the
//! next start reads them with one `read` instead of an `openat` + `fstat` + `pread` + `close`
//! per entry (FORMAT.md, "The load pack").
//!
//! The pack is only ever a copy. The store is still `entries/`: the loader lists it as before,
//! and takes an entry's bytes from the pack only when the pack holds that very file — the
//! same name and the same inode number as `getdents` reports. An entry written, replaced or
//! deleted since the pack was written is read from its file, or not at all. Every entry taken
//! from the pack passes the same checks as one read from its file
//! ([`super::format::check_packed`]: stamp, key, lengths, both CRCs); one that does not is read
//! from its file instead (the damage is the pack's, not the entry's). A pack that is damaged,
//! foreign, larger than the loader may read, or not a regular file of ours is not used at all.
//!
//! Layout, all integers little-endian:
//! - header ([`PACK_HEADER`] bytes): magic `GPUSVCLP`, version `u32` (1), record count `u32`,
//!   CRC32C of the index `u32`, CRC32C of the header's first 20 bytes `u32`;
//! - index: one [`PACK_RECORD`]-byte record per entry: key (20), inode `u64`, last use in ms
//!   `u64`, bytes the file took on disk `u64`, length of the entry's bytes `u32`;
//! - the entries' bytes, in index order, back to back. The file ends exactly there.

use std::collections::HashMap;
use std::sync::Arc;

use crate::key::ProgramKey;

use super::format::HEADER_LEN;
use super::store_dir::MAX_ENTRY_FILE;

/// The pack's name in the store folder.
pub(crate) const PACK_FILE: &str = "load.pack";
const MAGIC: &[u8; 8] = b"GPUSVCLP";
const VERSION: u32 = 1;
/// Bytes of the header.
pub(crate) const PACK_HEADER: usize = 24;
/// Bytes of one index record.
pub(crate) const PACK_RECORD: usize = 48;
/// At most this many records (a pack claiming more is not used).
const MAX_RECORDS: usize = 1 << 20;
/// A load that read at least this many entries from their files (and at least an eighth of
/// what it read) writes a new pack; so does one that found this many of the pack's records
/// gone (and at least an eighth of them). A smaller store is read from its files: a pack saves
/// it well under a millisecond.
pub(crate) const PACK_MIN: usize = 32;

/// Where one entry's bytes are in a pack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PackRecord {
    /// The inode number of the file the bytes were read from.
    pub(crate) ino: u64,
    pub(crate) last_use_ms: u64,
    /// Bytes the file took on disk (allocated blocks), for the store's size.
    pub(crate) allocated: u64,
    offset: usize,
    len: usize,
}

/// A pack read and checked (its header, index and length; each entry is checked when taken).
pub(crate) struct Pack {
    bytes: Vec<u8>,
    index: HashMap<ProgramKey, PackRecord>,
}

impl Pack {
    /// Parses a pack's bytes; `None` when the pack is damaged or of another version.
    pub(crate) fn parse(bytes: Vec<u8>) -> Option<Pack> {
        let header = bytes.get(..PACK_HEADER)?;
        if &header[..8] != MAGIC
            || u32_at(header, 8) != VERSION
            || crc32c::crc32c(&header[..20]) != u32_at(header, 20)
        {
            return None;
        }
        let count = u32_at(header, 12) as usize;
        if count > MAX_RECORDS {
            return None;
        }
        let index_end = PACK_HEADER + count * PACK_RECORD;
        let index = bytes.get(PACK_HEADER..index_end)?;
        if crc32c::crc32c(index) != u32_at(header, 16) {
            return None;
        }
        let mut map = HashMap::with_capacity(count);
        let mut offset = index_end;
        for r in index.chunks_exact(PACK_RECORD) {
            let key = ProgramKey(r[..20].try_into().expect("20 bytes"));
            let len = u32_at(r, 44) as usize;
            if !(HEADER_LEN as u64..=MAX_ENTRY_FILE).contains(&(len as u64)) {
                return None;
            }
            let record = PackRecord {
                ino: u64_at(r, 20),
                last_use_ms: u64_at(r, 28),
                allocated: u64_at(r, 36),
                offset,
                len,
            };
            offset = offset.checked_add(len)?;
            // A key twice: the pack was not written by us; use none of it.
            if map.insert(key, record).is_some() {
                return None;
            }
        }
        (offset == bytes.len()).then_some(Pack { bytes, index: map })
    }

    /// The record of `key`, when the pack holds the file `ino`.
    pub(crate) fn get(&self, key: &ProgramKey, ino: u64) -> Option<&PackRecord> {
        self.index.get(key).filter(|r| r.ino == ino)
    }

    /// The bytes of `record`'s entry.
    pub(crate) fn bytes(&self, record: &PackRecord) -> &[u8] {
        &self.bytes[record.offset..record.offset + record.len]
    }

    /// Records in the pack.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }
}

/// One entry for a new pack: what the load read from it.
#[derive(Debug, Clone)]
pub(crate) struct PackSource {
    pub(crate) key: ProgramKey,
    pub(crate) ino: u64,
    pub(crate) last_use_ms: u64,
    pub(crate) allocated: u64,
    pub(crate) bytes: Arc<[u8]>,
}

/// Encodes a pack of the first entries of `sources` whose pack fits in `room` bytes; `None`
/// when fewer than [`PACK_MIN`] fit.
pub(crate) fn encode(sources: &[PackSource], room: u64) -> Option<Vec<u8>> {
    let mut total = PACK_HEADER as u64;
    let mut n = 0;
    for s in sources {
        let next = total + (PACK_RECORD + s.bytes.len()) as u64;
        if next > room || n == MAX_RECORDS {
            break;
        }
        total = next;
        n += 1;
    }
    if n < PACK_MIN {
        return None;
    }
    let taken = &sources[..n];
    let mut out = Vec::with_capacity(total as usize);
    out.resize(PACK_HEADER, 0);
    for s in taken {
        out.extend_from_slice(&s.key.0);
        out.extend_from_slice(&s.ino.to_le_bytes());
        out.extend_from_slice(&s.last_use_ms.to_le_bytes());
        out.extend_from_slice(&s.allocated.to_le_bytes());
        out.extend_from_slice(&(s.bytes.len() as u32).to_le_bytes());
    }
    let index_crc = crc32c::crc32c(&out[PACK_HEADER..]);
    out[..8].copy_from_slice(MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&(n as u32).to_le_bytes());
    out[16..20].copy_from_slice(&index_crc.to_le_bytes());
    let header_crc = crc32c::crc32c(&out[..20]);
    out[20..24].copy_from_slice(&header_crc.to_le_bytes());
    for s in taken {
        out.extend_from_slice(&s.bytes);
    }
    Some(out)
}

/// Whether a load should write a new pack: it read `from_files` entries from their files and
/// `from_pack` from the pack, whose `records` include `gone` that no longer matched a file.
pub(crate) fn worth_rewriting(from_files: usize, from_pack: usize, gone: usize) -> bool {
    let read = from_files + from_pack;
    let records = from_pack + gone;
    (from_files >= PACK_MIN && from_files * 8 >= read) || (gone >= PACK_MIN && gone * 8 >= records)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(i: u8, len: usize) -> PackSource {
        PackSource {
            key: ProgramKey([i; 20]),
            ino: 1000 + u64::from(i),
            last_use_ms: 77,
            allocated: 4096,
            bytes: vec![i; len].into(),
        }
    }

    #[test]
    fn a_pack_round_trips_and_any_flipped_byte_of_its_index_or_header_refuses_it() {
        let sources: Vec<_> = (0..40)
            .map(|i| source(i, HEADER_LEN + i as usize))
            .collect();
        let bytes = encode(&sources, u64::MAX).expect("40 fit");
        let pack = Pack::parse(bytes.clone()).expect("parses");
        assert_eq!(pack.len(), 40);
        for s in &sources {
            let r = pack.get(&s.key, s.ino).expect("present");
            assert_eq!(pack.bytes(r), &s.bytes[..]);
            assert_eq!((r.last_use_ms, r.allocated), (77, 4096));
            assert!(pack.get(&s.key, s.ino + 1).is_none(), "another inode");
        }
        let index_end = PACK_HEADER + 40 * PACK_RECORD;
        for at in 0..index_end {
            let mut b = bytes.clone();
            b[at] ^= 0x40;
            assert!(Pack::parse(b).is_none(), "byte {at} flipped");
        }
        // The entries' bytes are checked when taken, not here; a length change is refused.
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Pack::parse(longer).is_none());
        assert!(Pack::parse(bytes[..bytes.len() - 1].to_vec()).is_none());
        assert!(Pack::parse(Vec::new()).is_none());
    }

    #[test]
    fn a_pack_holds_what_fits_and_none_below_the_minimum() {
        let sources: Vec<_> = (0..40).map(|i| source(i, HEADER_LEN)).collect();
        let one = (PACK_RECORD + HEADER_LEN) as u64;
        let room = PACK_HEADER as u64 + 35 * one;
        let pack = Pack::parse(encode(&sources, room).expect("35 fit")).expect("parses");
        assert_eq!(pack.len(), 35);
        assert!(pack.get(&sources[34].key, sources[34].ino).is_some());
        assert!(pack.get(&sources[35].key, sources[35].ino).is_none());
        assert!(encode(&sources, PACK_HEADER as u64 + 31 * one).is_none());
    }

    #[test]
    fn rewriting_is_worth_it_only_past_the_minimum_and_an_eighth() {
        assert!(!worth_rewriting(31, 0, 0));
        assert!(worth_rewriting(32, 0, 0));
        assert!(!worth_rewriting(32, 300, 0));
        assert!(worth_rewriting(40, 280, 0));
        assert!(!worth_rewriting(0, 300, 31));
        assert!(worth_rewriting(0, 224, 32));
        assert!(!worth_rewriting(0, 300, 32));
    }
}
