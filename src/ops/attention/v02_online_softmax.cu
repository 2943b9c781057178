// attention/v02_online_softmax.cu
//
// Rung 2: one pass over K and V with a running (max, sum) per query row — the online softmax —
// so no score matrix is materialised (v01 writes B Hq Sq Sk f32 scores and reads them twice).
// CUDA cores, f32 throughout. This is the general rung: every valid problem runs here (any
// D >= 1, any strides, GQA, every mask, Sk = 0), and the public op falls back to it for what the
// tensor-core rungs decline. Deterministic in both directions (no atomics).
//
// Forward: a block of 4 warps owns 8 query rows (2 per warp) of one (batch, head). Per tile of 32
// keys: K and the block's Q rows pass through shared memory in chunks of 128 dims (so any D
// fits) and each lane scores one key against the warp's rows; the warp's max and sum update
// the row state; then lanes switch to output dims: each owns 8 of a 256-wide slab of D and
// adds the 32 keys' p * v (p broadcast by shuffle, V's slab tile from shared memory). D > 256
// takes several slabs (grid items), each recomputing the scores.
// Backward: Delta_i = rowsum(dO o O) first (a warp per row); dQ with the forward's structure
// (scores and dP = dO V^T per key tile, dS = P (dP - Delta) from the saved lse, dQ += dS K);
// dK and dV with the roles swapped: 8 key rows per block, tiles of 32 query rows (over every
// query head of the kv head's group) as the partners, dV += P^T dO, dK += dS^T Q.
// Variable length (thd): a grid item whose tile starts past its sequence's end returns at once;
// every pointer is offset by the sequence's first packed row, lse and Delta indexed per row.
// e4m3 forward (bf16 out): the same kernel on the 8-bit values, the descales of (b, kv head)
// folded into the scores (q_descale k_descale) and the output (v_descale); P stays f32, so this
// is the reference the FP8 tensor-core rung (v10) is measured against, and its general path.
// Needs: nothing beyond the contract.
// Run:   hk bench attention --variant v02_online_softmax --shape 2048x128x1
#include <cuda_runtime.h>

#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "attention/attn_common.cuh"
#include "common/stream_scratch.hpp"

namespace hk::attention_v02_online_softmax {
namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kRowsPerWarp = 2, kRows = kWarps * kRowsPerWarp;  // rows per block (queries or keys)
constexpr int kTile = 32;                                       // partners per tile: one per lane
constexpr int kDC = 128;                                        // dims per chunk of the dot products
constexpr int kFwdSlab = 256, kBwdSlab = 128;                   // output dims per block
constexpr float kNegInf = -INFINITY;

template <class T>
__device__ __forceinline__ float ld(const T* p) {
  if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) return static_cast<float>(*p);
  else return to_f32(*p);
}

// dst[r][d] (pitch) = src row r0 + r, dims c0 + d, zero outside (rows, D).
template <class T, class RowFn>
__device__ __forceinline__ void load_chunk(float* dst, int pitch, int nrows, int ncols, int64_t r0, int64_t rows,
                                           int64_t c0, int64_t D, RowFn row) {
  for (int e = threadIdx.x; e < nrows * ncols; e += kThreads) {
    const int r = e / ncols, d = e % ncols;
    float x = 0.f;
    if (r0 + r < rows && c0 + d < D) x = ld<T>(row(r0 + r) + c0 + d);
    dst[r * pitch + d] = x;
  }
}

// ---- forward ---------------------------------------------------------------------------------

constexpr size_t kFwdSmem = sizeof(float) * (kTile * (kDC + 1) + kRows * kDC + kTile * kFwdSlab);

