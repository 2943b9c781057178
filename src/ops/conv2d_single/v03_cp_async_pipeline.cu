// conv2d_single/v03_cp_async_pipeline.cu
//
// Rung 3: v02's tile and per-thread compute, with the input staged by cp.async into one of
// two shared-memory buffers in its own dtype: persistent blocks (one wave, two per SM) issue
// the next tile's copies before computing the current one, so HBM reads overlap the FMAs and
// the stores instead of alternating with them.
// Adds over v02: loads in flight during compute (v02 has none between its load phase and its
// barrier: two blocks per SM cover each other's compute only partly); no register round trip
// or f32 conversion on the staging path (16-bit tiles convert as the windows are read, 8
// elements per 16-byte shared load), which also halves the shared memory of 16-bit tiles.
// Needs: W a multiple of 8 and 16-byte aligned x and z (whole 16-byte chunks per row: the
// cp.async unit), kH, kW <= 32; otherwise supports() says why (v02 takes those).
// Run:   hk bench conv2d_single --variant v03_cp_async_pipeline --shape 256x512x512
#include "common/launch.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/vec.cuh"
#include "conv2d_single/conv2d_single_op.hpp"
#include "conv2d_single/stencil.cuh"

namespace hk::conv2d_single_v03_cp_async_pipeline {
namespace {

using namespace stencil;

template <class T>
size_t buffer_elems(int kh, int kw) {
  return size_t(tile_rows(kh)) * tile_pitch(kw);
}

template <class T>
size_t smem_bytes(int kh, int kw) {
  return sizeof(float) * kernel_floats(kh, kw) + 2 * sizeof(T) * buffer_elems<T>(kh, kw);
}

// Issues the cp.async copies of tile (img, row0, col0) into `buf`: rows x pitch elements in
// 16-byte chunks, zero-filled beyond the image (W % 8 == 0: a chunk is wholly in or out).
template <class T>
__device__ __forceinline__ void issue_tile(const T* __restrict__ x, T* buf, int64_t img, int64_t h, int64_t w,
                                           int64_t row0, int64_t col0, int rows, int pitch) {
  constexpr int kChunk = kVec16<T>;
  const int per_row = pitch / kChunk;
  const int total = rows * per_row;
  const T* base = x + img * h * w;
  for (int c = threadIdx.x; c < total; c += kThreads) {
    const int r = c / per_row, cc = (c % per_row) * kChunk;
    const int64_t gr = row0 + r, gc = col0 + cc;
    const bool ok = gr < h && gc < w;
    ptx::cp_async_16(buf + r * pitch + cc, ok ? base + gr * w + gc : x, ok ? 16 : 0);
  }
}

template <class T, int KH, int KW>
__global__ void __launch_bounds__(kThreads, 2) conv2d_single_v03_kernel(const T* __restrict__ x,
                                                                        const T* __restrict__ k,
                                                                        T* __restrict__ z, int64_t n, int64_t h,
                                                                        int64_t w, int kh_rt, int kw_rt) {
  constexpr bool kFixed = KH > 0;
  const int kh = kFixed ? KH : kh_rt;
  const int kw = kFixed ? KW : kw_rt;
  extern __shared__ float4 conv2d_single_v03_smem[];
  float* ks = reinterpret_cast<float*>(conv2d_single_v03_smem);  // (kh, kw) f32
  T* bufs = reinterpret_cast<T*>(ks + kernel_floats(kh, kw));    // 2 x (32 + kh - 1, pitch) T
  const int pitch = tile_pitch(kw);
  const int rows = tile_rows(kh);
  const int buf_elems = rows * pitch;

  const int64_t tiles_w = (w + kTileW - 1) / kTileW, tiles_h = (h + kTileH - 1) / kTileH;
  const int64_t tiles = n * tiles_h * tiles_w;
  auto issue = [&](int64_t t_id, int b) {
    issue_tile<T>(x, bufs + b * buf_elems, t_id / (tiles_h * tiles_w), h, w, (t_id / tiles_w) % tiles_h * kTileH,
                  t_id % tiles_w * kTileW, rows, pitch);
  };
  if (blockIdx.x < tiles) issue(blockIdx.x, 0);
  ptx::cp_async_commit();

  for (int i = threadIdx.x; i < kh * kw; i += kThreads) ks[i] = to_f32(k[i]);
  __syncthreads();
  float kr[kFixed ? KH * KW : 1];  // the kernel in registers (compile-time sizes)
  if constexpr (kFixed) {
#pragma unroll
    for (int i = 0; i < KH * KW; ++i) kr[i] = ks[i];
  }

  const int tx = threadIdx.x % kThreadsW, ty = threadIdx.x / kThreadsW;
  int b = 0;
  for (int64_t t_id = blockIdx.x; t_id < tiles; t_id += gridDim.x, b ^= 1) {
    // The other buffer was last read in the previous iteration, before its closing barrier.
    if (t_id + gridDim.x < tiles) issue(t_id + gridDim.x, b ^ 1);
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();  // this thread's copies of tile t_id have landed
    __syncthreads();          // and everyone's

    const int64_t img_i = t_id / (tiles_h * tiles_w);
    const int64_t row0 = (t_id / tiles_w) % tiles_h * kTileH, col0 = t_id % tiles_w * kTileW;
    float acc[kOutH][kOutW];
    compute_outputs<KH, KW>(bufs + b * buf_elems + ty * kOutH * pitch + tx * kOutW, pitch, kr, ks, kh, kw, acc);
    store_outputs<T>(z, img_i, h, w, row0 + ty * kOutH, col0 + tx * kOutW, true, acc);
    __syncthreads();  // buffer b is free for the copies issued next iteration
  }
  ptx::cp_async_wait<0>();
}

template <class T, int KH, int KW>
void launch_sized(const Conv2dSingleArgs& a, cudaStream_t stream) {
  const size_t smem = smem_bytes<T>(a.kh, a.kw);
  auto kernel = conv2d_single_v03_kernel<T, KH, KW>;
  allow_dynamic_smem(kernel, smem);
  const int64_t tiles = a.n * ceil_div(a.h, kTileH) * ceil_div(a.w, kTileW);
  const int blocks = static_cast<int>(std::min<int64_t>(tiles, resident_grid(kernel, kThreads, smem)));
  kernel<<<blocks, kThreads, smem, stream>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.k),
                                             static_cast<T*>(a.z), a.n, a.h, a.w, a.kh, a.kw);
  HK_CHECK_LAUNCH("conv2d_single_v03_kernel");
}

