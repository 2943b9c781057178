#include "bench/bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <utility>

#include "bench/case.hpp"
#include "hk/device.hpp"
#include "hk_version.hpp"

namespace hk::bench {

// One bracket class "[...]" at pat[p] ('[' included): whether it matches c, and where it ends.
// "[!...]" negates; "a-z" is a range. An unclosed '[' is an ordinary character.
static bool class_match(std::string_view pat, size_t p, char c, size_t& end) {
  size_t q = p + 1;
  bool negate = q < pat.size() && pat[q] == '!';
  if (negate) ++q;
  bool hit = false;
  for (size_t first = q; q < pat.size() && (pat[q] != ']' || q == first); ++q) {
    if (q + 2 < pat.size() && pat[q + 1] == '-' && pat[q + 2] != ']') {
      hit |= pat[q] <= c && c <= pat[q + 2];
      q += 2;
    } else {
      hit |= pat[q] == c;
    }
  }
  if (q >= pat.size()) {  // unclosed: a literal '['
    end = p + 1;
    return c == '[';
  }
  end = q + 1;
  return hit != negate;
}

bool glob_match(std::string_view pat, std::string_view s) {
  // '*', '?' and '[...]' classes (as in the shell); iterative, backtracking to the last star.
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < s.size()) {
    size_t next = 0;
    if (p < pat.size() && pat[p] == '*') { star = p++; mark = t; continue; }
    if (p < pat.size() && (pat[p] == '?' || (pat[p] == '[' ? class_match(pat, p, s[t], next) : pat[p] == s[t]))) {
      p = next ? next : p + 1;
      ++t;
    } else if (star != std::string_view::npos) { p = star + 1; t = ++mark; }
    else return false;
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

static bool any_glob(const std::string& globs, std::string_view name) {
  size_t pos = 0;
  while (pos <= globs.size()) {
    size_t end = globs.find(',', pos);
    if (end == std::string::npos) end = globs.size();
    if (glob_match(std::string_view(globs).substr(pos, end - pos), name)) return true;
    pos = end + 1;
  }
  return false;
}

static std::vector<const Variant*> selected(const Family& f, const BenchRequest& req) {
  std::vector<const Variant*> out;
  for (const Variant* v : Registry::get().variants(f.name())) {
    bool take;
    if (!req.variant_glob.empty()) take = any_glob(req.variant_glob, v->name());
    else if (req.select.quick) take = false;  // the quick suite: the public op and the baseline
    else take = true;
    if (take || v->is(kFlagBaseline)) out.push_back(v);  // the baseline always runs: speedup column
  }
  return out;
}

std::vector<Row> run(const BenchRequest& req) {
  std::vector<const Family*> fams;
  for (const Family* f : Registry::get().families())
    if (req.families.empty() || std::find(req.families.begin(), req.families.end(), f->name()) != req.families.end())
      fams.push_back(f);
  // Count the work for the progress line.
  size_t total = 0, done = 0;
  std::vector<std::pair<const Family*, std::vector<ProblemPtr>>> plan;
  for (const Family* f : fams) {
    auto probs = req.test_problems ? f->test_problems() : f->bench_problems(req.select);
    total += probs.size() * (selected(*f, req).size() + 1);
    plan.emplace_back(f, std::move(probs));
  }
  std::vector<Row> rows;
  uint64_t seed = static_cast<uint64_t>(std::time(nullptr));
  for (auto& [f, probs] : plan) {
    auto vars = selected(*f, req);
    using Clock = std::chrono::steady_clock;
    auto seconds_since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    for (auto& p : probs) {
      if (req.stop && req.stop()) break;
      const auto t_setup = Clock::now();
      Case c(p, ++seed);
      double setup_s = seconds_since(t_setup);
      size_t first_row = rows.size();
      // Every variant is checked first; those that pass are then timed together, their samples
      // interleaved (time_interleaved), so the speedup column compares rows measured under the
      // same clocks rather than one after the other.
      std::vector<size_t> timed;
      std::vector<std::function<void(cudaStream_t)>> launches;
      // The public op first: what hk::<op> runs for this problem (the family's dispatch), timed
      // like any variant, so the quick suite measures what users get.
      struct Entry {
        const Variant* v;
        std::string label;
      };
      std::vector<Entry> entries;
      if (req.variant_glob.empty() || any_glob(req.variant_glob, "public")) {
        const Variant* chosen = nullptr;
        try {
          chosen = Registry::get().choose(*p).variant;
        } catch (const Error& e) {
          rows.push_back(Row{f->name(), "public", p->key(), std::string("FAIL: ") + e.what(), false, {}, p->flops(), p->bytes()});
        }
        if (chosen) entries.push_back({chosen, "public:" + chosen->name()});
      }
      for (const Variant* v : vars) entries.push_back({v, v->name()});
      for (const Entry& e : entries) {
        const Variant* v = e.v;
        if (req.stop && req.stop()) break;
        ++done;
        if (req.progress)
          std::fprintf(stderr, "\r[%zu/%zu] %s/%s %s\033[K", done, total, f->name().c_str(),
                       e.label.c_str(), p->key().c_str());
        const bool baseline_row = v->is(kFlagBaseline) && e.label == v->name();
        Row r{f->name(), e.label, p->key(), "ok", baseline_row, {}, p->flops(), p->bytes()};
        std::string why = v->supports(*p);
        if (!why.empty()) {
          r.status = "SKIP: " + why;
        } else {
          r.setup_s = std::exchange(setup_s, 0.0);
          const auto t_check = Clock::now();
          CheckResult chk = c.run_and_check(*v);
          r.check_s = seconds_since(t_check);
          if (!chk.ok) {
            r.status = "FAIL: " + chk.message;
          } else {
            timed.push_back(rows.size());
            launches.push_back([v, &p, &c](cudaStream_t s) { v->run(*p, c.operands(), s); });
          }
        }
        rows.push_back(r);
      }
      if (!launches.empty()) {
        const auto t_time = Clock::now();
        std::vector<Timing> ts = time_interleaved(launches, req.time);
        const double time_s = seconds_since(t_time);
        double weight = 0;  // each row's share of the timing wall time: its samples x median
        for (size_t i = 0; i < timed.size(); ++i) weight += ts[i].samples * ts[i].median_us;
        for (size_t i = 0; i < timed.size(); ++i) {
          Row& r = rows[timed[i]];
          r.t = ts[i];
          r.time_s = weight > 0 ? time_s * ts[i].samples * ts[i].median_us / weight : 0;
        }
      }
      double base_us = 0;
      for (size_t i = first_row; i < rows.size(); ++i)
        if (rows[i].is_baseline && rows[i].status == "ok") base_us = rows[i].t.median_us;
      for (size_t i = first_row; i < rows.size(); ++i) {
        if (base_us > 0 && rows[i].status == "ok") rows[i].speedup = base_us / rows[i].t.median_us;
        if (req.on_row) req.on_row(rows[i]);
      }
    }
  }
  if (req.progress) std::fprintf(stderr, "\r\033[K");
  return rows;
}

std::string markdown_row(const Row& r, double copy_bw, double bf16_peak) {
  if (r.status != "ok") return fmt::format("| {} | {} | {} | {} | | | | | | |\n", r.family, r.variant, r.key, r.status);
  return fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.2f} | {:.3f} | {:.1f} | {:.2f} | {} |\n", r.family,
                     r.variant, r.key, r.t.median_us, r.t.spread_pct(), r.tflops(), r.tbps(),
                     copy_bw > 0 ? 100.0 * r.bytes / (r.t.median_us * 1e-6) / copy_bw : 0.0,
                     bf16_peak > 0 ? 100.0 * r.flops / (r.t.median_us * 1e-6) / bf16_peak : 0.0,
                     r.speedup > 0 ? fmt::format("{:.2f}x", r.speedup) : std::string("n/a"));
}

