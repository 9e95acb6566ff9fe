//! Priority inheritance's incremental propagation against its from-scratch oracle, on wait
//! graphs made directly in the scheduler's state (cycles, duplicate waits, waits on removed
//! streams, disabled waiters: shapes the public API reaches only through races), and the cost
//! of a change measured in streams visited.

use super::*;

#[path = "../support/splitmix.rs"]
mod splitmix;
use splitmix::Rng;

fn random_priority(rng: &mut Rng) -> Priority {
    Priority::ALL[rng.below(4)]
}

fn scheduler() -> OwnArc<Scheduler> {
    Scheduler::new(Arc::new(SyncPointManager::new()))
}

/// Gives `w` pending waits on `releasers` (fabricated wait ids, no sync-points wait behind
/// them), as `front_ready` does once the waits are registered.
fn wait_on(s: &Scheduler, w: StreamId, releasers: &[StreamId]) {
    let mut st = lock(&s.state);
    let waits = releasers
        .iter()
        .map(|r| (s.next_wait.fetch_add(1, Ordering::Relaxed), Some(*r)))
        .collect();
    st.add_waits(w, waits);
    s.reprioritize(&mut st, &[], &[w]);
}

/// Ends one pending wait of `w` (the one with the smallest id), as `wait_done` does; false
/// when it has none.
fn end_one_wait(s: &Scheduler, w: StreamId) -> bool {
    let Some(wid) = lock(&s.state).streams[&w].waits.keys().min().copied() else {
        return false;
    };
    s.wait_done(w, wid);
    true
}

/// The graph bookkeeping and the run queue agree with the streams, and every priority is the
/// oracle's.
fn check(s: &Scheduler, context: &str) {
    let st = lock(&s.state);
    assert_eq!(
        st.wrong_priorities(),
        [],
        "{context}: (stream, scheduled, oracle)"
    );
    for (id, stream) in &st.streams {
        let mut want: Vec<StreamId> = stream
            .waits
            .values()
            .flatten()
            .copied()
            .filter(|r| r != id)
            .collect();
        want.sort_unstable();
        let mut got: Vec<StreamId> = stream
            .lends_to
            .iter()
            .flat_map(|(r, n)| std::iter::repeat_n(*r, *n as usize))
            .collect();
        got.sort_unstable();
        assert_eq!(got, want, "{context}: lends_to of {id:?} mirrors its waits");
        for (r, _) in &stream.lends_to {
            if let Some(rs) = st.streams.get(r) {
                assert!(rs.waiters.contains(id), "{context}: {r:?} lists {id:?}");
            }
        }
        for w in &stream.waiters {
            let ws = &st.streams[w];
            assert!(ws.lends_to.iter().any(|(r, _)| r == id), "{context}: edge");
        }
        if let Some(slot) = stream.queued {
            assert_eq!(
                slot.level, stream.scheduled,
                "{context}: queued at its level"
            );
        }
    }
    for (l, q) in st.queue.levels.iter().enumerate() {
        let live = q
            .iter()
            .filter(|(key, id)| {
                st.streams.get(id).is_some_and(|s| {
                    s.queued
                        == Some(Slot {
                            level: Priority::ALL[l],
                            key: *key,
                        })
                })
            })
            .count();
        assert_eq!(live, st.queue.live[l], "{context}: live count of level {l}");
        assert!(
            q.iter().zip(q.iter().skip(1)).all(|(a, b)| a.0 < b.0),
            "{context}: level {l} sorted by key"
        );
    }
    let queued = st.streams.values().filter(|s| s.queued.is_some()).count();
    assert_eq!(queued, st.queue.live.iter().sum::<usize>(), "{context}");
}

/// Random changes of every kind on a random graph (cycles, self-waits, duplicates), each
/// checked against the oracle.
fn random_changes(seed: u64, streams: usize, steps: usize) {
    let mut rng = Rng(seed);
    let s = scheduler();
    let mut ids: Vec<StreamId> = (0..streams)
        .map(|_| s.add_stream(random_priority(&mut rng)))
        .collect();
    for step in 0..steps {
        let context = format!("seed {seed} step {step}");
        let pick = |rng: &mut Rng, ids: &[StreamId]| ids[rng.below(ids.len())];
        match rng.below(100) {
            // Waits of a stream that has none: 1-3 releasers, duplicates and itself allowed;
            // now and then a removed stream.
            0..=34 => {
                let w = pick(&mut rng, &ids);
                if lock(&s.state).streams[&w].waits.is_empty() {
                    let k = 1 + rng.below(3);
                    let releasers: Vec<StreamId> = (0..k)
                        .map(|_| {
                            if rng.chance(5) {
                                StreamId(u64::MAX - rng.below(3) as u64)
                            } else {
                                pick(&mut rng, &ids)
                            }
                        })
                        .collect();
                    wait_on(&s, w, &releasers);
                }
            }
            35..=59 => {
                let w = pick(&mut rng, &ids);
                end_one_wait(&s, w);
            }
            60..=69 => {
                let w = pick(&mut rng, &ids);
                s.set_enabled(w, rng.chance(60)).unwrap();
            }
            70..=79 => {
                let w = pick(&mut rng, &ids);
                s.set_base_priority(w, random_priority(&mut rng)).unwrap();
            }
            80..=84 => {
                // A time-slice downgrade or reset.
                let w = pick(&mut rng, &ids);
                let mut st = lock(&s.state);
                let own = st.streams[&w].own;
                let base = st.streams[&w].base;
                let to = if rng.chance(50) {
                    own.downgraded()
                } else {
                    base
                };
                s.set_own(&mut st, w, to);
            }
            85..=92 => {
                let w = pick(&mut rng, &ids);
                s.enqueue(w, Task::simple(|| {})).unwrap();
            }
            93..=95 => {
                let i = rng.below(ids.len());
                s.remove_stream(ids.swap_remove(i)).unwrap();
                ids.push(s.add_stream(random_priority(&mut rng)));
            }
            _ => {
                s.run_next();
            }
        }
        check(&s, &context);
    }
}

