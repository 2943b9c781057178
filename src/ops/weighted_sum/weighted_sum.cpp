// weighted_sum/weighted_sum.cpp — the fp64 oracle, the op contract's numbers, the family (test and
// bench shapes) and the public entry points hk::weighted_sum / hk::weighted_sum_backward.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/rows.hpp"
#include "core/host.hpp"
#include "weighted_sum/weighted_sum_op.hpp"

namespace hk {

namespace {
int esize(DType dt) { return dtype_bits(dt) / 8; }
}  // namespace

int WeightedSumProblem::row_align() const {
  int64_t e = esize(dtype);
  if (backward) return rows::row_alignment(align_bytes, {ld_x * e, ld_dx * e});
  return rows::row_alignment(align_bytes, {ld_x * e});
}

std::string WeightedSumProblem::key() const {
  std::string k = fmt::format("{}x{}_{}_{}", rows, dim, to_string(dtype), backward ? "bwd" : "fwd");
  if (ld_x != dim || (backward && ld_dx != dim))
    k += backward ? fmt::format("_ld{}-{}", ld_x, ld_dx) : fmt::format("_ld{}", ld_x);
  return k;
}

double WeightedSumProblem::flops() const { return double(numel()) * (backward ? 3.0 : 2.0); }

double WeightedSumProblem::bytes() const {
  double e = esize(dtype);
  // forward: x, w read, y written; backward: x, w, dy read, dx, dw written.
  if (!backward) return (double(numel()) + dim + rows) * e;
  return (2.0 * double(numel()) + 2.0 * dim + rows) * e;
}

std::vector<TensorSpec> WeightedSumProblem::inputs() const {
  TensorSpec x{"x", dtype, {rows, dim}, {ld_x, 1}, Dist::kNormal, 1.0, {}};
  const double inf = std::numeric_limits<double>::infinity();
  // NaN in row 0 / column 1, +Inf in row 1 / column 2: y[0] = NaN, y[1] = ±Inf, and the same
  // columns of dw, as in fp64.
  if (rows >= 3 && dim >= 4) x.specials = {{1, std::nan("")}, {dim + 2, inf}, {2 * dim + 3, -0.0}};
  TensorSpec w{"w", dtype, {dim}, {}, Dist::kNormal, 1.0, {}};
  if (!backward) return {x, w};
  return {x, w, TensorSpec{"dy", dtype, {rows}, {}, Dist::kNormal, 1.0, {}}};
}

std::vector<TensorSpec> WeightedSumProblem::outputs() const {
  if (!backward) return {TensorSpec{"y", dtype, {rows}, {}, Dist::kNormal, 1.0, {}}};
  return {TensorSpec{"dx", dtype, {rows, dim}, {ld_dx, 1}, Dist::kNormal, 1.0, {}},
          TensorSpec{"dw", dtype, {dim}, {}, Dist::kNormal, 1.0, {}}};
}

void WeightedSumProblem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  const auto& x = in[0].values;
  const auto& w = in[1].values;
  const int64_t D = dim;
  if (!backward) {
    auto& y = out[0].values;
    host::parallel_for(rows, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        double acc = 0;
        for (int64_t d = 0; d < D; ++d) acc += x[r * D + d] * w[d];
        y[r] = acc;
      }
    }, host::grain_for(D));
    return;
  }
  const auto& dy = in[2].values;
  auto& dx = out[0].values;
  auto& dw = out[1].values;
  host::parallel_for(rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      for (int64_t d = 0; d < D; ++d) dx[r * D + d] = dy[r] * w[d];
  }, host::grain_for(D));
  const int64_t strips = (D + 63) / 64;  // column sums in 64-column strips: row-major friendly
  host::parallel_for(strips, [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; ++s) {
      int64_t d0 = s * 64, d1 = std::min(D, d0 + 64);
      for (int64_t d = d0; d < d1; ++d) dw[d] = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t d = d0; d < d1; ++d) dw[d] += x[r * D + d] * dy[r];
    }
  }, host::grain_for(64 * rows));
}

Tolerance WeightedSumProblem::tolerance(int i) const {
  // y sums D random-sign products, dw sums `rows`: tolerances scale with sqrt(length)
  // (rows::acc_rel); dx is one f32 product rounded once to the dtype.
  if (!backward) return {rows::acc_abs(dim), rows::out_rel(dtype) + rows::acc_rel(dim)};
  if (i == 0) return {1e-7, rows::out_rel(dtype)};
  return {rows::acc_abs(rows), rows::out_rel(dtype) + rows::acc_rel(rows)};
}

Attrs WeightedSumProblem::attrs() const {
  Attrs a{{"backward", backward}};
  if (backward) rows::set_out_row_stride(a, ld_dx, dim);
  return a;
}

WeightedSumArgs WeightedSumArgs::bind(const WeightedSumProblem& p, const Operands& ops) {
  WeightedSumArgs a;
  a.x = ops.in.at(0).data;
  a.w = ops.in.at(1).data;
  if (p.backward) {
    a.dy = ops.in.at(2).data;
    a.dx = ops.out.at(0).data;
    a.dw = ops.out.at(1).data;
  } else {
    a.y = ops.out.at(0).data;
  }
  a.rows = p.rows;
  a.dim = p.dim;
  a.ld_x = p.ld_x;
  a.ld_dx = p.ld_dx;
  a.dtype = p.dtype;
  a.backward = p.backward;
  return a;
}

