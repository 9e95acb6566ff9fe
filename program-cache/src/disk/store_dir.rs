//! The on-disk store of one stamp: directory layout, locking, publish, read, LRU metadata,
//! eviction, and the recognition and removal of other stores. See `program-cache/FORMAT.md` for
//! the protocol between processes.
//!
//! Every file operation goes through [`super::fsx`]: relative to descriptors of folders this
//! store opened (never through a link), non-blocking, regular files only, bounded reads.

use std::collections::HashMap;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::FileType;

use crate::key::{ProgramKey, ShaderHash};
use crate::program::CachedProgram;

use super::format::{self, EntryError, HEADER_LEN, MAX_PAYLOAD};
use super::fsx::{self, b};
use super::pack::{
    DirState, PACK_FILE, PACK_HEADER, PACK_RECORD, PackHeader, PackIndex, PackRecord, PackSource,
};
use super::packed::PackedEntry;
use super::stamp::{CompatibilityStamp, StoreStamp, compare_versions};

/// One record of `lru.log`: key (20) + last-use time in ms (8) + CRC32C of those 28 bytes (4).
pub(crate) const LOG_RECORD: usize = 32;
/// One record of `hot.list`: key (20) + CRC32C of it (4).
const HOT_RECORD: usize = 24;
/// One record of `compiled.list`: shader hash (20) + CRC32C of it (4).
pub(crate) const COMPILED_RECORD: usize = 24;
/// At most this many shader hashes of `compiled.list` are used at load (its newest) and kept
/// by a compaction.
pub(crate) const MAX_COMPILED: usize = 16 * 1024;
/// The largest entry file: a header and the largest payload FORMAT.md allows.
pub(crate) const MAX_ENTRY_FILE: u64 = HEADER_LEN as u64 + MAX_PAYLOAD;
/// The largest `STAMP` file read.
pub(crate) const MAX_STAMP_FILE: u64 = 64 * 1024;
/// At most this much of `lru.log` / `hot.list` is read (its newest part); the logs are
/// compacted long before they get there.
const MAX_LOG_READ: u64 = 8 << 20;
/// At most this many names are listed in one folder (a 64 MiB store of 4 KiB entries has 16 Ki).
pub(crate) const MAX_LIST: usize = 1 << 20;
/// Temporary files older than this are left-overs of a crashed writer.
const STALE_TMP: Duration = Duration::from_secs(600);
/// Another stamp's store unused this long is deleted.
pub(crate) const UNUSED_STORE_AGE: Duration = Duration::from_secs(30 * 24 * 3600);
/// A time this far past our clock is "in the future" (another machine's clock, a skewed one).
const FUTURE_SLACK_MS: u64 = 60_000;

/// The files of a store folder that our format defines (besides `entries/` and `tmp/`).
pub(crate) const SIDE_FILES: [&str; 7] = [
    "STAMP",
    "lru.log",
    "hot.list",
    "compiled.list",
    "evict.lock",
    "in-use.lock",
    PACK_FILE,
];

/// Appends `body` and its CRC32C.
fn put_record(out: &mut Vec<u8>, body: &[u8]) {
    out.extend_from_slice(body);
    out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
}

/// The valid records of `len` bytes in `bytes`. A short or damaged record (a failed append on a
/// full disk, a torn write) is skipped by resynchronizing on the next offset whose checksum
/// holds, so one bad record never misaligns the ones after it.
fn records(bytes: &[u8], len: usize) -> Vec<&[u8]> {
    let body = len - 4;
    let mut out = Vec::with_capacity(bytes.len() / len);
    let mut i = 0;
    while i + len <= bytes.len() {
        let r = &bytes[i..i + len];
        if crc32c::crc32c(&r[..body]).to_le_bytes() == r[body..] {
            out.push(&r[..body]);
            i += len;
        } else {
            i += 1;
        }
    }
    out
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// An entry's file name: its key in lowercase hex, formatted on the stack (the loader names
/// every entry it reads; a `String` per name was 7 % of its time).
#[derive(Clone, Copy)]
pub(crate) struct KeyName([u8; 40]);

impl std::ops::Deref for KeyName {
    type Target = str;
    fn deref(&self) -> &str {
        // SAFETY: `key_hex` fills every byte from `DIGITS`, all ASCII, so the bytes are UTF-8
        // (checking them again on every use of the name was 1.6 % of the loader's time).
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }
}

impl std::fmt::Display for KeyName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

pub(crate) fn key_hex(key: &ProgramKey) -> KeyName {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 40];
    for (pair, b) in out.chunks_exact_mut(2).zip(key.0) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
    KeyName(out)
}

pub(crate) fn parse_key_hex(name: &str) -> Option<ProgramKey> {
    parse_key_bytes(name.as_bytes())
}

/// [`parse_key_hex`] of a name's bytes.
pub(crate) fn parse_key_bytes(name: &[u8]) -> Option<ProgramKey> {
    /// A lowercase hex digit's value.
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    if name.len() != 40 {
        return None;
    }
    let mut k = [0u8; 20];
    for (byte, pair) in k.iter_mut().zip(name.chunks_exact(2)) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(ProgramKey(k))
}

/// True for a store folder's name: 16 lowercase hex digits.
pub(crate) fn is_store_name(name: &str) -> bool {
    name.len() == 16 && name.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// True for a name our writers give temporary files: `<key|STAMP|lru|hot|compiled>.<pid>.<n>`. Returns
/// the pid.
pub(crate) fn tmp_pid(name: &str) -> Option<i32> {
    let mut parts = name.split('.');
    let what = parts.next()?;
    let pid = parts.next()?.parse::<i32>().ok()?;
    let n = parts.next()?;
    let ours = matches!(what, "STAMP" | "lru" | "hot" | "compiled" | "pack")
        || parse_key_hex(what).is_some();
    (ours && parts.next().is_none() && n.bytes().all(|c| c.is_ascii_digit()) && !n.is_empty())
        .then_some(pid)
}

/// An entry file in the store.
#[derive(Debug, Clone)]
pub(crate) struct EntryFile {
    pub(crate) key: ProgramKey,
    /// Bytes the file takes on disk (allocated blocks).
    pub(crate) size: u64,
    /// Last use (from `lru.log`) or publish time (the file's mtime), ms since the epoch; never
    /// later than now (future times are normalized by [`StampDir::normalize_future`]).
    pub(crate) last_use_ms: u64,
    /// The time came from the future (a skewed clock) and was clamped.
    pub(crate) from_future: bool,
}

/// A name in `entries/` that has an entry's form but is not a regular file, or is larger than
/// any entry can be: never read, removed once.
#[derive(Debug, Clone)]
pub(crate) struct OddName {
    pub(crate) name: String,
    pub(crate) what: String,
    pub(crate) is_dir: bool,
}

/// What a listing of the store found.
#[derive(Debug, Default, Clone)]
pub(crate) struct Scan {
    pub(crate) entries: Vec<EntryFile>,
    pub(crate) odd: Vec<OddName>,
    /// Bytes of everything else of ours: side files, folders' own blocks.
    pub(crate) overhead: u64,
    /// Bytes of `lru.log` alone.
    pub(crate) log_bytes: u64,
    /// Bytes of `hot.list` alone.
    pub(crate) hot_bytes: u64,
    /// Bytes of `compiled.list` alone.
    pub(crate) compiled_bytes: u64,
    /// Bytes of `load.pack` alone.
    pub(crate) pack_bytes: u64,
}

impl Scan {
    /// Bytes the store takes on disk: entries plus overhead.
    pub(crate) fn total(&self) -> u64 {
        self.overhead + self.entries.iter().map(|e| e.size).sum::<u64>()
    }
}

/// What [`StampDir::load_pass`] found: the scan, and the entries in load order with what was
/// read of them during the pass (`None`: not read ahead; read it when its turn comes).
pub(crate) struct LoadPass {
    pub(crate) scan: Scan,
    pub(crate) order: Vec<(EntryFile, Option<Result<PackedEntry, ReadError>>)>,
    /// How the pass used `load.pack`.
    pub(crate) pack: PackUse,
}

/// What the startup pass found at `load.pack`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PackStatus {
    /// No pack (or not a regular file: never opened).
    Absent,
    /// A pack of this very `entries/`, used.
    Used,
    /// A pack of this very `entries/`, larger than this load may read: left alone, unused.
    TooLarge,
    /// A damaged or foreign pack, or one of an `entries/` that changed since: deleted.
    Dropped,
}

/// How one startup pass used `load.pack`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PackUse {
    pub(crate) status: PackStatus,
    /// `entries/` as the pass found it before listing it.
    pub(crate) dir: DirState,
    /// Nothing changed `entries/` for [`super::pack::QUIET`] before the pass listed it.
    pub(crate) quiet: bool,
    /// Entries whose bytes came from the pack.
    pub(crate) from_pack: usize,
    /// Entries read ahead from their files.
    pub(crate) from_files: usize,
}

/// `load.pack` open for the startup pass: its descriptor and checked index.
struct OpenPack {
    fd: OwnedFd,
    index: PackIndex,
}

/// A listed name the pack holds: its place in the listing, key, inode and record.
type PackHit = (usize, ProgramKey, u64, PackRecord);

/// Entries of at least this many bytes are read from the pack straight into their own
/// buffers; smaller ones in runs of up to [`PACK_RUN`] bytes, then copied.
const PACK_DIRECT: usize = 16 * 1024;
const PACK_RUN: usize = 256 * 1024;

/// The startup pass starts its helper thread once it has listed twice this many entry names;
/// a store with fewer is read by the loader thread alone (a thread costs more than it saves).
const PARALLEL_PASS_MIN: usize = 64;
/// Names per chunk handed between the threads of the startup pass.
const PASS_CHUNK: usize = 32;

/// A name the startup pass listed: its place in the listing, its key, the type and the inode
/// number `getdents` reported.
type Listed = (usize, ProgramKey, FileType, u64);

/// An entry the startup pass found, with its place in the listing and what was read of it.
type Found = (usize, EntryFile, Option<Result<PackedEntry, ReadError>>);

