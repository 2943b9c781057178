// broadcast/outer_mul_relu_v01_naive.cu
//
// Rung 1 (reference, and the family's baseline): z[j,i] = relu(y[j] * x[i]), one thread per element of z with
// scalar loads and stores: the puzzle's kernel made general (any N0, N1, strided z rows,
// 64-bit indexing). No CUDA library offers this op as one call; eager PyTorch's broadcast
// kernel does this same one-pass work, so this rung is the baseline (docs/broadcast.md).
// Needs: nothing beyond the op contract.
// Run:   hk bench outer_mul_relu --variant v01_naive --shape 16384x8192
#include "broadcast/broadcast.cuh"
#include "common/launch.cuh"

namespace hk::broadcast_outer_mul_relu_v01_naive {
namespace {

template <class T>
__global__ void __launch_bounds__(bcast::kThreads) outer_mul_relu_v01_kernel(const T* x, const T* y, T* z, int64_t n1,
                                                                   int64_t n0, int64_t ldz) {
  bcast::naive_rows<T, BroadcastKind::kOuterMulRelu>(x, y, z, n1, n0, 0, ldz);
}

void outer_mul_relu_v01_launch(const BroadcastArgs& a, cudaStream_t s) {
  dispatch_float(a.dtype, "outer_mul_relu/v01_naive", [&](auto t) {
    using T = decltype(t);
    outer_mul_relu_v01_kernel<T><<<bcast::naive_grid(a.n1 * a.n0), bcast::kThreads, 0, s>>>(
        static_cast<const T*>(a.x), static_cast<const T*>(a.y), static_cast<T*>(a.z), a.n1, a.n0, a.ld_z);
    HK_CHECK_LAUNCH("outer_mul_relu_v01_kernel");
  });
}

}  // namespace

HK_REGISTER_VARIANT(BroadcastProblem, BroadcastArgs, "outer_mul_relu", "v01_naive",
                    "one thread per output element, scalar loads and stores", 70,
                    kFlagReference | kFlagBaseline, nullptr, outer_mul_relu_v01_launch);

}  // namespace hk::broadcast_outer_mul_relu_v01_naive
