// gemm/v17_skinny_m_splitk.cu
//
// Rung 17: decode shapes (M <= 32, "nt": x W^T with a [N, K] weight). Such a GEMM is a stream
// of B: 2 M N K flops over 2 N K bytes is M flop/byte, below the ~150 flop/byte where even
// mma.sync (~600 TFLOP/s) would outrun the 4.2 TB/s copy ceiling, so the bound is HBM and the
// rung's job is to keep enough of B's bytes in flight on every SM. The 128x256 wgmma tiles of
// v15 leave 7/8 of each tile empty at M = 16 and give N = 8192 only 32 CTAs: 0.43x cuBLAS.
//
// Shape: a CTA owns 256 columns of C (8 warps x 32) or 128 (8 warps x 16) and a K range; a
// cluster of S CTAs along K (S = 1..8) splits K, and reduces its S partial tiles through
// distributed shared memory, so the epilogue runs once on the full sum with no workspace. The
// host picks the tile width and S together: the fewest B bytes per CTA times the waves of
// clusters, counting how many clusters of S the GPCs hold at once (30 of 4 on the H200, not
// 33). A warp streams its 32 (or 16) rows of B from global memory through a ring in shared
// memory: per iteration it copies its rows' next 128 (or 256) k with cp.async, each copy
// instruction whole 256-512-byte row segments (8 KB per warp per iteration), into its own
// slot of the ring, so only __syncwarp and cp.async.wait_group order it. The ring holds 3
// iterations at M <= 16 (2 at M <= 32): up to 192 KB of B in flight per SM. A is staged in shared memory in segments of M rows x 512 k
// (zero-filled past M and K), double-buffered: segment s + 1 is loaded into registers during
// segment s and stored at its end, one barrier per segment, outside B's cp.async groups.
// NOTE: measured on the H200 at 16x8192x8192: with B double-buffered in registers (16 KB per
// warp, 128 KB per SM at most) 42.1 us = 0.84x cuBLAS, B at ~3.2 TB/s, both with one A buffer
// and with two (2026-11-29): the bytes in flight, not the segment boundaries, set the rate.
//
// The k-permutation: mma.m16n8k16's B fragment gives lane (g = lane/4, t = lane%4) the k
// values {2t, 2t+1, 2t+8, 2t+9} of column g. Here lane (g, t) loads actual k 8t..8t+7 of its
// column (16 contiguous bytes) and uses them as two mma k16 steps s = 0, 1: fragment k index
// 2t+e is actual k 8t+4s+e and 2t+8+e is 8t+4s+2+e. That is a bijection of each k32 step onto
// the two k16 steps, and A's fragments use the same one (lane (g, t) reads 16 bytes at k 8t of
// rows g and g+8), so the products sum over the same k: the 16-byte load is the fragment.
// Adds over v15: a shape class of its own — split-K over a cluster (DSMEM reduction), B
// streamed through a per-lane cp.async ring, one mma.sync m16n8k16 row block per 16 rows of M.
// Needs: sm_90 (clusters); "nt" layout; M <= 32; v05's 16-byte rules for A and B (aligned
// operands, leading dims and batch strides a multiple of 16 bytes); any N, any K (tails are
// zero-filled); otherwise supports() says why and hk::gemm falls back to v15.
// Run:   hk bench gemm --variant 'v1[57]*' --shape 16x8192x8192 --shape 1x4096x4096
#include <cooperative_groups.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "common/launch.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/mma.cuh"
#include "gemm/epilogue.cuh"

