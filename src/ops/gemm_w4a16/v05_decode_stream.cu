// gemm_w4a16/v05_decode_stream.cu
//
// Rung 5: the decode GEMV fed by bulk copies (M = 1, rows layout) — a ladder rung that records a
// measured negative result: slower than v02, so the dispatch does not use it.
// A persistent CTA per SM owns a contiguous range of weight rows, which in the rows layout is one
// contiguous byte range, and one producer thread streams it through an 8-slot shared-memory ring
// with `cp.async.bulk` copies of whole rows (16 KB per slot: 4 rows at K = 8192), so up to 128 KB
// per SM are in flight with no registers held; the CTA's scales and zero words arrive first, by
// two more bulk copies. Sixteen consumer warps take (row, 32-chunk segment) items: a lane reads
// 16 bytes of the slot (conflict-free), keeps its 32 values of x in f32 registers while its
// segment stays the same, and widens each pair of biased weights (the magic-number trick of
// w4a16.cuh without the scale: 128 + q in bf16 is 128 + q in f32 after one shift or mask) into
// four independent FMA chains; the zero point comes off the chunk's sum as (128 + z) * sum(x) and
// the scale multiplies it once. Each (row, segment) sum lands in its own shared-memory cell and a
// row's cells are added in a fixed order: bitwise deterministic.
// Measured (H200, 2026-12-03, bf16, g128): 29.4 us at 1x8192x8192 where v02 takes 20.7, 12.7
// against 9.3 at 4096^2 (an earlier form with eight consumer warps, x widened per word and one
// FMA chain took 47.8; with scale copies by the consumers and integer divisions per item, 34.5).
// ncu of that form: DRAM throughput 23%, 4.2 warps per scheduler with 1.1 eligible, stalls
// spread over fixed-latency dependencies (22%), the prologue's scale copies (17%, since moved to
// bulk copies), the CTA's end (10%) and issue (25%): the ring keeps HBM's requests in flight, but
// sixteen warps per SM cannot issue the dequantisation and FMAs fast enough to consume 4 TB/s.
// v02's 16 warps in four independent blocks do better; the ring's natural consumer is the
// tensor-core math of v04, whose main loop waits on its weight loads: the next step, not yet built.
// Needs: M = 1; rows layout; K a multiple of 32 with a row (K / 2 bytes) of at most 16 KB
// (K <= 32768); qweight and x's rows 16-byte aligned; the CTA's scales, zero words and sums fit in
// shared memory beside the ring.
// Run:   hk bench gemm_w4a16 --variant 'v02*,v05*' --shape 1x8192x8192
#include <algorithm>

#include "common/launch.cuh"
#include "common/pipeline.cuh"
#include "common/ptx/mbarrier.cuh"
#include "common/ptx/tma.cuh"
#include "gemm_w4a16/w4a16.cuh"

