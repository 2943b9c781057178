// gemm_fp8/gemm_fp8.cpp — the fp64 oracle, the op contract's numbers, TMA's rules, the host
// quantiser, the family (test and bench shapes) and the public entry point hk::gemm_fp8.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/rows.hpp"
#include "core/host.hpp"
#include "gemm_fp8/gemm_fp8_op.hpp"

namespace hk {

std::string_view to_string(Fp8Scaling s) {
  switch (s) {
    case Fp8Scaling::kRow: return "row";
    case Fp8Scaling::kBlock: return "block";
    default: return "tensor";
  }
}

Fp8Scaling parse_fp8_scaling(std::string_view name) {
  if (name == "tensor") return Fp8Scaling::kTensor;
  if (name == "row") return Fp8Scaling::kRow;
  if (name == "block") return Fp8Scaling::kBlock;
  HK_THROW(kValue, "gemm_fp8: scaling must be \"tensor\", \"row\" or \"block\", got \"", name, "\"");
}

Fp8Scaling gemm_fp8_scaling(const TensorView& sa, const TensorView& sb) {
  if (sa.rank() == 2 || sb.rank() == 2) return Fp8Scaling::kBlock;
  if (sa.numel() == 1 && sb.numel() == 1 && sa.rank() <= 1 && sb.rank() <= 1) return Fp8Scaling::kTensor;
  return Fp8Scaling::kRow;
}

std::vector<int64_t> fp8_scale_shape(Fp8Scaling scaling, int64_t rows, int64_t cols, int block_rows) {
  switch (scaling) {
    case Fp8Scaling::kRow: return {rows};
    case Fp8Scaling::kBlock:
      return {(rows + block_rows - 1) / block_rows, (cols + kFp8ScaleBlock - 1) / kFp8ScaleBlock};
    default: return {1};
  }
}

double fp8_max_finite(DType dtype) { return dtype == DType::kF8E5M2 ? 57344.0 : 448.0; }

void quantize_fp8_host(const std::vector<double>& x, int64_t rows, int64_t cols, DType dtype, Fp8Scaling scaling,
                       int block_rows, std::vector<double>& data, std::vector<double>& scales) {
  const std::vector<int64_t> shape = fp8_scale_shape(scaling, rows, cols, block_rows);
  const int64_t scols = shape.size() == 2 ? shape[1] : 1;
  auto group = [&](int64_t r, int64_t c) -> int64_t {
    if (scaling == Fp8Scaling::kTensor) return 0;
    if (scaling == Fp8Scaling::kRow) return r;
    return (r / block_rows) * scols + c / kFp8ScaleBlock;
  };
  int64_t groups = 1;
  for (int64_t d : shape) groups *= d;
  // The device quantiser works in f32: amax of |x| as f32, scale = amax / max as f32, x / scale
  // as f32, then one rounding to the format (saturating).
  std::vector<float> amax(groups, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float& a = amax[group(r, c)];
      a = std::max(a, std::fabs(static_cast<float>(x[r * cols + c])));
    }
  const float fmax = static_cast<float>(fp8_max_finite(dtype));
  scales.assign(groups, 1.0);
  for (int64_t g = 0; g < groups; ++g) scales[g] = amax[g] > 0.0f ? double(amax[g] / fmax) : 1.0;
  data.assign(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float q = static_cast<float>(x[r * cols + c]) / static_cast<float>(scales[group(r, c)]);
      data[r * cols + c] = host::round_to(dtype, std::clamp(q, -fmax, fmax));
    }
}

namespace {

int dtype_bytes(DType dt) { return dtype_bits(dt) / 8; }

std::string fp8_tag(DType dt) { return std::string(to_string(dt)); }

}  // namespace

GemmFp8Problem::GemmFp8Problem(int64_t m_, int64_t n_, int64_t k_, DType a_dt, DType b_dt, DType out,
                               Fp8Scaling s, bool b_kn_, int64_t pad)
    : m(m_), n(n_), k(k_), a_dtype(a_dt), b_dtype(b_dt), out_dtype(out), scaling(s) {
  a_s0 = k + pad, a_s1 = 1;
  if (b_kn_) b_s0 = 1, b_s1 = n + pad;
  else b_s0 = k + pad, b_s1 = 1;
  ldd = n + pad;
  switch (scaling) {
    case Fp8Scaling::kRow: sa_s0 = 1, sb_s0 = 1; break;
    case Fp8Scaling::kBlock: sa_s0 = k_blocks(), sa_s1 = 1, sb_s0 = k_blocks(), sb_s1 = 1; break;
    default: break;
  }
}

std::vector<int64_t> GemmFp8Problem::sa_shape() const { return fp8_scale_shape(scaling, m, k, 1); }
std::vector<int64_t> GemmFp8Problem::sb_shape() const { return fp8_scale_shape(scaling, n, k, int(kFp8ScaleBlock)); }

std::string GemmFp8Problem::key() const {
  std::string s = fmt::format("m{}_n{}_k{}_{}{}_{}_{}", m, n, k, fp8_tag(a_dtype), fp8_tag(b_dtype),
                              to_string(out_dtype), to_string(scaling));
  if (b_kn()) s += "_kn";
  if (has_bias) s += "_bias";
  if (a_s0 != k || ldd != n || (!b_kn() && b_s0 != k) || (b_kn() && b_s1 != n)) s += "_strided";
  if (small_int) s += "_int";
  if (fast_accum) s += "_fast";
  return s;
}

double GemmFp8Problem::flops() const { return 2.0 * double(m) * double(n) * double(k); }

double GemmFp8Problem::bytes() const {
  auto count = [](const std::vector<int64_t>& shape) {
    double c = 1;
    for (int64_t d : shape) c *= double(d);
    return c;
  };
  return double(m) * k + double(n) * k + double(m) * n * dtype_bytes(out_dtype) +
         4.0 * (count(sa_shape()) + count(sb_shape())) + (has_bias ? double(n) * dtype_bytes(out_dtype) : 0.0);
}

std::vector<TensorSpec> GemmFp8Problem::inputs() const {
  // Small integers in [-3, 3] are exact in both fp8 formats, and so is every f32 product and
  // partial sum with integer scales in [-3, 3] (|D| <= 81 K < 2^24): any summation order gives the
  // fp64 result. Otherwise N(0, 1) data rounded to fp8 and scales in [1/8, 1].
  const Dist data = small_int ? Dist::kSmallInt : Dist::kNormal;
  const double data_scale = small_int ? 3.0 : 1.0;
  const Dist sdist = small_int ? Dist::kSmallInt : Dist::kPositive;
  const double sscale = small_int ? 3.0 : 1.0;
  auto scale_strides = [&](int64_t s0, int64_t s1) -> std::vector<int64_t> {
    if (scaling == Fp8Scaling::kBlock) return {s0, s1};
    if (scaling == Fp8Scaling::kRow) return {s0};
    return {};
  };
  std::vector<TensorSpec> in = {
      TensorSpec{"a", a_dtype, {m, k}, {a_s0, a_s1}, data, data_scale, {}},
      TensorSpec{"sa", DType::kF32, sa_shape(), scale_strides(sa_s0, sa_s1), sdist, sscale, {}},
      TensorSpec{"b", b_dtype, {n, k}, {b_s0, b_s1}, data, data_scale, {}},
      TensorSpec{"sb", DType::kF32, sb_shape(), scale_strides(sb_s0, sb_s1), sdist, sscale, {}}};
  if (has_bias) in.push_back(TensorSpec{"bias", out_dtype, {n}, {}, data, data_scale, {}});
  return in;
}

std::vector<TensorSpec> GemmFp8Problem::outputs() const {
  return {TensorSpec{"d", out_dtype, {m, n}, {ldd, 1}, Dist::kNormal, 1.0, {}}};
}

Attrs GemmFp8Problem::attrs() const {
  Attrs a;
  a.set("scaling", std::string(to_string(scaling)));
  if (out_dtype != DType::kBF16) a.set("out_dtype", std::string(to_string(out_dtype)));
  rows::set_out_row_stride(a, ldd, n);
  if (small_int) a.set("small_int", true);
  if (fast_accum) a.set("fast_accum", true);
  return a;
}

double gemm_fp8_exact(const GemmFp8Problem& p, const std::vector<double>& a, const std::vector<double>& b,
                      const std::vector<double>& sa, const std::vector<double>& sb, const std::vector<double>* bias,
                      int64_t i, int64_t j) {
  const double* arow = a.data() + i * p.k;
  const double* brow = b.data() + j * p.k;
  double v = 0;
  if (p.scaling == Fp8Scaling::kBlock) {
    const int64_t kb_count = p.k_blocks();
    for (int64_t kb = 0; kb < kb_count; ++kb) {
      double part = 0;
      const int64_t k1 = std::min(p.k, (kb + 1) * kFp8ScaleBlock);
      for (int64_t kk = kb * kFp8ScaleBlock; kk < k1; ++kk) part += arow[kk] * brow[kk];
      v += sa[i * kb_count + kb] * sb[(j / kFp8ScaleBlock) * kb_count + kb] * part;
    }
  } else {
    for (int64_t kk = 0; kk < p.k; ++kk) v += arow[kk] * brow[kk];
    v *= p.scaling == Fp8Scaling::kRow ? sa[i] * sb[j] : sa[0] * sb[0];
  }
  if (bias) v += (*bias)[j];
  return v;
}

void GemmFp8Problem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  const std::vector<double>* bias = has_bias ? &in[4].values : nullptr;
  auto& d = out[0].values;
  host::parallel_for(m, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t j = 0; j < n; ++j)
        d[i * n + j] = host::round_to(
            out_dtype, gemm_fp8_exact(*this, in[0].values, in[2].values, in[1].values, in[3].values, bias, i, j));
  }, host::grain_for(n * k));
}

