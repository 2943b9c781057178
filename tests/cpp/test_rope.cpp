// RoPE beyond the registry sweep: bad input (CPU), empty tensors, the fp64 reference against
// known rotations and against its own backward (the rotation's transpose), the dispatch, and
// the public op on views at every 16-byte phase (GPU).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/host.hpp"
#include "hk/hk.hpp"
#include "offset_views.hpp"
#include "rope/rope_op.hpp"
#include "test_util.hpp"

using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::expect_error;
using hktest::fake_ptr;

namespace {
TensorView heads(DType dt, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
  return TensorView(fake_ptr(), dt, std::move(shape), std::move(strides));
}
TensorView table(int64_t s, int64_t half, DType dt = DType::kF32) { return TensorView(fake_ptr(), dt, {s, half}); }
}  // namespace

TEST(RopeBadInput, WrongDtypes) {
  auto x = heads(DType::kI32, {2, 4, 3, 8}), y = heads(DType::kI32, {2, 4, 3, 8});
  expect_error(ErrorKind::kType, "i32", [&] { hk::rope(x, table(4, 4), table(4, 4), y); });
  auto xb = heads(DType::kBF16, {2, 4, 3, 8}), yb = heads(DType::kBF16, {2, 4, 3, 8});
  expect_error(ErrorKind::kType, "cos is bf16, expected f32",
               [&] { hk::rope(xb, table(4, 4, DType::kBF16), table(4, 4), yb); });
  auto yf = heads(DType::kF32, {2, 4, 3, 8});
  expect_error(ErrorKind::kType, "y is f32", [&] { hk::rope(xb, table(4, 4), table(4, 4), yf); });
}

TEST(RopeBadInput, ShapesAndRotaryDim) {
  auto x = heads(DType::kBF16, {2, 4, 3, 8}), y = heads(DType::kBF16, {2, 4, 3, 8});
  expect_error(ErrorKind::kValue, "rotary_dim / 2 = 5", [&] { hk::rope(x, table(4, 5), table(4, 5), y); });
  expect_error(ErrorKind::kValue, "cos has shape [5x4], expected [4x4]",
               [&] { hk::rope(x, table(5, 4), table(4, 4), y); });
  expect_error(ErrorKind::kValue, "sin has shape [4x2]", [&] { hk::rope(x, table(4, 4), table(4, 2), y); });
  auto x3 = heads(DType::kBF16, {4, 3, 8});
  expect_error(ErrorKind::kValue, "must be [B, S, H, D]", [&] { hk::rope(x3, table(4, 4), table(4, 4), y); });
  auto ybad = heads(DType::kBF16, {2, 4, 4, 8});
  expect_error(ErrorKind::kValue, "y has shape [2x4x4x8]", [&] { hk::rope(x, table(4, 4), table(4, 4), ybad); });
}

TEST(RopeBadInput, LayoutsAndNullPointers) {
  auto y = heads(DType::kF32, {1, 2, 2, 8});
  auto xs = heads(DType::kF32, {1, 2, 2, 8}, {64, 32, 16, 2});
  expect_error(ErrorKind::kNotSupported, "contiguous last dim", [&] { hk::rope(xs, table(2, 4), table(2, 4), y); });
  TensorView cs(fake_ptr(), DType::kF32, {2, 4}, {8, 1});
  auto x = heads(DType::kF32, {1, 2, 2, 8});
  expect_error(ErrorKind::kNotSupported, "cos must be contiguous", [&] { hk::rope(x, cs, table(2, 4), y); });
  TensorView xn(nullptr, DType::kF32, {1, 2, 2, 8});
  expect_error(ErrorKind::kValue, "null pointer with 32 elements", [&] { hk::rope(xn, table(2, 4), table(2, 4), y); });
  auto yneg = heads(DType::kF32, {1, 2, 2, 8}, {32, -16, 8, 1});
  expect_error(ErrorKind::kNotSupported, "non-negative strides", [&] { hk::rope(x, table(2, 4), table(2, 4), yneg); });
}

TEST(RopeBadInput, EmptyTensorIsANoOp) {
  TensorView x(nullptr, DType::kBF16, {0, 4, 2, 8}), y(nullptr, DType::kBF16, {0, 4, 2, 8});
  EXPECT_NO_THROW(hk::rope(x, table(4, 4), table(4, 4), y));
  EXPECT_NO_THROW(hk::rope_backward(x, table(4, 4), table(4, 4), y));
}

TEST(RopeFamily, MakeProblemKeepsStrides) {
  const hk::Family* f = hk::Registry::get().family("rope");
  ASSERT_NE(f, nullptr);
  // q as a slice of a fused QKV row: 4 query heads of 8 in all, D = 64.
  TensorView q(fake_ptr(), DType::kBF16, {2, 16, 4, 64}, {16 * 512, 512, 64, 1});
  auto p = f->make_problem({q, table(16, 32), table(16, 32)}, hk::Attrs{});
  EXPECT_EQ(p->key(), "2x16x4x64_r64_bf16_fwd_sx8192-512-64");
  expect_error(ErrorKind::kValue, "theta", [&] { f->make_problem({q, table(16, 32), table(16, 32)}, hk::Attrs{{"theta", 1e4}}); });
  expect_error(ErrorKind::kValue, "takes 3 inputs", [&] { f->make_problem({q}, hk::Attrs{}); });
}

