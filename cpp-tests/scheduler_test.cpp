// The scheduler C ABI from C++ through the gpusvc.hpp wrappers: one test per scheduler behaviour
// (the setups of gpu-scheduler/tests/behaviours.rs) and the bad inputs the ABI turns into codes
// (that one calls the C functions directly, to pass NULLs).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpusvc.hpp"

namespace {

constexpr uint32_t kLow = GPUSVC_SCHEDULER_PRIORITY_LOW;
constexpr uint32_t kNormal = GPUSVC_SCHEDULER_PRIORITY_NORMAL;
constexpr uint32_t kHigh = GPUSVC_SCHEDULER_PRIORITY_HIGH;
constexpr uint32_t kRealTime = GPUSVC_SCHEDULER_PRIORITY_REAL_TIME;
constexpr uint64_t kMs = 1000000;

using Log = std::vector<std::string>;

// What one task does; owned by the test's Sched (or the test), alive until the scheduler is freed.
struct Spec {
  Log* log = nullptr;
  std::string name;
  const gpusvc_scheduler* sched = nullptr;
  uint64_t release_client = 0;  // 0: no release
  uint64_t release_count = 0;
  bool enable = false;
  uint64_t enable_stream = 0;
  int continues = 0;
  // Advance the manual clock by this much while running.
  uint64_t advance_ns = 0;
  std::atomic<uint64_t>* clock = nullptr;
  // Log "yield <should_yield>" before the release (if any) and again after it.
  bool log_yield = false;
  // Enqueue this spec on spawn_stream while running.
  Spec* spawn = nullptr;
  uint64_t spawn_stream = 0;
};

uint32_t RunSpec(void* ud);

gpusvc::SchedulerTask TaskOf(Spec* spec, bool with_start = false,
                             std::vector<gpusvc_sync_token> waits = {});

void LogYield(Spec* s) {
  bool y = false;
  EXPECT_EQ(gpusvc::SchedulerShouldYield(s->sched, &y), GPUSVC_OK);
  s->log->push_back(y ? "yield true" : "yield false");
}

uint32_t RunSpec(void* ud) {
  auto* s = static_cast<Spec*>(ud);
  s->log->push_back(s->name);
  if (s->advance_ns != 0) s->clock->fetch_add(s->advance_ns);
  if (s->spawn != nullptr) {
    EXPECT_EQ(gpusvc::SchedulerEnqueue(s->sched, s->spawn_stream, TaskOf(s->spawn)), GPUSVC_OK);
  }
  if (s->log_yield) LogYield(s);
  if (s->release_client != 0) {
    EXPECT_EQ(gpusvc::SchedulerRelease(s->sched, 0, s->release_client, s->release_count),
              GPUSVC_OK);
    if (s->log_yield) LogYield(s);
  }
  if (s->enable) {
    EXPECT_EQ(gpusvc::SetSchedulerStreamEnabled(s->sched, s->enable_stream, true), GPUSVC_OK);
  }
  if (s->continues > 0) {
    --s->continues;
    return GPUSVC_SCHEDULER_TASK_CONTINUE_LATER;
  }
  return GPUSVC_SCHEDULER_TASK_DONE;
}

void StartSpec(void* ud) {
  auto* s = static_cast<Spec*>(ud);
  s->log->push_back("start " + s->name);
}

gpusvc::SchedulerTask TaskOf(Spec* spec, bool with_start, std::vector<gpusvc_sync_token> waits) {
  gpusvc::SchedulerTask t;
  t.run = RunSpec;
  t.user_data = spec;
  if (with_start) t.start = StartSpec;
  t.waits = std::move(waits);
  return t;
}

uint64_t ManualNow(void* ud) { return static_cast<std::atomic<uint64_t>*>(ud)->load(); }

void RecordSample(const gpusvc_scheduler_task_sample* sample, void* ud) {
  static_cast<std::vector<gpusvc_scheduler_task_sample>*>(ud)->push_back(*sample);
}

gpusvc_sync_token Token(uint64_t client, uint64_t count) {
  return gpusvc::SyncToken(0, client, count, true);
}

struct ManualClock {};

// A scheduler with a log; the scheduler is freed (by its SchedulerPtr, the last member) before
// the specs, the clock and the log.
class Sched {
 public:
  Sched() { EXPECT_EQ(gpusvc::NewScheduler(&s_), GPUSVC_OK); }
  // Over a shared sync manager.
  explicit Sched(const gpusvc_sync_manager* m) {
    EXPECT_EQ(gpusvc::NewScheduler(&s_, m), GPUSVC_OK);
  }
  // Default slices (5 ms, 1 ms granularity) on a manual clock only tasks advance.
  explicit Sched(ManualClock /*tag*/) {
    gpusvc_scheduler_config config = gpusvc::SchedulerConfigDefaults();
    config.now_ns = ManualNow;
    config.clock_user_data = &clock_;
    EXPECT_EQ(gpusvc::NewScheduler(config, &s_), GPUSVC_OK);
  }
  Sched(const Sched&) = delete;
  Sched& operator=(const Sched&) = delete;

