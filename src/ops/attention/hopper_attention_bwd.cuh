// attention/hopper_attention_bwd.cuh — the FlashAttention backward on TMA and wgmma (sm_90a).
//
// Three kernels per call:
//   1. prep: per query row, Delta = rowsum(dO o O) and lse * log2(e), into f32 arrays padded to
//      whole 64-row blocks (zero past Sq), so that the main kernel fetches a block's 64 values
//      with one 256-byte bulk copy each.
//   2. main: a CTA of three warpgroups owns 128 keys of one (batch, kv head) with K and V
//      resident in shared memory (loaded once by TMA). One producer thread streams 64-row
//      blocks of Q and dO (plus their lse and Delta) by TMA into a two-slot full/empty mbarrier
//      ring (common/pipeline.cuh), over every query head of the kv head's group (GQA sums dK
//      and dV in registers) and only over the query blocks that see the CTA's keys. Each of the
//      two consumer warpgroups (64 keys, 240 registers) runs per block:
//        S^T = K Q^T, dP^T = V dO^T   wgmma m64n64k16, both operands K-major in shared memory
//        P^T = exp2(S^T scale log2(e) - lse log2(e)), dS^T = P^T (dP^T - Delta) (times the
//                                     softcap's 1 - tanh^2), the range test only on blocks
//                                     the mask cuts
//        dV += P^T dO, dK += dS^T Q   wgmma m64nDk16 with P^T / dS^T from registers (S's
//                                     accumulator fragment is the A fragment) and dO / Q read
//                                     MN-major through the transpose bit
//        dQ += dS K                   dS^T staged in shared memory (double-buffered), both
//                                     operands MN-major (transpose bits on A and B); D = 128:
//                                     warpgroup w sums all 128 keys for D columns 64w..64w+63;
//                                     D = 64: warpgroup w sums its own 64 keys for all columns
//      and adds its 64 x 64 dQ tile into an f32 accumulator: D <= 128 by one bulk reduction
//      (cp.reduce.async.bulk, the tile staged in shared memory in the accumulator fragment's
//      order), D = 256 with red.global.add.v2.f32.
//      Overlap within a warpgroup: P^T's exponentials run while dP^T is in the tensor cores, and
//      the tensor-core queue per block is dV, dQ, dK, so that dQ's reductions run under dK.
//      D = 256: 64 keys per CTA; both warpgroups compute S^T and dP^T, and warpgroup w
//      accumulates dK and dV's columns 128w..128w+127 and dQ's in two 64-column tiles.
//      Deterministic (kDet, its own instantiations): the adds to a query block take turns in
//      key-block order, last key block first (a counter per block and column half, ptx/red.cuh),
//      so the sums are rounded in the same order every run; the grid is launched in that order
//      (last key block first), so a CTA only waits for CTAs started before it, and under a causal
//      mask, where each CTA reaches a block one step after the CTA above it, nobody waits in the
//      steady state. D <= 128 keeps the bulk reduction: one thread takes the turn, reduces, waits
//      for the reduction to complete and passes the turn on.
//   3. convert: dq = scale * accumulator, in dq's dtype and strides.
// D = 16 and 32 run 16- and 32-column tiles (RowLayout::kRowBytes: 32- and 64-byte rows under the 32-
// and 64-byte swizzles, as the forward's): the products' D dimension is 16 or 32 instead of a
// zero-filled 64 (m64n16k16 / m64n32k16 for dV, dK and dQ; one or two k16 steps for S^T and
// dP^T), and dQ's tiles are 64 x D.
// Variable length (thd): the same kernels over the packed tensors, as the forward does it: the
// maps span [total, H, D], a CTA (key block n of sequence b) starts its coordinates at the
// sequence's first packed rows and takes its lengths; the per-row scratch gives each sequence
// whole 64-row blocks of its own (thd_pad_row0), so that lse, Delta and dQ's tiles move in
// whole blocks as at fixed lengths.
// Needs: sm_90a; bf16 or f16; D a multiple of 8 up to 256; Sq, Sk >= 1 (thd: the maxima and the
// totals); every operand 16-byte aligned with (batch, seq, head) strides multiples of 8 elements
// (TMA, 16-byte rows); backward only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "attention/attn_common.cuh"
#include "attention/hopper_attention.cuh"
#include "common/ptx/red.cuh"
#include "core/scratch.hpp"

