// rmsnorm/v04_split_row.cu
//
// Rung 4: rows too long for registers, and few rows (4 x 2^26) where one block per row would
// leave most SMs idle. Each row is split into S chunks so that rows x S fills the GPU:
//   1. partial kernel: each block sums its chunk (x^2 forward, g*dy*x backward) with 16-byte
//      loads, kUnroll in flight per thread -> part[rows, S];
//   2. finalize kernel: a warp per row sums its S partials in a fixed order -> rstd[r]
//      (forward) or the backward's coefficient rstd^3 * S / D (a [rows] f32 buffer);
//   3. apply kernel: y = x * rstd * g (forward), or dx per (column tile, row set) with dg kept in
//      f32 registers across the rows of the set — written straight to dg when one set covers all
//      rows (the few-long-rows case: no partial buffer), else as [sets, D] partials.
// The second read of x (and dy) is what a row that does not fit on chip costs: the best this
// rung can do counting the minimum bytes is 2/3 of copy bandwidth (forward) and 3/5 (backward).
// The apply kernel walks the chunks in reverse so that what kernel 1 read last is still in L2.
// Adds over v03: any D, and a full grid for few long rows.
// Needs: 16-byte aligned row starts (base and row stride).
// Run:   hk bench rmsnorm --variant v04_split_row --shape 4x67108864
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rowwise.cuh"
#include "common/vec.cuh"
#include "rmsnorm/rmsnorm_op.hpp"

namespace hk {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;     // 16-byte vectors in flight per thread in the chunk loops
constexpr int kRowUnroll = 4;  // rows whose x and dy vectors are in flight in the backward apply

// Chunk s of row r covers vectors [s * chunk, min(nvec, (s + 1) * chunk)).
template <class T, bool kBwd>
__global__ void __launch_bounds__(kThreads) rmsnorm_v04_partial_kernel(const T* __restrict__ x, const T* __restrict__ g,
                                                                       const T* __restrict__ dy,
                                                                       float* __restrict__ part, int64_t rows,
                                                                       int64_t dim, int64_t ldx, int64_t ldg,
                                                                       int64_t S, int64_t chunk) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const int64_t nvec = (dim + kV - 1) / kV;
  for (int64_t item = blockIdx.x; item < rows * S; item += gridDim.x) {
    const int64_t r = item / S, s = item - r * S;
    const int64_t end = min(nvec, (s + 1) * chunk);
    float acc = 0.f;
    for (int64_t v0 = s * chunk + threadIdx.x; v0 < end; v0 += kThreads * kUnroll) {
      V xv[kUnroll], gv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t v = v0 + u * kThreads;
        if (v < end) {
          // Plain loads: the apply kernel re-reads these chunks and should find the last ones in L2.
          xv[u] = load_row_vec<T, kV, true>(x + r * ldx, v * kV, dim);
          if constexpr (kBwd) gv[u] = load_row_vec<T, kV, true>(dy + r * ldg, v * kV, dim);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t v = v0 + u * kThreads;
        if (v >= end) continue;
        V w;
        if constexpr (kBwd) w = load_row_vec<T, kV, true>(g, v * kV, dim);
#pragma unroll
        for (int k = 0; k < kV; ++k) {
          float f = to_f32(xv[u].v[k]);
          if constexpr (kBwd) acc += to_f32(w.v[k]) * to_f32(gv[u].v[k]) * f;
          else acc += f * f;
        }
      }
    }
    acc = block_reduce<kThreads>(acc, SumOp{});
    if (threadIdx.x == 0) part[item] = acc;
  }
}

// out[r] = rstd (forward) or rstd^3 * S / D (backward), from the row's S partials: a warp per
// row, lane l adding partials l, l + 32, ... in order, then a shuffle tree (deterministic).
// NOTE: one thread per row (the previous form) summed 4 x 2^26's ~528 partials per row as a
// serial chain of L2 loads on 4 threads of the whole GPU (rmsnorm at 4 x 2^26 measured 34% of
// copy against a 67% bound, H200 session 4; this kernel's share was not measured).
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

template <class T>
__global__ void __launch_bounds__(kThreads) rmsnorm_v04_scale_kernel(const T* __restrict__ x, const T* __restrict__ g,
                                                                     const float* __restrict__ rstd,
                                                                     T* __restrict__ y, int64_t rows, int64_t dim,
                                                                     int64_t ldx, int64_t ldy, int64_t S,
                                                                     int64_t chunk) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const int64_t nvec = (dim + kV - 1) / kV;
  for (int64_t b = blockIdx.x; b < rows * S; b += gridDim.x) {
    const int64_t item = rows * S - 1 - b;  // reverse of the partial kernel's order: L2 hits first
    const int64_t r = item / S, s = item - r * S;
    const int64_t end = min(nvec, (s + 1) * chunk);
    const float rs = rstd[r];
    for (int64_t v0 = s * chunk + threadIdx.x; v0 < end; v0 += kThreads * kUnroll) {
      V xv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t v = v0 + u * kThreads;
        if (v < end) xv[u] = load_row_vec<T, kV>(x + r * ldx, v * kV, dim);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t v = v0 + u * kThreads;
        if (v >= end) continue;
        V w = load_row_vec<T, kV, true>(g, v * kV, dim), o;
#pragma unroll
        for (int k = 0; k < kV; ++k) o.v[k] = from_f32<T>(to_f32(xv[u].v[k]) * rs * to_f32(w.v[k]));
        store_row_vec<T, kV>(y + r * ldy, v * kV, dim, o);
      }
    }
  }
}

