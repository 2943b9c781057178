// gemm/v12_tma_store_epilogue.cu — compiles and registers rung 12; its policy, and what it adds over v11:
// v12_tma_store_epilogue.cuh.
// Run:   hk bench gemm --variant v12_tma_store_epilogue --shape 4096x4096x4096
#include "gemm/hopper_gemm_kernels.cuh"
#include "gemm/v12_tma_store_epilogue.cuh"

namespace hk {

HK_GEMM_INSTANTIATE_NT(gemm_impl::V12);

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v12_tma_store_epilogue",
                    "v11 + fused epilogue staged in swizzled smem, TMA stores", 90,
                    kFlagNone, gemm_impl::hopper_supports<gemm_impl::V12>, gemm_impl::hopper_launch<gemm_impl::V12>);

}  // namespace hk
