// Issue 16 through gpusvc.hpp on the machine's driver (desktop GL core; skipped without one
// unless GPUSVC_REQUIRE_GL is set): started links polled to completion give what synchronous
// links give, a compute program linked through LinkProgram is restored by a second manager on
// the same cache, failed compiles and links come back from a second manager with the driver's
// exact logs and without the driver, and the transform-feedback switch keeps such programs out.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gl_support.h"
#include "gpusvc.hpp"

namespace {

constexpr uint32_t kVertex = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX;
constexpr uint32_t kFragment = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT;
constexpr uint32_t kCompute = GPUSVC_PROGRAM_CACHE_SHADER_STAGE_COMPUTE;

const char kFs[] =
    "#version 450 core\nin vec4 v_color;\nuniform vec4 u_tint;\nlayout(location = 0) out vec4 o_color;\n"
    "layout(std140, binding = 2) uniform Params { vec4 p_offset; };\n"
    "void main() { o_color = v_color * u_tint + p_offset; }\n";
const char kCs[] =
    "#version 450 core\nlayout(local_size_x = 8, local_size_y = 1) in;\n"
    "layout(std430, binding = 1) buffer Data { uint values[]; };\n"
    "void main() { values[gl_GlobalInvocationID.x] *= 2u; }\n";
// Links with kFs fails: v_color is an ivec2 here, a vec4 there.
const char kBadLinkVs[] =
    "#version 450 core\nout ivec2 v_color;\nvoid main() { v_color = ivec2(1); gl_Position = vec4(0.0); }\n";
const char kBrokenVs[] = "#version 450 core\nvoid main() { gl_Position = not_declared; }\n";

std::string Vs(int i) {
  return "#version 450 core\nin vec4 a_position;\nuniform float u_scale;\nout vec4 v_color;\n"
         "void main() { v_color = vec4(u_scale * " +
         std::to_string(i + 1) + ".0); gl_Position = a_position * u_scale; }\n";
}

gpusvc::ProgramCachePtr MakeCache(bool cache_transform_feedback = true) {
  gpusvc_program_cache_config config = gpusvc::Sized<gpusvc_program_cache_config>();
  EXPECT_EQ(gpusvc::ProgramCacheDefaults(GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP, &config), GPUSVC_OK);
  EXPECT_TRUE(config.cache_transform_feedback) << "on by default";
  config.budget_bytes = 16 << 20;
  config.cache_transform_feedback = cache_transform_feedback;
  gpusvc::ProgramCachePtr cache;
  EXPECT_EQ(gpusvc::NewProgramCache(config, &cache), GPUSVC_OK) << gpusvc::LastErrorDetail();
  return cache;
}

gpusvc_program_cache_stats_snapshot Stats(const gpusvc::ProgramCachePtr& cache) {
  gpusvc_program_cache_stats_snapshot s = gpusvc::Sized<gpusvc_program_cache_stats_snapshot>();
  EXPECT_EQ(gpusvc_program_cache_stats(cache.get(), &s), GPUSVC_OK);
  return s;
}

// A desktop-core context and a manager on it, or the test is skipped / failed.
#define OPEN_MANAGER_OR_SKIP(ctx, cache, manager)                                                     \
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_DESKTOP_CORE, ctx);                                               \
  ASSERT_EQ(gpusvc::NewGlProgramManager(ctx.get(), cache.get(), "issue16", &manager), GPUSVC_OK) \
      << gpusvc::LastErrorDetail()

gpusvc::ShaderPtr Shader(const gpusvc::ProgramManagerPtr& m, uint32_t stage, const std::string& src,
                         uint32_t* outcome, bool start = false) {
  gpusvc::ShaderPtr s;
  EXPECT_EQ(gpusvc::NewShader(m.get(), stage, src, &s), GPUSVC_OK);
  EXPECT_EQ(start ? gpusvc::StartCompile(m.get(), s.get(), outcome) : gpusvc::Compile(m.get(), s.get(), outcome),
            GPUSVC_OK);
  return s;
}

uint32_t Origin(const gpusvc::LinkedProgramPtr& p) {
  uint32_t o = 99;
  EXPECT_EQ(gpusvc_program_manager_linked_program_origin(p.get(), &o), GPUSVC_OK);
  return o;
}

