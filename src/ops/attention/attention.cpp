// attention/attention.cpp — the fp64 oracle (rung 1: materialised scores, one row or column at a
// time), the op contract's numbers, the family (test and bench shapes) and the public entry
// points hk::attention / hk::attention_backward.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "attention/attention_op.hpp"
#include "core/host.hpp"

namespace hk {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

AttentionProblem::AttentionProblem(int64_t b, int64_t s_q, int64_t s_k, int64_t h_q, int64_t h_kv, int64_t d,
                                   DType dt, bool bwd, AttentionLayout lay)
    : batch(b), seqlen_q(s_q), seqlen_k(s_k), heads_q(h_q), heads_kv(h_kv), head_dim(d), dtype(dt), layout(lay),
      backward(bwd) {
  scale = default_scale();
  reset_strides();
}

AttentionProblem AttentionProblem::varlen(const std::vector<int64_t>& lens_q, const std::vector<int64_t>& lens_k,
                                          int64_t h_q, int64_t h_kv, int64_t d, DType dt, bool bwd) {
  if (lens_q.size() != lens_k.size())
    HK_THROW(kValue, "attention_varlen: ", lens_q.size(), " query lengths but ", lens_k.size(), " key lengths");
  AttentionProblem p;
  p.batch = int64_t(lens_q.size()), p.heads_q = h_q, p.heads_kv = h_kv, p.head_dim = d, p.dtype = dt;
  p.backward = bwd;
  p.layout = AttentionLayout::kTHD;
  p.cu_q = {0}, p.cu_k = {0};
  p.seqlen_q = p.seqlen_k = 0;
  for (size_t b = 0; b < lens_q.size(); ++b) {
    if (lens_q[b] < 0 || lens_k[b] < 0) HK_THROW(kValue, "attention_varlen: negative length for sequence ", b);
    p.cu_q.push_back(p.cu_q.back() + lens_q[b]);
    p.cu_k.push_back(p.cu_k.back() + lens_k[b]);
    p.seqlen_q = std::max(p.seqlen_q, lens_q[b]);
    p.seqlen_k = std::max(p.seqlen_k, lens_k[b]);
  }
  p.total_q = p.cu_q.back(), p.total_k = p.cu_k.back();
  p.scale = p.default_scale();
  p.reset_strides();
  return p;
}

double AttentionProblem::default_scale() const { return 1.0 / std::sqrt(double(std::max<int64_t>(head_dim, 1))); }

AttnStrides AttentionProblem::default_strides(bool kv) const {
  const int64_t s = kv ? seqlen_k : seqlen_q, h = kv ? heads_kv : heads_q, d = head_dim;
  if (layout == AttentionLayout::kTHD) return {0, h * d, d};
  if (layout == AttentionLayout::kBSHD) return {s * h * d, h * d, d};
  return {h * s * d, d, s * d};
}

void AttentionProblem::reset_strides() {
  str_q = str_o = str_do = str_dq = default_strides(false);
  str_k = str_v = str_dk = str_dv = default_strides(true);
}

double AttentionProblem::attended_pairs() const {
  if (!masked()) return double(seqlen_q) * double(seqlen_k);
  double n = 0;
  for (int64_t i = 0; i < seqlen_q; ++i) {
    KeyRange r = keys(i);
    n += double(std::max<int64_t>(0, r.hi - r.lo + 1));
  }
  return n;
}

std::string AttentionProblem::rows_16b() const {
  if (align_bytes < 16)
    return fmt::format("needs 16-byte aligned operands for cp.async, got {}-byte alignment", align_bytes);
  struct Op { const char* name; const AttnStrides* s; bool kv; };
  std::vector<Op> ops = {{"q", &str_q, false}, {"k", &str_k, true}, {"v", &str_v, true}, {"o", &str_o, false}};
  if (backward)
    ops.insert(ops.end(), {{"dout", &str_do, false}, {"dq", &str_dq, false}, {"dk", &str_dk, true}, {"dv", &str_dv, true}});
  for (const Op& op : ops) {
    // A dimension of extent 1 is never stepped over: its stride (often arbitrary in a torch view)
    // does not matter.
    const int64_t s_ext = op.kv ? rows_k() : rows_q(), h_ext = op.kv ? heads_kv : heads_q;
    auto ok = [](int64_t stride, int64_t extent) { return extent <= 1 || stride % 8 == 0; };
    if (!ok(op.s->b, batch) || !ok(op.s->s, s_ext) || !ok(op.s->h, h_ext))
      return fmt::format("{}'s strides (b {}, s {}, h {}) are not all multiples of 8 elements (16-byte rows)",
                         op.name, op.s->b, op.s->s, op.s->h);
  }
  return "";
}

std::string AttentionProblem::key() const {
  // thd: B sequences of at most Sq / Sk rows packed into total_q / total_k (the lengths
  // themselves live in cu_seqlens, not in the key: a problem built from views does not know them).
  std::string k = is_varlen() ? fmt::format("thd{}x{}x{}_t{}x{}_h{}x{}_d{}_{}", batch, seqlen_q, seqlen_k, total_q,
                                            total_k, heads_q, heads_kv, head_dim, to_string(dtype))
                              : fmt::format("{}x{}x{}_h{}x{}_d{}_{}", batch, seqlen_q, seqlen_k, heads_q, heads_kv,
                                            head_dim, to_string(dtype));
  if (layout == AttentionLayout::kBHSD) k += "_bhsd";
  if (causal) k += "_causal";
  if (window_left >= 0 || window_right >= 0) k += fmt::format("_w{}x{}", window_left, window_right);
  if (softcap > 0) k += fmt::format("_cap{:g}", softcap);
  if (scale != default_scale()) k += fmt::format("_s{:g}", scale);
  auto strides = [&](const char* name, const AttnStrides& s, bool kv) {
    AttnStrides d = default_strides(kv);
    if (!(s == d)) k += fmt::format("_{}{}.{}.{}", name, s.b, s.s, s.h);
  };
  strides("q", str_q, false);
  strides("k", str_k, true);
  strides("v", str_v, true);
  if (backward) {
    strides("o", str_o, false);
    strides("do", str_do, false);
    strides("dq", str_dq, false);
    strides("dk", str_dk, true);
    strides("dv", str_dv, true);
    if (deterministic) k += "_det";
  } else {
    strides("o", str_o, false);
  }
  return k + (backward ? "_bwd" : "_fwd");
}

// FlashAttention's convention: 4 B Hq Sq Sk D forward (two GEMMs), halved for causal at Sq = Sk;
// windows count the attended pairs. Backward: 2.5x (five GEMMs, two of them the recomputation).
// thd: the sum over the sequences when their lengths are known on the host, else every sequence
// counted at the maxima (an upper bound).
double AttentionProblem::flops() const {
  auto pairs_of = [&](int64_t sq, int64_t sk) {
    if (causal && window_left < 0 && sq == sk) return double(sq) * double(sk) / 2;
    if (!masked()) return double(sq) * double(sk);
    double n = 0;
    for (int64_t i = 0; i < sq; ++i) {
      const KeyRange r = attn_key_range(i, sq, sk, window_left, eff_window_right());
      n += double(std::max<int64_t>(0, r.hi - r.lo + 1));
    }
    return n;
  };
  double pairs = 0;
  if (is_varlen() && int64_t(cu_q.size()) == batch + 1)
    for (int64_t b = 0; b < batch; ++b) pairs += pairs_of(seq_q(b), seq_k(b));
  else
    pairs = double(batch) * pairs_of(seqlen_q, seqlen_k);
  const double f = 4.0 * double(heads_q) * pairs * double(head_dim);
  return backward ? 2.5 * f : f;
}

double AttentionProblem::bytes() const {
  const double e = dtype_bits(dtype) / 8;
  const double rq = is_varlen() ? double(total_q) : double(batch) * seqlen_q;
  const double rk = is_varlen() ? double(total_k) : double(batch) * seqlen_k;
  const double qn = rq * heads_q * head_dim, kn = rk * heads_kv * head_dim;
  const double lse = rq * heads_q * 4;
  const double eo = dtype == DType::kF8E4M3 ? 2 : e;    // e4m3 in, bf16 out
  if (!backward) return e * (qn + 2 * kn) + eo * qn + lse;  // q, k, v read; o written
  return e * (3 * qn + 2 * kn) + lse + e * (qn + 2 * kn);  // q, k, v, o, dout read; dq, dk, dv written
}

double AttentionProblem::unit_roundoff() const { return dtype == DType::kF16 ? 0x1p-11 : 0x1p-8; }

namespace {

std::vector<int64_t> logical_shape(const AttentionProblem& p, bool kv) {
  const int64_t s = kv ? p.seqlen_k : p.seqlen_q, h = kv ? p.heads_kv : p.heads_q;
  if (p.is_varlen()) return {kv ? p.total_k : p.total_q, h, p.head_dim};
  if (p.layout == AttentionLayout::kBSHD) return {p.batch, s, h, p.head_dim};
  return {p.batch, h, s, p.head_dim};
}

TensorSpec spec(const AttentionProblem& p, const char* name, bool kv, const AttnStrides& s, Dist dist, double scale,
               DType dtype) {
  TensorSpec t{name, dtype, logical_shape(p, kv), {}, dist, scale, {}};
  if (!(s == p.default_strides(kv))) {
    if (p.is_varlen()) t.strides = {s.s, s.h, 1};
    else if (p.layout == AttentionLayout::kBSHD) t.strides = {s.b, s.s, s.h, 1};
    else t.strides = {s.b, s.h, s.s, 1};
  }
  return t;
}
TensorSpec spec(const AttentionProblem& p, const char* name, bool kv, const AttnStrides& s, Dist dist, double scale) {
  return spec(p, name, kv, s, dist, scale, p.dtype);
}

// Flat logical index of element (b, s, h, d) of a q-like or k-like tensor; thd: row s of
// sequence b is packed row row0[b] + s.
struct Index {
  int64_t S, H, D;
  AttentionLayout layout;
  const std::vector<int64_t>* row0;
  int64_t operator()(int64_t b, int64_t s, int64_t h, int64_t d) const {
    if (layout == AttentionLayout::kTHD) return (((*row0)[b] + s) * H + h) * D + d;
    if (layout == AttentionLayout::kBSHD) return ((b * S + s) * H + h) * D + d;
    return ((b * H + h) * S + s) * D + d;
  }
};

// thd: the first rows and lengths of the sequences from a cu_seqlens input, every value checked
// (the device path cannot afford to read them; the reference can).
void read_cu_seqlens(const HostTensor& t, const char* name, int64_t batch, int64_t total, int64_t max_len,
                     std::vector<int64_t>& first, std::vector<int64_t>& len) {
  const auto& v = t.values;
  if (int64_t(v.size()) != batch + 1)
    HK_THROW(kValue, "attention_varlen: ", name, " has ", v.size(), " entries, expected B + 1 = ", batch + 1);
  first.assign(batch, 0), len.assign(batch, 0);
  for (int64_t b = 0; b <= batch; ++b) {
    if (v[b] != std::floor(v[b]) || v[b] < 0 || v[b] > double(total))
      HK_THROW(kValue, "attention_varlen: ", name, "[", b, "] = ", v[b], " is not a row index in [0, ", total, "]");
    if (b > 0 && v[b] < v[b - 1])
      HK_THROW(kValue, "attention_varlen: ", name, " is not non-decreasing: [", b - 1, "] = ", v[b - 1], " > [", b,
               "] = ", v[b]);
  }
  for (int64_t b = 0; b < batch; ++b) {
    first[b] = int64_t(v[b]), len[b] = int64_t(v[b + 1]) - int64_t(v[b]);
    if (len[b] > max_len)
      HK_THROW(kValue, "attention_varlen: sequence ", b, " has ", len[b], " rows in ", name, ", more than max_seqlen ",
               max_len);
  }
}

// The row and column computations both the full and the sampled reference use, so the two give
// the same values bit for bit.
struct Oracle {
  const AttentionProblem& p;
  const std::vector<HostTensor>& in;
  // per sequence: first packed row (thd; 0 otherwise) and length, of the queries and the keys
  std::vector<int64_t> q0, k0, sq, sk;
  Index iq, ik;
  int64_t D;
  Oracle(const AttentionProblem& prob, const std::vector<HostTensor>& inputs)
      : p(prob), in(inputs),
        iq{prob.seqlen_q, prob.heads_q, prob.head_dim, prob.layout, &q0},
        ik{prob.seqlen_k, prob.heads_kv, prob.head_dim, prob.layout, &k0},
        D(prob.head_dim) {
    if (p.is_varlen()) {
      const size_t cu = p.backward || p.dtype == DType::kF8E4M3 ? 6 : 3;  // after lse, or the e4m3 descales
      if (in.size() < cu + 2) HK_THROW(kValue, "attention_varlen: the reference needs cu_seqlens_q and cu_seqlens_k");
      read_cu_seqlens(in[cu], "cu_seqlens_q", p.batch, p.total_q, p.seqlen_q, q0, sq);
      read_cu_seqlens(in[cu + 1], "cu_seqlens_k", p.batch, p.total_k, p.seqlen_k, k0, sk);
    } else {
      q0.assign(p.batch, 0), k0.assign(p.batch, 0), sq.assign(p.batch, p.seqlen_q), sk.assign(p.batch, p.seqlen_k);
    }
  }

