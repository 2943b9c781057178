// conv2d_single/conv2d_single_op.hpp — the single-channel 2-D convolution contract (the stencil
// form: one image channel, one kernel, 'same'-size output, zero beyond the bottom/right edge).
//
//   in {x [N, H, W], k [kH, kW]}, out {z [N, H, W]}
//   z[i][j][l] = sum_{a < kH, b < kW, j + a < H, l + b < W} k[a][b] * x[i][j + a][l + b]
//
// f32, f16 or bf16 (one dtype), contiguous; math in f32, one rounding to the output dtype.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/conv2d.hpp"
#include "hk/registry.hpp"

namespace hk {

struct Conv2dSingleProblem final : Problem {
  int64_t n = 1, h = 1, w = 1, kh = 1, kw = 1;
  DType dtype = DType::kF32;

  Conv2dSingleProblem(int64_t n_, int64_t h_, int64_t w_, int64_t kh_, int64_t kw_, DType dt)
      : n(n_), h(h_), w(w_), kh(kh_), kw(kw_), dtype(dt) {}
  int64_t numel() const { return n * h * w; }

  std::string family() const override { return "conv2d_single"; }
  std::string key() const override;  // "256x512x512_k3x3_f32"
  double flops() const override;      // 2 kH kW per output (the taps beyond the edge included)
  double bytes() const override;      // x and z once, k once
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  Tolerance tolerance(int output_index) const override;
};

struct Conv2dSingleArgs {
  const void* x = nullptr;
  const void* k = nullptr;
  void* z = nullptr;
  int64_t n = 0, h = 0, w = 0;
  int kh = 1, kw = 1;
  DType dtype = DType::kF32;
  int align_bytes = 256;
  static Conv2dSingleArgs bind(const Conv2dSingleProblem& p, const Operands& ops);
};

}  // namespace hk