namespace hk::gemm_w4a16_v05_decode_stream {
namespace {

constexpr int kConsumerWarps = 16;
constexpr int kThreads = 32 * (kConsumerWarps + 1);  // + one producer warp
constexpr int kStages = 8;
constexpr int kWeightBytes = 16384;  // packed weights per slot (whole rows)
constexpr size_t kMaxSmem = 227 * 1024;

struct Layout {
  int rows_per_stage = 0;  // whole rows per slot
  int row_bytes = 0;
  int stage_bytes = 0;     // one slot: rows_per_stage rows of packed weights
  int segs = 0;            // 32-chunk segments of a row (a chunk: 16 bytes, 32 weights)
  int64_t rows_per_cta = 0;
  int grid = 0;
  size_t smem = 0;         // the ring, its barriers, the cells, the CTA's scales and zero words
};

Layout layout_of(const W4A16Problem& p, int sm_count) {
  Layout l;
  l.row_bytes = static_cast<int>(p.k / 2);
  l.rows_per_stage = std::max(1, kWeightBytes / std::max(1, l.row_bytes));
  l.stage_bytes = l.rows_per_stage * l.row_bytes;
  l.segs = static_cast<int>(ceil_div(p.k / 32, 32));
  l.grid = static_cast<int>(std::min<int64_t>(sm_count, std::max<int64_t>(1, p.n)));
  l.rows_per_cta = ceil_div(p.n, l.grid);
  l.grid = static_cast<int>(ceil_div(p.n, l.rows_per_cta));
  l.smem = 128 + size_t(kStages) * l.stage_bytes + PipelineRing<kStages>::kBarrierBytes + 16 +
           size_t(l.rows_per_cta) * (l.segs * sizeof(float) + p.groups() * dtype_bits(p.dtype) / 8 +
                                     (p.symmetric ? 0 : p.zero_words() * 4)) + 32;
  return l;
}

struct Params {
  int rows_per_stage, row_bytes, stage_bytes, segs;
  int64_t rows_per_cta;
  bool bulk_params;  // every CTA's scale and zero-word ranges are aligned whole 16-byte units
};

template <class T>
__global__ void __launch_bounds__(kThreads, 1) gemm_w4a16_v05_kernel(W4A16Args a, Params q) {
  extern __shared__ uint8_t hk_w4a16_v05_smem[];
  // Slots start 16-byte aligned (bulk copies); the barriers follow the slots.
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(hk_w4a16_v05_smem));
  uint8_t* slots = hk_w4a16_v05_smem + ((128 - (raw & 127)) & 127);
  const PipelineRing<kStages> ring = PipelineRing<kStages>::at(slots + size_t(kStages) * q.stage_bytes);
  uint64_t* params_bar = static_cast<uint64_t*>(ring.end());  // the CTA's scales and zero words have landed
  float* cells = reinterpret_cast<float*>(params_bar + 2);      // [rows_per_cta][segs]
  auto align16 = [](void* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 15) & ~uintptr_t(15));
  };
  uint32_t* zeros = reinterpret_cast<uint32_t*>(align16(cells + q.rows_per_cta * q.segs));  // [rows][zero_words]
  T* scales = reinterpret_cast<T*>(align16(zeros + (a.zeros ? q.rows_per_cta * a.zero_words : 0)));  // [rows][groups]
  using Pos = PipelineState<kStages, int>;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n_begin = int64_t(blockIdx.x) * q.rows_per_cta;
  const int64_t n_end = std::min<int64_t>(a.n, n_begin + q.rows_per_cta);
  const int rows = static_cast<int>(n_end - n_begin);
  const int stages = (rows + q.rows_per_stage - 1) / q.rows_per_stage;

  if (threadIdx.x == 0) {
    ring.init(kConsumerWarps);
    ptx::mbar_init(params_bar, 1);
    ptx::mbar_fence_init();
  }
  __syncthreads();

  if (warp == kConsumerWarps) {
    // ---- producer: one thread streams the CTA's rows, rows_per_stage at a time ----
    if (lane == 0) {
      const uint8_t* w = reinterpret_cast<const uint8_t*>(a.qweight);
      // The CTA's scales and zero words (a few KB) first, as two bulk copies when their byte
      // ranges are whole aligned 16-byte units; else the consumers copy them.
      if (q.bulk_params) {
        const uint32_t sb = uint32_t(rows) * uint32_t(a.groups) * sizeof(T);
        const uint32_t zb = a.zeros ? uint32_t(rows) * uint32_t(a.zero_words) * 4 : 0;
        ptx::mbar_arrive_expect_tx(params_bar, sb + zb);
        ptx::bulk_load(scales, static_cast<const T*>(a.scales) + n_begin * a.groups, sb, params_bar);
        if (zb) ptx::bulk_load(zeros, a.zeros + n_begin * a.zero_words, zb, params_bar);
      }
      Pos it;
      for (int j = 0; j < stages; ++j, ++it) {
        const int64_t r0 = n_begin + int64_t(j) * q.rows_per_stage;
        const int rc = static_cast<int>(std::min<int64_t>(q.rows_per_stage, n_end - r0));
        uint8_t* slot = slots + size_t(it.stage()) * q.stage_bytes;
        ring.producer_acquire(it);
        ring.producer_expect_tx(it, uint32_t(rc) * q.row_bytes);
        ptx::bulk_load(slot, w + r0 * q.row_bytes, uint32_t(rc) * q.row_bytes, ring.full_barrier(it));
      }
    }
  } else {
    // ---- consumers: warp item (row, segment); lane l takes chunk 32 seg + l of the row ----
    const T* x = static_cast<const T*>(a.x);
    const int chunks = static_cast<int>(a.k / 32);
    float xf[32];  // x[0, 32 c .. 32 c + 31] for this lane's chunk c of segment `xseg`, as f32
    float xsum = 0.f;  // their sum (bf16: the zero point's share of the chunk's dot product)
    int xseg = -1;
    if (q.bulk_params) {
      ptx::mbar_wait(params_bar, 0);
    } else {  // the CTA's scales and zero words copied element by element
      const T* gs = static_cast<const T*>(a.scales) + n_begin * a.groups;
      for (int64_t i = threadIdx.x; i < int64_t(rows) * a.groups; i += kConsumerWarps * 32) scales[i] = gs[i];
      if (a.zeros) {
        const int32_t* gz = a.zeros + n_begin * a.zero_words;
        for (int64_t i = threadIdx.x; i < int64_t(rows) * a.zero_words; i += kConsumerWarps * 32)
          zeros[i] = uint32_t(gz[i]);
      }
      asm volatile("bar.sync 1, %0;" ::"r"(kConsumerWarps * 32) : "memory");  // consumers only
    }
    // A warp's items (row, segment) advance by kConsumerWarps in row-major order: kept as a
    // (row, segment) pair that steps without a division.
    const int seg_step = kConsumerWarps % q.segs, row_step = kConsumerWarps / q.segs;
    int r = warp / q.segs, seg = warp % q.segs;  // the next item, counted over the whole CTA
    int zshift = 0;                              // this lane's chunk's group: scale and zero word offsets
    int64_t goff = 0, zoff = 0;
    Pos it;
    for (int j = 0; j < stages; ++j, ++it) {
      const int rc = std::min(q.rows_per_stage, rows - j * q.rows_per_stage);
      const uint8_t* slot = slots + size_t(it.stage()) * q.stage_bytes;
      ring.consumer_wait(it);
      const int r_end = j * q.rows_per_stage + rc;  // rows (CTA-relative) this slot holds end here
      for (; r < r_end; r += row_step, seg += seg_step, (seg >= q.segs ? (seg -= q.segs, ++r) : 0)) {
        const int rs = r - j * q.rows_per_stage;  // the row within the slot
        const int c = seg * 32 + lane;
        float acc = 0.f;
        if (c < chunks) {
          if (seg != xseg) {  // a warp keeps its segment across items when segs divides the warp count
            xsum = 0.f;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const uint4 u = __ldg(reinterpret_cast<const uint4*>(x + int64_t(c) * 32) + i);
              const uint32_t xw[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const float2 f = w4a16::pair_to_float2<T>(xw[e]);
                xf[8 * i + 2 * e] = f.x, xf[8 * i + 2 * e + 1] = f.y;
                xsum += f.x + f.y;
              }
            }
            xseg = seg;
            const int g = static_cast<int>(int64_t(c) * 32 / a.group);
            goff = g, zoff = g / 8, zshift = 4 * (g % 8);
          }
          const uint4 wq = *reinterpret_cast<const uint4*>(slot + rs * q.row_bytes + c * 16);
          const float sc = static_cast<float>(scales[int64_t(r) * a.groups + goff]);
          uint32_t zp = 8;
          if (a.zeros) zp = (zeros[int64_t(r) * a.zero_words + zoff] >> zshift) & 0xFu;
          // The magic-number trick (w4a16.cuh) two weights at a time, without the scale, which is
          // applied once to the chunk's sum (its 32 weights share one group). bf16: the biased
          // values 128 + q widen to f32 with one shift or mask each and the chunk's dot product
          // takes (128 + z) * sum(x) off at the end (exact terms; the f32 sum of 32 products keeps
          // ~1e-5 of relative error); f16: (q - z) first, exactly, then widened.
          const w4a16::T2<T> zz = w4a16::as_t2<T>(w4a16::Half2<T>::kMagic | (zp << 16) | zp);
          const uint32_t words[4] = {wq.x, wq.y, wq.z, wq.w};
          float part[4] = {0.f, 0.f, 0.f, 0.f};  // one chain per word: four independent FMA chains
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) {  // the pair (value jj, value jj + 4) of each word
#pragma unroll
            for (int i = 0; i < 4; ++i) {  // word i: k = 32 c + 8 i .. + 7
              const uint32_t biased = w4a16::lop3_and_or(words[i] >> (4 * jj), 0x000F000Fu, w4a16::Half2<T>::kMagic);
              float2 wf;
              if constexpr (std::is_same_v<T, __nv_bfloat16>)
                wf = make_float2(__uint_as_float(biased << 16), __uint_as_float(biased & 0xFFFF0000u));
              else
                wf = __half22float2(__hsub2(w4a16::as_t2<T>(biased), zz));
              part[i] = fmaf(xf[8 * i + jj], wf.x, part[i]);
              part[i] = fmaf(xf[8 * i + jj + 4], wf.y, part[i]);
            }
          }
          float dot = (part[0] + part[1]) + (part[2] + part[3]);
          if constexpr (std::is_same_v<T, __nv_bfloat16>) dot = fmaf(-(128.f + float(zp)), xsum, dot);
          acc = dot * sc;
        }
#pragma unroll
        for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, off);
        if (lane == 0) cells[r * q.segs + seg] = acc;
      }
      __syncwarp();
      if (lane == 0) ring.consumer_release(it);
    }
  }
  __syncthreads();
  // y[n] = the row's segment sums, added in segment order (deterministic).
  T* y = static_cast<T*>(a.y);
  for (int r = threadIdx.x; r < rows; r += kThreads) {
    float v = 0.f;
    for (int seg = 0; seg < q.segs; ++seg) v += cells[r * q.segs + seg];
    y[n_begin + r] = static_cast<T>(v);
  }
}

