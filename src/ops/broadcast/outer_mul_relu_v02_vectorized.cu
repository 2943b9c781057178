// broadcast/outer_mul_relu_v02_vectorized.cu
//
// Rung 2: z[j,i] = relu(y[j] * x[i]) with 16-byte stores (8 bf16 / 4 f32), a block per (chunk of
// 1024 vectors, group of 4 rows): x's chunk is loaded once into registers (keep policy) and
// written to all four rows, y[j] read once per row, and kUnroll vectors in flight per thread;
// a resident grid whose blocks claim their next item from a counter (common/tickets.cuh) and
// load its chunk of x before storing the current item's rows (for_each_item_prefetched).
// Adds over v01: 4-8x fewer memory instructions and no 64-bit division per element; traffic is
// the minimum (z written once, x and y read ~once).
// A contiguous z whose rows are whole 16-byte vectors (the common case) takes a flat kernel
// instead (outer_mul_relu_v02_flat_kernel, bcast::flat_outer): one short-lived block per 1024
// vectors of z, a 64-bit division per vector for its row (torch.compile's shape; the items above
// ran 0.85-0.86x torch.compile f32 from Python; broadcast.cuh has the sweep).
// Any alignment: operands or z row strides that are not 16-byte aligned take a second kernel
// (outer_mul_relu_v02_peeled_kernel, bcast::peeled_rows): each row of z peeled to its first 16-byte
// boundary, 16-byte stores, x read at z's row phase (16-byte loads where it shares it).
// Run:   hk bench outer_mul_relu --variant v02_vectorized --shape 16384x8192
#include "broadcast/broadcast.cuh"
#include "common/launch.cuh"

namespace hk::broadcast_outer_mul_relu_v02_vectorized {
namespace {

template <class T>
__global__ void __launch_bounds__(bcast::kThreads, bcast::kOuterMinBlocks<T>)
    outer_mul_relu_v02_kernel(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ z, int64_t n1, int64_t n0,
                      int64_t ldx, int64_t ldz, unsigned long long* tickets) {
  bcast::vector_rows<T, BroadcastKind::kOuterMulRelu>(x, y, z, n1, n0, ldx, ldz, tickets);
}

template <class T>
__global__ void __launch_bounds__(bcast::kFlatThreads)
    outer_mul_relu_v02_flat_kernel(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ z, int64_t n1, int64_t n0) {
  bcast::flat_outer<T, BroadcastKind::kOuterMulRelu>(x, y, z, n1, n0);
}

template <class T>
__global__ void __launch_bounds__(bcast::kPeelThreads)
    outer_mul_relu_v02_peeled_kernel(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ z, int64_t n1,
                            int64_t n0, int64_t ldx, int64_t ldz) {
  bcast::peeled_rows<T, BroadcastKind::kOuterMulRelu>(x, y, z, n1, n0, ldx, ldz);
}

void outer_mul_relu_v02_launch(const BroadcastArgs& a, cudaStream_t s) {
  dispatch_float(a.dtype, "outer_mul_relu/v02_vectorized", [&](auto t) {
    using T = decltype(t);
    if (!bcast::rows_aligned<T>(a, false)) {
      bcast::launch_peeled_rows<T>(outer_mul_relu_v02_peeled_kernel<T>, bcast::kPeelThreads,
                                   int64_t(bcast::kPeelThreads) * bcast::kPeelUnroll, a, 0, s,
                                   "outer_mul_relu_v02_peeled_kernel");
      return;
    }
    if (bcast::flat_outer_fits<T>(a)) {
      bcast::launch_flat_outer<T>(outer_mul_relu_v02_flat_kernel<T>, a, s, "outer_mul_relu_v02_flat_kernel");
      return;
    }
    static const int resident = resident_grid(outer_mul_relu_v02_kernel<T>, bcast::kThreads);
    bcast::launch_vector_rows<BroadcastKind::kOuterMulRelu, T>(outer_mul_relu_v02_kernel<T>, resident, a, 0, s, "outer_mul_relu_v02_kernel");
  });
}

}  // namespace

HK_REGISTER_VARIANT(BroadcastProblem, BroadcastArgs, "outer_mul_relu", "v02_vectorized",
                    "16-byte stores; contiguous z: flat one-shot blocks of 256 x 4 vectors; other aligned rows: x loaded once per (chunk, 4 rows), items claimed dynamically", 70,
                    kFlagProduction, nullptr, outer_mul_relu_v02_launch);

}  // namespace hk::broadcast_outer_mul_relu_v02_vectorized
