// gemm/v18_stream_k_tail.cu
//
// Rung 18: v15 with its last waves split along K (stream-K). v15's persistent grid runs each
// 128x256 tile unit whole on one cluster of 2 CTAs, so U units over G clusters take ceil(U / G)
// tile times where U / G would do: on the H200 (G = 66) 4096^3 has 256 units, 3.88 waves;
// 4096x14336x4096 896, 13.58; 8192x8192x1024 1024, 15.52 — 2-3% of each run is clusters idling
// through the last wave. Here the first (U / G - 1) G units run whole and the k-blocks of the
// remaining G..2G-1 units are dealt out evenly, one contiguous range per cluster. A range that
// ends inside a tile stores its partial accumulators (f32, coalesced) to a workspace slot and
// raises a flag; the cluster whose range holds the tile's last k-block waits for those flags,
// adds the partials and runs the epilogue (StreamKSplit in hopper_gemm.cuh says why the order
// cannot deadlock). The workspace is per-stream scratch (17 MB on the H200; every flag is back
// to zero when the kernel exits, so no memset per launch), allocated by the first problem that
// splits. The split costs each cluster ~12 k-blocks' time (measured), so it is made only where
// the last wave idles the clusters for 16+ k-blocks on average (StreamKSplit::kMinIdleKBlocks);
// elsewhere v18 runs exactly as v15 (whole waves, one wave or less, 4096^3, 8192x8192x1024).
// Adds over v15: a balanced last wave for the price of one partial tile written and read per
// cluster.
// Needs: as v15 (sm_90a; TMA's 16-byte rules for A, B, C and bias).
// Kernel: hopper_gemm.cuh with the configuration below (kStreamK).
// Run:   hk bench gemm --variant 'v1[58]*' --shape 4096x14336x4096
#include "gemm/hopper_gemm.cuh"

namespace hk {
namespace {

// (kBlockN, kStages, kSetMaxNReg, kCluster, kPersistent, kTmaStore, kMmaInFlight, kCtaRelease,
//  kPlainEpilogue, kStreamK): v15's and stream-K.
using Cfg = gemm_impl::HopperConfig<256, 4, true, 2, true, true, 1, true, false, true>;

template <class T, bool kACol, bool kBCol, class Epi>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    gemm_v18_kernel(const __grid_constant__ CUtensorMap tma_a, const __grid_constant__ CUtensorMap tma_b,
                    const __grid_constant__ CUtensorMap tma_c, const GemmArgs g,
                    const gemm_impl::StreamKWorkspace ws) {
  gemm_impl::hopper_gemm_body<T, kACol, !kBCol, Cfg, Epi>(&tma_a, &tma_b, &tma_c, g, ws);
}

template <class Epi>
void launch_kind(const GemmArgs& g, cudaStream_t stream) {
  gemm_impl::launch_hopper_dispatch<Cfg>(
      g, "v18_stream_k_tail", "gemm_v18_kernel", stream,
      [](auto t, auto ac, auto bc) {
        return gemm_v18_kernel<decltype(t), decltype(ac)::value, decltype(bc)::value, Epi>;
      });
}

}  // namespace

// A problem the schedule does not split runs v15's kernels: the same code path, and measured
// faster than this file's kernels, which carry the stream-K branches, without a split (H200,
// 2026-11-29: 2048^3 0.96x vs 0.94x cuBLAS, 4096^3 bias+GeLU +4.3% vs +7.5% over plain).
void gemm_v18_launch(const GemmArgs& g, cudaStream_t stream) {
  // Any of the file's kernels answers: Cfg alone sets how many clusters fit.
  using Probe = gemm_impl::FusedEpilogue<__nv_bfloat16, GemmActivation::kNone, false>;
  if (!gemm_impl::stream_k_splits<Cfg>(gemm_v18_kernel<__nv_bfloat16, false, false, Probe>, g)) {
    gemm_v15_launch(g, stream);
    return;
  }
  gemm_impl::dispatch_epilogue(g, [&](auto epi) { launch_kind<decltype(epi)>(g, stream); });
}

namespace {
std::string gemm_v18_supports(const GemmProblem& p) { return gemm_tma_supports(p, true); }
}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v18_stream_k_tail",
                    "v15 + stream-K last waves: the leftover tiles' k-blocks split evenly over the clusters, "
                    "partials summed through a global workspace",
                    90, kFlagProduction, gemm_v18_supports, gemm_v18_launch);

}  // namespace hk
