// gemm_fp8/v08_lean_issue.cu
//
// Rung 8: v07's kernel with the consumers' instruction stream trimmed (gemm_fp8/hopper_fp8_lean.cuh).
// Adds over v07: shared-memory descriptors built once in uniform registers and advanced by
// constants; the ring position as a stage index and phase bit; the epilogue through shared memory
// and TMA stores with D's dtype fixed at compile time; the next tile's first k-block issued before
// this tile's epilogue, so the tensor cores keep working while it runs. Static counts (SASS,
// e4m3 -> bf16, per-tensor): see docs/gemm_fp8.md.
// Needs: sm_90a; A and B as v02 needs them (K-major, 16-byte rows and bases); D's base and row
// stride 16-byte aligned (TMA stores it).
// Run:   hk bench gemm_fp8 --variant 'v0[78]*,baseline*' --shape 4096x4096x4096:tensor
// Build: own translation unit (27 s of CPU on its own).
#include <string>

#include "gemm_fp8/hopper_fp8_lean.cuh"

namespace hk {
namespace {

template <class TA, class TB, bool kBlockScaled, class OutT>
__global__ void __launch_bounds__(gemm_fp8_impl::kThreads, 1)
    gemm_fp8_v08_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                        const __grid_constant__ CUtensorMap tma_d, const GemmFp8Args g) {
  gemm_fp8_impl::lean::wgmma_fp8_lean_body<TA, TB, kBlockScaled, OutT>(&tma_a, &tma_b, &tma_d, g);
}

std::string gemm_fp8_v08_supports(const GemmFp8Problem& p) {
  const std::string why = gemm_fp8_tma_supports(p);
  if (!why.empty()) return why;
  const int64_t row_bytes = p.ldd * dtype_bits(p.out_dtype) / 8;
  if (row_bytes % 16 != 0 || p.d_align_bytes < 16)
    return "gemm_fp8: v08 stores D with TMA: it needs a 16-byte aligned D with rows a multiple of 16 bytes, got a "
           "row stride of " + std::to_string(row_bytes) + " bytes and " + std::to_string(p.d_align_bytes) +
           "-byte alignment";
  return "";
}

template <class TA, class TB, bool kBlockScaled>
void launch_with_output(const GemmFp8Args& g, cudaStream_t stream) {
  auto go = [&](auto out) {
    gemm_fp8_impl::lean::launch(gemm_fp8_v08_kernel<TA, TB, kBlockScaled, decltype(out)>, g, "gemm_fp8_v08_kernel",
                                stream);
  };
  if (g.out_dtype == DType::kF32) go(float{});
  else if (g.out_dtype == DType::kF16) go(__half{});
  else go(__nv_bfloat16{});
}

void gemm_fp8_v08_launch(const GemmFp8Args& g, cudaStream_t stream) {
  gemm_fp8_impl::dispatch_fp8_pair(g.a_dtype, g.b_dtype, [&](auto ta, auto tb) {
    using TA = decltype(ta);
    using TB = decltype(tb);
    if (g.scaling == Fp8Scaling::kBlock) launch_with_output<TA, TB, true>(g, stream);
    else launch_with_output<TA, TB, false>(g, stream);
  });
}

}  // namespace

HK_REGISTER_VARIANT(GemmFp8Problem, GemmFp8Args, "gemm_fp8", "v08_lean_issue",
                    "v07 with uniform-register descriptors, a stage/phase ring cursor, and a TMA-store epilogue "
                    "that runs under the next tile's first wgmma",
                    90, kFlagProduction, gemm_fp8_v08_supports, gemm_fp8_v08_launch);

}  // namespace hk
