// rmsnorm/v07_smem_dg.cu
//
// Rung 7 (backward): v03's row in registers, with dg accumulated in shared memory instead of
// registers. A resident grid of blocks, each split into kGroups row groups of kGT threads; a
// group walks its rows (block b, group w: rows b * kGroups + w, then + grid * kGroups, ...), and
// lane lt owns the kPer 16-byte vectors lt, lt + kGT, ... of every row. Per row: S = sum g*dy*x
// (one barrier: __syncthreads for one group, a named barrier per group otherwise, slots
// alternated by row parity), dx = rstd * g * dy - x * rstd^3 * S / D, and dy * x * rstd added to
// the lane's own f32 dg slots in shared memory (no other thread touches them: no race, fixed
// order). At the end the block adds its groups' dg in group order into one [blocks, D] partial
// row, summed in a fixed order by v03's second kernel (sum_partials): dg is deterministic.
// What it changes from v03 (77.0% of copy at 16384x8192 bf16 in the sweep below): v03 holds dg
// in f32 registers next to the row (124 registers at bf16 8192: 2 blocks of 256 threads, 16
// warps per SM). With dg in shared memory the 2-vector configurations below fit 64 registers:
// 32 warps per SM hold the same 64 KiB of x and dy, in row groups that reach their reduction
// barriers at different times. (Why that gains was not profiled.)
// Configurations by row length (16-byte vectors): <= 1024 vectors: 1024-thread blocks of 8, 4 or
// 2 groups of 128, 256 or 512 threads x 2 vectors (the sweep's "b", 64 registers); 1025..2048
// vectors: one group of 512 threads x 4 vectors with the next row's x and dy loaded before this
// row's work (the sweep's "c", <= 128 registers; without the prefetch this shape measured 69.7%).
// Needs: backward; 16-byte aligned row starts (base and row strides); D * sizeof(T) a multiple
// of 16, at most 2048 16-byte vectors (32 KiB). Otherwise supports() says why. Rows of <= 128
// vectors run correctly but leave most of a row group idle: rmsnorm/dispatch.cpp sends them to
// v03 (warp per row).
// Measured (a standalone sweep of row kernels, H200, 2026-11-29, kernel
// rms_bwd_smemdg_kernel, not the library bench; dg's second kernel counted in time): 81.1% of
// copy at 16384x8192 bf16 ("b", 2 groups x 512 threads x 2 vectors), 80.6% f32 ("c", 1 group x
// 512 x 4 with prefetch), against v03's 77.0% / 79.6% in the same run.
// Run:   hk bench rmsnorm --variant v07_smem_dg --shape 16384x8192   (the backward rows)
#include "common/launch.cuh"
#include "common/rows.cuh"
#include "rmsnorm/rmsnorm_op.hpp"

