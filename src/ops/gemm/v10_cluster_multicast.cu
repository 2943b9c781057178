// gemm/v10_cluster_multicast.cu — compiles and registers rung 10; its policy, and what it adds over v09:
// v10_cluster_multicast.cuh.
// Run:   hk bench gemm --variant v10_cluster_multicast --shape 4096x4096x4096
#include "gemm/hopper_gemm_kernels.cuh"
#include "gemm/v10_cluster_multicast.cuh"

namespace hk {

HK_GEMM_INSTANTIATE_NT(gemm_impl::V10);

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v10_cluster_multicast",
                    "v09 + 2-CTA clusters, B tile multicast by TMA to both CTAs", 90,
                    kFlagNone, gemm_impl::hopper_supports<gemm_impl::V10>, gemm_impl::hopper_launch<gemm_impl::V10>);

}  // namespace hk
