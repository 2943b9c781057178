// softmax/softmax.cpp — the fp64 oracle, the op contract's numbers, the family (test and
// bench shapes) and the public entry points hk::softmax / hk::softmax_backward.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "common/rows.hpp"
#include "core/host.hpp"
#include "softmax/softmax_op.hpp"

namespace hk {

std::string SoftmaxProblem::same_row_phase() const {
  // With every base 16-byte aligned, row r of an operand starts at phase (r * ld) mod kV
  // elements; equal phases for every r need equal strides mod kV.
  const int64_t kv = 16 / (dtype_bits(dtype) / 8);
  if (align_bytes < 16)
    return "needs 16-byte aligned operands for 16-byte vector access, got " + std::to_string(align_bytes) +
           "-byte alignment";
  auto same = [&](int64_t a, int64_t b) { return rows <= 1 || ((a - b) % kv + kv) % kv == 0; };
  if (!same(ld_in, ld_out) || (backward && !same(ld_in, ld_dy)))
    return fmt::format("rows of the operands start at different 16-byte phases (row strides {}, {}, {} are not "
                       "congruent mod {})",
                       ld_in, backward ? ld_dy : ld_in, ld_out, kv);
  return "";
}

std::string SoftmaxProblem::key() const {
  std::string k = fmt::format("{}x{}_{}", rows, cols, to_string(dtype));
  if (ld_in != cols || ld_out != cols || ld_dy != ld_in) k += fmt::format("_ld{}", ld_in);
  if (backward && ld_dy != ld_in) k += fmt::format("_dy{}", ld_dy);
  if (ld_out != cols) k += fmt::format("_out{}", ld_out);
  return k + (backward ? "_bwd" : "_fwd");
}

// Nominal: max, subtract, exp (~4), add, multiply per element forward; multiply, add,
// subtract, multiply backward. The op is memory-bound either way.
double SoftmaxProblem::flops() const { return double(numel()) * (backward ? 4.0 : 8.0); }

double SoftmaxProblem::bytes() const { return double(numel()) * (dtype_bits(dtype) / 8) * (backward ? 3.0 : 2.0); }

std::vector<TensorSpec> SoftmaxProblem::inputs() const {
  const double inf = std::numeric_limits<double>::infinity();
  auto at = [&](int64_t r, int64_t c) { return r * cols + c; };
  std::vector<int64_t> shape = lead;
  shape.push_back(cols);
  auto strided = [&](TensorSpec t, int64_t ld) {
    t.strides = rows::row_strides(lead, cols, ld);
    return t;
  };
  if (!backward) {
    TensorSpec x{"x", dtype, shape, {}, Dist::kNormal, 3.0, {}};
    if (rows >= 1) x.specials.push_back({at(0, cols / 2), std::nan("")});  // NaN row -> all NaN
    if (rows >= 2) x.specials.push_back({at(1, cols - 1), inf});          // +inf row -> all NaN
    if (rows >= 3) {  // all -inf -> NaN (exp(-inf - -inf)); a long row gets a -inf run instead
      for (int64_t c = 0; c < std::min<int64_t>(cols, 4096); ++c) x.specials.push_back({at(2, c), -inf});
    }
    if (rows >= 4 && cols >= 3) {  // exp overflows without the max subtraction
      x.specials.push_back({at(3, 0), 1e4});
      x.specials.push_back({at(3, cols / 2), 9990.0});
      x.specials.push_back({at(3, cols - 1), -1e4});
    }
    if (rows >= 5 && cols >= 2) {  // -inf first: an online max must not start from exp(NaN)
      x.specials.push_back({at(4, 0), -inf});
      x.specials.push_back({at(4, cols / 3 + 1), -inf});
    }
    return {strided(x, ld_in)};
  }
  // y like a softmax output (positive, rows summing to about 1), dy like an upstream gradient.
  TensorSpec y{"y", dtype, shape, {}, Dist::kPositive, 2.0 / double(cols), {}};
  TensorSpec dy{"dy", dtype, shape, {}, Dist::kNormal, 1.0, {}};
  if (rows >= 1) dy.specials.push_back({at(0, cols / 2), std::nan("")});
  if (rows >= 2) y.specials.push_back({at(1, 0), inf});
  if (rows >= 3) dy.specials.push_back({at(2, cols - 1), 1e4});
  return {strided(y, ld_in), strided(dy, ld_dy)};
}

std::vector<TensorSpec> SoftmaxProblem::outputs() const {
  std::vector<int64_t> shape = lead;
  shape.push_back(cols);
  return {TensorSpec{backward ? "dx" : "y", dtype, shape, rows::row_strides(lead, cols, ld_out), Dist::kNormal, 1.0, {}}};
}

Attrs SoftmaxProblem::attrs() const {
  Attrs a{{"backward", backward}};
  rows::set_out_row_stride(a, ld_out, cols);
  return a;
}

void SoftmaxProblem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  auto& o = out[0].values;
  // Threads split the elements; a row belongs to the thread that holds its first element.
  host::parallel_for(numel(), [&](int64_t b, int64_t e) {
    for (int64_t r = (b + cols - 1) / cols; r * cols < e; ++r) {
      const double* a = in[0].values.data() + r * cols;
      double* res = o.data() + r * cols;
      if (!backward) {
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t c = 0; c < cols; ++c) m = (std::isnan(a[c]) || a[c] > m) ? a[c] : m;  // NaN wins
        double s = 0;
        for (int64_t c = 0; c < cols; ++c) s += std::exp(a[c] - m);
        for (int64_t c = 0; c < cols; ++c) res[c] = std::exp(a[c] - m) / s;
      } else {
        const double* dy = in[1].values.data() + r * cols;
        double dot = 0;
        for (int64_t c = 0; c < cols; ++c) dot += dy[c] * a[c];
        for (int64_t c = 0; c < cols; ++c) res[c] = a[c] * (dy[c] - dot);
      }
    }
  });
}

