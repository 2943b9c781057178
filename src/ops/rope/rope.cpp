// rope/rope.cpp — the fp64 oracle, the op contract's numbers, the family (test and bench shapes)
// and the public entry points hk::rope / hk::rope_backward.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/host.hpp"
#include "core/trace.hpp"
#include "rope/rope_op.hpp"

namespace hk {

namespace {

int esize(DType dt) { return dtype_bits(dt) / 8; }

std::vector<int64_t> spec_strides(const std::array<int64_t, 3>& s, int64_t seq, int64_t heads, int64_t dim) {
  if (s == RopeProblem::contiguous(seq, heads, dim)) return {};
  return {s[0], s[1], s[2], 1};
}

}  // namespace

RopeProblem::RopeProblem(int64_t b, int64_t s, int64_t h, int64_t d, int64_t r, DType dt, bool bwd)
    : batch(b), seq(s), heads(h), dim(d), rotary(r), dtype(dt), backward(bwd), sx(contiguous(s, h, d)),
      sy(contiguous(s, h, d)) {}

std::string RopeProblem::key() const {
  std::string k = fmt::format("{}x{}x{}x{}_r{}_{}_{}", batch, seq, heads, dim, rotary, to_string(dtype),
                              backward ? "bwd" : "fwd");
  const auto c = contiguous(seq, heads, dim);
  if (sx != c) k += fmt::format("_sx{}-{}-{}", sx[0], sx[1], sx[2]);
  if (sy != c) k += fmt::format("_sy{}-{}-{}", sy[0], sy[1], sy[2]);
  return k;
}

// Per rotated pair: 4 multiplies and 2 adds; the passed-through dims cost nothing.
double RopeProblem::flops() const { return double(rows()) * double(rotary / 2) * 6.0; }

double RopeProblem::bytes() const {
  // x read and y written once; the tables read once (they are reused from L2 across B and H).
  return double(numel()) * esize(dtype) * 2.0 + double(seq) * double(rotary / 2) * 4.0 * 2.0;
}

std::vector<TensorSpec> RopeProblem::inputs() const {
  TensorSpec x{backward ? "dy" : "x", dtype, {batch, seq, heads, dim}, spec_strides(sx, seq, heads, dim),
               Dist::kNormal, 1.0, {}};
  const double inf = std::numeric_limits<double>::infinity();
  // NaN in a rotated dim (its pair partner turns NaN), +Inf in a rotated dim of the next row,
  // -0 and a huge value in the last dim (passed through when R < D).
  if (rows() >= 2 && dim >= 2)
    x.specials = {{0, std::nan("")}, {dim + 1, inf}, {dim - 1, -0.0}, {2 * dim - 1, 6.0e4}};
  const int64_t half = rotary / 2;
  TensorSpec c{"cos", DType::kF32, {seq, half}, {}, Dist::kUniform, 1.0, {}};
  TensorSpec s{"sin", DType::kF32, {seq, half}, {}, Dist::kUniform, 1.0, {}};
  return {x, c, s};
}

std::vector<TensorSpec> RopeProblem::outputs() const {
  return {TensorSpec{backward ? "dx" : "y", dtype, {batch, seq, heads, dim}, spec_strides(sy, seq, heads, dim),
                     Dist::kNormal, 1.0, {}}};
}

void RopeProblem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  const auto& x = in[0].values;
  const auto& cs = in[1].values;
  const auto& sn = in[2].values;
  auto& y = out[0].values;
  const int64_t D = dim, half = rotary / 2;
  const double sign = backward ? -1.0 : 1.0;
  host::parallel_for(rows(), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t s = (r / heads) % seq;
      const double* xr = &x[r * D];
      double* yr = &y[r * D];
      for (int64_t i = 0; i < half; ++i) {
        const double c = cs[s * half + i], n = sign * sn[s * half + i];
        yr[i] = xr[i] * c - xr[i + half] * n;
        yr[i + half] = xr[i + half] * c + xr[i] * n;
      }
      for (int64_t i = rotary; i < D; ++i) yr[i] = xr[i];
    }
  }, host::grain_for(D));
}

Tolerance RopeProblem::tolerance(int) const {
  // Two f32 products and one sum per output (an FMA in the kernels), one rounding to the dtype.
  // The f32 floor covers the sum's cancellation: 2^-24 (|x1 c| + |x2 n|) with |x| up to ~5 and
  // |c|, |n| <= 1. The passed-through dims are exact.
  switch (dtype) {
    case DType::kF32: return {2e-6, 1e-6};
    case DType::kF16: return {1e-5, 1.0 / 1024};
    default: return {1e-5, 1.0 / 128};
  }
}

Attrs RopeProblem::attrs() const {
  Attrs a{{"backward", backward}};
  if (sy != contiguous(seq, heads, dim)) {
    a.set("out_stride_b", sy[0]);
    a.set("out_stride_s", sy[1]);
    a.set("out_stride_h", sy[2]);
  }
  return a;
}

