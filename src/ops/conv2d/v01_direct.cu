// conv2d/v01_direct.cu
//
// Rung 1 (reference): direct convolution on CUDA cores, one thread per output element of the
// direction: y (forward: the C/g x kH x kW dot product), dx (backward data: the taps of every
// output whose window covers the element, found by stride division) or dw (backward weight:
// the sum over N x OH x OW). Tensors are indexed through logical strides, so NCHW and NHWC run
// the same code; threads walk the output in memory order (coalesced stores). f32 sums.
// Any stride, padding (asymmetric too), dilation, groups and layout: also the dispatch's last
// route, for what no faster rung takes (asymmetric padding, the weight gradient of depthwise
// layers).
// Needs: nothing beyond the op contract.
// Run:   hk bench conv2d --variant v01_direct --shape 8x64x56x56_64x3x3
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "conv2d/conv2d_op.hpp"

namespace hk::conv2d_v01_direct {
namespace {

constexpr int kThreads = 256;

// Logical coordinates (a, b, c, d) of memory position f of a tensor with logical extents
// (., e1, e2, e3): NCHW order a-b-c-d, NHWC order a-c-d-b.
__device__ __forceinline__ void unflatten(int64_t f, int64_t e1, int64_t e2, int64_t e3, bool nhwc, int64_t& a,
                                          int64_t& b, int64_t& c, int64_t& d) {
  if (nhwc) {
    b = f % e1, d = f / e1 % e3, c = f / (e1 * e3) % e2, a = f / (e1 * e2 * e3);
  } else {
    d = f % e3, c = f / e3 % e2, b = f / (e2 * e3) % e1, a = f / (e1 * e2 * e3);
  }
}

__device__ __forceinline__ int64_t at(const int64_t* s, int64_t a, int64_t b, int64_t c, int64_t d) {
  return a * s[0] + b * s[1] + c * s[2] + d * s[3];
}

template <class T>
__global__ void __launch_bounds__(kThreads) conv2d_v01_forward_kernel(const Conv2dArgs g) {
  const T* x = static_cast<const T*>(g.x);
  const T* w = static_cast<const T*>(g.w);
  const T* bias = static_cast<const T*>(g.bias);
  T* y = static_cast<T*>(g.out);
  const bool nhwc = g.prm.layout == ConvLayout::kNHWC;
  const int64_t cg = g.c / g.prm.groups, kg = g.cout / g.prm.groups;
  const int64_t total = g.n * g.cout * g.oh * g.ow;
  for (int64_t f = int64_t(blockIdx.x) * kThreads + threadIdx.x; f < total; f += int64_t(gridDim.x) * kThreads) {
    int64_t b, co, oy, ox;
    unflatten(f, g.cout, g.oh, g.ow, nhwc, b, co, oy, ox);
    const int64_t c0 = co / kg * cg;
    float acc = bias ? to_f32(bias[co]) : 0.f;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = oy * g.prm.stride_h - g.prm.pad_top + ky * g.prm.dilation_h;
      if (iy < 0 || iy >= g.h) continue;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t ix = ox * g.prm.stride_w - g.prm.pad_left + kx * g.prm.dilation_w;
        if (ix < 0 || ix >= g.w_in) continue;
        for (int64_t ci = 0; ci < cg; ++ci)
          acc = fmaf(to_f32(x[at(g.xs.data(), b, c0 + ci, iy, ix)]), to_f32(w[at(g.ws.data(), co, ci, ky, kx)]), acc);
      }
    }
    y[f] = from_f32<T>(acc);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) conv2d_v01_backward_data_kernel(const Conv2dArgs g) {
  const T* dy = static_cast<const T*>(g.dy);
  const T* w = static_cast<const T*>(g.w);
  T* dx = static_cast<T*>(g.out);
  const bool nhwc = g.prm.layout == ConvLayout::kNHWC;
  const int64_t cg = g.c / g.prm.groups, kg = g.cout / g.prm.groups;
  const int64_t total = g.n * g.c * g.h * g.w_in;
  for (int64_t f = int64_t(blockIdx.x) * kThreads + threadIdx.x; f < total; f += int64_t(gridDim.x) * kThreads) {
    int64_t b, ch, iy, ix;
    unflatten(f, g.c, g.h, g.w_in, nhwc, b, ch, iy, ix);
    const int64_t grp = ch / cg, ci = ch % cg;
    float acc = 0.f;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t ty = iy + g.prm.pad_top - ky * g.prm.dilation_h;
      if (ty < 0 || ty % g.prm.stride_h != 0 || ty / g.prm.stride_h >= g.oh) continue;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t tx = ix + g.prm.pad_left - kx * g.prm.dilation_w;
        if (tx < 0 || tx % g.prm.stride_w != 0 || tx / g.prm.stride_w >= g.ow) continue;
        for (int64_t k = 0; k < kg; ++k) {
          const int64_t co = grp * kg + k;
          acc = fmaf(to_f32(dy[at(g.ys.data(), b, co, ty / g.prm.stride_h, tx / g.prm.stride_w)]),
                     to_f32(w[at(g.ws.data(), co, ci, ky, kx)]), acc);
        }
      }
    }
    dx[f] = from_f32<T>(acc);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) conv2d_v01_backward_weight_kernel(const Conv2dArgs g) {
  const T* x = static_cast<const T*>(g.x);
  const T* dy = static_cast<const T*>(g.dy);
  T* dw = static_cast<T*>(g.out);
  const bool nhwc = g.prm.layout == ConvLayout::kNHWC;
  const int64_t cg = g.c / g.prm.groups, kg = g.cout / g.prm.groups;
  const int64_t total = g.cout * cg * g.kh * g.kw;
  for (int64_t f = int64_t(blockIdx.x) * kThreads + threadIdx.x; f < total; f += int64_t(gridDim.x) * kThreads) {
    int64_t co, ci, ky, kx;
    unflatten(f, cg, g.kh, g.kw, nhwc, co, ci, ky, kx);
    const int64_t ch = co / kg * cg + ci;
    float acc = 0.f;
    for (int64_t b = 0; b < g.n; ++b)
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        const int64_t iy = oy * g.prm.stride_h - g.prm.pad_top + ky * g.prm.dilation_h;
        if (iy < 0 || iy >= g.h) continue;
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t ix = ox * g.prm.stride_w - g.prm.pad_left + kx * g.prm.dilation_w;
          if (ix < 0 || ix >= g.w_in) continue;
          acc = fmaf(to_f32(dy[at(g.ys.data(), b, co, oy, ox)]), to_f32(x[at(g.xs.data(), b, ch, iy, ix)]), acc);
        }
      }
    dw[f] = from_f32<T>(acc);
  }
}