std::string markdown(const std::vector<Row>& rows, double copy_bw, double bf16_peak) {
  std::string out =
      "| op | variant | problem | median µs | spread % | TFLOP/s | TB/s | % copy BW | % bf16 peak | vs baseline |\n"
      "|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  std::map<std::string, std::pair<double, int>> geo;  // family/variant -> (sum log speedup, n)
  std::vector<std::string> order;
  for (auto& r : rows) {
    out += markdown_row(r, copy_bw, bf16_peak);
    if (r.status == "ok" && r.speedup > 0) {
      std::string k = r.family + "/" + r.variant;
      if (!geo.count(k)) order.push_back(k);
      geo[k].first += std::log(r.speedup);
      geo[k].second += 1;
    }
  }
  if (!order.empty()) {
    out += "\nGeometric mean speedup over the family baseline:";
    for (auto& k : order) out += fmt::format(" {} {:.2f}x;", k, std::exp(geo[k].first / geo[k].second));
    out += "\n";
  }
  return out;
}

nlohmann::json environment_json() {
  nlohmann::json j;
  j["hopperkit_git_sha"] = kGitSha;
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  j["date"] = buf;
  if (device_count() == 0) return j;
  const DeviceInfo& d = device_info();
  j["gpu"] = {{"name", d.name}, {"uuid", d.uuid}, {"sm", d.sm()}, {"sm_count", d.sm_count},
              {"l2_bytes", d.l2_bytes}, {"global_mem_bytes", d.global_mem_bytes},
              {"max_sm_clock_mhz", d.max_sm_clock_mhz}, {"max_mem_clock_mhz", d.max_mem_clock_mhz}};
  if (auto c = current_clocks()) j["gpu"]["clocks_now"] = {{"sm_mhz", c->sm_mhz}, {"mem_mhz", c->mem_mhz}};
  j["driver_version"] = d.driver_version;
  j["cuda_runtime_version"] = d.runtime_version;
  Ceilings c = measured_ceilings();
  j["ceilings"] = {{"copy_bytes_per_s", c.copy_bytes_per_s}, {"bf16_flops_per_s", c.bf16_flops_per_s},
                   {"measured_at", c.measured_at}};
  return j;
}

nlohmann::json to_json(const std::vector<Row>& rows, const BenchRequest& req) {
  nlohmann::json j = environment_json();
  j["kind"] = "hk-bench";
  j["options"] = {{"warm_l2", req.time.warm}, {"spin_us", req.time.spin_us}, {"quick", req.select.quick}, {"test_problems", req.test_problems}, {"variant", req.variant_glob}};
  auto& arr = j["rows"] = nlohmann::json::array();
  for (auto& r : rows) {
    nlohmann::json x = {{"op", r.family}, {"variant", r.variant}, {"problem", r.key}, {"status", r.status},
                        {"baseline", r.is_baseline}, {"flops", r.flops}, {"bytes", r.bytes},
                        {"host_s", {{"setup", r.setup_s}, {"check", r.check_s}, {"time", r.time_s}}}};
    if (r.status == "ok") {
      x["median_us"] = r.t.median_us;
      x["min_us"] = r.t.min_us;
      x["p25_us"] = r.t.p25_us;
      x["p75_us"] = r.t.p75_us;
      x["samples"] = r.t.samples;
      x["tflops"] = r.tflops();
      x["tbps"] = r.tbps();
      if (r.speedup > 0) x["speedup_vs_baseline"] = r.speedup;
    }
    arr.push_back(x);
  }
  return j;
}

}  // namespace hk::bench