RopeArgs RopeArgs::bind(const RopeProblem& p, const Operands& ops) {
  RopeArgs a;
  a.x = ops.in.at(0).data;
  a.cos = static_cast<const float*>(ops.in.at(1).data);
  a.sin = static_cast<const float*>(ops.in.at(2).data);
  a.y = ops.out.at(0).data;
  a.batch = p.batch;
  a.seq = p.seq;
  a.heads = p.heads;
  a.dim = p.dim;
  a.rotary = p.rotary;
  a.sx = p.sx;
  a.sy = p.sy;
  a.dtype = p.dtype;
  a.sin_sign = p.backward ? -1.f : 1.f;
  return a;
}

namespace {

// A [B, S, H, D] operand: its (b, s, h) strides. Typed errors name the op, the operand and what
// was received.
std::array<int64_t, 3> check_heads(const char* op, const char* name, const TensorView& t, DType dtype,
                                   const std::vector<int64_t>* shape) {
  if (t.dtype != dtype)
    HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), " but the input is ", to_string(dtype));
  if (t.rank() != 4) HK_THROW(kValue, op, ": ", name, " must be [B, S, H, D], got [", shape_to_string(t.shape), "]");
  if (shape && t.shape != *shape)
    HK_THROW(kValue, op, ": ", name, " has shape [", shape_to_string(t.shape), "] but the input has [",
             shape_to_string(*shape), "]");
  if (t.numel() > 0 && t.data == nullptr)
    HK_THROW(kValue, op, ": ", name, " is a null pointer with ", t.numel(), " elements");
  if (t.numel() > 0 && t.shape[3] > 1 && t.stride(3) != 1)
    HK_THROW(kNotSupported, op, ": ", name, " needs a contiguous last dim (D), got ", t.describe());
  return {t.stride(0), t.stride(1), t.stride(2)};
}

void check_table(const char* op, const char* name, const TensorView& t, int64_t seq, int64_t half) {
  if (t.dtype != DType::kF32) HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), ", expected f32");
  if (t.rank() != 2 || t.shape[0] != seq || t.shape[1] != half)
    HK_THROW(kValue, op, ": ", name, " has shape [", shape_to_string(t.shape), "], expected [", seq, "x", half,
             "] (S x rotary_dim / 2)");
  if (!t.is_contiguous()) HK_THROW(kNotSupported, op, ": ", name, " must be contiguous, got ", t.describe());
  if (t.numel() > 0 && t.data == nullptr)
    HK_THROW(kValue, op, ": ", name, " is a null pointer with ", t.numel(), " elements");
}

// x [B, S, H, D], cos and sin [S, R/2]: the problem they pose (output contiguous), aligned as
// the views are.
RopeProblem checked_problem(const char* op, const TensorView& x, const TensorView& cos, const TensorView& sin,
                            bool backward) {
  if (x.dtype != DType::kF32 && x.dtype != DType::kF16 && x.dtype != DType::kBF16)
    HK_THROW(kType, op, ": ", backward ? "dy" : "x", " is ", to_string(x.dtype), ", expected f32, f16 or bf16");
  const auto sx = check_heads(op, backward ? "dy" : "x", x, x.dtype, nullptr);
  if (cos.rank() != 2)
    HK_THROW(kValue, op, ": cos must be [S, rotary_dim / 2], got [", shape_to_string(cos.shape), "]");
  const int64_t B = x.shape[0], S = x.shape[1], H = x.shape[2], D = x.shape[3], half = cos.shape[1];
  if (half < 1 || 2 * half > D)
    HK_THROW(kValue, op, ": cos's last dim is rotary_dim / 2 = ", half, ", which needs 1 <= rotary_dim / 2 <= D / 2 = ",
             D / 2);
  check_table(op, "cos", cos, S, half);
  check_table(op, "sin", sin, S, half);
  RopeProblem p(B, S, H, D, 2 * half, x.dtype, backward);
  p.sx = sx;
  p.align_bytes = std::min({x.alignment(), cos.alignment(), sin.alignment()});
  return p;
}

