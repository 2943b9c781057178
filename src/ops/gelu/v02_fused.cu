// gelu/v02_fused.cu
//
// Rung 2: one kernel, one thread per element: read x (and dy) once, write y (or dx) once.
// Adds over v01: fusion — intermediates stay in registers instead of round-tripping HBM; the
// byte count drops to the minimum (2 or 3 elements per element of work).
// Needs: any alignment; at most 2^31-1 blocks of 256 elements (5.5e11). Ladder-only: v03 runs
// every alignment with 16-byte stores.
// Run:   hk bench gelu --variant v02_fused --shape 16384x8192
#include "common/activations.cuh"
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "gelu/gelu_op.hpp"

namespace hk::gelu_v02_fused {
namespace {

constexpr int kThreads = 256;

template <class T, bool kTanh, bool kBackward>
__global__ void __launch_bounds__(kThreads) gelu_v02_kernel(const T* __restrict__ x,
                                                            const T* __restrict__ dy,
                                                            T* __restrict__ out, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n) return;
  float v = to_f32(x[i]);
  float r;
  if constexpr (kBackward) {
    r = to_f32(dy[i]) * (kTanh ? act::gelu_tanh_grad(v) : act::gelu_erf_grad(v));
  } else {
    r = kTanh ? act::gelu_tanh(v) : act::gelu_erf(v);
  }
  out[i] = from_f32<T>(r);
}

template <class T, bool kTanh, bool kBackward>
void launch_typed(const GeluArgs& a, cudaStream_t stream) {
  int64_t blocks = ceil_div(a.n, kThreads);
  gelu_v02_kernel<T, kTanh, kBackward><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.dy), static_cast<T*>(a.out), a.n);
  HK_CHECK_LAUNCH("gelu_v02_kernel");
}

void gelu_v02_launch(const GeluArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "gelu/v02_fused", [&](auto t) {
    using T = decltype(t);
    bool tanh = a.approx == GeluApprox::kTanh;
    if (a.backward) tanh ? launch_typed<T, true, true>(a, stream) : launch_typed<T, false, true>(a, stream);
    else tanh ? launch_typed<T, true, false>(a, stream) : launch_typed<T, false, false>(a, stream);
  });
}

std::string gelu_v02_supports(const GeluProblem& p) {
  if (ceil_div(p.numel(), kThreads) > 0x7FFFFFFF)
    return "more than 2^31-1 blocks of 256 elements";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(GeluProblem, GeluArgs, "gelu", "v02_fused",
                    "one fused kernel, one element per thread: one read, one write", 70,
                    kFlagNone, gelu_v02_supports, gelu_v02_launch);

}  // namespace hk::gelu_v02_fused
