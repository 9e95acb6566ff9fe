// The gpusvc.hpp wrappers of the program cache's statistics, statuses and maintenance calls, the
// disk and persistence flushes, a program manager's shaders (source, options, state, translator
// qualifiers and blocks), linked programs (key, object, origin, static use, deferred binary
// reads), and the host sink. Every value read back is checked against what was set or what the
// driver (llvmpipe, desktop GL core) reported; error paths check the documented code and that the
// outputs were left alone. GL tests skip without a driver unless GPUSVC_REQUIRE_GL is set.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "gl_support.h"
#include "temp_dir.h"
#include "gpusvc.hpp"

// Readable failure messages for the wrappers' value types.
namespace gpusvc {
void PrintTo(const VariableQualifiers& q, std::ostream* os) {
  *os << "{precision " << q.precision << ", static_use " << q.static_use << "}";
}
void PrintTo(const ShaderBlock& b, std::ostream* os) {
  *os << "{" << b.name << "=" << b.mapped_name << " binding " << b.binding << " size " << b.data_size
      << " static_use " << b.static_use << " members";
  for (const Variable& m : b.members) *os << " " << m.name << "=" << m.mapped_name << "@" << m.location;
  *os << "}";
}
}  // namespace gpusvc

namespace {

namespace fs = std::filesystem;

constexpr uint32_t kVertex = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX;
constexpr uint32_t kFragment = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT;
constexpr uint32_t kCompute = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE;
constexpr uint32_t kUniformBlocks = GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_UNIFORM;
constexpr uint32_t kStorageBlocks = GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_STORAGE;
constexpr uint32_t kOutputs = GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_OUTPUT;
constexpr uint32_t kWaitMs = 10000;
const char kIdentity[] = "wrappers test";

const char kVs[] =
    "#version 450 core\nin vec4 a_position;\nin vec4 a_color;\nuniform float u_scale;\n"
    "out vec4 v_color;\n"
    "void main() { v_color = a_color * u_scale; gl_Position = a_position; }\n";
const char kFs[] =
    "#version 450 core\nin vec4 v_color;\nuniform vec4 u_tint;\n"
    "layout(location = 0) out vec4 o_color;\n"
    "layout(std140, binding = 2) uniform Params { vec4 p_offset; mat4 p_m; };\n"
    "void main() { o_color = v_color * u_tint + p_offset + p_m[1]; }\n";
const char kCs[] =
    "#version 450 core\nlayout(local_size_x = 8, local_size_y = 2) in;\n"
    "layout(std430, binding = 1) buffer Data { uint values[]; };\n"
    "void main() { values[gl_GlobalInvocationID.x] *= 2u; }\n";

std::string VsVariant(int i) {
  return std::string(kVs) + "// variant " + std::to_string(i) + "\n";
}

gpusvc_program_cache_config Config(size_t budget) {
  gpusvc_program_cache_config config{};
  EXPECT_EQ(gpusvc::ProgramCacheDefaults(GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP, &config), GPUSVC_OK);
  config.budget_bytes = budget;
  return config;
}

gpusvc::ProgramCachePtr MakeCache(size_t budget = 4 << 20) {
  gpusvc::ProgramCachePtr cache;
  EXPECT_EQ(gpusvc::NewProgramCache(Config(budget), &cache), GPUSVC_OK) << gpusvc::LastErrorDetail();
  return cache;
}

gpusvc_program_cache_stats_snapshot Stats(const gpusvc::ProgramCachePtr& cache) {
  gpusvc_program_cache_stats_snapshot s{};
  EXPECT_EQ(gpusvc::ProgramCacheStats(cache.get(), &s), GPUSVC_OK);
  return s;
}

gpusvc_program_cache_sha1 Hash(uint32_t stage, const std::string& source) {
  gpusvc_program_cache_sha1 h{};
  EXPECT_EQ(gpusvc::ShaderHash(stage, source, &h), GPUSVC_OK);
  return h;
}

gpusvc_program_cache_sha1 Key(const gpusvc_program_cache_sha1& vs, const gpusvc_program_cache_sha1& fs) {
  gpusvc_program_cache_sha1 k{};
  EXPECT_EQ(gpusvc::ProgramKey(vs, fs, "", gpusvc::LinkOptions(), &k), GPUSVC_OK);
  return k;
}

gpusvc_program_cache_sha1 Filled(uint8_t n) {
  gpusvc_program_cache_sha1 k{};
  for (auto& b : k.bytes) b = n;
  return k;
}

gpusvc::CachedProgram Program(const gpusvc_program_cache_sha1& vs, const gpusvc_program_cache_sha1& fs,
                              uint8_t fill, size_t binary_len = 100) {
  gpusvc::CachedProgram p;
  p.vertex_shader = vs;
  p.fragment_shader = fs;
  p.binary_format = 0xB1;
  p.binary.assign(binary_len, fill);
  return p;
}

// Saves program n (vertex "vs n", fragment "fs n") with a binary of `len` bytes; returns its key.
gpusvc_program_cache_sha1 SaveNumbered(const gpusvc::ProgramCachePtr& cache, int n, size_t len = 100) {
  const gpusvc_program_cache_sha1 vs = Hash(kVertex, "vs " + std::to_string(n));
  const gpusvc_program_cache_sha1 fs = Hash(kFragment, "fs " + std::to_string(n));
  const gpusvc_program_cache_sha1 key = Key(vs, fs);
  EXPECT_EQ(gpusvc::SaveProgram(cache.get(), key, Program(vs, fs, uint8_t(n), len)), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  return key;
}

uint32_t LinkStatus(const gpusvc::ProgramCachePtr& cache, const gpusvc_program_cache_sha1& key) {
  uint32_t s = 99;
  EXPECT_EQ(gpusvc::CachedLinkStatus(cache.get(), key, &s), GPUSVC_OK);
  return s;
}

uint32_t CompileStatus(const gpusvc::ProgramCachePtr& cache, const gpusvc_program_cache_sha1& hash) {
  uint32_t s = 99;
  EXPECT_EQ(gpusvc::CachedCompileStatus(cache.get(), hash, &s), GPUSVC_OK);
  return s;
}

uint32_t Refcount(const gpusvc::ProgramCachePtr& cache, const gpusvc_program_cache_sha1& hash) {
  uint32_t n = 99;
  EXPECT_EQ(gpusvc::ShaderRefcount(cache.get(), hash, &n), GPUSVC_OK);
  return n;
}

// ---- GL-form managers ----

// A desktop-core context and a GL manager on it, or the test is skipped / failed.
#define OPEN_MANAGER_OR_SKIP(ctx, cache, manager)                                                \
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_DESKTOP_CORE, ctx);                                          \
  ASSERT_EQ(gpusvc::NewGlProgramManager(ctx.get(), cache.get(), kIdentity, &manager), GPUSVC_OK) \
      << gpusvc::LastErrorDetail()

gpusvc::ShaderPtr NewShader(const gpusvc::ProgramManagerPtr& m, uint32_t stage, const std::string& src) {
  gpusvc::ShaderPtr s;
  EXPECT_EQ(gpusvc::NewShader(m.get(), stage, src, &s), GPUSVC_OK) << gpusvc::LastErrorDetail();
  return s;
}

uint32_t CompileShader(const gpusvc::ProgramManagerPtr& m, const gpusvc::ShaderPtr& s) {
  uint32_t outcome = 99;
  EXPECT_EQ(gpusvc::Compile(m.get(), s.get(), &outcome), GPUSVC_OK) << gpusvc::LastErrorDetail();
  return outcome;
}

gpusvc::ShaderPtr Compiled(const gpusvc::ProgramManagerPtr& m, uint32_t stage, const std::string& src) {
  gpusvc::ShaderPtr s = NewShader(m, stage, src);
  CompileShader(m, s);
  return s;
}

gpusvc::LinkedProgramPtr LinkShaders(const gpusvc::ProgramManagerPtr& m,
                                     const std::vector<const gpusvc_program_manager_shader*>& shaders,
                                     const gpusvc::LinkOptions& options = gpusvc::LinkOptions()) {
  gpusvc::LinkedProgramPtr p;
  EXPECT_EQ(gpusvc::LinkProgram(m.get(), shaders, options, &p), GPUSVC_OK) << gpusvc::LastErrorDetail();
  return p;
}

uint32_t Origin(const gpusvc::LinkedProgramPtr& p) {
  uint32_t o = 99;
  EXPECT_EQ(gpusvc::LinkedProgramOrigin(p.get(), &o), GPUSVC_OK);
  return o;
}

uint32_t State(const gpusvc::ShaderPtr& s) {
  uint32_t state = 99;
  EXPECT_EQ(gpusvc::ShaderState(s.get(), &state), GPUSVC_OK);
  return state;
}

gpusvc_program_cache_sha1 CompiledHash(const gpusvc::ShaderPtr& s) {
  gpusvc_program_cache_sha1 h{};
  EXPECT_EQ(gpusvc_program_manager_shader_compiled_hash(s.get(), &h), GPUSVC_OK);
  return h;
}

gpusvc_program_cache_sha1 ManagerHash(uint32_t stage, const std::string& src,
                                      const std::string& options = std::string()) {
  gpusvc_program_cache_sha1 h{};
  EXPECT_EQ(gpusvc::BackendShaderHash(stage, src, kIdentity, &h, options), GPUSVC_OK);
  return h;
}

// Everything a linked program reflects, read through the wrappers.
struct Reflection {
  std::vector<gpusvc::ActiveVariable> attributes, uniforms, varyings, outputs;
  std::vector<gpusvc::Block> uniform_blocks, storage_blocks;
  std::vector<uint32_t> static_use;  // per uniform
  bool compute = false;
  std::array<uint32_t, 3> work_group{};

