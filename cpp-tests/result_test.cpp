// gpusvc_result: stable numbers, messages, truncation, unknown codes.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "gpusvc.hpp"

TEST(Result, CodesHaveTheirAbiNumbers) {
  EXPECT_EQ(GPUSVC_OK, 0u);
  EXPECT_EQ(GPUSVC_PANIC, 1u);
  EXPECT_EQ(GPUSVC_NULL_ARGUMENT, 2u);
  EXPECT_EQ(GPUSVC_INVALID_ARGUMENT, 3u);
  EXPECT_EQ(GPUSVC_INSUFFICIENT_SIZE, 4u);
  EXPECT_EQ(GPUSVC_WRONG_THREAD, 5u);
  EXPECT_EQ(GPUSVC_INVALID_UTF8, 6u);
  EXPECT_EQ(GPUSVC_INVALID_HANDLE, 7u);
  EXPECT_EQ(GPUSVC_HANDLE_BUSY, 8u);
  EXPECT_EQ(GPUSVC_GL_NO_LIBEGL, 100u);
  EXPECT_EQ(GPUSVC_GL_NO_DEVICE, 101u);
  EXPECT_EQ(GPUSVC_GL_NO_MATCHING_CONFIG, 103u);
  EXPECT_EQ(GPUSVC_GL_VERSION_TOO_OLD, 104u);
  EXPECT_EQ(GPUSVC_PROGRAM_CACHE_EMPTY_BINARY, 200u);
  EXPECT_EQ(GPUSVC_PROGRAM_CACHE_OVER_BUDGET, 201u);
  EXPECT_EQ(GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE, 202u);
  EXPECT_EQ(GPUSVC_PROGRAM_CACHE_NOT_FOUND, 203u);
  EXPECT_EQ(GPUSVC_PROGRAM_CACHE_COMPILE_FAILED, 204u);
  EXPECT_EQ(GPUSVC_PROGRAM_CACHE_LINK_FAILED, 205u);
  EXPECT_EQ(GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED, 206u);
  EXPECT_EQ(GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT, 207u);
  EXPECT_EQ(GPUSVC_PROGRAM_CACHE_NO_DEFAULT_DIR, 208u);
  EXPECT_EQ(GPUSVC_SYNC_ORDER_VIOLATION, 300u);
  EXPECT_EQ(GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING, 301u);
  EXPECT_EQ(GPUSVC_SYNC_CLIENT_EXISTS, 302u);
  EXPECT_EQ(GPUSVC_SYNC_UNKNOWN_CLIENT, 303u);
  EXPECT_EQ(GPUSVC_SYNC_UNKNOWN_SEQUENCE, 304u);
  EXPECT_EQ(GPUSVC_SCHEDULER_UNKNOWN_STREAM, 400u);
  EXPECT_EQ(GPUSVC_SCHEDULER_SHUT_DOWN, 401u);
  EXPECT_EQ(GPUSVC_BO_CACHE_NOT_A_DMABUF, 500u);
  EXPECT_EQ(GPUSVC_BO_CACHE_TOO_SMALL, 501u);
  EXPECT_EQ(GPUSVC_BO_CACHE_SIZE_MISMATCH, 502u);
  EXPECT_EQ(GPUSVC_BO_CACHE_FLAGS_CONFLICT, 503u);
  EXPECT_EQ(GPUSVC_BO_CACHE_FOREIGN_HANDLE, 504u);
  EXPECT_EQ(GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS, 505u);
  EXPECT_EQ(GPUSVC_BO_CACHE_KERNEL_ERROR, 506u);
  EXPECT_EQ(GPUSVC_BO_CACHE_TABLE_FULL, 507u);
  EXPECT_EQ(GPUSVC_BO_CACHE_TOO_MANY_REFERENCES, 508u);
  EXPECT_EQ(GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE, 509u);
  EXPECT_EQ(sizeof(gpusvc_result), sizeof(uint32_t));
}

