// common/activations.cuh — GeLU and its derivative in f32, shared by the gelu rungs and by
// the GEMM epilogues.
//
// tanh form: gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Since 0.5 (1 + tanh(u)) = sigmoid(2u), gelu(x) = x / (1 + exp(-2u)): one exp and one divide,
// no cancellation in 1 + tanh(u) for large negative x, and exactly the reference's NaN/Inf
// behaviour (x = -inf gives -inf / inf = NaN, as 0.5 * -inf * 0 does).
#pragma once

namespace hk::act {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoef = 0.044715f;
constexpr float kRsqrt2 = 0.7071067811865476f;
constexpr float kRsqrt2Pi = 0.3989422804014327f;  // 1 / sqrt(2 pi)

__device__ __forceinline__ float gelu_tanh(float x) {
  float u = kSqrt2OverPi * fmaf(kGeluCoef * x, x * x, x);
  return x / (1.0f + __expf(-2.0f * u));
}

// d/dx [x s(2u)] = s + x s (1 - s) 2 u',  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
__device__ __forceinline__ float gelu_tanh_grad(float x) {
  float u = kSqrt2OverPi * fmaf(kGeluCoef * x, x * x, x);
  float s = 1.0f / (1.0f + __expf(-2.0f * u));
  float du = kSqrt2OverPi * fmaf(3.0f * kGeluCoef, x * x, 1.0f);
  return fmaf(x * s * (1.0f - s), 2.0f * du, s);
}

__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * kRsqrt2)); }

// d/dx [x Phi(x)] = Phi(x) + x phi(x)
__device__ __forceinline__ float gelu_erf_grad(float x) {
  float cdf = 0.5f * (1.0f + erff(x * kRsqrt2));
  return fmaf(x * kRsqrt2Pi, __expf(-0.5f * x * x), cdf);
}

}  // namespace hk::act
