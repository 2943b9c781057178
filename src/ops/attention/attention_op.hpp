// attention/attention_op.hpp — the attention op contract: problem, args, the mask rule shared by
// the reference and every kernel, flops/bytes, reference, tolerance.
//
// Forward:  in {q, k, v}                    out {o, lse}
// Backward: in {q, k, v, o, dout, lse}      out {dq, dk, dv}
// q-like tensors (q, o, dout, dq) are [B, Sq, Hq, D] (layout bshd) or [B, Hq, Sq, D] (bhsd),
// k-like ones (k, v, dk, dv) [B, Sk, Hkv, D] or [B, Hkv, Sk, D]; each carries its own (batch,
// seq, head) strides in elements, the last dimension contiguous. lse is f32 [B, Hq, Sq],
// contiguous. One dtype (f16 or bf16) for the rest; math in f32. The kernels see pointers and
// (b, s, h) strides only, so the layout is just the order of the logical shape.
//
// Variable length (layout thd, FlashAttention's varlen): q-like tensors are packed
// [total_q, Hq, D], k-like ones [total_k, Hkv, D], and two int32 inputs appended to inputs()
// (cu_seqlens_q, cu_seqlens_k, [B + 1] prefix sums) give sequence b the rows cu[b] .. cu[b+1]-1.
// The batch stride is 0, Sq / Sk are the maxima (max_seqlen_q / _k: the grid's extent), lse is
// f32 [Hq, total_q]. Every kernel reads the row offset and the lengths of its sequence through
// attn_seq() and indexes lse through AttentionArgs::lse_index(); the mask rule takes the
// per-sequence lengths (causal is bottom-right aligned per sequence).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/attention.hpp"
#include "hk/registry.hpp"

#include "common/host_device.hpp"

namespace hk {

// Element strides of one [B, S, H, D] operand, whatever its logical layout; D's stride is 1.
struct AttnStrides {
  int64_t b = 0, s = 0, h = 0;
  bool operator==(const AttnStrides& o) const { return b == o.b && s == o.s && h == o.h; }
};

// The keys query row i may attend: [lo, hi] (empty when lo > hi). The one place the mask rule
// lives: wl / wr are the window (-1 unbounded) with causal already folded into wr (0).
struct KeyRange {
  int64_t lo, hi;
};
HK_HOST_DEVICE inline KeyRange attn_key_range(int64_t i, int64_t sq, int64_t sk, int64_t wl, int64_t wr) {
  const int64_t diag = i + sk - sq;  // bottom-right aligned diagonal
  int64_t lo = wl >= 0 ? diag - wl : 0;
  int64_t hi = wr >= 0 ? diag + wr : sk - 1;
  if (lo < 0) lo = 0;
  if (hi > sk - 1) hi = sk - 1;
  return {lo, hi};
}

struct AttentionProblem final : Problem {
  // thd: batch = the number of sequences, seqlen_q / seqlen_k = max_seqlen_q / max_seqlen_k.
  int64_t batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1, head_dim = 64;
  // thd only: the packed row counts, and the prefix sums when they are known on the host (the
  // test and bench problems: inputs() writes them into cu_seqlens); empty for a problem built
  // from views, whose cu_seqlens stay on the device (the reference reads them from its inputs).
  int64_t total_q = 0, total_k = 0;
  std::vector<int64_t> cu_q, cu_k;
  DType dtype = DType::kBF16;
  AttentionLayout layout = AttentionLayout::kBSHD;
  bool causal = false;
  int64_t window_left = -1, window_right = -1;  // as given (causal not folded in)
  double softcap = 0.0;
  double scale = 0.0;  // resolved: 1 / sqrt(D) when constructed with <= 0
  bool backward = false;
  bool deterministic = false;  // backward only
  // Whether inputs() fills lse with the values a forward would give (one per row: the test and
  // bench data). Problems posed by a caller's tensors (make_problem: the Python ops) leave it
  // off: their lse exists, and at S = 8192, 32 heads the values alone cost milliseconds of host
  // time per call.
  bool synthesize_lse = true;
  // Strides of q, k, v, o (both directions), dout, dq, dk, dv (backward). Contiguous in `layout`
  // unless set otherwise (default_strides()).
  AttnStrides str_q, str_k, str_v, str_o, str_do, str_dq, str_dk, str_dv;

  AttentionProblem() = default;
  AttentionProblem(int64_t b, int64_t s_q, int64_t s_k, int64_t h_q, int64_t h_kv, int64_t d, DType dt,
                   bool bwd = false, AttentionLayout lay = AttentionLayout::kBSHD);

