// broadcast/row_scale_relu_v02_vectorized.cu
//
// Rung 2: forward with 16-byte accesses, a block per (row, 8192-element chunk), kUnroll
// vectors in flight (the shared vector_rows body), a resident grid claiming items from a counter
// (common/tickets.cuh). Backward fused into one pass: a row group
// (a warp for rows of <= 128 vectors, 8 rows per block; else a 256-thread block) streams x and
// dz once with 16-byte loads, writes dx and reduces dy[j] in f32 at the same time.
// Adds over v01: 16-byte accesses and, backward, one read of x and dz instead of two
// (5 bytes moved per 3 before: the minimum traffic).
// Needs: 16-byte aligned operands and row strides (the public op falls back to v01).
// Run:   hk bench row_scale_relu --variant v02_vectorized --shape 16384x8192
#include "broadcast/broadcast.cuh"
#include "common/launch.cuh"
#include "common/reduce.cuh"

namespace hk::broadcast_row_scale_relu_v02_vectorized {
namespace {

using bcast::kThreads;
using bcast::kUnroll;

template <class T>
__global__ void __launch_bounds__(kThreads)
    row_scale_relu_v02_kernel(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ z, int64_t n1,
                              int64_t n0, int64_t ldx, int64_t ldz, unsigned long long* tickets) {
  bcast::vector_rows<T, BroadcastKind::kRowScaleRelu>(x, y, z, n1, n0, ldx, ldz, tickets);
}

template <class T, int kGroup>
__global__ void __launch_bounds__(kThreads) row_scale_relu_v02_bwd_kernel(const T* __restrict__ x,
                                                                          const T* __restrict__ y,
                                                                          const T* __restrict__ dz, T* __restrict__ dx,
                                                                          T* __restrict__ dy, int64_t n1, int64_t n0,
                                                                          int64_t ldx, int64_t ldg, int64_t ldo) {
  constexpr int kV = kVec16<T>;
  constexpr int kGroups = kThreads / kGroup;
  using V = Vec<T, kV>;
  const int lane = threadIdx.x % kGroup;
  const int64_t nvec = (n0 + kV - 1) / kV;
  const int64_t nwhole = n0 / kV;  // vectors wholly inside the row
  for (int64_t j = int64_t(blockIdx.x) * kGroups + threadIdx.x / kGroup; j < n1; j += int64_t(gridDim.x) * kGroups) {
    const float yv = to_f32(y[j]);
    const T* xr = x + j * ldx;
    const T* gr = dz + j * ldg;
    T* orow = dx + j * ldo;
    float acc = 0.f;
    auto apply = [&](const V& xv, const V& gv, V& o) { o = bcast::relu_scale_grad<T, kV>(xv, gv, yv, acc); };
    // Batches of kUnroll whole vectors: unguarded 16-byte loads, all issued before the first use.
    // NOTE: the guarded element fallback inside this unrolled loop (the previous form) held its
    // scalars for every u: 101 registers at bf16, 2 blocks per SM.
    int64_t v0 = lane;
    for (; v0 + (kUnroll - 1) * kGroup < nwhole; v0 += kGroup * kUnroll) {
      V xv[kUnroll], gv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        xv[u] = load_stream<T, kV>(xr + (v0 + u * kGroup) * kV);
        gv[u] = load_stream<T, kV>(gr + (v0 + u * kGroup) * kV);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        V o;
        apply(xv[u], gv[u], o);
        store_stream<T, kV>(orow + (v0 + u * kGroup) * kV, o);
      }
    }
    // The rest of the row (fewer than kUnroll vectors of this thread, the partial last one
    // included): one vector at a time, element by element at the tail.
    for (; v0 < nvec; v0 += kGroup) {
      const V xv = load_row_vec<T, kV>(xr, v0 * kV, n0), gv = load_row_vec<T, kV>(gr, v0 * kV, n0);
      V o;
      apply(xv, gv, o);
      store_row_vec<T, kV>(orow, v0 * kV, n0, o);
    }
    acc = group_sum<kGroup, kThreads>(acc);
    if (lane == 0) dy[j] = from_f32<T>(acc);
  }
}

template <class T, int kGroup>
void launch_bwd(const BroadcastArgs& a, cudaStream_t s) {
  constexpr int kGroups = kThreads / kGroup;
  auto kernel = row_scale_relu_v02_bwd_kernel<T, kGroup>;
  static const int resident = resident_grid(kernel, kThreads);
  const int blocks = static_cast<int>(balanced_grid(ceil_div(a.n1, kGroups), resident));
  kernel<<<blocks, kThreads, 0, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.y),
                                     static_cast<const T*>(a.dz), static_cast<T*>(a.z), static_cast<T*>(a.dy), a.n1,
                                     a.n0, a.ld_x, a.ld_dz, a.ld_z);
  HK_CHECK_LAUNCH("row_scale_relu_v02_bwd_kernel");
}

void row_scale_relu_v02_launch(const BroadcastArgs& a, cudaStream_t s) {
  dispatch_float(a.dtype, "row_scale_relu/v02_vectorized", [&](auto t) {
    using T = decltype(t);
    if (!a.backward) {
      static const int resident = resident_grid(row_scale_relu_v02_kernel<T>, bcast::kThreads);
      bcast::launch_vector_rows<BroadcastKind::kRowScaleRelu, T>(row_scale_relu_v02_kernel<T>, resident, a, a.ld_x, s,
                                                                  "row_scale_relu_v02_kernel");
    } else if (ceil_div(a.n0, kVec16<T>) <= 32 * kUnroll) {
      launch_bwd<T, 32>(a, s);
    } else {
      launch_bwd<T, kThreads>(a, s);
    }
  });
}

}  // namespace

HK_REGISTER_VARIANT(BroadcastProblem, BroadcastArgs, "row_scale_relu", "v02_vectorized",
                    "16-byte accesses; backward fused: one pass writes dx and reduces dy per row", 70,
                    kFlagNone, bcast::vector_supports, row_scale_relu_v02_launch);

}  // namespace hk::broadcast_row_scale_relu_v02_vectorized
