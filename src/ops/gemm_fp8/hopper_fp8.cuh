// gemm_fp8/hopper_fp8.cuh — the Hopper FP8 GEMM body that v02 (per-tensor / row-wise scales),
// v03 (block-wise scales), v05 (split-K), v06 (clusters) and v07 (wgmma in flight) instantiate.
//
// One CTA = one producer warpgroup (a single thread issues TMA) + two consumer warpgroups, each
// computing 64 rows of a 128 x 128 tile of D with wgmma m64n128k32 (common/ptx/wgmma_fp8.cuh).
// A ring of kStages shared-memory slots (hk::PipelineRing, common/pipeline.cuh), each holding a
// (128 M x 128 K) tile of A and a (128 N x 128 K) tile of B in the 128-byte swizzle, both
// K-major: 128 fp8 values are one 128-byte swizzle row, so a k-block is one TMA box per operand,
// four k32 steps, and exactly one scaling block of the block-wise mode.
//
// Promotion (DeepSeek-V3's scheme, as DeepGEMM runs it): the tensor cores keep ~14 significant
// bits while they accumulate FP8 products, so each k-block goes into a fresh wgmma accumulator
// (scale_d = 0 on its first step) and is then added into a second, f32 register accumulator:
//   block-wise:       acc += blk * sa[row, kb] * sb[n_block, kb]    (one FFMA per value)
//   tensor / row:     acc += blk                                    (one FADD per value)
// with the per-tensor or row-wise scales applied once in the epilogue. The two consumer
// warpgroups run out of phase, so one's promotion overlaps the other's wgmma. The block scales
// of a k-block are loaded (L2-resident, 2 + 1 floats per thread) while its wgmma runs.
// kInFlight (v07): a second accumulator set `blk2` takes k-block kb + 1's wgmma while kb's is
// promoted (wait_group 1 instead of 0), so a warpgroup's own tensor work no longer drains at
// every k-block: 1.19x block-wise at 4096x7168x16384 (H200, 2026-12-02).
//
// Schedule: a persistent grid (one CTA per SM, at most one per tile) walks the tiles in groups
// of kGroup 128-row panels of A (common/sched/tile_scheduler.hpp), so the CTAs running at once
// share those panels and a few column panels of B in L2. The ring runs on across tiles: the
// producer loads the next tile's first k-blocks while the consumers store the last one.
//
// Clusters (kCluster = 2, v06): two CTAs stacked along M compute vertically adjacent tiles that
// share one N block. Each loads its own A tile and half of the B tile (64 of its 128 rows),
// which TMA multicasts into both CTAs' slots, so a k-block costs each SM 24 KB of L2 traffic
// instead of 32 KB. A slot is refilled only when the consumers of both CTAs have released it
// (each consumer warp arrives on both CTAs' empty barriers); a partner past the last M block
// loads the last real A block and stores nothing.
//
// Epilogue: d = acc * (sa[row] sb[col], tensor / row modes) + bias[col], rounded once to D's
// dtype (bf16, f16, f32; read at run time) and stored from registers, 16 bytes per lane after a
// quad shuffle (store_tile) where the address allows: any N, any leading stride of D. Tails: TMA zero-fills out-of-bounds loads (past M, N
// or K), so partial tiles and k-blocks add zeros; rows and columns past M and N are not stored.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>

#include "common/launch.cuh"
#include "common/pipeline.cuh"
#include "common/ptx/cluster.cuh"
#include "common/ptx/mbarrier.cuh"
#include "common/ptx/smem_desc.hpp"
#include "common/ptx/tma.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/ptx/wgmma_fp8.cuh"
#include "common/sched/tile_scheduler.hpp"
#include "gemm_fp8/fp8_common.cuh"
#include "gemm_fp8/gemm_fp8_op.hpp"