bool GemmFp8Problem::reference_at(const std::vector<HostTensor>& in, int, const std::vector<int64_t>& flat,
                                  std::vector<double>& values) const {
  const std::vector<double>* bias = has_bias ? &in[4].values : nullptr;
  values.assign(flat.size(), 0.0);
  host::parallel_for(static_cast<int64_t>(flat.size()), [&](int64_t lo, int64_t hi) {
    for (int64_t s = lo; s < hi; ++s)
      values[s] = host::round_to(out_dtype, gemm_fp8_exact(*this, in[0].values, in[2].values, in[1].values,
                                                           in[3].values, bias, flat[s] / n, flat[s] % n));
  });
  return true;
}

Tolerance GemmFp8Problem::tolerance(int) const {
  // D is rounded once from f32 (kernels) or fp64 (reference): the two may land on neighbouring
  // values, one ulp apart (a library epilogue that rounds before adding bias does the same).
  double rtol = out_dtype == DType::kBF16 ? std::ldexp(1.0, -7) : out_dtype == DType::kF16 ? std::ldexp(1.0, -10) : 1e-5;
  if (small_int) return {0.0, out_dtype == DType::kF32 ? 0.0 : rtol};
  // N(0, 1) data, scales <= 1: |D| ~ sqrt(K). FP8 wgmma adds each k32 step's products into its
  // accumulator with ~14 significant bits (DeepSeek-V3 §3.3.2), which the wgmma rungs bound by
  // promoting every 128-deep block into f32: a block carries ~2^-13 of its partial sum
  // (~sqrt(128)) per step, and the blocks' errors add like a random walk. 2^-7 sqrt(K) is ~10x
  // that, and far below what a missing k-block or a wrong scale gives (~sqrt(128) / 2).
  const double kk = double(std::max<int64_t>(k, 1));
  if (!fast_accum) return {std::ldexp(1.0, -7) * std::sqrt(kk), rtol};
  // fast_accum: one accumulator over all K / 32 steps, each adding ~2^-13 of a partial sum that
  // grows like sqrt(k) (bounded by 3 sqrt(k) here), and truncation, not rounding, so the errors
  // add up rather than walk: 2^-13 x 3 sqrt(32) (K / 32)^1.5 x 2/3. At K = 4096 that is ~2 against
  // |D| ~ 64 (3%); a lost 128-deep k-block still costs ~sqrt(128) = 11.
  return {std::ldexp(1.0, -7) * std::sqrt(kk) + std::ldexp(1.0, -12) * std::sqrt(32.0) * std::pow(kk / 32.0, 1.5),
          rtol};
}

