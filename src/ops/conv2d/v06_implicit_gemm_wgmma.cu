// conv2d/v06_implicit_gemm_wgmma.cu
// Build: own translation unit
//
// Rung 6: the NHWC forward as an implicit GEMM on the GEMM family's production kernel body
// (gemm/hopper_gemm.cuh with the policies of v15 and v18: a TMA producer warp, two consumer
// warpgroups running wgmma m64n256k16 (m64n128k16 on 128-wide tiles where the output has at most
// 128 channels, in v06_implicit_gemm_wgmma_n128.cu) out of a 4-stage mbarrier ring, 2-CTA
// clusters multicasting the weight tile, a persistent grid, stream-K where the schedule says it
// pays — also over a single wave (conv2d_v06::Split): the weight gradient and the small-spatial layers
// have fewer 128 x 256 tiles than the GPU has clusters — and the fused TMA-store epilogue with
// the bias), with one thing changed: the A tile. Rows are output pixels (M = N OH OW), columns
// output channels (Cout), the reduction runs over k = (ky, kx, c) (K = kH kW C), c fastest; a
// 64-wide k-block is one filter tap (ky, kx) and 64 channels c0 .. c0 + 63. Where v03 gathers
// the activation patch with one cp.async per 16 bytes, computing every address in the consumer
// threads, here the producer thread issues one TMA load in im2col mode per k-block
// (ptx::tma_load_im2col_4d): the tensor map describes the input and the convolution's geometry
// (the padded bounding box, the strides), and the load names the tile's first output pixel, the
// channel block and the tap offset; TMA walks 128 output pixels across rows and images, reads
// each one's 64 channels at the tapped position (zeros in the padding) and writes them 128-byte
// swizzled, the layout wgmma reads. No patch matrix exists anywhere (v05 writes one to memory).
// The weight [Cout, kH, kW, C] is already the K-major [Cout, K] operand the GEMM body loads.
// The data gradient at stride 1 runs the same kernels: dx is a forward convolution of dy with
// the weight's taps reversed and its channel axes swapped (one small transpose kernel into
// scratch first) and each side padded by the kernel's reach less its own padding
// (conv2d_im2col::dgrad_as_forward).
// The weight gradient is the GEMM dw [Cout, kH kW C] = dy^T . P over the N OH OW pixels, with
// the patch matrix P as the B operand: each 64-column box of a B tile (one tap's 64 channels of
// the k-block's 64 pixels) is one im2col-mode load, multicast to the cluster; its few output
// tiles and thousands of k-blocks are what stream-K spreads over the clusters.
// Adds over v03: wgmma, TMA for both operands, the warp-specialised pipeline and the fused
// epilogue of the production GEMM; over v05: no patch traffic (kH kW times the input).
// Needs: forward, weight gradient, or (stride 1, padding within the kernel's reach) data
// gradient; NHWC, f16/bf16, groups == 1, the patch matrix's channels (C; Cout for the data
// gradient) a multiple of 64 (a k-block or box never straddles two taps), the output's channels
// a multiple of 8 and 16-byte aligned operands (TMA), strides at most 8, the padded box's
// corners within [-128, 127] and a tap reach dilation (k - 1) below 255 (im2col limits of a
// rank-4 map), fewer than 2^31 output pixels; otherwise supports() says why.
// Run:   hk bench conv2d --variant 'public,v03*,v06*' --shape 64x256x56x56_256x3x3
#include <array>
#include <string>

#include "common/launch.cuh"
#include "common/ptx/mbarrier.cuh"
#include "conv2d/v06_implicit_gemm_wgmma.cuh"
#include "core/scratch.hpp"

