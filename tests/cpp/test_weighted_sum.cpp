// Weighted sum beyond the registry sweep: bad input (CPU), empty tensors, dispatch, the
// backward reference against finite differences (CPU).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "offset_views.hpp"
#include "test_util.hpp"
#include "weighted_sum/weighted_sum_op.hpp"

using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::expect_error;
using hktest::expect_production_choice;
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
  // many rows of 129..2048 whole vectors: a one-shot block per row (where v03 served before)
  EXPECT_EQ(reg.choose(hk::WeightedSumProblem(16384, 8192, DType::kBF16, false)).variant->name(), "v04_oneshot_rows");
  EXPECT_EQ(reg.choose(hk::WeightedSumProblem(16384, 8192, DType::kF32, false)).variant->name(), "v04_oneshot_rows");
  // the backward of many such rows: two single-kind passes; rows that are not whole vectors: v02
  EXPECT_EQ(reg.choose(hk::WeightedSumProblem(16384, 8192, DType::kBF16, true)).variant->name(), "v05_two_pass_backward");
  EXPECT_EQ(reg.choose(hk::WeightedSumProblem(16384, 8192, DType::kF32, true)).variant->name(), "v05_two_pass_backward");
  hk::WeightedSumProblem part_vec(1024, 4097, DType::kF32, true, 3);  // 16-byte aligned rows, a partial last vector
  EXPECT_NE(reg.variant("weighted_sum", "v05_two_pass_backward")->supports(part_vec), "");
  EXPECT_EQ(reg.choose(part_vec).variant->name(), "v02_row_groups");
  // v04 runs a partial last vector (element by element) when asked by name
  EXPECT_EQ(reg.variant("weighted_sum", "v04_oneshot_rows")->supports(hk::WeightedSumProblem(1024, 4097, DType::kF32, false, 3)), "");
  // few rows (split into chunks) and rows too long for registers: v02
  EXPECT_EQ(reg.choose(hk::WeightedSumProblem(64, 8192, DType::kF32, true)).variant->name(), "v02_row_groups");
  EXPECT_EQ(reg.choose(hk::WeightedSumProblem(4, int64_t(1) << 26, DType::kBF16, false)).variant->name(), "v02_row_groups");
  EXPECT_EQ(reg.choose(hk::WeightedSumProblem(16384, 16384, DType::kF32, false)).variant->name(), "v02_row_groups");
  // 2-byte aligned rows: cuBLAS, which takes any alignment (the naive rung is ladder-only)
  hk::WeightedSumProblem odd(64, 1000, DType::kBF16, true, 1);
  EXPECT_EQ(reg.choose(odd).variant->name(), "baseline_cublas");
  hk::WeightedSumProblem odd_fwd(64, 1000, DType::kBF16, false, 1);
  EXPECT_EQ(reg.choose(odd_fwd).variant->name(), "baseline_cublas");
  // A public call whose x or w is 2-byte aligned (a view at an odd element offset): cuBLAS at
  // 96.6% of copy, not the naive rung's 44%.
  hk::WeightedSumProblem w_odd(16384, 8192, DType::kBF16, false);
  w_odd.align_bytes = 2;
  EXPECT_EQ(reg.choose(w_odd).variant->name(), "baseline_cublas");
  // Many 16-bit rows that v03 does not suit (<= 128 vectors, or not whole vectors): cuBLAS, whose
  // GEMV read 96.6% of copy where v02's forward read 34.6% (16384x8192 bf16); f32 stays on v02.
  EXPECT_EQ(reg.choose(hk::WeightedSumProblem(1000, 96, DType::kBF16, false)).variant->name(), "baseline_cublas");
  EXPECT_EQ(reg.choose(hk::WeightedSumProblem(16384, 8190, DType::kBF16, false)).variant->name(), "baseline_cublas");
  EXPECT_EQ(reg.choose(hk::WeightedSumProblem(1000, 96, DType::kF32, false)).variant->name(), "v02_row_groups");
  // few 16-bit rows: v02 splits them over the grid
  EXPECT_EQ(reg.choose(hk::WeightedSumProblem(64, 8192, DType::kBF16, false)).variant->name(), "v02_row_groups");
  // v03 runs fewer rows when asked by name (bench, tests): the 512-row rule is the dispatch's
  EXPECT_EQ(reg.variant("weighted_sum", "v03_pipelined_rows")->supports(hk::WeightedSumProblem(64, 8192, DType::kBF16, false)), "");
  // every rung the dispatch names is production; the naive rung is not
  EXPECT_FALSE(reg.variant("weighted_sum", "v01_partial_buffer")->is(hk::kFlagProduction));
  // unaligned operands past cuBLAS's int sizes: v02's kAny kernels, forward and backward
  for (bool bwd : {false, true}) {
    hk::WeightedSumProblem huge(1, (int64_t(1) << 31) + 8, DType::kBF16, bwd);
    huge.align_bytes = 2;
    EXPECT_NE(reg.variant("weighted_sum", "baseline_cublas")->supports(huge), "");
    EXPECT_EQ(reg.choose(huge).variant->name(), "v02_row_groups") << bwd;
    hk::WeightedSumProblem huge_ld(2, 1000, DType::kF32, bwd, (int64_t(1) << 31) + 1);
    EXPECT_EQ(reg.choose(huge_ld).variant->name(), "v02_row_groups") << bwd;
  }
}