namespace hk::attn_hopper_bwd {

using attn_hopper::fast_exp2;
using attn_hopper::pack2;
using attn_hopper::smem_u32;
using attn_hopper::tma_load_4d;

// K, V, Q and dO tiles have the forward's rows (attn_hopper::RowLayout): 32- and 64-byte rows
// for D = 16 and 32, 128-byte column chunks from 64 on.
template <int kD_>
struct Cfg : attn_hopper::RowLayout<kD_> {
  static constexpr int kD = kD_;
  // D = 256 (kSplitD): 64 keys per CTA, and both consumer warpgroups compute S^T and dP^T for all
  // of them, each accumulating one half of dK's, dV's and dQ's columns. 64 keys x 256 columns of
  // dK and dV would take 256 registers a thread in one warpgroup; the halves take 128. The price
  // is S^T and dP^T computed twice: 14 units of tensor work where 10 would do.
  static constexpr bool kSplitD = kD == 256;
  static constexpr int kBlockN = kSplitD ? 64 : 128;  // keys per CTA: two consumer warpgroups of 64
  static constexpr int kCols = kSplitD ? kD / 2 : kD;  // dK / dV columns a warpgroup accumulates
  static constexpr int kBlockM = 64;   // query rows per step
  static constexpr int kStages = 2;
  static constexpr int kKVBytes = kBlockN * kD * 2;     // K or V
  static constexpr int kQBytes = kBlockM * kD * 2;      // one slot of Q or dO
  static constexpr int kDsBytes = kBlockN * kBlockM * 2;  // one buffer of dS^T [key][query]
  static constexpr int kStatBytes = kBlockM * 4;        // one slot of lse or Delta
  static constexpr int kThreads = 384;
  // Offsets from the 1024-byte aligned base: every tile starts on a swizzle atom.
  static constexpr int kOffK = 0;
  static constexpr int kOffV = kOffK + kKVBytes;
  static constexpr int kOffQ = kOffV + kKVBytes;
  static constexpr int kOffDo = kOffQ + kStages * kQBytes;
  static constexpr int kOffDs = kOffDo + kStages * kQBytes;
  static constexpr int kOffLse = kOffDs + 2 * kDsBytes;
  static constexpr int kOffDelta = kOffLse + kStages * kStatBytes;
  // dQ by bulk reduction (D <= 128; D = 256 has no room): one 64-row f32 tile per consumer
  // warpgroup, 64 columns (D = 16, 32: D columns), in the accumulator fragment's order (see
  // dq_tile_offset), added to global memory by one cp.reduce.async.bulk.
  static constexpr bool kBulkDq = !kSplitD;
  static constexpr int kTileCols = kD < 64 ? kD : 64;
  static constexpr int kDqTileBytes = 64 * kTileCols * 4;
  static constexpr int kOffDq = kOffDelta + kStages * kStatBytes;
  static constexpr int kOffBar = kOffDq + (kBulkDq ? 2 * kDqTileBytes : 0);
  static constexpr int kBarrierBytes = PipelineRing<kStages>::kBarrierBytes + 8;  // the ring, K/V's barrier
  static constexpr int kSmemBytes = 1024 + kOffBar + kBarrierBytes;
  // Bytes one ring slot receives: Q and dO tiles (full boxes, zero-filled past Sq), lse, Delta.
  static constexpr uint32_t kSlotTx = 2 * kQBytes + 2 * kStatBytes;
  // dQ: keys each warpgroup sums, and which 64-column chunks of D it owns (see the top); D <= 64:
  // its own 64 keys, all of D.
  static constexpr bool kOwnKeys = kD <= 64;
  static constexpr int kDqKeys = kOwnKeys ? 64 : kBlockN;
  static constexpr int kDqChunks = kSplitD ? 2 : 1;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
  static_assert(kKVBytes % 1024 == 0 && kQBytes % 1024 == 0 && kDsBytes % 1024 == 0, "swizzle atoms");
};

struct BwdParams {
  // thd: seqlen_q / seqlen_k hold the maxima until the kernel replaces them with its sequence's
  // lengths; sq_pad is the padded row count of one query head's blocks (thd_rows_pad)
  int seqlen_q, seqlen_k, sq_pad, heads_q, group;
  int head_dim;                       // D <= kD: TMA zero-fills the operands' columns past it
  int64_t window_left, window_right;  // causal folded in
  float scale, scale_log2;            // scale, scale * log2(e)
  float cap_in, cap_out;              // softcap: s = cap_out * tanh(x * cap_in) in log2 units
  const float* lse2;                  // [B Hq][sq_pad]: lse * log2(e)
  const float* delta;                 // [B Hq][sq_pad]
  float* dq_acc;                      // [B Hq][sq_pad][kD], or in tiles (kBulkDq, see dq_tile_offset)
  int* dq_turn;                       // [B Hq][sq_pad / 64][2]: deterministic adds' counters
  void *dk, *dv;
  AttnStrides sdk, sdv;
  // thd: the prefix sums and the packed row counts (the tensor maps span the packed tensors)
  const int32_t *cu_q, *cu_k;
  int64_t total_q, total_k;
};

// The per-row scratch's 64-row query blocks: thd_pad_row0 and thd_rows_pad (attention_op.hpp).

// thd: the scratch row of packed query row i of head h, in its sequence's blocks (the sequence:
// the last b with cu_q[b] <= i, by bisection); false when i lies in no sequence (prefix sums that
// stop short of the total, or that decrease: such rows are left unspecified).
__device__ __forceinline__ bool thd_scratch_row(const AttentionArgs& a, int64_t sq_pad, int64_t h, int64_t i,
                                                int64_t& row) {
  int lo = 0, hi = static_cast<int>(a.batch) - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.cu_q[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  int64_t first;
  const int64_t len = attn_span(a.cu_q, lo, a.total_q, first);
  row = h * sq_pad + thd_pad_row0(lo, first) + i - first;
  return i >= first && i < first + len;
}

// dQ's accumulator with bulk reduction: tiles of 64 rows x 64 columns (D = 16, 32: 64 rows x D
// columns), [query block][kD / 64] (the blocks as above), each in the order of a warpgroup's wgmma
// accumulator fragment, so that the warpgroup writes it to shared memory with conflict-free
// 16-byte stores and adds it with one contiguous bulk reduction: element 4j + 2h + c of thread t
// (row 16 (t / 32) + (t % 32) / 4 + 8h, column 8j + 2(t % 4) + c) is float (128 j + t) * 4 + 2h + c
// of the tile.
__host__ __device__ __forceinline__ int64_t dq_tile_offset(int64_t block, int kd, int chunk) {
  const int cols = kd < 64 ? kd : 64;
  return (block * (kd / cols) + chunk) * 64 * cols;
}

// d (+)= A B for one m64nNk16 step of dQ = dS K, both operands MN-major in shared memory: N = 64
// (a 64-column chunk of D), or N = D = 16 / 32 on the narrow tiles.
template <class T, int kN>
__device__ __forceinline__ void wgmma_dq(float (&d)[kN / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (kN == 64) {
    ptx::wgmma_m64n64k16<T, true, true>(d, desc_a, desc_b, scale_d);
  } else if constexpr (kN == 32) {
#define HK_ATTN_SS_TT(TY)                                                                        \
    asm volatile(                                                                                \
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %18, 0;\n\t"                                       \
        "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " "                               \
        "{" HK_WGMMA_REGS16 "}, %16, %17, p, 1, 1, 1, 1;\n}\n"                                   \
        : HK_WGMMA_ACC16(d)                                                                      \
        : "l"(desc_a), "l"(desc_b), "r"(scale_d))
    if constexpr (kBf16) HK_ATTN_SS_TT("bf16");
    else HK_ATTN_SS_TT("f16");
#undef HK_ATTN_SS_TT
  } else {
    static_assert(kN == 16, "N = 16, 32 or 64");
#define HK_ATTN_SS_TT(TY)                                                                        \
    asm volatile(                                                                                \
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %10, 0;\n\t"                                       \
        "wgmma.mma_async.sync.aligned.m64n16k16.f32." TY "." TY " "                               \
        "{" HK_WGMMA_REGS8 "}, %8, %9, p, 1, 1, 1, 1;\n}\n"                                      \
        : HK_WGMMA_ACC8(d)                                                                       \
        : "l"(desc_a), "l"(desc_b), "r"(scale_d))
    if constexpr (kBf16) HK_ATTN_SS_TT("bf16");
    else HK_ATTN_SS_TT("f16");
#undef HK_ATTN_SS_TT
  }
}

// The visiting rule of attention_op.hpp (attn_q_first, attn_q_last, attn_bwd_query_blocks,
// attn_bwd_last_key_block) at p's lengths and window.
__device__ __forceinline__ int q_first(const BwdParams& p, int64_t j) {
  return attn_q_first(p.seqlen_q, p.seqlen_k, p.window_right, j);
}
__device__ __forceinline__ int q_last(const BwdParams& p, int64_t j) {
  return attn_q_last(p.seqlen_q, p.seqlen_k, p.window_left, j);
}
template <class C>
__device__ __forceinline__ void query_blocks(const BwdParams& p, int n, int& lo, int& hi) {
  attn_bwd_query_blocks(p.seqlen_q, p.seqlen_k, p.window_left, p.window_right, C::kBlockM, C::kBlockN, n, lo, hi);
}
template <class C>
__device__ __forceinline__ int last_key_block(const BwdParams& p, int m) {
  return attn_bwd_last_key_block(p.seqlen_q, p.seqlen_k, p.window_right, C::kBlockM, C::kBlockN, m);
}

// tanh(x) = 1 - 2 / (1 + e^2x) by one MUFU.EX2 and one MUFU.RCP: absolute error about 1e-7
// (what the score needs: it enters an exponent), +-1 for large |x| (e^2x = inf gives rcp 0).
// tanhf's accurate sequence holds enough registers to spill the D = 128 consumers.
__device__ __forceinline__ float tanh_ex2(float x) {
  const float e = fast_exp2(x * 2.8853900817779268f);  // 2 log2(e)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.f + e));
  return fmaf(-2.f, r, 1.f);
}

// The elements of one 64-key x 64-row tile a thread holds: element 4j + 2h + c is key row
// `key_row + 8h`, query column 8j + 2(lane % 4) + c. kMask: the range test (the tile holds pairs
// the mask cuts, keys past Sk or rows past Sq) zeroes P^T where a row does not see the key.

// P^T = exp2(S^T scale log2(e) - lse log2(e)) in place of S^T: runs while dP^T's wgmma is in flight.
template <bool kMask>
__device__ __forceinline__ void probs(const BwdParams& p, float (&s)[32], const float* lse_s, int q0, const int (&qlo)[2],
                                      const int (&qhi)[2]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 lse = *reinterpret_cast<const float2*>(lse_s + 8 * j);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int i = 4 * j + 2 * h + c;
        float pr = fast_exp2(fmaf(s[i], p.scale_log2, -(c ? lse.y : lse.x)));
        if constexpr (kMask) {
          const int q = q0 + 8 * j + c;
          if (q < qlo[h] || q > qhi[h]) pr = 0.f;
        }
        s[i] = pr;
      }
  }
}

// dS^T = P^T (dP^T - Delta) in place of dP^T. kZeroDs: 0 where P^T is, whatever dP^T holds. In a
// thd tile the mask cuts, dP^T of a pair outside the problem comes from the neighbouring
// sequence's rows or keys (the caller's values, not TMA's zero fill), and 0 * inf there would
// carry a NaN into dQ or dK. Fixed-length tiles read zeros past Sq and Sk and skip the select.
template <bool kZeroDs>
__device__ __forceinline__ void dscores(const float (&pr)[32], float (&dp)[32], const float* delta_s) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 dl = *reinterpret_cast<const float2*>(delta_s + 8 * j);
#pragma unroll
    for (int i = 4 * j; i < 4 * j + 4; ++i) {
      const float ds = pr[i] * (dp[i] - (i % 2 ? dl.y : dl.x));
      dp[i] = kZeroDs && pr[i] == 0.f ? 0.f : ds;
    }
  }
}

