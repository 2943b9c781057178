// rmsnorm/v06_bulk_row.cu
//
// Rung 6 (forward): one block per row, the whole row staged in shared memory by ONE bulk copy
// (cp.async.bulk: the TMA engine moving a contiguous byte range, no tensor map) that completes
// an mbarrier; the block then reads the row from shared memory twice: the sum of squares, then
// y = x * rstd * g with 16-byte loads of g and 16-byte streaming stores.
// What it fixes in v05: v05's bytes in flight per SM are bounded by registers (every thread
// holds a row slice plus the next one: 64 KiB per SM at 16384x8192). Here they are bounded by
// shared memory, and one instruction per block requests the whole row: at bf16 D 8192, 6 blocks
// of 256 threads per SM (40 registers in the sweep) have up to 96 KiB requested. The grid is
// not persistent: a finished block's slot goes at once to the next row's copy.
// Threads per block from D: about 4 16-byte vectors per thread (the sweep's best at D 8192: 256
// threads bf16, 512 f32), 64..1024 threads; each thread loops over its vectors t, t + threads, ...
// Math as v03/v05: ss in f32, rstd = rsqrt(ss / D + eps), y = x * rstd * g, rstd stored per row.
// Needs: forward; 16-byte aligned row starts (base and row strides: the bulk copy's source,
// destination and size are multiples of 16 bytes); D * sizeof(T) a multiple of 16 and at most
// 224 KiB (shared memory). Otherwise supports() says why. Rows of <= 128 vectors run correctly
// but leave most of a block idle: rmsnorm/dispatch.cpp sends them to v03 (warp per row).
// Measured (a standalone sweep of row kernels, H200, 2026-11-29, kernel
// rms_fwd_bulk_kernel "e3'", not the library bench): 96.3% of copy at 16384x8192 bf16 (256
// threads), 96.7% f32 (512 threads), against v05's 86.6% / 87.1% in the same run.
// Run:   hk bench rmsnorm --variant v06_bulk_row --shape 16384x8192
#include <climits>

#include "common/launch.cuh"
#include "common/ptx/mbarrier.cuh"
#include "common/ptx/tma.cuh"
#include "common/rows.cuh"
#include "rmsnorm/rmsnorm_op.hpp"

namespace hk::rmsnorm_v06_bulk_row {
namespace {

// NOTE: sm_90 lets a block opt in to 227 KiB (232448 bytes) of shared memory, static included;
// 224 KiB of row leaves room for the barrier and the reduction slots.
constexpr int64_t kMaxRowBytes = 224 * 1024;
static_assert(kMaxRowBytes < (1 << 20), "an mbarrier phase counts at most 2^20 - 1 transaction bytes");

template <class T, int kThreads>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_v06_kernel(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ y, float* __restrict__ rstd,
                       int dim, int64_t ld_x, int64_t ld_y, float eps) {
  constexpr int kV = kVec16<T>;
  using V = Vec<T, kV>;
  extern __shared__ __align__(128) unsigned char smem[];  // (dim) T: this block's row
  __shared__ __align__(8) uint64_t bar;                    // phase 0 completes when the row has landed
  __shared__ float slots[kThreads / 32];
  const int64_t r = blockIdx.x;
  const int nvec = dim / kV;  // whole 16-byte vectors (supports())
  if (threadIdx.x == 0) {
    const uint32_t bytes = static_cast<uint32_t>(nvec) * 16u;
    ptx::mbar_init(&bar, 1);
    ptx::mbar_fence_init();  // the init is visible to the copy engine's complete_tx
    ptx::mbar_arrive_expect_tx(&bar, bytes);
    ptx::bulk_load(smem, x + r * ld_x, bytes, &bar);
  }
  __syncthreads();  // the barrier is initialised before any thread waits on it
  ptx::mbar_wait(&bar, 0);  // the block's only phase: one row per block, the barrier never reused
  const V* row = reinterpret_cast<const V*>(smem);
  float f[kV], h[kV];
  float ss = 0.f;
#pragma unroll 4
  for (int i = threadIdx.x; i < nvec; i += kThreads) {
    widen(row[i], f);
#pragma unroll
    for (int j = 0; j < kV; ++j) ss = fmaf(f[j], f[j], ss);
  }
  const float rs = rsqrtf(block_reduce_slot<kThreads>(ss, SumOp{}, slots) / float(dim) + eps);
  if (threadIdx.x == 0) rstd[r] = rs;
  T* yr = y + r * ld_y;
#pragma unroll 4
  for (int i = threadIdx.x; i < nvec; i += kThreads) {
    const V gv = load_keep<T, kV>(g + int64_t(i) * kV);
    widen(row[i], f);
    widen(gv, h);
    V o;
#pragma unroll
    for (int j = 0; j < kV; ++j) o.v[j] = from_f32<T>(f[j] * rs * h[j]);
    store_stream<T, kV>(yr + int64_t(i) * kV, o);
  }
}

template <class T, int kThreads>
void launch_typed(const RmsNormArgs& a, cudaStream_t stream) {
  auto kernel = rmsnorm_v06_kernel<T, kThreads>;
  const size_t smem = static_cast<size_t>(a.dim) * sizeof(T);
  allow_dynamic_smem(kernel, smem);
  kernel<<<static_cast<unsigned>(a.rows), kThreads, smem, stream>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.g), static_cast<T*>(a.out), a.rstd_out,
      static_cast<int>(a.dim), a.ld_x, a.ld_out, a.eps);
  HK_CHECK_LAUNCH("rmsnorm_v06_kernel");
}

