// conv2d/conv2d.cpp — the fp64 oracle (every output position computed on its own, so the bench
// shapes can check a sample), the family (test and bench shapes) and the public entry points
// hk::conv2d, hk::conv2d_backward_data and hk::conv2d_backward_weight.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "conv2d/conv2d_op.hpp"
#include "core/host.hpp"
#include "core/trace.hpp"

namespace hk {

namespace {

const char* dir_name(ConvDirection d) {
  switch (d) {
    case ConvDirection::kForward: return "fwd";
    case ConvDirection::kBackwardData: return "dgrad";
    default: return "wgrad";
  }
}

// Flat position of logical (a, b, c, d) — (n, c, h, w) or (cout, cin, kh, kw) — in a tensor
// stored in `layout` with logical extents (B, C, D): NCHW is a-b-c-d, NHWC a-c-d-b.
struct Index4 {
  int64_t s0, s1, s2, s3;  // strides of the logical dims
  Index4(bool nhwc, int64_t e1, int64_t e2, int64_t e3) {
    if (nhwc) s1 = 1, s3 = e1, s2 = e3 * e1, s0 = e2 * e3 * e1;
    else s3 = 1, s2 = e3, s1 = e2 * e3, s0 = e1 * e2 * e3;
  }
  int64_t at(int64_t a, int64_t b, int64_t c, int64_t d) const { return a * s0 + b * s1 + c * s2 + d * s3; }
  // Logical coordinates of flat position f.
  void coords(int64_t f, int64_t e1, int64_t e2, int64_t e3, bool nhwc, int64_t& a, int64_t& b, int64_t& c,
              int64_t& d) const {
    if (nhwc) {
      b = f % e1, d = f / e1 % e3, c = f / (e1 * e3) % e2, a = f / (e1 * e2 * e3);
    } else {
      d = f % e3, c = f / e3 % e2, b = f / (e2 * e3) % e1, a = f / (e1 * e2 * e3);
    }
  }
};

}  // namespace

std::vector<int64_t> Conv2dProblem::x_shape() const { return nhwc() ? std::vector<int64_t>{n, h, w, c} : std::vector<int64_t>{n, c, h, w}; }
std::vector<int64_t> Conv2dProblem::w_shape() const {
  const int64_t cg = cin_per_group();
  return nhwc() ? std::vector<int64_t>{cout, kh, kw, cg} : std::vector<int64_t>{cout, cg, kh, kw};
}
std::vector<int64_t> Conv2dProblem::y_shape() const {
  return nhwc() ? std::vector<int64_t>{n, oh(), ow(), cout} : std::vector<int64_t>{n, cout, oh(), ow()};
}

int64_t Conv2dProblem::reduction_length() const {
  switch (dir) {
    case ConvDirection::kForward: return cin_per_group() * kh * kw;
    case ConvDirection::kBackwardData: return cout_per_group() * kh * kw;
    default: return n * oh() * ow();
  }
}

std::string Conv2dProblem::depthwise_nhwc_forward_needs() const {
  if (dir != ConvDirection::kForward) return "forward only";
  if (!nhwc()) return "NHWC only (channels vectorised), got NCHW";
  if (!depthwise())
    return "depthwise only (groups == C == Cout), got groups=" + std::to_string(prm.groups) + " C=" + std::to_string(c) +
           " Cout=" + std::to_string(cout);
  const int v = 16 / (dtype_bits(dtype) / 8);
  if (c % v != 0) return "C must be a multiple of " + std::to_string(v) + " (16-byte channel vectors), got " + std::to_string(c);
  if (align_bytes < 16) return "operands must be 16-byte aligned, got " + std::to_string(align_bytes);
  return "";
}

std::string Conv2dProblem::key() const {
  auto pair = [](int64_t a, int64_t b) { return a == b ? fmt::format("{}", a) : fmt::format("{}x{}", a, b); };
  const auto& p = prm;
  std::string pad = (p.pad_top == p.pad_bottom && p.pad_left == p.pad_right) ? pair(p.pad_top, p.pad_left)
                    : fmt::format("{}-{}-{}-{}", p.pad_top, p.pad_bottom, p.pad_left, p.pad_right);
  return fmt::format("n{}_c{}_h{}_w{}_k{}_{}x{}_s{}_p{}_d{}_g{}_{}_{}_{}{}", n, c, h, w, cout, kh, kw,
                     pair(p.stride_h, p.stride_w), pad, pair(p.dilation_h, p.dilation_w), p.groups,
                     nhwc() ? "nhwc" : "nchw", to_string(dtype), dir_name(dir), has_bias ? "_bias" : "");
}

double Conv2dProblem::flops() const {
  return 2.0 * double(n) * double(cout) * double(oh()) * double(ow()) * double(cin_per_group() * kh * kw);
}

double Conv2dProblem::bytes() const {
  const double e = dtype_bits(dtype) / 8;
  const double xb = double(n * c * h * w), wb = double(cout * cin_per_group() * kh * kw),
               yb = double(n * cout * oh() * ow());
  return e * (xb + wb + yb + (has_bias ? double(cout) : 0.0));
}

std::vector<TensorSpec> Conv2dProblem::inputs() const {
  // No NaN/Inf specials: Winograd and FFT algorithms (cuDNN's) mix a tile's inputs in their
  // transforms, so a NaN would reach outputs whose window never holds it.
  TensorSpec x{"x", dtype, x_shape(), {}, Dist::kNormal, 1.0, {}};
  TensorSpec wt{"w", dtype, w_shape(), {}, Dist::kUniform, 1.0, {}};
  TensorSpec dy{"dy", dtype, y_shape(), {}, Dist::kNormal, 1.0, {}};
  switch (dir) {
    case ConvDirection::kForward:
      if (has_bias) return {x, wt, TensorSpec{"bias", dtype, {cout}, {}, Dist::kUniform, 1.0, {}}};
      return {x, wt};
    case ConvDirection::kBackwardData: return {dy, wt};
    default: return {x, dy};
  }
}

std::vector<TensorSpec> Conv2dProblem::outputs() const {
  switch (dir) {
    case ConvDirection::kForward: return {TensorSpec{"y", dtype, y_shape(), {}, Dist::kNormal, 1.0, {}}};
    case ConvDirection::kBackwardData: return {TensorSpec{"dx", dtype, x_shape(), {}, Dist::kNormal, 1.0, {}}};
    default: return {TensorSpec{"dw", dtype, w_shape(), {}, Dist::kNormal, 1.0, {}}};
  }
}

double Conv2dProblem::value_at(const std::vector<HostTensor>& in, int64_t flat) const {
  const bool l = nhwc();
  const int64_t OH = oh(), OW = ow(), cg = cin_per_group(), kg = cout_per_group();
  const auto& p = prm;
  const Index4 xi(l, c, h, w), wi(l, cg, kh, kw), yi(l, cout, OH, OW);
  double acc = 0;
  if (dir == ConvDirection::kForward) {
    const auto& x = in[0].values;
    const auto& wt = in[1].values;
    int64_t b, co, oy, ox;
    yi.coords(flat, cout, OH, OW, l, b, co, oy, ox);
    const int64_t g = co / kg;
    if (has_bias) acc = in[2].values[co];
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t ky = 0; ky < kh; ++ky) {
        const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
        if (iy < 0 || iy >= h) continue;
        for (int64_t kx = 0; kx < kw; ++kx) {
          const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
          if (ix < 0 || ix >= w) continue;
          acc += x[xi.at(b, g * cg + ci, iy, ix)] * wt[wi.at(co, ci, ky, kx)];
        }
      }
  } else if (dir == ConvDirection::kBackwardData) {
    const auto& dy = in[0].values;
    const auto& wt = in[1].values;
    int64_t b, ch, iy, ix;
    xi.coords(flat, c, h, w, l, b, ch, iy, ix);
    const int64_t g = ch / cg, ci = ch % cg;
    for (int64_t k = 0; k < kg; ++k) {
      const int64_t co = g * kg + k;
      for (int64_t ky = 0; ky < kh; ++ky) {
        const int64_t ty = iy + p.pad_top - ky * p.dilation_h;
        if (ty < 0 || ty % p.stride_h != 0 || ty / p.stride_h >= OH) continue;
        for (int64_t kx = 0; kx < kw; ++kx) {
          const int64_t tx = ix + p.pad_left - kx * p.dilation_w;
          if (tx < 0 || tx % p.stride_w != 0 || tx / p.stride_w >= OW) continue;
          acc += dy[yi.at(b, co, ty / p.stride_h, tx / p.stride_w)] * wt[wi.at(co, ci, ky, kx)];
        }
      }
    }
  } else {
    const auto& x = in[0].values;
    const auto& dy = in[1].values;
    int64_t co, ci, ky, kx;
    wi.coords(flat, cg, kh, kw, l, co, ci, ky, kx);
    const int64_t ch = co / kg * cg + ci;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oy = 0; oy < OH; ++oy) {
        const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
        if (iy < 0 || iy >= h) continue;
        for (int64_t ox = 0; ox < OW; ++ox) {
          const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dilation_w;
          if (ix < 0 || ix >= w) continue;
          acc += dy[yi.at(b, co, oy, ox)] * x[xi.at(b, ch, iy, ix)];
        }
      }
  }
  return acc;
}

