// conv2d/conv2d_op.hpp — the general 2-D convolution contract, as torch.nn.functional.conv2d
// defines it (cross-correlation), with explicit, possibly asymmetric padding.
//
//   forward:         in {x, w[, bias]}  out {y}    y  = conv(x, w) + bias
//   backward_data:   in {dy, w}         out {dx}   dx = conv^T(dy, w)
//   backward_weight: in {x, dy}         out {dw}   dw = sum_{n, oy, ox} dy (x) x-patch
//
// Shapes follow the layout (include/hk/ops/conv2d.hpp): NCHW x [N, C, H, W], w [Cout, C/g, kH,
// kW], y [N, Cout, OH, OW]; NHWC x [N, H, W, C], w [Cout, kH, kW, C/g], y [N, OH, OW, Cout];
// bias [Cout]. One dtype (f32, f16, bf16), contiguous in the layout; math in f32.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hk/ops/conv2d.hpp"
#include "hk/registry.hpp"

namespace hk {

enum class ConvDirection { kForward, kBackwardData, kBackwardWeight };

struct Conv2dProblem final : Problem {
  int64_t n = 1, c = 1, h = 1, w = 1;  // input
  int64_t cout = 1, kh = 1, kw = 1;    // weight [Cout, C/groups, kH, kW]
  Conv2dParams prm;
  DType dtype = DType::kF32;
  ConvDirection dir = ConvDirection::kForward;
  bool has_bias = false;  // forward only

  Conv2dProblem(int64_t n_, int64_t c_, int64_t h_, int64_t w_, int64_t cout_, int64_t kh_, int64_t kw_,
                const Conv2dParams& p, DType dt, ConvDirection d, bool bias)
      : n(n_), c(c_), h(h_), w(w_), cout(cout_), kh(kh_), kw(kw_), prm(p), dtype(dt), dir(d), has_bias(bias) {}

  int64_t oh() const { return (h + prm.pad_top + prm.pad_bottom - prm.dilation_h * (kh - 1) - 1) / prm.stride_h + 1; }
  int64_t ow() const { return (w + prm.pad_left + prm.pad_right - prm.dilation_w * (kw - 1) - 1) / prm.stride_w + 1; }
  int64_t cin_per_group() const { return c / prm.groups; }
  int64_t cout_per_group() const { return cout / prm.groups; }
  bool nhwc() const { return prm.layout == ConvLayout::kNHWC; }
  bool depthwise() const { return prm.groups == c && cout == c; }
  // What the depthwise NHWC rungs (v02, v04) need of every problem, "" when met: a forward,
  // NHWC, depthwise, C a whole number of 16-byte channel vectors, 16-byte aligned operands.
  std::string depthwise_nhwc_forward_needs() const;
  // Tensor shapes in the layout's dim order.
  std::vector<int64_t> x_shape() const;
  std::vector<int64_t> w_shape() const;
  std::vector<int64_t> y_shape() const;
  // The dot product each output sums over (the tolerance's length).
  int64_t reduction_length() const;
  // One output value, in f64, at flat position `flat` of the output (its layout's order).
  double value_at(const std::vector<HostTensor>& in, int64_t flat) const;

  std::string family() const override { return "conv2d"; }
  std::string key() const override;  // "n64_c256_h56_w56_k256_3x3_s1_p1_d1_g1_nhwc_bf16_fwd"
  double flops() const override;
  double bytes() const override;
  std::vector<TensorSpec> inputs() const override;
  std::vector<TensorSpec> outputs() const override;
  void reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const override;
  bool reference_at(const std::vector<HostTensor>& in, int output_index, const std::vector<int64_t>& flat,
                    std::vector<double>& values) const override;
  Tolerance tolerance(int output_index) const override;
  Attrs attrs() const override;
};

// What a rung's launcher receives. Strides are in elements, in the logical order (n, c, h, w)
// for x, dx, y, dy and (cout, cin, kh, kw) for w, dw, whatever the layout, so a layout-agnostic
// kernel indexes both layouts alike.
struct Conv2dArgs {
  const void* x = nullptr;     // forward, backward_weight
  const void* w = nullptr;     // forward, backward_data
  const void* bias = nullptr;  // forward, optional
  const void* dy = nullptr;    // backward_data, backward_weight
  void* out = nullptr;         // y, dx or dw
  int64_t n = 0, c = 0, h = 0, w_in = 0, cout = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  Conv2dParams prm;
  std::array<int64_t, 4> xs{}, ws{}, ys{};  // x/dx, w/dw, y/dy strides in logical order
  DType dtype = DType::kF32;
  ConvDirection dir = ConvDirection::kForward;
  int align_bytes = 256;
  static Conv2dArgs bind(const Conv2dProblem& p, const Operands& ops);
};

// Why cuDNN's graph API refuses the convolution node of `a` (its tensors, convolution and operation
// descriptors, which need no device), or "" when it builds: the baseline's graph path, checked on
// the CPU for every test problem (conv2d/baseline_cudnn.cpp).
std::string conv2d_cudnn_graph_refusal(const Conv2dArgs& a);

// One engine configuration cuDNN's graph heuristics offer for a convolution: the heuristics mode
// ('A', 'B' or 'F' for the fallback list), the engine's global index, its numerical notes
// (cudnnBackendNumericalNote_t values) and whether the baseline's numerics filter takes it.
struct Conv2dCudnnOffer {
  char mode = 'A';
  int64_t engine = -1;
  std::vector<int> notes;
  bool accepted = false;
};

// The configurations cuDNN's heuristics rank for `a` on a described device (`device_json`: the
// JSON of a CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR), modes A, B and the fallback list in order, each
// as ranked. Needs no device: the CPU suite checks the numerics filter against them.
std::vector<Conv2dCudnnOffer> conv2d_cudnn_offers(const Conv2dArgs& a, const std::string& device_json);

// The A tile v06 loads for k-block k0 / 64 of output pixels m0 .. m0 + pixels - 1 (pixels 128,
// or 64 as the weight gradient's B boxes), copied to device memory `out` (pixels x 128 bytes)
// as TMA wrote it: rows of 64 channels, 16-byte chunks swizzled by XOR with row % 8. a is a
// forward NHWC 16-bit problem with C a multiple of 64 and x on the device. For the GPU suite:
// the im2col tensor map and load checked apart from the GEMM (conv2d/v06_implicit_gemm_wgmma.cu).
void conv2d_v06_probe_a_tile(const Conv2dArgs& a, int32_t m0, int32_t k0, int pixels, void* out,
                             cudaStream_t stream);

// y += bias[channel] over the forward output a.out (f32 math, one more rounding): for rungs
// without a bias epilogue (conv2d/bias_add.cu).
void conv2d_add_bias(const Conv2dArgs& a, cudaStream_t stream);

}  // namespace hk
