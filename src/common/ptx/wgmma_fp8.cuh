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
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                   \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "         \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "         \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"           \
      "}, %64, %65, p, 1, 1;\n}\n"                                                               \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))
  if constexpr (kA4 && kB4) HK_WGMMA_FP8_M64N128K32("e4m3", "e4m3");
  else if constexpr (kA4) HK_WGMMA_FP8_M64N128K32("e4m3", "e5m2");
  else if constexpr (kB4) HK_WGMMA_FP8_M64N128K32("e5m2", "e4m3");
  else HK_WGMMA_FP8_M64N128K32("e5m2", "e5m2");
#undef HK_WGMMA_FP8_M64N128K32
}

}  // namespace hk::ptx
