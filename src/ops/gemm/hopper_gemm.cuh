// gemm/hopper_gemm.cuh — the Hopper GEMM body that the wgmma rungs instantiate, each with a
// policy struct (gemm/vNN_*.cuh) that switches its features on one at a time.
//
// One CTA = one producer warpgroup (a single thread issues TMA) + two consumer warpgroups, each
// computing 64 rows of a 128 x kBlockN tile with wgmma m64nNk16 from shared memory. A ring of
// kStages shared-memory slots, each holding a (128 x 64) A tile and a (kBlockN x 64) B tile in
// the 128-byte-swizzled layout, is handed back and forth through two mbarriers per slot
// (hk::PipelineRing, common/pipeline.cuh):
//   full[s]  — 1 arrival (the producer's expect_tx) + the slot's bytes from TMA
//   empty[s] — one arrival per consumer warp of every CTA that reads the slot
// The features a policy switches on:
//   kStages > 1      loads of later K blocks overlap the MMAs of the current one
//   kSetMaxNReg      producer drops to 40 registers, consumers rise to 232 (128 accumulators
//                    per thread for kBlockN = 256 without spilling)
//   kCluster = 2     two CTAs stacked along M share the B tile: each loads half of it and TMA
//                    multicasts that half into both CTAs' shared memory
//   kPersistent      one CTA (cluster) per SM loops over tiles in a grouped (kGroup), L2-friendly
//                    order; the producer fetches the next tile while the consumers run the epilogue
//   kTmaStore        the epilogue stages 64 x 128-byte chunks of C in swizzled shared memory
//                    and writes them with TMA stores (coalesced, asynchronous)
//   kMmaInFlight = 1 a consumer keeps one k-block's wgmma group in flight while it issues the
//                    next (wgmma.wait_group 1), and hands each slot back one k-block later;
//                    with 0 it waits for every group (wait_group 0) before the next k-block
//   kCtaRelease      with kCluster > 1, slots go back to the producers with a CTA-scope release
//                    arrive (a bare SYNCS.ARRIVE) instead of a cluster-scope one, which ptxas
//                    precedes with MEMBAR.ALL.GPU in every consumer warp on every k-block
//   kPlainEpilogue   when the problem has no C_in, bias or activation, the TMA-store epilogue
//                    is a branch-free c = alpha acc (output type fixed at compile time, no
//                    per-element bounds checks or 64-bit indexing: TMA drops what lies outside)
//   kStreamK         the tiles of the last 1-2 waves are split along K evenly over the clusters
//                    (StreamKSplit): partial tiles meet in a global workspace, the cluster
//                    holding a tile's last k-block adds its peers' partials and stores it
// Besides the policy, the body takes the epilogue kind: RuntimeEpilogue (read from GemmArgs in
// the kernel) or a FusedEpilogue (activation, bias and output type fixed at compile time; the
// host picks the kernel per problem).
// The body takes every layout: K-major operands are one TMA box per slot, MN-major operands
// (column-major A, row-major B) are 64-wide boxes side by side, read by wgmma's transpose mode.
// Tails: TMA zero-fills out-of-bounds loads and drops out-of-bounds stores; boxes that would lie
// entirely outside are clamped to a valid coordinate (their rows/columns are never stored).
//
// What is compiled where: this header holds the body and the host-side launch; the kernels
// (gemm/hopper_gemm_kernels.cuh) are instantiated per (policy, input dtype, layout, epilogue
// part) by hopper_launch_part, in the translation unit that includes that header: the rung's own
// file for the teaching rungs, which instantiate the "nt" layout only, and one generated file per
// part for the production rungs (src/ops/gemm/CMakeLists.txt), so that no file compiles more
// than about a dozen kernels.
#pragma once

#include <cuda.h>

#include <cuda/atomic>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>

#include "common/launch.cuh"
#include "common/pipeline.cuh"
#include "common/ptx/cluster.cuh"
#include "common/ptx/mbarrier.cuh"
#include "common/ptx/named_barrier.cuh"
#include "common/ptx/tma.cuh"
#include "common/ptx/wgmma.cuh"
#include "common/sched/stream_k.hpp"
#include "common/sched/tile_scheduler.hpp"
#include "core/scratch.hpp"
#include "gemm/epilogue.cuh"

