// rope/dispatch.cpp — which rope rung serves a public call (hk::rope, hk::rope_backward,
// hk.rope).
//
// One rule: v02_vectorized serves every call: 16-byte accesses when every row start, R/2 and the
// tables are 16-byte aligned (any contiguous or fused-QKV layout with D * sizeof(T) % 16 == 0),
// else the widest accesses each address allows. Speed (H200, 2026-12-03, f0a9960, the quick
// suite, docs/results/bench-quick.json): 88.5% of copy bandwidth at 8x2048x16x128 bf16 (36.0 us),
// 95.6% in f32, with a grid no longer capped at the resident block count (85% / 89% before); from
// Python 1.03x torch.compile forward, 1.09x backward (bench-torch-quick.json).
//
// v01_naive (scalar, every rotated element read twice) is ladder-only.
#include "rope/rope_op.hpp"

namespace hk {
namespace {

std::vector<Route> rope_dispatch(const RopeProblem&) {
  return {{"v02_vectorized", "16-byte slots per (b, s, h) row, each input read once; any alignment and "
                             "(b, s, h) strides: 88.5% / 95.6% of copy bandwidth at 8x2048x16x128 (bf16 / f32; H200, 2026-12-03)"}};
}

}  // namespace

HK_REGISTER_DISPATCH(RopeProblem, "rope", rope_dispatch);

}  // namespace hk