void Conv2dProblem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  auto& o = out[0].values;
  host::parallel_for(static_cast<int64_t>(o.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = value_at(in, i);
  }, host::grain_for(reduction_length()));
}

bool Conv2dProblem::reference_at(const std::vector<HostTensor>& in, int, const std::vector<int64_t>& flat,
                                 std::vector<double>& values) const {
  values.resize(flat.size());
  host::parallel_for(static_cast<int64_t>(flat.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) values[i] = value_at(in, flat[i]);
  }, host::grain_for(reduction_length()));
  return true;
}

Tolerance Conv2dProblem::tolerance(int) const {
  // Inputs are exact in their dtype; the rungs (and cuDNN, f32 compute) sum L products of
  // |x| ~ 1, |w| <= 1 in f32 in their own order (Winograd and FFT transforms included), then
  // round once. The absolute floor follows the sum's typical size, sqrt(L).
  // A bias added after the convolution (cuDNN's path, as PyTorch's) rounds the sum first: at
  // most one more ulp of |conv| <= |y| + |bias|, |bias| <= 1.
  // An f32 sum in one running total (v01_direct's weight gradient sums N * OH * OW products per
  // weight: 262,143 at 511 x 513) drifts by ~u sqrt(L) of its partial sums' size: measured
  // 4.8e-5 of |dw| = 773 there (H200, 2026-12-03), hence the relative term 4 u sqrt(L). Where the
  // terms' signs are random the partial sums wander to ~sqrt(L) whatever the final value, so the
  // drift is ~u L / 2 absolute: 0.011 on a dw of 1.41 at that L (H200, 2026-12-04, one draw of
  // the Python variant tests), past the sqrt(L) floor's 0.0102; hence the absolute term 2 u L.
  const int64_t length = std::max<int64_t>(reduction_length(), 1);
  const double root = std::sqrt(double(length));
  const double bias_ulps = has_bias ? 1.0 : 0.0;
  switch (dtype) {
    case DType::kF32: return {2e-5 * root + 2 * 0x1p-24 * double(length), 1e-5 + 4 * 0x1p-24 * root};
    case DType::kF16: return {1e-4 * root + bias_ulps / 1024, 1.0 / 1024};
    default: return {1e-4 * root + bias_ulps / 128, 1.0 / 128};
  }
}