namespace hk::gemm_impl {

// Which epilogue kinds a policy's kernels are compiled for (one kernel per kind).
enum class EpilogueKinds {
  kRuntime,  // one kernel, RuntimeEpilogue: C_in, bias, activation and output dtype read from GemmArgs
  kFused,    // RuntimeEpilogue for problems with C_in, else a FusedEpilogue per (output dtype,
             // activation, bias): 1 + 3 x 3 x 2 = 19 kernels per input dtype and layout
  kBench,    // the fused kinds a ladder benchmark runs: plain, bias + GeLU, ReLU, each with the
             // input dtype as output dtype and no C_in
};

// The derived sizes of policy P (a rung's struct, gemm/vNN_*.cuh) and the rules it must keep.
template <class P>
struct HopperConfig : P {
  static constexpr int kBlockK = 64;  // NOTE: 64 x 2 bytes = 128 bytes, one row of the 128B swizzle;
                                      // wgmma_k_block's four k16 steps
  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kABytes = P::kBlockM * kBlockK * 2;  // (kBlockM, 64) 16-bit
  static constexpr int kBBytes = P::kBlockN * kBlockK * 2;  // (kBlockN, 64) 16-bit
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kCChunkBytes = 64 * 128;             // (64 rows, 128 bytes): one TMA store box
  static constexpr int kCBytes = P::kTmaStore ? kConsumers * 2 * kCChunkBytes : 0;  // double-buffered
  static constexpr int kBarrierBytes =
      PipelineRing<P::kStages>::kBarrierBytes + (P::kStreamK ? 64 : 0);  // + stream-K's piece table
  static constexpr int kSmemBytes = 1024 + P::kStages * kStageBytes + kCBytes + kBarrierBytes;  // +1024: alignment
  static_assert(!P::kPlainEpilogue || P::kTmaStore, "the plain epilogue is a TMA-store epilogue");
  static_assert(!P::kStreamK || (P::kPersistent && P::kMmaInFlight == 1),
                "stream-K splits a persistent grid's last waves");
  static_assert(!P::kStreamKFewUnits || P::kStreamK, "a grid of more clusters than units is for stream-K");
  static_assert(P::kMmaInFlight == 0 || P::kMmaInFlight == 1, "wgmma groups in flight across k-blocks: 0 or 1");
  static_assert(P::kMmaInFlight == 0 || P::kStages >= 2, "a slot is released one k-block late: needs 2+ stages");
  static_assert(P::kBlockN == 128 || P::kBlockN == 256, "wgmma m64n128k16 or m64n256k16");
  static_assert(P::kBlockN % (64 * P::kCluster) == 0, "each CTA multicasts whole 64-wide boxes of B");
  static_assert(kSmemBytes <= 232448, "227 KB of shared memory per block on sm_90");
  static_assert(!P::kSetMaxNReg || 128 * 40 + kConsumers * 128 * 232 <= 65536, "register file: 40 + 2 x 232 per lane");
  static_assert(P::kEpilogues == EpilogueKinds::kRuntime || P::kTmaStore, "a compile-time epilogue stores with TMA");
};

using ptx::named_barrier_arrive;
using ptx::named_barrier_sync;

template <int kN, class T, bool kTransA, bool kTransB>
__device__ __forceinline__ void wgmma_tile(float (&d)[kN / 2], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (kN == 256) ptx::wgmma_m64n256k16<T, kTransA, kTransB>(d, da, db, scale_d);
  else ptx::wgmma_m64n128k16<T, kTransA, kTransB>(d, da, db, scale_d);
}

// The four m64nNk16 steps of one 64-deep k-block from a slot: a_base is the warpgroup's 64 rows
// of A, b_base the slot's kN rows of B. first: the tile's first k-block (overwrite d).
template <int kN, class T, bool kAMn, bool kBMn>
__device__ __forceinline__ void wgmma_k_block(float (&d)[kN / 2], uint32_t a_base, uint32_t b_base, bool first) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    // K-major: +32 bytes per 16 K inside the swizzled row; MN-major: +16 rows of 128 bytes.
    const uint64_t da = kAMn ? ptx::make_smem_desc_sw128(a_base + kk * 2048, 8192, 1024)
                             : ptx::make_smem_desc_sw128(a_base + kk * 32, 16, 1024);
    const uint64_t db = kBMn ? ptx::make_smem_desc_sw128(b_base + kk * 2048, 8192, 1024)
                             : ptx::make_smem_desc_sw128(b_base + kk * 32, 16, 1024);
    wgmma_tile<kN, T, kAMn, kBMn>(d, da, db, (!first || kk > 0) ? 1 : 0);
  }
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi, DType dt) {
  if (dt == DType::kF16) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

// Epilogue through shared memory and TMA stores, kE bytes per output element. The warpgroup's
// 64 x kBlockN accumulators leave in chunks of 64 rows x 128 bytes, alternating between two
// buffers so the TMA store of one chunk overlaps the writes of the next.
// NOTE: before a chunk's writes, the store that last read its buffer (two chunks back) must be
// done: "at most one group still reading" says so only when the previous chunk stored. A chunk
// past N, or a cluster partner's rows past M (an odd number of M blocks), stores nothing, and
// then the writer waits for every group (as the first chunk of a tile does). Waiting for at most
// one regardless let a CTA past M overwrite the last chunk of its previous tile while TMA still
// read it: wrong output seen once under load (1920x5632x64 tt bf16, 996 of 10.8M elements,
// H200, 2026-12-02).
template <int kE, class Cfg>
__device__ __forceinline__ void epilogue_tma_store(const GemmArgs& g, float (&acc)[Cfg::kBlockN / 2], uint8_t* cbuf,
                                                   const CUtensorMap* tma_c, int64_t bz, int64_t m_tile, int64_t n0,
                                                   int cw, int t) {
  constexpr int kCols = 128 / kE;       // columns per chunk: 64 (16-bit) or 32 (f32)
  constexpr int kJPer = kCols / 8;      // accumulator column-octets per chunk
  const int w = t / 32, l = t % 32;
  bool stored = false;  // whether the previous chunk stored (and so committed a group)
#pragma unroll
  for (int c = 0; c < Cfg::kBlockN / kCols; ++c) {
    uint8_t* buf = cbuf + (c & 1) * Cfg::kCChunkBytes;
    if (t == 0) stored ? ptx::bulk_wait_group_read<1>() : ptx::bulk_wait_group_read<0>();  // see above
    named_barrier_sync(1 + cw, 128);
#pragma unroll
    for (int jl = 0; jl < kJPer; ++jl) {
      const int j = c * kJPer + jl;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = w * 16 + l / 4 + 8 * h, colc = jl * 8 + (l % 4) * 2;
        const int64_t grow = m_tile + r, gcol = n0 + c * kCols + colc;
        float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
        if (grow < g.m) {  // outside: finite filler, dropped by the store's bounds
          v0 = gcol < g.n ? epilogue_value(g, v0, bz, grow, gcol) : 0.0f;
          v1 = gcol + 1 < g.n ? epilogue_value(g, v1, bz, grow, gcol + 1) : 0.0f;
        }
        const uint32_t off = ptx::swizzle_128b_offset(r, colc * kE);
        if constexpr (kE == 4) *reinterpret_cast<float2*>(buf + off) = make_float2(v0, v1);
        else *reinterpret_cast<uint32_t*>(buf + off) = pack_half2(v0, v1, g.out_dtype);
      }
    }
    ptx::fence_proxy_async_smem();  // generic-proxy writes -> visible to the TMA engine
    named_barrier_sync(1 + cw, 128);
    stored = m_tile < g.m && n0 + c * kCols < g.n;
    if (t == 0 && stored) {
      ptx::tma_store_3d(tma_c, buf, static_cast<int32_t>(n0 + c * kCols), static_cast<int32_t>(m_tile),
                        static_cast<int32_t>(bz));
      ptx::bulk_commit_group();
    }
  }
}

// An epilogue fixed at compile time: c = act(alpha acc + bias) rounded once to OutT, no C_in.
// The plain epilogue (kPlainEpilogue) is its no-bias, no-activation kind; a policy with
// EpilogueKinds::kFused or kBench compiles a kernel per kind.
template <class OutT, GemmActivation kAct, bool kBias>
struct FusedEpilogue {
  using Out = OutT;
  static constexpr GemmActivation kActivation = kAct;
  static constexpr bool kHasBias = kBias;
};

// The epilogue read from GemmArgs at run time (C_in, bias, activation, output dtype): the
// generic per-element path, or the plain one when Cfg::kPlainEpilogue and the problem has none.
struct RuntimeEpilogue {};

