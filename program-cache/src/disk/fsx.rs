//! File-system primitives of the disk store, all relative to directory descriptors the store
//! opened itself, so a planted symbolic link, FIFO or device in the cache folder is never
//! followed, opened for I/O or waited on:
//! * every open is `O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`, and a file is used only when `fstat`
//!   says it is a regular file ([`NotRegular`] otherwise) — a FIFO opened non-blocking returns at
//!   once and is then refused;
//! * directories are opened `O_DIRECTORY | O_NOFOLLOW` and created `0700`;
//! * every read is bounded by the caller's limit, checked against `fstat` *before* allocating;
//! * locks are `flock` tries that never block ([`try_flock`]); waiting, where there is any, is
//!   the caller's bounded retry loop on a background thread.

use std::ffi::CStr;
use std::io::{self, Read as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, Stat};

/// A name that exists but is not of the type the store expects there (a FIFO, device, folder
/// or symbolic link where a regular file belongs, or anything but a folder where a folder
/// belongs): it is never read, written or entered.
#[derive(Debug)]
pub(crate) struct NotRegular {
    pub(crate) name: String,
    pub(crate) found: &'static str,
    pub(crate) expected: &'static str,
}

impl std::fmt::Display for NotRegular {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is a {} where a {} was expected (never followed or opened)",
            self.name, self.found, self.expected
        )
    }
}
impl std::error::Error for NotRegular {}

fn not_regular(name: &str, found: &'static str, expected: &'static str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        NotRegular {
            name: name.to_owned(),
            found,
            expected,
        },
    )
}

/// True when `e` says the path is not of the expected type (see [`NotRegular`]).
pub(crate) fn is_not_regular(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<NotRegular>())
}

/// The type found at `name` in `dir`, for messages.
fn found_at(dir: BorrowedFd<'_>, name: &str) -> &'static str {
    lstat(dir, name).map_or("file of unknown type", |st| type_name(file_type(&st)))
}

/// A name for the file type, for messages.
pub(crate) fn type_name(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "unknown file type",
    }
}

const FILE_FLAGS: OFlags = OFlags::NOFOLLOW
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NOCTTY);

fn check_regular(fd: OwnedFd, name: &str) -> io::Result<(OwnedFd, Stat)> {
    let st = rustix::fs::fstat(&fd)?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Ok((fd, st)),
        other => Err(not_regular(name, type_name(other), "regular file")),
    }
}

/// Refuses, before any open, a name that exists and is not a regular file: opening a device
/// node would already call its driver, and a FIFO or link is never ours. (The open's own
/// `O_NOFOLLOW` and `fstat` checks still cover a name swapped in between.)
fn refuse_special(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    match lstat(dir, name) {
        Ok(st) if file_type(&st) != FileType::RegularFile => {
            Err(not_regular(name, type_name(file_type(&st)), "regular file"))
        }
        _ => Ok(()),
    }
}

/// Opens an existing regular file for reading (never a link, never blocking on a FIFO).
pub(crate) fn open_read(dir: BorrowedFd<'_>, name: &str) -> io::Result<(OwnedFd, Stat)> {
    refuse_special(dir, name)?;
    let fd = match rustix::fs::openat(dir, name, OFlags::RDONLY | FILE_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        // O_NOFOLLOW on a symbolic link.
        Err(rustix::io::Errno::LOOP) => {
            return Err(not_regular(name, "symbolic link", "regular file"));
        }
        Err(e) => return Err(e.into()),
    };
    check_regular(fd, name)
}

/// [`open_read`] for a name the caller has just seen as a regular file (its listing's `d_type`
/// or `lstat`), without looking it up once more first: one `openat` (`O_NOFOLLOW |
/// O_NONBLOCK`) and one `fstat`. A name swapped for anything else in between is still refused
/// by those two (a link fails the open, a FIFO opens without blocking and fails the `fstat`
/// check, and nothing is read from it).
pub(crate) fn open_listed(dir: BorrowedFd<'_>, name: &str) -> io::Result<(OwnedFd, Stat)> {
    let fd = match rustix::fs::openat(dir, name, OFlags::RDONLY | FILE_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) => {
            return Err(not_regular(name, "symbolic link", "regular file"));
        }
        Err(e) => return Err(e.into()),
    };
    check_regular(fd, name)
}

