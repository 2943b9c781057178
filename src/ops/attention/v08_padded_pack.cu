// attention/v08_padded_pack.cu
//
// Rung 8: every head dim up to 256 and operands in any strides on the tensor-core rungs. v05,
// v06 and v07 take a D that is a multiple of 8 up to 256 with 16-byte aligned rows (TMA's rules), v03
// and v04 D in {32, 64, 96, 128}; a q sliced from a fused QKV with rows of an odd length or a head
// dim of 37 fell to v02's CUDA cores. Here q, k, v (and, backward, o and dout) are copied once into contiguous
// scratch with D zero-padded (to a multiple of 8 for v05 / v06 / v07; for v04, to 32, 64, 96 or 128),
// and the chosen rung runs on the copies; o (backward: dq, dk, dv) comes back through scratch,
// its first D columns copied to the caller's strides. lse is passed through: its layout does not
// depend on D. Zero columns change nothing: q.k over the padded dims adds zeros, so S, P and lse
// are the caller's (the scale stays the caller's 1/sqrt(D)); P V's extra columns are zero and
// dropped; the backward's Delta = rowsum(dout * o) gains zero terms, and dq, dk, dv's extra
// columns are never read.
// Each copy streams its tensor once (read + write): at B16 S1024 H25 D80 the copies cost ~230 us
// of v08's 733 us forward when D = 80 still went through it (H200, 2026-12-02); v05 and v07 now
// take D = 80 in place, by TMA's zero fill.
// Variable length (thd) keeps its packed layout in the copies: v05 and v07 take it.
// Adds over v07: no head dim up to 256 and no operand layout outside the tensor-core rungs.
// Needs: bf16 or f16; D <= 256; a padded problem some tensor-core
// rung takes; a problem those rungs take as given is left to them (supports() says so).
// Kernels: pack_rows_kernel / unpack_rows_kernel below, then the chosen rung.
// Run:   hk bench attention --variant 'v08*' --shape 1024x37
#include <cstdint>
#include <string>

#include "attention/attention_op.hpp"
#include "common/launch.cuh"
#include "core/scratch.hpp"
#include "hk/error.hpp"

namespace hk::attention_v08_padded_pack {
namespace {

constexpr int kThreads = 256;

// One [B, S, H, D] operand as its rows: row (b, s, h) at b * sb + s * ss + h * sh.
struct Rows {
  int64_t batch, seq, heads;
  AttnStrides st;
  __host__ __device__ int64_t count() const { return batch * seq * heads; }
  __device__ int64_t offset(int64_t r) const {
    const int64_t h = r % heads, s = (r / heads) % seq, b = r / (heads * seq);
    return b * st.b + s * st.s + h * st.h;
  }
};

// Row r of src (d elements, any alignment) into row r of the contiguous dst (dp elements, a
// multiple of 8), zeros past d; one thread per 16 bytes of dst.
__global__ void __launch_bounds__(kThreads)
    pack_rows_kernel(const uint16_t* __restrict__ src, Rows rows, int64_t d, uint16_t* __restrict__ dst, int64_t dp) {
  const int64_t chunks = dp / 8, i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= rows.count() * chunks) return;
  const int64_t r = i / chunks, c0 = (i % chunks) * 8;
  const uint16_t* s = src + rows.offset(r) + c0;
  union {
    uint4 v;
    uint16_t e[8];
  } u;
#pragma unroll
  for (int j = 0; j < 8; ++j) u.e[j] = c0 + j < d ? s[j] : uint16_t(0);
  *reinterpret_cast<uint4*>(dst + r * dp + c0) = u.v;
}

// Row r of the contiguous src (dp elements) back to row r of dst, its first d elements only.
__global__ void __launch_bounds__(kThreads)
    unpack_rows_kernel(const uint16_t* __restrict__ src, int64_t dp, uint16_t* __restrict__ dst, Rows rows, int64_t d) {
  const int64_t chunks = dp / 8, i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= rows.count() * chunks) return;
  const int64_t r = i / chunks, c0 = (i % chunks) * 8;
  if (c0 >= d) return;
  union {
    uint4 v;
    uint16_t e[8];
  } u;
  u.v = *reinterpret_cast<const uint4*>(src + r * dp + c0);
  uint16_t* t = dst + rows.offset(r) + c0;
#pragma unroll
  for (int j = 0; j < 8; ++j)
    if (c0 + j < d) t[j] = u.e[j];
}

