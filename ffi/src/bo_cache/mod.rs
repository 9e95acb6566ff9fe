//! `gpusvc_bo_cache_*` / `gpusvc_bo_*`: the buffer-object cache (the `bo-cache` crate) seen
//! from C: exactly one reference-counted object per GEM handle of the cache's DRM file
//! description, imports of borrowed dma-buf fds with their sizes checked, and exports.
//!
//! A `gpusvc_bo_cache` owns its description: `gpusvc_bo_cache_open(path)` opens a DRM node (a
//! render node, normally) anew, and its handles are valid on `gpusvc_bo_cache_device_fd`;
//! `gpusvc_bo_cache_new_memfd` is a fake description (sealed memfds stand in for dma-bufs, with
//! the kernel's handle rules) for tests and machines without DRM. Each successful import, plane
//! import or `gpusvc_bo_ref` gives a new `gpusvc_bo` handle that holds one reference; handles of
//! one buffer share its object (and its GEM handle), and `gpusvc_bo_free` releases one reference:
//! the last release closes the GEM handle, once. fds passed in are borrowed, never closed; an
//! exported fd is the caller's. A `gpusvc_bo` stays valid after its cache is freed.
//!
//! Both handle kinds are shared: any thread may use and free them. Every rule (sizes, identity,
//! the refcount protocol) is the crate's; this module converts.
//!
//! * [`types`]: the C structs, fd arguments and the crate's errors as codes;
//! * [`exports`]: the functions.

use std::sync::Arc;

use bo_cache::{Bo, BoCache};

use crate::kit::FfiError;
use crate::kit::handle::{self, Kind};

pub(crate) mod exports;
pub(crate) mod types;

pub use exports::*;
pub use types::*;

/// An opaque buffer-object cache over one DRM file description. Thread-safe: any thread may use
/// it, and free it once no other thread is still calling with it (a call in flight finishes on
/// a live cache either way; objects outlive it).
#[derive(Debug)]
pub struct gpusvc_bo_cache {
    _opaque: [u8; 0],
}

/// An opaque reference to a buffer object of a cache: one reference of its count. Thread-safe;
/// freed with `gpusvc_bo_free`.
#[derive(Debug)]
pub struct gpusvc_bo {
    _opaque: [u8; 0],
}

/// The cache behind a cache handle.
pub(crate) fn cache(c: *const gpusvc_bo_cache) -> Result<Arc<BoCache>, FfiError> {
    handle::shared(c, "cache", Kind::BoCache)
}

/// The object behind a bo handle.
pub(crate) fn bo(b: *const gpusvc_bo) -> Result<Arc<Bo>, FfiError> {
    handle::shared(b, "bo", Kind::Bo)
}

/// A new handle holding `bo` (one reference).
pub(crate) fn new_bo(bo: Bo) -> *mut gpusvc_bo {
    handle::new_shared(Kind::Bo, bo)
}