  KeyRange keys(int64_t b, int64_t i) const {
    return attn_key_range(i, sq[b], sk[b], p.window_left, p.eff_window_right());
  }
  // lse's element of row i of sequence b, head h: [B, Hq, Sq] or, thd, [Hq, total_q].
  int64_t lse_at(int64_t b, int64_t h, int64_t i) const {
    return p.is_varlen() ? h * p.total_q + q0[b] + i : (b * p.heads_q + h) * p.seqlen_q + i;
  }
  const double* q(int64_t b, int64_t i, int64_t h) const { return in[0].values.data() + iq(b, i, h, 0); }
  const double* k(int64_t b, int64_t j, int64_t hk) const { return in[1].values.data() + ik(b, j, hk, 0); }
  const double* v(int64_t b, int64_t j, int64_t hk) const { return in[2].values.data() + ik(b, j, hk, 0); }
  // e4m3 forward: the descales of (b, kv head hk), inputs 3-5 ([B, Hkv]); 1 otherwise.
  double descale(int which, int64_t b, int64_t hk) const {
    return p.dtype == DType::kF8E4M3 ? in[3 + which].values[b * p.heads_kv + hk] : 1.0;
  }
  const double* o(int64_t b, int64_t i, int64_t h) const { return in[3].values.data() + iq(b, i, h, 0); }
  const double* dout(int64_t b, int64_t i, int64_t h) const { return in[4].values.data() + iq(b, i, h, 0); }
  double lse_in(int64_t b, int64_t h, int64_t i) const { return in[5].values[lse_at(b, h, i)]; }

  static double dot(const double* a, const double* b, int64_t n) {
    double s = 0;
    for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
    return s;
  }
  // The score after scale and softcap; t receives tanh(raw / softcap) (0 without softcap).
  double score(int64_t b, int64_t i, int64_t h, int64_t j, double* t = nullptr) const {
    const int64_t hk = h / p.group();
    double s = p.scale * descale(0, b, hk) * descale(1, b, hk) * dot(q(b, i, h), k(b, j, hk), D);
    if (p.softcap > 0) {
      const double th = std::tanh(s / p.softcap);
      if (t) *t = th;
      s = p.softcap * th;
    }
    return s;
  }

  // Forward row (b, h, i): o_row[D] and the lse.
  void fwd_row(int64_t b, int64_t h, int64_t i, double* o_row, double& lse) const {
    const KeyRange r = keys(b, i);
    std::fill(o_row, o_row + D, 0.0);
    if (r.lo > r.hi) {
      lse = -kInf;
      return;
    }
    std::vector<double> s(r.hi - r.lo + 1);
    double m = -kInf;
    for (int64_t j = r.lo; j <= r.hi; ++j) m = std::max(m, s[j - r.lo] = score(b, i, h, j));
    double sum = 0;
    for (int64_t j = r.lo; j <= r.hi; ++j) {
      const double e = std::exp(s[j - r.lo] - m);
      sum += e;
      const double* vr = v(b, j, h / p.group());
      for (int64_t d = 0; d < D; ++d) o_row[d] += e * vr[d];
    }
    const double dv = descale(2, b, h / p.group());
    for (int64_t d = 0; d < D; ++d) o_row[d] *= dv / sum;
    lse = m + std::log(sum);
  }

  // Backward pieces. P_ij = exp(S_ij - lse_i) from the given lse; dS_ij = P_ij (dP_ij - Delta_i)
  // times the softcap's derivative (1 - t^2), with dP_ij = dout_i . v_j, Delta_i = dout_i . o_i.
  double delta(int64_t b, int64_t h, int64_t i) const { return dot(dout(b, i, h), o(b, i, h), D); }
  void p_ds(int64_t b, int64_t h, int64_t i, int64_t j, double dlt, double& pij, double& ds) const {
    double t = 0;
    const double s = score(b, i, h, j, &t);
    pij = std::exp(s - lse_in(b, h, i));
    const double dp = dot(dout(b, i, h), v(b, j, h / p.group()), D);
    ds = pij * (dp - dlt);
    if (p.softcap > 0) ds *= 1 - t * t;
  }
  void dq_row(int64_t b, int64_t h, int64_t i, double* dq) const {
    std::fill(dq, dq + D, 0.0);
    const KeyRange r = keys(b, i);
    if (r.lo > r.hi) return;
    const double dlt = delta(b, h, i);
    for (int64_t j = r.lo; j <= r.hi; ++j) {
      double pij, ds;
      p_ds(b, h, i, j, dlt, pij, ds);
      const double* kr = k(b, j, h / p.group());
      for (int64_t d = 0; d < D; ++d) dq[d] += p.scale * ds * kr[d];
    }
  }
  // dk, dv of key j of kv head hk: over the group's query heads and every row attending j.
  // `deltas` holds Delta for (h, i) of sequence b, h over all query heads (deltas(b)).
  void dkv_col(int64_t b, int64_t hk, int64_t j, const double* deltas, double* dk, double* dv) const {
    std::fill(dk, dk + D, 0.0);
    std::fill(dv, dv + D, 0.0);
    const int64_t g = p.group();
    for (int64_t h = hk * g; h < (hk + 1) * g; ++h) {
      for (int64_t i = 0; i < sq[b]; ++i) {
        const KeyRange r = keys(b, i);
        if (j < r.lo || j > r.hi) continue;
        double pij, ds;
        p_ds(b, h, i, j, deltas[h * sq[b] + i], pij, ds);
        const double *qr = q(b, i, h), *dor = dout(b, i, h);
        for (int64_t d = 0; d < D; ++d) {
          dk[d] += p.scale * ds * qr[d];
          dv[d] += pij * dor[d];
        }
      }
    }
  }
  std::vector<double> deltas(int64_t b) const {
    std::vector<double> out(p.heads_q * sq[b]);
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < sq[b]; ++i) out[h * sq[b] + i] = delta(b, h, i);
    return out;
  }
  // Every (sequence, row) pair of the queries (kv = false) or the keys, in sequence order.
  std::vector<std::pair<int64_t, int64_t>> rows(bool kv) const {
    std::vector<std::pair<int64_t, int64_t>> r;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < (kv ? sk[b] : sq[b]); ++i) r.emplace_back(b, i);
    return r;
  }
};

// Over the finite, non-zero values: rows with no key (O = 0) and keys no row attends (dK = dV =
// 0) are exact in every kernel and would only dilute the scale of the others.
double rms_of(const double* v, int64_t n) {
  double s = 0;
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(v[i]) && v[i] != 0) s += v[i] * v[i], ++c;
  return c ? std::sqrt(s / double(c)) : 0.0;
}

}  // namespace

