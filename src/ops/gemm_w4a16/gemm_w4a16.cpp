// gemm_w4a16/gemm_w4a16.cpp — the fp64 oracle, the op contract's numbers, the family (test and
// bench shapes), the public entry point hk::gemm_w4a16 and the host-side format helpers (pack,
// unpack, repack, quantize).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/rows.hpp"
#include "core/host.hpp"
#include "gemm_w4a16/gemm_w4a16_op.hpp"

namespace hk {

namespace {

int esize(DType dt) { return dtype_bits(dt) / 8; }

// The stored i32 word of a HostTensor value (the harness keeps every element as a double).
uint32_t word_of(double v) { return static_cast<uint32_t>(static_cast<int32_t>(static_cast<int64_t>(v))); }

}  // namespace

W4A16Problem::W4A16Problem(int64_t m_, int64_t n_, int64_t k_, int64_t group_, DType dt, bool sym, W4A16Layout l,
                           int64_t pad)
    : m(m_), n(n_), k(k_), group(group_), dtype(dt), symmetric(sym), layout(l), ld_x(k_ + pad), ld_y(n_ + pad) {}

int W4A16Problem::x_row_align() const { return rows::row_alignment(align_bytes, {ld_x * esize(dtype)}); }

std::string W4A16Problem::key() const {
  std::string s = fmt::format("m{}_n{}_k{}_g{}_{}", m, n, k, group, to_string(dtype));
  if (symmetric) s += "_sym";
  if (tiled()) s += "_tiled";
  if (ld_x != k || ld_y != n) s += "_strided";
  return s;
}

double W4A16Problem::bytes() const {
  const double e = esize(dtype);
  double b = double(m) * k * e + double(n) * k / 2 + double(n) * groups() * e + double(m) * n * e;
  if (!symmetric) b += double(n) * zero_words() * 4;
  return b;
}

std::vector<TensorSpec> W4A16Problem::inputs() const {
  TensorSpec x{"x", dtype, {m, k}, {ld_x, 1}, Dist::kNormal, 1.0, {}};
  // NaN at row 0, column 1: y's row 0 is NaN, as in fp64.
  if (m >= 2 && k >= 2) x.specials = {{1, std::nan("")}};
  // Packed words: every bit pattern is a valid set of eight 4-bit values (the tiled layout's
  // padding included: it multiplies zero-filled activations or lands in columns never stored).
  const double any_word = 2147483647.0;
  TensorSpec qw{"qweight", DType::kI32, {n, k / 8}, {}, Dist::kSmallInt, any_word, {}};
  if (tiled()) qw.shape = {(n + 7) / 8, k_padded()};
  // Positive scales as quantisers make them, bounded so the tolerance below holds.
  TensorSpec s{"scales", dtype, {n, groups()}, {}, Dist::kPositive, 0.15, {}};
  if (symmetric) return {x, qw, s};
  return {x, qw, s, TensorSpec{"zeros", DType::kI32, {n, zero_words()}, {}, Dist::kSmallInt, any_word, {}}};
}

std::vector<TensorSpec> W4A16Problem::outputs() const {
  return {TensorSpec{"y", dtype, {m, n}, {ld_y, 1}, Dist::kNormal, 1.0, {}}};
}

namespace {

// Row `row` of dequant(W) in fp64, from the harness's logical input values.
void dequant_row(const W4A16Problem& p, const std::vector<HostTensor>& in, int64_t row, std::vector<double>& w) {
  const auto& qw = in[1].values;
  const auto& sc = in[2].values;
  const int64_t words = p.k / 8, kp = p.k_padded(), G = p.groups();
  w.resize(p.k);
  for (int64_t wi = 0; wi < words; ++wi) {
    const int64_t idx = p.tiled() ? w4a16_tiled_index(row, wi, kp) : row * words + wi;
    const uint32_t word = word_of(qw[idx]);
    for (int j = 0; j < 8; ++j) {
      const int64_t kk = wi * 8 + j, g = kk / p.group;
      int z = 8;
      if (!p.symmetric) z = int(word_of(in[3].values[row * p.zero_words() + g / 8]) >> (4 * (g % 8))) & 0xF;
      const int q = int(word >> (4 * j)) & 0xF;
      w[kk] = double(q - z) * sc[row * G + g];
    }
  }
}

}  // namespace

void W4A16Problem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  const auto& x = in[0].values;  // logical [m, k]
  auto& y = out[0].values;       // logical [m, n]
  host::parallel_for(n, [&](int64_t lo, int64_t hi) {
    std::vector<double> w;
    for (int64_t r = lo; r < hi; ++r) {
      dequant_row(*this, in, r, w);
      for (int64_t i = 0; i < m; ++i) {
        const double* xr = x.data() + i * k;
        double acc = 0;
        for (int64_t kk = 0; kk < k; ++kk) acc += xr[kk] * w[kk];
        y[i * n + r] = host::round_to(dtype, acc);  // the kernels round once, from f32
      }
    }
  }, host::grain_for(k * std::max<int64_t>(m, 1)));
}

