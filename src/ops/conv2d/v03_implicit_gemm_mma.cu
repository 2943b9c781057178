// conv2d/v03_implicit_gemm_mma.cu
//
// Rung 3: forward NHWC convolution as an implicit GEMM on tensor cores (mma.sync m16n8k16,
// f32 accumulators). Rows are output pixels (M = N OH OW), columns output channels (Cout), the
// reduction runs over (ky, kx, c) (K = kH kW C), c fastest: a 16-byte run of 8 channels of one
// tap is contiguous in NHWC, so each A chunk of the activation patch is one cp.async gathered
// from its input pixel (zero-filled beyond the padding), and the NHWC weight [Cout, kH, kW, C]
// is already the K-contiguous [Cout, K] operand. 128 x 128 x 32 block tiles, 8 warps of
// 64 x 32, a 3-stage cp.async ring, XOR-swizzled 64-byte smem rows so every ldmatrix is
// conflict-free; bias and the rounding to the output dtype in the epilogue.
// Adds over cuDNN's path: nothing yet measured; over v01: tensor cores and operand reuse
// through shared memory (each A chunk feeds 128 output channels, each B chunk 128 pixels).
// Ladder-only until it has run on a GPU.
// Needs: forward, NHWC, groups == 1, f16/bf16, C and Cout multiples of 8, 16-byte aligned
// operands; otherwise supports() says why.
// Run:   hk bench conv2d --variant v03_implicit_gemm_mma --shape 64x256x56x56_256x3x3
#include <type_traits>

#include "common/launch.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/mma.cuh"
#include "common/vec.cuh"
#include "conv2d/conv2d_op.hpp"

namespace hk::conv2d_v03_implicit_gemm_mma {
namespace {

constexpr int kThreads = 256;
constexpr int kBM = 128, kBN = 128, kBK = 32;  // block tile (pixels, channels, reduction)
constexpr int kStages = 3;
constexpr int kWarpM = 64, kWarpN = 32;        // 2 x 4 warps
constexpr int kTileElems = kBM * kBK;          // one operand tile of one stage, 16-bit elements
constexpr size_t kSmem = size_t(kStages) * 2 * kTileElems * 2;
static_assert(kBM == kBN, "A and B tiles share one shape and one swizzle");
static_assert(kBK * 2 == 64, "a tile row is 64 bytes: 4 chunks of 16, swizzled by (row / 2) % 4");
static_assert(kThreads / 4 * 2 == kBM, "each thread copies one chunk column of 2 rows per operand");
static_assert((kBM / kWarpM) * (kBN / kWarpN) * 32 == kThreads, "8 warps cover the tile");
static_assert(kSmem <= 48 * 1024, "no shared-memory opt-in needed");

// Offset (elements) of chunk `chunk` (8 elements) of row `row` in a (128, 32) swizzled tile.
__device__ __forceinline__ int swz(int row, int chunk) { return row * kBK + ((chunk ^ ((row >> 1) & 3)) * 8); }

template <class T>
__global__ void __launch_bounds__(kThreads) conv2d_v03_kernel(const Conv2dArgs g) {
  extern __shared__ float4 conv2d_v03_smem[];
  T* smem = reinterpret_cast<T*>(conv2d_v03_smem);  // stage s: A at 2 s tiles, B at 2 s + 1
  const T* __restrict__ x = static_cast<const T*>(g.x);
  const T* __restrict__ w = static_cast<const T*>(g.w);
  const T* __restrict__ bias = static_cast<const T*>(g.bias);
  T* __restrict__ y = static_cast<T*>(g.out);
  const int64_t M = g.n * g.oh * g.ow, K = g.kh * g.kw * g.c, C = g.c, Cout = g.cout;
  const int64_t m0 = int64_t(blockIdx.x) * kBM, n0 = int64_t(blockIdx.y) * kBN;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / (kBN / kWarpN), wn = warp % (kBN / kWarpN);

  // This thread's copies: chunk column `chunk` of rows r and r + 64 of both operands.
  const int chunk = tid & 3, r0 = tid >> 2;
  const T* a_base[2];
  int64_t a_iy0[2], a_ix0[2];
  bool a_ok[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t m = m0 + r0 + 64 * i;
    a_ok[i] = m < M;
    const int64_t mm = a_ok[i] ? m : 0;
    const int64_t ox = mm % g.ow, oy = mm / g.ow % g.oh, n = mm / (g.ow * g.oh);
    a_base[i] = x + n * g.h * g.w_in * C;
    a_iy0[i] = oy * g.prm.stride_h - g.prm.pad_top;
    a_ix0[i] = ox * g.prm.stride_w - g.prm.pad_left;
  }

  auto load_tile = [&](int64_t kt, int stage) {
    T* as = smem + (2 * stage) * kTileElems;
    T* bs = smem + (2 * stage + 1) * kTileElems;
    const int64_t k0 = kt * kBK + chunk * 8;
    const bool k_ok = k0 < K;
    const int64_t tap = k_ok ? k0 / C : 0, c = k0 - tap * C;
    const int64_t ky = tap / g.kw, kx = tap - ky * g.kw;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = r0 + 64 * i;
      const int64_t iy = a_iy0[i] + ky * g.prm.dilation_h, ix = a_ix0[i] + kx * g.prm.dilation_w;
      const bool ok = k_ok && a_ok[i] && iy >= 0 && iy < g.h && ix >= 0 && ix < g.w_in;
      ptx::cp_async_16(as + swz(row, chunk), ok ? a_base[i] + (iy * g.w_in + ix) * C + c : x, ok ? 16 : 0);
      const int64_t co = n0 + row;
      const bool bok = k_ok && co < Cout;
      ptx::cp_async_16(bs + swz(row, chunk), bok ? w + co * K + k0 : w, bok ? 16 : 0);
    }
  };

