#include "hk/tensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "hk/error.hpp"

namespace hk {

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF8E4M3: return "e4m3";
    case DType::kF8E5M2: return "e5m2";
    case DType::kI32: return "i32";
    case DType::kU8: return "u8";
    case DType::kI4: return "i4";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "f32" || s == "fp32" || s == "float32" || s == "float") return DType::kF32;
  if (s == "f16" || s == "fp16" || s == "float16" || s == "half") return DType::kF16;
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  if (s == "e4m3" || s == "f8e4m3" || s == "fp8e4m3" || s == "float8_e4m3fn") return DType::kF8E4M3;
  if (s == "e5m2" || s == "f8e5m2" || s == "fp8e5m2" || s == "float8_e5m2") return DType::kF8E5M2;
  if (s == "i32" || s == "int32") return DType::kI32;
  if (s == "u8" || s == "uint8") return DType::kU8;
  if (s == "i4" || s == "int4") return DType::kI4;
  HK_THROW(kValue, "unknown dtype '", name, "' (expected f32, f16, bf16, e4m3, e5m2, i32, u8, i4)");
}

int dtype_bits(DType dtype) {
  switch (dtype) {
    case DType::kF32: case DType::kI32: return 32;
    case DType::kF16: case DType::kBF16: return 16;
    case DType::kF8E4M3: case DType::kF8E5M2: case DType::kU8: return 8;
    case DType::kI4: return 4;
  }
  return 0;
}

bool is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
         dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

static void check_view(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  if (shape.size() > static_cast<size_t>(kMaxRank))
    HK_THROW(kValue, "TensorView: rank ", shape.size(), " exceeds ", kMaxRank);
  for (int64_t d : shape)
    if (d < 0) HK_THROW(kValue, "TensorView: negative extent in shape [", fmt::format("{}", fmt::join(shape, ", ")), "]");
  if (!strides.empty() && strides.size() != shape.size())
    HK_THROW(kValue, "TensorView: ", strides.size(), " strides for rank ", shape.size());
}

TensorView::TensorView(const void* ptr, DType dt, std::vector<int64_t> shp, std::vector<int64_t> str)
    : data(const_cast<void*>(ptr)), dtype(dt), shape(std::move(shp)), strides(std::move(str)) {
  check_view(shape, strides);
  if (strides.empty()) strides = contiguous_strides(shape);
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

static int wrap_dim(int dim, int rank) {
  int d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) HK_THROW(kValue, "TensorView: dim ", dim, " out of range for rank ", rank);
  return d;
}

int64_t TensorView::size(int dim) const { return shape[wrap_dim(dim, rank())]; }

int64_t TensorView::stride(int dim) const {
  int d = wrap_dim(dim, rank());
  return strides.empty() ? contiguous_strides(shape)[d] : strides[d];
}

bool TensorView::is_contiguous() const {
  if (strides.empty()) return true;
  int64_t expect = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

int64_t TensorView::nbytes() const { return (numel() * dtype_bits(dtype) + 7) / 8; }

int TensorView::alignment() const {
  auto addr = reinterpret_cast<uintptr_t>(data);
  if (addr == 0) return 256;
  int a = 1;
  while (a < 256 && (addr % (2 * a)) == 0) a *= 2;
  return a;
}

std::string TensorView::describe() const {
  return fmt::format("{}[{}] strides [{}]", to_string(dtype), fmt::join(shape, ", "),
                     fmt::join(strides.empty() ? contiguous_strides(shape) : strides, ", "));
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  return fmt::format("{}", fmt::join(shape, "x"));
}

std::vector<int64_t> parse_shape(std::string_view text) {
  std::vector<int64_t> shape;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find_first_of("x,", pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view part = text.substr(pos, end - pos);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || p != part.data() + part.size() || v < 0)
      HK_THROW(kValue, "cannot parse shape '", text, "' (expected e.g. 16384x8192)");
    shape.push_back(v);
    pos = end + 1;
  }
  return shape;
}

}  // namespace hk
