// gpusvc_bo_cache_* / gpusvc_bo_*: one object per buffer on real sealed memfds, size rules,
// planes, export, references through gpusvc::Bo, and bad input.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <cstring>
#include <string>
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
  s.struct_size = sizeof(s);
  EXPECT_EQ(gpusvc_bo_cache_stats(cache.get(), &s), GPUSVC_OK);
  return s;
}

// What an output slot holds before a call: a value no call writes, so an error must leave it.
template <typename T>
T* Unwritten() {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(0x5e1));
}

// An fd number that is closed now and that no other thread is given meanwhile: the highest the
// soft limit allows (the kernel hands out the lowest free number).
int HighFdNumber() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return -1;
  return static_cast<int>(lim.rlim_cur < 4096 ? lim.rlim_cur : 4096) - 1;
}

// How many fds of this process name the file behind `fd` (the fake kernel holds one per open
// GEM handle, as the kernel holds a dma-buf reference); -1 on error.
int OpenFdsOn(int fd) {
  struct stat want {};
  if (fstat(fd, &want) != 0) return -1;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    struct stat st {};
    if (e->d_name[0] == '.' || fstatat(dirfd(dir), e->d_name, &st, 0) != 0) continue;
    if (st.st_dev == want.st_dev && st.st_ino == want.st_ino) ++n;
  }
  closedir(dir);
  return n;
}

// The default configuration with max_refs set.
gpusvc_bo_cache_config WithMaxRefs(uint32_t max_refs) {
  gpusvc_bo_cache_config c = gpusvc::BoCacheConfigDefaults();
  c.max_refs = max_refs;
  return c;
}