void conv2d_v01_launch(const Conv2dArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "conv2d/v01_direct", [&](auto t) {
    using T = decltype(t);
    const int64_t cg = a.c / a.prm.groups;
    switch (a.dir) {
      case ConvDirection::kForward:
        conv2d_v01_forward_kernel<T><<<grid_for(ceil_div(a.n * a.cout * a.oh * a.ow, kThreads)), kThreads, 0, stream>>>(a);
        HK_CHECK_LAUNCH("conv2d_v01_forward_kernel");
        break;
      case ConvDirection::kBackwardData:
        conv2d_v01_backward_data_kernel<T><<<grid_for(ceil_div(a.n * a.c * a.h * a.w_in, kThreads)), kThreads, 0, stream>>>(a);
        HK_CHECK_LAUNCH("conv2d_v01_backward_data_kernel");
        break;
      default:
        conv2d_v01_backward_weight_kernel<T><<<grid_for(ceil_div(a.cout * cg * a.kh * a.kw, kThreads)), kThreads, 0, stream>>>(a);
        HK_CHECK_LAUNCH("conv2d_v01_backward_weight_kernel");
    }
  });
}

}  // namespace

HK_REGISTER_VARIANT(Conv2dProblem, Conv2dArgs, "conv2d", "v01_direct",
                    "direct convolution on CUDA cores, one thread per output element, any parameters and layout",
                    70, kFlagReference | kFlagProduction, nullptr, conv2d_v01_launch);

}  // namespace hk::conv2d_v01_direct
