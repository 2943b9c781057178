// weighted_sum/v04_oneshot_rows.cu
//
// Rung 4 (forward; production for >= 512 rows of 129..2048 whole 16-byte vectors, where v03
// served): one short-lived 512-thread block per row, nothing held in registers across rows, and
// as many warps per SM as the register file allows: the row_sum v03 schedule (a block per row,
// 30 registers, 94% occupancy: 4.37 TB/s at 16384x8192 bf16 on the H200) with w read beside x,
// in the block shape of torch.compile's Triton reduction (a block of 512 threads per row).
// Adds over v03: occupancy instead of registers. v03 keeps its slice of w and the next row's x
// in registers (62 registers at bf16 D 8192: 4 blocks of 256 per SM, 43% achieved occupancy) and
// a resident grid walks the rows; ncu on the H200 (2026-12-04, 16384x8192) measured it at 3.71
// TB/s (73.0 us) where the Triton reduction (32 registers, 89% occupancy) ran 68.0 us, and at
// f32 (kPer 8: 109 registers, 25% occupancy) 127.8 against 120.5 us. Here a thread issues its
// kUnroll 16-byte x vectors, then reads w's vectors (L1 hits: w is 16-32 KB, read by every block
// on the SM, with an L1 evict-last hint: common/rows.cuh load_keep_last), one block reduction,
// one store, and the block retires; the block scheduler refills the SM at once, so its bytes in
// flight do not drop between rows, and 32 registers keep every warp slot of the SM filled
// (__launch_bounds__(512, 4): 2048 threads per SM).
// Measured (hk bench, H200, 2026-12-04, 16384x8192, bf16 / f32; `hk bench weighted_sum
// --budget-ms 400 --variant 'public,v02*,v03*,v04*,v05*' --shape 16384x8192 --dtype bf16,f32`):
// 65.4 / 120.8 us, 97.3% / 105.3% of copy, against v03's 66.8 / 124.5 us (95.1% / 102.2%) and
// cuBLAS's 66.1 / 152.0 us (96.2% / 83.7%). 256-thread blocks (4 / 8 vectors per thread at D
// 8192, measured beside it and then deleted) ran 65.2 / 123.6 us: level in bf16, 2.3%
// slower in f32.
// Needs: forward; 16-byte aligned row starts (base address and row stride) and w. Any D: the
// whole 16-byte vectors as above, the partial last vector element by element (threads
// 0 .. D % kV - 1). Otherwise supports() says why; unaligned operands go to cuBLAS or v02's kAny
// kernels (weighted_sum/dispatch.cpp).
// Run:   hk bench weighted_sum --variant 'v0[34]*' --shape 16384x8192 --dtype bf16,f32
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "common/vec.cuh"
#include "weighted_sum/weighted_sum_op.hpp"

namespace hk::weighted_sum_v04_oneshot_rows {
namespace {

constexpr int kThreads = 512;
// Blocks per SM the register budget is held to: 2048 threads, every warp slot (32 registers).
constexpr int kMinBlocks = 2048 / kThreads;
// 16-byte x vectors a thread issues before the first is used: a pass of the block covers 1024
// vectors (a bf16 row of 8192 in one pass, f32 in two).
constexpr int kUnroll = 1024 / kThreads;

// Block r % gridDim.x sums row r (one row per block: the grid is rows blocks up to 2^30).
template <class T>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    weighted_sum_v04_kernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, int64_t rows,
                            int64_t dim, int64_t ldx) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const int64_t nwhole = dim / kV;  // whole 16-byte vectors of a row
  const int tail = static_cast<int>(dim - nwhole * kV);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * ldx;
    float acc = 0.f;
#pragma unroll 1
    for (int64_t v0 = threadIdx.x; v0 < nwhole; v0 += int64_t(kThreads) * kUnroll) {
      V xv[kUnroll];  // (kUnroll, kV) in flight before the first use
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (v0 + u * kThreads < nwhole) xv[u] = load_stream<T, kV>(row + (v0 + u * kThreads) * kV);
      // w one vector at a time, at its use: an L1 hit (~35 cycles) each, while all of
      // them in flight beside x would take registers past the 32 that fill every warp slot.
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t v = v0 + u * kThreads;
        if (v >= nwhole) break;
        const V wv = load_keep_last<T, kV>(w + v * kV);
        float xf[kV], wf[kV];
        widen(xv[u], xf);
        widen(wv, wf);
#pragma unroll
        for (int k = 0; k < kV; ++k) acc = fmaf(xf[k], wf[k], acc);
      }
    }
    if (threadIdx.x < tail) {  // the partial last vector, element by element
      const int64_t e = nwhole * kV + threadIdx.x;
      acc = fmaf(to_f32(row[e]), to_f32(w[e]), acc);
    }
    const float sum = block_reduce<kThreads>(acc, SumOp{});
    if (threadIdx.x == 0) y[r] = from_f32<T>(sum);
  }
}

template <class T>
void launch_typed(const WeightedSumArgs& a, cudaStream_t s) {
  if (a.rows == 0) return;
  weighted_sum_v04_kernel<T><<<grid_for(a.rows), kThreads, 0, s>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<T*>(a.y), a.rows, a.dim, a.ld_x);
  HK_CHECK_LAUNCH("weighted_sum_v04_kernel");
}

void weighted_sum_v04_launch(const WeightedSumArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "weighted_sum/v04_oneshot_rows", [&](auto t) { launch_typed<decltype(t)>(a, stream); });
}

std::string weighted_sum_v04_supports(const WeightedSumProblem& p) {
  if (p.backward) return "forward only (the backward runs in v05_two_pass_backward or v02_row_groups)";
  if (p.row_align() < 16)
    return "needs 16-byte aligned row starts and w (base addresses and row stride) for 16-byte loads, got " +
           std::to_string(p.row_align()) + "-byte alignment";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(WeightedSumProblem, WeightedSumArgs, "weighted_sum", "v04_oneshot_rows",
                    "forward: a short-lived 512-thread block per row, w through L1 (evict-last), 32 registers", 90,
                    kFlagProduction, weighted_sum_v04_supports, weighted_sum_v04_launch);

}  // namespace hk::weighted_sum_v04_oneshot_rows
