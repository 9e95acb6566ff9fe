//! `load.pack`: a copy of the entries one startup load read, in load order, in one file, so the
//! next start takes them from one open file instead of an `openat` + `fstat` + `pread` +
//! `close` per entry (FORMAT.md, "The load pack").
//!
//! The pack is only ever a copy, and used only while `entries/` is exactly as it was: it
//! records the folder's inode, modification and change times as the load that wrote it found
//! them before listing, and a start uses it only when they are unchanged — any entry published,
//! replaced or deleted since, by any process or build, changes them. A load writes a pack only
//! when the folder had not changed for [`QUIET`] before it listed it and the file system's own
//! clock is past the folder's times (a file created in `tmp/` gets a later change time), so a
//! change after the listing always gets a later time than the one recorded, however coarse the
//! file system's timestamps. Within a usable pack an entry is taken only when its name still has the inode the
//! pack recorded, and only after the checks a file gets ([`super::format::check_packed`]); a
//! copy that fails them is read from its file. A pack that is damaged, foreign or stale is
//! deleted; one larger than the loader may read is left for the process that wrote it.
//!
//! Layout, all integers little-endian:
//! - header ([`PACK_HEADER`] bytes): magic `GPUSVCLP`, version `u32` (2), record count `u32`,
//!   `entries/`'s inode `u64`, modification time `u64` and change time `u64` (ns since the
//!   epoch), CRC32C of the index `u32`, CRC32C of the header's first 44 bytes `u32`;
//! - index: one [`PACK_RECORD`]-byte record per entry: key (20), inode `u64`, last use in ms
//!   `u64`, bytes the file took on disk `u64`, length of the entry's bytes `u32`;
//! - the entries' bytes, in index order, back to back. The file ends exactly there.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::key::ProgramKey;

use super::format::HEADER_LEN;
use super::store_dir::MAX_ENTRY_FILE;

/// The pack's name in the store folder.
pub(crate) const PACK_FILE: &str = "load.pack";
const MAGIC: &[u8; 8] = b"GPUSVCLP";
const VERSION: u32 = 2;
/// Bytes of the header.
pub(crate) const PACK_HEADER: usize = 48;
/// Bytes of one index record.
pub(crate) const PACK_RECORD: usize = 48;
/// At most this many records (a pack claiming more is not used).
const MAX_RECORDS: usize = 1 << 20;
/// A load that read at least this many entries from their files writes a pack (when there was
/// no usable one). A smaller store is read from its files: a pack saves it well under a
/// millisecond.
pub(crate) const PACK_MIN: usize = 32;
/// A startup load writes `load.pack` only when the store's `entries/` had not changed for
/// this long before the load listed it (FORMAT.md, "The load pack": a change after the
/// listing then always gets a later time than the one the pack records, however coarse the
/// file system's clock).
pub const QUIET: Duration = Duration::from_secs(1);

/// `entries/` as `fstat` saw it: inode, modification and change time (ns since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirState {
    pub(crate) ino: u64,
    pub(crate) mtime_ns: u64,
    pub(crate) ctime_ns: u64,
}

impl DirState {
    pub(crate) fn of(st: &rustix::fs::Stat) -> DirState {
        let ns = |s: i64, n: u64| (s.max(0) as u64).saturating_mul(1_000_000_000) + n;
        DirState {
            ino: st.st_ino,
            mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
            ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
        }
    }

    /// Whether nothing changed the folder for [`QUIET`] before `now_ns`.
    pub(crate) fn quiet_at(&self, now_ns: u64) -> bool {
        let quiet = QUIET.as_nanos() as u64;
        self.mtime_ns.max(self.ctime_ns).saturating_add(quiet) < now_ns
    }
}

