// gemm/gemm.cpp — the fp64 oracle, the op contract's numbers, TMA's rules, the family (test
// and bench shapes) and the public entry point hk::gemm.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "common/rows.hpp"
#include "core/host.hpp"
#include "gemm/gemm_op.hpp"

namespace hk {

namespace {

const char* act_name(GemmActivation a) {
  switch (a) {
    case GemmActivation::kRelu: return "relu";
    case GemmActivation::kGelu: return "gelu";
    default: return "none";
  }
}

// "0.5" -> "0p5", "-1.5" -> "m1p5": keys are test names, which must not hold '.' or '-'.
std::string number_tag(double v) {
  std::string s = fmt::format("{:g}", v);
  for (char& ch : s) ch = ch == '.' ? 'p' : ch == '-' ? 'm' : ch;
  return s;
}

double gelu_tanh_ref(double x) {
  const double u = std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

int dtype_bytes(DType dt) { return dtype_bits(dt) / 8; }

}  // namespace

GemmProblem::GemmProblem(int64_t m_, int64_t n_, int64_t k_, int64_t batch_, DType in, DType out,
                         bool a_col_, bool b_col_, int64_t pad)
    : m(m_), n(n_), k(k_), batch(batch_), batched(batch_ > 1), in_dtype(in), out_dtype(out), a_col(a_col_), b_col(b_col_) {
  lda = (a_col ? m : k) + pad;
  ldb = (b_col ? k : n) + pad;
  ldc = ldc_in = n + pad;
  batch_stride_a = lda * (a_col ? k : m);
  batch_stride_b = ldb * (b_col ? n : k);
  batch_stride_c = batch_stride_c_in = ldc * m;
}

std::string GemmProblem::layout() const { return std::string(a_col ? "t" : "n") + (b_col ? "t" : "n"); }

std::string GemmProblem::key() const {
  std::string s = fmt::format("m{}_n{}_k{}", m, n, k);
  if (batched) s += fmt::format("_b{}", batch);
  s += fmt::format("_{}_{}_{}", layout(), to_string(in_dtype), to_string(out_dtype));
  if (has_bias) s += "_bias";
  if (act != GemmActivation::kNone) s += fmt::format("_{}", act_name(act));
  if (alpha != 1.0f) s += "_alpha" + number_tag(alpha);
  if (beta != 0.0f) s += "_beta" + number_tag(beta);
  if (lda != (a_col ? m : k) || ldc != n) s += "_strided";
  if (small_int) s += "_int";
  return s;
}

double GemmProblem::flops() const { return 2.0 * double(m) * double(n) * double(k) * double(batch); }

double GemmProblem::bytes() const {
  double in = double(batch) * (double(m) * k + double(k) * n) * dtype_bytes(in_dtype);
  double out = double(batch) * double(m) * n * dtype_bytes(out_dtype) * (beta != 0.0f ? 2.0 : 1.0);
  return in + out + (has_bias ? double(n) * dtype_bytes(out_dtype) : 0.0);
}

std::vector<TensorSpec> GemmProblem::inputs() const {
  // Small integers in [-3, 3]: every product and every partial sum (|sum| <= 9K < 2^24 for
  // K < 1.8M) is exact in f32, so any summation order gives the fp64 result exactly.
  const Dist dist = small_int ? Dist::kSmallInt : Dist::kNormal;
  const double scale = small_int ? 3.0 : 1.0;
  auto spec = [&](const char* name, DType dt, int64_t rows, int64_t cols, bool col, int64_t ld,
                  int64_t bstride) {
    std::vector<int64_t> inner = col ? std::vector<int64_t>{1, ld} : std::vector<int64_t>{ld, 1};
    TensorSpec t{name, dt, {rows, cols}, inner, dist, scale, {}};
    if (batched) {
      t.shape.insert(t.shape.begin(), batch);
      t.strides.insert(t.strides.begin(), bstride);
    }
    return t;
  };
  std::vector<TensorSpec> in = {spec("a", in_dtype, m, k, a_col, lda, batch_stride_a),
                                spec("b", in_dtype, k, n, b_col, ldb, batch_stride_b)};
  if (beta != 0.0f) in.push_back(spec("c_in", out_dtype, m, n, false, ldc_in, batch_stride_c_in));
  if (has_bias) in.push_back(TensorSpec{"bias", out_dtype, {n}, {}, dist, scale, {}});
  return in;
}

Attrs GemmProblem::attrs() const {
  Attrs a;
  if (alpha != 1.0f) a.set("alpha", double(alpha));
  if (beta != 0.0f) a.set("beta", double(beta));
  if (act != GemmActivation::kNone) a.set("activation", std::string(act_name(act)));
  if (out_dtype != in_dtype) a.set("out_dtype", std::string(to_string(out_dtype)));
  rows::set_out_row_stride(a, ldc, n);
  if (small_int) a.set("small_int", true);
  return a;
}

std::vector<TensorSpec> GemmProblem::outputs() const {
  TensorSpec c{"c", out_dtype, {m, n}, {ldc, 1}, Dist::kNormal, 1.0, {}};
  if (batched) {
    c.shape.insert(c.shape.begin(), batch);
    c.strides.insert(c.strides.begin(), batch_stride_c);
  }
  return {c};
}

void GemmProblem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  const auto& a = in[0].values;  // logical [batch, m, k]
  const auto& b = in[1].values;  // logical [batch, k, n]
  const std::vector<double>* c_in = beta != 0.0f ? &in[2].values : nullptr;
  const std::vector<double>* bias = has_bias ? &in[beta != 0.0f ? 3 : 2].values : nullptr;
  auto& c = out[0].values;
  // B transposed to [batch, n, k] so the inner loop walks both operands contiguously.
  std::vector<double> bt(b.size());
  host::parallel_for(batch * n, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      int64_t bi = r / n, j = r % n;
      for (int64_t kk = 0; kk < k; ++kk) bt[r * k + kk] = b[(bi * k + kk) * n + j];
    }
  }, host::grain_for(k));
  host::parallel_for(batch * m, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      int64_t bi = r / m;
      const double* arow = a.data() + r * k;
      for (int64_t j = 0; j < n; ++j) {
        const double* bcol = bt.data() + (bi * n + j) * k;
        double acc = 0;
        for (int64_t kk = 0; kk < k; ++kk) acc += arow[kk] * bcol[kk];
        double v = double(alpha) * acc;
        if (c_in) v += double(beta) * (*c_in)[r * n + j];
        if (bias) v += (*bias)[j];
        if (act == GemmActivation::kRelu) v = std::max(v, 0.0);
        if (act == GemmActivation::kGelu) v = gelu_tanh_ref(v);
        c[r * n + j] = host::round_to(out_dtype, v);  // the kernel rounds once, from f32
      }
    }
  }, host::grain_for(n * k));
}

