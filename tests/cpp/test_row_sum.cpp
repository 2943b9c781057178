// row_sum beyond the registry sweep: bad input (CPU), empty tensors, dispatch per shape, the
// public op on a 3-D padded view, and tensors past 2^31 elements per variant (GPU).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <cmath>

#include "bench/case.hpp"
#include "core/host.hpp"
#include "hk/hk.hpp"
#include "test_util.hpp"
#include "row_sum/row_sum_op.hpp"

using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::expect_error;
using hktest::expect_production_choice;
using hktest::fake_ptr;

TEST(RowSumBadInput, WrongDtype) {
  TensorView x(fake_ptr(), DType::kI32, {4, 16}), y(fake_ptr(), DType::kI32, {4});
  expect_error(ErrorKind::kType, "i32", [&] { hk::row_sum(x, y); });
  TensorView xb(fake_ptr(), DType::kBF16, {4, 16}), yf(fake_ptr(), DType::kF32, {4});
  expect_error(ErrorKind::kType, "y is f32 but x is bf16", [&] { hk::row_sum(xb, yf); });
}

TEST(RowSumBadInput, WrongOutputShape) {
  TensorView x(fake_ptr(), DType::kBF16, {4, 16}), y(fake_ptr(), DType::kBF16, {16});
  expect_error(ErrorKind::kValue, "needs [4]", [&] { hk::row_sum(x, y); });
  TensorView y2(fake_ptr(), DType::kBF16, {4, 1});
  expect_error(ErrorKind::kValue, "y has shape [4x1]", [&] { hk::row_sum(x, y2); });
}

TEST(RowSumBadInput, NullPointerWithElements) {
  TensorView x(nullptr, DType::kF32, {3, 5}), y(fake_ptr(), DType::kF32, {3});
  expect_error(ErrorKind::kValue, "x is a null pointer with 15 elements", [&] { hk::row_sum(x, y); });
  TensorView x2(fake_ptr(), DType::kF32, {3, 5}), y2(nullptr, DType::kF32, {3});
  expect_error(ErrorKind::kValue, "y is a null pointer with 3 elements", [&] { hk::row_sum(x2, y2); });
}

TEST(RowSumBadInput, UnsupportedLayouts) {
  TensorView y(fake_ptr(), DType::kF32, {4});
  // last dimension not contiguous (a transposed view)
  TensorView xt(fake_ptr(), DType::kF32, {4, 8}, {1, 4});
  expect_error(ErrorKind::kNotSupported, "contiguous last dimension", [&] { hk::row_sum(xt, y); });
  // overlapping rows
  TensorView xo(fake_ptr(), DType::kF32, {4, 8}, {4, 1});
  expect_error(ErrorKind::kNotSupported, "rows overlap", [&] { hk::row_sum(xo, y); });
  // leading dimensions that do not collapse into one row stride
  TensorView x3(fake_ptr(), DType::kF32, {2, 2, 8}, {100, 8, 1}), y3(fake_ptr(), DType::kF32, {2, 2});
  expect_error(ErrorKind::kNotSupported, "collapse", [&] { hk::row_sum(x3, y3); });
  // strided output
  TensorView ys(fake_ptr(), DType::kF32, {4}, {2});
  TensorView x(fake_ptr(), DType::kF32, {4, 8});
  expect_error(ErrorKind::kNotSupported, "y must be contiguous", [&] { hk::row_sum(x, ys); });
  // misaligned element pointer
  TensorView xm(fake_ptr(2), DType::kF32, {4, 8});
  expect_error(ErrorKind::kNotSupported, "aligned", [&] { hk::row_sum(xm, y); });
  // a scalar has no last dimension
  TensorView xs(fake_ptr(), DType::kF32, {});
  expect_error(ErrorKind::kValue, "at least one dimension", [&] { hk::row_sum(xs, y); });
}

TEST(RowSumBadInput, EmptyTensorIsANoOp) {
  TensorView x(nullptr, DType::kBF16, {0, 128}), y(nullptr, DType::kBF16, {0});
  EXPECT_NO_THROW(hk::row_sum(x, y));
  TensorView x3(nullptr, DType::kF32, {4, 0, 16}), y3(nullptr, DType::kF32, {4, 0});
  EXPECT_NO_THROW(hk::row_sum(x3, y3));
}

