// The log hook from C++ through gpusvc::LogCallback: events of the scheduler, the sync points
// and the program cache's disk store reach the function, the level filters them, destruction
// stops the calls (also with a call in flight on another thread), a bad level is refused, and
// a callback may call gpusvc, raising events that are dropped and counted.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpusvc.hpp"

namespace {

namespace fs = std::filesystem;

struct Line {
  uint32_t level;
  std::string target;
  std::string message;
};

// Lines collected by a LogCallback.
class Lines {
 public:
  gpusvc::LogCallback::Fn Collect() {
    return [this](uint32_t level, const char* target, const char* message) {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.push_back(Line{level, target, message});
    };
  }
  // The first line from `target` containing `text`, or null.
  bool Has(const std::string& target, const std::string& text, Line* out = nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Line& l : lines_) {
      if (l.target == target && l.message.find(text) != std::string::npos) {
        if (out != nullptr) *out = l;
        return true;
      }
    }
    return false;
  }
  size_t Count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_.size();
  }

 private:
  std::mutex mutex_;
  std::vector<Line> lines_;
};

uint32_t Done() { return GPUSVC_SCHEDULER_TASK_DONE; }

// Removes a stream with `tasks` pending: "gpusvc::scheduler" at INFO.
void RemoveAStreamWithTasks(size_t tasks) {
  gpusvc::SchedulerPtr s;
  ASSERT_EQ(gpusvc::NewScheduler(&s), GPUSVC_OK);
  uint64_t stream = 0;
  ASSERT_EQ(gpusvc::AddSchedulerStream(s.get(), GPUSVC_SCHEDULER_PRIORITY_NORMAL, &stream),
            GPUSVC_OK);
  for (size_t i = 0; i < tasks; ++i) {
    ASSERT_EQ(gpusvc::SchedulerEnqueueCallable(s.get(), stream, &Done), GPUSVC_OK);
  }
  gpusvc_scheduler_removed_stream removed{};
  ASSERT_EQ(gpusvc::RemoveSchedulerStream(s.get(), stream, &removed), GPUSVC_OK);
  ASSERT_EQ(removed.dropped_tasks, tasks);
}

void WaitEnded(void*) {}

// A wait whose releaser is destroyed before releasing: "gpusvc::sync" at DEBUG.
void RetireAWait() {
  gpusvc::SyncManagerPtr m;
  ASSERT_EQ(gpusvc::NewSyncManager(&m), GPUSVC_OK);
  uint64_t releaser = 0, waiter = 0, order = 0, unused = 0;
  ASSERT_EQ(gpusvc::SyncSequenceCreate(m.get(), &releaser), GPUSVC_OK);
  ASSERT_EQ(gpusvc::SyncSequenceCreate(m.get(), &waiter), GPUSVC_OK);
  ASSERT_EQ(gpusvc::SyncClientCreate(m.get(), 0, 9, releaser), GPUSVC_OK);
  ASSERT_EQ(gpusvc::SyncSequenceGenerate(m.get(), releaser, &unused), GPUSVC_OK);
  ASSERT_EQ(gpusvc::SyncSequenceGenerate(m.get(), waiter, &order), GPUSVC_OK);
  const gpusvc_sync_token token = gpusvc::SyncToken(0, 9, 1);
  bool registered = false;
  ASSERT_EQ(gpusvc_sync_token_wait(m.get(), &token, waiter, order, &WaitEnded, nullptr,
                                   &registered),
            GPUSVC_OK);
  ASSERT_TRUE(registered);
  ASSERT_EQ(gpusvc_sync_sequence_destroy(m.get(), releaser), GPUSVC_OK);
}

// A disk cache on a path that is a file: "program_cache::disk::condition" at WARN.
void OpenAnUnusableFolder(const std::string& name) {
  const fs::path file = fs::temp_directory_path() / name;
  { std::ofstream(file) << "x"; }
  gpusvc_program_cache_config config{};
  ASSERT_EQ(gpusvc::ProgramCacheDefaults(GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP, &config),
            GPUSVC_OK);
  gpusvc::DiskOptions disk = gpusvc::DiskOptions::Defaults();
  disk.dir = file.string();
  disk.host_product = "log test";
  disk.host_version = "1";
  gpusvc::DriverStrings driver;
  driver.vendor = "Test vendor";
  driver.renderer = "test renderer";
  driver.version = "1.0";
  gpusvc::ProgramCachePtr cache;
  ASSERT_EQ(gpusvc::NewProgramCacheWithDisk(config, disk, driver, &cache), GPUSVC_OK);
  gpusvc_program_cache_disk_load_report report{};
  report.struct_size = sizeof(report);
  ASSERT_EQ(gpusvc::WaitUntilLoaded(cache.get(), 10000, &report), GPUSVC_OK);
  cache.reset();
  fs::remove(file);
}

