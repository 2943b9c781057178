#include "core/trace.hpp"

namespace hk::trace {
namespace {

std::vector<std::string_view>& stack() noexcept {
  // Ranges nest a handful deep (op > variant > library call); reserve so pushes never allocate.
  thread_local std::vector<std::string_view> s = [] {
    std::vector<std::string_view> v;
    v.reserve(16);
    return v;
  }();
  return s;
}

}  // namespace

const std::vector<std::string_view>& open_ranges() noexcept { return stack(); }

namespace detail {
void push(std::string_view name) noexcept { stack().push_back(name); }
void pop() noexcept {
  auto& s = stack();
  if (!s.empty()) s.pop_back();
}
}  // namespace detail

}  // namespace hk::trace