TEST(RowSumDispatch, DefaultIsTheSplitRowRung) {
  auto& reg = hk::Registry::get();
  EXPECT_EQ(reg.choose(hk::RowSumProblem(16384, 8192, DType::kBF16)).variant->name(), "v03_split_row");
  EXPECT_EQ(reg.choose(hk::RowSumProblem(4, int64_t(1) << 26, DType::kBF16)).variant->name(), "v03_split_row");
}

// Rows of length 0 sum to +0; a 3-D padded view collapses into [rows, T] with a row stride.
TEST(RowSumPublic, ZeroLengthRowsAndPaddedThreeDimensionalView) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  {
    hk::bench::DeviceBuffer yb(5 * 4);
    ASSERT_EQ(cudaMemset(yb.get(), 0xFF, 5 * 4), cudaSuccess);
    hk::row_sum(TensorView(nullptr, DType::kF32, {5, 0}), TensorView(yb.get(), DType::kF32, {5}));
    float y[5];
    ASSERT_EQ(cudaMemcpy(y, yb.get(), sizeof(y), cudaMemcpyDeviceToHost), cudaSuccess);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
  // x [3, 4, 1001] with rows padded to 1008: the same bytes as a [12, 1001] view, ld 1008.
  auto p = std::make_shared<hk::RowSumProblem>(12, 1001, DType::kBF16, 1008);
  hk::bench::Case c(p, 7);
  hk::Operands ops = c.operands();
  c.poison_outputs();
  hk::row_sum(TensorView(ops.in[0].data, DType::kBF16, {3, 4, 1001}, {4 * 1008, 1008, 1}),
              TensorView(ops.out[0].data, DType::kBF16, {3, 4}));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto r = c.check();
  EXPECT_TRUE(r.ok) << r.message;
}

// Past 2^31 elements, without host copies of the tensor: x is filled on the device with the
// byte 0x40 (bf16 0x4040 = 3.0), so each row sums to 3 T. Two layouts: 2 x (2^30 + 3)
// contiguous (numel past 2^31) and 2 x 2^20 with a row stride of 2^31 + 16 (row 1 starts past
// 2^31). Needs ~4.3 GB of device memory.
TEST(RowSumLarge, PastTwoToThe31Elements) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  struct L { int64_t rows, cols, ld; };
  const L layouts[] = {{2, (int64_t(1) << 30) + 3, 0}, {2, int64_t(1) << 20, (int64_t(1) << 31) + 16}};
  const int64_t elems = std::max(2 * ((int64_t(1) << 30) + 3), (int64_t(1) << 31) + 16 + (int64_t(1) << 20));
  hk::bench::DeviceBuffer xb(elems * 2), yb(2 * 2);
  ASSERT_EQ(cudaMemset(xb.get(), 0x40, elems * 2), cudaSuccess);
  for (const L& l : layouts) {
    hk::RowSumProblem p(l.rows, l.cols, DType::kBF16, l.ld);
    const double want = 3.0 * double(l.cols);
    for (const hk::Variant* v : hk::Registry::get().variants("row_sum")) {
      std::string why = v->supports(p);
      if (!why.empty()) continue;
      ASSERT_EQ(cudaMemset(yb.get(), 0xFF, 4), cudaSuccess);
      v->run(p, hk::Operands{{TensorView(xb.get(), DType::kBF16, {l.rows, l.cols}, {p.ldx, 1})},
                             {TensorView(yb.get(), DType::kBF16, {l.rows})}},
             nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << v->name();
      __nv_bfloat16 y[2];
      ASSERT_EQ(cudaMemcpy(y, yb.get(), 4, cudaMemcpyDeviceToHost), cudaSuccess);
      for (int r = 0; r < 2; ++r) {
        double got = __bfloat162float(y[r]);
        EXPECT_LE(std::fabs(got - want), want * 0x1p-8) << v->name() << " " << p.key() << " row " << r;
      }
    }
  }
}

TEST(RowSumDispatch, EveryTestAndBenchProblemGetsAProductionRung) {
  expect_production_choice("row_sum");
}
