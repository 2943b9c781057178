// broadcast/add_scalar_v02_vectorized.cu
//
// Rung 2: z = x + c with 16-byte loads and stores, kUnroll vectors per thread loaded before the
// first store, one short-lived 128-thread block per 256 vectors (a one-shot grid), the n % kVec16
// tail by block 0 in the same kernel.
// Adds over v01: 4-8x fewer memory instructions and enough bytes in flight per SM to cover HBM
// latency (the gelu v03 recipe, which says why one-shot blocks beat a resident grid-stride loop;
// the op is a pure copy with an add).
// Any alignment: z is peeled — its scalar head up to the first 16-byte boundary (block 0), the
// 16-byte body, the scalar tail. x moves as 16-byte loads when it shares z's 16-byte phase, else
// (kAny) with the widest loads its phase allows; the stores stay 16 bytes. Aligned operands run
// the same body as before the peel.
// Run:   hk bench add_scalar --variant v02_vectorized --shape 16384x8192
#include "broadcast/broadcast.cuh"
#include "common/launch.cuh"

namespace hk::broadcast_add_scalar_v02_vectorized {
namespace {

constexpr int kThreads = 128;
constexpr int kUnroll = 2;  // 16-byte vectors per thread: 4 KB per block

template <class T, bool kAny>
__global__ void __launch_bounds__(kThreads) add_scalar_v02_kernel(const T* __restrict__ x, T* __restrict__ z,
                                                                  int64_t n, float c, int head) {
  constexpr int kV = kVec16<T>;
  if (blockIdx.x == 0 && threadIdx.x < head) z[threadIdx.x] = from_f32<T>(to_f32(x[threadIdx.x]) + c);
  x += head;
  z += head;
  n -= head;
  using V = Vec<T, kV>;
  const int64_t nvec = n / kV;
  const int64_t base = int64_t(blockIdx.x) * kThreads * kUnroll + threadIdx.x;  // vectors base + u kThreads
  V xv[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
    if (base + u * kThreads < nvec) xv[u] = load_stream_at<kAny, T, kV>(x + (base + u * kThreads) * kV);
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = base + u * kThreads;
    if (i >= nvec) continue;
    V o;
#pragma unroll
    for (int k = 0; k < kV; ++k) o.v[k] = from_f32<T>(to_f32(xv[u].v[k]) + c);
    store_stream<T, kV>(z + i * kV, o);
  }
  const int64_t t = nvec * kV + (blockIdx.x == 0 ? threadIdx.x : kThreads);
  if (t < n) z[t] = from_f32<T>(to_f32(x[t]) + c);
}

void add_scalar_v02_launch(const BroadcastArgs& a, cudaStream_t s) {
  dispatch_float(a.dtype, "add_scalar/v02_vectorized", [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(a.x);
    T* z = static_cast<T*>(a.z);
    const int head = static_cast<int>(head_to_16(z, a.n));
    auto launch = [&](auto kernel) {
      // One block per kThreads x kUnroll vectors of the body; at least one for the head and tail.
      const int64_t blocks =
          std::max<int64_t>(1, ceil_div(ceil_div(a.n - head, int64_t(kVec16<T>)), int64_t(kThreads) * kUnroll));
      if (blocks > INT32_MAX) HK_THROW(kNotSupported, "add_scalar/v02_vectorized: ", a.n, " elements need more than 2^31 - 1 blocks");
      kernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(x, z, a.n, a.c, head);
      HK_CHECK_LAUNCH("add_scalar_v02_kernel");
    };
    if (aligned16(x + head)) launch(add_scalar_v02_kernel<T, false>);
    else launch(add_scalar_v02_kernel<T, true>);
  });
}

}  // namespace

HK_REGISTER_VARIANT(BroadcastProblem, BroadcastArgs, "add_scalar", "v02_vectorized",
                    "16-byte loads and stores, 2 per thread before the first store, one-shot 128-thread blocks; any alignment (peeled)", 70,
                    kFlagProduction, nullptr, add_scalar_v02_launch);

}  // namespace hk::broadcast_add_scalar_v02_vectorized
