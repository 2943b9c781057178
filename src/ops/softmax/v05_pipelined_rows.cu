// softmax/v05_pipelined_rows.cu
//
// Rung 5 (forward; ladder-only, made for >= 512 rows of 129..2048 16-byte vectors): v02's on-chip row, with the
// next row's loads in flight while this row is reduced and written. A resident grid of
// 256-thread blocks grid-strides over rows; thread t holds the kPer 16-byte vectors t, t + 256,
// ... of the row (common/rows.cuh) and, before touching them, issues the loads of the
// same vectors of its next row.
// What it fixes in v02 at 16384x8192 bf16 (79.9% of copy): v02 runs one short-lived block per
// row (60 registers -> 4 blocks of 256 per SM); a block has its 16 KiB in flight only between
// its start and its first use of the data, then spends the max reduction, the sum reduction
// (two barriers each) and the stores with nothing in flight, so an SM averages well under the
// ~32 KiB that 4.2 TB/s x ~1 us of latency needs. Here every thread always has one row slice
// in flight: 4 blocks x 256 threads x 64 B = 64 KiB per SM (bf16 8192; f32 8192: 2 x 256 x
// 128 B = 64 KiB), and each reduction is one barrier (double-buffered warp slots by row
// parity, so the next row's partials never overwrite ones a slow warp still reads).
// The math is v02's (softmax/softmax_common.cuh): packed HMNMX2.NAN max (vectors past D swapped for -inf
// first: load_slice zero-fills them), exp(x - m) as one FFMA + MUFU.EX2 with a 2^32 bias that
// the sum cancels (exact (x - m) form for |max| > 2^23, NaN or inf, in a block-uniform branch),
// one MUFU.RCP per row; NaN and +-inf rows give what v02 and the reference give. SASS per row
// per thread, 8192 bf16 (kPer 4, 32 elements): 985 -> 644 instructions (30.8 -> 20.1 per
// element), f32 (kPer 8) 945 -> 637; registers 52 -> 62 (bf16 kPer 4, within 4 blocks' 64).
// Needs: forward; 16-byte aligned row starts of x and y (base and row strides); cols a
// multiple of 16 bytes, at most 2048 16-byte vectors. Otherwise supports() says why. Shorter
// rows (<= 128 vectors) and fewer than 512 rows run correctly but leave SMs idle
// (pipelined_rows::suits, common/rows.hpp). Measured below v02 (80.4% vs 93.0% of copy at
// 16384x8192 bf16, H200, 2026-11-29), so the public op never runs it (softmax/dispatch.cpp).
// Run:   hk bench softmax --variant v05_pipelined_rows --shape 16384x8192
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "softmax/softmax_common.cuh"
#include "softmax/softmax_op.hpp"

namespace hk::softmax_v05_pipelined_rows {
namespace {

using pipelined_rows::kThreads;
constexpr int kWarps = kThreads / 32;
using pipelined_rows::kMaxPer;

using pipelined_rows::kMinBlocks;

template <class T, int kPer>
__global__ void __launch_bounds__(kThreads, kMinBlocks<kPer>)
    softmax_v05_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols, int64_t ld_x,
                       int64_t ld_y) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  __shared__ float slots[2][2][kWarps];  // [row parity][max, sum][warp]
  const unsigned whole = whole_vectors<T, kPer, kThreads>(cols);
  V xv[kPer] = {}, next[kPer] = {};  // (kPer, kV) this row's slice and the next row's, in flight
  int64_t r = blockIdx.x;
  if (r < rows) load_slice<T, kPer, kThreads, false>(xv, x + r * ld_x, whole);
  for (int parity = 0; r < rows; r += gridDim.x, parity ^= 1) {
    const int64_t rn = r + gridDim.x;
    if (rn < rows) load_slice<T, kPer, kThreads, false>(next, x + rn * ld_x, whole);
    // Vectors past D hold zeros (load_slice); -inf is the max's identity.
    V mv[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) mv[k] = ((whole >> k) & 1u) ? xv[k] : neg_inf_vec<T>();
    const float m = block_reduce_slot<kThreads>(slice_max<T>(mv), MaxOp{}, slots[parity][0]);
    T* yr = y + r * ld_y;
    with_row_exp(m, [&](auto ex) {
      // Each pass widens the slice afresh (opaque): f32 copies kept across a reduction would
      // double the slice's registers.
      float f[kV], sum = 0.f;
#pragma unroll
      for (int k = 0; k < kPer; ++k)
        if ((whole >> k) & 1u) {
          opaque(xv[k]);
          widen(xv[k], f);
          float part = ex(f[0]);
#pragma unroll
          for (int j = 1; j < kV; ++j) part += ex(f[j]);
          sum += part;
        }
      const float inv = inv_sum(block_reduce_slot<kThreads>(sum, SumOp{}, slots[parity][1]));
#pragma unroll
      for (int k = 0; k < kPer; ++k)
        if ((whole >> k) & 1u) {
          opaque(xv[k]);
          widen(xv[k], f);
          V o;
#pragma unroll
          for (int j = 0; j < kV; ++j) o.v[j] = from_f32<T>(ex(f[j]) * inv);
          store_stream<T, kV>(yr + (int64_t(threadIdx.x) + k * kThreads) * kV, o);
        }
    });
#pragma unroll
    for (int k = 0; k < kPer; ++k) xv[k] = next[k];
  }
}

template <class T, int kPer>
void launch_typed(const SoftmaxArgs& a, cudaStream_t stream) {
  auto kernel = softmax_v05_kernel<T, kPer>;
  static const int resident = resident_grid(kernel, kThreads);
  const int blocks = static_cast<int>(std::min<int64_t>(resident, a.rows));
  kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(a.a), static_cast<T*>(a.out), a.rows, a.cols, a.ld_a,
                                          a.ld_out);
  HK_CHECK_LAUNCH("softmax_v05_kernel");
}

void softmax_v05_launch(const SoftmaxArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "softmax/v05_pipelined_rows", [&](auto t) {
    using T = decltype(t);
    pipelined_rows::dispatch_per<T>(a.cols, [&](auto per) { launch_typed<T, decltype(per)::value>(a, stream); });
  });
}

std::string softmax_v05_supports(const SoftmaxProblem& p) {
  if (p.backward) return "forward only (the backward runs in v02_onchip_row)";
  const int64_t esize = dtype_bits(p.dtype) / 8;
  if (p.align_bytes < 16 || (p.rows > 1 && ((p.ld_in * esize) % 16 != 0 || (p.ld_out * esize) % 16 != 0)))
    return "needs 16-byte aligned row starts of x and y (base and row strides), got " +
           std::to_string(p.align_bytes) + "-byte aligned bases and row strides " + std::to_string(p.ld_in) + ", " +
           std::to_string(p.ld_out);
  return pipelined_rows::refusal(esize, p.cols, "cols");
}

}  // namespace

HK_REGISTER_VARIANT(SoftmaxProblem, SoftmaxArgs, "softmax", "v05_pipelined_rows",
                    "forward: v02's on-chip row with the next row's loads in flight across the reductions", 90,
                    kFlagNone, softmax_v05_supports, softmax_v05_launch);

}  // namespace hk::softmax_v05_pipelined_rows
