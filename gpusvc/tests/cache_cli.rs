//! `gpusvc cache list|verify|stats|clear`, run as a user would on a folder populated by a real
//! `ProgramCache` disk store (synthetic programs: no GL needed).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use program_cache::disk::inspect;
use program_cache::{
    CacheConfig, CachedProgram, CompatibilityStamp, DiskConfig, DriverIdentity, ProgramBinaryData,
    ProgramCache, ProgramKey, ShaderHash, ShaderVariables,
};
use test_support::cli::{self, text};

fn gpusvc(args: &[&str], env: &[(&str, &Path)]) -> Output {
    cli::run(env!("CARGO_BIN_EXE_gpusvc"), args, env)
}

fn stamp() -> CompatibilityStamp {
    let driver = DriverIdentity {
        gl_vendor: "Test vendor".into(),
        gl_renderer: "test renderer".into(),
        gl_version: "4.5 test".into(),
        context: "OpenGL core profile".into(),
        ..DriverIdentity::default()
    };
    CompatibilityStamp::new(driver, "gpusvc cli tests", "1")
}

fn program(n: u8) -> CachedProgram {
    CachedProgram {
        vertex_shader: ShaderHash([n; 20]),
        fragment_shader: ShaderHash([n.wrapping_add(100); 20]),
        vertex: ShaderVariables::default(),
        fragment: ShaderVariables::default(),
        binary: ProgramBinaryData {
            format: 0xB1,
            bytes: (0..400u32).map(|i| (i as u8) ^ n).collect(),
        },
        ..Default::default()
    }
}

/// Saves `n` programs through a disk-backed cache in `dir`; returns their keys.
fn populate(dir: &Path, n: u8) -> Vec<ProgramKey> {
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 20))
        .disk(DiskConfig::new(dir, stamp()))
        .build();
    cache
        .wait_until_loaded(Duration::from_secs(10))
        .expect("the (empty) startup load finishes");
    let keys: Vec<ProgramKey> = (1..=n).map(|i| ProgramKey([i; 20])).collect();
    for (i, key) in (1..=n).zip(&keys) {
        cache.save(*key, program(i), None).expect("saved");
    }
    cache.flush_disk();
    assert_eq!(cache.disk_counters().unwrap().writes, u64::from(n));
    keys
}

fn entry_files(dir: &Path) -> Vec<PathBuf> {
    inspect::scan(dir)
        .unwrap()
        .into_iter()
        .flat_map(|s| s.entries.into_iter().map(|e| e.path))
        .collect()
}

#[test]
fn list_shows_every_entry_under_its_store() {
    let dir = tempfile::tempdir().unwrap();
    let keys = populate(dir.path(), 5);
    let d = dir.path().to_str().unwrap();
    let output = gpusvc(&["cache", "list", "--dir", d], &[]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let store = stamp().dir_name();
    let headers: Vec<&str> = stdout.lines().filter(|l| l.starts_with("store ")).collect();
    assert_eq!(headers.len(), 1, "{stdout}");
    assert!(
        headers[0].starts_with(&format!("store {store} ")),
        "{stdout}"
    );
    assert!(headers[0].contains("5 entries"), "{stdout}");
    assert!(headers[0].contains("test renderer"), "{stdout}");
    for key in &keys {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&key.to_hex()))
            .unwrap_or_else(|| panic!("no line for {key} in\n{stdout}"));
        // key, size, age, and the stamp the entry's header names: its store's.
        assert!(line.trim_end().ends_with(&store), "{line}");
        assert!(line.contains(" B ") || line.contains("KiB"), "{line}");
        assert!(line.contains('s'), "age in {line}");
    }
}

#[test]
fn stats_counts_stores_entries_bytes_and_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 4);
    let on_disk: u64 = entry_files(dir.path())
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    // A left-over temporary file, as a crashed writer leaves one.
    let tmp = dir.path().join(stamp().dir_name()).join("tmp/leftover.1.0");
    std::fs::write(&tmp, b"partial").unwrap();
    let output = gpusvc(
        &["cache", "--dir", dir.path().to_str().unwrap(), "stats"],
        &[],
    );
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let value = |label: &str| -> String {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label} in\n{stdout}"))
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(value("stores:"), "1");
    assert_eq!(value("entries:"), "4");
    assert_eq!(value("bytes:"), on_disk.to_string());
    assert_eq!(value("temporary files:"), "1");
    assert_eq!(value("corrupt entries:"), "0");
}

