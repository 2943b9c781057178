// rmsnorm/v01_two_kernel.cu
//
// Rung 1 (reference, and the family's baseline): the unfused way. Forward: one kernel computes
// rstd per row (block per row, scalar loads), a second, element-wise kernel reads x again and
// writes y = x * rstd * g: two reads of x. Backward: a kernel per row computes S = sum g*dy*x
// and then re-reads the row to write dx; dg is a separate column reduction (one thread per
// column walking every row) that reads x and dy a second time.
// No CUDA library provides RMSNorm (cuDNN only as a fused graph node), so this rung is the
// baseline the speedup column divides by (docs/rmsnorm.md).
// Needs: nothing beyond the op contract (any alignment, any row stride, 64-bit offsets).
// Run:   hk bench rmsnorm --variant v01_two_kernel --shape 16384x8192
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/vec.cuh"
#include "rmsnorm/rmsnorm_op.hpp"

namespace hk::rmsnorm_v01_two_kernel {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = 1 << 20;  // grid-stride loops cover the rest

template <class T>
__global__ void __launch_bounds__(kThreads) rmsnorm_v01_rstd_kernel(const T* x, int64_t rows, int64_t dim,
                                                                    int64_t ldx, float eps, float* rstd) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float ss = 0.f;
    for (int64_t d = threadIdx.x; d < dim; d += kThreads) {
      float v = to_f32(x[r * ldx + d]);
      ss += v * v;
    }
    ss = block_reduce<kThreads>(ss, SumOp{});
    if (threadIdx.x == 0) rstd[r] = rsqrtf(ss / float(dim) + eps);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) rmsnorm_v01_scale_kernel(const T* x, const T* g, const float* rstd,
                                                                     int64_t rows, int64_t dim, int64_t ldx,
                                                                     int64_t ldy, T* y) {
  const int64_t n = rows * dim;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    int64_t r = i / dim, d = i - r * dim;
    y[r * ldy + d] = from_f32<T>(to_f32(x[r * ldx + d]) * rstd[r] * to_f32(g[d]));
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) rmsnorm_v01_dx_kernel(const T* x, const T* g, const float* rstd,
                                                                  const T* dy, int64_t rows, int64_t dim,
                                                                  int64_t ldx, int64_t ldg, int64_t ldo, T* dx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float s = 0.f;
    for (int64_t d = threadIdx.x; d < dim; d += kThreads)
      s += to_f32(g[d]) * to_f32(dy[r * ldg + d]) * to_f32(x[r * ldx + d]);
    s = block_reduce<kThreads>(s, SumOp{});
    const float rs = rstd[r];
    const float c = rs * rs * rs * s / float(dim);
    for (int64_t d = threadIdx.x; d < dim; d += kThreads)
      dx[r * ldo + d] = from_f32<T>(rs * to_f32(g[d]) * to_f32(dy[r * ldg + d]) - to_f32(x[r * ldx + d]) * c);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) rmsnorm_v01_dg_kernel(const T* x, const float* rstd, const T* dy,
                                                                  int64_t rows, int64_t dim, int64_t ldx,
                                                                  int64_t ldg, T* dg) {
  for (int64_t d = int64_t(blockIdx.x) * kThreads + threadIdx.x; d < dim; d += int64_t(gridDim.x) * kThreads) {
    float acc = 0.f;
    for (int64_t r = 0; r < rows; ++r) acc += to_f32(dy[r * ldg + d]) * to_f32(x[r * ldx + d]) * rstd[r];
    dg[d] = from_f32<T>(acc);
  }
}

template <class T>
void run(const RmsNormArgs& a, cudaStream_t s) {
  const T* x = static_cast<const T*>(a.x);
  const T* g = static_cast<const T*>(a.g);
  T* out = static_cast<T*>(a.out);
  const int row_blocks = static_cast<int>(std::min<int64_t>(a.rows, kMaxGrid));
  if (!a.backward) {
    rmsnorm_v01_rstd_kernel<T><<<row_blocks, kThreads, 0, s>>>(x, a.rows, a.dim, a.ld_x, a.eps, a.rstd_out);
    HK_CHECK_LAUNCH("rmsnorm_v01_rstd_kernel");
    int blocks = static_cast<int>(std::min<int64_t>(ceil_div(a.rows * a.dim, kThreads), kMaxGrid));
    rmsnorm_v01_scale_kernel<T><<<blocks, kThreads, 0, s>>>(x, g, a.rstd_out, a.rows, a.dim, a.ld_x, a.ld_out, out);
    HK_CHECK_LAUNCH("rmsnorm_v01_scale_kernel");
    return;
  }
  const T* dy = static_cast<const T*>(a.dy);
  rmsnorm_v01_dx_kernel<T><<<row_blocks, kThreads, 0, s>>>(x, g, a.rstd_in, dy, a.rows, a.dim, a.ld_x, a.ld_dy,
                                                           a.ld_out, out);
  HK_CHECK_LAUNCH("rmsnorm_v01_dx_kernel");
  int col_blocks = static_cast<int>(std::min<int64_t>(ceil_div(a.dim, kThreads), kMaxGrid));
  rmsnorm_v01_dg_kernel<T><<<col_blocks, kThreads, 0, s>>>(x, a.rstd_in, dy, a.rows, a.dim, a.ld_x, a.ld_dy,
                                                           static_cast<T*>(a.dg));
  HK_CHECK_LAUNCH("rmsnorm_v01_dg_kernel");
}

void rmsnorm_v01_launch(const RmsNormArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "rmsnorm/v01_two_kernel", [&](auto t) { run<decltype(t)>(a, stream); });
}

}  // namespace

HK_REGISTER_VARIANT(RmsNormProblem, RmsNormArgs, "rmsnorm", "v01_two_kernel",
                    "rstd kernel then a normalize kernel (x read twice); dg by a separate column pass", 70,
                    kFlagReference | kFlagBaseline, nullptr, rmsnorm_v01_launch);

}  // namespace hk::rmsnorm_v01_two_kernel
