// attention/hopper_attention.cuh — the FlashAttention forward on TMA and wgmma, shared by the
// Hopper rungs, each a policy (what it turns on) over the same body.
//
// A CTA of three warpgroups owns 128 query rows of one (batch, query head). One thread of the
// producer warpgroup loads Q once and streams K and V tiles (128 keys x D; 64 keys for the
// 256-column tile) with TMA into a two-slot ring per operand (common/pipeline.cuh: full/empty mbarriers with phase bits). Each
// of the two consumer warpgroups (64 query rows, 240 registers through setmaxnreg) runs
//   S = Q K^T   wgmma m64n128k16 (m64n64k16 at D = 256), operands in shared memory (K-major);
//   softmax     online, on S in registers: exp2 with scale * log2(e) folded in, masks and
//               softcap applied to the scores, the key blocks no row of the tile can see never
//               loaded; keys past Sk and queries past Sq arrive zero-filled from TMA;
//   O += P V    wgmma m64nDk16 (two m64n128k16 at D = 256) with P from registers — S's
//               accumulator fragment is, pair for
//               pair, the A-operand fragment, so P never touches shared memory — and V read
//               MN-major (D contiguous) through the instruction's transpose bit.
// Narrow head dims (D <= 16, D <= 32) run on 16- and 32-column tiles: one column chunk of 32- or
// 64-byte rows, written by TMA with the 32- or 64-byte swizzle and read through descriptors of that
// mode (Cfg::desc): QK^T takes one or two k16 steps, PV is m64n16k16 / m64n32k16: 1.11-1.23x
// faster than the 64-column tile with zero-filled columns (H200, docs/attention.md).
// A consumer releases a K slot as soon as its S is computed and a V slot once its PV retired.
// On a persistent grid (v09) the producer claims tiles from a global counter and hands each to
// the consumers with its Q (the tile in a shared-memory slot written before Q's barrier arrival).
// Policy switches (see the rung files):
//   kIntraWgOverlap  issue S of block n + 1 together with PV of block n, so the softmax of n + 1
//                    runs while PV(n) does; only O's rescale waits for it. NOTE: ptxas moves
//                    PV(n)'s wait above that softmax (ptxas 12.9-13.5, SASS checked): the overlap
//                    is in the source, not in the machine code; the turns below are what pays
//   kPingpong        the two consumer warpgroups take turns issuing their GEMMs (named
//                    barriers), so one's softmax overlaps the other's MMAs
// Variable length (thd, for policies with kThd): the maps span the packed tensors and a CTA
// starts its TMA coordinates at its sequence's first packed row (as FlashAttention-3 does).
// Needs: sm_90a; bf16 or f16; D a multiple of 8 up to 256; Sk >= 1; q, k, v 16-byte aligned with (batch, seq,
// head) strides multiples of 8 elements (TMA's 16 bytes); o with even strides; forward only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "attention/attention_op.hpp"
#include "common/launch.cuh"
#include "common/pipeline.cuh"
#include "common/ptx/mbarrier.cuh"
#include "common/ptx/named_barrier.cuh"
#include "common/ptx/smem_desc.hpp"
#include "common/ptx/tma.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/ptx/wgmma_fp8.cuh"
#include "common/ptx/wgmma_regs.hpp"
#include "core/scratch.hpp"

namespace hk::attn_hopper {

// The shared-memory rows of a kD-column tile of kElem-byte elements (2: bf16, f16; 1: e4m3), as
// TMA writes them and wgmma reads them (forward and backward): 128-byte column chunks (128-byte
// swizzle) for rows of 128 bytes or more; narrower tiles keep one chunk of 32- or 64-byte rows
// under the 32- or 64-byte swizzle (the descriptors say which: ptx/smem_desc.hpp).
template <int kD, int kElem = 2>
struct RowLayout {
  static_assert(kD == 16 || kD == 32 || kD == 64 || kD == 128 || kD == 256, "16-, 32-, 64-, 128-, 256-column tiles");
  static constexpr int kRowBytes = kD * kElem < 128 ? kD * kElem : 128;  // = the swizzle width
  static constexpr int kChunkCols = kRowBytes / kElem;  // columns per chunk: a TMA box's width
  static constexpr int kChunks = kD / kChunkCols;       // column chunks per row: TMA boxes
  static constexpr int kKSteps = kRowBytes / 32;        // 32-byte k steps (k16; e4m3: k32) along a chunk's row
  // LBO is unused by swizzled K-major layouts: the narrow tiles set CuTe's 1 (16 bytes), the
  // 128-byte tiles the 0 they were validated with.
  static constexpr uint32_t kKMajorLbo = kRowBytes == 128 ? 0 : 16;
  // Descriptor of a tile of kRowBytes-wide rows, swizzled as TMA wrote it.
  HK_HOST_DEVICE static constexpr uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return ptx::make_smem_desc_swizzled(addr, lbo, sbo, kRowBytes);
  }
};

// Whether policy P's rung takes e4m3 inputs (its policy says kFp8 = true).
template <class P>
constexpr bool fp8_policy() {
  if constexpr (requires { P::kFp8; }) return P::kFp8;
  else return false;
}

// The tile shape: kD_ and the policy P (the rung's step over the previous one).
template <int kD_, class P>
struct Cfg : P, RowLayout<kD_, fp8_policy<P>() ? 1 : 2> {
  static constexpr int kD = kD_;
  static constexpr int kBlockM = 128;  // two consumer warpgroups of 64 query rows
  // Keys per K/V tile: 128, or 64 for the 256-column tile, whose Q (64 KiB) and two stages of K
  // and V (32 KiB each) then take 192 KiB of shared memory (128 keys would need 320).
  static constexpr int kBlockN = kD <= 128 ? 128 : 64;
  static constexpr int kStages = 2;
  // e4m3 inputs (the policy's kFp8): one byte per element; V arrives transposed (Vt: a row per
  // column of D, keys contiguous, as the 8-bit wgmma's K-major B operand must be); P is offset by
  // 2^kPOffset into e4m3's normal range.
  static constexpr bool kFp8 = fp8_policy<P>();
  static constexpr int kElem = kFp8 ? 1 : 2;
  static constexpr int kPOffset = kFp8 ? 8 : 0;
  static_assert(!kFp8 || kD == 64 || kD == 128, "e4m3: 64- and 128-column tiles");
  static constexpr int kQBytes = kBlockM * kD * kElem;
  static constexpr int kTileBytes = kBlockN * kD * kElem;  // one K or V slot (e4m3: Vt, kD rows of kBlockN keys)
  static constexpr int kThreads = 384;
  // + Q's full and empty barriers, and the tiles (m, hq, b) of the last two Q loads
  static constexpr int kBarrierBytes = 2 * PipelineRing<kStages>::kBarrierBytes + 48;
  static constexpr int kSmemBytes = 1024 + kQBytes + 2 * kStages * kTileBytes + kBarrierBytes;
};

