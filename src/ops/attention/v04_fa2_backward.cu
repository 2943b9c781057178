// attention/v04_fa2_backward.cu
//
// Rung 4: the FlashAttention-2 backward on tensor cores. P is recomputed from the forward's lse
// (no softmax pass), and every product is an mma.sync.m16n8k16 with ldmatrix operands:
//   1. Delta_i = rowsum(dO o O) (f32, a warp per row); in the atomic mode the f32 dQ
//      accumulator is cleared alongside.
//   2. dK/dV kernel: a block of 4 warps owns 64 keys of one (batch, kv head), 16 per warp, with
//      K and V resident in shared memory. 32-row tiles of Q and dO (with their lse and Delta)
//      stream through a two-slot cp.async ring, over every query head of the kv head's group
//      (GQA sums dK and dV in registers: no expanded copies) and only over the query tiles
//      that attend the block's keys. Per tile: S^T = K Q^T and dP^T = V dO^T, P^T = exp2(S^T
//      scale log2 e - lse log2 e) (masked: 0), dS^T = P^T (dP^T - Delta) (times the softcap's
//      1 - tanh^2); dV += P^T dO and dK += dS^T Q with P^T and dS^T rounded to the 16-bit
//      dtype in registers and used directly as A fragments (the accumulator layout of two
//      adjacent n8 blocks is the k16 A layout), Q and dO as B through ldmatrix.trans.
//   3. dQ, two modes. Default: the dK/dV kernel also writes dS^T to shared memory and adds its
//      block's dQ = dS K (32 x D) to an f32 buffer with atomicAdd; a last kernel scales and
//      converts it. Deterministic: the dK/dV kernel skips dQ and a separate kernel owns 64
//      query rows per block, recomputes S, P, dP, dS over the key tiles and accumulates
//      dQ = dS K in registers — no atomics, so the bits repeat run to run (the recomputation
//      costs about 2 extra GEMMs of 5).
// Adds over v02's backward: tensor cores for the five products, K/V (or Q) resident in shared
// memory while the other side streams, P and dS never leave registers (except dS^T once for
// the atomic dQ).
// Variable length (thd, D <= 96; instantiations of their own): each CTA offsets its pointers by
// its sequence's first packed rows and returns when its key block (dK/dV) or row block (dQ)
// starts past the sequence's end; Delta and the f32 dQ accumulator cover every packed row in
// lse's [Hq, total_q] order. At D = 128 the fixed-length kernels use 252-253 registers with the
// lengths in the constant bank; the per-sequence lengths in registers spill (12-28 bytes), so
// thd at D = 128 runs on v02.
// Needs: sm_80; D in {32, 64, 96, 128}; every operand 16-byte aligned with (b, s, h) strides
// multiples of 8 elements; B and Hq at most 65535; backward only.
// Run:   hk bench attention --variant v04_fa2_backward --shape 2048x128x1
// Build: own translation unit (45 s of CPU on its own).
#include <cuda_runtime.h>

#include <cmath>

#include "attention/attn_common.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/mma.cuh"
#include "common/stream_scratch.hpp"

