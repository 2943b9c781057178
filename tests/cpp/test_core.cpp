// CPU tests of the core: dtypes, TensorView, host encode/decode, the comparison that every GPU
// test relies on, the registry's contents and dispatch order.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.hpp"
#include "bench/case.hpp"
#include "core/host.hpp"
#include "hk/hk.hpp"
#include "hk_registry_counts.hpp"

using hk::DType;

TEST(DType, ParseAndPrint) {
  EXPECT_EQ(hk::parse_dtype("bf16"), DType::kBF16);
  EXPECT_EQ(hk::parse_dtype("FLOAT32"), DType::kF32);
  EXPECT_EQ(hk::parse_dtype("half"), DType::kF16);
  EXPECT_EQ(hk::to_string(DType::kF8E4M3), "e4m3");
  EXPECT_EQ(hk::dtype_bits(DType::kI4), 4);
  try {
    hk::parse_dtype("f64");
    FAIL() << "f64 parsed";
  } catch (const hk::Error& e) {
    EXPECT_EQ(e.kind(), hk::ErrorKind::kValue);
    EXPECT_NE(std::string(e.what()).find("f64"), std::string::npos);
  }
}

TEST(TensorView, ShapesStridesAlignment) {
  alignas(256) static char buf[1024];
  hk::TensorView t(buf, DType::kBF16, {3, 5});
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.stride(0), 5);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.alignment(), 256);
  hk::TensorView u(buf + 2, DType::kBF16, {3, 5}, {8, 1});
  EXPECT_FALSE(u.is_contiguous());
  EXPECT_EQ(u.alignment(), 2);
  hk::TensorView big(buf, DType::kF32, {int64_t(1) << 20, int64_t(1) << 12});
  EXPECT_EQ(big.numel(), int64_t(1) << 32);  // 64-bit sizes
  EXPECT_THROW(hk::TensorView(buf, DType::kF32, {-1}), hk::Error);
  EXPECT_THROW(hk::TensorView(buf, DType::kF32, {2, 2}, {1}), hk::Error);
  EXPECT_EQ(hk::parse_shape("16384x8192"), (std::vector<int64_t>{16384, 8192}));
  EXPECT_THROW(hk::parse_shape("12xab"), hk::Error);
}

TEST(Host, RoundTripEveryFloatDtype) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E5M2}) {
    hk::TensorSpec spec{"t", dt, {4, 6}, {8, 1}, hk::Dist::kNormal, 2.0, {}};
    hk::HostTensor t = hk::host::random_tensor(spec, 7);
    std::vector<uint8_t> storage;
    hk::host::encode(spec, t.values, storage);
    std::vector<double> back;
    hk::host::decode(spec, storage, back);
    ASSERT_EQ(back, t.values) << hk::to_string(dt);
    int nonzero = 0;
    for (double v : t.values) nonzero += v != 0;
    EXPECT_GT(nonzero, 12) << "random draws should not be mostly zero";
  }
  EXPECT_EQ(hk::host::round_to(DType::kBF16, 1.0 + 1.0 / 512), 1.0);  // ties to even
  EXPECT_EQ(hk::host::round_to(DType::kF16, 65504.0), 65504.0);
}

TEST(Host, ParallelForCoversEveryIndexOnceWithinTheThreadCount) {
  const int threads = hk::host::thread_count();
  EXPECT_GE(threads, 1);
  if (!std::getenv("HK_THREADS")) {
    EXPECT_LE(threads, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  }
  const int64_t n = (1 << 20) + 7;
  std::vector<std::atomic<int>> hits(n);
  hk::host::parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
}

TEST(Host, PackedInt4) {
  hk::TensorSpec spec{"q", DType::kI4, {2, 4}, {}, hk::Dist::kSmallInt, 7, {}};
  std::vector<double> vals = {-8, 7, 0, -1, 3, -3, 5, -5};
  std::vector<uint8_t> storage;
  hk::host::encode(spec, vals, storage);
  ASSERT_EQ(storage.size(), 4u);
  EXPECT_EQ(storage[0], 0x78);  // low nibble first
  std::vector<double> back;
  hk::host::decode(spec, storage, back);
  EXPECT_EQ(back, vals);
}

TEST(Compare, ToleranceNanInfAndCoordinates) {
  hk::TensorSpec spec{"y", DType::kF32, {2, 3}, {}, hk::Dist::kNormal, 1, {}};
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  std::vector<double> ref = {1.0, -2.0, nan, inf, 0.0, 5.0};
  auto got = ref;
  EXPECT_TRUE(hk::bench::compare(spec, got, ref, {1e-6, 1e-5}).ok);
  got[5] = 5.0001;
  auto r = hk::bench::compare(spec, got, ref, {1e-6, 1e-5});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("y[1, 2]"), std::string::npos) << r.message;
  got = ref;
  got[2] = 0.0;  // NaN expected
  EXPECT_FALSE(hk::bench::compare(spec, got, ref, {1, 1}).ok);
  got = ref;
  got[0] = nan;  // NaN where a number is expected: never within tolerance
  EXPECT_FALSE(hk::bench::compare(spec, got, ref, {1e9, 1e9}).ok);
  got = ref;
  got[3] = -inf;
  EXPECT_FALSE(hk::bench::compare(spec, got, ref, {1e9, 1e9}).ok);
}

