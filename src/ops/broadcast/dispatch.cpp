// broadcast/dispatch.cpp — which rung serves a public call of the four broadcast families
// (hk::add_scalar, hk::outer_add, hk::outer_mul_relu, hk::row_scale_relu and their hk.* ops).
//
// One rung per family serves every call. Those rungs run any alignment: operands or row strides
// that are not 16-byte aligned take their peeled kernels (each row of the output peeled to its
// first 16-byte boundary, 16-byte stores; inputs at another phase read with the widest loads
// their phase allows). Measured on the H200, 2026-11-29 (docs/broadcast.md), % of copy
// bandwidth, bf16 / f32, aligned operands, before the default cache policy, add_scalar's one-shot
// blocks and the outer ops' flat kernel (docs/decisions.md, memory-bound ops):
//
//   family            rung                  16384x8192            4x2^26
//   add_scalar        v02_vectorized        92.6 / 92.0           92.7 / 91.8
//   outer_add         v02_vectorized        94.9 / 99.4           89.9 / 90.3
//   outer_mul_relu    v02_vectorized        94.5 / 99.5           89.9 / 90.4
//   row_scale_relu    v03_oneshot_chunks    fwd 91.9 / 91.2,      fwd 92.2 / 91.0,
//                                           bwd 92.4 / 95.9       bwd 93.9 / 96.7
//
// The peeled kernels are not yet measured. Ladder-only: the v01_naive rungs (one thread per
// element, scalar access: 15-50% of copy at 16384x8192 unaligned) and row_scale_relu's
// v02_vectorized (v03 matches or beats it everywhere; its backward at 4x2^26 measured 3.7% /
// 4.5% of copy, one block per row, against v03's 93.9% / 96.7%).
#include "broadcast/broadcast_op.hpp"

namespace hk {
namespace {

std::vector<Route> add_scalar_dispatch(const BroadcastProblem&) {
  return {{"v02_vectorized", "16-byte accesses, one-shot 128-thread blocks: 92.6% / 92.0% of copy at 16384x8192 "
                             "(bf16 / f32, aligned; H200, 2026-11-29) as a resident grid-stride loop with evict-first "
                             "hints, which the one-shot shape beat by 1.11-1.12x in a sweep; any alignment (peeled)"}};
}

std::vector<Route> outer_add_dispatch(const BroadcastProblem&) {
  return {{"v02_vectorized", "x's chunk in registers written to 4 rows, 16-byte stores: 94.9% / 99.4% of copy at "
                             "16384x8192 (bf16 / f32, aligned; H200, 2026-11-29); any alignment (peeled)"}};
}

std::vector<Route> outer_mul_relu_dispatch(const BroadcastProblem&) {
  return {{"v02_vectorized", "x's chunk in registers written to 4 rows, 16-byte stores: 94.5% / 99.5% of copy at "
                             "16384x8192 (bf16 / f32, aligned; H200, 2026-11-29); any alignment (peeled)"}};
}

std::vector<Route> row_scale_relu_dispatch(const BroadcastProblem& p) {
  return {{"v03_oneshot_chunks",
           p.backward ? "a block per (row, chunk), long rows split: 92.4% / 95.9% of copy at 16384x8192, 93.9% / 96.7% "
                        "at 4x2^26 (bf16 / f32, aligned; H200, 2026-11-29); any alignment (peeled)"
                      : "a block per (row, chunk), 8 loads in flight: 91.9% / 91.2% of copy at 16384x8192, 92.2% / "
                        "91.0% at 4x2^26 (bf16 / f32, aligned; H200, 2026-11-29); any alignment (peeled)"}};
}

}  // namespace

HK_REGISTER_DISPATCH(BroadcastProblem, "add_scalar", add_scalar_dispatch);
HK_REGISTER_DISPATCH(BroadcastProblem, "outer_add", outer_add_dispatch);
HK_REGISTER_DISPATCH(BroadcastProblem, "outer_mul_relu", outer_mul_relu_dispatch);
HK_REGISTER_DISPATCH(BroadcastProblem, "row_scale_relu", row_scale_relu_dispatch);

}  // namespace hk
