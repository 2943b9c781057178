// gemm/dispatch.cpp — which kernel hk::gemm (and hk.matmul / hk.linear) runs, and why.
//
// Routes are tried in order; the first whose supports() accepts the problem runs. Every route is
// a production rung; the teaching rungs v01-v16 never serve a public call. Figures: H200,
// 2026-11-29 to 2026-12-03, L2 flushed, each ratio to cuBLAS timed interleaved in one process
// (docs/gemm.md; docs/results/bench-gemm-public.json and bench-gemm-routes.json).
#include "gemm/gemm_op.hpp"

namespace hk {
namespace {

// The problems cuBLAS serves in one kernel: no bias, activation or C_in (its own epilogue is
// alpha and beta only; the baseline adds ours as a second pass).
bool plain(const GemmProblem& p) { return p.act == GemmActivation::kNone && !p.has_bias && p.beta == 0.0f; }

std::vector<Route> gemm_dispatch(const GemmProblem& p) {
  std::vector<Route> routes;
  // x W^T with a handful of rows (decoding): a stream of B at M flop/byte, HBM-bound. v18's
  // 128-row tiles would run 7/8 empty and give N = 8192 only 32 CTAs (0.44x cuBLAS). cuBLAS
  // streams B through TMA into a warp-specialised ring at 3.75 TB/s where v17's per-warp cp.async
  // ring reaches 3.22: v17 measured 0.92-0.97x cuBLAS at M = 1-16 and 0.69-0.70x at M = 32 (x
  // 8192 x 8192, bf16 and f16), so cuBLAS serves the plain product. v17 keeps what cuBLAS would need a second pass for (a bias,
  // an activation, C_in) in the nt layout; in the others cuBLAS's GEMM plus that pass over M x N
  // outputs is still far ahead of v18. Operands with rows that are not 16-byte multiples go on
  // to the packing rung, whose aligned copies come back here.
  // f16 at M = 1 is the exception: there cuBLAS's kernel measured 41.0 us against v17's 37.9.
  if (p.m <= 32) {
    const bool nt = !p.a_col && p.b_col;
    if (nt && (!plain(p) || (p.m == 1 && p.in_dtype == DType::kF16)))
      routes.push_back({"v17_skinny_m_splitk", "decode shape (M <= 32, nt) with an epilogue, or f16 at M = 1: split-K "
                                               "over clusters streaming B (1.08x cuBLAS at 1x8192x8192 f16)"});
    if (gemm_tma_supports(p, false).empty())
      routes.push_back({"baseline_cublas", "decode shape (M <= 32): cuBLAS streams B faster than v17 (1.03-1.09x at "
                                           "M = 1-16, 1.45x at M = 32) and v18's 128-row tiles (2.0-2.3x)"});
    if (nt)
      routes.push_back({"v17_skinny_m_splitk", "decode shape (M <= 32, nt) that cuBLAS cannot address: split-K "
                                               "over clusters streaming B"});
  }
  // Few output tiles, or a small plain product: v18's one 128x256 tile leaves most clusters idle
  // where M x N makes fewer tiles than it has clusters (66), and elsewhere below 2^36 flops a
  // tile's fixed cost (pipeline fill, epilogue) or its last wave weighs more than its
  // instruction savings; cuBLAS picks a tile per shape. Measured against cuBLAS (H200,
  // 2026-12-03, bench-gemm-routes.json): v18 0.44-0.49x at 64x8192x8192, 128x8192x8192 and
  // 1024^3 (32 tiles), 0.94-0.95x at 2048^3, 0.90x at 3072^3 and 4096x2560x2560, 0.89-0.90x at
  // 1920x5632x64 "tt", 0.97x at 4096x4096x2048. With a bias, activation or C_in, cuBLAS's GEMM
  // plus the baseline's pass over M x N outputs still beats the idle clusters, not the fused
  // epilogue of a full wave: the epilogue case takes the first rule only. Only where TMA could
  // read the operands as given: an operand it cannot (a K of 4095) is where cuBLAS slows down
  // most, and the packing rung's aligned copies come back here.
  const int64_t tiles = (p.m + 127) / 128 * ((p.n + 255) / 256) * p.batch;
  // A bias or activation with the output in the input dtype and no C_in, on those few tiles or
  // over a short k-loop (K <= 2048): cuBLASLt's own fused epilogue. Few tiles: it saves cuBLAS's
  // second pass, 39.4 / 41.6 us against 45.2 / 50.2 at 64 / 128 x 8192 x 8192 bias+GeLU (1.15x /
  // 1.21x; v18 84.4 / 84.8). Short k-loops: v18's consumers run the epilogue between tiles with
  // the tensor cores idle (ncu at 4096^3: tensor pipe 88.7% plain, 83.8% with bias+GeLU, +4.3 M
  // issued instructions), +7.9% over its plain product at 8192x8192x1024, where Lt's costs
  // +1.7%: 212.7 us against v18's 227.2 (1.07x). At K = 4096 the two measured level (4096^3:
  // Lt 1.01x). H200, 2026-12-03, one process.
  if (p.m > 32 && (tiles < 66 || p.k <= 2048) && !plain(p) && p.beta == 0.0f && p.out_dtype == p.in_dtype &&
      gemm_tma_supports(p, true).empty())
    routes.push_back({"baseline_cublaslt", tiles < 66 ? "fewer 128x256 tiles than v18 has clusters, with a bias or "
                                                        "activation: Lt's fused epilogue, 1.15-1.21x cuBLAS + a pass "
                                                        "at 64/128x8192x8192 bias+GeLU"
                                                      : "a bias or activation over K <= 2048: Lt's fused epilogue "
                                                        "costs +1.7% over its plain product, v18's +7.9%: 1.07x v18 "
                                                        "at 8192x8192x1024 bias+GeLU"});
  if (p.m > 32 && (tiles < 66 || (plain(p) && p.flops() <= 0x1p36)) && gemm_tma_supports(p, true).empty())
    routes.push_back({"baseline_cublas", tiles < 66 ? "fewer 128x256 tiles than v18 has clusters: cuBLAS's smaller tile, "
                                                      "2.0-2.2x v18 at 64x8192x8192, 128x8192x8192 and 1024^3"
                                                    : "small plain product (<= 2^36 flops): cuBLAS's per-shape tile, "
                                                      "1.05-1.11x v18 at 2048^3, 3072^3 and 4096x2560x2560"});
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
