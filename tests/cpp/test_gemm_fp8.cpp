// FP8 GEMM beyond the registry sweep: bad input (CPU, fake pointers), the oracle and the host
// quantiser by hand, block-wise against per-tensor scaling with outliers (CPU, on the fp64
// reference path), the dispatch, and on the GPU the public op's error in DeepGEMM's calc_diff
// sense on odd shapes, a [K, N] weight, and the device quantiser against the host one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/case.hpp"
#include "core/host.hpp"
#include "gemm_fp8/gemm_fp8_op.hpp"
#include "hk/hk.hpp"
#include "test_util.hpp"

using hk::DType;
using hk::ErrorKind;
using hk::Fp8Scaling;
using hk::TensorView;
using hktest::download;
using hktest::expect_error;
using hktest::fake_ptr;
using hktest::upload;

namespace {

// DeepGEMM's calc_diff: 1 - 2 sum(x y) / sum(x^2 + y^2); 0 for equal tensors, ~relative error^2.
double calc_diff(const std::vector<double>& x, const std::vector<double>& y) {
  double xy = 0, xx = 0;
  for (size_t i = 0; i < x.size(); ++i) xy += x[i] * y[i], xx += x[i] * x[i] + y[i] * y[i];
  return xx == 0 ? 0.0 : 1.0 - 2.0 * xy / xx;
}

std::vector<double> normal(int64_t n, uint64_t seed, double scale = 1.0) {
  hk::host::Rng rng(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = scale * rng.normal();
  return v;
}

// x (rows x cols) with `count` entries multiplied by `factor` (the outliers of real activations).
void inject_outliers(std::vector<double>& x, int64_t count, double factor, uint64_t seed) {
  hk::host::Rng rng(seed);
  for (int64_t i = 0; i < count; ++i) x[rng.next() % x.size()] *= factor;
}

// fp64 X W^T of [M, K] and [N, K].
std::vector<double> matmul_nt(const std::vector<double>& x, const std::vector<double>& w, int64_t m, int64_t n,
                              int64_t k) {
  std::vector<double> d(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) acc += x[i * k + kk] * w[j * k + kk];
      d[i * n + j] = acc;
    }
  return d;
}

// The fp64 D of quantised operands (the oracle, before any output rounding).
std::vector<double> dequant_matmul(const hk::GemmFp8Problem& p, const std::vector<double>& a,
                                   const std::vector<double>& sa, const std::vector<double>& b,
                                   const std::vector<double>& sb) {
  std::vector<double> d(p.m * p.n);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) d[i * p.n + j] = hk::gemm_fp8_exact(p, a, b, sa, sb, nullptr, i, j);
  return d;
}

}  // namespace

TEST(GemmFp8BadInput, WrongDtypes) {
  TensorView a(fake_ptr(), DType::kF8E4M3, {8, 32}), b(fake_ptr(), DType::kF8E4M3, {16, 32});
  TensorView s(fake_ptr(), DType::kF32, {1}), d(fake_ptr(), DType::kBF16, {8, 16});
  TensorView abf(fake_ptr(), DType::kBF16, {8, 32});
  expect_error(ErrorKind::kType, "a is bf16, expected e4m3 or e5m2", [&] { hk::gemm_fp8(abf, s, b, s, d); });
  TensorView bi8(fake_ptr(), DType::kU8, {16, 32});
  expect_error(ErrorKind::kType, "b is u8, expected e4m3 or e5m2", [&] { hk::gemm_fp8(a, s, bi8, s, d); });
  TensorView s16(fake_ptr(), DType::kF16, {1});
  expect_error(ErrorKind::kType, "sa is f16, expected f32", [&] { hk::gemm_fp8(a, s16, b, s, d); });
  TensorView d8(fake_ptr(), DType::kF8E4M3, {8, 16});
  expect_error(ErrorKind::kType, "d is e4m3, expected bf16, f16 or f32", [&] { hk::gemm_fp8(a, s, b, s, d8); });
  TensorView bias(fake_ptr(), DType::kF32, {16});
  expect_error(ErrorKind::kType, "bias is f32 but d is bf16", [&] { hk::gemm_fp8(a, s, b, s, d, &bias); });
}