std::vector<TensorSpec> AttentionProblem::inputs() const {
  // Backward: q uniform in [-1, 1], so that a row's scores scale q.k (k N(0, 1)) have variance
  // scale^2 |q|^2 <= scale^2 D, the variance the made-up lse below assumes. With q N(0, 1) a row
  // at small D could have several times that (|q|^2 is chi-square with D degrees of freedom:
  // above 10 in 0.2% of rows at D = 1) and P far past 1: 2% of fresh draws of a D = 1 backward
  // missed the tolerance by up to 1.8x (dq, dk, dv; H200, 300 draws).
  std::vector<TensorSpec> in = {spec(*this, "q", false, str_q, backward ? Dist::kUniform : Dist::kNormal, 1.0),
                                spec(*this, "k", true, str_k, Dist::kNormal, 1.0),
                                spec(*this, "v", true, str_v, Dist::kNormal, 1.0)};
  // thd: the prefix sums, written in full when known (all zero, B empty sequences, otherwise).
  const bool cu_known = is_varlen() && int64_t(cu_q.size()) == batch + 1 && int64_t(cu_k.size()) == batch + 1;
  auto add_cu = [&] {
    if (!is_varlen()) return;
    for (int kv = 0; kv < 2; ++kv) {
      TensorSpec t{kv ? "cu_seqlens_k" : "cu_seqlens_q", DType::kI32, {batch + 1}, {}, Dist::kSmallInt, 0.0, {}};
      if (cu_known)
        for (int64_t b = 0; b <= batch; ++b) t.specials.push_back({b, double(kv ? cu_k[b] : cu_q[b])});
      in.push_back(t);
    }
  };
  if (!backward) {
    if (dtype == DType::kF8E4M3)  // per (batch, kv head) descales, positive
      for (const char* name : {"q_descale", "k_descale", "v_descale"})
        in.push_back(TensorSpec{name, DType::kF32, {batch, heads_kv}, {}, Dist::kPositive, 2.0, {}});
    add_cu();
    return in;
  }
  in.push_back(spec(*this, "o", false, str_o, Dist::kNormal, 0.5));
  in.push_back(spec(*this, "dout", false, str_do, Dist::kNormal, 1.0));
  // lse as the forward would give it on average: with k N(0, 1) and |q|^2 <= D, a score scale q.k
  // has variance at most scale^2 D (at most softcap^2 once capped), and the log-sum-exp of n such scores is
  // about log(n) + variance / 2. P's rows then sum to about 1 and stay below 1, as a real
  // forward's do; -inf for rows with no key. A fixed log(n) + 1/2 (right only at the default
  // scale) let P reach e^2.6 at scale 0.3, D = 96, where the bf16 rounding of dS grew past the
  // tolerance on some draws; random values would make P arbitrary and the gradients meaningless.
  std::vector<int64_t> lse_shape = is_varlen() ? std::vector<int64_t>{heads_q, total_q}
                                               : std::vector<int64_t>{batch, heads_q, seqlen_q};
  TensorSpec lse{"lse", DType::kF32, lse_shape, {}, Dist::kNormal, 1.0, {}};
  double var = scale * scale * double(head_dim);
  if (softcap > 0) var = std::min(var, softcap * softcap);
  // At large variances the log-sum-exp is the row's largest score, about sigma sqrt(2 log n), and
  // a row whose largest score lies a sigma or two above that had P past 1 (e^1.1 at scale 0.3,
  // D = 96), where dS's bf16 rounding grew past the tolerance on some draws (a real forward's P
  // never exceeds 1). One sigma more keeps P at or below 1 on all but rare rows. A row with few
  // keys has a log-sum-exp as spread as its scores (one key: the score itself, P = 1), so its
  // margin grows to 3 sigma at n = 1: a causal problem's first row had P = e^1.5 with a margin
  // of one sigma, and the bf16 rounding of its dS (up to 36) cost the key it sees 1.05x the dK
  // bound (2x520x520, D = 64; an emulation of the kernels' rounding reproduced the kernel's
  // value bit for bit).
  const double sigma = std::sqrt(var);
  auto lse_of = [&](const KeyRange& r) {
    const int64_t n = r.hi - r.lo + 1;
    if (n <= 0) return -kInf;
    const double log_n = std::log(double(n));
    return std::max(log_n + 0.5 * var, sigma * std::sqrt(2.0 * log_n)) + sigma * (1.0 + 2.0 / std::sqrt(double(n)));
  };
  if (!synthesize_lse) {
    // lse comes from the caller: the spec's shape and dtype are all it needs to say
  } else if (!is_varlen()) {
    for (int64_t i = 0; i < seqlen_q; ++i) {
      const double val = lse_of(keys(i));
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < heads_q; ++h) lse.specials.push_back({(b * heads_q + h) * seqlen_q + i, val});
    }
  } else if (cu_known) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < seq_q(b); ++i) {
        const double val = lse_of(keys(b, i));
        for (int64_t h = 0; h < heads_q; ++h) lse.specials.push_back({h * total_q + cu_q[b] + i, val});
      }
  }
  in.push_back(lse);
  add_cu();
  return in;
}

std::vector<TensorSpec> AttentionProblem::outputs() const {
  if (!backward) {
    std::vector<int64_t> lse_shape = is_varlen() ? std::vector<int64_t>{heads_q, total_q}
                                                 : std::vector<int64_t>{batch, heads_q, seqlen_q};
    const DType o_dtype = dtype == DType::kF8E4M3 ? DType::kBF16 : dtype;  // e4m3 in, bf16 out
    return {spec(*this, "o", false, str_o, Dist::kNormal, 1.0, o_dtype),
            TensorSpec{"lse", DType::kF32, lse_shape, {}, Dist::kNormal, 1.0, {}}};
  }
  return {spec(*this, "dq", false, str_dq, Dist::kNormal, 1.0), spec(*this, "dk", true, str_dk, Dist::kNormal, 1.0),
          spec(*this, "dv", true, str_dv, Dist::kNormal, 1.0)};
}

// e4m3: the largest |descale x v| (the tolerance's scale); 1 for the 16-bit dtypes.
void AttentionProblem::note_v_absmax(const std::vector<HostTensor>& in) const {
  v_absmax = 1.0;
  if (dtype != DType::kF8E4M3 || backward) return;
  double dmax = 0, vmax = 0;
  for (double x : in[5].values) dmax = std::max(dmax, std::abs(x));
  for (double x : in[2].values) vmax = std::max(vmax, std::abs(x));
  v_absmax = dmax * vmax;
}

// Row by row (forward, dq) and key column by key column (dk, dv), over every sequence. thd rows
// outside every sequence (before cu[0] or past cu[B]) get O = 0, lse = -inf and zero gradients.
void AttentionProblem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  Oracle orc(*this, in);
  note_v_absmax(in);
  const int64_t D = head_dim;
  if (is_varlen())
    for (size_t o = 0; o < out.size(); ++o)
      std::fill(out[o].values.begin(), out[o].values.end(), !backward && o == 1 ? -kInf : 0.0);
  const auto qrows = orc.rows(false);
  const int64_t nq = int64_t(qrows.size()), H = heads_q;
  if (!backward) {
    auto& o = out[0].values;
    auto& lse = out[1].values;
    host::parallel_for(nq * H, [&](int64_t lo, int64_t hi) {
      std::vector<double> row(D);
      for (int64_t r = lo; r < hi; ++r) {
        const auto [b, i] = qrows[r / H];
        const int64_t h = r % H;
        orc.fwd_row(b, h, i, row.data(), lse[orc.lse_at(b, h, i)]);
        for (int64_t d = 0; d < D; ++d) o[orc.iq(b, i, h, d)] = row[d];
      }
    }, host::grain_for(seqlen_k * D));
  } else {
    std::vector<std::vector<double>> deltas(batch);
    host::parallel_for(batch, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) deltas[b] = orc.deltas(b);
    }, 1);
    host::parallel_for(nq * H, [&](int64_t lo, int64_t hi) {
      std::vector<double> row(D);
      for (int64_t r = lo; r < hi; ++r) {
        const auto [b, i] = qrows[r / H];
        const int64_t h = r % H;
        orc.dq_row(b, h, i, row.data());
        for (int64_t d = 0; d < D; ++d) out[0].values[orc.iq(b, i, h, d)] = row[d];
      }
    }, host::grain_for(seqlen_k * D * 3));
    const auto krows = orc.rows(true);
    const int64_t Hk = heads_kv;
    host::parallel_for(int64_t(krows.size()) * Hk, [&](int64_t lo, int64_t hi) {
      std::vector<double> dk(D), dv(D);
      for (int64_t c = lo; c < hi; ++c) {
        const auto [b, j] = krows[c / Hk];
        const int64_t hk = c % Hk;
        orc.dkv_col(b, hk, j, deltas[b].data(), dk.data(), dv.data());
        for (int64_t d = 0; d < D; ++d) {
          out[1].values[orc.ik(b, j, hk, d)] = dk[d];
          out[2].values[orc.ik(b, j, hk, d)] = dv[d];
        }
      }
    }, host::grain_for(seqlen_q * group() * D * 5));
  }
  out_rms.assign(out.size(), 0.0);
  for (size_t i = 0; i < out.size(); ++i) out_rms[i] = rms_of(out[i].values.data(), int64_t(out[i].values.size()));
}

