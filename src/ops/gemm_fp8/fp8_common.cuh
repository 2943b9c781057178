// gemm_fp8/fp8_common.cuh — what the FP8 GEMM rungs share: the dispatch over A's and B's
// formats, f32 to D's dtype, and bias reads.
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