#[test]
fn incremental_priorities_match_the_oracle_on_random_graphs() {
    // Small graphs (dense: many cycles) and larger sparse ones.
    for seed in 0..40 {
        random_changes(seed, 3 + (seed as usize % 8), 400);
    }
    for seed in 100..104 {
        random_changes(seed, 150, 3000);
    }
}

#[test]
fn a_cycle_does_not_hold_up_a_loan_that_ended() {
    // High -> a -> b -> c -> a: the loan keeps the cycle at High; when it ends, the cycle is
    // back at Low although each of its streams still has a waiter at High (the next in it).
    let s = scheduler();
    let high = s.add_stream(Priority::High);
    let [a, b, c] = [(); 3].map(|_| s.add_stream(Priority::Low));
    wait_on(&s, a, &[b]);
    wait_on(&s, b, &[c]);
    wait_on(&s, c, &[a]);
    wait_on(&s, high, &[a]);
    for id in [a, b, c] {
        assert_eq!(s.scheduled_priority(id).unwrap(), Priority::High);
    }
    assert!(end_one_wait(&s, high));
    for id in [a, b, c] {
        assert_eq!(s.scheduled_priority(id).unwrap(), Priority::Low);
    }
    check(&s, "after the loan");
}

/// Streams looked at by priority propagation during `f`.
fn visits(s: &Scheduler, f: impl FnOnce()) -> u64 {
    let before = s.priority_work().1;
    f();
    s.priority_work().1 - before
}

#[test]
fn a_change_visits_only_the_streams_it_affects() {
    // 4000 streams, 1000 of them in unrelated waiting pairs: a change in a small part of the
    // graph must not look at the rest (the from-scratch recomputation looks at every stream
    // and every edge on every change).
    let s = scheduler();
    let mut rng = Rng(7);
    let ids: Vec<StreamId> = (0..4000)
        .map(|_| s.add_stream(random_priority(&mut rng)))
        .collect();
    for pair in ids[..1000].chunks(2) {
        wait_on(&s, pair[0], &[pair[1]]);
    }
    let high = s.add_stream(Priority::High);
    let chain: Vec<StreamId> = (0..10).map(|_| s.add_stream(Priority::Low)).collect();
    for w in chain.windows(2) {
        wait_on(&s, w[0], &[w[1]]);
    }
    // A loan raising the 10-stream chain: the chain, its edges, the waiter.
    let n = visits(&s, || wait_on(&s, high, &[chain[0]]));
    assert!(n <= 2 * 11 + 2, "raise visited {n}");
    assert_eq!(s.scheduled_priority(chain[9]).unwrap(), Priority::High);
    // The loan ends: the chain is recomputed (each stream, its edges in and out).
    let n = visits(&s, || assert!(end_one_wait(&s, high)));
    assert!(n <= 4 * 11 + 2, "lower visited {n}");
    assert_eq!(s.scheduled_priority(chain[9]).unwrap(), Priority::Low);
    // A pair's wait ends, a waiter is disabled and enabled, a stream's own priority changes,
    // a stream with waiters is removed: a handful of visits each.
    let mut changes = vec![
        visits(&s, || assert!(end_one_wait(&s, ids[0]))),
        visits(&s, || s.set_enabled(ids[2], false).unwrap()),
        visits(&s, || s.set_enabled(ids[2], true).unwrap()),
        visits(&s, || {
            s.set_base_priority(ids[5], Priority::RealTime).unwrap()
        }),
        visits(&s, || s.set_base_priority(ids[5], Priority::Low).unwrap()),
        visits(&s, || {
            s.remove_stream(ids[6]).unwrap();
        }),
    ];
    changes.sort_unstable();
    assert!(
        *changes.last().unwrap() <= 6,
        "visits per change: {changes:?}"
    );
    check(&s, "after the changes");
}
