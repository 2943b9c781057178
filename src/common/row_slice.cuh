// common/row_slice.cuh — a row held in registers by a block, slice by slice, for the
// pipelined row rungs (weighted_sum v03, softmax v05, rmsnorm v05).
//
// A block of kThreads owns whole rows of D elements; thread t owns the kPer 16-byte vectors
// t, t + kThreads, ... of every row, so a per-column operand (w) can stay in its registers and
// the next row's slice can be loaded while this row is reduced. Needs 16-byte aligned row
// starts and D a multiple of 16 bytes: every vector of a row is whole or wholly past D.
// NOTE: a partial last vector read element by element cost 12 registers of tail state (this
// row's, the next row's and the per-column operand's) on every thread, enough to spill at 80.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/ptx/named_barrier.cuh"
#include "common/reduce.cuh"
#include "common/row_checks.hpp"
#include "common/rowwise.cuh"
#include "common/vec.cuh"

namespace hk {

// The pipelined row rungs' launch shape and limits (kThreads, kMaxPer, what they can run and
// which shapes they suit) are host-side, in common/row_checks.hpp; the device-side pieces here.
namespace pipelined_rows {

// Blocks per SM the register budget is held to: kPer <= 4 in 64 registers (4 blocks, 1024
// threads); kPer 8 in 128 (2 blocks). NOTE: 3 blocks at kPer 8 (80 registers) spills for the
// 16-bit types.
template <int kPer>
constexpr int kMinBlocks = kPer <= 4 ? 4 : 2;

// Calls launch(std::integral_constant<int, kPer>{}) with the fewest vectors per thread that
// cover a row of `cols` elements of T: registers (and so occupancy) follow kPer.
template <class T, class F>
void dispatch_per(int64_t cols, F&& launch) {
  const int64_t per = (((cols + kVec16<T> - 1) / kVec16<T>) + kThreads - 1) / kThreads;
  if (per <= 1) launch(std::integral_constant<int, 1>{});
  else if (per <= 2) launch(std::integral_constant<int, 2>{});
  else if (per <= 4) launch(std::integral_constant<int, 4>{});
  else launch(std::integral_constant<int, kMaxPer>{});
}

}  // namespace pipelined_rows

// Bit k set: this thread's vector k (elements (tid + kThreads k) * kV ...) lies inside D.
template <class T, int kPer, int kThreads>
__device__ __forceinline__ unsigned whole_vectors(int64_t dim) {
  unsigned m = 0;
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if ((int64_t(threadIdx.x) + k * kThreads + 1) * kVec16<T> <= dim) m |= 1u << k;
  return m;
}

// (kPer) 16-byte vectors of `row` owned by this thread: the ones inside D as one load each at
// a fixed offset from one pointer (LDG.128 [R + imm]), zero past D.
// NOTE: no element-wise fallback inside this unrolled loop: one made ptxas keep kPer x kV
// scalar registers live (117 registers at bf16 kPer 4 instead of ~70).
template <class T, int kPer, int kThreads, bool kKeep>
__device__ __forceinline__ void load_slice(Vec<T, kVec16<T>> (&v)[kPer], const T* row, unsigned whole) {
  constexpr int kV = kVec16<T>;
  const T* p = row + threadIdx.x * kV;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const T* q = p + k * kThreads * kV;
    if ((whole >> k) & 1u) v[k] = kKeep ? load_keep<T, kV>(q) : load_stream<T, kV>(q);
    else
#pragma unroll
      for (int j = 0; j < kV; ++j) v[k].v[j] = from_f32<T>(0.f);
  }
}

// The N elements of `v` as f32. bf16 widens by bit position (a bf16 is the high half of an
// f32): a shift or a mask per element on the packed 32-bit words, which lets ptxas keep a bf16
// slice packed until each element is used (per-element cvt made it hold unpacked copies and
// spill at 80 registers).
template <class T, int N>
__device__ __forceinline__ void widen(const Vec<T, N>& v, float (&f)[N]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const uint32_t* p = reinterpret_cast<const uint32_t*>(&v);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      f[2 * i] = __uint_as_float(p[i] << 16);
      f[2 * i + 1] = __uint_as_float(p[i] & 0xFFFF0000u);
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) f[j] = to_f32(v.v[j]);
  }
}

// widen() through different instructions (PRMT byte permutes instead of SHF/LOP3) for a second
// pass over a bf16 slice. NOTE: opaque() is an empty asm, so ptxas (after NVVM) still sees the
// same registers and shares the second pass's widening with the first, keeping the slice live
// as f32 across a reduction; different instructions cannot be shared, so the first pass's f32
// copies die after it (a sweep of row kernels, 2026-11-29: what kept the smem-dg backward in 64 registers).
template <class T, int N>
__device__ __forceinline__ void widen_alt(const Vec<T, N>& v, float (&f)[N]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const uint32_t* p = reinterpret_cast<const uint32_t*>(&v);
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      f[2 * i] = __uint_as_float(__byte_perm(p[i], 0u, 0x1044));
      f[2 * i + 1] = __uint_as_float(__byte_perm(p[i], 0u, 0x3244));
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) f[j] = to_f32(v.v[j]);
  }
}

// Makes `v`'s bits opaque to the compiler (an empty asm that "may change" them), so it cannot
// hoist or share an f32 conversion of a slice across a loop or a reduction: converted, the
// slice would take twice the registers (bf16: 32 instead of 16 at kPer 4), costing a block per
// SM. Converting again is one shift or mask per element, far below the issue rate a
// memory-bound row needs.
template <class T, int N>
__device__ __forceinline__ void opaque(Vec<T, N>& v) {
  uint4& u = *reinterpret_cast<uint4*>(&v);
  asm volatile("" : "+r"(u.x), "+r"(u.y), "+r"(u.z), "+r"(u.w));
}

// Block-wide reduction through one barrier; every thread receives the result. `slot` is
// [kThreads / 32] shared floats that no thread may write again before the block's next barrier:
// callers alternate two slots by row parity, so a fast warp's next-row partials never overwrite
// ones a slow warp is still reading (v02-style reductions pay a second barrier for that).
template <int kThreads, class Op>
__device__ __forceinline__ float block_reduce_slot(float v, Op op, float* slot) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  v = warp_reduce(v, op);
  if (lane == 0) slot[warp] = v;
  __syncthreads();
  return warp_reduce(lane < kThreads / 32 ? slot[lane] : Op::kIdentity, op);
}

// Sum over a row group of kGroup threads (a multiple of 32) of a block of kGroups such groups
// (group g: threads g * kGroup ...), through one barrier: __syncthreads() for one group, else
// named barrier g + 1 of kGroup threads, so groups walk their rows independently. Every thread
// of the group receives the result. `slot` is this group's [kGroup / 32] floats, alternated by
// the caller between two per row parity as in block_reduce_slot.
template <int kGroup, int kGroups>
__device__ __forceinline__ float group_reduce_slot(float v, float* slot) {
  static_assert(kGroup % 32 == 0 && kGroups >= 1 && kGroups <= 15, "warp-multiple groups; barriers 1..15");
  const int warp = (threadIdx.x % kGroup) / 32, lane = threadIdx.x % 32;
  v = warp_reduce(v, SumOp{});
  if (lane == 0) slot[warp] = v;
  if constexpr (kGroups == 1) __syncthreads();
  else ptx::named_barrier_sync(int(threadIdx.x / kGroup) + 1, kGroup);
  return warp_reduce(lane < kGroup / 32 ? slot[lane] : 0.f, SumOp{});
}

}  // namespace hk
