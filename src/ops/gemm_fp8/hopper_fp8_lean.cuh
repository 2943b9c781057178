// gemm_fp8/hopper_fp8_lean.cuh — v08's kernel: hopper_fp8.cuh's CTA and k-block schedule (a
// producer warpgroup, two consumer warpgroups of 64 rows each, the 6-slot ring of 128 x 128 x 128
// k-blocks, f32 promotion per k-block, k-block kb + 1's wgmma in flight while kb is promoted) with
// the consumers' instruction stream cut down to what the tensor cores need.
//
// Why. At FP8 rate one m64n128k32 wgmma keeps an SM's tensor cores busy for 64 cycles (4096
// MACs per cycle), so a k-block of both warpgroups is 512 cycles, and each of the SM's four
// schedulers, which holds one warp of each consumer warpgroup, has 512 issue slots for both
// warps' instructions. In v07's SASS (cuobjdump of the ci build, e4m3 -> bf16, per-tensor) a warp
// spends 295 instructions per two k-blocks — 128 promotion FADDs, the rest mostly shared-memory
// descriptors rebuilt per wgmma (mask, shift, or, then R2UR into uniform registers) and the ring
// position divided by 6 — and its epilogue is ~2,900 instructions of code per output dtype,
// started once the warpgroup's last wgmma has retired. Here:
//   - descriptors: stage 0's for A (this warpgroup's 64 rows) and B are built once, from a
//     warpgroup index that ptxas sees as warp-uniform (read through a shuffle), so they live in
//     uniform registers; a k-block adds stage x 1024 and a k32 step 2 to the address field
//     (16-byte units). The field cannot carry: every address it names lies inside shared memory.
//   - the ring position is a PipelineCursor (stage index and phase bit), not a count divided by 6.
//   - the epilogue goes through shared memory and TMA stores (two 64-row x 128-byte buffers per
//     warpgroup in the 128-byte swizzle, as gemm's v12), with D's dtype a template parameter and
//     the per-tensor scale product loaded once per CTA;
//   - the k-blocks of all of a CTA's tiles are one sequence: the next tile's first k-block is
//     issued before this tile's last one is promoted and stored, so one wgmma group of the
//     warpgroup is outstanding during the epilogue (whether that hides the epilogue is for the
//     GPU to show).
// Static result (same build): 230 instructions per two k-blocks (128 FADDs, no R2UR) and 356 on
// the bf16 epilogue's executed path.
// Shared memory: 192 KB of ring, 32 KB of output buffers, the barriers: 225 KB of the 227.
#pragma once

#include "common/ptx/named_barrier.cuh"
#include "common/vec.cuh"
#include "gemm_fp8/hopper_fp8.cuh"

