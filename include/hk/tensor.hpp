// hk/tensor.hpp — DType and the non-owning TensorView every op takes.
//
// A TensorView is (pointer, dtype, shape, strides in elements). Sizes and offsets are 64-bit:
// tensors past 2^31 elements are ordinary. Packed i4 stores two elements per byte; its shape
// counts elements and the innermost extent must be even.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace hk {

enum class DType : uint8_t { kF32, kF16, kBF16, kF8E4M3, kF8E5M2, kI32, kU8, kI4 };

std::string_view to_string(DType dtype);
// Parses "f32" / "float32", "f16" / "fp16" / "half", "bf16", "e4m3", "e5m2", "i32", "u8", "i4".
DType parse_dtype(std::string_view name);
// Size of one element in bits (4 for kI4).
int dtype_bits(DType dtype);
bool is_floating(DType dtype);

constexpr int kMaxRank = 8;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty means contiguous row-major

  TensorView() = default;
  // Views are non-owning and carry no constness: inputs and outputs are told apart by position.
  TensorView(const void* ptr, DType dt, std::vector<int64_t> shp, std::vector<int64_t> str = {});

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const;
  int64_t size(int dim) const;    // negative dims count from the end
  int64_t stride(int dim) const;  // negative dims count from the end
  bool is_contiguous() const;
  int64_t nbytes() const;  // bytes spanned by a contiguous tensor of this shape
  // Largest power of two (up to 256) that divides the base address.
  int alignment() const;
  std::string describe() const;  // "bf16[16384, 8192] strides [8192, 1]"
};

// Contiguous row-major strides for a shape.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
// "16384x8192" <-> {16384, 8192}
std::string shape_to_string(const std::vector<int64_t>& shape);
std::vector<int64_t> parse_shape(std::string_view text);

}  // namespace hk