Tolerance SoftmaxProblem::tolerance(int) const {
  // Relative: one rounding to the output dtype plus the f32 math (exp2 ~2 ulp, the prescale of
  // x - max, the sum) of a few 1e-6. Absolute: f16 outputs below its normal range round to
  // multiples of 6e-8; backward adds y (<= 2/T) times the f32 error of the row dot, taken as 16
  // ulps of the dot's scale sum |dy y|: <= 2 for unit dy, plus 1e4 * 2/T in row 2, whose dy
  // holds a 1e4 (measured on the H200: v03_online 6x8193 f32 missed the former 2e-6/T floor by
  // 4% in that row: error 2.54e-10 on a dot of ~2.4).
  // The row's f32 sum (forward) or dot (backward) adds rows::acc_rel(T), the sqrt(T)-growth
  // every row family allows for an n-term f32 sum (docs/design.md §5): at T = 2^26 an f32
  // softmax's sum is good to ~4e-4 (H200, 2026-11-29: v01/v03 f32 at 4 x 2^26 were off by 4.3e-4
  // in row 2 against the former fixed 2e-5).
  const double dot_scale = 2.0 + (rows >= 3 ? 2e4 / double(cols) : 0.0);
  const double dot_floor = backward ? 2.0 / double(cols) * 16 * 0x1p-24 * dot_scale : 0.0;
  const double sum_rel = rows::acc_rel(cols);
  switch (dtype) {
    case DType::kF32: return {1e-38 + dot_floor, 2e-5 + sum_rel};
    case DType::kF16: return {6e-8 + dot_floor, 1.0 / 1024 + sum_rel};
    default: return {1e-38 + dot_floor, 1.0 / 128 + sum_rel};
  }
}

