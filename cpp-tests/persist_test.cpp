// The persistence split through gpusvc.hpp, from the host's side: a GPU-side cache hands what it
// saves to a PersistSink, a store (no GL, no cache) keeps the entries and streams them back into
// a fresh cache, whose links are cache hits on the real driver; the sink is silent once the
// cache is reset; the stamp text; the store's codes for bad configurations and entries; an
// iteration that stops early and calls back into its store.
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
#include <utility>
#include <vector>

#include "gl_support.h"
#include "temp_dir.h"
#include "gpusvc.hpp"

namespace {

namespace fs = std::filesystem;

using Entry = std::pair<gpusvc_program_cache_sha1, std::vector<uint8_t>>;

// What the persistence thread handed over.
class RecordingSink : public gpusvc::PersistSink {
 public:
  void EntrySaved(const gpusvc_program_cache_sha1& key, const uint8_t* entry,
                  size_t len) override {
    std::lock_guard<std::mutex> lock(mutex_);
    saved_.emplace_back(key, std::vector<uint8_t>(entry, entry + len));
    calls_.fetch_add(1);
  }
  void EntryUsed(const gpusvc_program_cache_sha1& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    used_.push_back(key);
    calls_.fetch_add(1);
  }
  void EntryRejected(const gpusvc_program_cache_sha1&) override { calls_.fetch_add(1); }
  void StoreRejected() override { calls_.fetch_add(1); }
  void ShadersCompiled(const gpusvc_program_cache_sha1* hashes, size_t count) override {
    std::lock_guard<std::mutex> lock(mutex_);
    compiled_.insert(compiled_.end(), hashes, hashes + count);
    calls_.fetch_add(1);
  }

  std::vector<gpusvc_program_cache_sha1> Compiled() {
    std::lock_guard<std::mutex> lock(mutex_);
    return compiled_;
  }
  std::vector<Entry> Saved() {
    std::lock_guard<std::mutex> lock(mutex_);
    return saved_;
  }
  size_t Used() {
    std::lock_guard<std::mutex> lock(mutex_);
    return used_.size();
  }
  int Calls() const { return calls_.load(); }