  const gpusvc_scheduler* get() const { return s_.get(); }

  // What `query(get(), args..., &out)` writes to `out` (which starts as `init`); the call must
  // succeed.
  template <typename T, typename Query, typename... Args>
  T Answer(Query query, T init, Args... args) {
    T out = init;
    EXPECT_EQ(query(get(), args..., &out), GPUSVC_OK);
    return out;
  }

  uint64_t Stream(uint32_t p) { return Answer(gpusvc::AddSchedulerStream, uint64_t{0}, p); }

  void Client(uint64_t stream, uint64_t client) {
    EXPECT_EQ(gpusvc::CreateSchedulerClient(get(), stream, 0, client), GPUSVC_OK);
  }

  Spec& NewSpec(const std::string& name) {
    specs_.push_back(std::make_unique<Spec>());
    Spec& s = *specs_.back();
    s.log = &log_;
    s.name = name;
    s.sched = get();
    s.clock = &clock_;
    return s;
  }

  uint64_t Enqueue(uint64_t stream, Spec& spec, bool with_start = false,
                   const std::vector<gpusvc_sync_token>& tokens = {}) {
    uint64_t n = 0;
    EXPECT_EQ(gpusvc::SchedulerEnqueue(get(), stream, TaskOf(&spec, with_start, tokens), &n),
              GPUSVC_OK);
    return n;
  }

  uint64_t Push(uint64_t stream, const std::string& name) { return Enqueue(stream, NewSpec(name)); }

  // A spec that releases `count` on `client` when it runs.
  Spec& Releasing(const std::string& name, uint64_t client, uint64_t count = 1) {
    Spec& s = NewSpec(name);
    s.release_client = client;
    s.release_count = count;
    return s;
  }

  void Advancing(uint64_t stream, const std::string& name, uint64_t ms) {
    Spec& s = NewSpec(name);
    s.advance_ns = ms * kMs;
    Enqueue(stream, s);
  }

  void SetEnabled(uint64_t stream, bool enabled) {
    EXPECT_EQ(gpusvc::SetSchedulerStreamEnabled(get(), stream, enabled), GPUSVC_OK);
  }

  size_t RunNext() { return Answer(gpusvc::RunSchedulerNext, size_t{0}); }
  size_t RunUntilIdle() { return Answer(gpusvc::RunSchedulerUntilIdle, size_t{0}); }

  uint32_t Scheduled(uint64_t stream) {
    return Answer(gpusvc::SchedulerStreamScheduledPriority, uint32_t{99}, stream);
  }
  uint32_t Base(uint64_t stream) {
    return Answer(gpusvc::SchedulerStreamBasePriority, uint32_t{99}, stream);
  }
  size_t Pending(uint64_t stream) {
    return Answer(gpusvc::SchedulerStreamPendingTasks, size_t{99}, stream);
  }
  gpusvc_scheduler_removed_stream Remove(uint64_t stream) {
    return Answer(gpusvc::RemoveSchedulerStream, gpusvc_scheduler_removed_stream{}, stream);
  }

  const Log& log() const { return log_; }

 private:
  Log log_;
  std::atomic<uint64_t> clock_{1000 * kMs};
  std::vector<std::unique_ptr<Spec>> specs_;
  gpusvc::SchedulerPtr s_;
};

}  // namespace

TEST(Scheduler, FifoWithinAStream) {
  Sched s;
  uint64_t a = s.Stream(kNormal);
  uint64_t last = 0;
  for (const char* name : {"1", "2", "3", "4"}) {
    uint64_t n = s.Push(a, name);
    EXPECT_GT(n, last);
    last = n;
  }
  EXPECT_EQ(s.RunUntilIdle(), 4u);
  EXPECT_EQ(s.log(), (Log{"1", "2", "3", "4"}));
}

TEST(Scheduler, APerTaskStartCallbackRunsBeforeTheTask) {
  Sched s;
  uint64_t a = s.Stream(kNormal);
  s.Enqueue(a, s.NewSpec("t"), true);
  EXPECT_EQ(s.RunUntilIdle(), 1u);
  EXPECT_EQ(s.log(), (Log{"start t", "t"}));
}

