//! Inspection of a cache folder without opening a cache: what `gpusvc cache` shows. Nothing is
//! written except by [`clear`] (a scan only probes each store's `in-use.lock` with a
//! non-blocking exclusive `flock`, let go at once). Only folders proven to be our stores (name form, `STAMP` that parses and
//! whose hashes match the fields and the name) are listed as stores; folders with our name
//! form and layout but a missing or damaged `STAMP` are listed as damaged; anything else in
//! the folder is not ours and is never read or touched. Files are opened as the store opens
//! them: never through a link, never blocking on a FIFO, never reading more than an entry's
//! bound, never listing more than the store's bound of names in a folder.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::FileType;

use crate::key::ProgramKey;

use super::format::{self, EntryError, HEADER_LEN};
use super::fsx::{self, b};
use super::stamp::hex;
use super::store_dir::{self, MAX_ENTRY_FILE, Recognized, parse_key_hex};

/// One entry on disk.
#[derive(Debug, Clone)]
pub struct EntryInfo {
    /// Program key (from the file name).
    pub key: ProgramKey,
    /// File path.
    pub path: PathBuf,
    /// File size in bytes.
    pub size: u64,
    /// Bytes the file takes on disk (allocated blocks).
    pub allocated: u64,
    /// Time since the entry was published (zero for a time in the future).
    pub age: Duration,
    /// The stamp hash the entry's header names (first 8 bytes in hex), if the header reads.
    pub header_stamp: Option<String>,
    /// The entry's result of a full check (header, stamp, checksums, decode).
    pub check: Result<(), EntryError>,
}

/// One stamp's store (or a damaged folder with a store's name and layout).
#[derive(Debug, Clone)]
pub struct StoreInfo {
    /// The stamp's directory.
    pub dir: PathBuf,
    /// The stamp hash (hex) from the directory's STAMP file, when the STAMP checks out.
    pub stamp_hash: Option<String>,
    /// The STAMP file's text (empty when missing or unreadable).
    pub stamp_text: String,
    /// Why the store is damaged (`STAMP` missing, unparsable, or naming another store); its
    /// entries are then checked against the stamp their own headers name, when that stamp
    /// matches the folder name.
    pub damage: Option<String>,
    /// Why `entries/` could not be listed, if it could not.
    pub entries_error: Option<String>,
    /// A process holds the store's `in-use.lock` (a cache is using it now).
    pub in_use: bool,
    /// Its entries, sorted by key.
    pub entries: Vec<EntryInfo>,
    /// Names in `tmp/` (writes in progress, or left by a crash).
    pub temporary_files: usize,
    /// Bytes the whole store takes on disk (allocated blocks of entries, side files, folders).
    pub allocated: u64,
}

impl StoreInfo {
    /// Entries that failed their check.
    pub fn corrupt(&self) -> impl Iterator<Item = &EntryInfo> {
        self.entries.iter().filter(|e| e.check.is_err())
    }
    /// Bytes of all entries (file lengths).
    pub fn bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }
    /// True when the store itself is damaged (see [`StoreInfo::damage`] and
    /// [`StoreInfo::entries_error`]).
    pub fn is_damaged(&self) -> bool {
        self.damage.is_some() || self.entries_error.is_some()
    }
}

fn hex_to_20(hex: &str) -> Option<[u8; 20]> {
    parse_key_hex(hex).map(|k| k.0)
}

