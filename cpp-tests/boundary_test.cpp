// The ABI's boundary rules: panics are caught, NULL arguments rejected, outputs untouched on
// failure, _free(NULL) is a no-op, and the headers stand alone.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "gpusvc.hpp"

extern "C" int gpusvc_header_alone_c(void);
int gpusvc_header_alone_cpp();
int gpusvc_header_alone_hpp();

TEST(PanicBoundary, PanicReturnsGpusvcPanicAndTheProcessLivesOn) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(gpusvc_debug_panic(), GPUSVC_PANIC);
  EXPECT_NE(gpusvc::LastErrorDetail().find("gpusvc_debug_panic was called"), std::string::npos)
      << gpusvc::LastErrorDetail();
  // The library keeps working on this and other threads.
  EXPECT_EQ(gpusvc::ResultMessage(GPUSVC_OK), "success");
  std::thread t([] { EXPECT_EQ(gpusvc_debug_panic(), GPUSVC_PANIC); });
  t.join();
}

TEST(PanicBoundary, ErrorDetailIsPerThread) {
  EXPECT_EQ(gpusvc_debug_panic(), GPUSVC_PANIC);
  std::string other;
  std::thread t([&] {
    EXPECT_EQ(gpusvc_gl_context_open(GPUSVC_GL_API_AUTO, nullptr), GPUSVC_NULL_ARGUMENT);
    other = gpusvc::LastErrorDetail();
  });
  t.join();
  EXPECT_NE(other.find("`out` is NULL"), std::string::npos) << other;
  EXPECT_NE(gpusvc::LastErrorDetail().find("panic"), std::string::npos);
}

TEST(NullArguments, EveryPointerIsChecked) {
  size_t len = 7;
  char buf[16];
  EXPECT_EQ(gpusvc_result_message(GPUSVC_OK, nullptr, 16, &len), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_result_message(GPUSVC_OK, buf, sizeof buf, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_last_error_detail(nullptr, 16, &len), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(len, 7u);

  EXPECT_EQ(gpusvc_gl_context_open(GPUSVC_GL_API_AUTO, nullptr), GPUSVC_NULL_ARGUMENT);
  const char* s = nullptr;
  EXPECT_EQ(gpusvc_gl_context_vendor(nullptr, &s), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_gl_context_renderer(nullptr, &s), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_gl_context_version(nullptr, &s), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_gl_context_glsl_version(nullptr, &s), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  uint32_t api = 77;
  EXPECT_EQ(gpusvc_gl_context_api(nullptr, &api), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(api, 77u);
  bool software = true;
  EXPECT_EQ(gpusvc_gl_context_is_software(nullptr, &software), GPUSVC_NULL_ARGUMENT);
  EXPECT_TRUE(software);
  size_t count = 5;
  EXPECT_EQ(gpusvc_gl_context_program_binary_formats(nullptr, nullptr, 0, &count),
            GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(count, 5u);
  EXPECT_EQ(gpusvc::OpenGlContext(GPUSVC_GL_API_AUTO, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::ReadDriverIdentity(nullptr, nullptr), GPUSVC_NULL_ARGUMENT);
}

TEST(NullArguments, FreeNullIsANoOp) {
  gpusvc_gl_context_free(nullptr);
  gpusvc::GlContextPtr empty;
  empty.reset();
  SUCCEED();
}

TEST(InvalidArguments, UnknownEnumValueIsRejectedAndOutputUntouched) {
  gpusvc_gl_context* ctx = reinterpret_cast<gpusvc_gl_context*>(0x1);
  EXPECT_EQ(gpusvc_gl_context_open(3, &ctx), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, reinterpret_cast<gpusvc_gl_context*>(0x1));
  EXPECT_NE(gpusvc::LastErrorDetail().find("unknown gpusvc_gl_api value 3"), std::string::npos);
}

TEST(Header, CompilesAloneInCAndCpp) {
  EXPECT_EQ(gpusvc_header_alone_c(), 0);
  EXPECT_EQ(gpusvc_header_alone_cpp(), 0);
  EXPECT_EQ(gpusvc_header_alone_hpp(), 0);
  EXPECT_FALSE(gpusvc::Version().empty());
}
