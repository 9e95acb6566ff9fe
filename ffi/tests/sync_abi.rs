//! The sync C ABI exercised from Rust through the exported `extern "C"` functions: one test per
//! sync-points behaviour (the setups of `sync-points/tests/behaviours.rs`), and every bad input
//! the ABI promises to turn into a code.

mod common;

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use common::*;
use gpusvc::*;

/// A manager freed on drop.
struct Manager(*mut gpusvc_sync_manager);

impl Drop for Manager {
    fn drop(&mut self) {
        free_sync_manager(self.0);
    }
}

impl Manager {
    fn new() -> Self {
        Manager(new_sync_manager())
    }

    /// A manager with a releaser sequence `r` that has client 1, and a waiter sequence `w`
    /// (neither has an order number yet): `(m, r, w)`.
    fn releaser_and_waiter() -> (Self, u64, u64) {
        let m = Manager::new();
        let r = m.sequence();
        let w = m.sequence();
        m.client(1, r);
        (m, r, w)
    }

    fn sequence(&self) -> u64 {
        // SAFETY: a live handle and out slot.
        written(0, |out| unsafe { gpusvc_sync_sequence_create(self.0, out) })
    }

    fn generate(&self, s: u64) -> u64 {
        // SAFETY: a live handle and out slot.
        written(0, |out| unsafe {
            gpusvc_sync_sequence_generate(self.0, s, out)
        })
    }

    fn begin(&self, s: u64, n: u64) -> gpusvc_result {
        // SAFETY: a live handle.
        unsafe { gpusvc_sync_sequence_begin(self.0, s, n) }
    }

    fn pause(&self, s: u64) -> gpusvc_result {
        // SAFETY: a live handle.
        unsafe { gpusvc_sync_sequence_pause(self.0, s) }
    }

    fn finish(&self, s: u64, n: u64) -> gpusvc_result {
        // SAFETY: a live handle.
        unsafe { gpusvc_sync_sequence_finish(self.0, s, n) }
    }

    fn processed(&self, s: u64) -> u64 {
        // SAFETY: a live handle and out slot.
        written(0, |out| unsafe {
            gpusvc_sync_sequence_processed(self.0, s, out)
        })
    }

    fn is_processing(&self, s: u64) -> bool {
        // SAFETY: a live handle and out slot.
        written(false, |out| unsafe {
            gpusvc_sync_sequence_is_processing(self.0, s, out)
        })
    }

    fn unprocessed(&self, s: u64) -> Vec<u64> {
        let mut count = 0;
        // SAFETY: a live handle; NULL buffer with len 0 counts.
        let r =
            unsafe { gpusvc_sync_sequence_unprocessed(self.0, s, ptr::null_mut(), 0, &mut count) };
        assert_eq!(r, OK);
        let mut v = vec![0u64; count];
        // SAFETY: `v` has room for `count`.
        let r = unsafe {
            gpusvc_sync_sequence_unprocessed(self.0, s, v.as_mut_ptr(), count, &mut count)
        };
        assert_eq!(r, OK);
        v.truncate(count);
        v
    }

    fn client(&self, id: u64, s: u64) {
        // SAFETY: a live handle.
        assert_eq!(unsafe { gpusvc_sync_client_create(self.0, 0, id, s) }, OK);
    }

    fn destroy_client(&self, id: u64) -> gpusvc_result {
        // SAFETY: a live handle.
        unsafe { gpusvc_sync_client_destroy(self.0, 0, id) }
    }

    /// `(released, callbacks run)`.
    fn release(&self, id: u64, count: u64) -> Result<(bool, usize), gpusvc_result> {
        let (mut released, mut callbacks) = (false, 0);
        // SAFETY: a live handle and out pointers.
        let r = unsafe {
            gpusvc_sync_client_release(self.0, 0, id, count, &mut released, &mut callbacks)
        };
        if r == OK {
            Ok((released, callbacks))
        } else {
            Err(r)
        }
    }

