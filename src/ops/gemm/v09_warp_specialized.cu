// gemm/v09_warp_specialized.cu — compiles and registers rung 9; its policy, and what it adds over v08:
// v09_warp_specialized.cuh.
// Run:   hk bench gemm --variant v09_warp_specialized --shape 4096x4096x4096
#include "gemm/hopper_gemm_kernels.cuh"
#include "gemm/v09_warp_specialized.cuh"

namespace hk {

HK_GEMM_INSTANTIATE_NT(gemm_impl::V09);

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v09_warp_specialized",
                    "128x256 tiles, setmaxnreg 40/232 producer/consumer warpgroups, 4-stage ring", 90,
                    kFlagNone, gemm_impl::hopper_supports<gemm_impl::V09>, gemm_impl::hopper_launch<gemm_impl::V09>);

}  // namespace hk
