// gemm/v07_wgmma.cu
//
// Rung 7: Hopper tensor cores. wgmma.mma_async (m64n128k16) reads both operands straight from
// 128-byte-swizzled shared memory that TMA fills; a 128x128 tile per CTA, two consumer
// warpgroups of 64 rows, one shared-memory slot: each K block is loaded, then multiplied.
// Adds over v06: Hopper's warpgroup-wide asynchronous MMA (HGMMA in SASS; 64x128x16 per
// instruction for 4 warps instead of v06's 16x8x16 per warp) reading A and B straight from
// swizzled shared memory (no ldmatrix, no register staging), and TMA bulk copies instead of
// per-thread cp.async; loads and MMAs do not overlap yet (one slot, where v06 keeps three).
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the configuration below.
// Run:   hk bench gemm --variant v07_wgmma --shape 4096x4096x4096
#include "gemm/hopper_gemm.cuh"

namespace hk {
namespace {

// (kBlockN, kStages, kSetMaxNReg, kCluster, kPersistent, kTmaStore)
using Cfg = gemm_impl::HopperConfig<128, 1, false, 1, false, false>;

template <class T, bool kACol, bool kBCol>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_v07_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap tma_c, const GemmArgs g) {
  gemm_impl::hopper_gemm_body<T, kACol, !kBCol, Cfg>(&tma_a, &tma_b, &tma_c, g);
}

void gemm_v07_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::launch_hopper_dispatch<Cfg>(g, "v07_wgmma", "gemm_v07_kernel", stream,
                                         [](auto t, auto ac, auto bc) {
                                           return gemm_v07_kernel<decltype(t), decltype(ac)::value, decltype(bc)::value>;
                                         });
}

std::string gemm_v07_supports(const GemmProblem& p) { return gemm_tma_supports(p, false); }

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v07_wgmma",
                    "WGMMA m64n128k16 from TMA-filled swizzled smem, one slot (load, then multiply)", 90, kFlagNone,
                    gemm_v07_supports, gemm_v07_launch);

}  // namespace hk
