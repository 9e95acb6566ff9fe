// Per-stream scheduler metrics from C++ (gpusvc::SchedulerStreamMetrics): exact waits and run
// times on a manual host clock, a raised stream's task counted under the priority it ran at,
// and a removed stream answering GPUSVC_SCHEDULER_UNKNOWN_STREAM with nothing written.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>

#include "gpusvc.hpp"

namespace {

constexpr uint64_t kMs = 1000000;

uint64_t ManualNow(void* clock) { return static_cast<std::atomic<uint64_t>*>(clock)->load(); }

TEST(SchedulerStreamMetrics, WaitsAndRunTimesAreExactOnAManualClock) {
  std::atomic<uint64_t> clock{1000 * kMs};
  gpusvc_scheduler_config config = gpusvc::SchedulerConfigDefaults();
  config.now_ns = &ManualNow;
  config.clock_user_data = &clock;
  gpusvc::SchedulerPtr s;
  ASSERT_EQ(gpusvc::NewScheduler(config, &s), GPUSVC_OK);
  uint64_t a = 0, b = 0;
  ASSERT_EQ(gpusvc::AddSchedulerStream(s.get(), GPUSVC_SCHEDULER_PRIORITY_NORMAL, &a), GPUSVC_OK);
  ASSERT_EQ(gpusvc::AddSchedulerStream(s.get(), GPUSVC_SCHEDULER_PRIORITY_HIGH, &b), GPUSVC_OK);
  auto two_ms = [&clock] {
    clock += 2 * kMs;
    return GPUSVC_SCHEDULER_TASK_DONE;
  };
  for (int i = 0; i < 3; ++i) ASSERT_EQ(gpusvc::SchedulerEnqueueCallable(s.get(), a, two_ms), GPUSVC_OK);
  ASSERT_EQ(gpusvc::SchedulerEnqueueCallable(s.get(), b, two_ms), GPUSVC_OK);
  clock += 10 * kMs;
  size_t ran = 0;
  ASSERT_EQ(gpusvc::RunSchedulerUntilIdle(s.get(), &ran), GPUSVC_OK);
  ASSERT_EQ(ran, 4u);

  gpusvc_scheduler_stream_metrics_snapshot m{};
  ASSERT_EQ(gpusvc::SchedulerStreamMetrics(s.get(), a, &m), GPUSVC_OK);
  EXPECT_EQ(m.struct_size, sizeof m);
  EXPECT_EQ(m.tasks, 3u);
  EXPECT_EQ(m.run_ns, 6 * kMs);
  EXPECT_EQ(m.wait_ns, (12 + 14 + 16) * kMs);  // b (High) ran first
  EXPECT_EQ(m.max_wait_ns, 16 * kMs);
  EXPECT_EQ(m.tasks_at[GPUSVC_SCHEDULER_PRIORITY_NORMAL], 3u);
  EXPECT_EQ(m.run_ns_at[GPUSVC_SCHEDULER_PRIORITY_NORMAL], 6 * kMs);
  ASSERT_EQ(gpusvc::SchedulerStreamMetrics(s.get(), b, &m), GPUSVC_OK);
  EXPECT_EQ(m.tasks, 1u);
  EXPECT_EQ(m.wait_ns, 10 * kMs);
  EXPECT_EQ(m.tasks_at[GPUSVC_SCHEDULER_PRIORITY_HIGH], 1u);

  // Removed: its metrics went with it; nothing is written.
  ASSERT_EQ(gpusvc::RemoveSchedulerStream(s.get(), a), GPUSVC_OK);
  gpusvc_scheduler_stream_metrics_snapshot untouched{};
  untouched.tasks = 77;
  EXPECT_EQ(gpusvc::SchedulerStreamMetrics(s.get(), a, &untouched), GPUSVC_SCHEDULER_UNKNOWN_STREAM);
  EXPECT_EQ(untouched.tasks, 77u);
}

TEST(SchedulerStreamMetrics, ARaisedStreamCountsUnderThePriorityItRanAt) {
  gpusvc::SchedulerPtr s;
  ASSERT_EQ(gpusvc::NewScheduler(&s), GPUSVC_OK);
  uint64_t releaser = 0, waiter = 0;
  ASSERT_EQ(gpusvc::AddSchedulerStream(s.get(), GPUSVC_SCHEDULER_PRIORITY_LOW, &releaser), GPUSVC_OK);
  ASSERT_EQ(gpusvc::AddSchedulerStream(s.get(), GPUSVC_SCHEDULER_PRIORITY_HIGH, &waiter), GPUSVC_OK);
  ASSERT_EQ(gpusvc::CreateSchedulerClient(s.get(), releaser, 0, 5), GPUSVC_OK);
  const gpusvc_scheduler* raw = s.get();
  ASSERT_EQ(gpusvc::SchedulerEnqueueCallable(s.get(), releaser,
                                             [raw] {
                                               EXPECT_EQ(gpusvc::SchedulerRelease(raw, 0, 5, 1), GPUSVC_OK);
                                               return GPUSVC_SCHEDULER_TASK_DONE;
                                             }),
            GPUSVC_OK);
  ASSERT_EQ(gpusvc::SchedulerEnqueueCallable(
                s.get(), waiter, [] { return GPUSVC_SCHEDULER_TASK_DONE; }, {gpusvc::SyncToken(0, 5, 1)}),
            GPUSVC_OK);
  ASSERT_EQ(gpusvc::RunSchedulerUntilIdle(s.get()), GPUSVC_OK);
  ASSERT_EQ(gpusvc::SchedulerEnqueueCallable(s.get(), releaser, [] { return GPUSVC_SCHEDULER_TASK_DONE; }),
            GPUSVC_OK);
  ASSERT_EQ(gpusvc::RunSchedulerUntilIdle(s.get()), GPUSVC_OK);

  gpusvc_scheduler_stream_metrics_snapshot m{};
  ASSERT_EQ(gpusvc::SchedulerStreamMetrics(s.get(), releaser, &m), GPUSVC_OK);
  EXPECT_EQ(m.tasks, 2u);
  EXPECT_EQ(m.tasks_at[GPUSVC_SCHEDULER_PRIORITY_HIGH], 1u) << "raised to its waiter's priority";
  EXPECT_EQ(m.tasks_at[GPUSVC_SCHEDULER_PRIORITY_LOW], 1u);
}

}  // namespace