// gpusvc_bo_cache_import_planes into slots that start unwritten; on error they must stay so.
gpusvc_result ImportPlanesRaw(const gpusvc::BoCachePtr& cache,
                              const std::vector<gpusvc_bo_plane>& planes) {
  std::vector<gpusvc_bo*> out(planes.size(), Unwritten<gpusvc_bo>());
  gpusvc_result r =
      gpusvc_bo_cache_import_planes(cache.get(), planes.data(), planes.size(), 0, out.data());
  if (r == GPUSVC_OK) {
    for (gpusvc_bo* p : out) gpusvc::Bo release(p);
  } else {
    for (gpusvc_bo* p : out) EXPECT_EQ(p, Unwritten<gpusvc_bo>()) << "written on error " << r;
  }
  return r;
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

TEST_F(BoCache, EveryExportRefusesEachNullArgumentAndLeavesItsOutputsAlone) {
  Fd buf(Memfd(64));
  gpusvc::Bo a;
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(0), &a), GPUSVC_OK);
  const gpusvc_bo_import_desc desc = gpusvc::BoImportDesc(0);
  const gpusvc_bo_cache_config config = gpusvc::BoCacheConfigDefaults();
  const gpusvc_bo_plane plane{buf.get(), 0, 64};
  gpusvc_bo_cache* cache_out = Unwritten<gpusvc_bo_cache>();
  gpusvc_bo* bo_out = Unwritten<gpusvc_bo>();
  gpusvc_bo_cache_stats_snapshot stats{};
  stats.struct_size = sizeof(stats);
  stats.hits = 77;
  uint32_t u32_out = 77;
  uint64_t u64_out = 77;
  int fd_out = -7;
  const gpusvc_result null = GPUSVC_NULL_ARGUMENT;
  EXPECT_EQ(gpusvc_bo_cache_config_defaults(nullptr), null);
  EXPECT_EQ(gpusvc_bo_cache_new_memfd(nullptr), null);
  EXPECT_EQ(gpusvc_bo_cache_new_memfd_with_config(nullptr, &cache_out), null);
  EXPECT_EQ(gpusvc_bo_cache_new_memfd_with_config(&config, nullptr), null);
  EXPECT_EQ(gpusvc_bo_cache_open(nullptr, &config, &cache_out), null);
  EXPECT_EQ(gpusvc_bo_cache_open(nullptr, nullptr, &cache_out), null);
  EXPECT_EQ(gpusvc_bo_cache_open("/dev/null", nullptr, nullptr), null);
  EXPECT_EQ(gpusvc_bo_cache_stats(nullptr, &stats), null);
  EXPECT_EQ(gpusvc_bo_cache_stats(cache_.get(), nullptr), null);
  EXPECT_EQ(gpusvc_bo_cache_import(nullptr, buf.get(), &desc, &bo_out), null);
  EXPECT_EQ(gpusvc_bo_cache_import(cache_.get(), buf.get(), nullptr, &bo_out), null);
  EXPECT_EQ(gpusvc_bo_cache_import(cache_.get(), buf.get(), &desc, nullptr), null);
  EXPECT_EQ(gpusvc_bo_cache_import_planes(nullptr, &plane, 1, 0, &bo_out), null);
  EXPECT_EQ(gpusvc_bo_cache_import_planes(cache_.get(), nullptr, 1, 0, &bo_out), null);
  EXPECT_EQ(gpusvc_bo_cache_import_planes(cache_.get(), &plane, 1, 0, nullptr), null);
  EXPECT_EQ(gpusvc_bo_ref(nullptr, &bo_out), null);
  EXPECT_EQ(gpusvc_bo_ref(a.get(), nullptr), null);
  EXPECT_EQ(gpusvc_bo_handle(nullptr, &u32_out), null);
  EXPECT_EQ(gpusvc_bo_handle(a.get(), nullptr), null);
  EXPECT_EQ(gpusvc_bo_size(nullptr, &u64_out), null);
  EXPECT_EQ(gpusvc_bo_size(a.get(), nullptr), null);
  EXPECT_EQ(gpusvc_bo_flags(nullptr, &u32_out), null);
  EXPECT_EQ(gpusvc_bo_flags(a.get(), nullptr), null);
  EXPECT_EQ(gpusvc_bo_ref_count(nullptr, &u32_out), null);
  EXPECT_EQ(gpusvc_bo_ref_count(a.get(), nullptr), null);
  EXPECT_EQ(gpusvc_bo_export(nullptr, O_CLOEXEC, &fd_out), null);
  EXPECT_EQ(gpusvc_bo_export(a.get(), O_CLOEXEC, nullptr), null);
  EXPECT_EQ(gpusvc::RefBo(a.get(), nullptr), null);
  EXPECT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), desc, nullptr), null);
  EXPECT_EQ(gpusvc::ImportBoPlanes(cache_.get(), {plane}, 0, nullptr), null);
  // Releasing NULL is a no-op; a handle of the other kind is refused and releases nothing.
  EXPECT_EQ(gpusvc_bo_free(nullptr), GPUSVC_OK);
  EXPECT_EQ(gpusvc_bo_cache_free(nullptr), GPUSVC_OK);
  EXPECT_EQ(gpusvc_bo_free(reinterpret_cast<gpusvc_bo*>(cache_.get())), GPUSVC_INVALID_HANDLE);
  EXPECT_EQ(gpusvc_bo_cache_free(reinterpret_cast<gpusvc_bo_cache*>(a.get())),
            GPUSVC_INVALID_HANDLE);
  EXPECT_EQ(cache_out, Unwritten<gpusvc_bo_cache>());
  EXPECT_EQ(bo_out, Unwritten<gpusvc_bo>());
  EXPECT_EQ(stats.hits, 77u);
  EXPECT_EQ(u32_out, 77u);
  EXPECT_EQ(u64_out, 77u);
  EXPECT_EQ(fd_out, -7);
  gpusvc_bo_cache_stats_snapshot s = Stats(cache_);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.live, 1u);
  EXPECT_EQ(RefCount(a), 1u);
}

