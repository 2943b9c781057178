// softmax/v06_split_row_grid.cu
//
// Rung 6: few rows too long for any on-chip rung (4 x 2^26). Each row's 16-byte vectors are
// cut into S chunks so that rows x S items fill two waves of resident blocks on every SM
// (rmsnorm v04's shape; v04_split_row_cluster gives a row at most one cluster of 16 blocks, so
// 4 rows ran on 64 of 132 SMs):
//   1. partial kernel: a block per item (row r, chunk c) folds its chunk into an online (max,
//      sum of exp(x - max)) pair — v03's math, rescaled once per 16-byte vector — with kUnroll
//      16-byte loads in flight per thread, then merges the threads' pairs (block max, each sum
//      rescaled to it, block sum) -> part[r * S + c]. Backward: the chunk's sum(dy * y).
//   2. finalize kernel: a warp per row merges the row's S pairs in a fixed order (lane l takes
//      pairs l, l + 32, ..., then a shuffle tree: deterministic) -> (max, 1 / sum) per row;
//      backward: the row's dot.
//   3. apply kernel: y = exp(x - max) / sum, dx = y * (dy - dot), items walked in the reverse
//      order of kernel 1 so that the chunks it read last are still in L2 (its loads keep the
//      default L2 policy; the apply's loads and stores stream).
// A row that does not fit on chip is read twice: the best this rung can do by the bytes()
// metric (x read once, y written once) is 2/3 of copy bandwidth forward and 3/5 backward (y and
// dy read twice, dx written once).
// Rows start at any 16-byte phase (common/rows.cuh's RowSplit, as v03/v04): chunks cut the
// row's whole vectors; the block of chunk 0 also owns the scalar head and tail.
// NaN / inf: as v03 and v04 (the same MaxSum folding, rescale_sum and exact exp form): a row
// with NaN or +inf gives NaN, an all -inf row NaN, -inf elements of a finite row 0; a chunk
// of -inf alone contributes (-inf, 0), neutral in the merge.
// Adds over v04: the whole GPU for a handful of rows, no cluster limit.
// Ladder-only since 2026-12-04: v07_oneshot_apply runs these kernels with a faster apply pass
// and serves the rows longer than a 16-block v04 cluster holds on chip (16 x 512 x 32 elements;
// backward f32 16 x 512 x 16), which are read twice by every rung.
// Any alignment: when the operands' rows start at different 16-byte phases (kAny), the partial
// kernel splits at x's (y's) phase and the apply kernel at the output's, each reading the other
// operands with load_vec_any; chunks index a row's whole vectors either way (at most cols / kV).
// v07_oneshot_apply runs these kernels too, its apply pass on another grid: it calls
// softmax_split_row_grid (softmax/split_row_grid.hpp), defined at the end of this file.
// Needs: nothing beyond the op contract.
// Run:   hk bench softmax --variant v06_split_row_grid --shape 4x67108864
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "softmax/softmax_common.cuh"
#include "softmax/softmax_op.hpp"
#include "softmax/split_row_grid.hpp"

namespace hk::softmax_v06_split_row_grid {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;          // 16-byte vectors in flight per thread (and operand)

// Chunk c of a row covers its vectors [c * chunk, min(nvec, (c + 1) * chunk)) after the head;
// nvec is the row's own (RowSplit), so a row whose start is not 16-byte aligned may end one
// vector early and its last chunk may be empty.
template <class T, bool kBackward, bool kAny>
__global__ void __launch_bounds__(kThreads) softmax_v06_partial_kernel(const T* __restrict__ a,
                                                                       const T* __restrict__ dy,
                                                                       float2* __restrict__ part, int64_t rows,
                                                                       int64_t cols, int64_t ld_a, int64_t ld_dy,
                                                                       int64_t S, int64_t chunk) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const int lane = threadIdx.x;
  for (int64_t item = blockIdx.x; item < rows * S; item += gridDim.x) {
    const int64_t r = item / S, c = item - r * S;
    const T* ar = a + r * ld_a;
    const T* dr = kBackward ? dy + r * ld_dy : nullptr;
    const RowSplit s = row_split(ar, cols);  // shared by dy's row (same phase; kAny: dy read at x's)
    const int64_t end = min(s.nvec, (c + 1) * chunk);
    const T* ab = ar + s.head;
    const T* db = kBackward ? dr + s.head : nullptr;
    MaxSum st = max_sum_empty();
    float dot = 0.f;
    if (c == 0 && lane < s.edges()) {
      const int64_t e = s.edge<kV>(lane);
      if constexpr (kBackward) dot = to_f32(ar[e]) * to_f32(dr[e]);
      else max_sum_add(st, {to_f32(ar[e])});
    }
    auto fold = [&](const V& va, const V& vd) {
      float f[kV];
#pragma unroll
      for (int j = 0; j < kV; ++j) f[j] = to_f32(va.v[j]);
      if constexpr (kBackward) {
#pragma unroll
        for (int j = 0; j < kV; ++j) dot += f[j] * to_f32(vd.v[j]);
      } else {
        max_sum_add(st, f);
      }
    };
    // Plain (keep) loads: the apply kernel re-reads these chunks and should find the last ones in L2.
    int64_t i = c * chunk + lane;
    for (; i + int64_t(kUnroll - 1) * kThreads < end; i += int64_t(kUnroll) * kThreads) {
      V va[kUnroll], vd[kBackward ? kUnroll : 1];  // (kUnroll, kV) in flight before any math
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        va[u] = load_keep<T, kV>(ab + (i + u * kThreads) * kV);
        if constexpr (kBackward) vd[u] = load_keep_at<kAny, T, kV>(db + (i + u * kThreads) * kV);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) fold(va[u], vd[kBackward ? u : 0]);
    }
    for (; i < end; i += kThreads) {
      V va = load_keep<T, kV>(ab + i * kV), vd = va;
      if constexpr (kBackward) vd = load_keep_at<kAny, T, kV>(db + i * kV);
      fold(va, vd);
    }
    if constexpr (kBackward) {
      dot = block_reduce<kThreads>(dot, SumOp{});
      if (lane == 0) part[item] = make_float2(dot, 0.f);
    } else {
      const float m = block_reduce<kThreads>(st.m, MaxOp{});
      const float sum = block_reduce<kThreads>(rescale_sum(st.s, st.m, m), SumOp{});
      if (lane == 0) part[item] = make_float2(m, sum);
    }
  }
}

