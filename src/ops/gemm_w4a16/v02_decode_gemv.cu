// gemm_w4a16/v02_decode_gemv.cu
//
// Rung 2: the decode kernel (small M): a GEMV-shaped pass that reads each packed weight once,
// with 16-byte loads, and never writes a dequantised matrix.
// Adds over v01: the weights are streamed with one 16-byte evict-first load per lane (32
// weights), dequantised in registers with the magic-number trick (w4a16.cuh: one lop3, one
// subtract and one multiply per two weights, no int->float conversion) and multiplied into up to
// 16 rows of x (16-byte loads, cache-resident: x is M K 2 bytes) in f32; partial sums meet
// through warp shuffles and shared memory. W is read as a stream at the width HBM wants, so at
// M = 1 the time should be the weight bytes over the copy bandwidth (8 MB for 4096x4096: about
// 2 us at 4.2 TB/s; not yet measured). The f32 FMAs grow with M: 2 M flops per half byte of
// weight keep pace with 4.2 TB/s only while 16.8 M TFLOP/s stays under the f32 FMA peak (about
// 67 TFLOP/s on the H200), M <= 4; past that the tensor cores (v03) should win.
//   rows layout:  a block streams 8 weight rows (4 when M > 4) together; thread i takes 16-byte
//                 chunks i, i + 128, ... (32 consecutive k, one group since g is a multiple of
//                 32 or K) of every row, and each x vector it loads serves all of those rows.
//   tiled layout: a block streams one n-tile (8 rows); warp w takes 128-wide k-tiles w, w + 8,
//                 ..., each one coalesced 512-byte load per warp; lane 4r + t holds row r's words
//                 for k = 128 kb + 32 c + 8 t (c = 0..3), and the 8 lanes of one t load the same
//                 x vector (one transaction serves 8 rows).
// Needs: M <= 16; x's rows 16-byte aligned (16-byte x loads); rows layout: K a multiple of 32
// and qweight 16-byte aligned (whole 16-byte chunks per row).
// Run:   hk bench gemm_w4a16 --variant v02_decode_gemv --shape 1x4096x4096
#include "common/launch.cuh"
#include "gemm_w4a16/w4a16.cuh"

namespace hk::gemm_w4a16_v02_decode_gemv {
namespace {

constexpr int kThreads = 256;      // tiled kernel: 8 warps
constexpr int kRowThreads = 128;   // rows kernel: 4 warps
constexpr int kMaxRows = 16;       // M limit

// Weight rows a rows-kernel block streams together: every x load serves all of them.
template <int kMaxM>
constexpr int rows_per_block() { return kMaxM > 4 ? 4 : 8; }

// Rows kernel blocks per SM the registers are capped for: four at M = 1 in bf16 (128 registers;
// uncapped it took 140, three blocks, and the weight bytes in flight with them); three at M = 1
// in f16 and at M <= 16 (f16 spills at 128); two at M <= 4, where f16 needs 254.
template <class T, int kMaxM>
constexpr int row_blocks_per_sm() { return kMaxM == 4 ? 2 : kMaxM == 1 && std::is_same_v<T, __nv_bfloat16> ? 4 : 3; }

// The eight weights of `word` (values 0..7 in k order) dequantised to T, then widened to f32.
template <class T>
__device__ __forceinline__ void dequant_to_float(uint32_t word, const w4a16::GroupParams<T>& gp, float (&w)[8]) {
  w4a16::T2<T> p[4];
  w4a16::dequant_word<T>(word, gp, p);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = w4a16::pair_to_float2<T>(w4a16::as_u32<T>(p[j]));
    w[j] = f.x, w[j + 4] = f.y;
  }
}

// x[m, k0 .. k0 + 7] as f32 (one 16-byte load).
template <class T>
__device__ __forceinline__ void load_x8(const T* x, int64_t ld_x, int m, int64_t k0, float (&xf)[8]) {
  const uint4 u = __ldg(reinterpret_cast<const uint4*>(x + m * ld_x + k0));
  const float2 a = w4a16::pair_to_float2<T>(u.x), b = w4a16::pair_to_float2<T>(u.y);
  const float2 c = w4a16::pair_to_float2<T>(u.z), d = w4a16::pair_to_float2<T>(u.w);
  xf[0] = a.x, xf[1] = a.y, xf[2] = b.x, xf[3] = b.y, xf[4] = c.x, xf[5] = c.y, xf[6] = d.x, xf[7] = d.y;
}

__device__ __forceinline__ float dot8(const float (&x)[8], const float (&w)[8], float acc) {
#pragma unroll
  for (int j = 0; j < 8; ++j) acc = fmaf(x[j], w[j], acc);
  return acc;
}

// acc[m] += sum_j x[m, k0 + j] * w_j over the eight weights of `word`, for m < rows.
template <class T, int kMaxM>
__device__ __forceinline__ void accumulate_word(uint32_t word, const w4a16::GroupParams<T>& gp, const T* x,
                                                int64_t ld_x, int64_t k0, int rows, float (&acc)[kMaxM]) {
  float w[8];
  dequant_to_float<T>(word, gp, w);
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) {
    if (m < rows) {
      float xf[8];
      load_x8<T>(x, ld_x, m, k0, xf);
      acc[m] = dot8(xf, w, acc[m]);
    }
  }
}