bool GemmProblem::reference_at(const std::vector<HostTensor>& in, int, const std::vector<int64_t>& flat,
                               std::vector<double>& values) const {
  const auto& a = in[0].values;  // logical [batch, m, k]
  const auto& b = in[1].values;  // logical [batch, k, n]
  const std::vector<double>* c_in = beta != 0.0f ? &in[2].values : nullptr;
  const std::vector<double>* bias = has_bias ? &in[beta != 0.0f ? 3 : 2].values : nullptr;
  values.assign(flat.size(), 0.0);
  host::parallel_for(static_cast<int64_t>(flat.size()), [&](int64_t lo, int64_t hi) {
    for (int64_t s = lo; s < hi; ++s) {
      int64_t f = flat[s], bi = f / (m * n), i = (f / n) % m, j = f % n;
      const double* arow = a.data() + (bi * m + i) * k;
      const double* bcol = b.data() + bi * k * n + j;
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) acc += arow[kk] * bcol[kk * n];
      double v = double(alpha) * acc;
      if (c_in) v += double(beta) * (*c_in)[f];
      if (bias) v += (*bias)[j];
      if (act == GemmActivation::kRelu) v = std::max(v, 0.0);
      if (act == GemmActivation::kGelu) v = gelu_tanh_ref(v);
      values[s] = host::round_to(out_dtype, v);
    }
  });
  return true;
}

Tolerance GemmProblem::tolerance(int) const {
  if (small_int && act != GemmActivation::kGelu) {
    // Integer inputs make every f32 product and partial sum exact, so a kernel that rounds once
    // to the output dtype matches the reference bit for bit. A library epilogue may round the
    // product to a 16-bit output before adding bias or beta*C and round again (cuBLASLt's BIAS
    // epilogue does: 346 for 348 at bf16, H200 2026-11-29), so 16-bit outputs allow one ulp.
    switch (out_dtype) {
      case DType::kBF16: return {0.0, std::ldexp(1.0, -7)};  // one ulp is 2^-8..2^-7 relative
      case DType::kF16: return {0.0, std::ldexp(1.0, -10)};
      default: return {0.0, 0.0};
    }
  }
  // Random N(0,1) inputs: the f32 sum of K products differs from fp64 by a few f32 ulps of the
  // running sum (|sum| ~ sqrt(K)); 2^-20 K bounds that with room for the tensor cores'
  // summation order. The result is rounded once to the output dtype, so reference and kernel
  // may land on neighbouring values: one ulp, 2^-7 (bf16) or 2^-10 (f16) relative.
  double atol = std::ldexp(1.0, -20) * double(std::max<int64_t>(k, 1)) * std::max(1.0, std::fabs(double(alpha)));
  switch (out_dtype) {
    case DType::kBF16: return {atol, std::ldexp(1.0, -7)};
    case DType::kF16: return {atol, std::ldexp(1.0, -10)};
    default: return {atol, 1e-5};
  }
}

