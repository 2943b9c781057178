// conv2d and conv2d_single beyond the registry sweep: bad input (typed errors), empty tensors,
// the dispatch's choices, the fp64 references against the puzzle's definition and the backward
// references against finite differences of the forward one (CPU); the public ops on offset
// views (GPU).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench/case.hpp"
#include "conv2d/conv2d_op.hpp"
#include "conv2d/im2col_tma.hpp"
#include "conv2d_single/conv2d_single_op.hpp"
#include "core/host.hpp"
#include "hk/hk.hpp"
#include "hk/ops/conv2d.hpp"
#include "test_util.hpp"

using hk::Conv2dParams;
using hk::Conv2dProblem;
using hk::Conv2dSingleProblem;
using hk::ConvDirection;
using hk::ConvLayout;
using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::expect_error;
using hktest::expect_production_choice;
using hktest::fake_ptr;

// ---- conv2d_single --------------------------------------------------------------------------

TEST(Conv2dSingleBadInput, Dtypes) {
  TensorView x(fake_ptr(), DType::kI32, {1, 4, 4}), k(fake_ptr(), DType::kI32, {3, 3}), z(fake_ptr(), DType::kI32, {1, 4, 4});
  expect_error(ErrorKind::kType, "i32", [&] { hk::conv2d_single(x, k, z); });
  TensorView xf(fake_ptr(), DType::kF32, {1, 4, 4}), kb(fake_ptr(), DType::kBF16, {3, 3}), zf(fake_ptr(), DType::kF32, {1, 4, 4});
  expect_error(ErrorKind::kType, "k is bf16 but x is f32", [&] { hk::conv2d_single(xf, kb, zf); });
}

TEST(Conv2dSingleBadInput, Shapes) {
  TensorView x(fake_ptr(), DType::kF32, {1, 4, 4}), k(fake_ptr(), DType::kF32, {3, 3});
  TensorView x2(fake_ptr(), DType::kF32, {4, 4});
  expect_error(ErrorKind::kValue, "x must have rank 3", [&] { hk::conv2d_single(x2, k, x2); });
  TensorView k0(fake_ptr(), DType::kF32, {0, 3});
  expect_error(ErrorKind::kValue, "k must be [kH, kW] with 1 <= kH", [&] { hk::conv2d_single(x, k0, x); });
  TensorView z(fake_ptr(), DType::kF32, {1, 4, 5});
  expect_error(ErrorKind::kValue, "z has shape [1x4x5]", [&] { hk::conv2d_single(x, k, z); });
  TensorView xs(fake_ptr(), DType::kF32, {1, 4, 4}, {32, 8, 1});
  expect_error(ErrorKind::kNotSupported, "contiguous", [&] { hk::conv2d_single(xs, k, x); });
  TensorView xn(nullptr, DType::kF32, {1, 4, 4});
  expect_error(ErrorKind::kValue, "null pointer with 16 elements", [&] { hk::conv2d_single(xn, k, x); });
}

TEST(Conv2dSingleBadInput, EmptyTensorIsANoOp) {
  TensorView x(nullptr, DType::kBF16, {0, 8, 8}), k(fake_ptr(), DType::kBF16, {3, 3});
  EXPECT_NO_THROW(hk::conv2d_single(x, k, x));
}

// The puzzle's definition by hand: z[j][l] = sum_{a, b} k[a][b] x[j + a][l + b], zero beyond the
// bottom and right edges, the kernel never flipped or centred.
TEST(Conv2dSingleReference, PuzzleDefinition) {
  Conv2dSingleProblem p(1, 2, 3, 2, 2, DType::kF32);
  std::vector<hk::HostTensor> in = {{p.inputs()[0], {1, 2, 3, 4, 5, 6}}, {p.inputs()[1], {1, 10, 100, 1000}}};
  auto out = hktest::run_reference(p, in);
  // x = [[1 2 3] [4 5 6]], k = [[1 10] [100 1000]]
  const std::vector<double> want = {1 + 20 + 400 + 5000, 2 + 30 + 500 + 6000, 3 + 600, 4 + 50, 5 + 60, 6};
  EXPECT_EQ(out[0].values, want);
}

TEST(Conv2dSingleDispatch, PipelinedAndTiledRoutes) {
  auto& reg = hk::Registry::get();
  EXPECT_EQ(reg.choose(Conv2dSingleProblem(256, 512, 512, 7, 7, DType::kF32)).variant->name(), "v03_cp_async_pipeline");
  // Rows that are not whole 16-byte chunks, or a misaligned operand: v02's scalar edges.
  EXPECT_EQ(reg.choose(Conv2dSingleProblem(2, 65, 33, 1, 32, DType::kBF16)).variant->name(), "v02_tiled_smem");
  Conv2dSingleProblem misaligned(2, 64, 64, 3, 3, DType::kF32);
  misaligned.align_bytes = 4;
  EXPECT_EQ(reg.choose(misaligned).variant->name(), "v02_tiled_smem");
  EXPECT_EQ(reg.choose(Conv2dSingleProblem(2, 65, 65, 33, 3, DType::kF16)).variant->name(), "v02_tiled_smem");
}

TEST(Conv2dSingleDispatch, EveryTestAndBenchProblemGetsAProductionRung) { expect_production_choice("conv2d_single"); }

TEST(Conv2dSingleFamily, BenchShapes) {
  const hk::Family* f = hk::Registry::get().family("conv2d_single");
  ASSERT_NE(f, nullptr);
  hk::BenchSelect sel;
  sel.quick = true;
  std::vector<std::string> keys;
  for (auto& p : f->bench_problems(sel)) keys.push_back(p->key());
  EXPECT_EQ(keys, (std::vector<std::string>{"256x512x512_k3x3_f32", "256x512x512_k4x4_f32", "256x512x512_k7x7_f32"}));
  sel.shapes = {"8x64x96_k5x2"};
  sel.dtypes = {DType::kBF16};
  EXPECT_EQ(f->bench_problems(sel).at(0)->key(), "8x64x96_k5x2_bf16");
}

