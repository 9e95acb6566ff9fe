// The program cache's disk store through the C ABI, from the host's side: a folder round trip,
// a stamp change, clear, statistics, the startup load and its report, hot programs, an unusable
// folder, the kill switch, the stamp from a live context with a real binary, and bad inputs.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "gl_support.h"
#include "temp_dir.h"
#include "gpusvc.hpp"

namespace {

namespace fs = std::filesystem;

constexpr uint32_t kWaitMs = 10000;

gpusvc_program_cache_config Config(size_t budget) {
  gpusvc_program_cache_config config{};
  config.struct_size = sizeof(config);
  EXPECT_EQ(gpusvc::ProgramCacheDefaults(GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP, &config), GPUSVC_OK);
  config.budget_bytes = budget;
  return config;
}

gpusvc::DiskOptions Disk(const fs::path& dir) {
  gpusvc::DiskOptions disk = gpusvc::DiskOptions::Defaults();
  disk.dir = dir.string();
  disk.host_product = "cpp disk tests";
  disk.host_version = "1";
  return disk;
}

gpusvc::DriverStrings Driver(const std::string& version) {
  return gpusvc::DriverStrings{"Test vendor", "test renderer", version, "OpenGL core profile"};
}

gpusvc::ProgramCachePtr Open(const gpusvc::DiskOptions& disk, const gpusvc::DriverStrings& driver,
                             size_t budget = 1 << 20) {
  gpusvc::ProgramCachePtr cache;
  EXPECT_EQ(gpusvc::NewProgramCacheWithDisk(Config(budget), disk, driver, &cache), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  return cache;
}

gpusvc_program_cache_disk_load_report Wait(const gpusvc::ProgramCachePtr& cache) {
  gpusvc_program_cache_disk_load_report report{};
  report.struct_size = sizeof(report);
  EXPECT_EQ(gpusvc::WaitUntilLoaded(cache.get(), kWaitMs, &report), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  return report;
}

gpusvc_program_cache_disk_stats_snapshot DiskStats(const gpusvc::ProgramCachePtr& cache) {
  gpusvc_program_cache_disk_stats_snapshot stats{};
  stats.struct_size = sizeof(stats);
  EXPECT_EQ(gpusvc_program_cache_disk_stats(cache.get(), &stats), GPUSVC_OK);
  return stats;
}

gpusvc_program_cache_stats_snapshot Stats(const gpusvc::ProgramCachePtr& cache) {
  gpusvc_program_cache_stats_snapshot stats{};
  stats.struct_size = sizeof(stats);
  EXPECT_EQ(gpusvc_program_cache_stats(cache.get(), &stats), GPUSVC_OK);
  return stats;
}

void Flush(const gpusvc::ProgramCachePtr& cache) {
  EXPECT_EQ(gpusvc_program_cache_flush_disk(cache.get()), GPUSVC_OK);
}

gpusvc_program_cache_sha1 KeyOf(uint8_t n) {
  gpusvc_program_cache_sha1 k{};
  for (auto& b : k.bytes) b = n;
  return k;
}

std::vector<uint8_t> BinaryOf(uint8_t n) {
  std::vector<uint8_t> bytes(300);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * n);
  return bytes;
}

void Save(const gpusvc::ProgramCachePtr& cache, uint8_t n) {
  gpusvc::CachedProgram p;
  p.vertex_shader = KeyOf(n);
  p.fragment_shader = KeyOf(static_cast<uint8_t>(n + 50));
  p.binary_format = 0xB1;
  p.binary = BinaryOf(n);
  EXPECT_EQ(gpusvc::SaveProgram(cache.get(), KeyOf(n), p), GPUSVC_OK) << gpusvc::LastErrorDetail();
}

// The binary of cached program n, empty when the cache does not have it (a peek: no counters).
std::vector<uint8_t> CachedBinary(const gpusvc::ProgramCachePtr& cache, uint8_t n) {
  gpusvc::CachedProgramPtr p;
  if (gpusvc::PeekProgram(cache.get(), KeyOf(n), &p) != GPUSVC_OK) return {};
  gpusvc::CachedProgram c;
  EXPECT_EQ(gpusvc::ReadCachedProgram(p.get(), &c), GPUSVC_OK);
  return c.binary;
}

// The stamp folders under root (those with a STAMP file).
std::vector<fs::path> Stores(const fs::path& root) {
  std::vector<fs::path> stores;
  for (const auto& e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "STAMP")) stores.push_back(e.path());
  return stores;
}

size_t EntryFiles(const fs::path& root) {
  size_t n = 0;
  for (const fs::path& store : Stores(root)) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(store / "entries", ec); !ec && it != fs::end(it); ++it)
      ++n;
  }
  return n;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// What the disk log callback received (it may run on the cache's threads).
