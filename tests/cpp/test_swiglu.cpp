// SwiGLU beyond the registry sweep: bad input (CPU), empty tensors, the fp64 references against
// known values and finite differences (CPU), the dispatch, the public op on views at every
// 16-byte phase with padded rows, and a tensor past 2^31 output elements (GPU).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "bench/case.hpp"
#include "core/host.hpp"
#include "hk/hk.hpp"
#include "offset_views.hpp"
#include "swiglu/swiglu_op.hpp"
#include "test_util.hpp"

using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::expect_error;
using hktest::fake_ptr;

TEST(SwigluBadInput, WrongDtype) {
  TensorView x(fake_ptr(), DType::kI32, {4, 16}), y(fake_ptr(), DType::kI32, {4, 8});
  expect_error(ErrorKind::kType, "i32", [&] { hk::swiglu(x, y); });
  TensorView xb(fake_ptr(), DType::kBF16, {4, 16}), yf(fake_ptr(), DType::kF32, {4, 8});
  expect_error(ErrorKind::kType, "y is f32 but x is bf16", [&] { hk::swiglu(xb, yf); });
  TensorView dyh(fake_ptr(), DType::kF16, {4, 8}), dx(fake_ptr(), DType::kBF16, {4, 16});
  expect_error(ErrorKind::kType, "dy is f16", [&] { hk::swiglu_backward(xb, dyh, dx); });
}

TEST(SwigluBadInput, ShapesAndRanks) {
  TensorView x(fake_ptr(), DType::kBF16, {4, 7}), y(fake_ptr(), DType::kBF16, {4, 3});
  expect_error(ErrorKind::kValue, "must be even, got 7", [&] { hk::swiglu(x, y); });
  TensorView x3(fake_ptr(), DType::kBF16, {2, 4, 8}), y3(fake_ptr(), DType::kBF16, {2, 4, 4});
  expect_error(ErrorKind::kValue, "[rows, 2F]", [&] { hk::swiglu(x3, y3); });
  TensorView x2(fake_ptr(), DType::kBF16, {4, 8}), ybad(fake_ptr(), DType::kBF16, {4, 8});
  expect_error(ErrorKind::kValue, "y has shape [4x8], expected [4x4]", [&] { hk::swiglu(x2, ybad); });
  TensorView dy(fake_ptr(), DType::kBF16, {4, 4}), dxbad(fake_ptr(), DType::kBF16, {4, 4});
  expect_error(ErrorKind::kValue, "dx has shape [4x4], expected [4x8]", [&] { hk::swiglu_backward(x2, dy, dxbad); });
}

TEST(SwigluBadInput, NullPointerAndLayouts) {
  TensorView xn(nullptr, DType::kF32, {2, 6}), y(fake_ptr(), DType::kF32, {2, 3});
  expect_error(ErrorKind::kValue, "null pointer with 12 elements", [&] { hk::swiglu(xn, y); });
  TensorView xs(fake_ptr(), DType::kF32, {2, 6}, {12, 2});
  expect_error(ErrorKind::kNotSupported, "contiguous last dim", [&] { hk::swiglu(xs, y); });
  TensorView xo(fake_ptr(), DType::kF32, {2, 6}, {3, 1});
  expect_error(ErrorKind::kNotSupported, "rows overlap", [&] { hk::swiglu(xo, y); });
}

TEST(SwigluBadInput, EmptyTensorIsANoOp) {
  TensorView x(nullptr, DType::kBF16, {0, 16}), y(nullptr, DType::kBF16, {0, 8});
  EXPECT_NO_THROW(hk::swiglu(x, y));
  TensorView x0(nullptr, DType::kBF16, {5, 0}), y0(nullptr, DType::kBF16, {5, 0});
  EXPECT_NO_THROW(hk::swiglu(x0, y0));
  EXPECT_NO_THROW(hk::swiglu_backward(x0, y0, x0));
}

