// softmax beyond the registry sweep: bad input (CPU), empty tensors, dispatch per shape, a
// finite-difference check of the backward reference (CPU), the public ops on padded views,
// and a forward past 2^31 elements per variant (GPU).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <cmath>

#include "bench/case.hpp"
#include "core/host.hpp"
#include "hk/hk.hpp"
#include "offset_views.hpp"
#include "test_util.hpp"
#include "softmax/softmax_op.hpp"

using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::expect_error;
using hktest::expect_production_choice;
using hktest::fake_ptr;

namespace {

std::vector<double> run_reference(const hk::SoftmaxProblem& p, const std::vector<std::vector<double>>& inputs) {
  std::vector<hk::HostTensor> in;
  for (size_t i = 0; i < inputs.size(); ++i) in.push_back({p.inputs()[i], inputs[i]});
  std::vector<hk::HostTensor> out = {{p.outputs()[0], std::vector<double>(p.numel())}};
  p.reference(in, out);
  return out[0].values;
}

}  // namespace

TEST(SoftmaxBadInput, WrongDtype) {
  TensorView x(fake_ptr(), DType::kI32, {4, 16}), y(fake_ptr(), DType::kI32, {4, 16});
  expect_error(ErrorKind::kType, "i32", [&] { hk::softmax(x, y); });
  TensorView xb(fake_ptr(), DType::kBF16, {4, 16}), yf(fake_ptr(), DType::kF32, {4, 16});
  expect_error(ErrorKind::kType, "y is f32 but x is bf16", [&] { hk::softmax(xb, yf); });
  expect_error(ErrorKind::kType, "dy is f32 but y is bf16", [&] { hk::softmax_backward(xb, yf, xb); });
}

TEST(SoftmaxBadInput, MismatchedShapes) {
  TensorView x(fake_ptr(), DType::kBF16, {4, 8}), y(fake_ptr(), DType::kBF16, {8, 4});
  expect_error(ErrorKind::kValue, "y has shape [8x4]", [&] { hk::softmax(x, y); });
  TensorView dy(fake_ptr(), DType::kBF16, {4, 9});
  expect_error(ErrorKind::kValue, "dy has shape [4x9]", [&] { hk::softmax_backward(x, dy, x); });
}

TEST(SoftmaxBadInput, NullPointerWithElements) {
  TensorView x(nullptr, DType::kF32, {3, 5}), y(fake_ptr(), DType::kF32, {3, 5});
  expect_error(ErrorKind::kValue, "x is a null pointer with 15 elements", [&] { hk::softmax(x, y); });
  expect_error(ErrorKind::kValue, "dx is a null pointer with 15 elements", [&] { hk::softmax_backward(y, y, x); });
}

TEST(SoftmaxBadInput, UnsupportedLayouts) {
  TensorView y(fake_ptr(), DType::kF32, {4, 8});
  TensorView xt(fake_ptr(), DType::kF32, {4, 8}, {1, 4});
  expect_error(ErrorKind::kNotSupported, "contiguous last dimension", [&] { hk::softmax(xt, y); });
  TensorView xo(fake_ptr(), DType::kF32, {4, 8}, {4, 1});
  expect_error(ErrorKind::kNotSupported, "rows overlap", [&] { hk::softmax(xo, y); });
  TensorView x3(fake_ptr(), DType::kF32, {2, 2, 8}, {100, 8, 1}), y3(fake_ptr(), DType::kF32, {2, 2, 8});
  expect_error(ErrorKind::kNotSupported, "collapse", [&] { hk::softmax(x3, y3); });
  TensorView xm(fake_ptr(2), DType::kF32, {4, 8});
  expect_error(ErrorKind::kNotSupported, "aligned", [&] { hk::softmax(xm, y); });
  TensorView xs(fake_ptr(), DType::kF32, {});
  expect_error(ErrorKind::kValue, "at least one dimension", [&] { hk::softmax(xs, xs); });
}

