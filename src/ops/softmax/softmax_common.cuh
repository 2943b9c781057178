// softmax/softmax_common.cuh — what the softmax rungs share beyond the row module
// (common/rows.cuh, which reads and reduces their rows): how many elements a thread holds on
// chip, the biased exponentials (RowExp), the packed row max, the online (max, sum) state, and
// the launch by dtype, direction and 16-byte row phase.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/vec.cuh"
#include "softmax/softmax_op.hpp"

namespace hk {

// Calls launch(T{}, std::bool_constant<kBackward>{}, std::bool_constant<kAny>{}) for a's dtype
// and direction; kAny is false when every operand's rows start at the input's 16-byte phase (one
// head / 16-byte body / tail split serves all of them), true when the rows are split at the
// output's phase and the other operands are read with load_vec_any.
template <class F>
void dispatch_softmax(const SoftmaxArgs& a, const char* name, F&& launch) {
  dispatch_float(a.dtype, name, [&](auto t) {
    const int64_t es = sizeof(t);
    const bool same = rows_share_phase(a.rows, {{a.a, a.ld_a * es}, {a.out, a.ld_out * es}}) &&
                      (!a.backward || rows_share_phase(a.rows, {{a.a, a.ld_a * es}, {a.dy, a.ld_dy * es}}));
    if (same) a.backward ? launch(t, std::true_type{}, std::false_type{}) : launch(t, std::false_type{}, std::false_type{});
    else a.backward ? launch(t, std::true_type{}, std::true_type{}) : launch(t, std::false_type{}, std::true_type{});
  });
}

// Elements of a row held in registers per thread per operand by the on-chip softmax rungs.
// NOTE: two f32 operands of 32 each (64 registers of data) spill at 512 threads (128 registers
// per thread at most), so backward f32 holds 16.
template <class T, bool kTwoOperands>
constexpr int kOnChipElems = (kTwoOperands && sizeof(T) == 4) ? 16 : 32;

// ---- exponentials ---------------------------------------------------------------------------
// exp(x - m) = exp2((x - m) * log2 e): MUFU.EX2 is the hardware exponential. It flushes results
// below 2^-126 to zero; that is all ex2.approx.ftz costs (one MUFU), where exp2f's IEEE
// subnormal results wrap it in three more instructions (FSETP, two predicated FMULs).
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// For sums and rescale factors, whose flushed terms are < 2^-126 against a sum >= 1. Scaling
// the difference (not x and m separately) keeps x - m exact for the values that matter, so
// large |x| (1e4) loses nothing to the prescale.
__device__ __forceinline__ float exp_shifted(float x, float m) { return ex2_ftz((x - m) * kLog2e); }

// Output exponentials carry a factor 2^kExpBias (RowExp) that the row's inverse sum takes
// back: a sum of biased terms (v02, v05) carries it too, an unbiased one (the online rungs) is
// multiplied by kUnbias. y = e * inv then stays exact down to subnormal outputs: e is flushed
// only below 2^-126 before the bias, where y < 2^-158, far under every dtype's absolute
// tolerance; e <= 2^32.5 and sums of up to 2^31 such terms stay far from overflow.
constexpr float kExpBias = 32.f;
constexpr float kUnbias = 1.f / 4294967296.f;  // 2^-kExpBias

// 1 / sum in one MUFU.RCP (rcp.approx, 1 ulp) instead of a division's ~10 instructions per
// row: sums here are >= 1 (>= 2^31.5 biased), +inf or NaN, never subnormal.
__device__ __forceinline__ float inv_sum(float sum) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(sum));
  return r;
}

// exp(x - m) * 2^kExpBias for a row whose max is m.
// kFolded: one FFMA, x * log2e + (kExpBias - m * log2e). The constant's rounding error d is the
// same for every element of the row, so it cancels between a sum and the outputs taken with
// the same RowExp (v02, v05: both passes), provided |d| stays small: |m| <= kFoldMax keeps
// |m log2e| < 2^24, d <= 0.5. Not for the online rungs, whose sums use exp_shifted.
// Exact: (x - m) then one FFMA with log2e and the bias (FADD, FFMA), for any m, including the
// NaN and +-inf maxima of special rows (their NaN outputs come from x - m as in the reference).
constexpr float kFoldMax = 8388608.f;  // 2^23

