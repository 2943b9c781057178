// rmsnorm/v04_split_row.cu
//
// Rung 4: rows too long for registers, and few rows (4 x 2^26) where one block per row would
// leave most SMs idle. Each row is split into S chunks so that rows x S fills the GPU:
//   1. partial kernel: a block per (chunk, group of 4 rows) sums the chunk of each row (x^2
//      forward, g*dy*x backward, g loaded once for the group) with 16-byte loads, all of a
//      thread's loads for kUnroll column vectors in flight together -> part[rows, S];
//   2. finalize kernel: a warp per row sums its S partials in a fixed order -> rstd[r]
//      (forward) or the backward's coefficient rstd^3 * S / D (a [rows] f32 buffer);
//   3. apply kernel: y = x * rstd * g (forward: the partial kernel's items, g once per group),
//      or dx per (column tile, row set) with dg kept in f32 registers across the rows of the
//      set — written straight to dg when one set covers all rows (the few-long-rows case: no
//      partial buffer), else as [sets, D] partials.
// The second read of x (and dy) is what a row that does not fit on chip costs: the best this
// rung can do counting the minimum bytes is 2/3 of copy bandwidth (forward) and 3/5 (backward).
// The apply kernel walks the chunks in reverse so that what kernel 1 read last is still in L2.
// Adds over v03: any D, and a full grid for few long rows.
// Any alignment: operands or row strides that are not 16-byte aligned take a second
// instantiation of every kernel (kAny) in which each 16-byte access becomes load_vec_any /
// store_vec_any — one 16-byte access where the address allows it, else the widest it allows
// (8-, 4- or 2-byte pieces), a branch uniform across a warp walking one row. The element
// indices stay the same for every operand, which the column-wise dg sums need; peeling each row
// at its own phase would break them. Cost: 2-8 memory instructions per vector of a misaligned
// operand (not yet measured). Needs: nothing beyond the op contract.
// Run:   hk bench rmsnorm --variant v04_split_row --shape 4x67108864
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "common/vec.cuh"
#include "rmsnorm/rmsnorm_op.hpp"

