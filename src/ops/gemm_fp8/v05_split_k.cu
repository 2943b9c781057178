// gemm_fp8/v05_split_k.cu
//
// Rung 5: v02/v03's kernel with K split over the CTAs for problems of few 128 x 128 tiles (the
// decode-like 64 x 2112 x 7168 has 17 tiles for 132 SMs): each tile's k-blocks are dealt out in
// `splits` even ranges, each range's promoted f32 sums are added into an [M, N] f32 buffer with
// red.global.add, and a second kernel applies per-tensor / row-wise scales and bias and rounds
// once to D's dtype. Block-wise scales are applied in the promotion as v03 does, so the ranges'
// sums add linearly in every mode.
// Adds over v02/v03: up to sm_count / tiles times the CTAs streaming A and B, at the price of a
// memset, M N f32 atomics per split and the finishing pass (M N (4 + D's bytes) bytes).
// Needs: sm_90a; A and B as v02 needs them (K-major, 16-byte rows and bases); any scaling.
// Run:   hk bench gemm_fp8 --variant v05_split_k --shape 64x2112x7168:block
#include <algorithm>

#include "core/scratch.hpp"
#include "gemm_fp8/hopper_fp8.cuh"

namespace hk {
namespace {

constexpr int kMinBlocksPerSplit = 4;  // 512 of K: a split keeps a few k-blocks of the ring in flight

template <class TA, class TB, bool kBlockScaled>
__global__ void __launch_bounds__(gemm_fp8_impl::kThreads, 1)
    gemm_fp8_v05_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                        const GemmFp8Args g, const gemm_fp8_impl::SplitK sk) {
  gemm_fp8_impl::wgmma_fp8_body<TA, TB, kBlockScaled, true>(&tma_a, &tma_b, g, sk);
}

// d = partials (* sa[row] sb[col] unless block-wise) + bias, one rounding; grid-stride over M N.
template <class OutT>
__global__ void gemm_fp8_v05_finish_kernel(const float* __restrict__ partials, const GemmFp8Args g) {
  const int64_t total = g.m * g.n;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / g.n, col = i % g.n;
    float v = partials[i];
    if (g.scaling != Fp8Scaling::kBlock) v *= __ldg(g.sa + row * g.sa_s0) * __ldg(g.sb + col * g.sb_s0);
    if (g.bias) v += gemm_fp8_impl::bias_at<OutT>(g.bias, col);
    static_cast<OutT*>(g.d)[row * g.ldd + col] = gemm_fp8_impl::from_f32<OutT>(v);
  }
}

// Splits that give every SM a unit, each of kMinBlocksPerSplit k-blocks or more.
int split_count(const GemmFp8Args& g) {
  const int64_t tiles = ceil_div(g.m, gemm_fp8_impl::kBlockM) * ceil_div(g.n, gemm_fp8_impl::kBlockN);
  const int64_t k_blocks = ceil_div(g.k, gemm_fp8_impl::kBlockK);
  const int64_t by_sms = std::max<int64_t>(1, device_info().sm_count / tiles);
  const int64_t by_k = std::max<int64_t>(1, k_blocks / kMinBlocksPerSplit);
  return static_cast<int>(std::min(by_sms, by_k));
}

void launch_split_k(const GemmFp8Args& g, cudaStream_t stream) {
  const size_t bytes = size_t(g.m) * size_t(g.n) * sizeof(float);
  detail::StreamWorkspace ws(stream, "gemm_fp8_v05_partials", std::max<size_t>(bytes, 256));
  float* partials = static_cast<float*>(ws.get());
  HK_CHECK_CUDA(cudaMemsetAsync(partials, 0, bytes, stream));
  const gemm_fp8_impl::SplitK sk{partials, split_count(g)};
  gemm_fp8_impl::dispatch_fp8_pair(g.a_dtype, g.b_dtype, [&](auto ta, auto tb) {
    using TA = decltype(ta);
    using TB = decltype(tb);
    if (g.scaling == Fp8Scaling::kBlock)
      gemm_fp8_impl::launch_wgmma_fp8(gemm_fp8_v05_kernel<TA, TB, true>, g, "gemm_fp8_v05_kernel", stream, sk.splits, sk);
    else
      gemm_fp8_impl::launch_wgmma_fp8(gemm_fp8_v05_kernel<TA, TB, false>, g, "gemm_fp8_v05_kernel", stream, sk.splits, sk);
  });
  auto finish = [&](auto out) {
    using OutT = decltype(out);
    gemm_fp8_v05_finish_kernel<OutT><<<grid_for(ceil_div(g.m * g.n, 256)), 256, 0, stream>>>(partials, g);
    HK_CHECK_LAUNCH("gemm_fp8_v05_finish_kernel");
  };
  if (g.out_dtype == DType::kF32) finish(float{});
  else if (g.out_dtype == DType::kF16) finish(__half{});
  else finish(__nv_bfloat16{});
}

std::string gemm_fp8_v05_supports(const GemmFp8Problem& p) { return gemm_fp8_tma_supports(p); }

void gemm_fp8_v05_launch(const GemmFp8Args& g, cudaStream_t stream) { launch_split_k(g, stream); }

}  // namespace

HK_REGISTER_VARIANT(GemmFp8Problem, GemmFp8Args, "gemm_fp8", "v05_split_k",
                    "v02/v03 with K split over the CTAs for few-tile problems: f32 partials by red.add, then "
                    "scales, bias and one rounding in a second pass",
                    90, kFlagProduction, gemm_fp8_v05_supports, gemm_fp8_v05_launch);

}  // namespace hk
