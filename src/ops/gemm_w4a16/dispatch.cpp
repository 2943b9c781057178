// gemm_w4a16/dispatch.cpp — which gemm_w4a16 rung serves a public call (hk::gemm_w4a16,
// hk.matmul_w4a16).
//
//   problem                                        rung                       why
//   M <= 16, 16-byte aligned (rows: K % 32 == 0)   v02_decode_gemv            reads W once at full width (not yet measured)
//   M > 16, 16-byte aligned (rows: K % 32 == 0)    v03_mma_dequant            tensor cores, W dequantised in registers (not yet measured)
//   anything else                                  baseline_dequant_cublas    any alignment and K: dequantise, then cuBLAS
//
// The M <= 16 boundary between the CUDA-core decode kernel and the tensor-core rung is where
// v02's FMA work (16 rows of x per weight) meets v03's smallest block (16 rows); it is not yet
// measured. v01_naive is ladder-only.
#include "gemm_w4a16/gemm_w4a16_op.hpp"

namespace hk {
namespace {

std::vector<Route> gemm_w4a16_dispatch(const W4A16Problem& p) {
  const Route decode{"v02_decode_gemv", "M <= 16: the weights streamed once with 16-byte loads and dequantised in "
                                        "registers (not yet measured)"};
  const Route mma{"v03_mma_dequant", "tensor cores with W dequantised into the B fragment, cp.async ring (not yet "
                                     "measured)"};
  const Route cublas{"baseline_dequant_cublas", "any alignment and K: W dequantised into scratch, then cuBLAS (not "
                                                "yet measured)"};
  if (p.m <= 16) return {decode, mma, cublas};
  return {mma, cublas};
}

}  // namespace

HK_REGISTER_DISPATCH(W4A16Problem, "gemm_w4a16", gemm_w4a16_dispatch);

}  // namespace hk
