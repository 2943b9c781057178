// rmsnorm/v03_vectorized_onchip.cu
//
// Rung 3: the row lives in registers. A row group — one warp for rows up to 32 x 4 vectors,
// else the whole 256-thread block — loads its row with 16-byte loads, all kVPT vectors per
// thread issued before the first use, reduces, and writes from the same registers. A resident
// grid walks the rows (several blocks per SM keep loads in flight while others reduce).
// Backward keeps x and dy in registers (S, then dx without a re-read) and each thread's dg
// columns in f32 registers across all the rows its group visits — the thread-to-column map is
// the same for every row — so dg leaves the kernel as one [blocks, D] partial row per block
// (warps of a block combined in shared memory first), summed by a tiny second kernel.
// Why a partial buffer and not atomics: fixed summation order (dg is bitwise reproducible) and
// no zero-fill pass; at 16384x8192 the buffer is ~2% of the traffic (docs/rmsnorm.md).
// Adds over v02: 16-byte accesses (8x fewer load instructions for bf16), several loads in
// flight per thread, no shared-memory staging, short rows packed 8 per block.
// Needs: 16-byte aligned row starts (base and row stride); D <= 256 x 8 vectors (16384 bf16/f16,
// 8192 f32). Longer rows: v04_split_row; unaligned: v02 / v01.
// Run:   hk bench rmsnorm --variant v03_vectorized_onchip --shape 16384x8192
#include "common/launch.cuh"
#include "common/reduce.cuh"
#include "common/rows.cuh"
#include "common/vec.cuh"
#include "rmsnorm/rmsnorm_op.hpp"

namespace hk::rmsnorm_v03_vectorized_onchip {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxVpt = 8;  // vectors per thread: 8 x 16 B of x (+ 8 of dy, + 8 x kV f32 of dg)

template <class T, int kGroup, int kVPT>
__global__ void __launch_bounds__(kThreads) rmsnorm_v03_fwd_kernel(const T* __restrict__ x, const T* __restrict__ g,
                                                                   T* __restrict__ y, float* __restrict__ rstd,
                                                                   int64_t rows, int64_t dim, int64_t ldx,
                                                                   int64_t ldy, float eps) {
  constexpr int kV = kVec16<T>;
  constexpr int kGroups = kThreads / kGroup;  // rows in flight per block
  using V = Vec<T, kV>;
  const int lane = threadIdx.x % kGroup;
  const int64_t ngroups = int64_t(gridDim.x) * kGroups;
  for (int64_t r = int64_t(blockIdx.x) * kGroups + threadIdx.x / kGroup; r < rows; r += ngroups) {
    V xv[kVPT];  // (kVPT, kV) this thread's slice of the row: columns (j * kGroup + lane) * kV + k
#pragma unroll
    for (int j = 0; j < kVPT; ++j) xv[j] = load_row_vec<T, kV>(x + r * ldx, int64_t(j * kGroup + lane) * kV, dim);
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kVPT; ++j)
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        float f = to_f32(xv[j].v[k]);
        ss += f * f;
      }
    ss = group_sum<kGroup, kThreads>(ss);
    const float rs = rsqrtf(ss / float(dim) + eps);
    if (lane == 0) rstd[r] = rs;
#pragma unroll
    for (int j = 0; j < kVPT; ++j) {
      const int64_t col = int64_t(j * kGroup + lane) * kV;
      if (col >= dim) continue;
      V gv = load_row_vec<T, kV, true>(g, col, dim), o;
#pragma unroll
      for (int k = 0; k < kV; ++k) o.v[k] = from_f32<T>(to_f32(xv[j].v[k]) * rs * to_f32(gv.v[k]));
      store_row_vec<T, kV>(y + r * ldy, col, dim, o);
    }
  }
}