struct LogSink {
  std::atomic<int> calls{0};
  std::mutex mutex;
  std::vector<std::string> lines;
};

void LogLine(const char* message, void* user_data) {
  auto* sink = static_cast<LogSink*>(user_data);
  std::lock_guard<std::mutex> lock(sink->mutex);
  sink->lines.emplace_back(message);
  sink->calls.fetch_add(1);
}

}  // namespace

TEST(DiskCache, ANewCacheOnTheSameFolderLoadsWhatTheFirstSaved) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  {
    gpusvc::ProgramCachePtr a = Open(Disk(dir.path()), Driver("1.0"));
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(Wait(a).loaded, 0u);
    for (uint8_t n = 1; n <= 3; ++n) Save(a, n);
    Flush(a);
    EXPECT_EQ(DiskStats(a).writes, 3u);
    EXPECT_EQ(EntryFiles(dir.path()), 3u);
  }
  gpusvc::ProgramCachePtr b = Open(Disk(dir.path()), Driver("1.0"));
  ASSERT_NE(b, nullptr);
  const gpusvc_program_cache_disk_load_report report = Wait(b);
  EXPECT_EQ(report.loaded, 3u);
  EXPECT_EQ(report.rejected, 0u);
  EXPECT_EQ(report.skipped, 0u);
  EXPECT_EQ(Stats(b).entries, 3u);
  for (uint8_t n = 1; n <= 3; ++n) EXPECT_EQ(CachedBinary(b, n), BinaryOf(n)) << int(n);
}

TEST(DiskCache, AStampChangeWipesTheOldStore) {
  TempDir dir;
  {
    gpusvc::ProgramCachePtr a = Open(Disk(dir.path()), Driver("1.0"));
    Wait(a);
    Save(a, 1);
    Flush(a);
  }
  ASSERT_EQ(Stores(dir.path()).size(), 1u);
  gpusvc::ProgramCachePtr b = Open(Disk(dir.path()), Driver("2.0 (driver update)"));
  EXPECT_EQ(Wait(b).loaded, 0u);
  Flush(b);  // the writer collects stale stores before its first job
  EXPECT_EQ(Stats(b).entries, 0u);
  EXPECT_TRUE(CachedBinary(b, 1).empty());
  const std::vector<fs::path> stores = Stores(dir.path());
  ASSERT_EQ(stores.size(), 1u) << "the old stamp's store is gone";
  EXPECT_NE(ReadFile(stores[0] / "STAMP").find("2.0 (driver update)"), std::string::npos);
  EXPECT_EQ(EntryFiles(dir.path()), 0u);
}

TEST(DiskCache, TwoHostProductsKeepEachOthersStoresAndANewerVersionSupersedes) {
  TempDir dir;
  auto open_host = [&](const char* product, const char* version) {
    gpusvc::DiskOptions disk = Disk(dir.path());
    disk.host_product = product;
    disk.host_version = version;
    gpusvc::ProgramCachePtr cache = Open(disk, Driver("1.0"));
    Wait(cache);
    Flush(cache);
    return cache;
  };
  for (const char* product : {"browser-stable", "browser-beta", "browser-stable"}) {
    gpusvc::ProgramCachePtr cache = open_host(product, "120");
    Save(cache, 1);
    Flush(cache);
    EXPECT_EQ(DiskStats(cache).stores_removed, 0u) << product;
  }
  EXPECT_EQ(Stores(dir.path()).size(), 2u) << "one store per product";
  gpusvc::ProgramCachePtr newer = open_host("browser-stable", "121");
  EXPECT_EQ(DiskStats(newer).stores_removed, 1u);
  EXPECT_EQ(Stores(dir.path()).size(), 2u);
}

