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

/// One record of `lru.log`: key (20) + last-use time in ms (8) + CRC32C of those 28 bytes (4).
const LOG_RECORD: usize = 32;
/// One record of `hot.list`: key (20) + CRC32C of it (4).
const HOT_RECORD: usize = 24;

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
/// Temporary files older than this are left-overs of a crashed writer.
const STALE_TMP: Duration = Duration::from_secs(600);
/// Another stamp's store unused this long is deleted.
pub(crate) const UNUSED_STORE_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

fn hex20(b: &[u8; 20]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

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
        use std::os::unix::fs::MetadataExt;
        let dir = root.join(stamp.dir_name());
        let entries = dir.join("entries");
        let tmp = dir.join("tmp");
        // Another stamp's process may delete this folder between our create and our lock (it
        // took the lock exclusively first): then the locked file is no longer the one at the
        // path, and we start again.
        let mut attempts = 0;
        let in_use = loop {
            fs::create_dir_all(&entries)?;
            fs::create_dir_all(&tmp)?;
            let lock_path = dir.join("in-use.lock");
            let in_use = lock_file(&lock_path)?;
            in_use.lock_shared()?;
            let same = fs::metadata(&lock_path)
                .is_ok_and(|m| m.ino() == in_use.metadata().map_or(0, |l| l.ino()));
            attempts += 1;
            if same || attempts >= 5 {
                break in_use;
            }
        };
        // The lock file's mtime is the store's last use, for the age rule in
        // `remove_other_stamps`.
        let _ = in_use.set_modified(SystemTime::now());
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
        this.remove_other_stamps(root, &hex20(&stamp.device_hash()));
        this.remove_stale_tmp();
        Ok(this)
    }

    /// Garbage-collects other stamps' folders that no live process holds (their `in-use.lock`
    /// cannot be taken exclusively then):
    /// * the same device and kind of context under another stamp (same `device_hash`): a driver
    ///   or host update made it stale — deleted now;
    /// * any other stamp (another GPU, another profile, another host) unused for
    ///   [`UNUSED_STORE_AGE`] — deleted; recently used ones are kept, so two kinds of context on
    ///   one folder do not wipe each other.
    fn remove_other_stamps(&self, root: &Path, device_hash: &str) {
        let Ok(list) = fs::read_dir(root) else { return };
        for entry in list.flatten() {
            let path = entry.path();
            if path == self.dir {
                continue;
            }
            let Ok(stamp_text) = fs::read_to_string(path.join("STAMP")) else {
                continue;
            };
            let same_device = stamp_text
                .lines()
                .any(|l| l.strip_prefix("device_hash: ") == Some(device_hash));
            let lock_path = path.join("in-use.lock");
            let unused_for = fs::metadata(&lock_path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .unwrap_or(UNUSED_STORE_AGE);
            if !same_device && unused_for < UNUSED_STORE_AGE {
                continue;
            }
            let Ok(lock) = lock_file(&lock_path) else {
                continue;
            };
            if lock.try_lock().is_ok() {
                tracing::info!(dir = %path.display(), same_device, "removing a stale store");
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
            // A hard link publishes atomically and never replaces: when another process
            // published the key first, it fails with EEXIST and its entry stays as it is.
            match fs::hard_link(&tmp, &target) {
                Ok(()) => Ok(bytes.len() as u64),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(0),
                Err(e) => Err(e),
            }
        })();
        let _ = fs::remove_file(&tmp);
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
            put_record(&mut buf, &[&key.0[..], &ms.to_le_bytes()].concat());
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
            for r in records(&bytes, LOG_RECORD) {
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
            let mut record = Vec::with_capacity(HOT_RECORD);
            put_record(&mut record, &k.0);
            f.write_all(&record)?;
        }
        Ok(())
    }

    fn hot(&self) -> Vec<ProgramKey> {
        fs::read(self.dir.join("hot.list"))
            .map(|b| {
                records(&b, HOT_RECORD)
                    .into_iter()
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
            put_record(&mut buf, &[&k.0[..], &ms.to_le_bytes()].concat());
        }
        fs::write(&t, &buf).and_then(|()| fs::rename(&t, self.dir.join("lru.log")))?;
        if limit == 0 {
            let _ = fs::remove_file(self.dir.join("hot.list"));
        }
        Ok((deleted, freed))
    }
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
}