// ---- conv2d ---------------------------------------------------------------------------------

namespace {

Conv2dParams params(int64_t s, int64_t pt, int64_t pb, int64_t pl, int64_t pr, int64_t d, int64_t g, ConvLayout l) {
  Conv2dParams p;
  p.stride_h = p.stride_w = s;
  p.pad_top = pt, p.pad_bottom = pb, p.pad_left = pl, p.pad_right = pr;
  p.dilation_h = p.dilation_w = d;
  p.groups = g;
  p.layout = l;
  return p;
}

const TensorView kNoBias;

}  // namespace

TEST(Conv2dBadInput, ChannelMismatch) {
  const auto prm = params(1, 1, 1, 1, 1, 1, 1, ConvLayout::kNCHW);
  TensorView x(fake_ptr(), DType::kF32, {2, 8, 16, 16}), w(fake_ptr(), DType::kF32, {4, 6, 3, 3});
  TensorView y(fake_ptr(), DType::kF32, {2, 4, 16, 16});
  expect_error(ErrorKind::kValue, "channel mismatch", [&] { hk::conv2d(x, w, kNoBias, y, prm); });
  auto g2 = prm;
  g2.groups = 3;
  TensorView w3(fake_ptr(), DType::kF32, {4, 3, 3, 3});
  expect_error(ErrorKind::kValue, "not divisible by groups=3", [&] { hk::conv2d(x, w3, kNoBias, y, g2); });
  TensorView dy(fake_ptr(), DType::kF32, {2, 5, 16, 16});
  TensorView w4(fake_ptr(), DType::kF32, {4, 8, 3, 3});
  expect_error(ErrorKind::kValue, "channel mismatch: dy has Cout=5", [&] { hk::conv2d_backward_data(dy, w4, x, prm); });
}

TEST(Conv2dBadInput, KernelLargerThanPaddedInput) {
  const auto prm = params(1, 1, 1, 0, 0, 2, 1, ConvLayout::kNCHW);
  TensorView x(fake_ptr(), DType::kF32, {1, 2, 4, 4}), w(fake_ptr(), DType::kF32, {2, 2, 3, 3});
  TensorView y(fake_ptr(), DType::kF32, {1, 2, 2, 1});
  // dilation 2: the kernel spans 5 x 5; the padded input is 6 x 4.
  expect_error(ErrorKind::kValue, "kernel larger than the padded input", [&] { hk::conv2d(x, w, kNoBias, y, prm); });
}

TEST(Conv2dBadInput, WrongLayout) {
  // An NCHW tensor passed as NHWC: its last dim (W = 16) reads as channels.
  auto nhwc = params(1, 1, 1, 1, 1, 1, 1, ConvLayout::kNHWC);
  TensorView x(fake_ptr(), DType::kBF16, {2, 8, 16, 16}), w(fake_ptr(), DType::kBF16, {4, 3, 3, 8});
  TensorView y(fake_ptr(), DType::kBF16, {2, 8, 16, 4});
  expect_error(ErrorKind::kValue, "channel mismatch", [&] { hk::conv2d(x, w, kNoBias, y, nhwc); });
  // A channels_last tensor (strides of [N, C, H, W] = [HWC, 1, WC, C]) passed as NCHW.
  auto nchw = params(1, 1, 1, 1, 1, 1, 1, ConvLayout::kNCHW);
  TensorView xc(fake_ptr(), DType::kBF16, {2, 8, 16, 16}, {2048, 1, 128, 8});
  TensorView wc(fake_ptr(), DType::kBF16, {4, 8, 3, 3}), yc(fake_ptr(), DType::kBF16, {2, 4, 16, 16});
  expect_error(ErrorKind::kNotSupported, "layout NHWC", [&] { hk::conv2d(xc, wc, kNoBias, yc, nchw); });
  // Rank 3.
  TensorView x3(fake_ptr(), DType::kBF16, {8, 16, 16});
  expect_error(ErrorKind::kValue, "x must be rank 4", [&] { hk::conv2d(x3, wc, kNoBias, yc, nchw); });
}

TEST(Conv2dBadInput, ParamsDtypesAndOutputs) {
  auto prm = params(1, 0, 0, 0, 0, 1, 1, ConvLayout::kNCHW);
  TensorView x(fake_ptr(), DType::kF32, {1, 4, 8, 8}), w(fake_ptr(), DType::kF32, {4, 4, 3, 3});
  TensorView y(fake_ptr(), DType::kF32, {1, 4, 6, 6});
  auto bad = prm;
  bad.stride_h = 0;
  expect_error(ErrorKind::kValue, "stride must be >= 1", [&] { hk::conv2d(x, w, kNoBias, y, bad); });
  bad = prm;
  bad.pad_left = -1;
  expect_error(ErrorKind::kValue, "padding must be >= 0", [&] { hk::conv2d(x, w, kNoBias, y, bad); });
  bad = prm;
  bad.dilation_w = 0;
  expect_error(ErrorKind::kValue, "dilation must be >= 1", [&] { hk::conv2d(x, w, kNoBias, y, bad); });
  TensorView wb(fake_ptr(), DType::kBF16, {4, 4, 3, 3});
  expect_error(ErrorKind::kType, "w is bf16 but x is f32", [&] { hk::conv2d(x, wb, kNoBias, y, prm); });
  TensorView y5(fake_ptr(), DType::kF32, {1, 4, 5, 6});
  expect_error(ErrorKind::kValue, "y has shape [1x4x5x6], expected [1x4x6x6]", [&] { hk::conv2d(x, w, kNoBias, y5, prm); });
  TensorView b3(fake_ptr(), DType::kF32, {3});
  expect_error(ErrorKind::kValue, "bias has shape [3]", [&] { hk::conv2d(x, w, b3, y, prm); });
  TensorView xi(fake_ptr(), DType::kI32, {1, 4, 8, 8}), wi(fake_ptr(), DType::kI32, {4, 4, 3, 3});
  expect_error(ErrorKind::kType, "expected f32, f16 or bf16", [&] { hk::conv2d(xi, wi, kNoBias, y, prm); });
  TensorView dw(fake_ptr(), DType::kF32, {4, 4, 3, 2});
  TensorView dy(fake_ptr(), DType::kF32, {1, 4, 6, 6});
  expect_error(ErrorKind::kValue, "dy has shape [1x4x6x6], expected [1x4x6x7]",
               [&] { hk::conv2d_backward_weight(x, dy, dw, prm); });
}

