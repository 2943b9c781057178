// gelu/dispatch.cpp — which gelu rung serves a public call (hk::gelu, hk::gelu_backward, hk.gelu).
//
// One rule: v03_vectorized serves every call. It peels the output to its first 16-byte
// boundary, so any alignment runs 16-byte stores; inputs at another 16-byte phase than the
// output are read with the widest loads their phase allows. Measured on the H200, 2026-11-29
// (docs/gelu.md), % of copy bandwidth at 16384x8192 and 4x2^26, before v03 took one-shot
// blocks and the default cache policy (docs/decisions.md, memory-bound ops):
//
//   operands               rung              tanh fwd / bwd, bf16 and f32
//   16-byte aligned        v03_vectorized    90-92% / 93-94%
//   any other alignment    v03_vectorized    (peeled; not yet measured)
//
// Re-measured with the one-shot blocks (H200, 2026-12-03, f0a9960): forward tanh at 16384x8192,
// 99.6% of copy in bf16 and 100.2% in f32 (quick suite); from Python against the best of
// F.gelu and torch.compile in one process, 1.18x / 1.00x forward and 1.08x / 1.00x backward
// (bf16 / f32; docs/results/bench-torch-quick.json).
//
// v01_unfused (8 launches, 3-10% of copy) and v02_fused (one scalar access per thread, ~35% of
// copy bf16, ~62% f32, at most 2^31-1 blocks of 256 elements) are ladder-only.
#include "gelu/gelu_op.hpp"

namespace hk {
namespace {

std::vector<Route> gelu_dispatch(const GeluProblem&) {
  return {{"v03_vectorized", "16-byte loads, one-shot 128-thread blocks, any alignment (the output peeled to its "
                             "first 16-byte boundary): 99.6% / 100.2% of copy forward at 16384x8192 (tanh, bf16 / "
                             "f32; H200, 2026-12-03), 1.18x / 1.00x F.gelu from Python"}};
}

}  // namespace

HK_REGISTER_DISPATCH(GeluProblem, "gelu", gelu_dispatch);

}  // namespace hk
