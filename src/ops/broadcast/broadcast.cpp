// broadcast/broadcast.cpp — the fp64 oracles, the op contracts' numbers, the four families
// (test and bench shapes) and the public entry points of hk/ops/broadcast.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "broadcast/broadcast_op.hpp"
#include "common/rows.hpp"
#include "core/host.hpp"

namespace hk {

namespace {
int esize(DType dt) { return dtype_bits(dt) / 8; }
// relu that keeps NaN (the kernels' act the same way; std::max(0.0, NaN) would give 0).
double relu(double v) { return v > 0 || std::isnan(v) ? v : 0.0; }
bool is_row_op(BroadcastKind k) { return k != BroadcastKind::kAddScalar; }
}  // namespace

const char* family_name(BroadcastKind kind) {
  switch (kind) {
    case BroadcastKind::kAddScalar: return "add_scalar";
    case BroadcastKind::kOuterAdd: return "outer_add";
    case BroadcastKind::kOuterMulRelu: return "outer_mul_relu";
    default: return "row_scale_relu";
  }
}

BroadcastProblem::BroadcastProblem(BroadcastKind k, std::vector<int64_t> s, DType dt, bool bwd, int64_t pad, double cc)
    : kind(k), shape(std::move(s)), dtype(dt), c(cc), backward(bwd) {
  ld_x = ld_dz = ld_z = n0() + pad;
}

int64_t BroadcastProblem::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int BroadcastProblem::row_align() const {
  const int64_t e = esize(dtype);
  switch (kind) {
    case BroadcastKind::kAddScalar: return align_bytes;
    case BroadcastKind::kOuterAdd:
    case BroadcastKind::kOuterMulRelu: return rows::row_alignment(align_bytes, {ld_z * e});
    default:
      if (backward) return rows::row_alignment(align_bytes, {ld_x * e, ld_dz * e, ld_z * e});
      return rows::row_alignment(align_bytes, {ld_x * e, ld_z * e});
  }
}

std::string BroadcastProblem::key() const {
  std::string k = fmt::format("{}_{}", shape_to_string(shape), to_string(dtype));
  if (kind == BroadcastKind::kAddScalar) {
    std::string cs = fmt::format("{:g}", c);
    std::replace(cs.begin(), cs.end(), '.', 'p');  // test names: no dots
    k += "_c" + cs;
  }
  if (kind == BroadcastKind::kRowScaleRelu) k += backward ? "_bwd" : "_fwd";
  if (is_row_op(kind) && (ld_z != n0() || ld_x != n0() || ld_dz != n0())) k += fmt::format("_ld{}", ld_z);
  return k;
}

double BroadcastProblem::flops() const { return double(numel()) * (backward ? 4.0 : 2.0); }

double BroadcastProblem::bytes() const {
  const double e = esize(dtype), n = double(numel());
  switch (kind) {
    case BroadcastKind::kAddScalar: return 2 * n * e;
    case BroadcastKind::kOuterAdd:
    case BroadcastKind::kOuterMulRelu: return (n + n0() + n1()) * e;
    default: return backward ? (3 * n + 2 * n1()) * e : (2 * n + n1()) * e;
  }
}

std::vector<TensorSpec> BroadcastProblem::inputs() const {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  if (kind == BroadcastKind::kAddScalar) {
    TensorSpec x{"x", dtype, shape, {}, Dist::kNormal, 2.0, {}};
    if (numel() >= 8) x.specials = {{1, nan}, {2, inf}, {3, -inf}, {4, -0.0}};
    return {x};
  }
  const int64_t N1 = n1(), N0 = n0();
  TensorSpec y{"y", dtype, {N1}, {}, Dist::kNormal, 1.0, {}};
  if (kind != BroadcastKind::kRowScaleRelu) {
    TensorSpec x{"x", dtype, {N0}, {}, Dist::kNormal, 1.0, {}};
    if (N0 >= 4 && N1 >= 4) {
      x.specials = {{1, nan}, {3, 0.0}};  // column 1 NaN; row 2 (y = Inf) meets x = 0: Inf * 0 = NaN
      y.specials = {{2, inf}};
    }
    return {x, y};
  }
  TensorSpec x{"x", dtype, {N1, N0}, {ld_x, 1}, Dist::kNormal, 1.0, {}};
  if (N0 >= 4 && N1 >= 4) {
    x.specials = {{1, nan}, {N0 + 2, inf}, {2 * N0 + 3, 0.0}};
    y.specials = {{3, -inf}};
  }
  if (!backward) return {x, y};
  return {x, y, TensorSpec{"dz", dtype, {N1, N0}, {ld_dz, 1}, Dist::kNormal, 1.0, {}}};
}

std::vector<TensorSpec> BroadcastProblem::outputs() const {
  if (kind == BroadcastKind::kAddScalar) return {TensorSpec{"z", dtype, shape, {}, Dist::kNormal, 1.0, {}}};
  const int64_t N1 = n1(), N0 = n0();
  if (!backward) return {TensorSpec{"z", dtype, {N1, N0}, {ld_z, 1}, Dist::kNormal, 1.0, {}}};
  return {TensorSpec{"dx", dtype, {N1, N0}, {ld_z, 1}, Dist::kNormal, 1.0, {}},
          TensorSpec{"dy", dtype, {N1}, {}, Dist::kNormal, 1.0, {}}};
}

void BroadcastProblem::reference(const std::vector<HostTensor>& in, std::vector<HostTensor>& out) const {
  const auto& x = in[0].values;
  auto& z = out[0].values;
  if (kind == BroadcastKind::kAddScalar) {
    host::parallel_for(numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) z[i] = x[i] + c;
    });
    return;
  }
  const auto& y = in[1].values;
  const int64_t N0 = n0();
  host::parallel_for(n1(), [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      double dyj = 0;
      for (int64_t i = 0; i < N0; ++i) {
        double& o = z[j * N0 + i];
        switch (kind) {
          case BroadcastKind::kOuterAdd: o = x[i] + y[j]; break;
          case BroadcastKind::kOuterMulRelu: o = relu(y[j] * x[i]); break;
          default: {
            const double xv = x[j * N0 + i];
            if (!backward) {
              o = relu(xv * y[j]);
            } else {
              const double dzv = in[2].values[j * N0 + i];
              const bool on = xv * y[j] > 0;
              o = on ? y[j] * dzv : 0.0;
              dyj += on ? xv * dzv : 0.0;
            }
          }
        }
      }
      if (backward) out[1].values[j] = dyj;
    }
  }, host::grain_for(N0));
}