// T: the inputs' type; TO: the output's (T, or bf16 for e4m3 inputs).
template <class T, class TO>
__global__ void __launch_bounds__(kThreads) attn_v02_fwd_kernel(const AttentionArgs a, int64_t row_tiles, int slabs) {
  extern __shared__ float sm[];
  float* ks = sm;                      // [kTile][kDC + 1]
  float* qs = ks + kTile * (kDC + 1);  // [kRows][kDC]
  float* vs = qs + kRows * kDC;        // [kTile][kFwdSlab]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t D = a.head_dim, G = a.heads_q / a.heads_kv;
  const int64_t items = a.batch * a.heads_q * row_tiles * slabs;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int slab = static_cast<int>(item % slabs);
    int64_t rest = item / slabs;
    const int64_t tile = rest % row_tiles;
    rest /= row_tiles;
    const int64_t h = rest % a.heads_q, b = rest / a.heads_q, hk = h / G;
    const int64_t i0 = tile * kRows, d0 = int64_t(slab) * kFwdSlab;
    // This sequence's rows (thd: row i of the sequence is packed row q0 + i; the batch stride is 0).
    const AttnSeq seq = attn_seq(a, b);
    const int64_t Sq = seq.sq, Sk = seq.sk;
    if (i0 >= Sq) continue;  // past a shorter sequence's end (block-uniform)
    const T* Q = static_cast<const T*>(a.q) + seq.q0 * a.sq.s;
    const T* K = static_cast<const T*>(a.k) + seq.k0 * a.sk.s;
    const T* V = static_cast<const T*>(a.v) + seq.k0 * a.sv.s;
    TO* O = static_cast<TO*>(a.out) + seq.q0 * a.so.s;
    // e4m3: the descales of (b, kv head), FlashAttention-3's [B, Hkv] convention (1 without).
    const int64_t dsc = b * a.heads_kv + hk;
    const float qk_descale = a.q_descale ? a.q_descale[dsc] * a.k_descale[dsc] : 1.0f;
    const float v_descale = a.v_descale ? a.v_descale[dsc] : 1.0f;
    const int nc = static_cast<int>((std::min<int64_t>(kFwdSlab, D - d0) + 31) / 32);
    int64_t lo = Sk, hi = -1;  // keys any of the block's rows attends (ranges grow with i)
    for (int r = 0; r < kRows; ++r) {
      if (i0 + r >= Sq) break;
      const KeyRange kr = attn_key_range(i0 + r, Sq, Sk, a.window_left, a.window_right);
      if (kr.lo <= kr.hi) lo = std::min(lo, kr.lo), hi = std::max(hi, kr.hi);
    }
    KeyRange kr[kRowsPerWarp];
    float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kFwdSlab / 32];
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      kr[rr] = attn_key_range(i0 + warp * kRowsPerWarp + rr, Sq, Sk, a.window_left, a.window_right);
      m[rr] = kNegInf, l[rr] = 0.f;
#pragma unroll
      for (int c = 0; c < kFwdSlab / 32; ++c) acc[rr][c] = 0.f;
    }
    for (int64_t j0 = lo; j0 <= hi; j0 += kTile) {
      float s[kRowsPerWarp] = {};
      for (int64_t c0 = 0; c0 < D; c0 += kDC) {
        __syncthreads();
        load_chunk<T>(ks, kDC + 1, kTile, kDC, j0, Sk, c0, D, [&](int64_t j) { return attn::row_ptr(K, a.sk, b, j, hk); });
        load_chunk<T>(qs, kDC, kRows, kDC, i0, Sq, c0, D, [&](int64_t i) { return attn::row_ptr(Q, a.sq, b, i, h); });
        __syncthreads();
        const int dn = static_cast<int>(std::min<int64_t>(kDC, D - c0));
#pragma unroll
        for (int rr = 0; rr < kRowsPerWarp; ++rr) {
          const float* qr = qs + (warp * kRowsPerWarp + rr) * kDC;
          const float* kr_ = ks + lane * (kDC + 1);
          float x = 0.f;
          for (int d = 0; d < dn; ++d) x += qr[d] * kr_[d];
          s[rr] += x;
        }
      }
      // vs was last read before this tile's first barrier above
      load_chunk<T>(vs, kFwdSlab, kTile, kFwdSlab, j0, Sk, d0, D, [&](int64_t j) { return attn::row_ptr(V, a.sv, b, j, hk); });
      __syncthreads();
#pragma unroll
      for (int rr = 0; rr < kRowsPerWarp; ++rr) {
        const int64_t i = i0 + warp * kRowsPerWarp + rr, j = j0 + lane;
        const bool ok = i < Sq && j >= kr[rr].lo && j <= kr[rr].hi;
        const float sc = ok ? attn::score(s[rr] * qk_descale, a.scale, a.softcap) : kNegInf;
        const float mn = fmaxf(m[rr], attn::warp_max(sc));
        if (mn == kNegInf) continue;  // warp-uniform: nothing attended yet
        const float p = ok ? expf(sc - mn) : 0.f;
        const float corr = expf(m[rr] - mn);  // 0 while m is -inf
        l[rr] = l[rr] * corr + attn::warp_sum(p);
        m[rr] = mn;
#pragma unroll
        for (int c = 0; c < kFwdSlab / 32; ++c) acc[rr][c] *= corr;
        for (int jj = 0; jj < kTile; ++jj) {
          const float pj = __shfl_sync(0xffffffffu, p, jj);
          const float* vr = vs + jj * kFwdSlab + lane;
#pragma unroll
          for (int c = 0; c < kFwdSlab / 32; ++c)
            if (c < nc) acc[rr][c] += pj * vr[32 * c];
        }
      }
    }
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int64_t i = i0 + warp * kRowsPerWarp + rr;
      if (i >= Sq) continue;
      const float inv = l[rr] > 0.f ? v_descale / l[rr] : 0.f;
      TO* orow = attn::row_ptr(O, a.so, b, i, h);