// stats[r] = (max, 1 / sum) forward, (dot, 0) backward, from the row's S partials.
template <bool kBackward>
__global__ void __launch_bounds__(kThreads) softmax_v06_finalize_kernel(const float2* __restrict__ part,
                                                                        int64_t rows, int64_t S,
                                                                        float2* __restrict__ stats) {
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x % 32;
  for (int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    const float2* pr = part + r * S;
    if constexpr (kBackward) {
      float dot = 0.f;
      for (int64_t c = lane; c < S; c += 32) dot += pr[c].x;
      dot = warp_reduce(dot, SumOp{});
      if (lane == 0) stats[r] = make_float2(dot, 0.f);
    } else {
      float m = MaxOp::kIdentity, sum = 0.f;
      for (int64_t c = lane; c < S; c += 32) {
        const float2 p = pr[c];
        const float mm = max_nan(m, p.x);
        sum = rescale_sum(sum, m, mm) + rescale_sum(p.y, p.x, mm);
        m = mm;
      }
      const float row_m = warp_reduce(m, MaxOp{});
      const float row_sum = warp_reduce(rescale_sum(sum, m, row_m), SumOp{});
      if (lane == 0) stats[r] = make_float2(row_m, inv_sum(row_sum) * kUnbias);
    }
  }
}

// kThr threads per block, kUnr 16-byte vectors per operand in flight per thread: v06 launches
// <kThreads, kUnroll> as two waves of resident blocks over chunks of ~1/S of a row; v07 <128, 2>,
// one short-lived block per chunk of 128 x 2 vectors.
template <class T, bool kBackward, bool kAny, int kThr, int kUnr>
__global__ void __launch_bounds__(kThr) softmax_v06_apply_kernel(const T* __restrict__ a,
                                                                 const T* __restrict__ dy,
                                                                 const float2* __restrict__ stats,
                                                                 T* __restrict__ out, int64_t rows, int64_t cols,
                                                                 int64_t ld_a, int64_t ld_dy, int64_t ld_out,
                                                                 int64_t S, int64_t chunk) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const int lane = threadIdx.x;
  for (int64_t b = blockIdx.x; b < rows * S; b += gridDim.x) {
    const int64_t item = rows * S - 1 - b;  // reverse of the partial kernel's order: L2 hits first
    const int64_t r = item / S, c = item - r * S;
    const T* ar = a + r * ld_a;
    const T* dr = kBackward ? dy + r * ld_dy : nullptr;
    T* o = out + r * ld_out;
    // Shared by dy's and out's rows (same phase), or (kAny) the output's.
    const RowSplit s = kAny ? row_split(static_cast<const T*>(o), cols) : row_split(ar, cols);
    const int64_t end = min(s.nvec, (c + 1) * chunk);
    const T* ab = ar + s.head;
    const T* db = kBackward ? dr + s.head : nullptr;
    T* ob = o + s.head;
    const float2 st = stats[r];
    const RowExp<false> ex = row_exp_exact(st.x);
    auto apply = [&](float x, float d) { return kBackward ? x * (d - st.x) : ex(x) * st.y; };
    if (c == 0 && lane < s.edges()) {
      const int64_t e = s.edge<kV>(lane);
      o[e] = from_f32<T>(apply(to_f32(ar[e]), kBackward ? to_f32(dr[e]) : 0.f));
    }
    auto write = [&](const V& va, const V& vd, int64_t i) {
      V w;
#pragma unroll
      for (int j = 0; j < kV; ++j) w.v[j] = from_f32<T>(apply(to_f32(va.v[j]), to_f32(vd.v[j])));
      store_stream<T, kV>(ob + i * kV, w);
    };
    int64_t i = c * chunk + lane;
    for (; i + int64_t(kUnr - 1) * kThr < end; i += int64_t(kUnr) * kThr) {
      V va[kUnr], vd[kBackward ? kUnr : 1];  // (kUnr, kV) in flight before any math
#pragma unroll
      for (int u = 0; u < kUnr; ++u) {
        va[u] = load_stream_at<kAny, T, kV>(ab + (i + u * kThr) * kV);
        if constexpr (kBackward) vd[u] = load_stream_at<kAny, T, kV>(db + (i + u * kThr) * kV);
      }
#pragma unroll
      for (int u = 0; u < kUnr; ++u) write(va[u], vd[kBackward ? u : 0], i + u * kThr);
    }
    for (; i < end; i += kThr) {
      V va = load_stream_at<kAny, T, kV>(ab + i * kV), vd = va;
      if constexpr (kBackward) vd = load_stream_at<kAny, T, kV>(db + i * kV);
      write(va, vd, i);
    }
  }
}

