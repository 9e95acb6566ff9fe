// gpusvc_sync_*: one test per sync-points behaviour (setups of sync-points/tests/behaviours.rs),
// bad input, and a callback on another thread waking a blocking wait.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "gpusvc.hpp"

namespace {

// A manager and the calls the tests make, each checked where it must succeed.
class Sync {
 public:
  Sync() { EXPECT_EQ(gpusvc::NewSyncManager(&m_), GPUSVC_OK); }
  gpusvc_sync_manager* get() const { return m_.get(); }
  void Free() { m_.reset(); }

  uint64_t Sequence() {
    uint64_t s = 0;
    EXPECT_EQ(gpusvc_sync_sequence_create(get(), &s), GPUSVC_OK);
    return s;
  }
  uint64_t Generate(uint64_t s) {
    uint64_t n = 0;
    EXPECT_EQ(gpusvc_sync_sequence_generate(get(), s, &n), GPUSVC_OK);
    return n;
  }
  gpusvc_result Begin(uint64_t s, uint64_t n) { return gpusvc_sync_sequence_begin(get(), s, n); }
  gpusvc_result Pause(uint64_t s) { return gpusvc_sync_sequence_pause(get(), s); }
  gpusvc_result Finish(uint64_t s, uint64_t n) { return gpusvc_sync_sequence_finish(get(), s, n); }
  uint64_t Processed(uint64_t s) {
    uint64_t n = 0;
    EXPECT_EQ(gpusvc_sync_sequence_processed(get(), s, &n), GPUSVC_OK);
    return n;
  }
  bool IsProcessing(uint64_t s) {
    bool p = false;
    EXPECT_EQ(gpusvc_sync_sequence_is_processing(get(), s, &p), GPUSVC_OK);
    return p;
  }
  std::vector<uint64_t> Unprocessed(uint64_t s) {
    std::vector<uint64_t> v;
    EXPECT_EQ(gpusvc::SyncUnprocessed(get(), s, &v), GPUSVC_OK);
    return v;
  }
  void Client(uint64_t id, uint64_t s) {
    EXPECT_EQ(gpusvc_sync_client_create(get(), 0, id, s), GPUSVC_OK);
  }
  gpusvc_result DestroyClient(uint64_t id) { return gpusvc_sync_client_destroy(get(), 0, id); }
  // Returns the code; *released and *callbacks are the outputs.
  gpusvc_result Release(uint64_t id, uint64_t count, bool* released = nullptr,
                        size_t* callbacks = nullptr) {
    bool r = false;
    size_t c = 0;
    gpusvc_result code = gpusvc_sync_client_release(get(), 0, id, count, &r, &c);
    if (released != nullptr) *released = r;
    if (callbacks != nullptr) *callbacks = c;
    return code;
  }
  bool IsReleased(uint64_t id, uint64_t count) {
    bool out = false;
    gpusvc_sync_token t = gpusvc::SyncToken(0, id, count);
    EXPECT_EQ(gpusvc_sync_token_is_released(get(), &t, &out), GPUSVC_OK);
    return out;
  }
  // A wait that bumps *counter; returns whether it was registered.
  bool Wait(uint64_t id, uint64_t count, uint64_t seq, uint64_t order, std::atomic<int>* counter) {
    bool registered = false;
    EXPECT_EQ(gpusvc::SyncWait(
                  get(), gpusvc::SyncToken(0, id, count), seq, order,
                  [counter] { counter->fetch_add(1); }, &registered),
              GPUSVC_OK);
    return registered;
  }

 private:
  gpusvc::SyncManagerPtr m_;
};

// A releaser sequence r, which client 1 is on, and a waiter sequence w; no order numbers yet.
struct Sequences {
  Sync m;
  uint64_t r = 0, w = 0;
  Sequences() : r(m.Sequence()), w(m.Sequence()) { m.Client(1, r); }
};

// Releaser sequence r with client 1 and one pending number, waiter w with a later one.
struct Pair : Sequences {
  uint64_t rn = m.Generate(r), wn = m.Generate(w);
};

constexpr gpusvc_result kOk = GPUSVC_OK;
constexpr gpusvc_result kOrder = GPUSVC_SYNC_ORDER_VIOLATION;

}  // namespace