    fn is_released(&self, id: u64, count: u64) -> bool {
        // SAFETY: a live handle, token and out slot.
        written(false, |out| unsafe {
            gpusvc_sync_token_is_released(self.0, &token(id, count), out)
        })
    }

    /// Registers a wait that bumps `counter`; returns whether it was registered.
    fn wait(&self, id: u64, count: u64, seq: u64, order: u64, counter: &AtomicUsize) -> bool {
        let ud = ptr::from_ref(counter).cast_mut().cast();
        // SAFETY: a live handle; `counter` outlives every callback (the tests keep it alive
        // until the manager is freed, which ends every wait).
        unsafe { wait_on(self.0, (id, count), (seq, order), bump, ud) }
    }
}

/// Registers `callback(user_data)` for the release `(client, count)`, waited on by sequence
/// `seq` at order number `order`; whether it was registered (the call is asserted OK).
///
/// # Safety
/// `m` is a live handle; `callback` may be called once with `user_data`, from any thread.
unsafe fn wait_on(
    m: *const gpusvc_sync_manager,
    (client, count): (u64, u64),
    (seq, order): (u64, u64),
    callback: unsafe extern "C" fn(*mut c_void),
    user_data: *mut c_void,
) -> bool {
    let t = token(client, count);
    // SAFETY: a live token and out slot; the rest is the caller's contract.
    written(false, |out| unsafe {
        gpusvc_sync_token_wait(m, &t, seq, order, Some(callback), user_data, out)
    })
}

fn token(id: u64, count: u64) -> gpusvc_sync_token {
    gpusvc_sync_token {
        namespace_id: 0,
        command_buffer_id: id,
        release_count: count,
        verified: false,
    }
}

unsafe extern "C" fn bump(user_data: *mut c_void) {
    // SAFETY: `user_data` is a live `AtomicUsize` (see `Manager::wait`).
    let c = unsafe { &*user_data.cast::<AtomicUsize>() };
    c.fetch_add(1, Ordering::SeqCst);
}

fn n(c: &AtomicUsize) -> usize {
    c.load(Ordering::SeqCst)
}

/// Frees the manager (which ends every wait still pending) and reads how many times the
/// callbacks counting into `c` ran in all.
fn runs_in_all(m: Manager, c: &AtomicUsize) -> usize {
    drop(m);
    n(c)
}

/// Releaser sequence `r` with client 1 and one pending order number, waiter `w` with a later one.
fn setup() -> (Manager, u64, u64, u64, u64) {
    let (m, r, w) = Manager::releaser_and_waiter();
    let rn = m.generate(r);
    let wn = m.generate(w);
    (m, r, w, rn, wn)
}

const ORDER: gpusvc_result = gpusvc_result::GPUSVC_SYNC_ORDER_VIOLATION;

#[test]
fn order_data_transitions() {
    let m = Manager::new();
    let s = m.sequence();
    let a = m.generate(s);
    let b = m.generate(s);
    assert!(a >= 1 && b > a);
    assert_eq!(m.unprocessed(s), [a, b]);
    assert_eq!(m.begin(s, b + 100), ORDER);
    assert_eq!(m.finish(s, a), ORDER);
    assert_eq!(m.begin(s, a), OK);
    assert!(m.is_processing(s));
    assert_eq!(m.pause(s), OK);
    assert!(!m.is_processing(s));
    assert_eq!(m.pause(s), ORDER);
    assert_eq!(m.begin(s, a), OK); // resume
    assert!(m.is_processing(s));
    assert_eq!(m.finish(s, b), ORDER);
    assert_eq!(m.finish(s, a), OK);
    assert_eq!((m.processed(s), m.unprocessed(s)), (a, vec![b]));
    assert_eq!(m.begin(s, a), ORDER);
    assert_eq!(m.begin(s, 0), ORDER);
    assert_eq!(m.begin(s, b), OK);
    assert_eq!(m.finish(s, b), OK);
    assert!(m.unprocessed(s).is_empty());
    let t = m.sequence();
    assert!(m.generate(t) > b, "one global counter across sequences");
}