#pragma unroll
      for (int c = 0; c < kFwdSlab / 32; ++c) {
        const int64_t d = d0 + lane + 32 * c;
        if (c < nc && d < D) orow[d] = from_f32<TO>(acc[rr][c] * inv);
      }
      if (slab == 0 && lane == 0)
        a.lse_out[a.lse_index(b, h, seq.q0 + i)] = l[rr] > 0.f ? m[rr] + logf(l[rr]) : kNegInf;
    }
    __syncthreads();  // the next item reloads the tiles
  }
}

// ---- backward --------------------------------------------------------------------------------

// delta[lse_index(b, h, i)] = dout_i . o_i (f32), a warp per row; thd: every packed row.
template <class T>
__global__ void __launch_bounds__(kThreads) attn_v02_delta_kernel(const AttentionArgs a, float* delta) {
  const int lane = threadIdx.x % 32;
  const int64_t S = a.row_seqlen(), rows = a.row_batches() * a.heads_q * S;
  const T *O = static_cast<const T*>(a.o), *dO = static_cast<const T*>(a.dout);
  for (int64_t r = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const int64_t i = r % S, h = (r / S) % a.heads_q, b = r / (S * a.heads_q);
    const T *orow = attn::row_ptr(O, a.so, b, i, h), *drow = attn::row_ptr(dO, a.sdo, b, i, h);
    float x = 0.f;
    for (int64_t d = lane; d < a.head_dim; d += 32) x += ld<T>(orow + d) * ld<T>(drow + d);
    x = attn::warp_sum(x);
    if (lane == 0) delta[a.lse_index(b, h, i)] = x;
  }
}

// p and dS of one (query i, key j) pair from the dot products q.k (qk) and dout.v (dp).
struct PDs {
  float p, ds;
};
__device__ __forceinline__ PDs p_ds(bool ok, float qk, float dp, float lse, float dlt, const AttentionArgs& a) {
  if (!ok) return {0.f, 0.f};
  float t = 0.f;
  const float s = attn::score(qk, a.scale, a.softcap, &t);
  const float p = expf(s - lse);
  float ds = p * (dp - dlt);
  if (a.softcap > 0.f) ds *= 1.f - t * t;
  return {p, ds};
}

constexpr size_t kDqSmem = sizeof(float) * (2 * kTile * (kDC + 1) + 2 * kRows * kDC + kTile * kBwdSlab);