// A pair rotated by angle t: (1, 0) -> (cos t, sin t), (0, 1) -> (-sin t, cos t); the backward
// rotates back; dims past R pass through.
TEST(RopeReference, KnownRotation) {
  const double t = 0.7;
  hk::RopeProblem p(1, 1, 1, 6, 4, DType::kF32, false), b(1, 1, 1, 6, 4, DType::kF32, true);
  auto specs = p.inputs();
  std::vector<hk::HostTensor> in = {{specs[0], {1.0, 0.0, 0.0, 1.0, 3.0, -4.0}},
                                    {specs[1], {std::cos(t), std::cos(2 * t)}},
                                    {specs[2], {std::sin(t), std::sin(2 * t)}}};
  auto y = hktest::run_reference(p, in);
  EXPECT_NEAR(y[0].values[0], std::cos(t), 1e-15);          // x0' = x0 c - x2 s
  EXPECT_NEAR(y[0].values[2], std::sin(t), 1e-15);          // x2' = x2 c + x0 s
  EXPECT_NEAR(y[0].values[1], -std::sin(2 * t), 1e-15);
  EXPECT_NEAR(y[0].values[3], std::cos(2 * t), 1e-15);
  EXPECT_EQ(y[0].values[4], 3.0);
  EXPECT_EQ(y[0].values[5], -4.0);
  auto back = in;
  back[0].values = y[0].values;
  auto x = hktest::run_reference(b, back);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(x[0].values[i], in[0].values[i], 1e-15) << i;
}

// The backward is the forward's transpose for any tables: <rope(x), dy> = <x, rope_bwd(dy)>.
TEST(RopeReference, BackwardIsTheTranspose) {
  hk::RopeProblem p(2, 3, 2, 10, 6, DType::kF32, false), b(2, 3, 2, 10, 6, DType::kF32, true);
  auto in = hktest::smooth_inputs(p, 3);
  auto bin = hktest::smooth_inputs(b, 9);
  bin[1] = in[1];
  bin[2] = in[2];
  auto y = hktest::run_reference(p, in);
  auto dx = hktest::run_reference(b, bin);
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < y[0].values.size(); ++i) {
    lhs += y[0].values[i] * bin[0].values[i];
    rhs += in[0].values[i] * dx[0].values[i];
  }
  EXPECT_NEAR(lhs, rhs, 1e-12 * (1 + std::fabs(lhs)));
}

TEST(RopeDispatch, EveryTestAndBenchProblemGetsAProductionRung) { hktest::expect_production_choice("rope"); }

TEST(RopeDispatch, MisalignedOperandsTakeTheVectorizedRung) {
  auto& reg = hk::Registry::get();
  hk::RopeProblem p(1, 5, 3, 70, 36, DType::kF16, false);
  p.align_bytes = 2;
  EXPECT_EQ(reg.choose(p).variant->name(), "v02_vectorized");
  EXPECT_FALSE(reg.variant("rope", "v01_naive")->is(hk::kFlagProduction));
}

// The public op on views at element offsets (each operand at its own 16-byte phase) with padded
// (b, s, h) rows of odd strides, tables off their 16-byte boundary, forward and backward.
TEST(RopePublic, MatchesReferenceOnMisalignedViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  struct Case { int64_t b, s, h, d, r; hktest::Place x, c, sn, y; };
  const std::vector<Case> cases = {
      {2, 7, 3, 128, 128, {0, 0}, {0, 0}, {0, 0}, {0, 0}},   {2, 7, 3, 128, 128, {1, 0}, {0, 0}, {0, 0}, {3, 0}},
      {1, 9, 4, 64, 32, {0, 67}, {1, 0}, {2, 0}, {0, 0}},    {2, 5, 2, 96, 64, {5, 99}, {3, 0}, {0, 0}, {1, 97}},
      {1, 3, 2, 10, 6, {1, 11}, {1, 0}, {1, 0}, {2, 13}},    {3, 4, 1, 256, 192, {2, 0}, {0, 0}, {0, 0}, {6, 0}}};
  for (DType dt : {DType::kBF16, DType::kF32, DType::kF16})
    for (const Case& c : cases)
      for (bool bwd : {false, true}) {
        hk::RopeProblem p(c.b, c.s, c.h, c.d, c.r, dt, bwd);
        const std::string what = p.key() + " at offsets " + std::to_string(c.x.offset) + "/" +
                                 std::to_string(c.y.offset) + " ld " + std::to_string(c.x.ld) + "/" +
                                 std::to_string(c.y.ld);
        hktest::check_offset_views(p, {c.x, c.c, c.sn}, {c.y}, [bwd](auto& in, auto& o) {
          if (bwd) hk::rope_backward(in[0], in[1], in[2], o[0]);
          else hk::rope(in[0], in[1], in[2], o[0]);
        }, 31, what);
      }
}
