//! The original design brief's ProgramCacheLruHelper tests (the brief is not part of this
//! repository): eviction order, reuse, clear, peek/pop; plus the page-aware policy.

use program_cache::EvictionPolicy;
use test_support::programs::{self, key, policy_cache, program};

/// Every test program below costs the same; the budget holds exactly `n` of them.
fn budget_for(n: usize) -> usize {
    program(0, 0, 100).stored_size() * n
}

#[test]
fn lru_eviction_order_without_reuse() {
    let c = policy_cache(EvictionPolicy::Lru, budget_for(3));
    for n in 1..=3 {
        c.save(key(n), program(n, n + 100, 100), None).unwrap();
    }
    assert_eq!(c.eviction_order(), [key(1), key(2), key(3)]);
    // Each new save evicts the oldest.
    c.save(key(4), program(4, 104, 100), None).unwrap();
    assert!(c.peek(&key(1)).is_none());
    c.save(key(5), program(5, 105, 100), None).unwrap();
    assert!(c.peek(&key(2)).is_none());
    assert_eq!(c.eviction_order(), [key(3), key(4), key(5)]);
}

#[test]
fn lru_eviction_order_with_reuse() {
    let c = policy_cache(EvictionPolicy::Lru, budget_for(3));
    for n in 1..=3 {
        c.save(key(n), program(n, n + 100, 100), None).unwrap();
    }
    // A load promotes: 1 becomes the most recent.
    assert!(c.load(&key(1), None).is_some());
    assert_eq!(c.eviction_order(), [key(2), key(3), key(1)]);
    c.save(key(4), program(4, 104, 100), None).unwrap();
    assert!(c.peek(&key(2)).is_none(), "2 was least recently used");
    assert!(c.peek(&key(1)).is_some());
    // Re-saving an existing key replaces it and promotes it.
    let report = c.save(key(3), program(3, 103, 100), None).unwrap();
    assert!(report.replaced);
    assert_eq!(c.eviction_order(), [key(1), key(4), key(3)]);
}

#[test]
fn clear_works_correctly() {
    let c = policy_cache(EvictionPolicy::Lru, budget_for(3));
    for n in 1..=3 {
        c.save(key(n), program(n, n + 100, 100), None).unwrap();
    }
    c.clear();
    assert!(c.is_empty());
    assert_eq!(c.size_bytes(), 0);
    assert!(c.eviction_order().is_empty());
    // Usable after a clear, with the full budget.
    for n in 4..=6 {
        c.save(key(n), program(n, n + 100, 100), None).unwrap();
    }
    assert_eq!(c.eviction_order(), [key(4), key(5), key(6)]);
}

#[test]
fn peek_and_pop_work_correctly() {
    let c = policy_cache(EvictionPolicy::Lru, budget_for(2));
    c.save(key(1), program(1, 101, 100), None).unwrap();
    c.save(key(2), program(2, 102, 100), None).unwrap();
    // peek returns the entry without promoting it and without counting a hit.
    assert_eq!(c.peek(&key(1)).unwrap().vertex_shader, programs::shader(1));
    assert_eq!(c.counters().hits, 0);
    assert_eq!(c.eviction_order(), [key(1), key(2)]);
    // Popping (eviction) takes the least recent first.
    assert_eq!(c.trim(budget_for(1)), budget_for(1));
    assert!(c.peek(&key(1)).is_none() && c.peek(&key(2)).is_some());
    assert!(c.evict(&key(2)));
    assert!(!c.evict(&key(2)));
    assert!(c.is_empty());
}

#[test]
fn page_policy_evicts_the_most_recent_program_of_the_least_recent_page() {
    let c = policy_cache(EvictionPolicy::PageLruMru, budget_for(4));
    // Page 1 loads programs 1, 2; page 2 loads 3, 4.
    c.save(key(1), program(1, 101, 100), Some(1)).unwrap();
    c.save(key(2), program(2, 102, 100), Some(1)).unwrap();
    c.save(key(3), program(3, 103, 100), Some(2)).unwrap();
    c.save(key(4), program(4, 104, 100), Some(2)).unwrap();
    // Page 1 is least recent; within it, 2 is most recent.
    assert_eq!(c.eviction_order(), [key(2), key(1), key(4), key(3)]);
    c.save(key(5), program(5, 105, 100), Some(3)).unwrap();
    assert!(c.peek(&key(2)).is_none());
    // Page 2 reuses program 1: it moves to page 2 and page 2 becomes most recent.
    assert!(c.load(&key(1), Some(2)).is_some());
    assert_eq!(c.eviction_order(), [key(5), key(1), key(4), key(3)]);
}

#[test]
fn a_page_larger_than_the_cache_keeps_hitting_only_with_the_page_policy() {
    // One page loads 10 programs in order on every reload; the cache holds 6. LRU evicts each
    // program just before it is needed again (0 hits); MRU within the page keeps the first 5.
    let hits = |policy| {
        let c = policy_cache(policy, budget_for(6));
        let mut hits = 0;
        for _reload in 0..5 {
            for n in 1..=10 {
                if c.load(&key(n), Some(1)).is_some() {
                    hits += 1;
                } else {
                    c.save(key(n), program(n, n + 100, 100), Some(1)).unwrap();
                }
            }
        }
        hits
    };
    assert_eq!(hits(EvictionPolicy::Lru), 0);
    assert!(
        hits(EvictionPolicy::PageLruMru) >= 4 * 5,
        "{}",
        hits(EvictionPolicy::PageLruMru)
    );
}
