//! The persistence split between two real processes (issue 15's acceptance test): a "GPU"
//! process that cannot see the cache folder at all hands every saved program to a "browser"
//! process over a socketpair, and gets them all back as cache hits at its next start.
//!
//! * `gpu_process_without_the_folder_gets_every_program_back_from_the_browser`: the parent
//!   (the browser) writes a marker file next to the cache folder and starts this executable
//!   again as the GPU child, joined by a `socketpair`. The child enters a private mount
//!   namespace (`unshare(CLONE_NEWNS)`; when the test does not run as root the child is first
//!   put in a user namespace, between fork and exec, in which it is root), mounts an empty
//!   tmpfs over the cache folder's parent and checks that neither the marker nor the folder is
//!   visible; then it opens a real GL context (llvmpipe here), sends its
//!   [`CompatibilityStamp`] as text, and links the built-in corpus through a [`ProgramCache`]
//!   whose only persistence is a [`PersistSink`] writing each saved entry to the socket. The
//!   parent opens a [`Store`] for that stamp and `put`s what it receives. A second child, in the
//!   same kind of sandbox, receives the stored entries (most recent first) at start-up,
//!   `insert_entry`s them, links the same corpus, and every program that links must be a cache
//!   hit. Counts printed: linked, sent, persisted, streamed back, inserted, hits.
//! * `a_binary_the_driver_refuses_reaches_entry_rejected` (one process): entries whose binary
//!   the real driver refuses are inserted; the link falls back to source, the sink hears
//!   `entry_rejected` for each and `store_rejected` after `max_consecutive_rejections` in a row.
//!
//! Without namespaces (unshare fails with EPERM/EINVAL) the first test prints
//! `SKIP persist_sandbox: <reason>` and passes, unless `GPUSVC_REQUIRE_SANDBOX=1`; without GL it
//! skips or fails under `GPUSVC_REQUIRE_GL` like every GL test. A child that hangs is killed:
//! every socket read has a timeout and every child wait a deadline.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corpus::{Dialect, builtin};
use headless_gl::{ContextOptions, GlApi, ShaderStage};
use program_cache::disk::{self, PutOutcome, Store, StoreConfig};
use program_cache::{
    CacheConfig, CompatibilityStamp, GlBackend, LinkOrigin, PersistConfig, PersistSink,
    ProgramCache, ProgramKey, ProgramManager, ProgramOptions, Shader,
};
use test_support::gl::{gl_required, open_or_skip};

const ROLE: &str = "GPUSVC_PERSIST_ROLE";
const HIDE: &str = "GPUSVC_PERSIST_HIDE";
const MARKER: &str = "GPUSVC_PERSIST_MARKER";
const CACHE: &str = "GPUSVC_PERSIST_CACHE";
const REQUIRE_SANDBOX: &str = "GPUSVC_REQUIRE_SANDBOX";
/// Set by the parent for a child it put in a user namespace (not root): what happened.
const USERNS: &str = "GPUSVC_PERSIST_USERNS";
/// The child's end of the socketpair is this descriptor.
const CHILD_FD: i32 = 3;
/// The largest frame: a tag, a key and the largest entry FORMAT.md allows.
const MAX_FRAME: usize = 1 + 20 + disk::HEADER_LEN + disk::MAX_PAYLOAD as usize;
/// One socket read or write waits at most this long.
const IO_TIMEOUT: Duration = Duration::from_secs(120);
/// A child runs at most this long.
const CHILD_LIMIT: Duration = Duration::from_secs(300);

// ---------------------------------------------------------------------------------------------
// The wire: frames of `u32` little-endian length, then a tag byte and its body.

/// GPU -> browser: the stamp's text.
const T_STAMP: u8 = b'S';
/// Both ways: a key and an entry (GPU: saved; browser: streamed back).
const T_ENTRY: u8 = b'E';
/// GPU -> browser: a key was used.
const T_USED: u8 = b'U';
/// GPU -> browser: the driver refused a key's binary.
const T_REJECTED: u8 = b'R';
/// GPU -> browser: empty the store.
const T_STORE_REJECTED: u8 = b'X';
/// Browser -> GPU: the stream of stored entries is over.
const T_END: u8 = b'F';
/// GPU -> browser: the child's counts (`k=v` text), its last frame.
const T_DONE: u8 = b'D';
/// GPU -> browser: the child cannot run here (text: why).
const T_SKIP: u8 = b'K';

