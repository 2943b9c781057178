// gemm_w4a16/w4a16.cuh — device pieces the gemm_w4a16 rungs share: where a packed word lives
// (both layouts), its group's scale and zero point, and the int4 -> bf16/f16 conversion of a
// whole word with bit operations (the magic-number trick).
//
// The trick: a 16-bit float whose exponent field says 2^e and whose low mantissa bits hold an
// integer q is exactly 2^e + q * ulp. With bf16 at 128 (0x4300: ulp 1) and f16 at 1024 (0x6400:
// ulp 1), OR-ing a 4-bit value into the low bits gives 128 + q or 1024 + q with no conversion
// instruction; one lop3 does it for two values at once (a word's nibbles j and j + 4 sit 16 bits
// apart: `(word >> 4j) & 0x000f000f | magic`). Subtracting the float (128 + z) or (1024 + z) is
// exact and leaves q - z in [-15, 15]; one multiply by the scale rounds once. Every rung that
// dequantises to x's dtype therefore produces the same weights, bit for bit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "gemm_w4a16/gemm_w4a16_op.hpp"

namespace hk::w4a16 {

template <class T>
struct Half2;
template <>
struct Half2<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static constexpr uint32_t kMagic = 0x43004300u;  // bf16 128.0 in both halves
};
template <>
struct Half2<__half> {
  using type = __half2;
  static constexpr uint32_t kMagic = 0x64006400u;  // f16 1024.0 in both halves
};

template <class T>
using T2 = typename Half2<T>::type;

__device__ __forceinline__ uint32_t lop3_and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  // (a & b) | c: LUT 0xEA = (0xF0 & 0xCC) | 0xAA.
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

template <class T>
__device__ __forceinline__ T2<T> as_t2(uint32_t u) {
  return *reinterpret_cast<T2<T>*>(&u);
}
template <class T>
__device__ __forceinline__ uint32_t as_u32(T2<T> v) {
  return *reinterpret_cast<uint32_t*>(&v);
}

// Two 16-bit floats packed in a word (low half first) as f32.
template <class T>
__device__ __forceinline__ float2 pair_to_float2(uint32_t u) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xFFFF0000u));  // bf16 = top half of f32
  } else {
    return __half22float2(as_t2<__half>(u));
  }
}

// The (zero, scale) pair of a group as the dequantisation uses it: zz = magic + z in both halves,
// ss = s in both halves.
template <class T>
struct GroupParams {
  T2<T> zz, ss;
};

template <class T>
__device__ __forceinline__ GroupParams<T> group_params(const W4A16Args& a, int64_t n, int64_t g) {
  const T s = reinterpret_cast<const T*>(a.scales)[n * a.groups + g];
  uint32_t z = 8;
  if (a.zeros) z = (static_cast<uint32_t>(__ldg(a.zeros + n * a.zero_words + g / 8)) >> (4 * (g % 8))) & 0xFu;
  GroupParams<T> p;
  p.zz = as_t2<T>((Half2<T>::kMagic | (z << 16) | z));
  if constexpr (std::is_same_v<T, __nv_bfloat16>) p.ss = __bfloat162bfloat162(s);
  else p.ss = __half2half2(s);
  return p;
}

// Word -> four pairs: out[j] = (w[j], w[j + 4]) for j = 0..3, w[i] = (q_i - z) * s rounded to T,
// q_i the word's value i (bits 4i..4i+3).
template <class T>
__device__ __forceinline__ void dequant_word(uint32_t word, const GroupParams<T>& p, T2<T> (&out)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const T2<T> biased = as_t2<T>(lop3_and_or(word >> (4 * j), 0x000F000Fu, Half2<T>::kMagic));
    out[j] = __hmul2(__hsub2(biased, p.zz), p.ss);
  }
}

// Where interchange word (n, w) of qweight lives in either layout.
__device__ __forceinline__ int64_t word_index(const W4A16Args& a, int64_t n, int64_t w) {
  if (a.layout == W4A16Layout::kTiled) return w4a16_tiled_index(n, w, a.k_padded);
  return n * (a.k / 8) + w;
}

template <class Fn>
void dispatch_dtype(DType dt, const char* op, Fn&& fn) {
  if (dt == DType::kBF16) fn(__nv_bfloat16{});
  else if (dt == DType::kF16) fn(__half{});
  else HK_THROW(kType, op, ": dtype ", to_string(dt), " is not bf16 or f16");
}

}  // namespace hk::w4a16
