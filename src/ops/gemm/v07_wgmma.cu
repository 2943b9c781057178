// gemm/v07_wgmma.cu — compiles and registers rung 7; its policy, and what it adds over v06:
// v07_wgmma.cuh.
// Run:   hk bench gemm --variant v07_wgmma --shape 4096x4096x4096
#include "gemm/hopper_gemm_kernels.cuh"
#include "gemm/v07_wgmma.cuh"

namespace hk {

HK_GEMM_INSTANTIATE_NT(gemm_impl::V07);

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v07_wgmma",
                    "WGMMA m64n128k16 from TMA-filled swizzled smem, one slot (load, then multiply)", 90,
                    kFlagNone, gemm_impl::hopper_supports<gemm_impl::V07>, gemm_impl::hopper_launch<gemm_impl::V07>);

}  // namespace hk
