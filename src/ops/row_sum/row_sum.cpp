// row_sum/row_sum.cpp — the fp64 oracle, the op contract's numbers, the family (test and
// bench shapes) and the public entry point hk::row_sum.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/rows.hpp"
#include "core/host.hpp"
#include "row_sum/row_sum_op.hpp"

namespace hk {

std::string RowSumProblem::key() const {
  std::string k = fmt::format("{}x{}_{}", rows, cols, to_string(dtype));
  if (ldx != cols) k += fmt::format("_ld{}", ldx);
  return k;
}

double RowSumProblem::flops() const { return double(numel()); }

double RowSumProblem::bytes() const { return double(numel() + rows) * (dtype_bits(dtype) / 8); }

std::vector<TensorSpec> RowSumProblem::inputs() const {
  // Small integers: every partial sum below 2^24 is exact in f32, so any missed or doubled
  // element shows as an exact mismatch and only the final rounding to the output dtype is
  // tolerated. Rows past 2^22 draw from {-1, 0, 1} so that their sums stay inside f16's range.
  std::vector<int64_t> shape = lead;
  shape.push_back(cols);
  TensorSpec x{"x", dtype, shape, rows::row_strides(lead, cols, ldx), Dist::kSmallInt, cols > (1 << 22) ? 1.0 : 4.0, {}};
  const double inf = std::numeric_limits<double>::infinity();
  auto at = [&](int64_t r, int64_t c) { return r * cols + c; };
  if (rows >= 1) x.specials.push_back({at(0, cols / 2), std::nan("")});   // NaN row
  if (rows >= 2) x.specials.push_back({at(1, cols - 1), inf});             // +Inf row
  if (rows >= 3) x.specials.push_back({at(2, 0), -inf});                   // -Inf row
  if (rows >= 4 && cols >= 2) {                                            // +Inf + -Inf = NaN
    x.specials.push_back({at(3, 0), inf});
    x.specials.push_back({at(3, cols - 1), -inf});
  }
  return {x};
}

std::vector<TensorSpec> RowSumProblem::outputs() const {
  return {TensorSpec{"y", dtype, lead, {}, Dist::kNormal, 1.0, {}}};
}

void RowSumProblem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  const auto& x = in[0].values;
  auto& y = out[0].values;
  if (cols == 0) {  // empty rows sum to 0 (the loop below walks elements: there are none)
    std::fill(y.begin(), y.end(), 0.0);
    return;
  }
  // Threads split the elements; a row belongs to the thread that holds its first element.
  host::parallel_for(numel(), [&](int64_t b, int64_t e) {
    for (int64_t r = (b + cols - 1) / cols; r * cols < e; ++r) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
      y[r] = s;
    }
  });
}

Tolerance RowSumProblem::tolerance(int) const {
  // Integer inputs: the f32 sum is exact; the one rounding to the output dtype is at most half
  // an ulp, i.e. 2^-(mantissa bits + 1) relative.
  switch (dtype) {
    case DType::kF32: return {0.0, 0x1p-24};
    case DType::kF16: return {0.0, 0x1p-11};
    default: return {0.0, 0x1p-8};
  }
}

RowSumArgs RowSumArgs::bind(const RowSumProblem& p, const Operands& ops) {
  RowSumArgs a;
  a.x = ops.in.at(0).data;
  a.y = ops.out.at(0).data;
  a.rows = p.rows;
  a.cols = p.cols;
  a.ldx = p.ldx;
  a.dtype = p.dtype;
  return a;
}