template <class T>
__global__ void __launch_bounds__(kThreads) attn_v02_dq_kernel(const AttentionArgs a, const float* delta,
                                                               int64_t row_tiles, int slabs) {
  extern __shared__ float sm[];
  float* ks = sm;                       // [kTile][kDC + 1]
  float* vs = ks + kTile * (kDC + 1);   // [kTile][kDC + 1]
  float* qs = vs + kTile * (kDC + 1);   // [kRows][kDC]
  float* dos = qs + kRows * kDC;        // [kRows][kDC]
  float* kslab = dos + kRows * kDC;     // [kTile][kBwdSlab]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t D = a.head_dim, G = a.heads_q / a.heads_kv;
  const int64_t items = a.batch * a.heads_q * row_tiles * slabs;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int slab = static_cast<int>(item % slabs);
    int64_t rest = item / slabs;
    const int64_t tile = rest % row_tiles;
    rest /= row_tiles;
    const int64_t h = rest % a.heads_q, b = rest / a.heads_q, hk = h / G;
    const int64_t i0 = tile * kRows, d0 = int64_t(slab) * kBwdSlab;
    const AttnSeq seq = attn_seq(a, b);
    const int64_t Sq = seq.sq, Sk = seq.sk;
    if (i0 >= Sq) continue;
    const T* Q = static_cast<const T*>(a.q) + seq.q0 * a.sq.s;
    const T* K = static_cast<const T*>(a.k) + seq.k0 * a.sk.s;
    const T* V = static_cast<const T*>(a.v) + seq.k0 * a.sv.s;
    const T* dO = static_cast<const T*>(a.dout) + seq.q0 * a.sdo.s;
    T* dQ = static_cast<T*>(a.out) + seq.q0 * a.sdq.s;
    const int nc = static_cast<int>((std::min<int64_t>(kBwdSlab, D - d0) + 31) / 32);
    int64_t lo = Sk, hi = -1;
    for (int r = 0; r < kRows; ++r) {
      if (i0 + r >= Sq) break;
      const KeyRange kr = attn_key_range(i0 + r, Sq, Sk, a.window_left, a.window_right);
      if (kr.lo <= kr.hi) lo = std::min(lo, kr.lo), hi = std::max(hi, kr.hi);
    }
    KeyRange kr[kRowsPerWarp];
    float lse[kRowsPerWarp], dlt[kRowsPerWarp], acc[kRowsPerWarp][kBwdSlab / 32];
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int64_t i = i0 + warp * kRowsPerWarp + rr;
      kr[rr] = attn_key_range(i, Sq, Sk, a.window_left, a.window_right);
      const int64_t li = a.lse_index(b, h, seq.q0 + i);
      lse[rr] = i < Sq ? a.lse_in[li] : 0.f;
      dlt[rr] = i < Sq ? delta[li] : 0.f;
#pragma unroll
      for (int c = 0; c < kBwdSlab / 32; ++c) acc[rr][c] = 0.f;
    }
    for (int64_t j0 = lo; j0 <= hi; j0 += kTile) {
      float s[kRowsPerWarp] = {}, dp[kRowsPerWarp] = {};
      for (int64_t c0 = 0; c0 < D; c0 += kDC) {
        __syncthreads();
        load_chunk<T>(ks, kDC + 1, kTile, kDC, j0, Sk, c0, D, [&](int64_t j) { return attn::row_ptr(K, a.sk, b, j, hk); });
        load_chunk<T>(vs, kDC + 1, kTile, kDC, j0, Sk, c0, D, [&](int64_t j) { return attn::row_ptr(V, a.sv, b, j, hk); });
        load_chunk<T>(qs, kDC, kRows, kDC, i0, Sq, c0, D, [&](int64_t i) { return attn::row_ptr(Q, a.sq, b, i, h); });
        load_chunk<T>(dos, kDC, kRows, kDC, i0, Sq, c0, D, [&](int64_t i) { return attn::row_ptr(dO, a.sdo, b, i, h); });
        __syncthreads();
        const int dn = static_cast<int>(std::min<int64_t>(kDC, D - c0));
#pragma unroll
        for (int rr = 0; rr < kRowsPerWarp; ++rr) {
          const float *qr = qs + (warp * kRowsPerWarp + rr) * kDC, *dr = dos + (warp * kRowsPerWarp + rr) * kDC;
          const float *kr_ = ks + lane * (kDC + 1), *vr = vs + lane * (kDC + 1);
          float x = 0.f, y = 0.f;
          for (int d = 0; d < dn; ++d) x += qr[d] * kr_[d], y += dr[d] * vr[d];
          s[rr] += x, dp[rr] += y;
        }
      }
      load_chunk<T>(kslab, kBwdSlab, kTile, kBwdSlab, j0, Sk, d0, D, [&](int64_t j) { return attn::row_ptr(K, a.sk, b, j, hk); });
      __syncthreads();
#pragma unroll
      for (int rr = 0; rr < kRowsPerWarp; ++rr) {
        const int64_t i = i0 + warp * kRowsPerWarp + rr, j = j0 + lane;
        const bool ok = i < Sq && j >= kr[rr].lo && j <= kr[rr].hi;
        const float ds = p_ds(ok, s[rr], dp[rr], lse[rr], dlt[rr], a).ds;
        for (int jj = 0; jj < kTile; ++jj) {
          const float dj = __shfl_sync(0xffffffffu, ds, jj);
          const float* kr_ = kslab + jj * kBwdSlab + lane;
#pragma unroll
          for (int c = 0; c < kBwdSlab / 32; ++c)
            if (c < nc) acc[rr][c] += dj * kr_[32 * c];
        }
      }
    }
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int64_t i = i0 + warp * kRowsPerWarp + rr;
      if (i >= Sq) continue;
      T* row = attn::row_ptr(dQ, a.sdq, b, i, h);
