// rope/v02_vectorized.cu
//
// Rung 2: one thread per 16-byte slot of a (b, s, h) row — a slot of the rotated part rotates
// kV pairs (16 bytes of x[i..], 16 bytes of x[i + R/2..], their cos/sin from the table), a slot
// of the passed-through part copies 16 bytes — in 2-D blocks (threadIdx.x across a row's slots,
// threadIdx.y across rows), a block per row group up to 65535 of them, a row loop beyond.
// Adds over v01: each input element is read once (v01 reads the rotated ones twice), 8x (16-bit)
// or 4x (f32) fewer memory instructions, no per-element index division (the (b, s, h)
// coordinates once per row), the tables as 16-byte read-only-cache loads (they are reused by
// every b and h of a position, so they stay in L1/L2).
// Any alignment: element indices are the same for every operand (the pair partner is R/2
// elements away), so instead of a peel the whole row moves with the widest accesses its
// address allows (a kAny instantiation, load_vec_any / store_vec_any) whenever a row start,
// R/2, or a table is off a 16-byte boundary; scalar tails cover R/2 and D - R that are not
// whole vectors.
// Needs: nothing beyond the op contract (rows beyond 65535 row blocks loop).
// Run:   hk bench rope --variant v02_vectorized --shape 8x2048x16x128
#include <algorithm>

#include "common/launch.cuh"
#include "common/vec.cuh"
#include "rope/rope_op.hpp"

namespace hk::rope_v02_vectorized {
namespace {

constexpr int kThreads = 256;

struct RopeV02Dims {
  int64_t rows, seq, heads, dim, half;
  int64_t sxb, sxs, sxh, syb, sys, syh;
  float sign;
  int pair_vecs, pair_tail, pass_vecs, slots;  // slots = pair_vecs + pair_tail + pass_vecs + pass_tail
};

// kV consecutive f32 table entries: 16-byte read-only loads when aligned, else one at a time.
template <bool kAny, int kV>
__device__ __forceinline__ void rope_v02_table(const float* __restrict__ p, float (&v)[kV]) {
  if constexpr (kAny) {
#pragma unroll
    for (int k = 0; k < kV; ++k) v[k] = __ldg(p + k);
  } else {
#pragma unroll
    for (int k = 0; k < kV; k += 4) {
      const float4 q = __ldg(reinterpret_cast<const float4*>(p + k));
      v[k] = q.x;
      v[k + 1] = q.y;
      v[k + 2] = q.z;
      v[k + 3] = q.w;
    }
  }
}

template <class T, bool kAny>
__global__ void __launch_bounds__(kThreads) rope_v02_kernel(const T* __restrict__ x, const float* __restrict__ cos,
                                                            const float* __restrict__ sin, T* __restrict__ y,
                                                            RopeV02Dims d) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const int slot = blockIdx.x * blockDim.x + threadIdx.x;
  if (slot >= d.slots) return;
  for (int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; r < d.rows; r += int64_t(gridDim.y) * blockDim.y) {
    const int64_t h = r % d.heads, t = r / d.heads, s = t % d.seq, b = t / d.seq;
    const T* xr = x + b * d.sxb + s * d.sxs + h * d.sxh;
    T* yr = y + b * d.syb + s * d.sys + h * d.syh;
    const float* cr = cos + s * d.half;
    const float* sr = sin + s * d.half;
    if (slot < d.pair_vecs) {
      const int64_t i = int64_t(slot) * kV;
      const V a = load_stream_at<kAny, T, kV>(xr + i);
      const V bv = load_stream_at<kAny, T, kV>(xr + d.half + i);
      float cv[kV], sv[kV];
      rope_v02_table<kAny, kV>(cr + i, cv);
      rope_v02_table<kAny, kV>(sr + i, sv);
      V ya, yb;
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        const float x1 = to_f32(a.v[k]), x2 = to_f32(bv.v[k]), n = d.sign * sv[k];
        ya.v[k] = from_f32<T>(x1 * cv[k] - x2 * n);
        yb.v[k] = from_f32<T>(x2 * cv[k] + x1 * n);
      }
      store_stream_at<kAny, T, kV>(yr + i, ya);
      store_stream_at<kAny, T, kV>(yr + d.half + i, yb);
    } else if (slot < d.pair_vecs + d.pair_tail) {
      for (int64_t i = int64_t(d.pair_vecs) * kV; i < d.half; ++i) {
        const float x1 = to_f32(xr[i]), x2 = to_f32(xr[i + d.half]), c = cr[i], n = d.sign * sr[i];
        yr[i] = from_f32<T>(x1 * c - x2 * n);
        yr[i + d.half] = from_f32<T>(x2 * c + x1 * n);
      }
    } else {
      const int q = slot - d.pair_vecs - d.pair_tail;
      const int64_t base = 2 * d.half;
      if (q < d.pass_vecs) {
        const int64_t i = base + int64_t(q) * kV;
        store_stream_at<kAny, T, kV>(yr + i, load_stream_at<kAny, T, kV>(xr + i));
      } else {
        for (int64_t i = base + int64_t(d.pass_vecs) * kV; i < d.dim; ++i) yr[i] = xr[i];
      }
    }
  }
}