// Softcap: P^T and dS^T together once dP^T is in, from s = tanh(x * cap_in) (applied while dP^T
// was in flight): P^T = exp2(cap_out t - lse log2(e)), dS^T = P^T (dP^T - Delta) (1 - t^2). The
// range test runs on every tile (see the caller).
template <bool kZeroDs>
__device__ __forceinline__ void softcap_probs_and_ds(const BwdParams& p, float (&s)[32], float (&dp)[32],
                                                     const float* lse_s, const float* delta_s, int q0,
                                                     const int (&qlo)[2], const int (&qhi)[2]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 lse = *reinterpret_cast<const float2*>(lse_s + 8 * j);
    const float2 dl = *reinterpret_cast<const float2*>(delta_s + 8 * j);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int i = 4 * j + 2 * h + c;
        const float t = s[i];
        float pr = fast_exp2(p.cap_out * t - (c ? lse.y : lse.x));
        const int q = q0 + 8 * j + c;
        if (q < qlo[h] || q > qhi[h]) pr = 0.f;
        s[i] = pr;
        const float ds = pr * (dp[i] - (c ? dl.y : dl.x)) * (1.f - t * t);
        dp[i] = kZeroDs && pr == 0.f ? 0.f : ds;
      }
  }
}

// kVarlen (thd): the maps span the packed [total, H, D] tensors (batch extent 1) and the CTA's
// coordinates start at its sequence's first packed rows; the sequence's lengths replace the
// maxima, so the masks, the query blocks and the stores are its own. Keys past the sequence's
// end in the CTA's block are the next sequence's (or TMA's zero fill): outside every row's range,
// masked, never stored. Query rows past its end in a block are masked the same way, and their
// dQ rows land in the sequence's own padded block (thd_pad_row0), which nothing reads.
// kDet: the deterministic order (see launch_bwd): the grid runs from the last key block down, and
// the dQ adds to a query block take turns from its last key block down.
template <class T, int kD, bool kSoftcap, bool kVarlen, bool kDet>
__global__ void __launch_bounds__(Cfg<kD>::kThreads, 1)
    attention_v07_bwd_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                         const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_do,
                         const BwdParams prm) {
  using C = Cfg<kD>;
  constexpr int kStages = C::kStages, kBlockM = C::kBlockM, kBlockN = C::kBlockN;
  extern __shared__ uint8_t smem_raw[];
  // 1024-byte aligned by an offset from smem_raw (not through an integer), so the compiler
  // still knows the pointers below are shared memory: lse and Delta are read with LDS.
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* s_k = smem + C::kOffK;
  uint8_t* s_v = smem + C::kOffV;
  uint8_t* s_q = smem + C::kOffQ;
  uint8_t* s_do = smem + C::kOffDo;
  uint8_t* s_ds = smem + C::kOffDs;
  float* s_lse = reinterpret_cast<float*>(smem + C::kOffLse);
  float* s_delta = reinterpret_cast<float*>(smem + C::kOffDelta);
  float* s_dq = reinterpret_cast<float*>(smem + C::kOffDq);
  const PipelineRing<kStages> ring = PipelineRing<kStages>::at(smem + C::kOffBar);
  uint64_t* kv_full = static_cast<uint64_t*>(ring.end());

  const int n_blk = kDet ? gridDim.x - 1 - blockIdx.x : blockIdx.x, hkv = blockIdx.y, b = blockIdx.z;
  const int n0 = n_blk * kBlockN;
  // thd: a copy of the parameters with the sequence's lengths; fixed lengths read the parameter
  // bank as they are.
  BwdParams pv;
  // The sequence's first packed rows (0 at fixed lengths), the batch coordinate of the maps, and
  // (thd) the sequence's first block of the per-row scratch.
  int q0 = 0, k0 = 0, tma_b = b;
  int64_t seq_blk0 = 0;
  if constexpr (kVarlen) {
    pv = prm;
    int64_t f;
    pv.seqlen_q = static_cast<int>(attn_span(prm.cu_q, b, prm.total_q, f));
    q0 = static_cast<int>(f);
    pv.seqlen_k = static_cast<int>(attn_span(prm.cu_k, b, prm.total_k, f));
    k0 = static_cast<int>(f);
    if (n0 >= pv.seqlen_k) return;  // past this sequence's keys: nothing to compute or store
    tma_b = 0;
    seq_blk0 = thd_pad_row0(b, q0) / kBlockM;
  }
  const BwdParams& p = kVarlen ? pv : prm;
  // Query block m of head hq in the per-row scratch (lse, Delta, dQ's accumulator, counters), and
  // the scratch row of its row m0 (a multiple of 64).
  auto qblock = [&](int hq, int m) -> int64_t {
    if constexpr (kVarlen) return seq_blk0 + int64_t(hq) * (p.sq_pad / kBlockM) + m;
    else return (int64_t(b) * p.heads_q + hq) * (p.sq_pad / kBlockM) + m;
  };
  auto qrow = [&](int hq, int m0) -> int64_t {
    if constexpr (kVarlen) return (seq_blk0 + int64_t(hq) * (p.sq_pad / kBlockM)) * kBlockM + m0;
    else return (int64_t(b) * p.heads_q + hq) * p.sq_pad + m0;
  };
  int m_lo, m_hi;
  query_blocks<C>(p, n_blk, m_lo, m_hi);
  const int m_count = m_hi - m_lo, iters = m_count * p.group;

  if (threadIdx.x == 0) {
    ring.init(256);
    ptx::mbar_init(kv_full, 1);
    ptx::mbar_fence_init();
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {  // producer warpgroup: one thread issues every copy
    ptx::setmaxnreg_dec<24>();
    if (threadIdx.x == 0 && iters > 0) {
      ptx::prefetch_tensor_map(&map_q);
      ptx::prefetch_tensor_map(&map_k);
      ptx::prefetch_tensor_map(&map_v);
      ptx::prefetch_tensor_map(&map_do);
      ptx::mbar_arrive_expect_tx(kv_full, 2 * C::kKVBytes);
#pragma unroll
      for (int c = 0; c < C::kChunks; ++c) {
        tma_load_4d(s_k + c * kBlockN * C::kRowBytes, &map_k, C::kChunkCols * c, k0 + n0, hkv, tma_b, kv_full);
        tma_load_4d(s_v + c * kBlockN * C::kRowBytes, &map_v, C::kChunkCols * c, k0 + n0, hkv, tma_b, kv_full);
      }
      PipelineState<kStages> st;
      for (int it = 0; it < iters; ++it, ++st) {
        const int hq = hkv * p.group + it / m_count, m0 = (m_lo + it % m_count) * kBlockM;
        ring.producer_acquire(st);
        ring.producer_expect_tx(st, C::kSlotTx);
        uint64_t* bar = ring.full_barrier(st);
#pragma unroll
        for (int c = 0; c < C::kChunks; ++c) {
          tma_load_4d(s_q + st.stage() * C::kQBytes + c * kBlockM * C::kRowBytes, &map_q, C::kChunkCols * c, q0 + m0,
                      hq, tma_b, bar);
          tma_load_4d(s_do + st.stage() * C::kQBytes + c * kBlockM * C::kRowBytes, &map_do, C::kChunkCols * c,
                      q0 + m0, hq, tma_b, bar);
        }
        const int64_t row = qrow(hq, m0);
        ptx::bulk_load(s_lse + st.stage() * kBlockM, p.lse2 + row, C::kStatBytes, bar);
        ptx::bulk_load(s_delta + st.stage() * kBlockM, p.delta + row, C::kStatBytes, bar);
      }
    }
    return;
  }

  // ---- consumer warpgroups: keys n0 + 64 w .. + 63 (kSplitD: keys n0 .., columns 128 w ..) ----
  ptx::setmaxnreg_inc<240>();
  const int w = wg - 1;
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int key_row = 16 * warp + lane / 4;  // + 8 h: this thread's rows of the 64-key tiles
  const int kw0 = n0 + (C::kSplitD ? 0 : 64 * w);
  int qlo[2], qhi[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t j = int64_t(kw0) + key_row + 8 * h;
    qlo[h] = j < p.seqlen_k ? q_first(p, j) : p.seqlen_q;
    qhi[h] = j < p.seqlen_k ? q_last(p, j) : -1;
  }
  // A query block [m0, m0 + 63] sees all 64 keys iff m0 >= wq_lo and m0 + 63 <= wq_hi.
  const int wq_lo = kw0 + 63 < p.seqlen_k ? q_first(p, kw0 + 63) : INT_MAX;
  const int wq_hi = q_last(p, kw0);

  float dk[C::kCols / 2], dv[C::kCols / 2];
#pragma unroll
  for (int i = 0; i < C::kCols / 2; ++i) dk[i] = 0.f, dv[i] = 0.f;
  const uint32_t k_base = smem_u32(s_k), v_base = smem_u32(s_v);
  constexpr uint32_t kRow = C::kRowBytes;
  const uint32_t k_addr = k_base + (C::kSplitD ? 0 : 64 * w * kRow), v_addr = v_base + (C::kSplitD ? 0 : 64 * w * kRow);
  // dK's and dV's columns: the warpgroup's 64-column chunks of Q and dO (kSplitD: 2 w and 2 w + 1).
  const uint32_t col_off = C::kSplitD ? 2 * w * kBlockM * 128 : 0;
  // dQ's operands: dS^T rows (keys) dq_key0 .., K's column chunks dq_chunk0 ...
  const int dq_key0 = C::kOwnKeys ? 64 * w : 0;
  const int dq_chunk0 = C::kOwnKeys ? 0 : (C::kSplitD ? 2 * w : w);
  const int col = 2 * (lane % 4);

  // kDet: this warpgroup's counter for query block m of head hq, and the count at which the turn
  // is its own: ranks from the block's last key block down (D = 64: both warpgroups add to the
  // same tile, warpgroup 0 first). Only thread 0 of the warpgroup waits and passes the turn.
  // thd: a sequence longer than the maximum the grid was sized for (wrong prefix sums) has no
  // CTAs past the grid, so the turns start at the last key block that has one.
  auto turn_of = [&](int hq, int m, int& mine) {
    const int last = last_key_block<C>(p, m);
    const int rank = (last < int(gridDim.x) - 1 ? last : int(gridDim.x) - 1) - n_blk;
    mine = C::kOwnKeys ? 2 * rank + w : rank;
    return p.dq_turn + qblock(hq, m) * 2 + (C::kOwnKeys ? 0 : w);
  };
  // kDet with bulk reductions (thread 0): iteration it's reduction complete, its turn passed on.
  // Called one iteration late, once the next block's S^T and dP^T are in the tensor cores, so
  // the warpgroup does not stall on the reduction's completion (it did: 0.73x of the atomic
  // path at B8 S2048 H16 D128). The release depends on nothing but this CTA's own progress, so
  // the turns cannot wait in a cycle.
  auto pass_turn = [&](int it) {
    int mine;
    int* turn = turn_of(hkv * p.group + it / m_count, m_lo + it % m_count, mine);
    ptx::bulk_wait_group_all();
    ptx::fence_proxy_async_global();
    ptx::red_release_gpu_add(turn, 1);
  };

  if (iters > 0) ptx::mbar_wait(kv_full, 0);
  PipelineState<kStages> st;
  for (int it = 0; it < iters; ++it, ++st) {
    const int hq = hkv * p.group + it / m_count, m = m_lo + it % m_count, m0 = m * kBlockM;
    const uint32_t q_addr = smem_u32(s_q + st.stage() * C::kQBytes);
    const uint32_t do_addr = smem_u32(s_do + st.stage() * C::kQBytes);
    float s[32], dp[32];
    ring.consumer_wait(st);
    ptx::wgmma_fence();
    // S^T = K Q^T and dP^T = V dO^T: K-major operands; a k16 step is 32 bytes along a swizzled
    // row (128 bytes: four steps a chunk; the narrow tiles' 64- and 32-byte rows: two and one),
    // a 64-wide D chunk a tile's chunk apart, 8-row groups 8 rows apart (SBO).
    constexpr int kSteps = C::kKSteps;
    constexpr uint32_t kLbo = C::kKMajorLbo;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint64_t da = C::desc(k_addr + (kk / kSteps) * kBlockN * kRow + (kk % kSteps) * 32, kLbo, 8 * kRow);
      const uint64_t db = C::desc(q_addr + (kk / kSteps) * kBlockM * kRow + (kk % kSteps) * 32, kLbo, 8 * kRow);
      ptx::wgmma_m64n64k16<T, false, false>(s, da, db, kk > 0);
    }
    ptx::wgmma_commit_group();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint64_t da = C::desc(v_addr + (kk / kSteps) * kBlockN * kRow + (kk % kSteps) * 32, kLbo, 8 * kRow);
      const uint64_t db = C::desc(do_addr + (kk / kSteps) * kBlockM * kRow + (kk % kSteps) * 32, kLbo, 8 * kRow);
      ptx::wgmma_m64n64k16<T, false, false>(dp, da, db, kk > 0);
    }
    ptx::wgmma_commit_group();
    if constexpr (kDet && C::kBulkDq)
      if (t == 0 && it > 0) pass_turn(it - 1);
    // P^T while dP^T is still in the tensor cores (softcap: tanh), dS^T once it is in.
    const float* lse_s = s_lse + st.stage() * kBlockM + col;
    const float* delta_s = s_delta + st.stage() * kBlockM + col;
    const bool whole = m0 >= wq_lo && m0 + kBlockM - 1 <= wq_hi;  // no pair of the tile is masked
    ptx::wgmma_wait_group<1>();
    ptx::wgmma_fence_operands(s);
    if constexpr (kSoftcap) {
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] = tanh_ex2(s[i] * p.cap_in);
    } else if (whole) {
      probs<false>(p, s, lse_s, m0 + col, qlo, qhi);
    } else {
      probs<true>(p, s, lse_s, m0 + col, qlo, qhi);
    }
    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operands(dp);
    if constexpr (kSoftcap) {
      // One copy, the range test on every tile: a second, unmasked copy for whole tiles took
      // the D = 128 and 256 consumers past their 240 registers (spills).
      softcap_probs_and_ds<kVarlen>(p, s, dp, lse_s, delta_s, m0 + col, qlo, qhi);
    } else if (kVarlen && !whole) {
      dscores<true>(s, dp, delta_s);
    } else {
      dscores<false>(s, dp, delta_s);
    }

    // P^T and dS^T as A fragments: n8 blocks 2 kk and 2 kk + 1 are k16 step kk.
    uint32_t pa[4][4], da[4][4];
    attn_hopper::pack_p<T, 64>(s, pa);
    attn_hopper::pack_p<T, 64>(dp, da);
    // dS^T [key][query] into this iteration's buffer, 128-byte swizzled rows (one row per key);
    // kSplitD: both warpgroups hold the same 64 keys' dS^T, warpgroup 0 writes it.
    uint8_t* ds_buf = s_ds + (it & 1) * C::kDsBytes;
    if (!C::kSplitD || w == 0) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int row = (C::kSplitD ? 0 : 64 * w) + key_row + 8 * (r % 2), q = 8 * (2 * kk + r / 2) + col;
          *reinterpret_cast<uint32_t*>(ds_buf + ptx::swizzle_128b_offset(row, 2 * q)) = da[kk][r];
        }
      ptx::fence_proxy_async_smem();  // the generic-proxy writes before the wgmma (async proxy) reads
    }

    // The tensor-core queue per block: dV += P^T dO, then (once the dS^T rows it reads are
    // written) dQ = dS K, then dK += dS^T Q; dQ's reductions run while dK is in the tensor
    // cores. dO and Q are MN-major (D contiguous) B operands: a k16 step is 16 query rows (2048
    // bytes of 128-byte rows), 64-wide D chunks a slot's chunk apart (LBO; unused by the narrow
    // tiles, whose N = D is one swizzle width).
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      attn_hopper::wgmma_pv<T, C::kCols>(dv, pa[kk],
                                         C::desc(do_addr + col_off + kk * 16 * kRow, kBlockM * kRow, 8 * kRow));
    ptx::wgmma_commit_group();

    // dQ over this warpgroup's keys and column chunks, once every dS^T row it reads is written
    // (D = 128 and 256: both warpgroups' rows, or warpgroup 0's; D = 64: its own). kDet: the
    // bulk reduction runs in turn (D <= 128); D = 256's per-thread adds take the turn before the
    // first chunk's adds and pass it after the last.
    if constexpr (C::kOwnKeys) ptx::named_barrier_sync(2 + w, 128);
    else ptx::named_barrier_sync(1, 256);
    const uint32_t ds_addr = smem_u32(ds_buf);