TEST_F(BoCache, NegativeAndClosedFdsAreNotADmabufInImportsAndPlanes) {
  Fd buf(Memfd(4096));
  ASSERT_GE(buf.get(), 0);
  // A closed fd: a number that named the buffer (imported through it) and was then closed.
  const int high = HighFdNumber();
  ASSERT_GT(high, buf.get());
  ASSERT_EQ(dup2(buf.get(), high), high);
  gpusvc::Bo a;
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), high, gpusvc::BoImportDesc(0), &a), GPUSVC_OK);
  ASSERT_EQ(close(high), 0);
  for (int fd : {-1, -2, INT_MIN, high, INT_MAX}) {
    gpusvc_bo* out = Unwritten<gpusvc_bo>();
    const gpusvc_bo_import_desc desc = gpusvc::BoImportDesc(0);
    EXPECT_EQ(gpusvc_bo_cache_import(cache_.get(), fd, &desc, &out), GPUSVC_BO_CACHE_NOT_A_DMABUF)
        << fd;
    EXPECT_EQ(out, Unwritten<gpusvc_bo>());
    const gpusvc_bo_plane bad{fd, 0, 1}, good{buf.get(), 0, 1};
    EXPECT_EQ(ImportPlanesRaw(cache_, {bad, good}), GPUSVC_BO_CACHE_NOT_A_DMABUF) << fd;
    EXPECT_EQ(ImportPlanesRaw(cache_, {good, bad}), GPUSVC_BO_CACHE_NOT_A_DMABUF) << fd;
  }
  EXPECT_EQ(RefCount(a), 1u);
  gpusvc_bo_cache_stats_snapshot s = Stats(cache_);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.closes, 0u);
}

TEST_F(BoCache, AbsurdSizesAndPlaneArithmeticAreCodesAndWriteNothing) {
  Fd buf(Memfd(4096));
  const int fd = buf.get();
  struct Case {
    uint64_t min_size, exact_size;
    gpusvc_result code;
  };
  const Case cases[] = {
      {UINT64_MAX, 0, GPUSVC_BO_CACHE_TOO_SMALL},
      {0, UINT64_MAX, GPUSVC_BO_CACHE_SIZE_MISMATCH},
      {UINT64_MAX, UINT64_MAX, GPUSVC_BO_CACHE_TOO_SMALL},
      {UINT64_MAX, 1, GPUSVC_INVALID_ARGUMENT},
      {4097, 4096, GPUSVC_INVALID_ARGUMENT},
  };
  // On a fresh handle (closed again), then on a cached one (its count untouched).
  for (bool cached : {false, true}) {
    gpusvc::Bo holder;
    if (cached) {
      ASSERT_EQ(gpusvc::ImportBo(cache_.get(), fd, gpusvc::BoImportDesc(0), &holder), GPUSVC_OK);
    }
    for (const Case& c : cases) {
      gpusvc_bo* out = Unwritten<gpusvc_bo>();
      const gpusvc_bo_import_desc desc = gpusvc::BoImportDesc(c.min_size, c.exact_size);
      EXPECT_EQ(gpusvc_bo_cache_import(cache_.get(), fd, &desc, &out), c.code)
          << c.min_size << " " << c.exact_size;
      EXPECT_EQ(out, Unwritten<gpusvc_bo>());
    }
    if (cached) {
      EXPECT_EQ(RefCount(holder), 1u);
    }
  }
  struct PlaneCase {
    uint64_t offset, size;
    gpusvc_result code;
  };
  const PlaneCase plane_cases[] = {
      {UINT64_MAX, 1, GPUSVC_INVALID_ARGUMENT},
      {1, UINT64_MAX, GPUSVC_INVALID_ARGUMENT},
      {UINT64_MAX, UINT64_MAX, GPUSVC_INVALID_ARGUMENT},
      {UINT64_MAX, 0, GPUSVC_INVALID_ARGUMENT},
      {0, UINT64_MAX, GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS},
      {4096, 1, GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS},
      {4095, 2, GPUSVC_BO_CACHE_PLANE_OUT_OF_BOUNDS},
  };
  for (const PlaneCase& c : plane_cases) {
    const gpusvc_bo_plane p{fd, c.offset, c.size}, whole{fd, 0, 4096};
    EXPECT_EQ(ImportPlanesRaw(cache_, {p}), c.code) << c.offset << " " << c.size;
    // After a good plane: the good plane's reference is given back.
    EXPECT_EQ(ImportPlanesRaw(cache_, {whole, p}), c.code) << c.offset << " " << c.size;
  }
  // A count of 0 with live arrays, and counts no array can have (refused before any read).
  const gpusvc_bo_plane one{fd, 0, 1};
  gpusvc_bo* out = Unwritten<gpusvc_bo>();
  EXPECT_EQ(gpusvc_bo_cache_import_planes(cache_.get(), &one, 0, 0, &out), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc_bo_cache_import_planes(cache_.get(), &one, SIZE_MAX, 0, &out),
            GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc_bo_cache_import_planes(cache_.get(), nullptr, SIZE_MAX, 0, &out),
            GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(out, Unwritten<gpusvc_bo>());
  gpusvc_bo_cache_stats_snapshot s = Stats(cache_);
  EXPECT_EQ(s.live, 0u);
  EXPECT_EQ(s.double_closes, 0u);
  EXPECT_GE(s.size_rejects, 6u);
  // Every handle an import opened was closed again: another buffer gets the lowest number.
  Fd other(Memfd(64));
  gpusvc::Bo b;
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), other.get(), gpusvc::BoImportDesc(0), &b), GPUSVC_OK);
  EXPECT_EQ(Handle(b), 1u);
}