Attrs Conv2dProblem::attrs() const {
  Attrs a{{"stride_h", prm.stride_h},     {"stride_w", prm.stride_w},     {"pad_top", prm.pad_top},
          {"pad_bottom", prm.pad_bottom}, {"pad_left", prm.pad_left},     {"pad_right", prm.pad_right},
          {"dilation_h", prm.dilation_h}, {"dilation_w", prm.dilation_w}, {"groups", prm.groups},
          {"layout", std::string(nhwc() ? "nhwc" : "nchw")},
          {"direction", std::string(dir == ConvDirection::kForward        ? "forward"
                                    : dir == ConvDirection::kBackwardData ? "backward_data"
                                                                          : "backward_weight")}};
  if (dir == ConvDirection::kBackwardData) a.set("input_h", h), a.set("input_w", w);
  if (dir == ConvDirection::kBackwardWeight) a.set("kernel_h", kh), a.set("kernel_w", kw);
  return a;
}

Conv2dArgs Conv2dArgs::bind(const Conv2dProblem& p, const Operands& ops) {
  Conv2dArgs a;
  switch (p.dir) {
    case ConvDirection::kForward:
      a.x = ops.in.at(0).data;
      a.w = ops.in.at(1).data;
      if (p.has_bias) a.bias = ops.in.at(2).data;
      break;
    case ConvDirection::kBackwardData:
      a.dy = ops.in.at(0).data;
      a.w = ops.in.at(1).data;
      break;
    default:
      a.x = ops.in.at(0).data;
      a.dy = ops.in.at(1).data;
  }
  a.out = ops.out.at(0).data;
  a.n = p.n, a.c = p.c, a.h = p.h, a.w_in = p.w, a.cout = p.cout, a.kh = p.kh, a.kw = p.kw;
  a.oh = p.oh(), a.ow = p.ow();
  a.prm = p.prm;
  const bool l = p.nhwc();
  const Index4 xi(l, p.c, p.h, p.w), wi(l, p.cin_per_group(), p.kh, p.kw), yi(l, p.cout, a.oh, a.ow);
  a.xs = {xi.s0, xi.s1, xi.s2, xi.s3};
  a.ws = {wi.s0, wi.s1, wi.s2, wi.s3};
  a.ys = {yi.s0, yi.s1, yi.s2, yi.s3};
  a.dtype = p.dtype;
  a.dir = p.dir;
  a.align_bytes = p.align_bytes;
  return a;
}

