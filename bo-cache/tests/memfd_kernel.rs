//! The fake DRM file follows the kernel's GEM/PRIME rules (IGT `prime_self_import`).

use std::num::NonZeroU32;
use std::os::fd::AsFd;

use bo_cache::{DRM_CLOEXEC, DRM_RDWR, Errno, Kernel, KernelOp, MemfdKernel};

fn h(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

#[test]
fn fresh_buffers_get_the_lowest_free_handle_from_one() {
    let k = MemfdKernel::new();
    let bufs: Vec<_> = (0..3)
        .map(|_| MemfdKernel::new_buffer(4096).unwrap())
        .collect();
    let handles: Vec<_> = bufs
        .iter()
        .map(|b| k.fd_to_handle(b.as_fd()).unwrap().get())
        .collect();
    assert_eq!(handles, [1, 2, 3]);
    k.gem_close(h(2)).unwrap();
    k.gem_close(h(1)).unwrap();
    let b = MemfdKernel::new_buffer(4096).unwrap();
    assert_eq!(
        k.fd_to_handle(b.as_fd()).unwrap().get(),
        1,
        "lowest free first"
    );
    let c = MemfdKernel::new_buffer(4096).unwrap();
    assert_eq!(k.fd_to_handle(c.as_fd()).unwrap().get(), 2);
    assert_eq!(k.stats().open_handles, 3);
}

#[test]
fn reimport_via_same_fd_dup_or_reopen_returns_the_same_handle() {
    let k = MemfdKernel::new();
    let buf = MemfdKernel::new_buffer(8192).unwrap();
    let first = k.fd_to_handle(buf.as_fd()).unwrap();
    assert_eq!(k.fd_to_handle(buf.as_fd()).unwrap(), first);
    let dup = buf.try_clone().unwrap();
    assert_eq!(k.fd_to_handle(dup.as_fd()).unwrap(), first);
    // A new file description on the same inode is still the same buffer.
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&buf));
    let reopened = std::fs::File::open(path).unwrap();
    assert_eq!(k.fd_to_handle(reopened.as_fd()).unwrap(), first);
    // Closing every fd does not end the handle: the handle holds the buffer.
    drop((buf, dup, reopened));
    let exported = k.handle_to_fd(first, 0).unwrap();
    assert_eq!(
        k.fd_to_handle(exported.as_fd()).unwrap(),
        first,
        "self-import of an export"
    );
    let st = k.stats();
    assert_eq!(
        (st.open_handles, st.handles_created, st.reimports),
        (1, 1, 4)
    );
}

#[test]
fn closing_an_unknown_handle_is_einval_and_counted() {
    let k = MemfdKernel::new();
    let buf = MemfdKernel::new_buffer(4096).unwrap();
    let handle = k.fd_to_handle(buf.as_fd()).unwrap();
    k.gem_close(handle).unwrap();
    assert_eq!(k.gem_close(handle), Err(Errno::INVAL));
    assert_eq!(k.gem_close(h(77)), Err(Errno::INVAL));
    assert_eq!(k.handle_to_fd(handle, 0).err(), Some(Errno::NOENT));
    let st = k.stats();
    assert_eq!((st.closes, st.double_closes, st.open_handles), (1, 2, 0));
    // After the close, the buffer re-imports as a new handle (the number may be recycled).
    assert_eq!(k.fd_to_handle(buf.as_fd()).unwrap(), handle);
    assert_eq!(k.stats().handles_created, 2);
}

#[test]
fn non_memfd_or_unsealed_fds_are_refused() {
    let k = MemfdKernel::new();
    let (r, _w) = std::io::pipe().unwrap();
    assert_eq!(
        k.fd_to_handle(r.as_fd()),
        Err(Errno::INVAL),
        "a pipe is not a dma-buf"
    );
    let unsealed = rustix::fs::memfd_create(c"unsealed", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    assert_eq!(
        k.fd_to_handle(unsealed.as_fd()),
        Err(Errno::INVAL),
        "size not fixed"
    );
    let dir = std::fs::File::open("/").unwrap();
    assert_eq!(k.fd_to_handle(dir.as_fd()), Err(Errno::INVAL));
    assert_eq!(k.stats().open_handles, 0);
}

#[test]
fn injected_faults_fire_once_in_order_and_have_no_effect() {
    let k = MemfdKernel::new();
    let buf = MemfdKernel::new_buffer(4096).unwrap();
    k.fail_nth(KernelOp::FdToHandle, 1, Errno::NOMEM);
    let handle = k.fd_to_handle(buf.as_fd()).unwrap();
    assert_eq!(
        k.fd_to_handle(buf.as_fd()),
        Err(Errno::NOMEM),
        "second call fails"
    );
    assert_eq!(
        k.fd_to_handle(buf.as_fd()).unwrap(),
        handle,
        "then back to normal"
    );
    k.fail_next(KernelOp::GemClose, Errno::INTR);
    assert_eq!(k.gem_close(handle), Err(Errno::INTR));
    assert!(
        k.handle_identity(handle).is_some(),
        "a failed close leaves the handle open"
    );
    k.fail_next(KernelOp::Size, Errno::IO);
    assert_eq!(k.size(buf.as_fd()), Err(Errno::IO));
    assert_eq!(k.size(buf.as_fd()), Ok(4096));
    k.gem_close(handle).unwrap();
    let st = k.stats();
    assert_eq!((st.injected, st.double_closes, st.open_handles), (3, 0, 0));
}

#[test]
fn sparse_mode_hands_out_high_distinct_handles() {
    let k = MemfdKernel::sparse(42);
    let bufs: Vec<_> = (0..64)
        .map(|_| MemfdKernel::new_buffer(4096).unwrap())
        .collect();
    let mut handles: Vec<u32> = bufs
        .iter()
        .map(|b| k.fd_to_handle(b.as_fd()).unwrap().get())
        .collect();
    assert!(handles.iter().all(|&x| x >= 1 && x <= i32::MAX as u32));
    assert!(
        handles.iter().any(|&x| x > 1 << 24),
        "sparse handles are spread out"
    );
    for (b, &x) in bufs.iter().zip(&handles) {
        assert_eq!(k.fd_to_handle(b.as_fd()).unwrap().get(), x);
    }
    handles.sort_unstable();
    handles.dedup();
    assert_eq!(handles.len(), 64);
}

#[test]
fn export_flags_are_the_kernels_cloexec_and_rdwr_only() {
    let k = MemfdKernel::new();
    let buf = MemfdKernel::new_buffer(4096).unwrap();
    let handle = k.fd_to_handle(buf.as_fd()).unwrap();
    for bad in [1u32, 0x40, u32::MAX, DRM_CLOEXEC | 0x100] {
        assert_eq!(
            k.handle_to_fd(handle, bad).err(),
            Some(Errno::INVAL),
            "{bad:#x}"
        );
    }
    for (flags, cloexec) in [
        (0, false),
        (DRM_RDWR, false),
        (DRM_CLOEXEC, true),
        (DRM_CLOEXEC | DRM_RDWR, true),
    ] {
        let fd = k.handle_to_fd(handle, flags).unwrap();
        let fd_flags = rustix::io::fcntl_getfd(&fd).unwrap();
        assert_eq!(
            fd_flags.contains(rustix::io::FdFlags::CLOEXEC),
            cloexec,
            "{flags:#x}"
        );
        assert_eq!(k.fd_to_handle(fd.as_fd()).unwrap(), handle);
    }
    k.gem_close(handle).unwrap();
}