  // Variable-length problem of B = lens_q.size() sequences (layout thd): the prefix sums, totals
  // and maxima from the lengths.
  static AttentionProblem varlen(const std::vector<int64_t>& lens_q, const std::vector<int64_t>& lens_k,
                                 int64_t h_q, int64_t h_kv, int64_t d, DType dt, bool bwd = false);
  bool is_varlen() const { return layout == AttentionLayout::kTHD; }
  // Sequence b's lengths (the maxima for fixed-length layouts; cu_q / cu_k must be known for thd).
  int64_t seq_q(int64_t b) const { return is_varlen() ? cu_q[b + 1] - cu_q[b] : seqlen_q; }
  int64_t seq_k(int64_t b) const { return is_varlen() ? cu_k[b + 1] - cu_k[b] : seqlen_k; }
  // Extent of the q-like and k-like tensors along their sequence dimension (Sq, or thd total_q).
  int64_t rows_q() const { return is_varlen() ? total_q : seqlen_q; }
  int64_t rows_k() const { return is_varlen() ? total_k : seqlen_k; }
  // Contiguous strides of a q-like (kv = false) or k-like operand in `layout`.
  AttnStrides default_strides(bool kv) const;
  void reset_strides();
  // Window as the kernels use it: causal folded into the right edge.
  int64_t eff_window_right() const { return causal ? 0 : window_right; }
  KeyRange keys(int64_t i) const { return attn_key_range(i, seqlen_q, seqlen_k, window_left, eff_window_right()); }
  KeyRange keys(int64_t b, int64_t i) const {
    return attn_key_range(i, seq_q(b), seq_k(b), window_left, eff_window_right());
  }
  bool masked() const { return causal || window_left >= 0 || window_right >= 0; }
  int64_t group() const { return heads_q / heads_kv; }
  double default_scale() const;
  // Attended (query, key) pairs per (batch, head): what flops() counts.
  double attended_pairs() const;
  // "" when every operand's base is 16-byte aligned and its (b, s, h) strides are multiples of 8
  // elements (16-byte rows for cp.async); otherwise why not. The tensor-core rungs need it.
  std::string rows_16b() const;

  std::string family() const override { return "attention"; }
  std::string key() const override;
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  bool reference_at(const std::vector<HostTensor>& in, int output_index, const std::vector<int64_t>& flat,
                    std::vector<double>& values) const override;
  bool reference_at_thd(const std::vector<HostTensor>& in, int output_index, const std::vector<int64_t>& flat,
                        std::vector<double>& values) const;
  Tolerance tolerance(int output_index) const override;
  Attrs attrs() const override;

  // The unit roundoff of the 16-bit dtype: 2^-8 (bf16), 2^-11 (f16).
  double unit_roundoff() const;
  // Set by reference() / reference_at(): each output's root mean square over its finite values,
  // the scale the tolerance's absolute term is relative to (see tolerance()).
  mutable std::vector<double> out_rms;
  // e4m3: the largest |v x v_descale| of the inputs (note_v_absmax, from reference()), the scale
  // of O's tolerance.
  mutable double v_absmax = 1.0;
  void note_v_absmax(const std::vector<HostTensor>& in) const;
};

// What a rung's launcher receives. Forward: o, lse written. Backward: dq, dk, dv written.
struct AttentionArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *dout = nullptr;
  const float* lse_in = nullptr;  // backward
  void* out = nullptr;            // forward: o; backward: dq
  float* lse_out = nullptr;       // forward
  void *dk = nullptr, *dv = nullptr;
  int64_t batch = 0, seqlen_q = 0, seqlen_k = 0, heads_q = 0, heads_kv = 0, head_dim = 0;
  AttnStrides sq, sk, sv, so, sdo, sdq, sdk, sdv;  // so: o (backward input) or the forward's output
  float scale = 0.f, softcap = 0.f;
  int64_t window_left = -1, window_right = -1;  // causal folded in
  DType dtype = DType::kBF16;
  bool backward = false, deterministic = false;
  // thd: the prefix sums (device, [batch + 1]) and the packed row counts; nullptr otherwise.
  const int32_t *cu_q = nullptr, *cu_k = nullptr;
  int64_t total_q = 0, total_k = 0;
  // e4m3 forward: per (batch, kv head) descales at [b * Hkv + h] (device f32; nullptr: 1)
  const float *q_descale = nullptr, *k_descale = nullptr, *v_descale = nullptr;
  // lse (and the backward's per-row scratch, Delta, dQ's f32 accumulator) element of row i of
  // sequence b, query head h: lse_b b + lse_h h + q0 + i, q0 the sequence's first packed row.
  // [B, Hq, Sq]: (Hq Sq, Sq); thd [Hq, total_q]: (0, total_q).
  int64_t lse_b = 0, lse_h = 0;
  HK_HOST_DEVICE int64_t lse_index(int64_t b, int64_t h, int64_t row) const { return b * lse_b + h * lse_h + row; }
  // Rows the per-row passes (Delta, dQ's conversion) walk: (B', S') with B' S' Hq rows, row
  // (b', h, i) at lse_index(b', h, i) and operand row (b', i): (B, Sq) or, thd, (1, total_q).
  HK_HOST_DEVICE int64_t row_batches() const { return cu_q ? 1 : batch; }
  HK_HOST_DEVICE int64_t row_seqlen() const { return cu_q ? total_q : seqlen_q; }
  static AttentionArgs bind(const AttentionProblem& p, const Operands& ops);
};