template <class Epi>
struct has_fused_bias : std::false_type {};
template <class OutT, GemmActivation kAct>
struct has_fused_bias<FusedEpilogue<OutT, kAct, true>> : std::true_type {};

// A thread's bias values for one tile, as f32: pair j is columns 8 j + (lane % 4) * 2 + {0, 1},
// the columns of accumulators acc[4 j + 2 h + {0, 1}] (wgmma.cuh's fragment layout), the same
// in both of the thread's rows. Without a compile-time bias it holds nothing and reads as 0.
template <class Epi, int kBlockN, bool = has_fused_bias<Epi>::value>
struct TileBias {
  __device__ __forceinline__ void load(const void*, int64_t, int64_t, int) {}
  __device__ __forceinline__ float2 operator[](int) const { return make_float2(0.0f, 0.0f); }
};

template <class Epi, int kBlockN>
struct TileBias<Epi, kBlockN, true> {
  using OutT = typename Epi::Out;
  float2 v[kBlockN / 8];  // (kBlockN / 8) column pairs

  // NOTE: the TMA rungs' 16-byte alignment rule covers the bias view, and each pair starts at an
  // even column, so a pair is one 4- or 8-byte load. Only the last column tile of an N that is
  // not a multiple of kBlockN takes the predicated scalar loads (an odd N ends mid-pair).
  __device__ __forceinline__ void load(const void* bias, int64_t n, int64_t n0, int t) {
    const OutT* p = static_cast<const OutT*>(bias) + n0 + (t % 4) * 2;
    if (n - n0 >= kBlockN) {
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) v[j] = load_pair(p + 8 * j);
    } else {
      const int rem = static_cast<int>(n - n0) - (t % 4) * 2;  // columns left from this thread's first
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j)
        v[j] = make_float2(8 * j < rem ? to_f32(__ldg(p + 8 * j)) : 0.0f,
                           8 * j + 1 < rem ? to_f32(__ldg(p + 8 * j + 1)) : 0.0f);
    }
  }
  __device__ __forceinline__ float2 operator[](int j) const { return v[j]; }

  static __device__ __forceinline__ float2 load_pair(const OutT* p) {
    if constexpr (std::is_same_v<OutT, float>) return __ldg(reinterpret_cast<const float2*>(p));
    else if constexpr (std::is_same_v<OutT, __half>)
      return __half22float2(__ldg(reinterpret_cast<const __half2*>(p)));
    else return __bfloat1622float2(__ldg(reinterpret_cast<const __nv_bfloat162*>(p)));
  }
};

template <GemmActivation kAct>
__device__ __forceinline__ float activate(float v) {
  if constexpr (kAct == GemmActivation::kRelu) return fmaxf(v, 0.0f);
  else if constexpr (kAct == GemmActivation::kGelu) return act::gelu_tanh(v);
  else return v;
}

// The chunked TMA-store epilogue with everything but alpha fixed by Epi (a FusedEpilogue): no
// per-element tests or 64-bit index math. Rows and columns past M and N are written to shared
// memory like the rest (alpha times zero-filled or clamped-box products, bias 0: finite) and
// dropped by TMA. The bias values were loaded once per tile (TileBias), before the epilogue.
template <class Epi, class Cfg>
__device__ __forceinline__ void epilogue_tma_store_fused(float alpha, const TileBias<Epi, Cfg::kBlockN>& bias,
                                                         int64_t m, int64_t n, float (&acc)[Cfg::kBlockN / 2],
                                                         uint8_t* cbuf, const CUtensorMap* tma_c, int64_t bz,
                                                         int64_t m_tile, int64_t n0, int cw, int t) {
  using OutT = typename Epi::Out;
  constexpr int kE = static_cast<int>(sizeof(OutT));
  constexpr int kCols = 128 / kE;
  constexpr int kJPer = kCols / 8;
  const int w = t / 32, l = t % 32;
  bool stored = false;  // whether the previous chunk stored (and so committed a group)
#pragma unroll
  for (int c = 0; c < Cfg::kBlockN / kCols; ++c) {
    uint8_t* buf = cbuf + (c & 1) * Cfg::kCChunkBytes;
    if (t == 0) stored ? ptx::bulk_wait_group_read<1>() : ptx::bulk_wait_group_read<0>();  // see above
    named_barrier_sync(1 + cw, 128);
#pragma unroll
    for (int jl = 0; jl < kJPer; ++jl) {
      const int j = c * kJPer + jl;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t r = w * 16 + l / 4 + 8 * h, colc = jl * 8 + (l % 4) * 2;
        float v0 = alpha * acc[4 * j + 2 * h], v1 = alpha * acc[4 * j + 2 * h + 1];
        if constexpr (Epi::kHasBias) v0 += bias[j].x, v1 += bias[j].y;
        v0 = activate<Epi::kActivation>(v0), v1 = activate<Epi::kActivation>(v1);
        const uint32_t off = ptx::swizzle_128b_offset(r, colc * kE);
        if constexpr (kE == 4) {
          *reinterpret_cast<float2*>(buf + off) = make_float2(v0, v1);
        } else if constexpr (std::is_same_v<OutT, __half>) {
          *reinterpret_cast<__half2*>(buf + off) = __floats2half2_rn(v0, v1);
        } else {
          *reinterpret_cast<__nv_bfloat162*>(buf + off) = __floats2bfloat162_rn(v0, v1);
        }
      }
    }
    ptx::fence_proxy_async_smem();  // generic-proxy writes -> visible to the TMA engine
    named_barrier_sync(1 + cw, 128);
    stored = m_tile < m && n0 + c * kCols < n;
    if (t == 0 && stored) {
      ptx::tma_store_3d(tma_c, buf, static_cast<int32_t>(n0 + c * kCols), static_cast<int32_t>(m_tile),
                        static_cast<int32_t>(bz));
      ptx::bulk_commit_group();
    }
  }
}