TEST(Scheduler, AContinuedTaskRunsFirst) {
  Sched s;
  uint64_t a = s.Stream(kNormal);
  Spec& c = s.NewSpec("c");
  c.continues = 1;
  s.Enqueue(a, c, true);
  s.Push(a, "next");
  EXPECT_EQ(s.RunUntilIdle(), 3u);
  EXPECT_EQ(s.log(), (Log{"start c", "c", "c", "next"}));
}

TEST(Scheduler, StreamsRunInPriorityOrder) {
  Sched s;
  uint64_t low = s.Stream(kLow);
  uint64_t normal = s.Stream(kNormal);
  uint64_t high = s.Stream(kHigh);
  uint64_t rt = s.Stream(kRealTime);
  s.Push(low, "low");
  s.Push(normal, "normal");
  s.Push(high, "high");
  s.Push(rt, "rt");
  EXPECT_EQ(s.RunUntilIdle(), 4u);
  EXPECT_EQ(s.log(), (Log{"rt", "high", "normal", "low"}));
}

TEST(Scheduler, EqualPrioritiesRunInRoundRobinOrder) {
  Sched s;
  uint64_t a = s.Stream(kNormal);
  uint64_t b = s.Stream(kNormal);
  Spec& sa = s.NewSpec("a");
  sa.continues = 1;
  s.Enqueue(a, sa);
  Spec& sb = s.NewSpec("b");
  sb.continues = 1;
  s.Enqueue(b, sb);
  EXPECT_EQ(s.RunUntilIdle(), 4u);
  EXPECT_EQ(s.log(), (Log{"a", "b", "a", "b"}));
}

TEST(Scheduler, AWaiterRunsAfterItsReleaser) {
  Sched s;
  uint64_t r = s.Stream(kLow);
  uint64_t w = s.Stream(kHigh);
  s.Client(r, 1);
  Spec& rel = s.Releasing("release", 1);
  s.Enqueue(r, rel);
  s.Enqueue(w, s.NewSpec("wait"), false, {Token(1, 1)});
  s.Push(w, "behind");
  EXPECT_EQ(s.RunUntilIdle(), 3u);
  EXPECT_EQ(s.log(), (Log{"release", "wait", "behind"}));
}

TEST(Scheduler, AReleaserOutsideTheSchedulerIsHonoured) {
  gpusvc::SyncManagerPtr m;
  ASSERT_EQ(gpusvc::NewSyncManager(&m), GPUSVC_OK);
  Log log;
  Spec spec;
  spec.log = &log;
  spec.name = "wait";
  {
    gpusvc::SchedulerPtr s;
    ASSERT_EQ(gpusvc::NewScheduler(&s, m.get()), GPUSVC_OK);
    spec.sched = s.get();
    uint64_t host = 0, n = 0, w = 0;
    ASSERT_EQ(gpusvc::SyncSequenceCreate(m.get(), &host), GPUSVC_OK);
    ASSERT_EQ(gpusvc::SyncClientCreate(m.get(), 0, 9, host), GPUSVC_OK);
    ASSERT_EQ(gpusvc::SyncSequenceGenerate(m.get(), host, &n), GPUSVC_OK);
    ASSERT_EQ(gpusvc::AddSchedulerStream(s.get(), kNormal, &w), GPUSVC_OK);
    ASSERT_EQ(gpusvc::SchedulerEnqueue(s.get(), w, TaskOf(&spec, false, {Token(9, 1)})),
              GPUSVC_OK);
    size_t ran = 99;
    EXPECT_EQ(gpusvc::RunSchedulerUntilIdle(s.get(), &ran), GPUSVC_OK);
    EXPECT_EQ(ran, 0u) << "blocked until the host releases";
    // The host's own sequence releases from another thread, outside any scheduler task.
    bool released = false;
    std::thread host_thread([&] {
      EXPECT_EQ(gpusvc::SyncSequenceBegin(m.get(), host, n), GPUSVC_OK);
      EXPECT_EQ(gpusvc::SyncClientRelease(m.get(), 0, 9, 1, &released), GPUSVC_OK);
      EXPECT_EQ(gpusvc::SyncSequenceFinish(m.get(), host, n), GPUSVC_OK);
    });
    host_thread.join();
    EXPECT_TRUE(released);
    EXPECT_EQ(gpusvc::RunSchedulerUntilIdle(s.get(), &ran), GPUSVC_OK);
    EXPECT_EQ(ran, 1u);
  }
  EXPECT_EQ(log, (Log{"wait"}));
}

