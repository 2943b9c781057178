// swiglu/dispatch.cpp — which swiglu rung serves a public call (hk::swiglu, hk::swiglu_backward,
// hk.swiglu).
//
// One rule: v02_vectorized serves every call. It peels each row at the output's 16-byte phase,
// so any alignment and any row stride runs 16-byte stores; inputs at another phase are read with
// the widest loads their phase allows. Speed (H200, 2026-12-03, f0a9960, the quick suite,
// docs/results/bench-quick.json): 100.3% / 103.0% of the copy bandwidth of the 3 x rows x F
// elements it moves forward at 16384x8192 (bf16 / f32), since its grid no longer stops at the
// resident block count (93% before); from Python 0.98x torch.compile forward, 1.71x backward
// (bench-torch-quick.json).
//
// v01_naive (scalar accesses, one thread per element) is ladder-only.
#include "swiglu/swiglu_op.hpp"

namespace hk {
namespace {

std::vector<Route> swiglu_dispatch(const SwigluProblem&) {
  return {{"v02_vectorized", "16-byte accesses, rows peeled at the output's 16-byte phase: any alignment and row "
                             "stride: 100-103% of copy bandwidth forward at 16384x8192 (bf16 / f32; H200, 2026-12-03)"}};
}

}  // namespace

HK_REGISTER_DISPATCH(SwigluProblem, "swiglu", swiglu_dispatch);

}  // namespace hk
