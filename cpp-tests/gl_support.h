// GL test policy: without a driver, skip with the reason unless GPUSVC_REQUIRE_GL is set, in
// which case fail. Tests never skip silently. And the shader prelude the GL tests share.
#ifndef GPUSVC_CPP_TESTS_GL_SUPPORT_H
#define GPUSVC_CPP_TESTS_GL_SUPPORT_H

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <string>

#include "gpusvc.hpp"

inline bool GlRequired() {
  const char* v = getenv("GPUSVC_REQUIRE_GL");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

// Opens a context into `ctx` (a gpusvc::GlContextPtr) or skips / fails the current test.
#define GPUSVC_OPEN_OR_SKIP(api, ctx)                                                      \
  do {                                                                                     \
    gpusvc_result open_result_ = gpusvc::OpenGlContext((api), &(ctx));                     \
    if (open_result_ != GPUSVC_OK) {                                                       \
      std::string why_ = gpusvc::ResultMessage(open_result_) + ": " +                      \
                         gpusvc::LastErrorDetail();                                        \
      if (GlRequired()) FAIL() << "GPUSVC_REQUIRE_GL is set but no GL context: " << why_; \
      GTEST_SKIP() << "no GL context: " << why_;                                           \
    }                                                                                      \
  } while (0)

// `body` with the GLSL version line (and default precision) of the context's API.
inline std::string Glsl(const gpusvc_gl_context* ctx, const char* body) {
  uint32_t api = 0;
  EXPECT_EQ(gpusvc_gl_context_api(ctx, &api), GPUSVC_OK);
  const bool gles = api == static_cast<uint32_t>(GPUSVC_GL_API_GLES);
  return std::string(gles ? "#version 300 es\nprecision highp float;\n" : "#version 330 core\n") +
         body;
}

#endif  // GPUSVC_CPP_TESTS_GL_SUPPORT_H
