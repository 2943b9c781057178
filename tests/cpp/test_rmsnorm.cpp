// RMSNorm beyond the registry sweep: bad input (CPU), empty tensors, dispatch fallbacks, the
// backward reference against finite differences (CPU), and one tensor past 2^31 elements (GPU).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/case.hpp"
#include "rmsnorm/rmsnorm_op.hpp"
#include "offset_views.hpp"
#include "test_util.hpp"

using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::expect_error;
using hktest::expect_production_choice;
using hktest::fake_ptr;

namespace {
struct Views {
  TensorView x{fake_ptr(), DType::kBF16, {4, 8}}, g{fake_ptr(), DType::kBF16, {8}}, y{fake_ptr(), DType::kBF16, {4, 8}},
      rstd{fake_ptr(), DType::kF32, {4}};
};
}  // namespace

TEST(RmsNormBadInput, WrongDtype) {
  Views v;
  TensorView xi(fake_ptr(), DType::kI32, {4, 8});
  expect_error(ErrorKind::kType, "i32", [&] { hk::rmsnorm(xi, v.g, v.y, v.rstd); });
  TensorView gf(fake_ptr(), DType::kF32, {8});
  expect_error(ErrorKind::kType, "g is f32, expected bf16", [&] { hk::rmsnorm(v.x, gf, v.y, v.rstd); });
  TensorView rb(fake_ptr(), DType::kBF16, {4});
  expect_error(ErrorKind::kType, "rstd is bf16, expected f32", [&] { hk::rmsnorm(v.x, v.g, v.y, rb); });
}

TEST(RmsNormBadInput, MismatchedShapes) {
  Views v;
  TensorView g9(fake_ptr(), DType::kBF16, {9});
  expect_error(ErrorKind::kValue, "g has shape [9], expected [8]", [&] { hk::rmsnorm(v.x, g9, v.y, v.rstd); });
  TensorView y(fake_ptr(), DType::kBF16, {4, 9});
  expect_error(ErrorKind::kValue, "y has shape [4x9]", [&] { hk::rmsnorm(v.x, v.g, y, v.rstd); });
  TensorView dy(fake_ptr(), DType::kBF16, {5, 8});
  expect_error(ErrorKind::kValue, "dy has shape [5x8]",
               [&] { hk::rmsnorm_backward(v.x, v.g, v.rstd, dy, v.y, v.g); });
  TensorView x3(fake_ptr(), DType::kBF16, {2, 2, 8});
  expect_error(ErrorKind::kValue, "[rows, D]", [&] { hk::rmsnorm(x3, v.g, v.y, v.rstd); });
  expect_error(ErrorKind::kValue, "eps", [&] { hk::rmsnorm(v.x, v.g, v.y, v.rstd, -1.0); });
}

TEST(RmsNormBadInput, NullPointerWithElements) {
  Views v;
  TensorView x(nullptr, DType::kBF16, {4, 8});
  expect_error(ErrorKind::kValue, "null pointer with 32 elements", [&] { hk::rmsnorm(x, v.g, v.y, v.rstd); });
}

TEST(RmsNormBadInput, UnsupportedLayout) {
  Views v;
  TensorView xt(fake_ptr(), DType::kBF16, {4, 8}, {1, 4});  // transposed: last dim not contiguous
  expect_error(ErrorKind::kNotSupported, "contiguous last dim", [&] { hk::rmsnorm(xt, v.g, v.y, v.rstd); });
  TensorView xo(fake_ptr(), DType::kBF16, {4, 8}, {4, 1});  // overlapping rows
  expect_error(ErrorKind::kNotSupported, "row stride", [&] { hk::rmsnorm(xo, v.g, v.y, v.rstd); });
}