// Item (c, q): column tile c (one vector per thread) of rows q, q + R, q + 2R, ...
template <class T>
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
    const V w = load_row_vec<T, kV, true>(g, col, dim);
    float acc[kV] = {};
    for (int64_t r0 = q; r0 < rows; r0 += R * kRowUnroll) {
      V xv[kRowUnroll], gv[kRowUnroll];
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t r = r0 + u * R;
        if (r < rows) {
          xv[u] = load_row_vec<T, kV>(x + r * ldx, col, dim);
          gv[u] = load_row_vec<T, kV>(dy + r * ldg, col, dim);
        }
      }
#pragma unroll
      for (int u = 0; u < kRowUnroll; ++u) {
        const int64_t r = r0 + u * R;
        if (r >= rows) continue;
        const float rs = rstd[r], cr = coef[r];
        V o;
#pragma unroll
        for (int k = 0; k < kV; ++k) {
          float xf = to_f32(xv[u].v[k]), gf = to_f32(gv[u].v[k]);
          o.v[k] = from_f32<T>(rs * to_f32(w.v[k]) * gf - xf * cr);
          acc[k] += gf * xf * rs;
        }
        store_row_vec<T, kV>(dx + r * ldo, col, dim, o);
      }
    }
#pragma unroll
    for (int k = 0; k < kV; ++k)
      if (col + k < dim) {
        if (R == 1) dg[col + k] = from_f32<T>(acc[k]);
        else part[q * dim + col + k] = acc[k];
      }
  }
}

int grid_for(int64_t items) { return static_cast<int>(std::min<int64_t>(items, int64_t(1) << 30)); }

template <class T>
void run(const RmsNormArgs& a, cudaStream_t s) {
  constexpr int kV = kVec16<T>;
  const T* x = static_cast<const T*>(a.x);
  const T* g = static_cast<const T*>(a.g);
  const T* dy = static_cast<const T*>(a.dy);
  const int64_t nvec = ceil_div(a.dim, kV);
  // Blocks to aim for: two waves of resident blocks. Every v04 kernel is a 256-thread kernel of
  // a similar, small footprint, so one occupancy figure serves all three.
  static const int64_t target = 2 * int64_t(resident_grid(rmsnorm_v04_partial_kernel<T, true>, kThreads));
  // Split rows into S chunks so rows * S reaches the target; a chunk is at least one pass of
  // the block (kThreads vectors).
  auto partial = a.backward ? rmsnorm_v04_partial_kernel<T, true> : rmsnorm_v04_partial_kernel<T, false>;
  const int64_t want = ceil_div(target, a.rows);
  int64_t S = std::max<int64_t>(1, std::min<int64_t>(want, ceil_div(nvec, kThreads)));
  const int64_t chunk = ceil_div(nvec, S);
  S = ceil_div(nvec, chunk);
  StreamScratch part(a.rows * S * 4, s);
  partial<<<grid_for(a.rows * S), kThreads, 0, s>>>(x, g, dy, part.as<float>(), a.rows, a.dim, a.ld_x, a.ld_dy, S,
                                                    chunk);
  HK_CHECK_LAUNCH("rmsnorm_v04_partial_kernel");
  const int fin_blocks = grid_for(ceil_div(a.rows, kThreads / 32));
  if (!a.backward) {
    rmsnorm_v04_finalize_kernel<false><<<fin_blocks, kThreads, 0, s>>>(part.as<float>(), a.rows, S, a.dim, a.eps,
                                                                       nullptr, a.rstd_out);
    HK_CHECK_LAUNCH("rmsnorm_v04_finalize_kernel");
    rmsnorm_v04_scale_kernel<T><<<grid_for(a.rows * S), kThreads, 0, s>>>(x, g, a.rstd_out, static_cast<T*>(a.out),
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
  rmsnorm_v04_dx_kernel<T><<<grid_for(C * R), kThreads, 0, s>>>(x, g, a.rstd_in, coef.as<float>(), dy,
                                                                static_cast<T*>(a.out), static_cast<T*>(a.dg),
                                                                dgpart.as<float>(), a.rows, a.dim, a.ld_x, a.ld_dy,
                                                                a.ld_out, C, R);
  HK_CHECK_LAUNCH("rmsnorm_v04_dx_kernel");
  if (R > 1) sum_partials(dgpart.as<float>(), R, a.dim, static_cast<T*>(a.dg), s);
}

void rmsnorm_v04_launch(const RmsNormArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "rmsnorm/v04_split_row", [&](auto t) { run<decltype(t)>(a, stream); });
}

std::string rmsnorm_v04_supports(const RmsNormProblem& p) {
  if (p.row_align() < 16)
    return "needs 16-byte aligned row starts (base address and row stride) for 16-byte loads, got " +
           std::to_string(p.row_align()) + "-byte alignment";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(RmsNormProblem, RmsNormArgs, "rmsnorm", "v04_split_row",
                    "rows split into chunks across the grid (partial sums, finalize, apply): any D, few long rows",
                    90, kFlagNone, rmsnorm_v04_supports, rmsnorm_v04_launch);

}  // namespace hk
