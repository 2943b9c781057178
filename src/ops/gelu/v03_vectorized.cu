// gelu/v03_vectorized.cu
//
// Rung 3: 16-byte accesses (8 bf16/f16 or 4 f32 per load), kUnroll loads in flight per thread
// before the first use, one short-lived block of 128 threads per 256 vectors (a one-shot grid).
// Adds over v02: 4-8x fewer memory instructions and enough bytes in flight per SM to cover HBM
// latency (Little's law: ~4.3 TB/s x ~700 ns ~ 3 MB across 132 SMs ~ 23 KB per SM; 16 blocks of
// 4 KB per SM). Why one-shot blocks, not a resident grid walking the array: a resident block
// loads, stores, then loads again, so its bytes in flight drop to zero between rounds, while the
// block scheduler refills an SM the moment a short block retires. Measured in one process with
// torch.add / torch.mul (H200, 2026-12-03, 16384x8192, default cache policy): resident grid-stride
// 256 x 4 vectors 0.94-0.96x torch, one-shot 128 x 2 0.99-1.00x; 128 x 8 and 256 x 4 one-shot
// 0.96-0.99x.
// Any alignment: the output is peeled — its scalar head up to the first 16-byte boundary (at
// most 7 elements, block 0), the 16-byte body, the scalar tail (block 0). x and dy are read with
// 16-byte loads when they share out's 16-byte phase (always for cudaMalloc'd tensors), else
// with the widest loads their phase allows (a separate instantiation, kAny: 8-, 4- or 2-byte
// loads, the stores stay 16 bytes). Aligned operands run the same body as before the peel.
// Run:   hk bench gelu --variant v03_vectorized --shape 16384x8192
#include "common/activations.cuh"
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "gelu/gelu_op.hpp"

namespace hk::gelu_v03_vectorized {
namespace {

constexpr int kThreads = 128;
constexpr int kUnroll = 2;  // 16-byte vectors per thread, both loaded before the first store: 4 KB per block

template <bool kTanh, bool kBackward>
__device__ __forceinline__ float gelu_v03_apply(float x, float dy) {
  if constexpr (kBackward) return dy * (kTanh ? act::gelu_tanh_grad(x) : act::gelu_erf_grad(x));
  else return kTanh ? act::gelu_tanh(x) : act::gelu_erf(x);
}

template <class T, bool kTanh, bool kBackward, bool kAny>
__global__ void __launch_bounds__(kThreads) gelu_v03_kernel(const T* __restrict__ x,
                                                            const T* __restrict__ dy,
                                                            T* __restrict__ out, int64_t n, int head) {
  constexpr int kV = kVec16<T>;
  // Head: out[0, head) up to out's first 16-byte boundary, one element per thread of block 0.
  if (blockIdx.x == 0 && threadIdx.x < head)
    out[threadIdx.x] = from_f32<T>(gelu_v03_apply<kTanh, kBackward>(to_f32(x[threadIdx.x]),
                                                                    kBackward ? to_f32(dy[threadIdx.x]) : 0.f));
  x += head;
  if constexpr (kBackward) dy += head;
  out += head;
  n -= head;
  using V = Vec<T, kV>;
  const int64_t nvec = n / kV;
  // This block's vectors: [blockIdx.x, blockIdx.x + 1) x kThreads x kUnroll, vector u x kThreads +
  // threadIdx.x of them for u < kUnroll, so a warp's accesses stay contiguous (coalesced) for every u.
  const int64_t base = int64_t(blockIdx.x) * kThreads * kUnroll + threadIdx.x;
  V xv[kUnroll], gv[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = base + u * kThreads;
    if (i < nvec) {
      xv[u] = load_stream_at<kAny, T, kV>(x + i * kV);
      if constexpr (kBackward) gv[u] = load_stream_at<kAny, T, kV>(dy + i * kV);
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = base + u * kThreads;
    if (i < nvec) {
      V r;
#pragma unroll
      for (int k = 0; k < kV; ++k)
        r.v[k] = from_f32<T>(gelu_v03_apply<kTanh, kBackward>(to_f32(xv[u].v[k]), kBackward ? to_f32(gv[u].v[k]) : 0.f));
      store_stream<T, kV>(out + i * kV, r);
    }
  }
  // Tail: the last n % kV elements, one per thread of block 0.
  int64_t t = nvec * kV + (blockIdx.x == 0 ? threadIdx.x : kThreads);
  if (t < n)
    out[t] = from_f32<T>(gelu_v03_apply<kTanh, kBackward>(to_f32(x[t]), kBackward ? to_f32(dy[t]) : 0.f));
}

template <class T, bool kTanh, bool kBackward, bool kAny>
void launch_peeled(const T* x, const T* dy, T* out, int64_t n, int head, cudaStream_t stream) {
  // One block per kThreads x kUnroll vectors of the body; at least one for the head and tail.
  const int64_t blocks = std::max<int64_t>(1, ceil_div(ceil_div(n - head, int64_t(kVec16<T>)), int64_t(kThreads) * kUnroll));
  if (blocks > INT32_MAX) HK_THROW(kNotSupported, "gelu/v03_vectorized: ", n, " elements need more than 2^31 - 1 blocks");
  gelu_v03_kernel<T, kTanh, kBackward, kAny><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, dy, out, n, head);
  HK_CHECK_LAUNCH("gelu_v03_kernel");
}

template <class T, bool kTanh, bool kBackward>
void launch_typed(const GeluArgs& a, cudaStream_t stream) {
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  T* out = static_cast<T*>(a.out);
  const int head = static_cast<int>(head_to_16(out, a.n));
  // Inputs at out's 16-byte phase (after the head) move as 16-byte loads; otherwise kAny.
  const bool same = aligned16(x + head) && (!kBackward || aligned16(dy + head));
  if (same) launch_peeled<T, kTanh, kBackward, false>(x, dy, out, a.n, head, stream);
  else launch_peeled<T, kTanh, kBackward, true>(x, dy, out, a.n, head, stream);
}

void gelu_v03_launch(const GeluArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "gelu/v03_vectorized", [&](auto t) {
    using T = decltype(t);
    bool tanh = a.approx == GeluApprox::kTanh;
    if (a.backward) tanh ? launch_typed<T, true, true>(a, stream) : launch_typed<T, false, true>(a, stream);
    else tanh ? launch_typed<T, true, false>(a, stream) : launch_typed<T, false, false>(a, stream);
  });
}


}  // namespace

HK_REGISTER_VARIANT(GeluProblem, GeluArgs, "gelu", "v03_vectorized",
                    "16-byte vector loads, 2 per thread before the first store, one-shot 128-thread blocks; any alignment (peeled)", 70,
                    kFlagProduction, nullptr, gelu_v03_launch);

}  // namespace hk::gelu_v03_vectorized
