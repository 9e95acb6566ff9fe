// GL test policy: without a driver, skip with the reason unless GPUSVC_REQUIRE_GL is set, in
// which case fail. Tests never skip silently.
#ifndef GPUSVC_CPP_TESTS_GL_SUPPORT_H
#define GPUSVC_CPP_TESTS_GL_SUPPORT_H

#include <gtest/gtest.h>
#include <stdlib.h>

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

#endif  // GPUSVC_CPP_TESTS_GL_SUPPORT_H
