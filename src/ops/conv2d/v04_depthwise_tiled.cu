// conv2d/v04_depthwise_tiled.cu
//
// Rung 4: depthwise forward (groups == C == Cout), NHWC, square kH = kW = K in {3, 5, 7}, unit
// stride and dilation, any padding: shared-memory tiles on FP32 CUDA cores. Work is split into
// output tiles of 8 rows x `tw` columns (tw <= 32 and even, chosen so the tiles cover OW with the
// least waste: 2 x 28 at OW = 56) x 32 channels. Persistent blocks (three per SM) walk the tiles
// with the channel block slowest, so a block's weights (K x K x 32, f32, restaged only when its
// channel block changes) mostly stay put. Each tile's input window, (8 + K - 1) x (tw + K - 1)
// pixels x 32 channels, arrives by 16-byte cp.async, zero-filled in the padding and past the last
// channel, into a ring of two stages for 16-bit inputs (the next tile is copied while this one
// computes; f32 has one stage, as two 68 KB windows would leave one block per SM). A thread owns
// 4 channels of two adjacent output columns, 8 rows deep: input column c + j meets column c at
// kx = j and column c + 1 at kx = j - 1, so one shared load (converted to f32 as it is read)
// feeds up to 8 K FMAs against the two kernel columns' weights held in registers. Stores are 8-
// or 16-byte streaming stores of 4 channels.
// Adds over v02: each input pixel comes from global memory once per tile, asynchronously, and
// meets every FMA it takes part in from registers (v02 loads it once per kernel row and output
// pixel group it meets, through L1, and waits for each load).
// Why: a depthwise 7 x 7 layer does 49 multiply-adds per output element; on CUDA cores the FP32
// issue rate, not memory, sets its floor (38 us for 64 x 128 x 56 x 56 on an H200), so the
// rung keeps loads, conversions and address arithmetic out of the FMA stream (every
// shared-memory offset in the inner loop is a compile-time constant). H200, 2026-12-03: 107 us
// at 64x128x56x56 K = 7 bf16 (v02: 499 us; F.conv2d: 185 us).
// Needs: forward, NHWC, groups == C == Cout, kH == kW in {3, 5, 7}, unit stride and dilation,
// C a multiple of 16 bytes' elements, 16-byte aligned operands.
// Run:   hk bench conv2d --variant v04_depthwise_tiled --shape 64x128x56x56_128x7x7_g128
#include <type_traits>

#include "common/launch.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/vec.cuh"
#include "conv2d/conv2d_op.hpp"

namespace hk::conv2d_v04_depthwise_tiled {
namespace {

constexpr int kRows = 8;      // output rows per tile (and per thread)
constexpr int kChan = 32;     // channels per block
constexpr int kQuads = kChan / 4;  // threads across a block's channels (4 channels each)
constexpr int kMaxTw = 32;    // output columns per tile, at most (256 threads)
constexpr int kWPitch = kChan + 4;  // a tap's weights in shared memory: the transposing stores
                                    // of adjacent taps land 4 banks apart

// Tile width: the fewest tiles of at most kMaxTw columns, evened out over OW, rounded up to a
// whole number of column pairs (a thread computes two adjacent columns).
inline int tile_width(int64_t ow) {
  const int64_t tiles = ceil_div(ow, int64_t(kMaxTw));
  return static_cast<int>(ceil_div(ceil_div(ow, tiles), int64_t(2)) * 2);
}

// The staged window's row pitch is the widest tile's, so that every shared-memory offset in
// the inner loop is a compile-time constant (a runtime pitch costs an address instruction per
// input row: 17 of 262 instructions at K = 7).
template <int K>
constexpr int kPitch = kMaxTw + K - 1;
// Stages of the input ring: two for 16-bit inputs (the next tile's copies run under this
// tile's FMAs); one for f32, whose 68 KB window leaves no room for a second stage at three
// blocks per SM.
template <class T>
constexpr int kStages = sizeof(T) == 2 ? 2 : 1;
template <class T, int K>
constexpr size_t kStageElems = size_t(kRows + K - 1) * kPitch<K> * kChan;
template <class T, int K>
constexpr size_t kSmemBytes = kStages<T> * kStageElems<T, K> * sizeof(T) + sizeof(float) * (size_t(K * K) * kWPitch + kChan);

__device__ __forceinline__ void fma4(float (&acc)[4], const float4& x, const float4& w) {
  acc[0] = fmaf(x.x, w.x, acc[0]);
  acc[1] = fmaf(x.y, w.y, acc[1]);
  acc[2] = fmaf(x.z, w.z, acc[2]);
  acc[3] = fmaf(x.w, w.w, acc[3]);
}

// Where channel chunk `chunk` (16 bytes) of window column `col` lies within the column's
// kChan channels. 16-bit inputs: a column is 64 bytes and the compute loop's warp reads columns
// 2 apart, which would all fall in the same 16 banks; swapping the chunk halves of every other
// column pair spreads them over all 32.
template <class T>
__device__ __forceinline__ int chunk_slot(int col, int chunk) {
  if constexpr (sizeof(T) == 2) return chunk ^ (((col >> 1) & 1) << 1);
  else return chunk;
}

// Four channels (4q .. 4q + 3) of one staged pixel, as f32.
template <class T>
__device__ __forceinline__ float4 load4(const T* pixel, int col, int q) {
  if constexpr (sizeof(T) == 4) {
    return reinterpret_cast<const float4*>(pixel)[q];
  } else {
    const uint2 bits = *reinterpret_cast<const uint2*>(pixel + chunk_slot<T>(col, q >> 1) * 8 + (q & 1) * 4);
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      return make_float4(__uint_as_float(bits.x << 16), __uint_as_float(bits.x & 0xffff0000u),
                         __uint_as_float(bits.y << 16), __uint_as_float(bits.y & 0xffff0000u));
    } else {
      const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&bits.x));
      const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&bits.y));
      return make_float4(lo.x, lo.y, hi.x, hi.y);
    }
  }
}

