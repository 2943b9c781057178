// gemm/v01_naive.cu
//
// Rung 1 (reference): one thread per output element, a K loop of scalar loads, f32 FMA.
// threadIdx.x walks M, so the 32 threads of a warp read 32 different rows of a row-major A and
// write 32 different rows of C: every access is its own memory transaction (uncoalesced).
// Needs: nothing beyond the op contract (any layout, stride, alignment; K = 0 included).
// Run:   hk bench gemm --variant v01_naive --shape 2048x2048x2048
#include "common/launch.cuh"
#include "gemm/epilogue.cuh"

namespace hk::gemm_v01_naive {
namespace {

constexpr int kTile = 16;  // (kTile, kTile) threads per block, one output each

template <class T>
__global__ void __launch_bounds__(kTile * kTile) gemm_v01_kernel(const GemmArgs g) {
  const int64_t bi = blockIdx.z;
  const int64_t row = int64_t(blockIdx.y) * kTile + threadIdx.x;  // x -> M: the naive mapping
  const int64_t col = int64_t(blockIdx.x) * kTile + threadIdx.y;
  if (row >= g.m || col >= g.n) return;
  float acc = 0.0f;
  for (int64_t kk = 0; kk < g.k; ++kk) acc = fmaf(gemm_impl::load_a<T>(g, bi, row, kk), gemm_impl::load_b<T>(g, bi, kk, col), acc);
  gemm_impl::epilogue_store(g, acc, bi, row, col);
}

void gemm_v01_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::dispatch_input(g.in_dtype, "v01_naive", [&](auto t) {
    using T = decltype(t);
    dim3 grid(gemm_impl::grid_dim(ceil_div(g.n, kTile), "N"), gemm_impl::grid_dim(ceil_div(g.m, kTile), "M"),
              gemm_impl::grid_dim(g.batch, "batch"));
    gemm_v01_kernel<T><<<grid, dim3(kTile, kTile), 0, stream>>>(g);
    HK_CHECK_LAUNCH("gemm_v01_kernel");
  });
}

std::string gemm_v01_supports(const GemmProblem& p) {
  if (ceil_div(p.m, kTile) > 65535 || p.batch > 65535)
    return "grid.y (M/16) and grid.z (batch) are limited to 65535, got M=" + std::to_string(p.m) +
           ", batch=" + std::to_string(p.batch);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v01_naive",
                    "one thread per output, threadIdx.x along M: uncoalesced scalar loads", 70, kFlagReference,
                    gemm_v01_supports, gemm_v01_launch);

}  // namespace hk::gemm_v01_naive
