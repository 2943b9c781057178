// core/trace.hpp — NVTX ranges around public ops and variant launches, plus the per-thread stack
// of open hopperkit ranges that `hk profile`'s collector reads at every launch.
//
// One line at the top of a public op:   HK_TRACE_RANGE("hk::gelu");
// A range whose name is built at run time (Variant::run): hk::trace::Range r{name};
//
// Both cost a few nanoseconds when no tool is attached (NVTX calls through a null function
// pointer, a push on a thread-local vector), so they stay on in release builds. Fixed names are
// NVTX strings registered once per call site, in the "hopperkit" NVTX domain (ncu/nsys filter:
// `hopperkit@hk::gelu`). The thread-local stack is what lets the collector attribute each kernel
// to its range without NVTX injection (src/profile/collector.cpp explains why).
#pragma once

#include <nvtx3/nvtx3.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace hk::trace {

struct Domain {
  static constexpr const char* name{"hopperkit"};
};

// Names of the hopperkit ranges open on the calling thread, outermost first. Each view stays
// valid while its range is open.
const std::vector<std::string_view>& open_ranges() noexcept;

namespace detail {
void push(std::string_view name) noexcept;
void pop() noexcept;
}  // namespace detail

// A range with a name fixed at compile time; use HK_TRACE_RANGE, which registers the string once.
class StaticRange {
 public:
  StaticRange(const nvtx3::event_attributes& attr, std::string_view name) noexcept : nvtx_{attr} {
    detail::push(name);
  }
  ~StaticRange() { detail::pop(); }
  StaticRange(const StaticRange&) = delete;
  StaticRange& operator=(const StaticRange&) = delete;

 private:
  nvtx3::scoped_range_in<Domain> nvtx_;
};

// A range whose name is built at run time ("gelu/v03_vectorized/16384x8192_bf16_tanh_fwd"). Not
// movable: the thread's stack holds a view of name_.
class Range {
 public:
  explicit Range(std::string name) noexcept : name_(std::move(name)), nvtx_{name_} { detail::push(name_); }
  ~Range() { detail::pop(); }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  std::string name_;
  nvtx3::scoped_range_in<Domain> nvtx_;  // after name_: its message points into name_
};

}  // namespace hk::trace

#define HK_TRACE_CAT_INNER(a, b) a##b
#define HK_TRACE_CAT(a, b) HK_TRACE_CAT_INNER(a, b)
// A range named by a string literal for the rest of the enclosing scope.
#define HK_TRACE_RANGE(literal)                                                 \
  static const ::nvtx3::registered_string_in<::hk::trace::Domain> HK_TRACE_CAT( \
      hk_trace_str_, __LINE__){literal};                                        \
  static const ::nvtx3::event_attributes HK_TRACE_CAT(hk_trace_attr_, __LINE__){ \
      HK_TRACE_CAT(hk_trace_str_, __LINE__)};                                   \
  const ::hk::trace::StaticRange HK_TRACE_CAT(hk_trace_range_, __LINE__){       \
      HK_TRACE_CAT(hk_trace_attr_, __LINE__), literal}
