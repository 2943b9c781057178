// conv2d/v04_depthwise_tiled.cu
//
// Rung 4: depthwise forward (groups == C == Cout), NHWC, square kH = kW = K in {3, 5, 7}, unit
// stride and dilation: a shared-memory tile per block. A block owns an output tile of 8 rows x
// `tw` columns (tw <= 32, chosen so the tiles cover OW with the least waste: 2 x 28 at OW = 56)
// and 32 channels. It stages the tile's input window, (8 + K - 1) x (tw + K - 1) pixels x 32
// channels, once from global memory as f32 (16-byte loads, zero-filled in the padding and past
// the last channel), with the K x K x 32 weights and the bias beside it. Each thread then owns 4
// channels of one output column, 8 rows deep: for each kernel column kx it holds that column's
// K x 4 weights in registers and walks the 8 + K - 1 input rows, each read once with one 16-byte
// shared load and multiplied into every output row whose window holds it (K of them in the
// middle). That is 4 K FMAs per shared load, with no conversion in the inner loop; stores are
// 8- or 16-byte streaming stores of 4 channels.
// Adds over v02: each input pixel comes from global memory once per block (v02 loads each one
// once per kernel row and output pixel group it meets, served by L1), and the input is
// converted to f32 once when it is staged instead of at every use.
// Why: a depthwise 7 x 7 layer does 49 multiply-adds per output element; on CUDA cores the
// FP32 issue rate, not memory, sets its floor (38 us for 64 x 128 x 56 x 56 on an H200), so
// every instruction that is not an FMA costs time.
// Needs: forward, NHWC, groups == C == Cout, kH == kW in {3, 5, 7}, unit stride and dilation,
// C a multiple of 16 bytes' elements, 16-byte aligned operands.
// Run:   hk bench conv2d --variant v04_depthwise_tiled --shape 64x128x56x56_128x7x7_g128
#include <type_traits>

#include "common/launch.cuh"
#include "common/vec.cuh"
#include "conv2d/conv2d_op.hpp"

