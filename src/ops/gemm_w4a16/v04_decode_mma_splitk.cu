// gemm_w4a16/v04_decode_mma_splitk.cu
//
// Rung 4: the decode kernel (M <= 32) on the tensor cores, with K split over blocks so the
// weight stream fills every SM.
// Adds over v02/v03: the roles of the operands swap. W is the 16-row A operand of
// mma.sync m16n8k16 and x the 8-column B operand (y^T = W x^T), so one warp streams 16 weight
// rows and one mma covers up to 8 rows of x (four mmas up to 32): the f32 FMAs that bound v02
// past M = 1 move to the tensor cores, and no 16-row tile of x is wasted on M = 1 as in v03.
// Each block (8 warps, 128 weight rows) takes an even share of the k-tiles (128 k each); the
// split count fills the resident block slots once (two blocks per SM). Each warp keeps up to 6
// k-tiles of its rows in flight (Cfg: 1 KB each, 16-byte evict-first loads into registers) and
// issues the next tile's load into a register slot as soon as that slot's tile is multiplied.
//
// Operand order without a shuffle: an m16n8k16 A fragment gives lane 4g + t the weights of rows
// g and g + 8 at (logical) k = 2t, 2t+1 (registers a0, a1) and 2t+8, 2t+9 (a2, a3). K may be
// summed in any order as long as x and W agree, so lane t's four k positions in step s are the
// word's values (j, j + 4) and (j + 1, j + 5), j = 2 (s % 2), of the packed word s / 2 it holds:
// dequant_word's pairs in order. The B fragment (x) gets the same permutation: lane 4g + t reads
// the eight x values of that word with one 16-byte shared load of x row g, which the block has
// permuted in place into (x0, x4), (x1, x5), (x2, x6), (x3, x7): b0, b1 of both steps. Which word a
// lane holds:
//   rows layout:  lane t loads words 4t .. 4t+3 of each of its rows' k-tile (16 bytes, k = 32t ..
//                 32t + 31), so its register r covers k = 32t + 8r;
//   tiled layout: lane 4g + t loads its 16 bytes of the n-tile's 512-byte k-tile, whose word r
//                 covers k = 32r + 8t (gemm_w4a16.hpp's fragment order), for row g of each of the
//                 two n-tiles of 8 rows.
// x is staged once per block in shared memory (its k range; lanes of rows past M use zeros),
// 16-byte pieces XOR-swizzled so that each quarter-warp's eight 16-byte loads hit distinct banks;
// the block's scales and zero points are staged beside it.
// Folded zero points (groups of 128 or more, or one per row): the mma takes the biased values
// 128 + q (f16: 1024 + q) straight from the lop3 into a per-k-tile sum, and the tile's scale and
// zero point are applied in f32 afterwards with the row sums of x: see multiply_tile.
// NOTE: measured on the H200 (ncu, 1 x 8192 x 8192, tiled): 26.7 us with 42% of the warps'
// stall samples in the prologue (2026-12-02): the scales and zero points were loaded after the
// first weight tiles and queued behind them in DRAM, and 16 threads permuted x while the rest
// waited. Loading the small operands first and permuting with every thread (2026-12-03): 24.2
// us, 29% in the prologue; the main loop waits on the weight loads (DRAM 33% of peak, 127
// registers, two blocks per SM).
//
// Split-K without atomics: with S > 1 splits each block writes its f32 partial [M, 128] into a
// scratch [S, M, N]; the last block of an n-block to arrive (a per-n-block ticket in the
// stream's zeroed scratch, put back to zero by that block) adds the S partials in split order
// and rounds once, so the result is bitwise deterministic. S = 1 stores y directly.
// Needs: M <= 32; every operand and x's rows 16-byte aligned; rows layout: K a multiple of 32.
// Run:   hk bench gemm_w4a16 --variant v04_decode_mma_splitk --shape 16x8192x8192
#include <algorithm>
#include <memory>

