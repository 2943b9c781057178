// broadcast/add_scalar_v01_naive.cu
//
// Rung 1 (reference, and the family's baseline): z = x + c, one thread per element, scalar
// loads and stores — the puzzle's kernel made general (any shape, 64-bit indexing). Eager
// PyTorch's `x + c` is this same one-pass kernel; no CUDA library offers it as one call, so
// this rung is the baseline (docs/broadcast.md).
// Needs: nothing beyond the op contract.
// Run:   hk bench add_scalar --variant v01_naive --shape 16384x8192
#include "broadcast/broadcast.cuh"
#include "common/launch.cuh"

namespace hk::broadcast_add_scalar_v01_naive {
namespace {

template <class T>
__global__ void __launch_bounds__(bcast::kThreads) add_scalar_v01_kernel(const T* x, T* z, int64_t n, float c) {
  for (int64_t i = int64_t(blockIdx.x) * bcast::kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * bcast::kThreads)
    z[i] = from_f32<T>(to_f32(x[i]) + c);
}

void add_scalar_v01_launch(const BroadcastArgs& a, cudaStream_t s) {
  dispatch_float(a.dtype, "add_scalar/v01_naive", [&](auto t) {
    using T = decltype(t);
    add_scalar_v01_kernel<T><<<bcast::naive_grid(a.n), bcast::kThreads, 0, s>>>(static_cast<const T*>(a.x),
                                                                                 static_cast<T*>(a.z), a.n, a.c);
    HK_CHECK_LAUNCH("add_scalar_v01_kernel");
  });
}

}  // namespace

HK_REGISTER_VARIANT(BroadcastProblem, BroadcastArgs, "add_scalar", "v01_naive",
                    "one thread per element, scalar loads and stores", 70, kFlagReference | kFlagBaseline, nullptr,
                    add_scalar_v01_launch);

}  // namespace hk::broadcast_add_scalar_v01_naive