bool W4A16Problem::reference_at(const std::vector<HostTensor>& in, int, const std::vector<int64_t>& flat,
                                std::vector<double>& values) const {
  const auto& x = in[0].values;
  values.assign(flat.size(), 0.0);
  host::parallel_for(static_cast<int64_t>(flat.size()), [&](int64_t lo, int64_t hi) {
    std::vector<double> w;
    for (int64_t s = lo; s < hi; ++s) {
      const int64_t i = flat[s] / n, r = flat[s] % n;
      dequant_row(*this, in, r, w);
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) acc += x[i * k + kk] * w[kk];
      values[s] = host::round_to(dtype, acc);
    }
  }, host::grain_for(2 * k));
  return true;
}

Tolerance W4A16Problem::tolerance(int) const {
  // The fused rungs and the baseline round each dequantised weight (q - z) * s to x's dtype
  // (unit roundoff u: 2^-8 bf16, 2^-11 f16) before an f32 dot product of K terms. With x ~ N(0,1)
  // and |w| <= 15 * 0.15 (rms about 1), that rounding moves y by about u sqrt(K / 3); 4 u sqrt(K)
  // bounds it over every output of the test shapes. 2^-20 K covers the f32 sum (as gemm), and y
  // is rounded once to its dtype: one ulp relative.
  const double u = dtype == DType::kF16 ? 0x1p-11 : 0x1p-8;
  const double kk = double(std::max<int64_t>(k, 1));
  const double atol = 4.0 * u * std::sqrt(kk) + 0x1p-20 * kk;
  return {atol, dtype == DType::kF16 ? 0x1p-10 : 0x1p-7};
}

Attrs W4A16Problem::attrs() const {
  Attrs a{{"group_size", group}};
  if (tiled()) a.set("layout", std::string("tiled"));
  rows::set_out_row_stride(a, ld_y, n);
  return a;
}

W4A16Args W4A16Args::bind(const W4A16Problem& p, const Operands& ops) {
  W4A16Args a;
  a.x = ops.in.at(0).data;
  a.qweight = static_cast<const int32_t*>(ops.in.at(1).data);
  a.scales = ops.in.at(2).data;
  a.zeros = p.symmetric ? nullptr : static_cast<const int32_t*>(ops.in.at(3).data);
  a.y = ops.out.at(0).data;
  a.m = p.m, a.n = p.n, a.k = p.k, a.group = p.group, a.groups = p.groups();
  a.zero_words = p.zero_words(), a.k_padded = p.k_padded();
  a.ld_x = p.ld_x, a.ld_y = p.ld_y;
  a.dtype = p.dtype;
  a.layout = p.layout;
  return a;
}