namespace {

const char* layout_name(ConvLayout l) { return l == ConvLayout::kNHWC ? "NHWC" : "NCHW"; }

void check_params(const char* op, const Conv2dParams& p) {
  if (p.stride_h < 1 || p.stride_w < 1)
    HK_THROW(kValue, op, ": stride must be >= 1, got (", p.stride_h, ", ", p.stride_w, ")");
  if (p.dilation_h < 1 || p.dilation_w < 1)
    HK_THROW(kValue, op, ": dilation must be >= 1, got (", p.dilation_h, ", ", p.dilation_w, ")");
  if (p.pad_top < 0 || p.pad_bottom < 0 || p.pad_left < 0 || p.pad_right < 0)
    HK_THROW(kValue, op, ": padding must be >= 0, got (top ", p.pad_top, ", bottom ", p.pad_bottom, ", left ",
             p.pad_left, ", right ", p.pad_right, ")");
  if (p.groups < 1) HK_THROW(kValue, op, ": groups must be >= 1, got ", p.groups);
  for (int64_t v : {p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.pad_top, p.pad_bottom, p.pad_left, p.pad_right})
    if (v > INT_MAX) HK_THROW(kValue, op, ": stride, padding and dilation must be below 2^31, got ", v);
}

// Logical (n, c, h, w) of a rank-4 activation view in the layout.
std::array<int64_t, 4> act_dims(const char* op, const char* name, const TensorView& t, ConvLayout l) {
  if (t.rank() != 4)
    HK_THROW(kValue, op, ": ", name, " must be rank 4 (", layout_name(l), "), got ", t.describe());
  const auto& s = t.shape;
  return l == ConvLayout::kNHWC ? std::array<int64_t, 4>{s[0], s[3], s[1], s[2]} : std::array<int64_t, 4>{s[0], s[1], s[2], s[3]};
}

// Logical (cout, cin/g, kh, kw) of a rank-4 weight view in the layout.
std::array<int64_t, 4> weight_dims(const char* op, const char* name, const TensorView& t, ConvLayout l) {
  if (t.rank() != 4)
    HK_THROW(kValue, op, ": ", name, " must be rank 4 (", l == ConvLayout::kNHWC ? "[Cout, kH, kW, C/groups]" : "[Cout, C/groups, kH, kW]",
             "), got ", t.describe());
  const auto& s = t.shape;
  return l == ConvLayout::kNHWC ? std::array<int64_t, 4>{s[0], s[3], s[1], s[2]} : std::array<int64_t, 4>{s[0], s[1], s[2], s[3]};
}

// Builds the problem from its dimensions and checks the dimensions against each other.
Conv2dProblem make_checked(const char* op, int64_t n, int64_t c, int64_t h, int64_t w, int64_t cout, int64_t cg,
                           int64_t kh, int64_t kw, const Conv2dParams& prm, DType dt, ConvDirection dir, bool bias) {
  check_params(op, prm);
  if (dt != DType::kF32 && dt != DType::kF16 && dt != DType::kBF16)
    HK_THROW(kType, op, ": dtype ", to_string(dt), ", expected f32, f16 or bf16");
  if (kh < 1 || kw < 1) HK_THROW(kValue, op, ": kernel must be at least 1 x 1, got ", kh, " x ", kw);
  if (c % prm.groups != 0)
    HK_THROW(kValue, op, ": input channels C=", c, " are not divisible by groups=", prm.groups);
  if (cout % prm.groups != 0)
    HK_THROW(kValue, op, ": output channels Cout=", cout, " are not divisible by groups=", prm.groups);
  if (cg * prm.groups != c)
    HK_THROW(kValue, op, ": channel mismatch: the input has C=", c, " (", layout_name(prm.layout),
             ") but the weight has C/groups=", cg, " with groups=", prm.groups, " (expects C=", cg * prm.groups, ")");
  const int64_t eff_h = prm.dilation_h * (kh - 1) + 1, eff_w = prm.dilation_w * (kw - 1) + 1;
  if (h + prm.pad_top + prm.pad_bottom < eff_h || w + prm.pad_left + prm.pad_right < eff_w)
    HK_THROW(kValue, op, ": kernel larger than the padded input: dilated kernel ", eff_h, " x ", eff_w,
             ", padded input ", h + prm.pad_top + prm.pad_bottom, " x ", w + prm.pad_left + prm.pad_right);
  return Conv2dProblem(n, c, h, w, cout, kh, kw, prm, dt, dir, bias);
}

void check_view(const char* op, const char* name, const TensorView& t, const std::vector<int64_t>& shape,
                DType dt, ConvLayout l) {
  if (t.dtype != dt) HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), ", expected ", to_string(dt));
  if (t.shape != shape)
    HK_THROW(kValue, op, ": ", name, " has shape [", shape_to_string(t.shape), "], expected [", shape_to_string(shape),
             "] (", layout_name(l), ")");
  if (!t.is_contiguous())
    HK_THROW(kNotSupported, op, ": ", name, " must be contiguous in the ", layout_name(l), " layout (",
             l == ConvLayout::kNHWC ? "a channels_last tensor's [N, H, W, C] view" : "for channels_last, layout NHWC",
             "), got ", t.describe());
  if (t.numel() > 0 && t.data == nullptr)
    HK_THROW(kValue, op, ": ", name, " is a null pointer with ", t.numel(), " elements");
}