// Whether a [B, S, H, D] operand's rows all start on 16-byte boundaries (strides of extent-1
// dims are never stepped over, so they do not count).
bool rows_aligned16(const void* base, const std::array<int64_t, 3>& st, const RopeArgs& a, int64_t esize) {
  if (!aligned16(static_cast<const char*>(base))) return false;
  const int64_t ext[3] = {a.batch, a.seq, a.heads};
  for (int k = 0; k < 3; ++k)
    if (ext[k] > 1 && (st[k] * esize) % 16 != 0) return false;
  return true;
}

template <class T, bool kAny>
void launch_typed(const RopeArgs& a, RopeV02Dims d, cudaStream_t stream) {
  auto kernel = rope_v02_kernel<T, kAny>;
  // A block per (slot range, row group) up to grid.y's 65535 row groups, the row loop beyond:
  // short-lived blocks, as swiglu v02 (a grid capped at the resident block count walks rows with
  // one vector in flight per thread between its stores).
  int tx = 1;
  while (tx < kThreads && tx < d.slots) tx *= 2;
  const int ty = kThreads / tx;
  const int64_t gx = ceil_div(d.slots, tx);
  const int64_t gy = std::max<int64_t>(1, std::min<int64_t>(ceil_div(d.rows, ty), 65535));
  kernel<<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), dim3(tx, ty), 0, stream>>>(
      static_cast<const T*>(a.x), a.cos, a.sin, static_cast<T*>(a.y), d);
  HK_CHECK_LAUNCH("rope_v02_kernel");
}

void rope_v02_launch(const RopeArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "rope/v02_vectorized", [&](auto t) {
    using T = decltype(t);
    constexpr int kV = kVec16<T>;
    const int64_t half = a.rotary / 2, pass = a.dim - a.rotary;
    RopeV02Dims d{a.batch * a.seq * a.heads, a.seq, a.heads, a.dim, half,
                  a.sx[0], a.sx[1], a.sx[2], a.sy[0], a.sy[1], a.sy[2], a.sin_sign,
                  static_cast<int>(half / kV), half % kV != 0 ? 1 : 0, static_cast<int>(pass / kV), 0};
    d.slots = d.pair_vecs + d.pair_tail + d.pass_vecs + (pass % kV != 0 ? 1 : 0);
    const int64_t es = sizeof(T);
    const bool aligned = (half * es) % 16 == 0 && rows_aligned16(a.x, a.sx, a, es) &&
                         rows_aligned16(a.y, a.sy, a, es) && aligned16(a.cos) && aligned16(a.sin);
    if (aligned) launch_typed<T, false>(a, d, stream);
    else launch_typed<T, true>(a, d, stream);
  });
}

std::string rope_v02_supports(const RopeProblem& p) {
  if (p.dim / 2 > (int64_t(1) << 30)) return "D past 2^31 elements: slot indices are 32-bit";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(RopeProblem, RopeArgs, "rope", "v02_vectorized",
                    "16-byte slots of (b, s, h) rows in 2-D blocks, each input read once, tables through the "
                    "read-only cache; any alignment and strides",
                    70, kFlagProduction, rope_v02_supports, rope_v02_launch);

}  // namespace hk::rope_v02_vectorized
