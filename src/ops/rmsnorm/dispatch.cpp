// rmsnorm/dispatch.cpp — which rmsnorm rung serves a public call (hk::rms_norm,
// hk::rms_norm_backward, hk.rms_norm).
//
// Routes best first; each rung's supports() declines what it cannot run (unaligned rows, rows
// that are not whole 16-byte vectors, rows too long for its registers or shared memory) and
// the next route takes it. Measured on the H200, 2026-11-29 (docs/rmsnorm.md), % of copy
// bandwidth, bf16 / f32:
//
//   forward                                  rung                     16384x8192     4x2^26
//   rows of > 128 whole 16-byte vectors,     v06_bulk_row             94.9 / 95.5    (224 KiB max)
//     aligned, <= 224 KiB
//   other aligned rows, D <= 16384 / 8192    v03_vectorized_onchip    84.7 / 86.0    (warp per short row)
//   longer aligned rows                      v04_split_row            62.2 / 64.0    59.8 / 63.6
//   unaligned rows                           v02_fused_row            71.3 / 89.4    (row <= 192 KiB)
//   unaligned rows > 192 KiB                 v04_split_row            (kAny: not yet measured)
//
//   backward                                 rung                     16384x8192     4x2^26
//   rows of > 128 whole vectors, <= 2048     v07_smem_dg              83.2 / 84.2
//   other aligned rows, D <= 16384 / 8192    v03_vectorized_onchip    77.7 / 84.3
//   longer aligned rows                      v04_split_row            54.7 / 57.3    60.1 / 61.0
//   unaligned rows                           v02_fused_row            39.1 / 46.4
//   unaligned rows > 192 KiB staged          v04_split_row            (kAny: not yet measured)
//
// "Unaligned": some row start of some operand (or g) is not 16-byte aligned. v04 runs those in
// its kAny instantiation (each 16-byte access split into the widest pieces the address allows;
// the column-wise dg sums need the same element indices in every row, so no per-row peel);
// v02 stages a row in shared memory with scalar loads. Ladder-only: v01_two_kernel (22.5% /
// 28.1% of copy forward, 2.7% / 5.2% backward at 16384x8192) and v05_pipelined_rows (85.3% /
// 86.6% forward at 16384x8192, below v06 on every problem it suits).
#include "rmsnorm/rmsnorm_op.hpp"

namespace hk {
namespace {

constexpr int64_t kWarpRowBytes = 128 * 16;  // rows up to 128 vectors: v03 runs them warp-per-row

std::vector<Route> rmsnorm_dispatch(const RmsNormProblem& p) {
  const int64_t row_bytes = p.dim * (dtype_bits(p.dtype) / 8);
  std::vector<Route> routes;
  const Route v04{"v04_split_row", "rows too long for registers, split over the grid: 59.8% / 63.6% of copy "
                                   "forward, 60.1% / 61.0% backward at 4x2^26 (bf16 / f32, aligned; H200, "
                                   "2026-11-29); any alignment"};
  if (p.row_align() < 16) {
    routes.push_back({"v02_fused_row", "rows not 16-byte aligned: scalar loads through shared memory, 71.3% / 89.4% "
                                       "of copy forward at 16384x8192 (bf16 / f32; H200, 2026-11-29)"});
    routes.push_back({v04.variant, "rows not 16-byte aligned, too long to stage in shared memory: split over the "
                                   "grid, each 16-byte access in the widest pieces its address allows"});
    return routes;
  }
  if (!p.backward && row_bytes > kWarpRowBytes)
    routes.push_back({"v06_bulk_row", "the row staged by one bulk copy: 94.9% / 95.5% of copy at 16384x8192 "
                                      "(bf16 / f32; H200, 2026-11-29)"});
  if (p.backward && row_bytes > kWarpRowBytes)
    routes.push_back({"v07_smem_dg", "dg in shared memory, 32 warps per SM: 83.2% / 84.2% of copy at 16384x8192 "
                                     "(bf16 / f32; H200, 2026-11-29)"});
  routes.push_back({"v03_vectorized_onchip",
                    p.backward ? "the row in registers, warp per short row: 77.7% / 84.3% of copy at 16384x8192 "
                                 "(bf16 / f32; H200, 2026-11-29)"
                               : "the row in registers, warp per short row: 84.7% / 86.0% of copy at 16384x8192 "
                                 "(bf16 / f32; H200, 2026-11-29)"});
  routes.push_back(v04);
  return routes;
}

}  // namespace

HK_REGISTER_DISPATCH(RmsNormProblem, "rmsnorm", rmsnorm_dispatch);

}  // namespace hk
