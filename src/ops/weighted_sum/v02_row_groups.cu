// weighted_sum/v02_row_groups.cu
//
// Rung 2: one pass over x with 16-byte loads and no partial buffer where the shape allows it.
// Forward: a row group (a warp for rows of <= 128 vectors, 8 rows per block; else a 256-thread
// block) streams its row with kUnroll 16-byte loads in flight per thread, w read through L1
// (reused by every row), and writes y[r] directly: one kernel, no partials. Only when there are
// too few rows to fill the GPU (4 x 2^26) are rows split into S chunks: a block per (chunk,
// group of 4 rows) loads each w vector once for the group's rows, and a tiny second kernel sums
// the S partials.
// Backward: one kernel over (column tile, row set) items. A thread owns one 16-byte column
// vector: it writes dx = dy[r] * w for the set's rows (kRowUnroll rows of x in flight) and keeps
// dw for its columns in f32 registers. With few rows one set covers all rows and dw is written
// directly (single pass, no second kernel); with many rows, R sets (one wave of blocks) write a
// [R, D] f32 partial (~1.6% of the traffic at 16384x8192) summed by the tiny kernel.
// Adds over v01: 16-byte loads, loads in flight, and partial buffers sized by the GPU (R, S
// ~ one wave) instead of by the shape (rows / 16 for the seeds): 8x-30x fewer partial bytes.
// Any alignment: operands or row strides that are not 16-byte aligned take a second
// instantiation of every kernel (kAny) in which each 16-byte access becomes load_vec_any /
// store_vec_any (the widest pieces the address allows; a branch uniform across a warp walking
// one row). Element indices stay the same for every operand, as the column-wise dw sums need.
// Cost: 2-8 memory instructions per vector of a misaligned operand (not yet measured).
// Run:   hk bench weighted_sum --variant v02_row_groups --shape 16384x8192
#include <type_traits>

#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "common/vec.cuh"
#include "weighted_sum/weighted_sum_op.hpp"

namespace hk::weighted_sum_v02_row_groups {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;     // 16-byte x vectors in flight per thread (forward)
constexpr int kRowUnroll = 4;  // rows of x in flight per thread (backward)
constexpr int kWarpRowVecs = 32 * kUnroll;  // rows up to this many vectors go warp-per-row
constexpr int kFewRows = 4;    // rows sharing each w vector in the few-long-rows forward
constexpr int kFewUnroll = 2;  // w vectors (each with kFewRows x vectors) in flight per thread

// Item (r, s): chunk s (vectors [s * chunk, (s + 1) * chunk)) of row r, done by one row group.
template <class T, int kGroup, bool kAny>
__global__ void __launch_bounds__(kThreads) weighted_sum_v02_fwd_kernel(const T* __restrict__ x,
                                                                        const T* __restrict__ w, T* __restrict__ y,
                                                                        float* __restrict__ part, int64_t rows,
                                                                        int64_t dim, int64_t ldx, int64_t S,
                                                                        int64_t chunk) {
  constexpr int kV = kVec16<T>;
  constexpr int kGroups = kThreads / kGroup;
  using V = Vec<T, kV>;
  const int lane = threadIdx.x % kGroup;
  const int64_t nvec = (dim + kV - 1) / kV;
  const int64_t ngroups = int64_t(gridDim.x) * kGroups;
  for (int64_t item = int64_t(blockIdx.x) * kGroups + threadIdx.x / kGroup; item < rows * S; item += ngroups) {
    const int64_t r = item / S, s = item - r * S;
    const int64_t end = min(nvec, (s + 1) * chunk);
    const T* row = x + r * ldx;
    float acc = 0.f;
    for (int64_t v0 = s * chunk + lane; v0 < end; v0 += kGroup * kUnroll) {
      // x and w vectors all issued before the first use. NOTE: w loaded at its use (the
      // previous form) cost an L2 round trip per vector once w outgrew L1: at 4 x 2^26 (w is
      // 128-256 MB) the forward ran at 47% of copy on the H200.
      V xv[kUnroll], wv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t v = v0 + u * kGroup;
        if (v < end) {
          xv[u] = load_row_vec<T, kV, false, kAny>(row, v * kV, dim);
          wv[u] = load_row_vec<T, kV, true, kAny>(w, v * kV, dim);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t v = v0 + u * kGroup;
        if (v >= end) continue;
#pragma unroll
        for (int k = 0; k < kV; ++k) acc += to_f32(xv[u].v[k]) * to_f32(wv[u].v[k]);
      }
    }
    acc = group_sum<kGroup, kThreads>(acc);
    if (lane == 0) {
      if (S == 1) y[r] = from_f32<T>(acc);
      else part[s * rows + r] = acc;
    }
  }
}

// acc[i] += x[r0 + i, v] . w[v] for the group's rows (column vector v). kWhole: v lies inside
// D (16-byte loads); else element loads, zero-filled.
template <class T, bool kWhole, bool kAny>
__device__ __forceinline__ void few_rows_terms(const T* __restrict__ x, const T* __restrict__ w, int64_t v,
                                               int64_t r0, int64_t rows, int64_t dim, int64_t ldx,
                                               float (&acc)[kFewRows]) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const V wv = kWhole ? load_keep_at<kAny, T, kV>(w + v * kV) : load_row_vec<T, kV>(w, v * kV, dim);
  V xv[kFewRows];
#pragma unroll
  for (int i = 0; i < kFewRows; ++i)
    if (r0 + i < rows)
      xv[i] = kWhole ? load_stream_at<kAny, T, kV>(x + (r0 + i) * ldx + v * kV)
                     : load_row_vec<T, kV>(x + (r0 + i) * ldx, v * kV, dim);
#pragma unroll
  for (int i = 0; i < kFewRows; ++i)
    if (r0 + i < rows) {
      float xf[kV], wf[kV];
      widen(xv[i], xf);
      widen(wv, wf);
#pragma unroll
      for (int k = 0; k < kV; ++k) acc[i] += xf[k] * wf[k];
    }
}

