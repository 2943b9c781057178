// conv2d_single/dispatch.cpp — which conv2d_single rung serves a public call
// (hk::conv2d_single, hk.conv2d_single_channel).
//
//   W % 8 == 0, 16-byte aligned, kH, kW <= 32   v03_cp_async_pipeline  next tile's cp.async under the compute
//   any other width, alignment or kernel size    v02_tiled_smem         one tile at a time, scalar edges;
//                                                                       kernels past 32 x 32 in 32 x 32 pieces
//
// v01_naive (one thread per output, every tap from global memory) is ladder-only.
// Both tiled rungs stage a 32 x 128 tile with its halo once in shared memory and compute 2 x 8
// outputs per thread from register windows (conv2d_single/stencil.cuh). H200, 2026-12-02,
// 256x512x512 f32, k = 3 / 4 / 7: v03 179 / 165 / 235 us (0.71 / 0.77 / 0.54 of copy), v02
// 181 / 208 / 315, v01 819 / 1193 / 2072.
#include "conv2d_single/conv2d_single_op.hpp"

namespace hk {
namespace {

std::vector<Route> conv2d_single_dispatch(const Conv2dSingleProblem&) {
  return {{"v03_cp_async_pipeline", "rows of whole 16-byte chunks: the next tile's input lands by cp.async while the "
                                    "current one computes: 0.71-0.77 of copy at 256x512x512 f32, k = 3, 4 (H200, 2026-12-02)"},
          {"v02_tiled_smem", "any width, alignment and kernel size (past 32 x 32 in 32 x 32 pieces of k): the tile staged "
                             "through registers, scalar accesses at unaligned rows: 1.0-1.5x slower than v03 where both "
                             "run (H200, 2026-12-02)"}};
}

}  // namespace

HK_REGISTER_DISPATCH(Conv2dSingleProblem, "conv2d_single", conv2d_single_dispatch);

}  // namespace hk