#[test]
fn verify_passes_on_a_good_folder_and_names_a_damaged_entry() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 3);
    let d = dir.path().to_str().unwrap();
    let good = gpusvc(&["cache", "verify", "--dir", d], &[]);
    let (stdout, stderr) = text(&good);
    assert!(good.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("3 entries checked"), "{stdout}");
    assert!(stdout.contains("0 corrupt"), "{stdout}");

    // Flip one byte of one entry's payload.
    let victim = entry_files(dir.path()).remove(1);
    let mut bytes = std::fs::read(&victim).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x5a;
    std::fs::write(&victim, &bytes).unwrap();

    let bad = gpusvc(&["cache", "verify", "--dir", d], &[]);
    let (stdout, stderr) = text(&bad);
    assert_eq!(bad.status.code(), Some(4), "{stdout}\n{stderr}");
    let corrupt: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("corrupt: "))
        .collect();
    assert_eq!(corrupt.len(), 1, "{stdout}");
    assert!(
        corrupt[0].contains(victim.to_str().unwrap()),
        "names the file: {stdout}"
    );
    assert!(corrupt[0].contains("checksum"), "says why: {stdout}");
    assert!(stdout.contains("1 corrupt"), "{stdout}");
    // Verify is read-only: the damaged entry is still there for a human to look at.
    assert!(victim.exists());
    // list flags it too.
    let list = gpusvc(&["cache", "list", "--dir", d], &[]);
    assert!(text(&list).0.contains("corrupt"), "{}", text(&list).0);
}

#[test]
fn clear_empties_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 3);
    let d = dir.path().to_str().unwrap();
    let output = gpusvc(&["cache", "clear", "--dir", d], &[]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("removed 1 stores, 3 entries"), "{stdout}");
    assert!(inspect::scan(dir.path()).unwrap().is_empty());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let stats = gpusvc(&["cache", "stats", "--dir", d], &[]);
    assert!(
        text(&stats).0.contains("entries:         0"),
        "{}",
        text(&stats).0
    );
    // A new cache on the cleared folder starts empty and works.
    populate(dir.path(), 1);
    assert_eq!(entry_files(dir.path()).len(), 1);
}

#[test]
fn a_missing_folder_gets_a_clear_message_and_status_1() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("never-created");
    for command in ["list", "verify", "stats", "clear"] {
        let output = gpusvc(&["cache", command, "--dir", missing.to_str().unwrap()], &[]);
        let (stdout, stderr) = text(&output);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{command}: {stdout}\n{stderr}"
        );
        assert!(stdout.is_empty(), "{command}: {stdout}");
        assert!(
            stderr.contains(&format!("no cache folder at {}", missing.display())),
            "{command}: {stderr}"
        );
    }
    assert!(!missing.exists(), "nothing creates the folder");
    // A file where the folder should be.
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let output = gpusvc(&["cache", "stats", "--dir", file.to_str().unwrap()], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output).1.contains("is not a folder"),
        "{}",
        text(&output).1
    );
}

#[test]
fn the_default_folder_is_under_xdg_cache_home() {
    let home = tempfile::tempdir().unwrap();
    populate(&home.path().join("gpusvc"), 2);
    let output = gpusvc(&["cache", "stats"], &[("XDG_CACHE_HOME", home.path())]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!(
            "folder:          {}",
            home.path().join("gpusvc").display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("entries:         2"), "{stdout}");
}

/// Runs `gpusvc` with a time limit: a hang is a test failure, not a stuck suite.
fn gpusvc_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpusvc"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gpusvc runs");
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("gpusvc {args:?} did not finish within {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_damaged_stamp_is_reported_not_hidden() {
    for damage in ["missing", "garbage"] {
        let dir = tempfile::tempdir().unwrap();
        populate(dir.path(), 3);
        let stamp_file = dir.path().join(stamp().dir_name()).join("STAMP");
        match damage {
            "missing" => std::fs::remove_file(&stamp_file).unwrap(),
            _ => std::fs::write(&stamp_file, "not a stamp\n").unwrap(),
        }
        let d = dir.path().to_str().unwrap();
        let list = gpusvc(&["cache", "list", "--dir", d], &[]);
        let (stdout, _) = text(&list);
        assert!(!stdout.contains("no stores"), "{damage}: {stdout}");
        assert!(stdout.contains("DAMAGED store"), "{damage}: {stdout}");
        assert!(stdout.contains("3 entries"), "{damage}: {stdout}");
        let verify = gpusvc(&["cache", "verify", "--dir", d], &[]);
        let (stdout, _) = text(&verify);
        assert_eq!(verify.status.code(), Some(4), "{damage}: {stdout}");
        assert!(stdout.contains("damaged store"), "{damage}: {stdout}");
        let stats = gpusvc(&["cache", "stats", "--dir", d], &[]);
        let (stdout, _) = text(&stats);
        assert_eq!(stats.status.code(), Some(4), "{damage}: {stdout}");
        assert!(stdout.contains("entries:         3"), "{damage}: {stdout}");
    }
}

