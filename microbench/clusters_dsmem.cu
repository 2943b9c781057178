// microbench/clusters_dsmem.cu — Experiment 7: thread-block clusters and distributed shared memory.
//
// A cluster's blocks run on SMs of one GPC and can read each other's shared memory (DSMEM)
// through the SM-to-SM network, and meet at a cluster barrier.
//   latency     one thread chases a random 1024-slot cycle in its own shared memory, in the peer
//               block's (cluster of 2), and in global memory through L2 (.cg, warmed): cycles per
//               dependent load
//   bandwidth   1024 threads per block read 16 bytes at a time from the next block's 32 KiB tile
//               (rank + 1 mod size) vs from their own; one block per SM, one wave of clusters
//   barrier     cluster.sync() in a loop vs __syncthreads(): cycles per barrier
//   sizes       1, 2, 4, 8, 16 (16 is non-portable: cudaFuncAttributeNonPortableClusterSizeAllowed);
//               cudaOccupancyMaxActiveClusters says how many fit at once
// Run: hk microbench clusters_dsmem
#include <cooperative_groups.h>

#include "hk/device.hpp"
#include "microbench/conclusions.hpp"
#include "microbench/ptx_local.cuh"

namespace cg = cooperative_groups;

namespace hk::mb {
namespace {

constexpr int kSlots = 1024;
constexpr int kSteps = 2048;
constexpr int kClusterThreads = 1024;
constexpr int kPasses = 256;
constexpr int kShift = 8;  // float4s the read pattern moves per pass: one 128-byte row

// spans[0]: own shared memory, [1]: the peer block's, [2]: global through L2.
__global__ void mb_cluster_latency_kernel(const uint32_t* chain, uint32_t* sink, ClockSpan* spans) {
  __shared__ uint32_t slots[kSlots];
  cg::cluster_group cluster = cg::this_cluster();
  for (int i = threadIdx.x; i < kSlots; i += blockDim.x) slots[i] = chain[i];
  cluster.sync();
  if (cluster.block_rank() == 0 && threadIdx.x == 0) {
    const uint32_t* peer = cluster.map_shared_rank(slots, 1);
    uint32_t j = 0;
    Stamp a = stamp();
    for (int s = 0; s < kSteps; ++s) j = slots[j];
    *sink = j;
    Stamp b = stamp();
    store_span(&spans[0], a, b);
    a = stamp();
    for (int s = 0; s < kSteps; ++s) j = peer[j];
    *sink = j;
    b = stamp();
    store_span(&spans[1], a, b);
    for (int s = 0; s < kSlots; ++s) j = __ldcg(chain + j);  // warm: every slot into L2
    a = stamp();
    for (int s = 0; s < kSteps; ++s) j = __ldcg(chain + j);
    *sink = j;
    b = stamp();
    store_span(&spans[2], a, b);
  }
  cluster.sync();  // the peer's shared memory must outlive the reads
}

// Each quarter-warp reads one aligned 128-byte row per load. Pass p reads the pattern p * shift
// float4s further on (mod the tile); `shift` is a kernel argument, so no compiler can prove two
// passes read the same addresses. (The first GPU run read the same addresses every pass with an
// empty asm memory clobber between passes: the compiler hoisted every DSMEM load out of the loop
// and kept 1 in 2 of the own-smem loads, so both rates were FADD rates, 461 and 250 B/clk/SM.)
template <bool kRemote>
__global__ void mb_cluster_read_kernel(int shift, float* sink, ClockSpan* spans) {
  __shared__ float4 tile[2048];
  cg::cluster_group cluster = cg::this_cluster();
  for (int i = threadIdx.x; i < 2048; i += blockDim.x) tile[i] = make_float4(i, 1, 2, 3);
  cluster.sync();
  const float4* src = kRemote ? cluster.map_shared_rank(tile, (cluster.block_rank() + 1) % cluster.num_blocks()) : tile;
  float4 acc[4] = {};
  Stamp a = stamp();
  for (int p = 0; p < kPasses; ++p) {
    const int row = int(threadIdx.x) + p * shift;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float4 v = src[(row + k * 256) & 2047];
      acc[k % 4].x += v.x, acc[k % 4].y += v.y, acc[k % 4].z += v.z, acc[k % 4].w += v.w;
    }
  }
  __syncthreads();
  Stamp b = stamp();
  if (threadIdx.x == 0) store_span(&spans[blockIdx.x], a, b);
  float total = 0;
  for (auto& v : acc) total += v.x + v.y + v.z + v.w;
  if (total == -1.0f) *sink = total;
  cluster.sync();
}

template <bool kCluster>
__global__ void mb_cluster_barrier_kernel(int iters, ClockSpan* spans) {
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  Stamp a = stamp();
  for (int i = 0; i < iters; ++i) {
    if constexpr (kCluster) cluster.sync();
    else __syncthreads();
  }
  Stamp b = stamp();
  if (threadIdx.x == 0) store_span(&spans[blockIdx.x], a, b);
}

cudaLaunchConfig_t config(int grid, int threads, size_t smem, cudaLaunchAttribute* attr, int csize) {
  cudaLaunchConfig_t c{};
  c.gridDim = dim3(grid);
  c.blockDim = dim3(threads);
  c.dynamicSmemBytes = smem;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = csize;
  attr->val.clusterDim.y = attr->val.clusterDim.z = 1;
  c.attrs = attr;
  c.numAttrs = 1;
  return c;
}

// Median cycles per unit (and SM MHz) over every block's span of three launches after a warm-up.
template <class Launch>
std::pair<double, double> span_median(Launch&& launch, ClockSpan* spans, int blocks, double units) {
  std::vector<double> cyc, mhz;
  for (int rep = 0; rep < 4; ++rep) {
    launch();
    HK_CHECK_CUDA(cudaDeviceSynchronize());
    if (rep == 0) continue;  // warm-up
    std::vector<ClockSpan> h(blocks);
    HK_CHECK_CUDA(cudaMemcpy(h.data(), spans, blocks * sizeof(ClockSpan), cudaMemcpyDeviceToHost));
    for (auto& s : h) cyc.push_back(double(s.cycles) / units), mhz.push_back(s.mhz());
  }
  return {median(cyc), median(mhz)};
}

Result run_clusters(const Options&) {
  const hk::DeviceInfo& d = hk::device_info();
  DeviceArray<uint32_t> chain(kSlots), usink(1);
  DeviceArray<float> sink(1);
  DeviceArray<ClockSpan> spans(std::max(d.sm_count, 3));
  chain.from_host(random_cycle(kSlots, 7));
  Result r;

  Table& lat = r.tables.emplace_back("dependent-load latency from one thread (cluster of 2)",
                                     std::vector<std::string>{"source", "cycles per load", "ns per load"});
  cudaLaunchAttribute attr{};
  cudaLaunchConfig_t c2 = config(2, 32, 0, &attr, 2);
  std::vector<double> cyc[3], ns[3];
  for (int rep = 0; rep < 3; ++rep) {
    HK_CHECK_CUDA(cudaLaunchKernelEx(&c2, mb_cluster_latency_kernel, chain.get(), usink.get(), spans.get()));
    HK_CHECK_CUDA(cudaDeviceSynchronize());
    auto h = spans.to_host();
    for (int k = 0; k < 3; ++k) cyc[k].push_back(double(h[k].cycles) / kSteps), ns[k].push_back(double(h[k].ns) / kSteps);
  }
  const char* names[3] = {"own shared memory", "peer block's shared memory (DSMEM)", "global memory, L2 hit (.cg)"};
  for (int k = 0; k < 3; ++k) lat.add({names[k], median(cyc[k]), median(ns[k])});

  const int pad = int(d.smem_per_sm / 2 + 1024);  // unused: keeps a second block off each SM
  for (const void* fn : {reinterpret_cast<const void*>(mb_cluster_read_kernel<true>),
                         reinterpret_cast<const void*>(mb_cluster_read_kernel<false>)}) {
    HK_CHECK_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, pad));
    HK_CHECK_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  HK_CHECK_CUDA(cudaFuncSetAttribute(mb_cluster_barrier_kernel<true>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  HK_CHECK_CUDA(cudaFuncSetAttribute(mb_cluster_barrier_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, pad));
  HK_CHECK_CUDA(cudaFuncSetAttribute(mb_cluster_barrier_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, pad));
  int potential = 0;
  {
    cudaLaunchConfig_t c = config(16, kClusterThreads, pad, &attr, 1);
    c.numAttrs = 0;  // the query proposes the cluster size itself
    if (cudaOccupancyMaxPotentialClusterSize(&potential, mb_cluster_read_kernel<true>, &c) != cudaSuccess) {
      cudaGetLastError();  // the sweep below still says which sizes launch
      potential = 0;
    }
  }
  Table& sizes = r.tables.emplace_back(
      "cluster sizes: one 1024-thread block per SM, one wave of clusters (largest size the device proposes: " +
          std::to_string(potential) + ")",
      std::vector<std::string>{"cluster size", "max active clusters", "SMs in use", "cluster.sync cycles",
                               "DSMEM read B/clk/SM", "own smem read B/clk/SM", "DSMEM / own %"});
  double peer_bpc2 = 0, local_bpc2 = 0, bar2 = 0, bar_big = 0;
  int big = 0;
  for (int cs : {1, 2, 4, 8, 16}) {
    cudaLaunchConfig_t c = config(cs, kClusterThreads, pad, &attr, cs);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, mb_cluster_read_kernel<true>, &c) != cudaSuccess || clusters == 0) {
      cudaGetLastError();
      sizes.add({cs, 0, 0, "-", "not launchable", "-", "-"});
      continue;
    }
    const int blocks = clusters * cs;
    c.gridDim = dim3(blocks);
    const double bytes = double(kClusterThreads) * kPasses * 8 * 16;
    auto remote = span_median([&] { HK_CHECK_CUDA(cudaLaunchKernelEx(&c, mb_cluster_read_kernel<true>, kShift, sink.get(), spans.get())); },
                              spans.get(), blocks, 1);
    auto local = span_median([&] { HK_CHECK_CUDA(cudaLaunchKernelEx(&c, mb_cluster_read_kernel<false>, kShift, sink.get(), spans.get())); },
                             spans.get(), blocks, 1);
    cudaLaunchConfig_t cb = config(blocks, 128, pad, &attr, cs);
    auto bar = span_median([&] { HK_CHECK_CUDA(cudaLaunchKernelEx(&cb, mb_cluster_barrier_kernel<true>, 1000, spans.get())); },
                           spans.get(), blocks, 1000);
    const double rb = bytes / remote.first, lb = bytes / local.first;
    sizes.add({cs, clusters, blocks, bar.first, rb, lb, 100 * rb / lb});
    if (cs == 2) peer_bpc2 = rb, local_bpc2 = lb, bar2 = bar.first;
    bar_big = bar.first, big = cs;
  }
  cudaLaunchConfig_t cc = config(d.sm_count, 128, pad, &attr, 1);
  auto cta = span_median([&] { HK_CHECK_CUDA(cudaLaunchKernelEx(&cc, mb_cluster_barrier_kernel<false>, 1000, spans.get())); },
                         spans.get(), d.sm_count, 1000);
  lat.conclusion = dsmem_conclusion(median(cyc[0]), median(cyc[1]), median(cyc[2]), peer_bpc2, local_bpc2);
  sizes.conclusion = "a cluster barrier costs " + num(bar2) + " cycles across 2 blocks and " + num(bar_big) + " across " +
                     std::to_string(big) + " (__syncthreads of 128 threads: " + num(cta.first) + ")";
  return r;
}

}  // namespace

std::string dsmem_conclusion(double local_cycles, double peer_cycles, double l2_cycles, double peer_bytes_per_clk_sm,
                             double local_bytes_per_clk_sm) {
  return "a peer block's shared memory is " + num(peer_cycles) + " cycles away (own: " + num(local_cycles) +
         ", L2: " + num(l2_cycles) + ", so DSMEM is " + num(l2_cycles / peer_cycles) + "x closer than L2) and streams " +
         num(peer_bytes_per_clk_sm) + " B/clk/SM in a cluster of 2, " +
         num(100 * peer_bytes_per_clk_sm / local_bytes_per_clk_sm) + "% of reading one's own";
}

HK_REGISTER_MICROBENCH(7, "clusters_dsmem", "distributed shared memory latency and bandwidth vs own smem and L2, "
                                           "cluster barrier cost, cluster sizes 1..16",
                       run_clusters);

}  // namespace hk::mb
