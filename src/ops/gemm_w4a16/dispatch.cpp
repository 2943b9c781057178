// gemm_w4a16/dispatch.cpp — which gemm_w4a16 rung serves a public call (hk::gemm_w4a16,
// hk.matmul_w4a16).
//
//   problem                                         rung                       why
//   M = 1, rows layout (K % 32 == 0, aligned)       v02_decode_gemv            eight weight rows per block, no mma or staging: the least fixed cost
//   M <= 32, 16-byte aligned (rows: K % 32 == 0)    v04_decode_mma_splitk      tensor cores, K split over blocks: every SM streams weights
//   anything else (M > 32, odd alignment or K)      baseline_cublas_dequant    one dequantisation pass, then cuBLAS: faster than v03 past M = 32
//
// H200, 2026-12-03, bf16, g = 128, `hk bench gemm_w4a16` (docs/results/bench-gemm_w4a16.json):
//   M = 1:  v02 20.7 us at 8192x8192 (v04 30.2, dequantise + cuBLAS 96.7), 10.0 at 4096x4096
//           (v04 15.6), 19.7 at 14336x4096 (`--variant v02*`); in the tiled layout
//           v02 reads 8-row tiles a warp at a time and v04 wins (24.2 against 46.1 at 8192x8192).
//   M = 4:  v04 32.2 us at 8192x8192 (v02 52.0, v03 58.9); M = 16: v04 40.2 (v03 59.2, v02
//           171), 36.8 at 4096x14336; M = 32: v04 63.2.
//   M = 48: dequantise + cuBLAS 96.3 us (v03 134.4, 2026-12-02); at M = 4096 (Python, hk.matmul_w4a16 on
//           v03: 2982 us against 669 for the bf16 GEMM) the dequantisation pass (~50 us) is
//           small next to the GEMM, which cuBLAS runs at full rate.
// v03 stays production as the fallback where v04 declines (the tiled layout with groups
// shorter than 128 at 16 < M <= 32). v01_naive is ladder-only.
#include "gemm_w4a16/gemm_w4a16_op.hpp"

namespace hk {
namespace {

std::vector<Route> gemm_w4a16_dispatch(const W4A16Problem& p) {
  const Route gemv{"v02_decode_gemv", "M = 1, rows layout: eight weight rows per block with 16-byte loads, no "
                                      "staging: 20.7 us at 1x8192x8192 against 30.2 for v04 (H200, 2026-12-03)"};
  const Route decode{"v04_decode_mma_splitk", "M <= 32: W as the mma's A operand, K split over blocks so the weight "
                                              "stream fills every SM: 40.2 us at 16x8192x8192, v03 59.2 (H200, "
                                              "2026-12-03)"};
  const Route mma{"v03_mma_dequant", "tensor cores with W dequantised into the B fragment (where v04 declines)"};
  const Route cublas{"baseline_cublas_dequant", "M > 32, or any alignment and K: W dequantised into scratch, then "
                                                "cuBLAS: 96.3 us at 48x8192x8192 against 134.4 for v03 (H200, "
                                                "2026-12-02)"};
  if (p.m == 1 && !p.tiled()) return {gemv, decode, mma, cublas};
  if (p.m <= 32) return {decode, mma, cublas};
  return {cublas};
}

}  // namespace

HK_REGISTER_DISPATCH(W4A16Problem, "gemm_w4a16", gemm_w4a16_dispatch);

}  // namespace hk