TEST(RmsNormBadInput, EmptyTensorIsANoOp) {
  TensorView x(nullptr, DType::kBF16, {0, 128}), g(fake_ptr(), DType::kBF16, {128}), r(nullptr, DType::kF32, {0});
  EXPECT_NO_THROW(hk::rmsnorm(x, g, x, r));
  TensorView x0(nullptr, DType::kBF16, {5, 0}), g0(nullptr, DType::kBF16, {0}), r5(fake_ptr(), DType::kF32, {5});
  EXPECT_NO_THROW(hk::rmsnorm(x0, g0, x0, r5));
  EXPECT_NO_THROW(hk::rmsnorm_backward(x0, g0, r5, x0, x0, g0));
}

TEST(RmsNormDispatch, RungByShapeAndAlignment) {
  auto& reg = hk::Registry::get();
  hk::RmsNormProblem p(16384, 8192, DType::kBF16, false);  // the bulk-copy forward default
  EXPECT_EQ(reg.choose(p).variant->name(), "v06_bulk_row");
  hk::RmsNormProblem few(64, 8192, DType::kBF16, false);  // v05 needs >= 512 rows, v06 does not
  EXPECT_EQ(reg.choose(few).variant->name(), "v06_bulk_row");
  hk::RmsNormProblem big(8, 57344, DType::kF32, false);  // 224 KiB rows: the most v06 stages
  EXPECT_EQ(reg.choose(big).variant->name(), "v06_bulk_row");
  hk::RmsNormProblem bigger(8, 57348, DType::kF32, false);
  EXPECT_EQ(reg.choose(bigger).variant->name(), "v04_split_row");
  hk::RmsNormProblem f32(16384, 8192, DType::kF32, true);  // backward: v06 declines, v07 runs it
  EXPECT_EQ(reg.choose(f32).variant->name(), "v07_smem_dg");
  hk::RmsNormProblem bwd_long(16384, 16392, DType::kBF16, true);  // > 2048 vectors: v07 and v03 decline
  EXPECT_EQ(reg.choose(bwd_long).variant->name(), "v04_split_row");
  hk::RmsNormProblem short_rows(16384, 1024, DType::kBF16, false);  // 128 vectors: warp per row
  EXPECT_EQ(reg.choose(short_rows).variant->name(), "v03_vectorized_onchip");
  hk::RmsNormProblem short_bwd(16384, 512, DType::kF32, true);
  EXPECT_EQ(reg.choose(short_bwd).variant->name(), "v03_vectorized_onchip");
  hk::RmsNormProblem part_vec(1024, 4097, DType::kBF16, false, 7);  // aligned rows, a partial last vector
  EXPECT_EQ(reg.choose(part_vec).variant->name(), "v03_vectorized_onchip");
  hk::RmsNormProblem longrow(4, int64_t(1) << 26, DType::kBF16, false);
  EXPECT_EQ(reg.choose(longrow).variant->name(), "v04_split_row");
  hk::RmsNormProblem odd_ld(64, 1024, DType::kBF16, false, 3);  // rows not 16-byte aligned
  EXPECT_EQ(reg.choose(odd_ld).variant->name(), "v02_fused_row");
  hk::RmsNormProblem huge_odd(2, 1 << 20, DType::kF32, true, 1);  // unaligned and too long for smem
  EXPECT_EQ(reg.choose(huge_odd).variant->name(), "v04_split_row");
  hk::RmsNormProblem huge_base(4, 1 << 20, DType::kBF16, false);  // 2-byte aligned base, aligned stride
  huge_base.align_bytes = 2;
  EXPECT_EQ(reg.choose(huge_base).variant->name(), "v04_split_row");
  hk::RmsNormProblem odd_base(64, 1024, DType::kBF16, true);
  odd_base.align_bytes = 4;
  EXPECT_EQ(reg.choose(odd_base).variant->name(), "v02_fused_row");
  // short rows go to v03 by the dispatch's rule; v06 and v07 can run them (asked by name)
  EXPECT_EQ(reg.variant("rmsnorm", "v06_bulk_row")->supports(short_rows), "");
  EXPECT_EQ(reg.variant("rmsnorm", "v07_smem_dg")->supports(short_bwd), "");
}