/// Where one entry's bytes are in a pack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PackRecord {
    /// The inode number of the file the bytes were read from.
    pub(crate) ino: u64,
    pub(crate) last_use_ms: u64,
    /// Bytes the file took on disk (allocated blocks), for the store's size.
    pub(crate) allocated: u64,
    /// Where the bytes start in the pack file.
    pub(crate) offset: u64,
    pub(crate) len: usize,
}

/// What a pack's header says.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PackHeader {
    pub(crate) count: usize,
    pub(crate) dir: DirState,
    index_crc: u32,
}

impl PackHeader {
    /// Parses a header; `None` when it is damaged or of another version.
    pub(crate) fn parse(h: &[u8]) -> Option<PackHeader> {
        let h = h.get(..PACK_HEADER)?;
        if &h[..8] != MAGIC || u32_at(h, 8) != VERSION || crc32c::crc32c(&h[..44]) != u32_at(h, 44)
        {
            return None;
        }
        let count = u32_at(h, 12) as usize;
        (count <= MAX_RECORDS).then_some(PackHeader {
            count,
            dir: DirState {
                ino: u64_at(h, 16),
                mtime_ns: u64_at(h, 24),
                ctime_ns: u64_at(h, 32),
            },
            index_crc: u32_at(h, 40),
        })
    }

    /// Bytes of the header and index.
    pub(crate) fn index_end(&self) -> u64 {
        (PACK_HEADER + self.count * PACK_RECORD) as u64
    }
}

/// A pack's index, checked (the CRC, each length, no key twice, the file's length).
pub(crate) struct PackIndex {
    index: HashMap<ProgramKey, PackRecord>,
}

impl PackIndex {
    /// Parses the index bytes that follow `header` in a pack of `file_len` bytes; `None` when
    /// they do not hold.
    pub(crate) fn parse(header: &PackHeader, index: &[u8], file_len: u64) -> Option<PackIndex> {
        if index.len() != header.count * PACK_RECORD || crc32c::crc32c(index) != header.index_crc {
            return None;
        }
        let mut map = HashMap::with_capacity(header.count);
        let mut offset = header.index_end();
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
            offset = offset.checked_add(len as u64)?;
            // A key twice: the pack was not written by us; use none of it.
            if map.insert(key, record).is_some() {
                return None;
            }
        }
        (offset == file_len).then_some(PackIndex { index: map })
    }

    /// The record of `key`, when the pack holds the file `ino`.
    pub(crate) fn get(&self, key: &ProgramKey, ino: u64) -> Option<&PackRecord> {
        self.index.get(key).filter(|r| r.ino == ino)
    }

    /// Records in the pack.
    #[cfg(test)]
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

/// A pack a load planned: `entries/` as it found it before listing, and what it read ahead.
#[derive(Debug)]
pub(crate) struct PackPlan {
    pub(crate) dir: DirState,
    pub(crate) sources: Vec<PackSource>,
}

/// A pack is written only for entries averaging less than this: larger ones are read from
/// their files about as fast (the loader reads files on two threads), and copying them all
/// would cost a host's drop and disk more than it saves.
pub(crate) const PACK_MAX_AVERAGE: usize = 16 * 1024;

