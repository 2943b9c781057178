// gemm_w4a16/dispatch.cpp — which gemm_w4a16 rung serves a public call (hk::gemm_w4a16,
// hk.matmul_w4a16).
//
//   problem                                        rung                       why
//   M <= 4, 16-byte aligned (rows: K % 32 == 0)    v02_decode_gemv            reads W once at full width: 2.6x cuBLAS at M = 1
//   M > 4, 16-byte aligned (rows: K % 32 == 0)     v03_mma_dequant            tensor cores, W dequantised in registers: 1.63x at M = 16
//   anything else                                  baseline_cublas_dequant    any alignment and K: dequantise, then cuBLAS
//
// H200, 2026-12-02, bf16, g = 128: v02 11.1 us at 1x4096x4096 (dequantise + cuBLAS 28.5); v03
// 59.0 us at 16x8192x8192 (v02 176, dequantise + cuBLAS 96.2). The M <= 4 boundary is
// arithmetic (the points between are not measured yet): v02 spends 2 M f32 flops per weight, half
// a byte, so at the H200's copy bandwidth (4.2 TB/s) it needs 16.8 M TFLOP/s of FMAs, which the
// f32 peak (about 67 TFLOP/s) covers up to M = 4. Past that v03's tensor cores carry the flops
// and v02 (which runs M <= 16) stays on the ladder for those shapes. v01_naive is ladder-only.
#include "gemm_w4a16/gemm_w4a16_op.hpp"

namespace hk {
namespace {

std::vector<Route> gemm_w4a16_dispatch(const W4A16Problem& p) {
  const Route decode{"v02_decode_gemv", "M <= 4: the weights streamed once with 16-byte loads and dequantised in "
                                        "registers: 11.1 us at 1x4096x4096, 2.6x dequantise + cuBLAS (H200, 2026-12-02)"};
  const Route mma{"v03_mma_dequant", "tensor cores with W dequantised into the B fragment, cp.async ring: 59.0 us at "
                                     "16x8192x8192, 1.63x dequantise + cuBLAS (H200, 2026-12-02)"};
  const Route cublas{"baseline_cublas_dequant", "any alignment and K: W dequantised into scratch, then cuBLAS"};
  const Route decode_mma{"v04_decode_mma_splitk", "M <= 32: W as the mma's A operand, K split over blocks so the "
                                                  "weight stream fills every SM"};
  if (p.m <= 32) return {decode_mma, mma, cublas};
  return {mma, cublas};
}

}  // namespace

HK_REGISTER_DISPATCH(W4A16Problem, "gemm_w4a16", gemm_w4a16_dispatch);

}  // namespace hk