// The sampled check at benchmark sizes: each flat position belongs to one row (forward, dq) or
// one key column (dk, dv), computed once for all of its positions.
bool AttentionProblem::reference_at(const std::vector<HostTensor>& in, int output_index,
                                    const std::vector<int64_t>& flat, std::vector<double>& values) const {
  if (is_varlen()) return reference_at_thd(in, output_index, flat, values);
  Oracle orc(*this, in);
  note_v_absmax(in);
  const int64_t D = head_dim;
  const bool lse_out = !backward && output_index == 1;
  const bool kv_out = backward && output_index >= 1;
  // Unit (row or column) of each position, as (b, head, seq), and d.
  struct Pos { int64_t unit, d; };
  std::vector<Pos> pos(flat.size());
  std::map<int64_t, int64_t> units;  // unit id -> slot
  const int64_t S = kv_out ? seqlen_k : seqlen_q, H = kv_out ? heads_kv : heads_q;
  for (size_t n = 0; n < flat.size(); ++n) {
    int64_t f = flat[n], b, h, s, d = 0;
    if (lse_out) {
      b = f / (H * S), h = (f / S) % H, s = f % S;
    } else {
      d = f % D;
      const int64_t r = f / D;
      if (layout == AttentionLayout::kBSHD) b = r / (S * H), s = (r / H) % S, h = r % H;
      else b = r / (H * S), h = (r / S) % H, s = r % S;
    }
    pos[n] = {(b * H + h) * S + s, d};
    units.emplace(pos[n].unit, 0);
  }
  std::vector<int64_t> ids;
  for (auto& [u, slot] : units) slot = int64_t(ids.size()), ids.push_back(u);
  std::vector<double> results(ids.size() * (D + 1));
  std::map<int64_t, std::vector<double>> deltas;
  if (kv_out)
    for (int64_t u : ids) deltas.emplace(u / (H * S), std::vector<double>());
  std::vector<int64_t> bs;
  for (auto& [b, v] : deltas) bs.push_back(b);
  host::parallel_for(int64_t(bs.size()), [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) deltas[bs[n]] = orc.deltas(bs[n]);
  }, 1);
  host::parallel_for(int64_t(ids.size()), [&](int64_t lo, int64_t hi) {
    std::vector<double> tmp(D);
    for (int64_t n = lo; n < hi; ++n) {
      const int64_t u = ids[n], b = u / (H * S), h = (u / S) % H, s = u % S;
      double* res = results.data() + n * (D + 1);
      if (!backward) orc.fwd_row(b, h, s, res, res[D]);
      else if (!kv_out) orc.dq_row(b, h, s, res);
      else {
        std::vector<double> dk(D), dv(D);
        orc.dkv_col(b, h, s, deltas.at(b).data(), dk.data(), dv.data());
        std::copy(output_index == 1 ? dk.begin() : dv.begin(), output_index == 1 ? dk.end() : dv.end(), res);
      }
    }
  }, 1);
  values.resize(flat.size());
  for (size_t n = 0; n < flat.size(); ++n) {
    const double* res = results.data() + units[pos[n].unit] * (D + 1);
    values[n] = lse_out ? res[D] : res[pos[n].d];
  }
  if (out_rms.size() != outputs().size()) out_rms.assign(outputs().size(), 0.0);
  out_rms[output_index] = rms_of(values.data(), int64_t(values.size()));
  return true;
}

// reference_at for thd: a position's packed row t belongs to the last sequence whose first row
// is <= t (empty sequences share their first row with the next one), if t is inside it; rows
// outside every sequence hold O = 0, lse = -inf, zero gradients, as reference() writes them.
bool AttentionProblem::reference_at_thd(const std::vector<HostTensor>& in, int output_index,
                                        const std::vector<int64_t>& flat, std::vector<double>& values) const {
  Oracle orc(*this, in);
  note_v_absmax(in);
  const int64_t D = head_dim;
  const bool lse_out = !backward && output_index == 1;
  const bool kv_out = backward && output_index >= 1;
  const int64_t rows = kv_out ? total_k : total_q, H = kv_out ? heads_kv : heads_q;
  const std::vector<int64_t>& first = kv_out ? orc.k0 : orc.q0;
  const std::vector<int64_t>& len = kv_out ? orc.sk : orc.sq;
  struct Pos { int64_t unit, d; };  // unit: h * rows + t
  std::vector<Pos> pos(flat.size());
  std::map<int64_t, int64_t> units;  // unit -> slot
  for (size_t n = 0; n < flat.size(); ++n) {
    const int64_t f = flat[n];
    if (lse_out) pos[n] = {f, 0};  // lse [Hq, total_q]: f = h total_q + t
    else pos[n] = {(f / D % H) * rows + f / D / H, f % D};
    units.emplace(pos[n].unit, 0);
  }
  std::vector<int64_t> ids;
  for (auto& [u, slot] : units) slot = int64_t(ids.size()), ids.push_back(u);
  // (sequence, row in it) of each unit; b = -1 outside every sequence
  std::vector<std::pair<int64_t, int64_t>> where(ids.size());
  std::map<int64_t, std::vector<double>> deltas;
  for (size_t n = 0; n < ids.size(); ++n) {
    const int64_t t = ids[n] % rows;
    int64_t b = int64_t(std::upper_bound(first.begin(), first.end(), t) - first.begin()) - 1;
    if (b >= 0 && t >= first[b] + len[b]) b = -1;
    where[n] = {b, b >= 0 ? t - first[b] : 0};
    if (kv_out && b >= 0) deltas.emplace(b, std::vector<double>());
  }
  std::vector<int64_t> bs;
  for (auto& [b, v] : deltas) bs.push_back(b);
  host::parallel_for(int64_t(bs.size()), [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) deltas[bs[n]] = orc.deltas(bs[n]);
  }, 1);
  std::vector<double> results(ids.size() * (D + 1), 0.0);
  host::parallel_for(int64_t(ids.size()), [&](int64_t lo, int64_t hi) {
    std::vector<double> dk(D), dv(D);
    for (int64_t n = lo; n < hi; ++n) {
      const auto [b, s] = where[n];
      const int64_t h = ids[n] / rows;
      double* res = results.data() + n * (D + 1);
      if (b < 0) {
        if (lse_out) res[D] = -kInf;
        continue;
      }
      if (!backward) orc.fwd_row(b, h, s, res, res[D]);
      else if (!kv_out) orc.dq_row(b, h, s, res);
      else {
        orc.dkv_col(b, h, s, deltas.at(b).data(), dk.data(), dv.data());
        std::copy(output_index == 1 ? dk.begin() : dv.begin(), output_index == 1 ? dk.end() : dv.end(), res);
      }
    }
  }, 1);
  values.resize(flat.size());
  for (size_t n = 0; n < flat.size(); ++n) {
    const double* res = results.data() + units[pos[n].unit] * (D + 1);
    values[n] = lse_out ? res[D] : res[pos[n].d];
  }
  if (out_rms.size() != outputs().size()) out_rms.assign(outputs().size(), 0.0);
  out_rms[output_index] = rms_of(values.data(), int64_t(values.size()));
  return true;
}

// The kernels round P (and, backward, dS) to the 16-bit dtype before the tensor-core products,
// and round the outputs once: every term of an output's sum carries a relative error of up to u
// (the unit roundoff), so the sum's error is about u times the root mean square of its terms —
// about u times the output's own RMS for random-sign terms. Absolute: 16 u x RMS (over the
// output's non-zero values, from the reference); tests/cpp/test_attention.cpp emulates that
// rounding on the CPU, whose worst element reaches about half of this (a factor of 2 left for
// what the emulation leaves out), and checks that dropping one key fails it. Relative: 2 u (the
// final rounding, reference and kernel landing on neighbouring values). lse is f32 throughout:
// exp2/log2 approximations and f32 scores, a few 1e-6 of values up to ~10.
// e4m3 (forward): P is rounded to e4m3 (3 mantissa bits, relative error up to 2^-4) before PV,
// and the row sum is taken before that rounding, so O's error is at most 2 x 2^-4 x max |dv v|
// over the row's keys (the weights sum to 1). That worst case is 5-50x the error an emulation of
// the kernel's rounding reaches on the test problems (0.08-0.2 x RMS(O)), and loose enough to
// pass a kernel that ignores v_descale; so O is held to the smaller of it and RMS(O) / 2. The
// scores' products are exact, their f32 sums in the tensor cores keep ~14 bits: lse within 1e-3
// of values up to ~10.
Tolerance AttentionProblem::tolerance(int output_index) const {
  if (dtype == DType::kF8E4M3) {
    if (output_index == 1) return {1e-3, 1e-3};
    const double rms = !out_rms.empty() ? out_rms[0] : 1.0;
    return {std::min(0x1p-3 * std::max(v_absmax, 1e-3), 0.5 * std::max(rms, 1e-3)), 0x1p-8};
  }
  const double u = unit_roundoff();
  if (!backward && output_index == 1) return {2e-5, 1e-5};
  const double rms = output_index < int(out_rms.size()) ? out_rms[output_index] : 1.0;
  return {16 * u * std::max(rms, 1e-3) + 1e-7, 2 * u};
}

Attrs AttentionProblem::attrs() const {
  Attrs a{{"backward", backward},
          {"causal", causal},
          {"scale", scale},
          {"window_left", window_left},
          {"window_right", window_right},
          {"softcap", softcap},
          {"layout", std::string(layout == AttentionLayout::kBSHD   ? "bshd"
                                 : layout == AttentionLayout::kBHSD ? "bhsd"
                                                                    : "thd")}};
  if (backward) a.set("deterministic", deterministic);
  if (dtype == DType::kF8E4M3) a.set("fp8", true);  // attention_fp8: the descales follow v
  if (is_varlen()) a.set("max_seqlen_q", seqlen_q), a.set("max_seqlen_k", seqlen_k);
  return a;
}

AttentionArgs AttentionArgs::bind(const AttentionProblem& p, const Operands& ops) {
  AttentionArgs a;
  a.q = ops.in.at(0).data;
  a.k = ops.in.at(1).data;
  a.v = ops.in.at(2).data;
  if (p.backward) {
    a.o = ops.in.at(3).data;
    a.dout = ops.in.at(4).data;
    a.lse_in = static_cast<const float*>(ops.in.at(5).data);
    a.out = ops.out.at(0).data;
    a.dk = ops.out.at(1).data;
    a.dv = ops.out.at(2).data;
  } else {
    a.out = ops.out.at(0).data;
    a.lse_out = static_cast<float*>(ops.out.at(1).data);
    if (p.dtype == DType::kF8E4M3) {
      a.q_descale = static_cast<const float*>(ops.in.at(3).data);
      a.k_descale = static_cast<const float*>(ops.in.at(4).data);
      a.v_descale = static_cast<const float*>(ops.in.at(5).data);
    }
  }
  a.batch = p.batch, a.seqlen_q = p.seqlen_q, a.seqlen_k = p.seqlen_k;
  a.heads_q = p.heads_q, a.heads_kv = p.heads_kv, a.head_dim = p.head_dim;
  a.sq = p.str_q, a.sk = p.str_k, a.sv = p.str_v, a.so = p.str_o;
  a.sdo = p.str_do, a.sdq = p.str_dq, a.sdk = p.str_dk, a.sdv = p.str_dv;
  a.scale = float(p.scale);
  a.softcap = float(p.softcap);
  a.window_left = p.window_left;
  a.window_right = p.eff_window_right();
  a.dtype = p.dtype;
  a.backward = p.backward;
  a.deterministic = p.deterministic;
  if (p.is_varlen()) {
    const size_t cu = p.backward || p.dtype == DType::kF8E4M3 ? 6 : 3;  // after lse, or the e4m3 descales
    a.cu_q = static_cast<const int32_t*>(ops.in.at(cu).data);
    a.cu_k = static_cast<const int32_t*>(ops.in.at(cu + 1).data);
    a.total_q = p.total_q, a.total_k = p.total_k;
    a.lse_b = 0, a.lse_h = p.total_q;
  } else {
    a.lse_b = p.heads_q * p.seqlen_q, a.lse_h = p.seqlen_q;
  }
  return a;
}