namespace {

void check_contiguous(const char* op, const char* name, const TensorView& t, DType dtype,
                      const std::vector<int64_t>& shape) {
  rows::check_dtype(op, name, t, dtype);
  if (t.shape != shape)
    HK_THROW(kValue, op, ": ", name, " has shape [", shape_to_string(t.shape), "], expected [", shape_to_string(shape),
             "]");
  if (!t.is_contiguous()) HK_THROW(kNotSupported, op, ": ", name, " must be contiguous, got ", t.describe());
  rows::check_data(op, name, t);
}

W4A16Layout parse_layout(const char* op, const std::string& name) {
  if (name == "rows") return W4A16Layout::kRows;
  if (name == "tiled") return W4A16Layout::kTiled;
  HK_THROW(kValue, op, ": layout must be \"rows\" (the interchange format) or \"tiled\" (w4a16_repack_tiled), got \"",
           name, "\"");
}

void check_group(const char* op, int64_t k, int64_t g) {
  if (k <= 0 || k % 8 != 0) HK_THROW(kValue, op, ": K must be a positive multiple of 8 (eight values per word), got K=", k);
  if (g <= 0 || (g != k && (g % 32 != 0 || k % g != 0)))
    HK_THROW(kValue, op, ": group_size must be a multiple of 32 that divides K, or K itself, got group_size=", g,
             " with K=", k);
}

// Validation shared by the public op and make_problem. N comes from scales (the tiled qweight
// pads N to a multiple of 8).
W4A16Problem checked_problem(const char* op, const TensorView& x, const TensorView& qw, const TensorView& s,
                             const TensorView* z, int64_t group, W4A16Layout layout) {
  if (x.dtype != DType::kBF16 && x.dtype != DType::kF16)
    HK_THROW(kType, op, ": x is ", to_string(x.dtype), ", expected bf16 or f16");
  if (x.rank() != 2) HK_THROW(kValue, op, ": x must be [M, K], got [", shape_to_string(x.shape), "]");
  const int64_t M = x.shape[0], K = x.shape[1];
  const rows::Layout lx = rows::check_matrix(op, "x", x, x.dtype, M, K);
  check_group(op, K, group);
  if (s.rank() != 2) HK_THROW(kValue, op, ": scales must be [N, K / group_size], got [", shape_to_string(s.shape), "]");
  const int64_t N = s.shape[0];
  W4A16Problem p(M, N, K, group, x.dtype, z == nullptr, layout);
  check_contiguous(op, "scales", s, x.dtype, {N, p.groups()});
  if (layout == W4A16Layout::kTiled)
    check_contiguous(op, "qweight", qw, DType::kI32, {(N + 7) / 8, p.k_padded()});
  else
    check_contiguous(op, "qweight", qw, DType::kI32, {N, K / 8});
  if (z) check_contiguous(op, "zeros", *z, DType::kI32, {N, p.zero_words()});
  p.ld_x = lx.ld;
  p.align_bytes = z ? rows::min_alignment({&x, &qw, &s, z}) : rows::min_alignment({&x, &qw, &s});
  return p;
}

class W4A16Family final : public Family {
 public:
  std::string name() const override { return "gemm_w4a16"; }
  std::string summary() const override {
    return "y = x dequant(W)^T: bf16/f16 activations, 4-bit weights in groups of 32/64/128/K with scales and "
           "4-bit zeros (or symmetric), interchange or fragment-ordered packing";
  }