GemmFp8Args GemmFp8Args::bind(const GemmFp8Problem& p, const Operands& ops) {
  GemmFp8Args g;
  g.a = ops.in.at(0).data;
  g.sa = static_cast<const float*>(ops.in.at(1).data);
  g.b = ops.in.at(2).data;
  g.sb = static_cast<const float*>(ops.in.at(3).data);
  if (p.has_bias) g.bias = ops.in.at(4).data;
  g.d = ops.out.at(0).data;
  g.m = p.m, g.n = p.n, g.k = p.k;
  g.a_s0 = p.a_s0, g.a_s1 = p.a_s1, g.b_s0 = p.b_s0, g.b_s1 = p.b_s1, g.ldd = p.ldd;
  g.sa_s0 = p.sa_s0, g.sa_s1 = p.sa_s1, g.sb_s0 = p.sb_s0, g.sb_s1 = p.sb_s1;
  g.a_dtype = p.a_dtype, g.b_dtype = p.b_dtype, g.out_dtype = p.out_dtype;
  g.scaling = p.scaling;
  g.fast_accum = p.fast_accum;
  return g;
}

GemmFp8Problem gemm_fp8_problem_of(const GemmFp8Args& g) {
  GemmFp8Problem p(g.m, g.n, g.k, g.a_dtype, g.b_dtype, g.out_dtype, g.scaling);
  p.a_s0 = g.a_s0, p.a_s1 = g.a_s1, p.b_s0 = g.b_s0, p.b_s1 = g.b_s1, p.ldd = g.ldd;
  p.sa_s0 = g.sa_s0, p.sa_s1 = g.sa_s1, p.sb_s0 = g.sb_s0, p.sb_s1 = g.sb_s1;
  p.has_bias = g.bias != nullptr;
  p.align_bytes = std::min(TensorView(g.a, g.a_dtype, {1}).alignment(), TensorView(g.b, g.b_dtype, {1}).alignment());
  p.d_align_bytes = TensorView(g.d, g.out_dtype, {1}).alignment();
  p.fast_accum = g.fast_accum;
  return p;
}

