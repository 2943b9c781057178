// gemm/v07_wgmma.cuh
//
// Rung 7: Hopper tensor cores. wgmma.mma_async (m64n128k16) reads both operands straight from
// 128-byte-swizzled shared memory that TMA fills; a 128x128 tile per CTA, two consumer
// warpgroups of 64 rows, one shared-memory slot: each K block is loaded, then multiplied.
// Adds over v06: Hopper's warpgroup-wide asynchronous MMA (HGMMA in SASS; 64x128x16 per
// instruction for 4 warps instead of v06's 16x8x16 per warp) reading A and B straight from
// swizzled shared memory (no ldmatrix, no register staging), and TMA bulk copies instead of
// per-thread cp.async; loads and MMAs do not overlap yet (one slot, where v06 keeps three).
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the policy below.
// Compiled for: bf16 inputs, the "nt" layout (A row-major, B column-major) — a teaching
// rung compiles what its ladder benchmark runs; supports() declines the rest.
#pragma once

#include "gemm/hopper_gemm.cuh"

namespace hk::gemm_impl {

struct V07 {
  static constexpr const char* kName = "v07_wgmma";
  // The tile: 128 x 128 per CTA, two consumer warpgroups of 64 rows (the wgmma M), each issuing
  // wgmma m64n128k16 on A and B read straight from 128B-swizzled shared memory that TMA fills.
  static constexpr int kBlockM = 128;
  static constexpr int kBlockN = 128;
  // One shared-memory slot: each k-block is loaded, then multiplied (no overlap yet).
  static constexpr int kStages = 1;
  // Every feature a later rung switches on, off (hopper_gemm.cuh describes each):
  static constexpr bool kSetMaxNReg = false;     // the default register split
  static constexpr int kCluster = 1;             // CTAs load their own B tile
  static constexpr bool kPersistent = false;     // one CTA per tile
  static constexpr int kGroup = 1;               // tiles in launch order
  static constexpr bool kTmaStore = false;       // consumers store C from registers
  static constexpr int kMmaInFlight = 0;         // wait for each k-block's wgmma group
  static constexpr bool kCtaRelease = false;     // (kCluster > 1 only)
  static constexpr bool kPlainEpilogue = false;  // one generic epilogue
  static constexpr bool kStreamK = false;        // whole tiles per cluster
  static constexpr bool kStreamKFewUnits = false;  // (kStreamK) a persistent grid of at most one cluster per unit
  static constexpr bool kPingpong = false;       // both consumer warpgroups share each tile
  // What is compiled: a teaching rung compiles what its ladder benchmark runs (bf16, the "nt"
  // layout), with the epilogue read from GemmArgs in the kernel; supports() declines the rest.
  static constexpr bool kEveryLayout = false;
  static constexpr EpilogueKinds kEpilogues = EpilogueKinds::kRuntime;
};

}  // namespace hk::gemm_impl
