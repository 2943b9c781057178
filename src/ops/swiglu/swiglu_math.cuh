// swiglu/swiglu_math.cuh — SwiGLU's per-element math in f32, shared by every rung so the whole
// ladder computes the same values (the rungs differ in how they move bytes).
//
// silu(g) = g s, s = sigmoid(g) = 1 / (1 + 2^(-g log2 e)), with the approximate MUFU exp2 and
// reciprocal (one SFU op each, ~2 ulp; common/activations.cuh says why a memory-bound op at
// 16-bit I/O cannot afford expf and an IEEE divide). NaN and Inf land where the fp64 reference
// g / (1 + exp(-g)) puts them: silu(-inf) = -inf * 0 = NaN, silu(+inf) = +inf; a large negative
// gate (2^(-g log2 e) overflows f32) gives -0.
#pragma once

#include "common/activations.cuh"

namespace hk::swiglu_math {

__device__ __forceinline__ float sigmoid(float g) { return act::rcp_approx(1.f + act::ex2_approx(-act::kLog2e * g)); }

__device__ __forceinline__ float forward(float g, float u) { return g * sigmoid(g) * u; }

// d gate and d up from the upstream gradient dy: silu'(g) = s (1 + g (1 - s)).
__device__ __forceinline__ void backward(float g, float u, float dy, float& dg, float& du) {
  const float s = sigmoid(g);
  dg = dy * u * (s * (1.f + g * (1.f - s)));
  du = dy * (g * s);
}

}  // namespace hk::swiglu_math