fn send(stream: &mut UnixStream, tag: u8, parts: &[&[u8]]) -> std::io::Result<()> {
    let len: usize = 1 + parts.iter().map(|p| p.len()).sum::<usize>();
    assert!(len <= MAX_FRAME, "frame of {len} bytes");
    let mut frame = Vec::with_capacity(4 + len);
    frame.extend_from_slice(&(len as u32).to_le_bytes());
    frame.push(tag);
    for p in parts {
        frame.extend_from_slice(p);
    }
    stream.write_all(&frame)
}

/// Reads one frame (bounded by [`MAX_FRAME`], each read bounded by the socket's timeout);
/// `None` at a clean end of stream.
fn recv(stream: &mut UnixStream) -> std::io::Result<Option<(u8, Vec<u8>)>> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes"),
        ));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    let tag = body.remove(0);
    Ok(Some((tag, body)))
}

fn key_of(body: &[u8]) -> ProgramKey {
    ProgramKey(body[..20].try_into().expect("a key"))
}

/// `k=v` pairs.
fn fields(text: &str) -> std::collections::HashMap<String, u64> {
    text.split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The GPU child

/// The child side; started by the test with `GPUSVC_PERSIST_ROLE` set. Run on its own
/// (`--ignored`) it has nothing to do and says so.
#[test]
#[ignore = "a child process of the other tests in this file"]
fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        eprintln!("child: {ROLE} is not set; this test only runs as a child of the others");
        return;
    };
    // SAFETY: the parent put our end of the socketpair at CHILD_FD (dup2 in pre_exec); nothing
    // else in this process owns that descriptor.
    let stream = unsafe { <UnixStream as std::os::fd::FromRawFd>::from_raw_fd(CHILD_FD) };
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    match role.as_str() {
        "gpu-save" => gpu_child(stream, false),
        "gpu-load" => gpu_child(stream, true),
        other => panic!("unknown child role {other:?}"),
    }
}

/// Enters a private mount namespace and hides `hide` under an empty tmpfs. `Err` with the
/// reason when namespaces are not available here.
fn enter_sandbox(hide: &Path) -> Result<(), String> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let errno = || std::io::Error::last_os_error();
    // As root (or as root of the user namespace the parent made for us, see `spawn`) a
    // private mount namespace of our own.
    // SAFETY: unshare takes no pointers.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        let why = match std::fs::read_to_string("/proc/self/status") {
            Ok(status) => status
                .lines()
                .find(|l| l.starts_with("Uid:"))
                .unwrap_or("")
                .to_owned(),
            Err(_) => String::new(),
        };
        let userns = std::env::var(USERNS).unwrap_or_default();
        return Err(format!(
            "unshare(CLONE_NEWNS): {} ({why}; user namespace: {userns})",
            errno()
        ));
    }
    let slash = CString::new("/").unwrap();
    // SAFETY: valid NUL-terminated path; null source, type and data are allowed for a
    // propagation change.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            slash.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(format!("making / private: {}", errno()));
    }
    let target = CString::new(hide.as_os_str().as_bytes()).unwrap();
    let tmpfs = CString::new("tmpfs").unwrap();
    let options = CString::new("size=1m,mode=0755").unwrap();
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            tmpfs.as_ptr(),
            target.as_ptr(),
            tmpfs.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            options.as_ptr().cast(),
        )
    };
    if r != 0 {
        return Err(format!("tmpfs over {}: {}", hide.display(), errno()));
    }
    Ok(())
}

/// The sink of the GPU child: every call is one frame on the socket.
struct SocketSink(Mutex<UnixStream>);

impl SocketSink {
    fn frame(&self, tag: u8, parts: &[&[u8]]) {
        let mut s = self.0.lock().unwrap();
        send(&mut s, tag, parts).expect("child: the browser reads its socket");
    }
}

