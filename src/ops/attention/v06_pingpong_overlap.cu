// attention/v06_pingpong_overlap.cu
//
// Rung 6: v05 with the two overlaps of FlashAttention-3 (hopper_attention.cuh). In v05 a
// consumer warpgroup's tensor cores idle through its softmax (exp2, max and sum over a 64x128
// tile: MUFU and FMA work, no MMA) and its MUFU idles through its GEMMs.
//  - Within a warpgroup: S of key block n + 1 is issued together with PV of block n, and the
//    softmax of block n + 1 runs while PV(n) is in flight; only the rescale of O waits for it.
//  - Between the warpgroups (ping-pong): named barriers hand the right to issue GEMMs back and
//    forth, so one warpgroup's softmax runs while the other's MMAs do.
// Adds over v05: softmax hidden behind the MMAs, within and across warpgroups.
// Measured (H200, 2026-12-01, bf16, 16k tokens): slower than v05 on every bench shape — 303 vs
// 400 TFLOP/s at S = 2048, D = 64; 431 vs 559 at S = 4096, D = 128. v05's two warpgroups
// already overlap one another's softmax as the schedulers interleave them; why the explicit
// turns cost more than they hide is not profiled yet (the next step: ncu's stall reasons for
// both rungs). A ladder rung: the public op runs v05.
// Needs: as v05.
// Run:   hk bench attention --variant 'v0[56]*'
#include "attention/hopper_attention.cuh"

namespace hk::attention_v06_pingpong_overlap {
namespace {

struct V06 {
  static constexpr bool kIntraWgOverlap = true;  // S(n + 1) and PV(n) in flight together
  static constexpr bool kPingpong = true;        // the consumer warpgroups take turns at the MMAs
};

void attention_v06_launch(const AttentionArgs& a, cudaStream_t stream) {
  attn_hopper::launch_hopper_attention<V06>(a, stream, "attention_v06 (hopper kernel, V06 policy)");
}

std::string attention_v06_supports(const AttentionProblem& p) { return attn_hopper::hopper_attention_supports(p, "v06"); }

}  // namespace

HK_REGISTER_VARIANT(AttentionProblem, AttentionArgs, "attention", "v06_pingpong_overlap",
                    "v05 + FlashAttention-3's overlaps: S(n+1) issued with PV(n) in each warpgroup, the two "
                    "consumer warpgroups taking turns at the MMAs (named barriers)",
                    90, kFlagNone, attention_v06_supports, attention_v06_launch);

}  // namespace hk::attention_v06_pingpong_overlap
