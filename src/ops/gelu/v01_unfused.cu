// gelu/v01_unfused.cu
//
// Rung 1 (reference, and the family's baseline): one kernel per arithmetic step, the way eager
// PyTorch runs `0.5 * x * (1 + torch.tanh(0.79788456 * (x + 0.044715 * torch.pow(x, 3))))`.
// Forward tanh is 8 launches, forward erf 5, backward 9 (tanh) or 8 (erf); every step reads
// its operands from HBM and writes its result back. Intermediates are f32 (eager would keep the
// input dtype) so one tolerance serves the whole ladder; the cost of the extra bytes is the
// point of the rung. No CUDA library offers a standalone GeLU (cuDNN only as a fused graph
// node), so this rung is also the baseline the speedup column divides by (docs/decisions.md).
// Needs: nothing beyond the op contract.
// Run:   hk bench gelu --variant v01_unfused --shape 16384x8192
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "gelu/gelu_op.hpp"

namespace hk::gelu_v01_unfused {
namespace {

constexpr int kThreads = 256;

// One step: o[i] = fn(a[i], b[i]) (o may alias a or b: no __restrict__). A and B are the input
// dtype or f32; O is f32 or the output dtype.
template <class A, class B, class O, class Fn>
__global__ void __launch_bounds__(kThreads) gelu_v01_step_kernel(const A* a,
                                                                 const B* b,
                                                                 O* o, int64_t n, Fn fn) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kThreads)
    o[i] = from_f32<O>(fn(to_f32(a[i]), b ? to_f32(b[i]) : 0.f));
}

template <class A, class B, class O, class Fn>
void step(const A* a, const B* b, O* o, int64_t n, cudaStream_t stream, Fn fn) {
  int blocks = static_cast<int>(std::min<int64_t>(ceil_div(n, kThreads), 1 << 20));
  gelu_v01_step_kernel<<<blocks, kThreads, 0, stream>>>(a, b, o, n, fn);
  HK_CHECK_LAUNCH("gelu_v01_step_kernel");
}

template <class T>
void run_unfused(const GeluArgs& a, cudaStream_t stream) {
  const int64_t n = a.n;
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  T* out = static_cast<T*>(a.out);
  const float* none = nullptr;
  float *t0 = nullptr, *t1 = nullptr, *t2 = nullptr;
  HK_CHECK_CUDA(cudaMallocAsync(&t0, n * sizeof(float), stream));
  HK_CHECK_CUDA(cudaMallocAsync(&t1, n * sizeof(float), stream));
  HK_CHECK_CUDA(cudaMallocAsync(&t2, n * sizeof(float), stream));
  constexpr float k0 = 0.7978845608028654f, k1 = 0.044715f;
  constexpr float r2 = 0.7071067811865476f, r2pi = 0.3989422804014327f;
  if (a.approx == GeluApprox::kTanh && !a.backward) {
    step(x, none, t0, n, stream, [] __device__(float v, float) { return v * v * v; });    // pow(x, 3)
    step(t0, none, t0, n, stream, [] __device__(float v, float) { return k1 * v; });      // 0.044715 *
    step(x, t0, t0, n, stream, [] __device__(float v, float w) { return v + w; });        // x +
    step(t0, none, t0, n, stream, [] __device__(float v, float) { return k0 * v; });      // k0 *
    step(t0, none, t0, n, stream, [] __device__(float v, float) { return tanhf(v); });    // tanh
    step(t0, none, t0, n, stream, [] __device__(float v, float) { return 1.f + v; });     // 1 +
    step(x, none, t1, n, stream, [] __device__(float v, float) { return 0.5f * v; });     // 0.5 * x
    step(t1, t0, out, n, stream, [] __device__(float v, float w) { return v * w; });      // *
  } else if (!a.backward) {
    step(x, none, t0, n, stream, [] __device__(float v, float) { return v * r2; });       // x / sqrt(2)
    step(t0, none, t0, n, stream, [] __device__(float v, float) { return erff(v); });     // erf
    step(t0, none, t0, n, stream, [] __device__(float v, float) { return 1.f + v; });     // 1 +
    step(x, none, t1, n, stream, [] __device__(float v, float) { return 0.5f * v; });     // 0.5 * x
    step(t1, t0, out, n, stream, [] __device__(float v, float w) { return v * w; });      // *
  } else if (a.approx == GeluApprox::kTanh) {
    // g = 0.5 (1 + t) + 0.5 x (1 - t^2) k0 (1 + 3 k1 x^2),  t = tanh(k0 (x + k1 x^3))
    step(x, none, t0, n, stream, [] __device__(float v, float) { return k0 * (v + k1 * v * v * v); });
    step(t0, none, t0, n, stream, [] __device__(float v, float) { return tanhf(v); });             // t
    step(t0, none, t1, n, stream, [] __device__(float t, float) { return 1.f - t * t; });          // 1 - t^2
    step(x, t1, t1, n, stream, [] __device__(float v, float w) { return 0.5f * v * w; });          // 0.5 x (1-t^2)
    step(x, none, t2, n, stream, [] __device__(float v, float) { return k0 * (1.f + 3.f * k1 * v * v); });
    step(t1, t2, t1, n, stream, [] __device__(float v, float w) { return v * w; });
    step(t0, none, t0, n, stream, [] __device__(float t, float) { return 0.5f * (1.f + t); });
    step(t0, t1, t0, n, stream, [] __device__(float v, float w) { return v + w; });                // g
    step(dy, t0, out, n, stream, [] __device__(float g, float w) { return g * w; });               // dy * g
  } else {
    // g = Phi(x) + x phi(x)
    step(x, none, t0, n, stream, [] __device__(float v, float) { return v * r2; });
    step(t0, none, t0, n, stream, [] __device__(float v, float) { return erff(v); });
    step(t0, none, t0, n, stream, [] __device__(float v, float) { return 0.5f * (1.f + v); });    // Phi
    step(x, none, t1, n, stream, [] __device__(float v, float) { return -0.5f * v * v; });
    step(t1, none, t1, n, stream, [] __device__(float v, float) { return expf(v) * r2pi; });      // phi
    step(x, t1, t1, n, stream, [] __device__(float v, float w) { return v * w; });                // x phi
    step(t0, t1, t0, n, stream, [] __device__(float v, float w) { return v + w; });               // g
    step(dy, t0, out, n, stream, [] __device__(float g, float w) { return g * w; });
  }
  HK_CHECK_CUDA(cudaFreeAsync(t0, stream));
  HK_CHECK_CUDA(cudaFreeAsync(t1, stream));
  HK_CHECK_CUDA(cudaFreeAsync(t2, stream));
}

void gelu_v01_launch(const GeluArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "gelu/v01_unfused", [&](auto t) { run_unfused<decltype(t)>(a, stream); });
}

}  // namespace

HK_REGISTER_VARIANT(GeluProblem, GeluArgs, "gelu", "v01_unfused",
                    "one kernel per arithmetic step with f32 temporaries, as eager PyTorch runs it", 70,
                    kFlagReference | kFlagBaseline, nullptr, gelu_v01_launch);

}  // namespace hk::gelu_v01_unfused