// The public ops, and v02 by name (the public op prefers cuBLAS for unaligned operands), on
// views whose operands sit at their own 16-byte phases with row strides that are not 16-byte
// multiples: v02's kAny kernels (row groups, the few-long-rows split, the backward's column
// tiles with dw written directly and through partials).
TEST(WeightedSumPublic, MisalignedViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  using hktest::Place;
  struct L {
    Place x, w, dx;
  };
  auto layouts = [](int64_t d) {
    return std::vector<L>{
        {{1, d + 3}, {1, 0}, {1, d + 3}},  // one shared odd phase
        {{0, d}, {3, 0}, {3, d + 5}},      // w and dx at other phases
        {{2, d + 1}, {5, 0}, {0, d + 8}},  // dx aligned, x and w not
        {{0, d + 1}, {0, 0}, {0, d + 2}},  // aligned bases, rows at shifting phases
    };
  };
  const hk::Variant* v02 = hk::Registry::get().variant("weighted_sum", "v02_row_groups");
  const std::pair<int64_t, int64_t> shapes[] = {{33, 100}, {700, 1001}, {3, 200003}, {2000, 41}};
  for (DType dt : {DType::kBF16, DType::kF32})
    for (auto [rows, d] : shapes)
      for (bool bwd : {false, true})
        for (const L& l : layouts(d)) {
          hk::WeightedSumProblem p(rows, d, dt, bwd);
          const std::string what = p.key() + " x+" + std::to_string(l.x.offset) + "/" + std::to_string(l.x.ld) +
                                   " w+" + std::to_string(l.w.offset) + " dx+" + std::to_string(l.dx.offset) + "/" +
                                   std::to_string(l.dx.ld);
          const std::vector<Place> in = bwd ? std::vector<Place>{l.x, l.w, {}} : std::vector<Place>{l.x, l.w};
          const std::vector<Place> out = bwd ? std::vector<Place>{l.dx, {}} : std::vector<Place>{{}};
          hktest::check_offset_views(
              p, in, out,
              [&](auto& iv, auto& ov) {
                if (bwd) hk::weighted_sum_backward(iv[0], iv[1], iv[2], ov[0], ov[1]);
                else hk::weighted_sum(iv[0], iv[1], ov[0]);
              },
              19, "public " + what);
          hktest::check_offset_views(
              p, in, out,
              [&](auto& iv, auto& ov) {
                hk::WeightedSumProblem q(rows, d, dt, bwd);
                q.ld_x = iv[0].shape[0] > 1 ? iv[0].stride(0) : d;
                if (bwd) q.ld_dx = ov[0].shape[0] > 1 ? ov[0].stride(0) : d;
                int a = 256;
                for (auto& t : iv) a = std::min(a, t.alignment());
                for (auto& t : ov) a = std::min(a, t.alignment());
                q.align_bytes = a;
                v02->run(q, hk::Operands{iv, ov}, nullptr);
              },
              19, "v02 " + what);
        }
}

// The one-shot rungs on 16-byte aligned rows whose strides differ between x and dx (the test
// problems pad both alike): v05's dx pass walks dx at its own stride while its dw pass reads x at
// x's; v04 with padded rows and a partial last vector.
TEST(WeightedSumOneShot, DistinctRowStrides) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  auto& reg = hk::Registry::get();
  uint64_t seed = 21;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    hk::WeightedSumProblem bwd(600, 1600, dt, true);
    bwd.ld_x = 1608;
    bwd.ld_dx = 1632;
    hk::WeightedSumProblem fwd(600, 1601, dt, false, 7);
    for (auto [p, name] : {std::pair<hk::WeightedSumProblem*, const char*>{&bwd, "v05_two_pass_backward"},
                           {&fwd, "v04_oneshot_rows"}}) {
      const hk::Variant* v = reg.variant("weighted_sum", name);
      ASSERT_NE(v, nullptr) << name;
      ASSERT_EQ(v->supports(*p), "") << name << " " << p->key();
      hk::bench::Case c(std::make_shared<hk::WeightedSumProblem>(*p), seed);
      const hk::bench::CheckResult r = c.run_and_check(*v);
      EXPECT_TRUE(r.ok) << name << " " << p->key() << " seed " << seed << ": " << r.message;
      ++seed;
    }
  }
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

TEST(WeightedSumDispatch, EveryTestAndBenchProblemGetsAProductionRung) {
  expect_production_choice("weighted_sum");
}