GemmArgs GemmArgs::bind(const GemmProblem& p, const Operands& ops) {
  GemmArgs g;
  g.a = ops.in.at(0).data;
  g.b = ops.in.at(1).data;
  size_t next = 2;
  if (p.beta != 0.0f) g.c_in = ops.in.at(next++).data;
  if (p.has_bias) g.bias = ops.in.at(next++).data;
  g.c = ops.out.at(0).data;
  g.m = p.m, g.n = p.n, g.k = p.k, g.batch = p.batch;
  g.lda = p.lda, g.ldb = p.ldb, g.ldc = p.ldc, g.ldc_in = p.ldc_in;
  g.batch_stride_a = p.batch_stride_a, g.batch_stride_b = p.batch_stride_b;
  g.batch_stride_c = p.batch_stride_c, g.batch_stride_c_in = p.batch_stride_c_in;
  g.a_col = p.a_col, g.b_col = p.b_col;
  g.in_dtype = p.in_dtype, g.out_dtype = p.out_dtype;
  g.alpha = p.alpha, g.beta = p.beta, g.act = p.act;
  return g;
}

std::string gemm_tma_supports(const GemmProblem& p, bool tma_store) {
  if (p.k < 1) return "gemm: TMA rungs need K >= 1, got K=0";
  if (p.align_bytes < 16)
    return fmt::format("gemm: TMA needs 16-byte aligned operands, got {}-byte alignment", p.align_bytes);
  // Name the extent whose stride is the leading dimension as the user would (K for a tight
  // row-major A), so the message points at the shape rather than at a stride.
  auto check_ld = [&](const char* what, int64_t ld, int64_t tight, const char* dim, int esize) -> std::string {
    if ((ld * esize) % 16 == 0) return "";
    if (ld == tight) return fmt::format("gemm: {}*{} bytes must be a multiple of 16 for TMA, got {}={}", dim, esize, dim, ld);
    return fmt::format("gemm: {}*{} bytes must be a multiple of 16 for TMA, got {}={}", what, esize, what, ld);
  };
  const int ein = dtype_bytes(p.in_dtype), eout = dtype_bytes(p.out_dtype);
  std::vector<std::string> reasons = {check_ld("lda", p.lda, p.a_col ? p.m : p.k, p.a_col ? "M" : "K", ein),
                                      check_ld("ldb", p.ldb, p.b_col ? p.k : p.n, p.b_col ? "K" : "N", ein)};
  if (tma_store) reasons.push_back(check_ld("ldc", p.ldc, p.n, "N", eout));
  for (auto& why : reasons)
    if (!why.empty()) return why;
  // NOTE: a TMA store clips at the tensor's inner extent only to 16-byte granularity: with C's
  // rows padded (ldc > N) and N * e not a multiple of 16, the last box also writes the elements
  // from N up to the next 16-byte boundary — the caller's data between rows (measured on the
  // H200: N=263 f16 with ldc=272 wrote column 263). Loads zero-fill per element and are exact.
  if (tma_store && (p.n * eout) % 16 != 0)
    return fmt::format("gemm: TMA stores write whole 16-byte units: N*{} bytes must be a multiple of 16 when C's "
                       "rows are padded, got N={} with ldc={}",
                       eout, p.n, p.ldc);
  if (p.batch > 1) {
    std::vector<std::tuple<const char*, int64_t, int>> strides = {{"a", p.batch_stride_a, ein}, {"b", p.batch_stride_b, ein}};
    if (tma_store) strides.emplace_back("c", p.batch_stride_c, eout);
    for (auto [name, s, e] : strides)
      if (s <= 0 || (s * e) % 16 != 0)
        return fmt::format("gemm: {}'s batch stride must be a positive multiple of 16 bytes for TMA, got {} elements",
                           name, s);
  }
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX || p.batch > INT32_MAX)
    return "gemm: TMA coordinates are 32-bit, got a dimension of 2^31 or more";
  return "";
}

