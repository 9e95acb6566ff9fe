//! The in-memory byte-budget binary store and its eviction policies (the `ProgramCacheLruHelper`
//! of the original design brief, which is not part of this repository).
//!
//! Every policy is byte-weighted (each program counts its stored size against the capacity) and
//! deterministic (no randomness, no clock). The capacity is the cache's budget, a quarter of it
//! under moderate memory pressure ([`BinaryStore::set_capacity`]); segment targets below are
//! fractions of it.
//!
//! * [`EvictionPolicy::Lru`] evicts the least recently used program.
//! * [`EvictionPolicy::PageLruMru`] evicts the *most* recently used program of the *least*
//!   recently used page: within one page programs are loaded once (resource-loading pattern, MRU
//!   is optimal), across pages recency matters (LRU). A program saved or loaded by another page
//!   moves to that page. Programs given no page share one anonymous page.
//! * [`EvictionPolicy::Slru`] (segmented LRU): new programs enter a probation LRU segment; a hit
//!   there moves the program to a protected LRU segment (80 % of the capacity; its overflow is
//!   demoted back to probation). Victims come from probation first.
//! * [`EvictionPolicy::S3Fifo`]: a small FIFO (10 % of the capacity), a main FIFO and a ghost
//!   FIFO of keys only. New programs enter the small queue (or the main one when their key is in
//!   the ghost); a program leaving the small queue moves to main when it was hit there, otherwise
//!   it is evicted and its key remembered in the ghost (as many keys as represent the main
//!   queue's capacity in bytes). Main reinserts a program that was hit (2-bit counter,
//!   decremented on each reinsertion) and evicts one that was not.
//! * [`EvictionPolicy::WTinyLfu`] (window TinyLFU, after Caffeine): a window LRU in front of a
//!   segmented LRU main area (probation + protected, protected 80 % of main). The window's share
//!   is 1 % of the capacity, or the largest program saved since the store was last empty when
//!   that is more (up to a quarter of the capacity). Every lookup, hit or miss, counts the key in
//!   a count-min sketch of 4-bit counters that halves all counts periodically (aging). A save
//!   goes to the back of the window; what overflows the window's share (never the program just
//!   saved) is queued as a *candidate* for main. An eviction takes the oldest candidate (or, when
//!   there is none, the window's least recent program): while main has room it moves into main;
//!   otherwise it competes with main's next victim (probation's least recent, else protected's)
//!   and is admitted (the victim evicted) only when its estimated frequency exceeds the
//!   victim's by more than one (`ADMISSION_MARGIN`); otherwise the candidate is evicted. So a
//!   program must be asked for more often than what it would displace, which keeps a working set
//!   larger than the cache (a cyclic scan, one-off programs) from flushing everything. A
//!   candidate hit before its contest is promoted to protected.
//!
//! # Eviction order
//! [`BinaryStore::eviction_order`] lists the keys in exactly the order successive evictions
//! (with no lookup, save or removal in between) would remove them. For LRU, page LRU/MRU and
//! SLRU an eviction never reorders the others, so the list is read off the queues. For S3-FIFO
//! and W-TinyLFU an eviction step may first move programs between queues (a hit program
//! reinserted into main, a window candidate admitted to main) without evicting them, so the list
//! is computed by running the eviction steps on a copy of the store: still exactly the sequence
//! of victims, at the cost of copying the bookkeeping (not the binaries).

use lru::LruCache;

use crate::disk::PackedEntry;
use crate::key::{DigestBuildHasher, ProgramKey, ShaderHash};
use crate::program::SharedProgram;

/// What the store holds for a key: a program, or an entry the disk loader read and checked but
/// has not decoded yet (decoded after the load or on its first lookup, when it is replaced by
/// its program; see `disk::packed`).
#[derive(Debug, Clone)]
pub(crate) enum Value {
    /// A decoded program.
    Program(SharedProgram),
    /// A checked, still encoded disk entry.
    Packed(PackedEntry),
}