// Copies `items` elements with the block: each thread issues the loads of kBatch items before
// it stores any, so a thread waits on global memory once per kBatch items, not once per item.
// The loads are unconditional (a thread past the end reloads the last item) so that the
// compiler issues them back to back.
template <class Load, class Store>
__device__ __forceinline__ void staged_copy(int items, Load&& load, Store&& store) {
  constexpr int kBatch = 8;
  using V = decltype(load(0));
  for (int base = threadIdx.x; base < items; base += kBatch * blockDim.x) {
    V v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) v[j] = load(min(base + j * int(blockDim.x), items - 1));  // unconditional
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = base + j * int(blockDim.x);
      if (i < items) store(i, v[j]);
    }
  }
}

struct Tiling {
  int tw;               // output columns per tile (even)
  int tiles_w, tiles_h; // tiles across OW and OH
  int64_t spatial;      // tiles per channel block: N * tiles_h * tiles_w
  int64_t tiles;        // spatial * channel blocks
};

template <class T, int K>
__global__ void __launch_bounds__(kQuads * kMaxTw / 2) conv2d_v04_depthwise_kernel(const Conv2dArgs g, const Tiling t) {
  constexpr int kIh = kRows + K - 1;
  constexpr int kE = 16 / int(sizeof(T));  // channels per 16-byte chunk
  constexpr int kChunks = kChan / kE;
  constexpr int kS = kStages<T>;
  extern __shared__ float4 conv2d_v04_smem[];
  T* xs = reinterpret_cast<T*>(conv2d_v04_smem);                                        // kS x [kIh][kPitch][kChan]
  float* ws = reinterpret_cast<float*>(xs + kS * kStageElems<T, K>);                    // [K * K][kWPitch]
  float* bs = ws + K * K * kWPitch;                                                     // [kChan]
  const int iw = t.tw + K - 1;  // staged columns
  const T* __restrict__ x = static_cast<const T*>(g.x);
  const T* __restrict__ w = static_cast<const T*>(g.w);
  const T* __restrict__ bias = static_cast<const T*>(g.bias);
  T* __restrict__ y = static_cast<T*>(g.out);

  // Tile index -> (channel block, image, tile row, tile column); the channel block is slowest,
  // so a block's successive tiles mostly share their weights.
  struct Tile {
    int64_t c0, n, oy0, ox0;
  };
  auto tile_at = [&](int64_t i) {
    Tile r;
    r.c0 = i / t.spatial * kChan;
    i %= t.spatial;
    r.ox0 = i % t.tiles_w * t.tw;
    i /= t.tiles_w;
    r.oy0 = i % t.tiles_h * kRows;
    r.n = i / t.tiles_h;
    return r;
  };
  // Issues the cp.async copies of a tile's input window into ring stage `stage`: one 16-byte
  // chunk of one window column per thread and row, zero-filled outside the image and past the
  // last channel.
  auto issue = [&](const Tile& tl, int stage) {
    T* dst0 = xs + stage * kStageElems<T, K>;
    const int64_t row_stride = g.w_in * g.c, iy0 = tl.oy0 - g.prm.pad_top;
    for (int idx = threadIdx.x; idx < iw * kChunks; idx += blockDim.x) {
      const int col = idx / kChunks, chunk = idx % kChunks;
      const int64_t ix = tl.ox0 - g.prm.pad_left + col, ch = tl.c0 + chunk * kE;
      const bool inside = ix >= 0 && ix < g.w_in && ch < g.c;
      const int64_t base = ((tl.n * g.h + iy0) * g.w_in + ix) * g.c + ch;  // row iy0 (maybe outside)
      T* dst = dst0 + col * kChan + chunk_slot<T>(col, chunk) * kE;
#pragma unroll
      for (int r = 0; r < kIh; ++r) {
        const bool ok = inside && iy0 + r >= 0 && iy0 + r < g.h;
        ptx::cp_async_16(dst + r * kPitch<K> * kChan, ok ? x + base + r * row_stride : x, ok ? 16 : 0);
      }
    }
  };

  const int q = threadIdx.x % kQuads, c2 = threadIdx.x / kQuads * 2;
  int64_t loaded_c0 = -1;
  const int64_t first = blockIdx.x, stride = gridDim.x;
  // Prologue: the first kS - 1 tiles in flight.
#pragma unroll
  for (int k = 0; k < kS - 1; ++k) {
    if (first + k * stride < t.tiles) issue(tile_at(first + k * stride), k);
    ptx::cp_async_commit();
  }
  int stage = 0;
  for (int64_t i = first; i < t.tiles; i += stride, stage = stage + 1 == kS ? 0 : stage + 1) {
    const Tile tl = tile_at(i);
    // The tile kS - 1 ahead goes into the stage freed at the end of the previous iteration.
    const int64_t ahead = i + (kS - 1) * stride;
    if (ahead < t.tiles) issue(tile_at(ahead), (stage + kS - 1) % kS);
    ptx::cp_async_commit();
    if (tl.c0 != loaded_c0) {
      // Weights [C, K, K] (one input channel per group): the block's 32 channels are one
      // contiguous run, read in order and transposed to [tap][channel]; zero past the last channel.
      const int64_t w0 = tl.c0 * K * K, wn = g.c * K * K;
      staged_copy(
          K * K * kChan, [&](int j) { return w0 + j < wn ? to_f32(w[min(w0 + j, wn - 1)]) : 0.f; },
          [&](int j, float v) { ws[j % (K * K) * kWPitch + j / (K * K)] = v; });
      for (int j = threadIdx.x; j < kChan; j += blockDim.x) bs[j] = bias && tl.c0 + j < g.c ? to_f32(bias[tl.c0 + j]) : 0.f;
      loaded_c0 = tl.c0;
    }
    ptx::cp_async_wait<kS - 1>();
    __syncthreads();

    // Thread: 4 channels (quad q) of output columns c2 and c2 + 1, all kRows rows. Input column
    // c2 + j meets output column c2 at kx = j and column c2 + 1 at kx = j - 1, so each shared
    // load feeds both columns: up to 8 K FMAs.
    const T* xt = xs + stage * kStageElems<T, K>;
    float acc[2][kRows][4];
    const float4 b4 = reinterpret_cast<const float4*>(bs)[q];
#pragma unroll
    for (int c = 0; c < 2; ++c)
#pragma unroll
      for (int o = 0; o < kRows; ++o) acc[c][o][0] = b4.x, acc[c][o][1] = b4.y, acc[c][o][2] = b4.z, acc[c][o][3] = b4.w;
    const float4* wq = reinterpret_cast<const float4*>(ws) + q;
    auto input_column = [&](int j, auto first_col, auto second_col) {
      constexpr bool kFirst = decltype(first_col)::value, kSecond = decltype(second_col)::value;
      float4 wa[K], wb[K];  // kernel column j (for output column c2) and j - 1 (for c2 + 1)
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        if constexpr (kFirst) wa[ky] = wq[(ky * K + j) * (kWPitch / 4)];
        if constexpr (kSecond) wb[ky] = wq[(ky * K + j - 1) * (kWPitch / 4)];
      }
      const int col = c2 + j;
      const T* px = xt + col * kChan;
#pragma unroll
      for (int r = 0; r < kIh; ++r) {
        const float4 xv = load4<T>(px + r * kPitch<K> * kChan, col, q);
#pragma unroll
        for (int ky = 0; ky < K; ++ky) {
          const int o = r - ky;  // the output row whose window meets input row r at kernel row ky
          if (o < 0 || o >= kRows) continue;
          if constexpr (kFirst) fma4(acc[0][o], xv, wa[ky]);
          if constexpr (kSecond) fma4(acc[1][o], xv, wb[ky]);
        }
      }
    };
    using Yes = std::true_type;
    using No = std::false_type;
    input_column(0, Yes{}, No{});
#pragma unroll 1
    for (int j = 1; j < K; ++j) input_column(j, Yes{}, Yes{});  // rolled: unrolled, the loads are hoisted and spill
    input_column(K, No{}, Yes{});

    const int64_t ch = tl.c0 + q * 4;
    if (ch < g.c) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int64_t ox = tl.ox0 + c2 + c;
        if (c2 + c >= t.tw || ox >= g.ow) break;
#pragma unroll
        for (int o = 0; o < kRows; ++o) {
          if (tl.oy0 + o >= g.oh) break;
          Vec<T, 4> out;
#pragma unroll
          for (int e = 0; e < 4; ++e) out.v[e] = from_f32<T>(acc[c][o][e]);
          T* p = y + ((tl.n * g.oh + tl.oy0 + o) * g.ow + ox) * g.c + ch;
          if constexpr (sizeof(T) == 4) __stcs(reinterpret_cast<uint4*>(p), *reinterpret_cast<const uint4*>(&out));
          else __stcs(reinterpret_cast<uint2*>(p), *reinterpret_cast<const uint2*>(&out));
        }
      }
    }
    __syncthreads();  // this stage and the weights are free for the next copies
  }
  ptx::cp_async_wait<0>();
}