TEST(SoftmaxBadInput, EmptyTensorIsANoOp) {
  TensorView x(nullptr, DType::kBF16, {0, 128}), y(nullptr, DType::kBF16, {0, 128});
  EXPECT_NO_THROW(hk::softmax(x, y));
  EXPECT_NO_THROW(hk::softmax_backward(x, x, y));
  TensorView z(nullptr, DType::kF32, {4, 0});
  EXPECT_NO_THROW(hk::softmax(z, z));
}

TEST(SoftmaxDispatch, PicksByShape) {
  auto& reg = hk::Registry::get();
  // rows that fit on chip: the default
  EXPECT_EQ(reg.choose(hk::SoftmaxProblem(16384, 8192, DType::kBF16, false)).variant->name(), "v02_onchip_row");
  EXPECT_EQ(reg.choose(hk::SoftmaxProblem(16384, 8192, DType::kF32, true)).variant->name(), "v02_onchip_row");
  // rows too long for one block's registers that a 16-block cluster holds: the cluster split
  EXPECT_EQ(reg.choose(hk::SoftmaxProblem(8, 16385, DType::kBF16, false)).variant->name(), "v04_split_row_cluster");
  EXPECT_EQ(reg.choose(hk::SoftmaxProblem(4, 16 * 16384, DType::kBF16, true)).variant->name(), "v04_split_row_cluster");
  EXPECT_EQ(reg.choose(hk::SoftmaxProblem(4, 16 * 8192, DType::kF32, true)).variant->name(), "v04_split_row_cluster");
  // longer rows, read twice by every rung: chunks over the whole grid, the apply pass in one-shot blocks
  EXPECT_EQ(reg.choose(hk::SoftmaxProblem(4, int64_t(1) << 26, DType::kBF16, false)).variant->name(), "v07_oneshot_apply");
  EXPECT_EQ(reg.choose(hk::SoftmaxProblem(4, int64_t(1) << 26, DType::kF32, true)).variant->name(), "v07_oneshot_apply");
  EXPECT_EQ(reg.choose(hk::SoftmaxProblem(4, 16 * 8192 + 1, DType::kF32, true)).variant->name(), "v07_oneshot_apply");
  EXPECT_EQ(reg.choose(hk::SoftmaxProblem(4, 16 * 16384 + 1, DType::kBF16, false)).variant->name(), "v07_oneshot_apply");
  // which band is v04's is the dispatch's rule: v06 runs any row length when asked by name
  EXPECT_EQ(reg.variant("softmax", "v06_split_row_grid")->supports(hk::SoftmaxProblem(16384, 8192, DType::kBF16, false)), "");
  EXPECT_EQ(reg.variant("softmax", "v06_split_row_grid")->supports(hk::SoftmaxProblem(8, 16385, DType::kBF16, false)), "");
  // v05 (below v02 where it runs) is ladder-only, and runs few rows when asked by name
  EXPECT_FALSE(reg.variant("softmax", "v05_pipelined_rows")->is(hk::kFlagProduction));
  EXPECT_EQ(reg.variant("softmax", "v05_pipelined_rows")->supports(hk::SoftmaxProblem(8, 8192, DType::kBF16, false)), "");
  // input and output rows at different 16-byte phases, and 2-byte aligned bases: the same rungs
  // (split at the output's phase)
  hk::SoftmaxProblem odd(9, 100, DType::kBF16, false, 101, 100);
  EXPECT_NE(odd.same_row_phase(), "");
  EXPECT_EQ(reg.choose(odd).variant->name(), "v02_onchip_row");
  hk::SoftmaxProblem odd_bwd(9, 100, DType::kBF16, true, 101, 103, 105);
  odd_bwd.align_bytes = 2;
  EXPECT_EQ(reg.choose(odd_bwd).variant->name(), "v02_onchip_row");
  hk::SoftmaxProblem odd_cluster(4, 20001, DType::kF32, false, 20003, 20001);
  odd_cluster.align_bytes = 4;
  EXPECT_EQ(reg.choose(odd_cluster).variant->name(), "v04_split_row_cluster");
  hk::SoftmaxProblem odd_grid(4, int64_t(1) << 20, DType::kBF16, true, (int64_t(1) << 20) + 1, (int64_t(1) << 20) + 3,
                              (int64_t(1) << 20) + 5);
  odd_grid.align_bytes = 2;
  EXPECT_EQ(reg.choose(odd_grid).variant->name(), "v07_oneshot_apply");
}