Tolerance BroadcastProblem::tolerance(int i) const {
  // Element-wise: one f32 op on dtype-exact inputs, rounded once to the dtype (add_scalar also
  // rounds c to f32: |c| 2^-24 absolute). dy of the backward sums N0 masked random-sign terms:
  // the tolerance scales with sqrt(N0) (rows::acc_rel).
  if (i == 1) return {rows::acc_abs(n0()), rows::out_rel(dtype) + rows::acc_rel(n0())};
  return {1e-7 + std::fabs(c) * 0x1p-23, rows::out_rel(dtype)};
}

Attrs BroadcastProblem::attrs() const {
  Attrs a;
  if (kind == BroadcastKind::kAddScalar) a.set("c", c);
  if (kind == BroadcastKind::kRowScaleRelu) a.set("backward", backward);
  if (is_row_op(kind)) rows::set_out_row_stride(a, ld_z, n0());
  return a;
}

BroadcastArgs BroadcastArgs::bind(const BroadcastProblem& p, const Operands& ops) {
  BroadcastArgs a;
  a.x = ops.in.at(0).data;
  if (p.kind != BroadcastKind::kAddScalar) a.y = ops.in.at(1).data;
  if (p.backward) {
    a.dz = ops.in.at(2).data;
    a.dy = ops.out.at(1).data;
  }
  a.z = ops.out.at(0).data;
  a.n = p.numel();
  a.n1 = p.n1();
  a.n0 = p.n0();
  a.ld_x = p.ld_x;
  a.ld_dz = p.ld_dz;
  a.ld_z = p.ld_z;
  a.dtype = p.dtype;
  a.c = static_cast<float>(p.c);
  a.backward = p.backward;
  return a;
}

