//! `gpusvc program-cache list|verify|stats|clear` (hidden alias: `gpusvc cache ...`): the program
//! cache's disk folder seen from outside a cache, through `program_cache::disk::inspect`
//! (read-only except `clear`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Subcommand;
use program_cache::DiskConfig;
use program_cache::disk::inspect::{self, ClearError, EntryInfo, StoreInfo};

/// `--dir`: the folder the commands work on.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub(crate) struct FolderArgs {
    /// The cache folder. Default: $XDG_CACHE_HOME/gpusvc (else ~/.cache/gpusvc).
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

/// `clear`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub(crate) struct ClearArgs {
    #[command(flatten)]
    pub(crate) folder: FolderArgs,
    /// Delete stores a running cache is using (it recreates its folder and reports it).
    #[arg(long)]
    pub(crate) force: bool,
}

/// The hidden alias `gpusvc cache [--dir DIR] list|verify|stats|clear` (the folder before or
/// after the command).
#[derive(Debug, clap::Args)]
pub(crate) struct CacheArgs {
    /// The cache folder. Default: $XDG_CACHE_HOME/gpusvc (else ~/.cache/gpusvc).
    #[arg(long, value_name = "DIR", global = true)]
    pub(crate) dir: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: CacheCommand,
}

/// One folder command (see `ProgramCacheCommand` for what each does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub(crate) enum CacheCommand {
    /// Every entry and store of the folder.
    List,
    /// Checks every entry and store fully.
    Verify,
    /// Stores, entries, bytes and temporary files.
    Stats,
    /// Deletes every store in the folder.
    Clear {
        /// Delete stores a running cache is using.
        #[arg(long)]
        force: bool,
    },
}

/// Exit status of `gpusvc program-cache verify` and `gpusvc program-cache stats` when an entry
/// is corrupt or a store is damaged.
pub(crate) const EXIT_CORRUPT: u8 = 4;

/// Why a `gpusvc program-cache list|verify|stats|clear` command could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheError {
    /// The folder does not exist.
    #[error(
        "no cache folder at {0} (nothing has been cached there yet; pass --dir DIR for another)"
    )]
    Missing(PathBuf),
    /// The path is not a folder.
    #[error("{0} is not a folder")]
    NotAFolder(PathBuf),
    /// Reading or deleting failed.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// No folder was named and there is no default (neither XDG_CACHE_HOME nor HOME is set).
    #[error(
        "no cache folder: neither XDG_CACHE_HOME nor HOME is set to an absolute path; pass --dir DIR"
    )]
    NoDefault,
    /// `clear` found stores a running cache uses.
    #[error(
        "refusing to clear: {0}; nothing was deleted (close the program using it, or pass --force)"
    )]
    InUse(String),
    /// Writing to stdout failed.
    #[error("writing the report: {0}")]
    Output(#[from] std::io::Error),
}

impl CacheError {
    /// True when stdout was closed by its reader (`gpusvc program-cache list | head`).
    pub(crate) fn is_broken_pipe(&self) -> bool {
        matches!(self, CacheError::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// What a command found: `Corrupt` makes the process exit with [`EXIT_CORRUPT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    Corrupt,
}

fn scan(root: &Path) -> Result<Vec<StoreInfo>, CacheError> {
    check_root(root)?;
    inspect::scan(root).map_err(|e| CacheError::Io(root.to_path_buf(), e))
}

/// The folder exists and is a folder.
fn check_root(root: &Path) -> Result<(), CacheError> {
    match std::fs::metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(CacheError::Missing(root.to_path_buf()))
        }
        Err(e) => Err(CacheError::Io(root.to_path_buf(), e)),
        Ok(m) if !m.is_dir() => Err(CacheError::NotAFolder(root.to_path_buf())),
        Ok(_) => Ok(()),
    }
}

/// `5s`, `3m 20s`, `2h 5m`, `4d 3h`.
pub(crate) fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {:02}h", s / 86400, s % 86400 / 3600),
    }
}

/// `1234 B`, `12.1 KiB`, `3.4 MiB`.
pub(crate) fn bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}

fn stamp_field<'a>(store: &'a StoreInfo, field: &str) -> &'a str {
    store
        .stamp_text
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(": "))
        .unwrap_or("?")
}