#[test]
fn an_unreadable_entries_folder_is_reported_not_counted_as_empty() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 2);
    let entries = dir.path().join(stamp().dir_name()).join("entries");
    std::fs::remove_dir_all(&entries).unwrap();
    std::fs::write(&entries, "a file where the entries folder belongs").unwrap();
    let d = dir.path().to_str().unwrap();
    let verify = gpusvc(&["cache", "verify", "--dir", d], &[]);
    let (stdout, _) = text(&verify);
    assert_eq!(verify.status.code(), Some(4), "{stdout}");
    assert!(stdout.contains("entries/ cannot be listed"), "{stdout}");
}

#[test]
fn clear_refuses_a_store_in_use_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ProgramCache::builder(CacheConfig::with_budget(1 << 20))
        .disk(DiskConfig::new(dir.path(), stamp()))
        .build();
    cache.wait_until_loaded(Duration::from_secs(10)).unwrap();
    for i in 1..=4u8 {
        cache.save(ProgramKey([i; 20]), program(i), None).unwrap();
    }
    cache.flush_disk();
    let d = dir.path().to_str().unwrap();
    let refused = gpusvc(&["cache", "clear", "--dir", d], &[]);
    let (stdout, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("in use") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(entry_files(dir.path()).len(), 4, "nothing was deleted");
    let forced = gpusvc(&["cache", "clear", "--force", "--dir", d], &[]);
    let (stdout, stderr) = text(&forced);
    assert!(forced.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("removed 1 stores, 4 entries"), "{stdout}");
    // The running cache recreates its folder and goes on writing, without a flood of errors.
    for i in 5..=40u8 {
        cache.save(ProgramKey([i; 20]), program(i), None).unwrap();
    }
    cache.flush_disk();
    let c = cache.disk_counters().unwrap();
    assert_eq!((c.recreated, c.write_errors), (1, 0), "{c:?}");
    assert_eq!(entry_files(dir.path()).len(), 36);
}

#[test]
fn clear_never_touches_folders_that_are_not_stores() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 2);
    let user = dir.path().join("my-project");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(user.join("STAMP"), "x").unwrap();
    std::fs::write(user.join("main.c"), "int main;").unwrap();
    let lookalike = dir.path().join("00000000deadbeef");
    std::fs::create_dir_all(lookalike.join("entries")).unwrap();
    std::fs::write(lookalike.join("STAMP"), "gl_vendor: x\n").unwrap();
    let d = dir.path().to_str().unwrap();
    let out = gpusvc(&["cache", "clear", "--dir", d], &[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("removed 1 stores, 2 entries"), "{stdout}");
    assert!(
        stdout.contains("00000000deadbeef"),
        "the damaged look-alike is named: {stdout}"
    );
    assert!(user.join("STAMP").exists() && user.join("main.c").exists());
    assert!(lookalike.join("STAMP").exists());
}

#[test]
fn fifos_in_the_folder_never_hang_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path(), 2);
    let store = dir.path().join(stamp().dir_name());
    for path in [
        store.join("entries").join("ab".repeat(20)),
        store.join("lru.log"),
    ] {
        let _ = std::fs::remove_file(&path);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }
    let d = dir.path().to_str().unwrap();
    for cmd in ["list", "verify", "stats"] {
        let out = gpusvc_within(&["cache", cmd, "--dir", d], Duration::from_secs(30));
        let (stdout, _) = text(&out);
        if cmd == "verify" {
            assert_eq!(out.status.code(), Some(4), "{stdout}");
            assert!(stdout.contains("FIFO"), "{stdout}");
        }
    }
    // Also with a FIFO as STAMP.
    let stamp_file = store.join("STAMP");
    std::fs::remove_file(&stamp_file).unwrap();
    let c = std::ffi::CString::new(stamp_file.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = gpusvc_within(&["cache", "verify", "--dir", d], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(4));
    gpusvc_within(
        &["cache", "clear", "--force", "--dir", d],
        Duration::from_secs(30),
    );
}

#[test]
fn with_no_home_there_is_no_default_folder() {
    let cwd = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpusvc"))
        .args(["cache", "stats"])
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .current_dir(cwd.path())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("neither XDG_CACHE_HOME nor HOME"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0);
}