// The TMA-store epilogue of a warpgroup's 64 x kBlockN accumulators, by epilogue kind: a
// FusedEpilogue's branch-free path; read at run time (RuntimeEpilogue), the plain path when
// Cfg::kPlainEpilogue and the problem has no C_in, bias or activation, else the generic one.
template <class Epi, class Cfg>
__device__ __forceinline__ void epilogue_tma_store_tile(const GemmArgs& g, const TileBias<Epi, Cfg::kBlockN>& tile_bias,
                                                        float (&acc)[Cfg::kBlockN / 2], uint8_t* cbuf,
                                                        const CUtensorMap* tma_c, int64_t bz, int64_t m_tile,
                                                        int64_t n0, int cw, int t) {
  if constexpr (!std::is_same_v<Epi, RuntimeEpilogue>) {
    epilogue_tma_store_fused<Epi, Cfg>(g.alpha, tile_bias, g.m, g.n, acc, cbuf, tma_c, bz, m_tile, n0, cw, t);
  } else if (Cfg::kPlainEpilogue && !g.c_in && !g.bias && g.act == GemmActivation::kNone) {
    auto store = [&](auto out) {
      using Plain = FusedEpilogue<decltype(out), GemmActivation::kNone, false>;
      epilogue_tma_store_fused<Plain, Cfg>(g.alpha, TileBias<Plain, Cfg::kBlockN>{}, g.m, g.n, acc, cbuf, tma_c, bz,
                                           m_tile, n0, cw, t);
    };
    if (g.out_dtype == DType::kF32) store(float{});
    else if (g.out_dtype == DType::kF16) store(__half{});
    else store(__nv_bfloat16{});
  } else if (g.out_dtype == DType::kF32) epilogue_tma_store<4, Cfg>(g, acc, cbuf, tma_c, bz, m_tile, n0, cw, t);
  else epilogue_tma_store<2, Cfg>(g, acc, cbuf, tma_c, bz, m_tile, n0, cw, t);
}

// This CTA's share of a slot's B tile (kBlockN rows of N, 64 of K): kBlockN / kCluster rows,
// multicast to every CTA of the cluster (loaded alone without one). K-major B is one box
// (64 K, kBlockN / kCluster N); MN-major B is (64 N, 64 K) boxes 8 KB apart. A box that would
// lie entirely past N is clamped to n0 (its columns are never stored).
template <bool kBMn, class Cfg>
__device__ __forceinline__ void tma_load_b_share(uint8_t* b_dst, const CUtensorMap* tma_b, int32_t n0, int32_t k0,
                                                 int32_t bz, uint64_t* bar, uint32_t rank, int64_t n) {
  constexpr int kC = Cfg::kCluster, kBRows = Cfg::kBlockN / kC;
  auto load_b = [&](void* dst, int32_t c0, int32_t c1) {
    if constexpr (kC > 1) ptx::tma_load_3d_multicast(dst, tma_b, c0, c1, bz, bar, (1u << kC) - 1);
    else ptx::tma_load_3d(dst, tma_b, c0, c1, bz, bar);
  };
  if constexpr (!kBMn) {
    const int32_t nr = n0 + int32_t(rank) * kBRows < n ? n0 + int32_t(rank) * kBRows : n0;
    load_b(b_dst + rank * kBRows * 128, k0, nr);  // box (64 K, kBRows N)
  } else {
#pragma unroll
    for (int j = 0; j < kBRows / 64; ++j) {  // boxes (64 N, 64 K), 8 KB apart
      const int jj = int(rank) * (kBRows / 64) + j;
      const int32_t nj = n0 + 64 * jj < n ? n0 + 64 * jj : n0;
      load_b(b_dst + jj * 8192, nj, k0);
    }
  }
}

// ---- stream-K (Cfg::kStreamK): the schedule is sched::StreamKSplit (common/sched/stream_k.hpp) ----
using sched::StreamKSplit;

// Where the split tiles' partials meet: per (cluster, CTA rank, consumer warpgroup) a slot of
// 128 threads x kBlockN / 2 floats, stored float4-interleaved across threads (coalesced), and
// a flag (0 = empty). Both live in per-stream scratch (core/scratch.hpp): every flag is back to
// 0 when the kernel exits, because the one reader of a slot clears its flag.
struct StreamKWorkspace {
  float* partials = nullptr;
  uint32_t* flags = nullptr;
};

template <int kBN>
__device__ __forceinline__ void stream_k_store_partial(const StreamKWorkspace& ws, int32_t slot, const float (&acc)[kBN / 2],
                                                       int cw, int t) {
  float4* dst = reinterpret_cast<float4*>(ws.partials) + slot * (128 * kBN / 8);
#pragma unroll
  for (int i = 0; i < kBN / 8; ++i) __stcg(dst + i * 128 + t, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
  named_barrier_sync(1 + cw, 128);  // the warpgroup's stores, then one release of the flag
  if (t == 0) cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(ws.flags[slot]).store(1, cuda::memory_order_release);
}

template <int kBN>
__device__ __forceinline__ void stream_k_add_partial(const StreamKWorkspace& ws, int32_t slot, float (&acc)[kBN / 2],
                                                     int cw, int t) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> flag(ws.flags[slot]);
  while (flag.load(cuda::memory_order_acquire) == 0) {
  }
  const float4* src = reinterpret_cast<const float4*>(ws.partials) + slot * (128 * kBN / 8);
#pragma unroll
  for (int i = 0; i < kBN / 8; ++i) {
    const float4 v = __ldcg(src + i * 128 + t);
    acc[4 * i] += v.x, acc[4 * i + 1] += v.y, acc[4 * i + 2] += v.z, acc[4 * i + 3] += v.w;
  }
  named_barrier_sync(1 + cw, 128);  // every thread has seen the flag before it is cleared
  if (t == 0) flag.store(0, cuda::memory_order_relaxed);
}

// How the producer fills a slot: load_a writes the (kBlockM x 64) block of A at rows m0, columns
// k0 of matrix bz, read through tma_a; load_b this CTA's share of the (kBlockN x 64) block of B
// at columns n0 (tma_load_b_share). A convolution supplies its own: conv2d's implicit GEMM reads
// the rows of an im2col view of its input through an im2col-mode map, as A (forward) or as B
// (the weight gradient).
struct MatrixLoads {
  template <bool kAMn, class Cfg>
  __device__ __forceinline__ void load_a(uint8_t* a_dst, const CUtensorMap* tma_a, const GemmArgs& g, int32_t m0,
                                         int32_t k0, int32_t bz, uint64_t* bar) const {
    if constexpr (!kAMn) {
      ptx::tma_load_3d(a_dst, tma_a, k0, m0, bz, bar);  // box (64 K, 128 M)
    } else {
#pragma unroll
      for (int j = 0; j < Cfg::kBlockM / 64; ++j) {  // boxes (64 M, 64 K), 8 KB apart
        const int32_t mj = m0 + 64 * j < g.m ? m0 + 64 * j : m0;
        ptx::tma_load_3d(a_dst + j * 8192, tma_a, mj, k0, bz, bar);
      }
    }
  }
  template <bool kBMn, class Cfg>
  __device__ __forceinline__ void load_b(uint8_t* b_dst, const CUtensorMap* tma_b, const GemmArgs& g, int32_t n0,
                                         int32_t k0, int32_t bz, uint64_t* bar, uint32_t rank) const {
    tma_load_b_share<kBMn, Cfg>(b_dst, tma_b, n0, k0, bz, bar, rank, g.n);
  }
};