// Few long rows (the split case): item (s, q) is chunk s of rows q * kFewRows .. + kFewRows,
// one block. Each w vector is loaded once and used for every row of the group, so HBM sees w
// once however many rows there are. The whole vectors take unguarded 16-byte loads; the row's
// partial last vector (D % 8 != 0) is thread 0's. NOTE: one row per item (the row-group kernel
// above, split) read w once per row unless the rows' blocks met in L2: 33% of copy at 4 x 2^26
// bf16 (89.5% f32) on the H200, at 105 registers (bf16) against 61 (f32).
template <class T, bool kAny>
__global__ void __launch_bounds__(kThreads) weighted_sum_v02_fwd_few_rows_kernel(const T* __restrict__ x,
                                                                                 const T* __restrict__ w,
                                                                                 float* __restrict__ part,
                                                                                 int64_t rows, int64_t dim,
                                                                                 int64_t ldx, int64_t S,
                                                                                 int64_t chunk) {
  constexpr int kV = kVec16<T>;
  const int64_t nvec = (dim + kV - 1) / kV, whole = dim / kV;
  const int64_t groups = (rows + kFewRows - 1) / kFewRows;
  for (int64_t item = blockIdx.x; item < groups * S; item += gridDim.x) {
    const int64_t q = item % groups, s = item / groups, r0 = q * kFewRows;
    const int64_t end = min(nvec, (s + 1) * chunk), end_whole = min(end, whole);
    float acc[kFewRows] = {};
    for (int64_t v0 = s * chunk + threadIdx.x; v0 < end_whole; v0 += kThreads * kFewUnroll) {
#pragma unroll
      for (int u = 0; u < kFewUnroll; ++u)
        if (v0 + u * kThreads < end_whole) few_rows_terms<T, true, kAny>(x, w, v0 + u * kThreads, r0, rows, dim, ldx, acc);
    }
    if (end > end_whole && threadIdx.x == 0) few_rows_terms<T, false, kAny>(x, w, whole, r0, rows, dim, ldx, acc);
#pragma unroll
    for (int i = 0; i < kFewRows; ++i) {
      const float sum = block_reduce<kThreads>(acc[i], SumOp{});
      if (threadIdx.x == 0 && r0 + i < rows) part[s * rows + r0 + i] = sum;
    }
  }
}