TEST(Scheduler, AWaitThatCanNeverBeReleasedDoesNotBlock) {
  Sched s;
  uint64_t r = s.Stream(kNormal);
  uint64_t w = s.Stream(kHigh);
  s.Client(r, 1);
  s.Push(r, "r");
  s.Enqueue(w, s.NewSpec("w1"), false, {Token(1, 5)});
  s.Enqueue(w, s.NewSpec("w2"), false, {Token(77, 1), Token(1, 9)});
  EXPECT_EQ(s.RunUntilIdle(), 3u);
  EXPECT_EQ(s.log(), (Log{"r", "w1", "w2"}));
}

TEST(Scheduler, TheReleaserIsRaisedToItsWaitersPriorityAndNoHigher) {
  Sched s;
  s.Stream(kRealTime);
  uint64_t r = s.Stream(kLow);
  uint64_t n = s.Stream(kNormal);
  uint64_t w = s.Stream(kHigh);
  s.Client(r, 1);
  Spec& rel = s.Releasing("r", 1);
  s.Enqueue(r, rel);
  s.Push(n, "n");
  EXPECT_EQ(s.Scheduled(r), kLow);
  s.Enqueue(w, s.NewSpec("w"), false, {Token(1, 1)});
  EXPECT_EQ(s.Scheduled(r), kHigh);
  EXPECT_EQ(s.Base(r), kLow);
  s.RunUntilIdle();
  EXPECT_EQ(s.log(), (Log{"r", "w", "n"}));
  EXPECT_EQ(s.Scheduled(r), kLow);
}

// A client the host creates through the sync manager on a stream's sequence lends priority like
// one from gpusvc_scheduler_create_client.
TEST(Scheduler, AHostClientOnAStreamsSequenceLendsPriorityToo) {
  gpusvc::SyncManagerPtr m;
  ASSERT_EQ(gpusvc::NewSyncManager(&m), GPUSVC_OK);
  {
    Sched s(m.get());
    uint64_t r = s.Stream(kLow);
    uint64_t n = s.Stream(kNormal);
    uint64_t w = s.Stream(kHigh);
    uint64_t seq = 0;
    ASSERT_EQ(gpusvc::SchedulerStreamSequence(s.get(), r, &seq), GPUSVC_OK);
    ASSERT_EQ(gpusvc::SyncClientCreate(m.get(), 0, 1, seq), GPUSVC_OK);
    Spec& rel = s.Releasing("r", 1);
    s.Enqueue(r, rel);
    s.Push(n, "n");
    s.Enqueue(w, s.NewSpec("w"), false, {Token(1, 1)});
    EXPECT_EQ(s.Scheduled(r), kHigh);
    s.RunUntilIdle();
    EXPECT_EQ(s.log(), (Log{"r", "w", "n"}));
    EXPECT_EQ(s.Scheduled(r), kLow);
    EXPECT_EQ(gpusvc::SchedulerStreamSequence(s.get(), r + 1000, &seq),
              GPUSVC_SCHEDULER_UNKNOWN_STREAM);
  }
}

TEST(Scheduler, TheRaiseRevertsWhenTheWaiterIsDestroyed) {
  Sched s;
  uint64_t r = s.Stream(kLow);
  uint64_t w = s.Stream(kRealTime);
  s.Client(r, 1);
  s.Push(r, "r");
  s.Enqueue(w, s.NewSpec("w"), false, {Token(1, 1)});
  EXPECT_EQ(s.Scheduled(r), kRealTime);
  s.Remove(w);
  EXPECT_EQ(s.Scheduled(r), kLow);
}

TEST(Scheduler, ACircularReleaseChainAcross3StreamsCompletes) {
  Sched s;
  const uint32_t prios[] = {kHigh, kNormal, kLow};
  std::vector<uint64_t> ids;
  for (uint32_t p : prios) ids.push_back(s.Stream(p));
  for (size_t i = 0; i < ids.size(); ++i) {
    s.Client(ids[i], i + 1);
    s.SetEnabled(ids[i], false);
  }
  // Stream i waits on stream i+1's release, then releases its own: A -> B -> C -> A.
  for (size_t i = 0; i < ids.size(); ++i) {
    uint64_t next = (i + 1) % 3 + 1;
    s.Enqueue(ids[i], s.NewSpec("wait" + std::to_string(i)), false, {Token(next, 1)});
    Spec& rel = s.Releasing("release" + std::to_string(i), i + 1);
    s.Enqueue(ids[i], rel);
  }
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) s.SetEnabled(*it, true);
  EXPECT_EQ(s.RunUntilIdle(), 6u);
  Log got = s.log();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (Log{"release0", "release1", "release2", "wait0", "wait1", "wait2"}));
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(s.Scheduled(ids[i]), prios[i]);
    EXPECT_EQ(s.Pending(ids[i]), 0u);
  }
}