impl Value {
    /// The shaders whose compile statuses this entry holds.
    pub(crate) fn shader_hashes(&self) -> std::vec::IntoIter<ShaderHash> {
        match self {
            Value::Program(p) => crate::disk::entry_shaders(p).into_iter(),
            Value::Packed(p) => p.shaders().collect::<Vec<_>>().into_iter(),
        }
    }

    /// Bytes reserved for a packed entry's decoding (its claimed size beyond what it holds now).
    fn reserve(&self, size: usize) -> usize {
        match self {
            Value::Program(_) => 0,
            Value::Packed(p) => p.claimed_size().saturating_sub(size),
        }
    }
}

impl From<SharedProgram> for Value {
    fn from(p: SharedProgram) -> Self {
        Value::Program(p)
    }
}

/// A client / page / tab identity given by the host.
pub type PageId = u64;

/// Which entry to evict when the budget is exceeded. Every policy is byte-weighted (a program
/// counts its stored size) and deterministic, and [`crate::ProgramCache::eviction_order`] lists
/// the exact sequence of victims under each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EvictionPolicy {
    /// Least recently used program first (the original design brief's choice). A working set
    /// larger than the budget, asked for in a fixed cyclic order, gets no hits at all under it.
    Lru,
    /// Most recently used program of the least recently used page first: within one page
    /// programs are loaded once (MRU is optimal), across pages recency matters (LRU). A program
    /// saved or loaded by another page moves to that page; programs given no page share one.
    PageLruMru,
    /// Segmented LRU: new programs enter a probation segment, a hit moves one to a protected
    /// segment (80 % of the budget; its overflow goes back to probation); victims come from
    /// probation first.
    Slru,
    /// S3-FIFO: new programs enter a small FIFO (10 % of the budget); one hit there moves to the
    /// main FIFO, one not hit is evicted and its key remembered in a ghost list, so that its next
    /// save goes straight to main; main reinserts programs that were hit and evicts the others.
    S3Fifo,
    /// Window TinyLFU (after Caffeine), the default: new programs enter a small LRU window; a
    /// program leaving it enters the segmented-LRU main area only when a frequency sketch of
    /// lookups says it is asked for more often than the program it would displace. Chosen by
    /// measurement (`examples/policy_sim.rs`): the only policy close to the best on cyclic
    /// working sets larger than the budget, multi-tab traces and one-off programs alike.
    #[default]
    WTinyLfu,
}

impl EvictionPolicy {
    /// Every policy, in declaration order: what tests, benches and the policy simulation
    /// iterate over.
    pub const ALL: [EvictionPolicy; 5] = [
        EvictionPolicy::Lru,
        EvictionPolicy::PageLruMru,
        EvictionPolicy::Slru,
        EvictionPolicy::S3Fifo,
        EvictionPolicy::WTinyLfu,
    ];
}

/// Which queue of its policy an entry is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment {
    /// Tracked by the global recency list alone (LRU) or by the page lists (page LRU/MRU).
    Global,
    /// SLRU / W-TinyLFU probation.
    Probation,
    /// SLRU / W-TinyLFU protected.
    Protected,
    /// W-TinyLFU window.
    Window,
    /// W-TinyLFU: left the window, waiting for admission into main.
    Candidate,
    /// S3-FIFO small queue.
    Small,
    /// S3-FIFO main queue.
    Main,
}

#[derive(Debug, Clone)]
struct Entry {
    program: Value,
    size: usize,
    /// For a packed entry: bytes its decoding is expected to add ([`BinaryStore::reserved`]).
    reserve: usize,
    page: Option<PageId>,
    /// Loaded from the disk store (not produced by this process's driver).
    from_disk: bool,
    segment: Segment,
    /// S3-FIFO hit counter (0..=3).
    freq: u8,
}

/// A FIFO / LRU queue of keys with the bytes of its entries. The front is the oldest (next
/// out), the back the newest.
#[derive(Debug, Clone)]
struct Queue {
    order: LruCache<ProgramKey, (), DigestBuildHasher>,
    bytes: usize,
}

impl Queue {
    fn new() -> Self {
        Queue {
            order: LruCache::unbounded_with_hasher(DigestBuildHasher::default()),
            bytes: 0,
        }
    }

