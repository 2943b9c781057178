// hk/ops/gemm_fp8.hpp — FP8 matrix multiply with scaling factors, and the quantiser that makes
// its operands.
//
//   D = sa . sb . (A B^T) [+ bias]        f32 accumulation, one rounding to D's dtype
//
// A: [M, K], e4m3 or e5m2. B: [N, K] (the weight of x W^T), e4m3 or e5m2; A and B may differ.
// FP8 wgmma reads both operands K-major, so the fast kernels take A and B with unit stride along
// K and 16-byte row strides. Any other layout is accepted and copied once into K-major scratch
// before those kernels run: a weight stored [K, N] row-major is passed as its transposed view
// (shape [N, K], strides [1, N]: `w_kn.t()` in PyTorch), and so is a column-major A.
// D: [M, N], row-major with any leading stride, bf16, f16 or f32. bias: [N], contiguous, D's dtype.
// Scaling factors (f32, any strides), by mode:
//   kTensor  sa [1] (or a 0-d view), sb [1]                  D = sa sb (A B^T)
//   kRow     sa [M], sb [N]                                   D[i, j] = sa[i] sb[j] (A B^T)[i, j]
//   kBlock   sa [M, ceil(K/128)]  (a 1 x 128 tile of A each), sb [ceil(N/128), ceil(K/128)]
//            (a 128 x 128 tile of B each): the DeepSeek-V3 scheme,
//            D[i, j] = sum_kb sa[i, kb] sb[j / 128, kb] sum_{k in kb} A[i, k] B[j, k]
// The mode is read from the scales' shapes (gemm_fp8_scaling). Any M, N >= 0 (0 is a no-op),
// K >= 1. Runs on `stream`; asynchronous. Errors are hk::Error naming the operand and the values.
//
// Accumulation (GemmFp8Options::fast_accum). The tensor cores add FP8 products into their
// accumulator with ~14 significant bits. By default every 128-deep block of K is added into f32
// (promotion, as DeepSeek-V3 and DeepGEMM do): relative error ~1e-3 or less at any K. fast_accum
// lets the accumulation run over all of K in the tensor cores (cuBLASLt's FAST_ACCUM, what
// torch._scaled_mm's use_fast_accum selects): faster where the library that serves the call has
// such a kernel, with an error that grows with K (~1-2% of |D| at K = 4096). Per-tensor and
// row-wise scaling only; the block-wise scales are applied per 128-deep block, which is a
// promotion. A route without a fast kernel (hopperkit's wgmma rungs) promotes anyway.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "hk/tensor.hpp"

namespace hk {

enum class Fp8Scaling { kTensor, kRow, kBlock };

// "tensor", "row", "block".
std::string_view to_string(Fp8Scaling s);
Fp8Scaling parse_fp8_scaling(std::string_view name);  // kValue for another name

// The scaling mode that scale views of these shapes pose: rank 2 is block-wise, two single
// values per-tensor, anything else row-wise (shapes are checked against M, N, K afterwards).
Fp8Scaling gemm_fp8_scaling(const TensorView& sa, const TensorView& sb);

struct GemmFp8Options {
  const TensorView* bias = nullptr;  // [N] or absent
  bool fast_accum = false;           // see "Accumulation" above
};

void gemm_fp8(const TensorView& a, const TensorView& sa, const TensorView& b, const TensorView& sb,
              const TensorView& d, const GemmFp8Options& options, cudaStream_t stream = nullptr);
void gemm_fp8(const TensorView& a, const TensorView& sa, const TensorView& b, const TensorView& sb,
              const TensorView& d, const TensorView* bias = nullptr, cudaStream_t stream = nullptr);

// Quantises x ([rows, cols], f32, bf16 or f16, contiguous) into data (same shape, e4m3 or
// e5m2, contiguous) and f32 scales (contiguous) with x ~= scale * data:
//   kTensor  scales [1]
//   kRow     scales [rows]                       one per row
//   kBlock   scales [ceil(rows / block_rows), ceil(cols / 128)]: 1 x 128 tiles (block_rows = 1,
//            the layout of sa) or 128 x 128 tiles (block_rows = 128, the layout of sb)
// scale = amax / max_finite(dtype) over the group (1 for an all-zero group) and data =
// saturate(round(x / scale)), so the group's largest magnitude lands on the format's largest
// finite value (448 for e4m3, 57344 for e5m2).
void quantize_fp8(const TensorView& x, const TensorView& data, const TensorView& scales, Fp8Scaling scaling,
                  int block_rows = 1, cudaStream_t stream = nullptr);

// The scales' shape quantize_fp8 writes for x of shape [rows, cols].
std::vector<int64_t> fp8_scale_shape(Fp8Scaling scaling, int64_t rows, int64_t cols, int block_rows = 1);

}  // namespace hk