TEST(Scheduler, WaitingOnOneselfDoesNotBlock) {
  Sched s;
  uint64_t a = s.Stream(kNormal);
  s.Client(a, 1);
  s.Enqueue(a, s.NewSpec("self"), false, {Token(1, 1)});
  EXPECT_EQ(s.RunUntilIdle(), 1u);
  EXPECT_EQ(s.log(), (Log{"self"}));
  EXPECT_EQ(s.Scheduled(a), kNormal);
}

TEST(Scheduler, ShouldYieldIsFalseForDependentWorkAndTrueAfterTheRelease) {
  Sched s;
  uint64_t l = s.Stream(kLow);
  uint64_t h = s.Stream(kHigh);
  s.Client(l, 1);
  Spec& rel = s.Releasing("l", 1);
  rel.log_yield = true;
  s.Enqueue(l, rel);
  s.Enqueue(h, s.NewSpec("h"), false, {Token(1, 1)});
  EXPECT_EQ(s.RunUntilIdle(), 2u);
  EXPECT_EQ(s.log(), (Log{"l", "yield false", "yield true", "h"}));
}

TEST(Scheduler, EnablingAStreamFromInsideATaskDoesNotDeadlock) {
  Sched s;
  uint64_t a = s.Stream(kNormal);
  uint64_t b = s.Stream(kNormal);
  s.SetEnabled(b, false);
  s.Push(b, "b");
  Spec& sa = s.NewSpec("a");
  sa.enable = true;
  sa.enable_stream = b;
  s.Enqueue(a, sa);
  EXPECT_EQ(s.RunUntilIdle(), 2u);
  EXPECT_EQ(s.log(), (Log{"a", "b"}));
}

TEST(Scheduler, TimeSliceDowngradeAndReset) {
  Sched s{ManualClock{}};
  uint64_t a = s.Stream(kHigh);
  uint64_t other = s.Stream(kNormal);
  s.Push(other, "other");
  s.Advancing(a, "a1", 6);
  s.Advancing(a, "a2", 6);
  EXPECT_EQ(s.RunNext(), 1u) << "the slice ends the turn";
  EXPECT_EQ(s.Scheduled(a), kNormal);
  EXPECT_EQ(s.Base(a), kHigh);
  // Requeued at the back of Normal, behind the Normal stream that was already waiting.
  s.RunNext();
  EXPECT_EQ(s.log(), (Log{"a1", "other"}));
  s.RunNext();
  EXPECT_EQ(s.Scheduled(a), kLow);
  s.Advancing(a, "a3", 1);
  s.RunNext();
  EXPECT_EQ(s.Scheduled(a), kHigh) << "reset";
  EXPECT_EQ(s.log(), (Log{"a1", "other", "a2", "a3"}));
}

TEST(Scheduler, RealTimeIsNeverDowngraded) {
  Sched s{ManualClock{}};
  uint64_t a = s.Stream(kRealTime);
  for (const char* name : {"1", "2", "3"}) s.Advancing(a, name, 50);
  EXPECT_EQ(s.RunUntilIdle(), 3u);
  EXPECT_EQ(s.Scheduled(a), kRealTime);
}

TEST(Scheduler, TheSliceIsCutWhenHigherPriorityArrives) {
  Sched s{ManualClock{}};
  uint64_t low = s.Stream(kLow);
  uint64_t high = s.Stream(kHigh);
  // Control: 2 ms of a 5 ms slice leaves room for the next task in the same turn.
  s.Advancing(low, "c1", 2);
  s.Push(low, "c2");
  EXPECT_EQ(s.RunNext(), 2u);
  // Now the first task makes High work arrive, then runs 2 ms > the 1 ms granularity.
  Spec& t1 = s.NewSpec("t1");
  t1.spawn = &s.NewSpec("high");
  t1.spawn_stream = high;
  t1.log_yield = true;
  t1.advance_ns = 2 * kMs;
  s.Enqueue(low, t1);
  s.Push(low, "t2");
  EXPECT_EQ(s.RunNext(), 1u) << "cut after t1";
  EXPECT_EQ(s.RunUntilIdle(), 2u);
  EXPECT_EQ(s.log(), (Log{"c1", "c2", "t1", "yield true", "high", "t2"}));
}

TEST(Scheduler, DisabledStreamsNeverRun) {
  Sched s;
  uint64_t a = s.Stream(kHigh);
  uint64_t b = s.Stream(kLow);
  s.SetEnabled(a, false);
  s.Push(a, "a");
  s.Push(b, "b");
  EXPECT_EQ(s.RunUntilIdle(), 1u);
  EXPECT_EQ(s.log(), (Log{"b"}));
  EXPECT_EQ(s.Pending(a), 1u);
  s.SetEnabled(a, true);
  EXPECT_EQ(s.RunUntilIdle(), 1u);
  EXPECT_EQ(s.log(), (Log{"b", "a"}));
}