namespace hk::rmsnorm_v04_split_row {
namespace {

constexpr int kThreads = 256;
constexpr int kGroupRows = 4;  // rows of a partial / scale item: g is loaded once for all of them
// Rows whose x and dy vectors are in flight in the backward apply: 2 for 16-bit types keeps
// the kernel at 64 registers (4 blocks per SM; 4 rows took 98-126), 4 for f32 (80).
template <class T>
constexpr int kRowUnroll = sizeof(T) == 2 ? 2 : 4;
// Column vectors in flight per thread, each with the group's 4 x vectors (and dy and g
// backward): 8 x 16 bytes forward, 9 backward.
template <bool kBwd>
constexpr int kUnroll = kBwd ? 1 : 2;

// Partial sum terms of one column vector v of rows r0 .. r0 + kGroupRows (x^2, or g*dy*x).
// kWhole: v lies inside the row (16-byte loads); else element loads, zero-filled.
template <class T, bool kBwd, bool kWhole, bool kAny>
__device__ __forceinline__ void partial_terms(const T* __restrict__ x, const T* __restrict__ g,
                                              const T* __restrict__ dy, int64_t v, int64_t r0, int64_t rows,
                                              int64_t dim, int64_t ldx, int64_t ldg, float (&acc)[kGroupRows]) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  // Plain loads (load_keep): the apply kernel re-reads these chunks and should find the last
  // ones in L2.
  auto load = [&](const T* row) {
    return kWhole ? load_keep_at<kAny, T, kV>(row + v * kV) : load_row_vec<T, kV>(row, v * kV, dim);
  };
  V xv[kGroupRows], dv[kBwd ? kGroupRows : 1], gv;
  if constexpr (kBwd) gv = load(g);
#pragma unroll
  for (int i = 0; i < kGroupRows; ++i)
    if (r0 + i < rows) {
      xv[i] = load(x + (r0 + i) * ldx);
      if constexpr (kBwd) dv[i] = load(dy + (r0 + i) * ldg);
    }
#pragma unroll
  for (int i = 0; i < kGroupRows; ++i)
    if (r0 + i < rows) {
      float xf[kV], df[kV], gf[kV];
      widen(xv[i], xf);
      if constexpr (kBwd) {
        widen(dv[i], df);
        widen(gv, gf);
      }
#pragma unroll
      for (int k = 0; k < kV; ++k) acc[i] += kBwd ? gf[k] * df[k] * xf[k] : xf[k] * xf[k];
    }
}

// Items (s, q), chunk-major: chunk s (vectors [s * chunk, min(nvec, (s + 1) * chunk))) of rows
// q * kGroupRows .. + kGroupRows. Each thread issues all its loads for kUnroll column vectors
// (x, and dy and g backward) before the first use; g's vector is shared by the group's rows.
// The whole vectors take unguarded 16-byte loads; a row's partial last vector (D % 8 != 0)
// is thread 0's, element by element. NOTE: one row per item with g loaded after x (the previous
// form) measured 28% of copy at 4 x 2^26 bf16 backward on the H200 (g, 128 MB, fetched per row,
// each load a round trip); guarded element fallbacks inside the unrolled loop took ptxas to 191
// registers (one block per SM).
template <class T, bool kBwd, bool kAny>
__global__ void __launch_bounds__(kThreads) rmsnorm_v04_partial_kernel(const T* __restrict__ x, const T* __restrict__ g,
                                                                       const T* __restrict__ dy,
                                                                       float* __restrict__ part, int64_t rows,
                                                                       int64_t dim, int64_t ldx, int64_t ldg,
                                                                       int64_t S, int64_t chunk) {
  constexpr int kV = kVec16<T>;
  constexpr int kU = kUnroll<kBwd>;
  const int64_t nvec = (dim + kV - 1) / kV, whole = dim / kV;
  const int64_t groups = (rows + kGroupRows - 1) / kGroupRows;
  for (int64_t item = blockIdx.x; item < groups * S; item += gridDim.x) {
    const int64_t q = item % groups, s = item / groups, r0 = q * kGroupRows;
    const int64_t end = min(nvec, (s + 1) * chunk), end_whole = min(end, whole);
    float acc[kGroupRows] = {};
    for (int64_t v0 = s * chunk + threadIdx.x; v0 < end_whole; v0 += kThreads * kU) {
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (v0 + u * kThreads < end_whole)
          partial_terms<T, kBwd, true, kAny>(x, g, dy, v0 + u * kThreads, r0, rows, dim, ldx, ldg, acc);
    }
    if (end > end_whole && threadIdx.x == 0)
      partial_terms<T, kBwd, false, kAny>(x, g, dy, whole, r0, rows, dim, ldx, ldg, acc);
#pragma unroll
    for (int i = 0; i < kGroupRows; ++i) {
      const float sum = block_reduce<kThreads>(acc[i], SumOp{});
      if (threadIdx.x == 0 && r0 + i < rows) part[(r0 + i) * S + s] = sum;
    }
  }
}

// out[r] = rstd (forward) or rstd^3 * S / D (backward), from the row's S partials: a warp per
// row, lane l adding partials l, l + 32, ... in order, then a shuffle tree (deterministic).
// NOTE: one thread per row (the previous form) summed 4 x 2^26's ~528 partials per row as a
// serial chain of L2 loads on 4 threads of the whole GPU (rmsnorm at 4 x 2^26 measured 34% of
// copy against a 67% bound, H200, 2026-11-29; this kernel's share was not measured).
template <bool kBwd>
__global__ void __launch_bounds__(kThreads) rmsnorm_v04_finalize_kernel(const float* __restrict__ part, int64_t rows,
                                                                        int64_t S, int64_t dim, float eps,
                                                                        const float* __restrict__ rstd_in,
                                                                        float* __restrict__ out) {
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x % 32;
  for (int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * kWarps) {
    float acc = 0.f;
    for (int64_t s = lane; s < S; s += 32) acc += part[r * S + s];
    acc = warp_reduce(acc, SumOp{});
    if (lane != 0) continue;
    if constexpr (kBwd) {
      const float rs = rstd_in[r];
      out[r] = rs * rs * rs * acc / float(dim);
    } else {
      out[r] = rsqrtf(acc / float(dim) + eps);
    }
  }
}

// y for column vector v of rows r0 .. r0 + kGroupRows; kWhole as in partial_terms.
template <class T, bool kWhole, bool kAny>
__device__ __forceinline__ void scale_vector(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ y,
                                             const float (&rs)[kGroupRows], int64_t v, int64_t r0, int64_t rows,
                                             int64_t dim, int64_t ldx, int64_t ldy) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const V gv = kWhole ? load_keep_at<kAny, T, kV>(g + v * kV) : load_row_vec<T, kV>(g, v * kV, dim);
  V xv[kGroupRows];
#pragma unroll
  for (int i = 0; i < kGroupRows; ++i)
    if (r0 + i < rows)
      xv[i] = kWhole ? load_stream_at<kAny, T, kV>(x + (r0 + i) * ldx + v * kV)
                     : load_row_vec<T, kV>(x + (r0 + i) * ldx, v * kV, dim);
#pragma unroll
  for (int i = 0; i < kGroupRows; ++i) {
    if (r0 + i >= rows) continue;
    float xf[kV], gf[kV];
    widen(xv[i], xf);
    widen(gv, gf);
    V o;
#pragma unroll
    for (int k = 0; k < kV; ++k) o.v[k] = from_f32<T>(xf[k] * rs[i] * gf[k]);
    if constexpr (kWhole) store_stream_at<kAny, T, kV>(y + (r0 + i) * ldy + v * kV, o);
    else store_row_vec<T, kV>(y + (r0 + i) * ldy, v * kV, dim, o);
  }
}