void conv2d_single_v03_launch(const Conv2dSingleArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "conv2d_single/v03_cp_async_pipeline", [&](auto t) {
    using T = decltype(t);
    stencil::with_kernel_size(a.kh, a.kw, [&](auto kh, auto kw) { launch_sized<T, decltype(kh)::value, decltype(kw)::value>(a, stream); });
  });
}

std::string conv2d_single_v03_supports(const Conv2dSingleProblem& p) {
  if (p.kh > kMaxK || p.kw > kMaxK)
    return "the shared-memory tiles take kernels up to 32 x 32, got " + std::to_string(p.kh) + " x " +
           std::to_string(p.kw);
  if (p.w % 8 != 0) return "W must be a multiple of 8 (whole 16-byte cp.async chunks per row), got " + std::to_string(p.w);
  if (p.align_bytes < 16) return "x and z must be 16-byte aligned, got " + std::to_string(p.align_bytes);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(Conv2dSingleProblem, Conv2dSingleArgs, "conv2d_single", "v03_cp_async_pipeline",
                    "v02's tile double-buffered: cp.async stages the next tile while the current one computes, "
                    "persistent blocks",
                    80, kFlagProduction, conv2d_single_v03_supports, conv2d_single_v03_launch);

}  // namespace hk::conv2d_single_v03_cp_async_pipeline