namespace {

// Validation shared by the public ops and make_problem: x [R, D], w [D] and, for the backward
// (dy not null), dy [R]. The problem they pose, aligned as the inputs are; dx's row stride
// starts as D.
WeightedSumProblem checked_problem(const char* op, const TensorView& x, const TensorView& w, const TensorView* dy) {
  rows::check_float(op, "x", x);
  if (x.rank() != 2) HK_THROW(kValue, op, ": x must be [rows, D], got [", shape_to_string(x.shape), "]");
  const int64_t R = x.shape[0], D = x.shape[1];
  const rows::Layout lx = rows::check_matrix(op, "x", x, x.dtype, R, D);
  rows::check_vector(op, "w", w, x.dtype, D);
  if (dy) rows::check_vector(op, "dy", *dy, x.dtype, R);
  WeightedSumProblem p(R, D, x.dtype, dy != nullptr);
  p.ld_x = lx.ld;
  p.align_bytes = dy ? rows::min_alignment({&x, &w, dy}) : rows::min_alignment({&x, &w});
  return p;
}

class WeightedSumFamily final : public Family {
 public:
  std::string name() const override { return "weighted_sum"; }
  std::string summary() const override {
    return "y = x @ w over the last dim, backward dx = dy (x) w and dw = x^T dy; strided rows, f32/f16/bf16";
  }
  std::vector<ProblemPtr> test_problems() const override {
    struct S { int64_t rows, dim, pad; };
    const std::vector<S> shapes = {{1, 1, 0},      {3, 3, 5},     {1, 4097, 0},  {7, 1023, 9},  {113, 203, 13},
                                   {1000, 96, 8},  {64, 8192, 8}, {5, 40000, 0}, {2, 1 << 20, 0}, {4099, 5, 3},
                                   // >= 512 rows of whole 16-byte vectors (v03's block-per-row path),
                                   // ~2^21 elements: 1, 2 and 4 (bf16) or 2, 4 and 8 (f32) vectors per thread
                                   {520, 1600, 0}, {600, 3000, 0}, {512, 4104, 8}};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes)
      for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
        for (bool bwd : {false, true}) out.push_back(std::make_shared<WeightedSumProblem>(s.rows, s.dim, dt, bwd, s.pad));
    return out;
  }
  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    return rows::row_bench_problems<WeightedSumProblem>("weighted_sum", sel);
  }
  // inputs {x, w} or, with backward=true, {x, w, dy}; out_row_stride: dx's row stride
  // (backward only; default D, contiguous).
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    attrs.expect_only("weighted_sum", {"backward", "out_row_stride"});
    bool bwd = attrs.get_bool("weighted_sum", "backward", false);
    const char* op = bwd ? "weighted_sum_backward" : "weighted_sum";
    if (in.size() != (bwd ? 3u : 2u))
      HK_THROW(kValue, op, ": takes ", bwd ? "3 inputs (x, w, dy)" : "2 inputs (x, w)", ", got ", in.size());
    if (!bwd && attrs.values().count("out_row_stride"))
      HK_THROW(kValue, op, ": out_row_stride is dx's row stride (backward=True); y is a vector");
    auto p = std::make_shared<WeightedSumProblem>(checked_problem(op, in[0], in[1], bwd ? &in[2] : nullptr));
    if (bwd) p->ld_dx = rows::out_row_stride(op, attrs, p->dim);
    return p;
  }
};

HK_REGISTER_FAMILY(WeightedSumFamily);

}  // namespace

void weighted_sum(const TensorView& x, const TensorView& w, const TensorView& y, cudaStream_t stream) {
  const char* op = "weighted_sum";
  WeightedSumProblem p = checked_problem(op, x, w, nullptr);
  rows::check_vector(op, "y", y, x.dtype, p.rows);
  if (p.rows == 0) return;
  if (p.dim == 0) {  // an empty sum is 0
    HK_CHECK_CUDA(cudaMemsetAsync(y.data, 0, static_cast<size_t>(p.rows * esize(x.dtype)), stream));
    return;
  }
  // y's alignment is not folded in: every rung writes y one element at a time, so a y at any
  // address keeps the 16-byte rungs for x and w.
  Registry::get().pick(p).run(p, Operands{{x, w}, {y}}, stream);
}

void weighted_sum_backward(const TensorView& x, const TensorView& w, const TensorView& dy, const TensorView& dx,
                           const TensorView& dw, cudaStream_t stream) {
  const char* op = "weighted_sum_backward";
  WeightedSumProblem p = checked_problem(op, x, w, &dy);
  const rows::Layout ldx = rows::check_matrix(op, "dx", dx, x.dtype, p.rows, p.dim);
  rows::check_vector(op, "dw", dw, x.dtype, p.dim);
  if (p.dim == 0) return;
  if (p.rows == 0) {  // dw sums zero rows
    HK_CHECK_CUDA(cudaMemsetAsync(dw.data, 0, static_cast<size_t>(p.dim * esize(x.dtype)), stream));
    return;
  }
  p.ld_dx = ldx.ld;
  p.align_bytes = std::min({p.align_bytes, ldx.align, dw.alignment()});
  Registry::get().pick(p).run(p, Operands{{x, w, dy}, {dx, dw}}, stream);
}

}  // namespace hk