// Every view against the problem's shapes; align_bytes from the views.
void check_views(const char* op, Conv2dProblem& p, std::initializer_list<std::pair<const char*, const TensorView*>> views) {
  p.align_bytes = 256;
  for (auto& [name, t] : views) {
    std::string s = name;
    const std::vector<int64_t> shape = (s == "x" || s == "dx") ? p.x_shape()
                                       : (s == "w" || s == "dw") ? p.w_shape()
                                       : s == "bias"             ? std::vector<int64_t>{p.cout}
                                                                 : p.y_shape();
    check_view(op, name, *t, shape, p.dtype, p.prm.layout);
    p.align_bytes = std::min(p.align_bytes, t->alignment());
  }
}

Conv2dProblem forward_problem(const TensorView& x, const TensorView& w, const TensorView* bias,
                              const Conv2dParams& prm) {
  const char* op = "conv2d";
  if (x.dtype != w.dtype) HK_THROW(kType, op, ": w is ", to_string(w.dtype), " but x is ", to_string(x.dtype));
  auto xd = act_dims(op, "x", x, prm.layout);
  auto wd = weight_dims(op, "w", w, prm.layout);
  Conv2dProblem p = make_checked(op, xd[0], xd[1], xd[2], xd[3], wd[0], wd[1], wd[2], wd[3], prm, x.dtype,
                                 ConvDirection::kForward, bias != nullptr);
  if (bias) check_views(op, p, {{"x", &x}, {"w", &w}, {"bias", bias}});
  else check_views(op, p, {{"x", &x}, {"w", &w}});
  return p;
}

Conv2dProblem dgrad_problem(const TensorView& dy, const TensorView& w, int64_t h, int64_t wd_in, const Conv2dParams& prm) {
  const char* op = "conv2d_backward_data";
  if (dy.dtype != w.dtype) HK_THROW(kType, op, ": w is ", to_string(w.dtype), " but dy is ", to_string(dy.dtype));
  auto yd = act_dims(op, "dy", dy, prm.layout);
  auto wd = weight_dims(op, "w", w, prm.layout);
  if (yd[1] != wd[0])
    HK_THROW(kValue, op, ": channel mismatch: dy has Cout=", yd[1], " but the weight has Cout=", wd[0]);
  Conv2dProblem p = make_checked(op, yd[0], wd[1] * prm.groups, h, wd_in, wd[0], wd[1], wd[2], wd[3], prm, dy.dtype,
                                 ConvDirection::kBackwardData, false);
  check_views(op, p, {{"dy", &dy}, {"w", &w}});
  return p;
}

Conv2dProblem wgrad_problem(const TensorView& x, const TensorView& dy, int64_t kh, int64_t kw, const Conv2dParams& prm) {
  const char* op = "conv2d_backward_weight";
  if (x.dtype != dy.dtype) HK_THROW(kType, op, ": dy is ", to_string(dy.dtype), " but x is ", to_string(x.dtype));
  auto xd = act_dims(op, "x", x, prm.layout);
  auto yd = act_dims(op, "dy", dy, prm.layout);
  if (prm.groups < 1 || xd[1] % prm.groups != 0)
    HK_THROW(kValue, op, ": input channels C=", xd[1], " are not divisible by groups=", prm.groups);
  Conv2dProblem p = make_checked(op, xd[0], xd[1], xd[2], xd[3], yd[1], xd[1] / prm.groups, kh, kw, prm, x.dtype,
                                 ConvDirection::kBackwardWeight, false);
  check_views(op, p, {{"x", &x}, {"dy", &dy}});
  return p;
}

Conv2dParams params_from(const Attrs& a, const char* op) {
  Conv2dParams p;
  p.stride_h = a.get_int(op, "stride_h", 1);
  p.stride_w = a.get_int(op, "stride_w", 1);
  p.pad_top = a.get_int(op, "pad_top", 0);
  p.pad_bottom = a.get_int(op, "pad_bottom", 0);
  p.pad_left = a.get_int(op, "pad_left", 0);
  p.pad_right = a.get_int(op, "pad_right", 0);
  p.dilation_h = a.get_int(op, "dilation_h", 1);
  p.dilation_w = a.get_int(op, "dilation_w", 1);
  p.groups = a.get_int(op, "groups", 1);
  const std::string l = a.get_string(op, "layout", "nchw");
  if (l != "nchw" && l != "nhwc") HK_THROW(kValue, op, ": layout must be \"nchw\" or \"nhwc\", got \"", l, "\"");
  p.layout = l == "nhwc" ? ConvLayout::kNHWC : ConvLayout::kNCHW;
  return p;
}