  static Reflection Of(const gpusvc::LinkedProgramPtr& p) {
    Reflection r;
    EXPECT_EQ(
        gpusvc::ReadActiveVariables(p.get(), GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE, &r.attributes),
        GPUSVC_OK);
    EXPECT_EQ(gpusvc::ReadActiveVariables(p.get(), GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM, &r.uniforms),
              GPUSVC_OK);
    EXPECT_EQ(gpusvc::ReadActiveVariables(p.get(), GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_VARYING, &r.varyings),
              GPUSVC_OK);
    EXPECT_EQ(gpusvc::ReadActiveVariables(p.get(), kOutputs, &r.outputs), GPUSVC_OK);
    EXPECT_EQ(gpusvc::ReadBlocks(p.get(), kUniformBlocks, &r.uniform_blocks), GPUSVC_OK);
    EXPECT_EQ(gpusvc::ReadBlocks(p.get(), kStorageBlocks, &r.storage_blocks), GPUSVC_OK);
    EXPECT_EQ(gpusvc::ReadUniformStaticUse(p.get(), &r.static_use), GPUSVC_OK);
    r.compute = gpusvc::LinkedProgramStages(p.get()) == (1u << kCompute);
    if (r.compute) {
      EXPECT_EQ(gpusvc::ComputeWorkGroupSize(p.get(), &r.work_group), GPUSVC_OK);
    }
    return r;
  }
  bool operator==(const Reflection& o) const {
    return attributes == o.attributes && uniforms == o.uniforms && varyings == o.varyings &&
           outputs == o.outputs && uniform_blocks == o.uniform_blocks &&
           storage_blocks == o.storage_blocks && static_use == o.static_use && compute == o.compute &&
           work_group == o.work_group;
  }
};

// ---- a host manager that forwards what the driver reported through the sink ----

// The host's GL, scripted: compiles and links hand out ids (a source holding "#error" fails with a
// log), binaries are "HOSTBIN <kind>", and the reflection it reports for a program is `graphics`
// or `compute` (set by the test from a GL-form link of the same shaders on the real driver),
// pushed through the wrappers. It records what the sink answered.
class ForwardingHost {
 public:
  Reflection graphics, compute;
  std::vector<gpusvc_result> misuse;      // the refused pushes of each program_interface call
  std::vector<gpusvc_result> pushes;      // every other push, in order
  std::vector<std::vector<uint8_t>> binaries_written, binaries_loaded;
  std::vector<uint64_t> linked;           // program ids, in order
  gpusvc_program_manager_host_sink* kept_sink = nullptr;
  int interface_calls = 0;

  gpusvc_program_manager_host_gl Gl() {
    gpusvc_program_manager_host_gl gl = gpusvc::Sized<gpusvc_program_manager_host_gl>();
    gl.user_data = this;
    gl.compile = &CompileCb;
    gl.link = &LinkCb;
    gl.link_stages = &LinkStagesCb;
    gl.program_binary = &BinaryCb;
    gl.load_binary = &LoadCb;
    gl.active_attributes = &AttributesCb;
    gl.active_uniforms = &UniformsCb;
    gl.program_interface = &InterfaceCb;
    return gl;
  }

 private:
  static ForwardingHost* Self(void* ud) { return static_cast<ForwardingHost*>(ud); }

  const Reflection& Of(uint64_t program) const { return compute_[program] ? compute : graphics; }

  uint64_t NewProgram(bool is_compute) {
    const uint64_t id = ++next_;
    compute_[id] = is_compute;
    linked.push_back(id);
    return id;
  }

  static bool CompileCb(void* ud, uint32_t, const char* source, size_t len, uint64_t* out,
                        gpusvc_program_manager_host_sink* log) {
    const std::string text(source, len);
    if (text.find("#error") != std::string::npos) {
      (void)gpusvc::HostSinkWriteText(log, "host: refused " + std::to_string(len) + " bytes");
      return false;
    }
    *out = ++Self(ud)->next_;
    return true;
  }
  static bool LinkCb(void* ud, uint64_t, uint64_t, const gpusvc_program_cache_link_options*, uint64_t* out,
                     gpusvc_program_manager_host_sink*) {
    *out = Self(ud)->NewProgram(false);
    return true;
  }
  static bool LinkStagesCb(void* ud, const uint64_t*, const uint32_t* stages, size_t count,
                           const gpusvc_program_cache_link_options*, bool, uint64_t* out,
                           gpusvc_program_manager_host_sink*) {
    *out = Self(ud)->NewProgram(count == 1 && stages[0] == kCompute);
    return true;
  }
  static bool BinaryCb(void* ud, uint64_t program, uint32_t* format, gpusvc_program_manager_host_sink* out) {
    ForwardingHost* h = Self(ud);
    const std::string text = h->compute_[program] ? "HOSTBIN compute" : "HOSTBIN graphics";
    std::vector<uint8_t> bytes(text.begin(), text.end());
    h->binaries_written.push_back(bytes);
    *format = 0x4B1;
    return gpusvc::HostSinkWriteBytes(out, bytes) == GPUSVC_OK;
  }
  static bool LoadCb(void* ud, uint32_t format, const uint8_t* bytes, size_t len, uint64_t* out,
                     gpusvc_program_manager_host_sink* log) {
    ForwardingHost* h = Self(ud);
    std::vector<uint8_t> blob(bytes, bytes + len);
    h->binaries_loaded.push_back(blob);
    const std::string text(blob.begin(), blob.end());
    if (format != 0x4B1 || text.rfind("HOSTBIN ", 0) != 0) {
      (void)gpusvc::HostSinkWriteText(log, "not a binary of this host");
      return false;
    }
    *out = h->NewProgram(text == "HOSTBIN compute");
    return true;
  }
  static void AttributesCb(void* ud, uint64_t program, gpusvc_program_manager_host_sink* out) {
    ForwardingHost* h = Self(ud);
    for (const auto& v : h->Of(program).attributes) h->pushes.push_back(gpusvc::HostSinkPushVariable(out, v));
  }
  static void UniformsCb(void* ud, uint64_t program, gpusvc_program_manager_host_sink* out) {
    ForwardingHost* h = Self(ud);
    for (const auto& v : h->Of(program).uniforms) h->pushes.push_back(gpusvc::HostSinkPushVariable(out, v));
  }
  static void InterfaceCb(void* ud, uint64_t program, gpusvc_program_manager_host_sink* out) {
    ForwardingHost* h = Self(ud);
    ++h->interface_calls;
    h->kept_sink = out;
    const Reflection& r = h->Of(program);
    // Refused, adding nothing: a member before any block, an unknown block kind, a name with a
    // NUL (caught by the wrapper), a mask bit of no stage.
    gpusvc::BlockMember member;
    member.name = "stray";
    gpusvc::Block unknown;
    unknown.name = "Unknown";
    gpusvc::ActiveVariable nul_name;
    nul_name.name = std::string("o_c\0lor", 7);
    gpusvc::Block no_stage;
    no_stage.name = "NoStage";
    no_stage.referenced_by = 1u << 9;
    h->misuse.push_back(gpusvc::HostSinkPushBlockMember(out, kStorageBlocks, member));
    h->misuse.push_back(gpusvc::HostSinkPushBlock(out, 7, unknown));
    h->misuse.push_back(gpusvc::HostSinkPushOutput(out, nul_name));
    h->misuse.push_back(gpusvc::HostSinkPushBlock(out, kUniformBlocks, no_stage));
    h->misuse.push_back(gpusvc::HostSinkSetUniformStaticUse(out, std::string("u\0x", 3), 1));
    for (const auto& v : r.outputs) h->pushes.push_back(gpusvc::HostSinkPushOutput(out, v));
    for (const auto& v : r.varyings) h->pushes.push_back(gpusvc::HostSinkPushVarying(out, v));
    for (const auto& b : r.uniform_blocks)
      h->pushes.push_back(gpusvc::HostSinkPushBlock(out, kUniformBlocks, b));
    for (const auto& b : r.storage_blocks)
      h->pushes.push_back(gpusvc::HostSinkPushBlock(out, kStorageBlocks, b));
    for (size_t i = 0; i < r.uniforms.size() && i < r.static_use.size(); ++i)
      h->pushes.push_back(gpusvc::HostSinkSetUniformStaticUse(out, r.uniforms[i].name, r.static_use[i]));
    if (r.compute) h->pushes.push_back(gpusvc::HostSinkSetComputeWorkGroupSize(out, r.work_group));
  }

  uint64_t next_ = 1000;
  mutable std::map<uint64_t, bool> compute_;
};

}  // namespace

// ================================ the program cache ================================

