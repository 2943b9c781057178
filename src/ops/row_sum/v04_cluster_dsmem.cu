// row_sum/v04_cluster_dsmem.cu
//
// Rung 4: each row split across a thread-block cluster of C blocks (up to 16, non-portable
// size, when the device can co-schedule it; else 8). Every block sums its slice (1024
// threads, 4 x 16-byte loads in flight each: 64 KB per SM), then the C block partials meet in
// distributed shared memory (cluster_reduce: each block publishes its partial, one cluster
// barrier, every block reads all C) and block rank 0 writes y.
// Adds over v03: no workspace, no second launch, no global-memory round trip for partials;
// the split and the combine are one kernel. Limit: a cluster lives on one GPC, so a row gets
// at most 16 SMs; R rows occupy at most 16 R SMs (4 x 2^26 -> 64 of 132 SMs), and whether 64
// SMs with 64 KB in flight each can pull full HBM bandwidth is what the bench row measures.
// With rows >= SMs the cluster size drops to 1 (a plain block per row).
// Needs: sm_90 (clusters); operands aligned to their element size.
// Run:   hk bench row_sum --variant v04_cluster_dsmem --shape 4x67108864
#include <cooperative_groups.h>

#include "common/cluster_reduce.cuh"
#include "common/launch.cuh"
#include "common/rows.cuh"
#include "row_sum/row_sum_op.hpp"

namespace hk::row_sum_v04_cluster_dsmem {
namespace {

constexpr int kThreads = 1024;
constexpr int kUnroll = 4;
constexpr int kMaxCluster = 16;  // NOTE: > 8 needs cudaFuncAttributeNonPortableClusterSizeAllowed

template <class T>
__global__ void __launch_bounds__(kThreads) row_sum_v04_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                               int64_t rows, int64_t cols, int64_t ldx,
                                                               int64_t chunk) {
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int64_t csize = cluster.num_blocks();
  const int64_t rank = cluster.block_rank();
  const int64_t nclusters = gridDim.x / csize;
  const int64_t begin = rank * chunk;
  const int64_t len = begin >= cols ? 0 : (cols - begin < chunk ? cols - begin : chunk);
  // Every block of a cluster runs the same number of iterations: cluster_reduce's barriers
  // need all of them.
  for (int64_t r = blockIdx.x / csize; r < rows; r += nclusters) {
    float part = block_reduce<kThreads>(
        row_partial_sum<kUnroll, true>(x + r * ldx + begin, len, threadIdx.x, kThreads), SumOp{});
    float total = cluster_reduce(part, SumOp{});
    if (rank == 0 && threadIdx.x == 0) y[r] = from_f32<T>(total);
  }
}

// The largest cluster size the device can co-schedule for this kernel (16 or 8).
template <class T>
int max_cluster() {
  static const int best = [] {
    auto kernel = row_sum_v04_kernel<T>;
    HK_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = kMaxCluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(kMaxCluster);
    cfg.blockDim = dim3(kThreads);
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess || clusters < 1) {
      (void)cudaGetLastError();  // clear the error the refused query left behind
      return 8;
    }
    return kMaxCluster;
  }();
  return best;
}

template <class T>
void launch_typed(const RowSumArgs& a, cudaStream_t stream) {
  auto kernel = row_sum_v04_kernel<T>;
  static const int resident = resident_grid(kernel, kThreads);
  const int cmax = max_cluster<T>();
  // Enough slices to fill the resident grid, no slice below one pass of the block's loads.
  const int64_t min_chunk = int64_t(kThreads) * kVec16<T>;
  int64_t c = std::min<int64_t>({cmax, ceil_div(resident, a.rows), ceil_div(a.cols, min_chunk)});
  c = std::max<int64_t>(c, 1);
  const int64_t chunk = ceil_div(ceil_div(a.cols, c), 16) * 16;
  const int64_t clusters = std::min<int64_t>(a.rows, std::max<int64_t>(1, 0x7FFFFFFF / c));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(c);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * c));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  HK_CHECK_CUDA(cudaLaunchKernelEx(&cfg, kernel, static_cast<const T*>(a.x), static_cast<T*>(a.y), a.rows, a.cols,
                                   a.ldx, chunk));
  HK_CHECK_LAUNCH("row_sum_v04_kernel");
}

void row_sum_v04_launch(const RowSumArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "row_sum/v04_cluster_dsmem", [&](auto t) { launch_typed<decltype(t)>(a, stream); });
}

}  // namespace

HK_REGISTER_VARIANT(RowSumProblem, RowSumArgs, "row_sum", "v04_cluster_dsmem",
                    "row split across a thread-block cluster (<= 16 blocks), partials reduced through DSMEM",
                    90, kFlagNone, nullptr, row_sum_v04_launch);

}  // namespace hk::row_sum_v04_cluster_dsmem
