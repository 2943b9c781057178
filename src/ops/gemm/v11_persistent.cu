// gemm/v11_persistent.cu — compiles and registers rung 11; its policy, and what it adds over v10:
// v11_persistent.cuh.
// Run:   hk bench gemm --variant v11_persistent --shape 4096x4096x4096
#include "gemm/hopper_gemm_kernels.cuh"
#include "gemm/v11_persistent.cuh"

namespace hk {

HK_GEMM_INSTANTIATE_NT(gemm_impl::V11);

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v11_persistent",
                    "v10 + persistent grid with a grouped (L2-friendly) tile order", 90,
                    kFlagNone, gemm_impl::hopper_supports<gemm_impl::V11>, gemm_impl::hopper_launch<gemm_impl::V11>);

}  // namespace hk
