// hk/ops/conv2d.hpp — 2-D convolution: the single-channel stencil and the general conv2d.
//
// conv2d_single: x [N, H, W], k [kH, kW] -> z [N, H, W] ('same' size), one channel:
//
//   z[i][j][l] = sum_{a < kH, b < kW} k[a][b] * x[i][j + a][l + b],  x = 0 beyond the edge,
//
// the kernel anchored at its top-left tap (no flip, no centring): the batched 2-D convolution of
// the Triton puzzles (puzzle 10). f32, f16 or bf16, one dtype; contiguous; math in f32.
//
// conv2d: the cross-correlation torch.nn.functional.conv2d computes, with explicit, possibly
// asymmetric padding (padding="same" with an even kernel pads one more on the bottom/right):
//
//   y[n][co][oy][ox] = bias[co] + sum_{ci < C/g, ky, kx} x[n][g0 + ci][oy*sh - pt + ky*dh][ox*sw - pl + kx*dw]
//                                                         * w[co][ci][ky][kx],   g0 = (co / (Cout/g)) * (C/g)
//
// Layouts, every tensor contiguous in it:
//   kNCHW: x [N, C, H, W],  w [Cout, C/g, kH, kW],  y [N, Cout, OH, OW]
//   kNHWC: x [N, H, W, C],  w [Cout, kH, kW, C/g],  y [N, OH, OW, Cout]   (torch channels_last)
// OH = (H + pt + pb - dh (kH - 1) - 1) / sh + 1, likewise OW. bias: [Cout] or absent.
// conv2d_backward_data gives dx from dy and w; conv2d_backward_weight gives dw from x and dy
// (the bias gradient is dy summed over N, OH, OW and is left to the caller).
// f32, f16 or bf16, one dtype for every operand; math in f32. Runs on `stream`; asynchronous.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hk/tensor.hpp"

namespace hk {

void conv2d_single(const TensorView& x, const TensorView& k, const TensorView& z, cudaStream_t stream = nullptr);

enum class ConvLayout { kNCHW, kNHWC };

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  ConvLayout layout = ConvLayout::kNCHW;
};

// bias: a TensorView with data == nullptr and an empty shape for none.
void conv2d(const TensorView& x, const TensorView& w, const TensorView& bias, const TensorView& y,
            const Conv2dParams& params, cudaStream_t stream = nullptr);
void conv2d_backward_data(const TensorView& dy, const TensorView& w, const TensorView& dx,
                          const Conv2dParams& params, cudaStream_t stream = nullptr);
void conv2d_backward_weight(const TensorView& x, const TensorView& dy, const TensorView& dw,
                            const Conv2dParams& params, cudaStream_t stream = nullptr);

}  // namespace hk
