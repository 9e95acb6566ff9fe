//! T10: fd exhaustion. A child test process (this test executable re-run with one ignored
//! test) lowers its own `RLIMIT_NOFILE` and fills every free fd number, so that the fake
//! kernel's fresh imports (which hold a dup of the buffer, as the kernel holds a dma-buf
//! reference) and every export fail with `EMFILE`. The failures must be values, leave the
//! counts of cached objects alone, close the fresh handles they made, and leave nothing open
//! once every reference is released — with no double close.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::process::Command;
use std::sync::Barrier;

use bo_cache::{Bo, BoCache, BoError, Errno, ImportDesc, KernelOp, MemfdKernel, PlaneDesc};
use rustix::io::fcntl_dupfd_cloexec;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

const CHILD: &str = "fd_exhaustion_child";
const DONE: &str = "T10 child: all checks passed";
/// The soft fd limit the child runs under.
const LIMIT: u64 = 64;

#[test]
fn fd_exhaustion_gives_error_values_and_leaks_nothing() {
    let exe = std::env::current_exe().unwrap();
    let output = Command::new(&exe)
        .args([
            "--exact",
            CHILD,
            "--nocapture",
            "--ignored",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "child failed:\n{stdout}\n{stderr}");
    // The ignored test really ran (a typo in its name would run nothing and succeed).
    assert!(
        stdout.contains(DONE),
        "child did not run:\n{stdout}\n{stderr}"
    );
}

/// Takes every free fd number (dups of `/dev/null`); dropping one frees one number.
fn fill(filler: &mut Vec<OwnedFd>, source: &File) {
    loop {
        match fcntl_dupfd_cloexec(source.as_fd(), 0) {
            Ok(fd) => filler.push(fd),
            Err(e) => {
                assert_eq!(e, Errno::MFILE);
                return;
            }
        }
    }
}

fn is_emfile(e: &BoError, op: KernelOp) -> bool {
    *e == BoError::Kernel {
        op,
        errno: Errno::MFILE,
    }
}

fn assert_clean(cache: &BoCache, k: &MemfdKernel) {
    let (s, f) = (cache.stats(), k.stats());
    assert_eq!(s.double_closes, 0, "{s:?}");
    assert_eq!(f.double_closes, 0, "{f:?}");
    assert_eq!(s.close_errors, 0, "{s:?}");
    assert_eq!(s.live, f.open_handles, "{s:?} {f:?}");
}

#[test]
#[ignore = "run by fd_exhaustion_gives_error_values_and_leaks_nothing in a child process"]
fn fd_exhaustion_child() {
    let buffers: Vec<OwnedFd> = (0..6)
        .map(|_| MemfdKernel::new_buffer(4096).unwrap())
        .collect();
    let source = File::open("/dev/null").unwrap();
    let k = MemfdKernel::new();
    let cache = BoCache::with_kernel(k.clone());
    let old = getrlimit(Resource::Nofile);
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(LIMIT),
            maximum: old.maximum,
        },
    )
    .unwrap();
    let mut filler = Vec::new();
    fill(&mut filler, &source);
    assert!(
        !filler.is_empty(),
        "more than {LIMIT} fds open before the test"
    );

    // No fd left: a fresh import fails with EMFILE, as a value, and leaves nothing behind.
    let e = cache
        .import(buffers[0].as_fd(), &ImportDesc::default())
        .unwrap_err();
    assert!(is_emfile(&e, KernelOp::FdToHandle), "{e:?}");
    assert_eq!((cache.stats().live, k.stats().open_handles), (0, 0));

    // Two fds: two fresh imports succeed; a re-import needs no fd and is a hit.
    filler.truncate(filler.len() - 2);
    let a = cache
        .import(buffers[0].as_fd(), &ImportDesc::default())
        .unwrap();
    let b = cache
        .import(buffers[1].as_fd(), &ImportDesc::default())
        .unwrap();
    let a2 = cache
        .import(buffers[0].as_fd(), &ImportDesc::default())
        .unwrap();
    assert_eq!(a.handle(), a2.handle());
    assert_eq!(a.ref_count(), 2);

    // Out of fds again: an export fails without touching the object; a third buffer fails.
    let e = a.export_dmabuf(0).unwrap_err();
    assert!(is_emfile(&e, KernelOp::HandleToFd), "{e:?}");
    assert_eq!(a.ref_count(), 2);
    let e = cache
        .import(buffers[2].as_fd(), &ImportDesc::default())
        .unwrap_err();
    assert!(is_emfile(&e, KernelOp::FdToHandle), "{e:?}");
    assert_eq!(k.stats().open_handles, 2);

    // Planes: the first plane's buffer is fresh and gets the one free fd, the second cannot;
    // the first plane's fresh handle is closed again and the cached objects are untouched.
    filler.pop();
    let planes = [
        PlaneDesc {
            fd: buffers[3].as_fd(),
            offset: 0,
            size: 1024,
        },
        PlaneDesc {
            fd: buffers[4].as_fd(),
            offset: 0,
            size: 1024,
        },
    ];
    let e = cache.import_planes(&planes, 0).unwrap_err();
    assert!(is_emfile(&e, KernelOp::FdToHandle), "{e:?}");
    assert_eq!(k.stats().open_handles, 2);
    assert_eq!((a.ref_count(), b.ref_count()), (2, 1));
    assert_clean(&cache, &k);

    // The freed fd makes an export possible; the exported fd re-imports to the same object.
    let exported = a.export_dmabuf(0).unwrap();
    let a3 = cache
        .import(exported.as_fd(), &ImportDesc::default())
        .unwrap();
    assert_eq!(a3.handle(), a.handle());
    assert_eq!(a.ref_count(), 3);
    drop((exported, a3, a2));
    filler.truncate(filler.len().saturating_sub(1));
    fill(&mut filler, &source);

    // Scarce fds under contention: 4 threads import all six buffers and release, racing last
    // releases, with one fd free besides the ones `a` and `b` hold (so a second fresh buffer
    // live at once fails even on one thread); every failure is EMFILE from FD_TO_HANDLE.
    filler.pop();
    let barrier = Barrier::new(4);
    let (ok, emfile) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..4usize)
            .map(|t| {
                let (cache, buffers, barrier) = (&cache, &buffers, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let (mut ok, mut emfile) = (0u64, 0u64);
                    let mut held: Vec<Bo> = Vec::new();
                    for round in 0..2000usize {
                        let fd = buffers[(round * 7 + t * 3) % buffers.len()].as_fd();
                        match cache.import(fd, &ImportDesc::default()) {
                            Ok(bo) => {
                                ok += 1;
                                held.push(bo);
                            }
                            Err(e) => {
                                assert!(is_emfile(&e, KernelOp::FdToHandle), "{e:?}");
                                emfile += 1;
                            }
                        }
                        if held.len() > 2 || round % 5 == 0 {
                            held.clear();
                        }
                    }
                    (ok, emfile)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .fold((0, 0), |(o, e), (o2, e2)| (o + o2, e + e2))
    });
    println!("T10 contention: {ok} imports ok, {emfile} EMFILE");
    assert!(ok > 0 && emfile > 0, "ok {ok}, EMFILE {emfile}");
    assert_eq!(k.stats().open_handles, 2);
    assert_clean(&cache, &k);

    // Everything released: nothing live, nothing open, every handle closed exactly once.
    drop((a, b));
    let (s, f) = (cache.stats(), k.stats());
    assert_eq!((s.live, f.open_handles), (0, 0), "{s:?} {f:?}");
    assert_eq!(s.closes, s.misses, "{s:?}");
    assert_eq!(f.closes, f.handles_created, "{f:?}");
    assert_clean(&cache, &k);
    drop(filler);
    drop(cache);
    println!("{DONE}");
}