/// What the threads of [`StampDir::load_pass`] share.
struct PassContext<'a> {
    dir: &'a StampDir,
    h: &'a Handles,
    uses: &'a HashMap<ProgramKey, u64>,
    now: u64,
    stop: &'a (dyn Fn() -> bool + Sync),
    /// File bytes read ahead so far by both threads, at most `read_ahead`. Relaxed: it only
    /// bounds memory; nothing else is published through it.
    ahead: &'a AtomicU64,
    read_ahead: u64,
    /// `load.pack`, when there is a usable one.
    pack: Option<&'a OpenPack>,
    /// The device of `entries/` (an entry taken from the pack is the file of that device and
    /// the inode the listing reported).
    dev: u64,
}

/// What one thread of [`StampDir::load_pass`] found, each item with its place in the listing.
#[derive(Default)]
struct PassPart {
    odd: Vec<(usize, OddName)>,
    order: Vec<Found>,
    from_pack: usize,
    from_files: usize,
}

impl PassContext<'_> {
    /// Takes chunks of names from `names` until it is empty and closed; `None` when stopped.
    fn drain(&self, names: &crossbeam_channel::Receiver<Vec<Listed>>) -> Option<PassPart> {
        let mut part = PassPart::default();
        self.drain_into(names, &mut part)?;
        Some(part)
    }

    /// [`Self::drain`] into `part`.
    fn drain_into(
        &self,
        names: &crossbeam_channel::Receiver<Vec<Listed>>,
        part: &mut PassPart,
    ) -> Option<()> {
        for chunk in names {
            self.run(&chunk, part)?;
        }
        Some(())
    }

    /// Reserves `len` bytes of the read-ahead budget; false when they do not fit.
    fn reserve(&self, len: u64) -> bool {
        self.ahead
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| {
                a.checked_add(len).filter(|&n| n <= self.read_ahead)
            })
            .is_ok()
    }

    /// The pass over `names` into `part`, reading ahead while the shared budget lasts; `None`
    /// when stopped.
    fn run(&self, names: &[Listed], part: &mut PassPart) -> Option<()> {
        let entries_fd = b(&self.h.entries);
        for &(index, key, listed, _) in names {
            if (self.stop)() {
                return None;
            }
            let name = key_hex(&key);
            let mut t = listed;
            if t == FileType::Unknown {
                match fsx::lstat(entries_fd, &name) {
                    Ok(st) => t = fsx::file_type(&st),
                    Err(_) => continue,
                }
            }
            if t != FileType::RegularFile {
                let odd = OddName {
                    name: name.to_string(),
                    what: fsx::type_name(t).to_owned(),
                    is_dir: t == FileType::Directory,
                };
                part.odd.push((index, odd));
                continue;
            }
            // Replaced by something else since the listing: the writer's next scan sees it.
            let Ok((fd, st)) = fsx::open_listed(entries_fd, &name) else {
                continue;
            };
            let len = st.st_size.max(0) as u64;
            if len > MAX_ENTRY_FILE {
                let odd = OddName {
                    name: name.to_string(),
                    what: format!("{len} bytes, over the {MAX_ENTRY_FILE}-byte entry bound"),
                    is_dir: false,
                };
                part.odd.push((index, odd));
                continue;
            }
            let raw = self
                .uses
                .get(&key)
                .copied()
                .unwrap_or(0)
                .max(fsx::mtime_ms(&st));
            let file = EntryFile {
                key,
                size: fsx::allocated(&st),
                last_use_ms: raw.min(self.now),
                from_future: raw > self.now + FUTURE_SLACK_MS,
            };
            let read = self
                .reserve(len)
                .then(|| self.dir.packed_from(self.h, &fd, &st, &key));
            drop(fd);
            part.from_files += usize::from(matches!(read, Some(Ok(_))));
            part.order.push((index, file, read));
        }
        Some(())
    }

    /// The entries the pack holds (`hits`: listed names whose inode is the one it recorded,
    /// their bytes reserved in the shared read-ahead budget as they were listed; `over`: those
    /// that did not fit it, read from their files when their turn comes) into `part`, read
    /// from the pack in its order, each checked as a file is. Returns the names whose copy could not be read or failed a check: they are read
    /// from their files (the damage is the pack's; each file is judged on its own). `None`
    /// when stopped.
    fn read_hits(
        &self,
        mut hits: Vec<PackHit>,
        over: Vec<PackHit>,
        part: &mut PassPart,
    ) -> Option<Vec<Listed>> {
        for (index, key, _, record) in over {
            part.order
                .push((index, self.packed_file(key, &record), None));
        }
        let Some(pack) = self.pack else {
            return Some(Vec::new());
        };
        hits.sort_unstable_by_key(|h| h.3.offset);
        let mut retry = Vec::new();
        let mut run: Vec<u8> = Vec::new();
        let mut i = 0;
        while i < hits.len() {
            if (self.stop)() {
                return None;
            }
            // Small copies that follow one another in the pack and fit the budget: one read.
            let start = hits[i].3.offset;
            let mut end = start;
            let mut j = i;
            while j < hits.len() {
                let r = &hits[j].3;
                if r.len >= PACK_DIRECT
                    || r.offset != end
                    || (end - start) as usize + r.len > PACK_RUN
                {
                    break;
                }
                end += r.len as u64;
                j += 1;
            }
            if j > i {
                run.resize((end - start) as usize, 0);
                let read = fsx::pread_exact(&pack.fd, &mut run, start);
                for &(index, key, ino, r) in &hits[i..j] {
                    let at = (r.offset - start) as usize;
                    let bytes = read.as_ref().ok().map(|()| Arc::from(&run[at..at + r.len]));
                    self.take_copy(part, &mut retry, (index, key, ino, r), bytes);
                }
                i = j;
                continue;
            }
            // A large copy, read into its own buffer.
            let hit = hits[i];
            i += 1;
            let bytes = fsx::read_shared_at(&pack.fd, hit.3.len, hit.3.offset).ok();
            self.take_copy(part, &mut retry, hit, bytes);
        }
        Some(retry)
    }

    /// The entry of `hit` from its copy's `bytes` (`None`: the read failed), reserved in the
    /// read-ahead budget: into `part` when they pass every check a file gets, else onto `retry`
    /// (the reservation given back).
    fn take_copy(
        &self,
        part: &mut PassPart,
        retry: &mut Vec<Listed>,
        (index, key, ino, record): PackHit,
        bytes: Option<Arc<[u8]>>,
    ) {
        let checked = bytes
            .ok_or(EntryError::Unreadable("load.pack".into()))
            .and_then(|b| {
                let (_, summary) = format::check_packed(&b, &self.dir.stamp_hash, Some(&key))?;
                Ok(PackedEntry::new(b, summary, (self.dev, ino)))
            });
        match checked {
            Ok(entry) => {
                part.from_pack += 1;
                part.order
                    .push((index, self.packed_file(key, &record), Some(Ok(entry))));
            }
            Err(e) => {
                tracing::debug!(%key, error = %e, "no usable copy in load.pack; reading the file");
                self.ahead.fetch_sub(record.len as u64, Ordering::Relaxed);
                retry.push((index, key, FileType::RegularFile, ino));
            }
        }
    }

    /// The entry file the pack's `record` describes: its size and last use as the pack
    /// recorded them (newer records in `lru.log` still count).
    fn packed_file(&self, key: ProgramKey, record: &PackRecord) -> EntryFile {
        let raw = self
            .uses
            .get(&key)
            .copied()
            .unwrap_or(0)
            .max(record.last_use_ms);
        EntryFile {
            key,
            size: record.allocated,
            last_use_ms: raw.min(self.now),
            from_future: raw > self.now + FUTURE_SLACK_MS,
        }
    }
}

/// Why reading an entry failed.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The file is gone or unreadable (another process evicted it, I/O error).
    Io(io::Error),
    /// The file is damaged or foreign; it has been deleted.
    Rejected(EntryError),
    /// The name is not a regular file (a FIFO, folder, link ...): never read; removed.
    NotRegular(String),
}

/// Result of a publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Published {
    /// Written: file bytes, bytes allocated on disk.
    Written { bytes: u64, allocated: u64 },
    /// An entry for the key was there already.
    Present,
    /// The entry would exceed FORMAT.md's payload bound: it could never be read back, so it is
    /// not written.
    TooLarge,
}

/// Why an eviction did not run.
#[derive(Debug)]
pub(crate) enum EvictError {
    /// Another process holds `evict.lock` (it is evicting, or it is frozen while doing so).
    Busy,
    /// I/O.
    Io(io::Error),
}

impl From<io::Error> for EvictError {
    fn from(e: io::Error) -> Self {
        EvictError::Io(e)
    }
}

/// The open descriptors of one store folder.
#[derive(Debug)]
struct Handles {
    root: OwnedFd,
    dir: OwnedFd,
    entries: OwnedFd,
    tmp: OwnedFd,
    /// Held with a shared lock for as long as this process uses the folder, so no other
    /// process deletes it under us.
    _in_use: OwnedFd,
    /// (device, inode) of the store folder, `entries/` and `tmp/`.
    identity: [(u64, u64); 3],
}

/// How long opening waits, in all, for the store's `in-use.lock` (held exclusively only while
/// another process deletes the store — stale-store collection, `gpusvc cache clear` of a store
/// nobody uses — or for a moment by `gpusvc cache list|verify|stats` probing whether it is in
/// use). Background thread only.
pub const OPEN_LOCK_WAIT: Duration = Duration::from_secs(2);
/// How long an eviction waits for `evict.lock`. Background thread only.
pub const EVICT_LOCK_WAIT: Duration = Duration::from_millis(100);

/// Creates the cache root (and missing parents) `0700`.
fn create_root(root: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
}

