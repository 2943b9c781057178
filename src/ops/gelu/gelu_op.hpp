// gelu/gelu_op.hpp — the GeLU op contract: problem, args, flops/bytes, reference, tolerance.
//
// Forward:  in {x},      out {y}    y  = gelu(x)
// Backward: in {x, dy},  out {dx}   dx = dy * gelu'(x)
// One shape and one dtype (f32, f16, bf16) for every operand, contiguous; math in f32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/gelu.hpp"
#include "hk/registry.hpp"

namespace hk {

struct GeluProblem final : Problem {
  std::vector<int64_t> shape;
  DType dtype = DType::kBF16;
  GeluApprox approx = GeluApprox::kTanh;
  bool backward = false;

  GeluProblem(std::vector<int64_t> s, DType dt, GeluApprox a, bool bwd)
      : shape(std::move(s)), dtype(dt), approx(a), backward(bwd) {}
  int64_t numel() const;

  std::string family() const override { return "gelu"; }
  std::string key() const override;
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  Tolerance tolerance(int output_index) const override;
  Attrs attrs() const override;  // {"approximate": "tanh" | "none", "backward": bool}
};

// What a rung's launcher receives: raw pointers and the flat element count.
struct GeluArgs {
  const void* x = nullptr;
  const void* dy = nullptr;  // backward only
  void* out = nullptr;       // y (forward) or dx (backward)
  int64_t n = 0;
  DType dtype = DType::kBF16;
  GeluApprox approx = GeluApprox::kTanh;
  bool backward = false;
  static GeluArgs bind(const GeluProblem& p, const Operands& ops);
};

}  // namespace hk