#include "common/launch.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/mma.cuh"
#include "core/scratch.hpp"
#include "gemm_w4a16/w4a16.cuh"

namespace hk::gemm_w4a16_v04_decode_mma_splitk {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockRows = 16 * kWarps;  // weight rows per block: 16 per warp
constexpr int kTileK = 128;              // k per k-tile
constexpr int kMaxM = 32;

// Per width of x (kMT 8-column mma tiles): resident blocks per SM (the launch bounds cap the
// registers at 65536 / (256 kBlocksPerSm): 85 or 128), k-tiles per warp in flight (8 registers
// each, beside 4 kMT accumulators) and k-tiles per block at most (x's slice in shared memory:
// 8 kMT rows x 128 kMaxTiles x 2 bytes = 32 or 64 KB).
template <int kMT, bool kFold = true>
struct Cfg {
  static constexpr int kBlocksPerSm = 2;
  static constexpr int kInFlight = kMT == 1 ? (kFold ? 6 : 5) : kMT == 2 ? (kFold ? 6 : 4) : kFold ? 3 : 2;
  static constexpr int kMaxTiles = kMT <= 2 ? 16 : 8;
};

// What a launch needs to know besides the operands.
struct Split {
  int splits = 1;        // blocks along K per n-block
  int max_tiles = 1;     // k-tiles of the largest split
  int groups_cap = 1;    // groups a split's k range can touch
  int64_t ktiles = 1;    // k-tiles of K
  float* partials = nullptr;   // [splits, M, N] f32 when splits > 1
  unsigned* tickets = nullptr; // one per n-block when splits > 1
};

// Shared-memory bytes of one block: x (8, 16 or 32 rows of max_tiles k-tiles), its per-tile row
// sums (f32), then each of the block's 128 rows' scales (T) and zero points (one byte each) for
// groups_cap groups.
constexpr size_t smem_bytes(int x_rows, int max_tiles, int groups_cap) {
  return size_t(x_rows) * max_tiles * (kTileK * 2 + 4) + size_t(kBlockRows) * groups_cap * 3;
}
// The largest shared-memory footprints (groups of 32) fit kBlocksPerSm times on an SM.
template <int kMT>
constexpr size_t max_smem() {
  return smem_bytes(8 * kMT, Cfg<kMT>::kMaxTiles, Cfg<kMT>::kMaxTiles * kTileK / 32 + 1);
}
static_assert(Cfg<1>::kBlocksPerSm * (max_smem<1>() + 1024) <= 228 * 1024, "M <= 8: two blocks per SM");
static_assert(Cfg<2>::kBlocksPerSm * (max_smem<2>() + 1024) <= 228 * 1024, "M <= 16: two blocks per SM");
static_assert(Cfg<4>::kBlocksPerSm * (max_smem<4>() + 1024) <= 228 * 1024, "M <= 32: two blocks per SM");

// The physical 16-byte piece of x row m's logical piece p (p counts 8-element pieces from the
// block's first k). The pieces one quarter-warp reads at once are, for lanes (g, t) with g in
// {2q, 2q + 1}: rows layout 16 c + 4 t + r (r fixed), tiled layout 16 c + 4 r + t; the XOR makes
// their piece index modulo 8 (the 128-byte bank window) distinct across the eight lanes.
template <bool kTiled>
__device__ __forceinline__ int x_piece(int m, int p) {
  if constexpr (kTiled) return p ^ ((m & 1) << 2);
  else return p ^ (((p >> 3) & 1) << 1) ^ (m & 1);
}

template <class T, bool kTiled, int kMT, bool kFold>
__global__ void __launch_bounds__(kThreads, Cfg<kMT, kFold>::kBlocksPerSm) gemm_w4a16_v04_kernel(W4A16Args a, Split sp) {
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int kXRows = 8 * kMT, kInFlight = Cfg<kMT, kFold>::kInFlight;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t nb = blockIdx.x;
  const int split = blockIdx.y;
  const int64_t t0 = split * sp.ktiles / sp.splits, t1 = (split + 1) * sp.ktiles / sp.splits;
  const int tiles = static_cast<int>(t1 - t0);
  const int64_t k_begin = t0 * kTileK, k_end = t1 * kTileK < a.k ? t1 * kTileK : a.k;
  const int x_pitch = sp.max_tiles * (kTileK / 8);  // 16-byte pieces per x row
  uint4* xs = reinterpret_cast<uint4*>(smem);
  float* xsum = reinterpret_cast<float*>(smem + size_t(kXRows) * x_pitch * 16);  // [kXRows, max_tiles]
  T* ss = reinterpret_cast<T*>(xsum + kXRows * sp.max_tiles);
  uint8_t* zs = reinterpret_cast<uint8_t*>(ss + kBlockRows * sp.groups_cap);

  // This warp's weight rows n0 + g and n0 + g + 8 (clamped to N - 1 past the end: computed,
  // never stored), and where their 16 bytes of k-tile kt start.
  const int64_t n0 = nb * kBlockRows + warp * 16;
  const int64_t rows[2] = {n0 + g < a.n ? n0 + g : a.n - 1, n0 + g + 8 < a.n ? n0 + g + 8 : a.n - 1};
  const uint4* wsrc[2];
  if constexpr (kTiled) {
    const int64_t last_tile = (a.n - 1) / 8;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t nt = (n0 / 8 + h) < last_tile ? n0 / 8 + h : last_tile;
      wsrc[h] = reinterpret_cast<const uint4*>(a.qweight + nt * a.k_padded) + lane;  // + kt * 32
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) wsrc[h] = reinterpret_cast<const uint4*>(a.qweight + rows[h] * (a.k / 8)) + t;  // + kt * 4
  }
  // Rows layout: lane t's 32 k of a k-tile lie in K or not at all (K % 32 == 0); the tiled
  // layout's padding past K is zero words, and x is zero there.
  auto load_tile = [&](int64_t kt, uint4 (&q)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if constexpr (kTiled) q[h] = __ldcs(wsrc[h] + kt * 32);
      else q[h] = kt * kTileK + 32 * t < a.k ? __ldcs(wsrc[h] + kt * 4) : make_uint4(0, 0, 0, 0);
    }
  };

  // The small operands go out first: x's slice, the scales and the zero points (a few KB per
  // block) reach the SM in one round trip before the weight stream queues up behind them in
  // DRAM; issued after the weights, they waited for the whole first wave of weight tiles.
  // Stage x [kXRows, k_begin .. k_begin + tiles * 128) (zero past M and K) ...
  const T* x = static_cast<const T*>(a.x);
  const int pieces = tiles * (kTileK / 8);
  const int x_rows = a.m < kXRows ? static_cast<int>(a.m) : kXRows;  // rows past M are never read
  for (int i = threadIdx.x; i < x_rows * pieces; i += kThreads) {
    const int m = i / pieces, p = i % pieces;
    const int64_t k = k_begin + 8 * int64_t(p);
    const bool in = k < a.k;
    ptx::cp_async_16(xs + m * x_pitch + x_piece<kTiled>(m, p), in ? x + m * a.ld_x + k : x, in ? 16 : 0);
  }
  ptx::cp_async_commit();
  // ... and the scales and zero points of the groups [g_begin, g_end) the k range touches: two
  // threads per weight row, each taking every other group, kBatch loads in flight at once.
  static_assert(kThreads == 2 * kBlockRows, "two threads per row of the block");
  const int64_t g_begin = k_begin / a.group, g_end = (k_end - 1) / a.group + 1;
  const int ng = static_cast<int>(g_end - g_begin);
  {
    constexpr int kBatch = 8;
    const int r = threadIdx.x % kBlockRows;
    const int64_t n = nb * kBlockRows + r < a.n ? nb * kBlockRows + r : a.n - 1;
    const T* srow = static_cast<const T*>(a.scales) + n * a.groups + g_begin;
    const int32_t* zrow = a.zeros ? a.zeros + n * a.zero_words : nullptr;
    for (int g0 = threadIdx.x / kBlockRows; g0 < ng; g0 += 2 * kBatch) {
      T sv[kBatch];
      uint32_t zw[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int gi = g0 + 2 * j;
        const int64_t grp = g_begin + (gi < ng ? gi : 0);
        sv[j] = gi < ng ? srow[gi] : T{};
        zw[j] = zrow && gi < ng ? static_cast<uint32_t>(__ldg(zrow + grp / 8)) >> (4 * (grp % 8)) : 8u;
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int gi = g0 + 2 * j;
        if (gi < ng) {
          ss[r * sp.groups_cap + gi] = sv[j];
          zs[r * sp.groups_cap + gi] = static_cast<uint8_t>(zw[j] & 0xFu);
        }
      }
    }
  }

  // Then the first k-tiles' weights, which stay in flight while x is permuted below.
  uint4 q[kInFlight][2];