TEST(GemmFp8BadInput, Shapes) {
  TensorView a(fake_ptr(), DType::kF8E4M3, {8, 32}), s(fake_ptr(), DType::kF32, {1});
  TensorView d(fake_ptr(), DType::kBF16, {8, 16});
  TensorView b31(fake_ptr(), DType::kF8E4M3, {16, 31});
  expect_error(ErrorKind::kValue, "K must match, got 32 and 31", [&] { hk::gemm_fp8(a, s, b31, s, d); });
  TensorView a0(fake_ptr(), DType::kF8E4M3, {8, 0}), b0(fake_ptr(), DType::kF8E4M3, {16, 0});
  expect_error(ErrorKind::kValue, "K must be at least 1", [&] { hk::gemm_fp8(a0, s, b0, s, d); });
  TensorView b(fake_ptr(), DType::kF8E4M3, {16, 32});
  TensorView d9(fake_ptr(), DType::kBF16, {8, 9});
  expect_error(ErrorKind::kValue, "d must be [8, 16]", [&] { hk::gemm_fp8(a, s, b, s, d9); });
  // Row-wise: sa [M], sb [N].
  TensorView sa_row(fake_ptr(), DType::kF32, {9}), sb_row(fake_ptr(), DType::kF32, {16});
  expect_error(ErrorKind::kValue, "row-wise sa must be [8], got [9]", [&] { hk::gemm_fp8(a, sa_row, b, sb_row, d); });
  // Block-wise: sa [M, ceil(K/128)], sb [ceil(N/128), ceil(K/128)].
  TensorView sa_blk(fake_ptr(), DType::kF32, {8, 1}), sb_blk(fake_ptr(), DType::kF32, {16, 1});
  expect_error(ErrorKind::kValue, "block-wise sb must be [1x1], got [16x1]", [&] { hk::gemm_fp8(a, sa_blk, b, sb_blk, d); });
  TensorView bias(fake_ptr(), DType::kBF16, {15});
  expect_error(ErrorKind::kValue, "bias must be [16]", [&] { hk::gemm_fp8(a, s, b, s, d, &bias); });
  TensorView a3(fake_ptr(), DType::kF8E4M3, {2, 8, 32});
  expect_error(ErrorKind::kValue, "a must be a matrix", [&] { hk::gemm_fp8(a3, s, b, s, d); });
}

TEST(GemmFp8BadInput, LayoutsAndPointers) {
  TensorView a(fake_ptr(), DType::kF8E4M3, {8, 32}), b(fake_ptr(), DType::kF8E4M3, {16, 32});
  TensorView s(fake_ptr(), DType::kF32, {1});
  TensorView dcol(fake_ptr(), DType::kBF16, {8, 16}, {1, 8});
  expect_error(ErrorKind::kNotSupported, "d must be row-major", [&] { hk::gemm_fp8(a, s, b, s, dcol); });
  TensorView d(fake_ptr(), DType::kBF16, {8, 16});
  TensorView anull(nullptr, DType::kF8E4M3, {8, 32});
  expect_error(ErrorKind::kValue, "a is a null pointer with 256 elements", [&] { hk::gemm_fp8(anull, s, b, s, d); });
  TensorView snull(nullptr, DType::kF32, {1});
  expect_error(ErrorKind::kValue, "sb is a null pointer", [&] { hk::gemm_fp8(a, s, b, snull, d); });
  TensorView bias(fake_ptr(), DType::kBF16, {16}, {2});
  expect_error(ErrorKind::kNotSupported, "bias must be contiguous", [&] { hk::gemm_fp8(a, s, b, s, d, &bias); });
  // An empty output is a no-op: nothing is launched at the fake pointers.
  TensorView am(fake_ptr(), DType::kF8E4M3, {0, 32}), sm(fake_ptr(), DType::kF32, {0}), dm(fake_ptr(), DType::kBF16, {0, 16});
  TensorView sb(fake_ptr(), DType::kF32, {16});
  EXPECT_NO_THROW(hk::gemm_fp8(am, sm, b, sb, dm));
}

