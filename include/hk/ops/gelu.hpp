// hk/ops/gelu.hpp — GeLU forward and backward.
//
//   y  = gelu(x)                       tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   dx = dy * gelu'(x)                 none: 0.5 x (1 + erf(x / sqrt(2)))
//
// x, y, dy, dx: contiguous tensors of one shape and one dtype (f32, f16, bf16), any number of
// elements (including past 2^31 and zero, which is a no-op). Math in f32. Output may alias
// input. Runs on `stream`; asynchronous.
#pragma once

#include <cuda_runtime_api.h>

#include "hk/tensor.hpp"

namespace hk {

enum class GeluApprox { kTanh, kNone };

void gelu(const TensorView& x, const TensorView& y, GeluApprox approx = GeluApprox::kTanh,
          cudaStream_t stream = nullptr);
void gelu_backward(const TensorView& x, const TensorView& dy, const TensorView& dx,
                   GeluApprox approx = GeluApprox::kTanh, cudaStream_t stream = nullptr);

}  // namespace hk
