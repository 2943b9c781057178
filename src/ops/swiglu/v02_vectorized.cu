// swiglu/v02_vectorized.cu
//
// Rung 2: 16-byte accesses (8 bf16/f16 or 4 f32), rows walked by a 2-D block — threadIdx.x
// across a row's 16-byte slots, threadIdx.y across rows — so short rows (F = 96) fill a block as
// well as long ones, with no per-element index division.
// Adds over v01: 8x (16-bit) or 4x (f32) fewer memory instructions, each thread's loads issued
// before their first use, and 2-D blocks over (row slots, rows) instead of one thread per element
// (a block per slot range and row group, up to 65535 row groups; a row loop beyond).
// Any alignment: each row is peeled at the output's 16-byte phase (scalar head up to the first
// 16-byte boundary, 16-byte body, scalar tail; the row's first and last slots). Gate, up,
// dy (and the backward's d-up half of dx) move as 16-byte accesses when every row of them sits
// at the output row's phase — always for cudaMalloc'd tensors with F * sizeof(T) % 16 == 0 —
// else with the widest accesses their phase allows (a kAny instantiation).
// Needs: nothing beyond the op contract (rows up to 2^16 - 1 blocks of rows, then a row loop).
// Run:   hk bench swiglu --variant v02_vectorized --shape 16384x8192
#include <algorithm>

#include "common/launch.cuh"
#include "common/vec.cuh"
#include "swiglu/swiglu_math.cuh"
#include "swiglu/swiglu_op.hpp"

namespace hk::swiglu_v02_vectorized {
namespace {

constexpr int kThreads = 256;

template <class T, bool kBackward>
__device__ __forceinline__ void swiglu_v02_scalar(const T* g, const T* u, const T* dy, T* o, int64_t F,
                                                  int64_t j) {
  if constexpr (kBackward) {
    float dg, du;
    swiglu_math::backward(to_f32(g[j]), to_f32(u[j]), to_f32(dy[j]), dg, du);
    o[j] = from_f32<T>(dg);
    o[F + j] = from_f32<T>(du);
  } else {
    o[j] = from_f32<T>(swiglu_math::forward(to_f32(g[j]), to_f32(u[j])));
  }
}

// Row r: gate g = x + r ld_x, up u = g + F, output o = out + r ld_out (backward: d gate at o,
// d up at o + F), dy = dy + r ld_dy. `slots` = max(1, F / kV), the most 16-byte vectors a row
// can hold: slot s < nvec moves vector s; slot 0 also does the head, the last slot the tail (a
// row whose head is not empty has one vector fewer: its last slot does only the tail). Rows of
// whole aligned vectors thus fill every thread of a block (F = 8192 bf16: 4 blocks of 256).
template <class T, bool kBackward, bool kAny>
__global__ void __launch_bounds__(kThreads) swiglu_v02_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                                              T* __restrict__ out, int64_t rows, int64_t F,
                                                              int64_t ld_x, int64_t ld_dy, int64_t ld_out,
                                                              int64_t slots) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const int64_t slot0 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t slot_step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; r < rows; r += int64_t(gridDim.y) * blockDim.y) {
    const T* g = x + r * ld_x;
    const T* u = g + F;
    const T* d = kBackward ? dy + r * ld_dy : nullptr;
    T* o = out + r * ld_out;
    const int64_t head = head_to_16(o, F);
    const int64_t nvec = (F - head) / kV;
    for (int64_t s = slot0; s < slots; s += slot_step) {
      if (s == 0)
        for (int64_t j = 0; j < head; ++j) swiglu_v02_scalar<T, kBackward>(g, u, d, o, F, j);
      if (s == slots - 1)
        for (int64_t j = head + nvec * kV; j < F; ++j) swiglu_v02_scalar<T, kBackward>(g, u, d, o, F, j);
      if (s < nvec) {
        const int64_t j = head + s * kV;
        const V gv = load_stream_at<kAny, T, kV>(g + j);
        const V uv = load_stream_at<kAny, T, kV>(u + j);
        if constexpr (kBackward) {
          const V dv = load_stream_at<kAny, T, kV>(d + j);
          V dgv, duv;
#pragma unroll
          for (int k = 0; k < kV; ++k) {
            float dg, du;
            swiglu_math::backward(to_f32(gv.v[k]), to_f32(uv.v[k]), to_f32(dv.v[k]), dg, du);
            dgv.v[k] = from_f32<T>(dg);
            duv.v[k] = from_f32<T>(du);
          }
          store_stream<T, kV>(o + j, dgv);
          store_stream_at<kAny, T, kV>(o + F + j, duv);
        } else {
          V yv;
#pragma unroll
          for (int k = 0; k < kV; ++k) yv.v[k] = from_f32<T>(swiglu_math::forward(to_f32(gv.v[k]), to_f32(uv.v[k])));
          store_stream<T, kV>(o + j, yv);
        }
      }
    }
  }
}