#pragma unroll
    for (int part = 0; part < C::kDqChunks; ++part) {
      const int dq_chunk = dq_chunk0 + part;
      float dq[C::kTileCols / 2];
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < C::kDqKeys / 16; ++kk) {
        const uint32_t key = dq_key0 + 16 * kk;
        const uint64_t da_ = ptx::make_smem_desc_sw128(ds_addr + key * 128, C::kDsBytes, 1024);
        const uint64_t db_ = C::desc(k_base + dq_chunk * kBlockN * kRow + key * kRow, kBlockN * kRow, 8 * kRow);
        wgmma_dq<T, C::kTileCols>(dq, da_, db_, kk > 0);
      }
      ptx::wgmma_commit_group();
      if (part == 0) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
          attn_hopper::wgmma_pv<T, C::kCols>(dk, da[kk],
                                             C::desc(q_addr + col_off + kk * 16 * kRow, kBlockM * kRow, 8 * kRow));
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<1>();  // dV and dQ's first chunk; dK still in flight
      } else {
        ptx::wgmma_wait_group<0>();
      }
      ptx::wgmma_fence_operands(dq);

      if constexpr (C::kBulkDq) {
        // The tile into this warpgroup's buffer once its previous reduction has read it, then
        // one bulk reduction by one thread.
        float* tile = s_dq + w * (C::kDqTileBytes / 4);
        if (t == 0) ptx::bulk_wait_group_read<0>();
        ptx::named_barrier_sync(2 + w, 128);
#pragma unroll
        for (int j = 0; j < C::kTileCols / 8; ++j)
          *reinterpret_cast<float4*>(tile + (128 * j + t) * 4) =
              make_float4(dq[4 * j], dq[4 * j + 1], dq[4 * j + 2], dq[4 * j + 3]);
        ptx::fence_proxy_async_smem();
        ptx::named_barrier_sync(2 + w, 128);
        if (t == 0) {
          float* dst = p.dq_acc + dq_tile_offset(qblock(hq, m), kD, dq_chunk);
          if constexpr (kDet) {
            // In turn: the acquire ordered before the (async-proxy) reduction; pass_turn
            // releases it in the next iteration.
            int mine;
            const int* turn = turn_of(hq, m, mine);
            while (ptx::ld_acquire_gpu(turn) < mine) __nanosleep(32);
            ptx::fence_proxy_async_global();
          }
          ptx::bulk_reduce_add_f32(dst, tile, C::kDqTileBytes);
          ptx::bulk_commit_group();
        }
        continue;
      }
      // dq_acc[row][dq_chunk * 64 + column] += dq: rows key_row + 8 h of the query block.
      float* acc = p.dq_acc + (qrow(hq, m0) + key_row) * kD + dq_chunk * 64 + col;
      if (kDet && part == 0) {
        if (t == 0) {
          int mine;
          const int* turn = turn_of(hq, m, mine);
          while (ptx::ld_acquire_gpu(turn) < mine) __nanosleep(32);
        }
        ptx::named_barrier_sync(2 + w, 128);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          ptx::red_add_v2(acc + 8 * h * kD + 8 * j, dq[4 * j + 2 * h], dq[4 * j + 2 * h + 1]);
    }
    ptx::wgmma_wait_group<0>();
    ptx::wgmma_fence_operands(dk);
    ptx::wgmma_fence_operands(dv);
    ring.consumer_release(st);  // every read of the slot (wgmma, lse, Delta) is done
    if constexpr (kDet && !C::kBulkDq) {  // every thread's adds done: the turn passed on
      __threadfence();
      ptx::named_barrier_sync(2 + w, 128);
      if (t == 0) {
        int mine;
        ptx::red_release_gpu_add(turn_of(hq, m, mine), 1);
      }
    }
  }

  // The last reduction's reads of the tile buffer and its writes finish before the CTA exits (kDet:
  // and its turn passes on).
  if (C::kBulkDq && t == 0) {
    if (kDet && iters > 0) pass_turn(iters - 1);
    else ptx::bulk_wait_group_all();
  }

  // dK = scale * dK (the scores' scale; softcap's factor is in dS), dV as summed.
  T* dK = static_cast<T*>(p.dk) + int64_t(b) * p.sdk.b + int64_t(hkv) * p.sdk.h;
  T* dV = static_cast<T*>(p.dv) + int64_t(b) * p.sdv.b + int64_t(hkv) * p.sdv.h;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t j = int64_t(kw0) + key_row + 8 * h;
    if (j >= p.seqlen_k) continue;
    const int64_t row = k0 + j;
