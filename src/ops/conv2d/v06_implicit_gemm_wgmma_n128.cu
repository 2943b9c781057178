// conv2d/v06_implicit_gemm_wgmma_n128.cu
// Build: own translation unit
//
// Rung 6's forward (and data gradient) kernels with 128 x 128 output tiles, for layers of at
// most 128 output channels, where a 256-wide tile would compute at least half its columns on
// zeros. What the rung does: v06_implicit_gemm_wgmma.cu; its kernels: v06_implicit_gemm_wgmma.cuh.
// A file of its own so that neither half of the rung's kernels takes over a minute to compile.
#include "conv2d/v06_implicit_gemm_wgmma.cuh"

namespace hk::conv2d_v06 {

void launch_forward_n128(const GemmArgs& g, const gemm_impl::HopperMaps& maps, const PatchALoads& loads,
                         cudaStream_t stream) {
  launch<128, false>(g, maps, loads, stream);
}

}  // namespace hk::conv2d_v06
