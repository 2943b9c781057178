// broadcast/dispatch.cpp — which rung serves a public call of the four broadcast families
// (hk::add_scalar, hk::outer_add, hk::outer_mul_relu, hk::row_scale_relu and their hk.* ops).
//
// One rule per family: 16-byte aligned operands (and row strides) run the vectorized rung;
// anything else the naive rung, the only one with scalar access. Measured on the H200,
// 2026-11-29 (docs/broadcast.md), % of copy bandwidth, bf16 / f32:
//
//   family            aligned rung          16384x8192            4x2^26                unaligned: v01_naive
//   add_scalar        v02_vectorized        92.6 / 92.0           92.7 / 91.8           35.3 / 49.7
//   outer_add         v02_vectorized        94.9 / 99.4           89.9 / 90.3           15.5 / 17.8
//   outer_mul_relu    v02_vectorized        94.5 / 99.5           89.9 / 90.4           15.5 / 17.7
//   row_scale_relu    v03_oneshot_chunks    fwd 91.9 / 91.2,      fwd 92.2 / 91.0,      fwd 26.0 / 33.4
//                                           bwd 92.4 / 95.9       bwd 93.9 / 96.7       bwd 22.9 / 34.1
//
// row_scale_relu's v02_vectorized is ladder-only: v03 matches or beats it everywhere and its
// backward at 4x2^26 measured 3.7% / 4.5% of copy (one block per row) against v03's 93.9% / 96.7%.
// The v01 rungs stay production because no other rung runs operands that are not 16-byte aligned.
#include "broadcast/broadcast_op.hpp"

namespace hk {
namespace {

constexpr const char* kUnaligned =
    "operands or row strides not 16-byte aligned: the only rung with scalar access (15-50% of copy at "
    "16384x8192; H200, 2026-11-29)";

std::vector<Route> add_scalar_dispatch(const BroadcastProblem&) {
  return {{"v02_vectorized", "16-byte accesses, 4 in flight per thread: 92.6% / 92.0% of copy at 16384x8192 "
                             "(bf16 / f32; H200, 2026-11-29)"},
          {"v01_naive", kUnaligned}};
}

std::vector<Route> outer_add_dispatch(const BroadcastProblem&) {
  return {{"v02_vectorized", "x's chunk in registers written to 4 rows, 16-byte stores: 94.9% / 99.4% of copy at "
                             "16384x8192 (bf16 / f32; H200, 2026-11-29)"},
          {"v01_naive", kUnaligned}};
}

std::vector<Route> outer_mul_relu_dispatch(const BroadcastProblem&) {
  return {{"v02_vectorized", "x's chunk in registers written to 4 rows, 16-byte stores: 94.5% / 99.5% of copy at "
                             "16384x8192 (bf16 / f32; H200, 2026-11-29)"},
          {"v01_naive", kUnaligned}};
}

std::vector<Route> row_scale_relu_dispatch(const BroadcastProblem& p) {
  return {{"v03_oneshot_chunks",
           p.backward ? "a block per (row, chunk), long rows split: 92.4% / 95.9% of copy at 16384x8192, 93.9% / 96.7% "
                        "at 4x2^26 (bf16 / f32; H200, 2026-11-29)"
                      : "a block per (row, chunk), 8 loads in flight: 91.9% / 91.2% of copy at 16384x8192, 92.2% / "
                        "91.0% at 4x2^26 (bf16 / f32; H200, 2026-11-29)"},
          {"v01_naive", kUnaligned}};
}

}  // namespace

HK_REGISTER_DISPATCH(BroadcastProblem, "add_scalar", add_scalar_dispatch);
HK_REGISTER_DISPATCH(BroadcastProblem, "outer_add", outer_add_dispatch);
HK_REGISTER_DISPATCH(BroadcastProblem, "outer_mul_relu", outer_mul_relu_dispatch);
HK_REGISTER_DISPATCH(BroadcastProblem, "row_scale_relu", row_scale_relu_dispatch);

}  // namespace hk