namespace {

// ---- validation: typed errors naming the op and the values received ----------------------------

struct Dims {
  int64_t b, s, h, d;
  AttnStrides st;
};

// thd: [total, H, D], b = 1 and a batch stride of 0 (the sequences' rows come from cu_seqlens).
// `fp8`: the op takes e4m3 (attention_fp8's q, k, v); else bf16 or f16.
Dims dims_of(const char* op, const char* name, const TensorView& t, AttentionLayout layout, bool fp8 = false) {
  const bool thd = layout == AttentionLayout::kTHD, bshd = layout == AttentionLayout::kBSHD;
  const int rank = thd ? 3 : 4;
  if (t.rank() != rank)
    HK_THROW(kValue, op, ": ", name, " must have ", rank, " dimensions (",
             thd ? "total, H, D" : bshd ? "B, S, H, D" : "B, H, S, D", "), got ", t.rank(), " (shape [",
             shape_to_string(t.shape), "])");
  if (fp8 && t.dtype != DType::kF8E4M3)
    HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), ", expected e4m3 (16-bit inputs: attention)");
  if (!fp8 && t.dtype == DType::kF8E4M3)
    HK_THROW(kType, op, ": ", name, " is e4m3; FP8 inputs go through attention_fp8, with their descales (forward only)");
  if (!fp8 && t.dtype != DType::kBF16 && t.dtype != DType::kF16)
    HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), ", expected bf16 or f16");
  for (int i = 0; i < rank; ++i)
    if (t.shape[i] < 0) HK_THROW(kValue, op, ": ", name, " has a negative extent: [", shape_to_string(t.shape), "]");
  Dims d = thd ? Dims{1, t.shape[0], t.shape[1], t.shape[2], {0, t.stride(0), t.stride(1)}}
               : Dims{t.shape[0], t.shape[bshd ? 1 : 2], t.shape[bshd ? 2 : 1], t.shape[3],
                      {t.stride(0), t.stride(bshd ? 1 : 2), t.stride(bshd ? 2 : 1)}};
  if (d.d == 0) HK_THROW(kValue, op, ": ", name, " has head dim 0; D must be at least 1");
  if (t.numel() > 0 && t.stride(-1) != 1 && d.d > 1)
    HK_THROW(kNotSupported, op, ": ", name, " needs a contiguous last dimension (stride 1), got stride ", t.stride(-1));
  if (t.numel() > 0 && (d.st.b < 0 || d.st.s < 0 || d.st.h < 0))
    HK_THROW(kNotSupported, op, ": ", name, " has a negative stride");
  if (t.numel() > 0 && t.data == nullptr)
    HK_THROW(kValue, op, ": ", name, " is a null pointer with ", t.numel(), " elements");
  const int elem = dtype_bits(t.dtype) / 8;
  if (t.numel() > 0 && t.alignment() < elem)
    HK_THROW(kNotSupported, op, ": ", name, " is not aligned to its ", elem, "-byte elements");
  return d;
}

void expect_same(const char* op, const char* name, const TensorView& t, const Dims& d, const char* ref_name,
                 const TensorView& ref, const Dims& r) {
  if (t.dtype != ref.dtype)
    HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), " but ", ref_name, " is ", to_string(ref.dtype));
  if (d.b != r.b || d.s != r.s || d.h != r.h || d.d != r.d)
    HK_THROW(kValue, op, ": ", name, " has shape [", shape_to_string(t.shape), "] but ", ref_name, " has [",
             shape_to_string(ref.shape), "]");
}

// lse: [B, Hq, Sq], or [Hq, total_q] for thd.
void check_lse(const char* op, const TensorView& lse, const AttentionProblem& p) {
  if (lse.dtype != DType::kF32) HK_THROW(kType, op, ": lse is ", to_string(lse.dtype), ", expected f32");
  if (p.is_varlen() && lse.shape != std::vector<int64_t>{p.heads_q, p.total_q})
    HK_THROW(kValue, op, ": lse has shape [", shape_to_string(lse.shape), "], expected [", p.heads_q, "x", p.total_q,
             "] (Hq, total_q)");
  if (!p.is_varlen() && lse.shape != std::vector<int64_t>{p.batch, p.heads_q, p.seqlen_q})
    HK_THROW(kValue, op, ": lse has shape [", shape_to_string(lse.shape), "], expected [", p.batch, "x", p.heads_q,
             "x", p.seqlen_q, "] (B, Hq, Sq)");
  if (!lse.is_contiguous()) HK_THROW(kNotSupported, op, ": lse must be contiguous, got ", lse.describe());
  if (lse.numel() > 0 && lse.data == nullptr) HK_THROW(kValue, op, ": lse is a null pointer with ", lse.numel(), " elements");
  if (lse.numel() > 0 && lse.alignment() < 4) HK_THROW(kNotSupported, op, ": lse is not aligned to its 4-byte elements");
}

int min_align(std::initializer_list<const TensorView*> ts) {
  int a = 256;
  for (auto* t : ts)
    if (t->numel() > 0) a = std::min(a, t->alignment());
  return a;
}

void apply_options(const char* op, AttentionProblem& p, const AttentionOptions& o) {
  if (o.window_left < -1 || o.window_right < -1)
    HK_THROW(kValue, op, ": window (", o.window_left, ", ", o.window_right, ") must be >= -1 (-1: unbounded)");
  if (!(o.softcap >= 0) || !std::isfinite(o.softcap)) HK_THROW(kValue, op, ": softcap must be finite and >= 0, got ", o.softcap);
  if (!std::isfinite(o.scale)) HK_THROW(kValue, op, ": scale must be finite, got ", o.scale);
  p.causal = o.causal;
  p.window_left = o.window_left;
  p.window_right = o.window_right;
  p.softcap = o.softcap;
  p.scale = o.scale > 0 ? o.scale : p.default_scale();
  p.deterministic = o.deterministic;
}

// thd's extra inputs: the prefix sums and the maxima.
struct VarlenIn {
  const TensorView *cu_q, *cu_k;
  int64_t max_q, max_k;
};

// cu_seqlens: int32 [B + 1], contiguous; the values stay on the device (see the public header).
void check_cu(const char* op, const char* name, const TensorView& t) {
  if (t.dtype != DType::kI32) HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), ", expected i32 (int32)");
  if (t.rank() != 1)
    HK_THROW(kValue, op, ": ", name, " must have 1 dimension (B + 1), got shape [", shape_to_string(t.shape), "]");
  if (t.shape[0] < 1)
    HK_THROW(kValue, op, ": ", name, " has ", t.shape[0], " entries; B + 1 prefix sums need at least 1");
  if (t.shape[0] > 1 && t.stride(0) != 1)
    HK_THROW(kNotSupported, op, ": ", name, " must be contiguous, got stride ", t.stride(0));
  if (t.data == nullptr) HK_THROW(kValue, op, ": ", name, " is a null pointer");
  if (t.alignment() < 4) HK_THROW(kNotSupported, op, ": ", name, " is not aligned to its 4-byte elements");
}

// An e4m3 descale: f32 [B, Hkv], contiguous (FlashAttention-3's convention: query head h uses the
// descale of its kv head h / (Hq / Hkv)).
// `hkv`: k's head count as given (0 with no heads at all: an empty problem).
void check_descale(const char* op, const char* name, const TensorView& t, int64_t batch, int64_t hkv) {
  if (t.dtype != DType::kF32) HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), ", expected f32");
  if (t.shape != std::vector<int64_t>{batch, hkv})
    HK_THROW(kValue, op, ": ", name, " has shape [", shape_to_string(t.shape), "], expected [", batch, "x", hkv,
             "] (B, Hkv)");
  if (!t.is_contiguous()) HK_THROW(kNotSupported, op, ": ", name, " must be contiguous, got ", t.describe());
  if (t.numel() > 0 && t.data == nullptr) HK_THROW(kValue, op, ": ", name, " is a null pointer with ", t.numel(), " elements");
  if (t.numel() > 0 && t.alignment() < 4) HK_THROW(kNotSupported, op, ": ", name, " is not aligned to its 4-byte elements");
}

