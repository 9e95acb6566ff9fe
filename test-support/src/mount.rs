//! A private mount namespace, for tests that mount something (root only).

/// Gives the calling thread (and the threads it starts afterwards) a private mount namespace in
/// which `/` no longer propagates mounts. `Err` with the reason when that is not allowed here.
pub fn private_mount_namespace() -> Result<(), String> {
    let errno = || std::io::Error::last_os_error();
    // SAFETY: unshare takes no pointers; CLONE_NEWNS gives this thread a private copy of the
    // mounts.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(format!("unshare(CLONE_NEWNS): {}", errno()));
    }
    let root = std::ffi::CString::new("/").unwrap();
    // SAFETY: a valid NUL-terminated path that outlives the call; null source, type and data are
    // allowed for a propagation change.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(format!("making / private: {}", errno()));
    }
    Ok(())
}
