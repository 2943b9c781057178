// rmsnorm/rmsnorm.cpp — the fp64 oracle, the op contract's numbers, the family (test and bench
// shapes) and the public entry points hk::rmsnorm / hk::rmsnorm_backward.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/rows.hpp"
#include "core/host.hpp"
#include "rmsnorm/rmsnorm_op.hpp"

namespace hk {

namespace {
int esize(DType dt) { return dtype_bits(dt) / 8; }
using rows::acc_abs;
using rows::acc_rel;
using rows::out_rel;
}  // namespace

int RmsNormProblem::row_align() const {
  int64_t e = esize(dtype);
  if (backward) return rows::row_alignment(align_bytes, {ld_x * e, ld_dy * e, ld_out * e});
  return rows::row_alignment(align_bytes, {ld_x * e, ld_out * e});
}

std::string RmsNormProblem::key() const {
  std::string k = fmt::format("{}x{}_{}_{}", rows, dim, to_string(dtype), backward ? "bwd" : "fwd");
  if (ld_x != dim || ld_out != dim || (backward && ld_dy != dim))
    k += backward ? fmt::format("_ld{}-{}-{}", ld_x, ld_dy, ld_out) : fmt::format("_ld{}-{}", ld_x, ld_out);
  if (eps != 1e-6) {
    std::string e = fmt::format("{:g}", eps);
    std::replace(e.begin(), e.end(), '.', 'p');  // test names: no dots
    k += "_eps" + e;
  }
  return k;
}

double RmsNormProblem::flops() const { return double(numel()) * (backward ? 10.0 : 4.0); }

double RmsNormProblem::bytes() const {
  double e = esize(dtype);
  // forward: x read, y written, g read, rstd written; backward: x, dy read, dx written, g read,
  // rstd read, dg written.
  if (!backward) return double(numel()) * e * 2 + double(dim) * e + double(rows) * 4;
  return double(numel()) * e * 3 + double(dim) * e * 2 + double(rows) * 4;
}

std::vector<TensorSpec> RmsNormProblem::inputs() const {
  TensorSpec x{"x", dtype, {rows, dim}, {ld_x, 1}, Dist::kNormal, 1.0, {}};
  const double inf = std::numeric_limits<double>::infinity();
  // NaN in row 0, +Inf in row 1, -0 in row 2: those rows turn NaN (Inf/Inf) as in fp64.
  if (rows >= 3 && dim >= 4) x.specials = {{1, std::nan("")}, {dim + 2, inf}, {2 * dim + 3, -0.0}};
  TensorSpec g{"g", dtype, {dim}, {}, Dist::kNormal, 1.0, {}};
  if (!backward) return {x, g};
  TensorSpec rstd{"rstd", DType::kF32, {rows}, {}, Dist::kPositive, 1.0, {}};
  TensorSpec dy{"dy", dtype, {rows, dim}, {ld_dy, 1}, Dist::kNormal, 1.0, {}};
  return {x, g, rstd, dy};
}

std::vector<TensorSpec> RmsNormProblem::outputs() const {
  if (!backward)
    return {TensorSpec{"y", dtype, {rows, dim}, {ld_out, 1}, Dist::kNormal, 1.0, {}},
            TensorSpec{"rstd", DType::kF32, {rows}, {}, Dist::kNormal, 1.0, {}}};
  return {TensorSpec{"dx", dtype, {rows, dim}, {ld_out, 1}, Dist::kNormal, 1.0, {}},
          TensorSpec{"dg", dtype, {dim}, {}, Dist::kNormal, 1.0, {}}};
}

void RmsNormProblem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  const auto& x = in[0].values;
  const auto& g = in[1].values;
  const int64_t D = dim;
  if (!backward) {
    auto& y = out[0].values;
    auto& rs = out[1].values;
    host::parallel_for(rows, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const double* xr = &x[r * D];
        double ss = 0;
        for (int64_t d = 0; d < D; ++d) ss += xr[d] * xr[d];
        double s = 1.0 / std::sqrt(ss / double(D) + eps);
        rs[r] = s;
        for (int64_t d = 0; d < D; ++d) y[r * D + d] = xr[d] * s * g[d];
      }
    }, host::grain_for(D));
    return;
  }
  const auto& rs = in[2].values;
  const auto& dy = in[3].values;
  auto& dx = out[0].values;
  auto& dg = out[1].values;
  host::parallel_for(rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += g[d] * dy[r * D + d] * x[r * D + d];
      double c = rs[r] * rs[r] * rs[r] * s / double(D);
      for (int64_t d = 0; d < D; ++d) dx[r * D + d] = rs[r] * g[d] * dy[r * D + d] - x[r * D + d] * c;
    }
  }, host::grain_for(D));
  // dg: column sums, walked in 64-column strips so the row-major inputs stream through cache.
  const int64_t strips = (D + 63) / 64;
  host::parallel_for(strips, [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; ++s) {
      int64_t d0 = s * 64, d1 = std::min(D, d0 + 64);
      for (int64_t d = d0; d < d1; ++d) dg[d] = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t d = d0; d < d1; ++d) dg[d] += dy[r * D + d] * x[r * D + d] * rs[r];
    }
  }, host::grain_for(64 * rows));
}

