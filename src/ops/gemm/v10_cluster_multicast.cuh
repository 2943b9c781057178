// gemm/v10_cluster_multicast.cuh
//
// Rung 10: 2-CTA clusters along M. The two CTAs need the same 256-wide B tile; each loads half
// of it and TMA multicasts that half into both CTAs' shared memory. A slot is free only when the
// consumers of both CTAs are done with it (remote mbarrier arrivals).
// Adds over v09: B traffic from L2 halves (A 16 KB + B 16 KB per CTA per K block instead of
// 16 + 32), relieving the L2 -> SM bandwidth that bounds 128x256 tiles.
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the policy below.
// Compiled for: bf16 inputs, the "nt" layout (A row-major, B column-major) — a teaching
// rung compiles what its ladder benchmark runs; supports() declines the rest.
#pragma once

#include "gemm/v09_warp_specialized.cuh"

namespace hk::gemm_impl {

struct V10 : V09 {
  static constexpr const char* kName = "v10_cluster_multicast";
  // 2-CTA clusters along M: each CTA loads half of the shared B tile and TMA multicasts it into
  // both, halving B's L2 -> SM traffic; a slot is free once both CTAs' consumers released it.
  static constexpr int kCluster = 2;
};

}  // namespace hk::gemm_impl
