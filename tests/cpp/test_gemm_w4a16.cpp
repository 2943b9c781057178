// gemm_w4a16 beyond the registry sweep: the format helpers round-trip bit-exactly (CPU), the
// fp64 reference against an independent dequantisation (CPU), quantisation error bounds (CPU),
// bad input with typed errors (CPU), the dispatch (CPU), and the public op on quantised weights
// and misaligned views (GPU).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/host.hpp"
#include "gemm_w4a16/gemm_w4a16_op.hpp"
#include "offset_views.hpp"
#include "test_util.hpp"

using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hk::W4A16Layout;
using hktest::expect_error;
using hktest::fake_ptr;

namespace {

std::vector<uint8_t> random_nibbles(size_t n, uint64_t seed) {
  hk::host::Rng rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng.next() & 0xF);
  return v;
}

std::vector<int32_t> random_words(size_t n, uint64_t seed) {
  hk::host::Rng rng(seed);
  std::vector<int32_t> v(n);
  for (auto& w : v) w = static_cast<int32_t>(static_cast<uint32_t>(rng.next()));
  return v;
}

}  // namespace

TEST(W4A16Format, PackNibbleOrder) {
  // value j of a word in bits 4j..4j+3: q = 0, 1, ..., 7 packs to 0x76543210
  std::vector<uint8_t> q = {0, 1, 2, 3, 4, 5, 6, 7, 15, 14, 13, 12, 11, 10, 9, 8};
  auto w = hk::w4a16_pack(q, 1, 16);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(static_cast<uint32_t>(w[0]), 0x76543210u);
  EXPECT_EQ(static_cast<uint32_t>(w[1]), 0x89ABCDEFu);
  auto z = hk::w4a16_pack_zeros({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 1, 11);
  ASSERT_EQ(z.size(), 2u);
  EXPECT_EQ(static_cast<uint32_t>(z[0]), 0x87654321u);
  EXPECT_EQ(static_cast<uint32_t>(z[1]), 0x00000BA9u);
}

TEST(W4A16Format, PackUnpackRoundTripBitExact) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 8}, {3, 24}, {17, 200}, {64, 1152}}) {
    auto q = random_nibbles(size_t(n * k), uint64_t(n * 1000 + k));
    EXPECT_EQ(hk::w4a16_unpack(hk::w4a16_pack(q, n, k), n, k), q) << n << "x" << k;
    auto words = random_words(size_t(n * k / 8), uint64_t(n + k));  // every bit pattern is a valid word
    EXPECT_EQ(hk::w4a16_pack(hk::w4a16_unpack(words, n, k), n, k), words) << n << "x" << k;
  }
  for (auto [n, g] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {9, 8}, {13, 37}}) {
    auto z = random_nibbles(size_t(n * g), uint64_t(7 * n + g));
    EXPECT_EQ(hk::w4a16_unpack_zeros(hk::w4a16_pack_zeros(z, n, g), n, g), z) << n << "x" << g;
  }
}

TEST(W4A16Format, RepackTiledRoundTripAndLayout) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 8}, {8, 128}, {13, 200}, {72, 1152}, {257, 384}}) {
    auto words = random_words(size_t(n * k / 8), uint64_t(3 * n + k));
    auto tiled = hk::w4a16_repack_tiled(words, n, k);
    const int64_t kp = (k + 127) / 128 * 128;
    ASSERT_EQ(int64_t(tiled.size()), (n + 7) / 8 * kp);
    EXPECT_EQ(hk::w4a16_unrepack_tiled(tiled, n, k), words) << n << "x" << k;
    // The index map is one-to-one, and every slot it does not reach (padding) is zero.
    std::set<int64_t> hit;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t w = 0; w < k / 8; ++w) {
        const int64_t i = hk::w4a16_tiled_index(r, w, kp);
        ASSERT_TRUE(i >= 0 && i < int64_t(tiled.size()));
        EXPECT_TRUE(hit.insert(i).second) << "slot " << i << " reached twice";
      }
    for (int64_t i = 0; i < int64_t(tiled.size()); ++i) {
      if (!hit.count(i)) {
        EXPECT_EQ(tiled[i], 0) << "padding slot " << i;
      }
    }
  }
  // The documented placement: lane l = 4 r + t of n-tile i holds, at word 4 l + c of k-tile b,
  // interchange word (8 i + r, 16 b + 4 c + t).
  const int64_t kp = 256;
  EXPECT_EQ(hk::w4a16_tiled_index(0, 0, kp), 0);
  EXPECT_EQ(hk::w4a16_tiled_index(0, 1, kp), 4);        // t = 1: lane 1
  EXPECT_EQ(hk::w4a16_tiled_index(0, 4, kp), 1);        // c = 1
  EXPECT_EQ(hk::w4a16_tiled_index(1, 0, kp), 16);       // r = 1: lane 4
  EXPECT_EQ(hk::w4a16_tiled_index(0, 16, kp), 128);     // k-tile 1
  EXPECT_EQ(hk::w4a16_tiled_index(9, 17, kp), kp + 128 + 4 * 5);
}

