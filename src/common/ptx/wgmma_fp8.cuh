// common/ptx/wgmma_fp8.cuh — Hopper warpgroup MMA on 8-bit floats (sm_90a): wgmma.mma_async
// m64n128k32 with e4m3 / e5m2 operands (any pairing) and f32 accumulators.
//
// FP8 wgmma reads both operands from shared memory K-major only (no transpose bit): rows of K
// values, 128 bytes = 128 elements per row in the 128-byte swizzle TMA writes, so one k32 step is
// 32 bytes along the row, exactly as a k16 step of the 16-bit types (wgmma.cuh's descriptors
// apply unchanged: make_smem_desc_sw128(base + kk * 32, 16, 1024)). The accumulator fragment is
// wgmma.cuh's: d[4j + 2h + c] is row 16w + l/4 + 8h, column 8j + 2(l%4) + c.
// NOTE: the tensor cores add each step's 32 products into d with ~14 significant bits rather
// than f32's 24 (DeepSeek-V3 report, §3.3.2); callers bound the error by promoting partial sums
// into f32 registers every few steps (gemm_fp8/hopper_fp8.cuh).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "common/ptx/wgmma_regs.hpp"

namespace hk::ptx {

// d (+)= A B^T for one m64n128k32 step; scale_d == 0 overwrites d. TA, TB: __nv_fp8_e4m3 or
// __nv_fp8_e5m2.
template <class TA, class TB>
__device__ __forceinline__ void wgmma_m64n128k32_fp8(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  constexpr bool kA4 = std::is_same_v<TA, __nv_fp8_e4m3>, kB4 = std::is_same_v<TB, __nv_fp8_e4m3>;
  static_assert(kA4 || std::is_same_v<TA, __nv_fp8_e5m2>, "A is e4m3 or e5m2");
  static_assert(kB4 || std::is_same_v<TB, __nv_fp8_e5m2>, "B is e4m3 or e5m2");
#define HK_WGMMA_FP8_M64N128K32(ATYPE, BTYPE)                                                      \
  asm volatile(                                                                                  \
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"                                        \
      "wgmma.mma_async.sync.aligned.m64n128k32.f32." ATYPE "." BTYPE " "                         \
      "{"                                                                                        \
      HK_WGMMA_REGS64                                                                            \
      "}, %64, %65, p, 1, 1;\n}\n"                                                               \
      : HK_WGMMA_ACC64(d)                                                                        \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))
  if constexpr (kA4 && kB4) HK_WGMMA_FP8_M64N128K32("e4m3", "e4m3");
  else if constexpr (kA4) HK_WGMMA_FP8_M64N128K32("e4m3", "e5m2");
  else if constexpr (kB4) HK_WGMMA_FP8_M64N128K32("e5m2", "e4m3");
  else HK_WGMMA_FP8_M64N128K32("e5m2", "e5m2");
#undef HK_WGMMA_FP8_M64N128K32
}

}  // namespace hk::ptx
