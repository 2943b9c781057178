// rmsnorm/v02_fused_row.cu
//
// Rung 2: the course's fused kernel. Forward: one block per row; the row is read once from HBM
// into shared memory while the sum of squares accumulates, then normalized from shared memory:
// one read of x, one write of y. Backward: a grid of resident blocks walks the rows; each row's
// x and dy are staged in shared memory once (S = sum g*dy*x, then dx from shared memory), and
// the block accumulates its rows' dg contribution in a shared f32 [D] vector, written out as one
// row of a [blocks, D] partial buffer that a tiny second kernel sums (deterministic order).
// Adds over v01: fusion. Forward moves 2 bytes per element instead of 3; backward reads x and
// dy once instead of twice and replaces the column pass by a [blocks, D] partial (~2% of the
// traffic at 16384x8192).
// Needs: the staged row(s) in shared memory: D * sizeof(T) (forward) or D * (2 sizeof(T) + 4)
// (backward) <= 192 KiB; scalar loads, so any alignment and row stride.
// Run:   hk bench rmsnorm --variant v02_fused_row --shape 16384x8192
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "common/vec.cuh"
#include "rmsnorm/rmsnorm_op.hpp"

namespace hk::rmsnorm_v02_fused_row {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kSmemLimit = 192 * 1024;  // NOTE: sm_90 opts in to 227 KiB; CUB's temp storage needs the rest

int64_t smem_bytes(const RmsNormProblem& p) {
  int64_t e = dtype_bits(p.dtype) / 8;
  return p.backward ? p.dim * (2 * e + 4) : p.dim * e;
}

template <class T>
__global__ void __launch_bounds__(kThreads) rmsnorm_v02_fwd_kernel(const T* __restrict__ x, const T* __restrict__ g,
                                                                   T* __restrict__ y, float* __restrict__ rstd,
                                                                   int64_t rows, int64_t dim, int64_t ldx,
                                                                   int64_t ldy, float eps) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* row = reinterpret_cast<T*>(smem);  // (dim) the staged row
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float ss = 0.f;
    for (int64_t d = threadIdx.x; d < dim; d += kThreads) {
      T v = x[r * ldx + d];
      row[d] = v;  // each thread re-reads only what it wrote: no barrier needed before use
      float f = to_f32(v);
      ss += f * f;
    }
    ss = block_reduce<kThreads>(ss, SumOp{});
    const float rs = rsqrtf(ss / float(dim) + eps);
    if (threadIdx.x == 0) rstd[r] = rs;
    for (int64_t d = threadIdx.x; d < dim; d += kThreads)
      y[r * ldy + d] = from_f32<T>(to_f32(row[d]) * rs * to_f32(g[d]));
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) rmsnorm_v02_bwd_kernel(const T* __restrict__ x, const T* __restrict__ g,
                                                                   const float* __restrict__ rstd,
                                                                   const T* __restrict__ dy, T* __restrict__ dx,
                                                                   float* __restrict__ part, int64_t rows,
                                                                   int64_t dim, int64_t ldx, int64_t ldg,
                                                                   int64_t ldo) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* dg = reinterpret_cast<float*>(smem);  // (dim) f32 dg of this block's rows
  T* xs = reinterpret_cast<T*>(dg + dim);      // (dim) staged x row
  T* gs = xs + dim;                            // (dim) staged dy row
  for (int64_t d = threadIdx.x; d < dim; d += kThreads) dg[d] = 0.f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float s = 0.f;
    for (int64_t d = threadIdx.x; d < dim; d += kThreads) {
      T xv = x[r * ldx + d], gv = dy[r * ldg + d];
      xs[d] = xv;
      gs[d] = gv;
      s += to_f32(g[d]) * to_f32(gv) * to_f32(xv);
    }
    s = block_reduce<kThreads>(s, SumOp{});
    const float rs = rstd[r];
    const float c = rs * rs * rs * s / float(dim);
    for (int64_t d = threadIdx.x; d < dim; d += kThreads) {
      float xv = to_f32(xs[d]), gv = to_f32(gs[d]);
      dx[r * ldo + d] = from_f32<T>(rs * to_f32(g[d]) * gv - xv * c);
      dg[d] += gv * xv * rs;  // column d belongs to this thread for every row: no race
    }
  }
  for (int64_t d = threadIdx.x; d < dim; d += kThreads) part[int64_t(blockIdx.x) * dim + d] = dg[d];
}

template <class T>
void run(const RmsNormArgs& a, cudaStream_t s) {
  const int64_t e = sizeof(T);
  if (!a.backward) {
    auto kernel = rmsnorm_v02_fwd_kernel<T>;
    size_t smem = static_cast<size_t>(a.dim * e);
    allow_dynamic_smem(kernel, smem);
    int blocks = static_cast<int>(std::min<int64_t>(a.rows, 1 << 20));
    kernel<<<blocks, kThreads, smem, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.g),
                                          static_cast<T*>(a.out), a.rstd_out, a.rows, a.dim, a.ld_x, a.ld_out, a.eps);
    HK_CHECK_LAUNCH("rmsnorm_v02_fwd_kernel");
    return;
  }
  auto kernel = rmsnorm_v02_bwd_kernel<T>;
  size_t smem = static_cast<size_t>(a.dim * (2 * e + 4));
  allow_dynamic_smem(kernel, smem);
  int blocks = static_cast<int>(std::min<int64_t>(a.rows, resident_grid(kernel, kThreads, smem)));
  StreamScratch part(int64_t(blocks) * a.dim * 4, s);
  kernel<<<blocks, kThreads, smem, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.g), a.rstd_in,
                                        static_cast<const T*>(a.dy), static_cast<T*>(a.out), part.as<float>(),
                                        a.rows, a.dim, a.ld_x, a.ld_dy, a.ld_out);
  HK_CHECK_LAUNCH("rmsnorm_v02_bwd_kernel");
  sum_partials(part.as<float>(), blocks, a.dim, static_cast<T*>(a.dg), s);
}

void rmsnorm_v02_launch(const RmsNormArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "rmsnorm/v02_fused_row", [&](auto t) { run<decltype(t)>(a, stream); });
}

std::string rmsnorm_v02_supports(const RmsNormProblem& p) {
  if (smem_bytes(p) > kSmemLimit)
    return "the staged row needs " + std::to_string(smem_bytes(p)) + " bytes of shared memory, more than " +
           std::to_string(kSmemLimit) + " (D=" + std::to_string(p.dim) + ")";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(RmsNormProblem, RmsNormArgs, "rmsnorm", "v02_fused_row",
                    "block per row staged in shared memory: one read of x; dg via a [blocks, D] partial", 90,
                    kFlagProduction, rmsnorm_v02_supports, rmsnorm_v02_launch);

}  // namespace hk::rmsnorm_v02_fused_row
