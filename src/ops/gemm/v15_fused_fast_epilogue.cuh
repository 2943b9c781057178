// gemm/v15_fused_fast_epilogue.cuh
//
// Rung 15: v14 with the fused epilogues on the specialised path too. v14 gave the plain GEMM a
// branch-free epilogue but left bias, ReLU and GeLU on v12's generic one, which re-tests C_in,
// bias, activation and output dtype and does 64-bit bounds and index math for every element
// (~1,700 SASS instructions per 64-column chunk) while both consumer warpgroups, and so the
// tensor cores, wait: measured on the H200 at 4096^3 bf16, v14 paid 14% over its plain GEMM for
// ReLU and 36% for bias + GeLU. Here the host picks a kernel per epilogue kind — activation
// (none, ReLU, GeLU tanh), bias or not, output dtype — so each element is alpha acc (+ its
// column's bias) (-> activation) -> round, with no branches: ~100 SASS instructions per
// 64-column chunk without activation (v14's plain path), ~130 with ReLU, ~320 with GeLU. A
// thread's 64 columns are the same in both of its rows, so it loads their bias values once per
// tile, as 32 unpredicated 4- or 8-byte loads issued while the tile's last wgmma group still
// runs (TileBias); only the last column tile of an N that is not a multiple of 256 predicates
// them. TMA still drops what lies past M and N: no per-element bounds checks. Problems with
// C_in (beta != 0) run the same kernel body with the epilogue read at run time (v12's generic
// path), so the rung covers every problem v14 covers. GeLU is act::gelu_tanh, the generic
// path's math (one ex2, one rcp): tanh.approx would save a MUFU per element but loses relative
// accuracy in the negative tail, where 1 + tanh cancels.
// Adds over v14: compile-time epilogue kinds for bias / ReLU / GeLU (one kernel per kind).
// Needs: as v12 (sm_90a; TMA's 16-byte rules for A, B, C and bias).
// Kernel: hopper_gemm.cuh with the policy below; epilogue_tma_store_fused.
// Compiled for: bf16 and f16 inputs, every layout, every epilogue kind: one generated file per
// (input dtype, layout) group (src/ops/gemm/CMakeLists.txt).
#pragma once

#include "gemm/v14_lean_sync_epilogue.cuh"

namespace hk::gemm_impl {

struct V15 : V14 {
  static constexpr const char* kName = "v15_fused_fast_epilogue";
  // A kernel per epilogue kind (output dtype, activation, bias): every problem without C_in
  // takes a branch-free FusedEpilogue; problems with C_in the run-time path. 19 kernels per
  // input dtype and layout.
  static constexpr EpilogueKinds kEpilogues = EpilogueKinds::kFused;
  // The plain problem is one of the fused kinds now, so the run-time kernel (C_in only) needs
  // no plain branch.
  static constexpr bool kPlainEpilogue = false;
  // A production rung (v18 hands it the problems its schedule does not split): every layout.
  static constexpr bool kEveryLayout = true;
};

}  // namespace hk::gemm_impl
