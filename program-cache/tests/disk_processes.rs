//! The disk store across processes: what one process writes another reads, a writer killed at
//! any moment never leaves a wrong or damaged entry, two processes share a folder, and a
//! read-only folder degrades to memory-only.
//!
//! Child processes re-run this test executable (`std::env::current_exe()`) with
//! `--exact child --ignored`; the environment variable `GPUSVC_DISK_CHILD` names what the child
//! does (`corpus-save`, `corpus-load`, `write-loop`, `concurrent`, `read-only`) and the other
//! `GPUSVC_DISK_*` variables give it its folder, its arguments and the file it reports to. Each GL
//! child opens its own context through `test_support::gl`, which points
//! `MESA_SHADER_CACHE_DIR` at a fresh folder of that process: the parent's is removed from the
//! child's environment, so no binary can come from Mesa's own cache of an earlier process.
//!
//! * [`programs_saved_by_one_process_link_from_disk_in_another`] — the round trip on the real
//!   driver: a child compiles the built-in corpus (`gpusvc-corpus`) and, when
//!   `target/corpora/piglit` is present, a sample of piglit programs through `ProgramManager` +
//!   `GlBackend` with a disk-backed cache and flushes; a second, fresh child loads the store
//!   (`disk_counters().loaded` = every saved program) and links every program that linked in the
//!   first as a `LinkOrigin::CacheHit` with the same reflection.
//! * [`a_writer_killed_at_random_moments_never_leaves_a_wrong_entry`] — a child saving distinct
//!   programs in a loop (synthetic binaries of 256 B to 48 KiB, LZ4 on in every other child, a
//!   2 MiB disk budget so eviction and `lru.log` rewrites run too, last-use records and hot marks)
//!   is killed with SIGKILL at a random moment, 60 times. After every kill every entry in the
//!   folder decodes to exactly the program saved under its key, and `inspect::scan` reports no
//!   corrupt entry; temporary files the kill left are counted, and the next child's open must
//!   have removed every temporary file of the dead processes.
//! * [`two_processes_share_a_folder`] — two children save distinct programs (and record uses)
//!   into one folder for 10 s while each keeps opening a second cache on the folder that loads
//!   what both wrote (and checks every program it loaded); every save a child saw flushed is
//!   present and intact at the end.
//! * [`a_read_only_folder_degrades_to_memory_only`] — see its documentation for what read-only
//!   means there.
//! * [`two_caches_of_one_process_publish_the_same_keys`] and
//!   [`scanning_while_a_writer_evicts_reports_no_corruption`] — in-process races found while
//!   writing the above: colliding temporary files, and `inspect::scan` failing on an entry
//!   evicted under it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use corpus::{Dialect, ProgramSource, builtin, dedup_sources, load_dir, spread};
use headless_gl::{ApiPreference, ContextOptions, GlApi, GlContext, ShaderStage};
use program_cache::disk::{self, inspect};
use program_cache::{
    CacheConfig, CachedProgram, CompatibilityStamp, DiskConfig, GlBackend, LinkOrigin,
    ProgramBinaryData, ProgramCache, ProgramKey, ProgramManager, ProgramOptions, Shader,
    ShaderHash, ShaderVariables, VariableInfo,
};
use test_support::gl::{context_or_skip, open_or_skip};
use test_support::mount;
use test_support::rng::Rng;

const ROLE: &str = "GPUSVC_DISK_CHILD";
const DIR: &str = "GPUSVC_DISK_DIR";
const OUT: &str = "GPUSVC_DISK_OUT";
const READY: &str = "GPUSVC_DISK_READY";
const ARG: &str = "GPUSVC_DISK_ARG";
const COMPRESS: &str = "GPUSVC_DISK_COMPRESS";

/// Piglit programs the round trip tries besides the built-in corpus (evenly spread).
const PIGLIT_SAMPLE: usize = 150;
/// SIGKILLs of the write loop.
const KILLS: usize = 60;
/// Disk budget of the write loop: small, so eviction passes (and `lru.log` rewrites) run often.
const KILL_LOOP_DISK_BUDGET: u64 = 768 << 10;
/// How long the two processes share a folder.
const CONCURRENT_FOR: Duration = Duration::from_secs(10);
/// Keys of the concurrent test start here (a smaller binary size class).
const CONCURRENT_BASE: u64 = 1 << 40;

// ---------------------------------------------------------------------------------------------
// Children

/// The child side of every test here; started by the tests with `GPUSVC_DISK_CHILD` set. Run on
/// its own (`--ignored`) it has nothing to do and says so.
#[test]
#[ignore = "a child process of the other tests in this file"]
fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        eprintln!("child: {ROLE} is not set; this test only runs as a child of the others");
        return;
    };
    match role.as_str() {
        "corpus-save" | "corpus-load" => corpus_child(),
        "write-loop" => write_loop_child(),
        "concurrent" => concurrent_child(),
        "read-only" => read_only_child(),
        other => panic!("unknown child role {other:?}"),
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("child: {name} is not set"))
}

fn out_file() -> File {
    File::options()
        .create(true)
        .append(true)
        .open(env(OUT))
        .expect("child: report file")
}

fn signal_ready() {
    fs::write(env(READY), b"ready").expect("child: ready file");
}

/// The synthetic stamp of the tests without GL.
fn test_stamp() -> CompatibilityStamp {
    CompatibilityStamp {
        gl_vendor: "Test".into(),
        gl_renderer: "disk_processes".into(),
        gl_version: "1.0".into(),
        context: "OpenGL core profile".into(),
        vendor_id: Some(0x1234),
        device_id: Some(0x5678),
        driver_build_id: None,
        host_product: "tests".into(),
        host_version: "1".into(),
        format_version: disk::FORMAT_VERSION,
        pointer_width: 64,
    }
}