namespace hk::rmsnorm_v07_smem_dg {
namespace {

constexpr int64_t kMaxVecs = 2048;  // one group of 512 threads x 4 vectors

template <class T, int kGT, int kGroups, int kPer, bool kPrefetch>
__global__ void __launch_bounds__(kGT * kGroups, 1)
    rmsnorm_v07_kernel(const T* __restrict__ x, const T* __restrict__ g, const float* __restrict__ rstd,
                       const T* __restrict__ dy, T* __restrict__ dx, float* __restrict__ part, int64_t rows, int dim,
                       int64_t ld_x, int64_t ld_dy, int64_t ld_dx) {
  constexpr int kV = kVec16<T>;
  constexpr int kQ = kV / 4;              // float4 dg slots per 16-byte vector
  constexpr int kCols = kGT * kPer * kV;  // columns one group covers (>= dim)
  constexpr int kThreads = kGT * kGroups;
  using V = Vec<T, kV>;
  // (kGroups, kPer * kQ, kGT) f32x4: group w's dg, lane lt's slot (k, q) at [w][k * kQ + q][lt]
  // (lanes side by side: conflict-free 16-byte accesses), holding columns (lt + k kGT) kV + 4q ...
  extern __shared__ float4 dgs[];
  __shared__ float slots[kGroups][2][kGT / 32];  // [group][row parity][warp]
  const int grp = threadIdx.x / kGT, lt = threadIdx.x % kGT;
  float4* my = dgs + grp * (kCols / 4);
#pragma unroll
  for (int i = 0; i < kPer * kQ; ++i) my[i * kGT + lt] = make_float4(0.f, 0.f, 0.f, 0.f);
  unsigned whole = 0;  // bit k: vector lt + k kGT lies inside the row (D is whole vectors)
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if ((lt + k * kGT + 1) * kV <= dim) whole |= 1u << k;
  const T* gp = g + lt * kV;

  // (kPer, kV) this lane's vectors of x and dy of one row; vectors past D zero (never used).
  auto load_row = [&](V(&xs)[kPer], V(&ds)[kPer], int64_t row) {
    const T* xr = x + row * ld_x + lt * kV;
    const T* dr = dy + row * ld_dy + lt * kV;
#pragma unroll
    for (int k = 0; k < kPer; ++k)
      if ((whole >> k) & 1u) {
        xs[k] = load_stream<T, kV>(xr + k * kGT * kV);
        ds[k] = load_stream<T, kV>(dr + k * kGT * kV);
      } else {
        xs[k] = V{};
        ds[k] = V{};
      }
  };
  const int64_t rstep = int64_t(gridDim.x) * kGroups;
  int64_t r = int64_t(blockIdx.x) * kGroups + grp;
  V xv[kPer], dv[kPer];
  V xn[kPrefetch ? kPer : 1], dn[kPrefetch ? kPer : 1];  // the group's next row, in flight
  if constexpr (kPrefetch)
    if (r < rows) load_row(xv, dv, r);
  for (int parity = 0; r < rows; r += rstep, parity ^= 1) {
    if constexpr (kPrefetch) {
      if (r + rstep < rows) load_row(xn, dn, r + rstep);
    } else {
      load_row(xv, dv, r);
    }
    const float rs = rstd[r];
    float s = 0.f, f[kV], e[kV], h[kV];
    // Pass 1: S and the dg slots. opaque() + widen here, widen_alt below: the f32 forms of the
    // slice die after this pass instead of living across the barrier (common/rows.cuh).
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (!((whole >> k) & 1u)) continue;
      opaque(xv[k]);
      opaque(dv[k]);
      widen(xv[k], f);
      widen(dv[k], e);
      widen(load_keep_ordered<T, kV>(gp + k * kGT * kV), h);
#pragma unroll
      for (int j = 0; j < kV; ++j) s = fmaf(h[j] * e[j], f[j], s);
#pragma unroll
      for (int q = 0; q < kQ; ++q) {
        float4& slot = my[(k * kQ + q) * kGT + lt];
        float4 a = slot;
        a.x += e[4 * q + 0] * f[4 * q + 0] * rs;
        a.y += e[4 * q + 1] * f[4 * q + 1] * rs;
        a.z += e[4 * q + 2] * f[4 * q + 2] * rs;
        a.w += e[4 * q + 3] * f[4 * q + 3] * rs;
        slot = a;
      }
    }
    s = group_reduce_slot<kGT, kGroups>(s, slots[grp][parity]);
    const float c = rs * rs * rs * s / float(dim);
    // Pass 2: dx from the same registers (g re-read through L1/L2: it is the same for every row).
    T* o = dx + r * ld_dx + lt * kV;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (!((whole >> k) & 1u)) continue;
      opaque(xv[k]);
      opaque(dv[k]);
      widen_alt(xv[k], f);
      widen_alt(dv[k], e);
      widen_alt(load_keep_ordered<T, kV>(gp + k * kGT * kV), h);
      V w;
#pragma unroll
      for (int j = 0; j < kV; ++j) w.v[j] = from_f32<T>(rs * h[j] * e[j] - f[j] * c);
      store_stream<T, kV>(o + k * kGT * kV, w);
    }
    if constexpr (kPrefetch) {
#pragma unroll
      for (int k = 0; k < kPer; ++k) xv[k] = xn[k], dv[k] = dn[k];
    }
  }
  __syncthreads();  // every group's dg slots are final
  // The block's partial row: groups added in group order, stored in column order.
  float4* out = reinterpret_cast<float4*>(part + int64_t(blockIdx.x) * dim);
  for (int i = threadIdx.x; i < kCols / 4; i += kThreads) {
    const int kq = i / kGT, l = i % kGT, k = kq / kQ, q = kq % kQ;
    const int col = (l + k * kGT) * kV + 4 * q;  // D is a multiple of kV: the float4 is whole or past D
    if (col >= dim) continue;
    float4 acc = dgs[i];
#pragma unroll
    for (int w = 1; w < kGroups; ++w) {
      const float4 b = dgs[w * (kCols / 4) + i];
      acc.x += b.x, acc.y += b.y, acc.z += b.z, acc.w += b.w;
    }
    out[col / 4] = acc;
  }
}

