// gemm_fp8/gemm_fp8_op.hpp — the FP8 GEMM op contract: problem, args, flops/bytes, reference,
// tolerance.
//
//   in  {a [M, K], sa, b [N, K], sb, [bias [N] if has_bias]}    out {d [M, N]}
//   d = sa sb (a b^T) + bias, with the scales' shapes and meaning by Fp8Scaling (hk/ops/gemm_fp8.hpp)
//
// A problem carries every operand's strides (elements) so that supports() can apply TMA's rules;
// harness-made problems derive them from `b_kn` (B stored [K, N] row-major) and `pad`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/gemm_fp8.hpp"
#include "hk/registry.hpp"

namespace hk {

// The K extent of one scaling block (DeepSeek-V3: 1 x 128 tiles of A, 128 x 128 tiles of B).
inline constexpr int64_t kFp8ScaleBlock = 128;

struct GemmFp8Problem final : Problem {
  int64_t m = 0, n = 0, k = 0;
  DType a_dtype = DType::kF8E4M3, b_dtype = DType::kF8E4M3;  // e4m3 or e5m2 each
  DType out_dtype = DType::kBF16;                               // D and bias
  Fp8Scaling scaling = Fp8Scaling::kTensor;
  bool has_bias = false;
  // The accumulation may run over all of K in the tensor cores (GemmFp8Options::fast_accum):
  // cuBLASLt's FAST_ACCUM; the wgmma rungs promote anyway. Tensor and row scaling only.
  bool fast_accum = false;
  // Harness inputs: integers in [-3, 3] scaled by powers of two (exact in f32: zero tolerance
  // beyond the output's rounding). Otherwise N(0, 1) data rounded to the fp8 formats.
  bool small_int = false;
  // Strides in elements: A[i, k] at a + i * a_s0 + k * a_s1; B[j, k] at b + j * b_s0 + k * b_s1
  // (b_s0 == 1 for a weight stored [K, N] row-major); D[i, j] at d + i * ldd + j.
  int64_t a_s0 = 0, a_s1 = 1, b_s0 = 0, b_s1 = 1, ldd = 0;
  // Scale strides: sa[i] (row) at i * sa_s0, sa[i, kb] (block) at i * sa_s0 + kb * sa_s1; sb
  // likewise with its rows (N for row-wise, N / 128 blocks for block-wise). Tensor-wise: 0.
  int64_t sa_s0 = 0, sa_s1 = 0, sb_s0 = 0, sb_s1 = 0;
  // The alignment (bytes) of D's base address: 256 for harness-made problems; the public op sets it
  // from its d (align_bytes covers A and B, the operands make_problem sees).
  int d_align_bytes = 256;

  // A harness problem: contiguous scales; A's and D's rows (and B's, when [N, K]) padded by `pad`.
  GemmFp8Problem(int64_t m, int64_t n, int64_t k, DType a_dtype, DType b_dtype, DType out_dtype, Fp8Scaling scaling,
                 bool b_kn = false, int64_t pad = 0);

  int64_t k_blocks() const { return (k + kFp8ScaleBlock - 1) / kFp8ScaleBlock; }
  int64_t n_blocks() const { return (n + kFp8ScaleBlock - 1) / kFp8ScaleBlock; }
  bool b_kn() const { return b_s0 == 1 && b_s1 != 1; }
  // The scales' shapes as the harness makes them.
  std::vector<int64_t> sa_shape() const;
  std::vector<int64_t> sb_shape() const;

  std::string family() const override { return "gemm_fp8"; }
  std::string key() const override;
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  bool reference_at(const std::vector<HostTensor>& in, int output_index, const std::vector<int64_t>& flat,
                    std::vector<double>& values) const override;
  Tolerance tolerance(int output_index) const override;
  Attrs attrs() const override;
};

// What a rung's launcher receives (pointers and the problem's strides).
struct GemmFp8Args {
  const void* a = nullptr;
  const void* b = nullptr;
  const float* sa = nullptr;
  const float* sb = nullptr;
  const void* bias = nullptr;  // null without bias
  void* d = nullptr;
  int64_t m = 0, n = 0, k = 0;
  int64_t a_s0 = 0, a_s1 = 1, b_s0 = 0, b_s1 = 1, ldd = 0;
  int64_t sa_s0 = 0, sa_s1 = 0, sb_s0 = 0, sb_s1 = 0;
  DType a_dtype = DType::kF8E4M3, b_dtype = DType::kF8E4M3, out_dtype = DType::kBF16;
  Fp8Scaling scaling = Fp8Scaling::kTensor;
  bool fast_accum = false;  // GemmFp8Problem::fast_accum
  static GemmFp8Args bind(const GemmFp8Problem& p, const Operands& ops);
};

// The fp64 value of one output: sum over K of the dequantised products (per scaling block for
// kBlock), plus bias, before the rounding to D's dtype. `a` is [M, K], `b` [N, K] logical values.
double gemm_fp8_exact(const GemmFp8Problem& p, const std::vector<double>& a, const std::vector<double>& b,
                      const std::vector<double>& sa, const std::vector<double>& sb, const std::vector<double>* bias,
                      int64_t i, int64_t j);

// The host quantiser (fp64 in, the values quantize_fp8 produces out): x is [rows, cols] in
// logical order; data (fp8 values as doubles) and scales come back in logical order, scales
// shaped fp8_scale_shape(scaling, rows, cols, block_rows). The oracle of the device quantiser.
void quantize_fp8_host(const std::vector<double>& x, int64_t rows, int64_t cols, DType dtype, Fp8Scaling scaling,
                       int block_rows, std::vector<double>& data, std::vector<double>& scales);
// The largest finite value of an fp8 format: 448 (e4m3), 57344 (e5m2).
double fp8_max_finite(DType dtype);

// The rules of the TMA rungs for A and B (K-major: unit stride along K; 16-byte aligned bases and
// row strides; 32-bit coordinates); "" when both qualify, else the first reason, e.g.
// "gemm_fp8: A's row stride must be a multiple of 16 bytes for TMA, got K=1001".
std::string gemm_fp8_tma_supports(const GemmFp8Problem& p);

// Whether an M x N x K problem has so few 128 x 128 output tiles over so long a K that splitting
// K over the CTAs (v05_split_k) should serve it: at most 32 tiles (a quarter of the H200's SMs)
// and 16 or more 128-deep k-blocks.
bool gemm_fp8_prefers_split_k(int64_t m, int64_t n, int64_t k);

// The problem that a launch's arguments pose, with its alignment taken from A's and B's pointers:
// what the packing rung hands the dispatch for its K-major copies, and cuBLASLt's plan-cache key.
GemmFp8Problem gemm_fp8_problem_of(const GemmFp8Args& g);

}  // namespace hk
