// row_sum/row_sum_op.hpp — the row-sum op contract: problem, args, flops/bytes, reference,
// tolerance.
//
// in {x [rows, cols], leading stride ldx >= cols}, out {y [rows]}    y[r] = sum_t x[r, t]
// Built from a tensor [..., cols] (Family::make_problem), x keeps its leading dimensions and y
// is [...]; the kernels see [rows, cols] either way. One dtype (f32, f16, bf16) for x and y; accumulation in f32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/row_sum.hpp"
#include "hk/registry.hpp"

namespace hk {

struct RowSumProblem final : Problem {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ldx = 0;  // row stride of x in elements (== cols when contiguous)
  DType dtype = DType::kBF16;
  std::vector<int64_t> lead;  // x's leading dimensions, y's shape (product: rows)

  RowSumProblem(int64_t r, int64_t c, DType dt, int64_t ld = 0)
      : rows(r), cols(c), ldx(ld ? ld : c), dtype(dt), lead{r} {}
  int64_t numel() const { return rows * cols; }

  std::string family() const override { return "row_sum"; }
  std::string key() const override;
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  Tolerance tolerance(int output_index) const override;
};

// What a rung's launcher receives.
struct RowSumArgs {
  const void* x = nullptr;
  void* y = nullptr;
  int64_t rows = 0, cols = 0, ldx = 0;
  DType dtype = DType::kBF16;
  static RowSumArgs bind(const RowSumProblem& p, const Operands& ops);
};

}  // namespace hk
