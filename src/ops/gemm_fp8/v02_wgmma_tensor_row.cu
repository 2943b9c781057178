// gemm_fp8/v02_wgmma_tensor_row.cu
//
// Rung 2: FP8 wgmma (m64n128k32) fed by TMA through a 6-stage mbarrier ring, per-tensor and
// row-wise scales applied once in the epilogue.
// Adds over v01: tensor cores at FP8 rate (2x bf16's) with operands in swizzled shared memory,
// a producer warpgroup whose loads run ahead of the two consumer warpgroups, a persistent grid
// in an L2-friendly grouped tile order; each 128-deep
// k-block's products are promoted into f32 registers (gemm_fp8/hopper_fp8.cuh) so that long K
// keeps f32 accuracy.
// Needs: sm_90a; A and B K-major with 16-byte aligned bases and row strides (K % 16 == 0 when
// tight); per-tensor or row-wise scales. Other layouts go through v04_aligned_pack.
// Run:   hk bench gemm_fp8 --variant v02_wgmma_tensor_row --shape 4096x4096x4096:tensor
#include "gemm_fp8/hopper_fp8.cuh"

namespace hk {
namespace {

template <class TA, class TB>
__global__ void __launch_bounds__(gemm_fp8_impl::kThreads, 1)
    gemm_fp8_v02_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                        const GemmFp8Args g) {
  gemm_fp8_impl::wgmma_fp8_body<TA, TB, false>(&tma_a, &tma_b, g);
}

std::string gemm_fp8_v02_supports(const GemmFp8Problem& p) {
  if (p.scaling == Fp8Scaling::kBlock)
    return "gemm_fp8: v02 applies per-tensor or row-wise scales in its epilogue; block-wise scales run on v03";
  return gemm_fp8_tma_supports(p);
}

void gemm_fp8_v02_launch(const GemmFp8Args& g, cudaStream_t stream) {
  if (g.scaling == Fp8Scaling::kBlock) HK_THROW(kNotSupported, "gemm_fp8/v02_wgmma_tensor_row: block-wise scales");
  gemm_fp8_impl::dispatch_fp8_pair(g.a_dtype, g.b_dtype, [&](auto ta, auto tb) {
    gemm_fp8_impl::launch_wgmma_fp8(gemm_fp8_v02_kernel<decltype(ta), decltype(tb)>, g, "gemm_fp8_v02_kernel", stream);
  });
}

}  // namespace

HK_REGISTER_VARIANT(GemmFp8Problem, GemmFp8Args, "gemm_fp8", "v02_wgmma_tensor_row",
                    "TMA + 6-stage mbarrier ring + FP8 wgmma m64n128k32, f32 promotion per 128-deep k-block, "
                    "per-tensor / row-wise scales in the epilogue",
                    90, kFlagNone, gemm_fp8_v02_supports, gemm_fp8_v02_launch);

}  // namespace hk
