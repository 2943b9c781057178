// hk/ops/gemm_w4a16.hpp — weight-only 4-bit GEMM: y = x dequant(W)^T (docs/gemm_w4a16.md).
//
//   dequant(W)[n, k] = (q[n, k] - z[n, k / g]) * s[n, k / g]
//
// x [M, K] and y [M, N] are bf16 or f16 (one dtype), each with a row stride >= its row length
// and a contiguous last dim; math and accumulation in f32, one rounding to y's dtype. W is N x K
// unsigned 4-bit values q in [0, 15], quantised in groups of g consecutive values along K, each
// group with a scale s (x's dtype) and a 4-bit zero point z (asymmetric) or the fixed zero 8
// (symmetric: no zeros tensor). g is a multiple of 32 that divides K, or K itself (one group per
// row); K is a multiple of 8. G = K / g groups per row.
//
// Storage (the interchange format, W4A16Layout::kRows):
//   qweight  i32 [N, K / 8]         eight values per word along K: q[n, 8w + j] in bits 4j..4j+3
//                                   of word (n, w), j = 0..7 (value 0 in the low nibble)
//   scales   x's dtype [N, G]       contiguous
//   zeros    i32 [N, ceil(G / 8)]   z[n, i] in bits 4(i % 8).. of word (n, i / 8), the nibbles of
//                                   a last partial word ignored; absent when symmetric
// W4A16Layout::kTiled stores qweight pre-permuted into mma fragment order
// (w4a16_repack_tiled): i32 [ceil(N / 8), Kp] with Kp = K rounded up to 128; see
// w4a16_repack_tiled below. Pack, unpack and repack round-trip bit-exactly.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "hk/tensor.hpp"

namespace hk {

enum class W4A16Layout : uint8_t {
  kRows,   // the interchange format: i32 [N, K / 8]
  kTiled,  // fragment order: i32 [ceil(N / 8), round_up(K, 128)] (w4a16_repack_tiled)
};

struct W4A16Options {
  int64_t group_size = 128;  // g: a multiple of 32 dividing K, or K
  W4A16Layout layout = W4A16Layout::kRows;
};

// y = x dequant(W)^T on `stream`. `zeros` null means symmetric (zero point 8). Typed errors:
// wrong dtypes -> kType; shapes, group size, null pointers -> kValue; layouts no rung takes ->
// kNotSupported. M = 0 or N = 0 is a no-op.
void gemm_w4a16(const TensorView& x, const TensorView& qweight, const TensorView& scales, const TensorView* zeros,
                const TensorView& y, const W4A16Options& options = {}, cudaStream_t stream = nullptr);

// ---- host-side format helpers (CPU; plain vectors, row-major) --------------------------------

// q [N, K] values 0..15 (one per byte) -> qweight [N, K / 8] (K a multiple of 8). Values above 15
// are kValue.
std::vector<int32_t> w4a16_pack(const std::vector<uint8_t>& q, int64_t n, int64_t k);
// qweight [N, K / 8] -> q [N, K]; the inverse of w4a16_pack, bit-exact.
std::vector<uint8_t> w4a16_unpack(const std::vector<int32_t>& qweight, int64_t n, int64_t k);
// z [N, G] values 0..15 -> zeros [N, ceil(G / 8)] (unused nibbles of the last word zero).
std::vector<int32_t> w4a16_pack_zeros(const std::vector<uint8_t>& z, int64_t n, int64_t groups);
std::vector<uint8_t> w4a16_unpack_zeros(const std::vector<int32_t>& zeros, int64_t n, int64_t groups);

// The interchange qweight [N, K / 8] in fragment order, i32 [ceil(N / 8), Kp], Kp = K rounded up
// to 128. Row i holds n-tile i (n = 8i .. 8i + 7) as Kp / 128 tiles of 128 words (512 bytes);
// in tile b, word 4 l + c (lane l = 4 r + t, chunk c = 0..3) is interchange word
// (8i + r, 16b + 4c + t), zero past N or past K / 8. A warp reads one tile with one 16-byte load
// per lane: lane l gets, for each of the tile's four 32-wide K chunks, the word whose eight
// values are that lane's B-fragment values of mma.m16n8k16 (docs/gemm_w4a16.md, "Layout").
std::vector<int32_t> w4a16_repack_tiled(const std::vector<int32_t>& qweight, int64_t n, int64_t k);
// The inverse: the interchange qweight [N, K / 8] from the tiled one (padding dropped).
std::vector<int32_t> w4a16_unrepack_tiled(const std::vector<int32_t>& tiled, int64_t n, int64_t k);
// Index into the tiled tensor of interchange word (n, w); `kp` = K rounded up to 128. constexpr,
// so kernels call the same function (nvcc --expt-relaxed-constexpr).
constexpr int64_t w4a16_tiled_index(int64_t n, int64_t w, int64_t kp) {
  const int64_t lane = (n % 8) * 4 + (w % 4);
  return (n / 8) * kp + (w / 16) * 128 + lane * 4 + (w % 16) / 4;
}

// Round-to-nearest group quantisation of w [N, K] (f32): asymmetric s = (max - min) / 15,
// z = round(-min / s) clamped to [0, 15]; symmetric s = max|w| / 7.5, z = 8 (q = round(w / s) + 8
// clamped to [0, 15]). A group of zeros gets s = 1 (q = z). Scales are returned in f32; the
// caller rounds them to the activation dtype (the kernels read them in x's dtype).
struct W4A16Quantized {
  std::vector<int32_t> qweight;  // [N, K / 8]
  std::vector<float> scales;     // [N, G]
  std::vector<int32_t> zeros;    // [N, ceil(G / 8)]; empty when symmetric
};
W4A16Quantized w4a16_quantize(const std::vector<float>& w, int64_t n, int64_t k, int64_t group_size, bool symmetric);

}  // namespace hk
