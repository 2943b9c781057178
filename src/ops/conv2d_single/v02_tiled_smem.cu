// conv2d_single/v02_tiled_smem.cu
//
// Rung 2: a 32 x 128 output tile per block, its input (plus the kH - 1 rows and kW - 1
// columns of halo) staged once in shared memory as f32, the kernel beside it; each thread
// computes 2 rows x 8 consecutive outputs from register windows of its input rows.
// Adds over v01: every input element is read from global memory once per tile (halo aside:
// (32 + kH - 1)(128 + kW - 1) / 4096, 1.24x at k = 7, mostly L2 hits), 16-byte global loads
// and stores on rows whose width is a multiple of 8 elements, and for kH = kW in {3, 4, 5, 7} a
// compile-time kernel held in registers: each input row is read from shared memory with
// 16-byte loads once per thread and feeds up to 2 kW x 8 FMAs, so the FMA pipe, not shared
// memory, bounds the compute (49 FMAs per output at k = 7). Other sizes run a runtime-size loop;
// kernels larger than 32 x 32 run it once per 32 x 32 piece of k, the tile staged per piece
// (the largest tile and piece fit 48 KB of shared memory). Any kernel size, width and alignment.
// Run:   hk bench conv2d_single --variant v02_tiled_smem --shape 256x512x512
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "conv2d_single/conv2d_single_op.hpp"
#include "conv2d_single/stencil.cuh"