#pragma unroll
    for (int jj = 0; jj < C::kCols / 8; ++jj) {
      // D is a multiple of 8 above kD / 2 (the 64-column tile and narrower: any): a column pair is
      // wholly in or out, and only the columns from kD / 2 on can be out
      const int c = (C::kSplitD ? 128 * w : 0) + 8 * jj;
      if (c >= (kD <= 64 ? 0 : kD / 2) && c >= p.head_dim) continue;
      *reinterpret_cast<uint32_t*>(dK + row * p.sdk.s + c + col) =
          pack2<T>(p.scale * dk[4 * jj + 2 * h], p.scale * dk[4 * jj + 2 * h + 1]);
      *reinterpret_cast<uint32_t*>(dV + row * p.sdv.s + c + col) = pack2<T>(dv[4 * jj + 2 * h], dv[4 * jj + 2 * h + 1]);
    }
  }
}

// ---- prep and convert ----------------------------------------------------------------------

template <class T>
__device__ __forceinline__ float dot8(const uint4& x, const uint4& y) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 a, b;
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&xs[i]));
      b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&ys[i]));
    } else {
      a = __half22float2(*reinterpret_cast<const __half2*>(&xs[i]));
      b = __half22float2(*reinterpret_cast<const __half2*>(&ys[i]));
    }
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
  }
  return acc;
}