    /// Appends `key` at the back.
    fn push(&mut self, key: ProgramKey, size: usize) {
        self.order.put(key, ());
        self.bytes += size;
    }

    /// Removes `key` (which costs `size`) if it is queued.
    fn remove(&mut self, key: &ProgramKey, size: usize) {
        if self.order.pop(key).is_some() {
            self.bytes -= size;
        }
    }

    /// Moves `key` to the back.
    fn move_to_back(&mut self, key: &ProgramKey) {
        self.order.promote(key);
    }

    /// The oldest key.
    fn front(&self) -> Option<ProgramKey> {
        self.order.peek_lru().map(|(k, _)| *k)
    }

    /// Keys from the front (oldest) to the back.
    fn oldest_first(&self) -> impl Iterator<Item = ProgramKey> + '_ {
        self.order.iter().rev().map(|(k, _)| *k)
    }

    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

/// S3-FIFO's ghost: keys recently evicted from the small queue, with the bytes they stood for.
#[derive(Debug, Clone)]
struct Ghost {
    order: LruCache<ProgramKey, usize, DigestBuildHasher>,
    bytes: usize,
}

impl Ghost {
    /// Remembers `key`, forgetting the oldest keys while more than `limit` bytes are remembered.
    fn remember(&mut self, key: ProgramKey, size: usize, limit: usize) {
        if let Some(old) = self.order.put(key, size) {
            self.bytes -= old;
        }
        self.bytes += size;
        while self.bytes > limit {
            match self.order.pop_lru() {
                Some((_, s)) => self.bytes -= s,
                None => break,
            }
        }
    }

    /// Forgets `key`; true when it was remembered.
    fn take(&mut self, key: &ProgramKey) -> bool {
        match self.order.pop(key) {
            Some(s) => {
                self.bytes -= s;
                true
            }
            None => false,
        }
    }
}

/// Count-min sketch of 4-bit counters (saturating at 15, two to a byte), four rows, with
/// periodic halving. Deterministic: rows are indexed by fixed mixes of the key's digest bytes.
#[derive(Debug, Clone)]
struct FrequencySketch {
    /// Four rows of `mask + 1` counters each, packed two to a byte.
    rows: [Vec<u8>; 4],
    mask: usize,
    additions: usize,
    sample_size: usize,
}

/// Per-row seeds of the sketch's index mix.
const ROW_SEEDS: [u64; 4] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0x27D4_EB2F_1656_67C5,
];

/// Capacity bytes per counter in each sketch row (rounded up to a power of two, at least 256):
/// a few counters per program a cache of small (4 KiB) programs holds, so that the keys of a
/// working set several times the cache rarely share all four counters.
const SKETCH_BYTES_PER_COUNTER: usize = 1024;
/// Capacity bytes per program the aging period assumes: every `10 x capacity / this` counted
/// lookups all counters are halved.
const SKETCH_BYTES_PER_ENTRY: usize = 4096;

impl FrequencySketch {
    /// A sketch for a cache of `capacity` bytes.
    fn new(capacity: usize) -> Self {
        let width = (capacity / SKETCH_BYTES_PER_COUNTER)
            .clamp(256, 1 << 24)
            .next_power_of_two();
        let entries = (capacity / SKETCH_BYTES_PER_ENTRY).max(64);
        FrequencySketch {
            rows: std::array::from_fn(|_| vec![0; width / 2]),
            mask: width - 1,
            additions: 0,
            sample_size: 10 * entries,
        }
    }

    fn index(&self, key: &ProgramKey, row: usize) -> usize {
        let b = &key.0;
        let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let tail = u64::from(u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")));
        // splitmix64 finaliser over the digest folded to 64 bits and the row seed.
        let mut z =
            (word(0) ^ word(8).rotate_left(17) ^ tail.rotate_left(41)).wrapping_add(ROW_SEEDS[row]);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z as usize) & self.mask
    }