#pragma unroll
  for (int i = 0; i < kInFlight; ++i)
    if (i < tiles) load_tile(t0 + i, q[i]);

  ptx::cp_async_wait<0>();
  __syncthreads();
  // Each x piece in place into the order the B fragments take — (x0, x4), (x1, x5), (x2, x6),
  // (x3, x7): registers b0, b1 of step 0, then of step 1 — one piece per thread, and each row's
  // sum over each k-tile (the folded zero points' correction): the 16 pieces of a k-tile sit on
  // 16 adjacent lanes (pieces is a multiple of 16), which add their sums with shuffles in a
  // fixed order. Every thread takes the loop's trips together (the shuffles' full mask).
  for (int i0 = 0; i0 < x_rows * pieces; i0 += kThreads) {
    const int i = i0 + threadIdx.x;
    const bool valid = i < x_rows * pieces;
    const int m = valid ? i / pieces : 0, p = valid ? i % pieces : 0;
    float sum = 0.f;
    if (valid) {
      uint4& piece = xs[m * x_pitch + x_piece<kTiled>(m, p)];
      const uint4 v = piece;
      piece = make_uint4(__byte_perm(v.x, v.z, 0x5410), __byte_perm(v.x, v.z, 0x7632), __byte_perm(v.y, v.w, 0x5410),
                         __byte_perm(v.y, v.w, 0x7632));
      if constexpr (kFold) {
        const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float2 f = w4a16::pair_to_float2<T>(u[c]);
          sum += f.x + f.y;
        }
      }
    }
    if constexpr (kFold) {
#pragma unroll
      for (int off = 8; off > 0; off /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, off);
      if (valid && p % 16 == 0) xsum[m * sp.max_tiles + p / 16] = sum;
    }
  }
  __syncthreads();

  // (zz, ss) of row h's group containing k (a k of this block's range).
  auto params = [&](int h, int64_t k) {
    k = k < a.k ? k : a.k - 1;  // a lane whose words lie past K (zero weights, zero x): any group
    const int gi = static_cast<int>(uint32_t(k) / uint32_t(a.group) - uint32_t(g_begin));  // K < 2^31
    const int r = warp * 16 + g + 8 * h;
    const uint32_t z = zs[r * sp.groups_cap + gi];
    const T s = ss[r * sp.groups_cap + gi];
    w4a16::GroupParams<T> gp;
    gp.zz = w4a16::as_t2<T>(w4a16::Half2<T>::kMagic | (z << 16) | z);
    if constexpr (std::is_same_v<T, __nv_bfloat16>) gp.ss = __bfloat162bfloat162(s);
    else gp.ss = __half2half2(s);
    return gp;
  };
  // Tiled layout with groups shorter than a k-tile: a lane's four words may sit in different
  // groups; otherwise one group serves each lane's whole k-tile.
  const bool word_groups = kTiled && a.group % kTileK != 0 && a.groups > 1;

  float acc[kMT][4];
