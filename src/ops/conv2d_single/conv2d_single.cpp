// conv2d_single/conv2d_single.cpp — the fp64 oracle, the family (test and bench shapes) and the
// public entry point hk::conv2d_single.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "conv2d_single/conv2d_single_op.hpp"
#include "core/host.hpp"
#include "core/trace.hpp"

namespace hk {

std::string Conv2dSingleProblem::key() const {
  return fmt::format("{}x{}x{}_k{}x{}_{}", n, h, w, kh, kw, to_string(dtype));
}

double Conv2dSingleProblem::flops() const { return 2.0 * double(numel()) * double(kh * kw); }

double Conv2dSingleProblem::bytes() const {
  return (2.0 * double(numel()) + double(kh * kw)) * (dtype_bits(dtype) / 8);
}

std::vector<TensorSpec> Conv2dSingleProblem::inputs() const {
  TensorSpec x{"x", dtype, {n, h, w}, {}, Dist::kNormal, 1.0, {}};
  // Infinity and NaN at fixed spots: each reaches every output whose window holds it.
  if (numel() >= 64) x.specials = {{3, std::numeric_limits<double>::infinity()}, {numel() - 5, std::nan("")}};
  return {x, TensorSpec{"k", dtype, {kh, kw}, {}, Dist::kUniform, 1.0, {}}};
}

std::vector<TensorSpec> Conv2dSingleProblem::outputs() const {
  return {TensorSpec{"z", dtype, {n, h, w}, {}, Dist::kNormal, 1.0, {}}};
}

void Conv2dSingleProblem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  const auto& x = in[0].values;
  const auto& k = in[1].values;
  auto& z = out[0].values;
  host::parallel_for(n * h, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t i = row / h, j = row % h;
      for (int64_t l = 0; l < w; ++l) {
        double acc = 0;
        for (int64_t a = 0; a < kh && j + a < h; ++a)
          for (int64_t c = 0; c < kw && l + c < w; ++c) acc += k[a * kw + c] * x[(i * h + j + a) * w + l + c];
        z[row * w + l] = acc;
      }
    }
  }, host::grain_for(w * kh * kw));
}

Tolerance Conv2dSingleProblem::tolerance(int) const {
  // Inputs are exact in their dtype; the rungs sum the kH kW products in f32 (in their own
  // order) and round once. f32: the sum's rounding grows with the tap count (|x| ~ 1, |k| <= 1).
  const double taps = double(kh * kw);
  switch (dtype) {
    case DType::kF32: return {1e-6 * taps, 1e-5};
    case DType::kF16: return {1e-6 * taps + 1e-4, 1.0 / 1024};
    default: return {1e-6 * taps + 1e-4, 1.0 / 128};
  }
}

Conv2dSingleArgs Conv2dSingleArgs::bind(const Conv2dSingleProblem& p, const Operands& ops) {
  Conv2dSingleArgs a;
  a.x = ops.in.at(0).data;
  a.k = ops.in.at(1).data;
  a.z = ops.out.at(0).data;
  a.n = p.n;
  a.h = p.h;
  a.w = p.w;
  a.kh = static_cast<int>(p.kh);
  a.kw = static_cast<int>(p.kw);
  a.dtype = p.dtype;
  a.align_bytes = p.align_bytes;
  return a;
}

