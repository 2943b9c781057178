// row_sum/dispatch.cpp — which row_sum rung serves a public call (hk::row_sum, hk.row_sum).
//
// v03_split_row serves every shape, dtype and layout: rows that fill the GPU run v02's schedule
// (a warp per row up to 2 KB, a block per row above), few long rows are split over the grid.
// Measured on the H200, 2026-11-29 (docs/row_sum.md), % of copy bandwidth, bf16 / f32:
//
//   shape          v03_split_row     CUB segmented reduce (baseline_cub_segmented)
//   16384x8192     100.8 / 106.6     87.0 / 105.0
//   4x2^26         102.3 / 105.8      1.4 / 1.3   (a block per segment: 4 blocks)
//
// CUB stays behind it as the vendor fallback. v01 (block per row, scalar loads), v02 (no row
// split: 2.9% at 4x2^26) and v04 (clusters: 28-64%) are ladder-only.
#include "row_sum/row_sum_op.hpp"

namespace hk {
namespace {

std::vector<Route> row_sum_dispatch(const RowSumProblem&) {
  return {
      {"v03_split_row", "16-byte loads, rows split when too few to fill the GPU: 100.8% / 106.6% of copy at "
                        "16384x8192, 102.3% / 105.8% at 4x2^26 (bf16 / f32; H200, 2026-11-29)"},
      {"baseline_cub_segmented", "the CUB library path: 87.0% / 105.0% of copy at 16384x8192 (bf16 / f32; H200, "
                                 "2026-11-29)"},
  };
}

}  // namespace

HK_REGISTER_DISPATCH(RowSumProblem, "row_sum", row_sum_dispatch);

}  // namespace hk