std::string gemm_cp_async_supports(const GemmProblem& p, int64_t block_m) {
  if (p.align_bytes < 16)
    return fmt::format("gemm: cp.async needs 16-byte aligned operands, got {}-byte alignment", p.align_bytes);
  const int e = dtype_bytes(p.in_dtype);
  auto check_ld = [&](const char* what, int64_t ld, int64_t tight, const char* dim) -> std::string {
    if ((ld * e) % 16 == 0) return "";
    if (ld == tight) return fmt::format("gemm: {}*{} bytes must be a multiple of 16 for cp.async, got {}={}", dim, e, dim, ld);
    return fmt::format("gemm: {}*{} bytes must be a multiple of 16 for cp.async, got {}={}", what, e, what, ld);
  };
  for (auto why : {check_ld("lda", p.lda, p.a_col ? p.m : p.k, p.a_col ? "M" : "K"),
                   check_ld("ldb", p.ldb, p.b_col ? p.k : p.n, p.b_col ? "K" : "N")})
    if (!why.empty()) return why;
  if (p.batch > 1)
    for (auto [name, s] : {std::pair<const char*, int64_t>{"a", p.batch_stride_a}, {"b", p.batch_stride_b}})
      if ((s * e) % 16 != 0)
        return fmt::format("gemm: {}'s batch stride must be a multiple of 16 bytes for cp.async, got {} elements", name, s);
  if ((p.m + block_m - 1) / block_m > 65535 || p.batch > 65535)
    return fmt::format("gemm: grid.y (M/{}) and grid.z (batch) are limited to 65535, got M={}, batch={}", block_m,
                       p.m, p.batch);
  return "";
}

