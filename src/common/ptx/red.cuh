// common/ptx/red.cuh — fire-and-forget global reductions and the flag protocol that orders them:
// red.global.add on f32 pairs (sm_90's vector form: one instruction per 8-byte pair), and an
// acquire load / release add on a 32-bit counter for CTAs that take turns adding into the same
// buffer (a deterministic order of float additions).
//
// The turn protocol (one counter per destination tile, zero before the launch):
//   waiter:  one thread spins on ld_acquire_gpu(flag) until it reads its turn, then a barrier
//            over the threads that add (their adds come after the acquire);
//   adder:   every thread's red_add_v2 ..., then __threadfence(), a barrier, and one thread's
//            red_release_gpu_add(flag, 1): the fence and the barrier put every thread's adds
//            before the release, so the next turn's adds land after them.
//   bulk adder (one thread adds a whole tile with cp.reduce.async.bulk, ptx/tma.cuh): the spin
//            on ld_acquire_gpu, fence_proxy_async_global() (the acquire before the async
//            proxy's reduction), the reduction, its commit and bulk_wait_group_all() (complete),
//            fence_proxy_async_global() again (its writes before the release), and the release.
#pragma once

#include <cstdint>

namespace hk::ptx {

// *addr += {x, y} (addr 8-byte aligned), relaxed, no return value.
__device__ __forceinline__ void red_add_v2(float* addr, float x, float y) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" : : "l"(addr), "f"(x), "f"(y) : "memory");
}

// A load with acquire semantics at GPU scope (sees everything released before the value it reads).
__device__ __forceinline__ int ld_acquire_gpu(const int* addr) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
  return v;
}

// *addr += v with release semantics at GPU scope.
__device__ __forceinline__ void red_release_gpu_add(int* addr, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;" : : "l"(addr), "r"(v) : "memory");
}

// Orders this thread's generic-proxy accesses of global memory (an acquire, a release, ordinary
// loads and stores) with its async-proxy ones (bulk copies and reductions) across the fence.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }

}  // namespace hk::ptx
