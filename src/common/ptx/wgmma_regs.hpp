// common/ptx/wgmma_regs.hpp — the accumulator operands of a wgmma asm statement, so that no
// wrapper spells out 64 or 128 of them by hand: HK_WGMMA_REGS<n> is the PTX register list
// "%0, %1, ..., %<n-1>" (a string literal, to be placed between the braces of the accumulator
// operand) and HK_WGMMA_ACC<n>(d) the matching read-write constraints "+f"(d[0]) ... "+f"(d[n-1]),
// for n = 8, 16, 32, 64, 128 (m64n16 ... m64n256 with f32 accumulators). The operands that follow
// (descriptors, A registers, scale flags) are numbered from n on.
#pragma once

#define HK_WGMMA_R0_7 "%0, %1, %2, %3, %4, %5, %6, %7"
#define HK_WGMMA_R8_15 "%8, %9, %10, %11, %12, %13, %14, %15"
#define HK_WGMMA_R16_23 "%16, %17, %18, %19, %20, %21, %22, %23"
#define HK_WGMMA_R24_31 "%24, %25, %26, %27, %28, %29, %30, %31"
#define HK_WGMMA_R32_39 "%32, %33, %34, %35, %36, %37, %38, %39"
#define HK_WGMMA_R40_47 "%40, %41, %42, %43, %44, %45, %46, %47"
#define HK_WGMMA_R48_55 "%48, %49, %50, %51, %52, %53, %54, %55"
#define HK_WGMMA_R56_63 "%56, %57, %58, %59, %60, %61, %62, %63"
#define HK_WGMMA_R64_71 "%64, %65, %66, %67, %68, %69, %70, %71"
#define HK_WGMMA_R72_79 "%72, %73, %74, %75, %76, %77, %78, %79"
#define HK_WGMMA_R80_87 "%80, %81, %82, %83, %84, %85, %86, %87"
#define HK_WGMMA_R88_95 "%88, %89, %90, %91, %92, %93, %94, %95"
#define HK_WGMMA_R96_103 "%96, %97, %98, %99, %100, %101, %102, %103"
#define HK_WGMMA_R104_111 "%104, %105, %106, %107, %108, %109, %110, %111"
#define HK_WGMMA_R112_119 "%112, %113, %114, %115, %116, %117, %118, %119"
#define HK_WGMMA_R120_127 "%120, %121, %122, %123, %124, %125, %126, %127"

#define HK_WGMMA_REGS8 HK_WGMMA_R0_7
#define HK_WGMMA_REGS16 HK_WGMMA_REGS8 ", " HK_WGMMA_R8_15
#define HK_WGMMA_REGS32 HK_WGMMA_REGS16 ", " HK_WGMMA_R16_23 ", " HK_WGMMA_R24_31
#define HK_WGMMA_REGS64 \
  HK_WGMMA_REGS32 ", " HK_WGMMA_R32_39 ", " HK_WGMMA_R40_47 ", " HK_WGMMA_R48_55 ", " HK_WGMMA_R56_63
#define HK_WGMMA_REGS128                                                                         \
  HK_WGMMA_REGS64 ", " HK_WGMMA_R64_71 ", " HK_WGMMA_R72_79 ", " HK_WGMMA_R80_87 ", " HK_WGMMA_R88_95 \
  ", " HK_WGMMA_R96_103 ", " HK_WGMMA_R104_111 ", " HK_WGMMA_R112_119 ", " HK_WGMMA_R120_127

// Eight accumulators d[o .. o + 7].
#define HK_WGMMA_F8(d, o)                                                                              \
  "+f"(d[(o) + 0]), "+f"(d[(o) + 1]), "+f"(d[(o) + 2]), "+f"(d[(o) + 3]), "+f"(d[(o) + 4]), \
      "+f"(d[(o) + 5]), "+f"(d[(o) + 6]), "+f"(d[(o) + 7])
#define HK_WGMMA_ACC8(d) HK_WGMMA_F8(d, 0)
#define HK_WGMMA_ACC16(d) HK_WGMMA_ACC8(d), HK_WGMMA_F8(d, 8)
#define HK_WGMMA_ACC32(d) HK_WGMMA_ACC16(d), HK_WGMMA_F8(d, 16), HK_WGMMA_F8(d, 24)
#define HK_WGMMA_ACC64(d) \
  HK_WGMMA_ACC32(d), HK_WGMMA_F8(d, 32), HK_WGMMA_F8(d, 40), HK_WGMMA_F8(d, 48), HK_WGMMA_F8(d, 56)
#define HK_WGMMA_ACC128(d)                                                                          \
  HK_WGMMA_ACC64(d), HK_WGMMA_F8(d, 64), HK_WGMMA_F8(d, 72), HK_WGMMA_F8(d, 80), HK_WGMMA_F8(d, 88), \
      HK_WGMMA_F8(d, 96), HK_WGMMA_F8(d, 104), HK_WGMMA_F8(d, 112), HK_WGMMA_F8(d, 120)
