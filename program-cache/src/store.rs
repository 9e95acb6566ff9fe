//! The byte-budget binary store and its eviction policies (the seed's ProgramCacheLruHelper).
//!
//! Recency is kept by `lru::LruCache` (unbounded; the budget is in bytes, not entries):
//! * [`EvictionPolicy::Lru`] evicts the least recently used program.
//! * [`EvictionPolicy::PageLruMru`] evicts the *most* recently used program of the *least*
//!   recently used page: within one page programs are loaded once (resource-loading pattern, MRU
//!   is optimal), across pages recency matters (LRU). A program saved or loaded by another page
//!   moves to that page. Programs given no page share one anonymous page.

use lru::LruCache;

use crate::key::{DigestBuildHasher, ProgramKey};
use crate::program::SharedProgram;

/// A client / page / tab identity given by the host.
pub type PageId = u64;

/// Which entry to evict when the budget is exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvictionPolicy {
    /// Least recently used program first (the seed's final choice).
    #[default]
    Lru,
    /// Most recently used program of the least recently used page first.
    PageLruMru,
}

#[derive(Debug)]
struct Entry {
    program: SharedProgram,
    size: usize,
    page: Option<PageId>,
    /// Loaded from the disk store (not produced by this process's driver).
    from_disk: bool,
}

/// Byte-budget store of programs. Not thread-safe by itself: [`crate::ProgramCache`] wraps it.
#[derive(Debug)]
pub(crate) struct BinaryStore {
    entries: LruCache<ProgramKey, Entry, DigestBuildHasher>,
    /// Page recency (front = most recent) and, per page, program recency.
    pages: LruCache<Option<PageId>, LruCache<ProgramKey, ()>>,
    policy: EvictionPolicy,
    used: usize,
}

/// What left the store, for status bookkeeping.
pub(crate) type Evicted = Vec<(ProgramKey, SharedProgram)>;

impl BinaryStore {
    pub(crate) fn new(policy: EvictionPolicy) -> Self {
        BinaryStore {
            entries: LruCache::unbounded_with_hasher(DigestBuildHasher::default()),
            pages: LruCache::unbounded(),
            policy,
            used: 0,
        }
    }

    pub(crate) fn used(&self) -> usize {
        self.used
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn contains(&self, key: &ProgramKey) -> bool {
        self.entries.contains(key)
    }

    /// Marks `key` as used by `page` now (moving it between pages when needed).
    fn touch_page(&mut self, key: ProgramKey, old: Option<PageId>, new: Option<PageId>) {
        if old != new {
            self.unlink_page(&key, old);
        }
        self.pages
            .get_or_insert_mut(new, LruCache::unbounded)
            .put(key, ());
    }

    fn unlink_page(&mut self, key: &ProgramKey, page: Option<PageId>) {
        if let Some(stack) = self.pages.peek_mut(&page) {
            stack.pop(key);
            if stack.is_empty() {
                self.pages.pop(&page);
            }
        }
    }

    /// Inserts or replaces `key`; the caller made room first. Returns the replaced program.
    pub(crate) fn insert(
        &mut self,
        key: ProgramKey,
        program: SharedProgram,
        size: usize,
        page: Option<PageId>,
        from_disk: bool,
    ) -> Option<SharedProgram> {
        let old = self.remove(&key);
        self.touch_page(key, None, page);
        self.entries.put(
            key,
            Entry {
                program,
                size,
                page,
                from_disk,
            },
        );
        self.used += size;
        old
    }

    /// Returns and promotes `key` (and moves it to `page` when one is given).
    pub(crate) fn get(&mut self, key: &ProgramKey, page: Option<PageId>) -> Option<SharedProgram> {
        let entry = self.entries.get_mut(key)?;
        let program = entry.program.clone();
        let old = entry.page;
        let new = page.or(old);
        entry.page = new;
        self.touch_page(*key, old, new);
        Some(program)
    }

    /// True when `key` is stored and came from the disk store.
    pub(crate) fn is_from_disk(&self, key: &ProgramKey) -> bool {
        self.entries.peek(key).is_some_and(|e| e.from_disk)
    }

    /// Removes every entry that came from the disk store; returns what left.
    pub(crate) fn remove_from_disk(&mut self) -> Evicted {
        let keys: Vec<ProgramKey> = self
            .entries
            .iter()
            .filter(|(_, e)| e.from_disk)
            .map(|(k, _)| *k)
            .collect();
        keys.into_iter()
            .filter_map(|k| self.remove(&k).map(|p| (k, p)))
            .collect()
    }

    /// Returns `key` without changing any recency.
    pub(crate) fn peek(&self, key: &ProgramKey) -> Option<SharedProgram> {
        self.entries.peek(key).map(|e| e.program.clone())
    }

    pub(crate) fn remove(&mut self, key: &ProgramKey) -> Option<SharedProgram> {
        let entry = self.entries.pop(key)?;
        self.used -= entry.size;
        self.unlink_page(key, entry.page);
        Some(entry.program)
    }

    /// The key the policy evicts next.
    pub(crate) fn victim(&self) -> Option<ProgramKey> {
        match self.policy {
            EvictionPolicy::Lru => self.entries.peek_lru().map(|(k, _)| *k),
            EvictionPolicy::PageLruMru => self
                .pages
                .peek_lru()
                .and_then(|(_, stack)| stack.peek_mru())
                .map(|(k, _)| *k),
        }
    }

    /// Evicts until `used <= limit`; returns what left.
    pub(crate) fn evict_to(&mut self, limit: usize) -> Evicted {
        let mut evicted = Vec::new();
        while self.used > limit {
            let Some(key) = self.victim() else { break };
            if let Some(program) = self.remove(&key) {
                evicted.push((key, program));
            }
        }
        evicted
    }

    /// Removes everything; returns what left.
    pub(crate) fn drain(&mut self) -> Evicted {
        self.evict_to(0)
    }

    /// Keys from the next victim on, in eviction order (for tests and inspection). Evicting one
    /// entry does not reorder the others, so this is the sequence of victims.
    pub(crate) fn eviction_order(&self) -> Vec<ProgramKey> {
        match self.policy {
            // `iter` runs most to least recent.
            EvictionPolicy::Lru => self.entries.iter().rev().map(|(k, _)| *k).collect(),
            EvictionPolicy::PageLruMru => self
                .pages
                .iter()
                .rev()
                .flat_map(|(_, stack)| stack.iter().map(|(k, _)| *k))
                .collect(),
        }
    }
}
