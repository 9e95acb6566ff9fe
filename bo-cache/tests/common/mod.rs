//! Helpers shared by the cache's integration tests (memfd and DRM tiers).

#![allow(dead_code)] // each test binary uses its own subset

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType, recvmsg, sendmsg, socketpair,
};

/// Forks a child that sends `fd` back over a Unix socket with `SCM_RIGHTS`; returns what the
/// parent received (a new fd for the same open file, as another process would pass it).
pub(crate) fn passed_through_child(fd: BorrowedFd<'_>) -> OwnedFd {
    let (parent, child) = socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    // SAFETY: the child only makes raw syscalls (sendmsg with stack buffers) and `_exit`s; it
    // never returns into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let fds = [fd];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let ok = control.push(SendAncillaryMessage::ScmRights(&fds));
        let sent = ok
            && sendmsg(
                &child,
                &[IoSlice::new(b"x")],
                &mut control,
                SendFlags::empty(),
            )
            .is_ok();
        // SAFETY: ends the forked child without running the parent's destructors.
        unsafe { libc::_exit(if sent { 0 } else { 1 }) };
    }
    drop(child);
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    recvmsg(
        &parent,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .unwrap();
    let received = control
        .drain()
        .find_map(|m| match m {
            RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
            _ => None,
        })
        .expect("no fd received");
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: {status}"
    );
    received
}

/// The soft fd limit up to the hard one, for tests that hold over a thousand buffers.
pub(crate) fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}
