#include "hk/error.hpp"

#include <fmt/format.h>

namespace hk {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kValue: return "value";
    case ErrorKind::kType: return "type";
    case ErrorKind::kNotSupported: return "not-supported";
    case ErrorKind::kCuda: return "cuda";
    case ErrorKind::kInternal: return "internal";
  }
  return "unknown";
}

Error::Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}

void check_cuda(cudaError_t status, const char* what, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw Error(ErrorKind::kCuda, fmt::format("{} failed: {} ({}) at {}:{}", what,
                                            cudaGetErrorString(status), cudaGetErrorName(status),
                                            file, line));
}

void check_launch(const char* kernel, const char* file, int line) {
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  throw Error(ErrorKind::kCuda, fmt::format("launch of {} failed: {} ({}) at {}:{}", kernel,
                                            cudaGetErrorString(status), cudaGetErrorName(status),
                                            file, line));
}

}  // namespace hk