// kWhole: D is a multiple of kV, so every vector of a row is whole or wholly past D and the
// loads and stores go unguarded. NOTE: the guarded element fallback (kept for other D) makes
// ptxas hold unpacked scalars for every vector of both operands: 162 registers at bf16 D 8192
// (one block of 256 per SM, 32 KiB in flight) against 124 unguarded (two blocks).
template <class T, int kGroup, int kVPT, bool kWhole>
__global__ void __launch_bounds__(kThreads) rmsnorm_v03_bwd_kernel(const T* __restrict__ x, const T* __restrict__ g,
                                                                   const float* __restrict__ rstd,
                                                                   const T* __restrict__ dy, T* __restrict__ dx,
                                                                   float* __restrict__ part, int64_t rows,
                                                                   int64_t dim, int64_t ldx, int64_t ldg,
                                                                   int64_t ldo) {
  constexpr int kV = kVec16<T>;
  constexpr int kGroups = kThreads / kGroup;
  constexpr int kCols = kGroup * kVPT * kV;  // columns one group covers (>= dim)
  using V = Vec<T, kV>;
  const int lane = threadIdx.x % kGroup;
  const int64_t ngroups = int64_t(gridDim.x) * kGroups;
  float dg[kVPT][kV] = {};  // (kVPT, kV) f32 dg of this thread's columns over its group's rows
  for (int64_t r = int64_t(blockIdx.x) * kGroups + threadIdx.x / kGroup; r < rows; r += ngroups) {
    V xv[kVPT], gv[kVPT];
#pragma unroll
    for (int j = 0; j < kVPT; ++j) {
      const int64_t col = int64_t(j * kGroup + lane) * kV;
      if constexpr (kWhole) {
        xv[j] = col < dim ? load_stream<T, kV>(x + r * ldx + col) : V{};
        gv[j] = col < dim ? load_stream<T, kV>(dy + r * ldg + col) : V{};
      } else {
        xv[j] = load_row_vec<T, kV>(x + r * ldx, col, dim);
        gv[j] = load_row_vec<T, kV>(dy + r * ldg, col, dim);
      }
    }
    const float rs = rstd[r];
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < kVPT; ++j) {
      const int64_t col = int64_t(j * kGroup + lane) * kV;
      if (col >= dim) continue;
      V w = kWhole ? load_keep<T, kV>(g + col) : load_row_vec<T, kV, true>(g, col, dim);
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        float xf = to_f32(xv[j].v[k]), gf = to_f32(gv[j].v[k]);
        s += to_f32(w.v[k]) * gf * xf;
        dg[j][k] += gf * xf * rs;  // zero-filled tail lanes add 0
      }
    }
    s = group_sum<kGroup, kThreads>(s);
    const float c = rs * rs * rs * s / float(dim);
#pragma unroll
    for (int j = 0; j < kVPT; ++j) {
      const int64_t col = int64_t(j * kGroup + lane) * kV;
      if (col >= dim) continue;
      V w = kWhole ? load_keep<T, kV>(g + col) : load_row_vec<T, kV, true>(g, col, dim), o;
#pragma unroll
      for (int k = 0; k < kV; ++k)
        o.v[k] = from_f32<T>(rs * to_f32(w.v[k]) * to_f32(gv[j].v[k]) - to_f32(xv[j].v[k]) * c);
      if constexpr (kWhole) store_stream<T, kV>(dx + r * ldo + col, o);
      else store_row_vec<T, kV>(dx + r * ldo, col, dim, o);
    }
  }
  float* out = part + int64_t(blockIdx.x) * dim;
  if constexpr (kGroups == 1) {
#pragma unroll
    for (int j = 0; j < kVPT; ++j)
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        const int64_t col = int64_t(j * kGroup + lane) * kV + k;
        if (col < dim) out[col] = dg[j][k];
      }
  } else {
    // The block's warps cover the same columns: add their dg in shared memory, in warp order.
    __shared__ float buf[kGroups][kCols];  // (kGroups, kCols) f32, <= 32 KiB
    const int grp = threadIdx.x / kGroup;
#pragma unroll
    for (int j = 0; j < kVPT; ++j)
#pragma unroll
      for (int k = 0; k < kV; ++k) buf[grp][(j * kGroup + lane) * kV + k] = dg[j][k];
    __syncthreads();
    for (int c = threadIdx.x; c < kCols && c < dim; c += kThreads) {
      float acc = 0.f;
#pragma unroll
      for (int w = 0; w < kGroups; ++w) acc += buf[w][c];
      out[c] = acc;
    }
  }
}

