// common/row_layout.hpp — host side: how the row-wise families (row_sum, softmax) see a tensor.
//
// A tensor [..., cols] is viewed as [rows, cols] with a leading row stride `ld` >= cols: the
// last dimension must be contiguous and the leading dimensions must collapse into one stride
// (a batch of padded rows is fine; a transposed or interleaved view is not).
#pragma once

#include <cstdint>
#include <vector>

#include "hk/error.hpp"
#include "hk/tensor.hpp"

namespace hk {

struct RowLayout {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;  // elements between the starts of consecutive rows
  std::vector<int64_t> lead;  // the leading dimensions as given (rows is their product)
};

// The inverse of row_layout, for TensorSpecs: strides of a [lead..., cols] tensor whose rows
// start `ld` elements apart; empty (contiguous) when ld == cols.
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

// Throws kValue for rank 0 and kNotSupported for layouts that are not [rows, cols] with a
// leading stride; `op` and `name` name the operand in the message.
inline RowLayout row_layout(const char* op, const char* name, const TensorView& t) {
  if (t.rank() < 1) HK_THROW(kValue, op, ": ", name, " must have at least one dimension, got a scalar");
  RowLayout l;
  l.cols = t.size(-1);
  l.rows = 1;
  for (int d = 0; d + 1 < t.rank(); ++d) l.rows *= t.size(d);
  l.ld = l.cols;
  l.lead.assign(t.shape.begin(), t.shape.end() - 1);
  if (t.numel() == 0) return l;
  if (l.cols > 1 && t.stride(-1) != 1)
    HK_THROW(kNotSupported, op, ": ", name, " needs a contiguous last dimension, got ", t.describe());
  // The innermost leading dimension of extent > 1 gives the row stride; every outer one must
  // be that stride times the extents inside it.
  int64_t expect = -1;
  for (int d = t.rank() - 2; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (expect < 0) {
      l.ld = t.stride(d);
      expect = l.ld * t.size(d);
    } else {
      if (t.stride(d) != expect)
        HK_THROW(kNotSupported, op, ": ", name, " leading dimensions do not collapse into one row stride, got ",
                 t.describe());
      expect *= t.size(d);
    }
  }
  if (l.rows > 1 && l.ld < l.cols)
    HK_THROW(kNotSupported, op, ": ", name, " rows overlap (row stride ", l.ld, " < row length ", l.cols,
             "), got ", t.describe());
  return l;
}

}  // namespace hk