TEST(ProgramCacheWrappers, StatsConfigAndHistogramsReadBackWhatTheCacheDid) {
  gpusvc_program_cache_config config = Config(1 << 20);
  config.policy = GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_LRU;
  config.max_unreferenced_shader_statuses = 7;
  config.cache_transform_feedback = false;
  gpusvc::ProgramCachePtr cache;
  ASSERT_EQ(gpusvc::NewProgramCache(config, &cache), GPUSVC_OK) << gpusvc::LastErrorDetail();

  gpusvc_program_cache_config current{};
  ASSERT_EQ(gpusvc::ProgramCacheCurrentConfig(cache.get(), &current), GPUSVC_OK);
  EXPECT_EQ(current.struct_size, sizeof(current));
  EXPECT_EQ(current.budget_bytes, size_t(1) << 20);
  EXPECT_EQ(current.policy, uint32_t(GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_LRU));
  EXPECT_EQ(current.max_unreferenced_shader_statuses, 7u);
  EXPECT_FALSE(current.cache_transform_feedback);

  gpusvc_program_cache_stats_snapshot s = Stats(cache);
  EXPECT_EQ(s.struct_size, sizeof(s));
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.size_bytes, 0u);
  SaveNumbered(cache, 1, 100);
  SaveNumbered(cache, 2, 300);
  s = Stats(cache);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.counters.saves, 2u);
  EXPECT_GT(s.size_bytes, 400u);

  const std::vector<std::string> names = gpusvc::HistogramNames();
  EXPECT_EQ(names.size(), 7u);
  const std::string size_name = "GPU.ProgramCache.ProgramBinarySizeBytes";
  ASSERT_NE(std::find(names.begin(), names.end(), size_name), names.end());
  std::string name = "untouched";
  EXPECT_EQ(gpusvc::HistogramName(names.size(), &name), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(name, "untouched");
  EXPECT_EQ(gpusvc::HistogramName(0, nullptr), GPUSVC_NULL_ARGUMENT);
  ASSERT_EQ(gpusvc::HistogramName(0, &name), GPUSVC_OK);
  EXPECT_EQ(name, names[0]);

  gpusvc_program_cache_histogram_summary h{};
  ASSERT_EQ(gpusvc::HistogramSummary(cache.get(), size_name, &h), GPUSVC_OK);
  EXPECT_EQ(h.count, 2u);
  EXPECT_EQ(h.min, 100.0);
  EXPECT_EQ(h.max, 300.0);
  EXPECT_EQ(h.sum, 400.0);
  ASSERT_EQ(gpusvc::HistogramSummary(cache.get(), "GPU.ProgramCache.BinaryCacheHitTimeUs", &h), GPUSVC_OK);
  EXPECT_EQ(h.count, 0u) << "no load yet";

  // Errors leave the outputs alone.
  gpusvc_program_cache_histogram_summary kept{};
  kept.count = 77;
  EXPECT_EQ(gpusvc::HistogramSummary(cache.get(), "nope", &kept), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc::HistogramSummary(cache.get(), size_name + std::string(1, '\0'), &kept),
            GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc::HistogramSummary(nullptr, size_name, &kept), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(kept.count, 77u);
  gpusvc_program_cache_stats_snapshot stats_kept{};
  stats_kept.entries = 55;
  EXPECT_EQ(gpusvc::ProgramCacheStats(nullptr, &stats_kept), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(stats_kept.entries, 55u);
  EXPECT_EQ(gpusvc::ProgramCacheStats(cache.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  gpusvc_program_cache_config config_kept{};
  config_kept.budget_bytes = 5;
  EXPECT_EQ(gpusvc::ProgramCacheCurrentConfig(nullptr, &config_kept), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(config_kept.budget_bytes, 5u);
  EXPECT_EQ(gpusvc::ProgramCacheCurrentConfig(cache.get(), nullptr), GPUSVC_NULL_ARGUMENT);
}

TEST(ProgramCacheWrappers, StatusesRefcountsStagesEvictTrimPressureAndClear) {
  gpusvc::ProgramCachePtr cache = MakeCache(1 << 20);
  // A compile status marked by hand.
  const gpusvc_program_cache_sha1 loose = Hash(kVertex, "compiled, in no program");
  EXPECT_EQ(CompileStatus(cache, loose), GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_UNKNOWN);
  ASSERT_EQ(gpusvc::MarkShaderCompiled(cache.get(), loose), GPUSVC_OK);
  EXPECT_EQ(CompileStatus(cache, loose), GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_SUCCESS);
  EXPECT_EQ(CompileStatus(cache, Hash(kFragment, "compiled, in no program")),
            GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_UNKNOWN);

  // Two programs sharing a vertex shader.
  const gpusvc_program_cache_sha1 vs = Hash(kVertex, "shared vs"), fs1 = Hash(kFragment, "fs 1"),
                                  fs2 = Hash(kFragment, "fs 2");
  const gpusvc_program_cache_sha1 k1 = Key(vs, fs1), k2 = Key(vs, fs2);
  EXPECT_EQ(LinkStatus(cache, k1), GPUSVC_PROGRAM_CACHE_LINK_STATUS_UNKNOWN);
  ASSERT_EQ(gpusvc::SaveProgram(cache.get(), k1, Program(vs, fs1, 1)), GPUSVC_OK);
  EXPECT_EQ(Refcount(cache, vs), 1u);
  ASSERT_EQ(gpusvc::SaveProgram(cache.get(), k2, Program(vs, fs2, 2)), GPUSVC_OK);
  EXPECT_EQ(LinkStatus(cache, k1), GPUSVC_PROGRAM_CACHE_LINK_STATUS_SUCCESS);
  EXPECT_EQ(LinkStatus(cache, k2), GPUSVC_PROGRAM_CACHE_LINK_STATUS_SUCCESS);
  EXPECT_EQ(Refcount(cache, vs), 2u);
  EXPECT_EQ(Refcount(cache, fs1), 1u);
  EXPECT_EQ(CompileStatus(cache, fs1), GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_SUCCESS);

  // The stages of a cached program: both hashes set, or only the vertex one.
  gpusvc::CachedProgramPtr entry;
  ASSERT_EQ(gpusvc::PeekProgram(cache.get(), k1, &entry), GPUSVC_OK);
  uint32_t stages = 0;
  ASSERT_EQ(gpusvc::CachedProgramStages(entry.get(), &stages), GPUSVC_OK);
  EXPECT_EQ(stages, (1u << kVertex) | (1u << kFragment));
  const gpusvc_program_cache_sha1 vertex_only = Filled(0x42);
  ASSERT_EQ(gpusvc::SaveProgram(cache.get(), vertex_only, Program(vs, gpusvc_program_cache_sha1{}, 3)),
            GPUSVC_OK);
  gpusvc::CachedProgramPtr vo;
  ASSERT_EQ(gpusvc::PeekProgram(cache.get(), vertex_only, &vo), GPUSVC_OK);
  ASSERT_EQ(gpusvc::CachedProgramStages(vo.get(), &stages), GPUSVC_OK);
  EXPECT_EQ(stages, 1u << kVertex);
  uint32_t stages_kept = 77;
  EXPECT_EQ(gpusvc::CachedProgramStages(nullptr, &stages_kept), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::CachedProgramStages(vo.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(stages_kept, 77u);
  bool removed = false;
  ASSERT_EQ(gpusvc::EvictProgram(cache.get(), vertex_only, &removed), GPUSVC_OK);
  EXPECT_TRUE(removed);

  // Evict: there, then not.
  ASSERT_EQ(gpusvc::EvictProgram(cache.get(), k1, &removed), GPUSVC_OK);
  EXPECT_TRUE(removed);
  EXPECT_EQ(LinkStatus(cache, k1), GPUSVC_PROGRAM_CACHE_LINK_STATUS_UNKNOWN);
  EXPECT_EQ(Refcount(cache, vs), 1u) << "program 2 still uses it";
  EXPECT_EQ(Refcount(cache, fs1), 0u);
  removed = true;
  ASSERT_EQ(gpusvc::EvictProgram(cache.get(), k1, &removed), GPUSVC_OK);
  EXPECT_FALSE(removed);
  ASSERT_EQ(gpusvc::EvictProgram(cache.get(), k1), GPUSVC_OK) << "the flag is optional";
  removed = true;
  EXPECT_EQ(gpusvc::EvictProgram(nullptr, k2, &removed), GPUSVC_NULL_ARGUMENT);
  EXPECT_TRUE(removed) << "left alone on error";
  EXPECT_EQ(LinkStatus(cache, k2), GPUSVC_PROGRAM_CACHE_LINK_STATUS_SUCCESS);

  // Trim to nothing: what it freed is what was stored.
  const size_t before = Stats(cache).size_bytes;
  ASSERT_GT(before, 0u);
  size_t freed = 0;
  ASSERT_EQ(gpusvc::TrimProgramCache(cache.get(), 0, &freed), GPUSVC_OK);
  EXPECT_EQ(freed, before);
  EXPECT_EQ(Stats(cache).entries, 0u);
  EXPECT_EQ(LinkStatus(cache, k2), GPUSVC_PROGRAM_CACHE_LINK_STATUS_UNKNOWN);
  freed = 77;
  EXPECT_EQ(gpusvc::TrimProgramCache(nullptr, 0, &freed), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(freed, 77u);

  // Memory pressure: critical drops everything and refuses saves until none.
  SaveNumbered(cache, 5);
  SaveNumbered(cache, 6);
  const size_t stored = Stats(cache).size_bytes;
  ASSERT_EQ(gpusvc::SetMemoryPressure(cache.get(), GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_CRITICAL, &freed),
            GPUSVC_OK);
  EXPECT_EQ(freed, stored);
  EXPECT_EQ(Stats(cache).entries, 0u);
  const gpusvc_program_cache_sha1 v7 = Hash(kVertex, "vs 7"), f7 = Hash(kFragment, "fs 7");
  EXPECT_EQ(gpusvc::SaveProgram(cache.get(), Key(v7, f7), Program(v7, f7, 7)),
            GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE);
  freed = 77;
  EXPECT_EQ(gpusvc::SetMemoryPressure(cache.get(), 99, &freed), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(freed, 77u);
  ASSERT_EQ(gpusvc::SetMemoryPressure(cache.get(), GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_NONE), GPUSVC_OK);
  EXPECT_EQ(gpusvc::SaveProgram(cache.get(), Key(v7, f7), Program(v7, f7, 7)), GPUSVC_OK);

  // Clear: programs and statuses go, the counters stay.
  const uint64_t saves = Stats(cache).counters.saves;
  ASSERT_EQ(gpusvc::MarkShaderCompiled(cache.get(), loose), GPUSVC_OK);
  ASSERT_EQ(gpusvc::ClearProgramCache(cache.get()), GPUSVC_OK);
  EXPECT_EQ(Stats(cache).entries, 0u);
  EXPECT_EQ(Stats(cache).counters.saves, saves);
  EXPECT_EQ(LinkStatus(cache, Key(v7, f7)), GPUSVC_PROGRAM_CACHE_LINK_STATUS_UNKNOWN);
  EXPECT_EQ(CompileStatus(cache, loose), GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_UNKNOWN);
  EXPECT_EQ(gpusvc::ClearProgramCache(nullptr), GPUSVC_NULL_ARGUMENT);

  // Null handles and outputs of the status queries, outputs untouched.
  uint32_t status = 77;
  EXPECT_EQ(gpusvc::CachedLinkStatus(nullptr, k1, &status), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::CachedCompileStatus(nullptr, vs, &status), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::ShaderRefcount(nullptr, vs, &status), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(status, 77u);
  EXPECT_EQ(gpusvc::CachedLinkStatus(cache.get(), k1, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::CachedCompileStatus(cache.get(), vs, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::ShaderRefcount(cache.get(), vs, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::MarkShaderCompiled(nullptr, vs), GPUSVC_NULL_ARGUMENT);
}

TEST(ProgramCacheWrappers, DiskStatsFlushDiskAndMarkHotOnARealFolder) {
  gpusvc::ProgramCachePtr memory_only = MakeCache();
  gpusvc_program_cache_disk_stats_snapshot none{};
  ASSERT_EQ(gpusvc::ProgramCacheDiskStats(memory_only.get(), &none), GPUSVC_OK);
  EXPECT_FALSE(none.configured);
  EXPECT_EQ(none.writes, 0u);
  EXPECT_EQ(gpusvc::FlushDisk(memory_only.get()), GPUSVC_OK) << "a no-op without a store";
  EXPECT_EQ(gpusvc::MarkHot(memory_only.get(), {Filled(1)}), GPUSVC_OK) << "a no-op without a store";

  const gpusvc::DriverStrings driver{"Test vendor", "test renderer", "1.0", "OpenGL core profile"};
  TempDir dir;
  auto open = [&](size_t budget, gpusvc::ProgramCachePtr* cache) {
    gpusvc::DiskOptions disk = gpusvc::DiskOptions::Defaults();
    disk.dir = dir.path().string();
    disk.host_product = "cpp wrappers tests";
    disk.host_version = "1";
    disk.budget_bytes = 1 << 20;
    ASSERT_EQ(gpusvc::NewProgramCacheWithDisk(Config(budget), disk, driver, cache), GPUSVC_OK)
        << gpusvc::LastErrorDetail();
    gpusvc_program_cache_disk_load_report report{};
    ASSERT_EQ(gpusvc::WaitUntilLoaded(cache->get(), kWaitMs, &report), GPUSVC_OK);
  };
  // Three programs written; FlushDisk waits for the writes.
  std::vector<gpusvc_program_cache_sha1> keys;
  size_t one_entry = 0;
  {
    gpusvc::ProgramCachePtr cache;
    open(1 << 20, &cache);
    for (int n = 1; n <= 3; ++n) keys.push_back(SaveNumbered(cache, n, 300));
    ASSERT_EQ(gpusvc::FlushDisk(cache.get()), GPUSVC_OK);
    gpusvc_program_cache_disk_stats_snapshot s{};
    ASSERT_EQ(gpusvc::ProgramCacheDiskStats(cache.get(), &s), GPUSVC_OK);
    EXPECT_EQ(s.struct_size, sizeof(s));
    EXPECT_TRUE(s.configured);
    EXPECT_TRUE(s.enabled);
    EXPECT_TRUE(s.load_finished);
    EXPECT_EQ(s.writes, 3u) << "FlushDisk waited for every queued write";
    EXPECT_GT(s.bytes_written, 0u);
    EXPECT_EQ(s.loaded, 0u);
    one_entry = Stats(cache).size_bytes / 3;
  }
  // Reopened with memory for one program and a half: which one loads.
  auto loaded = [&]() {
    gpusvc::ProgramCachePtr cache;
    open(one_entry + one_entry / 2, &cache);
    std::vector<bool> present;
    for (const auto& k : keys)
      present.push_back(LinkStatus(cache, k) == GPUSVC_PROGRAM_CACHE_LINK_STATUS_SUCCESS);
    gpusvc_program_cache_disk_stats_snapshot s{};
    EXPECT_EQ(gpusvc::ProgramCacheDiskStats(cache.get(), &s), GPUSVC_OK);
    EXPECT_EQ(s.loaded, 1u);
    return present;
  };
  const std::vector<bool> by_default = loaded();
  ASSERT_EQ(std::count(by_default.begin(), by_default.end(), true), 1);
  // Mark another one hot: it loads first from then on.
  const size_t hot = by_default[0] ? 1 : 0;
  {
    gpusvc::ProgramCachePtr cache;
    open(1 << 20, &cache);
    ASSERT_EQ(gpusvc::MarkHot(cache.get(), {keys[hot]}), GPUSVC_OK);
    ASSERT_EQ(gpusvc::FlushDisk(cache.get()), GPUSVC_OK);
  }
  std::vector<bool> expected(3, false);
  expected[hot] = true;
  EXPECT_EQ(loaded(), expected) << "the hot program loads first";

  // Clear empties the store once FlushDisk returns: a reopened cache loads nothing.
  {
    gpusvc::ProgramCachePtr cache;
    open(1 << 20, &cache);
    EXPECT_EQ(Stats(cache).entries, 3u);
    ASSERT_EQ(gpusvc::ClearProgramCache(cache.get()), GPUSVC_OK);
    ASSERT_EQ(gpusvc::FlushDisk(cache.get()), GPUSVC_OK);
    gpusvc_program_cache_disk_stats_snapshot s{};
    ASSERT_EQ(gpusvc::ProgramCacheDiskStats(cache.get(), &s), GPUSVC_OK);
    EXPECT_EQ(s.store_drops, 1u);
  }
  {
    gpusvc::ProgramCachePtr cache;
    open(1 << 20, &cache);
    EXPECT_EQ(Stats(cache).entries, 0u);
  }

  gpusvc_program_cache_disk_stats_snapshot kept{};
  kept.writes = 77;
  EXPECT_EQ(gpusvc::ProgramCacheDiskStats(nullptr, &kept), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(kept.writes, 77u);
  EXPECT_EQ(gpusvc::ProgramCacheDiskStats(memory_only.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::FlushDisk(nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::MarkHot(nullptr, {Filled(1)}), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::MarkHot(memory_only.get(), {}), GPUSVC_OK);
}

namespace {

// A persistence sink that records entries and, from inside its first callback, what
// FlushPersist of its own cache answers there.
class FlushingSink : public gpusvc::PersistSink {
 public:
  std::atomic<const gpusvc_program_cache*> cache{nullptr};  // set once the cache exists

  void EntrySaved(const gpusvc_program_cache_sha1& key, const uint8_t* entry, size_t len) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const gpusvc_program_cache* c = cache.load();
    if (c != nullptr && inner_flush_ == GPUSVC_OK) inner_flush_ = gpusvc::FlushPersist(c);
    saved_.emplace_back(key, std::vector<uint8_t>(entry, entry + len));
  }
  std::vector<std::pair<gpusvc_program_cache_sha1, std::vector<uint8_t>>> Saved() {
    std::lock_guard<std::mutex> lock(mutex_);
    return saved_;
  }
  gpusvc_result InnerFlush() {
    std::lock_guard<std::mutex> lock(mutex_);
    return inner_flush_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<gpusvc_program_cache_sha1, std::vector<uint8_t>>> saved_;
  gpusvc_result inner_flush_ = GPUSVC_OK;
};

std::vector<gpusvc_program_cache_sha1> StoreOrder(const gpusvc::ProgramCacheStorePtr& store) {
  std::vector<gpusvc_program_cache_sha1> keys;
  EXPECT_EQ(gpusvc::ForEachStoreEntry(store.get(),
                                      [&](const gpusvc_program_cache_sha1& key, const uint8_t*, size_t) {
                                        keys.push_back(key);
                                        return true;
                                      }),
            GPUSVC_OK);
  return keys;
}

}  // namespace

TEST(ProgramCacheWrappers, FlushPersistHandsEverySaveToTheSinkAndStoreFlushWritesLastUses) {
  const gpusvc::DriverStrings driver{"Test vendor", "test renderer", "1.0", "OpenGL core profile"};
  gpusvc::StampFields fields;
  fields.host_product = "cpp wrappers tests";
  fields.host_version = "1";
  std::string stamp;
  ASSERT_EQ(gpusvc::StampText(driver, fields, &stamp), GPUSVC_OK);
  FlushingSink sink;
  std::vector<gpusvc_program_cache_sha1> keys;
  {
    gpusvc::ProgramCachePtr cache;
    ASSERT_EQ(gpusvc::NewPersistingProgramCache(Config(1 << 20), stamp, &sink, &cache), GPUSVC_OK)
        << gpusvc::LastErrorDetail();
    sink.cache = cache.get();
    for (int n = 1; n <= 3; ++n) keys.push_back(SaveNumbered(cache, n));
    ASSERT_EQ(gpusvc::FlushPersist(cache.get()), GPUSVC_OK);
    EXPECT_EQ(sink.Saved().size(), 3u) << "every save handed over once FlushPersist returned";
    EXPECT_EQ(sink.InnerFlush(), GPUSVC_HANDLE_BUSY) << "a flush from inside the sink's callback";
    sink.cache = nullptr;
  }
  gpusvc::ProgramCachePtr plain = MakeCache();
  EXPECT_EQ(gpusvc::FlushPersist(plain.get()), GPUSVC_OK) << "a no-op without a sink";
  EXPECT_EQ(gpusvc::FlushPersist(nullptr), GPUSVC_NULL_ARGUMENT);

  // The store: entries put, the oldest one touched and flushed; a second store of the folder
  // (which reads the last-use log, not the first store's memory) streams it first.
  TempDir dir;
  gpusvc::StoreOptions options = gpusvc::StoreOptions::Defaults();
  options.dir = dir.path().string();
  options.stamp = stamp;
  gpusvc::ProgramCacheStorePtr store;
  ASSERT_EQ(gpusvc::OpenProgramCacheStore(options, &store), GPUSVC_OK) << gpusvc::LastErrorDetail();
  for (const auto& e : sink.Saved()) {
    ASSERT_EQ(gpusvc::StorePut(store.get(), e.second.data(), e.second.size()), GPUSVC_OK);
  }
  ASSERT_EQ(StoreOrder(store).size(), 3u);
  const gpusvc_program_cache_sha1 last = StoreOrder(store).back();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a later last-use time
  ASSERT_EQ(gpusvc::StoreTouch(store.get(), last), GPUSVC_OK);
  ASSERT_EQ(gpusvc::StoreFlush(store.get()), GPUSVC_OK);
  gpusvc::ProgramCacheStorePtr second;
  ASSERT_EQ(gpusvc::OpenProgramCacheStore(options, &second), GPUSVC_OK) << gpusvc::LastErrorDetail();
  const std::vector<gpusvc_program_cache_sha1> order = StoreOrder(second);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order.front(), last) << "the flushed use made it the most recently used";
  gpusvc_program_cache_store_stats_snapshot s{};
  ASSERT_EQ(gpusvc::StoreStats(store.get(), &s), GPUSVC_OK);
  EXPECT_EQ(s.touches, 1u);
  EXPECT_EQ(gpusvc::StoreFlush(nullptr), GPUSVC_NULL_ARGUMENT);
}

// ================================ a GL program manager ================================

TEST(ProgramManagerWrappers, ShaderSourceOptionsStageStateAndCompileStatus) {
  gpusvc::GlContextPtr ctx, ctx2;
  gpusvc::ProgramCachePtr cache = MakeCache();
  gpusvc::ProgramManagerPtr m, m2;
  OPEN_MANAGER_OR_SKIP(ctx, cache, m);

  gpusvc::ShaderPtr vs = NewShader(m, kVertex, kVs);
  uint32_t stage = 99;
  ASSERT_EQ(gpusvc::ShaderStage(vs.get(), &stage), GPUSVC_OK);
  EXPECT_EQ(stage, kVertex);
  EXPECT_EQ(State(vs), GPUSVC_PROGRAM_MANAGER_SHADER_STATE_NOT_COMPILED);
  bool ok = true;
  ASSERT_EQ(gpusvc::ShaderCompileStatus(vs.get(), &ok), GPUSVC_OK);
  EXPECT_FALSE(ok);
  EXPECT_EQ(CompileShader(m, vs), GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED);
  EXPECT_EQ(State(vs), GPUSVC_PROGRAM_MANAGER_SHADER_STATE_COMPILED);
  ASSERT_EQ(gpusvc::ShaderCompileStatus(vs.get(), &ok), GPUSVC_OK);
  EXPECT_TRUE(ok);
  EXPECT_EQ(CompiledHash(vs), ManagerHash(kVertex, kVs));
  EXPECT_EQ(CompileStatus(cache, ManagerHash(kVertex, kVs)), GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_SUCCESS);

  // A new source and options: the next compile's hash covers both.
  const std::string variant = VsVariant(1);
  ASSERT_EQ(gpusvc::SetShaderSource(vs.get(), variant), GPUSVC_OK);
  ASSERT_EQ(gpusvc::SetShaderCompileOptions(vs.get(), "translator flags"), GPUSVC_OK);
  EXPECT_EQ(CompileShader(m, vs), GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED);
  EXPECT_EQ(CompiledHash(vs), ManagerHash(kVertex, variant, "translator flags"));
  EXPECT_NE(CompiledHash(vs), ManagerHash(kVertex, variant));
  ASSERT_EQ(gpusvc::SetShaderCompileOptions(vs.get(), ""), GPUSVC_OK);
  EXPECT_EQ(CompileShader(m, vs), GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED);
  EXPECT_EQ(CompiledHash(vs), ManagerHash(kVertex, variant));

  // A broken source: FAILED, and GL_COMPILE_STATUS false.
  ASSERT_EQ(gpusvc::SetShaderSource(vs.get(), "#version 450 core\nvoid main() { gl_Position = nope; }\n"),
            GPUSVC_OK);
  EXPECT_EQ(CompileShader(m, vs), GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED);
  EXPECT_EQ(State(vs), GPUSVC_PROGRAM_MANAGER_SHADER_STATE_FAILED);
  ASSERT_EQ(gpusvc::ShaderCompileStatus(vs.get(), &ok), GPUSVC_OK);
  EXPECT_FALSE(ok);
  EXPECT_NE(gpusvc::ShaderInfoLog(vs.get()), "");
  EXPECT_EQ(gpusvc::SetShaderSource(vs.get(), ""), GPUSVC_INVALID_ARGUMENT) << "the source must not be empty";

  // A shader marked compiled under the manager's hash is deferred by a manager on that cache.
  gpusvc::ProgramCachePtr fresh = MakeCache();
  const std::string marked = VsVariant(2);
  ASSERT_EQ(gpusvc::MarkShaderCompiled(fresh.get(), ManagerHash(kVertex, marked)), GPUSVC_OK);
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_DESKTOP_CORE, ctx2);
  ASSERT_EQ(gpusvc::NewGlProgramManager(ctx2.get(), fresh.get(), kIdentity, &m2), GPUSVC_OK);
  gpusvc::ShaderPtr deferred = NewShader(m2, kVertex, marked);
  EXPECT_EQ(CompileShader(m2, deferred), GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED);
  EXPECT_EQ(State(deferred), GPUSVC_PROGRAM_MANAGER_SHADER_STATE_DEFERRED);
  ASSERT_EQ(gpusvc::ShaderCompileStatus(deferred.get(), &ok), GPUSVC_OK);
  EXPECT_TRUE(ok) << "GL_COMPILE_STATUS reads true for a deferred shader";
  gpusvc::ShaderPtr unmarked = NewShader(m2, kVertex, VsVariant(3));
  EXPECT_EQ(CompileShader(m2, unmarked), GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED);

  // Errors: null handles and outputs, outputs untouched.
  stage = 77;
  uint32_t state = 77;
  ok = true;
  EXPECT_EQ(gpusvc::ShaderStage(nullptr, &stage), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::ShaderState(nullptr, &state), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::ShaderCompileStatus(nullptr, &ok), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(std::make_tuple(stage, state, ok), std::make_tuple(77u, 77u, true));
  EXPECT_EQ(gpusvc::ShaderStage(vs.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::ShaderState(vs.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::ShaderCompileStatus(vs.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::SetShaderSource(nullptr, kVs), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::SetShaderCompileOptions(nullptr, "x"), GPUSVC_NULL_ARGUMENT);
}

TEST(ProgramManagerWrappers, TranslatorQualifiersAndBlocksRoundTripAndComeBackFromTheCache) {
  gpusvc::GlContextPtr ctx, ctx2;
  gpusvc::ProgramCachePtr cache = MakeCache();
  gpusvc::ProgramManagerPtr m, m2;
  OPEN_MANAGER_OR_SKIP(ctx, cache, m);
  OPEN_MANAGER_OR_SKIP(ctx2, cache, m2);
  gpusvc::ShaderPtr fs = NewShader(m, kFragment, kFs);

  // Qualifiers need their variables.
  const gpusvc::VariableQualifiers q{0x8DF2, true};
  EXPECT_EQ(gpusvc::SetShaderVariableQualifiers(fs.get(), kOutputs, 0, q), GPUSVC_INVALID_ARGUMENT);
  gpusvc::Variable out{"o_color", "_uo_color", 0x8B52, 1, true, 0};
  gpusvc::Variable out2{"o_extra", "_uo_extra", 0x8B52, 1, true, 1};
  ASSERT_EQ(gpusvc::SetShaderVariableList(fs.get(), kOutputs, {out, out2}), GPUSVC_OK);
  std::vector<gpusvc::VariableQualifiers> qs;
  ASSERT_EQ(gpusvc::ReadShaderVariableQualifiers(fs.get(), kOutputs, &qs), GPUSVC_OK);
  EXPECT_EQ(qs, (std::vector<gpusvc::VariableQualifiers>{{0, false}, {0, false}})) << "the defaults";
  ASSERT_EQ(gpusvc::SetShaderVariableQualifiers(fs.get(), kOutputs, 0, q), GPUSVC_OK);
  gpusvc::VariableQualifiers got;
  ASSERT_EQ(gpusvc::ShaderVariableQualifiers(fs.get(), kOutputs, 0, &got), GPUSVC_OK);
  EXPECT_EQ(got, q);
  // The whole list: a wrong length sets nothing; the right one sets each.
  const std::vector<gpusvc::VariableQualifiers> both{{0x8DF1, false}, {0x8DF0, true}};
  const std::vector<gpusvc::VariableQualifiers> short_list{both[0]};
  EXPECT_EQ(gpusvc::SetShaderVariableQualifiers(fs.get(), kOutputs, short_list), GPUSVC_INVALID_ARGUMENT);
  ASSERT_EQ(gpusvc::ReadShaderVariableQualifiers(fs.get(), kOutputs, &qs), GPUSVC_OK);
  EXPECT_EQ(qs, (std::vector<gpusvc::VariableQualifiers>{q, {0, false}}));
  ASSERT_EQ(gpusvc::SetShaderVariableQualifiers(fs.get(), kOutputs, both), GPUSVC_OK);
  ASSERT_EQ(gpusvc::ReadShaderVariableQualifiers(fs.get(), kOutputs, &qs), GPUSVC_OK);
  EXPECT_EQ(qs, both);
  got = gpusvc::VariableQualifiers{77, true};
  EXPECT_EQ(gpusvc::ShaderVariableQualifiers(fs.get(), kOutputs, 2, &got), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc::ShaderVariableQualifiers(nullptr, kOutputs, 0, &got), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(got, (gpusvc::VariableQualifiers{77, true})) << "left alone on error";
  EXPECT_EQ(gpusvc::ShaderVariableQualifiers(fs.get(), kOutputs, 0, nullptr), GPUSVC_NULL_ARGUMENT);
  qs = {{5, true}};
  EXPECT_EQ(gpusvc::ReadShaderVariableQualifiers(fs.get(), 9, &qs), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(qs, (std::vector<gpusvc::VariableQualifiers>{{5, true}}));

  // Blocks: set with members, read back equal, the other kind empty.
  gpusvc::ShaderBlock params;
  params.name = "Params";
  params.mapped_name = "_uParams";
  params.binding = 2;
  params.data_size = 80;
  params.static_use = true;
  params.members = {{"p_offset", "_up_offset", 0x8B52, 1, true, 0}, {"p_m", "_up_m", 0x8B5C, 1, true, 16}};
  gpusvc::ShaderBlock lights = params;
  lights.name = "Lights";
  lights.mapped_name = "_uLights";
  lights.binding = 3;
  lights.static_use = false;
  lights.members.pop_back();
  const std::vector<gpusvc::ShaderBlock> blocks{params, lights};
  ASSERT_EQ(gpusvc::SetShaderBlocks(fs.get(), kUniformBlocks, blocks), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  size_t count = 99;
  ASSERT_EQ(gpusvc::ShaderBlockCount(fs.get(), kUniformBlocks, &count), GPUSVC_OK);
  EXPECT_EQ(count, 2u);
  ASSERT_EQ(gpusvc::ShaderBlockCount(fs.get(), kStorageBlocks, &count), GPUSVC_OK);
  EXPECT_EQ(count, 0u);
  std::vector<gpusvc::ShaderBlock> read;
  ASSERT_EQ(gpusvc::ReadShaderBlocks(fs.get(), kUniformBlocks, &read), GPUSVC_OK);
  EXPECT_EQ(read, blocks);
  gpusvc::ShaderBlock one;
  ASSERT_EQ(gpusvc::ReadShaderBlock(fs.get(), kUniformBlocks, 1, &one), GPUSVC_OK);
  EXPECT_EQ(one, lights);
  one.name = "kept";
  EXPECT_EQ(gpusvc::ReadShaderBlock(fs.get(), kUniformBlocks, 2, &one), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc::ReadShaderBlock(fs.get(), kUniformBlocks, 0, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(one.name, "kept");
  EXPECT_EQ(gpusvc::SetShaderBlocks(fs.get(), 2, blocks), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc::SetShaderBlocks(nullptr, kUniformBlocks, blocks), GPUSVC_NULL_ARGUMENT);
  count = 99;
  EXPECT_EQ(gpusvc::ShaderBlockCount(fs.get(), 2, &count), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(count, 99u);
  ASSERT_EQ(gpusvc::ReadShaderBlocks(fs.get(), kUniformBlocks, &read), GPUSVC_OK);
  EXPECT_EQ(read, blocks) << "refused calls changed nothing";
  // Replacing with fewer blocks replaces.
  ASSERT_EQ(gpusvc::SetShaderBlocks(fs.get(), kStorageBlocks, {lights}), GPUSVC_OK);
  ASSERT_EQ(gpusvc::ReadShaderBlocks(fs.get(), kStorageBlocks, &read), GPUSVC_OK);
  EXPECT_EQ(read, std::vector<gpusvc::ShaderBlock>{lights});
  ASSERT_EQ(gpusvc::SetShaderBlocks(fs.get(), kStorageBlocks, {}), GPUSVC_OK);
  ASSERT_EQ(gpusvc::ReadShaderBlocks(fs.get(), kStorageBlocks, &read), GPUSVC_OK);
  EXPECT_TRUE(read.empty());

  // Linked on the driver, then restored by a second manager's cache hit: blocks and qualifiers.
  gpusvc::ShaderPtr vs = Compiled(m, kVertex, kVs);
  EXPECT_EQ(CompileShader(m, fs), GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED);
  gpusvc::LinkedProgramPtr p = LinkShaders(m, {vs.get(), fs.get()});
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Origin(p), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
  gpusvc::ShaderPtr vs2 = NewShader(m2, kVertex, kVs), fs2 = NewShader(m2, kFragment, kFs);
  EXPECT_EQ(CompileShader(m2, vs2), GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED);
  EXPECT_EQ(CompileShader(m2, fs2), GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED);
  ASSERT_EQ(gpusvc::ShaderBlockCount(fs2.get(), kUniformBlocks, &count), GPUSVC_OK);
  EXPECT_EQ(count, 0u) << "nothing before the hit";
  gpusvc::LinkedProgramPtr hit = LinkShaders(m2, {vs2.get(), fs2.get()});
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(Origin(hit), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
  ASSERT_EQ(gpusvc::ReadShaderBlocks(fs2.get(), kUniformBlocks, &read), GPUSVC_OK);
  EXPECT_EQ(read, blocks) << "blocks restored";
  ASSERT_EQ(gpusvc::ReadShaderVariableQualifiers(fs2.get(), kOutputs, &qs), GPUSVC_OK);
  EXPECT_EQ(qs, both) << "qualifiers restored";
}

TEST(ProgramManagerWrappers, LinkedProgramKeyObjectOriginAndUniformStaticUse) {
  gpusvc::GlContextPtr ctx, ctx2;
  gpusvc::ProgramCachePtr cache = MakeCache();
  gpusvc::ProgramManagerPtr m, m2;
  OPEN_MANAGER_OR_SKIP(ctx, cache, m);
  OPEN_MANAGER_OR_SKIP(ctx2, cache, m2);
  gpusvc::ShaderPtr vs = Compiled(m, kVertex, kVs), fs = Compiled(m, kFragment, kFs);
  gpusvc::LinkOptions options;
  options.attribute_bindings = {{"a_position", 3}};
  gpusvc::LinkedProgramPtr p = LinkShaders(m, {vs.get(), fs.get()}, options);
  ASSERT_NE(p, nullptr);

  gpusvc_program_cache_sha1 key{};
  ASSERT_EQ(gpusvc::LinkedProgramKey(p.get(), &key), GPUSVC_OK);
  gpusvc_program_cache_sha1 expected{};
  ASSERT_EQ(gpusvc::ProgramKey(ManagerHash(kVertex, kVs), ManagerHash(kFragment, kFs), kIdentity, options,
                               &expected),
            GPUSVC_OK);
  EXPECT_EQ(key, expected);
  EXPECT_EQ(LinkStatus(cache, key), GPUSVC_PROGRAM_CACHE_LINK_STATUS_SUCCESS) << "saved under its key";
  gpusvc_program_cache_sha1 plain_key{};
  ASSERT_EQ(gpusvc::ProgramKey(ManagerHash(kVertex, kVs), ManagerHash(kFragment, kFs), kIdentity,
                               gpusvc::LinkOptions(), &plain_key),
            GPUSVC_OK);
  EXPECT_NE(key, plain_key) << "the bindings are part of the key";

  uint64_t object = 0;
  ASSERT_EQ(gpusvc::LinkedProgramObject(p.get(), &object), GPUSVC_OK);
  EXPECT_NE(object, 0u);
  gpusvc::LinkedProgramPtr other = LinkShaders(m, {vs.get(), fs.get()});
  uint64_t other_object = 0;
  ASSERT_EQ(gpusvc::LinkedProgramObject(other.get(), &other_object), GPUSVC_OK);
  EXPECT_NE(other_object, 0u);
  EXPECT_NE(other_object, object) << "each program has its own GL name";
  EXPECT_EQ(Origin(p), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);

  // The driver's static use: u_scale in the vertex shader, u_tint in the fragment shader.
  std::vector<gpusvc::ActiveVariable> uniforms;
  ASSERT_EQ(gpusvc::ReadActiveVariables(p.get(), GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM, &uniforms),
            GPUSVC_OK);
  std::vector<uint32_t> use;
  ASSERT_EQ(gpusvc::ReadUniformStaticUse(p.get(), &use), GPUSVC_OK);
  ASSERT_EQ(use.size(), uniforms.size());
  std::map<std::string, uint32_t> by_name;
  for (size_t i = 0; i < uniforms.size(); ++i) by_name[uniforms[i].name] = use[i];
  EXPECT_EQ(by_name["u_scale"], 1u << kVertex);
  EXPECT_EQ(by_name["u_tint"], 1u << kFragment);
  uint32_t one = 0;
  ASSERT_EQ(gpusvc::UniformStaticUse(p.get(), 0, &one), GPUSVC_OK);
  EXPECT_EQ(one, use[0]);
  one = 77;
  EXPECT_EQ(gpusvc::UniformStaticUse(p.get(), uniforms.size(), &one), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(one, 77u);

  // A second manager: a cache hit with the same key and static use, its own object.
  gpusvc::ShaderPtr vs2 = Compiled(m2, kVertex, kVs), fs2 = Compiled(m2, kFragment, kFs);
  gpusvc::LinkedProgramPtr hit = LinkShaders(m2, {vs2.get(), fs2.get()}, options);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(Origin(hit), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
  gpusvc_program_cache_sha1 hit_key{};
  ASSERT_EQ(gpusvc::LinkedProgramKey(hit.get(), &hit_key), GPUSVC_OK);
  EXPECT_EQ(hit_key, key);
  std::vector<uint32_t> hit_use;
  ASSERT_EQ(gpusvc::ReadUniformStaticUse(hit.get(), &hit_use), GPUSVC_OK);
  EXPECT_EQ(hit_use, use);

  // Errors leave the outputs alone.
  gpusvc_program_cache_sha1 key_kept = Filled(7);
  uint64_t object_kept = 77;
  uint32_t origin_kept = 77;
  std::vector<uint32_t> use_kept{7};
  EXPECT_EQ(gpusvc::LinkedProgramKey(nullptr, &key_kept), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::LinkedProgramObject(nullptr, &object_kept), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::LinkedProgramOrigin(nullptr, &origin_kept), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::UniformStaticUse(nullptr, 0, &origin_kept), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::ReadUniformStaticUse(nullptr, &use_kept), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(key_kept, Filled(7));
  EXPECT_EQ(std::make_pair(object_kept, origin_kept), std::make_pair(uint64_t(77), 77u));
  EXPECT_EQ(use_kept, std::vector<uint32_t>{7});
  EXPECT_EQ(gpusvc::LinkedProgramKey(p.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::LinkedProgramObject(p.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::LinkedProgramOrigin(p.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::UniformStaticUse(p.get(), 0, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::ReadUniformStaticUse(p.get(), nullptr), GPUSVC_NULL_ARGUMENT);
}

TEST(ProgramManagerWrappers, DeferredBinaryReadsAreCountedSavedAndForgotten) {
  gpusvc::GlContextPtr ctx, ctx2;
  gpusvc::ProgramCachePtr cache = MakeCache();
  gpusvc::ProgramManagerPtr m, other;
  OPEN_MANAGER_OR_SKIP(ctx, cache, m);
  OPEN_MANAGER_OR_SKIP(ctx2, cache, other);
  ASSERT_EQ(gpusvc::SetDeferBinaryReads(m.get(), true), GPUSVC_OK);
  gpusvc::ShaderPtr vs = Compiled(m, kVertex, kVs), fs = Compiled(m, kFragment, kFs);
  size_t n = 99, bytes = 99;
  ASSERT_EQ(gpusvc::DeferredBinaries(m.get(), &n), GPUSVC_OK);
  ASSERT_EQ(gpusvc::DeferredBytes(m.get(), &bytes), GPUSVC_OK);
  EXPECT_EQ(std::make_pair(n, bytes), std::make_pair(size_t(0), size_t(0)));

  gpusvc::LinkedProgramPtr p = LinkShaders(m, {vs.get(), fs.get()});
  ASSERT_NE(p, nullptr);
  bool deferred = false;
  ASSERT_EQ(gpusvc::LinkedProgramBinaryDeferred(p.get(), &deferred), GPUSVC_OK);
  EXPECT_TRUE(deferred);
  ASSERT_EQ(gpusvc::DeferredBinaries(m.get(), &n), GPUSVC_OK);
  EXPECT_EQ(n, 1u);
  ASSERT_EQ(gpusvc::DeferredBytes(m.get(), &bytes), GPUSVC_OK);
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(Stats(cache).entries, 0u) << "nothing read yet";
  // Another manager's program is refused, nothing dropped.
  bool forgot = true;
  EXPECT_EQ(gpusvc::ForgetDeferredBinary(other.get(), p.get(), &forgot), GPUSVC_INVALID_ARGUMENT);
  EXPECT_TRUE(forgot) << "left alone on error";
  ASSERT_EQ(gpusvc::DeferredBinaries(m.get(), &n), GPUSVC_OK);
  EXPECT_EQ(n, 1u);

  bool saved = false;
  ASSERT_EQ(gpusvc::SaveDeferredBinary(m.get(), p.get(), &saved), GPUSVC_OK);
  EXPECT_TRUE(saved);
  ASSERT_EQ(gpusvc::LinkedProgramBinaryDeferred(p.get(), &deferred), GPUSVC_OK);
  EXPECT_FALSE(deferred);
  ASSERT_EQ(gpusvc::DeferredBinaries(m.get(), &n), GPUSVC_OK);
  ASSERT_EQ(gpusvc::DeferredBytes(m.get(), &bytes), GPUSVC_OK);
  EXPECT_EQ(std::make_pair(n, bytes), std::make_pair(size_t(0), size_t(0)));
  EXPECT_EQ(Stats(cache).entries, 1u);
  ASSERT_EQ(gpusvc::ForgetDeferredBinary(m.get(), p.get(), &forgot), GPUSVC_OK);
  EXPECT_FALSE(forgot) << "nothing left to forget";

  // A second program's read forgotten: nothing saved, nothing waiting.
  gpusvc::ShaderPtr vs2 = Compiled(m, kVertex, VsVariant(7));
  gpusvc::LinkedProgramPtr q = LinkShaders(m, {vs2.get(), fs.get()});
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(gpusvc::DeferredBinaries(m.get(), &n), GPUSVC_OK);
  EXPECT_EQ(n, 1u);
  ASSERT_EQ(gpusvc::ForgetDeferredBinary(m.get(), q.get(), &forgot), GPUSVC_OK);
  EXPECT_TRUE(forgot);
  ASSERT_EQ(gpusvc::LinkedProgramBinaryDeferred(q.get(), &deferred), GPUSVC_OK);
  EXPECT_FALSE(deferred);
  ASSERT_EQ(gpusvc::DeferredBinaries(m.get(), &n), GPUSVC_OK);
  EXPECT_EQ(n, 0u);
  ASSERT_EQ(gpusvc::SaveDeferredBinary(m.get(), q.get(), &saved), GPUSVC_OK);
  EXPECT_FALSE(saved);
  EXPECT_EQ(Stats(cache).entries, 1u) << "the forgotten program was not saved";
  ASSERT_EQ(gpusvc::ForgetDeferredBinary(m.get(), q.get()), GPUSVC_OK) << "the flag is optional";

  n = 77;
  bytes = 77;
  deferred = true;
  EXPECT_EQ(gpusvc::DeferredBinaries(nullptr, &n), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::DeferredBytes(nullptr, &bytes), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::LinkedProgramBinaryDeferred(nullptr, &deferred), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::ForgetDeferredBinary(m.get(), nullptr, &forgot), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(std::make_tuple(n, bytes, deferred), std::make_tuple(size_t(77), size_t(77), true));
  EXPECT_EQ(gpusvc::DeferredBinaries(m.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::DeferredBytes(m.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::LinkedProgramBinaryDeferred(p.get(), nullptr), GPUSVC_NULL_ARGUMENT);
}

// ================================ a host program manager ================================

TEST(HostSinkWrappers, WhatTheHostPushesIsWhatItsLinkedProgramsReportAndTheCacheKeeps) {
  // The reflection the host forwards: a GL-form link of the same shaders on the real driver.
  gpusvc::GlContextPtr ctx;
  gpusvc::ProgramCachePtr gl_cache = MakeCache();
  gpusvc::ProgramManagerPtr gl;
  OPEN_MANAGER_OR_SKIP(ctx, gl_cache, gl);
  gpusvc::LinkOptions options;
  options.transform_feedback_varyings = {"v_color"};
  ForwardingHost host;
  {
    gpusvc::ShaderPtr vs = Compiled(gl, kVertex, kVs), fs = Compiled(gl, kFragment, kFs);
    gpusvc::ShaderPtr cs = Compiled(gl, kCompute, kCs);
    gpusvc::LinkedProgramPtr graphics = LinkShaders(gl, {vs.get(), fs.get()}, options);
    gpusvc::LinkedProgramPtr compute = LinkShaders(gl, {cs.get()});
    ASSERT_NE(graphics, nullptr);
    ASSERT_NE(compute, nullptr);
    host.graphics = Reflection::Of(graphics);
    host.compute = Reflection::Of(compute);
  }
  // What the driver reported (so the comparisons below compare something).
  ASSERT_EQ(host.graphics.attributes.size(), 2u);
  ASSERT_GE(host.graphics.uniforms.size(), 2u);  // with the block's members
  ASSERT_EQ(host.graphics.outputs.size(), 1u);
  EXPECT_EQ(host.graphics.outputs[0].name, "o_color");
  ASSERT_EQ(host.graphics.varyings.size(), 1u);
  EXPECT_EQ(host.graphics.varyings[0].name, "v_color");
  ASSERT_EQ(host.graphics.uniform_blocks.size(), 1u);
  EXPECT_EQ(host.graphics.uniform_blocks[0].name, "Params");
  EXPECT_EQ(host.graphics.uniform_blocks[0].members.size(), 2u);
  ASSERT_EQ(host.compute.storage_blocks.size(), 1u);
  EXPECT_EQ(host.compute.work_group, (std::array<uint32_t, 3>{8, 2, 1}));

  gpusvc::ProgramCachePtr cache = MakeCache();
  const std::string identity = "forwarding host";
  gpusvc::ProgramManagerPtr m;
  ASSERT_EQ(gpusvc::NewHostProgramManager(host.Gl(), cache.get(), identity, &m), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  gpusvc::ShaderPtr vs = Compiled(m, kVertex, kVs), fs = Compiled(m, kFragment, kFs);
  gpusvc::ShaderPtr cs = Compiled(m, kCompute, kCs);
  EXPECT_EQ(State(vs), GPUSVC_PROGRAM_MANAGER_SHADER_STATE_COMPILED);
  gpusvc::LinkedProgramPtr graphics = LinkShaders(m, {vs.get(), fs.get()}, options);
  ASSERT_NE(graphics, nullptr);
  gpusvc::LinkedProgramPtr compute = LinkShaders(m, {cs.get()});
  ASSERT_NE(compute, nullptr);
  EXPECT_EQ(Origin(graphics), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
  EXPECT_EQ(host.interface_calls, 2);

  // The sink refused the misuse (nothing added), took everything else.
  ASSERT_EQ(host.misuse.size(), 10u);
  for (size_t i = 0; i < host.misuse.size(); ++i) EXPECT_EQ(host.misuse[i], GPUSVC_INVALID_ARGUMENT) << i;
  ASSERT_FALSE(host.pushes.empty());
  for (size_t i = 0; i < host.pushes.size(); ++i) EXPECT_EQ(host.pushes[i], GPUSVC_OK) << i;
  // The linked programs report exactly what the host pushed.
  const Reflection got_graphics = Reflection::Of(graphics), got_compute = Reflection::Of(compute);
  EXPECT_EQ(got_graphics.attributes, host.graphics.attributes);
  EXPECT_EQ(got_graphics.uniforms, host.graphics.uniforms);
  EXPECT_EQ(got_graphics.outputs, host.graphics.outputs);
  EXPECT_EQ(got_graphics.varyings, host.graphics.varyings);
  EXPECT_EQ(got_graphics.uniform_blocks, host.graphics.uniform_blocks);
  EXPECT_EQ(got_graphics.static_use, host.graphics.static_use);
  EXPECT_TRUE(got_graphics == host.graphics);
  EXPECT_TRUE(got_compute == host.compute);
  EXPECT_EQ(got_compute.work_group, (std::array<uint32_t, 3>{8, 2, 1}));
  // Object, key and binary: the host's id, the key of the host's identity, the host's bytes.
  uint64_t object = 0;
  ASSERT_EQ(gpusvc::LinkedProgramObject(graphics.get(), &object), GPUSVC_OK);
  ASSERT_GE(host.linked.size(), 1u);
  EXPECT_EQ(object, host.linked[0]);
  gpusvc_program_cache_sha1 key{}, expected{}, vs_hash{}, fs_hash{};
  ASSERT_EQ(gpusvc::LinkedProgramKey(graphics.get(), &key), GPUSVC_OK);
  ASSERT_EQ(gpusvc::BackendShaderHash(kVertex, kVs, identity, &vs_hash), GPUSVC_OK);
  ASSERT_EQ(gpusvc::BackendShaderHash(kFragment, kFs, identity, &fs_hash), GPUSVC_OK);
  ASSERT_EQ(gpusvc::ProgramKey(vs_hash, fs_hash, identity, options, &expected), GPUSVC_OK);
  EXPECT_EQ(key, expected);
  gpusvc::CachedProgramPtr entry;
  ASSERT_EQ(gpusvc::PeekProgram(cache.get(), key, &entry), GPUSVC_OK);
  gpusvc::CachedProgram copy;
  ASSERT_EQ(gpusvc::ReadCachedProgram(entry.get(), &copy), GPUSVC_OK);
  const std::string text = "HOSTBIN graphics";
  EXPECT_EQ(copy.binary, std::vector<uint8_t>(text.begin(), text.end()));
  EXPECT_EQ(copy.binary_format, 0x4B1u);

  // The sink is dead once its callback returned.
  ASSERT_NE(host.kept_sink, nullptr);
  EXPECT_EQ(gpusvc::HostSinkSetComputeWorkGroupSize(host.kept_sink, {1, 1, 1}), GPUSVC_INVALID_HANDLE);
  EXPECT_EQ(gpusvc::HostSinkWriteText(host.kept_sink, "late"), GPUSVC_INVALID_HANDLE);
  EXPECT_EQ(gpusvc::HostSinkWriteBytes(nullptr, std::vector<uint8_t>{1}), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::HostSinkPushVariable(nullptr, host.graphics.attributes[0]), GPUSVC_NULL_ARGUMENT);

  // A compile the host refuses: its log through HostSinkWriteText, the shader FAILED.
  const std::string broken = "#version 450 core\n#error nope\nvoid main() {}\n";
  gpusvc::ShaderPtr bad = NewShader(m, kVertex, broken);
  EXPECT_EQ(CompileShader(m, bad), GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED);
  EXPECT_EQ(gpusvc::ShaderInfoLog(bad.get()), "host: refused " + std::to_string(broken.size()) + " bytes");
  EXPECT_EQ(State(bad), GPUSVC_PROGRAM_MANAGER_SHADER_STATE_FAILED);

  // A second host manager on the cache: cache hits loading the host's bytes, reflected again
  // through the sink, the same as before.
  gpusvc::ProgramManagerPtr m2;
  ASSERT_EQ(gpusvc::NewHostProgramManager(host.Gl(), cache.get(), identity, &m2), GPUSVC_OK);
  gpusvc::ShaderPtr vs2 = Compiled(m2, kVertex, kVs), fs2 = Compiled(m2, kFragment, kFs);
  gpusvc::ShaderPtr cs2 = Compiled(m2, kCompute, kCs);
  gpusvc::LinkedProgramPtr graphics2 = LinkShaders(m2, {vs2.get(), fs2.get()}, options);
  gpusvc::LinkedProgramPtr compute2 = LinkShaders(m2, {cs2.get()});
  ASSERT_NE(graphics2, nullptr);
  ASSERT_NE(compute2, nullptr);
  EXPECT_EQ(Origin(graphics2), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
  EXPECT_EQ(Origin(compute2), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
  ASSERT_EQ(host.binaries_loaded.size(), 2u);
  EXPECT_EQ(host.binaries_loaded[0], std::vector<uint8_t>(text.begin(), text.end()));
  EXPECT_TRUE(Reflection::Of(graphics2) == host.graphics);
  EXPECT_TRUE(Reflection::Of(compute2) == host.compute);
  uint64_t object2 = 0;
  ASSERT_EQ(gpusvc::LinkedProgramObject(graphics2.get(), &object2), GPUSVC_OK);
  EXPECT_EQ(object2, host.linked[host.linked.size() - 2]) << "the id load_binary handed out";
}