 private:
  std::mutex mutex_;
  std::vector<Entry> saved_;
  std::vector<gpusvc_program_cache_sha1> used_;
  std::vector<gpusvc_program_cache_sha1> compiled_;
  std::atomic<int> calls_{0};
};

gpusvc_program_cache_config Config(size_t budget) {
  gpusvc_program_cache_config config{};
  EXPECT_EQ(gpusvc::ProgramCacheDefaults(GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP, &config), GPUSVC_OK);
  config.budget_bytes = budget;
  return config;
}

gpusvc::StampFields Fields(const std::string& version = "1") {
  gpusvc::StampFields f;
  f.host_product = "cpp persist tests";
  f.host_version = version;
  return f;
}

gpusvc::DriverStrings FakeDriver() {
  return gpusvc::DriverStrings{"Test vendor", "test renderer", "1.0", "OpenGL core profile"};
}

std::string Stamp(const gpusvc::DriverStrings& driver, const std::string& version = "1") {
  std::string stamp;
  EXPECT_EQ(gpusvc::StampText(driver, Fields(version), &stamp), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  return stamp;
}

// The stamp text of the driver behind `ctx` (empty on failure, which the caller asserts).
std::string ContextStamp(const gpusvc::GlContextPtr& ctx) {
  gpusvc::DriverStrings driver;
  if (gpusvc::ContextDriverStrings(ctx.get(), &driver) != GPUSVC_OK) {
    ADD_FAILURE() << gpusvc::LastErrorDetail();
    return std::string();
  }
  return Stamp(driver);
}

gpusvc::ProgramCacheStorePtr OpenStore(const fs::path& dir, const std::string& stamp) {
  gpusvc::StoreOptions options = gpusvc::StoreOptions::Defaults();
  options.dir = dir.string();
  options.stamp = stamp;
  gpusvc::ProgramCacheStorePtr store;
  EXPECT_EQ(gpusvc::OpenProgramCacheStore(options, &store), GPUSVC_OK) << gpusvc::LastErrorDetail();
  return store;
}

std::vector<Entry> AllEntries(const gpusvc::ProgramCacheStorePtr& store) {
  std::vector<Entry> out;
  size_t count = 0;
  EXPECT_EQ(gpusvc::ForEachStoreEntry(
                store.get(),
                [&](const gpusvc_program_cache_sha1& key, const uint8_t* entry, size_t len) {
                  out.emplace_back(key, std::vector<uint8_t>(entry, entry + len));
                  return true;
                },
                &count),
            GPUSVC_OK);
  EXPECT_EQ(count, out.size());
  return out;
}

gpusvc_program_cache_sha1 KeyOf(uint8_t n) {
  gpusvc_program_cache_sha1 k{};
  for (auto& b : k.bytes) b = n;
  return k;
}

// Saves a made-up program n (300 bytes of binary) under KeyOf(n).
void Save(const gpusvc::ProgramCachePtr& cache, uint8_t n) {
  gpusvc::CachedProgram p;
  p.vertex_shader = KeyOf(n);
  p.fragment_shader = KeyOf(static_cast<uint8_t>(n + 50));
  p.binary_format = 0xB1;
  p.binary.resize(300);
  for (size_t i = 0; i < p.binary.size(); ++i) p.binary[i] = static_cast<uint8_t>(i * n);
  EXPECT_EQ(gpusvc::SaveProgram(cache.get(), KeyOf(n), p), GPUSVC_OK) << gpusvc::LastErrorDetail();
}

// The entries a sink receives for made-up programs 1..count under `stamp`.
std::vector<Entry> MadeUpEntries(const std::string& stamp, uint8_t count) {
  RecordingSink sink;
  gpusvc::ProgramCachePtr cache;
  EXPECT_EQ(gpusvc::NewPersistingProgramCache(Config(1 << 20), stamp, &sink, &cache), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  for (uint8_t n = 1; n <= count; ++n) Save(cache, n);
  EXPECT_EQ(gpusvc_program_cache_flush_persist(cache.get()), GPUSVC_OK);
  cache.reset();
  return sink.Saved();
}

constexpr const char* kVs =
    "in vec2 a_position;\nuniform float u_scale;\n"
    "void main() { gl_Position = vec4(a_position * u_scale, 0.0, 1.0); }\n";

// Links kVs + a fragment shader numbered n through `manager`; the link origin (99 on error).
uint32_t LinkProgram(const gpusvc::GlContextPtr& ctx, const gpusvc::ProgramManagerPtr& manager,
                     int n) {
  const std::string fs = "uniform vec4 u_tint;\nout vec4 o_color;\nvoid main() { o_color = u_tint * " +
                         std::to_string(n) + ".0; }\n";
  gpusvc::ShaderPtr v, f;
  EXPECT_EQ(gpusvc::NewShader(manager.get(), GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
                              Glsl(ctx.get(), kVs), &v),
            GPUSVC_OK);
  EXPECT_EQ(gpusvc::NewShader(manager.get(), GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
                              Glsl(ctx.get(), fs.c_str()), &f),
            GPUSVC_OK);
  uint32_t outcome = 0;
  EXPECT_EQ(gpusvc::Compile(manager.get(), v.get(), &outcome), GPUSVC_OK);
  EXPECT_EQ(gpusvc::Compile(manager.get(), f.get(), &outcome), GPUSVC_OK);
  gpusvc::LinkedProgramPtr p;
  if (gpusvc::Link(manager.get(), v.get(), f.get(), gpusvc::LinkOptions{}, &p) != GPUSVC_OK) {
    ADD_FAILURE() << gpusvc::LastErrorDetail();
    return 99;
  }
  uint32_t origin = 99;
  EXPECT_EQ(gpusvc_program_manager_linked_program_origin(p.get(), &origin), GPUSVC_OK);
  return origin;
}

}  // namespace

TEST(PersistSplit, ProgramsLinkedOnTheDriverComeBackFromTheStoreAsCacheHits) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  const std::string stamp = ContextStamp(ctx);
  ASSERT_FALSE(stamp.empty());
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  constexpr int kPrograms = 3;

  RecordingSink sent;
  size_t persisted = 0;
  {
    gpusvc::ProgramCachePtr a;
    ASSERT_EQ(gpusvc::NewPersistingProgramCache(Config(1 << 22), stamp, &sent, &a), GPUSVC_OK)
        << gpusvc::LastErrorDetail();
    gpusvc::ProgramManagerPtr m;
    ASSERT_EQ(gpusvc::NewGlProgramManager(ctx.get(), a.get(), "cpp persist", &m), GPUSVC_OK);
    for (int n = 0; n < kPrograms; ++n)
      EXPECT_EQ(LinkProgram(ctx, m, n), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
    ASSERT_EQ(gpusvc_program_cache_flush_persist(a.get()), GPUSVC_OK);
    gpusvc_program_cache_persist_stats_snapshot ps{};
    ASSERT_EQ(gpusvc::PersistStats(a.get(), &ps), GPUSVC_OK);
    EXPECT_TRUE(ps.configured);
    EXPECT_EQ(ps.sent, uint64_t{kPrograms});
    gpusvc::ProgramCacheStorePtr store = OpenStore(dir.path(), stamp);
    ASSERT_NE(store, nullptr);
    for (const Entry& e : sent.Saved()) {
      gpusvc_program_cache_sha1 key{};
      bool written = false;
      ASSERT_EQ(gpusvc::StorePut(store.get(), e.second.data(), e.second.size(), &key, &written),
                GPUSVC_OK)
          << gpusvc::LastErrorDetail();
      EXPECT_EQ(key, e.first);
      if (written) ++persisted;
    }
  }
  EXPECT_EQ(sent.Saved().size(), size_t{kPrograms});
  EXPECT_EQ(persisted, size_t{kPrograms});

  // The next start.
  gpusvc::ProgramCacheStorePtr store = OpenStore(dir.path(), stamp);
  RecordingSink got;
  gpusvc::ProgramCachePtr b;
  ASSERT_EQ(gpusvc::NewPersistingProgramCache(Config(1 << 22), stamp, &got, &b), GPUSVC_OK);
  size_t streamed = 0;
  for (const Entry& e : AllEntries(store)) {
    gpusvc_program_cache_sha1 key{};
    EXPECT_EQ(gpusvc::InsertEntry(b.get(), e.second, &key), GPUSVC_OK) << gpusvc::LastErrorDetail();
    EXPECT_EQ(key, e.first);
    ++streamed;
  }
  EXPECT_EQ(streamed, size_t{kPrograms});
  gpusvc::ProgramManagerPtr m;
  ASSERT_EQ(gpusvc::NewGlProgramManager(ctx.get(), b.get(), "cpp persist", &m), GPUSVC_OK);
  for (int n = 0; n < kPrograms; ++n)
    EXPECT_EQ(LinkProgram(ctx, m, n), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT) << n;
  gpusvc_program_cache_stats_snapshot st = gpusvc::Sized<gpusvc_program_cache_stats_snapshot>();
  ASSERT_EQ(gpusvc_program_cache_stats(b.get(), &st), GPUSVC_OK);
  EXPECT_EQ(st.counters.hits, uint64_t{kPrograms});
  EXPECT_EQ(st.counters.driver_rejections, 0u);
  ASSERT_EQ(gpusvc_program_cache_flush_persist(b.get()), GPUSVC_OK);
  EXPECT_EQ(got.Used(), size_t{kPrograms});
  std::printf("linked %d, sent %zu, persisted %zu, streamed back %zu, hits %llu\n", kPrograms,
              sent.Saved().size(), persisted, streamed,
              static_cast<unsigned long long>(st.counters.hits));
}

// Compiles kVs and a fragment shader that does not compile through `manager`; the outcomes.
std::pair<uint32_t, uint32_t> CompileRefusedPair(const gpusvc::GlContextPtr& ctx,
                                                 const gpusvc::ProgramManagerPtr& manager) {
  gpusvc::ShaderPtr v, f;
  EXPECT_EQ(gpusvc::NewShader(manager.get(), GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
                              Glsl(ctx.get(), kVs), &v),
            GPUSVC_OK);
  EXPECT_EQ(gpusvc::NewShader(manager.get(), GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
                              Glsl(ctx.get(), "out vec4 o;\nvoid main() { o = undeclared; }\n"),
                              &f),
            GPUSVC_OK);
  uint32_t vs = 99, fs = 99;
  EXPECT_EQ(gpusvc::Compile(manager.get(), v.get(), &vs), GPUSVC_OK);
  EXPECT_EQ(gpusvc::Compile(manager.get(), f.get(), &fs), GPUSVC_OK);
  return {vs, fs};
}

// On the real driver: the good vertex shader of a program whose fragment shader fails goes to
// the sink's ShadersCompiled, into the store's list, and back at the next start, where neither
// shader reaches the driver (the vertex shader is deferred, the fragment shader's failure
// record answers it).
TEST(PersistSplit, AWarmStartThroughTheStoreCompilesNoShaderOfARefusedProgram) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  const std::string stamp = ContextStamp(ctx);
  ASSERT_FALSE(stamp.empty());
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  RecordingSink sent;
  {
    gpusvc::ProgramCachePtr a;
    ASSERT_EQ(gpusvc::NewPersistingProgramCache(Config(1 << 22), stamp, &sent, &a), GPUSVC_OK);
    gpusvc::ProgramManagerPtr m;
    ASSERT_EQ(gpusvc::NewGlProgramManager(ctx.get(), a.get(), "cpp persist", &m), GPUSVC_OK);
    const auto cold = CompileRefusedPair(ctx, m);
    EXPECT_EQ(cold.first, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED);
    EXPECT_EQ(cold.second, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED);
    ASSERT_EQ(gpusvc_program_cache_flush_persist(a.get()), GPUSVC_OK);
    gpusvc_program_cache_persist_stats_snapshot ps{};
    ASSERT_EQ(gpusvc::PersistStats(a.get(), &ps), GPUSVC_OK);
    EXPECT_EQ(ps.compiled, 1u);
  }
  ASSERT_EQ(sent.Compiled().size(), 1u) << "the good vertex shader";
  ASSERT_EQ(sent.Saved().size(), 1u) << "the fragment shader's failure record";
  {
    gpusvc::ProgramCacheStorePtr store = OpenStore(dir.path(), stamp);
    ASSERT_NE(store, nullptr);
    const std::vector<gpusvc_program_cache_sha1> hashes = sent.Compiled();
    ASSERT_EQ(gpusvc::StoreMarkCompiled(store.get(), hashes.data(), hashes.size()), GPUSVC_OK);
    for (const Entry& e : sent.Saved())
      ASSERT_EQ(gpusvc::StorePut(store.get(), e.second.data(), e.second.size()), GPUSVC_OK);
  }

  // The next start, from another store handle.
  gpusvc::ProgramCacheStorePtr store = OpenStore(dir.path(), stamp);
  std::vector<gpusvc_program_cache_sha1> kept;
  ASSERT_EQ(gpusvc::StoreCompiledShaders(store.get(), &kept), GPUSVC_OK);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0], sent.Compiled()[0]);
  RecordingSink got;
  gpusvc::ProgramCachePtr b;
  ASSERT_EQ(gpusvc::NewPersistingProgramCache(Config(1 << 22), stamp, &got, &b), GPUSVC_OK);
  ASSERT_EQ(gpusvc::InsertCompiled(b.get(), kept), GPUSVC_OK);
  for (const Entry& e : AllEntries(store))
    ASSERT_EQ(gpusvc::InsertEntry(b.get(), e.second), GPUSVC_OK) << gpusvc::LastErrorDetail();
  gpusvc::ProgramManagerPtr m;
  ASSERT_EQ(gpusvc::NewGlProgramManager(ctx.get(), b.get(), "cpp persist", &m), GPUSVC_OK);
  const auto warm = CompileRefusedPair(ctx, m);
  EXPECT_EQ(warm.first, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED);
  EXPECT_EQ(warm.second, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_KNOWN_FAILURE);
  gpusvc_program_cache_stats_snapshot st = gpusvc::Sized<gpusvc_program_cache_stats_snapshot>();
  ASSERT_EQ(gpusvc_program_cache_stats(b.get(), &st), GPUSVC_OK);
  EXPECT_EQ(st.counters.status_misses, 0u) << "no shader compiled on the driver";
}