#[test]
fn unknown_client_reads_as_released() {
    let m = Manager::new();
    assert!(m.is_released(42, 7));
}

#[test]
fn release_2_then_1_the_second_is_a_no_op() {
    let m = Manager::new();
    let s = m.sequence();
    m.client(1, s);
    let n1 = m.generate(s);
    assert_eq!(m.begin(s, n1), OK);
    assert_eq!(m.release(1, 2), Ok((true, 0)));
    assert_eq!(m.release(1, 1), Ok((false, 0)));
    assert!(m.is_released(1, 2) && !m.is_released(1, 3));
}

#[test]
fn two_clients_on_one_order_data_are_independent() {
    let m = Manager::new();
    let s = m.sequence();
    m.client(1, s);
    m.client(2, s);
    let n1 = m.generate(s);
    assert_eq!(m.begin(s, n1), OK);
    assert_eq!(m.release(1, 5), Ok((true, 0)));
    assert!(m.is_released(1, 5));
    assert!(!m.is_released(2, 1));
    assert_eq!(m.release(2, 1), Ok((true, 0)));
    assert!(m.is_released(2, 1) && !m.is_released(2, 2) && !m.is_released(1, 6));
}

#[test]
fn wait_then_release_runs_the_callback_exactly_once() {
    let count = AtomicUsize::new(0);
    let (m, r, w, rn, wn) = setup();
    assert!(m.wait(1, 1, w, wn, &count));
    assert_eq!(n(&count), 0);
    assert_eq!(m.begin(r, rn), OK);
    assert_eq!(m.release(1, 1), Ok((true, 1)));
    assert_eq!(m.release(1, 2), Ok((true, 0)));
    assert_eq!(m.finish(r, rn), OK);
    assert_eq!(runs_in_all(m, &count), 1);
}

#[test]
fn waits_on_2_1_and_3_release_2_runs_2_and_1_not_3() {
    let (c1, c2, c3) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    let (m, r, w, rn, wn) = setup();
    assert!(m.wait(1, 2, w, wn, &c2));
    assert!(m.wait(1, 1, w, wn, &c1));
    assert!(m.wait(1, 3, w, wn, &c3));
    assert_eq!(m.begin(r, rn), OK);
    assert_eq!(m.release(1, 2), Ok((true, 2)));
    assert_eq!((n(&c1), n(&c2), n(&c3)), (1, 1, 0));
    drop(m); // freeing the manager ends the wait on 3
    assert_eq!(n(&c3), 1);
}

#[test]
fn wait_on_self_fails() {
    let count = AtomicUsize::new(0);
    let (m, r, _w, _rn, _wn) = setup();
    let later = m.generate(r);
    assert!(!m.wait(1, 1, r, later, &count));
    assert_eq!(runs_in_all(m, &count), 0);
}

#[test]
fn a_wait_ordered_before_the_releasers_only_order_number_is_invalid() {
    let count = AtomicUsize::new(0);
    let (m, r, w) = Manager::releaser_and_waiter();
    let wn = m.generate(w);
    let _rn = m.generate(r); // after wn
    assert!(!m.wait(1, 1, w, wn, &count));
    assert_eq!(runs_in_all(m, &count), 0);
}

#[test]
fn a_wait_on_an_already_released_token_returns_false_and_never_runs() {
    let count = AtomicUsize::new(0);
    let (m, r, w, rn, wn) = setup();
    assert_eq!(m.begin(r, rn), OK);
    assert_eq!(m.release(1, 3), Ok((true, 0)));
    assert!(!m.wait(1, 2, w, wn, &count));
    assert_eq!(m.finish(r, rn), OK);
    assert_eq!(runs_in_all(m, &count), 0);
}

