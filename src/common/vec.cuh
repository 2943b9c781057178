// common/vec.cuh — 16-byte vector loads and stores, and element conversion to/from f32.
//
// A Vec<T, N> is N elements of T in one aligned register group; with sizeof(T) * N == 16 it
// moves as one LDG.128 / STG.128. Loads are non-coherent (read-only path) with an evict-first
// hint: streaming kernels touch each byte once, so they should not push reused data out of L2.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace hk {

template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <class T>
constexpr int kVec16 = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte access

template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_stream(const T* p) {
  static_assert(sizeof(T) * N == 16, "load_stream moves exactly 16 bytes");
  uint4 raw = __ldcs(reinterpret_cast<const uint4*>(p));
  return *reinterpret_cast<Vec<T, N>*>(&raw);
}

template <class T, int N>
__device__ __forceinline__ void store_stream(T* p, const Vec<T, N>& v) {
  static_assert(sizeof(T) * N == 16, "store_stream moves exactly 16 bytes");
  __stcs(reinterpret_cast<uint4*>(p), *reinterpret_cast<const uint4*>(&v));
}

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

}  // namespace hk