SoftmaxArgs SoftmaxArgs::bind(const SoftmaxProblem& p, const Operands& ops) {
  SoftmaxArgs a;
  a.a = ops.in.at(0).data;
  if (p.backward) a.dy = ops.in.at(1).data;
  a.out = ops.out.at(0).data;
  a.rows = p.rows;
  a.cols = p.cols;
  a.ld_a = p.ld_in;
  a.ld_dy = p.ld_dy;
  a.ld_out = p.ld_out;
  a.dtype = p.dtype;
  a.backward = p.backward;
  return a;
}

namespace {

// Validation shared by the entry points: an operand of ref's dtype and shape, as a [..., T]
// row layout (rows::layout); typed errors naming the op and the values received.
rows::Layout check_operand(const char* op, const char* name, const TensorView& t, const TensorView& ref,
                           const char* ref_name) {
  if (t.dtype != ref.dtype)
    HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), " but ", ref_name, " is ", to_string(ref.dtype));
  if (t.shape != ref.shape)
    HK_THROW(kValue, op, ": ", name, " has shape [", shape_to_string(t.shape), "] but ", ref_name, " has [",
             shape_to_string(ref.shape), "]");
  rows::check_data(op, name, t);
  rows::check_element_aligned(op, name, t);
  return rows::layout(op, name, t);
}

// The problems the public ops and make_problem share (output row stride: contiguous until the
// caller says otherwise), aligned as the inputs are.
SoftmaxProblem checked_forward(const TensorView& x) {
  rows::check_float("softmax", "x", x);
  const rows::Layout l = check_operand("softmax", "x", x, x, "x");
  SoftmaxProblem p(l.rows, l.cols, x.dtype, false, l.ld);
  p.lead = l.lead;
  p.align_bytes = l.align;
  return p;
}

SoftmaxProblem checked_backward(const TensorView& y, const TensorView& dy) {
  rows::check_float("softmax_backward", "y", y);
  const rows::Layout ly = check_operand("softmax_backward", "y", y, y, "y");
  const rows::Layout ld = check_operand("softmax_backward", "dy", dy, y, "y");
  SoftmaxProblem p(ly.rows, ly.cols, y.dtype, true, ly.ld, 0, ld.ld);
  p.lead = ly.lead;
  p.align_bytes = std::min(ly.align, ld.align);
  return p;
}

