// hk profile — which kernels ran, how many, how long, what share: per-variant tables from the
// CUPTI collector (src/profile/), `compare` (one row per variant), and `--ncu` (the Nsight
// Compute command line that profiles one variant through this very command).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>

#include "bench/bench.hpp"
#include "bench/case.hpp"
#include "command.hpp"
#include "hk/hk.hpp"
#include "profile/session.hpp"

namespace hk::cli {
namespace {

struct Options {
  std::string family, variant_glob, problem_glob, json_path, dtype_list;
  std::vector<std::string> shapes;
  hk::profile::RunOptions run;
  bool ncu = false;
};

void add_common(CLI::App* cmd, Options& o) {
  cmd->add_option("family", o.family, "the family to profile (see hk list)");
  cmd->add_option("--variant", o.variant_glob,
                  "only variants matching this glob (e.g. 'v0[13]*'); 'public': what the family's dispatch "
                  "chooses for the selected problems");
  cmd->add_option("--shape", o.shapes, "problem shape(s), e.g. 16384x8192 (repeatable)");
  cmd->add_option("--dtype", o.dtype_list, "dtype(s), comma-separated: f32,f16,bf16");
  cmd->add_option("--problem", o.problem_glob,
                  "problem keys matching this glob, from the family's full bench list (default: its quick list)");
  cmd->add_option("--iters", o.run.iters, "ops per variant under the collector (and as many timed by the host clock)")
      ->check(CLI::Range(1, 100000));
  cmd->add_flag("--warm", o.run.warm_l2, "keep L2 warm between ops (default: flushed before each, as hk bench)");
  cmd->add_option("--json", o.json_path, "write the results as JSON here");
}

std::vector<hk::DType> parse_dtypes(const std::string& list) {
  std::vector<hk::DType> out;
  size_t pos = 0;
  while (!list.empty() && pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    out.push_back(hk::parse_dtype(list.substr(pos, end - pos)));
    pos = end + 1;
  }
  return out;
}

// What a run profiles: the family's quick bench problems, or its full list filtered by --problem.
struct Plan {
  const hk::Family* family = nullptr;
  std::vector<hk::ProblemPtr> problems;
  std::vector<const hk::Variant*> variants;
};

// Fills `plan`; on a bad selection prints why and returns non-zero.
int make_plan(const char* cmd, const Options& o, Plan& plan) {
  if (o.family.empty()) {
    fmt::print(stderr, "hk {}: name a family (see hk list)\n", cmd);
    return 1;
  }
  plan.family = hk::Registry::get().family(o.family);
  if (!plan.family) {
    fmt::print(stderr, "hk {}: no family named '{}' (see hk list)\n", cmd, o.family);
    return 1;
  }
  hk::BenchSelect sel;
  sel.shapes = o.shapes;
  sel.dtypes = parse_dtypes(o.dtype_list);
  sel.quick = o.problem_glob.empty();
  for (auto& p : plan.family->bench_problems(sel))
    if (o.problem_glob.empty() || hk::bench::glob_match(o.problem_glob, p->key())) plan.problems.push_back(p);
  for (const hk::Variant* v : hk::Registry::get().variants(o.family))
    if (o.variant_glob.empty() || hk::bench::glob_match(o.variant_glob, v->name())) plan.variants.push_back(v);
  if (plan.problems.empty()) {
    fmt::print(stderr, "hk {}: no {} bench problem matches --problem '{}'\n", cmd, o.family, o.problem_glob);
    return 1;
  }
  // "public", as in hk bench: the variant the public op runs (the family's dispatch) for each
  // selected problem.
  if (!o.variant_glob.empty() && hk::bench::glob_match(o.variant_glob, "public")) {
    for (auto& p : plan.problems) {
      const hk::Variant* chosen = nullptr;
      try {
        chosen = hk::Registry::get().choose(*p).variant;
      } catch (const hk::Error& e) {
        fmt::print(stderr, "hk {}: the {} dispatch serves no variant for {}: {}\n", cmd, o.family, p->key(), e.what());
        return 1;
      }
      if (std::find(plan.variants.begin(), plan.variants.end(), chosen) == plan.variants.end())
        plan.variants.push_back(chosen);
    }
  }
  if (plan.variants.empty()) {
    fmt::print(stderr, "hk {}: no {} variant matches --variant '{}'\n", cmd, o.family, o.variant_glob);
    return 1;
  }
  return 0;
}

uint64_t fresh_seed() { return static_cast<uint64_t>(std::time(nullptr)); }

// Runs every selected variant on every selected problem; `each` sees the results as they come.
template <class Fn>
std::vector<hk::profile::VariantProfile> run_plan(const Plan& plan, const Options& o, Fn&& each) {
  std::vector<hk::profile::VariantProfile> out;
  uint64_t seed = fresh_seed();
  bool told = false;
  for (auto& p : plan.problems) {
    hk::bench::Case c(p, ++seed);
    for (const hk::Variant* v : plan.variants) {
      out.push_back(hk::profile::profile_variant(*v, c, o.run));
      const auto& vp = out.back();
      if (!vp.collector_off.empty() && !told) {
        fmt::print(stderr, "hk profile: collector off: {}. The ops still run (for the tool attached); no tables.\n",
                   vp.collector_off);
        told = true;
      }
      each(vp);
    }
  }
  return out;
}

int failures(const std::vector<hk::profile::VariantProfile>& runs) {
  int n = 0;
  for (auto& vp : runs) n += vp.status.rfind("FAIL", 0) == 0;
  if (n) fmt::print(stderr, "hk profile: {} variant(s) FAILED verification\n", n);
  return n;
}

int write_json(const std::string& path, const char* kind, const Options& o,
               const std::vector<hk::profile::VariantProfile>& runs) {
  if (path.empty()) return 0;
  nlohmann::json j = hk::bench::environment_json();
  j["kind"] = kind;
  j["options"] = {{"family", o.family},   {"variant", o.variant_glob}, {"problem", o.problem_glob},
                  {"iters", o.run.iters}, {"warmup", o.run.warmup},    {"warm_l2", o.run.warm_l2}};
  auto& arr = j["runs"] = nlohmann::json::array();
  for (auto& vp : runs) arr.push_back(hk::profile::to_json(vp));
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) {
    fmt::print(stderr, "hk profile: cannot write {}\n", path);
    return 1;
  }
  return 0;
}

int cmd_profile(const Options& o) {
  if (int rc = need_gpu("profile")) return rc;
  Plan plan;
  if (int rc = make_plan("profile", o, plan)) return rc;
  const hk::DeviceInfo& d = hk::device_info();
  fmt::print("hk profile on {} ({} SMs): {} ops per variant under CUPTI, L2 {}\n", d.name, d.sm_count, o.run.iters,
             o.run.warm_l2 ? "warm" : "flushed before every op");
  auto runs = run_plan(plan, o, [](const hk::profile::VariantProfile& vp) {
    fmt::print("\n{}/{} on {}", vp.family, vp.variant, vp.problem);
    if (vp.status != "ok") {
      fmt::print(": {}\n", vp.status);
      return;
    }
    fmt::print(": per op {:.2f} µs wall, {:.2f} µs between events", vp.wall_median_us, vp.event_median_us);
    if (!vp.collector_off.empty()) {
      fmt::print("\n");
      return;
    }
    fmt::print(", {:.2f} µs GPU in {:.2f} kernels and {:.2f} copies/memsets ({} ops)\n", vp.gpu_us_per_op(),
               vp.kernels_per_op(), vp.memops_per_op(), vp.ops);
    fmt::print("{}", hk::profile::format_table(vp.summary));
  });
  int rc = write_json(o.json_path, "hk-profile", o, runs);
  return failures(runs) ? 1 : rc;
}

int cmd_compare(const Options& o) {
  if (int rc = need_gpu("profile compare")) return rc;
  Plan plan;
  if (int rc = make_plan("profile compare", o, plan)) return rc;
  auto runs = run_plan(plan, o, [](const hk::profile::VariantProfile&) {});
  const hk::DeviceInfo& d = hk::device_info();
  fmt::print("hk profile compare on {}: per op, median of {} ops; bytes = the problem's minimum traffic plus "
             "copies/memsets seen\n",
             d.name, o.run.iters);
  std::string key;
  for (auto& vp : runs) {
    if (vp.problem != key) {
      key = vp.problem;
      fmt::print("\n{} {}\n\n| variant | kernels/op | distinct kernels | copies+memsets/op | MB/op | GPU µs/op | "
                 "events µs/op | wall µs/op |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
                 vp.family, key);
    }
    if (vp.status != "ok") {
      fmt::print("| {} | {} | | | | | | |\n", vp.variant, vp.status);
    } else if (!vp.collector_off.empty()) {
      fmt::print("| {} | n/a | n/a | n/a | {:.1f} | n/a | {:.2f} | {:.2f} |\n", vp.variant, vp.problem_bytes / 1e6,
                 vp.event_median_us, vp.wall_median_us);
    } else {
      fmt::print("| {} | {:.2f} | {} | {:.2f} | {:.1f} | {:.2f} | {:.2f} | {:.2f} |\n", vp.variant, vp.kernels_per_op(),
                 vp.kernel_names().size(), vp.memops_per_op(), vp.bytes_per_op() / 1e6, vp.gpu_us_per_op(),
                 vp.event_median_us, vp.wall_median_us);
    }
  }
  int rc = write_json(o.json_path, "hk-profile-compare", o, runs);
  return failures(runs) ? 1 : rc;
}

// ---- --ncu ---------------------------------------------------------------------------------

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string self_path() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("hk");
}

