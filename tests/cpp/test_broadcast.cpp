// The broadcast families beyond the registry sweep: bad input (CPU), empty tensors, dispatch,
// NaN-keeping relu, and row_scale_relu's backward reference against finite differences (CPU);
// the public ops on views at misaligned offsets and row strides (GPU).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "broadcast/broadcast_op.hpp"
#include "offset_views.hpp"
#include "test_util.hpp"

using hk::BroadcastKind;
using hk::BroadcastProblem;
using hk::DType;
using hk::ErrorKind;
using hk::TensorView;
using hktest::expect_error;
using hktest::expect_production_choice;
using hktest::fake_ptr;

TEST(BroadcastBadInput, WrongDtype) {
  TensorView xi(fake_ptr(), DType::kI32, {8}), zi(fake_ptr(), DType::kI32, {8});
  expect_error(ErrorKind::kType, "add_scalar: x is i32", [&] { hk::add_scalar(xi, 1.0, zi); });
  TensorView x(fake_ptr(), DType::kBF16, {8}), y(fake_ptr(), DType::kF16, {4}), z(fake_ptr(), DType::kBF16, {4, 8});
  expect_error(ErrorKind::kType, "outer_add: y is f16, expected bf16", [&] { hk::outer_add(x, y, z); });
}

TEST(BroadcastBadInput, MismatchedShapesNullAndLayout) {
  TensorView x(fake_ptr(), DType::kF32, {8}), y(fake_ptr(), DType::kF32, {4}), z(fake_ptr(), DType::kF32, {8, 4});
  expect_error(ErrorKind::kValue, "z has shape [8x4], expected [4x8]", [&] { hk::outer_mul_relu(x, y, z); });
  TensorView z2(fake_ptr(), DType::kF32, {3, 8});
  expect_error(ErrorKind::kValue, "add_scalar: z has shape [3x8]", [&] { hk::add_scalar(z, 2.0, z2); });
  TensorView xm(fake_ptr(), DType::kF32, {4, 8}), ym(fake_ptr(), DType::kF32, {5});
  expect_error(ErrorKind::kValue, "y has shape [5], expected [4]", [&] { hk::row_scale_relu(xm, ym, xm); });
  TensorView xn(nullptr, DType::kF32, {4, 8});
  expect_error(ErrorKind::kValue, "null pointer with 32 elements", [&] { hk::row_scale_relu(xn, y, xm); });
  TensorView xt(fake_ptr(), DType::kF32, {4, 8}, {1, 4});
  expect_error(ErrorKind::kNotSupported, "contiguous last dim",
               [&] { hk::row_scale_relu_backward(xm, y, xt, xm, y); });
  TensorView xs(fake_ptr(), DType::kF32, {4, 8}, {16, 1});
  expect_error(ErrorKind::kNotSupported, "add_scalar: x must be contiguous", [&] { hk::add_scalar(xs, 1.0, xs); });
}

TEST(BroadcastBadInput, EmptyTensorIsANoOp) {
  TensorView e(nullptr, DType::kBF16, {0}), v(fake_ptr(), DType::kBF16, {16}), z(nullptr, DType::kBF16, {0, 16});
  EXPECT_NO_THROW(hk::add_scalar(e, 1.0, e));
  EXPECT_NO_THROW(hk::outer_add(v, e, z));
  EXPECT_NO_THROW(hk::outer_mul_relu(v, e, z));
  EXPECT_NO_THROW(hk::row_scale_relu(z, e, z));
  EXPECT_NO_THROW(hk::row_scale_relu_backward(z, e, z, z, e));
}