std::string gemm_fp8_tma_supports(const GemmFp8Problem& p) {
  if (p.align_bytes < 16)
    return fmt::format("gemm_fp8: TMA needs 16-byte aligned A and B, got {}-byte alignment", p.align_bytes);
  auto check = [&](const char* name, int64_t s0, int64_t s1) -> std::string {
    if (s1 != 1)
      return fmt::format("gemm_fp8: FP8 wgmma reads {} K-major: it needs a unit stride along K, got strides [{}, {}]",
                         name, s0, s1);
    if (s0 % 16 != 0) {
      if (s0 == p.k) return fmt::format("gemm_fp8: {}'s rows must be a multiple of 16 bytes for TMA, got K={}", name, p.k);
      return fmt::format("gemm_fp8: {}'s row stride must be a multiple of 16 bytes for TMA, got {}", name, s0);
    }
    return "";
  };
  for (auto why : {check("A", p.a_s0, p.a_s1), check("B", p.b_s0, p.b_s1)})
    if (!why.empty()) return why;
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX)
    return "gemm_fp8: TMA coordinates are 32-bit, got a dimension of 2^31 or more";
  return "";
}

bool gemm_fp8_prefers_split_k(int64_t m, int64_t n, int64_t k) {
  const int64_t tiles = ((m + 127) / 128) * ((n + 127) / 128);
  return tiles <= 32 && (k + kFp8ScaleBlock - 1) / kFp8ScaleBlock >= 16;
}

