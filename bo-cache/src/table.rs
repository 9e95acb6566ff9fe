//! The handle table: a four-level radix tree indexed by the GEM handle's bytes, in the shape of
//! Mesa's `util_sparse_array`. Nodes are created on demand under the cache's import lock,
//! published with `Release` stores and read with `Acquire` loads, and freed only when the table
//! is dropped, so a lock-free lookup needs no reclamation scheme and a slot's address is stable
//! for the cache's life.

use std::mem::size_of;
use std::ptr;

use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, Ordering, take_ptr};

const FANOUT: usize = 256;

/// One buffer object's state. Every field is atomic so that lock-free readers are defined; the
/// protocol in `cache.rs` says who may write what when.
#[derive(Debug)]
pub(crate) struct Slot {
    /// References held; 0 = free. See the crate docs for the protocol.
    pub(crate) refcount: AtomicU32,
    /// Bumped each time the slot is filled for a new buffer.
    pub(crate) generation: AtomicU32,
    /// The import flags the object was created with.
    pub(crate) flags: AtomicU32,
    /// Non-zero once a `ForeignHandle` was seen on this slot: the handle number names another
    /// buffer (its identity is in the cache's `State::foreign`), so the cache must not close
    /// it. Stays set after the stale object's release, until an import gets the number for a
    /// buffer other than that one. Written under the import lock only.
    pub(crate) foreign: AtomicU32,
    pub(crate) size: AtomicU64,
    pub(crate) dev: AtomicU64,
    pub(crate) ino: AtomicU64,
}

impl Slot {
    fn new() -> Self {
        Slot {
            refcount: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            flags: AtomicU32::new(0),
            foreign: AtomicU32::new(0),
            size: AtomicU64::new(0),
            dev: AtomicU64::new(0),
            ino: AtomicU64::new(0),
        }
    }
}

type Leaf = [Slot; FANOUT];

#[derive(Debug)]
struct Dir<T> {
    children: [AtomicPtr<T>; FANOUT],
}

impl<T> Dir<T> {
    fn new() -> Self {
        Dir {
            children: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    /// The child at `i`, if one was published.
    #[inline]
    fn get(&self, i: u8) -> Option<&T> {
        // Acquire: pairs with the Release store in `get_or_create`, so the child's contents
        // (initialised before it was published) are visible here.
        let p = self.children[usize::from(i)].load(Ordering::Acquire);
        // SAFETY: a non-null child came from `Box::into_raw` and is freed only by the table's
        // `Drop`, which cannot run while `&self` borrows the table.
        unsafe { p.as_ref() }
    }

    /// The child at `i`, created with `make` if absent. Only one thread at a time may call
    /// this on a table (the cache's import lock).
    fn get_or_create(&self, i: u8, make: impl FnOnce() -> T) -> &T {
        if let Some(child) = self.get(i) {
            return child;
        }
        let p = Box::into_raw(Box::new(make()));
        // Release: publishes the initialised child to lock-free `get`s (Acquire).
        self.children[usize::from(i)].store(p, Ordering::Release);
        // SAFETY: just created from a Box; freed only by the table's `Drop`.
        unsafe { &*p }
    }

    /// Frees every published child, each with `free`.
    fn drain(&mut self, mut free: impl FnMut(Box<T>)) {
        for c in &mut self.children {
            let p = take_ptr(c);
            if !p.is_null() {
                // SAFETY: came from `Box::into_raw` and is swapped out exactly once; `&mut self`
                // excludes every other user.
                free(unsafe { Box::from_raw(p) });
            }
        }
    }
}

/// Bytes of one interior node.
pub(crate) const DIR_BYTES: usize = size_of::<Dir<()>>();
/// Bytes of one leaf (256 slots).
pub(crate) const LEAF_BYTES: usize = size_of::<Leaf>();

type L1 = Dir<Leaf>;
type L2 = Dir<L1>;

/// The handle table.
#[derive(Debug)]
pub(crate) struct Table {
    root: Box<Dir<L2>>,
}

impl Table {
    pub(crate) fn new() -> Self {
        Table {
            root: Box::new(Dir::new()),
        }
    }

    /// Bytes of the empty table (its root).
    pub(crate) const BASE_BYTES: usize = DIR_BYTES;

    /// The slot of `handle`, if its leaf exists. Lock-free.
    #[inline]
    pub(crate) fn get(&self, handle: u32) -> Option<&Slot> {
        let [a, b, c, d] = handle.to_be_bytes();
        let leaf = self.root.get(a)?.get(b)?.get(c)?;
        Some(&leaf[usize::from(d)])
    }

    /// The slot of `handle`, creating the nodes on its path if `*bytes` plus what they take
    /// stays within `cap`; `*bytes` is the table's size and is updated. `None` when it would
    /// not fit (nothing is created then). The caller holds the cache's import lock.
    ///
    /// Inlined walk for the common case (the leaf exists); creation is out of line.
    #[inline]
    pub(crate) fn get_or_insert(
        &self,
        handle: u32,
        bytes: &mut usize,
        cap: usize,
    ) -> Option<&Slot> {
        let [a, b, c, d] = handle.to_be_bytes();
        let l2 = self.root.get(a);
        let l1 = l2.and_then(|n| n.get(b));
        match l1.and_then(|n| n.get(c)) {
            Some(leaf) => Some(&leaf[usize::from(d)]),
            None => self.insert_path(handle, l2.is_some(), l1.is_some(), bytes, cap),
        }
    }

    /// [`get_or_insert`](Self::get_or_insert) when the leaf of `handle` is missing; `have_l2`
    /// and `have_l1` say which interior nodes on its path the walk found.
    #[cold]
    #[inline(never)]
    fn insert_path(
        &self,
        handle: u32,
        have_l2: bool,
        have_l1: bool,
        bytes: &mut usize,
        cap: usize,
    ) -> Option<&Slot> {
        let [a, b, c, d] = handle.to_be_bytes();
        let needed = match (have_l2, have_l1) {
            (false, _) => 2 * DIR_BYTES + LEAF_BYTES,
            (true, false) => DIR_BYTES + LEAF_BYTES,
            (true, true) => LEAF_BYTES,
        };
        if bytes.checked_add(needed).is_none_or(|total| total > cap) {
            return None;
        }
        *bytes += needed;
        let leaf = self
            .root
            .get_or_create(a, Dir::new)
            .get_or_create(b, Dir::new)
            .get_or_create(c, || std::array::from_fn(|_| Slot::new()));
        Some(&leaf[usize::from(d)])
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        self.root.drain(|mut l2| l2.drain(|mut l1| l1.drain(drop)));
    }
}
