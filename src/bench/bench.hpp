// bench/bench.hpp — the benchmark harness behind `hk bench` (docs/design.md §6).
//
// verify-then-time: each (problem, variant) is first checked against the fp64 reference on
// fresh random inputs; a wrong variant's row says FAIL and is not timed. Timing uses CUDA events
// around each launch, warm-up first, median and interquartile spread over many samples, and a
// cold L2 before every sample (a read-only sweep of 3x L2: it evicts without leaving dirty lines
// whose write-back would be billed to the kernel). --warm skips the sweep. A short GPU spin
// before each start event keeps the host's launch work out of the sample (--spin-us).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hk/registry.hpp"

namespace hk::bench {

struct TimeOptions {
  bool warm = false;
  int max_samples = 100;
  double budget_ms = 1500;  // per (problem, variant), after warm-up
  // A GPU spin of this many microseconds queued before each sample's start event: the host's
  // work for the call (dispatch, tensor maps, several launches) overlaps it, so a sample is the
  // device's time for the op, as the Python benchmark times it. 0: no spin.
  double spin_us = 300;
};

struct Timing {
  double median_us = 0, min_us = 0, p25_us = 0, p75_us = 0;
  int samples = 0;
  double spread_pct() const { return median_us > 0 ? 100.0 * (p75_us - p25_us) / median_us : 0; }
};

// Evicts the L2 (a read-only sweep of 3x its size) on `stream`: what time_launches does before
// every cold sample, for other harnesses (hk profile) that time ops their own way.
void flush_l2(cudaStream_t stream);
// Times `launch` (one call = one op) under `opt`; cold L2 unless opt.warm.
Timing time_launches(const std::function<void(cudaStream_t)>& launch, const TimeOptions& opt);
// Times several launches (one problem's variants) under `opt`, their samples interleaved round
// by round, so drift in clocks or temperature over the run is shared by all of them.
std::vector<Timing> time_interleaved(const std::vector<std::function<void(cudaStream_t)>>& launches,
                                     const TimeOptions& opt);

struct Row {
  std::string family, variant, key, status;  // status: "ok", "FAIL: ...", "SKIP: ..."
  bool is_baseline = false;
  Timing t;
  double flops = 0, bytes = 0;
  double tflops() const { return t.median_us > 0 ? flops / (t.median_us * 1e-6) / 1e12 : 0; }
  double tbps() const { return t.median_us > 0 ? bytes / (t.median_us * 1e-6) / 1e12 : 0; }
  double speedup = 0;  // baseline median / this median (same problem, same run); 0 = n/a
  // Host wall time of the row: preparing the problem (inputs, first row of a problem only),
  // running + verifying the variant, and timing it. A bench run's length is mostly these.
  double setup_s = 0, check_s = 0, time_s = 0;
};

struct BenchRequest {
  std::vector<std::string> families;  // empty = all
  std::string variant_glob;           // empty = all (quick: the public op + baseline); "public" = the public op
  BenchSelect select;
  // Time the families' test problems (every shape and layout the test suite checks, odd ones
  // included) instead of their benchmark shapes: how the public op fares away from the shapes it
  // was tuned on. `select` is then not used.
  bool test_problems = false;
  TimeOptions time;
  bool progress = true;  // a progress line on stderr
  // Called with each finished row (hk bench prints it at once: a run cut short keeps its rows).
  std::function<void(const Row&)> on_row;
  // Asked before each row: true ends the run there, returning the rows so far (hk bench sets it
  // from SIGINT / SIGTERM, so a run stopped by a time limit still writes its JSON).
  std::function<bool()> stop;
};

std::vector<Row> run(const BenchRequest& req);
std::string markdown(const std::vector<Row>& rows, double copy_bw, double bf16_peak);
std::string markdown_row(const Row& row, double copy_bw, double bf16_peak);
nlohmann::json to_json(const std::vector<Row>& rows, const BenchRequest& req);
// GPU, clocks, driver, CUDA, git SHA, ceilings, date.
nlohmann::json environment_json();
bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace hk::bench
