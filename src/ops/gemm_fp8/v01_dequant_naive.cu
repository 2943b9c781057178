// gemm_fp8/v01_dequant_naive.cu
//
// Rung 1 (reference): one thread per output, a K loop that dequantises each fp8 pair on the fly
// (f32 products, f32 sums) on CUDA cores; block-wise scales multiply each 128-deep partial sum.
// Needs: nothing beyond the op contract (any layout or stride of A, B and the scales; any M, N, K).
// Run:   hk bench gemm_fp8 --variant v01_dequant_naive --shape 2048x2048x2048:tensor
#include <cuda_fp8.h>

#include "common/launch.cuh"
#include "gemm_fp8/fp8_common.cuh"
#include "gemm_fp8/gemm_fp8_op.hpp"

namespace hk::gemm_fp8_v01_dequant_naive {
namespace {

constexpr int kTile = 16;  // (kTile, kTile) threads per block, one output each; threadIdx.x along N

template <class T>
__device__ __forceinline__ float fp8_at(const void* base, int64_t off) {
  return static_cast<float>(static_cast<const T*>(base)[off]);
}

template <class TA, class TB>
__global__ void __launch_bounds__(kTile * kTile) gemm_fp8_v01_kernel(const GemmFp8Args g) {
  const int64_t col = int64_t(blockIdx.x) * kTile + threadIdx.x;
  const int64_t row = int64_t(blockIdx.y) * kTile + threadIdx.y;
  if (row >= g.m || col >= g.n) return;
  const int64_t a0 = row * g.a_s0, b0 = col * g.b_s0;
  float acc = 0.0f;
  if (g.scaling == Fp8Scaling::kBlock) {
    const int64_t kb_count = (g.k + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
    for (int64_t kb = 0; kb < kb_count; ++kb) {
      float part = 0.0f;
      const int64_t k1 = min(g.k, (kb + 1) * kFp8ScaleBlock);
      for (int64_t kk = kb * kFp8ScaleBlock; kk < k1; ++kk)
        part = fmaf(fp8_at<TA>(g.a, a0 + kk * g.a_s1), fp8_at<TB>(g.b, b0 + kk * g.b_s1), part);
      acc = fmaf(part, g.sa[row * g.sa_s0 + kb * g.sa_s1] * g.sb[(col / kFp8ScaleBlock) * g.sb_s0 + kb * g.sb_s1], acc);
    }
  } else {
    for (int64_t kk = 0; kk < g.k; ++kk)
      acc = fmaf(fp8_at<TA>(g.a, a0 + kk * g.a_s1), fp8_at<TB>(g.b, b0 + kk * g.b_s1), acc);
    acc *= g.sa[row * g.sa_s0] * g.sb[col * g.sb_s0];  // strides 0: per-tensor
  }
  auto store = [&](auto out) {
    using OutT = decltype(out);
    float v = acc;
    if (g.bias) v += gemm_fp8_impl::bias_at<OutT>(g.bias, col);
    static_cast<OutT*>(g.d)[row * g.ldd + col] = gemm_fp8_impl::from_f32<OutT>(v);
  };
  if (g.out_dtype == DType::kF32) store(float{});
  else if (g.out_dtype == DType::kF16) store(__half{});
  else store(__nv_bfloat16{});
}

void gemm_fp8_v01_launch(const GemmFp8Args& g, cudaStream_t stream) {
  gemm_fp8_impl::dispatch_fp8_pair(g.a_dtype, g.b_dtype, [&](auto ta, auto tb) {
    dim3 grid(static_cast<unsigned>(ceil_div(g.n, kTile)), static_cast<unsigned>(ceil_div(g.m, kTile)));
    gemm_fp8_v01_kernel<decltype(ta), decltype(tb)><<<grid, dim3(kTile, kTile), 0, stream>>>(g);
    HK_CHECK_LAUNCH("gemm_fp8_v01_kernel");
  });
}

std::string gemm_fp8_v01_supports(const GemmFp8Problem& p) {
  if (ceil_div(p.m, kTile) > 65535)
    return "gemm_fp8: v01's grid.y (M/16) is limited to 65535, got M=" + std::to_string(p.m);
  if (ceil_div(p.n, kTile) > INT32_MAX) return "gemm_fp8: v01's grid.x (N/16) is limited to 2^31 - 1";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(GemmFp8Problem, GemmFp8Args, "gemm_fp8", "v01_dequant_naive",
                    "one thread per output: fp8 dequantised on the fly, f32 FMA on CUDA cores, any layout", 70,
                    kFlagReference, gemm_fp8_v01_supports, gemm_fp8_v01_launch);

}  // namespace hk::gemm_fp8_v01_dequant_naive
