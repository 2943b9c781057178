// gemm_w4a16/gemm_w4a16_op.hpp — the weight-only int4 GEMM contract (docs/gemm_w4a16.md).
//
//   in  {x [M, K], qweight (i32, layout below), scales [N, G], [zeros i32 [N, ceil(G/8)]]}
//   out {y [M, N]}
//   y = x dequant(W)^T,  dequant(W)[n, k] = (q[n, k] - z[n, k / g]) * s[n, k / g]
//
// qweight is i32 [N, K / 8] (W4A16Layout::kRows, the interchange format) or i32 [ceil(N/8), Kp]
// (kTiled, fragment order; include/hk/ops/gemm_w4a16.hpp). No zeros input: symmetric, z = 8.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/gemm_w4a16.hpp"
#include "hk/registry.hpp"

namespace hk {

struct W4A16Problem final : Problem {
  int64_t m = 0, n = 0, k = 0, group = 0;
  DType dtype = DType::kBF16;
  bool symmetric = false;
  W4A16Layout layout = W4A16Layout::kRows;
  int64_t ld_x = 0, ld_y = 0;  // row strides in elements

  W4A16Problem(int64_t m, int64_t n, int64_t k, int64_t group, DType dt, bool symmetric,
               W4A16Layout layout = W4A16Layout::kRows, int64_t pad = 0);
  int64_t groups() const { return group > 0 ? k / group : 0; }
  int64_t zero_words() const { return (groups() + 7) / 8; }
  int64_t k_padded() const { return (k + 127) / 128 * 128; }  // the tiled layout's row length
  bool tiled() const { return layout == W4A16Layout::kTiled; }
  // Alignment of x's row starts (base alignment lowered to what ld_x keeps), in bytes.
  int x_row_align() const;

  std::string family() const override { return "gemm_w4a16"; }
  std::string key() const override;
  double flops() const override { return 2.0 * double(m) * double(n) * double(k); }
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  bool reference_at(const std::vector<HostTensor>& in, int output_index, const std::vector<int64_t>& flat,
                    std::vector<double>& values) const override;
  Tolerance tolerance(int output_index) const override;
  // group_size, plus layout ("tiled") and out_row_stride when not the default.
  Attrs attrs() const override;
};

struct W4A16Args {
  const void* x = nullptr;
  const int32_t* qweight = nullptr;
  const void* scales = nullptr;
  const int32_t* zeros = nullptr;  // null: symmetric
  void* y = nullptr;
  int64_t m = 0, n = 0, k = 0, group = 0, groups = 0, zero_words = 0, k_padded = 0;
  int64_t ld_x = 0, ld_y = 0;
  DType dtype = DType::kBF16;
  W4A16Layout layout = W4A16Layout::kRows;
  static W4A16Args bind(const W4A16Problem& p, const Operands& ops);
};

}  // namespace hk
