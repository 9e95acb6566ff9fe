// Growable structs seen from a C host (only gpusvc.h, no C++ wrappers): an "old" host whose
// header had a prefix of today's struct, a "newer" host whose struct has fields this library
// does not know, output structs written to exactly the host's size; and the version macros.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "gpusvc.h"

namespace {

// gpusvc_program_cache_config as first published with struct_size: no persist_sink.
struct CacheConfigV1 {
  size_t struct_size;
  size_t budget_bytes;
  uint32_t policy;
  size_t max_unreferenced_shader_statuses;
};

// An old host's struct with memory after it that must not be read or written.
struct V1ThenGarbage {
  CacheConfigV1 v1;
  unsigned char garbage[64];
};

// A newer host's config: today's and one more field.
struct CacheConfigNext {
  gpusvc_program_cache_config now;
  uint64_t future;
};

static_assert(sizeof(CacheConfigV1) == offsetof(gpusvc_program_cache_config, persist_sink),
              "V1 is today's struct up to the persistence sink");

gpusvc_result NewCache(const void* config, gpusvc_program_cache** out) {
  return gpusvc_program_cache_new(static_cast<const gpusvc_program_cache_config*>(config),
                                  nullptr, nullptr, out);
}

CacheConfigV1 OldConfig() {
  CacheConfigV1 c;
  std::memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.budget_bytes = 1 << 20;
  c.policy = GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_SLRU;
  c.max_unreferenced_shader_statuses = 77;
  return c;
}

TEST(AbiGrowth, VersionMacrosEqualGpusvcVersion) {
  char built[64];
  std::snprintf(built, sizeof built, "%d.%d.%d", GPUSVC_VERSION_MAJOR, GPUSVC_VERSION_MINOR,
                GPUSVC_VERSION_PATCH);
  EXPECT_STREQ(gpusvc_version(), built);
  EXPECT_STREQ(gpusvc_version(), GPUSVC_VERSION_STRING);
  EXPECT_EQ(GPUSVC_UNSUPPORTED_STRUCT_SIZE, 9u);
}

TEST(AbiGrowth, AnOldHostsPrefixStructTakesTheDefaultsForTheRest) {
  V1ThenGarbage old;
  old.v1 = OldConfig();
  std::memset(old.garbage, 0xab, sizeof old.garbage);  // where persist_sink is today
  gpusvc_program_cache* cache = nullptr;
  ASSERT_EQ(NewCache(&old, &cache), GPUSVC_OK);
  // The sink took its default (none): entries cannot be inserted.
  const unsigned char bytes[16] = {0};
  gpusvc_program_cache_sha1 key;
  std::memset(&key, 3, sizeof key);
  EXPECT_EQ(gpusvc_program_cache_insert_entry(cache, bytes, sizeof bytes, &key),
            GPUSVC_PROGRAM_CACHE_PERSIST_NOT_CONFIGURED);
  // Reading the config back into the old struct writes exactly its bytes.
  V1ThenGarbage back;
  std::memset(&back, 0xcd, sizeof back);
  back.v1.struct_size = sizeof back.v1;
  ASSERT_EQ(gpusvc_program_cache_current_config(
                cache, reinterpret_cast<gpusvc_program_cache_config*>(&back)),
            GPUSVC_OK);
  EXPECT_EQ(back.v1.struct_size, sizeof(CacheConfigV1));
  EXPECT_EQ(back.v1.budget_bytes, size_t{1} << 20);
  EXPECT_EQ(back.v1.policy, GPUSVC_PROGRAM_CACHE_EVICTION_POLICY_SLRU);
  EXPECT_EQ(back.v1.max_unreferenced_shader_statuses, 77u);
  for (unsigned char b : back.garbage) ASSERT_EQ(b, 0xcd) << "written past the host's size";
  // And a full-size reader sees the default sink.
  gpusvc_program_cache_config full;
  std::memset(&full, 0xcd, sizeof full);
  full.struct_size = sizeof full;
  ASSERT_EQ(gpusvc_program_cache_current_config(cache, &full), GPUSVC_OK);
  EXPECT_EQ(full.persist_sink, nullptr);
  EXPECT_EQ(gpusvc_program_cache_free(cache), GPUSVC_OK);
}

TEST(AbiGrowth, ANewerHostsStructIsTakenOnlyWithItsUnknownFieldsZero) {
  CacheConfigNext next;
  std::memset(&next, 0, sizeof next);
  next.now.struct_size = sizeof next;  // the host's own, larger size
  ASSERT_EQ(gpusvc_program_cache_config_defaults(GPUSVC_PROGRAM_CACHE_PROFILE_MOBILE, &next.now),
            GPUSVC_OK);
  EXPECT_EQ(next.now.struct_size, sizeof next) << "the defaults keep the host's size";
  EXPECT_EQ(next.future, 0u);
  gpusvc_program_cache* cache = nullptr;
  ASSERT_EQ(NewCache(&next, &cache), GPUSVC_OK);
  EXPECT_EQ(gpusvc_program_cache_free(cache), GPUSVC_OK);

  next.future = 1;  // a field this library does not know is set
  gpusvc_program_cache* refused = reinterpret_cast<gpusvc_program_cache*>(0x5e1);
  EXPECT_EQ(NewCache(&next, &refused), GPUSVC_UNSUPPORTED_STRUCT_SIZE);
  EXPECT_EQ(refused, reinterpret_cast<gpusvc_program_cache*>(0x5e1));
  char detail[512];
  size_t n = 0;
  ASSERT_EQ(gpusvc_last_error_detail(detail, sizeof detail, &n), GPUSVC_OK);
  EXPECT_NE(std::string(detail).find("does not know"), std::string::npos) << detail;
}

TEST(AbiGrowth, SizesBelowTheFirstPublishedOneAreRefusedWithNothingWritten) {
  for (size_t size : {size_t{0}, size_t{8}, sizeof(CacheConfigV1) - 1, size_t{4097}}) {
    CacheConfigV1 c = OldConfig();
    c.struct_size = size;
    gpusvc_program_cache* out = reinterpret_cast<gpusvc_program_cache*>(0x5e1);
    EXPECT_EQ(NewCache(&c, &out), GPUSVC_UNSUPPORTED_STRUCT_SIZE) << size;
    EXPECT_EQ(out, reinterpret_cast<gpusvc_program_cache*>(0x5e1));
  }
  // An output struct below its first size: not a byte written.
  gpusvc_program_cache* cache = nullptr;
  CacheConfigV1 c = OldConfig();
  ASSERT_EQ(NewCache(&c, &cache), GPUSVC_OK);
  unsigned char buf[sizeof(gpusvc_program_cache_stats_snapshot)];
  std::memset(buf, 0xee, sizeof buf);
  const size_t small = sizeof(gpusvc_program_cache_stats_snapshot) - 1;
  std::memcpy(buf, &small, sizeof small);
  EXPECT_EQ(gpusvc_program_cache_stats(cache, reinterpret_cast<gpusvc_program_cache_stats_snapshot*>(buf)),
            GPUSVC_UNSUPPORTED_STRUCT_SIZE);
  for (size_t i = sizeof small; i < sizeof buf; ++i) ASSERT_EQ(buf[i], 0xee) << i;
  size_t zero = 0;
  std::memcpy(buf, &zero, sizeof zero);
  EXPECT_EQ(gpusvc_program_cache_stats(cache, reinterpret_cast<gpusvc_program_cache_stats_snapshot*>(buf)),
            GPUSVC_UNSUPPORTED_STRUCT_SIZE);
  for (size_t i = sizeof zero; i < sizeof buf; ++i) ASSERT_EQ(buf[i], 0xee) << i;
  EXPECT_EQ(gpusvc_program_cache_free(cache), GPUSVC_OK);
}

TEST(AbiGrowth, AnOutputStructLargerThanOursGetsOursAndItsSizeSaysSo) {
  gpusvc_program_cache* cache = nullptr;
  CacheConfigV1 c = OldConfig();
  ASSERT_EQ(NewCache(&c, &cache), GPUSVC_OK);
  struct {
    gpusvc_program_cache_stats_snapshot now;
    uint64_t future;
  } next;
  std::memset(&next, 0, sizeof next);
  next.now.struct_size = sizeof next;
  next.future = 0x5a5a;
  ASSERT_EQ(gpusvc_program_cache_stats(cache, &next.now), GPUSVC_OK);
  EXPECT_EQ(next.now.struct_size, sizeof(gpusvc_program_cache_stats_snapshot));
  EXPECT_EQ(next.future, 0x5a5au);
  EXPECT_EQ(gpusvc_program_cache_free(cache), GPUSVC_OK);
}

TEST(AbiGrowth, SchedulerConfigFollowsTheSameRule) {
  struct {
    gpusvc_scheduler_config now;
    uint64_t future;
  } next;
  std::memset(&next, 0, sizeof next);  // zero: the defaults
  next.now.struct_size = sizeof next;
  gpusvc_scheduler* s = nullptr;
  ASSERT_EQ(gpusvc_scheduler_new_with_config(nullptr, &next.now, &s), GPUSVC_OK);
  EXPECT_EQ(gpusvc_scheduler_free(s), GPUSVC_OK);
  next.future = 1;
  s = nullptr;
  EXPECT_EQ(gpusvc_scheduler_new_with_config(nullptr, &next.now, &s),
            GPUSVC_UNSUPPORTED_STRUCT_SIZE);
  EXPECT_EQ(s, nullptr);
  gpusvc_scheduler_config zeroed;
  std::memset(&zeroed, 0, sizeof zeroed);  // struct_size 0: a host that forgot it
  EXPECT_EQ(gpusvc_scheduler_new_with_config(nullptr, &zeroed, &s), GPUSVC_UNSUPPORTED_STRUCT_SIZE);
  EXPECT_EQ(s, nullptr);
}

}  // namespace
