// gemm_w4a16/v02_decode_gemv.cu
//
// Rung 2: the decode kernel (M <= 16): a GEMV-shaped pass that reads each packed weight once,
// with 16-byte loads, and never writes a dequantised matrix.
// Adds over v01: a block owns 8 output columns (8 rows of W); its 8 warps stream those rows
// with one 16-byte load per lane (32 weights), dequantise them in registers with the
// magic-number trick (w4a16.cuh: one lop3, one subtract and one multiply per two weights, no
// int->float conversion), and every lane multiplies them into up to 16 rows of x (16-byte
// loads, L1/L2-resident: x is M K 2 bytes) in f32. Partial sums meet through warp shuffles
// (and, for the tiled layout, shared memory). W is read as a stream at the width HBM wants, so
// the kernel's time should be the weight bytes over the copy bandwidth (8 MB for 4096x4096:
// about 2 us at 4.2 TB/s; not yet measured).
//   rows layout:  warp w streams row 8b + w; lane l takes 16-byte chunks l, l + 32, ... (32
//                 consecutive k each, one group since g is a multiple of 32 or K).
//   tiled layout: the block streams n-tile b; warp w takes 128-wide k-tiles w, w + 8, ...,
//                 each one coalesced 512-byte load per warp; lane 4r + t holds row r's words
//                 for k = 128 kb + 32 c + 8 t (c = 0..3).
// Needs: M <= 16; x's rows 16-byte aligned (16-byte x loads); rows layout: K a multiple of 32
// and qweight 16-byte aligned (whole 16-byte chunks per row).
// Run:   hk bench gemm_w4a16 --variant v02_decode_gemv --shape 1x4096x4096
#include "common/launch.cuh"
#include "gemm_w4a16/w4a16.cuh"

namespace hk {
namespace {

constexpr int kThreads = 256;  // 8 warps
constexpr int kMaxRows = 16;   // M limit

template <class T>
__device__ __forceinline__ float2 pair_to_float2(uint32_t u) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xFFFF0000u));  // bf16 = top half of f32
  } else {
    return __half22float2(w4a16::as_t2<__half>(u));
  }
}

// acc[m] += sum_j x[m, k0 + j] * w_j over the eight weights of `word`, for m < rows.
template <class T, int kMaxM>
__device__ __forceinline__ void accumulate_word(uint32_t word, const w4a16::GroupParams<T>& gp, const T* x,
                                                int64_t ld_x, int64_t k0, int rows, float (&acc)[kMaxM]) {
  w4a16::T2<T> p[4];
  w4a16::dequant_word<T>(word, gp, p);
  float w[8];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = pair_to_float2<T>(w4a16::as_u32<T>(p[j]));
    w[j] = f.x, w[j + 4] = f.y;
  }
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) {
    if (m < rows) {
      const uint4 u = __ldg(reinterpret_cast<const uint4*>(x + m * ld_x + k0));
      const float2 x01 = pair_to_float2<T>(u.x), x23 = pair_to_float2<T>(u.y);
      const float2 x45 = pair_to_float2<T>(u.z), x67 = pair_to_float2<T>(u.w);
      float s = acc[m];
      s = fmaf(x01.x, w[0], s), s = fmaf(x01.y, w[1], s), s = fmaf(x23.x, w[2], s), s = fmaf(x23.y, w[3], s);
      s = fmaf(x45.x, w[4], s), s = fmaf(x45.y, w[5], s), s = fmaf(x67.x, w[6], s), s = fmaf(x67.y, w[7], s);
      acc[m] = s;
    }
  }
}

template <class T, int kMaxM>
__global__ void __launch_bounds__(kThreads) gemm_w4a16_v02_rows_kernel(W4A16Args a) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = int64_t(blockIdx.x) * 8 + warp;
  if (n >= a.n) return;
  const T* x = static_cast<const T*>(a.x);
  const int rows = static_cast<int>(a.m);
  const int64_t chunks = a.k / 32;  // 16-byte chunks per weight row
  const uint4* wrow = reinterpret_cast<const uint4*>(a.qweight + n * (a.k / 8));
  float acc[kMaxM];
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) acc[m] = 0.f;
#pragma unroll 4
  for (int64_t c = lane; c < chunks; c += 32) {
    const uint4 q = __ldcs(wrow + c);  // streamed once: evict-first
    const int64_t k0 = c * 32;
    const w4a16::GroupParams<T> gp = w4a16::group_params<T>(a, n, k0 / a.group);
    accumulate_word<T, kMaxM>(q.x, gp, x, a.ld_x, k0, rows, acc);
    accumulate_word<T, kMaxM>(q.y, gp, x, a.ld_x, k0 + 8, rows, acc);
    accumulate_word<T, kMaxM>(q.z, gp, x, a.ld_x, k0 + 16, rows, acc);
    accumulate_word<T, kMaxM>(q.w, gp, x, a.ld_x, k0 + 24, rows, acc);
  }
#pragma unroll
  for (int m = 0; m < kMaxM; ++m) {
    float s = acc[m];
#pragma unroll
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xFFFFFFFFu, s, off);
    if (m < rows && lane == m % 32) static_cast<T*>(a.y)[m * a.ld_y + n] = static_cast<T>(s);
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
  const int64_t blocks = ceil_div(a.n, 8);
  if (a.layout == W4A16Layout::kTiled) {
    gemm_w4a16_v02_tiled_kernel<T, kMaxM><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
    HK_CHECK_LAUNCH("gemm_w4a16_v02_tiled_kernel");
  } else {
    gemm_w4a16_v02_rows_kernel<T, kMaxM><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
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
  if (ceil_div(p.n, 8) > 0x7FFFFFFF) return "grid.x (N / 8) is limited to 2^31 - 1";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(W4A16Problem, W4A16Args, "gemm_w4a16", "v02_decode_gemv",
                    "decode (M <= 16): 16-byte weight loads, lop3 dequant in registers, f32 FMAs, warp reductions",
                    80, kFlagProduction, gemm_w4a16_v02_supports, gemm_w4a16_v02_launch);

}  // namespace hk
