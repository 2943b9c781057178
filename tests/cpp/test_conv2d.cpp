// conv2d and conv2d_single beyond the registry sweep: bad input (typed errors), empty tensors,
// the dispatch's choices, the fp64 references against the puzzle's definition and the backward
// references against finite differences of the forward one (CPU); the public ops on offset
// views (GPU).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bench/case.hpp"
#include "conv2d/conv2d_op.hpp"
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
  const auto asym = params(1, 1, 2, 1, 2, 1, 1, ConvLayout::kNCHW);
  EXPECT_EQ(reg.choose(Conv2dProblem(2, 4, 33, 33, 4, 4, 4, asym, DType::kF32, ConvDirection::kForward, false))
                .variant->name(),
            "v01_direct");
}

TEST(Conv2dDispatch, EveryTestAndBenchProblemGetsAProductionRung) { expect_production_choice("conv2d"); }

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