namespace {

// Validation shared by the public ops and make_problem: typed errors naming the op and the
// values received. Each returns the problem its inputs pose, aligned as the inputs are, with
// the output rows contiguous until the caller says otherwise.
BroadcastProblem checked_add_scalar(const TensorView& x, double c) {
  const char* op = "add_scalar";
  rows::check_float(op, "x", x);
  if (!x.is_contiguous()) HK_THROW(kNotSupported, op, ": x must be contiguous, got ", x.describe());
  rows::check_data(op, "x", x);
  BroadcastProblem p(BroadcastKind::kAddScalar, x.shape, x.dtype, false, 0, c);
  p.align_bytes = x.alignment();
  return p;
}

BroadcastProblem checked_outer(BroadcastKind kind, const TensorView& x, const TensorView& y) {
  const char* op = family_name(kind);
  rows::check_float(op, "x", x);
  if (x.rank() != 1 || y.rank() != 1)
    HK_THROW(kValue, op, ": x and y must be vectors, got [", shape_to_string(x.shape), "] and [",
             shape_to_string(y.shape), "]");
  const int64_t N0 = x.shape[0], N1 = y.shape[0];
  rows::check_vector(op, "x", x, x.dtype, N0);
  rows::check_vector(op, "y", y, x.dtype, N1);
  BroadcastProblem p(kind, {N1, N0}, x.dtype);
  p.align_bytes = rows::min_alignment({&x, &y});
  return p;
}

// row_scale_relu: x [N1, N0] and y [N1], plus dz [N1, N0] for the backward (dz not null).
BroadcastProblem checked_row_scale(const char* op, const TensorView& x, const TensorView& y, const TensorView* dz) {
  rows::check_float(op, "x", x);
  if (x.rank() != 2) HK_THROW(kValue, op, ": x must be [N1, N0], got [", shape_to_string(x.shape), "]");
  const int64_t N1 = x.shape[0], N0 = x.shape[1];
  const rows::Layout lx = rows::check_matrix(op, "x", x, x.dtype, N1, N0);
  rows::check_vector(op, "y", y, x.dtype, N1);
  const int64_t ld_dz = dz ? rows::check_matrix(op, "dz", *dz, x.dtype, N1, N0).ld : lx.ld;
  BroadcastProblem p(BroadcastKind::kRowScaleRelu, {N1, N0}, x.dtype, dz != nullptr);
  p.ld_x = lx.ld;
  p.ld_dz = ld_dz;
  p.align_bytes = dz ? rows::min_alignment({&x, &y, dz}) : rows::min_alignment({&x, &y});
  return p;
}

template <BroadcastKind kKind>
class BroadcastFamily final : public Family {
 public:
  std::string name() const override { return family_name(kKind); }
  std::string summary() const override {
    switch (kKind) {
      case BroadcastKind::kAddScalar: return "z = x + c, any contiguous shape, f32/f16/bf16";
      case BroadcastKind::kOuterAdd: return "z[j,i] = x[i] + y[j] (outer add), strided z rows, f32/f16/bf16";
      case BroadcastKind::kOuterMulRelu: return "z[j,i] = relu(y[j] x[i]) (fused outer product + ReLU), f32/f16/bf16";
      default: return "z = relu(x[j,i] y[j]) and its backward (dx, dy = masked row sums), f32/f16/bf16";
    }
  }
  std::vector<ProblemPtr> test_problems() const override {
    std::vector<ProblemPtr> out;
    const DType dts[] = {DType::kF32, DType::kF16, DType::kBF16};
    if constexpr (kKind == BroadcastKind::kAddScalar) {
      const std::vector<std::vector<int64_t>> shapes = {{1}, {3}, {8}, {4097}, {113, 203}, {(1 << 20) + 3}, {64, 64, 65}};
      for (auto& s : shapes)
        for (DType dt : dts)
          for (double c : {0.75, 1.0 / 3}) out.push_back(std::make_shared<BroadcastProblem>(kKind, s, dt, false, 0, c));
      return out;
    }
    struct S { int64_t n1, n0, pad; };
    const std::vector<S> shapes = {{1, 1, 0}, {3, 3, 5}, {1, 4097, 0}, {7, 1023, 9}, {113, 203, 13},
                                   {1000, 96, 8}, {5, 40000, 0}, {2, 1 << 20, 0}, {4099, 5, 3}};
    for (auto& s : shapes)
      for (DType dt : dts) {
        out.push_back(std::make_shared<BroadcastProblem>(kKind, std::vector<int64_t>{s.n1, s.n0}, dt, false, s.pad));
        if (kKind == BroadcastKind::kRowScaleRelu)
          out.push_back(std::make_shared<BroadcastProblem>(kKind, std::vector<int64_t>{s.n1, s.n0}, dt, true, s.pad));
      }
    // row_scale_relu v03's backward sums a row's partials with a block, not a warp, past 1024
    // of them: f32 rows of more than 1024 x 512 x 4 elements.
    if constexpr (kKind == BroadcastKind::kRowScaleRelu)
      out.push_back(std::make_shared<BroadcastProblem>(kKind, std::vector<int64_t>{2, (int64_t(1) << 21) + 4},
                                                       DType::kF32, true, 0));
    return out;
  }
  std::vector<ProblemPtr> bench_problems(const BenchSelect& sel) const override {
    std::vector<std::vector<int64_t>> shapes;
    for (auto& s : sel.shapes) shapes.push_back(parse_shape(s));
    if (shapes.empty()) {
      shapes = {{16384, 8192}};
      if (!sel.quick) shapes.push_back({4, int64_t(1) << 26});  // few long rows
    }
    std::vector<DType> dtypes = sel.dtypes;
    if (dtypes.empty()) dtypes = sel.quick ? std::vector<DType>{DType::kBF16} : std::vector<DType>{DType::kBF16, DType::kF32};
    std::vector<ProblemPtr> out;
    for (auto& s : shapes) {
      if (kKind != BroadcastKind::kAddScalar && s.size() != 2)
        HK_THROW(kValue, family_name(kKind), ": bench shape must be N1xN0, got ", shape_to_string(s));
      for (DType dt : dtypes) {
        out.push_back(std::make_shared<BroadcastProblem>(kKind, s, dt, false, 0, 0.75));
        if (kKind == BroadcastKind::kRowScaleRelu && !sel.quick)
          out.push_back(std::make_shared<BroadcastProblem>(kKind, s, dt, true));
      }
    }
    return out;
  }
  // add_scalar: inputs {x}, attribute c (required). outer_add, outer_mul_relu: inputs {x, y}.
  // row_scale_relu: inputs {x, y} or, with backward=true, {x, y, dz}. The [N1, N0] output (z or
  // dx) has row stride out_row_stride (default N0, contiguous).
  ProblemPtr make_problem(const std::vector<TensorView>& in, const Attrs& attrs) const override {
    const char* fam = family_name(kKind);
    if constexpr (kKind == BroadcastKind::kAddScalar) {
      attrs.expect_only(fam, {"c"});
      if (!attrs.values().count("c")) HK_THROW(kValue, fam, ": needs the attribute c (z = x + c)");
      if (in.size() != 1) HK_THROW(kValue, fam, ": takes 1 input (x), got ", in.size());
      return std::make_shared<BroadcastProblem>(checked_add_scalar(in[0], attrs.get_double(fam, "c", 0.0)));
    } else if constexpr (kKind == BroadcastKind::kRowScaleRelu) {
      attrs.expect_only(fam, {"backward", "out_row_stride"});
      bool bwd = attrs.get_bool(fam, "backward", false);
      const char* op = bwd ? "row_scale_relu_backward" : fam;
      if (in.size() != (bwd ? 3u : 2u))
        HK_THROW(kValue, op, ": takes ", bwd ? "3 inputs (x, y, dz)" : "2 inputs (x, y)", ", got ", in.size());
      auto p = std::make_shared<BroadcastProblem>(checked_row_scale(op, in[0], in[1], bwd ? &in[2] : nullptr));
      p->ld_z = rows::out_row_stride(op, attrs, p->n0());
      return p;
    } else {
      attrs.expect_only(fam, {"out_row_stride"});
      if (in.size() != 2) HK_THROW(kValue, fam, ": takes 2 inputs (x, y), got ", in.size());
      auto p = std::make_shared<BroadcastProblem>(checked_outer(kKind, in[0], in[1]));
      p->ld_z = rows::out_row_stride(fam, attrs, p->n0());
      return p;
    }
  }
};

HK_REGISTER_FAMILY(BroadcastFamily<BroadcastKind::kAddScalar>);
HK_REGISTER_FAMILY(BroadcastFamily<BroadcastKind::kOuterAdd>);
HK_REGISTER_FAMILY(BroadcastFamily<BroadcastKind::kOuterMulRelu>);
HK_REGISTER_FAMILY(BroadcastFamily<BroadcastKind::kRowScaleRelu>);

void dispatch(BroadcastProblem& p, const Operands& ops, std::initializer_list<const TensorView*> views,
              cudaStream_t stream) {
  p.align_bytes = rows::min_alignment(views);
  Registry::get().pick(p).run(p, ops, stream);
}

void outer(BroadcastKind kind, const TensorView& x, const TensorView& y, const TensorView& z, cudaStream_t stream) {
  BroadcastProblem p = checked_outer(kind, x, y);
  const rows::Layout lz = rows::check_matrix(family_name(kind), "z", z, x.dtype, p.n1(), p.n0());
  if (p.numel() == 0) return;
  p.ld_z = lz.ld;
  dispatch(p, Operands{{x, y}, {z}}, {&x, &y, &z}, stream);
}

}  // namespace

