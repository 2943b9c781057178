// conv2d/bias_add.cu — y += bias[channel] over a forward output, for the rungs whose convolution
// has no bias epilogue (the cuDNN baseline, as PyTorch adds the bias after cuDNN's forward: one
// more pass over y and a second rounding at 16-bit dtypes).
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "conv2d/conv2d_op.hpp"

namespace hk {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void __launch_bounds__(kThreads) conv2d_bias_add_kernel(T* __restrict__ y, const T* __restrict__ bias,
                                                                   int64_t total, int64_t cout, int64_t plane,
                                                                   bool nhwc) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    const int64_t co = nhwc ? i % cout : i / plane % cout;
    y[i] = from_f32<T>(to_f32(y[i]) + to_f32(bias[co]));
  }
}

}  // namespace

void conv2d_add_bias(const Conv2dArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "conv2d bias", [&](auto t) {
    using T = decltype(t);
    const int64_t total = a.n * a.cout * a.oh * a.ow;
    static const int resident = resident_grid(conv2d_bias_add_kernel<T>, kThreads);
    const int blocks = static_cast<int>(std::min<int64_t>(resident, ceil_div(total, kThreads)));
    conv2d_bias_add_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(a.out), static_cast<const T*>(a.bias),
                                                                total, a.cout, a.oh * a.ow,
                                                                a.prm.layout == ConvLayout::kNHWC);
    HK_CHECK_LAUNCH("conv2d_bias_add_kernel");
  });
}

}  // namespace hk
