// gemm/v09_warp_specialized.cuh
//
// Rung 9: warp specialization with register reallocation: the producer warpgroup gives its
// registers away (setmaxnreg 40), the two consumer warpgroups take them (232), which pays for a
// 128x256 tile (m64n256k16: 128 f32 accumulators per thread) and a 4-slot ring of 48 KB slots.
// Adds over v08: twice the MMA work per byte loaded from shared memory and per barrier
// handshake (arithmetic intensity per CTA 85 -> 171 flop/byte).
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the policy below.
// Compiled for: bf16 inputs, the "nt" layout (A row-major, B column-major) — a teaching
// rung compiles what its ladder benchmark runs; supports() declines the rest.
#pragma once

#include "gemm/v08_wgmma_tma_pipeline.cuh"

namespace hk::gemm_impl {

struct V09 : V08 {
  static constexpr const char* kName = "v09_warp_specialized";
  // 128 x 256 tiles (m64n256k16: 128 f32 accumulators per consumer thread): twice the MMA work
  // per byte read from shared memory and per barrier handshake.
  static constexpr int kBlockN = 256;
  // Four 48 KB slots: five would not fit in 227 KB.
  static constexpr int kStages = 4;
  // setmaxnreg: the producer warpgroup drops to 40 registers, the consumers rise to 232, which
  // holds the 128 accumulators without spilling.
  static constexpr bool kSetMaxNReg = true;
};

}  // namespace hk::gemm_impl
