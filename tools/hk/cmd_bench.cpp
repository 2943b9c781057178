// hk bench — verify, then time, registered variants; no family = the quick suite (main job).
#include <fmt/format.h>

#include <signal.h>

#include <csignal>
#include <fstream>

#include "bench/bench.hpp"
#include "command.hpp"
#include "hk/hk.hpp"

namespace hk::cli {
namespace {

volatile std::sig_atomic_t g_stop = 0;  // the signal (SIGINT / SIGTERM) that asked to stop, or 0
extern "C" void on_stop_signal(int sig) { g_stop = sig; }

int cmd_bench(hk::bench::BenchRequest req, const std::string& json_path) {
  if (int rc = need_gpu("bench")) return rc;
  for (auto& f : req.families)
    if (!hk::Registry::get().family(f)) {
      fmt::print(stderr, "hk bench: no family named '{}' (see hk list)\n", f);
      return 1;
    }
  hk::Ceilings ceil = hk::measured_ceilings();
  // Each finished row goes to stderr at once: a run cut short (a time limit) keeps its rows.
  req.on_row = [&](const hk::bench::Row& r) {
    fmt::print(stderr, "\r\033[K{}", hk::bench::markdown_row(r, ceil.copy_bytes_per_s, ceil.bf16_flops_per_s));
  };
  // `timeout --signal=INT` (scripts/gpu-check.sh) or Ctrl-C: the rows measured so far still
  // reach the table and the JSON (the row in progress finishes first). The handler is one-shot
  // (SA_RESETHAND): a second signal stops the process at once.
  g_stop = 0;
  req.stop = [] { return g_stop != 0; };
  struct sigaction act {}, old_int {}, old_term {};
  act.sa_handler = on_stop_signal;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &act, &old_int);
  sigaction(SIGTERM, &act, &old_term);
  auto rows = hk::bench::run(req);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  const int stopped_by = g_stop;
  if (stopped_by) fmt::print(stderr, "\nhk bench: stopped by a signal after {} row(s); writing what was measured\n", rows.size());
  double setup_s = 0, check_s = 0, time_s = 0;
  for (auto& r : rows) setup_s += r.setup_s, check_s += r.check_s, time_s += r.time_s;
  fmt::print(stderr, "hk bench: host time {:.1f} s preparing problems, {:.1f} s running and verifying, {:.1f} s timing\n",
             setup_s, check_s, time_s);
  const hk::DeviceInfo& d = hk::device_info();
  fmt::print("hk bench on {} ({} SMs), L2 {}; copy ceiling {:.2f} TB/s, bf16 ceiling {:.0f} TFLOP/s (measured {})\n\n",
             d.name, d.sm_count, req.time.warm ? "warm" : "cold (flushed before every sample)",
             ceil.copy_bytes_per_s / 1e12, ceil.bf16_flops_per_s / 1e12, ceil.measured_at);
  fmt::print("{}", hk::bench::markdown(rows, ceil.copy_bytes_per_s, ceil.bf16_flops_per_s));
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    nlohmann::json j = hk::bench::to_json(rows, req);
    // The command that reproduces the run (what docs' results tables print).
    std::string command = "hk bench";
    for (auto& f : req.families) command += " " + f;
    if (!req.variant_glob.empty()) command += " --variant '" + req.variant_glob + "'";
    for (auto& s : req.select.shapes) command += " --shape " + s;
    if (!req.select.dtypes.empty()) {
      command += " --dtype ";
      for (size_t i = 0; i < req.select.dtypes.size(); ++i)
        command += (i ? "," : "") + std::string(hk::to_string(req.select.dtypes[i]));
    }
    if (req.time.warm) command += " --warm";
    if (req.time.spin_us != hk::bench::TimeOptions{}.spin_us) command += fmt::format(" --spin-us {:g}", req.time.spin_us);
    if (req.select.quick && !req.families.empty()) command += " --quick";
    if (req.test_problems) command += " --test-problems";
    command += fmt::format(" --budget-ms {:g}", req.time.budget_ms);
    j["command"] = command;
    j["stopped"] = stopped_by != 0;  // a run cut short by a signal: not every planned row is here
    out << j.dump(2) << "\n";
    if (!out) {
      fmt::print(stderr, "hk bench: cannot write {}\n", json_path);
      return 1;
    }
  }
  int failed = 0;
  for (auto& r : rows) failed += r.status.rfind("FAIL", 0) == 0;
  if (failed) fmt::print(stderr, "hk bench: {} row(s) FAILED verification\n", failed);
  if (stopped_by) return 128 + stopped_by;  // as the shell reports a process the signal ended
  return failed ? 1 : 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  static hk::bench::BenchRequest req;
  static std::string json_path, dtype_list;
  static std::vector<std::string> families;
  static std::vector<std::string> shapes;
  auto* cmd = app.add_subcommand("bench", "verify then time variants; no family = quick suite of every family");
  cmd->add_option("families", families, "families to benchmark (all variants); none = the quick suite");
  cmd->add_option("--variant", req.variant_glob, "only variants matching these globs, comma-separated (e.g. 'v0[23]*,v1*'); the baseline always runs");
  cmd->add_option("--shape", shapes, "problem shape(s), e.g. 16384x8192 (repeatable)");
  cmd->add_option("--dtype", dtype_list, "dtype(s), comma-separated: f32,f16,bf16");
  cmd->add_option("--json", json_path, "write the rows and the environment as JSON here");
  cmd->add_flag("--warm", req.time.warm, "keep L2 warm between samples (default: flushed)");
  cmd->add_flag("--quick", req.select.quick, "a few shapes per family: the public op (its dispatch) + baseline");
  cmd->add_flag("--test-problems", req.test_problems,
                "time the family's test problems (every shape the test suite checks) instead of its benchmark shapes");
  cmd->add_option("--budget-ms", req.time.budget_ms, "time budget per row after warm-up");
  cmd->add_option("--spin-us", req.time.spin_us,
                  "GPU spin before each sample, so the host's launch work stays out of it (0: none)");
  cmd->callback([] {
    if (req.test_problems && (families.empty() || !shapes.empty() || !dtype_list.empty() || req.select.quick))
      throw CLI::ValidationError("--test-problems", "takes one or more families, and no --shape, --dtype or --quick");
    if (families.empty()) req.select.quick = true;
    req.families = families;
    req.select.shapes = shapes;
    size_t pos = 0;
    while (!dtype_list.empty() && pos <= dtype_list.size()) {
      size_t end = dtype_list.find(',', pos);
      if (end == std::string::npos) end = dtype_list.size();
      req.select.dtypes.push_back(hk::parse_dtype(dtype_list.substr(pos, end - pos)));
      pos = end + 1;
    }
    exit_code() = cmd_bench(req, json_path);
  });
}

}  // namespace hk::cli