// The three-pass rung is a teaching rung: the public op never runs it.
TEST(SoftmaxDispatch, ThreePassRungIsLadderOnly) {
  EXPECT_FALSE(hk::Registry::get().variant("softmax", "v01_three_pass")->is(hk::kFlagProduction));
}

// The backward formula dx = y (dy - sum(dy y)) against central differences of
// L(x) = sum(dy * softmax(x)), both from the fp64 reference.
TEST(SoftmaxGradient, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 3, cols = 7;
  hk::SoftmaxProblem fwd(rows, cols, DType::kF32, false), bwd(rows, cols, DType::kF32, true);
  hk::host::Rng rng(1234);
  std::vector<double> x(rows * cols), dy(rows * cols);
  for (auto& v : x) v = 3.0 * rng.normal();
  for (auto& v : dy) v = rng.normal();
  const std::vector<double> y = run_reference(fwd, {x});
  const std::vector<double> dx = run_reference(bwd, {y, dy});
  auto loss = [&](const std::vector<double>& xs) {
    std::vector<double> ys = run_reference(fwd, {xs});
    double l = 0;
    for (size_t i = 0; i < ys.size(); ++i) l += dy[i] * ys[i];
    return l;
  };
  const double h = 1e-5;
  for (int64_t i = 0; i < rows * cols; ++i) {
    std::vector<double> xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    const double fd = (loss(xp) - loss(xm)) / (2 * h);
    EXPECT_NEAR(dx[i], fd, 1e-8 + 1e-6 * std::fabs(fd)) << "element " << i;
  }
}

// The forward reference on the specials the tests rely on.
TEST(SoftmaxReference, SpecialRows) {
  const double inf = std::numeric_limits<double>::infinity();
  hk::SoftmaxProblem p(4, 3, DType::kF32, false);
  std::vector<double> y = run_reference(p, {{1, std::nan(""), 2, 1, inf, 2, -inf, -inf, -inf, 1e4, -inf, 1e4 - 1}});
  for (int c = 0; c < 9; ++c) EXPECT_TRUE(std::isnan(y[c])) << c;  // NaN row, +inf row, all -inf row
  EXPECT_NEAR(y[9], 1 / (1 + std::exp(-1.0)), 1e-15);              // no overflow at 1e4
  EXPECT_EQ(y[10], 0.0);
}

// The public ops on 3-D padded views (collapsed to [rows, T] with row strides), input and
// output strides different but in the same 16-byte phase.
TEST(SoftmaxPublic, PaddedThreeDimensionalViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  for (bool bwd : {false, true}) {
    auto p = std::make_shared<hk::SoftmaxProblem>(12, 1001, DType::kBF16, bwd, 1008, 1016, 1024);
    hk::bench::Case c(p, 11);
    hk::Operands ops = c.operands();
    c.poison_outputs();
    auto view = [](void* ptr, int64_t ld) { return TensorView(ptr, DType::kBF16, {3, 4, 1001}, {4 * ld, ld, 1}); };
    if (bwd) hk::softmax_backward(view(ops.in[0].data, 1008), view(ops.in[1].data, 1024), view(ops.out[0].data, 1016));
    else hk::softmax(view(ops.in[0].data, 1008), view(ops.out[0].data, 1016));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto r = c.check();
    EXPECT_TRUE(r.ok) << p->key() << ": " << r.message;
  }
}