TEST(Scheduler, RemovingAStreamDropsItsTasksAndThePriorityItLent) {
  Sched s;
  uint64_t r = s.Stream(kLow);
  uint64_t w = s.Stream(kHigh);
  s.Client(r, 1);
  s.Push(r, "r");
  for (const char* name : {"w1", "w2", "w3"}) s.Enqueue(w, s.NewSpec(name), false, {Token(1, 1)});
  EXPECT_EQ(s.Scheduled(r), kHigh);
  EXPECT_EQ(s.Pending(w), 3u);
  gpusvc_scheduler_removed_stream removed = s.Remove(w);
  EXPECT_EQ(removed.dropped_tasks, 3u);
  EXPECT_TRUE(removed.lent);
  EXPECT_EQ(removed.lent_priority, kHigh);
  EXPECT_EQ(s.Scheduled(r), kLow) << "the loan ended";
  // A stream that lent nothing says so.
  uint64_t idle = s.Stream(kNormal);
  s.Push(idle, "never");
  removed = s.Remove(idle);
  EXPECT_EQ(removed.dropped_tasks, 1u);
  EXPECT_FALSE(removed.lent);
  EXPECT_EQ(s.RunUntilIdle(), 1u);
  EXPECT_EQ(s.log(), (Log{"r"}));
  EXPECT_EQ(gpusvc::RemoveSchedulerStream(s.get(), w), GPUSVC_SCHEDULER_UNKNOWN_STREAM);
}

TEST(Scheduler, MetricsPerPriorityAreReadableAndPushed) {
  std::vector<gpusvc_scheduler_task_sample> samples;
  std::atomic<uint64_t> clock{7 * kMs};
  Log log;
  std::vector<Spec> specs(10);
  gpusvc_scheduler_priority_metrics high{};
  high.struct_size = sizeof(high);
  gpusvc_scheduler_priority_metrics low{};
  low.struct_size = sizeof(low);
  size_t ran = 0;
  {
    gpusvc_scheduler_config config = gpusvc::SchedulerConfigDefaults();
    config.now_ns = ManualNow;
    config.clock_user_data = &clock;
    config.on_task = RecordSample;
    config.on_task_user_data = &samples;
    gpusvc::SchedulerPtr s;
    ASSERT_EQ(gpusvc::NewScheduler(config, &s), GPUSVC_OK);
    uint64_t a = 0;
    ASSERT_EQ(gpusvc::AddSchedulerStream(s.get(), kHigh, &a), GPUSVC_OK);
    for (size_t i = 0; i < specs.size(); ++i) {
      Spec& spec = specs[i];
      spec.log = &log;
      spec.name = std::to_string(i);
      spec.sched = s.get();
      spec.continues = i == 0 ? 1 : 0;
      spec.advance_ns = kMs;
      spec.clock = &clock;
      ASSERT_EQ(gpusvc::SchedulerEnqueue(s.get(), a, TaskOf(&spec)), GPUSVC_OK);
    }
    EXPECT_EQ(gpusvc::RunSchedulerUntilIdle(s.get(), &ran), GPUSVC_OK);
    EXPECT_EQ(gpusvc::SchedulerMetrics(s.get(), kHigh, &high), GPUSVC_OK);
    EXPECT_EQ(gpusvc::SchedulerMetrics(s.get(), kLow, &low), GPUSVC_OK);
  }
  EXPECT_EQ(ran, 11u) << "10 tasks, one of them continued once";
  EXPECT_EQ(high.tasks, 10u);
  EXPECT_EQ(high.continuations, 1u);
  EXPECT_EQ(high.sample_count, 10u);
  EXPECT_EQ(high.run_ns, 11 * kMs) << "every run advanced the clock 1 ms";
  EXPECT_GT(high.delay_p50_ns, 0u) << "tasks waited behind 1 ms runs";
  EXPECT_GE(high.delay_p99_ns, high.delay_p50_ns);
  EXPECT_EQ(low.tasks, 0u);
  EXPECT_EQ(low.sample_count, 0u);
  EXPECT_EQ(low.run_ns, 0u);
  ASSERT_EQ(samples.size(), 11u);
  EXPECT_EQ(std::count_if(samples.begin(), samples.end(),
                          [](const gpusvc_scheduler_task_sample& x) { return x.continuation; }),
            1);
  for (const auto& x : samples) {
    EXPECT_EQ(x.priority, kHigh);
    EXPECT_EQ(x.run_ns, kMs);
  }
}