// fast_accum: per-tensor and row-wise only (block-wise scales are a promotion), by the public op
// and by make_problem; the problem it poses is its own (key, attributes, a looser tolerance).
TEST(GemmFp8BadInput, FastAccum) {
  TensorView a(fake_ptr(), DType::kF8E4M3, {8, 256}), b(fake_ptr(), DType::kF8E4M3, {16, 256});
  TensorView d(fake_ptr(), DType::kBF16, {8, 16});
  TensorView sa_blk(fake_ptr(), DType::kF32, {8, 2}), sb_blk(fake_ptr(), DType::kF32, {1, 2});
  hk::GemmFp8Options fast;
  fast.fast_accum = true;
  expect_error(ErrorKind::kValue, "fast_accum takes per-tensor or row-wise scales",
               [&] { hk::gemm_fp8(a, sa_blk, b, sb_blk, d, fast); });
  const hk::Family* f = hk::Registry::get().family("gemm_fp8");
  hk::Attrs attrs;
  attrs.set("fast_accum", true);
  expect_error(ErrorKind::kValue, "fast_accum takes per-tensor or row-wise scales",
               [&] { f->make_problem({a, sa_blk, b, sb_blk}, attrs); });
  TensorView s(fake_ptr(), DType::kF32, {1});
  auto p = f->make_problem({a, s, b, s}, attrs);
  EXPECT_NE(p->key().find("_fast"), std::string::npos) << p->key();
  EXPECT_TRUE(p->attrs().get_bool("gemm_fp8", "fast_accum", false));
  hk::GemmFp8Problem promoted(8, 16, 4096, DType::kF8E4M3, DType::kF8E4M3, DType::kBF16, Fp8Scaling::kTensor);
  hk::GemmFp8Problem accum = promoted;
  accum.fast_accum = true;
  EXPECT_GT(accum.tolerance(0).atol, 2 * promoted.tolerance(0).atol);
  EXPECT_LT(accum.tolerance(0).atol, std::sqrt(128.0) / 2);  // a lost k-block still fails
}

TEST(GemmFp8BadInput, Quantize) {
  TensorView x(fake_ptr(), DType::kF32, {8, 256}), q(fake_ptr(), DType::kF8E4M3, {8, 256});
  TensorView s(fake_ptr(), DType::kF32, {1});
  TensorView xi(fake_ptr(), DType::kI32, {8, 256});
  expect_error(ErrorKind::kType, "x is i32", [&] { hk::quantize_fp8(xi, q, s, Fp8Scaling::kTensor); });
  TensorView qb(fake_ptr(), DType::kBF16, {8, 256});
  expect_error(ErrorKind::kType, "data is bf16", [&] { hk::quantize_fp8(x, qb, s, Fp8Scaling::kTensor); });
  TensorView srow(fake_ptr(), DType::kF32, {7});
  expect_error(ErrorKind::kValue, "row-wise scales must be [8], got [7]", [&] { hk::quantize_fp8(x, q, srow, Fp8Scaling::kRow); });
  TensorView sblk(fake_ptr(), DType::kF32, {8, 2});
  expect_error(ErrorKind::kValue, "block_rows must be 1", [&] { hk::quantize_fp8(x, q, sblk, Fp8Scaling::kBlock, 64); });
  expect_error(ErrorKind::kValue, "block-wise scales must be [1x2]",
               [&] { hk::quantize_fp8(x, q, sblk, Fp8Scaling::kBlock, 128); });
  TensorView xs(fake_ptr(), DType::kF32, {8, 256}, {512, 1});
  expect_error(ErrorKind::kNotSupported, "x must be contiguous", [&] { hk::quantize_fp8(xs, q, s, Fp8Scaling::kTensor); });
  expect_error(ErrorKind::kValue, "scaling must be", [&] { hk::parse_fp8_scaling("blockwise"); });
}

