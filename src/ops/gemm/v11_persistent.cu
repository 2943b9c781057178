// gemm/v11_persistent.cu
//
// Rung 11: a persistent grid: one cluster per SM pair loops over output tiles, walked in
// groups of 8 cluster-rows (2048 rows of A) so the tiles in flight share A and B panels in L2.
// The producer starts the next tile's loads while the consumers run the epilogue.
// Adds over v10: no launch tail between waves, no CTA setup per tile, the epilogue overlapped
// with the next tile's loads, and an L2-friendly tile order.
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the configuration below.
// Run:   hk bench gemm --variant v11_persistent --shape 4096x4096x4096
#include "gemm/hopper_gemm.cuh"

namespace hk {
namespace {

// (kBlockN, kStages, kSetMaxNReg, kCluster, kPersistent, kTmaStore)
using Cfg = gemm_impl::HopperConfig<256, 4, true, 2, true, false>;

template <class T, bool kACol, bool kBCol>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_v11_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap tma_c, const GemmArgs g) {
  gemm_impl::hopper_gemm_body<T, kACol, !kBCol, Cfg>(&tma_a, &tma_b, &tma_c, g);
}

void gemm_v11_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::launch_hopper_dispatch<Cfg>(g, "v11_persistent", "gemm_v11_kernel", stream,
                                         [](auto t, auto ac, auto bc) {
                                           return gemm_v11_kernel<decltype(t), decltype(ac)::value, decltype(bc)::value>;
                                         });
}

std::string gemm_v11_supports(const GemmProblem& p) { return gemm_tma_supports(p, false); }

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v11_persistent",
                    "v10 + persistent grid with a grouped (L2-friendly) tile order", 90, kFlagNone,
                    gemm_v11_supports, gemm_v11_launch);

}  // namespace hk