/// Reads the first `len` bytes of a file with `pread` straight on its descriptor (usually one
/// call): never more than `len`, fewer only when the file is shorter now.
pub(crate) fn read_prefix(fd: &OwnedFd, len: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let want = len - out.len();
        let at = out.len() as u64;
        let spare = &mut out.spare_capacity_mut()[..want];
        let (read, _) = match rustix::io::pread(fd, spare, at) {
            Ok(r) => r,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let n = read.len();
        if n == 0 {
            break;
        }
        // SAFETY: `pread` initialized the first `n` bytes of the spare capacity (the slice it
        // returns is exactly those bytes), and `out.len() + n <= len <= capacity`.
        unsafe { out.set_len(out.len() + n) };
    }
    Ok(out)
}

/// Reads exactly the first `len` bytes of a file into a shared buffer with `pread` straight on
/// its descriptor (usually one call): never more than `len`; `UnexpectedEof` when the file is
/// shorter now. The buffer is the one allocation: the memory cache holds it as it is.
pub(crate) fn read_shared(fd: &OwnedFd, len: usize) -> io::Result<std::sync::Arc<[u8]>> {
    read_shared_at(fd, len, 0)
}

/// [`read_shared`] of the `len` bytes at `offset`.
pub(crate) fn read_shared_at(
    fd: &OwnedFd,
    len: usize,
    offset: u64,
) -> io::Result<std::sync::Arc<[u8]>> {
    let mut buf = std::sync::Arc::<[u8]>::new_uninit_slice(len);
    let slot = std::sync::Arc::get_mut(&mut buf).expect("not shared yet");
    let mut filled = 0;
    while filled < len {
        let at = offset + filled as u64;
        let (read, _) = match rustix::io::pread(fd, &mut slot[filled..], at) {
            Ok(r) => r,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        if read.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{filled} bytes where {len} were expected"),
            ));
        }
        filled += read.len();
    }
    // SAFETY: every one of the `len` bytes was written by `pread` above (`filled == len`).
    Ok(unsafe { buf.assume_init() })
}

/// Opens (creating `0600` when missing) a regular file for reading and writing; `append` adds
/// `O_APPEND`. Never follows a link, never blocks on a FIFO.
pub(crate) fn open_rw(dir: BorrowedFd<'_>, name: &str, append: bool) -> io::Result<OwnedFd> {
    refuse_special(dir, name)?;
    let mut flags = OFlags::RDWR | OFlags::CREATE | FILE_FLAGS;
    if append {
        flags |= OFlags::APPEND;
    }
    let fd = match rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o600)) {
        Ok(fd) => fd,
        // O_CREAT | O_NOFOLLOW on a link (dangling or not) gives ELOOP.
        Err(rustix::io::Errno::LOOP) => {
            return Err(not_regular(name, "symbolic link", "regular file"));
        }
        Err(e) => return Err(e.into()),
    };
    let (fd, st) = check_regular(fd, name)?;
    // A second name for the file (a hard link planted to a file elsewhere) would make our
    // writes land in it: our side files only ever have one.
    if st.st_nlink > 1 {
        return Err(not_regular(
            name,
            "file with several hard links",
            "regular file",
        ));
    }
    Ok(fd)
}

/// Creates a new file `0600` (fails when the name exists, whatever it is).
pub(crate) fn create_new(dir: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | FILE_FLAGS;
    Ok(rustix::fs::openat(
        dir,
        name,
        flags,
        Mode::from_raw_mode(0o600),
    )?)
}

/// Reads a whole regular file of at most `max` bytes (the size from `fstat` is checked before
/// anything is allocated; a file that grows meanwhile is read only up to `max`).
pub(crate) fn read_bounded(fd: &OwnedFd, st: &Stat, max: u64) -> io::Result<Vec<u8>> {
    let len = st.st_size.max(0) as u64;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{len} bytes, more than the {max} allowed"),
        ));
    }
    let mut out = Vec::with_capacity(len as usize);
    std::fs::File::from(fd.try_clone()?)
        .take(max)
        .read_to_end(&mut out)?;
    Ok(out)
}

