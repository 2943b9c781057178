// hk/ops/attention.hpp — scaled dot-product attention (FlashAttention forward and backward).
//
//   S   = scale * Q K^T                      (per batch and query head; f32)
//   S   = softcap * tanh(S / softcap)        (only when softcap > 0)
//   S  += mask                               (-inf where a key is masked out)
//   O   = softmax(S) V,   LSE = log(sum_j exp(S_ij))   (natural log, f32)
//
// Tensors (one dtype, f16 or bf16, for q, k, v, o and the gradients; accumulation and softmax in
// f32):
//   layout kBSHD (FlashAttention's): q, o, dout, dq [B, Sq, Hq, D]; k, v, dk, dv [B, Sk, Hkv, D]
//   layout kBHSD (PyTorch SDPA's):   q, o, dout, dq [B, Hq, Sq, D]; k, v, dk, dv [B, Hkv, Sk, D]
//   lse: f32 [B, Hq, Sq], contiguous, in both layouts.
// Every tensor may have any strides in its first three dimensions (a transposed or sliced view
// is taken as it is, without a copy); the last dimension must be contiguous (stride 1).
// Grouped-query attention: Hq a multiple of Hkv; query head h reads key/value head
// h / (Hq / Hkv), never a materialised copy (MQA: Hkv = 1). dk and dv sum over the group.
//
// Masks, with off = Sk - Sq (FlashAttention >= 2.1's bottom-right alignment): query i may attend
// key j iff
//   causal:            j <= i + off
//   window_left  >= 0: j >= i + off - window_left       (-1: unbounded)
//   window_right >= 0: j <= i + off + window_right      (-1: unbounded; causal means 0)
// A query row whose every key is masked out (possible when Sq > Sk with causal, or with a
// window) gets O = 0 and LSE = -inf, and contributes nothing to the gradients (its dq is 0).
// scale <= 0 means 1 / sqrt(D). Any D >= 1 and any Sq, Sk >= 0 (Sk = 0: every row masked);
// B, Sq or Hq zero is a no-op. Outputs must not overlap inputs. Runs on `stream`; asynchronous.
//
// Variable length (attention_varlen, FlashAttention's varlen API): B sequences packed along the
// rows of q, o, dout, dq [total_q, Hq, D] and k, v, dk, dv [total_k, Hkv, D] (any row and head
// strides, D contiguous); cu_seqlens_q / cu_seqlens_k int32 [B + 1] prefix sums in device
// memory (sequence b: rows cu[b] .. cu[b+1]-1; 0 = cu[0] <= cu[1] <= ... <= cu[B] <= total);
// max_seqlen_q / max_seqlen_k at least every sequence's length (they size the grid); lse f32
// [Hq, total_q]. Each sequence is its own problem: the masks above with off = its Sk - its Sq;
// sequences of length 0 are valid (Sk = 0: O = 0, lse = -inf). Checked before any launch
// (typed errors): shapes, dtypes, strides, cu_seqlens' dtype (i32), rank, length (B + 1, both
// the same) and contiguity, max_seqlen >= 0. The prefix sums' values are not read on the host
// (that would synchronize the stream); the kernels clamp them to [0, total] and to be
// non-decreasing, so wrong ones never make a kernel touch memory outside the tensors, and rows
// past max_seqlen or outside every sequence are left unspecified. The fp64 reference (the
// NumPy / CPU path) checks the values fully.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "hk/tensor.hpp"

namespace hk {

// kTHD: the packed variable-length layout, set by attention_varlen (attention() refuses it).
enum class AttentionLayout : uint8_t { kBSHD, kBHSD, kTHD };

struct AttentionOptions {
  bool causal = false;
  double scale = 0.0;          // <= 0: 1 / sqrt(D)
  int64_t window_left = -1;    // -1: unbounded
  int64_t window_right = -1;   // -1: unbounded (0 when causal)
  double softcap = 0.0;        // 0: off
  AttentionLayout layout = AttentionLayout::kBSHD;
  bool deterministic = false;  // backward: bitwise identical results run to run (no atomics)
};

// o, lse from q, k, v.
void attention(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
               const TensorView& lse, const AttentionOptions& options = {}, cudaStream_t stream = nullptr);

// The FP8 forward (FlashAttention-3's): q, k, v e4m3 in the layouts attention() takes (bshd or
// bhsd), each with an f32 descale per (batch, kv head): q_descale, k_descale, v_descale
// [B, Hkv], contiguous (query head h uses kv head h / (Hq / Hkv)'s). Computes
//   o = softmax(scale q_descale k_descale q k^T + mask) (v_descale v)
// with o bf16 (q's shape) and lse f32 of the descaled scores; masks, GQA and scale as attention().
// P is rounded to e4m3 on the tensor-core path (relative error up to 2^-4 per probability); the
// general path (head dims other than multiples of 16 up to 128, softcap, strides TMA cannot read)
// keeps it in f32. No backward: FP8 attention is an inference op here.
void attention_fp8(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& q_descale,
                   const TensorView& k_descale, const TensorView& v_descale, const TensorView& o, const TensorView& lse,
                   const AttentionOptions& options = {}, cudaStream_t stream = nullptr);

// dq, dk, dv from q, k, v, o, dout and the forward's lse (P is recomputed from lse).
void attention_backward(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                        const TensorView& dout, const TensorView& lse, const TensorView& dq,
                        const TensorView& dk, const TensorView& dv, const AttentionOptions& options = {},
                        cudaStream_t stream = nullptr);

// o [total_q, Hq, D], lse [Hq, total_q] from packed q, k, v; options.layout is ignored.
void attention_varlen(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& cu_seqlens_q,
                      const TensorView& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k, const TensorView& o,
                      const TensorView& lse, const AttentionOptions& options = {}, cudaStream_t stream = nullptr);

// dq, dk, dv of attention_varlen.
void attention_varlen_backward(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                               const TensorView& dout, const TensorView& lse, const TensorView& cu_seqlens_q,
                               const TensorView& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
                               const TensorView& dq, const TensorView& dk, const TensorView& dv,
                               const AttentionOptions& options = {}, cudaStream_t stream = nullptr);

}  // namespace hk
