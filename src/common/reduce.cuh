// common/reduce.cuh — warp and block reductions in f32 for the reduction families (the cluster
// reduction: common/cluster_reduce.cuh).
//
// NaN semantics: sums propagate NaN by IEEE arithmetic; max_nan() propagates NaN explicitly
// (fmaxf(NaN, x) returns x, which would silently drop a NaN that the reference keeps).
// Device code here targets sm_90a only (PTX max.NaN needs sm_80). The cluster-wide reduction is
// in common/cluster_reduce.cuh: cooperative_groups.h brings in much of libcu++ (atomics, chrono,
// iostreams), a few seconds of compile time in every file that would include it.
#pragma once

namespace hk {

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
  static constexpr float kIdentity = 0.0f;
};

// max that returns NaN if either operand is NaN: PTX max.NaN, one FMNMX.NAN. The portable
// (a != a || a > b) ? a : b compiled to three (FSETP, FSETP.NAN, FSEL) in a serial chain: 3 of
// softmax v02's ~21 instructions per element.
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return max_nan(a, b); }
  static constexpr float kIdentity = -__builtin_huge_valf();
};

template <class Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;  // every lane holds the result
}

// Block-wide reduction of a 1-D block of kThreads; every thread receives the result.
// Each warp reduces by shuffles, lane 0 publishes the warp's value, and after one barrier every
// thread folds the kThreads/32 values itself (broadcast shared loads; warp order, so the result
// is the same in every thread and deterministic). The __syncwarp() reconverges the warp after
// lane 0's store before the barrier: cub::BlockReduce reaches its barrier from that branch
// without it, and compute-sanitizer synccheck reported "Divergent thread(s) in warp" there
// (softmax v04, H200, 2026-11-29; docs/decisions.md).
template <int kThreads, class Op>
__device__ __forceinline__ float block_reduce(float v, Op op) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "block_reduce needs whole warps");
  constexpr int kWarps = kThreads / 32;
  __shared__ float partial[kWarps];
  v = warp_reduce(v, op);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncwarp();
  __syncthreads();
  float r = partial[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) r = op(r, partial[w]);
  __syncthreads();  // `partial` may be rewritten by the caller's next reduction
  return r;
}

}  // namespace hk