TEST(Bench, Glob) {
  EXPECT_TRUE(hk::bench::glob_match("v0*", "v03_vectorized"));
  EXPECT_TRUE(hk::bench::glob_match("*vector*", "v03_vectorized"));
  EXPECT_TRUE(hk::bench::glob_match("v0?_fused", "v02_fused"));
  EXPECT_FALSE(hk::bench::glob_match("v01*", "v02_fused"));
  // Bracket classes, as the docs' examples use them ('v0[789]*,v1*'): a failed match here once
  // made a benchmark call time only the baseline.
  EXPECT_TRUE(hk::bench::glob_match("v1[23]*", "v12_tma_store_epilogue"));
  EXPECT_TRUE(hk::bench::glob_match("v1[23]*", "v13_wgmma_in_flight"));
  EXPECT_FALSE(hk::bench::glob_match("v1[23]*", "v14_lean_sync_epilogue"));
  EXPECT_TRUE(hk::bench::glob_match("v0[7-9]*", "v08_wgmma_tma_pipeline"));
  EXPECT_FALSE(hk::bench::glob_match("v0[7-9]*", "v06_mma_sync_ldmatrix"));
  EXPECT_TRUE(hk::bench::glob_match("v0[!1-4]*", "v05_vectorized_cp_async"));
  EXPECT_FALSE(hk::bench::glob_match("v0[!1-4]*", "v03_smem_tiling"));
  EXPECT_TRUE(hk::bench::glob_match("*[0-9]", "m4096"));
  EXPECT_TRUE(hk::bench::glob_match("a[b", "a[b"));  // unclosed: literal
  EXPECT_TRUE(hk::bench::glob_match("[]]x", "]x"));  // ']' first in a class is a member
}

// Registration must survive linking (OBJECT libraries): a dropped rung fails here. The counts
// are what the build found in the sources (generated at configure time), not a hand-kept list.
TEST(Registry, EveryRegistrationInTheSourcesSurvivesLinking) {
  auto& reg = hk::Registry::get();
  size_t variants = 0;
  for (const hk::Family* f : reg.families()) variants += reg.variants(f->name()).size();
  EXPECT_EQ(variants, size_t(hk::generated::kRegisteredVariants));
  EXPECT_EQ(reg.families().size(), size_t(hk::generated::kRegisteredFamilies));
}

// Every family has a dispatch, at least one production rung and one baseline, and its dispatch
// sends every test problem to a production rung (a public call never runs a teaching rung).
TEST(Registry, EveryFamilyDispatchesToProductionRungs) {
  auto& reg = hk::Registry::get();
  for (const hk::Family* f : reg.families()) {
    EXPECT_TRUE(reg.has_dispatch(f->name())) << f->name();
    int production = 0, baselines = 0;
    for (const hk::Variant* v : reg.variants(f->name())) {
      production += v->is(hk::kFlagProduction);
      baselines += v->is(hk::kFlagBaseline);
      EXPECT_FALSE(v->summary().empty()) << v->name();
    }
    EXPECT_GE(production, 1) << f->name();
    EXPECT_EQ(baselines, 1) << f->name();
    ASSERT_FALSE(f->test_problems().empty()) << f->name();
    for (auto& p : f->test_problems()) {
      hk::Choice c = reg.choose(*p);
      EXPECT_TRUE(c.variant->is(hk::kFlagProduction)) << f->name() << " " << p->key() << " -> " << c.variant->name();
    }
  }
}

