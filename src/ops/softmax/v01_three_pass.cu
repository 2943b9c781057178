// softmax/v01_three_pass.cu
//
// Rung 1 (reference, and the family's baseline): one block of 256 threads per row, scalar
// loads, one pass per reduction the way the formula reads: forward max -> sum of exp ->
// normalize (three reads of x, one write of y); backward sum(dy * y) -> dx (two reads of y and
// dy, one write of dx). expf and a true division, no vector loads. Baseline: cuDNN's
// cudnnSoftmaxForward is a legacy API (not wired up here, see docs/softmax.md), so the
// speedup column divides by this rung.
// Needs: nothing beyond the op contract (any stride, any alignment of the element type).
// Run:   hk bench softmax --variant v01_three_pass --shape 16384x8192
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/vec.cuh"
#include "softmax/softmax_op.hpp"

namespace hk::softmax_v01_three_pass {
namespace {

constexpr int kThreads = 256;

template <class T, bool kBackward>
__global__ void __launch_bounds__(kThreads) softmax_v01_kernel(const T* __restrict__ a, const T* __restrict__ dy,
                                                               T* __restrict__ out, int64_t rows, int64_t cols,
                                                               int64_t ld_a, int64_t ld_dy, int64_t ld_out) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* ar = a + r * ld_a;
    T* o = out + r * ld_out;
    if constexpr (!kBackward) {
      float m = MaxOp::kIdentity;
      for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = max_nan(m, to_f32(ar[c]));
      m = block_reduce<kThreads>(m, MaxOp{});
      float s = 0.f;
      for (int64_t c = threadIdx.x; c < cols; c += kThreads) s += expf(to_f32(ar[c]) - m);
      s = block_reduce<kThreads>(s, SumOp{});
      for (int64_t c = threadIdx.x; c < cols; c += kThreads) o[c] = from_f32<T>(expf(to_f32(ar[c]) - m) / s);
    } else {
      const T* d = dy + r * ld_dy;
      float dot = 0.f;
      for (int64_t c = threadIdx.x; c < cols; c += kThreads) dot += to_f32(d[c]) * to_f32(ar[c]);
      dot = block_reduce<kThreads>(dot, SumOp{});
      for (int64_t c = threadIdx.x; c < cols; c += kThreads) o[c] = from_f32<T>(to_f32(ar[c]) * (to_f32(d[c]) - dot));
    }
  }
}

void softmax_v01_launch(const SoftmaxArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "softmax/v01_three_pass", [&](auto t) {
    using T = decltype(t);
    const int blocks = static_cast<int>(std::min<int64_t>(a.rows, 0x7FFFFFFF));
    auto kernel = a.backward ? softmax_v01_kernel<T, true> : softmax_v01_kernel<T, false>;
    kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(a.a), static_cast<const T*>(a.dy),
                                            static_cast<T*>(a.out), a.rows, a.cols, a.ld_a, a.ld_dy, a.ld_out);
    HK_CHECK_LAUNCH("softmax_v01_kernel");
  });
}

}  // namespace

HK_REGISTER_VARIANT(SoftmaxProblem, SoftmaxArgs, "softmax", "v01_three_pass",
                    "block per row, scalar loads, one pass per reduction (fwd 3 reads, bwd 2)", 70,
                    kFlagReference | kFlagBaseline, nullptr, softmax_v01_launch);

}  // namespace hk::softmax_v01_three_pass