// Sequence b's first packed rows and lengths: (0, 0, Sq, Sk) for fixed-length layouts. For thd,
// the prefix sums are clamped to [0, total] and made non-decreasing, so no prefix sum, however
// wrong, makes a kernel read or write outside the tensors (a sequence longer than the maximum
// the grid was sized for has its rows past the maximum left uncomputed).
struct AttnSeq {
  int64_t q0, k0, sq, sk;
};
// Rows [first, first + return) of one sequence from a clamped prefix-sum pair.
HK_HOST_DEVICE inline int64_t attn_span(const int32_t* cu, int64_t b, int64_t total, int64_t& first) {
  int64_t s = cu[b], e = cu[b + 1];
  s = s < 0 ? 0 : (s > total ? total : s);
  e = e < s ? s : (e > total ? total : e);
  first = s;
  return e - s;
}
HK_HOST_DEVICE inline AttnSeq attn_seq(const AttentionArgs& a, int64_t b) {
  if (!a.cu_q) return {0, 0, a.seqlen_q, a.seqlen_k};
  AttnSeq r;
  r.sq = attn_span(a.cu_q, b, a.total_q, r.q0);
  r.sk = attn_span(a.cu_k, b, a.total_k, r.k0);
  return r;
}

// The Hopper backward's (v07) per-row scratch (lse, Delta, dQ's accumulator, the deterministic
// counters) is kept in 64-row query blocks. Fixed lengths: [B Hq][sq_pad] with sq_pad = Sq
// rounded up to 64, so that (b, h)'s block m is (b Hq + h) (sq_pad / 64) + m. Variable length
// (thd): [Hq][sq_pad] with sequence b's rows from thd_pad_row0(b) on, a multiple of 64: every
// sequence starts a block of its own, as the bulk copies of lse and Delta and dQ's bulk
// reduction (whole 64-row tiles) need.
// With valid prefix sums, sequence b's blocks end before sequence b + 1's begin: with
// x = q0 + 64 b, they end by 64 floor(x / 64) + 64 ceil(len / 64) <= 64 floor((x + len + 64) / 64),
// where b + 1's start. However wrong the prefix sums, every block lies below total_q + 64 (B + 1)
// (the clamped q0 + len <= total_q): thd_rows_pad rounds that up to whole blocks.
HK_HOST_DEVICE inline int64_t thd_pad_row0(int64_t b, int64_t q0) { return (q0 + 64 * b) / 64 * 64; }
HK_HOST_DEVICE inline int64_t thd_rows_pad(int64_t batch, int64_t total_q) {
  return (total_q + 64 * (batch + 1) + 63) / 64 * 64;
}

// The Hopper backward's (v07) grid: the CTA of key block n (keys [n bn, n bn + bn)) visits the
// query blocks of bm rows that see some key of its block, in order. By attn_key_range's rule,
// the first and last query rows that see key j (clamped to [0, Sq] and [-1, Sq - 1]: empty when
// first > last) are:
HK_HOST_DEVICE inline int attn_q_first(int64_t sq, int64_t sk, int64_t wr, int64_t j) {
  const int64_t q = wr >= 0 ? j - (sk - sq) - wr : 0;
  return static_cast<int>(q < 0 ? 0 : (q > sq ? sq : q));
}
HK_HOST_DEVICE inline int attn_q_last(int64_t sq, int64_t sk, int64_t wl, int64_t j) {
  const int64_t q = wl >= 0 ? j - (sk - sq) + wl : sq - 1;
  return static_cast<int>(q < -1 ? -1 : (q > sq - 1 ? sq - 1 : q));
}
// The query blocks [lo, hi) CTA n visits: the rows that see key j form an interval whose ends
// grow with j, and neighbouring keys' intervals touch, so the union over the block is
// [q_first(first key), q_last(last key)].
HK_HOST_DEVICE inline void attn_bwd_query_blocks(int64_t sq, int64_t sk, int64_t wl, int64_t wr, int bm, int bn,
                                                 int n, int& lo, int& hi) {
  const int64_t j0 = int64_t(n) * bn;
  const int64_t j1 = j0 + bn - 1 < sk ? j0 + bn - 1 : sk - 1;
  const int qa = attn_q_first(sq, sk, wr, j0), qb = attn_q_last(sq, sk, wl, j1);
  lo = qa / bm;
  hi = qa <= qb ? qb / bm + 1 : lo;
}
// The last key block whose CTA visits query block m (the CTAs that do are consecutive): the
// deterministic dQ adds of block m take turns from that one down. Every row's window starts at
// or before key Sk - 1 (bottom-right alignment), so the block's last row sees the largest key
// any of its rows sees, unless it sees none (then no row of the block sees a key and no CTA
// visits the block).
HK_HOST_DEVICE inline int attn_bwd_last_key_block(int64_t sq, int64_t sk, int64_t wr, int bm, int bn, int m) {
  const int last = static_cast<int>((sk - 1) / bn);
  if (wr < 0) return last;
  const int64_t r = (int64_t(m) + 1) * bm < sq ? (int64_t(m) + 1) * bm - 1 : sq - 1;
  const int64_t j = r + (sk - sq) + wr;
  return j < 0 ? 0 : (j / bn < last ? static_cast<int>(j / bn) : last);
}

}  // namespace hk