void add_scalar(const TensorView& x, double c, const TensorView& z, cudaStream_t stream) {
  const char* op = "add_scalar";
  BroadcastProblem p = checked_add_scalar(x, c);
  rows::check_dtype(op, "z", z, x.dtype);
  if (z.shape != x.shape)
    HK_THROW(kValue, op, ": z has shape [", shape_to_string(z.shape), "] but x has [", shape_to_string(x.shape), "]");
  if (!z.is_contiguous()) HK_THROW(kNotSupported, op, ": z must be contiguous, got ", z.describe());
  rows::check_data(op, "z", z);
  if (x.numel() == 0) return;
  dispatch(p, Operands{{x}, {z}}, {&x, &z}, stream);
}

void outer_add(const TensorView& x, const TensorView& y, const TensorView& z, cudaStream_t stream) {
  outer(BroadcastKind::kOuterAdd, x, y, z, stream);
}

void outer_mul_relu(const TensorView& x, const TensorView& y, const TensorView& z, cudaStream_t stream) {
  outer(BroadcastKind::kOuterMulRelu, x, y, z, stream);
}

void row_scale_relu(const TensorView& x, const TensorView& y, const TensorView& z, cudaStream_t stream) {
  const char* op = "row_scale_relu";
  BroadcastProblem p = checked_row_scale(op, x, y, nullptr);
  const rows::Layout lz = rows::check_matrix(op, "z", z, x.dtype, p.n1(), p.n0());
  if (p.numel() == 0) return;
  p.ld_z = lz.ld;
  dispatch(p, Operands{{x, y}, {z}}, {&x, &y, &z}, stream);
}

void row_scale_relu_backward(const TensorView& x, const TensorView& y, const TensorView& dz, const TensorView& dx,
                             const TensorView& dy, cudaStream_t stream) {
  const char* op = "row_scale_relu_backward";
  BroadcastProblem p = checked_row_scale(op, x, y, &dz);
  const rows::Layout ldx = rows::check_matrix(op, "dx", dx, x.dtype, p.n1(), p.n0());
  rows::check_vector(op, "dy", dy, x.dtype, p.n1());
  if (p.n1() == 0) return;
  if (p.n0() == 0) {  // dy sums zero columns
    HK_CHECK_CUDA(cudaMemsetAsync(dy.data, 0, static_cast<size_t>(p.n1() * esize(x.dtype)), stream));
    return;
  }
  p.ld_z = ldx.ld;
  dispatch(p, Operands{{x, y, dz}, {dx, dy}}, {&x, &y, &dz, &dx, &dy}, stream);
}

}  // namespace hk
