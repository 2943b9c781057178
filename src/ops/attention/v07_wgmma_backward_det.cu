// attention/v07_wgmma_backward_det.cu
//
// v07's deterministic backward kernels (hopper_attention_bwd.cuh, kDet), in a translation unit
// of their own so that each unit compiles in under a minute: the dQ adds to each query block
// take turns from its last key block down, and the grid starts with the last key block, so a
// CTA waits only for CTAs started before it. v07_wgmma_backward.cu's launcher calls
// launch_bwd_deterministic when the call asks for `deterministic`.
// Build: own translation unit.
#include "attention/hopper_attention_bwd.cuh"

namespace hk::attn_hopper_bwd {

void launch_bwd_deterministic(const AttentionArgs& a, cudaStream_t stream) {
  attn::dispatch_16bit(a.dtype, "attention/v07_wgmma_backward (deterministic)", [&](auto t) {
    using T = decltype(t);
    if (a.head_dim <= 64) launch_bwd<T, 64, true>(a, stream);
    else if (a.head_dim <= 128) launch_bwd<T, 128, true>(a, stream);
    else launch_bwd<T, 256, true>(a, stream);
  });
}

}  // namespace hk::attn_hopper_bwd