TEST(DiskCache, ClearDeletesTheFiles) {
  TempDir dir;
  gpusvc::ProgramCachePtr a = Open(Disk(dir.path()), Driver("1.0"));
  Wait(a);
  Save(a, 1);
  Save(a, 2);
  Flush(a);
  ASSERT_EQ(EntryFiles(dir.path()), 2u);
  ASSERT_EQ(gpusvc_program_cache_clear(a.get()), GPUSVC_OK);
  Flush(a);  // the writer deletes them after what was queued
  EXPECT_EQ(EntryFiles(dir.path()), 0u);
  EXPECT_EQ(Stats(a).entries, 0u);
  EXPECT_EQ(DiskStats(a).store_drops, 1u);
  a.reset();
  gpusvc::ProgramCachePtr b = Open(Disk(dir.path()), Driver("1.0"));
  EXPECT_EQ(Wait(b).loaded, 0u);
}

TEST(DiskCache, StatsCountWritesLoadsAndRepeats) {
  TempDir dir;
  {
    gpusvc::ProgramCachePtr a = Open(Disk(dir.path()), Driver("1.0"));
    Wait(a);
    const gpusvc_program_cache_disk_stats_snapshot empty = DiskStats(a);
    EXPECT_TRUE(empty.configured);
    EXPECT_TRUE(empty.enabled);
    EXPECT_TRUE(empty.load_finished);
    EXPECT_EQ(empty.writes, 0u);
    Save(a, 1);
    Save(a, 2);
    Flush(a);
    const gpusvc_program_cache_disk_stats_snapshot s = DiskStats(a);
    EXPECT_EQ(s.writes, 2u);
    EXPECT_GT(s.bytes_written, 0u);
    EXPECT_EQ(s.dropped_writes, 0u);
    EXPECT_EQ(s.write_errors, 0u);
    EXPECT_EQ(s.loaded, 0u);
  }
  gpusvc::ProgramCachePtr b = Open(Disk(dir.path()), Driver("1.0"));
  Wait(b);
  Save(b, 1);  // on disk already
  Flush(b);
  const gpusvc_program_cache_disk_stats_snapshot s = DiskStats(b);
  EXPECT_EQ(s.loaded, 2u);
  EXPECT_EQ(s.writes, 0u);
  EXPECT_EQ(s.already_present, 1u);
  EXPECT_EQ(s.rejected_entries, 0u);
  EXPECT_EQ(gpusvc::DiskCondition(b.get()), "");
}

TEST(DiskCache, WaitUntilLoadedReportsWhatTheLoadDid) {
  TempDir dir;
  uint64_t one_entry = 0;
  {
    gpusvc::ProgramCachePtr a = Open(Disk(dir.path()), Driver("1.0"));
    Wait(a);
    for (uint8_t n = 1; n <= 3; ++n) Save(a, n);
    const gpusvc_program_cache_sha1 hot[] = {KeyOf(2)};
    ASSERT_EQ(gpusvc_program_cache_mark_hot(a.get(), hot, 1), GPUSVC_OK);
    Flush(a);
    one_entry = Stats(a).size_bytes / 3;
  }
  // Memory for one program and a half; the store's own budget stays large (no disk eviction).
  gpusvc::DiskOptions disk = Disk(dir.path());
  disk.budget_bytes = 1 << 20;
  gpusvc::ProgramCachePtr b = Open(disk, Driver("1.0"), one_entry + one_entry / 2);
  gpusvc_program_cache_disk_load_report report{};
  report.struct_size = sizeof(report);
  ASSERT_EQ(gpusvc::WaitUntilLoaded(b.get(), kWaitMs, &report), GPUSVC_OK);
  EXPECT_EQ(report.loaded, 1u);
  EXPECT_EQ(report.skipped, 2u);
  EXPECT_EQ(report.rejected, 0u);
  EXPECT_GT(report.elapsed_us, 0u);
  EXPECT_EQ(CachedBinary(b, 2), BinaryOf(2)) << "the hot program loads first";
  // Waiting again returns the same report at once.
  gpusvc_program_cache_disk_load_report again{};
  again.struct_size = sizeof(again);
  ASSERT_EQ(gpusvc::WaitUntilLoaded(b.get(), 0, &again), GPUSVC_OK);
  EXPECT_EQ(again.loaded, report.loaded);
  EXPECT_EQ(again.elapsed_us, report.elapsed_us);
}