// The public ops on views whose operands sit at their own 16-byte phases (base offsets in
// elements) with row strides that are not 16-byte multiples and differ between operands, in each
// production rung's band of row lengths (v02 warp and block per row, v04, v06).
TEST(SoftmaxPublic, MisalignedViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  using hktest::Place;
  struct L {
    Place a, dy, out;
  };
  auto layouts = [](int64_t cols) {
    return std::vector<L>{
        {{1, cols + 3}, {1, cols + 3}, {1, cols + 3}},  // one shared odd phase
        {{0, cols}, {0, cols}, {3, cols + 5}},          // output at another phase and stride
        {{2, cols + 1}, {5, cols + 7}, {0, cols + 8}},  // output aligned, every input not
        {{0, cols}, {0, cols + 2}, {0, cols + 1}},      // aligned bases, rows at shifting phases
    };
  };
  const std::pair<int64_t, int64_t> shapes[] = {{33, 100}, {5, 5}, {6, 4097}, {3, 20001}, {2, 300007}};
  for (DType dt : {DType::kBF16, DType::kF32})
    for (auto [rows, cols] : shapes)
      for (bool bwd : {false, true})
        for (const L& l : layouts(cols)) {
          hk::SoftmaxProblem p(rows, cols, dt, bwd);
          const std::string what = p.key() + " a+" + std::to_string(l.a.offset) + "/" + std::to_string(l.a.ld) +
                                   " dy+" + std::to_string(l.dy.offset) + "/" + std::to_string(l.dy.ld) + " out+" +
                                   std::to_string(l.out.offset) + "/" + std::to_string(l.out.ld);
          if (bwd)
            hktest::check_offset_views(p, {l.a, l.dy}, {l.out},
                                       [](auto& in, auto& out) { hk::softmax_backward(in[0], in[1], out[0]); }, 13, what);
          else
            hktest::check_offset_views(p, {l.a}, {l.out}, [](auto& in, auto& out) { hk::softmax(in[0], out[0]); }, 13,
                                       what);
        }
}

// Past 2^31 elements without host copies of the tensors: x is the byte 0x40 everywhere (bf16
// 3.0), so every y is 1/T; the output is poisoned first and sampled at both ends of each row
// (the end of row 1 of the first layout holds element 2^31). Layouts: 2 x (2^30 + 3) contiguous, and 2 x 2^20 rows with a stride
// of 2^31 + 16 (row 1 starts past 2^31). Needs ~8.6 GB of device memory.
TEST(SoftmaxLarge, PastTwoToThe31Elements) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  struct L { int64_t rows, cols, ld; };
  const L layouts[] = {{2, (int64_t(1) << 30) + 3, 0}, {2, int64_t(1) << 20, (int64_t(1) << 31) + 16}};
  const int64_t elems = std::max(2 * ((int64_t(1) << 30) + 3), (int64_t(1) << 31) + 16 + (int64_t(1) << 20));
  hk::bench::DeviceBuffer xb(elems * 2), yb(elems * 2);
  ASSERT_EQ(cudaMemset(xb.get(), 0x40, elems * 2), cudaSuccess);
  const int64_t kSample = 4096;
  std::vector<__nv_bfloat16> got(kSample);
  for (const L& l : layouts) {
    hk::SoftmaxProblem p(l.rows, l.cols, DType::kBF16, false, l.ld, l.ld);
    const double want = 1.0 / double(l.cols);
    for (const hk::Variant* v : hk::Registry::get().variants("softmax")) {
      if (!v->supports(p).empty()) continue;
      ASSERT_EQ(cudaMemset(yb.get(), 0xFF, elems * 2), cudaSuccess);
      const std::vector<int64_t> strides = {p.ld_in, 1};
      v->run(p, hk::Operands{{TensorView(xb.get(), DType::kBF16, {l.rows, l.cols}, strides)},
                             {TensorView(yb.get(), DType::kBF16, {l.rows, l.cols}, strides)}},
             nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << v->name();
      std::vector<int64_t> starts;  // element offsets of the sampled windows
      for (int64_t r = 0; r < l.rows; ++r) {
        starts.push_back(r * p.ld_in);
        starts.push_back(r * p.ld_in + l.cols - kSample);
      }
      for (int64_t s : starts) {
        ASSERT_EQ(cudaMemcpy(got.data(), static_cast<char*>(yb.get()) + s * 2, kSample * 2, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        int64_t bad = 0;
        for (const auto& g : got) bad += !(std::fabs(double(__bfloat162float(g)) - want) <= want / 128);
        EXPECT_EQ(bad, 0) << v->name() << " " << p.key() << ": window at element " << s;
      }
    }
  }
}

TEST(SoftmaxDispatch, EveryTestAndBenchProblemGetsAProductionRung) {
  expect_production_choice("softmax");
}
