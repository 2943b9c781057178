// gemm/v12_tma_store_epilogue.cu
//
// Rung 12: v11 with the epilogue through shared memory: the fused
// alpha/beta/bias/activation results are written in 64-row x 128-byte swizzled chunks
// (conflict-free) and leave by TMA stores, double-buffered so a chunk's store overlaps the next
// chunk's math.
// Adds over v11: full-line coalesced writes of C issued by one thread, asynchronous to the
// consumers (which go on to the next tile), instead of 128 scattered 2-byte stores per thread.
// Needs: sm_90a; 16-byte aligned operands; the leading dims (and batch strides) of A and B
// a multiple of 16 bytes — and of C, which TMA stores; K >= 1.
// Otherwise supports() names the rule ("gemm: K*2 bytes must be a multiple of 16 for TMA,
// got K=1001") and hk::gemm falls back to a lower rung.
// Kernel: hopper_gemm.cuh with the configuration below.
// Run:   hk bench gemm --variant v12_tma_store_epilogue --shape 4096x4096x4096
#include "gemm/hopper_gemm.cuh"

namespace hk {
namespace {

// (kBlockN, kStages, kSetMaxNReg, kCluster, kPersistent, kTmaStore)
using Cfg = gemm_impl::HopperConfig<256, 4, true, 2, true, true>;

template <class T, bool kACol, bool kBCol>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_v12_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                     const __grid_constant__ CUtensorMap tma_c, const GemmArgs g) {
  gemm_impl::hopper_gemm_body<T, kACol, !kBCol, Cfg>(&tma_a, &tma_b, &tma_c, g);
}

void gemm_v12_launch(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::launch_hopper_dispatch<Cfg>(g, "v12_tma_store_epilogue", "gemm_v12_kernel", stream,
                                         [](auto t, auto ac, auto bc) {
                                           return gemm_v12_kernel<decltype(t), decltype(ac)::value, decltype(bc)::value>;
                                         });
}

std::string gemm_v12_supports(const GemmProblem& p) { return gemm_tma_supports(p, true); }

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v12_tma_store_epilogue",
                    "v11 + fused epilogue staged in swizzled smem, TMA stores", 90, kFlagNone,
                    gemm_v12_supports, gemm_v12_launch);

}  // namespace hk