TEST(BroadcastDispatch, DefaultAndFallback) {
  auto& reg = hk::Registry::get();
  BroadcastProblem p(BroadcastKind::kOuterAdd, {16384, 8192}, DType::kBF16);
  EXPECT_EQ(reg.choose(p).variant->name(), "v02_vectorized");
  // Row strides that are not 16-byte multiples, and 2-byte aligned operands: the same rungs (peeled).
  BroadcastProblem odd(BroadcastKind::kRowScaleRelu, {16, 100}, DType::kBF16, true, 1);
  EXPECT_EQ(reg.choose(odd).variant->name(), "v03_oneshot_chunks");
  for (BroadcastKind k : {BroadcastKind::kAddScalar, BroadcastKind::kOuterAdd, BroadcastKind::kOuterMulRelu,
                          BroadcastKind::kRowScaleRelu}) {
    BroadcastProblem q(k, {16, 100}, DType::kBF16, false, 3);
    q.align_bytes = 2;
    const hk::Choice c = reg.choose(q);
    EXPECT_TRUE(c.variant->is(hk::kFlagProduction)) << q.family() << ": " << c.variant->name();
    EXPECT_NE(c.variant->name(), "v01_naive") << q.family();
  }
  // row_scale_relu's forward: the flat one-shot rung where rows are aligned whole vectors, else v03.
  EXPECT_EQ(reg.choose(BroadcastProblem(BroadcastKind::kRowScaleRelu, {16384, 8192}, DType::kBF16)).variant->name(),
            "v04_flat_vectors");
  EXPECT_EQ(reg.choose(BroadcastProblem(BroadcastKind::kRowScaleRelu, {4, int64_t(1) << 26}, DType::kF32)).variant->name(),
            "v04_flat_vectors");
  EXPECT_EQ(reg.choose(BroadcastProblem(BroadcastKind::kRowScaleRelu, {16384, 8192}, DType::kBF16, true)).variant->name(),
            "v03_oneshot_chunks");
  BroadcastProblem part_vec(BroadcastKind::kRowScaleRelu, {16, 8191}, DType::kF32, false, 1);  // aligned rows
  EXPECT_NE(reg.variant("row_scale_relu", "v04_flat_vectors")->supports(part_vec), "");
  EXPECT_EQ(reg.choose(part_vec).variant->name(), "v03_oneshot_chunks");
  // An outer op's x and y are vectors: an odd N0 only matters through z's row stride.
  BroadcastProblem odd_n0(BroadcastKind::kOuterMulRelu, {16, 8191}, DType::kF32, false, 1);
  EXPECT_EQ(reg.choose(odd_n0).variant->name(), "v02_vectorized");
}

TEST(BroadcastReference, ReluKeepsNan) {
  BroadcastProblem p(BroadcastKind::kOuterMulRelu, {1, 3}, DType::kF32);
  auto out = hktest::run_reference(p, {{p.inputs()[0], {std::nan(""), -2.0, 3.0}}, {p.inputs()[1], {1.0}}});
  EXPECT_TRUE(std::isnan(out[0].values[0]));
  EXPECT_EQ(out[0].values[1], 0.0);
  EXPECT_EQ(out[0].values[2], 3.0);
}

// dL/dx and dL/dy of L = sum z * dz against the analytic backward. Points with |x y| < 0.05 are
// moved away from the ReLU kink, where the derivative is not defined.
TEST(BroadcastReference, RowScaleReluBackwardMatchesFiniteDifferences) {
  for (auto [n1, n0] : {std::pair<int64_t, int64_t>{3, 5}, {4, 2}}) {
    BroadcastProblem fwd(BroadcastKind::kRowScaleRelu, {n1, n0}, DType::kF32),
        bwd(BroadcastKind::kRowScaleRelu, {n1, n0}, DType::kF32, true);
    auto in = hktest::smooth_inputs(fwd, 21 + n1);
    for (auto& v : in[1].values)
      if (std::fabs(v) < 0.25) v = v < 0 ? -0.5 : 0.5;
    for (int64_t j = 0; j < n1; ++j)
      for (int64_t i = 0; i < n0; ++i) {
        double& xv = in[0].values[j * n0 + i];
        if (std::fabs(xv * in[1].values[j]) < 0.05) xv = xv < 0 ? -0.5 : 0.5;
      }
    hk::TensorSpec dz_spec{"dz", DType::kF32, {n1, n0}, {}, hk::Dist::kNormal, 1.0, {}};
    std::vector<double> dz = hk::host::random_tensor(dz_spec, 4).values;
    auto grads = hktest::run_reference(bwd, {in[0], in[1], {dz_spec, dz}});
    hktest::expect_matches_fd(fwd, in, 0, dz, grads[0].values, "dx");
    hktest::expect_matches_fd(fwd, in, 1, dz, grads[1].values, "dy");
  }
}

TEST(BroadcastDispatch, EveryTestAndBenchProblemGetsAProductionRung_AddScalar) {
  expect_production_choice("add_scalar");
}

TEST(BroadcastDispatch, EveryTestAndBenchProblemGetsAProductionRung_OuterAdd) {
  expect_production_choice("outer_add");
}

TEST(BroadcastDispatch, EveryTestAndBenchProblemGetsAProductionRung_OuterMulRelu) {
  expect_production_choice("outer_mul_relu");
}

TEST(BroadcastDispatch, EveryTestAndBenchProblemGetsAProductionRung_RowScaleRelu) {
  expect_production_choice("row_scale_relu");
}

// The naive rungs are teaching rungs: the public ops never run them.
TEST(BroadcastDispatch, NaiveRungsAreLadderOnly) {
  auto& reg = hk::Registry::get();
  for (const char* family : {"add_scalar", "outer_add", "outer_mul_relu", "row_scale_relu"}) {
    const hk::Variant* v = reg.variant(family, "v01_naive");
    ASSERT_NE(v, nullptr) << family;
    EXPECT_FALSE(v->is(hk::kFlagProduction)) << family;
  }
}