namespace hk::gemm_fp8_impl {

constexpr int kBlockM = 128, kBlockN = 128;
constexpr int kBlockK = 128;  // NOTE: 128 fp8 = 128 bytes, one row of the 128B swizzle; 4 k32 steps
constexpr int kStages = 6;
constexpr int kGroup = 16;  // 128-row panels of A per group of the tile order
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kTileBytes = kBlockM * kBlockK;  // (128, 128) fp8: A's tile, and B's (kBlockN = kBlockM)
constexpr int kStageBytes = 2 * kTileBytes;
constexpr int kSmemBytes = 1024 + kStages * kStageBytes + PipelineRing<kStages>::kBarrierBytes;  // +1024: alignment
static_assert(kBlockK == kFp8ScaleBlock, "one k-block is one scaling block: its promotion applies its scales");
static_assert(kBlockN == kFp8ScaleBlock, "one tile's columns share one row of sb in the block-wise mode");
static_assert(kSmemBytes <= 232448, "227 KB of shared memory per block on sm_90");
static_assert(128 * 40 + kConsumers * 128 * 232 <= 65536, "register file: 40 + 2 x 232 per lane");

// Eight consecutive outputs of one row from registers: one 16-byte store per 16 bytes when all
// eight lie inside and the address is 16-byte aligned, else element by element.
template <class OutT>
__device__ __forceinline__ void store_eight(OutT* p, int64_t col, int64_t n, const float (&v)[8]) {
  if (col + 7 < n && reinterpret_cast<uintptr_t>(p) % 16 == 0) {
    if constexpr (std::is_same_v<OutT, float>) {
      reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
      uint4 w;
      uint32_t* u = reinterpret_cast<uint32_t*>(&w);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if constexpr (std::is_same_v<OutT, __half>) {
          __half2 h = __floats2half2_rn(v[2 * e], v[2 * e + 1]);
          u[e] = *reinterpret_cast<uint32_t*>(&h);
        } else {
          __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * e], v[2 * e + 1]);
          u[e] = *reinterpret_cast<uint32_t*>(&h);
        }
      }
      *reinterpret_cast<uint4*>(p) = w;
    }
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (col + e < n) p[e] = from_f32<OutT>(v[e]);
  }
}

// The warpgroup's 64 x 128 accumulators into D. In wgmma's fragment layout (wgmma.cuh) lane l
// of warp w holds rows 16 w + l / 4 + 8 h and, per 8-column block j, the pair of columns
// 8 j + 2 (l % 4) + {0, 1}: stored as it lies, a warp writes 16 bytes of each of 8 rows per
// instruction. Instead the four lanes of a quad (one row) exchange pairs with shuffles so that
// lane q holds all eight columns of blocks j = 4 i + q, and each store is 16 bytes per lane:
// whole 32-byte sectors. Scales and bias are applied first, per pair, in place.
template <class OutT, bool kBlockScaled>
__device__ __forceinline__ void store_tile(const GemmFp8Args& g, float (&acc)[kBlockN / 2], int64_t m_tile, int64_t n0,
                                           int t) {
  const int w = t / 32, l = t % 32, q = l % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = m_tile + w * 16 + l / 4 + 8 * h;
    const bool row_in = row < g.m;
    const float s_row = kBlockScaled || !row_in ? 1.0f : __ldg(g.sa + row * g.sa_s0);
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      const int64_t col = n0 + 8 * j + q * 2;
      float& v0 = acc[4 * j + 2 * h];
      float& v1 = acc[4 * j + 2 * h + 1];
      if constexpr (!kBlockScaled) {
        v0 *= col < g.n ? s_row * __ldg(g.sb + col * g.sb_s0) : 0.0f;
        v1 *= col + 1 < g.n ? s_row * __ldg(g.sb + (col + 1) * g.sb_s0) : 0.0f;
      }
      if (g.bias) {
        if (col < g.n) v0 += bias_at<OutT>(g.bias, col);
        if (col + 1 < g.n) v1 += bias_at<OutT>(g.bias, col + 1);
      }
    }
    OutT* row_ptr = static_cast<OutT*>(g.d) + (row_in ? row : 0) * g.ldd;