TEST(SwigluFamily, MakeProblemValidatesAttributes) {
  const hk::Family* f = hk::Registry::get().family("swiglu");
  ASSERT_NE(f, nullptr);
  TensorView x(fake_ptr(), DType::kBF16, {4, 16});
  expect_error(ErrorKind::kValue, "backwrd", [&] { f->make_problem({x}, hk::Attrs{{"backwrd", true}}); });
  expect_error(ErrorKind::kValue, "out_row_stride 7", [&] {
    f->make_problem({x}, hk::Attrs{{"out_row_stride", int64_t(7)}});
  });
  expect_error(ErrorKind::kValue, "2 inputs", [&] { f->make_problem({x}, hk::Attrs{{"backward", true}}); });
  auto p = f->make_problem({TensorView(fake_ptr(2), DType::kBF16, {4, 16}, {20, 1})}, hk::Attrs{});
  EXPECT_EQ(p->key(), "4x8_bf16_fwd_ld20-8");
  EXPECT_EQ(p->align_bytes, 2);
}

// Known values: silu(1) * 2 = 2 / (1 + e^-1); silu(0) = 0; NaN where the kernels put it.
TEST(SwigluReference, KnownValues) {
  hk::SwigluProblem p(1, 4, DType::kF32, false);
  hk::TensorSpec xs = p.inputs()[0];
  std::vector<hk::HostTensor> in = {{xs, {1.0, 0.0, -INFINITY, INFINITY, 2.0, 5.0, 1.0, 0.0}}};
  auto out = hktest::run_reference(p, in);
  EXPECT_NEAR(out[0].values[0], 2.0 / (1.0 + std::exp(-1.0)), 1e-15);
  EXPECT_EQ(out[0].values[1], 0.0);
  EXPECT_TRUE(std::isnan(out[0].values[2]));  // silu(-inf) = -inf / inf
  EXPECT_TRUE(std::isnan(out[0].values[3]));  // silu(+inf) * 0
}

// The fp64 backward against central differences of the fp64 forward: L = sum y * dy.
TEST(SwigluReference, BackwardMatchesFiniteDifferences) {
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{3, 5}, {1, 1}, {2, 8}}) {
    hk::SwigluProblem fwd(rows, dim, DType::kF32, false), bwd(rows, dim, DType::kF32, true);
    auto in = hktest::smooth_inputs(fwd, 5 + rows);
    hk::TensorSpec dy_spec{"dy", DType::kF32, {rows, dim}, {}, hk::Dist::kNormal, 1.0, {}};
    hk::HostTensor dy = hk::host::random_tensor(dy_spec, 77);
    auto dx = hktest::run_reference(bwd, {in[0], dy});
    hktest::expect_matches_fd(fwd, in, 0, dy.values, dx[0].values, "swiglu dx " + fwd.key());
  }
}

TEST(SwigluDispatch, EveryTestAndBenchProblemGetsAProductionRung) {
  hktest::expect_production_choice("swiglu");
}

TEST(SwigluDispatch, MisalignedOperandsTakeTheVectorizedRung) {
  auto& reg = hk::Registry::get();
  hk::SwigluProblem p(7, 33, DType::kBF16, true, 1);
  p.align_bytes = 2;
  EXPECT_EQ(reg.choose(p).variant->name(), "v02_vectorized");
  EXPECT_FALSE(reg.variant("swiglu", "v01_naive")->is(hk::kFlagProduction));
}

