// gemm/v05_vectorized_cp_async.cu
//
// Rung 5: v04's 128x128 tiles and 8x8 register outer products, fed by 16-byte cp.async copies
// into two shared-memory slots: tile k+1 streams in while the threads multiply tile k.
// Adds over v04: global->shared copies that bypass registers (no load-convert-store per
// element), 8 elements per copy instead of 1, double buffering so loads overlap the FMAs, and
// 16-byte shared reads of 8 operand values at a time. Tiles stay in the operands' own layout
// (bf16/f16, K-major or MN-major), so each layout reads its fragments its own way.
// Needs: 16-byte aligned A and B, leading dims and batch strides of A and B a multiple of 16
// bytes; otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for
// cp.async, got K=799") and hk::gemm falls back to a rung that takes any layout.
// Run:   hk bench gemm --variant v05_vectorized_cp_async --shape 4096x4096x4096
#include <type_traits>

#include "common/launch.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/mma_layout.hpp"
#include "gemm/epilogue.cuh"

namespace hk::gemm_v05_vectorized_cp_async {
namespace {

constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 32;
constexpr int kThreads = 256;
constexpr int kThreadM = 8, kThreadN = 8;  // outputs per thread
constexpr int kOctet = 8;                  // 16-bit elements per 16-byte shared read
static_assert((kBlockM / kThreadM) * (kBlockN / kThreadN) == kThreads, "one 8x8 sub-tile per thread");
static_assert(kThreadM == kOctet && kThreadN == kOctet && kBlockK % kOctet == 0, "fragments are 16-byte octets");

// A K-major tile (K contiguous: row-major A, column-major B) stores kMN rows of kBlockK; an
// MN-major one kBlockK rows of kMN. Rows padded by 16 bytes (mma_layout.hpp: conflict-free
// 16-byte reads down a column).
template <bool kKMajor, int kMN>
struct Tile {
  static constexpr int kPitch = ptx::padded_pitch(kKMajor ? kBlockK : kMN);
  static constexpr int kElems = (kKMajor ? kMN : kBlockK) * kPitch;
};
constexpr int kMaxTile = Tile<true, 128>::kElems > Tile<false, 128>::kElems ? Tile<true, 128>::kElems
                                                                             : Tile<false, 128>::kElems;
static_assert(2 * 2 * kMaxTile * 2 <= 48 * 1024, "two slots of A and B fit the static 48 KB");

// Element idx (0..7, a compile-time constant after unrolling) of 8 packed 16-bit values, in f32.
template <class T>
__device__ __forceinline__ float lane_f32(const uint4& v, int idx) {
  const uint32_t w = idx < 2 ? v.x : idx < 4 ? v.y : idx < 6 ? v.z : v.w;
  const uint16_t h = static_cast<uint16_t>((idx & 1) ? w >> 16 : w & 0xFFFFu);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __uint_as_float(uint32_t(h) << 16);
  else return __half2float(__ushort_as_half(h));
}

template <class T, bool kACol, bool kBCol>
__global__ void __launch_bounds__(kThreads) gemm_v05_kernel(const GemmArgs g) {
  constexpr bool kAK = !kACol, kBK = kBCol;  // which operands are K-major
  using TA = Tile<kAK, kBlockM>;
  using TB = Tile<kBK, kBlockN>;
  __shared__ __align__(16) T as[2][kMaxTile];  // (slot, A tile) bf16/f16
  __shared__ __align__(16) T bs[2][kMaxTile];  // (slot, B tile)
  const int tid = threadIdx.x;
  // Thread (tm, tn) owns rows tm*8 + i (a warp shares two tm: its A reads are broadcasts) and,
  // for an N-major B, columns tn*8 + j (one 16-byte read); for a K-major B it owns columns
  // tn + 16 j, so 8 neighbouring threads read 8 consecutive padded rows (no bank conflict).
  const int tm = tid / (kBlockN / kThreadN), tn = tid % (kBlockN / kThreadN);
  const int64_t bi = blockIdx.z;
  const int64_t m0 = int64_t(blockIdx.y) * kBlockM, n0 = int64_t(blockIdx.x) * kBlockN;
  const T* a = static_cast<const T*>(g.a) + bi * g.batch_stride_a;
  const T* b = static_cast<const T*>(g.b) + bi * g.batch_stride_b;
  const int64_t ktiles = (g.k + kBlockK - 1) / kBlockK;

  auto load = [&](int slot, int64_t kt) {
    const int64_t k0 = kt * kBlockK;
    if constexpr (kAK) ptx::cp_async_tile<kBlockM, kBlockK, TA::kPitch, kThreads>(as[slot], a, g.lda, m0, k0, g.m, g.k, tid);
    else ptx::cp_async_tile<kBlockK, kBlockM, TA::kPitch, kThreads>(as[slot], a, g.lda, k0, m0, g.k, g.m, tid);
    if constexpr (kBK) ptx::cp_async_tile<kBlockN, kBlockK, TB::kPitch, kThreads>(bs[slot], b, g.ldb, n0, k0, g.n, g.k, tid);
    else ptx::cp_async_tile<kBlockK, kBlockN, TB::kPitch, kThreads>(bs[slot], b, g.ldb, k0, n0, g.k, g.n, tid);
  };

  float acc[kThreadM][kThreadN] = {};
  if (ktiles > 0) load(0, 0);
  ptx::cp_async_commit();
  for (int64_t kt = 0; kt < ktiles; ++kt) {
    const int slot = static_cast<int>(kt & 1);
    if (kt + 1 < ktiles) load(slot ^ 1, kt + 1);  // the slot tile kt-1 used: freed by the barrier below
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();  // tile kt has landed (this thread's copies) ...
    __syncthreads();          // ... and everyone else's
    const T* at = as[slot];
    const T* bt = bs[slot];
#pragma unroll
    for (int o = 0; o < kBlockK / kOctet; ++o) {
      // 8 x 8 values of each operand for 8 K steps: af[i] holds (row i, k 0..7) when A is
      // K-major, af[kk] holds (rows 0..7, k kk) when M-major; bf likewise with columns.
      uint4 af[kOctet], bf[kOctet];
#pragma unroll
      for (int x = 0; x < kOctet; ++x) {
        af[x] = kAK ? *reinterpret_cast<const uint4*>(at + (tm * kThreadM + x) * TA::kPitch + o * kOctet)
                    : *reinterpret_cast<const uint4*>(at + (o * kOctet + x) * TA::kPitch + tm * kThreadM);
        bf[x] = kBK ? *reinterpret_cast<const uint4*>(bt + (tn + 16 * x) * TB::kPitch + o * kOctet)
                    : *reinterpret_cast<const uint4*>(bt + (o * kOctet + x) * TB::kPitch + tn * kThreadN);
      }
#pragma unroll
      for (int kk = 0; kk < kOctet; ++kk) {
        float av[kThreadM], bv[kThreadN];
#pragma unroll
        for (int i = 0; i < kThreadM; ++i) av[i] = kAK ? lane_f32<T>(af[i], kk) : lane_f32<T>(af[kk], i);
#pragma unroll
        for (int j = 0; j < kThreadN; ++j) bv[j] = kBK ? lane_f32<T>(bf[j], kk) : lane_f32<T>(bf[kk], j);
#pragma unroll
        for (int i = 0; i < kThreadM; ++i)
#pragma unroll
          for (int j = 0; j < kThreadN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
    }
    __syncthreads();  // every thread is done with this slot before the next iteration refills it
  }
#pragma unroll
  for (int i = 0; i < kThreadM; ++i)
#pragma unroll
    for (int j = 0; j < kThreadN; ++j) {
      const int col = kBK ? tn + 16 * j : tn * kThreadN + j;
      gemm_impl::epilogue_store(g, acc[i][j], bi, m0 + tm * kThreadM + i, n0 + col);
    }
}

void gemm_v05_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::dispatch_input(g.in_dtype, "v05_vectorized_cp_async", [&](auto t) {
    gemm_impl::dispatch_layout(g.a_col, g.b_col, [&](auto ac, auto bc) {
      dim3 grid(gemm_impl::grid_dim(ceil_div(g.n, kBlockN), "N"), gemm_impl::grid_dim(ceil_div(g.m, kBlockM), "M"),
                gemm_impl::grid_dim(g.batch, "batch"));
      gemm_v05_kernel<decltype(t), decltype(ac)::value, decltype(bc)::value><<<grid, kThreads, 0, stream>>>(g);
      HK_CHECK_LAUNCH("gemm_v05_kernel");
    });
  });
}

std::string gemm_v05_supports(const GemmProblem& p) { return gemm_cp_async_supports(p, kBlockM); }

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v05_vectorized_cp_async",
                    "v04's register tiling fed by 16-byte cp.async copies into two smem slots (loads overlap FMAs)",
                    80, kFlagNone, gemm_v05_supports, gemm_v05_launch);

}  // namespace hk::gemm_v05_vectorized_cp_async
