// swiglu/swiglu.cpp — the fp64 oracle, the op contract's numbers, the family (test and bench
// shapes) and the public entry points hk::swiglu / hk::swiglu_backward.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/host.hpp"
#include "core/trace.hpp"
#include "swiglu/swiglu_op.hpp"

namespace hk {

namespace {

int esize(DType dt) { return dtype_bits(dt) / 8; }

// The kernels' formulas in fp64, so NaN and Inf land where the kernels put them:
// silu(-inf) = -inf / inf = NaN, silu'(+inf) = 1 * (1 + inf * 0) = NaN.
double silu_ref(double g) { return g / (1.0 + std::exp(-g)); }
double sigmoid_ref(double g) { return 1.0 / (1.0 + std::exp(-g)); }

// Strides of a [rows, cols] spec whose rows lie `ld` apart (empty: contiguous).
std::vector<int64_t> row_strides(int64_t cols, int64_t ld) {
  if (ld == cols) return {};
  return {ld, 1};
}

}  // namespace

std::string SwigluProblem::key() const {
  std::string k = fmt::format("{}x{}_{}_{}", rows, dim, to_string(dtype), backward ? "bwd" : "fwd");
  const bool padded = ld_x != 2 * dim || ld_out != out_cols() || (backward && ld_dy != dim);
  if (padded) k += backward ? fmt::format("_ld{}-{}-{}", ld_x, ld_dy, ld_out) : fmt::format("_ld{}-{}", ld_x, ld_out);
  return k;
}

// Nominal counts per (g, u) pair: exp as ~4 flops, the add, the divide, the product (backward:
// the sigmoid, silu', two products per output). The op is memory-bound.
double SwigluProblem::flops() const { return double(numel()) * (backward ? 12.0 : 7.0); }

double SwigluProblem::bytes() const {
  // forward: x (2F) read, y (F) written; backward: x (2F) and dy (F) read, dx (2F) written.
  return double(numel()) * esize(dtype) * (backward ? 5.0 : 3.0);
}

std::vector<TensorSpec> SwigluProblem::inputs() const {
  TensorSpec x{"x", dtype, {rows, 2 * dim}, row_strides(2 * dim, ld_x), Dist::kNormal, 3.0, {}};
  const double inf = std::numeric_limits<double>::infinity();
  // Gates at NaN, ±Inf, ±30 and -100 (exp(100) overflows f32: silu -> -0), an up at +Inf and one
  // at -0; N(0, 3) gates reach both tails of the sigmoid.
  if (dim >= 8)
    x.specials = {{0, std::nan("")}, {1, inf}, {2, -inf}, {3, 30.0}, {4, -30.0}, {5, -100.0},
                  {dim + 6, inf}, {dim + 7, -0.0}};
  if (!backward) return {x};
  TensorSpec dy{"dy", dtype, {rows, dim}, row_strides(dim, ld_dy), Dist::kNormal, 1.0, {}};
  return {x, dy};
}

std::vector<TensorSpec> SwigluProblem::outputs() const {
  return {TensorSpec{backward ? "dx" : "y", dtype, {rows, out_cols()}, row_strides(out_cols(), ld_out),
                     Dist::kNormal, 1.0, {}}};
}

void SwigluProblem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  const auto& x = in[0].values;
  auto& o = out[0].values;
  const int64_t F = dim;
  host::parallel_for(rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const double* g = &x[r * 2 * F];
      const double* u = g + F;
      if (!backward) {
        for (int64_t j = 0; j < F; ++j) o[r * F + j] = silu_ref(g[j]) * u[j];
        continue;
      }
      const double* dy = &in[1].values[r * F];
      for (int64_t j = 0; j < F; ++j) {
        const double s = sigmoid_ref(g[j]);
        o[r * 2 * F + j] = dy[j] * u[j] * (s * (1.0 + g[j] * (1.0 - s)));
        o[r * 2 * F + F + j] = dy[j] * (g[j] * s);
      }
    }
  }, host::grain_for(F));
}