namespace {

// --- validation shared by hk::gemm_fp8 and make_problem: typed errors naming operand and values

void check_fp8(const char* name, const TensorView& t) {
  if (t.dtype != DType::kF8E4M3 && t.dtype != DType::kF8E5M2)
    HK_THROW(kType, "gemm_fp8: ", name, " is ", to_string(t.dtype), ", expected e4m3 or e5m2");
  if (t.rank() != 2) HK_THROW(kValue, "gemm_fp8: ", name, " must be a matrix, got ", t.describe());
  if (t.numel() > 0 && t.data == nullptr)
    HK_THROW(kValue, "gemm_fp8: ", name, " is a null pointer with ", t.numel(), " elements");
  if (t.stride(0) < 0 || t.stride(1) < 0) HK_THROW(kValue, "gemm_fp8: ", name, " has a negative stride (", t.describe(), ")");
}

// fast_accum only where the scales apply to the whole K (see hk/ops/gemm_fp8.hpp).
void check_fast_accum(const GemmFp8Problem& p) {
  if (p.fast_accum && p.scaling == Fp8Scaling::kBlock)
    HK_THROW(kValue, "gemm_fp8: fast_accum takes per-tensor or row-wise scales; block-wise scales are applied per "
                     "128-deep block of K, which is a promotion into f32");
}

void check_output_dtype(const char* what, DType dt) {
  if (dt != DType::kBF16 && dt != DType::kF16 && dt != DType::kF32)
    HK_THROW(kType, "gemm_fp8: ", what, " is ", to_string(dt), ", expected bf16, f16 or f32");
}

// The scale view's strides, checked against the shape the mode needs.
void check_scale(const char* name, const TensorView& s, Fp8Scaling mode, const std::vector<int64_t>& want,
                 int64_t& s0, int64_t& s1) {
  if (s.dtype != DType::kF32) HK_THROW(kType, "gemm_fp8: ", name, " is ", to_string(s.dtype), ", expected f32");
  const bool ok = mode == Fp8Scaling::kTensor ? (s.rank() <= 1 && s.numel() == 1) : s.shape == want;
  if (!ok)
    HK_THROW(kValue, "gemm_fp8: ", to_string(mode), "-wise ", name, " must be [", shape_to_string(want), "], got [",
             shape_to_string(s.shape), "]");
  if (s.data == nullptr) HK_THROW(kValue, "gemm_fp8: ", name, " is a null pointer");
  s0 = s1 = 0;
  if (mode == Fp8Scaling::kRow) s0 = s.stride(0);
  if (mode == Fp8Scaling::kBlock) s0 = s.stride(0), s1 = s.stride(1);
  if (s0 < 0 || s1 < 0) HK_THROW(kValue, "gemm_fp8: ", name, " has a negative stride (", s.describe(), ")");
}

// The problem posed by the operands, D's layout excepted (the caller sets ldd).
GemmFp8Problem problem_of(const TensorView& a, const TensorView& sa, const TensorView& b, const TensorView& sb,
                          const TensorView* bias, DType out, const Fp8Scaling* scaling) {
  check_fp8("a", a);
  check_fp8("b", b);
  check_output_dtype("d", out);
  const int64_t m = a.size(0), k = a.size(1), n = b.size(0);
  if (b.size(1) != k)
    HK_THROW(kValue, "gemm_fp8: a is [", m, ", ", k, "] and b is [", b.size(0), ", ", b.size(1),
             "] (b is [N, K]): K must match, got ", k, " and ", b.size(1));
  if (k < 1) HK_THROW(kValue, "gemm_fp8: K must be at least 1, got K=0");
  const Fp8Scaling mode = scaling ? *scaling : gemm_fp8_scaling(sa, sb);
  GemmFp8Problem p(m, n, k, a.dtype, b.dtype, out, mode);
  check_scale("sa", sa, mode, fp8_scale_shape(mode, m, k, 1), p.sa_s0, p.sa_s1);
  check_scale("sb", sb, mode, fp8_scale_shape(mode, n, k, int(kFp8ScaleBlock)), p.sb_s0, p.sb_s1);
  // A stride of an extent-1 dim is never stepped over: use the tight one (torch views carry
  // arbitrary values there), so that the TMA rules see the layout that matters.
  p.a_s0 = m == 1 ? k : a.stride(0), p.a_s1 = k == 1 ? 1 : a.stride(1);
  p.b_s1 = k == 1 ? 1 : b.stride(1);
  p.b_s0 = n == 1 ? (p.b_s1 == 1 ? k : 1) : b.stride(0);
  if (bias) {
    const TensorView& v = *bias;
    if (v.dtype != out) HK_THROW(kType, "gemm_fp8: bias is ", to_string(v.dtype), " but d is ", to_string(out));
    if (v.rank() != 1 || v.size(0) != n)
      HK_THROW(kValue, "gemm_fp8: bias must be [", n, "], got [", shape_to_string(v.shape), "]");
    if (!v.is_contiguous()) HK_THROW(kNotSupported, "gemm_fp8: bias must be contiguous, got ", v.describe());
    if (v.numel() > 0 && v.data == nullptr) HK_THROW(kValue, "gemm_fp8: bias is a null pointer with ", v.numel(), " elements");
    p.has_bias = true;
  }
  p.align_bytes = std::min(a.alignment(), b.alignment());
  return p;
}

class GemmFp8Family final : public Family {
 public:
  std::string name() const override { return "gemm_fp8"; }
  std::string summary() const override {
    return "D = sa sb (A B^T) + bias: e4m3/e5m2 in, per-tensor, row-wise or DeepSeek-V3 block-wise (1x128, "
           "128x128) f32 scales, bf16/f16/f32 out";
  }

