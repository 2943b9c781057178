// gemm/v11_persistent.cuh
//
// Rung 11: a persistent grid: one cluster per SM pair loops over output tiles, walked in
// groups of 8 cluster-rows (2048 rows of A) so the tiles in flight share A and B panels in L2.
// The producer starts the next tile's loads while the consumers run the epilogue.
// Adds over v10: no launch tail between waves, no CTA setup per tile, the epilogue overlapped
// with the next tile's loads, and an L2-friendly tile order.
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the policy below.
// Compiled for: bf16 inputs, the "nt" layout (A row-major, B column-major) — a teaching
// rung compiles what its ladder benchmark runs; supports() declines the rest.
#pragma once

#include "gemm/v10_cluster_multicast.cuh"

namespace hk::gemm_impl {

struct V11 : V10 {
  static constexpr const char* kName = "v11_persistent";
  // A persistent grid (one cluster per SM pair loops over tiles): no launch tail between
  // waves, and the producer loads the next tile while the consumers run the epilogue.
  static constexpr bool kPersistent = true;
  // Tiles walked in groups of 8 cluster-rows (2048 rows of A), so the tiles in flight share A
  // and B panels in L2 (sched::TileScheduler).
  static constexpr int kGroup = 8;
};

}  // namespace hk::gemm_impl
