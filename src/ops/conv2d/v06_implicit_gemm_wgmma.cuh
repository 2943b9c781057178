// conv2d/v06_implicit_gemm_wgmma.cuh — rung 6's kernels (what they do and why:
// v06_implicit_gemm_wgmma.cu): the GEMM family's production body with the patch matrix read by
// TMA in im2col mode, for output tiles 256 or 128 columns wide. Each width's kernels compile in
// a translation unit of their own: 256 in v06_implicit_gemm_wgmma.cu, 128 in
// v06_implicit_gemm_wgmma_n128.cu.
#pragma once

#include "conv2d/conv2d_op.hpp"
#include "conv2d/im2col_tma.hpp"
#include "gemm/hopper_gemm.cuh"
#include "gemm/v18_stream_k_tail.cuh"

namespace hk::conv2d_v06 {

constexpr int kTapChannels = conv2d_im2col::Geometry::kTapChannels;  // channels per k-block

// Output tiles of 128 x kBN: whole tiles per cluster (v15's policy), or v18's stream-K with a
// grid of every cluster that fits even where the problem has fewer tile units — the weight
// gradient (9 units of 392 k-blocks at 8x256x56x56, 3x3) and the small-spatial layers (26 units
// of 72 at 64x512x7x7) split their only wave's k-blocks over all of them.
template <int kBN>
struct Whole : gemm_impl::V15 {
  static constexpr int kBlockN = kBN;
};
template <int kBN>
struct Split : gemm_impl::V18 {
  static constexpr int kBlockN = kBN;
  static constexpr bool kStreamKFewUnits = true;
};
template <int kBN>
using WholeCfg = gemm_impl::HopperConfig<Whole<kBN>>;
template <int kBN>
using SplitCfg = gemm_impl::HopperConfig<Split<kBN>>;
static_assert(kTapChannels == WholeCfg<256>::kBlockK, "a k-block is one tap's 64 channels: one 128-byte swizzle row");
static_assert(WholeCfg<256>::kThreads == WholeCfg<128>::kThreads && WholeCfg<256>::kBlockM == SplitCfg<128>::kBlockM &&
                  WholeCfg<256>::kCluster == SplitCfg<128>::kCluster,
              "every policy: the same threads, 128-row tiles and 2-CTA clusters");

// The forward's (and data gradient's) loads: A, the patch matrix [pixels, K], k-block k0 / 64 of
// the tile whose first output pixel is m0, as one im2col-mode TMA load (the coordinates:
// conv2d/im2col_tma.hpp); B, the weight [cout, K], as the GEMM loads it.
struct PatchALoads : gemm_impl::MatrixLoads {
  conv2d_im2col::Geometry geo;

  template <bool kAMn, class C>
  __device__ __forceinline__ void load_a(uint8_t* a_dst, const CUtensorMap* tma_a, const GemmArgs&, int32_t m0,
                                         int32_t k0, int32_t, uint64_t* bar) const {
    static_assert(!kAMn && C::kBlockK == kTapChannels, "a K-major (pixels, 64 channels) tile per k-block");
    const conv2d_im2col::Coords at = geo.load(m0, k0);
    ptx::tma_load_im2col_4d(a_dst, tma_a, at.c, at.w, at.h, at.n, at.off_w, at.off_h, bar);
  }
};

// The weight gradient's loads, dw [Cout, K] = dy^T [Cout, pixels] . P [pixels, K]: A, dy read
// M-major as the GEMM reads a column-major A; B, the patch matrix with the pixels as the
// reduction: each 64-column box of this CTA's share of the tile is one tap's 64 channels of the
// k-block's 64 pixels, one im2col-mode load (64 pixels per load), multicast to the cluster.
struct PatchBLoads : gemm_impl::MatrixLoads {
  conv2d_im2col::Geometry geo;