// Delta = rowsum(dO o O) and lse * log2(e) per query row, into the per-row scratch's blocks:
// fixed lengths walk every padded row (zero past Sq); thd walks the packed rows (the padding
// rows are zeroed before). 8 threads per row, 16 bytes of O and dO per thread and step.
template <class T, int kD, bool kVarlen>
__global__ void __launch_bounds__(256) attention_v07_prep(const AttentionArgs a, int64_t sq_pad, float* lse2,
                                                          float* delta) {
  const int64_t rows = kVarlen ? a.heads_q * a.total_q : a.batch * a.heads_q * sq_pad;
  const int sub = threadIdx.x % 8;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  // A warp takes 4 rows per step; the loop bound is the warp's (the shuffles need all 32 lanes).
  for (int64_t base = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * 4; base < rows; base += warps * 4) {
    const int64_t r = base + (threadIdx.x % 32) / 8;
    // operand row (b, i, h), its lse element and its scratch row
    int64_t b = 0, i, h, lse_at, dst = r;
    bool valid;
    if constexpr (kVarlen) {
      h = r / a.total_q, i = r % a.total_q;
      valid = r < rows && thd_scratch_row(a, sq_pad, h, i, dst);
      lse_at = r;
    } else {
      i = r % sq_pad;
      const int64_t bh = r / sq_pad;
      h = bh % a.heads_q, b = bh / a.heads_q;
      valid = r < rows && i < a.seqlen_q;
      lse_at = bh * a.seqlen_q + i;
    }
    float x = 0.f;
    if (valid) {
      const T* orow = attn::row_ptr(static_cast<const T*>(a.o), a.so, b, i, h);
      const T* drow = attn::row_ptr(static_cast<const T*>(a.dout), a.sdo, b, i, h);
#pragma unroll
      for (int c = 0; c < (kD + 63) / 64; ++c)  // D = 16, 32: one step, the first D / 8 threads
        if (64 * c + 8 * sub < a.head_dim)
            x += dot8<T>(*reinterpret_cast<const uint4*>(orow + 64 * c + 8 * sub),
                       *reinterpret_cast<const uint4*>(drow + 64 * c + 8 * sub));
    }
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    x += __shfl_xor_sync(0xffffffffu, x, 4);
    if (sub == 0 && (kVarlen ? valid : r < rows)) {
      delta[dst] = valid ? x : 0.f;
      lse2[dst] = valid ? a.lse_in[lse_at] * 1.4426950408889634f : 0.f;
    }
  }
}

