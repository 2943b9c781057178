// softmax/v04_split_row_cluster.cu
//
// Rung 4: few long rows. Each row is split across a thread-block cluster of C blocks (up to
// 16, non-portable size, when the device can co-schedule it; else 8), C chosen so rows x C
// fills the resident grid (C = 1 when rows alone do). Each block reduces its slice to a
// (max, sum) pair (backward: a partial dot); the pairs meet in distributed shared memory —
// cluster_reduce of the maxima, each block rescales its sum to the cluster max, cluster_reduce
// of the sums — and every block normalizes its slice. A slice of <= 16384 elements (backward
// f32: 8192) stays in registers (v02's layout: one read, one write, so rows up to 16 x 16384
// keep the minimum traffic); a longer slice is streamed twice (v03's online pass, then the normalize
// pass: 2 reads + 1 write forward, 2 + 2 + 1 backward).
// Adds over v03: a row is no longer limited to one SM; over v02: rows past 16384 stay on chip
// up to 16 x 16384. Limit: a cluster lives on one GPC, so R rows occupy at most 16 R SMs
// (4 x 2^26 -> 64 of 132); rows too long for the cluster's registers cost a second read.
// Any alignment: slices are split at their own phase (head, 16-byte vectors, tail); operands
// whose rows start at different 16-byte phases take a second instantiation (kAny) that splits
// at the output's phase and reads the inputs with load_vec_any (as v02).
// Needs: sm_90 (clusters).
// Run:   hk bench softmax --variant v04_split_row_cluster --shape 4x67108864
#include <cooperative_groups.h>

#include "common/cluster_reduce.cuh"
#include "common/launch.cuh"
#include "common/rows.cuh"
#include "softmax/softmax_common.cuh"
#include "softmax/softmax_op.hpp"

