// gemm_w4a16/v03_mma_dequant.cu
//
// Rung 3: tensor cores for M > 4: mma.sync m16n8k16 (bf16/f16 in, f32 accumulate) with W
// dequantised in registers straight into the B fragment, x and the packed W fed through a
// cp.async ring (4 stages of 128 x 128 tiles; 8 stages of 16 x 64 tiles for M <= 64, where the
// weights stream as in decode and bytes in flight set the rate).
// Adds over v02: the multiply moves from CUDA-core FMAs to the tensor cores, and each weight
// tile read from memory serves a whole block of rows of x (16 or 128) instead of one.
//
// Fragment order without a shuffle: an m16n8k16 B fragment gives lane 4r + t the weights
// (n = r; k = 2t, 2t+1, 2t+8, 2t+9) of its 16-wide step. A dot product does not care in which
// order K is summed, as long as x and W agree, so each 32-wide K chunk is split over two mma
// steps in a permuted order: lane t's four k positions in step s are the logical
// k = 8t + 2s + {0, 4, 1, 5}. Then the eight values lane t needs from row r in the chunk are
// k = 8t .. 8t+7 — exactly one packed word (interchange word 4c + t of the k-tile) — and
// dequant_word's pairs (w_j, w_{j+4}) are, in order, the registers b0, b1 of step 0 (j = 0, 1)
// and of step 1 (j = 2, 3). x gets the same permutation: lane t reads x[row, 8t .. 8t+7] with
// one 16-byte shared-memory load and builds its A registers with four byte permutes.
//
// Tiles: BK = 128 (one k-tile of the tiled layout). M > 64: 8 warps as 2 x 4, each 64 x 32
// (BM = BN = 128); M <= 64: 4 warps as 1 x 4, each 16 x 16 (BM = 16, BN = 64), so mid-size M
// still fills the GPU with blocks. x's shared rows are padded to 320 bytes (the 8 lanes of a
// 16-byte load phase read rows r and r + 1 at 64-byte offsets: banks 0-15 and 16-31); the rows
// layout's W rows to 80 bytes (rows r = 0..7 at word offsets 20 r: distinct banks); the tiled
// layout's W tile is lane-contiguous (one conflict-free 16-byte load per lane).
// Needs: 16-byte aligned operands and x rows (cp.async); rows layout: K a multiple of 32 (W
// rows whole 16-byte chunks).
// Run:   hk bench gemm_w4a16 --variant v03_mma_dequant --shape 4096x4096x4096
#include "common/launch.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/mma.cuh"
#include "gemm_w4a16/w4a16.cuh"