// Everything the ABI reflects about a program but its object and origin, as text.
std::string Reflection(const gpusvc::LinkedProgramPtr& p) {
  std::string out = "stages " + std::to_string(gpusvc::LinkedProgramStages(p.get()));
  for (uint32_t kind : {GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM,
                        GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_VARYING, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_OUTPUT}) {
    std::vector<gpusvc::ActiveVariable> vars;
    EXPECT_EQ(gpusvc::ReadActiveVariables(p.get(), kind, &vars), GPUSVC_OK);
    for (const auto& v : vars)
      out += " | " + v.name + " " + std::to_string(v.gl_type) + " " + std::to_string(v.size) + " " +
             std::to_string(v.location) + " " + std::to_string(v.location_index);
  }
  for (uint32_t kind : {GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_UNIFORM, GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_STORAGE}) {
    std::vector<gpusvc::Block> blocks;
    EXPECT_EQ(gpusvc::ReadBlocks(p.get(), kind, &blocks), GPUSVC_OK);
    for (const auto& b : blocks) {
      out += " | block " + b.name + " " + std::to_string(b.binding) + " " + std::to_string(b.data_size) + " " +
             std::to_string(b.referenced_by);
      for (const auto& m : b.members)
        out += " " + m.name + "@" + std::to_string(m.offset) + "/" + std::to_string(m.array_stride);
    }
  }
  return out;
}

struct Result {
  gpusvc_result code = GPUSVC_OK;
  std::string text;  // the reflection, or the error detail (the driver's log)
  bool operator==(const Result& o) const { return code == o.code && text == o.text; }
};

}  // namespace

TEST(ProgramManagerParallel, StartedLinksPolledToCompletionMatchSynchronousLinks) {
  gpusvc::GlContextPtr ctx_sync, ctx_par;
  gpusvc::ProgramCachePtr cache_sync = MakeCache(), cache_par = MakeCache();
  gpusvc::ProgramManagerPtr sync, par;
  OPEN_MANAGER_OR_SKIP(ctx_sync, cache_sync, sync);
  OPEN_MANAGER_OR_SKIP(ctx_par, cache_par, par);
  constexpr int kPrograms = 16;
  auto source = [](int i) { return i % 5 == 3 ? std::string(kBadLinkVs) : Vs(i); };

  std::vector<Result> expected;
  for (int i = 0; i < kPrograms; ++i) {
    uint32_t o = 0;
    gpusvc::ShaderPtr vs = Shader(sync, kVertex, source(i), &o);
    gpusvc::ShaderPtr fs = Shader(sync, kFragment, kFs, &o);
    gpusvc::LinkedProgramPtr p;
    gpusvc_result r = gpusvc::LinkProgram(sync.get(), {fs.get(), vs.get()}, gpusvc::LinkOptions(), &p);
    expected.push_back({r, r == GPUSVC_OK ? Reflection(p) : gpusvc::LastErrorDetail()});
  }

  // Start every compile, then every link; then poll until all are done.
  std::vector<gpusvc::ShaderPtr> shaders;
  std::vector<gpusvc::PendingLinkPtr> pending(kPrograms);
  std::vector<Result> got(kPrograms);
  std::vector<bool> done(kPrograms, false);
  for (int i = 0; i < kPrograms; ++i) {
    uint32_t o1 = 0, o2 = 0;
    shaders.push_back(Shader(par, kVertex, source(i), &o1, true));
    shaders.push_back(Shader(par, kFragment, kFs, &o2, true));
    EXPECT_EQ(o1, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_PENDING);
  }
  for (int i = 0; i < kPrograms; ++i) {
    gpusvc_result r = gpusvc::StartLink(par.get(), {shaders[2 * i].get(), shaders[2 * i + 1].get()},
                                        gpusvc::LinkOptions(), &pending[i]);
    if (r != GPUSVC_OK) {
      got[i] = {r, gpusvc::LastErrorDetail()};
      done[i] = true;
    }
  }
  for (int round = 0; round < 100000; ++round) {
    bool all = true;
    for (int i = 0; i < kPrograms; ++i) {
      if (done[i]) continue;
      bool ready = false;
      ASSERT_EQ(gpusvc::LinkReady(par.get(), pending[i], &ready), GPUSVC_OK);
      if (!ready) {
        all = false;
        continue;
      }
      gpusvc::LinkedProgramPtr p;
      gpusvc_result r = gpusvc::FinishLink(par.get(), &pending[i], &p);
      EXPECT_EQ(pending[i], nullptr) << "consumed";
      got[i] = {r, r == GPUSVC_OK ? Reflection(p) : gpusvc::LastErrorDetail()};
      done[i] = true;
    }
    if (all) break;
  }
  int failures = 0;
  for (int i = 0; i < kPrograms; ++i) {
    ASSERT_TRUE(done[i]) << i;
    EXPECT_EQ(got[i].code, expected[i].code) << i;
    EXPECT_EQ(got[i].text, expected[i].text) << i;
    failures += expected[i].code != GPUSVC_OK;
  }
  EXPECT_EQ(failures, 3);
  EXPECT_NE(expected[0].text.find("block Params 2"), std::string::npos) << expected[0].text;
  EXPECT_NE(expected[0].text.find("o_color"), std::string::npos) << expected[0].text;
}

