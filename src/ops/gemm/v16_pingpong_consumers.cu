// gemm/v16_pingpong_consumers.cu
//
// Rung 16: v15 with ping-pong consumers (CUTLASS's KernelTmaWarpSpecializedPingpong). In v15
// both consumer warpgroups finish a 128 x 256 tile's MMAs together and then both run the
// epilogue (convert 128 accumulators per thread, write swizzled chunks, TMA-store them) while
// the tensor cores idle: every tile pays its epilogue on the MMA pipe, which matters most when
// K is short (8192 x 8192 x 1024: 16 k-blocks per tile). Here each consumer warpgroup owns whole
// 64 x 256 tiles and the two alternate the CTA's tiles; an ordering barrier (named barriers 3/4)
// lets one warpgroup issue its MMAs only after the other has issued all of its tile's, so one
// warpgroup's epilogue runs under the other's MMAs. One TMA ring, filled in the order the
// warpgroups consume it; 2-CTA clusters along M multicast B (the 256 x 64 operand both CTAs'
// tiles share); persistent grouped order (16 unit-rows of 128 rows: the A panel of v15's 8 x 256);
// 4 stages of 40 KB; one wgmma group in flight; CTA-scope slot release; v15's epilogues (a
// compile-time FusedEpilogue per kind, the run-time path for C_in). The schedule, its barriers
// and their invariants: hopper_gemm_pingpong.cuh.
// Adds over v15: ping-pong consumer warpgroups (epilogue overlapped with the other's MMAs).
// Needs: as v12 (sm_90a; TMA's 16-byte rules for A, B, C and bias).
// Kernel: hopper_gemm_pingpong.cuh with the configuration below.
// Run:   hk bench gemm --variant 'v1[56]*' --shape 4096x4096x4096 --shape 8192x8192x1024
#include "gemm/hopper_gemm_pingpong.cuh"

namespace hk {
namespace {

// (kStages, kGroup): 4 x 40 KB slots + 32 KB of C chunks = 193 KB of shared memory (5 slots
// would need 233 KB, past the 227 KB limit).
using Cfg = gemm_impl::PingpongConfig<4, 16>;

template <class T, bool kACol, bool kBCol, class Epi>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_v16_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                    const __grid_constant__ CUtensorMap tma_c, const GemmArgs g) {
  gemm_impl::hopper_gemm_pingpong_body<T, kACol, !kBCol, Cfg, Epi>(&tma_a, &tma_b, &tma_c, g);
}

template <class Epi>
void launch_kind(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::launch_hopper_dispatch<Cfg>(g, "v16_pingpong_consumers", "gemm_v16_kernel", stream,
                                         [](auto t, auto ac, auto bc) {
                                           return gemm_v16_kernel<decltype(t), decltype(ac)::value,
                                                                  decltype(bc)::value, Epi>;
                                         });
}

void gemm_v16_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::dispatch_epilogue(g, [&](auto epi) { launch_kind<decltype(epi)>(g, stream); });
}

std::string gemm_v16_supports(const GemmProblem& p) { return gemm_tma_supports(p, true); }

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v16_pingpong_consumers",
                    "v15 with ping-pong consumers: each warpgroup owns 64x256 tiles, epilogue under the other's MMAs",
                    90, kFlagNone, gemm_v16_supports, gemm_v16_launch);

}  // namespace hk