// The two-kernel rung is a teaching rung: the public op never runs it.
TEST(RmsNormDispatch, TwoKernelRungIsLadderOnly) {
  EXPECT_FALSE(hk::Registry::get().variant("rmsnorm", "v01_two_kernel")->is(hk::kFlagProduction));
}

// The public ops on views whose operands sit at their own 16-byte phases (base offsets in
// elements, g included) with row strides that are not 16-byte multiples: v02 for rows it
// stages, v04's kAny kernels for longer ones (one row and few rows; D with a partial vector).
TEST(RmsNormPublic, MisalignedViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  using hktest::Place;
  struct L {
    Place x, g, dy, out, dg;
  };
  auto layouts = [](int64_t d) {
    return std::vector<L>{
        {{1, d + 3}, {1, 0}, {1, d + 3}, {1, d + 3}, {1, 0}},  // one shared odd phase
        {{0, d}, {3, 0}, {0, d}, {3, d + 5}, {0, 0}},          // output and g at another phase
        {{2, d + 1}, {5, 0}, {5, d + 7}, {0, d + 8}, {3, 0}},  // output aligned, every input not
        {{0, d}, {0, 0}, {0, d + 2}, {0, d + 1}, {0, 0}},      // aligned bases, rows at shifting phases
    };
  };
  const std::pair<int64_t, int64_t> shapes[] = {{33, 100}, {6, 4097}, {1, 100003}, {3, 131075}};
  for (DType dt : {DType::kBF16, DType::kF32})
    for (auto [rows, d] : shapes)
      for (bool bwd : {false, true})
        for (const L& l : layouts(d)) {
          hk::RmsNormProblem p(rows, d, dt, bwd);
          const std::string what = p.key() + " x+" + std::to_string(l.x.offset) + "/" + std::to_string(l.x.ld) +
                                   " g+" + std::to_string(l.g.offset) + " dy+" + std::to_string(l.dy.offset) + "/" +
                                   std::to_string(l.dy.ld) + " out+" + std::to_string(l.out.offset) + "/" +
                                   std::to_string(l.out.ld);
          if (bwd)
            hktest::check_offset_views(
                p, {l.x, l.g, {}, l.dy}, {l.out, l.dg},
                [](auto& in, auto& out) { hk::rmsnorm_backward(in[0], in[1], in[2], in[3], out[0], out[1]); }, 17,
                what);
          else
            hktest::check_offset_views(
                p, {l.x, l.g}, {l.out, {}},
                [&](auto& in, auto& out) { hk::rmsnorm(in[0], in[1], out[0], out[1], p.eps); }, 17, what);
        }
}

// The fp64 backward reference against central differences of the fp64 forward reference:
// L = sum y * dy, dL/dx = dx and dL/dg = dg, with rstd taken from the forward.
TEST(RmsNormReference, BackwardMatchesFiniteDifferences) {
  for (auto [rows, dim, eps] : {std::tuple<int64_t, int64_t, double>{3, 5, 1e-6}, {2, 7, 0.5}, {1, 1, 1e-3}}) {
    hk::RmsNormProblem fwd(rows, dim, DType::kF32, false, 0, eps), bwd(rows, dim, DType::kF32, true, 0, eps);
    auto in = hktest::smooth_inputs(fwd, 11 + rows);
    hk::TensorSpec dy_spec{"dy", DType::kF32, {rows, dim}, {}, hk::Dist::kNormal, 1.0, {}};
    std::vector<double> dy = hk::host::random_tensor(dy_spec, 5).values;
    auto fout = hktest::run_reference(fwd, in);
    std::vector<hk::HostTensor> bin = {in[0], in[1], {bwd.inputs()[2], fout[1].values}, {dy_spec, dy}};
    auto grads = hktest::run_reference(bwd, bin);
    hktest::expect_matches_fd(fwd, in, 0, dy, grads[0].values, "dx");
    hktest::expect_matches_fd(fwd, in, 1, dy, grads[1].values, "dg");
  }
}

