// hk/ops/row_sum.hpp — sum over the last dimension.
//
//   y[r] = sum_t x[r, t]
//
// x: [..., T] (f32, f16, bf16), last dimension contiguous, leading dimensions collapsing into
// one row stride >= T (padded rows are fine). y: x's shape without the last dimension, same
// dtype, contiguous. Accumulation in f32; NaN and Inf propagate as IEEE sums do. Any number of
// rows and any T (including past 2^31 elements); an empty x is a no-op. Runs on `stream`;
// asynchronous.
#pragma once

#include <cuda_runtime_api.h>

#include "hk/tensor.hpp"

namespace hk {

void row_sum(const TensorView& x, const TensorView& y, cudaStream_t stream = nullptr);

}  // namespace hk