TEST_F(BoCache, TheReferenceCapIs508ForRefBoImportsAndPlanesAndChangesNothing) {
  gpusvc::BoCachePtr cache;
  ASSERT_EQ(gpusvc::NewMemfdBoCache(WithMaxRefs(2), &cache), GPUSVC_OK);
  Fd buf(Memfd(4096));
  const int fd = buf.get();
  gpusvc::Bo a, b;
  ASSERT_EQ(gpusvc::ImportBo(cache.get(), fd, gpusvc::BoImportDesc(0), &a), GPUSVC_OK);
  ASSERT_EQ(gpusvc::RefBo(a.get(), &b), GPUSVC_OK);
  EXPECT_EQ(RefCount(a), 2u);
  const gpusvc_bo_cache_stats_snapshot before = Stats(cache);
  // At the cap: RefBo keeps what *out held, the C call leaves its slot alone.
  gpusvc::Bo keep;
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), fd, gpusvc::BoImportDesc(0), &keep), GPUSVC_OK);
  gpusvc_bo* const kept = keep.get();
  EXPECT_EQ(gpusvc::RefBo(a.get(), &keep), GPUSVC_BO_CACHE_TOO_MANY_REFERENCES);
  EXPECT_EQ(keep.get(), kept);
  gpusvc_bo* raw = Unwritten<gpusvc_bo>();
  EXPECT_EQ(gpusvc_bo_ref(b.get(), &raw), GPUSVC_BO_CACHE_TOO_MANY_REFERENCES);
  EXPECT_EQ(raw, Unwritten<gpusvc_bo>());
  gpusvc::Bo c;
  EXPECT_EQ(gpusvc::ImportBo(cache.get(), fd, gpusvc::BoImportDesc(0), &c),
            GPUSVC_BO_CACHE_TOO_MANY_REFERENCES);
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(ImportPlanesRaw(cache, {{fd, 0, 1024}}), GPUSVC_BO_CACHE_TOO_MANY_REFERENCES);
  EXPECT_EQ(RefCount(a), 2u);
  const gpusvc_bo_cache_stats_snapshot after = Stats(cache);
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.closes, before.closes);
  EXPECT_EQ(after.live, before.live);
  // One below the cap: a two-plane import takes the last reference with its first plane, is
  // refused at the second, and gives the first back.
  b.reset();
  EXPECT_EQ(ImportPlanesRaw(cache, {{fd, 0, 1024}, {fd, 1024, 1024}}),
            GPUSVC_BO_CACHE_TOO_MANY_REFERENCES);
  EXPECT_EQ(RefCount(a), 1u);
  // Below the cap everything works again.
  ASSERT_EQ(gpusvc::RefBo(a.get(), &c), GPUSVC_OK);
  EXPECT_EQ(Handle(c), Handle(a));
  c.reset();
  ASSERT_EQ(gpusvc::ImportBo(cache.get(), fd, gpusvc::BoImportDesc(0), &c), GPUSVC_OK);
  EXPECT_EQ(RefCount(a), 2u);
  a.reset();
  c.reset();
  const gpusvc_bo_cache_stats_snapshot s = Stats(cache);
  EXPECT_EQ(s.live, 0u);
  EXPECT_EQ(s.closes, 1u);
  EXPECT_EQ(s.double_closes, 0u);
  EXPECT_NE(gpusvc::ResultMessage(GPUSVC_BO_CACHE_TOO_MANY_REFERENCES).find("references"),
            std::string::npos);
}

