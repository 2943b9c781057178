// gemm/v16_pingpong_consumers.cuh
//
// Rung 16: v15 with ping-pong consumers (CUTLASS's KernelTmaWarpSpecializedPingpong). In v15
// both consumer warpgroups finish a 128 x 256 tile's MMAs together and then both run the
// epilogue (convert 128 accumulators per thread, write swizzled chunks, TMA-store them) while
// the tensor cores idle: every tile pays its epilogue on the MMA pipe, which matters most when
// K is short (8192 x 8192 x 1024: 16 k-blocks per tile). Here each consumer warpgroup owns whole
// 64 x 256 tiles and the two alternate the CTA's tiles; an ordering barrier (named barriers 3/4)
// lets one warpgroup issue its MMAs only after the other has issued all of its tile's, so one
// warpgroup's epilogue runs under the other's MMAs. One TMA ring, filled in the order the
// warpgroups consume it; 2-CTA clusters along M multicast B (the 256 x 64 operand both CTAs'
// tiles share); persistent grouped order (16 unit-rows of 128 rows: the A panel of v15's 8 x 256);
// 4 stages of 40 KB; one wgmma group in flight; CTA-scope slot release; v15's epilogues (a
// compile-time FusedEpilogue per kind, the run-time path for C_in). The schedule, its barriers
// and their invariants: hopper_gemm_pingpong.cuh.
// Adds over v15: ping-pong consumer warpgroups (epilogue overlapped with the other's MMAs).
// Needs: as v12 (sm_90a; TMA's 16-byte rules for A, B, C and bias).
// Kernel: hopper_gemm_pingpong.cuh with the policy below.
// Compiled for: bf16 inputs, the "nt" layout, and the epilogues its ladder benchmark
// runs (plain, bias + GeLU, ReLU; output dtype = input dtype, no C_in) — a teaching rung;
// supports() declines the rest.
#pragma once

#include "gemm/v15_fused_fast_epilogue.cuh"

namespace hk::gemm_impl {

struct V16 : V15 {
  static constexpr const char* kName = "v16_pingpong_consumers";
  // Ping-pong consumers (hopper_gemm_pingpong.cuh): each warpgroup owns whole 64 x 256 tiles,
  // the two alternate, and one's epilogue runs under the other's MMAs.
  static constexpr bool kPingpong = true;
  static constexpr int kBlockM = 64;  // one warpgroup's tile; the two CTAs of a cluster stack along M
  // 16 unit-rows of 128 rows per L2 group: the A panel of 8 x 256 rows.
  static constexpr int kGroup = 16;
  // Four 40 KB slots + 32 KB of C chunks = 193 KB (five slots would need 233 KB).
  static constexpr int kStages = 4;
  // A teaching rung: the "nt" layout, and only the epilogues its benchmark runs (plain,
  // bias + GeLU, ReLU, output dtype = input dtype).
  static constexpr bool kEveryLayout = false;
  static constexpr EpilogueKinds kEpilogues = EpilogueKinds::kBench;
};

}  // namespace hk::gemm_impl