namespace hk::softmax_v04_split_row_cluster {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;  // streamed slice: 16-byte loads in flight per thread
constexpr int kMaxCluster = 16;  // NOTE: > 8 needs cudaFuncAttributeNonPortableClusterSizeAllowed
template <class T, bool kBackward>
constexpr int64_t kSliceOnChip = int64_t(kThreads) * kOnChipElems<T, kBackward>;  // as v02

template <class T, bool kBackward, bool kOnChip, bool kAny>
__global__ void __launch_bounds__(kThreads) softmax_v04_kernel(const T* __restrict__ a, const T* __restrict__ dy,
                                                               T* __restrict__ out, int64_t rows, int64_t cols,
                                                               int64_t ld_a, int64_t ld_dy, int64_t ld_out,
                                                               int64_t chunk) {
  namespace cg = cooperative_groups;
  constexpr int kV = kVec16<T>;
  constexpr int kPer = kOnChip ? kOnChipElems<T, kBackward> / kV : 1;
  using V = Vec<T, kV>;
  const cg::cluster_group cluster = cg::this_cluster();
  const int64_t csize = cluster.num_blocks();
  const int64_t begin = int64_t(cluster.block_rank()) * chunk;
  const int64_t len = begin >= cols ? 0 : (cols - begin < chunk ? cols - begin : chunk);
  const int lane = threadIdx.x;
  // Every block of a cluster runs the same rows: cluster_reduce's barriers need all of them.
  for (int64_t r = blockIdx.x / csize; r < rows; r += gridDim.x / csize) {
    const T* ar = a + r * ld_a + begin;
    const T* dr = kBackward ? dy + r * ld_dy + begin : nullptr;
    T* o = out + r * ld_out + begin;
    // Shared by every operand's slice (same phase), or (kAny) the output's.
    const RowSplit s = kAny ? row_split(static_cast<const T*>(o), len) : row_split(ar, len);
    const bool has_edge = lane < s.edges();
    const int64_t edge = has_edge ? s.edge<kV>(lane) : 0;
    const float ea = has_edge ? to_f32(ar[edge]) : 0.f;
    const float ed = kBackward && has_edge ? to_f32(dr[edge]) : 0.f;
    V va[kPer], vd[kBackward ? kPer : 1];  // (kPer, kV) on-chip slice of this thread
    if constexpr (kOnChip) {
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int64_t i = lane + int64_t(k) * kThreads;
        if (i < s.nvec) {
          va[k] = load_stream_at<kAny, T, kV>(ar + s.head + i * kV);
          if constexpr (kBackward) vd[k] = load_stream_at<kAny, T, kV>(dr + s.head + i * kV);
        }
      }
    }
    // Visits this thread's vectors: from registers, or streamed kUnroll at a time.
    auto for_each_vec = [&](auto&& fn) {
      if constexpr (kOnChip) {
#pragma unroll
        for (int k = 0; k < kPer; ++k)
          if (lane + int64_t(k) * kThreads < s.nvec) fn(va[k], vd[kBackward ? k : 0]);
      } else {
        int64_t i = lane;
        for (; i + int64_t(kUnroll - 1) * kThreads < s.nvec; i += int64_t(kUnroll) * kThreads) {
          V ua[kUnroll], ud[kBackward ? kUnroll : 1];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            ua[u] = load_keep_at<kAny, T, kV>(ar + s.head + (i + u * kThreads) * kV);
            if constexpr (kBackward) ud[u] = load_keep_at<kAny, T, kV>(dr + s.head + (i + u * kThreads) * kV);
          }
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) fn(ua[u], ud[kBackward ? u : 0]);
        }
        for (; i < s.nvec; i += kThreads) {
          V ua = load_keep_at<kAny, T, kV>(ar + s.head + i * kV), ud = ua;
          if constexpr (kBackward) ud = load_keep_at<kAny, T, kV>(dr + s.head + i * kV);
          fn(ua, ud);
        }
      }
    };
    // Statistics of the slice, then of the row through DSMEM.
    float m = 0.f, inv = 0.f, dot = 0.f;
    if constexpr (kBackward) {
      dot = ea * ed;
      for_each_vec([&](const V& x, const V& d) {
#pragma unroll
        for (int j = 0; j < kV; ++j) dot += to_f32(x.v[j]) * to_f32(d.v[j]);
      });
      dot = cluster_reduce(block_reduce<kThreads>(dot, SumOp{}), SumOp{});
    } else {
      MaxSum st = max_sum_empty();
      if (has_edge) max_sum_add(st, {ea});
      for_each_vec([&](const V& x, const V&) {
        float f[kV];
#pragma unroll
        for (int j = 0; j < kV; ++j) f[j] = to_f32(x.v[j]);
        max_sum_add(st, f);
      });
      const float mb = block_reduce<kThreads>(st.m, MaxOp{});
      const float sb = block_reduce<kThreads>(rescale_sum(st.s, st.m, mb), SumOp{});
      m = cluster_reduce(mb, MaxOp{});
      inv = inv_sum(cluster_reduce(rescale_sum(sb, mb, m), SumOp{})) * kUnbias;
    }
    // Normalize the slice: from registers, or a second (streaming) read.
    auto apply = [&](float x, float d) { return kBackward ? x * (d - dot) : row_exp_exact(m)(x) * inv; };
    if (has_edge) o[edge] = from_f32<T>(apply(ea, ed));
    auto write = [&](const V& x, const V& d, int64_t i) {
      V w;
#pragma unroll
      for (int j = 0; j < kV; ++j) w.v[j] = from_f32<T>(apply(to_f32(x.v[j]), to_f32(d.v[j])));
      store_stream<T, kV>(o + s.head + i * kV, w);
    };
    if constexpr (kOnChip) {
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int64_t i = lane + int64_t(k) * kThreads;
        if (i < s.nvec) write(va[k], vd[kBackward ? k : 0], i);
      }
    } else {
      for (int64_t i = lane; i < s.nvec; i += kThreads) {
        const V x = load_stream_at<kAny, T, kV>(ar + s.head + i * kV);
        const V d = kBackward ? load_stream_at<kAny, T, kV>(dr + s.head + i * kV) : x;
        write(x, d, i);
      }
    }
  }
}