TEST(Scheduler, BadInputIsACode) {
  Sched s;
  const gpusvc_scheduler* h = s.get();
  uint64_t a = s.Stream(kNormal);
  uint64_t n = 0;
  uint64_t out = 0;
  EXPECT_EQ(gpusvc_scheduler_new(nullptr, nullptr), GPUSVC_NULL_ARGUMENT);
  gpusvc_scheduler_task task{};
  task.struct_size = sizeof(task);
  EXPECT_EQ(gpusvc_scheduler_enqueue(h, a, nullptr, &n), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_scheduler_enqueue(h, a, &task, &n), GPUSVC_NULL_ARGUMENT);  // no run
  task.run = RunSpec;
  task.wait_count = 1;  // but no waits
  EXPECT_EQ(gpusvc_scheduler_enqueue(h, a, &task, &n), GPUSVC_NULL_ARGUMENT);
  task.wait_count = 0;
  EXPECT_EQ(gpusvc_scheduler_enqueue(h, a + 1000, &task, &n), GPUSVC_SCHEDULER_UNKNOWN_STREAM);
  EXPECT_EQ(gpusvc_scheduler_add_stream(h, 4, &out), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc_scheduler_set_base_priority(h, a, 7), GPUSVC_INVALID_ARGUMENT);

  gpusvc_scheduler_config config{};
  config.struct_size = sizeof(config);
  gpusvc_scheduler* made = nullptr;
  EXPECT_EQ(gpusvc_scheduler_new_with_config(nullptr, nullptr, &made), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_scheduler_new_with_config(nullptr, &config, nullptr), GPUSVC_NULL_ARGUMENT);
  config.time_slice_ns = kMs;  // shorter than a 2 ms granularity
  config.granularity_ns = 2 * kMs;
  EXPECT_EQ(gpusvc_scheduler_new_with_config(nullptr, &config, &made), GPUSVC_INVALID_ARGUMENT);
  config.time_slice_ns = kMs / 2;  // shorter than the default 1 ms granularity
  config.granularity_ns = 0;
  EXPECT_EQ(gpusvc_scheduler_new_with_config(nullptr, &config, &made), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(made, nullptr);

  gpusvc_scheduler_priority_metrics metrics{};
  metrics.struct_size = sizeof(metrics);
  metrics.tasks = 5;
  EXPECT_EQ(gpusvc_scheduler_metrics(h, 4, &metrics), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc_scheduler_metrics(h, kNormal, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(metrics.tasks, 5u);
  uint32_t p = 99;
  EXPECT_EQ(gpusvc_scheduler_base_priority(h, a + 1000, &p), GPUSVC_SCHEDULER_UNKNOWN_STREAM);
  EXPECT_EQ(gpusvc_scheduler_base_priority(h, a, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(p, 99u);
  size_t pending = 99;
  EXPECT_EQ(gpusvc_scheduler_pending_tasks(h, a + 1000, &pending),
            GPUSVC_SCHEDULER_UNKNOWN_STREAM);
  EXPECT_EQ(pending, 99u);
  EXPECT_EQ(gpusvc_scheduler_remove_stream(h, a, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(s.Pending(a), 0u) << "the stream is still there";

  gpusvc_scheduler* freed = nullptr;
  ASSERT_EQ(gpusvc_scheduler_new(nullptr, &freed), GPUSVC_OK);
  EXPECT_EQ(gpusvc_scheduler_free(freed), GPUSVC_OK);
  EXPECT_EQ(gpusvc_scheduler_add_stream(freed, kNormal, &out), GPUSVC_INVALID_HANDLE);
  EXPECT_EQ(gpusvc_scheduler_free(nullptr), GPUSVC_OK);
  EXPECT_EQ(out, 0u);
  EXPECT_EQ(n, 0u);
}

// The scheduler owns what a C++ callable captured: it is destroyed once the task completes, or
// unrun when the stream is removed or the scheduler freed (ASan's leak check sees the rest).
TEST(Scheduler, AnEnqueuedCallableIsDestroyedOnceWhenTheSchedulerIsDoneWithIt) {
  auto alive = std::make_shared<int>(0);
  std::vector<std::string> log;
  {
    Sched s;
    uint64_t a = s.Stream(kHigh);
    uint64_t b = s.Stream(kNormal);
    int continues = 2;
    ASSERT_EQ(gpusvc::SchedulerEnqueueCallable(s.get(), a,
                                               [alive, &log, &continues]() -> uint32_t {
                                                 log.push_back("run");
                                                 if (continues-- > 0) {
                                                   return GPUSVC_SCHEDULER_TASK_CONTINUE_LATER;
                                                 }
                                                 return GPUSVC_SCHEDULER_TASK_DONE;
                                               }),
              GPUSVC_OK);
    EXPECT_EQ(alive.use_count(), 2);
    EXPECT_EQ(gpusvc::SchedulerEnqueueCallable(s.get(), a + 1000,
                                               [alive]() -> uint32_t {
                                                 return GPUSVC_SCHEDULER_TASK_DONE;
                                               }),
              GPUSVC_SCHEDULER_UNKNOWN_STREAM);
    EXPECT_EQ(alive.use_count(), 2) << "a refused callable is destroyed by the wrapper";
    size_t ran = 0;
    ASSERT_EQ(gpusvc::RunSchedulerUntilIdle(s.get(), &ran), GPUSVC_OK);
    EXPECT_EQ(ran, 3u);
    EXPECT_EQ(log, (std::vector<std::string>{"run", "run", "run"}));
    EXPECT_EQ(alive.use_count(), 1) << "destroyed after the completing run";

    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(gpusvc::SchedulerEnqueueCallable(s.get(), b,
                                                 [alive, &log]() -> uint32_t {
                                                   log.push_back("never");
                                                   return GPUSVC_SCHEDULER_TASK_DONE;
                                                 }),
                GPUSVC_OK);
    }
    EXPECT_EQ(alive.use_count(), 3);
    gpusvc_scheduler_removed_stream removed{};
    removed.struct_size = sizeof(removed);
    ASSERT_EQ(gpusvc::RemoveSchedulerStream(s.get(), b, &removed), GPUSVC_OK);
    EXPECT_EQ(removed.dropped_tasks, 2u);
    EXPECT_EQ(alive.use_count(), 1) << "destroyed unrun by the removal";

    ASSERT_EQ(gpusvc::SchedulerEnqueueCallable(s.get(), a,
                                               [alive]() -> uint32_t {
                                                 return GPUSVC_SCHEDULER_TASK_DONE;
                                               }),
              GPUSVC_OK);
    EXPECT_EQ(alive.use_count(), 2);
  }
  EXPECT_EQ(alive.use_count(), 1) << "destroyed unrun by the scheduler's free";
  EXPECT_EQ(log.size(), 3u);
}

// A task may free its own scheduler (a host tearing down from inside a callback): the task
// finishes, nothing more runs — not the rest of the turn, not another stream, not a task that
// keeps continuing — the run call returns, and every pending callable is destroyed once.
TEST(Scheduler, FreeingTheSchedulerFromInsideATaskRunsNothingMore) {
  auto alive = std::make_shared<int>(0);
  std::vector<std::string> log;
  gpusvc::SchedulerPtr owner;
  ASSERT_EQ(gpusvc::NewScheduler(&owner), GPUSVC_OK);
  uint64_t a = 0;
  uint64_t b = 0;
  ASSERT_EQ(gpusvc::AddSchedulerStream(owner.get(), kHigh, &a), GPUSVC_OK);
  ASSERT_EQ(gpusvc::AddSchedulerStream(owner.get(), kNormal, &b), GPUSVC_OK);
  int runs = 0;
  ASSERT_EQ(gpusvc::SchedulerEnqueueCallable(owner.get(), a,
                                             [alive, &log, &runs, &owner]() -> uint32_t {
                                               log.push_back("looping");
                                               if (++runs == 3) owner.reset();  // frees it
                                               return GPUSVC_SCHEDULER_TASK_CONTINUE_LATER;
                                             }),
            GPUSVC_OK);
  for (uint64_t stream : {a, b}) {
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(gpusvc::SchedulerEnqueueCallable(owner.get(), stream,
                                                 [alive, &log]() -> uint32_t {
                                                   log.push_back("never");
                                                   return GPUSVC_SCHEDULER_TASK_DONE;
                                                 }),
                GPUSVC_OK);
    }
  }
  EXPECT_EQ(alive.use_count(), 8);
  const gpusvc_scheduler* raw = owner.get();
  size_t ran = 0;
  ASSERT_EQ(gpusvc_scheduler_run_until_idle(raw, &ran), GPUSVC_OK);
  EXPECT_EQ(ran, 3u);
  EXPECT_EQ(log, (std::vector<std::string>{"looping", "looping", "looping"}));
  EXPECT_EQ(alive.use_count(), 1) << "every callable destroyed exactly once";
  EXPECT_EQ(owner.get(), nullptr);
  EXPECT_EQ(gpusvc_scheduler_run_next(raw, &ran), GPUSVC_INVALID_HANDLE);
}
