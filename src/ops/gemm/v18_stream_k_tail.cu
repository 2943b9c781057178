// gemm/v18_stream_k_tail.cu — registers rung 18; its policy, and what it adds over v15:
// v18_stream_k_tail.cuh. Its kernels compile in generated files, one per (input dtype, layout)
// group (src/ops/gemm/CMakeLists.txt, hopper_instance.cu.in); this file dispatches to them.
// Run:   hk bench gemm --variant 'v1[58]*' --shape 4096x14336x4096
#include "gemm/v18_stream_k_tail.cuh"
#include "gemm_instances.hpp"  // its kernels are compiled in generated files

namespace hk {

void gemm_v18_launch(const GemmArgs& g, cudaStream_t stream) { gemm_impl::hopper_launch<gemm_impl::V18>(g, stream); }

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v18_stream_k_tail",
                    "v15 + stream-K last waves: the leftover tiles' k-blocks split evenly over the clusters, "
                    "partials summed through a global workspace", 90,
                    kFlagProduction, gemm_impl::hopper_supports<gemm_impl::V18>, gemm_v18_launch);

}  // namespace hk
