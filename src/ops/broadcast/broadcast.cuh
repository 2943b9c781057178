// broadcast/broadcast.cuh — device bodies shared by the broadcast rungs. Each rung file wraps
// them in its own greppable __global__ (outer_add_v02_kernel, ...); the bodies are templated on
// the kind so outer_add, outer_mul_relu and row_scale_relu share one tested loop per rung.
#pragma once

#include <cstdint>

#include "broadcast/broadcast_op.hpp"
#include "common/rowwise.cuh"
#include "common/vec.cuh"

namespace hk::bcast {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // 16-byte vectors in flight per thread

// relu that keeps NaN, as torch.relu does (fmaxf(NaN, 0) would return 0).
__device__ __forceinline__ float relu_nan(float v) { return v > 0.f || v != v ? v : 0.f; }

// z element from a (x[i] for the outer ops, x[j,i] for row_scale_relu) and b = y[j].
template <BroadcastKind K>
__device__ __forceinline__ float combine(float a, float b) {
  if constexpr (K == BroadcastKind::kOuterAdd) return a + b;
  else return relu_nan(b * a);
}

// row_scale_relu's backward for one pair of 16-byte vectors of x and dz: returns dx =
// 1(x y > 0) y dz and adds this pair's share of dy[j] = sum 1(x y > 0) x dz to acc (zero-filled
// tail lanes are off).
template <class T, int kV>
__device__ __forceinline__ Vec<T, kV> relu_scale_grad(const Vec<T, kV>& xv, const Vec<T, kV>& gv, float yv,
                                                      float& acc) {
  Vec<T, kV> o;
#pragma unroll
  for (int k = 0; k < kV; ++k) {
    const float xf = to_f32(xv.v[k]), gf = to_f32(gv.v[k]);
    const bool on = xf * yv > 0.f;
    o.v[k] = from_f32<T>(on ? yv * gf : 0.f);
    acc += on ? xf * gf : 0.f;
  }
  return o;
}

// One thread per element of z [n1, n0]; 64-bit flat index split into (j, i).
template <class T, BroadcastKind K>
__device__ __forceinline__ void naive_rows(const T* x, const T* y, T* z, int64_t n1, int64_t n0, int64_t ldx,
                                           int64_t ldz) {
  const int64_t n = n1 * n0;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e / n0, i = e - j * n0;
    const T a = K == BroadcastKind::kRowScaleRelu ? x[j * ldx + i] : x[i];
    z[j * ldz + i] = from_f32<T>(combine<K>(to_f32(a), to_f32(y[j])));
  }
}

// Item (j, s): vectors [s * kChunk, (s + 1) * kChunk) of row j (kChunk = kThr x kUnr), kUnr
// 16-byte vectors per thread all loaded before the first store. The outer ops' x is reused by every row: it is read
// with the keep policy (L1/L2 hits); row_scale_relu's x row is streamed.
// A chunk wholly inside the row (every item at D % (kChunk * kV) == 0, e.g. 8192) takes the
// unguarded path: kUnr loads at fixed offsets from one pointer. The row's last, partial chunk
// takes a one-vector-at-a-time loop. NOTE: with the guarded element fallback inside the
// unrolled loop (the previous form) ptxas held the fallback's scalars for every u: 64 registers
// at bf16, 4 blocks per SM; the split form needs far fewer, so more blocks keep loads in flight.
template <class T, BroadcastKind K, int kThr = kThreads, int kUnr = kUnroll>
__device__ __forceinline__ void vector_rows(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ z,
                                            int64_t n1, int64_t n0, int64_t ldx, int64_t ldz) {
  constexpr int kV = kVec16<T>;
  constexpr int64_t kChunk = int64_t(kThr) * kUnr;
  constexpr bool kRow = K == BroadcastKind::kRowScaleRelu;
  using V = Vec<T, kV>;
  const int64_t nvec = (n0 + kV - 1) / kV;
  const int64_t S = (nvec + kChunk - 1) / kChunk;
  for (int64_t item = blockIdx.x; item < n1 * S; item += gridDim.x) {
    // row_scale_relu: row-major items. Outer ops: chunk-major, so the blocks running at once
    // share x's chunk through L2 (at 4 x 2^26 x is 128-256 MB: row-major re-read it from HBM for
    // every row, 58% of copy measured on the H200).
    const int64_t j = kRow ? item / S : item % n1, s = kRow ? item - j * S : item / n1;
    const float b = to_f32(y[j]);
    const T* xr = kRow ? x + j * ldx : x;
    T* zr = z + j * ldz;
    if ((s + 1) * kChunk * kV <= n0) {
      const int64_t v0 = s * kChunk + threadIdx.x;
      V av[kUnr];
#pragma unroll
      for (int u = 0; u < kUnr; ++u) {
        const T* p = xr + (v0 + u * kThr) * kV;
        av[u] = kRow ? load_stream<T, kV>(p) : load_keep<T, kV>(p);
      }
#pragma unroll
      for (int u = 0; u < kUnr; ++u) {
        V o;
#pragma unroll
        for (int k = 0; k < kV; ++k) o.v[k] = from_f32<T>(combine<K>(to_f32(av[u].v[k]), b));
        store_stream<T, kV>(zr + (v0 + u * kThr) * kV, o);
      }
    } else {
      const int64_t end = min(nvec, (s + 1) * kChunk);
      for (int64_t v = s * kChunk + threadIdx.x; v < end; v += kThr) {
        const V a = kRow ? load_row_vec<T, kV>(xr, v * kV, n0) : load_row_vec<T, kV, true>(xr, v * kV, n0);
        V o;
#pragma unroll
        for (int k = 0; k < kV; ++k) o.v[k] = from_f32<T>(combine<K>(to_f32(a.v[k]), b));
        store_row_vec<T, kV>(zr, v * kV, n0, o);
      }
    }
  }
}

// Blocks for vector_rows: one per item up to `resident` (resident_grid of the calling kernel);
// the grid-stride loop covers the rest. A resident grid, not one short-lived block per item:
// 16384 one-shot blocks each with 16 KiB in flight only between their start and their stores
// kept an SM well under the bytes in flight that the copy rate needs (81.6-88% of copy).
inline int vector_rows_grid(int64_t n1, int64_t n0, int vec, int resident) {
  const int64_t nvec = (n0 + vec - 1) / vec, chunk = int64_t(kThreads) * kUnroll;
  return static_cast<int>(std::min<int64_t>(n1 * ((nvec + chunk - 1) / chunk), resident));
}

inline int naive_grid(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(1) << 30));
}

// Vectorized rungs need 16-byte aligned row starts.
inline std::string vector_supports(const BroadcastProblem& p) {
  if (p.row_align() < 16)
    return "needs 16-byte aligned operands (and row strides) for 16-byte access, got " +
           std::to_string(p.row_align()) + "-byte alignment";
  return "";
}

}  // namespace hk::bcast
