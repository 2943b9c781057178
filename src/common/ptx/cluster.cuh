// common/ptx/cluster.cuh — thread-block clusters: rank and the cluster-wide barrier.
#pragma once

#include <cuda/ptx>

#include <cstdint>

namespace hk::ptx {

__device__ __forceinline__ uint32_t cluster_ctarank() { return cuda::ptx::get_sreg_cluster_ctarank(); }

// Every thread of every CTA in the cluster arrives (release) and waits (acquire): orders
// barrier inits before remote arrivals at the start, and keeps a CTA's shared memory alive
// until its peers stop writing to it (multicast, remote arrivals) at the end.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" : : : "memory");
}

}  // namespace hk::ptx
