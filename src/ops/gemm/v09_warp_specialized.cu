// gemm/v09_warp_specialized.cu
//
// Rung 9: warp specialization with register reallocation: the producer warpgroup gives its
// registers away (setmaxnreg 40), the two consumer warpgroups take them (232), which pays for a
// 128x256 tile (m64n256k16: 128 f32 accumulators per thread) and a 4-slot ring of 48 KB slots.
// Adds over v08: twice the MMA work per byte loaded from shared memory and per barrier
// handshake (arithmetic intensity per CTA 85 -> 171 flop/byte).
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the configuration below.
// Run:   hk bench gemm --variant v09_warp_specialized --shape 4096x4096x4096
#include "gemm/hopper_gemm.cuh"

namespace hk {
namespace {

// (kBlockN, kStages, kSetMaxNReg, kCluster, kPersistent, kTmaStore)
using Cfg = gemm_impl::HopperConfig<256, 4, true, 1, false, false>;

template <class T, bool kACol, bool kBCol>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_v09_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap tma_c, const GemmArgs g) {
  gemm_impl::hopper_gemm_body<T, kACol, !kBCol, Cfg>(&tma_a, &tma_b, &tma_c, g);
}

void gemm_v09_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::launch_hopper_dispatch<Cfg>(g, "v09_warp_specialized", "gemm_v09_kernel", stream,
                                         [](auto t, auto ac, auto bc) {
                                           return gemm_v09_kernel<decltype(t), decltype(ac)::value, decltype(bc)::value>;
                                         });
}

std::string gemm_v09_supports(const GemmProblem& p) { return gemm_tma_supports(p, false); }

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v09_warp_specialized",
                    "128x256 tiles, setmaxnreg 40/232 producer/consumer warpgroups, 4-stage ring", 90, kFlagNone,
                    gemm_v09_supports, gemm_v09_launch);

}  // namespace hk