TEST(W4A16Format, QuantizeErrorBoundsAndZeroGroups) {
  const int64_t n = 6, k = 256;
  hk::host::Rng rng(5);
  std::vector<float> w(size_t(n * k));
  for (auto& v : w) v = static_cast<float>(rng.normal());
  for (int64_t i = 0; i < 64; ++i) w[size_t(2 * k + i)] = 0.f;  // row 2's first group (g = 64): all zero
  for (bool sym : {false, true})
    for (int64_t g : {32, 64, 128, 256}) {
      auto qz = hk::w4a16_quantize(w, n, k, g, sym);
      const int64_t G = k / g;
      ASSERT_EQ(int64_t(qz.qweight.size()), n * k / 8);
      ASSERT_EQ(int64_t(qz.scales.size()), n * G);
      ASSERT_EQ(qz.zeros.empty(), sym);
      auto q = hk::w4a16_unpack(qz.qweight, n, k);
      auto z = sym ? std::vector<uint8_t>(size_t(n * G), 8) : hk::w4a16_unpack_zeros(qz.zeros, n, G);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < k; ++i) {
          const double s = qz.scales[r * G + i / g];
          const double deq = (double(q[r * k + i]) - z[r * G + i / g]) * s;
          // Round to nearest: half a step, except symmetric's top value (+7.5 s clamps to +7 s).
          const double bound = (sym ? 1.0 : 0.5) * s + 1e-6;
          EXPECT_LE(std::fabs(deq - w[r * k + i]), bound) << "sym " << sym << " g " << g << " at " << r << "," << i;
        }
      if (g == 64) {
        EXPECT_EQ(qz.scales[2 * G], 1.f);  // an all-zero group: s = 1, q = z, so dequant = 0 exactly
        for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(q[2 * k + i], z[2 * G]);
      }
    }
}

// The problem's fp64 reference against an independent dequantisation (unpack helpers), for both
// layouts and both zero-point modes; a tiled problem whose qweight is the repacked rows one gives
// the same y.
TEST(W4A16Reference, MatchesUnpackedDequantisation) {
  for (bool sym : {false, true})
    for (auto [m, n, k, g] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{3, 13, 96, 32}, {1, 8, 200, 200},
                              {5, 17, 384, 128}}) {
      hk::W4A16Problem rows(m, n, k, g, DType::kF16, sym, W4A16Layout::kRows);
      hk::W4A16Problem tiled(m, n, k, g, DType::kF16, sym, W4A16Layout::kTiled);
      auto in = hktest::smooth_inputs(rows, 11 + m + n);
      auto y = hktest::run_reference(rows, in);
      std::vector<int32_t> words(in[1].values.size());
      for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<int32_t>(in[1].values[i]);
      auto q = hk::w4a16_unpack(words, n, k);
      const int64_t G = k / g;
      std::vector<uint8_t> z(size_t(n * G), 8);
      if (!sym) {
        std::vector<int32_t> zw(in[3].values.size());
        for (size_t i = 0; i < zw.size(); ++i) zw[i] = static_cast<int32_t>(in[3].values[i]);
        z = hk::w4a16_unpack_zeros(zw, n, G);
      }
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t kk = 0; kk < k; ++kk)
            acc += in[0].values[i * k + kk] * (double(q[j * k + kk]) - z[j * G + kk / g]) * in[2].values[j * G + kk / g];
          EXPECT_EQ(y[0].values[i * n + j], hk::host::round_to(DType::kF16, acc)) << rows.key() << " " << i << "," << j;
        }
      auto tiled_in = in;
      auto tw = hk::w4a16_repack_tiled(words, n, k);
      tiled_in[1].spec = tiled.inputs()[1];
      tiled_in[1].values.assign(tw.begin(), tw.end());
      EXPECT_EQ(hktest::run_reference(tiled, tiled_in)[0].values, y[0].values) << tiled.key();
      // Sampled reference (bench shapes) agrees with the full one.
      std::vector<int64_t> flat = {0, m * n - 1, (m * n) / 2};
      std::vector<double> at;
      ASSERT_TRUE(rows.reference_at(in, 0, flat, at));
      for (size_t s = 0; s < flat.size(); ++s) EXPECT_EQ(at[s], y[0].values[flat[s]]);
    }
}