fn piglit_dir() -> PathBuf {
    match std::env::var_os("GPUSVC_PIGLIT_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/corpora/piglit/tests"),
    }
}

/// The round-trip corpus: built-in (in the context's dialect) plus a piglit sample when present.
/// Piglit needs a compatibility context (most of it feeds `gl_Vertex`); the built-in corpus
/// (`#version 330 core` or `300 es`) runs on either.
fn corpus_context(test: &str) -> Option<(GlContext, Vec<ProgramSource>)> {
    let piglit = piglit_dir().is_dir();
    let options = ContextOptions {
        api: if piglit {
            ApiPreference::DesktopCompatibility
        } else {
            ApiPreference::default()
        },
        ..ContextOptions::default()
    };
    let ctx = open_or_skip(test, &options)?;
    let dialect = match ctx.info().api {
        GlApi::DesktopCore => Dialect::DesktopCore330,
        GlApi::Gles => Dialect::Es300,
    };
    let mut programs = builtin(dialect);
    if piglit {
        let mut loaded = load_dir(&piglit_dir())
            .expect("piglit corpus loads")
            .programs;
        dedup_sources(&mut loaded);
        programs.extend(spread(&loaded, PIGLIT_SAMPLE));
    }
    Some((ctx, programs))
}

/// Compiles and links the corpus through a disk-backed cache (the first child saves it, the second
/// finds it on disk); one report line per program:
/// `name \t linked \t key \t origin \t saved \t reflection` or `name \t rejected-...`.
fn corpus_child() {
    let Some((ctx, programs)) = corpus_context("corpus child") else {
        writeln!(out_file(), "skip\tno GL context").unwrap();
        return;
    };
    let stamp = CompatibilityStamp::from_driver(ctx.info(), "disk_processes", "1");
    let cache = ProgramCache::builder(CacheConfig::with_budget(256 << 20))
        .disk(DiskConfig::new(env(DIR), stamp))
        .build();
    let report = cache
        .wait_until_loaded(Duration::from_secs(120))
        .expect("startup load finishes");
    let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), "disk_processes");
    let mut out = out_file();
    writeln!(out, "driver\t{}", ctx.info()).unwrap();
    for p in &programs {
        let mut vs = Shader::new(ShaderStage::Vertex, p.vertex.clone());
        let mut fs = Shader::new(ShaderStage::Fragment, p.fragment.clone());
        manager.compile(&mut vs).unwrap();
        manager.compile(&mut fs).unwrap();
        if !vs.compile_status() || !fs.compile_status() {
            writeln!(out, "{}\trejected-compile", p.name).unwrap();
            continue;
        }
        match manager.link(&mut vs, &mut fs, &ProgramOptions::default()) {
            Err(_) => writeln!(out, "{}\trejected-link", p.name).unwrap(),
            Ok(linked) => writeln!(
                out,
                "{}\tlinked\t{}\t{:?}\t{}\t{:?} {:?}",
                p.name,
                linked.key.to_hex(),
                linked.origin,
                cache.peek(&linked.key).is_some(),
                linked.attributes,
                linked.uniforms
            )
            .unwrap(),
        }
    }
    cache.flush_disk();
    let c = cache.disk_counters().unwrap();
    writeln!(
        out,
        "counters\tloaded={} rejected={} writes={} write_errors={} dropped={} \
         report_loaded={} driver_rejections={}",
        c.loaded,
        c.rejected_entries,
        c.writes,
        c.write_errors,
        c.dropped_writes,
        report.loaded,
        cache.stats().counters.driver_rejections
    )
    .unwrap();
}

/// Saves distinct synthetic programs until killed.
fn write_loop_child() {
    let base: u64 = env(ARG).parse().unwrap();
    let mut config = DiskConfig::new(env(DIR), test_stamp());
    config.compress = env(COMPRESS) == "1";
    config.budget_bytes = Some(KILL_LOOP_DISK_BUDGET);
    let cache = ProgramCache::builder(CacheConfig::with_budget(64 << 20))
        .disk(config)
        .build();
    // The writer thread opens the store and removes dead writers' temporary files before it
    // serves its first job: after this flush, the open is complete.
    cache.flush_disk();
    signal_ready();
    for i in 0u64.. {
        let n = base + i;
        cache
            .save(synthetic_key(n), synthetic_program(n), None)
            .unwrap();
        if i % 3 == 2 {
            cache.load(&synthetic_key(n - 1), None);
        }
        if i % 16 == 5 {
            cache.mark_hot(&[synthetic_key(n)]);
        }
        if i % 4 == 3 {
            cache.flush_disk();
        }
    }
}