namespace {

// --- validation shared by hk::gemm and make_problem: typed errors naming operand and values --

struct MatrixView {
  int64_t rows = 0, cols = 0, batch = 1, ld = 0, batch_stride = 0;
  bool col = false;
};

MatrixView check_matrix(const char* name, const TensorView& t, bool allow_col) {
  if (t.rank() != 2 && t.rank() != 3)
    HK_THROW(kValue, "gemm: ", name, " must be [rows, cols] or [batch, rows, cols], got rank ", t.rank(), " (",
             t.describe(), ")");
  MatrixView v;
  v.rows = t.size(-2), v.cols = t.size(-1);
  v.batch = t.rank() == 3 ? t.size(0) : 1;
  v.batch_stride = t.rank() == 3 ? t.stride(0) : 0;
  if (t.stride(-1) == 1 || v.cols == 1) {
    v.ld = v.rows == 1 ? std::max<int64_t>(v.cols, t.stride(-2)) : t.stride(-2);
  } else if (allow_col && (t.stride(-2) == 1 || v.rows == 1)) {
    v.col = true;
    v.ld = v.cols == 1 ? std::max<int64_t>(v.rows, t.stride(-1)) : t.stride(-1);
  } else {
    HK_THROW(kNotSupported, "gemm: ", name, " needs a unit stride along one of its last two dims",
             allow_col ? "" : " (the last: row-major)", ", got ", t.describe());
  }
  // Overlapping rows would make the write of C racy and the read of A/B ambiguous.
  if (v.ld < (v.col ? v.rows : v.cols))
    HK_THROW(kValue, "gemm: ", name, "'s leading stride ", v.ld, " is smaller than its ", v.col ? "rows " : "cols ",
             v.col ? v.rows : v.cols, " (", t.describe(), ")");
  if (v.batch_stride < 0) HK_THROW(kValue, "gemm: ", name, " has a negative batch stride (", t.describe(), ")");
  if (t.numel() > 0 && t.data == nullptr)
    HK_THROW(kValue, "gemm: ", name, " is a null pointer with ", t.numel(), " elements");
  return v;
}


void check_input_dtypes(const TensorView& a, const TensorView& b) {
  if (a.dtype != DType::kBF16 && a.dtype != DType::kF16)
    HK_THROW(kType, "gemm: a is ", to_string(a.dtype), ", expected bf16 or f16");
  if (b.dtype != a.dtype) HK_THROW(kType, "gemm: b is ", to_string(b.dtype), " but a is ", to_string(a.dtype));
}

// `what` says where C's dtype came from: "c" (hk::gemm) or "out_dtype" (make_problem).
void check_output_dtype(const char* what, DType dt) {
  if (dt != DType::kBF16 && dt != DType::kF16 && dt != DType::kF32)
    HK_THROW(kType, "gemm: ", what, " is ", to_string(dt), ", expected bf16, f16 or f32");
}

std::pair<MatrixView, MatrixView> check_ab(const TensorView& a, const TensorView& b) {
  MatrixView va = check_matrix("a", a, true), vb = check_matrix("b", b, true);
  if (va.cols != vb.rows)
    HK_THROW(kValue, "gemm: a is [", va.rows, ", ", va.cols, "] and b is [", vb.rows, ", ", vb.cols,
             "]: K must match, got ", va.cols, " and ", vb.rows);
  return {va, vb};
}

// The problem with A's and B's layouts and strides; C's are the caller's to set.
GemmProblem problem_of(const MatrixView& va, const MatrixView& vb, DType in, DType out, int64_t batch) {
  GemmProblem p(va.rows, vb.cols, va.cols, batch, in, out, va.col, vb.col);
  p.lda = va.ld, p.ldb = vb.ld;
  p.batch_stride_a = va.batch_stride, p.batch_stride_b = vb.batch_stride;
  return p;
}

// The epilogue's inputs against C (dtype p.out_dtype, shape c_shape): c_in, read when
// p.beta != 0, and bias (null when absent). Their layout goes into p; returns their smallest
// alignment (256 when there are none).
int check_epilogue(GemmProblem& p, const std::vector<int64_t>& c_shape, const TensorView* c_in,
                   const TensorView* bias) {
  int align = 256;
  if (p.beta != 0.0f) {
    if (!c_in) HK_THROW(kValue, "gemm: beta is ", p.beta, " but no c_in was given");
    const TensorView& ci = *c_in;
    if (ci.dtype != p.out_dtype)
      HK_THROW(kType, "gemm: c_in is ", to_string(ci.dtype), " but c is ", to_string(p.out_dtype));
    MatrixView vi = check_matrix("c_in", ci, false);
    if (ci.shape != c_shape)
      HK_THROW(kValue, "gemm: c_in has shape [", shape_to_string(ci.shape), "] but c has [", shape_to_string(c_shape), "]");
    p.ldc_in = vi.ld, p.batch_stride_c_in = vi.batch_stride;
    align = ci.alignment();
  }
  if (bias) {
    const TensorView& v = *bias;
    if (v.dtype != p.out_dtype)
      HK_THROW(kType, "gemm: bias is ", to_string(v.dtype), " but c is ", to_string(p.out_dtype));
    if (v.rank() != 1 || v.size(0) != p.n)
      HK_THROW(kValue, "gemm: bias must be [", p.n, "], got [", shape_to_string(v.shape), "]");
    if (!v.is_contiguous()) HK_THROW(kNotSupported, "gemm: bias must be contiguous, got ", v.describe());
    if (v.numel() > 0 && v.data == nullptr) HK_THROW(kValue, "gemm: bias is a null pointer with ", v.numel(), " elements");
    p.has_bias = true;
    align = std::min(align, v.alignment());
  }
  return align;
}

GemmActivation parse_activation(const std::string& name) {
  if (name == "none") return GemmActivation::kNone;
  if (name == "relu") return GemmActivation::kRelu;
  if (name == "gelu") return GemmActivation::kGelu;
  HK_THROW(kValue, "gemm: activation must be \"none\", \"relu\" or \"gelu\" (tanh form), got \"", name, "\"");
}

class GemmFamily final : public Family {
 public:
  std::string name() const override { return "gemm"; }
  std::string summary() const override {
    return "C = act(alpha A B + beta C_in + bias): bf16/f16 in, f32 accumulate, bf16/f16/f32 out, "
           "four layouts, strided batched";
  }

