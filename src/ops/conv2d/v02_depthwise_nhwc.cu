// conv2d/v02_depthwise_nhwc.cu
//
// Rung 2: depthwise forward (groups == C == Cout), NHWC, on CUDA cores, vectorised over
// channels. Each thread owns one 16-byte vector of channels (8 at f16/bf16, 4 at f32) of 4
// consecutive output pixels of a row; a block spans up to 16 channel vectors and as many pixel
// groups as fill 256 threads. The block's kH x kW x channels weights sit in shared memory as
// f32 (one 16-byte-aligned row of channels per tap); inputs are 16-byte read-only loads, the
// overlapping windows of the 4 pixels and of neighbouring threads served by L1.
// Adds over v01: a warp reads whole 256-byte channel runs of a pixel (v01 reads one channel per
// thread, C apart in NHWC), 16-byte loads and stores, the weights read once per block.
// Why: a depthwise layer does kH kW multiply-adds per output element, far below the tensor
// cores' reach; it is a stencil bound by memory and L1, where cuDNN is weak.
// Needs: forward, NHWC, groups == C == Cout, C a multiple of 16 bytes' elements, 16-byte
// aligned operands, the weight tile (kH kW x up to 128 channels, f32) within 200 KB.
// Run:   hk bench conv2d --variant v02_depthwise_nhwc --shape 64x128x56x56_128x7x7_g128
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "conv2d/conv2d_op.hpp"