#pragma unroll
    for (int i = 0; i < kBlockN / 32; ++i) {
      // Step s: read lane (q + s) % 4's pair of block 4 i + q; send this lane's pair of block
      // 4 i + (q - s) % 4 (the block of the lane that reads it). Register indices stay static:
      // the sent pair is picked and the received one placed by predicated moves.
      float v[8] = {};
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const int src = (q + s) & 3, jj = (q - s) & 3;
        float x0 = acc[4 * (4 * i) + 2 * h], x1 = acc[4 * (4 * i) + 2 * h + 1];
#pragma unroll
        for (int b = 1; b < 4; ++b)
          if (jj == b) x0 = acc[4 * (4 * i + b) + 2 * h], x1 = acc[4 * (4 * i + b) + 2 * h + 1];
        x0 = __shfl_sync(0xffffffffu, x0, (l & ~3) | src);
        x1 = __shfl_sync(0xffffffffu, x1, (l & ~3) | src);
#pragma unroll
        for (int b = 0; b < 4; ++b)
          if (src == b) v[2 * b] = x0, v[2 * b + 1] = x1;
      }
      const int64_t col = n0 + 8 * (4 * i + q);
      if (row_in && col < g.n) store_eight<OutT>(row_ptr + col, col, g.n, v);
    }
  }
}

// Split-K (v05): each tile's k-blocks are dealt out in `splits` even ranges, one work unit each;
// a unit adds its promoted f32 sums into `partials` ([M, N], zeroed before the launch) with
// red.global.add, and a second kernel applies the per-tensor / row-wise scales and bias.
struct SplitK {
  float* partials = nullptr;
  int splits = 1;
};

// One unit's 64 x 128 f32 sums added into the [M, N] partials (rows and columns inside only).
__device__ __forceinline__ void add_tile(const GemmFp8Args& g, const float (&acc)[kBlockN / 2], float* partials,
                                         int64_t m_tile, int64_t n0, int t) {
  const int w = t / 32, l = t % 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = m_tile + w * 16 + l / 4 + 8 * h;
    if (row >= g.m) continue;
    float* p = partials + row * g.n;
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      const int64_t col = n0 + 8 * j + (l % 4) * 2;
      if (col < g.n) atomicAdd(p + col, acc[4 * j + 2 * h]);
      if (col + 1 < g.n) atomicAdd(p + col + 1, acc[4 * j + 2 * h + 1]);
    }
  }
}

// The producer thread of a CTA (rank `rank` of its cluster): for every unit u = first_unit,
// first_unit + unit_step, ... below `units`, the k-blocks [kb0, kb1) that unit(u, kb0, kb1) names,
// each as A's (128 K, 128 M) box and this CTA's share of B's tile, into the ring's next slot.
template <int kC, class Unit>
__device__ __forceinline__ void produce_k_blocks(const CUtensorMap* tma_a, const CUtensorMap* tma_b,
                                                 const GemmFp8Args& g, uint8_t* sa_tiles, uint8_t* sb_tiles,
                                                 const PipelineRing<kStages>& ring, int64_t first_unit, int64_t units,
                                                 int64_t unit_step, int64_t m_blocks, uint32_t rank, Unit&& unit) {
  PipelineState<kStages, int> it;
  for (int64_t u = first_unit; u < units; u += unit_step) {
    int kb0, kb1;
    const sched::TileCoord tc = unit(u, kb0, kb1);
    // A cluster partner past the last M block loads the last real block instead.
    const int32_t m0 = static_cast<int32_t>(std::min<int64_t>(tc.m_block, m_blocks - 1) * kBlockM);
    const int32_t n0 = static_cast<int32_t>(tc.n_block * kBlockN);
    // This CTA's share of B: rows [nr, nr + 128 / kC) of the tile, at the same place in every
    // CTA of the cluster (a share past N is clamped to n0: its columns are never stored).
    constexpr int kBRows = kBlockN / kC;
    const int32_t nr = n0 + int32_t(rank) * kBRows < g.n ? n0 + int32_t(rank) * kBRows : n0;
    for (int kb = kb0; kb < kb1; ++kb, ++it) {
      const int s = it.stage();
      ring.producer_acquire(it);
      ring.producer_expect_tx(it, kStageBytes);  // whole boxes (both shares of B): out-of-bounds bytes count too
      const int32_t k0 = kb * kBlockK;
      ptx::tma_load_3d(sa_tiles + s * kTileBytes, tma_a, k0, m0, 0, ring.full_barrier(it));  // box (128 K, 128 M)
      uint8_t* b_dst = sb_tiles + s * kTileBytes + rank * kBRows * kBlockK;                // box (128 K, kBRows N)
      if constexpr (kC > 1) ptx::tma_load_3d_multicast(b_dst, tma_b, k0, nr, 0, ring.full_barrier(it), (1u << kC) - 1);
      else ptx::tma_load_3d(b_dst, tma_b, k0, nr, 0, ring.full_barrier(it));
    }
  }
}

