// attention/v06_pingpong_overlap.cu
//
// Rung 6: v05 with the two overlaps of FlashAttention-3 (hopper_attention.cuh). In v05 a
// consumer warpgroup's tensor cores idle through its softmax (exp2, max and sum over a 64x128
// tile: MUFU and FMA work, no MMA) and its MUFU idles through its GEMMs.
//  - Within a warpgroup: S of key block n + 1 is issued together with PV of block n, and the
//    softmax of block n + 1 runs while PV(n) is in flight; only the rescale of O waits for it.
//  - Between the warpgroups (ping-pong): named barriers hand the right to issue GEMMs back and
//    forth, so one warpgroup's softmax runs while the other's MMAs do.
// Adds over v05: softmax hidden behind the MMAs, across the warpgroups. Measured (H200,
// 2026-12-02, bf16, 16k tokens, one process): 659 vs 569 TFLOP/s at S = 4096, D = 128 (causal:
// 538 vs 463), 1.16x; at D = 64 402 vs 399 (S = 2048) and 260 vs 278 (S = 512). What makes the
// difference is the turns: ptxas places PV(n)'s wait above the softmax of block n + 1 whatever
// the source order (the SASS shows no exponential between the two waits; pinning the softmax
// there spills at D = 128 and measured slower at D = 64), so the overlap inside a warpgroup is
// nominal and the gain comes from one warpgroup's softmax running under the other's GEMMs. The
// mask's range test runs only on the blocks it cuts (the loop is split in three), which is what
// made this rung slower than v05 before.
// Production above 64 columns at fixed lengths (the dispatch); v05 serves D <= 64 and thd.
// Needs: as v05, at fixed lengths (thd is not instantiated for this rung).
// Run:   hk bench attention --variant 'v0[56]*'
#include "attention/hopper_attention.cuh"

namespace hk::attention_v06_pingpong_overlap {
namespace {

void attention_v06_launch(const AttentionArgs& a, cudaStream_t stream) {
  attn_hopper::launch_hopper_attention<attn_hopper::V06Policy>(a, stream, "attention_v06 (hopper kernel, V06 policy)");
}

std::string attention_v06_supports(const AttentionProblem& p) { return attn_hopper::hopper_attention_supports(p, "v06"); }

}  // namespace

HK_REGISTER_VARIANT(AttentionProblem, AttentionArgs, "attention", "v06_pingpong_overlap",
                    "v05 + FlashAttention-3's overlaps: S(n+1) issued with PV(n) in each warpgroup, the two "
                    "consumer warpgroups taking turns at the MMAs (named barriers)",
                    90, kFlagProduction, attention_v06_supports, attention_v06_launch);

}  // namespace hk::attention_v06_pingpong_overlap

namespace hk::attn_hopper {
HK_ATTN_INSTANCES(, V06Policy, 16)
HK_ATTN_INSTANCES(, V06Policy, 32)
HK_ATTN_INSTANCES(, V06Policy, 64)
HK_ATTN_INSTANCES(, V06Policy, 128)
}  // namespace hk::attn_hopper
