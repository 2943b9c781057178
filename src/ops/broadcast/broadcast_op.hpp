// broadcast/broadcast_op.hpp — the contract of the four broadcast families (add_scalar,
// outer_add, outer_mul_relu, row_scale_relu): one Problem type with a kind, since they share
// shapes, references and tolerances; each kind registers as its own family.
//
// add_scalar:          in {x [shape]}                     out {z [shape]}           (contiguous)
// outer_add / _mul_relu: in {x [N0], y [N1]}              out {z [N1, N0], row stride ld_z}
// row_scale_relu fwd:  in {x [N1, N0] (ld_x), y [N1]}     out {z [N1, N0] (ld_z)}
// row_scale_relu bwd:  in {x (ld_x), y, dz (ld_dz)}       out {dx [N1, N0] (ld_z), dy [N1]}
// Attributes (Family::make_problem): c (add_scalar), backward (row_scale_relu), out_row_stride
// (ld_z, default N0) for the [N1, N0] outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/broadcast.hpp"
#include "hk/registry.hpp"

namespace hk {

enum class BroadcastKind { kAddScalar, kOuterAdd, kOuterMulRelu, kRowScaleRelu };
const char* family_name(BroadcastKind kind);

struct BroadcastProblem final : Problem {
  BroadcastKind kind = BroadcastKind::kAddScalar;
  std::vector<int64_t> shape;  // add_scalar: any; the others: {N1, N0}
  DType dtype = DType::kBF16;
  double c = 0;           // add_scalar
  bool backward = false;  // row_scale_relu
  int64_t ld_x = 0, ld_dz = 0, ld_z = 0;  // row strides of the [N1, N0] operands

  BroadcastProblem(BroadcastKind k, std::vector<int64_t> s, DType dt, bool bwd = false, int64_t pad = 0,
                   double cc = 0);
  int64_t numel() const;
  int64_t n1() const { return shape.size() == 2 ? shape[0] : 1; }
  int64_t n0() const { return shape.empty() ? 1 : shape.back(); }
  int row_align() const;  // alignment of every row start (base alignment and row strides)

  std::string family() const override { return family_name(kind); }
  std::string key() const override;
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  Tolerance tolerance(int output_index) const override;
  Attrs attrs() const override;
};

struct BroadcastArgs {
  const void* x = nullptr;
  const void* y = nullptr;   // outer ops, row_scale_relu
  const void* dz = nullptr;  // row_scale_relu backward
  void* z = nullptr;         // z, or dx (backward)
  void* dy = nullptr;        // row_scale_relu backward
  int64_t n = 0;             // add_scalar: elements
  int64_t n1 = 0, n0 = 0, ld_x = 0, ld_dz = 0, ld_z = 0;
  DType dtype = DType::kBF16;
  float c = 0;
  bool backward = false;
  static BroadcastArgs bind(const BroadcastProblem& p, const Operands& ops);
};

}  // namespace hk
