//! The model file `gpusvc vcache fit` writes and `--model @FILE` reads.
//!
//! A small text file, one `key value` pair per line, `#` lines are comments:
//!
//! ```text
//! # gpusvc vcache model file (written by `gpusvc vcache fit`)
//! model seg:1023/dm:256
//! exact yes
//! driver Mesa/X.org | llvmpipe (LLVM 15.0.6, 256 bits) | 4.5 (Core Profile) Mesa 22.3.6 | ...
//! date 2026-11-23
//! battery standard: 442 probes, 395664 indices; standard search space
//! runner-up seg:1022/dm:256 240 240
//! ```
//!
//! * `model`: the model's text form (what `--model` takes); required.
//! * `exact`: `yes` when it reproduced every measured count of the battery, else `no` (the best
//!   near miss was saved).
//! * `driver`, `date` (UTC, `YYYY-MM-DD`), `battery`: where, when and on what it was fitted.
//! * `also-exact TEXT`: other exact models (the fit lists them all; `model` is the first).
//!   (none on llvmpipe)
//! * `runner-up TEXT MISMATCHING TOTAL`: the best near misses, with their mismatching vertices
//!   and total count difference over the battery (`gpusvc vcache plot` draws them).
//!
//! Unknown keys are ignored (later versions may add some). A file whose first line that is not
//! a comment is a bare text form (`fifo:16`) is read as `model` that text.
//!
//! The default location is `$XDG_CACHE_HOME/gpusvc/vcache/model.txt`, else
//! `$HOME/.cache/gpusvc/vcache/model.txt` ([`default_path`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use vertex_cache::Model;

use super::VcacheError;

/// What a model file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModelFile {
    pub(crate) model: Model,
    pub(crate) exact: Option<bool>,
    pub(crate) driver: Option<String>,
    pub(crate) date: Option<String>,
    pub(crate) battery: Option<String>,
    pub(crate) also_exact: Vec<Model>,
    /// (model, mismatching vertices, total difference).
    pub(crate) runners_up: Vec<(Model, u64, u64)>,
}

/// `$XDG_CACHE_HOME/gpusvc/vcache/model.txt`, else `$HOME/.cache/gpusvc/vcache/model.txt`;
/// `None` with neither set (never a path relative to the current directory).
pub(crate) fn default_path() -> Option<PathBuf> {
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    let base = std::env::var_os("XDG_CACHE_HOME")
        .and_then(abs)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(abs)
                .map(|h| h.join(".cache"))
        })?;
    Some(base.join("gpusvc/vcache/model.txt"))
}

/// Today's date in UTC as `YYYY-MM-DD`.
pub(crate) fn today_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Hinnant's civil-from-days).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

impl ModelFile {
    /// A file for `model` alone.
    pub(crate) fn new(model: Model) -> Self {
        ModelFile {
            model,
            exact: None,
            driver: None,
            date: None,
            battery: None,
            also_exact: Vec::new(),
            runners_up: Vec::new(),
        }
    }

    /// The file's text.
    pub(crate) fn render(&self) -> String {
        let mut s = String::from(
            "# gpusvc vcache model file (written by `gpusvc vcache fit`; `--model @FILE` reads it)\n",
        );
        let _ = writeln!(s, "model {}", self.model);
        if let Some(e) = self.exact {
            let _ = writeln!(s, "exact {}", if e { "yes" } else { "no" });
        }
        let one_line = |v: &str| v.replace(['\n', '\r'], " ");
        for (key, value) in [
            ("driver", &self.driver),
            ("date", &self.date),
            ("battery", &self.battery),
        ] {
            if let Some(v) = value {
                let _ = writeln!(s, "{key} {}", one_line(v));
            }
        }
        for m in &self.also_exact {
            let _ = writeln!(s, "also-exact {m}");
        }
        for (m, mismatching, total) in &self.runners_up {
            let _ = writeln!(s, "runner-up {m} {mismatching} {total}");
        }
        s
    }

