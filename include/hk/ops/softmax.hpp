// hk/ops/softmax.hpp — softmax over the last dimension, forward and backward.
//
//   y  = exp(x - max(x)) / sum(exp(x - max(x)))          (per row)
//   dx = y * (dy - sum(dy * y))                           (per row)
//
// x, y, dy, dx: [..., T] of one shape and one dtype (f32, f16, bf16); each may have its own
// leading row stride >= T (last dimension contiguous, leading dimensions collapsing into one
// stride). Math in f32, numerically stable (the row max is subtracted first). A row holding
// NaN or +inf gives NaN, as does a row of all -inf (exp(-inf - -inf)); -inf elements of an
// otherwise finite row give 0. Any number of rows and any T; empty tensors are no-ops. Outputs
// must not overlap inputs (kernels read inputs through the non-coherent cache). Runs on
// `stream`; asynchronous.
#pragma once

#include <cuda_runtime_api.h>

#include "hk/tensor.hpp"

namespace hk {

void softmax(const TensorView& x, const TensorView& y, cudaStream_t stream = nullptr);
void softmax_backward(const TensorView& y, const TensorView& dy, const TensorView& dx,
                      cudaStream_t stream = nullptr);

}  // namespace hk
