// conv2d_single/dispatch.cpp — which conv2d_single rung serves a public call
// (hk::conv2d_single, hk.conv2d_single_channel).
//
// v02_tiled_smem serves kernels up to 32 x 32: the input tile and its halo staged once in
// shared memory, 16 outputs per thread, 16-byte loads and stores where rows allow. Larger
// kernels (their halo would not fit the tile) run v01_naive. Not yet measured; the goal is
// 0.85 of copy bandwidth at 256x512x512 f32, k = 3, 4, 7.
#include "conv2d_single/conv2d_single_op.hpp"

namespace hk {
namespace {

std::vector<Route> conv2d_single_dispatch(const Conv2dSingleProblem&) {
  return {{"v02_tiled_smem", "shared-memory tile with halo, each input row staged once per tile, 16 outputs per "
                             "thread, 16-byte loads and stores on rows that allow them (not yet measured)"},
          {"v01_naive", "kernels larger than 32 x 32: one thread per output (not yet measured)"}};
}

}  // namespace

HK_REGISTER_DISPATCH(Conv2dSingleProblem, "conv2d_single", conv2d_single_dispatch);

}  // namespace hk
