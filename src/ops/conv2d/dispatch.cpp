// conv2d/dispatch.cpp — which conv2d rung serves a public call (hk::conv2d and its backward
// ops, hk.conv2d).
//
//   depthwise NHWC forward, 3x3 / 5x5 / 7x7,      v04_depthwise_tiled  the input window staged once
//   unit stride and dilation                                           per tile in shared memory
//   depthwise NHWC forward (groups == C == Cout)  v02_depthwise_nhwc   a stencil on CUDA cores
//   symmetric padding                             baseline_cudnn       cuDNN's heuristics
//   anything else (asymmetric padding; grouped    v01_direct           direct convolution
//   16-bit wgrad; a build without cuDNN)
//
// Not yet measured. The implicit-GEMM rung (v03) is ladder-only until it has run on a GPU.
#include "conv2d/conv2d_op.hpp"

namespace hk {
namespace {

std::vector<Route> conv2d_dispatch(const Conv2dProblem&) {
  return {{"v04_depthwise_tiled", "depthwise NHWC forward, square 3/5/7 kernels at unit stride: shared-memory "
                                  "tiles, FP32 FMAs from 16-byte shared loads (not yet measured)"},
          {"v02_depthwise_nhwc", "depthwise NHWC forward: channel-vectorised stencil on CUDA cores, weights in shared "
                                 "memory (not yet measured)"},
          {"baseline_cudnn", "cuDNN, the heuristics' first algorithm: implicit GEMM on tensor cores for dense layers"},
          {"v01_direct", "any parameters: asymmetric padding ('same' with an even kernel) and builds without cuDNN"}};
}

}  // namespace

HK_REGISTER_DISPATCH(Conv2dProblem, "conv2d", conv2d_dispatch);

}  // namespace hk