TEST(Conv2dBadInput, EmptyOutputIsANoOp) {
  auto prm = params(1, 1, 1, 1, 1, 1, 1, ConvLayout::kNHWC);
  TensorView x(nullptr, DType::kBF16, {0, 8, 8, 4}), w(fake_ptr(), DType::kBF16, {4, 3, 3, 4});
  TensorView y(nullptr, DType::kBF16, {0, 8, 8, 4});
  EXPECT_NO_THROW(hk::conv2d(x, w, kNoBias, y, prm));
  EXPECT_NO_THROW(hk::conv2d_backward_data(y, w, x, prm));
}

TEST(Conv2dDispatch, Routes) {
  auto& reg = hk::Registry::get();
  const auto dense = params(1, 1, 1, 1, 1, 1, 1, ConvLayout::kNHWC);
  Conv2dProblem p(64, 256, 56, 56, 256, 3, 3, dense, DType::kBF16, ConvDirection::kForward, false);
  const std::string general = reg.variant("conv2d", "baseline_cudnn")->supports(p).empty() ? "baseline_cudnn" : "v01_direct";
  EXPECT_EQ(reg.choose(p).variant->name(), general);
  const auto dw = params(1, 3, 3, 3, 3, 1, 128, ConvLayout::kNHWC);
  EXPECT_EQ(reg.choose(Conv2dProblem(64, 128, 56, 56, 128, 7, 7, dw, DType::kBF16, ConvDirection::kForward, true))
                .variant->name(),
            "v04_depthwise_tiled");
  // Strided depthwise layers take v02.
  const auto dw2 = params(2, 1, 1, 1, 1, 1, 32, ConvLayout::kNHWC);
  EXPECT_EQ(reg.choose(Conv2dProblem(8, 32, 28, 28, 32, 3, 3, dw2, DType::kBF16, ConvDirection::kForward, false))
                .variant->name(),
            "v02_depthwise_nhwc");
  // The depthwise rungs are forward NHWC only; asymmetric padding ('same', even kernel) is v01's.
  EXPECT_EQ(reg.choose(Conv2dProblem(64, 128, 56, 56, 128, 7, 7, dw, DType::kBF16, ConvDirection::kBackwardData, false))
                .variant->name(),
            general);
  // Asymmetric padding ('same' with an even kernel): cuDNN's graph API where it builds a plan (on
  // a device), else the direct rung.
  const auto asym = params(1, 1, 2, 1, 2, 1, 1, ConvLayout::kNCHW);
  const Conv2dProblem pa(2, 4, 33, 33, 4, 4, 4, asym, DType::kF32, ConvDirection::kForward, false);
  const std::string cudnn_asym = reg.variant("conv2d", "baseline_cudnn")->supports(pa);
  EXPECT_EQ(reg.choose(pa).variant->name(), cudnn_asym.empty() ? "baseline_cudnn" : "v01_direct");
  if (!hk::no_gpu_reason().empty()) {
    EXPECT_NE(cudnn_asym.find("symmetric padding only"), std::string::npos);
  }
}

TEST(Conv2dDispatch, EveryTestAndBenchProblemGetsAProductionRung) { expect_production_choice("conv2d"); }