    /// The counter `i` of `row`.
    fn counter(&self, row: usize, i: usize) -> u8 {
        (self.rows[row][i / 2] >> ((i % 2) * 4)) & 0xF
    }

    /// Counts one occurrence of `key`; halves every counter every `sample_size` additions.
    fn increment(&mut self, key: &ProgramKey) {
        for row in 0..self.rows.len() {
            let i = self.index(key, row);
            if self.counter(row, i) < 15 {
                self.rows[row][i / 2] += 1 << ((i % 2) * 4);
            }
        }
        self.additions += 1;
        if self.additions >= self.sample_size {
            for row in &mut self.rows {
                for pair in row.iter_mut() {
                    *pair = (*pair >> 1) & 0x77;
                }
            }
            self.additions /= 2;
        }
    }

    /// Estimated occurrences of `key` (the smallest of its counters).
    fn frequency(&self, key: &ProgramKey) -> u8 {
        (0..self.rows.len())
            .map(|row| self.counter(row, self.index(key, row)))
            .min()
            .unwrap_or(0)
    }
}

/// The policy's own queues (the global recency list and the entries live in [`BinaryStore`]).
#[derive(Debug, Clone)]
enum Tracker {
    Lru,
    Page {
        /// Page recency (front = most recent) and, per page, program recency.
        pages: LruCache<Option<PageId>, LruCache<ProgramKey, ()>>,
    },
    Slru {
        probation: Queue,
        protected: Queue,
    },
    S3Fifo {
        small: Queue,
        main: Queue,
        ghost: Ghost,
    },
    WTinyLfu {
        window: Queue,
        candidates: Queue,
        probation: Queue,
        protected: Queue,
        sketch: FrequencySketch,
    },
}

/// What one eviction step did.
enum Step {
    /// Removed this entry.
    Evicted(ProgramKey, Value),
    /// Moved an entry between queues; nothing left.
    Moved,
    /// Nothing is stored.
    Empty,
}

/// Share of the capacity S3-FIFO gives its small queue, in percent.
const S3_SMALL_PERCENT: usize = 10;
/// Share of the capacity W-TinyLFU gives its window, in percent.
const WINDOW_PERCENT: usize = 1;
/// W-TinyLFU admits a candidate over main's victim only when its estimated frequency exceeds
/// the victim's by more than this. The candidate's count includes the lookup that just missed
/// (the reason it is in the cache at all), while the victim's next use may not have come yet;
/// without the margin, a cyclic working set larger than the cache lets candidates displace
/// victims that are about to be used. Measured with llvmpipe's program sizes
/// (`examples/policy_sim.rs`): 21.2 % instead of 18.1 % of requests hit for a cycle at a quarter
/// of its working set, and within a point either way on the other workloads.
const ADMISSION_MARGIN: u8 = 1;
/// Share of the (main) capacity SLRU and W-TinyLFU give their protected segment, in percent.
const PROTECTED_PERCENT: usize = 80;

/// Byte-budget store of programs. Not thread-safe by itself: [`crate::ProgramCache`] wraps it.
#[derive(Debug, Clone)]
pub(crate) struct BinaryStore {
    /// Every entry, in global recency order (the LRU policy's order).
    entries: LruCache<ProgramKey, Entry, DigestBuildHasher>,
    tracker: Tracker,
    policy: EvictionPolicy,
    /// Bytes the policy sizes its segments for (the budget, or a quarter of it under moderate
    /// memory pressure).
    capacity: usize,
    used: usize,
    /// Bytes the packed entries are expected to add once decoded (the disk loader admits
    /// entries by `used + reserved`, so a full load still fits once every entry is decoded).
    reserved: usize,
    /// The largest program inserted since the store was last empty (W-TinyLFU's window share).
    largest: usize,
}

/// What left the store, for status bookkeeping.
pub(crate) type Evicted = Vec<(ProgramKey, Value)>;