__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int32_t c0, int32_t c1, int32_t c2,
                                            int32_t c3, uint64_t* bar) {
  const int32_t coords[4] = {c0, c1, c2, c3};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map, coords, bar);
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 2^x by one MUFU.EX2 (ex2.approx.ftz: -inf gives +0; results below 2^-126 flush to 0, which a
// softmax whose largest term is 1 never misses). exp2f without fast math adds denormal scaling.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// d (+)= A B for one m64nNk16 step (N = 16, 32, 64, 128: PV's N is the tile's D), A from registers
// (four 32-bit registers of 16-bit pairs per thread, mma.sync's m16n8k16 A fragment per warp; it
// does not depend on N), B an MN-major shared-memory tile (the transpose bit set).
template <class T>
__device__ __forceinline__ void wgmma_rs_m64n16k16_tb(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b,
                                                      int scale_d) {
#define HK_ATTN_RS_TB(TY)                                                                        \
  asm volatile(                                                                                  \
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %13, 0;\n\t"                                         \
      "wgmma.mma_async.sync.aligned.m64n16k16.f32." TY "." TY " "                                 \
      "{" HK_WGMMA_REGS8 "}, {%8, %9, %10, %11}, %12, p, 1, 1, 1;\n}\n"                          \
      : HK_WGMMA_ACC8(d)                                                                         \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))
  if constexpr (std::is_same_v<T, __nv_bfloat16>) HK_ATTN_RS_TB("bf16");
  else HK_ATTN_RS_TB("f16");
#undef HK_ATTN_RS_TB
}

template <class T>
__device__ __forceinline__ void wgmma_rs_m64n32k16_tb(float (&d)[16], const uint32_t (&a)[4], uint64_t desc_b,
                                                      int scale_d) {
#define HK_ATTN_RS_TB(TY)                                                                        \
  asm volatile(                                                                                  \
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %21, 0;\n\t"                                         \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " "                                 \
      "{" HK_WGMMA_REGS16 "}, {%16, %17, %18, %19}, %20, p, 1, 1, 1;\n}\n"                       \
      : HK_WGMMA_ACC16(d)                                                                        \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))
  if constexpr (std::is_same_v<T, __nv_bfloat16>) HK_ATTN_RS_TB("bf16");
  else HK_ATTN_RS_TB("f16");
#undef HK_ATTN_RS_TB
}

template <class T>
__device__ __forceinline__ void wgmma_rs_m64n64k16_tb(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                                      int scale_d) {
#define HK_ATTN_RS_TB(TY)                                                                        \
  asm volatile(                                                                                  \
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %37, 0;\n\t"                                         \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                                 \
      "{" HK_WGMMA_REGS32 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"                       \
      : HK_WGMMA_ACC32(d)                                                                        \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))
  if constexpr (std::is_same_v<T, __nv_bfloat16>) HK_ATTN_RS_TB("bf16");
  else HK_ATTN_RS_TB("f16");
#undef HK_ATTN_RS_TB
}

template <class T>
__device__ __forceinline__ void wgmma_rs_m64n128k16_tb(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                                      int scale_d) {
#define HK_ATTN_RS_TB(TY)                                                                        \
  asm volatile(                                                                                  \
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %69, 0;\n\t"                                         \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "                                 \
      "{" HK_WGMMA_REGS64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                       \
      : HK_WGMMA_ACC64(d)                                                                        \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))
  if constexpr (std::is_same_v<T, __nv_bfloat16>) HK_ATTN_RS_TB("bf16");
  else HK_ATTN_RS_TB("f16");
#undef HK_ATTN_RS_TB
}

template <class T, int kD>
__device__ __forceinline__ void wgmma_pv(float (&o)[kD / 2], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (kD == 16) wgmma_rs_m64n16k16_tb<T>(o, a, desc_b, 1);
  else if constexpr (kD == 32) wgmma_rs_m64n32k16_tb<T>(o, a, desc_b, 1);
  else if constexpr (kD == 64) wgmma_rs_m64n64k16_tb<T>(o, a, desc_b, 1);
  else wgmma_rs_m64n128k16_tb<T>(o, a, desc_b, 1);
}

// A row's keys [lo, hi] (attn_key_range) in 32 bits: key indices are below 2^31 (supports()),
// and the two ranges a consumer thread keeps over the key loop then take four registers, not
// eight (the 256-column kernels are at the 240-register limit).
struct RowKeys {
  int lo, hi;
};
__device__ __forceinline__ RowKeys row_keys(int64_t i, int64_t sq, int64_t sk, int64_t wl, int64_t wr) {
  const KeyRange r = attn_key_range(i, sq, sk, wl, wr);
  return {static_cast<int>(r.lo), static_cast<int>(r.hi < -1 ? -1 : r.hi)};
}

struct FwdParams {
  int batch, seqlen_q, seqlen_k, heads_q, group;
  int head_dim;                       // D <= kD: TMA zero-fills q, k, v's columns past it; o's are not stored
  int64_t window_left, window_right;  // causal folded in
  float scale_log2;                   // scale * log2(e) (no softcap)
  float cap_in, cap_out;              // softcap: x = cap_out * tanh(s * cap_in) in log2 units; cap_out 0: off
  void* o;
  AttnStrides so;
  float* lse;
  // thd: the prefix sums, the packed row counts (seqlen_q / seqlen_k hold the maxima until the
  // kernel replaces them with its sequence's lengths) and lse's head stride (total_q)
  const int32_t *cu_q, *cu_k;
  int64_t total_q, total_k;
  // Persistent grid: [tiles handed out past the first gridDim.x, CTAs finished], zero before a
  // launch and left zero after it (the last CTA resets both). Null: CTA c runs tiles c,
  // c + gridDim.x, ...
  int* tile_counter;
  // e4m3: the descales of (batch b, kv head h) at [b * heads_kv + h] (null: 1)
  const float *q_descale, *k_descale, *v_descale;
  int heads_kv;
};

// The key blocks [lo, hi) that query rows m0 .. m0 + kBlockM - 1 can see.
template <int kBlockM, int kBlockN>
__device__ __forceinline__ void key_blocks(const FwdParams& p, int m0, int& lo, int& hi) {
  const int last = min(m0 + kBlockM, p.seqlen_q) - 1;
  const RowKeys first_row = row_keys(m0, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
  const RowKeys last_row = row_keys(last, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
  lo = first_row.lo / kBlockN;
  hi = last_row.hi < first_row.lo ? lo : last_row.hi / kBlockN + 1;
}

// key_blocks out of line, for the producer thread: inlined, the tile setup's 64-bit mask
// arithmetic was hoisted out of the tile loop and spilled at the producer's 24 registers.
template <int kBlockM, int kBlockN>
__device__ __noinline__ int2 key_blocks_call(int m0, int sq, int sk, int64_t wl, int64_t wr) {
  FwdParams p{};
  p.seqlen_q = sq, p.seqlen_k = sk, p.window_left = wl, p.window_right = wr;
  int2 r;
  key_blocks<kBlockM, kBlockN>(p, m0, r.x, r.y);
  return r;
}

// The online softmax of one S tile for the two rows a thread holds: s is turned into P in place,
// the row maxima (raw score units, or softcapped ones) and partial sums updated; scale_o returns
// the factor each row's O accumulators must be multiplied by. A score becomes a probability by
// an FADD, an FMUL and one MUFU.EX2: exp2((s - max) * scale log2(e)). The difference is taken
// first so that the row's largest score gives exactly 2^0 = 1: the fused form
// exp2(s * c - max * c) is off by the rounding of max * c, half an ulp of a number that reaches
// 2^14 for scores of 1e4, which made a one-hot row's output one bf16 ulp short. kMask: the block
// holds keys some row of the tile may not see (the diagonal of a causal or windowed tile, keys
// past Sk); whole blocks skip the range test. kSoftcap: scores are softcap * tanh(s / softcap).
template <int kBlockN, bool kMask, bool kSoftcap, int kPOffset = 0>
__device__ __forceinline__ void online_softmax(const FwdParams& p, float (&s)[kBlockN / 2], int key_base,
                                               const RowKeys (&keys)[2], float (&row_max)[2], float (&row_sum)[2],
                                               float (&scale_o)[2]) {
  float blk_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float x = s[4 * j + 2 * h + c];
        if constexpr (kSoftcap) x = p.cap_out * tanhf(x * p.cap_in);
        if constexpr (kMask) {
          const int key = key_base + 8 * j + c;
          if (key < keys[h].lo || key > keys[h].hi) x = -INFINITY;
        }
        s[4 * j + 2 * h + c] = x;
        blk_max[h] = fmaxf(blk_max[h], x);
      }
  // With softcap, x is already in log2 units (cap_out carries log2(e)); without, scale_log2 does.
  const float mul = kSoftcap ? 1.f : p.scale_log2;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    blk_max[h] = fmaxf(blk_max[h], __shfl_xor_sync(0xffffffff, blk_max[h], 1));
    blk_max[h] = fmaxf(blk_max[h], __shfl_xor_sync(0xffffffff, blk_max[h], 2));
    const float m_new = fmaxf(row_max[h], blk_max[h]);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing visible yet
    scale_o[h] = fast_exp2((row_max[h] - m_use) * mul);
    row_max[h] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        // kPOffset: P scaled by 2^kPOffset (e4m3's range); row_sum carries the same factor
        const float e = kPOffset == 0 ? fast_exp2((s[4 * j + 2 * h + c] - m_use) * mul)
                                      : fast_exp2(fmaf(s[4 * j + 2 * h + c] - m_use, mul, float(kPOffset)));
        s[4 * j + 2 * h + c] = e;
        sum += e;
      }
    row_sum[h] = row_sum[h] * scale_o[h] + sum;
  }
}