TEST(PersistSplit, TheSinkIsSilentOnceTheCacheIsResetEvenWhileAManagerKeepsIt) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  gpusvc::DriverStrings driver;
  ASSERT_EQ(gpusvc::ContextDriverStrings(ctx.get(), &driver), GPUSVC_OK);
  RecordingSink sink;
  gpusvc::ProgramCachePtr cache;
  ASSERT_EQ(gpusvc::NewPersistingProgramCache(Config(1 << 22), Stamp(driver), &sink, &cache),
            GPUSVC_OK);
  gpusvc::ProgramManagerPtr m;
  ASSERT_EQ(gpusvc::NewGlProgramManager(ctx.get(), cache.get(), "cpp persist", &m), GPUSVC_OK);
  EXPECT_EQ(LinkProgram(ctx, m, 0), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
  ASSERT_EQ(gpusvc_program_cache_flush_persist(cache.get()), GPUSVC_OK);
  ASSERT_EQ(sink.Calls(), 1);
  cache.reset();
  EXPECT_EQ(LinkProgram(ctx, m, 1), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
  EXPECT_EQ(LinkProgram(ctx, m, 0), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
  m.reset();  // the last reference: the persistence thread delivers what was queued, silently
  EXPECT_EQ(sink.Calls(), 1);
}

TEST(PersistStore, TheStampTextIsTheStampOfADiskCacheOfTheSameDriver) {
  const gpusvc::DriverStrings driver = FakeDriver();
  const std::string stamp = Stamp(driver, "7");
  EXPECT_NE(stamp.find("host_product: cpp persist tests"), std::string::npos) << stamp;
  TempDir dir;
  {
    gpusvc::DiskOptions disk = gpusvc::DiskOptions::Defaults();
    disk.dir = dir.path().string();
    disk.host_product = "cpp persist tests";
    disk.host_version = "7";
    gpusvc::ProgramCachePtr cache;
    ASSERT_EQ(gpusvc::NewProgramCacheWithDisk(Config(1 << 20), disk, driver, &cache), GPUSVC_OK)
        << gpusvc::LastErrorDetail();
    Save(cache, 4);
    ASSERT_EQ(gpusvc_program_cache_flush_disk(cache.get()), GPUSVC_OK);
  }
  std::vector<fs::path> stores;
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (fs::exists(e.path() / "STAMP")) stores.push_back(e.path());
  ASSERT_EQ(stores.size(), 1u);
  std::ifstream in(stores[0] / "STAMP", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), stamp);
  gpusvc::ProgramCacheStorePtr store = OpenStore(dir.path(), stamp);
  const std::vector<Entry> entries = AllEntries(store);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].first, KeyOf(4));
}