// dq = scale * dq_acc in dq's dtype and strides, 8 elements (16 bytes out) per step; dq_acc's
// rows are kD wide (or in tiles: `tiled`, dq_tile_offset), dq's D (the first D columns). thd:
// the packed rows that lie in a sequence.
template <class T, int kD, bool kVarlen>
__global__ void __launch_bounds__(256) attention_v07_dq_convert(const AttentionArgs a, int64_t sq_pad,
                                                                const float* dq_acc, int tiled) {
  const int64_t per_row = a.head_dim / 8;
  const int64_t chunks = (kVarlen ? a.heads_q * a.total_q : a.batch * a.heads_q * a.seqlen_q) * per_row;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < chunks; e += int64_t(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(e % per_row) * 8;
    const int64_t r = e / per_row;
    int64_t b = 0, i, h, row;  // operand row (b, i, h); its row of the scratch
    if constexpr (kVarlen) {
      h = r / a.total_q, i = r % a.total_q;
      if (!thd_scratch_row(a, sq_pad, h, i, row)) continue;
    } else {
      i = r % a.seqlen_q;
      const int64_t bh = r / a.seqlen_q;
      h = bh % a.heads_q, b = bh / a.heads_q;
      row = bh * sq_pad + i;
    }
    float4 x, y;
    if (tiled) {
      // Row ii of the tile is thread 32 (ii / 16) + 4 (ii % 8) + q's half (ii % 16) / 8; columns
      // 8j + 2q, +1 are its element pair 4j + 2 half (+1), at float (128 j + thread) * 4 + 2 half.
      constexpr int kCols = kD < 64 ? kD : 64;  // a tile's columns
      const int ii = static_cast<int>(row % 64), j = (d % kCols) / 8, half = (ii % 16) / 8;
      const float* tile = dq_acc + dq_tile_offset(row / 64, kD, d / kCols) + 512 * j + 2 * half;
      const int t0 = 32 * (ii / 16) + 4 * (ii % 8);
      const float2 v0 = *reinterpret_cast<const float2*>(tile + 4 * t0);
      const float2 v1 = *reinterpret_cast<const float2*>(tile + 4 * (t0 + 1));
      const float2 v2 = *reinterpret_cast<const float2*>(tile + 4 * (t0 + 2));
      const float2 v3 = *reinterpret_cast<const float2*>(tile + 4 * (t0 + 3));
      x = make_float4(v0.x, v0.y, v1.x, v1.y);
      y = make_float4(v2.x, v2.y, v3.x, v3.y);
    } else {
      const float4* src = reinterpret_cast<const float4*>(dq_acc + row * kD + d);
      x = src[0], y = src[1];
    }
    const float s = a.scale;
    uint4 out;
    out.x = pack2<T>(s * x.x, s * x.y);
    out.y = pack2<T>(s * x.z, s * x.w);
    out.z = pack2<T>(s * y.x, s * y.y);
    out.w = pack2<T>(s * y.z, s * y.w);
    *reinterpret_cast<uint4*>(attn::row_ptr(static_cast<T*>(a.out), a.sdq, b, i, h) + d) = out;
  }
}

// ---- host ------------------------------------------------------------------------------------