// Rows layout: a block streams kR consecutive weight rows; thread i takes 16-byte chunk i,
// i + 128, ... (32 consecutive k) of every one of them — kR loads in flight per chunk, each
// coalesced across the warp (32 chunks of one row: 512 bytes) — and multiplies each x vector it
// loads into all kR rows, so x's traffic through L1 is 1/kR of one x load per weight word.
template <class T, int kMaxM>
__global__ void __launch_bounds__(kRowThreads, row_blocks_per_sm<T, kMaxM>()) gemm_w4a16_v02_rows_kernel(W4A16Args a) {
  constexpr int kR = rows_per_block<kMaxM>();
  constexpr int kWarps = kRowThreads / 32;
  __shared__ float partial[kWarps][kR][kMaxM];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n0 = int64_t(blockIdx.x) * kR;
  const T* x = static_cast<const T*>(a.x);
  const int rows = static_cast<int>(a.m);
  const int64_t chunks = a.k / 32, words = a.k / 8;
  float acc[kR][kMaxM];
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) acc[r][m] = 0.f;

  for (int64_t c = threadIdx.x; c < chunks; c += kRowThreads) {
    const int64_t k0 = c * 32;
    uint4 q[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r)  // rows past N (the last block): row N - 1 again, never stored
      q[r] = __ldcs(reinterpret_cast<const uint4*>(a.qweight + (n0 + r < a.n ? n0 + r : a.n - 1) * words) + c);
    w4a16::GroupParams<T> gp[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) gp[r] = w4a16::group_params<T>(a, n0 + r < a.n ? n0 + r : a.n - 1, k0 / a.group);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (kMaxM == 1) {
        // One row of x: each weight word is dequantised and multiplied at once, so only one
        // word's eight f32 weights are live (all kR rows' would take 64 registers and halve
        // the blocks per SM, and with them the weight bytes in flight).
        float xf[8];
        load_x8<T>(x, a.ld_x, 0, k0 + 8 * i, xf);
#pragma unroll
        for (int r = 0; r < kR; ++r) {
          float w[8];
          dequant_to_float<T>(i == 0 ? q[r].x : i == 1 ? q[r].y : i == 2 ? q[r].z : q[r].w, gp[r], w);
          acc[r][0] = dot8(xf, w, acc[r][0]);
        }
      } else {
        float w[kR][8];
#pragma unroll
        for (int r = 0; r < kR; ++r) dequant_to_float<T>(i == 0 ? q[r].x : i == 1 ? q[r].y : i == 2 ? q[r].z : q[r].w, gp[r], w[r]);
#pragma unroll
        for (int m = 0; m < kMaxM; ++m) {
          if (m < rows) {
            float xf[8];
            load_x8<T>(x, a.ld_x, m, k0 + 8 * i, xf);
#pragma unroll
            for (int r = 0; r < kR; ++r) acc[r][m] = dot8(xf, w[r], acc[r][m]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int m = 0; m < kMaxM; ++m) {
      float v = acc[r][m];
#pragma unroll
      for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
      if (lane == 0) partial[warp][r][m] = v;
    }
  __syncthreads();
  for (int i = threadIdx.x; i < kR * kMaxM; i += kRowThreads) {
    const int r = i / kMaxM, m = i % kMaxM;
    if (m >= rows || n0 + r >= a.n) continue;
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += partial[w][r][m];
    static_cast<T*>(a.y)[m * a.ld_y + n0 + r] = static_cast<T>(v);
  }
}

template <class T, int kMaxM>
__global__ void __launch_bounds__(kThreads) gemm_w4a16_v02_tiled_kernel(W4A16Args a) {
  __shared__ float partial[kThreads / 32][8][kMaxM];  // (warp, row of the n-tile, m)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = lane / 4, t = lane % 4;
  const int64_t n = int64_t(blockIdx.x) * 8 + r;
  const int64_t nc = n < a.n ? n : a.n - 1;  // rows past N (tile padding): computed, never stored
  const T* x = static_cast<const T*>(a.x);
  const int rows = static_cast<int>(a.m);
  const int64_t ktiles = a.k_padded / 128;
  const uint4* tile = reinterpret_cast<const uint4*>(a.qweight + int64_t(blockIdx.x) * a.k_padded) + lane;
  float acc[kMaxM];
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) acc[m] = 0.f;
#pragma unroll 2
  for (int64_t kb = warp; kb < ktiles; kb += kThreads / 32) {
    const uint4 q = __ldcs(tile + kb * 32);  // 32 lanes x 16 bytes: the whole 512-byte tile
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t k0 = kb * 128 + c * 32 + t * 8;
      if (k0 < a.k) accumulate_word<T, kMaxM>(words[c], w4a16::group_params<T>(a, nc, k0 / a.group), x, a.ld_x, k0, rows, acc);
    }
  }
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) {
    float s = acc[m];
    s += __shfl_xor_sync(0xFFFFFFFFu, s, 1);
    s += __shfl_xor_sync(0xFFFFFFFFu, s, 2);
    if (t == 0) partial[warp][r][m] = s;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 8 * kMaxM; i += kThreads) {
    const int rr = i / kMaxM, m = i % kMaxM;
    const int64_t col = int64_t(blockIdx.x) * 8 + rr;
    if (m >= rows || col >= a.n) continue;
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) s += partial[w][rr][m];
    static_cast<T*>(a.y)[m * a.ld_y + col] = static_cast<T>(s);
  }
}

