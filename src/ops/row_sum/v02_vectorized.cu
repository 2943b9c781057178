// row_sum/v02_vectorized.cu
//
// Rung 2: 16-byte loads (8 bf16/f16 or 4 f32), 4 of them in flight per thread before the
// first add, and a work unit sized to the row: a warp per row for rows up to 2 KB (shuffle
// reduction, no barriers, 8 rows per block), a 256-thread block per row above that (CUB block
// reduction). Rows of any length and stride start at any 16-byte phase: a scalar head and tail
// (< 8 elements each) surround the vector body (common/rows.cuh).
// Adds over v01: 4-8x fewer load instructions and enough bytes in flight per SM to cover HBM
// latency; short rows no longer leave 7/8 of a 256-thread block idle. Still one unit per row:
// few long rows (4 x 2^26) use only 4 blocks.
// Needs: operands aligned to their element size (the public op checks it).
// Run:   hk bench row_sum --variant v02_vectorized --shape 16384x8192
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "row_sum/row_sum_op.hpp"

namespace hk::row_sum_v02_vectorized {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;              // 16-byte loads in flight per thread
constexpr int64_t kWarpRowBytes = 2048;  // rows up to this size go one per warp (<= 4 vectors per lane)

template <class T>
__global__ void __launch_bounds__(kThreads) row_sum_v02_warp_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                    int64_t rows, int64_t cols, int64_t ldx) {
  warp_row_sums<kThreads, kUnroll>(x, y, rows, cols, ldx);
}

template <class T>
__global__ void __launch_bounds__(kThreads) row_sum_v02_block_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                     int64_t rows, int64_t cols, int64_t ldx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float acc = block_reduce<kThreads>(row_partial_sum<kUnroll, true>(x + r * ldx, cols, threadIdx.x, kThreads),
                                       SumOp{});
    if (threadIdx.x == 0) y[r] = from_f32<T>(acc);
  }
}

void row_sum_v02_launch(const RowSumArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "row_sum/v02_vectorized", [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(a.x);
    T* y = static_cast<T*>(a.y);
    if (a.cols * int64_t(sizeof(T)) <= kWarpRowBytes) {
      static const int resident = resident_grid(row_sum_v02_warp_kernel<T>, kThreads);
      const int blocks = static_cast<int>(std::min<int64_t>(resident, ceil_div(a.rows, kThreads / 32)));
      row_sum_v02_warp_kernel<T><<<blocks, kThreads, 0, stream>>>(x, y, a.rows, a.cols, a.ldx);
      HK_CHECK_LAUNCH("row_sum_v02_warp_kernel");
    } else {
      const int blocks = static_cast<int>(std::min<int64_t>(a.rows, 0x7FFFFFFF));
      row_sum_v02_block_kernel<T><<<blocks, kThreads, 0, stream>>>(x, y, a.rows, a.cols, a.ldx);
      HK_CHECK_LAUNCH("row_sum_v02_block_kernel");
    }
  });
}

}  // namespace

HK_REGISTER_VARIANT(RowSumProblem, RowSumArgs, "row_sum", "v02_vectorized",
                    "16-byte loads, 4 in flight; warp per short row, block per long row", 70, kFlagNone,
                    nullptr, row_sum_v02_launch);

}  // namespace hk::row_sum_v02_vectorized
