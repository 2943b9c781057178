// profile/session.hpp — one variant on one problem under the collector: verify, warm up, time by
// the host clock, then collect. Shared by `hk profile` (tools/hk/cmd_profile.cpp) and the tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/case.hpp"
#include "hk/registry.hpp"
#include "profile/model.hpp"

namespace hk::profile {

struct RunOptions {
  int iters = 20;        // ops timed by the host clock, then as many again under the collector
  int warmup = 2;        // untimed ops after verification: module loading, allocator pools, clocks
  bool warm_l2 = false;  // default: flush the L2 before every op, as hk bench does
};

struct VariantProfile {
  std::string family, variant, problem;
  std::string status = "ok";   // "ok", "SKIP: <why not supported>" or "FAIL: <first mismatch>"
  std::string collector_off;   // why nothing was collected ("" when it was)
  int ops = 0;                 // ops run under the collector
  double problem_bytes = 0;    // Problem::bytes(): each input read once, each output written once
  Summary summary;             // the records issued inside this variant's range
  double event_median_us = 0;  // per op: CUDA events around each collected op (what hk bench times)
  double wall_median_us = 0;   // per op: host clock from launch to synchronize, nothing collected

  double kernels_per_op() const { return ops ? double(summary.kernels) / ops : 0.0; }
  double memops_per_op() const { return ops ? double(summary.memops) / ops : 0.0; }
  double gpu_us_per_op() const { return ops ? double(summary.gpu_ns) / 1e3 / ops : 0.0; }
  // The problem's minimum traffic plus the bytes its copies and memsets moved.
  double bytes_per_op() const { return problem_bytes + (ops ? double(summary.mem_bytes) / ops : 0.0); }
  // Distinct kernels (mangled names) in the order they first ran.
  std::vector<std::string> kernel_names() const;
};

// The range Variant::run opens around every launch: "family/variant/problem-key".
std::string variant_range(const Variant& v, const Problem& p);

// Verifies `v` on `c` (a failure or an unsupported problem ends it there), runs opt.warmup ops,
// times opt.iters ops by the host clock, then runs opt.iters ops under a Collector with CUDA
// events around each. Without a collector (another CUPTI client is attached) the ops still run,
// so an outside profiler sees the same work, and collector_off says why.
VariantProfile profile_variant(const Variant& v, bench::Case& c, const RunOptions& opt);

nlohmann::json to_json(const VariantProfile& vp);

}  // namespace hk::profile
