// weighted_sum/v03_pipelined_rows.cu
//
// Rung 3 (forward; ladder-only since v04_oneshot_rows took its shapes, 2026-12-04, at 97.3% /
// 105.3% of copy against this rung's 95.1% / 102.2%): a block of 256 threads owns whole
// rows, grid-stride over a resident grid. Each thread owns the same kPer
// 16-byte column vectors of every row (vectors tid, tid + 256, ...), so:
//  - its slice of w is loaded once into registers and never reloaded (v02 re-read w from L1
//    for every x vector);
//  - the next row's x vectors are issued before this row's dot product and block reduction,
//    so the loads stay in flight across the reduction and its barrier. v02 issued a row's
//    loads, waited, then reduced through two barriers with nothing in flight: at 16384x8192
//    bf16 (73 registers -> 3 blocks of 256 per SM, 16 KiB per block) an SM averaged far less
//    than the ~32 KiB that 4.2 TB/s x ~1 us of latency needs, and measured 46% of copy.
//  - one barrier per row: warp sums go to a double-buffered shared slot (parity by row,
//    block_reduce_slot), so a slow warp reading row r's sums never races row r + 1's writes.
// Bytes in flight per SM, always (not only between reductions): resident threads x kPer x 16 B
// = 4 blocks x 256 x 64 B = 64 KiB at bf16 8192 (kPer 4, 56 registers); 2 x 256 x 128 B =
// 64 KiB at f32 8192 (kPer 8).
// The grid is resident (every block stays for ~rows / grid rows) and balanced: every block runs
// the same number of rows (balanced_grid: 512 blocks of 32 rows at 16384 rows, where all 528
// resident blocks would leave 16 of them a 32nd row alone at the end).
// Needs: forward; 16-byte aligned row starts and w; D a multiple of 16 bytes, at most 2048
// 16-byte vectors (w's slice and two rows of x in registers). Otherwise supports() says why.
// Shorter rows (<= 128 vectors) and fewer than 512 rows run correctly but leave SMs idle
// (pipelined_rows::suits): weighted_sum/dispatch.cpp sends those to v02 or cuBLAS.
// Run:   hk bench weighted_sum --variant v03_pipelined_rows --shape 16384x8192
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "common/vec.cuh"
#include "weighted_sum/weighted_sum_op.hpp"

namespace hk::weighted_sum_v03_pipelined_rows {
namespace {

using pipelined_rows::kThreads;
constexpr int kWarps = kThreads / 32;
using pipelined_rows::kMaxPer;

// sum_j a[j] * b[j] in f32, both widened by common/rows.cuh's widen.
template <class T, int N>
__device__ __forceinline__ float dot_f32(const Vec<T, N>& a, const Vec<T, N>& b) {
  float fa[N], fb[N];
  widen(a, fa);
  widen(b, fb);
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < N; ++j) s = fmaf(fa[j], fb[j], s);
  return s;
}

using pipelined_rows::kMinBlocks;

template <class T, int kPer>
__global__ void __launch_bounds__(kThreads, kMinBlocks<kPer>)
    weighted_sum_v03_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t rows,
                            int64_t dim, int64_t ldx) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  __shared__ float warp_sums[2][kWarps];  // [row parity][warp]
  const unsigned whole = whole_vectors<T, kPer, kThreads>(dim);
  V wv[kPer];  // (kPer, kV) this thread's slice of w, for every row
  load_slice<T, kPer, kThreads, true>(wv, w, whole);
  V xv[kPer] = {}, next[kPer] = {};  // (kPer, kV) this row's x slice and the next row's, in flight
  int64_t r = blockIdx.x;
  if (r < rows) load_slice<T, kPer, kThreads, false>(xv, x + r * ldx, whole);
  for (int parity = 0; r < rows; r += gridDim.x, parity ^= 1) {
    const int64_t rn = r + gridDim.x;
    if (rn < rows) load_slice<T, kPer, kThreads, false>(next, x + rn * ldx, whole);
    float acc[kPer];  // one chain per vector: kPer independent FMA chains
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      opaque(wv[k]);
      acc[k] = dot_f32(xv[k], wv[k]);
    }
#pragma unroll
    for (int k = 1; k < kPer; ++k) acc[0] += acc[k];
    const float t = block_reduce_slot<kThreads>(acc[0], SumOp{}, warp_sums[parity]);
    if (threadIdx.x == 0) y[r] = from_f32<T>(t);
#pragma unroll
    for (int k = 0; k < kPer; ++k) xv[k] = next[k];
  }
}

template <class T, int kPer>
void launch_typed(const WeightedSumArgs& a, cudaStream_t s) {
  auto kernel = weighted_sum_v03_kernel<T, kPer>;
  static const int resident = resident_grid(kernel, kThreads);
  const int blocks = static_cast<int>(balanced_grid(a.rows, resident));
  kernel<<<blocks, kThreads, 0, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<T*>(a.y),
                                     a.rows, a.dim, a.ld_x);
  HK_CHECK_LAUNCH("weighted_sum_v03_kernel");
}

void weighted_sum_v03_launch(const WeightedSumArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "weighted_sum/v03_pipelined_rows", [&](auto t) {
    using T = decltype(t);
    pipelined_rows::dispatch_per<T>(a.dim, [&](auto per) { launch_typed<T, decltype(per)::value>(a, stream); });
  });
}

std::string weighted_sum_v03_supports(const WeightedSumProblem& p) {
  if (p.backward) return "forward only (the backward runs in v05_two_pass_backward or v02_row_groups)";
  if (p.row_align() < 16)
    return "needs 16-byte aligned row starts (base address and row stride) for 16-byte loads, got " +
           std::to_string(p.row_align()) + "-byte alignment";
  return pipelined_rows::refusal(dtype_bits(p.dtype) / 8, p.dim, "D");
}

}  // namespace

HK_REGISTER_VARIANT(WeightedSumProblem, WeightedSumArgs, "weighted_sum", "v03_pipelined_rows",
                    "forward: w slice in registers, next row's loads in flight across the row reduction", 90,
                    0, weighted_sum_v03_supports, weighted_sum_v03_launch);

}  // namespace hk::weighted_sum_v03_pipelined_rows