#pragma unroll
  for (int j = 0; j < kMT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;

  // Without folding: each word dequantised to (q - z) s in x's dtype, multiplied into acc.
  // Folded (one group per k-tile): the mma takes the biased values 128 + q (1024 + q for f16)
  // straight from the lop3, into a fresh tile sum; then, per row of W and of x,
  //   acc += s (tile - (128 + z) sum_k x)    in f32,
  // which is sum_k (q - z) s x with the scale applied in f32, at a third of the instructions.
  int fold_gi = 0;                                  // the folded path's group of the current k-tile
  int64_t next_group_k = (g_begin + 1) * a.group;  // and where the next group starts
  auto multiply_tile = [&](int i, const uint4 (&qt)[2]) {
    const int64_t kt_base = (t0 + i) * kTileK;
    w4a16::GroupParams<T> gp[2];
    if (!kFold && !word_groups) {
#pragma unroll
      for (int h = 0; h < 2; ++h) gp[h] = params(h, kTiled ? kt_base : kt_base + 32 * t);
    }
    float tile[kFold ? kMT : 1][4];  // the folded path's per-tile sums
#pragma unroll
    for (int j = 0; j < (kFold ? kMT : 1); ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) tile[j][e] = 0.f;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int koff = kTiled ? 32 * r + 8 * t : 32 * t + 8 * r;
      if (!kFold && word_groups) {
#pragma unroll
        for (int h = 0; h < 2; ++h) gp[h] = params(h, kt_base + koff);
      }
      w4a16::T2<T> w[2][4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t word = r == 0 ? qt[h].x : r == 1 ? qt[h].y : r == 2 ? qt[h].z : qt[h].w;
        if constexpr (kFold) {
#pragma unroll
          for (int jj = 0; jj < 4; ++jj)
            w[h][jj] = w4a16::as_t2<T>(w4a16::lop3_and_or(word >> (4 * jj), 0x000F000Fu, w4a16::Half2<T>::kMagic));
        } else {
          w4a16::dequant_word<T>(word, gp[h], w[h]);
        }
      }
      const int p = i * (kTileK / 8) + koff / 8;  // x piece of this word
#pragma unroll
      for (int j = 0; j < kMT; ++j) {
        const int m = 8 * j + g;
        const uint4 xv = m < a.m ? xs[m * x_pitch + x_piece<kTiled>(m, p)] : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int st = 0; st < 2; ++st) {
          const uint32_t af[4] = {w4a16::as_u32<T>(w[0][2 * st]), w4a16::as_u32<T>(w[1][2 * st]),
                                  w4a16::as_u32<T>(w[0][2 * st + 1]), w4a16::as_u32<T>(w[1][2 * st + 1])};
          const uint32_t bf[2] = {st == 0 ? xv.x : xv.z, st == 0 ? xv.y : xv.w};
          if constexpr (kFold) ptx::mma_m16n8k16<T>(tile[j], af, bf);
          else ptx::mma_m16n8k16<T>(acc[j], af, bf);
        }
      }
    }
    if constexpr (kFold) {
      if (kt_base >= next_group_k) {  // groups are at least one k-tile long: at most one step
        ++fold_gi;
        next_group_k += a.group;
      }
      const int gi = fold_gi;
      constexpr float kBias = std::is_same_v<T, __nv_bfloat16> ? 128.f : 1024.f;
      float sc[2], zb[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp * 16 + g + 8 * h;
        sc[h] = static_cast<float>(ss[row * sp.groups_cap + gi]);
        zb[h] = kBias + static_cast<float>(zs[row * sp.groups_cap + gi]);
      }
#pragma unroll
      for (int j = 0; j < kMT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int m = 8 * j + 2 * t + e;
          const float xk = m < a.m ? xsum[m * sp.max_tiles + i] : 0.f;
#pragma unroll
          for (int h = 0; h < 2; ++h) acc[j][2 * h + e] = fmaf(sc[h], fmaf(-zb[h], xk, tile[j][2 * h + e]), acc[j][2 * h + e]);
        }
    }
  };

  // Tile i sits in slot i % kInFlight; once multiplied, the slot takes tile i + kInFlight.
  for (int i0 = 0; i0 < tiles; i0 += kInFlight) {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = i0 + u;
      if (i < tiles) {
        multiply_tile(i, q[u]);
        if (i + kInFlight < tiles) load_tile(t0 + i + kInFlight, q[u]);
      }
    }
  }

  // acc[j][2h + e]: weight row n0 + g + 8h, x row 8j + 2t + e; store(m, n, value) for those in y.
  auto each_output = [&](auto&& store) {
#pragma unroll
    for (int j = 0; j < kMT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t m = 8 * j + 2 * t + e, n = n0 + g + 8 * h;
          if (m < a.m && n < a.n) store(m, n, acc[j][2 * h + e]);
        }
  };
  T* y = static_cast<T*>(a.y);
  if (sp.splits == 1) {
    each_output([&](int64_t m, int64_t n, float v) { y[m * a.ld_y + n] = static_cast<T>(v); });
    return;
  }
  float* part = sp.partials + int64_t(split) * a.m * a.n;
  each_output([&](int64_t m, int64_t n, float v) { __stcg(part + m * a.n + n, v); });
  __shared__ bool last;
  __threadfence();  // this block's partial is visible before its ticket
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(sp.tickets + nb, 1u) == unsigned(sp.splits - 1);
    if (last) sp.tickets[nb] = 0;  // every split has arrived: back to zero for the next launch
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Each thread sums its outputs over the splits in split order; the loads of eight outputs
  // and four splits are issued before their sums need them.
  const int64_t cols = a.n - nb * kBlockRows < kBlockRows ? a.n - nb * kBlockRows : kBlockRows;
  const int outputs = static_cast<int>(a.m * cols);
  for (int base = threadIdx.x; base < outputs; base += 8 * kThreads) {
    float v[8];
    int64_t at[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int i = base + j * kThreads < outputs ? base + j * kThreads : base;
      at[j] = (i / cols) * a.n + nb * kBlockRows + i % cols;
      v[j] = 0.f;
    }
#pragma unroll 4
    for (int s = 0; s < sp.splits; ++s) {
      const float* ps = sp.partials + int64_t(s) * a.m * a.n;
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] += __ldcg(ps + at[j]);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int i = base + j * kThreads;
      if (i < outputs) y[(i / cols) * a.ld_y + nb * kBlockRows + i % cols] = static_cast<T>(v[j]);
    }
  }
}