  template <bool kBMn, class C>
  __device__ __forceinline__ void load_b(uint8_t* b_dst, const CUtensorMap* tma_b, const GemmArgs& g, int32_t n0,
                                         int32_t k0, int32_t, uint64_t* bar, uint32_t rank) const {
    static_assert(kBMn && C::kBlockK == 64, "(64 columns, 64 pixels) boxes, the columns contiguous");
    constexpr int kC = C::kCluster, kBoxes = C::kBlockN / 64 / kC;  // this CTA's share
    conv2d_im2col::Coords at;
    geo.start(k0, at);  // the k-block's pixels k0 .. k0 + 63
    // NOTE: not unrolled: unrolled, the producer (40 registers) spilled 8 bytes in the stream-K
    // kernels.
#pragma unroll 1
    for (int j = 0; j < kBoxes; ++j) {
      const int jj = int(rank) * kBoxes + j;
      // A box entirely past K is clamped to n0 (its columns are never stored).
      const int32_t nj = n0 + 64 * jj < g.n ? n0 + 64 * jj : n0;
      geo.columns(nj, at);
      if constexpr (kC > 1)
        ptx::tma_load_im2col_4d_multicast(b_dst + jj * 8192, tma_b, at.c, at.w, at.h, at.n, at.off_w, at.off_h, bar,
                                          (1u << kC) - 1);
      else ptx::tma_load_im2col_4d(b_dst + jj * 8192, tma_b, at.c, at.w, at.h, at.n, at.off_w, at.off_h, bar);
    }
  }
};

// Policy P (Whole or Split), input type T, epilogue Epi. kMn: the weight gradient's operands (A
// M-major, B N-major, PatchBLoads); else the forward's (both K-major, PatchALoads).
template <class P, class T, class Epi, class Loads, bool kMn>
__global__ void __launch_bounds__(WholeCfg<256>::kThreads, 1)
    conv2d_v06_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                      const __grid_constant__ CUtensorMap tma_c, const GemmArgs g, const gemm_impl::StreamKWorkspace ws,
                      const Loads loads) {
  gemm_impl::hopper_gemm_body<T, kMn, kMn, gemm_impl::HopperConfig<P>, Epi>(&tma_a, &tma_b, &tma_c, g, ws, loads);
}

// Runs problem g with the maps (built for kBN-wide tiles) on loads' kernels: stream-K where the
// schedule splits (as the GEMM's v18), whole tiles elsewhere; the bias fused when g has one.
template <int kBN, bool kMn, class Loads>
void launch(const GemmArgs& g, const gemm_impl::HopperMaps& maps, const Loads& loads, cudaStream_t stream) {
  gemm_impl::dispatch_input(g.in_dtype, "v06_implicit_gemm_wgmma", [&](auto t) {
    using T = decltype(t);
    auto run = [&](auto epi) {
      using Epi = decltype(epi);
      const auto split = conv2d_v06_kernel<Split<kBN>, T, Epi, Loads, kMn>;
      if (gemm_impl::stream_k_splits<SplitCfg<kBN>>(split, g))
        gemm_impl::launch_hopper_kernel<SplitCfg<kBN>>(split, maps, g, "conv2d_v06_kernel", stream,
                                                       gemm_impl::stream_k_workspace<SplitCfg<kBN>>(stream), loads);
      else
        gemm_impl::launch_hopper_kernel<WholeCfg<kBN>>(conv2d_v06_kernel<Whole<kBN>, T, Epi, Loads, kMn>, maps, g,
                                                       "conv2d_v06_kernel", stream, gemm_impl::StreamKWorkspace{},
                                                       loads);
    };
    if (g.bias) run(gemm_impl::FusedEpilogue<T, GemmActivation::kNone, true>{});
    else run(gemm_impl::FusedEpilogue<T, GemmActivation::kNone, false>{});
  });
}

// The forward's kernels for 128-wide tiles (output channels <= 128), compiled in
// v06_implicit_gemm_wgmma_n128.cu.
void launch_forward_n128(const GemmArgs& g, const gemm_impl::HopperMaps& maps, const PatchALoads& loads,
                         cudaStream_t stream);

}  // namespace hk::conv2d_v06
