// rope/v01_naive.cu
//
// Rung 1 (reference, and the family's baseline): one thread per output element, scalar loads,
// the (b, s, h, i) coordinates from 64-bit divisions of the flat index; each rotated element
// reads its pair partner and its cos/sin entry itself, so every input element is loaded twice.
// No CUDA library offers RoPE (eager PyTorch runs rotate_half as a slice, a negation, a
// concatenation, two products and a sum: six kernels), so this rung is the baseline.
// Needs: nothing beyond the op contract. Ladder-only: the dispatch routes every call to v02.
// Run:   hk bench rope --variant v01_naive --shape 8x2048x16x128
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "rope/rope_op.hpp"

namespace hk::rope_v01_naive {
namespace {

constexpr int kThreads = 256;

struct RopeV01Dims {
  int64_t seq, heads, dim, half, n;
  int64_t sxb, sxs, sxh, syb, sys, syh;
  float sign;
};

template <class T>
__global__ void __launch_bounds__(kThreads) rope_v01_kernel(const T* __restrict__ x, const float* __restrict__ cos,
                                                            const float* __restrict__ sin, T* __restrict__ y,
                                                            RopeV01Dims d) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < d.n; i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i / d.dim, c = i - r * d.dim;
    const int64_t h = r % d.heads, t = r / d.heads, s = t % d.seq, b = t / d.seq;
    const T* xr = x + b * d.sxb + s * d.sxs + h * d.sxh;
    float v;
    if (c < 2 * d.half) {
      const int64_t j = c < d.half ? c : c - d.half;
      const float cv = cos[s * d.half + j], sv = d.sign * sin[s * d.half + j];
      const float x1 = to_f32(xr[j]), x2 = to_f32(xr[j + d.half]);
      v = c < d.half ? x1 * cv - x2 * sv : x2 * cv + x1 * sv;
    } else {
      v = to_f32(xr[c]);
    }
    y[b * d.syb + s * d.sys + h * d.syh + c] = from_f32<T>(v);
  }
}

void rope_v01_launch(const RopeArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "rope/v01_naive", [&](auto t) {
    using T = decltype(t);
    RopeV01Dims d{a.seq, a.heads, a.dim, a.rotary / 2, a.batch * a.seq * a.heads * a.dim,
                  a.sx[0], a.sx[1], a.sx[2], a.sy[0], a.sy[1], a.sy[2], a.sin_sign};
    rope_v01_kernel<T><<<grid_for(ceil_div(d.n, kThreads)), kThreads, 0, stream>>>(
        static_cast<const T*>(a.x), a.cos, a.sin, static_cast<T*>(a.y), d);
    HK_CHECK_LAUNCH("rope_v01_kernel");
  });
}

}  // namespace

HK_REGISTER_VARIANT(RopeProblem, RopeArgs, "rope", "v01_naive",
                    "one thread per output element, scalar loads, pair partner and table read per element", 70,
                    kFlagReference | kFlagBaseline, nullptr, rope_v01_launch);

}  // namespace hk::rope_v01_naive
