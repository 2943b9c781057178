// hk/error.hpp — the one exception type of hopperkit and the checks that raise it.
//
// Every failure a caller can provoke is an hk::Error with a kind, so C++ callers can branch on
// it and the Python layer can map it (value -> ValueError, type -> TypeError, not_supported ->
// NotImplementedError, cuda -> RuntimeError). Messages name the op and the values received.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

namespace hk {

enum class ErrorKind {
  kValue,         // a value is out of range: shapes disagree, null pointer, negative size
  kType,          // a dtype the op does not take
  kNotSupported,  // valid input that this variant (or this build / device) cannot run
  kCuda,          // the CUDA runtime or a library reported an error
  kInternal,      // a bug in hopperkit itself (a dispatch naming a ladder-only rung)
};

std::string_view to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// Throws hk::Error(kCuda) naming `what` (the call) and where, if `status` is not cudaSuccess.
void check_cuda(cudaError_t status, const char* what, const char* file, int line);
// Checks the launch that just happened on this thread (cudaGetLastError), naming the kernel.
void check_launch(const char* kernel, const char* file, int line);

}  // namespace hk

#define HK_CHECK_CUDA(call) ::hk::check_cuda((call), #call, __FILE__, __LINE__)
#define HK_CHECK_LAUNCH(kernel_name) ::hk::check_launch((kernel_name), __FILE__, __LINE__)
// Raise a typed error: HK_THROW(kValue, "gelu: x has ", n, " elements but y has ", m)
#define HK_THROW(kind, ...) throw ::hk::Error(::hk::ErrorKind::kind, ::hk::detail::cat(__VA_ARGS__))

#include <charconv>
#include <type_traits>
namespace hk::detail {
// Builds messages without iostreams: std::to_chars needs no locale, so an error raised inside a
// host process with its own locale setup (Python with torch loaded) cannot trip over one.
template <class T>
void append(std::string& out, const T& v) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_same_v<U, char>) {
    out += v;
  } else if constexpr (std::is_arithmetic_v<U>) {
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, res.ptr);
  } else {
    out += v;  // std::string, std::string_view, const char*, string literals
  }
}
template <class... Ts>
std::string cat(const Ts&... parts) {
  std::string out;
  (append(out, parts), ...);
  return out;
}
}  // namespace hk::detail
