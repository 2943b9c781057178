// common/vec.cuh — 16-byte vector loads and stores, and element conversion to/from f32.
//
// A Vec<T, N> is N elements of T in one aligned register group; with sizeof(T) * N == 16 it
// moves as one LDG.128 / STG.128. Every access takes the default cache policy. The API keeps the intent apart — load_stream / store_stream for data
// touched once, load_keep (common/rows.cuh) for operands every row reuses — so a policy is set
// in one place. The evict-first hint (__ldcs / __stcs) that streamed accesses used to carry cost
// 5-12% of HBM bandwidth on the H200 (2026-12-03, 16384x8192 bf16 and f32, x + 1 and x * z,
// timed interleaved with torch.add / torch.mul: evict-first loads and stores 0.89-0.91x torch,
// default policy 0.96-0.99x in the same grid-stride loop, 0.99-1.00x one-shot; docs/decisions.md).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>
#include <utility>

namespace hk {

template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <class T>
constexpr int kVec16 = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte access

// Plain global loads (ld.global, default policy) written as the CUDA headers write __ldcs: an
// asm volatile, so the compiler neither merges nor moves them across other memory operations
// and barriers. Not __ldg: with ld.global.nc ptxas hoisted loads further ahead of their use and
// rmsnorm v03 / v05 / v06 spilled under their launch bounds.
namespace detail {
__device__ __forceinline__ uint4 ld_global_v4(const void* p) {
  uint4 r;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
__device__ __forceinline__ uint2 ld_global_v2(const void* p) {
  uint2 r;
  asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}
__device__ __forceinline__ unsigned ld_global_u32(const void* p) {
  unsigned r;
  asm volatile("ld.global.u32 %0, [%1];" : "=r"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ unsigned ld_global_u16(const void* p) {
  unsigned short r;
  asm volatile("ld.global.u16 %0, [%1];" : "=h"(r) : "l"(p));
  return r;
}
// Plain global stores (st.global, default policy) written as the CUDA headers write __stcs: with a
// memory clobber, which keeps the compiler from moving other memory accesses across them. As
// plain C++ stores, ptxas hoisted loads past them and rmsnorm v05 / v06 spilled.
__device__ __forceinline__ void st_global_v4(void* p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ void st_global_v2(void* p, uint2 v) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}
__device__ __forceinline__ void st_global_u32(void* p, unsigned v) {
  asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_global_u16(void* p, unsigned short v) {
  asm volatile("st.global.u16 [%0], %1;" ::"l"(p), "h"(v) : "memory");
}
}  // namespace detail

template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_stream(const T* p) {
  static_assert(sizeof(T) * N == 16, "load_stream moves exactly 16 bytes");
  uint4 raw = detail::ld_global_v4(p);
  return *reinterpret_cast<Vec<T, N>*>(&raw);
}

template <class T, int N>
__device__ __forceinline__ void store_stream(T* p, const Vec<T, N>& v) {
  static_assert(sizeof(T) * N == 16, "store_stream moves exactly 16 bytes");
  detail::st_global_v4(p, *reinterpret_cast<const uint4*>(&v));
}

// True when `p` sits on a 16-byte boundary (a Vec of 16 bytes may be loaded or stored there).
template <class T>
__host__ __device__ __forceinline__ bool aligned16(const T* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// Scalars before the first 16-byte boundary of `p` (an element-aligned pointer), at most n: the
// head that a peeled loop handles one element at a time before its 16-byte body.
template <class T>
__host__ __device__ __forceinline__ int64_t head_to_16(const T* p, int64_t n) {
  const int64_t mis = static_cast<int64_t>((reinterpret_cast<uintptr_t>(p) & 15) / sizeof(T));
  const int64_t head = mis ? 16 / static_cast<int64_t>(sizeof(T)) - mis : 0;
  return head < n ? head : n;
}

// The 16 bytes at `p`, which may sit at any element-aligned address: one 16-byte load when `p`
// is 16-byte aligned, else the widest loads its alignment allows (two of 8 bytes, four of 4,
// eight of 2). For an operand whose rows start at another 16-byte phase than the operand a
// kernel vectorizes (usually the output): within a row its phase relative to the vectorized
// one is fixed, so the branch is uniform across the threads walking that row.
template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_vec_any(const T* p) {
  static_assert(sizeof(T) * N == 16, "load_vec_any moves exactly 16 bytes");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  // Assembled as whole 32-bit words in registers (a store through a reinterpret_cast of the
  // Vec made ptxas give it a stack slot).
  uint4 r;
  if ((a & 15) == 0) {
    r = detail::ld_global_v4(p);
  } else if ((a & 7) == 0) {
    const uint2* q = reinterpret_cast<const uint2*>(p);
    const uint2 lo = detail::ld_global_v2(q), hi = detail::ld_global_v2(q + 1);
    r = make_uint4(lo.x, lo.y, hi.x, hi.y);
  } else if ((a & 3) == 0) {
    const unsigned* q = reinterpret_cast<const unsigned*>(p);
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = detail::ld_global_u32(q + i);
    r = make_uint4(w[0], w[1], w[2], w[3]);
  } else {  // 2-byte aligned: 16-bit elements only (typed pointers are element-aligned)
    const unsigned short* q = reinterpret_cast<const unsigned short*>(p);
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const unsigned lo = detail::ld_global_u16(q + 2 * i);
      const unsigned hi = detail::ld_global_u16(q + 2 * i + 1);
      w[i] = lo | (hi << 16);
    }
    r = make_uint4(w[0], w[1], w[2], w[3]);
  }
  return *reinterpret_cast<Vec<T, N>*>(&r);
}

// One 16-byte vector of an operand a kernel reads at its own 16-byte phase (kAny false: `p` is
// 16-byte aligned, one LDG.128) or at another operand's phase (kAny true: load_vec_any).
template <bool kAny, class T, int N>
__device__ __forceinline__ Vec<T, N> load_stream_at(const T* p) {
  if constexpr (kAny) return load_vec_any<T, N>(p);
  else return load_stream<T, N>(p);
}

// The 16 bytes of `v` to `p` at any element-aligned address: one 16-byte store when `p` is
// 16-byte aligned, else the widest stores its alignment allows.
// The store-side counterpart of load_vec_any, for kernels that keep element indices fixed
// across operands (column-wise schemes) instead of peeling at one operand's phase.
template <class T, int N>
__device__ __forceinline__ void store_vec_any(T* p, const Vec<T, N>& v) {
  static_assert(sizeof(T) * N == 16, "store_vec_any moves exactly 16 bytes");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint4 r = *reinterpret_cast<const uint4*>(&v);
  if ((a & 15) == 0) {
    detail::st_global_v4(p, r);
  } else if ((a & 7) == 0) {
    uint2* q = reinterpret_cast<uint2*>(p);
    detail::st_global_v2(q, make_uint2(r.x, r.y));
    detail::st_global_v2(q + 1, make_uint2(r.z, r.w));
  } else if ((a & 3) == 0) {
    unsigned* q = reinterpret_cast<unsigned*>(p);
    detail::st_global_u32(q, r.x);
    detail::st_global_u32(q + 1, r.y);
    detail::st_global_u32(q + 2, r.z);
    detail::st_global_u32(q + 3, r.w);
  } else {  // 2-byte aligned: 16-bit elements only
    unsigned short* q = reinterpret_cast<unsigned short*>(p);
    const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      detail::st_global_u16(q + 2 * i, static_cast<unsigned short>(w[i] & 0xFFFFu));
      detail::st_global_u16(q + 2 * i + 1, static_cast<unsigned short>(w[i] >> 16));
    }
  }
}

template <bool kAny, class T, int N>
__device__ __forceinline__ void store_stream_at(T* p, const Vec<T, N>& v) {
  if constexpr (kAny) store_vec_any<T, N>(p, v);
  else store_stream<T, N>(p, v);
}

// Whether every operand's rows start at one 16-byte phase, row by row: equal base phases and,
// for more than one row, row strides (bytes) equal modulo 16. Operands: (base, row stride in
// bytes). When they do, one head / 16-byte body / tail split of a row serves all of them;
// otherwise a kernel peels at one operand's phase and reads the others with load_vec_any.
inline bool rows_share_phase(int64_t rows, std::initializer_list<std::pair<const void*, int64_t>> ops) {
  const auto& first = *ops.begin();
  for (const auto& o : ops) {
    if ((reinterpret_cast<uintptr_t>(o.first) & 15) != (reinterpret_cast<uintptr_t>(first.first) & 15)) return false;
    if (rows > 1 && ((o.second - first.second) % 16) != 0) return false;
  }
  return true;
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