// TA, TB: __nv_fp8_e4m3 or __nv_fp8_e5m2. kBlockScaled: block-wise scales applied at promotion
// (else per-tensor / row-wise scales in the epilogue). Cluster c (of kCluster CTAs; a CTA alone
// without clusters) computes units c, c + G, c + 2G, ... (G clusters in the grid): tiles in the
// grouped order, each whole or (kSplitK) in sk.splits k-ranges. B's tensor map has boxes of
// kBlockN / kCluster rows.
template <class TA, class TB, bool kBlockScaled, bool kSplitK = false, int kCluster = 1, bool kInFlight = false>
__device__ __forceinline__ void wgmma_fp8_body(const CUtensorMap* tma_a, const CUtensorMap* tma_b, const GemmFp8Args& g,
                                               const SplitK& sk = {}) {
  constexpr int kC = kCluster;
  static_assert(kC == 1 || kC == 2, "one CTA, or a pair sharing B");
  static_assert(kC == 1 || !kSplitK, "split-K runs without clusters");
  static_assert(!kInFlight || !kSplitK, "the in-flight loop issues k-block kb0 unconditionally: no empty ranges");
  extern __shared__ uint8_t hk_gemm_fp8_smem[];
  // NOTE: 128B-swizzled atoms must start 1024-byte aligned (descriptor base offset 0).
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(hk_gemm_fp8_smem));
  uint8_t* smem = hk_gemm_fp8_smem + ((1024 - (raw & 1023)) & 1023);
  uint8_t* sa_tiles = smem;                               // (kStages, 128 M x 128 K) fp8
  uint8_t* sb_tiles = sa_tiles + kStages * kTileBytes;    // (kStages, 128 N x 128 K) fp8
  const PipelineRing<kStages> ring = PipelineRing<kStages>::at(sb_tiles + kStages * kTileBytes);
  using RingPos = PipelineState<kStages, int>;

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  const uint32_t rank = kC > 1 ? ptx::cluster_ctarank() : 0;
  const int64_t m_blocks = (g.m + kBlockM - 1) / kBlockM;
  const auto sched = sched::TileScheduler::make(m_blocks, (g.n + kBlockN - 1) / kBlockN, 1, kC, kGroup);
  const int64_t first_unit = blockIdx.x / kC, unit_step = gridDim.x / kC;
  const int k_blocks = static_cast<int>((g.k + kBlockK - 1) / kBlockK);
  const int splits = kSplitK ? sk.splits : 1;
  const int64_t units = sched.units() * splits;
  // Unit u: tile u / splits of the grouped order, k-blocks [kb0, kb1) of its split u % splits.
  auto unit = [&](int64_t u, int& kb0, int& kb1) {
    const int sp = static_cast<int>(u % splits);
    kb0 = static_cast<int>(int64_t(sp) * k_blocks / splits), kb1 = static_cast<int>(int64_t(sp + 1) * k_blocks / splits);
    return sched.tile(u / splits, static_cast<int>(rank));
  };

  if (threadIdx.x == 0) {
    ring.init(kConsumers * 4 * kC);  // empty[]: one release per consumer warp of every CTA
    ptx::prefetch_tensor_map(tma_a);
    ptx::prefetch_tensor_map(tma_b);
  }
  if constexpr (kC > 1) ptx::cluster_sync();  // peers may arrive on our barriers from now on
  else __syncthreads();

  if (wg == 0) {
    // ---- producer: one thread issues every TMA load ----
    ptx::setmaxnreg_dec<40>();
    if (t == 0)
      produce_k_blocks<kC>(tma_a, tma_b, g, sa_tiles, sb_tiles, ring, first_unit, units, unit_step, m_blocks, rank, unit);
  } else {
    // ---- consumers: wgmma per k-block into `blk`, promoted into `acc` ----
    ptx::setmaxnreg_inc<232>();
    const int cw = wg - 1;  // 64-row half of the tile
    const int w = t / 32, l = t % 32;
    float acc[kBlockN / 2];  // (64, 128) f32 running sums, fragment layout in wgmma.cuh
    float blk[kBlockN / 2];  // (64, 128) one k-block's wgmma accumulators
    float blk2[kInFlight ? kBlockN / 2 : 1];  // kInFlight: the next k-block's, alternating with blk
    RingPos it;
    for (int64_t u = first_unit; u < units; u += unit_step) {
      int kb0, kb1;
      const sched::TileCoord tc = unit(u, kb0, kb1);
      const int64_t m_tile = tc.m_block * kBlockM + cw * 64;
#pragma unroll
      for (int i = 0; i < kBlockN / 2; ++i) acc[i] = 0.0f;
      // Block-wise: this thread's two rows of sa (rows past M read as 0: never stored) and the
      // tile's row of sb.
      const int64_t r0 = m_tile + w * 16 + l / 4, r1 = r0 + 8;
      const float* sa_r0 = g.sa + (r0 < g.m ? r0 : 0) * g.sa_s0;
      const float* sa_r1 = g.sa + (r1 < g.m ? r1 : 0) * g.sa_s0;
      const float* sb_n = g.sb + tc.n_block * g.sb_s0;
      // k-block kb: wait for its slot, issue its four wgmma into d, and fetch its block scales.
      auto issue = [&](float (&d)[kBlockN / 2], RingPos pos, int kb, float& s0, float& s1) {
        const int s = pos.stage();
        ring.consumer_wait(pos);
        const uint32_t a_base = static_cast<uint32_t>(__cvta_generic_to_shared(sa_tiles + s * kTileBytes)) + cw * 8192;
        const uint32_t b_base = static_cast<uint32_t>(__cvta_generic_to_shared(sb_tiles + s * kTileBytes));
        ptx::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBlockK / 32; ++kk)  // +32 bytes per k32 step inside the swizzled row
          ptx::wgmma_m64n128k32_fp8<TA, TB>(d, ptx::make_smem_desc_sw128(a_base + kk * 32, 16, 1024),
                                            ptx::make_smem_desc_sw128(b_base + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
        ptx::wgmma_commit_group();
        s0 = 1.0f, s1 = 1.0f;
        if constexpr (kBlockScaled) {
          const float sbv = __ldg(sb_n + kb * g.sb_s1);
          s0 = (r0 < g.m ? __ldg(sa_r0 + kb * g.sa_s1) : 0.0f) * sbv;
          s1 = (r1 < g.m ? __ldg(sa_r1 + kb * g.sa_s1) : 0.0f) * sbv;
        }
      };
      // After the wait that retired d's group: hand the slot back and promote d into acc.
      auto promote = [&](float (&d)[kBlockN / 2], RingPos pos, float s0, float s1) {
        ptx::wgmma_fence_operands(d);
        // This warp has read the slot (wgmma.wait_group retired the reads): lane r tells CTA r.
        if constexpr (kC == 1) {
          if (l == 0) ring.consumer_release(pos);
        } else if (l < kC) {
          ring.consumer_release_peer(pos, l);
        }
#pragma unroll
        for (int i = 0; i < kBlockN / 2; ++i) {
          if constexpr (kBlockScaled) acc[i] = fmaf(d[i], (i & 2) ? s1 : s0, acc[i]);  // d[4j + 2h + c]: row h
          else acc[i] += d[i];
        }
      };
      if constexpr (!kInFlight) {
        for (int kb = kb0; kb < kb1; ++kb, ++it) {
          float s0, s1;
          issue(blk, it, kb, s0, s1);
          ptx::wgmma_wait_group<0>();
          promote(blk, it, s0, s1);
        }
      } else {
        // k-block kb + 1's wgmma runs while kb's sums are promoted: the two accumulator sets
        // alternate (unrolled by two so that their registers stay static).
        float s0a, s1a, s0b, s1b;
        issue(blk, it, kb0, s0a, s1a);
        int kb = kb0 + 1;
        for (; kb + 1 < kb1; kb += 2) {
          issue(blk2, it + 1, kb, s0b, s1b);
          ptx::wgmma_wait_group<1>();
          promote(blk, it, s0a, s1a);
          issue(blk, it + 2, kb + 1, s0a, s1a);
          ptx::wgmma_wait_group<1>();
          promote(blk2, it + 1, s0b, s1b);
          it = it + 2;
        }
        if (kb < kb1) {
          issue(blk2, it + 1, kb, s0b, s1b);
          ptx::wgmma_wait_group<1>();
          promote(blk, it, s0a, s1a);
          ptx::wgmma_wait_group<0>();
          promote(blk2, it + 1, s0b, s1b);
          it = it + 2;
        } else {
          ptx::wgmma_wait_group<0>();
          promote(blk, it, s0a, s1a);
          ++it;
        }
      }
      const int64_t n0 = tc.n_block * kBlockN;
      if constexpr (kSplitK) add_tile(g, acc, sk.partials, m_tile, n0, t);
      else if (g.out_dtype == DType::kF32) store_tile<float, kBlockScaled>(g, acc, m_tile, n0, t);
      else if (g.out_dtype == DType::kF16) store_tile<__half, kBlockScaled>(g, acc, m_tile, n0, t);
      else store_tile<__nv_bfloat16, kBlockScaled>(g, acc, m_tile, n0, t);
    }
  }
  if constexpr (kC > 1) {
    __syncwarp();
    ptx::cluster_sync();  // no CTA leaves while a peer may still multicast into it or arrive on it
  }
}