#[test]
fn destroying_the_releaser_runs_its_waits_and_its_tokens_read_released() {
    let count = AtomicUsize::new(0);
    let (m, _r, w, _rn, wn) = setup();
    assert!(m.wait(1, 5, w, wn, &count));
    assert!(!m.is_released(1, 5));
    assert_eq!(m.destroy_client(1), OK);
    assert_eq!(n(&count), 1);
    assert!(m.is_released(1, 5));
    assert_eq!(
        m.destroy_client(1),
        gpusvc_result::GPUSVC_SYNC_UNKNOWN_CLIENT
    );
}

#[test]
fn a_release_that_never_comes_is_retired_when_the_releaser_finishes_and_the_token_stays_unreleased()
{
    let count = AtomicUsize::new(0);
    let (m, r, w, rn, wn) = setup();
    assert!(m.wait(1, 1, w, wn, &count));
    assert_eq!(m.begin(r, rn), OK);
    assert_eq!(n(&count), 0);
    assert_eq!(m.finish(r, rn), OK);
    assert_eq!(n(&count), 1);
    assert!(!m.is_released(1, 1));
}

#[test]
fn the_same_when_the_waiter_has_several_order_numbers_and_a_later_release_does_not_run_it_twice() {
    let count = AtomicUsize::new(0);
    let (m, r, w, rn, wn) = setup();
    let wn2 = m.generate(w);
    let rn2 = m.generate(r);
    assert!(m.wait(1, 1, w, wn, &count)); // fenced at min(rn2, wn) = wn
    assert!(wn2 > wn);
    assert_eq!(m.begin(r, rn), OK);
    assert_eq!(n(&count), 0, "not while rn is processing");
    // Issue 11: this used to expect the wait to last until rn2 *began*. Now (Chromium's rule)
    // finishing rn retires every fence before r's next unprocessed number, rn2: wn is before it.
    assert_eq!(m.finish(r, rn), OK);
    assert_eq!(
        n(&count),
        1,
        "the fence (wn) is before r's next number (rn2)"
    );
    assert_eq!(m.begin(r, rn2), OK);
    assert_eq!(n(&count), 1);
    assert_eq!(m.release(1, 1), Ok((true, 0)));
    assert_eq!(m.finish(r, rn2), OK);
    assert_eq!(runs_in_all(m, &count), 1);
}

#[test]
fn a_fence_at_an_order_number_the_releaser_never_had_retires_once_its_next_number_is_past_it() {
    let count = AtomicUsize::new(0);
    let (m, r, w) = Manager::releaser_and_waiter();
    let r1 = m.generate(r);
    let wn = m.generate(w); // between r1 and r2
    let r2 = m.generate(r);
    assert!(m.wait(1, 1, w, wn, &count));
    assert_eq!(m.begin(r, r1), OK);
    assert_eq!(n(&count), 0);
    // Issue 11: this used to expect the fence to hold until r2 *began*. Now (Chromium's rule)
    // finishing r1 retires it: r's next unprocessed number, r2, is past the fence.
    assert_eq!(m.finish(r, r1), OK);
    assert_eq!(n(&count), 1, "retired when r1 finished");
    assert_eq!(m.begin(r, r2), OK);
    assert_eq!(n(&count), 1, "and only once");
    assert!(!m.is_released(1, 1));
}

/// Issue 11: when the releaser finishes a number, every wait fenced before its next unprocessed
/// number ends; one fenced at that number does not. Releaser numbers 1 and 4, waits at 3 (fenced
/// at 3) and 5 (fenced at 4).
#[test]
fn finishing_retires_the_fences_before_the_releasers_next_number_and_not_the_one_at_it() {
    let (at_3, at_5) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let (m, r, w) = Manager::releaser_and_waiter();
    let numbers = [r, w, w, r, w].map(|s| m.generate(s));
    assert_eq!(numbers, [1, 2, 3, 4, 5]);
    assert!(m.wait(1, 1, w, 3, &at_3));
    assert!(m.wait(1, 1, w, 5, &at_5));
    assert_eq!(m.begin(r, 1), OK);
    assert_eq!(m.finish(r, 1), OK);
    assert_eq!(
        (n(&at_3), n(&at_5)),
        (1, 0),
        "fence 3 < next number 4 = fence 4"
    );
    assert!(!m.is_released(1, 1));
    assert_eq!(m.begin(r, 4), OK);
    assert_eq!(m.release(1, 1), Ok((true, 1)));
    assert_eq!(m.finish(r, 4), OK);
    drop(m);
    assert_eq!((n(&at_3), n(&at_5)), (1, 1));
}