/// Saves for `CONCURRENT_FOR`, confirming each flushed batch in the report file, while opening a
/// second cache on the folder now and then that loads (and checks) what both processes wrote.
fn concurrent_child() {
    let tag: u64 = env(ARG).parse().unwrap();
    let dir = env(DIR);
    let mut config = DiskConfig::new(&dir, test_stamp());
    config.compress = env(COMPRESS) == "1";
    config.budget_bytes = Some(1 << 40);
    let cache = ProgramCache::builder(CacheConfig::with_budget(16 << 20))
        .disk(config.clone())
        .build();
    cache.wait_until_loaded(Duration::from_secs(60)).unwrap();
    let mut out = out_file();
    signal_ready();
    let start = Instant::now();
    let first = CONCURRENT_BASE + (tag << 32);
    let mut n = first;
    let (mut reader_opens, mut reader_loaded, mut reader_rejected, mut rounds) = (0, 0, 0, 0);
    let mut own_seen = 0;
    let mut other_seen = 0;
    while start.elapsed() < CONCURRENT_FOR {
        let batch = n;
        for _ in 0..8 {
            cache
                .save(synthetic_key(n), synthetic_program(n), None)
                .unwrap();
            cache.load(&synthetic_key(n), None);
            n += 1;
        }
        cache.flush_disk();
        writeln!(out, "saved\t{batch}\t{n}").unwrap();
        out.flush().unwrap();
        rounds += 1;
        if rounds % 6 == 0 {
            // A second cache: its startup load reads the newest entries of both processes.
            let reader = ProgramCache::builder(CacheConfig::with_budget(1 << 20))
                .disk(config.clone())
                .build();
            reader.wait_until_loaded(Duration::from_secs(60)).unwrap();
            for key in reader.eviction_order() {
                let number = key_number(&key).expect("only this test's keys are in the folder");
                let program = reader.peek(&key).unwrap();
                assert_eq!(
                    *program,
                    synthetic_program(number),
                    "reader loaded key {number}"
                );
                if number >> 32 == first >> 32 {
                    own_seen += 1;
                } else {
                    other_seen += 1;
                }
            }
            let c = reader.disk_counters().unwrap();
            reader_opens += 1;
            reader_loaded += c.loaded;
            reader_rejected += c.rejected_entries;
        }
    }
    let c = cache.disk_counters().unwrap();
    writeln!(
        out,
        "done\tsaves={} writes={} already={} dropped={} write_errors={} reader_opens={} \
         reader_loaded={} reader_rejected={} own_seen={} other_seen={}",
        n - first,
        c.writes,
        c.already_present,
        c.dropped_writes,
        c.write_errors,
        reader_opens,
        reader_loaded,
        reader_rejected,
        own_seen,
        other_seen
    )
    .unwrap();
}

/// Makes `GPUSVC_DISK_DIR` read-only for this process (`ARG` = `mount` or `nobody`, see
/// [`a_read_only_folder_degrades_to_memory_only`]), proves it is (creating a file fails), then
/// uses a disk-backed cache on it and reports what happened.
fn read_only_child() {
    let dir = PathBuf::from(env(DIR));
    let mut out = out_file();
    let how = env(ARG);
    let setup = match how.as_str() {
        "mount" => read_only_mount(&dir),
        "nobody" => become_nobody(),
        other => panic!("unknown read-only mode {other}"),
    };
    if let Err(why) = setup {
        writeln!(out, "unavailable\t{why}").unwrap();
        return;
    }
    if let Err(why) = fs::read_dir(&dir) {
        writeln!(out, "unavailable\tthe folder cannot be read: {why}").unwrap();
        return;
    }
    let probe = dir.join("probe");
    match File::create(&probe) {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            panic!("{} is writable after the {how} setup", dir.display());
        }
        Err(e) => writeln!(out, "write refused\t{e}").unwrap(),
    }
    let logged = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = logged.clone();
    let mut config = DiskConfig::new(&dir, test_stamp());
    config.log = Some(Arc::new(move |line: &str| {
        sink.lock().unwrap().push(line.into())
    }));
    let cache = ProgramCache::builder(CacheConfig::with_budget(4 << 20))
        .disk(config)
        .build();
    let report = cache.wait_until_loaded(Duration::from_secs(10)).unwrap();
    let mut in_memory = 0;
    for n in 1..=20 {
        cache
            .save(synthetic_key(n), synthetic_program(n), None)
            .unwrap();
        if cache.load(&synthetic_key(n), None).as_deref() == Some(&synthetic_program(n)) {
            in_memory += 1;
        }
    }
    cache.mark_hot(&[synthetic_key(1)]);
    cache.flush_disk();
    let c = cache.disk_counters().unwrap();
    let lines = logged.lock().unwrap().clone();
    writeln!(
        out,
        "result\tenabled={} in_memory={in_memory} loaded={} report_loaded={} writes={} \
         write_errors={} conditions={}",
        cache.disk_enabled(),
        c.loaded,
        report.loaded,
        c.writes,
        c.write_errors,
        lines.len()
    )
    .unwrap();
    for line in lines {
        writeln!(out, "condition\t{line}").unwrap();
    }
    if let Some(condition) = cache.disk_condition() {
        writeln!(out, "stats condition\t{condition}").unwrap();
    }
}

/// A private mount namespace in which `dir` is a read-only bind mount of itself.
fn read_only_mount(dir: &Path) -> Result<(), String> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let errno = || std::io::Error::last_os_error();
    let path = CString::new(dir.as_os_str().as_bytes()).unwrap();
    // For this thread and the threads it starts afterwards, which is every thread of the cache.
    mount::private_mount_namespace()?;
    // SAFETY: a valid NUL-terminated path that outlives the call; null type and data are allowed
    // for a bind mount of the folder onto itself.
    let r = unsafe {
        libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(format!("bind mount: {}", errno()));
    }
    // SAFETY: as above; remounts the bind mount read-only.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(format!("read-only remount: {}", errno()));
    }
    Ok(())
}