template <class T, int kMaxM>
void launch_m(const W4A16Args& a, cudaStream_t stream) {
  if (a.layout == W4A16Layout::kTiled) {
    gemm_w4a16_v02_tiled_kernel<T, kMaxM><<<static_cast<unsigned>(ceil_div(a.n, 8)), kThreads, 0, stream>>>(a);
    HK_CHECK_LAUNCH("gemm_w4a16_v02_tiled_kernel");
  } else {
    const int64_t blocks = ceil_div(a.n, rows_per_block<kMaxM>());
    gemm_w4a16_v02_rows_kernel<T, kMaxM><<<static_cast<unsigned>(blocks), kRowThreads, 0, stream>>>(a);
    HK_CHECK_LAUNCH("gemm_w4a16_v02_rows_kernel");
  }
}

void gemm_w4a16_v02_launch(const W4A16Args& a, cudaStream_t stream) {
  w4a16::dispatch_dtype(a.dtype, "gemm_w4a16/v02_decode_gemv", [&](auto t) {
    using T = decltype(t);
    if (a.m <= 1) launch_m<T, 1>(a, stream);
    else if (a.m <= 4) launch_m<T, 4>(a, stream);
    else launch_m<T, kMaxRows>(a, stream);
  });
}

std::string gemm_w4a16_v02_supports(const W4A16Problem& p) {
  if (p.m > kMaxRows) return detail::cat("the decode kernel keeps one f32 sum per row of x: M <= ", kMaxRows, ", got M=", p.m);
  if (p.x_row_align() < 16)
    return detail::cat("x's rows must be 16-byte aligned (16-byte loads), got ", p.x_row_align(), "-byte alignment");
  if (!p.tiled() && (p.k % 32 != 0 || p.align_bytes < 16))
    return detail::cat("the rows layout is read in 16-byte chunks: K must be a multiple of 32 and qweight 16-byte aligned, got K=", p.k, " and ", p.align_bytes, "-byte alignment");
  if (ceil_div(p.n, 4) > 0x7FFFFFFF) return "grid.x (N / 4) is limited to 2^31 - 1";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(W4A16Problem, W4A16Args, "gemm_w4a16", "v02_decode_gemv",
                    "decode (M <= 16): 16-byte weight loads, lop3 dequant in registers, f32 FMAs, warp reductions",
                    80, kFlagProduction, gemm_w4a16_v02_supports, gemm_w4a16_v02_launch);

}  // namespace hk::gemm_w4a16_v02_decode_gemv
