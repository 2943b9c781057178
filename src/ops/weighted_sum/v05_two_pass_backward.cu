// weighted_sum/v05_two_pass_backward.cu
//
// Rung 5 (backward): dw = x^T dy and dx = dy w^T as two passes, each of one kind of traffic: a
// read-only column-sum pass over x, then a write-only pass of dx from one-shot blocks.
// Adds over v02: v02 does both in one pass (each thread reads kRowUnroll rows of its column of x,
// writes those rows of dx, keeps dw in registers: 64 / 40 registers bf16 / f32, a resident
// grid), the minimum traffic but reads and writes interleaved in every warp; from Python it ran
// 284 us at 16384x8192 f32 where torch.compile's split (a column reduction over x, then dx = dy
// w^T as a pointwise kernel) ran 261 us (0.92x; docs/results/bench-torch.json), the same bytes.
// The single-kind passes this library already runs near the peak: row_sum reads 16384x8192 at
// 4.37 / 4.46 TB/s (bf16 / f32, ncu, H200) and outer_mul_relu's flat one-shot kernel writes it
// at 1.34x / 1.00x torch.compile (bf16 / f32): two such passes should take ~62 + 62 us bf16 and
// ~121 + 120 us f32 against v02's 147 / 284.
// Measured (hk bench, H200, 2026-12-04, 16384x8192, bf16 / f32; `hk bench weighted_sum
// --budget-ms 400 --variant 'public,v02*,v03*,v04*,v05*' --shape 16384x8192 --dtype bf16,f32`):
// 134.5 / 247.4 us, 94.5% / 102.8% of copy, against v02's 143.3 / 279.9 us (88.8% / 90.9%) and
// cuBLAS's 283.9 / 335.4 us. From Python (`python -m hopperkit.bench --op weighted_sum_backward
// --problem 16384x8192 --samples 20`, the same day) 141.6 / 254.8 us against torch.compile's
// 173.8 / 260.5: 1.23x / 1.02x.
//   1. dw: item (column tile c, row set q) is one block; thread t owns 16-byte column vector
//      c * 256 + t and sums x[r, col] * dy[r] over rows q, q + R, ... with kRowUnroll rows of x in
//      flight (no stores, so twice v02's 4). C x R items are one wave of resident blocks; with R
//      > 1 each item writes an f32 partial of dw [R, D] and common/rows.cuh sum_partials adds
//      them in a fixed order (deterministic), as v02 does.
//   2. dx: x's layout as one flat array of row * (D / kV) vectors (common/rows.cuh flat_vec), one
//      short-lived 128-thread block per 256 of them, 2 per thread (the gelu v03 / add_scalar v02
//      shape: docs/decisions.md, one-shot 128 x 2 blocks), w through L1 (load_keep_last).
// Needs: backward; 16-byte aligned row starts of x and dx and w; D a multiple of 16 bytes (whole
// vectors only: the flat pass has no tail code). Otherwise supports() says why; v02 runs the rest.
// Run:   hk bench weighted_sum --variant 'v0[25]*' --shape 16384x8192 --dtype bf16,f32
#include <cstdint>

#include "common/launch.cuh"
#include "common/rows.cuh"
#include "common/vec.cuh"
#include "core/scratch.hpp"
#include "weighted_sum/weighted_sum_op.hpp"

namespace hk::weighted_sum_v05_two_pass_backward {
namespace {

constexpr int kColThreads = 256;  // dw pass: column vectors per block
constexpr int kRowUnroll = 8;     // dw pass: rows of x in flight per thread
constexpr int kColMinBlocks = 4;  // dw pass: blocks per SM the registers are held to (64 each)
constexpr int kFlatThreads = 128;  // dx pass
constexpr int kFlatUnroll = 2;     // dx pass: 16-byte vectors per thread, both computed before the first store

// Item (c, q) = q * C + c: dw partial of column vector c * kColThreads + tid over rows q, q + R, ...
template <class T>
__global__ void __launch_bounds__(kColThreads, kColMinBlocks) weighted_sum_v05_dw_kernel(const T* __restrict__ x,
                                                                          const T* __restrict__ dy,
                                                                          T* __restrict__ dw, float* __restrict__ part,
                                                                          int64_t rows, int64_t dim, int64_t ldx,
                                                                          int64_t C, int64_t R) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  for (int64_t item = blockIdx.x; item < C * R; item += gridDim.x) {
    const int64_t q = item / C, c = item - q * C;
    const int64_t col = (c * kColThreads + threadIdx.x) * kV;
    if (col >= dim) continue;  // no barrier below: idle threads of the last tile leave
    const T* xc = x + col;
    float acc[kV] = {};
    auto add = [&](const V& xv, float g) {
      float xf[kV];
      widen(xv, xf);
#pragma unroll
      for (int k = 0; k < kV; ++k) acc[k] = fmaf(xf[k], g, acc[k]);
    };
    // Batches of kRowUnroll rows, unguarded, all loads issued before the first use; then the
    // rest (fewer than kRowUnroll rows) as one guarded batch. NOTE: guarded loads in the batch kept a
    // predicate and an address per row live: 80 registers at bf16, and spills under 64.
    const int64_t step = R * ldx;  // elements between this item's consecutive rows
    int64_t r0 = q;
    for (; r0 + (kRowUnroll - 1) * R < rows; r0 += R * kRowUnroll) {
      const T* p = xc + r0 * ldx;
      V xv[kRowUnroll];  // (kRowUnroll, kV): rows r0, r0 + R, ... of this column vector
      float g[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        xv[u] = load_stream<T, kV>(p + u * step);
        g[u] = to_f32(dy[r0 + u * R]);
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) add(xv[u], g[u]);
    }
    if (r0 < rows) {  // the last rows, fewer than kRowUnroll: guarded, still all issued first
      V xv[kRowUnroll];
      float g[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u)
        if (r0 + u * R < rows) {
          xv[u] = load_stream<T, kV>(xc + (r0 + u * R) * ldx);
          g[u] = to_f32(dy[r0 + u * R]);
        }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u)
        if (r0 + u * R < rows) add(xv[u], g[u]);
    }
    store_column_sums<T>(acc, col, dim, q, R, dw, part);
  }
}

