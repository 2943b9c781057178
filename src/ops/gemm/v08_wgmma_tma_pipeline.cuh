// gemm/v08_wgmma_tma_pipeline.cuh
//
// Rung 8: v07 with a 5-slot ring: the producer thread keeps up to five K blocks in flight, each
// slot handed over by a full/empty mbarrier pair, so TMA loads overlap the wgmmas.
// Adds over v07: memory latency hidden behind the MMAs (the single-slot rung waits for every
// load); 5 x 32 KB of shared memory.
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the policy below.
// Compiled for: bf16 inputs, the "nt" layout (A row-major, B column-major) — a teaching
// rung compiles what its ladder benchmark runs; supports() declines the rest.
#pragma once

#include "gemm/v07_wgmma.cuh"

namespace hk::gemm_impl {

struct V08 : V07 {
  static constexpr const char* kName = "v08_wgmma_tma_pipeline";
  // Five 32 KB slots (160 KB): the producer keeps up to five k-blocks in flight while the
  // consumers multiply, so load latency hides behind the MMAs.
  static constexpr int kStages = 5;
};

}  // namespace hk::gemm_impl
