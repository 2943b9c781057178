// common/cluster_reduce.cuh — the cluster-wide reduction of common/reduce.cuh's operators, through
// distributed shared memory (cooperative groups' cluster API).
#pragma once

#include <cooperative_groups.h>

#include "common/reduce.cuh"

namespace hk {

// Cluster-wide reduction through distributed shared memory: each block publishes its partial
// in its own shared memory, the cluster synchronizes, every block reads all partials.
// Call from every thread of every block in the cluster with the block's reduced value.
template <class Op>
__device__ __forceinline__ float cluster_reduce(float block_value, Op op) {
  namespace cg = cooperative_groups;
  __shared__ float partial;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) partial = block_value;
  cluster.sync();
  float r = Op::kIdentity;
  for (unsigned b = 0; b < cluster.num_blocks(); ++b) r = op(r, *cluster.map_shared_rank(&partial, b));
  cluster.sync();  // no block may exit (freeing its smem) while peers still read it
  return r;
}

}  // namespace hk