// The reference itself must be right: spot values of the op contracts, by hand.
TEST(Reference, GeluSpotValues) {
  auto* fam = hk::Registry::get().family("gelu");
  ASSERT_NE(fam, nullptr);
  for (auto& p : fam->test_problems()) {
    if (p->key() != "8_f32_tanh_fwd" && p->key() != "8_f32_erf_fwd") continue;
    std::vector<hk::HostTensor> in = {{p->inputs()[0], {0.0, 1.0, -1.0, 3.0, -3.0, 0.5, 10.0, -10.0}}};
    std::vector<hk::HostTensor> out = {{p->outputs()[0], std::vector<double>(8)}};
    p->reference(in, out);
    bool tanh = p->key().find("tanh") != std::string::npos;
    // Computed independently with Python's math.tanh / math.erf in float64.
    std::vector<double> want = tanh ? std::vector<double>{0, 0.8411919906082768, -0.15880800939172324, 2.996362607918227,
                                                          -0.0036373920817729943, 0.34571400982514394, 10.0, -0.0}
                                    : std::vector<double>{0, 0.8413447460685429, -0.15865525393145707, 2.99595030590511,
                                                          -0.00404969409489031, 0.34573123063700656, 10.0, -0.0};
    for (int i = 0; i < 8; ++i) EXPECT_NEAR(out[0].values[i], want[i], 1e-12) << p->key() << " x=" << in[0].values[i];
  }
}

// Every family offers main-job and ladder problems with distinct keys (hk bench's input; it runs
// only on a GPU, so this is where the lists themselves are checked).
TEST(Registry, EveryFamilyHasBenchProblems) {
  for (const hk::Family* f : hk::Registry::get().families()) {
    for (bool quick : {true, false}) {
      hk::BenchSelect sel;
      sel.quick = quick;
      auto probs = f->bench_problems(sel);
      ASSERT_FALSE(probs.empty()) << f->name() << (quick ? " quick" : " full");
      std::set<std::string> keys;
      for (auto& p : probs) {
        EXPECT_EQ(p->family(), f->name());
        EXPECT_TRUE(keys.insert(p->key()).second) << f->name() << ": duplicate bench key " << p->key();
        EXPECT_GT(p->bytes(), 0) << p->key();
      }
    }
  }
}

// A TMA kernel's launch as the first CUDA work of a thread (torch's autograd threads run a
// hopperkit backward so): encoding a tensor map is a driver call that needs a current context,
// which such a thread does not have yet. Per family with TMA rungs, a production TMA rung on the
// first test problem it runs, once here (its one-time setup is then done) and once from a
// fresh thread, launching on the legacy stream, then matches the fp64 reference.
TEST(Threads, ATmaLaunchMayBeAThreadsFirstCudaCall) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  // Per family, its production TMA rungs.
  const std::map<std::string, std::vector<std::string>> tma = {
      {"gemm", {"v18_stream_k_tail"}},
      {"attention", {"v05_wgmma_tma", "v06_pingpong_overlap", "v09_persistent"}},
      {"gemm_fp8", {"v08_lean_issue", "v07_wgmma_in_flight"}}};
  auto& reg = hk::Registry::get();
  for (const auto& [family, names] : tma) {
    const hk::Variant* v = nullptr;
    hk::ProblemPtr p;
    for (auto& q : reg.family(family)->test_problems()) {
      for (const std::string& name : names) {
        const hk::Variant* w = reg.variant(family, name);
        ASSERT_NE(w, nullptr) << family << "/" << name;
        if (w->supports(*q).empty()) {
          v = w, p = q;
          break;
        }
      }
      if (v) break;
    }
    ASSERT_NE(v, nullptr) << family << ": no test problem runs on a TMA rung";
    hk::bench::Case c(p, 7);
    ASSERT_TRUE(c.run_and_check(*v).ok) << family << " " << p->key();
    c.poison_outputs();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::string thrown;
    std::thread([&] {
      try {
        v->run(*p, c.operands(), nullptr);
      } catch (const std::exception& e) {
        thrown = e.what();
      }
    }).join();
    ASSERT_TRUE(thrown.empty()) << family << "/" << v->name() << " from a fresh thread: " << thrown;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    hk::bench::CheckResult r = c.check();
    EXPECT_TRUE(r.ok) << family << "/" << v->name() << " " << p->key() << ": " << r.message;
  }
}
