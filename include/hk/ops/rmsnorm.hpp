// hk/ops/rmsnorm.hpp — RMSNorm forward and backward over the last dimension.
//
//   forward:   rstd[r] = 1 / sqrt(mean_d x[r,d]^2 + eps),   y[r,d] = x[r,d] * rstd[r] * g[d]
//   backward:  dx[r,d] = rstd[r] * (g[d] dy[r,d] - x[r,d] * rstd[r]^2 * S[r] / D),
//              S[r] = sum_d g[d] dy[r,d] x[r,d];            dg[d] = sum_r dy[r,d] x[r,d] rstd[r]
//
// x, y, dy, dx: [rows, D] in one dtype (f32, f16, bf16), each with its own row stride >= D and a
// contiguous last dim. g, dg: contiguous [D] in that dtype. rstd: contiguous f32 [rows], written
// by the forward for the backward. Math and accumulation in f32. Any rows and D, including past
// 2^31 elements; an empty tensor is a no-op. dg is deterministic (fixed reduction order).
// Runs on `stream`; asynchronous (the backward allocates its partial buffer stream-ordered).
#pragma once

#include <cuda_runtime_api.h>

#include "hk/tensor.hpp"

namespace hk {

void rmsnorm(const TensorView& x, const TensorView& g, const TensorView& y, const TensorView& rstd,
             double eps = 1e-6, cudaStream_t stream = nullptr);
void rmsnorm_backward(const TensorView& x, const TensorView& g, const TensorView& rstd,
                      const TensorView& dy, const TensorView& dx, const TensorView& dg,
                      cudaStream_t stream = nullptr);

}  // namespace hk