TEST(RmsNormReference, SpotValues) {
  hk::RmsNormProblem p(1, 2, DType::kF32, false, 0, 0.0);
  auto out = hktest::run_reference(p, {{p.inputs()[0], {3.0, 4.0}}, {p.inputs()[1], {1.0, 2.0}}});
  const double rs = 1.0 / std::sqrt(12.5);  // mean(9, 16) = 12.5
  EXPECT_DOUBLE_EQ(out[1].values[0], rs);
  EXPECT_DOUBLE_EQ(out[0].values[0], 3.0 * rs);
  EXPECT_DOUBLE_EQ(out[0].values[1], 8.0 * rs);
}

// Past 2^31 elements (GPU): 2^16 + 3 rows of 2^15 bf16 with a row stride of 2^15 + 8. Rows
// repeat with period 7, so the fp64 reference is 7 rows and every output row is checked.
TEST(RmsNormLarge, PastTwoToThe31Elements) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  const int64_t rows = (int64_t(1) << 16) + 3, dim = int64_t(1) << 15, ld = dim + 8, period = 7;
  hk::RmsNormProblem small(period, dim, DType::kBF16, false);
  auto pin = hktest::smooth_inputs(small, 3);
  auto pref = hktest::run_reference(small, pin);
  std::vector<uint8_t> xrows, g;
  hk::host::encode(small.inputs()[0], pin[0].values, xrows);
  hk::host::encode(small.inputs()[1], pin[1].values, g);
  const size_t row_bytes = dim * 2, bytes = size_t(rows) * ld * 2;
  hk::bench::DeviceBuffer dx(bytes), dy(bytes), dg(dim * 2), dr(rows * 4);
  for (int64_t r = 0; r < rows; ++r)
    ASSERT_EQ(cudaMemcpy(static_cast<char*>(dx.get()) + r * ld * 2, xrows.data() + (r % period) * row_bytes, row_bytes,
                         cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dg.get(), g.data(), g.size(), cudaMemcpyHostToDevice), cudaSuccess);
  hk::RmsNormProblem p(rows, dim, DType::kBF16, false, 8);
  hk::Operands ops{{TensorView(dx.get(), DType::kBF16, {rows, dim}, {ld, 1}), TensorView(dg.get(), DType::kBF16, {dim})},
                   {TensorView(dy.get(), DType::kBF16, {rows, dim}, {ld, 1}), TensorView(dr.get(), DType::kF32, {rows})}};
  for (const hk::Variant* v : hk::Registry::get().variants("rmsnorm")) {
    if (!v->supports(p).empty()) continue;
    ASSERT_EQ(cudaMemset(dy.get(), 0xFF, bytes), cudaSuccess);
    v->run(p, ops, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> ys(bytes);
    ASSERT_EQ(cudaMemcpy(ys.data(), dy.get(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    hk::TensorSpec row_spec{"y", DType::kBF16, {dim}, {}, hk::Dist::kNormal, 1.0, {}};
    int64_t bad_row = -1;
    for (int64_t r = 0; r < rows && bad_row < 0; r += (r < 64 || r > rows - 64) ? 1 : 997) {
      std::vector<uint8_t> one(ys.begin() + r * ld * 2, ys.begin() + r * ld * 2 + row_bytes);
      std::vector<double> got;
      hk::host::decode(row_spec, one, got);
      std::vector<double> want(pref[0].values.begin() + (r % period) * dim, pref[0].values.begin() + (r % period + 1) * dim);
      if (!hk::bench::compare(row_spec, got, want, p.tolerance(0)).ok) bad_row = r;
    }
    EXPECT_EQ(bad_row, -1) << v->name() << ": row " << bad_row << " of " << rows << " differs";
  }
}

TEST(RmsNormDispatch, EveryTestAndBenchProblemGetsAProductionRung) {
  expect_production_choice("rmsnorm");
}
