// attention/v05_wgmma_tma.cu
//
// Rung 5: the FlashAttention forward on Hopper's own machinery (hopper_attention.cuh). v03 feeds
// mma.sync from registers that ldmatrix filled, every warp copying its K/V tiles with cp.async.
// Here one producer thread streams K and V tiles by TMA into full/empty mbarrier rings, and two
// consumer warpgroups of 64 query rows each run S = Q K^T as wgmma from shared memory and
// O += P V as wgmma with P straight from the S registers. Each consumer works in order: S, its
// softmax, then PV, each waited for before the next; the two warpgroups overlap one another only
// as far as the warp schedulers happen to interleave them.
// Adds over v04: TMA + mbarrier ring, wgmma from shared memory, P as a register operand, a
// producer warpgroup beside two consumers.
// Variable length (thd): the TMA maps span the packed [total, H, D] tensors; a CTA starts its
// coordinates at its sequence's first packed row, masks keys past the sequence's end and stores
// only the sequence's rows (the last tile's others belong to the next sequence).
// Head dims: a multiple of 8 up to 256, on the 16- and 32-column tiles (D <= 16, D <= 32: 32- and
// 64-byte rows under the 32- and 64-byte swizzles), the 64-column tiles (D <= 64), the 128-column ones
// (D <= 128) or the 256-column ones (64-key K/V tiles; compiled in v05_wgmma_tma_d256.cu); TMA
// fills the columns past D with zeros and the epilogue stores D columns, so D = 80 costs D = 128's
// tensor work and no copy.
// Needs: sm_90a; bf16 or f16; D a multiple of 8 up to 256; 16-byte aligned q, k, v with strides
// multiples of 8 elements; thd: total_k >= 1; forward only (hopper_attention_supports says which
// rule a problem breaks).
// Run:   hk bench attention --variant 'v0[356]*'
#include "attention/hopper_attention.cuh"

namespace hk::attention_v05_wgmma_tma {
namespace {

void attention_v05_launch(const AttentionArgs& a, cudaStream_t stream) {
  attn_hopper::launch_hopper_attention<attn_hopper::V05Policy>(a, stream, "attention_v05 (hopper kernel, V05 policy)");
}

std::string attention_v05_supports(const AttentionProblem& p) {
  return attn_hopper::hopper_attention_supports(p, "v05", attn_hopper::V05Policy::kThd);
}

}  // namespace

HK_REGISTER_VARIANT(AttentionProblem, AttentionArgs, "attention", "v05_wgmma_tma",
                    "Q/K/V tiles by TMA into full/empty mbarrier rings, S = QK^T and O += PV as wgmma (P from "
                    "registers), a producer warpgroup beside two consumer warpgroups",
                    90, kFlagProduction, attention_v05_supports, attention_v05_launch);

}  // namespace hk::attention_v05_wgmma_tma

namespace hk::attn_hopper {
HK_ATTN_INSTANCES(, V05Policy, 16)
HK_ATTN_INSTANCES(, V05Policy, 32)
HK_ATTN_INSTANCES(, V05Policy, 64)
HK_ATTN_INSTANCES(, V05Policy, 128)
}  // namespace hk::attn_hopper