// The partial kernel's items in reverse (what it read last is still in L2): chunk s of the
// group's rows, g loaded once per column vector for all of them.
template <class T, bool kAny>
__global__ void __launch_bounds__(kThreads) rmsnorm_v04_scale_kernel(const T* __restrict__ x, const T* __restrict__ g,
                                                                     const float* __restrict__ rstd,
                                                                     T* __restrict__ y, int64_t rows, int64_t dim,
                                                                     int64_t ldx, int64_t ldy, int64_t S,
                                                                     int64_t chunk) {
  constexpr int kV = kVec16<T>;
  constexpr int kU = kUnroll<false>;
  const int64_t nvec = (dim + kV - 1) / kV, whole = dim / kV;
  const int64_t groups = (rows + kGroupRows - 1) / kGroupRows;
  for (int64_t b = blockIdx.x; b < groups * S; b += gridDim.x) {
    const int64_t item = groups * S - 1 - b;
    const int64_t q = item % groups, s = item / groups, r0 = q * kGroupRows;
    const int64_t end = min(nvec, (s + 1) * chunk), end_whole = min(end, whole);
    float rs[kGroupRows];
#pragma unroll
    for (int i = 0; i < kGroupRows; ++i) rs[i] = r0 + i < rows ? rstd[r0 + i] : 0.f;
    for (int64_t v0 = s * chunk + threadIdx.x; v0 < end_whole; v0 += kThreads * kU) {
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (v0 + u * kThreads < end_whole)
          scale_vector<T, true, kAny>(x, g, y, rs, v0 + u * kThreads, r0, rows, dim, ldx, ldy);
    }
    if (end > end_whole && threadIdx.x == 0) scale_vector<T, false, kAny>(x, g, y, rs, whole, r0, rows, dim, ldx, ldy);
  }
}