// Epi: RuntimeEpilogue, or the FusedEpilogue the host picked for the problem.
// skw: the stream-K workspace (Cfg::kStreamK only). loads: how A and B tiles are read (MatrixLoads).
template <class T, bool kAMn, bool kBMn, class Cfg, class Epi = RuntimeEpilogue, class Loads = MatrixLoads>
__device__ __forceinline__ void hopper_gemm_body(const CUtensorMap* tma_a, const CUtensorMap* tma_b,
                                                 const CUtensorMap* tma_c, const GemmArgs& g,
                                                 const StreamKWorkspace& skw = {}, const Loads& loads = {}) {
  constexpr int kBN = Cfg::kBlockN, kS = Cfg::kStages, kC = Cfg::kCluster;
  static_assert(std::is_same_v<Epi, RuntimeEpilogue> || Cfg::kTmaStore, "a compile-time epilogue stores with TMA");
  extern __shared__ uint8_t hk_gemm_smem[];
  // NOTE: 128B-swizzled atoms must start 1024-byte aligned (descriptor base offset 0, and the
  // swizzle phase TMA and wgmma agree on is taken from address bits 7-9).
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(hk_gemm_smem));
  uint8_t* smem = hk_gemm_smem + ((1024 - (raw & 1023)) & 1023);
  uint8_t* sa = smem;                                 // (kS, 128 x 64) A slots
  uint8_t* sb = sa + kS * Cfg::kABytes;               // (kS, kBN x 64) B slots
  uint8_t* sc = sb + kS * Cfg::kBBytes;               // (2 consumers, 2 buffers) C chunks
  uint64_t* full = reinterpret_cast<uint64_t*>(sc + Cfg::kCBytes);
  uint64_t* empty = full + kS;
  auto* sk_pieces = reinterpret_cast<typename StreamKSplit::Pieces*>(empty + kS);  // kStreamK only
  // NOTE: the ring takes the two pointers above rather than PipelineRing::at(sc + kCBytes):
  // deriving them (and the piece table's address) through at() changes how cicc computes the
  // stream-K kernels' shared-memory addresses, and with them their SASS (scheduling, register
  // allocation; up to 4% fewer instructions in the bias kernels, not measured). Built this
  // way every kernel's SASS is the one measured before the ring existed.
  const PipelineRing<kS> ring{full, empty};
  using RingPos = PipelineState<kS, int>;  // ring position: slot and phase of k-block `it`

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  const uint32_t rank = kC > 1 ? ptx::cluster_ctarank() : 0;
  const int64_t m_blocks = (g.m + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const auto sched = sched::TileScheduler::make(m_blocks, (g.n + kBN - 1) / kBN, g.batch, kC, Cfg::kGroup);
  const int64_t units = sched.units();
  const int k_blocks = static_cast<int>((g.k + Cfg::kBlockK - 1) / Cfg::kBlockK);
  // Non-persistent: one unit per cluster. Persistent: units c, c + G, ... (and with stream-K the
  // split ranges after them).
  const StreamKSplit split =
      StreamKSplit::make(units, Cfg::kPersistent ? gridDim.x / kC : units, k_blocks, Cfg::kStreamK,
                         Cfg::kStreamKFewUnits);
  const int32_t cluster_id = static_cast<int32_t>(blockIdx.x / kC);

  if (threadIdx.x == 0) {
    if constexpr (Cfg::kStreamK) split.pieces(cluster_id, *sk_pieces);
    ring.init(Cfg::kConsumers * 4 * kC);  // empty[]: every consumer warp of every CTA
    ptx::prefetch_tensor_map(tma_a);
    ptx::prefetch_tensor_map(tma_b);
    if constexpr (Cfg::kTmaStore) ptx::prefetch_tensor_map(tma_c);
  }
  if constexpr (kC > 1) ptx::cluster_sync();  // peers may arrive on our barriers from now on
  else __syncthreads();

  if (wg == 0) {
    // ---- producer: one thread issues every TMA load ----
    if constexpr (Cfg::kSetMaxNReg) ptx::setmaxnreg_dec<40>();
    if (t == 0) {
      RingPos it;
      split.for_each_piece(cluster_id, sk_pieces, [&](int64_t u, int kb0, int kb1) {
        const sched::TileCoord tc = sched.tile(u, static_cast<int>(rank));
        // A cluster partner past the last M block loads the last real block instead.
        const int32_t m0 = static_cast<int32_t>(std::min<int64_t>(tc.m_block, m_blocks - 1) * Cfg::kBlockM);
        const int32_t n0 = static_cast<int32_t>(tc.n_block * kBN), bz = static_cast<int32_t>(tc.batch);
        for (int kb = kb0; kb < kb1; ++kb, ++it) {
          const int s = it.stage();
          ring.producer_acquire(it);
          ring.producer_expect_tx(it, Cfg::kStageBytes);  // both halves of B included
          uint64_t* full_bar = ring.full_barrier(it);
          const int32_t k0 = kb * Cfg::kBlockK;
          loads.template load_a<kAMn, Cfg>(sa + s * Cfg::kABytes, tma_a, g, m0, k0, bz, full_bar);
          loads.template load_b<kBMn, Cfg>(sb + s * Cfg::kBBytes, tma_b, g, n0, k0, bz, full_bar, rank);
        }
      });
    }
  } else {
    // ---- consumers: wgmma over the ring, then the fused epilogue ----
    if constexpr (Cfg::kSetMaxNReg) ptx::setmaxnreg_inc<232>();
    const int cw = wg - 1;  // 64-row half of the tile
    float acc[kBN / 2];     // (64, kBN) f32 accumulators, fragment layout in wgmma.cuh
    RingPos it;
    // This warp is done reading the slot of position p: lane r tells CTA r's producer.
    auto release = [&](RingPos p) {
      if constexpr (kC == 1) {
        if (t % 32 == 0) ring.consumer_release(p);
      } else if constexpr (Cfg::kCtaRelease) {
        if (t % 32 < kC) ring.consumer_release_peer(p, t % 32);
      } else {
        if (t % 32 < kC) ring.consumer_release_peer_cluster_scope(p, t % 32);
      }
    };
    split.for_each_piece(cluster_id, sk_pieces, [&](int64_t u, int kb0, int kb1) {
      const sched::TileCoord tc = sched.tile(u, static_cast<int>(rank));
      for (int kb = kb0; kb < kb1; ++kb, ++it) {
        const int s = it.stage();
        ring.consumer_wait(it);
        const uint32_t a_base = static_cast<uint32_t>(__cvta_generic_to_shared(sa + s * Cfg::kABytes)) + cw * 8192;
        const uint32_t b_base = static_cast<uint32_t>(__cvta_generic_to_shared(sb + s * Cfg::kBBytes));
        ptx::wgmma_fence();
        wgmma_k_block<kBN, T, kAMn, kBMn>(acc, a_base, b_base, kb == kb0);
        ptx::wgmma_commit_group();
        if constexpr (Cfg::kMmaInFlight == 0) {
          ptx::wgmma_wait_group<0>();
          ptx::wgmma_fence_operands(acc);
          release(it);
        } else {
          // k-block kb's group stays in flight; kb - 1's has finished reading its slot.
          ptx::wgmma_wait_group<1>();
          ptx::wgmma_fence_operands(acc);
          if (kb > kb0) release(it - 1);
        }
      }
      // A compile-time bias loads here, while the tile's last wgmma group still runs (with one in
      // flight); otherwise this is nothing.
      TileBias<Epi, kBN> tile_bias;
      tile_bias.load(g.bias, g.n, tc.n_block * kBN, t);
      if constexpr (Cfg::kMmaInFlight == 1) {
        ptx::wgmma_wait_group<0>();  // the accumulators are complete before the epilogue reads them
        ptx::wgmma_fence_operands(acc);
        if (kb1 > kb0) release(it - 1);
      }
      if constexpr (Cfg::kStreamK) {
        // A piece without the tile's last k-block leaves a partial; the one with it adds the
        // partials of the clusters below whose ranges reach into the tile.
        auto slot = [&](int32_t c) { return (c * kC + int32_t(rank)) * Cfg::kConsumers + cw; };
        if (kb1 < k_blocks) {
          stream_k_store_partial<kBN>(skw, slot(cluster_id), acc, cw, t);
          return;
        }
        if (kb0 > 0) {
          const int32_t tile_begin = static_cast<int32_t>(u - split.dp_units) * k_blocks;
          for (int32_t c = cluster_id - 1; c >= 0 && split.range_begin(c + 1) > tile_begin; --c)
            stream_k_add_partial<kBN>(skw, slot(c), acc, cw, t);
        }
      }
      const int64_t m_tile = tc.m_block * Cfg::kBlockM + cw * 64, n0 = tc.n_block * kBN;
      if constexpr (Cfg::kTmaStore) {
        epilogue_tma_store_tile<Epi, Cfg>(g, tile_bias, acc, sc + cw * 2 * Cfg::kCChunkBytes, tma_c, tc.batch, m_tile,
                                          n0, cw, t);
      } else {
        const int w = t / 32, l = t % 32;
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int c = 0; c < 2; ++c)
              epilogue_store(g, acc[4 * j + 2 * h + c], tc.batch, m_tile + w * 16 + l / 4 + 8 * h,
                             n0 + 8 * j + (l % 4) * 2 + c);
      }
    });
    if constexpr (Cfg::kTmaStore)
      if (t == 0) ptx::bulk_wait_group_all();  // shared memory must outlive the stores
  }
  if constexpr (kC > 1) {
    __syncwarp();
    ptx::cluster_sync();  // no CTA leaves while a peer may still multicast into it or arrive on it
  }
}

