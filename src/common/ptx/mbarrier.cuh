// common/ptx/mbarrier.cuh — shared-memory mbarriers: the handshake between the copy engine
// (TMA), the producer and the consumers of a pipelined kernel.
//
// A phase of a barrier completes when its pending arrival count reaches zero AND its expected
// transaction bytes (expect_tx, then TMA's complete_tx) have all landed. Waiters name the
// phase by parity: wait(bar, p) returns once the phase with parity p has completed; right after
// init, the "previous" phase (parity 1) counts as completed, which is what lets a producer's
// first wait on an empty-slot barrier pass. Thin wrappers over CCCL's cuda::ptx.
#pragma once

#include <cuda/ptx>

#include <cstdint>

namespace hk::ptx {

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals) { cuda::ptx::mbarrier_init(bar, arrivals); }

// Makes the inits visible to the other CTAs of the cluster (and to the async proxy) before the
// cluster barrier that follows them.
__device__ __forceinline__ void mbar_fence_init() {
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}

// One arrival plus `bytes` of expected transactions for the current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, bar,
                                       bytes);
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

// One arrival (release, CTA scope) on a barrier of this CTA.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  cuda::ptx::mbarrier_arrive(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, bar);
}

// One arrival on the barrier at the same shared-memory offset in CTA `cta_rank` of this
// cluster (the own rank included), with release semantics at cluster scope: everything this
// thread did before (its reads of the slot) is ordered before the arrival.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta_rank) {
  uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(bar)), remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(cta_rank));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" : : "r"(remote) : "memory");
}

// The same arrival with the instruction's default semantics (release at CTA scope), as CUTLASS's
// ClusterBarrier::arrive(cta_id) issues it. ptxas lowers the cluster-scope release above to
// MEMBAR.ALL.CTA + MEMBAR.ALL.GPU before the arrive; this form is a bare SYNCS.ARRIVE. It is
// enough when what the arrival hands over are reads already known complete, e.g. wgmma's reads of
// a pipeline slot after wgmma.wait_group: the peer's next TMA write to the slot is ordered after
// them by the barrier alone.
__device__ __forceinline__ void mbar_arrive_cluster_cta(uint64_t* bar, uint32_t cta_rank) {
  uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(bar)), remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(cta_rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" : : "r"(remote) : "memory");
}

}  // namespace hk::ptx
