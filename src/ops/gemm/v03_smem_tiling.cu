// gemm/v03_smem_tiling.cu
//
// Rung 3: 32x32 output tiles; the block stages a 32x32 tile of A and of B in shared memory per
// K step, loading along whichever dimension is contiguous in memory (any layout coalesces).
// Adds over v02: each loaded element is used 32 times from shared memory instead of once from
// L1/L2: global traffic drops ~32x; the kernel becomes bound by shared-memory loads (2 per FMA).
// Needs: nothing beyond the op contract (any layout, stride, alignment; K = 0 included).
// Run:   hk bench gemm --variant v03_smem_tiling --shape 2048x2048x2048
#include "common/launch.cuh"
#include "gemm/epilogue.cuh"

namespace hk::gemm_v03_smem_tiling {
namespace {

constexpr int kTile = 32;  // (kTile, kTile) outputs per block, one per thread; K step kTile

template <class T>
__global__ void __launch_bounds__(kTile * kTile) gemm_v03_kernel(const GemmArgs g) {
  __shared__ float as[kTile][kTile + 1];  // (m, k) f32, +1 pad: column reads hit 32 banks
  __shared__ float bs[kTile][kTile + 1];  // (k, n) f32
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t bi = blockIdx.z;
  const int64_t m0 = int64_t(blockIdx.y) * kTile, n0 = int64_t(blockIdx.x) * kTile;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < g.k; k0 += kTile) {
    // threadIdx.x runs along the operand's contiguous dimension: coalesced in every layout.
    {
      int i = g.a_col ? tx : ty, kk = g.a_col ? ty : tx;
      bool in = m0 + i < g.m && k0 + kk < g.k;
      as[i][kk] = in ? gemm_impl::load_a<T>(g, bi, m0 + i, k0 + kk) : 0.0f;
    }
    {
      int kk = g.b_col ? tx : ty, j = g.b_col ? ty : tx;
      bool in = k0 + kk < g.k && n0 + j < g.n;
      bs[kk][j] = in ? gemm_impl::load_b<T>(g, bi, k0 + kk, n0 + j) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc = fmaf(as[ty][kk], bs[kk][tx], acc);
    __syncthreads();
  }
  gemm_impl::epilogue_store(g, acc, bi, m0 + ty, n0 + tx);
}

void gemm_v03_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::dispatch_input(g.in_dtype, "v03_smem_tiling", [&](auto t) {
    using T = decltype(t);
    dim3 grid(gemm_impl::grid_dim(ceil_div(g.n, kTile), "N"), gemm_impl::grid_dim(ceil_div(g.m, kTile), "M"),
              gemm_impl::grid_dim(g.batch, "batch"));
    gemm_v03_kernel<T><<<grid, dim3(kTile, kTile), 0, stream>>>(g);
    HK_CHECK_LAUNCH("gemm_v03_kernel");
  });
}

std::string gemm_v03_supports(const GemmProblem& p) {
  if (ceil_div(p.m, kTile) > 65535 || p.batch > 65535)
    return "grid.y (M/32) and grid.z (batch) are limited to 65535, got M=" + std::to_string(p.m) +
           ", batch=" + std::to_string(p.batch);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v03_smem_tiling",
                    "32x32 tiles staged in shared memory, coalesced loads in every layout", 70, kFlagNone,
                    gemm_v03_supports, gemm_v03_launch);

}  // namespace hk::gemm_v03_smem_tiling
