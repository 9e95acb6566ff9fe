//! `gpusvc_bo_cache_open` on paths that are not render nodes: every one is a code, nothing
//! blocks, and the out slot is written only on success. (On a machine with a render node the
//! open itself is exercised by bo-cache's DRM tier, `bo-cache/tests/drm.rs`.)

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::time::{Duration, Instant};

use gpusvc::*;
use gpusvc_result::*;

/// Opens `path` (as raw bytes) with `config`; the code and whether `*out` was written.
fn open(path: &[u8], config: Option<&gpusvc_bo_cache_config>) -> (gpusvc_result, bool) {
    let path = CString::new(path).unwrap();
    let sentinel = ptr::without_provenance_mut(0x5e1);
    let mut out: *mut gpusvc_bo_cache = sentinel;
    let config = config.map_or(ptr::null(), |c| c as *const _);
    // SAFETY: a NUL-terminated path, a config or NULL, a live out slot.
    let r = unsafe { gpusvc_bo_cache_open(path.as_ptr(), config, &mut out) };
    if r == GPUSVC_OK {
        // SAFETY: a handle the call just made, freed once.
        assert_eq!(unsafe { gpusvc_bo_cache_free(out) }, GPUSVC_OK);
    }
    (r, out != sentinel)
}

#[test]
fn paths_that_are_not_render_nodes_are_codes_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let fifo = dir.path().join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let mut config = gpusvc_bo_cache_config {
        struct_size: size_of::<gpusvc_bo_cache_config>(),
        max_table_bytes: 0,
        identity_check: false,
        max_refs: 0,
    };
    assert_eq!(
        // SAFETY: a live out slot.
        unsafe { gpusvc_bo_cache_config_defaults(&mut config) },
        GPUSVC_OK
    );
    let started = Instant::now();
    let bytes = |p: &Path| p.as_os_str().as_bytes().to_vec();
    for cfg in [None, Some(&config)] {
        assert_eq!(
            open(&bytes(&dir.path().join("missing")), cfg),
            (GPUSVC_BO_CACHE_KERNEL_ERROR, false)
        );
        for p in [&file, &fifo, Path::new("/dev/null")] {
            assert_eq!(
                open(&bytes(p), cfg),
                (GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE, false),
                "{}",
                p.display()
            );
        }
        // Paths are bytes: a non-UTF-8 one is a path like any other (here, a missing one).
        assert_eq!(
            open(b"/dev/\xff", cfg),
            (GPUSVC_BO_CACHE_KERNEL_ERROR, false)
        );
        assert_eq!(
            open(&bytes(dir.path()), cfg),
            (GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE, false)
        );
    }
    assert!(started.elapsed() < Duration::from_secs(5), "nothing blocks");

    let mut out: *mut gpusvc_bo_cache = ptr::null_mut();
    // SAFETY: NULL path, live out slot; then a path and a NULL out.
    unsafe {
        assert_eq!(
            gpusvc_bo_cache_open(ptr::null(), ptr::null(), &mut out),
            GPUSVC_NULL_ARGUMENT
        );
        assert!(out.is_null());
        let path = CString::new("/dev/null").unwrap();
        assert_eq!(
            gpusvc_bo_cache_open(path.as_ptr(), ptr::null(), ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
    }
    assert_eq!(GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE as u32, 509);
}

#[test]
fn a_memfd_cache_has_no_device_fd_and_null_arguments_are_refused() {
    let mut cache: *mut gpusvc_bo_cache = ptr::null_mut();
    // SAFETY: a live out slot.
    assert_eq!(unsafe { gpusvc_bo_cache_new_memfd(&mut cache) }, GPUSVC_OK);
    let mut fd = -7;
    // SAFETY: a live handle and out slot; then NULLs.
    unsafe {
        assert_eq!(
            gpusvc_bo_cache_device_fd(cache, &mut fd),
            GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE
        );
        assert_eq!(
            gpusvc_bo_cache_device_fd(ptr::null(), &mut fd),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(
            gpusvc_bo_cache_device_fd(cache, ptr::null_mut()),
            GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(fd, -7, "nothing written on error");
        assert_eq!(gpusvc_bo_cache_free(cache), GPUSVC_OK);
        assert_eq!(
            gpusvc_bo_cache_device_fd(cache, &mut fd),
            GPUSVC_INVALID_HANDLE
        );
    }
    assert_eq!(fd, -7);
}