  float acc[kWarpM / 16][kWarpN / 8][4];
#pragma unroll
  for (int i = 0; i < kWarpM / 16; ++i)
#pragma unroll
    for (int j = 0; j < kWarpN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  const int64_t k_tiles = (K + kBK - 1) / kBK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_tile(s, s);
    ptx::cp_async_commit();
  }
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();  // tile kt is in shared memory; every warp is done with tile kt - 1's stage
    const int64_t next = kt + kStages - 1;
    if (next < k_tiles) load_tile(next, int(next % kStages));
    ptx::cp_async_commit();

    const int stage = int(kt % kStages);
    const T* as = smem + (2 * stage) * kTileElems;
    const T* bs = smem + (2 * stage + 1) * kTileElems;
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      uint32_t a[kWarpM / 16][4], b[kWarpN / 8][2];
#pragma unroll
      for (int i = 0; i < kWarpM / 16; ++i) {
        const int row = wm * kWarpM + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ptx::ldmatrix_x4<false>(a[i], as + swz(row, ks * 2 + (lane >> 4)));
      }
#pragma unroll
      for (int p = 0; p < kWarpN / 16; ++p) {
        const int row = wn * kWarpN + p * 16 + (lane & 7) + (lane >> 4) * 8;
        uint32_t r[4];
        ptx::ldmatrix_x4<false>(r, bs + swz(row, ks * 2 + ((lane >> 3) & 1)));
        b[2 * p][0] = r[0], b[2 * p][1] = r[1], b[2 * p + 1][0] = r[2], b[2 * p + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kWarpM / 16; ++i)
#pragma unroll
        for (int j = 0; j < kWarpN / 8; ++j) ptx::mma_m16n8k16<T>(acc[i][j], a[i], b[j]);
    }
  }
  ptx::cp_async_wait<0>();

  // Epilogue: d[0..1] at (lane / 4, 2 (lane % 4) + {0, 1}), d[2..3] 8 rows below; y is [M, Cout].
#pragma unroll
  for (int i = 0; i < kWarpM / 16; ++i)
#pragma unroll
    for (int j = 0; j < kWarpN / 8; ++j) {
      const int64_t col = n0 + wn * kWarpN + j * 8 + (lane & 3) * 2;
      if (col >= Cout) continue;
      const float b0 = bias ? to_f32(bias[col]) : 0.f, b1 = bias ? to_f32(bias[col + 1]) : 0.f;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int64_t row = m0 + wm * kWarpM + i * 16 + (lane >> 2) + hh * 8;
        if (row >= M) continue;
        Vec<T, 2> v;
        v.v[0] = from_f32<T>(acc[i][j][2 * hh] + b0);
        v.v[1] = from_f32<T>(acc[i][j][2 * hh + 1] + b1);
        *reinterpret_cast<Vec<T, 2>*>(y + row * Cout + col) = v;
      }
    }
}

void conv2d_v03_launch(const Conv2dArgs& a, cudaStream_t stream) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const dim3 grid(static_cast<unsigned>(ceil_div(a.n * a.oh * a.ow, kBM)), static_cast<unsigned>(ceil_div(a.cout, kBN)));
    conv2d_v03_kernel<T><<<grid, kThreads, kSmem, stream>>>(a);
    HK_CHECK_LAUNCH("conv2d_v03_kernel");
  };
  if (a.dtype == DType::kBF16) run(__nv_bfloat16{});
  else if (a.dtype == DType::kF16) run(__half{});
  else HK_THROW(kType, "conv2d/v03_implicit_gemm_mma: f16 or bf16 only, got ", to_string(a.dtype));
}

std::string conv2d_v03_supports(const Conv2dProblem& p) {
  if (p.dir != ConvDirection::kForward) return "forward only";
  if (!p.nhwc()) return "NHWC only (the patch gather reads 8-channel runs), got NCHW";
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16) return "f16 or bf16 only (tensor cores), got " + std::string(to_string(p.dtype));
  if (p.prm.groups != 1) return "groups == 1 only, got " + std::to_string(p.prm.groups);
  if (p.c % 8 != 0 || p.cout % 8 != 0)
    return "C and Cout must be multiples of 8 (16-byte chunks), got C=" + std::to_string(p.c) + " Cout=" + std::to_string(p.cout);
  if (p.align_bytes < 16) return "operands must be 16-byte aligned, got " + std::to_string(p.align_bytes);
  if (ceil_div(p.n * p.oh() * p.ow(), kBM) > INT32_MAX || ceil_div(p.cout, kBN) > 65535) return "grid too large";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(Conv2dProblem, Conv2dArgs, "conv2d", "v03_implicit_gemm_mma",
                    "implicit GEMM on tensor cores: mma.sync m16n8k16, cp.async gathers of NHWC patches, 3-stage "
                    "ring, 128x128x32 tiles",
                    80, kFlagNone, conv2d_v03_supports, conv2d_v03_launch);

}  // namespace hk::conv2d_v03_implicit_gemm_mma