  std::vector<ProblemPtr> test_problems() const override {
    std::vector<ProblemPtr> out;
    const DType e4 = DType::kF8E4M3, e5 = DType::kF8E5M2, bf = DType::kBF16, f16 = DType::kF16, f32 = DType::kF32;
    const auto T = Fp8Scaling::kTensor, R = Fp8Scaling::kRow, B = Fp8Scaling::kBlock;
    auto add = [&](int64_t m, int64_t n, int64_t k, DType a, DType b, DType o, Fp8Scaling s, bool small,
                   bool bias = false, bool b_kn = false, int64_t pad = 0) {
      auto p = std::make_shared<GemmFp8Problem>(m, n, k, a, b, o, s, b_kn, pad);
      p->small_int = small, p->has_bias = bias;
      out.push_back(p);
      return p;
    };
    // Exact (small integers, integer scales): every mode, dtype pairing and output dtype.
    add(1, 1, 1, e4, e4, bf, T, true);
    add(17, 17, 17, e4, e4, f32, R, true);
    add(129, 129, 129, e4, e5, bf, B, true, true);
    for (auto s : {T, R, B}) {
      add(256, 256, 512, e4, e4, bf, s, true);                // whole tiles
      add(200, 136, 384, e5, e4, f32, s, true, true);         // M and N tails, bias
      add(113, 203, 1001, e4, e4, f16, s, true, false);       // K not a multiple of 16: packed
      add(64, 264, 400, e4, e4, bf, s, true, false, true);    // B stored [K, N]: packed, transposed
    }
    add(72, 200, 272, e4, e4, bf, B, true, true, false, 16);  // padded rows (TMA-friendly)
    add(72, 200, 264, e4, e4, f32, R, true, false, false, 3);  // padded rows (TMA-hostile)
    // Few tiles over a long K (v05 splits K 4 ways; a 48-deep K tail): exact partial sums.
    add(64, 264, 2096, e4, e4, bf, B, true, true);
    add(130, 136, 2096, e5, e4, f32, T, true);
    // Random N(0, 1) data: K-aware tolerance (FP8 wgmma's accumulation), long K.
    add(1000, 1000, 1024, e4, e4, bf, T, false);
    add(1000, 1040, 1152, e4, e4, bf, B, false, true);
    add(257, 384, 4096, e4, e4, f32, R, false);
    add(128, 256, 7168, e4, e5, bf, B, false);
    add(1, 2112, 7168, e4, e4, bf, B, false);                  // a single-token decode
    add(64, 2112, 1040, e4, e4, bf, T, false, true);
    // The accumulation over all of K allowed (fast_accum): per-tensor and row-wise, long K.
    for (auto s : {T, R}) add(256, 384, 4096, e4, e4, bf, s, false, s == R)->fast_accum = true;
    // SM waves of 128 x 128 tiles on 132 SMs: 1.5 and 2.5 waves.
    add(128 * 11, 128 * 18, 256, e4, e4, bf, T, true);
    add(128 * 15, 128 * 22, 512, e4, e4, bf, B, true);
    return out;
  }

  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    // "MxNxK" (per-tensor and block-wise) or "MxNxK:<scaling>" (tensor, row, block).
    struct Shape {
      int64_t m, n, k;
      Fp8Scaling s;
    };
    std::vector<Shape> shapes;
    for (auto& text : sel.shapes) {
      const size_t colon = text.find(':');
      auto v = parse_shape(text.substr(0, colon));
      if (v.size() != 3) HK_THROW(kValue, "gemm_fp8 bench: shape must be MxNxK[:tensor|row|block], got ", text);
      if (colon != std::string::npos) {
        shapes.push_back({v[0], v[1], v[2], parse_fp8_scaling(text.substr(colon + 1))});
      } else {
        shapes.push_back({v[0], v[1], v[2], Fp8Scaling::kTensor});
        shapes.push_back({v[0], v[1], v[2], Fp8Scaling::kBlock});
      }
    }
    if (shapes.empty()) {
      const auto T = Fp8Scaling::kTensor, R = Fp8Scaling::kRow, B = Fp8Scaling::kBlock;
      if (sel.quick) shapes = {{4096, 4096, 4096, T}};
      else
        shapes = {{4096, 4096, 4096, T}, {8192, 8192, 8192, T}, {4096, 4096, 4096, R}, {4096, 4096, 4096, B},
                  {4096, 7168, 16384, B}, {64, 2112, 7168, B}, {128, 7168, 2048, B}};
    }
    std::vector<DType> dtypes = sel.dtypes;
    if (dtypes.empty()) dtypes = {DType::kF8E4M3};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes)
      for (DType dt : dtypes) {
        if (dt != DType::kF8E4M3 && dt != DType::kF8E5M2)
          HK_THROW(kType, "gemm_fp8 bench: dtype ", to_string(dt), " is not e4m3 or e5m2");
        // e5m2 benchmarks pair it with e4m3 weights (gradients times weights), which cuBLASLt runs too.
        out.push_back(std::make_shared<GemmFp8Problem>(s.m, s.n, s.k, dt, DType::kF8E4M3, DType::kBF16, s.s));
      }
    return out;
  }

  // inputs {a [M, K], sa, b [N, K], sb[, bias [N]]}. Attributes (default): scaling (read from the
  // scales' shapes), out_dtype ("bf16"), out_row_stride (N), small_int (false: marks the exact
  // test problems).
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    attrs.expect_only("gemm_fp8", {"scaling", "out_dtype", "out_row_stride", "small_int", "fast_accum"});
    if (in.size() != 4 && in.size() != 5)
      HK_THROW(kValue, "gemm_fp8: takes inputs (a, sa, b, sb[, bias]), got ", in.size());
    const std::string s = attrs.get_string("gemm_fp8", "scaling", "");
    const Fp8Scaling parsed = s.empty() ? Fp8Scaling::kTensor : parse_fp8_scaling(s);
    const DType out = parse_dtype(attrs.get_string("gemm_fp8", "out_dtype", "bf16"));
    check_output_dtype("out_dtype", out);
    GemmFp8Problem p = problem_of(in[0], in[1], in[2], in[3], in.size() == 5 ? &in[4] : nullptr, out,
                                  s.empty() ? nullptr : &parsed);
    p.small_int = attrs.get_bool("gemm_fp8", "small_int", false);
    p.fast_accum = attrs.get_bool("gemm_fp8", "fast_accum", false);
    check_fast_accum(p);
    p.ldd = rows::out_row_stride("gemm_fp8", attrs, p.n);
    return std::make_shared<GemmFp8Problem>(p);
  }
};