template <class Kernel>
cudaLaunchConfig_t cluster_config(Kernel, unsigned blocks, unsigned csize, cudaLaunchAttribute* attr,
                                  cudaStream_t stream) {
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = csize;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// The largest cluster size the device can co-schedule for `kernel` (16 or 8).
template <class Kernel>
int max_cluster(Kernel kernel) {
  HK_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = cluster_config(kernel, kMaxCluster, kMaxCluster, attr, nullptr);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess || clusters < 1) {
    (void)cudaGetLastError();  // clear the error the refused query left behind
    return 8;
  }
  return kMaxCluster;
}

template <class T, bool kBackward, bool kOnChip, bool kAny>
void launch_kernel(const SoftmaxArgs& a, int64_t csize, int64_t chunk, cudaStream_t stream) {
  auto kernel = softmax_v04_kernel<T, kBackward, kOnChip, kAny>;
  const int64_t clusters = std::min<int64_t>(a.rows, 0x7FFFFFFF / csize);
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = cluster_config(kernel, static_cast<unsigned>(clusters * csize),
                                          static_cast<unsigned>(csize), attr, stream);
  HK_CHECK_CUDA(cudaLaunchKernelEx(&cfg, kernel, static_cast<const T*>(a.a), static_cast<const T*>(a.dy),
                                   static_cast<T*>(a.out), a.rows, a.cols, a.ld_a, a.ld_dy, a.ld_out, chunk));
  HK_CHECK_LAUNCH("softmax_v04_kernel");
}

template <class T, bool kBackward, bool kAny>
void launch_typed(const SoftmaxArgs& a, cudaStream_t stream) {
  static const int resident = resident_grid(softmax_v04_kernel<T, kBackward, false, kAny>, kThreads);
  static const int cmax = std::min(max_cluster(softmax_v04_kernel<T, kBackward, true, kAny>),
                                   max_cluster(softmax_v04_kernel<T, kBackward, false, kAny>));
  // Enough slices to fill the resident grid; no slice shorter than one load per thread.
  int64_t c = std::min<int64_t>({cmax, ceil_div(resident, a.rows), ceil_div(a.cols, int64_t(kThreads) * kVec16<T>)});
  c = std::max<int64_t>(c, 1);
  // If a few more blocks would bring the slices on chip, take them.
  constexpr int64_t on_chip = kSliceOnChip<T, kBackward>;
  if (ceil_div(a.cols, c) > on_chip && ceil_div(a.cols, on_chip) <= cmax) c = ceil_div(a.cols, on_chip);
  // Slices are whole multiples of 16 elements: every slice starts at its row's 16-byte phase.
  const int64_t chunk = ceil_div(ceil_div(a.cols, c), 16) * 16;
  if (chunk <= on_chip) launch_kernel<T, kBackward, true, kAny>(a, c, chunk, stream);
  else launch_kernel<T, kBackward, false, kAny>(a, c, chunk, stream);
}

void softmax_v04_launch(const SoftmaxArgs& a, cudaStream_t stream) {
  dispatch_softmax(a, "softmax/v04_split_row_cluster", [&](auto t, auto bwd, auto any) {
    launch_typed<decltype(t), decltype(bwd)::value, decltype(any)::value>(a, stream);
  });
}

}  // namespace

HK_REGISTER_VARIANT(SoftmaxProblem, SoftmaxArgs, "softmax", "v04_split_row_cluster",
                    "row split across a cluster (<= 16 blocks), (max, sum) pairs merged through DSMEM; any alignment (peeled)", 90,
                    kFlagProduction, nullptr, softmax_v04_launch);

}  // namespace hk::softmax_v04_split_row_cluster