Tolerance SwigluProblem::tolerance(int) const {
  // Math in f32, one rounding to the output dtype: one output ulp of relative error, plus an
  // absolute floor for results near zero. The backward's f32 floor covers 1 + g (1 - s), which
  // cancels near g = -1.28 (silu's minimum), and 1 - s for large gates: ~1e-7 |g| |dy u|.
  switch (dtype) {
    case DType::kF32: return {backward ? 1e-5 : 1e-6, 1e-5};
    case DType::kF16: return {1e-5, 1.0 / 1024};
    default: return {1e-5, 1.0 / 128};
  }
}

Attrs SwigluProblem::attrs() const {
  Attrs a{{"backward", backward}};
  if (ld_out != out_cols()) a.set("out_row_stride", ld_out);
  return a;
}

SwigluArgs SwigluArgs::bind(const SwigluProblem& p, const Operands& ops) {
  SwigluArgs a;
  a.x = ops.in.at(0).data;
  if (p.backward) a.dy = ops.in.at(1).data;
  a.out = ops.out.at(0).data;
  a.rows = p.rows;
  a.dim = p.dim;
  a.ld_x = p.ld_x;
  a.ld_dy = p.ld_dy;
  a.ld_out = p.ld_out;
  a.dtype = p.dtype;
  a.backward = p.backward;
  return a;
}

namespace {

// `t` as [rows, cols] rows of contiguous elements; returns its row stride. Typed errors name the
// op, the operand and what was received.
int64_t check_rows(const char* op, const char* name, const TensorView& t, DType dtype, int64_t rows, int64_t cols) {
  if (t.dtype != dtype)
    HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), " but x is ", to_string(dtype));
  if (t.rank() != 2 || t.shape[0] != rows || t.shape[1] != cols)
    HK_THROW(kValue, op, ": ", name, " has shape [", shape_to_string(t.shape), "], expected [", rows, "x", cols, "]");
  if (t.numel() > 0 && t.data == nullptr)
    HK_THROW(kValue, op, ": ", name, " is a null pointer with ", t.numel(), " elements");
  if (t.numel() == 0) return cols;
  if (cols > 1 && t.stride(1) != 1)
    HK_THROW(kNotSupported, op, ": ", name, " needs a contiguous last dim, got ", t.describe());
  if (rows == 1) return cols;
  if (t.stride(0) < cols)
    HK_THROW(kNotSupported, op, ": ", name, " rows overlap or run backwards (row stride ", t.stride(0),
             " < ", cols, "), got ", t.describe());
  return t.stride(0);
}

// x [rows, 2F] (and dy [rows, F] for the backward): the problem they pose, aligned as the views
// are; the output's row stride starts contiguous.
SwigluProblem checked_problem(const char* op, const TensorView& x, const TensorView* dy) {
  if (x.dtype != DType::kF32 && x.dtype != DType::kF16 && x.dtype != DType::kBF16)
    HK_THROW(kType, op, ": x is ", to_string(x.dtype), ", expected f32, f16 or bf16");
  if (x.rank() != 2) HK_THROW(kValue, op, ": x must be [rows, 2F], got [", shape_to_string(x.shape), "]");
  if (x.shape[1] % 2 != 0)
    HK_THROW(kValue, op, ": x's last dim holds [gate | up] and must be even, got ", x.shape[1]);
  const int64_t R = x.shape[0], F = x.shape[1] / 2;
  SwigluProblem p(R, F, x.dtype, dy != nullptr);
  p.ld_x = check_rows(op, "x", x, x.dtype, R, 2 * F);
  p.align_bytes = x.alignment();
  if (dy) {
    p.ld_dy = check_rows(op, "dy", *dy, x.dtype, R, F);
    p.align_bytes = std::min(p.align_bytes, dy->alignment());
  }
  return p;
}

