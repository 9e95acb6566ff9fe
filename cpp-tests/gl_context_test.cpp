// The driver identity through the C ABI, on the machine's real GL driver.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "gl_support.h"
#include "gpusvc.hpp"

TEST(GlContext, DriverIdentityThroughTheCAbi) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  gpusvc::DriverIdentity id;
  ASSERT_EQ(gpusvc::ReadDriverIdentity(ctx.get(), &id), GPUSVC_OK);
  std::printf("driver: %s | %s | %s | GLSL %s | %s\n", id.vendor.c_str(), id.renderer.c_str(),
              id.version.c_str(), id.glsl_version.c_str(), id.software ? "software" : "hardware");
  EXPECT_FALSE(id.vendor.empty());
  EXPECT_FALSE(id.renderer.empty());
  EXPECT_FALSE(id.version.empty());
  EXPECT_FALSE(id.glsl_version.empty());
  EXPECT_TRUE(id.api == GPUSVC_GL_API_DESKTOP_CORE || id.api == GPUSVC_GL_API_GLES);
  EXPECT_FALSE(id.program_binary_formats.empty())
      << "no program-binary formats (is MESA_SHADER_CACHE_DISABLE set?)";
}

TEST(GlContext, GlesContextReportsAnEsVersion) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_GLES, ctx);
  gpusvc::DriverIdentity id;
  ASSERT_EQ(gpusvc::ReadDriverIdentity(ctx.get(), &id), GPUSVC_OK);
  EXPECT_EQ(id.api, static_cast<uint32_t>(GPUSVC_GL_API_GLES));
  EXPECT_NE(id.version.find("OpenGL ES"), std::string::npos) << id.version;
}

TEST(GlContext, FormatsBufferTooSmallWritesNothing) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  size_t count = 0;
  ASSERT_EQ(gpusvc_gl_context_program_binary_formats(ctx.get(), nullptr, 0, &count), GPUSVC_OK);
  ASSERT_GE(count, 1u);
  std::vector<uint32_t> formats(count, 0xABCDu);
  size_t written = 12345;
  EXPECT_EQ(gpusvc_gl_context_program_binary_formats(ctx.get(), formats.data(), count - 1,
                                                     &written),
            GPUSVC_INSUFFICIENT_SIZE);
  EXPECT_EQ(written, 12345u);
  EXPECT_EQ(formats[0], 0xABCDu);
}

TEST(GlContext, ThreadsOpenTheirOwnContextsAtOnce) {
  gpusvc::GlContextPtr probe;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, probe);
  std::vector<std::string> renderers(4);
  std::vector<gpusvc_result> results(4, GPUSVC_PANIC);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([i, &renderers, &results] {
      gpusvc::GlContextPtr ctx;
      results[i] = gpusvc::OpenGlContext(GPUSVC_GL_API_AUTO, &ctx);
      if (results[i] != GPUSVC_OK) return;
      gpusvc::DriverIdentity id;
      results[i] = gpusvc::ReadDriverIdentity(ctx.get(), &id);
      renderers[i] = id.renderer;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(results[i], GPUSVC_OK) << i;
    EXPECT_EQ(renderers[i], renderers[0]);
  }
}
