// profile/collector.hpp — the CUPTI plumbing: collects kernel, memcpy and memset activity and
// attributes every record to the hopperkit ranges (core/trace.hpp) open when it was issued.
//
//   std::string why;
//   auto c = hk::profile::Collector::start(&why);   // nullptr + why when it cannot run
//   ... launch work ...
//   hk::profile::Trace t = c->stop();              // synchronizes the device and flushes
//   auto s = hk::profile::summarize(t, hk::profile::current_device_limits(), "gelu/*");
//
// One collector at a time per process. It refuses to start, with a message saying so, when
// another CUPTI client owns the process (ncu, nsys, compute-sanitizer, cuda-gdb) or activity
// tracing cannot be enabled; callers then run their work uncollected.
#pragma once

#include <memory>
#include <string>

#include "profile/model.hpp"

namespace hk::profile {

class Collector {
 public:
  static std::unique_ptr<Collector> start(std::string* why);
  ~Collector();  // stops (discarding the trace) if stop() was not called
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Waits for the device, flushes CUPTI's buffers, stops collecting; returns what was recorded.
  Trace stop();

 private:
  Collector() = default;
  bool running_ = true;
};

// The current device's limits, for occupancy_estimate. Needs a GPU.
DeviceLimits current_device_limits();

}  // namespace hk::profile