// The problem q, k, v (and, backward, o, dout, lse) pose; outputs contiguous until the caller
// says otherwise. `vl`: the thd inputs (opt.layout kTHD).
// `fp8`: attention_fp8 (e4m3 q, k, v; in[3..5] the descales).
AttentionProblem checked(const char* op, const std::vector<const TensorView*>& in, const AttentionOptions& opt,
                         bool bwd, const VarlenIn* vl = nullptr, bool fp8 = false) {
  if ((opt.layout == AttentionLayout::kTHD) != (vl != nullptr))
    HK_THROW(kValue, op, vl ? ": the packed (thd) layout is set by attention_varlen"
                            : ": layout thd (packed sequences) is attention_varlen's; use it with cu_seqlens");
  const TensorView &q = *in[0], &k = *in[1], &v = *in[2];
  Dims dq = dims_of(op, "q", q, opt.layout, fp8), dk = dims_of(op, "k", k, opt.layout, fp8),
       dv = dims_of(op, "v", v, opt.layout, fp8);
  if (k.dtype != q.dtype) HK_THROW(kType, op, ": k is ", to_string(k.dtype), " but q is ", to_string(q.dtype));
  if (v.dtype != q.dtype) HK_THROW(kType, op, ": v is ", to_string(v.dtype), " but q is ", to_string(q.dtype));
  if (dk.b != dq.b) HK_THROW(kValue, op, ": k has batch ", dk.b, " but q has ", dq.b);
  if (dk.d != dq.d) HK_THROW(kValue, op, ": k has head dim ", dk.d, " but q has ", dq.d);
  expect_same(op, "v", v, dv, "k", k, dk);
  if (dk.h == 0 && dq.h > 0) HK_THROW(kValue, op, ": k has 0 heads but q has ", dq.h);
  if (dk.h > 0 && dq.h % dk.h != 0)
    HK_THROW(kValue, op, ": q's heads (", dq.h, ") must be a multiple of k's and v's (", dk.h, ")");
  AttentionProblem p(dq.b, dq.s, dk.s, dq.h, std::max<int64_t>(dk.h, 1), dq.d, q.dtype, bwd, opt.layout);
  if (vl) {
    check_cu(op, "cu_seqlens_q", *vl->cu_q);
    check_cu(op, "cu_seqlens_k", *vl->cu_k);
    if (vl->cu_k->shape[0] != vl->cu_q->shape[0])
      HK_THROW(kValue, op, ": cu_seqlens_k has ", vl->cu_k->shape[0], " entries but cu_seqlens_q has ",
               vl->cu_q->shape[0], " (both B + 1)");
    if (vl->max_q < 0 || vl->max_k < 0)
      HK_THROW(kValue, op, ": max_seqlen_q and max_seqlen_k must be >= 0, got ", vl->max_q, " and ", vl->max_k);
    p.batch = vl->cu_q->shape[0] - 1;
    p.seqlen_q = vl->max_q, p.seqlen_k = vl->max_k;
    p.total_q = dq.s, p.total_k = dk.s;
  }
  apply_options(op, p, opt);
  p.str_q = dq.st, p.str_k = dk.st, p.str_v = dv.st;
  std::vector<const TensorView*> all = {&q, &k, &v};
  if (fp8) {
    const char* names[3] = {"q_descale", "k_descale", "v_descale"};
    for (int i = 0; i < 3; ++i) check_descale(op, names[i], *in[3 + i], p.batch, dk.h);
  }
  if (bwd) {
    const TensorView &o = *in[3], &dout = *in[4], &lse = *in[5];
    Dims d_o = dims_of(op, "o", o, opt.layout), d_do = dims_of(op, "dout", dout, opt.layout);
    expect_same(op, "o", o, d_o, "q", q, dq);
    expect_same(op, "dout", dout, d_do, "q", q, dq);
    check_lse(op, lse, p);
    p.str_o = d_o.st, p.str_do = d_do.st;
    all.insert(all.end(), {&o, &dout, &lse});
  }
  p.align_bytes = 256;
  for (auto* t : all) p.align_bytes = std::min(p.align_bytes, min_align({t}));
  return p;
}

AttentionOptions options_from(const char* op, const Attrs& attrs) {
  AttentionOptions o;
  o.causal = attrs.get_bool(op, "causal", false);
  o.scale = attrs.get_double(op, "scale", 0.0);
  o.window_left = attrs.get_int(op, "window_left", -1);
  o.window_right = attrs.get_int(op, "window_right", -1);
  o.softcap = attrs.get_double(op, "softcap", 0.0);
  o.deterministic = attrs.get_bool(op, "deterministic", false);
  const std::string lay = attrs.get_string(op, "layout", "bshd");
  if (lay == "bshd") o.layout = AttentionLayout::kBSHD;
  else if (lay == "bhsd") o.layout = AttentionLayout::kBHSD;
  else if (lay == "thd") o.layout = AttentionLayout::kTHD;
  else HK_THROW(kValue, op, ": layout must be \"bshd\", \"bhsd\" or \"thd\", got \"", lay, "\"");
  return o;
}

// ---- the family ------------------------------------------------------------------------------

struct TestShape {
  int64_t b, sq, sk, hq, hkv, d;
  bool causal = false;
  int64_t wl = -1, wr = -1;
  double softcap = 0, scale = 0;
  AttentionLayout layout = AttentionLayout::kBSHD;
  int64_t pad = 0;  // extra elements per (s, h) row of every input (padded strides)
  DType dtype = DType::kBF16;
  bool fwd = true, bwd = true;
};

std::shared_ptr<AttentionProblem> make(const TestShape& t, bool bwd, bool det) {
  auto p = std::make_shared<AttentionProblem>(t.b, t.sq, t.sk, t.hq, t.hkv, t.d, t.dtype, bwd, t.layout);
  p->causal = t.causal;
  p->window_left = t.wl;
  p->window_right = t.wr;
  p->softcap = t.softcap;
  if (t.scale > 0) p->scale = t.scale;
  p->deterministic = det;
  if (t.pad > 0) {
    // Rows of D + pad elements: (b, s, h) strides of a [B, S, H, D + pad] (or [B, H, S, D + pad])
    // buffer, inputs only (the outputs stay contiguous so that attrs() rebuilds the problem).
    auto padded = [&](int64_t s, int64_t h) -> AttnStrides {
      const int64_t row = t.d + t.pad;
      if (t.layout == AttentionLayout::kBSHD) return {s * h * row, h * row, row};
      return {h * s * row, row, s * row};
    };
    p->str_q = padded(t.sq, t.hq);
    p->str_k = p->str_v = padded(t.sk, t.hkv);
    if (bwd) p->str_o = p->str_do = padded(t.sq, t.hq);
  }
  return p;
}

// Variable-length (thd) test problems: per-sequence lengths of the queries and the keys.
struct VarlenShape {
  std::vector<int64_t> lq, lk;
  int64_t hq, hkv, d;
  bool causal = false;
  int64_t wl = -1, wr = -1;
  double softcap = 0, scale = 0;
  int64_t pad = 0;  // extra elements per (row, head) of every input
  DType dtype = DType::kBF16;
};

std::shared_ptr<AttentionProblem> make_varlen(const VarlenShape& t, bool bwd, bool det) {
  auto p = std::make_shared<AttentionProblem>(AttentionProblem::varlen(t.lq, t.lk, t.hq, t.hkv, t.d, t.dtype, bwd));
  p->causal = t.causal;
  p->window_left = t.wl;
  p->window_right = t.wr;
  p->softcap = t.softcap;
  if (t.scale > 0) p->scale = t.scale;
  p->deterministic = det;
  if (t.pad > 0) {
    const int64_t row = t.d + t.pad;
    p->str_q = {0, t.hq * row, row};
    p->str_k = p->str_v = {0, t.hkv * row, row};
    if (bwd) p->str_o = p->str_do = p->str_q;
  }
  return p;
}