namespace hk::gemm_v17_skinny_m_splitk {
namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kStepK = 32;                         // one 16-byte load per lane per column row
constexpr int kSegK = 512;                         // A's k extent per shared-memory segment
constexpr int kMaxCluster = 8;                     // the portable cluster size limit
// A warp's share of a CTA tile: kNTiles n8 tiles (8 kNTiles columns of C) x kSteps 32-wide k
// steps per iteration. Either shape keeps 16 16-byte B loads (8 KB per warp) per iteration.
template <int kNTiles_>
struct Tile {
  static constexpr int kNTiles = kNTiles_;
  static constexpr int kSteps = 16 / kNTiles;                 // k steps per iteration
  static constexpr int kIterK = kStepK * kSteps;              // 128 or 256
  static constexpr int kBlockN = kWarps * kNTiles * 8;        // 256 or 128 columns per CTA
  static_assert(kSegK % kIterK == 0, "whole iterations per A segment");
};
// NOTE: measured on the H200 (2026-11-29, 256-column tiles, 4-CTA clusters): 99.5 µs at M = 64
// against 55.3 at M = 16, where the single register buffer that 64 accumulators per thread left
// room for lost to v15 (81.6; B then in registers): the rung takes M <= 32.
constexpr int kMaxM = 32;
// NOTE: an A row's pitch is kSegK + 32 elements = 68 16-byte units, 4 mod 8: the 8 lanes of a
// 16-byte shared-load phase (rows g, g+1 x t = 0..3) touch 8 different 16-byte bank groups.
constexpr int kPitchA = kSegK + 32;
static_assert(((kPitchA * 2 / 16) % 8) == 4, "conflict-free A reads");

template <int kMTiles>
constexpr int kBufElems = kMTiles * 16 * kPitchA;  // one A segment: (kMTiles * 16, kPitchA)
template <int kMTiles>
constexpr int kABytes = 2 * kBufElems<kMTiles> * 2;  // two A segments, bf16/f16
// B's ring: a stage is one iteration of every warp (8 warps x 8 KB); as many stages as fit
// beside A in the 227 KB an SM gives one block: 3 at M <= 16 (192 KB), 2 at M <= 32.
constexpr int kStageBytes = kWarps * 16 * 32 * 16;
constexpr int kMaxSmem = 227 * 1024;
template <int kMTiles>
constexpr int kRingStages = (kMaxSmem - kABytes<kMTiles>) / kStageBytes;
template <int kMTiles>
constexpr int kSmemBytes = kABytes<kMTiles> + kRingStages<kMTiles> * kStageBytes;
static_assert(kRingStages<1> == 3 && kRingStages<2> == 2, "the ring's depth");
// The CTA's f32 partial tile reuses the same bytes for the cluster reduction afterwards.
static_assert(kSmemBytes<1> >= 16 * Tile<4>::kBlockN * 4, "the f32 partial tile fits");
static_assert(16 * kSegK / 8 % kThreads == 0, "whole 16-byte A chunks per thread");

__device__ __forceinline__ uint4 lds128(const void* p) { return *static_cast<const uint4*>(p); }

// 8 elements of a row (K contiguous) from element k on; zeros past kend. Fast path one 16-byte
// streaming load (row 16-byte aligned, k a multiple of 8: supports() checks lda and ldb).
template <class T>
__device__ __forceinline__ uint4 load_b_chunk(const T* row, int64_t k, int64_t kend) {
  if (k + 8 <= kend) return __ldcs(reinterpret_cast<const uint4*>(row + k));
  const unsigned short* h = reinterpret_cast<const unsigned short*>(row + k);
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t lo = k + 2 * i < kend ? h[2 * i] : 0u, hi = k + 2 * i + 1 < kend ? h[2 * i + 1] : 0u;
    w[i] = lo | hi << 16;
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// One CTA of 8 warps per SM: its shared memory (A's two segments and B's ring) is the SM's.
template <class T, int kMTiles, class Shape>
__global__ void __launch_bounds__(kThreads, 1) gemm_v17_kernel(const GemmArgs g, int64_t k_per_rank) {
  namespace cg = cooperative_groups;
  constexpr int kNTiles = Shape::kNTiles, kSteps = Shape::kSteps, kIterK = Shape::kIterK, kBlockN = Shape::kBlockN;
  constexpr int kItersPerSeg = kSegK / kIterK;
  constexpr int kStages = kRingStages<kMTiles>;
  constexpr int kChunksA = kMTiles * 16 * kSegK / 8 / kThreads;  // A's 16-byte chunks per thread per segment
  extern __shared__ __align__(16) unsigned char smem[];
  T* as = reinterpret_cast<T*>(smem);  // two (kMTiles * 16, kPitchA) A segments
  uint4* ring = reinterpret_cast<uint4*>(smem + kABytes<kMTiles>);  // (stage, warp, row, chunk)
  float* red = reinterpret_cast<float*>(smem);  // (kMTiles * 16, kBlockN) f32 partial tile, at the end
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, gq = lane / 4, tq = lane % 4;
  const int64_t bi = blockIdx.z, n0 = int64_t(blockIdx.x) * kBlockN;
  const int64_t kbeg = std::min<int64_t>(int64_t(blockIdx.y) * k_per_rank, g.k);
  const int64_t kend = std::min<int64_t>(kbeg + k_per_rank, g.k);
  const T* a = static_cast<const T*>(g.a) + bi * g.batch_stride_a;
  const T* b = static_cast<const T*>(g.b) + bi * g.batch_stride_b;
  const int total = static_cast<int>((kend - kbeg + kIterK - 1) / kIterK);
  const int nseg = (total + kItersPerSeg - 1) / kItersPerSeg;

  // The warp's B tile of an iteration, in its ring slot: kNTiles * 8 rows (columns of C) x
  // kIterK k, a row's 16-byte chunk c stored at c ^ 4 in odd rows, so that the 8 lanes of a
  // 16-byte shared-load phase (rows g, g + 1, chunks 4j..4j+3) hit 32 different banks.
  constexpr int kRows = kNTiles * 8, kRowChunks = kIterK / 8;  // 32 x 16 or 16 x 32 chunks
  constexpr int kRowsPerCopy = 32 / kRowChunks;                  // rows one warp-wide copy covers
  const int64_t wrow0 = n0 + warp * kRows;                       // the warp's first B row
  auto chunk_at = [&](int stage, int row, int c) {
    return ring + (stage * kWarps + warp) * (kRows * kRowChunks) + row * kRowChunks + (c ^ ((row & 1) * 4));
  };

  // Iteration `it`: the warp copies its tile (k = kbeg + kIterK it ..) into stage it % kStages
  // by cp.async, each copy instruction kRowsPerCopy whole row segments (256-512 contiguous bytes
  // per row, as a TMA box would read them). Rows past N read row N-1 (their results are dropped
  // by the epilogue's bounds check); chunks past K are zero (a partial chunk goes through
  // registers: a short cp.async still counts as a 16-byte read for memcheck). One commit per
  // call, so the group count stays uniform at the tail.
  // NOTE: lane (g, t) copying its own fragment (16 bytes at k 8t of rows g..: 64 contiguous
  // bytes per row per instruction), the previous form, measured 43.8 us at 16x8192x8192 (0.82x
  // cuBLAS) with this ring, 42.1 with register buffers.
  auto issue_b = [&](int it) {
    if (it < total) {
      const int stage = it % kStages;
      const int c = lane % kRowChunks;
      const int64_t k = kbeg + int64_t(it) * kIterK + 8 * c;
#pragma unroll
      for (int i = 0; i < kRows / kRowsPerCopy; ++i) {
        const int row = i * kRowsPerCopy + lane / kRowChunks;
        const T* src = b + std::min<int64_t>(wrow0 + row, g.n - 1) * g.ldb;
        uint4* dst = chunk_at(stage, row, c);
        if (k + 8 <= kend) ptx::cp_async_16(dst, src + k, 16);
        else if (k >= kend) ptx::cp_async_16(dst, b, 0);
        else *dst = load_b_chunk(src, k, kend);
      }
    }
    ptx::cp_async_commit();
  };

  // A's segment s (rows 0..16 kMTiles-1, k from kbeg + s kSegK) goes global -> registers during
  // segment s - 1 and registers -> shared memory at its end (zeros past M and K), so A never
  // joins B's cp.async groups and the ring never drains at a segment boundary.
  uint4 areg[kChunksA];
  auto load_a = [&](int seg) {
    const int64_t k0 = kbeg + int64_t(seg) * kSegK;
#pragma unroll
    for (int i = 0; i < kChunksA; ++i) {
      const int c = tid + i * kThreads, row = c / (kSegK / 8), col = (c % (kSegK / 8)) * 8;
      const int64_t left = row < g.m ? kend - (k0 + col) : 0;
      if (left >= 8) areg[i] = *reinterpret_cast<const uint4*>(a + row * g.lda + k0 + col);
      else areg[i] = left > 0 ? load_b_chunk(a + row * g.lda, k0 + col, kend) : make_uint4(0, 0, 0, 0);
    }
  };
  auto store_a = [&](int seg) {
    T* buf = as + (seg & 1) * kBufElems<kMTiles>;
#pragma unroll
    for (int i = 0; i < kChunksA; ++i) {
      const int c = tid + i * kThreads, row = c / (kSegK / 8), col = (c % (kSegK / 8)) * 8;
      *reinterpret_cast<uint4*>(buf + row * kPitchA + col) = areg[i];
    }
  };

  float acc[kMTiles][kNTiles][4] = {};  // (m16 tile, n8 tile, C fragment) f32
  auto compute = [&](int it) {
    const int stage = it % kStages;
    const T* seg = as + ((it / kItersPerSeg) & 1) * kBufElems<kMTiles>;
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
      const int kk = (it % kItersPerSeg) * kIterK + j * kStepK + 8 * tq;  // inside the smem segment
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const uint4 r = lds128(seg + (mt * 16 + gq) * kPitchA + kk);      // row g
        const uint4 q = lds128(seg + (mt * 16 + gq + 8) * kPitchA + kk);  // row g + 8
        const uint32_t a0[4] = {r.x, q.x, r.y, q.y}, a1[4] = {r.z, q.z, r.w, q.w};  // k16 steps 0, 1
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          const uint4 f = *chunk_at(stage, nt * 8 + gq, 4 * j + tq);
          const uint32_t b0[2] = {f.x, f.y}, b1[2] = {f.z, f.w};
          ptx::mma_m16n8k16<T>(acc[mt][nt], a0, b0);
          ptx::mma_m16n8k16<T>(acc[mt][nt], a1, b1);
        }
      }
    }
  };

  for (int s = 0; s < kStages - 1; ++s) issue_b(s);  // B first: its latency covers A's
  if (nseg > 0) {
    load_a(0);
    store_a(0);
  }
  __syncthreads();
  if (nseg > 1) load_a(1);
  for (int it = 0; it < total; ++it) {
    __syncwarp();  // every lane is done reading stage (it - 1) % kStages, which this refills
    issue_b(it + kStages - 1);
    ptx::cp_async_wait<kStages - 1>();  // this lane's copies for iteration `it` have landed,
    __syncwarp();                       // and so have the other lanes' (the warp reads them)
    compute(it);
    if ((it + 1) % kItersPerSeg == 0 && it + 1 < total) {
      // End of segment s = it / kItersPerSeg: A(s + 1) goes into the buffer segment s - 1 used,
      // which every warp left before the previous barrier; this barrier publishes it.
      const int seg = (it + 1) / kItersPerSeg;
      store_a(seg);
      __syncthreads();
      if (seg + 1 < nseg) load_a(seg + 1);
    }
  }
  ptx::cp_async_wait<0>();  // the tail's empty groups

  // Split-K: each CTA leaves its partial tile in its own shared memory; after the cluster
  // barrier, rank r sums a 1/S slice of the tile over all S CTAs (rank order: deterministic)
  // and runs the epilogue on it.
  __syncthreads();  // A's last reads are done before the partial tile overwrites it
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const ptx::RowCol c = ptx::mma_c_element(lane, e);
        red[(mt * 16 + c.row) * kBlockN + warp * kNTiles * 8 + nt * 8 + c.col] = acc[mt][nt][e];
      }
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every CTA's partial tile is written
  const unsigned ranks = cluster.num_blocks(), rank = cluster.block_rank();
  constexpr int kElems = kMTiles * 16 * kBlockN;
  const int lo = static_cast<int>(kElems * rank / ranks), hi = static_cast<int>(kElems * (rank + 1) / ranks);
  for (int e = lo + tid; e < hi; e += kThreads) {
    const int64_t row = e / kBlockN, col = n0 + e % kBlockN;
    if (row >= g.m || col >= g.n) continue;
    // All S remote loads issued back to back (unrolled over the largest cluster), then summed.
    float part[kMaxCluster];
#pragma unroll
    for (int q = 0; q < kMaxCluster; ++q) part[q] = q < int(ranks) ? *cluster.map_shared_rank(red + e, q) : 0.0f;
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < kMaxCluster; ++q) sum += part[q];
    gemm_impl::epilogue_store(g, sum, bi, row, col);
  }
  cluster.sync();  // no CTA exits (freeing its shared memory) while peers still read it
}

