// hk/ops/gemm.hpp — general matrix multiply with a fused epilogue.
//
//   C = act(alpha * A B + beta * C_in + bias)        f32 accumulation, one rounding to C's dtype
//
// A: [M, K] or [batch, M, K]; B: [K, N] or [batch, K, N]; C (and C_in): [M, N] or [batch, M, N].
// A and B are bf16 or f16 (the same dtype), each row-major (unit stride along its last dim) or
// column-major (unit stride along its second-to-last dim): the four cuBLAS layouts, written as
// strided views (a column-major A is a view of shape [M, K] with strides [1, lda]). Leading and
// batch strides are free (padding allowed; batch stride 0 broadcasts). C is row-major with any
// leading stride and has dtype bf16, f16 or f32; C_in has C's shape and dtype and may alias C.
// bias: [N], contiguous, C's dtype, broadcast over rows and batches. act: none, ReLU, or GeLU
// (tanh form). Any M, N, K >= 1; M or N of 0 is a no-op; K of 0 gives act(beta C_in + bias).
// Runs on `stream`; asynchronous. Errors are hk::Error naming the operand and the values.
#pragma once

#include <cuda_runtime_api.h>

#include "hk/tensor.hpp"

namespace hk {

enum class GemmActivation { kNone, kRelu, kGelu };

struct GemmOptions {
  float alpha = 1.0f;
  float beta = 0.0f;                      // non-zero needs c_in
  GemmActivation act = GemmActivation::kNone;
  const TensorView* bias = nullptr;       // [N] or absent
  const TensorView* c_in = nullptr;       // like C, or absent (read only when beta != 0)
};

void gemm(const TensorView& a, const TensorView& b, const TensorView& c, const GemmOptions& options = {},
          cudaStream_t stream = nullptr);

}  // namespace hk