/// Drops root for the whole process: uid and gid 65534 (nobody), no supplementary groups.
fn become_nobody() -> Result<(), String> {
    let errno = || std::io::Error::last_os_error();
    // SAFETY: setgroups with a zero count reads no memory.
    if unsafe { libc::setgroups(0, std::ptr::null()) } != 0 {
        return Err(format!("setgroups: {}", errno()));
    }
    // SAFETY: plain system calls without pointers; glibc applies them to every thread.
    if unsafe { libc::setgid(65534) } != 0 {
        return Err(format!("setgid: {}", errno()));
    }
    // SAFETY: as above.
    if unsafe { libc::setuid(65534) } != 0 {
        return Err(format!("setuid: {}", errno()));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Synthetic programs: the content is a function of the number in the key, so any entry can be
// checked against what was saved under its key.

const KEY_TAG: [u8; 12] = *b"disk-process";

fn synthetic_key(n: u64) -> ProgramKey {
    let mut k = [0u8; 20];
    k[..8].copy_from_slice(&n.to_le_bytes());
    k[8..].copy_from_slice(&KEY_TAG);
    ProgramKey(k)
}

fn key_number(key: &ProgramKey) -> Option<u64> {
    (key.0[8..] == KEY_TAG).then(|| u64::from_le_bytes(key.0[..8].try_into().unwrap()))
}

fn synthetic_program(n: u64) -> CachedProgram {
    let mut rng = Rng::new(n);
    let max = if n >= CONCURRENT_BASE { 4096 } else { 16 << 10 };
    let len = 256 + rng.below(max) as usize;
    // Random bytes and runs, so LZ4 has something to do.
    let bytes = (0..len)
        .map(|i| {
            if (i / 64) % 2 == 0 {
                rng.next() as u8
            } else {
                n as u8
            }
        })
        .collect();
    let mut hash = |salt: u8| {
        let mut h = [salt; 20];
        h[..8].copy_from_slice(&rng.next().to_le_bytes());
        ShaderHash(h)
    };
    let (vertex_shader, fragment_shader) = (hash(1), hash(2));
    let variable = |prefix: &str| VariableInfo {
        name: format!("{prefix}_{n}"),
        mapped_name: format!("_u{n:x}"),
        gl_type: 0x8B50 + (n % 4) as u32,
        array_size: 1 + (n % 3) as i32,
        location: n.is_multiple_of(2).then_some((n % 16) as i32),
        ..Default::default()
    };
    CachedProgram {
        vertex_shader,
        fragment_shader,
        vertex: ShaderVariables {
            attributes: vec![variable("a_position")],
            uniforms: vec![variable("u_matrix")],
            ..Default::default()
        },
        fragment: ShaderVariables {
            attributes: Vec::new(),
            uniforms: vec![variable("u_tint"), variable("u_sampler")],
            ..Default::default()
        },
        binary: ProgramBinaryData {
            format: 0x875F,
            bytes,
        },
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------------------
// The parent side

/// A child process that is killed (SIGKILL) and reaped if the test ends before it does.
struct ChildProcess {
    child: Child,
    log: PathBuf,
}

impl ChildProcess {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits at most `limit` for the child to exit; kills it after that and panics.
    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("child ran over {limit:?}; its output:\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for a successful exit.
    fn succeed(&mut self, limit: Duration) {
        let status = self.wait(limit);
        assert!(
            status.success(),
            "child failed ({status}); its output:\n{}",
            self.output()
        );
    }

    /// SIGKILL (what std's `kill` sends on Unix); panics if the child had died another way.
    fn kill(&mut self) {
        use std::os::unix::process::ExitStatusExt;
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "the child ended before the kill ({status}):\n{}",
            self.output()
        );
    }

    fn output(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(60).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts this executable as a `role` child; its stdout and stderr go to `<work>/<name>.log`.
fn spawn(role: &str, name: &str, work: &Path, vars: &[(&str, String)]) -> ChildProcess {
    let log = work.join(format!("{name}.log"));
    let file = File::create(&log).unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        // Each GL child makes its own fresh Mesa shader cache folder.
        .env_remove("MESA_SHADER_CACHE_DIR")
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file);
    for (k, v) in vars {
        command.env(k, v);
    }
    ChildProcess {
        child: command.spawn().expect("the test executable starts again"),
        log,
    }
}

fn wait_for_file(path: &Path, child: &mut ChildProcess, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        if let Some(status) = child.child.try_wait().unwrap() {
            panic!(
                "child exited ({status}) before it was ready:\n{}",
                child.output()
            );
        }
        assert!(
            start.elapsed() < limit,
            "child not ready after {limit:?}:\n{}",
            child.output()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `key=value` pairs of a report line.
fn fields(line: &str) -> HashMap<String, u64> {
    line.split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

// ---- a. round trip on the real driver ----

#[derive(Debug, Default)]
struct CorpusRun {
    /// name -> (key, origin, saved, reflection) for linked programs.
    linked: BTreeMap<String, (String, String, bool, String)>,
    rejected: BTreeMap<String, String>,
    counters: HashMap<String, u64>,
    driver: String,
}

fn read_corpus_report(path: &Path) -> Option<CorpusRun> {
    let text = fs::read_to_string(path).unwrap();
    let mut run = CorpusRun::default();
    for line in text.lines() {
        let parts: Vec<&str> = line.split('\t').collect();
        match parts.as_slice() {
            ["skip", why] => {
                eprintln!("child skipped: {why}");
                return None;
            }
            ["driver", d] => run.driver = d.to_string(),
            ["counters", c] => run.counters = fields(c),
            [name, "linked", key, origin, saved, reflection] => {
                run.linked.insert(
                    name.to_string(),
                    (
                        key.to_string(),
                        origin.to_string(),
                        *saved == "true",
                        reflection.to_string(),
                    ),
                );
            }
            [name, outcome] => {
                run.rejected.insert(name.to_string(), outcome.to_string());
            }
            _ => panic!("bad report line {line:?}"),
        }
    }
    Some(run)
}

#[test]
fn programs_saved_by_one_process_link_from_disk_in_another() {
    const TEST: &str = "programs_saved_by_one_process_link_from_disk_in_another";
    // The parent only checks that there is a driver (and says which); the children do the work.
    let Some(ctx) = context_or_skip(TEST) else {
        return;
    };
    eprintln!("driver: {}", ctx.info());
    drop(ctx);
    let start = Instant::now();
    let work = tempfile::tempdir().unwrap();
    let cache_dir = work.path().join("cache");
    let run = |role: &str| {
        let out = work.path().join(format!("{role}.out"));
        let mut child = spawn(
            role,
            role,
            work.path(),
            &[
                (DIR, cache_dir.display().to_string()),
                (OUT, out.display().to_string()),
            ],
        );
        child.succeed(Duration::from_secs(300));
        read_corpus_report(&out)
    };
    let Some(save) = run("corpus-save") else {
        panic!("the parent has a GL context but the child could not make one");
    };
    let saved_entries = inspect::scan(&cache_dir).unwrap();
    let load = run("corpus-load").expect("second child has GL");

    let saved: Vec<&String> = save
        .linked
        .iter()
        .filter(|(_, v)| v.2)
        .map(|(k, _)| k)
        .collect();
    eprintln!(
        "round trip on {}: {} programs, {} linked and saved by the first process ({} rejected by \
         the driver), {} entries on disk; second process: {:?}; {:.1} s",
        save.driver,
        save.linked.len() + save.rejected.len(),
        saved.len(),
        save.rejected.len(),
        saved_entries[0].entries.len(),
        load.counters,
        start.elapsed().as_secs_f64()
    );
    assert_eq!(save.driver, load.driver);
    assert!(saved.len() >= 40, "only {} programs saved", saved.len());
    // Every saved program was written, and so was a failure record for each program the
    // driver refused (one per failed link, one per distinct failed shader).
    let written = save.counters["writes"];
    assert!(written >= saved.len() as u64 + u64::from(!save.rejected.is_empty()));
    assert!(written <= (saved.len() + 2 * save.rejected.len()) as u64);
    assert_eq!(save.counters["write_errors"], 0);
    assert_eq!(save.counters["dropped"], 0);
    assert_eq!(saved_entries.len(), 1);
    assert_eq!(saved_entries[0].entries.len() as u64, written);
    assert!(saved_entries[0].corrupt().next().is_none());
    for (name, (_, origin, _, _)) in &save.linked {
        assert_eq!(
            *origin,
            format!("{:?}", LinkOrigin::Linked),
            "{name}: the first process starts cold"
        );
    }

    // Everything written is loaded: the programs and the failure records.
    assert_eq!(load.counters["loaded"], written);
    assert_eq!(load.counters["report_loaded"], written);
    assert_eq!(load.counters["rejected"], 0);
    assert_eq!(load.counters["driver_rejections"], 0);
    assert_eq!(load.rejected, save.rejected, "the same programs fail");
    let mut failures = Vec::new();
    for (name, (key, _, was_saved, reflection)) in &save.linked {
        let Some((key2, origin2, _, reflection2)) = load.linked.get(name) else {
            failures.push(format!("{name}: did not link in the second process"));
            continue;
        };
        let expected = format!(
            "{:?}",
            if *was_saved {
                LinkOrigin::CacheHit
            } else {
                LinkOrigin::Linked
            }
        );
        if key2 != key || *origin2 != expected || reflection2 != reflection {
            failures.push(format!(
                "{name}: second process {origin2} (expected {expected}), same key {}, same \
                 reflection {}",
                key2 == key,
                reflection2 == reflection
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---- b. SIGKILL at random moments ----

/// The pid in a temporary file's name, `<what>.<pid>.<n>` (`what` = the key in hex, `STAMP` or
/// `lru`).
fn tmp_pid(name: &str) -> Option<u32> {
    name.split('.').nth(1)?.parse().ok()
}

fn tmp_files(store: &Path) -> Vec<String> {
    fs::read_dir(store.join("tmp"))
        .map(|l| {
            l.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Checks every entry of the (only) store under `root` against what was saved under its key
/// (no writer runs meanwhile); returns the numbers in the keys.
fn check_entries(root: &Path, stamp_hash: &[u8; 20], when: &str) -> Vec<u64> {
    let stores: Vec<PathBuf> = fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(stores.len(), 1, "{when}: one store: {stores:?}");
    let mut numbers = Vec::new();
    let Ok(list) = fs::read_dir(stores[0].join("entries")) else {
        return numbers;
    };
    for e in list {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let key = ProgramKey(
            (0..20)
                .map(|i| u8::from_str_radix(&name[2 * i..2 * i + 2], 16).unwrap())
                .collect::<Vec<u8>>()
                .try_into()
                .unwrap(),
        );
        let n = key_number(&key).expect("a key of this test");
        let bytes = fs::read(&path).unwrap();
        match disk::decode(&bytes, stamp_hash, Some(&key)) {
            Ok((_, program)) => assert!(
                program == synthetic_program(n),
                "{when}: entry {n} decodes to a WRONG program"
            ),
            Err(err) => panic!("{when}: entry {n} rejected: {err}"),
        }
        numbers.push(n);
    }
    numbers
}

#[test]
fn a_writer_killed_at_random_moments_never_leaves_a_wrong_entry() {
    let start = Instant::now();
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("cache");
    let stamp = test_stamp();
    let store = root.join(stamp.dir_name());
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut rng = Rng::new(seed);
    let mut dead: HashSet<u32> = HashSet::new();
    let (mut tmp_left, mut tmp_removed, mut early_kills, mut max_entries) = (0, 0, 0, 0);
    let mut seen: HashSet<u64> = HashSet::new();
    for k in 0..KILLS {
        let ready = work.path().join(format!("ready-{k}"));
        let before = tmp_files(&store)
            .iter()
            .filter(|f| tmp_pid(f).is_some_and(|p| dead.contains(&p)))
            .count();
        let mut child = spawn(
            "write-loop",
            "write-loop",
            work.path(),
            &[
                (DIR, root.display().to_string()),
                (READY, ready.display().to_string()),
                (ARG, (k as u64 * 1_000_000).to_string()),
                (COMPRESS, (k % 2).to_string()),
            ],
        );
        // One kill in eight lands at once (during start-up, the open or the startup load); the
        // others after the store is open, 0 to 80 ms into the write loop.
        if rng.below(8) == 0 {
            early_kills += 1;
            std::thread::sleep(Duration::from_micros(rng.below(5000)));
        } else {
            wait_for_file(&ready, &mut child, Duration::from_secs(30));
            // The open removed every temporary file of the processes killed before.
            let stale: Vec<String> = tmp_files(&store)
                .into_iter()
                .filter(|f| tmp_pid(f).is_some_and(|p| dead.contains(&p) && p != child.pid()))
                .collect();
            assert!(
                stale.is_empty(),
                "kill {k}: the open left temporary files of dead writers: {stale:?}"
            );
            tmp_removed += before;
            std::thread::sleep(Duration::from_micros(rng.below(80_000)));
        }
        let pid = child.pid();
        child.kill();
        dead.insert(pid);
        tmp_left += tmp_files(&store)
            .iter()
            .filter(|f| tmp_pid(f) == Some(pid))
            .count();
        if store.is_dir() {
            let numbers = check_entries(&root, &stamp.hash(), &format!("after kill {k}"));
            max_entries = max_entries.max(numbers.len());
            seen.extend(numbers);
        }
    }
    // A last open (this process) removes what the last kills left, and loads only intact
    // entries.
    let before = tmp_files(&store).len();
    let mut config = DiskConfig::new(&root, stamp.clone());
    config.budget_bytes = Some(KILL_LOOP_DISK_BUDGET);
    let cache = ProgramCache::builder(CacheConfig::with_budget(64 << 20))
        .disk(config)
        .build();
    let report = cache.wait_until_loaded(Duration::from_secs(30)).unwrap();
    // Dead writers' files go before the writer's first job.
    cache.flush_disk();
    assert_eq!(cache.disk_counters().unwrap().rejected_entries, 0);
    let after = tmp_files(&store);
    assert!(after.is_empty(), "temporary files left: {after:?}");
    tmp_removed += before;
    for key in cache.eviction_order() {
        let n = key_number(&key).unwrap();
        assert_eq!(*cache.peek(&key).unwrap(), synthetic_program(n));
    }
    drop(cache);
    let entries = check_entries(&root, &stamp.hash(), "at the end").len();
    let stores = inspect::scan(&root).unwrap();
    assert_eq!(stores.len(), 1);
    let corrupt: Vec<_> = stores[0]
        .corrupt()
        .map(|e| format!("{} {:?}", e.key, e.check))
        .collect();
    assert!(
        corrupt.is_empty(),
        "inspect::scan: corrupt entries {corrupt:?}"
    );
    assert_eq!(stores[0].entries.len(), entries);
    assert_eq!(stores[0].temporary_files, 0);
    eprintln!(
        "SIGKILL loop (seed {seed}): {KILLS} kills ({early_kills} during start-up), {} distinct \
         entries seen intact after kills (at most {max_entries} at once, {} KiB budget), \
         {tmp_left} temporary files left by kills, {tmp_removed} removed by the next open, 0 \
         corrupt or wrong; final open loaded {} entries, {entries} on disk; {:.1} s",
        seen.len(),
        KILL_LOOP_DISK_BUDGET >> 10,
        report.loaded,
        start.elapsed().as_secs_f64()
    );
    assert!(
        seen.len() >= KILLS,
        "the writers published too little to prove anything: {} entries",
        seen.len()
    );
}

// ---- c. two processes, one folder ----

#[test]
fn two_processes_share_a_folder() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("cache");
    let stamp = test_stamp();
    let outs: Vec<PathBuf> = (0..2)
        .map(|t| work.path().join(format!("concurrent-{t}.out")))
        .collect();
    let readies: Vec<PathBuf> = (0..2)
        .map(|t| work.path().join(format!("concurrent-{t}.ready")))
        .collect();
    let mut children: Vec<ChildProcess> = (0..2)
        .map(|t| {
            spawn(
                "concurrent",
                &format!("concurrent-{t}"),
                work.path(),
                &[
                    (DIR, root.display().to_string()),
                    (OUT, outs[t].display().to_string()),
                    (READY, readies[t].display().to_string()),
                    (ARG, t.to_string()),
                    (COMPRESS, (t % 2).to_string()),
                ],
            )
        })
        .collect();
    for (t, child) in children.iter_mut().enumerate() {
        wait_for_file(&readies[t], child, Duration::from_secs(60));
    }
    let start = Instant::now();
    for child in &mut children {
        child.succeed(CONCURRENT_FOR + Duration::from_secs(120));
    }
    let elapsed = start.elapsed();
    let mut confirmed: Vec<u64> = Vec::new();
    let mut summaries = Vec::new();
    for out in &outs {
        let text = fs::read_to_string(out).unwrap();
        let mut done = None;
        for line in text.lines() {
            let parts: Vec<&str> = line.split('\t').collect();
            match parts.as_slice() {
                ["saved", from, to] => {
                    confirmed.extend(from.parse::<u64>().unwrap()..to.parse::<u64>().unwrap())
                }
                ["done", rest] => done = Some(fields(rest)),
                _ => panic!("bad report line {line:?}"),
            }
        }
        summaries.push(done.expect("the child finished its report"));
    }
    let stores = inspect::scan(&root).unwrap();
    assert_eq!(stores.len(), 1);
    let on_disk: HashMap<ProgramKey, &inspect::EntryInfo> =
        stores[0].entries.iter().map(|e| (e.key, e)).collect();
    let mut missing = Vec::new();
    for &n in &confirmed {
        match on_disk.get(&synthetic_key(n)) {
            None => missing.push(n),
            Some(e) => {
                let bytes = fs::read(&e.path).unwrap();
                let (_, program) = disk::decode(&bytes, &stamp.hash(), Some(&e.key))
                    .unwrap_or_else(|err| panic!("entry {n} rejected: {err}"));
                assert!(
                    program == synthetic_program(n),
                    "entry {n} is a WRONG program"
                );
            }
        }
    }
    eprintln!(
        "two processes for {:.1} s: {} saves confirmed flushed, {} present and intact, {} \
         missing; {} entries on disk ({} bytes), corrupt {}; process 0 {:?}; process 1 {:?}",
        elapsed.as_secs_f64(),
        confirmed.len(),
        confirmed.len() - missing.len(),
        missing.len(),
        stores[0].entries.len(),
        stores[0].bytes(),
        stores[0].corrupt().count(),
        summaries[0],
        summaries[1]
    );
    assert!(missing.is_empty(), "flushed saves missing: {missing:?}");
    assert_eq!(stores[0].corrupt().count(), 0);
    assert_eq!(stores[0].entries.len(), confirmed.len());
    for s in &summaries {
        assert_eq!(s["writes"], s["saves"], "every save was written: {s:?}");
        assert_eq!(
            s["dropped"] + s["write_errors"] + s["reader_rejected"],
            0,
            "{s:?}"
        );
        assert!(s["reader_opens"] >= 3, "{s:?}");
        assert!(
            s["other_seen"] > 0,
            "readers saw the other process's entries: {s:?}"
        );
    }
}

// ---- d. read-only folder ----

/// A read-only folder degrades the cache to memory-only, reported exactly once.
///
/// We run as root, and permissions do not stop root, so "read-only" is made real in two ways,
/// each in a child process:
/// * `mount`: the child enters a private mount namespace (`unshare(CLONE_NEWNS)`, `/` made
///   `MS_PRIVATE` so nothing propagates back) and bind-mounts the folder onto itself with
///   `MS_RDONLY`: a read-only file system at that path, so every write fails with `EROFS`, root or
///   not. The mount disappears with the child.
/// * `nobody`: the child drops to uid/gid 65534 and the folder is mode 0555 (and its store's
///   files 0444): writes fail with `EACCES`. This needs the folder's parents to be searchable by
///   others (not so under `scripts/test`, whose `TMPDIR` is 0700); then this mode reports itself
///   unavailable.
///
/// Each mode runs on an empty folder and on a folder that holds a populated store. The child
/// first proves the folder is read-only (creating a file in it fails), then opens a disk-backed
/// cache: the disk layer must be off, saves and loads must work in memory, and exactly one
/// condition must be reported (log callback and `disk_condition`), after 20 saves, 20 loads, a hot
/// mark and a flush. The parent then checks that the populated store is unchanged. At least one
/// mode must run, or the test fails.
#[test]
fn a_read_only_folder_degrades_to_memory_only() {
    let work = tempfile::tempdir().unwrap();
    let mut ran = Vec::new();
    let mut unavailable = Vec::new();
    for mode in ["mount", "nobody"] {
        for populated in [false, true] {
            let base = work.path().join(format!("{mode}-{populated}"));
            let dir = base.join("cache");
            fs::create_dir_all(&dir).unwrap();
            let stamp = test_stamp();
            if populated {
                let cache = ProgramCache::builder(CacheConfig::with_budget(4 << 20))
                    .disk(DiskConfig::new(&dir, stamp.clone()))
                    .build();
                for n in 100..105 {
                    cache
                        .save(synthetic_key(n), synthetic_program(n), None)
                        .unwrap();
                }
                cache.flush_disk();
            }
            let snapshot = snapshot(&dir);
            if mode == "nobody" {
                use std::os::unix::fs::PermissionsExt;
                for path in [work.path(), base.as_path()] {
                    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
                }
                chmod_tree(&dir);
            }
            let out = base.join("child.out");
            let mut child = spawn(
                "read-only",
                &format!("read-only-{mode}-{populated}"),
                work.path(),
                &[
                    (DIR, dir.display().to_string()),
                    (OUT, out.display().to_string()),
                    (ARG, mode.to_string()),
                ],
            );
            child.succeed(Duration::from_secs(60));
            let text = fs::read_to_string(&out).unwrap();
            if let Some(why) = text.strip_prefix("unavailable\t") {
                unavailable.push(format!("{mode}: {}", why.trim()));
                continue;
            }
            let result = text
                .lines()
                .find_map(|l| l.strip_prefix("result\t"))
                .unwrap_or_else(|| panic!("no result from the child:\n{text}"));
            let r = fields(result);
            let conditions: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("condition\t"))
                .collect();
            let refused = text
                .lines()
                .find_map(|l| l.strip_prefix("write refused\t"))
                .unwrap_or("?");
            assert!(result.contains("enabled=false"), "{mode}: {text}");
            assert_eq!(r["in_memory"], 20, "{mode}: saves and loads work in memory");
            assert_eq!(
                (r["loaded"], r["writes"], r["write_errors"]),
                (0, 0, 0),
                "{mode}"
            );
            assert_eq!(
                r["conditions"], 1,
                "{mode}: exactly one condition: {conditions:?}"
            );
            assert!(conditions[0].contains("memory only"), "{conditions:?}");
            assert!(
                text.contains("stats condition\t"),
                "the condition is in the stats too"
            );
            assert_eq!(
                snapshot,
                self::snapshot(&dir),
                "{mode}: the folder is unchanged"
            );
            eprintln!(
                "read-only ({mode}, {} folder): creating a file failed with \"{refused}\"; \
                 memory-only, 20/20 saves+loads in memory, one condition: {}",
                if populated { "populated" } else { "empty" },
                conditions[0]
            );
            ran.push(mode);
        }
    }
    for u in &unavailable {
        eprintln!("read-only mode unavailable here: {u}");
    }
    assert!(
        !ran.is_empty(),
        "no way to make a read-only folder here: {unavailable:?}"
    );
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Folders 0555, files 0444.
fn chmod_tree(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            chmod_tree(&p);
        } else {
            fs::set_permissions(&p, fs::Permissions::from_mode(0o444)).unwrap();
        }
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).unwrap();
}

// ---- two caches of one process on one folder ----

/// Two caches of one process on one folder publish the same keys at the same moments: their
/// temporary files must not collide (a collision publishes a torn entry and fails the other
/// rename), so every entry is intact and neither cache reports a write error.
#[test]
fn two_caches_of_one_process_publish_the_same_keys() {
    let work = tempfile::tempdir().unwrap();
    let open = || {
        let mut config = DiskConfig::new(work.path(), test_stamp());
        config.budget_bytes = Some(1 << 40);
        config.compress = false;
        ProgramCache::builder(CacheConfig::with_budget(256 << 20))
            .disk(config)
            .build()
    };
    let (a, b) = (open(), open());
    a.wait_until_loaded(Duration::from_secs(10)).unwrap();
    b.wait_until_loaded(Duration::from_secs(10)).unwrap();
    let programs: Vec<(ProgramKey, CachedProgram)> = (0..150)
        .map(|n| (synthetic_key(n), synthetic_program(n)))
        .collect();
    std::thread::scope(|s| {
        for cache in [&a, &b] {
            let programs = &programs;
            s.spawn(move || {
                for (key, program) in programs {
                    cache.save(*key, program.clone(), None).unwrap();
                    cache.flush_disk();
                }
            });
        }
    });
    let (ca, cb) = (a.disk_counters().unwrap(), b.disk_counters().unwrap());
    let store = &inspect::scan(work.path()).unwrap()[0];
    eprintln!(
        "two caches, one process: writes {} + {}, already present {} + {}, write errors {} + {}, \
         {} entries, {} corrupt",
        ca.writes,
        cb.writes,
        ca.already_present,
        cb.already_present,
        ca.write_errors,
        cb.write_errors,
        store.entries.len(),
        store.corrupt().count()
    );
    assert_eq!(store.corrupt().count(), 0);
    assert_eq!(store.entries.len(), programs.len());
    assert_eq!((ca.write_errors, cb.write_errors), (0, 0));
    assert_eq!((a.disk_condition(), b.disk_condition()), (None, None));
    check_entries(work.path(), &test_stamp().hash(), "two caches");
}

// ---- inspection while a writer evicts ----

/// `inspect::scan` (what `gpusvc cache verify` runs) while another writer publishes and evicts:
/// an entry that vanishes between the listing and the read is gone, not corrupt, and never an
/// error of the whole scan.
#[test]
fn scanning_while_a_writer_evicts_reports_no_corruption() {
    let work = tempfile::tempdir().unwrap();
    let mut config = DiskConfig::new(work.path(), test_stamp());
    config.budget_bytes = Some(256 << 10);
    config.compress = false;
    let cache = ProgramCache::builder(CacheConfig::with_budget(64 << 20))
        .disk(config)
        .build();
    cache.wait_until_loaded(Duration::from_secs(10)).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (mut scans, mut errors, mut corrupt, mut entries) = (0, Vec::new(), Vec::new(), 0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                cache
                    .save(synthetic_key(n), synthetic_program(n), None)
                    .unwrap();
                if n % 4 == 3 {
                    cache.flush_disk();
                }
                n += 1;
            }
        });
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2) {
            match inspect::scan(work.path()) {
                Ok(stores) => {
                    for store in &stores {
                        entries += store.entries.len();
                        corrupt.extend(store.corrupt().map(|e| format!("{:?}", e.check)));
                    }
                }
                Err(e) => errors.push(e.to_string()),
            }
            scans += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let c = cache.disk_counters().unwrap();
    eprintln!(
        "{scans} scans during {} writes and {} evictions: {entries} entries checked, {} reported \
         corrupt, {} scans failed",
        c.writes,
        c.evictions,
        corrupt.len(),
        errors.len()
    );
    assert!(c.evictions > 0, "the writer evicted meanwhile");
    assert!(errors.is_empty(), "scans failed: {errors:?}");
    assert!(corrupt.is_empty(), "false corruption: {corrupt:?}");
}