TEST(GemmFp8, ScalingFromScaleShapes) {
  auto view = [](std::vector<int64_t> shape) { return TensorView(fake_ptr(), DType::kF32, std::move(shape)); };
  EXPECT_EQ(hk::gemm_fp8_scaling(view({1}), view({1})), Fp8Scaling::kTensor);
  EXPECT_EQ(hk::gemm_fp8_scaling(view({}), view({1})), Fp8Scaling::kTensor);
  EXPECT_EQ(hk::gemm_fp8_scaling(view({64}), view({1})), Fp8Scaling::kRow);
  EXPECT_EQ(hk::gemm_fp8_scaling(view({64, 3}), view({2, 3})), Fp8Scaling::kBlock);
  EXPECT_EQ(hk::fp8_scale_shape(Fp8Scaling::kBlock, 300, 257, 128), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(hk::fp8_scale_shape(Fp8Scaling::kBlock, 300, 257, 1), (std::vector<int64_t>{300, 3}));
}

// The oracle by hand: K = 130 spans two scaling blocks (128 + 2), each with its own scales.
TEST(GemmFp8, ReferenceBlockScalesByHand) {
  hk::GemmFp8Problem p(1, 129, 130, DType::kF8E4M3, DType::kF8E4M3, DType::kF32, Fp8Scaling::kBlock);
  std::vector<double> a(130, 1.0), b(129 * 130, 2.0);
  // sa [1, 2], sb [2, 2]: column 128 of D lies in N block 1.
  std::vector<double> sa = {0.5, 4.0}, sb = {1.0, 3.0, 0.25, 8.0};
  // Column 0: 128 * 2 * 0.5 * 1 + 2 * 2 * 4 * 3 = 128 + 48; column 128: 128 * 2 * 0.5 * 0.25 + 4 * 4 * 8.
  EXPECT_EQ(hk::gemm_fp8_exact(p, a, b, sa, sb, nullptr, 0, 0), 176.0);
  EXPECT_EQ(hk::gemm_fp8_exact(p, a, b, sa, sb, nullptr, 0, 128), 32.0 + 128.0);
  hk::GemmFp8Problem t(1, 1, 3, DType::kF8E4M3, DType::kF8E5M2, DType::kF32, Fp8Scaling::kRow);
  std::vector<double> bias = {0.5};
  EXPECT_EQ(hk::gemm_fp8_exact(t, {1, 2, 3}, {4, 5, 6}, {2.0}, {0.5}, &bias, 0, 0), 32.5);
}

// The host quantiser: each group's largest magnitude lands on the format's largest finite value,
// an all-zero group gets scale 1, and scale * data is within half an fp8 ulp of x.
TEST(GemmFp8, HostQuantiser) {
  const int64_t rows = 130, cols = 300;
  std::vector<double> x = normal(rows * cols, 11);
  for (int64_t c = 0; c < cols; ++c) x[5 * cols + c] = 0.0;  // an all-zero row
  for (DType dt : {DType::kF8E4M3, DType::kF8E5M2})
    for (auto [mode, br] : {std::pair{Fp8Scaling::kTensor, 1}, {Fp8Scaling::kRow, 1}, {Fp8Scaling::kBlock, 1},
                            {Fp8Scaling::kBlock, 128}}) {
      std::vector<double> q, s;
      hk::quantize_fp8_host(x, rows, cols, dt, mode, br, q, s);
      const double fmax = hk::fp8_max_finite(dt), ulp = dt == DType::kF8E4M3 ? 0x1p-3 : 0x1p-2;
      double qmax = 0;
      for (int64_t i = 0; i < rows * cols; ++i) qmax = std::max(qmax, std::fabs(q[i]));
      EXPECT_EQ(qmax, fmax) << hk::to_string(mode);
      if (mode == Fp8Scaling::kRow) {
        EXPECT_EQ(s[5], 1.0);
      }
      const std::vector<int64_t> shape = hk::fp8_scale_shape(mode, rows, cols, br);
      const int64_t scols = shape.size() == 2 ? shape[1] : 1;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t g = mode == Fp8Scaling::kTensor ? 0 : mode == Fp8Scaling::kRow ? r : (r / br) * scols + c / 128;
          const double v = x[r * cols + c], back = q[r * cols + c] * s[g];
          // Normal numbers: relative half ulp; subnormals of the format: absolute, in units of the scale.
          EXPECT_LE(std::fabs(back - v), std::max(std::fabs(v) * ulp, s[g] * 0x1p-9) * 1.0001)
              << hk::to_string(mode) << " " << r << "," << c;
          if (::testing::Test::HasFailure()) return;
        }
    }
}

