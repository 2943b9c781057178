// gemm/v15_fused_fast_epilogue.cu
//
// Rung 15: v14 with the fused epilogues on the specialised path too. v14 gave the plain GEMM a
// branch-free epilogue but left bias, ReLU and GeLU on v12's generic one, which re-tests C_in,
// bias, activation and output dtype and does 64-bit bounds and index math for every element
// (~1,700 SASS instructions per 64-column chunk) while both consumer warpgroups, and so the
// tensor cores, wait: measured on the H200 at 4096^3 bf16, v14 paid 14% over its plain GEMM for
// ReLU and 36% for bias + GeLU. Here the host picks a kernel per epilogue kind — activation
// (none, ReLU, GeLU tanh), bias or not, output dtype — so each element is alpha acc (+ its
// column's bias) (-> activation) -> round, with no branches: ~100 SASS instructions per
// 64-column chunk without activation (v14's plain path), ~130 with ReLU, ~320 with GeLU. A
// thread's 64 columns are the same in both of its rows, so it loads their bias values once per
// tile, as 32 unpredicated 4- or 8-byte loads issued while the tile's last wgmma group still
// runs (TileBias); only the last column tile of an N that is not a multiple of 256 predicates
// them. TMA still drops what lies past M and N: no per-element bounds checks. Problems with
// C_in (beta != 0) run the same kernel body with the epilogue read at run time (v12's generic
// path), so the rung covers every problem v14 covers. GeLU is act::gelu_tanh, the generic
// path's math (one ex2, one rcp): tanh.approx would save a MUFU per element but loses relative
// accuracy in the negative tail, where 1 + tanh cancels.
// Adds over v14: compile-time epilogue kinds for bias / ReLU / GeLU (one kernel per kind).
// Needs: as v12 (sm_90a; TMA's 16-byte rules for A, B, C and bias).
// Kernel: hopper_gemm.cuh with the configuration below; epilogue_tma_store_fused.
// Run:   hk bench gemm --variant 'v1[45]*' --shape 4096x4096x4096
#include "gemm/hopper_gemm.cuh"

namespace hk {
namespace {

// (kBlockN, kStages, kSetMaxNReg, kCluster, kPersistent, kTmaStore, kMmaInFlight, kCtaRelease,
//  kPlainEpilogue): v14's, except that the host sends plain problems to a FusedEpilogue kernel,
// so the run-time-epilogue kernel (C_in only) needs no plain branch.
using Cfg = gemm_impl::HopperConfig<256, 4, true, 2, true, true, 1, true, false>;

template <class T, bool kACol, bool kBCol, class Epi>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_v15_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                    const __grid_constant__ CUtensorMap tma_c, const GemmArgs g) {
  gemm_impl::hopper_gemm_body<T, kACol, !kBCol, Cfg, Epi>(&tma_a, &tma_b, &tma_c, g);
}

template <class Epi>
void launch_kind(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::launch_hopper_dispatch<Cfg>(g, "v15_fused_fast_epilogue", "gemm_v15_kernel", stream,
                                         [](auto t, auto ac, auto bc) {
                                           return gemm_v15_kernel<decltype(t), decltype(ac)::value,
                                                                  decltype(bc)::value, Epi>;
                                         });
}

std::string gemm_v15_supports(const GemmProblem& p) { return gemm_tma_supports(p, true); }

}  // namespace

void gemm_v15_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::dispatch_epilogue(g, [&](auto epi) { launch_kind<decltype(epi)>(g, stream); });
}

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v15_fused_fast_epilogue",
                    "v14 + compile-time bias/ReLU/GeLU epilogue kinds (no per-element tests; C_in: generic)", 90,
                    kFlagNone, gemm_v15_supports, gemm_v15_launch);

}  // namespace hk