template <class T, bool kTiled, int kMT, bool kFold>
void launch_config(const W4A16Args& a, cudaStream_t stream) {
  auto kernel = gemm_w4a16_v04_kernel<T, kTiled, kMT, kFold>;
  constexpr int kInFlight = Cfg<kMT, kFold>::kInFlight, kMaxTiles = Cfg<kMT, kFold>::kMaxTiles;
  Split sp;
  sp.ktiles = ceil_div(a.k, kTileK);
  const int64_t nblocks = ceil_div(a.n, kBlockRows);
  // Splits: fill the resident block slots once, keep kInFlight k-tiles per warp where K allows,
  // and no more than kMaxTiles per split.
  const int64_t slots = int64_t(device_info().sm_count) * Cfg<kMT, kFold>::kBlocksPerSm;
  int64_t splits = std::max<int64_t>(1, std::min<int64_t>(slots / nblocks, sp.ktiles / kInFlight));
  splits = std::max<int64_t>(splits, ceil_div(sp.ktiles, kMaxTiles));
  sp.splits = static_cast<int>(splits);
  sp.max_tiles = static_cast<int>(ceil_div(sp.ktiles, splits));
  // groups a split's k range can touch: ceil(range / g) + 1, at most G
  sp.groups_cap = static_cast<int>(std::min<int64_t>(a.groups, ceil_div(int64_t(sp.max_tiles) * kTileK, a.group) + 1));
  const size_t smem = smem_bytes(8 * kMT, sp.max_tiles, sp.groups_cap);
  allow_dynamic_smem(kernel, smem);
  std::unique_ptr<detail::StreamWorkspace> ws;
  if (sp.splits > 1) {
    ws = std::make_unique<detail::StreamWorkspace>(stream, "gemm_w4a16_v04_partials",
                                                   size_t(sp.splits) * a.m * a.n * sizeof(float));
    sp.partials = static_cast<float*>(ws->get());
    sp.tickets = static_cast<unsigned*>(detail::zeroed_stream_scratch(stream, "gemm_w4a16_v04_tickets", nblocks * sizeof(unsigned)));
  }
  kernel<<<dim3(static_cast<unsigned>(nblocks), static_cast<unsigned>(sp.splits)), kThreads, smem, stream>>>(a, sp);
  HK_CHECK_LAUNCH("gemm_w4a16_v04_kernel");
}

