// broadcast/row_scale_relu_v03_oneshot_chunks.cu
//
// Rung 3: one short-lived 128-thread block per (row, chunk), forward and backward, so that few
// long rows (4 x 2^26) fill the GPU as well as many short ones.
// Forward: z = relu(x * y[j]), chunks of 1024 16-byte vectors, each thread loading its 8 vectors
// before the first store. v02 runs the same loop body (bcast::vector_rows) from a resident grid
// of 256-thread blocks, 4 vectors each: a block there loads, stores, then loads its next item,
// so its bytes in flight drop to zero between items, and 16384 rows over 1056 resident blocks
// end on a partial round. Here an SM holds 12 blocks of 128 threads x 8 vectors (40 registers:
// 192 KiB of loads issued at block start), and the block scheduler refills an SM as each block
// retires. Measured in a standalone sweep of the two designs (H200, 2026-11-29, % of cudaMemcpy
// D2D in the same run): 16384x8192 bf16 84.8% -> 91.5%, f32 85.5% -> 90.6%; 4 x 2^26 bf16
// 85.3% -> 92.8%, f32 84.8% -> 90.0%.
// Backward: chunks of 512 vectors of x and dz (4 each per thread, the same bytes in flight);
// a block writes dx and reduces its chunk's share of dy[j] = sum_i 1(x y > 0) x dz. A row of
// one chunk writes dy[j] itself; longer rows leave S f32 partials [N1, S] that a second kernel
// adds, a warp per row (a block for S > 1024), each thread a fixed set of them, then one
// reduction (deterministic, no atomics). v02's backward gives a row group a whole row: 4 rows of 2^26 ran
// on 4 SMs (10.3 ms bf16). NOTE: the column-sum helper sum_partials ([S, N1] layout) gave each of
// the 4 rows' 16384 partials to 32 threads in a serial chain: ~100 us of a 509 us backward.
// Adds over v02: one block per (row, chunk), 8 vectors in flight per thread, split rows backward.
// Any alignment: operands or row strides that are not 16-byte aligned take peeled kernels (the
// same item shapes): each row of z (dx) peeled to its first 16-byte boundary, 16-byte stores,
// x (and dz) read at z's (dx's) row phase — 16-byte loads where they share it, else the widest
// loads their phase allows (load_vec_any). Aligned operands run the kernels above unchanged.
// Run:   hk bench row_scale_relu --variant 'v0[23]*' --shape 16384x8192 --shape 4x67108864
#include <type_traits>

#include "broadcast/broadcast.cuh"
#include "common/launch.cuh"
#include "common/reduce.cuh"

