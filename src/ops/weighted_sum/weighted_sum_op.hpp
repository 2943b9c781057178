// weighted_sum/weighted_sum_op.hpp — the weighted-sum op contract (the seeds' main example).
//
// Forward:  in {x [rows, D], w [D]}            out {y [rows]}
// Backward: in {x [rows, D], w [D], dy [rows]} out {dx [rows, D], dw [D]}
// x and dx each have a row stride >= D (the test shapes pad rows to exercise it); built from the
// inputs (Family::make_problem), dx's is the attribute out_row_stride (default D).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/weighted_sum.hpp"
#include "hk/registry.hpp"

namespace hk {

struct WeightedSumProblem final : Problem {
  int64_t rows = 0, dim = 0;
  DType dtype = DType::kBF16;
  bool backward = false;
  int64_t ld_x = 0, ld_dx = 0;  // row strides in elements (ld_dx: backward only)

  WeightedSumProblem(int64_t r, int64_t d, DType dt, bool bwd, int64_t pad = 0)
      : rows(r), dim(d), dtype(dt), backward(bwd), ld_x(d + pad), ld_dx(d + pad) {}
  int64_t numel() const { return rows * dim; }
  int row_align() const;  // alignment of every row start (base alignment and row strides)

  std::string family() const override { return "weighted_sum"; }
  std::string key() const override;
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  Tolerance tolerance(int output_index) const override;
  Attrs attrs() const override;  // {"backward"}, plus out_row_stride when ld_dx != dim (backward)
};

struct WeightedSumArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* dy = nullptr;  // backward
  void* y = nullptr;         // forward
  void* dx = nullptr;        // backward
  void* dw = nullptr;        // backward
  int64_t rows = 0, dim = 0, ld_x = 0, ld_dx = 0;
  DType dtype = DType::kBF16;
  bool backward = false;
  static WeightedSumArgs bind(const WeightedSumProblem& p, const Operands& ops);
};

}  // namespace hk