namespace {

constexpr const char* kOp = "conv2d_single";

void check_view(const char* name, const TensorView& t, int rank, DType dtype) {
  if (t.dtype != dtype)
    HK_THROW(kType, kOp, ": ", name, " is ", to_string(t.dtype), " but x is ", to_string(dtype));
  if (t.rank() != rank)
    HK_THROW(kValue, kOp, ": ", name, " must have rank ", rank, ", got ", t.describe());
  if (!t.is_contiguous()) HK_THROW(kNotSupported, kOp, ": ", name, " must be contiguous, got ", t.describe());
  if (t.numel() > 0 && t.data == nullptr)
    HK_THROW(kValue, kOp, ": ", name, " is a null pointer with ", t.numel(), " elements");
}

// x [N, H, W], k [kH, kW] (kH, kW >= 1, below 2^15), and z (when given) x's shape and dtype.
Conv2dSingleProblem checked_problem(const TensorView& x, const TensorView& k, const TensorView* z) {
  if (x.dtype != DType::kF32 && x.dtype != DType::kF16 && x.dtype != DType::kBF16)
    HK_THROW(kType, kOp, ": x is ", to_string(x.dtype), ", expected f32, f16 or bf16");
  check_view("x", x, 3, x.dtype);
  check_view("k", k, 2, x.dtype);
  if (k.shape[0] < 1 || k.shape[1] < 1 || k.shape[0] > 32767 || k.shape[1] > 32767)
    HK_THROW(kValue, kOp, ": k must be [kH, kW] with 1 <= kH, kW <= 32767, got [", shape_to_string(k.shape), "]");
  Conv2dSingleProblem p(x.shape[0], x.shape[1], x.shape[2], k.shape[0], k.shape[1], x.dtype);
  p.align_bytes = x.alignment();  // k is staged through shared memory: its alignment is free
  if (z) {
    check_view("z", *z, 3, x.dtype);
    if (z->shape != x.shape)
      HK_THROW(kValue, kOp, ": z has shape [", shape_to_string(z->shape), "] but x has [", shape_to_string(x.shape), "]");
    p.align_bytes = std::min(p.align_bytes, z->alignment());
  }
  return p;
}

class Conv2dSingleFamily final : public Family {
 public:
  std::string name() const override { return "conv2d_single"; }
  std::string summary() const override {
    return "single-channel 2-D convolution (stencil): x [N, H, W] * k [kH, kW] -> 'same'-size z, zero beyond the "
           "edge, f32/f16/bf16";
  }
  std::vector<ProblemPtr> test_problems() const override {
    std::vector<ProblemPtr> out;
    // (N, H, W): H, W in {1, 7, 33, 65, 511, 513}; W = 64 and 136 take the 16-byte path.
    const std::vector<std::array<int64_t, 3>> images = {{1, 1, 1},   {2, 7, 33},  {3, 33, 7},    {2, 65, 65},
                                                        {1, 1, 65},  {2, 65, 1},  {2, 33, 64},   {1, 40, 136},
                                                        {1, 511, 513}, {1, 513, 511}};
    const std::vector<std::pair<int64_t, int64_t>> kernels = {{1, 1}, {3, 3}, {4, 4}, {7, 7}, {2, 5}, {9, 2}};
    for (auto& s : images)
      for (auto& [kh, kw] : kernels)
        for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
          out.push_back(std::make_shared<Conv2dSingleProblem>(s[0], s[1], s[2], kh, kw, dt));
    // Kernels larger than the image, and past 32 x 32 (the tiled rungs' piece of k).
    for (DType dt : {DType::kF32, DType::kBF16}) {
      out.push_back(std::make_shared<Conv2dSingleProblem>(2, 7, 33, 33, 40, dt));
      out.push_back(std::make_shared<Conv2dSingleProblem>(1, 65, 64, 32, 32, dt));
      out.push_back(std::make_shared<Conv2dSingleProblem>(1, 70, 136, 65, 40, dt));  // 3 x 2 pieces of k, 16-byte rows
    }
    return out;
  }
  // Shapes "NxHxW" or "NxHxW_kKHxKW"; default the puzzle bench at k = 3, 4, 7.
  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    std::vector<std::array<int64_t, 5>> shapes;
    for (auto& s : sel.shapes) {
      auto cut = s.find("_k");
      auto img = parse_shape(s.substr(0, cut));
      if (img.size() != 3) HK_THROW(kValue, kOp, ": bench shape must be NxHxW[_kKHxKW], got \"", s, "\"");
      if (cut == std::string::npos) {
        for (int64_t k : {3, 4, 7}) shapes.push_back({img[0], img[1], img[2], k, k});
      } else {
        auto ker = parse_shape(s.substr(cut + 2));
        if (ker.size() != 2) HK_THROW(kValue, kOp, ": bench shape must be NxHxW[_kKHxKW], got \"", s, "\"");
        shapes.push_back({img[0], img[1], img[2], ker[0], ker[1]});
      }
    }
    if (shapes.empty())
      for (int64_t k : {3, 4, 7}) shapes.push_back({256, 512, 512, k, k});
    std::vector<DType> dtypes = sel.dtypes;
    if (dtypes.empty()) dtypes = sel.quick ? std::vector<DType>{DType::kF32} : std::vector<DType>{DType::kF32, DType::kBF16};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes)
      for (DType dt : dtypes) out.push_back(std::make_shared<Conv2dSingleProblem>(s[0], s[1], s[2], s[3], s[4], dt));
    return out;
  }
  // inputs {x [N, H, W], k [kH, kW]}; no attributes.
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    attrs.expect_only(kOp, {});
    if (in.size() != 2) HK_THROW(kValue, kOp, ": takes 2 inputs (x, k), got ", in.size());
    return std::make_shared<Conv2dSingleProblem>(checked_problem(in[0], in[1], nullptr));
  }
};

HK_REGISTER_FAMILY(Conv2dSingleFamily);

}  // namespace

void conv2d_single(const TensorView& x, const TensorView& k, const TensorView& z, cudaStream_t stream) {
  HK_TRACE_RANGE("hk::conv2d_single");
  Conv2dSingleProblem p = checked_problem(x, k, &z);
  if (p.numel() == 0) return;  // empty tensor: a no-op
  Registry::get().pick(p).run(p, Operands{{x, k}, {z}}, stream);
}

}  // namespace hk