namespace hk::conv2d_v04_depthwise_tiled {
namespace {

constexpr int kRows = 8;      // output rows per tile (and per thread)
constexpr int kChan = 32;     // channels per block
constexpr int kQuads = kChan / 4;  // threads across a block's channels (4 channels each)
constexpr int kMaxTw = 32;    // output columns per tile, at most (256 threads)
constexpr int kRowBatch = 8;  // staging: row loads a thread has in flight
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
template <int K>
constexpr size_t kSmemBytes = sizeof(float) * (size_t(kRows + K - 1) * kPitch<K> * kChan + size_t(K * K) * kWPitch + kChan);

__device__ __forceinline__ void fma4(float (&acc)[4], const float4& x, const float4& w) {
  acc[0] = fmaf(x.x, w.x, acc[0]);
  acc[1] = fmaf(x.y, w.y, acc[1]);
  acc[2] = fmaf(x.z, w.z, acc[2]);
  acc[3] = fmaf(x.w, w.w, acc[3]);
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

template <class T, int K>
__global__ void __launch_bounds__(kQuads * kMaxTw / 2) conv2d_v04_depthwise_kernel(const Conv2dArgs g, int tw, int cblocks, int tiles_w, int tiles_h) {
  constexpr int kIh = kRows + K - 1;
  constexpr int kE = 16 / int(sizeof(T));  // channels per 16-byte global chunk
  extern __shared__ float4 conv2d_v04_smem[];
  const int iw = tw + K - 1;                               // staged columns
  float* xs = reinterpret_cast<float*>(conv2d_v04_smem);  // [kIh][kPitch][kChan]
  float* ws = xs + kIh * kPitch<K> * kChan;                // [K * K][kWPitch]
  float* bs = ws + K * K * kWPitch;                        // [kChan]

  // Block -> (image, tile row, tile column, channel block), channel blocks fastest so that the
  // blocks sharing input pixels run together.
  int64_t b = blockIdx.x;
  const int64_t c0 = b % cblocks * kChan;
  b /= cblocks;
  const int64_t ox0 = b % tiles_w * tw;
  b /= tiles_w;
  const int64_t oy0 = b % tiles_h * kRows, n = b / tiles_h;

  const T* __restrict__ x = static_cast<const T*>(g.x);
  const T* __restrict__ w = static_cast<const T*>(g.w);
  const T* __restrict__ bias = static_cast<const T*>(g.bias);
  T* __restrict__ y = static_cast<T*>(g.out);

  // Stage the input window, one 16-byte chunk (kE channels) of one window column per thread and
  // row: the thread issues its column's kIh row loads before it converts and stores any.
  constexpr int kChunks = kChan / kE;
  const int64_t row_stride = g.w_in * g.c, iy0 = oy0 - g.prm.pad_top;
  for (int idx = threadIdx.x; idx < iw * kChunks; idx += blockDim.x) {
    const int col = idx / kChunks, chunk = idx % kChunks;
    const int64_t ix = ox0 - g.prm.pad_left + col, ch = c0 + chunk * kE;
    const bool inside = ix >= 0 && ix < g.w_in && ch < g.c;
    const T* src = x + (((n * g.h + iy0) * g.w_in + ix) * g.c + ch);  // row iy0 (maybe outside)
    float* dst = xs + col * kChan + chunk * kE;
#pragma unroll
    for (int r0 = 0; r0 < kIh; r0 += kRowBatch) {  // at most kRowBatch loads in registers
      uint4 bits[kRowBatch];
#pragma unroll
      for (int r = r0; r < r0 + kRowBatch && r < kIh; ++r)
        bits[r - r0] = inside && iy0 + r >= 0 && iy0 + r < g.h ? __ldg(reinterpret_cast<const uint4*>(src + r * row_stride))
                                                               : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int r = r0; r < r0 + kRowBatch && r < kIh; ++r) {
        const Vec<T, kE>& raw = *reinterpret_cast<const Vec<T, kE>*>(&bits[r - r0]);
#pragma unroll
        for (int e = 0; e < kE; e += 4)
          reinterpret_cast<float4*>(dst + r * kPitch<K> * kChan)[e / 4] =
              make_float4(to_f32(raw.v[e]), to_f32(raw.v[e + 1]), to_f32(raw.v[e + 2]), to_f32(raw.v[e + 3]));
      }
    }
  }
  // Weights [C, K, K] (one input channel per group): the block's 32 channels are one contiguous
  // run, read in order and transposed to [tap][channel]; zero past the last channel.
  const int64_t w0 = c0 * K * K, wn = g.c * K * K;
  staged_copy(
      K * K * kChan, [&](int i) { return w0 + i < wn ? to_f32(w[min(w0 + i, wn - 1)]) : 0.f; },
      [&](int i, float v) { ws[i % (K * K) * kWPitch + i / (K * K)] = v; });
  for (int i = threadIdx.x; i < kChan; i += blockDim.x) bs[i] = bias && c0 + i < g.c ? to_f32(bias[c0 + i]) : 0.f;
  __syncthreads();

  // Thread: 4 channels (quad q) of output columns c2 and c2 + 1, all kRows rows. Input column
  // c2 + j meets output column c2 at kx = j and column c2 + 1 at kx = j - 1, so each 16-byte
  // shared load feeds both columns: up to 8 K FMAs.
  const int q = threadIdx.x % kQuads, c2 = threadIdx.x / kQuads * 2;
  float acc[2][kRows][4];
  const float4 b4 = reinterpret_cast<const float4*>(bs)[q];
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int o = 0; o < kRows; ++o) acc[c][o][0] = b4.x, acc[c][o][1] = b4.y, acc[c][o][2] = b4.z, acc[c][o][3] = b4.w;
  const float4* xq = reinterpret_cast<const float4*>(xs) + c2 * kQuads + q;  // row 0, column c2
  const float4* wq = reinterpret_cast<const float4*>(ws) + q;
  auto input_column = [&](int j, auto first, auto second) {
    constexpr bool kFirst = decltype(first)::value, kSecond = decltype(second)::value;
    float4 wa[K], wb[K];  // kernel column j (for output column c2) and j - 1 (for c2 + 1)
#pragma unroll
    for (int ky = 0; ky < K; ++ky) {
      if constexpr (kFirst) wa[ky] = wq[(ky * K + j) * (kWPitch / 4)];
      if constexpr (kSecond) wb[ky] = wq[(ky * K + j - 1) * (kWPitch / 4)];
    }
#pragma unroll
    for (int r = 0; r < kIh; ++r) {
      const float4 xv = xq[(r * kPitch<K> + j) * kQuads];
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

  const int64_t ch = c0 + q * 4;
  if (ch >= g.c) return;
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int64_t ox = ox0 + c2 + c;
    if (c2 + c >= tw || ox >= g.ow) break;
#pragma unroll
    for (int o = 0; o < kRows; ++o) {
      if (oy0 + o >= g.oh) break;
      Vec<T, 4> out;
#pragma unroll
      for (int e = 0; e < 4; ++e) out.v[e] = from_f32<T>(acc[c][o][e]);
      T* p = y + ((n * g.oh + oy0 + o) * g.ow + ox) * g.c + ch;
      if constexpr (sizeof(T) == 4) __stcs(reinterpret_cast<uint4*>(p), *reinterpret_cast<const uint4*>(&out));
      else __stcs(reinterpret_cast<uint2*>(p), *reinterpret_cast<const uint2*>(&out));
    }
  }
}

template <class T, int K>
void launch_with(const Conv2dArgs& a, cudaStream_t stream) {
  const int tw = tile_width(a.ow);
  constexpr size_t smem = kSmemBytes<K>;
  auto kernel = conv2d_v04_depthwise_kernel<T, K>;
  if constexpr (smem > 48 * 1024)
    HK_CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const int cblocks = int(ceil_div(a.c, int64_t(kChan)));
  const int tiles_w = int(ceil_div(a.ow, int64_t(tw))), tiles_h = int(ceil_div(a.oh, int64_t(kRows)));
  const int64_t blocks = a.n * tiles_h * tiles_w * cblocks;
  kernel<<<static_cast<unsigned>(blocks), kQuads * tw / 2, smem, stream>>>(a, tw, cblocks, tiles_w, tiles_h);
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
  if (p.dir != ConvDirection::kForward) return "forward only";
  if (!p.nhwc()) return "NHWC only (channels vectorised), got NCHW";
  if (!p.depthwise())
    return "depthwise only (groups == C == Cout), got groups=" + std::to_string(p.prm.groups) + " C=" +
           std::to_string(p.c) + " Cout=" + std::to_string(p.cout);
  if (p.kh != p.kw || (p.kw != 3 && p.kw != 5 && p.kw != 7))
    return "square 3x3, 5x5 or 7x7 kernels only, got " + std::to_string(p.kh) + "x" + std::to_string(p.kw);
  if (p.prm.stride_h != 1 || p.prm.stride_w != 1 || p.prm.dilation_h != 1 || p.prm.dilation_w != 1)
    return "unit stride and dilation only";
  const int v = 16 / (dtype_bits(p.dtype) / 8);
  if (p.c % v != 0) return "C must be a multiple of " + std::to_string(v) + " (16-byte channel chunks), got " + std::to_string(p.c);
  if (p.align_bytes < 16) return "operands must be 16-byte aligned, got " + std::to_string(p.align_bytes);
  const int64_t blocks = p.n * ceil_div(p.oh(), int64_t(kRows)) * ceil_div(p.ow(), int64_t(tile_width(p.ow()))) *
                         ceil_div(p.c, int64_t(kChan));
  if (blocks > INT32_MAX) return "more than 2^31 - 1 tiles";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(Conv2dProblem, Conv2dArgs, "conv2d", "v04_depthwise_tiled",
                    "depthwise NHWC forward, K in {3, 5, 7}: an 8-row x 32-channel output tile per block, its input "
                    "window staged once as f32 in shared memory, 4 channels x 8 rows per thread",
                    80, kFlagProduction, conv2d_v04_supports, conv2d_v04_launch);

}  // namespace hk::conv2d_v04_depthwise_tiled