template <class T>
void launch_t(const W4A16Args& a, const Layout& l, cudaStream_t stream) {
  auto kernel = gemm_w4a16_v05_kernel<T>;
  allow_dynamic_smem(kernel, l.smem);
  // Bulk copies of each CTA's scales and zero words need 16-byte aligned starts and sizes: rows
  // of whole 16-byte units and 16-byte aligned bases.
  const int64_t sbytes = a.groups * int64_t(dtype_bits(a.dtype) / 8), zbytes = a.zero_words * 4;
  const bool bulk = sbytes % 16 == 0 && reinterpret_cast<uintptr_t>(a.scales) % 16 == 0 &&
                    (!a.zeros || (zbytes % 16 == 0 && reinterpret_cast<uintptr_t>(a.zeros) % 16 == 0));
  const Params q{l.rows_per_stage, l.row_bytes, l.stage_bytes, l.segs, l.rows_per_cta, bulk};
  kernel<<<static_cast<unsigned>(l.grid), kThreads, l.smem, stream>>>(a, q);
  HK_CHECK_LAUNCH("gemm_w4a16_v05_kernel");
}

W4A16Problem problem_of(const W4A16Args& a) {
  W4A16Problem p(a.m, a.n, a.k, a.group, a.dtype, a.zeros == nullptr, a.layout);
  return p;
}

