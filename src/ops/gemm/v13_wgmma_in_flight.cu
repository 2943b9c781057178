// gemm/v13_wgmma_in_flight.cu — compiles and registers rung 13; its policy, and what it adds over v12:
// v13_wgmma_in_flight.cuh.
// Run:   hk bench gemm --variant 'v1[23]*' --shape 4096x4096x4096
#include "gemm/hopper_gemm_kernels.cuh"
#include "gemm/v13_wgmma_in_flight.cuh"

namespace hk {

HK_GEMM_INSTANTIATE_NT(gemm_impl::V13);

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v13_wgmma_in_flight",
                    "v12 + one wgmma group kept in flight across k-blocks (wait_group 1)", 90,
                    kFlagNone, gemm_impl::hopper_supports<gemm_impl::V13>, gemm_impl::hopper_launch<gemm_impl::V13>);

}  // namespace hk
