// gemm_fp8/v03_wgmma_block_scaled.cu
//
// Rung 3: v02's kernel with DeepSeek-V3 block-wise scales (1 x 128 tiles of A, 128 x 128 of B)
// applied where each k-block is promoted: acc += blk * sa[row, kb] * sb[n_block, kb].
// Adds over v02: per-block scales at no extra pass — a k-block is one scaling block, so the
// promotion's FADD becomes an FFMA with a per-row factor; the block's scales (2 of sa and 1 of
// sb per thread) load from L2 while its wgmma runs. This is DeepGEMM's fp32 promotion.
// Needs: sm_90a; block-wise scales; A and B as v02 needs them. Other layouts go through
// v04_aligned_pack.
// Run:   hk bench gemm_fp8 --variant v03_wgmma_block_scaled --shape 4096x7168x16384:block
#include "gemm_fp8/hopper_fp8.cuh"

namespace hk {
namespace {

template <class TA, class TB>
__global__ void __launch_bounds__(gemm_fp8_impl::kThreads, 1)
    gemm_fp8_v03_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                        const GemmFp8Args g) {
  gemm_fp8_impl::wgmma_fp8_body<TA, TB, true>(&tma_a, &tma_b, g);
}

std::string gemm_fp8_v03_supports(const GemmFp8Problem& p) {
  if (p.scaling != Fp8Scaling::kBlock)
    return "gemm_fp8: v03 applies block-wise scales; per-tensor and row-wise scales run on v02";
  return gemm_fp8_tma_supports(p);
}

void gemm_fp8_v03_launch(const GemmFp8Args& g, cudaStream_t stream) {
  if (g.scaling != Fp8Scaling::kBlock) HK_THROW(kNotSupported, "gemm_fp8/v03_wgmma_block_scaled: needs block-wise scales");
  gemm_fp8_impl::dispatch_fp8_pair(g.a_dtype, g.b_dtype, [&](auto ta, auto tb) {
    gemm_fp8_impl::launch_wgmma_fp8(gemm_fp8_v03_kernel<decltype(ta), decltype(tb)>, g, "gemm_fp8_v03_kernel", stream);
  });
}

}  // namespace

HK_REGISTER_VARIANT(GemmFp8Problem, GemmFp8Args, "gemm_fp8", "v03_wgmma_block_scaled",
                    "v02 with DeepSeek-V3 block-wise scales (1x128 A, 128x128 B) in the per-k-block f32 promotion",
                    90, kFlagNone, gemm_fp8_v03_supports, gemm_fp8_v03_launch);

}  // namespace hk