TEST_F(BoCache, MaxRefsZeroCountsAsOneAndAHugeOneAsInt32Max) {
  Fd buf(Memfd(64));
  {
    gpusvc::BoCachePtr one;
    ASSERT_EQ(gpusvc::NewMemfdBoCache(WithMaxRefs(0), &one), GPUSVC_OK);
    gpusvc::Bo a, b;
    ASSERT_EQ(gpusvc::ImportBo(one.get(), buf.get(), gpusvc::BoImportDesc(0), &a), GPUSVC_OK);
    EXPECT_EQ(gpusvc::RefBo(a.get(), &b), GPUSVC_BO_CACHE_TOO_MANY_REFERENCES);
    EXPECT_EQ(gpusvc::ImportBo(one.get(), buf.get(), gpusvc::BoImportDesc(0), &b),
              GPUSVC_BO_CACHE_TOO_MANY_REFERENCES);
    EXPECT_EQ(b, nullptr);
    EXPECT_EQ(RefCount(a), 1u);
  }
  for (uint32_t max_refs : {uint32_t{INT32_MAX} + 1, UINT32_MAX}) {
    gpusvc::BoCachePtr huge;
    ASSERT_EQ(gpusvc::NewMemfdBoCache(WithMaxRefs(max_refs), &huge), GPUSVC_OK);
    gpusvc::Bo a;
    ASSERT_EQ(gpusvc::ImportBo(huge.get(), buf.get(), gpusvc::BoImportDesc(0), &a), GPUSVC_OK);
    std::vector<gpusvc::Bo> more(8);
    for (gpusvc::Bo& m : more) ASSERT_EQ(gpusvc::RefBo(a.get(), &m), GPUSVC_OK);
    EXPECT_EQ(RefCount(a), 9u);
    more.clear();
    a.reset();
    EXPECT_EQ(Stats(huge).live, 0u);
  }
}

TEST_F(BoCache, IdentityCheckBytesOtherThan0And1AreAccepted) {
  Fd buf(Memfd(64));
  for (unsigned char byte : {0x00, 0x01, 0x02, 0x80, 0xff}) {
    gpusvc_bo_cache_config config = gpusvc::BoCacheConfigDefaults();
    // What a C host with a stray byte passes; the library reads the byte, never a C++ bool.
    std::memcpy(reinterpret_cast<unsigned char*>(&config) +
                    offsetof(gpusvc_bo_cache_config, identity_check),
                &byte, 1);
    gpusvc_bo_cache* raw = nullptr;
    ASSERT_EQ(gpusvc_bo_cache_new_memfd_with_config(&config, &raw), GPUSVC_OK) << int{byte};
    gpusvc::BoCachePtr cache(raw);
    gpusvc::Bo a, b;
    ASSERT_EQ(gpusvc::ImportBo(cache.get(), buf.get(), gpusvc::BoImportDesc(0), &a), GPUSVC_OK);
    ASSERT_EQ(gpusvc::ImportBo(cache.get(), buf.get(), gpusvc::BoImportDesc(0), &b), GPUSVC_OK);
    EXPECT_EQ(Handle(a), Handle(b));
    EXPECT_EQ(RefCount(a), 2u);
  }
}