  std::vector<ProblemPtr> test_problems() const override {
    using L = W4A16Layout;
    const DType bf = DType::kBF16, f16 = DType::kF16;
    struct S {
      int64_t m, n, k, g;
      DType dt;
      bool sym;
      L layout;
      int64_t pad;
    };
    // M in {1, 4, 7, 11, 16, 24, 32, 33, 128}; K an odd multiple of the group (or the group itself); N not a
    // multiple of the tiles (8, 64, 128); every group size, both layouts, both dtypes, both
    // zero-point modes; padded rows of x and y (pad) at 16-byte-keeping and odd strides.
    const std::vector<S> shapes = {
        {1, 96, 160, 32, bf, false, L::kRows, 0},     {1, 200, 384, 128, f16, true, L::kTiled, 0},
        {1, 4104, 640, 128, bf, false, L::kRows, 0},  {1, 260, 200, 200, bf, true, L::kRows, 3},
        {7, 200, 192, 64, f16, true, L::kRows, 8},    {7, 96, 200, 200, bf, false, L::kTiled, 0},
        {7, 1032, 1152, 128, bf, false, L::kTiled, 8},
        {16, 264, 384, 128, bf, false, L::kTiled, 0}, {16, 136, 224, 32, f16, false, L::kRows, 0},
        {16, 2048, 4096, 128, bf, false, L::kRows, 0}, {16, 72, 896, 896, f16, true, L::kTiled, 0},
        // the split-K decode kernel: a partial last k-tile with groups of 32 (two x tiles, 5 rows of
        // padding), groups of 64 in the tiled layout (a lane's words in two groups), a long K
        // over one block of rows (16 splits), four x tiles (M = 24, 32)
        {11, 300, 2080, 32, f16, false, L::kRows, 8}, {4, 200, 1024, 64, bf, false, L::kTiled, 0},
        {1, 40, 8192, 128, bf, true, L::kRows, 0}, {24, 264, 1152, 64, f16, false, L::kRows, 0},
        {32, 136, 640, 128, bf, true, L::kTiled, 0},
        {33, 136, 200, 200, f16, false, L::kRows, 0}, {33, 72, 224, 32, bf, false, L::kTiled, 0},
        {33, 520, 320, 64, bf, true, L::kRows, 5},
        {128, 520, 1152, 128, bf, true, L::kRows, 0}, {128, 264, 320, 64, f16, false, L::kTiled, 0},
        {128, 136, 96, 32, f16, false, L::kRows, 8},  {128, 257, 384, 384, bf, false, L::kTiled, 0},
        {200, 1000, 640, 128, bf, false, L::kRows, 0},
    };
    std::vector<ProblemPtr> out;
    for (auto& s : shapes) out.push_back(std::make_shared<W4A16Problem>(s.m, s.n, s.k, s.g, s.dt, s.sym, s.layout, s.pad));
    return out;
  }

  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    // "MxNxK" (group 128) or "MxNxKxG"; asymmetric; each shape in both layouts (quick: rows).
    std::vector<std::vector<int64_t>> shapes;
    for (auto& s : sel.shapes) {
      auto v = parse_shape(s);
      if (v.size() != 3 && v.size() != 4)
        HK_THROW(kValue, "gemm_w4a16 bench: shape must be MxNxK or MxNxKxG, got ", s);
      shapes.push_back(v);
    }
    if (shapes.empty()) {
      if (sel.quick) shapes = {{1, 4096, 4096}};
      else shapes = {{1, 4096, 4096}, {16, 8192, 8192}, {4096, 4096, 4096}, {1, 8192, 8192}, {64, 4096, 4096}};
    }
    std::vector<DType> dtypes = sel.dtypes;
    if (dtypes.empty()) dtypes = {DType::kBF16};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes)
      for (DType dt : dtypes) {
        if (dt != DType::kBF16 && dt != DType::kF16)
          HK_THROW(kType, "gemm_w4a16 bench: dtype ", to_string(dt), " is not bf16 or f16");
        const int64_t g = s.size() == 4 ? s[3] : 128;
        check_group("gemm_w4a16 bench", s[2], g);
        out.push_back(std::make_shared<W4A16Problem>(s[0], s[1], s[2], g, dt, false, W4A16Layout::kRows));
        if (!sel.quick)
          out.push_back(std::make_shared<W4A16Problem>(s[0], s[1], s[2], g, dt, false, W4A16Layout::kTiled));
      }
    return out;
  }

  // inputs {x, qweight, scales[, zeros]} (no zeros: symmetric). Attributes (default):
  // group_size (128), layout ("rows"; "tiled"), out_row_stride (N: y's row stride).
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    const char* op = "gemm_w4a16";
    attrs.expect_only(op, {"group_size", "layout", "out_row_stride"});
    if (in.size() != 3 && in.size() != 4)
      HK_THROW(kValue, op, ": takes inputs (x, qweight, scales[, zeros]), got ", in.size());
    const int64_t g = attrs.get_int(op, "group_size", 128);
    const W4A16Layout layout = parse_layout(op, attrs.get_string(op, "layout", "rows"));
    auto p = std::make_shared<W4A16Problem>(
        checked_problem(op, in[0], in[1], in[2], in.size() == 4 ? &in[3] : nullptr, g, layout));
    p->ld_y = rows::out_row_stride(op, attrs, p->n);
    return p;
  }
};