TEST(ProgramManagerParallel, AComputeProgramLinkedThroughLinkProgramIsRestoredByASecondManager) {
  gpusvc::GlContextPtr ctx, ctx2;
  gpusvc::ProgramCachePtr cache = MakeCache();
  gpusvc::ProgramManagerPtr cold, warm;
  OPEN_MANAGER_OR_SKIP(ctx, cache, cold);
  OPEN_MANAGER_OR_SKIP(ctx2, cache, warm);
  uint32_t o = 0;
  gpusvc::ShaderPtr cs = Shader(cold, kCompute, kCs, &o);
  EXPECT_EQ(o, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_COMPILED);
  gpusvc::LinkedProgramPtr p;
  ASSERT_EQ(gpusvc::LinkProgram(cold.get(), {cs.get()}, gpusvc::LinkOptions(), &p), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  EXPECT_EQ(Origin(p), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
  EXPECT_EQ(gpusvc::LinkedProgramStages(p.get()), 1u << kCompute);
  std::array<uint32_t, 3> size{};
  ASSERT_EQ(gpusvc::ComputeWorkGroupSize(p.get(), &size), GPUSVC_OK);
  EXPECT_EQ(size, (std::array<uint32_t, 3>{8, 1, 1}));
  std::vector<gpusvc::Block> storage;
  ASSERT_EQ(gpusvc::ReadBlocks(p.get(), GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_STORAGE, &storage), GPUSVC_OK);
  ASSERT_EQ(storage.size(), 1u);
  EXPECT_EQ(storage[0].name, "Data");
  EXPECT_EQ(storage[0].binding, 1);

  gpusvc::ShaderPtr cs2 = Shader(warm, kCompute, kCs, &o);
  EXPECT_EQ(o, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED);
  gpusvc::LinkedProgramPtr hit;
  ASSERT_EQ(gpusvc::LinkProgram(warm.get(), {cs2.get()}, gpusvc::LinkOptions(), &hit), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  EXPECT_EQ(Origin(hit), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
  EXPECT_EQ(Reflection(hit), Reflection(p));
  std::array<uint32_t, 3> size2{};
  ASSERT_EQ(gpusvc::ComputeWorkGroupSize(hit.get(), &size2), GPUSVC_OK);
  EXPECT_EQ(size2, size);
  EXPECT_EQ(Stats(cache).counters.hits, 1u);
}

TEST(ProgramManagerParallel, FailedCompilesAndLinksComeBackByteIdenticalWithoutTheDriver) {
  gpusvc::GlContextPtr ctx, ctx2;
  gpusvc::ProgramCachePtr cache = MakeCache();
  gpusvc::ProgramManagerPtr cold, warm;
  OPEN_MANAGER_OR_SKIP(ctx, cache, cold);
  OPEN_MANAGER_OR_SKIP(ctx2, cache, warm);
  uint32_t o = 0;
  gpusvc::ShaderPtr broken = Shader(cold, kVertex, kBrokenVs, &o);
  EXPECT_EQ(o, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED);
  const std::string compile_log = gpusvc::ShaderInfoLog(broken.get());
  EXPECT_FALSE(compile_log.empty());
  gpusvc::ShaderPtr vs = Shader(cold, kVertex, kBadLinkVs, &o);
  gpusvc::ShaderPtr fs = Shader(cold, kFragment, kFs, &o);
  gpusvc::LinkedProgramPtr p;
  ASSERT_EQ(gpusvc::LinkProgram(cold.get(), {vs.get(), fs.get()}, gpusvc::LinkOptions(), &p),
            GPUSVC_PROGRAM_CACHE_LINK_FAILED);
  const std::string link_log = gpusvc::LastErrorDetail();

  gpusvc::ShaderPtr broken2 = Shader(warm, kVertex, kBrokenVs, &o);
  EXPECT_EQ(o, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_KNOWN_FAILURE);
  EXPECT_EQ(gpusvc::ShaderInfoLog(broken2.get()), compile_log);
  gpusvc::ShaderPtr vs2 = Shader(warm, kVertex, kBadLinkVs, &o);
  EXPECT_EQ(o, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED) << "the compile status of a failed link's shader";
  gpusvc::ShaderPtr fs2 = Shader(warm, kFragment, kFs, &o);
  const uint64_t failure_hits = Stats(cache).failure_hits;
  gpusvc::PendingLinkPtr pending;
  ASSERT_EQ(gpusvc::StartLink(warm.get(), {vs2.get(), fs2.get()}, gpusvc::LinkOptions(), &pending),
            GPUSVC_PROGRAM_CACHE_LINK_FAILED);
  EXPECT_EQ(pending, nullptr);
  EXPECT_EQ(gpusvc::LastErrorDetail(), link_log);
  EXPECT_GT(Stats(cache).failure_hits, failure_hits);
  // The deferred shaders were never compiled on the driver for this.
  uint32_t state = 99;
  ASSERT_EQ(gpusvc_program_manager_shader_state(vs2.get(), &state), GPUSVC_OK);
  EXPECT_EQ(state, GPUSVC_PROGRAM_MANAGER_SHADER_STATE_DEFERRED);
}

TEST(ProgramManagerParallel, TheTransformFeedbackSwitchKeepsSuchProgramsOut) {
  gpusvc::GlContextPtr ctx;
  gpusvc::ProgramCachePtr cache = MakeCache(false);
  gpusvc::ProgramManagerPtr m;
  OPEN_MANAGER_OR_SKIP(ctx, cache, m);
  const std::string vs_src =
      "#version 450 core\nin vec4 a_position;\nout vec4 v_out;\n"
      "void main() { v_out = a_position * 2.0; gl_Position = a_position; }\n";
  const std::string fs_src = "#version 450 core\nout vec4 o;\nvoid main() { o = vec4(1.0); }\n";
  gpusvc::LinkOptions tf;
  tf.transform_feedback_varyings = {"v_out"};
  for (int round = 0; round < 2; ++round) {
    uint32_t o = 0;
    gpusvc::ShaderPtr vs = Shader(m, kVertex, vs_src, &o);
    gpusvc::ShaderPtr fs = Shader(m, kFragment, fs_src, &o);
    gpusvc::LinkedProgramPtr p;
    ASSERT_EQ(gpusvc::LinkProgram(m.get(), {vs.get(), fs.get()}, tf, &p), GPUSVC_OK) << gpusvc::LastErrorDetail();
    EXPECT_EQ(Origin(p), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED) << "round " << round;
    std::vector<gpusvc::ActiveVariable> varyings;
    ASSERT_EQ(gpusvc::ReadActiveVariables(p.get(), GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_VARYING, &varyings),
              GPUSVC_OK);
    ASSERT_EQ(varyings.size(), 1u);
    EXPECT_EQ(varyings[0].name, "v_out");
  }
  EXPECT_EQ(Stats(cache).entries, 0u);
  // The same program without transform feedback is cached.
  uint32_t o = 0;
  gpusvc::ShaderPtr vs = Shader(m, kVertex, vs_src, &o);
  gpusvc::ShaderPtr fs = Shader(m, kFragment, fs_src, &o);
  gpusvc::LinkedProgramPtr p;
  ASSERT_EQ(gpusvc::LinkProgram(m.get(), {vs.get(), fs.get()}, gpusvc::LinkOptions(), &p), GPUSVC_OK);
  EXPECT_EQ(Stats(cache).entries, 1u);
}

TEST(ProgramManagerParallel, APendingLinkOfAnotherManagerIsRefusedAndStaysOwned) {
  gpusvc::GlContextPtr ctx, ctx2;
  gpusvc::ProgramCachePtr cache = MakeCache();
  gpusvc::ProgramManagerPtr m, other;
  OPEN_MANAGER_OR_SKIP(ctx, cache, m);
  OPEN_MANAGER_OR_SKIP(ctx2, cache, other);
  uint32_t o = 0;
  gpusvc::ShaderPtr vs = Shader(m, kVertex, Vs(0), &o);
  gpusvc::ShaderPtr fs = Shader(m, kFragment, kFs, &o);
  gpusvc::PendingLinkPtr pending;
  ASSERT_EQ(gpusvc::StartLink(m.get(), {vs.get(), fs.get()}, gpusvc::LinkOptions(), &pending), GPUSVC_OK);
  gpusvc::LinkedProgramPtr p;
  EXPECT_EQ(gpusvc::FinishLink(other.get(), &pending, &p), GPUSVC_INVALID_ARGUMENT);
  EXPECT_NE(pending, nullptr) << "an argument error leaves it";
  EXPECT_EQ(gpusvc::FinishLink(m.get(), &pending, &p), GPUSVC_OK) << gpusvc::LastErrorDetail();
  EXPECT_EQ(pending, nullptr);
  EXPECT_NE(p, nullptr);
  // Deferred binary reads through the wrappers.
  ASSERT_EQ(gpusvc::SetDeferBinaryReads(m.get(), true), GPUSVC_OK);
  gpusvc::ShaderPtr vs2 = Shader(m, kVertex, Vs(1), &o);
  gpusvc::LinkedProgramPtr q;
  ASSERT_EQ(gpusvc::LinkProgram(m.get(), {vs2.get(), fs.get()}, gpusvc::LinkOptions(), &q), GPUSVC_OK);
  const size_t entries = Stats(cache).entries;
  bool saved = false;
  ASSERT_EQ(gpusvc::SaveDeferredBinary(m.get(), q.get(), &saved), GPUSVC_OK);
  EXPECT_TRUE(saved);
  EXPECT_EQ(Stats(cache).entries, entries + 1);
}