// Outliers (a few activations 10^5 x the rest): one per-tensor scale spends the format's range
// on them and pushes every other value of A into e4m3's subnormals (below 2^-6 after scaling),
// where a 3-bit mantissa is no longer relative precision; row-wise and 1 x 128 block scales
// confine that to the outliers' rows or blocks. Measured on the rows of D without an outlier
// (an outlier row's error is the outlier's own rounding, alike in every mode), against the fp64
// product of the unquantised operands, on the fp64 reference path: no GPU needed.
TEST(GemmFp8, BlockScalingBeatsTensorScalingWithOutliers) {
  const int64_t m = 256, n = 256, k = 512;
  std::vector<double> x = normal(m * k, 21), w = normal(n * k, 22, 0.05);
  std::vector<bool> outlier_row(m, false);
  hk::host::Rng rng(23);
  for (int i = 0; i < 12; ++i) {
    const int64_t at = static_cast<int64_t>(rng.next() % (m * k));
    x[at] = (x[at] < 0 ? -1e5 : 1e5);
    outlier_row[at / k] = true;
  }
  auto clean_rows = [&](const std::vector<double>& d) {
    std::vector<double> kept;
    for (int64_t i = 0; i < m; ++i)
      if (!outlier_row[i]) kept.insert(kept.end(), d.begin() + i * n, d.begin() + (i + 1) * n);
    return kept;
  };
  const std::vector<double> exact = clean_rows(matmul_nt(x, w, m, n, k));
  double diffs[3];
  int idx = 0;
  for (Fp8Scaling mode : {Fp8Scaling::kTensor, Fp8Scaling::kRow, Fp8Scaling::kBlock}) {
    hk::GemmFp8Problem p(m, n, k, DType::kF8E4M3, DType::kF8E4M3, DType::kF32, mode);
    std::vector<double> qa, sa, qb, sb;
    hk::quantize_fp8_host(x, m, k, DType::kF8E4M3, mode, 1, qa, sa);
    hk::quantize_fp8_host(w, n, k, DType::kF8E4M3, mode, 128, qb, sb);
    diffs[idx++] = calc_diff(clean_rows(dequant_matmul(p, qa, sa, qb, sb)), exact);
  }
  EXPECT_LE(diffs[2], diffs[0]) << "block " << diffs[2] << " vs tensor " << diffs[0];
  EXPECT_LE(diffs[1], diffs[0]) << "row " << diffs[1] << " vs tensor " << diffs[0];
  // The comparison has teeth: per-tensor scaling is several times worse here, while block-wise
  // scaling keeps e4m3's rounding error (calc_diff of a few 1e-3 at most).
  EXPECT_GT(diffs[0], 4 * diffs[2]) << "tensor " << diffs[0] << " vs block " << diffs[2];
  EXPECT_LT(diffs[2], 5e-3) << "block-wise quantisation error";
}

TEST(GemmFp8, DispatchChoosesProductionRungs) {
  hktest::expect_production_choice("gemm_fp8");
  auto& reg = hk::Registry::get();
  const auto e4 = DType::kF8E4M3;
  // Aligned K-major operands: cuBLASLt in every scaling mode (on a GPU its heuristic has the last
  // word; without one the rules its supports() states).
  hk::GemmFp8Problem tensor(4096, 4096, 4096, e4, e4, DType::kBF16, Fp8Scaling::kTensor);
  EXPECT_EQ(reg.pick(tensor).name(), "baseline_cublaslt");
  hk::GemmFp8Problem block(4096, 7168, 16384, e4, e4, DType::kBF16, Fp8Scaling::kBlock);
  EXPECT_EQ(reg.pick(block).name(), "baseline_cublaslt");
  hk::GemmFp8Problem row(4096, 4096, 4096, e4, e4, DType::kBF16, Fp8Scaling::kRow);
  EXPECT_EQ(reg.pick(row).name(), "baseline_cublaslt");
  hk::GemmFp8Problem decode(64, 2112, 7168, e4, e4, DType::kBF16, Fp8Scaling::kBlock);
  EXPECT_EQ(reg.pick(decode).name(), "baseline_cublaslt");
  for (const char* ladder : {"v02_wgmma_tensor_row", "v03_wgmma_block_scaled", "v06_cluster_multicast"})
    EXPECT_FALSE(reg.variant("gemm_fp8", ladder)->is(hk::kFlagProduction)) << ladder;
  // What Lt's block-scaled kernels decline: K not a multiple of 128 (decode-like: split K), M not
  // a multiple of 4.
  hk::GemmFp8Problem decode_k(64, 2112, 7104, e4, e4, DType::kBF16, Fp8Scaling::kBlock);
  EXPECT_EQ(reg.pick(decode_k).name(), "v05_split_k");  // 17 tiles over 56 k-blocks
  hk::GemmFp8Problem odd_m(4098, 4096, 4096, e4, e4, DType::kBF16, Fp8Scaling::kBlock);
  EXPECT_EQ(reg.pick(odd_m).name(), "v08_lean_issue");
  hk::GemmFp8Problem odd_k(17, 17, 1001, e4, e4, DType::kBF16, Fp8Scaling::kRow);
  EXPECT_EQ(reg.pick(odd_k).name(), "v04_aligned_pack");
  hk::GemmFp8Problem kn(128, 256, 512, e4, e4, DType::kBF16, Fp8Scaling::kBlock, true);
  EXPECT_EQ(reg.pick(kn).name(), "v04_aligned_pack");
  // A D whose base is not 16-byte aligned (a view at an offset): Lt declines it before the launch,
  // and so does v08, which stores D with TMA; v07, which stores D from registers, serves it.
  hk::GemmFp8Problem d_off(4096, 4096, 4096, e4, e4, DType::kBF16, Fp8Scaling::kTensor);
  d_off.d_align_bytes = 4;
  EXPECT_EQ(reg.pick(d_off).name(), "v07_wgmma_in_flight");
  EXPECT_NE(reg.variant("gemm_fp8", "baseline_cublaslt")->supports(d_off).find("D 16-byte aligned"), std::string::npos);
}

