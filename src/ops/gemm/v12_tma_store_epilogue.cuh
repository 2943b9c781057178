// gemm/v12_tma_store_epilogue.cuh
//
// Rung 12: v11 with the epilogue through shared memory: the fused
// alpha/beta/bias/activation results are written in 64-row x 128-byte swizzled chunks
// (conflict-free) and leave by TMA stores, double-buffered so a chunk's store overlaps the next
// chunk's math.
// Adds over v11: full-line coalesced writes of C issued by one thread, asynchronous to the
// consumers (which go on to the next tile), instead of 128 scattered 2-byte stores per thread.
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes — and of C, which TMA stores; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the policy below.
// Compiled for: bf16 inputs, the "nt" layout (A row-major, B column-major) — a teaching
// rung compiles what its ladder benchmark runs; supports() declines the rest.
#pragma once

#include "gemm/v11_persistent.cuh"

namespace hk::gemm_impl {

struct V12 : V11 {
  static constexpr const char* kName = "v12_tma_store_epilogue";
  // The epilogue writes 64-row x 128-byte swizzled chunks to shared memory (double-buffered)
  // and TMA stores them: full-line coalesced writes, asynchronous to the consumers.
  static constexpr bool kTmaStore = true;
};

}  // namespace hk::gemm_impl
