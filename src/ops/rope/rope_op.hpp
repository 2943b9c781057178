// rope/rope_op.hpp — the RoPE op contract: problem, args, flops/bytes, reference, tolerance.
//
// Forward:  in {x [B, S, H, D], cos f32 [S, R/2], sin f32 [S, R/2]}   out {y [B, S, H, D]}
// Backward: in {dy, cos, sin}                                         out {dx}   (sin negated)
// x and y each carry their own (b, s, h) strides and a unit last stride; the test problems use
// contiguous, transposed ([B, H, S, D] storage), fused-QKV-slice and padded-head layouts.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/rope.hpp"
#include "hk/registry.hpp"

namespace hk {

struct RopeProblem final : Problem {
  int64_t batch = 0, seq = 0, heads = 0, dim = 0, rotary = 0;  // rotary = R, even, <= dim
  DType dtype = DType::kBF16;
  bool backward = false;
  std::array<int64_t, 3> sx{}, sy{};  // (b, s, h) strides in elements of the input and the output

  // Contiguous [B, S, H, D] operands.
  RopeProblem(int64_t b, int64_t s, int64_t h, int64_t d, int64_t r, DType dt, bool bwd);
  int64_t rows() const { return batch * seq * heads; }
  int64_t numel() const { return rows() * dim; }
  static std::array<int64_t, 3> contiguous(int64_t s, int64_t h, int64_t d) { return {s * h * d, h * d, d}; }

  std::string family() const override { return "rope"; }
  std::string key() const override;
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  Tolerance tolerance(int output_index) const override;
  Attrs attrs() const override;  // {"backward"}, plus out_stride_{b,s,h} when the output is strided
};

struct RopeArgs {
  const void* x = nullptr;  // x (forward) or dy (backward)
  const float* cos = nullptr;
  const float* sin = nullptr;
  void* y = nullptr;  // y (forward) or dx (backward)
  int64_t batch = 0, seq = 0, heads = 0, dim = 0, rotary = 0;
  std::array<int64_t, 3> sx{}, sy{};
  DType dtype = DType::kBF16;
  float sin_sign = 1.f;  // -1 for the backward
  static RopeArgs bind(const RopeProblem& p, const Operands& ops);
};

}  // namespace hk