// `hk bench gemm_fp8 --shape MxNxK[:scaling]`: a bare shape poses per-tensor and block-wise.
TEST(GemmFp8, BenchShapes) {
  const hk::Family* f = hk::Registry::get().family("gemm_fp8");
  ASSERT_NE(f, nullptr);
  hk::BenchSelect sel;
  sel.shapes = {"64x2112x7168:block", "4096x4096x4096", "17x9x33:row"};
  std::vector<std::string> keys;
  for (auto& p : f->bench_problems(sel)) keys.push_back(p->key());
  EXPECT_EQ(keys, (std::vector<std::string>{"m64_n2112_k7168_e4m3e4m3_bf16_block", "m4096_n4096_k4096_e4m3e4m3_bf16_tensor",
                                            "m4096_n4096_k4096_e4m3e4m3_bf16_block", "m17_n9_k33_e4m3e4m3_bf16_row"}));
  sel.shapes = {"64x2112:block"};
  expect_error(ErrorKind::kValue, "shape must be MxNxK", [&] { f->bench_problems(sel); });
  sel.shapes = {"64x64x64:channel"};
  expect_error(ErrorKind::kValue, "scaling must be", [&] { f->bench_problems(sel); });
  sel.shapes = {};
  sel.dtypes = {DType::kBF16};
  expect_error(ErrorKind::kType, "is not e4m3 or e5m2", [&] { f->bench_problems(sel); });
}

namespace {

// The public op on host-quantised N(0, 1) data with outliers; calc_diff against the fp64 D of
// the dequantised operands. b_kn: B stored [K, N] row-major, passed as its [N, K] view.
double public_op_diff(int64_t m, int64_t n, int64_t k, Fp8Scaling mode, DType out, bool b_kn, uint64_t seed,
                      bool fast_accum = false) {
  std::vector<double> x = normal(m * k, seed), w = normal(n * k, seed + 1, 0.1);
  inject_outliers(x, std::max<int64_t>(1, m * k / 4096), 100.0, seed + 2);
  hk::GemmFp8Problem p(m, n, k, DType::kF8E4M3, DType::kF8E4M3, out, mode, b_kn);
  std::vector<double> qa, sa, qb, sb;
  hk::quantize_fp8_host(x, m, k, DType::kF8E4M3, mode, 1, qa, sa);
  hk::quantize_fp8_host(w, n, k, DType::kF8E4M3, mode, 128, qb, sb);
  auto specs = p.inputs();
  auto da = upload(specs[0], qa), dsa = upload(specs[1], sa), db = upload(specs[2], qb), dsb = upload(specs[3], sb);
  const hk::TensorSpec dspec = p.outputs()[0];
  hk::bench::DeviceBuffer dd(std::max<int64_t>(hk::host::storage_bytes(dspec), 16));
  EXPECT_EQ(cudaMemset(dd.get(), 0xFF, hk::host::storage_bytes(dspec)), cudaSuccess);  // poison
  TensorView a(da.get(), DType::kF8E4M3, specs[0].shape, specs[0].strides);
  TensorView vsa(dsa.get(), DType::kF32, specs[1].shape, specs[1].strides);
  TensorView b(db.get(), DType::kF8E4M3, specs[2].shape, specs[2].strides);
  TensorView vsb(dsb.get(), DType::kF32, specs[3].shape, specs[3].strides);
  TensorView d(dd.get(), out, dspec.shape, dspec.strides);
  hk::GemmFp8Options o;
  o.fast_accum = fast_accum;
  hk::gemm_fp8(a, vsa, b, vsb, d, o);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<double> got = download(dspec, dd.get());
  for (double v : got)
    if (!std::isfinite(v)) return 1.0;  // a poisoned (unwritten) output
  return calc_diff(got, dequant_matmul(p, qa, sa, qb, sb));
}

}  // namespace

