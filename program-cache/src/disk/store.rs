//! The on-disk store of one stamp: directory layout, locking, publish, read, LRU metadata,
//! eviction. See `program-cache/FORMAT.md` for the protocol between processes.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::key::ProgramKey;
use crate::program::CachedProgram;

use super::format::{self, EntryError};
use super::stamp::CompatibilityStamp;

/// One record of `lru.log`: key + last-use time in ms.
const LOG_RECORD: usize = 28;
/// Temporary files older than this are left-overs of a crashed writer.
const STALE_TMP: Duration = Duration::from_secs(600);

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(crate) fn key_hex(key: &ProgramKey) -> String {
    key.to_hex()
}

pub(crate) fn parse_key_hex(name: &str) -> Option<ProgramKey> {
    if name.len() != 40 {
        return None;
    }
    let mut k = [0u8; 20];
    for (i, byte) in k.iter_mut().enumerate() {
        *byte = u8::from_str_radix(name.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(ProgramKey(k))
}

/// An entry file in the store.
#[derive(Debug, Clone)]
pub(crate) struct EntryFile {
    pub(crate) key: ProgramKey,
    pub(crate) path: PathBuf,
    pub(crate) size: u64,
    /// Last use (from `lru.log`) or publish time (the file's mtime), ms since the epoch.
    pub(crate) last_use_ms: u64,
}

/// Why reading an entry failed.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The file is gone or unreadable (another process evicted it, I/O error).
    Io(io::Error),
    /// The file is damaged or foreign; it has been deleted.
    Rejected(EntryError),
}

/// The directory of one stamp, held open by this process.
#[derive(Debug)]
pub(crate) struct StampDir {
    pub(crate) dir: PathBuf,
    entries: PathBuf,
    tmp: PathBuf,
    pub(crate) stamp_hash: [u8; 20],
    compress: bool,
    /// Held with a shared lock for as long as this process uses the directory, so another
    /// stamp's process never deletes it under us.
    _in_use: File,
}

/// Numbers temporary files. One counter for the whole process: two caches of one process on one
/// folder must never write the same temporary file (a per-cache counter let them truncate each
/// other's file, publish a torn entry and fail the second rename).
static TMP_NONCE: AtomicU64 = AtomicU64::new(0);

/// A temporary file name `<what>.<pid>.<n>`: the pid is always the second dot-separated part,
/// which is how [`StampDir::remove_stale_tmp`] finds files of dead processes.
fn tmp_name(what: &str) -> String {
    format!(
        "{what}.{}.{}",
        std::process::id(),
        TMP_NONCE.fetch_add(1, Ordering::Relaxed)
    )
}

fn lock_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence and permission; it sends nothing.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl StampDir {
    /// Opens (creating as needed) `<root>/<stamp dir>/` and deletes other stamps' directories
    /// that no live process uses.
    pub(crate) fn open(
        root: &Path,
        stamp: &CompatibilityStamp,
        compress: bool,
    ) -> io::Result<Self> {
        let dir = root.join(stamp.dir_name());
        let entries = dir.join("entries");
        let tmp = dir.join("tmp");
        fs::create_dir_all(&entries)?;
        fs::create_dir_all(&tmp)?;
        let in_use = lock_file(&dir.join("in-use.lock"))?;
        in_use.lock_shared()?;
        let stamp_file = dir.join("STAMP");
        if !stamp_file.exists() {
            let t = tmp.join(tmp_name("STAMP"));
            fs::write(&t, stamp.describe())?;
            fs::rename(&t, &stamp_file)?;
        }
        let this = StampDir {
            dir,
            entries,
            tmp,
            stamp_hash: stamp.hash(),
            compress,
            _in_use: in_use,
        };
        this.remove_other_stamps(root);
        this.remove_stale_tmp();
        Ok(this)
    }

    /// A driver or host update leaves the old stamp's directory behind: delete it unless a live
    /// process still holds it (its `in-use.lock` cannot be taken exclusively then).
    fn remove_other_stamps(&self, root: &Path) {
        let Ok(list) = fs::read_dir(root) else { return };
        for entry in list.flatten() {
            let path = entry.path();
            if path == self.dir || !path.join("STAMP").exists() {
                continue;
            }
            let Ok(lock) = lock_file(&path.join("in-use.lock")) else {
                continue;
            };
            if lock.try_lock().is_ok() {
                tracing::info!(dir = %path.display(), "removing the store of another stamp");
                let _ = fs::remove_dir_all(&path);
            }
        }
    }

    /// Deletes temporary files of writers that died mid-write.
    fn remove_stale_tmp(&self) {
        let Ok(list) = fs::read_dir(&self.tmp) else {
            return;
        };
        for entry in list.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let pid = name.split('.').nth(1).and_then(|p| p.parse::<i32>().ok());
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_TMP);
            if old || pid.is_some_and(|p| p != std::process::id() as i32 && !pid_alive(p)) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    pub(crate) fn entry_path(&self, key: &ProgramKey) -> PathBuf {
        self.entries.join(key_hex(key))
    }

    /// Writes an entry to a temporary file and publishes it with an atomic rename, unless an
    /// entry for the key exists already. Returns the bytes published (0 when it existed).
    pub(crate) fn publish(&self, key: &ProgramKey, program: &CachedProgram) -> io::Result<u64> {
        let target = self.entry_path(key);
        if target.exists() {
            return Ok(0);
        }
        let bytes = format::encode(key, program, &self.stamp_hash, now_ms(), self.compress);
        let tmp = self.tmp.join(tmp_name(&key_hex(key)));
        let result = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(&bytes)?;
            drop(f);
            // Shared: many publishers at once; an evictor (exclusive) never runs in between.
            let evict = lock_file(&self.dir.join("evict.lock"))?;
            evict.lock_shared()?;
            if self.entry_path(key).exists() {
                return Ok(0);
            }
            fs::rename(&tmp, &target)?;
            Ok(bytes.len() as u64)
        })();
        if !matches!(result, Ok(n) if n > 0) {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Reads and checks one entry; a damaged or foreign entry is deleted — only the very file
    /// that was read (same inode), never one another process published meanwhile.
    pub(crate) fn read(&self, key: &ProgramKey) -> Result<CachedProgram, ReadError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.entry_path(key);
        let mut bytes = Vec::new();
        let mut file = File::open(&path).map_err(ReadError::Io)?;
        let inode = file.metadata().map_err(ReadError::Io)?.ino();
        file.read_to_end(&mut bytes).map_err(ReadError::Io)?;
        match format::decode(&bytes, &self.stamp_hash, Some(key)) {
            Ok((_, program)) => Ok(program),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "rejected a damaged cache entry");
                if fs::metadata(&path).is_ok_and(|m| m.ino() == inode) {
                    let _ = fs::remove_file(&path);
                }
                Err(ReadError::Rejected(e))
            }
        }
    }

    /// Appends last-use records. Small `O_APPEND` writes are atomic against other appenders.
    pub(crate) fn record_uses(&self, uses: &[(ProgramKey, u64)]) -> io::Result<()> {
        if uses.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(uses.len() * LOG_RECORD);
        for (key, ms) in uses {
            buf.extend_from_slice(&key.0);
            buf.extend_from_slice(&ms.to_le_bytes());
        }
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("lru.log"))?;
        // One record per write call keeps each append atomic even if the batch is large.
        for record in buf.chunks(LOG_RECORD) {
            f.write_all(record)?;
        }
        Ok(())
    }

    fn read_uses(&self) -> HashMap<ProgramKey, u64> {
        let mut uses = HashMap::new();
        if let Ok(bytes) = fs::read(self.dir.join("lru.log")) {
            for r in bytes.chunks_exact(LOG_RECORD) {
                let key = ProgramKey(r[..20].try_into().expect("20 bytes"));
                let ms = u64::from_le_bytes(r[20..].try_into().expect("8 bytes"));
                let e = uses.entry(key).or_insert(0);
                *e = (*e).max(ms);
            }
        }
        uses
    }

    /// Marks programs as hot: they load first at startup.
    pub(crate) fn mark_hot(&self, keys: &[ProgramKey]) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("hot.list"))?;
        for k in keys {
            f.write_all(&k.0)?;
        }
        Ok(())
    }

    fn hot(&self) -> Vec<ProgramKey> {
        fs::read(self.dir.join("hot.list"))
            .map(|b| {
                b.chunks_exact(20)
                    .map(|c| ProgramKey(c.try_into().expect("20 bytes")))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every entry with its size and last use.
    pub(crate) fn list(&self) -> Vec<EntryFile> {
        let uses = self.read_uses();
        let Ok(list) = fs::read_dir(&self.entries) else {
            return Vec::new();
        };
        list.flatten()
            .filter_map(|e| {
                let key = parse_key_hex(&e.file_name().to_string_lossy())?;
                let meta = e.metadata().ok()?;
                let published = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_millis() as u64);
                Some(EntryFile {
                    key,
                    path: e.path(),
                    size: meta.len(),
                    last_use_ms: uses.get(&key).copied().unwrap_or(0).max(published),
                })
            })
            .collect()
    }

    /// Entries in load order: hot ones first (in the order they were marked, most recent mark
    /// first), then most recently used first.
    pub(crate) fn load_order(&self) -> Vec<EntryFile> {
        let mut list = self.list();
        list.sort_by_key(|e| std::cmp::Reverse(e.last_use_ms));
        let hot = self.hot();
        let rank: HashMap<ProgramKey, usize> =
            hot.iter().rev().enumerate().map(|(i, k)| (*k, i)).collect();
        list.sort_by_key(|e| rank.get(&e.key).copied().unwrap_or(usize::MAX));
        list
    }

    /// Total bytes of the entries.
    pub(crate) fn size(&self) -> u64 {
        self.list().iter().map(|e| e.size).sum()
    }

    /// Deletes least recently used entries until at most `limit` bytes remain; compacts the LRU
    /// log. Runs under the exclusive evict lock, so no publish happens in between. Returns
    /// (entries deleted, bytes freed).
    pub(crate) fn evict_to(&self, limit: u64) -> io::Result<(usize, u64)> {
        let evict = lock_file(&self.dir.join("evict.lock"))?;
        evict.lock()?;
        let mut list = self.list();
        let mut total: u64 = list.iter().map(|e| e.size).sum();
        list.sort_by_key(|e| e.last_use_ms);
        let (mut deleted, mut freed) = (0, 0);
        for e in &list {
            if total <= limit {
                break;
            }
            if fs::remove_file(&e.path).is_ok() {
                total -= e.size;
                freed += e.size;
                deleted += 1;
            }
        }
        // Compact the log: one record per remaining entry.
        let remaining: Vec<(ProgramKey, u64)> = self
            .list()
            .into_iter()
            .map(|e| (e.key, e.last_use_ms))
            .collect();
        // `lru.<pid>.<n>`: a name whose pid the next open can read (the former `lru.log.<pid>`
        // of a writer killed mid-eviction was never removed).
        let t = self.tmp.join(tmp_name("lru"));
        let mut buf = Vec::with_capacity(remaining.len() * LOG_RECORD);
        for (k, ms) in &remaining {
            buf.extend_from_slice(&k.0);
            buf.extend_from_slice(&ms.to_le_bytes());
        }
        fs::write(&t, &buf).and_then(|()| fs::rename(&t, self.dir.join("lru.log")))?;
        if limit == 0 {
            let _ = fs::remove_file(self.dir.join("hot.list"));
        }
        Ok((deleted, freed))
    }
}