// row_scale_relu's flat rung on 16-byte aligned rows whose strides differ between x and z (the
// test problems pad both alike): each vector's row and column address x and z at their own
// strides; the last block ragged.
TEST(BroadcastFlat, RowScaleReluDistinctRowStrides) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  auto& reg = hk::Registry::get();
  uint64_t seed = 31;
  const hk::Variant* v = reg.variant("row_scale_relu", "v04_flat_vectors");
  ASSERT_NE(v, nullptr);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    BroadcastProblem p(BroadcastKind::kRowScaleRelu, {601, 1024}, dt);
    p.ld_x = 1032;
    p.ld_z = 1056;
    ASSERT_EQ(v->supports(p), "") << p.key();
    hk::bench::Case c(std::make_shared<BroadcastProblem>(p), seed);
    const hk::bench::CheckResult r = c.run_and_check(*v);
    EXPECT_TRUE(r.ok) << p.key() << " seed " << seed << ": " << r.message;
    ++seed;
  }
}

// The public ops on views whose operands sit at their own 16-byte phases (base offsets in
// elements) with row strides that are not 16-byte multiples and differ between operands: the
// peeled kernels, checked against the reference; nothing outside an output view is written.
TEST(BroadcastPublic, MisalignedViews) {
  std::string no_gpu = hk::no_gpu_reason();
  if (!no_gpu.empty()) GTEST_SKIP() << "GPU test: " << no_gpu;
  using hktest::Place;
  struct L {
    Place x, y, g, z, dy;  // g: dz (row_scale_relu backward)
  };
  auto layouts = [](int64_t n0) {
    return std::vector<L>{
        {{1, n0 + 3}, {1, 0}, {1, n0 + 3}, {1, n0 + 3}, {1, 0}},   // one shared odd phase, odd row stride
        {{0, n0}, {0, 0}, {0, n0}, {3, n0 + 5}, {0, 0}},           // z at another phase and stride than x
        {{2, n0 + 1}, {1, 0}, {5, n0 + 7}, {0, n0 + 8}, {3, 0}},  // z aligned, every input not
        {{0, n0}, {0, 0}, {0, n0}, {0, n0 + 1}, {0, 0}},           // aligned bases, rows at shifting phases
    };
  };
  int checked = 0;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    // add_scalar: flat ranges with a head, a body and a tail, and shorter than one vector
    for (int64_t n : {int64_t(10007), int64_t(5)})
      for (const L& l : layouts(n)) {
        BroadcastProblem p(BroadcastKind::kAddScalar, {n}, dt, false, 0, 0.75);
        hktest::check_offset_views(p, {{l.x.offset, 0}}, {{l.z.offset, 0}},
                                   [](auto& in, auto& out) { hk::add_scalar(in[0], 0.75, out[0]); }, 3,
                                   p.key() + " x+" + std::to_string(l.x.offset) + " z+" + std::to_string(l.z.offset));
        ++checked;
      }
    const std::vector<std::pair<int64_t, int64_t>> shapes = {{7, 1023}, {3, 5}, {2, 70001}};
    for (auto [n1, n0] : shapes)
      for (const L& l : layouts(n0)) {
        const std::string where = " x+" + std::to_string(l.x.offset) + "/" + std::to_string(l.x.ld) + " z+" +
                                  std::to_string(l.z.offset) + "/" + std::to_string(l.z.ld);
        for (BroadcastKind k : {BroadcastKind::kOuterAdd, BroadcastKind::kOuterMulRelu}) {
          BroadcastProblem p(k, {n1, n0}, dt);
          hktest::check_offset_views(
              p, {{l.x.offset, 0}, l.y}, {l.z},
              [k](auto& in, auto& out) {
                if (k == BroadcastKind::kOuterAdd) hk::outer_add(in[0], in[1], out[0]);
                else hk::outer_mul_relu(in[0], in[1], out[0]);
              },
              5, p.family() + " " + p.key() + where);
          ++checked;
        }
        BroadcastProblem fwd(BroadcastKind::kRowScaleRelu, {n1, n0}, dt);
        hktest::check_offset_views(fwd, {l.x, l.y}, {l.z},
                                   [](auto& in, auto& out) { hk::row_scale_relu(in[0], in[1], out[0]); }, 7,
                                   "row_scale_relu " + fwd.key() + where);
        BroadcastProblem bwd(BroadcastKind::kRowScaleRelu, {n1, n0}, dt, true);
        hktest::check_offset_views(
            bwd, {l.x, l.y, l.g}, {l.z, l.dy},
            [](auto& in, auto& out) { hk::row_scale_relu_backward(in[0], in[1], in[2], out[0], out[1]); }, 9,
            "row_scale_relu " + bwd.key() + where + " dz+" + std::to_string(l.g.offset) + "/" + std::to_string(l.g.ld));
        checked += 2;
      }
  }
  EXPECT_GT(checked, 0);
}