// DeepGEMM's accuracy criterion on odd shapes (1, 17, 129, 1000+), every scaling mode.
TEST(GemmFp8Public, CalcDiffOnOddShapes) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  uint64_t seed = 100;
  for (Fp8Scaling mode : {Fp8Scaling::kTensor, Fp8Scaling::kRow, Fp8Scaling::kBlock})
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {17, 17, 17}, {129, 129, 129},
                           {1, 2112, 7168}, {1000, 1001, 1024}, {1024, 1000, 1040}, {129, 1000, 4096}}) {
      const double diff = public_op_diff(m, n, k, mode, DType::kBF16, false, seed += 3);
      EXPECT_LT(diff, 1e-3) << hk::to_string(mode) << " " << m << "x" << n << "x" << k;
    }
}

// The accumulation over all of K (fast_accum, cuBLASLt's FAST_ACCUM) still meets DeepGEMM's
// criterion at K = 4096 (its error, ~1% of |D|, is calc_diff ~1e-4).
TEST(GemmFp8Public, FastAccumCalcDiff) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  for (Fp8Scaling mode : {Fp8Scaling::kTensor, Fp8Scaling::kRow}) {
    const double diff = public_op_diff(256, 384, 4096, mode, DType::kBF16, false, 77, true);
    EXPECT_LT(diff, 1e-3) << hk::to_string(mode);
  }
}

// A weight stored [K, N] (the transposed view) and an f32 output: the packing path.
TEST(GemmFp8Public, WeightStoredKByN) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  for (Fp8Scaling mode : {Fp8Scaling::kTensor, Fp8Scaling::kBlock}) {
    EXPECT_LT(public_op_diff(300, 264, 1000, mode, DType::kF32, true, 7), 1e-3) << hk::to_string(mode);
    EXPECT_LT(public_op_diff(64, 2112, 1024, mode, DType::kF16, true, 9), 1e-3) << hk::to_string(mode);
  }
}