namespace hk::gemm_w4a16_v03_mma_dequant {
namespace {

template <int kWarpsM_, int kWarpsN_, int kTilesM_, int kTilesN_, int kStages_>
struct Config {
  static constexpr int kWarpsM = kWarpsM_, kWarpsN = kWarpsN_;  // warp grid of a block
  static constexpr int kTilesM = kTilesM_, kTilesN = kTilesN_;  // m16 and n8 tiles per warp
  static constexpr int kStages = kStages_;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kBM = 16 * kWarpsM * kTilesM, kBN = 8 * kWarpsN * kTilesN, kBK = 128;
  static constexpr int kAPitch = kBK + 32;  // elements: 320-byte rows (see the header)
  static constexpr int kAStage = kBM * kAPitch;
  static constexpr int kBRowPitch = 20;     // words: rows layout, 16 words + 4 of padding
  template <bool kTiled>
  static constexpr int b_stage() { return kTiled ? kBN / 8 * 128 : kBN * kBRowPitch; }  // words
  template <bool kTiled>
  static constexpr size_t smem() { return size_t(kStages) * (kAStage * 2 + b_stage<kTiled>() * 4); }
};

using Large = Config<2, 4, 4, 4, 4>;  // 128 x 128, 256 threads, 200 KB
using Small = Config<1, 4, 1, 2, 8>;  // 16 x 64, 128 threads, 80 KB: 7 k-tiles in flight (decode: N / 64 blocks)
static_assert(Large::smem<false>() <= 227 * 1024, "fits the opt-in shared memory of an SM");

template <class T, bool kTiled, class C>
__global__ void __launch_bounds__(C::kThreads) gemm_w4a16_v03_kernel(W4A16Args a) {
  constexpr int kTM = C::kTilesM, kTN = C::kTilesN, kStages = C::kStages;
  constexpr int kBStage = C::template b_stage<kTiled>();
  extern __shared__ __align__(16) uint8_t smem[];
  T* as = reinterpret_cast<T*>(smem);                                                 // (kStages, kBM, kAPitch)
  uint32_t* bs = reinterpret_cast<uint32_t*>(smem + size_t(kStages) * C::kAStage * sizeof(T));  // (kStages, kBStage)

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / C::kWarpsN, wn = warp % C::kWarpsN;
  const int r = lane / 4, t = lane % 4;
  const int64_t m0 = int64_t(blockIdx.y) * C::kBM, n0 = int64_t(blockIdx.x) * C::kBN;
  const int64_t ktiles = kTiled ? a.k_padded / 128 : (a.k + 127) / 128;
  const T* x = static_cast<const T*>(a.x);

  auto load_stage = [&](int64_t kb, int slot) {
    ptx::cp_async_tile<C::kBM, C::kBK, C::kAPitch, C::kThreads, T>(as + slot * C::kAStage, x, a.ld_x, m0, kb * 128,
                                                                   a.m, a.k, tid);
    uint32_t* dst = bs + slot * kBStage;
    if constexpr (kTiled) {
      // kBN / 8 n-tiles of 512 contiguous bytes each for this k-tile.
      constexpr int kChunks = C::kBN / 8 * 32;
      static_assert(kChunks % C::kThreads == 0, "whole chunks per thread");
      const int64_t ntiles = (a.n + 7) / 8;
#pragma unroll
      for (int i = 0; i < kChunks / C::kThreads; ++i) {
        const int chunk = tid + i * C::kThreads, j = chunk / 32, l = chunk % 32;
        const int64_t nt = n0 / 8 + j;
        const bool in = nt < ntiles;
        const int32_t* src = a.qweight + nt * a.k_padded + kb * 128 + l * 4;
        ptx::cp_async_16(dst + j * 128 + l * 4, in ? src : a.qweight, in ? 16 : 0);
      }
    } else {
      ptx::cp_async_tile<C::kBN, 16, C::kBRowPitch, C::kThreads, int32_t>(reinterpret_cast<int32_t*>(dst), a.qweight,
                                                                          a.k / 8, n0, kb * 16, a.n, a.k / 8, tid);
    }
  };

  float acc[kTM][kTN][4];
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_stage(s, s);
    ptx::cp_async_commit();
  }

  const bool tile_in_one_group = a.group % 128 == 0 || a.groups == 1;
  w4a16::GroupParams<T> gp[kTN];  // (zero, scale) of each n8 tile's column, for the current chunk
  for (int64_t kb = 0; kb < ktiles; ++kb) {
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();  // tile kb visible to all; every warp is done with tile kb - 1's slot
    {
      const int64_t next = kb + kStages - 1;
      if (next < ktiles) load_stage(next, static_cast<int>(next % kStages));
      ptx::cp_async_commit();
    }
    const int slot = static_cast<int>(kb % kStages);
    const T* at = as + slot * C::kAStage;
    const uint32_t* bt = bs + slot * kBStage;

    uint32_t bw[kTN][4];  // per n8 tile, the packed word of each 32-wide chunk c
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int nl = (wn * kTN + j) * 8;
      if constexpr (kTiled) {
        const uint4 v = *reinterpret_cast<const uint4*>(bt + (nl / 8) * 128 + lane * 4);
        bw[j][0] = v.x, bw[j][1] = v.y, bw[j][2] = v.z, bw[j][3] = v.w;
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) bw[j][c] = bt[(nl + r) * C::kBRowPitch + c * 4 + t];
      }
    }

#pragma unroll
    for (int c = 0; c < 4; ++c) {
      uint32_t af[kTM][2][4];  // (m16 tile, step, register)
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
        const int row = (wm * kTM + i) * 16 + r;
        const uint4 u0 = *reinterpret_cast<const uint4*>(at + row * C::kAPitch + c * 32 + t * 8);
        const uint4 u1 = *reinterpret_cast<const uint4*>(at + (row + 8) * C::kAPitch + c * 32 + t * 8);
        // step 0: k = 8t + {0, 4} and 8t + {1, 5}; step 1: 8t + {2, 6} and 8t + {3, 7}
        af[i][0][0] = __byte_perm(u0.x, u0.z, 0x5410), af[i][0][1] = __byte_perm(u1.x, u1.z, 0x5410);
        af[i][0][2] = __byte_perm(u0.x, u0.z, 0x7632), af[i][0][3] = __byte_perm(u1.x, u1.z, 0x7632);
        af[i][1][0] = __byte_perm(u0.y, u0.w, 0x5410), af[i][1][1] = __byte_perm(u1.y, u1.w, 0x5410);
        af[i][1][2] = __byte_perm(u0.y, u0.w, 0x7632), af[i][1][3] = __byte_perm(u1.y, u1.w, 0x7632);
      }
      // One group per 32-wide chunk (g is a multiple of 32, or K); chunks past K (zero x) clamp.
      // When no k-tile straddles two groups (g a multiple of 128, or one group per row), the
      // scales and zero points are read once per k-tile instead of once per chunk.
      if (c == 0 || !tile_in_one_group) {
        const int64_t kc = kb * 128 + c * 32;
        const int64_t g = kc / a.group < a.groups ? kc / a.group : a.groups - 1;
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
          const int64_t n = n0 + (wn * kTN + j) * 8 + r;
          gp[j] = w4a16::group_params<T>(a, n < a.n ? n : a.n - 1, g);
        }
      }