/// Checks one entry file: regular, within bounds, header then whole decode against `stamp`
/// (or, with `None`, against the stamp its header names when that matches `store_name`).
fn check_entry(
    entries: &std::os::fd::OwnedFd,
    name: &str,
    key: &ProgramKey,
    stamp: Option<[u8; 20]>,
    store_name: &str,
) -> Option<(rustix::fs::Stat, Option<String>, Result<(), EntryError>)> {
    let st = fsx::lstat(b(entries), name).ok()?;
    let t = fsx::file_type(&st);
    if t != FileType::RegularFile {
        return Some((
            st,
            None,
            Err(EntryError::NotAFile(fsx::type_name(t).into())),
        ));
    }
    let len = st.st_size.max(0) as u64;
    if len > MAX_ENTRY_FILE {
        return Some((st, None, Err(EntryError::TooLarge(len))));
    }
    let fd = match fsx::open_read(b(entries), name) {
        Ok((fd, _)) => fd,
        // Evicted by another process between the listing and here: gone, not corrupt.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => return Some((st, None, Err(EntryError::Unreadable(e.to_string())))),
    };
    let mut bytes = vec![0u8; len as usize];
    if let Err(e) = fsx::pread_exact(&fd, &mut bytes, 0) {
        return Some((st, None, Err(EntryError::Unreadable(e.to_string()))));
    }
    let header = format::decode_header(&bytes).ok();
    let header_stamp = header.map(|h| hex(&h.stamp_hash[..8]));
    let expected = stamp.or_else(|| {
        header
            .filter(|h| hex(&h.stamp_hash[..8]) == store_name)
            .map(|h| h.stamp_hash)
    });
    let check = match expected {
        Some(stamp) => format::decode(&bytes, &stamp, Some(key)).map(|_| ()),
        None if bytes.len() < HEADER_LEN => Err(EntryError::TruncatedHeader(bytes.len())),
        None => format::decode_header(&bytes).and(Err(EntryError::ForeignStamp)),
    };
    Some((st, header_stamp, check))
}

/// Reads every store under `root` and checks every entry (read-only).
pub fn scan(root: &Path) -> io::Result<Vec<StoreInfo>> {
    let root_fd = fsx::open_root(root)?;
    let now = store_dir::now_ms();
    let mut stores = Vec::new();
    for name in store_dir::store_names(&root_fd)? {
        let (dir_fd, stamp_hash, damage) = match store_dir::recognize(&root_fd, &name) {
            Recognized::NotOurs => continue,
            Recognized::Store(s) => (s.dir, Some(hex(&s.stamp.hash)), None),
            Recognized::Damaged { why, .. } => match fsx::open_dir(b(&root_fd), &name) {
                Ok(fd) => (fd, None, Some(why)),
                Err(_) => continue,
            },
        };
        let stamp_text = fsx::open_read(b(&dir_fd), "STAMP")
            .and_then(|(fd, st)| fsx::read_bounded(&fd, &st, 64 * 1024))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let expected = stamp_hash.as_deref().and_then(hex_to_20);
        let dir = root.join(&name);
        let mut allocated = 0;
        for side in store_dir::SIDE_FILES.iter().chain(&["entries", "tmp"]) {
            if let Ok(st) = fsx::lstat(b(&dir_fd), side) {
                allocated += fsx::allocated(&st);
            }
        }
        if let Ok(st) = rustix::fs::fstat(&dir_fd) {
            allocated += fsx::allocated(&st);
        }
        let mut entries = Vec::new();
        let mut entries_error = None;
        match fsx::open_dir(b(&dir_fd), "entries")
            .and_then(|fd| Ok((fsx::list(b(&fd), store_dir::MAX_LIST)?, fd)))
        {
            Err(e) => entries_error = Some(format!("entries/ cannot be listed: {e}")),
            Ok((list, entries_fd)) => {
                for e in list {
                    let Some(key) = parse_key_hex(&e.name) else {
                        continue;
                    };
                    let Some((st, header_stamp, check)) =
                        check_entry(&entries_fd, &e.name, &key, expected, &name)
                    else {
                        continue;
                    };
                    let published = fsx::mtime_ms(&st);
                    allocated += fsx::allocated(&st);
                    entries.push(EntryInfo {
                        key,
                        path: dir.join("entries").join(&e.name),
                        size: st.st_size.max(0) as u64,
                        allocated: fsx::allocated(&st),
                        age: Duration::from_millis(now.saturating_sub(published)),
                        header_stamp,
                        check,
                    });
                }
            }
        }
        entries.sort_by_key(|e| e.key);
        let temporary_files = fsx::open_dir(b(&dir_fd), "tmp")
            .and_then(|fd| fsx::list(b(&fd), store_dir::MAX_LIST))
            .map_or(0, |l| l.len());
        let in_use = match fsx::open_read(b(&dir_fd), "in-use.lock") {
            Ok((fd, _)) => match fsx::try_flock(&fd, true) {
                Ok(true) => {
                    fsx::unflock(&fd);
                    false
                }
                _ => true,
            },
            Err(_) => false,
        };
        stores.push(StoreInfo {
            dir,
            stamp_hash,
            stamp_text,
            damage,
            entries_error,
            in_use,
            entries,
            temporary_files,
            allocated,
        });
    }
    stores.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(stores)
}