// v06's im2col-mode TMA loads against the implicit GEMM's A matrix, through a model of TMA's
// traversal (conv2d/im2col_tma.hpp): every load starts inside the bounding box on its stride
// grid, and the position each of its pixels reads, for the block's first and last channel, is
// the input position of that A entry by the convolution's definition (also where it is padding).
namespace {

// The forward's A loads walk 128 pixels, the weight gradient's B loads 64 (the same matrix).
void expect_loads_walk_the_patch_matrix(const Conv2dProblem& p, int64_t pixels = 128) {
  SCOPED_TRACE(p.key());
  const auto geo = hk::conv2d_im2col::geometry(p.prm, p.c, p.kh, p.kw, p.oh(), p.ow());
  const int64_t OH = p.oh(), OW = p.ow(), M = p.n * OH * OW, K = p.kh * p.kw * p.c;
  const int64_t sh = p.prm.stride_h, sw = p.prm.stride_w;
  const int64_t w_end = p.w - 1 + geo.upper_w(), h_end = p.h - 1 + geo.upper_h();  // the box's last positions
  int64_t mismatches = 0;
  for (int64_t m0 = 0; m0 < M; m0 += pixels)
    for (int64_t k0 = 0; k0 < K; k0 += 64) {
      const hk::conv2d_im2col::Coords at = geo.load(static_cast<int32_t>(m0), static_cast<int32_t>(k0));
      ASSERT_TRUE(at.w >= geo.lower_w() && at.w <= w_end && (at.w - geo.lower_w()) % sw == 0) << "w " << at.w;
      ASSERT_TRUE(at.h >= geo.lower_h() && at.h <= h_end && (at.h - geo.lower_h()) % sh == 0) << "h " << at.h;
      ASSERT_LT(at.off_w, 255);
      ASSERT_LT(at.off_h, 255);
      int64_t w = at.w, h = at.h, n = at.n;
      for (int64_t m = m0; m < m0 + pixels && m < M; ++m) {
        const int64_t ox = m % OW, oy = (m / OW) % OH, img = m / (OW * OH);
        for (int64_t k : {k0, k0 + 63}) {
          const int64_t c = k % p.c, kx = (k / p.c) % p.kw, ky = k / (p.c * p.kw);
          const std::vector<int64_t> want = {img, oy * sh - p.prm.pad_top + ky * p.prm.dilation_h,
                                             ox * sw - p.prm.pad_left + kx * p.prm.dilation_w, c};
          const std::vector<int64_t> got = {n, h + at.off_h, w + at.off_w, at.c + (k - k0)};
          if (got != want && ++mismatches <= 3)
            ADD_FAILURE() << "m " << m << " k " << k << ": the load reads (n, h, w, c) = (" << got[0] << ", " << got[1]
                          << ", " << got[2] << ", " << got[3] << "), the patch matrix holds (" << want[0] << ", "
                          << want[1] << ", " << want[2] << ", " << want[3] << ")";
        }
        // TMA's walk: along W to the box's end, then the next row, then the next image.
        if ((w += sw) > w_end) {
          w = geo.lower_w();
          if ((h += sh) > h_end) h = geo.lower_h(), ++n;
        }
      }
    }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace

TEST(Conv2dIm2colTma, LoadsWalkThePatchMatrix) {
  auto& reg = hk::Registry::get();
  const hk::Variant* v06 = reg.variant("conv2d", "v06_implicit_gemm_wgmma");
  ASSERT_NE(v06, nullptr);
  int covered = 0;
  for (auto& q : reg.family("conv2d")->test_problems()) {
    const auto& p = static_cast<const Conv2dProblem&>(*q);
    if (p.dir == ConvDirection::kBackwardData || !v06->supports(p).empty()) continue;
    expect_loads_walk_the_patch_matrix(p, p.dir == ConvDirection::kForward ? 128 : 64);
    ++covered;
  }
  EXPECT_GE(covered, 10) << "the test problems must exercise the implicit GEMM's forward and weight gradient";
  // The bench layer, and the limits: stride 8, a dilated 7x7 kernel, asymmetric padding.
  const auto nhwc = [](int64_t s, int64_t pt, int64_t pb, int64_t pl, int64_t pr, int64_t d) {
    return params(s, pt, pb, pl, pr, d, 1, ConvLayout::kNHWC);
  };
  for (const Conv2dProblem& p :
       {Conv2dProblem(4, 256, 56, 56, 256, 3, 3, nhwc(1, 1, 1, 1, 1, 1), DType::kBF16, ConvDirection::kForward, false),
        Conv2dProblem(3, 64, 61, 45, 64, 3, 3, nhwc(8, 2, 0, 1, 3, 1), DType::kBF16, ConvDirection::kForward, false),
        Conv2dProblem(2, 128, 40, 37, 64, 7, 7, nhwc(2, 9, 0, 4, 5, 3), DType::kF16, ConvDirection::kForward, true)}) {
    ASSERT_EQ(v06->supports(p), "");
    expect_loads_walk_the_patch_matrix(p);
  }
}

// The data gradient as a forward convolution of dy (conv2d_im2col::dgrad_as_forward): by the
// definition, dx[iy] sums dy[oy] w[ky] over oy s - pt + ky d = iy; the forward convolution's tap
// ky' reads dy at iy - pt' + ky' d. At stride 1 the two must pair the same (oy, ky = kH - 1 - ky')
// for every iy, along both axes; and its loads must walk its own patch matrix.
TEST(Conv2dIm2colTma, DataGradientIsAForwardConvolutionOfDy) {
  auto& reg = hk::Registry::get();
  const hk::Variant* v06 = reg.variant("conv2d", "v06_implicit_gemm_wgmma");
  ASSERT_NE(v06, nullptr);
  // Axis check: input extent n_in, output extent n_out, kernel k, padding (lo, hi), dilation d.
  auto expect_axis = [](int64_t n_in, int64_t n_out, int64_t k, int64_t lo, int64_t d, int64_t lo_t) {
    for (int64_t i = 0; i < n_in; ++i) {
      std::vector<std::pair<int64_t, int64_t>> want, got;  // (oy, ky) pairs
      for (int64_t ky = 0; ky < k; ++ky) {
        const int64_t oy = i + lo - ky * d;  // stride 1
        if (oy >= 0 && oy < n_out) want.emplace_back(oy, ky);
      }
      for (int64_t kt = k - 1; kt >= 0; --kt) {  // ky = k - 1 - kt ascending
        const int64_t at = i - lo_t + kt * d;
        if (at >= 0 && at < n_out) got.emplace_back(at, k - 1 - kt);
      }
      ASSERT_EQ(got, want) << "input position " << i;
    }
  };
  int covered = 0;
  for (auto& q : reg.family("conv2d")->test_problems()) {
    const auto& p = static_cast<const Conv2dProblem&>(*q);
    if (p.dir != ConvDirection::kBackwardData || !v06->supports(p).empty()) continue;
    SCOPED_TRACE(p.key());
    const Conv2dParams f = hk::conv2d_im2col::dgrad_as_forward(p.prm, p.kh, p.kw);
    // dy [N, OH, OW, Cout] in, dx [N, H, W, C] out.
    const Conv2dProblem fwd(p.n, p.cout, p.oh(), p.ow(), p.c, p.kh, p.kw, f, p.dtype, ConvDirection::kForward, false);
    ASSERT_EQ(fwd.oh(), p.h);
    ASSERT_EQ(fwd.ow(), p.w);
    expect_axis(p.h, p.oh(), p.kh, p.prm.pad_top, p.prm.dilation_h, f.pad_top);
    expect_axis(p.w, p.ow(), p.kw, p.prm.pad_left, p.prm.dilation_w, f.pad_left);
    expect_loads_walk_the_patch_matrix(fwd);
    ++covered;
  }
  EXPECT_GE(covered, 3) << "the test problems must exercise the implicit GEMM's data gradient";
}

TEST(Conv2dIm2colTma, DeclinesWhatTheLoadsCannotDescribe) {
  const hk::Variant* v06 = hk::Registry::get().variant("conv2d", "v06_implicit_gemm_wgmma");
  ASSERT_NE(v06, nullptr);
  const auto nhwc = params(1, 1, 1, 1, 1, 1, 1, ConvLayout::kNHWC);
  const auto fwd = ConvDirection::kForward, dgrad = ConvDirection::kBackwardData;
  auto why = [&](const Conv2dProblem& p) { return v06->supports(p); };
  auto has = [](const std::string& s, const char* part) { return s.find(part) != std::string::npos; };
  EXPECT_TRUE(has(why(Conv2dProblem(1, 96, 8, 8, 64, 3, 3, nhwc, DType::kBF16, fwd, false)), "multiple of 64"));
  EXPECT_TRUE(has(why(Conv2dProblem(1, 64, 8, 8, 60, 3, 3, nhwc, DType::kBF16, fwd, false)), "multiple of 8"));
  EXPECT_TRUE(has(why(Conv2dProblem(1, 64, 8, 8, 64, 3, 3, params(1, 1, 1, 1, 1, 1, 1, ConvLayout::kNCHW),
                                    DType::kBF16, fwd, false)),
                  "NHWC"));
  EXPECT_TRUE(has(why(Conv2dProblem(1, 64, 8, 8, 64, 3, 3, nhwc, DType::kF32, fwd, false)), "f16 or bf16"));
  EXPECT_TRUE(has(why(Conv2dProblem(1, 64, 40, 40, 64, 3, 3, params(9, 1, 1, 1, 1, 1, 1, ConvLayout::kNHWC),
                                    DType::kBF16, fwd, false)),
                  "strides"));
  EXPECT_TRUE(has(why(Conv2dProblem(1, 64, 8, 300, 64, 3, 3, params(1, 1, 1, 130, 130, 1, 1, ConvLayout::kNHWC),
                                    DType::kBF16, fwd, false)),
                  "[-128, 127]"));
  EXPECT_TRUE(has(why(Conv2dProblem(1, 96, 8, 8, 64, 3, 3, nhwc, DType::kBF16, ConvDirection::kBackwardWeight, false)),
                  "multiple of 64"));
  // The data gradient: dy's channels (Cout) are the reduction's; stride 1; padding within reach.
  EXPECT_TRUE(has(why(Conv2dProblem(1, 64, 8, 8, 96, 3, 3, nhwc, DType::kBF16, dgrad, false)), "multiple of 64"));
  EXPECT_TRUE(has(why(Conv2dProblem(1, 64, 9, 9, 64, 3, 3, params(2, 1, 1, 1, 1, 1, 1, ConvLayout::kNHWC),
                                    DType::kBF16, dgrad, false)),
                  "stride 1"));
  EXPECT_TRUE(has(why(Conv2dProblem(1, 64, 9, 9, 64, 3, 3, params(1, 3, 3, 3, 3, 1, 1, ConvLayout::kNHWC),
                                    DType::kBF16, dgrad, false)),
                  "reach"));
  EXPECT_EQ(why(Conv2dProblem(1, 64, 8, 8, 64, 3, 3, nhwc, DType::kBF16, fwd, false)), "");
  EXPECT_EQ(why(Conv2dProblem(1, 8, 8, 8, 64, 3, 3, nhwc, DType::kBF16, dgrad, false)), "");
  EXPECT_EQ(why(Conv2dProblem(1, 64, 8, 8, 8, 3, 3, params(2, 1, 1, 1, 1, 1, 1, ConvLayout::kNHWC), DType::kBF16,
                              ConvDirection::kBackwardWeight, false)),
            "");
}

// The cuDNN baseline's numerics filter against what cuDNN's heuristics really offer, asked for an
// H200 described in JSON (no device needed): f32 takes only engines without numerical notes
// (an f32 filter gradient of this shape came back past the f32 bound from cuDNN, 2026-12-05,
// when the filter still admitted a non-deterministic engine), 16-bit keeps tensor cores and
// refuses a non-deterministic filter gradient.
TEST(Conv2dCudnnGraph, TheNumericsFilterOnTheEnginesCudnnOffersAnH200) {
  if (!hk::Registry::get().variant("conv2d", "baseline_cudnn")->supports(
          Conv2dProblem(1, 4, 8, 8, 4, 3, 3, params(1, 1, 1, 1, 1, 1, 1, ConvLayout::kNCHW), DType::kF32,
                        ConvDirection::kForward, false)).empty())
    GTEST_SKIP() << "built without cuDNN";
  // The fields cuDNN reads from a CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR's JSON, with an H200's values.
  const std::string h200 =
      R"({"deviceVer":900,"multiProcessorCount":132,"warpSize":32,"maxSharedMemoryPerBlock":49152,)"
      R"("maxSharedMemoryPerBlockOptin":232448,"reservedSharedMemoryPerBlock":1024,"maxRegistersPerSM":65536,)"
      R"("maxCtasPerSM":32,"maxThreadsPerBlock":1024,"maxThreadsPerSM":2048,"regsPerBlock":65536,)"
      R"("totalGlobalMem":150109880320,"smClockRateKHz":1980000,"l2CacheSize":62914560,)"
      R"("maxBlockSize":[1024,1024,64],"memClockRateKHz":3201000,"maxGridSize":[2147483647,65535,65535],)"
      R"("supportCoopLaunch":1,"pciDeviceId":9013,"isTccDriver":0,"cudaDeviceId":0,"driverVer":13000,)"
      R"("deviceName":"NVIDIA H200"})";
  constexpr int kTensorCore = 0, kNondeterministic = 4, kStrictNanProp = 9;  // cudnnBackendNumericalNote_t
  auto offers = [&](const Conv2dProblem& p) {
    hk::Operands ops;
    for (auto& s : p.inputs()) ops.in.emplace_back(fake_ptr(), s.dtype, s.shape);
    for (auto& s : p.outputs()) ops.out.emplace_back(fake_ptr(), s.dtype, s.shape);
    return hk::conv2d_cudnn_offers(hk::Conv2dArgs::bind(p, ops), h200);
  };
  auto has = [](const hk::Conv2dCudnnOffer& o, int note) {
    return std::find(o.notes.begin(), o.notes.end(), note) != o.notes.end();
  };
  for (ConvLayout layout : {ConvLayout::kNHWC, ConvLayout::kNCHW}) {
    const Conv2dParams prm = params(1, 1, 1, 1, 1, 1, 1, layout);
    // f32 filter gradient: something accepted, and only engines without notes.
    const auto f32 = offers(Conv2dProblem(2, 64, 33, 33, 72, 3, 3, prm, DType::kF32, ConvDirection::kBackwardWeight,
                                          false));
    ASSERT_FALSE(f32.empty());
    int accepted = 0, refused_tc = 0;
    for (const auto& o : f32) {
      if (o.accepted) {
        ++accepted;
        for (int n : o.notes) EXPECT_EQ(n, kStrictNanProp) << "engine " << o.engine << " (mode " << o.mode << ")";
      } else if (has(o, kTensorCore)) {
        ++refused_tc;
      }
    }
    EXPECT_GT(accepted, 0);
    EXPECT_GT(refused_tc, 0);  // TF32 engines are on offer for f32, and refused
    // bf16: tensor-core engines taken; the filter gradient never a non-deterministic one.
    for (ConvDirection dir : {ConvDirection::kForward, ConvDirection::kBackwardWeight}) {
      const auto bf16 = offers(Conv2dProblem(2, 64, 33, 33, 72, 3, 3, prm, DType::kBF16, dir, false));
      bool tc_taken = false;
      for (const auto& o : bf16) {
        if (!o.accepted) continue;
        tc_taken |= has(o, kTensorCore);
        if (dir == ConvDirection::kBackwardWeight) {
          EXPECT_FALSE(has(o, kNondeterministic)) << "engine " << o.engine;
        }
      }
      EXPECT_TRUE(tc_taken) << (dir == ConvDirection::kForward ? "forward" : "filter gradient");
    }
  }
}

// The cuDNN baseline's graph path: its convolution node (tensors in logical order with the
// layout's strides, the convolution with its pre/post paddings, the operation of the direction)
// builds for every test problem, as the descriptors' finalize checks them without a device; and
// a node cuDNN must refuse (an output of the wrong size) is refused.
TEST(Conv2dCudnnGraph, EveryTestProblemBuildsItsConvolutionNode) {
  const hk::Family* f = hk::Registry::get().family("conv2d");
  ASSERT_NE(f, nullptr);
  if (!hk::Registry::get().variant("conv2d", "baseline_cudnn")->supports(
          Conv2dProblem(1, 4, 8, 8, 4, 3, 3, params(1, 1, 1, 1, 1, 1, 1, ConvLayout::kNCHW), DType::kF32,
                        ConvDirection::kForward, false)).empty())
    GTEST_SKIP() << "built without cuDNN";
  auto args_of = [](const Conv2dProblem& p) {
    hk::Operands ops;
    for (auto& s : p.inputs()) ops.in.emplace_back(fake_ptr(), s.dtype, s.shape);
    for (auto& s : p.outputs()) ops.out.emplace_back(fake_ptr(), s.dtype, s.shape);
    return hk::Conv2dArgs::bind(p, ops);
  };
  int n = 0;
  for (auto& q : f->test_problems()) {
    const auto& p = static_cast<const Conv2dProblem&>(*q);
    EXPECT_EQ(hk::conv2d_cudnn_graph_refusal(args_of(p)), "") << p.key();
    ++n;
  }
  EXPECT_GT(n, 100);
  Conv2dProblem p(2, 64, 15, 15, 64, 4, 4, params(1, 1, 2, 1, 2, 1, 1, ConvLayout::kNHWC), DType::kBF16,
                  ConvDirection::kForward, false);
  hk::Conv2dArgs a = args_of(p);
  EXPECT_EQ(hk::conv2d_cudnn_graph_refusal(a), "");
  a.oh -= 1;  // y one row short of what the padding and kernel make
  EXPECT_NE(hk::conv2d_cudnn_graph_refusal(a), "");
}

// GPU: v06's im2col-mode loads on the device, apart from the GEMM: the tiles TMA writes (read
// back through conv2d_v06_probe_a_tile, unswizzled) hold, bit for bit, the patch matrix's rows
// for tiles that start mid-row, cross rows and images, and run past the last pixel; for a
// stride-2 dilated layer and asymmetric padding; 128-pixel (A) and 64-pixel (weight-gradient B)
// loads. Where a v06 GEMM test fails, this one says whether the loads are the cause.
TEST(Conv2dIm2colTma, DeviceLoadsHoldThePatchMatrix) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  const auto nhwc = [](int64_t s, int64_t pt, int64_t pb, int64_t pl, int64_t pr, int64_t d) {
    return params(s, pt, pb, pl, pr, d, 1, ConvLayout::kNHWC);
  };
  for (const Conv2dProblem& p :
       {Conv2dProblem(2, 64, 33, 33, 72, 3, 3, nhwc(1, 1, 1, 1, 1, 1), DType::kBF16, ConvDirection::kForward, false),
        Conv2dProblem(2, 128, 17, 19, 64, 3, 3, nhwc(2, 1, 1, 1, 1, 2), DType::kBF16, ConvDirection::kForward, false),
        Conv2dProblem(1, 64, 15, 15, 64, 4, 4, nhwc(1, 1, 2, 1, 2, 1), DType::kF16, ConvDirection::kForward, false)}) {
    SCOPED_TRACE(p.key());
    const int64_t H = p.h, W = p.w, C = p.c, OH = p.oh(), OW = p.ow(), M = p.n * OH * OW;
    // x: distinct, finite 16-bit values.
    std::vector<uint16_t> x(size_t(p.n * H * W * C));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint16_t>(0x3c00 + (i * 2654435761u >> 7) % 0x0800);
    void* dx = nullptr;
    void* dout = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dout, 128 * 128), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    hk::Operands ops;
    for (auto& s : p.inputs()) ops.in.emplace_back(fake_ptr(), s.dtype, s.shape);
    for (auto& s : p.outputs()) ops.out.emplace_back(fake_ptr(), s.dtype, s.shape);
    hk::Conv2dArgs a = hk::Conv2dArgs::bind(p, ops);
    a.x = dx;
    const int64_t K = p.kh * p.kw * C;
    for (int pixels : {128, 64})
      for (int64_t m0 : {int64_t(0), int64_t(pixels), (OH * OW / pixels) * pixels, (M - 1) / pixels * pixels})
        for (int64_t k0 : {int64_t(0), K / 2 / 64 * 64, K - 64}) {
          hk::conv2d_v06_probe_a_tile(a, static_cast<int32_t>(m0), static_cast<int32_t>(k0), pixels, dout, nullptr);
          std::vector<uint16_t> tile(size_t(pixels) * 64);
          ASSERT_EQ(cudaMemcpy(tile.data(), dout, tile.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
          int bad = 0;
          for (int r = 0; r < pixels; ++r)
            for (int c = 0; c < 64; ++c) {
              // 128-byte swizzle: 16-byte chunk j of row r lies at chunk j ^ (r % 8).
              const uint16_t got = tile[size_t(r) * 64 + ((c / 8) ^ (r % 8)) * 8 + c % 8];
              const int64_t m = m0 + r, k = k0 + c;
              const int64_t ch = k % C, kx = (k / C) % p.kw, ky = k / (C * p.kw);
              const int64_t ox = m % OW, oy = (m / OW) % OH, n = m / (OW * OH);
              const int64_t iy = oy * p.prm.stride_h - p.prm.pad_top + ky * p.prm.dilation_h;
              const int64_t ix = ox * p.prm.stride_w - p.prm.pad_left + kx * p.prm.dilation_w;
              const bool inside = m < M && iy >= 0 && iy < H && ix >= 0 && ix < W;
              const uint16_t want = inside ? x[size_t(((n * H + iy) * W + ix) * C + ch)] : 0;
              if (got != want && ++bad <= 3)
                ADD_FAILURE() << pixels << " pixels, m0 " << m0 << ", k0 " << k0 << ": row " << r << " channel " << c
                              << " holds 0x" << std::hex << got << ", the patch matrix 0x" << want << std::dec;
            }
          ASSERT_EQ(bad, 0);
        }
    cudaFree(dx);
    cudaFree(dout);
  }
}

TEST(Conv2dFamily, BenchShapesAndAttrs) {
  const hk::Family* f = hk::Registry::get().family("conv2d");
  ASSERT_NE(f, nullptr);
  hk::BenchSelect sel;
  sel.quick = true;
  std::vector<std::string> keys;
  for (auto& p : f->bench_problems(sel)) keys.push_back(p->key());
  EXPECT_EQ(keys, (std::vector<std::string>{"n64_c256_h56_w56_k256_3x3_s1_p1_d1_g1_nhwc_bf16_fwd",
                                            "n64_c128_h56_w56_k128_7x7_s1_p3_d1_g128_nhwc_bf16_fwd"}));
  // make_problem rebuilds every test problem from its attrs and tensor specs.
  for (auto& p : f->test_problems()) {
    std::vector<TensorView> in;
    for (auto& s : p->inputs()) in.emplace_back(fake_ptr(), s.dtype, s.shape);
    EXPECT_EQ(f->make_problem(in, p->attrs())->key(), p->key());
  }
}

// The NHWC problem is the NCHW one with every tensor permuted.
TEST(Conv2dReference, LayoutsAgree) {
  for (ConvDirection d : {ConvDirection::kForward, ConvDirection::kBackwardData, ConvDirection::kBackwardWeight}) {
    Conv2dProblem a(2, 4, 7, 9, 6, 3, 2, params(2, 1, 0, 2, 1, 1, 2, ConvLayout::kNCHW), DType::kF32, d,
                    d == ConvDirection::kForward);
    Conv2dProblem b = a;
    b.prm.layout = ConvLayout::kNHWC;
    auto ia = hktest::smooth_inputs(a, 5);
    // Permute each NCHW-ordered input into NHWC order ([N, C, H, W] -> [N, H, W, C]; weight
    // [Co, Ci, kH, kW] -> [Co, kH, kW, Ci]; bias as is).
    std::vector<hk::HostTensor> ib;
    auto specs_b = b.inputs();
    for (size_t t = 0; t < ia.size(); ++t) {
      const auto& s = ia[t].spec.shape;
      hk::HostTensor h{specs_b[t], ia[t].values};
      if (s.size() == 4)
        for (int64_t i0 = 0; i0 < s[0]; ++i0)
          for (int64_t i1 = 0; i1 < s[1]; ++i1)
            for (int64_t i2 = 0; i2 < s[2]; ++i2)
              for (int64_t i3 = 0; i3 < s[3]; ++i3)
                h.values[((i0 * s[2] + i2) * s[3] + i3) * s[1] + i1] = ia[t].values[((i0 * s[1] + i1) * s[2] + i2) * s[3] + i3];
      ib.push_back(h);
    }
    auto oa = hktest::run_reference(a, ia), ob = hktest::run_reference(b, ib);
    const auto& s = oa[0].spec.shape;
    for (int64_t i0 = 0; i0 < s[0]; ++i0)
      for (int64_t i1 = 0; i1 < s[1]; ++i1)
        for (int64_t i2 = 0; i2 < s[2]; ++i2)
          for (int64_t i3 = 0; i3 < s[3]; ++i3)
            ASSERT_EQ(oa[0].values[((i0 * s[1] + i1) * s[2] + i2) * s[3] + i3],
                      ob[0].values[((i0 * s[2] + i2) * s[3] + i3) * s[1] + i1])
                << a.key() << " at " << i0 << "," << i1 << "," << i2 << "," << i3;
  }
}

// dx and dw of L = sum(y * dy) against central differences of the forward reference: stride,
// dilation, groups and asymmetric padding, both layouts, a tail (H - effective kernel not a
// multiple of the stride, so some input rows meet no window).
TEST(Conv2dReference, BackwardMatchesFiniteDifferences) {
  for (ConvLayout l : {ConvLayout::kNCHW, ConvLayout::kNHWC}) {
    const auto prm = params(2, 1, 0, 2, 1, 2, 2, l);
    Conv2dProblem fwd(2, 4, 8, 9, 4, 3, 2, prm, DType::kF32, ConvDirection::kForward, false);
    auto in = hktest::smooth_inputs(fwd, 11);
    std::vector<double> cot(size_t(fwd.n * fwd.cout * fwd.oh() * fwd.ow()));
    hk::host::Rng rng(3);
    for (auto& v : cot) v = rng.normal();
    Conv2dProblem dg(fwd.n, fwd.c, fwd.h, fwd.w, fwd.cout, fwd.kh, fwd.kw, prm, DType::kF32,
                     ConvDirection::kBackwardData, false);
    auto specs = dg.inputs();
    auto dx = hktest::run_reference(dg, {{specs[0], cot}, {specs[1], in[1].values}});
    hktest::expect_matches_fd(fwd, in, 0, cot, dx[0].values, "dx " + fwd.key());
    Conv2dProblem wg(fwd.n, fwd.c, fwd.h, fwd.w, fwd.cout, fwd.kh, fwd.kw, prm, DType::kF32,
                     ConvDirection::kBackwardWeight, false);
    specs = wg.inputs();
    auto dw = hktest::run_reference(wg, {{specs[0], in[0].values}, {specs[1], cot}});
    hktest::expect_matches_fd(fwd, in, 1, cot, dw[0].values, "dw " + fwd.key());
  }
}

// ---- GPU: the public ops on views offset by one element (no 16-byte rows) and aligned ----

namespace {

// Runs `call(in_views, out_view)` on device copies of fresh inputs for `p`, every operand
// `offset` elements into its buffer, the output poisoned; checks the output against the
// reference and that nothing around it was written.
template <class Call>
void check_public(const hk::Problem& p, int64_t offset, Call&& call) {
  const auto specs = p.inputs();
  const hk::TensorSpec ospec = p.outputs()[0];
  const int64_t es = hk::dtype_bits(ospec.dtype) / 8;
  std::vector<hk::HostTensor> in;
  std::vector<hk::bench::DeviceBuffer> bufs;
  std::vector<TensorView> views;
  for (size_t i = 0; i < specs.size(); ++i) {
    in.push_back(hk::host::random_tensor(specs[i], 17 + i));
    std::vector<uint8_t> bytes;
    hk::host::encode(specs[i], in.back().values, bytes);
    bufs.emplace_back(bytes.size() + 64);
    char* ptr = static_cast<char*>(bufs.back().get()) + es * offset;
    ASSERT_EQ(cudaMemcpy(ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    views.emplace_back(ptr, specs[i].dtype, specs[i].shape);
  }
  const int64_t on = hk::host::storage_elems(ospec);
  hk::bench::DeviceBuffer ob((on + 16) * es);
  ASSERT_EQ(cudaMemset(ob.get(), 0xFF, (on + 16) * es), cudaSuccess);
  TensorView out(static_cast<char*>(ob.get()) + es * offset, ospec.dtype, ospec.shape);
  call(views, out);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> raw((on + 16) * es);
  ASSERT_EQ(cudaMemcpy(raw.data(), ob.get(), raw.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t b = 0; b < int64_t(raw.size()); ++b)
    if (b < es * offset || b >= es * (offset + on)) {
      ASSERT_EQ(raw[b], 0xFF) << p.key() << ": byte " << b << " written";
    }
  std::vector<uint8_t> body(raw.begin() + es * offset, raw.begin() + es * (offset + on));
  std::vector<double> got;
  hk::host::decode(ospec, body, got);
  auto ref = hktest::run_reference(p, in);
  auto r = hk::bench::compare(ospec, got, ref[0].values, p.tolerance(0));
  EXPECT_TRUE(r.ok) << p.key() << " offset " << offset << ": " << r.message;
}

}  // namespace

TEST(Conv2dSinglePublic, MatchesReferenceOnOffsetViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t off : {0, 1})
      for (auto [h, w, k] : std::vector<std::array<int64_t, 3>>{{64, 256, 3}, {33, 136, 7}, {65, 64, 4}, {7, 33, 5}}) {
        Conv2dSingleProblem p(3, h, w, k, k, dt);
        check_public(p, off, [&](const std::vector<TensorView>& in, const TensorView& z) {
          hk::conv2d_single(in[0], in[1], z);
        });
      }
}

TEST(Conv2dPublic, MatchesReferenceOnOffsetViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  const std::vector<Conv2dParams> prms = {params(1, 1, 1, 1, 1, 1, 1, ConvLayout::kNHWC),
                                          params(2, 1, 2, 0, 1, 1, 2, ConvLayout::kNCHW),
                                          params(1, 3, 3, 3, 3, 1, 16, ConvLayout::kNHWC)};
  for (DType dt : {DType::kF32, DType::kBF16})
    for (int64_t off : {0, 1})
      for (const auto& prm : prms) {
        const int64_t k = prm.groups == 16 ? 7 : 3;
        for (ConvDirection d : {ConvDirection::kForward, ConvDirection::kBackwardData, ConvDirection::kBackwardWeight}) {
          Conv2dProblem p(2, 16, 33, 20, 16, k, k, prm, dt, d, d == ConvDirection::kForward);
          check_public(p, off, [&](const std::vector<TensorView>& in, const TensorView& out) {
            if (d == ConvDirection::kForward) hk::conv2d(in[0], in[1], in[2], out, prm);
            else if (d == ConvDirection::kBackwardData) hk::conv2d_backward_data(in[0], in[1], out, prm);
            else hk::conv2d_backward_weight(in[0], in[1], out, prm);
          });
        }
      }
}
