// attention/dispatch.cpp — which production rung serves a public attention call.
//
// Forward: above 64 columns (the 128- and 256-column tiles: D = 72 ... 256) at fixed lengths,
// v06's kernel on a persistent grid (v09); at fixed lengths otherwise, v06
// (v05 with FlashAttention-3's ping-pong between the consumer warpgroups and S(n + 1) issued with
// PV(n)); else the TMA + wgmma kernel (v05) for D a multiple of 8 up to 256 with TMA-describable
// q, k, v (variable length included); other D up to 256 or operands in other strides through v08, which
// copies them with D zero-padded and runs v06 / v05 on the copies; the FlashAttention-2
// tensor-core kernel (v03) where it runs and v05 does not; else the general CUDA-core
// online-softmax rung (v02: any D, any strides: D > 256 and f32).
// Backward: the TMA + wgmma backward (v07) for D a multiple of 8 up to 256 with TMA-describable
// operands (variable length included), other D up to 256 through v08's padded copies; the
// FlashAttention-2 tensor-core backward (v04, D in {32, 64, 96, 128}, 16-byte rows; atomic dQ
// by default, a separate dQ pass when deterministic), else v02's CUDA-core backward
// (deterministic always). v02 accepts every valid problem, so the public op never refuses one.
#include "attention/attention_op.hpp"

namespace hk {
namespace {

std::vector<Route> attention_dispatch(const AttentionProblem& p) {
  // H200, 2026-12-02, bf16, 16k tokens, one process: D = 128 at S = 4096, v06 659 TFLOP/s and v05
  // 569 (causal: 538 and 463); D = 64, v06 402 / 320 and v05 399 / 312 at S = 2048 (causal: the
  // second), 260 and 278 at S = 512: v06 gains only where the PV GEMM is as long as QK^T's.
  // v03 106 / 98 at S = 2048, D = 64. Backward, H200, 2026-12-02, bf16, B4 S4096 H16 D128: v07
  // 390 TFLOP/s, v04 106; with dQ by bulk reduction and the exponentials under dP's MMA, 0.90x
  // cuDNN's backward (ncu, 3.30 / 2.96 ms). v09 (tiles from a counter) against v06 in one process at
  // B8 S2048: D = 128 451 / 475 us, causal 275 / 301 (and 270 / 292); D = 256 causal 299 / 310. D = 64
  // at B8 S2048 H32 (same day, one process): v06 688 us, v09 (v05's kernel) 760, v05 833; causal
  // 432, 448, 510. S = 512 not measured since.
  // e4m3 in, bf16 out: forward only. v10 at B4 H16 S4096 D128: 751 TFLOP/s, 1.20x the bf16
  // forward (H200, 2026-12-05); v02 is the general rung on the 8-bit values.
  if (p.dtype == DType::kF8E4M3)
    return {{"v10_fp8_forward", "e4m3 Q, K, V with per-head descales: 8-bit wgmma, P offset into e4m3's range"},
            {"v02_online_softmax", "what v10 declines (D not a multiple of 16 or above 128, variable length, softcap, "
                                   "strides TMA cannot read): the general rung on the 8-bit values, descales folded in"}};
  if (!p.backward) {
    std::vector<Route> routes;
    if (p.head_dim > 64 && !p.is_varlen())
      routes.push_back({"v09_persistent", "D above 64, fixed lengths: v06's kernel on a persistent grid (tiles claimed "
                                          "from a counter; the next tile's Q and K/V load under the current one's "
                                          "last PV and epilogue), 1.05x v06 at S = 2048, D = 128, 1.09x causal"});
    if (!p.is_varlen())
      routes.push_back({"v06_pingpong_overlap", "fixed lengths (D <= 64, or a grid v09 declines): the warpgroups take turns "
                                                "at the MMAs, 1.21x v05 at B8 S2048 H32 D64 (688 / 833 us), 1.18x causal"});
    routes.insert(routes.end(),
                  {{"v05_wgmma_tma", "D a multiple of 8 up to 256, TMA-describable q, k, v: wgmma with P from "
                                     "registers, 3.7x v03 at S = 2048, D = 64"},
                   {"v08_padded_pack", "other D up to 256, or rows TMA cannot read: copies with D zero-padded, "
                                       "v06 / v05 on them (a 2.7B-sized block's D = 80 ran on CUDA cores before: "
                                       "110x slower)"},
                   {"v03_fa2_mma_sync", "tensor cores: mma.sync m16n8k16 for Q K^T and P V, online softmax in "
                                        "registers"},
                   {"v02_online_softmax", "general: any head dim, any strides (CUDA cores, one pass over K/V)"}});
    return routes;
  }
  return {{"v07_wgmma_backward", "D a multiple of 8 up to 256, TMA-describable operands, fixed or variable length: "
                                 "wgmma with P^T and dS^T from registers, K/V resident per 128 keys, dQ by bulk f32 "
                                 "reductions: 0.90x cuDNN at B4 S4096 H16 D128 (ncu, H200, 2026-12-02)"},
          {"v08_padded_pack", "other D up to 256, or rows TMA cannot read: copies with D zero-padded, v07 on them"},
          {"v04_fa2_backward", "tensor cores: P recomputed from lse, dK/dV per 64-key block, dQ by f32 atomics "
                               "(deterministic: a separate dQ pass)"},
          {"v02_online_softmax", "general: any head dim, any strides (CUDA cores, deterministic)"}};
}

}  // namespace

HK_REGISTER_DISPATCH(AttentionProblem, "attention", attention_dispatch);

}  // namespace hk
