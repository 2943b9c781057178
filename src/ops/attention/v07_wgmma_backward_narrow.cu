// attention/v07_wgmma_backward_narrow.cu
//
// v07's backward kernels for narrow head dims (hopper_attention_bwd.cuh at kD = 16 and 32), the
// default and the deterministic ones, in a translation unit of their own so that each unit
// compiles in under a minute. K, V, Q and dO tiles have 32- or 64-byte rows under the 32- or
// 64-byte swizzle, so the five products compute D's columns (rounded up to 16 or 32) instead of
// 64: on the 64-column tile D = 16 cost 4x its tensor work. v07_wgmma_backward.cu's launcher calls
// launch_bwd_narrow for D <= 32.
// Build: own translation unit.
#include "attention/hopper_attention_bwd.cuh"

namespace hk::attn_hopper_bwd {

void launch_bwd_narrow(const AttentionArgs& a, cudaStream_t stream) {
  attn::dispatch_16bit(a.dtype, "attention/v07_wgmma_backward (D <= 32)", [&](auto t) {
    using T = decltype(t);
    if (a.head_dim <= 16) {
      if (a.deterministic) launch_bwd<T, 16, true>(a, stream);
      else launch_bwd<T, 16, false>(a, stream);
    } else {
      if (a.deterministic) launch_bwd<T, 32, true>(a, stream);
      else launch_bwd<T, 32, false>(a, stream);
    }
  });
}

}  // namespace hk::attn_hopper_bwd
