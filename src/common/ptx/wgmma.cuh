// common/ptx/wgmma.cuh — Hopper warpgroup MMA (sm_90a): shared-memory matrix descriptors,
// wgmma.mma_async for m64nNk16 with f32 accumulators, its fence/commit/wait, and setmaxnreg.
//
// Operands live in shared memory in the 128-byte-swizzled layout TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B (16-byte chunk c of row r stored at chunk c ^ (r % 8); atoms of
// 8 rows x 128 bytes = 1024 bytes, 1024-byte aligned). For 16-bit types, in CUTLASS's notation:
//   K-major  (K contiguous):  ((8, m), (8, 2k)) : ((64, SBO), (1, 8))   elements
//            rows of 64 K values; SBO = bytes between 8-row groups (1024 when dense); LBO unused.
//            Step along K inside the 128-byte row by adding k * 32 bytes to the start address.
//   MN-major (M or N contiguous): ((8, 8, m), (8, k)) : ((1, 8, LBO), (64, SBO))   elements
//            rows of 64 MN values, one row per K; LBO = bytes between 64-wide MN blocks,
//            SBO = bytes between 8-row K groups (1024 when dense). Step along K by 16 rows =
//            2048 bytes. The instruction's transpose bit for that operand is set.
// The accumulator fragment of m64nNk16 (f32): thread t of the warpgroup, warp w = t / 32,
// lane l: d[4j + 2h + c] is row 16w + l/4 + 8h, column 8j + 2(l%4) + c.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/ptx/smem_desc.hpp"
#include "common/ptx/wgmma_regs.hpp"

namespace hk::ptx {

// Orders prior register writes (accumulators) before the next wgmma.mma_async reads them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" : : : "memory"); }
__device__ __forceinline__ void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;" : : : "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" : : "n"(N) : "memory");
}
// The accumulators are written asynchronously; this keeps the compiler from moving their uses
// across the wait.
template <int N>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Warpgroup-wide register reallocation (needs a register cap at entry: __launch_bounds__(n, 1)).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" : : "n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" : : "n"(kRegs));
}

// d (+)= A B for one m64nNk16 step; scale_d == 0 overwrites d (the first K step of a tile).
// kTransA / kTransB: the operand is MN-major in shared memory (16-bit types only). Each shape is
// one asm, its 16-bit type spelled by the macro argument ("bf16" or "f16").
// d (+)= A B for one m64n64k16 step, both operands in shared memory (the attention backward's
// 64 x 64 tiles: S^T = K Q^T, dP^T = V dO^T, and dQ = dS K with both operands MN-major).
template <class T, bool kTransA, bool kTransB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "bf16 or f16 operands");
#define HK_WGMMA_SS(TY)                                                                             \
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"                                   \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                          \
               "{" HK_WGMMA_REGS32 "}, %32, %33, p, 1, 1, %35, %36;\n}\n"                           \
               : HK_WGMMA_ACC32(d)                                                                  \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(int(kTransA)), "n"(int(kTransB)))
  if constexpr (std::is_same_v<T, __nv_bfloat16>) HK_WGMMA_SS("bf16");
  else HK_WGMMA_SS("f16");
#undef HK_WGMMA_SS
}

template <class T, bool kTransA, bool kTransB>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "bf16 or f16 operands");
#define HK_WGMMA_SS(TY)                                                                             \
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"                                   \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "                         \
               "{" HK_WGMMA_REGS64 "}, %64, %65, p, 1, 1, %67, %68;\n}\n"                           \
               : HK_WGMMA_ACC64(d)                                                                  \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(int(kTransA)), "n"(int(kTransB)))
  if constexpr (std::is_same_v<T, __nv_bfloat16>) HK_WGMMA_SS("bf16");
  else HK_WGMMA_SS("f16");
#undef HK_WGMMA_SS
}

template <class T, bool kTransA, bool kTransB>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "bf16 or f16 operands");
#define HK_WGMMA_SS(TY)                                                                             \
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"                                  \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " "                         \
               "{" HK_WGMMA_REGS128 "}, %128, %129, p, 1, 1, %131, %132;\n}\n"                      \
               : HK_WGMMA_ACC128(d)                                                                 \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(int(kTransA)), "n"(int(kTransB)))
  if constexpr (std::is_same_v<T, __nv_bfloat16>) HK_WGMMA_SS("bf16");
  else HK_WGMMA_SS("f16");
#undef HK_WGMMA_SS
}

}  // namespace hk::ptx