/// What [`clear`] did.
#[derive(Debug, Clone, Default)]
pub struct ClearReport {
    /// Stores removed.
    pub stores: usize,
    /// Entries removed.
    pub entries: usize,
    /// Stores whose folder stayed because it holds files that are not ours (ours were removed).
    pub kept_foreign_files: Vec<PathBuf>,
    /// Damaged stores (no valid `STAMP`): not provably ours, so left alone.
    pub damaged_left: Vec<PathBuf>,
    /// Stores a cache started using between the check and their turn: left alone.
    pub in_use_left: Vec<PathBuf>,
    /// Stores whose lock could not be checked (with why): left alone.
    pub unusable: Vec<(PathBuf, String)>,
}

/// Why [`clear`] did nothing.
#[derive(Debug, thiserror::Error)]
pub enum ClearError {
    /// A cache is using these stores now; nothing was removed (clear with `force` to remove
    /// them anyway: the running cache then recreates its folder).
    #[error("{} store(s) in use by a running cache: {}", .0.len(), .0.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    InUse(Vec<PathBuf>),
    /// The folder could not be read.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Deletes every store under `root` (the browser's "clear cache"): only files our format
/// defines, then the folders if empty. When a store is in use by a running cache, no store is
/// removed unless `force` (checking may replace a planted, non-file `in-use.lock` by a lock file
/// of ours). Folders that are not provably ours are never touched.
pub fn clear(root: &Path, force: bool) -> Result<ClearReport, ClearError> {
    let root_fd = fsx::open_root(root)?;
    let mut report = ClearReport::default();
    let mut stores = Vec::new();
    let mut in_use = Vec::new();
    // First, which stores are in use (each lock is let go at once: a cache opening one
    // meanwhile waits only for this check, never for the whole clear).
    for name in store_dir::store_names(&root_fd)? {
        match store_dir::recognize(&root_fd, &name) {
            Recognized::Store(s) => {
                match store_dir::lock_unused(&s) {
                    Ok(Some(_)) => {}
                    Ok(None) => in_use.push(root.join(&name)),
                    Err(e) => {
                        report.unusable.push((root.join(&name), e.to_string()));
                        continue;
                    }
                }
                stores.push(s);
            }
            Recognized::Damaged { name, .. } => report.damaged_left.push(root.join(name)),
            Recognized::NotOurs => {}
        }
    }
    if !in_use.is_empty() && !force {
        return Err(ClearError::InUse(in_use));
    }
    // Then each store under its own lock, one at a time.
    for s in stores {
        let lock = match store_dir::lock_unused(&s) {
            Ok(lock) => lock,
            Err(e) => {
                report.unusable.push((root.join(&s.name), e.to_string()));
                continue;
            }
        };
        if lock.is_none() && !force {
            // A cache started using it since the check: it stays.
            report.in_use_left.push(root.join(&s.name));
            continue;
        }
        let d = store_dir::delete_store(&root_fd, &s, &|| false);
        drop(lock);
        report.entries += d.entries;
        if d.folder_removed {
            report.stores += 1;
        } else {
            report.kept_foreign_files.push(root.join(&s.name));
        }
    }
    Ok(report)
}

/// Milliseconds since the epoch, for callers printing ages.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
