// hk microbench — the hardware experiments (microbench/*.cu), one table set per experiment.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>

#include "bench/bench.hpp"
#include "command.hpp"
#include "hk/hk.hpp"
#include "microbench/microbench.hpp"

namespace hk::cli {
namespace {

nlohmann::json clocks_json() {
  if (auto c = hk::current_clocks()) return {{"sm_mhz", c->sm_mhz}, {"mem_mhz", c->mem_mhz}};
  return nullptr;
}

int cmd_microbench(const std::vector<std::string>& names, const std::string& json_path, bool list,
                   const hk::mb::Options& opt) {
  std::vector<hk::mb::Experiment> chosen;
  for (auto& n : names) {
    const hk::mb::Experiment* e = hk::mb::find_experiment(n);
    if (!e) {
      fmt::print(stderr, "hk microbench: no experiment named '{}' (see hk microbench --list)\n", n);
      return 1;
    }
    chosen.push_back(*e);
  }
  if (names.empty()) chosen = hk::mb::experiments();
  if (list) {
    for (auto& e : chosen) fmt::print("{:<18} {}\n", e.name, e.summary);
    return 0;
  }
  if (int rc = need_gpu("microbench")) return rc;
  const hk::DeviceInfo& d = hk::device_info();
  fmt::print("hk microbench on {} ({} SMs, max SM clock {} MHz)\n", d.name, d.sm_count, d.max_sm_clock_mhz);
  nlohmann::json out = hk::bench::environment_json();
  out["kind"] = "hk-microbench";
  auto& arr = out["experiments"] = nlohmann::json::array();
  int failed = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto& e : chosen) {
    fmt::print("\n## {}: {}\n\n", e.name, e.summary);
    nlohmann::json j = {{"name", e.name}, {"summary", e.summary}, {"clocks_before", clocks_json()}};
    const auto t0 = std::chrono::steady_clock::now();
    try {
      hk::mb::Result r = e.run(opt);
      auto& tables = j["tables"] = nlohmann::json::array();
      for (auto& t : r.tables) {
        fmt::print("{}\n", hk::mb::markdown(t));
        tables.push_back(hk::mb::to_json(t));
      }
    } catch (const hk::Error& err) {
      ++failed;
      j["error"] = err.what();
      fmt::print("{} FAILED: {} error: {}\n", e.name, hk::to_string(err.kind()), err.what());
      cudaGetLastError();  // a launch-configuration error is not sticky; clear it for the next one
    } catch (const std::exception& err) {
      ++failed;
      j["error"] = err.what();
      fmt::print("{} FAILED: {}\n", e.name, err.what());
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    j["seconds"] = seconds;
    j["clocks_after"] = clocks_json();
    fmt::print("({} took {:.1f} s)\n", e.name, seconds);
    std::fflush(stdout);  // a table printed is a table kept, whatever the next experiment does
    arr.push_back(j);
  }
  fmt::print("\nhk microbench: {} experiment(s) in {:.1f} s, {} failed\n", chosen.size(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), failed);
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
    if (!f) {
      fmt::print(stderr, "hk microbench: cannot write {}\n", json_path);
      return 1;
    }
  }
  return failed ? 1 : 0;
}

}  // namespace

void add_microbench_command(CLI::App& app) {
  static std::vector<std::string> names;
  static std::string json_path;
  static bool list = false;
  static hk::mb::Options opt;
  auto* cmd = app.add_subcommand("microbench", "hardware experiments: coalescing, occupancy, banks, SFU, waves, "
                                               "memory paths, clusters, tensor cores");
  cmd->add_option("name", names, "experiment(s) to run; omit for all (see --list)");
  cmd->add_option("--json", json_path, "write every table and the environment as JSON here");
  cmd->add_flag("--list", list, "list the experiments and exit (needs no GPU)");
  cmd->add_option("--budget-ms", opt.budget_ms, "timing budget per measured point after warm-up");
  cmd->callback([] { exit_code() = cmd_microbench(names, json_path, list, opt); });
}

}  // namespace hk::cli