  std::vector<ProblemPtr> test_problems() const override {
    std::vector<ProblemPtr> out;
    using A = GemmActivation;
    const DType bf = DType::kBF16, f16 = DType::kF16, f32 = DType::kF32;
    auto add = [&](int64_t m, int64_t n, int64_t k, int64_t batch, DType in, DType o, bool a_col, bool b_col,
                   bool small, A act = A::kNone, bool bias = false, float alpha = 1, float beta = 0,
                   int64_t pad = 0) {
      auto p = std::make_shared<GemmProblem>(m, n, k, batch, in, o, a_col, b_col, pad);
      p->small_int = small, p->act = act, p->has_bias = bias, p->alpha = alpha, p->beta = beta;
      out.push_back(p);
    };
    // Exact (small integers, zero tolerance). 1x1x1 is "nn": a [1, 1] view has no layout
    // (unit strides both ways), so make_problem reads it as row-major.
    add(1, 1, 1, 1, bf, bf, false, false, true);
    for (bool ac : {false, true})
      for (bool bc : {false, true}) {
        add(113, 203, 799, 1, bf, f32, ac, bc, true);                  // odd tails, TMA-hostile K
        add(113, 200, 808, 1, bf, bf, ac, bc, true, A::kNone, true);   // odd M, TMA-friendly strides
        add(256, 512, 192, 1, f16, f16, ac, bc, true, A::kRelu);       // whole tiles
      }
    add(113, 200, 808, 1, f16, f32, true, false, true, A::kRelu, true, 2.0f, 1.0f);
    add(64, 72, 136, 3, bf, bf, false, true, true, A::kNone, false, 1.0f, -1.0f, 8);  // batched, padded
    add(200, 96, 264, 2, f16, f16, true, false, true, A::kRelu, true, 1.0f, 0.0f, 8);
    // SM waves of the default 128x256 tile on 132 SMs: 0.5, 1.25 and 2.5 waves.
    add(128 * 11, 256 * 6, 256, 1, bf, bf, false, true, true);  // 66 tiles
    add(128 * 15, 256 * 11, 128, 1, bf, bf, false, false, true);  // 165 tiles
    add(128 * 15, 256 * 22, 64, 1, bf, bf, true, true, true);     // 330 tiles
    // Past one wave of 2-CTA cluster units (66 on the H200), v18 splits the last waves along K
    // where they idle the clusters for 16+ k-blocks: 70 units of 19 k-blocks (a K tail), a
    // partner CTA past M, bias + GeLU; and 72 units of C_in (beta) batched with column-major A,
    // ReLU and bias at f32 output.
    add(128 * 9 + 40, 256 * 14 - 72, 1160, 1, bf, bf, false, true, false, A::kGelu, true);
    add(600, 2000, 1160, 3, f16, f32, true, false, false, A::kRelu, true, 1.0f, 0.5f);
    // Random inputs, K-aware tolerance: GeLU and fractional alpha/beta.
    add(113, 200, 808, 1, bf, bf, false, true, false, A::kGelu, true);
    add(256, 256, 1024, 1, f16, f16, false, false, false, A::kGelu);
    add(136, 264, 512, 2, bf, f32, true, true, false, A::kGelu, true, 0.5f, -1.5f);
    add(97, 136, 64, 1, f16, f16, false, false, false, A::kRelu, false, 1.0f, 0.25f);
    add(333, 520, 4000, 1, bf, bf, false, true, false);
    // A plain GEMM (no C_in, bias or activation) with f16 output and alpha != 1, batched, odd M:
    // the specialised plain epilogue of v14 for the 16-bit type the rows above leave out.
    add(200, 264, 136, 2, f16, f16, false, true, false, A::kNone, false, 0.5f);
    // Bias with N past one 256-wide tile (v15 loads whole tiles' bias unpredicated, the last
    // tile's predicated): GeLU at f32 output with alpha (N = 2 x 256 + 8), and an odd N (the
    // last bias pair is half outside) with C's rows padded to TMA's 16 bytes (pad 9: K + 9 and
    // N + 9 are multiples of 8).
    add(200, 520, 264, 1, bf, f32, false, true, false, A::kGelu, true, 0.5f);
    add(136, 263, 127, 1, f16, f16, false, true, true, A::kRelu, true, 1.0f, 0.0f, 9);
    // Decode shapes ("nt", M <= 32: v17's rows of 16, its N tails past 256-column tiles, K tails
    // and split-K clusters). M = 1 with odd N and bias at f32 output; K = 127 (rows padded to 16
    // bytes: pad 9) with ReLU; M = 32 with C_in (beta) batched; M = 24 batched and padded (K =
    // 1032: three empty ranks of an 8-CTA cluster); K = 16384 (two 1024-wide A segments per
    // rank); bias + GeLU at f32 output; and 16x2048x4096, where split-K engages fully.
    add(1, 263, 136, 1, bf, f32, false, true, true, A::kNone, true);
    add(7, 129, 127, 1, f16, f16, false, true, true, A::kRelu, false, 1.0f, 0.0f, 9);
    add(32, 136, 264, 2, f16, f32, false, true, true, A::kNone, false, 2.0f, -1.0f);
    add(24, 72, 1032, 3, bf, bf, false, true, true, A::kRelu, true, 1.0f, 0.0f, 8);
    add(16, 264, 16384, 1, bf, f32, false, true, true);
    add(16, 520, 1024, 1, bf, f32, false, true, false, A::kGelu, true, 0.5f);
    add(16, 2048, 4096, 1, bf, bf, false, true, false);
    return out;
  }

  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    // "MxNxK" or "MxNxKxBATCH", then optionally ":LAYOUT" (nn, nt, tn, tt; 't' = column-major)
    // and ":EPILOGUE" (bias, relu, gelu, bias_relu, bias_gelu), in either order. The default
    // layout is "nt" (A row-major, B column-major: x W^T with a [N, K] weight, the Linear-layer
    // layout); without an epilogue, 4096^3 "nt" also brings its bias + GeLU and ReLU rows.
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::string> layouts, epilogues;
    for (const std::string& s : sel.shapes) {
      std::vector<std::string> parts;
      for (size_t at = 0;;) {
        const size_t colon = s.find(':', at);
        parts.push_back(s.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
        if (colon == std::string::npos) break;
        at = colon + 1;
      }
      std::string layout, epilogue;
      for (size_t i = 1; i < parts.size(); ++i) {
        const std::string& t = parts[i];
        const bool is_layout = t == "nn" || t == "nt" || t == "tn" || t == "tt";
        const bool is_epilogue = t == "bias" || t == "relu" || t == "gelu" || t == "bias_relu" || t == "bias_gelu";
        if ((!is_layout && !is_epilogue) || (is_layout && !layout.empty()) || (is_epilogue && !epilogue.empty()))
          HK_THROW(kValue, "gemm bench: layout must be nn, nt, tn or tt and the epilogue bias, relu, gelu, bias_relu "
                           "or bias_gelu, each at most once; got \"", t, "\" in ", s);
        (is_layout ? layout : epilogue) = t;
      }
      auto v = parse_shape(parts[0]);
      if (v.size() != 3 && v.size() != 4)
        HK_THROW(kValue, "gemm bench: shape must be MxNxK or MxNxKxBATCH (then :LAYOUT, :EPILOGUE), got ", s);
      shapes.push_back(v);
      layouts.push_back(layout.empty() ? "nt" : layout);
      epilogues.push_back(epilogue);
    }
    if (shapes.empty()) {
      if (sel.quick) shapes = {{4096, 4096, 4096}};
      else
        shapes = {{4096, 4096, 4096}, {8192, 8192, 8192}, {16384, 16384, 16384}, {4096, 14336, 4096},
                  {8192, 8192, 1024},  {2048, 2048, 2048}, {16, 8192, 8192}, {1, 8192, 8192}};
    }
    std::vector<DType> dtypes = sel.dtypes;
    if (dtypes.empty()) dtypes = sel.quick ? std::vector<DType>{DType::kBF16} : std::vector<DType>{DType::kBF16, DType::kF16};
    layouts.resize(shapes.size(), "nt");
    epilogues.resize(shapes.size());
    std::vector<ProblemPtr> out;
    for (size_t i = 0; i < shapes.size(); ++i)
      for (DType dt : dtypes) {
        const std::vector<int64_t>& s = shapes[i];
        if (dt != DType::kBF16 && dt != DType::kF16)
          HK_THROW(kType, "gemm bench: dtype ", to_string(dt), " is not bf16 or f16");
        auto p = std::make_shared<GemmProblem>(s[0], s[1], s[2], s.size() == 4 ? s[3] : 1, dt, dt,
                                               layouts[i][0] == 't', layouts[i][1] == 't');
        const std::string& e = epilogues[i];
        p->has_bias = e.rfind("bias", 0) == 0;
        p->act = e.find("relu") != std::string::npos   ? GemmActivation::kRelu
                 : e.find("gelu") != std::string::npos ? GemmActivation::kGelu
                                                        : GemmActivation::kNone;
        out.push_back(p);
        if (sel.quick || !e.empty() || layouts[i] != "nt" || s[0] != 4096 || s[1] != 4096 || s[2] != 4096) continue;
        // The fused-epilogue cost at 4096^3: bias + GeLU and ReLU against the plain row above.
        auto gelu = std::make_shared<GemmProblem>(4096, 4096, 4096, 1, dt, dt, false, true);
        gelu->has_bias = true, gelu->act = GemmActivation::kGelu;
        out.push_back(gelu);
        auto relu = std::make_shared<GemmProblem>(4096, 4096, 4096, 1, dt, dt, false, true);
        relu->act = GemmActivation::kRelu;
        out.push_back(relu);
      }
    return out;
  }