impl PersistSink for SocketSink {
    fn entry_saved(&self, key: &ProgramKey, entry: &[u8]) {
        self.frame(T_ENTRY, &[&key.0, entry]);
    }
    fn entry_used(&self, key: &ProgramKey) {
        self.frame(T_USED, &[&key.0]);
    }
    fn entry_rejected(&self, key: &ProgramKey) {
        self.frame(T_REJECTED, &[&key.0]);
    }
    fn store_rejected(&self) {
        self.frame(T_STORE_REJECTED, &[]);
    }
}

fn gpu_child(mut stream: UnixStream, load: bool) {
    let hide = PathBuf::from(std::env::var(HIDE).unwrap());
    let marker = PathBuf::from(std::env::var(MARKER).unwrap());
    let cache_dir = PathBuf::from(std::env::var(CACHE).unwrap());
    if let Err(why) = enter_sandbox(&hide) {
        send(&mut stream, T_SKIP, &[why.as_bytes()]).unwrap();
        return;
    }
    // The folder is out of reach: the marker the browser wrote beside it, the folder itself and
    // anything else under its parent.
    assert!(
        !marker.exists(),
        "child: the marker is visible in the sandbox"
    );
    assert!(
        !cache_dir.exists(),
        "child: the cache folder is visible in the sandbox"
    );
    assert_eq!(
        fs::read_dir(&hide).unwrap().count(),
        0,
        "child: the tmpfs is not empty"
    );
    eprintln!("child: {} hidden under an empty tmpfs", hide.display());

    let Some(ctx) = open_or_skip("persist_sandbox child", &ContextOptions::default()) else {
        send(&mut stream, T_SKIP, &[b"no GL context"]).unwrap();
        return;
    };
    eprintln!("child: driver {}", ctx.info());
    let stamp = CompatibilityStamp::from_driver(ctx.info(), "persist_sandbox", "1");
    send(&mut stream, T_STAMP, &[stamp.describe().as_bytes()]).unwrap();

    let sink = Arc::new(SocketSink(Mutex::new(stream.try_clone().unwrap())));
    let cache = ProgramCache::builder(CacheConfig::with_budget(256 << 20))
        .persist(PersistConfig::new(stamp, sink))
        .build();

    // The entries the browser streams at start-up, before any link.
    let (mut streamed, mut refused) = (0u64, 0u64);
    if load {
        loop {
            let (tag, body) = recv(&mut stream)
                .expect("child: socket read")
                .expect("child: the browser ends its stream");
            match tag {
                T_ENTRY => {
                    streamed += 1;
                    match cache.insert_entry(&body[20..]) {
                        Ok(key) => assert_eq!(key, key_of(&body), "child: the entry's key"),
                        Err(e) => {
                            refused += 1;
                            eprintln!("child: entry refused: {e}");
                        }
                    }
                }
                T_END => break,
                other => panic!("child: unexpected frame {other}"),
            }
        }
    }

    let dialect = match ctx.info().api {
        GlApi::DesktopCore => Dialect::DesktopCore330,
        GlApi::Gles => Dialect::Es300,
    };
    let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), "persist_sandbox");
    let (mut linked, mut hits, mut failed) = (0u64, 0u64, 0u64);
    for p in builtin(dialect) {
        let mut vs = Shader::new(ShaderStage::Vertex, p.vertex.clone());
        let mut fs = Shader::new(ShaderStage::Fragment, p.fragment.clone());
        manager.compile(&mut vs).unwrap();
        manager.compile(&mut fs).unwrap();
        if !vs.compile_status() || !fs.compile_status() {
            failed += 1;
            continue;
        }
        match manager.link(&mut vs, &mut fs, &ProgramOptions::default()) {
            Ok(l) => {
                linked += 1;
                if l.origin == LinkOrigin::CacheHit {
                    hits += 1;
                }
            }
            Err(_) => failed += 1,
        }
    }
    drop(manager);
    cache.flush_persist();
    let c = cache.persist_counters().unwrap();
    let rejections = cache.stats().counters.driver_rejections;
    // After the drop no sink call can come: the done frame is the last one.
    drop(cache);
    let done = format!(
        "linked={linked} failed={failed} hits={hits} streamed={streamed} refused={refused} \
         saved={} sent={} dropped={} oversized={} used={} inserted={} insert_refused={} \
         rejected={} driver_rejections={rejections}",
        c.saved, c.sent, c.dropped, c.oversized, c.used, c.inserted, c.insert_refused, c.rejected
    );
    send(&mut stream, T_DONE, &[done.as_bytes()]).unwrap();
}