fn identity(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

/// What opening a store did besides opening it.
#[derive(Debug, Default, Clone)]
pub(crate) struct OpenNotes {
    /// The store's previous open time (its `in-use.lock` mtime before this open), if any.
    pub(crate) previous_open_ms: Option<u64>,
    /// Why the `STAMP` file was rewritten, if it was.
    pub(crate) stamp_repaired: Option<String>,
    /// Side files that were not plain files of ours (links, FIFOs, ...) and were replaced.
    pub(crate) replaced: Vec<String>,
}

/// Removes names of our side files that are not a plain, single-link regular file (a planted
/// symbolic link, FIFO, socket, device or hard link): no process of ours makes one, and
/// unlinking the name never touches what it points to. Returns what was replaced. `STAMP` is
/// left to [`Handles::ensure_stamp`], which renames over it.
fn replace_planted_side_files(dir: &OwnedFd) -> Vec<String> {
    let mut replaced = Vec::new();
    for side in [
        "lru.log",
        "hot.list",
        "compiled.list",
        "evict.lock",
        "in-use.lock",
        PACK_FILE,
    ] {
        let Ok(st) = fsx::lstat(b(dir), side) else {
            continue;
        };
        let t = fsx::file_type(&st);
        let planted = match t {
            FileType::RegularFile => st.st_nlink > 1,
            // A folder there is left alone (its contents are not ours); opening fails instead.
            FileType::Directory => false,
            _ => true,
        };
        if planted && fsx::unlink(b(dir), side).is_ok() {
            let what = if t == FileType::RegularFile {
                "hard link"
            } else {
                fsx::type_name(t)
            };
            replaced.push(format!("{side} ({what})"));
        }
    }
    replaced
}

impl Handles {
    fn open(
        root_path: &Path,
        name: &str,
        stamp: &CompatibilityStamp,
        lock_wait: Duration,
    ) -> io::Result<(Self, OpenNotes)> {
        create_root(root_path)?;
        let mut root = fsx::open_root(root_path)?;
        let mut attempts = 0;
        // One deadline for every attempt: the whole open waits at most `lock_wait`.
        let deadline = std::time::Instant::now() + lock_wait;
        loop {
            attempts += 1;
            let created = fsx::mkdir(b(&root), name)?;
            let dir = fsx::open_dir(b(&root), name)?;
            fsx::check_private_dir(&dir, name)?;
            // ENOENT from here on: another process deleted the folder under us; start again.
            let gone = |e: &io::Error| e.kind() == io::ErrorKind::NotFound && attempts < 5;
            let sub = fsx::mkdir(b(&dir), "entries")
                .and_then(|_| fsx::mkdir(b(&dir), "tmp"))
                .and_then(|_| fsx::open_dir(b(&dir), "entries"))
                .and_then(|e| Ok((e, fsx::open_dir(b(&dir), "tmp")?)));
            let (entries, tmp) = match sub {
                Ok(x) => x,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(e),
            };
            fsx::check_private_dir(&entries, "entries")?;
            fsx::check_private_dir(&tmp, "tmp")?;
            // A link, FIFO, device or hard link at one of our side files (planted: no process of
            // ours makes one) is replaced by a file of ours; its target is never touched.
            let replaced = replace_planted_side_files(&dir);
            let existed = fsx::lstat(b(&dir), "in-use.lock").is_ok();
            let in_use = match fsx::open_rw(b(&dir), "in-use.lock", false) {
                Ok(fd) => fd,
                Err(e) if gone(&e) => continue,
                Err(e) => return Err(e),
            };
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if !fsx::flock_within(&in_use, false, left)? {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "another process holds {}/{name}/in-use.lock exclusively (it is \
                         deleting the store, or frozen while doing so)",
                        root_path.display()
                    ),
                ));
            }
            // A process deleting the folder may have removed it between our mkdir and our
            // lock: then the locked file or the folder is no longer the one at the path (or a
            // step above failed with ENOENT), and we start again.
            let dir_st = rustix::fs::fstat(&dir)?;
            let lock_st = rustix::fs::fstat(&in_use)?;
            let same = fsx::lstat(b(&root), name).is_ok_and(|s| identity(&s) == identity(&dir_st))
                && fsx::lstat(b(&dir), "in-use.lock")
                    .is_ok_and(|s| identity(&s) == identity(&lock_st));
            if !same && attempts < 5 {
                continue;
            }
            let notes = OpenNotes {
                previous_open_ms: existed.then(|| fsx::mtime_ms(&lock_st)),
                stamp_repaired: None,
                replaced,
            };
            // The lock file's mtime is the store's last open, for the age rule of
            // `remove_other_stores`.
            let _ = fsx::set_mtime_ms(&in_use, now_ms());
            let identities = [
                identity(&dir_st),
                identity(&rustix::fs::fstat(&entries)?),
                identity(&rustix::fs::fstat(&tmp)?),
            ];
            let handles = Handles {
                root,
                dir,
                entries,
                tmp,
                _in_use: in_use,
                identity: identities,
            };
            let repaired = match handles.ensure_stamp(stamp, created) {
                Ok(r) => r,
                Err(e) if gone(&e) => {
                    root = handles.root;
                    continue;
                }
                Err(e) => return Err(e),
            };
            return Ok((
                handles,
                OpenNotes {
                    stamp_repaired: repaired,
                    ..notes
                },
            ));
        }
    }

    /// Writes `STAMP` unless it holds exactly this stamp; returns why it was rewritten (`None`
    /// for the first STAMP of a folder created by this open).
    fn ensure_stamp(
        &self,
        stamp: &CompatibilityStamp,
        created: bool,
    ) -> io::Result<Option<String>> {
        let why = match read_small(&self.dir, "STAMP", MAX_STAMP_FILE) {
            Ok(text) if CompatibilityStamp::parse(&text).as_ref() == Some(stamp) => {
                return Ok(None);
            }
            Ok(_) => "damaged or another stamp's".to_owned(),
            // Missing in a store without entries: another process made the folder a moment
            // ago and is about to write it (the same text as ours). Not damage.
            Err(e) if e.kind() == io::ErrorKind::NotFound && !self.has_entries() => String::new(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => "missing".to_owned(),
            Err(e) => format!("unreadable ({e})"),
        };
        let t = tmp_name("STAMP");
        let fd = fsx::create_new(b(&self.tmp), &t)?;
        let written = fsx::write_all(&fd, stamp.describe().as_bytes());
        drop(fd);
        let result = written.and_then(|()| fsx::rename(b(&self.tmp), &t, b(&self.dir), "STAMP"));
        if result.is_err() {
            let _ = fsx::unlink(b(&self.tmp), &t);
        }
        result?;
        Ok((!created && !why.is_empty()).then_some(why))
    }

    /// True when `entries/` holds at least one name of an entry's form.
    fn has_entries(&self) -> bool {
        fsx::list(b(&self.entries), 4096)
            .is_ok_and(|l| l.iter().any(|e| parse_key_hex(&e.name).is_some()))
    }
}

/// Reads a whole entry file whose `fstat` is `st`, with the bounds of FORMAT.md checked from
/// the length before anything is allocated: shorter than a header, or longer than the largest
/// entry, is refused unread; a file that shrank meanwhile is refused as truncated.
fn read_whole(fd: &OwnedFd, st: &rustix::fs::Stat) -> Result<Vec<u8>, EntryError> {
    let len = st.st_size.max(0) as u64;
    if len < HEADER_LEN as u64 {
        return Err(EntryError::TruncatedHeader(len as usize));
    }
    if len > MAX_ENTRY_FILE {
        return Err(EntryError::PayloadLength {
            declared: MAX_PAYLOAD,
            actual: len - HEADER_LEN as u64,
        });
    }
    let bytes =
        fsx::read_prefix(fd, len as usize).map_err(|e| EntryError::Unreadable(e.to_string()))?;
    if bytes.len() < HEADER_LEN {
        return Err(EntryError::TruncatedHeader(bytes.len()));
    }
    Ok(bytes)
}

/// [`read_whole`] into one shared buffer (the memory cache keeps it as it is).
fn read_shared_entry(
    fd: &OwnedFd,
    st: &rustix::fs::Stat,
) -> Result<std::sync::Arc<[u8]>, EntryError> {
    let len = st.st_size.max(0) as u64;
    if len < HEADER_LEN as u64 {
        return Err(EntryError::TruncatedHeader(len as usize));
    }
    if len > MAX_ENTRY_FILE {
        return Err(EntryError::PayloadLength {
            declared: MAX_PAYLOAD,
            actual: len - HEADER_LEN as u64,
        });
    }
    fsx::read_shared(fd, len as usize).map_err(|e| EntryError::Unreadable(e.to_string()))
}

/// Reads a small regular file of ours as text (bounded, never through a link or a FIFO).
fn read_small(dir: &OwnedFd, name: &str, max: u64) -> io::Result<String> {
    let (fd, st) = fsx::open_read(b(dir), name)?;
    let bytes = fsx::read_bounded(&fd, &st, max)?;
    String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The newest `max` distinct shader hashes of a `compiled.list`'s bytes, oldest first
/// (damaged records skipped).
fn compiled_in(bytes: &[u8], max: usize) -> Vec<ShaderHash> {
    let mut seen = std::collections::HashSet::new();
    let mut newest: Vec<ShaderHash> = records(bytes, COMPILED_RECORD)
        .into_iter()
        .rev()
        .map(|r| ShaderHash(r.try_into().expect("20 bytes")))
        .filter(|h| seen.insert(*h))
        .take(max)
        .collect();
    newest.reverse();
    newest
}

/// Reads the newest `MAX_LOG_READ` bytes of a log file of ours; missing or odd: empty.
fn read_log(dir: &OwnedFd, name: &str) -> Vec<u8> {
    let Ok((fd, st)) = fsx::open_read(b(dir), name) else {
        return Vec::new();
    };
    let len = st.st_size.max(0) as u64;
    let start = len.saturating_sub(MAX_LOG_READ);
    let mut buf = vec![0u8; (len - start) as usize];
    if fsx::pread_exact(&fd, &mut buf, start).is_err() {
        return Vec::new();
    }
    buf
}

/// Deletes `name` in `dir` if it is still the regular file `origin` (device, inode).
fn remove_same(dir: BorrowedFd<'_>, name: &str, origin: (u64, u64)) {
    if fsx::lstat(dir, name)
        .is_ok_and(|s| fsx::file_type(&s) == FileType::RegularFile && identity(&s) == origin)
    {
        let _ = fsx::unlink(dir, name);
    }
}

/// Deletes `load.pack` of the store open as `h` when it is a regular file; returns the bytes it
/// took on disk.
fn remove_pack_in(h: &Handles) -> u64 {
    match fsx::lstat(b(&h.dir), PACK_FILE) {
        Ok(st)
            if fsx::file_type(&st) == FileType::RegularFile
                && fsx::unlink(b(&h.dir), PACK_FILE).is_ok() =>
        {
            fsx::allocated(&st)
        }
        _ => 0,
    }
}

/// The directory of one stamp, held open by this process.
#[derive(Debug)]
pub(crate) struct StampDir {
    /// The cache folder, for messages.
    pub(crate) root: PathBuf,
    /// The store folder, for messages.
    pub(crate) dir: PathBuf,
    name: String,
    stamp: CompatibilityStamp,
    pub(crate) stamp_hash: [u8; 20],
    compress: bool,
    handles: Mutex<Arc<Handles>>,
}

/// Numbers temporary files. One counter for the whole process: two caches of one process on one
/// folder must never write the same temporary file (a per-cache counter let them truncate each
/// other's file, publish a torn entry and fail the second rename). It starts at a value from the
/// clock, so two processes with the same pid (in two pid namespaces) rarely share names either;
/// when they do, `O_EXCL` refuses the second and nothing of the first is touched.
static TMP_NONCE: AtomicU64 = AtomicU64::new(0);
static TMP_NONCE_START: std::sync::Once = std::sync::Once::new();

/// A temporary file name `<what>.<pid>.<n>`: the pid is always the second dot-separated part,
/// which is how [`StampDir::remove_stale_tmp`] finds files of dead processes.
fn tmp_name(what: &str) -> String {
    TMP_NONCE_START.call_once(|| {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as u64 ^ d.as_secs().rotate_left(20));
        TMP_NONCE.store(seed & 0xFFFF_FFFF_FFFF, Ordering::Relaxed);
    });
    format!(
        "{what}.{}.{}",
        std::process::id(),
        TMP_NONCE.fetch_add(1, Ordering::Relaxed)
    )
}

fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission; it sends nothing.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// True for errors that mean "no space left" (the file system or the user's quota).
pub(crate) fn is_no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

impl StampDir {
    /// Opens (creating as needed, `0700`) `<root>/<stamp dir>/`: the shared `in-use.lock` is
    /// tried for at most `lock_wait`; a missing or damaged `STAMP` is rewritten. Other stores
    /// are not touched here (see [`remove_other_stores`]).
    pub(crate) fn open(
        root: &Path,
        stamp: &CompatibilityStamp,
        compress: bool,
        lock_wait: Duration,
    ) -> io::Result<(Self, OpenNotes)> {
        let name = stamp.dir_name();
        let (handles, notes) = Handles::open(root, &name, stamp, lock_wait)?;
        Ok((
            StampDir {
                root: root.to_path_buf(),
                dir: root.join(&name),
                name,
                stamp: stamp.clone(),
                stamp_hash: stamp.hash(),
                compress,
                handles: Mutex::new(Arc::new(handles)),
            },
            notes,
        ))
    }

    fn h(&self) -> Arc<Handles> {
        self.handles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// True when the store folder is no longer at its path (deleted or replaced by another
    /// process: `gpusvc cache clear --force`, a user's `rm -rf`).
    pub(crate) fn vanished(&self) -> bool {
        let h = self.h();
        let Ok(dir) = fsx::lstat(b(&h.root), &self.name) else {
            return true;
        };
        identity(&dir) != h.identity[0]
            || ["entries", "tmp"]
                .iter()
                .zip(&h.identity[1..])
                .any(|(name, id)| !fsx::lstat(b(&h.dir), name).is_ok_and(|s| identity(&s) == *id))
    }

    /// The cache root's descriptor (the one this store was opened through).
    pub(crate) fn root_fd(&self) -> io::Result<OwnedFd> {
        self.h().root.try_clone()
    }

    /// Opens the folder again after it vanished: recreated, locked, stamped.
    pub(crate) fn reopen(&self) -> io::Result<()> {
        let (handles, _) = Handles::open(&self.root, &self.name, &self.stamp, OPEN_LOCK_WAIT)?;
        *self.handles.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(handles);
        Ok(())
    }

    /// Deletes temporary files of writers that died mid-write (dead pid, or older than ten
    /// minutes). Only names of our temporary form, only regular files.
    pub(crate) fn remove_stale_tmp(&self) -> usize {
        let h = self.h();
        let Ok(list) = fsx::list(b(&h.tmp), MAX_LIST) else {
            return 0;
        };
        let now = now_ms();
        let mut removed = 0;
        for e in list {
            let Some(pid) = tmp_pid(&e.name) else {
                continue;
            };
            let Ok(st) = fsx::lstat(b(&h.tmp), &e.name) else {
                continue;
            };
            if fsx::file_type(&st) != FileType::RegularFile {
                continue;
            }
            let old = now.saturating_sub(fsx::mtime_ms(&st)) > STALE_TMP.as_millis() as u64;
            let dead = pid != std::process::id() as i32 && !pid_alive(pid);
            if (old || dead) && fsx::unlink(b(&h.tmp), &e.name).is_ok() {
                removed += 1;
            }
        }
        removed
    }

    /// Writes an entry to a temporary file and publishes it with a hard link, unless an entry
    /// for the key exists already.
    pub(crate) fn publish(
        &self,
        key: &ProgramKey,
        program: &CachedProgram,
    ) -> io::Result<Published> {
        if fsx::lstat(b(&self.h().entries), &key_hex(key)).is_ok() {
            return Ok(Published::Present);
        }
        let Some(bytes) =
            format::encode_bounded(key, program, &self.stamp_hash, now_ms(), self.compress)
        else {
            return Ok(Published::TooLarge);
        };
        self.publish_bytes(key, &bytes)
    }

    /// Publishes the bytes of an encoded entry for `key` (the caller checked them: this store's
    /// stamp, `key` in the header, within FORMAT.md's bounds) the way [`Self::publish`] does:
    /// a temporary file, then a hard link that never replaces an entry already there.
    pub(crate) fn publish_bytes(&self, key: &ProgramKey, bytes: &[u8]) -> io::Result<Published> {
        let h = self.h();
        let name = key_hex(key);
        if fsx::lstat(b(&h.entries), &name).is_ok() {
            return Ok(Published::Present);
        }
        if bytes.len() as u64 > MAX_ENTRY_FILE {
            return Ok(Published::TooLarge);
        }
        let t = tmp_name(&name);
        let mut created = false;
        let result = (|| {
            let fd = fsx::create_new(b(&h.tmp), &t)?;
            created = true;
            fsx::write_all(&fd, bytes)?;
            let allocated = fsx::allocated(&rustix::fs::fstat(&fd)?);
            drop(fd);
            // A hard link publishes atomically and never replaces: when another process
            // published the key first, it fails with EEXIST and its entry stays as it is.
            match fsx::link(b(&h.tmp), &t, b(&h.entries), &name) {
                Ok(()) => Ok(Published::Written {
                    bytes: bytes.len() as u64,
                    allocated,
                }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(Published::Present),
                Err(e) => Err(e),
            }
        })();
        // Only a file this call made: a name that existed already is someone else's.
        if created {
            let _ = fsx::unlink(b(&h.tmp), &t);
        }
        result
    }

    /// Reads and fully checks one entry (decoded too), returning its bytes: every check passed,
    /// so they are what an IPC peer may insert as they are. A damaged or foreign entry is
    /// deleted — only the very file that was read (same inode), never one another process
    /// published meanwhile. The length is checked from metadata before anything is allocated
    /// or read.
    pub(crate) fn read_bytes(&self, key: &ProgramKey) -> Result<Vec<u8>, ReadError> {
        let h = self.h();
        let name = key_hex(key);
        let (fd, st) = match fsx::open_read(b(&h.entries), &name) {
            Ok(x) => x,
            Err(e) if fsx::is_not_regular(&e) => return Err(ReadError::NotRegular(e.to_string())),
            Err(e) => return Err(ReadError::Io(e)),
        };
        let result = read_whole(&fd, &st)
            .and_then(|bytes| format::decode(&bytes, &self.stamp_hash, Some(key)).map(|_| bytes));
        drop(fd);
        result.map_err(|e| self.reject(&h, &name, identity(&st), e))
    }

    /// Reads one entry for the startup loader and runs every check that needs no decompression
    /// ([`format::check_packed`]); the body is decoded later (after the load, or at its first
    /// lookup). `name` was just
    /// listed as a regular file, so it is opened without another lookup first
    /// ([`fsx::open_listed`]): one `openat`, one `fstat`, one `pread` of the whole (bounded)
    /// file, one `close`. A damaged or foreign entry is deleted as [`Self::read`] deletes it.
    pub(crate) fn read_packed(&self, key: &ProgramKey) -> Result<PackedEntry, ReadError> {
        let h = self.h();
        let name = key_hex(key);
        let (fd, st) = match fsx::open_listed(b(&h.entries), &name) {
            Ok(x) => x,
            Err(e) if fsx::is_not_regular(&e) => return Err(ReadError::NotRegular(e.to_string())),
            Err(e) => return Err(ReadError::Io(e)),
        };
        self.packed_from(&h, &fd, &st, key)
    }

    /// [`Self::read_packed`] of the file open as `fd` (its `fstat` is `st`).
    fn packed_from(
        &self,
        h: &Handles,
        fd: &OwnedFd,
        st: &rustix::fs::Stat,
        key: &ProgramKey,
    ) -> Result<PackedEntry, ReadError> {
        let result = read_shared_entry(fd, st).and_then(|bytes| {
            let (_, summary) = format::check_packed(&bytes, &self.stamp_hash, Some(key))?;
            Ok(PackedEntry::new(bytes, summary, identity(st)))
        });
        result.map_err(|e| self.reject(h, &key_hex(key), identity(st), e))
    }

    /// Deletes the rejected entry `name` if it is still the file `origin` (device, inode) that
    /// was read, and says why.
    fn reject(&self, h: &Handles, name: &str, origin: (u64, u64), e: EntryError) -> ReadError {
        tracing::warn!(key = %name, error = %e, "rejected a damaged cache entry");
        remove_same(b(&h.entries), name, origin);
        ReadError::Rejected(e)
    }

    /// Deletes the entry of `key` if it is still the regular file `origin` (device, inode): a
    /// loaded entry that failed to decode at its first lookup. Returns the bytes it took on
    /// disk, `None` when it was not there (or is another file now).
    pub(crate) fn remove_if_same(
        &self,
        key: &ProgramKey,
        origin: (u64, u64),
    ) -> io::Result<Option<u64>> {
        let h = self.h();
        let name = key_hex(key);
        match fsx::lstat(b(&h.entries), &name) {
            Ok(st) if fsx::file_type(&st) == FileType::RegularFile && identity(&st) == origin => {
                fsx::unlink(b(&h.entries), &name)?;
                // The pack may hold a copy of it: a later file at the name could have its inode.
                Ok(Some(fsx::allocated(&st) + remove_pack_in(&h)))
            }
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Deletes the entry of `key` (the driver refused its binary): only a regular file at the
    /// name. Returns whether one was deleted.
    pub(crate) fn remove_entry(&self, key: &ProgramKey) -> io::Result<bool> {
        let h = self.h();
        let name = key_hex(key);
        match fsx::lstat(b(&h.entries), &name) {
            Ok(st) if fsx::file_type(&st) == FileType::RegularFile => {
                fsx::unlink(b(&h.entries), &name)?;
                // As in `remove_if_same`.
                remove_pack_in(&h);
                Ok(true)
            }
            Ok(_) => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Removes a name of `entries/` that is not a regular file or is oversized: a link, FIFO,
    /// device or file is unlinked, a folder only when empty (never its contents).
    pub(crate) fn remove_odd(&self, odd: &OddName) -> io::Result<()> {
        let h = self.h();
        if odd.is_dir {
            fsx::rmdir(b(&h.entries), &odd.name)
        } else {
            fsx::unlink(b(&h.entries), &odd.name)
        }
    }

    /// Appends last-use records. Small `O_APPEND` writes are atomic against other appenders.
    pub(crate) fn record_uses(&self, uses: &[(ProgramKey, u64)]) -> io::Result<()> {
        if uses.is_empty() {
            return Ok(());
        }
        let h = self.h();
        let mut buf = Vec::with_capacity(uses.len() * LOG_RECORD);
        for (key, ms) in uses {
            put_record(&mut buf, &[&key.0[..], &ms.to_le_bytes()].concat());
        }
        let fd = fsx::open_rw(b(&h.dir), "lru.log", true)?;
        // One record per write call keeps each append atomic even if the batch is large.
        for record in buf.chunks(LOG_RECORD) {
            fsx::write_all(&fd, record)?;
        }
        Ok(())
    }

    fn read_uses(&self, h: &Handles) -> HashMap<ProgramKey, u64> {
        let mut uses = HashMap::new();
        let bytes = read_log(&h.dir, "lru.log");
        for r in records(&bytes, LOG_RECORD) {
            let key = ProgramKey(r[..20].try_into().expect("20 bytes"));
            let ms = u64::from_le_bytes(r[20..].try_into().expect("8 bytes"));
            let e = uses.entry(key).or_insert(0);
            *e = (*e).max(ms);
        }
        uses
    }

    /// Marks programs as hot: they load first at startup.
    pub(crate) fn mark_hot(&self, keys: &[ProgramKey]) -> io::Result<()> {
        let h = self.h();
        let fd = fsx::open_rw(b(&h.dir), "hot.list", true)?;
        for k in keys {
            let mut record = Vec::with_capacity(HOT_RECORD);
            put_record(&mut record, &k.0);
            fsx::write_all(&fd, &record)?;
        }
        Ok(())
    }

    fn hot(&self, h: &Handles) -> Vec<ProgramKey> {
        records(&read_log(&h.dir, "hot.list"), HOT_RECORD)
            .into_iter()
            .map(|c| ProgramKey(c.try_into().expect("20 bytes")))
            .collect()
    }

    /// Records shaders known to compile (whose programs are not in the store): the next start
    /// marks them compiled. One append for all of `hashes`.
    pub(crate) fn mark_compiled(&self, hashes: &[ShaderHash]) -> io::Result<()> {
        let h = self.h();
        let fd = fsx::open_rw(b(&h.dir), "compiled.list", true)?;
        let mut buf = Vec::with_capacity(hashes.len() * COMPILED_RECORD);
        for hash in hashes {
            put_record(&mut buf, &hash.0);
        }
        fsx::write_all(&fd, &buf)
    }

    /// The newest [`MAX_COMPILED`] distinct shader hashes of `compiled.list`, oldest first.
    pub(crate) fn compiled_shaders(&self) -> Vec<ShaderHash> {
        let h = self.h();
        compiled_in(&read_log(&h.dir, "compiled.list"), MAX_COMPILED)
    }

    /// Every entry with its size and last use, the odd names, and the bytes of the rest.
    pub(crate) fn scan(&self) -> Scan {
        let h = self.h();
        self.scan_with(&h)
    }

    /// A scan of everything but the entries: the folders' and side files' bytes.
    fn scan_sides(&self, h: &Handles) -> Scan {
        let mut scan = Scan::default();
        for dir in [&h.dir, &h.entries, &h.tmp] {
            if let Ok(st) = rustix::fs::fstat(dir) {
                scan.overhead += fsx::allocated(&st);
            }
        }
        for side in SIDE_FILES {
            if let Ok(st) = fsx::lstat(b(&h.dir), side) {
                let n = fsx::allocated(&st);
                scan.overhead += n;
                match side {
                    "lru.log" => scan.log_bytes = n,
                    "hot.list" => scan.hot_bytes = n,
                    "compiled.list" => scan.compiled_bytes = n,
                    PACK_FILE => scan.pack_bytes = n,
                    _ => {}
                }
            }
        }
        scan
    }

    fn scan_with(&self, h: &Handles) -> Scan {
        let uses = self.read_uses(h);
        let now = now_ms();
        let mut scan = self.scan_sides(h);
        let Ok(list) = fsx::list(b(&h.entries), MAX_LIST) else {
            return scan;
        };
        for e in list {
            let Some(key) = parse_key_hex(&e.name) else {
                continue;
            };
            let Ok(st) = fsx::lstat(b(&h.entries), &e.name) else {
                continue;
            };
            let t = fsx::file_type(&st);
            if t != FileType::RegularFile {
                scan.odd.push(OddName {
                    name: e.name,
                    what: fsx::type_name(t).to_owned(),
                    is_dir: t == FileType::Directory,
                });
                continue;
            }
            let len = st.st_size.max(0) as u64;
            if len > MAX_ENTRY_FILE {
                scan.odd.push(OddName {
                    name: e.name,
                    what: format!("{len} bytes, over the {MAX_ENTRY_FILE}-byte entry bound"),
                    is_dir: false,
                });
                continue;
            }
            let raw = uses.get(&key).copied().unwrap_or(0).max(fsx::mtime_ms(&st));
            let from_future = raw > now + FUTURE_SLACK_MS;
            scan.entries.push(EntryFile {
                key,
                size: fsx::allocated(&st),
                last_use_ms: raw.min(now),
                from_future,
            });
        }
        scan
    }

    /// Entries in load order: hot ones first (the most recently marked first; a key marked
    /// several times counts by its newest mark), then most recently used first.
    pub(crate) fn load_order(&self) -> Vec<EntryFile> {
        let h = self.h();
        let list = self.scan_with(&h).entries;
        self.load_order_of(list)
    }

    /// [`Self::load_order`] of the entries of a scan already made.
    pub(crate) fn load_order_of(&self, mut list: Vec<EntryFile>) -> Vec<EntryFile> {
        let h = self.h();
        self.sort_for_load(&h, &mut list, |e| (e.key, e.last_use_ms));
        list
    }

    /// Sorts `list` in load order by the key and last use (`use_of`) of each item: hot first
    /// (most recent mark first), then most recently used first.
    fn sort_for_load<T>(
        &self,
        h: &Handles,
        list: &mut [T],
        use_of: impl Fn(&T) -> (ProgramKey, u64),
    ) {
        list.sort_by_key(|e| std::cmp::Reverse(use_of(e).1));
        let hot = self.hot(h);
        if hot.is_empty() {
            return;
        }
        // Rank 0 is the most recent mark; a key marked several times keeps its newest rank.
        let mut rank: HashMap<ProgramKey, usize> = HashMap::new();
        for (i, k) in hot.iter().rev().enumerate() {
            rank.entry(*k).or_insert(i);
        }
        list.sort_by_key(|e| rank.get(&use_of(e).0).copied().unwrap_or(usize::MAX));
    }

    /// The startup loader's one pass over the store: [`Self::scan`] (what the writer needs to
    /// keep the budget), the entries in load order, and — read during the same pass — the
    /// checked contents of entries up to `read_ahead` file bytes ([`Self::read_packed`]'s
    /// result, rejections included: a rejected entry is deleted then and not listed in the
    /// scan). One `getdents` pass, then per entry one `openat` + `fstat` (its size, time and
    /// identity come from that `fstat`, not from an `lstat` before it) and, when read ahead,
    /// one `pread` of the whole bounded file; the type `getdents` reports keeps folders, links
    /// and FIFOs from being opened at all (a file system that does not report types gets an
    /// `lstat` per name instead).
    ///
    /// The reading overlaps the listing: this thread lists, and once it has listed
    /// `2 × PARALLEL_PASS_MIN` names a helper thread (when one can be had) reads chunks of
    /// names as they are listed; when the listing is done, this thread reads chunks too. Both
    /// share the read-ahead budget. What they found is put back in listing order before it is
    /// sorted, so the scan and the load order do not depend on how the threads ran; which
    /// entries are read ahead within the budget does (the others are read when their turn
    /// comes). A listing error part way keeps the names listed until then: they are loaded,
    /// and the writer measures the store by them until its next scan (after an eviction, a
    /// compaction or a clear). Returns `None` when `stop` said so part way.
    pub(crate) fn load_pass(
        &self,
        read_ahead: u64,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Option<LoadPass> {
        let h = self.h();
        let uses = self.read_uses(&h);
        let now = now_ms();
        let mut scan = self.scan_sides(&h);
        // Before the listing: a change after this `fstat` gets a later time (module `pack`).
        let dir = DirState::of(&rustix::fs::fstat(&h.entries).ok()?);
        let now_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let (pack, status) = self.open_pack(&h, read_ahead, dir);
        // Only a load that may write a pack needs to know (module `pack`).
        let quiet = !matches!(status, PackStatus::Used | PackStatus::TooLarge)
            && dir.quiet_at(now_ns)
            && self.clock_passed(&h, dir);
        let ahead = AtomicU64::new(0);
        let ctx = PassContext {
            dir: self,
            h: &h,
            uses: &uses,
            now,
            stop,
            ahead: &ahead,
            read_ahead,
            pack: pack.as_ref(),
            dev: h.identity[1].0,
        };
        let (tx, rx) = crossbeam_channel::unbounded::<Vec<Listed>>();
        let parts = std::thread::scope(|s| {
            let mut helper = None;
            let mut spawn_tried = false;
            let mut listed = 0;
            // Names the pack holds (it is read after the listing); the others go to the
            // threads that read files, and only they are worth a second thread.
            let hits = std::cell::RefCell::new(Vec::new());
            let over = std::cell::RefCell::new(Vec::new());
            let not_packed = std::cell::Cell::new(0usize);
            // An error part way keeps the names listed until then (see above).
            let _ = fsx::list_chunks(
                b(&h.entries),
                MAX_LIST,
                PASS_CHUNK,
                |name, t, ino| {
                    let key = parse_key_bytes(name)?;
                    listed += 1;
                    if t == FileType::RegularFile
                        && let Some(r) = pack.as_ref().and_then(|p| p.index.get(&key, ino))
                    {
                        // Its share of the read-ahead budget is taken now, in listing order,
                        // as the threads reading files take theirs.
                        let hit = (listed - 1, key, ino, *r);
                        if ctx.reserve(r.len as u64) {
                            hits.borrow_mut().push(hit);
                        } else {
                            over.borrow_mut().push(hit);
                        }
                        return None;
                    }
                    not_packed.set(not_packed.get() + 1);
                    Some((listed - 1, key, t, ino))
                },
                |chunk| {
                    if !spawn_tried && not_packed.get() >= 2 * PARALLEL_PASS_MIN {
                        spawn_tried = true;
                        helper = std::thread::Builder::new()
                            .name("gpusvc-cache-loader-2".into())
                            .spawn_scoped(s, || ctx.drain(&rx))
                            .ok();
                    }
                    // The receiver lives until the end of this scope.
                    let _ = tx.send(chunk);
                },
            );
            drop(tx);
            let mine = (|| {
                let mut part = PassPart::default();
                let retry = ctx.read_hits(hits.take(), over.take(), &mut part)?;
                ctx.run(&retry, &mut part)?;
                ctx.drain_into(&rx, &mut part)?;
                Some(part)
            })();
            let theirs = helper.map(|helper| helper.join().ok().flatten());
            match (mine, theirs) {
                (Some(mine), None) => Some(vec![mine]),
                (Some(mine), Some(Some(theirs))) => Some(vec![mine, theirs]),
                _ => None,
            }
        })?;
        let (mut odd, mut listed_at, mut items) = (Vec::new(), Vec::new(), Vec::new());
        let mut used = PackUse {
            status,
            dir,
            quiet,
            from_pack: 0,
            from_files: 0,
        };
        drop(pack);
        for part in parts {
            used.from_pack += part.from_pack;
            used.from_files += part.from_files;
            odd.extend(part.odd);
            for (at, file, read) in part.order {
                listed_at.push(at);
                items.push(Some((file, read)));
            }
        }
        odd.sort_unstable_by_key(|(at, _)| *at);
        scan.odd.extend(odd.into_iter().map(|(_, odd)| odd));
        // Indices are sorted, the items (a read entry is some 200 bytes) stay put: first into
        // listing order, then (a stable sort: ties keep that order) into load order.
        let mut index: Vec<usize> = (0..items.len()).collect();
        index.sort_unstable_by_key(|&i| listed_at[i]);
        scan.entries
            .extend(index.iter().filter_map(|&i| match &items[i] {
                Some((_, Some(Err(ReadError::Rejected(_))))) | None => None,
                Some((file, _)) => Some(file.clone()),
            }));
        self.sort_for_load(&h, &mut index, |&i| {
            items[i]
                .as_ref()
                .map_or((ProgramKey([0; 20]), 0), |(e, _)| (e.key, e.last_use_ms))
        });
        let order = index.into_iter().filter_map(|i| items[i].take()).collect();
        Some(LoadPass {
            scan,
            order,
            pack: used,
        })
    }

    /// Opens `load.pack` for a pass over `entries/` in the state `dir`: used when it is a
    /// regular file of ours, written for exactly this `dir`, well formed, and no larger than a
    /// pack of `read_ahead` bytes of entries can be (its header and index are read; the
    /// entries' bytes later, as they are taken). A damaged or foreign pack, or one written for
    /// another state of `entries/`, is deleted (only the file that was read); one larger than
    /// this load may read is left for a process with a larger budget.
    fn open_pack(
        &self,
        h: &Handles,
        read_ahead: u64,
        dir: DirState,
    ) -> (Option<OpenPack>, PackStatus) {
        let Ok((fd, st)) = fsx::open_read(b(&h.dir), PACK_FILE) else {
            return (None, PackStatus::Absent);
        };
        let len = st.st_size.max(0) as u64;
        let mut head = [0u8; PACK_HEADER];
        let header = fsx::pread_exact(&fd, &mut head, 0)
            .ok()
            .and_then(|()| PackHeader::parse(&head))
            .filter(|header| header.dir == dir && header.index_end() <= len);
        let Some(header) = header else {
            drop(fd);
            remove_same(b(&h.dir), PACK_FILE, identity(&st));
            return (None, PackStatus::Dropped);
        };
        let max = read_ahead + read_ahead.div_ceil(HEADER_LEN as u64) * PACK_RECORD as u64;
        if len > PACK_HEADER as u64 + max {
            return (None, PackStatus::TooLarge);
        }
        let mut index = vec![0u8; (header.index_end() - PACK_HEADER as u64) as usize];
        let index = fsx::pread_exact(&fd, &mut index, PACK_HEADER as u64)
            .ok()
            .and_then(|()| PackIndex::parse(&header, &index, len));
        match index {
            Some(index) => (Some(OpenPack { fd, index }), PackStatus::Used),
            None => {
                drop(fd);
                remove_same(b(&h.dir), PACK_FILE, identity(&st));
                (None, PackStatus::Dropped)
            }
        }
    }

    /// Whether the file system's own clock is past every time of `entries/` in the state
    /// `dir` (which it must still be in): a file created in `tmp/` now gets a later change
    /// time. Then any change to `entries/` from now on gets a later time than `dir` records,
    /// however coarse the file system's timestamps (whole seconds on ext2/ext3).
    fn clock_passed(&self, h: &Handles, dir: DirState) -> bool {
        let t = tmp_name("pack");
        let Ok(fd) = fsx::create_new(b(&h.tmp), &t) else {
            return false;
        };
        let probe = rustix::fs::fstat(&fd).map(|st| DirState::of(&st).ctime_ns);
        drop(fd);
        let _ = fsx::unlink(b(&h.tmp), &t);
        let still = rustix::fs::fstat(&h.entries).is_ok_and(|st| DirState::of(&st) == dir);
        still && probe.is_ok_and(|p| p > dir.mtime_ns.max(dir.ctime_ns))
    }

    /// `entries/` as `fstat` sees it now.
    pub(crate) fn entries_state(&self) -> io::Result<DirState> {
        Ok(DirState::of(&rustix::fs::fstat(&self.h().entries)?))
    }

    /// Replaces `load.pack` with `bytes` (a temporary file, then a rename); returns the bytes
    /// it takes on disk.
    pub(crate) fn write_pack(&self, index: &[u8], entries: &[PackSource]) -> io::Result<u64> {
        use std::io::Write as _;
        let h = self.h();
        let t = tmp_name("pack");
        let fd = fsx::create_new(b(&h.tmp), &t)?;
        // Streamed: the header and index, then each entry's bytes (never the whole pack in
        // one buffer).
        let written = (|| {
            let mut out =
                std::io::BufWriter::with_capacity(256 * 1024, std::fs::File::from(fd.try_clone()?));
            out.write_all(index)?;
            for e in entries {
                out.write_all(&e.bytes)?;
            }
            out.flush()
        })();
        let result = written
            .and_then(|()| Ok(fsx::allocated(&rustix::fs::fstat(&fd)?)))
            .and_then(|n| fsx::rename(b(&h.tmp), &t, b(&h.dir), PACK_FILE).map(|()| n));
        drop(fd);
        if result.is_err() {
            let _ = fsx::unlink(b(&h.tmp), &t);
        }
        result
    }

    /// Gives entries dated in the future (a skewed clock wrote them) the time `now` for good:
    /// their mtime is set to now, so they age from here instead of staying newest forever.
    fn normalize_future(&self, h: &Handles, scan: &Scan) -> usize {
        let now = now_ms();
        let mut n = 0;
        for e in scan.entries.iter().filter(|e| e.from_future) {
            if let Ok((fd, _)) = fsx::open_read(b(&h.entries), &key_hex(&e.key))
                && fsx::set_mtime_ms(&fd, now).is_ok()
            {
                n += 1;
            }
        }
        n
    }

    /// Deletes least recently used entries until the store takes at most `limit` bytes on
    /// disk; compacts `lru.log` and `hot.list`. Tries `evict.lock` exclusively for at most
    /// `wait` ([`EvictError::Busy`] when another process holds it). Returns the entries
    /// deleted (the caller re-measures the store once, after).
    /// `compiled.list` keeps its newest `keep_compiled` hashes (none when `limit` is 0).
    pub(crate) fn evict_to(
        &self,
        limit: u64,
        wait: Duration,
        keep_compiled: usize,
    ) -> Result<usize, EvictError> {
        let h = self.h();
        let (lock, scan) = self.lock_and_scan(&h, wait)?;
        // The pack holds copies of entries about to go: it goes first (a later load writes
        // a new one).
        let mut total = scan.total().saturating_sub(remove_pack_in(&h));
        let mut list = scan.entries;
        list.sort_by_key(|e| e.last_use_ms);
        let mut deleted = 0;
        let mut gone = std::collections::HashSet::new();
        for e in &list {
            if total <= limit {
                break;
            }
            if fsx::unlink(b(&h.entries), &key_hex(&e.key)).is_ok() {
                total = total.saturating_sub(e.size);
                deleted += 1;
                gone.insert(e.key);
            }
        }
        let remaining: Vec<&EntryFile> = list.iter().filter(|e| !gone.contains(&e.key)).collect();
        let result = self.compact_with(&h, &remaining, limit == 0, keep_compiled);
        fsx::unflock(&lock);
        result?;
        Ok(deleted)
    }

    /// Rewrites `lru.log` with one record per entry and `hot.list` without duplicates or keys
    /// that left, under `evict.lock` (tried for `wait`).
    /// `compiled.list` keeps its newest `keep_compiled` hashes.
    pub(crate) fn compact(&self, wait: Duration, keep_compiled: usize) -> Result<(), EvictError> {
        let h = self.h();
        let (lock, scan) = self.lock_and_scan(&h, wait)?;
        let remaining: Vec<&EntryFile> = scan.entries.iter().collect();
        let result = self.compact_with(&h, &remaining, false, keep_compiled);
        fsx::unflock(&lock);
        Ok(result?)
    }

    /// What [`Self::evict_to`] and [`Self::compact`] start with: `evict.lock` taken exclusively
    /// (tried for `wait`; [`EvictError::Busy`] when another process holds it), then the store
    /// scanned and entries dated in the future brought back to now. The caller unlocks.
    fn lock_and_scan(&self, h: &Handles, wait: Duration) -> Result<(OwnedFd, Scan), EvictError> {
        let lock = fsx::open_rw(b(&h.dir), "evict.lock", false)?;
        if !fsx::flock_within(&lock, true, wait)? {
            return Err(EvictError::Busy);
        }
        let scan = self.scan_with(h);
        self.normalize_future(h, &scan);
        Ok((lock, scan))
    }

    fn compact_with(
        &self,
        h: &Handles,
        remaining: &[&EntryFile],
        drop_hot: bool,
        keep_compiled: usize,
    ) -> io::Result<()> {
        let mut buf = Vec::with_capacity(remaining.len() * LOG_RECORD);
        for e in remaining {
            put_record(
                &mut buf,
                &[&e.key.0[..], &e.last_use_ms.to_le_bytes()].concat(),
            );
        }
        self.replace(h, "lru", "lru.log", &buf)?;
        let hot = self.compact_hot(h, remaining, drop_hot);
        // Last, and best-effort: the list is advisory, and a folder planted at its name (never
        // removed: not ours) must not stop the logs' compaction.
        let compiled = if drop_hot {
            Vec::new()
        } else {
            compiled_in(&read_log(&h.dir, "compiled.list"), keep_compiled)
        };
        let mut buf = Vec::with_capacity(compiled.len() * COMPILED_RECORD);
        for hash in &compiled {
            put_record(&mut buf, &hash.0);
        }
        let _ = self.replace(h, "compiled", "compiled.list", &buf);
        hot
    }

    /// The `hot.list` part of [`Self::compact_with`].
    fn compact_hot(&self, h: &Handles, remaining: &[&EntryFile], drop_hot: bool) -> io::Result<()> {
        let present: std::collections::HashSet<ProgramKey> =
            remaining.iter().map(|e| e.key).collect();
        let hot = self.hot(h);
        if drop_hot || hot.is_empty() {
            if drop_hot {
                let _ = self.replace(h, "hot", "hot.list", &[]);
            }
            return Ok(());
        }
        // Keep each key's most recent mark, in mark order.
        let mut seen = std::collections::HashSet::new();
        let mut keep: Vec<ProgramKey> = hot
            .iter()
            .rev()
            .filter(|k| present.contains(k) && seen.insert(**k))
            .copied()
            .collect();
        keep.reverse();
        let mut buf = Vec::with_capacity(keep.len() * HOT_RECORD);
        for k in &keep {
            put_record(&mut buf, &k.0);
        }
        self.replace(h, "hot", "hot.list", &buf)
    }

    /// Replaces a side file atomically (temporary file + rename; a link at the name is
    /// replaced, never followed).
    fn replace(&self, h: &Handles, what: &str, name: &str, bytes: &[u8]) -> io::Result<()> {
        let t = tmp_name(what);
        let fd = fsx::create_new(b(&h.tmp), &t)?;
        let result =
            fsx::write_all(&fd, bytes).and_then(|()| fsx::rename(b(&h.tmp), &t, b(&h.dir), name));
        drop(fd);
        if result.is_err() {
            let _ = fsx::unlink(b(&h.tmp), &t);
        }
        result
    }

    /// Deletes every entry (the browser's "clear", or the driver refused too many binaries)
    /// and empties the logs. Returns the entries deleted.
    pub(crate) fn drop_all(&self) -> io::Result<usize> {
        let h = self.h();
        // Under `evict.lock` when it can be had within the bounded wait, so another process's
        // compaction does not rename its older logs back over the emptied ones; without it
        // otherwise (a clear is never refused for a lock another process holds).
        let lock = fsx::open_rw(b(&h.dir), "evict.lock", false).ok();
        let locked = lock
            .as_ref()
            .is_some_and(|l| fsx::flock_within(l, true, EVICT_LOCK_WAIT).unwrap_or(false));
        let scan = self.scan_with(&h);
        remove_pack_in(&h);
        let mut n = 0;
        for e in &scan.entries {
            if fsx::unlink(b(&h.entries), &key_hex(&e.key)).is_ok() {
                n += 1;
            }
        }
        let result = self
            .replace(&h, "lru", "lru.log", &[])
            .and_then(|()| self.replace(&h, "hot", "hot.list", &[]))
            .and_then(|()| self.replace(&h, "compiled", "compiled.list", &[]));
        if let (Some(l), true) = (&lock, locked) {
            fsx::unflock(l);
        }
        result.map(|()| n)
    }

    /// Replaces side files planted since the open (a link, FIFO or hard link at `evict.lock`
    /// or a log): the same repair as at open. Returns what was replaced.
    pub(crate) fn repair_side_files(&self) -> Vec<String> {
        replace_planted_side_files(&self.h().dir)
    }
}

// ---------------------------------------------------------------------------------------------
// Other stores in the cache folder: recognition and removal.

/// A folder of the cache root proven to be one of our stores.
#[derive(Debug)]
pub(crate) struct OtherStore {
    pub(crate) name: String,
    pub(crate) dir: OwnedFd,
    pub(crate) stamp: StoreStamp,
    /// Newest time among our own files of the store (`in-use.lock`, `STAMP`, the logs, the
    /// entries folder), ms since the epoch.
    pub(crate) last_use_ms: u64,
}

/// Why a folder of the cache root is not (provably) one of our stores, or what it is.
#[derive(Debug)]
pub(crate) enum Recognized {
    /// Name, `STAMP` and hashes all check out.
    Store(OtherStore),
    /// The name has our form and the folder has our layout (`entries/` or `in-use.lock`), but
    /// `STAMP` is missing, damaged or does not match the name: reported, never deleted.
    Damaged { name: String, why: String },
    /// Not ours: never touched.
    NotOurs,
}

/// Decides what the folder `name` of the cache root is.
pub(crate) fn recognize(root: &OwnedFd, name: &str) -> Recognized {
    if !is_store_name(name) {
        return Recognized::NotOurs;
    }
    let Ok(dir) = fsx::open_dir(b(root), name) else {
        return Recognized::NotOurs;
    };
    // Another user's folder is never ours, whatever it holds.
    let euid = rustix::process::geteuid().as_raw();
    if !rustix::fs::fstat(&dir).is_ok_and(|st| st.st_uid == euid) {
        return Recognized::NotOurs;
    }
    let layout = fsx::lstat(b(&dir), "entries")
        .is_ok_and(|s| fsx::file_type(&s) == FileType::Directory)
        || fsx::lstat(b(&dir), "in-use.lock").is_ok();
    let damaged = |why: String| {
        if layout {
            Recognized::Damaged {
                name: name.to_owned(),
                why,
            }
        } else {
            Recognized::NotOurs
        }
    };
    let text = match read_small(&dir, "STAMP", MAX_STAMP_FILE) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return damaged("no STAMP file".into()),
        Err(e) => return damaged(format!("STAMP unreadable: {e}")),
    };
    let Some(stamp) = StoreStamp::parse(&text) else {
        return damaged("STAMP does not parse or its hashes do not match its fields".into());
    };
    if stamp.dir_name() != name {
        return damaged(format!(
            "STAMP names the store {}, not {name}",
            stamp.dir_name()
        ));
    }
    let mut last_use_ms = 0;
    for side in [
        "in-use.lock",
        "STAMP",
        "lru.log",
        "hot.list",
        "compiled.list",
        "entries",
    ] {
        if let Ok(st) = fsx::lstat(b(&dir), side) {
            last_use_ms = last_use_ms.max(fsx::mtime_ms(&st));
        }
    }
    Recognized::Store(OtherStore {
        name: name.to_owned(),
        dir,
        stamp,
        last_use_ms,
    })
}

/// Lists the folders of the cache root that have a store's name form.
pub(crate) fn store_names(root: &OwnedFd) -> io::Result<Vec<String>> {
    Ok(fsx::list(b(root), MAX_LIST)?
        .into_iter()
        .filter(|e| is_store_name(&e.name))
        .map(|e| e.name)
        .collect())
}

/// What [`delete_store`] removed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Deleted {
    pub(crate) entries: usize,
    pub(crate) bytes: u64,
    /// The store folder itself is gone (false: something not ours was left in it).
    pub(crate) folder_removed: bool,
}

/// Deletes one store: only names our format defines (entries by key name, temporary files by
/// their form, the side files), then the folders if they are empty. The caller holds the
/// store's `in-use.lock` exclusively (or, with force, knowingly does not).
pub(crate) fn delete_store(root: &OwnedFd, store: &OtherStore, stop: &dyn Fn() -> bool) -> Deleted {
    let mut d = Deleted::default();
    let dir = &store.dir;
    if let Ok(entries) = fsx::open_dir(b(dir), "entries") {
        for e in fsx::list(b(&entries), MAX_LIST).unwrap_or_default() {
            // Stopped (the cache is going away): what is left is still a whole store, with its
            // STAMP, and the next open goes on.
            if stop() {
                return d;
            }
            if parse_key_hex(&e.name).is_none() {
                continue;
            }
            let Ok(st) = fsx::lstat(b(&entries), &e.name) else {
                continue;
            };
            let removed = if fsx::file_type(&st) == FileType::Directory {
                fsx::rmdir(b(&entries), &e.name)
            } else {
                fsx::unlink(b(&entries), &e.name)
            };
            if removed.is_ok() {
                d.entries += 1;
                d.bytes += fsx::allocated(&st);
            }
        }
        let _ = fsx::rmdir(b(dir), "entries");
    }
    if let Ok(tmp) = fsx::open_dir(b(dir), "tmp") {
        for e in fsx::list(b(&tmp), MAX_LIST).unwrap_or_default() {
            if stop() {
                return d;
            }
            if tmp_pid(&e.name).is_some()
                && fsx::lstat(b(&tmp), &e.name)
                    .is_ok_and(|s| fsx::file_type(&s) != FileType::Directory)
            {
                let _ = fsx::unlink(b(&tmp), &e.name);
            }
        }
        let _ = fsx::rmdir(b(dir), "tmp");
    }
    for side in SIDE_FILES {
        if fsx::lstat(b(dir), side).is_ok_and(|s| fsx::file_type(&s) != FileType::Directory) {
            let _ = fsx::unlink(b(dir), side);
        }
    }
    d.folder_removed = fsx::rmdir(b(root), &store.name).is_ok();
    d
}

/// Tries to take a store's `in-use.lock` exclusively without waiting: `Some(lock)` when no
/// process uses it (the lock is held until the returned fd is dropped), `None` when one does.
/// A store without the file is used by nobody: the file is created then, so an opener waits
/// for the lock while the store is being deleted.
pub(crate) fn lock_unused(store: &OtherStore) -> io::Result<Option<OwnedFd>> {
    let fd = match fsx::open_read(b(&store.dir), "in-use.lock") {
        Ok((fd, _)) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // Nobody has it open: create it and lock it, so an opener waits for us.
            fsx::open_rw(b(&store.dir), "in-use.lock", false)?
        }
        // A link or FIFO in its place: no cache can use the store (they refuse it), so nobody
        // holds it. Replace the name by a lock file of ours.
        Err(e) if fsx::is_not_regular(&e) => {
            fsx::unlink(b(&store.dir), "in-use.lock")?;
            fsx::open_rw(b(&store.dir), "in-use.lock", false)?
        }
        Err(e) => return Err(e),
    };
    Ok(fsx::try_flock(&fd, true)?.then_some(fd))
}

/// Why another store is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Staleness {
    /// The same host product on the same device and context, at an older or equal host
    /// version (a driver or host update).
    Superseded,
    /// A store of this crate's previous layout on the same device.
    OldLayout,
    /// Unused for [`UNUSED_STORE_AGE`] by both the clock and the other stores' records.
    Unused,
}

/// Decides whether `other` is stale for a process of `ours`. `reference_ms` is the newest
/// last-use time recorded by any store of the folder (ours before this open included): an age
/// is judged against it as well as against the clock, so a clock that is fast (or slow) on
/// this machine never makes recent stores look old.
pub(crate) fn staleness(
    ours: &CompatibilityStamp,
    other: &OtherStore,
    now_ms: u64,
    reference_ms: u64,
) -> Option<Staleness> {
    let same_device = other.stamp.device_hash == ours.device_hash();
    match &other.stamp.host {
        // A newer version of the same product is not ours to delete (it may still age out).
        Some((product, version))
            if same_device
                && *product == ours.host_product
                && compare_versions(version, &ours.host_version) != std::cmp::Ordering::Greater =>
        {
            return Some(Staleness::Superseded);
        }
        None if same_device => return Some(Staleness::OldLayout),
        _ => {}
    }
    let age = UNUSED_STORE_AGE.as_millis() as u64;
    let by_clock = now_ms.saturating_sub(other.last_use_ms) >= age;
    let by_records = reference_ms.saturating_sub(other.last_use_ms) >= age;
    (by_clock && by_records).then_some(Staleness::Unused)
}

/// Removes other stores of the cache folder that are stale (see [`staleness`]) and that no
/// live process holds; each removal is reported through `log`. Folders that are not provably
/// ours are never touched. Returns the number of stores removed.
pub(crate) fn remove_other_stores(
    root: &OwnedFd,
    root_path: &Path,
    ours: &CompatibilityStamp,
    previous_open_ms: Option<u64>,
    log: &dyn Fn(String),
    stop: &dyn Fn() -> bool,
) -> usize {
    let root = root
        .try_clone()
        .map_or_else(|_| fsx::open_root(root_path), Ok);
    let Ok(root) = root else {
        return 0;
    };
    let own = ours.dir_name();
    let now = now_ms();
    let others: Vec<OtherStore> = store_names(&root)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| *n != own)
        .filter_map(|n| match recognize(&root, &n) {
            Recognized::Store(s) => Some(s),
            _ => None,
        })
        .collect();
    let reference = others
        .iter()
        .map(|s| s.last_use_ms)
        .chain(previous_open_ms)
        .filter(|&t| t <= now + FUTURE_SLACK_MS)
        .max()
        .unwrap_or(0);
    let mut removed = 0;
    for other in &others {
        if stop() {
            break;
        }
        let Some(why) = staleness(ours, other, now, reference) else {
            continue;
        };
        let Ok(Some(lock)) = lock_unused(other) else {
            continue;
        };
        // Still the folder we recognized?
        let same = match (
            fsx::lstat(b(&root), &other.name),
            rustix::fs::fstat(&other.dir),
        ) {
            (Ok(a), Ok(b2)) => identity(&a) == identity(&b2),
            _ => false,
        };
        if !same {
            continue;
        }
        let d = delete_store(&root, other, stop);
        drop(lock);
        removed += usize::from(d.folder_removed);
        if stop() && !d.folder_removed {
            break;
        }
        let reason = match why {
            Staleness::Superseded => "the same host product on this device has a newer store",
            Staleness::OldLayout => "a store of the previous layout on this device",
            Staleness::Unused => "unused for 30 days",
        };
        let left = if d.folder_removed {
            String::new()
        } else {
            "; files that are not ours were left in the folder".to_owned()
        };
        log(format!(
            "program cache: removed the store {}/{} ({reason}): {} entries, {} bytes{left}",
            root_path.display(),
            other.name,
            d.entries,
            d.bytes
        ));
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_record_does_not_misalign_the_ones_after_it() {
        let mut log = Vec::new();
        put_record(&mut log, &[1u8; 28]);
        let mut torn = Vec::new();
        put_record(&mut torn, &[2u8; 28]);
        log.extend_from_slice(&torn[..13]); // a short append
        put_record(&mut log, &[3u8; 28]);
        log.extend_from_slice(&[0xFF; 7]); // garbage tail
        let got: Vec<u8> = records(&log, LOG_RECORD).iter().map(|r| r[0]).collect();
        assert_eq!(got, [1, 3]);
    }

    fn test_stamp() -> CompatibilityStamp {
        CompatibilityStamp {
            gl_vendor: "vendor".into(),
            gl_renderer: "renderer".into(),
            gl_version: "4.6".into(),
            context: "OpenGL core profile".into(),
            vendor_id: None,
            device_id: None,
            driver_build_id: None,
            host_product: "store-dir-tests".into(),
            host_version: "1".into(),
            format_version: format::FORMAT_VERSION,
            pointer_width: usize::BITS,
        }
    }

    #[test]
    fn the_startup_pass_reads_ahead_exactly_up_to_its_bound_and_finds_every_entry() {
        const N: u16 = 600;
        let root = tempfile::tempdir().unwrap();
        let (dir, _) =
            StampDir::open(root.path(), &test_stamp(), false, Duration::from_secs(5)).unwrap();
        let program = CachedProgram {
            binary: crate::program::ProgramBinaryData {
                format: 1,
                bytes: vec![7; 1000],
            },
            ..CachedProgram::default()
        };
        let key = |n: u16| {
            let mut k = [0x5A; 20];
            k[..2].copy_from_slice(&n.to_be_bytes());
            ProgramKey(k)
        };
        for n in 0..N {
            dir.publish(&key(n), &program).unwrap();
        }
        // Every entry file has the same length (same program, uncompressed).
        let file = std::fs::metadata(dir.dir.join("entries").join(&*key_hex(&key(0))))
            .unwrap()
            .len();
        for bound in [
            0,
            file - 1,
            file * 7 / 2,
            file * 250,
            file * u64::from(N),
            u64::MAX,
        ] {
            // Several rounds: which entries the two threads read ahead varies, how many does not.
            for _ in 0..5 {
                let pass = dir.load_pass(bound, &|| false).expect("not stopped");
                assert_eq!(pass.order.len(), N as usize);
                assert_eq!(pass.scan.entries.len(), N as usize);
                let read = pass
                    .order
                    .iter()
                    .filter(|(_, read)| read.as_ref().is_some_and(|r| r.is_ok()))
                    .count() as u64;
                assert!(pass.order.iter().all(|(_, r)| !matches!(r, Some(Err(_)))));
                assert_eq!(read, (bound / file).min(u64::from(N)), "bound {bound}");
            }
        }
    }

    #[test]
    fn only_our_names_are_recognized() {
        assert!(is_store_name("0123456789abcdef"));
        assert!(!is_store_name("0123456789ABCDEF"));
        assert!(!is_store_name("0123456789abcde"));
        assert!(!is_store_name("photos"));
        let key = "ab".repeat(20);
        assert_eq!(tmp_pid(&format!("{key}.123.4")), Some(123));
        assert_eq!(tmp_pid("STAMP.7.0"), Some(7));
        assert_eq!(tmp_pid("lru.7.0"), Some(7));
        // `load.pack` is written as `pack.<pid>.<n>` (the pid is always the second part).
        assert_eq!(tmp_pid(&tmp_name("pack")), Some(std::process::id() as i32));
        assert_eq!(tmp_pid("load.pack.7.0"), None);
        assert_eq!(tmp_pid("notes.7.0"), None);
        assert_eq!(tmp_pid("lru.7.0.bak"), None);
        assert_eq!(tmp_pid("lru.x.0"), None);
        assert!(parse_key_hex(&key).is_some());
        assert!(parse_key_hex(&"AB".repeat(20)).is_none());
        assert!(parse_key_hex(&"+1".repeat(20)).is_none());
    }
}
