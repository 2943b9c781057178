// hk/ops/rope.hpp — rotary position embedding ("rotate_half", the GPT-NeoX / Llama convention),
// forward and backward, out of place.
//
// For each (b, s, h) and i < R/2, with c = cos[s, i], n = sin[s, i] and h2 = R/2:
//   forward:   y[i]      = x[i] c - x[i + h2] n        y[i + h2] = x[i + h2] c + x[i] n
//   backward:  the same rotation with -n (the rotation's transpose): dx = rope(dy, cos, -sin)
//   i in [R, D): y[i] = x[i] (dimensions past the rotary part pass through)
//
// x, y (dy, dx): [B, S, H, D] in f32, f16 or bf16, one dtype; any strides for B, S and H (a
// slice of a fused QKV projection's output, a transposed [B, H, S, D] tensor) and a contiguous
// last dim; y must not overlap itself. cos, sin: contiguous f32 [S, R/2], the tables for
// positions 0..S-1 (a decode step passes the rows of its own positions); R = 2 * cos's last dim
// is the rotary dim, even, at most D. The tables are inputs, not computed here: the Python
// package builds them from theta and the positions (hk.rope_tables). Math in f32, one rounding
// to the output dtype. Any alignment; past 2^31 elements; an empty tensor is a no-op. Runs on
// `stream`; asynchronous.
#pragma once

#include <cuda_runtime_api.h>

#include "hk/tensor.hpp"

namespace hk {

void rope(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& y,
          cudaStream_t stream = nullptr);
void rope_backward(const TensorView& dy, const TensorView& cos, const TensorView& sin, const TensorView& dx,
                   cudaStream_t stream = nullptr);

}  // namespace hk
