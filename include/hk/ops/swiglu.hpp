// hk/ops/swiglu.hpp — SwiGLU forward and backward on the fused gate/up projection's output.
//
//   forward:   y[r, j] = silu(g) * u,                       g = x[r, j], u = x[r, F + j]
//   backward:  dx[r, j]     = dy[r, j] * u * silu'(g)       (d gate)
//              dx[r, F + j] = dy[r, j] * silu(g)            (d up)
//   silu(g) = g / (1 + exp(-g)),  silu'(g) = s (1 + g (1 - s)),  s = 1 / (1 + exp(-g))
//
// x, dx: [rows, 2F] ([g | u] per row, as one GEMM with the gate and up weights stacked writes
// them); y, dy: [rows, F]. One dtype (f32, f16, bf16) for every operand, each with its own row
// stride (>= its row length) and a contiguous last dim. Math in f32, one rounding to the output
// dtype. Any rows and F, any alignment, past 2^31 elements; an empty tensor is a no-op. Runs on
// `stream`; asynchronous.
#pragma once

#include <cuda_runtime_api.h>

#include "hk/tensor.hpp"

namespace hk {

void swiglu(const TensorView& x, const TensorView& y, cudaStream_t stream = nullptr);
void swiglu_backward(const TensorView& x, const TensorView& dy, const TensorView& dx,
                     cudaStream_t stream = nullptr);

}  // namespace hk