/// Reads exactly `buf.len()` bytes at `offset` with `pread` straight on the descriptor;
/// `UnexpectedEof` when the file ends first.
pub(crate) fn pread_exact(fd: &OwnedFd, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::io::pread(fd, &mut buf[filled..], offset + filled as u64) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{filled} bytes where {} were expected", buf.len()),
                ));
            }
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Writes all of `bytes` (a short write on a full disk is an error).
pub(crate) fn write_all(fd: &OwnedFd, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    std::fs::File::from(fd.try_clone()?).write_all(bytes)
}

/// Creates a directory `0700`; an existing one is fine (whatever it is: [`open_dir`] checks).
/// Returns whether it was created now.
pub(crate) fn mkdir(dir: BorrowedFd<'_>, name: &str) -> io::Result<bool> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700)) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::EXIST) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// True when the folder is ours to use: owned by this process's effective user and not
/// writable by the group or others (another user could otherwise plant binaries in it).
pub(crate) fn check_private_dir(fd: &OwnedFd, name: &str) -> io::Result<()> {
    let st = rustix::fs::fstat(fd)?;
    let euid = rustix::process::geteuid().as_raw();
    if st.st_uid != euid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{name} belongs to uid {}, not to this process (uid {euid}): not used",
                st.st_uid
            ),
        ));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{name} is writable by other users (mode {:o}): not used",
                st.st_mode & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Opens a directory, never through a symbolic link.
pub(crate) fn open_dir(dir: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    match rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(fd),
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
            Err(not_regular(name, found_at(dir, name), "folder"))
        }
        Err(e) => Err(e.into()),
    }
}

/// Opens a path given by the host as the cache folder (the host's own choice may be a link).
pub(crate) fn open_root(path: &std::path::Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// `lstat` relative to `dir`.
pub(crate) fn lstat(dir: BorrowedFd<'_>, name: &str) -> io::Result<Stat> {
    Ok(rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?)
}

/// The file type of a `stat`.
pub(crate) fn file_type(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode)
}

/// Bytes a file takes on disk: its allocated blocks, and never less than its length (a file
/// system that stores small files inline reports no blocks for them).
pub(crate) fn allocated(st: &Stat) -> u64 {
    (st.st_blocks.max(0) as u64 * 512).max(st.st_size.max(0) as u64)
}

/// Unlinks a file (or link, FIFO, ...) named `name` in `dir`.
pub(crate) fn unlink(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?)
}

/// Removes an empty directory named `name` in `dir`.
pub(crate) fn rmdir(dir: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?)
}

/// Renames within or between directories (a link at the target is replaced, never followed).
pub(crate) fn rename(
    from_dir: BorrowedFd<'_>,
    from: &str,
    to_dir: BorrowedFd<'_>,
    to: &str,
) -> io::Result<()> {
    Ok(rustix::fs::renameat(from_dir, from, to_dir, to)?)
}

/// Hard-links `from` as `to` (never replacing: `EEXIST` when `to` exists; a link at `from` is
/// linked itself, not followed).
pub(crate) fn link(
    from_dir: BorrowedFd<'_>,
    from: &str,
    to_dir: BorrowedFd<'_>,
    to: &str,
) -> io::Result<()> {
    Ok(rustix::fs::linkat(
        from_dir,
        from,
        to_dir,
        to,
        AtFlags::empty(),
    )?)
}

/// Sets a file's modification (and access) time to `ms` since the epoch, through its fd.
pub(crate) fn set_mtime_ms(fd: &OwnedFd, ms: u64) -> io::Result<()> {
    let t = rustix::fs::Timespec {
        tv_sec: (ms / 1000) as i64,
        tv_nsec: ((ms % 1000) * 1_000_000) as _,
    };
    Ok(rustix::fs::futimens(
        fd,
        &rustix::fs::Timestamps {
            last_access: t,
            last_modification: t,
        },
    )?)
}

