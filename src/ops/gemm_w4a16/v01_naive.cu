// gemm_w4a16/v01_naive.cu
//
// Rung 1: the quantised matmul as first written — one thread per output y[m, n], which walks
// row n of the packed weight word by word, unpacks eight 4-bit values with shifts and masks,
// dequantises each in f32 ((q - z) * s, unrounded) and accumulates x[m, k] * w in f32.
// Adds: nothing; the reference rung. Every thread re-reads its row of W and of x from memory,
// and a warp's 32 threads (32 consecutive n) read 32 different weight rows: no coalescing.
// Needs: nothing beyond the op's rules (any M, N, K, alignment, layout).
// Run:   hk bench gemm_w4a16 --variant v01_naive --shape 16x4096x4096
#include "common/launch.cuh"
#include "gemm_w4a16/w4a16.cuh"

namespace hk::gemm_w4a16_v01_naive {
namespace {

template <class T>
__global__ void gemm_w4a16_v01_kernel(W4A16Args a) {
  const int64_t total = a.m * a.n;
  const T* x = static_cast<const T*>(a.x);
  const T* s = static_cast<const T*>(a.scales);
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx / a.n, n = idx % a.n;
    const T* xr = x + i * a.ld_x;
    float acc = 0.f;
    for (int64_t w = 0; w < a.k / 8; ++w) {
      const uint32_t word = static_cast<uint32_t>(a.qweight[w4a16::word_index(a, n, w)]);
      const int64_t g = (w * 8) / a.group;
      int z = 8;
      if (a.zeros) z = int(static_cast<uint32_t>(a.zeros[n * a.zero_words + g / 8]) >> (4 * (g % 8))) & 0xF;
      const float scale = static_cast<float>(s[n * a.groups + g]);
      for (int j = 0; j < 8; ++j) {
        const int q = int(word >> (4 * j)) & 0xF;
        acc += static_cast<float>(xr[w * 8 + j]) * (float(q - z) * scale);
      }
    }
    static_cast<T*>(a.y)[i * a.ld_y + n] = static_cast<T>(acc);
  }
}

void gemm_w4a16_v01_launch(const W4A16Args& a, cudaStream_t stream) {
  w4a16::dispatch_dtype(a.dtype, "gemm_w4a16/v01_naive", [&](auto t) {
    using T = decltype(t);
    const int threads = 256;
    gemm_w4a16_v01_kernel<T><<<grid_for(ceil_div(a.m * a.n, threads)), threads, 0, stream>>>(a);
    HK_CHECK_LAUNCH("gemm_w4a16_v01_kernel");
  });
}

std::string gemm_w4a16_v01_supports(const W4A16Problem&) { return ""; }

}  // namespace

HK_REGISTER_VARIANT(W4A16Problem, W4A16Args, "gemm_w4a16", "v01_naive",
                    "one thread per output: unpack, dequantise in f32 and dot-product on CUDA cores", 80,
                    kFlagReference, gemm_w4a16_v01_supports, gemm_w4a16_v01_launch);

}  // namespace hk::gemm_w4a16_v01_naive
