// broadcast/row_scale_relu_v01_naive.cu
//
// Rung 1 (reference, and the family's baseline): z = relu(x[j,i] y[j]), one thread per
// element, scalar accesses. Backward as eager autograd would run it: one element-wise kernel
// for dx = 1(x y > 0) y dz, then a block-per-row kernel that reads x and dz again for
// dy[j] = sum_i 1(x y > 0) x dz — two passes over the inputs.
// Needs: nothing beyond the op contract.
// Run:   hk bench row_scale_relu --variant v01_naive --shape 16384x8192
#include "broadcast/broadcast.cuh"
#include "common/launch.cuh"
#include "common/reduce.cuh"

namespace hk::broadcast_row_scale_relu_v01_naive {
namespace {

using bcast::kThreads;

template <class T>
__global__ void __launch_bounds__(kThreads) row_scale_relu_v01_kernel(const T* x, const T* y, T* z, int64_t n1,
                                                                      int64_t n0, int64_t ldx, int64_t ldz) {
  bcast::naive_rows<T, BroadcastKind::kRowScaleRelu>(x, y, z, n1, n0, ldx, ldz);
}

template <class T>
__global__ void __launch_bounds__(kThreads) row_scale_relu_v01_dx_kernel(const T* x, const T* y, const T* dz, T* dx,
                                                                         int64_t n1, int64_t n0, int64_t ldx,
                                                                         int64_t ldg, int64_t ldo) {
  const int64_t n = n1 * n0;
  for (int64_t e = int64_t(blockIdx.x) * kThreads + threadIdx.x; e < n; e += int64_t(gridDim.x) * kThreads) {
    const int64_t j = e / n0, i = e - j * n0;
    const float xv = to_f32(x[j * ldx + i]), yv = to_f32(y[j]);
    dx[j * ldo + i] = from_f32<T>(xv * yv > 0.f ? yv * to_f32(dz[j * ldg + i]) : 0.f);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) row_scale_relu_v01_dy_kernel(const T* x, const T* y, const T* dz, T* dy,
                                                                         int64_t n1, int64_t n0, int64_t ldx,
                                                                         int64_t ldg) {
  for (int64_t j = blockIdx.x; j < n1; j += gridDim.x) {
    const float yv = to_f32(y[j]);
    float acc = 0.f;
    for (int64_t i = threadIdx.x; i < n0; i += kThreads) {
      const float xv = to_f32(x[j * ldx + i]);
      if (xv * yv > 0.f) acc += xv * to_f32(dz[j * ldg + i]);
    }
    acc = block_reduce<kThreads>(acc, SumOp{});
    if (threadIdx.x == 0) dy[j] = from_f32<T>(acc);
  }
}

void row_scale_relu_v01_launch(const BroadcastArgs& a, cudaStream_t s) {
  dispatch_float(a.dtype, "row_scale_relu/v01_naive", [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(a.x);
    const T* y = static_cast<const T*>(a.y);
    const int grid = bcast::naive_grid(a.n1 * a.n0);
    if (!a.backward) {
      row_scale_relu_v01_kernel<T><<<grid, kThreads, 0, s>>>(x, y, static_cast<T*>(a.z), a.n1, a.n0, a.ld_x, a.ld_z);
      HK_CHECK_LAUNCH("row_scale_relu_v01_kernel");
      return;
    }
    const T* dz = static_cast<const T*>(a.dz);
    row_scale_relu_v01_dx_kernel<T><<<grid, kThreads, 0, s>>>(x, y, dz, static_cast<T*>(a.z), a.n1, a.n0, a.ld_x,
                                                              a.ld_dz, a.ld_z);
    HK_CHECK_LAUNCH("row_scale_relu_v01_dx_kernel");
    const int rows = static_cast<int>(std::min<int64_t>(a.n1, int64_t(1) << 30));
    row_scale_relu_v01_dy_kernel<T><<<rows, kThreads, 0, s>>>(x, y, dz, static_cast<T*>(a.dy), a.n1, a.n0, a.ld_x,
                                                              a.ld_dz);
    HK_CHECK_LAUNCH("row_scale_relu_v01_dy_kernel");
  });
}

}  // namespace

HK_REGISTER_VARIANT(BroadcastProblem, BroadcastArgs, "row_scale_relu", "v01_naive",
                    "one thread per element; backward: dx kernel, then a dy kernel re-reading x and dz", 70,
                    kFlagReference | kFlagBaseline, nullptr, row_scale_relu_v01_launch);

}  // namespace hk::broadcast_row_scale_relu_v01_naive
