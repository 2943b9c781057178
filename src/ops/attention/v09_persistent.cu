// attention/v09_persistent.cu
//
// Rung 9: the Hopper forward on a persistent grid. v05 / v06 launch one CTA per 128-row query
// tile; a CTA loads its Q (32-64 KiB) and its first K/V tiles before any MMA, and stores O after
// the last, with nothing of its own to overlap them. Here one CTA per SM loops over tiles (the
// same kernel: hopper_attention.cuh's tile loop), so the producer loads the next tile's Q as soon
// as the current tile's last S is computed and streams its K/V into the slots the current tile
// frees, under the consumers' last PV and epilogue. Each CTA's producer claims its next tile from
// a global counter (the last CTA resets it, so a captured graph replays) and hands the tile to
// the consumers with its Q: under a causal mask tiles cost up to 40% more or less than others,
// and a static stride (CTA c: tiles c, c + grid, ...) left some CTAs that much more work. Tiles
// are numbered query block first, the last query blocks first: under a causal mask they see the
// most keys, so the short ones fill the tail, and neighbouring tiles share a head's K/V in L2.
// Kernels: v06's (the ping-pong) above 64 columns at fixed lengths, v05's otherwise (D <= 64,
// variable length).
// Adds over v06: a persistent grid, tiles claimed from a counter, Q reloaded under the previous
// tile's epilogue, longest tiles first.
// Measured (H200, 2026-12-02, B8 S2048, one process with v06): D = 128 451 / 475 us, causal
// 270-275 / 292-301; D = 256 causal 299 / 310. D = 64 (v05's kernel) 760 us against v06's 688.
// Needs: as v05.
// Run:   hk bench attention --variant 'v0[569]*' --shape 2048x128
#include "attention/hopper_attention.cuh"

namespace hk::attention_v09_persistent {
namespace {

void attention_v09_launch(const AttentionArgs& a, cudaStream_t stream) {
  if (a.head_dim > 64 && a.cu_q == nullptr)
    attn_hopper::launch_hopper_attention<attn_hopper::V06Policy>(a, stream, "attention_v09 (V06 policy, persistent)",
                                                                 true);
  else
    attn_hopper::launch_hopper_attention<attn_hopper::V05Policy>(a, stream, "attention_v09 (V05 policy, persistent)",
                                                                 true);
}

std::string attention_v09_supports(const AttentionProblem& p) {
  return attn_hopper::hopper_attention_supports(p, "v09", attn_hopper::V05Policy::kThd);
}

}  // namespace

HK_REGISTER_VARIANT(AttentionProblem, AttentionArgs, "attention", "v09_persistent",
                    "v05 / v06's kernels on a persistent grid: one CTA per SM looping over query tiles (longest "
                    "first), the next tile's Q and K/V loaded under the current tile's last PV and epilogue",
                    90, kFlagProduction, attention_v09_supports, attention_v09_launch);

}  // namespace hk::attention_v09_persistent