HK_REGISTER_FAMILY(W4A16Family);

}  // namespace

void gemm_w4a16(const TensorView& x, const TensorView& qweight, const TensorView& scales, const TensorView* zeros,
                const TensorView& y, const W4A16Options& opt, cudaStream_t stream) {
  const char* op = "gemm_w4a16";
  W4A16Problem p = checked_problem(op, x, qweight, scales, zeros, opt.group_size, opt.layout);
  p.ld_y = rows::check_matrix(op, "y", y, x.dtype, p.m, p.n).ld;
  if (p.m == 0 || p.n == 0) return;
  Operands ops{{x, qweight, scales}, {y}};
  if (zeros) ops.in.push_back(*zeros);
  Registry::get().pick(p).run(p, ops, stream);
}

// ---- host-side format helpers ------------------------------------------------------------------

namespace {
void check_nk(const char* op, int64_t n, int64_t k, size_t have, int64_t want, const char* what) {
  if (n < 0 || k < 0 || k % 8 != 0) HK_THROW(kValue, op, ": needs N >= 0 and K a multiple of 8, got N=", n, " K=", k);
  if (int64_t(have) != want) HK_THROW(kValue, op, ": ", what, " has ", have, " elements, expected ", want);
}
}  // namespace

std::vector<int32_t> w4a16_pack(const std::vector<uint8_t>& q, int64_t n, int64_t k) {
  check_nk("w4a16_pack", n, k, q.size(), n * k, "q");
  std::vector<int32_t> out(size_t(n * (k / 8)), 0);
  for (int64_t i = 0; i < n * k; ++i) {
    if (q[i] > 15) HK_THROW(kValue, "w4a16_pack: values must be in [0, 15], got ", int(q[i]), " at ", i);
    uint32_t& w = reinterpret_cast<uint32_t&>(out[i / 8]);
    w |= uint32_t(q[i]) << (4 * (i % 8));
  }
  return out;
}

std::vector<uint8_t> w4a16_unpack(const std::vector<int32_t>& qw, int64_t n, int64_t k) {
  check_nk("w4a16_unpack", n, k, qw.size(), n * (k / 8), "qweight");
  std::vector<uint8_t> q(size_t(n * k));
  for (int64_t i = 0; i < n * k; ++i) q[i] = uint8_t((uint32_t(qw[i / 8]) >> (4 * (i % 8))) & 0xF);
  return q;
}

std::vector<int32_t> w4a16_pack_zeros(const std::vector<uint8_t>& z, int64_t n, int64_t groups) {
  if (n < 0 || groups < 0 || int64_t(z.size()) != n * groups)
    HK_THROW(kValue, "w4a16_pack_zeros: z has ", z.size(), " elements, expected N*G = ", n, "*", groups);
  const int64_t words = (groups + 7) / 8;
  std::vector<int32_t> out(size_t(n * words), 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t v = z[r * groups + g];
      if (v > 15) HK_THROW(kValue, "w4a16_pack_zeros: values must be in [0, 15], got ", int(v));
      reinterpret_cast<uint32_t&>(out[r * words + g / 8]) |= uint32_t(v) << (4 * (g % 8));
    }
  return out;
}