Tolerance RmsNormProblem::tolerance(int i) const {
  // Output 0 (y or dx): one rounding to the dtype plus the f32 error of the row sum (sum of
  // squares forward, sum of g*dy*x backward, both of length D); dx's absolute floor covers
  // entries where its two terms nearly cancel. Output 1: rstd is f32 from the same row sum;
  // dg sums `rows` random-sign terms of size ~1, whose natural scale is sqrt(rows).
  if (i == 0) return {backward ? 1e-5 + acc_rel(dim) : 1e-6, out_rel(dtype) + acc_rel(dim)};
  if (!backward) return {0.0, 4e-7 + acc_rel(dim)};
  return {acc_abs(rows), out_rel(dtype) + acc_rel(rows)};
}

Attrs RmsNormProblem::attrs() const {
  Attrs a{{"eps", eps}, {"backward", backward}};
  rows::set_out_row_stride(a, ld_out, dim);
  return a;
}

RmsNormArgs RmsNormArgs::bind(const RmsNormProblem& p, const Operands& ops) {
  RmsNormArgs a;
  a.x = ops.in.at(0).data;
  a.g = ops.in.at(1).data;
  a.out = ops.out.at(0).data;
  if (p.backward) {
    a.rstd_in = static_cast<const float*>(ops.in.at(2).data);
    a.dy = ops.in.at(3).data;
    a.dg = ops.out.at(1).data;
  } else {
    a.rstd_out = static_cast<float*>(ops.out.at(1).data);
  }
  a.rows = p.rows;
  a.dim = p.dim;
  a.ld_x = p.ld_x;
  a.ld_dy = p.ld_dy;
  a.ld_out = p.ld_out;
  a.dtype = p.dtype;
  a.eps = static_cast<float>(p.eps);
  a.backward = p.backward;
  return a;
}

