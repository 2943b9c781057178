// softmax/softmax_op.hpp — the softmax op contract: problem, args, flops/bytes, reference,
// tolerance.
//
// Forward:  in {x [rows, cols]},          out {y}    y  = exp(x - max x) / sum exp(x - max x)
// Backward: in {y, dy [rows, cols]},      out {dx}   dx = y * (dy - sum(dy * y))
// Rows have leading strides ld_in (x or y), ld_dy (dy), ld_out (y or dx), each >= cols; one
// dtype (f32, f16, bf16) for every operand; math in f32. Built from tensors [..., cols]
// (Family::make_problem), the operands keep their leading dimensions; the kernels see
// [rows, cols] either way. The output's row stride is the attribute out_row_stride there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/softmax.hpp"
#include "hk/registry.hpp"

namespace hk {

struct SoftmaxProblem final : Problem {
  int64_t rows = 0;
  int64_t cols = 0;
  DType dtype = DType::kBF16;
  bool backward = false;
  int64_t ld_in = 0, ld_dy = 0, ld_out = 0;  // row strides in elements
  std::vector<int64_t> lead;  // the operands' leading dimensions (product: rows)

  SoftmaxProblem(int64_t r, int64_t c, DType dt, bool bwd, int64_t in = 0, int64_t out = 0, int64_t dy = 0)
      : rows(r), cols(c), dtype(dt), backward(bwd), ld_in(in ? in : c), ld_dy(dy ? dy : (in ? in : c)),
        ld_out(out ? out : c), lead{r} {}
  int64_t numel() const { return rows * cols; }
  // "" when every operand's rows start at the same 16-byte phase as x's (or y's) rows, so one
  // head/vector/tail split serves all of them; otherwise why not. The vectorized rungs need it.
  std::string same_row_phase() const;

  std::string family() const override { return "softmax"; }
  std::string key() const override;
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  Tolerance tolerance(int output_index) const override;
  Attrs attrs() const override;  // {"backward": bool}, plus out_row_stride when ld_out != cols
};

// What a rung's launcher receives. Forward: a = x, out = y. Backward: a = y, dy, out = dx.
struct SoftmaxArgs {
  const void* a = nullptr;
  const void* dy = nullptr;
  void* out = nullptr;
  int64_t rows = 0, cols = 0, ld_a = 0, ld_dy = 0, ld_out = 0;
  DType dtype = DType::kBF16;
  bool backward = false;
  static SoftmaxArgs bind(const SoftmaxProblem& p, const Operands& ops);
};

}  // namespace hk
