// conv2d/dispatch.cpp — which conv2d rung serves a public call (hk::conv2d and its backward
// ops, hk.conv2d).
//
//   depthwise NHWC forward, 3x3 / 5x5 / 7x7,      v04_depthwise_tiled  the input window copied once
//   unit stride and dilation                                           per tile into shared memory
//   depthwise NHWC forward (groups == C == Cout)  v02_depthwise_nhwc   a stencil on CUDA cores
//   symmetric padding; asymmetric where cuDNN's   baseline_cudnn       cuDNN's heuristics
//   graph API builds a plan (on a device)
//   anything else (grouped 16-bit wgrad; a        v01_direct           direct convolution
//   build without cuDNN; asymmetric padding
//   cuDNN refuses)
//
// The implicit-GEMM rung (v03) is ladder-only: 0.24x cuDNN on the 56x56 3x3 layer (1261 against
// 304 us, H200).
#include "conv2d/conv2d_op.hpp"

namespace hk {
namespace {

std::vector<Route> conv2d_dispatch(const Conv2dProblem&) {
  return {{"v04_depthwise_tiled", "depthwise NHWC forward, square 3/5/7 kernels at unit stride: 107 us at "
                                  "64x128x56x56 K=7 bf16, 4.6x v02 and 1.66x F.conv2d (H200)"},
          {"v02_depthwise_nhwc", "the other depthwise NHWC forwards (strided, dilated, other kernel sizes): "
                                 "channel-vectorised stencil, 10.6x cuDNN's legacy API at 64x128x56x56 K=7 (H200)"},
          {"baseline_cudnn", "cuDNN, the heuristics' first algorithm: implicit GEMM on tensor cores for dense layers"},
          {"v01_direct", "any parameters: what cuDNN declines (asymmetric padding its graph API refuses, grouped "
                         "16-bit wgrad) and builds without cuDNN"}};
}

}  // namespace

HK_REGISTER_DISPATCH(Conv2dProblem, "conv2d", conv2d_dispatch);

}  // namespace hk
