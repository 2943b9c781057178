// gemm_fp8/dispatch.cpp — which kernel hk::gemm_fp8 (and hk.matmul_fp8) runs, and why.
//
// Routes are tried in order; the first whose supports() accepts the problem runs. Every route is
// a production rung. On Hopper cuBLASLt's FP8 kernels are ahead of this library's own wgmma
// kernels in every scaling mode on aligned operands (H200, 2026-12-03, timed in one process,
// docs/gemm_fp8.md): per-tensor 4096^3 1346 against v07's 950 TFLOP/s. v05, v08 and v07 serve
// what Lt declines: e5m2 x e5m2, block-wise K that is not a multiple of 128 or M not a multiple
// of 4, a D at an odd offset.
#include "gemm_fp8/gemm_fp8_op.hpp"

namespace hk {
namespace {

std::vector<Route> gemm_fp8_dispatch(const GemmFp8Problem& p) {
  std::vector<Route> routes;
  // K-major operands with 16-byte rows, in a mode and pairing Lt's heuristic runs.
  routes.push_back({"baseline_cublaslt", "cuBLASLt's FP8 kernels: 1.4x v07 per-tensor at 4096^3 (1346 vs 950 "
                                         "TFLOP/s); block-wise scales copied into Lt's layout when needed"});
  // Few 128 x 128 tiles over a long K (decode-like: 64 x 2112 x 7168 is 17 tiles for 132 SMs):
  // K split over the CTAs, partial sums added in f32.
  if (gemm_fp8_prefers_split_k(p.m, p.n, p.k))
    routes.push_back({"v05_split_k", "at most 32 output tiles over 16+ k-blocks: K split over the CTAs so that "
                                     "more than a quarter of the SMs stream A and B"});
  // Operands TMA reads as given (K-major, 16-byte rows and bases): FP8 wgmma with f32 promotion
  // per 128-deep k-block, the next k-block's wgmma in flight during the promotion, the scales
  // where the scaling mode puts them.
  // v08 is v07 with a leaner instruction stream and a TMA-store epilogue under the next tile's
  // first wgmma: 1.06-1.45x v07 on every shape measured (H200, 2026-12-05, one process:
  // per-tensor 4096^3 1246 vs 909, row-wise 1139 vs 796, block-wise 949 vs 841 TFLOP/s). It
  // stores D with TMA, so v07, which stores from registers, keeps a D TMA cannot address.
  routes.push_back({"v08_lean_issue", "K-major 16-byte rows that cuBLASLt declines, D with 16-byte rows: 1.06-1.45x "
                                      "v07 (per-tensor 4096^3 1246 vs 909 TFLOP/s)"});
  routes.push_back({"v07_wgmma_in_flight", "what v08 declines (D at an offset or with rows not a multiple of 16 "
                                           "bytes): FP8 wgmma, k-block kb+1 in flight while kb is promoted, D "
                                           "stored from registers"});
  // Everything else (K % 16 != 0, padded or unaligned rows, a [K, N] weight): one K-major copy of
  // the offending operand, then the routes above.
  routes.push_back({"v04_aligned_pack", "operands TMA cannot read K-major as given: copied once into 16-byte rows, "
                                        "then cuBLASLt or the wgmma kernels"});
  return routes;
}

}  // namespace

HK_REGISTER_DISPATCH(GemmFp8Problem, "gemm_fp8", gemm_fp8_dispatch);

}  // namespace hk