// The public op on views at chosen element offsets and row strides: every operand at its own
// 16-byte phase, rows whose phase shifts row by row (odd strides), F below one vector.
TEST(SwigluPublic, MatchesReferenceOnMisalignedViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  struct Case { int64_t rows, f; hktest::Place x, dy, out; };
  const std::vector<Case> cases = {
      {5, 1001, {0, 0}, {0, 0}, {0, 0}},        {5, 1001, {1, 0}, {3, 0}, {0, 0}},
      {4, 256, {0, 513}, {5, 259}, {3, 0}},     {9, 3, {1, 7}, {2, 5}, {1, 0}},
      {3, 4096, {7, 8195}, {1, 4097}, {2, 0}},  {6, 64, {2, 0}, {0, 0}, {6, 0}}};
  for (DType dt : {DType::kBF16, DType::kF32, DType::kF16})
    for (const Case& c : cases)
      for (bool bwd : {false, true}) {
        hk::SwigluProblem p(c.rows, c.f, dt, bwd);
        hktest::Place out = c.out;
        if (out.ld == 0 && c.out.offset % 2 == 1) out.ld = p.out_cols() + 1;  // odd offsets: padded rows too
        p.ld_out = out.ld ? out.ld : p.out_cols();
        const std::string what = p.key() + " at offsets " + std::to_string(c.x.offset) + "/" +
                                 std::to_string(c.dy.offset) + "/" + std::to_string(out.offset);
        if (bwd)
          hktest::check_offset_views(p, {c.x, c.dy}, {out},
                                     [](auto& in, auto& o) { hk::swiglu_backward(in[0], in[1], o[0]); }, 23, what);
        else
          hktest::check_offset_views(p, {c.x}, {out}, [](auto& in, auto& o) { hk::swiglu(in[0], o[0]); }, 23, what);
      }
}

// Past 2^31 output elements (bf16): x is [2^15 + 1, 2 * 65537], y [2^15 + 1, 65537]; ~13 GB of
// device memory. The output is checked at 2^20 sampled positions, every row's first and last
// elements, against the fp64 reference of the same bf16 inputs.
TEST(SwigluLarge, PastTwoToThe31Elements) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  const int64_t rows = (int64_t(1) << 15) + 1, f = 65537, n = rows * f;
  ASSERT_GT(n, int64_t(1) << 31);
  auto value = [](int64_t i) {  // a bf16 bit pattern with |v| < 16, finite
    uint64_t h = (uint64_t(i) * 0x9E3779B97F4A7C15ull) >> 40;
    return static_cast<uint16_t>(((h & 1) << 15) | ((0x70 + (h >> 1) % 0x13) << 7) | ((h >> 8) & 0x7F));
  };
  std::vector<uint16_t> xs(2 * n);
  hk::host::parallel_for(2 * n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) xs[i] = value(i);
  });
  hk::bench::DeviceBuffer dx(2 * n * 2), dy(n * 2);
  ASSERT_EQ(cudaMemcpy(dx.get(), xs.data(), 2 * n * 2, cudaMemcpyHostToDevice), cudaSuccess);
  auto bf = [](uint16_t b) {
    uint32_t w = uint32_t(b) << 16;
    float f32;
    std::memcpy(&f32, &w, 4);
    return double(f32);
  };
  hk::SwigluProblem p(rows, f, DType::kBF16, false);
  const hk::Tolerance tol = p.tolerance(0);
  for (const hk::Variant* v : hk::Registry::get().variants("swiglu")) {
    ASSERT_EQ(cudaMemset(dy.get(), 0xFF, n * 2), cudaSuccess);
    v->run(p, hk::Operands{{TensorView(dx.get(), DType::kBF16, {rows, 2 * f})}, {TensorView(dy.get(), DType::kBF16, {rows, f})}},
           nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> ys(n);
    ASSERT_EQ(cudaMemcpy(ys.data(), dy.get(), n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<int64_t> at;
    for (int64_t r = 0; r < rows; ++r) at.insert(at.end(), {r * f, r * f + f - 1});
    for (int64_t k = 0; k < (1 << 20); ++k) at.push_back(int64_t((uint64_t(k) * 0x9E3779B97F4A7C15ull) % uint64_t(n)));
    int64_t bad = 0, first = -1;
    for (int64_t i : at) {
      const int64_t r = i / f, j = i % f;
      const double g = bf(xs[r * 2 * f + j]), u = bf(xs[r * 2 * f + f + j]);
      const double want = g / (1.0 + std::exp(-g)) * u, got = bf(ys[i]);
      if (!(std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want))) {
        if (first < 0) first = i;
        ++bad;
      }
    }
    EXPECT_EQ(bad, 0) << v->name() << ": first mismatch at element " << first << " of " << n;
  }
}