#pragma unroll
      for (int j = 0; j < kTN; ++j) {
        w4a16::T2<T> p[4];
        w4a16::dequant_word<T>(bw[j][c], gp[j], p);
        const uint32_t b0[2] = {w4a16::as_u32<T>(p[0]), w4a16::as_u32<T>(p[1])};
        const uint32_t b1[2] = {w4a16::as_u32<T>(p[2]), w4a16::as_u32<T>(p[3])};
#pragma unroll
        for (int i = 0; i < kTM; ++i) {
          ptx::mma_m16n8k16<T>(acc[i][j], af[i][0], b0);
          ptx::mma_m16n8k16<T>(acc[i][j], af[i][1], b1);
        }
      }
    }
  }
  ptx::cp_async_wait<0>();

  T* y = static_cast<T*>(a.y);
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int64_t row = m0 + (wm * kTM + i) * 16 + r, col = n0 + (wn * kTN + j) * 8 + 2 * t;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (row + 8 * h < a.m && col + e < a.n) y[(row + 8 * h) * a.ld_y + col + e] = static_cast<T>(acc[i][j][2 * h + e]);
    }
}

template <class T, bool kTiled, class C>
void launch_config(const W4A16Args& a, cudaStream_t stream) {
  auto kernel = gemm_w4a16_v03_kernel<T, kTiled, C>;
  constexpr size_t smem = C::template smem<kTiled>();
  allow_dynamic_smem(kernel, smem);
  const dim3 grid(static_cast<unsigned>(ceil_div(a.n, C::kBN)), static_cast<unsigned>(ceil_div(a.m, C::kBM)));
  kernel<<<grid, C::kThreads, smem, stream>>>(a);
  HK_CHECK_LAUNCH("gemm_w4a16_v03_kernel");
}

void gemm_w4a16_v03_launch(const W4A16Args& a, cudaStream_t stream) {
  w4a16::dispatch_dtype(a.dtype, "gemm_w4a16/v03_mma_dequant", [&](auto tag) {
    using T = decltype(tag);
    const bool small = a.m <= 64;
    if (a.layout == W4A16Layout::kTiled) {
      if (small) launch_config<T, true, Small>(a, stream);
      else launch_config<T, true, Large>(a, stream);
    } else {
      if (small) launch_config<T, false, Small>(a, stream);
      else launch_config<T, false, Large>(a, stream);
    }
  });
}

std::string gemm_w4a16_v03_supports(const W4A16Problem& p) {
  if (p.x_row_align() < 16)
    return detail::cat("cp.async copies 16 bytes: every operand and x's rows must be 16-byte aligned, got ", p.x_row_align(), "-byte alignment");
  if (!p.tiled() && p.k % 32 != 0)
    return detail::cat("the rows layout is copied in 16-byte chunks: K must be a multiple of 32, got K=", p.k);
  const int64_t bm = p.m <= 64 ? Small::kBM : Large::kBM, bn = p.m <= 64 ? Small::kBN : Large::kBN;
  if (ceil_div(p.m, bm) > 65535) return detail::cat("grid.y (M / ", bm, ") is limited to 65535, got M=", p.m);
  if (ceil_div(p.n, bn) > 0x7FFFFFFF) return "grid.x (N / 64) is limited to 2^31 - 1";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(W4A16Problem, W4A16Args, "gemm_w4a16", "v03_mma_dequant",
                    "mma.sync m16n8k16 with W dequantised into the B fragment in registers, cp.async ring",
                    80, kFlagProduction, gemm_w4a16_v03_supports, gemm_w4a16_v03_launch);

}  // namespace hk::gemm_w4a16_v03_mma_dequant
