// Weighted sum beyond the registry sweep: bad input (CPU), empty tensors, dispatch, the
// backward reference against finite differences (CPU).
#include <gtest/gtest.h>

#include "test_util.hpp"
#include "weighted_sum/weighted_sum_op.hpp"

using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::expect_error;
using hktest::fake_ptr;

TEST(WeightedSumBadInput, WrongDtype) {
  TensorView x(fake_ptr(), DType::kU8, {4, 8}), w(fake_ptr(), DType::kU8, {8}), y(fake_ptr(), DType::kU8, {4});
  expect_error(ErrorKind::kType, "u8", [&] { hk::weighted_sum(x, w, y); });
  TensorView xb(fake_ptr(), DType::kBF16, {4, 8}), wb(fake_ptr(), DType::kBF16, {8}), yf(fake_ptr(), DType::kF32, {4});
  expect_error(ErrorKind::kType, "y is f32, expected bf16", [&] { hk::weighted_sum(xb, wb, yf); });
}

TEST(WeightedSumBadInput, MismatchedShapesNullAndLayout) {
  TensorView x(fake_ptr(), DType::kF16, {4, 8}), w(fake_ptr(), DType::kF16, {8}), y(fake_ptr(), DType::kF16, {4});
  TensorView w7(fake_ptr(), DType::kF16, {7});
  expect_error(ErrorKind::kValue, "w has shape [7], expected [8]", [&] { hk::weighted_sum(x, w7, y); });
  TensorView dy5(fake_ptr(), DType::kF16, {5});
  expect_error(ErrorKind::kValue, "dy has shape [5], expected [4]", [&] { hk::weighted_sum_backward(x, w, dy5, x, w); });
  TensorView xn(nullptr, DType::kF16, {4, 8});
  expect_error(ErrorKind::kValue, "null pointer with 32 elements", [&] { hk::weighted_sum(xn, w, y); });
  TensorView xt(fake_ptr(), DType::kF16, {4, 8}, {1, 4});
  expect_error(ErrorKind::kNotSupported, "contiguous last dim", [&] { hk::weighted_sum(xt, w, y); });
  TensorView ws(fake_ptr(), DType::kF16, {8}, {2});
  expect_error(ErrorKind::kNotSupported, "w must be contiguous", [&] { hk::weighted_sum(x, ws, y); });
}

TEST(WeightedSumBadInput, EmptyTensorIsANoOp) {
  TensorView x(nullptr, DType::kBF16, {0, 16}), w(fake_ptr(), DType::kBF16, {16}), y(nullptr, DType::kBF16, {0});
  EXPECT_NO_THROW(hk::weighted_sum(x, w, y));
  TensorView x0(nullptr, DType::kBF16, {3, 0}), w0(nullptr, DType::kBF16, {0}), dy(fake_ptr(), DType::kBF16, {3});
  EXPECT_NO_THROW(hk::weighted_sum_backward(x0, w0, dy, x0, w0));
}

TEST(WeightedSumDispatch, DefaultAndFallback) {
  auto& reg = hk::Registry::get();
  // many rows that fit in a block's registers: the pipelined row rung (forward only)
  EXPECT_EQ(reg.pick(hk::WeightedSumProblem(16384, 8192, DType::kBF16, false)).name(), "v03_pipelined_rows");
  EXPECT_EQ(reg.pick(hk::WeightedSumProblem(16384, 8192, DType::kF32, false)).name(), "v03_pipelined_rows");
  // the backward, few long rows (split into chunks) and rows too long for registers: v02
  EXPECT_EQ(reg.pick(hk::WeightedSumProblem(16384, 8192, DType::kBF16, true)).name(), "v02_row_groups");
  EXPECT_EQ(reg.pick(hk::WeightedSumProblem(4, int64_t(1) << 26, DType::kBF16, false)).name(), "v02_row_groups");
  EXPECT_EQ(reg.pick(hk::WeightedSumProblem(16384, 16384, DType::kF32, false)).name(), "v02_row_groups");
  hk::WeightedSumProblem odd(64, 1000, DType::kBF16, true, 1);  // 2-byte aligned rows
  EXPECT_EQ(reg.pick(odd).name(), "v01_partial_buffer");
}

TEST(WeightedSumReference, BackwardMatchesFiniteDifferences) {
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{3, 5}, {1, 4}, {4, 1}}) {
    hk::WeightedSumProblem fwd(rows, dim, DType::kF32, false), bwd(rows, dim, DType::kF32, true);
    auto in = hktest::smooth_inputs(fwd, 7 + rows);
    hk::TensorSpec dy_spec{"dy", DType::kF32, {rows}, {}, hk::Dist::kNormal, 1.0, {}};
    std::vector<double> dy = hk::host::random_tensor(dy_spec, 9).values;
    auto grads = hktest::run_reference(bwd, {in[0], in[1], {dy_spec, dy}});
    hktest::expect_matches_fd(fwd, in, 0, dy, grads[0].values, "dx");
    hktest::expect_matches_fd(fwd, in, 1, dy, grads[1].values, "dw");
  }
}