namespace hk::attention_v04_fa2_backward {
namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kKeysKV = 64, kRowsKV = 32;  // dK/dV kernel: keys per block, query rows per tile
constexpr int kRowsQ = 64, kKeysQ = 64;    // dQ kernel: query rows per block, keys per tile
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t pack2(float lo, float hi, __nv_bfloat16) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t pack2(float lo, float hi, __half) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// The score transform in the log2 domain and the softcap's derivative factor.
struct ScoreFn {
  float sl2, cap_in, cap_out;
  bool capped;
  __device__ ScoreFn(const AttentionArgs& a)
      : sl2(a.scale * kLog2e), cap_in(a.softcap > 0.f ? a.scale / a.softcap : 0.f),
        cap_out(a.softcap * kLog2e), capped(a.softcap > 0.f) {}
  // log2-domain score of raw q.k; dcap receives 1 - tanh^2 (1 without softcap).
  __device__ __forceinline__ float operator()(float x, float& dcap) const {
    if (!capped) {
      dcap = 1.f;
      return x * sl2;
    }
    const float t = tanhf(x * cap_in);
    dcap = 1.f - t * t;
    return cap_out * t;
  }
};

// ---- 1. Delta (and the cleared dQ accumulator) -----------------------------------------------

// Row r = (b' Hq + h) S' + i of the per-row passes (AttentionArgs::row_batches / row_seqlen:
// every packed row for thd) is lse_index(b', h, i): Delta and dQ's accumulator share lse's layout.
template <class T>
__global__ void __launch_bounds__(kThreads) attn_v04_delta_kernel(const AttentionArgs a, float* delta) {
  const int lane = threadIdx.x % 32;
  const int64_t S = a.row_seqlen(), rows = a.row_batches() * a.heads_q * S;
  const T *O = static_cast<const T*>(a.o), *dO = static_cast<const T*>(a.dout);
  for (int64_t r = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const int64_t i = r % S, h = (r / S) % a.heads_q, b = r / (S * a.heads_q);
    const T *orow = attn::row_ptr(O, a.so, b, i, h), *drow = attn::row_ptr(dO, a.sdo, b, i, h);
    float x = 0.f;
    for (int64_t d = lane; d < a.head_dim; d += 32) x += to_f32(orow[d]) * to_f32(drow[d]);
    x = attn::warp_sum(x);
    if (lane == 0) delta[r] = x;
  }
}

// ---- 2. dK, dV (and the atomic dQ) -----------------------------------------------------------

template <int kD>
struct KvSmem {
  static constexpr int kP = ptx::padded_pitch(kD), kPS = ptx::padded_pitch(kRowsKV);
  static constexpr int kK = kKeysKV * kP, kQ = kRowsKV * kP, kS = kKeysKV * kPS;
  // K, V; 2 slots of Q and dO; dS^T; 2 slots of lse and Delta (f32)
  static constexpr size_t kBytes = size_t(2 * kK + 4 * kQ + kS) * 2 + 4 * kRowsKV * sizeof(float);
};

template <class T, int kD, bool kAtomicDq, bool kVarlen>
__global__ void __launch_bounds__(kThreads, 1) attn_v04_dkv_kernel(const AttentionArgs a, const float* delta,
                                                                    float* dq_acc) {
  using S = KvSmem<kD>;
  constexpr int kP = S::kP, kPS = S::kPS, kKS = kD / 16, kDT = kD / 8, kNT = kRowsKV / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  T* ks = reinterpret_cast<T*>(smem);
  T* vs = ks + S::kK;
  T* qs = vs + S::kK;         // 2 slots
  T* dos = qs + 2 * S::kQ;    // 2 slots
  T* dst = dos + 2 * S::kQ;   // dS^T [key][query]
  float* lse_s = reinterpret_cast<float*>(dst + S::kS);  // 2 slots
  float* dl_s = lse_s + 2 * kRowsKV;                     // 2 slots
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
  const int64_t b = blockIdx.z, hk = blockIdx.y, G = a.heads_q / a.heads_kv;
  // thd: this sequence's lengths and first packed rows (a template switch: the fixed-length
  // kernel keeps its lengths in the constant bank, where they cost no register).
  AttnSeq seq{0, 0, a.seqlen_q, a.seqlen_k};
  if constexpr (kVarlen) seq = attn_seq(a, b);
  const int64_t Sq = seq.sq, Sk = seq.sk, n0 = int64_t(blockIdx.x) * kKeysKV;
  if constexpr (kVarlen)
    if (n0 >= Sk) return;  // past this sequence's last key
  // lse's (and Delta's, and dQ's accumulator's) row i of query head h
  auto lse_at = [&](int64_t h, int64_t i) {
    if constexpr (kVarlen) return a.lse_index(b, h, seq.q0 + i);
    else return (b * a.heads_q + h) * Sq + i;
  };
  const int64_t n_last = (n0 + kKeysKV < Sk ? n0 + kKeysKV : Sk) - 1;
  const T* K = static_cast<const T*>(a.k) + b * a.sk.b + seq.k0 * a.sk.s + hk * a.sk.h;
  const T* V = static_cast<const T*>(a.v) + b * a.sv.b + seq.k0 * a.sv.s + hk * a.sv.h;
  const int64_t m_tiles = (Sq + kRowsKV - 1) / kRowsKV, total = G * m_tiles;

  // (query head, query tile) pairs whose rows attend some key of the block (ranges grow with
  // the row: the tile's first row bounds lo, its last row hi).
  auto valid = [&](int64_t it) {
    const int64_t m = it % m_tiles, i0 = m * kRowsKV, il = (i0 + kRowsKV < Sq ? i0 + kRowsKV : Sq) - 1;
    const KeyRange f = attn_key_range(i0, Sq, Sk, a.window_left, a.window_right);
    const KeyRange l = attn_key_range(il, Sq, Sk, a.window_left, a.window_right);
    return !(l.hi < n0 || f.lo > n_last);
  };
  auto next_valid = [&](int64_t it) {
    while (it < total && !valid(it)) ++it;
    return it;
  };
  auto load_q = [&](int64_t it, int slot) {
    const int64_t h = hk * G + it / m_tiles, i0 = (it % m_tiles) * kRowsKV;
    const T* Q = static_cast<const T*>(a.q) + b * a.sq.b + seq.q0 * a.sq.s + h * a.sq.h;
    const T* dO = static_cast<const T*>(a.dout) + b * a.sdo.b + seq.q0 * a.sdo.s + h * a.sdo.h;
    ptx::cp_async_tile<kRowsKV, kD, kP, kThreads>(qs + slot * S::kQ, Q, a.sq.s, i0, 0, Sq, kD, tid);
    ptx::cp_async_tile<kRowsKV, kD, kP, kThreads>(dos + slot * S::kQ, dO, a.sdo.s, i0, 0, Sq, kD, tid);
    if (tid < kRowsKV) {
      const int64_t i = i0 + tid, li = lse_at(h, i);
      lse_s[slot * kRowsKV + tid] = i < Sq ? a.lse_in[li] * kLog2e : 0.f;
      dl_s[slot * kRowsKV + tid] = i < Sq ? delta[li] : 0.f;
    }
  };

  ptx::cp_async_tile<kKeysKV, kD, kP, kThreads>(ks, K, a.sk.s, n0, 0, Sk, kD, tid);
  ptx::cp_async_tile<kKeysKV, kD, kP, kThreads>(vs, V, a.sv.s, n0, 0, Sk, kD, tid);
  int64_t it = next_valid(0);
  if (it < total) load_q(it, 0);
  ptx::cp_async_commit();

  const ptx::RowCol arow = ptx::ldmatrix_a_row(lane, true), brow = ptx::ldmatrix_b_row(lane, true),
                    trow = ptx::ldmatrix_b_row(lane, false), atrow = ptx::ldmatrix_a_row(lane, false);
  const ScoreFn fn(a);
  float dk[kDT][4] = {}, dv[kDT][4] = {};
  // This thread's keys (rows g and g + 8 of the warp's 16).
  const int64_t key0 = n0 + warp * 16 + g, key1 = key0 + 8;
  int slot = 0;
  while (it < total) {
    const int64_t nxt = next_valid(it + 1);
    if (nxt < total) load_q(nxt, slot ^ 1);
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();
    __syncthreads();
    const int64_t h = hk * G + it / m_tiles, i0 = (it % m_tiles) * kRowsKV;
    const T* qt = qs + slot * S::kQ;
    const T* dt_ = dos + slot * S::kQ;
    // S^T = K Q^T and dP^T = V dO^T: the warp's 16 keys x 32 query rows.
    float st[kNT][4] = {}, dpt[kNT][4] = {};
#pragma unroll
    for (int kk = 0; kk < kKS; ++kk) {
      uint32_t kf[4], vf[4];
      ptx::ldmatrix_x4<false>(kf, ks + (warp * 16 + arow.row) * kP + kk * 16 + arow.col);
      ptx::ldmatrix_x4<false>(vf, vs + (warp * 16 + arow.row) * kP + kk * 16 + arow.col);
#pragma unroll
      for (int nj = 0; nj < kNT; nj += 2) {
        uint32_t r[4], d[4];
        ptx::ldmatrix_x4<false>(r, qt + (nj * 8 + brow.row) * kP + kk * 16 + brow.col);
        ptx::ldmatrix_x4<false>(d, dt_ + (nj * 8 + brow.row) * kP + kk * 16 + brow.col);
        const uint32_t q0[2] = {r[0], r[1]}, q1[2] = {r[2], r[3]}, d0[2] = {d[0], d[1]}, d1[2] = {d[2], d[3]};
        ptx::mma_m16n8k16<T>(st[nj], kf, q0);
        ptx::mma_m16n8k16<T>(st[nj + 1], kf, q1);
        ptx::mma_m16n8k16<T>(dpt[nj], vf, d0);
        ptx::mma_m16n8k16<T>(dpt[nj + 1], vf, d1);
      }
    }
    // P^T and dS^T in place of S^T and dP^T.
#pragma unroll
    for (int nj = 0; nj < kNT; ++nj)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nj * 8 + 2 * t4 + (e & 1);
        const int64_t i = i0 + col, j = e < 2 ? key0 : key1;
        const KeyRange kr = attn_key_range(i, Sq, Sk, a.window_left, a.window_right);
        float p = 0.f, ds = 0.f;
        if (i < Sq && j >= kr.lo && j <= kr.hi) {
          float dcap;
          const float x = fn(st[nj][e], dcap);
          p = attn::fast_exp2(x - lse_s[slot * kRowsKV + col]);
          ds = p * (dpt[nj][e] - dl_s[slot * kRowsKV + col]) * dcap;
        }
        st[nj][e] = p;
        dpt[nj][e] = ds;
      }
    // dV += P^T dO, dK += dS^T Q: k = the tile's query rows.
#pragma unroll
    for (int kk = 0; kk < kRowsKV / 16; ++kk) {
      const uint32_t pf[4] = {pack2(st[2 * kk][0], st[2 * kk][1], T{}), pack2(st[2 * kk][2], st[2 * kk][3], T{}),
                              pack2(st[2 * kk + 1][0], st[2 * kk + 1][1], T{}),
                              pack2(st[2 * kk + 1][2], st[2 * kk + 1][3], T{})};
      const uint32_t sf[4] = {pack2(dpt[2 * kk][0], dpt[2 * kk][1], T{}), pack2(dpt[2 * kk][2], dpt[2 * kk][3], T{}),
                              pack2(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1], T{}),
                              pack2(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3], T{})};
#pragma unroll
      for (int d8 = 0; d8 < kDT; d8 += 2) {
        uint32_t r[4], q[4];
        ptx::ldmatrix_x4<true>(r, dt_ + (kk * 16 + trow.row) * kP + d8 * 8 + trow.col);
        ptx::ldmatrix_x4<true>(q, qt + (kk * 16 + trow.row) * kP + d8 * 8 + trow.col);
        const uint32_t r0[2] = {r[0], r[1]}, r1[2] = {r[2], r[3]}, q0[2] = {q[0], q[1]}, q1[2] = {q[2], q[3]};
        ptx::mma_m16n8k16<T>(dv[d8], pf, r0);
        ptx::mma_m16n8k16<T>(dv[d8 + 1], pf, r1);
        ptx::mma_m16n8k16<T>(dk[d8], sf, q0);
        ptx::mma_m16n8k16<T>(dk[d8 + 1], sf, q1);
      }
      if constexpr (kAtomicDq) {
        // dS^T to shared memory, rows = keys, for the block's dQ below.
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int nj = 2 * kk + half;
          T* row0 = dst + (warp * 16 + g) * kPS + nj * 8 + 2 * t4;
          *reinterpret_cast<uint32_t*>(row0) = sf[half * 2];
          *reinterpret_cast<uint32_t*>(row0 + 8 * kPS) = sf[half * 2 + 1];
        }
      }
    }
    if constexpr (kAtomicDq) {
      __syncthreads();
      // dQ (32 rows x D) += dS (32 x 64 keys) K (64 x D): warp w takes query rows 16 (w % 2)
      // .. +15 and half w / 2 of D.
      constexpr int kHalf = kD / 2, kHT = kHalf / 8;
      const int mq = warp % 2, dh = warp / 2;
      float acc[kHT][4] = {};
#pragma unroll
      for (int kk = 0; kk < kKeysKV / 16; ++kk) {
        uint32_t af[4];
        ptx::ldmatrix_x4<true>(af, dst + (kk * 16 + atrow.row) * kPS + mq * 16 + atrow.col);
#pragma unroll
        for (int d8 = 0; d8 < kHT; d8 += 2) {
          uint32_t r[4];
          ptx::ldmatrix_x4<true>(r, ks + (kk * 16 + trow.row) * kP + dh * kHalf + d8 * 8 + trow.col);
          const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
          ptx::mma_m16n8k16<T>(acc[d8], af, b0);
          ptx::mma_m16n8k16<T>(acc[d8 + 1], af, b1);
        }
      }
#pragma unroll
      for (int e2 = 0; e2 < 2; ++e2) {
        const int64_t i = i0 + mq * 16 + g + 8 * e2;
        if (i >= Sq) continue;
        float* row = dq_acc + lse_at(h, i) * kD + dh * kHalf + 2 * t4;
#pragma unroll
        for (int d8 = 0; d8 < kHT; ++d8) {
          atomicAdd(row + d8 * 8, acc[d8][2 * e2]);
          atomicAdd(row + d8 * 8 + 1, acc[d8][2 * e2 + 1]);
        }
      }
    }
    __syncthreads();  // the slot (and dS^T) are refilled next
    it = nxt;
    slot ^= 1;
  }
  ptx::cp_async_wait<0>();
  T* dK = static_cast<T*>(a.dk) + b * a.sdk.b + seq.k0 * a.sdk.s + hk * a.sdk.h;
  T* dV = static_cast<T*>(a.dv) + b * a.sdv.b + seq.k0 * a.sdv.s + hk * a.sdv.h;