// How many clusters of s CTAs the device holds at once, for s = 1..kMaxCluster: a cluster sits
// inside one GPC, so a GPC strands (its SM count mod s) SMs — on the H200 30 clusters of 4 fit,
// not 33 (docs/hardware/h200.md, section 7).
template <class Kernel>
std::array<int, kMaxCluster + 1> active_clusters(Kernel kernel, int smem) {
  std::array<int, kMaxCluster + 1> active{};
  for (int s = 1; s <= kMaxCluster; ++s) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(1, s, 1);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1, attr.val.clusterDim.y = s, attr.val.clusterDim.z = 1;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    HK_CHECK_CUDA(cudaOccupancyMaxActiveClusters(&active[s], kernel, &cfg));
    active[s] = std::max(active[s], 1);
  }
  return active;
}

// A launch shape: the tile (n8 tiles per warp) and the cluster size s along K, with its cost:
// the waves of clusters times one CTA's time, its share of K in iterations plus kCtaOverhead.
// A CTA's rate is capped per SM (~17 B/clk of HBM reads: docs/hardware/h200.md), so time follows
// a CTA's bytes, and clusters beyond what the GPCs hold at once run as further waves.
// NOTE: measured on the H200 (2026-11-29) at 8x28672x4096 bf16, with the cost counting
// iterations only: the plan was 128-column CTAs in clusters of 8, 14 waves of CTAs that stream 2
// iterations each, 116.8 us (0.52x cuBLAS); one wave of 32-iteration CTAs ran 72.9 us, two waves
// of 16 (s = 2) 83.7 us and four of 8 (s = 4) 97.1 us: ~5 iterations' worth per CTA of fill,
// A's first segment, the reduction and the epilogue, paid again in each wave.
constexpr int64_t kCtaOverhead = 4;  // iterations
struct Plan {
  int n_tiles = 4, s = 1;
  int64_t cost = INT64_MAX;
};

