// gemm/v02_coalesced.cu
//
// Rung 2: v01 with threadIdx.x along N. A warp now reads one element of A (a broadcast) and 32
// consecutive elements of a row-major B, and writes 32 consecutive elements of C: one or two
// transactions instead of 32.
// Adds over v01: coalesced B loads and C stores (the A row is shared by the warp).
// Needs: nothing beyond the op contract (any layout, stride, alignment; K = 0 included).
// Run:   hk bench gemm --variant v02_coalesced --shape 2048x2048x2048
#include "common/launch.cuh"
#include "gemm/epilogue.cuh"

namespace hk::gemm_v02_coalesced {
namespace {

constexpr int kTileN = 32;  // threads along N (one warp)
constexpr int kTileM = 8;   // threads along M

template <class T>
__global__ void __launch_bounds__(kTileN * kTileM) gemm_v02_kernel(const GemmArgs g) {
  const int64_t bi = blockIdx.z;
  const int64_t col = int64_t(blockIdx.x) * kTileN + threadIdx.x;  // x -> N: coalesced
  const int64_t row = int64_t(blockIdx.y) * kTileM + threadIdx.y;
  if (row >= g.m || col >= g.n) return;
  float acc = 0.0f;
  for (int64_t kk = 0; kk < g.k; ++kk) acc = fmaf(gemm_impl::load_a<T>(g, bi, row, kk), gemm_impl::load_b<T>(g, bi, kk, col), acc);
  gemm_impl::epilogue_store(g, acc, bi, row, col);
}

void gemm_v02_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::dispatch_input(g.in_dtype, "v02_coalesced", [&](auto t) {
    using T = decltype(t);
    dim3 grid(gemm_impl::grid_dim(ceil_div(g.n, kTileN), "N"), gemm_impl::grid_dim(ceil_div(g.m, kTileM), "M"),
              gemm_impl::grid_dim(g.batch, "batch"));
    gemm_v02_kernel<T><<<grid, dim3(kTileN, kTileM), 0, stream>>>(g);
    HK_CHECK_LAUNCH("gemm_v02_kernel");
  });
}

std::string gemm_v02_supports(const GemmProblem& p) {
  if (ceil_div(p.m, kTileM) > 65535 || p.batch > 65535)
    return "grid.y (M/8) and grid.z (batch) are limited to 65535, got M=" + std::to_string(p.m) +
           ", batch=" + std::to_string(p.batch);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v02_coalesced",
                    "one thread per output, threadIdx.x along N: coalesced B loads and C stores", 70, kFlagNone,
                    gemm_v02_supports, gemm_v02_launch);

}  // namespace hk::gemm_v02_coalesced