#[test]
fn a_wait_from_the_releasing_sequence_fails() {
    let count = AtomicUsize::new(0);
    let m = Manager::new();
    let r = m.sequence();
    m.client(1, r);
    m.client(2, r);
    let n1 = m.generate(r);
    let n2 = m.generate(r);
    assert!(n2 > n1);
    assert!(!m.wait(1, 1, r, n2, &count));
    assert_eq!(runs_in_all(m, &count), 0);
}

#[test]
fn an_invalid_wait_order_number_is_rejected() {
    let count = AtomicUsize::new(0);
    let (m, _r, w, _rn, _wn) = setup();
    assert!(!m.wait(1, 1, w, 0, &count));
    assert_eq!(runs_in_all(m, &count), 0);
}

#[test]
fn a_fence_retires_only_once_the_releaser_passes_it_not_before() {
    let count = AtomicUsize::new(0);
    let (m, r, w) = Manager::releaser_and_waiter();
    let r1 = m.generate(r);
    let r2 = m.generate(r);
    let wn = m.generate(w); // after r2: fence at r2
    assert!(m.wait(1, 1, w, wn, &count));
    assert_eq!(m.begin(r, r1), OK);
    assert_eq!(m.finish(r, r1), OK);
    assert_eq!(m.begin(r, r2), OK);
    assert_eq!(m.pause(r), OK);
    assert_eq!(m.begin(r, r2), OK);
    assert_eq!(n(&count), 0, "not before the fence is passed");
    assert_eq!(m.finish(r, r2), OK);
    assert_eq!(n(&count), 1);
}

#[test]
fn cyclic_waits_between_two_sequences_are_both_retired() {
    let count = AtomicUsize::new(0);
    let m = Manager::new();
    let a = m.sequence();
    let b = m.sequence();
    m.client(1, a);
    m.client(2, b);
    let a1 = m.generate(a);
    let b1 = m.generate(b);
    let a2 = m.generate(a);
    let b2 = m.generate(b);
    assert!(m.wait(2, 1, a, a2, &count));
    assert!(m.wait(1, 1, b, b2, &count));
    for (s, x) in [(a, a1), (b, b1)] {
        assert_eq!(m.begin(s, x), OK);
        assert_eq!(m.finish(s, x), OK);
    }
    assert_eq!(m.begin(a, a2), OK);
    assert_eq!(m.begin(b, b2), OK);
    assert_eq!(m.finish(a, a2), OK);
    assert_eq!(m.finish(b, b2), OK);
    assert_eq!(n(&count), 2);
    assert!(!m.is_released(1, 1) && !m.is_released(2, 1));
}

// ---- bad input ----

#[test]
fn a_null_token_is_an_error_and_writes_nothing() {
    let (m, _r, w, _rn, wn) = setup();
    let mut out = true;
    // SAFETY: a live handle; NULL token on purpose.
    let r = unsafe { gpusvc_sync_token_is_released(m.0, ptr::null(), &mut out) };
    assert_eq!(r, gpusvc_result::GPUSVC_NULL_ARGUMENT);
    // SAFETY: as above.
    let r = unsafe { gpusvc_sync_token_wait_blocking(m.0, ptr::null(), 0, &mut out) };
    assert_eq!(r, gpusvc_result::GPUSVC_NULL_ARGUMENT);
    // SAFETY: as above; the callback is never called.
    let r = unsafe {
        gpusvc_sync_token_wait(
            m.0,
            ptr::null(),
            w,
            wn,
            Some(bump),
            ptr::null_mut(),
            &mut out,
        )
    };
    assert_eq!(r, gpusvc_result::GPUSVC_NULL_ARGUMENT);
    // SAFETY: a live token; NULL callback on purpose.
    let r = unsafe {
        gpusvc_sync_token_wait(m.0, &token(1, 1), w, wn, None, ptr::null_mut(), &mut out)
    };
    assert_eq!(r, gpusvc_result::GPUSVC_NULL_ARGUMENT);
    assert!(out, "outputs are written only on GPUSVC_OK");
}