template <class Shape>
void consider(const GemmArgs& g, const std::array<int, kMaxCluster + 1>& active, Plan& best) {
  const int64_t tiles = ceil_div(g.n, Shape::kBlockN) * g.batch, iters = ceil_div(g.k, Shape::kIterK);
  for (int s = 1; s <= kMaxCluster && s <= iters; ++s) {
    const int64_t cost =
        ceil_div(tiles, active[s]) * (ceil_div(iters, s) + kCtaOverhead) * Shape::kIterK * Shape::kBlockN;
    if (cost < best.cost) best = {Shape::kNTiles, s, cost};  // ties: the wider tile, the smaller s
  }
}

template <class T, int kMTiles, class Shape>
void launch_shape(const GemmArgs& g, int s, cudaStream_t stream) {
  auto kernel = gemm_v17_kernel<T, kMTiles, Shape>;
  const int64_t k_per_rank = ceil_div(ceil_div(g.k, s), Shape::kIterK) * Shape::kIterK;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(gemm_impl::grid_dim(ceil_div(g.n, Shape::kBlockN), "N"), s, gemm_impl::grid_dim(g.batch, "batch"));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmemBytes<kMTiles>;
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 1, attr.val.clusterDim.y = s, attr.val.clusterDim.z = 1;
  cfg.attrs = &attr, cfg.numAttrs = 1;
  HK_CHECK_CUDA(cudaLaunchKernelEx(&cfg, kernel, g, k_per_rank));
  HK_CHECK_LAUNCH("gemm_v17_kernel");
}

