// gemm/v13_wgmma_in_flight.cu
//
// Rung 13: v12 with one wgmma group kept in flight across k-blocks. v12 waits for each k-block's
// MMAs to finish (wgmma.wait_group 0) before it issues the next k-block's, so the tensor cores
// idle while the warpgroup waits, hands the slot back and issues again. Here a consumer issues
// k-block kb, then waits only for kb - 1 (wait_group 1) and releases kb - 1's slot: the MMA
// pipe always has the next group queued.
// Adds over v12: MMA issue overlapped with MMA completion (CUTLASS's K_PIPE_MMAS = 1).
// Why: at 4096^3 bf16, v12 ran at 446 TFLOP/s = 0.60x cuBLAS on the H200 (2026-11-29) with
// HGMMA, TMA and setmaxnreg all in its SASS: the gap is in scheduling, and the per-k-block drain
// is the first suspect. Not yet measured; v12 stays the default until it is.
// Needs: as v12 (sm_90a; TMA's 16-byte rules for A, B and C).
// Kernel: hopper_gemm.cuh with the configuration below.
// Run:   hk bench gemm --variant 'v1[23]*' --shape 4096x4096x4096
#include "gemm/hopper_gemm.cuh"

namespace hk {
namespace {

// (kBlockN, kStages, kSetMaxNReg, kCluster, kPersistent, kTmaStore, kMmaInFlight)
using Cfg = gemm_impl::HopperConfig<256, 4, true, 2, true, true, 1>;

template <class T, bool kACol, bool kBCol>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_v13_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap tma_c, const GemmArgs g) {
  gemm_impl::hopper_gemm_body<T, kACol, !kBCol, Cfg>(&tma_a, &tma_b, &tma_c, g);
}

void gemm_v13_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::launch_hopper_dispatch<Cfg>(g, "v13_wgmma_in_flight", "gemm_v13_kernel", stream,
                                         [](auto t, auto ac, auto bc) {
                                           return gemm_v13_kernel<decltype(t), decltype(ac)::value, decltype(bc)::value>;
                                         });
}

std::string gemm_v13_supports(const GemmProblem& p) { return gemm_tma_supports(p, true); }

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v13_wgmma_in_flight",
                    "v12 + one wgmma group kept in flight across k-blocks (wait_group 1)", 90, kFlagNone,
                    gemm_v13_supports, gemm_v13_launch);

}  // namespace hk