// ---------------------------------------------------------------------------------------------
// The browser parent

/// A child process that is killed (SIGKILL) and reaped if the test ends before it does.
struct ChildProcess {
    child: Child,
    log: PathBuf,
}

impl ChildProcess {
    fn output(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits at most `limit`; kills the child after that and panics.
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
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts this executable as a `role` child with `theirs` as its descriptor [`CHILD_FD`].
fn spawn(role: &str, work: &Path, theirs: &UnixStream, vars: &[(&str, &Path)]) -> ChildProcess {
    let log = work.join(format!("{role}.log"));
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
        .env_remove("MESA_SHADER_CACHE_DIR")
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file);
    for (k, v) in vars {
        command.env(k, v);
    }
    let fd = theirs.as_raw_fd();
    // Not root: the child gets a user namespace in which it is root (so it can make its own
    // mount namespace), entered between fork and exec — CLONE_NEWUSER needs a single-threaded
    // caller, and the child's test harness has threads. Everything is prepared here; the
    // closure only makes system calls.
    // SAFETY: geteuid/getuid/getgid have no preconditions.
    let (euid, uid, gid) = unsafe { (libc::geteuid(), libc::getuid(), libc::getgid()) };
    let userns = euid != 0;
    let maps: Vec<(std::ffi::CString, Vec<u8>)> = [
        ("/proc/self/setgroups", "deny".to_owned()),
        ("/proc/self/uid_map", format!("0 {uid} 1")),
        ("/proc/self/gid_map", format!("0 {gid} 1")),
    ]
    .into_iter()
    .map(|(path, text)| (std::ffi::CString::new(path).unwrap(), text.into_bytes()))
    .collect();
    command.env(
        USERNS,
        if userns {
            "made by the parent"
        } else {
            "none (root)"
        },
    );
    // SAFETY: between fork and exec the closure calls only async-signal-safe system calls
    // (dup2, unshare, open, write, close) on memory prepared before the fork; `fd` stays open in
    // the parent until spawn returns. dup2 clears close-on-exec on the copy, so only this child
    // inherits the socket (every other descriptor of ours is close-on-exec). A failing user
    // namespace is not an error here: the child then fails its own unshare and says why.
    unsafe {
        command.pre_exec(move || {
            if libc::dup2(fd, CHILD_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if userns && libc::unshare(libc::CLONE_NEWUSER) == 0 {
                for (path, text) in &maps {
                    let f = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if f >= 0 {
                        libc::write(f, text.as_ptr().cast(), text.len());
                        libc::close(f);
                    }
                }
            }
            Ok(())
        });
    }
    ChildProcess {
        child: command.spawn().expect("the test executable starts again"),
        log,
    }
}

/// What one child run showed the browser.
#[derive(Debug, Default)]
struct Run {
    stamp: Option<CompatibilityStamp>,
    persisted: u64,
    already: u64,
    put_refused: u64,
    touched: u64,
    removed: u64,
    store_rejections: u64,
    streamed_back: u64,
    keys: HashSet<ProgramKey>,
    done: Option<String>,
    skip: Option<String>,
}

/// Runs one GPU child as the browser: answers its stamp with the store, streams the store's
/// entries to it first when `stream_back`, persists what it sends.
fn browser(role: &str, work: &Path, cache_dir: &Path, stream_back: bool) -> (Run, Option<Store>) {
    let hide = cache_dir.parent().unwrap();
    let marker = hide.join("MARKER");
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    ours.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    ours.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut child = spawn(
        role,
        work,
        &theirs,
        &[(HIDE, hide), (MARKER, &marker), (CACHE, cache_dir)],
    );
    drop(theirs);
    let mut run = Run::default();
    let mut store: Option<Store> = None;
    loop {
        let frame = match recv(&mut ours) {
            Ok(f) => f,
            Err(e) => panic!(
                "browser: socket read: {e}; child output:\n{}",
                child.output()
            ),
        };
        let Some((tag, body)) = frame else { break };
        match tag {
            T_SKIP => {
                run.skip = Some(String::from_utf8_lossy(&body).into_owned());
                break;
            }
            T_STAMP => {
                let stamp = CompatibilityStamp::parse(std::str::from_utf8(&body).unwrap())
                    .expect("browser: the stamp parses");
                let s =
                    Store::open(StoreConfig::new(cache_dir, stamp.clone())).expect("store opens");
                if stream_back {
                    for (key, entry) in s.entries() {
                        send(&mut ours, T_ENTRY, &[&key.0, &entry]).unwrap();
                        run.streamed_back += 1;
                    }
                    send(&mut ours, T_END, &[]).unwrap();
                }
                run.stamp = Some(stamp);
                store = Some(s);
            }
            T_ENTRY => {
                let s = store.as_ref().expect("browser: an entry before the stamp");
                match s.put(&body[20..]) {
                    Ok(PutOutcome::Written { key }) => {
                        assert_eq!(key, key_of(&body));
                        run.persisted += 1;
                        run.keys.insert(key);
                    }
                    Ok(PutOutcome::AlreadyPresent { .. }) => run.already += 1,
                    Err(e) => {
                        eprintln!("browser: put refused: {e}");
                        run.put_refused += 1;
                    }
                }
            }
            T_USED => {
                store.as_ref().unwrap().touch(&key_of(&body));
                run.touched += 1;
            }
            T_REJECTED => {
                store.as_ref().unwrap().remove(&key_of(&body)).unwrap();
                run.removed += 1;
            }
            T_STORE_REJECTED => {
                store.as_ref().unwrap().clear().unwrap();
                run.store_rejections += 1;
            }
            T_DONE => {
                run.done = Some(String::from_utf8_lossy(&body).into_owned());
                break;
            }
            other => panic!("browser: unexpected frame {other}"),
        }
    }
    let status = child.wait(CHILD_LIMIT);
    assert!(
        status.success(),
        "{role} child failed ({status}); its output:\n{}",
        child.output()
    );
    eprintln!("--- {role} child output ---\n{}", child.output().trim_end());
    if let Some(s) = &store {
        s.flush();
    }
    (run, store)
}

fn sandbox_required() -> bool {
    std::env::var(REQUIRE_SANDBOX).is_ok_and(|v| !v.is_empty() && v != "0")
}

#[test]
fn gpu_process_without_the_folder_gets_every_program_back_from_the_browser() {
    let work = tempfile::tempdir().unwrap();
    let hidden = work.path().join("browser-profile");
    let cache_dir = hidden.join("gpu-cache");
    fs::create_dir_all(&cache_dir).unwrap();
    fs::write(hidden.join("MARKER"), b"only the browser sees this").unwrap();
    assert!(hidden.join("MARKER").exists());

    // First start: the GPU process links the corpus cold; the browser persists what it sends.
    let (first, store) = browser("gpu-save", work.path(), &cache_dir, false);
    if let Some(why) = &first.skip {
        if why.starts_with("no GL") {
            assert!(!gl_required(), "the child found no GL context");
        } else {
            assert!(!sandbox_required(), "{REQUIRE_SANDBOX} is set but: {why}");
        }
        eprintln!("SKIP persist_sandbox: {why}");
        return;
    }
    let done = fields(
        first
            .done
            .as_deref()
            .expect("the first child reports its counts"),
    );
    let store = store.expect("the store was opened");
    let stats = store.stats();
    let on_disk = store.entries().count() as u64;
    drop(store);
    eprintln!(
        "first start: linked {} (failed {}), saved {}, sent {}, persisted {} (already present \
         {}, refused {}), entries on disk {on_disk}, hits {}",
        done["linked"],
        done["failed"],
        done["saved"],
        done["sent"],
        first.persisted,
        first.already,
        first.put_refused,
        done["hits"]
    );
    assert!(done["linked"] > 0, "nothing linked: {done:?}");
    assert_eq!(done["failed"], 0, "the built-in corpus links: {done:?}");
    assert_eq!(done["hits"], 0, "a cold start has no hits");
    assert_eq!(done["dropped"], 0, "no save was dropped");
    assert_eq!(done["saved"], done["linked"]);
    assert_eq!(done["sent"], done["linked"], "every linked program is sent");
    assert_eq!(
        first.persisted, done["sent"],
        "every sent entry is persisted"
    );
    assert_eq!(first.put_refused + first.already, 0);
    assert_eq!(on_disk, first.persisted);
    assert_eq!(stats.disk.writes, first.persisted);
    // The marker was beside the folder all along (the child could not see it).
    assert!(cache_dir.parent().unwrap().join("MARKER").exists());

    // Second start: the browser streams everything back before the GPU process links.
    let (second, store) = browser("gpu-load", work.path(), &cache_dir, true);
    assert!(second.skip.is_none(), "second child: {:?}", second.skip);
    let done2 = fields(
        second
            .done
            .as_deref()
            .expect("the second child reports its counts"),
    );
    assert_eq!(
        second.stamp, first.stamp,
        "the same driver gives the same stamp"
    );
    eprintln!(
        "persist_sandbox counts: linked {}, sent {}, persisted {}, streamed back {}, inserted \
         {}, hits {} (second start: linked {}, sent {}, used {}, touched {}, refused {}, driver \
         rejections {})",
        done["linked"],
        done["sent"],
        first.persisted,
        second.streamed_back,
        done2["inserted"],
        done2["hits"],
        done2["linked"],
        done2["sent"],
        done2["used"],
        second.touched,
        done2["refused"],
        done2["driver_rejections"],
    );
    assert_eq!(
        second.streamed_back, first.persisted,
        "every entry streams back"
    );
    assert_eq!(done2["streamed"], second.streamed_back);
    assert_eq!(
        done2["inserted"], second.streamed_back,
        "every streamed entry is inserted"
    );
    assert_eq!(done2["refused"], 0);
    assert_eq!(done2["linked"], done["linked"]);
    assert_eq!(
        done2["hits"], done2["linked"],
        "every linked program is a cache hit"
    );
    assert_eq!(done2["driver_rejections"], 0);
    assert_eq!(done2["sent"], 0, "nothing new to save");
    // Each hit refreshed the browser's last-use record (once per key per minute).
    assert_eq!(done2["used"], done2["hits"]);
    assert_eq!(second.touched, done2["used"]);
    let store = store.unwrap();
    assert_eq!(store.stats().touches, second.touched);
    assert!(store.stats().disk.use_records >= second.touched);
}

// ---------------------------------------------------------------------------------------------
// The driver-refusal rule for inserted entries (one process, the real driver).

#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Saved(ProgramKey, Vec<u8>),
    Used(ProgramKey),
    Rejected(ProgramKey),
    StoreRejected,
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Event>>);

impl Recorder {
    fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }
}

