// attention/v10_fp8_forward.cu
//
// Rung 10: the forward on e4m3 inputs (FlashAttention-3's FP8 forward): v06's kernel with Q K^T
// and P V as 8-bit wgmma (k32 steps), the descales of Q and K folded into the softmax's scale and
// V's into the output, P offset by 2^8 into e4m3's normal range, and V transposed into scratch
// first (the 8-bit wgmma reads B K-major only), its keys ordered so that P's accumulator
// fragment is already the A fragment (hopper_attention.cuh, pack_p_e4m3). Output bf16.
// Needs: sm_90a; e4m3 Q, K, V; D a multiple of 16 up to 128; fixed lengths; no softcap.
// Speed: 751 TFLOP/s at B4 H16 S4096 D128 non-causal, 1.20x the bf16 forward in the same run
// (H200, 2026-12-05).
#include <climits>

#include "attention/hopper_attention.cuh"

namespace hk::attn_hopper {
struct V06Fp8Policy {
  static constexpr bool kIntraWgOverlap = true;
  static constexpr bool kPingpong = true;
  static constexpr bool kFp8 = true;
};
template void launch_typed<__nv_fp8_e4m3, 64, V06Fp8Policy>(const AttentionArgs&, cudaStream_t, const char*, bool);
template void launch_typed<__nv_fp8_e4m3, 128, V06Fp8Policy>(const AttentionArgs&, cudaStream_t, const char*, bool);
}  // namespace hk::attn_hopper

namespace hk::attention_v10_fp8_forward {
namespace {

void attention_v10_launch(const AttentionArgs& a, cudaStream_t stream) {
  using P = attn_hopper::V06Fp8Policy;
  if (a.head_dim <= 64) attn_hopper::launch_typed<__nv_fp8_e4m3, 64, P>(a, stream, "attention_v10", false);
  else attn_hopper::launch_typed<__nv_fp8_e4m3, 128, P>(a, stream, "attention_v10", false);
}

std::string attention_v10_supports(const AttentionProblem& p) {
  if (p.dtype != DType::kF8E4M3) return "takes e4m3 inputs";
  if (p.backward) return "forward only";
  if (p.is_varlen()) return "fixed lengths only";
  if (p.softcap > 0) return "no softcap";
  if (p.seqlen_k < 1) return "needs Sk >= 1 (a TMA extent)";
  if (p.head_dim < 16 || p.head_dim > 128 || p.head_dim % 16 != 0) return "D a multiple of 16 up to 128";
  if (p.batch > 65535 || p.seqlen_q > INT32_MAX - 128 || p.seqlen_k > INT32_MAX - 128) return "sizes past the grid";
  // TMA: 16-byte aligned bases and q, k's (b, s, h) strides multiples of 16 bytes (16 e4m3); v is
  // read by the transposing pass, o written as bf16 pairs (rows_16b's 8 elements)
  if (std::string why = p.rows_16b(); !why.empty()) return why;
  auto rows16 = [](const AttnStrides& s) { return s.b % 16 == 0 && s.s % 16 == 0 && s.h % 16 == 0; };
  if (!rows16(p.str_q) || !rows16(p.str_k)) return "q and k strides must be multiples of 16 elements (TMA)";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(AttentionProblem, AttentionArgs, "attention", "v10_fp8_forward",
                    "e4m3 forward (bf16 out): v06's kernel with 8-bit wgmma, per-head descales, P offset into "
                    "e4m3's range, V transposed once into scratch in the key order of P's register fragment",
                    90, kFlagProduction, attention_v10_supports, attention_v10_launch);

}  // namespace hk::attention_v10_fp8_forward