namespace hk::gemm_fp8_impl::lean {

constexpr int kCChunkBytes = 64 * 128;                  // (64 rows, 128 bytes): one TMA store box
constexpr int kCBytes = kConsumers * 2 * kCChunkBytes;  // two buffers per consumer warpgroup
constexpr int kSmemBytes = 1024 + kStages * kStageBytes + kCBytes + PipelineRing<kStages>::kBarrierBytes;
static_assert(kSmemBytes <= 232448, "227 KB of shared memory per block on sm_90");

using Cursor = PipelineCursor<kStages>;

// What a consumer keeps of a k-block it issued until it promotes it.
struct Issued {
  Cursor pos;          // its ring slot, released once its wgmma group has retired
  float s0, s1;        // block-wise: its scales for the thread's two rows (else 1)
  int32_t m_tile, n0;  // its tile: the warpgroup's first row and the tile's first column
  bool last;           // the tile's last k-block: its promotion completes the sums
};

// The warpgroup's 64 x 128 sums into D through shared memory: d = acc * s + bias, rounded once to
// OutT, where s is `alpha` (per-tensor: sa * sb; block-wise: 1) or, kRowScales, sa[row] * sb[col].
// Chunks of 64 rows x 128 bytes (64 columns of a 16-bit D, 32 of an f32 one) alternate between
// the warpgroup's two buffers; one thread stores each with TMA while the next is written. Rows and
// columns past M and N are written to shared memory like the rest and clipped by TMA.
// NOTE: before a chunk's writes, the store that last read its buffer must be done: "at most one
// group still reading" says so only when the previous chunk stored (gemm's epilogue_tma_store has
// the same rule and the failure it prevents).
template <class OutT, bool kRowScales>
__device__ __forceinline__ void store_tile_tma(const GemmFp8Args& g, const float (&acc)[kBlockN / 2], float alpha,
                                               uint8_t* cbuf, const CUtensorMap* tma_d, int32_t m_tile, int32_t n0,
                                               int cw, int t) {
  constexpr int kE = static_cast<int>(sizeof(OutT));
  constexpr int kCols = 128 / kE;  // columns per chunk
  constexpr int kJPer = kCols / 8;  // accumulator column-octets per chunk
  const int w = t / 32, l = t % 32, q = l % 4;
  // NOTE: no branch here depends on the thread: reads past M or N load a clamped address and
  // select 0, and thread 0's TMA store is a predicated instruction (tma_store_3d_if). A
  // thread-dependent branch inside the k-block loop would cost the loop its uniform registers.
  const OutT* bias = static_cast<const OutT*>(g.bias);
  float s_row[2] = {alpha, alpha};
  if constexpr (kRowScales) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = int64_t(m_tile) + w * 16 + l / 4 + 8 * h;
      const float v = __ldg(g.sa + std::min<int64_t>(row, g.m - 1) * g.sa_s0);
      s_row[h] = row < g.m ? v : 0.0f;
    }
  }
  // Column `col`'s factor in `base` (stride `s`) and its bias, 0 past N.
  auto col_value = [&](const float* base, int64_t s, int64_t col) {
    const float v = __ldg(base + std::min<int64_t>(col, g.n - 1) * s);
    return col < g.n ? v : 0.0f;
  };
  auto col_bias = [&](int64_t col) {
    const float v = to_f32(__ldg(bias + std::min<int64_t>(col, g.n - 1)));
    return col < g.n ? v : 0.0f;
  };
  bool stored = false;  // whether the previous chunk stored (and so committed a group)
#pragma unroll
  for (int c = 0; c < kBlockN / kCols; ++c) {
    uint8_t* buf = cbuf + (c & 1) * kCChunkBytes;
    // Every thread waits on its own bulk groups (only thread 0 has any): see the NOTE above.
    stored ? ptx::bulk_wait_group_read<1>() : ptx::bulk_wait_group_read<0>();
    ptx::named_barrier_sync(1 + cw, 128);
#pragma unroll
    for (int jl = 0; jl < kJPer; ++jl) {
      const int j = c * kJPer + jl;
      // The pair's column factors (row-wise sb) and bias: L1/L2 hits after the first tile.
      const int64_t col = int64_t(n0) + c * kCols + jl * 8 + 2 * q;
      float2 s_col = make_float2(1.0f, 1.0f), b_col = make_float2(0.0f, 0.0f);
      if constexpr (kRowScales) s_col = make_float2(col_value(g.sb, g.sb_s0, col), col_value(g.sb, g.sb_s0, col + 1));
      if (bias) b_col = make_float2(col_bias(col), col_bias(col + 1));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t r = w * 16 + l / 4 + 8 * h, colc = jl * 8 + 2 * q;
        float v0 = acc[4 * j + 2 * h] * s_row[h], v1 = acc[4 * j + 2 * h + 1] * s_row[h];
        if constexpr (kRowScales) v0 *= s_col.x, v1 *= s_col.y;
        if (bias) v0 += b_col.x, v1 += b_col.y;
        const uint32_t off = ptx::swizzle_128b_offset(r, colc * kE);
        if constexpr (kE == 4) *reinterpret_cast<float2*>(buf + off) = make_float2(v0, v1);
        else if constexpr (std::is_same_v<OutT, __half>) *reinterpret_cast<__half2*>(buf + off) = __floats2half2_rn(v0, v1);
        else *reinterpret_cast<__nv_bfloat162*>(buf + off) = __floats2bfloat162_rn(v0, v1);
      }
    }
    ptx::fence_proxy_async_smem();  // generic-proxy writes -> visible to the TMA engine
    ptx::named_barrier_sync(1 + cw, 128);
    stored = m_tile < g.m && n0 + c * kCols < g.n;
    if (stored) {
      ptx::tma_store_3d_if(t == 0, tma_d, buf, n0 + c * kCols, m_tile, 0);
      ptx::bulk_commit_group();  // an empty group in the other threads
    }
  }
}

