// hk/ops/broadcast.hpp — broadcast element-wise ops (the puzzles' constant add, outer add,
// fused outer multiply + ReLU, and a row-scaled ReLU with its backward).
//
//   add_scalar:      z = x + c                                   x, z: any shape, contiguous
//   outer_add:       z[j,i] = x[i] + y[j]                        x [N0], y [N1], z [N1, N0]
//   outer_mul_relu:  z[j,i] = relu(y[j] * x[i])                  x [N0], y [N1], z [N1, N0]
//   row_scale_relu:  z[j,i] = relu(x[j,i] * y[j])                x, z [N1, N0], y [N1]
//     backward:      dx[j,i] = 1(x y > 0) y[j] dz[j,i],   dy[j] = sum_i 1(x y > 0) x[j,i] dz[j,i]
//
// One dtype (f32, f16, bf16) for every operand; math in f32 (c is rounded to f32). [N1, N0]
// operands each have a row stride >= N0 and a contiguous last dim; vectors are contiguous.
// relu keeps NaN (relu(NaN) = NaN, as torch.relu does; fmaxf would drop it). Empty tensors are
// no-ops (row_scale_relu_backward writes dy = 0 when N0 = 0). Runs on `stream`; asynchronous.
#pragma once

#include <cuda_runtime_api.h>

#include "hk/tensor.hpp"

namespace hk {

void add_scalar(const TensorView& x, double c, const TensorView& z, cudaStream_t stream = nullptr);
void outer_add(const TensorView& x, const TensorView& y, const TensorView& z, cudaStream_t stream = nullptr);
void outer_mul_relu(const TensorView& x, const TensorView& y, const TensorView& z, cudaStream_t stream = nullptr);
void row_scale_relu(const TensorView& x, const TensorView& y, const TensorView& z, cudaStream_t stream = nullptr);
void row_scale_relu_backward(const TensorView& x, const TensorView& y, const TensorView& dz, const TensorView& dx,
                             const TensorView& dy, cudaStream_t stream = nullptr);

}  // namespace hk