#[test]
fn unknown_ids_are_errors() {
    let count = AtomicUsize::new(0);
    let (m, r, _w, _rn, _wn) = setup();
    let (mut x, mut b, mut c) = (7u64, true, 7usize);
    // SAFETY: a live handle and out pointers throughout.
    unsafe {
        let unknown = gpusvc_result::GPUSVC_SYNC_UNKNOWN_SEQUENCE;
        assert_eq!(gpusvc_sync_sequence_generate(m.0, 999, &mut x), unknown);
        assert_eq!(gpusvc_sync_sequence_begin(m.0, 999, 1), unknown);
        assert_eq!(gpusvc_sync_sequence_pause(m.0, 999), unknown);
        assert_eq!(gpusvc_sync_sequence_finish(m.0, 999, 1), unknown);
        assert_eq!(gpusvc_sync_sequence_processed(m.0, 999, &mut x), unknown);
        assert_eq!(
            gpusvc_sync_sequence_is_processing(m.0, 999, &mut b),
            unknown
        );
        assert_eq!(gpusvc_sync_client_create(m.0, 0, 5, 999), unknown);
        let mut registered = true;
        let rr = gpusvc_sync_token_wait(
            m.0,
            &token(1, 1),
            999,
            5,
            Some(bump),
            ptr::from_ref(&count).cast_mut().cast(),
            &mut registered,
        );
        assert_eq!(rr, unknown);
        assert!(registered);
        assert_eq!(
            gpusvc_sync_client_release(m.0, 0, 77, 1, &mut b, &mut c),
            gpusvc_result::GPUSVC_SYNC_UNKNOWN_CLIENT
        );
        assert_eq!(
            gpusvc_sync_client_create(m.0, 0, 1, r),
            gpusvc_result::GPUSVC_SYNC_CLIENT_EXISTS
        );
    }
    assert_eq!(
        (x, b, c),
        (7, true, 7),
        "outputs are written only on GPUSVC_OK"
    );
    assert_eq!(runs_in_all(m, &count), 0);
}

/// Issue 12: an order violation's detail names its sequence once (the crate's message does).
#[test]
fn an_order_violation_names_its_sequence_once() {
    let m = Manager::new();
    let _other = m.sequence();
    let s = m.sequence();
    let n1 = m.generate(s);
    assert_eq!(m.begin(s, 0), ORDER);
    assert_eq!(
        last_detail(),
        format!("sync sequence {s}: order number 0 is invalid")
    );
    assert_eq!(m.pause(s), ORDER);
    assert_eq!(
        last_detail(),
        format!("sync sequence {s}: nothing is being processed")
    );
    assert_eq!(m.finish(s, n1), ORDER);
    assert_eq!(
        last_detail(),
        format!("sync sequence {s}: cannot finish order number {n1}: front Some({n1}), current 0")
    );
}

#[test]
fn release_outside_processing_is_an_error() {
    let (m, r, _w, rn, _wn) = setup();
    assert_eq!(
        m.release(1, 1),
        Err(gpusvc_result::GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING)
    );
    assert_eq!(m.begin(r, rn), OK);
    assert_eq!(m.pause(r), OK);
    assert_eq!(
        m.release(1, 1),
        Err(gpusvc_result::GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING)
    );
    assert!(!m.is_released(1, 1));
}