bool on_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  size_t pos = 0;
  while (pos <= p.size()) {
    size_t end = p.find(':', pos);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(pos, end - pos);
    if (!dir.empty() && access((dir + "/" + exe).c_str(), X_OK) == 0) return true;
    pos = end + 1;
  }
  return false;
}

int cmd_ncu(Options o) {
  if (int rc = need_gpu("profile --ncu")) return rc;
  Plan plan;
  if (int rc = make_plan("profile --ncu", o, plan)) return rc;
  if (plan.variants.size() != 1) {
    std::string names;
    for (auto* v : plan.variants) names += " " + v->name();
    fmt::print(stderr, "hk profile --ncu: --variant must select one variant; '{}' selects:{}\n", o.variant_glob, names);
    return 1;
  }
  const hk::Variant& v = *plan.variants.front();
  const hk::ProblemPtr& p = plan.problems.front();
  if (plan.problems.size() > 1)
    fmt::print(stderr, "hk profile --ncu: {} problems selected; profiling the first, {} (choose with --problem)\n",
               plan.problems.size(), p->key());

  // First pass under CUPTI: which kernels one op launches, and how many.
  hk::bench::Case c(p, fresh_seed());
  hk::profile::RunOptions first = o.run;
  first.iters = 1;
  hk::profile::VariantProfile vp = hk::profile::profile_variant(v, c, first);
  if (vp.status != "ok") {
    fmt::print(stderr, "hk profile --ncu: {}/{} on {}: {}\n", v.family(), v.name(), p->key(), vp.status);
    return 1;
  }
  if (!vp.collector_off.empty()) {
    fmt::print(stderr, "hk profile --ncu: the first pass needs the collector to find the kernel names: {}\n",
               vp.collector_off);
    return 1;
  }
  std::set<std::string> seen;
  std::string regex;
  for (const std::string& name : vp.kernel_names()) {
    std::string base = hk::profile::base_name(hk::profile::demangle(name));
    if (seen.insert(base).second) regex += (regex.empty() ? "" : "|") + base;
  }
  const int64_t per_op = vp.summary.kernels;  // one op ran in the first pass
  if (per_op == 0) {
    fmt::print(stderr, "hk profile --ncu: {}/{} launched no kernel on {}\n", v.family(), v.name(), p->key());
    return 1;
  }

  // The target: this command, one variant, one problem, one op after verification and warm-up;
  // skip the verification's and the warm-up's kernels, profile the next op's.
  std::vector<std::string> target = {self_path(), "profile", o.family, "--variant", v.name(), "--problem", p->key(),
                                     "--iters", "1"};
  for (auto& s : o.shapes) target.insert(target.end(), {"--shape", s});
  if (!o.dtype_list.empty()) target.insert(target.end(), {"--dtype", o.dtype_list});
  if (o.run.warm_l2) target.push_back("--warm");
  std::vector<std::string> cmd = {"ncu", "--clock-control", "none", "--set", "full", "-k", "regex:" + regex,
                                  "--launch-skip", std::to_string(per_op * (1 + o.run.warmup)), "--launch-count",
                                  std::to_string(per_op)};
  cmd.insert(cmd.end(), target.begin(), target.end());
  std::string line;
  for (auto& a : cmd) line += (line.empty() ? "" : " ") + shell_quote(a);
  fmt::print("{}/{} on {}: {} kernel launch(es) per op ({})\n{}\n", v.family(), v.name(), p->key(), per_op, regex, line);
  if (!on_path("ncu")) {
    fmt::print(stderr, "hk profile --ncu: ncu is not on PATH; run the line above where Nsight Compute is installed\n");
    return 0;
  }
  std::fflush(stdout);
  int status = std::system(line.c_str());
  return status == 0 ? 0 : 1;
}

}  // namespace

void add_profile_command(CLI::App& app) {
  static Options opt, cmp;
  auto* cmd = app.add_subcommand("profile", "per-kernel tables from CUPTI: calls, time, share, launch config");
  add_common(cmd, opt);
  cmd->add_flag("--ncu", opt.ncu, "print (and run, when ncu is on PATH) the Nsight Compute command for one variant");
  auto* compare = cmd->add_subcommand("compare", "one row per variant: kernels, bytes and time per op");
  add_common(compare, cmp);
  cmd->require_subcommand(0, 1);
  compare->callback([] { exit_code() = cmd_compare(cmp); });
  cmd->callback([compare] {
    if (compare->parsed()) return;
    exit_code() = opt.ncu ? cmd_ncu(opt) : cmd_profile(opt);
  });
}

}  // namespace hk::cli