  // inputs {a, b}, then c_in when beta != 0, then bias when given. a [M, K] and b [K, N] are both
  // rank 2 or both rank 3 ([batch, ...], equal batches; a stride-0 batch broadcasts), each row- or
  // column-major as its strides say. Attributes (default): alpha (1), beta (0), activation
  // ("none"; "relu", "gelu" = tanh form), out_dtype (a's), out_row_stride (N: C's row stride; C's
  // batches are tight), small_int (false: marks the exact test problems, zero tolerance).
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    attrs.expect_only("gemm", {"alpha", "beta", "activation", "out_dtype", "out_row_stride", "small_int"});
    const float alpha = static_cast<float>(attrs.get_double("gemm", "alpha", 1.0));
    const float beta = static_cast<float>(attrs.get_double("gemm", "beta", 0.0));
    const GemmActivation act = parse_activation(attrs.get_string("gemm", "activation", "none"));
    const size_t fixed = beta != 0.0f ? 3 : 2;
    if (in.size() != fixed && in.size() != fixed + 1)
      HK_THROW(kValue, "gemm: takes inputs (a, b", beta != 0.0f ? ", c_in" : "", "[, bias]), got ", in.size());
    const TensorView &a = in[0], &b = in[1];
    check_input_dtypes(a, b);
    const std::string out_name = attrs.get_string("gemm", "out_dtype", "");
    const DType out = out_name.empty() ? a.dtype : parse_dtype(out_name);
    check_output_dtype("out_dtype", out);
    auto [va, vb] = check_ab(a, b);
    // A rank-2 operand in a batched problem would not match the problem's [batch, ...] specs
    // (hk.reference decodes each input in its own shape): the caller broadcasts it with a
    // stride-0 batch instead, which hk::gemm runs the same way.
    if (a.rank() != b.rank())
      HK_THROW(kValue, "gemm: a is rank ", a.rank(), " and b is rank ", b.rank(),
               "; give both a batch dim (a stride-0 batch broadcasts)");
    if (va.batch != vb.batch) HK_THROW(kValue, "gemm: batch sizes differ: a ", va.batch, ", b ", vb.batch);
    GemmProblem p = problem_of(va, vb, a.dtype, out, va.batch);
    p.batched = a.rank() == 3;
    p.alpha = alpha, p.beta = beta, p.act = act;
    p.small_int = attrs.get_bool("gemm", "small_int", false);
    p.ldc = rows::out_row_stride("gemm", attrs, p.n);
    p.batch_stride_c = p.ldc * p.m;
    std::vector<int64_t> c_shape = {p.m, p.n};
    if (p.batched) c_shape.insert(c_shape.begin(), p.batch);
    const int align = check_epilogue(p, c_shape, beta != 0.0f ? &in[2] : nullptr, in.size() > fixed ? &in.back() : nullptr);
    p.align_bytes = std::min({a.alignment(), b.alignment(), align});
    return std::make_shared<GemmProblem>(p);
  }
};