TEST(PersistStore, BadConfigurationsAndEntriesHaveTheirOwnCodes) {
  const std::string stamp = Stamp(FakeDriver());
  TempDir dir;
  auto open = [&](const std::string& d, const std::string& s, uint64_t budget = 64u << 20) {
    gpusvc::StoreOptions o = gpusvc::StoreOptions::Defaults();
    o.dir = d;
    o.stamp = s;
    o.budget_bytes = budget;
    gpusvc::ProgramCacheStorePtr store;
    gpusvc_result r = gpusvc::OpenProgramCacheStore(o, &store);
    EXPECT_EQ(store == nullptr, r != GPUSVC_OK);
    return r;
  };
  EXPECT_EQ(open("relative/dir", stamp), GPUSVC_PROGRAM_CACHE_STORE_DIR_NOT_ABSOLUTE);
  EXPECT_EQ(open(dir.path().string() + "/\xff", stamp), GPUSVC_INVALID_UTF8);
  EXPECT_EQ(open("", stamp), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(open(dir.path().string(), "stamp_format: 2\n"), GPUSVC_PROGRAM_CACHE_BAD_STAMP);
  EXPECT_EQ(open(dir.path().string(), stamp, 0), GPUSVC_INVALID_ARGUMENT);
  const fs::path file = dir.path() / "a file";
  std::ofstream(file) << "x";
  EXPECT_EQ(open(file.string(), stamp), GPUSVC_PROGRAM_CACHE_STORE_UNUSABLE);
  gpusvc_program_cache_store_config old = gpusvc::Sized<gpusvc_program_cache_store_config>();
  old.struct_size = 0;
  gpusvc_program_cache_store* raw = nullptr;
  EXPECT_EQ(gpusvc_program_cache_store_open(&old, &raw), GPUSVC_UNSUPPORTED_STRUCT_SIZE);
  EXPECT_EQ(raw, nullptr);

  gpusvc::ProgramCacheStorePtr store = OpenStore(dir.path(), stamp);
  ASSERT_NE(store, nullptr);
  const std::vector<uint8_t> good = MadeUpEntries(stamp, 1).at(0).second;
  std::vector<uint8_t> damaged = good;
  damaged.back() ^= 1;
  const std::vector<uint8_t> foreign = MadeUpEntries(Stamp(FakeDriver(), "2"), 1).at(0).second;
  gpusvc_program_cache_sha1 key = KeyOf(0xEE);
  EXPECT_EQ(gpusvc::StorePut(store.get(), good.data(), 50, &key), GPUSVC_PROGRAM_CACHE_ENTRY_MALFORMED);
  EXPECT_EQ(gpusvc::StorePut(store.get(), damaged.data(), damaged.size(), &key),
            GPUSVC_PROGRAM_CACHE_ENTRY_DAMAGED);
  EXPECT_EQ(gpusvc::StorePut(store.get(), foreign.data(), foreign.size(), &key),
            GPUSVC_PROGRAM_CACHE_ENTRY_FOREIGN_STAMP);
  EXPECT_EQ(gpusvc::StorePut(store.get(), nullptr, 0, &key), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(key, KeyOf(0xEE)) << "nothing written on failure";
  gpusvc_program_cache_store_stats_snapshot st{};
  ASSERT_EQ(gpusvc::StoreStats(store.get(), &st), GPUSVC_OK);
  EXPECT_EQ(st.refused, 3u);
  EXPECT_EQ(st.entries, 0u);

  // The same refusals from the GPU side's insert, and the two it has of its own.
  RecordingSink sink;
  gpusvc::ProgramCachePtr cache;
  ASSERT_EQ(gpusvc::NewPersistingProgramCache(Config(1 << 20), stamp, &sink, &cache), GPUSVC_OK);
  EXPECT_EQ(gpusvc::InsertEntry(cache.get(), damaged), GPUSVC_PROGRAM_CACHE_ENTRY_DAMAGED);
  EXPECT_EQ(gpusvc::InsertEntry(cache.get(), foreign), GPUSVC_PROGRAM_CACHE_ENTRY_FOREIGN_STAMP);
  gpusvc::ProgramCachePtr plain;
  ASSERT_EQ(gpusvc::NewProgramCache(Config(1 << 20), &plain), GPUSVC_OK);
  EXPECT_EQ(gpusvc::InsertEntry(plain.get(), good), GPUSVC_PROGRAM_CACHE_PERSIST_NOT_CONFIGURED);
  gpusvc::ProgramCachePtr tiny;
  ASSERT_EQ(gpusvc::NewPersistingProgramCache(Config(100), stamp, &sink, &tiny), GPUSVC_OK);
  EXPECT_EQ(gpusvc::InsertEntry(tiny.get(), good), GPUSVC_PROGRAM_CACHE_NO_ROOM);
  EXPECT_EQ(gpusvc::InsertEntry(cache.get(), good, &key), GPUSVC_OK);
  EXPECT_EQ(key, KeyOf(1));
  gpusvc::ProgramCachePtr bad;
  EXPECT_EQ(gpusvc::NewPersistingProgramCache(Config(1 << 20), "not a stamp", &sink, &bad),
            GPUSVC_PROGRAM_CACHE_BAD_STAMP);
  EXPECT_EQ(bad, nullptr);
}

TEST(PersistStore, AnIterationStopsWhenAskedAndMayCallBackIntoItsStore) {
  const std::string stamp = Stamp(FakeDriver());
  TempDir dir;
  gpusvc::ProgramCacheStorePtr store = OpenStore(dir.path(), stamp);
  ASSERT_NE(store, nullptr);
  for (const Entry& e : MadeUpEntries(stamp, 4)) {
    bool written = false;
    ASSERT_EQ(gpusvc::StorePut(store.get(), e.second.data(), e.second.size(), nullptr, &written),
              GPUSVC_OK);
    EXPECT_TRUE(written);
  }
  size_t calls = 0, count = 0;
  std::vector<gpusvc_result> results;
  EXPECT_EQ(gpusvc::ForEachStoreEntry(
                store.get(),
                [&](const gpusvc_program_cache_sha1& key, const uint8_t* entry, size_t len) {
                  ++calls;
                  gpusvc_program_cache_store_stats_snapshot st{};
                  results.push_back(gpusvc::StoreStats(store.get(), &st));
                  results.push_back(gpusvc::StoreTouch(store.get(), key));
                  bool written = true;
                  results.push_back(gpusvc::StorePut(store.get(), entry, len, nullptr, &written));
                  results.push_back(written ? GPUSVC_INVALID_ARGUMENT : GPUSVC_OK);
                  size_t inner = 0;
                  results.push_back(gpusvc::ForEachStoreEntry(
                      store.get(),
                      [](const gpusvc_program_cache_sha1&, const uint8_t*, size_t) { return true; },
                      &inner));
                  return calls < 2;  // stop after the second
                },
                &count),
            GPUSVC_OK);
  EXPECT_EQ(calls, 2u);
  EXPECT_EQ(count, 2u);
  for (gpusvc_result r : results) EXPECT_EQ(r, GPUSVC_OK) << gpusvc::ResultMessage(r);
  size_t removed = 0;
  ASSERT_EQ(gpusvc::StoreClear(store.get(), &removed), GPUSVC_OK);
  EXPECT_EQ(removed, 4u);
  EXPECT_TRUE(AllEntries(store).empty());
  EXPECT_EQ(gpusvc::StoreCondition(store.get()), "");
}
