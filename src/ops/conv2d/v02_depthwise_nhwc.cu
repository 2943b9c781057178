// conv2d/v02_depthwise_nhwc.cu
//
// Rung 2: depthwise forward (groups == C == Cout), NHWC, on CUDA cores, vectorised over
// channels. Each thread owns one vector of channels of 4 consecutive output pixels of a row; a
// block spans up to 16 channel vectors and as many pixel groups as fill 256 threads, and keeps
// its kH x kW x channels weights in shared memory as f32. For kW in {3, 5, 7} at unit stride
// and dilation along W, each kernel row's kW + 3 input vectors are loaded and converted once
// and meet all their (pixel, tap) pairs against the row's weights held in registers (4
// channels per thread, so kW x 4 weights and 4 x 4 sums fit the register budget); otherwise a
// thread moves 16 bytes of channels (8 at f16/bf16) and loads each tap's input per pixel, L1
// serving the overlap. Stores are streaming, 8 or 16 bytes.
// Adds over v01: a warp reads whole 256-byte channel runs of a pixel (v01 reads one channel per
// thread, C apart in NHWC), 8- and 16-byte loads and stores, the weights read once per block.
// Why: a depthwise layer does kH kW multiply-adds per output element, far below the tensor
// cores' reach; it is a stencil bound by memory and L1, where cuDNN is weak.
// Needs: forward, NHWC, groups == C == Cout, C a multiple of 16 bytes' elements, 16-byte
// aligned operands, the weight tile (kH kW x up to 128 channels, f32) within 200 KB.
// Run:   hk bench conv2d --variant v02_depthwise_nhwc --shape 64x128x56x56_128x7x7_g128
#include "common/launch.cuh"
#include "common/vec.cuh"
#include "conv2d/conv2d_op.hpp"

namespace hk::conv2d_v02_depthwise_nhwc {
namespace {

constexpr int kThreads = 256;
constexpr int kPix = 4;           // consecutive output pixels of a row per thread
constexpr int kMaxChanVecs = 16;  // channel vectors across a block
constexpr size_t kMaxSmem = 200 * 1024;

// Channel vectors (of v channels) across a block.
inline int chan_vecs(int64_t c, int v) { return static_cast<int>(std::min<int64_t>(c / v, kMaxChanVecs)); }

// V channels of T in one 8- or 16-byte read-only load / streaming store.
template <class T, int V>
__device__ __forceinline__ Vec<T, V> ldg_vec(const T* p) {
  static_assert(sizeof(T) * V == 16 || sizeof(T) * V == 8, "8- or 16-byte vectors");
  Vec<T, V> v;
  if constexpr (sizeof(T) * V == 16) *reinterpret_cast<uint4*>(&v) = __ldg(reinterpret_cast<const uint4*>(p));
  else *reinterpret_cast<uint2*>(&v) = __ldg(reinterpret_cast<const uint2*>(p));
  return v;
}
template <class T, int V>
__device__ __forceinline__ void stcs_vec(T* p, const Vec<T, V>& v) {
  if constexpr (sizeof(T) * V == 16) __stcs(reinterpret_cast<uint4*>(p), *reinterpret_cast<const uint4*>(&v));
  else __stcs(reinterpret_cast<uint2*>(p), *reinterpret_cast<const uint2*>(&v));
}

// Loads V f32 weights from shared memory (16-byte aligned).
template <int V>
__device__ __forceinline__ void load_weights(const float* p, float (&wv)[V]) {
#pragma unroll
  for (int e = 0; e < V; e += 4) {
    const float4 f = *reinterpret_cast<const float4*>(p + e);
    wv[e] = f.x, wv[e + 1] = f.y, wv[e + 2] = f.z, wv[e + 3] = f.w;
  }
}

// KW = 0: any kernel width, stride and dilation (each tap's input loaded per output pixel, L1
// serving the overlap). KW > 0: kW == KW with unit stride and dilation along W: per kernel row,
// the kPix + KW - 1 input vectors of the thread's 4 pixels are loaded and converted once each,
// and each meets its (pixel, tap) pairs against the row's weights held in registers.
template <class T, int KW, int V>
__global__ void __launch_bounds__(kThreads) conv2d_v02_depthwise_kernel(const Conv2dArgs g, int ct) {
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
      if constexpr (KW > 0) {
        float wr[KW][V];  // this kernel row's weights
#pragma unroll
        for (int kx = 0; kx < KW; ++kx) load_weights<V>(ws + (ky * KW + kx) * cb + cv * V, wr[kx]);
        const int64_t ix0 = ox0 - g.prm.pad_left;
#pragma unroll
        for (int j = 0; j < kPix + KW - 1; ++j) {
          const int64_t ix = ix0 + j;
          if (ix < 0 || ix >= g.w_in) continue;
          const Vec<T, V> xr = ldg_vec<T, V>(row + ix * g.c);
          float xv[V];
#pragma unroll
          for (int e = 0; e < V; ++e) xv[e] = to_f32(xr.v[e]);
#pragma unroll
          for (int t = 0; t < kPix; ++t) {
            const int kx = j - t;  // the tap input column j meets for pixel t
            if (kx < 0 || kx >= KW) continue;
#pragma unroll
            for (int e = 0; e < V; ++e) acc[t][e] = fmaf(xv[e], wr[kx][e], acc[t][e]);
          }
        }
      } else {
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          float wv[V];
          load_weights<V>(ws + (ky * g.kw + kx) * cb + cv * V, wv);
#pragma unroll
          for (int t = 0; t < kPix; ++t) {
            const int64_t ix = (ox0 + t) * sw - g.prm.pad_left + kx * dw;
            if (ox0 + t >= g.ow || ix < 0 || ix >= g.w_in) continue;
            const Vec<T, V> xv = ldg_vec<T, V>(row + ix * g.c);
#pragma unroll
            for (int e = 0; e < V; ++e) acc[t][e] = fmaf(to_f32(xv.v[e]), wv[e], acc[t][e]);
          }
        }
      }
    }
#pragma unroll
    for (int t = 0; t < kPix; ++t) {
      if (ox0 + t >= g.ow) break;
      Vec<T, V> out;
#pragma unroll
      for (int e = 0; e < V; ++e) out.v[e] = from_f32<T>(acc[t][e]);
      stcs_vec<T, V>(y + ((n * g.oh + oy) * g.ow + ox0 + t) * g.c + ch, out);
    }
  }
}

