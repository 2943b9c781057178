// gemm_fp8/fp8_common.cuh — what the FP8 GEMM rungs share: the dispatch over A's and B's
// formats, f32 to D's dtype, bias reads, and paired stores of adjacent outputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "hk/tensor.hpp"

namespace hk::gemm_fp8_impl {

template <class OutT>
__device__ __forceinline__ OutT from_f32(float v) {
  if constexpr (std::is_same_v<OutT, float>) return v;
  else if constexpr (std::is_same_v<OutT, __half>) return __float2half_rn(v);
  else return __float2bfloat16_rn(v);
}

template <class OutT>
__device__ __forceinline__ float bias_at(const void* bias, int64_t j) {
  const OutT v = static_cast<const OutT*>(bias)[j];
  if constexpr (std::is_same_v<OutT, float>) return v;
  else if constexpr (std::is_same_v<OutT, __half>) return __half2float(v);
  else return __bfloat162float(v);
}

// A pair of adjacent outputs (row, col) and (row, col + 1) as one 4- or 8-byte store when both
// are inside and the address is aligned for it, else one by one.
template <class OutT>
__device__ __forceinline__ void store_pair(OutT* row_ptr, int64_t col, int64_t n, float v0, float v1) {
  OutT* p = row_ptr + col;
  if (col + 1 < n && reinterpret_cast<uintptr_t>(p) % (2 * sizeof(OutT)) == 0) {
    if constexpr (std::is_same_v<OutT, float>) *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
    else if constexpr (std::is_same_v<OutT, __half>) *reinterpret_cast<__half2*>(p) = __floats2half2_rn(v0, v1);
    else *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v0, v1);
  } else {
    if (col < n) p[0] = from_f32<OutT>(v0);
    if (col + 1 < n) p[1] = from_f32<OutT>(v1);
  }
}

// Calls fn(TA{}, TB{}) with the storage types of A's and B's formats.
template <class Fn>
void dispatch_fp8_pair(DType a, DType b, Fn&& fn) {
  auto with_b = [&](auto ta) {
    if (b == DType::kF8E5M2) fn(ta, __nv_fp8_e5m2{});
    else fn(ta, __nv_fp8_e4m3{});
  };
  if (a == DType::kF8E5M2) with_b(__nv_fp8_e5m2{});
  else with_b(__nv_fp8_e4m3{});
}

}  // namespace hk::gemm_fp8_impl
