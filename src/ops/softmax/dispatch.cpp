// softmax/dispatch.cpp — which softmax rung serves a public call (hk::softmax,
// hk::softmax_backward, hk.softmax).
//
// By row length (cols), at any alignment: the production rungs split each row at its own 16-byte
// phase (scalar head, 16-byte body, scalar tail), and when the operands' rows start at different
// phases they split at the output's and read the inputs with the widest loads their phase
// allows. Measured on the H200, 2026-11-29 (v07: 2026-12-04; docs/softmax.md), % of copy
// bandwidth, bf16 / f32, cudaMalloc'd operands:
//
//   cols                                  rung                     forward        backward
//   <= 16384 (f32 backward <= 8192)       v02_onchip_row           93.0 / 92.0    95.2 / 93.4   (16384x8192)
//   <= 16 x that (a 16-block cluster)     v04_split_row_cluster    row read once from registers (not measured in
//                                                                  this band; v06 reads it twice)
//   longer                                v07_oneshot_apply        66.1 / 68.0    61.6 / 61.5   (4x2^26, 2026-12-04;
//                                                                  v06_split_row_grid 62.2 / 63.5 and 56.3 / 54.2
//                                                                  in that run)
//   (before v07)                          v06_split_row_grid       61.6 / 62.4    52.5 / 52.1   (4x2^26; v04 28.1 / 31.3
//                                                                  and 32.3 / 37.7: one cluster per row fills 64 SMs)
//
// v07_oneshot_apply (H200, 2026-12-04, `hk bench softmax --budget-ms 400 --variant
// 'public,v06*,v07*' --shape 4x67108864 --dtype bf16,f32`) is v06's partial and finalize
// kernels with the apply pass as one short-lived block per 128 x 2 vectors instead of a
// resident grid-stride loop: forward 385.0 / 748.2 us against v06's 408.8 / 801.0, backward
// 619.3 / 1241.2 against 677.2 / 1406.6 (bf16 / f32); from Python the backward went from 0.93x /
// 0.87x torch.compile (v06, docs/results/bench-torch.json) to 1.02x / 0.99x. v07 runs everything
// v06 does, so v06 is now ladder-only.
//
// Operands at different phases are not yet measured. Ladder-only: v06_split_row_grid (above),
// v01_three_pass (scalar access,
// 47.6% / 66.3% of copy forward at 16384x8192), v03_online (94.7%
// bf16 forward but 87.7% f32 forward and 79.7% f32 backward at 16384x8192) and v05_pipelined_rows
// (80.4% / 85.8% forward at 16384x8192, below v02).
#include "softmax/softmax_op.hpp"

namespace hk {
namespace {

constexpr int64_t kOnChipThreads = 512;  // v02's largest block, each of v04's cluster blocks
constexpr int64_t kClusterBlocks = 16;   // v04's largest (non-portable) cluster on the H200

std::vector<Route> softmax_dispatch(const SoftmaxProblem& p) {
  // Elements per thread on chip (kOnChipElems): 32, or 16 for the f32 backward (two operands).
  const int64_t block_row = kOnChipThreads * (p.backward && p.dtype == DType::kF32 ? 16 : 32);
  std::vector<Route> routes;
  if (p.cols <= block_row)
    routes.push_back({"v02_onchip_row", "the row read once into registers: 93.0% / 92.0% of copy forward, 95.2% / "
                                        "93.4% backward at 16384x8192 (bf16 / f32; H200, 2026-11-29)"});
  else if (p.cols <= kClusterBlocks * block_row)
    routes.push_back({"v04_split_row_cluster", "the row fits in the registers of a 16-block cluster: read once "
                                               "(v06 reads it twice)"});
  else
    routes.push_back({"v07_oneshot_apply", "rows longer than a cluster holds, split over every SM, the apply pass in "
                                           "one-shot 128 x 2 blocks: 66.1% / 68.0% of copy forward, 61.6% / 61.5% "
                                           "backward at 4x2^26 against v06's 62.2% / 63.5% and 56.3% / 54.2% and "
                                           "v04's 28.1% / 31.3% forward (bf16 / f32; H200, 2026-12-04 and 11-29)"});
  return routes;
}

}  // namespace

HK_REGISTER_DISPATCH(SoftmaxProblem, "softmax", softmax_dispatch);

}  // namespace hk
