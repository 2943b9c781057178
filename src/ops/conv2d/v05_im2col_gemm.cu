// conv2d/v05_im2col_gemm.cu
//
// Rung 5: the forward as an explicit im2col and the library's GEMM — what frameworks did before
// implicit GEMM (Caffe's im2col, cuDNN's IMPLICIT_PRECOMP_GEMM precursor): every output pixel's
// receptive field is written out as one row (or column) of a patch matrix in scratch, and one
// GEMM (hk::gemm, its dispatch and fused bias included) multiplies it by the weight.
//   NHWC: P [N OH OW, kH kW C], k = (ky, kx, c) with c fastest, the order of the NHWC weight
//         [Cout, kH, kW, C], so y [N OH OW, Cout] = P W^T is one GEMM, bias in its epilogue.
//   NCHW: Pt [N][C kH kW, OH OW], k = (c, ky, kx), the order of the NCHW weight [Cout, C, kH,
//         kW], so y[n] [Cout, OH OW] = W Pt[n] is a batched GEMM with W broadcast (batch stride
//         0); the bias (per row there) is added by one pass after it.
// Adds over v01: the reduction on tensor cores at the GEMM's speed. Costs what v03 (implicit
// GEMM) avoids: the patch matrix is kH kW times the input (0.92 GB for 64x256x56x56 3x3 in
// bf16), written once and read back by the GEMM: a 3x3 layer moves ~18x the input's bytes
// through HBM for it, traffic a convolution does not need and the thing this rung measures.
// Needs: forward, f16/bf16 (the GEMM's inputs), groups == 1, operands contiguous in the layout,
// a patch matrix of at most 4 GiB.
// Run:   hk bench conv2d --variant 'public,v03*,v05*' --shape 64x256x56x56_256x3x3
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "common/launch.cuh"
#include "conv2d/conv2d_op.hpp"
#include "core/scratch.hpp"
#include "hk/ops/gemm.hpp"

