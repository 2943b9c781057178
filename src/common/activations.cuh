// common/activations.cuh — GeLU and its derivative in f32, shared by the gelu rungs and by
// the GEMM epilogues.
//
// tanh form: gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Since 0.5 (1 + tanh(u)) = sigmoid(2u), gelu(x) = x / (1 + exp(-2u)): one exp2 and one
// reciprocal, no cancellation in 1 + tanh(u) for large negative x, and the reference's NaN/Inf
// behaviour.
#pragma once

namespace hk::act {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoef = 0.044715f;
constexpr float kRsqrt2 = 0.7071067811865476f;
constexpr float kRsqrt2Pi = 0.3989422804014327f;  // 1 / sqrt(2 pi)
constexpr float kLog2e = 1.4426950408889634f;

// NOTE: the approximate MUFU instructions (one SFU op each, ~2 ulp) instead of expf and an IEEE
// divide (~10 instructions each): at 16-bit I/O a memory-bound GeLU has only ~30 instruction
// slots per element at full HBM rate, and the precise forms left it issue-bound (78% of copy
// bandwidth measured on the H200, 2026-11-29). Their error is far below one bf16/f16 ulp and
// within the f32 tolerance (rtol 1e-5).
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// exp(-2u) = 2^(x (c0 + c1 x^2)),  c0 = -2 log2(e) sqrt(2/pi),  c1 = 0.044715 c0
constexpr float kTanhC0 = -2.0f * kLog2e * kSqrt2OverPi;
constexpr float kTanhC1 = kGeluCoef * kTanhC0;

__device__ __forceinline__ float gelu_tanh(float x) {
  float e = ex2_approx(x * fmaf(kTanhC1, x * x, kTanhC0));
  return x * rcp_approx(1.0f + e);  // x = -inf: -inf * rcp(inf) = -inf * 0 = NaN, as the reference
}

// d/dx [x s(2u)] = s + x s (1 - s) 2 u',  2u' = 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2)
__device__ __forceinline__ float gelu_tanh_grad(float x) {
  float s = rcp_approx(1.0f + ex2_approx(x * fmaf(kTanhC1, x * x, kTanhC0)));
  float du2 = fmaf(2.0f * kSqrt2OverPi * 3.0f * kGeluCoef, x * x, 2.0f * kSqrt2OverPi);
  return fmaf(x * s * (1.0f - s), du2, s);
}

// erfc(z) for z >= 0 with fractional error < 1.2e-7 (Numerical Recipes' erfcc, Chebyshev fit):
// t = 1 / (1 + z/2), erfc(z) = t exp(-z^2 + P(t)). One rcp, one ex2 and 10 FMAs with no branch,
// against ~20 instructions for CUDA's erff, which left the bf16 erf GeLU issue-bound (73% of
// copy bandwidth, H200 2026-11-29). Writing Phi through erfc also keeps full relative accuracy in
// the negative tail, where 1 + erf(x) cancels.
__device__ __forceinline__ float erfc_nonneg(float z) {
  float t = rcp_approx(fmaf(0.5f, z, 1.0f));
  float p = 0.17087277f;
  p = fmaf(p, t, -0.82215223f);
  p = fmaf(p, t, 1.48851587f);
  p = fmaf(p, t, -1.13520398f);
  p = fmaf(p, t, 0.27886807f);
  p = fmaf(p, t, -0.18628806f);
  p = fmaf(p, t, 0.09678418f);
  p = fmaf(p, t, 0.37409196f);
  p = fmaf(p, t, 1.00002368f);
  p = fmaf(p, t, -1.26551223f);
  return t * ex2_approx(kLog2e * fmaf(-z, z, p));
}

// Phi(x) = 0.5 (1 + erf(x / sqrt 2)): 1 - erfc/2 above zero, erfc/2 below.
__device__ __forceinline__ float normal_cdf(float x) {
  float half_erfc = 0.5f * erfc_nonneg(fabsf(x) * kRsqrt2);
  return x >= 0.0f ? 1.0f - half_erfc : half_erfc;  // NaN x: NaN half_erfc either way
}

__device__ __forceinline__ float gelu_erf(float x) { return x * normal_cdf(x); }

// d/dx [x Phi(x)] = Phi(x) + x phi(x)
__device__ __forceinline__ float gelu_erf_grad(float x) {
  return fmaf(x * kRsqrt2Pi, ex2_approx(-0.5f * kLog2e * x * x), normal_cdf(x));
}

}  // namespace hk::act