class SoftmaxFamily final : public Family {
 public:
  std::string name() const override { return "softmax"; }
  std::string summary() const override {
    return "softmax over the last dimension, forward and backward, f32/f16/bf16, any rows x T, strided rows";
  }
  std::vector<ProblemPtr> test_problems() const override {
    struct S { int64_t rows, cols, ld_in, ld_out, ld_dy; };
    // Odd tails; padded rows with shifted 16-byte phases; strides that differ in phase between
    // the operands (the production rungs split rows at the output's phase, kAny) in each rung's
    // band of row lengths; many short rows (warp per row); rows
    // just past the on-chip limits (8192 / 16384); few long rows (split). Below ~2^21 elements
    // each (the sanitizer sweep's size), except 2 x (2^20 + 3), which sanitize.sh leaves out.
    const std::vector<S> shapes = {
        {1, 1, 0, 0, 0},        {1, 3, 0, 0, 0},          {3, 1, 0, 0, 0},         {7, 4097, 0, 0, 0},
        {113, 203, 0, 0, 0},    {113, 203, 211, 203, 219}, {64, 1000, 1000, 1008, 0}, {5, 4097, 4104, 4112, 4120},
        {9, 100, 101, 100, 0},  {4096, 31, 0, 0, 0},      {300, 1024, 0, 0, 0},    {50, 8192, 0, 0, 0},
        {6, 8193, 0, 0, 0},     {8, 16385, 0, 0, 0},      {3, 32769, 0, 0, 0},      {2, (1 << 20) + 3, 0, 0, 0}, {17, 100003, 0, 0, 0},
        // >= 512 rows of whole 16-byte vectors (v05's block-per-row path): 1, 2, 4 and 8 vectors
        // per thread, padded rows with different strides
        {520, 1600, 0, 0, 0},   {600, 3000, 0, 0, 0},   {512, 4104, 4112, 4120, 0},
        // few rows longer than a 16-block cluster holds in registers (> 16 x 16384: v06's
        // chunks over the grid, ragged last chunks, rows at shifted 16-byte phases; 5 rows carry
        // every special row), contiguous and padded
        {3, 655367, 0, 0, 0},   {5, 300007, 300015, 300023, 300031},
        // operands at different phases row by row: in v04's band and in v06's
        {4, 20001, 20003, 20001, 20005}, {3, 300007, 300009, 300008, 300011}};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes)
      for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
        for (bool bwd : {false, true})
          out.push_back(std::make_shared<SoftmaxProblem>(s.rows, s.cols, dt, bwd, s.ld_in, s.ld_out, s.ld_dy));
    return out;
  }
  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    std::vector<std::vector<int64_t>> shapes;
    for (auto& s : sel.shapes) shapes.push_back(parse_shape(s));
    if (shapes.empty()) shapes = sel.quick ? std::vector<std::vector<int64_t>>{{16384, 8192}}
                                           : std::vector<std::vector<int64_t>>{{16384, 8192}, {4, int64_t(1) << 26}};
    std::vector<DType> dtypes = sel.dtypes;
    if (dtypes.empty()) dtypes = sel.quick ? std::vector<DType>{DType::kBF16} : std::vector<DType>{DType::kBF16, DType::kF32};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes) {
      if (s.size() != 2) HK_THROW(kValue, "softmax: bench shapes are ROWSxT, got ", shape_to_string(s));
      for (DType dt : dtypes) {
        out.push_back(std::make_shared<SoftmaxProblem>(s[0], s[1], dt, false));
        if (!sel.quick) out.push_back(std::make_shared<SoftmaxProblem>(s[0], s[1], dt, true));
      }
    }
    return out;
  }
  // inputs {x} or, with backward=true, {y, dy}: [..., T] tensors with strided rows;
  // out_row_stride: the output's row stride (default T, contiguous).
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    attrs.expect_only("softmax", {"backward", "out_row_stride"});
    bool bwd = attrs.get_bool("softmax", "backward", false);
    const char* op = bwd ? "softmax_backward" : "softmax";
    if (in.size() != (bwd ? 2u : 1u))
      HK_THROW(kValue, op, ": takes ", bwd ? "2 inputs (y, dy)" : "1 input (x)", ", got ", in.size());
    auto p = std::make_shared<SoftmaxProblem>(bwd ? checked_backward(in[0], in[1]) : checked_forward(in[0]));
    p->ld_out = rows::out_row_stride(op, attrs, p->cols);
    return p;
  }
};

HK_REGISTER_FAMILY(SoftmaxFamily);

}  // namespace

void softmax(const TensorView& x, const TensorView& y, cudaStream_t stream) {
  SoftmaxProblem p = checked_forward(x);
  const rows::Layout ly = check_operand("softmax", "y", y, x, "x");
  if (x.numel() == 0) return;  // empty tensor: a no-op
  p.ld_out = ly.ld;
  p.align_bytes = std::min(p.align_bytes, ly.align);
  Registry::get().pick(p).run(p, Operands{{x}, {y}}, stream);
}

void softmax_backward(const TensorView& y, const TensorView& dy, const TensorView& dx, cudaStream_t stream) {
  SoftmaxProblem p = checked_backward(y, dy);
  const rows::Layout lo = check_operand("softmax_backward", "dx", dx, y, "y");
  if (y.numel() == 0) return;
  p.ld_out = lo.ld;
  p.align_bytes = std::min(p.align_bytes, lo.align);
  Registry::get().pick(p).run(p, Operands{{y, dy}, {dx}}, stream);
}

}  // namespace hk