HK_REGISTER_FAMILY(GemmFp8Family);

}  // namespace

// --- the public op: validation (shared with make_problem above), then dispatch ----------------

void gemm_fp8(const TensorView& a, const TensorView& sa, const TensorView& b, const TensorView& sb,
              const TensorView& d, const TensorView* bias, cudaStream_t stream) {
  GemmFp8Options o;
  o.bias = bias;
  gemm_fp8(a, sa, b, sb, d, o, stream);
}

void gemm_fp8(const TensorView& a, const TensorView& sa, const TensorView& b, const TensorView& sb,
              const TensorView& d, const GemmFp8Options& options, cudaStream_t stream) {
  const TensorView* bias = options.bias;
  check_output_dtype("d", d.dtype);
  GemmFp8Problem p = problem_of(a, sa, b, sb, bias, d.dtype, nullptr);
  p.fast_accum = options.fast_accum;
  check_fast_accum(p);
  if (d.rank() != 2 || d.size(0) != p.m || d.size(1) != p.n)
    HK_THROW(kValue, "gemm_fp8: d must be [", p.m, ", ", p.n, "], got [", shape_to_string(d.shape), "]");
  if (d.stride(1) != 1 && p.n > 1)
    HK_THROW(kNotSupported, "gemm_fp8: d must be row-major (unit stride along N), got ", d.describe());
  p.ldd = p.m == 1 ? std::max<int64_t>(p.n, d.stride(0)) : d.stride(0);
  if (p.ldd < p.n) HK_THROW(kValue, "gemm_fp8: d's row stride ", p.ldd, " is smaller than N=", p.n, " (", d.describe(), ")");
  if (d.numel() > 0 && d.data == nullptr) HK_THROW(kValue, "gemm_fp8: d is a null pointer with ", d.numel(), " elements");
  p.d_align_bytes = d.alignment();
  Operands ops{{a, sa, b, sb}, {d}};
  if (bias) ops.in.push_back(*bias);
  if (p.m == 0 || p.n == 0) return;  // empty output: a no-op
  Registry::get().pick(p).run(p, ops, stream);
}

}  // namespace hk
