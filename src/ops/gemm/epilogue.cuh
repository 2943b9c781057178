// gemm/epilogue.cuh — what every GEMM rung shares: operand access for the simple rungs and the
// fused epilogue  c = act(alpha acc + beta c_in + bias)  in f32 with one rounding to C's dtype.
//
// Here the output dtype is a run-time switch (uniform across the grid, outside the K loop), so a
// rung that reads its epilogue from GemmArgs compiles one kernel per input dtype and layout
// (docs/design.md §7: build time); the fused-epilogue rungs compile a kernel per epilogue kind
// instead (hopper_gemm.cuh), one (input dtype, layout) group per translation unit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/activations.cuh"
#include "common/vec.cuh"
#include "gemm/gemm_op.hpp"

namespace hk::gemm_impl {

// Element (i, kk) of batch bi of A / (kk, j) of B, for rungs that address operands directly.
template <class T>
__device__ __forceinline__ float load_a(const GemmArgs& g, int64_t bi, int64_t i, int64_t kk) {
  const T* a = static_cast<const T*>(g.a) + bi * g.batch_stride_a;
  return to_f32(a[g.a_col ? i + kk * g.lda : i * g.lda + kk]);
}
template <class T>
__device__ __forceinline__ float load_b(const GemmArgs& g, int64_t bi, int64_t kk, int64_t j) {
  const T* b = static_cast<const T*>(g.b) + bi * g.batch_stride_b;
  return to_f32(b[g.b_col ? kk + j * g.ldb : kk * g.ldb + j]);
}

__device__ __forceinline__ float load_out_dtype(const void* p, int64_t i, DType dt) {
  switch (dt) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

// c = act(alpha acc + beta c_in + bias) for element (bi, row, col); row < M and col < N.
__device__ __forceinline__ float epilogue_value(const GemmArgs& g, float acc, int64_t bi, int64_t row, int64_t col) {
  float v = g.alpha * acc;
  if (g.c_in) v = fmaf(g.beta, load_out_dtype(g.c_in, bi * g.batch_stride_c_in + row * g.ldc_in + col, g.out_dtype), v);
  if (g.bias) v += load_out_dtype(g.bias, col, g.out_dtype);
  if (g.act == GemmActivation::kRelu) v = fmaxf(v, 0.0f);
  else if (g.act == GemmActivation::kGelu) v = act::gelu_tanh(v);
  return v;
}

// Stores v, rounded once, at element offset `off` of a tensor of dtype `dt`.
__device__ __forceinline__ void store_out(void* p, int64_t off, float v, DType dt) {
  switch (dt) {
    case DType::kF32: static_cast<float*>(p)[off] = v; break;
    case DType::kF16: static_cast<__half*>(p)[off] = __float2half_rn(v); break;
    default: static_cast<__nv_bfloat16*>(p)[off] = __float2bfloat16_rn(v); break;
  }
}

// The whole epilogue for one accumulator: bounds check, math, store.
__device__ __forceinline__ void epilogue_store(const GemmArgs& g, float acc, int64_t bi, int64_t row, int64_t col) {
  if (row < g.m && col < g.n)
    store_out(g.c, bi * g.batch_stride_c + row * g.ldc + col, epilogue_value(g, acc, bi, row, col), g.out_dtype);
}

// Calls fn(T{}) with T the storage type of the input dtype (bf16 or f16).
template <class Fn>
void dispatch_input(DType dt, const char* rung, Fn&& fn) {
  if (dt == DType::kBF16) fn(__nv_bfloat16{});
  else if (dt == DType::kF16) fn(__half{});
  else HK_THROW(kType, "gemm/", rung, ": input dtype ", to_string(dt), " is not bf16 or f16");
}

// Calls fn(bool_constant<a_col>, bool_constant<b_col>): one instantiation per layout.
template <class Fn>
void dispatch_layout(bool a_col, bool b_col, Fn&& fn) {
  using F = std::false_type;
  using T = std::true_type;
  if (!a_col && !b_col) fn(F{}, F{});
  else if (!a_col) fn(F{}, T{});
  else if (!b_col) fn(T{}, F{});
  else fn(T{}, T{});
}

inline int grid_dim(int64_t n, const char* what) {
  if (n > 0x7FFFFFFF) HK_THROW(kNotSupported, "gemm: ", what, " grid of ", n, " blocks exceeds 2^31-1");
  return static_cast<int>(n);
}

}  // namespace hk::gemm_impl