// Block b: flat vectors b * 256 + u * 128 + tid of dx (u < 2): dx[r, col] = dy[r] * w[col].
template <class T>
__global__ void __launch_bounds__(kFlatThreads) weighted_sum_v05_dx_kernel(const T* __restrict__ w,
                                                                           const T* __restrict__ dy,
                                                                           T* __restrict__ dx, uint32_t nvec,
                                                                           uint32_t row_vecs, int64_t ldd) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const uint32_t base = blockIdx.x * (kFlatThreads * kFlatUnroll) + threadIdx.x;
  V o[kFlatUnroll];
  FlatVec at[kFlatUnroll];
#pragma unroll
  for (int u = 0; u < kFlatUnroll; ++u) {
    const uint32_t i = base + u * kFlatThreads;
    if (i >= nvec) break;
    at[u] = flat_vec(i, row_vecs);
    const V wv = load_keep_last<T, kV>(w + at[u].col * kV);
    const float g = to_f32(dy[at[u].row]);
    float wf[kV];
    widen(wv, wf);
#pragma unroll
    for (int k = 0; k < kV; ++k) o[u].v[k] = from_f32<T>(g * wf[k]);
  }
#pragma unroll
  for (int u = 0; u < kFlatUnroll; ++u) {
    if (base + u * kFlatThreads >= nvec) break;
    store_stream<T, kV>(dx + at[u].row * ldd + at[u].col * kV, o[u]);
  }
}

template <class T>
void launch_typed(const WeightedSumArgs& a, cudaStream_t s) {
  constexpr int kV = kVec16<T>;
  if (a.rows == 0 || a.dim == 0) return;
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const T* dy = static_cast<const T*>(a.dy);
  // 1. dw: one wave of (column tile, row set) items.
  {
    auto kernel = weighted_sum_v05_dw_kernel<T>;
    static const int resident = resident_grid(kernel, kColThreads);
    const int64_t C = ceil_div(a.dim / kV, kColThreads);
    const int64_t R = std::max<int64_t>(1, std::min<int64_t>(a.rows, resident / C));
    detail::StreamWorkspace ws(s, "weighted_sum_v05_partials", R > 1 ? size_t(R * a.dim) * sizeof(float) : 4);
    float* part = static_cast<float*>(ws.get());
    kernel<<<grid_for(C * R), kColThreads, 0, s>>>(x, dy, static_cast<T*>(a.dw), part, a.rows, a.dim, a.ld_x, C, R);
    HK_CHECK_LAUNCH("weighted_sum_v05_dw_kernel");
    if (R > 1) sum_partials(part, R, a.dim, static_cast<T*>(a.dw), s);
  }
  // 2. dx: one-shot blocks over the flat vectors.
  const int64_t row_vecs = a.dim / kV, nvec = a.rows * row_vecs;
  const int64_t blocks = ceil_div(nvec, int64_t(kFlatThreads) * kFlatUnroll);
  weighted_sum_v05_dx_kernel<T><<<static_cast<unsigned>(blocks), kFlatThreads, 0, s>>>(
      w, dy, static_cast<T*>(a.dx), static_cast<uint32_t>(nvec), static_cast<uint32_t>(row_vecs), a.ld_dx);
  HK_CHECK_LAUNCH("weighted_sum_v05_dx_kernel");
}

void weighted_sum_v05_launch(const WeightedSumArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "weighted_sum/v05_two_pass_backward", [&](auto t) { launch_typed<decltype(t)>(a, stream); });
}

std::string weighted_sum_v05_supports(const WeightedSumProblem& p) {
  if (!p.backward) return "backward only (the forward runs in v04_oneshot_rows, v03, v02 or cuBLAS)";
  if (p.row_align() < 16)
    return "needs 16-byte aligned row starts of x and dx and w (base addresses and row strides), got " +
           std::to_string(p.row_align()) + "-byte alignment";
  const int64_t esize = dtype_bits(p.dtype) / 8;
  if ((p.dim * esize) % 16 != 0)
    return "rows of " + std::to_string(p.dim) + " elements are not whole 16-byte vectors (D * " +
           std::to_string(esize) + " bytes must be a multiple of 16: the flat dx pass has no tail code)";
  if (p.rows * (p.dim * esize / 16) > int64_t(UINT32_MAX) - kFlatThreads * kFlatUnroll)
    return "the dx pass indexes x's 16-byte vectors in 32 bits: fewer than 2^32 of them, got " +
           std::to_string(p.rows * (p.dim * esize / 16));
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(WeightedSumProblem, WeightedSumArgs, "weighted_sum", "v05_two_pass_backward",
                    "backward: dw by a read-only column-sum pass over x, then dx = dy w^T by flat one-shot blocks",
                    90, kFlagProduction, weighted_sum_v05_supports, weighted_sum_v05_launch);

}  // namespace hk::weighted_sum_v05_two_pass_backward