namespace hk::conv2d_v06 {
namespace {

ptx::Im2colBox im2col_box(const conv2d_im2col::Geometry& geo, uint32_t pixels = WholeCfg<256>::kBlockM) {
  ptx::Im2colBox box;
  box.lower_w = geo.lower_w(), box.lower_h = geo.lower_h();
  box.upper_w = geo.upper_w(), box.upper_h = geo.upper_h();
  box.stride_w = static_cast<uint32_t>(geo.stride_w), box.stride_h = static_cast<uint32_t>(geo.stride_h);
  box.channels = kTapChannels;
  box.pixels = pixels;
  return box;
}

// The im2col-mode map of an NHWC input [n, h, w, c] with logical strides (n, c, h, w), for loads
// of `pixels` pixels x 64 channels.
CUtensorMap input_map(const void* in, DType dt, int64_t n, int64_t h, int64_t w, int64_t c,
                      const std::array<int64_t, 4>& strides, const conv2d_im2col::Geometry& geo, uint32_t pixels) {
  const int64_t e = dtype_bits(dt) / 8;
  const uint64_t dims[4] = {uint64_t(c), uint64_t(w), uint64_t(h), uint64_t(n)};
  const uint64_t bytes[3] = {uint64_t(strides[3] * e), uint64_t(strides[2] * e), uint64_t(strides[0] * e)};
  return ptx::make_tensor_map_im2col_4d(in, gemm_impl::tma_type(dt), dims, bytes, im2col_box(geo, pixels),
                                        CU_TENSOR_MAP_SWIZZLE_128B);
}

// One forward convolution as the implicit GEMM: `in` NHWC [n, h, w, c] with logical strides
// (n, c, h, w), `weight` [cout, kh kw c] K-major with row stride ldw, `out` NHWC [n, oh, ow, cout]
// contiguous, an optional bias [cout]; geo says how the output pixels tap the input.
struct ImplicitGemm {
  const void* in = nullptr;
  int64_t n = 0, h = 0, w = 0, c = 0;
  std::array<int64_t, 4> in_strides{};
  const void* weight = nullptr;
  int64_t ldw = 0;
  const void* bias = nullptr;
  void* out = nullptr;
  int64_t cout = 0, oh = 0, ow = 0;
  conv2d_im2col::Geometry geo;
  DType dtype = DType::kBF16;
};

void run_implicit_gemm(const ImplicitGemm& ig, cudaStream_t stream) {
  const int64_t M = ig.n * ig.oh * ig.ow, K = int64_t(ig.geo.kh) * ig.geo.kw * ig.c;
  const int64_t e = dtype_bits(ig.dtype) / 8;
  // The GEMM the body runs: out [M, cout] = im2col(in) [M, K] . W^T, W [cout, K] K-major.
  GemmArgs g;
  g.a = ig.in, g.b = ig.weight, g.bias = ig.bias, g.c = ig.out;
  g.m = M, g.n = ig.cout, g.k = K, g.batch = 1;
  g.lda = K, g.ldb = ig.ldw, g.ldc = ig.cout;
  g.a_col = false, g.b_col = true;
  g.in_dtype = g.out_dtype = ig.dtype;
  PatchALoads loads;
  loads.geo = ig.geo;
  gemm_impl::HopperMaps maps;
  // At most 128 output channels: 128-wide tiles (a 256-wide one would compute at least half its
  // columns on zeros).
  const bool narrow = ig.cout <= 128;
  constexpr int kC = WholeCfg<256>::kCluster;
  maps.a = input_map(ig.in, ig.dtype, ig.n, ig.h, ig.w, ig.c, ig.in_strides, ig.geo, WholeCfg<256>::kBlockM);
  maps.b = gemm_impl::matrix_map(ig.weight, ig.dtype, K, ig.cout, ig.ldw, 1, 0, kTapChannels,
                                 (narrow ? 128 : 256) / kC);  // this CTA's rows of a B tile
  maps.c = gemm_impl::matrix_map(ig.out, ig.dtype, ig.cout, M, ig.cout, 1, 0, static_cast<uint32_t>(128 / e), 64);
  if (narrow) launch_forward_n128(g, maps, loads, stream);
  else launch<256, false>(g, maps, loads, stream);
}

// w' [C, kH, kW, Cout] (contiguous) from w with logical strides ws (cout, cin, kh, kw): C and Cout
// swapped, taps reversed (conv2d_im2col::dgrad_as_forward). One thread per w' element, in its
// memory order.
template <class T>
__global__ void __launch_bounds__(256) flip_weight_kernel(const T* w, std::array<int64_t, 4> ws, int64_t cout,
                                                          int64_t c, int64_t kh, int64_t kw, T* out) {
  const int64_t total = c * kh * kw * cout;
  for (int64_t e = int64_t(blockIdx.x) * 256 + threadIdx.x; e < total; e += int64_t(gridDim.x) * 256) {
    const int64_t co = e % cout, t = e / cout, kx = t % kw, ky = (t / kw) % kh, ci = t / (kw * kh);
    out[e] = w[co * ws[0] + ci * ws[1] + (kh - 1 - ky) * ws[2] + (kw - 1 - kx) * ws[3]];
  }
}

// dw [Cout, K] = dy^T . P, K = kH kW C, the reduction over the N OH OW pixels: a GEMM with A = dy
// [pixels, Cout] read M-major (column-major A) and B = the forward's patch matrix [pixels, K],
// N-major (row-major B), its boxes loaded in im2col mode (PatchBLoads). Few output tiles (18 at
// Cout = C = 256, 3x3) and thousands of k-blocks: stream-K spreads them over every cluster.
void run_weight_gradient(const Conv2dArgs& a, cudaStream_t stream) {
  const int64_t pixels = a.n * a.oh * a.ow, K = a.kh * a.kw * a.c;
  const int64_t e = dtype_bits(a.dtype) / 8;
  GemmArgs g;
  g.a = a.dy, g.b = a.x, g.c = a.out;
  g.m = a.cout, g.n = K, g.k = pixels, g.batch = 1;
  g.lda = a.cout, g.ldb = K, g.ldc = a.ws[0];
  g.a_col = true, g.b_col = false;
  g.in_dtype = g.out_dtype = a.dtype;
  PatchBLoads loads;
  loads.geo = conv2d_im2col::geometry(a.prm, a.c, a.kh, a.kw, a.oh, a.ow);
  gemm_impl::HopperMaps maps;
  maps.a = gemm_impl::matrix_map(a.dy, a.dtype, a.cout, pixels, a.ys[3], 1, 0, 64, 64);  // (64 Cout, 64 pixels) boxes
  maps.b = input_map(a.x, a.dtype, a.n, a.h, a.w_in, a.c, a.xs, loads.geo, 64);        // (64 columns, 64 pixels)
  maps.c = gemm_impl::matrix_map(a.out, a.dtype, K, a.cout, a.ws[0], 1, 0, static_cast<uint32_t>(128 / e), 64);
  launch<256, true>(g, maps, loads, stream);
}

void conv2d_v06_launch(const Conv2dArgs& a, cudaStream_t stream) {
  if (a.n * a.oh * a.ow == 0 || a.n * a.h * a.w_in == 0 || a.c == 0 || a.cout == 0)
    HK_THROW(kNotSupported, "conv2d/v06_implicit_gemm_wgmma: an empty problem (the public op answers it without a "
                            "kernel)");
  if (a.dir == ConvDirection::kBackwardWeight) {
    run_weight_gradient(a, stream);
    return;
  }
  ImplicitGemm ig;
  ig.dtype = a.dtype;
  if (a.dir == ConvDirection::kForward) {
    ig.in = a.x, ig.n = a.n, ig.h = a.h, ig.w = a.w_in, ig.c = a.c, ig.in_strides = a.xs;
    ig.weight = a.w, ig.ldw = a.ws[0], ig.bias = a.bias;
    ig.out = a.out, ig.cout = a.cout, ig.oh = a.oh, ig.ow = a.ow;
    ig.geo = conv2d_im2col::geometry(a.prm, a.c, a.kh, a.kw, a.oh, a.ow);
    run_implicit_gemm(ig, stream);
    return;
  }
  // dx = conv(dy, w'): the input is dy [N, OH, OW, Cout], the output dx [N, H, W, C].
  const int64_t K = a.kh * a.kw * a.cout, elems = a.c * K;
  detail::StreamWorkspace flipped(stream, "conv2d_v06_flipped_weight", size_t(elems) * (dtype_bits(a.dtype) / 8));
  gemm_impl::dispatch_input(a.dtype, "v06_implicit_gemm_wgmma", [&](auto t) {
    using T = decltype(t);
    flip_weight_kernel<T><<<grid_for(ceil_div(elems, int64_t(256))), 256, 0, stream>>>(
        static_cast<const T*>(a.w), a.ws, a.cout, a.c, a.kh, a.kw, static_cast<T*>(flipped.get()));
    HK_CHECK_LAUNCH("conv2d_v06_flip_weight_kernel");
  });
  ig.in = a.dy, ig.n = a.n, ig.h = a.oh, ig.w = a.ow, ig.c = a.cout, ig.in_strides = a.ys;
  ig.weight = flipped.get(), ig.ldw = K;
  ig.out = a.out, ig.cout = a.c, ig.oh = a.h, ig.ow = a.w_in;
  ig.geo = conv2d_im2col::geometry(conv2d_im2col::dgrad_as_forward(a.prm, a.kh, a.kw), a.cout, a.kh, a.kw, a.h, a.w_in);
  run_implicit_gemm(ig, stream);
}

// Why the implicit GEMM cannot run a forward convolution of `c` channels into `cout` with
// parameters q, a kh x kw kernel and an oh x ow output over n images ("" when it can).
std::string forward_needs(const Conv2dParams& q, int64_t n, int64_t c, int64_t cout, int64_t kh, int64_t kw,
                          int64_t oh, int64_t ow) {
  if (c % kTapChannels != 0)
    return "the reduction's channels must be a multiple of 64 (a k-block is one tap's 64 channels), got " +
           std::to_string(c);
  if (cout % 8 != 0) return "the output's channels must be a multiple of 8 (16-byte rows), got " + std::to_string(cout);
  if (q.stride_h > 8 || q.stride_w > 8)
    return "strides of at most 8 (TMA's traversal step), got " + std::to_string(q.stride_h) + "x" +
           std::to_string(q.stride_w);
  const ptx::Im2colBox box = im2col_box(conv2d_im2col::geometry(q, c, kh, kw, oh, ow));
  for (int v : {box.lower_w, box.lower_h, box.upper_w, box.upper_h})
    if (v < -128 || v > 127)
      return "the padded box's corners (-padding, padding - dilation (k - 1)) must lie in [-128, 127] for TMA's "
             "im2col mode, got " + std::to_string(v);
  if (q.dilation_h * (kh - 1) >= 255 || q.dilation_w * (kw - 1) >= 255)
    return "a tap reach dilation (k - 1) of 255 or more (TMA's im2col offsets, as CUTLASS bounds them)";
  if (n * oh * ow > INT32_MAX) return "more than 2^31 output pixels (TMA coordinates)";
  return "";
}

std::string conv2d_v06_supports(const Conv2dProblem& p) {
  if (p.n == 0 || p.c == 0 || p.cout == 0 || p.h == 0 || p.w == 0 || p.oh() <= 0 || p.ow() <= 0)
    return "an empty problem (the public op answers it without a kernel)";
  if (!p.nhwc()) return "NHWC only (TMA's im2col mode reads channel runs of NHWC pixels), got NCHW";
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16)
    return "f16 or bf16 only (wgmma), got " + std::string(to_string(p.dtype));
  if (p.prm.groups != 1) return "groups == 1 only, got " + std::to_string(p.prm.groups);
  if (p.align_bytes < 16) return "operands must be 16-byte aligned (TMA), got " + std::to_string(p.align_bytes);
  const Conv2dParams& q = p.prm;
  // The weight gradient reads the forward's patch matrix (as B): the forward's needs.
  if (p.dir != ConvDirection::kBackwardData) return forward_needs(q, p.n, p.c, p.cout, p.kh, p.kw, p.oh(), p.ow());
  // The data gradient runs as a forward convolution of dy (conv2d_im2col::dgrad_as_forward).
  if (q.stride_h != 1 || q.stride_w != 1)
    return "the data gradient at stride 1 only (a transposed strided convolution skips taps), got " +
           std::to_string(q.stride_h) + "x" + std::to_string(q.stride_w);
  if (q.pad_top > q.dilation_h * (p.kh - 1) || q.pad_bottom > q.dilation_h * (p.kh - 1) ||
      q.pad_left > q.dilation_w * (p.kw - 1) || q.pad_right > q.dilation_w * (p.kw - 1))
    return "the data gradient needs padding within the kernel's reach dilation (k - 1)";
  return forward_needs(conv2d_im2col::dgrad_as_forward(q, p.kh, p.kw), p.n, p.cout, p.c, p.kh, p.kw, p.h, p.w);
}

// One im2col-mode load of `pixels` pixels x 64 channels, as the rungs issue it, copied out of
// shared memory as TMA wrote it (128-byte swizzled rows): the GPU suite's check of the tensor map
// and the load apart from the GEMM around them (conv2d_v06_probe_a_tile).
__global__ void __launch_bounds__(128) probe_kernel(const __grid_constant__ CUtensorMap map, conv2d_im2col::Coords at,
                                                    uint32_t bytes, uint4* out) {
  extern __shared__ uint8_t probe_smem[];
  __shared__ uint64_t bar;
  // The 128-byte swizzle's phase comes from address bits 7-9: the tile starts 1024-byte aligned.
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(probe_smem));
  uint8_t* tile = probe_smem + ((1024 - (raw & 1023)) & 1023);
  if (threadIdx.x == 0) {
    ptx::mbar_init(&bar, 1);
    ptx::mbar_fence_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::mbar_arrive_expect_tx(&bar, bytes);
    ptx::tma_load_im2col_4d(tile, &map, at.c, at.w, at.h, at.n, at.off_w, at.off_h, &bar);
  }
  ptx::mbar_wait(&bar, 0);
  for (uint32_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) out[i] = reinterpret_cast<const uint4*>(tile)[i];
}

