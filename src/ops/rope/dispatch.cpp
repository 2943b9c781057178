// rope/dispatch.cpp — which rope rung serves a public call (hk::rope, hk::rope_backward,
// hk.rope).
//
// One rule: v02_vectorized serves every call: 16-byte accesses when every row start, R/2 and the
// tables are 16-byte aligned (any contiguous or fused-QKV layout with D * sizeof(T) % 16 == 0),
// else the widest accesses each address allows. Speed: not yet measured (the goal is the copy
// bandwidth of x read once and y written once).
//
// v01_naive (scalar, every rotated element read twice) is ladder-only.
#include "rope/rope_op.hpp"

namespace hk {
namespace {

std::vector<Route> rope_dispatch(const RopeProblem&) {
  return {{"v02_vectorized", "16-byte slots per (b, s, h) row, each input read once; any alignment and "
                             "(b, s, h) strides (speed not yet measured)"}};
}

}  // namespace

HK_REGISTER_DISPATCH(RopeProblem, "rope", rope_dispatch);

}  // namespace hk
