// row_sum/v03_split_row.cu
//
// Rung 3 (default): v02's vector loads, plus rows split across blocks when there are too few
// rows to fill the GPU. With R rows and B resident blocks (132 SMs x 8), each row is cut into
// S = ceil(B / R) slices of at least 64 KB; block (r, s) writes the f32 sum of its slice to a
// workspace [R, S], and a second tiny kernel (one warp per row) adds each row's S partials in
// a fixed order and writes y. 4 x 2^26 runs as ~1056 blocks instead of 4.
// Why a second kernel and not atomics: y is bf16/f16 (no f32 accumulator to atomicAdd into
// without a workspace anyway), float atomics make the result depend on block timing (run-to-
// run differences in the last bits), and a "last block finishes" counter needs zeroed
// counters (a memset launch) plus a fence per block. The second kernel reads R*S floats from
// L2 (~4 KB) and costs one launch (~2-3 us against ~120 us of streaming for 4 x 2^26 bf16).
// When rows fill the GPU S = 1: no workspace, no second kernel — v02's schedule exactly
// (warp per row up to 2 KB rows, block per row above).
// Needs: operands aligned to their element size (the public op checks it).
// Run:   hk bench row_sum --variant v03_split_row --shape 4x67108864
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "row_sum/row_sum_op.hpp"
#include "core/scratch.hpp"

namespace hk::row_sum_v03_split_row {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
constexpr int64_t kWarpRowBytes = 2048;      // as v02: short rows go one per warp
constexpr int64_t kMinSliceBytes = 64 << 10;  // a slice amortizes its block's launch and reduction

template <class T>
__global__ void __launch_bounds__(kThreads) row_sum_v03_warp_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                    int64_t rows, int64_t cols, int64_t ldx) {
  warp_row_sums<kThreads, kUnroll>(x, y, rows, cols, ldx);
}

// Block b sums slice b % splits of row b / splits. With splits == 1 it writes y directly
// (OutT = T), otherwise the f32 partial (OutT = float).
template <class T, class OutT>
__global__ void __launch_bounds__(kThreads) row_sum_v03_slice_kernel(const T* __restrict__ x, OutT* __restrict__ out,
                                                                     int64_t rows, int64_t cols, int64_t ldx,
                                                                     int64_t splits, int64_t chunk) {
  const int64_t units = rows * splits;
  for (int64_t b = blockIdx.x; b < units; b += gridDim.x) {
    const int64_t r = b / splits, begin = (b % splits) * chunk;
    const int64_t len = cols - begin < chunk ? cols - begin : chunk;
    float acc = block_reduce<kThreads>(
        row_partial_sum<kUnroll, true>(x + r * ldx + begin, len, threadIdx.x, kThreads), SumOp{});
    if (threadIdx.x == 0) out[b] = from_f32<OutT>(acc);
  }
}

// One warp per row adds the row's partials in slice order: deterministic.
template <class T>
__global__ void __launch_bounds__(kThreads) row_sum_v03_finish_kernel(const float* __restrict__ part, T* __restrict__ y,
                                                                      int64_t rows, int64_t splits) {
  const int64_t r = int64_t(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  float acc = 0.f;
  for (int64_t s = lane; s < splits; s += 32) acc += part[r * splits + s];
  acc = warp_reduce(acc, SumOp{});
  if (lane == 0) y[r] = from_f32<T>(acc);
}

template <class T>
void launch_typed(const RowSumArgs& a, cudaStream_t stream) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  if (a.cols * int64_t(sizeof(T)) <= kWarpRowBytes) {
    static const int resident = resident_grid(row_sum_v03_warp_kernel<T>, kThreads);
    const int blocks = static_cast<int>(std::min<int64_t>(resident, ceil_div(a.rows, kThreads / 32)));
    row_sum_v03_warp_kernel<T><<<blocks, kThreads, 0, stream>>>(x, y, a.rows, a.cols, a.ldx);
    HK_CHECK_LAUNCH("row_sum_v03_warp_kernel");
    return;
  }
  static const int resident = resident_grid(row_sum_v03_slice_kernel<T, float>, kThreads);
  const int64_t max_splits = std::max<int64_t>(1, a.cols * int64_t(sizeof(T)) / kMinSliceBytes);
  int64_t splits = std::min(max_splits, ceil_div(resident, a.rows));
  // Slices are whole multiples of 16 elements (so every slice of an aligned row stays aligned);
  // recount the slices after rounding so none is empty.
  const int64_t chunk = ceil_div(ceil_div(a.cols, splits), 16) * 16;
  splits = ceil_div(a.cols, chunk);
  const int blocks = static_cast<int>(std::min<int64_t>(a.rows * splits, 0x7FFFFFFF));
  if (splits == 1) {
    row_sum_v03_slice_kernel<T, T><<<blocks, kThreads, 0, stream>>>(x, y, a.rows, a.cols, a.ldx, 1, chunk);
    HK_CHECK_LAUNCH("row_sum_v03_slice_kernel");
    return;
  }
  // The partial sums live in the stream's cached workspace, not an allocation per call.
  detail::StreamWorkspace ws(stream, "row_sum_v03_partials", a.rows * splits * sizeof(float));
  float* part = static_cast<float*>(ws.get());
  row_sum_v03_slice_kernel<T, float><<<blocks, kThreads, 0, stream>>>(x, part, a.rows, a.cols, a.ldx, splits, chunk);
  HK_CHECK_LAUNCH("row_sum_v03_slice_kernel");
  row_sum_v03_finish_kernel<T><<<static_cast<unsigned>(ceil_div(a.rows, kThreads / 32)), kThreads, 0, stream>>>(
      part, y, a.rows, splits);
  HK_CHECK_LAUNCH("row_sum_v03_finish_kernel");
}

void row_sum_v03_launch(const RowSumArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "row_sum/v03_split_row", [&](auto t) { launch_typed<decltype(t)>(a, stream); });
}

}  // namespace

HK_REGISTER_VARIANT(RowSumProblem, RowSumArgs, "row_sum", "v03_split_row",
                    "v02 plus rows split across blocks when rows are few; f32 partials, second tiny kernel",
                    70, kFlagProduction, nullptr, row_sum_v03_launch);

}  // namespace hk::row_sum_v03_split_row
