// gemm/v15_fused_fast_epilogue.cu — registers rung 15; its policy, and what it adds over v14:
// v15_fused_fast_epilogue.cuh. Its kernels compile in generated files, one per (input dtype, layout)
// group (src/ops/gemm/CMakeLists.txt, hopper_instance.cu.in); this file dispatches to them.
// Run:   hk bench gemm --variant 'v1[45]*' --shape 4096x4096x4096
#include "gemm/v15_fused_fast_epilogue.cuh"
#include "gemm_instances.hpp"  // its kernels are compiled in generated files

namespace hk {

void gemm_v15_launch(const GemmArgs& g, cudaStream_t stream) { gemm_impl::hopper_launch<gemm_impl::V15>(g, stream); }

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v15_fused_fast_epilogue",
                    "v14 + compile-time bias/ReLU/GeLU epilogue kinds (no per-element tests; C_in: generic)", 90,
                    kFlagNone, gemm_impl::hopper_supports<gemm_impl::V15>, gemm_v15_launch);

}  // namespace hk