HK_REGISTER_FAMILY(GemmFamily);

}  // namespace

// --- the public op: validation (shared with make_problem above), then dispatch ---------------

void gemm(const TensorView& a, const TensorView& b, const TensorView& c, const GemmOptions& opt,
          cudaStream_t stream) {
  check_input_dtypes(a, b);
  check_output_dtype("c", c.dtype);
  auto [va, vb] = check_ab(a, b);
  MatrixView vc = check_matrix("c", c, false);
  if (vc.rows != va.rows || vc.cols != vb.cols)
    HK_THROW(kValue, "gemm: c is [", vc.rows, ", ", vc.cols, "], expected [", va.rows, ", ", vb.cols, "]");
  const int64_t batch = vc.batch;
  if ((a.rank() == 3 && va.batch != batch) || (b.rank() == 3 && vb.batch != batch) || (c.rank() == 2 && batch != 1))
    HK_THROW(kValue, "gemm: batch sizes differ: a ", va.batch, ", b ", vb.batch, ", c ", vc.batch);

  GemmProblem p = problem_of(va, vb, a.dtype, c.dtype, batch);
  p.ldc = vc.ld, p.batch_stride_c = vc.batch_stride;
  p.alpha = opt.alpha, p.beta = opt.beta, p.act = opt.act;
  const int align = check_epilogue(p, c.shape, opt.c_in, opt.bias);
  p.align_bytes = std::min({a.alignment(), b.alignment(), c.alignment(), align});
  Operands ops{{a, b}, {c}};
  if (p.beta != 0.0f) ops.in.push_back(*opt.c_in);
  if (p.has_bias) ops.in.push_back(*opt.bias);
  if (p.m == 0 || p.n == 0 || batch == 0) return;  // empty output: a no-op
  Registry::get().pick(p).run(p, ops, stream);
}

}  // namespace hk
