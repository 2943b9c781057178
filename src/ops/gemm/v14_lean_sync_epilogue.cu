// gemm/v14_lean_sync_epilogue.cu — compiles and registers rung 14; its policy, and what it adds over v13:
// v14_lean_sync_epilogue.cuh.
// Run:   hk bench gemm --variant 'v1[234]*' --shape 4096x4096x4096
#include "gemm/hopper_gemm_kernels.cuh"
#include "gemm/v14_lean_sync_epilogue.cuh"

namespace hk {

HK_GEMM_INSTANTIATE_NT(gemm_impl::V14);

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v14_lean_sync_epilogue",
                    "v13 + CTA-scope slot release (no MEMBAR.GPU per k-block), branch-free plain epilogue", 90,
                    kFlagNone, gemm_impl::hopper_supports<gemm_impl::V14>, gemm_impl::hopper_launch<gemm_impl::V14>);

}  // namespace hk