#pragma unroll
  for (int e2 = 0; e2 < 2; ++e2) {
    const int64_t j = e2 ? key1 : key0;
    if (j >= Sk) continue;
#pragma unroll
    for (int d8 = 0; d8 < kDT; ++d8) {
      *reinterpret_cast<uint32_t*>(dK + j * a.sdk.s + d8 * 8 + 2 * t4) =
          pack2(a.scale * dk[d8][2 * e2], a.scale * dk[d8][2 * e2 + 1], T{});
      *reinterpret_cast<uint32_t*>(dV + j * a.sdv.s + d8 * 8 + 2 * t4) = pack2(dv[d8][2 * e2], dv[d8][2 * e2 + 1], T{});
    }
  }
}

// dq = scale * dq_acc, in dq's dtype and strides (thd: every packed row; rows outside every
// sequence get 0).
template <class T>
__global__ void attn_v04_dq_convert(const AttentionArgs a, const float* dq_acc) {
  const int64_t D = a.head_dim, S = a.row_seqlen(), n = a.row_batches() * a.heads_q * S * D;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = e % D, r = e / D, i = r % S, h = (r / S) % a.heads_q, b = r / (S * a.heads_q);
    attn::row_ptr(static_cast<T*>(a.out), a.sdq, b, i, h)[d] = from_f32<T>(a.scale * dq_acc[e]);
  }
}