TEST(Sync, OrderDataTransitions) {
  Sync m;
  uint64_t s = m.Sequence();
  uint64_t a = m.Generate(s), b = m.Generate(s);
  EXPECT_TRUE(a >= 1 && b > a);
  EXPECT_EQ(m.Unprocessed(s), (std::vector<uint64_t>{a, b}));
  EXPECT_EQ(m.Begin(s, b + 100), kOrder);
  EXPECT_EQ(m.Finish(s, a), kOrder);
  EXPECT_EQ(m.Begin(s, a), kOk);
  EXPECT_TRUE(m.IsProcessing(s));
  EXPECT_EQ(m.Pause(s), kOk);
  EXPECT_FALSE(m.IsProcessing(s));
  EXPECT_EQ(m.Pause(s), kOrder);
  EXPECT_EQ(m.Begin(s, a), kOk);  // resume
  EXPECT_TRUE(m.IsProcessing(s));
  EXPECT_EQ(m.Finish(s, b), kOrder);
  EXPECT_EQ(m.Finish(s, a), kOk);
  EXPECT_EQ(m.Processed(s), a);
  EXPECT_EQ(m.Unprocessed(s), (std::vector<uint64_t>{b}));
  EXPECT_EQ(m.Begin(s, a), kOrder);
  EXPECT_EQ(m.Begin(s, 0), kOrder);
  EXPECT_EQ(m.Begin(s, b), kOk);
  EXPECT_EQ(m.Finish(s, b), kOk);
  EXPECT_TRUE(m.Unprocessed(s).empty());
  uint64_t t = m.Sequence();
  EXPECT_GT(m.Generate(t), b) << "one global counter across sequences";
}

TEST(Sync, UnknownClientReadsAsReleased) {
  Sync m;
  EXPECT_TRUE(m.IsReleased(42, 7));
}

TEST(Sync, Release2Then1TheSecondIsANoOp) {
  Sync m;
  uint64_t s = m.Sequence();
  m.Client(1, s);
  ASSERT_EQ(m.Begin(s, m.Generate(s)), kOk);
  bool released = false;
  size_t callbacks = 9;
  EXPECT_EQ(m.Release(1, 2, &released, &callbacks), kOk);
  EXPECT_TRUE(released);
  EXPECT_EQ(callbacks, 0u);
  EXPECT_EQ(m.Release(1, 1, &released, &callbacks), kOk);
  EXPECT_FALSE(released);
  EXPECT_TRUE(m.IsReleased(1, 2));
  EXPECT_FALSE(m.IsReleased(1, 3));
}

TEST(Sync, TwoClientsOnOneOrderDataAreIndependent) {
  Sync m;
  uint64_t s = m.Sequence();
  m.Client(1, s);
  m.Client(2, s);
  ASSERT_EQ(m.Begin(s, m.Generate(s)), kOk);
  EXPECT_EQ(m.Release(1, 5), kOk);
  EXPECT_TRUE(m.IsReleased(1, 5));
  EXPECT_FALSE(m.IsReleased(2, 1));
  EXPECT_EQ(m.Release(2, 1), kOk);
  EXPECT_TRUE(m.IsReleased(2, 1));
  EXPECT_FALSE(m.IsReleased(2, 2));
  EXPECT_FALSE(m.IsReleased(1, 6));
}

TEST(Sync, WaitThenReleaseRunsTheCallbackExactlyOnce) {
  std::atomic<int> count{0};
  Pair t;
  EXPECT_TRUE(t.m.Wait(1, 1, t.w, t.wn, &count));
  EXPECT_EQ(count.load(), 0);
  ASSERT_EQ(t.m.Begin(t.r, t.rn), kOk);
  size_t callbacks = 0;
  EXPECT_EQ(t.m.Release(1, 1, nullptr, &callbacks), kOk);
  EXPECT_EQ(callbacks, 1u);
  EXPECT_EQ(t.m.Release(1, 2), kOk);
  EXPECT_EQ(t.m.Finish(t.r, t.rn), kOk);
  t.m.Free();
  EXPECT_EQ(count.load(), 1);
}

TEST(Sync, WaitsOn2_1And3Release2Runs2And1Not3) {
  std::atomic<int> c1{0}, c2{0}, c3{0};
  Pair t;
  EXPECT_TRUE(t.m.Wait(1, 2, t.w, t.wn, &c2));
  EXPECT_TRUE(t.m.Wait(1, 1, t.w, t.wn, &c1));
  EXPECT_TRUE(t.m.Wait(1, 3, t.w, t.wn, &c3));
  ASSERT_EQ(t.m.Begin(t.r, t.rn), kOk);
  size_t callbacks = 0;
  EXPECT_EQ(t.m.Release(1, 2, nullptr, &callbacks), kOk);
  EXPECT_EQ(callbacks, 2u);
  EXPECT_EQ(c1.load(), 1);
  EXPECT_EQ(c2.load(), 1);
  EXPECT_EQ(c3.load(), 0);
  t.m.Free();  // freeing the manager ends the wait on 3
  EXPECT_EQ(c3.load(), 1);
}

