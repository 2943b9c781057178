// common/rows.hpp — host side of the row module: how the memory-bound families (softmax,
// rmsnorm, row_sum, weighted_sum, the broadcast ops; gemm's output row stride) see a [..., D]
// operand, and the typed validation of their public entry points (docs/design.md §9). The
// device side is common/rows.cuh.
//
// One convention: an operand is validated by a rows:: check that throws typed hk::Errors naming
// the op, the operand and the values received, and the kernels' view of it is a rows::Layout —
// rows of D contiguous elements whose starts lie `ld` elements apart. Two checks build it:
//   rows::layout        [..., D]: any rank >= 1 whose leading dims collapse into one row stride
//                       (softmax, row_sum);
//   rows::check_matrix  [R, D] of a given dtype and shape (rmsnorm, weighted_sum, row_scale_relu
//                       and the broadcast outputs), plus rows::check_vector for contiguous [n].
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "hk/error.hpp"
#include "hk/registry.hpp"
#include "hk/tensor.hpp"

namespace hk::rows {

// ---- layout ---------------------------------------------------------------------------------

// A [..., D] operand as the row kernels see it: `rows` rows of `cols` contiguous elements, row r
// starting at r * ld. ld is the stride of the innermost leading dim of extent > 1 (cols when
// there is none or the operand is empty: no row start is then stepped over).
struct Layout {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  std::vector<int64_t> lead;  // the leading dims as given (rows is their product)
  int align = 256;            // largest power of two (<= 256) dividing the base address, bytes
};

// The facts of `t` as a Layout, no checks (the checks below validate before relying on them).
inline Layout describe(const TensorView& t) {
  Layout l;
  l.cols = t.rank() > 0 ? t.size(-1) : 1;
  l.rows = 1;
  for (int d = 0; d + 1 < t.rank(); ++d) l.rows *= t.size(d);
  l.ld = l.cols;
  if (t.rank() > 0) l.lead.assign(t.shape.begin(), t.shape.end() - 1);
  l.align = t.alignment();
  if (t.numel() == 0) return l;
  for (int d = t.rank() - 2; d >= 0; --d)
    if (t.size(d) != 1) {
      l.ld = t.stride(d);
      break;
    }
  return l;
}

// Alignment the vectorized rungs see for row starts: the base alignment, lowered to what the
// row strides (in bytes) keep.
inline int row_alignment(int base_align, std::initializer_list<int64_t> ld_bytes) {
  int a = base_align;
  for (int64_t ld : ld_bytes)
    while (a > 1 && ld % a != 0) a /= 2;
  return a;
}

// The inverse of layout(), for TensorSpecs: strides of a [lead..., cols] tensor whose rows start
// `ld` elements apart; empty (contiguous) when ld == cols.
inline std::vector<int64_t> row_strides(const std::vector<int64_t>& lead, int64_t cols, int64_t ld) {
  if (ld == cols) return {};
  std::vector<int64_t> s(lead.size() + 1, 1);
  int64_t step = ld;
  for (size_t d = lead.size(); d-- > 0;) {
    s[d] = step;
    step *= lead[d];
  }
  return s;
}

// A [..., D] operand: rank >= 1 (kValue), a contiguous last dim when D > 1, leading dims that
// collapse into one row stride and rows that do not overlap (kNotSupported). Checks neither the
// dtype nor the pointer: the callers order those checks around it.
inline Layout layout(const char* op, const char* name, const TensorView& t) {
  if (t.rank() < 1) HK_THROW(kValue, op, ": ", name, " must have at least one dimension, got a scalar");
  const Layout l = describe(t);
  if (t.numel() == 0) return l;
  if (l.cols > 1 && t.stride(-1) != 1)
    HK_THROW(kNotSupported, op, ": ", name, " needs a contiguous last dimension, got ", t.describe());
  // Every leading dim of extent > 1 outside the innermost one must step over the extents inside it.
  int64_t expect = -1;
  for (int d = t.rank() - 2; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (expect >= 0 && t.stride(d) != expect)
      HK_THROW(kNotSupported, op, ": ", name, " leading dimensions do not collapse into one row stride, got ",
               t.describe());
    expect = (expect < 0 ? l.ld : expect) * t.size(d);
  }
  if (l.rows > 1 && l.ld < l.cols)
    HK_THROW(kNotSupported, op, ": ", name, " rows overlap (row stride ", l.ld, " < row length ", l.cols,
             "), got ", t.describe());
  return l;
}

// ---- typed checks ---------------------------------------------------------------------------

inline void check_float(const char* op, const char* name, const TensorView& t) {
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
    HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), ", expected f32, f16 or bf16");
}