// Rows q, q + R, q + 2R, ... of one column vector (elements col ..): dx, and dg's f32 sums in
// acc. kWhole: the vector lies inside D, so kRowUnroll rows' 16-byte loads go out unguarded
// before the first use; otherwise (the row's one partial vector) one row at a time, element by
// element. NOTE: with the guarded element fallback inside the unrolled loop ptxas took the bf16
// kernel to 126 registers (2 blocks per SM; 4 x 2^26 bf16 backward measured 28% of copy on the
// H200 against 56% in f32, 71 registers).
template <class T, bool kWhole, bool kAny>
__device__ __forceinline__ void dx_column(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dx,
                                          const Vec<T, kVec16<T>>& w, const float* __restrict__ rstd,
                                          const float* __restrict__ coef, float (&acc)[kVec16<T>], int64_t col,
                                          int64_t q, int64_t rows, int64_t dim, int64_t ldx, int64_t ldg,
                                          int64_t ldo, int64_t R) {
  constexpr int kV = kVec16<T>;
  constexpr int kU = kWhole ? kRowUnroll<T> : 1;
  using V = Vec<T, kV>;
  for (int64_t r0 = q; r0 < rows; r0 += R * kU) {
    V xv[kU], gv[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t r = r0 + u * R;
      if (r < rows) {
        xv[u] = kWhole ? load_stream_at<kAny, T, kV>(x + r * ldx + col) : load_row_vec<T, kV>(x + r * ldx, col, dim);
        gv[u] = kWhole ? load_stream_at<kAny, T, kV>(dy + r * ldg + col) : load_row_vec<T, kV>(dy + r * ldg, col, dim);
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t r = r0 + u * R;
      if (r >= rows) continue;
      const float rs = rstd[r], cr = coef[r];
      float xf[kV], gf[kV], wf[kV];
      widen(xv[u], xf);
      widen(gv[u], gf);
      widen(w, wf);
      V o;
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        o.v[k] = from_f32<T>(rs * wf[k] * gf[k] - xf[k] * cr);
        acc[k] += gf[k] * xf[k] * rs;
      }
      if constexpr (kWhole) store_stream_at<kAny, T, kV>(dx + r * ldo + col, o);
      else store_row_vec<T, kV>(dx + r * ldo, col, dim, o);
    }
  }
}

// Item (c, q): column tile c (one vector per thread) of rows q, q + R, q + 2R, ...
template <class T, bool kAny>
__global__ void __launch_bounds__(kThreads) rmsnorm_v04_dx_kernel(const T* __restrict__ x, const T* __restrict__ g,
                                                                  const float* __restrict__ rstd,
                                                                  const float* __restrict__ coef,
                                                                  const T* __restrict__ dy, T* __restrict__ dx,
                                                                  T* __restrict__ dg, float* __restrict__ part,
                                                                  int64_t rows, int64_t dim, int64_t ldx,
                                                                  int64_t ldg, int64_t ldo, int64_t C, int64_t R) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  for (int64_t b = blockIdx.x; b < C * R; b += gridDim.x) {
    const int64_t item = C * R - 1 - b;
    const int64_t q = item / C, c = item - q * C;
    const int64_t col = (c * kThreads + threadIdx.x) * kV;
    if (col >= dim) continue;
    const V w = col + kV <= dim ? load_keep_at<kAny, T, kV>(g + col) : load_row_vec<T, kV, true>(g, col, dim);
    float acc[kV] = {};
    if (col + kV <= dim) dx_column<T, true, kAny>(x, dy, dx, w, rstd, coef, acc, col, q, rows, dim, ldx, ldg, ldo, R);
    else dx_column<T, false, kAny>(x, dy, dx, w, rstd, coef, acc, col, q, rows, dim, ldx, ldg, ldo, R);
    store_column_sums<T>(acc, col, dim, q, R, dg, part);
  }
}