    /// Parses a model file's text; `path` names it in errors.
    pub(crate) fn parse(text: &str, path: &Path) -> Result<Self, VcacheError> {
        let bad = |line: usize, what: String| {
            VcacheError::Other(format!("{} line {line}: {what}", path.display()))
        };
        let model_of = |line: usize, t: &str| {
            t.parse::<Model>()
                .map_err(|e| bad(line, format!("{t:?} is not a cache model: {e}")))
        };
        let mut file: Option<ModelFile> = None;
        let mut rest = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let n = n + 1;
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            let value = value.trim();
            if key == "model" {
                if file.is_some() {
                    return Err(bad(n, "a second `model` line".into()));
                }
                file = Some(ModelFile::new(model_of(n, value)?));
            } else if file.is_none() && rest.is_empty() && value.is_empty() {
                // A bare text form.
                file = Some(ModelFile::new(model_of(n, key)?));
            } else {
                rest.push((n, key, value));
            }
        }
        let Some(mut file) = file else {
            return Err(VcacheError::Other(format!(
                "{}: not a model file (no `model` line)",
                path.display()
            )));
        };
        for (n, key, value) in rest {
            match key {
                "exact" => file.exact = Some(value == "yes"),
                "driver" => file.driver = Some(value.to_owned()),
                "date" => file.date = Some(value.to_owned()),
                "battery" => file.battery = Some(value.to_owned()),
                "also-exact" => file.also_exact.push(model_of(n, value)?),
                "runner-up" => {
                    let parts: Vec<&str> = value.split_whitespace().collect();
                    let num = |s: &str| {
                        s.parse::<u64>()
                            .map_err(|_| bad(n, format!("runner-up count {s:?} is not a number")))
                    };
                    match parts[..] {
                        [m, a, b] => file.runners_up.push((model_of(n, m)?, num(a)?, num(b)?)),
                        _ => return Err(bad(n, "runner-up needs MODEL MISMATCHING TOTAL".into())),
                    }
                }
                _ => {}
            }
        }
        Ok(file)
    }

    /// Reads a model file.
    /// Only a regular file of at most 1 MiB is read; the open does not block (a FIFO is
    /// refused, not waited on).
    pub(crate) fn read(path: &Path) -> Result<Self, VcacheError> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        const LIMIT: u64 = 1 << 20;
        let fail = |e: String| {
            VcacheError::Other(format!("cannot read model file {}: {e}", path.display()))
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(0o4000) // O_NONBLOCK
            .open(path)
            .map_err(|e| fail(e.to_string()))?;
        let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
        if !meta.is_file() {
            return Err(fail("not a regular file".into()));
        }
        let mut text = String::new();
        file.take(LIMIT + 1)
            .read_to_string(&mut text)
            .map_err(|e| fail(e.to_string()))?;
        if text.len() as u64 > LIMIT {
            return Err(fail(format!("larger than {LIMIT} bytes")));
        }
        Self::parse(&text, path)
    }

    /// Writes the file (creating its folder), through a temporary file renamed over it.
    pub(crate) fn write(&self, path: &Path) -> Result<(), VcacheError> {
        let fail =
            |e: std::io::Error| VcacheError::Other(format!("cannot write {}: {e}", path.display()));
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(dir).map_err(fail)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
        std::io::Write::write_all(&mut tmp, self.render().as_bytes()).map_err(fail)?;
        tmp.persist(path).map_err(|e| fail(e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_file_round_trips_and_a_bare_text_form_reads() {
        let mut f = ModelFile::new("fifo:16".parse().unwrap());
        f.exact = Some(true);
        f.driver = Some("llvmpipe\nsecond line".into());
        f.date = Some("2026-11-23".into());
        f.battery = Some("reduced: 3 probes".into());
        f.also_exact = vec!["lru:16".parse().unwrap()];
        f.runners_up = vec![("fifo:15".parse().unwrap(), 3, 4)];
        let text = f.render();
        let back = ModelFile::parse(&text, Path::new("m")).unwrap();
        assert_eq!(back.driver.as_deref(), Some("llvmpipe second line"));
        f.driver = back.driver.clone();
        assert_eq!(back, f);
        let bare = ModelFile::parse("# c\n\nbatch:32,32,32\n", Path::new("m")).unwrap();
        assert_eq!(bare.model.to_string(), "batch:32,32,32");
        for bad in [
            "",
            "# only\n",
            "model nope:3\n",
            "model fifo:1\nmodel fifo:2\n",
        ] {
            assert!(ModelFile::parse(bad, Path::new("m")).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_415), (2025, 11, 23));
    }
}
