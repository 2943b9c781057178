// gemm/v06_mma_sync_ldmatrix.cu
//
// Rung 6: Ampere-style tensor cores. 128x128x32 tiles in a 3-slot cp.async ring; 8 warps
// (2 along M x 4 along N), each owning a 64x32 block of C as 4x4 mma.sync.m16n8k16 tiles
// (bf16/f16 in, f32 accumulate), whose operand fragments ldmatrix.x4 loads from padded shared
// memory (.trans where a tile is stored M- or N-major).
// Adds over v04/v05: tensor cores (HMMA in SASS) instead of FMAs — one instruction does 4096
// multiply-adds; operand fragments come four 8x8 matrices per ldmatrix instead of one value per
// load; a 3-stage pipeline keeps two tiles in flight while the warps multiply the third.
// Needs: sm_80; v05's cp.async rules (16-byte aligned A and B, leading dims and batch strides
// a multiple of 16 bytes); otherwise supports() names the rule and hk::gemm falls back.
// Run:   hk bench gemm --variant v06_mma_sync_ldmatrix --shape 4096x4096x4096
#include "common/launch.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/mma.cuh"
#include "gemm/epilogue.cuh"

namespace hk::gemm_v06_mma_sync_ldmatrix {
namespace {

constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 32, kStages = 3;
constexpr int kWarpsM = 2, kWarpsN = 4, kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kWarpM = kBlockM / kWarpsM, kWarpN = kBlockN / kWarpsN;  // 64 x 32 of C per warp
constexpr int kMmaM = kWarpM / 16, kMmaN = kWarpN / 8;                  // 4 x 4 m16n8 tiles
static_assert(kBlockK % 16 == 0 && kMmaN % 2 == 0, "k16 steps; B fragments load two n8 tiles at a time");

// A K-major tile (row-major A, column-major B) stores kMN rows of kBlockK elements; an MN-major
// one kBlockK rows of kMN. Rows padded by 16 bytes: the 8 rows of each ldmatrix matrix hit 8
// different 16-byte bank groups (mma_layout.hpp).
template <bool kKMajor, int kMN>
struct Tile {
  static constexpr int kPitch = ptx::padded_pitch(kKMajor ? kBlockK : kMN);
  static constexpr int kElems = (kKMajor ? kMN : kBlockK) * kPitch;
};

template <bool kAK, bool kBK>
constexpr int kSmemBytes = kStages * (Tile<kAK, kBlockM>::kElems + Tile<kBK, kBlockN>::kElems) * 2;

// NOTE: min blocks 1: without it ptxas aims at two blocks per SM (128 registers) and spills the
// 64 accumulators' neighbours; one 256-thread block with ~156 registers does not.
template <class T, bool kACol, bool kBCol>
__global__ void __launch_bounds__(kThreads, 1) gemm_v06_kernel(const GemmArgs g) {
  constexpr bool kAK = !kACol, kBK = kBCol;  // which operands are K-major
  using TA = Tile<kAK, kBlockM>;
  using TB = Tile<kBK, kBlockN>;
  extern __shared__ __align__(16) unsigned char smem[];
  T* as = reinterpret_cast<T*>(smem);  // (kStages, A tile) bf16/f16
  T* bs = as + kStages * TA::kElems;   // (kStages, B tile)
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const int64_t bi = blockIdx.z;
  const int64_t m0 = int64_t(blockIdx.y) * kBlockM, n0 = int64_t(blockIdx.x) * kBlockN;
  const T* a = static_cast<const T*>(g.a) + bi * g.batch_stride_a;
  const T* b = static_cast<const T*>(g.b) + bi * g.batch_stride_b;
  const int64_t ktiles = (g.k + kBlockK - 1) / kBlockK;

  auto load = [&](int64_t kt) {
    const int slot = static_cast<int>(kt % kStages);
    const int64_t k0 = kt * kBlockK;
    T* at = as + slot * TA::kElems;
    T* bt = bs + slot * TB::kElems;
    if constexpr (kAK) ptx::cp_async_tile<kBlockM, kBlockK, TA::kPitch, kThreads>(at, a, g.lda, m0, k0, g.m, g.k, tid);
    else ptx::cp_async_tile<kBlockK, kBlockM, TA::kPitch, kThreads>(at, a, g.lda, k0, m0, g.k, g.m, tid);
    if constexpr (kBK) ptx::cp_async_tile<kBlockN, kBlockK, TB::kPitch, kThreads>(bt, b, g.ldb, n0, k0, g.n, g.k, tid);
    else ptx::cp_async_tile<kBlockK, kBlockN, TB::kPitch, kThreads>(bt, b, g.ldb, k0, n0, g.k, g.n, tid);
  };

  // This lane's ldmatrix row inside a 16x16 operand block, as stored (see mma_layout.hpp).
  const ptx::RowCol arow = ptx::ldmatrix_a_row(lane, kAK), brow = ptx::ldmatrix_b_row(lane, kBK);
  float acc[kMmaM][kMmaN][4] = {};  // (m16 tile, n8 tile, fragment) f32

  // Prologue: kStages - 1 tiles in flight; one commit per tile (empty past the end) keeps the
  // wait count below the same for every iteration.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load(s);
    ptx::cp_async_commit();
  }
  for (int64_t kt = 0; kt < ktiles; ++kt) {
    ptx::cp_async_wait<kStages - 2>();  // tile kt has landed (this thread's copies) ...
    __syncthreads();                    // ... everyone's, and tile kt-1's slot is free
    if (kt + kStages - 1 < ktiles) load(kt + kStages - 1);
    ptx::cp_async_commit();
    const T* at = as + (kt % kStages) * TA::kElems;
    const T* bt = bs + (kt % kStages) * TB::kElems;
#pragma unroll
    for (int ks = 0; ks < kBlockK / 16; ++ks) {
      uint32_t af[kMmaM][4], bf[kMmaN][2];  // A (m16 x k16) and B (k16 x n8) fragments
#pragma unroll
      for (int mi = 0; mi < kMmaM; ++mi) {
        // The block's corner as stored: (m, k) for a K-major tile, (k, m) for an M-major one.
        const int r0 = kAK ? wm * kWarpM + mi * 16 : ks * 16, c0 = kAK ? ks * 16 : wm * kWarpM + mi * 16;
        ptx::ldmatrix_x4<!kAK>(af[mi], at + (r0 + arow.row) * TA::kPitch + c0 + arow.col);
      }
#pragma unroll
      for (int nj = 0; nj < kMmaN; nj += 2) {
        const int r0 = kBK ? wn * kWarpN + nj * 8 : ks * 16, c0 = kBK ? ks * 16 : wn * kWarpN + nj * 8;
        uint32_t r[4];
        ptx::ldmatrix_x4<!kBK>(r, bt + (r0 + brow.row) * TB::kPitch + c0 + brow.col);
        bf[nj][0] = r[0], bf[nj][1] = r[1], bf[nj + 1][0] = r[2], bf[nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
        for (int nj = 0; nj < kMmaN; ++nj) ptx::mma_m16n8k16<T>(acc[mi][nj], af[mi], bf[nj]);
    }
  }
#pragma unroll
  for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
    for (int nj = 0; nj < kMmaN; ++nj)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const ptx::RowCol c = ptx::mma_c_element(lane, e);
        gemm_impl::epilogue_store(g, acc[mi][nj][e], bi, m0 + wm * kWarpM + mi * 16 + c.row,
                                  n0 + wn * kWarpN + nj * 8 + c.col);
      }
}

void gemm_v06_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::dispatch_input(g.in_dtype, "v06_mma_sync_ldmatrix", [&](auto t) {
    gemm_impl::dispatch_layout(g.a_col, g.b_col, [&](auto ac, auto bc) {
      constexpr bool kACol = decltype(ac)::value, kBCol = decltype(bc)::value;
      constexpr int smem = kSmemBytes<!kACol, kBCol>;
      auto kernel = gemm_v06_kernel<decltype(t), kACol, kBCol>;
      allow_dynamic_smem(kernel, smem);
      dim3 grid(gemm_impl::grid_dim(ceil_div(g.n, kBlockN), "N"), gemm_impl::grid_dim(ceil_div(g.m, kBlockM), "M"),
                gemm_impl::grid_dim(g.batch, "batch"));
      kernel<<<grid, kThreads, smem, stream>>>(g);
      HK_CHECK_LAUNCH("gemm_v06_kernel");
    });
  });
}

std::string gemm_v06_supports(const GemmProblem& p) { return gemm_cp_async_supports(p, kBlockM); }

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v06_mma_sync_ldmatrix",
                    "mma.sync m16n8k16 tensor cores, ldmatrix from padded smem, 3-stage cp.async ring", 80,
                    kFlagNone, gemm_v06_supports, gemm_v06_launch);

}  // namespace hk::gemm_v06_mma_sync_ldmatrix
