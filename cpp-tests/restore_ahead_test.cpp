// The restore-ahead through gpusvc.hpp: a cache populated on the driver, a RestoreAheadPtr started
// from the host's context, and a manager whose links take what it restored (every link a cache
// hit, every one taken); the defaults, the stats from another thread, a release that hands
// nothing over, and the errors with outputs left alone. GL tests skip without a driver unless
// GPUSVC_REQUIRE_GL is set.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "gl_support.h"
#include "gpusvc.hpp"

namespace {

constexpr int kPrograms = 8;
constexpr uint32_t kWaitMs = 20000;

std::string Vertex(const gpusvc_gl_context* ctx, int i) {
  std::string body =
      "in vec4 a_position;\nuniform float u_scale;\n"
      "void main() { gl_Position = a_position * u_scale * " +
      std::to_string(i + 1) + ".0; }\n";
  return Glsl(ctx, body.c_str());
}

std::string Fragment(const gpusvc_gl_context* ctx) {
  return Glsl(ctx, "uniform vec4 u_tint;\nout vec4 o_color;\nvoid main() { o_color = u_tint; }\n");
}

// Links program `i` through `manager`; its origin (GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_*).
uint32_t LinkOrigin(const gpusvc_gl_context* ctx, const gpusvc::ProgramManagerPtr& manager, int i) {
  gpusvc::ShaderPtr vs, fs;
  EXPECT_EQ(gpusvc::NewShader(manager.get(), GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, Vertex(ctx, i), &vs),
            GPUSVC_OK);
  EXPECT_EQ(gpusvc::NewShader(manager.get(), GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, Fragment(ctx), &fs),
            GPUSVC_OK);
  uint32_t outcome = 0;
  EXPECT_EQ(gpusvc::Compile(manager.get(), vs.get(), &outcome), GPUSVC_OK);
  EXPECT_EQ(gpusvc::Compile(manager.get(), fs.get(), &outcome), GPUSVC_OK);
  gpusvc::LinkedProgramPtr linked;
  EXPECT_EQ(gpusvc::Link(manager.get(), vs.get(), fs.get(), gpusvc::LinkOptions{}, &linked), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  uint32_t origin = 99;
  EXPECT_EQ(gpusvc::LinkedProgramOrigin(linked.get(), &origin), GPUSVC_OK);
  return origin;
}

gpusvc::ProgramCachePtr PopulatedCache(const gpusvc::GlContextPtr& ctx) {
  gpusvc_program_cache_config config{};
  EXPECT_EQ(gpusvc::ProgramCacheDefaults(GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP, &config), GPUSVC_OK);
  gpusvc::ProgramCachePtr cache;
  EXPECT_EQ(gpusvc::NewProgramCache(config, &cache), GPUSVC_OK);
  gpusvc::ProgramManagerPtr manager;
  EXPECT_EQ(gpusvc::NewGlProgramManager(ctx.get(), cache.get(), "ahead", &manager), GPUSVC_OK);
  for (int i = 0; i < kPrograms; ++i) {
    EXPECT_EQ(LinkOrigin(ctx.get(), manager, i), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED);
  }
  return cache;
}

TEST(RestoreAhead, LinksTakeWhatTheThreadRestored) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  gpusvc::ProgramCachePtr cache = PopulatedCache(ctx);

  const gpusvc_restore_ahead_config defaults = gpusvc::RestoreAheadDefaults();
  EXPECT_EQ(defaults.max_programs, 1024u);
  EXPECT_EQ(defaults.max_bytes, uint64_t{64} << 20);
  EXPECT_EQ(defaults.load_timeout_ms, 10000u);

  gpusvc::RestoreAheadPtr ahead;
  ASSERT_EQ(gpusvc::StartRestoreAhead(ctx.get(), cache.get(), &defaults, &ahead), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  bool done = false;
  ASSERT_EQ(gpusvc_restore_ahead_wait_until_done(ahead.get(), kWaitMs, &done), GPUSVC_OK);
  ASSERT_TRUE(done);
  gpusvc_restore_ahead_stats_snapshot stats = gpusvc::Sized<gpusvc_restore_ahead_stats_snapshot>();
  ASSERT_EQ(gpusvc::RestoreAheadStats(ahead.get(), &stats), GPUSVC_OK);
  EXPECT_EQ(stats.restored, uint64_t{kPrograms});
  EXPECT_FALSE(stats.failed);

  gpusvc::ProgramManagerPtr manager;
  ASSERT_EQ(gpusvc::NewGlProgramManagerRestoringAhead(ctx.get(), cache.get(), ahead.get(), "ahead", &manager),
            GPUSVC_OK);
  for (int i = 0; i < kPrograms; ++i) {
    EXPECT_EQ(LinkOrigin(ctx.get(), manager, i), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT) << i;
  }
  // The handle may be read from any thread.
  gpusvc_restore_ahead_stats_snapshot other = gpusvc::Sized<gpusvc_restore_ahead_stats_snapshot>();
  gpusvc_result other_result = GPUSVC_PANIC;
  std::thread([&] { other_result = gpusvc::RestoreAheadStats(ahead.get(), &other); }).join();
  EXPECT_EQ(other_result, GPUSVC_OK);
  EXPECT_EQ(other.taken, uint64_t{kPrograms});
  // Freed before the manager: links go on, each restoring its own binary.
  ahead.reset();
  EXPECT_EQ(LinkOrigin(ctx.get(), manager, 0), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
}

TEST(RestoreAhead, AReleasedOneHandsNothingOver) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  gpusvc::ProgramCachePtr cache = PopulatedCache(ctx);
  gpusvc::RestoreAheadPtr ahead;
  ASSERT_EQ(gpusvc::StartRestoreAhead(ctx.get(), cache.get(), nullptr, &ahead), GPUSVC_OK);
  bool done = false;
  ASSERT_EQ(gpusvc_restore_ahead_wait_until_done(ahead.get(), kWaitMs, &done), GPUSVC_OK);
  ASSERT_EQ(gpusvc_restore_ahead_release_unclaimed(ahead.get()), GPUSVC_OK);
  gpusvc::ProgramManagerPtr manager;
  ASSERT_EQ(gpusvc::NewGlProgramManagerRestoringAhead(ctx.get(), cache.get(), ahead.get(), "ahead", &manager),
            GPUSVC_OK);
  for (int i = 0; i < kPrograms; ++i) {
    EXPECT_EQ(LinkOrigin(ctx.get(), manager, i), GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT) << i;
  }
  gpusvc_restore_ahead_stats_snapshot stats = gpusvc::Sized<gpusvc_restore_ahead_stats_snapshot>();
  ASSERT_EQ(gpusvc::RestoreAheadStats(ahead.get(), &stats), GPUSVC_OK);
  EXPECT_EQ(stats.taken, 0u);
}

TEST(RestoreAhead, ErrorsLeaveOutputsAlone) {
  gpusvc::RestoreAheadPtr ahead;
  EXPECT_EQ(gpusvc::StartRestoreAhead(nullptr, nullptr, nullptr, &ahead), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(ahead.get(), nullptr);
  gpusvc_restore_ahead_stats_snapshot stats = gpusvc::Sized<gpusvc_restore_ahead_stats_snapshot>();
  stats.restored = 7;
  EXPECT_EQ(gpusvc::RestoreAheadStats(nullptr, &stats), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(stats.restored, 7u);
  EXPECT_EQ(gpusvc::RestoreAheadStats(nullptr, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_restore_ahead_free(nullptr), GPUSVC_OK);

  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  gpusvc::ProgramCachePtr cache = PopulatedCache(ctx);
  gpusvc_restore_ahead_config small = gpusvc::RestoreAheadDefaults();
  small.struct_size = 4;
  EXPECT_EQ(gpusvc::StartRestoreAhead(ctx.get(), cache.get(), &small, &ahead),
            GPUSVC_UNSUPPORTED_STRUCT_SIZE);
  EXPECT_EQ(ahead.get(), nullptr);
  // From another thread than the context's.
  gpusvc_result other = GPUSVC_OK;
  gpusvc_restore_ahead* raw = nullptr;
  std::thread([&] { other = gpusvc_restore_ahead_start(ctx.get(), cache.get(), nullptr, &raw); }).join();
  EXPECT_EQ(other, GPUSVC_WRONG_THREAD);
  EXPECT_EQ(raw, nullptr);
  gpusvc::ProgramManagerPtr manager;
  EXPECT_EQ(gpusvc::NewGlProgramManagerRestoringAhead(ctx.get(), cache.get(), nullptr, "x", &manager),
            GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(manager.get(), nullptr);
}

}  // namespace
