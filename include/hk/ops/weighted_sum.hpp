// hk/ops/weighted_sum.hpp — weighted sum over the last dimension (a matrix-vector product).
//
//   forward:   y[r] = sum_d x[r,d] * w[d]
//   backward:  dx[r,d] = dy[r] * w[d]   (an outer product),   dw[d] = sum_r x[r,d] * dy[r]
//
// x, dx: [rows, D] in one dtype (f32, f16, bf16), each with its own row stride >= D and a
// contiguous last dim. w, dw: contiguous [D]; y, dy: contiguous [rows]; all in x's dtype. Math
// and accumulation in f32. Any rows and D, including past 2^31 elements. Empty inputs: y = 0
// for D = 0, dw = 0 for rows = 0, otherwise a no-op. dw is deterministic.
// Runs on `stream`; asynchronous (partial buffers are allocated stream-ordered).
#pragma once

#include <cuda_runtime_api.h>

#include "hk/tensor.hpp"

namespace hk {

void weighted_sum(const TensorView& x, const TensorView& w, const TensorView& y, cudaStream_t stream = nullptr);
void weighted_sum_backward(const TensorView& x, const TensorView& w, const TensorView& dy, const TensorView& dx,
                           const TensorView& dw, cudaStream_t stream = nullptr);

}  // namespace hk