inline void check_dtype(const char* op, const char* name, const TensorView& t, DType want) {
  if (t.dtype != want)
    HK_THROW(kType, op, ": ", name, " is ", to_string(t.dtype), ", expected ", to_string(want));
}

inline void check_data(const char* op, const char* name, const TensorView& t) {
  if (t.numel() > 0 && t.data == nullptr)
    HK_THROW(kValue, op, ": ", name, " is a null pointer with ", t.numel(), " elements");
}

// A non-empty operand whose base is not a multiple of its element size (kNotSupported).
inline void check_element_aligned(const char* op, const char* name, const TensorView& t) {
  const int esize = dtype_bits(t.dtype) / 8;
  if (t.numel() > 0 && t.alignment() < esize)
    HK_THROW(kNotSupported, op, ": ", name, " is not aligned to its ", esize, "-byte elements");
}

// A [rows, dim] operand: the dtype (kType), rank 2 of that shape (kValue), a unit last stride and
// a row stride >= dim (kNotSupported), a pointer (kValue). Its layout; ld is dim for one row.
inline Layout check_matrix(const char* op, const char* name, const TensorView& t, DType dtype, int64_t rows,
                           int64_t dim) {
  check_dtype(op, name, t, dtype);
  if (t.rank() != 2 || t.shape[0] != rows || t.shape[1] != dim)
    HK_THROW(kValue, op, ": ", name, " has shape [", shape_to_string(t.shape), "], expected [", rows, "x", dim,
             "]");
  if (t.numel() > 0 && (t.stride(1) != 1 || (rows > 1 && t.stride(0) < dim)))
    HK_THROW(kNotSupported, op, ": ", name, " needs a contiguous last dim and a row stride >= its length, got ",
             t.describe());
  check_data(op, name, t);
  Layout l = describe(t);
  if (rows > 1) l.ld = t.stride(0);  // an empty [rows, 0] keeps its given row stride
  return l;
}

// A contiguous [n] operand.
inline void check_vector(const char* op, const char* name, const TensorView& t, DType dtype, int64_t n) {
  check_dtype(op, name, t, dtype);
  if (t.rank() != 1 || t.shape[0] != n)
    HK_THROW(kValue, op, ": ", name, " has shape [", shape_to_string(t.shape), "], expected [", n, "]");
  if (n > 1 && t.stride(0) != 1) HK_THROW(kNotSupported, op, ": ", name, " must be contiguous, got ", t.describe());
  check_data(op, name, t);
}

inline int min_alignment(std::initializer_list<const TensorView*> views) {
  int a = 256;
  for (auto* v : views) a = std::min(a, v->alignment());
  return a;
}

// Family::make_problem sees only the inputs, so where the caller's output rows start is an
// attribute: out_row_stride, in elements (default dim: contiguous rows). Problem::attrs() sets it
// only when the rows are padded; the torch ops never do (they allocate contiguous outputs).
inline int64_t out_row_stride(const char* op, const Attrs& attrs, int64_t dim) {
  int64_t ld = attrs.get_int(op, "out_row_stride", dim);
  if (ld < dim) HK_THROW(kValue, op, ": out_row_stride must be at least the row length ", dim, ", got ", ld);
  return ld;
}
inline void set_out_row_stride(Attrs& attrs, int64_t ld, int64_t dim) {
  if (ld != dim) attrs.set("out_row_stride", ld);
}

// ---- tolerances and bench problems ----------------------------------------------------------