template <class T, bool kBackward, bool kAny>
void launch_typed(const SoftmaxArgs& a, cudaStream_t stream, SoftmaxApplyGrid grid) {
  constexpr int kV = kVec16<T>;
  if (a.rows == 0 || a.cols == 0) return;
  // Two waves of resident blocks; the three kernels are 256-thread kernels of a similar small
  // footprint, so the partial kernel's occupancy serves all of them.
  static const int64_t target = 2 * int64_t(resident_grid(softmax_v06_partial_kernel<T, kBackward, kAny>, kThreads));
  // A row holds cols / kV whole vectors, one fewer when its start is not 16-byte aligned (the
  // device clamps each chunk to its row's own count). S chunks bring rows x S to the target; a
  // chunk is at least one pass of the block (kThreads vectors).
  const int64_t nvec = a.cols / kV;
  int64_t S = std::max<int64_t>(1, std::min(ceil_div(target, a.rows), ceil_div(nvec, kThreads)));
  const int64_t chunk = std::max<int64_t>(1, ceil_div(nvec, S));
  S = std::max<int64_t>(1, ceil_div(nvec, chunk));
  const T* x = static_cast<const T*>(a.a);
  const T* d = static_cast<const T*>(a.dy);
  StreamScratch part(a.rows * S * int64_t(sizeof(float2)), stream);
  StreamScratch stats(a.rows * int64_t(sizeof(float2)), stream);
  softmax_v06_partial_kernel<T, kBackward, kAny><<<grid_for(a.rows * S), kThreads, 0, stream>>>(
      x, d, part.as<float2>(), a.rows, a.cols, a.ld_a, a.ld_dy, S, chunk);
  HK_CHECK_LAUNCH("softmax_v06_partial_kernel");
  softmax_v06_finalize_kernel<kBackward><<<grid_for(ceil_div(a.rows, kThreads / 32)), kThreads, 0, stream>>>(
      part.as<float2>(), a.rows, S, stats.as<float2>());
  HK_CHECK_LAUNCH("softmax_v06_finalize_kernel");
  // The apply pass: the partial kernel's chunks (v06), or one short-lived block per kThr x kUnr
  // vectors of a row (v07); either way items run in the reverse of the partial kernel's order.
  auto apply = [&](auto kernel, int threads, int64_t apply_chunk) {
    const int64_t apply_S = std::max<int64_t>(1, ceil_div(nvec, apply_chunk));
    kernel<<<grid_for(a.rows * apply_S), threads, 0, stream>>>(x, d, stats.as<float2>(), static_cast<T*>(a.out),
                                                               a.rows, a.cols, a.ld_a, a.ld_dy, a.ld_out, apply_S,
                                                               apply_chunk);
    HK_CHECK_LAUNCH("softmax_v06_apply_kernel");
  };
  switch (grid) {
    case SoftmaxApplyGrid::kResidentChunks:
      apply(softmax_v06_apply_kernel<T, kBackward, kAny, kThreads, kUnroll>, kThreads, chunk);
      break;
    case SoftmaxApplyGrid::kOneShot128x2:
      apply(softmax_v06_apply_kernel<T, kBackward, kAny, 128, 2>, 128, 128 * 2);
      break;
  }
}

void softmax_v06_launch(const SoftmaxArgs& a, cudaStream_t stream) {
  softmax_split_row_grid(a, stream, SoftmaxApplyGrid::kResidentChunks);
}

}  // namespace

HK_REGISTER_VARIANT(SoftmaxProblem, SoftmaxArgs, "softmax", "v06_split_row_grid",
                    "rows split into chunks over the whole grid: partial (max, sum) pairs, finalize, apply; any alignment (peeled)", 90,
                    0, nullptr, softmax_v06_launch);

}  // namespace hk::softmax_v06_split_row_grid

namespace hk {

void softmax_split_row_grid(const SoftmaxArgs& a, cudaStream_t stream, SoftmaxApplyGrid grid) {
  dispatch_softmax(a, "softmax/split_row_grid", [&](auto t, auto bwd, auto any) {
    softmax_v06_split_row_grid::launch_typed<decltype(t), decltype(bwd)::value, decltype(any)::value>(a, stream, grid);
  });
}

}  // namespace hk
