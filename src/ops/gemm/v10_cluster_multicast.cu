// gemm/v10_cluster_multicast.cu
//
// Rung 10: 2-CTA clusters along M. The two CTAs need the same 256-wide B tile; each loads half
// of it and TMA multicasts that half into both CTAs' shared memory. A slot is free only when the
// consumers of both CTAs are done with it (remote mbarrier arrivals).
// Adds over v09: B traffic from L2 halves (A 16 KB + B 16 KB per CTA per K block instead of
// 16 + 32), relieving the L2 -> SM bandwidth that bounds 128x256 tiles.
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the configuration below.
// Run:   hk bench gemm --variant v10_cluster_multicast --shape 4096x4096x4096
#include "gemm/hopper_gemm.cuh"

namespace hk {
namespace {

// (kBlockN, kStages, kSetMaxNReg, kCluster, kPersistent, kTmaStore)
using Cfg = gemm_impl::HopperConfig<256, 4, true, 2, false, false>;

template <class T, bool kACol, bool kBCol>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_v10_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap tma_c, const GemmArgs g) {
  gemm_impl::hopper_gemm_body<T, kACol, !kBCol, Cfg>(&tma_a, &tma_b, &tma_c, g);
}

void gemm_v10_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::launch_hopper_dispatch<Cfg>(g, "v10_cluster_multicast", "gemm_v10_kernel", stream,
                                         [](auto t, auto ac, auto bc) {
                                           return gemm_v10_kernel<decltype(t), decltype(ac)::value, decltype(bc)::value>;
                                         });
}

std::string gemm_v10_supports(const GemmProblem& p) { return gemm_tma_supports(p, false); }

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v10_cluster_multicast",
                    "v09 + 2-CTA clusters, B tile multicast by TMA to both CTAs", 90, kFlagNone,
                    gemm_v10_supports, gemm_v10_launch);

}  // namespace hk