namespace hk::conv2d_v05_im2col_gemm {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxPatchBytes = int64_t(4) << 30;

// The input element a tap reads, or 0 in the padding: x[n, c, oy sh - pt + ky dh, ox sw - pl + kx dw].
template <class T>
__device__ __forceinline__ T tap(const T* x, const Conv2dArgs& a, int64_t n, int64_t c, int64_t oy, int64_t ox,
                                 int64_t ky, int64_t kx) {
  const int64_t iy = oy * a.prm.stride_h - a.prm.pad_top + ky * a.prm.dilation_h;
  const int64_t ix = ox * a.prm.stride_w - a.prm.pad_left + kx * a.prm.dilation_w;
  if (iy < 0 || iy >= a.h || ix < 0 || ix >= a.w_in) return T(0.0f);
  return x[n * a.xs[0] + c * a.xs[1] + iy * a.xs[2] + ix * a.xs[3]];
}

// NHWC: P[m][k], m = (n, oy, ox), k = (ky, kx, c); a thread per element, k fastest, so the writes
// are coalesced and the reads of one tap's channels are too.
template <class T>
__global__ void __launch_bounds__(kThreads) im2col_nhwc_kernel(const Conv2dArgs a, T* p) {
  const int64_t K = a.kh * a.kw * a.c, total = a.n * a.oh * a.ow * K;
  const T* x = static_cast<const T*>(a.x);
  for (int64_t e = int64_t(blockIdx.x) * kThreads + threadIdx.x; e < total; e += int64_t(gridDim.x) * kThreads) {
    const int64_t m = e / K, k = e % K;
    const int64_t c = k % a.c, kx = (k / a.c) % a.kw, ky = k / (a.c * a.kw);
    const int64_t ox = m % a.ow, oy = (m / a.ow) % a.oh, n = m / (a.ow * a.oh);
    p[e] = tap(x, a, n, c, oy, ox, ky, kx);
  }
}

// NCHW: Pt[n][k][l], k = (c, ky, kx), l = (oy, ox); l fastest (coalesced writes).
template <class T>
__global__ void __launch_bounds__(kThreads) im2col_nchw_kernel(const Conv2dArgs a, T* p) {
  const int64_t K = a.c * a.kh * a.kw, L = a.oh * a.ow, total = a.n * K * L;
  const T* x = static_cast<const T*>(a.x);
  for (int64_t e = int64_t(blockIdx.x) * kThreads + threadIdx.x; e < total; e += int64_t(gridDim.x) * kThreads) {
    const int64_t l = e % L, k = (e / L) % K, n = e / (L * K);
    const int64_t kx = k % a.kw, ky = (k / a.kw) % a.kh, c = k / (a.kw * a.kh);
    p[e] = tap(x, a, n, c, l / a.ow, l % a.ow, ky, kx);
  }
}

int64_t patch_elems(const Conv2dProblem& p) { return p.n * p.oh() * p.ow() * p.kh * p.kw * p.c; }

void conv2d_v05_launch(const Conv2dArgs& a, cudaStream_t stream) {
  if (a.dir != ConvDirection::kForward) HK_THROW(kNotSupported, "conv2d/v05_im2col_gemm: forward only");
  const int64_t M = a.n * a.oh * a.ow, K = a.kh * a.kw * a.c, L = a.oh * a.ow, elems = M * K;
  if (M == 0 || a.cout == 0) return;
  const size_t esize = 2;  // f16 / bf16
  detail::StreamWorkspace scratch(stream, "conv2d_im2col_patches", size_t(elems) * esize);
  const bool nhwc = a.prm.layout == ConvLayout::kNHWC;
  auto im2col = [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(scratch.get());
    if (nhwc) im2col_nhwc_kernel<T><<<grid_for(ceil_div(elems, kThreads)), kThreads, 0, stream>>>(a, p);
    else im2col_nchw_kernel<T><<<grid_for(ceil_div(elems, kThreads)), kThreads, 0, stream>>>(a, p);
    HK_CHECK_LAUNCH("conv2d_v05_im2col_kernel");
  };
  if (a.dtype == DType::kBF16) im2col(__nv_bfloat16{});
  else im2col(__half{});
  const DType dt = a.dtype;
  if (nhwc) {
    // y [M, Cout] = P [M, K] . W^T, W [Cout, K] row-major read as [K, Cout] (strides 1, K).
    const TensorView pa(scratch.get(), dt, {M, K}), wb(a.w, dt, {K, a.cout}, {1, K}), y(a.out, dt, {M, a.cout});
    GemmOptions o;
    const TensorView bias(a.bias, dt, {a.cout});
    if (a.bias) o.bias = &bias;
    gemm(pa, wb, y, o, stream);
    return;
  }
  // y[n] [Cout, L] = W [Cout, K] . Pt[n] [K, L], W broadcast over the batch.
  const TensorView wa(a.w, dt, {a.n, a.cout, K}, {0, K, 1});
  const TensorView pb(scratch.get(), dt, {a.n, K, L}, {K * L, L, 1});
  const TensorView y(a.out, dt, {a.n, a.cout, L}, {a.cout * L, L, 1});
  gemm(wa, pb, y, GemmOptions{}, stream);
  if (a.bias) conv2d_add_bias(a, stream);
}

std::string conv2d_v05_supports(const Conv2dProblem& p) {
  if (p.dir != ConvDirection::kForward) return "forward only";
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16)
    return "f16 or bf16 only (the GEMM's inputs), got " + std::string(to_string(p.dtype));
  if (p.prm.groups != 1) return "groups == 1 only (one GEMM), got " + std::to_string(p.prm.groups);
  const int64_t elems = patch_elems(p);
  if (elems * 2 > kMaxPatchBytes)
    return "the patch matrix would take " + std::to_string(elems * 2 >> 20) + " MiB (more than 4 GiB)";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(Conv2dProblem, Conv2dArgs, "conv2d", "v05_im2col_gemm",
                    "explicit im2col into a scratch patch matrix, then hk::gemm (bias fused for NHWC)", 80, kFlagNone,
                    conv2d_v05_supports, conv2d_v05_launch);

}  // namespace hk::conv2d_v05_im2col_gemm