// About 4 16-byte vectors per thread: enough loop iterations to keep shared-memory reads and
// global stores issued back to back, few enough threads idle at a row's tail.
template <class T>
void run(const RmsNormArgs& a, cudaStream_t s) {
  const int64_t nvec = a.dim / kVec16<T>;
  if (nvec <= 256) launch_typed<T, 64>(a, s);
  else if (nvec <= 512) launch_typed<T, 128>(a, s);
  else if (nvec <= 1024) launch_typed<T, 256>(a, s);
  else if (nvec <= 2048) launch_typed<T, 512>(a, s);
  else launch_typed<T, 1024>(a, s);
}

void rmsnorm_v06_launch(const RmsNormArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "rmsnorm/v06_bulk_row", [&](auto t) { run<decltype(t)>(a, stream); });
}

std::string rmsnorm_v06_supports(const RmsNormProblem& p) {
  if (p.backward) return "forward only (the backward runs in v07_smem_dg or v03_vectorized_onchip)";
  if (p.row_align() < 16)
    return "needs 16-byte aligned row starts (base address and row stride) for the bulk copy, got " +
           std::to_string(p.row_align()) + "-byte alignment";
  const int64_t row_bytes = p.dim * (dtype_bits(p.dtype) / 8);
  if (row_bytes % 16 != 0)
    return "rows of " + std::to_string(p.dim) + " elements are not whole 16-byte vectors (the bulk copy moves " +
           "multiples of 16 bytes; got " + std::to_string(row_bytes) + " bytes)";
  if (row_bytes > kMaxRowBytes)
    return "the row must fit in shared memory: at most " + std::to_string(kMaxRowBytes) + " bytes, got " +
           std::to_string(row_bytes) + " (D=" + std::to_string(p.dim) + ")";
  if (p.rows > INT_MAX) return "a block per row: at most 2^31 - 1 rows, got " + std::to_string(p.rows);
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(RmsNormProblem, RmsNormArgs, "rmsnorm", "v06_bulk_row",
                    "forward default: block per row, the row staged in shared memory by one bulk copy (TMA) on an "
                    "mbarrier",
                    90, kFlagProduction, rmsnorm_v06_supports, rmsnorm_v06_launch);

}  // namespace hk::rmsnorm_v06_bulk_row