// TA, TB: __nv_fp8_e4m3 or __nv_fp8_e5m2; kBlockScaled: block-wise scales applied at promotion
// (else per-tensor / row-wise scales in the epilogue); OutT: D's type. A persistent grid: CTA c
// computes tiles c, c + G, c + 2G, ... of the grouped order (G CTAs in the grid).
template <class TA, class TB, bool kBlockScaled, class OutT>
__device__ __forceinline__ void wgmma_fp8_lean_body(const CUtensorMap* tma_a, const CUtensorMap* tma_b,
                                                    const CUtensorMap* tma_d, const GemmFp8Args& g) {
  extern __shared__ uint8_t hk_gemm_fp8_smem[];
  // NOTE: 128B-swizzled atoms must start 1024-byte aligned (descriptor base offset 0; the
  // output buffers' swizzle pattern is TMA's, taken from the address bits).
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(hk_gemm_fp8_smem));
  uint8_t* smem = hk_gemm_fp8_smem + ((1024 - (raw & 1023)) & 1023);
  uint8_t* sa_tiles = smem;                             // (kStages, 128 M x 128 K) fp8
  uint8_t* sb_tiles = sa_tiles + kStages * kTileBytes;  // (kStages, 128 N x 128 K) fp8
  uint8_t* cbufs = sb_tiles + kStages * kTileBytes;     // (consumer, 2 buffers, 64 x 128 bytes)
  const PipelineRing<kStages> ring = PipelineRing<kStages>::at(cbufs + kCBytes);

  // The warpgroup index, warp-uniform for ptxas (so what derives from it can live in uniform
  // registers): threadIdx.x / 128 is the same in every lane, but the compiler cannot know.
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0), t = threadIdx.x % 128;
  const int64_t m_blocks = (g.m + kBlockM - 1) / kBlockM;
  const auto sched = sched::TileScheduler::make(m_blocks, (g.n + kBlockN - 1) / kBlockN, 1, 1, kGroup);
  const int64_t units = sched.units();
  const int k_blocks = static_cast<int>((g.k + kBlockK - 1) / kBlockK);

  if (threadIdx.x == 0) {
    ring.init(kConsumers * 4);  // empty[]: one release per consumer warp
    ptx::prefetch_tensor_map(tma_a);
    ptx::prefetch_tensor_map(tma_b);
    ptx::prefetch_tensor_map(tma_d);
  }
  __syncthreads();

  if (wg == 0) {
    // ---- producer: one thread issues every TMA load ----
    ptx::setmaxnreg_dec<40>();
    auto whole_tile = [&](int64_t u, int& kb0, int& kb1) {
      kb0 = 0, kb1 = k_blocks;
      return sched.tile(u, 0);
    };
    if (t == 0)
      produce_k_blocks<1>(tma_a, tma_b, g, sa_tiles, sb_tiles, ring, blockIdx.x, units, gridDim.x, m_blocks, 0,
                          whole_tile);
    return;
  }

  // ---- consumers: the CTA's k-blocks as one sequence, each promoted while the next runs ----
  ptx::setmaxnreg_inc<232>();
  const int cw = wg - 1;  // 64-row half of the tile
  const int w = t / 32, l = t % 32;
  uint8_t* cbuf = cbufs + cw * 2 * kCChunkBytes;
  // The descriptors' high words (stride, swizzle mode) are constants; their low words (address
  // and leading offset) are 32-bit sums, so that no 64-bit arithmetic runs per wgmma.
  const uint64_t desc_a0 =
      ptx::make_smem_desc_sw128(static_cast<uint32_t>(__cvta_generic_to_shared(sa_tiles)) + cw * 8192, 16, 1024);
  const uint64_t desc_b0 = ptx::make_smem_desc_sw128(static_cast<uint32_t>(__cvta_generic_to_shared(sb_tiles)), 16, 1024);
  const uint32_t lo_a0 = static_cast<uint32_t>(desc_a0), lo_b0 = static_cast<uint32_t>(desc_b0);
  constexpr uint64_t kDescHi = ptx::make_smem_desc_sw128(0, 0, 1024) >> 32 << 32;
  static_assert((ptx::make_smem_desc_sw128(0x400, 16, 1024) >> 32 << 32) == kDescHi, "the high word is fixed");
  constexpr uint32_t kStageStep = kTileBytes >> 4, kKStep = 32 >> 4;  // descriptor address units
  uint32_t stage_off = 0;  // the walker's slot, in descriptor address units (pos.stage() * kStageStep)
  float alpha = 1.0f;
  if constexpr (!kBlockScaled)
    if (g.scaling == Fp8Scaling::kTensor) alpha = __ldg(g.sa) * __ldg(g.sb);
  const bool row_scales = g.scaling == Fp8Scaling::kRow;

  // The walker: unit u's tile tc, k-block kb.
  int64_t u = blockIdx.x;
  if (u >= units) return;
  sched::TileCoord tc = sched.tile(u, 0);
  int kb = 0;
  // Block-wise: this thread's two rows of sa (rows past M read as 0: never stored) and the
  // tile's row of sb.
  const float *sa_r0 = nullptr, *sa_r1 = nullptr, *sb_n = nullptr;
  bool r0_in = false, r1_in = false;
  auto enter_tile = [&]() {
    if constexpr (kBlockScaled) {
      const int64_t r0 = tc.m_block * kBlockM + cw * 64 + w * 16 + l / 4, r1 = r0 + 8;
      r0_in = r0 < g.m, r1_in = r1 < g.m;
      sa_r0 = g.sa + (r0_in ? r0 : 0) * g.sa_s0;
      sa_r1 = g.sa + (r1_in ? r1 : 0) * g.sa_s0;
      sb_n = g.sb + tc.n_block * g.sb_s0;
    }
  };
  enter_tile();
  // Moves the walker to the next k-block; false when the CTA has none left.
  auto advance = [&]() -> bool {
    if (++kb < k_blocks) return true;
    kb = 0, u += gridDim.x;
    if (u >= units) return false;
    tc = sched.tile(u, 0);
    enter_tile();
    return true;
  };

  Cursor pos;
  float acc[kBlockN / 2];   // (64, 128) f32 running sums, fragment layout in wgmma.cuh
  float blk[kBlockN / 2];   // (64, 128) one k-block's wgmma accumulators
  float blk2[kBlockN / 2];  // the next k-block's, alternating with blk
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) acc[i] = 0.0f;

  // The walker's k-block: wait for its slot, issue its four wgmma into d, fetch its block scales.
  auto issue = [&](float (&d)[kBlockN / 2], Issued& rec) {
    ring.consumer_wait(pos);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockK / 32; ++kk)
      ptx::wgmma_m64n128k32_fp8<TA, TB>(d, kDescHi | (lo_a0 + stage_off + kk * kKStep),
                                        kDescHi | (lo_b0 + stage_off + kk * kKStep), kk > 0 ? 1 : 0);
    ptx::wgmma_commit_group();
    rec.pos = pos;
    rec.m_tile = static_cast<int32_t>(tc.m_block * kBlockM + cw * 64);
    rec.n0 = static_cast<int32_t>(tc.n_block * kBlockN);
    rec.last = kb == k_blocks - 1;
    rec.s0 = 1.0f, rec.s1 = 1.0f;
    if constexpr (kBlockScaled) {
      const float sbv = __ldg(sb_n + kb * g.sb_s1);
      rec.s0 = (r0_in ? __ldg(sa_r0 + kb * g.sa_s1) : 0.0f) * sbv;
      rec.s1 = (r1_in ? __ldg(sa_r1 + kb * g.sa_s1) : 0.0f) * sbv;
    }
    stage_off = pos.stage() == kStages - 1 ? 0 : stage_off + kStageStep;
    ++pos;
  };
  // After the wait that retired d's group: hand the slot back, promote d into acc, and after
  // the tile's last k-block store the tile.
  auto retire = [&](float (&d)[kBlockN / 2], const Issued& rec) {
    ptx::wgmma_fence_operands(d);
    if (l == 0) ring.consumer_release(rec.pos);  // this warp's reads of the slot are retired
#pragma unroll
    for (int i = 0; i < kBlockN / 2; ++i) {
      if constexpr (kBlockScaled) acc[i] = fmaf(d[i], (i & 2) ? rec.s1 : rec.s0, acc[i]);  // d[4j + 2h + c]: row h
      else acc[i] += d[i];
    }
    if (rec.last) {
      if constexpr (!kBlockScaled) {
        if (row_scales) store_tile_tma<OutT, true>(g, acc, 1.0f, cbuf, tma_d, rec.m_tile, rec.n0, cw, t);
        else store_tile_tma<OutT, false>(g, acc, alpha, cbuf, tma_d, rec.m_tile, rec.n0, cw, t);
      } else {
        store_tile_tma<OutT, false>(g, acc, 1.0f, cbuf, tma_d, rec.m_tile, rec.n0, cw, t);
      }
#pragma unroll
      for (int i = 0; i < kBlockN / 2; ++i) acc[i] = 0.0f;
    }
  };

  // Two accumulator sets alternate (unrolled by two so that their registers stay static).
  // NOTE: every path from an issue to the retire of the group before it is straight-line code:
  // with `if (more) issue; wait<more ? 1 : 0>; retire` ptxas merges the paths, cannot tell which
  // groups are still in flight, and serialises every wgmma (ptxas C7514).
  Issued ra, rb;
  issue(blk, ra);
  for (;;) {
    if (!advance()) {
      ptx::wgmma_wait_group<0>();
      retire(blk, ra);
      break;
    }
    issue(blk2, rb);
    ptx::wgmma_wait_group<1>();
    retire(blk, ra);
    if (!advance()) {
      ptx::wgmma_wait_group<0>();
      retire(blk2, rb);
      break;
    }
    issue(blk, ra);
    ptx::wgmma_wait_group<1>();
    retire(blk2, rb);
  }
  ptx::bulk_wait_group_all();  // shared memory must outlive the stores (thread 0's; the rest have none)
}

