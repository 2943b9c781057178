// gemm/v13_wgmma_in_flight.cuh
//
// Rung 13: v12 with one wgmma group kept in flight across k-blocks. v12 waits for each k-block's
// MMAs to finish (wgmma.wait_group 0) before it issues the next k-block's, so the tensor cores
// idle while the warpgroup waits, hands the slot back and issues again. Here a consumer issues
// k-block kb, then waits only for kb - 1 (wait_group 1) and releases kb - 1's slot: the MMA
// pipe always has the next group queued.
// Adds over v12: MMA issue overlapped with MMA completion (CUTLASS's K_PIPE_MMAS = 1).
// Why: at 4096^3 bf16, v12 ran at 446 TFLOP/s = 0.60x cuBLAS on the H200 (2026-11-29) with
// HGMMA, TMA and setmaxnreg all in its SASS: the gap is in scheduling, and the per-k-block drain
// is the first suspect. Not yet measured; v12 stays the default until it is.
// Needs: as v12 (sm_90a; TMA's 16-byte rules for A, B and C).
// Kernel: hopper_gemm.cuh with the policy below.
// Compiled for: bf16 inputs, the "nt" layout (A row-major, B column-major) — a teaching
// rung compiles what its ladder benchmark runs; supports() declines the rest.
#pragma once

#include "gemm/v12_tma_store_epilogue.cuh"

namespace hk::gemm_impl {

struct V13 : V12 {
  static constexpr const char* kName = "v13_wgmma_in_flight";
  // One wgmma group stays in flight across k-blocks (wait_group 1), each slot released one
  // k-block later: the MMA pipe always has the next group queued.
  static constexpr int kMmaInFlight = 1;
};

}  // namespace hk::gemm_impl
