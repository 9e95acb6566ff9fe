//! Compile and link status storage (the "Status Storage" of the original design brief, which is
//! not part of this repository).
//!
//! A shader's compile status is `Success` once it compiled; it is reference-counted by the cached
//! programs that use it. When the last such program leaves the cache the status becomes
//! `Unknown` again. Statuses of shaders that no cached program uses yet are kept in a bounded
//! LRU so they cannot grow without limit.

use std::collections::HashMap;
use std::num::NonZeroUsize;

use lru::LruCache;

use crate::key::{DigestBuildHasher, ShaderHash};

/// Whether a shader is known to compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileStatus {
    /// Not known: compile it.
    Unknown,
    /// Compiled successfully before; the driver compile may be deferred.
    Success,
}

/// Whether a program is known to link (it is in the binary cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkStatus {
    /// Not known.
    Unknown,
    /// Linked successfully and cached.
    Success,
}

#[derive(Debug)]
pub(crate) struct ShaderStatuses {
    /// Shaders used by cached programs, with the number of such programs.
    referenced: HashMap<ShaderHash, u32, DigestBuildHasher>,
    /// Shaders known to compile that no cached program uses.
    unreferenced: LruCache<ShaderHash, (), DigestBuildHasher>,
}

impl ShaderStatuses {
    pub(crate) fn new(max_unreferenced: NonZeroUsize) -> Self {
        ShaderStatuses {
            referenced: HashMap::default(),
            unreferenced: LruCache::with_hasher(max_unreferenced, DigestBuildHasher::default()),
        }
    }

    pub(crate) fn status(&self, hash: &ShaderHash) -> CompileStatus {
        if self.referenced.contains_key(hash) || self.unreferenced.contains(hash) {
            CompileStatus::Success
        } else {
            CompileStatus::Unknown
        }
    }

    /// How many statuses of shaders no cached program uses are kept (the newest).
    pub(crate) fn unreferenced_capacity(&self) -> usize {
        self.unreferenced.cap().get()
    }

    pub(crate) fn compiled(&mut self, hash: ShaderHash) {
        if !self.referenced.contains_key(&hash) {
            self.unreferenced.put(hash, ());
        }
    }

    /// A cached program now uses `hash` (which therefore compiled).
    pub(crate) fn add_ref(&mut self, hash: ShaderHash) {
        self.unreferenced.pop(&hash);
        *self.referenced.entry(hash).or_insert(0) += 1;
    }

    /// A cached program that used `hash` left; at zero the status becomes unknown.
    pub(crate) fn release(&mut self, hash: &ShaderHash) {
        if let Some(count) = self.referenced.get_mut(hash) {
            *count -= 1;
            if *count == 0 {
                self.referenced.remove(hash);
            }
        }
    }

    /// Number of references, for tests.
    pub(crate) fn refcount(&self, hash: &ShaderHash) -> u32 {
        self.referenced.get(hash).copied().unwrap_or(0)
    }

    pub(crate) fn clear(&mut self) {
        self.referenced.clear();
        self.unreferenced.clear();
    }
}