#[test]
fn double_destroy_is_an_error() {
    let count = AtomicUsize::new(0);
    let (m, r, w, _rn, wn) = setup();
    assert!(m.wait(1, 1, w, wn, &count));
    // SAFETY: a live handle.
    unsafe {
        assert_eq!(gpusvc_sync_sequence_destroy(m.0, r), OK);
        assert_eq!(
            n(&count),
            1,
            "destroying the releasing sequence retires its fences"
        );
        assert_eq!(
            gpusvc_sync_sequence_destroy(m.0, r),
            gpusvc_result::GPUSVC_SYNC_UNKNOWN_SEQUENCE
        );
    }
    assert_eq!(m.destroy_client(1), OK);
    assert_eq!(
        m.destroy_client(1),
        gpusvc_result::GPUSVC_SYNC_UNKNOWN_CLIENT
    );
    let mut raw = ptr::null_mut();
    // SAFETY: a live out pointer; then a handle freed twice (the registry checks it).
    unsafe {
        assert_eq!(gpusvc_sync_manager_new(&mut raw), OK);
        assert_eq!(gpusvc_sync_manager_free(raw), OK);
        assert_eq!(
            gpusvc_sync_manager_free(raw),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        let mut s = 0;
        assert_eq!(
            gpusvc_sync_sequence_create(raw, &mut s),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        assert_eq!(gpusvc_sync_manager_free(ptr::null_mut()), OK);
    }
}

#[test]
fn reduce_keeps_the_highest_release_per_client_with_the_count_query_pattern() {
    let t = |ns: i8, id: u64, c: u64, v: bool| gpusvc_sync_token {
        namespace_id: ns,
        command_buffer_id: id,
        release_count: c,
        verified: v,
    };
    let input = [
        t(0, 1, 3, false),
        t(0, 1, 5, false),
        t(1, 1, 2, false),
        t(0, 1, 5, true),
        t(0, 2, 0, false),
        t(0, 2, 1, false),
    ];
    let mut count = 0;
    // SAFETY: live input; NULL output with len 0 counts.
    let r = unsafe {
        gpusvc_sync_token_reduce(input.as_ptr(), input.len(), ptr::null_mut(), 0, &mut count)
    };
    assert_eq!((r, count), (OK, 3));
    let mut small = [gpusvc_sync_token::default(); 2];
    // SAFETY: `small` has room for 2.
    let r = unsafe {
        gpusvc_sync_token_reduce(
            input.as_ptr(),
            input.len(),
            small.as_mut_ptr(),
            2,
            &mut count,
        )
    };
    assert_eq!(r, gpusvc_result::GPUSVC_INSUFFICIENT_SIZE);
    let mut out = [gpusvc_sync_token::default(); 3];
    // SAFETY: `out` has room for 3.
    let r = unsafe {
        gpusvc_sync_token_reduce(input.as_ptr(), input.len(), out.as_mut_ptr(), 3, &mut count)
    };
    assert_eq!(r, OK);
    assert_eq!(
        out,
        [t(0, 1, 5, true), t(0, 2, 1, false), t(1, 1, 2, false)]
    );
    // SAFETY: NULL input with a count is an error.
    let r = unsafe { gpusvc_sync_token_reduce(ptr::null(), 1, out.as_mut_ptr(), 3, &mut count) };
    assert_eq!(r, gpusvc_result::GPUSVC_NULL_ARGUMENT);
}

#[test]
fn wait_blocking_wakes_on_release_and_times_out_otherwise() {
    let m = Manager::new();
    let r = m.sequence();
    m.client(1, r);
    let n1 = m.generate(r);
    assert_eq!(m.begin(r, n1), OK);
    let raw = m.0.addr();
    let blocking = |timeout_ms: u64| {
        let mut released = false;
        let h: *mut gpusvc_sync_manager = ptr::without_provenance_mut(raw);
        // SAFETY: a live handle (the registry checks it), token and out pointer.
        let rr =
            unsafe { gpusvc_sync_token_wait_blocking(h, &token(1, 1), timeout_ms, &mut released) };
        assert_eq!(rr, OK);
        released
    };
    assert!(!blocking(20));
    std::thread::scope(|s| {
        let t = s.spawn(|| blocking(10_000));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(m.release(1, 1).unwrap().0);
        assert!(t.join().unwrap());
    });
    assert!(blocking(0));
}

// ---- issue 11, item 4: releases made from inside callbacks ----

/// One link of a chain made through the C ABI: each callback registers the wait for the next
/// count and releases it from inside the callback.
struct Chain {
    m: *mut gpusvc_sync_manager,
    waiter: u64,
    wait_order: u64,
    next: AtomicU64,
    last: u64,
    /// `next` as each callback saw it, in the order they ran (only when `record`).
    seen: std::sync::Mutex<Vec<u64>>,
    record: bool,
    /// Whether the release made inside a callback had run its callback before returning.
    nested_ran: AtomicUsize,
}

unsafe extern "C" fn chain_step(user_data: *mut c_void) {
    // SAFETY: `user_data` is the test's live `Chain` (it outlives the manager's callbacks).
    let c = unsafe { &*user_data.cast::<Chain>() };
    let k = c.next.fetch_add(1, Ordering::SeqCst);
    if c.record {
        c.seen.lock().unwrap().push(k);
    }
    if k == c.last {
        return;
    }
    // SAFETY: a live handle; `user_data` outlives the callback.
    let registered = unsafe {
        wait_on(
            c.m,
            (1, k + 1),
            (c.waiter, c.wait_order),
            chain_step,
            user_data,
        )
    };
    assert!(registered);
    let (mut released, mut callbacks) = (false, 0);
    // SAFETY: a live handle and out pointers.
    let r = unsafe { gpusvc_sync_client_release(c.m, 0, 1, k + 1, &mut released, &mut callbacks) };
    assert_eq!((r, released, callbacks), (OK, true, 1));
    if c.next.load(Ordering::SeqCst) != k + 1 {
        c.nested_ran.fetch_add(1, Ordering::SeqCst);
    }
}

/// A chain of `last` releases through the C ABI on this thread; returns it once done.
fn run_chain(last: u64, record: bool) -> Chain {
    let (m, r, w) = Manager::releaser_and_waiter();
    let rn = m.generate(r);
    let wn = m.generate(w);
    assert_eq!(m.begin(r, rn), OK);
    let chain = Chain {
        m: m.0,
        waiter: w,
        wait_order: wn,
        next: AtomicU64::new(1),
        last,
        seen: std::sync::Mutex::new(Vec::new()),
        record,
        nested_ran: AtomicUsize::new(0),
    };
    let ud = ptr::from_ref(&chain).cast_mut().cast();
    // SAFETY: a live handle; `chain` outlives the manager.
    assert!(unsafe { wait_on(m.0, (1, 1), (w, wn), chain_step, ud) });
    let t = std::time::Instant::now();
    assert_eq!(m.release(1, 1), Ok((true, 1)));
    let took = t.elapsed();
    assert_eq!(
        chain.next.load(Ordering::SeqCst),
        last + 1,
        "every link ran"
    );
    assert_eq!(m.finish(r, rn), OK);
    drop(m);
    eprintln!("{last} chained releases through the C ABI: {took:?}");
    chain
}

/// A million releases, each made by the callback of the one before, complete on the test
/// thread's stack (2 MiB); nested, they overflowed it at about 14k levels.
#[test]
fn a_million_releases_chained_through_callbacks_complete() {
    let chain = run_chain(1_000_000, false);
    assert_eq!(chain.nested_ran.load(Ordering::SeqCst), 0);
}

/// A release made inside a callback queues its callbacks; they run, in order, once the callback
/// that released returns (breadth-first), and the outermost release returns after all of them.
#[test]
fn callbacks_a_callback_triggers_run_after_it_returns_in_order() {
    let chain = run_chain(100, true);
    assert_eq!(*chain.seen.lock().unwrap(), (1..=100).collect::<Vec<_>>());
    assert_eq!(
        chain.nested_ran.load(Ordering::SeqCst),
        0,
        "no release made inside a callback ran its callback before returning"
    );
}