// ---- host side ----

struct HopperMaps {
  CUtensorMap a, b, c;
};

inline CUtensorMapDataType tma_type(DType dt) {
  switch (dt) {
    case DType::kF32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case DType::kF16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    default: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  }
}

// A rank-3 map (inner, outer, batch) of a matrix whose `outer` lines are `ld` elements apart.
inline CUtensorMap matrix_map(const void* base, DType dt, int64_t inner, int64_t outer, int64_t ld, int64_t batch,
                              int64_t batch_stride, uint32_t box_inner, uint32_t box_outer) {
  const int64_t e = dtype_bits(dt) / 8;
  const uint64_t dims[3] = {uint64_t(inner), uint64_t(outer), uint64_t(batch)};
  // With one matrix the batch stride is never used; any legal value (the matrix span) will do.
  const uint64_t strides[2] = {uint64_t(ld * e), uint64_t((batch > 1 ? batch_stride : ld * outer) * e)};
  const uint32_t box[3] = {box_inner, box_outer, 1};
  return ptx::make_tensor_map_3d(base, tma_type(dt), dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

template <class Cfg>
HopperMaps make_hopper_maps(const GemmArgs& g) {
  HopperMaps m{};
  // A: K-major (row-major A) is one (64 K, 128 M) box; MN-major is (64 M, 64 K) boxes.
  m.a = g.a_col ? matrix_map(g.a, g.in_dtype, g.m, g.k, g.lda, g.batch, g.batch_stride_a, 64, 64)
                : matrix_map(g.a, g.in_dtype, g.k, g.m, g.lda, g.batch, g.batch_stride_a, 64, Cfg::kBlockM);
  // B: K-major (column-major B) is one (64 K, kBlockN / kCluster N) box per CTA; MN-major boxes
  // are (64 N, 64 K).
  m.b = g.b_col ? matrix_map(g.b, g.in_dtype, g.k, g.n, g.ldb, g.batch, g.batch_stride_b, 64,
                             Cfg::kBlockN / Cfg::kCluster)
                : matrix_map(g.b, g.in_dtype, g.n, g.k, g.ldb, g.batch, g.batch_stride_b, 64, 64);
  if constexpr (Cfg::kTmaStore) {
    const uint32_t e = dtype_bits(g.out_dtype) / 8;
    m.c = matrix_map(g.c, g.out_dtype, g.n, g.m, g.ldc, g.batch, g.batch_stride_c, 128 / e, 64);
  }
  return m;
}

// The stream-K workspace for `stream`: a partial-tile slot and a flag per consumer warpgroup of
// every CTA the device holds (an upper bound on the grid): 17 MB on the H200.
template <class Cfg>
StreamKWorkspace stream_k_workspace(cudaStream_t stream) {
  const size_t slots = size_t(device_info().sm_count) * Cfg::kConsumers;
  StreamKWorkspace ws;
  ws.partials = static_cast<float*>(detail::zeroed_stream_scratch(
      stream, "gemm_stream_k_partials", slots * 128 * (Cfg::kBlockN / 2) * sizeof(float)));
  ws.flags = static_cast<uint32_t*>(detail::zeroed_stream_scratch(stream, "gemm_stream_k_flags", slots * sizeof(uint32_t)));
  return ws;
}

// A rung's kernel: (A map, B map, C map, GemmArgs) and, with stream-K, its workspace.
template <class... Extra>
using HopperKernel = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, GemmArgs, Extra...);

// How many clusters of `kernel` fit on the device at once (for persistent grids), computed once
// per kernel, after the shared-memory opt-in (made on every device).
template <class Cfg, class... Extra>
int hopper_max_units(HopperKernel<Extra...> kernel) {
  allow_dynamic_smem(kernel, Cfg::kSmemBytes);
  static std::mutex mu;
  static std::map<const void*, int> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(reinterpret_cast<const void*>(kernel));
  if (it != known.end()) return it->second;
  int units = device_info().sm_count / Cfg::kCluster;
  if constexpr (Cfg::kCluster > 1) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(Cfg::kCluster * units);
    cfg.blockDim = dim3(Cfg::kThreads);
    cfg.dynamicSmemBytes = Cfg::kSmemBytes;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = Cfg::kCluster, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    int clusters = 0;
    HK_CHECK_CUDA(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg));
    if (clusters > 0) units = clusters;  // GPCs with an odd SM count leave SMs unpaired
  }
  known.emplace(reinterpret_cast<const void*>(kernel), units);
  return units;
}

