// gemm/v16_pingpong_consumers.cu — compiles and registers rung 16; its policy, and what it adds over v15:
// v16_pingpong_consumers.cuh.
// Run:   hk bench gemm --variant 'v1[56]*' --shape 4096x4096x4096 --shape 8192x8192x1024
#include "gemm/hopper_gemm_kernels.cuh"
#include "gemm/v16_pingpong_consumers.cuh"

namespace hk {

HK_GEMM_INSTANTIATE_NT(gemm_impl::V16);

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v16_pingpong_consumers",
                    "v15 with ping-pong consumers: each warpgroup owns 64x256 tiles, epilogue under the other's MMAs",
                    90, kFlagNone, gemm_impl::hopper_supports<gemm_impl::V16>, gemm_impl::hopper_launch<gemm_impl::V16>);

}  // namespace hk
