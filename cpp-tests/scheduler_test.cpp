// The scheduler C ABI from C++: one test per scheduler behaviour (the setups of
// gpu-scheduler/tests/behaviours.rs) and the bad inputs the ABI turns into codes.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpusvc.hpp"

namespace {

struct Spec {
  std::vector<std::string>* log = nullptr;
  std::string name;
  gpusvc_scheduler* sched = nullptr;
  uint64_t release_client = 0;  // 0: no release
  uint64_t release_count = 0;
  bool enable = false;
  uint64_t enable_stream = 0;
  int continues = 0;
};

uint32_t RunSpec(void* ud) {
  auto* s = static_cast<Spec*>(ud);
  s->log->push_back(s->name);
  if (s->release_client != 0) {
    EXPECT_EQ(gpusvc_scheduler_release(s->sched, 0, s->release_client, s->release_count),
              GPUSVC_OK);
  }
  if (s->enable) {
    EXPECT_EQ(gpusvc_scheduler_set_enabled(s->sched, s->enable_stream, true), GPUSVC_OK);
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

gpusvc_sync_token Token(uint64_t client, uint64_t count) {
  gpusvc_sync_token t{};
  t.namespace_id = 0;
  t.command_buffer_id = client;
  t.release_count = count;
  t.verified = true;
  return t;
}

class Sched {
 public:
  Sched() { EXPECT_EQ(gpusvc_scheduler_new(nullptr, &h_), GPUSVC_OK); }
  ~Sched() { EXPECT_EQ(gpusvc_scheduler_free(h_), GPUSVC_OK); }
  Sched(const Sched&) = delete;
  Sched& operator=(const Sched&) = delete;

  gpusvc_scheduler* h() const { return h_; }

  uint64_t Stream(uint32_t p) {
    uint64_t s = 0;
    EXPECT_EQ(gpusvc_scheduler_add_stream(h_, p, &s), GPUSVC_OK);
    return s;
  }

  void Client(uint64_t stream, uint64_t client) {
    EXPECT_EQ(gpusvc_scheduler_create_client(h_, stream, 0, client), GPUSVC_OK);
  }

  Spec& NewSpec(const std::string& name) {
    specs_.push_back(std::make_unique<Spec>());
    Spec& s = *specs_.back();
    s.log = &log_;
    s.name = name;
    s.sched = h_;
    return s;
  }

  uint64_t Enqueue(uint64_t stream, Spec& spec, bool with_start = false,
                   const std::vector<gpusvc_sync_token>& tokens = {}) {
    uint64_t n = 0;
    EXPECT_EQ(gpusvc_scheduler_enqueue(h_, stream, RunSpec, &spec,
                                       with_start ? StartSpec : nullptr, &spec,
                                       tokens.empty() ? nullptr : tokens.data(), tokens.size(), &n),
              GPUSVC_OK);
    return n;
  }

  uint64_t Push(uint64_t stream, const std::string& name) { return Enqueue(stream, NewSpec(name)); }

  size_t RunUntilIdle() {
    size_t n = 0;
    EXPECT_EQ(gpusvc_scheduler_run_until_idle(h_, &n), GPUSVC_OK);
    return n;
  }

  uint32_t Scheduled(uint64_t stream) {
    uint32_t p = 99;
    EXPECT_EQ(gpusvc_scheduler_scheduled_priority(h_, stream, &p), GPUSVC_OK);
    return p;
  }

  const std::vector<std::string>& log() const { return log_; }

 private:
  std::vector<std::string> log_;
  std::vector<std::unique_ptr<Spec>> specs_;
  gpusvc_scheduler* h_ = nullptr;
};

using Log = std::vector<std::string>;

}  // namespace

TEST(Scheduler, FifoWithinAStream) {
  Sched s;
  uint64_t a = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
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
  uint64_t a = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
  s.Enqueue(a, s.NewSpec("t"), true);
  EXPECT_EQ(s.RunUntilIdle(), 1u);
  EXPECT_EQ(s.log(), (Log{"start t", "t"}));
}

TEST(Scheduler, AContinuedTaskRunsFirst) {
  Sched s;
  uint64_t a = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
  Spec& c = s.NewSpec("c");
  c.continues = 1;
  s.Enqueue(a, c, true);
  s.Push(a, "next");
  EXPECT_EQ(s.RunUntilIdle(), 3u);
  EXPECT_EQ(s.log(), (Log{"start c", "c", "c", "next"}));
}

TEST(Scheduler, StreamsRunInPriorityOrder) {
  Sched s;
  uint64_t low = s.Stream(GPUSVC_SCHEDULER_PRIORITY_LOW);
  uint64_t normal = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
  uint64_t high = s.Stream(GPUSVC_SCHEDULER_PRIORITY_HIGH);
  uint64_t rt = s.Stream(GPUSVC_SCHEDULER_PRIORITY_REAL_TIME);
  s.Push(low, "low");
  s.Push(normal, "normal");
  s.Push(high, "high");
  s.Push(rt, "rt");
  EXPECT_EQ(s.RunUntilIdle(), 4u);
  EXPECT_EQ(s.log(), (Log{"rt", "high", "normal", "low"}));
}

TEST(Scheduler, EqualPrioritiesRunInRoundRobinOrder) {
  Sched s;
  uint64_t a = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
  uint64_t b = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
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
  uint64_t r = s.Stream(GPUSVC_SCHEDULER_PRIORITY_LOW);
  uint64_t w = s.Stream(GPUSVC_SCHEDULER_PRIORITY_HIGH);
  s.Client(r, 1);
  Spec& rel = s.NewSpec("release");
  rel.release_client = 1;
  rel.release_count = 1;
  s.Enqueue(r, rel);
  s.Enqueue(w, s.NewSpec("wait"), false, {Token(1, 1)});
  s.Push(w, "behind");
  EXPECT_EQ(s.RunUntilIdle(), 3u);
  EXPECT_EQ(s.log(), (Log{"release", "wait", "behind"}));
}

TEST(Scheduler, AWaitThatCanNeverBeReleasedDoesNotBlock) {
  Sched s;
  uint64_t r = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
  uint64_t w = s.Stream(GPUSVC_SCHEDULER_PRIORITY_HIGH);
  s.Client(r, 1);
  s.Push(r, "r");
  s.Enqueue(w, s.NewSpec("w1"), false, {Token(1, 5)});
  s.Enqueue(w, s.NewSpec("w2"), false, {Token(77, 1), Token(1, 9)});
  EXPECT_EQ(s.RunUntilIdle(), 3u);
  EXPECT_EQ(s.log(), (Log{"r", "w1", "w2"}));
}

TEST(Scheduler, DisabledStreamsNeverRun) {
  Sched s;
  uint64_t a = s.Stream(GPUSVC_SCHEDULER_PRIORITY_HIGH);
  uint64_t b = s.Stream(GPUSVC_SCHEDULER_PRIORITY_LOW);
  EXPECT_EQ(gpusvc_scheduler_set_enabled(s.h(), a, false), GPUSVC_OK);
  s.Push(a, "a");
  s.Push(b, "b");
  EXPECT_EQ(s.RunUntilIdle(), 1u);
  EXPECT_EQ(s.log(), (Log{"b"}));
  EXPECT_EQ(gpusvc_scheduler_set_enabled(s.h(), a, true), GPUSVC_OK);
  EXPECT_EQ(s.RunUntilIdle(), 1u);
  EXPECT_EQ(s.log(), (Log{"b", "a"}));
}

TEST(Scheduler, RemovingAStreamDropsItsTasks) {
  Sched s;
  uint64_t a = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
  s.Push(a, "1");
  s.Push(a, "2");
  size_t dropped = 0;
  EXPECT_EQ(gpusvc_scheduler_remove_stream(s.h(), a, &dropped), GPUSVC_OK);
  EXPECT_EQ(dropped, 2u);
  EXPECT_EQ(s.RunUntilIdle(), 0u);
  EXPECT_TRUE(s.log().empty());
  EXPECT_EQ(gpusvc_scheduler_remove_stream(s.h(), a, &dropped), GPUSVC_SCHEDULER_UNKNOWN_STREAM);
}

TEST(Scheduler, EnablingAStreamFromInsideATaskDoesNotDeadlock) {
  Sched s;
  uint64_t a = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
  uint64_t b = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
  EXPECT_EQ(gpusvc_scheduler_set_enabled(s.h(), b, false), GPUSVC_OK);
  s.Push(b, "b");
  Spec& sa = s.NewSpec("a");
  sa.enable = true;
  sa.enable_stream = b;
  s.Enqueue(a, sa);
  EXPECT_EQ(s.RunUntilIdle(), 2u);
  EXPECT_EQ(s.log(), (Log{"a", "b"}));
}

TEST(Scheduler, WaitingOnOneselfDoesNotBlock) {
  Sched s;
  uint64_t a = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
  s.Client(a, 1);
  s.Enqueue(a, s.NewSpec("self"), false, {Token(1, 1)});
  EXPECT_EQ(s.RunUntilIdle(), 1u);
  EXPECT_EQ(s.log(), (Log{"self"}));
  EXPECT_EQ(s.Scheduled(a), static_cast<uint32_t>(GPUSVC_SCHEDULER_PRIORITY_NORMAL));
}

TEST(Scheduler, TheReleaserIsRaisedToItsWaitersPriorityAndNoHigher) {
  Sched s;
  s.Stream(GPUSVC_SCHEDULER_PRIORITY_REAL_TIME);
  uint64_t r = s.Stream(GPUSVC_SCHEDULER_PRIORITY_LOW);
  uint64_t n = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
  uint64_t w = s.Stream(GPUSVC_SCHEDULER_PRIORITY_HIGH);
  s.Client(r, 1);
  Spec& rel = s.NewSpec("r");
  rel.release_client = 1;
  rel.release_count = 1;
  s.Enqueue(r, rel);
  s.Push(n, "n");
  EXPECT_EQ(s.Scheduled(r), static_cast<uint32_t>(GPUSVC_SCHEDULER_PRIORITY_LOW));
  s.Enqueue(w, s.NewSpec("w"), false, {Token(1, 1)});
  EXPECT_EQ(s.Scheduled(r), static_cast<uint32_t>(GPUSVC_SCHEDULER_PRIORITY_HIGH));
  s.RunUntilIdle();
  EXPECT_EQ(s.log(), (Log{"r", "w", "n"}));
  EXPECT_EQ(s.Scheduled(r), static_cast<uint32_t>(GPUSVC_SCHEDULER_PRIORITY_LOW));
}

TEST(Scheduler, BadInputIsACode) {
  Sched s;
  uint64_t a = s.Stream(GPUSVC_SCHEDULER_PRIORITY_NORMAL);
  uint64_t n = 0;
  uint64_t out = 0;
  EXPECT_EQ(gpusvc_scheduler_new(nullptr, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_scheduler_enqueue(s.h(), a, nullptr, nullptr, nullptr, nullptr, nullptr, 0, &n),
            GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(
      gpusvc_scheduler_enqueue(s.h(), a + 1000, RunSpec, nullptr, nullptr, nullptr, nullptr, 0, &n),
      GPUSVC_SCHEDULER_UNKNOWN_STREAM);
  EXPECT_EQ(gpusvc_scheduler_add_stream(s.h(), 4, &out), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc_scheduler_set_base_priority(s.h(), a, 7), GPUSVC_INVALID_ARGUMENT);
  gpusvc_scheduler* freed = nullptr;
  ASSERT_EQ(gpusvc_scheduler_new(nullptr, &freed), GPUSVC_OK);
  EXPECT_EQ(gpusvc_scheduler_free(freed), GPUSVC_OK);
  EXPECT_EQ(gpusvc_scheduler_add_stream(freed, GPUSVC_SCHEDULER_PRIORITY_NORMAL, &out),
            GPUSVC_INVALID_HANDLE);
  EXPECT_EQ(gpusvc_scheduler_free(nullptr), GPUSVC_OK);
  EXPECT_EQ(out, 0u);
  EXPECT_EQ(n, 0u);
}