namespace {

// Validation shared by the public ops and make_problem: x [R, D] and g [D], plus rstd [R] and dy
// [R, D] for the backward (rstd and dy null: forward). The problem they pose, aligned as the
// inputs are; the output's row stride starts as D.
RmsNormProblem checked_problem(const char* op, const TensorView& x, const TensorView& g, double eps,
                               const TensorView* rstd, const TensorView* dy) {
  rows::check_float(op, "x", x);
  if (x.rank() != 2) HK_THROW(kValue, op, ": x must be [rows, D], got [", shape_to_string(x.shape), "]");
  if (!(eps >= 0) || !std::isfinite(eps)) HK_THROW(kValue, op, ": eps must be finite and >= 0, got ", eps);
  const int64_t R = x.shape[0], D = x.shape[1];
  const rows::Layout lx = rows::check_matrix(op, "x", x, x.dtype, R, D);
  rows::check_vector(op, "g", g, x.dtype, D);
  const bool bwd = dy != nullptr;
  RmsNormProblem p(R, D, x.dtype, bwd, 0, eps);
  p.ld_x = lx.ld;
  if (bwd) {
    rows::check_vector(op, "rstd", *rstd, DType::kF32, R);
    p.ld_dy = rows::check_matrix(op, "dy", *dy, x.dtype, R, D).ld;
  }
  p.align_bytes = bwd ? rows::min_alignment({&x, &g, rstd, dy}) : rows::min_alignment({&x, &g});
  return p;
}

class RmsNormFamily final : public Family {
 public:
  std::string name() const override { return "rmsnorm"; }
  std::string summary() const override {
    return "RMSNorm forward (y, rstd) and backward (dx, dg) over the last dim, strided rows, f32/f16/bf16";
  }
  std::vector<ProblemPtr> test_problems() const override {
    struct S { int64_t rows, dim, pad; };
    // Odd lengths, a 4097 tail, warp-per-row lengths, a row past the on-chip rung (40000),
    // one row of 2^20, padded (non-contiguous) rows, many short rows.
    const std::vector<S> shapes = {{1, 1, 0},     {3, 3, 5},    {1, 4097, 0},   {7, 1023, 9},
                                   {113, 203, 13}, {1000, 96, 8}, {64, 8192, 8}, {5, 40000, 0},
                                   {2, 1 << 20, 0},
                                   // >= 512 rows of whole 16-byte vectors (v05's block-per-row path):
                                   // 1, 2 and 4 (bf16) or 2, 4 and 8 (f32) vectors per thread, padded rows
                                   {520, 1600, 0},  {600, 3000, 0},  {512, 4104, 8},
                                   // v06 (block per row, 64..1024 threads) and v07 (8, 4, 2 row groups
                                   // x 2 vectors; 1 group x 4 with prefetch): few rows with idle
                                   // groups, a partial last vector slot, the 224 KiB row limit (f32)
                                   {3, 2048, 0},  {300, 12296, 24},  {3, 57344, 8},
                                   // rows not 16-byte aligned and too long to stage in shared memory
                                   // (v04's kAny kernels): odd row strides, rows at shifting phases
                                   {2, 100003, 3},  {5, 131075, 1}};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes)
      for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
        for (bool bwd : {false, true}) out.push_back(std::make_shared<RmsNormProblem>(s.rows, s.dim, dt, bwd, s.pad));
    out.push_back(std::make_shared<RmsNormProblem>(9, 77, DType::kF32, false, 0, 1e-2));  // eps matters
    return out;
  }
  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    return rows::row_bench_problems<RmsNormProblem>("rmsnorm", sel);
  }
  // inputs {x, g} or, with backward=true, {x, g, rstd, dy}; eps (default 1e-6; the backward
  // does not use it); out_row_stride: the row stride of y or dx (default D, contiguous).
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    attrs.expect_only("rmsnorm", {"eps", "backward", "out_row_stride"});
    double eps = attrs.get_double("rmsnorm", "eps", 1e-6);
    bool bwd = attrs.get_bool("rmsnorm", "backward", false);
    const char* op = bwd ? "rmsnorm_backward" : "rmsnorm";
    if (in.size() != (bwd ? 4u : 2u))
      HK_THROW(kValue, op, ": takes ", bwd ? "4 inputs (x, g, rstd, dy)" : "2 inputs (x, g)", ", got ", in.size());
    auto p = std::make_shared<RmsNormProblem>(
        checked_problem(op, in[0], in[1], eps, bwd ? &in[2] : nullptr, bwd ? &in[3] : nullptr));
    p->ld_out = rows::out_row_stride(op, attrs, p->dim);
    return p;
  }
};

HK_REGISTER_FAMILY(RmsNormFamily);

void dispatch(RmsNormProblem& p, const Operands& ops, std::initializer_list<const TensorView*> views,
              cudaStream_t stream) {
  if (p.numel() == 0) return;  // empty tensor: a no-op
  p.align_bytes = rows::min_alignment(views);
  Registry::get().pick(p).run(p, ops, stream);
}

}  // namespace

void rmsnorm(const TensorView& x, const TensorView& g, const TensorView& y, const TensorView& rstd,
             double eps, cudaStream_t stream) {
  const char* op = "rmsnorm";
  RmsNormProblem p = checked_problem(op, x, g, eps, nullptr, nullptr);
  const rows::Layout ly = rows::check_matrix(op, "y", y, x.dtype, p.rows, p.dim);
  rows::check_vector(op, "rstd", rstd, DType::kF32, p.rows);
  if (p.numel() == 0) return;
  p.ld_out = ly.ld;
  dispatch(p, Operands{{x, g}, {y, rstd}}, {&x, &g, &y, &rstd}, stream);
}

void rmsnorm_backward(const TensorView& x, const TensorView& g, const TensorView& rstd,
                      const TensorView& dy, const TensorView& dx, const TensorView& dg, cudaStream_t stream) {
  const char* op = "rmsnorm_backward";
  RmsNormProblem p = checked_problem(op, x, g, 1e-6, &rstd, &dy);
  const rows::Layout ldx = rows::check_matrix(op, "dx", dx, x.dtype, p.rows, p.dim);
  rows::check_vector(op, "dg", dg, x.dtype, p.dim);
  if (p.rows > 0 && p.dim == 0) return;  // nothing to write
  if (p.rows == 0) {
    // dg = sum over zero rows = 0: the one output an empty batch still defines.
    if (p.dim > 0) HK_CHECK_CUDA(cudaMemsetAsync(dg.data, 0, static_cast<size_t>(p.dim * esize(x.dtype)), stream));
    return;
  }
  p.ld_out = ldx.ld;
  dispatch(p, Operands{{x, g, rstd, dy}, {dx, dg}}, {&x, &g, &rstd, &dy, &dx, &dg}, stream);
}

}  // namespace hk