// Every row of the tile sees every key of block n (no range test needed).
template <int kBlockM, int kBlockN>
__device__ __forceinline__ bool whole_block(const FwdParams& p, int m0, int n) {
  const int last = min(m0 + kBlockM, p.seqlen_q) - 1;
  const KeyRange first_row = attn_key_range(m0, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
  const KeyRange last_row = attn_key_range(last, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
  return last_row.lo <= int64_t(n) * kBlockN && first_row.hi >= int64_t(n + 1) * kBlockN - 1;
}

// softmax with the mask test only where the block needs it.
template <int kBlockN, bool kSoftcap, int kPOffset = 0>
__device__ __forceinline__ void softmax_block(const FwdParams& p, bool whole, float (&s)[kBlockN / 2], int key_base,
                                              const RowKeys (&keys)[2], float (&row_max)[2], float (&row_sum)[2],
                                              float (&scale_o)[2]) {
  if (whole) online_softmax<kBlockN, false, kSoftcap, kPOffset>(p, s, key_base, keys, row_max, row_sum, scale_o);
  else online_softmax<kBlockN, true, kSoftcap, kPOffset>(p, s, key_base, keys, row_max, row_sum, scale_o);
}

// P as the A operand: n8 blocks 2 kk and 2 kk + 1 of S are k16 step kk's fragment.
template <class T, int kBlockN>
__device__ __forceinline__ void pack_p(const float (&s)[kBlockN / 2], uint32_t (&pa)[kBlockN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) pa[kk][r] = pack2<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

// e4m3: d (+)= A B for one m64nNk32 step (N = 64, 128), A from registers (four 32-bit registers of
// four e4m3 each: mma.sync m16n8k32's 8-bit A fragment per warp), B K-major in shared memory (8-bit
// wgmma has no transpose: Vt's rows are D's columns, keys contiguous).
template <int kN>
__device__ __forceinline__ void wgmma_rs_e4m3(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (kN == 64) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %37, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
        "{" HK_WGMMA_REGS32 "}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
        : HK_WGMMA_ACC32(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  } else {
    static_assert(kN == 128, "N = 64 or 128");
    asm volatile(
        "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %69, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
        "{" HK_WGMMA_REGS64 "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
        : HK_WGMMA_ACC64(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
  }
}

// Four floats as e4m3, saturated to +-448, the first in the lowest byte.
__device__ __forceinline__ uint32_t pack_e4m3x4(float a, float b, float c, float d) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

// P as the e4m3 A operand of one k32 step per 32 keys. S's accumulator gives thread (g = lane / 4,
// t = lane % 4) keys 2t, 2t + 1, 8 + 2t, 9 + 2t, 16 + 2t, ... of the step for rows g and g + 8; the
// 8-bit A fragment holds, per register, four consecutive columns of one row: row g's columns
// 4t..4t + 3 (a0) and 16 + 4t..16 + 4t + 3 (a2), row g + 8's in a1 and a3. So column 4t + i of
// the step is key {2t, 2t + 1, 8 + 2t, 9 + 2t}[i] (16 + the same for the upper half): the key
// order Vt is written in (vt_key_of_column), so no register moves between lanes.
template <int kBlockN>
__device__ __forceinline__ void pack_p_e4m3(const float (&s)[kBlockN / 2], uint32_t (&pa)[kBlockN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kBlockN / 32; ++kk) {
    const float* x = s + 16 * kk;
    pa[kk][0] = pack_e4m3x4(x[0], x[1], x[4], x[5]);
    pa[kk][1] = pack_e4m3x4(x[2], x[3], x[6], x[7]);
    pa[kk][2] = pack_e4m3x4(x[8], x[9], x[12], x[13]);
    pa[kk][3] = pack_e4m3x4(x[10], x[11], x[14], x[15]);
  }
}

// The key at column q of a 32-key group of Vt (see pack_p_e4m3).
HK_HOST_DEVICE constexpr int vt_key_of_column(int q) {
  const int half = q / 16, t = (q % 16) / 4, i = q % 4;
  return 16 * half + (i < 2 ? 2 * t + i : 8 + 2 * t + i - 2);
}
// ... a permutation of the group's 32 keys, which puts S's element 4j + 2h + c of thread t (key
// 8j + 2t + c) where pack_p_e4m3 puts it: byte i of register r of step kk is column 4t + i (r = 0,
// 1) or 16 + 4t + i (r = 2, 3).
constexpr bool vt_order_is_consistent() {
  bool seen[32] = {};
  for (int q = 0; q < 32; ++q) {
    const int k = vt_key_of_column(q);
    if (k < 0 || k >= 32 || seen[k]) return false;
    seen[k] = true;
  }
  // pack_p_e4m3's picks within a step: register r, byte i -> n8 group jj and column c
  for (int t = 0; t < 4; ++t)
    for (int r = 0; r < 4; ++r)
      for (int i = 0; i < 4; ++i) {
        const int jj = (r >= 2 ? 2 : 0) + i / 2, c = i % 2;  // x[8 (r / 2) + 4 (i / 2) + 2 (r % 2) + c]
        const int column = (r >= 2 ? 16 : 0) + 4 * t + i;
        if (vt_key_of_column(column) != 8 * jj + 2 * t + c) return false;
      }
  return true;
}
static_assert(vt_order_is_consistent(), "Vt's key order must match pack_p_e4m3's fragment");

// log2 of a row's sum of P, less P's 2^kPOffset.
template <int kPOffset>
__device__ __forceinline__ float lse_log2_of_sum(float l) {
  if constexpr (kPOffset == 0) return log2f(l);
  else return log2f(l) - float(kPOffset);
}

// P as the PV A operand, in the kernel's input type.
template <class T, class C>
__device__ __forceinline__ void pack_p_for(const float (&s)[C::kBlockN / 2], uint32_t (&pa)[C::kBlockN / 16][4]) {
  if constexpr (C::kFp8) pack_p_e4m3<C::kBlockN>(s, pa);
  else pack_p<T, C::kBlockN>(s, pa);
}

template <int kD>
__device__ __forceinline__ void scale_rows(float (&o)[kD / 2], const float (&scale_o)[2]) {
#pragma unroll
  for (int j = 0; j < kD / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) o[4 * j + 2 * h] *= scale_o[h], o[4 * j + 2 * h + 1] *= scale_o[h];
}

// S = Q K^T: K-major operands; a k16 step is 32 bytes along a swizzled row (128 bytes: four steps
// a chunk; the 32- and 16-column tiles' 64- and 32-byte rows: two and one), a column chunk is a
// tile's chunk apart; 8-row groups are 8 rows apart (SBO).
template <class T, class C>
__device__ __forceinline__ void issue_qk(float (&s)[C::kBlockN / 2], uint32_t q_addr, uint32_t k_addr) {
  constexpr int kSteps = C::kKSteps;
  constexpr uint32_t kRow = C::kRowBytes;
  constexpr uint32_t kLbo = C::kKMajorLbo;
#pragma unroll
  for (int kk = 0; kk < C::kD * C::kElem / 32; ++kk) {
    const uint64_t da = C::desc(q_addr + (kk / kSteps) * C::kBlockM * kRow + (kk % kSteps) * 32, kLbo, 8 * kRow);
    const uint64_t db = C::desc(k_addr + (kk / kSteps) * C::kBlockN * kRow + (kk % kSteps) * 32, kLbo, 8 * kRow);
    if constexpr (C::kFp8) ptx::wgmma_m64n128k32_fp8<__nv_fp8_e4m3, __nv_fp8_e4m3>(s, da, db, kk > 0);
    else if constexpr (C::kBlockN == 128) ptx::wgmma_m64n128k16<T, false, false>(s, da, db, kk > 0);
    else ptx::wgmma_m64n64k16<T, false, false>(s, da, db, kk > 0);
  }
}

// O += P V: V is MN-major (D contiguous); a k16 step is 16 rows (2048 bytes of 128-byte rows; 1024
// and 512 on the 32- and 16-column tiles, whose N = D is one swizzle width: LBO unused), column
// chunks are a tile's chunk apart (the descriptor's leading byte offset), 8-row groups 8 rows (SBO). The 256-column tile takes two
// m64n128 MMAs per step, one per column half (chunks 0-1 and 2-3): O's first 64 accumulator
// registers are columns 0-127, the next 64 columns 128-255.
template <class T, class C>
__device__ __forceinline__ void issue_pv(float (&o)[C::kD / 2], const uint32_t (&pa)[C::kBlockN / 16][4],
                                         uint32_t v_addr) {
  constexpr uint32_t kRow = C::kRowBytes, kChunkBytes = C::kBlockN * kRow;
  if constexpr (C::kFp8) {
    // Vt: kD rows of 128 keys (128-byte rows, 128-byte swizzle), K-major; a k32 step is 32 bytes
    // along the rows.
    static_assert(C::kBlockN == 128, "128-key Vt rows");
#pragma unroll
    for (int kk = 0; kk < C::kBlockN / 32; ++kk)
      wgmma_rs_e4m3<C::kD>(o, pa[kk], ptx::make_smem_desc_sw128(v_addr + 32 * kk, 0, 1024));
  } else {
#pragma unroll
    for (int kk = 0; kk < C::kBlockN / 16; ++kk) {
      const uint32_t a = v_addr + kk * 16 * kRow;
      if constexpr (C::kD <= 128) {
        wgmma_pv<T, C::kD>(o, pa[kk], C::desc(a, kChunkBytes, 8 * kRow));
      } else {
        static_assert(C::kD == 256, "64-, 128- and 256-column tiles");
        wgmma_pv<T, 128>(*reinterpret_cast<float(*)[64]>(&o[0]), pa[kk], ptx::make_smem_desc_sw128(a, kChunkBytes, 1024));
        wgmma_pv<T, 128>(*reinterpret_cast<float(*)[64]>(&o[64]), pa[kk],
                         ptx::make_smem_desc_sw128(a + 2 * kChunkBytes, kChunkBytes, 1024));
      }
    }
  }
}

// Pingpong: the two consumer warpgroups take turns issuing their GEMMs, named barrier 1 + w
// opening warpgroup w's turn, so one's softmax runs while the other's MMAs do.
template <class C>
__device__ __forceinline__ void turn_wait(int cw) {
  if constexpr (C::kPingpong) ptx::named_barrier_sync(1 + cw, 256);
}
template <class C>
__device__ __forceinline__ void turn_pass(int cw) {
  if constexpr (C::kPingpong) ptx::named_barrier_arrive(1 + (cw ^ 1), 256);
}

// Tile t of the persistent loop: query block m (the longest first: under a causal mask the last
// query blocks see the most keys), query head hq, batch b; consecutive tiles share a head's K/V.
struct Tile {
  int m, hq, b;
};
__device__ __forceinline__ Tile tile_of(int t, int num_m, int heads_q) {
  const int r = t / num_m;
  return {num_m - 1 - t % num_m, r % heads_q, r / heads_q};
}

template <class T, class C, bool kSoftcap, bool kVarlen>
__global__ void __launch_bounds__(C::kThreads, 1)
    attention_hopper_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                            const __grid_constant__ CUtensorMap map_v, const FwdParams prm) {
  constexpr int kD = C::kD, kBlockN = C::kBlockN, kStages = C::kStages;
  static_assert(!C::kPingpong || C::kIntraWgOverlap, "the ping-pong turns are taken in the overlapped loop");
  extern __shared__ uint8_t smem_raw[];
  // 1024-byte aligned by an offset from smem_raw (not through an integer), so the compiler still
  // knows the pointers below are shared memory (the tile slots are read with LDS).
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  uint8_t* s_q = smem;
  uint8_t* s_k = s_q + C::kQBytes;
  uint8_t* s_v = s_k + kStages * C::kTileBytes;
  uint8_t* bars = s_v + kStages * C::kTileBytes;
  const PipelineRing<kStages> kring = PipelineRing<kStages>::at(bars);
  const PipelineRing<kStages> vring = PipelineRing<kStages>::at(kring.end());
  uint64_t* q_full = static_cast<uint64_t*>(vring.end());
  uint64_t* q_empty = q_full + 1;
  // The tile (m, hq, b) of each of the last two Q loads, by parity: the epilogue of tile i reads
  // its slot again (the producer writes it next for tile i + 2, after tile i + 1's last S).
  volatile int* q_tile = reinterpret_cast<volatile int*>(q_empty + 1);

  // CTA c runs tile c first: the only one when the grid covers them all. On a persistent grid
  // (one CTA per SM; launch_typed's `persistent`) the producer then takes the next unclaimed tile
  // from a global counter (tiles' costs differ under a causal mask: a static stride left CTAs
  // with up to 40% more work than others). The producer hands each tile's index to the
  // consumers with its Q (q_tile, written before q_full's arrival; with the counter, -1: no
  // more). The K/V rings' states carry
  // from one tile to the next, so the producer streams the next tile's K/V as slots free up; Q
  // has one slot, which the consumers release (q_empty) once the tile's last S is computed,
  // before its last PV and its epilogue, and the producer reloads it then.
  const int num_m = (prm.seqlen_q + C::kBlockM - 1) / C::kBlockM;
  const int tiles = num_m * prm.heads_q * prm.batch;  // below 2^31: launch_typed checks

  // The tile's setup, the same in the producer and the consumers: thd: the maps span the packed
  // [total, H, D] tensors (batch extent 1); the tile's sequence starts at packed rows q0 / k0 and
  // its lengths replace the maxima, so the masks, the key blocks and the epilogue's row test are
  // the sequence's own. Rows past the sequence's end inside the last tiles are the next
  // sequence's (or TMA's zero fill past the tensor's end): keys there fall outside every row's
  // range and are masked, query rows there are computed and never stored. A tile past its
  // sequence's end is skipped by every thread (false). The fixed-length kernel keeps its lengths
  // in the parameter bank.
  struct Work {
    FwdParams p;
    int m0, hq, b, q0, k0, tma_b, n_lo, n_hi;
  };
  auto setup = [&](const Tile& tl, Work& w, auto out_of_line) -> bool {
    w.p = prm;
    w.m0 = tl.m * C::kBlockM, w.hq = tl.hq, w.b = tl.b;
    w.q0 = 0, w.k0 = 0, w.tma_b = tl.b;
    if constexpr (C::kFp8) {  // S's scale carries the descales of Q and K (the kv head's)
      const int kvh = tl.b * prm.heads_kv + tl.hq / prm.group;
      w.p.scale_log2 = prm.scale_log2 * (prm.q_descale ? prm.q_descale[kvh] : 1.f) *
                       (prm.k_descale ? prm.k_descale[kvh] : 1.f);
    }
    if constexpr (kVarlen) {
      int64_t f;
      const int64_t sq = attn_span(prm.cu_q, tl.b, prm.total_q, f);
      w.q0 = static_cast<int>(f);
      const int64_t sk = attn_span(prm.cu_k, tl.b, prm.total_k, f);
      w.k0 = static_cast<int>(f);
      if (w.m0 >= sq) return false;
      w.p.seqlen_q = static_cast<int>(sq), w.p.seqlen_k = static_cast<int>(sk);
      w.tma_b = 0;
    }
    if constexpr (decltype(out_of_line)::value) {
      const int2 r = key_blocks_call<C::kBlockM, kBlockN>(w.m0, w.p.seqlen_q, w.p.seqlen_k, w.p.window_left,
                                                           w.p.window_right);
      w.n_lo = r.x, w.n_hi = r.y;
    } else {
      key_blocks<C::kBlockM, kBlockN>(w.p, w.m0, w.n_lo, w.n_hi);
    }
    return true;
  };

  if (threadIdx.x == 0) {
    kring.init(256);
    vring.init(256);
    ptx::mbar_init(q_full, 1);
    ptx::mbar_init(q_empty, 256);
    ptx::mbar_fence_init();
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {  // producer warpgroup: one thread issues every copy
    ptx::setmaxnreg_dec<24>();
    if (threadIdx.x == 0) {
      ptx::prefetch_tensor_map(&map_q);
      ptx::prefetch_tensor_map(&map_k);
      ptx::prefetch_tensor_map(&map_v);
      PipelineState<kStages> st;
      int it = 0;  // tiles this CTA has run
      auto next_tile = [&](int t) {
        return prm.tile_counter ? static_cast<int>(gridDim.x) + atomicAdd(prm.tile_counter, 1)
                                : t + static_cast<int>(gridDim.x);
      };
      for (int t = blockIdx.x; t < tiles; t = next_tile(t)) {
        Work w;
        const Tile tl = tile_of(t, num_m, prm.heads_q);
        if (!setup(tl, w, std::true_type{})) continue;
        const int hkv = w.hq / w.p.group;
        if (it > 0) ptx::mbar_wait(q_empty, (it - 1) & 1);  // the previous tile's S is done with Q
        volatile int* slot = q_tile + 4 * (it & 1);
        slot[0] = tl.m, slot[1] = tl.hq, slot[2] = tl.b;
        ptx::mbar_arrive_expect_tx(q_full, C::kQBytes);
#pragma unroll
        for (int c = 0; c < C::kChunks; ++c)
          tma_load_4d(s_q + c * C::kBlockM * C::kRowBytes, &map_q, C::kChunkCols * c, w.q0 + w.m0, w.hq, w.tma_b,
                      q_full);
        for (int n = w.n_lo; n < w.n_hi; ++n, ++st) {
          kring.producer_acquire(st);
          kring.producer_expect_tx(st, C::kTileBytes);
#pragma unroll
          for (int c = 0; c < C::kChunks; ++c)
            tma_load_4d(s_k + st.stage() * C::kTileBytes + c * kBlockN * C::kRowBytes, &map_k, C::kChunkCols * c,
                        w.k0 + n * kBlockN, hkv, w.tma_b, kring.full_barrier(st));
          vring.producer_acquire(st);
          vring.producer_expect_tx(st, C::kTileBytes);
          if constexpr (C::kFp8) {  // Vt [b][hkv][d][key]: one box of kD rows x 128 keys
            tma_load_4d(s_v + st.stage() * C::kTileBytes, &map_v, w.k0 + n * kBlockN, 0, hkv, w.tma_b,
                        vring.full_barrier(st));
          } else {
#pragma unroll
            for (int c = 0; c < C::kChunks; ++c)
              tma_load_4d(s_v + st.stage() * C::kTileBytes + c * kBlockN * C::kRowBytes, &map_v, C::kChunkCols * c,
                          w.k0 + n * kBlockN, hkv, w.tma_b, vring.full_barrier(st));
          }
        }
        ++it;
      }
      // Persistent grid: no more tiles; say so in the Q slot, then the last CTA to get here resets
      // the counter (every CTA's last claim precedes its count of itself). One tile per CTA: the
      // consumers stop after it, and this thread is done (it does not wait for the tile's end).
      if (prm.tile_counter) {
        if (it > 0) ptx::mbar_wait(q_empty, (it - 1) & 1);
        q_tile[4 * (it & 1)] = -1;
        ptx::mbar_arrive(q_full);
        __threadfence();
        if (atomicAdd(prm.tile_counter + 1, 1) == static_cast<int>(gridDim.x) - 1) {
          prm.tile_counter[0] = 0;
          prm.tile_counter[1] = 0;
        }
      }
    }
    return;
  }

  // ---- consumer warpgroups ----
  ptx::setmaxnreg_inc<240>();
  const int cw = wg - 1;  // consumer warpgroup: query rows 64 cw .. 64 cw + 63
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int key_lane = 2 * (lane % 4);
  const uint32_t q_addr = smem_u32(s_q) + cw * 64 * C::kRowBytes;
  auto k_addr = [&](const PipelineState<kStages>& st) { return smem_u32(s_k + st.stage() * C::kTileBytes); };
  auto v_addr = [&](const PipelineState<kStages>& st) { return smem_u32(s_v + st.stage() * C::kTileBytes); };
  PipelineState<kStages> st;
  int it = 0;
  bool turns_started = false;  // ping-pong: warpgroup 1's opening arrival is made once per CTA
  for (;;) {
    // The tile: with the counter, the one the producer loaded Q for, or m = -1: no more (read
    // through a shuffle from lane 0, so the compiler knows the values are the same across the
    // warp). Else CTA c's tile c, once.
    Tile tl;
    if (prm.tile_counter) {
      ptx::mbar_wait(q_full, it & 1);
      const volatile int* slot = q_tile + 4 * (it & 1);
      tl = {__shfl_sync(0xffffffffu, slot[0], 0), __shfl_sync(0xffffffffu, slot[1], 0),
            __shfl_sync(0xffffffffu, slot[2], 0)};
      if (tl.m < 0) break;
    } else {
      if (it > 0) break;
      tl = tile_of(blockIdx.x, num_m, prm.heads_q);
    }
    Work w;
    if (!setup(tl, w, std::false_type{})) break;  // thd: past its sequence's end (no counter)
    if (!prm.tile_counter) ptx::mbar_wait(q_full, 0);
    const FwdParams& p = w.p;
    const int m0 = w.m0, n_lo = w.n_lo, n_hi = w.n_hi;
    const int row_base = m0 + 64 * cw + 16 * warp + lane / 4;  // + 8 h
    RowKeys keys[2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
      keys[h] = row_keys(row_base + 8 * h, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);

    float o[kD / 2];
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) o[i] = 0.f;
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f}, scale_o[2];
    float s[kBlockN / 2];
    uint32_t pa[kBlockN / 16][4];

    if constexpr (!C::kIntraWgOverlap) {
      for (int n = n_lo; n < n_hi; ++n, ++st) {
        kring.consumer_wait(st);
        ptx::wgmma_fence();
        issue_qk<T, C>(s, q_addr, k_addr(st));
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<0>();
        ptx::wgmma_fence_operands(s);
        kring.consumer_release(st);
        softmax_block<kBlockN, kSoftcap, C::kPOffset>(p, whole_block<C::kBlockM, kBlockN>(p, m0, n), s, n * kBlockN + key_lane,
                                         keys, row_max, row_sum, scale_o);
        scale_rows<kD>(o, scale_o);
        pack_p_for<T, C>(s, pa);
        vring.consumer_wait(st);
        ptx::wgmma_fence();
        issue_pv<T, C>(o, pa, v_addr(st));
        ptx::wgmma_commit_group();
        ptx::wgmma_wait_group<0>();
        ptx::wgmma_fence_operands(o);
        vring.consumer_release(st);
      }
      ptx::mbar_arrive(q_empty);  // every S of the tile is computed
    } else if (n_lo >= n_hi) {
      ptx::mbar_arrive(q_empty);
    } else {
      // S of block n + 1 is issued with PV of block n: the softmax of n + 1 runs while PV(n) does;
      // only O's rescale waits for it. Between a wgmma's issue and its wait the code has no branch
      // (ptxas serializes wgmma across one): the barrier waits come before the issue, and the
      // blocks are walked in three loops — those the mask cuts before the blocks every row sees
      // whole, those, and the ones the mask cuts after them — each with its softmax compiled for
      // its kind, so the range test runs only where a key can be masked. A turn is passed after
      // every issue; warpgroup 1 opens the turns once (its last pass of a tile opens warpgroup
      // 0's first turn of the next; the last one is an arrival nobody waits for).
      if constexpr (C::kPingpong)
        if (cw == 1 && !turns_started) ptx::named_barrier_arrive(1, 256);  // warpgroup 0 issues first
      turns_started = true;
      turn_wait<C>(cw);
      kring.consumer_wait(st);
      ptx::wgmma_fence();
      issue_qk<T, C>(s, q_addr, k_addr(st));
      ptx::wgmma_commit_group();
      turn_pass<C>(cw);
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operands(s);
      kring.consumer_release(st);
      online_softmax<kBlockN, true, kSoftcap, C::kPOffset>(p, s, n_lo * kBlockN + key_lane, keys, row_max, row_sum, scale_o);
      pack_p_for<T, C>(s, pa);
      PipelineState<kStages> sv = st;
      ++st;
      // One block n > n_lo: S(n) issued with PV(n - 1).
      auto step = [&]<bool kMask>(int n) {
        turn_wait<C>(cw);
        kring.consumer_wait(st);
        vring.consumer_wait(sv);
        ptx::wgmma_fence();
        issue_qk<T, C>(s, q_addr, k_addr(st));
        ptx::wgmma_commit_group();
        issue_pv<T, C>(o, pa, v_addr(sv));
        ptx::wgmma_commit_group();
        turn_pass<C>(cw);
        ptx::wgmma_wait_group<1>();
        ptx::wgmma_fence_operands(s);
        kring.consumer_release(st);
        online_softmax<kBlockN, kMask, kSoftcap, C::kPOffset>(p, s, n * kBlockN + key_lane, keys, row_max, row_sum, scale_o);
        ptx::wgmma_wait_group<0>();
        ptx::wgmma_fence_operands(o);
        vring.consumer_release(sv);
        scale_rows<kD>(o, scale_o);
        pack_p_for<T, C>(s, pa);
        sv = st;
        ++st;
      };
      // The blocks every row of the tile sees whole: [ceil(lo of the last row / N), (hi of the
      // first row + 1) / N), clamped to the blocks after n_lo.
      int whole_lo, whole_hi;
      {
        const int last = min(m0 + C::kBlockM, p.seqlen_q) - 1;
        const KeyRange first_row = attn_key_range(m0, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
        const KeyRange last_row = attn_key_range(last, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
        whole_lo = min(max(static_cast<int>((last_row.lo + kBlockN - 1) / kBlockN), n_lo + 1), n_hi);
        whole_hi = min(max(static_cast<int>((first_row.hi + 1) / kBlockN), whole_lo), n_hi);
      }
      for (int n = n_lo + 1; n < whole_lo; ++n) step.template operator()<true>(n);
      for (int n = whole_lo; n < whole_hi; ++n) step.template operator()<false>(n);
      for (int n = whole_hi; n < n_hi; ++n) step.template operator()<true>(n);
      ptx::mbar_arrive(q_empty);  // every S of the tile is computed: the producer may reload Q
      vring.consumer_wait(sv);
      ptx::wgmma_fence();
      issue_pv<T, C>(o, pa, v_addr(sv));
      ptx::wgmma_commit_group();
      ptx::wgmma_wait_group<0>();
      ptx::wgmma_fence_operands(o);
      vring.consumer_release(sv);
    }

    // Epilogue: O / l rounded once, two adjacent columns per store; LSE in natural log. At fixed
    // lengths the tile is read again from its Q slot: values kept in registers from the tile's
    // start spill the 256-column kernel.
    int e_m0 = m0, e_hq = w.hq, e_b = w.b;
    int e_t = t;
    if constexpr (!kVarlen) {
      const volatile int* slot = q_tile + 4 * (it & 1);
      e_m0 = __shfl_sync(0xffffffffu, slot[0], 0) * C::kBlockM;
      e_hq = __shfl_sync(0xffffffffu, slot[1], 0), e_b = __shfl_sync(0xffffffffu, slot[2], 0);
      asm volatile("mov.u32 %0, %%tid.x;" : "=r"(e_t));  // the row offset is not kept live either
      e_t %= 128;
    }
    ++it;
    using TO = std::conditional_t<C::kFp8, __nv_bfloat16, T>;  // e4m3 in, bf16 out
    TO* out = static_cast<TO*>(p.o);
    float o_scale = 1.f;  // e4m3: V's descale
    if constexpr (C::kFp8)
      if (p.v_descale) o_scale = p.v_descale[e_b * p.heads_kv + e_hq / p.group];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = row_sum[h];
      l += __shfl_xor_sync(0xffffffff, l, 1);
      l += __shfl_xor_sync(0xffffffff, l, 2);
      const int row = e_m0 + 64 * cw + 16 * (e_t / 32) + (e_t % 32) / 4 + 8 * h;
      if (row >= p.seqlen_q) continue;
      float inv = l > 0.f ? 1.f / l : 0.f;
      if constexpr (C::kFp8) inv *= o_scale;
      TO* orow = out + int64_t(e_b) * p.so.b + int64_t(w.q0 + row) * p.so.s + int64_t(e_hq) * p.so.h + key_lane;
#pragma unroll
      for (int j = 0; j < kD / 8; ++j)
        if (8 * j < p.head_dim)  // D is a multiple of 8: a thread's column pair is wholly in or out
          *reinterpret_cast<uint32_t*>(orow + 8 * j) = pack2<TO>(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
      if (lane % 4 == 0)
        p.lse[kVarlen ? int64_t(e_hq) * p.total_q + w.q0 + row : (int64_t(e_b) * p.heads_q + e_hq) * p.seqlen_q + row] =
            l > 0.f ? (row_max[h] * (kSoftcap ? 1.f : p.scale_log2) + lse_log2_of_sum<C::kPOffset>(l)) * 0.69314718055994531f
                    : -INFINITY;
    }
  }
}

// A rank-4 (D, S, H, B) map of a [B, S, H, D]-indexed operand with boxes of `rows` rows and
// `cols` columns (64: 128-byte rows under the 128-byte swizzle; 32 and 16, the narrow tiles' 64-
// and 32-byte rows under the 64- and 32-byte swizzles, a box as wide as its swizzle). Strides of
// extent-1 dims are not used by TMA but must be legal: the span below.
// A box's columns past D (D < the kernel's kD) come back as zeros: TMA fills what lies out of
// bounds with zeros and still counts the whole box in the barrier's transaction bytes.
// e4m3 operands (DType::kF8E4M3) are mapped as bytes: `cols` is then the box's bytes as well.
inline CUtensorMap operand_map(const void* base, DType dt, int64_t s, int64_t h, int64_t bsz, int64_t d, const AttnStrides& st,
                        uint32_t rows, uint32_t cols = 64) {
  const uint64_t e = dt == DType::kF8E4M3 ? 1 : 2;  // bytes per element
  const uint64_t dims[4] = {uint64_t(d), uint64_t(s), uint64_t(h), uint64_t(bsz)};
  uint64_t stride_s = uint64_t(st.s) * e, stride_h = uint64_t(st.h) * e, stride_b = uint64_t(st.b) * e;
  if (s == 1) stride_s = uint64_t(d) * e > 16 ? ceil_div(int64_t(d * e), 16) * 16 : 16;
  if (h == 1) stride_h = stride_s * uint64_t(s);
  if (bsz == 1) stride_b = stride_h * uint64_t(h);
  const uint64_t strides[3] = {stride_s, stride_h, stride_b};
  const uint32_t box[4] = {cols, rows, 1, 1}, unit[4] = {1, 1, 1, 1};
  const uint64_t row_bytes = cols * e;
  const CUtensorMapSwizzle swizzle = row_bytes == 32   ? CU_TENSOR_MAP_SWIZZLE_32B
                                     : row_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                       : CU_TENSOR_MAP_SWIZZLE_128B;
  const CUtensorMapDataType type = dt == DType::kF8E4M3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : dt == DType::kF16  ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                        : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  CUtensorMap map{};
  const CUresult r = ptx::encode_tiled(
      &map, type, 4u,
      const_cast<void*>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    HK_THROW(kCuda, "attention: cuTensorMapEncodeTiled failed (CUresult ", int(r), ") for [", bsz, ", ", s, ", ",
             h, ", ", d, "] with strides (", st.b, ", ", st.s, ", ", st.h, ")");
  return map;
}

// Whether policy P's rung is built for thd (variable length): its policy says kThd = true.
template <class P>
constexpr bool thd_rung() {
  if constexpr (requires { P::kThd; }) return P::kThd;
  else return false;
}

// e4m3: Vt[b][h][d][key] (row length ld = Sk rounded up to 32, zeros past Sk) from V in any strides
// whose rows are 8-byte multiples (rows_16b), the keys of every 32-key group in vt_key_of_column's
// order (pack_p_e4m3's P fragment). A block per 64 keys of one (b, h): their rows in by 8-byte
// loads into shared memory, out as 4-byte words of Vt's rows.
constexpr int kVtKeys = 64;
template <class TV>  // uint8_t (a template: defined in this header, instantiated where launched)
__global__ void __launch_bounds__(256) attention_fp8_vt(const TV* v, AttnStrides sv, TV* vt, int64_t d, int64_t sk,
                                                        int64_t ld) {
  __shared__ uint8_t tile[kVtKeys][128 + 8];  // D <= 128; 8 bytes of padding against bank conflicts
  const int64_t h = blockIdx.y, b = blockIdx.z, k0 = int64_t(blockIdx.x) * kVtKeys;
  const int dw = static_cast<int>(d / 8);  // 8-byte words per V row
  for (int i = threadIdx.x; i < kVtKeys * dw; i += blockDim.x) {
    const int key = i / dw, w = i % dw;
    uint2 x = make_uint2(0u, 0u);
    if (k0 + key < sk) x = *reinterpret_cast<const uint2*>(v + b * sv.b + (k0 + key) * sv.s + h * sv.h + 8 * w);
    *reinterpret_cast<uint2*>(&tile[key][8 * w]) = x;
  }
  __syncthreads();
  const int cols = static_cast<int>(min(int64_t(kVtKeys), ld - k0));  // a multiple of 32
  TV* out = vt + ((b * gridDim.y + h) * d) * ld + k0;
  for (int i = threadIdx.x; i < int(d) * (cols / 4); i += blockDim.x) {
    const int row = i / (cols / 4), q0 = 4 * (i % (cols / 4));
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int q = q0 + j, key = q / 32 * 32 + vt_key_of_column(q % 32);
      word |= uint32_t(tile[key][row]) << (8 * j);
    }
    *reinterpret_cast<uint32_t*>(out + int64_t(row) * ld + q0) = word;
  }
}

// The map of Vt: boxes of `rows` rows (D's columns) x 128 keys, 128-byte swizzle.
inline CUtensorMap vt_map(const uint8_t* vt, int64_t batch, int64_t heads_kv, int64_t d, int64_t ld, uint32_t rows) {
  const uint64_t dims[4] = {uint64_t(ld), uint64_t(d), uint64_t(heads_kv), uint64_t(batch)};
  const uint64_t strides[3] = {uint64_t(ld), uint64_t(d * ld), uint64_t(heads_kv * d * ld)};
  const uint32_t box[4] = {128, rows, 1, 1}, unit[4] = {1, 1, 1, 1};
  CUtensorMap map{};
  const CUresult r = ptx::encode_tiled(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4u, const_cast<uint8_t*>(vt), dims, strides,
                                       box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) HK_THROW(kCuda, "attention: cuTensorMapEncodeTiled failed (CUresult ", int(r), ") for Vt");
  return map;
}

template <class T, int kD, class P>
void launch_typed(const AttentionArgs& a, cudaStream_t stream, const char* name, bool persistent) {
  using C = Cfg<kD, P>;
  FwdParams p{};
  p.batch = static_cast<int>(a.batch);
  p.seqlen_q = static_cast<int>(a.seqlen_q), p.seqlen_k = static_cast<int>(a.seqlen_k);
  p.heads_q = static_cast<int>(a.heads_q), p.group = static_cast<int>(a.heads_q / a.heads_kv);
  p.head_dim = static_cast<int>(a.head_dim);
  p.window_left = a.window_left, p.window_right = a.window_right;
  constexpr float kLog2e = 1.4426950408889634f;
  p.scale_log2 = a.scale * kLog2e;
  p.cap_in = a.softcap > 0.f ? a.scale / a.softcap : 0.f;
  p.cap_out = a.softcap > 0.f ? a.softcap * kLog2e : 0.f;
  p.o = a.out, p.so = a.so, p.lse = a.lse_out;
  p.cu_q = a.cu_q, p.cu_k = a.cu_k, p.total_q = a.total_q, p.total_k = a.total_k;
  p.q_descale = a.q_descale, p.k_descale = a.k_descale, p.v_descale = a.v_descale;
  p.heads_kv = static_cast<int>(a.heads_kv);
  // thd: maps over the packed [total, H, D] tensors, one batch
  const bool thd = a.cu_q != nullptr;
  const int64_t rq = thd ? a.total_q : a.seqlen_q, rk = thd ? a.total_k : a.seqlen_k, nb = thd ? 1 : a.batch;
  const CUtensorMap mq = operand_map(a.q, a.dtype, rq, a.heads_q, nb, a.head_dim, a.sq, C::kBlockM, C::kChunkCols);
  const CUtensorMap mk = operand_map(a.k, a.dtype, rk, a.heads_kv, nb, a.head_dim, a.sk, C::kBlockN, C::kChunkCols);
  CUtensorMap mv;
  std::optional<detail::StreamWorkspace> vt_ws;  // held until the kernel is queued
  if constexpr (C::kFp8) {  // Vt in scratch: V's keys contiguous (the 8-bit wgmma's B is K-major)
    if (thd) HK_THROW(kNotSupported, name, ": e4m3 attention takes fixed lengths");
    const int64_t ld = ceil_div(a.seqlen_k, 32) * 32;
    const int64_t bytes = a.batch * a.heads_kv * a.head_dim * ld;
    vt_ws.emplace(stream, "attention_fp8_vt", size_t(bytes));
    uint8_t* vt = static_cast<uint8_t*>(vt_ws->get());
    const dim3 vt_grid(static_cast<unsigned>(ceil_div(ld, int64_t(kVtKeys))), static_cast<unsigned>(a.heads_kv),
                       static_cast<unsigned>(a.batch));
    attention_fp8_vt<uint8_t><<<vt_grid, 256, 0, stream>>>(static_cast<const uint8_t*>(a.v), a.sv, vt, a.head_dim,
                                                            a.seqlen_k, ld);
    HK_CHECK_LAUNCH("attention_fp8_vt");
    mv = vt_map(vt, a.batch, a.heads_kv, a.head_dim, ld, kD);
  } else {
    mv = operand_map(a.v, a.dtype, rk, a.heads_kv, nb, a.head_dim, a.sv, C::kBlockN, C::kChunkCols);
  }
  using Kernel = void (*)(const CUtensorMap, const CUtensorMap, const CUtensorMap, const FwdParams);
  Kernel kernel = a.softcap > 0.f ? attention_hopper_kernel<T, C, true, false> : attention_hopper_kernel<T, C, false, false>;
  if constexpr (thd_rung<P>()) {
    if (thd) kernel = a.softcap > 0.f ? attention_hopper_kernel<T, C, true, true> : attention_hopper_kernel<T, C, false, true>;
  } else {
    if (thd) HK_THROW(kNotSupported, name, ": thd (variable length) is not instantiated for this rung");
  }
  allow_dynamic_smem(kernel, C::kSmemBytes);
  // One CTA per tile, or persistent: one CTA per SM (its shared memory and registers fill one),
  // each looping over tiles. The kernel is the same; the grid decides.
  const int64_t tiles = ceil_div(a.seqlen_q, C::kBlockM) * a.heads_q * a.batch;
  if (tiles > INT32_MAX - 1024) HK_THROW(kNotSupported, name, ": more than 2^31 - 1024 query tiles");
  const int64_t resident = persistent ? resident_grid(kernel, C::kThreads, C::kSmemBytes) : int64_t(INT32_MAX);
  const int grid = static_cast<int>(std::min<int64_t>(tiles, resident));
  if (grid < tiles)
    p.tile_counter = static_cast<int*>(detail::zeroed_stream_scratch(stream, "attention_tile_counter", 2 * sizeof(int)));
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(mq, mk, mv, p);
  HK_CHECK_LAUNCH(name);
}

// The rungs' policies (what each turns on; the rung files say why).
struct V05Policy {
  static constexpr bool kIntraWgOverlap = false;  // S, softmax, PV strictly in turn
  static constexpr bool kPingpong = false;        // the consumer warpgroups issue when they like
  static constexpr bool kThd = true;              // also built for variable length (thd)
};
struct V06Policy {
  static constexpr bool kIntraWgOverlap = true;  // S(n + 1) and PV(n) in flight together
  static constexpr bool kPingpong = true;        // the consumer warpgroups take turns at the MMAs
};

// Each rung's kernels are instantiated once, in its own file (v05_wgmma_tma.cu, v06_pingpong_overlap.cu
// and, for the 256-column tile, v05_wgmma_tma_d256.cu, v06_pingpong_overlap_d256.cu: with it, a
// rung's file took over a minute on 2 cores); other users (v09) link to them.
#define HK_ATTN_INSTANCES(extern_, P, D)                                                                     \
  extern_ template void launch_typed<__nv_bfloat16, D, P>(const AttentionArgs&, cudaStream_t, const char*, bool); \
  extern_ template void launch_typed<__half, D, P>(const AttentionArgs&, cudaStream_t, const char*, bool);
HK_ATTN_INSTANCES(extern, V05Policy, 16)
HK_ATTN_INSTANCES(extern, V05Policy, 32)
HK_ATTN_INSTANCES(extern, V05Policy, 64)
HK_ATTN_INSTANCES(extern, V05Policy, 128)
HK_ATTN_INSTANCES(extern, V05Policy, 256)
HK_ATTN_INSTANCES(extern, V06Policy, 16)
HK_ATTN_INSTANCES(extern, V06Policy, 32)
HK_ATTN_INSTANCES(extern, V06Policy, 64)
HK_ATTN_INSTANCES(extern, V06Policy, 128)
HK_ATTN_INSTANCES(extern, V06Policy, 256)

// Launches the kernel of policy P for a's dtype and head dim: the 16-column tile for D <= 16 (32-byte
// rows, 32-byte swizzle), the 32-column one up to 32 (64-byte rows and swizzle), the 64-column tile
// up to 64, the 128-column one up to 128, the 256-column one above (columns past D are zeros:
// D = 80 does 128 columns' tensor work, D = 192 256 columns', D = 24 32 columns').
template <class P>
void launch_hopper_attention(const AttentionArgs& a, cudaStream_t stream, const char* name, bool persistent = false) {
  auto with_d = [&](auto t) {
    using T = decltype(t);
    if (a.head_dim <= 16) launch_typed<T, 16, P>(a, stream, name, persistent);
    else if (a.head_dim <= 32) launch_typed<T, 32, P>(a, stream, name, persistent);
    else if (a.head_dim <= 64) launch_typed<T, 64, P>(a, stream, name, persistent);
    else if (a.head_dim <= 128) launch_typed<T, 128, P>(a, stream, name, persistent);
    else launch_typed<T, 256, P>(a, stream, name, persistent);
  };
  if (a.dtype == DType::kF16) with_d(__half{});
  else with_d(__nv_bfloat16{});
}

// What the TMA/wgmma kernels can run ("" = all of p); `rung` names the caller in the reasons,
// `thd` says whether its policy instantiates the variable-length kernel (kThd).
inline std::string hopper_attention_supports(const AttentionProblem& p, const char* rung, bool thd = false) {
  const std::string r = std::string("attention: ") + rung;
  if (p.backward) return r + " is a forward kernel";
  if (p.is_varlen()) {
    if (!thd) return r + " is built for fixed-length layouts (thd runs on v05)";
    if (p.total_k < 1) return r + " needs total_k >= 1 (a TMA extent), got 0";
    if (p.total_q > INT32_MAX - 128 || p.total_k > INT32_MAX - 128)
      return r + " takes packed row counts below 2^31 (TMA coordinates)";
  }
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return r + " takes bf16 or f16";
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0)
    return r + " is built for D a multiple of 8 up to 256 (16-, 32-, 64-, 128- and 256-column tiles), got D=" +
           std::to_string(p.head_dim);
  if (p.seqlen_k < 1) return r + " needs Sk >= 1 (a TMA extent), got Sk=0";
  if (p.align_bytes < 16) return r + " needs 16-byte aligned operands (TMA)";
  // A dimension of extent 1 is never stepped over: its stride is not TMA's business.
  auto bad = [&](const AttnStrides& s, int64_t seq, int64_t heads, int64_t m) {
    return (p.batch > 1 && s.b % m) || (seq > 1 && s.s % m) || (heads > 1 && s.h % m);
  };
  if (bad(p.str_q, p.rows_q(), p.heads_q, 8) || bad(p.str_k, p.rows_k(), p.heads_kv, 8) ||
      bad(p.str_v, p.rows_k(), p.heads_kv, 8))
    return r + " needs q, k, v strides that are multiples of 8 elements (TMA's 16 bytes)";
  if (bad(p.str_o, p.rows_q(), p.heads_q, 2)) return r + " stores o in pairs: even o strides";
  for (int64_t v : {p.batch, p.heads_q, p.seqlen_q, p.seqlen_k})
    if (v > INT32_MAX) return r + " takes B, Hq and sequence lengths below 2^31";
  return "";
}

}  // namespace hk::attn_hopper