TEST(Sync, WaitOnSelfFails) {
  std::atomic<int> count{0};
  Pair t;
  uint64_t later = t.m.Generate(t.r);
  EXPECT_FALSE(t.m.Wait(1, 1, t.r, later, &count));
  t.m.Free();
  EXPECT_EQ(count.load(), 0);
}

TEST(Sync, AWaitOrderedBeforeTheReleasersOnlyOrderNumberIsInvalid) {
  std::atomic<int> count{0};
  Sequences seqs;
  auto& [m, r, w] = seqs;
  uint64_t wn = m.Generate(w);
  (void)m.Generate(r);  // after wn
  EXPECT_FALSE(m.Wait(1, 1, w, wn, &count));
  m.Free();
  EXPECT_EQ(count.load(), 0);
}

TEST(Sync, AWaitOnAnAlreadyReleasedTokenReturnsFalseAndNeverRuns) {
  std::atomic<int> count{0};
  Pair t;
  ASSERT_EQ(t.m.Begin(t.r, t.rn), kOk);
  EXPECT_EQ(t.m.Release(1, 3), kOk);
  EXPECT_FALSE(t.m.Wait(1, 2, t.w, t.wn, &count));
  EXPECT_EQ(t.m.Finish(t.r, t.rn), kOk);
  t.m.Free();
  EXPECT_EQ(count.load(), 0);
}

TEST(Sync, DestroyingTheReleaserRunsItsWaitsAndItsTokensReadReleased) {
  std::atomic<int> count{0};
  Pair t;
  EXPECT_TRUE(t.m.Wait(1, 5, t.w, t.wn, &count));
  EXPECT_FALSE(t.m.IsReleased(1, 5));
  EXPECT_EQ(t.m.DestroyClient(1), kOk);
  EXPECT_EQ(count.load(), 1);
  EXPECT_TRUE(t.m.IsReleased(1, 5));
}

TEST(Sync, AReleaseThatNeverComesIsRetiredWhenTheReleaserFinishesAndTheTokenStaysUnreleased) {
  std::atomic<int> count{0};
  Pair t;
  EXPECT_TRUE(t.m.Wait(1, 1, t.w, t.wn, &count));
  ASSERT_EQ(t.m.Begin(t.r, t.rn), kOk);
  EXPECT_EQ(count.load(), 0);
  EXPECT_EQ(t.m.Finish(t.r, t.rn), kOk);
  EXPECT_EQ(count.load(), 1);
  EXPECT_FALSE(t.m.IsReleased(1, 1));
}

TEST(Sync, TheSameWhenTheWaiterHasSeveralOrderNumbersAndALaterReleaseDoesNotRunItTwice) {
  std::atomic<int> count{0};
  Pair t;
  uint64_t wn2 = t.m.Generate(t.w);
  uint64_t rn2 = t.m.Generate(t.r);
  EXPECT_TRUE(t.m.Wait(1, 1, t.w, t.wn, &count));  // fenced at min(rn2, wn) = wn
  EXPECT_GT(wn2, t.wn);
  ASSERT_EQ(t.m.Begin(t.r, t.rn), kOk);
  EXPECT_EQ(count.load(), 0) << "not while rn is processing";
  // Issue 11: this used to expect the wait to last until rn2 *began*. Now (Chromium's rule)
  // finishing rn retires every fence before r's next unprocessed number, rn2: wn is before it.
  ASSERT_EQ(t.m.Finish(t.r, t.rn), kOk);
  EXPECT_EQ(count.load(), 1) << "the fence (wn) is before r's next number (rn2)";
  ASSERT_EQ(t.m.Begin(t.r, rn2), kOk);
  EXPECT_EQ(count.load(), 1);
  EXPECT_EQ(t.m.Release(1, 1), kOk);
  EXPECT_EQ(t.m.Finish(t.r, rn2), kOk);
  t.m.Free();
  EXPECT_EQ(count.load(), 1);
}

