// gemm_fp8/v06_cluster_multicast.cu
//
// Rung 6: v02/v03's kernel in clusters of two CTAs stacked along M that share the B tile: each
// CTA loads its own 128 x 128 tile of A and half of B's, and TMA multicasts that half into both
// CTAs' shared memory (gemm_fp8/hopper_fp8.cuh, kCluster = 2). Every scaling mode.
// Adds over v02/v03: a 128-deep k-block of a 128 x 128 tile is 4.2 MFLOP over 32 KB of operands;
// sharing B cuts each SM's L2 -> shared traffic to 24 KB per k-block (the gemm family's v10
// step). A slot is refilled only when the consumers of both CTAs have released it.
// Measured (H200, 2026-12-02, e4m3 -> bf16, one process): no gain — 837 vs 879 TFLOP/s at 4096^3
// per-tensor, 902 vs 950 at 8192^3, 809 vs 809 block-wise at 4096x7168x16384. L2 is not what
// limits v02: ncu puts its L2 throughput at 41% and its SM throughput at 50% (cuBLASLt's
// 128x128 FP8 kernel, also 2x1 clusters: 81%). The stall is in the consumers (v07). A ladder
// rung: the public op does not run it.
// Needs: sm_90a; A and B as v02 needs them (K-major, 16-byte rows and bases); two or more
// 128-row blocks of M (one block would leave the partner CTA idle).
// Run:   hk bench gemm_fp8 --variant 'v0[236]*' --shape 4096x4096x4096:tensor
#include <string>

#include "gemm_fp8/hopper_fp8.cuh"

namespace hk {
namespace {

constexpr int kV06Cluster = 2;

template <class TA, class TB, bool kBlockScaled>
__global__ void __launch_bounds__(gemm_fp8_impl::kThreads, 1)
    gemm_fp8_v06_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                        const GemmFp8Args g) {
  gemm_fp8_impl::wgmma_fp8_body<TA, TB, kBlockScaled, false, kV06Cluster>(&tma_a, &tma_b, g);
}

std::string gemm_fp8_v06_supports(const GemmFp8Problem& p) {
  if (p.m <= gemm_fp8_impl::kBlockM)
    return "gemm_fp8: v06 pairs CTAs along M; M=" + std::to_string(p.m) + " is one 128-row block (v02/v03 run it alone)";
  return gemm_fp8_tma_supports(p);
}

void gemm_fp8_v06_launch(const GemmFp8Args& g, cudaStream_t stream) {
  gemm_fp8_impl::dispatch_fp8_pair(g.a_dtype, g.b_dtype, [&](auto ta, auto tb) {
    using TA = decltype(ta);
    using TB = decltype(tb);
    if (g.scaling == Fp8Scaling::kBlock)
      gemm_fp8_impl::launch_wgmma_fp8<kV06Cluster>(gemm_fp8_v06_kernel<TA, TB, true>, g, "gemm_fp8_v06_kernel", stream);
    else
      gemm_fp8_impl::launch_wgmma_fp8<kV06Cluster>(gemm_fp8_v06_kernel<TA, TB, false>, g, "gemm_fp8_v06_kernel", stream);
  });
}

}  // namespace

HK_REGISTER_VARIANT(GemmFp8Problem, GemmFp8Args, "gemm_fp8", "v06_cluster_multicast",
                    "v02/v03 in 2-CTA clusters along M: B's tile loaded half by each CTA and multicast to both "
                    "(24 KB of L2 traffic per k-block and SM instead of 32)",
                    90, kFlagNone, gemm_fp8_v06_supports, gemm_fp8_v06_launch);

}  // namespace hk