TEST(DiskCache, AnUnusableFolderMeansMemoryOnlyAndOneReport) {
  TempDir dir;
  const fs::path file = dir.path() / "not-a-folder";
  { std::ofstream(file) << "x"; }
  LogSink sink;
  gpusvc::DiskOptions disk = Disk(file);
  disk.log = &LogLine;
  disk.log_user_data = &sink;
  {
    gpusvc::ProgramCachePtr cache = Open(disk, Driver("1.0"));
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(Wait(cache).loaded, 0u);
    const gpusvc_program_cache_disk_stats_snapshot s = DiskStats(cache);
    EXPECT_TRUE(s.configured);
    EXPECT_FALSE(s.enabled);
    const std::string condition = gpusvc::DiskCondition(cache.get());
    EXPECT_NE(condition.find(file.string()), std::string::npos) << condition;
    EXPECT_NE(condition.find("memory only"), std::string::npos) << condition;
    for (uint8_t n = 1; n <= 3; ++n) Save(cache, n);
    Flush(cache);
    EXPECT_EQ(CachedBinary(cache, 3), BinaryOf(3)) << "the cache works in memory";
    EXPECT_EQ(DiskStats(cache).writes, 0u);
    EXPECT_EQ(sink.calls.load(), 1);
    std::lock_guard<std::mutex> lock(sink.mutex);
    ASSERT_EQ(sink.lines.size(), 1u);
    EXPECT_EQ(sink.lines[0], condition);
  }
  EXPECT_EQ(sink.calls.load(), 1) << "reported once, and never after the free";
}