// Tolerance pieces shared by the row-wise families. out_rel: one rounding to the output dtype.
// acc_rel: the f32 error of an n-term sum relative to the sum's natural scale (sqrt(n) times a
// term for random-sign terms): a strided or tree sum grows its rounding error like sqrt(n)
// ulps, so tolerances scale with sqrt(length) (the docs/design.md §5 choice these families make).
inline double out_rel(DType dt) {
  switch (dt) {
    case DType::kF32: return 1e-5;
    case DType::kF16: return 1.0 / 1024;
    default: return 1.0 / 128;
  }
}
inline double acc_rel(int64_t n) { return 8.0 * std::sqrt(double(std::max<int64_t>(n, 1))) * 0x1p-24; }
// Absolute error allowed on a sum of n random-sign terms of size ~1: acc_rel(n) * sqrt(n).
inline double acc_abs(int64_t n) { return acc_rel(n) * std::sqrt(double(std::max<int64_t>(n, 1))); }

// Bench problems of the row families with a (rows, dim, dtype, backward) problem: ROWSxD shapes
// (default 16384x8192, plus 4x2^26 outside the quick suite), bf16 (and f32 outside the quick
// suite), forward (and backward outside the quick suite).
template <class ProblemT>
std::vector<ProblemPtr> row_bench_problems(const char* family, const BenchSelect& sel) {
  std::vector<std::vector<int64_t>> shapes;
  for (auto& s : sel.shapes) shapes.push_back(parse_shape(s));
  if (shapes.empty()) {
    shapes = {{16384, 8192}};
    if (!sel.quick) shapes.push_back({4, int64_t(1) << 26});
  }
  std::vector<DType> dtypes = sel.dtypes;
  if (dtypes.empty()) dtypes = sel.quick ? std::vector<DType>{DType::kBF16} : std::vector<DType>{DType::kBF16, DType::kF32};
  std::vector<ProblemPtr> out;
  for (auto& s : shapes) {
    if (s.size() != 2) HK_THROW(kValue, family, ": bench shape must be ROWSxD, got ", shape_to_string(s));
    for (DType dt : dtypes) {
      out.push_back(std::make_shared<ProblemT>(s[0], s[1], dt, false));
      if (!sel.quick) out.push_back(std::make_shared<ProblemT>(s[0], s[1], dt, true));
    }
  }
  return out;
}

}  // namespace hk::rows

// The pipelined row rungs (weighted_sum v03, softmax v05, rmsnorm v05; device side in
// common/rows.cuh): 256-thread blocks, a block per row, thread t holding 16-byte vectors
// t, t + 256, ... of every row, at most kMaxPer of them (two rows in flight plus a per-column
// slice fit the register budget).
namespace hk::pipelined_rows {

constexpr int kThreads = 256;
constexpr int kMaxPer = 8;
constexpr int64_t kMinRows = 512;
constexpr int64_t kMinVecs = 128;

// What a pipelined rung cannot run ("" when it can): rows of `cols` elements of `esize` bytes
// that are not whole 16-byte vectors (no tail code), or longer than 256 threads x kMaxPer
// vectors. `len` names the row length in the message ("D", "cols").
inline std::string refusal(int64_t esize, int64_t cols, const char* len) {
  if ((cols * esize) % 16 != 0)
    return "rows of " + std::to_string(cols) + " elements are not whole 16-byte vectors (" + len + " * " +
           std::to_string(esize) + " bytes must be a multiple of 16)";
  const int64_t max_cols = int64_t(kThreads) * kMaxPer * (16 / esize);
  if (cols > max_cols)
    return "rows of " + std::to_string(cols) + " elements do not fit in registers (at most " +
           std::to_string(max_cols) + ": 256 threads x 8 vectors of 16 bytes)";
  return "";
}

// Which shapes a pipelined rung suits (a dispatch rule, not a capability): more than kMinVecs
// 16-byte vectors per row (shorter rows leave most of a 256-thread block idle; warp-per-row
// rungs take them) and at least kMinRows rows (a block per row cannot fill the GPU with fewer).
inline bool suits(int64_t esize, int64_t rows, int64_t cols) {
  return cols * esize > 16 * kMinVecs && rows >= kMinRows;
}

}  // namespace hk::pipelined_rows
