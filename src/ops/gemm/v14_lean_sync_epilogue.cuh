// gemm/v14_lean_sync_epilogue.cuh
//
// Rung 14: v13 (one wgmma group in flight) without the two costs its SASS shows outside the
// MMAs themselves:
//  - the slot release. v10..v13 hand a slot back to both CTAs' producers with
//    mbarrier.arrive.release.cluster, which ptxas lowers to MEMBAR.ALL.CTA; MEMBAR.ALL.GPU;
//    ERRBAR; CGAERRBAR; SYNCS.ARRIVE — a GPU-scope fence in two lanes of every consumer warp on
//    every k-block, right after the wgmma wait. The slot's readers are wgmma ops that
//    wgmma.wait_group has already retired, so the default (CTA-scope) release that CUTLASS's
//    ClusterBarrier::arrive uses is enough: a bare SYNCS.ARRIVE.
//  - the epilogue. v12's is generic: every element re-tests C_in, bias and activation, the
//    output dtype and the bounds with 64-bit index math (~3400 SASS instructions per 64-column
//    chunk) while both consumer warpgroups — and so the tensor cores — stop. Problems with no
//    C_in, bias or activation (the plain GEMM) take a branch-free path: alpha * acc, converted
//    to a compile-time output type, written swizzled, stored by TMA (which drops what lies
//    past M and N). Fused epilogues keep v12's path.
// Adds over v13: CTA-scope slot release; a specialised epilogue for the plain GEMM.
// Needs: as v12 (sm_90a; TMA's 16-byte rules for A, B and C).
// Kernel: hopper_gemm.cuh with the policy below.
// Compiled for: bf16 inputs, the "nt" layout (A row-major, B column-major) — a teaching
// rung compiles what its ladder benchmark runs; supports() declines the rest.
#pragma once

#include "gemm/v13_wgmma_in_flight.cuh"

namespace hk::gemm_impl {

struct V14 : V13 {
  static constexpr const char* kName = "v14_lean_sync_epilogue";
  // Slots go back to both CTAs' producers with the CTA-scope release arrive (a bare
  // SYNCS.ARRIVE), not the cluster-scope one that costs a MEMBAR.ALL.GPU per k-block: the
  // reads it hands over are wgmma's, already retired by wait_group.
  static constexpr bool kCtaRelease = true;
  // Problems without C_in, bias or activation take a branch-free epilogue (alpha acc, a
  // compile-time output type, no per-element tests).
  static constexpr bool kPlainEpilogue = true;
};

}  // namespace hk::gemm_impl