unsigned blocks_for(int64_t threads) { return static_cast<unsigned>(ceil_div(threads, kThreads)); }

// The q-like (kv = false) or k-like rows of p with strides st.
Rows rows_of(const AttentionProblem& p, bool kv, const AttnStrides& st) {
  return {p.is_varlen() ? 1 : p.batch, kv ? p.rows_k() : p.rows_q(), kv ? p.heads_kv : p.heads_q, st};
}

// p with head dim dp, contiguous operands in scratch (bshd, or thd for a variable-length batch).
AttentionProblem padded(const AttentionProblem& p, int64_t dp) {
  AttentionProblem q = p;  // scale, masks, softcap, lengths and flags as the caller's
  q.head_dim = dp;
  if (!q.is_varlen()) q.layout = AttentionLayout::kBSHD;
  q.reset_strides();
  q.align_bytes = 256;
  return q;
}

// The padded head dim and the rung that serves it: the Hopper rung (v06 / v05 forward, v07 backward)
// at D rounded up to a multiple of 8 (its rule), else an mma.sync rung (v03, v04) at the
// smallest of 32, 64, 96, 128 that holds D. Each is asked directly, not through the dispatch,
// which lists this rung.
struct Plan {
  int64_t dp = 0;
  const Variant* inner = nullptr;
};
const Variant* rung(const char* name) { return Registry::get().variant("attention", name); }
// The Hopper rung for a problem like p with head dim d: v07 backward; forward v06 where it runs
// (fixed lengths), else v05.
const Variant* hopper_rung(const AttentionProblem& p, int64_t d) {
  if (p.backward) return rung("v07_wgmma_backward");
  if (const Variant* v = rung("v06_pingpong_overlap"); v && v->supports(padded(p, d)).empty()) return v;
  return rung("v05_wgmma_tma");
}
Plan plan(const AttentionProblem& p) {
  const int64_t d8 = ceil_div(p.head_dim, 8) * 8;
  if (const Variant* v = hopper_rung(p, d8); v && v->supports(padded(p, d8)).empty()) return {d8, v};
  const Variant* mma = rung(p.backward ? "v04_fa2_backward" : "v03_fa2_mma_sync");
  for (int64_t dp : {32, 64, 96, 128})
    if (dp >= p.head_dim && mma && mma->supports(padded(p, dp)).empty()) return {dp, mma};
  return {};
}

std::string attention_v08_supports(const AttentionProblem& p) {
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return "bf16 or f16 only (the tensor-core rungs' dtypes)";
  if (p.head_dim > 256) return "D = " + std::to_string(p.head_dim) + ": the tensor-core rungs stop at 256";
  if (const Variant* v = hopper_rung(p, p.head_dim); v && v->supports(p).empty())
    return v->name() + " takes this problem as it is: nothing to pack";
  const Plan pl = plan(p);
  if (!pl.inner) return "no tensor-core rung takes the padded problem either";
  if (pl.dp == p.head_dim && p.rows_16b().empty())
    return pl.inner->name() + " takes D = " + std::to_string(p.head_dim) + " as it is: nothing to pack";
  return "";
}

// The problem `a` poses, for plan() (the caller's lengths stay on the device).
AttentionProblem problem_of(const AttentionArgs& a) {
  AttentionProblem p;
  p.batch = a.batch, p.seqlen_q = a.seqlen_q, p.seqlen_k = a.seqlen_k;
  p.heads_q = a.heads_q, p.heads_kv = a.heads_kv, p.head_dim = a.head_dim;
  p.total_q = a.total_q, p.total_k = a.total_k;
  p.dtype = a.dtype;
  p.layout = a.cu_q ? AttentionLayout::kTHD : AttentionLayout::kBSHD;  // strides say the rest
  p.window_left = a.window_left, p.window_right = a.window_right;     // causal already folded in
  p.softcap = a.softcap, p.scale = a.scale;
  p.backward = a.backward, p.deterministic = a.deterministic;
  p.synthesize_lse = false;
  p.str_q = a.sq, p.str_k = a.sk, p.str_v = a.sv, p.str_o = a.so;
  p.str_do = a.sdo, p.str_dq = a.sdq, p.str_dk = a.sdk, p.str_dv = a.sdv;
  return p;  // plan() reads it through padded(), whose operands are the aligned copies
}