TEST(LogTest, EventsOfSeveralServicesReachTheCallback) {
  Lines lines;
  {
    gpusvc::LogCallback log(GPUSVC_LOG_LEVEL_TRACE, lines.Collect());
    ASSERT_EQ(log.result(), GPUSVC_OK);
    RemoveAStreamWithTasks(3);
    RetireAWait();
    OpenAnUnusableFolder("gpusvc-log-test-not-a-folder");
  }
  Line l;
  ASSERT_TRUE(lines.Has("gpusvc::scheduler", "stream removed with pending tasks", &l));
  EXPECT_EQ(l.level, static_cast<uint32_t>(GPUSVC_LOG_LEVEL_INFO));
  EXPECT_NE(l.message.find("dropped_tasks=3"), std::string::npos) << l.message;
  ASSERT_TRUE(lines.Has("gpusvc::sync", "waits retired without their release", &l));
  EXPECT_EQ(l.level, static_cast<uint32_t>(GPUSVC_LOG_LEVEL_DEBUG));
  ASSERT_TRUE(lines.Has("program_cache::disk::condition", "gpusvc-log-test-not-a-folder", &l));
  EXPECT_EQ(l.level, static_cast<uint32_t>(GPUSVC_LOG_LEVEL_WARN));
  EXPECT_NE(l.message.find("memory only"), std::string::npos) << l.message;
}

TEST(LogTest, TheLevelFiltersAndDestructionStopsTheCalls) {
  Lines lines;
  {
    gpusvc::LogCallback log(GPUSVC_LOG_LEVEL_WARN, lines.Collect());
    ASSERT_EQ(log.result(), GPUSVC_OK);
    RemoveAStreamWithTasks(1);
    RetireAWait();
    EXPECT_EQ(lines.Count(), 0u);
    OpenAnUnusableFolder("gpusvc-log-test-warn");
    EXPECT_TRUE(lines.Has("program_cache::disk::condition", "gpusvc-log-test-warn"));
  }
  const size_t seen = lines.Count();
  RemoveAStreamWithTasks(1);
  OpenAnUnusableFolder("gpusvc-log-test-after");
  EXPECT_EQ(lines.Count(), seen);
}

TEST(LogTest, ABadLevelIsRefused) {
  Lines lines;
  for (uint32_t bad : {0u, 6u, 0xFFFFFFFFu}) {
    gpusvc::LogCallback log(bad, lines.Collect());
    EXPECT_EQ(log.result(), GPUSVC_INVALID_ARGUMENT) << bad;
  }
  RemoveAStreamWithTasks(1);
  EXPECT_EQ(lines.Count(), 0u);
}

TEST(LogTest, NoCallStartsAfterTheDestructorReturns) {
  std::atomic<int> started{0};
  std::atomic<int> inside{0};
  std::atomic<bool> stop{false};
  auto log = std::make_unique<gpusvc::LogCallback>(
      GPUSVC_LOG_LEVEL_INFO, [&](uint32_t, const char*, const char*) {
        started.fetch_add(1);
        inside.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        inside.fetch_sub(1);
      });
  ASSERT_EQ(log->result(), GPUSVC_OK);
  std::thread emitter([&] {
    while (!stop.load()) RemoveAStreamWithTasks(1);
  });
  while (inside.load() == 0) std::this_thread::yield();
  log.reset();
  EXPECT_EQ(inside.load(), 0) << "the destructor returned during a call";
  const int after = started.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop.store(true);
  emitter.join();
  EXPECT_EQ(started.load(), after);
}

TEST(LogTest, ACallbackMayCallGpusvc) {
  const uint64_t dropped = gpusvc::LogCallback::DroppedEvents();
  std::atomic<int> calls{0};
  {
    gpusvc::LogCallback log(GPUSVC_LOG_LEVEL_INFO, [&](uint32_t, const char*, const char* m) {
      if (std::string(m).find("dropped_tasks=2") == std::string::npos) return;
      calls.fetch_add(1);
      RemoveAStreamWithTasks(1);  // raises an event on this thread: dropped
      EXPECT_FALSE(gpusvc::Version().empty());
    });
    ASSERT_EQ(log.result(), GPUSVC_OK);
    RemoveAStreamWithTasks(2);
  }
  EXPECT_EQ(calls.load(), 1);
  EXPECT_GT(gpusvc::LogCallback::DroppedEvents(), dropped);
}

}  // namespace
