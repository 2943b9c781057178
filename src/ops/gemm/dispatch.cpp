// gemm/dispatch.cpp — which kernel hk::gemm (and hk.matmul / hk.linear) runs, and why.
//
// Routes are tried in order; the first whose supports() accepts the problem runs. Every route is
// a production rung; the teaching rungs v01-v16 never serve a public call. Figures: H200,
// 2026-11-29, L2 flushed, each ratio to cuBLAS timed interleaved in one process (docs/gemm.md).
#include "gemm/gemm_op.hpp"

namespace hk {
namespace {

std::vector<Route> gemm_dispatch(const GemmProblem& p) {
  std::vector<Route> routes;
  // x W^T with a handful of rows (decoding): a stream of B at M flop/byte, HBM-bound. v18's
  // 128-row tiles would run 7/8 empty and give N = 8192 only 32 CTAs (0.43x cuBLAS); v17 splits K
  // over clusters and streams B through a cp.async ring: 0.92x cuBLAS at 16x8192x8192 bf16.
  if (p.m <= 32 && !p.a_col && p.b_col)
    routes.push_back({"v17_skinny_m_splitk", "decode shape (M <= 32, nt): split-K over clusters streaming B, "
                                             "0.92x cuBLAS at 16x8192x8192 where 128-row tiles reach 0.43x"});
  // Everything TMA can describe: warp-specialized WGMMA, 2-CTA clusters with multicast, a
  // persistent grid with stream-K last waves and compile-time fused epilogues: 1.06x / 1.04x
  // cuBLAS at 8192^3 / 16384^3, 0.98-1.00x at 4096^3, 4096x14336x4096 and 8192x8192x1024.
  routes.push_back({"v18_stream_k_tail", "TMA-describable operands: 0.98-1.06x cuBLAS on the bench shapes"});
  // A K, M or N whose rows are not 16-byte multiples, an unaligned view, a broadcast batch, K = 0:
  // one copy of the offending operands into aligned scratch, then the routes above. cuBLAS
  // itself runs K = 4095 at ~130 TFLOP/s.
  routes.push_back({"v19_aligned_pack", "operands TMA cannot describe as given: aligned copies, then the "
                                        "TMA kernels (cuBLAS runs such shapes at ~130 TFLOP/s)"});
  // Dimensions of 2^31 or more (TMA's coordinates are 32-bit).
  routes.push_back({"baseline_cublas", "what the TMA kernels cannot address: cuBLAS"});
  return routes;
}

}  // namespace

HK_REGISTER_DISPATCH(GemmProblem, "gemm", gemm_dispatch);

}  // namespace hk
