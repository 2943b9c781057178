// attention/v07_wgmma_backward.cu
//
// Rung 7: the FlashAttention backward on Hopper's own machinery (hopper_attention_bwd.cuh),
// FlashAttention-3's structure simplified. v04 computes the five products of the backward with
// mma.sync from ldmatrix fragments, every warp copying its Q/dO tiles with cp.async. Here a CTA
// keeps 128 keys of K and V in shared memory (TMA, once) while one producer thread streams
// 64-row Q and dO blocks (and their lse, Delta) by TMA into a full/empty mbarrier ring; two
// consumer warpgroups (64 keys each) run S^T = K Q^T and dP^T = V dO^T as wgmma from shared
// memory, dV += P^T dO and dK += dS^T Q as wgmma with P^T and dS^T straight from registers, and
// dQ = dS K as wgmma from a dS^T tile staged in shared memory, added to an f32 accumulator (D <=
// 128: the warpgroup's 64 x 64 tile staged in shared memory in fragment order and added by one
// cp.reduce.async.bulk; D = 256: red.global.add.v2.f32); a last kernel scales
// and converts it. Within a warpgroup, P^T's exponentials run while dP^T is in the tensor cores,
// and dQ's wgmma is queued before dK's, so that dQ's reduction runs under dK.
// deterministic: the dQ additions of each query block take turns in key-block order, last key
// block first, with the grid launched in that order (a counter per block, acquire/release; the
// kernels in v07_wgmma_backward_det.cu), so every run rounds the same sums in the same order.
// Adds over v04: TMA + mbarrier ring, wgmma from shared memory, P^T and dS^T as register
// operands, a producer warpgroup beside two consumers, deterministic dQ without recomputation.
// Measured (H200, 2026-12-02): 390 TFLOP/s at B4 S4096 H16 D128, 3.7x v04, with per-thread
// reductions and the exponentials after dP; with the bulk reduction and the overlaps, 3.30 ms
// against cuDNN's 2.96 ms (0.90x, ncu at fixed clocks, the same shape).
// Head dims: a multiple of 8 up to 256, on the 16- and 32-column tiles (D <= 16, D <= 32: 32- and
// 64-byte rows under the 32- and 64-byte swizzles; v07_wgmma_backward_narrow.cu), the 64-column
// tiles (D <= 64), the 128-column ones
// (D <= 128) or the 256-column ones (64 keys per CTA, both warpgroups computing S^T and dP^T and
// each accumulating half of dK's, dV's and dQ's columns); TMA fills the columns past D with
// zeros, so D = 80 costs D = 128's tensor work and no copy.
// Variable length (thd): the same kernels over the packed tensors, each CTA at its sequence's
// first rows with its lengths, the per-row scratch in whole 64-row blocks per sequence; before,
// the thd backward above D = 96 ran here on copies of the batch with every sequence front-padded
// to the longest (nseq x max rows of copies and work).
// Needs: sm_90a; bf16 or f16; D a multiple of 8 up to 256; every operand 16-byte aligned with
// (b, s, h) strides multiples of 8 elements; Sq, Sk >= 1 (thd: total_q, total_k >= 1); backward only.
// Run:   hk bench attention --variant 'v0[47]*' --shape 2048x128x1
// Build: own translation unit.
#include "attention/hopper_attention_bwd.cuh"

namespace hk::attention_v07_wgmma_backward {
namespace {

void attention_v07_launch(const AttentionArgs& a, cudaStream_t stream) {
  if (a.head_dim <= 32) return attn_hopper_bwd::launch_bwd_narrow(a, stream);  // v07_wgmma_backward_narrow.cu
  if (a.deterministic) return attn_hopper_bwd::launch_bwd_deterministic(a, stream);  // v07_wgmma_backward_det.cu
  attn::dispatch_16bit(a.dtype, "attention/v07_wgmma_backward", [&](auto t) {
    using T = decltype(t);
    // the 16- and 32-column tiles for D <= 32 (above), the 64-column ones up to 64, the
    // 128-column ones up to 128, the 256-column ones above (zero columns past D)
    if (a.head_dim <= 64) attn_hopper_bwd::launch_bwd<T, 64, false>(a, stream);
    else if (a.head_dim <= 128) attn_hopper_bwd::launch_bwd<T, 128, false>(a, stream);
    else attn_hopper_bwd::launch_bwd<T, 256, false>(a, stream);
  });
}

std::string attention_v07_supports(const AttentionProblem& p) { return attn_hopper_bwd::supports(p); }

}  // namespace

HK_REGISTER_VARIANT(AttentionProblem, AttentionArgs, "attention", "v07_wgmma_backward",
                    "FlashAttention-3-style backward: K/V resident per 128-key CTA, Q/dO blocks by TMA into an "
                    "mbarrier ring, the five products as wgmma (P^T, dS^T from registers), dQ by f32 vector "
                    "reductions (deterministic: in key-block order); fixed or variable length",
                    90, kFlagProduction, attention_v07_supports, attention_v07_launch);

}  // namespace hk::attention_v07_wgmma_backward