Tiling tiling_for(int64_t n, int64_t c, int64_t oh, int64_t ow) {
  Tiling t;
  t.tw = tile_width(ow);
  t.tiles_w = int(ceil_div(ow, int64_t(t.tw)));
  t.tiles_h = int(ceil_div(oh, int64_t(kRows)));
  t.spatial = n * t.tiles_h * t.tiles_w;
  t.tiles = t.spatial * ceil_div(c, int64_t(kChan));
  return t;
}

template <class T, int K>
void launch_with(const Conv2dArgs& a, cudaStream_t stream) {
  const Tiling t = tiling_for(a.n, a.c, a.oh, a.ow);
  constexpr size_t smem = kSmemBytes<T, K>;
  auto kernel = conv2d_v04_depthwise_kernel<T, K>;
  allow_dynamic_smem(kernel, smem);
  const int threads = kQuads * t.tw / 2;
  static const int resident = resident_grid(kernel, kQuads * kMaxTw / 2, smem);  // per instantiation
  const int64_t grid = std::min<int64_t>(t.tiles, resident);
  kernel<<<static_cast<unsigned>(grid), threads, smem, stream>>>(a, t);
  HK_CHECK_LAUNCH("conv2d_v04_depthwise_kernel");
}

void conv2d_v04_launch(const Conv2dArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "conv2d/v04_depthwise_tiled", [&](auto tag) {
    using T = decltype(tag);
    if (a.kw == 3) return launch_with<T, 3>(a, stream);
    if (a.kw == 5) return launch_with<T, 5>(a, stream);
    if (a.kw == 7) return launch_with<T, 7>(a, stream);
    HK_THROW(kNotSupported, "conv2d/v04_depthwise_tiled: kernel ", a.kh, "x", a.kw, " is not 3x3, 5x5 or 7x7");
  });
}

std::string conv2d_v04_supports(const Conv2dProblem& p) {
  if (std::string why = p.depthwise_nhwc_forward_needs(); !why.empty()) return why;
  if (p.kh != p.kw || (p.kw != 3 && p.kw != 5 && p.kw != 7))
    return "square 3x3, 5x5 or 7x7 kernels only, got " + std::to_string(p.kh) + "x" + std::to_string(p.kw);
  if (p.prm.stride_h != 1 || p.prm.stride_w != 1 || p.prm.dilation_h != 1 || p.prm.dilation_w != 1)
    return "unit stride and dilation only";
  if (p.oh() > INT32_MAX || p.ow() > INT32_MAX) return "OH and OW must be below 2^31";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(Conv2dProblem, Conv2dArgs, "conv2d", "v04_depthwise_tiled",
                    "depthwise NHWC forward, K in {3, 5, 7}: persistent blocks over 8-row x 32-channel output tiles, "
                    "each tile's input window copied by cp.async under the previous tile's FMAs, 2 columns x 4 "
                    "channels x 8 rows per thread",
                    80, kFlagProduction, conv2d_v04_supports, conv2d_v04_launch);

}  // namespace hk::conv2d_v04_depthwise_tiled