class RopeFamily final : public Family {
 public:
  std::string name() const override { return "rope"; }
  std::string summary() const override {
    return "rotary position embedding (rotate_half) on [B, S, H, D] with f32 cos/sin tables, partial rotary "
           "dims, any (b, s, h) strides, forward and backward, f32/f16/bf16";
  }
  std::vector<ProblemPtr> test_problems() const override {
    struct S { int64_t b, s, h, d, r; int layout; };  // layout: 0 contiguous, 1 [B, H, S, D] storage,
                                                      // 2 q slice of a fused QKV row (3H heads) into
                                                      // padded-head output, 3 padded heads both sides
    const std::vector<S> shapes = {
        {1, 1, 1, 2, 2, 0},     {2, 3, 5, 6, 4, 0},    {1, 7, 3, 64, 64, 0},  {2, 9, 4, 128, 128, 0},
        {3, 17, 5, 96, 32, 0},  {1, 5, 2, 80, 64, 0},  {2, 33, 3, 72, 72, 0}, {1, 4, 2, 130, 126, 0},
        {2, 19, 4, 64, 64, 1},  {2, 11, 4, 128, 128, 2}, {1, 13, 3, 40, 40, 3}, {1, 6, 2, 10, 6, 3},
        {1, 512, 8, 128, 128, 0}};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes)
      for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
        for (bool bwd : {false, true}) {
          auto p = std::make_shared<RopeProblem>(s.b, s.s, s.h, s.d, s.r, dt, bwd);
          if (s.layout == 1) p->sx = {s.h * s.s * s.d, s.d, s.s * s.d};
          if (s.layout == 2) {
            p->sx = {s.s * 3 * s.h * s.d, 3 * s.h * s.d, s.d};
            p->sy = {s.s * s.h * (s.d + 8), s.h * (s.d + 8), s.d + 8};
          }
          if (s.layout == 3) {
            p->sx = {s.s * s.h * (s.d + 3), s.h * (s.d + 3), s.d + 3};
            p->sy = {s.s * s.h * (s.d + 1), s.h * (s.d + 1), s.d + 1};
          }
          out.push_back(p);
        }
    return out;
  }
  // Shapes are "BxSxHxD" (rotary dim D); default 8x2048x16x128, and (full suite) the same q heads
  // read as a slice of a fused QKV row with 4 KV heads.
  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    std::vector<std::vector<int64_t>> shapes;
    for (auto& s : sel.shapes) {
      std::vector<int64_t> v = parse_shape(s);
      if (v.size() != 4) HK_THROW(kValue, "rope: bench shape must be BxSxHxD, got \"", s, "\"");
      shapes.push_back(v);
    }
    if (shapes.empty()) shapes = {{8, 2048, 16, 128}};
    std::vector<DType> dtypes = sel.dtypes;
    if (dtypes.empty()) dtypes = {DType::kBF16, DType::kF32};
    std::vector<ProblemPtr> out;
    for (auto& v : shapes)
      for (DType dt : dtypes) {
        out.push_back(std::make_shared<RopeProblem>(v[0], v[1], v[2], v[3], v[3], dt, false));
        if (sel.quick) continue;
        out.push_back(std::make_shared<RopeProblem>(v[0], v[1], v[2], v[3], v[3], dt, true));
        auto q = std::make_shared<RopeProblem>(v[0], v[1], v[2], v[3], v[3], dt, false);
        const int64_t row = (v[2] + 2 * std::max<int64_t>(1, v[2] / 4)) * v[3];
        q->sx = {v[1] * row, row, v[3]};
        out.push_back(q);
      }
    return out;
  }
  // inputs {x, cos, sin} (backward=true: {dy, cos, sin}); out_stride_b, out_stride_s,
  // out_stride_h: the output's (b, s, h) strides (default: contiguous).
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    attrs.expect_only("rope", {"backward", "out_stride_b", "out_stride_s", "out_stride_h"});
    const bool bwd = attrs.get_bool("rope", "backward", false);
    const char* op = bwd ? "rope_backward" : "rope";
    if (in.size() != 3u)
      HK_THROW(kValue, op, ": takes 3 inputs (", bwd ? "dy" : "x", ", cos, sin), got ", in.size());
    auto p = std::make_shared<RopeProblem>(checked_problem(op, in[0], in[1], in[2], bwd));
    const char* names[3] = {"out_stride_b", "out_stride_s", "out_stride_h"};
    for (int k = 0; k < 3; ++k) {
      p->sy[k] = attrs.get_int(op, names[k], p->sy[k]);
      if (p->sy[k] < 0) HK_THROW(kValue, op, ": ", names[k], " must be >= 0, got ", p->sy[k]);
    }
    return p;
  }
};

HK_REGISTER_FAMILY(RopeFamily);

void run_public(const char* op, const TensorView& x, const TensorView& cos, const TensorView& sin,
                const TensorView& y, bool backward, cudaStream_t stream) {
  RopeProblem p = checked_problem(op, x, cos, sin, backward);
  p.sy = check_heads(op, backward ? "dx" : "y", y, x.dtype, &x.shape);
  if (p.numel() > 0 && (p.sy[0] < 0 || p.sy[1] < 0 || p.sy[2] < 0))
    HK_THROW(kNotSupported, op, ": ", backward ? "dx" : "y", " needs non-negative strides, got ", y.describe());
  if (p.numel() == 0) return;  // empty tensor: a no-op
  p.align_bytes = std::min(p.align_bytes, y.alignment());
  Registry::get().pick(p).run(p, Operands{{x, cos, sin}, {y}}, stream);
}

}  // namespace

void rope(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& y,
          cudaStream_t stream) {
  HK_TRACE_RANGE("hk::rope");
  run_public("rope", x, cos, sin, y, false, stream);
}

void rope_backward(const TensorView& dy, const TensorView& cos, const TensorView& sin, const TensorView& dx,
                   cudaStream_t stream) {
  HK_TRACE_RANGE("hk::rope_backward");
  run_public("rope_backward", dy, cos, sin, dx, true, stream);
}

}  // namespace hk
