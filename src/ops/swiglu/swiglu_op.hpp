// swiglu/swiglu_op.hpp — the SwiGLU op contract: problem, args, flops/bytes, reference, tolerance.
//
// Forward:  in {x [rows, 2F]},              out {y [rows, F]}      y = silu(x[:, :F]) * x[:, F:]
// Backward: in {x [rows, 2F], dy [rows, F]}, out {dx [rows, 2F]}
// Every operand has its own row stride (ld_*) >= its row length and a contiguous last dim; the
// test shapes pad rows to exercise it. Math in f32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/swiglu.hpp"
#include "hk/registry.hpp"

namespace hk {

struct SwigluProblem final : Problem {
  int64_t rows = 0, dim = 0;  // dim = F: the output's row length (x holds 2F per row)
  DType dtype = DType::kBF16;
  bool backward = false;
  int64_t ld_x = 0, ld_dy = 0, ld_out = 0;  // row strides in elements (ld_dy: backward only)

  // Every operand's rows padded by `pad` elements past their length.
  SwigluProblem(int64_t r, int64_t f, DType dt, bool bwd, int64_t pad = 0)
      : rows(r), dim(f), dtype(dt), backward(bwd), ld_x(2 * f + pad), ld_dy(f + pad),
        ld_out((bwd ? 2 * f : f) + pad) {}
  int64_t numel() const { return rows * dim; }  // output elements (forward), pairs (both)
  int64_t out_cols() const { return backward ? 2 * dim : dim; }

  std::string family() const override { return "swiglu"; }
  std::string key() const override;
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  Tolerance tolerance(int output_index) const override;
  Attrs attrs() const override;  // {"backward"}, plus out_row_stride when the output is padded
};

// What a rung's launcher receives: raw pointers, the extents and every row stride.
struct SwigluArgs {
  const void* x = nullptr;
  const void* dy = nullptr;  // backward only
  void* out = nullptr;       // y (forward) or dx (backward)
  int64_t rows = 0, dim = 0, ld_x = 0, ld_dy = 0, ld_out = 0;
  DType dtype = DType::kBF16;
  bool backward = false;
  static SwigluArgs bind(const SwigluProblem& p, const Operands& ops);
};

}  // namespace hk