// ---- host side ----

// A K-major fp8 matrix [rows, K] with `ld` bytes between rows, as a rank-3 map read in
// (128 K, box_rows rows) boxes with the 128-byte swizzle.
inline CUtensorMap fp8_matrix_map(const void* base, int64_t rows, int64_t k, int64_t ld, uint32_t box_rows = 128) {
  const uint64_t dims[3] = {uint64_t(k), uint64_t(rows), 1};
  const uint64_t strides[2] = {uint64_t(ld), uint64_t(ld * rows)};
  const uint32_t box[3] = {kBlockK, box_rows, 1};
  return ptx::make_tensor_map_3d(base, CU_TENSOR_MAP_DATA_TYPE_UINT8, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

// How many clusters of kCluster CTAs of `kernel` the device runs at once (the SMs for
// kCluster = 1; GPCs with an odd SM count leave SMs unpaired), computed once per kernel, after
// the shared-memory opt-in (made on every device) of `smem_bytes`.
template <int kCluster, class Kernel>
int fp8_max_units(Kernel kernel, int smem_bytes = kSmemBytes) {
  allow_dynamic_smem(kernel, smem_bytes);
  static std::mutex mu;
  static std::map<const void*, int> known;
  std::lock_guard<std::mutex> lock(mu);
  const auto it = known.find(reinterpret_cast<const void*>(kernel));
  if (it != known.end()) return it->second;
  int units = device_info().sm_count / kCluster;
  if constexpr (kCluster > 1) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(kCluster * units);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = smem_bytes;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = kCluster, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    int clusters = 0;
    HK_CHECK_CUDA(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg));
    if (clusters > 0) units = clusters;
  }
  known.emplace(reinterpret_cast<const void*>(kernel), units);
  return units;
}