namespace {

// The public op on harness problem p (small integers: exact in f32) with A, B and D placed at
// byte offsets a_off, b_off, d_off past 256-byte aligned allocations, D poisoned first; true when
// D matches the fp64 reference within p's tolerance (the message says where it does not).
::testing::AssertionResult public_op_at_offsets(const hk::GemmFp8Problem& p, int a_off, int b_off, int d_off,
                                                uint64_t seed) {
  auto specs = p.inputs();
  std::vector<hk::HostTensor> in;
  for (size_t i = 0; i < specs.size(); ++i) in.push_back(hk::host::random_tensor(specs[i], seed + i));
  auto place = [&](const hk::TensorSpec& spec, const std::vector<double>& values, hk::bench::DeviceBuffer& buf,
                   int off) {
    std::vector<uint8_t> bytes;
    hk::host::encode(spec, values, bytes);
    buf = hk::bench::DeviceBuffer(int64_t(bytes.size()) + 16);
    uint8_t* at = static_cast<uint8_t*>(buf.get()) + off;
    EXPECT_EQ(cudaMemcpy(at, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    return at;
  };
  hk::bench::DeviceBuffer da, db;
  uint8_t* a_at = place(specs[0], in[0].values, da, a_off);
  uint8_t* b_at = place(specs[2], in[2].values, db, b_off);
  auto dsa = upload(specs[1], in[1].values), dsb = upload(specs[3], in[3].values);
  const hk::TensorSpec dspec = p.outputs()[0];
  hk::bench::DeviceBuffer dd(hk::host::storage_bytes(dspec) + 16);
  EXPECT_EQ(cudaMemset(dd.get(), 0xFF, hk::host::storage_bytes(dspec) + 16), cudaSuccess);
  uint8_t* d_at = static_cast<uint8_t*>(dd.get()) + d_off;
  TensorView a(a_at, DType::kF8E4M3, specs[0].shape), b(b_at, DType::kF8E4M3, specs[2].shape);
  TensorView sa(dsa.get(), DType::kF32, specs[1].shape, specs[1].strides);
  TensorView sb(dsb.get(), DType::kF32, specs[3].shape, specs[3].strides);
  hk::gemm_fp8(a, sa, b, sb, TensorView(d_at, dspec.dtype, dspec.shape));
  if (cudaDeviceSynchronize() != cudaSuccess) return ::testing::AssertionFailure() << "the launch failed";
  std::vector<hk::HostTensor> out = {{dspec, std::vector<double>(p.m * p.n)}};
  p.reference(in, out);
  auto r = hk::bench::compare(dspec, download(dspec, d_at), out[0].values, p.tolerance(0));
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.message;
}

}  // namespace

// Operands at an odd byte offset (no 16-byte alignment for TMA): the packing rung copies them.
TEST(GemmFp8Public, MisalignedOperands) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  for (Fp8Scaling mode : {Fp8Scaling::kRow, Fp8Scaling::kBlock}) {
    hk::GemmFp8Problem p(200, 136, 1024, DType::kF8E4M3, DType::kF8E4M3, DType::kF32, mode);
    p.small_int = true;
    EXPECT_TRUE(public_op_at_offsets(p, 1, 3, 0, 40)) << hk::to_string(mode);
  }
}

// A D view at a 4-byte offset with aligned operands: the dispatch passes over cuBLASLt (16-byte
// D only) to the wgmma kernel, instead of picking Lt and failing at its launch.
TEST(GemmFp8Public, MisalignedOutput) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  for (Fp8Scaling mode : {Fp8Scaling::kTensor, Fp8Scaling::kBlock}) {
    // rows of 264 floats stay 16-byte multiples, the base is 4-byte aligned
    hk::GemmFp8Problem p(256, 264, 512, DType::kF8E4M3, DType::kF8E4M3, DType::kF32, mode);
    p.small_int = true;
    EXPECT_TRUE(public_op_at_offsets(p, 0, 0, 4, 60)) << hk::to_string(mode);
  }
}

// The device quantiser is the host quantiser, bit for bit (data and scales).
TEST(GemmFp8Public, DeviceQuantiserMatchesHost) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  const int64_t rows = 257, cols = 1000;
  std::vector<double> xv = normal(rows * cols, 31, 3.0);
  inject_outliers(xv, 20, 1000.0, 32);
  for (DType xdt : {DType::kF32, DType::kBF16})
    for (DType qdt : {DType::kF8E4M3, DType::kF8E5M2})
      for (auto [mode, br] : {std::pair{Fp8Scaling::kTensor, 1}, {Fp8Scaling::kRow, 1}, {Fp8Scaling::kBlock, 1},
                              {Fp8Scaling::kBlock, 128}}) {
        const hk::TensorSpec xs{"x", xdt, {rows, cols}, {}, hk::Dist::kNormal, 1.0, {}};
        std::vector<double> x(xv.size());
        for (size_t i = 0; i < x.size(); ++i) x[i] = hk::host::round_to(xdt, xv[i]);
        const hk::TensorSpec qs{"q", qdt, {rows, cols}, {}, hk::Dist::kNormal, 1.0, {}};
        const hk::TensorSpec ss{"s", DType::kF32, hk::fp8_scale_shape(mode, rows, cols, br), {}, hk::Dist::kNormal, 1.0, {}};
        auto dx = upload(xs, x);
        hk::bench::DeviceBuffer dq(hk::host::storage_bytes(qs)), dsc(hk::host::storage_bytes(ss));
        hk::quantize_fp8(TensorView(dx.get(), xdt, xs.shape), TensorView(dq.get(), qdt, qs.shape),
                         TensorView(dsc.get(), DType::kF32, ss.shape), mode, br);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<double> q, s;
        hk::quantize_fp8_host(x, rows, cols, qdt, mode, br, q, s);
        EXPECT_EQ(download(ss, dsc.get()), s) << hk::to_string(mode) << " " << br;
        EXPECT_EQ(download(qs, dq.get()), q) << hk::to_string(mode) << " " << br;
      }
}