/// Modification time of a `stat` in ms since the epoch (0 for times before it).
pub(crate) fn mtime_ms(st: &Stat) -> u64 {
    let s = st.st_mtime;
    if s < 0 {
        return 0;
    }
    (s as u64)
        .saturating_mul(1000)
        .saturating_add(st.st_mtime_nsec / 1_000_000)
}

/// One directory entry: its name (UTF-8 names only; others are not ours). Its type is read
/// with [`lstat`] by the caller, at the time it acts on it.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) name: String,
}

/// Lists a directory (without `.` and `..`). Names that are not UTF-8 are never ours and are
/// skipped. At most `max` entries are returned (a bound against a folder flooded by others).
pub(crate) fn list(dir: BorrowedFd<'_>, max: usize) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    let d = rustix::fs::Dir::read_from(dir)?;
    for e in d {
        let e = e?;
        let name: &CStr = e.file_name();
        let Ok(name) = name.to_str() else { continue };
        if name == "." || name == ".." {
            continue;
        }
        out.push(Entry {
            name: name.to_owned(),
        });
        if out.len() >= max {
            break;
        }
    }
    Ok(out)
}

/// Lists a directory as [`list`] does, keeping what `keep` makes of each name (its bytes and
/// the type the listing reports: `d_type`, [`FileType::Unknown`] on file systems that do not
/// fill it; and its inode number, `d_ino`) instead of the names themselves: no `String` per name. At most `max` names are
/// looked at. What is kept goes to `emit` in chunks of `chunk` items (the last one may be
/// shorter) as the listing goes, so a caller can act on the first names while the rest are
/// being listed; chunks emitted before an error stand (the error is returned after the last
/// partial chunk). Callers that act on a name
/// check its type again then ([`lstat`], or the `fstat` of [`open_listed`]).
pub(crate) fn list_chunks<T>(
    dir: BorrowedFd<'_>,
    max: usize,
    chunk: usize,
    mut keep: impl FnMut(&[u8], FileType, u64) -> Option<T>,
    mut emit: impl FnMut(Vec<T>),
) -> io::Result<()> {
    let chunk = chunk.max(1);
    let mut out = Vec::with_capacity(chunk);
    let d = rustix::fs::Dir::read_from(dir)?;
    let mut result = Ok(());
    for (seen, e) in d.enumerate() {
        if seen >= max {
            break;
        }
        let e = match e {
            Ok(e) => e,
            Err(e) => {
                result = Err(e.into());
                break;
            }
        };
        if let Some(t) = keep(e.file_name().to_bytes(), e.file_type(), e.ino()) {
            out.push(t);
            if out.len() == chunk {
                emit(std::mem::replace(&mut out, Vec::with_capacity(chunk)));
            }
        }
    }
    if !out.is_empty() {
        emit(out);
    }
    result
}

/// Tries a `flock` without ever blocking: `Ok(false)` when another open file description holds
/// a conflicting lock.
pub(crate) fn try_flock(fd: &OwnedFd, exclusive: bool) -> io::Result<bool> {
    let op = if exclusive {
        FlockOperation::NonBlockingLockExclusive
    } else {
        FlockOperation::NonBlockingLockShared
    };
    match rustix::fs::flock(fd, op) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Releases a `flock`.
pub(crate) fn unflock(fd: &OwnedFd) {
    let _ = rustix::fs::flock(fd, FlockOperation::Unlock);
}

/// Tries [`try_flock`] until it succeeds or `limit` has passed, sleeping a little between tries
/// (for background threads only). `Ok(false)` on timeout.
pub(crate) fn flock_within(
    fd: &OwnedFd,
    exclusive: bool,
    limit: std::time::Duration,
) -> io::Result<bool> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        if try_flock(fd, exclusive)? {
            return Ok(true);
        }
        if start.elapsed() >= limit {
            return Ok(false);
        }
        std::thread::sleep(pause.min(limit.saturating_sub(start.elapsed())));
        pause = (pause * 2).min(std::time::Duration::from_millis(50));
    }
}

/// A borrowed fd, for the `*at` calls.
pub(crate) fn b(fd: &OwnedFd) -> BorrowedFd<'_> {
    fd.as_fd()
}
