// weighted_sum/dispatch.cpp — which weighted_sum rung serves a public call (hk::weighted_sum,
// hk::weighted_sum_backward, hk.weighted_sum).
//
// Measured on the H200, % of copy bandwidth, bf16 / f32 (docs/weighted_sum.md): v04 and v05
// 2026-12-04, 16384x8192 only; the rest 2026-11-29:
//
//   forward                                     rung                    16384x8192     4x2^26
//   >= 512 rows of 129..2048 16-byte vectors    v04_oneshot_rows        97.3 / 105.3   -
//                                               (v03_pipelined_rows     95.1 / 102.2 in the same run)
//   f32, other shapes                           v02_row_groups          - / 104.0      - / 96.4
//   f16 / bf16, < 512 rows or longer rows       v02_row_groups          (34.6 / -)     93.1 / -
//   f16 / bf16, other shapes                    baseline_cublas         96.6 / 83.4    59.7 / 75.9
//   unaligned rows or w (any dtype)             baseline_cublas         (cuBLAS takes any alignment)
//     past cuBLAS's int sizes                   v02_row_groups          (kAny: not yet measured)
//
//   backward, >= 512 rows of > 128 whole        v05_two_pass_backward   94.5 / 102.8   -
//     16-byte vectors                           (v02_row_groups         88.8 / 90.9 in the same run)
//   backward, other shapes                      v02_row_groups          86.3 / 88.7    94.0 / 95.0
//                                               baseline_cublas         44.7 / 77.3    12.2 / 24.1
//
// v04 and v05 (H200, 2026-12-04, `hk bench weighted_sum --budget-ms 400 --variant
// 'public,v02*,v03*,v04*,v05*' --shape 16384x8192 --dtype bf16,f32`): v04's forward 65.4 / 120.8
// us against v03's 66.8 / 124.5 and cuBLAS's 66.1 / 152.0; v05's backward 134.5 / 247.4 us
// against v02's 143.3 / 279.9 and cuBLAS's 283.9 / 335.4. From Python (`python -m
// hopperkit.bench`, the same day) the forward ran 0.94x torch.compile in bf16 (71.9 / 67.8 us)
// and 1.02x in f32, the backward 1.23x / 1.02x (docs/weighted_sum.md says where the forward's
// bf16 gap comes from, as far as it is known). v04 takes every problem v03 could be offered,
// so v03 is now ladder-only.
//
// v02's forward is a block per row with nothing in flight across its reductions: fine in f32
// (104.0% at 16384x8192) but 34.6% in bf16 there, where cuBLAS's GEMV reads at 96.6%. So a
// 16-bit forward that v04 does not take goes to cuBLAS, unless rows are too few to fill the GPU
// or too long for v03's registers, where v02's split-row kernel wins (93.1% vs 59.7% at 4x2^26).
// Unaligned operands (x's rows, dx's rows or w not 16-byte aligned) go to cuBLAS, then to v02's
// kAny kernels (each 16-byte access in the widest pieces its address allows), which also run
// sizes past cuBLAS's int dimensions. v01_partial_buffer and v03_pipelined_rows are ladder-only.
#include "common/rows.hpp"
#include "weighted_sum/weighted_sum_op.hpp"

namespace hk {
namespace {

std::vector<Route> weighted_sum_dispatch(const WeightedSumProblem& p) {
  const int64_t esize = dtype_bits(p.dtype) / 8;
  const Route v02_bwd{"v02_row_groups", "dx and dw in one pass: 86.3% / 88.7% of copy at 16384x8192, 94.0% / 95.0% "
                                        "at 4x2^26 (bf16 / f32; H200, 2026-11-29), 1.93x / 1.15x cuBLAS"};
  const Route cublas{"baseline_cublas", "cuBLAS GemmEx, any alignment: 96.6% / 83.4% of copy forward at 16384x8192 "
                                        "(bf16 / f32; H200, 2026-11-29)"};
  if (p.row_align() < 16)
    return {cublas, {"v02_row_groups", "unaligned operands past cuBLAS's int dimensions: each 16-byte access in the "
                                       "widest pieces its address allows (kAny kernels)"}};
  if (p.backward) {
    if (pipelined_rows::suits(esize, p.rows, p.dim))
      return {{"v05_two_pass_backward", "dw by a read-only column-sum pass, then dx by flat one-shot blocks: 94.5% / "
                                        "102.8% of copy at 16384x8192 (bf16 / f32; H200, 2026-12-04) against v02's "
                                        "88.8% / 90.9%, 1.23x / 1.02x torch.compile from Python"},
              v02_bwd, cublas};
    return {v02_bwd, cublas};
  }
  std::vector<Route> routes;
  if (pipelined_rows::suits(esize, p.rows, p.dim) && pipelined_rows::refusal(esize, p.dim, "D").empty())
    routes.push_back({"v04_oneshot_rows", "a short-lived 512-thread block per row, w through L1, 32 registers: 97.3% / "
                                          "105.3% of copy at 16384x8192 (bf16 / f32; H200, 2026-12-04) against v03's "
                                          "95.1% / 102.2% and cuBLAS's 96.2% / 83.7%"});
  const bool few_or_long_rows = p.rows < pipelined_rows::kMinRows ||
                                p.dim * esize > int64_t(pipelined_rows::kThreads) * pipelined_rows::kMaxPer * 16;
  const bool v02_first = p.dtype == DType::kF32 || few_or_long_rows;
  if (p.dtype == DType::kF32)
    routes.push_back({"v02_row_groups", "f32: 104.0% of copy at 16384x8192 and 96.4% at 4x2^26 against cuBLAS's "
                                        "83.4% and 75.9% (H200, 2026-11-29)"});
  else if (few_or_long_rows)
    routes.push_back({"v02_row_groups", "few or long 16-bit rows, split over the grid: 93.1% of copy at 4x2^26 bf16 "
                                        "against cuBLAS's 59.7% (H200, 2026-11-29)"});
  routes.push_back(cublas);
  // cuBLAS declines sizes past int; v02 then runs what is 16-byte aligned.
  if (!v02_first)
    routes.push_back({"v02_row_groups", "sizes past cuBLAS's int dimensions: 16-byte loads, rows split when few "
                                        "(93.1% / 96.4% of copy at 4x2^26; H200, 2026-11-29)"});
  return routes;
}

}  // namespace

HK_REGISTER_DISPATCH(WeightedSumProblem, "weighted_sum", weighted_sum_dispatch);

}  // namespace hk
