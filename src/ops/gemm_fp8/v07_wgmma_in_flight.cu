// gemm_fp8/v07_wgmma_in_flight.cu
//
// Rung 7: v02/v03's kernel (not v06's clusters) with the next k-block's wgmma in flight while this one is promoted
// (gemm_fp8/hopper_fp8.cuh, kInFlight). Every scaling mode.
// Adds over v02/v03: there, each consumer warpgroup waits for its k-block's wgmma group to
// retire before it promotes the sums (wait_group 0), so its tensor work drains every k-block and
// only the other warpgroup's group keeps the tensor cores busy through the promotion and the
// barrier handshakes. Here two accumulator sets alternate: k-block kb + 1 is issued into one
// before kb's, in the other, is waited for (wait_group 1) and promoted. 64 more registers per
// thread (3 x 64 accumulators of the 232 setmaxnreg gives a consumer).
// Measured (H200, 2026-12-02, e4m3 -> bf16, one process, vs v02/v03): block-wise 919 vs 774
// TFLOP/s at 4096x7168x16384 (1.19x), 733 vs 653 at 4096x7168x2048, 694 vs 629 at
// 4096x24576x1536; per-tensor 922 vs 897 at 4096^3, 1000 vs 951 at 8192^3 (cuBLASLt: 1319 and
// 1371), equal at 2048^3. In 2-CTA clusters (v06's multicast) it measured 2-7% slower.
// Needs: sm_90a; A and B as v02 needs them (K-major, 16-byte rows and bases).
// Run:   hk bench gemm_fp8 --variant 'v0[27]*' --shape 4096x4096x4096:tensor
#include <string>

#include "gemm_fp8/hopper_fp8.cuh"

namespace hk {
namespace {

template <class TA, class TB, bool kBlockScaled>
__global__ void __launch_bounds__(gemm_fp8_impl::kThreads, 1)
    gemm_fp8_v07_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                        const GemmFp8Args g) {
  gemm_fp8_impl::wgmma_fp8_body<TA, TB, kBlockScaled, false, 1, true>(&tma_a, &tma_b, g);
}

std::string gemm_fp8_v07_supports(const GemmFp8Problem& p) { return gemm_fp8_tma_supports(p); }

void gemm_fp8_v07_launch(const GemmFp8Args& g, cudaStream_t stream) {
  gemm_fp8_impl::dispatch_fp8_pair(g.a_dtype, g.b_dtype, [&](auto ta, auto tb) {
    using TA = decltype(ta);
    using TB = decltype(tb);
    if (g.scaling == Fp8Scaling::kBlock)
      gemm_fp8_impl::launch_wgmma_fp8(gemm_fp8_v07_kernel<TA, TB, true>, g, "gemm_fp8_v07_kernel", stream);
    else
      gemm_fp8_impl::launch_wgmma_fp8(gemm_fp8_v07_kernel<TA, TB, false>, g, "gemm_fp8_v07_kernel", stream);
  });
}

}  // namespace

HK_REGISTER_VARIANT(GemmFp8Problem, GemmFp8Args, "gemm_fp8", "v07_wgmma_in_flight",
                    "v02/v03 with two accumulator sets: k-block kb+1's wgmma in flight while kb is promoted",
                    90, kFlagProduction, gemm_fp8_v07_supports, gemm_fp8_v07_launch);

}  // namespace hk