void attention_v08_launch(const AttentionArgs& a, cudaStream_t stream) {
  const AttentionProblem p = problem_of(a);
  const Plan pl = plan(p);
  if (!pl.inner) HK_THROW(kNotSupported, "attention/v08_padded_pack: no tensor-core rung takes ", p.key(), " padded");
  const AttentionProblem q = padded(p, pl.dp);
  const int64_t d = p.head_dim, dp = pl.dp;
  // The caller's tensors and their rows: inputs are copied in, outputs computed into scratch
  // and copied out.
  struct Slot {
    const void* src;  // input
    void* dst;        // output
    Rows rows;
    int64_t bytes;
    void* copy = nullptr;
  };
  auto slot = [&](const void* src, void* dst, bool kv, const AttnStrides& st) {
    Rows r = rows_of(p, kv, st);
    return Slot{src, dst, r, ceil_div(r.count() * dp * 2, 256) * 256};
  };
  std::vector<Slot> in = {slot(a.q, nullptr, false, a.sq), slot(a.k, nullptr, true, a.sk),
                          slot(a.v, nullptr, true, a.sv)};
  std::vector<Slot> out;
  if (a.backward) {
    in.push_back(slot(a.o, nullptr, false, a.so));
    in.push_back(slot(a.dout, nullptr, false, a.sdo));
    out = {slot(nullptr, a.out, false, a.sdq), slot(nullptr, a.dk, true, a.sdk), slot(nullptr, a.dv, true, a.sdv)};
  } else {
    out = {slot(nullptr, a.out, false, a.so)};
  }
  int64_t total = 0;
  for (const Slot& s : in) total += s.bytes;
  for (const Slot& s : out) total += s.bytes;
  detail::StreamWorkspace ws(stream, "attention_v08_operands", total);
  char* next = static_cast<char*>(ws.get());
  for (Slot& s : in) {
    s.copy = next;
    next += s.bytes;
    if (s.rows.count() == 0) continue;
    pack_rows_kernel<<<blocks_for(s.rows.count() * (dp / 8)), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(s.src), s.rows, d, static_cast<uint16_t*>(s.copy), dp);
    HK_CHECK_LAUNCH("attention_v08 pack_rows_kernel");
  }
  for (Slot& s : out) {
    s.copy = next;
    next += s.bytes;
    // thd: rows outside every sequence (prefix sums that stop short of the total) are written by
    // no kernel; zeros keep their copy-back defined
    if (a.cu_q) HK_CHECK_CUDA(cudaMemsetAsync(s.copy, 0, size_t(s.bytes), stream));
  }

  // The inner rung's operands, in the family's order (attention_op.hpp).
  const std::vector<int64_t> none;
  Operands ops;
  for (const Slot& s : in) ops.in.emplace_back(s.copy, a.dtype, none);
  if (a.backward) ops.in.emplace_back(a.lse_in, DType::kF32, none);
  if (a.cu_q) {
    ops.in.emplace_back(a.cu_q, DType::kI32, none);
    ops.in.emplace_back(a.cu_k, DType::kI32, none);
  }
  for (const Slot& s : out) ops.out.emplace_back(s.copy, a.dtype, none);
  if (!a.backward) ops.out.emplace_back(a.lse_out, DType::kF32, none);
  pl.inner->run(q, ops, stream);

  for (const Slot& s : out) {
    if (s.rows.count() == 0) continue;
    unpack_rows_kernel<<<blocks_for(s.rows.count() * (dp / 8)), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(s.copy), dp, static_cast<uint16_t*>(s.dst), s.rows, d);
    HK_CHECK_LAUNCH("attention_v08 unpack_rows_kernel");
  }
}

}  // namespace

HK_REGISTER_VARIANT(AttentionProblem, AttentionArgs, "attention", "v08_padded_pack",
                    "any head dim up to 256, any strides: q, k, v (o, dout) copied once into contiguous scratch "
                    "with D zero-padded, v05 / v07 (or v03 / v04) run on the copies",
                    80, kFlagProduction, attention_v08_supports, attention_v08_launch);

}  // namespace hk::attention_v08_padded_pack