template <class T, bool kBackward, bool kAny>
void launch_typed(const SwigluArgs& a, cudaStream_t stream) {
  auto kernel = swiglu_v02_kernel<T, kBackward, kAny>;
  // Slots per row: the most vectors a row can hold (head and tail ride on the first and last).
  // threadIdx.x spans the next power of two of that (up to a whole block), threadIdx.y the rows
  // sharing a block. A block per (slot range, row group) up to grid.y's 65535 row groups, the
  // kernel's row loop beyond: short-lived blocks, which the block scheduler refills as they
  // retire. A grid capped at the resident block count (each block then walks ~60 rows with one
  // vector of each input in flight between its stores) ran 0.89x torch.compile's swiglu at
  // 16384x8192 bf16 (H200, 2026-12-03; docs/decisions.md, memory-bound ops).
  const int64_t slots = std::max<int64_t>(1, a.dim / kVec16<T>);
  int tx = 1;
  while (tx < kThreads && tx < slots) tx *= 2;
  const int ty = kThreads / tx;
  const int64_t gx = std::min<int64_t>(ceil_div(slots, tx), int64_t(1) << 30);
  const int64_t row_blocks = ceil_div(a.rows, ty);
  const int64_t gy = std::max<int64_t>(1, std::min<int64_t>(row_blocks, 65535));
  kernel<<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), dim3(tx, ty), 0, stream>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.dy), static_cast<T*>(a.out), a.rows, a.dim, a.ld_x,
      a.ld_dy, a.ld_out, slots);
  HK_CHECK_LAUNCH("swiglu_v02_kernel");
}

// Whether operand rows (base, row stride in elements) keep the output row's 16-byte phase.
template <class T>
bool same_phase(const T* base, int64_t ld, const T* out, int64_t ld_out, int64_t rows) {
  const int64_t delta = (reinterpret_cast<intptr_t>(base) - reinterpret_cast<intptr_t>(out));
  if (delta % 16 != 0) return false;
  return rows <= 1 || ((ld - ld_out) * int64_t(sizeof(T))) % 16 == 0;
}

void swiglu_v02_launch(const SwigluArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "swiglu/v02_vectorized", [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(a.x);
    const T* dy = static_cast<const T*>(a.dy);
    const T* out = static_cast<const T*>(a.out);
    bool same = same_phase(x, a.ld_x, out, a.ld_out, a.rows) && same_phase(x + a.dim, a.ld_x, out, a.ld_out, a.rows);
    if (a.backward)
      same = same && same_phase(dy, a.ld_dy, out, a.ld_out, a.rows) &&
             same_phase(out + a.dim, a.ld_out, out, a.ld_out, a.rows);
    if (a.backward) same ? launch_typed<T, true, false>(a, stream) : launch_typed<T, true, true>(a, stream);
    else same ? launch_typed<T, false, false>(a, stream) : launch_typed<T, false, true>(a, stream);
  });
}

}  // namespace

HK_REGISTER_VARIANT(SwigluProblem, SwigluArgs, "swiglu", "v02_vectorized",
                    "16-byte accesses, 2-D blocks over (row slots, rows), rows peeled at the output's phase; any "
                    "alignment",
                    70, kFlagProduction, nullptr, swiglu_v02_launch);

}  // namespace hk::swiglu_v02_vectorized