TEST(Sync, AFenceAtAnOrderNumberTheReleaserNeverHadRetiresOnceItsNextNumberIsPastIt) {
  std::atomic<int> count{0};
  Sequences seqs;
  auto& [m, r, w] = seqs;
  uint64_t r1 = m.Generate(r);
  uint64_t wn = m.Generate(w);  // between r1 and r2
  uint64_t r2 = m.Generate(r);
  EXPECT_TRUE(m.Wait(1, 1, w, wn, &count));
  ASSERT_EQ(m.Begin(r, r1), kOk);
  EXPECT_EQ(count.load(), 0);
  // Issue 11: this used to expect the fence to hold until r2 *began*. Now (Chromium's rule)
  // finishing r1 retires it: r's next unprocessed number, r2, is past the fence.
  ASSERT_EQ(m.Finish(r, r1), kOk);
  EXPECT_EQ(count.load(), 1) << "retired when r1 finished";
  ASSERT_EQ(m.Begin(r, r2), kOk);
  EXPECT_EQ(count.load(), 1) << "and only once";
  EXPECT_FALSE(m.IsReleased(1, 1));
}

// Issue 11: finishing a number retires every wait fenced before the releaser's next unprocessed
// number, not one fenced at it. Releaser numbers 1 and 4; waits at 3 (fenced at 3) and 5 (at 4).
TEST(Sync, FinishingRetiresTheFencesBeforeTheReleasersNextNumberAndNotTheOneAtIt) {
  std::atomic<int> at3{0}, at5{0};
  Sequences seqs;
  auto& [m, r, w] = seqs;
  std::vector<uint64_t> numbers;
  for (uint64_t s : {r, w, w, r, w}) numbers.push_back(m.Generate(s));
  ASSERT_EQ(numbers, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(m.Wait(1, 1, w, 3, &at3));
  EXPECT_TRUE(m.Wait(1, 1, w, 5, &at5));
  ASSERT_EQ(m.Begin(r, 1), kOk);
  ASSERT_EQ(m.Finish(r, 1), kOk);
  EXPECT_EQ(at3.load(), 1) << "fence 3 < next number 4";
  EXPECT_EQ(at5.load(), 0) << "fence 4 is the next number";
  ASSERT_EQ(m.Begin(r, 4), kOk);
  size_t callbacks = 0;
  EXPECT_EQ(m.Release(1, 1, nullptr, &callbacks), kOk);
  EXPECT_EQ(callbacks, 1u);
  ASSERT_EQ(m.Finish(r, 4), kOk);
  EXPECT_EQ(at5.load(), 1);
}

// Issue 11: two streams waiting on each other's tokens that are never released, driven the way a
// scheduler drives them. A: 1, then 3 waits on B; B: 2, then 4 waits on A. A's wait is fenced at
// 3 on B (numbers 2 and 4) and ends when B finishes 2; B's wait, fenced at 3 on A, ends when A
// finishes 3. Every number is processed.
TEST(Sync, TwoSequencesWaitingOnEachOthersUnreleasedTokensBothGetToRun) {
  Sync m;
  uint64_t a = m.Sequence(), b = m.Sequence();
  m.Client(1, a);
  m.Client(2, b);
  std::vector<uint64_t> numbers;
  for (uint64_t s : {a, b, a, b}) numbers.push_back(m.Generate(s));
  ASSERT_EQ(numbers, (std::vector<uint64_t>{1, 2, 3, 4}));
  std::atomic<int> a_may_run{0}, b_may_run{0};
  ASSERT_EQ(m.Begin(a, 1), kOk);
  ASSERT_EQ(m.Finish(a, 1), kOk);
  EXPECT_TRUE(m.Wait(2, 1, a, 3, &a_may_run));  // A's 3 waits on B
  ASSERT_EQ(m.Begin(b, 2), kOk);
  ASSERT_EQ(m.Finish(b, 2), kOk);
  EXPECT_EQ(a_may_run.load(), 1) << "B has nothing left before 3";
  EXPECT_TRUE(m.Wait(1, 1, b, 4, &b_may_run));  // B's 4 waits on A
  ASSERT_EQ(m.Begin(a, 3), kOk);
  ASSERT_EQ(m.Finish(a, 3), kOk);
  EXPECT_EQ(b_may_run.load(), 1);
  ASSERT_EQ(m.Begin(b, 4), kOk);
  ASSERT_EQ(m.Finish(b, 4), kOk);
  EXPECT_FALSE(m.IsReleased(1, 1));
  EXPECT_FALSE(m.IsReleased(2, 1));
}

namespace {

// One link of a chain of releases made from callbacks through the wrappers: registers the wait
// for the next count and releases it from inside the callback.
struct Chain {
  const gpusvc_sync_manager* m = nullptr;
  uint64_t waiter = 0, wait_order = 0, last = 0;
  uint64_t next = 1;  // only touched on the releasing thread
  uint64_t ran_inside = 0;
  std::vector<uint64_t> seen;
  bool record = false;
};

void ChainStep(Chain* c) {
  uint64_t k = c->next++;
  if (c->record) c->seen.push_back(k);
  if (k == c->last) return;
  bool registered = false;
  ASSERT_EQ(gpusvc::SyncWait(c->m, gpusvc::SyncToken(0, 1, k + 1), c->waiter, c->wait_order,
                             [c] { ChainStep(c); }, &registered),
            GPUSVC_OK);
  ASSERT_TRUE(registered);
  bool released = false;
  ASSERT_EQ(gpusvc::SyncClientRelease(c->m, 0, 1, k + 1, &released), GPUSVC_OK);
  ASSERT_TRUE(released);
  if (c->next != k + 1) ++c->ran_inside;
}

void RunChain(Chain* c) {
  Sequences seqs;
  auto& [m, r, w] = seqs;
  uint64_t rn = m.Generate(r), wn = m.Generate(w);
  ASSERT_EQ(m.Begin(r, rn), kOk);
  c->m = m.get();
  c->waiter = w;
  c->wait_order = wn;
  bool registered = false;
  ASSERT_EQ(gpusvc::SyncWait(m.get(), gpusvc::SyncToken(0, 1, 1), w, wn, [c] { ChainStep(c); },
                             &registered),
            GPUSVC_OK);
  ASSERT_TRUE(registered);
  EXPECT_EQ(m.Release(1, 1), kOk);
  EXPECT_EQ(c->next, c->last + 1) << "every link ran before the outermost release returned";
  EXPECT_EQ(m.Finish(r, rn), kOk);
}

}  // namespace

// Issue 11: a million releases, each made by the callback of the one before, complete on this
// (gtest's main) thread; nested, they overflowed the stack at about 14k levels.
TEST(Sync, AMillionReleasesChainedThroughCallbacksComplete) {
  Chain c;
  c.last = 1000000;
  RunChain(&c);
  EXPECT_EQ(c.ran_inside, 0u);
}

// Callbacks a callback triggers run after it returns, in order.
TEST(Sync, CallbacksACallbackTriggersRunAfterItReturnsInOrder) {
  Chain c;
  c.last = 100;
  c.record = true;
  RunChain(&c);
  std::vector<uint64_t> expected;
  for (uint64_t k = 1; k <= 100; ++k) expected.push_back(k);
  EXPECT_EQ(c.seen, expected);
  EXPECT_EQ(c.ran_inside, 0u) << "no release made inside a callback ran its callback first";
}

TEST(Sync, AWaitFromTheReleasingSequenceFails) {
  std::atomic<int> count{0};
  Sync m;
  uint64_t r = m.Sequence();
  m.Client(1, r);
  m.Client(2, r);
  uint64_t n1 = m.Generate(r);
  uint64_t n2 = m.Generate(r);
  EXPECT_GT(n2, n1);
  EXPECT_FALSE(m.Wait(1, 1, r, n2, &count));
  m.Free();
  EXPECT_EQ(count.load(), 0);
}

TEST(Sync, AnInvalidWaitOrderNumberIsRejected) {
  std::atomic<int> count{0};
  Pair t;
  EXPECT_FALSE(t.m.Wait(1, 1, t.w, 0, &count));
  t.m.Free();
  EXPECT_EQ(count.load(), 0);
}

TEST(Sync, AFenceRetiresOnlyOnceTheReleaserPassesItNotBefore) {
  std::atomic<int> count{0};
  Sequences seqs;
  auto& [m, r, w] = seqs;
  uint64_t r1 = m.Generate(r);
  uint64_t r2 = m.Generate(r);
  uint64_t wn = m.Generate(w);  // after r2: fence at r2
  EXPECT_TRUE(m.Wait(1, 1, w, wn, &count));
  ASSERT_EQ(m.Begin(r, r1), kOk);
  ASSERT_EQ(m.Finish(r, r1), kOk);
  ASSERT_EQ(m.Begin(r, r2), kOk);
  ASSERT_EQ(m.Pause(r), kOk);
  ASSERT_EQ(m.Begin(r, r2), kOk);
  EXPECT_EQ(count.load(), 0) << "not before the fence is passed";
  ASSERT_EQ(m.Finish(r, r2), kOk);
  EXPECT_EQ(count.load(), 1);
}

TEST(Sync, CyclicWaitsBetweenTwoSequencesAreBothRetired) {
  std::atomic<int> count{0};
  Sync m;
  uint64_t a = m.Sequence(), b = m.Sequence();
  m.Client(1, a);
  m.Client(2, b);
  uint64_t a1 = m.Generate(a), b1 = m.Generate(b), a2 = m.Generate(a), b2 = m.Generate(b);
  EXPECT_TRUE(m.Wait(2, 1, a, a2, &count));
  EXPECT_TRUE(m.Wait(1, 1, b, b2, &count));
  ASSERT_EQ(m.Begin(a, a1), kOk);
  ASSERT_EQ(m.Finish(a, a1), kOk);
  ASSERT_EQ(m.Begin(b, b1), kOk);
  ASSERT_EQ(m.Finish(b, b1), kOk);
  ASSERT_EQ(m.Begin(a, a2), kOk);
  ASSERT_EQ(m.Begin(b, b2), kOk);
  ASSERT_EQ(m.Finish(a, a2), kOk);
  ASSERT_EQ(m.Finish(b, b2), kOk);
  EXPECT_EQ(count.load(), 2);
  EXPECT_FALSE(m.IsReleased(1, 1));
  EXPECT_FALSE(m.IsReleased(2, 1));
}

// ---- bad input ----

TEST(Sync, NullTokenIsAnError) {
  Pair t;
  bool out = true;
  EXPECT_EQ(gpusvc_sync_token_is_released(t.m.get(), nullptr, &out), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_sync_token_wait_blocking(t.m.get(), nullptr, 0, &out), GPUSVC_NULL_ARGUMENT);
  gpusvc_sync_token tok = gpusvc::SyncToken(0, 1, 1);
  EXPECT_EQ(gpusvc_sync_token_wait(t.m.get(), &tok, t.w, t.wn, nullptr, nullptr, &out),
            GPUSVC_NULL_ARGUMENT);
  EXPECT_TRUE(out) << "outputs are written only on GPUSVC_OK";
}

TEST(Sync, UnknownIdsAreErrors) {
  std::atomic<int> count{0};
  Pair t;
  uint64_t x = 7;
  bool b = true;
  EXPECT_EQ(gpusvc_sync_sequence_generate(t.m.get(), 999, &x), GPUSVC_SYNC_UNKNOWN_SEQUENCE);
  EXPECT_EQ(t.m.Begin(999, 1), GPUSVC_SYNC_UNKNOWN_SEQUENCE);
  EXPECT_EQ(t.m.Pause(999), GPUSVC_SYNC_UNKNOWN_SEQUENCE);
  EXPECT_EQ(t.m.Finish(999, 1), GPUSVC_SYNC_UNKNOWN_SEQUENCE);
  EXPECT_EQ(gpusvc_sync_sequence_processed(t.m.get(), 999, &x), GPUSVC_SYNC_UNKNOWN_SEQUENCE);
  EXPECT_EQ(gpusvc_sync_client_create(t.m.get(), 0, 5, 999), GPUSVC_SYNC_UNKNOWN_SEQUENCE);
  EXPECT_EQ(gpusvc_sync_client_create(t.m.get(), 0, 1, t.r), GPUSVC_SYNC_CLIENT_EXISTS);
  EXPECT_EQ(t.m.Release(77, 1), GPUSVC_SYNC_UNKNOWN_CLIENT);
  EXPECT_EQ(gpusvc::SyncWait(
                t.m.get(), gpusvc::SyncToken(0, 1, 1), 999, 5, [&count] { count++; }, &b),
            GPUSVC_SYNC_UNKNOWN_SEQUENCE);
  EXPECT_EQ(x, 7u);
  EXPECT_TRUE(b) << "outputs are written only on GPUSVC_OK";
  t.m.Free();
  EXPECT_EQ(count.load(), 0);
}

TEST(Sync, ReleaseOutsideProcessingIsAnError) {
  Pair t;
  EXPECT_EQ(t.m.Release(1, 1), GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING);
  ASSERT_EQ(t.m.Begin(t.r, t.rn), kOk);
  ASSERT_EQ(t.m.Pause(t.r), kOk);
  EXPECT_EQ(t.m.Release(1, 1), GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING);
  EXPECT_FALSE(t.m.IsReleased(1, 1));
}

TEST(Sync, DoubleDestroyIsAnError) {
  std::atomic<int> count{0};
  Pair t;
  EXPECT_TRUE(t.m.Wait(1, 1, t.w, t.wn, &count));
  EXPECT_EQ(gpusvc_sync_sequence_destroy(t.m.get(), t.r), kOk);
  EXPECT_EQ(count.load(), 1) << "destroying the releasing sequence retires its fences";
  EXPECT_EQ(gpusvc_sync_sequence_destroy(t.m.get(), t.r), GPUSVC_SYNC_UNKNOWN_SEQUENCE);
  EXPECT_EQ(t.m.DestroyClient(1), kOk);
  EXPECT_EQ(t.m.DestroyClient(1), GPUSVC_SYNC_UNKNOWN_CLIENT);
  gpusvc_sync_manager* raw = nullptr;
  ASSERT_EQ(gpusvc_sync_manager_new(&raw), kOk);
  EXPECT_EQ(gpusvc_sync_manager_free(raw), kOk);
  EXPECT_EQ(gpusvc_sync_manager_free(raw), GPUSVC_INVALID_HANDLE);
  uint64_t s = 0;
  EXPECT_EQ(gpusvc_sync_sequence_create(raw, &s), GPUSVC_INVALID_HANDLE);
}

TEST(Sync, ReduceKeepsTheHighestReleasePerClient) {
  std::vector<gpusvc_sync_token> out;
  ASSERT_EQ(gpusvc::ReduceSyncTokens(
                {gpusvc::SyncToken(0, 1, 3), gpusvc::SyncToken(0, 1, 5),
                 gpusvc::SyncToken(1, 1, 2), gpusvc::SyncToken(0, 1, 5, true),
                 gpusvc::SyncToken(0, 2, 0), gpusvc::SyncToken(0, 2, 1)},
                &out),
            kOk);
  EXPECT_EQ(out, (std::vector<gpusvc_sync_token>{gpusvc::SyncToken(0, 1, 5, true),
                                                 gpusvc::SyncToken(0, 2, 1),
                                                 gpusvc::SyncToken(1, 1, 2)}));
}

// ---- threads ----

TEST(Sync, ACallbackOnAnotherThreadWakesAWaitBlocking) {
  // A wait from sequence w on client 1 (sequence r) signals client 2 (sequence r2) from the
  // releasing thread; the main thread blocks on client 2's token.
  Sync m;
  uint64_t r = m.Sequence(), w = m.Sequence(), r2 = m.Sequence();
  m.Client(1, r);
  m.Client(2, r2);
  uint64_t rn = m.Generate(r);
  uint64_t wn = m.Generate(w);
  ASSERT_EQ(m.Begin(r2, m.Generate(r2)), kOk);
  gpusvc_sync_manager* raw = m.get();
  std::atomic<bool> ran_elsewhere{false};
  const std::thread::id main_id = std::this_thread::get_id();
  bool registered = false;
  ASSERT_EQ(gpusvc::SyncWait(
                raw, gpusvc::SyncToken(0, 1, 1), w, wn,
                [raw, main_id, &ran_elsewhere] {
                  ran_elsewhere = std::this_thread::get_id() != main_id;
                  bool released = false;
                  size_t callbacks = 0;
                  (void)gpusvc_sync_client_release(raw, 0, 2, 1, &released, &callbacks);
                },
                &registered),
            kOk);
  ASSERT_TRUE(registered);
  std::thread releaser([raw, r, rn] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    (void)gpusvc_sync_sequence_begin(raw, r, rn);
    bool released = false;
    size_t callbacks = 0;
    (void)gpusvc_sync_client_release(raw, 0, 1, 1, &released, &callbacks);
  });
  gpusvc_sync_token tok = gpusvc::SyncToken(0, 2, 1);
  bool released = false;
  EXPECT_EQ(gpusvc_sync_token_wait_blocking(raw, &tok, 10000, &released), kOk);
  releaser.join();
  EXPECT_TRUE(released);
  EXPECT_TRUE(ran_elsewhere.load());
}
