// weighted_sum/v01_partial_buffer.cu
//
// Rung 1 (reference): the seeds' scheme (the CS336 Triton kernels) in CUDA, scalar loads.
// Forward: a block owns a tile of 16 rows x 512 columns; 16 threads per row sum their columns
// and write one f32 partial per (column tile, row) into a [D/512, rows] buffer; a second kernel
// sums the partials of each row into y. Backward: a block owns 16 rows: it writes their dx
// (the outer product) and its partial dw over those 16 rows into a [rows/16, D] buffer, which
// a second kernel sums — the seeds' `partial_grad_weight.sum(axis=0)`.
// The cost this rung shows: every 16 rows write (and a second kernel re-reads) a full D-long
// f32 row of partials: at 16384x8192 bf16 the dw buffer is 4 MiB x 8 = 32 MiB, 12% of the
// backward's minimum traffic.
// Needs: nothing beyond the op contract (any alignment and row stride).
// Run:   hk bench weighted_sum --variant v01_partial_buffer --shape 16384x8192
#include "common/launch.cuh"
#include "common/rows.cuh"
#include "common/vec.cuh"
#include "weighted_sum/weighted_sum_op.hpp"

namespace hk::weighted_sum_v01_partial_buffer {
namespace {

constexpr int kThreads = 256;
constexpr int kTileRows = 16;              // the seeds' ROWS_TILE_SIZE
constexpr int kLanes = kThreads / kTileRows;  // threads per row in the forward tile
constexpr int kTileCols = 512;             // forward columns per block
static_assert(kLanes == 16 && kTileCols % kLanes == 0, "16 lanes per row cover a column tile");

// grid: (column tiles) x (row tiles), flattened. part[ct * rows + r].
template <class T>
__global__ void __launch_bounds__(kThreads) weighted_sum_v01_fwd_kernel(const T* x, const T* w, float* part,
                                                                        int64_t rows, int64_t dim, int64_t ldx,
                                                                        int64_t col_tiles, int64_t row_tiles) {
  for (int64_t b = blockIdx.x; b < col_tiles * row_tiles; b += gridDim.x) {
    const int64_t rt = b / col_tiles, ct = b - rt * col_tiles;
    const int64_t r = rt * kTileRows + threadIdx.x / kLanes;
    const int lane = threadIdx.x % kLanes;
    float acc = 0.f;
    if (r < rows)
      for (int64_t d = ct * kTileCols + lane; d < min(dim, (ct + 1) * kTileCols); d += kLanes)
        acc += to_f32(x[r * ldx + d]) * to_f32(w[d]);
    // the 16 lanes of a row are 16 consecutive threads of one warp
#pragma unroll
    for (int off = kLanes / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (r < rows && lane == 0) part[ct * rows + r] = acc;
  }
}

// Block rt: dx of rows [16 rt, 16 rt + 16) and their dw partial part[rt * dim + d].
template <class T>
__global__ void __launch_bounds__(kThreads) weighted_sum_v01_bwd_kernel(const T* x, const T* w, const T* dy, T* dx,
                                                                        float* part, int64_t rows, int64_t dim,
                                                                        int64_t ldx, int64_t ldd, int64_t row_tiles) {
  for (int64_t rt = blockIdx.x; rt < row_tiles; rt += gridDim.x) {
    const int64_t r0 = rt * kTileRows, r1 = min(rows, r0 + kTileRows);
    for (int64_t d = threadIdx.x; d < dim; d += kThreads) {
      const float wd = to_f32(w[d]);
      float acc = 0.f;
      for (int64_t r = r0; r < r1; ++r) {
        const float g = to_f32(dy[r]);
        dx[r * ldd + d] = from_f32<T>(g * wd);
        acc += to_f32(x[r * ldx + d]) * g;
      }
      part[rt * dim + d] = acc;
    }
  }
}

template <class T>
void run(const WeightedSumArgs& a, cudaStream_t s) {
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const int64_t row_tiles = ceil_div(a.rows, kTileRows);
  if (!a.backward) {
    const int64_t col_tiles = ceil_div(a.dim, kTileCols);
    StreamScratch part(col_tiles * a.rows * 4, s);
    weighted_sum_v01_fwd_kernel<T><<<grid_for(col_tiles * row_tiles), kThreads, 0, s>>>(
        x, w, part.as<float>(), a.rows, a.dim, a.ld_x, col_tiles, row_tiles);
    HK_CHECK_LAUNCH("weighted_sum_v01_fwd_kernel");
    sum_partials(part.as<float>(), col_tiles, a.rows, static_cast<T*>(a.y), s);
    return;
  }
  StreamScratch part(row_tiles * a.dim * 4, s);
  weighted_sum_v01_bwd_kernel<T><<<grid_for(row_tiles), kThreads, 0, s>>>(
      x, w, static_cast<const T*>(a.dy), static_cast<T*>(a.dx), part.as<float>(), a.rows, a.dim, a.ld_x, a.ld_dx,
      row_tiles);
  HK_CHECK_LAUNCH("weighted_sum_v01_bwd_kernel");
  sum_partials(part.as<float>(), row_tiles, a.dim, static_cast<T*>(a.dw), s);
}

void weighted_sum_v01_launch(const WeightedSumArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "weighted_sum/v01_partial_buffer", [&](auto t) { run<decltype(t)>(a, stream); });
}

}  // namespace

HK_REGISTER_VARIANT(WeightedSumProblem, WeightedSumArgs, "weighted_sum", "v01_partial_buffer",
                    "the seeds' scheme: 16-row tiles write f32 partials, a second kernel sums them", 70,
                    kFlagReference, nullptr, weighted_sum_v01_launch);

}  // namespace hk::weighted_sum_v01_partial_buffer
