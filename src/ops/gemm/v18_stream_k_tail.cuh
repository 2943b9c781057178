// gemm/v18_stream_k_tail.cuh
//
// Rung 18: v15 with its last waves split along K (stream-K). v15's persistent grid runs each
// 128x256 tile unit whole on one cluster of 2 CTAs, so U units over G clusters take ceil(U / G)
// tile times where U / G would do: on the H200 (G = 66) 4096^3 has 256 units, 3.88 waves;
// 4096x14336x4096 896, 13.58; 8192x8192x1024 1024, 15.52 — 2-3% of each run is clusters idling
// through the last wave. Here the first (U / G - 1) G units run whole and the k-blocks of the
// remaining G..2G-1 units are dealt out evenly, one contiguous range per cluster. A range that
// ends inside a tile stores its partial accumulators (f32, coalesced) to a workspace slot and
// raises a flag; the cluster whose range holds the tile's last k-block waits for those flags,
// adds the partials and runs the epilogue (StreamKSplit in hopper_gemm.cuh says why the order
// cannot deadlock). The workspace is per-stream scratch (17 MB on the H200; every flag is back
// to zero when the kernel exits, so no memset per launch), allocated by the first problem that
// splits. The split costs each cluster ~12 k-blocks' time (measured), so it is made only where
// the last wave idles the clusters for 16+ k-blocks on average (StreamKSplit::kMinIdleKBlocks);
// elsewhere v18 runs exactly as v15 (whole waves, one wave or less, 4096^3, 8192x8192x1024).
// Adds over v15: a balanced last wave for the price of one partial tile written and read per
// cluster.
// Needs: as v15 (sm_90a; TMA's 16-byte rules for A, B, C and bias).
// Kernel: hopper_gemm.cuh with the policy below (kStreamK).
// Compiled for: as v15, one generated file per (input dtype, layout) group.
#pragma once

#include "gemm/v15_fused_fast_epilogue.cuh"

namespace hk::gemm_impl {

struct V18 : V15 {
  static constexpr const char* kName = "v18_stream_k_tail";
  // The last 1-2 waves' k-blocks are dealt out evenly over the clusters; partial tiles meet in
  // a per-stream workspace (StreamKSplit, hopper_gemm.cuh).
  static constexpr bool kStreamK = true;
  // A problem the schedule does not split runs v15's kernels: the same code path, and measured
  // faster than this rung's kernels, which carry the stream-K branches, without a split (H200,
  // 2026-11-29: 2048^3 0.96x vs 0.94x cuBLAS, 4096^3 bias+GeLU +4.3% vs +7.5% over plain).
  static void launch_unsplit(const GemmArgs& g, cudaStream_t stream) { gemm_v15_launch(g, stream); }
};

}  // namespace hk::gemm_impl