std::vector<uint8_t> w4a16_unpack_zeros(const std::vector<int32_t>& zeros, int64_t n, int64_t groups) {
  const int64_t words = (groups + 7) / 8;
  if (n < 0 || groups < 0 || int64_t(zeros.size()) != n * words)
    HK_THROW(kValue, "w4a16_unpack_zeros: zeros has ", zeros.size(), " elements, expected N*ceil(G/8) = ", n * words);
  std::vector<uint8_t> z(size_t(n * groups));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < groups; ++g)
      z[r * groups + g] = uint8_t((uint32_t(zeros[r * words + g / 8]) >> (4 * (g % 8))) & 0xF);
  return z;
}

std::vector<int32_t> w4a16_repack_tiled(const std::vector<int32_t>& qw, int64_t n, int64_t k) {
  check_nk("w4a16_repack_tiled", n, k, qw.size(), n * (k / 8), "qweight");
  const int64_t kp = (k + 127) / 128 * 128, words = k / 8;
  std::vector<int32_t> out(size_t((n + 7) / 8 * kp), 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t w = 0; w < words; ++w) out[w4a16_tiled_index(r, w, kp)] = qw[r * words + w];
  return out;
}

std::vector<int32_t> w4a16_unrepack_tiled(const std::vector<int32_t>& tiled, int64_t n, int64_t k) {
  const int64_t kp = (k + 127) / 128 * 128, words = k / 8;
  check_nk("w4a16_unrepack_tiled", n, k, tiled.size(), (n + 7) / 8 * kp, "tiled");
  std::vector<int32_t> out(size_t(n * words));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t w = 0; w < words; ++w) out[r * words + w] = tiled[w4a16_tiled_index(r, w, kp)];
  return out;
}

W4A16Quantized w4a16_quantize(const std::vector<float>& w, int64_t n, int64_t k, int64_t group, bool symmetric) {
  const char* op = "w4a16_quantize";
  if (n < 0 || int64_t(w.size()) != n * k) HK_THROW(kValue, op, ": w has ", w.size(), " elements, expected N*K");
  check_group(op, k, group);
  const int64_t G = k / group;
  std::vector<uint8_t> q(size_t(n * k)), z(size_t(n * G));
  W4A16Quantized out;
  out.scales.resize(size_t(n * G));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < G; ++g) {
      const float* src = w.data() + r * k + g * group;
      float lo = 0.f, hi = 0.f;  // the range includes 0, as GPTQ's does
      for (int64_t i = 0; i < group; ++i) {
        if (!std::isfinite(src[i])) HK_THROW(kValue, op, ": w has a non-finite value at row ", r);
        lo = std::min(lo, src[i]), hi = std::max(hi, src[i]);
      }
      float s;
      int zero;
      if (symmetric) {
        s = std::max(-lo, hi) / 7.5f;
        zero = 8;
      } else {
        s = (hi - lo) / 15.f;
        zero = s > 0 ? int(std::lround(-lo / s)) : 8;
        zero = std::clamp(zero, 0, 15);
      }
      if (!(s > 0)) s = 1.f;
      out.scales[r * G + g] = s;
      z[r * G + g] = uint8_t(zero);
      for (int64_t i = 0; i < group; ++i) {
        const long v = std::lround(src[i] / s) + zero;
        q[r * k + g * group + i] = uint8_t(std::clamp<long>(v, 0, 15));
      }
    }
  out.qweight = w4a16_pack(q, n, k);
  if (!symmetric) out.zeros = w4a16_pack_zeros(z, n, G);
  return out;
}

}  // namespace hk