namespace hk {
namespace {

constexpr int kThreads = 256;
constexpr int kPix = 4;           // consecutive output pixels of a row per thread
constexpr int kMaxChanVecs = 16;  // channel vectors across a block
constexpr size_t kMaxSmem = 200 * 1024;

template <class T>
int chan_vecs(int64_t c) {
  return static_cast<int>(std::min<int64_t>(c / kVec16<T>, kMaxChanVecs));
}

template <class T>
__global__ void __launch_bounds__(kThreads) conv2d_v02_depthwise_kernel(const Conv2dArgs g, int ct) {
  constexpr int V = kVec16<T>;
  const T* __restrict__ x = static_cast<const T*>(g.x);
  const T* __restrict__ w = static_cast<const T*>(g.w);
  const T* __restrict__ bias = static_cast<const T*>(g.bias);
  T* __restrict__ y = static_cast<T*>(g.out);
  extern __shared__ float4 conv2d_v02_smem[];
  float* ws = reinterpret_cast<float*>(conv2d_v02_smem);  // (kh kw, ct V) f32
  const int cb = ct * V;                                    // channels of this block
  const int taps = static_cast<int>(g.kh * g.kw);
  const int64_t c0 = int64_t(blockIdx.y) * cb;
  for (int i = threadIdx.x; i < taps * cb; i += blockDim.x) {
    const int tap = i / cb, cc = i % cb;
    ws[i] = c0 + cc < g.c ? to_f32(w[(c0 + cc) * taps + tap]) : 0.f;
  }
  __syncthreads();

  const int cv = threadIdx.x % ct, pt = threadIdx.x / ct;
  const int64_t ch = c0 + int64_t(cv) * V;
  if (ch >= g.c) return;  // past the last channel vector (no barrier follows)
  const int pix_per_block = blockDim.x / ct;
  float b[V];
#pragma unroll
  for (int e = 0; e < V; ++e) b[e] = bias ? to_f32(bias[ch + e]) : 0.f;
  const int64_t groups_w = (g.ow + kPix - 1) / kPix;
  const int64_t total = g.n * g.oh * groups_w;
  const int64_t sh = g.prm.stride_h, sw = g.prm.stride_w, dh = g.prm.dilation_h, dw = g.prm.dilation_w;
  for (int64_t pg = int64_t(blockIdx.x) * pix_per_block + pt; pg < total; pg += int64_t(gridDim.x) * pix_per_block) {
    const int64_t ox0 = pg % groups_w * kPix, oy = pg / groups_w % g.oh, n = pg / (groups_w * g.oh);
    float acc[kPix][V];
#pragma unroll
    for (int t = 0; t < kPix; ++t)
#pragma unroll
      for (int e = 0; e < V; ++e) acc[t][e] = b[e];
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = oy * sh - g.prm.pad_top + ky * dh;
      if (iy < 0 || iy >= g.h) continue;
      const T* row = x + ((n * g.h + iy) * g.w_in) * g.c + ch;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        float wv[V];
        const float* wp = ws + (ky * g.kw + kx) * cb + cv * V;
#pragma unroll
        for (int e = 0; e < V; e += 4) {
          const float4 f = *reinterpret_cast<const float4*>(wp + e);
          wv[e] = f.x, wv[e + 1] = f.y, wv[e + 2] = f.z, wv[e + 3] = f.w;
        }
#pragma unroll
        for (int t = 0; t < kPix; ++t) {
          const int64_t ix = (ox0 + t) * sw - g.prm.pad_left + kx * dw;
          if (ox0 + t >= g.ow || ix < 0 || ix >= g.w_in) continue;
          const uint4 raw = __ldg(reinterpret_cast<const uint4*>(row + ix * g.c));
          const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(&raw);
#pragma unroll
          for (int e = 0; e < V; ++e) acc[t][e] = fmaf(to_f32(xv.v[e]), wv[e], acc[t][e]);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < kPix; ++t) {
      if (ox0 + t >= g.ow) break;
      Vec<T, V> out;
#pragma unroll
      for (int e = 0; e < V; ++e) out.v[e] = from_f32<T>(acc[t][e]);
      store_stream<T, V>(y + ((n * g.oh + oy) * g.ow + ox0 + t) * g.c + ch, out);
    }
  }
}

template <class T>
size_t smem_for(int64_t c, int64_t kh, int64_t kw) {
  return sizeof(float) * size_t(kh * kw) * size_t(chan_vecs<T>(c) * kVec16<T>);
}

void conv2d_v02_launch(const Conv2dArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "conv2d/v02_depthwise_nhwc", [&](auto tag) {
    using T = decltype(tag);
    const int ct = chan_vecs<T>(a.c);
    const int threads = kThreads / ct * ct;
    const size_t smem = smem_for<T>(a.c, a.kh, a.kw);
    auto kernel = conv2d_v02_depthwise_kernel<T>;
    if (smem > 48 * 1024)
      HK_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    const int64_t groups = a.n * a.oh * ceil_div(a.ow, kPix);
    const dim3 grid(grid_for(ceil_div(groups, threads / ct)), unsigned(ceil_div(a.c, int64_t(ct) * kVec16<T>)));
    kernel<<<grid, threads, smem, stream>>>(a, ct);
    HK_CHECK_LAUNCH("conv2d_v02_depthwise_kernel");
  });
}

std::string conv2d_v02_supports(const Conv2dProblem& p) {
  if (p.dir != ConvDirection::kForward) return "forward only";
  if (!p.nhwc()) return "NHWC only (channels vectorised), got NCHW";
  if (!p.depthwise())
    return "depthwise only (groups == C == Cout), got groups=" + std::to_string(p.prm.groups) + " C=" +
           std::to_string(p.c) + " Cout=" + std::to_string(p.cout);
  const int v = 16 / (dtype_bits(p.dtype) / 8);
  if (p.c % v != 0) return "C must be a multiple of " + std::to_string(v) + " (16-byte channel vectors), got " + std::to_string(p.c);
  if (p.align_bytes < 16) return "operands must be 16-byte aligned, got " + std::to_string(p.align_bytes);
  if (ceil_div(p.c, int64_t(kMaxChanVecs) * v) > 65535) return "C beyond 65535 channel blocks";
  const size_t smem = sizeof(float) * size_t(p.kh * p.kw) * size_t(std::min<int64_t>(p.c, int64_t(kMaxChanVecs) * v));
  if (p.kh * p.kw > (1 << 20) || smem > kMaxSmem)
    return "the weight tile (kH kW x channels, f32) must fit 200 KB of shared memory, needs " + std::to_string(smem);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(Conv2dProblem, Conv2dArgs, "conv2d", "v02_depthwise_nhwc",
                    "depthwise NHWC forward on CUDA cores, 16-byte channel vectors x 4 pixels per thread, weights in "
                    "shared memory",
                    80, kFlagProduction, conv2d_v02_supports, conv2d_v02_launch);

}  // namespace hk
