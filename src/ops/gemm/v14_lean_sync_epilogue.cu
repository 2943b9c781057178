// gemm/v14_lean_sync_epilogue.cu
//
// Rung 14: v13 (one wgmma group in flight) without the two costs its SASS shows outside the
// MMAs themselves:
//  - the slot release. v10..v13 hand a slot back to both CTAs' producers with
//    mbarrier.arrive.release.cluster, which ptxas lowers to MEMBAR.ALL.CTA; MEMBAR.ALL.GPU;
//    ERRBAR; CGAERRBAR; SYNCS.ARRIVE — a GPU-scope fence in two lanes of every consumer warp on
//    every k-block, right after the wgmma wait. The slot's readers are wgmma ops that
//    wgmma.wait_group has already retired, so the default (CTA-scope) release that CUTLASS's
//    ClusterBarrier::arrive uses is enough: a bare SYNCS.ARRIVE.
//  - the epilogue. v12's is generic: every element re-tests C_in, bias and activation, the
//    output dtype and the bounds with 64-bit index math (~3400 SASS instructions per 64-column
//    chunk) while both consumer warpgroups — and so the tensor cores — stop. Problems with no
//    C_in, bias or activation (the plain GEMM) take a branch-free path: alpha * acc, converted
//    to a compile-time output type, written swizzled, stored by TMA (which drops what lies
//    past M and N). Fused epilogues keep v12's path.
// Adds over v13: CTA-scope slot release; a specialised epilogue for the plain GEMM.
// Needs: as v12 (sm_90a; TMA's 16-byte rules for A, B and C).
// Kernel: hopper_gemm.cuh with the configuration below.
// Run:   hk bench gemm --variant 'v1[234]*' --shape 4096x4096x4096
#include "gemm/hopper_gemm.cuh"

namespace hk {
namespace {

// (kBlockN, kStages, kSetMaxNReg, kCluster, kPersistent, kTmaStore, kMmaInFlight, kCtaRelease,
//  kPlainEpilogue)
using Cfg = gemm_impl::HopperConfig<256, 4, true, 2, true, true, 1, true, true>;

template <class T, bool kACol, bool kBCol>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_v14_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap tma_c, const GemmArgs g) {
  gemm_impl::hopper_gemm_body<T, kACol, !kBCol, Cfg>(&tma_a, &tma_b, &tma_c, g);
}

void gemm_v14_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::launch_hopper_dispatch<Cfg>(g, "v14_lean_sync_epilogue", "gemm_v14_kernel", stream,
                                         [](auto t, auto ac, auto bc) {
                                           return gemm_v14_kernel<decltype(t), decltype(ac)::value, decltype(bc)::value>;
                                         });
}

std::string gemm_v14_supports(const GemmProblem& p) { return gemm_tma_supports(p, true); }

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v14_lean_sync_epilogue",
                    "v13 + CTA-scope slot release (no MEMBAR.GPU per k-block), branch-free plain epilogue", 90,
                    kFlagNone, gemm_v14_supports, gemm_v14_launch);

}  // namespace hk
