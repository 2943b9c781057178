// gemm/v04_register_tiling_2d.cu
//
// Rung 4: 128x128 block tiles, 256 threads, each thread accumulates an 8x8 sub-tile in
// registers. Per K step a thread reads 8 values of A and 8 of B from shared memory and does 64
// FMAs with them (outer product).
// Adds over v03: 64 FMAs per 16 shared-memory loads instead of 1 per 2, so the FMA pipes, not
// the shared-memory pipe, set the pace; A is stored transposed (k, m) so the 8 values a thread
// needs are contiguous.
// Needs: nothing beyond the op contract (any layout, stride, alignment; K = 0 included).
// Run:   hk bench gemm --variant v04_register_tiling_2d --shape 4096x4096x4096
#include "common/launch.cuh"
#include "gemm/epilogue.cuh"

namespace hk::gemm_v04_register_tiling_2d {
namespace {

constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 16;
constexpr int kThreads = 256;
constexpr int kThreadM = 8, kThreadN = 8;  // outputs per thread
static_assert((kBlockM / kThreadM) * (kBlockN / kThreadN) == kThreads, "one 8x8 sub-tile per thread");
static_assert(kBlockM * kBlockK % kThreads == 0 && kBlockK * kBlockN % kThreads == 0, "whole loads per thread");

template <class T>
__global__ void __launch_bounds__(kThreads) gemm_v04_kernel(const GemmArgs g) {
  __shared__ float as[kBlockK][kBlockM];  // (k, m) f32: A transposed
  __shared__ float bs[kBlockK][kBlockN];  // (k, n) f32
  const int tid = threadIdx.x;
  const int tm = tid / (kBlockN / kThreadN), tn = tid % (kBlockN / kThreadN);
  const int64_t bi = blockIdx.z;
  const int64_t m0 = int64_t(blockIdx.y) * kBlockM, n0 = int64_t(blockIdx.x) * kBlockN;
  float acc[kThreadM][kThreadN] = {};
  for (int64_t k0 = 0; k0 < g.k; k0 += kBlockK) {
    // Consecutive threads take consecutive elements along the operand's contiguous dimension.
#pragma unroll
    for (int r = 0; r < kBlockM * kBlockK / kThreads; ++r) {
      int e = tid + r * kThreads;
      int i = g.a_col ? e % kBlockM : e / kBlockK, kk = g.a_col ? e / kBlockM : e % kBlockK;
      bool in = m0 + i < g.m && k0 + kk < g.k;
      as[kk][i] = in ? gemm_impl::load_a<T>(g, bi, m0 + i, k0 + kk) : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kBlockK * kBlockN / kThreads; ++r) {
      int e = tid + r * kThreads;
      int kk = g.b_col ? e % kBlockK : e / kBlockN, j = g.b_col ? e / kBlockK : e % kBlockN;
      bool in = k0 + kk < g.k && n0 + j < g.n;
      bs[kk][j] = in ? gemm_impl::load_b<T>(g, bi, k0 + kk, n0 + j) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBlockK; ++kk) {
      float a[kThreadM], b[kThreadN];
#pragma unroll
      for (int i = 0; i < kThreadM; ++i) a[i] = as[kk][tm * kThreadM + i];
#pragma unroll
      for (int j = 0; j < kThreadN; ++j) b[j] = bs[kk][tn * kThreadN + j];
#pragma unroll
      for (int i = 0; i < kThreadM; ++i)
#pragma unroll
        for (int j = 0; j < kThreadN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kThreadM; ++i)
#pragma unroll
    for (int j = 0; j < kThreadN; ++j)
      gemm_impl::epilogue_store(g, acc[i][j], bi, m0 + tm * kThreadM + i, n0 + tn * kThreadN + j);
}

void gemm_v04_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::dispatch_input(g.in_dtype, "v04_register_tiling_2d", [&](auto t) {
    using T = decltype(t);
    dim3 grid(gemm_impl::grid_dim(ceil_div(g.n, kBlockN), "N"), gemm_impl::grid_dim(ceil_div(g.m, kBlockM), "M"),
              gemm_impl::grid_dim(g.batch, "batch"));
    gemm_v04_kernel<T><<<grid, kThreads, 0, stream>>>(g);
    HK_CHECK_LAUNCH("gemm_v04_kernel");
  });
}

std::string gemm_v04_supports(const GemmProblem& p) {
  if (ceil_div(p.m, kBlockM) > 65535 || p.batch > 65535)
    return "grid.y (M/128) and grid.z (batch) are limited to 65535, got M=" + std::to_string(p.m) +
           ", batch=" + std::to_string(p.batch);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v04_register_tiling_2d",
                    "128x128 block tiles, 8x8 outputs per thread in registers (outer products)", 70, kFlagNone,
                    gemm_v04_supports, gemm_v04_launch);

}  // namespace hk::gemm_v04_register_tiling_2d