void gemm_w4a16_v04_launch(const W4A16Args& a, cudaStream_t stream) {
  w4a16::dispatch_dtype(a.dtype, "gemm_w4a16/v04_decode_mma_splitk", [&](auto tag) {
    using T = decltype(tag);
    // Folding needs one group per k-tile: groups a multiple of 128 long, or one group per row.
    const bool fold = a.group % kTileK == 0 || a.groups == 1;
    auto by_width = [&](auto tiled, auto folded) {
      constexpr bool kTiled = decltype(tiled)::value, kFold = decltype(folded)::value;
      if (a.m <= 8) launch_config<T, kTiled, 1, kFold>(a, stream);
      else if (a.m <= 16) launch_config<T, kTiled, 2, kFold>(a, stream);
      else if constexpr (!kTiled || kFold) launch_config<T, kTiled, 4, kFold>(a, stream);  // supports(): M <= 16 else
    };
    if (a.layout == W4A16Layout::kTiled) {
      if (fold) by_width(std::true_type{}, std::true_type{});
      else by_width(std::true_type{}, std::false_type{});
    } else {
      if (fold) by_width(std::false_type{}, std::true_type{});
      else by_width(std::false_type{}, std::false_type{});
    }
  });
}

std::string gemm_w4a16_v04_supports(const W4A16Problem& p) {
  if (p.tiled() && p.group % kTileK != 0 && p.groups() > 1 && p.m > 16)
    return detail::cat("the tiled layout with groups shorter than a k-tile (", p.group,
                       ") takes up to 16 rows of x (four would not fit the registers), got M=", p.m);
  if (p.m > kMaxM) return detail::cat("the decode kernel multiplies up to ", kMaxM, " rows of x (four 8-column mma tiles), got M=", p.m);
  if (p.x_row_align() < 16)
    return detail::cat("x is staged with 16-byte cp.async: every operand and x's rows must be 16-byte aligned, got ",
                       p.x_row_align(), "-byte alignment");
  if (!p.tiled() && (p.k % 32 != 0 || p.align_bytes < 16))
    return detail::cat("the rows layout is read in 16-byte chunks: K must be a multiple of 32 and qweight 16-byte aligned, got K=",
                       p.k, " and ", p.align_bytes, "-byte alignment");
  if (ceil_div(p.n, kBlockRows) > 0x7FFFFFFF) return "grid.x (N / 128) is limited to 2^31 - 1";
  if (p.k >= (int64_t(1) << 31)) return detail::cat("k is indexed in 32 bits: K < 2^31, got K=", p.k);
  if (ceil_div(p.k, int64_t(kTileK) * Cfg<4>::kMaxTiles) > 65535)
    return detail::cat("grid.y (the K splits, at least K / 1024) is limited to 65535, got K=", p.k);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(W4A16Problem, W4A16Args, "gemm_w4a16", "v04_decode_mma_splitk",
                    "decode (M <= 32) on mma.sync with W as the A operand, K split over blocks, deterministic reduction",
                    80, kFlagProduction, gemm_w4a16_v04_supports, gemm_w4a16_v04_launch);

}  // namespace hk::gemm_w4a16_v04_decode_mma_splitk
