// attention/attn_common.cuh — device helpers every attention rung shares: operand addressing
// through (b, s, h) strides, the score transform (scale, softcap), the 16-bit dtype dispatch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "attention/attention_op.hpp"
#include "common/launch.cuh"
#include "common/vec.cuh"

namespace hk::attn {

// Element (b, s, h, 0) of an operand.
template <class T>
__device__ __forceinline__ T* row_ptr(T* base, const AttnStrides& st, int64_t b, int64_t s, int64_t h) {
  return base + b * st.b + s * st.s + h * st.h;
}

// scale * x, then softcap * tanh(. / softcap) when softcap > 0. `t` receives the tanh (the
// backward's derivative is 1 - t^2).
__device__ __forceinline__ float score(float x, float scale, float softcap, float* t = nullptr) {
  float s = x * scale;
  if (softcap > 0.f) {
    const float th = tanhf(s / softcap);
    if (t) *t = th;
    s = softcap * th;
  }
  return s;
}

// fn(T{}) with T the storage type of a 16-bit attention dtype.
template <class Fn>
void dispatch_16bit(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::kF16: fn(__half{}); return;
    case DType::kBF16: fn(__nv_bfloat16{}); return;
    default: HK_THROW(kType, op, ": dtype ", to_string(dtype), " is not f16 or bf16");
  }
}

// 2^x by one MUFU.EX2 (ex2.approx.ftz: ~2 ulp; -inf gives +0, results below 2^-126 flush to 0,
// which a softmax whose largest term is 1 never misses). exp2f without fast math wraps it in a
// subnormal-handling sequence.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace hk::attn