// "NxCxHxW_CoutxKHxKW" plus optional "_sS", "_pP" (symmetric), "_dD", "_gG", "_nchw"/"_nhwc",
// "_fwd"/"_dgrad"/"_wgrad"; the defaults are stride 1, padding (kH - 1) / 2, NHWC, forward.
ProblemPtr parse_bench(const std::string& s, DType dt) {
  std::vector<std::string> tok;
  for (size_t b = 0, e; b <= s.size(); b = e + 1) {
    e = s.find('_', b);
    if (e == std::string::npos) e = s.size();
    tok.push_back(s.substr(b, e - b));
  }
  auto bad = [&] {
    HK_THROW(kValue, "conv2d: bench shape must be NxCxHxW_CoutxKHxKW[_sS][_pP][_dD][_gG][_nchw|_nhwc][_fwd|_dgrad|_wgrad], got \"", s, "\"");
  };
  if (tok.size() < 2) bad();
  auto img = parse_shape(tok[0]);
  auto ker = parse_shape(tok[1]);
  if (img.size() != 4 || ker.size() != 3) bad();
  Conv2dParams p;
  p.layout = ConvLayout::kNHWC;
  p.pad_top = p.pad_bottom = (ker[1] - 1) / 2;
  p.pad_left = p.pad_right = (ker[2] - 1) / 2;
  ConvDirection dir = ConvDirection::kForward;
  for (size_t i = 2; i < tok.size(); ++i) {
    const std::string& t = tok[i];
    if (t == "nchw") p.layout = ConvLayout::kNCHW;
    else if (t == "nhwc") p.layout = ConvLayout::kNHWC;
    else if (t == "fwd") dir = ConvDirection::kForward;
    else if (t == "dgrad") dir = ConvDirection::kBackwardData;
    else if (t == "wgrad") dir = ConvDirection::kBackwardWeight;
    else if (t.size() > 1 && (t[0] == 's' || t[0] == 'p' || t[0] == 'd' || t[0] == 'g')) {
      const int64_t v = std::stoll(t.substr(1));
      if (t[0] == 's') p.stride_h = p.stride_w = v;
      if (t[0] == 'p') p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = v;
      if (t[0] == 'd') p.dilation_h = p.dilation_w = v;
      if (t[0] == 'g') p.groups = v;
    } else {
      bad();
    }
  }
  return std::make_shared<Conv2dProblem>(make_checked("conv2d", img[0], img[1], img[2], img[3], ker[0],
                                                      img[1] / std::max<int64_t>(p.groups, 1), ker[1], ker[2], p,
                                                      dt, dir, false));
}