namespace hk::broadcast_row_scale_relu_v03_oneshot_chunks {
namespace {

constexpr int kThr = 128;
constexpr int kUnr = 8;     // forward: x vectors in flight per thread
constexpr int kBwdUnr = 4;  // backward: x and dz vectors, 4 of each

template <class T>
__global__ void __launch_bounds__(kThr) row_scale_relu_v03_kernel(const T* __restrict__ x, const T* __restrict__ y,
                                                                   T* __restrict__ z, int64_t n1, int64_t n0,
                                                                   int64_t ldx, int64_t ldz) {
  bcast::vector_rows<T, BroadcastKind::kRowScaleRelu, kThr, kUnr>(x, y, z, n1, n0, ldx, ldz);
}

// Item (j, s) = j S + s: vectors [s * kChunk, (s + 1) * kChunk) of row j. Its sum goes to
// out[j S + s]: dy[j] itself when S == 1 (OutT = T), else the f32 partial (OutT = float).
template <class T, class OutT>
__global__ void __launch_bounds__(kThr) row_scale_relu_v03_bwd_kernel(const T* __restrict__ x, const T* __restrict__ y,
                                                                       const T* __restrict__ dz, T* __restrict__ dx,
                                                                       OutT* __restrict__ out, int64_t n1, int64_t n0,
                                                                       int64_t ldx, int64_t ldg, int64_t ldo,
                                                                       int64_t S) {
  constexpr int kV = kVec16<T>;
  constexpr int64_t kChunk = int64_t(kThr) * kBwdUnr;
  using V = Vec<T, kV>;
  const int64_t nvec = (n0 + kV - 1) / kV;
  for (int64_t item = blockIdx.x; item < n1 * S; item += gridDim.x) {
    const int64_t j = item / S, s = item - j * S;
    const float yv = to_f32(y[j]);
    const T* xr = x + j * ldx;
    const T* gr = dz + j * ldg;
    T* orow = dx + j * ldo;
    float acc = 0.f;
    auto apply = [&](const V& xv, const V& gv) { return bcast::relu_scale_grad<T, kV>(xv, gv, yv, acc); };
    if ((s + 1) * kChunk * kV <= n0) {  // a whole chunk: unguarded loads, all issued first
      const int64_t v0 = s * kChunk + threadIdx.x;
      V xv[kBwdUnr], gv[kBwdUnr];
#pragma unroll
      for (int u = 0; u < kBwdUnr; ++u) {
        xv[u] = load_stream<T, kV>(xr + (v0 + u * kThr) * kV);
        gv[u] = load_stream<T, kV>(gr + (v0 + u * kThr) * kV);
      }
#pragma unroll
      for (int u = 0; u < kBwdUnr; ++u) store_stream<T, kV>(orow + (v0 + u * kThr) * kV, apply(xv[u], gv[u]));
    } else {  // the row's last, partial chunk
      const int64_t end = min(nvec, (s + 1) * kChunk);
      for (int64_t v = s * kChunk + threadIdx.x; v < end; v += kThr)
        store_row_vec<T, kV>(orow, v * kV, n0, apply(load_row_vec<T, kV>(xr, v * kV, n0), load_row_vec<T, kV>(gr, v * kV, n0)));
    }
    acc = block_reduce<kThr>(acc, SumOp{});
    if (threadIdx.x == 0) out[item] = from_f32<OutT>(acc);
  }
}

// row_scale_relu_v03_bwd_kernel at any alignment: item (j, s) = chunk s of the body of dx's row
// j (peeled at dx's phase); the chunk-0 item also owns the row's scalar head and tail.
template <class T, class OutT>
__global__ void __launch_bounds__(kThr) row_scale_relu_v03_bwd_peeled_kernel(
    const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ dz, T* __restrict__ dx,
    OutT* __restrict__ out, int64_t n1, int64_t n0, int64_t ldx, int64_t ldg, int64_t ldo, int64_t S) {
  constexpr int kV = kVec16<T>;
  constexpr int64_t kChunk = int64_t(kThr) * kBwdUnr;
  using V = Vec<T, kV>;
  for (int64_t item = blockIdx.x; item < n1 * S; item += gridDim.x) {
    const int64_t j = item / S, s = item - j * S;
    const float yv = to_f32(y[j]);
    T* orow = dx + j * ldo;
    const int64_t head = head_to_16(orow, n0), nvec = (n0 - head) / kV, tail = n0 - head - nvec * kV;
    const T* xr = x + j * ldx;
    const T* gr = dz + j * ldg;
    float acc = 0.f;
    if (s == 0 && threadIdx.x < head + tail) {
      const int64_t e = threadIdx.x < head ? threadIdx.x : nvec * kV + threadIdx.x;
      const float xf = to_f32(xr[e]), gf = to_f32(gr[e]);
      const bool on = xf * yv > 0.f;
      orow[e] = from_f32<T>(on ? yv * gf : 0.f);
      acc += on ? xf * gf : 0.f;
    }
    const T* xb = xr + head;
    const T* gb = gr + head;
    T* ob = orow + head;
    const int64_t v0 = s * kChunk + threadIdx.x;
    V xv[kBwdUnr], gv[kBwdUnr];
    if (aligned16(xb) && aligned16(gb)) {
#pragma unroll
      for (int u = 0; u < kBwdUnr; ++u) {
        const int64_t v = v0 + u * kThr;
        if (v < nvec) {
          xv[u] = load_stream<T, kV>(xb + v * kV);
          gv[u] = load_stream<T, kV>(gb + v * kV);
        }
      }
    } else {
#pragma unroll
      for (int u = 0; u < kBwdUnr; ++u) {
        const int64_t v = v0 + u * kThr;
        if (v < nvec) {
          xv[u] = load_vec_any<T, kV>(xb + v * kV);
          gv[u] = load_vec_any<T, kV>(gb + v * kV);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kBwdUnr; ++u) {
      const int64_t v = v0 + u * kThr;
      if (v < nvec) store_stream<T, kV>(ob + v * kV, bcast::relu_scale_grad<T, kV>(xv[u], gv[u], yv, acc));
    }
    acc = block_reduce<kThr>(acc, SumOp{});
    if (threadIdx.x == 0) out[item] = from_f32<OutT>(acc);
  }
}

template <class T>
__global__ void __launch_bounds__(kThr) row_scale_relu_v03_peeled_kernel(const T* __restrict__ x,
                                                                          const T* __restrict__ y, T* __restrict__ z,
                                                                          int64_t n1, int64_t n0, int64_t ldx,
                                                                          int64_t ldz) {
  bcast::peeled_rows<T, BroadcastKind::kRowScaleRelu, kThr, kUnr>(x, y, z, n1, n0, ldx, ldz);
}

// dy[j] = the sum of row j's S partials by kT threads (a warp, or a 1024-thread block for the
// 16384 partials of a 2^26-element row): thread t adds partials t, t + kT, ... in order, then
// one warp or block reduction. NOTE: a 1024-thread block per row for every S (the first form)
// cost 16384 such blocks at 16384x8192 bf16 (S = 2): 277 us, against 201 us with the column-sum
// helper before it (H200, 2026-11-29).
template <class T, int kT>
__global__ void __launch_bounds__(kT == 32 ? 256 : kT) row_scale_relu_v03_dy_kernel(const float* __restrict__ part,
                                                                                  T* __restrict__ dy, int64_t n1,
                                                                                  int64_t S) {
  constexpr int kRowsPerBlock = kT == 32 ? 8 : 1;
  const int lane = threadIdx.x % kT;
  for (int64_t j = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kT; j < n1;
       j += int64_t(gridDim.x) * kRowsPerBlock) {
    float acc = 0.f;
    for (int64_t s = lane; s < S; s += kT) acc += part[j * S + s];
    if constexpr (kT == 32) acc = warp_reduce(acc, SumOp{});
    else acc = block_reduce<kT>(acc, SumOp{});
    if (lane == 0) dy[j] = from_f32<T>(acc);
  }
}

template <class T>
void launch_fwd(const BroadcastArgs& a, cudaStream_t s) {
  if (!bcast::rows_aligned<T>(a, true)) {
    bcast::launch_peeled_rows<T>(row_scale_relu_v03_peeled_kernel<T>, kThr, int64_t(kThr) * kUnr, a, a.ld_x, s,
                                 "row_scale_relu_v03_peeled_kernel");
    return;
  }
  const int64_t items = a.n1 * ceil_div(ceil_div(a.n0, kVec16<T>), int64_t(kThr) * kUnr);
  // One block per item; the body's grid-stride loop covers items past the grid limit.
  const int blocks = static_cast<int>(std::min<int64_t>(items, 0x7FFFFFFF));
  row_scale_relu_v03_kernel<T><<<blocks, kThr, 0, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.y),
                                                       static_cast<T*>(a.z), a.n1, a.n0, a.ld_x, a.ld_z);
  HK_CHECK_LAUNCH("row_scale_relu_v03_kernel");
}

template <class T>
void launch_bwd(const BroadcastArgs& a, cudaStream_t s) {
  const bool aligned = bcast::rows_aligned<T>(a, true);
  const int64_t S = aligned ? ceil_div(ceil_div(a.n0, kVec16<T>), int64_t(kThr) * kBwdUnr)
                            : bcast::peeled_chunks(a.n0, kVec16<T>, int64_t(kThr) * kBwdUnr);
  const int blocks = static_cast<int>(std::min<int64_t>(a.n1 * S, 0x7FFFFFFF));
  const T* x = static_cast<const T*>(a.x);
  const T* y = static_cast<const T*>(a.y);
  const T* dz = static_cast<const T*>(a.dz);
  T* dx = static_cast<T*>(a.z);
  T* dy = static_cast<T*>(a.dy);
  // The row pass: dx, and per item its share of dy[j] (dy[j] itself when S == 1).
  auto rows = [&](auto* out) {
    using OutT = std::remove_pointer_t<decltype(out)>;
    if (aligned) {
      row_scale_relu_v03_bwd_kernel<T, OutT><<<blocks, kThr, 0, s>>>(x, y, dz, dx, out, a.n1, a.n0, a.ld_x, a.ld_dz,
                                                                     a.ld_z, S);
      HK_CHECK_LAUNCH("row_scale_relu_v03_bwd_kernel");
    } else {
      row_scale_relu_v03_bwd_peeled_kernel<T, OutT><<<blocks, kThr, 0, s>>>(x, y, dz, dx, out, a.n1, a.n0, a.ld_x,
                                                                            a.ld_dz, a.ld_z, S);
      HK_CHECK_LAUNCH("row_scale_relu_v03_bwd_peeled_kernel");
    }
  };
  if (S == 1) {
    rows(dy);
    return;
  }
  StreamScratch part(a.n1 * S * int64_t(sizeof(float)), s);
  rows(part.as<float>());
  if (S <= 1024) {
    const int blocks = static_cast<int>(std::min<int64_t>(ceil_div(a.n1, 8), 0x7FFFFFFF));
    row_scale_relu_v03_dy_kernel<T, 32><<<blocks, 256, 0, s>>>(part.as<float>(), dy, a.n1, S);
  } else {
    const int blocks = static_cast<int>(std::min<int64_t>(a.n1, 0x7FFFFFFF));
    row_scale_relu_v03_dy_kernel<T, 1024><<<blocks, 1024, 0, s>>>(part.as<float>(), dy, a.n1, S);
  }
  HK_CHECK_LAUNCH("row_scale_relu_v03_dy_kernel");
}

void row_scale_relu_v03_launch(const BroadcastArgs& a, cudaStream_t s) {
  dispatch_float(a.dtype, "row_scale_relu/v03_oneshot_chunks", [&](auto t) {
    using T = decltype(t);
    a.backward ? launch_bwd<T>(a, s) : launch_fwd<T>(a, s);
  });
}



}  // namespace

HK_REGISTER_VARIANT(BroadcastProblem, BroadcastArgs, "row_scale_relu", "v03_oneshot_chunks",
                    "default: one 128-thread block per (row, chunk), 8 16-byte loads in flight per thread; backward "
                    "splits long rows (f32 partials, summed in chunk order); any alignment (peeled)",
                    90, kFlagProduction, nullptr, row_scale_relu_v03_launch);

}  // namespace hk::broadcast_row_scale_relu_v03_oneshot_chunks
