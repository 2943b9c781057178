// conv2d_single/v01_naive.cu
//
// Rung 1 (reference, and the family's baseline): one thread per output, every tap read from
// global memory (the image through L1, the kernel through the read-only path), f32 sums.
// Each input element is fetched kH kW times; L1 and L2 absorb most of it, the issue rate
// does not. Also the production route for kernels larger than v02's 32 x 32.
// Needs: nothing beyond the op contract.
// Run:   hk bench conv2d_single --variant v01_naive --shape 256x512x512
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "conv2d_single/conv2d_single_op.hpp"

namespace hk::conv2d_single_v01_naive {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void __launch_bounds__(kThreads) conv2d_single_v01_kernel(const T* __restrict__ x,
                                                                     const T* __restrict__ k,
                                                                     T* __restrict__ z, int64_t n, int64_t h,
                                                                     int64_t w, int kh, int kw) {
  const int64_t total = n * h * w;
  for (int64_t o = int64_t(blockIdx.x) * kThreads + threadIdx.x; o < total; o += int64_t(gridDim.x) * kThreads) {
    const int64_t l = o % w, j = (o / w) % h, i = o / (w * h);
    const T* img = x + i * h * w;
    float acc = 0.f;
    for (int a = 0; a < kh && j + a < h; ++a)
      for (int b = 0; b < kw && l + b < w; ++b)
        acc = fmaf(to_f32(k[a * kw + b]), to_f32(img[(j + a) * w + l + b]), acc);
    z[o] = from_f32<T>(acc);
  }
}

void conv2d_single_v01_launch(const Conv2dSingleArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "conv2d_single/v01_naive", [&](auto t) {
    using T = decltype(t);
    const int blocks = grid_for(ceil_div(a.n * a.h * a.w, kThreads));
    conv2d_single_v01_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.k),
                                                                  static_cast<T*>(a.z), a.n, a.h, a.w, a.kh, a.kw);
    HK_CHECK_LAUNCH("conv2d_single_v01_kernel");
  });
}

}  // namespace

HK_REGISTER_VARIANT(Conv2dSingleProblem, Conv2dSingleArgs, "conv2d_single", "v01_naive",
                    "one thread per output, every tap from global memory, f32 sums", 70,
                    kFlagReference | kFlagBaseline, nullptr, conv2d_single_v01_launch);

}  // namespace hk::conv2d_single_v01_naive