template <class T, int KW, int V>
void launch_with(const Conv2dArgs& a, cudaStream_t stream) {
  const int ct = chan_vecs(a.c, V);
  const int threads = kThreads / ct * ct;
  const size_t smem = sizeof(float) * size_t(a.kh * a.kw) * size_t(ct * V);
  auto kernel = conv2d_v02_depthwise_kernel<T, KW, V>;
  allow_dynamic_smem(kernel, smem);
  const int64_t groups = a.n * a.oh * ceil_div(a.ow, kPix);
  const dim3 grid(grid_for(ceil_div(groups, threads / ct)), unsigned(ceil_div(a.c, int64_t(ct) * V)));
  kernel<<<grid, threads, smem, stream>>>(a, ct);
  HK_CHECK_LAUNCH("conv2d_v02_depthwise_kernel");
}

// The unit-stride paths keep a kernel row's weights in registers: 4 channels per thread (8-byte
// accesses at 16-bit) keep kW x 4 weights and 4 x 4 sums within the register budget at kW = 7;
// the general path moves 16 bytes (8 channels at 16-bit).
void conv2d_v02_launch(const Conv2dArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "conv2d/v02_depthwise_nhwc", [&](auto tag) {
    using T = decltype(tag);
    const bool unit = a.prm.stride_w == 1 && a.prm.dilation_w == 1;
    if (unit && a.kw == 3) return launch_with<T, 3, 4>(a, stream);
    if (unit && a.kw == 5) return launch_with<T, 5, 4>(a, stream);
    if (unit && a.kw == 7) return launch_with<T, 7, 4>(a, stream);
    launch_with<T, 0, kVec16<T>>(a, stream);
  });
}

std::string conv2d_v02_supports(const Conv2dProblem& p) {
  if (std::string why = p.depthwise_nhwc_forward_needs(); !why.empty()) return why;
  const int v = 16 / (dtype_bits(p.dtype) / 8);
  if (ceil_div(p.c, int64_t(kMaxChanVecs) * 4) > 65535) return "C beyond 65535 channel blocks";
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

}  // namespace hk::conv2d_v02_depthwise_nhwc
