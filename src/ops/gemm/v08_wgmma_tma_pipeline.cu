// gemm/v08_wgmma_tma_pipeline.cu — compiles and registers rung 8; its policy, and what it adds over v07:
// v08_wgmma_tma_pipeline.cuh.
// Run:   hk bench gemm --variant v08_wgmma_tma_pipeline --shape 4096x4096x4096
#include "gemm/hopper_gemm_kernels.cuh"
#include "gemm/v08_wgmma_tma_pipeline.cuh"

namespace hk {

HK_GEMM_INSTANTIATE_NT(gemm_impl::V08);

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v08_wgmma_tma_pipeline",
                    "v07 + 5-stage TMA/mbarrier ring: loads overlap the MMAs", 90,
                    kFlagNone, gemm_impl::hopper_supports<gemm_impl::V08>, gemm_impl::hopper_launch<gemm_impl::V08>);

}  // namespace hk