class Conv2dFamily final : public Family {
 public:
  std::string name() const override { return "conv2d"; }
  std::string summary() const override {
    return "2-D convolution as F.conv2d: NCHW/NHWC, stride, padding (asymmetric too), dilation, groups, bias; forward, "
           "backward data and weight; f32/f16/bf16";
  }
  std::vector<ProblemPtr> test_problems() const override {
    struct Case {
      int64_t n, c, h, w, cout, kh, kw, s, pt, pb, pl, pr, d, g;
    };
    // H, W in {1, 7, 33, 65, 511, 513}; padding 0 ('valid'), symmetric, asymmetric ('same' with an even
    // kernel); stride and dilation 1-3; groups 1, 2 and C (depthwise); 1x1 and 7x7 kernels.
    const std::vector<Case> cases = {
        {2, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},      {1, 4, 33, 33, 6, 3, 3, 2, 1, 1, 1, 1, 1, 2},
        {2, 4, 65, 33, 4, 5, 3, 1, 2, 2, 1, 1, 1, 1},    {1, 8, 33, 65, 8, 3, 3, 1, 2, 2, 2, 2, 2, 8},
        {2, 8, 7, 33, 8, 7, 7, 1, 3, 3, 3, 3, 1, 8},     {1, 4, 1, 1, 4, 1, 1, 1, 0, 0, 0, 0, 1, 1},
        {1, 4, 1, 7, 5, 1, 3, 1, 0, 0, 0, 0, 1, 1},      {2, 4, 33, 33, 4, 4, 4, 1, 1, 2, 1, 2, 1, 1},
        {1, 3, 65, 65, 4, 3, 3, 3, 0, 0, 0, 0, 3, 1},    {2, 16, 33, 33, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},
        {1, 16, 7, 7, 16, 3, 3, 2, 1, 1, 1, 1, 1, 16},   {1, 8, 65, 7, 8, 2, 2, 2, 0, 0, 0, 0, 1, 1},
        {2, 32, 7, 7, 64, 1, 1, 1, 0, 0, 0, 0, 1, 1},    {1, 2, 7, 7, 2, 7, 7, 1, 0, 0, 0, 0, 1, 1},
        {1, 8, 33, 7, 8, 4, 4, 1, 1, 2, 1, 2, 1, 8},     {1, 24, 33, 33, 16, 3, 3, 2, 1, 1, 1, 1, 2, 1},
        {2, 16, 33, 65, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16}, {1, 8, 7, 65, 8, 5, 5, 1, 2, 2, 2, 2, 1, 8},
        // Depthwise: a partial channel block (40 = 32 + 8), tiles that are not whole rows or
        // columns (19 x 30), padding wider than the kernel's reach, no padding.
        {2, 40, 19, 30, 40, 7, 7, 1, 3, 3, 3, 3, 1, 40}, {1, 24, 9, 37, 24, 3, 3, 1, 3, 3, 3, 3, 1, 24},
        {1, 32, 12, 12, 32, 5, 5, 1, 0, 0, 0, 0, 1, 32},
        // Images of 511 and 513 rows and columns: tails of every power-of-two tile.
        {1, 4, 511, 513, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},  {1, 8, 513, 511, 8, 7, 7, 2, 3, 3, 3, 3, 1, 8},
        // Channels in whole 64-channel blocks (the implicit GEMM's k-blocks): 128-pixel tiles that
        // cross rows and images, a last tile past M, Cout tails of 256-wide tiles; stride and
        // dilation 2, 'same' with an even kernel, padding beyond the kernel's reach, 1x1.
        {1, 128, 17, 19, 264, 3, 3, 2, 1, 1, 1, 1, 2, 1}, {2, 64, 33, 33, 72, 3, 3, 1, 1, 1, 1, 1, 1, 1},
        {1, 64, 5, 6, 16, 3, 3, 1, 3, 3, 3, 3, 1, 1},     {3, 64, 7, 7, 128, 1, 1, 1, 0, 0, 0, 0, 1, 1},
        {1, 64, 15, 15, 64, 4, 4, 1, 1, 2, 1, 2, 1, 1},   {2, 128, 9, 11, 64, 3, 3, 1, 1, 1, 1, 1, 2, 1},
    };
    std::vector<ProblemPtr> out;
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& k = cases[i];
      Conv2dParams p;
      p.stride_h = p.stride_w = k.s;
      p.pad_top = k.pt, p.pad_bottom = k.pb, p.pad_left = k.pl, p.pad_right = k.pr;
      p.dilation_h = p.dilation_w = k.d;
      p.groups = k.g;
      for (ConvLayout l : {ConvLayout::kNCHW, ConvLayout::kNHWC}) {
        p.layout = l;
        std::vector<DType> dts = {DType::kF32, DType::kBF16};
        if (i % 3 == 0) dts.push_back(DType::kF16);
        for (DType dt : dts)
          for (ConvDirection d : {ConvDirection::kForward, ConvDirection::kBackwardData, ConvDirection::kBackwardWeight})
            out.push_back(std::make_shared<Conv2dProblem>(make_checked("conv2d", k.n, k.c, k.h, k.w, k.cout, k.c / k.g,
                                                                       k.kh, k.kw, p, dt, d,
                                                                       d == ConvDirection::kForward && i % 2 == 0)));
      }
    }
    return out;
  }
  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    std::vector<std::string> shapes = sel.shapes;
    if (shapes.empty()) {
      // The dense 3x3 layer of a ResNet stage and a ConvNeXt depthwise 7x7, NHWC; the full suite
      // adds the small-spatial 3x3 layers, a 1x1, the gradients and NCHW.
      shapes = {"64x256x56x56_256x3x3", "64x128x56x56_128x7x7_g128"};
      if (!sel.quick)
        for (const char* s : {"64x256x14x14_256x3x3", "64x512x7x7_512x3x3", "64x256x56x56_64x1x1",
                              "64x256x56x56_256x3x3_dgrad", "8x256x56x56_256x3x3_wgrad",
                              "64x256x56x56_256x3x3_nchw", "64x128x56x56_128x7x7_g128_nchw"})
          shapes.push_back(s);
    }
    std::vector<DType> dtypes = sel.dtypes;
    if (dtypes.empty()) dtypes = {DType::kBF16};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes)
      for (DType dt : dtypes) out.push_back(parse_bench(s, dt));
    return out;
  }
  // inputs: forward {x, w[, bias]}, backward_data {dy, w}, backward_weight {x, dy}; attributes
  // stride_h/w, pad_top/bottom/left/right, dilation_h/w, groups, layout ("nchw" | "nhwc"),
  // direction ("forward" | "backward_data" | "backward_weight"), input_h/w (backward_data),
  // kernel_h/w (backward_weight).
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    attrs.expect_only("conv2d", {"stride_h", "stride_w", "pad_top", "pad_bottom", "pad_left", "pad_right", "dilation_h",
                                 "dilation_w", "groups", "layout", "direction", "input_h", "input_w", "kernel_h",
                                 "kernel_w"});
    const std::string d = attrs.get_string("conv2d", "direction", "forward");
    const Conv2dParams prm = params_from(attrs, "conv2d");
    if (d == "forward") {
      if (in.size() != 2 && in.size() != 3)
        HK_THROW(kValue, "conv2d: takes 2 or 3 inputs (x, w[, bias]), got ", in.size());
      return std::make_shared<Conv2dProblem>(forward_problem(in[0], in[1], in.size() == 3 ? &in[2] : nullptr, prm));
    }
    if (d == "backward_data") {
      if (in.size() != 2) HK_THROW(kValue, "conv2d_backward_data: takes 2 inputs (dy, w), got ", in.size());
      if (attrs.get_int("conv2d", "input_h", -1) < 0 || attrs.get_int("conv2d", "input_w", -1) < 0)
        HK_THROW(kValue, "conv2d_backward_data: needs the input's size as attributes input_h and input_w (>= 0)");
      return std::make_shared<Conv2dProblem>(dgrad_problem(in[0], in[1], attrs.get_int("conv2d", "input_h", -1),
                                                           attrs.get_int("conv2d", "input_w", -1), prm));
    }
    if (d == "backward_weight") {
      if (in.size() != 2) HK_THROW(kValue, "conv2d_backward_weight: takes 2 inputs (x, dy), got ", in.size());
      if (attrs.get_int("conv2d", "kernel_h", 0) < 1 || attrs.get_int("conv2d", "kernel_w", 0) < 1)
        HK_THROW(kValue, "conv2d_backward_weight: needs the kernel's size as attributes kernel_h and kernel_w (>= 1)");
      return std::make_shared<Conv2dProblem>(wgrad_problem(in[0], in[1], attrs.get_int("conv2d", "kernel_h", -1),
                                                           attrs.get_int("conv2d", "kernel_w", -1), prm));
    }
    HK_THROW(kValue, "conv2d: direction must be \"forward\", \"backward_data\" or \"backward_weight\", got \"", d, "\"");
  }
};