class AttentionFamily final : public Family {
 public:
  std::string name() const override { return "attention"; }
  std::string summary() const override {
    return "scaled dot-product attention (FlashAttention fwd/bwd): bf16/f16, any D, GQA, causal/window/softcap masks, "
           "bshd or bhsd strides";
  }
  std::vector<ProblemPtr> test_problems() const override {
    using L = AttentionLayout;
    std::vector<TestShape> shapes;
    // head dims: the tensor-core ones and odd ones only the general rung runs
    for (int64_t d : {1, 3, 16, 32, 64, 80, 96, 128, 256})
      shapes.push_back({1, 129, 129, 2, 1, d, d % 2 == 0});
    // past v02's 128-dim chunks and 256-dim (forward) / 128-dim (backward) output slabs
    shapes.push_back({1, 33, 45, 2, 1, 520, true});
    // sequence lengths around the 64/128-row tiles, Sq != Sk both ways with causal (bottom-right
    // aligned; Sq > Sk leaves the first Sq - Sk rows with no key: O = 0, lse = -inf)
    for (auto [sq, sk] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {7, 7}, {127, 127}, {128, 128}, {300, 300}, {1, 300}, {7, 300}, {300, 7}, {128, 300}, {300, 129}}) {
      shapes.push_back({2, sq, sk, 2, 2, 64, false});
      shapes.push_back({1, sq, sk, 2, 1, 128, true});
    }
    // FlashAttention's own test lengths: tails of the 64/128-row tiles, Sq != Sk both ways, one key
    for (auto [sq, sk, causal] : std::vector<std::tuple<int64_t, int64_t, bool>>{
             {113, 203, true}, {239, 1, false}, {799, 3, true}, {1023, 1024, true}, {1024, 1023, false}})
      shapes.push_back({1, sq, sk, 2, 1, 128, causal});
    // GQA (8 query heads on 2 kv heads) and MQA
    shapes.push_back({2, 129, 129, 8, 2, 64, true});
    shapes.push_back({1, 300, 127, 8, 2, 128, false});
    shapes.push_back({1, 127, 129, 4, 1, 64, true});
    // PyTorch's layout (bhsd) and padded strides, both layouts
    shapes.push_back({2, 129, 127, 4, 2, 64, true, -1, -1, 0, 0, L::kBHSD});
    shapes.push_back({1, 128, 300, 2, 1, 128, false, -1, -1, 0, 0, L::kBHSD});
    shapes.push_back({1, 77, 129, 2, 2, 37, false, -1, -1, 0, 0, L::kBHSD});
    shapes.push_back({2, 129, 129, 4, 2, 64, false, -1, -1, 0, 0, L::kBSHD, 8});
    shapes.push_back({1, 129, 200, 2, 1, 128, true, -1, -1, 0, 0, L::kBHSD, 24});
    shapes.push_back({1, 100, 100, 2, 1, 64, false, -1, -1, 0, 0, L::kBSHD, 3});  // rows not 16-byte multiples
    shapes.push_back({1, 200, 300, 2, 1, 80, true, -1, -1, 0, 0, L::kBSHD, 3});    // the same, D = 80 (copies, v06)
    // sliding windows, with and without causal, Sq != Sk
    shapes.push_back({1, 300, 300, 2, 1, 64, false, 16, 0});
    shapes.push_back({1, 300, 300, 2, 1, 128, false, 32, 8});
    shapes.push_back({1, 129, 300, 2, 2, 64, true, 64, -1});
    shapes.push_back({1, 300, 129, 2, 1, 64, false, -1, 4});
    shapes.push_back({1, 200, 200, 2, 1, 64, false, 0, 0});  // the diagonal alone
    // a tile whose key blocks are cut by the window, whole, then cut by the diagonal (rows
    // 512..639 walk blocks 1 / 2 masked, 3 whole, 4 masked)
    shapes.push_back({1, 640, 640, 2, 1, 128, true, 300, -1});
    // softcap (large scores through scale = 1 make tanh matter), and an explicit scale
    shapes.push_back({1, 129, 129, 2, 1, 64, true, -1, -1, 1.5, 1.0});
    shapes.push_back({1, 128, 300, 4, 2, 128, false, -1, -1, 30.0});
    shapes.push_back({1, 129, 129, 2, 1, 96, false, -1, -1, 0, 0.3});
    // the 256-column tile (64-key blocks): causal across several blocks and tiles, a window with
    // GQA, D = 192 and 136 (whole 64-column chunks past D, zero-filled by TMA), softcap, padded
    // bhsd rows, and D = 250 (copies padded to 256)
    shapes.push_back({1, 300, 300, 2, 1, 256, true});
    shapes.push_back({2, 200, 333, 4, 2, 256, false, 100, 30});
    shapes.push_back({1, 129, 200, 2, 1, 192, false});
    shapes.push_back({1, 129, 129, 2, 1, 136, true, -1, -1, 30.0});
    shapes.push_back({1, 300, 300, 2, 1, 256, true, -1, -1, 0, 0, L::kBHSD, 8});
    shapes.push_back({1, 100, 170, 2, 1, 250, false});
    // more query tiles (128 rows) than an H200 or H100 has SMs (132), so the persistent grid (v09,
    // and the public forward above 64 columns) runs several tiles per CTA, claimed from its
    // counter: 320 causal tiles at 64 columns (v05's kernel there), 240 at 128 (v06's)
    shapes.push_back({4, 640, 640, 16, 4, 64, true});
    shapes.push_back({2, 520, 600, 24, 8, 128, false});
    // the 16- and 32-column tiles (D <= 16, D <= 32): several key blocks with a tail, GQA, D = 8 and
    // 24 (columns past D zero-filled by TMA), a window with softcap, and more tiles than SMs
    shapes.push_back({1, 300, 700, 4, 2, 16, false});
    shapes.push_back({1, 300, 700, 4, 2, 32, true});
    shapes.push_back({1, 129, 129, 2, 1, 8, false});
    shapes.push_back({1, 129, 300, 2, 1, 24, true});
    shapes.push_back({1, 300, 300, 2, 1, 16, false, 32, 8, 30.0});
    shapes.push_back({4, 640, 640, 16, 4, 32, true});
    // f16
    for (TestShape t : std::vector<TestShape>{{2, 129, 129, 4, 2, 64, true}, {1, 300, 128, 2, 1, 128, false},
                                              {1, 300, 200, 2, 1, 16, true}, {2, 129, 129, 4, 2, 32, false},
                                              {1, 129, 129, 2, 1, 7, true}, {1, 129, 129, 2, 1, 256, false}}) {
      t.dtype = DType::kF16;
      shapes.push_back(t);
    }
    std::vector<ProblemPtr> out;
    for (auto& t : shapes) {
      out.push_back(make(t, false, false));
      out.push_back(make(t, true, false));
    }
    // e4m3 forward (bf16 out, per-head descales): D = 64 and 128, a key tail, GQA, causal with
    // Sq != Sk, a window, SDPA's layout
    for (TestShape t : std::vector<TestShape>{{1, 129, 129, 2, 1, 64, false},
                                              {1, 300, 700, 4, 2, 128, true},
                                              {2, 200, 333, 4, 2, 128, false, 100, 30},
                                              {1, 128, 300, 2, 1, 64, true, -1, -1, 0, 0, L::kBHSD},
                                              // v10's tiles with columns past D (TMA zero-fill), a padded
                                              // stride TMA still reads, SDPA's layout with B > 1
                                              {2, 130, 200, 4, 1, 48, false},
                                              {1, 257, 129, 2, 2, 96, true},
                                              {1, 200, 300, 2, 1, 64, false, -1, -1, 0, 0, L::kBSHD, 16},
                                              {2, 100, 170, 4, 2, 128, false, -1, -1, 0, 0, L::kBHSD},
                                              // what v10 declines, for the general rung: D = 40, D = 256,
                                              // softcap, padded rows
                                              {1, 100, 150, 2, 1, 40, false},
                                              {1, 70, 90, 2, 2, 256, true},
                                              {1, 129, 129, 2, 1, 64, false, -1, -1, 20.0},
                                              {1, 64, 200, 2, 1, 64, false, -1, -1, 0, 0, L::kBSHD, 3}}) {
      t.dtype = DType::kF8E4M3;
      out.push_back(make(t, false, false));
    }
    // deterministic backward on a few shapes (the dq accumulation without atomics)
    for (TestShape t : std::vector<TestShape>{{2, 300, 300, 8, 2, 64, true}, {1, 129, 257, 2, 1, 128, false},
                                              {1, 200, 200, 2, 1, 37, false}, {2, 200, 333, 4, 2, 256, true},
                                              {2, 300, 300, 8, 2, 16, true}, {1, 129, 257, 2, 1, 32, false}})
      out.push_back(make(t, true, true));
    // variable length (thd): empty and one-row sequences, lengths around the 64/128-row tiles and
    // off them, Sq != Sk per sequence both ways (bottom-right aligned per sequence: a sequence
    // with Sq > Sk has rows with no key), GQA, windows, softcap, padded rows, the head dims only
    // the general rung takes, f16
    const std::vector<int64_t> mix = {113, 0, 1, 203, 64};
    std::vector<VarlenShape> vshapes = {
        {mix, mix, 4, 2, 64, true},
        {mix, mix, 2, 1, 128, false},
        {{1, 203, 37, 0, 130}, {203, 113, 0, 5, 130}, 2, 2, 64, true},
        {{1, 203, 37, 0, 130}, {203, 113, 0, 5, 130}, 4, 1, 128, true},
        {{203, 1, 113}, {203, 7, 300}, 2, 1, 128, false, 32, 0},
        {{77, 129, 2}, {129, 77, 2}, 2, 1, 64, false, 16, 8},
        {{129, 200}, {129, 77}, 4, 2, 96, false},
        {{45, 0, 1, 33}, {45, 3, 1, 60}, 2, 1, 37, true},
        {{150, 77}, {150, 77}, 2, 1, 64, true, -1, -1, 30.0},
        {{113, 203}, {113, 203}, 2, 2, 64, false, -1, -1, 0, 0, 8},
        {{113, 203}, {300, 1}, 2, 1, 128, true, -1, -1, 0, 0, 3},  // rows not 16-byte multiples
        {{300}, {300}, 2, 1, 64, true},
        {{0, 5}, {0, 9}, 2, 1, 32, false},
        {{113, 0, 203}, {203, 5, 113}, 2, 1, 16, true},
        {{64, 1, 127}, {64, 1, 127}, 2, 1, 256, true},
        {{113, 203}, {113, 203}, 2, 2, 256, true},
    };
    VarlenShape f16{mix, mix, 4, 2, 128, true};
    f16.dtype = DType::kF16;
    vshapes.push_back(f16);
    for (auto& t : vshapes) {
      out.push_back(make_varlen(t, false, false));
      out.push_back(make_varlen(t, true, false));
    }
    out.push_back(make_varlen({mix, mix, 8, 2, 64, true}, true, true));
    out.push_back(make_varlen({mix, mix, 4, 2, 128, true}, true, true));
    out.push_back(make_varlen({{64, 1, 127}, {64, 1, 127}, 2, 1, 256, true}, true, true));
    out.push_back(make_varlen({{1, 203, 37, 0, 130}, {203, 113, 0, 5, 130}, 2, 1, 37, true}, true, true));
    out.push_back(make_varlen({{1, 203, 37, 0, 130}, {203, 113, 0, 5, 130}, 2, 1, 16, true}, true, true));
    return out;
  }
  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    // FlashAttention's benchmark: 16k tokens per batch (B = 16384 / S), Hq = 2048 / D.
    struct B { int64_t s, d; bool causal, varlen = false; AttentionLayout layout = AttentionLayout::kBSHD; };
    std::vector<B> list;
    std::vector<int64_t> seqs = {512, 2048, 8192};
    if (sel.quick) list = {{2048, 128, true}};
    for (const std::string& s : sel.shapes) {
      // SxD, SxDxC (C: 1 = causal) or SxDxCxV (V: 1 = variable length), then optionally :bshd
      // (the default, FlashAttention's layout) or :bhsd (SDPA's)
      const size_t colon = s.find(':');
      const std::string layout = colon == std::string::npos ? "bshd" : s.substr(colon + 1);
      if (layout != "bshd" && layout != "bhsd")
        HK_THROW(kValue, "attention: a bench shape's layout is bshd or bhsd, got ", s);
      auto v = parse_shape(s.substr(0, colon));
      if (v.size() < 2 || v.size() > 4)
        HK_THROW(kValue, "attention: bench shapes are SxD, SxDxCAUSAL or SxDxCAUSALxVARLEN (then :LAYOUT), got ", s);
      const bool varlen = v.size() == 4 && v[3] != 0;
      if (varlen && colon != std::string::npos)
        HK_THROW(kValue, "attention: a variable-length bench shape is packed (thd); it takes no layout, got ", s);
      list.push_back({v[0], v[1], v.size() >= 3 && v[2] != 0, varlen,
                      layout == "bhsd" ? AttentionLayout::kBHSD : AttentionLayout::kBSHD});
    }
    if (list.empty())
      for (int64_t d : {64, 128})
        for (int64_t s : seqs)
          for (bool c : {false, true}) list.push_back({s, d, c});
    // The quick suite times the public op of both inputs it takes: bf16 (forward and backward)
    // and e4m3 (attention_fp8's forward).
    std::vector<DType> dtypes = !sel.dtypes.empty() ? sel.dtypes
                                : sel.quick         ? std::vector<DType>{DType::kBF16, DType::kF8E4M3}
                                                    : std::vector<DType>{DType::kBF16};
    std::vector<ProblemPtr> out;
    for (auto& b : list)
      for (DType dt : dtypes)
        for (bool bwd : {false, true}) {
          if (bwd && dt == DType::kF8E4M3) continue;  // e4m3: a forward only (attention_fp8)
          const int64_t batch = std::max<int64_t>(1, 16384 / b.s), heads = std::max<int64_t>(1, 2048 / b.d);
          if (b.varlen) {
            // The same 16k tokens (at least S) packed as sequences of 3S/2 and S/2 rows in turn
            // (the last one what remains): the packed layout at the fixed-length problem's size.
            std::vector<int64_t> lens;
            const int64_t total = std::max<int64_t>(16384, b.s);
            for (int64_t used = 0, n = 0; used < total; ++n) {
              int64_t l = n % 2 == 0 ? b.s + b.s / 2 : std::max<int64_t>(1, b.s / 2);
              l = std::min(l, total - used);
              lens.push_back(l);
              used += l;
            }
            VarlenShape t{lens, lens, heads, heads, b.d, b.causal};
            t.dtype = dt;
            out.push_back(make_varlen(t, bwd, false));
            continue;
          }
          TestShape t{batch, b.s, b.s, heads, heads, b.d, b.causal};
          t.dtype = dt;
          t.layout = b.layout;
          out.push_back(make(t, bwd, false));
        }
    return out;
  }
  // inputs {q, k, v} or, with backward=true, {q, k, v, o, dout, lse}; attributes causal, scale,
  // window_left, window_right, softcap, layout ("bshd" | "bhsd"), deterministic (backward).
  // fp8=true (attention_fp8): inputs {q, k, v, q_descale, k_descale, v_descale}, e4m3 q, k, v.
  // layout "thd" (variable length): inputs {q, k, v, cu_seqlens_q, cu_seqlens_k} or {q, k, v,
  // o, dout, lse, cu_seqlens_q, cu_seqlens_k}, and the attributes max_seqlen_q, max_seqlen_k.
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    attrs.expect_only("attention", {"backward", "causal", "scale", "window_left", "window_right", "softcap", "layout",
                                    "deterministic", "max_seqlen_q", "max_seqlen_k", "fp8"});
    const bool bwd = attrs.get_bool("attention", "backward", false);
    // fp8: attention_fp8 (e4m3 q, k, v, then their descales), a forward only. The op is named by
    // the attribute, not guessed from q's dtype, so that a wrong dtype is reported as one.
    const bool fp8 = attrs.get_bool("attention", "fp8", false);
    if (fp8 && bwd) HK_THROW(kNotSupported, "attention_fp8: e4m3 attention has a forward only");
    const AttentionOptions opt = options_from(bwd ? "attention_backward" : fp8 ? "attention_fp8" : "attention", attrs);
    const bool thd = opt.layout == AttentionLayout::kTHD;
    if (fp8 && thd) HK_THROW(kNotSupported, "attention_fp8: the packed (thd) layout is not offered for e4m3");
    const char* op = thd ? (bwd ? "attention_varlen_backward" : "attention_varlen")
                         : (bwd ? "attention_backward" : fp8 ? "attention_fp8" : "attention");
    const size_t n = (bwd || fp8 ? 6u : 3u) + (thd ? 2u : 0u);
    if (in.size() != n)
      HK_THROW(kValue, op, ": takes ", n, " inputs (q, k, v", bwd ? ", o, dout, lse" : fp8 ? ", q_descale, k_descale, v_descale" : "",
               thd ? ", cu_seqlens_q, cu_seqlens_k" : "", "), got ", in.size());
    const int64_t max_q = attrs.get_int(op, "max_seqlen_q", -1), max_k = attrs.get_int(op, "max_seqlen_k", -1);
    if (!thd && (max_q != -1 || max_k != -1))
      HK_THROW(kValue, op, ": max_seqlen_q / max_seqlen_k belong to layout \"thd\" (variable length)");
    if (thd && (max_q < 0 || max_k < 0))
      HK_THROW(kValue, op, ": layout \"thd\" needs max_seqlen_q and max_seqlen_k (>= 0), got ", max_q, " and ", max_k);
    std::vector<const TensorView*> ptrs;
    for (size_t i = 0; i < n - (thd ? 2 : 0); ++i) ptrs.push_back(&in[i]);
    const VarlenIn vl{&in[n - 2], &in[n - 1], max_q, max_k};
    auto p = std::make_shared<AttentionProblem>(checked(op, ptrs, opt, bwd, thd ? &vl : nullptr, fp8));
    p->synthesize_lse = false;  // the caller's lse: no per-row values to make up (see the member)
    return p;
  }
};