TEST(Result, EveryKnownCodeHasADistinctMessage) {
  const uint32_t codes[] = {GPUSVC_OK,
                            GPUSVC_PANIC,
                            GPUSVC_NULL_ARGUMENT,
                            GPUSVC_INVALID_ARGUMENT,
                            GPUSVC_INSUFFICIENT_SIZE,
                            GPUSVC_WRONG_THREAD,
                            GPUSVC_INVALID_UTF8,
                            GPUSVC_INVALID_HANDLE,
                            GPUSVC_HANDLE_BUSY,
                            GPUSVC_GL_NO_LIBEGL,
                            GPUSVC_GL_NO_DEVICE,
                            GPUSVC_GL_DISPLAY_INIT_FAILED,
                            GPUSVC_GL_NO_MATCHING_CONFIG,
                            GPUSVC_GL_VERSION_TOO_OLD,
                            GPUSVC_GL_CONTEXT_FAILED,
                            GPUSVC_GL_MAKE_CURRENT_FAILED,
                            GPUSVC_PROGRAM_CACHE_EMPTY_BINARY,
                            GPUSVC_PROGRAM_CACHE_OVER_BUDGET,
                            GPUSVC_PROGRAM_CACHE_CRITICAL_PRESSURE,
                            GPUSVC_PROGRAM_CACHE_NOT_FOUND,
                            GPUSVC_PROGRAM_CACHE_COMPILE_FAILED,
                            GPUSVC_PROGRAM_CACHE_LINK_FAILED,
                            GPUSVC_PROGRAM_CACHE_SHADER_NOT_COMPILED,
                            GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT,
                            GPUSVC_PROGRAM_CACHE_NO_DEFAULT_DIR,
                            GPUSVC_SYNC_ORDER_VIOLATION,
                            GPUSVC_SYNC_RELEASE_OUTSIDE_PROCESSING,
                            GPUSVC_SYNC_CLIENT_EXISTS,
                            GPUSVC_SYNC_UNKNOWN_CLIENT,
                            GPUSVC_SYNC_UNKNOWN_SEQUENCE,
                            GPUSVC_BO_CACHE_NOT_A_DMABUF,
                            GPUSVC_BO_CACHE_TOO_SMALL,
                            GPUSVC_BO_CACHE_SIZE_MISMATCH,
                            GPUSVC_BO_CACHE_FLAGS_CONFLICT,
                            GPUSVC_BO_CACHE_FOREIGN_HANDLE,
                            GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS,
                            GPUSVC_BO_CACHE_KERNEL_ERROR,
                            GPUSVC_BO_CACHE_TABLE_FULL,
                            GPUSVC_BO_CACHE_TOO_MANY_REFERENCES,
                            GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE};
  std::set<std::string> seen;
  for (uint32_t code : codes) {
    std::string m = gpusvc::ResultMessage(code);
    EXPECT_FALSE(m.empty()) << code;
    EXPECT_EQ(m.find("unknown"), std::string::npos) << code << ": " << m;
    EXPECT_TRUE(seen.insert(m).second) << "duplicate message " << m;
  }
  EXPECT_NE(gpusvc::ResultMessage(GPUSVC_GL_NO_LIBEGL).find("libEGL"), std::string::npos);
}

TEST(Result, MessageIsTruncatedToASmallBufferAndStillTerminated) {
  const std::string full = gpusvc::ResultMessage(GPUSVC_NULL_ARGUMENT);
  ASSERT_GT(full.size(), 8u);
  char buf[8];
  std::memset(buf, 'x', sizeof buf);
  size_t len = 999;
  ASSERT_EQ(gpusvc_result_message(GPUSVC_NULL_ARGUMENT, buf, sizeof buf, &len), GPUSVC_OK);
  EXPECT_EQ(len, 7u);
  EXPECT_EQ(buf[7], '\0');
  EXPECT_EQ(std::string(buf), full.substr(0, 7));

  char one[1] = {'x'};
  ASSERT_EQ(gpusvc_result_message(GPUSVC_OK, one, 1, &len), GPUSVC_OK);
  EXPECT_EQ(len, 0u);
  EXPECT_EQ(one[0], '\0');
}

TEST(Result, ZeroLengthBufferIsAnErrorAndWritesNothing) {
  char c = 'x';
  size_t len = 42;
  EXPECT_EQ(gpusvc_result_message(GPUSVC_OK, &c, 0, &len), GPUSVC_INSUFFICIENT_SIZE);
  EXPECT_EQ(c, 'x');
  EXPECT_EQ(len, 42u);
}

TEST(Result, UnknownCodeIsNamed) {
  EXPECT_EQ(gpusvc::ResultMessage(31337), "unknown gpusvc_result code 31337");
  EXPECT_EQ(gpusvc::ResultMessage(0xFFFFFFFFu), "unknown gpusvc_result code 4294967295");
}