HK_REGISTER_FAMILY(Conv2dFamily);

void dispatch(const Conv2dProblem& p, const Operands& ops, cudaStream_t stream) {
  for (auto& t : ops.out)
    if (t.numel() == 0) return;  // empty output: a no-op
  if (p.dir != ConvDirection::kForward && (p.n == 0 || p.reduction_length() == 0)) {
    // A sum over nothing: zeros (cudaMemsetAsync writes +0 in every float dtype).
    HK_CHECK_CUDA(cudaMemsetAsync(ops.out[0].data, 0, size_t(ops.out[0].numel()) * (dtype_bits(p.dtype) / 8), stream));
    return;
  }
  Registry::get().pick(p).run(p, ops, stream);
}

}  // namespace

void conv2d(const TensorView& x, const TensorView& w, const TensorView& bias, const TensorView& y,
            const Conv2dParams& params, cudaStream_t stream) {
  HK_TRACE_RANGE("hk::conv2d");
  const bool has_bias = bias.data != nullptr || !bias.shape.empty();
  Conv2dProblem p = forward_problem(x, w, has_bias ? &bias : nullptr, params);
  check_views("conv2d", p, {{"x", &x}, {"w", &w}, {"y", &y}});
  if (has_bias) p.align_bytes = std::min(p.align_bytes, bias.alignment());
  std::vector<TensorView> in = {x, w};
  if (has_bias) in.push_back(bias);
  if (p.n == 0 || p.cout == 0 || p.c == 0) {
    if (y.numel() > 0 && p.c == 0) HK_THROW(kNotSupported, "conv2d: C = 0 with a non-empty output");
    return;
  }
  dispatch(p, Operands{in, {y}}, stream);
}

void conv2d_backward_data(const TensorView& dy, const TensorView& w, const TensorView& dx, const Conv2dParams& params,
                          cudaStream_t stream) {
  HK_TRACE_RANGE("hk::conv2d_backward_data");
  if (dx.rank() != 4)
    HK_THROW(kValue, "conv2d_backward_data: dx must be rank 4 (", layout_name(params.layout), "), got ", dx.describe());
  auto xd = act_dims("conv2d_backward_data", "dx", dx, params.layout);
  Conv2dProblem p = dgrad_problem(dy, w, xd[2], xd[3], params);
  check_views("conv2d_backward_data", p, {{"dy", &dy}, {"w", &w}, {"dx", &dx}});
  dispatch(p, Operands{{dy, w}, {dx}}, stream);
}

void conv2d_backward_weight(const TensorView& x, const TensorView& dy, const TensorView& dw, const Conv2dParams& params,
                            cudaStream_t stream) {
  HK_TRACE_RANGE("hk::conv2d_backward_weight");
  auto wd = weight_dims("conv2d_backward_weight", "dw", dw, params.layout);
  Conv2dProblem p = wgrad_problem(x, dy, wd[2], wd[3], params);
  check_views("conv2d_backward_weight", p, {{"x", &x}, {"dy", &dy}, {"dw", &dw}});
  dispatch(p, Operands{{x, dy}, {dw}}, stream);
}

}  // namespace hk
