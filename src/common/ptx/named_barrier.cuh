// common/ptx/named_barrier.cuh — the CTA's 16 hardware barriers by id (0 is __syncthreads'),
// for subsets of warps that synchronise without the rest of the block: gemm's consumer
// warpgroups, rmsnorm v07's row groups.
#pragma once

namespace hk::ptx {

// Waits until `threads` threads (a multiple of 32) have reached barrier `id`.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" : : "r"(id), "r"(threads) : "memory");
}

// Counts the calling warps into named barrier `id` without waiting for it (the waiting side
// calls named_barrier_sync with the same total `threads`).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" : : "r"(id), "r"(threads) : "memory");
}

}  // namespace hk::ptx
