//! Inspection of a cache folder without opening a cache: what `gpusvc cache` shows.
//! Read-only except [`clear`].

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::key::ProgramKey;

use super::format::{self, EntryError};
use super::store::parse_key_hex;

/// One entry on disk.
#[derive(Debug, Clone)]
pub struct EntryInfo {
    /// Program key (from the file name).
    pub key: ProgramKey,
    /// File path.
    pub path: PathBuf,
    /// File size in bytes.
    pub size: u64,
    /// Time since the entry was published.
    pub age: Duration,
    /// The entry's result of a full check (header, stamp, checksums, decode).
    pub check: Result<(), EntryError>,
}

/// One stamp's store.
#[derive(Debug, Clone)]
pub struct StoreInfo {
    /// The stamp's directory.
    pub dir: PathBuf,
    /// The stamp hash (hex) from the directory's STAMP file, if readable.
    pub stamp_hash: Option<String>,
    /// The STAMP file's text.
    pub stamp_text: String,
    /// Its entries, sorted by key.
    pub entries: Vec<EntryInfo>,
    /// Temporary files (writes in progress or left by a crash).
    pub temporary_files: usize,
}

impl StoreInfo {
    /// Entries that failed their check.
    pub fn corrupt(&self) -> impl Iterator<Item = &EntryInfo> {
        self.entries.iter().filter(|e| e.check.is_err())
    }
    /// Bytes of all entries.
    pub fn bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }
}

fn hex_to_20(hex: &str) -> Option<[u8; 20]> {
    parse_key_hex(hex).map(|k| k.0)
}

/// Reads every store under `root` and checks every entry (read-only).
pub fn scan(root: &Path) -> io::Result<Vec<StoreInfo>> {
    let mut stores = Vec::new();
    for dir in fs::read_dir(root)?.flatten() {
        let dir = dir.path();
        let Ok(stamp_text) = fs::read_to_string(dir.join("STAMP")) else {
            continue;
        };
        let stamp_hash = stamp_text
            .lines()
            .find_map(|l| l.strip_prefix("stamp_hash: "))
            .map(str::to_owned);
        let expected = stamp_hash.as_deref().and_then(hex_to_20);
        let mut entries = Vec::new();
        if let Ok(list) = fs::read_dir(dir.join("entries")) {
            for e in list.flatten() {
                let Some(key) = parse_key_hex(&e.file_name().to_string_lossy()) else {
                    continue;
                };
                // An entry another process evicts between the listing and here is gone, not an
                // error of the scan (nor a corrupt entry, below).
                let meta = match e.metadata() {
                    Ok(meta) => meta,
                    Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                    Err(err) => return Err(err),
                };
                let age = meta
                    .modified()
                    .ok()
                    .and_then(|t| SystemTime::now().duration_since(t).ok())
                    .unwrap_or_default();
                let check = match (fs::read(e.path()), expected) {
                    (Err(err), _) if err.kind() == io::ErrorKind::NotFound => continue,
                    (Ok(bytes), Some(stamp)) => {
                        format::decode(&bytes, &stamp, Some(&key)).map(|_| ())
                    }
                    (Ok(_), None) => Err(EntryError::ForeignStamp),
                    (Err(_), _) => Err(EntryError::TruncatedHeader(0)),
                };
                entries.push(EntryInfo {
                    key,
                    path: e.path(),
                    size: meta.len(),
                    age,
                    check,
                });
            }
        }
        entries.sort_by_key(|e| e.key);
        let temporary_files = fs::read_dir(dir.join("tmp")).map_or(0, |l| l.count());
        stores.push(StoreInfo {
            dir,
            stamp_hash,
            stamp_text,
            entries,
            temporary_files,
        });
    }
    stores.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(stores)
}

/// Deletes every store under `root` (the browser's "clear cache"); returns the entries removed.
pub fn clear(root: &Path) -> io::Result<usize> {
    let mut removed = 0;
    for store in scan(root)? {
        removed += store.entries.len();
        fs::remove_dir_all(&store.dir)?;
    }
    Ok(removed)
}

/// Milliseconds since the epoch, for callers printing ages.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
