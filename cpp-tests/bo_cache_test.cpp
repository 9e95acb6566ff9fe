// gpusvc_bo_cache_* / gpusvc_bo_*: one object per buffer on real sealed memfds, size rules,
// planes, export, references through gpusvc::Bo, and bad input.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "gpusvc.hpp"

namespace {

// An fd closed on destruction.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// A memfd of `size` bytes; sealed against growing and shrinking (what the memfd-backed cache
// imports) when `sealed`.
int Memfd(uint64_t size, bool sealed = true) {
  int fd = memfd_create("bo-cache-test", MFD_CLOEXEC | (sealed ? MFD_ALLOW_SEALING : 0u));
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 ||
      (sealed && fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

uint32_t Handle(const gpusvc::Bo& bo) {
  uint32_t h = 0;
  EXPECT_EQ(gpusvc_bo_handle(bo.get(), &h), GPUSVC_OK);
  return h;
}

uint32_t RefCount(const gpusvc::Bo& bo) {
  uint32_t n = 0;
  EXPECT_EQ(gpusvc_bo_ref_count(bo.get(), &n), GPUSVC_OK);
  return n;
}

gpusvc_bo_cache_stats_snapshot Stats(const gpusvc::BoCachePtr& cache) {
  gpusvc_bo_cache_stats_snapshot s{};
  EXPECT_EQ(gpusvc_bo_cache_stats(cache.get(), &s), GPUSVC_OK);
  return s;
}

class BoCache : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(gpusvc::NewMemfdBoCache(&cache_), GPUSVC_OK); }
  void TearDown() override {
    if (cache_) {
      gpusvc_bo_cache_stats_snapshot s = Stats(cache_);
      EXPECT_EQ(s.double_closes, 0u);
      EXPECT_EQ(s.close_errors, 0u);
    }
  }
  gpusvc::BoCachePtr cache_;
};

}  // namespace

TEST_F(BoCache, SameFdTwiceADupAndAnExportAreOneObjectClosedOnce) {
  Fd buf(Memfd(4096));
  ASSERT_GE(buf.get(), 0);
  gpusvc::Bo a, b, c, d;
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(4096), &a), GPUSVC_OK);
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(0), &b), GPUSVC_OK);
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(Handle(a), Handle(b));
  Fd dup_fd(dup(buf.get()));
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), dup_fd.get(), gpusvc::BoImportDesc(0, 4096), &c),
            GPUSVC_OK);
  EXPECT_EQ(Handle(c), Handle(a));
  uint64_t size = 0;
  EXPECT_EQ(gpusvc_bo_size(a.get(), &size), GPUSVC_OK);
  EXPECT_EQ(size, 4096u);

  int exported_raw = -1;
  ASSERT_EQ(gpusvc_bo_export(a.get(), O_CLOEXEC, &exported_raw), GPUSVC_OK);
  Fd exported(exported_raw);
  ASSERT_GE(exported.get(), 0);
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), exported.get(), gpusvc::BoImportDesc(0), &d),
            GPUSVC_OK);
  EXPECT_EQ(Handle(d), Handle(a));
  EXPECT_EQ(RefCount(a), 4u);

  gpusvc_bo_cache_stats_snapshot s = Stats(cache_);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.live, 1u);
  a.reset();
  b.reset();
  c.reset();
  EXPECT_EQ(Stats(cache_).closes, 0u);
  d.reset();
  s = Stats(cache_);
  EXPECT_EQ(s.closes, 1u);
  EXPECT_EQ(s.live, 0u);
}

TEST_F(BoCache, RefAddsAReferenceAndADoubleFreeIsAnInvalidHandle) {
  Fd buf(Memfd(256));
  gpusvc::Bo a, b;
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(0), &a), GPUSVC_OK);
  ASSERT_EQ(gpusvc::RefBo(a.get(), &b), GPUSVC_OK);
  EXPECT_EQ(Handle(b), Handle(a));
  EXPECT_EQ(RefCount(a), 2u);
  gpusvc_bo* raw = b.release();
  EXPECT_EQ(gpusvc_bo_free(raw), GPUSVC_OK);
  EXPECT_EQ(gpusvc_bo_free(raw), GPUSVC_INVALID_HANDLE);
  EXPECT_EQ(RefCount(a), 1u);
  EXPECT_EQ(gpusvc_bo_free(nullptr), GPUSVC_OK);
  EXPECT_EQ(gpusvc_bo_cache_free(nullptr), GPUSVC_OK);
}

TEST_F(BoCache, SizeRulesHaveTheirCodesAndSpareTheCachedObject) {
  Fd buf(Memfd(4096));
  gpusvc::Bo bo;
  EXPECT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(8192), &bo),
            GPUSVC_BO_CACHE_TOO_SMALL);
  EXPECT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(0, 4000), &bo),
            GPUSVC_BO_CACHE_SIZE_MISMATCH);
  EXPECT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(4096, 100), &bo),
            GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(bo, nullptr);
  EXPECT_EQ(Stats(cache_).closes, 2u);  // the fresh handles were closed again

  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(4096, 4096), &bo),
            GPUSVC_OK);
  gpusvc::Bo other;
  EXPECT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(4097), &other),
            GPUSVC_BO_CACHE_TOO_SMALL);
  EXPECT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(0, 0, 1), &other),
            GPUSVC_BO_CACHE_FLAGS_CONFLICT);
  EXPECT_EQ(other, nullptr);
  EXPECT_EQ(RefCount(bo), 1u);
  EXPECT_EQ(Stats(cache_).closes, 2u);
}