// Every test problem rebuilds from its own input specs and attrs() (the Python path).
TEST(W4A16Family, MakeProblemRoundTrip) {
  const hk::Family* f = hk::Registry::get().family("gemm_w4a16");
  ASSERT_NE(f, nullptr);
  for (auto& p : f->test_problems()) {
    std::vector<TensorView> views;
    for (auto& spec : p->inputs()) views.emplace_back(fake_ptr(), spec.dtype, spec.shape, spec.strides);
    auto q = f->make_problem(views, p->attrs());
    EXPECT_EQ(q->key(), p->key());
  }
}

TEST(W4A16BadInput, TypedErrors) {
  const int64_t M = 4, N = 16, K = 256, g = 128;
  TensorView x(fake_ptr(), DType::kBF16, {M, K}), qw(fake_ptr(), DType::kI32, {N, K / 8});
  TensorView s(fake_ptr(), DType::kBF16, {N, K / g}), z(fake_ptr(), DType::kI32, {N, 1});
  TensorView y(fake_ptr(), DType::kBF16, {M, N});
  hk::W4A16Options opt;
  opt.group_size = g;
  // dtypes
  TensorView xf(fake_ptr(), DType::kF32, {M, K});
  expect_error(ErrorKind::kType, "x is f32, expected bf16 or f16", [&] { hk::gemm_w4a16(xf, qw, s, &z, y, opt); });
  TensorView qh(fake_ptr(), DType::kF16, {N, K / 8});
  expect_error(ErrorKind::kType, "qweight is f16, expected i32", [&] { hk::gemm_w4a16(x, qh, s, &z, y, opt); });
  TensorView sh(fake_ptr(), DType::kF16, {N, K / g});
  expect_error(ErrorKind::kType, "scales is f16, expected bf16", [&] { hk::gemm_w4a16(x, qw, sh, &z, y, opt); });
  TensorView zu(fake_ptr(), DType::kU8, {N, 1});
  expect_error(ErrorKind::kType, "zeros is u8, expected i32", [&] { hk::gemm_w4a16(x, qw, s, &zu, y, opt); });
  TensorView yh(fake_ptr(), DType::kF16, {M, N});
  expect_error(ErrorKind::kType, "y is f16, expected bf16", [&] { hk::gemm_w4a16(x, qw, s, &z, yh, opt); });
  // shapes and group sizes
  TensorView x9(fake_ptr(), DType::kBF16, {M, 100});
  opt.group_size = 100;
  expect_error(ErrorKind::kValue, "K must be a positive multiple of 8", [&] { hk::gemm_w4a16(x9, qw, s, &z, y, opt); });
  for (int64_t bad : {48, 96, 0, -32, 512}) {
    opt.group_size = bad;
    expect_error(ErrorKind::kValue, "group_size must be a multiple of 32", [&] { hk::gemm_w4a16(x, qw, s, &z, y, opt); });
  }
  opt.group_size = g;
  TensorView qw2(fake_ptr(), DType::kI32, {N, K / 4});
  expect_error(ErrorKind::kValue, "qweight has shape [16x64], expected [16x32]", [&] { hk::gemm_w4a16(x, qw2, s, &z, y, opt); });
  TensorView s3(fake_ptr(), DType::kBF16, {N, 3});
  expect_error(ErrorKind::kValue, "scales has shape [16x3], expected [16x2]", [&] { hk::gemm_w4a16(x, qw, s3, &z, y, opt); });
  TensorView z2(fake_ptr(), DType::kI32, {N, 2});
  expect_error(ErrorKind::kValue, "zeros has shape [16x2], expected [16x1]", [&] { hk::gemm_w4a16(x, qw, s, &z2, y, opt); });
  TensorView y2(fake_ptr(), DType::kBF16, {M, N + 1});
  expect_error(ErrorKind::kValue, "y has shape", [&] { hk::gemm_w4a16(x, qw, s, &z, y2, opt); });
  opt.layout = W4A16Layout::kTiled;  // tiled: [ceil(N / 8), round_up(K, 128)]
  expect_error(ErrorKind::kValue, "qweight has shape [16x32], expected [2x256]", [&] { hk::gemm_w4a16(x, qw, s, &z, y, opt); });
  opt.layout = W4A16Layout::kRows;
  // null pointers, layouts
  TensorView qn(nullptr, DType::kI32, {N, K / 8});
  expect_error(ErrorKind::kValue, "qweight is a null pointer", [&] { hk::gemm_w4a16(x, qn, s, &z, y, opt); });
  TensorView st(fake_ptr(), DType::kBF16, {N, K / g}, {1, N});
  expect_error(ErrorKind::kNotSupported, "scales must be contiguous", [&] { hk::gemm_w4a16(x, qw, st, &z, y, opt); });
  TensorView xt(fake_ptr(), DType::kBF16, {M, K}, {1, M});
  expect_error(ErrorKind::kNotSupported, "contiguous last dim", [&] { hk::gemm_w4a16(xt, qw, s, &z, y, opt); });
  // make_problem: input count, attributes
  const hk::Family* f = hk::Registry::get().family("gemm_w4a16");
  expect_error(ErrorKind::kValue, "takes inputs (x, qweight, scales[, zeros])", [&] { f->make_problem({x, qw}, {}); });
  expect_error(ErrorKind::kValue, "layout must be", [&] { f->make_problem({x, qw, s}, {{"layout", std::string("cols")}}); });
  expect_error(ErrorKind::kValue, "group_sise", [&] { f->make_problem({x, qw, s}, {{"group_sise", int64_t(128)}}); });
  // host helpers
  expect_error(ErrorKind::kValue, "values must be in [0, 15]", [&] { hk::w4a16_pack(std::vector<uint8_t>(8, 16), 1, 8); });
  expect_error(ErrorKind::kValue, "K a multiple of 8", [&] { hk::w4a16_pack(std::vector<uint8_t>(12, 1), 1, 12); });
  expect_error(ErrorKind::kValue, "qweight has 3 elements", [&] { hk::w4a16_repack_tiled(std::vector<int32_t>(3), 1, 16); });
  expect_error(ErrorKind::kValue, "non-finite", [&] {
    hk::w4a16_quantize(std::vector<float>(32, std::nanf("")), 1, 32, 32, false);
  });
}