impl BinaryStore {
    /// An empty store whose segments are sized for `capacity` bytes.
    pub(crate) fn new(policy: EvictionPolicy, capacity: usize) -> Self {
        let tracker = match policy {
            EvictionPolicy::Lru => Tracker::Lru,
            EvictionPolicy::PageLruMru => Tracker::Page {
                pages: LruCache::unbounded(),
            },
            EvictionPolicy::Slru => Tracker::Slru {
                probation: Queue::new(),
                protected: Queue::new(),
            },
            EvictionPolicy::S3Fifo => Tracker::S3Fifo {
                small: Queue::new(),
                main: Queue::new(),
                ghost: Ghost {
                    order: LruCache::unbounded_with_hasher(DigestBuildHasher::default()),
                    bytes: 0,
                },
            },
            EvictionPolicy::WTinyLfu => Tracker::WTinyLfu {
                window: Queue::new(),
                candidates: Queue::new(),
                probation: Queue::new(),
                protected: Queue::new(),
                sketch: FrequencySketch::new(capacity),
            },
        };
        BinaryStore {
            entries: LruCache::unbounded_with_hasher(DigestBuildHasher::default()),
            tracker,
            policy,
            capacity,
            used: 0,
            reserved: 0,
            largest: 0,
        }
    }

    /// W-TinyLFU's window share: 1 % of the capacity, or the largest program inserted since the
    /// store was last empty when that is more (up to a quarter of the capacity). Main then
    /// always leaves room for a save of any size seen before, so a save never has to take bytes
    /// from main without an admission contest (which would let the next candidate into main
    /// free, and churn main as LRU does).
    fn window_target(&self) -> usize {
        (self.capacity / 100 * WINDOW_PERCENT).max(self.largest.min(self.capacity / 4))
    }