TEST_F(BoCache, FdsThatAreNotSealedMemfdsAreNotADmabuf) {
  gpusvc::Bo bo;
  const gpusvc_bo_import_desc any = gpusvc::BoImportDesc(0);
  EXPECT_EQ(gpusvc::ImportBo(cache_.get(), -1, any, &bo), GPUSVC_BO_CACHE_NOT_A_DMABUF);
  EXPECT_EQ(gpusvc::ImportBo(cache_.get(), INT32_MAX, any, &bo), GPUSVC_BO_CACHE_NOT_A_DMABUF);
  Fd unsealed(Memfd(4096, false));
  ASSERT_GE(unsealed.get(), 0);
  EXPECT_EQ(gpusvc::ImportBo(cache_.get(), unsealed.get(), any, &bo),
            GPUSVC_BO_CACHE_NOT_A_DMABUF);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  Fd r(p[0]), w(p[1]);
  EXPECT_EQ(gpusvc::ImportBo(cache_.get(), r.get(), any, &bo), GPUSVC_BO_CACHE_NOT_A_DMABUF);
  EXPECT_EQ(bo, nullptr);
  gpusvc_bo_cache_stats_snapshot s = Stats(cache_);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.live, 0u);
}

TEST_F(BoCache, NullArgumentsAreRefusedAndWriteNothing) {
  Fd buf(Memfd(64));
  gpusvc_bo* raw = nullptr;
  const gpusvc_bo_import_desc desc = gpusvc::BoImportDesc(0);
  EXPECT_EQ(gpusvc_bo_cache_import(nullptr, buf.get(), &desc, &raw), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_bo_cache_import(cache_.get(), buf.get(), nullptr, &raw), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_bo_cache_import(cache_.get(), buf.get(), &desc, nullptr),
            GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(raw, nullptr);
  EXPECT_EQ(gpusvc_bo_cache_new_memfd(nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc::NewMemfdBoCache(nullptr), GPUSVC_NULL_ARGUMENT);
  gpusvc::Bo bo;
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), desc, &bo), GPUSVC_OK);
  int fd = -7;
  EXPECT_EQ(gpusvc_bo_export(nullptr, 0, &fd), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_bo_export(bo.get(), 0, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(fd, -7);
  EXPECT_EQ(gpusvc_bo_handle(bo.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_bo_ref(bo.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(RefCount(bo), 1u);
}

TEST_F(BoCache, PlanesShareTheirBuffersObject) {
  Fd y(Memfd(8192)), uv(Memfd(4096));
  std::vector<gpusvc_bo_plane> planes = {
      {y.get(), 0, 4096}, {y.get(), 4096, 4096}, {uv.get(), 0, 4096}};
  std::vector<gpusvc::Bo> bos;
  ASSERT_EQ(gpusvc::ImportBoPlanes(cache_.get(), planes, 0, &bos), GPUSVC_OK);
  ASSERT_EQ(bos.size(), 3u);
  EXPECT_EQ(Handle(bos[0]), Handle(bos[1]));
  EXPECT_NE(Handle(bos[0]), Handle(bos[2]));
  EXPECT_EQ(RefCount(bos[0]), 2u);

  std::vector<gpusvc::Bo> none;
  EXPECT_EQ(gpusvc::ImportBoPlanes(cache_.get(), {{y.get(), 4096, 4097}}, 0, &none),
            GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS);
  EXPECT_EQ(gpusvc::ImportBoPlanes(cache_.get(), {{y.get(), UINT64_MAX, 2}}, 0, &none),
            GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc::ImportBoPlanes(cache_.get(), {}, 0, &none), GPUSVC_INVALID_ARGUMENT);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(RefCount(bos[0]), 2u);
  bos.clear();
  gpusvc_bo_cache_stats_snapshot s = Stats(cache_);
  EXPECT_EQ(s.closes, 2u);
  EXPECT_EQ(s.live, 0u);
}

TEST_F(BoCache, ObjectsOutliveTheCacheAndAFullTableIsItsCode) {
  Fd buf(Memfd(64));
  gpusvc_bo_cache_config config = gpusvc::BoCacheConfigDefaults();
  EXPECT_TRUE(config.identity_check);
  config.max_table_bytes = 1;
  gpusvc::BoCachePtr tiny;
  ASSERT_EQ(gpusvc::NewMemfdBoCache(config, &tiny), GPUSVC_OK);
  gpusvc::Bo bo;
  EXPECT_EQ(gpusvc::ImportBo(tiny.get(), buf.get(), gpusvc::BoImportDesc(0), &bo),
            GPUSVC_BO_CACHE_TABLE_FULL);

  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(0), &bo), GPUSVC_OK);
  cache_.reset();
  uint64_t size = 0;
  EXPECT_EQ(gpusvc_bo_size(bo.get(), &size), GPUSVC_OK);
  EXPECT_EQ(size, 64u);
  bo.reset();  // the last release closes the handle and frees the description
}