void probe_a_tile(const Conv2dArgs& a, int32_t m0, int32_t k0, int pixels, void* out, cudaStream_t stream) {
  if (a.dir != ConvDirection::kForward || a.c % kTapChannels != 0 || (pixels != 64 && pixels != 128))
    HK_THROW(kValue, "conv2d_v06_probe_a_tile: a forward problem with C a multiple of 64, 64 or 128 pixels");
  const conv2d_im2col::Geometry geo = conv2d_im2col::geometry(a.prm, a.c, a.kh, a.kw, a.oh, a.ow);
  const CUtensorMap map = input_map(a.x, a.dtype, a.n, a.h, a.w_in, a.c, a.xs, geo, static_cast<uint32_t>(pixels));
  const uint32_t bytes = static_cast<uint32_t>(pixels) * 128;
  allow_dynamic_smem(probe_kernel, bytes + 1024);
  probe_kernel<<<1, 128, bytes + 1024, stream>>>(map, geo.load(m0, k0), bytes, static_cast<uint4*>(out));
  HK_CHECK_LAUNCH("conv2d_v06_probe_kernel");
}

}  // namespace

HK_REGISTER_VARIANT(Conv2dProblem, Conv2dArgs, "conv2d", "v06_implicit_gemm_wgmma",
                    "implicit GEMM on the production GEMM body: TMA im2col loads of the activation tile, wgmma "
                    "m64n256k16, warp-specialised 4-stage ring, 2-CTA clusters, stream-K last waves, fused bias "
                    "epilogue; forward, weight gradient and stride-1 data gradient",
                    90, kFlagNone, conv2d_v06_supports, conv2d_v06_launch);

}  // namespace hk::conv2d_v06

namespace hk {

void conv2d_v06_probe_a_tile(const Conv2dArgs& a, int32_t m0, int32_t k0, int pixels, void* out,
                             cudaStream_t stream) {
  conv2d_v06::probe_a_tile(a, m0, k0, pixels, out, stream);
}

}  // namespace hk