    /// Resizes the policy's segments for `capacity` bytes (memory pressure changes it). Stored
    /// entries stay; the caller evicts down to the new limit.
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
    }

    pub(crate) fn used(&self) -> usize {
        self.used
    }

    /// The bytes `key` counts now, when stored.
    pub(crate) fn size_of(&self, key: &ProgramKey) -> Option<usize> {
        self.entries.peek(key).map(|e| e.size)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes the packed entries are expected to add once decoded.
    pub(crate) fn reserved(&self) -> usize {
        self.reserved
    }

    /// Replaces the packed entry of `key` by its decoded `program` of `size` bytes, in place:
    /// its queue, segment, page and recency stay. Returns the program `key` holds now: this
    /// one; or the one another thread decoded meanwhile; `None` when `key` no longer holds that
    /// packed entry (removed or replaced meanwhile: nothing changes). The caller evicts when
    /// the store is over its limit now.
    pub(crate) fn unpack(
        &mut self,
        key: &ProgramKey,
        packed: &PackedEntry,
        program: SharedProgram,
        size: usize,
    ) -> Option<SharedProgram> {
        let entry = self.entries.peek_mut(key)?;
        match &entry.program {
            Value::Program(p) => return Some(p.clone()),
            Value::Packed(p) if !p.same(packed) => return None,
            Value::Packed(_) => {}
        }
        let (old, segment) = (entry.size, entry.segment);
        self.reserved -= entry.reserve;
        entry.reserve = 0;
        entry.size = size;
        entry.program = Value::Program(program.clone());
        self.used = self.used - old + size;
        self.largest = self.largest.max(size);
        let queue = match (&mut self.tracker, segment) {
            (Tracker::Slru { protected, .. }, Segment::Protected) => Some(protected),
            (Tracker::Slru { probation, .. }, _) => Some(probation),
            (Tracker::S3Fifo { main, .. }, Segment::Main) => Some(main),
            (Tracker::S3Fifo { small, .. }, _) => Some(small),
            (Tracker::WTinyLfu { window, .. }, Segment::Window) => Some(window),
            (Tracker::WTinyLfu { candidates, .. }, Segment::Candidate) => Some(candidates),
            (Tracker::WTinyLfu { protected, .. }, Segment::Protected) => Some(protected),
            (Tracker::WTinyLfu { probation, .. }, _) => Some(probation),
            (Tracker::Lru | Tracker::Page { .. }, _) => None,
        };
        if let Some(q) = queue {
            q.bytes = q.bytes - old + size;
        }
        Some(program)
    }

    pub(crate) fn contains(&self, key: &ProgramKey) -> bool {
        self.entries.contains(key)
    }

    /// Marks `key` as used by `page` now (moving it between pages when needed).
    fn touch_page(
        pages: &mut LruCache<Option<PageId>, LruCache<ProgramKey, ()>>,
        key: ProgramKey,
        old: Option<PageId>,
        new: Option<PageId>,
    ) {
        if old != new {
            Self::unlink_page(pages, &key, old);
        }
        pages
            .get_or_insert_mut(new, LruCache::unbounded)
            .put(key, ());
    }

    fn unlink_page(
        pages: &mut LruCache<Option<PageId>, LruCache<ProgramKey, ()>>,
        key: &ProgramKey,
        page: Option<PageId>,
    ) {
        if let Some(stack) = pages.peek_mut(&page) {
            stack.pop(key);
            if stack.is_empty() {
                pages.pop(&page);
            }
        }
    }

    /// Inserts or replaces `key`; the caller made room first. Returns the replaced program.
    pub(crate) fn insert(
        &mut self,
        key: ProgramKey,
        program: impl Into<Value>,
        size: usize,
        page: Option<PageId>,
        from_disk: bool,
    ) -> Option<Value> {
        let program = program.into();
        let reserve = program.reserve(size);
        let old = self.remove(&key);
        let segment = match &mut self.tracker {
            Tracker::Lru => Segment::Global,
            Tracker::Page { pages } => {
                Self::touch_page(pages, key, None, page);
                Segment::Global
            }
            Tracker::Slru { probation, .. } => {
                probation.push(key, size);
                Segment::Probation
            }
            Tracker::S3Fifo { small, main, ghost } => {
                if ghost.take(&key) {
                    main.push(key, size);
                    Segment::Main
                } else {
                    small.push(key, size);
                    Segment::Small
                }
            }
            Tracker::WTinyLfu { window, .. } => {
                window.push(key, size);
                Segment::Window
            }
        };
        self.entries.put(
            key,
            Entry {
                program,
                size,
                reserve,
                page,
                from_disk,
                segment,
                freq: 0,
            },
        );
        self.used += size;
        self.reserved += reserve;
        self.largest = self.largest.max(size);
        let target = self.window_target();
        if let Tracker::WTinyLfu {
            window, candidates, ..
        } = &mut self.tracker
        {
            // The window's overflow (never the program just saved) queues for admission.
            while window.bytes > target && window.order.len() > 1 {
                let Some(oldest) = window.front() else { break };
                let Some(e) = self.entries.peek_mut(&oldest) else {
                    break;
                };
                e.segment = Segment::Candidate;
                window.remove(&oldest, e.size);
                candidates.push(oldest, e.size);
            }
        }
        old
    }

    /// Returns and promotes `key` (and moves it to `page` when one is given). A miss is counted
    /// by policies that track the frequency of lookups (W-TinyLFU).
    pub(crate) fn get(&mut self, key: &ProgramKey, page: Option<PageId>) -> Option<Value> {
        let capacity = self.capacity;
        let window_target = self.window_target();
        let entry = match self.policy {
            EvictionPolicy::Lru => self.entries.get_mut(key),
            _ => self.entries.peek_mut(key),
        };
        let Some(entry) = entry else {
            if let Tracker::WTinyLfu { sketch, .. } = &mut self.tracker {
                sketch.increment(key);
            }
            return None;
        };
        let program = entry.program.clone();
        let old = entry.page;
        let new = page.or(old);
        entry.page = new;
        let (segment, size) = (entry.segment, entry.size);
        match &mut self.tracker {
            Tracker::Lru => {}
            Tracker::Page { pages } => Self::touch_page(pages, *key, old, new),
            Tracker::Slru {
                probation,
                protected,
            } => {
                let target = capacity / 100 * PROTECTED_PERCENT;
                Self::slru_hit(
                    &mut self.entries,
                    probation,
                    protected,
                    *key,
                    segment,
                    size,
                    target,
                );
            }
            Tracker::S3Fifo { .. } => entry.freq = (entry.freq + 1).min(3),
            Tracker::WTinyLfu {
                window,
                candidates,
                probation,
                protected,
                sketch,
            } => {
                sketch.increment(key);
                if segment == Segment::Window {
                    window.move_to_back(key);
                } else {
                    // A candidate hit before its contest is promoted like a probation hit.
                    candidates.remove(key, size);
                    let main = capacity - window_target;
                    let target = main / 100 * PROTECTED_PERCENT;
                    Self::slru_hit(
                        &mut self.entries,
                        probation,
                        protected,
                        *key,
                        segment,
                        size,
                        target,
                    );
                }
            }
        }
        Some(program)
    }

    /// A hit in a segmented LRU: probation moves to protected, protected goes to its back; the
    /// protected overflow over `target` bytes is demoted to the back of probation (the program
    /// just promoted stays even when it alone is over the target).
    fn slru_hit(
        entries: &mut LruCache<ProgramKey, Entry, DigestBuildHasher>,
        probation: &mut Queue,
        protected: &mut Queue,
        key: ProgramKey,
        segment: Segment,
        size: usize,
        target: usize,
    ) {
        if segment == Segment::Protected {
            protected.move_to_back(&key);
            return;
        }
        probation.remove(&key, size);
        protected.push(key, size);
        if let Some(e) = entries.peek_mut(&key) {
            e.segment = Segment::Protected;
        }
        while protected.bytes > target {
            let Some(oldest) = protected.front().filter(|k| *k != key) else {
                break;
            };
            let Some(e) = entries.peek_mut(&oldest) else {
                break;
            };
            e.segment = Segment::Probation;
            protected.remove(&oldest, e.size);
            probation.push(oldest, e.size);
        }
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
    pub(crate) fn peek(&self, key: &ProgramKey) -> Option<Value> {
        self.entries.peek(key).map(|e| e.program.clone())
    }

    /// Removes `key` from the store and from its policy's queues (S3-FIFO's ghost does not
    /// remember it: only evictions from the small queue are remembered).
    pub(crate) fn remove(&mut self, key: &ProgramKey) -> Option<Value> {
        let entry = self.entries.pop(key)?;
        self.used -= entry.size;
        self.reserved -= entry.reserve;
        if self.entries.is_empty() {
            self.largest = 0;
        }
        let size = entry.size;
        match &mut self.tracker {
            Tracker::Lru => {}
            Tracker::Page { pages } => Self::unlink_page(pages, key, entry.page),
            Tracker::Slru {
                probation,
                protected,
            } => match entry.segment {
                Segment::Protected => protected.remove(key, size),
                _ => probation.remove(key, size),
            },
            Tracker::S3Fifo { small, main, .. } => match entry.segment {
                Segment::Main => main.remove(key, size),
                _ => small.remove(key, size),
            },
            Tracker::WTinyLfu {
                window,
                candidates,
                probation,
                protected,
                ..
            } => match entry.segment {
                Segment::Window => window.remove(key, size),
                Segment::Candidate => candidates.remove(key, size),
                Segment::Protected => protected.remove(key, size),
                _ => probation.remove(key, size),
            },
        }
        Some(entry.program)
    }

    /// Removes `key` as an eviction victim: like [`Self::remove`], and S3-FIFO remembers a
    /// program evicted from its small queue in the ghost.
    fn evict(&mut self, key: ProgramKey) -> Step {
        let ghost_size = match (&self.tracker, self.entries.peek(&key)) {
            (Tracker::S3Fifo { .. }, Some(e)) if e.segment == Segment::Small => Some(e.size),
            _ => None,
        };
        let Some(program) = self.remove(&key) else {
            return Step::Empty;
        };
        let limit = self.capacity - self.capacity / 100 * S3_SMALL_PERCENT;
        if let (Tracker::S3Fifo { ghost, .. }, Some(size)) = (&mut self.tracker, ghost_size) {
            ghost.remember(key, size, limit);
        }
        Step::Evicted(key, program)
    }

    /// One step of the policy's eviction: evicts one program, or moves one between queues.
    fn step(&mut self) -> Step {
        let capacity = self.capacity;
        let window_target = self.window_target();
        let victim = match &mut self.tracker {
            Tracker::Lru => self.entries.peek_lru().map(|(k, _)| *k),
            Tracker::Page { pages } => pages
                .peek_lru()
                .and_then(|(_, stack)| stack.peek_mru())
                .map(|(k, _)| *k),
            Tracker::Slru {
                probation,
                protected,
            } => probation.front().or_else(|| protected.front()),
            Tracker::S3Fifo { small, main, .. } => {
                let small_target = capacity / 100 * S3_SMALL_PERCENT;
                let from_small =
                    !small.is_empty() && (small.bytes > small_target || main.is_empty());
                let front = if from_small {
                    small.front()
                } else {
                    main.front()
                };
                let Some(key) = front else {
                    return Step::Empty;
                };
                let Some(e) = self.entries.peek_mut(&key) else {
                    return Step::Empty;
                };
                if e.freq > 0 {
                    if from_small {
                        // Hit while in the small queue: it moves to main, its counter reset.
                        e.freq = 0;
                        e.segment = Segment::Main;
                        small.remove(&key, e.size);
                        main.push(key, e.size);
                    } else {
                        // Hit while in main: reinserted at the back, one hit spent.
                        e.freq -= 1;
                        main.move_to_back(&key);
                    }
                    return Step::Moved;
                }
                Some(key)
            }
            Tracker::WTinyLfu {
                window,
                candidates,
                probation,
                protected,
                sketch,
            } => {
                let main_capacity = capacity - window_target;
                let main_victim = probation.front().or_else(|| protected.front());
                match candidates.front().or_else(|| window.front()) {
                    Some(candidate) => {
                        let Some(e) = self.entries.peek_mut(&candidate) else {
                            return Step::Empty;
                        };
                        if probation.bytes + protected.bytes + e.size <= main_capacity {
                            // Main has room: the candidate is admitted without a contest.
                            match e.segment {
                                Segment::Window => window.remove(&candidate, e.size),
                                _ => candidates.remove(&candidate, e.size),
                            }
                            e.segment = Segment::Probation;
                            probation.push(candidate, e.size);
                            return Step::Moved;
                        }
                        match main_victim {
                            Some(victim)
                                if sketch.frequency(&candidate)
                                    > sketch.frequency(&victim) + ADMISSION_MARGIN =>
                            {
                                Some(victim)
                            }
                            _ => Some(candidate),
                        }
                    }
                    None => main_victim,
                }
            }
        };
        match victim {
            Some(key) => self.evict(key),
            None => Step::Empty,
        }
    }

    /// Evicts until `used <= limit`; returns what left, in eviction order.
    pub(crate) fn evict_to(&mut self, limit: usize) -> Evicted {
        let mut evicted = Vec::new();
        while self.used > limit {
            match self.step() {
                Step::Evicted(key, program) => evicted.push((key, program)),
                Step::Moved => {}
                Step::Empty => break,
            }
        }
        evicted
    }

    /// Removes everything; returns what left.
    pub(crate) fn drain(&mut self) -> Evicted {
        self.evict_to(0)
    }

    /// Keys from the next victim on, in the exact order successive evictions would remove them
    /// (see the module documentation).
    pub(crate) fn eviction_order(&self) -> Vec<ProgramKey> {
        match &self.tracker {
            // `iter` runs most to least recent.
            Tracker::Lru => self.entries.iter().rev().map(|(k, _)| *k).collect(),
            Tracker::Page { pages } => pages
                .iter()
                .rev()
                .flat_map(|(_, stack)| stack.iter().map(|(k, _)| *k))
                .collect(),
            Tracker::Slru {
                probation,
                protected,
            } => probation
                .oldest_first()
                .chain(protected.oldest_first())
                .collect(),
            Tracker::S3Fifo { .. } | Tracker::WTinyLfu { .. } => {
                let mut copy = self.clone();
                copy.drain().into_iter().map(|(k, _)| k).collect()
            }
        }
    }
}