// ---- 3. deterministic dQ ---------------------------------------------------------------------

template <int kD>
struct QSmem {
  static constexpr int kP = ptx::padded_pitch(kD);
  static constexpr int kQ = kRowsQ * kP, kK = kKeysQ * kP;
  static constexpr size_t kBytes = size_t(2 * kQ + 4 * kK) * 2;  // Q, dO; 2 slots of K and V
};

template <class T, int kD, bool kVarlen>
__global__ void __launch_bounds__(kThreads, 1) attn_v04_dq_kernel(const AttentionArgs a, const float* delta) {
  using S = QSmem<kD>;
  constexpr int kP = S::kP, kKS = kD / 16, kDT = kD / 8, kNT = kKeysQ / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);
  T* dos = qs + S::kQ;
  T* ks = dos + S::kQ;      // 2 slots
  T* vs = ks + 2 * S::kK;   // 2 slots
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
  const int64_t b = blockIdx.z, h = blockIdx.y, G = a.heads_q / a.heads_kv, hk = h / G;
  AttnSeq seq{0, 0, a.seqlen_q, a.seqlen_k};
  if constexpr (kVarlen) seq = attn_seq(a, b);
  const int64_t Sq = seq.sq, Sk = seq.sk, m0 = int64_t(blockIdx.x) * kRowsQ;
  if constexpr (kVarlen)
    if (m0 >= Sq) return;  // past this sequence's end
  const T* Q = static_cast<const T*>(a.q) + b * a.sq.b + seq.q0 * a.sq.s + h * a.sq.h;
  const T* dO = static_cast<const T*>(a.dout) + b * a.sdo.b + seq.q0 * a.sdo.s + h * a.sdo.h;
  const T* K = static_cast<const T*>(a.k) + b * a.sk.b + seq.k0 * a.sk.s + hk * a.sk.h;
  const T* V = static_cast<const T*>(a.v) + b * a.sv.b + seq.k0 * a.sv.s + hk * a.sv.h;
  const int64_t last_row = (m0 + kRowsQ < Sq ? m0 + kRowsQ : Sq) - 1;
  const KeyRange first = attn_key_range(m0, Sq, Sk, a.window_left, a.window_right);
  const KeyRange last = attn_key_range(last_row, Sq, Sk, a.window_left, a.window_right);
  const int64_t n_lo = first.lo / kKeysQ, n_hi = last.hi < 0 ? -1 : last.hi / kKeysQ;
  const int64_t r0 = m0 + warp * 16 + g, r1 = r0 + 8;
  const KeyRange kr[2] = {attn_key_range(r0, Sq, Sk, a.window_left, a.window_right),
                          attn_key_range(r1, Sq, Sk, a.window_left, a.window_right)};
  float lse[2], dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = r ? r1 : r0;
    int64_t li = (b * a.heads_q + h) * Sq + i;
    if constexpr (kVarlen) li = a.lse_index(b, h, seq.q0 + i);
    lse[r] = i < Sq ? a.lse_in[li] * kLog2e : 0.f;
    dl[r] = i < Sq ? delta[li] : 0.f;
  }

  ptx::cp_async_tile<kRowsQ, kD, kP, kThreads>(qs, Q, a.sq.s, m0, 0, Sq, kD, tid);
  ptx::cp_async_tile<kRowsQ, kD, kP, kThreads>(dos, dO, a.sdo.s, m0, 0, Sq, kD, tid);
  auto load_kv = [&](int64_t n, int slot) {
    ptx::cp_async_tile<kKeysQ, kD, kP, kThreads>(ks + slot * S::kK, K, a.sk.s, n * kKeysQ, 0, Sk, kD, tid);
    ptx::cp_async_tile<kKeysQ, kD, kP, kThreads>(vs + slot * S::kK, V, a.sv.s, n * kKeysQ, 0, Sk, kD, tid);
  };
  if (n_lo <= n_hi) load_kv(n_lo, 0);
  ptx::cp_async_commit();
  const ptx::RowCol arow = ptx::ldmatrix_a_row(lane, true), brow = ptx::ldmatrix_b_row(lane, true),
                    trow = ptx::ldmatrix_b_row(lane, false);
  const ScoreFn fn(a);
  float acc[kDT][4] = {};
  for (int64_t n = n_lo; n <= n_hi; ++n) {
    const int slot = static_cast<int>((n - n_lo) & 1);
    if (n + 1 <= n_hi) load_kv(n + 1, slot ^ 1);
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();
    __syncthreads();
    const T* kt = ks + slot * S::kK;
    const T* vt = vs + slot * S::kK;
    float s[kNT][4] = {}, dp[kNT][4] = {};
#pragma unroll
    for (int kk = 0; kk < kKS; ++kk) {
      uint32_t qf[4], df[4];
      ptx::ldmatrix_x4<false>(qf, qs + (warp * 16 + arow.row) * kP + kk * 16 + arow.col);
      ptx::ldmatrix_x4<false>(df, dos + (warp * 16 + arow.row) * kP + kk * 16 + arow.col);
#pragma unroll
      for (int nj = 0; nj < kNT; nj += 2) {
        uint32_t r[4], v[4];
        ptx::ldmatrix_x4<false>(r, kt + (nj * 8 + brow.row) * kP + kk * 16 + brow.col);
        ptx::ldmatrix_x4<false>(v, vt + (nj * 8 + brow.row) * kP + kk * 16 + brow.col);
        const uint32_t k0[2] = {r[0], r[1]}, k1[2] = {r[2], r[3]}, v0[2] = {v[0], v[1]}, v1[2] = {v[2], v[3]};
        ptx::mma_m16n8k16<T>(s[nj], qf, k0);
        ptx::mma_m16n8k16<T>(s[nj + 1], qf, k1);
        ptx::mma_m16n8k16<T>(dp[nj], df, v0);
        ptx::mma_m16n8k16<T>(dp[nj + 1], df, v1);
      }
    }
    const int64_t j0 = n * kKeysQ;
#pragma unroll
    for (int nj = 0; nj < kNT; ++nj)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t j = j0 + nj * 8 + 2 * t4 + (e & 1);
        const int r = e / 2;
        float ds = 0.f;
        if ((r ? r1 : r0) < Sq && j >= kr[r].lo && j <= kr[r].hi) {
          float dcap;
          const float p = attn::fast_exp2(fn(s[nj][e], dcap) - lse[r]);
          ds = p * (dp[nj][e] - dl[r]) * dcap;
        }
        s[nj][e] = ds;
      }
    // dQ += dS K: k = the tile's keys, B = K (key rows, D contiguous) through ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kKeysQ / 16; ++kk) {
      const uint32_t af[4] = {pack2(s[2 * kk][0], s[2 * kk][1], T{}), pack2(s[2 * kk][2], s[2 * kk][3], T{}),
                              pack2(s[2 * kk + 1][0], s[2 * kk + 1][1], T{}),
                              pack2(s[2 * kk + 1][2], s[2 * kk + 1][3], T{})};