namespace {

// Validation shared by hk::row_sum and make_problem: x's dtype and layout, typed errors naming
// the values received; the problem x poses, aligned as x is.
RowSumProblem checked_problem(const TensorView& x) {
  rows::check_float("row_sum", "x", x);
  const rows::Layout l = rows::layout("row_sum", "x", x);
  RowSumProblem p(l.rows, l.cols, x.dtype, l.ld);
  p.lead = l.lead;
  if (x.numel() == 0) return p;
  rows::check_data("row_sum", "x", x);
  rows::check_element_aligned("row_sum", "x", x);
  p.align_bytes = l.align;
  return p;
}

class RowSumFamily final : public Family {
 public:
  std::string name() const override { return "row_sum"; }
  std::string summary() const override {
    return "sum over the last dimension, f32/f16/bf16, any rows x T, strided rows";
  }
  std::vector<ProblemPtr> test_problems() const override {
    struct S { int64_t rows, cols, ld; };
    // Odd tails; padded rows (ld > cols, including a stride that shifts each row's 16-byte
    // phase); many short rows (warp per row); few long rows (split across blocks / a cluster);
    // rows straddling the split thresholds. Below ~2^21 elements each (the sanitizer sweep's
    // size), except 2 x (2^20 + 3), which scripts/sanitize.sh leaves out by name.
    const std::vector<S> shapes = {
        {1, 1, 0},      {1, 3, 0},         {3, 1, 0},          {7, 4097, 0},   {113, 203, 0},
        {113, 203, 211}, {5, 4097, 4104},  {4096, 31, 0},      {1000, 64, 72}, {300, 1024, 0},
        {2, (1 << 20) + 3, 0}, {3, 1 << 19, (1 << 19) + 5}, {4, 1 << 19, 0}, {17, 100003, 0}};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes)
      for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
        out.push_back(std::make_shared<RowSumProblem>(s.rows, s.cols, dt, s.ld));
    return out;
  }
  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    std::vector<std::vector<int64_t>> shapes;
    for (auto& s : sel.shapes) shapes.push_back(parse_shape(s));
    if (shapes.empty()) shapes = {{16384, 8192}, {4, int64_t(1) << 26}};
    if (sel.quick && sel.shapes.empty()) shapes = {{16384, 8192}};
    std::vector<DType> dtypes = sel.dtypes;
    if (dtypes.empty()) dtypes = sel.quick ? std::vector<DType>{DType::kBF16} : std::vector<DType>{DType::kBF16, DType::kF32};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes) {
      if (s.size() != 2) HK_THROW(kValue, "row_sum: bench shapes are ROWSxT, got ", shape_to_string(s));
      for (DType dt : dtypes) out.push_back(std::make_shared<RowSumProblem>(s[0], s[1], dt));
    }
    return out;
  }
  // inputs {x [..., T]}; no attributes. y is x's shape without the last dimension.
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    attrs.expect_only("row_sum", {});
    if (in.size() != 1) HK_THROW(kValue, "row_sum: takes 1 input (x), got ", in.size());
    return std::make_shared<RowSumProblem>(checked_problem(in[0]));
  }
};

HK_REGISTER_FAMILY(RowSumFamily);

}  // namespace

void row_sum(const TensorView& x, const TensorView& y, cudaStream_t stream) {
  RowSumProblem p = checked_problem(x);
  if (y.dtype != x.dtype)
    HK_THROW(kType, "row_sum: y is ", to_string(y.dtype), " but x is ", to_string(x.dtype));
  if (y.shape != p.lead)
    HK_THROW(kValue, "row_sum: y has shape [", shape_to_string(y.shape), "] but x [",
             shape_to_string(x.shape), "] needs [", shape_to_string(p.lead), "]");
  if (!y.is_contiguous()) HK_THROW(kNotSupported, "row_sum: y must be contiguous, got ", y.describe());
  rows::check_data("row_sum", "y", y);
  if (p.rows == 0) return;  // no rows: nothing to write
  rows::check_element_aligned("row_sum", "y", y);
  if (p.cols == 0) {  // empty rows sum to +0, whose bit pattern is all zeros in every dtype
    HK_CHECK_CUDA(cudaMemsetAsync(y.data, 0, static_cast<size_t>(p.rows) * (dtype_bits(x.dtype) / 8), stream));
    return;
  }
  p.align_bytes = std::min(p.align_bytes, y.alignment());
  Registry::get().pick(p).run(p, Operands{{x}, {y}}, stream);
}

}  // namespace hk