#pragma unroll
      for (int c = 0; c < kBwdSlab / 32; ++c) {
        const int64_t d = d0 + lane + 32 * c;
        if (c < nc && d < D) row[d] = from_f32<T>(a.scale * acc[rr][c]);
      }
    }
    __syncthreads();
  }
}

constexpr size_t kDkvSmem = sizeof(float) * (2 * kTile * (kDC + 1) + 2 * kRows * kDC + 2 * kTile * kBwdSlab);

template <class T>
__global__ void __launch_bounds__(kThreads) attn_v02_dkv_kernel(const AttentionArgs a, const float* delta,
                                                                int64_t key_tiles, int slabs) {
  extern __shared__ float sm[];
  float* qs = sm;                        // [kTile][kDC + 1]   query rows (partners)
  float* dos = qs + kTile * (kDC + 1);   // [kTile][kDC + 1]
  float* ks = dos + kTile * (kDC + 1);   // [kRows][kDC]       the block's key rows
  float* vs = ks + kRows * kDC;          // [kRows][kDC]
  float* qslab = vs + kRows * kDC;       // [kTile][kBwdSlab]
  float* doslab = qslab + kTile * kBwdSlab;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t D = a.head_dim, G = a.heads_q / a.heads_kv;
  const int64_t items = a.batch * a.heads_kv * key_tiles * slabs;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int slab = static_cast<int>(item % slabs);
    int64_t rest = item / slabs;
    const int64_t tile = rest % key_tiles;
    rest /= key_tiles;
    const int64_t hk = rest % a.heads_kv, b = rest / a.heads_kv;
    const int64_t j0 = tile * kRows, d0 = int64_t(slab) * kBwdSlab;
    const AttnSeq seq = attn_seq(a, b);
    const int64_t Sq = seq.sq, Sk = seq.sk;
    if (j0 >= Sk) continue;
    const T* Q = static_cast<const T*>(a.q) + seq.q0 * a.sq.s;
    const T* K = static_cast<const T*>(a.k) + seq.k0 * a.sk.s;
    const T* V = static_cast<const T*>(a.v) + seq.k0 * a.sv.s;
    const T* dO = static_cast<const T*>(a.dout) + seq.q0 * a.sdo.s;
    T* dK = static_cast<T*>(a.dk) + seq.k0 * a.sdk.s;
    T* dV = static_cast<T*>(a.dv) + seq.k0 * a.sdv.s;
    const int64_t jmax = std::min<int64_t>(j0 + kRows, Sk) - 1;
    const int nc = static_cast<int>((std::min<int64_t>(kBwdSlab, D - d0) + 31) / 32);
    float adk[kRowsPerWarp][kBwdSlab / 32] = {}, adv[kRowsPerWarp][kBwdSlab / 32] = {};
    for (int64_t h = hk * G; h < (hk + 1) * G; ++h) {
      for (int64_t i0 = 0; i0 < Sq; i0 += kTile) {
        // key ranges grow with i: skip query tiles that attend none of the block's keys
        const int64_t il = std::min<int64_t>(i0 + kTile, Sq) - 1;
        const KeyRange first = attn_key_range(i0, Sq, Sk, a.window_left, a.window_right);
        const KeyRange last = attn_key_range(il, Sq, Sk, a.window_left, a.window_right);
        if (last.hi < j0 || first.lo > jmax) continue;
        float s[kRowsPerWarp] = {}, dp[kRowsPerWarp] = {};
        for (int64_t c0 = 0; c0 < D; c0 += kDC) {
          __syncthreads();
          load_chunk<T>(qs, kDC + 1, kTile, kDC, i0, Sq, c0, D, [&](int64_t i) { return attn::row_ptr(Q, a.sq, b, i, h); });
          load_chunk<T>(dos, kDC + 1, kTile, kDC, i0, Sq, c0, D, [&](int64_t i) { return attn::row_ptr(dO, a.sdo, b, i, h); });
          load_chunk<T>(ks, kDC, kRows, kDC, j0, Sk, c0, D, [&](int64_t j) { return attn::row_ptr(K, a.sk, b, j, hk); });
          load_chunk<T>(vs, kDC, kRows, kDC, j0, Sk, c0, D, [&](int64_t j) { return attn::row_ptr(V, a.sv, b, j, hk); });
          __syncthreads();
          const int dn = static_cast<int>(std::min<int64_t>(kDC, D - c0));
#pragma unroll
          for (int rr = 0; rr < kRowsPerWarp; ++rr) {
            const float *kr_ = ks + (warp * kRowsPerWarp + rr) * kDC, *vr = vs + (warp * kRowsPerWarp + rr) * kDC;
            const float *qr = qs + lane * (kDC + 1), *dr = dos + lane * (kDC + 1);
            float x = 0.f, y = 0.f;
            for (int d = 0; d < dn; ++d) x += qr[d] * kr_[d], y += dr[d] * vr[d];
            s[rr] += x, dp[rr] += y;
          }
        }
        load_chunk<T>(qslab, kBwdSlab, kTile, kBwdSlab, i0, Sq, d0, D, [&](int64_t i) { return attn::row_ptr(Q, a.sq, b, i, h); });
        load_chunk<T>(doslab, kBwdSlab, kTile, kBwdSlab, i0, Sq, d0, D, [&](int64_t i) { return attn::row_ptr(dO, a.sdo, b, i, h); });
        __syncthreads();
        const int64_t i = i0 + lane;
        const KeyRange kr = attn_key_range(i, Sq, Sk, a.window_left, a.window_right);
        const int64_t li = a.lse_index(b, h, seq.q0 + i);
        const float lse = i < Sq ? a.lse_in[li] : 0.f, dlt = i < Sq ? delta[li] : 0.f;
#pragma unroll
        for (int rr = 0; rr < kRowsPerWarp; ++rr) {
          const int64_t j = j0 + warp * kRowsPerWarp + rr;
          const bool ok = i < Sq && j < Sk && j >= kr.lo && j <= kr.hi;
          const PDs pd = p_ds(ok, s[rr], dp[rr], lse, dlt, a);
          for (int ii = 0; ii < kTile; ++ii) {
            const float pi = __shfl_sync(0xffffffffu, pd.p, ii), di = __shfl_sync(0xffffffffu, pd.ds, ii);
            const float *qr = qslab + ii * kBwdSlab + lane, *dr = doslab + ii * kBwdSlab + lane;
#pragma unroll
            for (int c = 0; c < kBwdSlab / 32; ++c)
              if (c < nc) adk[rr][c] += di * qr[32 * c], adv[rr][c] += pi * dr[32 * c];
          }
        }
      }
    }
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int64_t j = j0 + warp * kRowsPerWarp + rr;
      if (j >= Sk) continue;
      T *krow = attn::row_ptr(dK, a.sdk, b, j, hk), *vrow = attn::row_ptr(dV, a.sdv, b, j, hk);
#pragma unroll
      for (int c = 0; c < kBwdSlab / 32; ++c) {
        const int64_t d = d0 + lane + 32 * c;
        if (c < nc && d < D) krow[d] = from_f32<T>(a.scale * adk[rr][c]), vrow[d] = from_f32<T>(adv[rr][c]);
      }
    }
    __syncthreads();
  }
}