#pragma unroll
      for (int d8 = 0; d8 < kDT; d8 += 2) {
        uint32_t r[4];
        ptx::ldmatrix_x4<true>(r, kt + (kk * 16 + trow.row) * kP + d8 * 8 + trow.col);
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        ptx::mma_m16n8k16<T>(acc[d8], af, b0);
        ptx::mma_m16n8k16<T>(acc[d8 + 1], af, b1);
      }
    }
    __syncthreads();
  }
  ptx::cp_async_wait<0>();
  T* dQ = static_cast<T*>(a.out) + b * a.sdq.b + seq.q0 * a.sdq.s + h * a.sdq.h;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = r ? r1 : r0;
    if (i >= Sq) continue;
#pragma unroll
    for (int d8 = 0; d8 < kDT; ++d8)
      *reinterpret_cast<uint32_t*>(dQ + i * a.sdq.s + d8 * 8 + 2 * t4) =
          pack2(a.scale * acc[d8][2 * r], a.scale * acc[d8][2 * r + 1], T{});
  }
}

template <class T, int kD, bool kVarlen>
void launch_typed(const AttentionArgs& a, cudaStream_t stream) {
  const int64_t rows = a.row_batches() * a.heads_q * a.row_seqlen();
  StreamScratch delta(rows * int64_t(sizeof(float)), stream);
  StreamScratch dq_acc(a.deterministic ? 0 : rows * kD * int64_t(sizeof(float)), stream);
  attn_v04_delta_kernel<T><<<grid_for(ceil_div(rows, kWarps)), kThreads, 0, stream>>>(a, delta.as<float>());
  HK_CHECK_LAUNCH("attn_v04_delta_kernel");
  if (!a.deterministic)
    HK_CHECK_CUDA(cudaMemsetAsync(dq_acc.as<float>(), 0, size_t(rows) * kD * sizeof(float), stream));
  dim3 kv_grid(static_cast<unsigned>(ceil_div(a.seqlen_k, kKeysKV)), static_cast<unsigned>(a.heads_kv),
               static_cast<unsigned>(a.batch));
  constexpr size_t kv_smem = KvSmem<kD>::kBytes;
  constexpr bool kV = kVarlen;
  if (a.deterministic) {
    auto k = attn_v04_dkv_kernel<T, kD, false, kV>;
    allow_dynamic_smem(k, kv_smem);
    k<<<kv_grid, kThreads, kv_smem, stream>>>(a, delta.as<float>(), nullptr);
    HK_CHECK_LAUNCH("attn_v04_dkv_kernel");
    auto q = attn_v04_dq_kernel<T, kD, kV>;
    constexpr size_t q_smem = QSmem<kD>::kBytes;
    allow_dynamic_smem(q, q_smem);
    dim3 q_grid(static_cast<unsigned>(ceil_div(a.seqlen_q, kRowsQ)), static_cast<unsigned>(a.heads_q),
                static_cast<unsigned>(a.batch));
    q<<<q_grid, kThreads, q_smem, stream>>>(a, delta.as<float>());
    HK_CHECK_LAUNCH("attn_v04_dq_kernel");
  } else {
    auto k = attn_v04_dkv_kernel<T, kD, true, kV>;
    allow_dynamic_smem(k, kv_smem);
    k<<<kv_grid, kThreads, kv_smem, stream>>>(a, delta.as<float>(), dq_acc.as<float>());
    HK_CHECK_LAUNCH("attn_v04_dkv_kernel");
    attn_v04_dq_convert<T><<<grid_for(ceil_div(rows * kD, 256)), 256, 0, stream>>>(a, dq_acc.as<float>());
    HK_CHECK_LAUNCH("attn_v04_dq_convert");
  }
}