impl PersistSink for Recorder {
    fn entry_saved(&self, key: &ProgramKey, entry: &[u8]) {
        self.0
            .lock()
            .unwrap()
            .push(Event::Saved(*key, entry.to_vec()));
    }
    fn entry_used(&self, key: &ProgramKey) {
        self.0.lock().unwrap().push(Event::Used(*key));
    }
    fn entry_rejected(&self, key: &ProgramKey) {
        self.0.lock().unwrap().push(Event::Rejected(*key));
    }
    fn store_rejected(&self) {
        self.0.lock().unwrap().push(Event::StoreRejected);
    }
}

#[test]
fn a_binary_the_driver_refuses_reaches_entry_rejected() {
    const TEST: &str = "a_binary_the_driver_refuses_reaches_entry_rejected";
    let Some(ctx) = open_or_skip(TEST, &ContextOptions::default()) else {
        return;
    };
    let stamp = CompatibilityStamp::from_driver(ctx.info(), "persist_sandbox", "1");
    let dialect = match ctx.info().api {
        GlApi::DesktopCore => Dialect::DesktopCore330,
        GlApi::Gles => Dialect::Es300,
    };
    let programs: Vec<_> = builtin(dialect).into_iter().take(4).collect();
    let link_all = |cache: &Arc<ProgramCache>| -> Vec<LinkOrigin> {
        let mut manager = ProgramManager::new(GlBackend::new(&ctx), cache.clone(), TEST);
        programs
            .iter()
            .map(|p| {
                let mut vs = Shader::new(ShaderStage::Vertex, p.vertex.clone());
                let mut fs = Shader::new(ShaderStage::Fragment, p.fragment.clone());
                manager.compile(&mut vs).unwrap();
                manager.compile(&mut fs).unwrap();
                manager
                    .link(&mut vs, &mut fs, &ProgramOptions::default())
                    .expect("links")
                    .origin
            })
            .collect()
    };

    // The real entries of four programs.
    let first = Arc::new(Recorder::default());
    let cache = ProgramCache::builder(CacheConfig::with_budget(64 << 20))
        .persist(PersistConfig::new(stamp.clone(), first.clone()))
        .build();
    assert!(link_all(&cache).iter().all(|o| *o == LinkOrigin::Linked));
    cache.flush_persist();
    drop(cache);
    let saved: Vec<(ProgramKey, Vec<u8>)> = first
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Saved(k, b) => Some((k, b)),
            _ => None,
        })
        .collect();
    assert_eq!(saved.len(), programs.len());

    // The same entries with a binary the driver cannot load (valid entries otherwise).
    let hash = stamp.hash();
    let damaged: Vec<Vec<u8>> = saved
        .iter()
        .map(|(key, bytes)| {
            let (_, mut program) = disk::decode(bytes, &hash, Some(key)).unwrap();
            for (i, b) in program.binary.bytes.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(31) ^ 0x5A;
            }
            disk::encode(key, &program, &hash, 0, true)
        })
        .collect();

    // The second start: the last of the four is good, the first three are refused in a row.
    let second = Arc::new(Recorder::default());
    let mut config = PersistConfig::new(stamp.clone(), second.clone());
    config.max_consecutive_rejections = 3;
    let cache = ProgramCache::builder(CacheConfig::with_budget(64 << 20))
        .persist(config)
        .build();
    for bytes in &damaged[..3] {
        cache
            .insert_entry(bytes)
            .expect("a well-formed entry is inserted");
    }
    cache.insert_entry(&saved[3].1).unwrap();
    let origins = link_all(&cache);
    cache.flush_persist();
    let events = second.events();
    eprintln!(
        "origins {origins:?}; events {:?}",
        events
            .iter()
            .map(|e| match e {
                Event::Saved(k, _) => format!("saved {}", &k.to_hex()[..8]),
                Event::Used(k) => format!("used {}", &k.to_hex()[..8]),
                Event::Rejected(k) => format!("rejected {}", &k.to_hex()[..8]),
                Event::StoreRejected => "store rejected".into(),
            })
            .collect::<Vec<_>>()
    );
    assert_eq!(
        origins[..3],
        [LinkOrigin::RelinkedAfterRejection; 3],
        "the driver refused the damaged binaries and the programs linked from source"
    );
    let rejected: Vec<ProgramKey> = events
        .iter()
        .filter_map(|e| match e {
            Event::Rejected(k) => Some(*k),
            _ => None,
        })
        .collect();
    assert_eq!(
        rejected,
        saved[..3].iter().map(|(k, _)| *k).collect::<Vec<_>>()
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| **e == Event::StoreRejected)
            .count(),
        1,
        "three refusals in a row reject the store"
    );
    // Every inserted entry left memory with the store: the fourth program, inserted good, is
    // no longer a hit.
    assert_eq!(origins[3], LinkOrigin::Linked);
    // The relinked programs were saved again, with binaries the driver made.
    let resaved = events
        .iter()
        .filter(|e| matches!(e, Event::Saved(..)))
        .count();
    assert_eq!(resaved, 4);
    let c = cache.persist_counters().unwrap();
    assert_eq!((c.inserted, c.rejected, c.store_rejections), (4, 3, 1));
    assert_eq!(cache.stats().counters.driver_rejections, 3);
}