void gemm_w4a16_v05_launch(const W4A16Args& a, cudaStream_t stream) {
  const Layout l = layout_of(problem_of(a), device_info().sm_count);
  w4a16::dispatch_dtype(a.dtype, "gemm_w4a16/v05_decode_stream", [&](auto t) {
    using T = decltype(t);
    launch_t<T>(a, l, stream);
  });
}

std::string gemm_w4a16_v05_supports(const W4A16Problem& p) {
  if (p.m > 1) return detail::cat("the streaming decode kernel runs one row of x (M = 1), got M=", p.m);
  if (p.tiled()) return "the streaming decode kernel reads the rows layout (each CTA's rows are one byte range)";
  if (p.k % 32 != 0 || p.k / 2 > kWeightBytes)
    return detail::cat("the streaming decode kernel copies whole 16-byte chunks of whole rows into 16 KB slots: K must be "
                       "a multiple of 32 and at most 32768, got K=", p.k);
  if (p.align_bytes < 16 || p.x_row_align() < 16)
    return detail::cat("bulk copies and 16-byte x loads need 16-byte aligned operands, got ", p.align_bytes,
                       "-byte alignment (x rows: ", p.x_row_align(), ")");
  const int sms = no_gpu_reason().empty() ? device_info().sm_count : 132;
  const Layout l = layout_of(p, sms);
  if (l.smem > kMaxSmem)
    return detail::cat("the streaming decode kernel keeps each CTA's scales, zero points and (row, segment) sums in "
                       "shared memory beside its ring: ", l.smem, " bytes for ", l.rows_per_cta, " rows, more than ",
                       kMaxSmem);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(W4A16Problem, W4A16Args, "gemm_w4a16", "v05_decode_stream",
                    "decode (M = 1): persistent CTAs stream their rows through an 8-slot ring of bulk copies, f32 FMAs "
                    "(ladder: slower than v02, issue-bound)",
                    90, 0, gemm_w4a16_v05_supports, gemm_w4a16_v05_launch);

}  // namespace hk::gemm_w4a16_v05_decode_stream
