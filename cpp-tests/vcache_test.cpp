// gpusvc_vcache_*: cache models as text and structs, analyses and optimized orders through the
// gpusvc.hpp wrappers, counts measured on the driver and the policy fit (llvmpipe in CI), and
// bad input (NULL indices, counts that are not whole triangles, absurd sizes, unknown model
// text), with outputs left as they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gl_support.h"
#include "gpusvc.hpp"

namespace {

gpusvc_vcache_model Model(const std::string& text) {
  gpusvc_vcache_model m{};
  EXPECT_EQ(gpusvc::ParseVcacheModel(text, &m), GPUSVC_OK) << text << ": " << gpusvc::LastErrorDetail();
  return m;
}

bool SameModel(const gpusvc_vcache_model& a, const gpusvc_vcache_model& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

gpusvc_vcache_model Sentinel() {
  gpusvc_vcache_model m{};
  m.family = 0xdead;
  m.params[0] = m.params[1] = m.params[2] = 7;
  return m;
}

// A w x h grid of quads (two triangles each) in row order.
std::vector<uint32_t> Grid(uint32_t w, uint32_t h) {
  std::vector<uint32_t> out;
  for (uint32_t y = 0; y < h; ++y) {
    for (uint32_t x = 0; x < w; ++x) {
      const uint32_t a = y * (w + 1) + x, b = a + 1, c = a + w + 1, d = c + 1;
      out.insert(out.end(), {a, c, b, b, c, d});
    }
  }
  return out;
}

// The triangles of `indices` in a fixed pseudo-random order.
std::vector<uint32_t> Shuffled(const std::vector<uint32_t>& indices, uint64_t seed) {
  std::vector<std::array<uint32_t, 3>> tris;
  for (size_t i = 0; i + 2 < indices.size(); i += 3) tris.push_back({indices[i], indices[i + 1], indices[i + 2]});
  for (size_t i = tris.size(); i > 1; --i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(tris[i - 1], tris[(seed >> 33) % i]);
  }
  std::vector<uint32_t> out;
  for (const auto& t : tris) out.insert(out.end(), t.begin(), t.end());
  return out;
}

std::vector<std::array<uint32_t, 3>> SortedTriangles(const std::vector<uint32_t>& indices) {
  std::vector<std::array<uint32_t, 3>> tris;
  for (size_t i = 0; i + 2 < indices.size(); i += 3) tris.push_back({indices[i], indices[i + 1], indices[i + 2]});
  std::sort(tris.begin(), tris.end());
  return tris;
}

const char* const kTexts[] = {"fifo:16",        "lru:32",         "dm:64",
                              "sa:4x8",         "seg:96/fifo:32", "seg:3/sa:2x3",
                              "batch:16,32,0",  "nvidia:96,32,0", "amd:384,16"};

TEST(Vcache, CodesHaveTheirNumbers) {
  EXPECT_EQ(GPUSVC_VCACHE_BAD_MODEL, 600u);
  EXPECT_EQ(GPUSVC_VCACHE_EMPTY_MESH, 601u);
  EXPECT_EQ(GPUSVC_VCACHE_NOT_TRIANGLES, 602u);
  EXPECT_EQ(GPUSVC_VCACHE_INDEX_OUT_OF_RANGE, 603u);
  EXPECT_EQ(GPUSVC_VCACHE_NO_VERTEX_STORAGE_BLOCKS, 604u);
  EXPECT_EQ(GPUSVC_VCACHE_DRIVER_TOO_OLD, 605u);
  EXPECT_EQ(GPUSVC_VCACHE_DRAW_TOO_LARGE, 606u);
  EXPECT_EQ(GPUSVC_VCACHE_MEASURE_FAILED, 607u);
  for (uint32_t code = 600; code <= 607; ++code) {
    EXPECT_EQ(gpusvc::ResultMessage(code).rfind("vertex-cache: ", 0), 0u) << code;
  }
}

TEST(Vcache, ModelTextsRoundTrip) {
  for (const char* text : kTexts) {
    gpusvc_vcache_model m = Model(text);
    std::string back;
    ASSERT_EQ(gpusvc::VcacheModelText(m, &back), GPUSVC_OK);
    EXPECT_EQ(back, text);
  }
  gpusvc_vcache_model seg = Model("seg:96/lru:32");
  EXPECT_EQ(seg.family, GPUSVC_VCACHE_FAMILY_SEGMENTED);
  EXPECT_EQ(seg.params[0], 96u);
  EXPECT_EQ(seg.segment_family, GPUSVC_VCACHE_FAMILY_LRU);
  EXPECT_EQ(seg.segment_params[0], 32u);
}

TEST(Vcache, UnknownAndMalformedModelTextIsBadModelAndLeavesOut) {
  const char* const bad[] = {"",           "fifo",        "fifo:0",        "fifo:65537",
                             "fifo: 16",   "FIFO:16",     "quantum:4",     "plru:8",
                             "sa:4",       "seg:96",      "seg:2/fifo:4",  "seg:9/batch:16,32,0",
                             "batch:16,32", "nvidia:96",  "amd:384,16,1",  "fifo:16\n"};
  for (const char* text : bad) {
    gpusvc_vcache_model out = Sentinel();
    EXPECT_EQ(gpusvc_vcache_model_parse(text, &out), GPUSVC_VCACHE_BAD_MODEL) << text;
    EXPECT_TRUE(SameModel(out, Sentinel())) << text;
    EXPECT_NE(gpusvc::LastErrorDetail().find("vertex-cache"), std::string::npos);
  }
  gpusvc_vcache_model out = Sentinel();
  EXPECT_EQ(gpusvc_vcache_model_parse(nullptr, &out), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_vcache_model_parse("fifo:16", nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_vcache_model_parse("fi\xff:16", &out), GPUSVC_INVALID_UTF8);
  EXPECT_EQ(gpusvc::ParseVcacheModel(std::string("fifo:16\0x", 9), &out), GPUSVC_VCACHE_BAD_MODEL);
  EXPECT_TRUE(SameModel(out, Sentinel()));
}

TEST(Vcache, ModelStructsOutOfRangeAreBadModel) {
  const std::vector<uint32_t> tri = {0, 1, 2};
  std::vector<gpusvc_vcache_model> bad(6, Model("fifo:16"));
  bad[0] = gpusvc_vcache_model{};  // family 0
  bad[1].family = 42;
  bad[2].params[0] = 0;
  bad[3].params[1] = 1;  // a parameter fifo does not have
  bad[4].segment_family = GPUSVC_VCACHE_FAMILY_LRU;
  bad[5] = Model("seg:96/fifo:32");
  bad[5].segment_family = GPUSVC_VCACHE_FAMILY_SEGMENTED;
  for (const auto& m : bad) {
    gpusvc_vcache_analysis a{};
    a.invocations = 0x5e1;
    EXPECT_EQ(gpusvc::VcacheAnalyze(m, tri, 3, &a), GPUSVC_VCACHE_BAD_MODEL);
    EXPECT_EQ(a.invocations, 0x5e1u);
    std::string text = "unchanged";
    EXPECT_EQ(gpusvc::VcacheModelText(m, &text), GPUSVC_VCACHE_BAD_MODEL);
    EXPECT_EQ(text, "unchanged");
  }
}

TEST(Vcache, AnalyzeCountsPerVertexByHand) {
  // fifo:3 over 0 1 2 3 0 1: 0, 1, 2, 3 shaded, then 0 (evicted by 3) and 1 again.
  gpusvc_vcache_analysis a{};
  std::vector<uint32_t> per_vertex;
  ASSERT_EQ(gpusvc::VcacheAnalyze(Model("fifo:3"), {0, 1, 2, 3, 0, 1}, 4, &a, &per_vertex), GPUSVC_OK);
  EXPECT_EQ(per_vertex, (std::vector<uint32_t>{2, 2, 1, 1}));
  EXPECT_EQ(a.invocations, 6u);
  EXPECT_EQ(a.triangles, 2u);
  EXPECT_EQ(a.vertices_referenced, 4u);
  EXPECT_DOUBLE_EQ(a.acmr, 3.0);
  EXPECT_DOUBLE_EQ(a.atvr, 1.5);
  // lru:3 over 0 1 2 | 2 1 3 | 0 3 1: 3 evicts the least recent, 0, which is shaded again;
  // 1, 2 and 3 once each.
  ASSERT_EQ(gpusvc::VcacheAnalyze(Model("lru:3"), {0, 1, 2, 2, 1, 3, 0, 3, 1}, 4, &a, &per_vertex),
            GPUSVC_OK);
  EXPECT_EQ(per_vertex, (std::vector<uint32_t>{2, 1, 1, 1}));
  // The statistics of given counts match.
  gpusvc_vcache_analysis from_counts{};
  const std::vector<uint32_t> idx = {0, 1, 2, 2, 1, 3, 0, 3, 1};
  ASSERT_EQ(gpusvc_vcache_analyze_counts(idx.data(), idx.size(), 4, per_vertex.data(),
                                         per_vertex.size(), &from_counts),
            GPUSVC_OK);
  EXPECT_EQ(from_counts.invocations, a.invocations);
  EXPECT_DOUBLE_EQ(from_counts.acmr, a.acmr);
}

TEST(Vcache, BadMeshesAreCodesAndLeaveOutputsAlone) {
  const gpusvc_vcache_model m = Model("fifo:16");
  const std::vector<uint32_t> idx = {0, 1, 2, 2, 1, 3};
  gpusvc_vcache_analysis a{};
  a.invocations = 0x5e1;
  std::vector<uint32_t> per_vertex(4, 0xabcd);
  auto analyze = [&](const uint32_t* indices, size_t count, uint32_t vertex_count, size_t pv_len) {
    return gpusvc_vcache_analyze(&m, indices, count, vertex_count, &a, per_vertex.data(), pv_len);
  };
  EXPECT_EQ(analyze(nullptr, 6, 4, 4), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(analyze(nullptr, 0, 4, 4), GPUSVC_VCACHE_EMPTY_MESH);
  EXPECT_EQ(analyze(idx.data(), 6, 0, 4), GPUSVC_VCACHE_EMPTY_MESH);
  for (size_t n : {1, 2, 4, 5}) EXPECT_EQ(analyze(idx.data(), n, 4, 4), GPUSVC_VCACHE_NOT_TRIANGLES) << n;
  EXPECT_EQ(analyze(idx.data(), 6, 3, 4), GPUSVC_VCACHE_INDEX_OUT_OF_RANGE);
  // Absurd sizes, refused before anything is read: the buffer holds 6 indices.
  for (size_t n : {SIZE_MAX, SIZE_MAX - 2, size_t{PTRDIFF_MAX}, (size_t{1} << 28) + 3}) {
    EXPECT_EQ(analyze(idx.data(), n, 4, 4), GPUSVC_INVALID_ARGUMENT) << n;
  }
  EXPECT_EQ(analyze(idx.data(), 6, UINT32_MAX, 4), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(analyze(idx.data(), 6, (1u << 27) + 1, 4), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(analyze(idx.data(), 6, 4, 3), GPUSVC_INSUFFICIENT_SIZE);
  EXPECT_EQ(gpusvc_vcache_analyze(nullptr, idx.data(), 6, 4, &a, nullptr, 0), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_vcache_analyze(&m, idx.data(), 6, 4, nullptr, nullptr, 0), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(a.invocations, 0x5e1u);
  EXPECT_EQ(per_vertex, std::vector<uint32_t>(4, 0xabcd));
  // gpusvc_vcache_analyze_counts: the count list must have one entry per vertex.
  EXPECT_EQ(gpusvc_vcache_analyze_counts(idx.data(), 6, 4, per_vertex.data(), 3, &a), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc_vcache_analyze_counts(idx.data(), 6, 4, nullptr, 4, &a), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_vcache_analyze_counts(idx.data(), SIZE_MAX, 4, per_vertex.data(), 4, &a),
            GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(a.invocations, 0x5e1u);
}

TEST(Vcache, OptimizeKeepsTrianglesAndIsNeverWorse) {
  const std::vector<uint32_t> grid = Grid(24, 24);
  const uint32_t vertices = 25 * 25;
  for (const std::vector<uint32_t>& input : {grid, Shuffled(grid, 3)}) {
    for (const char* text : kTexts) {
      const gpusvc_vcache_model m = Model(text);
      std::vector<uint32_t> out;
      ASSERT_EQ(gpusvc::VcacheOptimize(m, input, vertices, &out), GPUSVC_OK) << text;
      EXPECT_EQ(SortedTriangles(out), SortedTriangles(input)) << text;
      gpusvc_vcache_analysis before{}, after{};
      ASSERT_EQ(gpusvc::VcacheAnalyze(m, input, vertices, &before), GPUSVC_OK);
      ASSERT_EQ(gpusvc::VcacheAnalyze(m, out, vertices, &after), GPUSVC_OK);
      EXPECT_LE(after.invocations, before.invocations) << text;
    }
  }
  // A shuffled grid gets much better under FIFO 16; in place gives the same order.
  const std::vector<uint32_t> shuffled = Shuffled(grid, 5);
  const gpusvc_vcache_model fifo = Model("fifo:16");
  std::vector<uint32_t> out;
  ASSERT_EQ(gpusvc::VcacheOptimize(fifo, shuffled, vertices, &out), GPUSVC_OK);
  gpusvc_vcache_analysis before{}, after{};
  ASSERT_EQ(gpusvc::VcacheAnalyze(fifo, shuffled, vertices, &before), GPUSVC_OK);
  ASSERT_EQ(gpusvc::VcacheAnalyze(fifo, out, vertices, &after), GPUSVC_OK);
  EXPECT_LT(after.acmr, 0.8 * before.acmr);
  std::vector<uint32_t> in_place = shuffled;
  ASSERT_EQ(gpusvc_vcache_optimize(&fifo, in_place.data(), in_place.size(), vertices, in_place.data(),
                                   in_place.size()),
            GPUSVC_OK);
  EXPECT_EQ(in_place, out);
}

TEST(Vcache, OptimizeBadInputLeavesTheOutputAlone) {
  const gpusvc_vcache_model m = Model("fifo:16");
  const std::vector<uint32_t> idx = {0, 1, 2, 2, 1, 3};
  std::vector<uint32_t> out(6, 0xabcd);
  EXPECT_EQ(gpusvc_vcache_optimize(&m, idx.data(), 5, 4, out.data(), 6), GPUSVC_VCACHE_NOT_TRIANGLES);
  EXPECT_EQ(gpusvc_vcache_optimize(&m, idx.data(), 6, 3, out.data(), 6), GPUSVC_VCACHE_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(gpusvc_vcache_optimize(&m, nullptr, 6, 4, out.data(), 6), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_vcache_optimize(&m, idx.data(), 6, 4, nullptr, 6), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_vcache_optimize(&m, idx.data(), 6, 4, out.data(), 5), GPUSVC_INSUFFICIENT_SIZE);
  EXPECT_EQ(gpusvc_vcache_optimize(&m, idx.data(), SIZE_MAX, 4, out.data(), SIZE_MAX), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc_vcache_optimize(nullptr, idx.data(), 6, 4, out.data(), 6), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(out, std::vector<uint32_t>(6, 0xabcd));
  std::vector<uint32_t> kept = {9};
  EXPECT_EQ(gpusvc::VcacheOptimize(m, {0, 1}, 4, &kept), GPUSVC_VCACHE_NOT_TRIANGLES);
  EXPECT_EQ(kept, std::vector<uint32_t>{9});
}

TEST(VcacheGl, MeasuredCountsAreRepeatableAndMatchTheQueryAndOptions) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  const std::vector<uint32_t> mesh = Shuffled(Grid(20, 13), 5);
  const uint32_t vertices = 21 * 14;
  gpusvc_vcache_measurement m{};
  m.struct_size = sizeof(m);
  std::vector<uint32_t> counts;
  ASSERT_EQ(gpusvc::VcacheMeasure(ctx.get(), mesh, vertices, nullptr, &m, &counts), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  uint64_t total = 0;
  for (uint32_t c : counts) total += c;
  EXPECT_EQ(m.differing_vertices, 0u);
  EXPECT_EQ(m.analysis.invocations, total);
  EXPECT_EQ(m.analysis.triangles, mesh.size() / 3);
  if (m.has_query) {
    EXPECT_TRUE(m.query_agrees);
    EXPECT_EQ(m.query_invocations, total);
  }
  gpusvc_vcache_draw_options u16{};
  u16.struct_size = sizeof(u16);
  u16.index_type = GPUSVC_VCACHE_INDEX_TYPE_U16;
  gpusvc_vcache_draw_options base{};
  base.struct_size = sizeof(base);
  base.base_vertex = 500;
  for (const auto& options : {u16, base}) {
    gpusvc_vcache_measurement m2{};
    m2.struct_size = sizeof(m2);
    std::vector<uint32_t> counts2;
    ASSERT_EQ(gpusvc::VcacheMeasure(ctx.get(), mesh, vertices, &options, &m2, &counts2), GPUSVC_OK);
    EXPECT_EQ(counts2, counts);
  }
}

TEST(VcacheGl, MeasureBadInputLeavesOutputsAlone) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  const std::vector<uint32_t> idx = {0, 1, 2, 2, 1, 3};
  gpusvc_vcache_measurement m{};
  m.struct_size = sizeof(m);
  m.differing_vertices = 0x5e1;
  std::vector<uint32_t> counts(4, 0xabcd);
  auto measure = [&](const gpusvc_gl_context* c, const uint32_t* indices, size_t n, uint32_t vc,
                     const gpusvc_vcache_draw_options* o, size_t counts_len) {
    return gpusvc_vcache_measure(c, indices, n, vc, o, &m, counts.data(), counts_len);
  };
  EXPECT_EQ(measure(nullptr, idx.data(), 6, 4, nullptr, 4), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(measure(ctx.get(), nullptr, 6, 4, nullptr, 4), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(measure(ctx.get(), idx.data(), 4, 4, nullptr, 4), GPUSVC_VCACHE_NOT_TRIANGLES);
  EXPECT_EQ(measure(ctx.get(), idx.data(), 6, 3, nullptr, 4), GPUSVC_VCACHE_INDEX_OUT_OF_RANGE);
  EXPECT_EQ(measure(ctx.get(), idx.data(), SIZE_MAX, 4, nullptr, 4), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(measure(ctx.get(), idx.data(), 6, 4, nullptr, 3), GPUSVC_INSUFFICIENT_SIZE);
  gpusvc_vcache_draw_options bad{};
  bad.struct_size = sizeof(bad);
  bad.index_type = 77;
  EXPECT_EQ(measure(ctx.get(), idx.data(), 6, 4, &bad, 4), GPUSVC_INVALID_ARGUMENT);
  const std::vector<uint32_t> big = {0, 1, 70000};
  gpusvc_vcache_draw_options u16{};
  u16.struct_size = sizeof(u16);
  u16.index_type = GPUSVC_VCACHE_INDEX_TYPE_U16;
  EXPECT_EQ(gpusvc_vcache_measure(ctx.get(), big.data(), 3, 70001, &u16, &m, nullptr, 0),
            GPUSVC_VCACHE_DRAW_TOO_LARGE);
  EXPECT_EQ(gpusvc_vcache_measure(ctx.get(), idx.data(), 6, 4, nullptr, nullptr, nullptr, 0),
            GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(m.differing_vertices, 0x5e1u);
  EXPECT_EQ(counts, std::vector<uint32_t>(4, 0xabcd));
}

struct Progress {
  uint64_t calls[2] = {0, 0};
  bool past_total = false;
};

void OnProgress(uint32_t phase, uint64_t done, uint64_t total, void* user_data) {
  auto* p = static_cast<Progress*>(user_data);
  if (phase < 2) ++p->calls[phase];
  if (done > total) p->past_total = true;
}

TEST(VcacheGl, FitFindsAnExactModelThatPredictsAHeldBackMesh) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  gpusvc_vcache_fit_options options{};
  options.struct_size = sizeof(options);
  options.battery = GPUSVC_VCACHE_BATTERY_REDUCED;
  options.near_misses = 3;
  Progress progress;
  gpusvc::VcacheFitResultPtr result;
  ASSERT_EQ(gpusvc::VcacheFit(ctx.get(), &options, OnProgress, &progress, &result), GPUSVC_OK)
      << gpusvc::LastErrorDetail();
  EXPECT_GT(progress.calls[GPUSVC_VCACHE_FIT_PHASE_MEASURE], 0u);
  EXPECT_GT(progress.calls[GPUSVC_VCACHE_FIT_PHASE_SEARCH], 0u);
  EXPECT_FALSE(progress.past_total);
  std::vector<gpusvc::VcacheFitEntry> exact, near;
  ASSERT_EQ(gpusvc::VcacheFitEntries(result.get(), GPUSVC_VCACHE_FIT_EXACT, &exact), GPUSVC_OK);
  ASSERT_EQ(gpusvc::VcacheFitEntries(result.get(), GPUSVC_VCACHE_FIT_NEAR, &near), GPUSVC_OK);
  ASSERT_FALSE(exact.empty()) << "no exact model on this driver";
  for (const auto& e : near) {
    EXPECT_GT(e.entry.mismatched_vertices, 0u) << e.model_text;
  }
  const std::vector<uint32_t> held_back = Shuffled(Grid(37, 9), 41);
  const uint32_t vertices = 38 * 10;
  std::vector<uint32_t> measured;
  gpusvc_vcache_measurement m{};
  m.struct_size = sizeof(m);
  ASSERT_EQ(gpusvc::VcacheMeasure(ctx.get(), held_back, vertices, nullptr, &m, &measured), GPUSVC_OK);
  for (const auto& e : exact) {
    EXPECT_EQ(e.entry.mismatched_vertices, 0u);
    gpusvc_vcache_analysis a{};
    std::vector<uint32_t> predicted;
    ASSERT_EQ(gpusvc::VcacheAnalyze(e.entry.model, held_back, vertices, &a, &predicted), GPUSVC_OK);
    EXPECT_EQ(predicted, measured) << e.model_text;
  }
  std::vector<gpusvc::VcacheFitEntry> kept(1);
  EXPECT_EQ(gpusvc::VcacheFitEntries(result.get(), 9, &kept), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(kept.size(), 1u);
  gpusvc_vcache_fit_entry entry{};
  entry.struct_size = sizeof(entry);
  entry.mismatched_vertices = 0x5e1;
  EXPECT_EQ(gpusvc_vcache_fit_result_entry(result.get(), GPUSVC_VCACHE_FIT_EXACT, exact.size(), &entry),
            GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(entry.mismatched_vertices, 0x5e1u);
}

TEST(VcacheGl, FitBadInputLeavesOutAlone) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  gpusvc_vcache_fit_options bad{};
  bad.struct_size = sizeof(bad);
  bad.battery = 5;
  gpusvc_vcache_fit_result* out = nullptr;
  EXPECT_EQ(gpusvc_vcache_fit(ctx.get(), &bad, nullptr, nullptr, &out), GPUSVC_INVALID_ARGUMENT);
  EXPECT_EQ(gpusvc_vcache_fit(nullptr, nullptr, nullptr, nullptr, &out), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(gpusvc_vcache_fit(ctx.get(), nullptr, nullptr, nullptr, nullptr), GPUSVC_NULL_ARGUMENT);
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(gpusvc_vcache_fit_result_free(nullptr), GPUSVC_OK);
  gpusvc_vcache_fit_summary s{};
  s.struct_size = sizeof(s);
  EXPECT_EQ(gpusvc_vcache_fit_result_summary(nullptr, &s), GPUSVC_NULL_ARGUMENT);
}

}  // namespace