void attention_v04_launch(const AttentionArgs& a, cudaStream_t stream) {
  attn::dispatch_16bit(a.dtype, "attention/v04_fa2_backward", [&](auto t) {
    using T = decltype(t);
    if (a.cu_q) {
      switch (a.head_dim) {
        case 32: launch_typed<T, 32, true>(a, stream); return;
        case 64: launch_typed<T, 64, true>(a, stream); return;
        case 96: launch_typed<T, 96, true>(a, stream); return;
        default: HK_THROW(kNotSupported, "attention/v04_fa2_backward: D = ", a.head_dim);
      }
    }
    switch (a.head_dim) {
      case 32: launch_typed<T, 32, false>(a, stream); return;
      case 64: launch_typed<T, 64, false>(a, stream); return;
      case 96: launch_typed<T, 96, false>(a, stream); return;
      case 128: launch_typed<T, 128, false>(a, stream); return;
      default: HK_THROW(kNotSupported, "attention/v04_fa2_backward: D = ", a.head_dim);
    }
  });
}

std::string attention_v04_supports(const AttentionProblem& p) {
  if (p.dtype == DType::kF8E4M3) return "16-bit inputs (e4m3: v10_fp8_forward)";
  if (!p.backward) return "backward only (the forward is v03_fa2_mma_sync)";
  const int64_t d = p.head_dim;
  if (d != 32 && d != 64 && d != 96 && d != 128)
    return "head dim " + std::to_string(d) + " is not one of 32, 64, 96, 128 (instantiated tile shapes)";
  if (std::string why = p.rows_16b(); !why.empty()) return why;
  if (p.batch > 65535 || p.heads_q > 65535) return "B and Hq must be at most 65535 (grid z and y)";
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0) return "empty problem (an empty grid): the general rung";
  if (p.seqlen_q == 0 || p.seqlen_k == 0) return "empty sequences run on the general rung";
  if (p.is_varlen() && d > 96)
    return "variable length (thd) is instantiated for D <= 96 only: at D = 128 the per-sequence lengths spill "
           "registers, so the build leaves that kernel out (v07 on v08's padded copies serves it)";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(AttentionProblem, AttentionArgs, "attention", "v04_fa2_backward",
                    "FlashAttention-2 backward: P from lse, dK/dV per 64-key block on mma.sync (GQA summed in "
                    "registers), dQ by f32 atomics or, deterministic, a separate dQ pass",
                    80, kFlagProduction, attention_v04_supports, attention_v04_launch);

}  // namespace hk::attention_v04_fa2_backward