// The clusters a persistent launch over `units` tile units gets, `fit` fitting at once
// (hopper_max_units): one per unit up to that, or every one that fits (Cfg::kStreamKFewUnits: a single wave's k-blocks split
// over all of them).
template <class Cfg>
int64_t hopper_grid_clusters(int64_t units, int64_t fit) {
  return Cfg::kStreamKFewUnits ? fit : std::min<int64_t>(units, fit);
}

// Whether a stream-K kernel's schedule splits problem g: StreamKSplit::make from the units, grid
// clusters and k-blocks its launch has (the kernel makes the same call on the device).
template <class Cfg, class... Extra>
bool stream_k_splits(HopperKernel<Extra...> kernel, const GemmArgs& g) {
  const auto sched = sched::TileScheduler::make(ceil_div(g.m, Cfg::kBlockM), ceil_div(g.n, Cfg::kBlockN), g.batch,
                                                Cfg::kCluster, Cfg::kGroup);
  const int64_t clusters = hopper_grid_clusters<Cfg>(sched.units(), hopper_max_units<Cfg>(kernel));
  const int k_blocks = static_cast<int>(ceil_div(g.k, int64_t(Cfg::kBlockK)));
  return StreamKSplit::make(sched.units(), clusters, k_blocks, true, Cfg::kStreamKFewUnits).dp_units < sched.units();
}

// Launches `kernel` (a rung's kernel, or a kernel built on hopper_gemm_body elsewhere, such as
// conv2d's implicit GEMM) over problem g's tiles with the given maps and extra arguments: one
// cluster per tile unit, or (Cfg::kPersistent) hopper_grid_clusters.
template <class Cfg, class... Extra>
void launch_hopper_kernel(HopperKernel<Extra...> kernel, const HopperMaps& maps, const GemmArgs& g, const char* name,
                          cudaStream_t stream, std::type_identity_t<Extra>... extra) {
  const auto sched = sched::TileScheduler::make(ceil_div(g.m, Cfg::kBlockM), ceil_div(g.n, Cfg::kBlockN), g.batch,
                                                Cfg::kCluster, Cfg::kGroup);
  const int64_t fit = hopper_max_units<Cfg>(kernel);  // (after the kernel's shared-memory opt-in)
  const int64_t units = Cfg::kPersistent ? hopper_grid_clusters<Cfg>(sched.units(), fit) : sched.units();
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid_dim(units * Cfg::kCluster, "tile"));
  cfg.blockDim = dim3(Cfg::kThreads);
  cfg.dynamicSmemBytes = Cfg::kSmemBytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  if constexpr (Cfg::kCluster > 1) {
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = Cfg::kCluster, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.attrs = &attr, cfg.numAttrs = 1;
  }
  HK_CHECK_CUDA(cudaLaunchKernelEx(&cfg, kernel, maps.a, maps.b, maps.c, g, extra...));
  HK_CHECK_LAUNCH(name);
}

template <class Cfg, class... Extra>
void launch_hopper(HopperKernel<Extra...> kernel, const GemmArgs& g, const char* name, cudaStream_t stream) {
  const HopperMaps maps = make_hopper_maps<Cfg>(g);
  if constexpr (sizeof...(Extra) > 0) {
    static_assert(std::is_same_v<HopperKernel<Extra...>, HopperKernel<StreamKWorkspace>>,
                  "a GEMM rung's one extra argument is stream-K's workspace");
    // The workspace is only allocated (once per stream) for a problem that splits.
    const StreamKWorkspace ws = stream_k_splits<Cfg>(kernel, g) ? stream_k_workspace<Cfg>(stream) : StreamKWorkspace{};
    launch_hopper_kernel<Cfg>(kernel, maps, g, name, stream, ws);
  } else {
    launch_hopper_kernel<Cfg>(kernel, maps, g, name, stream);
  }
}

// Calls fn(Epi{}) with the epilogue kind of problem g when every kind is compiled
// (EpilogueKinds::kFused): RuntimeEpilogue when it reads C_in (beta != 0), else the
// FusedEpilogue of its output dtype, activation and bias.
template <class Fn>
void dispatch_epilogue(const GemmArgs& g, Fn&& fn) {
  if (g.c_in) {
    fn(RuntimeEpilogue{});
    return;
  }
  auto with_act = [&](auto out) {
    using A = GemmActivation;
    auto with_bias = [&](auto act) {
      if (g.bias) fn(FusedEpilogue<decltype(out), decltype(act)::value, true>{});
      else fn(FusedEpilogue<decltype(out), decltype(act)::value, false>{});
    };
    if (g.act == A::kRelu) with_bias(std::integral_constant<A, A::kRelu>{});
    else if (g.act == A::kGelu) with_bias(std::integral_constant<A, A::kGelu>{});
    else with_bias(std::integral_constant<A, A::kNone>{});
  };
  if (g.out_dtype == DType::kF32) with_act(float{});
  else if (g.out_dtype == DType::kF16) with_act(__half{});
  else with_act(__nv_bfloat16{});
}

