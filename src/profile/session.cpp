#include "profile/session.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "bench/bench.hpp"
#include "profile/collector.hpp"

namespace hk::profile {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Owns the event pairs of the collected loop.
struct Events {
  std::vector<cudaEvent_t> ev;
  explicit Events(int pairs) : ev(2 * pairs, nullptr) {
    for (auto& e : ev) HK_CHECK_CUDA(cudaEventCreate(&e));
  }
  ~Events() {
    for (auto e : ev)
      if (e) cudaEventDestroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
};

}  // namespace

std::vector<std::string> VariantProfile::kernel_names() const {
  std::vector<const Row*> rows;
  for (const Row& r : summary.rows)
    if (r.kind == "kernel") rows.push_back(&r);
  std::sort(rows.begin(), rows.end(), [](const Row* a, const Row* b) { return a->first_start_ns < b->first_start_ns; });
  std::vector<std::string> out;
  for (const Row* r : rows) out.push_back(r->name);
  return out;
}

std::string variant_range(const Variant& v, const Problem& p) {
  return fmt::format("{}/{}/{}", v.family(), v.name(), p.key());
}

VariantProfile profile_variant(const Variant& v, bench::Case& c, const RunOptions& opt) {
  const Problem& p = c.problem();
  VariantProfile out;
  out.family = v.family();
  out.variant = v.name();
  out.problem = p.key();
  out.problem_bytes = p.bytes();
  if (std::string why = v.supports(p); !why.empty()) {
    out.status = "SKIP: " + why;
    return out;
  }
  bench::CheckResult chk = c.run_and_check(v);
  if (!chk.ok) {
    out.status = "FAIL: " + chk.message;
    return out;
  }
  const Operands ops = c.operands();
  cudaStream_t s = nullptr;
  for (int i = 0; i < opt.warmup; ++i) v.run(p, ops, s);
  HK_CHECK_CUDA(cudaStreamSynchronize(s));

  // Wall time before collecting: CUPTI's callbacks would bill their own cost to every API call.
  std::vector<double> wall;
  for (int i = 0; i < opt.iters; ++i) {
    if (!opt.warm_l2) bench::flush_l2(s);
    HK_CHECK_CUDA(cudaStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    v.run(p, ops, s);
    HK_CHECK_CUDA(cudaStreamSynchronize(s));
    wall.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  out.wall_median_us = median(wall);

  Events events(opt.iters);
  std::unique_ptr<Collector> collector = Collector::start(&out.collector_off);
  for (int i = 0; i < opt.iters; ++i) {
    if (!opt.warm_l2) bench::flush_l2(s);  // outside the variant's range: not in its rows
    HK_CHECK_CUDA(cudaEventRecord(events.ev[2 * i], s));
    v.run(p, ops, s);
    HK_CHECK_CUDA(cudaEventRecord(events.ev[2 * i + 1], s));
  }
  HK_CHECK_CUDA(cudaStreamSynchronize(s));
  std::vector<double> ev_us;
  for (int i = 0; i < opt.iters; ++i) {
    float ms = 0;
    HK_CHECK_CUDA(cudaEventElapsedTime(&ms, events.ev[2 * i], events.ev[2 * i + 1]));
    ev_us.push_back(1e3 * ms);
  }
  out.event_median_us = median(ev_us);
  out.ops = opt.iters;
  if (collector) out.summary = summarize(collector->stop(), current_device_limits(), variant_range(v, p));
  return out;
}

nlohmann::json to_json(const VariantProfile& vp) {
  nlohmann::json j = {{"op", vp.family},
                      {"variant", vp.variant},
                      {"problem", vp.problem},
                      {"status", vp.status},
                      {"problem_bytes", vp.problem_bytes}};
  if (vp.status != "ok") return j;
  j["wall_median_us"] = vp.wall_median_us;
  j["event_median_us"] = vp.event_median_us;
  j["ops"] = vp.ops;
  if (!vp.collector_off.empty()) {
    j["collector_off"] = vp.collector_off;
    return j;
  }
  j["kernels_per_op"] = vp.kernels_per_op();
  j["memops_per_op"] = vp.memops_per_op();
  j["gpu_us_per_op"] = vp.gpu_us_per_op();
  j["bytes_per_op"] = vp.bytes_per_op();
  j["summary"] = to_json(vp.summary);
  return j;
}

}  // namespace hk::profile