template <class Kernel>
void launch_items(Kernel kernel, size_t smem, int64_t items, cudaStream_t stream, const char* name,
                  const AttentionArgs& a, auto... rest) {
  if (items <= 0) return;
  allow_dynamic_smem(kernel, smem);
  kernel<<<grid_for(items), kThreads, smem, stream>>>(a, rest...);
  HK_CHECK_LAUNCH(name);
}

void attention_v02_launch(const AttentionArgs& a, cudaStream_t stream) {
  auto forward = [&](auto t, auto o) {
    const int64_t q_tiles = ceil_div(a.seqlen_q, kRows);
    const int slabs = static_cast<int>(ceil_div(a.head_dim, kFwdSlab));
    launch_items(attn_v02_fwd_kernel<decltype(t), decltype(o)>, kFwdSmem, a.batch * a.heads_q * q_tiles * slabs,
                 stream, "attn_v02_fwd_kernel", a, q_tiles, slabs);
  };
  if (a.dtype == DType::kF8E4M3) {
    if (a.backward) HK_THROW(kNotSupported, "attention/v02_online_softmax: e4m3 has a forward only");
    forward(__nv_fp8_e4m3{}, __nv_bfloat16{});
    return;
  }
  attn::dispatch_16bit(a.dtype, "attention/v02_online_softmax", [&](auto t) {
    using T = decltype(t);
    const int64_t q_tiles = ceil_div(a.seqlen_q, kRows), k_tiles = ceil_div(a.seqlen_k, kRows);
    if (!a.backward) {
      forward(t, t);
      return;
    }
    const int slabs = static_cast<int>(ceil_div(a.head_dim, kBwdSlab));
    const int64_t rows = a.row_batches() * a.heads_q * a.row_seqlen();
    StreamScratch delta(rows * int64_t(sizeof(float)), stream);
    float* dl = delta.as<float>();
    if (rows > 0) {
      attn_v02_delta_kernel<T><<<grid_for(ceil_div(rows, kWarps)), kThreads, 0, stream>>>(a, dl);
      HK_CHECK_LAUNCH("attn_v02_delta_kernel");
    }
    launch_items(attn_v02_dq_kernel<T>, kDqSmem, a.batch * a.heads_q * q_tiles * slabs, stream, "attn_v02_dq_kernel",
                 a, static_cast<const float*>(dl), q_tiles, slabs);
    launch_items(attn_v02_dkv_kernel<T>, kDkvSmem, a.batch * a.heads_kv * k_tiles * slabs, stream,
                 "attn_v02_dkv_kernel", a, static_cast<const float*>(dl), k_tiles, slabs);
  });
}

std::string attention_v02_supports(const AttentionProblem& p) {
  if (p.dtype == DType::kF8E4M3 && p.backward) return "e4m3 inputs have a forward only";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(AttentionProblem, AttentionArgs, "attention", "v02_online_softmax",
                    "general rung: online softmax over K/V tiles in shared memory, CUDA cores, any D/strides/mask; "
                    "deterministic backward (dQ per query tile, dK/dV per key tile)",
                    80, kFlagProduction, attention_v02_supports, attention_v02_launch);

}  // namespace hk::attention_v02_online_softmax