// 16x8192x8192 on the H200: 256-column CTAs give 32 tiles, and s = 4 needs 32 clusters of 4
// where 30 fit (measured 55.2 us), s = 3 one wave of 96 CTAs (42.8 us); 128-column CTAs give 64
// tiles, and s = 2 one wave of 128 CTAs streaming 2/3 of the bytes each.
template <class T, int kMTiles>
void launch_tiles(const GemmArgs& g, cudaStream_t stream) {
  using Wide = Tile<4>;
  using Narrow = Tile<2>;
  auto wide = gemm_v17_kernel<T, kMTiles, Wide>;
  auto narrow = gemm_v17_kernel<T, kMTiles, Narrow>;
  allow_dynamic_smem(wide, kSmemBytes<kMTiles>);
  allow_dynamic_smem(narrow, kSmemBytes<kMTiles>);
  // Measured once per instantiation, after the opt-in.
  static const std::array<std::array<int, kMaxCluster + 1>, 2> active = {
      {active_clusters(wide, kSmemBytes<kMTiles>), active_clusters(narrow, kSmemBytes<kMTiles>)}};
  Plan plan;
  consider<Wide>(g, active[0], plan);
  consider<Narrow>(g, active[1], plan);
  if (plan.n_tiles == Wide::kNTiles) launch_shape<T, kMTiles, Wide>(g, plan.s, stream);
  else launch_shape<T, kMTiles, Narrow>(g, plan.s, stream);
}

void gemm_v17_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::dispatch_input(g.in_dtype, "v17_skinny_m_splitk", [&](auto t) {
    using T = decltype(t);
    if (g.m <= 16) launch_tiles<T, 1>(g, stream);
    else launch_tiles<T, 2>(g, stream);
  });
}

std::string gemm_v17_supports(const GemmProblem& p) {
  std::string why = gemm_cp_async_supports(p, kMaxM);
  if (!why.empty()) return why;
  if (p.a_col || !p.b_col)
    return "gemm: v17 serves the \"nt\" layout (row-major A, column-major B: a [N, K] weight), got \"" + p.layout() +
           "\"";
  if (p.m > kMaxM)
    return "gemm: v17 serves decode shapes (M <= " + std::to_string(kMaxM) + "), got M=" + std::to_string(p.m);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v17_skinny_m_splitk",
                    "decode-shape default (M <= 32, nt): B streamed in whole row segments through a cp.async ring "
                    "into mma.sync fragments, split-K over a cluster reduced through DSMEM",
                    90, kFlagProduction, gemm_v17_supports, gemm_v17_launch);

}  // namespace hk::gemm_v17_skinny_m_splitk