namespace hk::conv2d_single_v02_tiled_smem {
namespace {

using namespace stencil;  // tile geometry and per-thread compute shared with v03

inline size_t smem_bytes(int kh, int kw) {
  return sizeof(float) * (size_t(kernel_floats(kh, kw)) + size_t(tile_rows(kh)) * tile_pitch(kw));
}
static_assert(sizeof(float) * (kernel_floats(kMaxK, kMaxK) + tile_rows(kMaxK) * tile_pitch(kMaxK)) <= 48 * 1024,
              "the largest tile fits without the shared-memory opt-in");

// Stages rows [row0, row0 + rows) x cols [col0, col0 + pitch) of image `img` as f32, zero
// beyond the edge. kVec: 16-byte chunks (W a multiple of the chunk, x 16-byte aligned), four
// in flight per thread.
template <class T, bool kVec>
__device__ __forceinline__ void stage_tile(const T* __restrict__ img, float* tile, int64_t h, int64_t w,
                                           int64_t row0, int64_t col0, int rows, int pitch) {
  if constexpr (kVec) {
    constexpr int kChunk = kVec16<T>;
    const int per_row = pitch / kChunk;
    const int total = rows * per_row;
    for (int base = threadIdx.x; base < total; base += 4 * kThreads) {
      Vec<T, kChunk> v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int c = base + u * kThreads;
        const int64_t gr = row0 + c / per_row, gc = col0 + int64_t(c % per_row) * kChunk;
        if (c < total && gr < h && gc < w) {
          v[u] = *reinterpret_cast<const Vec<T, kChunk>*>(img + gr * w + gc);
        } else {
#pragma unroll
          for (int e = 0; e < kChunk; ++e) v[u].v[e] = from_f32<T>(0.f);
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int c = base + u * kThreads;
        if (c >= total) break;
        float* dst = tile + (c / per_row) * pitch + (c % per_row) * kChunk;
#pragma unroll
        for (int e = 0; e < kChunk; e += 4)
          *reinterpret_cast<float4*>(dst + e) =
              make_float4(to_f32(v[u].v[e]), to_f32(v[u].v[e + 1]), to_f32(v[u].v[e + 2]), to_f32(v[u].v[e + 3]));
      }
    }
  } else {
    const int total = rows * pitch;
#pragma unroll 4
    for (int c = threadIdx.x; c < total; c += kThreads) {
      const int64_t gr = row0 + c / pitch, gc = col0 + c % pitch;
      tile[c] = (gr < h && gc < w) ? to_f32(img[gr * w + gc]) : 0.f;
    }
  }
}

// KH = KW = 0: runtime kernel size (kh, kw); otherwise both compile-time and equal to kh, kw.
// A runtime kernel larger than 32 x 32 runs in pieces of at most 32 x 32: piece (a0, b0) meets
// the input shifted by (a0, b0), so each tile stages the input once per piece and the outputs
// sum the pieces' contributions in registers.
template <class T, int KH, int KW>
__global__ void __launch_bounds__(kThreads, 2) conv2d_single_v02_kernel(const T* __restrict__ x,
                                                                        const T* __restrict__ k,
                                                                        T* __restrict__ z, int64_t n, int64_t h,
                                                                        int64_t w, int kh_rt, int kw_rt, bool vec) {
  constexpr bool kFixed = KH > 0;
  const int kh = kFixed ? KH : kh_rt;
  const int kw = kFixed ? KW : kw_rt;
  const bool one_piece = kFixed || (kh <= kMaxK && kw <= kMaxK);
  extern __shared__ float4 conv2d_single_v02_smem[];
  float* ks = reinterpret_cast<float*>(conv2d_single_v02_smem);          // a piece of k, f32
  float* tile = ks + kernel_floats(min(kh, kMaxK), min(kw, kMaxK));     // (32 + ph - 1, pitch) f32
  // Stages kernel rows [a0, a0 + ph) x cols [b0, b0 + pw) into ks (row stride pw).
  auto stage_piece = [&](int a0, int b0, int ph, int pw) {
    for (int i = threadIdx.x; i < ph * pw; i += kThreads) ks[i] = to_f32(k[int64_t(a0 + i / pw) * kw + b0 + i % pw]);
  };
  if (one_piece) stage_piece(0, 0, kh, kw);
  __syncthreads();
  float kr[kFixed ? KH * KW : 1];  // the kernel in registers (compile-time sizes)
  if constexpr (kFixed) {
#pragma unroll
    for (int i = 0; i < KH * KW; ++i) kr[i] = ks[i];
  }

  const int tx = threadIdx.x % kThreadsW, ty = threadIdx.x / kThreadsW;
  const int64_t tiles_w = (w + kTileW - 1) / kTileW, tiles_h = (h + kTileH - 1) / kTileH;
  const int64_t tiles = n * tiles_h * tiles_w;
  for (int64_t t_id = blockIdx.x; t_id < tiles; t_id += gridDim.x) {
    const int64_t img_i = t_id / (tiles_h * tiles_w);
    const int64_t row0 = (t_id / tiles_w) % tiles_h * kTileH, col0 = t_id % tiles_w * kTileW;
    const T* img = x + img_i * h * w;
    float acc[kOutH][kOutW];
    if (one_piece) {
      const int pitch = tile_pitch(kw);
      __syncthreads();  // the previous tile's reads are done
      if (vec) stage_tile<T, true>(img, tile, h, w, row0, col0, tile_rows(kh), pitch);
      else stage_tile<T, false>(img, tile, h, w, row0, col0, tile_rows(kh), pitch);
      __syncthreads();
      compute_outputs<KH, KW>(tile + ty * kOutH * pitch + tx * kOutW, pitch, kr, ks, kh, kw, acc);
    } else {
#pragma unroll
      for (int r = 0; r < kOutH; ++r)
#pragma unroll
        for (int t = 0; t < kOutW; ++t) acc[r][t] = 0.f;
      // Pieces that meet only the zeros beyond the bottom or right edge add nothing: skipped (a
      // 1000 x 1000 kernel on a 64 x 64 image stages 4 pieces per tile, not 1024). The bounds
      // are the block's, so the barriers stay uniform.
      for (int a0 = 0; a0 < kh && row0 + a0 < h; a0 += kMaxK)
        for (int b0 = 0; b0 < kw && col0 + b0 < w; b0 += kMaxK) {  // b0 is a multiple of 32: 16-byte chunks stay whole
          const int ph = min(kMaxK, kh - a0), pw = min(kMaxK, kw - b0), pitch = tile_pitch(pw);
          __syncthreads();  // the previous piece's reads are done
          stage_piece(a0, b0, ph, pw);
          if (vec) stage_tile<T, true>(img, tile, h, w, row0 + a0, col0 + b0, tile_rows(ph), pitch);
          else stage_tile<T, false>(img, tile, h, w, row0 + a0, col0 + b0, tile_rows(ph), pitch);
          __syncthreads();
          compute_outputs<0, 0, true>(tile + ty * kOutH * pitch + tx * kOutW, pitch, kr, ks, ph, pw, acc);
        }
    }
    store_outputs<T>(z, img_i, h, w, row0 + ty * kOutH, col0 + tx * kOutW, vec, acc);
  }
}

template <class T, int KH, int KW>
void launch_sized(const Conv2dSingleArgs& a, cudaStream_t stream) {
  const size_t smem = smem_bytes(static_cast<int>(std::min<int64_t>(a.kh, kMaxK)),
                                 static_cast<int>(std::min<int64_t>(a.kw, kMaxK)));
  auto kernel = conv2d_single_v02_kernel<T, KH, KW>;
  const int64_t tiles = a.n * ceil_div(a.h, kTileH) * ceil_div(a.w, kTileW);
  const bool vec = a.w % kOutW == 0 && a.align_bytes >= 16;
  kernel<<<grid_for(tiles), kThreads, smem, stream>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.k),
                                                      static_cast<T*>(a.z), a.n, a.h, a.w, a.kh, a.kw, vec);
  HK_CHECK_LAUNCH("conv2d_single_v02_kernel");
}

void conv2d_single_v02_launch(const Conv2dSingleArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "conv2d_single/v02_tiled_smem", [&](auto t) {
    using T = decltype(t);
    stencil::with_kernel_size(a.kh, a.kw, [&](auto kh, auto kw) { launch_sized<T, decltype(kh)::value, decltype(kw)::value>(a, stream); });
  });
}

}  // namespace

HK_REGISTER_VARIANT(Conv2dSingleProblem, Conv2dSingleArgs, "conv2d_single", "v02_tiled_smem",
                    "32x128 tile with halo in shared memory, 2x8 outputs per thread from register windows, "
                    "16-byte loads and stores",
                    80, kFlagProduction, nullptr, conv2d_single_v02_launch);

}  // namespace hk::conv2d_single_v02_tiled_smem