// The kernel's PRIME_HANDLE_TO_FD refuses flags other than DRM_CLOEXEC | DRM_RDWR (EINVAL); the
// memfd fake ignores them and always exports a close-on-exec dup. This pins what it does today.
TEST_F(BoCache, ExportFlagsFollowTheKernelAndTheFdImportsAsTheSameObject) {
  Fd buf(Memfd(4096));
  gpusvc::Bo a;
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(0, 0, 5), &a),
            GPUSVC_OK);
  uint32_t flags = 0;
  EXPECT_EQ(gpusvc_bo_flags(a.get(), &flags), GPUSVC_OK);
  EXPECT_EQ(flags, 5u);
  // Only DRM_CLOEXEC (O_CLOEXEC) and DRM_RDWR (O_RDWR), as the kernel's PRIME_HANDLE_TO_FD.
  for (uint32_t bad : {1u, 0x40u, UINT32_MAX, uint32_t{O_CLOEXEC} | 0x100u}) {
    int raw = -7;
    EXPECT_EQ(gpusvc_bo_export(a.get(), bad, &raw), GPUSVC_BO_CACHE_KERNEL_ERROR) << bad;
    EXPECT_EQ(raw, -7) << "nothing written on error";
  }
  const std::pair<uint32_t, bool> cases[] = {{0u, false},
                                             {uint32_t{O_RDWR}, false},
                                             {uint32_t{O_CLOEXEC}, true},
                                             {uint32_t{O_CLOEXEC | O_RDWR}, true}};
  for (const auto& [f, cloexec] : cases) {
    int raw = -1;
    ASSERT_EQ(gpusvc_bo_export(a.get(), f, &raw), GPUSVC_OK) << f;
    Fd exported(raw);
    EXPECT_EQ((fcntl(exported.get(), F_GETFD) & FD_CLOEXEC) != 0, cloexec) << f;
    gpusvc::Bo again;
    ASSERT_EQ(gpusvc::ImportBo(cache_.get(), exported.get(), gpusvc::BoImportDesc(0, 0, 5), &again),
              GPUSVC_OK);
    EXPECT_EQ(Handle(again), Handle(a));
  }
  EXPECT_EQ(RefCount(a), 1u);
}