template <class T, int kGroup, int kVPT>
void launch_cfg(const RmsNormArgs& a, cudaStream_t s) {
  constexpr int kGroups = kThreads / kGroup;
  const int64_t need = ceil_div(a.rows, kGroups);
  if (!a.backward) {
    auto kernel = rmsnorm_v03_fwd_kernel<T, kGroup, kVPT>;
    static const int resident = resident_grid(kernel, kThreads);
    int blocks = static_cast<int>(std::min<int64_t>(need, resident));
    kernel<<<blocks, kThreads, 0, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.g), static_cast<T*>(a.out),
                                       a.rstd_out, a.rows, a.dim, a.ld_x, a.ld_out, a.eps);
    HK_CHECK_LAUNCH("rmsnorm_v03_fwd_kernel");
    return;
  }
  // The unguarded form for 16-bit types only: at f32 kVPT 8 ptxas fit it in 128 registers
  // (from 158) only with a 4-byte spill, which the build forbids.
  constexpr bool kWholeForm = sizeof(T) == 2;
  const bool whole = kWholeForm && a.dim % kVec16<T> == 0;
  auto kernel = whole ? rmsnorm_v03_bwd_kernel<T, kGroup, kVPT, kWholeForm>
                      : rmsnorm_v03_bwd_kernel<T, kGroup, kVPT, false>;
  static const int resident_whole = resident_grid(rmsnorm_v03_bwd_kernel<T, kGroup, kVPT, kWholeForm>, kThreads);
  static const int resident_any = resident_grid(rmsnorm_v03_bwd_kernel<T, kGroup, kVPT, false>, kThreads);
  const int resident = whole ? resident_whole : resident_any;
  int blocks = static_cast<int>(std::min<int64_t>(need, resident));
  StreamScratch part(int64_t(blocks) * a.dim * 4, s);
  kernel<<<blocks, kThreads, 0, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.g), a.rstd_in,
                                     static_cast<const T*>(a.dy), static_cast<T*>(a.out), part.as<float>(), a.rows,
                                     a.dim, a.ld_x, a.ld_dy, a.ld_out);
  HK_CHECK_LAUNCH("rmsnorm_v03_bwd_kernel");
  sum_partials(part.as<float>(), blocks, a.dim, static_cast<T*>(a.dg), s);
}

// Smallest configuration whose registers hold the row: a warp per row up to 4 vectors per
// lane (short rows, 8 rows per block), then the whole block with 1..8 vectors per thread.
template <class T>
void run(const RmsNormArgs& a, cudaStream_t s) {
  const int64_t nvec = ceil_div(a.dim, kVec16<T>);
  if (nvec <= 32) launch_cfg<T, 32, 1>(a, s);
  else if (nvec <= 64) launch_cfg<T, 32, 2>(a, s);
  else if (nvec <= 128) launch_cfg<T, 32, 4>(a, s);
  else if (nvec <= 256) launch_cfg<T, kThreads, 1>(a, s);
  else if (nvec <= 512) launch_cfg<T, kThreads, 2>(a, s);
  else if (nvec <= 1024) launch_cfg<T, kThreads, 4>(a, s);
  else launch_cfg<T, kThreads, kMaxVpt>(a, s);
}

void rmsnorm_v03_launch(const RmsNormArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "rmsnorm/v03_vectorized_onchip", [&](auto t) { run<decltype(t)>(a, stream); });
}

std::string rmsnorm_v03_supports(const RmsNormProblem& p) {
  if (p.row_align() < 16)
    return "needs 16-byte aligned row starts (base address and row stride) for 16-byte loads, got " +
           std::to_string(p.row_align()) + "-byte alignment";
  const int64_t max_dim = int64_t(kThreads) * kMaxVpt * (16 / (dtype_bits(p.dtype) / 8));
  if (p.dim > max_dim)
    return "the row must fit in registers: D <= " + std::to_string(max_dim) + ", got D=" + std::to_string(p.dim);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(RmsNormProblem, RmsNormArgs, "rmsnorm", "v03_vectorized_onchip",
                    "row in registers, 16-byte loads, warp-per-row for short rows; dg partials in registers", 90,
                    kFlagProduction, rmsnorm_v03_supports, rmsnorm_v03_launch);

}  // namespace hk::rmsnorm_v03_vectorized_onchip
