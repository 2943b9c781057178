// broadcast/row_scale_relu_v04_flat_vectors.cu
//
// Rung 4 (forward): z = relu(x * y[j]) as the elementwise maps run (gelu v03, add_scalar v02):
// x's rows seen as one flat array of 16-byte vectors (common/rows.cuh flat_vec: a 32-bit division
// per vector gives its row j and column), one short-lived 128-thread block per 256 of them, 2
// per thread, both loaded before the first store, y[j] through the read-only cache.
// Adds over v03: blocks of the shape docs/decisions.md measured best for elementwise maps
// (one-shot 128 x 2 vectors: 0.99-1.00x torch, where 128 x 8 ran 0.96-0.99x), and 30-32 registers.
// v03 gives a block a (row, chunk of 1024 vectors) item, 8 vectors per thread: ncu on the H200
// (2026-12-04, 16384x8192) measured it at 74 / 43 registers (bf16 / f32), 33% / 53% achieved
// occupancy, 129.4 / 263.4 us, against torch.compile's flat Triton kernel (131072 blocks of 128
// threads, 21 / 20 registers, 85% / 87% occupancy) at 127.6 / 251.2 us; from Python v03 ran
// 0.97x / 0.96x torch.compile at 16384x8192 and 0.96x / 0.95x at 4x2^26 (bench-torch.json).
// Measured (hk bench, H200, 2026-12-04; `hk bench row_scale_relu --quick --budget-ms 400
// --variant 'public,v03*,v04*' --shape 16384x8192 --shape 4x67108864 --dtype bf16,f32`), bf16 /
// f32: 128.0 / 252.7 us at 16384x8192 (99.4% / 100.6% of copy) against v03's 130.8 / 262.7
// (97.3% / 96.8%); 253.4 / 503.4 us at 4x2^26 (100.4% / 101.1%) against 260.3 / 527.1 (97.7% /
// 96.5%). From Python (`python -m hopperkit.bench`, the same day) 1.00x / 1.00x torch.compile at
// 16384x8192 and 0.99x / 1.00x at 4x2^26. One vector per thread (128 x 1, Triton's 1024-element
// block in bf16; measured beside it and then deleted) was within 1% either way: 255.4 /
// 498.6 us in f32 at the two shapes.
// Needs: forward; 16-byte aligned row starts of x and z (bases and row strides); N0 a multiple
// of 16 bytes (whole vectors: no tail code); fewer than 2^32 vectors (32-bit indices).
// Otherwise supports() says why, and v03 (any alignment, any N0, the backward) runs it.
// Run:   hk bench row_scale_relu --quick --variant 'v0[34]*' --shape 16384x8192 --dtype bf16,f32
#include <cstdint>

#include "broadcast/broadcast.cuh"
#include "common/launch.cuh"
#include "common/rows.cuh"

namespace hk::broadcast_row_scale_relu_v04_flat_vectors {
namespace {

constexpr int kThr = 128;
constexpr int kUnr = 2;  // 16-byte vectors per thread, both loaded before the first store

// Block b: flat vectors b * kThr * kUnr + u * kThr + tid of z (u < kUnr).
template <class T>
__global__ void __launch_bounds__(kThr) row_scale_relu_v04_kernel(const T* __restrict__ x, const T* __restrict__ y,
                                                                   T* __restrict__ z, uint32_t nvec, uint32_t row_vecs,
                                                                   int64_t ldx, int64_t ldz) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  const uint32_t base = blockIdx.x * (kThr * kUnr) + threadIdx.x;
  V xv[kUnr];
  float b[kUnr];
  FlatVec at[kUnr];
#pragma unroll
  for (int u = 0; u < kUnr; ++u) {
    const uint32_t i = base + u * kThr;
    if (i >= nvec) break;
    at[u] = flat_vec(i, row_vecs);
    xv[u] = load_stream<T, kV>(x + at[u].row * ldx + at[u].col * kV);
    b[u] = to_f32(y[at[u].row]);
  }
#pragma unroll
  for (int u = 0; u < kUnr; ++u) {
    if (base + u * kThr >= nvec) break;
    V o;
#pragma unroll
    for (int k = 0; k < kV; ++k)
      o.v[k] = from_f32<T>(bcast::combine<BroadcastKind::kRowScaleRelu>(to_f32(xv[u].v[k]), b[u]));
    store_stream<T, kV>(z + at[u].row * ldz + at[u].col * kV, o);
  }
}

template <class T>
void launch_typed(const BroadcastArgs& a, cudaStream_t s) {
  const int64_t row_vecs = a.n0 / kVec16<T>, nvec = a.n1 * row_vecs;
  if (nvec == 0) return;
  const int64_t blocks = ceil_div(nvec, int64_t(kThr) * kUnr);
  row_scale_relu_v04_kernel<T><<<static_cast<unsigned>(blocks), kThr, 0, s>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.y), static_cast<T*>(a.z), static_cast<uint32_t>(nvec),
      static_cast<uint32_t>(row_vecs), a.ld_x, a.ld_z);
  HK_CHECK_LAUNCH("row_scale_relu_v04_kernel");
}

void row_scale_relu_v04_launch(const BroadcastArgs& a, cudaStream_t s) {
  dispatch_float(a.dtype, "row_scale_relu/v04_flat_vectors", [&](auto t) { launch_typed<decltype(t)>(a, s); });
}

std::string row_scale_relu_v04_supports(const BroadcastProblem& p) {
  if (p.backward) return "forward only (the backward runs in v03_oneshot_chunks)";
  if (p.row_align() < 16)
    return "needs 16-byte aligned row starts of x and z (bases and row strides), got " +
           std::to_string(p.row_align()) + "-byte alignment (v03 peels such rows)";
  const int64_t esize = dtype_bits(p.dtype) / 8;
  if ((p.n0() * esize) % 16 != 0)
    return "rows of " + std::to_string(p.n0()) + " elements are not whole 16-byte vectors (N0 * " +
           std::to_string(esize) + " bytes must be a multiple of 16: no tail code)";
  const int64_t nvec = p.n1() * (p.n0() * esize / 16);
  if (nvec > int64_t(UINT32_MAX) - kUnr * kThr)
    return "32-bit vector indices: fewer than 2^32 16-byte vectors, got " + std::to_string(nvec);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(BroadcastProblem, BroadcastArgs, "row_scale_relu", "v04_flat_vectors",
                    "forward: the rows as one flat array of 16-byte vectors, one-shot 128-thread blocks of 2 per "
                    "thread",
                    90, kFlagProduction, row_scale_relu_v04_supports, row_scale_relu_v04_launch);

}  // namespace hk::broadcast_row_scale_relu_v04_flat_vectors
