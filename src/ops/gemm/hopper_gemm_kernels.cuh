// gemm/hopper_gemm_kernels.cuh — the wgmma rungs' kernels and the launcher of one kernel group.
//
// A translation unit that includes this header compiles the kernels of every part
// hopper_launch_part<P, T, kACol, kBCol, kPart> it explicitly instantiates: one kernel per
// epilogue kind of the policy (P::kEpilogues) in that part (epilogue_part), for one input dtype
// and layout. Everything else (the rung's registration, supports() and hopper_launch) needs only
// hopper_gemm.cuh, so the production rungs put each part in a file of its own
// (src/ops/gemm/CMakeLists.txt generates them from hopper_instance.cu.in) and compile them in
// parallel.
#pragma once

#include "gemm/hopper_gemm.cuh"
#include "gemm/hopper_gemm_pingpong.cuh"

namespace hk::gemm_impl {

// A wgmma rung's kernel: policy P's body (cooperative or ping-pong consumers) for input type T,
// layout (kACol, kBCol: column-major A / B, as in GemmArgs) and epilogue kind Epi.
template <class P, class T, bool kACol, bool kBCol, class Epi>
__global__ void __launch_bounds__(HopperConfig<P>::kThreads, 1)
    hopper_gemm_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                       const __grid_constant__ CUtensorMap tma_c, const GemmArgs g) {
  // Row-major B is MN-major (N contiguous); column-major A is MN-major (M contiguous).
  using Cfg = HopperConfig<P>;
  if constexpr (P::kPingpong) hopper_gemm_pingpong_body<T, kACol, !kBCol, Cfg, Epi>(&tma_a, &tma_b, &tma_c, g);
  else hopper_gemm_body<T, kACol, !kBCol, Cfg, Epi>(&tma_a, &tma_b, &tma_c, g);
}

// The same with stream-K's workspace (P::kStreamK).
template <class P, class T, bool kACol, bool kBCol, class Epi>
__global__ void __launch_bounds__(HopperConfig<P>::kThreads, 1)
    hopper_gemm_stream_k_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                                const __grid_constant__ CUtensorMap tma_c, const GemmArgs g,
                                const StreamKWorkspace ws) {
  hopper_gemm_body<T, kACol, !kBCol, HopperConfig<P>, Epi>(&tma_a, &tma_b, &tma_c, g, ws);
}

template <class P, class T, bool kACol, bool kBCol, int kPart>
void hopper_launch_part(const GemmArgs& g, cudaStream_t stream) {
  using Cfg = HopperConfig<P>;
  dispatch_epilogue_kinds<P, T>(g, [&](auto epi) {
    using Epi = decltype(epi);
    if constexpr (epilogue_part<P, Epi>() != kPart) {
      HK_THROW(kInternal, "gemm/", P::kName, ": epilogue part ", kPart, " called for a kind of the other part");
    } else if constexpr (P::kStreamK) {
      auto kernel = hopper_gemm_stream_k_kernel<P, T, kACol, kBCol, Epi>;
      // A problem the schedule does not split goes to the policy's unsplit launcher. The split
      // test asks this kernel how many clusters fit; every kernel of the policy has the same
      // answer (one CTA per SM: the same shared memory, threads and register cap).
      if (!stream_k_splits<Cfg>(kernel, g)) {
        P::launch_unsplit(g, stream);
        return;
      }
      launch_hopper<Cfg>(kernel, g, P::kName, stream);
    } else {
      launch_hopper<Cfg>(hopper_gemm_kernel<P, T, kACol, kBCol, Epi>, g, P::kName, stream);
    }
  });
}

}  // namespace hk::gemm_impl

// Compiles policy P's "nt" kernels (bf16 inputs) in this file: what a teaching rung runs
// (its few epilogue kinds are all in part 0).
#define HK_GEMM_INSTANTIATE_NT(P)                                                                                 \
  static_assert((P::kEpilogues) != ::hk::gemm_impl::EpilogueKinds::kFused,                                      \
                "a rung with every epilogue kind compiles its parts in generated files");                      \
  template void ::hk::gemm_impl::hopper_launch_part<P, __nv_bfloat16, false, true, 0>(const ::hk::GemmArgs&,   \
                                                                                        cudaStream_t)