// The short name of policy P's rung ("v08" of "v08_wgmma_tma_pipeline").
template <class P>
std::string rung_tag() {
  const std::string name = P::kName;
  return name.substr(0, name.find('_'));
}

// Why a problem is outside EpilogueKinds::kBench (plain, bias + GeLU or ReLU; output dtype =
// input dtype; no C_in), or "" when it is inside.
inline std::string bench_epilogue_mismatch(bool c_in, DType in, DType out, GemmActivation act, bool bias) {
  if (c_in) return "C_in (beta != 0)";
  if (out != in) return std::string(to_string(out)) + " output from " + std::string(to_string(in)) + " inputs";
  using A = GemmActivation;
  if ((act == A::kNone && !bias) || (act == A::kGelu && bias) || (act == A::kRelu && !bias)) return "";
  const std::string a = act == A::kRelu ? "ReLU" : act == A::kGelu ? "GeLU" : "no activation";
  return a + (bias ? " with bias" : " without bias");
}

// Calls fn(Epi{}) with the epilogue kind of problem g among those policy P compiles (P::kEpilogues)
// for input type T.
template <class P, class T, class Fn>
void dispatch_epilogue_kinds(const GemmArgs& g, Fn&& fn) {
  if constexpr (P::kEpilogues == EpilogueKinds::kRuntime) {
    fn(RuntimeEpilogue{});
  } else if constexpr (P::kEpilogues == EpilogueKinds::kFused) {
    dispatch_epilogue(g, fn);
  } else {
    static_assert(P::kEpilogues == EpilogueKinds::kBench);
    using A = GemmActivation;
    const std::string why =
        bench_epilogue_mismatch(g.c_in != nullptr, g.in_dtype, g.out_dtype, g.act, g.bias != nullptr);
    if (!why.empty()) HK_THROW(kNotSupported, "gemm/", P::kName, ": epilogue not instantiated: ", why);
    if (g.act == A::kGelu) fn(FusedEpilogue<T, A::kGelu, true>{});
    else if (g.act == A::kRelu) fn(FusedEpilogue<T, A::kRelu, false>{});
    else fn(FusedEpilogue<T, A::kNone, false>{});
  }
}

// Why policy P's kernels cannot run problem p, or "" when they can: first what the rung does
// not instantiate (a teaching rung compiles what its ladder benchmark runs: bf16 in the "nt"
// layout, and with EpilogueKinds::kBench three epilogues), then TMA's rules (gemm_tma_supports).
template <class P>
std::string hopper_supports(const GemmProblem& p) {
  if constexpr (!P::kEveryLayout) {
    if (p.a_col || !p.b_col)
      return "gemm: " + rung_tag<P>() + " is instantiated for the nt layout only (a teaching rung); got " + p.layout();
    if (p.in_dtype != DType::kBF16)
      return "gemm: " + rung_tag<P>() + " is instantiated for bf16 inputs only (a teaching rung); got " +
             std::string(to_string(p.in_dtype));
  }
  if constexpr (P::kEpilogues == EpilogueKinds::kBench) {
    const std::string why = bench_epilogue_mismatch(p.beta != 0.0f, p.in_dtype, p.out_dtype, p.act, p.has_bias);
    if (!why.empty())
      return "gemm: " + rung_tag<P>() +
             " is instantiated for its benchmark's epilogues only (a teaching rung: plain, bias + GeLU or ReLU, "
             "output dtype = input dtype, no C_in); got " + why;
  }
  return gemm_tma_supports(p, P::kTmaStore);
}

// The production rungs' epilogue kinds in two parts, each compiled in files of its own: 0, the
// 16-bit outputs without C_in (12 kinds); 1, f32 outputs and C_in (7). A rung that compiles a
// few kinds (EpilogueKinds::kBench, kRuntime) has them all in part 0.
template <class P, class Epi>
constexpr int epilogue_part() {
  if constexpr (P::kEpilogues != EpilogueKinds::kFused || std::is_same_v<Epi, RuntimeEpilogue>)
    return P::kEpilogues == EpilogueKinds::kFused ? 1 : 0;
  else return std::is_same_v<typename Epi::Out, float> ? 1 : 0;
}

// Launches policy P's kernel for input type T, layout (kACol, kBCol) and g's epilogue kind, which
// lies in part kPart. Declared here, defined in gemm/hopper_gemm_kernels.cuh: the translation unit
// that includes that header and explicitly instantiates it compiles the part's kernels.
template <class P, class T, bool kACol, bool kBCol, int kPart>
void hopper_launch_part(const GemmArgs& g, cudaStream_t stream);

// The part holding g's epilogue kind (the same dispatch as the kernels', so the two agree), then
// its launcher.
template <class P, class T, bool kACol, bool kBCol>
void hopper_launch_group(const GemmArgs& g, cudaStream_t stream) {
  int part = 0;
  dispatch_epilogue_kinds<P, T>(g, [&](auto epi) { part = epilogue_part<P, decltype(epi)>(); });
  if (part == 1) hopper_launch_part<P, T, kACol, kBCol, 1>(g, stream);
  else hopper_launch_part<P, T, kACol, kBCol, 0>(g, stream);
}

// A wgmma rung's launcher: the group of g's input dtype and layout (the "nt" group only when
// the rung does not compile every layout; hopper_supports declines the others).
template <class P>
void hopper_launch(const GemmArgs& g, cudaStream_t stream) {
  dispatch_input(g.in_dtype, P::kName, [&](auto t) {
    using T = decltype(t);
    if constexpr (P::kEveryLayout) {
      dispatch_layout(g.a_col, g.b_col, [&](auto ac, auto bc) {
        hopper_launch_group<P, T, decltype(ac)::value, decltype(bc)::value>(g, stream);
      });
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      if (g.a_col || !g.b_col)
        HK_THROW(kNotSupported, "gemm/", P::kName, ": instantiated for the nt layout only (a teaching rung)");
      hopper_launch_group<P, T, false, true>(g, stream);
    } else {
      HK_THROW(kNotSupported, "gemm/", P::kName, ": instantiated for bf16 inputs only (a teaching rung)");
    }
  });
}

}  // namespace hk::gemm_impl