// Rows q, q + R, q + 2R, ... of one column vector (elements col ..): dx = dy[r] * w, and the
// f32 dw sums in acc. kWhole: the vector lies inside D, so kRowUnroll rows' 16-byte loads go
// out unguarded before the first use; otherwise (the one partial vector of the row) one row
// at a time, element by element.
// NOTE: with the guarded element fallback inside the unrolled loop, and per-element bf16
// conversions, ptxas held unpacked scalars for every row in flight: 84 registers at bf16 (2
// blocks of 256 per SM, 32 KiB of x in flight per SM). Split, and widened on packed words
// (common/rows.cuh), it takes 64 (4 blocks, 64 KiB in flight); f32 48 -> 40 (6 blocks).
template <class T, bool kWhole, bool kAny>
__device__ __forceinline__ void bwd_column(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dx,
                                           const Vec<T, kVec16<T>>& wv, float (&acc)[kVec16<T>], int64_t col,
                                           int64_t q, int64_t rows, int64_t dim, int64_t ldx, int64_t ldd,
                                           int64_t R) {
  constexpr int kV = kVec16<T>;
  constexpr int kUnrollRows = kWhole ? kRowUnroll : 1;
  using V = Vec<T, kV>;
  for (int64_t r0 = q; r0 < rows; r0 += R * kUnrollRows) {
    V xv[kUnrollRows];
    float g[kUnrollRows];
#pragma unroll
    for (int u = 0; u < kUnrollRows; ++u) {
      const int64_t r = r0 + u * R;
      if (r < rows) {
        xv[u] = kWhole ? load_stream_at<kAny, T, kV>(x + r * ldx + col) : load_row_vec<T, kV>(x + r * ldx, col, dim);
        g[u] = to_f32(dy[r]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnrollRows; ++u) {
      const int64_t r = r0 + u * R;
      if (r >= rows) continue;
      float xf[kV], wf[kV];
      widen(xv[u], xf);
      widen(wv, wf);
      V o;
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        o.v[k] = from_f32<T>(g[u] * wf[k]);
        acc[k] += xf[k] * g[u];
      }
      if constexpr (kWhole) store_stream_at<kAny, T, kV>(dx + r * ldd + col, o);
      else store_row_vec<T, kV>(dx + r * ldd, col, dim, o);
    }
  }
}

// Item (c, q): column vector c * kThreads + tid of rows q, q + R, q + 2R, ...
template <class T, bool kAny>
__global__ void __launch_bounds__(kThreads) weighted_sum_v02_bwd_kernel(const T* __restrict__ x,
                                                                        const T* __restrict__ w,
                                                                        const T* __restrict__ dy, T* __restrict__ dx,
                                                                        T* __restrict__ dw, float* __restrict__ part,
                                                                        int64_t rows, int64_t dim, int64_t ldx,
                                                                        int64_t ldd, int64_t C, int64_t R) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  for (int64_t item = blockIdx.x; item < C * R; item += gridDim.x) {
    const int64_t q = item / C, c = item - q * C;
    const int64_t col = (c * kThreads + threadIdx.x) * kV;
    if (col >= dim) continue;
    const V wv = load_row_vec<T, kV, true, kAny>(w, col, dim);
    float acc[kV] = {};
    if (col + kV <= dim) bwd_column<T, true, kAny>(x, dy, dx, wv, acc, col, q, rows, dim, ldx, ldd, R);
    else bwd_column<T, false, kAny>(x, dy, dx, wv, acc, col, q, rows, dim, ldx, ldd, R);
    store_column_sums<T>(acc, col, dim, q, R, dw, part);
  }
}

// Few long rows: groups of kFewRows rows x S chunks fill the resident grid; S partials per row.
template <class T, bool kAny>
void launch_fwd_few_rows(const WeightedSumArgs& a, cudaStream_t s) {
  constexpr int kV = kVec16<T>;
  auto kernel = weighted_sum_v02_fwd_few_rows_kernel<T, kAny>;
  static const int resident = resident_grid(kernel, kThreads);
  const int64_t nvec = ceil_div(a.dim, kV);
  const int64_t groups = ceil_div(a.rows, kFewRows);
  int64_t S = std::max<int64_t>(1, std::min<int64_t>(ceil_div(resident, groups), ceil_div(nvec, kThreads)));
  const int64_t chunk = ceil_div(nvec, S);
  S = ceil_div(nvec, chunk);
  StreamScratch part(S * a.rows * 4, s);
  kernel<<<grid_for(std::min<int64_t>(resident, groups * S)), kThreads, 0, s>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.w), part.as<float>(), a.rows, a.dim, a.ld_x, S, chunk);
  HK_CHECK_LAUNCH("weighted_sum_v02_fwd_few_rows_kernel");
  sum_partials(part.as<float>(), S, a.rows, static_cast<T*>(a.y), s);
}