/// The header and index of a pack of the first entries of `plan` whose pack fits in `room`
/// bytes, and how many entries that is (their bytes follow the index, in that order); `None`
/// when fewer than [`PACK_MIN`] fit.
pub(crate) fn encode_index(plan: &PackPlan, room: u64) -> Option<(Vec<u8>, usize)> {
    let mut total = PACK_HEADER as u64;
    let mut n = 0;
    for s in &plan.sources {
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
    let taken = &plan.sources[..n];
    let mut out = Vec::with_capacity(PACK_HEADER + n * PACK_RECORD);
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
    out[16..24].copy_from_slice(&plan.dir.ino.to_le_bytes());
    out[24..32].copy_from_slice(&plan.dir.mtime_ns.to_le_bytes());
    out[32..40].copy_from_slice(&plan.dir.ctime_ns.to_le_bytes());
    out[40..44].copy_from_slice(&index_crc.to_le_bytes());
    let header_crc = crc32c::crc32c(&out[..44]);
    out[44..48].copy_from_slice(&header_crc.to_le_bytes());
    Some((out, n))
}

/// A whole pack's bytes, as [`encode_index`] and the entries make them (for tests).
#[cfg(test)]
pub(crate) fn encode(plan: &PackPlan, room: u64) -> Option<Vec<u8>> {
    let (mut out, n) = encode_index(plan, room)?;
    for s in &plan.sources[..n] {
        out.extend_from_slice(&s.bytes);
    }
    Some(out)
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

    const DIR: DirState = DirState {
        ino: 5,
        mtime_ns: 6,
        ctime_ns: 7,
    };

    fn plan(sources: Vec<PackSource>) -> PackPlan {
        PackPlan { dir: DIR, sources }
    }

    /// Parses a whole pack's bytes: its header and index (the entries' bytes are read, and
    /// checked, when taken).
    fn parse(bytes: &[u8]) -> Option<(PackHeader, PackIndex)> {
        let header = PackHeader::parse(bytes)?;
        let end = usize::try_from(header.index_end()).ok()?;
        let index = PackIndex::parse(&header, bytes.get(PACK_HEADER..end)?, bytes.len() as u64)?;
        Some((header, index))
    }

    #[test]
    fn a_pack_round_trips_and_any_flipped_byte_of_its_index_or_header_refuses_it() {
        let sources: Vec<_> = (0..40)
            .map(|i| source(i, HEADER_LEN + i as usize))
            .collect();
        let bytes = encode(&plan(sources.clone()), u64::MAX).expect("40 fit");
        let (header, index) = parse(&bytes).expect("parses");
        assert_eq!((index.len(), header.dir), (40, DIR));
        for s in &sources {
            let r = index.get(&s.key, s.ino).expect("present");
            let at = r.offset as usize;
            assert_eq!(&bytes[at..at + r.len], &s.bytes[..]);
            assert_eq!((r.last_use_ms, r.allocated), (77, 4096));
            assert!(index.get(&s.key, s.ino + 1).is_none(), "another inode");
        }
        let index_end = PACK_HEADER + 40 * PACK_RECORD;
        for at in 0..index_end {
            let mut b = bytes.clone();
            b[at] ^= 0x40;
            assert!(parse(&b).is_none(), "byte {at} flipped");
        }
        // The entries' bytes are checked when taken, not here; a length change is refused.
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(parse(&longer).is_none());
        assert!(parse(&bytes[..bytes.len() - 1]).is_none());
        assert!(parse(&[]).is_none());
    }

    #[test]
    fn a_pack_holds_what_fits_and_none_below_the_minimum() {
        let sources: Vec<_> = (0..40).map(|i| source(i, HEADER_LEN)).collect();
        let one = (PACK_RECORD + HEADER_LEN) as u64;
        let room = PACK_HEADER as u64 + 35 * one;
        let bytes = encode(&plan(sources.clone()), room).expect("35 fit");
        let (_, index) = parse(&bytes).expect("parses");
        assert_eq!(index.len(), 35);
        assert!(index.get(&sources[34].key, sources[34].ino).is_some());
        assert!(index.get(&sources[35].key, sources[35].ino).is_none());
        assert!(encode(&plan(sources), PACK_HEADER as u64 + 31 * one).is_none());
    }

    #[test]
    fn a_folder_is_quiet_only_a_full_second_after_its_last_change() {
        let s = 1_000_000_000;
        let dir = DirState {
            ino: 1,
            mtime_ns: 10 * s,
            ctime_ns: 12 * s,
        };
        assert!(!dir.quiet_at(13 * s));
        assert!(dir.quiet_at(13 * s + 1));
        let future = DirState {
            mtime_ns: u64::MAX,
            ..dir
        };
        assert!(!future.quiet_at(20 * s));
    }
}
