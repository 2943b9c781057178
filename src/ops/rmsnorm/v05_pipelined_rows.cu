// rmsnorm/v05_pipelined_rows.cu
//
// Rung 5 (forward; ladder-only, made for >= 512 rows of 129..2048 16-byte vectors): v03's row in registers, with g's
// slice held in registers for every row and the next row's loads in flight while this row is
// reduced and written. A resident grid of 256-thread blocks grid-strides over rows; thread t
// owns the kPer 16-byte vectors t, t + 256, ... of every row (common/rows.cuh).
// What it fixes in v03 at 16384x8192 bf16 (85.0% of copy): v03 issues a row's 4 loads per
// thread, waits, reduces through CUB (two barriers) and re-reads g through L1 for the stores,
// with nothing in flight from its first use of the data to its next row's loads; 56 registers
// give 4 blocks of 256 per SM, so an SM averages well under the ~32 KiB that 4.2 TB/s x ~1 us
// of latency needs. Here every thread always has one row slice in flight (4 blocks x 256
// threads x 64 B = 64 KiB per SM at bf16 8192; 2 x 256 x 128 B = 64 KiB at f32 8192), the sum
// of squares is one barrier (double-buffered warp slots), and g is never reloaded.
// Math as v03: ss in f32, rstd = rsqrt(ss / D + eps), y = x * rstd * g, rstd stored per row.
// Needs: forward; 16-byte aligned row starts (base and row strides); D a multiple of 16 bytes,
// at most 2048 16-byte vectors. Otherwise supports() says why. Shorter rows (<= 128 vectors)
// and fewer than 512 rows run correctly but leave SMs idle (pipelined_rows::suits).
// Measured (H200, 2026-11-29): 87.4% of copy at 16384x8192 bf16, 88.2% f32, against v03's 85.2% and
// 87.6%. Ladder-only: v06_bulk_row serves every problem this rung suits (94.9% vs 85.3% of copy
// at 16384x8192 bf16, H200, 2026-11-29; rmsnorm/dispatch.cpp).
// Run:   hk bench rmsnorm --variant v05_pipelined_rows --shape 16384x8192
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "rmsnorm/rmsnorm_op.hpp"

namespace hk::rmsnorm_v05_pipelined_rows {
namespace {

using pipelined_rows::kThreads;
constexpr int kWarps = kThreads / 32;
using pipelined_rows::kMaxPer;

using pipelined_rows::kMinBlocks;

template <class T, int kPer>
__global__ void __launch_bounds__(kThreads, kMinBlocks<kPer>)
    rmsnorm_v05_kernel(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ y, float* __restrict__ rstd,
                       int64_t rows, int64_t dim, int64_t ld_x, int64_t ld_y, float eps) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  __shared__ float slots[2][kWarps];  // [row parity][warp]
  const unsigned whole = whole_vectors<T, kPer, kThreads>(dim);
  V gv[kPer];  // (kPer, kV) this thread's slice of g, for every row
  load_slice<T, kPer, kThreads, true>(gv, g, whole);
  V xv[kPer] = {}, next[kPer] = {};  // (kPer, kV) this row's slice and the next row's, in flight
  int64_t r = blockIdx.x;
  if (r < rows) load_slice<T, kPer, kThreads, false>(xv, x + r * ld_x, whole);
  for (int parity = 0; r < rows; r += gridDim.x, parity ^= 1) {
    const int64_t rn = r + gridDim.x;
    if (rn < rows) load_slice<T, kPer, kThreads, false>(next, x + rn * ld_x, whole);
    // Each pass widens the slice afresh (opaque): f32 copies kept across the reduction would
    // double the slice's registers. Zero-filled vectors add 0 to ss.
    float f[kV], h[kV];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      opaque(xv[k]);
      widen(xv[k], f);
#pragma unroll
      for (int j = 0; j < kV; ++j) ss = fmaf(f[j], f[j], ss);
    }
    const float rs = rsqrtf(block_reduce_slot<kThreads>(ss, SumOp{}, slots[parity]) / float(dim) + eps);
    if (threadIdx.x == 0) rstd[r] = rs;
    T* yr = y + r * ld_y;
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if ((whole >> k) & 1u) {
        opaque(xv[k]);
        opaque(gv[k]);
        widen(xv[k], f);
        widen(gv[k], h);
        V o;
#pragma unroll
        for (int j = 0; j < kV; ++j) o.v[j] = from_f32<T>(f[j] * rs * h[j]);
        store_stream<T, kV>(yr + (int64_t(threadIdx.x) + k * kThreads) * kV, o);
      }
#pragma unroll
    for (int k = 0; k < kPer; ++k) xv[k] = next[k];
  }
}

template <class T, int kPer>
void launch_typed(const RmsNormArgs& a, cudaStream_t stream) {
  auto kernel = rmsnorm_v05_kernel<T, kPer>;
  static const int resident = resident_grid(kernel, kThreads);
  const int blocks = static_cast<int>(std::min<int64_t>(resident, a.rows));
  kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.g),
                                          static_cast<T*>(a.out), a.rstd_out, a.rows, a.dim, a.ld_x, a.ld_out, a.eps);
  HK_CHECK_LAUNCH("rmsnorm_v05_kernel");
}

void rmsnorm_v05_launch(const RmsNormArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "rmsnorm/v05_pipelined_rows", [&](auto t) {
    using T = decltype(t);
    pipelined_rows::dispatch_per<T>(a.dim, [&](auto per) { launch_typed<T, decltype(per)::value>(a, stream); });
  });
}

std::string rmsnorm_v05_supports(const RmsNormProblem& p) {
  if (p.backward) return "forward only (the backward runs in v03_vectorized_onchip)";
  if (p.row_align() < 16)
    return "needs 16-byte aligned row starts (base address and row stride) for 16-byte loads, got " +
           std::to_string(p.row_align()) + "-byte alignment";
  return pipelined_rows::refusal(dtype_bits(p.dtype) / 8, p.dim, "D");
}

}  // namespace

HK_REGISTER_VARIANT(RmsNormProblem, RmsNormArgs, "rmsnorm", "v05_pipelined_rows",
                    "forward (>= 512 rows): g slice in registers, next row's loads in flight across the row reduction",
                    90, kFlagNone, rmsnorm_v05_supports, rmsnorm_v05_launch);

}  // namespace hk::rmsnorm_v05_pipelined_rows
