// conv2d_single/stencil.cuh — the tile geometry and the per-thread compute shared by the tiled
// rungs (v02_tiled_smem, v03_cp_async_pipeline): a 32 x 128 output tile per 256-thread block,
// each thread 2 rows x 8 consecutive outputs, computed from a shared-memory copy of the tile's
// input plus its kH - 1 / kW - 1 halo (row pitch tile_pitch(kW) elements).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/vec.cuh"

namespace hk::stencil {

constexpr int kThreads = 256;
constexpr int kOutW = 8;                              // consecutive outputs per thread along W
constexpr int kOutH = 2;                              // rows per thread
constexpr int kThreadsW = 16;                         // threads across a tile row
constexpr int kTileW = kThreadsW * kOutW;             // 128 outputs
constexpr int kTileH = kThreads / kThreadsW * kOutH;  // 32 rows
constexpr int kMaxK = 32;
static_assert(kThreads % kThreadsW == 0, "whole thread rows");
static_assert(kTileW % 8 == 0, "tile columns are whole 16-byte chunks of every dtype");

// Row pitch (elements) of a staged tile: 128 outputs plus the kW - 1 halo, in whole 8-element
// (16-byte at 16-bit, 32-byte at f32) chunks.
__host__ __device__ constexpr int tile_pitch(int kw) { return kTileW + ((kw - 1 + 7) & ~7); }
__host__ __device__ constexpr int tile_rows(int kh) { return kTileH + kh - 1; }
// Floats of the kernel in shared memory, rounded so what follows stays 16-byte aligned.
__host__ __device__ constexpr int kernel_floats(int kh, int kw) { return (kh * kw + 3) & ~3; }
// Window floats a thread reads per input row for a compile-time kW: 8 + kW - 1 rounded up to a
// whole number of 8-element chunks, so it never passes tile_pitch(kW).
template <int KW>
constexpr int kWindow = (kOutW + KW - 1 + 7) & ~7;

// n floats from shared memory at p (16-byte aligned): float4 loads for f32, 8-element 16-byte
// loads converted for f16/bf16.
template <class S, int N>
__device__ __forceinline__ void load_window(const S* p, float (&win)[N]) {
  if constexpr (std::is_same_v<S, float>) {
#pragma unroll
    for (int q = 0; q < N; q += 4) {
      const float4 f = *reinterpret_cast<const float4*>(p + q);
      win[q] = f.x, win[q + 1] = f.y, win[q + 2] = f.z, win[q + 3] = f.w;
    }
  } else {
    static_assert(N % 8 == 0, "whole 16-byte chunks");
#pragma unroll
    for (int q = 0; q < N; q += 8) {
      const Vec<S, 8> v = *reinterpret_cast<const Vec<S, 8>*>(p + q);
#pragma unroll
      for (int e = 0; e < 8; ++e) win[q + e] = to_f32(v.v[e]);
    }
  }
}

// acc[r][t] = sum_{a, b} k[a][b] tile[row0 + r + a][col0 + t + b] for this thread's outputs
// (kAccumulate: acc += the sum, for kernels staged in 32 x 32 pieces);
// `base` points at tile[row0][col0]. KH = KW = 0: runtime kh, kw with the kernel read from
// shared memory `ks`; otherwise compile-time sizes with the kernel in registers `kr`.
template <int KH, int KW, bool kAccumulate = false, class S, int NR>
__device__ __forceinline__ void compute_outputs(const S* base, int pitch, const float (&kr)[NR], const float* ks,
                                                int kh, int kw, float (&acc)[kOutH][kOutW]) {
  if constexpr (!kAccumulate) {
#pragma unroll
    for (int r = 0; r < kOutH; ++r)
#pragma unroll
      for (int t = 0; t < kOutW; ++t) acc[r][t] = 0.f;
  }
  if constexpr (KH > 0) {
    static_assert(NR == KH * KW, "the kernel in registers");
#pragma unroll
    for (int i = 0; i < kOutH + KH - 1; ++i) {
      float win[kWindow<KW>];
      load_window<S>(base + i * pitch, win);
#pragma unroll
      for (int r = 0; r < kOutH; ++r) {
        const int a = i - r;  // kernel row that input row i meets for output row r
        if (a < 0 || a >= KH) continue;
#pragma unroll
        for (int b = 0; b < KW; ++b)
#pragma unroll
          for (int t = 0; t < kOutW; ++t) acc[r][t] = fmaf(win[t + b], kr[a * KW + b], acc[r][t]);
      }
    }
  } else {
    for (int i = 0; i < kOutH + kh - 1; ++i) {
      const S* rowp = base + i * pitch;
#pragma unroll
      for (int r = 0; r < kOutH; ++r) {
        const int a = i - r;
        if (a < 0 || a >= kh) continue;
        for (int b = 0; b < kw; ++b) {
          const float kv = ks[a * kw + b];
#pragma unroll
          for (int t = 0; t < kOutW; ++t) acc[r][t] = fmaf(to_f32(rowp[t + b]), kv, acc[r][t]);
        }
      }
    }
  }
}

// Writes this thread's outputs at (row0, col0) of image `img` of z: 16-byte streaming stores
// when kVec (W % 8 == 0 and z 16-byte aligned: the 8 outputs are all inside the row), else
// one element at a time inside the image.
template <class T>
__device__ __forceinline__ void store_outputs(T* z, int64_t img, int64_t h, int64_t w, int64_t row0, int64_t col0,
                                              bool vec, const float (&acc)[kOutH][kOutW]) {
#pragma unroll
  for (int r = 0; r < kOutH; ++r) {
    const int64_t gr = row0 + r;
    if (gr >= h || col0 >= w) continue;
    T* out = z + (img * h + gr) * w + col0;
    if (vec) {
      constexpr int kChunk = kVec16<T>;
#pragma unroll
      for (int q = 0; q < kOutW; q += kChunk) {
        Vec<T, kChunk> v;
#pragma unroll
        for (int e = 0; e < kChunk; ++e) v.v[e] = from_f32<T>(acc[r][q + e]);
        store_stream<T, kChunk>(out + q, v);
      }
    } else {
#pragma unroll
      for (int t = 0; t < kOutW; ++t)
        if (col0 + t < w) out[t] = from_f32<T>(acc[r][t]);
    }
  }
}

// Calls fn(std::integral_constant<int, KH>, std::integral_constant<int, KW>) with the kernel size
// the tiled rungs compile a register-window kernel for (3, 4, 5 and 7, square), else with 0, 0:
// the kernel for any size up to the tile's limit. One list for every launcher.
template <class Fn>
void with_kernel_size(int64_t kh, int64_t kw, Fn&& fn) {
  using std::integral_constant;
  if (kh == 3 && kw == 3) return fn(integral_constant<int, 3>{}, integral_constant<int, 3>{});
  if (kh == 4 && kw == 4) return fn(integral_constant<int, 4>{}, integral_constant<int, 4>{});
  if (kh == 5 && kw == 5) return fn(integral_constant<int, 5>{}, integral_constant<int, 5>{});
  if (kh == 7 && kw == 7) return fn(integral_constant<int, 7>{}, integral_constant<int, 7>{});
  fn(integral_constant<int, 0>{}, integral_constant<int, 0>{});
}

}  // namespace hk::stencil