HK_REGISTER_FAMILY(AttentionFamily);

bool empty_problem(const AttentionProblem& p) {
  return p.batch == 0 || p.seqlen_q == 0 || p.heads_q == 0 || (p.is_varlen() && p.total_q == 0);
}

void forward(const char* op, const TensorView& q, const TensorView& k, const TensorView& v, const VarlenIn* vl,
             const TensorView& o, const TensorView& lse, const AttentionOptions& options, cudaStream_t stream) {
  AttentionProblem p = checked(op, {&q, &k, &v}, options, false, vl);
  Dims dq = dims_of(op, "q", q, options.layout), d_o = dims_of(op, "o", o, options.layout);
  expect_same(op, "o", o, d_o, "q", q, dq);
  check_lse(op, lse, p);
  p.str_o = d_o.st;
  p.align_bytes = std::min(p.align_bytes, min_align({&o, &lse}));
  if (empty_problem(p)) return;
  std::vector<TensorView> in = {q, k, v};
  if (vl) in.insert(in.end(), {*vl->cu_q, *vl->cu_k});
  Registry::get().pick(p).run(p, Operands{in, {o, lse}}, stream);
}

void backward(const char* op, const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
              const TensorView& dout, const TensorView& lse, const VarlenIn* vl, const TensorView& dq,
              const TensorView& dk, const TensorView& dv, const AttentionOptions& options, cudaStream_t stream) {
  AttentionProblem p = checked(op, {&q, &k, &v, &o, &dout, &lse}, options, true, vl);
  Dims d_q = dims_of(op, "q", q, options.layout), d_k = dims_of(op, "k", k, options.layout);
  Dims g_q = dims_of(op, "dq", dq, options.layout), g_k = dims_of(op, "dk", dk, options.layout),
       g_v = dims_of(op, "dv", dv, options.layout);
  expect_same(op, "dq", dq, g_q, "q", q, d_q);
  expect_same(op, "dk", dk, g_k, "k", k, d_k);
  expect_same(op, "dv", dv, g_v, "k", k, d_k);
  p.str_dq = g_q.st, p.str_dk = g_k.st, p.str_dv = g_v.st;
  p.align_bytes = std::min(p.align_bytes, min_align({&dq, &dk, &dv}));
  if (p.batch == 0 || p.heads_q == 0) return;
  if (p.is_varlen() ? p.total_q == 0 && p.total_k == 0 : p.seqlen_q == 0 && p.seqlen_k == 0) return;
  std::vector<TensorView> in = {q, k, v, o, dout, lse};
  if (vl) in.insert(in.end(), {*vl->cu_q, *vl->cu_k});
  Registry::get().pick(p).run(p, Operands{in, {dq, dk, dv}}, stream);
}

}  // namespace

void attention_fp8(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& q_descale,
                   const TensorView& k_descale, const TensorView& v_descale, const TensorView& o, const TensorView& lse,
                   const AttentionOptions& options, cudaStream_t stream) {
  const char* op = "attention_fp8";
  AttentionProblem p = checked(op, {&q, &k, &v, &q_descale, &k_descale, &v_descale}, options, false, nullptr, true);
  if (o.dtype != DType::kBF16) HK_THROW(kType, op, ": o is ", to_string(o.dtype), ", expected bf16 (e4m3 in, bf16 out)");
  const Dims dq = dims_of(op, "q", q, options.layout, true), d_o = dims_of(op, "o", o, options.layout);
  if (d_o.b != dq.b || d_o.s != dq.s || d_o.h != dq.h || d_o.d != dq.d)
    HK_THROW(kValue, op, ": o has shape [", shape_to_string(o.shape), "] but q has [", shape_to_string(q.shape), "]");
  check_lse(op, lse, p);
  p.str_o = d_o.st;
  p.align_bytes = std::min(p.align_bytes, min_align({&o, &lse}));
  if (empty_problem(p)) return;
  Registry::get().pick(p).run(p, Operands{{q, k, v, q_descale, k_descale, v_descale}, {o, lse}}, stream);
}

void attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
               const TensorView& lse, const AttentionOptions& options, cudaStream_t stream) {
  forward("attention", q, k, v, nullptr, o, lse, options, stream);
}

void attention_backward(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                        const TensorView& dout, const TensorView& lse, const TensorView& dq, const TensorView& dk,
                        const TensorView& dv, const AttentionOptions& options, cudaStream_t stream) {
  backward("attention_backward", q, k, v, o, dout, lse, nullptr, dq, dk, dv, options, stream);
}

void attention_varlen(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& cu_seqlens_q,
                      const TensorView& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k, const TensorView& o,
                      const TensorView& lse, const AttentionOptions& options, cudaStream_t stream) {
  AttentionOptions opt = options;
  opt.layout = AttentionLayout::kTHD;
  const VarlenIn vl{&cu_seqlens_q, &cu_seqlens_k, max_seqlen_q, max_seqlen_k};
  forward("attention_varlen", q, k, v, &vl, o, lse, opt, stream);
}

void attention_varlen_backward(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                               const TensorView& dout, const TensorView& lse, const TensorView& cu_seqlens_q,
                               const TensorView& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
                               const TensorView& dq, const TensorView& dk, const TensorView& dv,
                               const AttentionOptions& options, cudaStream_t stream) {
  AttentionOptions opt = options;
  opt.layout = AttentionLayout::kTHD;
  const VarlenIn vl{&cu_seqlens_q, &cu_seqlens_k, max_seqlen_q, max_seqlen_k};
  backward("attention_varlen_backward", q, k, v, o, dout, lse, &vl, dq, dk, dv, opt, stream);
}

}  // namespace hk
