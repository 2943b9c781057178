// gelu/dispatch.cpp — which gelu rung serves a public call (hk::gelu, hk::gelu_backward, hk.gelu).
//
// One rule: 16-byte aligned operands run v03_vectorized, anything else v02_fused. Measured on
// the H200, 2026-11-29 (docs/gelu.md), % of copy bandwidth at 16384x8192 and 4x2^26:
//
//   operands               rung              tanh fwd / bwd, bf16 and f32
//   16-byte aligned        v03_vectorized    90-92% / 93-94%
//   any other alignment    v02_fused         ~35% bf16, ~62% f32 (one scalar load per thread)
//
// v01_unfused (8 launches, 3-10% of copy) is ladder-only: v02 runs every input it runs, up to
// 2^31-1 blocks of 256 elements (5.5e11 elements).
#include "gelu/gelu_op.hpp"

namespace hk {
namespace {

std::vector<Route> gelu_dispatch(const GeluProblem& p) {
  std::vector<Route> routes;
  if (p.align_bytes >= 16)
    routes.push_back({"v03_vectorized", "16-byte loads, 4 in flight per thread: 90-92% of copy forward, 93-94% "
                                        "backward (tanh, 16384x8192 and 4x2^26; H200, 2026-11-29)"});
  routes.push_back({"v02_fused", "operands not 16-byte aligned: one fused pass with scalar accesses, any alignment "
                                 "(~35% of copy bf16, ~62% f32; H200, 2026-11-29)"});
  return routes;
}

}  // namespace

HK_REGISTER_DISPATCH(GeluProblem, "gelu", gelu_dispatch);

}  // namespace hk