template <class T, bool kAny>
void run(const RmsNormArgs& a, cudaStream_t s) {
  constexpr int kV = kVec16<T>;
  const T* x = static_cast<const T*>(a.x);
  const T* g = static_cast<const T*>(a.g);
  const T* dy = static_cast<const T*>(a.dy);
  const int64_t nvec = ceil_div(a.dim, kV);
  // Blocks to aim for: two waves of the backward partial kernel's resident blocks (the largest
  // register footprint of the v04 kernels; the others fit at least as many).
  static const int64_t target = 2 * int64_t(resident_grid(rmsnorm_v04_partial_kernel<T, true, kAny>, kThreads));
  // Split rows into S chunks so (row groups) * S reaches the target; a chunk is at least one
  // pass of the block (kThreads vectors).
  auto partial = a.backward ? rmsnorm_v04_partial_kernel<T, true, kAny> : rmsnorm_v04_partial_kernel<T, false, kAny>;
  const int64_t groups = ceil_div(a.rows, kGroupRows);
  const int64_t want = ceil_div(target, groups);
  int64_t S = std::max<int64_t>(1, std::min<int64_t>(want, ceil_div(nvec, kThreads)));
  const int64_t chunk = ceil_div(nvec, S);
  S = ceil_div(nvec, chunk);
  StreamScratch part(a.rows * S * 4, s);
  partial<<<grid_for(groups * S), kThreads, 0, s>>>(x, g, dy, part.as<float>(), a.rows, a.dim, a.ld_x, a.ld_dy, S,
                                                    chunk);
  HK_CHECK_LAUNCH("rmsnorm_v04_partial_kernel");
  const int fin_blocks = grid_for(ceil_div(a.rows, kThreads / 32));
  if (!a.backward) {
    rmsnorm_v04_finalize_kernel<false><<<fin_blocks, kThreads, 0, s>>>(part.as<float>(), a.rows, S, a.dim, a.eps,
                                                                       nullptr, a.rstd_out);
    HK_CHECK_LAUNCH("rmsnorm_v04_finalize_kernel");
    rmsnorm_v04_scale_kernel<T, kAny><<<grid_for(groups * S), kThreads, 0, s>>>(x, g, a.rstd_out, static_cast<T*>(a.out),
                                                                          a.rows, a.dim, a.ld_x, a.ld_out, S, chunk);
    HK_CHECK_LAUNCH("rmsnorm_v04_scale_kernel");
    return;
  }
  StreamScratch coef(a.rows * 4, s);
  rmsnorm_v04_finalize_kernel<true><<<fin_blocks, kThreads, 0, s>>>(part.as<float>(), a.rows, S, a.dim, a.eps,
                                                                    a.rstd_in, coef.as<float>());
  HK_CHECK_LAUNCH("rmsnorm_v04_finalize_kernel");
  const int64_t C = ceil_div(nvec, kThreads);
  const int64_t R = std::max<int64_t>(1, std::min<int64_t>(a.rows, ceil_div(target, C)));
  StreamScratch dgpart(R > 1 ? R * a.dim * 4 : 0, s);
  rmsnorm_v04_dx_kernel<T, kAny><<<grid_for(C * R), kThreads, 0, s>>>(x, g, a.rstd_in, coef.as<float>(), dy,
                                                                static_cast<T*>(a.out), static_cast<T*>(a.dg),
                                                                dgpart.as<float>(), a.rows, a.dim, a.ld_x, a.ld_dy,
                                                                a.ld_out, C, R);
  HK_CHECK_LAUNCH("rmsnorm_v04_dx_kernel");
  if (R > 1) sum_partials(dgpart.as<float>(), R, a.dim, static_cast<T*>(a.dg), s);
}

void rmsnorm_v04_launch(const RmsNormArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "rmsnorm/v04_split_row", [&](auto t) {
    using T = decltype(t);
    // Every row start of every [rows, D] operand, and g, 16-byte aligned: the 16-byte kernels
    // (rstd and dg are accessed one element at a time).
    auto ok = [&](const void* p, int64_t ld) {
      return p == nullptr || (aligned16(static_cast<const T*>(p)) && (a.rows <= 1 || (ld * int64_t(sizeof(T))) % 16 == 0));
    };
    const bool aligned = ok(a.x, a.ld_x) && ok(a.g, 0) && ok(a.out, a.ld_out) && (!a.backward || ok(a.dy, a.ld_dy));
    if (aligned) run<T, false>(a, stream);
    else run<T, true>(a, stream);
  });
}

}  // namespace

HK_REGISTER_VARIANT(RmsNormProblem, RmsNormArgs, "rmsnorm", "v04_split_row",
                    "rows split into chunks across the grid (partial sums, finalize, apply): any D, few long rows, any alignment",
                    90, kFlagProduction, nullptr, rmsnorm_v04_launch);

}  // namespace hk::rmsnorm_v04_split_row