template <class T, int kGroup, bool kAny>
void launch_fwd(const WeightedSumArgs& a, cudaStream_t s) {
  constexpr int kV = kVec16<T>;
  constexpr int kGroups = kThreads / kGroup;
  auto kernel = weighted_sum_v02_fwd_kernel<T, kGroup, kAny>;
  static const int resident = resident_grid(kernel, kThreads);
  const int64_t nvec = ceil_div(a.dim, kV);
  // Split rows only when rows alone cannot give every resident group work.
  const int64_t want = ceil_div(int64_t(resident) * kGroups, a.rows);
  int64_t S = std::max<int64_t>(1, std::min<int64_t>(want, ceil_div(nvec, kGroup * kUnroll)));
  if (S > 1 && kGroup == kThreads) {
    launch_fwd_few_rows<T, kAny>(a, s);
    return;
  }
  const int64_t chunk = ceil_div(nvec, S);
  S = ceil_div(nvec, chunk);
  StreamScratch part(S > 1 ? S * a.rows * 4 : 0, s);
  const int blocks = grid_for(std::min<int64_t>(resident, ceil_div(a.rows * S, kGroups)));
  kernel<<<blocks, kThreads, 0, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<T*>(a.y),
                                     part.as<float>(), a.rows, a.dim, a.ld_x, S, chunk);
  HK_CHECK_LAUNCH("weighted_sum_v02_fwd_kernel");
  if (S > 1) sum_partials(part.as<float>(), S, a.rows, static_cast<T*>(a.y), s);
}

template <class T, bool kAny>
void launch_bwd(const WeightedSumArgs& a, cudaStream_t s) {
  constexpr int kV = kVec16<T>;
  auto kernel = weighted_sum_v02_bwd_kernel<T, kAny>;
  static const int resident = resident_grid(kernel, kThreads);
  const int64_t C = ceil_div(ceil_div(a.dim, kV), kThreads);
  const int64_t R = std::max<int64_t>(1, std::min<int64_t>(a.rows, resident / C));
  StreamScratch part(R > 1 ? R * a.dim * 4 : 0, s);
  kernel<<<grid_for(C * R), kThreads, 0, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.w),
                                              static_cast<const T*>(a.dy), static_cast<T*>(a.dx),
                                              static_cast<T*>(a.dw), part.as<float>(), a.rows, a.dim, a.ld_x,
                                              a.ld_dx, C, R);
  HK_CHECK_LAUNCH("weighted_sum_v02_bwd_kernel");
  if (R > 1) sum_partials(part.as<float>(), R, a.dim, static_cast<T*>(a.dw), s);
}

void weighted_sum_v02_launch(const WeightedSumArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "weighted_sum/v02_row_groups", [&](auto t) {
    using T = decltype(t);
    // Every row start of x (and dx) and w 16-byte aligned: the 16-byte kernels (y, dy and dw are
    // accessed one element at a time).
    auto ok = [&](const void* p, int64_t ld) {
      return aligned16(static_cast<const T*>(p)) && (a.rows <= 1 || (ld * int64_t(sizeof(T))) % 16 == 0);
    };
    const bool aligned = ok(a.x, a.ld_x) && ok(a.w, 0) && (!a.backward || ok(a.dx, a.ld_dx));
    auto run = [&](auto any) {
      constexpr bool kAny = decltype(any)::value;
      if (a.backward) launch_bwd<T, kAny>(a, stream);
      else if (ceil_div(a.dim, kVec16<T>) <= kWarpRowVecs) launch_fwd<T, 32, kAny>(a, stream);
      else launch_fwd<T, kThreads, kAny>(a, stream);
    };
    if (aligned) run(std::false_type{});
    else run(std::true_type{});
  });
}

}  // namespace

HK_REGISTER_VARIANT(WeightedSumProblem, WeightedSumArgs, "weighted_sum", "v02_row_groups",
                    "one pass with 16-byte loads: row groups for y, column tiles x row sets for dx and dw; any alignment", 90,
                    kFlagProduction, nullptr, weighted_sum_v02_launch);

}  // namespace hk::weighted_sum_v02_row_groups
