// gemm/v08_wgmma_tma_pipeline.cu
//
// Rung 8: v07 with a 5-slot ring: the producer thread keeps up to five K blocks in flight, each
// slot handed over by a full/empty mbarrier pair, so TMA loads overlap the wgmmas.
// Adds over v07: memory latency hidden behind the MMAs (the single-slot rung waits for every
// load); 5 x 32 KB of shared memory.
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the configuration below.
// Run:   hk bench gemm --variant v08_wgmma_tma_pipeline --shape 4096x4096x4096
#include "gemm/hopper_gemm.cuh"

namespace hk {
namespace {

// (kBlockN, kStages, kSetMaxNReg, kCluster, kPersistent, kTmaStore)
using Cfg = gemm_impl::HopperConfig<128, 5, false, 1, false, false>;

template <class T, bool kACol, bool kBCol>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_v08_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap tma_c, const GemmArgs g) {
  gemm_impl::hopper_gemm_body<T, kACol, !kBCol, Cfg>(&tma_a, &tma_b, &tma_c, g);
}

void gemm_v08_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::launch_hopper_dispatch<Cfg>(g, "v08_wgmma_tma_pipeline", "gemm_v08_kernel", stream,
                                         [](auto t, auto ac, auto bc) {
                                           return gemm_v08_kernel<decltype(t), decltype(ac)::value, decltype(bc)::value>;
                                         });
}

std::string gemm_v08_supports(const GemmProblem& p) { return gemm_tma_supports(p, false); }

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v08_wgmma_tma_pipeline",
                    "v07 + 5-stage TMA/mbarrier ring: loads overlap the MMAs", 90, kFlagNone,
                    gemm_v08_supports, gemm_v08_launch);

}  // namespace hk