// kDet: a.deterministic's kernels (instantiated in their own translation unit,
// v07_wgmma_backward_det.cu, which keeps each unit's compile time under a minute).
template <class T, int kD, bool kDet>
void launch_bwd(const AttentionArgs& a, cudaStream_t stream) {
  using C = Cfg<kD>;
  const bool thd = a.cu_q != nullptr;
  // The per-row scratch in 64-row query blocks (see thd_pad_row0): sq_pad rows per query head.
  const int64_t sq_pad = thd ? thd_rows_pad(a.batch, a.total_q) : ceil_div(a.seqlen_q, C::kBlockM) * C::kBlockM;
  const int64_t rows_pad = (thd ? 1 : a.batch) * a.heads_q * sq_pad;
  // Workspace: [dq_acc f32 rows_pad x D][lse2][delta][turn counters], zeroed where it must be:
  // the accumulator; thd, the padding rows of lse2 and Delta (the prep writes the packed rows);
  // deterministic, the counters.
  const int64_t acc_bytes = rows_pad * kD * 4;
  const int64_t stat_bytes = ceil_div(rows_pad * 4, 256) * 256;
  const int64_t turn_bytes = ceil_div(rows_pad / C::kBlockM * 2 * 4, 256) * 256;
  detail::StreamWorkspace ws(stream, "attention_v07_backward", size_t(acc_bytes + 2 * stat_bytes + turn_bytes));
  char* base = static_cast<char*>(ws.get());
  float* dq_acc = reinterpret_cast<float*>(base);
  float* lse2 = reinterpret_cast<float*>(base + acc_bytes);
  float* delta = reinterpret_cast<float*>(base + acc_bytes + stat_bytes);
  int* dq_turn = reinterpret_cast<int*>(base + acc_bytes + 2 * stat_bytes);
  const int64_t zeroed =
      kDet ? acc_bytes + 2 * stat_bytes + turn_bytes : acc_bytes + (thd ? 2 * stat_bytes : 0);
  HK_CHECK_CUDA(cudaMemsetAsync(base, 0, size_t(zeroed), stream));

  const int64_t prep_rows = thd ? a.heads_q * a.total_q : rows_pad;
  if (prep_rows > 0) {
    auto prep = thd ? attention_v07_prep<T, kD, true> : attention_v07_prep<T, kD, false>;
    prep<<<grid_for(ceil_div(prep_rows * 8, 256)), 256, 0, stream>>>(a, sq_pad, lse2, delta);
    HK_CHECK_LAUNCH("attention_v07 prep");
  }

  BwdParams p{};
  p.seqlen_q = static_cast<int>(a.seqlen_q), p.seqlen_k = static_cast<int>(a.seqlen_k);
  p.sq_pad = static_cast<int>(sq_pad);
  p.heads_q = static_cast<int>(a.heads_q), p.group = static_cast<int>(a.heads_q / a.heads_kv);
  p.head_dim = static_cast<int>(a.head_dim);
  p.window_left = a.window_left, p.window_right = a.window_right;
  constexpr float kLog2e = 1.4426950408889634f;
  p.scale = a.scale, p.scale_log2 = a.scale * kLog2e;
  p.cap_in = a.softcap > 0.f ? a.scale / a.softcap : 0.f;
  p.cap_out = a.softcap > 0.f ? a.softcap * kLog2e : 0.f;
  p.lse2 = lse2, p.delta = delta, p.dq_acc = dq_acc, p.dq_turn = dq_turn;
  p.dk = a.dk, p.dv = a.dv, p.sdk = a.sdk, p.sdv = a.sdv;
  p.cu_q = a.cu_q, p.cu_k = a.cu_k, p.total_q = a.total_q, p.total_k = a.total_k;
  // D-wide maps (a box's columns past D arrive as zeros: the kernel computes kD columns); thd:
  // over the packed [total, H, D] tensors, one batch
  const int64_t d = a.head_dim, rq = thd ? a.total_q : a.seqlen_q, rk = thd ? a.total_k : a.seqlen_k;
  const int64_t nb = thd ? 1 : a.batch;
  const CUtensorMap mq = attn_hopper::operand_map(a.q, a.dtype, rq, a.heads_q, nb, d, a.sq, C::kBlockM, C::kChunkCols);
  const CUtensorMap mk = attn_hopper::operand_map(a.k, a.dtype, rk, a.heads_kv, nb, d, a.sk, C::kBlockN, C::kChunkCols);
  const CUtensorMap mv = attn_hopper::operand_map(a.v, a.dtype, rk, a.heads_kv, nb, d, a.sv, C::kBlockN, C::kChunkCols);
  const CUtensorMap mdo =
      attn_hopper::operand_map(a.dout, a.dtype, rq, a.heads_q, nb, d, a.sdo, C::kBlockM, C::kChunkCols);
  auto kernel = attention_v07_bwd_kernel<T, kD, false, false, kDet>;
  if (thd)
    kernel = a.softcap > 0.f ? attention_v07_bwd_kernel<T, kD, true, true, kDet>
                             : attention_v07_bwd_kernel<T, kD, false, true, kDet>;
  else if (a.softcap > 0.f) kernel = attention_v07_bwd_kernel<T, kD, true, false, kDet>;
  allow_dynamic_smem(kernel, C::kSmemBytes);
  dim3 grid(static_cast<unsigned>(ceil_div(a.seqlen_k, C::kBlockN)), static_cast<unsigned>(a.heads_kv),
            static_cast<unsigned>(a.batch));
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(mq, mk, mv, mdo, p);
  HK_CHECK_LAUNCH("attention_v07 main");

  const int64_t convert_rows = thd ? a.heads_q * a.total_q : a.batch * a.heads_q * a.seqlen_q;
  if (convert_rows > 0) {
    auto convert = thd ? attention_v07_dq_convert<T, kD, true> : attention_v07_dq_convert<T, kD, false>;
    convert<<<grid_for(ceil_div(convert_rows * (a.head_dim / 8), 256)), 256, 0, stream>>>(a, sq_pad, dq_acc,
                                                                                        C::kBulkDq ? 1 : 0);
    HK_CHECK_LAUNCH("attention_v07 dq convert");
  }
}

// The deterministic backward (launch_bwd<T, kD, true> for a's dtype and D), defined in
// v07_wgmma_backward_det.cu.
void launch_bwd_deterministic(const AttentionArgs& a, cudaStream_t stream);
// D <= 32 on the 16- and 32-column tiles, default or deterministic, defined in
// v07_wgmma_backward_narrow.cu.
void launch_bwd_narrow(const AttentionArgs& a, cudaStream_t stream);

// What the kernels run ("" = all of p).
inline std::string supports(const AttentionProblem& p) {
  if (!p.backward) return "backward only (the Hopper forward is v05_wgmma_tma)";
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return "takes bf16 or f16";
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0)
    return "built for D a multiple of 8 up to 256 (16-, 32-, 64-, 128- and 256-column tiles), got D=" +
           std::to_string(p.head_dim);
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0 || p.seqlen_k == 0 ||
      (p.is_varlen() && (p.total_q == 0 || p.total_k == 0)))
    return "empty sequences run on the general rung (TMA extents are at least 1)";
  if (std::string why = p.rows_16b(); !why.empty()) return why + " (TMA)";
  if (p.batch > 65535 || p.heads_kv > 65535) return "B and Hkv must be at most 65535 (grid z and y)";
  if (p.seqlen_q > INT32_MAX - 128 || p.seqlen_k > INT32_MAX - 128) return "sequence lengths must be below 2^31 - 128";
  if (p.is_varlen() && (p.total_q > INT32_MAX - 128 || p.total_k > INT32_MAX - 128 ||
                        thd_rows_pad(p.batch, p.total_q) > INT32_MAX))
    return "thd: the packed rows (and one 64-row block per sequence) must stay below 2^31";
  return "";
}

}  // namespace hk::attn_hopper_bwd