TEST(DiskCache, DisabledMeansNoDiskAtAll) {
  TempDir dir;
  gpusvc::DiskOptions disk = Disk(dir.path() / "would-be-made");
  disk.enabled = false;
  gpusvc_program_cache_config config = Config(1 << 20);
  const gpusvc_program_cache_disk_config c = disk.View();
  gpusvc_program_cache* raw = nullptr;
  // No driver identity is needed without a disk store.
  ASSERT_EQ(gpusvc_program_cache_open(&config, nullptr, nullptr, &c, nullptr, &raw),
            GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  gpusvc::ProgramCachePtr cache(raw);
  Save(cache, 1);
  Flush(cache);
  EXPECT_FALSE(DiskStats(cache).configured);
  EXPECT_EQ(Wait(cache).loaded, 0u);
  EXPECT_FALSE(fs::exists(dir.path() / "would-be-made"));
}

TEST(DiskCache, TheDefaultFolderEndsInGpusvc) {
  const std::string dir = gpusvc::DefaultDiskDir();
  ASSERT_GE(dir.size(), 6u);
  EXPECT_EQ(dir.substr(dir.size() - 6), "gpusvc");
}

TEST(DiskCache, NullAndInvalidArgumentsAreCodesAndWriteNothing) {
  TempDir dir;
  const gpusvc::DiskOptions options = Disk(dir.path());
  const gpusvc::DriverStrings strings = Driver("1.0");
  const gpusvc_program_cache_disk_config good = options.View();
  const gpusvc_driver_identity driver = strings.View();
  const gpusvc_program_cache_config config = Config(1 << 20);
  auto attempt = [](const gpusvc_program_cache_config* c, const gpusvc_program_cache_disk_config* d,
                    const gpusvc_driver_identity* i) {
    gpusvc_program_cache* out = nullptr;
    const gpusvc_result r = gpusvc_program_cache_open(c, nullptr, nullptr, d, i, &out);
    EXPECT_EQ(out, nullptr) << "nothing written on failure";
    return r;
  };
  EXPECT_EQ(attempt(nullptr, &good, &driver), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(attempt(&config, nullptr, &driver), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(attempt(&config, &good, nullptr), GPUSVC_NULL_ARGUMENT);
  gpusvc_program_cache_disk_config bad = good;
  bad.dir_len = 0;
  EXPECT_EQ(attempt(&config, &bad, &driver), GPUSVC_INVALID_ARGUMENT);
  bad = good;
  bad.dir = nullptr;
  EXPECT_EQ(attempt(&config, &bad, &driver), GPUSVC_NULL_ARGUMENT);
  bad = good;
  bad.max_consecutive_rejections = 0;
  EXPECT_EQ(attempt(&config, &bad, &driver), GPUSVC_INVALID_ARGUMENT);
  bad = good;
  bad.host_product = nullptr;
  EXPECT_EQ(attempt(&config, &bad, &driver), GPUSVC_NULL_ARGUMENT);
  bad = good;
  bad.host_version = nullptr;
  EXPECT_EQ(attempt(&config, &bad, &driver), GPUSVC_NULL_ARGUMENT);
  const char not_utf8[] = {'\xff', '\xfe', '\0'};
  bad = good;
  bad.driver_build_id = not_utf8;
  EXPECT_EQ(attempt(&config, &bad, &driver), GPUSVC_INVALID_UTF8);
  gpusvc_driver_identity no_version = driver;
  no_version.gl_version = nullptr;
  EXPECT_EQ(attempt(&config, &good, &no_version), GPUSVC_NULL_ARGUMENT);
  EXPECT_NE(gpusvc::LastErrorDetail().find("gl_version"), std::string::npos);
  gpusvc_program_cache_config bad_config = config;
  bad_config.policy = 77;
  EXPECT_EQ(attempt(&bad_config, &good, &driver), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc_program_cache_open(&config, nullptr, nullptr, &good, &driver, nullptr),
            GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_program_cache_disk_config_defaults(nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_TRUE(Stores(dir.path()).empty()) << "failed calls make nothing";

  gpusvc::ProgramCachePtr cache = Open(options, strings);
  gpusvc_program_cache_disk_load_report report{};
  report.struct_size = sizeof(report);
  report.loaded = 99;
  EXPECT_EQ(gpusvc_program_cache_wait_until_loaded(cache.get(), kWaitMs, nullptr),
            GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_program_cache_wait_until_loaded(nullptr, kWaitMs, &report),
            GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_program_cache_flush_disk(nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_program_cache_mark_hot(cache.get(), nullptr, 2), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_program_cache_mark_hot(cache.get(), nullptr, 0), GPUSVC_OK);
  EXPECT_EQ(gpusvc_program_cache_disk_stats(cache.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  size_t len = 0;
  EXPECT_EQ(gpusvc_program_cache_disk_condition(cache.get(), nullptr, 0, nullptr),
            GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_program_cache_disk_condition(cache.get(), nullptr, 4, &len),
            GPUSVC_NULL_ARGUMENT);
  gpusvc_driver_identity identity{};
  identity.struct_size = sizeof(identity);
  EXPECT_EQ(gpusvc_gl_context_driver_identity(nullptr, &identity), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(identity.gl_vendor, nullptr);
  // A handle that is not a cache.
  auto* bogus = reinterpret_cast<gpusvc_program_cache*>(uintptr_t{0xdead0});
  EXPECT_EQ(gpusvc_program_cache_wait_until_loaded(bogus, 0, &report), GPUSVC_INVALID_HANDLE);
  EXPECT_EQ(gpusvc_program_cache_flush_disk(bogus), GPUSVC_INVALID_HANDLE);
  EXPECT_EQ(report.loaded, 99u) << "nothing written on failure";
}

TEST(DiskCache, TheLoadTimeoutCodeIsNew) {
  EXPECT_EQ(GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT, 207u);
  EXPECT_NE(gpusvc::ResultMessage(GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT).find("did not finish"),
            std::string::npos);
}

namespace {

const char kVs[] =
    "in vec2 a_position;\nuniform float u_scale;\n"
    "void main() { gl_Position = vec4(a_position * u_scale, 0.0, 1.0); }\n";
const char kFs[] = "uniform vec4 u_tint;\nout vec4 o_color;\nvoid main() { o_color = u_tint; }\n";

// Links kVs/kFs through a new manager over ctx and cache; returns the link origin.
uint32_t LinkOnce(const gpusvc::GlContextPtr& ctx, const gpusvc::ProgramCachePtr& cache) {
  gpusvc::ProgramManagerPtr manager;
  EXPECT_EQ(gpusvc::NewGlProgramManager(ctx.get(), cache.get(), "cpp disk", &manager), GPUSVC_OK);
  gpusvc::ShaderPtr vs, fs;
  EXPECT_EQ(gpusvc::NewShader(manager.get(), GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, Glsl(ctx.get(), kVs), &vs),
            GPUSVC_OK);
  EXPECT_EQ(
      gpusvc::NewShader(manager.get(), GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, Glsl(ctx.get(), kFs), &fs),
      GPUSVC_OK);
  uint32_t outcome = 0;
  EXPECT_EQ(gpusvc::Compile(manager.get(), vs.get(), &outcome), GPUSVC_OK);
  EXPECT_EQ(gpusvc::Compile(manager.get(), fs.get(), &outcome), GPUSVC_OK);
  gpusvc::LinkedProgramPtr p;
  EXPECT_EQ(gpusvc::Link(manager.get(), vs.get(), fs.get(), gpusvc::LinkOptions(), &p), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  uint32_t origin = 99;
  if (p != nullptr) {
    EXPECT_EQ(gpusvc_program_manager_linked_program_origin(p.get(), &origin), GPUSVC_OK);
  }
  return origin;
}

}  // namespace

TEST(DiskCacheGl, TheStampFromALiveContextAndARealBinaryRoundTrip) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  gpusvc::DriverStrings driver;
  ASSERT_EQ(gpusvc::ContextDriverStrings(ctx.get(), &driver), GPUSVC_OK);
  gpusvc::DriverIdentity identity;
  ASSERT_EQ(gpusvc::ReadDriverIdentity(ctx.get(), &identity), GPUSVC_OK);
  EXPECT_EQ(driver.vendor, identity.vendor);
  EXPECT_EQ(driver.renderer, identity.renderer);
  EXPECT_EQ(driver.version, identity.version);
  TempDir dir;
  {
    gpusvc::ProgramCachePtr a = Open(Disk(dir.path()), driver, 1 << 22);
    Wait(a);
    EXPECT_EQ(LinkOnce(ctx, a), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    Flush(a);
    EXPECT_EQ(DiskStats(a).writes, 1u);
  }
  const std::vector<fs::path> stores = Stores(dir.path());
  ASSERT_EQ(stores.size(), 1u);
  EXPECT_NE(ReadFile(stores[0] / "STAMP").find(driver.renderer), std::string::npos);
  // A fresh cache, as in the next process: the driver's binary comes from disk and is accepted.
  gpusvc::ProgramCachePtr b = Open(Disk(dir.path()), driver, 1 << 22);
  EXPECT_EQ(Wait(b).loaded, 1u);
  EXPECT_EQ(LinkOnce(ctx, b), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
  const gpusvc_program_cache_stats_snapshot s = Stats(b);
  EXPECT_EQ(s.counters.hits, 1u);
  EXPECT_EQ(s.counters.driver_rejections, 0u);
}