fn store_name(store: &StoreInfo) -> String {
    store.dir.file_name().map_or_else(
        || store.dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The stamp an entry's header names (first 8 bytes, the form of a store folder's name), or
/// that its header cannot be read.
fn entry_stamp(entry: &EntryInfo) -> String {
    entry
        .header_stamp
        .clone()
        .unwrap_or_else(|| "no readable header".into())
}

fn store_header(out: &mut impl std::io::Write, store: &StoreInfo) -> std::io::Result<()> {
    let host = match stamp_field(store, "host_product") {
        "?" => stamp_field(store, "host_build_id").to_owned(),
        product => format!("{product} {}", stamp_field(store, "host_version")),
    };
    writeln!(
        out,
        "store {} ({}): {} entries, {} ({} on disk), {} temporary files{}; stamp: {} | {} | {} | host {}",
        store_name(store),
        store.dir.display(),
        store.entries.len(),
        bytes(store.bytes()),
        bytes(store.allocated),
        store.temporary_files,
        if store.in_use { ", in use" } else { "" },
        stamp_field(store, "gl_vendor"),
        stamp_field(store, "gl_renderer"),
        stamp_field(store, "gl_version"),
        host,
    )?;
    if let Some(why) = &store.damage {
        writeln!(out, "  DAMAGED store: {why}")?;
    }
    if let Some(why) = &store.entries_error {
        writeln!(out, "  DAMAGED store: {why}")?;
    }
    Ok(())
}

fn list(root: &Path, out: &mut impl std::io::Write) -> Result<Outcome, CacheError> {
    let stores = scan(root)?;
    if stores.is_empty() {
        writeln!(
            out,
            "{}: no stores (no folder in it is a cache store)",
            root.display()
        )?;
    }
    for store in &stores {
        store_header(out, store)?;
        writeln!(out, "  {:<40} {:>10} {:>9}  stamp", "key", "size", "age")?;
        for e in &store.entries {
            let mut stamp = entry_stamp(e);
            if e.check.is_err() {
                stamp.push_str(" (corrupt: run `gpusvc program-cache verify`)");
            }
            writeln!(
                out,
                "  {:<40} {:>10} {:>9}  {stamp}",
                e.key.to_hex(),
                bytes(e.size),
                age(e.age)
            )?;
        }
    }
    Ok(Outcome::Ok)
}

fn verify(root: &Path, out: &mut impl std::io::Write) -> Result<Outcome, CacheError> {
    let stores = scan(root)?;
    let mut checked = 0;
    let mut corrupt = 0;
    let mut damaged = 0;
    for store in &stores {
        checked += store.entries.len();
        for why in store.damage.iter().chain(&store.entries_error) {
            damaged += 1;
            writeln!(out, "damaged store: {}: {why}", store.dir.display())?;
        }
        for e in store.corrupt() {
            corrupt += 1;
            let why = e.check.as_ref().err().map(ToString::to_string);
            writeln!(
                out,
                "corrupt: {}: {}",
                e.path.display(),
                why.unwrap_or_default()
            )?;
        }
    }
    writeln!(
        out,
        "{}: {} stores ({damaged} damaged), {checked} entries checked (header, stamp, \
         checksums, decode), {corrupt} corrupt",
        root.display(),
        stores.len()
    )?;
    Ok(if corrupt > 0 || damaged > 0 {
        Outcome::Corrupt
    } else {
        Outcome::Ok
    })
}

fn stats(root: &Path, out: &mut impl std::io::Write) -> Result<Outcome, CacheError> {
    let stores = scan(root)?;
    for store in &stores {
        store_header(out, store)?;
    }
    let entries: usize = stores.iter().map(|s| s.entries.len()).sum();
    let total: u64 = stores.iter().map(StoreInfo::bytes).sum();
    let tmp: usize = stores.iter().map(|s| s.temporary_files).sum();
    let corrupt: usize = stores.iter().map(|s| s.corrupt().count()).sum();
    let allocated: u64 = stores.iter().map(|s| s.allocated).sum();
    let damaged = stores.iter().filter(|s| s.is_damaged()).count();
    writeln!(out, "folder:          {}", root.display())?;
    writeln!(out, "stores:          {} ({damaged} damaged)", stores.len())?;
    writeln!(out, "entries:         {entries}")?;
    writeln!(out, "bytes:           {total} ({})", bytes(total))?;
    writeln!(out, "on disk:         {allocated} ({})", bytes(allocated))?;
    writeln!(out, "temporary files: {tmp}")?;
    writeln!(out, "corrupt entries: {corrupt}")?;
    Ok(if corrupt > 0 || damaged > 0 {
        Outcome::Corrupt
    } else {
        Outcome::Ok
    })
}

fn clear(root: &Path, force: bool, out: &mut impl std::io::Write) -> Result<Outcome, CacheError> {
    check_root(root)?;
    let report = match inspect::clear(root, force) {
        Ok(report) => report,
        Err(ClearError::InUse(dirs)) => {
            let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            return Err(CacheError::InUse(format!(
                "{} store(s) in use by a running cache: {}",
                dirs.len(),
                list.join(", ")
            )));
        }
        Err(ClearError::Io(e)) => return Err(CacheError::Io(root.to_path_buf(), e)),
    };
    writeln!(
        out,
        "{}: removed {} stores, {} entries",
        root.display(),
        report.stores,
        report.entries
    )?;
    for dir in &report.kept_foreign_files {
        writeln!(
            out,
            "kept {}: it holds files that are not the cache's (the cache's own were removed)",
            dir.display()
        )?;
    }
    for dir in &report.in_use_left {
        writeln!(
            out,
            "left {}: a running cache started using it",
            dir.display()
        )?;
    }
    for (dir, why) in &report.unusable {
        writeln!(out, "left {}: {why}", dir.display())?;
    }
    for dir in &report.damaged_left {
        writeln!(
            out,
            "left {}: a damaged store (no valid STAMP), not provably the cache's; remove it by hand",
            dir.display()
        )?;
    }
    Ok(Outcome::Ok)
}

/// Runs one folder command on `dir` (default: [`DiskConfig::default_dir`]).
pub(crate) fn run(dir: Option<PathBuf>, command: CacheCommand) -> Result<Outcome, CacheError> {
    let root = dir
        .or_else(DiskConfig::default_dir)
        .ok_or(CacheError::NoDefault)?;
    let mut out = std::io::stdout().lock();
    let outcome = match command {
        CacheCommand::List => list(&root, &mut out),
        CacheCommand::Verify => verify(&root, &mut out),
        CacheCommand::Stats => stats(&root, &mut out),
        CacheCommand::Clear { force } => clear(&root, force, &mut out),
    }?;
    out.flush()?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_sizes_read_well() {
        assert_eq!(age(Duration::from_secs(5)), "5s");
        assert_eq!(age(Duration::from_secs(200)), "3m 20s");
        assert_eq!(age(Duration::from_secs(7500)), "2h 05m");
        assert_eq!(age(Duration::from_secs(4 * 86400 + 3 * 3600)), "4d 03h");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(2048), "2.0 KiB");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
    }
}