template <class T, int kGT, int kGroups, int kPer, bool kPrefetch>
void launch_typed(const RmsNormArgs& a, cudaStream_t s) {
  constexpr int kThreads = kGT * kGroups;
  constexpr int kSmem = kGroups * kGT * kPer * kVec16<T> * 4;  // (kGroups, kCols) f32 dg
  static_assert(kSmem <= 227 * 1024, "the dg slots fit sm_90's shared-memory opt-in per block");
  auto kernel = rmsnorm_v07_kernel<T, kGT, kGroups, kPer, kPrefetch>;
  allow_dynamic_smem(kernel, kSmem);
  static const int resident = resident_grid(kernel, kThreads, kSmem);
  const int blocks = static_cast<int>(std::min<int64_t>(resident, ceil_div(a.rows, kGroups)));
  StreamScratch part(int64_t(blocks) * a.dim * 4, s);
  kernel<<<blocks, kThreads, kSmem, s>>>(static_cast<const T*>(a.x), static_cast<const T*>(a.g), a.rstd_in,
                                         static_cast<const T*>(a.dy), static_cast<T*>(a.out), part.as<float>(),
                                         a.rows, static_cast<int>(a.dim), a.ld_x, a.ld_dy, a.ld_out);
  HK_CHECK_LAUNCH("rmsnorm_v07_kernel");
  sum_partials(part.as<float>(), blocks, a.dim, static_cast<T*>(a.dg), s);
}

template <class T>
void run(const RmsNormArgs& a, cudaStream_t s) {
  const int64_t nvec = a.dim / kVec16<T>;
  if (nvec <= 256) launch_typed<T, 128, 8, 2, false>(a, s);
  else if (nvec <= 512) launch_typed<T, 256, 4, 2, false>(a, s);
  else if (nvec <= 1024) launch_typed<T, 512, 2, 2, false>(a, s);
  else launch_typed<T, 512, 1, 4, true>(a, s);
}

void rmsnorm_v07_launch(const RmsNormArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "rmsnorm/v07_smem_dg", [&](auto t) { run<decltype(t)>(a, stream); });
}

std::string rmsnorm_v07_supports(const RmsNormProblem& p) {
  if (!p.backward) return "backward only (the forward runs in v06_bulk_row, v05 or v03)";
  if (p.row_align() < 16)
    return "needs 16-byte aligned row starts (base address and row strides) for 16-byte loads, got " +
           std::to_string(p.row_align()) + "-byte alignment";
  const int64_t row_bytes = p.dim * (dtype_bits(p.dtype) / 8);
  if (row_bytes % 16 != 0)
    return "rows of " + std::to_string(p.dim) + " elements are not whole 16-byte vectors (" +
           std::to_string(row_bytes) + " bytes; v03 reads a partial last vector element by element)";
  if (row_bytes > kMaxVecs * 16)
    return "rows of more than " + std::to_string(kMaxVecs) + " 16-byte vectors do not fit in registers (512 " +
           "threads x 4 vectors), got " + std::to_string(row_bytes) + " bytes";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(RmsNormProblem, RmsNormArgs, "rmsnorm", "v07_smem_dg",
                    "backward default: row groups with x and dy in registers, dg in shared memory instead of "
                    "registers; [blocks, D] partials",
                    90, kFlagProduction, rmsnorm_v07_supports, rmsnorm_v07_launch);

}  // namespace hk::rmsnorm_v07_smem_dg
