// rmsnorm/rmsnorm_op.hpp — the RMSNorm op contract: problem, args, flops/bytes, reference,
// tolerance.
//
// Forward:  in {x [rows, D], g [D]}                       out {y [rows, D], rstd f32 [rows]}
// Backward: in {x, g, rstd f32 [rows], dy [rows, D]}      out {dx [rows, D], dg [D]}
// x, dy and the [rows, D] output each have a row stride (ld_*) >= D; the harness's test shapes
// pad rows to exercise it. eps is a problem attribute (default 1e-6); so is the [rows, D]
// output's row stride when the problem is built from the inputs (out_row_stride, default D).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/rmsnorm.hpp"
#include "hk/registry.hpp"

namespace hk {

struct RmsNormProblem final : Problem {
  int64_t rows = 0, dim = 0;
  DType dtype = DType::kBF16;
  double eps = 1e-6;
  bool backward = false;
  int64_t ld_x = 0, ld_dy = 0, ld_out = 0;  // row strides in elements (ld_dy: backward only)

  // Every [rows, D] operand gets row stride dim + pad.
  RmsNormProblem(int64_t r, int64_t d, DType dt, bool bwd, int64_t pad = 0, double e = 1e-6)
      : rows(r), dim(d), dtype(dt), eps(e), backward(bwd), ld_x(d + pad), ld_dy(d + pad), ld_out(d + pad) {}
  int64_t numel() const { return rows * dim; }
  // Alignment of every row start of every operand (base alignment and row strides together).
  int row_align() const;

  std::string family() const override { return "rmsnorm"; }
  std::string key() const override;
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  Tolerance tolerance(int output_index) const override;
  Attrs attrs() const override;  // {"eps", "backward"}, plus out_row_stride when ld_out != dim
};

struct RmsNormArgs {
  const void* x = nullptr;
  const void* g = nullptr;
  const void* dy = nullptr;        // backward
  const float* rstd_in = nullptr;  // backward
  void* out = nullptr;             // y (forward) or dx (backward)
  float* rstd_out = nullptr;       // forward
  void* dg = nullptr;              // backward
  int64_t rows = 0, dim = 0, ld_x = 0, ld_dy = 0, ld_out = 0;
  DType dtype = DType::kBF16;
  float eps = 1e-6f;
  bool backward = false;
  static RmsNormArgs bind(const RmsNormProblem& p, const Operands& ops);
};

}  // namespace hk