// A persistent grid: one CTA per SM (197 KB of shared memory each) in clusters of kCluster, at
// most one cluster per work unit (kCluster vertically adjacent tiles, or with split-K a tile's
// k-range: `splits` per tile).
template <int kCluster = 1, class... Extra>
void launch_wgmma_fp8(void (*kernel)(CUtensorMap, CUtensorMap, GemmFp8Args, Extra...), const GemmFp8Args& g,
                      const char* name, cudaStream_t stream, int splits = 1, Extra... extra) {
  const int max_units = fp8_max_units<kCluster>(kernel);
  const CUtensorMap ma = fp8_matrix_map(g.a, g.m, g.k, g.a_s0);
  const CUtensorMap mb = fp8_matrix_map(g.b, g.n, g.k, g.b_s0, kBlockN / kCluster);
  const int64_t units = ceil_div(ceil_div(g.m, kBlockM), int64_t(kCluster)) * ceil_div(g.n, kBlockN) * splits;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(std::min<int64_t>(units, max_units) * kCluster));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmemBytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  if constexpr (kCluster > 1) {
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = kCluster, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.attrs = &attr, cfg.numAttrs = 1;
  }
  HK_CHECK_CUDA(cudaLaunchKernelEx(&cfg, kernel, ma, mb, g, extra...));
  HK_CHECK_LAUNCH(name);
}

}  // namespace hk::gemm_fp8_impl