class SwigluFamily final : public Family {
 public:
  std::string name() const override { return "swiglu"; }
  std::string summary() const override {
    return "SwiGLU silu(g) * u on [rows, 2F] = [g | u], forward and backward, strided rows, f32/f16/bf16";
  }
  std::vector<ProblemPtr> test_problems() const override {
    struct S { int64_t rows, dim, pad; };
    // Odd lengths (head, body and tail of a row at every phase), padded rows whose phase shifts
    // row by row (pad 1, 5), many short rows, a Llama FFN width, long rows, 2^20 columns.
    const std::vector<S> shapes = {{1, 1, 0},    {3, 3, 5},     {1, 4097, 0},  {7, 1023, 9},  {113, 203, 13},
                                   {1000, 96, 0}, {3, 8, 1},    {64, 1376, 8}, {16, 11008, 0}, {5, 40000, 0},
                                   {2, 1 << 20, 0}};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes)
      for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
        for (bool bwd : {false, true}) out.push_back(std::make_shared<SwigluProblem>(s.rows, s.dim, dt, bwd, s.pad));
    return out;
  }
  // Shapes are "ROWSxF" (x is [ROWS, 2F]); default 16384x8192 (x 16384x16384).
  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    std::vector<std::pair<int64_t, int64_t>> shapes;
    for (auto& s : sel.shapes) {
      std::vector<int64_t> v = parse_shape(s);
      if (v.size() != 2) HK_THROW(kValue, "swiglu: bench shape must be ROWSxF, got \"", s, "\"");
      shapes.emplace_back(v[0], v[1]);
    }
    if (shapes.empty()) shapes = {{16384, 8192}};
    std::vector<DType> dtypes = sel.dtypes;
    if (dtypes.empty()) dtypes = {DType::kBF16, DType::kF32};
    std::vector<ProblemPtr> out;
    for (auto& [r, f] : shapes)
      for (DType dt : dtypes) {
        out.push_back(std::make_shared<SwigluProblem>(r, f, dt, false));
        if (!sel.quick) out.push_back(std::make_shared<SwigluProblem>(r, f, dt, true));
      }
    return out;
  }
  // inputs {x} or, with backward=true, {x, dy}; out_row_stride: the row stride of y or dx
  // (default: contiguous).
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    attrs.expect_only("swiglu", {"backward", "out_row_stride"});
    const bool bwd = attrs.get_bool("swiglu", "backward", false);
    const char* op = bwd ? "swiglu_backward" : "swiglu";
    if (in.size() != (bwd ? 2u : 1u))
      HK_THROW(kValue, op, ": takes ", bwd ? "2 inputs (x, dy)" : "1 input (x)", ", got ", in.size());
    auto p = std::make_shared<SwigluProblem>(checked_problem(op, in[0], bwd ? &in[1] : nullptr));
    const int64_t ld = attrs.get_int(op, "out_row_stride", p->out_cols());
    if (ld < p->out_cols())
      HK_THROW(kValue, op, ": out_row_stride ", ld, " is less than the output's row length ", p->out_cols());
    p->ld_out = ld;
    return p;
  }
};

HK_REGISTER_FAMILY(SwigluFamily);

void dispatch(SwigluProblem& p, const Operands& ops, cudaStream_t stream) {
  if (p.numel() == 0) return;  // empty tensor: a no-op
  for (const auto& t : ops.out) p.align_bytes = std::min(p.align_bytes, t.alignment());
  Registry::get().pick(p).run(p, ops, stream);
}

}  // namespace

void swiglu(const TensorView& x, const TensorView& y, cudaStream_t stream) {
  HK_TRACE_RANGE("hk::swiglu");
  SwigluProblem p = checked_problem("swiglu", x, nullptr);
  p.ld_out = check_rows("swiglu", "y", y, x.dtype, p.rows, p.dim);
  dispatch(p, Operands{{x}, {y}}, stream);
}

void swiglu_backward(const TensorView& x, const TensorView& dy, const TensorView& dx, cudaStream_t stream) {
  HK_TRACE_RANGE("hk::swiglu_backward");
  SwigluProblem p = checked_problem("swiglu_backward", x, &dy);
  p.ld_out = check_rows("swiglu_backward", "dx", dx, x.dtype, p.rows, 2 * p.dim);
  dispatch(p, Operands{{x, dy}, {dx}}, stream);
}

}  // namespace hk