// ---- host side ----

// D [M, N] with `ldd` elements between rows, as a rank-3 map written in (128 bytes, 64 rows)
// boxes with the 128-byte swizzle.
inline CUtensorMap output_map(const GemmFp8Args& g) {
  const int64_t e = dtype_bits(g.out_dtype) / 8;
  const CUtensorMapDataType type = g.out_dtype == DType::kF32   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : g.out_dtype == DType::kF16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const uint64_t dims[3] = {uint64_t(g.n), uint64_t(g.m), 1};
  const uint64_t strides[2] = {uint64_t(g.ldd * e), uint64_t(g.ldd * e * g.m)};
  const uint32_t box[3] = {static_cast<uint32_t>(128 / e), 64, 1};
  return ptx::make_tensor_map_3d(g.d, type, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

// A persistent grid of at most one CTA per SM and per tile.
template <class Kernel>
void launch(Kernel kernel, const GemmFp8Args& g, const char* name, cudaStream_t stream) {
  const int max_units = fp8_max_units<1>(kernel, kSmemBytes);
  const CUtensorMap ma = fp8_matrix_map(g.a, g.m, g.k, g.a_s0);
  const CUtensorMap mb = fp8_matrix_map(g.b, g.n, g.k, g.b_s0);
  const CUtensorMap md = output_map(g);
  const int64_t units = ceil_div(g.m, int64_t(kBlockM)) * ceil_div(g.n, int64_t(kBlockN));
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(units, max_units));
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(ma, mb, md, g);
  HK_CHECK_LAUNCH(name);
}

}  // namespace hk::gemm_fp8_impl::lean
