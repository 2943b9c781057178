// gemm/gemm_op.hpp — the GEMM op contract: problem, args, flops/bytes, reference, tolerance.
//
//   in  {a, b, [c_in if beta != 0], [bias if has_bias]}    out {c}
//   c = act(alpha * a b + beta * c_in + bias)
//
// A problem carries the layout (each operand's leading and batch strides, in elements) so that
// supports() can apply TMA's rules; harness-made problems derive the strides from `pad`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/gemm.hpp"
#include "hk/registry.hpp"

namespace hk {

struct GemmProblem final : Problem {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  // Operands carry a leading batch dim ([batch, rows, cols]); true whenever batch > 1, and for
  // a batch of one or none built from rank-3 views (Family::make_problem), whose specs keep it.
  bool batched = false;
  DType in_dtype = DType::kBF16;   // A and B
  DType out_dtype = DType::kBF16;  // C, C_in, bias
  bool a_col = false;              // A column-major ([M, K] with unit stride along M)
  bool b_col = false;              // B column-major ([K, N] with unit stride along K)
  GemmActivation act = GemmActivation::kNone;
  bool has_bias = false;
  float alpha = 1.0f, beta = 0.0f;
  bool small_int = false;          // exact test: integer inputs, zero tolerance
  // Strides in elements. lda is the stride between A's rows (row-major) or columns (column-
  // major); the batch strides step between matrices of a batch.
  int64_t lda = 0, ldb = 0, ldc = 0, ldc_in = 0;
  int64_t batch_stride_a = 0, batch_stride_b = 0, batch_stride_c = 0, batch_stride_c_in = 0;

  // A harness problem: tight batch strides, leading dims padded by `pad` elements.
  GemmProblem(int64_t m, int64_t n, int64_t k, int64_t batch, DType in, DType out, bool a_col,
              bool b_col, int64_t pad = 0);

  std::string layout() const;  // "nn", "nt", "tn", "tt": 't' marks a column-major operand
  int64_t k_blocks(int64_t block_k) const { return (k + block_k - 1) / block_k; }

  std::string family() const override { return "gemm"; }
  std::string key() const override;
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  // Bench shapes (up to 16384^3) check 2^16 sampled outputs: O(K) each instead of O(M N K).
  bool reference_at(const std::vector<HostTensor>& in, int output_index,
                    const std::vector<int64_t>& flat, std::vector<double>& values) const override;
  Tolerance tolerance(int output_index) const override;
  // What Family::make_problem reads besides the inputs: alpha, beta, activation, out_dtype,
  // out_row_stride (C's row stride when padded), small_int; each only when not the default.
  Attrs attrs() const override;
};

// What a rung's launcher receives. Element (b, i, j) of A is at
// a + b * batch_stride_a + (a_col ? i + j * lda : i * lda + j); B likewise with (k, n).
struct GemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c_in = nullptr;  // null when beta == 0
  const void* bias = nullptr;  // null without bias
  void* c = nullptr;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t lda = 0, ldb = 0, ldc = 0, ldc_in = 0;
  int64_t batch_stride_a = 0, batch_stride_b = 0, batch_stride_c = 0, batch_stride_c_in = 0;
  bool a_col = false, b_col = false;
  DType in_dtype = DType::kBF16, out_dtype = DType::kBF16;
  float alpha = 1.0f, beta = 0.0f;
  GemmActivation act = GemmActivation::kNone;
  static GemmArgs bind(const GemmProblem& p, const Operands& ops);
};

// TMA's rules for one problem (16-byte aligned bases, leading and batch strides a multiple of
// 16 bytes, K >= 1) for A and B, and for C too when the rung stores C with TMA; "" when every
// operand qualifies, else the first reason, e.g.
// "gemm: K*2 bytes must be a multiple of 16 for TMA, got K=1001".
std::string gemm_tma_supports(const GemmProblem& p, bool tma_store);

// The rules of the cp.async rungs (16-byte copies of A and B into shared memory): 16-byte
// aligned operands, leading dims and batch strides of A and B a multiple of 16 bytes, and the
// grid limits of block_m x block_n tiles (grid.y = M tiles and grid.z = batch up to 65535); ""
// when the problem qualifies, else the first reason, e.g.
// "gemm: K*2 bytes must be a multiple of 16 for cp.async, got K=799".
std::string gemm_cp_async_supports(const GemmProblem& p, int64_t block_m);

// v15's launcher (gemm/v15_fused_fast_epilogue.cu): v18 runs it for the problems its stream-K
// schedule does not split.
void gemm_v15_launch(const GemmArgs& g, cudaStream_t stream);
// v18's launcher (gemm/v18_stream_k_tail.cu): the production kernel for operands TMA can
// describe; the packing rung runs it on its aligned copies.
void gemm_v18_launch(const GemmArgs& g, cudaStream_t stream);

}  // namespace hk
