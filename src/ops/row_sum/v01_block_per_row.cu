// row_sum/v01_block_per_row.cu
//
// Rung 1 (reference): one block of 256 threads per row, one scalar load per element per
// iteration, partial sums combined by the classic shared-memory tree (log2 256 = 8 barriers).
// The naive shape of a row reduction: correct for every layout, but each load moves 2-4 bytes
// and a row count below the SM count leaves most of the GPU idle (4 rows -> 4 blocks).
// Needs: nothing beyond the op contract.
// Run:   hk bench row_sum --variant v01_block_per_row --shape 16384x8192
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "row_sum/row_sum_op.hpp"

namespace hk::row_sum_v01_block_per_row {
namespace {

constexpr int kThreads = 256;
static_assert((kThreads & (kThreads - 1)) == 0, "the tree halves the active threads each step");

template <class T>
__global__ void __launch_bounds__(kThreads) row_sum_v01_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                               int64_t rows, int64_t cols, int64_t ldx) {
  __shared__ float tree[kThreads];  // (kThreads) f32 partials of the current row
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * ldx;
    float acc = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) acc += to_f32(row[c]);
    tree[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) tree[threadIdx.x] += tree[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) y[r] = from_f32<T>(tree[0]);
    __syncthreads();  // tree[0] is read before the next row overwrites it
  }
}

void row_sum_v01_launch(const RowSumArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "row_sum/v01_block_per_row", [&](auto t) {
    using T = decltype(t);
    const int blocks = static_cast<int>(std::min<int64_t>(a.rows, 0x7FFFFFFF));
    row_sum_v01_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(a.x), static_cast<T*>(a.y),
                                                            a.rows, a.cols, a.ldx);
    HK_CHECK_LAUNCH("row_sum_v01_kernel");
  });
}

}  // namespace

HK_REGISTER_VARIANT(RowSumProblem, RowSumArgs, "row_sum", "v01_block_per_row",
                    "one block per row, scalar loads, shared-memory tree reduction", 70, kFlagReference,
                    nullptr, row_sum_v01_launch);

}  // namespace hk::row_sum_v01_block_per_row