TEST(W4A16BadInput, EmptyIsANoOp) {
  TensorView x(nullptr, DType::kF16, {0, 64}), qw(fake_ptr(), DType::kI32, {8, 8});
  TensorView s(fake_ptr(), DType::kF16, {8, 2}), y(nullptr, DType::kF16, {0, 8});
  hk::W4A16Options opt;
  opt.group_size = 32;
  EXPECT_NO_THROW(hk::gemm_w4a16(x, qw, s, nullptr, y, opt));
  TensorView x1(fake_ptr(), DType::kF16, {3, 64}), qw0(nullptr, DType::kI32, {0, 8}), s0(nullptr, DType::kF16, {0, 2});
  TensorView y0(nullptr, DType::kF16, {3, 0});
  EXPECT_NO_THROW(hk::gemm_w4a16(x1, qw0, s0, nullptr, y0, opt));
}

TEST(W4A16Dispatch, RoutesAndHonestSupports) {
  auto& reg = hk::Registry::get();
  using L = W4A16Layout;
  auto pick = [&](const hk::W4A16Problem& p) { return reg.choose(p).variant->name(); };
  // M = 1 in the rows layout: the GEMV kernel; otherwise up to 32 rows, the split-K decode kernel
  EXPECT_EQ(pick(hk::W4A16Problem(1, 4096, 4096, 128, DType::kBF16, false)), "v02_decode_gemv");
  EXPECT_EQ(pick(hk::W4A16Problem(1, 4096, 4096, 128, DType::kBF16, false, L::kTiled)), "v04_decode_mma_splitk");
  EXPECT_EQ(pick(hk::W4A16Problem(4, 8192, 8192, 128, DType::kBF16, false, L::kTiled)), "v04_decode_mma_splitk");
  EXPECT_EQ(pick(hk::W4A16Problem(5, 4096, 4096, 128, DType::kF16, true)), "v04_decode_mma_splitk");
  EXPECT_EQ(pick(hk::W4A16Problem(16, 8192, 8192, 128, DType::kBF16, false)), "v04_decode_mma_splitk");
  EXPECT_EQ(pick(hk::W4A16Problem(32, 8192, 8192, 128, DType::kBF16, false)), "v04_decode_mma_splitk");
  // the tiled layout with groups of 64 and more than 16 rows: v04 declines, v03 takes it
  EXPECT_EQ(pick(hk::W4A16Problem(24, 1024, 1024, 64, DType::kBF16, false, L::kTiled)), "v03_mma_dequant");
  // past 32 rows of x: one dequantisation pass, then cuBLAS
  EXPECT_EQ(pick(hk::W4A16Problem(33, 8192, 8192, 128, DType::kBF16, false)), "baseline_cublas_dequant");
  EXPECT_EQ(pick(hk::W4A16Problem(4096, 4096, 4096, 128, DType::kBF16, false, L::kTiled)), "baseline_cublas_dequant");
  EXPECT_NE(reg.variant("gemm_w4a16", "v04_decode_mma_splitk")->supports(hk::W4A16Problem(33, 64, 256, 128, DType::kBF16, false)), "");
  // rows layout with K not a multiple of 32 (g = K = 200): cuBLAS after a dequantisation pass
  EXPECT_EQ(pick(hk::W4A16Problem(1, 64, 200, 200, DType::kBF16, false)), "baseline_cublas_dequant");
  EXPECT_EQ(pick(hk::W4A16Problem(64, 64, 200, 200, DType::kBF16, false)), "baseline_cublas_dequant");
  EXPECT_EQ(reg.variant("gemm_w4a16", "v02_decode_gemv")->supports(hk::W4A16Problem(16, 64, 256, 128, DType::kBF16, false)), "");
  // the tiled layout pads K to 128: the fused rungs take it
  EXPECT_EQ(pick(hk::W4A16Problem(1, 64, 200, 200, DType::kBF16, false, L::kTiled)), "v04_decode_mma_splitk");
  // x at a 2-byte phase (a view at an odd element offset)
  hk::W4A16Problem odd(1, 4096, 4096, 128, DType::kBF16, false);
  odd.align_bytes = 2;
  EXPECT_EQ(pick(odd), "baseline_cublas_dequant");
  hk::W4A16Problem odd_ld(64, 256, 256, 128, DType::kBF16, false, L::kRows, 3);
  EXPECT_EQ(pick(odd_ld), "baseline_cublas_dequant");
  EXPECT_NE(reg.variant("gemm_w4a16", "v02_decode_gemv")->supports(hk::W4A16Problem(17, 64, 256, 128, DType::kBF16, false)), "");
  EXPECT_FALSE(reg.variant("gemm_w4a16", "v01_naive")->is(hk::kFlagProduction));
  EXPECT_TRUE(reg.variant("gemm_w4a16", "v01_naive")->is(hk::kFlagReference));
  EXPECT_TRUE(reg.variant("gemm_w4a16", "baseline_cublas_dequant")->is(hk::kFlagBaseline));
}