template <bool kFolded>
struct RowExp {
  float m;  // the row max
  float b;  // kFolded: kExpBias - m log2e
  __device__ __forceinline__ float operator()(float x) const {
    if constexpr (kFolded) return ex2_ftz(fmaf(x, kLog2e, b));
    else return ex2_ftz(fmaf(x - m, kLog2e, kExpBias));
  }
};

__device__ __forceinline__ RowExp<false> row_exp_exact(float m) { return {m, 0.f}; }

// Calls f(RowExp<true>) when the row max allows folding, else f(RowExp<false>). m must be
// uniform over the threads that reduce together (it is: every thread holds the reduced max),
// so the branch is uniform and f may contain their barriers.
template <class F>
__device__ __forceinline__ void with_row_exp(float m, F&& f) {
  if (fabsf(m) <= kFoldMax) f(RowExp<true>{m, fmaf(-m, kLog2e, kExpBias)});
  else f(row_exp_exact(m));
}

// NaN-propagating max over this thread's 16-byte vectors: 16-bit types compare packed pairs
// (HMNMX2.NAN, half an instruction per element, no widening; max is exact in any dtype), then
// one widened max per pair.
template <class T, int N>
__device__ __forceinline__ float slice_max(const Vec<T, kVec16<T>> (&v)[N]) {
  constexpr int kWords = N * 4;
  if constexpr (sizeof(T) == 2) {
    using T2 = std::conditional_t<std::is_same_v<T, __nv_bfloat16>, __nv_bfloat162, __half2>;
    T2 w[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = reinterpret_cast<const T2*>(&v[i / 4])[i % 4];
#pragma unroll
    for (int stride = 1; stride < kWords; stride *= 2)
#pragma unroll
      for (int i = 0; i + stride < kWords; i += 2 * stride) w[i] = __hmax2_nan(w[i], w[i + stride]);
    return max_nan(to_f32(w[0].x), to_f32(w[0].y));
  } else {
    float f[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) f[i] = v[i / 4].v[i % 4];
#pragma unroll
    for (int stride = 1; stride < kWords; stride *= 2)
#pragma unroll
      for (int i = 0; i + stride < kWords; i += 2 * stride) f[i] = max_nan(f[i], f[i + stride]);
    return f[0];
  }
}

// A vector of -inf: the max identity, and exp(-inf - m) = 0 for every finite or +inf m, so
// padding vectors past a row's end are neutral in the max and the sum without a bounds check
// per pass (m = -inf or NaN makes the whole row NaN whatever the padding holds).
template <class T>
__device__ __forceinline__ Vec<T, kVec16<T>> neg_inf_vec() {
  // Built as whole 32-bit words: element-wise 16-bit writes cost a PRMT per half word.
  constexpr uint32_t w = sizeof(T) == 4 ? 0xFF800000u : std::is_same_v<T, __half> ? 0xFC00FC00u : 0xFF80FF80u;
  const uint4 u = make_uint4(w, w, w, w);
  return *reinterpret_cast<const Vec<T, kVec16<T>>*>(&u);
}

// Running (max, sum of exp(x - max)) of an online softmax. Empty state: (-inf, 0).
struct MaxSum {
  float m;
  float s;
};

__device__ __forceinline__ MaxSum max_sum_empty() { return {-__builtin_huge_valf(), 0.f}; }

// Folds `n` values into `a`: one rescale per group, not one per element. While every value
// seen is -inf the state stays (-inf, 0) (exp(-inf - -inf) would be NaN); a NaN or +inf makes
// m NaN or +inf and s NaN, exactly as exp(x - max) does in the reference.
template <int N>
__device__ __forceinline__ void max_sum_add(MaxSum& a, const float (&v)[N]) {
  float mv = v[0];
#pragma unroll
  for (int k = 1; k < N; ++k) mv = max_nan(mv, v[k]);
  const float m = max_nan(a.m, mv);
  if (m == -__builtin_huge_valf()) return;
  float s = a.s * exp_shifted(a.m, m);
#pragma unroll
  for (int k = 0; k < N; ++k) s += exp_shifted(v[k], m);
  a = {m, s};
}

// Rescales a partial sum taken against max `m` to the combined max `M`.
__device__ __forceinline__ float rescale_sum(float s, float m, float M) {
  return M == -__builtin_huge_valf() ? 0.f : s * exp_shifted(m, M);
}

}  // namespace hk
