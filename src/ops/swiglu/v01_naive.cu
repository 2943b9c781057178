// swiglu/v01_naive.cu
//
// Rung 1 (reference, and the family's baseline): one thread per (row, column) pair, scalar
// loads and stores, the row and column from a 64-bit division of the flat index. No CUDA
// library offers a standalone SwiGLU (eager PyTorch runs it as silu, then a multiply: two
// kernels and an [rows, F] temporary), so this rung is the baseline the speedup column divides
// by. Adjacent threads touch adjacent elements of one row, so accesses coalesce, but each
// thread moves 2-6 bytes per access and waits on each.
// Needs: nothing beyond the op contract. Ladder-only: the dispatch routes every call to v02.
// Run:   hk bench swiglu --variant v01_naive --shape 16384x8192
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "swiglu/swiglu_math.cuh"
#include "swiglu/swiglu_op.hpp"

namespace hk::swiglu_v01_naive {
namespace {

constexpr int kThreads = 256;

template <class T, bool kBackward>
__global__ void __launch_bounds__(kThreads) swiglu_v01_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                                              T* __restrict__ out, int64_t rows, int64_t F,
                                                              int64_t ld_x, int64_t ld_dy, int64_t ld_out) {
  const int64_t n = rows * F;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i / F, j = i - r * F;
    const float g = to_f32(x[r * ld_x + j]), u = to_f32(x[r * ld_x + F + j]);
    if constexpr (kBackward) {
      float dg, du;
      swiglu_math::backward(g, u, to_f32(dy[r * ld_dy + j]), dg, du);
      out[r * ld_out + j] = from_f32<T>(dg);
      out[r * ld_out + F + j] = from_f32<T>(du);
    } else {
      out[r * ld_out + j] = from_f32<T>(swiglu_math::forward(g, u));
    }
  }
}

void swiglu_v01_launch(const SwigluArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "swiglu/v01_naive", [&](auto t) {
    using T = decltype(t);
    const int blocks = grid_for(ceil_div(a.rows * a.dim, kThreads));
    auto kernel = a.backward ? swiglu_v01_kernel<T, true> : swiglu_v01_kernel<T, false>;
    kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.dy),
                                            static_cast<T*>(a.out), a.rows, a.dim, a.ld_x, a.ld_dy, a.ld_out);
    HK_CHECK_LAUNCH("swiglu_v01_kernel");
  });
}

}  // namespace

HK_REGISTER_VARIANT(SwigluProblem, SwigluArgs, "swiglu", "v01_naive",
                    "one thread per (row, column) pair, scalar accesses, 64-bit index division", 70,
                    kFlagReference | kFlagBaseline, nullptr, swiglu_v01_launch);

}  // namespace hk::swiglu_v01_naive