TEST(W4A16Dispatch, EveryTestAndBenchProblemGetsAProductionRung) { hktest::expect_production_choice("gemm_w4a16"); }

// The public op on weights from w4a16_quantize (real quantisation, not random words), every
// group size, both zero-point modes and layouts, M from decode to prefill, against the fp64
// reference of the same problem; and x or y at odd element offsets (the baseline's any-alignment
// path) with padded rows.
TEST(W4A16Public, QuantisedWeightsAndMisalignedViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  using L = W4A16Layout;
  uint64_t seed = 41;
  for (int64_t m : {1, 7, 16, 33, 128})
    for (auto [n, k, g] : {std::tuple<int64_t, int64_t, int64_t>{264, 640, 128}, {136, 224, 32}, {72, 320, 64},
                           {96, 384, 384}})
      for (bool sym : {false, true})
        for (L layout : {L::kRows, L::kTiled}) {
          const DType dt = (m + g) % 2 ? DType::kF16 : DType::kBF16;
          hk::W4A16Problem p(m, n, k, g, dt, sym, layout);
          // Inputs: x random, W quantised from N(0, 1), scales rounded to the dtype.
          hk::host::Rng rng(++seed);
          std::vector<float> w(size_t(n * k));
          for (auto& v : w) v = static_cast<float>(rng.normal());
          auto qz = hk::w4a16_quantize(w, n, k, g, sym);
          auto specs = p.inputs();
          std::vector<hk::HostTensor> in;
          in.push_back(hk::host::random_tensor(specs[0], seed));
          auto words = layout == L::kTiled ? hk::w4a16_repack_tiled(qz.qweight, n, k) : qz.qweight;
          in.push_back({specs[1], std::vector<double>(words.begin(), words.end())});
          std::vector<double> sc(qz.scales.size());
          for (size_t i = 0; i < sc.size(); ++i) sc[i] = hk::host::round_to(dt, qz.scales[i]);
          in.push_back({specs[2], sc});
          if (!sym) in.push_back({specs[3], std::vector<double>(qz.zeros.begin(), qz.zeros.end())});
          auto ref = hktest::run_reference(p, in);
          // Device copies, y poisoned.
          std::vector<hk::bench::DeviceBuffer> bufs;
          std::vector<TensorView> views;
          for (auto& t : in) {
            std::vector<uint8_t> bytes;
            hk::host::encode(t.spec, t.values, bytes);
            bufs.emplace_back(bytes.size());
            HK_CHECK_CUDA(cudaMemcpy(bufs.back().get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
            views.emplace_back(bufs.back().get(), t.spec.dtype, t.spec.shape, t.spec.strides);
          }
          const hk::TensorSpec yspec = p.outputs()[0];
          hk::bench::DeviceBuffer ybuf(hk::host::storage_bytes(yspec));
          HK_CHECK_CUDA(cudaMemset(ybuf.get(), 0xFF, hk::host::storage_bytes(yspec)));
          TensorView y(ybuf.get(), dt, yspec.shape, yspec.strides);
          hk::W4A16Options opt{g, layout};
          hk::gemm_w4a16(views[0], views[1], views[2], sym ? nullptr : &views[3], y, opt);
          HK_CHECK_CUDA(cudaDeviceSynchronize());
          std::vector<uint8_t> out(hk::host::storage_bytes(yspec));
          HK_CHECK_CUDA(cudaMemcpy(out.data(), ybuf.get(), out.size(), cudaMemcpyDeviceToHost));
          std::vector<double> got;
          hk::host::decode(yspec, out, got);
          const hk::Tolerance tol = p.tolerance(0);
          int bad = 0;
          for (size_t i = 0; i < got.size() && bad < 5; ++i) {
            const double r = ref[0].values[i];
            const bool ok = std::isnan(r) ? std::isnan(got[i]) : std::fabs(got[i] - r) <= tol.atol + tol.rtol * std::fabs(r);
            if (!ok) {
              ++bad;
              ADD_FAILURE() << p.key() << " via " << hk::Registry::get().choose(p).variant->name() << " at " << i
                            << ": got " << got[i] << ", expected " << r;
            }
          }
        }
  // Misaligned views: x and y at odd element offsets, padded rows.
  using hktest::Place;
  for (L layout : {L::kRows, L::kTiled})
    for (int64_t m : {1, 33}) {
      hk::W4A16Problem p(m, 72, 256, 64, DType::kBF16, false, layout);
      hktest::check_offset_views(
          p, {{1, 256 + 3}, {}, {}, {}}, {{3, 72 + 5}},
          [&](auto& iv, auto& ov) {
            hk::W4A16Options opt{64, layout};
            hk::gemm_w4a16(iv[0], iv[1], iv[2], &iv[3], ov[0], opt);
          },
          23, "misaligned " + p.key());
    }
}