// T11: the cache freed while objects live: no more imports through it; the live objects answer,
// reference and export; the last release frees everything (the sanitizer build checks leaks).
TEST_F(BoCache, ObjectsOutliveTheirCacheAndAnswerEverythingButImports) {
  Fd buf(Memfd(4096));
  gpusvc::Bo a, b;
  ASSERT_EQ(gpusvc::ImportBo(cache_.get(), buf.get(), gpusvc::BoImportDesc(4096), &a), GPUSVC_OK);
  ASSERT_EQ(gpusvc::RefBo(a.get(), &b), GPUSVC_OK);
  const uint32_t handle = Handle(a);
  EXPECT_EQ(OpenFdsOn(buf.get()), 2);  // ours and the fake kernel's for the open handle
  gpusvc_bo_cache* freed = cache_.get();
  cache_.reset();
  EXPECT_EQ(OpenFdsOn(buf.get()), 2);  // the handle stays open while objects live
  gpusvc::Bo c;
  EXPECT_EQ(gpusvc::ImportBo(freed, buf.get(), gpusvc::BoImportDesc(0), &c), GPUSVC_INVALID_HANDLE);
  gpusvc_bo* raw = Unwritten<gpusvc_bo>();
  const gpusvc_bo_plane plane{buf.get(), 0, 1};
  EXPECT_EQ(gpusvc_bo_cache_import_planes(freed, &plane, 1, 0, &raw), GPUSVC_INVALID_HANDLE);
  EXPECT_EQ(raw, Unwritten<gpusvc_bo>());
  gpusvc_bo_cache_stats_snapshot s{};
  s.struct_size = sizeof(s);
  s.hits = 77;
  EXPECT_EQ(gpusvc_bo_cache_stats(freed, &s), GPUSVC_INVALID_HANDLE);
  EXPECT_EQ(s.hits, 77u);
  EXPECT_EQ(gpusvc_bo_cache_free(freed), GPUSVC_INVALID_HANDLE);

  EXPECT_EQ(Handle(a), handle);
  uint64_t size = 0;
  EXPECT_EQ(gpusvc_bo_size(b.get(), &size), GPUSVC_OK);
  EXPECT_EQ(size, 4096u);
  EXPECT_EQ(RefCount(a), 2u);
  ASSERT_EQ(gpusvc::RefBo(b.get(), &c), GPUSVC_OK);
  EXPECT_EQ(Handle(c), handle);
  EXPECT_EQ(RefCount(a), 3u);
  {
    int exported_raw = -1;
    ASSERT_EQ(gpusvc_bo_export(c.get(), O_CLOEXEC, &exported_raw), GPUSVC_OK);
    Fd exported(exported_raw);
    EXPECT_EQ(lseek(exported.get(), 0, SEEK_END), 4096);
    EXPECT_EQ(OpenFdsOn(buf.get()), 3);
  }
  a.reset();
  b.reset();
  EXPECT_EQ(RefCount(c), 1u);
  EXPECT_EQ(OpenFdsOn(buf.get()), 2);
  c.reset();  // the last release closes the handle and frees the description
  EXPECT_EQ(OpenFdsOn(buf.get()), 1);
}

// Opening a render node: paths that are not one are codes, never a hang (a FIFO with no writer
// would block a plain open), and *out is left alone.
TEST(BoCacheOpen, PathsThatAreNotRenderNodesAreCodesAndLeaveOutAlone) {
  char dir[] = "/tmp/gpusvc-bo-open-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/fifo";
  const std::string missing = std::string(dir) + "/renderD999";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  gpusvc_bo_cache_config config = gpusvc::BoCacheConfigDefaults();
  for (const gpusvc_bo_cache_config* c : {static_cast<const gpusvc_bo_cache_config*>(nullptr),
                                          static_cast<const gpusvc_bo_cache_config*>(&config)}) {
    gpusvc::BoCachePtr out;
    EXPECT_EQ(gpusvc::OpenBoCache(fifo.c_str(), c, &out), GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE);
    EXPECT_EQ(gpusvc::OpenBoCache("/dev/null", c, &out), GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE);
    EXPECT_EQ(gpusvc::OpenBoCache(missing.c_str(), c, &out), GPUSVC_BO_CACHE_KERNEL_ERROR);
    // Paths are bytes: a non-UTF-8 one is a path like any other (here, a missing one).
    EXPECT_EQ(gpusvc::OpenBoCache("/dev/\xff", c, &out), GPUSVC_BO_CACHE_KERNEL_ERROR);
    EXPECT_EQ(gpusvc::OpenBoCache(dir, c, &out), GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE);
    EXPECT_EQ(out.get(), nullptr);
  }
  EXPECT_EQ(gpusvc::OpenBoCache("/dev/null", nullptr, nullptr), GPUSVC_NULL_ARGUMENT);
  // A memfd-backed cache has no DRM device to hand out.
  gpusvc::BoCachePtr memfd;
  ASSERT_EQ(gpusvc::NewMemfdBoCache(&memfd), GPUSVC_OK);
  int fd = -7;
  EXPECT_EQ(gpusvc_bo_cache_device_fd(memfd.get(), &fd), GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE);
  EXPECT_EQ(gpusvc_bo_cache_device_fd(memfd.get(), nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(fd, -7);
  unlink(fifo.c_str());
  rmdir(dir);
}
